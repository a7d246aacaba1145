"""``sotakg build``: compile the data folder and the ontology into the embedded Oxigraph store."""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from .records import Anthology, load_anthology
from .store import (
    DATABASE,
    MANIFEST,
    InterruptGuard,
    StoreLayout,
    build_lock,
    content_hashes,
    fingerprint,
    generation_in_use,
    read_manifest,
    remove_path,
    source_files,
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
) -> BuildReport:
    """Build the store from ``data_dir`` unless it is already up to date (``force`` rebuilds anyway).

    The data is read and checked before anything is written; the new graph is loaded into a new
    generation and swapped in atomically, so an error or an interruption leaves the previous store
    as it was. With a ``guard`` installed, an interruption that arrives once the swap has begun is held
    until the build is done. Raises DataError, StoreBusy or StoreError.
    """
    started = time.perf_counter()
    layout = StoreLayout(store_path)
    with build_lock(layout, wait_seconds):
        for leftover in layout.leftovers():
            remove_path(leftover)
        current = layout.current_generation()
        manifest = read_manifest(current)
        files = source_files(data_dir) if data_dir.is_dir() else {}
        hashes = content_hashes(data_dir, files, manifest.get("files", {}))
        print_id = fingerprint(data_dir, hashes)
        if not force and current is not None and manifest.get("fingerprint") == print_id:
            return BuildReport(
                store_path,
                False,
                manifest.get("counts", {}),
                manifest.get("triples", 0),
                time.perf_counter() - started,
            )
        anthology = load_anthology(data_dir)
        generation = layout.new_generation()
        committed = False
        try:
            triples = _load_generation(generation / DATABASE, anthology)
            counts = anthology.counts()
            manifest = {
                "fingerprint": print_id,
                "files": {name: [*files[name], hashes[name]] for name in files},
                "counts": counts,
                "triples": triples,
            }
            (generation / MANIFEST).write_text(json.dumps(manifest, indent=1, sort_keys=True))
            if guard is not None:
                guard.committing = True
            _swap_link(layout, generation)
            committed = True
        finally:
            if not committed:
                remove_path(generation)
        if current is not None and not generation_in_use(current):
            remove_path(current)
    return BuildReport(store_path, True, counts, triples, time.perf_counter() - started)


def _load_generation(database: Path, anthology: Anthology) -> int:
    from pyoxigraph import RdfFormat, Store

    from .rdf import anthology_triples, as_quads
    from .resources import ontology_path

    database.parent.mkdir(parents=True)
    store = Store(str(database))
    try:
        store.bulk_load(path=str(ontology_path()), format=RdfFormat.TURTLE)
        store.bulk_extend(as_quads(anthology_triples(anthology)))
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
