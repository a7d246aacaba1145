"""``sotakg validate``: check the data against the filing rules in ``shapes/`` and say where to fix it.

The work is split so that any SHACL engine can run the rules and every engine reports the same way:

- an *engine* (a function in ``ENGINES``) takes the store and the shapes files and returns raw SHACL
  results (focus node, path, value, source shape, severity, message) — nothing more;
- the shared code here maps each raw result back to the YAML it came from: the focus node names the
  record (``id:SOTA-049`` is SOTA-049, ``id:SOTA-017-v2`` is SOTA-017's ``version``), the result path
  names the field, and the record keeps every field's line; the rule id is the local name of the
  result's source shape, and the message is the rule's own ``sh:message`` with its value filled in.

Data files that cannot be read at all become findings of the ``data-readable`` rule (or ``id-unique``
for an identifier used twice), and the store is not touched. Heavy imports (pyoxigraph, rdflib, pyshacl)
happen inside the functions that need them: the CLI imports this module for its list of engines.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from ..errors import DataError, Problem, UsageProblem
from ..graph import vocab as v
from ..resources import resource_dir

if TYPE_CHECKING:
    from pyoxigraph import Store

    from ..graph.store import StoreLayout
    from ..records.schema import Anthology, Record

RULES = "https://w3id.org/sotakg/shapes#"
REPORT_FIELD = RULES + "reportField"
DCTERMS_SOURCE = v.DCTERMS + "source"

SEVERITIES = ("violation", "warning", "info")
SEVERITY_OF_IRI = {v.SH + "Violation": "violation", v.SH + "Warning": "warning", v.SH + "Info": "info"}

#: The rule of data files that cannot be read (YAML syntax, encoding, duplicate key, unknown field, ...).
DATA_READABLE = "data-readable"


@dataclass(frozen=True)
class Rule:
    """One filing rule: a named shape of ``shapes/`` (or the built-in ``data-readable``)."""

    id: str
    iri: str
    severity: str
    message: str
    comment: str
    source: str
    report_field: str | None = None


BUILT_IN_RULES = (
    Rule(
        DATA_READABLE,
        RULES + DATA_READABLE,
        "violation",
        "The file cannot be read as a record: fix what the message says at the line it names.",
        "Every data file is a readable record: UTF-8 YAML, one mapping of known fields with values of the "
        "right type, no duplicate keys, tags, anchors or aliases.",
        "Filing rules: records are strict YAML",
    ),
)


@dataclass(frozen=True)
class RawResult:
    """One SHACL validation result as an engine reports it.

    ``focus`` is an IRI (or ``_:label``); ``path`` is a predicate IRI, or a SPARQL property path with
    ``<IRI>``s for anything else (``^<http://purl.org/dc/terms/replaces>``); ``value`` is an RDF term in
    N-Triples syntax; ``source_shape`` and ``severity`` are IRIs.
    """

    focus: str
    path: str | None
    value: str | None
    source_shape: str
    severity: str
    message: str | None = None


@dataclass(frozen=True)
class Finding:
    """One broken filing rule, located in the data: what to fix, where."""

    rule_id: str
    severity: str
    record: str | None
    file: str | None
    line: int | None
    message: str
    focus: str | None = None
    path: str | None = None
    value: str | None = None
    #: Against a baseline (``validate --baseline``): ``new``, ``unchanged`` or ``absent`` (fixed).
    state: str | None = None

    def location(self) -> str:
        """``file:line``, the file alone, or the focus IRI when no record stands behind the finding."""
        if self.file is None:
            return f"<{self.focus}>" if self.focus else "(graph)"
        return self.file if self.line is None else f"{self.file}:{self.line}"

    def sort_key(self) -> tuple[Any, ...]:
        return (
            self.file is None,
            self.file or "",
            self.line or 0,
            self.rule_id,
            self.record or "",
            self.message,
            self.value or "",
            self.focus or "",
        )


@dataclass
class ValidationReport:
    """What a validation found, with the rules it checked."""

    findings: list[Finding]
    rules: list[Rule]
    engine: str
    records: int = 0
    readable: bool = True
    #: The revision or folder the findings were compared with (``validate --baseline``), if any.
    baseline: str | None = None
    #: The baseline's findings this data no longer has (state ``absent``: fixed by the change).
    absent: list[Finding] = field(default_factory=list)
    counts: dict[str, int] = field(init=False)

    def __post_init__(self) -> None:
        self.counts = {severity: 0 for severity in SEVERITIES}
        for finding in self.findings:
            self.counts[finding.severity] = self.counts.get(finding.severity, 0) + 1

    @property
    def conforms(self) -> bool:
        """No violations (warnings and infos allowed)."""
        return self.counts["violation"] == 0

    def failed(self, strict: bool = False) -> bool:
        """Whether the run fails: violations, or with ``strict`` warnings too; against a baseline,
        only the new findings count, and data that cannot be read always fails (no rule ran on it,
        so nothing shows that it adds no violation)."""
        failing = {"violation", "warning"} if strict else {"violation"}
        if self.baseline is not None and self.readable:
            return any(f.severity in failing and f.state == "new" for f in self.findings)
        return not self.conforms or (strict and self.counts["warning"] > 0)

    def state_counts(self) -> dict[str, int]:
        """How many findings are new, unchanged and absent (all zero without a baseline)."""
        counts = {"new": 0, "unchanged": 0, "absent": len(self.absent)}
        for finding in self.findings:
            if finding.state in counts:
                counts[finding.state] += 1
        return counts

    def summary(self) -> str:
        """One line: counts by severity and what was checked."""
        parts = ", ".join(_plural(self.counts[s], s) for s in SEVERITIES)
        if not self.readable:
            return f"{parts}: the data cannot be read; fix the files named above and run again."
        text = f"{parts} in {_plural(self.records, 'record')} (engine {self.engine})"
        if self.baseline is not None:
            states = self.state_counts()
            text += (
                f"; against {self.baseline}: {states['new']} new, {states['unchanged']} unchanged, "
                f"{states['absent']} fixed"
            )
        return text + "."


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


# ------------------------------------------------------------------------------------ rules


def shapes_paths() -> list[Path]:
    """The shipped shapes files, in name order."""
    return sorted(resource_dir("shapes").glob("*.ttl"))


def load_rules(paths: Sequence[Path] | None = None) -> list[Rule]:
    """The rules the shapes files declare (every shape with an ``sh:severity``), in file order,
    after the built-in ``data-readable`` rule."""
    from pyoxigraph import BlankNode, Literal, NamedNode, RdfFormat, parse

    props: dict[str, dict[str, str]] = {}
    order: list[str] = []
    wanted = {
        v.SH + "severity": "severity",
        v.SH + "message": "message",
        v.RDFS + "comment": "comment",
        DCTERMS_SOURCE: "source",
        REPORT_FIELD: "report_field",
    }
    for path in paths if paths is not None else shapes_paths():
        for quad in parse(path=str(path), format=RdfFormat.TURTLE):
            subject = quad.subject
            if isinstance(subject, BlankNode) or not isinstance(subject, NamedNode):
                continue
            name = wanted.get(quad.predicate.value)
            if name is None:
                continue
            if subject.value not in props:
                props[subject.value] = {}
                order.append(subject.value)
            obj = quad.object
            props[subject.value][name] = obj.value if isinstance(obj, (Literal, NamedNode)) else str(obj)
    rules = list(BUILT_IN_RULES)
    for iri in order:
        found = props[iri]
        if "severity" not in found:
            continue
        rules.append(
            Rule(
                rule_id_of(iri),
                iri,
                SEVERITY_OF_IRI.get(found["severity"], "violation"),
                found.get("message", ""),
                found.get("comment", ""),
                found.get("source", ""),
                found.get("report_field"),
            )
        )
    return rules


def rule_id_of(shape: str) -> str:
    """A rule id from a source shape IRI: its local name (``...#practice-status`` is ``practice-status``)."""
    for mark in ("#", "/"):
        if mark in shape:
            local = shape.rsplit(mark, 1)[1]
            if local:
                return local
    return shape


def rule_table_markdown(paths: Sequence[Path] | None = None) -> str:
    """The README's rule table: rule id, what it checks, severity and source, one row per rule."""
    lines = ["| Rule | What it checks | Severity | Source |", "|---|---|---|---|"]
    for rule in load_rules(paths):
        cells = [f"`{rule.id}`", rule.comment, rule.severity, rule.source]
        lines.append("| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |")
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------------------------ engines

#: ``progress(done, total, step)``: told of each step of a long validation (a progress bar listens).
Progress = Callable[[int, int, str], None]


class Engine(Protocol):
    """An engine runs the shapes files over the store's default graph and returns the raw results; it
    may report its progress. With ``focus`` (IRIs) it may validate only those focus nodes (see
    CompiledShapes.validate); the caller keeps only their results either way."""

    def __call__(
        self,
        store: Store,
        shapes: Sequence[Path],
        progress: Progress | None = None,
        focus: Collection[str] | None = None,
    ) -> list[RawResult]: ...


#: Parsed SHACL-SPARQL queries by text, kept for the process (the texts come from the shapes files).
_PREPARED_QUERIES: dict[tuple[frozenset[str], str], Any] = {}


def pyshacl_engine(
    store: Store, shapes: Sequence[Path], progress: Progress | None = None, focus: Collection[str] | None = None
) -> list[RawResult]:
    """Run the shapes with pySHACL (the reference engine) over the store's default graph (pySHACL
    reports no progress, and validates every node: ``focus`` is not read)."""
    import pyshacl
    import rdflib
    from pyoxigraph import DefaultGraph
    from rdflib.plugins.sparql import prepareQuery

    class PreparedQueryGraph(rdflib.Graph):
        """A graph that parses each distinct query text once.

        pySHACL sends a SHACL-SPARQL constraint's text once per focus node, and parsing it is most of
        the cost (7 s instead of 0.4 s on the shipped data); the text does not change between focus
        nodes, only the bound ``$this`` does.
        """

        def query(self, query_object: Any, *args: Any, **kwargs: Any) -> Any:
            if isinstance(query_object, str):
                # pySHACL writes the PREFIX lines in no fixed order: key on them as a set.
                lines = query_object.split("\n")
                prefixes = [line for line in lines if line.startswith("PREFIX ")]
                key = (
                    frozenset(prefixes),
                    "\n".join(line for line in lines if not line.startswith("PREFIX ")),
                )
                prepared = _PREPARED_QUERIES.get(key)
                if prepared is None:
                    prepared = _PREPARED_QUERIES[key] = prepareQuery(query_object)
                query_object = prepared
            return super().query(query_object, *args, **kwargs)

    data = PreparedQueryGraph()
    data.addN(
        (_rdflib_term(q.subject), _rdflib_term(q.predicate), _rdflib_term(q.object), data)
        for q in store.quads_for_pattern(None, None, None, DefaultGraph())
    )
    shapes_graph = _shapes_graph(shapes)
    _conforms, results_graph, _text = pyshacl.validate(
        data, shacl_graph=shapes_graph, inference="none", allow_warnings=True, meta_shacl=False
    )

    sh = rdflib.Namespace(v.SH)
    raw = []
    # The report's own results: a result's sh:detail (pySHACL nests the inner shape's results under
    # a failed sh:node) is not a finding of its own, as the SPARQL engine does not report one.
    reported = {
        result
        for report in results_graph.subjects(rdflib.RDF.type, sh.ValidationReport)
        for result in results_graph.objects(report, sh.result)
    }
    for result in sorted(reported, key=str):
        focus = results_graph.value(result, sh.focusNode)
        path = results_graph.value(result, sh.resultPath)
        value = results_graph.value(result, sh.value)
        shape = results_graph.value(result, sh.sourceShape)
        severity = results_graph.value(result, sh.resultSeverity)
        messages = sorted(str(m) for m in results_graph.objects(result, sh.resultMessage))
        raw.append(
            RawResult(
                focus=_rdflib_node_text(focus),
                path=None if path is None else _rdflib_path_text(results_graph, path),
                value=None if value is None else value.n3(),
                source_shape=_rdflib_node_text(shape),
                severity=str(severity),
                message=messages[0] if messages else None,
            )
        )
    return raw


#: Parsed shapes graphs by (path, size, modification time) of their files; pySHACL only reads them.
_SHAPES_GRAPHS: dict[tuple[tuple[str, int, int], ...], Any] = {}


def _shapes_graph(shapes: Sequence[Path]) -> Any:
    import rdflib

    key = tuple((str(p), p.stat().st_size, p.stat().st_mtime_ns) for p in shapes)
    graph = _SHAPES_GRAPHS.get(key)
    if graph is None:
        graph = rdflib.Graph()
        for path in shapes:
            graph.parse(str(path), format="turtle")
        _SHAPES_GRAPHS.clear()
        _SHAPES_GRAPHS[key] = graph
    return graph


def _rdflib_term(term: Any) -> Any:
    """A pyoxigraph term as rdflib's N-Triples parser would make it (xsd:string literals plain)."""
    import rdflib
    from pyoxigraph import BlankNode, NamedNode

    if isinstance(term, NamedNode):
        return rdflib.URIRef(term.value)
    if isinstance(term, BlankNode):
        return rdflib.BNode(term.value)
    if term.language:
        return rdflib.Literal(term.value, lang=term.language)
    if term.datatype.value == v.XSD_STRING:
        return rdflib.Literal(term.value)
    return rdflib.Literal(term.value, datatype=rdflib.URIRef(term.datatype.value))


def _rdflib_node_text(node: Any) -> str:
    import rdflib

    if isinstance(node, rdflib.BNode):
        return f"_:{node}"
    return str(node)


def _rdflib_path_text(graph: Any, node: Any) -> str:
    """A SHACL path as a predicate IRI, or in SPARQL property path syntax when it is not one."""
    import rdflib
    from rdflib.collection import Collection

    sh = rdflib.Namespace(v.SH)

    def text(n: Any) -> str:
        if isinstance(n, rdflib.URIRef):
            return f"<{n}>"
        if (graph.value(n, rdflib.RDF.first)) is not None:
            return "(" + "/".join(text(item) for item in Collection(graph, n)) + ")"
        for prop, template in (
            (sh.inversePath, "^{}"),
            (sh.zeroOrMorePath, "{}*"),
            (sh.oneOrMorePath, "{}+"),
            (sh.zeroOrOnePath, "{}?"),
        ):
            inner = graph.value(n, prop)
            if inner is not None:
                return template.format(text(inner))
        alternatives = graph.value(n, sh.alternativePath)
        if alternatives is not None:
            return "(" + "|".join(text(item) for item in Collection(graph, alternatives)) + ")"
        return f"_:{n}"

    if isinstance(node, rdflib.URIRef):
        return str(node)
    return text(node)


#: Compiled shapes by (path, size, modification time) of their files.
_COMPILED: dict[tuple[tuple[str, int, int], ...], Any] = {}


def sparql_engine(
    store: Store, shapes: Sequence[Path], progress: Progress | None = None, focus: Collection[str] | None = None
) -> list[RawResult]:
    """The shapes compiled to SPARQL and run on the store itself, one query per constraint over all
    focus nodes, or over the IRIs of ``focus`` only (sotakg.shacl_compiler). A shape the compiler
    does not support is never skipped: the whole validation falls back to pySHACL, saying so on
    standard error."""
    from pyoxigraph import NamedNode

    from ..errors import UnsupportedShape
    from .shacl_compiler import compile_shapes

    key = tuple((str(p), p.stat().st_size, p.stat().st_mtime_ns) for p in shapes)
    compiled = _COMPILED.get(key)
    if compiled is None:
        from pyoxigraph import RdfFormat
        from pyoxigraph import Store as MemoryStore

        graph = MemoryStore()
        for path in shapes:  # each file parsed on its own: blank node labels stay local to it
            graph.load(path=str(path), format=RdfFormat.TURTLE)
        try:
            compiled = compile_shapes(graph)
        except UnsupportedShape as error:
            print(f"warning: the sparql engine cannot run these shapes ({error}); using pyshacl", file=sys.stderr)
            return pyshacl_engine(store, shapes, progress)
        _COMPILED.clear()
        _COMPILED[key] = compiled
    focus_nodes = None if focus is None else [NamedNode(iri) for iri in focus]
    return [
        RawResult(
            focus=_oxigraph_node_text(result.focus),
            path=result.path,
            value=None if result.value is None else str(result.value),
            source_shape=result.root_shape if result.source_shape.startswith("_:") else result.source_shape,
            severity=result.severity,
            message=sorted(result.messages)[0] if result.messages else None,
        )
        for result in compiled.validate(store, progress, focus_nodes).results
    ]


def _oxigraph_node_text(node: Any) -> str:
    from pyoxigraph import BlankNode

    return f"_:{node.value}" if isinstance(node, BlankNode) else str(node.value)


#: The engines ``validate`` can run, by name. Adding one is one line here.
ENGINES: dict[str, Engine] = {
    "sparql": sparql_engine,
    "pyshacl": pyshacl_engine,
}
DEFAULT_ENGINE = "sparql"


def engine_named(name: str) -> Engine:
    """The engine called ``name``; UsageProblem naming the known ones otherwise."""
    try:
        return ENGINES[name]
    except KeyError:
        raise UsageProblem(f"unknown validation engine {name!r}; use one of: {', '.join(ENGINES)}") from None


# ------------------------------------------------------------------------------------ validating


def validate(
    data_dir: Path,
    store_path: Path,
    engine: str = DEFAULT_ENGINE,
    shapes: Sequence[Path] | None = None,
    endpoint: str | None = None,
    graph: str | None = None,
    timeout: float = 30.0,
    method: str = "auto",
    progress: Progress | None = None,
) -> ValidationReport:
    """Validate the data folder against the filing rules, building the store first if it is stale.

    Data files that cannot be read are reported as ``data-readable`` findings (the store is left
    alone); a missing data folder raises DataFolderMissing (a UsageProblem). With ``endpoint``, the
    rules run over the graph published there (``graph`` names a named graph; ``method`` says how the
    query travels, as in ``remote.RemoteBackend``) instead of the embedded store; the data folder
    still gives the file and line of each finding. ``progress`` hears of the reading of the data and
    of each shape the engine runs.
    """
    if graph is not None and endpoint is None:
        raise UsageProblem("--graph needs --endpoint: the embedded store keeps everything in its default graph")
    run = engine_named(engine)
    paths = list(shapes) if shapes is not None else shapes_paths()
    rules = load_rules(paths)
    if progress is not None:
        progress(0, 1, "reading the data")
    if endpoint is None:
        return _validate_embedded(data_dir, store_path, engine, run, paths, rules, progress)
    try:
        from ..records.schema import load_anthology

        anthology = load_anthology(data_dir)
    except DataError as error:
        return ValidationReport(findings_from_problems(error.problems), rules, engine, 0, readable=False)

    from pyoxigraph import RdfFormat, Store

    from ..query.remote import fetch_graph

    store = Store()
    store.load(fetch_graph(endpoint, graph, timeout=timeout, method=method), format=RdfFormat.N_TRIPLES)
    return _report(run(store, paths, progress), anthology, rules, engine)


def _validate_embedded(
    data_dir: Path,
    store_path: Path,
    engine: str,
    run: Engine,
    paths: list[Path],
    rules: list[Rule],
    progress: Progress | None = None,
) -> ValidationReport:
    """Validate the embedded store, built (incrementally) first when stale: only the focus nodes the
    changes since the last validation can affect are checked again, and findings are located with
    the lines the build kept (no YAML is parsed for an unchanged file)."""
    from ..graph.open import ensure_fresh
    from ..graph.store import StoreLayout, read_manifest
    from .incremental import SourceLocator, cache_key, modelled, results_for_generation, shown_prefix

    try:
        ensure_fresh(data_dir, store_path)  # a missing data folder: DataFolderMissing, saying how to fix it
    except DataError as error:
        return ValidationReport(findings_from_problems(error.problems), rules, engine, 0, readable=False)
    store, generation = _open_current(StoreLayout(store_path))
    raw, _checked = results_for_generation(
        store,
        generation,
        cache_key(engine, paths),
        lambda graph, focus: run(graph, paths, progress, focus),
        RawResult,
        partial=modelled(paths),
    )
    locator = SourceLocator(generation, shown_prefix(data_dir))
    try:
        locator.prefetch(result.focus for result in raw)
        findings = findings_from_results(raw, locator, rules)
    finally:
        locator.close()
    records = sum(read_manifest(generation).get("counts", {}).values())
    return ValidationReport(findings, rules, engine, records)


def _open_current(layout: StoreLayout) -> tuple[Store, Path]:
    """The current generation opened read-only, with its folder: the stored findings and the lines
    must be those of the very graph validated, even when a build swaps the store meanwhile."""

    from ..errors import StoreError
    from ..graph.store import hold_generation, open_database
    from ..records.sources import display_path

    generation = layout.current_generation()
    if generation is None:
        raise StoreError(f"no store at {display_path(layout.path)}; run 'sotakg build' first")
    generation = generation.resolve()
    try:
        hold_generation(generation)
    except OSError as error:
        raise StoreError(f"cannot open the store at {display_path(layout.path)}: {error}") from None
    return open_database(layout, generation), generation


def validate_store(
    store: Store,
    anthology: Anthology,
    engine: str = DEFAULT_ENGINE,
    shapes: Sequence[Path] | None = None,
) -> ValidationReport:
    """Validate a store already holding ``anthology`` (and whatever else it holds) against the rules."""
    run = engine_named(engine)
    paths = list(shapes) if shapes is not None else shapes_paths()
    return _report(run(store, paths, None), anthology, load_rules(paths), engine)


def _report(raw: Iterable[RawResult], anthology: Anthology, rules: list[Rule], engine: str) -> ValidationReport:
    return ValidationReport(findings_from_results(raw, anthology, rules), rules, engine, len(anthology.records))


def findings_from_problems(problems: Iterable[Problem]) -> list[Finding]:
    """Findings for data files that cannot be read (DataError's problems)."""
    findings = {
        Finding(
            problem.rule or DATA_READABLE,
            "violation",
            problem.record,
            problem.file,
            problem.line,
            problem.message,
        )
        for problem in problems
    }
    return sorted(findings, key=Finding.sort_key)


# ------------------------------------------------------------------------------------ locating

#: The YAML field a result path (its first step) stands for.
FIELD_OF_PATH = {
    v.IDENTIFIER: "id",
    v.TITLE: "title",
    v.SUMMARY: "summary",
    v.DESCRIPTION: "description",
    v.HAS_STATUS: "status",
    v.STATUS_COLUMN: "status_column",
    v.REJECTION_REASON: "reason",
    v.STATUS_NOTE: "status_note",
    v.REASON_NAMES: "reason_names",
    v.CITES: "cites",
    v.FILED_UNDER: "topic",
    v.CURRENT_VERSION: "version",
    v.AUTHORS: "authors",
    v.YEAR: "year",
    v.ARXIV_ID: "arxiv",
    v.ARXIV_VERSION: "arxiv_version",
    v.URL: "url",
    v.UNREAD_LOCATOR: "locator",
    v.REPLACES: "supersedes",
    "^" + v.REPLACES: "superseded_by",
    v.IS_REPLACED_BY: "superseded_by",
    "^" + v.IS_REPLACED_BY: "supersedes",
    v.PREF_LABEL: "label",
    v.SCOPE_NOTE: "scope",
    v.DECLARED_SIZE: "declared_size",
    v.GOVERNED_BY: "governed_by",
}

_FIRST_STEP = re.compile(r"^\(*(\^?)<([^>]*)>")
_VERSION_IRI = re.compile("^" + re.escape(v.ID) + r"(?P<practice>.+)-v(?P<number>[0-9]+)$")


def field_of_path(path: str | None) -> str | None:
    """The YAML field a result path points at, from its first step; None when it names none."""
    if path is None:
        return None
    if path in FIELD_OF_PATH:
        return FIELD_OF_PATH[path]
    match = _FIRST_STEP.match(path)
    if match is None:
        return None
    return FIELD_OF_PATH.get(match[1] + match[2])


class Locator:
    """Maps focus nodes to the records (and lines) they come from."""

    def __init__(self, anthology: Anthology):
        self.by_iri: dict[str, Record] = {}
        for record in anthology.records:
            if record.kind == "topic":
                iri = v.topic_iri(record.id)
            elif record.kind == "registry":
                iri = v.TOPIC_SCHEME_IRI
            else:
                iri = v.record_iri(record.id)
            self.by_iri[iri] = record

    def record_of(self, focus: str) -> tuple[Record | None, str | None]:
        """The record of a focus node, and the field that stands for the node itself when it is a
        part of a record rather than a record (a practice version stands for the ``version`` field)."""
        record = self.by_iri.get(focus)
        if record is not None:
            return record, None
        match = _VERSION_IRI.match(focus)
        if match is not None:
            practice = self.by_iri.get(v.ID + match["practice"])
            if practice is not None and practice.kind == "practice":
                return practice, "version"
        return None, None


class RecordLocator(Protocol):
    """Anything that maps a focus node to its record and the field the node stands for."""

    def record_of(self, focus: str) -> tuple[Record | None, str | None]: ...


def findings_from_results(
    raw: Iterable[RawResult], anthology: Anthology | RecordLocator, rules: Iterable[Rule]
) -> list[Finding]:
    """Locate raw results in the data: one finding per distinct result, sorted by file, line and rule.
    ``anthology`` is the records, or a locator that finds them (the build's source table)."""
    from ..records.schema import Anthology  # at run time only here: the schema is not needed to start

    by_iri = {rule.iri: rule for rule in rules}
    locator = Locator(anthology) if isinstance(anthology, Anthology) else anthology
    findings = set()
    for result in raw:
        rule = by_iri.get(result.source_shape)
        rule_id = rule.id if rule else rule_id_of(result.source_shape)
        severity = SEVERITY_OF_IRI.get(result.severity, rule.severity if rule else "violation")
        record, own_field = locator.record_of(result.focus)
        if record is None:
            file, line, record_id = None, None, None
        else:
            name = own_field or field_of_path(result.path) or (rule.report_field if rule else None)
            file, line, record_id = record.file or None, record.line_of(name), record.id
        # A node shape's result repeats the focus node as its value (SHACL 3.6.2); that says nothing.
        same_as_focus = result.value == f"<{result.focus}>"
        value = short_term(result.value) if result.value is not None and not same_as_focus else None
        template = rule.message if rule and rule.message else (result.message or rule_id)
        message = fill_message(template, short_iri(result.focus), value)
        findings.add(Finding(rule_id, severity, record_id, file, line, message, result.focus, result.path, value))
    return sorted(findings, key=Finding.sort_key)


def fill_message(template: str, focus: str, value: str | None) -> str:
    """Fill ``{$this}`` and ``{?value}`` (SHACL-SPARQL's placeholders) with short ids."""
    return template.replace("{$this}", focus).replace("{?this}", focus).replace("{?value}", value or "(none)")


def short_iri(iri: str) -> str:
    """SOTA-049 for ``id:SOTA-049``, a topic's slug, Active for ``sota:Active``; other IRIs as they are."""
    for namespace in (v.ID, v.TOPIC, v.SOTA):
        if iri.startswith(namespace) and len(iri) > len(namespace):
            return iri[len(namespace) :]
    return iri


_ESCAPES = {"t": "\t", "b": "\b", "n": "\n", "r": "\r", "f": "\f", '"': '"', "'": "'", "\\": "\\"}
_ESCAPE = re.compile(r"\\(?:u([0-9A-Fa-f]{4})|U([0-9A-Fa-f]{8})|(.))", re.DOTALL)


def short_term(term: str) -> str:
    """An RDF term in N-Triples syntax as a finding shows it: a short id, or a literal's text."""
    if term.startswith("<") and term.endswith(">"):
        return short_iri(term[1:-1])
    if term.startswith('"'):
        end = len(term) - 1
        while end > 0 and not (term[end] == '"' and _unescaped(term, end)):
            end -= 1
        body = term[1:end] if end > 0 else term[1:]
        return _ESCAPE.sub(_unescape, body)
    return term


def _unescaped(text: str, index: int) -> bool:
    backslashes = 0
    while index - backslashes - 1 >= 0 and text[index - backslashes - 1] == "\\":
        backslashes += 1
    return backslashes % 2 == 0


def _unescape(match: re.Match[str]) -> str:
    if match[1] or match[2]:
        return chr(int(match[1] or match[2], 16))
    return _ESCAPES.get(match[3], match[3])
