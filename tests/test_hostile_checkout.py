"""What a hostile checkout could do to sotakg, found by an adversarial review: each test holds a fix.

Every file, link and victim these tests make lies under pytest's tmp_path.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from sotakg.cli import cli

from .conftest import SHIPPED_DATA, subprocess_env


@contextlib.contextmanager
def _deadline(seconds: int) -> Iterator[None]:
    """Fail the test, rather than hang it, when the block takes longer than ``seconds``."""

    def expired(signum, frame):
        raise TimeoutError(f"took more than {seconds} s")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


@pytest.mark.parametrize("command", [["build"], ["validate"], ["query", "adrs"]])
def test_a_lock_file_hard_linked_to_a_file_elsewhere_is_left_as_it_was(runner, workdir, command):
    """The bug: ``build_lock`` opens ``.sotakg/store.lock`` with O_NOFOLLOW (so a symbolic
    link is refused) but then truncates it and writes ``pid N`` into it. A checkout (or a cache
    restored into it) that holds ``.sotakg/store.lock`` as a hard link to a file elsewhere has that
    file's content destroyed by the first command that builds: the victim below ends up holding
    ``pid 1234``.

    The rule: a file elsewhere is never written. The lock must not be written through a
    second name (refuse a lock whose link count is above one, as a link or a FIFO is refused, or
    never truncate and write into a lock file sotakg did not create); the victim keeps its bytes."""
    outside = workdir / "outside"
    outside.mkdir()
    victim = outside / "victim.txt"
    victim.write_text("precious: the user's own file\n", encoding="utf-8")
    (workdir / ".sotakg").mkdir()
    os.link(victim, workdir / ".sotakg" / "store.lock")
    with _deadline(120):
        result = runner.invoke(cli, command)
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in result.output
    assert victim.read_text(encoding="utf-8") == "precious: the user's own file\n"


@pytest.mark.parametrize("command", [["build"], ["validate"]])
def test_a_data_path_the_system_refuses_is_named_with_its_control_characters_escaped(runner, workdir, command):
    """The bug: a data file whose path, as sotakg opens it, is longer than the system takes
    makes ``scan_sources`` raise OSError at ``entry.stat()``, and the CLI's catch-all prints
    ``cannot use <path>: File name too long`` with the path exactly as the checkout named it. Git
    checks such a file out (its path in the work tree is under PATH_MAX; only the absolute path that
    ``--data /abs/data`` gives is over). Everywhere else sotakg passes names through ``printable``
    (``Problem.__str__``, ``_shown``): here a folder name holding a line break starts a line of its
    own in the CI log, so a checkout can write ``::error ...`` (a GitHub Actions workflow command) or
    any other forged line into it.

    The rule: the file is named with its control characters escaped (``\\x0a``), as every other
    message names a file, and the run fails (exit 1) without a traceback."""
    name = "x" * 240 + ".yaml"
    # Every name is within NAME_MAX; the file's path in the checkout (data/...) is under PATH_MAX, and
    # so is its folder's absolute path, but not the file's absolute path.
    folder = Path("data") / "notes\n::error file=forged::INJECTED"
    while len(str(folder)) < 3600:
        folder = folder / ("d" * 200)
    folder = folder / ("e" * (4095 - len(name) - 11 - len(str(folder))))
    assert len(str(folder / name)) < 4095 < len(str(workdir / folder / name))
    assert len(str(workdir / folder)) < 4095
    os.makedirs(folder)
    descriptor = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        handle = os.open(name, os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=descriptor)
        os.write(handle, b"id: SOTA-001\n")
        os.close(handle)
    finally:
        os.close(descriptor)
    with _deadline(120):
        result = runner.invoke(cli, ["--data", str(workdir / "data"), *command])
    assert result.exit_code == 1, result.output[:2000]
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert "INJECTED" in result.output  # the file is named ...
    forged = [line[:120] for line in result.output.splitlines() if line.startswith("::")]
    assert forged == [], forged  # ... but no line of the output is the checkout's


_MEASURE = """
import resource, sys
from sotakg.cli import cli
try:
    cli.main(args=sys.argv[1:], prog_name="sotakg")
except SystemExit:
    pass
print("MAXRSS", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr)
"""


def _peak_kib(folder: Path, *args: str) -> int:
    """The peak resident memory (KiB) of ``sotakg ARGS`` run in ``folder``, its output discarded."""
    done = subprocess.run(
        [sys.executable, "-c", _MEASURE, *args],
        cwd=folder,
        env=subprocess_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        timeout=180,
        check=False,
    )
    marks = [line for line in done.stderr.decode("utf-8", "replace").splitlines() if line.startswith("MAXRSS ")]
    assert marks, done.stderr[-2000:]
    return int(marks[-1].split()[1])


def test_a_record_file_within_the_size_cap_cannot_make_the_build_use_memory_without_bound(tmp_path):
    """The bug: the 10 MB cap on a record file is what bounds the memory a checkout can make
    sotakg use, but a file within it that is one unknown field a line (``k0: 1``, ``k1: 1``, ...)
    gives one Problem each, all kept, all formatted into one message and printed: a 1 MB file makes
    the build hold about 150 MB more than the same file with one unknown field (a 10 MB one: ~1.6 GB,
    ~50 s and ~180 MB of output), so a few such files, a few MB in git, exhaust a CI runner's memory.

    The rule: a file within the cap costs memory of the order of its size: the problems of one
    file are bounded (the first ones named with their lines, then how many more), so the run still
    fails naming the file, its line and its record, within a small multiple of the file's size."""
    one, many = tmp_path / "one-unknown-field", tmp_path / "many-unknown-fields"
    for project, fields in ((one, 1), (many, 100_000)):
        shutil.copytree(SHIPPED_DATA, project / "data")
        lines = ["id: SOTA-001", *(f"k{n}: 1" for n in range(fields))]
        (project / "data" / "practices" / "SOTA-001.yaml").write_text("\n".join(lines) + "\n", encoding="utf-8")
    size_kib = (many / "data" / "practices" / "SOTA-001.yaml").stat().st_size // 1024  # ~1 MB, a tenth of the cap
    baseline = _peak_kib(one, "build")  # fails at the same step: the same work but for the one file's size
    peak = _peak_kib(many, "build")
    assert peak - baseline < 60 * size_kib, (
        f"a {size_kib} KiB record file made the build use {peak - baseline} KiB more than a one-line one"
    )


def test_the_problems_of_one_file_are_listed_up_to_a_bound_and_the_rest_counted(runner, workdir):
    from sotakg.records.schema import MAX_PROBLEMS_PER_FILE

    fields = MAX_PROBLEMS_PER_FILE + 10
    lines = ["id: SOTA-001", *(f"k{n}: 1" for n in range(fields))]
    (workdir / "data" / "practices" / "SOTA-001.yaml").write_text("\n".join(lines) + "\n", encoding="utf-8")
    result = runner.invoke(cli, ["build"])
    assert result.exit_code == 1
    shown = result.stderr.splitlines()
    assert shown[0] == f"Error: {fields} problems in the data:"
    assert len(shown) == 1 + MAX_PROBLEMS_PER_FILE + 1
    assert shown[1].startswith("data/practices/SOTA-001.yaml:2: unknown field 'k0'; a practice has: id, ")
    last = MAX_PROBLEMS_PER_FILE + 1
    assert shown[-1] == (
        f"data/practices/SOTA-001.yaml:{last}: and 10 more problems of its fields after this line, not listed; "
        "fix those above first (SOTA-001)"
    )


def _git(repo: Path, *args: str, stdin: bytes | None = None) -> str:
    environment = {
        **subprocess_env(),
        "GIT_AUTHOR_NAME": "a",
        "GIT_AUTHOR_EMAIL": "a@example.org",
        "GIT_COMMITTER_NAME": "a",
        "GIT_COMMITTER_EMAIL": "a@example.org",
        "GIT_CONFIG_NOSYSTEM": "1",
        "HOME": str(repo),
    }
    done = subprocess.run(
        ["git", "-C", str(repo), *args], input=stdin, capture_output=True, env=environment, check=True
    )
    return done.stdout.decode().strip()


BLOB_BYTES = 1024 * 1024


def _repository_whose_previous_commit_names_one_blob(folder: Path, times: int) -> Path:
    """A git repository holding the shipped data, whose commit HEAD~1 adds ``times`` record files that
    are all the one blob of 1 MB (git stores it once, compressed to about a kilobyte), and whose HEAD
    removes them again, so the checkout itself holds only the shipped data."""
    shutil.copytree(SHIPPED_DATA, folder / "data")
    _git(folder, "init", "-q", ".")
    _git(folder, "add", "data")
    _git(folder, "commit", "-q", "-m", "base")
    blob = b"id: SOTA-999\n#" + b"a" * (BLOB_BYTES - 16) + b"\n"
    object_id = _git(folder, "hash-object", "-w", "--stdin", stdin=blob)
    entries = "".join(f"100644 {object_id}\tdata/practices/SOTA-9{n:04d}.yaml\n" for n in range(times))
    _git(folder, "update-index", "--index-info", stdin=entries.encode())
    _git(folder, "commit", "-q", "-m", "the same blob under many names")
    _git(folder, "rm", "-q", "--cached", "--", "data/practices/SOTA-9*")
    _git(folder, "commit", "-q", "-m", "gone again")
    return folder


@pytest.mark.parametrize(
    "command",
    [["diff", "HEAD~1", "HEAD"], ["validate", "--baseline", "HEAD~1"]],
    ids=["diff", "validate-baseline"],
)
def test_a_revision_naming_one_blob_many_times_cannot_make_sotakg_use_memory_without_bound(tmp_path, command):
    """The bug: ``read_tree_files`` asks ``git cat-file --batch`` for the blob of every record file of
    the revision and keeps the whole answer (``capture_output``) and a copy of each file's bytes in
    ``contents`` before it parses any of them. In git a tree may name one blob under any number of
    names: a commit of a pull request naming one 1 MB blob (a kilobyte in git, compressed) as 300
    record files makes ``sotakg diff HEAD~1 HEAD`` and ``sotakg validate --baseline HEAD~1`` hold
    about 600 MB (measured: ~650 MB peak against ~45 MB), and with the default 10 MB cap and a few
    thousand names, tens of gigabytes: a repository of a few kilobytes exhausts a CI runner's memory.
    The checkout never pays for it: the commit that names the files is not the one checked out.

    The rule: reading a revision costs memory of the order of what git holds of it, or of one file at a
    time (each file parsed and let go as it is read, or each distinct object read once), never of the
    sum of every entry's size; the run still ends with the files' problems named, and exit 1."""
    one = _repository_whose_previous_commit_names_one_blob(tmp_path / "once", 1)
    many = _repository_whose_previous_commit_names_one_blob(tmp_path / "many", 300)
    assert _git(many, "ls-tree", "-r", "--name-only", "HEAD", "data/practices").count("SOTA-9") == 0
    assert not any((many / "data" / "practices").glob("SOTA-9*.yaml"))  # the checkout holds none of them
    baseline = _peak_kib(one, *command)
    peak = _peak_kib(many, *command)
    size_kib = BLOB_BYTES // 1024
    assert peak - baseline < 60 * size_kib, (
        f"a revision naming one {size_kib} KiB blob 300 times made `sotakg {' '.join(command)}` use "
        f"{peak - baseline} KiB more than one naming it once"
    )
