"""The files of a data folder, found without parsing them (cheap enough for every command's
freshness check, and free of the YAML parser's import cost)."""

from __future__ import annotations

import os
import stat
from operator import attrgetter
from pathlib import Path
from typing import NamedTuple

#: Files larger than this are refused before they are parsed (``SOTAKG_MAX_FILE_BYTES`` overrides).
DEFAULT_MAX_FILE_BYTES = 10 * 1024 * 1024
REGISTRY_FILE = "registry.yaml"
#: The folder of each kind of record.
FOLDER_KINDS = {"practices": "practice", "papers": "paper", "adrs": "adr", "topics": "topic"}


def display_path(path: Path | str) -> str:
    """A path as messages show it: relative to the working directory when it is below it."""
    try:
        relative = os.path.relpath(path)
    except ValueError:
        return str(path)
    return str(path) if relative.startswith("..") else relative


def max_file_bytes() -> int:
    """The size cap of a record file (``SOTAKG_MAX_FILE_BYTES``, default 10 MB)."""
    value = os.environ.get("SOTAKG_MAX_FILE_BYTES")
    return int(value) if value and value.isdigit() else DEFAULT_MAX_FILE_BYTES


class SourceFile(NamedTuple):
    """One YAML file of a data folder: where it is, the kind its folder implies (None: no record
    folder), and its size and modification time."""

    path: str
    relative: str
    shown: str
    kind: str | None
    size: int
    mtime_ns: int


_by_name = attrgetter("name")


def scan_sources(data_dir: Path) -> list[SourceFile]:
    """Every YAML file of a data folder, in a stable order (one stat call a file, no parsing)."""
    found: list[SourceFile] = []
    root = str(data_dir)
    shown_root = display_path(data_dir)

    def walk(folder: str, relative: str) -> None:
        try:
            entries = sorted(os.scandir(folder), key=_by_name)
        except OSError:
            return
        for entry in entries:
            name = entry.name
            if name.startswith("."):
                continue
            rel = f"{relative}/{name}" if relative else name
            if entry.is_dir(follow_symlinks=False):
                walk(entry.path, rel)
                continue
            if not name.endswith((".yaml", ".yml")):
                continue
            if not relative:
                kind = "registry" if name == REGISTRY_FILE else None
            else:
                kind = FOLDER_KINDS.get(relative) if "/" not in relative else None
            stat = entry.stat()
            shown = rel if shown_root == "." else f"{shown_root}/{rel}"
            found.append(SourceFile(entry.path, rel, shown, kind, stat.st_size, stat.st_mtime_ns))

    walk(root, "")
    return found


def atomic_write_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` so that readers see the old file or the new one, never a part.

    A symbolic link is followed (its target is replaced, the link stays); a path that is not a
    regular file (a FIFO, a device such as /dev/null or /dev/stdout) is written to directly, since
    renaming over it would replace it."""
    path = Path(os.path.realpath(path)) if path.is_symlink() else path
    if path.exists() and not path.is_file():
        with open(path, "w", encoding="utf-8", newline="\n") as handle:
            handle.write(text)
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(temporary, "w", encoding="utf-8", newline="\n") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    finally:
        if temporary.exists():
            temporary.unlink()


def read_bounded(path: Path | str, limit: int) -> bytes:
    """The bytes of a regular file of at most ``limit`` bytes; SourceTooLarge or NotARegularFile
    otherwise (checked before opening, so a FIFO cannot block and a device cannot flood memory)."""
    info = os.stat(path)
    if not stat.S_ISREG(info.st_mode):
        raise NotARegularFile("not a regular file (a device, FIFO or socket); sotakg reads only files")
    if info.st_size > limit:
        raise SourceTooLarge(too_large(info.st_size, limit))
    with open(path, "rb") as handle:
        data = handle.read(limit + 1)
    if len(data) > limit:
        raise SourceTooLarge(too_large(len(data), limit))
    return data


def too_large(size: int, limit: int) -> str:
    return f"file is {size} bytes, over the {limit}-byte limit (raise it with SOTAKG_MAX_FILE_BYTES)"


class NotARegularFile(OSError):
    """A path names a device, FIFO or socket where a file was expected."""


class SourceTooLarge(OSError):
    """A file is over the size limit."""


__all__ = [
    "NotARegularFile",
    "SourceTooLarge",
    "read_bounded",
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
