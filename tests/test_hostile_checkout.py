"""What a hostile checkout could do to sotakg, found by an adversarial review: each test holds a fix.

Every file, link and victim these tests make lies under pytest's tmp_path.
"""

from __future__ import annotations

import contextlib
import json
import os
import posixpath
import shutil
import signal
import subprocess
import sys
import urllib.parse
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


def test_a_sarif_location_names_the_file_the_finding_is_about(runner, workdir):
    """The bug: ``render_sarif`` (``rules/report.py:_artifact_location``) writes a relative file's
    path into ``artifactLocation.uri`` as it is, without percent-encoding it (an absolute one goes
    through ``Path.as_uri``, which does encode). SARIF 2.1.0 says the ``uri`` is a URI reference, and
    every consumer (GitHub code scanning, the SARIF viewers) decodes it as one. A checkout commits a
    record file named ``%2e%2e%2f%2e%2e%2fREADME.md#x.yaml``: its finding ("must be named after its
    id") is written with that name as the uri, which decodes to the path ``data/practices/../../
    README.md`` (the ``#x.yaml`` a fragment), so the alert of the pull request's file lands on the
    repository's README.md, or any file the checkout chooses, and not on the file it is about.

    The rule: a finding names its file, line and record; in SARIF the uri is the file's path
    percent-encoded (``%`` as ``%25``, ``#`` as ``%23``, a blank as ``%20``, ...), so that decoded it
    is exactly the file the finding is about."""
    name = "%2e%2e%2f%2e%2e%2fREADME.md#x.yaml"
    (workdir / "data" / "practices" / name).write_text("id: SOTA-900\n", encoding="utf-8")
    result = runner.invoke(cli, ["validate", "--format", "sarif"])
    assert result.exit_code == 1, result.output[-2000:]
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    log = json.loads(result.stdout)
    uris = [
        location["physicalLocation"]["artifactLocation"]["uri"]
        for finding in log["runs"][0]["results"]
        for location in finding.get("locations", [])
        if "physicalLocation" in location
    ]
    about = [uri for uri in uris if "README" in uri]
    assert about, uris  # the file has its finding ...
    for uri in about:
        parts = urllib.parse.urlsplit(uri)
        named = posixpath.normpath(urllib.parse.unquote(parts.path))
        # ... and its location, read as the URI it is, names that file, not another one
        assert (named, parts.fragment, parts.query) == (f"data/practices/{name}", "", ""), uri


def _repository_whose_commit_names_one_blob_under_a_tree_bomb(folder: Path, levels: int) -> Path:
    """A repository holding the shipped data, whose branch ``bomb`` adds ``data/bomb``: a tree of
    ``levels`` levels, each naming the level below twice (``a`` and ``b``), over one empty
    ``x.yaml``. git stores ``levels + 1`` small trees and one blob (a few kilobytes), and the tree
    names 2**levels files. The checkout (HEAD) holds only the shipped data."""
    shutil.copytree(SHIPPED_DATA, folder / "data")
    _git(folder, "init", "-q", ".")
    _git(folder, "add", "data")
    _git(folder, "commit", "-q", "-m", "base")
    blob = _git(folder, "hash-object", "-w", "--stdin", stdin=b"")
    tree = _git(folder, "mktree", stdin=f"100644 blob {blob}\tx.yaml\n".encode())
    for _ in range(levels):
        tree = _git(folder, "mktree", stdin=f"040000 tree {tree}\ta\n040000 tree {tree}\tb\n".encode())
    listing = _git(folder, "ls-tree", "HEAD:data") + f"\n040000 tree {tree}\tbomb\n"
    data = _git(folder, "mktree", stdin=listing.encode())
    top = _git(folder, "mktree", stdin=f"040000 tree {data}\tdata\n".encode())
    commit = _git(folder, "commit-tree", top, "-p", "HEAD", "-m", "a tree naming one blob many times")
    _git(folder, "update-ref", "refs/heads/bomb", commit)
    return folder


def test_a_revision_whose_tree_names_a_subtree_many_times_cannot_make_diff_use_memory_without_bound(tmp_path):
    """The bug: ``read_tree_files`` (``records/revisions.py``) runs ``git ls-tree -r -z -l`` with
    ``capture_output``, keeps the whole listing, splits it into one entry a file, and keeps a
    ``wanted`` tuple and then a SourceFile and a Problem per record-like name, however many there
    are. The cap on one revision (``SOTAKG_MAX_REVISION_BYTES``) counts bytes of blobs, so it never
    sees empty files, and the depth limit that guards the data folder on disk (32 levels) is not
    applied to a revision. In git one tree may name another any number of times: 16 trees of two
    entries each over one empty ``x.yaml`` (a few kilobytes in the repository) name 65,536 files,
    and ``sotakg diff bomb HEAD`` peaks about 100 MB above the same diff over a tree naming it twice
    (measured: ~150 MB against ~42 MB) and prints 65,536 lines; every level added doubles both, so
    26 levels (still a few kilobytes in git) need ~100 GB. The checkout holds none of those files:
    only the commit ``bomb`` names them.

    The rule: reading a revision costs memory of the order of what git holds of it; the number of
    entries a revision may name is bounded (an entry count cap, or as on disk: folders deeper than 32
    levels are refused, and the problems listed are bounded and the rest counted), the listing is
    read as a stream rather than whole, and the run still fails (exit 1) naming the files."""
    small = _repository_whose_commit_names_one_blob_under_a_tree_bomb(tmp_path / "small", 1)
    large = _repository_whose_commit_names_one_blob_under_a_tree_bomb(tmp_path / "large", 16)
    assert not (large / "data" / "bomb").exists()  # the checkout holds none of them
    baseline = _peak_kib(small, "diff", "bomb", "HEAD")
    peak = _peak_kib(large, "diff", "bomb", "HEAD")
    assert peak - baseline < 40 * 1024, (
        f"a revision of a few kilobytes naming 65,536 files made `sotakg diff` use {peak - baseline} KiB "
        f"more than one naming 2"
    )


def test_many_links_to_one_record_folder_cannot_make_the_build_use_memory_without_bound(tmp_path):
    """The bug: ``scan_sources`` and ``scan_stats`` (``records/sources.py``, ``graph/store.py``) follow
    a top-level link to any folder inside the data folder, whatever its name, and walk that folder
    again under the link's name for every such link. A link costs the checkout one tree entry (git
    stores its target text once, however many links name it), but each one makes the build list,
    read, hash, parse and report (as "not in a record folder") every file of the folder it leads
    to: 1,500 links ``data/lN -> practices`` (a 50 kB tree in git) make the build read 63,000 files,
    peak about 140 MB above the same data with one such link (measured: ~175 MB against ~35 MB) and
    print 63,000 lines; the cost is the product of the links and the files, so a checkout of a few
    thousand links over a folder of a thousand records (both in it anyway) needs gigabytes.

    The rule: a checkout costs memory of the order of its size: each real folder is walked once
    (a second name for a folder already walked is refused by name, one problem, or a top-level link is
    followed only when it is a record folder's name, whose files the build then reads once), and the
    run still fails (exit 1) naming the links."""
    one, many = tmp_path / "one-link", tmp_path / "many-links"
    for project, links in ((one, 1), (many, 1500)):
        shutil.copytree(SHIPPED_DATA, project / "data")
        for n in range(links):
            (project / "data" / f"l{n}").symlink_to("practices")
    baseline = _peak_kib(one, "build")
    peak = _peak_kib(many, "build")
    assert peak - baseline < 40 * 1024, (
        f"1,500 links to one record folder made the build use {peak - baseline} KiB more than one link"
    )
