"""Open the graph for reading: the one place that decides "the store is stale, rebuild it first".

It sits above both the store layout (``store``) and the build (``build``), so neither needs the
other's help to be read, and every command that reads the graph follows the same rule.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from .store import DATABASE, StoreLayout, freshness, hold_current, open_read_only, read_manifest

if TYPE_CHECKING:
    from pyoxigraph import Store

    from .build import DataRead

#: How long a command waits for a build another process is running before it gives up.
BUILD_WAIT_SECONDS = 120.0


def ensure_fresh(data_dir: Path | None, store_path: Path, data: DataRead | None = None) -> None:
    """Rebuild the store when it does not hold what a build of ``data_dir`` would make now.

    ``data`` is the folder as ``read_data`` read it: its fingerprint decides without scanning again,
    and the build reuses its records. Without ``data_dir`` (a store used on its own) nothing is checked.
    """
    if data_dir is None:
        return
    layout = StoreLayout(store_path)
    if data is not None:
        if read_manifest(layout.current_generation()).get("fingerprint") != data.snapshot.fingerprint:
            _build(data_dir, store_path, data=data)
        return
    if layout.current_generation() is None:
        from .build import read_data

        # The first build: read everything before the build takes its lock, so unreadable data
        # leaves no trace (not even the store's folder).
        _build(data_dir, store_path, data=read_data(data_dir, store_path))
        return
    fresh, scanned = freshness(data_dir, layout)
    if not fresh:
        # The build goes on from this scan (when no other build swapped the store in between).
        _build(data_dir, store_path, scanned=scanned)


def _build(data_dir: Path, store_path: Path, **given: Any) -> None:
    # Imported here: a store that is fresh needs neither the build nor the record reader.
    from .build import build

    build(data_dir, store_path, wait_seconds=BUILD_WAIT_SECONDS, **given)


def current_database(data_dir: Path | None, store_path: Path, data: DataRead | None = None) -> Path:
    """The Oxigraph database of the store's current generation, rebuilt first when stale."""
    ensure_fresh(data_dir, store_path, data)
    # Held for this process's lifetime, so a build meanwhile cannot remove it under the query.
    return hold_current(StoreLayout(store_path)) / DATABASE


def open_graph(data_dir: Path, store_path: Path, data: DataRead | None = None, rebuild: bool = True) -> Store:
    """Open the store read-only, building it first when the data changed since the last build."""
    if rebuild:
        ensure_fresh(data_dir, store_path, data)
    return open_read_only(StoreLayout(store_path))
