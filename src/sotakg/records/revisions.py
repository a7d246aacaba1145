"""The data folder as a git revision holds it, read with git's plumbing (never a checkout).

``sotakg diff``, ``validate --baseline`` and ``publish --since`` compare two sides of a change. A
side is the working tree's data folder, a revision of the repository that holds the data folder, or
another data folder. What BASE names follows one rule (``side_source``), shared by the three: a
folder only when it is spelled as a path (``./old``, ``../x``, ``/abs/old``), anything else a git
revision, never a folder that happens to carry its name. A pull request controls the checkout and
can commit a folder named ``origin/main`` or like the base commit's id; that folder must not stand
in for the base.
A revision's files are listed with ``git ls-tree`` and read with ``git cat-file --batch``: the
user's work tree, index and branches are never touched, and nothing in the repository's attributes
(``export-subst``, filters) can rewrite a record on the way, as it could with ``git archive``.
Only regular blobs within the size limit are taken; a symbolic link where a record should be is a
problem of that file, named like any other, and is never followed. The files are parsed from
memory, never written out, so no name a revision holds (too long, odd bytes) reaches the disk.
"""

from __future__ import annotations

import os
import posixpath
import selectors
import subprocess
import tempfile
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from ..errors import DataError, Problem, UsageProblem
from .schema import Anthology, load_anthology, outside_record_folder, shorten
from .sources import (
    DANGLING,
    FOLDER_KINDS,
    NOT_UTF8,
    OUTSIDE,
    REGISTRY_FILE,
    SourceFile,
    bytes_from_environment,
    display_path,
    escaped_name,
    max_file_bytes,
    refuse_linked_folder,
    too_large,
)

#: Every git call is bounded in time: a huge or broken repository is an error, never a hang.
GIT_TIMEOUT = 60.0
_REGULAR_MODES = {"100644", "100755"}


class RevisionError(UsageProblem):
    """A revision cannot be read: not a git repository, no such revision, or git is missing."""


@dataclass(frozen=True)
class DataSide:
    """One side of a comparison: its records, a label for people, and where it came from.

    ``tree`` is the git tree id of the data folder at a revision (None for a folder on disk): the
    same tree always holds the same records, so results about it can be cached by it."""

    label: str
    anthology: Anthology
    #: The data folder as its records' ``file`` begins (``data``), so files compare across sides.
    root: str = ""
    tree: str | None = None
    commit: str | None = None
    #: The data folder's path in its git repository (``data``; empty at the top), None when it is
    #: in none: what links to record files start with, whatever the working directory.
    link_root: str | None = None

    def relative_file(self, shown: str) -> str:
        """A record's file relative to the side's data folder (``practices/SOTA-047.yaml``)."""
        prefix = f"{self.root}/" if self.root and self.root != "." else ""
        return shown[len(prefix) :] if prefix and shown.startswith(prefix) else shown

    def link_path(self, shown: str) -> str:
        """A record's file as a link names it: from the top of its repository
        (``data/practices/SOTA-047.yaml``), or from the data folder when it is in no repository."""
        relative = self.relative_file(shown)
        return f"{self.link_root}/{relative}" if self.link_root else relative


@dataclass(frozen=True)
class Revision:
    """A git revision of the repository holding a data folder, resolved: its commit, and the tree of
    the data folder (``prefix`` in the repository) at that commit."""

    name: str
    repo: Path
    prefix: str
    commit: str
    tree: str

    @property
    def label(self) -> str:
        return f"{self.name} ({self.commit[:12]})"


#: What every git call is told, because the checkout is a pull request's: a folder of it that looks
#: like a bare repository (``HEAD``, ``objects/``, ``refs/`` and a ``config`` committed in the data
#: folder) is never taken for one, or git would obey that config (a promisor remote's
#: ``uploadpack`` runs a command) and its ``refs/replace`` (a forged base); no object is fetched
#: from anywhere (a partial clone's missing blob is an error, not a download); no filesystem monitor.
_GIT_OPTIONS = (
    ("safe.bareRepository", "explicit"),
    ("protocol.allow", "never"),
    ("core.fsmonitor", "false"),
)
_GIT_ENVIRONMENT = {
    "GIT_TERMINAL_PROMPT": "0",
    "GIT_OPTIONAL_LOCKS": "0",
    "GIT_NO_REPLACE_OBJECTS": "1",
    "GIT_NO_LAZY_FETCH": "1",
    "LC_ALL": "C",
}


_NO_GIT = "reading a revision needs git, and it is not installed; install git"


def _git_environment() -> dict[str, str]:
    return dict(os.environ, **_GIT_ENVIRONMENT)


def _git_command(repo: Path, *args: str) -> list[str]:
    options = [arg for name, value in _GIT_OPTIONS for arg in ("-c", f"{name}={value}")]
    return ["git", *options, "-C", str(repo), *args]


def run_git(repo: Path, *args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    """Run git in ``repo`` with a time limit, no prompts, no fetching, no replace refs, no implicit
    bare repository and no filesystem monitor (``_GIT_OPTIONS``)."""
    environment = _git_environment()
    try:
        return subprocess.run(
            _git_command(repo, *args),
            input=stdin,
            capture_output=True,
            timeout=GIT_TIMEOUT,
            env=environment,
            check=False,
        )
    except FileNotFoundError:
        raise RevisionError(_NO_GIT) from None
    except subprocess.TimeoutExpired:
        raise RevisionError(f"git {args[0]} took more than {GIT_TIMEOUT:.0f} s in {display_path(repo)}") from None


#: How to name BASE without git: a data folder spelled as a path, as diff, validate and publish take it.
_FOLDER_INSTEAD = (
    "spelled as a path (sotakg diff ./old-data, validate --baseline ./old-data, publish --since ./old-data)"
)


def repository_of(data_dir: Path) -> tuple[Path, str]:
    """The top folder of the git repository holding ``data_dir``, and the data folder's path in it
    (``data``; empty when the data folder is the repository's top). RevisionError when it is in none."""
    refuse_linked_folder(data_dir, "data folder")
    if not data_dir.is_dir():
        if data_dir.exists():
            raise RevisionError(f"{display_path(data_dir)} is a file, not a data folder; pass --data DIR")
        raise RevisionError(f"data folder {display_path(data_dir)} does not exist; pass --data DIR")
    answer = run_git(data_dir, "rev-parse", "--show-toplevel")
    if answer.returncode != 0 and b"bare repository" in answer.stderr:
        raise RevisionError(
            f"git takes data folder {display_path(data_dir)} (or a folder above it) for a bare repository "
            f"(it holds HEAD, objects/ and refs/), and sotakg reads no repository a checkout could have "
            f"made: git would obey its config. Remove those files, or compare with a data folder "
            f"instead, {_FOLDER_INSTEAD}"
        )
    if answer.returncode != 0:
        raise RevisionError(
            f"data folder {display_path(data_dir)} is not in a git repository, so it has no revisions; "
            f"compare with a data folder instead, "
            f"{_FOLDER_INSTEAD}"
        )
    superproject = run_git(data_dir, "rev-parse", "--show-superproject-working-tree").stdout
    if superproject.strip():
        # The checkout names the submodule's commit and, with .gitmodules, where it comes from: a pull
        # request could make BASE a revision of a repository of its own choosing.
        raise RevisionError(
            f"data folder {display_path(data_dir)} is in a submodule, a repository of its own that the "
            f"checkout names, so its revisions are not the checkout's; compare with a data folder "
            f"instead, {_FOLDER_INSTEAD}"
        )
    # One call each: a folder name may hold a line break, so two answers on two lines cannot be split.
    prefix = run_git(data_dir, "rev-parse", "--show-prefix").stdout
    top, inside = (_one_line(text.decode("utf-8", "surrogateescape")) for text in (answer.stdout, prefix))
    return Path(top), inside.strip("/")


def _one_line(text: str) -> str:
    """git's answer without the one line break it ends with (a name may hold others)."""
    return text[:-1] if text.endswith("\n") else text


def check_revision_name(revision: str) -> None:
    """RevisionError unless ``revision`` can be a revision name (not empty, no option, one line)."""
    if not revision.strip() or revision.startswith("-") or "\n" in revision or "\0" in revision:
        raise RevisionError(
            f"{revision!r} is not a git revision; give a branch, tag or commit such as origin/main "
            f"(or a data folder as a path, such as ./old-data)"
        )


def resolve_commit(repo: Path, revision: str) -> str:
    """The commit id ``revision`` names in ``repo``; RevisionError when it names none."""
    check_revision_name(revision)
    answer = run_git(repo, "rev-parse", "--verify", "--quiet", "--end-of-options", f"{revision}^{{commit}}")
    if answer.returncode != 0:
        where = f"no revision {revision!r} in the repository at {display_path(repo)}"
        if run_git(repo, "rev-parse", "--is-shallow-repository").stdout.strip() == b"true":
            raise RevisionError(
                f"{where}, a shallow clone (as CI checks out by default): its history stops short of it. "
                f"Fetch more history (git fetch --deepen=50, or git fetch --unshallow; in GitHub Actions, "
                f"actions/checkout with fetch-depth: 0), or fetch the branch (git fetch origin main)"
            )
        raise RevisionError(
            f"{where}; check the name (git log --oneline), or fetch the branch or commit it names first "
            f"(git fetch origin main, or git fetch origin <commit>)"
        )
    return answer.stdout.decode("ascii").strip()


def data_tree(repo: Path, commit: str, prefix: str, revision: str) -> str:
    """The tree id of the data folder ``prefix`` at ``commit``; RevisionError when it has none."""
    spec = f"{commit}:{prefix}" if prefix else f"{commit}^{{tree}}"
    answer = run_git(repo, "rev-parse", "--verify", "--quiet", "--end-of-options", spec)
    tree = answer.stdout.decode("ascii").strip()
    if answer.returncode != 0 or run_git(repo, "cat-file", "-t", tree).stdout.strip() != b"tree":
        raise RevisionError(f"revision {revision!r} has no folder {prefix or '.'}; was the data folder elsewhere then?")
    return tree


def _kind_of(relative: PurePosixPath) -> str | None:
    parts = relative.parts
    if len(parts) == 1:
        return "registry" if parts[0] == REGISTRY_FILE else None
    return FOLDER_KINDS.get(parts[0]) if len(parts) == 2 else None


#: How many bytes of record files (by the sizes git lists) are read from git at once; the files of a
#: revision are parsed a share at a time, so that memory holds one share, not the whole revision.
REVISION_CHUNK_BYTES = 64 * 1024 * 1024
#: The default cap on all the record files of a revision together (``SOTAKG_MAX_REVISION_BYTES``).
DEFAULT_MAX_REVISION_BYTES = 1024 * 1024 * 1024


#: The default cap on the entries a revision's data folder may name (``SOTAKG_MAX_REVISION_FILES``).
DEFAULT_MAX_REVISION_FILES = 1_000_000
#: The longest entry of a tree listing taken (mode, type, id, size and path): far above any path a
#: file system takes (4,096 bytes), far below what copying a partial entry each chunk could cost.
MAX_ENTRY_BYTES = 64 * 1024
#: Files outside the record folders named one by one in a revision's problems; the rest are counted.
LISTED_OUTSIDE_FILES = 100


def max_revision_files() -> int:
    """The cap on the entries (files and links, at any depth) of one revision's data folder
    (``SOTAKG_MAX_REVISION_FILES``, default a million): in git a tree may name another any number of
    times, so a few kilobytes of repository can name billions of files, which no checkout holds."""
    return bytes_from_environment("SOTAKG_MAX_REVISION_FILES", DEFAULT_MAX_REVISION_FILES)


def max_revision_bytes() -> int:
    """The cap on the record files of one revision together (``SOTAKG_MAX_REVISION_BYTES``, default
    1 GiB): git stores one blob once however many names a tree gives it, so a few kilobytes of
    repository can name gigabytes of files that no checkout ever held."""
    return bytes_from_environment("SOTAKG_MAX_REVISION_BYTES", DEFAULT_MAX_REVISION_BYTES)


class RevisionContents(Mapping[str, bytes]):
    """The bytes of a tree's record files by path, read from git's objects a share at a time
    (``REVISION_CHUNK_BYTES``) as they are asked for in path order, each object of a share once: a
    share is let go when the next one is read, so a revision costs the memory of one share."""

    def __init__(self, repo: Path, tree: str, wanted: list[tuple[str, str, int]]):
        self._repo, self._tree = repo, tree
        self._wanted = sorted(wanted)
        self._index = {relative: index for index, (relative, _oid, _size) in enumerate(self._wanted)}
        # The first share is read at once: a tree git cannot read is an error before any parsing.
        self._share: dict[str, bytes] = self._read_share(0) if self._wanted else {}

    def __getitem__(self, relative: str) -> bytes:
        index = self._index[relative]
        if relative not in self._share:
            self._share = {}  # let the last share go before the next is read
            self._share = self._read_share(index)
        return self._share[relative]

    def __iter__(self) -> Iterator[str]:
        return (relative for relative, _oid, _size in self._wanted)

    def __len__(self) -> int:
        return len(self._wanted)

    def size_of(self, relative: str) -> int:
        """The file's size as git lists it, without reading it."""
        return self._wanted[self._index[relative]][2]

    def _read_share(self, first: int) -> dict[str, bytes]:
        share: list[tuple[str, str, int]] = []
        total = 0
        for entry in self._wanted[first:]:
            if share and total + entry[2] > REVISION_CHUNK_BYTES:
                break
            share.append(entry)
            total += entry[2]
        objects = list(dict.fromkeys(object_id for _relative, object_id, _size in share))
        batch = run_git(self._repo, "cat-file", "--batch", stdin="".join(f"{oid}\n" for oid in objects).encode())
        if batch.returncode != 0:
            raise RevisionError(f"git cannot read the objects of tree {self._tree}")
        output, position = batch.stdout, 0
        blobs: dict[str, bytes] = {}
        for object_id in objects:
            header_end = output.index(b"\n", position)
            header = output[position:header_end].decode("ascii").split()
            if len(header) != 3 or header[0] != object_id or header[1] != "blob":
                raise RevisionError(f"git answered {' '.join(header)!r} for object {object_id}")
            start = header_end + 1
            end = start + int(header[2])
            blobs[object_id] = output[start:end]
            position = end + 1
        return {relative: blobs[object_id] for relative, object_id, _size in share}


def read_tree_files(repo: Path, tree: str, shown_prefix: str) -> tuple[RevisionContents, list[Problem]]:
    """The YAML files of ``tree`` (a data folder) by path relative to it, read from git's objects
    when asked for (``RevisionContents``), with a problem for each file that is not a regular blob
    within the size limit. RevisionError when the files together are over ``max_revision_bytes``."""
    limit = max_file_bytes()
    wanted: list[tuple[str, str, int]] = []
    problems: list[Problem] = []
    links: list[tuple[int, str, str, str]] = []  # (place in problems, path, as shown, object id)
    outside = 0
    for entry in _tree_entries(repo, tree, max_revision_files()):
        meta, _tab, raw_path = entry.partition(b"\t")
        mode, kind, object_id, size = meta.decode("ascii").split()
        relative = raw_path.decode("utf-8", "surrogateescape")
        parts = PurePosixPath(relative).parts
        if len(parts) == 1 and relative in FOLDER_KINDS:
            # A recursive listing names no folder: a record folder listed is a file, a link or a
            # submodule, which its checkout would refuse (or follow), and never an empty folder.
            shown = f"{shown_prefix}/{relative}" if shown_prefix else relative
            problems.append(Problem(shown, None, relative, _not_a_record_folder(relative, mode)))
            continue
        if any(part.startswith(".") for part in parts) or not relative.endswith((".yaml", ".yml")):
            continue  # as on disk: hidden entries and other files are not records
        escaped = escaped_name(relative)
        if escaped is not None:  # as on disk: refused by name, with its bytes escaped
            shown = f"{shown_prefix}/{escaped}" if shown_prefix else escaped
            problems.append(Problem(shown, None, PurePosixPath(escaped).stem, NOT_UTF8))
            continue
        shown = f"{shown_prefix}/{relative}" if shown_prefix else relative
        stem = shorten(PurePosixPath(relative).stem, 40)
        if kind == "blob" and mode == _LINK_MODE:
            links.append((len(problems), relative, shown, object_id))
            problems.append(Problem(shown, None, stem, _LINK_IN_REVISION))  # told apart below
            continue
        if kind != "blob" or mode not in _REGULAR_MODES:
            message = f"not a regular file (mode {mode}) in this revision; sotakg reads only regular files"
            problems.append(Problem(shown, None, stem, message))
            continue
        if not size.isdigit():  # "-": an object this clone does not have (shallow or partial)
            raise RevisionError(
                f"git has no object for {shown} in tree {tree}: the clone is incomplete; fetch the "
                f"revision in full (git fetch --unshallow, or a clone without --filter)"
            )
        if int(size) > limit:
            problems.append(Problem(shown, None, stem, too_large(int(size), limit)))
            continue
        if _kind_of(PurePosixPath(relative)) is None:  # never read: its problem says where it belongs
            outside += 1
            if outside <= LISTED_OUTSIDE_FILES:
                problems.append(outside_record_folder(shown, relative))
            continue
        wanted.append((relative, object_id, int(size)))
    if outside > LISTED_OUTSIDE_FILES:
        shown_root = shown_prefix or "."
        problems.append(
            Problem(
                shown_root,
                None,
                None,
                f"and {outside - LISTED_OUTSIDE_FILES} more files not in a record folder (the first "
                f"{LISTED_OUTSIDE_FILES} are named above); move them into one of: {', '.join(sorted(FOLDER_KINDS))}",
            )
        )
    for place, message in zip((link[0] for link in links), _link_messages(repo, tree, links), strict=True):
        problems[place] = Problem(problems[place].file, None, problems[place].record, message)
    total, cap = sum(size for _relative, _oid, size in wanted), max_revision_bytes()
    if total > cap:
        raise RevisionError(
            f"the record files of tree {tree} come to {total} bytes in all, over the {cap}-byte limit for "
            f"one revision (git stores a file once however many names a tree gives it); raise it with "
            f"SOTAKG_MAX_REVISION_BYTES if the revision is yours"
        )
    return RevisionContents(repo, tree, wanted), problems


_LINK_MODE = "120000"
_LINK_IN_REVISION = "a symbolic link in this revision; sotakg follows no link in a revision: commit the file itself"
#: The longest link target read: no path a file system takes is longer.
_MAX_LINK_TARGET = 4096


def _not_a_record_folder(name: str, mode: str) -> str:
    if mode == _LINK_MODE:
        return f"'{name}' is a symbolic link in this revision; sotakg follows no link in a revision: commit the folder"
    if mode == "160000":
        return f"'{name}' is a git submodule in this revision; its records are not in this repository"
    return f"'{name}' must be a folder of record files, not a file"  # as scan_sources says on disk


def _link_messages(repo: Path, tree: str, links: list[tuple[int, str, str, str]]) -> list[str]:
    """For each link (a record file that is a symbolic link in ``tree``), the problem its checkout
    would show where it shows one: a link out of the data folder, or to nothing in it; a link to a
    file inside is followed on disk and refused here (no link of a revision is ever followed)."""
    if not links:
        return []
    objects = list(dict.fromkeys(object_id for _place, _relative, _shown, object_id in links))
    batch = run_git(repo, "cat-file", "--batch", stdin="".join(f"{oid}\n" for oid in objects).encode())
    if batch.returncode != 0:
        raise RevisionError(f"git cannot read the objects of tree {tree}")
    targets: dict[str, bytes] = {}
    output, position = batch.stdout, 0
    for object_id in objects:
        header_end = output.index(b"\n", position)
        header = output[position:header_end].decode("ascii").split()
        if len(header) != 3 or header[0] != object_id or header[1] != "blob":
            raise RevisionError(f"git answered {' '.join(header)!r} for object {object_id}")
        start = header_end + 1
        targets[object_id] = output[start : start + int(header[2])]
        position = start + int(header[2]) + 1
    inside: dict[int, str] = {}
    messages: list[str] = []
    for index, (_place, relative, _shown, object_id) in enumerate(links):
        raw = targets[object_id]
        target = raw.decode("utf-8", "surrogateescape")
        joined = posixpath.normpath(posixpath.join(posixpath.dirname(relative), target))
        if len(raw) > _MAX_LINK_TARGET or "\n" in target or "\0" in target:
            messages.append(DANGLING)  # no file system has such a name
        elif target.startswith("/") or joined == ".." or joined.startswith("../"):
            messages.append(OUTSIDE)
        else:
            inside[index] = joined
            messages.append(_LINK_IN_REVISION)
    if inside:
        # One question for all the targets inside: does the tree hold something there?
        asked = "".join(f"{tree}:{path}\n" for path in inside.values()).encode("utf-8", "surrogateescape")
        answer = run_git(repo, "cat-file", "--batch-check", stdin=asked)
        if answer.returncode != 0:
            raise RevisionError(f"git cannot look up the link targets of tree {tree}")
        lines = answer.stdout.split(b"\n")
        for line_number, index in enumerate(inside):
            if line_number >= len(lines) or lines[line_number].endswith(b" missing"):
                messages[index] = DANGLING
    return messages


def _tree_entries(repo: Path, tree: str, cap: int) -> Iterator[bytes]:
    """The entries of ``git ls-tree -r -z -l tree``, as git writes them (never the whole listing at
    once: it can be far larger than the repository). RevisionError past ``cap`` entries, when git
    fails, or after ``GIT_TIMEOUT``; git is stopped then."""
    environment = _git_environment()
    command = _git_command(repo, "ls-tree", "-r", "-z", "-l", "--end-of-options", tree)
    with tempfile.TemporaryFile() as said:
        try:
            process = subprocess.Popen(
                command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=said, env=environment
            )
        except FileNotFoundError:
            raise RevisionError(_NO_GIT) from None
        assert process.stdout is not None
        deadline = time.monotonic() + GIT_TIMEOUT
        try:
            with selectors.DefaultSelector() as ready:
                ready.register(process.stdout, selectors.EVENT_READ)
                pending, count = b"", 0
                while True:
                    left = deadline - time.monotonic()
                    if left <= 0 or not ready.select(left):
                        raise RevisionError(f"git ls-tree took more than {GIT_TIMEOUT:.0f} s in {display_path(repo)}")
                    chunk = os.read(process.stdout.fileno(), 1 << 20)
                    if not chunk:
                        break
                    *complete, pending = (pending + chunk).split(b"\0")
                    # a name git compresses to almost nothing would be copied again a chunk at a time
                    if max(len(pending), *map(len, complete)) > MAX_ENTRY_BYTES:
                        raise RevisionError(
                            f"tree {tree} names a file whose entry is over {MAX_ENTRY_BYTES} bytes; no record file is"
                        )
                    count += len(complete)
                    if count > cap:
                        raise RevisionError(
                            f"the data folder of tree {tree} names more than {cap} files (git can name one "
                            f"folder any number of times); raise SOTAKG_MAX_REVISION_FILES if the revision is yours"
                        )
                    yield from complete
            try:
                returncode = process.wait(max(deadline - time.monotonic(), 0.1))
            except subprocess.TimeoutExpired:
                raise RevisionError(f"git ls-tree took more than {GIT_TIMEOUT:.0f} s in {display_path(repo)}") from None
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
            process.stdout.close()
        if returncode != 0:
            said.seek(0)
            text = said.read(64 * 1024).decode("utf-8", "replace")
            if "promisor" in text or "lazy fetch" in text:
                raise RevisionError(
                    f"the clone lacks objects of tree {tree} (a partial clone), and sotakg fetches nothing; "
                    f"fetch the revision in full first (git fetch --refetch, or a clone without --filter)"
                )
            raise RevisionError(f"git cannot list tree {tree}: {text.strip()}")
        if pending:
            yield pending


def find_revision(data_dir: Path, name: str) -> Revision:
    """``name`` resolved in the repository holding ``data_dir``. RevisionError when it is no
    revision there; a folder of that name is never used instead, and the message says how to ask
    for one."""
    repo, prefix = repository_of(data_dir)
    try:
        commit = resolve_commit(repo, name)
    except RevisionError as error:
        if Path(name).is_dir():
            raise RevisionError(
                f"{error}; a folder named {name!r} is not taken for a revision: to compare with that "
                f"data folder, write it as a path (./{name})"
            ) from None
        raise
    return Revision(name, repo, prefix, commit, data_tree(repo, commit, prefix, name))


def read_revision(revision: Revision) -> DataSide:
    """The records of the data folder as ``revision`` holds them, shown by their paths in the
    repository (``data/practices/SOTA-047.yaml``). Raises DataError (records that cannot be read)."""
    prefix = revision.prefix
    contents, problems = read_tree_files(revision.repo, revision.tree, prefix)
    sources = []
    for relative in contents:  # in path order, as the shares are read
        shown = f"{prefix}/{relative}" if prefix else relative
        # The reader takes the bytes from ``contents``; the path only gives the file's stem.
        kind = _kind_of(PurePosixPath(relative))
        sources.append(SourceFile(shown, relative, shown, kind, contents.size_of(relative), 0))
    try:
        anthology = load_anthology(revision.repo, sources, contents)
    except DataError as error:
        raise DataError(problems + error.problems) from None
    if problems:
        raise DataError(problems)
    return DataSide(revision.label, anthology, prefix, revision.tree, revision.commit, prefix)


def load_revision(data_dir: Path, revision: str) -> DataSide:
    """The records of ``data_dir`` as git ``revision`` holds them. Raises RevisionError (no
    repository, no such revision, no data folder then) or DataError (records that cannot be read)."""
    return read_revision(find_revision(data_dir, revision))


def is_folder_spelling(spec: str) -> bool:
    """Whether BASE is written as a path (``.``, ``./old``, ``../old``, ``/abs/old``): the one way to
    name a data folder instead of a revision. No git revision is spelled so."""
    return spec in (".", "..") or spec.startswith(("./", "../", "/"))


def side_source(spec: str) -> Path | str:
    """What BASE (or HEAD) names: a data folder (a Path) when it is spelled as a path, else a git
    revision name (checked for form, resolved later). RevisionError for what can be neither
    (empty, an option, several lines)."""
    if is_folder_spelling(spec):
        return Path(spec)
    check_revision_name(spec)
    return spec


def folder_side(folder: Path, label: str) -> DataSide:
    """The records of a data folder on disk. Raises DataError, or DataFolderMissing (a UsageProblem)."""
    anthology = load_anthology(folder)
    try:
        link_root: str | None = repository_of(folder)[1]
    except RevisionError:
        link_root = None  # a folder in no repository: links start at the data folder
    return DataSide(label, anthology, display_path(folder), link_root=link_root)


def load_side(data_dir: Path, spec: str | None) -> DataSide:
    """One side of a comparison: the working tree's ``data_dir`` (``spec`` None), another data folder
    (``spec`` spelled as a path, see ``side_source``), or ``data_dir`` at the git revision ``spec``."""
    if spec is None:
        return folder_side(data_dir, f"working tree ({display_path(data_dir)})")
    source = side_source(spec)
    if isinstance(source, Path):
        return folder_side(source, display_path(source))
    return load_revision(data_dir, source)
