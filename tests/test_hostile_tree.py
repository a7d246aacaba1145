"""Random hostile checkouts (links out, odd names, odd bytes, huge numbers, a forged store) run
through build, validate, why and export site: never a traceback, exit 0, 1 or 2, nothing outside
the checkout changed, and the data folder left as it was."""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import os
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sotakg.cli import cli

from .conftest import SHIPPED_DATA

_cases = itertools.count()

RECORD_FOLDERS = ["practices", "papers", "adrs", "topics"]
ODD_NAMES = ["SOTA-900.yaml", "SOTA 901.yaml", "SOTA-902\n.yaml", "ß-903.yaml", "x" * 200 + ".yaml", "-.yaml", "a.yml"]
ODD_CONTENTS = [
    b"id: SOTA-900\nversion: " + b"9" * 5000 + b"\n",
    b"id: LIT-900\nyear: 33:40\n",
    b'id: SOTA-900\nstatus: "Active> .\\n<x:a> <x:b> <x:c"\n',
    b'id: "SOTA-900\\n"\n',
    b'id: SOTA-900\ntitle: "\\0\\x9b\\r"\n',
    b"id: SOTA-\xd9\xa0\n",
    b"\xff\xfe\x00garbage",
    b"[" * 200,
    b"id: SOTA-900\ntitle: &a x\nsummary: *a\n",
    b"",
]

#: One hostile change to the checkout: (what, a parameter) applied by ``apply``.
changes = st.one_of(
    st.tuples(st.just("link-out"), st.sampled_from(RECORD_FOLDERS), st.sampled_from(["file", "dir", "missing"])),
    st.tuples(
        st.just("odd-file"),
        st.sampled_from(RECORD_FOLDERS + [""]),
        st.sampled_from(ODD_NAMES),
        st.sampled_from(ODD_CONTENTS) | st.binary(max_size=300),
    ),
    st.tuples(st.just("dir-named-like-a-record"), st.sampled_from(RECORD_FOLDERS)),
    st.tuples(st.just("kind-folder"), st.sampled_from(RECORD_FOLDERS), st.sampled_from(["file", "link-out"])),
    st.tuples(st.just("store-link"), st.sampled_from(["..", "../..", "../../outside", "ABS", "store.gen-a-1"])),
    st.tuples(st.just("store-folder-link")),
    st.tuples(st.just("lock-link")),
    st.tuples(st.just("forged-generation")),
    st.tuples(st.just("fifo"), st.sampled_from(RECORD_FOLDERS)),
    st.tuples(st.just("site-link"), st.sampled_from(["index.html", "style.css"])),
)


def apply(change: tuple, project: Path, outside: Path) -> None:
    data = project / "data"
    kind = change[0]
    if kind == "link-out":
        _, folder, target = change
        goal = {"file": outside / "secret.txt", "dir": outside, "missing": outside / "gone" / "x.yaml"}[target]
        with contextlib.suppress(FileExistsError):
            os.symlink(
                os.path.relpath(goal, data / folder) if target == "file" else goal, data / folder / "SOTA-990.yaml"
            )
    elif kind == "odd-file":
        _, folder, name, content = change
        path = data / folder / name if folder else data / name
        if path.parent.is_dir() and not path.is_symlink():
            with contextlib.suppress(IsADirectoryError):
                path.write_bytes(content)
    elif kind == "dir-named-like-a-record":
        (data / change[1] / "SOTA-991.yaml").mkdir(exist_ok=True)
    elif kind == "kind-folder":
        _, folder, how = change
        shutil.rmtree(data / folder, ignore_errors=True)
        if not os.path.lexists(data / folder):
            if how == "file":
                (data / folder).write_text("id: SOTA-001\n")
            else:
                os.symlink(outside, data / folder)
    elif kind == "store-link":
        target = str(outside) if change[1] == "ABS" else change[1]
        store_dir = project / ".sotakg"
        if not store_dir.is_symlink():
            store_dir.mkdir(exist_ok=True)
            if target.startswith("store.gen-") and not os.path.lexists(store_dir / target):
                os.symlink(outside, store_dir / target)
            with contextlib.suppress(FileExistsError):
                os.symlink(target, store_dir / "store")
    elif kind == "store-folder-link":
        if not os.path.lexists(project / ".sotakg"):
            os.symlink(outside, project / ".sotakg")
    elif kind == "lock-link":
        if not (project / ".sotakg").is_symlink():
            (project / ".sotakg").mkdir(exist_ok=True)
            with contextlib.suppress(FileExistsError):
                os.symlink(outside / "secret.txt", project / ".sotakg" / "store.lock")
    elif kind == "forged-generation":
        store_dir = project / ".sotakg"
        if not store_dir.is_symlink() and not os.path.lexists(store_dir / "store"):
            forged = store_dir / "store.gen-f00d-1" / "oxigraph"
            forged.mkdir(parents=True, exist_ok=True)
            (forged.parent / "build.json").write_text('{"fingerprint": "x"}')
            (forged.parent / "sotakg-generation.json").write_text('{"sotakg": "generation", "dev": 1, "ino": 2}')
            os.symlink("store.gen-f00d-1", store_dir / "store")
    elif kind == "fifo":
        with contextlib.suppress(FileExistsError):
            os.mkfifo(data / change[1] / "SOTA-992.yaml")
    elif kind == "site-link":
        site = project / "site"
        site.mkdir(exist_ok=True)
        with contextlib.suppress(FileExistsError):
            os.symlink(outside / "secret.txt", site / change[1])


def digest(root: Path, skip: Path | None = None) -> dict[str, str]:
    """Every entry under ``root`` but ``skip``: links by their target text, files by their hash."""
    found: dict[str, str] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        here = Path(dirpath)
        if skip is not None and here == skip.parent:
            dirnames[:] = [d for d in dirnames if here / d != skip]
            filenames = [f for f in filenames if here / f != skip]
        for name in dirnames + filenames:
            path = here / name
            rel = str(path.relative_to(root))
            if path.is_symlink():
                found[rel] = "link:" + os.readlink(path)
            elif path.is_file():
                found[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
            elif path.is_dir():
                found[rel] = "dir"
            else:
                found[rel] = f"special:{os.lstat(path).st_mode:o}"
    return found


@given(st.lists(changes, min_size=1, max_size=5))
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_a_hostile_checkout_changes_nothing_outside_and_never_crashes(tmp_path_factory, change_list):
    case = tmp_path_factory.mktemp(f"hostile{next(_cases)}")
    outside = case / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("SECRET root:x:0:0\n")
    os.mkfifo(outside / "pipe")  # opened by mistake, it would hang the test: nothing may open it
    project = case / "project"
    shutil.copytree(SHIPPED_DATA, project / "data")
    for change in change_list:
        with contextlib.suppress(OSError):  # a change an earlier one made impossible (a folder now a file)
            apply(change, project, outside)
    around = digest(case, skip=project)
    data_before = digest(project / "data")
    runner = CliRunner()
    with contextlib.chdir(project):
        for command in (["build"], ["validate"], ["why", "SOTA-049"], ["export", "site", "site", "--mermaid"]):
            result = runner.invoke(cli, command)
            assert result.exit_code in (0, 1, 2), (command, result.output)
            assert result.exception is None or isinstance(result.exception, SystemExit), (
                command,
                change_list,
                repr(result.exception),
            )
            assert "Traceback" not in result.output
            assert "SECRET" not in result.output
    assert digest(case, skip=project) == around
    assert digest(project / "data") == data_before
    assert (outside / "secret.txt").read_text() == "SECRET root:x:0:0\n"


@pytest.mark.parametrize("linked", ["data", "sub"])
@pytest.mark.parametrize(
    "command", [["validate"], ["build"], ["export", "index", "--topic", "distributed-optimization"], ["diff", "HEAD"]]
)
def test_a_data_folder_behind_a_link_is_never_read(tmp_path, monkeypatch, linked, command):
    # A checkout can commit its data folder (or a folder above it) as a link to anywhere.
    outside = tmp_path / "outside" / "data"
    shutil.copytree(SHIPPED_DATA, outside)
    secret = outside / "practices" / "SOTA-017.yaml"
    secret.write_text("id: SOTA-017\ntitle: SECRET-TOKEN\nstatus: 17\n", encoding="utf-8")
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    if linked == "data":
        (checkout / "data").symlink_to(outside)
        data = "data"
    else:
        (checkout / "sub").symlink_to(outside.parent)
        data = "sub/data"
    monkeypatch.chdir(checkout)
    result = CliRunner().invoke(cli, ["--data", data, *command])
    assert result.exit_code == 2, result.output
    where = "is a symbolic link" if linked == "data" else "lies behind a symbolic link (sub)"
    assert f"Error: the data folder {data} {where}, and sotakg does not follow it" in result.output
    assert "SECRET" not in result.output
    assert not (checkout / ".sotakg" / "store").exists()


def test_a_data_folder_named_by_its_real_path_is_read(tmp_path, monkeypatch):
    outside = tmp_path / "outside" / "data"
    shutil.copytree(SHIPPED_DATA, outside)
    (tmp_path / "checkout").mkdir()
    monkeypatch.chdir(tmp_path / "checkout")
    result = CliRunner().invoke(cli, ["--data", str(outside), "validate"])
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize(
    "command",
    [
        ["--data", "{here}/content/data", "validate"],  # absolute, through a link inside the checkout
        ["export", "index", "--topic", "distributed-optimization", "-o", "site/pages/index.md"],
        ["export", "index", "--all", "-o", "{here}/site/pages"],
        ["--store", "cache/sub/store", "build"],
    ],
)
def test_no_path_through_a_committed_link_is_read_or_written(tmp_path, monkeypatch, command):
    outside = tmp_path / "outside"
    for folder in ("d", "out", "cache"):
        (outside / folder).mkdir(parents=True)
    shutil.copytree(SHIPPED_DATA, outside / "d" / "data")
    checkout = tmp_path / "checkout"
    shutil.copytree(SHIPPED_DATA, checkout / "data")
    for name, target in (("content", "d"), ("site", "out"), ("cache", "cache")):
        (checkout / name).symlink_to(outside / target)
    monkeypatch.chdir(checkout)
    result = CliRunner().invoke(cli, [part.format(here=checkout) for part in command])
    assert result.exit_code in (1, 2), result.output
    assert "symbolic link" in result.output and "does not follow it" in result.output
    assert sorted(path.name for path in (outside / "out").iterdir()) == []
    assert sorted(path.name for path in (outside / "cache").iterdir()) == []


def test_the_freshness_scan_looks_at_nothing_behind_a_linked_data_folder(tmp_path, monkeypatch):
    # Every command's freshness check stats (and for a changed stat reads) the data files before a
    # build would refuse the folder: it refuses it first.
    from sotakg.errors import LinkedFolder
    from sotakg.graph.store import scan_stats

    shutil.copytree(SHIPPED_DATA, tmp_path / "outside" / "data")
    (tmp_path / "checkout").mkdir()
    (tmp_path / "checkout" / "data").symlink_to(tmp_path / "outside" / "data")
    monkeypatch.chdir(tmp_path / "checkout")
    with pytest.raises(LinkedFolder, match=r"^the data folder data is a symbolic link"):
        scan_stats(Path("data"))
