"""Servers for the sharing tests, all on loopback and all stopping by themselves: a real Oxigraph
server, a stub HTTP server with a canned answer, a port that accepts and never answers, a closed port."""

from __future__ import annotations

import http.server
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

LOOPBACK = "127.0.0.1"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind((LOOPBACK, 0))
        return probe.getsockname()[1]


def wait_until_answers(url: str, process: subprocess.Popen | None = None, seconds: float = 20.0) -> None:
    """Poll ``url`` until it answers HTTP 200 (bounded); fail if the process exits first."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise AssertionError(f"the server exited with {process.returncode} before answering")
        try:
            with urllib.request.urlopen(url, timeout=1) as answer:
                if answer.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.05)
    raise AssertionError(f"{url} did not answer within {seconds} s")


def stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
    process.wait()


@contextmanager
def oxigraph(location: Path, *extra: str, read_only: bool = False) -> Iterator[str]:
    """A real Oxigraph server (read-write unless ``read_only``) on a free loopback port: its base URL."""
    from sotakg.server.serve import child_setup, find_oxigraph

    port = free_port()
    mode = "serve-read-only" if read_only else "serve"
    command = [find_oxigraph(), mode, "--location", str(location), "--bind", f"{LOOPBACK}:{port}", *extra]
    process = subprocess.Popen(
        command,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        preexec_fn=child_setup(),  # SIGTERM stops it even if this process ignores SIGTERM now
    )
    try:
        base = f"http://{LOOPBACK}:{port}"
        wait_until_answers(base + "/query?query=ASK%7B%7D", process)
        yield base
    finally:
        stop(process)


@dataclass
class Seen:
    """A request a stub server received."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class Stub:
    """What a stub server answers, and what it was asked."""

    status: int = 200
    body: bytes = b""
    content_type: str = "text/plain"
    headers: dict[str, str] = field(default_factory=dict)
    content_length: int | None = None  # announce another length than the body's (a cut-short answer)
    drip_seconds: float | None = None  # send the body one byte at a time, this far apart
    requests: list[Seen] = field(default_factory=list)
    url: str = ""


@contextmanager
def stub_server(stub: Stub) -> Iterator[Stub]:
    """An HTTP server on a free loopback port answering every request as ``stub`` says."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def _answer(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            stub.requests.append(Seen(self.command, self.path, dict(self.headers), body))
            self.send_response(stub.status)
            self.send_header("Content-Type", stub.content_type)
            size = stub.content_length if stub.content_length is not None else len(stub.body)
            if stub.drip_seconds is None:
                self.send_header("Content-Length", str(size))
            for name, value in stub.headers.items():
                self.send_header(name, value)
            self.end_headers()
            if stub.drip_seconds is None:
                self.wfile.write(stub.body)
                return
            for byte in stub.body[:200]:  # bounded: at most 200 drips
                try:
                    self.wfile.write(bytes([byte]))
                    self.wfile.flush()
                except OSError:
                    return
                time.sleep(stub.drip_seconds)

        do_GET = do_POST = do_PUT = do_DELETE = _answer

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer((LOOPBACK, 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    stub.url = f"http://{LOOPBACK}:{server.server_address[1]}"
    try:
        yield stub
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


@contextmanager
def silent_port() -> Iterator[int]:
    """A loopback port that accepts connections (the kernel does, from its backlog) and never answers."""
    with socket.socket() as listener:
        listener.bind((LOOPBACK, 0))
        listener.listen(16)
        yield listener.getsockname()[1]


def closed_port() -> int:
    """A loopback port nothing listens on."""
    return free_port()
