"""Killing or interrupting `sotakg build` at random points never loses or mixes the store."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sotakg.graph.store import StoreLayout, open_read_only

from .conftest import subprocess_env

ENV = subprocess_env()

PRACTICE = "<https://w3id.org/sotakg/ontology#Practice>"


def practices_in(store_path: Path) -> int:
    # A fresh process, so this test's own reader locks do not keep generations alive.
    code = (
        "import sys; from pathlib import Path; from sotakg.graph.store import StoreLayout, open_read_only;"
        "s = open_read_only(StoreLayout(Path(sys.argv[1])));"
        f"print(next(iter(s.query('SELECT (COUNT(?p) AS ?n) WHERE {{ ?p a {PRACTICE} }}')))['n'].value)"
    )
    command = [sys.executable, "-c", code, str(store_path)]
    out = subprocess.run(command, capture_output=True, text=True, check=True, env=ENV)
    return int(out.stdout)


def sotakg(*args: str, cwd: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "sotakg", *args], cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=ENV
    )


def leftovers(root: Path) -> list[str]:
    """Everything in .sotakg but the link, its current generation and the lock."""
    current = os.readlink(root / ".sotakg" / "store")
    keep = {"store", "store.lock", current}
    return sorted(p.name for p in (root / ".sotakg").iterdir() if p.name not in keep)


@pytest.mark.parametrize("seed", range(3))
def test_random_kills_and_interrupts_never_lose_the_store(workdir, seed):
    rng = random.Random(seed)
    subprocess.run([sys.executable, "-m", "sotakg", "build"], cwd=workdir, check=True, capture_output=True, env=ENV)
    store = workdir / ".sotakg" / "store"
    removed = workdir / "data" / "practices" / "SOTA-437.yaml"
    saved = removed.read_bytes()
    expected = 42
    for _ in range(8):
        # Flip the data between two states, so that every build would change the graph.
        if removed.exists():
            removed.unlink()
        else:
            removed.write_bytes(saved)
        target = 42 if removed.exists() else 41
        before = set(leftovers(workdir))
        process = sotakg("build", cwd=workdir)
        time.sleep(rng.uniform(0.25, 0.8))  # past interpreter start-up, into loading and swapping
        sig = rng.choice([signal.SIGKILL, signal.SIGINT, signal.SIGTERM])
        process.send_signal(sig)
        code = process.wait(timeout=60)
        now = practices_in(store)
        if code == 0:
            assert now == target, "exit 0 but the new graph is not in place"
            expected = target
        elif sig == signal.SIGKILL:
            # Nothing can be held against SIGKILL: killed after the atomic swap, the new graph is in
            # place; before it, the old one. Never anything else.
            assert now in (expected, target)
            expected = now
        else:
            assert now == expected, f"exit {code} after {sig.name} but the graph changed"
        if sig != signal.SIGKILL:
            assert set(leftovers(workdir)) <= before, f"{sig.name} left {leftovers(workdir)}"
    # Whatever a SIGKILL left, the next build cleans up.
    rebuild = [sys.executable, "-m", "sotakg", "build", "--force"]
    subprocess.run(rebuild, cwd=workdir, check=True, capture_output=True, env=ENV)
    assert leftovers(workdir) == []


def test_a_reader_keeps_its_generation_until_it_is_done(workdir):
    subprocess.run([sys.executable, "-m", "sotakg", "build"], cwd=workdir, check=True, capture_output=True, env=ENV)
    reader = open_read_only(StoreLayout(workdir / ".sotakg" / "store"))  # holds the old generation
    (workdir / "data" / "practices" / "SOTA-437.yaml").unlink()
    subprocess.run([sys.executable, "-m", "sotakg", "build"], cwd=workdir, check=True, capture_output=True, env=ENV)
    query = f"SELECT (COUNT(?p) AS ?n) WHERE {{ ?p a {PRACTICE} }}"
    assert next(iter(reader.query(query)))["n"].value == "42"  # the old graph, whole
    assert practices_in(workdir / ".sotakg" / "store") == 41  # new readers see the new one
    assert len(leftovers(workdir)) == 1  # the old generation waits for its reader
    assert os.path.isdir(workdir / ".sotakg" / leftovers(workdir)[0])
