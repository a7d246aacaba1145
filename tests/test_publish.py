"""`sotakg publish`: the graph streamed into a staging graph and swapped in with one MOVE (or one PUT
with --no-swap), credentials from the environment only (Bearer, or Basic and Digest as the server asks),
and clear errors for a closed port, an unknown host, a silent server, 401, 403, 500, an HTML error
page, a redirect and a graph over the cap."""

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

from .conftest import NO_CREDENTIALS, SHIPPED_NTRIPLES_BYTES, SHIPPED_TRIPLES
from .servers import Stub, closed_port, digest_fields, digest_guard, oxigraph, silent_port, stub_server

GRAPH = "https://example.org/graphs/sotakg"


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
        f"Published {SHIPPED_TRIPLES} triples ({SHIPPED_NTRIPLES_BYTES} bytes of N-Triples) "
        f"to the default graph at {target}/store?default (HTTP "
    )
    assert count(target) == SHIPPED_TRIPLES
    again = publish(runner, built_store, "--endpoint", f"{target}/store")
    assert again.exit_code == 0, again.output
    assert count(target) == SHIPPED_TRIPLES  # replaced, not added to


def test_publish_to_a_named_graph_replaces_it_whole(runner, built_store, data_copy, tmp_path, target):
    result = publish(runner, built_store, "--endpoint", f"{target}/store", "--graph", GRAPH)
    assert result.exit_code == 0, result.output
    encoded = urllib.parse.quote(GRAPH, safe="")
    assert f"to the graph <{GRAPH}> at {target}/store?graph={encoded} (HTTP 20" in result.stdout
    assert count(target, GRAPH) == SHIPPED_TRIPLES
    # A smaller graph replaces the larger one: nothing of the old one is left over.
    (data_copy / "practices" / "SOTA-049.yaml").unlink()
    smaller = publish(runner, (data_copy, tmp_path / "store"), "--endpoint", f"{target}/store", "--graph", GRAPH)
    assert smaller.exit_code == 0, smaller.output
    published = int(smaller.stdout.split()[1])
    assert published < SHIPPED_TRIPLES
    assert count(target, GRAPH) == published


STAGING = "urn%3Asotakg%3Astaging%3A"


def ok(seen) -> tuple[int, dict[str, str], bytes]:
    return 204, {}, b""


def test_the_graph_is_staged_then_swapped_in_with_one_move(runner, built_store):
    with stub_server(Stub(status=204)) as stub:
        result = publish(runner, built_store, "--endpoint", f"{stub.url}/ds/data", env={"SOTAKG_TOKEN": "s3cret"})
    assert result.exit_code == 0, result.output
    put, move = stub.requests
    assert put.method == "PUT" and put.path.startswith(f"/ds/data?graph={STAGING}")
    assert put.headers["Content-Type"] == "application/n-triples"
    assert put.headers["Content-Length"] == str(SHIPPED_NTRIPLES_BYTES) and "Transfer-Encoding" not in put.headers
    assert put.headers["Authorization"] == "Bearer s3cret"
    assert len(put.body) == SHIPPED_NTRIPLES_BYTES and put.body.count(b"\n") == SHIPPED_TRIPLES
    staging = urllib.parse.unquote(put.path.split("graph=", 1)[1])
    assert (move.method, move.path) == ("POST", "/ds/update")
    assert move.headers["Content-Type"] == "application/x-www-form-urlencoded"
    assert move.headers["Authorization"] == "Bearer s3cret"
    assert urllib.parse.parse_qs(move.body.decode()) == {"update": [f"MOVE <{staging}> TO DEFAULT"]}
    assert result.stdout.startswith(
        f"Published {SHIPPED_TRIPLES} triples ({SHIPPED_NTRIPLES_BYTES} bytes of N-Triples) "
        f"to the default graph at {stub.url}/ds/data?default "
        f"(HTTP 204), staged and swapped in with one MOVE at {stub.url}/ds/update, in "
    )


def test_a_named_graph_moves_onto_that_graph(runner, built_store):
    with stub_server(Stub(status=204)) as stub:
        result = publish(
            runner, built_store, "--endpoint", f"{stub.url}/x/gsp", "--update-endpoint", f"{stub.url}/x/up",
            "--graph", GRAPH,
        )  # fmt: skip
    assert result.exit_code == 0, result.output
    put, move = stub.requests
    staging = urllib.parse.unquote(put.path.split("graph=", 1)[1])
    assert staging.startswith("urn:sotakg:staging:")
    assert move.path == "/x/up"
    assert urllib.parse.parse_qs(move.body.decode()) == {"update": [f"MOVE <{staging}> TO <{GRAPH}>"]}
    assert "Authorization" not in put.headers


def test_no_swap_is_one_put_onto_the_target(runner, built_store):
    with stub_server(Stub(status=204)) as stub:
        result = publish(runner, built_store, "--endpoint", f"{stub.url}/ds/data?x=1", "--graph", GRAPH, "--no-swap")
    assert result.exit_code == 0, result.output
    (put,) = stub.requests
    assert (put.method, put.path) == ("PUT", "/ds/data?x=1&graph=https%3A%2F%2Fexample.org%2Fgraphs%2Fsotakg")
    assert "in one PUT (--no-swap)" in result.stdout


def test_an_unknown_layout_without_update_endpoint_is_one_put(runner, built_store):
    with stub_server(Stub(status=201)) as stub:
        result = publish(runner, built_store, "--endpoint", f"{stub.url}/graphs")
    assert result.exit_code == 0, result.output
    assert [(r.method, r.path) for r in stub.requests] == [("PUT", "/graphs?default")]


def test_basic_is_sent_only_when_the_server_asks_for_it(runner, built_store):
    user = {"SOTAKG_USER": "ann", "SOTAKG_PASSWORD": "pa:ss"}
    basic = "Basic " + base64.b64encode(b"ann:pa:ss").decode()

    def guard(seen):
        if seen.headers.get("Authorization") == basic:
            return 204, {}, b""
        return 401, {"WWW-Authenticate": 'Basic realm="sparql"'}, b"who are you?"

    with stub_server(Stub(respond=guard)) as stub:
        result = publish(runner, built_store, "--endpoint", f"{stub.url}/store", env=user)
    assert result.exit_code == 0, result.output
    methods = [(r.method, r.headers.get("Authorization")) for r in stub.requests]
    # A bodiless HEAD learns the scheme, so the graph is sent once; the update reuses what was learned.
    assert methods == [("HEAD", None), ("PUT", basic), ("POST", basic)]


def test_digest_is_negotiated_from_the_challenge(runner, built_store):
    user = {"SOTAKG_USER": "ann", "SOTAKG_PASSWORD": "pw-for-digest"}
    with stub_server(Stub(respond=digest_guard("ann", "pw-for-digest", ok))) as stub:
        result = publish(
            runner, built_store, "--endpoint", f"{stub.url}/sparql-graph-crud-auth", "--graph", GRAPH, env=user
        )
    assert result.exit_code == 0, result.output
    head, put, move = stub.requests
    assert head.method == "HEAD" and "Authorization" not in head.headers
    assert put.method == "PUT" and len(put.body) == SHIPPED_NTRIPLES_BYTES
    assert move.path == "/sparql-auth"
    fields = [digest_fields(r.headers["Authorization"]) for r in (put, move)]
    assert [f["nc"] for f in fields] == ["00000001", "00000002"]
    assert fields[0]["cnonce"] != fields[1]["cnonce"]
    assert all("pw-for-digest" not in r.headers["Authorization"] for r in (put, move))
    assert "pw-for-digest" not in result.output


def test_a_wrong_digest_password_is_refused_and_not_echoed(runner, built_store):
    user = {"SOTAKG_USER": "ann", "SOTAKG_PASSWORD": "wrong-password"}
    with stub_server(Stub(respond=digest_guard("ann", "right-password", ok))) as stub:
        result = publish(runner, built_store, "--endpoint", f"{stub.url}/store", "--no-swap", env=user)
    assert result.exit_code == 1
    assert result.stderr == (
        f"Error: {stub.url}/store?default answered HTTP 401 Unauthorized: Unauthorized\n"
        "the credentials from SOTAKG_USER/SOTAKG_PASSWORD were refused; check them\n"
    )
    assert len(stub.requests) == 3  # HEAD for the challenge, the PUT once with Digest, and no more
    assert "wrong-password" not in result.output


def test_403_says_read_only_without_a_credentials_hint(runner, built_store):
    for env in ({}, {"SOTAKG_TOKEN": "t"}):
        with stub_server(Stub(status=403, body=b"writes are disabled on this replica")) as stub:
            result = publish(runner, built_store, "--endpoint", f"{stub.url}/store", "--no-swap", env=env)
        assert result.exit_code == 1
        assert result.stderr == (
            f"Error: {stub.url}/store?default answered HTTP 403 Forbidden: writes are disabled on this replica\n"
            "the server is read-only here: it refuses to change the graph\n"
        )


def test_a_read_only_oxigraph_says_so(runner, built_store):
    from sotakg.graph.store import DATABASE, StoreLayout

    database = StoreLayout(built_store[1]).current_generation() / DATABASE  # type: ignore[operator]
    with oxigraph(database, read_only=True) as base:
        result = publish(runner, built_store, "--endpoint", f"{base}/store", "--graph", GRAPH)
    assert result.exit_code == 1
    assert result.stderr.splitlines()[-1] == "the server is read-only here: it refuses to change the graph"
    assert "SOTAKG_USER" not in result.stderr


def test_an_html_error_page_shows_the_servers_reason(runner, built_store):
    page = (
        b'<!DOCTYPE HTML PUBLIC "-//IETF//DTD HTML 2.0//EN">\n<html><head><title>SPARQL Graph Protocol request '
        b"failed</title></head><body><h1>HTTP/1.1 500 Request Failed</h1><h3>Error 22023</h3>\n<xmp>The request "
        b'to SPARQL 1.1 Graph Store endpoint contains "default" param but the endpoint is not configured to have '
        b"default graph</xmp></body></html>"
    )
    with stub_server(Stub(status=500, body=page, content_type="text/html; charset=UTF-8")) as stub:
        result = publish(runner, built_store, "--endpoint", f"{stub.url}/sparql-graph-crud", "--no-swap")
    assert result.exit_code == 1
    assert result.stderr == (
        f"Error: {stub.url}/sparql-graph-crud?default answered HTTP 500 Internal Server Error: HTTP/1.1 500 Request "
        'Failed Error 22023 The request to SPARQL 1.1 Graph Store endpoint contains "default" param but the '
        "endpoint is not configured to have default graph\n"
        "this server has no default graph to replace: pass --graph IRI to publish into a named graph\n"
    )


def test_a_failed_swap_leaves_the_target_and_drops_the_staging_graph(runner, built_store):
    def refuse_move(seen):
        if seen.method == "POST" and b"MOVE" in seen.body:
            return 404, {}, b"no such endpoint"
        return 204, {}, b""

    with stub_server(Stub(respond=refuse_move)) as stub:
        result = publish(runner, built_store, "--endpoint", f"{stub.url}/store", "--graph", GRAPH)
    assert result.exit_code == 1
    assert result.stderr.endswith(
        f"answered HTTP 404 Not Found: no such endpoint\n"
        "is it the server's SPARQL Update endpoint? give the right one with --update-endpoint\n"
        f"the graph at {stub.url}/store?graph=https%3A%2F%2Fexample.org%2Fgraphs%2Fsotakg was left as it was\n"
    )
    put, move, drop = stub.requests
    staging = urllib.parse.unquote(put.path.split("graph=", 1)[1])
    assert urllib.parse.parse_qs(drop.body.decode()) == {"update": [f"DROP SILENT GRAPH <{staging}>"]}


def test_progress_is_reported_up_to_the_whole_size(built_store):
    from sotakg.server.publish import publish as publish_graph

    seen: list[tuple[int, int]] = []
    with stub_server(Stub(status=204)) as stub:
        publish_graph(
            *built_store, f"{stub.url}/store", environ={}, progress=lambda sent, total: seen.append((sent, total))
        )
    assert seen and seen[-1] == (SHIPPED_NTRIPLES_BYTES, SHIPPED_NTRIPLES_BYTES)
    assert [sent for sent, _ in seen] == sorted(sent for sent, _ in seen)


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
        anonymous = publish(runner, built_store, "--endpoint", f"{stub.url}/store", "--no-swap")
        refused = publish(
            runner, built_store, "--endpoint", f"{stub.url}/store", "--no-swap", env={"SOTAKG_TOKEN": "old"}
        )
    assert anonymous.exit_code == 1
    assert anonymous.stderr == (
        f"Error: {stub.url}/store?default answered HTTP 401 Unauthorized: Unauthorized: who are you?\n"
        "the server wants credentials: set SOTAKG_USER and SOTAKG_PASSWORD (Basic or Digest, as the server asks) "
        "or SOTAKG_TOKEN (a bearer token) in the environment\n"
    )
    assert refused.exit_code == 1
    assert refused.stderr.endswith("\nthe credentials from SOTAKG_TOKEN were refused; check them\n")


def test_500_shows_status_and_an_excerpt_of_the_body(runner, built_store):
    body = b"boom: the disk is full\n" + b"x" * 5000
    with stub_server(Stub(status=500, body=body)) as stub:
        result = publish(runner, built_store, "--endpoint", f"{stub.url}/store", "--no-swap")
    assert result.exit_code == 1
    first_line = result.stderr.splitlines()[0]
    assert first_line.startswith(f"Error: {stub.url}/store?default answered HTTP 500 Internal Server Error: boom: the")
    assert first_line.endswith("x…")
    assert len(first_line.split(": ", 1)[1].split(": ", 1)[1]) == 300  # the reason, cut at 300 characters


def test_404_asks_whether_it_is_the_graph_store_endpoint(runner, built_store):
    with stub_server(Stub(status=404, body=b"not here")) as stub:
        result = publish(runner, built_store, "--endpoint", f"{stub.url}/sparql", "--no-swap")
    assert result.exit_code == 1
    assert "is it the server's Graph Store endpoint? (Oxigraph: http://HOST:7878/store" in result.stderr


def test_a_redirect_to_another_host_is_not_followed_with_credentials(runner, built_store):
    with stub_server(Stub(status=204, host="127.0.0.2")) as elsewhere:
        moved = Stub(status=307, headers={"Location": f"{elsewhere.url}/store?default"})
        with stub_server(moved) as stub:
            result = publish(
                runner, built_store, "--endpoint", f"{stub.url}/store", "--no-swap", env={"SOTAKG_TOKEN": "t"}
            )
    assert result.exit_code == 1
    assert f"it redirects to {elsewhere.url}/store?default; give that URL instead (redirects are not followed)" in (
        result.stderr
    )
    assert len(stub.requests) == 1
    assert elsewhere.requests == []


def test_a_silent_server_times_out(runner, built_store):
    with silent_port() as port:
        started = time.monotonic()
        result = publish(runner, built_store, "--endpoint", f"http://127.0.0.1:{port}/store", "--timeout", "0.5")
        elapsed = time.monotonic() - started
    assert result.exit_code == 1
    assert result.stderr.startswith(f"Error: http://127.0.0.1:{port}/store?graph={STAGING}")
    assert result.stderr.endswith(" did not answer within 0.5 s\n")
    assert elapsed < 5


def test_a_graph_over_the_cap_is_not_sent(runner, built_store):
    with stub_server(Stub(status=204)) as stub:
        result = publish(runner, built_store, "--endpoint", f"{stub.url}/store", "--max-bytes", "64K")
    assert result.exit_code == 1
    assert result.stderr == (
        f"Error: the graph is {SHIPPED_NTRIPLES_BYTES} bytes of N-Triples, over the limit of 65536 bytes; "
        "raise it with --max-bytes "
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


def _no_network(monkeypatch):
    """Name lookups fail at once: the commands below never reach the network."""

    def no_such_host(*args, **kwargs):
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    monkeypatch.setattr(socket, "getaddrinfo", no_such_host)


@pytest.mark.parametrize(
    "command",
    [
        ["publish", "--endpoint", "http://sparql.example.org/store"],
        ["sparql", "ASK {}", "--endpoint", "http://sparql.example.org/query"],
        ["query", "adrs", "--endpoint", "http://sparql.example.org/query"],
        ["why", "SOTA-049", "--endpoint", "http://sparql.example.org/query"],
        ["validate", "--endpoint", "http://sparql.example.org/query"],
    ],
    ids=["publish", "sparql", "query", "why", "validate"],
)
def test_the_commands_warn_about_cleartext_credentials(runner, built_store, monkeypatch, command):
    _no_network(monkeypatch)
    data, store_path = built_store
    for env, warned in [({"SOTAKG_USER": "ann", "SOTAKG_PASSWORD": "pw"}, True), ({}, False)]:
        result = runner.invoke(
            cli, ["--data", str(data), "--store", str(store_path), *command], env={**NO_CREDENTIALS, **env}
        )
        assert result.exit_code == 1
        warning = (
            "warning: the credentials from SOTAKG_USER/SOTAKG_PASSWORD are sent unencrypted to sparql.example.org; "
            "use an https:// URL\n"
        )
        assert result.stderr.startswith(warning) is warned, result.stderr
        assert "cannot find the host sparql.example.org" in result.stderr
        assert "pw" not in result.stderr.replace("https", "")


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


def test_a_progress_bar_shows_on_a_terminal_once_a_second_has_passed(monkeypatch):
    import io
    import sys

    from sotakg import cli as cli_module

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    now = [100.0]
    monkeypatch.setattr(time, "monotonic", lambda: now[0])
    terminal = Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    with cli_module._upload_progress() as progress:
        assert progress is not None
        now[0] = 100.5
        progress(10_000, 109_908)
        assert terminal.getvalue() == ""  # under a second: no bar
        now[0] = 101.5
        progress(60_000, 109_908)
        progress(109_908, 109_908)
    assert "Publishing" in terminal.getvalue() and "100%" in terminal.getvalue()


def test_no_progress_bar_in_ci_logs(monkeypatch):
    import io
    import sys

    from sotakg import cli as cli_module

    monkeypatch.setattr(sys, "stderr", io.StringIO())
    with cli_module._upload_progress() as progress:
        assert progress is None


def test_values_compare_in_canonical_form_and_only_equal_values_are_equal():
    from pyoxigraph import Literal, NamedNode

    from sotakg.query.remote import canonical_value as comparable

    year = NamedNode("http://www.w3.org/2001/XMLSchema#gYear")
    integer = NamedNode("http://www.w3.org/2001/XMLSchema#integer")

    def same(a: str, b: str, datatype: NamedNode) -> bool:
        return comparable(Literal(a, datatype=datatype)) == comparable(Literal(b, datatype=datatype))

    assert same("-005", "-0005", year) and same("02020", "2020", year) and same("-0", "0000", year)
    assert same("2020Z", "02020Z", year) and not same("2020Z", "2020", year) and not same("2020", "2021", year)
    assert same("+7", "7", integer) and same("007", "7", integer) and same("-0", "0", integer)
    assert not same("7", "70", integer) and not same("-7", "7", integer)
    assert not same("٢٠", "20", integer)  # only ASCII digits are digits of these forms
    assert comparable(Literal("x", datatype=year)) == Literal("x", datatype=year)  # not a year: as written
    assert comparable(NamedNode("http://x/7")) == NamedNode("http://x/7")
