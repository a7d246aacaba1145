"""Killing or interrupting `sotakg build` at each of its phases never loses or mixes the store, and
readers never fail while builds replace it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
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


def leftovers(root: Path) -> list[str]:
    """Everything in .sotakg but the link, its current generation and the lock."""
    current = os.readlink(root / ".sotakg" / "store")
    keep = {"store", "store.lock", current}
    return sorted(p.name for p in (root / ".sotakg").iterdir() if p.name not in keep)


def wait_for(path: Path, process: subprocess.Popen, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while not path.exists():
        if process.poll() is not None:
            raise AssertionError(f"the build exited ({process.returncode}) before its pause: {process.stderr.read()}")
        if time.monotonic() > deadline:
            process.kill()
            raise AssertionError("the build never reached its pause point")
        time.sleep(0.01)


def build_store(workdir: Path, *extra: str) -> None:
    subprocess.run(
        [sys.executable, "-m", "sotakg", "build", *extra],
        cwd=workdir,
        check=True,
        capture_output=True,
        env=ENV,
        timeout=120,
    )


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGKILL], ids=lambda s: s.name)
@pytest.mark.parametrize("phase", ["reading", "loading", "committing", "swapping"])
def test_random_kills_and_interrupts_never_lose_the_store(workdir, phase, sig):
    """The build pauses at ``phase`` (SOTAKG_TEST_PAUSE) and the signal lands there, on purpose."""
    build_store(workdir)
    store = workdir / ".sotakg" / "store"
    old_generation = os.readlink(store)
    (workdir / "data" / "practices" / "SOTA-437.yaml").unlink()  # the new build would hold 41 practices
    before = set(leftovers(workdir))
    marker = workdir / "paused"
    env = {**ENV, "SOTAKG_TEST_PAUSE": phase, "SOTAKG_TEST_PAUSE_MARKER": str(marker)}
    process = subprocess.Popen(
        [sys.executable, "-m", "sotakg", "build"], cwd=workdir, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
    )
    try:
        wait_for(marker, process)
        assert marker.read_text() == phase
        assert os.readlink(store) == old_generation, "the signal must arrive before the link is swapped"
        process.send_signal(sig)
        time.sleep(0.05)
        marker.unlink()  # let a build that holds the signal go on
        code = process.wait(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    if phase == "swapping" and sig != signal.SIGKILL:
        # Past the commit point the signal is held: the build finishes, says so, and the new graph is in.
        assert code == 0, process.stderr.read()
        assert practices_in(store) == 41
    else:
        assert code != 0
        assert os.readlink(store) == old_generation
        assert practices_in(store) == 42
    if sig != signal.SIGKILL:
        # An interrupted build removes the generation it had begun (removing that clean-up fails this).
        assert set(leftovers(workdir)) <= before, f"{sig.name} at {phase} left {leftovers(workdir)}"
    # Whatever a SIGKILL left, the next build cleans up.
    build_store(workdir, "--force")
    assert leftovers(workdir) == []
    assert practices_in(store) == 41


def test_readers_never_fail_while_builds_replace_the_store(workdir):
    """4 reader loops of query and why against 20 forced rebuilds: every read succeeds, whole."""
    build_store(workdir)
    stop = workdir / "stop"
    reader = textwrap.dedent(
        """
        import os, sys, time
        from click.testing import CliRunner
        from sotakg.cli import cli
        command = sys.argv[1:]
        runner = CliRunner()
        runs = failures = 0
        deadline = time.monotonic() + 300
        while not os.path.exists("stop") and time.monotonic() < deadline:
            out = runner.invoke(cli, command)  # one long-lived reader, as the console or a server is
            runs += 1
            whole = "SOTA-0" in out.output if command[0] == "why" else "ADR-" in out.output
            if out.exit_code != 0 or not whole:
                failures += 1
                sys.stderr.write(out.output[-2000:])
        print(runs, failures)
        """
    )
    commands = [["query", "adrs"], ["why", "SOTA-049"], ["query", "adrs", "-f", "csv"], ["why", "SOTA-048"]]
    readers = [
        subprocess.Popen(
            [sys.executable, "-c", reader, *command],
            cwd=workdir,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=ENV,
        )
        for command in commands
    ]
    try:
        for _ in range(20):
            build_store(workdir, "--force")
    finally:
        stop.write_text("")
    results = []
    for process in readers:
        out, err = process.communicate(timeout=120)
        runs, failures = map(int, out.split())
        results.append((runs, failures, err))
    assert all(runs > 0 for runs, _, _ in results), results
    assert [failures for _, failures, _ in results] == [0, 0, 0, 0], [err for _, _, err in results]
    build_store(workdir)
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


def test_a_query_backend_holds_the_generation_it_queries(workdir):
    from sotakg.query.sparql import LocalBackend

    build_store(workdir)
    store = workdir / ".sotakg" / "store"
    backend = LocalBackend(store, data_dir=None)  # no freshness check: this process only reads
    query = f"SELECT (COUNT(?p) AS ?n) WHERE {{ ?p a {PRACTICE} }}"
    assert backend.run(query).rows[0][0].value == "42"  # holds the generation it opened
    held = os.readlink(store)
    (workdir / "data" / "practices" / "SOTA-437.yaml").unlink()
    build_store(workdir)
    assert os.readlink(store) != held
    assert (workdir / ".sotakg" / held / "oxigraph").is_dir(), "a build removed a generation in use"
    assert leftovers(workdir) == [held]
    assert backend.run(query).rows[0][0].value == "41"  # the next query opens the new one
