"""Behaviour of graph/build.py that its mutation run showed no test pinned (issue 20): what a build
remembers of each change (the lineage), which triples an incremental build keeps because another
record or the ontology still states them, the helpers those rest on, and build() itself: its lock,
what it is given, what it reads and writes, and its problems in file order."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from pyoxigraph import BlankNode, DefaultGraph, Literal, NamedNode, Quad, RdfFormat, parse

from sotakg.errors import DataError
from sotakg.graph import build as build_module
from sotakg.graph.build import build
from sotakg.graph.rdf import as_quads, record_triples
from sotakg.graph.store import (
    GENERATION_MARKER,
    MANIFEST,
    SOURCE_TABLE,
    SourceTable,
    StoreLayout,
    open_read_only,
    read_manifest,
    snapshot,
)
from sotakg.graph.vocab import ID, IDENTIFIER, TITLE, TOPIC_SCHEME_IRI
from sotakg.records import schema
from sotakg.records.schema import Record
from sotakg.resources import ontology_path

from .conftest import SHIPPED_TRIPLES

SHIPPED_COUNTS = {"practice": 42, "paper": 18, "adr": 3, "topic": 1, "registry": 1}


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text(encoding="utf-8")
    assert old in text
    path.write_text(text.replace(old, new, 1), encoding="utf-8")


def _manifest(store: Path) -> dict:
    return read_manifest(_generation(store))


def _generation(store: Path) -> Path:
    generation = StoreLayout(store).current_generation()
    assert generation is not None
    return generation


def _stored(store: Path) -> set[Quad]:
    graph = open_read_only(StoreLayout(store))
    return set(graph.quads_for_pattern(None, None, None, DefaultGraph()))


def _quads(*records: Record) -> set[Quad]:
    return {quad for record in records for quad in as_quads(record_triples(record))}


# ------------------------------------------------------------------------------------------ lineage


def test_the_lineage_of_two_incremental_builds_adds_up_subject_links_and_identifiers(data_copy, tmp_path):
    """Each build remembers, under the fingerprint it started from, the subjects, IRI objects by
    predicate and identifier literals (only those of sotakg:identifier) its change touched; the next
    build carries the older entries on with its own change added to each."""
    store = tmp_path / "store"
    build(data_copy, store)
    first = _manifest(store)["fingerprint"]
    _edit(data_copy / "practices" / "SOTA-017.yaml", "status: Active", "status: Rejected")
    assert build(data_copy, store).incremental == 1
    after_one = _manifest(store)
    second = after_one["fingerprint"]
    practice = after_one["lineage"][first]
    assert list(after_one["lineage"]) == [first]
    assert practice["identifiers"] == ["SOTA-017"]  # not the title, summary or any other literal
    assert practice["subjects"] == [f"{ID}SOTA-017", f"{ID}SOTA-017-v1", f"{ID}SOTA-017-v2"]
    assert practice["links"]["http://purl.org/spar/cito/cites"] == [f"{ID}LIT-016"]
    assert set(practice) == {"subjects", "links", "identifiers"}

    _edit(data_copy / "papers" / "LIT-004.yaml", "year: 2016", "year: 1999")
    assert build(data_copy, store).incremental == 1
    lineage = _manifest(store)["lineage"]
    assert list(lineage) == [second, first]
    paper = lineage[second]
    assert paper == {
        "subjects": [f"{ID}LIT-004"],
        "links": {"http://www.w3.org/1999/02/22-rdf-syntax-ns#type": ["https://w3id.org/sotakg/ontology#Paper"]},
        "identifiers": ["LIT-004"],
    }
    both = lineage[first]
    assert both["subjects"] == sorted({*practice["subjects"], *paper["subjects"]})
    assert both["identifiers"] == ["LIT-004", "SOTA-017"]
    predicates = sorted({*practice["links"], *paper["links"]})
    assert both["links"] == {
        predicate: sorted({*practice["links"].get(predicate, []), *paper["links"].get(predicate, [])})
        for predicate in predicates
    }


def _lineage_of(manifest: dict) -> dict:
    return build_module._lineage(manifest, set())


def test_the_lineage_keeps_the_last_builds_only():
    """A generation remembers LINEAGE_DEPTH builds: its own change and the newest earlier entries."""
    earlier = {f"earlier-{n}": {"subjects": [f"s{n}"]} for n in range(12)}
    lineage = _lineage_of({"fingerprint": "current", "lineage": earlier})
    assert list(lineage) == ["current", *list(earlier)[: build_module.LINEAGE_DEPTH - 1]]
    assert len(lineage) == build_module.LINEAGE_DEPTH


def test_an_earlier_entry_under_the_current_fingerprint_does_not_replace_its_own():
    """Data back to a state it had: the entry the current fingerprint already has (this build's
    change) stays as this build made it; an entry that is not a mapping is dropped."""
    quad = Quad(NamedNode(f"{ID}X"), NamedNode(IDENTIFIER), Literal("X"), DefaultGraph())
    manifest = {"fingerprint": "f", "lineage": {"f": {"subjects": ["old"], "identifiers": ["OLD"]}, "g": ["x"]}}
    assert build_module._lineage(manifest, {quad}) == {"f": {"subjects": [f"{ID}X"], "links": {}, "identifiers": ["X"]}}


# ------------------------------------------------------------------------------------------ read_data


def test_read_data_hashes_every_file_against_the_current_build(data_copy, tmp_path):
    """read_data's snapshot is taken against the store's current generation and holds every file's
    hash, also when nothing changed since that build (so the build it is given needs no scan)."""
    import hashlib

    store = tmp_path / "store"
    build(data_copy, store)
    data = build_module.read_data(data_copy, store)
    snapshot = data.snapshot
    assert snapshot.against == _generation(store).name
    assert snapshot.changed == set() and snapshot.removed == set()
    files = sorted(str(path.relative_to(data_copy)) for path in data_copy.rglob("*.yaml"))
    assert sorted(snapshot.hashes) == files
    for rel in files:
        assert snapshot.hashes[rel] == hashlib.sha256((data_copy / rel).read_bytes()).hexdigest()
    assert len(data.anthology.records) == len(files)


# ------------------------------------------------------------------------------------------ restated


@pytest.fixture
def table(tmp_path: Path):
    """A source table holding practice X (two versions), practice A and paper X-v1 (an id a build
    refuses, but a table sotakg did not write may say anything)."""
    generation = tmp_path / "generation"
    generation.mkdir()
    created = SourceTable.create(generation)
    created.put_records(
        build_module._record_row(rel, record)
        for rel, record in [
            ("practices/A.yaml", Record("practice", "A", {"id": "A", "title": "First"}, "practices/A.yaml", 1)),
            ("practices/X.yaml", PRACTICE_X),
        ]
    )
    created.commit()
    yield created
    created.close()


PRACTICE_X = Record("practice", "X", {"id": "X", "version": 2, "title": "Ex"}, "practices/X.yaml", 1, {"title": 3})


def test_restated_finds_what_an_untouched_practice_states_about_its_version(table):
    """A version subject ``<id>-vN`` is looked up by its practice's subject too; only the quads
    whose subject was asked for are returned, and a touched row listed first does not end the search."""
    version = f"{ID}X-v1"
    expected = {quad for quad in _quads(PRACTICE_X) if quad.subject.value == version}
    assert len(expected) == 3  # its type, its number, the practice it is a version of
    assert build_module._restated(table, {"practices/A.yaml"}, {f"{ID}A", version}) == expected
    assert build_module._restated(table, {"practices/X.yaml"}, {version}) == set()


def test_restated_finds_what_an_untouched_record_states_about_its_own_subject(table):
    """A subject asked for is the subject of an untouched record: its own quads come back."""
    own = {quad for quad in _quads(PRACTICE_X) if quad.subject.value == f"{ID}X"}
    assert build_module._restated(table, set(), {f"{ID}X"}) == own


# ------------------------------------------------------------------------------------------ small helpers


def test_a_subject_that_is_not_an_iri_is_given_as_text():
    """_subject_text: an IRI's value, a blank node as N-Triples text (``_:b1``)."""
    predicate = NamedNode(TITLE)
    assert build_module._subject_text(Quad(NamedNode(f"{ID}X"), predicate, Literal("t"))) == f"{ID}X"
    assert build_module._subject_text(Quad(BlankNode("b1"), predicate, Literal("t"))) == "_:b1"


def test_ontology_quads_are_those_the_ontology_states_too():
    """_ontology_quads keeps exactly the given quads the shipped ontology states, and none of others."""
    stated = next(iter(parse(path=str(ontology_path()), format=RdfFormat.TURTLE)))
    own = Quad(NamedNode(f"{ID}X"), NamedNode(IDENTIFIER), Literal("X"), DefaultGraph())
    assert build_module._ontology_quads([stated, own]) == {stated}
    assert build_module._ontology_quads([own]) == set()
    assert build_module._ontology_quads([]) == set()


# ------------------------------------------------------------------------------------------ clashes


def test_a_topic_may_share_its_id_with_a_practice_in_an_incremental_build(data_copy, tmp_path):
    """Topics have an identifier space of their own: a new topic named like a practice is no clash."""
    store = tmp_path / "store"
    build(data_copy, store)
    (data_copy / "topics" / "SOTA-017.yaml").write_text("id: SOTA-017\nlabel: Same id as a practice\n")
    report = build(data_copy, store)
    assert report.incremental == 1
    assert report.counts["topic"] == 2 and report.counts["practice"] == 42


def test_a_duplicate_id_is_reported_from_the_changed_file_alone(data_copy, tmp_path, monkeypatch):
    """A new file reusing an unchanged record's id: the incremental build names the clash as a full
    read would, reading only the new file (no fall back to reading the whole folder)."""
    store = tmp_path / "store"
    build(data_copy, store)
    (data_copy / "practices" / "ZZZ-copy.yaml").write_text(
        (data_copy / "practices" / "SOTA-017.yaml").read_text(encoding="utf-8"), encoding="utf-8"
    )
    read = _reads(monkeypatch)
    with pytest.raises(DataError) as raised:
        build(data_copy, store)
    assert read == ["ZZZ-copy.yaml"]
    clash = [problem for problem in raised.value.problems if problem.rule == "id-unique"]
    assert len(clash) == 1 and clash[0].file.endswith("ZZZ-copy.yaml")
    assert f"is also used by {data_copy}/practices/SOTA-017.yaml:1;" in clash[0].message


# ------------------------------------------------------------------------------------------ reserved ids


def _paper(data: Path, paper_id: str) -> None:
    (data / "papers" / f"{paper_id}.yaml").write_text(f"id: {paper_id}\nauthors: Someone\nyear: 2016\n")


def _practice_copy(data: Path, practice_id: str) -> None:
    text = (data / "practices" / "SOTA-017.yaml").read_text(encoding="utf-8")
    (data / "practices" / f"{practice_id}.yaml").write_text(text.replace("SOTA-017", practice_id), encoding="utf-8")


def _reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    read: list[str] = []
    reading = schema.read_record

    def counting(path: Path, *args, **kwargs):
        read.append(Path(path).name)
        return reading(path, *args, **kwargs)

    monkeypatch.setattr(schema, "read_record", counting)
    return read


@pytest.mark.parametrize(
    ("before", "change", "changed"),
    [
        # A new paper named like a version of an unchanged practice.
        (None, lambda data: _paper(data, "SOTA-017-v1"), ["SOTA-017-v1.yaml"]),
        # A new practice whose version an unchanged paper is named like.
        (lambda data: _paper(data, "SOTA-099-v1"), lambda data: _practice_copy(data, "SOTA-099"), ["SOTA-099.yaml"]),
    ],
    ids=["new-record-names-a-version", "new-practice-owns-an-old-id"],
)
def test_a_reserved_id_is_reported_as_a_full_read_would_from_the_changed_files(
    data_copy, tmp_path, monkeypatch, before, change, changed
):
    """An id that is the IRI of a version of a practice, where a changed record is involved, is
    refused with the full read's problem (the other record's file shown as a full read shows it),
    reading only the changed files."""
    if before is not None:
        before(data_copy)
    store = tmp_path / "store"
    build(data_copy, store)
    change(data_copy)
    with pytest.raises(DataError) as full:
        build(data_copy, tmp_path / "full")
    read = _reads(monkeypatch)
    with pytest.raises(DataError) as incremental:
        build(data_copy, store)
    assert read == changed
    assert incremental.value.problems == full.value.problems
    assert [problem.rule for problem in full.value.problems] == ["id-unique"]


def test_from_inside_the_data_folder_files_are_shown_without_a_prefix(data_copy, tmp_path, monkeypatch):
    """Run from the data folder itself (``--data .``), the other record's file in a problem is shown
    as a full read shows it: ``practices/SOTA-017.yaml``, not ``./practices/SOTA-017.yaml``."""
    monkeypatch.chdir(data_copy)
    store = tmp_path / "store"
    build(Path("."), store)
    _paper(data_copy, "SOTA-017-v1")
    with pytest.raises(DataError) as full:
        build(Path("."), tmp_path / "full")
    with pytest.raises(DataError) as incremental:
        build(Path("."), store)
    assert incremental.value.problems == full.value.problems
    assert "(practices/SOTA-017.yaml:1;" in incremental.value.problems[0].message


@pytest.mark.parametrize(
    ("before", "change"),
    [
        # A version-like id of a paper's id: only practices have versions.
        (None, lambda data: _paper(data, "LIT-004-v1")),
        # The practice goes in the same change as the record named like its version comes.
        (None, lambda data: [(data / "practices" / "SOTA-017.yaml").unlink(), _paper(data, "SOTA-017-v1")]),
        # The record named like the new practice's version goes in the same change.
        (
            lambda data: _paper(data, "SOTA-099-v1"),
            lambda data: [(data / "papers" / "SOTA-099-v1.yaml").unlink(), _practice_copy(data, "SOTA-099")],
        ),
    ],
    ids=["version-of-a-paper", "practice-removed", "old-record-removed"],
)
def test_an_id_that_names_no_version_of_a_practice_now_is_built_incrementally(data_copy, tmp_path, before, change):
    """What a removed file or a paper said does not make an id reserved: the change is applied."""
    if before is not None:
        before(data_copy)
    store = tmp_path / "store"
    build(data_copy, store)
    change(data_copy)
    report = build(data_copy, store)
    assert report.incremental is not None and report.incremental >= 1
    assert report.counts == build(data_copy, tmp_path / "full").counts


# ------------------------------------------------------------------------------------------ applying a change


def _tamper_manifest(store: Path, change) -> None:
    path = _generation(store) / MANIFEST
    manifest = json.loads(path.read_text(encoding="utf-8"))
    change(manifest)
    path.write_text(json.dumps(manifest), encoding="utf-8")


@pytest.mark.parametrize(
    "tamper",
    [
        lambda manifest: manifest.update(triples="many"),
        lambda manifest: manifest.pop("triples"),
        lambda manifest: manifest.pop("counts"),
        lambda manifest: manifest["counts"].pop("practice"),
        lambda manifest: manifest["counts"].pop("adr"),
    ],
    ids=["triples-not-a-number", "no-triples", "no-counts", "no-count-of-the-changed-kind", "no-count-of-another-kind"],
)
def test_a_manifest_sotakg_did_not_write_gives_way_to_a_full_build(data_copy, tmp_path, monkeypatch, tamper):
    """A manifest whose counts cannot be carried on (not a number, missing) is found out once the
    copy is made: the new generation is emptied down to its marker, whatever order its folder lists
    its entries in, and built in full with the right counts (not counted on from nothing)."""
    store = tmp_path / "store"
    build(data_copy, store)
    _tamper_manifest(store, tamper)
    _edit(data_copy / "practices" / "SOTA-017.yaml", "status: Active", "status: Rejected")
    listing = Path.iterdir

    def marker_first(self: Path):
        return iter(sorted(listing(self), key=lambda entry: entry.name != GENERATION_MARKER))

    monkeypatch.setattr(Path, "iterdir", marker_first)
    report = build(data_copy, store)
    assert report.rebuilt and report.incremental is None
    assert (report.triples, report.counts) == (SHIPPED_TRIPLES, SHIPPED_COUNTS)
    assert len(_stored(store)) == SHIPPED_TRIPLES
    manifest = _manifest(store)
    assert (manifest["triples"], manifest["counts"]) == (SHIPPED_TRIPLES, SHIPPED_COUNTS)


def test_a_triple_an_unchanged_record_still_states_stays(data_copy, tmp_path):
    """A triple the change takes out stays when a record outside the change states it too: here a
    second registry row (a table sotakg did not write; no id clash) still states the old title."""
    store = tmp_path / "store"
    build(data_copy, store)
    with sqlite3.connect(_generation(store) / SOURCE_TABLE) as connection:
        row = connection.execute("SELECT * FROM records WHERE kind = 'registry'").fetchone()
        connection.execute(
            "INSERT INTO records VALUES (?, ?, ?, ?, ?, ?, ?)", ("old/registry.yaml", row[1], "old-registry", *row[3:])
        )
    connection.close()
    _edit(data_copy / "registry.yaml", "title: Topics", "title: Topic scheme")
    report = build(data_copy, store)
    assert report.incremental == 1
    titles = {
        quad.object.value
        for quad in _stored(store)
        if quad.subject == NamedNode(TOPIC_SCHEME_IRI) and quad.predicate == NamedNode(TITLE)
    }
    assert titles == {"Topics", "Topic scheme"}
    assert report.triples == SHIPPED_TRIPLES + 1 == len(_stored(store))


def test_only_regular_files_are_carried_to_the_next_generation(data_copy, tmp_path):
    """Carried files (``carry-*``) are copied on; a folder or a link so named is left behind."""
    store = tmp_path / "store"
    build(data_copy, store)
    current = _generation(store)
    outside = tmp_path / "outside.json"
    outside.write_text("not the store's", encoding="utf-8")
    (current / "carry-kept.json").write_text("kept", encoding="utf-8")
    (current / "carry-folder").mkdir()
    (current / "carry-link").symlink_to(outside)
    _edit(data_copy / "practices" / "SOTA-017.yaml", "status: Active", "status: Rejected")
    assert build(data_copy, store).incremental == 1
    carried = sorted(entry.name for entry in _generation(store).glob("carry-*"))
    assert carried == ["carry-kept.json"]
    assert (_generation(store) / "carry-kept.json").read_text(encoding="utf-8") == "kept"


def test_a_copied_source_table_that_cannot_be_opened_is_an_error_and_the_store_stays(data_copy, tmp_path, monkeypatch):
    """The copy of a table just opened cannot fail to open: if it does, the build stops saying so
    (not a silent full build), and the current generation is left as it was."""
    store = tmp_path / "store"
    build(data_copy, store)
    before = _generation(store)
    opening = SourceTable.open

    def no_writable(generation: Path, writable: bool = False):
        return None if writable else opening(generation, writable)

    monkeypatch.setattr(SourceTable, "open", staticmethod(no_writable))
    _edit(data_copy / "practices" / "SOTA-017.yaml", "status: Active", "status: Rejected")
    with pytest.raises(AssertionError, match="^the copied source table cannot be opened$"):
        build(data_copy, store)
    assert _generation(store) == before


# ------------------------------------------------------------------------------------------ planning


def _edit_practices(data: Path, count: int) -> None:
    for path in sorted((data / "practices").glob("*.yaml"))[:count]:
        _edit(path, "title: ", "title: Edited ")


@pytest.mark.parametrize(("changed", "incremental"), [(16, 16), (17, None)])
def test_at_most_sixteen_changed_files_of_a_small_folder_are_applied_incrementally(
    data_copy, tmp_path, changed, incremental
):
    """The share of changed files past which a build loads everything: 10%, but never under 16 files
    (the shipped folder has 65: 16 changed files are applied, 17 are not)."""
    store = tmp_path / "store"
    build(data_copy, store)
    _edit_practices(data_copy, changed)
    report = build(data_copy, store)
    assert report.incremental == incremental
    assert report.triples == len(_stored(store)) == build(data_copy, tmp_path / "full").triples


@pytest.mark.parametrize("case", ["other-base", "no-database"])
def test_a_current_generation_of_another_base_or_without_its_database_is_built_in_full(data_copy, tmp_path, case):
    """An incremental build needs the current generation made on the same base (sotakg version and
    ontology) and its database there; otherwise the change is built in full."""
    import shutil

    from sotakg.graph.store import DATABASE

    store = tmp_path / "store"
    build(data_copy, store)
    if case == "other-base":
        _tamper_manifest(store, lambda manifest: manifest.update(base="another sotakg"))
    else:
        shutil.rmtree(_generation(store) / DATABASE)
    _edit(data_copy / "practices" / "SOTA-017.yaml", "status: Active", "status: Rejected")
    report = build(data_copy, store)
    assert report.rebuilt and report.incremental is None
    assert report.triples == SHIPPED_TRIPLES == len(_stored(store))


# ------------------------------------------------------------------------------------------ source table


def _row(rel: str = "practices/X.yaml", kind: str = "practice", lines: str = '{"title": 3}') -> tuple:
    return (rel, kind, "X", f"{ID}X", 1, lines, '{"id": "X", "title": "Ex"}')


def test_a_record_comes_back_from_its_row_with_its_file_and_lines():
    """record_from_row: the file as stored (no prefix unless given one) and the line of each field."""
    record = build_module.record_from_row(_row())
    assert (record.kind, record.id, record.file, record.line) == ("practice", "X", "practices/X.yaml", 1)
    assert record.fields == {"id": "X", "title": "Ex"} and record.lines == {"title": 3}
    assert build_module.record_from_row(_row(), "data/").file == "data/practices/X.yaml"


@pytest.mark.parametrize(
    "row", [_row(kind="poem"), _row(lines='{"title": "three"}')], ids=["unknown-kind", "line-not-a-number"]
)
def test_a_row_sotakg_did_not_write_is_refused_naming_its_file(row):
    """Each check stands on its own: a row with a kind sotakg does not know is refused even when its
    lines are well formed, and the refusal names the row's file."""
    with pytest.raises(ValueError, match="^a source table row that sotakg did not write: 'practices/X.yaml'$"):
        build_module.record_from_row(row)


def test_records_that_do_not_match_the_record_files_are_not_written(data_copy, tmp_path):
    """_write_source_table refuses records that are not one a record file, saying so."""
    from sotakg.graph.store import snapshot

    scanned = snapshot(data_copy, None, need_hashes=True)
    records = build_module._read_records(data_copy, scanned).records
    generation = tmp_path / "generation"
    generation.mkdir()
    with pytest.raises(AssertionError, match="^records do not match the record files$"):
        build_module._write_source_table(generation, scanned, records[:-1])


# ------------------------------------------------------------------------------------------ swapping


def test_the_link_swapped_in_has_a_fresh_name_even_for_a_store_named_like_a_generation(
    data_copy, tmp_path, monkeypatch
):
    """The temporary link's name ends with the new generation's own token (the last ``.gen-`` part),
    so it is unpredictable and, left by a build killed before the swap, the next build removes it."""
    import os

    (tmp_path / "work").mkdir()
    store = tmp_path / "work" / "store.gen-0"
    planted = tmp_path / "work" / "store.gen-0.link-0"
    planted.write_text("not sotakg's", encoding="utf-8")
    build(data_copy, store)  # the name the first ``.gen-`` part would give is taken: not used
    assert planted.read_text(encoding="utf-8") == "not sotakg's"
    replacing = os.replace

    def killed_at_the_swap(source, target, *args, **kwargs):
        if ".link-" in os.fspath(source):
            raise KeyboardInterrupt
        return replacing(source, target, *args, **kwargs)

    monkeypatch.setattr(os, "replace", killed_at_the_swap)
    with pytest.raises(KeyboardInterrupt):
        build(data_copy, store, force=True)
    monkeypatch.setattr(os, "replace", replacing)
    half_made = [entry for entry in (tmp_path / "work").iterdir() if entry.is_symlink() and ".link-" in entry.name]
    assert len(half_made) == 1
    build(data_copy, store, force=True)
    assert not any(entry.is_symlink() and ".link-" in entry.name for entry in (tmp_path / "work").iterdir())
    assert planted.exists()


# ------------------------------------------------------------------------------------ pause points


def _pause_in_thread(phase: str):
    import threading

    thread = threading.Thread(target=build_module.pause_for_test, args=(phase,))
    thread.start()
    return thread


def _wait_until(predicate, seconds: float = 10.0) -> None:
    import time

    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.005)


def test_a_pause_point_writes_its_phase_whole_and_waits_until_the_marker_is_removed(tmp_path, monkeypatch):
    marker = tmp_path / "paused"
    monkeypatch.setenv("SOTAKG_TEST_PAUSE", "loading")
    monkeypatch.setenv("SOTAKG_TEST_PAUSE_MARKER", str(marker))
    thread = _pause_in_thread("loading")
    _wait_until(marker.exists)
    assert marker.read_text() == "loading"
    assert not Path(str(marker) + ".tmp").exists()  # written beside, then renamed into place
    thread.join(0.3)
    assert thread.is_alive(), "the pause must hold while the marker is there"
    marker.unlink()
    thread.join(5)
    assert not thread.is_alive()


@pytest.mark.parametrize(
    ("pause", "marker_set"),
    [("reading", False), ("", True), ("committing", True)],
    ids=["no-marker", "no-phase", "other"],
)
def test_a_pause_point_not_asked_for_returns_at_once_and_writes_nothing(tmp_path, monkeypatch, pause, marker_set):
    marker = tmp_path / "paused"
    monkeypatch.setenv("SOTAKG_TEST_PAUSE", pause)
    if marker_set:
        monkeypatch.setenv("SOTAKG_TEST_PAUSE_MARKER", str(marker))
    else:
        monkeypatch.delenv("SOTAKG_TEST_PAUSE_MARKER", raising=False)
    thread = _pause_in_thread("reading")
    thread.join(5)
    assert not thread.is_alive()
    assert list(tmp_path.iterdir()) == []


def test_a_pause_gives_up_after_a_minute(tmp_path, monkeypatch):
    import time

    clock = iter([1000.0, 1000.0, 1059.9, 1060.1])
    monkeypatch.setattr(time, "monotonic", lambda: next(clock))
    monkeypatch.setattr(time, "sleep", lambda seconds: None)
    marker = tmp_path / "paused"
    monkeypatch.setenv("SOTAKG_TEST_PAUSE", "swapping")
    monkeypatch.setenv("SOTAKG_TEST_PAUSE_MARKER", str(marker))
    build_module.pause_for_test("swapping")
    assert marker.read_text() == "swapping"
    assert next(clock, None) is None  # the deadline is 60 s after the start, checked on each turn


def test_a_full_build_passes_its_pause_points_in_order_with_its_steps(data_copy, tmp_path, monkeypatch):
    seen: list[tuple] = []
    monkeypatch.setattr(build_module, "pause_for_test", lambda phase: seen.append(("pause", phase)))
    store = tmp_path / "store"
    report = build(data_copy, store, progress=lambda done, total, name: seen.append((done, total, name)))
    assert seen == [
        ("pause", "reading"),
        (0, 3, "reading the records"),
        ("pause", "loading"),
        (1, 3, "loading the graph"),
        (2, 3, "swapping it in"),
        ("pause", "committing"),
        ("pause", "swapping"),
        (3, 3, "built"),
    ]
    assert report.rebuilt and report.incremental is None and report.triples == SHIPPED_TRIPLES
    assert report.counts == SHIPPED_COUNTS and report.store == store and report.seconds > 0


# ------------------------------------------------------------------------------------- build() itself


def test_the_guard_hears_of_the_commit_before_the_swap_and_not_before_loading(data_copy, tmp_path, monkeypatch):
    from sotakg.graph.store import InterruptGuard

    guard = InterruptGuard()
    committing_at: dict[str, bool] = {}
    monkeypatch.setattr(build_module, "pause_for_test", lambda phase: committing_at.setdefault(phase, guard.committing))
    build(data_copy, tmp_path / "store", guard=guard)
    assert committing_at == {"reading": False, "loading": False, "committing": False, "swapping": True}
    assert guard.committing


def test_a_build_with_nothing_to_do_reports_the_stored_counts_and_triples(data_copy, tmp_path):
    store = tmp_path / "store"
    build(data_copy, store)
    generation = _generation(store)
    again = build(data_copy, store)
    assert not again.rebuilt and again.incremental is None
    assert again.counts == SHIPPED_COUNTS and again.triples == SHIPPED_TRIPLES and again.store == store
    assert 0 < again.seconds < 60
    assert _generation(store) == generation


def test_a_touched_file_is_remembered_so_the_next_command_need_not_hash_it(data_copy, tmp_path):
    import os

    store = tmp_path / "store"
    build(data_copy, store)
    before = _manifest(store)["stat_digest"]
    os.utime(data_copy / "practices" / "SOTA-049.yaml", ns=(1_000_000_000, 1_000_000_000))
    assert not build(data_copy, store).rebuilt
    after = _manifest(store)
    assert after["stat_digest"] != before
    assert snapshot(data_copy, _generation(store)).stat_digest == after["stat_digest"]


def test_an_incremental_build_reports_how_many_files_it_applied_and_drops_the_old_generation(data_copy, tmp_path):
    store = tmp_path / "store"
    build(data_copy, store)
    old = _generation(store)
    _edit(data_copy / "practices" / "SOTA-049.yaml", "title: ", "title: Edited ")
    (data_copy / "practices" / "SOTA-437.yaml").unlink()
    report = build(data_copy, store)
    assert report.rebuilt and report.incremental == 2
    assert report.counts["practice"] == 41
    assert not old.exists() and _generation(store) != old
    assert report.triples == len(_stored(store))


def test_a_forced_build_rebuilds_in_full_even_when_nothing_changed(data_copy, tmp_path):
    store = tmp_path / "store"
    build(data_copy, store)
    old = _generation(store)
    report = build(data_copy, store, force=True)
    assert report.rebuilt and report.incremental is None and report.triples == SHIPPED_TRIPLES
    assert not old.exists()


def test_a_snapshot_taken_against_another_generation_is_not_trusted(data_copy, tmp_path):
    store = tmp_path / "store"
    stale = snapshot(data_copy, None)  # taken before any build
    build(data_copy, store)
    _edit(data_copy / "practices" / "SOTA-049.yaml", "title: ", "title: Edited ")
    report = build(data_copy, store, scanned=stale)
    assert report.rebuilt and report.incremental == 1


# ------------------------------------------------------------------------------------- the build lock


def test_a_busy_store_is_refused_at_once_unless_the_build_is_told_to_wait(data_copy, tmp_path, monkeypatch):
    """The rule: without ``wait_seconds`` a build that finds another holding the store's lock raises
    StoreBusy at once, never sleeping on the lock, and writes nothing (the bug: a wait by default)."""
    import time

    from sotakg.errors import StoreBusy
    from sotakg.graph.store import build_lock

    def no_waiting(seconds: float) -> None:
        raise AssertionError(f"the build waited {seconds} s for the lock")

    store = tmp_path / "store"
    with build_lock(StoreLayout(store)):
        monkeypatch.setattr(time, "sleep", no_waiting)
        with pytest.raises(StoreBusy, match="another sotakg build is running"):
            build(data_copy, store)
    assert StoreLayout(store).current_generation() is None


def test_a_build_told_to_wait_goes_on_once_the_other_holder_lets_the_lock_go(data_copy, tmp_path, monkeypatch):
    """The rule: ``wait_seconds`` is passed to the lock: a build finding the store busy waits, and
    builds once the other holder lets go (the bug: the wait dropped, StoreBusy at once). The other
    holder lets go during the build's first wait, so nothing races a clock."""
    import contextlib
    import time

    from sotakg.graph.store import build_lock

    store = tmp_path / "store"
    holder = contextlib.ExitStack()
    holder.enter_context(build_lock(StoreLayout(store)))
    waits: list[float] = []

    def the_other_build_finishes(seconds: float) -> None:
        waits.append(seconds)
        holder.close()

    monkeypatch.setattr(time, "sleep", the_other_build_finishes)
    try:
        report = build(data_copy, store, wait_seconds=30)
    finally:
        holder.close()
    assert waits, "the build never waited for the lock"
    assert report.rebuilt and report.triples == SHIPPED_TRIPLES == len(_stored(store))


# ------------------------------------------------------------------------------------- what build() is given


def test_a_snapshot_taken_before_there_was_a_store_serves_the_first_build(data_copy, tmp_path, monkeypatch):
    """The rule: a caller's snapshot taken when there was no store is taken against no generation, so
    the first build uses it as it is and scans nothing again (the bug: the name of the missing
    current generation asked for)."""
    scanned = snapshot(data_copy, None)
    scans: list[Path] = []
    scanning = build_module.snapshot

    def counted(data_dir: Path, *args, **kwargs):
        scans.append(data_dir)
        return scanning(data_dir, *args, **kwargs)

    monkeypatch.setattr(build_module, "snapshot", counted)
    report = build(data_copy, tmp_path / "store", scanned=scanned)
    assert scans == []
    assert report.rebuilt and report.counts == SHIPPED_COUNTS and report.triples == SHIPPED_TRIPLES


def test_a_build_given_the_data_read_reads_no_record_again(data_copy, tmp_path, monkeypatch):
    """The rule: ``data`` is the folder as read_data read it: the build takes its records as they
    are and reads no record file again (the bug: the records read a second time)."""
    store = tmp_path / "store"
    data = build_module.read_data(data_copy, store)
    read = _reads(monkeypatch)
    report = build(data_copy, store, data=data)
    assert read == []
    assert report.rebuilt and report.counts == SHIPPED_COUNTS and report.triples == SHIPPED_TRIPLES


def test_a_forced_build_over_a_current_generation_reads_each_record_file_once(data_copy, tmp_path, monkeypatch):
    """The rule: a full build has no change to try on the current generation: each record file is
    read once (the bug: the missing change tried, its failure taken for an unusable table, and the
    whole folder read again)."""
    store = tmp_path / "store"
    build(data_copy, store)
    read = _reads(monkeypatch)
    report = build(data_copy, store, force=True)
    assert sorted(read) == sorted(path.name for path in data_copy.rglob("*.yaml"))
    assert report.rebuilt and report.incremental is None and report.triples == SHIPPED_TRIPLES


def test_a_full_build_lists_the_data_folder_once(data_copy, tmp_path, monkeypatch):
    """The rule: the folder's listing (a stat a file: what a no-change command costs at scale) is
    made once a build and serves both the records and the source table (the bug: the records read
    from a second listing)."""
    from sotakg.graph import store as store_module

    listings: list[Path] = []
    for module in (store_module, schema, build_module):
        listing = module.scan_sources

        def counted(data_dir: Path, *args, _listing=listing, **kwargs):
            listings.append(data_dir)
            return _listing(data_dir, *args, **kwargs)

        monkeypatch.setattr(module, "scan_sources", counted)
    report = build(data_copy, tmp_path / "store")
    assert listings == [data_copy]
    assert report.rebuilt and report.triples == SHIPPED_TRIPLES


# ------------------------------------------------------------------------------------- hashes and stats


def test_a_forced_build_records_the_hash_of_every_file(data_copy, tmp_path, monkeypatch):
    """The rule: a forced build hashes every file, also when nothing changed since the last build,
    so its source table holds each file's hash and touching a file afterwards rebuilds nothing (the
    bug: the quick scan's missing hashes written as empty, and the next touch taken for a change)."""
    import hashlib
    import os

    from sotakg.graph import store as store_module

    monkeypatch.setattr(store_module, "RACY_NS", 1)  # no file is racy: only a changed stat has it read again
    store = tmp_path / "store"
    build(data_copy, store)
    assert build(data_copy, store, force=True).rebuilt
    table = SourceTable.open(_generation(store))
    assert table is not None
    try:
        hashes = table.file_hashes()
    finally:
        table.close()
    files = sorted(str(path.relative_to(data_copy)) for path in data_copy.rglob("*.yaml"))
    assert hashes == {rel: hashlib.sha256((data_copy / rel).read_bytes()).hexdigest() for rel in files}
    os.utime(data_copy / "practices" / "SOTA-049.yaml", ns=(1_000_000_000, 1_000_000_000))
    assert not build(data_copy, store).rebuilt


def test_a_build_given_the_data_read_with_nothing_changed_writes_nothing(data_copy, tmp_path):
    """The rule: a build that finds the store up to date and no file touched since it was built
    leaves the store's files as they are, even when handed every file's hash (the bug: the stats
    written again anyway: a new manifest file each time)."""
    store = tmp_path / "store"
    build(data_copy, store)
    files = [_generation(store) / MANIFEST, _generation(store) / SOURCE_TABLE]
    before = [(path.stat().st_ino, path.stat().st_mtime_ns) for path in files]
    data = build_module.read_data(data_copy, store)
    assert data.snapshot.hashes
    assert not build(data_copy, store, data=data).rebuilt
    assert [(path.stat().st_ino, path.stat().st_mtime_ns) for path in files] == before


def test_a_store_whose_manifest_gives_no_counts_is_rebuilt_and_counted(data_copy, tmp_path, runner):
    """The rule: a manifest without the counts and triples every build writes is not one sotakg
    wrote, so the store is rebuilt and reports what it holds (the bug: "up to date (0 triples)")."""
    from sotakg.cli import cli

    store = tmp_path / "store"
    full = build(data_copy, store)
    _tamper_manifest(store, lambda manifest: [manifest.pop("counts"), manifest.pop("triples")])
    report = build(data_copy, store)
    assert report.rebuilt
    assert (report.counts, report.triples) == (full.counts, full.triples)
    _tamper_manifest(store, lambda manifest: manifest.pop("triples"))
    result = runner.invoke(cli, ["--data", str(data_copy), "--store", str(store), "build"])
    assert result.exit_code == 0, result.output
    assert result.output.startswith(f"Built {store}: ") and f"; {full.triples} triples in " in result.output


def test_a_rebuild_reports_the_time_it_took(data_copy, tmp_path):
    """The rule: a report's seconds are the build's own duration, within the time the call took
    (the bug: a clock reading added instead of subtracted)."""
    import time

    store = tmp_path / "store"
    started = time.perf_counter()
    full = build(data_copy, store)
    took = time.perf_counter() - started
    assert full.rebuilt and 0 < full.seconds <= took
    _edit(data_copy / "practices" / "SOTA-049.yaml", "title: ", "title: Edited ")
    started = time.perf_counter()
    incremental = build(data_copy, store)
    took = time.perf_counter() - started
    assert incremental.incremental == 1 and 0 < incremental.seconds <= took


# ------------------------------------------------------------------------------------- reading the files


def test_read_all_gives_the_bytes_of_every_readable_record_file_and_nothing_else(data_copy, tmp_path, monkeypatch):
    """The rule: _read_all gives each record file's bytes, those the snapshot read already as they
    are and the others read now; a file outside the record folders, a link out of the data folder
    (never opened) and a file past the size cap (read_record names it) are left out."""
    outside = tmp_path / "outside.yaml"
    outside.write_text("id: LIT-999\nauthors: Someone\nyear: 2016\n", encoding="utf-8")
    (data_copy / "papers" / "LIT-999.yaml").symlink_to(outside)
    (data_copy / "notes").mkdir()
    (data_copy / "notes" / "readme.yaml").write_text("id: NOTE\n", encoding="utf-8")
    large = data_copy / "papers" / "LIT-004.yaml"
    large.write_bytes(large.read_bytes() + b"# " + b"x" * 200_000 + b"\n")
    monkeypatch.setenv("SOTAKG_MAX_FILE_BYTES", "100000")
    already = "practices/SOTA-017.yaml"
    scanned = build_module.DataSnapshot(data_copy, {}, "", "", contents={already: b"read by the scan"})
    contents = build_module._read_all(scanned)
    folders = ("adrs", "papers", "practices", "topics")
    readable = sorted(
        str(path.relative_to(data_copy))
        for path in data_copy.rglob("*.yaml")
        if path.parent.name in folders and path not in (large, data_copy / "papers" / "LIT-999.yaml")
    )
    assert sorted(contents) == sorted([*readable, "registry.yaml"])
    assert contents.pop(already) == b"read by the scan"
    assert all(data == (data_copy / rel).read_bytes() for rel, data in contents.items())


def test_a_full_build_after_many_changes_reads_the_files_the_scan_did_not(data_copy, tmp_path, monkeypatch):
    """The rule: past the incremental share a build loads everything, reading now the unchanged
    files whose hash the scan took from the last build (none is racy here, so the scan read only
    the changed ones), and makes what a fresh build makes."""
    from sotakg.graph import store as store_module

    monkeypatch.setattr(store_module, "RACY_NS", 1)
    store = tmp_path / "store"
    build(data_copy, store)
    _edit_practices(data_copy, 17)
    scanned = snapshot(data_copy, _generation(store))
    assert len(scanned.contents) == 17  # the other files are the build's to read
    report = build(data_copy, store, scanned=scanned)
    assert report.rebuilt and report.incremental is None
    fresh = build(data_copy, tmp_path / "fresh")
    assert (report.counts, report.triples) == (fresh.counts, fresh.triples)
    assert _stored(store) == _stored(tmp_path / "fresh")


# ------------------------------------------------------------------------------------- problems in file order


def test_a_new_practice_named_like_an_unchanged_topic_is_no_clash(data_copy, tmp_path):
    """The rule: an unchanged topic's id is in the topics' own identifier space: a new practice of
    the same id clashes with nothing, in an incremental build as in a full one."""
    topic = "distributed-optimization"
    _practice_copy(data_copy, topic)
    assert build(data_copy, tmp_path / "full").counts["practice"] == 43
    store = tmp_path / "store"
    (data_copy / "practices" / f"{topic}.yaml").unlink()
    build(data_copy, store)
    _practice_copy(data_copy, topic)
    report = build(data_copy, store)
    assert report.incremental == 1
    assert report.counts["practice"] == 43 and report.counts["topic"] == 1


def test_clashes_of_several_ids_are_listed_in_file_order_as_a_full_read_lists_them(data_copy, tmp_path, monkeypatch):
    """The rule: the id-unique problems of an incremental build come in the order of their files,
    as a full read gives them, whichever clash the changed files met first (here SOTA-001's, whose
    second file comes after the file that clashes with SOTA-017)."""
    store = tmp_path / "store"
    build(data_copy, store)
    text = (data_copy / "practices" / "SOTA-017.yaml").read_text(encoding="utf-8")
    for name, practice_id in [("SOTA-001", "SOTA-001"), ("SOTA-500", "SOTA-017"), ("SOTA-999", "SOTA-001")]:
        (data_copy / "practices" / f"{name}.yaml").write_text(text.replace("SOTA-017", practice_id), encoding="utf-8")
    with pytest.raises(DataError) as full:
        build(data_copy, tmp_path / "full")
    read = _reads(monkeypatch)
    with pytest.raises(DataError) as incremental:
        build(data_copy, store)
    assert read == ["SOTA-001.yaml", "SOTA-500.yaml", "SOTA-999.yaml"]
    assert incremental.value.problems == full.value.problems
    clashes = [problem.file for problem in full.value.problems if problem.rule == "id-unique"]
    assert [Path(file).name for file in clashes] == ["SOTA-500.yaml", "SOTA-999.yaml"]


def test_reserved_ids_are_listed_in_file_order_as_a_full_read_lists_them(data_copy, tmp_path, monkeypatch):
    """The rule: the reserved-id problems of an incremental build come in the order of their files,
    as a full read gives them: an unchanged paper named like a new practice's version comes before a
    new paper named like a version of another practice, as their files do."""
    _paper(data_copy, "SOTA-099-v1")
    store = tmp_path / "store"
    build(data_copy, store)
    _practice_copy(data_copy, "SOTA-099")
    _paper(data_copy, "SOTA-364-v1")
    with pytest.raises(DataError) as full:
        build(data_copy, tmp_path / "full")
    read = _reads(monkeypatch)
    with pytest.raises(DataError) as incremental:
        build(data_copy, store)
    assert read == ["SOTA-364-v1.yaml", "SOTA-099.yaml"]
    assert incremental.value.problems == full.value.problems
    assert [Path(problem.file).name for problem in full.value.problems] == ["SOTA-099-v1.yaml", "SOTA-364-v1.yaml"]


# ------------------------------------------------------------------------------------- pause points, edges


def test_a_pause_gives_up_at_sixty_seconds_sharp(tmp_path, monkeypatch):
    """The rule: the pause's deadline is 60 s after it began, and a clock reading of exactly that
    ends it (the bound is exclusive)."""
    import time

    clock = iter([1000.0, 1060.0])
    monkeypatch.setattr(time, "monotonic", lambda: next(clock))
    monkeypatch.setattr(time, "sleep", lambda seconds: None)
    marker = tmp_path / "paused"
    monkeypatch.setenv("SOTAKG_TEST_PAUSE", "loading")
    monkeypatch.setenv("SOTAKG_TEST_PAUSE_MARKER", str(marker))
    build_module.pause_for_test("loading")
    assert marker.read_text() == "loading"
    assert next(clock, None) is None


def test_a_pause_looks_for_its_marker_again_within_a_tenth_of_a_second(tmp_path, monkeypatch):
    """The rule: a paused build notices the marker is gone within a tenth of a second, so a test
    that resumes it does not wait on it (the bug: a second a look)."""
    import time

    marker = tmp_path / "paused"
    naps: list[float] = []

    def nap(seconds: float) -> None:
        naps.append(seconds)
        marker.unlink()

    monkeypatch.setattr(time, "sleep", nap)
    monkeypatch.setenv("SOTAKG_TEST_PAUSE", "committing")
    monkeypatch.setenv("SOTAKG_TEST_PAUSE_MARKER", str(marker))
    build_module.pause_for_test("committing")
    assert len(naps) == 1 and 0 < naps[0] <= 0.1
