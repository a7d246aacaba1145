"""Exact behaviour of incremental validation (rules/incremental.py), pinned down for mutation testing.

Which focus nodes a change affects and what graph they are validated on, given a small hand-made
store; when stored results are reused and when they are not (a findings file or lineage sotakg did
not write, results about blank nodes); how findings are located from the source table; and how the
data folder is named in findings. Each test states one behaviour with exact expected values.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest
from pyoxigraph import DefaultGraph, Literal, NamedNode, Quad, Store

from sotakg.graph import vocab as v
from sotakg.graph.build import build
from sotakg.graph.store import MANIFEST, SOURCE_TABLE, StoreLayout, open_read_only
from sotakg.rules import incremental
from sotakg.rules.validate import DEFAULT_ENGINE, ENGINES, RawResult, shapes_paths, validate

from .conftest import SHIPPED_DATA

X = "https://example.org/"
NAMED = NamedNode(X + "graph")


def _store(*triples: tuple[str, str, str | Literal], graph: NamedNode | None = None) -> Store:
    """An in-memory store of ``triples`` (IRIs as text, literals as Literal), in ``graph`` if given."""
    store = Store()
    _add(store, *triples, graph=graph)
    return store


def _add(store: Store, *triples: tuple[str, str, str | Literal], graph: NamedNode | None = None) -> None:
    for s, p, o in triples:
        obj = o if isinstance(o, Literal) else NamedNode(o)
        store.add(Quad(NamedNode(s), NamedNode(p), obj, graph or DefaultGraph()))


# ------------------------------------------------------------------------------------ affected nodes


def test_affected_are_the_changed_nodes_those_linking_to_them_and_the_holders_of_their_identifiers():
    a, d, p, q, s, z = (X + name for name in "adpqsz")
    store = _store(
        (d, v.CITES, a),  # links to the changed node
        (a, v.CITES, p),  # a link out that did not change
        (q, v.IDENTIFIER, Literal("ID-1")),
        (s, v.IDENTIFIER, Literal("ID-1")),
        (z, v.TITLE, Literal("ID-1")),  # the same text, but no identifier
    )
    assert incremental.affected_nodes(store, {"subjects": [a], "links": {}, "identifiers": ["ID-1"]}) == {a, d, q, s}


def test_affected_take_in_whole_chains_of_supersession_and_revision_both_ways():
    a, b, c, d, e, f, p = (X + name for name in "abcdefp")
    store = _store(
        (a, v.REPLACES, b),
        (b, v.WAS_REVISION_OF, c),
        (c, v.REPLACES, d),
        (c, v.CITES, p),  # not a chain link
        (e, v.IS_REPLACED_BY, f),  # another chain, not connected
    )
    assert incremental.affected_nodes(store, {"subjects": [c], "links": {}, "identifiers": []}) == {a, b, c, d}


def test_affected_include_the_targets_of_changed_links_that_rules_follow():
    a, p, status = X + "a", X + "p", X + "status"
    changes = {"subjects": [a], "links": {v.CITES: [p], v.HAS_STATUS: [status]}, "identifiers": []}
    assert incremental.affected_nodes(Store(), changes) == {a, p}


def test_a_lineage_entry_may_leave_out_any_of_its_keys():
    p = X + "p"
    assert incremental.affected_nodes(Store(), {}) == set()
    assert incremental.affected_nodes(Store(), {"links": {v.CITES: [p]}}) == {p}


def test_affected_nodes_ignore_statements_in_named_graphs():
    a, b, c, d, q = (X + name for name in "abcdq")
    store = _store(
        (d, v.CITES, a),
        (q, v.IDENTIFIER, Literal("ID-1")),
        (a, v.REPLACES, b),
        (c, v.WAS_REVISION_OF, a),
        graph=NAMED,
    )
    assert incremental.affected_nodes(store, {"subjects": [a], "links": {}, "identifiers": ["ID-1"]}) == {a}


def test_exactly_max_affected_nodes_are_still_validated_partially():
    nodes = [f"{X}n{i}" for i in range(incremental.MAX_AFFECTED)]
    changes = {"subjects": nodes[:1], "links": {v.CITES: nodes}, "identifiers": []}
    assert incremental.affected_nodes(Store(), changes) == set(nodes)


# ------------------------------------------------------------------------- stored results and reuse


@pytest.fixture
def shipped(tmp_path: Path) -> tuple[Path, Path]:
    """(data folder, store) of a private copy of the shipped data, built."""
    data = tmp_path / "data"
    shutil.copytree(SHIPPED_DATA, data)
    store = tmp_path / "store"
    build(data, store)
    return data, store


def _current(store: Path) -> tuple[Store, Path]:
    generation = StoreLayout(store).current_generation()
    assert generation is not None
    return open_read_only(StoreLayout(store)), generation


def _run(graph: Store, focus: set[str] | None) -> list[RawResult]:
    return ENGINES[DEFAULT_ENGINE](graph, shapes_paths(), None, focus)


KEY = incremental.cache_key(DEFAULT_ENGINE, shapes_paths())


def _validate(store: Path) -> tuple[list[RawResult], int | None]:
    graph, generation = _current(store)
    return incremental.results_for_generation(graph, generation, KEY, _run, RawResult)


def _findings_file(store: Path) -> Path:
    return _current(store)[1] / f"{incremental.FINDINGS_PREFIX}{KEY}.json"


def _edit_and_build(data: Path, store: Path) -> None:
    practice = data / "practices" / "SOTA-017.yaml"
    practice.write_text(practice.read_text(encoding="utf-8").replace("status: Active", "status: Bogus"))
    assert build(data, store).incremental == 1


def _sorted(results: list[RawResult]) -> list[RawResult]:
    return sorted(results, key=repr)


def test_stored_results_with_a_focus_that_is_not_text_are_validated_again(shipped: tuple[Path, Path]):
    _data, store = shipped
    first, _ = _validate(store)
    stored = json.loads(_findings_file(store).read_text())
    stored["results"][0][0] = 7
    _findings_file(store).write_text(json.dumps(stored))
    results, checked = _validate(store)
    assert checked is None
    assert _sorted(results) == _sorted(first)


def test_a_lineage_entry_sotakg_did_not_write_means_a_full_validation(shipped: tuple[Path, Path]):
    data, store = shipped
    _validate(store)
    _edit_and_build(data, store)
    generation = _current(store)[1]
    manifest = json.loads((generation / MANIFEST).read_text())
    manifest["lineage"] = {fingerprint: {"subjects": 5} for fingerprint in manifest["lineage"]}
    (generation / MANIFEST).write_text(json.dumps(manifest))
    results, checked = _validate(store)
    assert checked is None
    assert _sorted(results) == _sorted(_run(_current(store)[0], None))
    assert any(r.focus == v.ID + "SOTA-017" and r.path == v.HAS_STATUS for r in results)


@pytest.mark.parametrize(
    "triples, limit",
    [
        (None, 1_000),
        ("many", 1_000),
        (True, 1_000),
        (-5, 1_000),
        (0, 1_000),
        (100_099, 1_000),
        (100_100, 1_001),
        (1_080_000, 10_800),
        (5_000_000, 50_000),
        (10**9, 50_000),
    ],
)
def test_the_affected_limit_grows_with_the_graph_between_its_bounds(triples, limit):
    assert incremental.affected_limit(triples) == limit


def test_an_edit_affecting_more_nodes_than_the_graph_pays_for_is_validated_in_full(
    shipped: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
):
    data, store = shipped
    _validate(store)
    _edit_and_build(data, store)
    _results, checked = _validate(store)
    assert checked is not None and checked > 1  # SOTA-017, and what links to it and from it
    monkeypatch.setattr(incremental, "MIN_AFFECTED_LIMIT", 1)
    monkeypatch.setattr(incremental, "TRIPLES_PER_AFFECTED_NODE", 10**9)  # a limit of one node
    _edit_and_build_back(data, store)
    results, checked_again = _validate(store)
    assert checked_again is None
    assert _sorted(results) == _sorted(_run(_current(store)[0], None))


def _edit_and_build_back(data: Path, store: Path) -> None:
    practice = data / "practices" / "SOTA-017.yaml"
    practice.write_text(practice.read_text(encoding="utf-8").replace("status: Bogus", "status: Active"))
    assert build(data, store).incremental == 1


def test_stored_results_about_blank_nodes_are_not_reused(shipped: tuple[Path, Path]):
    data, store = shipped
    _validate(store)
    _edit_and_build(data, store)
    stored = json.loads(_findings_file(store).read_text())
    blank = [["_:b1", None, None, v.SH + "someShape", v.SH + "Violation"]]
    _findings_file(store).write_text(json.dumps({**stored, "results": stored["results"] + blank}))
    results, checked = _validate(store)
    assert checked is None
    assert _sorted(results) == _sorted(_run(_current(store)[0], None))


def test_removing_a_cited_paper_rechecks_the_practices_citing_it(tmp_path: Path):
    data = tmp_path / "data"
    shutil.copytree(SHIPPED_DATA, data)
    store = tmp_path / "store"
    validate(data, store)
    (data / "papers" / "LIT-004.yaml").unlink()
    report = validate(data, store)
    full = validate(data, tmp_path / "full")
    assert report.findings == full.findings
    assert any((f.rule_id, f.record, f.value) == ("cites-resolve", "SOTA-249", "LIT-004") for f in full.findings)


# ----------------------------------------------------------------------------------- source locator


@pytest.fixture
def locator(built_store: tuple[Path, Path]):
    _data, store = built_store
    found = incremental.SourceLocator(_current(store)[1], "data/")
    yield found
    found.close()


def test_a_record_is_located_in_its_file_as_shown(locator: incremental.SourceLocator):
    record, field = locator.record_of(v.ID + "SOTA-017")
    assert record is not None and field is None
    assert (record.kind, record.id, record.file, record.line) == (
        "practice",
        "SOTA-017",
        "data/practices/SOTA-017.yaml",
        1,
    )


def test_a_version_is_located_in_its_practice_as_the_version_field(locator: incremental.SourceLocator):
    record, field = locator.record_of(v.ID + "SOTA-017-v2")
    assert record is not None
    assert (record.id, record.file, field) == ("SOTA-017", "data/practices/SOTA-017.yaml", "version")


@pytest.mark.parametrize("focus", ["NOPE-1", "NOPE-1-v1", "LIT-004-v1", "SOTA-017-vX"])
def test_a_focus_without_a_record_has_no_location(locator: incremental.SourceLocator, focus: str):
    assert locator.record_of(v.ID + focus) == (None, None)


def test_a_source_row_sotakg_did_not_write_has_no_location(shipped: tuple[Path, Path]):
    _data, store = shipped
    generation = _current(store)[1]
    with sqlite3.connect(generation / SOURCE_TABLE) as connection:
        connection.execute("UPDATE records SET kind = 'bogus' WHERE id = 'SOTA-017'")
    connection.close()
    found = incremental.SourceLocator(generation, "")
    try:
        assert found.record_of(v.ID + "SOTA-017") == (None, None)
        assert found.record_of(v.ID + "SOTA-017-v1") == (None, None)
    finally:
        found.close()


def test_a_generation_without_a_source_table_locates_nothing(tmp_path: Path):
    found = incremental.SourceLocator(tmp_path, "")
    assert found.record_of(v.ID + "SOTA-017") == (None, None)
    found.close()


# ------------------------------------------------------------------------------------- shown prefix


def test_the_data_folder_is_named_relative_to_the_working_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    (tmp_path / "work" / "data").mkdir(parents=True)
    monkeypatch.chdir(tmp_path / "work")
    assert incremental.shown_prefix(tmp_path / "work") == ""
    assert incremental.shown_prefix(Path(".")) == ""
    assert incremental.shown_prefix(tmp_path / "work" / "data") == "data/"
    assert incremental.shown_prefix(tmp_path) == f"{tmp_path}/"
