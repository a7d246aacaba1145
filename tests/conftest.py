"""Shared fixtures: a click runner, a private copy of the shipped data, and a built store."""

from __future__ import annotations

import contextlib
import shutil
import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from click.testing import CliRunner

REPO = Path(__file__).resolve().parent.parent
SHIPPED_DATA = REPO / "data"
FIXTURES = Path(__file__).resolve().parent / "fixtures"
SEED_PAGE = FIXTURES / "distributed-optimization.md"
#: The shipped graph (data and ontology): its triples, and the bytes of its N-Triples as published.
SHIPPED_TRIPLES = 806
SHIPPED_NTRIPLES_BYTES = 113683


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


@pytest.fixture
def data_copy(tmp_path: Path) -> Path:
    """A copy of the shipped data folder that a test may change."""
    target = tmp_path / "data"
    shutil.copytree(SHIPPED_DATA, target)
    return target


@pytest.fixture
def workdir(tmp_path: Path, data_copy: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A working directory holding ``data/`` (a copy of the shipped data); the store goes to ``.sotakg``."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.fixture(scope="session")
def built_store(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(data folder, store path) of the shipped data, built once per test session. Read-only use."""
    from sotakg.graph.build import build

    root = tmp_path_factory.mktemp("shipped")
    data = root / "data"
    shutil.copytree(SHIPPED_DATA, data)
    store = root / ".sotakg" / "store"
    build(data, store)
    return data, store


@pytest.fixture
def shipped_store(built_store: tuple[Path, Path]):
    """The shipped data's store, opened read-only."""
    from sotakg.graph.store import StoreLayout, open_read_only

    return open_read_only(StoreLayout(built_store[1]))


def subprocess_env() -> dict[str, str]:
    """The environment for running this checkout's sotakg in a child process, whatever is installed."""
    import os

    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO / "src"), env.get("PYTHONPATH", "")]))
    return env


@pytest.fixture(autouse=True)
def _restore_interrupt_handlers():
    """`sotakg build` ignores SIGINT/SIGTERM once it has committed (its process is about to exit);
    run in process by a test, that must not leak into the next test."""
    import signal

    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    yield
    for sig, handler in saved.items():
        signal.signal(sig, handler)


GOLDEN = Path(__file__).resolve().parent / "golden"
#: An environment without credentials, for commands that must not send any.
NO_CREDENTIALS = {"SOTAKG_USER": None, "SOTAKG_PASSWORD": None, "SOTAKG_TOKEN": None}


def assert_golden(name: str, text: str) -> None:
    """Compare with tests/golden/NAME; SOTAKG_UPDATE_GOLDEN=1 rewrites the file instead."""
    import os

    path = GOLDEN / name
    if os.environ.get("SOTAKG_UPDATE_GOLDEN"):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(text.encode("utf-8"))
    assert text == path.read_bytes().decode("utf-8")


@pytest.fixture(scope="module")
def backend(built_store: tuple[Path, Path]):
    """A local backend on the shipped data's store."""
    from sotakg.query.sparql import LocalBackend

    data, store = built_store
    return LocalBackend(store, data_dir=data)


def invoke(runner: CliRunner, built_store: tuple[Path, Path], *args: str, **kwargs):
    """Run the CLI on the shipped data's store."""
    from sotakg.cli import cli

    data, store = built_store
    return runner.invoke(cli, ["--data", str(data), "--store", str(store), *args], **kwargs)


@contextmanager
def stand_in_server(
    handle: Callable[[socket.socket], None] | None = None,
) -> Iterator[tuple[int, list[int]]]:
    """A TCP server on a free 127.0.0.1 port: each connection it accepts is counted, then given to
    ``handle`` in a thread of its own (None: closed at once) and closed after. Its port, and a list
    that grows by one per connection."""
    seen: list[int] = []
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(64)
    server.settimeout(0.1)
    stopping = threading.Event()

    def serve(connection: socket.socket) -> None:
        with connection:
            try:
                if handle is not None:
                    handle(connection)
            except OSError:
                pass

    def accept() -> None:
        while not stopping.is_set():
            try:
                connection, _ = server.accept()
            except OSError:
                continue
            seen.append(1)
            if handle is None:
                connection.close()
            else:
                threading.Thread(target=serve, args=(connection,), daemon=True).start()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield server.getsockname()[1], seen
    finally:
        stopping.set()
        thread.join(5)
        server.close()


def counting_listener() -> contextlib.AbstractContextManager[tuple[int, list[int]]]:
    """A TCP listener on a free 127.0.0.1 port that accepts and closes every connection: its port and
    a list that grows by one per connection."""
    return stand_in_server()
