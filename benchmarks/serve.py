"""The serve benchmark: point SELECTs at 1, 8 and 64 concurrent clients over a generated store, through
`sotakg serve`'s guard and straight to its Oxigraph server, in one run.

    python -m benchmarks.serve [--scale 10] [--seconds 5] [--rounds 3] [--screening-only]

Prints requests/s, p50/p99 latency, errors and hangs per path and concurrency (the round of median
throughput of each path; errors and hangs summed over all rounds), and the guard's throughput as a
share of Oxigraph's (target: ≥ 50%, 0 errors, 0 hangs). Clients keep their
connection alive where the server allows it. First, the cost of screening a query (``check_query``)
in ms per MB of query text, median of several runs, for large queries of three shapes, against the
per-character lexer it replaced (``tests/sparql_reference.py``) in the same run (target: < 50 ms/MB).
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
from collections.abc import Callable
from pathlib import Path

CONCURRENCY = (1, 8, 64)
#: Seconds a request may take before it counts as a hang.
HANG_SECONDS = 10.0


def point_query(index: int) -> str:
    """A SELECT of one practice's title: an indexed point lookup."""
    number = 1 + index % 40
    return f"PREFIX id: <https://w3id.org/sotakg/id/> SELECT ?p ?o WHERE {{ id:SOTA-{number:03d} ?p ?o }} LIMIT 20"


#: Screening runs per query shape; the median counts.
SCREENING_RUNS = 9
#: Screening target, in ms per MB of query text.
SCREENING_TARGET = 50.0


def screening_queries() -> dict[str, str]:
    """Large queries (40-90 KB, under the check's limits, too long for its cache) of three shapes."""
    return {
        "triple patterns, prefixed names": "PREFIX ex: <http://example.org/> SELECT * WHERE {\n"
        + "".join(f"  ?s{i} ex:p{i} ?o{i} .\n" for i in range(1990))
        + "}",
        "IRIs, tagged strings, FILTER <, comments": "SELECT * WHERE {\n"
        + "".join(f'  ?s <http://example.org/p{i}> "v{i}"@en . FILTER(?x{i} < {i}) # c\n' for i in range(700))
        + "}",
        "VALUES rows of IRIs and numbers": "SELECT * WHERE { ?s ?p ?o } VALUES (?a ?b) {\n"
        + "".join(f" (<http://example.org/a{i}> {i})\n" for i in range(2500))
        + "}",
    }


def hostile_queries() -> dict[str, Callable[[int], str]]:
    """Queries made to cost the check the most per byte, by size in KB: runs of ``<`` that compare
    (each one stops the lexer's batch), a syntax error after many tokens (its message is explained
    from the tokens), escapes that end a prefixed name at every other character, ``<`` after ``<``
    before one ``>`` far away (each ``<`` was read up to it), names holding keywords on one long
    prefix IRI (which was read again for each name)."""
    return {
        "comparisons, one after another": lambda kb: "ASK { FILTER(1" + " <x> 1" * (kb * 1000 // 6) + ") }",
        "comparisons before one far '>'": lambda kb: (
            "ASK { FILTER(?a" + " <?a" * (kb * 100 // 4) + ") }\n#" + "x" * (kb * 900) + ">"
        ),
        "keyword names on a long prefix": lambda kb: (
            f"PREFIX e: <http://e/{'a' * (kb * 800)}> SELECT * {{ ?s ?p "
            + ", ".join(["e:FILTERx"] * (kb * 200 // 11))
            + " }"
        ),
        "a syntax error after many tokens": lambda kb: "ASK { a:x " + "?v " * (kb * 1000 // 3) + "}",
        "broken escapes in a name": lambda kb: "ASK { a:" + "%4" * (kb * 1000 // 2) + " }",
    }


#: Sizes of the hostile queries, in KB: their cost per MB must not grow with the size.
HOSTILE_KB = (50, 400)


def screening() -> None:
    """Print the screening table: ms per MB of ``check_query`` and of the reference lexer's check."""
    from sotakg.errors import QueryRefused, QuerySyntaxError
    from sotakg.query.sparql import check_query

    try:
        from tests.sparql_reference import check_query as reference
    except ImportError:  # benchmarks run outside a checkout with tests
        reference = None

    def per_mb(check: Callable[[str], object], text: str) -> float:
        times = []
        for _ in range(SCREENING_RUNS):
            started = time.perf_counter()
            try:
                check(text)
            except (QueryRefused, QuerySyntaxError):
                pass
            times.append(time.perf_counter() - started)
        return 1000 * statistics.median(times) / (len(text.encode()) / 1e6)

    print("| query | KB | screening ms/MB | reference lexer ms/MB | target < 50 ms/MB |")
    print("|---|---|---|---|---|")
    for name, text in screening_queries().items():
        figure = per_mb(check_query, text)
        baseline = f"{per_mb(reference, text):.0f}" if reference is not None else "—"
        met = "met" if figure < SCREENING_TARGET else "NOT met"
        print(f"| {name} | {len(text.encode()) / 1000:.0f} | {figure:.0f} | {baseline} | {met} |")
    for name, make in hostile_queries().items():
        for kb in HOSTILE_KB:
            text = make(kb)
            figure = per_mb(check_query, text)
            met = "met" if figure < SCREENING_TARGET else "NOT met"
            print(f"| {name} (hostile) | {len(text.encode()) / 1000:.0f} | {figure:.0f} | — | {met} |")


def load(port: int, clients: int, seconds: float) -> dict[str, float]:
    """``clients`` threads sending point SELECTs to 127.0.0.1:``port`` for ``seconds``."""
    latencies: list[float] = []
    errors = hangs = 0
    lock = threading.Lock()
    stop = time.monotonic() + seconds

    def client(number: int) -> None:
        nonlocal errors, hangs
        connection: http.client.HTTPConnection | None = None
        sent = 0
        while time.monotonic() < stop:
            path = "/query?" + urllib.parse.urlencode({"query": point_query(number * 1000 + sent)})
            sent += 1
            started = time.monotonic()
            try:
                if connection is None:
                    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=HANG_SECONDS)
                connection.request("GET", path, headers={"Accept": "application/sparql-results+json"})
                response = connection.getresponse()
                response.read()
                ok = response.status == 200
                if response.getheader("Connection", "").lower() == "close":
                    connection.close()
                    connection = None
            except TimeoutError:
                with lock:
                    hangs += 1
                connection = None
                continue
            except (OSError, http.client.HTTPException):
                ok = False
                connection = None
            with lock:
                if ok:
                    latencies.append(time.monotonic() - started)
                else:
                    errors += 1
        if connection is not None:
            connection.close()

    threads = [threading.Thread(target=client, args=(n,)) for n in range(clients)]
    began = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(seconds + HANG_SECONDS + 5)
    elapsed = time.monotonic() - began
    ordered = sorted(latencies) or [0.0]
    return {
        "rps": len(latencies) / elapsed,
        "p50_ms": 1000 * statistics.median(ordered),
        "p99_ms": 1000 * ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))],
        "errors": errors,
        "hangs": hangs,
    }


def median_round(rounds: list[dict[str, float]]) -> dict[str, float]:
    """The round of median throughput (the lower middle one of an even number)."""
    return sorted(rounds, key=lambda figures: figures["rps"])[(len(rounds) - 1) // 2]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=10.0)
    parser.add_argument("--seconds", type=float, default=5.0, help="length of one round of load")
    parser.add_argument("--rounds", type=int, default=3, help="rounds per path and concurrency (median counts)")
    parser.add_argument("--screening-only", action="store_true", help="only the screening table")
    options = parser.parse_args(argv)
    # This checkout's sotakg, not whichever one is installed: the serve process below gets it too.
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))
    screening()
    if options.screening_only:
        return

    from benchmarks.environment import child_env
    from benchmarks.run import prepare_data
    from sotakg.graph.build import build
    from sotakg.graph.open import current_database
    from sotakg.server.serve import DEFAULT_HOST, OxigraphServer, free_port

    data = prepare_data(options.scale, 1)
    with tempfile.TemporaryDirectory() as work, contextlib.ExitStack() as stack:
        store = Path(work) / "store"
        counts = build(data, store)
        port = free_port()
        environment = child_env()
        # `sotakg serve` in a process of its own, as users run it: the load here does not share its GIL.
        log = (Path(work) / "serve.log").open("w")
        served = subprocess.Popen(
            [sys.executable, "-m", "sotakg", "--data", str(data), "--store", str(store), "serve", "--port", str(port)],
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
            env=environment,
        )
        try:
            assert served.stdout is not None
            for line in served.stdout:  # bounded by the server's own start-up limit
                if line.startswith("Press Ctrl-C"):
                    break
            # `sotakg serve` runs its engine in a network of its own, out of reach: the straight path is
            # an Oxigraph server of the same kind (no --timeout-s, the same stack) on the same database.
            log_file = stack.enter_context(tempfile.TemporaryFile())
            direct = OxigraphServer(current_database(data, store), DEFAULT_HOST, free_port(), None, log=log_file)
            stack.enter_context(direct)
            direct.wait_ready()
            direct_port = direct.port
            print(
                f"scale {options.scale:g}: {counts}, {options.rounds} rounds of {options.seconds:g} s per path, "
                f"{os.cpu_count()} cores"
            )
            print("| clients | path | requests/s | p50 ms | p99 ms | errors | hangs |")
            print("|---|---|---|---|---|---|---|")
            for clients in CONCURRENCY:
                # Rounds alternate between the two paths, so a burst of load from other jobs on the
                # shared machine falls on both; the round with the median throughput counts for each.
                directs, guardeds = [], []
                for _ in range(options.rounds):
                    directs.append(load(direct_port, clients, options.seconds))
                    guardeds.append(load(port, clients, options.seconds))
                direct, guarded = median_round(directs), median_round(guardeds)
                for count in ("errors", "hangs"):
                    guarded = {**guarded, count: sum(figures[count] for figures in guardeds)}
                for name, figures in (("Oxigraph", direct), ("guard", guarded)):
                    print(
                        f"| {clients} | {name} | {figures['rps']:.0f} | {figures['p50_ms']:.1f} | "
                        f"{figures['p99_ms']:.1f} | {figures['errors']:.0f} | {figures['hangs']:.0f} |"
                    )
                share = guarded["rps"] / direct["rps"] if direct["rps"] else 0.0
                met = share >= 0.5 and guarded["errors"] == 0 and guarded["hangs"] == 0
                print(f"|   | guard/Oxigraph | {share:.0%} | | | | {'met' if met else 'NOT met'} |")
        finally:
            served.terminate()
            try:
                served.wait(15)
            except subprocess.TimeoutExpired:
                served.kill()
                served.wait()
            log.close()
            said = (Path(work) / "serve.log").read_text().strip()
            if said:  # restarts of the engine, refusals: they explain errors above
                print("sotakg serve said:\n" + said)


if __name__ == "__main__":
    main()
