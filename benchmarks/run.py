"""Measure sotakg against its baselines on a synthetic anthology, side by side in one run.

Every measurement runs a fresh child process (so "cold" includes interpreter start and store open, as a
curator or CI sees it), several times; the table shows the median wall time and the peak resident memory
of the child (``os.wait4``'s ``ru_maxrss``). Slow measurements stop repeating once they have used their
time budget, and the table says how many runs each median is of.

Measured today: ``sotakg build`` (cold, forced rebuild, rebuild with no data change, after a one-record
edit), ``sotakg export rdf``, the compiled SPARQL validation engine (as a library call and as ``sotakg
validate``, also after a one-record edit), a reference query, and the baselines: ``oxigraph load`` /
``oxigraph query`` on the same triples, and the other SHACL engines — pySHACL, pyshacl-turbo and pyrudof —
each given the same shapes and the same N-Triples file (one that is not installed is skipped, and the
section says so); their findings are compared with the SPARQL engine's. Lookup queries are also run on
the shipped ``data/`` against ``oxigraph query`` on its export.

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

from benchmarks.environment import child_env

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


#: The lookups the issue's cold-query targets speak of.
LOOKUPS = ("practices-citing", "papers-of", "rejection-of")

#: pyrudof has no command line: this runs it on (data N-Triples, shapes N-Triples, report N-Triples).
_PYRUDOF = """
import sys
import pyrudof
rudof = pyrudof.Rudof(pyrudof.RudofConfig())
rudof.read_data(sys.argv[1], format=pyrudof.RDFFormat.NTriples)
rudof.read_shacl(sys.argv[2], format=pyrudof.ShaclFormat.NTriples)
rudof.validate_shacl()
report = rudof.serialize_shacl_validation_results(format=pyrudof.ResultShaclValidationFormat.NTriples)
open(sys.argv[3], "w", encoding="utf-8").write(report)
"""


@dataclass(frozen=True)
class OtherEngine:
    """A SHACL engine to compare with: how to run it on (data.nt, shapes.nt) writing an N-Triples report."""

    name: str
    install: str

    @property
    def label(self) -> str:
        return f"{self.name} (baseline)"

    def installed(self) -> bool:
        import importlib.util

        if self.name == "pyrudof":
            return importlib.util.find_spec("pyrudof") is not None
        return shutil.which(self.name) is not None

    def argv(self, data: Path, shapes: Path, report: Path) -> list[str]:
        if self.name == "pyrudof":
            return [sys.executable, "-c", _PYRUDOF, str(data), str(shapes), str(report)]
        # pySHACL and pyshacl-turbo share pySHACL's command line.
        return [self.name, "-s", str(shapes), "-sf", "nt", "-df", "nt", "-f", "nt", "-o", str(report), str(data)]


OTHER_ENGINES = (
    OtherEngine("pyshacl", "pip install pyshacl"),
    OtherEngine("pyshacl-turbo", "pip install pyshacl-turbo"),
    OtherEngine("pyrudof", "pip install pyrudof"),
)


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


def oxigraph_query_command(store: Path, query_file: Path) -> list[str]:
    """The oxigraph CLI asking ``query_file`` of ``store``, with TSV results: the baseline of a query."""
    return ["oxigraph", "query", "--location", str(store), "--query-file", str(query_file), "--results-format", "tsv"]


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
        self.env = child_env()
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


def forget_findings(store: Path) -> None:
    """Remove the findings a validation stored with the current generation, so that the next
    `sotakg validate` runs in full (without this, every run after the first reuses them)."""
    for path in store.resolve().glob("carry-findings-*"):
        path.unlink()


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
    site = scratch / "site"
    m(
        "sotakg export site (new folder)",
        sotakg(data, store, "export", "site", str(site)),
        scratch,
        setup=lambda: shutil.rmtree(site, ignore_errors=True),
    )
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
        note="the engine alone: a new process opens the store, compiles the shapes and validates",
    )
    top = cli_help(runner)
    commands = commands_of(top)
    if "validate" in commands:  # HOOK: sotakg validate, per engine
        engines_help = cli_help(runner, "validate")
        found = re.search(r"--engine\s+\[([a-z|_-]+)\]", engines_help)
        for engine in found.group(1).split("|") if found else [None]:
            if engine == "pyshacl" and not pyshacl:
                continue  # --no-pyshacl: pySHACL alone takes minutes at scale
            label = f"sotakg validate --engine {engine}" if engine else "sotakg validate"
            extra = ["--engine", engine] if engine else []
            m(
                label,
                sotakg(data, store, "validate", *extra),
                scratch,
                ok=(0, 1),
                setup=lambda: forget_findings(store),
                note="a full validation: the findings stored by the run before are removed first",
            )
    findings: dict[str, str] = {}
    skipped: list[str] = []
    for other in OTHER_ENGINES:
        if other.name == "pyshacl" and not pyshacl:
            skipped.append(f"{other.name}: not run (--no-pyshacl)")
            continue
        if not other.installed():
            skipped.append(f"{other.name}: not installed ({other.install}), skipped")
            continue
        report_nt = scratch / f"{other.name}-report.nt"
        measured = m(other.label, other.argv(nt, shapes_nt, report_nt), scratch, ok=(0, 1), runs=3)
        if measured.times and report_nt.exists():
            findings[other.name] = compare_findings(data, store, shapes_nt, report_nt, other.name)
            print(f"  findings of {other.name}: {findings[other.name]}", flush=True)

    edited = one_record_edit(data)
    if "validate" in commands:
        # The edit rows time the incremental path: findings stored for the current generation by the
        # default engine (the rows above may end with another engine's run, or with none stored).
        subprocess.run(sotakg(data, store, "validate"), env=runner.env, cwd=scratch, capture_output=True)
    m(
        "sotakg build (one-record edit)",
        sotakg(data, store, "build"),
        scratch,
        setup=edited,
        note="one practice's title changed before each run (alternating), then a cold `sotakg build`",
    )
    if "validate" in commands:
        m(
            "sotakg validate (one-record edit)",
            sotakg(data, store, "validate"),
            scratch,
            setup=edited,
            ok=(0, 1),
            note="one practice's title changed before each run, then a cold `sotakg validate` (it rebuilds)",
        )
    edited(restore=True)
    subprocess.run(sotakg(data, store, "build"), check=True, env=runner.env, cwd=scratch, capture_output=True)

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
            oxigraph_query_command(ox_store, query_file),
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
    if "query" in commands:
        shipped_lookups(runner, scratch)
    return {
        "triples": triples,
        "shapes": shapes_source,
        "data": data,
        "load_before": load_before,
        "findings": findings,
        "skipped": skipped,
    }


class one_record_edit:
    """A setup step that changes one practice's title, back and forth, so that every run sees an edit."""

    def __init__(self, data: Path):
        self.path = sorted((data / "practices").glob("*.yaml"))[0]
        self.original = self.path.read_text(encoding="utf-8")
        self.flip = False

    def __call__(self, restore: bool = False) -> None:
        self.flip = not self.flip and not restore
        text = self.original
        if self.flip:
            text = re.sub(r"^title: (.*)$", r"title: \1 (edited)", text, count=1, flags=re.MULTILINE)
        self.path.write_text(text, encoding="utf-8")


def shipped_lookups(runner: Runner, scratch: Path) -> None:
    """The lookup queries cold on the shipped data/, against `oxigraph query` on its export."""
    from sotakg.query.canned import bind_parameters, find_canned
    from sotakg.query.remote import with_values

    folder = scratch / "shipped"
    shutil.copytree(REPO / "data", folder / "data")
    store, nt, ox_store = folder / "store", folder / "shipped.nt", folder / "oxigraph-cli"
    subprocess.run(sotakg(folder / "data", store, "export", "rdf", "-o", str(nt)), check=True, env=runner.env)
    subprocess.run(
        ["oxigraph", "load", "--location", str(ox_store), "--file", str(nt)], check=True, capture_output=True
    )
    for name in LOOKUPS:
        canned_query = find_canned(name)
        raw = {p.name: p.example for p in canned_query.params}
        query_file = folder / f"query-{name}.rq"
        query_file.write_text(with_prefixes(with_values(canned_query.text, bind_parameters(canned_query, raw))))
        runner.measure(
            f"oxigraph query {name} (shipped data)",
            oxigraph_query_command(ox_store, query_file),
            folder,
        )
        params = [arg for p in canned_query.params for arg in ("-p", p.usage())]
        runner.measure(
            f"sotakg query {name} (cold, shipped data)",
            sotakg(folder / "data", store, "query", name, *params),
            folder,
        )


def compare_findings(data: Path, store_path: Path, shapes: Path, report: Path, other: str = "pyshacl") -> str:
    """Whether the SPARQL engine and another engine (its N-Triples ``report``) found the same results
    (focus, path, value, component, severity, source shape when it is an IRI), told in words."""
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
        f"DIFFERENT: {len(ours - theirs)} results only from the SPARQL engine, {len(theirs - ours)} only from {other}"
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
    "sotakg build (one-record edit)": "sotakg build --force",
    "sotakg export rdf (Turtle)": "oxigraph load (N-Triples)",
    "sotakg export site (new folder)": "sotakg export rdf (Turtle)",
}
OTHER_LABELS = tuple(other.label for other in OTHER_ENGINES)


def default_validate(results: dict[str, Measurement]) -> str | None:
    """The row of `sotakg validate` with the default engine (or, without the command, the library call)."""
    for name in ("sotakg validate --engine sparql", "sotakg validate", "SPARQL engine validate (library, cold)"):
        if name in results and results[name].median is not None:
            return name
    return None


def baseline_of(name: str, results: dict[str, Measurement] | None = None) -> list[str]:
    if name in BASELINES:
        return [BASELINES[name]]
    if name == "sotakg validate (one-record edit)":
        full = default_validate(results or {})
        return [full] if full else []
    if "validate" in name:
        return [*OTHER_LABELS, "oxigraph load (N-Triples)"]
    match = re.match(r"(?:sotakg|python) query (\S+) \(cold(, shipped data)?\)", name)
    if match:
        return [f"oxigraph query {match.group(1)}" + (" (shipped data)" if match.group(2) else "")]
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
        for baseline in baseline_of(name, results):
            ratio = _ratio(results, name, baseline)
            if ratio is not None and baseline in OTHER_LABELS:
                other = baseline.removesuffix(" (baseline)")
                ratios.append(f"{1 / ratio:.1f}× faster than {other}" if ratio < 1 else f"{ratio:.2f}× {other}")
            elif ratio is not None:
                ratios.append(f"{ratio:.2f}× {baseline}")
        peak = f"{result.peak_kb / 1024:.0f}" if result.peak_kb else "—"
        lines.append(f"| {name} | {result.median:.3f} | {len(result.times)} | {peak} | {'; '.join(ratios)} |")
    return "\n".join(lines)


def target_checks(scale: float, results: dict[str, Measurement], findings: dict[str, str] | None = None) -> list[str]:
    """The issue's targets (#17), each with this run's figures; a target set at another scale says so."""
    checks: list[str] = []
    findings = findings or {}

    def median(name: str) -> float | None:
        result = results.get(name)
        return result.median if result else None

    def verdict(ok: bool) -> str:
        return "met" if ok else "NOT met"

    def at(target_scale: float) -> str:
        return "" if scale == target_scale else f" (the target is set at scale {target_scale:g})"

    load = "oxigraph load (N-Triples)"
    build = _ratio(results, "sotakg build (cold)", load)
    if build is not None:
        checks.append(f"- build ≤ 1.5× `oxigraph load`{at(100)}: {build:.2f}× — {verdict(build <= 1.5)}.")
    validate_name = default_validate(results)
    if validate_name:
        ratio = _ratio(results, validate_name, load)
        peak = results[validate_name].peak_kb / 1024
        if ratio is not None:
            checks.append(
                f"- validate ≤ 2× `oxigraph load`, peak < 1 GB{at(100)}: {validate_name} is {ratio:.2f}×, "
                f"peak {peak:.0f} MB — {verdict(ratio <= 2 and peak < 1024)}."
            )
        others = [label for label in OTHER_LABELS if median(label) is not None]
        for label in others:
            other = label.removesuffix(" (baseline)")
            ratio = _ratio(results, label, validate_name)
            same = findings.get(other, "")
            if ratio is not None:
                speed = f"{ratio:.2f}× faster" if ratio >= 1 else f"{1 / ratio:.2f}× slower"
                checks.append(
                    f"- validate faster than {other}, same findings{at(10)}: {speed}, findings "
                    f"{same or 'not compared'} — {verdict(ratio > 1 and same.startswith('identical'))}."
                )
    for kind, full in (("build", "sotakg build --force"), ("validate", validate_name)):
        edit = median(f"sotakg {kind} (one-record edit)")
        whole = median(full) if full else None
        if edit is not None and whole:
            share = edit / whole
            checks.append(
                f"- one-record edit, `{kind}` cold ≤ 1 s and ≤ 5% of a full run{at(100)}: {edit:.3f} s, "
                f"{share:.0%} of {full} — {verdict(edit <= 1 and share <= 0.05)}."
            )
    for name in LOOKUPS:
        for suffix, where, target_scale in (("", "", 100.0), (", shipped data", " (shipped data)", scale)):
            ratio = _ratio(results, f"sotakg query {name} (cold{suffix})", f"oxigraph query {name}{where}")
            if ratio is not None:
                shown = "the shipped data" if suffix else f"scale {scale:g}"
                goal = at(target_scale) if not suffix else ""
                checks.append(
                    f"- lookup `{name}` cold ≤ 3× `oxigraph query`{goal}, on {shown}: {ratio:.2f}× — "
                    f"{verdict(ratio <= 3)}."
                )
    canned = [
        (match.group(1), results[name].median)
        for name in results
        if (match := re.fullmatch(r"sotakg query (\S+) \(cold\)", name)) and results[name].median is not None
    ]
    if canned:
        slow = [f"{q} {t:.2f} s" for q, t in canned if t is not None and t > 3]
        over = [
            f"{q} {ratio:.1f}×"
            for q, _ in canned
            if (ratio := _ratio(results, f"sotakg query {q} (cold)", f"oxigraph query {q}")) is not None and ratio > 2
        ]
        worst = max(t for _, t in canned if t is not None)
        checks.append(
            f"- every canned query ≤ 2× its `oxigraph query` time, none above 3 s{at(100)}: slowest {worst:.2f} s; "
            f"{len(over)} of {len(canned)} above 2× ({', '.join(over) or 'none'}); above 3 s: "
            f"{', '.join(slow) or 'none'} — {verdict(not slow and not over)}."
        )
    no_change = median("sotakg build (no change)")
    if no_change is not None:
        checks.append(
            f"- no-change command floor ≤ 0.2 s{at(100)}: `sotakg build` with no change {no_change:.3f} s — "
            f"{verdict(no_change <= 0.2)}."
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
    findings = info.get("findings") or {}
    assert isinstance(findings, dict)
    for other, told in findings.items():
        notes.append(f"- findings of the SPARQL engine and {other} (same shapes, same N-Triples): {told}.")
    for skipped in info.get("skipped") or []:  # type: ignore[attr-defined]
        notes.append(f"- {skipped}.")
    body = (
        header
        + table(results)
        + "\n\n"
        + "\n".join(notes)
        + "\n\nTargets:\n\n"
        + "\n".join(target_checks(scale, results, findings) or ["- none applies at this scale."])
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
        print("\n".join(target_checks(scale, runner.results, info.get("findings"))))  # type: ignore[arg-type]
