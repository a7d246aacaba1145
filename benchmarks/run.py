"""Measure sotakg against its baselines on a synthetic anthology, side by side in one run.

Every measurement runs a fresh child process (so "cold" includes interpreter start and store open, as a
curator or CI sees it), several times; the table shows the median wall time and the peak resident memory
of the child (``os.wait4``'s ``ru_maxrss``). Slow measurements stop repeating once they have used their
time budget, and the table says how many runs each median is of.

Measured today: ``sotakg build`` (cold, forced rebuild, rebuild with no data change), ``sotakg export
rdf``, the compiled SPARQL validation engine (as a library call until ``sotakg validate --engine`` exists),
a reference query, and the baselines: ``oxigraph load`` / ``oxigraph query`` on the same triples, and
``pyshacl`` on the same shapes and an exported Turtle file.

HOOKS picked up automatically when they exist, without changing this file:
  * ``sotakg validate`` (found in ``sotakg --help``): one row per ``--engine`` choice, else one row.
  * canned queries (``queries/*.rq`` and a ``query`` command in ``sotakg --help``): ``sotakg query NAME``
    cold, the same query warm (in one process, store already open), and ``oxigraph query`` on it.
  * ``shapes/*.ttl``: used for validation instead of the stand-in ``benchmarks/shapes/standin.ttl``.
"""

from __future__ import annotations

import json
import os
import platform
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
BENCH = REPO / "benchmarks"
WORK = BENCH / ".work"
RESULTS = BENCH / "RESULTS.md"
STANDIN_SHAPES = BENCH / "shapes" / "standin.ttl"

#: A query every sotakg graph can answer; the reference for cold and warm query cost until canned ones exist.
REFERENCE_QUERY = """PREFIX sota: <https://w3id.org/sotakg/ontology#>
SELECT ?topic ?status (COUNT(?practice) AS ?practices) WHERE {
  ?practice a sota:Practice ; sota:filedUnder ?topic ; sota:status ?status .
} GROUP BY ?topic ?status ORDER BY ?topic ?status
"""


# ------------------------------------------------------------------------------------ measuring


@dataclass
class Measurement:
    name: str
    times: list[float] = field(default_factory=list)
    peak_kb: int = 0
    error: str | None = None
    note: str = ""

    @property
    def median(self) -> float | None:
        return statistics.median(self.times) if self.times else None


TIME = Path("/usr/bin/time")


def _run_once(argv: list[str], env: dict[str, str], cwd: Path, timeout: float) -> tuple[float, int, int, str]:
    """Run ``argv``; return (seconds, exit code, peak RSS in KiB, the end of its standard error).

    Peak memory comes from GNU time, a small process between the runner and the command: Linux keeps
    ``ru_maxrss`` across fork and exec, so a command started straight from this (larger) process would
    report at least this process's own peak. Without /usr/bin/time, ``os.wait4`` is used (an upper bound)."""
    with tempfile.TemporaryFile() as errors, tempfile.NamedTemporaryFile("r") as usage_file:
        command = [str(TIME), "-f", "%M", "-o", usage_file.name, *argv] if TIME.exists() else argv
        started = time.perf_counter()
        process = subprocess.Popen(
            command, stdout=subprocess.DEVNULL, stderr=errors, env=env, cwd=cwd, start_new_session=True
        )
        # A timeout kills the whole session: GNU time and the command under it.
        timer = threading.Timer(timeout, lambda: os.killpg(process.pid, signal.SIGKILL))
        timer.start()
        try:
            _pid, status, usage = os.wait4(process.pid, 0)
        finally:
            timer.cancel()
        seconds = time.perf_counter() - started
        process.returncode = os.waitstatus_to_exitcode(status)  # reaped here, so Popen must not wait
        errors.seek(0)
        tail = errors.read()[-2000:].decode("utf-8", "replace")
        peak = usage.ru_maxrss
        if TIME.exists():
            lines = usage_file.read().split()
            peak = int(lines[-1]) if lines and lines[-1].isdigit() else 0
    if process.returncode == -signal.SIGKILL:
        tail = f"killed after the {timeout:.0f} s timeout"
    return seconds, process.returncode, peak, tail


class Runner:
    def __init__(self, runs: int, budget: float, timeout: float, quiet: bool = False):
        self.runs = runs
        self.budget = budget
        self.timeout = timeout
        self.quiet = quiet
        self.env = dict(os.environ)
        self.env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO / "src"), os.environ.get("PYTHONPATH")]))
        self.results: dict[str, Measurement] = {}

    def measure(
        self,
        name: str,
        argv: list[str],
        cwd: Path,
        setup=None,
        ok=(0,),
        runs: int | None = None,
        note: str = "",
    ) -> Measurement:
        """Median of up to ``runs`` runs, stopping early once the time budget is spent (at least one run)."""
        measurement = Measurement(name, note=note)
        wanted = runs or self.runs
        spent = 0.0
        for _ in range(wanted):
            if setup is not None:
                setup()
            seconds, code, peak, tail = _run_once(argv, self.env, cwd, self.timeout)
            if code not in ok:
                measurement.error = f"exit {code}: {tail.strip().splitlines()[-1] if tail.strip() else ''}"
                break
            measurement.times.append(seconds)
            measurement.peak_kb = max(measurement.peak_kb, peak)
            spent += seconds
            if spent + seconds > self.budget:
                break
        self.results[name] = measurement
        if not self.quiet:
            shown = f"{measurement.median:.3f} s" if measurement.median is not None else measurement.error
            print(f"  {name:<44} {shown}  ({len(measurement.times)} runs)", flush=True)
        return measurement

    def record(self, name: str, times: list[float], peak_kb: int, note: str = "") -> None:
        self.results[name] = Measurement(name, times, peak_kb, note=note)
        if not self.quiet:
            print(f"  {name:<44} {statistics.median(times):.3f} s  ({len(times)} runs)", flush=True)


# ------------------------------------------------------------------------------------- helpers


def sotakg(data: Path, store: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "sotakg", "--data", str(data), "--store", str(store), *args]


def remove_store(store: Path) -> None:
    for path in store.parent.glob(store.name + "*"):
        if path.is_symlink() or path.is_file():
            path.unlink()
        else:
            shutil.rmtree(path, ignore_errors=True)


def cli_help(runner: Runner, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "sotakg", *args, "--help"],
        capture_output=True,
        text=True,
        env=runner.env,
        cwd=REPO,
    )
    return done.stdout if done.returncode == 0 else ""


def commands_of(help_text: str) -> set[str]:
    """Command names listed in a click group's help."""
    section = help_text.split("Commands:", 1)[1] if "Commands:" in help_text else ""
    return {match.group(1) for match in re.finditer(r"^\s{2}([a-z][a-z0-9-]*)\s", section, re.MULTILINE)}


def shapes_files() -> tuple[list[Path], str]:
    shipped = sorted((REPO / "shapes").glob("*.ttl")) if (REPO / "shapes").is_dir() else []
    if shipped:
        return shipped, "shapes/*.ttl (the shipped filing rules)"
    return [STANDIN_SHAPES], "benchmarks/shapes/standin.ttl (stand-in: the repository has no shapes/ yet)"


def merged_shapes(files: list[Path], out: Path) -> Path:
    """One N-Triples file of all shapes, for pyshacl's single -s argument."""
    from pyoxigraph import Quad, RdfFormat, parse, serialize

    triples: list[Quad] = []
    for file in files:
        triples.extend(parse(path=str(file), format=RdfFormat.TURTLE, base_iri=file.resolve().as_uri()))
    out.write_bytes(serialize(triples, format=RdfFormat.N_TRIPLES) or b"")
    return out


def prepare_data(scale: float, seed: int) -> Path:
    """The generated data folder for ``scale``, made once and reused while the generator is unchanged."""
    import hashlib

    sys.path.insert(0, str(REPO))
    from benchmarks.generate import generate

    folder = WORK / f"scale-{scale:g}-seed-{seed}"
    data = folder / "data"
    stamp = folder / "stamp"
    generator_hash = hashlib.sha256((BENCH / "generate.py").read_bytes()).hexdigest()
    if not (stamp.exists() and stamp.read_text() == generator_hash and data.is_dir()):
        started = time.perf_counter()
        counts = generate(data, scale, seed)
        stamp.write_text(generator_hash)
        print(f"  generated {counts} in {time.perf_counter() - started:.1f} s", flush=True)
    return data


_VALIDATE_SPARQL = """
import sys, time
from pathlib import Path
from sotakg.graph.open import open_graph
from sotakg.rules.shacl_compiler import compile_shapes, ShapesGraph
store = open_graph(Path(sys.argv[1]), Path(sys.argv[2]))
compiled = compile_shapes(ShapesGraph.parse(Path(sys.argv[3])))
report = compiled.validate(store)
print(len(report.results))
assert "rdflib" not in sys.modules and "pyshacl" not in sys.modules, "rdflib or pyshacl was imported"
"""

_QUERY_COLD = """
import sys
from pathlib import Path
from sotakg.graph.open import open_graph
store = open_graph(Path(sys.argv[1]), Path(sys.argv[2]))
print(len(list(store.query(Path(sys.argv[3]).read_text()))))
"""

_QUERY_WARM = """
import json, sys, time
from pathlib import Path
from sotakg.graph.open import open_graph
store = open_graph(Path(sys.argv[1]), Path(sys.argv[2]))
text = Path(sys.argv[3]).read_text()
list(store.query(text))
times = []
for _ in range(int(sys.argv[4])):
    started = time.perf_counter()
    list(store.query(text))
    times.append(time.perf_counter() - started)
print(json.dumps(times))
"""


def with_prefixes(query: str) -> str:
    sys.path.insert(0, str(REPO / "src"))
    from sotakg.graph.vocab import PREFIXES

    declared = {m.group(1) for m in re.finditer(r"PREFIX\s+([A-Za-z0-9_-]*):", query, re.IGNORECASE)}
    header = "".join(f"PREFIX {p}: <{ns}>\n" for p, ns in PREFIXES.items() if p not in declared)
    return header + query


# ------------------------------------------------------------------------------------- the run


def run_scale(scale: float, seed: int, runner: Runner, pyshacl: bool = True) -> dict[str, object]:
    print(f"scale {scale:g}:", flush=True)
    load_before = os.getloadavg()[0]
    data = prepare_data(scale, seed)
    folder = data.parent
    scratch = folder / "run"
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir()
    store = scratch / ".sotakg" / "store"
    ox_store = scratch / "oxigraph-cli"
    nt, ttl = scratch / "anthology.nt", scratch / "anthology.ttl"
    m = runner.measure

    m("sotakg build (cold)", sotakg(data, store, "build"), scratch, setup=lambda: remove_store(store))
    m("sotakg build --force", sotakg(data, store, "build", "--force"), scratch)
    m("sotakg build (no change)", sotakg(data, store, "build"), scratch)
    m("sotakg export rdf (Turtle)", sotakg(data, store, "export", "rdf", "-o", str(ttl)), scratch)
    subprocess.run(sotakg(data, store, "export", "rdf", "-o", str(nt)), check=True, env=runner.env, cwd=scratch)
    triples = sum(1 for _ in nt.open("rb"))

    m(
        "oxigraph load (N-Triples)",
        ["oxigraph", "load", "--location", str(ox_store), "--file", str(nt)],
        scratch,
        setup=lambda: shutil.rmtree(ox_store, ignore_errors=True),
    )

    m(
        "python -c 'import pyoxigraph' (floor)",
        [sys.executable, "-c", "import pyoxigraph"],
        scratch,
        note="what any Python command pays before it does anything: interpreter start and pyoxigraph import",
    )

    files, shapes_source = shapes_files()
    shapes_nt = merged_shapes(files, scratch / "shapes.nt")
    m(
        "SPARQL engine validate (library, cold)",
        [sys.executable, "-c", _VALIDATE_SPARQL, str(data), str(store), str(shapes_nt)],
        scratch,
        note="until `sotakg validate --engine` exists: a new process opens the store, compiles, validates",
    )
    top = cli_help(runner)
    commands = commands_of(top)
    if "validate" in commands:  # HOOK: sotakg validate, per engine
        engines_help = cli_help(runner, "validate")
        found = re.search(r"--engine\s+\[([a-z|_-]+)\]", engines_help)
        for engine in found.group(1).split("|") if found else [None]:
            label = f"sotakg validate --engine {engine}" if engine else "sotakg validate"
            extra = ["--engine", engine] if engine else []
            m(label, sotakg(data, store, "validate", *extra), scratch, ok=(0, 1))
    findings = ""
    if pyshacl:
        report_nt = scratch / "pyshacl-report.nt"
        measured = m(
            "pyshacl (baseline)",
            [
                "pyshacl",
                "-s",
                str(shapes_nt),
                "-sf",
                "nt",
                "-df",
                "turtle",
                "-f",
                "nt",
                "-o",
                str(report_nt),
                str(ttl),
            ],
            scratch,
            ok=(0, 1),
            runs=3,
        )
        if measured.times:
            findings = compare_findings(data, store, shapes_nt, report_nt)
            print(f"  findings: {findings}", flush=True)

    queries: list[tuple[str, str, bool]] = [("reference", REFERENCE_QUERY, False)]
    query_dir = REPO / "queries"
    examples: dict[str, list[str]] = {}
    if "query" in commands and query_dir.is_dir():  # HOOK: canned queries
        from sotakg.query.canned import bind_parameters, read_canned
        from sotakg.query.remote import with_values

        for path in sorted(query_dir.glob("*.rq")):
            canned_query = read_canned(path)
            raw = {p.name: p.example for p in canned_query.params}
            examples[path.stem] = [arg for p in canned_query.params for arg in ("-p", p.usage())]
            # the baseline runs the same question: the example values bound as a VALUES block
            bound = with_values(canned_query.text, bind_parameters(canned_query, raw)) if raw else canned_query.text
            queries.append((path.stem, bound, True))
    for name, text, canned in queries:
        query_file = scratch / f"query-{name}.rq"
        query_file.write_text(with_prefixes(text))
        m(
            f"oxigraph query {name}",
            [
                "oxigraph",
                "query",
                "--location",
                str(ox_store),
                "--query-file",
                str(query_file),
                "--results-format",
                "tsv",
            ],
            scratch,
        )
        if canned:
            m(f"sotakg query {name} (cold)", sotakg(data, store, "query", name, *examples[name]), scratch)
        else:
            m(
                f"python query {name} (cold)",
                [sys.executable, "-c", _QUERY_COLD, str(data), str(store), str(query_file)],
                scratch,
                note="floor of a `sotakg query`: a new process, sotakg.graph.open.open_graph, the query",
            )
        warm = subprocess.run(
            [sys.executable, "-c", _QUERY_WARM, str(data), str(store), str(query_file), "20"],
            capture_output=True,
            text=True,
            env=runner.env,
            cwd=scratch,
            check=True,
        )
        runner.record(
            f"query {name} (warm, in process)",
            json.loads(warm.stdout),
            0,
            note="store already open; the query alone",
        )
    return {
        "triples": triples,
        "shapes": shapes_source,
        "data": data,
        "load_before": load_before,
        "findings": findings,
    }


def compare_findings(data: Path, store_path: Path, shapes: Path, report: Path) -> str:
    """Whether the SPARQL engine and pySHACL found the same results (focus, path, value, component,
    severity, source shape when it is an IRI), told in words."""
    sys.path.insert(0, str(REPO / "src"))
    from pyoxigraph import BlankNode, NamedNode, RdfFormat, Store

    from sotakg.graph.open import open_graph
    from sotakg.rules.shacl_compiler import ShapesGraph, compile_shapes

    sh = "http://www.w3.org/ns/shacl#"

    def plain(term):
        return None if term is None or isinstance(term, BlankNode) else term

    ours = {
        (
            r.focus,
            r.path if r.path is None or not r.path.startswith(("(", "^", "<")) else "complex",
            plain(r.value),
            r.component,
            r.severity,
            None if r.source_shape.startswith("_:") else r.source_shape,
        )
        for r in compile_shapes(ShapesGraph.parse(shapes)).validate(open_graph(data, store_path)).results
    }
    graph = Store()
    graph.load(path=str(report), format=RdfFormat.N_TRIPLES)
    graph_view = ShapesGraph.from_store(graph)
    theirs = set()
    for node in graph_view.subjects_with(sh + "result"):
        for result in graph_view.objects(node, sh + "result"):

            def one(name: str, result=result):
                values = graph_view.objects(result, sh + name)
                return values[0] if values else None

            path, shape = one("resultPath"), one("sourceShape")
            theirs.add(
                (
                    one("focusNode"),
                    None if path is None else path.value if isinstance(path, NamedNode) else "complex",
                    plain(one("value")),
                    one("sourceConstraintComponent").value,
                    one("resultSeverity").value,
                    shape.value if isinstance(shape, NamedNode) else None,
                )
            )
    if ours == theirs:
        return f"identical ({len(ours)} results from each engine)"
    return (
        f"DIFFERENT: {len(ours - theirs)} results only from the SPARQL engine, {len(theirs - ours)} only from pySHACL"
    )


# ------------------------------------------------------------------------------------ reporting


def _ratio(results: dict[str, Measurement], name: str, baseline: str) -> float | None:
    a, b = results.get(name), results.get(baseline)
    if a is None or b is None or a.median is None or b.median is None or b.median == 0:
        return None
    return a.median / b.median


BASELINES = {
    "sotakg build (cold)": "oxigraph load (N-Triples)",
    "sotakg build --force": "oxigraph load (N-Triples)",
    "sotakg build (no change)": "oxigraph load (N-Triples)",
    "sotakg export rdf (Turtle)": "oxigraph load (N-Triples)",
}


def baseline_of(name: str) -> list[str]:
    if name in BASELINES:
        return [BASELINES[name]]
    if "validate" in name:
        return ["pyshacl (baseline)", "oxigraph load (N-Triples)"]
    match = re.match(r"(?:sotakg|python) query (\S+) \(cold\)", name)
    if match:
        return [f"oxigraph query {match.group(1)}"]
    return []


def table(results: dict[str, Measurement]) -> str:
    lines = [
        "| measurement | median s | runs | peak RSS MB | ratio to baseline |",
        "|---|---:|---:|---:|---|",
    ]
    for name, result in results.items():
        if result.median is None:
            lines.append(f"| {name} | — | 0 | — | {result.error} |")
            continue
        ratios = []
        for baseline in baseline_of(name):
            ratio = _ratio(results, name, baseline)
            if ratio is not None and ratio < 1 and baseline == "pyshacl (baseline)":
                ratios.append(f"{1 / ratio:.1f}× faster than pyshacl")
            elif ratio is not None:
                ratios.append(f"{ratio:.2f}× {baseline}")
        peak = f"{result.peak_kb / 1024:.0f}" if result.peak_kb else "—"
        lines.append(f"| {name} | {result.median:.3f} | {len(result.times)} | {peak} | {'; '.join(ratios)} |")
    return "\n".join(lines)


def target_checks(scale: float, results: dict[str, Measurement]) -> list[str]:
    """The issue's targets that this scale can speak to, each with the figures."""
    checks = []

    def median(name: str) -> float | None:
        result = results.get(name)
        return result.median if result else None

    validate_names = [n for n in results if "validate" in n and results[n].median is not None]
    default_validate = next((n for n in validate_names if n.startswith("sotakg validate")), None)
    validate_name = default_validate or next(iter(validate_names), None)
    no_change = median("sotakg build (no change)")
    if no_change is not None:
        checks.append(
            f"- rebuild with no data change ≤ 0.3 s: {no_change:.3f} s — {'met' if no_change <= 0.3 else 'NOT met'}."
        )
    if scale == 1 and validate_name:
        ratio = _ratio(results, validate_name, "oxigraph load (N-Triples)")
        if ratio is not None:
            checks.append(
                f"- validate cold at scale 1 ≤ 1.5× `oxigraph load`: {validate_name} is {ratio:.2f}× "
                f"— {'met' if ratio <= 1.5 else 'NOT met'}."
            )
    if scale == 1:
        for name in results:
            match = re.match(r"(sotakg|python) query (\S+) \(cold\)", name)
            if match:
                ratio = _ratio(results, name, f"oxigraph query {match.group(2)}")
                if ratio is not None:
                    what = "" if match.group(1) == "sotakg" else " (proxy: no `sotakg query` yet)"
                    checks.append(
                        f"- query cold at scale 1 ≤ 3× `oxigraph query`: {name}{what} is {ratio:.2f}× "
                        f"— {'met' if ratio <= 3 else 'NOT met'}."
                    )
    if scale == 100:
        ratio = _ratio(results, "sotakg build --force", "oxigraph load (N-Triples)")
        if ratio is not None:
            checks.append(
                f"- build at scale 100 ≤ 2× `oxigraph load`: {ratio:.2f}× — {'met' if ratio <= 2 else 'NOT met'}."
            )
    if validate_name and "pyshacl (baseline)" in results:
        ratio = _ratio(results, "pyshacl (baseline)", validate_name)
        peak = results[validate_name].peak_kb / 1024
        if ratio is not None:
            goal = " (the target is set at scale 100)" if scale != 100 else ""
            checks.append(
                f"- validate ≥ 10× faster than pySHACL{goal}: {validate_name} is {ratio:.1f}× faster, "
                f"peak {peak:.0f} MB (target < 1 GB) — {'met' if ratio >= 10 and peak < 1024 else 'NOT met'}."
            )
    return checks


def write_results(scale: float, info: dict[str, object], results: dict[str, Measurement], seconds: float) -> str:
    import pyoxigraph

    header = (
        f"### Scale {scale:g}\n\n"
        f"{info['triples']} triples; shapes: {info['shapes']}. Measured {time.strftime('%Y-%m-%d')} on "
        f"{os.cpu_count()} CPUs, Python {platform.python_version()}, pyoxigraph {pyoxigraph.__version__}; "
        f"the whole run took {seconds:.0f} s. Load average {info['load_before']:.1f} before and "
        f"{os.getloadavg()[0]:.1f} after the run: other jobs on the machine slow every row alike.\n\n"
    )
    notes = [f"- {name}: {r.note}" for name, r in results.items() if r.note]
    if info.get("findings"):
        notes.append(f"- findings of the SPARQL engine and pySHACL: {info['findings']}.")
    body = (
        header
        + table(results)
        + "\n\n"
        + "\n".join(notes)
        + "\n\nTargets:\n\n"
        + "\n".join(target_checks(scale, results) or ["- none applies at this scale."])
        + "\n"
    )
    start, end = f"<!-- scale {scale:g} start -->", f"<!-- scale {scale:g} end -->"
    text = RESULTS.read_text() if RESULTS.exists() else "# Benchmark results\n\n"
    block = f"{start}\n{body}{end}"
    if start in text and end in text:
        text = text[: text.index(start)] + block + text[text.index(end) + len(end) :]
    else:
        text = text.rstrip("\n") + "\n\n" + block + "\n"
    RESULTS.write_text(text)
    return body


def main(scale: float, seed: int, runs: int, budget: float, timeout: float, pyshacl: bool, write: bool) -> None:
    started = time.perf_counter()
    WORK.mkdir(parents=True, exist_ok=True)
    runner = Runner(runs, budget, timeout)
    info = run_scale(scale, seed, runner, pyshacl=pyshacl)
    seconds = time.perf_counter() - started
    print()
    if write:
        print(write_results(scale, info, runner.results, seconds))
        print(f"wrote {RESULTS.relative_to(REPO)}")
    else:
        print(table(runner.results))
        print("\n".join(target_checks(scale, runner.results)))
