"""Incremental build and validation, freshness without reading files, and locations without parsing.

The differential tests apply random edits (add, remove, change any field, rename, break a file) and
check the incremental result against a fresh full run: the same findings, the same triples.
"""

from __future__ import annotations

import json
import os
import random
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyoxigraph import DefaultGraph

from sotakg.cli import cli
from sotakg.errors import DataError
from sotakg.graph import build as build_module
from sotakg.graph import store as store_module
from sotakg.graph.build import build
from sotakg.graph.store import StoreLayout, is_fresh, open_read_only, read_manifest, scan_data, snapshot
from sotakg.records import schema
from sotakg.records.schema import KINDS, Record, dump_record, read_record
from sotakg.records.sources import scan_sources
from sotakg.rules import incremental
from sotakg.rules.validate import ENGINES, RawResult, shapes_paths, validate

from .conftest import SHIPPED_DATA


def _quads(store_path: Path) -> set[str]:
    store = open_read_only(StoreLayout(store_path))
    return {str(quad) for quad in store.quads_for_pattern(None, None, None, DefaultGraph())}


def _full_run(data: Path, scratch: Path):
    """Findings and triples of a fresh build and a full validation (a store nobody built before)."""
    shutil.rmtree(scratch, ignore_errors=True)
    report = validate(data, scratch / "store")
    return report, (_quads(scratch / "store") if report.readable else None)


# ------------------------------------------------------------------------------------------ edits

STATUSES = ("Active", "Proposed", "Rejected", "Superseded", "Accepted", "Bogus")


def _records(data: Path) -> list[tuple[Path, Record]]:
    found = []
    for source in scan_sources(data):
        if source.kind is None:
            continue
        try:
            found.append((Path(source.path), read_record(Path(source.path), source.kind)))
        except Exception:  # a file an earlier edit broke on purpose
            continue
    return found


def _random_value(rng: random.Random, kind: str, name: str, ids: list[str], topics: list[str]):
    spec = KINDS[kind].field(name)
    assert spec is not None
    if name == "status":
        return rng.choice(STATUSES)
    if name == "topic":
        return rng.choice([*topics, "unplaced", "no-such-topic"])
    if name in ("version", "declared_size"):
        return rng.choice((0, 1, 2, 3, 5))
    if name == "year":
        return rng.choice((1999, 2012, 2020, 2024))
    if name == "arxiv":
        return rng.choice(("2101.00001", "1201.12345", "not-an-id"))
    if spec.type == "ids":
        pool = [*ids, "LIT-999", "ADR-999", "SOTA-999"]
        return sorted(set(rng.sample(pool, k=rng.randint(0, 3))))
    if spec.type == "id":
        return rng.choice([*ids, "ADR-999"])
    if name == "reason":
        return f"Replaced by {rng.choice(ids)}; see {rng.choice(ids)}."
    return rng.choice(("", "A title", "Use gradient clipping", "x" * 40))


def apply_edit(rng: random.Random, data: Path) -> str:
    """One random edit of the data folder; returns what it did (for the failure message)."""
    records = _records(data)
    ids = sorted({record.id for _path, record in records if record.kind in ("practice", "paper", "adr")})
    topics = sorted({record.id for _path, record in records if record.kind == "topic"})
    path, record = rng.choice(records)
    action = rng.choices(
        ("change", "drop-field", "remove", "rename", "add", "break", "id"), weights=(8, 2, 2, 2, 2, 1, 1)
    )[0]
    if action == "remove":
        path.unlink()
    elif action == "rename":
        path.rename(path.with_name(f"renamed-{rng.randint(0, 999)}.yaml"))
    elif action == "break":
        path.write_text("id: [unclosed\n", encoding="utf-8")
    elif action == "add":
        kind = rng.choice(("practice", "paper", "adr"))
        prefix = {"practice": "SOTA", "paper": "LIT", "adr": "ADR"}[kind]
        new_id = rng.choice(ids) if rng.random() < 0.2 else f"{prefix}-{rng.randint(900, 999)}"  # or a duplicate
        fields = {"id": new_id}
        for spec in KINDS[kind].fields[1:]:
            if rng.random() < 0.6:
                fields[spec.name] = _random_value(rng, kind, spec.name, ids, topics)
        folder = data / KINDS[kind].folder
        (folder / f"new-{rng.randint(0, 9999)}.yaml").write_text(dump_record(Record(kind, new_id, fields)))
        return f"add {kind} {new_id}"
    else:
        fields = dict(record.fields)
        names = [spec.name for spec in KINDS[record.kind].fields if spec.name != "id"]
        if action == "id" and record.kind != "registry":
            fields["id"] = rng.choice([*ids, *topics]) if rng.random() < 0.3 else f"SOTA-{rng.randint(900, 999)}"
        elif action == "drop-field" and fields.keys() - {"id"}:
            del fields[rng.choice(sorted(fields.keys() - {"id"}))]
        elif names:
            name = rng.choice(names)
            fields[name] = _random_value(rng, record.kind, name, ids, topics)
        if record.kind == "registry":
            path.write_text(dump_record(Record("registry", "registry", fields)))
        else:
            path.write_text(dump_record(Record(record.kind, str(fields["id"]), fields)))
    return f"{action} {path.name}"


# ------------------------------------------------------------------------------------------ differential


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1), rounds=st.integers(1, 4))
def test_random_edits_incremental_equals_full(tmp_path_factory: pytest.TempPathFactory, seed: int, rounds: int):
    _edit_and_compare(tmp_path_factory, seed, rounds)


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1), rounds=st.integers(1, 4))
def test_random_edits_of_old_files_read_only_their_buckets_and_equal_full(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch, seed: int, rounds: int
):
    """Files a test just wrote are all racy (too recent to trust their stat), so every scan reads
    every bucket; with no racy window, as for files older than two seconds, a scan reads the rows of
    the buckets whose stats changed only. (Each edit follows a build by far more than a clock tick,
    so every edit changes its file's times.)"""
    monkeypatch.setattr(store_module, "RACY_NS", 0)
    read: list[set[int] | None] = []
    original = store_module.SourceTable.file_stats_and_hashes

    def reading(table, buckets=None):
        read.append(None if buckets is None else set(buckets))
        return original(table, buckets)

    monkeypatch.setattr(store_module.SourceTable, "file_stats_and_hashes", reading)
    _edit_and_compare(tmp_path_factory, seed, rounds)
    assert any(buckets is not None and len(buckets) < 16 for buckets in read)  # the partial read was taken


def _edit_and_compare(tmp_path_factory: pytest.TempPathFactory, seed: int, rounds: int) -> None:
    root = tmp_path_factory.mktemp("differential")
    data = root / "data"
    shutil.copytree(SHIPPED_DATA, data)
    store = root / ".sotakg" / "store"
    assert validate(data, store).readable  # the stored findings of the shipped data
    rng = random.Random(seed)
    done = []
    for _round in range(rounds):
        readable_data = root / "readable"
        shutil.rmtree(readable_data, ignore_errors=True)
        shutil.copytree(data, readable_data)
        done.extend(apply_edit(rng, data) for _ in range(rng.randint(1, 3)))
        incremental_report = validate(data, store)
        full_report, full_quads = _full_run(data, root / "full")
        assert incremental_report.findings == full_report.findings, done
        assert incremental_report.readable == full_report.readable
        assert incremental_report.records == full_report.records
        if full_quads is not None:
            assert _quads(store) == full_quads, done
            assert read_manifest(StoreLayout(store).current_generation())["triples"] == len(full_quads)
        else:  # back to the last readable folder (rewritten: new times), so the next round edits it
            shutil.rmtree(data)
            shutil.copytree(readable_data, data)
            done.append("restore")


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1))
def test_a_focused_validation_gives_each_chosen_node_its_whole_results(
    tmp_path_factory: pytest.TempPathFactory, seed: int
):
    """What the partial validation relies on: with the shipped shapes, validating only some focus
    nodes gives each of them exactly the results a whole validation gives it (every result names
    its target, no nested shape reports a value node), on data made wrong by random edits, the
    nodes chosen at random."""
    from pyoxigraph import NamedNode

    root = tmp_path_factory.mktemp("halves")
    data = root / "data"
    shutil.copytree(SHIPPED_DATA, data)
    rng = random.Random(seed)
    backup = root / "backup"
    for _ in range(6):  # edits that leave every file readable (an unreadable one is undone)
        shutil.rmtree(backup, ignore_errors=True)
        shutil.copytree(data, backup)
        apply_edit(rng, data)
        try:
            build(data, root / "store")
        except DataError:
            shutil.rmtree(data)
            shutil.copytree(backup, data)
    build(data, root / "store")
    graph = open_read_only(StoreLayout(root / "store"))
    engine = ENGINES["sparql"]
    whole = engine(graph, shapes_paths())
    assert whole  # the shipped data has findings of its own; the edits add to them
    nodes = sorted({q.subject.value for q in graph if isinstance(q.subject, NamedNode)})
    chosen = set(rng.sample(nodes, k=len(nodes) // 2))
    focused = engine(graph, shapes_paths(), None, chosen)
    assert sorted(focused, key=repr) == sorted((r for r in whole if r.focus in chosen), key=repr)


def test_one_edit_is_applied_incrementally_and_rechecks_few_nodes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    data = tmp_path / "data"
    shutil.copytree(SHIPPED_DATA, data)
    store = tmp_path / "store"
    build(data, store)
    practice = data / "practices" / "SOTA-017.yaml"
    practice.write_text(practice.read_text(encoding="utf-8").replace("status: Active", "status: Rejected"))

    read_files: list[str] = []
    original = schema.read_record

    def counting(path: Path, *args, **kwargs):
        read_files.append(Path(path).name)
        return original(path, *args, **kwargs)

    listed: list[int] = []
    original_scan = build_module.scan_sources

    def listing(data_dir: Path, only=None):
        found = original_scan(data_dir, only=only)
        listed.append(len(found))
        return found

    monkeypatch.setattr(schema, "read_record", counting)
    monkeypatch.setattr(build_module, "scan_sources", listing)
    monkeypatch.setattr(store_module, "scan_sources", listing)
    report = build(data, store)
    assert report.incremental == 1
    assert read_files == ["SOTA-017.yaml"]
    assert listed == [1]  # only the changed file is listed again, not all 65

    generation = StoreLayout(store).current_generation()
    assert generation is not None
    graph = open_read_only(StoreLayout(store))
    engine = ENGINES["sparql"]
    key = incremental.cache_key("sparql", shapes_paths())

    def run(graph, focus):
        return engine(graph, shapes_paths(), None, focus)

    first, checked = incremental.results_for_generation(graph, generation, key, run, RawResult)
    assert checked is None  # nothing stored yet: a full run
    again, checked = incremental.results_for_generation(graph, generation, key, run, RawResult)
    assert (again, checked) == (first, 0)  # no change: every stored result reused

    practice.write_text(practice.read_text(encoding="utf-8").replace("status: Rejected", "status: Active"))
    build(data, store)
    generation = StoreLayout(store).current_generation()
    assert generation is not None
    graph = open_read_only(StoreLayout(store))
    results, checked = incremental.results_for_generation(graph, generation, key, run, RawResult)
    assert checked is not None and 0 < checked < 40  # SOTA-017, its versions, what it links to and from
    assert sorted(results, key=repr) == sorted(engine(graph, shapes_paths()), key=repr)


def test_an_edit_of_an_old_file_reads_the_rows_of_its_bucket_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """The source table's rows are read for the buckets whose stats changed, not for every file;
    what the build makes is what a fresh build makes."""
    monkeypatch.setattr(store_module, "RACY_NS", 0)  # as for files older than the racy window
    data = tmp_path / "data"
    shutil.copytree(SHIPPED_DATA, data)
    store = tmp_path / "store"
    build(data, store)
    read: list[set[int] | None] = []
    original = store_module.SourceTable.file_stats_and_hashes

    def reading(table, buckets=None):
        read.append(None if buckets is None else set(buckets))
        return original(table, buckets)

    monkeypatch.setattr(store_module.SourceTable, "file_stats_and_hashes", reading)
    practice = data / "practices" / "SOTA-017.yaml"
    practice.write_text(practice.read_text(encoding="utf-8").replace("status: Active", "status: Rejected"))
    (data / "papers" / "LIT-051.yaml").unlink()
    report = build(data, store)
    assert report.incremental == 2
    assert read == [{store_module._bucket("practices/SOTA-017.yaml"), store_module._bucket("papers/LIT-051.yaml")}]
    assert _quads(store) == _quads_of_fresh_build(data, tmp_path / "fresh")
    read.clear()
    assert is_fresh(data, StoreLayout(store)) and read == []  # the next scan reads no row at all


def _quads_of_fresh_build(data: Path, store: Path) -> set[str]:
    build(data, store)
    return _quads(store)


def test_the_dependency_model_was_written_for_the_shipped_shapes():
    """An edit of shapes/ turns partial validation off until rules/incremental.py's dependencies are
    checked against the new rules and MODELLED_SHAPES updated: this test is the reminder."""
    assert incremental.modelled(shapes_paths()), (
        "shapes/ changed: check that rules/incremental.py's TARGET_LINKS, CHAIN_LINKS and SHARED_LITERALS "
        f"cover what the rules look at, then set MODELLED_SHAPES = {incremental.shapes_digest(shapes_paths())!r}"
    )


def test_other_shapes_are_validated_in_full(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    data = tmp_path / "data"
    shutil.copytree(SHIPPED_DATA, data)
    store = tmp_path / "store"
    shapes = tmp_path / "shapes.ttl"
    shapes.write_bytes(shapes_paths()[0].read_bytes() + b"\n# a local copy: not the shipped rules\n")
    validate(data, store, shapes=[shapes])
    paper = data / "papers" / "LIT-004.yaml"
    paper.write_text(paper.read_text(encoding="utf-8").replace("year: 2016", "year: 1999"), encoding="utf-8")
    partial = []
    original = incremental.results_for_generation

    def spy(*args, **kwargs):
        results, checked = original(*args, **kwargs)
        partial.append((kwargs.get("partial"), checked))
        return results, checked

    monkeypatch.setattr(incremental, "results_for_generation", spy)
    report = validate(data, store, shapes=[shapes])
    assert partial == [(False, None)]
    assert report.findings == validate(data, tmp_path / "full", shapes=[shapes]).findings


def test_findings_are_located_without_parsing_yaml(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    data = tmp_path / "data"
    shutil.copytree(SHIPPED_DATA, data)
    practice = data / "practices" / "SOTA-017.yaml"
    practice.write_text(practice.read_text(encoding="utf-8").replace("status: Active", "status: Bogus"))
    expected = validate(data, tmp_path / "full")
    assert any(f.file and f.file.endswith("SOTA-017.yaml") and f.line for f in expected.findings)
    build(data, tmp_path / "store")

    def refuse(*args, **kwargs):
        raise AssertionError("a fresh store's report parsed YAML")

    monkeypatch.setattr(schema, "read_record", refuse)
    monkeypatch.setattr(schema, "parse_yaml_mapping", refuse)
    assert validate(data, tmp_path / "store").findings == expected.findings


def test_records_read_for_many_findings_at_once_are_those_read_one_by_one(tmp_path: Path, monkeypatch):
    """The locator reads the records of all the findings' focus nodes a few hundred per query; each
    node (a record, a version node, a node of no record) maps to what a lookup of its own gives."""
    data = tmp_path / "data"
    shutil.copytree(SHIPPED_DATA, data)
    build(data, tmp_path / "store")
    generation = StoreLayout(tmp_path / "store").current_generation()
    assert generation is not None
    table = store_module.SourceTable.open(generation)
    assert table is not None
    subjects = [row[3] for row in table.connection.execute("SELECT * FROM records")]
    table.close()
    nodes = [*subjects, *(f"{subject}-v1" for subject in subjects), "https://w3id.org/sotakg/id/NOPE", "_:b0"]
    one_by_one = incremental.SourceLocator(generation, "data/")
    expected = [one_by_one.record_of(node) for node in nodes]
    one_by_one.close()
    at_once = incremental.SourceLocator(generation, "data/")
    queries: list[int] = []
    real = store_module.SourceTable.records_with_subjects

    def counting(table, wanted):
        queries.append(len(wanted))
        return real(table, wanted)

    monkeypatch.setattr(store_module.SourceTable, "records_where", None)  # no lookup one at a time
    monkeypatch.setattr(store_module.SourceTable, "records_with_subjects", counting)
    at_once.prefetch(nodes)
    assert [at_once.record_of(node) for node in nodes] == expected
    assert len(queries) == 1 and sum(1 for record, _ in expected if record is not None) > 60
    at_once.close()


def test_a_duplicate_identifier_is_reported_as_a_full_read_would(tmp_path: Path):
    data = tmp_path / "data"
    shutil.copytree(SHIPPED_DATA, data)
    store = tmp_path / "store"
    build(data, store)
    before = _quads(store)
    copy = data / "practices" / "AAA-copy.yaml"  # sorts first: the original is the one reported
    copy.write_text((data / "practices" / "SOTA-017.yaml").read_text(encoding="utf-8"))
    report = validate(data, store)
    full, _ = _full_run(data, tmp_path / "full")
    assert not report.readable
    assert report.findings == full.findings
    # The copy is misnamed too (a record file is named after its id), and its id is taken.
    assert [f.rule_id for f in report.findings] == ["data-readable", "id-unique"]
    assert "AAA-copy.yaml but holds id SOTA-017" in report.findings[0].message
    assert report.findings[1].file is not None and report.findings[1].file.endswith("SOTA-017.yaml")
    assert _quads(store) == before  # the store is left as it was


# ------------------------------------------------------------------------------------------ freshness


@pytest.fixture
def fresh_store(tmp_path: Path) -> tuple[Path, StoreLayout]:
    data = tmp_path / "data"
    shutil.copytree(SHIPPED_DATA, data)
    layout = StoreLayout(tmp_path / "store")
    build(data, layout.path)
    assert is_fresh(data, layout)
    return data, layout


def _same_size_edit(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    changed = text.replace("Active", "Zctive", 1)
    assert changed != text and len(changed) == len(text)
    path.write_text(changed, encoding="utf-8")


def test_same_size_edit_with_the_old_mtime_is_noticed(fresh_store: tuple[Path, StoreLayout]):
    data, layout = fresh_store
    path = data / "practices" / "SOTA-017.yaml"
    before = os.stat(path)
    _same_size_edit(path)
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))  # the same second, the same size
    assert os.stat(path).st_size == before.st_size and os.stat(path).st_mtime_ns == before.st_mtime_ns
    assert not is_fresh(data, layout)
    assert build(data, layout.path).incremental == 1
    assert is_fresh(data, layout)


def test_a_file_replaced_by_rename_is_noticed(fresh_store: tuple[Path, StoreLayout]):
    data, layout = fresh_store
    path = data / "practices" / "SOTA-017.yaml"
    before = os.stat(path)
    replacement = data / "practices" / ".SOTA-017.yaml.swp"
    shutil.copy2(path, replacement)
    _same_size_edit(replacement)
    os.utime(replacement, ns=(before.st_atime_ns, before.st_mtime_ns))
    os.replace(replacement, path)
    assert not is_fresh(data, layout)


def test_a_folder_added_is_noticed(fresh_store: tuple[Path, StoreLayout]):
    data, layout = fresh_store
    (data / "drafts").mkdir()
    shutil.copy2(data / "practices" / "SOTA-017.yaml", data / "drafts" / "x.yaml")
    assert not is_fresh(data, layout)


def test_a_racy_file_is_rehashed_even_when_its_stat_cannot_change(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A file edited within the clock tick of the build keeps size, times and inode: the build
    marked it racy, so its content is checked until it is old enough; then its stat is trusted."""
    data = tmp_path / "data"
    shutil.copytree(SHIPPED_DATA, data)
    old = data / "papers" / "LIT-004.yaml"
    layout = StoreLayout(tmp_path / "store")
    build(data, layout.path)
    frozen = store_module.scan_stats(data)
    monkeypatch.setattr(store_module, "scan_stats", lambda folder: frozen)  # a clock that did not tick

    _same_size_edit(data / "practices" / "SOTA-017.yaml")
    assert not is_fresh(data, layout)
    (data / "practices" / "SOTA-017.yaml").write_text((SHIPPED_DATA / "practices" / "SOTA-017.yaml").read_text())
    assert is_fresh(data, layout)
    assert read_manifest(layout.current_generation())["racy"]  # copied just now: every file is racy

    monkeypatch.setattr(store_module, "RACY_NS", 0)  # time passes: the racy files proved unchanged settle
    assert is_fresh(data, layout)
    assert read_manifest(layout.current_generation())["racy"] == {}
    old.write_text(old.read_text(encoding="utf-8").replace("Chen", "Chan"), encoding="utf-8")
    assert is_fresh(data, layout)  # an old file's (frozen) stat is trusted, as git trusts its index


def test_touching_files_rebuilds_nothing_and_the_next_scan_reads_nothing(fresh_store: tuple[Path, StoreLayout]):
    data, layout = fresh_store
    generation = layout.current_generation()
    for source in scan_sources(data)[:5]:
        os.utime(source.path, ns=(os.stat(data).st_mtime_ns - 60 * 10**9,) * 2)
    assert snapshot(data, generation).hashes  # the touched files were read
    assert build(data, layout.path).rebuilt is False
    assert layout.current_generation() == generation
    again = snapshot(data, generation)
    assert again.hashes == {} and again.fingerprint == read_manifest(generation)["fingerprint"]


def test_scan_data_lists_what_scan_sources_lists(tmp_path: Path):
    data = tmp_path / "data"
    shutil.copytree(SHIPPED_DATA, data)
    (data / "drafts" / "deep").mkdir(parents=True)
    (data / "drafts" / "deep" / "x.yml").write_text("id: X\n")
    (data / "stray.yaml").write_text("id: Y\n")
    (data / ".hidden.yaml").write_text("id: Z\n")
    (data / "notes.txt").write_text("z\n")
    listed, stats = scan_data(data)
    assert listed == scan_sources(data)
    assert list(stats) == [source.relative for source in listed]


def test_only_the_named_files_are_listed_as_a_full_scan_lists_them(tmp_path: Path):
    """scan_sources(only=...) finds the files of a record folder by name instead of listing it: for
    every set of paths, what it gives is what the full listing gives for those paths, whatever they
    are (nested folders, links in and out, dangling, a folder named like a record, escaped names)."""
    data = tmp_path / "data"
    shutil.copytree(SHIPPED_DATA, data)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.yaml").write_text("id: SECRET\n")
    practices = data / "practices"
    (practices / "nested" / "deeper").mkdir(parents=True)
    (practices / "nested" / "deeper" / "SOTA-900.yaml").write_text("id: SOTA-900\n")
    (practices / "nested" / "SOTA-901.yml").write_text("id: SOTA-901\n")
    (practices / "in.yaml").symlink_to(practices / "SOTA-017.yaml")
    (practices / "out.yaml").symlink_to(outside / "secret.yaml")
    (practices / "gone.yaml").symlink_to(tmp_path / "nothing.yaml")
    (practices / "folder.yaml").mkdir()
    (practices / "linked-folder").symlink_to(outside)
    (practices / "notes.txt").symlink_to(outside / "secret.yaml")
    (practices / "back\\slash.yaml").write_text("id: SOTA-902\n")
    os.close(os.open(os.fsencode(practices) + b"/bad\xff.yaml", os.O_CREAT | os.O_WRONLY))
    full = scan_sources(data)
    rels = [source.relative for source in full]
    assert "practices/nested/deeper/SOTA-900.yaml" in rels and "practices/bad\\xff.yaml" in rels
    chooser = random.Random(7)
    for size in (1, 2, 3, 5, len(rels)):
        for _ in range(20):
            only = set(chooser.sample(rels, min(size, len(rels))))
            only.add("practices/SOTA-999.yaml")  # asked for, not there: not listed
            assert scan_sources(data, only=only) == [source for source in full if source.relative in only]


# ------------------------------------------------------------------------------------------ hostile store


def _table(store: Path) -> Path:
    generation = StoreLayout(store).current_generation()
    assert generation is not None
    return generation / store_module.SOURCE_TABLE


@pytest.mark.parametrize(
    "tamper",
    [
        # A row whose fields are not a record's: an IRI with a space, a version that is text.
        'UPDATE records SET fields = \'{"id": "SOTA-017", "cites": ["a b"], "version": "x"}\'',
        "UPDATE records SET lines = '[1, 2]'",
        "CREATE TRIGGER spy AFTER DELETE ON records BEGIN INSERT INTO files VALUES ('x', 0, 0, 0, 0, 'x'); END",
        "DROP TABLE records",
    ],
)
def test_a_source_table_sotakg_did_not_write_means_a_full_build(tmp_path: Path, tamper: str):
    import sqlite3

    data = tmp_path / "data"
    shutil.copytree(SHIPPED_DATA, data)
    store = tmp_path / "store"
    build(data, store)
    with sqlite3.connect(_table(store)) as connection:
        connection.execute(tamper)
    practice = data / "practices" / "SOTA-017.yaml"
    practice.write_text(practice.read_text(encoding="utf-8").replace("status: Active", "status: Proposed"))
    report = build(data, store)
    assert report.rebuilt and report.incremental is None
    _, fresh = _full_run(data, tmp_path / "full")
    assert _quads(store) == fresh
    assert validate(data, store).findings == validate(data, tmp_path / "full" / "store").findings


def test_a_linked_source_table_is_not_followed(tmp_path: Path):
    data = tmp_path / "data"
    shutil.copytree(SHIPPED_DATA, data)
    store = tmp_path / "store"
    build(data, store)
    table = _table(store)
    outside = tmp_path / "outside.sqlite"
    table.rename(outside)
    table.symlink_to(outside)
    before = outside.read_bytes()
    practice = data / "practices" / "SOTA-017.yaml"
    practice.write_text(practice.read_text(encoding="utf-8").replace("status: Active", "status: Proposed"))
    assert build(data, store).incremental is None
    assert outside.read_bytes() == before


def test_builds_between_validations_add_up(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Two incremental builds without a validation between: the second validation re-checks what
    both changed (the lineage adds up), and finds what a full run finds."""
    data = tmp_path / "data"
    shutil.copytree(SHIPPED_DATA, data)
    store = tmp_path / "store"
    validate(data, store)
    first = data / "practices" / "SOTA-017.yaml"
    first.write_text(first.read_text(encoding="utf-8").replace("status: Active", "status: Bogus"))
    assert build(data, store).incremental == 1
    paper = data / "papers" / "LIT-004.yaml"
    paper.write_text(paper.read_text(encoding="utf-8").replace("year: 2016", "year: 1999"), encoding="utf-8")
    assert build(data, store).incremental == 1
    checked = []
    original = incremental.results_for_generation

    def spy(*args, **kwargs):
        results, count = original(*args, **kwargs)
        checked.append(count)
        return results, count

    monkeypatch.setattr(incremental, "results_for_generation", spy)
    report = validate(data, store)
    assert checked and checked[0] is not None and checked[0] > 0
    assert report.findings == validate(data, tmp_path / "full" / "store").findings
    assert {"practice-status", "arxiv-year"} <= {f.rule_id for f in report.findings}


def test_a_changed_file_that_became_a_link_out_is_refused_by_the_incremental_build(tmp_path: Path):
    data = tmp_path / "data"
    shutil.copytree(SHIPPED_DATA, data)
    store = tmp_path / "store"
    build(data, store)
    outside = tmp_path / "outside.yaml"
    outside.write_text((data / "practices" / "SOTA-017.yaml").read_text(encoding="utf-8"), encoding="utf-8")
    (data / "practices" / "SOTA-017.yaml").unlink()
    (data / "practices" / "SOTA-017.yaml").symlink_to(outside)
    with pytest.raises(DataError) as refused:
        build(data, store)
    assert "a link to something outside the data folder" in str(refused.value)
    assert str(outside) not in str(refused.value)


# ---------------------------------------------------------------- found by a review


def _validate_json(runner: CliRunner, store: str) -> dict:
    result = runner.invoke(cli, ["--data", "data", "--store", store, "validate", "--format", "json"])
    assert result.exit_code in (0, 1), result.output
    return json.loads(result.stdout)


def _findings(document: dict) -> list[dict]:
    return document["findings"]


def test_a_record_link_whose_target_folder_moves_out_of_the_data_folder_is_not_fresh(runner: CliRunner, workdir: Path):
    """The bug: a record file that is a link (inside the data folder) is listed by the stat of what
    it resolves to. When a folder on the link's way is moved out of the data folder (and a link to
    its new place left behind), the file resolves to the very same inode, so size, times and inode
    are unchanged: the scan takes its fast path and calls the store fresh. A fresh build refuses the
    file ("a link to something outside the data folder"); the old store keeps its triples, `build`
    says "up to date" and `validate` reports the old findings instead of the refusal.
    The rule: whatever decides what a build reads or refuses (here, where a link leads) is part of
    what the freshness scan compares; a command never reports a stale store as fresh, and
    `validate` gives the findings of a fresh build."""
    data = workdir / "data"
    stash = data / ".stash"  # hidden: never listed itself, only reached through the link
    stash.mkdir()
    (stash / "SOTA-900.yaml").write_text(
        "id: SOTA-900\ntitle: T\nsummary: S\nstatus: Proposed\ntopic: distributed-optimization\nversion: 1\n",
        encoding="utf-8",
    )
    os.symlink("../.stash/SOTA-900.yaml", data / "practices" / "SOTA-900.yaml")
    first = _validate_json(runner, ".sotakg/store")
    assert first["readable"], first

    outside = workdir / "outside"
    os.rename(stash, outside)  # the folder moves; the file keeps its inode, size and times
    os.symlink(outside, stash)

    fresh = _validate_json(runner, "fresh/store")
    assert not fresh["readable"]
    assert any("outside the data folder" in f["message"] for f in _findings(fresh))
    again = _validate_json(runner, ".sotakg/store")
    assert _findings(again) == _findings(fresh)


def test_a_lowered_file_size_limit_is_not_taken_for_a_fresh_store(runner: CliRunner, workdir: Path, monkeypatch):
    """The bug: SOTAKG_MAX_FILE_BYTES decides whether a record file can be read at all (over the
    limit it is a data-readable problem and the build fails), yet it is neither in the fingerprint
    nor in build_base. Once the build's files are no longer racy, a store built under the default
    limit is taken as fresh under a lower one: `validate` reports the stored graph's findings and
    `build` says "up to date", while a fresh build (and `build --force`) fails on the too-large file.
    The rule: everything besides the data that decides what a build makes (the sotakg version, the
    ontology, and the file size limit) is part of what freshness compares; `validate` gives the
    findings a fresh build gives under the same environment."""
    from sotakg.graph import store as store_module

    monkeypatch.setattr(store_module, "RACY_NS", 0)  # the build is old enough: no file is racy any more
    first = _validate_json(runner, ".sotakg/store")
    assert first["readable"]
    largest = max((workdir / "data").rglob("*.yaml"), key=lambda path: path.stat().st_size)
    monkeypatch.setenv("SOTAKG_MAX_FILE_BYTES", str(largest.stat().st_size - 1))

    fresh = _validate_json(runner, "fresh/store")
    assert not fresh["readable"]
    assert any("over the" in f["message"] for f in _findings(fresh))
    again = _validate_json(runner, ".sotakg/store")
    assert _findings(again) == _findings(fresh)
