"""Servers for the sharing tests, all on loopback and all stopping by themselves: a real Oxigraph
server, a real Virtuoso (in a temporary folder, stopped by its pid), a stub HTTP server with a canned
or scripted answer (Digest authentication among them), a port that accepts and never answers, a
closed port."""

from __future__ import annotations

import http.server
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
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
    #: Answer each request as this says, (status, headers, body), instead of the fields above.
    respond: Callable[[Seen], tuple[int, dict[str, str], bytes]] | None = None
    host: str = LOOPBACK


@contextmanager
def stub_server(stub: Stub) -> Iterator[Stub]:
    """An HTTP server on a free loopback port answering every request as ``stub`` says."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def _answer(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            seen = Seen(self.command, self.path, dict(self.headers), body)
            stub.requests.append(seen)
            if stub.respond is not None:
                status, headers, answer = stub.respond(seen)
                self.send_response(status)
                for name, value in {"Content-Type": "text/plain", **headers}.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(answer)
                return
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

        do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = _answer

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer((stub.host, 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    stub.url = f"http://{stub.host}:{server.server_address[1]}"
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


# ------------------------------------------------------------------------------------------ Digest


def digest_response(method: str, uri: str, fields: dict[str, str], user: str, password: str, realm: str) -> str:
    """RFC 7616's response for qop=auth with MD5, computed here independently of sotakg's code."""
    import hashlib

    def md5(text: str) -> str:
        return hashlib.md5(text.encode()).hexdigest()

    secret = md5(f"{user}:{realm}:{password}")
    return md5(f"{secret}:{fields['nonce']}:{fields['nc']}:{fields['cnonce']}:auth:{md5(f'{method}:{uri}')}")


def digest_fields(header: str) -> dict[str, str]:
    import re

    return {
        key: value.strip('"') for key, value in re.findall(r'(\w+)=("[^"]*"|[^,\s]+)', header.removeprefix("Digest "))
    }


def digest_guard(user: str, password: str, then: Callable[[Seen], tuple[int, dict[str, str], bytes]]):
    """A ``Stub.respond`` that asks for Digest (as Virtuoso does: no Basic offered), checks the answer
    to its challenge, and passes requests that answer it right on to ``then``."""
    realm, nonce = "SPARQL", "5f1a8b0c0d"
    challenge = f'Digest realm="{realm}", nonce="{nonce}", opaque="0pq", qop="auth", algorithm="MD5"'

    def respond(seen: Seen) -> tuple[int, dict[str, str], bytes]:
        header = seen.headers.get("Authorization", "")
        if header.startswith("Digest "):
            fields = digest_fields(header)
            expected = digest_response(seen.method, seen.path, fields, user, password, realm)
            if (
                fields.get("username") == user
                and fields.get("nonce") == nonce
                and fields.get("uri") == seen.path
                and fields.get("opaque") == "0pq"
                and fields.get("response") == expected
            ):
                return then(seen)
        return 401, {"WWW-Authenticate": challenge, "Content-Type": "text/html"}, b"<html>Unauthorized</html>"

    return respond


# ------------------------------------------------------------------------------------------ Virtuoso

VIRTUOSO_INSTALL = "apt-get install -y virtuoso-opensource"
VIRTUOSO_USER, VIRTUOSO_PASSWORD = "sotakg", "publish-pw"
VIRTUOSO_INI = """\
[Database]
DatabaseFile       = {db}/virtuoso.db
ErrorLogFile       = {db}/virtuoso.log
LockFile           = {db}/virtuoso.lck
TransactionFile    = {db}/virtuoso.trx
xa_persistent_file = {db}/virtuoso.pxa
ErrorLogLevel      = 7
FileExtend         = 200
MaxCheckpointRemap = 2000
Striping           = 0
TempStorage        = TempDatabase

[TempDatabase]
DatabaseFile       = {db}/virtuoso-temp.db
TransactionFile    = {db}/virtuoso-temp.trx
MaxCheckpointRemap = 2000
Striping           = 0

[Parameters]
ServerPort           = 127.0.0.1:{sql_port}
DisableUnixSocket    = 1
MaxClientConnections = 8
CheckpointInterval   = 0
NumberOfBuffers      = 10000
MaxDirtyBuffers      = 6000
DirsAllowed          = {db}
ThreadsPerQuery      = 2
AsyncQueueMaxThreads = 4

[HTTPServer]
ServerPort           = 127.0.0.1:{http_port}
ServerRoot           = {db}
MaxClientConnections = 8
ServerThreads        = 8
EnabledDavVSP        = 0

[SPARQL]
; Virtuoso cuts SELECT answers at this many rows without saying so: well above any answer here.
ResultSetMaxRows      = 1000000
MaxQueryExecutionTime = 60
"""
#: What publishing needs: an account of its own, allowed SPARQL Update and writing every graph; the
#: anonymous SPARQL user may only read.
VIRTUOSO_GRANTS = (
    f"DB.DBA.USER_CREATE('{VIRTUOSO_USER}', '{VIRTUOSO_PASSWORD}'); "
    f'GRANT SPARQL_UPDATE TO "{VIRTUOSO_USER}"; '
    f"DB.DBA.RDF_DEFAULT_USER_PERMS_SET('{VIRTUOSO_USER}', 3); "
    "DB.DBA.RDF_DEFAULT_USER_PERMS_SET('nobody', 1);"
)


@dataclass(frozen=True)
class Virtuoso:
    """A running Virtuoso: its HTTP base URL and the account that may publish."""

    base: str
    user: str = VIRTUOSO_USER
    password: str = VIRTUOSO_PASSWORD


def virtuoso_missing() -> str | None:
    """Why Virtuoso cannot run here (with the command that installs it), or None."""
    import shutil

    missing = [name for name in ("virtuoso-t", "isql-vt") if shutil.which(name) is None]
    if missing:
        return f"{' and '.join(missing)} not installed; install Virtuoso 7 with: {VIRTUOSO_INSTALL}"
    return None


@contextmanager
def logged_server(command: list[str], folder: Path, url: str, seconds: float, log: Path) -> Iterator[None]:
    """A server process started in ``folder`` in a session of its own, its output to
    ``folder/stdout.log``, answering ``url`` within ``seconds`` (else the tail of ``log`` is shown);
    stopped by its pid at the end."""
    output = (folder / "stdout.log").open("wb")
    process = subprocess.Popen(
        command, cwd=folder, stdin=subprocess.DEVNULL, stdout=output, stderr=subprocess.STDOUT, start_new_session=True
    )
    try:
        try:
            wait_until_answers(url, process, seconds)
        except AssertionError as error:
            tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
            raise AssertionError(f"{error}\n{tail}") from None
        yield
    finally:
        stop(process)
        output.close()


@contextmanager
def virtuoso(folder: Path, seconds: float = 90.0) -> Iterator[Virtuoso]:
    """A real Virtuoso 7 in ``folder`` on free loopback ports, with the publishing account granted by
    ``isql-vt``; stopped by its pid at the end."""
    folder.mkdir(parents=True, exist_ok=True)
    sql_port, http_port = free_port(), free_port()
    ini = folder / "virtuoso.ini"
    ini.write_text(VIRTUOSO_INI.format(db=folder, sql_port=sql_port, http_port=http_port), encoding="utf-8")
    base = f"http://{LOOPBACK}:{http_port}"
    command = ["virtuoso-t", "+foreground", "+configfile", str(ini)]
    with logged_server(command, folder, base + "/sparql?query=ASK%7B%7D", seconds, folder / "virtuoso.log"):
        subprocess.run(
            ["isql-vt", f"{LOOPBACK}:{sql_port}", "dba", "dba", f"exec={VIRTUOSO_GRANTS}"],
            check=True,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            timeout=60,
        )
        yield Virtuoso(base)


# ------------------------------------------------------------------------------------------- Jena ARQ

JENA_INSTALL = "apt-get install -y libapache-jena-java default-jdk-headless"
JENA_JARS = Path("/usr/share/java")
JENA_SOURCE = Path(__file__).with_name("jena") / "ArqServer.java"


def jena_missing() -> str | None:
    """Why Jena ARQ cannot run here (with the command that installs it), or None."""
    import shutil

    missing = [name for name in ("java", "javac") if shutil.which(name) is None]
    if not (JENA_JARS / "jena-arq.jar").exists():
        missing.append("Jena (libapache-jena-java)")
    if missing:
        return f"{' and '.join(missing)} not installed; install them with: {JENA_INSTALL}"
    return None


def _jena_resources(folder: Path) -> Path:
    """Debian's jena-core moves Jena's inner copy of Xerces from ``org.apache.jena.ext.xerces`` to
    ``xerces`` but leaves its message files behind, and without them Jena cannot start (an "internal
    error" while it builds the XSD types): copy them to where the moved classes look for them."""
    import zipfile

    target = folder / "resources"
    prefix = "org/apache/jena/ext/xerces/"
    with zipfile.ZipFile(JENA_JARS / "jena-core.jar") as jar:
        for name in jar.namelist():
            if name.startswith(prefix) and name.endswith(".properties"):
                path = target / "xerces" / name.removeprefix(prefix)
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(jar.read(name))
    return target


@contextmanager
def jena(folder: Path) -> Iterator[str]:
    """Jena ARQ behind Fuseki's dataset endpoints (``tests/jena/ArqServer.java``, compiled into
    ``folder``) on a free loopback port: its base URL, the dataset at ``BASE/ds``."""
    folder.mkdir(parents=True, exist_ok=True)
    classpath = f"{JENA_JARS}/*"
    subprocess.run(
        ["javac", "-nowarn", "-cp", classpath, "-d", str(folder), str(JENA_SOURCE)],
        check=True,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=120,
    )
    port = free_port()
    base = f"http://{LOOPBACK}:{port}"
    command = ["java", "-Xmx512m", "-cp", f"{folder}:{_jena_resources(folder)}:{classpath}", "ArqServer", str(port)]
    with logged_server(command, folder, base + "/ds/query?query=ASK%7B%7D", 60, folder / "stdout.log"):
        yield base
