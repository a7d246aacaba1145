"""Behaviour of graph/store.py that its mutation run showed no test pinned (issue 20): what removing a
generation does and says in each case, who holds a generation, the racy files a manifest keeps, what
the freshness scan leaves outside the data folder, and the interrupt guard of a build."""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import sqlite3
import zlib
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sotakg.errors import StoreError
from sotakg.graph import store
from sotakg.graph.build import build
from sotakg.graph.store import (
    GENERATION_MARK,
    GENERATION_MARKER,
    MANIFEST,
    RACY_NS,
    TRASH_MARK,
    DataSnapshot,
    InterruptGuard,
    SourceTable,
    StoreLayout,
    generation_in_use,
    hold_generation,
    open_read_only,
    read_manifest,
    remember_stats,
    remove_generation,
    scan_stats,
    write_generation_marker,
    write_manifest,
)
from sotakg.records.sources import display_path

from .conftest import SHIPPED_DATA


def marked_generation(layout: StoreLayout, files: int = 3) -> Path:
    """A generation beside the store's link, marked as sotakg's, holding files and a folder."""
    generation = layout.new_generation()
    generation.mkdir(parents=True)
    write_generation_marker(generation)
    for number in range(files):
        (generation / f"file-{number}").write_bytes(b"x" * number)
    (generation / "folder").mkdir()
    (generation / "folder" / "inner").write_text("y", encoding="utf-8")
    return generation


@pytest.fixture
def layout(tmp_path: Path) -> StoreLayout:
    (tmp_path / "work").mkdir()
    return StoreLayout(tmp_path / "work" / "store")


@pytest.fixture
def release_held():
    """Give back the reader locks a test took (they are otherwise held for the process's life)."""
    yield
    for generation in list(store._held_reader_locks):
        store._held_reader_locks.pop(generation).close()


# ------------------------------------------------------------------------------ removing a generation


def test_a_marked_generation_is_removed_whole_and_a_link_in_it_is_not_followed(layout, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep").write_text("kept", encoding="utf-8")
    generation = marked_generation(layout, files=40)  # the marker is rarely the last entry listed
    os.symlink(outside, generation / "link-to-a-folder")
    assert remove_generation(layout, generation) is True
    assert not os.path.lexists(generation)
    assert [p.name for p in layout.path.parent.iterdir()] == []
    assert (outside / "keep").read_text(encoding="utf-8") == "kept"


def test_an_empty_folder_named_like_a_generation_is_removed(layout):
    generation = layout.new_generation()
    generation.mkdir(parents=True)
    assert remove_generation(layout, generation) is True
    assert not generation.exists()


@pytest.mark.parametrize("case", ["elsewhere", "a-link", "unmarked"])
def test_what_is_not_a_generation_sotakg_made_beside_the_link_is_left_alone(layout, tmp_path, case):
    elsewhere = StoreLayout(tmp_path / "other" / "store")
    if case == "elsewhere":  # marked, but in another folder than the store's
        generation = marked_generation(elsewhere)
        target = generation
    elif case == "a-link":  # beside the link and named like a generation, but a link to one
        target = marked_generation(elsewhere)
        generation = layout.new_generation()
        layout.path.parent.mkdir(parents=True, exist_ok=True)
        os.symlink(target, generation)
    else:  # beside the link, named like a generation, not empty, without the marker
        generation = marked_generation(layout)
        (generation / GENERATION_MARKER).unlink()
        target = generation
    before = sorted(p.name for p in target.iterdir())
    assert remove_generation(layout, generation) is False
    assert os.path.lexists(generation)
    assert sorted(p.name for p in target.iterdir()) == before


@pytest.mark.usefixtures("release_held")
def test_a_generation_a_reader_holds_stays_until_it_is_given_back(layout):
    generation = marked_generation(layout)
    assert generation_in_use(generation) is False
    assert hold_generation(generation) is True
    assert generation_in_use(generation) is True
    assert remove_generation(layout, generation) is False
    assert (generation / GENERATION_MARKER).is_file() and (generation / "folder" / "inner").is_file()
    store._held_reader_locks.pop(generation).close()
    assert generation_in_use(generation) is False
    assert remove_generation(layout, generation) is True
    assert not generation.exists()


def test_a_generation_is_moved_out_of_the_way_under_a_name_the_next_build_finds(tmp_path, monkeypatch):
    # A store whose own name holds the generation mark: only the mark before the token is replaced.
    (tmp_path / "work").mkdir()
    layout = StoreLayout(tmp_path / "work" / f"s{GENERATION_MARK}x")
    generation = marked_generation(layout)
    renamed: list[str] = []
    real_rename = os.rename

    def recording_rename(source, destination, *args, **kwargs):
        renamed.append(Path(destination).name)
        return real_rename(source, destination, *args, **kwargs)

    monkeypatch.setattr(store.os, "rename", recording_rename)
    assert remove_generation(layout, generation) is True
    token = generation.name.removeprefix(layout.path.name + GENERATION_MARK)
    assert renamed == [f"{layout.path.name}{TRASH_MARK}{token}"]
    assert layout._name_pattern(TRASH_MARK).fullmatch(renamed[0])


def test_a_generation_that_cannot_be_moved_out_of_the_way_is_kept(layout):
    generation = marked_generation(layout)
    token = generation.name.removeprefix(layout.path.name + GENERATION_MARK)
    in_the_way = generation.with_name(f"{layout.path.name}{TRASH_MARK}{token}")
    in_the_way.mkdir()
    (in_the_way / "not-empty").write_text("z", encoding="utf-8")
    assert remove_generation(layout, generation) is False
    assert (generation / GENERATION_MARKER).is_file() and len(list(generation.iterdir())) == 6


@pytest.mark.usefixtures("release_held")
def test_a_store_that_cannot_be_opened_is_an_error_naming_it(layout):
    generation = marked_generation(layout)  # marked, but holding no database
    os.symlink(generation.name, layout.path)
    with pytest.raises(StoreError) as raised:
        open_read_only(layout)
    assert str(raised.value).startswith(f"cannot open the store at {display_path(layout.path)}: ")


# ------------------------------------------------------------------------------ racy files


def test_remembered_stats_keep_the_racy_files_for_the_next_scan(layout):
    generation = marked_generation(layout)
    SourceTable.create(generation).close()
    write_manifest(generation, DataSnapshot(layout.path, {}, "old", "f", 0), {"practice": 0}, 0)
    racy = {"practices/SOTA-001.yaml": "0" * 64}
    data = DataSnapshot(layout.path, {}, "digest", "f", 0, racy=racy)
    remember_stats(generation, data)
    manifest = read_manifest(generation)
    assert (manifest["stat_digest"], manifest["racy"], manifest["fingerprint"]) == ("digest", racy, "f")


def test_remembered_stats_write_only_the_rows_of_the_files_read_again(data_copy, tmp_path, monkeypatch):
    """The bug: a file touched but not changed made the build write every file's row of the source
    table again (126,000 rows, over a second at scale 100, for one `touch`). The rule: only the rows
    of the files whose stat changed are written; every row then holds the file's stat as it is."""
    monkeypatch.setattr(store, "RACY_NS", 1)  # no file is racy: none is read again unasked
    target = tmp_path / "store"
    build(data_copy, target)
    touched = data_copy / "practices" / "SOTA-049.yaml"
    os.utime(touched, ns=(2_000_000_000, 2_000_000_000))
    written: list[tuple] = []
    put_files = SourceTable.put_files
    monkeypatch.setattr(SourceTable, "put_files", lambda table, rows: put_files(table, written.extend(rows) or written))
    assert not build(data_copy, target).rebuilt
    assert [row[0] for row in written] == ["practices/SOTA-049.yaml"]
    generation = StoreLayout(target).current_generation()
    assert generation is not None
    table = SourceTable.open(generation)
    assert table is not None
    try:
        recorded, hashes = table.file_stats_and_hashes()
    finally:
        table.close()
    assert recorded == {(rel, *stat) for rel, stat in scan_stats(data_copy).items()}
    assert hashes["practices/SOTA-049.yaml"] == hashlib.sha256(touched.read_bytes()).hexdigest()


def test_an_entry_never_read_is_never_racy(layout):
    scan = 10 * RACY_NS
    recent = (0, scan, 1, scan)
    stats = {"practices": recent, "papers": recent, "practices/SOTA-001.yaml": recent}
    hashes = {"practices": "unread:0:1:2:3", "papers": "refused:a link", "practices/SOTA-001.yaml": "0" * 64}
    data = DataSnapshot(layout.path, stats, "digest", "f", scan, hashes)
    assert data.racy_files() == {"practices/SOTA-001.yaml": "0" * 64}


def _settled(generation: Path, mtime: int, ctime: int, scan: int) -> dict[str, str]:
    stats = {"a.yaml": (1, mtime, 7, ctime)}
    if not (generation / MANIFEST).exists():
        write_manifest(generation, DataSnapshot(generation, {}, "digest", "f", 0), {}, 0)
    manifest = read_manifest(generation)
    return store._settle_racy(generation, manifest, {"a.yaml": "h", "gone.yaml": "h"}, stats, scan)


def test_a_racy_file_stays_racy_while_either_of_its_times_is_recent(layout):
    generation = marked_generation(layout)
    scan = 10 * RACY_NS
    old = scan - 5 * RACY_NS
    assert _settled(generation, mtime=scan, ctime=old, scan=scan) == {"a.yaml": "h"}
    assert _settled(generation, mtime=old, ctime=scan, scan=scan) == {"a.yaml": "h"}
    assert _settled(generation, mtime=scan - RACY_NS, ctime=old, scan=scan) == {"a.yaml": "h"}  # at the edge
    assert read_manifest(generation)["racy"] == {"a.yaml": "h"}  # a file no longer there is dropped
    assert _settled(generation, mtime=old, ctime=old, scan=scan) == {}
    assert read_manifest(generation)["racy"] == {}


def test_settling_racy_files_where_the_manifest_cannot_be_written_is_no_error(layout):
    generation = marked_generation(layout)
    (generation / MANIFEST).mkdir()  # not a file: it cannot be replaced
    scan = 10 * RACY_NS
    assert _settled(generation, mtime=scan, ctime=scan, scan=scan) == {"a.yaml": "h"}


def test_a_racy_file_that_cannot_be_read_again_is_not_taken_as_unchanged(tmp_path):
    (tmp_path / "here.yaml").write_text("id: x\n", encoding="utf-8")
    here = {"here.yaml": hashlib.sha256(b"id: x\n").hexdigest()}
    assert store._racy_files_unchanged(tmp_path, here) is True
    assert store._racy_files_unchanged(tmp_path, {**here, "gone.yaml": "0" * 64}) is False


# ------------------------------------------------------------------------------ the freshness scan


def test_a_record_folder_linking_outside_the_data_folder_is_not_walked(tmp_path):
    data, outside = tmp_path / "data", tmp_path / "outside"
    data.mkdir()
    outside.mkdir()
    (outside / "SOTA-001.yaml").write_text("id: SOTA-001\n", encoding="utf-8")
    os.symlink(outside, data / "practices")
    (data / "notes.txt").write_text("not a folder", encoding="utf-8")
    os.symlink("notes.txt", data / "papers")  # inside, but a file
    assert sorted(scan_stats(data)) == ["papers", "practices"]


# ------------------------------------------------------------------------------ interrupts


def test_the_first_interrupt_stops_a_build_and_later_ones_are_held():
    guard = InterruptGuard()
    with pytest.raises(KeyboardInterrupt):
        guard._handle(signal.SIGINT, None)
    guard._handle(signal.SIGTERM, None)  # the clean-up the first one began is not cut short
    assert guard.held == [signal.SIGINT, signal.SIGTERM]


def test_once_committing_interrupts_are_held_and_ignored_after_the_build():
    guard = InterruptGuard()
    with guard.installed():
        assert signal.getsignal(signal.SIGINT) == guard._handle
        guard.committing = True
        guard._handle(signal.SIGINT, None)
        assert guard.held == [signal.SIGINT]
    assert signal.getsignal(signal.SIGINT) == signal.SIG_IGN
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_IGN


# ------------------------------------------------------------------------------ holding the current generation


def test_holding_a_store_that_is_not_built_says_to_build_it(layout):
    with pytest.raises(StoreError) as raised:
        store.hold_current(layout)
    assert str(raised.value) == f"no store at {display_path(layout.path)}; run 'sotakg build' first"


def test_holding_a_store_whose_link_keeps_moving_gives_up_with_a_clear_error(layout, monkeypatch):
    generation = marked_generation(layout)
    os.symlink(generation.name, layout.path)
    monkeypatch.setattr(store, "hold_generation", lambda generation: False)  # swapped away each time
    with pytest.raises(StoreError) as raised:
        store.hold_current(layout)
    assert str(raised.value) == (
        f"the store at {display_path(layout.path)} kept changing while it was opened; try again"
    )


# ------------------------------------------------------------------------------ a built store's records


@pytest.fixture
def built(tmp_path: Path) -> tuple[Path, StoreLayout]:
    data = tmp_path / "data"
    shutil.copytree(SHIPPED_DATA, data)
    (data / "practices").rename(data / ".practices")  # a linked record folder, followed as the build does
    os.symlink(".practices", data / "practices")
    report = build(data, tmp_path / "store")
    assert report.rebuilt and report.counts["practice"] == 42
    return data, StoreLayout(tmp_path / "store")


def test_the_manifest_keeps_the_counts_the_build_made(built):
    data, layout = built
    manifest = read_manifest(layout.current_generation())
    assert manifest["counts"] == {"practice": 42, "paper": 18, "adr": 3, "topic": 1, "registry": 1}


def test_a_scan_with_nothing_changed_says_what_it_compared(built):
    data, layout = built
    generation = layout.current_generation()
    scanned = store.snapshot(data, generation)
    assert scanned.data_dir == data and scanned.stats == scan_stats(data) and scanned.scan_ns > 0
    assert scanned.stat_digest == read_manifest(generation)["stat_digest"]
    assert scanned.fingerprint == read_manifest(generation)["fingerprint"]
    assert (scanned.against, scanned.changed, scanned.hashes) == (generation.name, None, {})
    assert isinstance(scanned.racy, dict)


def test_entries_never_read_are_kept_out_of_the_racy_files(built, tmp_path):
    data, layout = built
    outside = tmp_path / "outside.yaml"
    outside.write_text("id: SOTA-900\n", encoding="utf-8")
    os.symlink(outside, data / ".practices" / "SOTA-900.yaml")  # refused: it leads outside
    scanned = store.snapshot(data, None, need_hashes=True)  # every file just made: all of them racy
    assert scanned.hashes["practices"].startswith("unread:")
    assert scanned.hashes["practices/SOTA-900.yaml"].startswith("refused:")
    racy = scanned.racy_files()
    assert "practices" not in racy and "practices/SOTA-900.yaml" not in racy
    assert "practices/SOTA-049.yaml" in racy


def test_only_files_changed_within_the_racy_window_are_racy(layout):
    scan = 10 * RACY_NS
    edge, old = scan - RACY_NS, scan - 5 * RACY_NS
    stats = {"a.yaml": (1, edge, 1, old), "b.yaml": (1, old, 1, edge), "c.yaml": (1, old, 1, old)}
    hashes = {name: "0" * 64 for name in stats}
    data = DataSnapshot(layout.path, stats, "digest", "f", scan, hashes)
    assert data.racy_files() == {"a.yaml": "0" * 64, "b.yaml": "0" * 64}


def test_a_source_table_opened_to_read_is_read_only_and_one_opened_to_write_is_not(built):
    _data, layout = built
    generation = layout.current_generation()
    table = SourceTable.open(generation)
    assert table is not None and "practices/SOTA-049.yaml" in table.file_hashes()
    with pytest.raises(sqlite3.OperationalError):
        table.delete_files(["practices/SOTA-049.yaml"])
    table.close()
    writable = SourceTable.open(generation, writable=True)
    assert writable is not None
    writable.delete_files(["practices/SOTA-049.yaml"])
    writable.commit()
    writable.close()
    again = SourceTable.open(generation)
    assert again is not None and "practices/SOTA-049.yaml" not in again.file_hashes()
    assert again.records_where("rel", ["practices/SOTA-049.yaml"]) == []
    again.close()


@pytest.mark.parametrize("marker", ["folder", "fifo", "copied"])
def test_a_marker_that_is_not_the_one_sotakg_wrote_makes_no_generation(layout, marker):
    generation = marked_generation(layout)
    if marker == "copied":  # the marker of another directory (what a copied store carries)
        other = marked_generation(layout)
        (generation / GENERATION_MARKER).write_bytes((other / GENERATION_MARKER).read_bytes())
    else:
        (generation / GENERATION_MARKER).unlink()
        if marker == "folder":
            (generation / GENERATION_MARKER).mkdir()
        else:
            os.mkfifo(generation / GENERATION_MARKER)  # opening it to read must not wait for a writer
    assert store.is_own_generation(generation) is False


@pytest.mark.usefixtures("release_held")
def test_holding_a_generation_twice_keeps_one_lock(layout):
    generation = marked_generation(layout)
    assert hold_generation(generation) is True
    handle = store._held_reader_locks[generation]
    assert hold_generation(generation) is True
    assert store._held_reader_locks[generation] is handle
    assert generation_in_use(generation) is True


@pytest.mark.usefixtures("release_held")
def test_holding_a_generation_whose_marker_is_gone_fails(layout):
    generation = marked_generation(layout)
    (generation / GENERATION_MARKER).unlink()
    assert hold_generation(generation) is False
    assert generation not in store._held_reader_locks
    removed = marked_generation(layout)
    shutil.rmtree(removed)
    assert hold_generation(removed) is False


# ------------------------------------------------------------------------------ what the freshness scan lists


def test_the_freshness_scan_lists_what_the_build_reads_or_refuses_and_nothing_else(tmp_path):
    data = tmp_path / "data"
    for folder in ("practices", ".papers-real", "adrs", "topics", ".hidden", "extra"):
        (data / folder).mkdir(parents=True)
    for path in ("registry.yaml", "practices/SOTA-049.yaml", "practices/.hidden.yaml", "practices/notes.txt",
                 ".papers-real/LIT-051.yaml", "adrs/ADR-026.yaml", "topics/t.yaml", ".hidden/SOTA-1.yaml",
                 "extra/x.yaml", "notes.txt"):  # fmt: skip
        (data / path).write_text("id: x\n", encoding="utf-8")
    os.symlink(".papers-real", data / "papers")  # a record folder that is a link inside: followed
    os.symlink("nowhere.yaml", data / "practices" / "SOTA-050.yaml")  # dangling: listed by its own stat
    os.symlink("../adrs", data / "practices" / "more")  # a link to a folder below the top: listed, not followed
    with open(os.fsencode(data / "practices") + b"/SOTA-\xff.yaml", "wb") as handle:
        handle.write(b"id: x\n")
    deep = data / "extra"
    for _ in range(40):
        deep = deep / "d"
    deep.mkdir(parents=True)
    (deep / "SOTA-2.yaml").write_text("id: x\n", encoding="utf-8")
    listed = scan_stats(data)
    assert set(listed) == {
        "registry.yaml", "practices/SOTA-049.yaml", "practices/SOTA-050.yaml", "practices/more",
        "practices/SOTA-\\xff.yaml", "papers", "papers/LIT-051.yaml", "adrs/ADR-026.yaml", "topics/t.yaml",
        "extra/x.yaml", "extra" + "/d" * 32,
    }  # fmt: skip
    link = os.lstat(data / "practices" / "SOTA-050.yaml")
    # a refused link: its own times and inode, and a size of -1, never anything of a target
    assert listed["practices/SOTA-050.yaml"] == (-1, link.st_mtime_ns, link.st_ino, link.st_ctime_ns)
    followed = os.stat(data / "papers" / "LIT-051.yaml")
    assert listed["papers/LIT-051.yaml"][2] == followed.st_ino
    assert listed["papers"][2] == os.lstat(data / "papers").st_ino  # the link itself, so that retargeting it shows


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.text(st.characters(blacklist_categories=("Cs",)), max_size=12), st.text("0123456789abcdef")))
def test_the_fingerprint_is_the_digest_of_each_bucket_of_files_in_name_order(hashes):
    # The definition: files fall into 256 buckets by the CRC-32 of their path; each bucket's digest
    # is of "\0name\0hash" for its files in name order; the fingerprint is of the version, the
    # ontology and the buckets' digests in bucket order.
    buckets = []
    for bucket in range(256):
        names = sorted(name for name in hashes if zlib.crc32(name.encode()) % 256 == bucket)
        text = "\0" + "\0".join(part for name in names for part in (name, hashes[name]))
        buckets.append(hashlib.sha256(text.encode()).hexdigest())
    digest = hashlib.sha256()
    digest.update(store.__version__.encode())
    digest.update(store._sha256(store.ontology_path()).encode())
    digest.update("".join(buckets).encode())
    groups = store._bucketed(dict.fromkeys(reversed(list(hashes)), (0, 0, 0, 0)))  # scan order does not count
    assert [store._hash_bucket_digest(hashes, group) for group in groups] == buckets
    assert store._bucket_fingerprint(buckets) == digest.hexdigest()


def test_a_changed_file_keeps_the_others_hashes_and_a_removed_one_is_gone(tmp_path):
    data = tmp_path / "data"
    shutil.copytree(SHIPPED_DATA, data)
    layout = StoreLayout(tmp_path / "store")
    build(data, layout.path)
    generation = layout.current_generation()
    files = sorted(scan_stats(data))
    changed, removed = files[0], files[1]
    (data / changed).write_text((data / changed).read_text(encoding="utf-8") + "\n", encoding="utf-8")
    (data / removed).unlink()
    scanned = store.snapshot(data, generation)
    recorded = store.read_file_table(generation)[1]
    assert scanned.hashes.keys() == set(files) - {removed}
    assert scanned.hashes[changed] == hashlib.sha256((data / changed).read_bytes()).hexdigest() != recorded[changed]
    assert {rel: scanned.hashes[rel] for rel in files[2:]} == {rel: recorded[rel] for rel in files[2:]}
    assert (scanned.changed, scanned.removed) == ({changed}, {removed})


def test_a_generation_removed_meanwhile_is_not_made_again_by_what_is_written_into_it(tmp_path):
    """The bug: settling the racy files (and storing findings) wrote into a generation with
    ``atomic_write_text``, which made its folder first: a generation a build removed meanwhile came
    back as an empty, unmarked folder that nothing cleans up. The rule: a write into a generation
    that is gone fails quietly and makes nothing."""
    from sotakg.rules.incremental import _write_stored

    gone = tmp_path / "store.gen-0123456789abcdef-1"
    racy = {"practices/SOTA-001.yaml": "0" * 64}
    assert store._settle_racy(gone, {"fingerprint": "f"}, racy, {}, 10 * RACY_NS) == {}
    _write_stored(gone / "carry-findings-x.json", "f", [])
    assert not gone.exists()
