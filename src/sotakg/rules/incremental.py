"""Validation that re-checks only the focus nodes a change can affect and reuses stored findings.

After each validation the raw results are stored with the generation (a ``carry-`` file, which an
incremental build carries on to the next generation). The manifest's lineage says what changed since
an earlier build: when the stored results are of such a build, only the focus nodes the change can
affect are validated again (on the whole graph, so their rules see everything they look at, but with
those nodes as the only targets), and the stored results of every other node are kept.

Which nodes a change can affect follows from what the shipped rules look at (TARGET_LINKS, CHAIN_LINKS,
SHARED_LITERALS):
a node's own statements; the type and statements of the nodes it links to; the nodes that link to
it (inverse paths, ``?later dcterms:isVersionOf $this``); the other holders of its identifier
(``id-unique``); and whole chains of supersession and revision (the cycle rules). Other shapes files
are validated in full (their results are still reused while nothing changes), and so are the
shipped ones once edited, until MODELLED_SHAPES is updated after a review of the dependencies.
This module knows nothing of engines: ``validate`` passes the run and the result type in.
"""

from __future__ import annotations

import hashlib
import json
import re
import sqlite3
from collections.abc import Callable, Iterable, Sequence
from dataclasses import fields
from operator import attrgetter
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from .. import __version__
from ..graph import vocab as v
from ..graph.store import CARRY_PREFIX, SourceTable, read_manifest
from ..records.sources import atomic_write_text

if TYPE_CHECKING:
    from pyoxigraph import Store

    from ..records.schema import Record

FINDINGS_PREFIX = CARRY_PREFIX + "findings-"
_VERSION_IRI = re.compile("^" + re.escape(v.ID) + r"(?P<practice>.+)-v(?P<number>[0-9]+)$")


class Result(Protocol):
    """A raw validation result (validate.RawResult): a dataclass with the focus node's IRI."""

    @property
    def focus(self) -> str: ...


R = TypeVar("R", bound=Result)

#: Links whose target's results can change with the link (inverse paths, supersession agreement,
#: version order, the practices a topic counts, the topics' sizes the scheme adds up), so a changed
#: link re-checks its target too. Types and statuses are left out: no shipped rule looks at a
#: class's or a status's incoming links.
TARGET_LINKS = (
    v.CITES,
    v.FILED_UNDER,
    v.IN_SCHEME,
    v.REASON_NAMES,
    v.REASON_MENTIONS,
    v.REPLACES,
    v.IS_REPLACED_BY,
    v.GOVERNED_BY,
    v.IS_VERSION_OF,
    v.WAS_REVISION_OF,
    v.CURRENT_VERSION,
)
#: Links the cycle rules follow any number of times, either way.
CHAIN_LINKS = (v.REPLACES, v.IS_REPLACED_BY, v.WAS_REVISION_OF)
#: Literals another node's rule compares with this node's (``id-unique``).
SHARED_LITERALS = (v.IDENTIFIER,)
#: The shapes the dependencies above were read from (sha256 of their bytes, in name order). Other
#: shapes, including a later edit of the shipped ones, are validated in full until someone checks
#: that the dependencies still cover what the rules look at and updates this (a test says so).
MODELLED_SHAPES = "5aa86f9dc9f37ef170de1dd75f8bca9f6b817cfd9a85adfcd05db6a22bfe79b0"


def shapes_digest(shapes: Sequence[Path]) -> str:
    """The sha256 of the shapes files' bytes, in the order given."""
    digest = hashlib.sha256()
    for path in shapes:
        digest.update(path.read_bytes())
    return digest.hexdigest()


def modelled(shapes: Sequence[Path]) -> bool:
    """Whether the dependencies of this module were written for exactly these shapes."""
    return shapes_digest(shapes) == MODELLED_SHAPES


#: Past this many affected nodes a full validation is as fast as the partial one, whatever the graph.
MAX_AFFECTED = 50_000
#: A partial validation costs about 1.6 ms an affected node, a full one about 30 µs a triple (scale 100
#: of benchmarks/): past one affected node for this many triples, the full one is cheaper.
TRIPLES_PER_AFFECTED_NODE = 100
#: ... but a small graph is validated partially up to this many affected nodes (a full run is cheap).
MIN_AFFECTED_LIMIT = 1_000


def affected_limit(triples: object) -> int:
    """How many affected nodes a partial validation of a graph of ``triples`` takes at most."""
    size = triples if isinstance(triples, int) and not isinstance(triples, bool) and triples > 0 else 0
    return min(MAX_AFFECTED, max(MIN_AFFECTED_LIMIT, size // TRIPLES_PER_AFFECTED_NODE))


def cache_key(engine: str, shapes: Sequence[Path]) -> str:
    """A name for the results of ``engine`` over these shapes files (by content)."""
    digest = hashlib.sha256(f"{__version__}\0{engine}".encode())
    for path in shapes:
        digest.update(b"\0" + path.read_bytes())
    return digest.hexdigest()[:32]


def results_for_generation(
    store: Store,
    generation: Path,
    key: str,
    run: Callable[[Store, set[str] | None], list[R]],
    result_type: Callable[..., R],
    partial: bool = True,
) -> tuple[list[R], int | None]:
    """The raw results of ``run`` over ``store`` (the graph of ``generation``), and how many focus
    nodes were validated again (None: a full run; 0: every stored result reused). ``key`` names the
    engine and shapes (cache_key); ``partial`` allows re-checking only what changed (the shapes are
    the shipped ones, whose dependencies this module knows). ``run(graph, focus)`` validates
    ``graph``: every node when ``focus`` is None, else at least the focus nodes of ``focus``."""
    manifest = read_manifest(generation)
    fingerprint = manifest.get("fingerprint")
    path = generation / f"{FINDINGS_PREFIX}{key}.json"
    stored = _read_stored(path, result_type)
    checked: int | None = None
    if stored is not None and stored[0] == fingerprint:
        return stored[1], 0
    changes = None
    if stored is not None and isinstance(manifest.get("lineage"), dict):
        changes = manifest["lineage"].get(stored[0])
    results: list[R] | None = None
    if partial and isinstance(changes, dict) and stored is not None:
        try:
            affected = affected_nodes(store, changes, affected_limit(manifest.get("triples")))
        except (TypeError, ValueError, AttributeError):  # a lineage sotakg did not write: check everything
            affected = None
        if affected is not None and not any(r.focus.startswith("_:") for r in stored[1]):
            # On the whole graph, so the rules see all they look at; only the affected targets.
            fresh = [r for r in run(store, affected) if r.focus in affected]
            results = [r for r in stored[1] if r.focus not in affected] + fresh
            checked = len(affected)
    if results is None:
        results = run(store, None)
    if isinstance(fingerprint, str):
        _write_stored(path, fingerprint, results)
    return results, checked


def _read_stored(path: Path, result_type: Callable[..., R]) -> tuple[str, list[R]] | None:
    try:
        if path.is_symlink():
            return None
        stored = json.loads(path.read_text())
        results = [result_type(*row) for row in stored["results"]]
        if not isinstance(stored["fingerprint"], str) or not all(isinstance(r.focus, str) for r in results):
            return None
        return stored["fingerprint"], results
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _write_stored(path: Path, fingerprint: str, results: list[Any]) -> None:
    # Each result's fields as a row, read in C (dataclasses.astuple copies each value deeply, a
    # tenth of a second for 1,400 results): the fields are strings or None.
    names = [f.name for f in fields(results[0])] if results else []
    row = attrgetter(*names, *names[:1]) if names else None  # never one name: attrgetter returns a tuple
    rows = [values[: len(names)] for values in map(row, results)] if row is not None else []
    text = json.dumps({"fingerprint": fingerprint, "results": rows}, separators=(",", ":"))
    try:
        atomic_write_text(path, text, make_parent=False)  # its generation may be gone: nothing made
    except OSError:  # a read-only store, or a generation removed meanwhile: the next run validates again
        pass


def affected_nodes(store: Store, changes: dict[str, Any], limit: int = MAX_AFFECTED) -> set[str] | None:
    """The focus nodes whose results a change (a lineage entry) can alter, in the graph after it;
    None when there are more than ``limit``, too many for a partial validation to pay."""
    from pyoxigraph import DefaultGraph, Literal, NamedNode

    graph = DefaultGraph()
    subjects = {s for s in changes.get("subjects", []) if isinstance(s, str)}
    links = changes.get("links", {})
    seeds = set(subjects)
    for predicate in TARGET_LINKS:
        seeds.update(o for o in links.get(predicate, []) if isinstance(o, str))
    affected = set(seeds)
    # The nodes that link to a changed node: their checks of its type and statements.
    for subject in subjects:
        for quad in store.quads_for_pattern(None, None, NamedNode(subject), graph):
            if isinstance(quad.subject, NamedNode):
                affected.add(quad.subject.value)
        if len(affected) > limit:
            return None
    # The other holders of a changed identifier.
    for identifier in changes.get("identifiers", []):
        for predicate in SHARED_LITERALS:
            for quad in store.quads_for_pattern(None, NamedNode(predicate), Literal(identifier), graph):
                if isinstance(quad.subject, NamedNode):
                    affected.add(quad.subject.value)
    # Whole chains: a cycle through a changed node involves every node on it.
    chain = [NamedNode(p) for p in CHAIN_LINKS]
    pending = list(affected)
    while pending:
        node = NamedNode(pending.pop())
        for link in chain:
            neighbours = [q.object for q in store.quads_for_pattern(node, link, None, graph)]
            neighbours += [q.subject for q in store.quads_for_pattern(None, link, node, graph)]
            for neighbour in neighbours:
                if isinstance(neighbour, NamedNode) and neighbour.value not in affected:
                    affected.add(neighbour.value)
                    pending.append(neighbour.value)
        if len(affected) > limit:
            return None
    return affected


class SourceLocator:
    """Maps focus nodes to the records (and lines) they come from, from a generation's source table
    (the lines kept by the build), without reading the data files again."""

    def __init__(self, generation: Path, shown_prefix: str):
        self.table = SourceTable.open(generation)
        self.shown_prefix = shown_prefix
        self.cache: dict[str, Record | None] = {}

    def prefetch(self, focus_nodes: Iterable[str]) -> None:
        """Read the records of ``focus_nodes`` (and of the practices whose versions they are) from
        the table at once, a query per few hundred rather than one each."""
        from ..graph.build import record_from_row

        wanted = set()
        for focus in focus_nodes:
            wanted.add(focus)
            match = _VERSION_IRI.match(focus)
            if match is not None:
                wanted.add(v.ID + match["practice"])
        wanted -= self.cache.keys()
        if self.table is None or not wanted:
            return
        try:
            found: dict[str, Record] = {}
            # By file, the first of two records of one subject (duplicate ids) as a lookup each found it.
            for row in sorted(self.table.records_with_subjects(sorted(wanted)), key=lambda row: row[0]):
                if row[3] not in found:
                    found[row[3]] = record_from_row(row, self.shown_prefix)
        except (ValueError, TypeError, IndexError, sqlite3.Error):  # a table sotakg did not write: one at a time
            return
        for subject in wanted:
            self.cache[subject] = found.get(subject)

    def _by_subject(self, subject: str) -> Record | None:
        from ..graph.build import record_from_row

        if subject not in self.cache:
            try:
                rows = self.table.records_where("subject", [subject]) if self.table is not None else []
                self.cache[subject] = record_from_row(rows[0], self.shown_prefix) if rows else None
            except (ValueError, TypeError, sqlite3.Error):  # a row sotakg did not write: no location
                self.cache[subject] = None
        return self.cache[subject]

    def record_of(self, focus: str) -> tuple[Record | None, str | None]:
        """As Locator.record_of: the record of a focus node, and the field a version node stands for."""
        record = self._by_subject(focus)
        if record is not None:
            return record, None
        match = _VERSION_IRI.match(focus)
        if match is not None:
            practice = self._by_subject(v.ID + match["practice"])
            if practice is not None and practice.kind == "practice":
                return practice, "version"
        return None, None

    def close(self) -> None:
        if self.table is not None:
            self.table.close()


def shown_prefix(data_dir: Path) -> str:
    """How the files of ``data_dir`` are named in findings (as scan_sources shows them)."""
    from ..records.sources import display_path

    shown = display_path(data_dir)
    return "" if shown == "." else shown + "/"


__all__ = ["SourceLocator", "affected_nodes", "results_for_generation", "shown_prefix"]
