"""The embedded Oxigraph store: its layout on disk, the build lock, freshness, and opening it.

Layout. ``--store PATH`` (default ``.sotakg/store``) is a symbolic link to a generation directory
``PATH.gen-<token>`` that holds the Oxigraph database (``oxigraph/``) and a manifest (``build.json``).
A build writes a new generation beside the current one and swaps the link with one atomic rename,
so readers always see a complete graph, the old one or the new one. ``PATH.lock`` serialises builds.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import json
import os
import shutil
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


@dataclass(frozen=True)
class StoreLayout:
    """Where a store's link, generations and lock live."""

    path: Path

    @property
    def lock_path(self) -> Path:
        return self.path.with_name(self.path.name + ".lock")

    def new_generation(self) -> Path:
        return self.path.with_name(f"{self.path.name}{GENERATION_MARK}{time.time_ns():x}-{os.getpid()}")

    def current_generation(self) -> Path | None:
        """The generation the link points to, or None when there is no store yet."""
        if not self.path.is_symlink():
            if self.path.exists():
                raise StoreError(
                    f"{display_path(self.path)} exists but is not a sotakg store; move it away or pass another --store"
                )
            return None
        target = self.path.parent / os.readlink(self.path)
        return target if target.is_dir() else None

    def leftovers(self) -> list[Path]:
        """Generations and half-made links that no link points to (from killed builds)."""
        current = self.current_generation()
        found = []
        if not self.path.parent.is_dir():
            return []
        for entry in self.path.parent.iterdir():
            name = entry.name
            if not name.startswith(self.path.name):
                continue
            rest = name[len(self.path.name) :]
            if not rest.startswith((GENERATION_MARK, LINK_MARK)):
                continue
            if current is not None and entry.resolve() == current.resolve():
                continue
            if entry.is_dir() and not entry.is_symlink() and generation_in_use(entry):
                continue
            found.append(entry)
        return found


@contextmanager
def build_lock(layout: StoreLayout, wait_seconds: float = 0.0) -> Iterator[None]:
    """Hold the store's build lock; raise StoreBusy if another process holds it past ``wait_seconds``."""
    layout.path.parent.mkdir(parents=True, exist_ok=True)
    handle = open(layout.lock_path, "a+")
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


def remove_path(path: Path) -> None:
    """Remove a file, link or directory tree; missing is fine."""
    if path.is_symlink() or path.is_file():
        path.unlink(missing_ok=True)
    elif path.is_dir():
        shutil.rmtree(path, ignore_errors=True)


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
    known = read_file_table(generation)
    hashes: dict[str, str] = {}
    contents: dict[str, bytes] = {}
    limit = max_file_bytes()
    for source in sources:
        cached = known.get(source.relative)
        if cached and cached[0] == source.size and cached[1] == source.mtime_ns:
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


def read_manifest(generation: Path | None) -> dict[str, Any]:
    """What the build of ``generation`` recorded: fingerprint, stat digest, counts, triples."""
    if generation is None:
        return {}
    try:
        return json.loads((generation / MANIFEST).read_text())
    except (OSError, ValueError):
        return {}


def read_file_table(generation: Path | None) -> dict[str, Any]:
    """Size, modification time and content hash of every file the build of ``generation`` read."""
    if generation is None:
        return {}
    try:
        return json.loads((generation / FILE_TABLE).read_text())
    except (OSError, ValueError):
        return {}


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


def hold_generation(generation: Path) -> None:
    """Mark ``generation`` as in use by this process (until it exits), so no build deletes it.

    A build swaps in a new generation and then deletes the old one only if no reader holds it;
    otherwise a later build deletes it once its readers are gone.
    """
    if generation in _held_reader_locks:
        return
    try:
        handle = open(generation / READERS_LOCK, "a+")
    except OSError:  # a read-only checkout: nobody can build there either, so nothing to guard against
        return
    fcntl.flock(handle.fileno(), fcntl.LOCK_SH)
    _held_reader_locks[generation] = handle


def generation_in_use(generation: Path) -> bool:
    """Whether some process holds ``generation`` open for reading."""
    lock = generation / READERS_LOCK
    if not lock.exists():
        return False
    with open(lock, "a+") as handle:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return True
        fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
    return False


def open_read_only(layout: StoreLayout) -> Store:
    """Open the current generation read-only (several readers and a builder may run at once)."""
    from pyoxigraph import Store

    generation = layout.current_generation()
    if generation is None:
        raise StoreError(f"no store at {display_path(layout.path)}; run 'sotakg build' first")
    generation = generation.resolve()
    try:
        hold_generation(generation)
        return Store.read_only(str(generation / DATABASE))
    except OSError as error:
        raise StoreError(f"cannot open the store at {display_path(layout.path)}: {error}") from None
