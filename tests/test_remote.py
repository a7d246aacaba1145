"""`--endpoint`: canned queries, ad-hoc SPARQL and `why` against a real Oxigraph server give the
embedded store's answers; the same refusals apply; a broken, cut-short, oversized, silent or slow
answer is an error, never a partial result."""

from __future__ import annotations

import json
import time
import urllib.parse
from pathlib import Path

import pytest
from pyoxigraph import Literal, NamedNode, Variable

from sotakg.cli import cli
from sotakg.errors import QueryFailed, QuerySyntaxError, QueryTimeout, UsageProblem
from sotakg.graph.store import DATABASE, StoreLayout
from sotakg.graph.vocab import PREFIXES
from sotakg.query.canned import load_canned
from sotakg.query.remote import RemoteBackend, fetch_graph, prologue, with_values
from sotakg.query.results import AskResult, GraphResult, SelectResult
from sotakg.query.sparql import run_query
from sotakg.server.publish import publish
from sotakg.server.serve import OxigraphServer, free_port

from .conftest import NO_CREDENTIALS, SHIPPED_TRIPLES
from .conftest import invoke as invoke_cli
from .servers import Stub, closed_port, digest_guard, oxigraph, silent_port, stub_server

XSD_INTEGER = "http://www.w3.org/2001/XMLSchema#integer"

GRAPH = "https://example.org/graphs/sotakg"
CANNED = load_canned()
RECORDS = ["SOTA-049", "SOTA-017", "SOTA-076", "SOTA-214", "LIT-051", "ADR-020", "ADR-026"]


@pytest.fixture(scope="module")
def endpoint(tmp_path_factory: pytest.TempPathFactory, built_store: tuple[Path, Path]):
    """A real Oxigraph server holding the shipped graph twice, in the default graph and in GRAPH:
    its query endpoint."""
    data, store = built_store
    with oxigraph(tmp_path_factory.mktemp("remote") / "db") as base:
        publish(data, store, f"{base}/store", environ={})
        publish(data, store, f"{base}/store", GRAPH, environ={})
        yield f"{base}/query"


def invoke(runner, built_store, *args: str):
    return invoke_cli(runner, built_store, *args, env=NO_CREDENTIALS)


def as_set(json_text: str) -> tuple[list[str], set[str]]:
    """Variables and the set of rows of a SPARQL JSON results document (rows as canonical JSON)."""
    document = json.loads(json_text)
    rows = {json.dumps(row, sort_keys=True) for row in document["results"]["bindings"]}
    return document["head"]["vars"], rows


@pytest.mark.parametrize("graph", [None, GRAPH], ids=["default-graph", "named-graph"])
@pytest.mark.parametrize("query", CANNED, ids=[q.name for q in CANNED])
def test_every_canned_query_answers_as_the_embedded_store(runner, built_store, endpoint, query, graph):
    params = [arg for p in query.params for arg in ("-p", p.usage())]
    local = invoke(runner, built_store, "query", query.name, *params, "-f", "json")
    remote_args = ["--endpoint", endpoint] + (["--graph", graph] if graph else [])
    remote = invoke(runner, built_store, "query", query.name, *params, "-f", "json", *remote_args)
    assert local.exit_code == 0 and remote.exit_code == 0, local.output + remote.output
    variables, rows = as_set(local.stdout)
    assert as_set(remote.stdout) == (variables, rows)
    assert rows or query.name == "orphan-papers"  # the comparison is not between two empty answers


@pytest.mark.parametrize("record", RECORDS)
def test_why_tells_the_same_story(runner, built_store, endpoint, record):
    local = invoke(runner, built_store, "why", record)
    remote = invoke(runner, built_store, "why", record, "--endpoint", endpoint)
    assert local.exit_code == 0 and remote.exit_code == 0, remote.output
    assert remote.stdout == local.stdout
    golden = Path(__file__).resolve().parent / "golden" / f"why-{record}.txt"
    assert remote.stdout == golden.read_text(encoding="utf-8")


@pytest.mark.parametrize("graph", [None, GRAPH], ids=["default-graph", "named-graph"])
def test_views_and_the_site_are_made_from_the_endpoint_as_from_the_store(
    runner, built_store, endpoint, graph, tmp_path
):
    """`export view` and `export site` take --endpoint (the README said so; they did not): what they
    write from the server's graph is what they write from the embedded store."""
    remote_args = ["--endpoint", endpoint] + (["--graph", graph] if graph else [])
    for name, params in (("citations", []), ("topic", ["-p", "topic=distributed-optimization"])):
        local = invoke(runner, built_store, "export", "view", name, *params, "-f", "nt")
        remote = invoke(runner, built_store, "export", "view", name, *params, "-f", "nt", *remote_args)
        assert local.exit_code == 0 and remote.exit_code == 0, remote.output
        assert remote.stdout == local.stdout and local.stdout.count("\n") > 20
    here, there = tmp_path / "local", tmp_path / "remote"
    assert invoke(runner, built_store, "export", "site", str(here), "--mermaid").exit_code == 0
    result = invoke(runner, built_store, "export", "site", str(there), "--mermaid", *remote_args)
    assert result.exit_code == 0, result.output
    pages = sorted(path.name for path in here.iterdir())
    assert sorted(path.name for path in there.iterdir()) == pages and len(pages) > 60
    for page in pages:
        assert (there / page).read_bytes() == (here / page).read_bytes(), page


def test_an_unknown_record_is_not_found_remotely_too(runner, built_store, endpoint):
    local = invoke(runner, built_store, "why", "SOTA-0499")
    result = invoke(runner, built_store, "why", "SOTA-0499", "--endpoint", endpoint)
    assert result.exit_code == 1
    assert result.stderr.startswith(
        "Error: no practice, paper or ADR has the identifier SOTA-0499; did you mean SOTA-049"
    )
    assert result.stderr == local.stderr


def test_ad_hoc_select_ask_and_construct_match(runner, built_store, endpoint):
    select = "SELECT ?p ?v WHERE { ?p sota:currentVersion/sota:versionNumber ?v FILTER(?v > 1) } ORDER BY ?p"
    for form, query, fmt in [
        ("select", select, "tsv"),
        ("ask", "ASK { id:SOTA-049 sota:status sota:Rejected }", "json"),
        ("construct", "CONSTRUCT { ?p sota:rests ?paper } WHERE { ?p cito:cites ?paper }", "ntriples"),
        ("describe", "DESCRIBE id:LIT-051", "ntriples"),
    ]:
        local = invoke(runner, built_store, "sparql", query, "-f", fmt)
        remote = invoke(runner, built_store, "sparql", query, "-f", fmt, "--endpoint", endpoint)
        assert local.exit_code == 0 and remote.exit_code == 0, (form, remote.output)
        assert remote.stdout == local.stdout, form
        assert remote.stdout.strip(), form


ASK_TRUE = b'{"head":{},"boolean":true}'
JSON_TYPE = "application/sparql-results+json"


def sent_requests(method: str, query: str = "ASK { ?s ?p ?o }", stub: Stub | None = None) -> list:
    """The requests a stub endpoint received for one query sent by ``method`` with a named graph."""
    with stub_server(stub or Stub(body=ASK_TRUE, content_type=JSON_TYPE)) as running:
        backend = RemoteBackend(f"{running.url}/sparql?x=1", GRAPH, environ={}, method=method)
        run_query(backend, query)
    return running.requests


def test_auto_and_get_send_a_get_with_the_graph_as_default_graph_uri():
    expected_query = prologue("", PREFIXES) + "ASK { ?s ?p ?o }"
    for method in ("auto", "get"):
        (request,) = sent_requests(method)
        assert request.method == "GET" and request.body == b""
        path, _, query = request.path.partition("?")
        assert path == "/sparql"
        assert urllib.parse.parse_qsl(query) == [("x", "1"), ("query", expected_query), ("default-graph-uri", GRAPH)]
        assert request.headers["Accept"] == "application/sparql-results+json"


def test_post_form_sends_the_query_and_graph_in_the_body():
    (request,) = sent_requests("post-form")
    assert (request.method, request.path) == ("POST", "/sparql?x=1")
    assert request.headers["Content-Type"] == "application/x-www-form-urlencoded"
    assert urllib.parse.parse_qsl(request.body.decode()) == [
        ("query", prologue("", PREFIXES) + "ASK { ?s ?p ?o }"),
        ("default-graph-uri", GRAPH),
    ]


def test_post_direct_sends_the_query_as_the_body():
    (request,) = sent_requests("post-direct")
    assert request.method == "POST"
    assert request.path == "/sparql?x=1&default-graph-uri=https%3A%2F%2Fexample.org%2Fgraphs%2Fsotakg"
    assert request.headers["Content-Type"] == "application/sparql-query"
    sent = request.body.decode()
    assert sent.startswith(
        "PREFIX sota: <https://w3id.org/sotakg/ontology#>\nPREFIX id: <https://w3id.org/sotakg/id/>\n"
    )
    assert sent == prologue("", PREFIXES) + "ASK { ?s ?p ?o }"
    assert sent.count("PREFIX ") == len(PREFIXES)


def test_auto_sends_a_long_query_as_a_form_post():
    from sotakg.query.remote import SAFE_URL_LENGTH

    long_query = "ASK { ?s ?p ?o }" + " " * SAFE_URL_LENGTH
    (request,) = sent_requests("auto", long_query)
    assert request.method == "POST"
    assert request.headers["Content-Type"] == "application/x-www-form-urlencoded"


@pytest.mark.parametrize("refusal", [405, 415, 501])
def test_auto_tries_the_other_way_once_and_remembers_it(refusal):
    def only_forms(seen):
        if seen.method == "POST":
            return 200, {"Content-Type": JSON_TYPE}, ASK_TRUE
        return refusal, {}, b"GET is not allowed here"

    with stub_server(Stub(respond=only_forms)) as stub:
        backend = RemoteBackend(f"{stub.url}/q{refusal}", environ={})
        assert run_query(backend, "ASK {}") == AskResult(True)
        assert run_query(backend, "ASK {}") == AskResult(True)
    assert [r.method for r in stub.requests] == ["GET", "POST", "POST"]  # the second query goes by POST at once


def test_an_explicit_method_is_not_retried():
    with stub_server(Stub(status=405, body=b"no GET")) as stub:
        backend = RemoteBackend(f"{stub.url}/q", environ={}, method="get")
        with pytest.raises(QueryFailed, match=r"answered HTTP 405 Method Not Allowed: no GET"):
            run_query(backend, "ASK {}")
    assert len(stub.requests) == 1


def test_refused_both_ways_reports_the_second_answer():
    with stub_server(Stub(status=501, body=b"nothing here")) as stub:
        backend = RemoteBackend(f"{stub.url}/q-both", environ={})
        with pytest.raises(QueryFailed, match=r"answered HTTP 501 Not Implemented: nothing here$"):
            run_query(backend, "ASK {}")
    assert [r.method for r in stub.requests] == ["GET", "POST"]


def test_a_retry_shares_the_deadline():
    """auto's second try does not get a fresh time limit: a hanging server costs one --timeout."""
    with silent_port() as port:
        backend = RemoteBackend(f"http://127.0.0.1:{port}/query", environ={})
        started = time.monotonic()
        with pytest.raises(QueryTimeout):
            run_query(backend, "ASK {}", timeout=0.5)
        assert time.monotonic() - started < 1.5


@pytest.mark.parametrize(("value", "expected"), [("1", True), ("0", False), (None, False)])
def test_virtuosos_ask_table_is_read_as_a_boolean(value, expected):
    rows = (
        [] if value is None else [{"__ASK_RETVAL": {"type": "typed-literal", "datatype": XSD_INTEGER, "value": value}}]
    )
    body = json.dumps({"head": {"link": [], "vars": ["__ASK_RETVAL"]}, "results": {"bindings": rows}}).encode()
    with stub_server(Stub(body=body, content_type=JSON_TYPE)) as stub:
        result = run_query(RemoteBackend(f"{stub.url}/sparql", environ={}), "ASK {}")
    assert result == AskResult(expected)


def test_a_table_of_another_shape_is_no_ask_answer():
    body = (
        b'{"head":{"vars":["__ASK_RETVAL"]},"results":{"bindings":[{"__ASK_RETVAL":{"type":"literal","value":"yes"}}]}}'
    )
    error = remote_error(Stub(body=body, content_type=JSON_TYPE), "ASK {}")
    assert isinstance(error, QueryFailed) and "an ASK answer needs a boolean" in str(error)


def test_digest_authentication_for_queries():
    def answer(seen):
        return 200, {"Content-Type": JSON_TYPE}, ASK_TRUE

    env = {"SOTAKG_USER": "ann", "SOTAKG_PASSWORD": "q-pass"}
    with stub_server(Stub(respond=digest_guard("ann", "q-pass", answer))) as stub:
        backend = RemoteBackend(f"{stub.url}/sparql-auth", environ=env)
        assert run_query(backend, "ASK {}") == AskResult(True)
        assert run_query(backend, "ASK { ?s ?p ?o }") == AskResult(True)
    # The first query asks without credentials and is challenged; the next reuses the challenge.
    assert [("Authorization" in r.headers) for r in stub.requests] == [False, True, True]
    assert all("q-pass" not in value for r in stub.requests for value in r.headers.values())


def test_a_bearer_token_goes_with_each_request():
    with stub_server(Stub(body=ASK_TRUE, content_type=JSON_TYPE)) as stub:
        run_query(RemoteBackend(f"{stub.url}/sparql", environ={"SOTAKG_TOKEN": "tok"}), "ASK {}")
    assert stub.requests[0].headers["Authorization"] == "Bearer tok"


def test_403_is_a_refusal_without_a_credentials_hint():
    error = remote_error(
        Stub(status=403, body=b"<html><body><p>Queries are closed</p></body></html>", content_type="text/html")
    )
    assert str(error).endswith("answered HTTP 403 Forbidden: Queries are closed\nthe server refuses this request")


@pytest.mark.parametrize("status", [404, 405, 406, 415])
def test_a_query_sent_where_no_query_endpoint_is_asks_whether_it_is_one(runner, built_store, status):
    """`query adrs --endpoint http://HOST:7878/store` (the Graph Store endpoint) said only "answered
    HTTP 406 Not Acceptable", where publish asks whether its URL is the Graph Store endpoint. The
    rule: the same help the other way round, naming each server's query endpoint."""
    with stub_server(Stub(status=status, body=b"not here")) as stub:
        result = invoke(runner, built_store, "query", "adrs", "--endpoint", f"{stub.url}/store")
    assert result.exit_code == 1
    assert f"answered HTTP {status}" in result.stderr
    assert "is it the server's query endpoint? (Oxigraph: http://HOST:7878/query, Virtuoso:" in result.stderr


def test_method_needs_an_endpoint(runner, built_store):
    result = invoke(runner, built_store, "sparql", "ASK {}", "--method", "get")
    assert result.exit_code == 2
    assert "--method needs --endpoint" in result.stderr
    bad = invoke(runner, built_store, "sparql", "ASK {}", "--endpoint", "http://127.0.0.1:9/q", "--method", "put")
    assert bad.exit_code == 2 and "'put' is not one of 'auto', 'get', 'post-form', 'post-direct'" in bad.stderr


def test_why_shows_its_timeout_and_method_in_help(runner):
    text = runner.invoke(cli, ["why", "--help"]).output
    assert "--timeout SECONDS" in text and "--method [auto|get|post-form|post-direct]" in text


def test_prefixes_the_query_declares_are_not_declared_again():
    text = "PREFIX sota: <http://other.example/#>\nSELECT * { ?s a sota:X }"
    assert prologue(text, {"sota": "https://w3id.org/sotakg/ontology#", "id": "https://w3id.org/sotakg/id/"}) == (
        "PREFIX id: <https://w3id.org/sotakg/id/>\n"
    )


def test_bindings_go_first_in_the_where_group_as_escaped_terms():
    text = "SELECT ?text ?p WHERE { ?p dcterms:title ?t FILTER(CONTAINS(?t, ?text)) }"
    bound = with_values(text, {Variable("text"): Literal('"} } ; DROP ALL #'), Variable("p"): NamedNode("http://x/a")})
    assert bound == (
        "SELECT ?text ?p WHERE {\n"
        'BIND("\\"} } ; DROP ALL #" AS ?text)\n'
        "BIND(<http://x/a> AS ?p)\n"
        " ?p dcterms:title ?t FILTER(CONTAINS(?t, ?text)) }"
    )
    construct = "CONSTRUCT { ?x ?p ?o } WHERE { ?x ?p ?o }"
    assert with_values(construct, {Variable("x"): NamedNode("http://x/a")}) == (
        "CONSTRUCT { ?x ?p ?o } WHERE {\nBIND(<http://x/a> AS ?x)\n ?x ?p ?o }"
    )
    short = "CONSTRUCT WHERE { ?x ?p ?o }"
    assert with_values(short, {Variable("x"): NamedNode("http://x/a")}) == short + "\nVALUES (?x) { (<http://x/a>) }\n"
    exists = "SELECT (EXISTS { ?a ?b ?c } AS ?e) ?x { ?x ?p ?o }"
    assert with_values(exists, {Variable("x"): NamedNode("http://x/a")}) == (
        "SELECT (EXISTS { ?a ?b ?c } AS ?e) ?x {\nBIND(<http://x/a> AS ?x)\n ?x ?p ?o }"
    )


def test_a_hostile_parameter_value_is_only_a_literal(runner, built_store, endpoint):
    value = 'buffer"} } ; DROP ALL ; #'
    local = invoke(runner, built_store, "query", "practices-mentioning", "-p", f"text={value}", "-f", "json")
    remote = invoke(
        runner,
        built_store,
        "query",
        "practices-mentioning",
        "-p",
        f"text={value}",
        "-f",
        "json",
        "--endpoint",
        endpoint,
    )
    assert local.exit_code == 0 and remote.exit_code == 0, remote.output
    assert as_set(remote.stdout) == as_set(local.stdout) == (["text", "practice", "status", "title"], set())
    count = invoke(runner, built_store, "sparql", "SELECT (COUNT(*) AS ?n) { ?s ?p ?o }", "--endpoint", endpoint)
    assert count.stdout.splitlines()[2].strip() == str(SHIPPED_TRIPLES)


def test_fetch_graph_gives_the_whole_graph(built_store, endpoint, shipped_store):
    from pyoxigraph import DefaultGraph, RdfFormat

    fetched = fetch_graph(endpoint, GRAPH, environ={})
    expected = shipped_store.dump(format=RdfFormat.N_TRIPLES, from_graph=DefaultGraph())
    assert set(fetched.splitlines()) == set(expected.splitlines())
    assert len(fetched.splitlines()) == SHIPPED_TRIPLES


@pytest.mark.parametrize(
    "query",
    [
        "DROP ALL",
        "INSERT DATA { id:x id:y id:z }",
        "SELECT * { SERVICE <http://127.0.0.1:9/> { ?s ?p ?o } }",
        "SELECT * FROM <http://127.0.0.1:9/g> { ?s ?p ?o }",
        "LOAD <http://127.0.0.1:9/data.ttl>",
    ],
)
def test_the_same_refusals_apply_before_anything_is_sent(runner, built_store, query):
    with stub_server(Stub()) as stub:
        result = invoke(runner, built_store, "sparql", query, "--endpoint", f"{stub.url}/query")
    assert result.exit_code == 2, result.output
    assert stub.requests == []


def test_a_syntax_error_points_at_the_users_line(built_store):
    from sotakg.query.sparql import LocalBackend

    text = "SELECT ?x WHERE {\n  ?x ?y\n}"
    with pytest.raises(QuerySyntaxError) as local:
        run_query(LocalBackend(built_store[1]), text)
    backend = RemoteBackend(f"http://127.0.0.1:{closed_port()}/query", environ={})  # never reached
    with pytest.raises(QuerySyntaxError) as remote:
        run_query(backend, text)
    assert (remote.value.line, str(remote.value)) == (3, str(local.value))


def test_a_closed_port(runner, built_store):
    port = closed_port()
    result = invoke(runner, built_store, "sparql", "ASK {}", "--endpoint", f"http://127.0.0.1:{port}/query")
    assert result.exit_code == 1
    assert result.stderr == f"Error: connection refused by 127.0.0.1:{port}: no server listens there (is it running?)\n"


def remote_error(stub: Stub, query: str = "SELECT ?n { ?s ?p ?n }", timeout: float = 10.0, **backend: object):
    """The exception running ``query`` on a stub endpoint raises."""
    with stub_server(stub) as running:
        endpoint = RemoteBackend(f"{running.url}/query", environ={}, **backend)  # type: ignore[arg-type]
        with pytest.raises((QueryFailed, QueryTimeout)) as caught:
            run_query(endpoint, query, timeout=timeout)
    return caught.value


JSON = "application/sparql-results+json"


def test_a_200_with_a_truncated_json_body_is_an_error():
    error = remote_error(Stub(body=b'{"head":{"vars":["n"]},"results":{"bindings":[{"n":', content_type=JSON))
    assert isinstance(error, QueryFailed)
    assert "sent an answer that is not valid SPARQL JSON results" in str(error)
    assert str(error).endswith("; nothing is shown")


def test_a_200_with_trailing_garbage_is_an_error():
    error = remote_error(Stub(body=b'{"head":{},"boolean":true} and more', content_type=JSON), "ASK {}")
    assert isinstance(error, QueryFailed)
    assert "not valid SPARQL JSON results" in str(error)


def test_an_ask_answer_to_a_select_is_an_error():
    error = remote_error(Stub(body=b'{"head":{},"boolean":true}', content_type=JSON))
    assert isinstance(error, QueryFailed)
    assert "a SELECT answer needs results.bindings" in str(error)


def test_oxigraphs_cancelled_answer_is_a_timeout():
    body = b'{"head":{"vars":["n"]},"results":{"bindings":[The SPARQL operation has been cancelled'
    error = remote_error(Stub(body=body, content_type=JSON))
    assert isinstance(error, QueryTimeout)
    assert "stopped the query at its own time limit and sent a cut-short answer" in str(error)


def test_an_answer_shorter_than_announced_is_an_error():
    body = b'{"head":{"vars":["n"]},"results":{"bindings":[]}}'
    error = remote_error(Stub(body=body, content_type=JSON, content_length=len(body) + 100))
    assert isinstance(error, QueryFailed)
    assert "was cut short" in str(error)


def test_a_broken_ntriples_answer_is_an_error():
    body = b'<http://x/a> <http://x/b> <http://x/c> .\n<http://x/a> <http://x/b> "unterminated'
    error = remote_error(Stub(body=body, content_type="application/n-triples"), "CONSTRUCT WHERE { ?s ?p ?o }")
    assert isinstance(error, QueryFailed)
    assert "sent an answer that is not valid ntriples" in str(error)


def test_an_html_page_is_not_results():
    error = remote_error(Stub(body=b"<html>Welcome to nginx</html>", content_type="text/html"))
    assert isinstance(error, QueryFailed)
    assert str(error).endswith("answered with text/html, not application/sparql-results+json: Welcome to nginx")


def test_an_oversized_answer_is_abandoned():
    body = b'{"head":{"vars":["n"]},"results":{"bindings":[' + b" " * 5000 + b"]}}"
    error = remote_error(Stub(body=body, content_type=JSON), max_bytes=1000)
    assert isinstance(error, QueryFailed)
    assert "is larger than 1000 bytes; it was abandoned (narrow the query, or add LIMIT)" in str(error)


def test_401_names_the_variables():
    error = remote_error(Stub(status=401, body=b"no"))
    assert str(error).endswith(
        "the server wants credentials: set SOTAKG_USER and SOTAKG_PASSWORD (Basic or Digest, as the server asks) "
        "or SOTAKG_TOKEN (a bearer token) in the environment"
    )


def test_a_silent_endpoint_times_out():
    with silent_port() as port:
        backend = RemoteBackend(f"http://127.0.0.1:{port}/query", environ={})
        started = time.monotonic()
        with pytest.raises(QueryTimeout, match=r"did not answer within 0\.5 s; raise --timeout or narrow the query"):
            run_query(backend, "ASK {}", timeout=0.5)
    assert time.monotonic() - started < 3


def test_a_dripping_answer_stops_at_the_deadline():
    body = b'{"head":{"vars":["n"]},"results":{"bindings":[]}}'
    started = time.monotonic()
    error = remote_error(Stub(body=body, content_type=JSON, drip_seconds=0.1), timeout=1.0)
    assert isinstance(error, QueryTimeout)
    assert "did not finish answering within 1 s" in str(error)
    assert time.monotonic() - started < 4


class HeadTrickle:
    """A raw server on a free loopback port that answers every connection with ``head`` one chunk at a
    time, ``pause`` seconds apart, for as long as the client listens (bounded: 600 chunks)."""

    def __init__(self, chunks: list[bytes], pause: float) -> None:
        import socket
        import threading

        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.chunks, self.pause = chunks, pause
        self.stop = threading.Event()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        import itertools

        self.listener.settimeout(0.2)
        while not self.stop.is_set():
            try:
                connection, _ = self.listener.accept()
            except OSError:
                continue
            with connection:
                try:
                    for chunk in itertools.islice(itertools.cycle(self.chunks), 600):
                        if self.stop.wait(self.pause):
                            break
                        connection.sendall(chunk)
                except OSError:
                    pass

    def __enter__(self) -> HeadTrickle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.listener.close()


@pytest.mark.parametrize(
    ("chunks", "pause"),
    [
        ([b"HTTP/1.1 200 OK\r\n"] + [b"X"] * 599, 0.05),  # a head that never ends, a byte at a time
        ([bytes([byte]) for byte in b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"], 0.2),  # a dripping head
        ([b"HTTP/1.1 100 Continue\r\n\r\n" * 50], 0.01),  # informational heads without end
    ],
    ids=["endless-field", "dripping-status-line", "continue-flood"],
)
def test_a_head_that_does_not_finish_is_a_timeout(chunks, pause):
    """Each read is quick, the head never completes: the request still ends at its deadline."""
    with HeadTrickle(chunks, pause) as server:
        backend = RemoteBackend(f"http://127.0.0.1:{server.port}/query", environ={})
        started = time.monotonic()
        with pytest.raises(QueryTimeout, match="did not finish answering within 1 s"):
            run_query(backend, "ASK {}", timeout=1.0)
        assert time.monotonic() - started < 4


def test_publish_waits_for_an_answer_head_no_longer_than_its_timeout(runner, built_store):
    with HeadTrickle([b"HTTP/1.1 201 Created\r\n"] + [b"X"] * 599, 0.05) as server:
        started = time.monotonic()
        result = invoke(runner, built_store, "publish", "--endpoint", f"http://127.0.0.1:{server.port}/store",
                        "--no-swap", "--timeout", "1")  # fmt: skip
        assert time.monotonic() - started < 5
    assert result.exit_code == 1
    assert "did not finish answering within 1 s" in result.output


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        # deep nesting: the reader refuses it, no RecursionError
        (b'{"head":{"vars":[]},"results":{"bindings":[]},"x":' + b"[" * 5000 + b"]" * 5000 + b"}", "not valid"),
        # a key given twice in a boolean answer, which its reader would not look past
        (b'{"head":{},"boolean":true,"boolean":false}', "a key given twice"),
        (b'{"head":{},"boolean":true,"x":[' + b"[]," * 30000 + b"[]]}", "a boolean answer of"),
    ],
    ids=["deep", "repeated-key", "large-boolean"],
)
def test_a_json_answer_of_an_odd_shape_is_refused_with_a_message(body, problem):
    error = remote_error(Stub(body=body, content_type=JSON), "ASK {}" if b"boolean" in body else "SELECT * {}")
    assert isinstance(error, QueryFailed)
    assert "not valid SPARQL JSON results" in str(error) and problem in str(error)


def test_a_large_answer_is_read_without_decoding_it_in_python_first(monkeypatch):
    """The answer is read by one reader: Python's json module is never asked to decode it."""
    import json as json_module

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("the answer was decoded in Python")

    monkeypatch.setattr(json_module, "loads", refuse)
    rows = ",".join(f'{{"n":{{"type":"literal","value":"{n}"}}}}' for n in range(2000))
    body = ('{"head":{"vars":["n"]},"results":{"bindings":[' + rows + "]}}").encode()
    with stub_server(Stub(body=body, content_type=JSON)) as running:
        result = run_query(RemoteBackend(f"{running.url}/query", environ={}), "SELECT ?n {}", timeout=10)
    assert isinstance(result, SelectResult) and len(result.rows) == 2000


def test_a_real_oxigraph_timeout_is_reported(built_store):
    """The Oxigraph server stops a slow query at --timeout-s and writes into a 200 answer."""
    database = StoreLayout(built_store[1]).current_generation() / DATABASE  # type: ignore[operator]
    with OxigraphServer(database, port=free_port(), timeout=1) as server:
        server.wait_ready()
        backend = RemoteBackend(f"{server.url}/query", environ={})
        with pytest.raises(QueryTimeout, match="stopped the query at its own time limit"):
            run_query(backend, "SELECT (COUNT(*) AS ?n) { ?a ?b ?c . ?d ?e ?f . ?g ?h ?i }", timeout=20)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--graph", GRAPH], "--graph needs --endpoint: the embedded store keeps everything in its default graph"),
        (["--endpoint", "localhost:7878"], "--endpoint must be an http:// or https:// URL, not 'localhost:7878'"),
        (["--endpoint", "http://127.0.0.1:9/q", "--graph", "g"], "--graph must be an absolute IRI"),
    ],
)
def test_option_mistakes_are_usage_errors(runner, built_store, args, message):
    result = invoke(runner, built_store, "sparql", "ASK {}", *args)
    assert result.exit_code == 2
    assert message in result.stderr


def test_remote_backend_checks_at_once():
    with pytest.raises(UsageProblem, match="basic authentication needs both"):
        RemoteBackend("http://127.0.0.1:9/query", environ={"SOTAKG_PASSWORD": "p"})
    assert RemoteBackend("http://h/q", GRAPH, environ={}).label == f"the endpoint http://h/q (graph <{GRAPH}>)"


def test_results_are_the_neutral_kinds(endpoint):
    backend = RemoteBackend(endpoint, environ={})
    select = run_query(backend, "SELECT ?v { id:SOTA-017 sota:currentVersion/sota:versionNumber ?v }")
    assert isinstance(select, SelectResult) and select.texts() == [("2",)]
    graph = run_query(backend, "CONSTRUCT WHERE { id:SOTA-017 sota:currentVersion ?v }")
    assert isinstance(graph, GraphResult) and len(graph) == 1


# ------------------------------------------------------------------------ validate and console remotely


@pytest.mark.parametrize("graph", [None, GRAPH], ids=["default-graph", "named-graph"])
def test_validate_on_the_endpoint_reports_what_the_embedded_store_reports(runner, built_store, endpoint, graph):
    local = invoke(runner, built_store, "validate", "--format", "json")
    extra = ["--graph", graph] if graph else []
    remote = invoke(runner, built_store, "validate", "--format", "json", "--endpoint", endpoint, *extra)
    assert (local.exit_code, remote.exit_code) == (0, 0), remote.output
    assert json.loads(remote.stdout)["findings"] == json.loads(local.stdout)["findings"]
    assert len(json.loads(local.stdout)["findings"]) == 8  # the shipped warnings and the registry-size info


def test_validate_on_the_endpoint_finds_a_violation_there(runner, tmp_path, built_store):
    data, store = built_store
    with oxigraph(tmp_path / "db") as base:
        publish(data, store, f"{base}/store", environ={})
        remove = "DELETE WHERE { <https://w3id.org/sotakg/id/SOTA-049> <http://purl.org/dc/terms/title> ?t }"
        import urllib.request

        request = urllib.request.Request(
            f"{base}/update", data=remove.encode(), headers={"Content-Type": "application/sparql-update"}
        )
        urllib.request.urlopen(request, timeout=10).read()
        result = invoke(runner, built_store, "validate", "--endpoint", f"{base}/query")
    assert result.exit_code == 1
    assert "[practice-title]" in result.output and "(SOTA-049)" in result.output


def test_validate_graph_without_endpoint_is_a_usage_error(runner, built_store):
    result = invoke(runner, built_store, "validate", "--graph", GRAPH)
    assert result.exit_code == 2
    assert "--graph needs --endpoint" in result.output


def test_console_runs_piped_statements_on_the_endpoint(runner, built_store, endpoint):
    script = ".run practices-citing paper=LIT-051\nSELECT (COUNT(*) AS ?n) WHERE { ?s a sota:Practice };\n"
    data, store = built_store
    result = runner.invoke(
        cli,
        ["--data", str(data), "--store", str(store), "console", "-f", "csv", "--endpoint", endpoint],
        input=script,
        env=NO_CREDENTIALS,
    )
    assert result.exit_code == 0, result.output
    assert "SOTA-046" in result.stdout and "SOTA-076" in result.stdout
    assert result.stdout.endswith("\nn\n42\n")


def test_control_characters_from_a_server_reach_the_terminal_escaped(runner):
    """A literal or an error page holding escape sequences and bidi overrides: the table and the
    message show them as escapes; nothing the server sends moves the cursor or retitles the window."""
    from sotakg.cli import cli

    hostile = "a\x1b[2J\x1b]0;pwned\x07b\u202eevil"
    row = json.dumps({"head": {"vars": ["v"]}, "results": {"bindings": [{"v": {"type": "literal", "value": hostile}}]}})
    with stub_server(Stub(body=row.encode(), content_type=JSON)) as running:
        table = runner.invoke(cli, ["sparql", "SELECT ?v {}", "--endpoint", f"{running.url}/query"], env=NO_CREDENTIALS)
    assert table.exit_code == 0, table.output
    assert "a\\x1b[2J\\x1b]0;pwned\\x07b\\u202eevil" in table.output
    assert not any(character in table.output for character in "\x1b\x07\u202e")
    with stub_server(Stub(status=500, body=hostile.encode(), content_type="text/plain")) as running:
        failed = runner.invoke(
            cli, ["sparql", "SELECT ?v {}", "--endpoint", f"{running.url}/query"], env=NO_CREDENTIALS
        )
    assert failed.exit_code == 1
    assert "\\x1b[2J" in failed.output and not any(character in failed.output for character in "\x1b\x07\u202e")


def test_validate_on_a_silent_server_stops_at_its_own_timeout(runner, built_store):
    with silent_port() as port:
        started = time.monotonic()
        result = invoke(runner, built_store, "validate", "--endpoint", f"http://127.0.0.1:{port}/query",
                        "--timeout", "0.5")  # fmt: skip
        assert time.monotonic() - started < 5
    assert result.exit_code == 1
    assert "did not answer within 0.5 s; raise --timeout" in result.output


@pytest.mark.parametrize(
    "challenge",
    [
        'Digest realm="r", nonce="n1", qop="auth-int"',
        'Digest realm="r", nonce="n1", algorithm=SHA-512-256',
        "Negotiate",
    ],
)
def test_a_challenge_sotakg_cannot_answer_is_not_called_refused_credentials(challenge):
    stub = Stub(status=401, body=b"who are you?", headers={"WWW-Authenticate": challenge})
    with stub_server(stub) as running:
        backend = RemoteBackend(f"{running.url}/query", environ={"SOTAKG_USER": "u", "SOTAKG_PASSWORD": "p"})
        with pytest.raises(QueryFailed) as caught:
            run_query(backend, "ASK {}", timeout=5)
    assert "in a form sotakg does not answer, so the credentials from SOTAKG_USER/SOTAKG_PASSWORD were not sent" in (
        str(caught.value)
    )
    assert "were refused" not in str(caught.value)
    assert all("Authorization" not in seen.headers for seen in stub.requests)
