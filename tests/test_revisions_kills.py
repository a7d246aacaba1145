"""Tests written to kill the mutants of records/revisions.py that survived mutation testing (issue 20).

Each pins behaviour a surviving mutant changed: which entries of a revision's tree are read, and how
each refused one is named (a name that is not UTF-8, a link, a submodule, a file over the limit)
without ending the listing; the exact message of a tree, an object, a revision or a repository git
cannot give; what BASE names when it is spelled as a path; the commit, tree and paths of a side read
from git; and how git is run: found on the PATH, bounded in time, with the caller's environment, in
English whatever the user's language, and blind to replace refs. Every repository is made in the
test's own temporary folder, with git isolated from the machine's configuration.
"""

from __future__ import annotations

import os
import random
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from sotakg.errors import DataError, Problem
from sotakg.records import revisions
from sotakg.records.revisions import (
    DataSide,
    RevisionError,
    check_revision_name,
    data_tree,
    find_revision,
    load_revision,
    load_side,
    read_tree_files,
    repository_of,
    resolve_commit,
    side_source,
)
from sotakg.records.schema import Anthology
from sotakg.records.sources import DANGLING, NOT_UTF8, OUTSIDE

from .gitrepo import commit, empty_repository, git, isolate_git, set_fields

NOT_A_RECORD_FOLDER = "not in a record folder; move it into one of: adrs, papers, practices, topics"
#: The size limit the refusal tests set, and a file of exactly that many bytes (read, not refused).
LIMIT = 100
AT_THE_LIMIT = b"id: SOTA-009\n" + b"#" * (LIMIT - 14) + b"\n"


#: How the messages say to name BASE without git.
FOLDER_INSTEAD = (
    "spelled as a path (sotakg diff ./old-data, validate --baseline ./old-data, publish --since ./old-data)"
)


def practice(record_id: str, title: str = "Shard the optimizer state") -> str:
    return f"id: {record_id}\nversion: 1\ntitle: {title}\nstatus: Proposed\ntopic: distributed-optimization\n"


def small_repository(root: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A repository at ``root`` whose first commit (branch main) holds one practice in ``data/``; the
    working directory is the folder above it, so messages name it ``root.name``."""
    isolate_git(monkeypatch)
    (root / "data" / "practices").mkdir(parents=True)
    git(root, "init", "-q", "-b", "main")
    (root / "data" / "practices" / "SOTA-001.yaml").write_text(practice("SOTA-001"), encoding="utf-8")
    commit(root, "one practice")
    monkeypatch.chdir(root.parent)
    return root


def refusal(call: Callable[[], object]) -> str:
    """The message of the RevisionError that ``call`` raises."""
    with pytest.raises(RevisionError) as raised:
        call()
    return str(raised.value)


def blob(repo: Path, data: bytes) -> str:
    """Store ``data`` as a blob of ``repo``; its id."""
    scratch = repo.parent / "blob.tmp"
    scratch.write_bytes(data)
    try:
        return git(repo, "hash-object", "-w", str(scratch)).strip()
    finally:
        scratch.unlink()


def tree_of(repo: Path, entries: list[tuple[str, str, str]]) -> str:
    """The id of a tree holding ``entries`` (mode, object id, path), made through ``repo``'s index."""
    for mode, object_id, path in entries:
        git(repo, "update-index", "--add", "--cacheinfo", f"{mode},{object_id},{path}")
    return git(repo, "write-tree").strip()


@pytest.fixture
def empty_repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty repository for trees made by hand; the working directory is the folder above it."""
    isolate_git(monkeypatch)
    repo = empty_repository(tmp_path / "repo")
    monkeypatch.chdir(tmp_path)
    return repo


# ----------------------------------------------------------------------------------------- run_git


def test_git_missing_from_the_path_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "data").mkdir()
    (tmp_path / "empty").mkdir()
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert (
        refusal(lambda: repository_of(tmp_path / "data"))
        == "reading a revision needs git, and it is not installed; install git"
    )


def test_a_git_call_that_outlives_the_time_limit_is_an_error_naming_the_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "data").mkdir()
    (tmp_path / "bin").mkdir()
    slow = tmp_path / "bin" / "git"
    slow.write_text("#!/bin/sh\nexec sleep 5\n", encoding="utf-8")
    slow.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setattr(revisions, "GIT_TIMEOUT", 1.0)
    monkeypatch.chdir(tmp_path)
    assert refusal(lambda: repository_of(Path("data"))) == "git rev-parse took more than 1 s in data"


def test_git_looks_for_the_repository_as_the_callers_environment_says(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    isolate_git(monkeypatch)
    outer = tmp_path / "outer"
    (outer / "sub" / "data").mkdir(parents=True)
    git(outer, "init", "-q", "-b", "main")
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(outer))  # git must not look in outer itself
    monkeypatch.chdir(tmp_path)
    assert refusal(lambda: repository_of(Path("outer/sub/data"))) == (
        "data folder outer/sub/data is not in a git repository, so it has no revisions; "
        "compare with a data folder instead, " + FOLDER_INSTEAD
    )


def test_gits_messages_are_read_in_english_whatever_the_users_language(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    isolate_git(monkeypatch)
    monkeypatch.setenv("LC_ALL", "C.UTF-8")
    monkeypatch.setenv("LANGUAGE", "de")
    said = subprocess.run(["git", "-C", str(tmp_path), "rev-parse", "--verify", "x"], capture_output=True, text=True)
    if said.stderr.startswith("fatal:"):
        pytest.skip("this git has no German messages")
    repo = tmp_path / "repo"
    data = repo / "data"
    for folder in ("objects/info", "refs/heads"):
        (data / folder).mkdir(parents=True)
    (data / "HEAD").write_text("ref: refs/heads/main\n", encoding="utf-8")
    (data / "config").write_text("[core]\n\trepositoryformatversion = 0\n", encoding="utf-8")
    git(repo, "init", "-q", "-b", "main")
    monkeypatch.chdir(repo)
    assert refusal(lambda: repository_of(Path("data"))) == (
        "git takes data folder data (or a folder above it) for a bare repository (it holds HEAD, objects/ "
        "and refs/), and sotakg reads no repository a checkout could have made: git would obey its config. "
        "Remove those files, or compare with a data folder instead, " + FOLDER_INSTEAD
    )


def test_a_replaced_commit_is_read_as_it_is(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    repo = small_repository(tmp_path / "repo", monkeypatch)
    base = git(repo, "rev-parse", "HEAD").strip()
    set_fields(repo / "data" / "practices" / "SOTA-001.yaml", title="A changed title")
    head = commit(repo, "change the title")
    git(repo, "replace", base, head)  # to git's porcelain, the base now reads as the head
    side = load_revision(repo / "data", base)
    assert side.tree == git(repo, "--no-replace-objects", "rev-parse", f"{base}:data").strip()
    assert [record.fields["title"] for record in side.anthology.records] == ["Shard the optimizer state"]


# ----------------------------------------------------------------------------------- repository_of


def test_a_missing_data_folder_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert refusal(lambda: repository_of(Path("nowhere"))) == "data folder nowhere does not exist; pass --data DIR"


def test_a_data_folder_in_no_repository_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    isolate_git(monkeypatch)
    (tmp_path / "old").mkdir()
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    assert refusal(lambda: repository_of(Path("old"))) == (
        "data folder old is not in a git repository, so it has no revisions; "
        "compare with a data folder instead, " + FOLDER_INSTEAD
    )


def test_the_data_folders_path_in_its_repository_is_kept_whole(tmp_path: Path, monkeypatch) -> None:
    isolate_git(monkeypatch)
    repo = empty_repository(tmp_path / "repo", "X-data")
    assert repository_of(repo / "X-data") == (Path(os.path.realpath(repo)), "X-data")


def test_a_repository_whose_path_is_not_utf8_is_found(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    isolate_git(monkeypatch)
    repo = empty_repository(tmp_path / os.fsdecode(b"anthology-\xff"), "data")
    assert repository_of(repo / "data") == (Path(os.path.realpath(repo)), "data")


# ------------------------------------------------------------------------ revision names and BASE


@pytest.mark.parametrize("name", ["main\nHEAD", "main\0HEAD"])
def test_a_revision_name_holding_a_line_break_or_a_nul_is_refused(name: str) -> None:
    assert refusal(lambda: check_revision_name(name)) == (
        f"{name!r} is not a git revision; give a branch, tag or commit such as origin/main "
        f"(or a data folder as a path, such as ./old-data)"
    )


@pytest.mark.parametrize("spec", [".", "..", "./old", "../old", "/abs/old"])
def test_a_base_spelled_as_a_path_names_a_folder(spec: str) -> None:
    assert side_source(spec) == Path(spec)


def test_a_base_not_spelled_as_a_path_names_a_revision() -> None:
    assert side_source("..old") == "..old"


def test_a_missing_revision_names_the_repository(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    small_repository(tmp_path / "repo", monkeypatch)
    assert refusal(lambda: resolve_commit(Path("repo"), "nosuch")) == (
        "no revision 'nosuch' in the repository at repo; "
        "check the name (git log --oneline), or fetch the branch or commit it names first "
        "(git fetch origin main, or git fetch origin <commit>)"
    )


# ------------------------------------------------------------------------- the data folder's tree


def test_a_revision_where_the_data_folder_is_a_file_has_no_folder(tmp_path: Path, monkeypatch) -> None:
    isolate_git(monkeypatch)
    repo = empty_repository(tmp_path / "repo")
    (repo / "data").write_text("not a folder yet\n", encoding="utf-8")
    first = commit(repo, "data is a file")
    assert (
        refusal(lambda: data_tree(repo, first, "data", "v1"))
        == "revision 'v1' has no folder data; was the data folder elsewhere then?"
    )


def test_a_revision_without_its_top_tree_names_the_top_folder_as_dot(tmp_path: Path, monkeypatch) -> None:
    # The data folder is the repository's top, and the clone lacks the tree of that commit.
    isolate_git(monkeypatch)
    repo = empty_repository(tmp_path / "repo", "practices")
    (repo / "practices" / "SOTA-001.yaml").write_text(practice("SOTA-001"), encoding="utf-8")
    commit(repo, "one practice")
    top = git(repo, "rev-parse", "HEAD^{tree}").strip()
    (repo / ".git" / "objects" / top[:2] / top[2:]).unlink()
    assert (
        refusal(lambda: find_revision(repo, "HEAD"))
        == "revision 'HEAD' has no folder .; was the data folder elsewhere then?"
    )


def test_a_revision_before_the_data_folder_is_named_in_the_message(tmp_path: Path, monkeypatch) -> None:
    isolate_git(monkeypatch)
    repo = empty_repository(tmp_path / "repo")
    (repo / "README").write_text("x\n", encoding="utf-8")
    commit(repo, "no data yet")
    git(repo, "tag", "v0")
    (repo / "data" / "practices").mkdir(parents=True)
    (repo / "data" / "practices" / "SOTA-001.yaml").write_text(practice("SOTA-001"), encoding="utf-8")
    commit(repo, "one practice")
    assert (
        refusal(lambda: find_revision(repo / "data", "v0"))
        == "revision 'v0' has no folder data; was the data folder elsewhere then?"
    )


# ------------------------------------------------------------------------- a side read from a revision


def test_a_side_read_from_git_carries_its_commit_tree_and_paths(tmp_path: Path, monkeypatch) -> None:
    repo = small_repository(tmp_path / "repo", monkeypatch)
    head = git(repo, "rev-parse", "HEAD").strip()
    side = load_revision(repo / "data", "main")
    assert (side.label, side.root, side.tree, side.commit, side.link_root) == (
        f"main ({head[:12]})",
        "data",
        git(repo, "rev-parse", "main:data").strip(),
        head,
        "data",
    )
    assert [(record.id, record.file) for record in side.anthology.records] == [
        ("SOTA-001", "data/practices/SOTA-001.yaml")
    ]


def test_files_of_a_revision_outside_the_record_folders_are_problems(tmp_path: Path, monkeypatch) -> None:
    repo = small_repository(tmp_path / "repo", monkeypatch)
    (repo / "data" / "notes.yaml").write_text("id: SOTA-002\n", encoding="utf-8")
    (repo / "data" / "practices" / "sub").mkdir()
    (repo / "data" / "practices" / "sub" / "SOTA-003.yaml").write_text(practice("SOTA-003"), encoding="utf-8")
    commit(repo, "two files outside the record folders")
    with pytest.raises(DataError) as raised:
        load_revision(repo / "data", "main")
    assert raised.value.problems == [
        Problem("data/notes.yaml", None, "notes", NOT_A_RECORD_FOLDER),
        Problem("data/practices/sub/SOTA-003.yaml", None, "SOTA-003", NOT_A_RECORD_FOLDER),
    ]


# ----------------------------------------------------------------------------------- read_tree_files


def test_only_yaml_files_outside_hidden_entries_are_read(empty_repo: Path) -> None:
    record = blob(empty_repo, AT_THE_LIMIT)
    tree = tree_of(
        empty_repo,
        [
            ("100644", record, ".hidden.yaml"),  # sorted first: nothing after it may be lost
            ("100644", record, "0-README.md"),
            ("100644", record, "practices/.draft.yaml"),
            ("100644", record, "practices/NOTES.txt"),
            ("100644", record, "practices/SOTA-009.yaml"),
            ("100644", record, "practices/SOTA-010.yml"),
        ],
    )
    assert read_tree_files(empty_repo, tree, "data") == (
        {"practices/SOTA-009.yaml": AT_THE_LIMIT, "practices/SOTA-010.yml": AT_THE_LIMIT},
        [],
    )


def test_files_outside_the_record_folders_are_named_up_to_a_limit_never_read_and_the_rest_counted(
    empty_repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The rule: a revision's record-like file outside the record folders is a problem, as on disk,
    without its blob being read; past ``LISTED_OUTSIDE_FILES`` of them the rest are counted in one
    problem (a tree naming one subtree twice at each of 16 levels names 65,536 such files)."""
    monkeypatch.setattr(revisions, "LISTED_OUTSIDE_FILES", 2)
    record = blob(empty_repo, AT_THE_LIMIT)
    entries = [("100644", record, f"extra/n{n}.yaml") for n in range(5)]
    tree = tree_of(empty_repo, [*entries, ("100644", record, "practices/SOTA-009.yaml")])
    contents, problems = read_tree_files(empty_repo, tree, "data")
    assert list(contents) == ["practices/SOTA-009.yaml"]
    assert problems == [
        Problem("data/extra/n0.yaml", None, "n0", NOT_A_RECORD_FOLDER),
        Problem("data/extra/n1.yaml", None, "n1", NOT_A_RECORD_FOLDER),
        Problem(
            "data",
            None,
            None,
            "and 3 more files not in a record folder (the first 2 are named above); move them into one of: "
            "adrs, papers, practices, topics",
        ),
    ]


def test_a_revision_naming_more_files_than_the_cap_is_refused_and_git_is_stopped(
    empty_repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The rule: the entries of a revision's data folder are counted as git lists them, and past
    ``SOTAKG_MAX_REVISION_FILES`` the revision is refused, saying how to raise the cap."""
    record = blob(empty_repo, AT_THE_LIMIT)
    tree = tree_of(empty_repo, [("100644", record, f"practices/SOTA-{n:03d}.yaml") for n in range(5)])
    monkeypatch.setenv("SOTAKG_MAX_REVISION_FILES", "5")
    assert len(read_tree_files(empty_repo, tree, "data")[0]) == 5
    monkeypatch.setenv("SOTAKG_MAX_REVISION_FILES", "4")
    assert refusal(lambda: read_tree_files(empty_repo, tree, "data")) == (
        f"the data folder of tree {tree} names more than 4 files (git can name one folder any number of "
        f"times); raise SOTAKG_MAX_REVISION_FILES if the revision is yours"
    )


def test_a_revision_entry_longer_than_any_path_is_refused_without_copying_it_on(
    empty_repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The bug: the streamed listing kept the part of an entry not yet ended by its NUL and joined
    each new chunk to it: one name of many megabytes (git compresses it to almost nothing) was copied
    again a chunk at a time. The rule: an entry longer than ``MAX_ENTRY_BYTES`` is refused."""
    monkeypatch.setattr(revisions, "MAX_ENTRY_BYTES", 200)
    record = blob(empty_repo, AT_THE_LIMIT)
    long_name = "practices/" + "x" * 300 + ".yaml"
    tree = tree_of(empty_repo, [("100644", record, long_name), ("100644", record, "practices/SOTA-009.yaml")])
    assert refusal(lambda: read_tree_files(empty_repo, tree, "data")) == (
        f"tree {tree} names a file whose entry is over 200 bytes; no record file is"
    )
    git(empty_repo, "rm", "-q", "--cached", long_name)  # the index held both: now only the short name
    short = git(empty_repo, "write-tree").strip()
    assert list(read_tree_files(empty_repo, short, "data")[0]) == ["practices/SOTA-009.yaml"]


REFUSED = {
    "a name that is not UTF-8": (  # sorted before SOTA-009
        "100644",
        os.fsdecode(b"practices/SOTA-000\xff.yaml"),
        "practices/SOTA-000\\xff.yaml",
        "SOTA-000\\xff",
        NOT_UTF8,
    ),
    "a submodule": (
        "160000",
        "practices/SOTA-002.yaml",
        "practices/SOTA-002.yaml",
        "SOTA-002",
        "not a regular file (mode 160000) in this revision; sotakg reads only regular files",
    ),
    "a symbolic link": (
        "120000",
        "practices/SOTA-002.yaml",
        "practices/SOTA-002.yaml",
        "SOTA-002",
        "a symbolic link in this revision; sotakg follows no link in a revision: commit the file itself",
    ),
    "a file over the limit": (
        "100644",
        "practices/SOTA-002.yaml",
        "practices/SOTA-002.yaml",
        "SOTA-002",
        f"file is {LIMIT + 1} bytes, over the {LIMIT}-byte limit (raise it with SOTAKG_MAX_FILE_BYTES)",
    ),
}


@pytest.mark.parametrize("shown_prefix", ["", "data"])
@pytest.mark.parametrize("refused", list(REFUSED))
def test_a_refused_entry_is_a_problem_named_like_the_file_and_the_listing_goes_on(
    empty_repo: Path, monkeypatch: pytest.MonkeyPatch, refused: str, shown_prefix: str
) -> None:
    monkeypatch.setenv("SOTAKG_MAX_FILE_BYTES", str(LIMIT))
    mode, path, shown, stem, message = REFUSED[refused]
    object_id = {
        "100644": blob(empty_repo, b"x" * (LIMIT + 1)),
        "120000": blob(empty_repo, b"SOTA-009.yaml"),
        "160000": git(empty_repo, "commit-tree", "-m", "a submodule", git(empty_repo, "write-tree").strip()).strip(),
    }[mode]
    readable = blob(empty_repo, AT_THE_LIMIT)
    tree = tree_of(empty_repo, [(mode, object_id, path), ("100644", readable, "practices/SOTA-009.yaml")])
    where = f"{shown_prefix}/" if shown_prefix else ""
    assert read_tree_files(empty_repo, tree, shown_prefix) == (
        {"practices/SOTA-009.yaml": AT_THE_LIMIT},
        [Problem(f"{where}{shown}", None, stem, message)],
    )


@pytest.mark.parametrize(
    ("target", "message"),
    [
        (
            b"SOTA-009.yaml",
            "a symbolic link in this revision; sotakg follows no link in a revision: commit the file itself",
        ),
        (b"../papers/../practices/SOTA-009.yaml", "a symbolic link in this revision; sotakg follows no link"),
        (b"../../outside.yaml", OUTSIDE),
        (b"/etc/hostname", OUTSIDE),
        (b"../..", OUTSIDE),
        (b"SOTA-404.yaml", DANGLING),
        (b"../papers/SOTA-009.yaml", DANGLING),
        (b"a\nb.yaml", DANGLING),
    ],
)
def test_a_linked_record_file_gets_the_problem_its_checkout_shows(
    empty_repo: Path, target: bytes, message: str
) -> None:
    """The rule: a link where a record file should be is never followed in a revision; where its
    checkout refuses it too (a link out of the data folder, a link to nothing), the problem is the
    one the checkout gives, word for word, so that validate --baseline matches the two."""
    readable = blob(empty_repo, AT_THE_LIMIT)
    link = blob(empty_repo, target)
    tree = tree_of(
        empty_repo, [("120000", link, "practices/SOTA-002.yaml"), ("100644", readable, "practices/SOTA-009.yaml")]
    )
    contents, problems = read_tree_files(empty_repo, tree, "data")
    assert list(contents) == ["practices/SOTA-009.yaml"]
    assert len(problems) == 1 and problems[0].file == "data/practices/SOTA-002.yaml"
    assert problems[0].message.startswith(message) and problems[0].record == "SOTA-002"


@pytest.mark.parametrize(
    ("mode", "message"),
    [
        ("100644", "'papers' must be a folder of record files, not a file"),
        ("120000", "'papers' is a symbolic link in this revision; sotakg follows no link in a revision"),
        ("160000", "'papers' is a git submodule in this revision"),
    ],
)
def test_a_record_folder_that_is_no_folder_in_a_revision_is_a_problem(empty_repo: Path, mode: str, message: str):
    """The rule: a top-level record folder that a revision holds as a file, a link or a submodule is
    a problem naming it (its checkout refuses or follows it), never a folder read as empty."""
    readable = blob(empty_repo, AT_THE_LIMIT)
    object_id = {
        "100644": blob(empty_repo, b"not a folder\n"),
        "120000": blob(empty_repo, b".papers"),
        "160000": git(empty_repo, "commit-tree", "-m", "a submodule", git(empty_repo, "write-tree").strip()).strip(),
    }[mode]
    tree = tree_of(empty_repo, [(mode, object_id, "papers"), ("100644", readable, "practices/SOTA-009.yaml")])
    contents, problems = read_tree_files(empty_repo, tree, "data")
    assert list(contents) == ["practices/SOTA-009.yaml"]
    assert [(problem.file, problem.record) for problem in problems] == [("data/papers", "papers")]
    assert problems[0].message.startswith(message)


def test_a_revision_is_read_a_share_at_a_time_each_object_once(empty_repo: Path, monkeypatch) -> None:
    """The rule: the files of a revision are read from git in shares of ``REVISION_CHUNK_BYTES`` (by
    the sizes git lists), in path order, each object of a share asked for once, and a share is let go
    when the next is read; what they hold is what reading them all at once gives."""
    texts = [f"id: SOTA-{n:03d}\n".encode() * 40 for n in range(7)]
    ids = [blob(empty_repo, text) for text in texts]
    entries = [("100644", ids[n % 7], f"practices/SOTA-{n:03d}.yaml") for n in range(21)]
    tree = tree_of(empty_repo, entries)
    monkeypatch.setattr(revisions, "REVISION_CHUNK_BYTES", 3 * len(texts[0]))
    asked: list[int] = []
    real_run_git = revisions.run_git

    def counting(repo, *args, stdin=None):
        if args[:2] == ("cat-file", "--batch"):
            asked.append(len(stdin.splitlines()))
        return real_run_git(repo, *args, stdin=stdin)

    monkeypatch.setattr(revisions, "run_git", counting)
    contents, problems = read_tree_files(empty_repo, tree, "data")
    assert problems == [] and asked == [3]  # the first share, read at once
    assert {name: contents[name] for name in contents} == {
        f"practices/SOTA-{n:03d}.yaml": texts[n % 7] for n in range(21)
    }
    assert asked == [3] * 7 and contents.size_of("practices/SOTA-004.yaml") == len(texts[4])
    shares = {id(contents[f"practices/SOTA-{n:03d}.yaml"]) for n in (18, 19, 20)}
    assert len(shares) == 3  # the last share: three objects, one bytes each


def test_one_blob_under_many_names_is_asked_for_once_a_share(empty_repo: Path, monkeypatch) -> None:
    record = blob(empty_repo, AT_THE_LIMIT)
    tree = tree_of(empty_repo, [("100644", record, f"practices/SOTA-{n:03d}.yaml") for n in range(50)])
    asked: list[bytes] = []
    real_run_git = revisions.run_git

    def counting(repo, *args, stdin=None):
        if args[:2] == ("cat-file", "--batch"):
            asked.append(stdin)
        return real_run_git(repo, *args, stdin=stdin)

    monkeypatch.setattr(revisions, "run_git", counting)
    contents, _ = read_tree_files(empty_repo, tree, "data")
    assert len(contents) == 50 and {id(contents[name]) for name in contents} == {
        id(contents["practices/SOTA-000.yaml"])
    }
    assert asked == [f"{record}\n".encode()]


def test_a_revision_over_the_total_limit_is_refused_naming_it(empty_repo: Path, monkeypatch) -> None:
    record = blob(empty_repo, AT_THE_LIMIT)
    tree = tree_of(empty_repo, [("100644", record, f"practices/SOTA-{n:03d}.yaml") for n in range(3)])
    monkeypatch.setenv("SOTAKG_MAX_REVISION_BYTES", str(3 * len(AT_THE_LIMIT) - 1))
    assert refusal(lambda: read_tree_files(empty_repo, tree, "data")) == (
        f"the record files of tree {tree} come to {3 * len(AT_THE_LIMIT)} bytes in all, over the "
        f"{3 * len(AT_THE_LIMIT) - 1}-byte limit for one revision (git stores a file once however many names "
        f"a tree gives it); raise it with SOTAKG_MAX_REVISION_BYTES if the revision is yours"
    )
    monkeypatch.setenv("SOTAKG_MAX_REVISION_BYTES", str(3 * len(AT_THE_LIMIT)))
    assert len(read_tree_files(empty_repo, tree, "data")[0]) == 3


def test_a_name_holding_a_tab_is_read_whole(empty_repo: Path) -> None:
    tree = tree_of(empty_repo, [("100644", blob(empty_repo, AT_THE_LIMIT), "practices/SOTA-009\tcopy.yaml")])
    assert read_tree_files(empty_repo, tree, "data") == ({"practices/SOTA-009\tcopy.yaml": AT_THE_LIMIT}, [])


def test_a_tree_named_like_an_option_is_taken_as_a_name(empty_repo: Path) -> None:
    assert (
        refusal(lambda: read_tree_files(empty_repo, "--full-tree", "data"))
        == "git cannot list tree --full-tree: fatal: Not a valid object name --full-tree"
    )


def test_an_object_that_is_no_tree_cannot_be_listed(empty_repo: Path) -> None:
    record = blob(empty_repo, AT_THE_LIMIT)
    assert (
        refusal(lambda: read_tree_files(empty_repo, record, "data"))
        == f"git cannot list tree {record}: fatal: not a tree object"
    )


def test_gits_message_is_shown_even_when_it_is_not_utf8(empty_repo: Path) -> None:
    name = os.fsdecode(b"\xff")
    assert (
        refusal(lambda: read_tree_files(empty_repo, name, "data"))
        == f"git cannot list tree {name}: fatal: Not a valid object name \ufffd"
    )


def test_an_object_git_cannot_read_is_an_error_naming_the_tree(empty_repo: Path) -> None:
    # Its header is whole (git lists it with its size) but the rest of it is cut off.
    record = blob(empty_repo, random.Random(20).randbytes(30000))
    loose = empty_repo / ".git" / "objects" / record[:2] / record[2:]
    stored = loose.read_bytes()
    loose.chmod(0o644)
    loose.write_bytes(stored[: len(stored) // 2])
    tree = tree_of(empty_repo, [("100644", record, "practices/SOTA-009.yaml")])
    assert refusal(lambda: read_tree_files(empty_repo, tree, "data")) == f"git cannot read the objects of tree {tree}"


def test_an_entry_listed_as_a_file_that_holds_a_tree_is_an_error_naming_gits_answer(empty_repo: Path) -> None:
    empty = git(empty_repo, "hash-object", "-t", "tree", "-w", os.devnull).strip()
    raw = empty_repo.parent / "tree.tmp"
    raw.write_bytes(b"100644 SOTA-009.yaml\0" + bytes.fromhex(empty))  # git's own tools refuse to make it
    practices = git(empty_repo, "hash-object", "-t", "tree", "--literally", "-w", str(raw)).strip()
    raw.write_bytes(b"40000 practices\0" + bytes.fromhex(practices))
    tree = git(empty_repo, "hash-object", "-t", "tree", "--literally", "-w", str(raw)).strip()
    assert (
        refusal(lambda: read_tree_files(empty_repo, tree, "data"))
        == f"git answered '{empty} tree 0' for object {empty}"
    )


# -------------------------------------------------------------------------------------- DataSide


def test_a_file_outside_the_sides_folder_is_kept_as_it_is() -> None:
    side = DataSide("HEAD", Anthology([]), root="data", link_root="data")
    assert side.relative_file("data/practices/SOTA-001.yaml") == "practices/SOTA-001.yaml"
    assert side.relative_file("other/practices/SOTA-001.yaml") == "other/practices/SOTA-001.yaml"
    assert side.link_path("other/practices/SOTA-001.yaml") == "data/other/practices/SOTA-001.yaml"


def test_a_folder_in_no_repository_has_no_link_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    isolate_git(monkeypatch)
    (tmp_path / "old" / "practices").mkdir(parents=True)
    (tmp_path / "old" / "practices" / "SOTA-001.yaml").write_text(practice("SOTA-001"), encoding="utf-8")
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    side = load_side(Path("data"), "./old")
    assert (side.label, side.root, side.tree, side.commit, side.link_root) == ("old", "old", None, None, None)
    assert side.link_path("old/practices/SOTA-001.yaml") == "practices/SOTA-001.yaml"


def test_a_repository_and_a_data_folder_whose_names_hold_line_breaks(tmp_path: Path, monkeypatch) -> None:
    isolate_git(monkeypatch)
    top = tmp_path / "an\nthology"
    data = top / "the\ndata"
    (data / "practices").mkdir(parents=True)
    (data / "practices" / "SOTA-001.yaml").write_text("id: SOTA-001\ntitle: One\n", encoding="utf-8")
    git(top, "init", "-q", "-b", "main")
    commit(top, "one practice")
    assert repository_of(data) == (top, "the\ndata")
    side = load_revision(data, "HEAD")
    assert [record.id for record in side.anthology.records] == ["SOTA-001"]


def test_a_data_folder_in_a_submodule_has_no_revisions_to_compare(tmp_path: Path, monkeypatch) -> None:
    # A pull request can point the submodule at a repository of its own: BASE would be read there.
    isolate_git(monkeypatch)
    outer = empty_repository(tmp_path / "outer")
    (outer / "README").write_text("x\n", encoding="utf-8")
    commit(outer, "the outer repository")
    inner = empty_repository(outer / "data", "practices")
    (inner / "practices" / "SOTA-001.yaml").write_text("id: SOTA-001\ntitle: One\n", encoding="utf-8")
    head = commit(inner, "the submodule's own history")
    git(outer, "update-index", "--add", "--cacheinfo", f"160000,{head},data")
    commit(outer, "data is a submodule")
    monkeypatch.chdir(outer)
    assert refusal(lambda: repository_of(Path("data"))) == (
        "data folder data is in a submodule, a repository of its own that the checkout names, so its revisions "
        "are not the checkout's; "
        "compare with a data folder instead, " + FOLDER_INSTEAD
    )


def test_a_huge_revision_cap_is_honoured_not_replaced_by_the_default(monkeypatch):
    """The bug: ``max_revision_bytes`` takes a value of more than 18 digits for the default 1 GiB:
    SOTAKG_MAX_REVISION_BYTES=9999999999999999999 (someone lifting the cap, as the refusal tells
    them to) silently gives a *lower* cap (observed 1073741824), and the refusal then tells them to
    raise the variable they already raised. (SOTAKG_MAX_FILE_BYTES takes any number of digits.)
    The rule: a cap the user sets is honoured (or refused with a message), never silently lowered."""
    monkeypatch.setenv("SOTAKG_MAX_REVISION_BYTES", "9" * 19)
    assert revisions.max_revision_bytes() >= 10**18


def test_a_non_ascii_digit_revision_cap_is_no_traceback(monkeypatch):
    """The bug: ``value.isdigit()`` is true for "²" (and other non-decimal digits) but ``int("²")``
    raises ValueError: SOTAKG_MAX_REVISION_BYTES=² makes every revision read (sotakg diff BASE) end
    in ValueError: invalid literal for int() with base 10: '²'.
    The rule: a value that is not a number is a usage error naming the variable; never a ValueError."""
    from sotakg.errors import UsageProblem

    monkeypatch.setenv("SOTAKG_MAX_REVISION_BYTES", "²")
    with pytest.raises(UsageProblem, match="^SOTAKG_MAX_REVISION_BYTES is '²'; set it to a number"):
        revisions.max_revision_bytes()
