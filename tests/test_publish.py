"""`sotakg publish`: one Graph Store PUT of the whole graph, credentials from the environment only, and
clear errors for a closed port, an unknown host, a silent server, 401, 500 and a graph over the cap."""

from __future__ import annotations

import base64
import json
import socket
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from sotakg.cli import cli
from sotakg.errors import UsageProblem
from sotakg.server.publish import graph_store_url, parse_size

from .servers import Stub, closed_port, oxigraph, silent_port, stub_server

GRAPH = "https://example.org/graphs/sotakg"
NO_CREDENTIALS = {"SOTAKG_USER": None, "SOTAKG_PASSWORD": None, "SOTAKG_TOKEN": None}


@pytest.fixture(scope="module")
def target(tmp_path_factory: pytest.TempPathFactory):
    """A read-write Oxigraph server to publish to: its base URL."""
    with oxigraph(tmp_path_factory.mktemp("publish-target") / "db") as base:
        yield base


def publish(runner, store: tuple[Path, Path], *args: str, env: dict | None = None):
    data, store_path = store
    return runner.invoke(
        cli,
        ["--data", str(data), "--store", str(store_path), "publish", *args],
        env={**NO_CREDENTIALS, **(env or {})},
    )


def count(base: str, graph: str | None = None) -> int:
    """Triples in the default graph (or ``graph``) of the server, asked over HTTP."""
    where = f"GRAPH <{graph}> {{ ?s ?p ?o }}" if graph else "?s ?p ?o"
    query = urllib.parse.quote(f"SELECT (COUNT(*) AS ?n) WHERE {{ {where} }}")
    request = urllib.request.Request(
        f"{base}/query?query={query}", headers={"Accept": "application/sparql-results+json"}
    )
    with urllib.request.urlopen(request, timeout=10) as answer:
        return int(json.load(answer)["results"]["bindings"][0]["n"]["value"])


def test_publish_replaces_the_default_graph(runner, built_store, target):
    result = publish(runner, built_store, "--endpoint", f"{target}/store")
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith(
        f"Published 794 triples (112027 bytes of N-Triples) to the default graph at {target}/store?default (HTTP "
    )
    assert count(target) == 794
    again = publish(runner, built_store, "--endpoint", f"{target}/store")
    assert again.exit_code == 0, again.output
    assert count(target) == 794  # replaced, not added to


def test_publish_to_a_named_graph_replaces_it_whole(runner, built_store, data_copy, tmp_path, target):
    result = publish(runner, built_store, "--endpoint", f"{target}/store", "--graph", GRAPH)
    assert result.exit_code == 0, result.output
    encoded = urllib.parse.quote(GRAPH, safe="")
    assert f"to the graph <{GRAPH}> at {target}/store?graph={encoded} (HTTP 20" in result.stdout
    assert count(target, GRAPH) == 794
    # A smaller graph replaces the larger one: nothing of the old one is left over.
    (data_copy / "practices" / "SOTA-049.yaml").unlink()
    smaller = publish(runner, (data_copy, tmp_path / "store"), "--endpoint", f"{target}/store", "--graph", GRAPH)
    assert smaller.exit_code == 0, smaller.output
    published = int(smaller.stdout.split()[1])
    assert published < 794
    assert count(target, GRAPH) == published


def test_the_request_is_one_put_of_ntriples_with_credentials_from_the_environment(runner, built_store):
    with stub_server(Stub(status=204)) as stub:
        token = publish(runner, built_store, "--endpoint", f"{stub.url}/ds/data", env={"SOTAKG_TOKEN": "s3cret"})
        basic = publish(
            runner,
            built_store,
            "--endpoint",
            f"{stub.url}/ds/data?x=1",
            "--graph",
            GRAPH,
            env={"SOTAKG_USER": "ann", "SOTAKG_PASSWORD": "pa:ss"},
        )
        anonymous = publish(runner, built_store, "--endpoint", f"{stub.url}/ds/data")
    assert (token.exit_code, basic.exit_code, anonymous.exit_code) == (0, 0, 0), token.output + basic.output
    first, second, third = stub.requests
    assert (first.method, first.path) == ("PUT", "/ds/data?default")
    assert first.headers["Content-Type"] == "application/n-triples"
    assert first.headers["Authorization"] == "Bearer s3cret"
    assert len(first.body) == 112027 and first.body.count(b"\n") == 794
    assert (second.method, second.path) == ("PUT", "/ds/data?x=1&graph=https%3A%2F%2Fexample.org%2Fgraphs%2Fsotakg")
    assert second.headers["Authorization"] == "Basic " + base64.b64encode(b"ann:pa:ss").decode()
    assert "Authorization" not in third.headers


def test_half_set_or_doubled_credentials_are_refused(runner, built_store):
    only_user = publish(runner, built_store, "--endpoint", "http://127.0.0.1:9/store", env={"SOTAKG_USER": "ann"})
    assert only_user.exit_code == 2
    assert "basic authentication needs both SOTAKG_USER and SOTAKG_PASSWORD" in only_user.stderr
    both = publish(
        runner,
        built_store,
        "--endpoint",
        "http://127.0.0.1:9/store",
        env={"SOTAKG_TOKEN": "t", "SOTAKG_USER": "ann", "SOTAKG_PASSWORD": "p"},
    )
    assert both.exit_code == 2
    assert "set SOTAKG_TOKEN or SOTAKG_USER/SOTAKG_PASSWORD, not both" in both.stderr


def test_credentials_are_not_taken_from_options(runner, built_store):
    result = publish(runner, built_store, "--endpoint", "http://ann:secret@127.0.0.1:9/store")
    assert result.exit_code == 2
    assert "--endpoint must not carry credentials (user:password@); set SOTAKG_USER and SOTAKG_PASSWORD" in (
        result.stderr
    )
    assert publish(runner, built_store, "--endpoint", "x", "--user", "ann").exit_code == 2


def test_a_closed_port_is_refused_clearly(runner, built_store):
    port = closed_port()
    result = publish(runner, built_store, "--endpoint", f"http://127.0.0.1:{port}/store")
    assert result.exit_code == 1
    assert result.stderr == (
        f"Error: connection refused by 127.0.0.1:{port}: no server listens there (is it running?)\n"
    )


def test_an_unknown_host_is_named(runner, built_store, monkeypatch):
    def no_such_host(*args, **kwargs):
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    monkeypatch.setattr(socket, "getaddrinfo", no_such_host)
    result = publish(runner, built_store, "--endpoint", "http://sparql.invalid/store")
    assert result.exit_code == 1
    assert result.stderr == (
        "Error: cannot find the host sparql.invalid (name lookup failed: Name or service not known)\n"
    )


def test_401_says_which_variables_to_set(runner, built_store):
    with stub_server(Stub(status=401, body=b"Unauthorized: who are you?")) as stub:
        anonymous = publish(runner, built_store, "--endpoint", f"{stub.url}/store")
        refused = publish(runner, built_store, "--endpoint", f"{stub.url}/store", env={"SOTAKG_TOKEN": "old"})
    assert anonymous.exit_code == 1
    assert anonymous.stderr == (
        f"Error: {stub.url}/store?default answered HTTP 401 Unauthorized: Unauthorized: who are you?\n"
        "the server wants credentials: set SOTAKG_USER and SOTAKG_PASSWORD (basic authentication) or "
        "SOTAKG_TOKEN (a bearer token) in the environment\n"
    )
    assert refused.exit_code == 1
    assert "the credentials from SOTAKG_TOKEN were refused or lack the right; check them\n" in refused.stderr


def test_500_shows_status_and_an_excerpt_of_the_body(runner, built_store):
    body = b"boom: the disk is full\n" + b"x" * 5000
    with stub_server(Stub(status=500, body=body)) as stub:
        result = publish(runner, built_store, "--endpoint", f"{stub.url}/store")
    assert result.exit_code == 1
    first_line = result.stderr.splitlines()[0]
    assert first_line.startswith(f"Error: {stub.url}/store?default answered HTTP 500 Internal Server Error: boom: the")
    assert first_line.endswith("x…") and len(first_line) < 300


def test_404_asks_whether_it_is_the_graph_store_endpoint(runner, built_store):
    with stub_server(Stub(status=404, body=b"not here")) as stub:
        result = publish(runner, built_store, "--endpoint", f"{stub.url}/sparql")
    assert result.exit_code == 1
    assert "is it the server's Graph Store endpoint? (Oxigraph: http://HOST:7878/store" in result.stderr


def test_a_redirect_is_reported_not_followed(runner, built_store):
    with stub_server(Stub(status=307, headers={"Location": "http://127.0.0.1:9/elsewhere"})) as stub:
        result = publish(runner, built_store, "--endpoint", f"{stub.url}/store", env={"SOTAKG_TOKEN": "t"})
    assert result.exit_code == 1
    assert "it redirects to http://127.0.0.1:9/elsewhere; give that URL instead" in result.stderr
    assert len(stub.requests) == 1


def test_a_silent_server_times_out(runner, built_store):
    with silent_port() as port:
        started = time.monotonic()
        result = publish(runner, built_store, "--endpoint", f"http://127.0.0.1:{port}/store", "--timeout", "0.5")
        elapsed = time.monotonic() - started
    assert result.exit_code == 1
    assert result.stderr == f"Error: http://127.0.0.1:{port}/store?default did not answer within 0.5 s\n"
    assert elapsed < 5


def test_a_graph_over_the_cap_is_not_sent(runner, built_store):
    with stub_server(Stub(status=204)) as stub:
        result = publish(runner, built_store, "--endpoint", f"{stub.url}/store", "--max-bytes", "64K")
    assert result.exit_code == 1
    assert result.stderr == (
        "Error: the graph is 112027 bytes of N-Triples, over the limit of 65536 bytes; raise it with --max-bytes "
        "(the server may have a limit of its own)\n"
    )
    assert stub.requests == []


def test_cleartext_credentials_to_another_machine_are_warned_about(runner, built_store, monkeypatch):
    from sotakg.query.remote import cleartext_warning

    env = {"SOTAKG_TOKEN": "t"}
    assert cleartext_warning("http://sparql.example.org/store", env) == (
        "the credentials from SOTAKG_TOKEN are sent unencrypted to sparql.example.org; use an https:// URL"
    )
    assert cleartext_warning("https://sparql.example.org/store", env) is None
    assert cleartext_warning("http://127.0.0.1:7878/store", env) is None
    assert cleartext_warning("http://sparql.example.org/store", {}) is None


@pytest.mark.parametrize(
    ("text", "size"), [("1000", 1000), ("64K", 65536), ("512M", 512 * 1024**2), ("2GiB", 2 * 1024**3), (" 3 kb", 3072)]
)
def test_sizes(text, size):
    assert parse_size(text) == size


@pytest.mark.parametrize("text", ["", "M", "1.5G", "-1", "0", "12 parsecs"])
def test_bad_sizes(text):
    with pytest.raises(UsageProblem, match="--max-bytes"):
        parse_size(text)


def test_graph_store_addresses():
    assert graph_store_url("http://h:7878/store", None) == "http://h:7878/store?default"
    assert (
        graph_store_url("http://h/ds/data", "https://x.org/g#1") == "http://h/ds/data?graph=https%3A%2F%2Fx.org%2Fg%231"
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--endpoint", "ftp://h/store"], "--endpoint must be an http:// or https:// URL, not 'ftp://h/store'"),
        (["--endpoint", "http:///store"], "--endpoint must be an http:// or https:// URL"),
        (["--endpoint", "http://h/store", "--graph", "not an iri"], "--graph must be an absolute IRI"),
    ],
)
def test_bad_addresses_are_usage_errors(runner, built_store, args, message):
    result = publish(runner, built_store, *args)
    assert result.exit_code == 2
    assert message in result.stderr
