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
import marshal
import os
import shutil
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import __version__
from ..errors import StoreBusy, StoreError
from ..records.sources import (
    FOLDER_KINDS,
    REGISTRY_FILE,
    SourceFile,
    atomic_write_text,
    display_path,
    max_file_bytes,
    read_bounded,
)
from ..resources import ontology_path

if TYPE_CHECKING:
    from pyoxigraph import Store

DEFAULT_STORE = Path(".sotakg/store")
MANIFEST = "build.json"
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

#: A file whose modification or change time lies this close before the scan that recorded it can
#: still change within the same clock tick, keeping its size and times (git's "racily clean" files):
#: its recorded hash is checked against its content on every later scan, however its stat looks.
RACY_NS = 2_000_000_000
#: Per generation: every data file's stat and hash, and the records each file made (see SourceTable).
SOURCE_TABLE = "sources.sqlite"
#: Files of a generation named so are carried to the next one by an incremental build, for the layers
#: above to keep what they derived from the graph (validation findings) with what changed since.
CARRY_PREFIX = "carry-"

#: What a scan keeps of a file to notice a change: size, modification time, inode and change time.
#: The inode catches a file replaced by a rename, the change time an edit whose modification time was
#: set back (``touch -d``), and RACY_NS an edit within the clock tick of the scan itself.
FileStat = tuple[int, int, int, int]


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@dataclass
class DataSnapshot:
    """The data folder as a build would read it: its files and their stats, one fingerprint of their
    content, and, when the stats differ from the current build's, each file's hash, the bytes of the
    files that had to be read, and which files changed or went since that build."""

    data_dir: Path
    stats: dict[str, FileStat]
    stat_digest: str
    fingerprint: str
    scan_ns: int = 0
    hashes: dict[str, str] = field(default_factory=dict)
    contents: dict[str, bytes] = field(default_factory=dict)
    #: Files new or with other content than in the current build; None when there is no build to compare.
    changed: set[str] | None = None
    removed: set[str] = field(default_factory=set)
    #: The racy files (see RACY_NS) the manifest keeps for the next scan, with their hashes.
    racy: dict[str, str] = field(default_factory=dict)
    #: Files whose stat differed from the current build's (so they were read and hashed again).
    rehashed: set[str] = field(default_factory=set)
    #: The name of the generation this scan was compared with (None: no store).
    against: str | None = None

    @cached_property
    def sources(self) -> list[SourceFile]:
        """The files as scan_sources lists them (made when needed: a no-change command never does)."""
        return sources_of(self.data_dir, self.stats)

    def file_rows(self) -> list[tuple[str, int, int, int, int, str]]:
        """One (path, size, mtime_ns, inode, ctime_ns, hash) row a file, for the source table."""
        return [(rel, *stat, self.hashes[rel]) for rel, stat in self.stats.items()]

    def racy_files(self) -> dict[str, str]:
        """The files whose times are too close to this scan to trust their stat next time."""
        threshold = self.scan_ns - RACY_NS
        return {
            rel: self.hashes[rel]
            for rel, (_size, mtime, _inode, ctime) in self.stats.items()
            if (mtime >= threshold or ctime >= threshold) and rel in self.hashes
        }


def scan_data(data_dir: Path) -> tuple[list[SourceFile], dict[str, FileStat]]:
    """The record files of ``data_dir`` as ``scan_sources`` lists them, with each file's FileStat."""
    stats = scan_stats(data_dir)
    sources = sources_of(data_dir, stats)
    return sources, {source.relative: stats[source.relative] for source in sources}


def scan_stats(data_dir: Path) -> dict[str, FileStat]:
    """Each YAML file's FileStat by path relative to ``data_dir``, in the folders' own order, from one
    stat call a file: the whole cost of a no-change command at scale. Each folder is listed through
    its descriptor, so that the stat of an entry resolves one name rather than a path."""
    stats: dict[str, FileStat] = {}

    def walk(descriptor: int, relative: str) -> None:
        try:
            base = relative + "/" if relative else ""
            # In the folder's own order (stable while the folder does not change; a change of the
            # order changes the digest, which only costs a check): sources_of sorts.
            for entry in os.scandir(descriptor):
                name = entry.name
                if name[0] == ".":
                    continue
                if entry.is_dir(follow_symlinks=False):
                    try:
                        inner = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=descriptor)
                    except OSError:
                        continue
                    walk(inner, base + name)
                    continue
                if not name.endswith((".yaml", ".yml")):
                    continue
                try:
                    info = entry.stat()
                except OSError:  # a dangling link: listed, so that the build names it
                    info = entry.stat(follow_symlinks=False)
                stats[base + name] = (info.st_size, info.st_mtime_ns, info.st_ino, info.st_ctime_ns)
        except OSError:
            return
        finally:
            os.close(descriptor)

    try:
        root = os.open(data_dir, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return stats
    walk(root, "")
    return stats


def sources_of(data_dir: Path, stats: dict[str, FileStat]) -> list[SourceFile]:
    """The SourceFile of each scanned file, as scan_sources makes it, in its order (each folder's
    entries by name, a subfolder's files at the subfolder's place)."""
    root = str(data_dir)
    shown_root = display_path(data_dir)
    prefix = "" if shown_root == "." else shown_root + "/"
    found = []
    for rel in sorted(stats, key=_path_parts):
        size, mtime_ns, _inode, _ctime = stats[rel]
        folder, _slash, name = rel.rpartition("/")
        if not folder:
            kind = "registry" if name == REGISTRY_FILE else None
        else:
            kind = FOLDER_KINDS.get(folder) if "/" not in folder else None
        found.append(SourceFile(os.path.join(root, rel), rel, prefix + rel, kind, size, mtime_ns))
    return found


def _path_parts(rel: str) -> list[str]:
    return rel.split("/")


def _stat_digest(stats: dict[str, FileStat]) -> str:
    # marshal writes the (ordered) table in C: a tenth of the cost of formatting it line by line.
    return hashlib.sha256(marshal.dumps(stats)).hexdigest()


def _racy_files_unchanged(data_dir: Path, racy: dict[str, str]) -> bool:
    limit = max_file_bytes()
    for rel, recorded in racy.items():
        try:
            content = read_bounded(data_dir / rel, limit)
        except OSError:
            return False
        if hashlib.sha256(content).hexdigest() != recorded:
            return False
    return True


def _settle_racy(
    generation: Path, manifest: dict[str, Any], racy: dict[str, str], stats: dict[str, FileStat], scan_ns: int
) -> dict[str, str]:
    """Drop from the manifest the racy files that just proved unchanged and are now old enough that
    any later edit changes their stat (so the next scans read nothing); best effort."""
    threshold = scan_ns - RACY_NS
    still = {rel: h for rel, h in racy.items() if rel in stats and max(stats[rel][1], stats[rel][3]) >= threshold}
    if still != racy:
        with contextlib.suppress(OSError):  # a read-only checkout: the files are checked again next time
            atomic_write_text(generation / MANIFEST, json.dumps({**manifest, "racy": still}, indent=1, sort_keys=True))
    return still


def snapshot(data_dir: Path, generation: Path | None, need_hashes: bool = False) -> DataSnapshot:
    """Scan ``data_dir`` against the build in ``generation``.

    When no file's stat changed (and the racy files still hold what they held), the fingerprint is
    the recorded one and nothing else is read: that keeps a no-change command cheap at any scale.
    Otherwise files whose stat changed are read and hashed, so that touching a file without changing
    it rebuilds nothing, and ``changed``/``removed`` say what an incremental build has to redo.
    ``need_hashes`` asks for every file's hash even when nothing changed (a forced rebuild)."""
    scan_ns = time.time_ns()
    stats = scan_stats(data_dir) if data_dir.is_dir() else {}
    stat_digest = _stat_digest(stats)
    manifest = read_manifest(generation)
    racy: dict[str, str] = manifest["racy"] if isinstance(manifest.get("racy"), dict) else {}
    against = generation.name if generation is not None else None
    if (
        not need_hashes
        and manifest.get("stat_digest") == stat_digest
        and manifest.get("fingerprint")
        and manifest.get("base") == build_base()
        and _racy_files_unchanged(data_dir, racy)
    ):
        if racy and generation is not None:
            racy = _settle_racy(generation, manifest, racy, stats, scan_ns)
        return DataSnapshot(
            data_dir, stats, stat_digest, manifest["fingerprint"], scan_ns, racy=dict(racy), against=against
        )
    known = read_file_table(generation)
    table = known or {}
    hashes: dict[str, str] = {}
    contents: dict[str, bytes] = {}
    limit = max_file_bytes()
    root = str(data_dir)
    for rel, stat in stats.items():
        cached = table.get(rel)
        if cached is not None and cached[:4] == stat and rel not in racy:
            hashes[rel] = cached[4]
            continue
        try:
            data = read_bounded(os.path.join(root, rel), limit)
        except OSError:  # too large, not a file, unreadable: the build reports it, naming the file
            hashes[rel] = "unread:{}:{}:{}:{}".format(*stat)
            continue
        contents[rel] = data
        hashes[rel] = hashlib.sha256(data).hexdigest()
    rehashed = {rel for rel in hashes if rel not in table or table[rel][:4] != stats[rel] or rel in racy}
    changed = None if known is None else {rel for rel, h in hashes.items() if rel not in table or table[rel][4] != h}
    removed = set() if known is None else set(table) - set(stats)
    scanned = DataSnapshot(
        data_dir, stats, stat_digest, fingerprint(data_dir, hashes), scan_ns, hashes, contents, changed, removed
    )
    scanned.racy = scanned.racy_files()
    scanned.rehashed = rehashed
    scanned.against = against
    return scanned


def build_base() -> str:
    """One hash of what, besides the data, decides the triples: the sotakg version and the ontology.
    An incremental build needs the current generation to have been made on the same base."""
    digest = hashlib.sha256()
    digest.update(__version__.encode())
    digest.update(_sha256(ontology_path()).encode())
    return digest.hexdigest()


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
        manifest = json.loads((generation / MANIFEST).read_text())
    except (OSError, ValueError):
        return {}
    return manifest if isinstance(manifest, dict) else {}


def read_file_table(generation: Path | None) -> dict[str, tuple[int, int, int, int, str]] | None:
    """Stat and content hash of every file the build of ``generation`` read; None without a table."""
    if generation is None:
        return None
    table = SourceTable.open(generation)
    if table is None:
        return None
    try:
        return table.files()
    finally:
        table.close()


def write_manifest(
    generation: Path,
    data: DataSnapshot,
    counts: dict[str, int],
    triples: int,
    lineage: dict[str, Any] | None = None,
) -> None:
    """Record what a build of ``data`` made in ``generation`` (its source table is written apart).

    ``lineage`` maps the fingerprints of earlier builds to what changed since each (the subjects and
    identifiers an incremental build touched), so a validation can re-check only those."""
    manifest = {
        "fingerprint": data.fingerprint,
        "stat_digest": data.stat_digest,
        "racy": data.racy,
        "base": build_base(),
        "counts": counts,
        "triples": triples,
        "lineage": lineage or {},
    }
    atomic_write_text(generation / MANIFEST, json.dumps(manifest, indent=1, sort_keys=True))


def remember_stats(generation: Path, data: DataSnapshot) -> None:
    """Files were touched but not changed: keep their new stats, so the next scan reads nothing."""
    table = SourceTable.open(generation, writable=True)
    if table is None:
        return
    try:
        table.put_files(data.file_rows())
        table.commit()
    finally:
        table.close()
    manifest = read_manifest(generation)
    manifest.update({"stat_digest": data.stat_digest, "racy": data.racy})
    atomic_write_text(generation / MANIFEST, json.dumps(manifest, indent=1, sort_keys=True))


def freshness(data_dir: Path, layout: StoreLayout) -> tuple[bool, DataSnapshot]:
    """Whether the store holds exactly what a build of ``data_dir`` would make now, and the scan
    that says so (a build can go on from it without scanning again)."""
    generation = layout.current_generation()
    manifest = read_manifest(generation)
    scanned = snapshot(data_dir, generation)
    return bool(manifest) and scanned.fingerprint == manifest.get("fingerprint"), scanned


def is_fresh(data_dir: Path, layout: StoreLayout) -> bool:
    """Whether the store holds exactly what a build of ``data_dir`` would make now."""
    return freshness(data_dir, layout)[0]


class SourceTable:
    """A generation's SQLite table of its sources: each data file's stat and hash, and the record it
    made (kind, identifier, subject IRI, the line of each field, the field values).

    The build reads it to know what a changed file stated before (its triples are taken out of the
    copied store) and copies it on to the next generation; a validation report reads the lines of
    the records it names instead of parsing YAML again."""

    SCHEMA = (
        "CREATE TABLE files (rel TEXT PRIMARY KEY, size INTEGER, mtime_ns INTEGER, inode INTEGER,"
        " ctime_ns INTEGER, hash TEXT) WITHOUT ROWID",
        "CREATE TABLE records (rel TEXT PRIMARY KEY, kind TEXT, id TEXT, subject TEXT, line INTEGER,"
        " lines TEXT, fields TEXT) WITHOUT ROWID",
        "CREATE INDEX records_id ON records (id)",
        "CREATE INDEX records_subject ON records (subject)",
    )

    def __init__(self, connection: Any):
        self.connection = connection

    @classmethod
    def create(cls, generation: Path) -> SourceTable:
        """A new, empty table in ``generation``."""
        import sqlite3

        connection = sqlite3.connect(generation / SOURCE_TABLE)
        connection.execute("PRAGMA journal_mode=OFF")
        connection.execute("PRAGMA synchronous=OFF")
        for statement in cls.SCHEMA:
            connection.execute(statement)
        return cls(connection)

    @classmethod
    def open(cls, generation: Path, writable: bool = False) -> SourceTable | None:
        """The table of ``generation``, or None when it has none (a store made before it existed)."""
        import sqlite3

        path = generation / SOURCE_TABLE
        if path.is_symlink() or not path.is_file():
            return None
        try:
            if writable:
                connection = sqlite3.connect(path)
                connection.execute("PRAGMA synchronous=OFF")
            else:
                connection = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
            # A table from a pull request's committed store may hold anything: use it only when its
            # schema is exactly the one sotakg writes (no triggers, no views).
            connection.execute("PRAGMA trusted_schema=OFF")
            schema = {row[0] for row in connection.execute("SELECT sql FROM sqlite_master")}
        except sqlite3.Error:
            return None
        if schema != set(cls.SCHEMA):
            connection.close()
            return None
        return cls(connection)

    def files(self) -> dict[str, tuple[int, int, int, int, str]]:
        """Every file's (size, mtime_ns, inode, ctime_ns, hash), by path relative to the data folder."""
        return {row[0]: tuple(row[1:]) for row in self.connection.execute("SELECT * FROM files")}  # type: ignore[misc]

    def put_files(self, rows: Iterable[tuple[str, int, int, int, int, str]]) -> None:
        self.connection.executemany("INSERT OR REPLACE INTO files VALUES (?, ?, ?, ?, ?, ?)", rows)

    def delete_files(self, rels: Iterable[str]) -> None:
        self.connection.executemany("DELETE FROM files WHERE rel = ?", ((rel,) for rel in rels))
        self.connection.executemany("DELETE FROM records WHERE rel = ?", ((rel,) for rel in rels))

    def put_records(self, rows: Iterable[tuple[str, str, str, str, int, str, str]]) -> None:
        """Rows of (rel, kind, id, subject IRI, line, field lines as JSON, field values as JSON)."""
        self.connection.executemany("INSERT OR REPLACE INTO records VALUES (?, ?, ?, ?, ?, ?, ?)", rows)

    def records_where(self, column: str, values: Iterable[str]) -> list[tuple[Any, ...]]:
        """The record rows whose ``column`` (rel, id or subject) is one of ``values``."""
        if column not in ("rel", "id", "subject"):
            raise ValueError(column)
        found: list[tuple[Any, ...]] = []
        for value in dict.fromkeys(values):
            found.extend(self.connection.execute(f"SELECT * FROM records WHERE {column} = ?", (value,)))
        return found

    def count(self) -> int:
        return int(self.connection.execute("SELECT COUNT(*) FROM records").fetchone()[0])

    def commit(self) -> None:
        self.connection.commit()

    def close(self) -> None:
        self.connection.close()


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
