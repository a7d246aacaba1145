"""`sotakg build`: atomic, locked, incremental; commands that read rebuild a stale store."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from sotakg.cli import cli
from sotakg.errors import StoreBusy
from sotakg.graph import build as build_module
from sotakg.graph.build import build
from sotakg.graph.store import MANIFEST, StoreLayout, build_lock, open_read_only

from .conftest import SHIPPED_TRIPLES


def store_files(root: Path) -> list[str]:
    return sorted(p.name for p in (root / ".sotakg").iterdir())


def count_practices(store_path: Path) -> int:
    store = open_read_only(StoreLayout(store_path))
    query = "SELECT (COUNT(?p) AS ?n) WHERE { ?p a <https://w3id.org/sotakg/ontology#Practice> }"
    return int(next(iter(store.query(query)))["n"].value)


def test_build_reports_records_by_kind_triples_and_time(runner, workdir):
    result = runner.invoke(cli, ["build"])
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith(
        f"Built .sotakg/store: 42 practices, 18 papers, 3 ADRs, 1 topic, 1 registry; {SHIPPED_TRIPLES} triples in "
    )
    assert result.stdout.rstrip().endswith(" s.")


def test_second_build_is_a_no_op_and_force_rebuilds(runner, workdir):
    runner.invoke(cli, ["build"])
    again = runner.invoke(cli, ["build"])
    assert (
        again.stdout == f".sotakg/store is up to date ({SHIPPED_TRIPLES} triples); nothing to do (--force rebuilds).\n"
    )
    forced = runner.invoke(cli, ["build", "--force"])
    assert forced.stdout.startswith("Built .sotakg/store")


#: Each field of the manifest edited into something sotakg never writes.
EDITED_MANIFESTS = {
    "triples a string": ("triples", "x"),
    "triples negative": ("triples", -1),
    "triples a boolean": ("triples", True),
    "a count negative": ("counts", {"practice": -5}),
    "counts a list": ("counts", [42]),
    "fingerprint a number": ("fingerprint", 7),
    "buckets a string": ("stat_buckets", "0" * 64),
    "lineage a list": ("lineage", []),
    "base missing": ("base", None),
}


@pytest.mark.parametrize("field, value", EDITED_MANIFESTS.values(), ids=EDITED_MANIFESTS)
def test_a_manifest_sotakg_did_not_write_is_rebuilt_not_believed(runner, workdir, field, value):
    runner.invoke(cli, ["build"])
    manifest_path = StoreLayout(workdir / ".sotakg" / "store").current_generation() / MANIFEST
    manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    if value is None:
        del manifest[field]
    else:
        manifest[field] = value
    manifest_path.write_text(json.dumps(manifest), encoding="utf-8")
    again = runner.invoke(cli, ["build"])
    assert again.exit_code == 0, again.output
    assert again.stdout.startswith(
        f"Built .sotakg/store: 42 practices, 18 papers, 3 ADRs, 1 topic, 1 registry; {SHIPPED_TRIPLES} triples in "
    )


def test_store_is_a_link_to_one_generation_and_nothing_else_is_left(runner, workdir):
    runner.invoke(cli, ["build"])
    runner.invoke(cli, ["build", "--force"])
    names = store_files(workdir)
    assert len(names) == 3, names
    assert names[0] == "store" and names[2] == "store.lock"
    assert names[1].startswith("store.gen-")
    assert os.readlink(workdir / ".sotakg" / "store") == names[1]


def test_touching_a_file_without_changing_it_does_not_rebuild(runner, workdir):
    runner.invoke(cli, ["build"])
    os.utime(workdir / "data" / "practices" / "SOTA-049.yaml")
    assert "up to date" in runner.invoke(cli, ["build"]).stdout


def test_readers_rebuild_when_data_changed(runner, workdir):
    runner.invoke(cli, ["build"])
    (workdir / "data" / "practices" / "SOTA-437.yaml").unlink()
    result = runner.invoke(cli, ["export", "index", "--topic", "distributed-optimization"])
    assert "| SOTA-376 " in result.stdout and "| SOTA-437 " not in result.stdout
    assert count_practices(workdir / ".sotakg" / "store") == 41


@pytest.mark.parametrize(
    "filename, content",
    [
        ("practices/SOTA-049.yaml", "id: SOTA-049\ntitle: [unclosed\nstatus: Active\n"),
        ("practices/SOTA-900.yaml", "id: SOTA-900\nstatus: no\n"),
        ("papers/LIT-999.yaml", b"id: LIT-999\nauthors: M\xfcller\n"),
    ],
)
def test_bad_data_leaves_the_previous_store_intact(runner, workdir, filename, content):
    runner.invoke(cli, ["build"])
    before = store_files(workdir)
    path = workdir / "data" / filename
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content)
    result = runner.invoke(cli, ["build"])
    assert result.exit_code == 1
    assert f"data/{filename}:{3 if 'unclosed' in str(content) else 2}:" in result.output
    assert store_files(workdir) == before
    assert count_practices(workdir / ".sotakg" / "store") == 42


def test_a_failure_while_loading_removes_the_new_generation(runner, workdir, monkeypatch):
    runner.invoke(cli, ["build"])
    before = store_files(workdir)

    def explode(database, anthology):
        database.parent.mkdir(parents=True, exist_ok=True)
        (database.parent / "partial").write_text("half a graph")
        raise KeyboardInterrupt

    monkeypatch.setattr(build_module, "_load_generation", explode)
    with pytest.raises(KeyboardInterrupt):
        build(Path("data"), Path(".sotakg/store"), force=True)
    assert store_files(workdir) == before
    assert count_practices(workdir / ".sotakg" / "store") == 42


def test_leftovers_of_a_killed_build_are_cleaned_by_the_next(runner, workdir):
    runner.invoke(cli, ["build"])
    (workdir / ".sotakg" / "store.gen-dead-1").mkdir()
    os.symlink("store.gen-dead-1", workdir / ".sotakg" / "store.link-1")
    runner.invoke(cli, ["build", "--force"])
    assert len(store_files(workdir)) == 3


def test_a_second_concurrent_build_fails_fast(runner, workdir):
    layout = StoreLayout(Path(".sotakg/store"))
    with build_lock(layout):
        result = runner.invoke(cli, ["build"])
    assert result.exit_code == 1
    assert "another sotakg build is running on .sotakg/store (pid " in result.output
    assert "wait for it to finish" in result.output
    with pytest.raises(StoreBusy):
        with build_lock(layout):
            build(Path("data"), Path(".sotakg/store"))


def test_a_store_path_that_is_not_a_store_is_refused(runner, workdir):
    (workdir / "notastore").mkdir()
    result = runner.invoke(cli, ["--store", "notastore", "build"])
    assert result.exit_code == 1
    assert "notastore exists but is not a sotakg store" in result.output


def test_missing_data_folder_is_a_usage_error(runner, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(cli, ["build"])
    assert result.exit_code == 2
    assert "data folder data does not exist" in result.output
