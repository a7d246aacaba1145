"""``sotakg build``: compile the data folder and the ontology into the embedded Oxigraph store."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ..records.sources import max_file_bytes, read_bounded

if TYPE_CHECKING:
    from ..records.schema import Anthology
from .store import (
    DATABASE,
    DataSnapshot,
    InterruptGuard,
    StoreLayout,
    build_lock,
    generation_in_use,
    read_manifest,
    remove_path,
    snapshot,
    write_manifest,
)


@dataclass
class BuildReport:
    """What a build did."""

    store: Path
    rebuilt: bool
    counts: dict[str, int] = field(default_factory=dict)
    triples: int = 0
    seconds: float = 0.0


def build(
    data_dir: Path,
    store_path: Path,
    force: bool = False,
    wait_seconds: float = 0.0,
    guard: InterruptGuard | None = None,
    data: DataRead | None = None,
    progress: Callable[[int, int, str], None] | None = None,
) -> BuildReport:
    """Build the store from ``data_dir`` unless it is already up to date (``force`` rebuilds anyway).

    The data is read and checked before anything is written; the new graph is loaded into a new
    generation and swapped in atomically, so an error or an interruption leaves the previous store
    as it was. With a ``guard`` installed, an interruption that arrives once the swap has begun is held
    until the build is done. ``data`` is the folder as ``read_data`` already read it, so a caller that
    needs the records too reads each file once. ``progress(done, total, step)`` hears of each step of
    a rebuild. Raises DataError, StoreBusy or StoreError.
    """
    step = progress or (lambda done, total, name: None)
    started = time.perf_counter()
    layout = StoreLayout(store_path)
    with build_lock(layout, wait_seconds):
        for leftover in layout.leftovers():
            remove_path(leftover)
        current = layout.current_generation()
        manifest = read_manifest(current)
        scanned = data.snapshot if data is not None else snapshot(data_dir, current, need_hashes=force)
        if not force and current is not None and manifest.get("fingerprint") == scanned.fingerprint:
            if scanned.hashes and scanned.stat_digest != manifest.get("stat_digest"):
                # Files were touched but not changed: remember their new times.
                write_manifest(current, scanned, manifest.get("counts", {}), manifest.get("triples", 0))
            return BuildReport(
                store_path,
                False,
                manifest.get("counts", {}),
                manifest.get("triples", 0),
                time.perf_counter() - started,
            )
        step(0, 3, "reading the records")
        anthology = data.anthology if data is not None else _read_records(data_dir, scanned)
        generation = layout.new_generation()
        committed = False
        try:
            step(1, 3, "loading the graph")
            triples = _load_generation(generation / DATABASE, anthology)
            step(2, 3, "swapping it in")
            counts = anthology.counts()
            write_manifest(generation, scanned, counts, triples)
            if guard is not None:
                guard.committing = True
            _swap_link(layout, generation)
            committed = True
        finally:
            if not committed:
                remove_path(generation)
        if current is not None and not generation_in_use(current):
            remove_path(current)
        step(3, 3, "built")
    return BuildReport(store_path, True, counts, triples, time.perf_counter() - started)


@dataclass
class DataRead:
    """A data folder read once: its snapshot (with every file's hash) and its records."""

    snapshot: DataSnapshot
    anthology: Anthology


def read_data(data_dir: Path, store_path: Path) -> DataRead:
    """Read every record file of ``data_dir`` once, for the records and for the store's freshness.

    Files whose size and time match the store's current build keep their recorded hash; the others
    are hashed from the bytes read for the records. Raises DataError (every problem found) or
    DataFolderMissing."""
    scanned = snapshot(data_dir, StoreLayout(store_path).current_generation(), need_hashes=True)
    return DataRead(scanned, _read_records(data_dir, scanned))


def _read_records(data_dir: Path, scanned: DataSnapshot) -> Anthology:
    from ..records.schema import load_anthology

    return load_anthology(data_dir, scanned.sources, _read_all(scanned))


def _read_all(data: DataSnapshot) -> dict[str, bytes]:
    """The bytes of every record file within the size limit (those read for hashing are reused);
    a file that cannot be read is left out here and reported by read_record, naming it."""
    contents = dict(data.contents)
    limit = max_file_bytes()
    for source in data.sources:
        if source.relative not in contents and source.kind is not None:
            with contextlib.suppress(OSError):
                contents[source.relative] = read_bounded(source.path, limit)
    return contents


def _load_generation(database: Path, anthology: Anthology) -> int:
    from pyoxigraph import RdfFormat, Store

    from ..resources import ontology_path
    from .rdf import anthology_ntriples

    database.parent.mkdir(parents=True)
    store = Store(str(database))
    try:
        store.bulk_load(path=str(ontology_path()), format=RdfFormat.TURTLE)
        store.bulk_load(anthology_ntriples(anthology), format=RdfFormat.N_TRIPLES)
        store.flush()
        return len(store)
    finally:
        # Close the database now, even on an interruption, so the caller can remove its directory.
        del store


def _swap_link(layout: StoreLayout, generation: Path) -> None:
    link = layout.path.with_name(f"{layout.path.name}.link-{os.getpid()}")
    remove_path(link)
    os.symlink(generation.name, link)
    os.replace(link, layout.path)
