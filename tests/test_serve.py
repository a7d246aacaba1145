"""`sotakg serve`: the Oxigraph server on the store, read-only, on loopback; `--get` for scripts; signals
stop it cleanly; the served generation outlives concurrent builds; the server never outlives sotakg."""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from sotakg.cli import cli
from sotakg.errors import ServeError
from sotakg.graph.store import StoreLayout
from sotakg.query.canned import load_canned, run_canned
from sotakg.query.remote import RemoteBackend
from sotakg.query.sparql import LocalBackend
from sotakg.server import guard, serve

from .conftest import SHIPPED_DATA, SHIPPED_TRIPLES, counting_listener, invoke, subprocess_env
from .servers import Stub, free_port, stop, stub_server, wait_until_answers

ASK = "/query?query=ASK%7B%7D"
COUNT = "/query?query=" + urllib.parse.quote("SELECT (COUNT(*) AS ?n) WHERE { ?s ?p ?o }")


# ------------------------------------------------------------------------------------------ --get


def test_get_answers_one_request(runner, built_store):
    result = invoke(runner, built_store, "serve", "--get", ASK)
    assert result.exit_code == 0, result.output
    assert result.stdout == '{"head":{},"boolean":true}'
    counted = invoke(runner, built_store, "serve", "--get", COUNT)
    assert counted.exit_code == 0, counted.output
    assert json.loads(counted.stdout)["results"]["bindings"][0]["n"]["value"] == str(SHIPPED_TRIPLES)


def test_get_exits_1_on_other_statuses(runner, built_store):
    missing = invoke(runner, built_store, "serve", "--get", "/nothing")
    assert missing.exit_code == 1
    assert missing.stdout == ""
    assert missing.stderr == "Error: GET /nothing: HTTP 404 Not Found: GET /nothing is not supported by this server\n"
    broken = invoke(runner, built_store, "serve", "--get", "/query?query=ASK")
    assert broken.exit_code == 1
    # a query the guard lets through and the engine refuses: the engine's own words
    assert broken.stderr == (
        'Error: GET /query?query=ASK: HTTP 400 Bad Request: error at 1:4: expected one of "{", [_]\n'
    )


#: A query whose answer comes slowly: a product of all triples three times over, few rows kept.
SLOW_CONSTRUCT = "/query?query=" + urllib.parse.quote(
    "CONSTRUCT { ?a <http://x/p> ?g } WHERE { ?a ?b ?c . ?d ?e ?f . ?g ?h ?i . "
    "FILTER(STRLEN(STR(?c)) + STRLEN(STR(?f)) + STRLEN(STR(?i)) = 150) }"
)


def test_get_past_its_timeout_is_an_error_not_a_cut_answer(runner, built_store):
    """The guard stops the query at --timeout: the engine, which would stop it itself and write its
    error into an N-Triples answer that then ends as if whole, only does so later."""
    started = time.monotonic()
    result = invoke(runner, built_store, "serve", "--timeout", "2", "--get", SLOW_CONSTRUCT)
    assert result.exit_code == 1, result.output
    assert "cancelled" not in result.stdout
    assert result.stdout == "" or not result.stdout.endswith("\n")  # nothing, or visibly short
    assert "the query ran longer than 2 s (--timeout of sotakg serve) and was stopped" in result.stderr or (
        "cut short" in result.stderr
    )
    assert time.monotonic() - started < 2 + serve.ENGINE_BACKSTOP_SECONDS


def test_get_needs_a_path(runner, built_store):
    result = invoke(runner, built_store, "serve", "--get", "query?query=ASK%7B%7D")
    assert result.exit_code == 2
    assert "--get takes a path starting with /, such as /query?query=ASK%7B%7D, not 'query?query=ASK%7B%7D'" in (
        result.stderr
    )


def test_get_builds_a_stale_store_first(runner, data_copy, tmp_path):
    result = runner.invoke(cli, ["--data", str(data_copy), "--store", str(tmp_path / "s"), "serve", "--get", COUNT])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["results"]["bindings"][0]["n"]["value"] == str(SHIPPED_TRIPLES)


# ------------------------------------------------------------------------------------------ the binary


def test_a_missing_server_names_the_install_command(monkeypatch, tmp_path):
    monkeypatch.delenv("SOTAKG_OXIGRAPH", raising=False)
    monkeypatch.setattr(serve.sysconfig, "get_path", lambda name: str(tmp_path))
    monkeypatch.setattr(serve.sys, "executable", str(tmp_path / "python"))
    monkeypatch.setattr(serve.shutil, "which", lambda name: None)
    with pytest.raises(ServeError) as caught:
        serve.find_oxigraph()
    assert str(caught.value) == (
        "the Oxigraph server is not installed (sotakg depends on the oxigraph package); install it with: "
        "pip install oxigraph, or point SOTAKG_OXIGRAPH at an oxigraph binary"
    )


def test_a_missing_server_fails_the_command(runner, built_store, tmp_path):
    result = runner.invoke(
        cli,
        ["--data", str(built_store[0]), "--store", str(built_store[1]), "serve", "--get", ASK],
        env={"SOTAKG_OXIGRAPH": str(tmp_path / "no-oxigraph")},
    )
    assert result.exit_code == 1
    assert (
        result.stderr == f"Error: SOTAKG_OXIGRAPH names {tmp_path / 'no-oxigraph'}, which is not an executable file\n"
    )


def test_the_installed_server_is_found():
    found = serve.find_oxigraph({})
    assert Path(found).name == "oxigraph" and os.access(found, os.X_OK)


# ------------------------------------------------------------------------------------------ addresses


def test_loopback_is_quiet_and_anything_else_warns():
    for host in ("127.0.0.1", "localhost", "::1", "[::1]", "127.0.0.2"):
        assert serve.bind_warning(host, 7878) is None, host
    assert serve.bind_warning("0.0.0.0", 7878) == (
        "warning: listening on every network interface (port 7878) lets anyone who can reach this machine query "
        "the graph; the server has no authentication. Leave out --host to serve on 127.0.0.1 only."
    )
    assert serve.bind_warning("192.168.1.20", 80).startswith("warning: listening on 192.168.1.20 (port 80) lets")


def test_addresses():
    assert serve.bind_address("127.0.0.1", 7878) == "127.0.0.1:7878"
    assert serve.bind_address("::1", 7878) == "[::1]:7878"
    assert serve.base_url("0.0.0.0", 80) == "http://127.0.0.1:80"
    assert serve.base_url("::", 80) == "http://[::1]:80"


def test_port_zero_is_refused(runner, built_store):
    result = invoke(runner, built_store, "serve", "--port", "0")
    assert result.exit_code == 2
    assert "0 is not in the range 1<=x<=65535" in result.stderr


def test_a_port_in_use_is_named():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        with pytest.raises(ServeError) as caught:
            serve.check_port_free("127.0.0.1", port)
    assert str(caught.value) == f"port {port} on 127.0.0.1 is in use (another server?); choose another with --port"


# ------------------------------------------------------------------------------------------ serving


class Served:
    """A `sotakg serve` child process and where it listens."""

    def __init__(self, process: subprocess.Popen, base: str, data: Path, store: Path, banner: str):
        self.process, self.base, self.data, self.store, self.banner = process, base, data, store, banner

    def finish(self, signum: int) -> tuple[int, str, str]:
        """Send ``signum``; the exit status, everything printed on standard output, and standard error."""
        self.process.send_signal(signum)
        out, err = self.process.communicate(timeout=20)
        return self.process.returncode, self.banner + out, err


@pytest.fixture
def served(data_copy: Path, tmp_path: Path) -> Iterator[Served]:
    """`sotakg serve` on a store of its own, on a free loopback port, answering."""
    with serving(data_copy, tmp_path / "store") as running:
        yield running


@contextmanager
def serving(data: Path, store: Path, *options: str) -> Iterator[Served]:
    """`sotakg serve` with ``options`` on a free loopback port, answering; stopped when the block ends."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "sotakg", "--data", str(data), "--store", str(store), "serve", "--port", str(port)]
        + list(options),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=subprocess_env(),
    )
    try:
        banner = read_banner(process)
        base = f"http://127.0.0.1:{port}"
        wait_until_answers(base + ASK, process)
        yield Served(process, base, data, store, banner)
    finally:
        stop(process)
        if process.stdout:
            process.stdout.close()
        if process.stderr:
            process.stderr.close()


def read_banner(process: subprocess.Popen, seconds: float = 30.0) -> str:
    """The lines `sotakg serve` prints once it answers (the process is killed if they do not come)."""
    lines: list[str] = []
    timer = threading.Timer(seconds, process.kill)
    timer.start()
    try:
        assert process.stdout is not None
        for line in process.stdout:
            lines.append(line)
            if line == "Press Ctrl-C to stop.\n":
                break
    finally:
        timer.cancel()
    return "".join(lines)


def status_of(method: str, url: str, body: bytes | None = None, content_type: str | None = None) -> int:
    headers = {"Content-Type": content_type} if content_type else {}
    request = urllib.request.Request(url, data=body, method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status
    except urllib.error.HTTPError as error:
        return error.code


def answers(base: str) -> bool:
    try:
        with urllib.request.urlopen(base + ASK, timeout=2) as answer:
            return answer.status == 200
    except (urllib.error.URLError, OSError):
        return False


def test_serve_refuses_every_write(served):
    triple = b"<http://x/a> <http://x/b> <http://x/c> ."
    update = b"INSERT DATA { <http://x/a> <http://x/b> <http://x/c> }"
    assert status_of("POST", served.base + "/update", update, "application/sparql-update") == 403
    form = urllib.parse.urlencode({"update": update.decode()}).encode()
    assert status_of("POST", served.base + "/update", form, "application/x-www-form-urlencoded") == 403
    for method in ("PUT", "POST"):
        for target in ("/store?default", "/store?graph=http%3A%2F%2Fx%2Fg", "/store"):
            assert status_of(method, served.base + target, triple, "application/n-triples") == 403, (method, target)
    assert status_of("DELETE", served.base + "/store?default") == 403
    assert status_of("DELETE", served.base + "/store?graph=http%3A%2F%2Fx%2Fg") == 403
    with urllib.request.urlopen(served.base + COUNT, timeout=10) as answer:
        assert json.load(answer)["results"]["bindings"][0]["n"]["value"] == str(SHIPPED_TRIPLES)


def test_serve_answers_as_the_embedded_store_and_stops_on_sigterm(served):
    local = LocalBackend(served.store)
    remote = RemoteBackend(served.base + "/query", environ={})
    for query in load_canned()[:4]:
        raw = {p.name: p.example for p in query.params}
        expected, got = run_canned(local, query, raw), run_canned(remote, query, raw)
        assert set(got.rows) == set(expected.rows) and got.variables == expected.variables, query.name  # type: ignore[union-attr]
    code, out, err = served.finish(signal.SIGTERM)
    assert code == 0, err
    assert out == (
        f"Serving {served.store} ({SHIPPED_TRIPLES} triples) read-only with the Oxigraph server.\n"
        f"  query page:       {served.base}/\n"
        f"  SPARQL endpoint:  {served.base}/query\n"
        "Queries stop after 30 s; updates and Graph Store writes are refused (403).\n"
        "SERVICE, LOAD, FROM and nesting deeper than 100 are refused (400); requests over 1048576 bytes are "
        "refused (413) and answers are cut at 67108864 bytes.\n"
        "It serves this build: after 'sotakg build', stop it and start it again to serve the new data.\n"
        "Press Ctrl-C to stop.\n"
        "Stopped.\n"
    )
    assert not answers(served.base)


def test_sigint_stops_it_cleanly_too(served):
    code, out, err = served.finish(signal.SIGINT)
    assert code == 0, err
    assert out.endswith("Press Ctrl-C to stop.\nStopped.\n")
    assert "Traceback" not in err
    assert not answers(served.base)


def test_the_served_generation_outlives_builds(served):
    layout = StoreLayout(served.store)
    generation = layout.current_generation()
    assert generation is not None
    practice = served.data / "practices" / "SOTA-049.yaml"
    practice.unlink()
    for _ in range(2):  # the second build cleans up what no one holds: not the served generation
        build = subprocess.run(
            [sys.executable, "-m", "sotakg", "--data", str(served.data), "--store", str(served.store), "build"],
            capture_output=True,
            text=True,
            env=subprocess_env(),
            timeout=60,
        )
        assert build.returncode == 0, build.stderr
        shutil.copy(SHIPPED_DATA / "practices" / "SOTA-049.yaml", practice)
    assert layout.current_generation() != generation
    assert (generation / "oxigraph").is_dir()
    with urllib.request.urlopen(served.base + COUNT, timeout=10) as answer:
        assert json.load(answer)["results"]["bindings"][0]["n"]["value"] == str(
            SHIPPED_TRIPLES
        )  # still the build it started with
    code, _, err = served.finish(signal.SIGTERM)
    assert code == 0, err
    rebuild = subprocess.run(
        [sys.executable, "-m", "sotakg", "--data", str(served.data), "--store", str(served.store), "build", "--force"],
        capture_output=True,
        text=True,
        env=subprocess_env(),
        timeout=60,
    )
    assert rebuild.returncode == 0, rebuild.stderr
    assert not generation.exists()  # released when the server stopped


def test_the_server_does_not_outlive_a_killed_sotakg(served):
    served.process.kill()  # SIGKILL: sotakg cannot forward anything
    served.process.wait(10)
    deadline = time.monotonic() + 10
    while answers(served.base) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not answers(served.base)


def test_a_server_that_cannot_start_is_reported(built_store):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        database = StoreLayout(built_store[1]).current_generation() / "oxigraph"  # type: ignore[operator]
        with serve.OxigraphServer(database, port=port, log=tempfile.TemporaryFile()) as server:
            with pytest.raises(ServeError, match=r"^the Oxigraph server stopped while starting \(exit code 1\):"):
                server.wait_ready(seconds=10)


def test_the_server_stops_promptly_even_where_sigterm_is_ignored(built_store):
    """After a committed build the process ignores SIGTERM; the server it starts must not inherit that."""
    database = StoreLayout(built_store[1]).current_generation() / "oxigraph"  # type: ignore[operator]
    previous = signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:
        server = serve.OxigraphServer(database, port=free_port())
        server.start()
    finally:
        signal.signal(signal.SIGTERM, previous)
    server.wait_ready()
    started = time.monotonic()
    assert server.stop() == -signal.SIGTERM
    assert time.monotonic() - started < 3


# ------------------------------------------------------------------------------------------ the guard


def plain_answer(method: str, url: str, body: bytes | None = None, content_type: str | None = None) -> tuple[int, str]:
    """Status and text of an answer, error statuses included."""
    headers = {"Content-Type": content_type} if content_type else {}
    request = urllib.request.Request(url, data=body, method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=20) as answer:
            return answer.status, answer.read().decode("utf-8")
    except urllib.error.HTTPError as error:
        with error:
            return error.code, error.read().decode("utf-8")


SERVICE_REFUSED = (
    "refused: SERVICE (line 1, column 7) would make the store query a remote endpoint over the network; "
    "queries here run on the local graph only\n"
)


def test_screening_finds_queries_wherever_the_protocol_puts_them():
    service = "ASK { SERVICE <http://127.0.0.1:9/> { } }"
    form = urllib.parse.urlencode({"query": service}).encode()
    for refusal in (
        guard.screen_request("GET", "/query?" + urllib.parse.urlencode({"query": service}), None, None, b""),
        guard.screen_request("HEAD", "/anything?query=" + urllib.parse.quote(service), None, None, b""),
        guard.screen_request("POST", "/query", "application/sparql-query; charset=utf-8", None, service.encode()),
        guard.screen_request("POST", "/query", "application/x-www-form-urlencoded", None, form),
        guard.screen_request("POST", "/query?query=" + urllib.parse.quote(service), guard.FORM_MEDIA, None, b""),
    ):
        assert refusal == guard.Refusal(400, SERVICE_REFUSED)
    assert guard.screen_request("GET", "/query?query=ASK%7B%7D", None, None, b"") is None
    assert guard.screen_request("GET", "/", None, None, b"") is None
    assert guard.screen_request("POST", "/query", guard.QUERY_MEDIA, None, b"ASK {}") is None
    update = guard.screen_request("POST", "/query", guard.QUERY_MEDIA, None, b"INSERT DATA { <x:a> <x:b> <x:c> }")
    assert update is not None and update.status == 403
    # an update refused for something else first (a prologue the engine cannot read, its size) is 403 too
    for text in ("PREFIX ex: <http://u@h> INSERT DATA { ex:s ex:p 1 }", "INSERT DATA { " + "<x:a> " * 7000 + "}"):
        assert guard.screen_request("POST", "/query", guard.QUERY_MEDIA, None, text.encode()).status == 403, text
    assert (
        guard.screen_request(
            "GET", "/query?query=" + urllib.parse.quote("ASK { " + "?v " * 7000 + "}"), None, None, b""
        ).status
        == 400
    )
    assert guard.screen_request("GET", "/query?update=CLEAR%20ALL", None, None, b"") == guard.Refusal(
        403, "refused: this server is read-only; SPARQL Update is not accepted\n"
    )
    assert guard.screen_request("POST", "/query", "text/plain", None, b"ASK {}") == guard.Refusal(
        415,
        "refused: POST /query takes a application/sparql-query body or a application/x-www-form-urlencoded "
        "form with a query\n",
    )
    assert guard.screen_request("POST", "/query", guard.QUERY_MEDIA, "gzip", b"...") is not None
    assert guard.screen_request("POST", "/query", guard.QUERY_MEDIA, None, b"ASK {\xff}") == guard.Refusal(
        400, "refused: the query is not valid UTF-8\n"
    )
    assert guard.screen_request("PUT", "/store?default", "application/n-triples", None, b"") == guard.Refusal(
        403,
        "refused: PUT /store: this server is read-only; it answers GET and HEAD requests and queries POSTed "
        "to /query\n",
    )


def test_service_is_refused_and_nothing_is_fetched(served):
    with stub_server(Stub(body=b"{}", content_type="application/sparql-results+json")) as listener:
        service = f"SELECT * {{ SERVICE <{listener.url}/sparql> {{ ?s ?p ?o }} }}"
        assert plain_answer("GET", served.base + "/query?" + urllib.parse.urlencode({"query": service})) == (
            400,
            "refused: SERVICE (line 1, column 12) would make the store query a remote endpoint over the network; "
            "queries here run on the local graph only\n",
        )
        assert plain_answer("POST", served.base + "/query", service.encode(), "application/sparql-query")[0] == 400
        form = urllib.parse.urlencode({"query": service}).encode()
        assert plain_answer("POST", served.base + "/query", form, "application/x-www-form-urlencoded")[0] == 400
        assert plain_answer("POST", served.base + "/query", service.encode(), "text/plain")[0] == 415
        time.sleep(0.2)
        assert listener.requests == []


def test_deep_operator_chains_are_refused_and_the_server_lives_on(served):
    chain = ("ASK { FILTER(" + "!" * 200000 + "true) }").encode()
    status, text = plain_answer("POST", served.base + "/query", chain, "application/sparql-query")
    assert status == 400
    assert text.startswith("refused: the query nests brackets and prefix operators (! - + ^) more than 100 levels deep")
    short = "/query?query=" + urllib.parse.quote("ASK { FILTER(" + "!" * 20000 + "true) }")
    assert plain_answer("GET", served.base + short)[0] == 400
    assert plain_answer("GET", served.base + "/query?query=" + urllib.parse.quote("ASK { FILTER(!!true) }")) == (
        200,
        '{"head":{},"boolean":true}',
    )
    assert served.process.poll() is None


def test_writes_never_reach_the_server(served):
    update = "INSERT DATA { <http://x/a> <http://x/b> <http://x/c> }"
    status, text = plain_answer("POST", served.base + "/update", update.encode(), "application/sparql-update")
    assert (status, text) == (
        403,
        "refused: POST /update: this server is read-only; it answers GET and HEAD requests and queries POSTed "
        "to /query\n",
    )
    assert plain_answer("POST", served.base + "/query", update.encode(), "application/sparql-query")[0] == 403
    assert plain_answer("PATCH", served.base + "/store?default", b"x", "text/plain")[0] == 403
    assert plain_answer("OPTIONS", served.base + "/query")[0] == 403
    assert plain_answer("GET", served.base + COUNT)[1].count(f'"{SHIPPED_TRIPLES}"') == 1


def test_the_query_page_is_served_unchanged(served):
    status, page = plain_answer("GET", served.base + "/")
    assert status == 200
    assert "<title>Oxigraph server</title>" in page
    with urllib.request.urlopen(served.base + "/", timeout=10) as answer:
        assert answer.headers.get_content_type() == "text/html"
    assert plain_answer("GET", served.base + "/nothing") == (404, "GET /nothing is not supported by this server")


def test_the_size_caps(data_copy, tmp_path, runner):
    with serving(data_copy, tmp_path / "store", "--max-request-bytes", "4K", "--max-result-bytes", "2K") as small:
        assert "requests over 4096 bytes are refused (413) and answers are cut at 2048 bytes" in small.banner
        padded = ("ASK {} #" + "x" * 5000).encode()
        assert plain_answer("POST", small.base + "/query", padded, "application/sparql-query") == (
            413,
            "refused: the request body is 5008 bytes, over the server's limit of 4096 (--max-request-bytes of "
            "sotakg serve)\n",
        )
        everything = small.base + "/query?query=" + urllib.parse.quote("SELECT * { ?s ?p ?o }")
        with urllib.request.urlopen(everything, timeout=20) as answer:
            assert answer.status == 200
            with pytest.raises(http.client.IncompleteRead) as cut:
                answer.read()
        assert len(cut.value.partial) == 2048
        result = runner.invoke(cli, ["query", "most-cited-papers", "--endpoint", small.base + "/query"])
        assert result.exit_code == 1
        assert result.stderr.startswith(f"Error: the answer from {small.base}/query was cut short (IncompleteRead)")
        assert plain_answer("GET", small.base + ASK) == (200, '{"head":{},"boolean":true}')
        code, _, err = small.finish(signal.SIGTERM)
    assert code == 0
    assert err.count("at 2048 bytes (--max-result-bytes); the client got a truncated answer\n") == 2


def test_get_goes_through_the_guard(runner, built_store):
    service = "/query?query=" + urllib.parse.quote("ASK { SERVICE <http://127.0.0.1:9/> { } }")
    refused = invoke(runner, built_store, "serve", "--get", service)
    assert refused.exit_code == 1
    assert refused.stderr == f"Error: GET {service}: HTTP 400 Bad Request: {SERVICE_REFUSED.strip()}\n"
    everything = "/query?query=" + urllib.parse.quote("SELECT * { ?s ?p ?o }")
    cut = invoke(runner, built_store, "serve", "--max-result-bytes", "1K", "--get", everything)
    assert cut.exit_code == 1
    assert "(--max-result-bytes); the client got a truncated answer" in cut.stderr
    assert "was cut short (IncompleteRead)" in cut.stderr
    wrong = invoke(runner, built_store, "serve", "--max-result-bytes", "lots", "--get", ASK)
    assert wrong.exit_code == 2
    assert "--max-result-bytes takes a size such as 512M, 2G or 1000000, not 'lots'" in wrong.stderr


# ------------------------------------------------------------------------------ the engine's own network


def descendants(pid: int) -> set[int]:
    """Every process below ``pid`` (from /proc)."""
    found: set[int] = set()
    waiting = [pid]
    while waiting:
        parent = waiting.pop()
        for task in Path(f"/proc/{parent}/task").glob("*"):
            try:
                children = {int(child) for child in (task / "children").read_text().split()}
            except OSError:
                continue
            waiting.extend(children - found)
            found |= children
    return found


def socket_inodes(pid: int) -> set[str]:
    inodes = set()
    for descriptor in Path(f"/proc/{pid}/fd").iterdir():
        with contextlib.suppress(OSError):
            target = os.readlink(descriptor)
            if target.startswith("socket:["):
                inodes.add(target[len("socket:[") : -1])
    return inodes


def tcp_inodes(net: str, listening_only: bool = False) -> set[str]:
    """The inodes of the TCP sockets of a network (``/proc/PID/net``): all, or those listening."""
    inodes = set()
    for name in ("tcp", "tcp6"):
        with contextlib.suppress(OSError):
            for line in Path(net, name).read_text().splitlines()[1:]:
                fields = line.split()
                if not listening_only or fields[3] == "0A":
                    inodes.add(fields[9])
    return inodes


def namespaces_allowed() -> bool:
    """Whether this machine lets a process make a user and network namespace (as the engine's holder does)."""
    if not serve.own_network_possible():
        return False
    probe = "import ctypes, sys; sys.exit(0 if ctypes.CDLL(None).unshare(0x10000000 | 0x40000000) == 0 else 1)"
    return subprocess.run([sys.executable, "-I", "-S", "-c", probe], check=False, timeout=30).returncode == 0


needs_namespaces = pytest.mark.skipif(
    not namespaces_allowed(), reason="this machine allows no user and network namespace (Linux, user namespaces on)"
)


@needs_namespaces
def test_the_engine_listens_in_a_network_of_its_own_and_on_no_port_of_ours(served):
    engines = [
        pid
        for pid in descendants(served.process.pid)
        if b"serve-read-only" in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[1:2]
    ]
    assert len(engines) == 1, engines
    engine = engines[0]
    assert os.stat(f"/proc/{engine}/ns/net").st_ino != os.stat("/proc/self/ns/net").st_ino
    sockets = socket_inodes(engine)
    assert sockets & tcp_inodes(f"/proc/{engine}/net", listening_only=True)  # it listens, in its network
    assert not sockets & tcp_inodes("/proc/self/net")  # and has no socket at all in this one
    assert status_of("GET", served.base + ASK) == 200


@pytest.mark.parametrize("isolated", [pytest.param(True, marks=needs_namespaces), False])
def test_a_service_past_the_guard_reaches_nothing_from_an_isolated_engine(built_store, isolated):
    from sotakg.server.wire import EngineConnection

    database = StoreLayout(built_store[1]).current_generation() / "oxigraph"  # type: ignore[operator]
    engine_port = serve.OWN_NETWORK_PORT if isolated else free_port()
    with counting_listener() as (port, accepted):
        with serve.OxigraphServer(
            database, port=engine_port, timeout=10, log=tempfile.TemporaryFile(), isolated=isolated
        ) as server:
            server.wait_ready()
            connection = EngineConnection("", 0, 15, server.connect(5))
            query = f"SELECT * WHERE {{ SERVICE <http://127.0.0.1:{port}/sparql> {{ ?s ?p ?o }} }}"
            answer = connection.request("GET", "/query?query=" + urllib.parse.quote(query), [("Host", "x")], None)
            connection.close()
    # The engine itself is asked, past the guard: only its network stands between it and the listener.
    assert (accepted == []) is isolated, (accepted, answer.status)


def test_without_namespaces_the_engine_runs_on_loopback_and_says_so(built_store, monkeypatch):
    monkeypatch.setattr(serve, "_OWN_NETWORK", f"import sys; sys.exit({serve.NO_OWN_NETWORK})")
    said: list[str] = []
    database = StoreLayout(built_store[1]).current_generation() / "oxigraph"  # type: ignore[operator]
    engine = serve.Engine(database, 30, serve.find_oxigraph(), said.append, isolated=True)
    engine.start()
    try:
        address = engine.address(10)
        assert address is not None and not engine.isolated
        assert said == [
            "warning: this system gives the Oxigraph server no network of its own (user namespaces), so its private "
            "port on 127.0.0.1 is open to every local user, past the guard; serve on a machine of your own, or "
            "allow unprivileged user namespaces"
        ]
        with socket.create_connection(address[:2], 5):
            pass  # on loopback, as before
    finally:
        engine.stop()


@needs_namespaces
@pytest.mark.parametrize("signum", [signal.SIGKILL, signal.SIGABRT])
def test_an_engine_killed_inside_its_network_is_restarted(data_copy, tmp_path, signum):
    with serving(data_copy, tmp_path / "store") as served:
        (holder,) = descendants_of_one(served)
        (engine,) = descendants(holder)
        os.kill(engine, signum)
        deadline = time.monotonic() + 15
        while engine in descendants(served.process.pid) or not answers(served.base):
            assert time.monotonic() < deadline, "not restarted"
            time.sleep(0.1)
        assert status_of("GET", served.base + ASK) == 200
        _code, _out, err = served.finish(signal.SIGTERM)
    assert f"the Oxigraph server stopped (it was killed by {signal.Signals(signum).name}); restarting it" in err


def descendants_of_one(served: Served) -> list[int]:
    """The processes `sotakg serve` started itself (the holders of its engines' networks)."""
    return serve.child_pids(served.process.pid)


def test_a_network_set_up_refused_after_unshare_falls_back_with_its_reason(tmp_path):
    # AppArmor's unprivileged_userns profile lets unshare succeed and refuses what comes after it.
    refuse = (
        "import fcntl\ndef ioctl(*args): raise PermissionError(1, 'Operation not permitted')\nfcntl.ioctl = ioctl\n"
    )
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    with ours:
        done = subprocess.run(
            [sys.executable, "-I", "-S", "-c", refuse + serve._OWN_NETWORK, str(theirs.fileno()), "7878", "/bin/true"],
            pass_fds=(theirs.fileno(),),
            capture_output=True,
            text=True,
            timeout=30,
        )
        theirs.close()
    if "Operation not permitted" not in done.stderr and done.returncode == 125:
        pytest.skip(f"no namespace here at all: {done.stderr.strip()}")
    assert (done.returncode, done.stderr) == (
        serve.NO_OWN_NETWORK,
        "sotakg: no network of its own for the Oxigraph server: Operation not permitted\n",
    )


def test_get_without_namespaces_answers_on_loopback_and_says_so_once(built_store, monkeypatch):
    monkeypatch.setattr(serve, "_OWN_NETWORK", f"import sys; sys.exit({serve.NO_OWN_NETWORK})")
    monkeypatch.setattr(serve, "own_network_possible", lambda: True)
    said: list[str] = []
    answer = serve.get_once(*built_store, "/query?query=ASK%7B%7D", warn=said.append)
    assert answer.status == 200 and json.loads(answer.body) == {"head": {}, "boolean": True}
    assert said == [serve.NO_OWN_NETWORK_WARNING]
