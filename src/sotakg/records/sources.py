"""The files of a data folder, found without parsing them (cheap enough for every command's
freshness check, and free of the YAML parser's import cost)."""

from __future__ import annotations

import contextlib
import errno
import os
import re
import secrets
import stat
import threading
from collections.abc import Collection, Iterable, Sequence
from operator import attrgetter
from pathlib import Path
from typing import NamedTuple, cast

from ..errors import DataFolderMissing, UsageProblem

#: Files larger than this are refused before they are parsed (``SOTAKG_MAX_FILE_BYTES`` overrides).
DEFAULT_MAX_FILE_BYTES = 10 * 1024 * 1024
REGISTRY_FILE = "registry.yaml"
#: The folder of each kind of record.
FOLDER_KINDS = {"practices": "practice", "papers": "paper", "adrs": "adr", "topics": "topic"}
#: The endings of a record file's name.
RECORD_SUFFIXES = (".yaml", ".yml")


def display_path(path: Path | str) -> str:
    """A path as messages show it: relative to the working directory when it is below it."""
    try:
        relative = os.path.relpath(path)
    except ValueError:
        return str(path)
    return str(path) if relative.startswith("..") else relative


_ENVIRONMENT_SIZE = re.compile(r"([0-9]+)([KMG]?)", re.ASCII | re.IGNORECASE)


def bytes_from_environment(name: str, default: int) -> int:
    """A size (or a count) from the environment variable ``name``: ASCII digits, however many (past
    40 digits, 10**40: far past any file), with K, M or G for powers of 1024 as the command line's
    sizes are written; ``default`` when it is unset or empty. UsageProblem for anything else: a cap
    the user set is never silently replaced by the default ("²" is a digit to str.isdigit only)."""
    value = os.environ.get(name, "").strip()
    if not value:
        return default
    found = _ENVIRONMENT_SIZE.fullmatch(value)
    if found is None:
        raise UsageProblem(f"{name} is {value[:40]!r}; set it to a number such as 10485760, or 10M, or unset it")
    digits = found[1].lstrip("0") or "0"
    if len(digits) > 40:
        return 10**40
    return int(digits) * 1024 ** " KMG".index(found[2].upper() or " ")


def max_file_bytes() -> int:
    """The size cap of a record file (``SOTAKG_MAX_FILE_BYTES``, default 10 MB)."""
    return bytes_from_environment("SOTAKG_MAX_FILE_BYTES", DEFAULT_MAX_FILE_BYTES)


class SourceFile(NamedTuple):
    """One YAML file of a data folder: where it is, the kind its folder implies (None: no record
    folder), its size and modification time, and why it is refused without being opened (a link
    leading out of the data folder, a folder named like a record, ...), or None."""

    path: str
    relative: str
    shown: str
    kind: str | None
    size: int
    mtime_ns: int
    refusal: str | None = None


_by_name = attrgetter("name")
OUTSIDE = "a link to something outside the data folder; sotakg opens nothing there: replace the link with the file"
DANGLING = "a link to nothing (its target is missing); remove the link or restore its target"
LINKED_OTHER_FOLDER = (
    "a link to a folder, not named as a record folder ("
    + ", ".join(sorted(FOLDER_KINDS))
    + "); sotakg follows no other link to a folder: remove the link"
)
NOT_UTF8 = "a name that is not UTF-8 (shown here with \\x escapes); rename it: sotakg reads names as UTF-8"
#: How deep folders are looked into (records sit one level down): deeper ones are refused, not walked.
MAX_FOLDER_DEPTH = 32
TOO_DEEP = f"a folder nested more than {MAX_FOLDER_DEPTH} levels deep; sotakg does not look inside: move its files up"


def linked_part(path: Path) -> Path | None:
    """The part of ``path`` that is a symbolic link, or None. Every folder on the way inside the
    working directory counts (they are in the checkout, which a pull request controls): all of a
    relative path, and of an absolute one those below the working directory, and the last (the
    folders above the working directory are the machine's, and so is the way to it)."""
    parts = path.parts
    candidates = [Path(*parts[:end]) for end in range(1, len(parts) + 1)]
    if path.is_absolute():
        here = os.path.realpath(os.getcwd())
        candidates = [
            candidate
            for candidate in candidates
            if candidate == path or _inside(os.path.realpath(candidate.parent) + os.sep, here)
        ]
    return next((candidate for candidate in candidates if candidate.is_symlink()), None)


def refuse_linked_folder(path: Path, what: str) -> None:
    """LinkedFolder when ``path`` (``what``: "data folder", ...) is a symbolic link or lies behind one
    (``linked_part``): sotakg would read or write wherever it leads. The message names the folder it
    leads to, to be named instead."""
    from ..errors import LinkedFolder

    link = linked_part(path)
    if link is None:
        return
    where = "is a symbolic link" if link == path else f"lies behind a symbolic link ({display_path(link)})"
    raise LinkedFolder(
        f"the {what} {display_path(path)} {where}, and sotakg does not follow it (a checkout can commit "
        f"one); to use the folder it leads to, name that folder instead: {os.path.realpath(path)}"
    )


def escaped_name(name: str) -> str | None:
    """``name`` (as ``os`` decodes it) with the bytes that are not UTF-8 written as ``\\xNN``; None
    when it is UTF-8 already. Such a name cannot go into a message, a manifest or the source table."""
    if name.isascii():  # most names, at a flag's cost: called for every file of every scan
        return None
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return os.fsencode(name).decode("utf-8", "backslashreplace")
    return None


def _inside(path: str, root: str) -> bool:
    return path.startswith(root + os.sep)


def link_refusal(data_dir: Path, relative: str) -> str | None:
    """Why the file ``relative`` of ``data_dir`` must not be opened (a link leading out of the data
    folder, or to nothing), or None: the rule ``scan_sources`` applies, for one file."""
    path = os.path.join(data_dir, relative)
    if not os.path.lexists(path):
        return None
    real = os.path.realpath(path)
    if not os.path.exists(real):
        return DANGLING
    if not _inside(real, os.path.realpath(data_dir)):
        return OUTSIDE
    return None


class _NamedEntry:
    """What ``os.scandir`` says of one entry of a folder, found by its name instead (``lstat``)."""

    __slots__ = ("name", "path", "_mode", "_error")

    def __init__(self, name: str, path: str, mode: int, error: OSError | None = None):
        self.name, self.path, self._mode, self._error = name, path, mode, error

    @classmethod
    def at(cls, folder: str, name: str) -> _NamedEntry | None:
        """The entry ``name`` of ``folder``, or None when there is none (as a listing would not show it)."""
        path = os.path.join(folder, name)
        try:
            return cls(name, path, os.lstat(path).st_mode)
        except (FileNotFoundError, NotADirectoryError):
            return None
        except OSError as error:  # there, but not to be looked at: the walk says it cannot be read
            return cls(name, path, 0, error)

    @classmethod
    def all_at(cls, folder: str, names: Iterable[str]) -> list[_NamedEntry]:
        """The entries of ``folder`` among ``names`` (those there)."""
        found = (cls.at(folder, name) for name in names)
        return [entry for entry in found if entry is not None]

    def is_symlink(self) -> bool:
        return stat.S_ISLNK(self._mode)

    def is_dir(self) -> bool:
        if self._error is not None:
            raise self._error
        if not self.is_symlink():
            return stat.S_ISDIR(self._mode)
        try:
            return stat.S_ISDIR(os.stat(self.path).st_mode)
        except (FileNotFoundError, NotADirectoryError):
            return False

    def stat(self) -> os.stat_result:
        if self._error is not None:
            raise self._error
        return os.stat(self.path)


def _names_below(only: Collection[str], base: str) -> set[str] | None:
    """The names in the folder ``base`` on the way to the files of ``only``; None when one of them may
    be an escaped name (``\\xNN`` for bytes that are not UTF-8), which only a listing can match."""
    names = {rel[len(base) :].split("/", 1)[0] for rel in only if rel.startswith(base)}
    if any("\\" in name or name in ("", ".", "..") for name in names):
        return None
    return names


def scan_sources(data_dir: Path, only: Collection[str] | None = None) -> list[SourceFile]:
    """Every YAML file of a data folder, in a stable order (one stat call a file, no parsing); with
    ``only``, just those of these relative paths (the others are neither looked at nor listed).

    Nothing outside the data folder is ever listed as readable: a link that resolves outside it,
    a dangling link, a folder named like a record file and a record folder that is not a folder are
    listed with a ``refusal`` (reported by name, never opened). Links are followed only when they
    stay inside; a link to a folder is followed only as a top-level record folder."""
    refuse_linked_folder(data_dir, "data folder")
    found: list[SourceFile] = []
    root = str(data_dir)
    real_root = os.path.realpath(root)
    shown_root = display_path(data_dir)

    def shown_of(rel: str) -> str:
        return rel if shown_root == "." else f"{shown_root}/{rel}"

    def refuse(path: str, rel: str, kind: str | None, why: str) -> None:
        found.append(SourceFile(path, rel, shown_of(rel), kind, 0, 0, why))

    def walk(folder: str, relative: str) -> None:
        base = f"{relative}/" if relative else ""
        try:
            listed: Iterable[os.DirEntry[str] | _NamedEntry] = ()
            named = _names_below(only, base) if only is not None and relative else None
            if named is not None:
                # Inside a record folder, only the entries on the way to the files asked for are
                # looked at, each by its name: listing a folder of 75,000 files would cost as much as
                # the freshness scan that found the few that changed.
                listed = _NamedEntry.all_at(folder, named)
            else:
                listed = os.scandir(folder)
            if only is not None and named is None:  # the record files not asked for are dropped first
                # By name within this folder, so that a folder of 75,000 files costs a set lookup
                # a file (an escaped name is computed only for a name that is not ASCII).
                wanted = {rel[len(base) :] for rel in only if rel.startswith(base)}
                listed = [
                    e
                    for e in listed
                    if e.name in wanted
                    or not e.name.endswith(RECORD_SUFFIXES)
                    or (not e.name.isascii() and escaped_name(e.name) in wanted)
                ]
            entries = sorted(listed, key=_by_name)
        except OSError:
            return
        for entry in entries:
            name = entry.name
            if name.startswith("."):
                continue
            is_record_name = name.endswith(RECORD_SUFFIXES)
            escaped = escaped_name(name)
            if escaped is not None:
                with contextlib.suppress(OSError):
                    if is_record_name or entry.is_dir():
                        refuse(entry.path, f"{relative}/{escaped}" if relative else escaped, None, NOT_UTF8)
                continue
            rel = f"{relative}/{name}" if relative else name
            if not relative:
                kind = "registry" if name == REGISTRY_FILE else None
            else:
                kind = FOLDER_KINDS.get(relative) if "/" not in relative else None
            try:
                is_link = entry.is_symlink()
                if is_link:
                    real = os.path.realpath(entry.path)
                    if not os.path.lexists(real) or not os.path.exists(entry.path):
                        if is_record_name or (not relative and name in FOLDER_KINDS):
                            refuse(entry.path, rel, kind, DANGLING)
                        continue
                    if not _inside(real, real_root):  # whatever its name: no folder or file out there is read
                        refuse(entry.path, rel, kind, OUTSIDE)
                        continue
                is_dir = entry.is_dir()
            except OSError as error:
                refuse(entry.path, rel, kind, f"cannot read: {error.strerror}")
                continue
            if is_dir:
                if is_record_name:
                    refuse(entry.path, rel, kind, "a folder named like a record file; a record is a file")
                elif is_link and relative:
                    refuse(entry.path, rel, None, "a link to a folder in a record folder; sotakg does not follow it")
                elif is_link and name not in FOLDER_KINDS:
                    # Followed, any number of links to one folder would each walk it again.
                    refuse(entry.path, rel, None, LINKED_OTHER_FOLDER)
                elif rel.count("/") >= MAX_FOLDER_DEPTH:
                    refuse(entry.path, rel, None, TOO_DEEP)
                else:
                    walk(entry.path, rel)
                continue
            if not relative and name in FOLDER_KINDS:
                refuse(entry.path, rel, None, f"'{name}' must be a folder of record files, not a file")
                continue
            if not is_record_name:
                continue
            info = entry.stat()
            found.append(SourceFile(entry.path, rel, shown_of(rel), kind, info.st_size, info.st_mtime_ns))

    walk(root, "")
    if only is not None:  # the refusals met on the way (a linked folder, a bad name) are others' entries
        return [source for source in found if source.relative in only]
    return found


def require_data_folder(data_dir: Path) -> None:
    """DataFolderMissing (a usage problem: exit 2) when ``data_dir`` is not a folder, checked before
    a command takes a lock or makes a folder, so a command run in the wrong place leaves nothing."""
    if data_dir.is_dir():
        return
    if data_dir.exists():
        raise DataFolderMissing(f"{display_path(data_dir)} is a file, not a data folder; pass the folder of records")
    raise DataFolderMissing(
        f"data folder {display_path(data_dir)} does not exist; pass --data DIR or create it "
        f"with 'sotakg import markdown PAGE'"
    )


def looks_like_a_data_folder(data_dir: Path) -> bool:
    """Whether ``data_dir`` holds a record folder (practices/, papers/, adrs/, topics/) or the
    registry: a folder with none is most likely not the one meant (``--data src``)."""
    return any(os.path.lexists(os.path.join(data_dir, name)) for name in (*FOLDER_KINDS, REGISTRY_FILE))


def refuse_link_to_a_device(path: Path) -> None:
    """NotARegularFile when ``path``, named by the user, is a link to a device, FIFO or socket
    (``-o /dev/stdout``, ``-o out.nt -> /dev/null``): replacing the link, as ``atomic_write_text``
    does with any link, would not write where was meant, and as root would replace a system file."""
    try:
        if not os.path.islink(path):
            return
        info = os.stat(path)
    except OSError:  # dangling: replaced, its target never created
        return
    if not stat.S_ISREG(info.st_mode):
        raise NotARegularFile(
            errno.EINVAL,
            "a link to a device, FIFO or socket; write to a file, or to '-' for standard output",
            str(path),
        )


def atomic_write_text(path: Path, text: str, make_parent: bool = True) -> None:
    """Write ``text`` to ``path`` so that readers see the old file or the new one, never a part.

    The text goes to a temporary file created exclusively (O_EXCL, an unpredictable name) in the
    destination's folder, then renamed over the destination: a link there is replaced, never written
    through (so no folder is ever created for a dangling link's target). A destination that is not a
    regular file or a link (a FIFO, a device) is refused with NotARegularFile rather than opened."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        info = None
    if info is not None and not (stat.S_ISREG(info.st_mode) or stat.S_ISLNK(info.st_mode)):
        raise NotARegularFile(
            errno.EINVAL, "not a regular file (a device, FIFO or socket); write to a file or to '-'", str(path)
        )
    if make_parent:  # not into a store's generation: one removed meanwhile must not come back empty
        path.parent.mkdir(parents=True, exist_ok=True)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    while True:
        temporary = path.with_name(f".{path.name[:80]}.{secrets.token_hex(8)}.tmp")
        try:
            fd = os.open(temporary, flags, 0o666)
            break
        except FileExistsError:
            continue
    try:
        with open(fd, "w", encoding="utf-8", newline="\n") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)


def read_bounded(path: Path | str, limit: int) -> bytes:
    """The bytes of a regular file of at most ``limit`` bytes; SourceTooLarge or NotARegularFile
    otherwise (checked before opening, so a FIFO cannot block and a device cannot flood memory).

    The buffer is the file's own size (from ``fstat``), and the cap is checked again while
    reading, so a file that grows meanwhile is still refused and no read reserves the whole cap."""
    info = os.stat(path)
    if not stat.S_ISREG(info.st_mode):
        raise NotARegularFile("not a regular file (a device, FIFO or socket); sotakg reads only files")
    if info.st_size > limit:
        raise SourceTooLarge(too_large(info.st_size, limit))
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):  # swapped for something else since the check above
            raise NotARegularFile("not a regular file (a device, FIFO or socket); sotakg reads only files")
        chunks: list[bytes] = []
        total = 0
        want = min(info.st_size, limit) + 1
        while True:
            chunk = os.read(fd, want)
            chunks.append(chunk)
            total += len(chunk)
            if total > limit:
                raise SourceTooLarge(too_large(total, limit))
            if len(chunk) < want:  # a short read of a regular file: its end
                break
            want = min(1 << 16, limit + 1 - total)  # it grew since fstat: read on, up to the cap
    finally:
        os.close(fd)
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


#: Readers of ``read_many``: a record file read from a cold page cache waits on the disk for
#: ~80 µs; eight outstanding reads cut a cold read of a large folder about fourfold, and cost a warm
#: one about a microsecond a file (each read lets go of the interpreter while it waits).
PARALLEL_READERS = 8
#: Below this many files ``read_many`` reads them in turn: threads would cost more than they save.
PARALLEL_READ_FROM = 512


def read_many(paths: Sequence[str], limit: int) -> list[bytes | OSError]:
    """``read_bounded`` of each path, in the same order: its bytes, or the OSError it raised.

    Many files are read by ``PARALLEL_READERS`` threads at once, so that the disk serves several
    reads while one waits; the result is the same as reading them one by one."""
    results: list[bytes | OSError | None] = [None] * len(paths)
    failures: list[BaseException] = []

    def read_share(first: int) -> None:
        try:
            for index in range(first, len(paths), readers):
                try:
                    results[index] = read_bounded(paths[index], limit)
                except OSError as error:
                    results[index] = error
        except BaseException as failure:  # raised again below: a reader never fails silently
            failures.append(failure)

    readers = PARALLEL_READERS if len(paths) >= PARALLEL_READ_FROM else 1
    if readers == 1:
        read_share(0)
    else:
        threads = [threading.Thread(target=read_share, args=(first,), daemon=True) for first in range(readers)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    if failures:
        raise failures[0]
    if any(result is None for result in results):  # a reader that stopped early: never a silent gap
        raise AssertionError("read_many: a file was not read")
    return cast("list[bytes | OSError]", results)


def too_large(size: int, limit: int) -> str:
    return f"file is {size} bytes, over the {limit}-byte limit (raise it with SOTAKG_MAX_FILE_BYTES)"


class NotARegularFile(OSError):
    """A path names a device, FIFO or socket where a file was expected."""


class SourceTooLarge(OSError):
    """A file is over the size limit."""


__all__ = [
    "NotARegularFile",
    "SourceTooLarge",
    "bytes_from_environment",
    "refuse_link_to_a_device",
    "read_bounded",
    "read_many",
    "too_large",
    "DEFAULT_MAX_FILE_BYTES",
    "FOLDER_KINDS",
    "REGISTRY_FILE",
    "SourceFile",
    "atomic_write_text",
    "display_path",
    "max_file_bytes",
    "scan_sources",
]
