"""Tests written to kill the mutants that survived ``python -m benchmarks.mutation`` (issue 20).

Each asserts behaviour a surviving mutant changed: the exact files a data folder lists and why each
refused one is refused, the bytes and refusals of a bounded read, what an atomic write leaves, and
which texts the fast YAML reader reads (as the full reader does) or leaves to the full reader.
"""

from __future__ import annotations

import errno
import os
import secrets
import stat
import threading
from pathlib import Path

import pytest

from sotakg.errors import UsageProblem
from sotakg.records import sources as sources_module
from sotakg.records.fastyaml import parse_canonical
from sotakg.records.schema import parse_yaml_mapping
from sotakg.records.sources import (
    DANGLING,
    OUTSIDE,
    NotARegularFile,
    SourceFile,
    SourceTooLarge,
    atomic_write_text,
    display_path,
    link_refusal,
    read_bounded,
    read_many,
    scan_sources,
)

# ------------------------------------------------------------------------------ records/sources.py


def hostile_tree(tmp_path: Path) -> Path:
    """A data folder with one entry of each kind scan_sources tells apart."""
    data = tmp_path / "data"
    practices = data / "practices"
    (practices / "sub").mkdir(parents=True)
    (data / "topics").mkdir()
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "x.yaml").write_text("id: X\n")
    (data / "adrs").write_text("not a folder\n")
    os.symlink(tmp_path / "nowhere", data / "notes")
    (data / "notes.yaml").write_text("a: b\n")
    os.symlink(tmp_path / "nowhere", data / "papers")
    (data / "registry.yaml").write_text("{}\n")
    (data / "topics" / "t.yaml").write_text("id: t\n")
    (practices / ".hidden.yaml").write_text("id: H\n")
    (practices / "README.md").write_text("not a record\n")
    (practices / "SOTA-001.yaml").write_text("id: SOTA-001\n")
    os.symlink(tmp_path / "outside" / "x.yaml", practices / "SOTA-002.yaml")
    os.symlink(tmp_path / "nowhere.yaml", practices / "SOTA-003.yaml")
    os.symlink("SOTA-004.yaml", practices / "SOTA-004.yaml")  # a loop
    (practices / "SOTA-005.yaml").mkdir()
    os.symlink(data / "topics", practices / "alias")
    (practices / "sub" / "SOTA-006.yaml").write_text("id: SOTA-006\n")
    (practices / "zz.yaml").write_text("id: zz\n")
    return data


def listed(data: Path, rel: str, kind: str | None) -> SourceFile:
    info = os.stat(data / rel)
    return SourceFile(str(data / rel), rel, f"data/{rel}", kind, info.st_size, info.st_mtime_ns)


def refused(data: Path, rel: str, kind: str | None, why: str) -> SourceFile:
    return SourceFile(str(data / rel), rel, f"data/{rel}", kind, 0, 0, why)


def test_scan_sources_lists_and_refuses_each_entry_exactly(tmp_path, monkeypatch):
    data = hostile_tree(tmp_path)
    monkeypatch.chdir(tmp_path)
    assert scan_sources(data) == [
        refused(data, "adrs", None, "'adrs' must be a folder of record files, not a file"),
        listed(data, "notes.yaml", None),
        refused(data, "papers", None, DANGLING),
        listed(data, "practices/SOTA-001.yaml", "practice"),
        refused(data, "practices/SOTA-002.yaml", "practice", OUTSIDE),
        refused(data, "practices/SOTA-003.yaml", "practice", DANGLING),
        refused(data, "practices/SOTA-004.yaml", "practice", DANGLING),
        refused(data, "practices/SOTA-005.yaml", "practice", "a folder named like a record file; a record is a file"),
        refused(data, "practices/alias", None, "a link to a folder in a record folder; sotakg does not follow it"),
        listed(data, "practices/sub/SOTA-006.yaml", None),
        listed(data, "practices/zz.yaml", "practice"),
        listed(data, "registry.yaml", "registry"),
        listed(data, "topics/t.yaml", "topic"),
    ]
    assert listed(data, "practices/SOTA-001.yaml", "practice").size == 13


def test_scan_sources_from_inside_the_data_folder_shows_paths_relative_to_it(tmp_path, monkeypatch):
    data = hostile_tree(tmp_path)
    monkeypatch.chdir(data)
    shown = [source.shown for source in scan_sources(Path("."))]
    assert shown[:2] == ["adrs", "notes.yaml"]
    assert shown[-1] == "topics/t.yaml"


class _Unreadable:
    """A directory entry whose type cannot be read (as on a file system that refuses lstat)."""

    def __init__(self, folder: str) -> None:
        self.name = "AAA.yaml"
        self.path = os.path.join(folder, self.name)

    def is_symlink(self) -> bool:
        raise OSError(errno.EACCES, "Permission denied")


def test_an_entry_that_cannot_be_read_is_refused_and_the_folder_still_listed(tmp_path, monkeypatch):
    data = hostile_tree(tmp_path)
    monkeypatch.chdir(tmp_path)
    real_scandir = os.scandir

    def scandir(folder):
        entries = list(real_scandir(folder))
        return entries + [_Unreadable(folder)] if str(folder).endswith("practices") else entries

    monkeypatch.setattr(os, "scandir", scandir)
    found = scan_sources(data)
    first = [source.relative for source in found].index("practices/AAA.yaml")
    assert found[first] == refused(data, "practices/AAA.yaml", "practice", "cannot read: Permission denied")
    assert found[first + 1] == listed(data, "practices/SOTA-001.yaml", "practice")


def test_link_refusal_names_links_out_and_to_nothing_and_passes_the_rest(tmp_path):
    data = hostile_tree(tmp_path)
    assert link_refusal(data, "practices/SOTA-001.yaml") is None
    assert link_refusal(data, "practices/SOTA-002.yaml") == OUTSIDE
    assert link_refusal(data, "practices/SOTA-003.yaml") == DANGLING
    assert link_refusal(data, "practices/alias") is None
    assert link_refusal(data, "practices/missing.yaml") is None


def test_display_path_is_relative_below_the_working_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert display_path(tmp_path / "data" / "x.yaml") == "data/x.yaml"
    assert display_path(tmp_path.parent) == str(tmp_path.parent)
    assert display_path("") == ""


def _stat_with(result: os.stat_result, **fields: int) -> os.stat_result:
    values = list(result)
    for name, value in fields.items():
        values[{"st_mode": 0, "st_size": 6}[name]] = value
    return os.stat_result(values)


def test_a_file_that_grew_after_its_size_was_taken_is_read_whole(tmp_path, monkeypatch):
    path = tmp_path / "grew.yaml"
    path.write_bytes(b"abcdefghij")
    real_fstat = os.fstat
    monkeypatch.setattr(os, "fstat", lambda fd: _stat_with(real_fstat(fd), st_size=2))
    assert read_bounded(path, 100) == b"abcdefghij"


def test_a_file_that_grew_past_the_cap_is_refused_at_the_first_byte_over(tmp_path, monkeypatch):
    path = tmp_path / "grew.yaml"
    path.write_bytes(b"abcdefghij")
    real_stat, real_fstat = os.stat, os.fstat
    monkeypatch.setattr(os, "stat", lambda p, *a, **k: _stat_with(real_stat(p, *a, **k), st_size=2))
    monkeypatch.setattr(os, "fstat", lambda fd: _stat_with(real_fstat(fd), st_size=2))
    with pytest.raises(SourceTooLarge) as refusal:
        read_bounded(path, 5)
    assert str(refusal.value) == "file is 6 bytes, over the 5-byte limit (raise it with SOTAKG_MAX_FILE_BYTES)"


NOT_A_FILE = "not a regular file (a device, FIFO or socket); sotakg reads only files"


def test_a_fifo_is_refused_by_name_before_it_is_opened(tmp_path):
    os.mkfifo(tmp_path / "pipe")
    with pytest.raises(NotARegularFile) as refusal:
        read_bounded(tmp_path / "pipe", 100)
    assert str(refusal.value) == NOT_A_FILE


def test_a_file_swapped_for_a_fifo_after_the_check_is_refused_without_blocking(tmp_path, monkeypatch):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    regular = tmp_path / "regular.yaml"
    regular.write_bytes(b"x\n")
    real_stat = os.stat
    monkeypatch.setattr(os, "stat", lambda p, *a, **k: real_stat(regular if str(p) == str(fifo) else p, *a, **k))
    outcome: list[Exception] = []

    def read() -> None:
        try:
            read_bounded(fifo, 100)
        except Exception as error:
            outcome.append(error)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(10)
    assert not reader.is_alive(), "opening the FIFO blocked"
    assert isinstance(outcome[0], NotARegularFile) and str(outcome[0]) == NOT_A_FILE


def test_a_file_seen_as_a_fifo_once_opened_is_refused(tmp_path, monkeypatch):
    path = tmp_path / "x.yaml"
    path.write_bytes(b"x\n")
    real_fstat = os.fstat
    monkeypatch.setattr(os, "fstat", lambda fd: _stat_with(real_fstat(fd), st_mode=stat.S_IFIFO | 0o644))
    with pytest.raises(NotARegularFile) as refusal:
        read_bounded(path, 100)
    assert str(refusal.value) == NOT_A_FILE


@pytest.mark.parametrize("count", [3, sources_module.PARALLEL_READ_FROM + 37])
def test_many_files_read_at_once_give_what_reading_them_in_turn_gives(tmp_path, count):
    """The rule: ``read_many`` (threads past ``PARALLEL_READ_FROM`` files) returns, in order, each
    file's bytes or the refusal ``read_bounded`` gives it: a FIFO, a file over the cap, a missing one."""
    paths = []
    for index in range(count):
        path = tmp_path / f"f{index}.yaml"
        if index % 97 == 5:
            os.mkfifo(path)
        elif index % 89 == 7:
            path.write_bytes(b"x" * 200)
        elif index % 83 != 11:  # else: never made, missing
            path.write_bytes(f"id: {index}\n".encode())
        paths.append(str(path))
    read = read_many(paths, 100)
    assert len(read) == count
    for path, got in zip(paths, read, strict=True):
        try:
            expected: bytes | OSError = read_bounded(path, 100)
        except OSError as error:
            expected = error
        if isinstance(expected, OSError):
            assert type(got) is type(expected) and str(got) == str(expected), path
        else:
            assert got == expected, path


def test_a_reader_that_fails_otherwise_than_by_oserror_fails_the_whole_read(tmp_path, monkeypatch):
    """The bug it guards against: a reader thread dying on an unexpected error leaves its files
    unread, and the build goes on without them. The rule: the error is raised to the caller."""
    paths = [str(tmp_path / f"f{index}.yaml") for index in range(sources_module.PARALLEL_READ_FROM)]
    for path in paths:
        Path(path).write_bytes(b"id: x\n")
    real_read = sources_module.read_bounded

    def failing(path, limit):
        if path == paths[300]:
            raise MemoryError("no memory for this one")
        return real_read(path, limit)

    monkeypatch.setattr(sources_module, "read_bounded", failing)
    with pytest.raises(MemoryError, match="no memory for this one"):
        read_many(paths, 100)


def test_an_atomic_write_creates_its_folders_and_a_file_of_the_usual_mode(tmp_path):
    path = tmp_path / "a" / "b" / "out.md"
    old = os.umask(0o022)
    try:
        atomic_write_text(path, "é\n")
    finally:
        os.umask(old)
    assert path.read_bytes() == "é\n".encode()
    assert stat.S_IMODE(os.lstat(path).st_mode) == 0o644
    assert sorted(p.name for p in path.parent.iterdir()) == ["out.md"]


def test_an_atomic_write_to_a_fifo_is_refused_naming_it(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(NotARegularFile) as refusal:
        atomic_write_text(fifo, "x")
    assert (refusal.value.errno, refusal.value.filename) == (errno.EINVAL, str(fifo))
    assert refusal.value.strerror == "not a regular file (a device, FIFO or socket); write to a file or to '-'"
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_a_temporary_name_taken_by_a_link_is_skipped_never_written_through(tmp_path, monkeypatch):
    victim = tmp_path / "victim.txt"
    victim.write_text("SECRET\n")
    os.symlink(victim, tmp_path / f".out.md.{'0' * 16}.tmp")
    names = iter(["0" * 16, "1" * 16])
    monkeypatch.setattr(secrets, "token_hex", lambda n: next(names))
    atomic_write_text(tmp_path / "out.md", "new\n")
    assert victim.read_text() == "SECRET\n"
    assert (tmp_path / "out.md").read_text() == "new\n" and not (tmp_path / "out.md").is_symlink()
    assert os.path.islink(tmp_path / f".out.md.{'0' * 16}.tmp")
    assert not (tmp_path / f".out.md.{'1' * 16}.tmp").exists()


# ----------------------------------------------------------------------------- records/fastyaml.py


@pytest.mark.parametrize("text", ["{}\n", 'key: ""\n', "key: ''\n", "key: [a, b]\n", "key: 'it''s'\n"])
def test_the_fast_reader_reads_these_as_the_full_reader_does(text):
    assert parse_canonical(text) == parse_yaml_mapping(text)


@pytest.mark.parametrize(
    "text",
    [
        "key: abc:\n",  # YAML: "mapping values are not allowed here"
        'key: "abc\n',  # no closing quote
        'key: "a"b"\n',  # a quote inside a double-quoted scalar
        "key: [a, yes]\n",  # YAML 1.1 reads yes as true
    ],
)
def test_the_fast_reader_leaves_what_it_cannot_read_exactly_to_the_full_reader(text):
    assert parse_canonical(text) is None


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("", 10 * 1024 * 1024),
        ("0", 0),
        ("9" * 25, int("9" * 25)),
        ("9" * 41, 10**40),
        ("1K", 1024),
        ("20m", 20 * 1024 * 1024),
        (" 2G ", 2 * 1024**3),
    ],
)
def test_the_file_cap_from_the_environment_is_read_as_a_size(monkeypatch, value, expected):
    """The rule: digits are taken as they are, however many, with K, M or G as the command line's
    sizes are written; unset or empty is the default."""
    monkeypatch.setenv("SOTAKG_MAX_FILE_BYTES", value)
    assert sources_module.max_file_bytes() == expected


@pytest.mark.parametrize("value", ["²", "x1", "1KB", "-5", "1.5M"])
def test_a_file_cap_from_the_environment_that_is_no_size_is_refused_naming_it(monkeypatch, value):
    """The bugs: ``"²".isdigit()`` is true, and ``int("²")`` raised on every read; then any value
    that was not digits was silently replaced by the default, so ``SOTAKG_MAX_FILE_BYTES=1K`` set
    no cap at all. The rule: a value that is no size is a usage error naming the variable."""
    monkeypatch.setenv("SOTAKG_MAX_FILE_BYTES", value)
    with pytest.raises(UsageProblem, match=r"^SOTAKG_MAX_FILE_BYTES is .*; set it to a number such as 10485760"):
        sources_module.max_file_bytes()
