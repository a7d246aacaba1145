"""The embedded Oxigraph store: its layout on disk, the build lock, freshness, and opening it.

Layout. ``--store PATH`` (default ``.sotakg/store``) is a symbolic link to a generation directory
``PATH.gen-<token>`` that holds the Oxigraph database (``oxigraph/``) and a manifest (``build.json``).
A build writes a new generation beside the current one and swaps the link with one atomic rename,
so readers always see a complete graph, the old one or the new one. ``PATH.lock`` serialises builds.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import os
import re
import shutil
import stat
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import __version__
from ..errors import StoreBusy, StoreError
from ..records.sources import SourceFile, atomic_write_text, display_path, max_file_bytes, read_bounded, scan_sources
from ..resources import ontology_path

if TYPE_CHECKING:
    from pyoxigraph import Store

DEFAULT_STORE = Path(".sotakg/store")
MANIFEST = "build.json"
FILE_TABLE = "files.json"
DATABASE = "oxigraph"
GENERATION_MARK = ".gen-"
LINK_MARK = ".link-"


#: A file sotakg writes into every generation it makes, holding the directory's device and inode: a
#: folder that merely has a generation's name (committed to a checkout, say) is not one.
GENERATION_MARKER = "sotakg-generation.json"
TRASH_MARK = ".del-"
_TOKEN = r"[0-9a-f]{1,32}-[0-9]{1,10}"


def _no_follow_open(path: Path, flags: int) -> int:
    """Open ``path`` without following a symbolic link at its last component (O_NOFOLLOW)."""
    return os.open(path, flags | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0), 0o644)


def _real_directory(path: Path) -> os.stat_result | None:
    """The lstat of ``path`` when it is a directory and not a link, else None."""
    try:
        info = os.lstat(path)
    except OSError:
        return None
    return info if stat.S_ISDIR(info.st_mode) else None


def write_generation_marker(generation: Path) -> None:
    """Mark a freshly made generation directory as sotakg's own (created exclusively, never followed)."""
    info = os.lstat(generation)
    marker = json.dumps({"sotakg": "generation", "dev": info.st_dev, "ino": info.st_ino}).encode()
    fd = _no_follow_open(generation / GENERATION_MARKER, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
    try:
        os.write(fd, marker)
    finally:
        os.close(fd)


def is_own_generation(path: Path) -> bool:
    """Whether ``path`` is a real directory (not a link) holding the marker sotakg wrote into it."""
    info = _real_directory(path)
    if info is None:
        return False
    try:
        fd = _no_follow_open(path / GENERATION_MARKER, os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return False
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return False
        marker = json.loads(os.read(fd, 4096))
    except (OSError, ValueError):
        return False
    finally:
        os.close(fd)
    return (
        isinstance(marker, dict)
        and marker.get("sotakg") == "generation"
        and marker.get("dev") == info.st_dev
        and marker.get("ino") == info.st_ino
    )


@dataclass(frozen=True)
class StoreLayout:
    """Where a store's link, generations and lock live."""

    path: Path

    @property
    def lock_path(self) -> Path:
        return self.path.with_name(self.path.name + ".lock")

    def _name_pattern(self, mark: str) -> re.Pattern[str]:
        return re.compile(re.escape(self.path.name + mark) + _TOKEN)

    def is_generation_name(self, name: str) -> bool:
        """Whether ``name`` is what new_generation calls a generation of this store."""
        return self._name_pattern(GENERATION_MARK).fullmatch(name) is not None

    def new_generation(self) -> Path:
        """A fresh, unpredictable generation name beside the link (not created yet)."""
        token = f"{time.time_ns() ^ int.from_bytes(os.urandom(6), 'big'):x}"
        return self.path.with_name(f"{self.path.name}{GENERATION_MARK}{token}-{os.getpid()}")

    def check_folder(self) -> None:
        """Refuse a store folder that is a symbolic link: the store would then live wherever it points."""
        parent = self.path.parent
        if parent.is_symlink():
            raise StoreError(
                f"the store folder {display_path(parent)} is a symbolic link, and sotakg does not follow it; "
                f"remove the link (rm {display_path(parent)}) or pass another --store"
            )

    def current_generation(self) -> Path | None:
        """The generation the link points to, or None when there is no store yet (or the link dangles).

        The link must name a generation of this store beside it, and that generation must carry the
        marker sotakg wrote; any other link (absolute, ``..``, another folder, a foreign directory)
        is refused with a StoreError, so nothing it points to is ever opened or removed."""
        self.check_folder()
        if not self.path.is_symlink():
            if self.path.exists():
                raise StoreError(
                    f"{display_path(self.path)} exists but is not a sotakg store; move it away or pass another --store"
                )
            return None
        target = os.readlink(self.path)
        for _ in range(100):
            # A build may swap the link and remove what it pointed to between our two looks: read it again.
            generation = self.path.parent / target
            if os.path.lexists(generation):
                break
            again = os.readlink(self.path) if self.path.is_symlink() else None
            if again == target or again is None:
                break
            target = again
        shown = target if len(target) <= 80 else target[:77] + "..."
        refusal = (
            f"{display_path(self.path)} is a link to {shown!r}, which is not a store generation sotakg made; "
            f"sotakg removes nothing there. Remove the link (rm {display_path(self.path)}) and run 'sotakg build'"
        )
        if "/" in target or not self.is_generation_name(target):
            raise StoreError(refusal)
        generation = self.path.parent / target
        if not os.path.lexists(generation):
            return None
        if not is_own_generation(generation):
            raise StoreError(refusal)
        return generation

    def leftovers(self) -> list[Path]:
        """What killed builds left beside the link: unused generations sotakg marked, half-made links,
        and half-removed generations. Anything else, whatever its name, is not touched."""
        current = self.current_generation()
        found: list[Path] = []
        if _real_directory(self.path.parent) is None:
            return []
        generations = self._name_pattern(GENERATION_MARK)
        # Only links are unlinked here (never what they point to), so any link of that name goes.
        links = re.compile(re.escape(self.path.name + LINK_MARK) + r"[0-9a-f-]{1,64}")
        trash = self._name_pattern(TRASH_MARK)
        for entry in self.path.parent.iterdir():
            name = entry.name
            if links.fullmatch(name):
                if entry.is_symlink():
                    found.append(entry)
            elif generations.fullmatch(name) or trash.fullmatch(name):
                if current is not None and name == current.name:
                    continue
                if not is_own_generation(entry) and not _empty_directory(entry):
                    continue
                if generation_in_use(entry):
                    continue
                found.append(entry)
        return found


def _empty_directory(path: Path) -> bool:
    if _real_directory(path) is None:
        return False
    try:
        return not any(os.scandir(path))
    except OSError:
        return False


@contextmanager
def build_lock(layout: StoreLayout, wait_seconds: float = 0.0) -> Iterator[None]:
    """Hold the store's build lock; raise StoreBusy if another process holds it past ``wait_seconds``."""
    layout.check_folder()
    layout.path.parent.mkdir(parents=True, exist_ok=True)
    problem = "not a regular file"
    try:
        # Never through a link: a committed store.lock linking elsewhere must not be truncated.
        fd = _no_follow_open(layout.lock_path, os.O_RDWR | os.O_CREAT | os.O_NONBLOCK)
    except OSError as error:
        fd, problem = -1, str(error.strerror)
    if fd >= 0 and not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        fd = -1
    if fd < 0:
        raise StoreError(
            f"cannot use {display_path(layout.lock_path)} as the build lock ({problem}); "
            f"remove it and run the command again"
        )
    handle = os.fdopen(fd, "a+")
    try:
        deadline = time.monotonic() + wait_seconds
        while True:
            try:
                fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as error:
                if error.errno not in (errno.EAGAIN, errno.EACCES):
                    raise
                if time.monotonic() >= deadline:
                    handle.seek(0)
                    holder = handle.read().strip() or "another process"
                    raise StoreBusy(
                        f"another sotakg build is running on {display_path(layout.path)} ({holder}); "
                        f"wait for it to finish and run the command again"
                    ) from None
                time.sleep(0.05)
        handle.seek(0)
        handle.truncate()
        handle.write(f"pid {os.getpid()}")
        handle.flush()
        yield
    finally:
        handle.close()


def remove_leftover(layout: StoreLayout, path: Path) -> None:
    """Remove one of ``layout.leftovers()``: a half-made link, or a generation sotakg marked."""
    if path.is_symlink():
        path.unlink(missing_ok=True)
    else:
        remove_generation(layout, path)


def remove_generation(layout: StoreLayout, generation: Path) -> bool:
    """Remove a generation sotakg made, unless a reader holds it; True if removed.

    Only a directory beside the link, named as a generation (or a half-removed one) and carrying
    sotakg's marker is removed (an empty one left by a build killed before it wrote its marker too).
    The readers' lock is held exclusively from the check to the rename out of the way, so a reader
    either holds the generation before (and it stays) or finds it gone (and opens the new one)."""
    if generation.parent != layout.path.parent or _real_directory(generation) is None:
        return False
    if _empty_directory(generation):
        with contextlib.suppress(OSError):
            generation.rmdir()
        return True
    if not is_own_generation(generation):
        return False
    try:
        handle = os.fdopen(_no_follow_open(generation / READERS_LOCK, os.O_RDWR | os.O_CREAT | os.O_NONBLOCK), "a+")
    except OSError:
        return False
    with handle:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return False  # a reader holds it: a later build removes it
        if layout._name_pattern(GENERATION_MARK).fullmatch(generation.name):
            trash = generation.with_name(generation.name.replace(GENERATION_MARK, TRASH_MARK, 1))
            try:
                os.rename(generation, trash)
            except OSError:
                return False
            generation = trash
    # The marker goes last, so a removal cut short leaves a folder still recognisably sotakg's.
    for entry in os.scandir(generation):
        if entry.name == GENERATION_MARKER:
            continue
        if entry.is_dir(follow_symlinks=False):
            shutil.rmtree(entry.path, ignore_errors=True)
        else:
            with contextlib.suppress(OSError):
                os.unlink(entry.path)
    with contextlib.suppress(OSError):
        os.unlink(generation / GENERATION_MARKER)
        generation.rmdir()
    return True


class InterruptGuard:
    """SIGINT and SIGTERM stop a build at once until it starts to commit; from then on they are held,
    so the build finishes and its exit status tells the truth about what was committed."""

    def __init__(self) -> None:
        self.committing = False
        self.held: list[int] = []

    def _handle(self, signum: int, frame: Any) -> None:
        # Only the first signal interrupts: a second one must not cut short the cleanup the first began.
        if self.committing or self.held:
            self.held.append(signum)
            return
        self.held.append(signum)
        raise KeyboardInterrupt

    @contextmanager
    def installed(self) -> Iterator[InterruptGuard]:
        import signal
        import threading

        if threading.current_thread() is not threading.main_thread():
            yield self
            return
        previous = {sig: signal.signal(sig, self._handle) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            yield self
        finally:
            for sig, handler in previous.items():
                # Once committed, a late signal must not turn the exit status into a failure.
                signal.signal(sig, signal.SIG_IGN if self.committing else handler)


# ------------------------------------------------------------------------------------- freshness


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@dataclass
class DataSnapshot:
    """The data folder as a build would read it: its files, one fingerprint of their content, and the
    bytes of the files that had to be read to hash them."""

    sources: list[SourceFile]
    stat_digest: str
    fingerprint: str
    hashes: dict[str, str] = field(default_factory=dict)
    contents: dict[str, bytes] = field(default_factory=dict)

    def file_table(self) -> dict[str, list[Any]]:
        return {s.relative: [s.size, s.mtime_ns, self.hashes[s.relative]] for s in self.sources}


def _stat_digest(sources: list[SourceFile]) -> str:
    digest = hashlib.sha256()
    digest.update("\n".join(f"{s.relative}\0{s.size}\0{s.mtime_ns}" for s in sources).encode())
    return digest.hexdigest()


def snapshot(data_dir: Path, generation: Path | None, need_hashes: bool = False) -> DataSnapshot:
    """Scan ``data_dir`` against the build in ``generation``.

    When no file's size or modification time changed, the fingerprint is the recorded one and
    nothing is read (that keeps a no-change rebuild cheap at any scale); otherwise the changed files
    are read and hashed, so that touching a file without changing it still rebuilds nothing.
    ``need_hashes`` asks for every file's hash even when nothing changed (a forced rebuild)."""
    sources = scan_sources(data_dir) if data_dir.is_dir() else []
    stat_digest = _stat_digest(sources)
    manifest = read_manifest(generation)
    if not need_hashes and manifest.get("stat_digest") == stat_digest and manifest.get("fingerprint"):
        return DataSnapshot(sources, stat_digest, manifest["fingerprint"])
    known = read_manifest(generation, FILE_TABLE)
    hashes: dict[str, str] = {}
    contents: dict[str, bytes] = {}
    limit = max_file_bytes()
    for source in sources:
        if source.refusal is not None:  # never opened: the build reports it, naming the file
            hashes[source.relative] = f"refused:{source.refusal}"
            continue
        cached = known.get(source.relative)
        if isinstance(cached, list) and len(cached) == 3 and cached[:2] == [source.size, source.mtime_ns]:
            hashes[source.relative] = cached[2]
        else:
            try:
                data = read_bounded(source.path, limit)
            except OSError:  # too large, not a file, unreadable: the build reports it, naming the file
                hashes[source.relative] = f"unread:{source.size}:{source.mtime_ns}"
                continue
            contents[source.relative] = data
            hashes[source.relative] = hashlib.sha256(data).hexdigest()
    return DataSnapshot(sources, stat_digest, fingerprint(data_dir, hashes), hashes, contents)


def fingerprint(data_dir: Path, hashes: dict[str, str]) -> str:
    """One hash of the data's content, the ontology and the sotakg version that compiles them."""
    digest = hashlib.sha256()
    digest.update(__version__.encode())
    digest.update(_sha256(ontology_path()).encode())
    for name in sorted(hashes):
        digest.update(f"\0{name}\0{hashes[name]}".encode())
    return digest.hexdigest()


def read_manifest(generation: Path | None, name: str = MANIFEST) -> dict[str, Any]:
    """A JSON record the build of ``generation`` wrote: the manifest (fingerprint, stat digest,
    counts, triples) or, with ``name=FILE_TABLE``, the size, time and hash of every file it read.
    Missing or unreadable is an empty record: the store is then simply rebuilt."""
    if generation is None:
        return {}
    try:
        data = read_bounded(generation / name, 1 << 30)
        value = json.loads(data)
    except (OSError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def write_manifest(generation: Path, data: DataSnapshot, counts: dict[str, int], triples: int) -> None:
    """Record what a build of ``data`` made in ``generation``."""
    manifest = {"fingerprint": data.fingerprint, "stat_digest": data.stat_digest, "counts": counts, "triples": triples}
    atomic_write_text(generation / FILE_TABLE, json.dumps(data.file_table(), separators=(",", ":"), sort_keys=True))
    atomic_write_text(generation / MANIFEST, json.dumps(manifest, indent=1, sort_keys=True))


def is_fresh(data_dir: Path, layout: StoreLayout) -> bool:
    """Whether the store holds exactly what a build of ``data_dir`` would make now."""
    generation = layout.current_generation()
    manifest = read_manifest(generation)
    if not manifest:
        return False
    return snapshot(data_dir, generation).fingerprint == manifest.get("fingerprint")


# ------------------------------------------------------------------------------------- opening


READERS_LOCK = "readers.lock"
_held_reader_locks: dict[Path, Any] = {}


def hold_generation(generation: Path) -> bool:
    """Mark ``generation`` as in use by this process (until it exits), so no build deletes it.

    True when it is held and still in place; False when it was removed meanwhile (the caller reads
    the link again). A build removes a generation only under an exclusive lock on the same file, and
    moves it away before releasing that lock, so a shared lock here and the marker found afterwards
    mean the generation stays whole for as long as this process lives."""
    if generation in _held_reader_locks:
        return True
    try:
        handle = os.fdopen(_no_follow_open(generation / READERS_LOCK, os.O_RDWR | os.O_CREAT | os.O_NONBLOCK), "a+")
    except FileNotFoundError:
        return False
    except OSError:  # a read-only checkout: nobody can build there either, so nothing to guard against
        return is_own_generation(generation)
    fcntl.flock(handle.fileno(), fcntl.LOCK_SH)
    if not is_own_generation(generation):
        handle.close()
        return False
    _held_reader_locks[generation] = handle
    return True


def generation_in_use(generation: Path) -> bool:
    """Whether some process holds ``generation`` open for reading."""
    try:
        fd = _no_follow_open(generation / READERS_LOCK, os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)
    return False


def hold_current(layout: StoreLayout) -> Path:
    """The current generation, held for this process (see hold_generation); StoreError if none."""
    for _ in range(100):  # each retry means a build swapped the link meanwhile: it settles at once
        generation = layout.current_generation()
        if generation is None:
            raise StoreError(f"no store at {display_path(layout.path)}; run 'sotakg build' first")
        generation = Path(os.path.abspath(generation))
        if hold_generation(generation):
            return generation
    raise StoreError(f"the store at {display_path(layout.path)} kept changing while it was opened; try again")


def open_read_only(layout: StoreLayout) -> Store:
    """Open the current generation read-only and hold it (several readers and a builder may run at once)."""
    from pyoxigraph import Store

    generation = hold_current(layout)
    try:
        return Store.read_only(str(generation / DATABASE))
    except OSError as error:
        raise StoreError(f"cannot open the store at {display_path(layout.path)}: {error}") from None
