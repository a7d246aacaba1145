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
import re
import shutil
import stat
import time
import zlib
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cached_property
from itertools import chain
from operator import itemgetter
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import __version__
from ..errors import StoreBusy, StoreError, printable
from ..records.sources import (
    FOLDER_KINDS,
    MAX_FOLDER_DEPTH,
    RECORD_SUFFIXES,
    SourceFile,
    atomic_write_text,
    display_path,
    escaped_name,
    link_refusal,
    linked_part,
    max_file_bytes,
    read_bounded,
    read_many,
    refuse_linked_folder,
    scan_sources,
)
from ..resources import ontology_path

if TYPE_CHECKING:
    from pyoxigraph import Store

MANIFEST = "build.json"
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
        """Refuse a store folder that is a symbolic link, or lies behind one (``linked_part``): the
        store would then live wherever it points."""
        linked = linked_part(self.path.parent)
        if linked is not None:
            what = "is" if linked == self.path.parent else f"lies behind {display_path(linked)}, which is"
            raise StoreError(
                f"the store folder {display_path(self.path.parent)} {what} a symbolic link, and sotakg does not "
                f"follow it; remove the link (rm {display_path(linked)}) or pass another --store"
            )

    def refuse_what_is_no_store(self) -> None:
        """StoreError when the store's path holds something else than a store's link (a folder, a
        file: ``--store data``)."""
        if not self.path.is_symlink() and self.path.exists():
            raise StoreError(
                f"{display_path(self.path)} exists but is not a sotakg store; move it away or pass another --store"
            )

    def current_generation(self) -> Path | None:
        """The generation the link points to, or None when there is no store yet (or the link dangles).

        The link must name a generation of this store beside it, and that generation must carry the
        marker sotakg wrote; any other link (absolute, ``..``, another folder, a foreign directory)
        is refused with a StoreError, so nothing it points to is ever opened or removed."""
        self.check_folder()
        if not self.path.is_symlink():
            self.refuse_what_is_no_store()
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
    layout.refuse_what_is_no_store()  # before the lock is made beside it: a refused path leaves nothing
    layout.path.parent.mkdir(parents=True, exist_ok=True)
    problem = "not a regular file"
    try:
        # Never through a link: a committed store.lock linking elsewhere must not be truncated.
        fd = _no_follow_open(layout.lock_path, os.O_RDWR | os.O_CREAT | os.O_NONBLOCK)
    except OSError as error:
        fd, problem = -1, str(error.strerror)
    if fd >= 0:
        status = os.fstat(fd)
        if not stat.S_ISREG(status.st_mode) or status.st_nlink != 1:
            # A hard link (a committed store.lock that is another name of a file elsewhere) would have
            # that file truncated and written: refused as a symbolic link is.
            problem = "not a regular file" if not stat.S_ISREG(status.st_mode) else "a hard link to another file"
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
                    holder = printable(handle.read(200).strip()) or "another process"
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
            # The mark after the store's own name (which may hold one too), so that leftovers() knows it.
            token = generation.name[len(layout.path.name + GENERATION_MARK) :]
            trash = generation.with_name(f"{layout.path.name}{TRASH_MARK}{token}")
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

#: A file whose modification or change time lies this close before the scan that recorded it can
#: still change within the same clock tick, keeping its size and times (git's "racily clean" files):
#: its recorded hash is checked against its content on every later scan, however its stat looks.
RACY_NS = 2_000_000_000
#: Per generation: every data file's stat and hash, and the records each file made (see SourceTable).
SOURCE_TABLE = "sources.sqlite"
#: Files fall into this many buckets by a checksum of their path. The manifest keeps, per bucket, a
#: digest of its files' stats and one of their content hashes: a scan that finds a few files changed
#: reads the source table's rows of their buckets only, and the fingerprint is one hash of the
#: buckets' content digests (a read of all 126,000 rows took a third of a second).
BUCKETS = 256
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
    #: Per bucket (see BUCKETS): a digest of its files' stats and of their content hashes; None when
    #: nothing was found changed (they are the manifest's then).
    stat_buckets: list[str] | None = None
    hash_buckets: list[str] | None = None
    #: The generation whose source table holds the hashes of the files of the buckets not read (see
    #: ``complete_hashes``); None when ``hashes`` has every file's.
    hashes_from: Path | None = None

    def complete_hashes(self) -> dict[str, str]:
        """Every file's hash: those of the buckets this scan did not read are the recorded ones
        (their stats are as recorded), read from the source table when first needed (a full build)."""
        if self.hashes_from is not None:
            known = read_file_table(self.hashes_from)
            recorded = known[1] if known is not None else {}
            self.hashes = {rel: self.hashes.get(rel) or recorded.get(rel, "") for rel in self.stats}
            self.hashes_from = None
        return self.hashes

    @cached_property
    def sources(self) -> list[SourceFile]:
        """The files as scan_sources lists them, with its refusals (links out of the data folder,
        folders named like records, ...), made when needed: a no-change command never does."""
        return scan_sources(self.data_dir) if self.data_dir.is_dir() else []

    def rehashed_rows(self) -> list[tuple[str, int, int, int, int, str]]:
        """One (path, size, mtime_ns, inode, ctime_ns, hash) row for each file read again, for the
        source table: the other files' rows there are as this scan found them."""
        return [(rel, *self.stats[rel], self.hashes[rel]) for rel in sorted(self.rehashed)]

    def racy_files(self) -> dict[str, str]:
        """The files whose times are too close to this scan to trust their stat next time."""
        threshold = self.scan_ns - RACY_NS
        # An entry never read (a linked folder, a refused name) has its stat in its hash: it changes
        # with its stat, so it is never racy.
        return {
            rel: self.hashes[rel]
            for rel, (_size, mtime, _inode, ctime) in self.stats.items()
            if (mtime >= threshold or ctime >= threshold)
            and rel in self.hashes
            and not self.hashes[rel].startswith(("unread:", "refused:"))
        }


def scan_data(data_dir: Path) -> tuple[list[SourceFile], dict[str, FileStat]]:
    """The record files of ``data_dir`` as ``scan_sources`` lists them, with each file's FileStat."""
    stats = scan_stats(data_dir)
    sources = scan_sources(data_dir)
    return sources, {source.relative: stats[source.relative] for source in sources if source.relative in stats}


def scan_stats(data_dir: Path) -> dict[str, FileStat]:
    """Each YAML file's FileStat by path relative to ``data_dir``, in the folders' own order, from one
    stat call a file: the whole cost of a no-change command at scale. Each folder is listed through
    its descriptor, so that the stat of an entry resolves one name rather than a path.

    It looks where ``scan_sources`` looks, so that whatever the build would read or refuse is seen to
    change: a top-level link to a folder inside the data folder is followed (and listed itself, so
    that pointing it elsewhere is a change), any other link is listed by its own stat, and a name
    that is not UTF-8 or a folder past ``MAX_FOLDER_DEPTH`` is listed, never looked into."""
    refuse_linked_folder(data_dir, "data folder")  # before a stat, let alone a read, of what it leads to
    stats: dict[str, FileStat] = {}
    real_root = os.path.realpath(data_dir)

    def listed(key: str, info: os.stat_result) -> None:
        stats[key] = (info.st_size, info.st_mtime_ns, info.st_ino, info.st_ctime_ns)

    def linked_record_stat(entry: os.DirEntry[str], rel: str) -> FileStat:
        # A link's target may stay the same file while a folder on the way to it moves out of the
        # data folder: its stat would not change. A link the build refuses gets the link's own stat
        # with a size of -1 (never the target's, which lies outside), so leaving or coming back in
        # changes the scan.
        if link_refusal(data_dir, rel) is not None:
            own = entry.stat(follow_symlinks=False)
            return (-1, own.st_mtime_ns, own.st_ino, own.st_ctime_ns)
        info = entry.stat()
        return (info.st_size, info.st_mtime_ns, info.st_ino, info.st_ctime_ns)

    def walk(descriptor: int, relative: str) -> None:
        try:
            base = relative + "/" if relative else ""
            # In the folder's own order (stable while the folder does not change; a change of the
            # order changes the digest, which only costs a check).
            for entry in os.scandir(descriptor):
                name = entry.name
                if name[0] == ".":
                    continue
                if relative and name.endswith(RECORD_SUFFIXES) and name.isascii():
                    # The common case, a record file in a record folder, without the calls below
                    # (a third of the scan's time at 126,000 files): an ASCII name needs no
                    # escaping, and a record name is neither walked nor refused as a folder.
                    if entry.is_symlink():  # no system call: the folder listing says so
                        stats[base + name] = linked_record_stat(entry, base + name)
                        continue
                    try:
                        info = entry.stat()
                    except OSError:
                        info = entry.stat(follow_symlinks=False)
                    stats[base + name] = (info.st_size, info.st_mtime_ns, info.st_ino, info.st_ctime_ns)
                    continue
                escaped = escaped_name(name)
                if escaped is not None:  # refused by name, never read
                    listed(base + escaped, entry.stat(follow_symlinks=False))
                    continue
                is_record_name = name.endswith((".yaml", ".yml"))
                if not is_record_name and entry.is_symlink():
                    listed(base + name, entry.stat(follow_symlinks=False))
                    # Only as a record folder (as scan_sources follows it): each link is one walk.
                    if (
                        not relative
                        and name in FOLDER_KINDS
                        and _is_folder_inside(os.path.join(data_dir, name), real_root)
                    ):
                        with contextlib.suppress(OSError):
                            walk(os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=descriptor), name)
                    continue
                if not relative and name in FOLDER_KINDS and not entry.is_dir(follow_symlinks=False):
                    # A record folder that is a file: listed, so that a change of it is seen and the
                    # build names it (scan_sources refuses it).
                    listed(name, entry.stat(follow_symlinks=False))
                    continue
                if entry.is_dir(follow_symlinks=False) and not is_record_name:
                    if (base + name).count("/") >= MAX_FOLDER_DEPTH:
                        listed(base + name, entry.stat(follow_symlinks=False))  # refused, not walked
                        continue
                    try:
                        inner = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=descriptor)
                    except OSError:
                        continue
                    walk(inner, base + name)
                    continue
                if not is_record_name:
                    continue
                if entry.is_symlink():
                    stats[base + name] = linked_record_stat(entry, base + name)
                    continue
                try:
                    info = entry.stat()
                except OSError:  # a dangling link: listed, so that the build names it
                    info = entry.stat(follow_symlinks=False)
                listed(base + name, info)
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


def _is_folder_inside(path: str, real_root: str) -> bool:
    real = os.path.realpath(path)
    return real.startswith(real_root + os.sep) and os.path.isdir(real)


def _stat_digest(stats: dict[str, FileStat]) -> str:
    # marshal writes the (ordered) table in C: a tenth of the cost of formatting it line by line.
    return hashlib.sha256(marshal.dumps(stats)).hexdigest()


def _racy_files_unchanged(data_dir: Path, racy: dict[str, str]) -> bool:
    limit = max_file_bytes()
    for rel, recorded in racy.items():
        if link_refusal(data_dir, rel) is not None:  # never opened: as a change, the build names it
            return False
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
            text = json.dumps({**manifest, "racy": still}, indent=1, sort_keys=True)
            atomic_write_text(generation / MANIFEST, text, make_parent=False)
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
    groups = _bucketed(stats)
    stat_buckets = [_stat_bucket_digest(stats, group) for group in groups]
    read_buckets = None if need_hashes else _buckets_to_read(manifest, stat_buckets, groups, stats, racy, scan_ns)
    known = read_file_table(generation, read_buckets)
    if known is None:
        read_buckets = None
    recorded_stats, recorded_hashes = known if known is not None else (set(), {})
    in_read = stats.keys() if read_buckets is None else {rel for bucket in read_buckets for rel in groups[bucket]}
    # The files whose stat is not the build's, found by set difference (in C, not a loop a file),
    # and the racy ones: only they are read again; every other file keeps its recorded hash.
    differs = {row[0] for row in {(rel, *stats[rel]) for rel in in_read} - recorded_stats}
    rehashed = {rel for rel in (differs | racy.keys()) if rel in stats}
    # Every other file keeps its recorded hash: the recorded table copied (in C) less the files
    # gone or read again, instead of a dictionary built a file at a time.
    hashes = dict(recorded_hashes)
    for rel in (hashes.keys() - stats.keys()) | rehashed:
        hashes.pop(rel, None)
    contents: dict[str, bytes] = {}
    limit = max_file_bytes()
    root = str(data_dir)
    to_read = []
    for rel in rehashed:
        refusal = link_refusal(data_dir, rel)
        if refusal is not None:  # never opened: the build reports it, naming the file
            hashes[rel] = f"refused:{refusal}"
        else:
            to_read.append(rel)
    for rel, data in zip(to_read, read_many([os.path.join(root, rel) for rel in to_read], limit), strict=True):
        if isinstance(data, OSError):  # too large, not a file, unreadable: the build reports it, naming the file
            hashes[rel] = "unread:{}:{}:{}:{}".format(*stats[rel])
            continue
        contents[rel] = data
        hashes[rel] = hashlib.sha256(data).hexdigest()
    if read_buckets is None:
        hash_buckets = [_hash_bucket_digest(hashes, group) for group in groups]
    else:
        hash_buckets = list(manifest["hash_buckets"])
        for bucket in read_buckets:
            hash_buckets[bucket] = _hash_bucket_digest(hashes, groups[bucket])
    # Only a file read again can have another content than the build's.
    changed = None if known is None else {rel for rel in rehashed if recorded_hashes.get(rel) != hashes[rel]}
    removed = set() if known is None else recorded_hashes.keys() - stats.keys()
    scanned = DataSnapshot(
        data_dir, stats, stat_digest, _bucket_fingerprint(hash_buckets), scan_ns, hashes, contents, changed, removed
    )
    scanned.racy = scanned.racy_files()
    scanned.rehashed = rehashed
    scanned.against = against
    scanned.stat_buckets, scanned.hash_buckets = stat_buckets, hash_buckets
    scanned.hashes_from = generation if read_buckets is not None else None
    return scanned


def _bucket(rel: str) -> int:
    return zlib.crc32(rel.encode("utf-8", "surrogateescape")) % BUCKETS


def _bucketed(stats: dict[str, FileStat]) -> list[list[str]]:
    """The files of each bucket, in the scan's order."""
    try:  # every name a scan lists is UTF-8 (others are escaped): checksums in C, no call a file
        checksums: Iterable[int] = map(zlib.crc32, map(str.encode, stats))
        groups: list[list[str]] = [[] for _ in range(BUCKETS)]
        for rel, checksum in zip(stats, checksums, strict=True):
            groups[checksum % BUCKETS].append(rel)
    except UnicodeEncodeError:
        groups = [[] for _ in range(BUCKETS)]
        for rel in stats:
            groups[_bucket(rel)].append(rel)
    return groups


def _stat_bucket_digest(stats: dict[str, FileStat], group: list[str]) -> str:
    # the names and their stats as two lists: no pair made a file (marshal writes both in C)
    return hashlib.sha256(marshal.dumps((group, list(map(stats.__getitem__, group))))).hexdigest()


def _hash_bucket_digest(hashes: dict[str, str], group: list[str]) -> str:
    # "\0name\0hash" for each file in name order, joined in C: no loop a file in Python.
    pairs = sorted((rel, hashes[rel]) for rel in group)
    return hashlib.sha256(("\0" + "\0".join(chain.from_iterable(pairs))).encode()).hexdigest()


def _bucket_fingerprint(hash_buckets: list[str]) -> str:
    """One hash of the data's content (every bucket's digest), the ontology and the sotakg version."""
    digest = hashlib.sha256()
    digest.update(__version__.encode())
    digest.update(_sha256(ontology_path()).encode())
    digest.update("".join(hash_buckets).encode())
    return digest.hexdigest()


def _recorded_buckets(manifest: dict[str, Any], key: str) -> list[str] | None:
    recorded = manifest.get(key)
    if isinstance(recorded, list) and len(recorded) == BUCKETS and all(isinstance(d, str) for d in recorded):
        return recorded
    return None


def _buckets_to_read(
    manifest: dict[str, Any],
    stat_buckets: list[str],
    groups: list[list[str]],
    stats: dict[str, FileStat],
    racy: dict[str, str],
    scan_ns: int,
) -> set[int] | None:
    """The buckets whose rows a scan must read: those whose stats are not the build's, and those of
    the racy files and of files too recent to trust (their stat can stay while their content
    changes); None (all) when the manifest does not keep its buckets' digests."""
    recorded = _recorded_buckets(manifest, "stat_buckets")
    if recorded is None or _recorded_buckets(manifest, "hash_buckets") is None:
        return None
    wanted = {bucket for bucket in range(BUCKETS) if stat_buckets[bucket] != recorded[bucket]}
    wanted.update(_bucket(rel) for rel in racy)
    threshold = scan_ns - RACY_NS
    wanted.update(_bucket(rel) for rel, (_, mtime, _, ctime) in stats.items() if max(mtime, ctime) >= threshold)
    return wanted


def build_base() -> str:
    """One hash of what, besides the data, decides the triples: the sotakg version, the ontology and
    the file size limit. A store is fresh, and an incremental build may go on from its current
    generation, only when that generation was made on the same base."""
    digest = hashlib.sha256()
    digest.update(__version__.encode())
    digest.update(_sha256(ontology_path()).encode())
    # The file size limit decides which files a build can read at all: a store built under another
    # one is not what a build would make now.
    digest.update(str(max_file_bytes()).encode())
    return digest.hexdigest()


def read_manifest(generation: Path | None) -> dict[str, Any]:
    """What the build of ``generation`` recorded (fingerprint, stat digest, counts, triples, lineage).
    Missing or unreadable (a link, a FIFO, not JSON) is an empty record: the store is then rebuilt."""
    if generation is None:
        return {}
    try:
        manifest = json.loads(read_bounded(generation / MANIFEST, 1 << 30))
    except (OSError, ValueError):
        return {}
    return manifest if _well_formed(manifest) else {}


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _bucket_digests(value: Any) -> bool:
    # None: a scan that found nothing changed keeps no buckets of its own (they are read as missing)
    return value is None or (isinstance(value, list) and all(isinstance(item, str) for item in value))


#: What each field of a manifest sotakg writes holds; a field of another kind means the manifest
#: is not one sotakg wrote (edited, or from elsewhere), and it is read as missing: a rebuild.
_MANIFEST_FIELDS: dict[str, Any] = {
    "fingerprint": lambda value: isinstance(value, str),
    "stat_digest": lambda value: isinstance(value, str),
    "base": lambda value: isinstance(value, str),
    "stat_buckets": _bucket_digests,
    "hash_buckets": _bucket_digests,
    "racy": lambda value: isinstance(value, dict),
    "lineage": lambda value: isinstance(value, dict),
    "triples": _count,
    "counts": lambda value: isinstance(value, dict) and all(_count(count) for count in value.values()),
}


def _well_formed(manifest: Any) -> bool:
    """Whether ``manifest`` has the shape ``write_manifest`` gives one (every field it writes, each of
    its kind)."""
    return isinstance(manifest, dict) and all(
        key in manifest and holds(manifest[key]) for key, holds in _MANIFEST_FIELDS.items()
    )


def read_file_table(
    generation: Path | None, buckets: Iterable[int] | None = None
) -> tuple[set[tuple[Any, ...]], dict[str, str]] | None:
    """What the build of ``generation`` read: each file's (path, size, mtime_ns, inode, ctime_ns) as
    one set, and each file's content hash by path (of the files of ``buckets``, or all); None
    without a table."""
    if generation is None:
        return None
    table = SourceTable.open(generation)
    if table is None:
        return None
    try:
        return table.file_stats_and_hashes(buckets)
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
        "stat_buckets": data.stat_buckets,
        "hash_buckets": data.hash_buckets,
        "racy": data.racy,
        "base": build_base(),
        "counts": counts,
        "triples": triples,
        "lineage": lineage or {},
    }
    atomic_write_text(generation / MANIFEST, json.dumps(manifest, indent=1, sort_keys=True))


def remember_stats(generation: Path, data: DataSnapshot) -> None:
    """Files were touched but not changed: keep their new stats, so the next scan reads nothing.
    Only their rows are written (a file of 126,000 rows written again took over a second)."""
    table = SourceTable.open(generation, writable=True)
    if table is None:
        return
    try:
        table.put_files(data.rehashed_rows())
        table.commit()
    finally:
        table.close()
    manifest = read_manifest(generation)
    manifest.update({"stat_digest": data.stat_digest, "stat_buckets": data.stat_buckets, "racy": data.racy})
    atomic_write_text(generation / MANIFEST, json.dumps(manifest, indent=1, sort_keys=True), make_parent=False)


def freshness(data_dir: Path, layout: StoreLayout) -> tuple[bool, DataSnapshot]:
    """Whether the store holds exactly what a build of ``data_dir`` would make now, and the scan
    that says so (a build can go on from it without scanning again)."""
    generation = layout.current_generation()
    manifest = read_manifest(generation)
    scanned = snapshot(data_dir, generation)
    fresh = (
        bool(manifest) and manifest.get("base") == build_base() and scanned.fingerprint == manifest.get("fingerprint")
    )
    return fresh, scanned


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
        " ctime_ns INTEGER, hash TEXT, bucket INTEGER) WITHOUT ROWID",
        "CREATE INDEX files_bucket ON files (bucket)",
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

    def file_stats_and_hashes(
        self, buckets: Iterable[int] | None = None
    ) -> tuple[set[tuple[Any, ...]], dict[str, str]]:
        """Each file's (path relative to the data folder, size, mtime_ns, inode, ctime_ns) as one
        set, and its content hash by path, from one read of the table: of every file (a read of
        126,000 rows costs a fifth of a second), or of the files of ``buckets``."""
        columns = "SELECT rel, size, mtime_ns, inode, ctime_ns, hash FROM files"
        if buckets is None:
            rows = self.connection.execute(columns).fetchall()
        else:
            wanted = sorted(set(buckets))
            rows = []
            for at in range(0, len(wanted), 500):  # within SQLite's limit of bound values
                part = wanted[at : at + 500]
                query = f"{columns} WHERE bucket IN ({', '.join('?' * len(part))})"
                rows.extend(self.connection.execute(query, part).fetchall())
        return set(map(itemgetter(0, 1, 2, 3, 4), rows)), dict(map(itemgetter(0, 5), rows))

    def file_hashes(self) -> dict[str, str]:
        """Every file's content hash, by path relative to the data folder."""
        return dict(self.connection.execute("SELECT rel, hash FROM files"))

    def put_files(self, rows: Iterable[tuple[str, int, int, int, int, str]]) -> None:
        """Rows of (rel, size, mtime_ns, inode, ctime_ns, hash); each file's bucket is added here."""
        self.connection.executemany(
            "INSERT OR REPLACE INTO files VALUES (?, ?, ?, ?, ?, ?, ?)", ((*row, _bucket(row[0])) for row in rows)
        )

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

    def records_with_subjects(self, subjects: Sequence[str]) -> list[tuple[Any, ...]]:
        """The record rows of ``subjects``, read a few hundred at a time (each row's subject at 3)."""
        found: list[tuple[Any, ...]] = []
        for at in range(0, len(subjects), 500):  # within SQLite's limit of bound values
            part = subjects[at : at + 500]
            query = f"SELECT * FROM records WHERE subject IN ({', '.join('?' * len(part))})"
            found.extend(self.connection.execute(query, part))
        return found

    def records_with_id_prefix(self, prefix: str) -> list[tuple[Any, ...]]:
        """The record rows whose id starts with ``prefix`` (a non-empty ASCII text), found on the id index."""
        if not prefix:
            raise ValueError(prefix)
        end = prefix[:-1] + chr(ord(prefix[-1]) + 1)
        query = "SELECT * FROM records WHERE id >= ? AND id < ?"
        return list(self.connection.execute(query, (prefix, end)))

    def commit(self) -> None:
        self.connection.commit()

    def close(self) -> None:
        self.connection.close()


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
    return open_database(layout, hold_current(layout))


def open_database(layout: StoreLayout, generation: Path) -> Store:
    """The database of ``generation`` (of ``layout``), read-only; StoreError naming the store when it
    cannot be opened (RocksDB reports a damaged database as a RuntimeError)."""
    from pyoxigraph import Store

    try:
        return Store.read_only(str(generation / DATABASE))
    except OSError as error:
        raise StoreError(f"cannot open the store at {display_path(layout.path)}: {error}") from None
    except RuntimeError as error:
        raise StoreError(
            f"the store at {display_path(layout.path)} is damaged ({error}); rebuild it with 'sotakg build --force'"
        ) from None
