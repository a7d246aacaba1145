"""``sotakg build``: compile the data folder and the ontology into the embedded Oxigraph store.

A build that finds a few changed files makes the new generation from the current one: a RocksDB
checkpoint (hard links, milliseconds), then the changed files' old triples out and their new ones in,
then the usual atomic swap. Everything else (many changes, no usable current generation, another
sotakg version or ontology) loads the whole graph again.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import sqlite3
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import DataError, Problem
from ..records.sources import display_path, max_file_bytes, read_many, require_data_folder, scan_sources

if TYPE_CHECKING:
    from pyoxigraph import Quad

    from ..records.schema import Anthology, Record
from .store import (
    CARRY_PREFIX,
    DATABASE,
    GENERATION_MARK,
    GENERATION_MARKER,
    LINK_MARK,
    SOURCE_TABLE,
    DataSnapshot,
    InterruptGuard,
    SourceTable,
    StoreLayout,
    build_base,
    build_lock,
    read_manifest,
    remember_stats,
    remove_generation,
    remove_leftover,
    snapshot,
    write_generation_marker,
    write_manifest,
)

#: An incremental build is tried only when at most this share of the files changed (and at most
#: INCREMENTAL_MAX_FILES): past that, one bulk load of everything is faster than many small edits.
INCREMENTAL_MAX_SHARE = 0.1
INCREMENTAL_MAX_FILES = 20_000
#: How many earlier builds a generation remembers the changes since (see write_manifest's lineage).
LINEAGE_DEPTH = 8


@dataclass
class BuildReport:
    """What a build did."""

    store: Path
    rebuilt: bool
    counts: dict[str, int] = field(default_factory=dict)
    triples: int = 0
    seconds: float = 0.0
    #: How many files an incremental build applied (None: a full build, or no build).
    incremental: int | None = None


def build(
    data_dir: Path,
    store_path: Path,
    force: bool = False,
    wait_seconds: float = 0.0,
    guard: InterruptGuard | None = None,
    data: DataRead | None = None,
    scanned: DataSnapshot | None = None,
    progress: Callable[[int, int, str], None] | None = None,
) -> BuildReport:
    """Build the store from ``data_dir`` unless it is already up to date (``force`` rebuilds anyway).

    The data is read and checked before anything is written; the new graph is loaded into a new
    generation and swapped in atomically, so an error or an interruption leaves the previous store
    as it was. With a ``guard`` installed, an interruption that arrives once the swap has begun is held
    until the build is done. ``data`` is the folder as ``read_data`` already read it, so a caller that
    needs the records too reads each file once; ``scanned`` is a snapshot a caller already took (used
    only when it was taken against the current generation). When few files changed, only their
    triples are applied to a copy of the current generation. ``progress(done, total, step)`` hears of
    each step of a rebuild. Raises DataError, StoreBusy or StoreError.
    """
    step = progress or (lambda done, total, name: None)
    started = time.perf_counter()
    if data is None:
        require_data_folder(data_dir)  # before the lock: a build run in the wrong place makes nothing
    layout = StoreLayout(store_path)
    with build_lock(layout, wait_seconds):
        for leftover in layout.leftovers():
            remove_leftover(layout, leftover)
        current = layout.current_generation()
        manifest = read_manifest(current)
        if data is not None:
            scanned = data.snapshot
        elif force or scanned is None or scanned.against != (current.name if current is not None else None):
            scanned = snapshot(data_dir, current, need_hashes=force)
        if (
            not force
            and current is not None
            and manifest.get("fingerprint") == scanned.fingerprint
            and manifest.get("base") == build_base()
        ):
            if scanned.hashes and scanned.stat_digest != manifest.get("stat_digest"):
                remember_stats(current, scanned)  # files were touched but not changed
            return BuildReport(
                store_path,
                False,
                manifest.get("counts", {}),
                manifest.get("triples", 0),
                time.perf_counter() - started,
            )
        pause_for_test("reading")
        step(0, 3, "reading the records")
        change = None
        if not force and data is None and current is not None:
            change = _plan_change(data_dir, current, manifest, scanned)
        anthology = None
        if change is None:
            anthology = data.anthology if data is not None else _read_records(data_dir, scanned)
        generation = layout.new_generation()
        committed = False
        try:
            generation.mkdir()
            write_generation_marker(generation)
            pause_for_test("loading")
            step(1, 3, "loading the graph")
            applied = None
            if change is not None and current is not None:
                applied = _try_change(current, generation, manifest, scanned, change)
                if applied is None:  # the current generation's table does not hold up: build in full
                    change = None
                    anthology = _read_records(data_dir, scanned)
            if applied is not None:
                triples, counts, lineage = applied
            else:
                assert anthology is not None
                triples = _load_generation(generation / DATABASE, anthology)
                counts = anthology.counts()
                _write_source_table(generation, scanned, anthology.records)
                lineage = {}
            write_manifest(generation, scanned, counts, triples, lineage)
            step(2, 3, "swapping it in")
            pause_for_test("committing")
            if guard is not None:
                guard.committing = True
            pause_for_test("swapping")
            _swap_link(layout, generation)
            committed = True
        finally:
            if not committed:
                remove_generation(layout, generation)
        if current is not None:
            remove_generation(layout, current)  # not while a reader holds it: a later build does
        step(3, 3, "built")
    return BuildReport(
        store_path,
        True,
        counts,
        triples,
        time.perf_counter() - started,
        None if change is None else len(change.touched),
    )


@dataclass
class DataRead:
    """A data folder read once: its snapshot (with every file's hash) and its records."""

    snapshot: DataSnapshot
    anthology: Anthology


def read_data(data_dir: Path, store_path: Path) -> DataRead:
    """Read every record file of ``data_dir`` once, for the records and for the store's freshness.

    Files whose size and time match the store's current build keep their recorded hash; the others
    are hashed from the bytes read for the records. Raises DataError (every problem found) or
    DataFolderMissing."""
    scanned = snapshot(data_dir, StoreLayout(store_path).current_generation(), need_hashes=True)
    return DataRead(scanned, _read_records(data_dir, scanned))


def _read_records(data_dir: Path, scanned: DataSnapshot) -> Anthology:
    from ..records.schema import load_anthology

    return load_anthology(data_dir, scanned.sources, _read_all(scanned))


def _read_all(data: DataSnapshot) -> dict[str, bytes]:
    """The bytes of every record file within the size limit (those read for hashing are reused);
    a file that cannot be read is left out here and reported by read_record, naming it."""
    contents = dict(data.contents)
    wanted = [
        source
        for source in data.sources
        if source.relative not in contents and source.kind is not None and source.refusal is None
    ]
    for source, read in zip(wanted, read_many([source.path for source in wanted], max_file_bytes()), strict=True):
        if not isinstance(read, OSError):
            contents[source.relative] = read
    return contents


def _load_generation(database: Path, anthology: Anthology) -> int:
    from pyoxigraph import RdfFormat, Store

    from ..resources import ontology_path
    from .rdf import anthology_quads

    store = Store(str(database))
    try:
        store.bulk_load(path=str(ontology_path()), format=RdfFormat.TURTLE)
        store.bulk_extend(anthology_quads(anthology))
        store.flush()
        return len(store)
    finally:
        # Close the database now, even on an interruption, so the caller can remove its directory.
        del store


def _swap_link(layout: StoreLayout, generation: Path) -> None:
    link = layout.path.with_name(f"{layout.path.name}{LINK_MARK}{generation.name.rsplit(GENERATION_MARK, 1)[1]}")
    os.symlink(generation.name, link)  # a fresh, unpredictable name: fails rather than reuse anything
    os.replace(link, layout.path)


# ------------------------------------------------------------------------------------- source table


def _record_row(rel: str, record: Record) -> tuple[str, str, str, str, int, str, str]:
    from .rdf import record_subject

    return (
        rel,
        record.kind,
        record.id,
        record_subject(record),
        record.line,
        _compact_json(record.lines),
        _compact_unicode_json(record.fields),
    )


# json.dumps with arguments makes an encoder a call: two a record.
_compact_json = json.JSONEncoder(separators=(",", ":")).encode
_compact_unicode_json = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode


def _write_source_table(generation: Path, scanned: DataSnapshot, records: list[Record]) -> None:
    """Every file's stat and hash and every record's lines, for the next build and for reports."""
    readable = [source.relative for source in scanned.sources if source.kind is not None]
    if len(readable) != len(records):  # load_anthology makes one record a file or raises
        raise AssertionError("records do not match the record files")
    table = SourceTable.create(generation)
    try:
        hashes = scanned.complete_hashes()
        table.put_files((rel, *stat, hashes.get(rel, "")) for rel, stat in scanned.stats.items())
        table.put_records(_record_row(rel, record) for rel, record in zip(readable, records, strict=True))
        table.commit()
    finally:
        table.close()


def record_from_row(row: tuple[Any, ...], shown_prefix: str = "") -> Record:
    """A Record back from its source table row (fields, the line of each, the file as shown)."""
    from ..records.schema import KINDS, Record

    rel, kind, record_id, _subject, line, lines, fields = row
    values, field_lines = json.loads(fields), json.loads(lines)
    if not (
        kind in KINDS
        and isinstance(record_id, str)
        and isinstance(rel, str)
        and isinstance(line, int)
        and isinstance(values, dict)
        and isinstance(field_lines, dict)
        and all(isinstance(n, int) for n in field_lines.values())
    ):
        raise ValueError(f"a source table row that sotakg did not write: {rel!r}")
    return Record(kind, record_id, values, shown_prefix + rel, line, field_lines)


# ------------------------------------------------------------------------------------- incremental


@dataclass
class _Change:
    """What an incremental build applies: the files it touches and their records before and after."""

    touched: set[str]
    old: list[Record]
    new: list[tuple[str, Record]]


def _plan_change(data_dir: Path, current: Path, manifest: dict[str, Any], scanned: DataSnapshot) -> _Change | None:
    """The change to apply to ``current``, or None when a full build is the way (or the only safe
    one). Raises DataError, naming every problem a full read would name, when the changed files
    cannot be read or clash with the records of the others."""
    if scanned.changed is None or manifest.get("base") != build_base() or not data_dir.is_dir():
        return None
    if not (current / DATABASE).is_dir() or not manifest.get("fingerprint"):
        return None
    touched = scanned.changed | scanned.removed
    if len(touched) > min(INCREMENTAL_MAX_FILES, max(16, int(len(scanned.stats) * INCREMENTAL_MAX_SHARE))):
        return None
    table = SourceTable.open(current)
    if table is None:
        return None
    try:
        shown = _shown_prefix(scanned)
        old = [record_from_row(row, shown) for row in table.records_where("rel", sorted(touched))]
        new, problems = _read_changed(data_dir, scanned)
        problems.extend(_clashes(table, touched, new, scanned))
        problems.extend(_reserved(table, touched, new, scanned))
    except _UNUSABLE:
        return None
    finally:
        table.close()
    if problems:
        raise DataError(problems)
    return _Change(touched, old, new)


def _shown_prefix(scanned: DataSnapshot) -> str:
    """How the files of this data folder are shown (its display path and a slash, or nothing), as
    scan_sources shows them."""
    shown_root = display_path(scanned.data_dir)
    return "" if shown_root == "." else f"{shown_root}/"


def _read_changed(data_dir: Path, scanned: DataSnapshot) -> tuple[list[tuple[str, Record]], list[Problem]]:
    """The records of the changed files, and the problems of those that cannot be read (each file
    read as load_anthology reads it, so the messages are the same as a full build's)."""
    from ..records.schema import read_source

    assert scanned.changed is not None
    records: list[tuple[str, Record]] = []
    problems: list[Problem] = []
    # Only the changed files are looked at again: listing every file (a stat each) would cost as
    # much as the scan that found them.
    for source in scan_sources(data_dir, only=scanned.changed):
        record, found = read_source(source, scanned.contents)
        problems.extend(found)
        if record is not None:  # even when misnamed: it can still clash with another record's id
            records.append((source.relative, record))
    return records, problems


def _namespace(kind: str, record_id: str) -> tuple[bool, str]:
    # Practices, papers and ADRs share one identifier space (their IRIs); topics have their own.
    return kind == "topic", record_id


def _clashes(
    table: SourceTable, touched: set[str], new: list[tuple[str, Record]], scanned: DataSnapshot
) -> list[Problem]:
    """The id-unique problems a full read would report among the changed records and the others."""
    shown = _shown_prefix(scanned)
    groups: dict[tuple[bool, str], list[tuple[str, Record]]] = {}
    for rel, record in new:
        groups.setdefault(_namespace(record.kind, record.id), []).append((rel, record))
    for row in table.records_where("id", sorted({record.id for _rel, record in new})):
        if row[0] not in touched:
            record = record_from_row(row, shown)
            key = _namespace(record.kind, record.id)
            if key in groups:
                groups[key].append((row[0], record))
    clashing = {key: members for key, members in groups.items() if len(members) > 1}
    if not clashing:
        return []
    order = {source.relative: index for index, source in enumerate(scanned.sources)}
    problems: list[tuple[int, Problem]] = []
    for members in clashing.values():
        members.sort(key=lambda member: order[member[0]])
        first = members[0][1]
        for rel, record in members[1:]:
            message = f"identifier {record.id} is also used by {first.file}:{first.line}; keep one of the two"
            problems.append((order[rel], Problem(record.file, record.line, record.id, message, rule="id-unique")))
    return [problem for _order, problem in sorted(problems, key=lambda item: item[0])]


def _reserved(
    table: SourceTable, touched: set[str], new: list[tuple[str, Record]], scanned: DataSnapshot
) -> list[Problem]:
    """The problems a full read would report of records whose id is an IRI sotakg mints itself, where
    a changed record is involved: a changed record's id names the scheme or a version of a practice
    (changed or not), or an unchanged record's id names a version of a changed practice."""
    from ..records.schema import reserved_id_problem, version_owner

    shown = _shown_prefix(scanned)
    practices: dict[str, Record] = {}
    for _rel, record in new:
        if record.kind == "practice":
            practices.setdefault(record.id, record)
    changed_practices = sorted(practices)
    owners = {owner[0] for _rel, record in new if (owner := version_owner(record.id)) is not None}
    for row in table.records_where("id", sorted(owners - practices.keys())):
        if row[0] not in touched and row[1] == "practice":
            record = record_from_row(row, shown)
            practices.setdefault(record.id, record)
    candidates = dict(new)
    for practice_id in changed_practices:
        for row in table.records_with_id_prefix(practice_id + "-v"):
            if row[0] not in touched and row[0] not in candidates:
                candidates[row[0]] = record_from_row(row, shown)
    found = []
    for rel, record in candidates.items():
        problem = reserved_id_problem(record, practices)
        if problem is not None:
            found.append((rel, problem))
    if not found:
        return []
    # Listing every file costs what the scan did: only to order the problems a full read would.
    order = {source.relative: index for index, source in enumerate(scanned.sources)}
    return [problem for _rel, problem in sorted(found, key=lambda item: order[item[0]])]


_VERSION_SUBJECT = re.compile(r"^(?P<record>.+)-v[0-9]+$")


#: What a source table or manifest that does not hold what a build wrote raises when read back (a
#: store from a pull request, a disk error): the incremental build gives way to a full one.
_UNUSABLE = (ValueError, TypeError, KeyError, AttributeError, IndexError, sqlite3.Error)


def _try_change(
    current: Path, generation: Path, manifest: dict[str, Any], scanned: DataSnapshot, change: _Change
) -> tuple[int, dict[str, int], dict[str, Any]] | None:
    """_apply_change, or None (and ``generation`` removed) when the current generation's table or
    manifest cannot be used."""
    try:
        return _apply_change(current, generation, manifest, scanned, change)
    except _UNUSABLE:
        # Start the generation again from its marker alone, for the full build that follows.
        for entry in generation.iterdir():
            if entry.name == GENERATION_MARKER:
                continue
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry)
            else:
                entry.unlink()
        return None


def _apply_change(
    current: Path, generation: Path, manifest: dict[str, Any], scanned: DataSnapshot, change: _Change
) -> tuple[int, dict[str, int], dict[str, Any]]:
    """Make ``generation`` a checkpoint of ``current`` with ``change`` applied: its database, its
    source table and the carried files. Returns the triple count, the record counts and the lineage."""
    from pyoxigraph import Store

    from .rdf import as_quads, record_triples

    removed = set(as_quads(triple for record in change.old for triple in record_triples(record)))
    inserted = set(as_quads(triple for _rel, record in change.new for triple in record_triples(record)))
    shutil.copyfile(current / SOURCE_TABLE, generation / SOURCE_TABLE)
    table = SourceTable.open(generation, writable=True)
    if table is None:
        raise AssertionError("the copied source table cannot be opened")
    try:
        # A triple the change takes out may still be stated by a record that did not change (or by
        # the ontology): it stays, so the store equals a fresh build.
        restated = _restated(table, change.touched, {_subject_text(quad) for quad in removed - inserted})
        kept = inserted | restated | _ontology_quads(removed - inserted)
        source = Store.read_only(str(current / DATABASE))
        try:
            source.backup(str(generation / DATABASE))
        finally:
            del source
        store = Store(str(generation / DATABASE))
        try:
            triples = int(manifest["triples"])  # missing: a manifest sotakg did not write
            for quad in removed - kept:
                if quad in store:
                    store.remove(quad)
                    triples -= 1
            added = [quad for quad in inserted if quad not in store]
            store.extend(added)
            triples += len(added)
            store.flush()
        finally:
            del store
        table.delete_files(change.touched)
        table.put_files((rel, *scanned.stats[rel], scanned.hashes[rel]) for rel in scanned.rehashed)
        table.put_records(_record_row(rel, record) for rel, record in change.new)
        table.commit()
    finally:
        table.close()
    for carried in current.glob(CARRY_PREFIX + "*"):
        if carried.is_file() and not carried.is_symlink():
            shutil.copyfile(carried, generation / carried.name)
    from ..records.schema import KINDS

    # A build writes the count of every kind: one missing is a manifest sotakg did not write (a full build).
    counts = {kind: int(manifest["counts"][kind]) for kind in KINDS}
    for record in change.old:
        counts[record.kind] -= 1
    for _rel, record in change.new:
        counts[record.kind] += 1
    return triples, counts, _lineage(manifest, removed | inserted)


def _restated(table: SourceTable, touched: set[str], subjects: set[str]) -> set[Quad]:
    """The quads that records outside ``touched`` state about ``subjects`` (a record states its own
    subject and, for a practice, its versions ``<subject>-vN``)."""
    from .rdf import as_quads, record_triples

    candidates = set(subjects)
    for subject in subjects:
        match = _VERSION_SUBJECT.match(subject)
        if match is not None:
            candidates.add(match["record"])
    quads: set[Quad] = set()
    for row in table.records_where("subject", sorted(candidates)):
        if row[0] in touched:
            continue
        for quad in as_quads(record_triples(record_from_row(row))):
            if _subject_text(quad) in subjects:
                quads.add(quad)
    return quads


def _subject_text(quad: Quad) -> str:
    """The IRI of a quad's subject (records state only IRIs as subjects; anything else as text)."""
    from pyoxigraph import NamedNode

    subject = quad.subject
    return subject.value if isinstance(subject, NamedNode) else str(subject)


def _ontology_quads(quads: Iterable[Quad]) -> set[Quad]:
    """Those of ``quads`` the ontology states too."""
    wanted = set(quads)
    if not wanted:
        return set()
    from pyoxigraph import RdfFormat, parse

    from ..resources import ontology_path

    return {quad for quad in parse(path=str(ontology_path()), format=RdfFormat.TURTLE) if quad in wanted}


def _lineage(manifest: dict[str, Any], quads: set[Quad]) -> dict[str, Any]:
    """What changed since each of the last builds, added to what had changed since the builds the
    current generation remembers: the subjects of the triples taken out or put in, their IRI objects
    by predicate, and the identifiers among their literals (what a validation needs to find the
    focus nodes a change can affect)."""
    from pyoxigraph import Literal, NamedNode

    from .vocab import IDENTIFIER

    subjects: set[str] = set()
    links: dict[str, set[str]] = {}
    identifiers: set[str] = set()
    for quad in quads:
        subjects.add(_subject_text(quad))
        if isinstance(quad.object, NamedNode):
            links.setdefault(quad.predicate.value, set()).add(quad.object.value)
        elif isinstance(quad.object, Literal) and quad.predicate.value == IDENTIFIER:
            identifiers.add(quad.object.value)

    def since(earlier: dict[str, Any]) -> dict[str, Any]:
        earlier_links = earlier.get("links", {})
        merged = {
            predicate: sorted(links.get(predicate, set()) | set(earlier_links.get(predicate, [])))
            for predicate in sorted(set(links) | set(earlier_links))
        }
        return {
            "subjects": sorted(subjects | set(earlier.get("subjects", []))),
            "links": merged,
            "identifiers": sorted(identifiers | set(earlier.get("identifiers", []))),
        }

    lineage: dict[str, Any] = {manifest["fingerprint"]: since({})}
    earlier = manifest.get("lineage")
    if isinstance(earlier, dict):
        for fingerprint, changes in list(earlier.items())[: LINEAGE_DEPTH - 1]:
            if isinstance(changes, dict) and fingerprint not in lineage:
                with contextlib.suppress(*_UNUSABLE):  # an entry sotakg did not write is dropped
                    lineage[fingerprint] = since(changes)
    return lineage


def pause_for_test(phase: str) -> None:
    """Tests only: with ``SOTAKG_TEST_PAUSE=<phase>`` and ``SOTAKG_TEST_PAUSE_MARKER=<file>``, write
    the phase to that file and wait (at most 60 s) until the test removes it, so that a test can
    interrupt the build at a known point of it: reading, loading, committing or swapping."""
    marker = os.environ.get("SOTAKG_TEST_PAUSE_MARKER")
    if os.environ.get("SOTAKG_TEST_PAUSE") != phase or not marker:
        return
    Path(marker + ".tmp").write_text(phase)
    os.replace(marker + ".tmp", marker)  # whole or absent: the test reads it as soon as it appears
    deadline = time.monotonic() + 60
    while os.path.exists(marker) and time.monotonic() < deadline:
        time.sleep(0.01)
