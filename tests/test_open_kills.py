"""`graph/open.py`: the one rule "the store is stale, rebuild it first", case by case (written to kill
the mutants the mutation run left alive: which branch builds, with what, and which never does)."""

from __future__ import annotations

from pathlib import Path

import pytest

from sotakg.errors import DataError
from sotakg.graph import open as opening
from sotakg.graph.build import build, read_data
from sotakg.graph.store import DATABASE, StoreLayout


@pytest.fixture
def data(data_copy: Path) -> Path:
    return data_copy


@pytest.fixture
def builds(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, object]]:
    """Every build ``open`` asks for: the keyword arguments it passed on (the build still runs)."""
    calls: list[dict[str, object]] = []
    real = opening._build

    def recording(data_dir: Path, store_path: Path, **given: object) -> None:
        calls.append({"data_dir": data_dir, "store_path": store_path, **given})
        real(data_dir, store_path, **given)

    monkeypatch.setattr(opening, "_build", recording)
    return calls


def _edit(data: Path) -> None:
    practice = data / "practices" / "SOTA-017.yaml"
    practice.write_text(practice.read_text(encoding="utf-8").replace("title:", "title: Edited", 1), encoding="utf-8")


def test_without_a_data_folder_nothing_is_checked_or_built(tmp_path, builds):
    store = tmp_path / "store"
    opening.ensure_fresh(None, store)
    assert builds == [] and not store.exists()


def test_a_first_build_reads_the_data_before_it_and_passes_it_on(data, tmp_path, builds):
    store = tmp_path / "store"
    opening.ensure_fresh(data, store)
    assert len(builds) == 1
    assert builds[0]["data_dir"] == data and builds[0]["store_path"] == store
    assert set(builds[0]) == {"data_dir", "store_path", "data"}
    assert StoreLayout(store).current_generation() is not None


def test_unreadable_data_on_a_first_build_leaves_no_store_folder(data, tmp_path, builds):
    (data / "practices" / "SOTA-017.yaml").write_text("id: SOTA-017\ntitle: [unclosed\n", encoding="utf-8")
    store = tmp_path / "sub" / "store"
    with pytest.raises(DataError):
        opening.ensure_fresh(data, store)
    assert builds == [] and not (tmp_path / "sub").exists()


def test_a_fresh_store_is_not_built_again(data, tmp_path, builds):
    store = tmp_path / "store"
    build(data, store)
    before = StoreLayout(store).current_generation()
    opening.ensure_fresh(data, store)
    assert builds == [] and StoreLayout(store).current_generation() == before


def test_a_stale_store_is_built_again_from_the_scan(data, tmp_path, builds):
    store = tmp_path / "store"
    build(data, store)
    before = StoreLayout(store).current_generation()
    _edit(data)
    opening.ensure_fresh(data, store)
    assert len(builds) == 1 and set(builds[0]) == {"data_dir", "store_path", "scanned"}
    assert builds[0]["scanned"] is not None
    assert StoreLayout(store).current_generation() != before


def test_data_already_read_decides_by_its_fingerprint(data, tmp_path, builds):
    store = tmp_path / "store"
    build(data, store)
    opening.ensure_fresh(data, store, data=read_data(data, store))
    assert builds == []  # the same fingerprint: nothing to do
    _edit(data)
    read = read_data(data, store)
    opening.ensure_fresh(data, store, data=read)
    assert len(builds) == 1 and builds[0]["data"] is read and set(builds[0]) == {"data_dir", "store_path", "data"}


def test_the_current_database_is_the_fresh_generations(data, tmp_path, builds):
    store = tmp_path / "store"
    build(data, store)
    _edit(data)
    database = opening.current_database(data, store)
    assert len(builds) == 1
    assert database == StoreLayout(store).current_generation() / DATABASE
    assert database.is_dir()


def test_open_graph_rebuilds_unless_told_not_to(data, tmp_path, builds):
    store = tmp_path / "store"
    build(data, store)
    _edit(data)
    stale = opening.open_graph(data, store, rebuild=False)
    assert builds == []
    assert "Edited" not in str(list(stale.query("SELECT ?t WHERE { ?s <http://purl.org/dc/terms/title> ?t }")))
    del stale
    fresh = opening.open_graph(data, store)
    assert len(builds) == 1
    titles = str(list(fresh.query("SELECT ?t WHERE { ?s <http://purl.org/dc/terms/title> ?t }")))
    assert "Edited" in titles


def test_a_build_waits_for_another_within_the_command_limit(data, tmp_path, monkeypatch):
    seen: list[float] = []

    def fake_build(data_dir: Path, store_path: Path, wait_seconds: float = 0.0, **given: object) -> None:
        seen.append(wait_seconds)

    monkeypatch.setattr("sotakg.graph.build.build", fake_build)
    opening._build(data, tmp_path / "store")
    assert seen == [opening.BUILD_WAIT_SECONDS] and opening.BUILD_WAIT_SECONDS == 120.0
