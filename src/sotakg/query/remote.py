"""Remote SPARQL 1.1 servers: HTTP with a deadline, credentials from the environment, and
``RemoteBackend``, the query backend behind ``--endpoint``.

Every request has a time limit on the whole exchange (connecting, waiting, and reading the answer)
and a cap on the answer's size: a SPARQL server streams results, and an unbounded SELECT can send
gigabytes in seconds. Redirects are not followed, so credentials never travel to another address.

An answer is read strictly. The Oxigraph server, for one, reports a query stopped at its time limit
by writing an error message into a body it has already begun with HTTP 200; such an answer, or one
cut short, is an error here, never a partial result.
"""

from __future__ import annotations

import base64
import ipaddress
import json
import os
import socket
import time
import urllib.parse
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import (
    EndpointError,
    EndpointTimeout,
    QueryFailed,
    QueryTimeout,
    UsageProblem,
)
from ..graph.vocab import PREFIXES
from .results import AskResult, GraphResult, QueryResult, SelectResult, parse_graph, parse_sparql_results
from .sparql import (
    DEFAULT_TIMEOUT,
    MAX_DEPTH,
    QUERY_FORMS,
    Bindings,
    check_query,
    syntax_error,
    tokens,
    values_clause,
)

#: Environment variables holding credentials: basic authentication, or a bearer token.
ENV_USER = "SOTAKG_USER"
ENV_PASSWORD = "SOTAKG_PASSWORD"
ENV_TOKEN = "SOTAKG_TOKEN"
CREDENTIALS_HINT = (
    f"set {ENV_USER} and {ENV_PASSWORD} (basic authentication) or {ENV_TOKEN} (a bearer token) in the environment"
)

#: Largest answer read from an endpoint (bytes) before the request is abandoned.
DEFAULT_MAX_ANSWER = 512 * 1024 * 1024
#: How much of an error answer is read and shown.
ERROR_BODY_BYTES = 64 * 1024
EXCERPT_CHARS = 200
CHUNK = 1 << 16

SPARQL_JSON = "application/sparql-results+json"
N_TRIPLES = "application/n-triples"
_JSON_TYPES = frozenset({SPARQL_JSON, "application/json"})
#: Media types of a CONSTRUCT/DESCRIBE answer we can read, and how (N-Triples is a subset of Turtle).
_GRAPH_TYPES = {
    N_TRIPLES: "ntriples",
    "text/plain": "ntriples",
    "text/turtle": "turtle",
    "application/x-turtle": "turtle",
}
#: What the Oxigraph server writes into a 200 answer when it stops a query at its time limit.
_CANCELLED_MARKS = (b"has been cancelled", b"timed out")


# ------------------------------------------------------------------------------------------ URLs


def check_endpoint(url: str, option: str = "--endpoint") -> str:
    """``url`` if it is an absolute http(s) URL with a host; UsageProblem otherwise."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UsageProblem(f"{option} must be an http:// or https:// URL, not {url!r}")
    if parts.username or parts.password:
        raise UsageProblem(f"{option} must not carry credentials (user:password@); {CREDENTIALS_HINT}")
    if parts.fragment:
        raise UsageProblem(f"{option} must not have a #fragment: {url!r}")
    return url


def check_graph_iri(iri: str) -> str:
    """``iri`` if it is an absolute IRI (``--graph``); UsageProblem otherwise."""
    from pyoxigraph import NamedNode

    scheme, colon, _ = iri.partition(":")
    if not colon or not scheme or not scheme[0].isalpha():
        raise UsageProblem(f"--graph must be an absolute IRI such as https://example.org/sotakg, not {iri!r}")
    try:
        NamedNode(iri)
    except ValueError as error:
        raise UsageProblem(f"--graph must be an absolute IRI, not {iri!r}: {error}") from None
    return iri


def with_parameters(url: str, parameters: list[tuple[str, str | None]]) -> str:
    """``url`` with query parameters appended (``(name, None)`` adds a bare ``name``, as in ``?default``)."""
    if not parameters:
        return url
    encoded = "&".join(
        urllib.parse.quote(name, safe="-")
        if value is None
        else f"{urllib.parse.quote(name, safe='-')}={urllib.parse.quote(value, safe='')}"
        for name, value in parameters
    )
    parts = urllib.parse.urlsplit(url)
    query = f"{parts.query}&{encoded}" if parts.query else encoded
    return urllib.parse.urlunsplit(parts._replace(query=query))


def is_loopback(host: str) -> bool:
    """Whether ``host`` names this machine only (127.0.0.0/8, ::1, localhost)."""
    host = host.strip("[]")
    if host.lower() in ("localhost", "localhost.localdomain") or host.lower().endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


# ------------------------------------------------------------------------------------------ credentials


def auth_headers(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The Authorization header from the environment: ``SOTAKG_TOKEN`` (bearer) or ``SOTAKG_USER`` with
    ``SOTAKG_PASSWORD`` (basic); none when unset. Credentials never come from command-line options, which
    other users of the machine can read in the process list."""
    env = os.environ if environ is None else environ
    token, user, password = env.get(ENV_TOKEN), env.get(ENV_USER), env.get(ENV_PASSWORD)
    if token and (user or password):
        raise UsageProblem(f"set {ENV_TOKEN} or {ENV_USER}/{ENV_PASSWORD}, not both")
    if token:
        return {"Authorization": f"Bearer {token}"}
    if user is None and password is None:
        return {}
    if not user or password is None:
        raise UsageProblem(f"basic authentication needs both {ENV_USER} and {ENV_PASSWORD}")
    pair = base64.b64encode(f"{user}:{password}".encode()).decode("ascii")
    return {"Authorization": f"Basic {pair}"}


def credentials_source(environ: Mapping[str, str] | None = None) -> str | None:
    """Which variables the credentials came from, for messages (None when there are none)."""
    env = os.environ if environ is None else environ
    if env.get(ENV_TOKEN):
        return ENV_TOKEN
    if env.get(ENV_USER):
        return f"{ENV_USER}/{ENV_PASSWORD}"
    return None


def cleartext_warning(url: str, environ: Mapping[str, str] | None = None) -> str | None:
    """A warning when credentials would cross the network unencrypted (http:// to another machine)."""
    parts = urllib.parse.urlsplit(url)
    source = credentials_source(environ)
    if source and parts.scheme == "http" and not is_loopback(parts.hostname or ""):
        return f"the credentials from {source} are sent unencrypted to {parts.hostname}; use an https:// URL"
    return None


# ------------------------------------------------------------------------------------------ HTTP


@dataclass(frozen=True)
class HttpAnswer:
    """An HTTP answer: status, reason, media type (no parameters), headers of interest and body."""

    status: int
    reason: str
    media_type: str
    body: bytes
    location: str | None = None

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300

    def excerpt(self, limit: int = EXCERPT_CHARS) -> str:
        """The start of the body on one line, for messages."""
        text = " ".join(self.body.decode("utf-8", "replace").split())
        return text if len(text) <= limit else text[: limit - 1] + "…"


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """Redirects are reported, not followed: following one would send credentials to another address
    (urllib keeps the Authorization header) and would turn a POST into a GET."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


def _opener(url: str) -> urllib.request.OpenerDirector:
    handlers: list[urllib.request.BaseHandler] = [_NoRedirect()]
    if is_loopback(urllib.parse.urlsplit(url).hostname or ""):
        # A proxy cannot reach this machine's loopback, whatever http_proxy says.
        handlers.append(urllib.request.ProxyHandler({}))
    return urllib.request.build_opener(*handlers)


def _socket_of(response: Any) -> socket.socket | None:
    """The socket under an http.client response, to bound each read by the time left."""
    raw = getattr(getattr(response, "fp", None), "raw", None)
    sock = getattr(raw, "_sock", None)
    return sock if isinstance(sock, socket.socket) else None


def _read_body(response: Any, deadline: float, limit: int, strict: bool, url: str, timeout: float) -> bytes:
    """Read a body until its end, the deadline (EndpointTimeout) or ``limit`` bytes (EndpointError when
    ``strict``, else the body is cut there). A body that ends before its announced end is an error."""
    import http.client

    sock = _socket_of(response)
    chunks: list[bytes] = []
    size = 0
    try:
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise EndpointTimeout(f"{url} did not finish answering within {timeout:g} s")
            if sock is not None:
                sock.settimeout(remaining)
            chunk = response.read1(CHUNK)
            if not chunk:
                break
            size += len(chunk)
            if size > limit:
                if not strict:
                    chunks.append(chunk[: len(chunk) - (size - limit)])
                    return b"".join(chunks)
                raise EndpointError(
                    f"the answer from {url} is larger than {limit} bytes; it was abandoned (narrow the query, "
                    f"or add LIMIT)"
                )
            chunks.append(chunk)
    except TimeoutError:
        raise EndpointTimeout(f"{url} did not finish answering within {timeout:g} s") from None
    except (http.client.HTTPException, ConnectionError) as error:
        if strict:
            raise EndpointError(f"the answer from {url} was cut short ({type(error).__name__})") from None
    if strict and getattr(response, "length", None):
        raise EndpointError(f"the answer from {url} was cut short ({response.length} bytes missing)")
    return b"".join(chunks)


def _connection_problem(url: str, reason: object, timeout: float) -> EndpointError:
    """A clear message for a request that got no HTTP answer at all."""
    import errno
    import ssl

    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or url
    where = f"{host}:{parts.port or (443 if parts.scheme == 'https' else 80)}"
    if isinstance(reason, TimeoutError):
        return EndpointTimeout(f"{url} did not answer within {timeout:g} s")
    if isinstance(reason, ConnectionRefusedError):
        return EndpointError(f"connection refused by {where}: no server listens there (is it running?)")
    if isinstance(reason, socket.gaierror):
        return EndpointError(f"cannot find the host {host} (name lookup failed: {reason.strerror})")
    if isinstance(reason, ssl.SSLError | ssl.CertificateError):
        return EndpointError(f"TLS failed with {where}: {reason}")
    if isinstance(reason, ConnectionError):
        return EndpointError(f"{where} closed the connection without answering ({type(reason).__name__})")
    if isinstance(reason, OSError) and reason.errno in (errno.ENETUNREACH, errno.EHOSTUNREACH):
        return EndpointError(f"{where} is unreachable from this machine ({reason.strerror})")
    return EndpointError(f"cannot reach {url}: {reason}")


def http_request(
    method: str,
    url: str,
    *,
    body: bytes | None = None,
    headers: Mapping[str, str] | None = None,
    timeout: float = DEFAULT_TIMEOUT,
    max_bytes: int = DEFAULT_MAX_ANSWER,
) -> HttpAnswer:
    """Send one HTTP request and read the whole answer within ``timeout`` seconds in all.

    Any status comes back as an HttpAnswer (the body of a non-2xx answer is cut to its first
    ERROR_BODY_BYTES). No answer at all is an EndpointError saying why (refused, unknown host,
    unreachable, closed) or an EndpointTimeout; a 2xx body over ``max_bytes`` or cut short is an
    EndpointError.
    """
    import http.client
    import urllib.error

    deadline = time.monotonic() + timeout
    request = urllib.request.Request(url, data=body, method=method, headers=dict(headers or {}))
    try:
        response = _opener(url).open(request, timeout=timeout)
    except urllib.error.HTTPError as error:
        try:
            data = _read_body(error.fp or error, deadline, ERROR_BODY_BYTES, False, url, timeout)
        finally:
            error.close()
        return HttpAnswer(
            error.code,
            str(error.reason or ""),
            error.headers.get_content_type() if error.headers else "",
            data,
            error.headers.get("Location") if error.headers else None,
        )
    except urllib.error.URLError as error:
        raise _connection_problem(url, error.reason, timeout) from None
    except (TimeoutError, ConnectionError) as error:
        raise _connection_problem(url, error, timeout) from None
    except http.client.HTTPException as error:
        raise EndpointError(f"{url} did not answer in HTTP ({type(error).__name__}: {error})") from None
    with response:
        data = _read_body(response, deadline, max_bytes, True, url, timeout)
        return HttpAnswer(
            response.status,
            str(response.reason or ""),
            response.headers.get_content_type(),
            data,
            response.headers.get("Location"),
        )


def refusal_message(answer: HttpAnswer, url: str, environ: Mapping[str, str] | None = None) -> str:
    """What a non-2xx answer means, with what to do where that is clear."""
    head = f"{url} answered HTTP {answer.status} {answer.reason}".rstrip()
    excerpt = answer.excerpt()
    text = f"{head}: {excerpt}" if excerpt else head
    if answer.status in (401, 403):
        source = credentials_source(environ)
        if source:
            return f"{text}\nthe credentials from {source} were refused or lack the right; check them"
        return f"{text}\nthe server wants credentials: {CREDENTIALS_HINT}"
    if 300 <= answer.status < 400:
        target = f" to {answer.location}" if answer.location else ""
        return f"{text}\nit redirects{target}; give that URL instead (redirects are not followed)"
    return text


# ------------------------------------------------------------------------------------------ queries


def declared_prefixes(text: str) -> set[str]:
    """Prefixes the query text declares itself (``PREFIX x: <...>``)."""
    declared = set()
    previous: str | None = None
    for token in tokens(text):
        if previous == "PREFIX" and token.kind == "pname":
            declared.add(token.text.split(":", 1)[0])
        previous = token.text.upper() if token.kind == "word" else None
    return declared


def prologue(text: str, prefixes: Mapping[str, str]) -> str:
    """PREFIX declarations for the predeclared prefixes the query does not declare itself: the remote
    server knows none of them."""
    own = declared_prefixes(text)
    return "".join(f"PREFIX {name}: <{iri}>\n" for name, iri in prefixes.items() if name not in own)


def with_values(text: str, bindings: Bindings) -> str:
    """The query with ``bindings`` stated as a ``VALUES`` block (``sparql.values_clause``: terms written
    by pyoxigraph, escaped) placed first in the query's WHERE group.

    There, as with pyoxigraph's substitutions, the values are in scope for the group's FILTERs, BINDs
    and GROUP BY; a block after the whole query would only be joined with its finished answer. A
    query without a WHERE group to hold it (``DESCRIBE <x>``, ``CONSTRUCT WHERE { ... }``, which
    has no FILTER) gets the block at its end, which is equivalent there.
    """
    block = values_clause(bindings)
    form: str | None = None
    depth = 0
    groups_seen = 0
    for token in tokens(text):
        if form is None:
            if token.kind == "word" and token.text.upper() in QUERY_FORMS:
                form = token.text.upper()
            continue
        if form == "CONSTRUCT" and groups_seen == 0 and depth == 0 and token.kind == "word":
            if token.text.upper() == "WHERE":
                break  # the short form: its template is its pattern
        if token.kind != "punct":
            continue
        if token.text == "{" and depth == 0:
            groups_seen += 1
            # CONSTRUCT's first top-level group is its template; the WHERE group comes next.
            if groups_seen == (2 if form == "CONSTRUCT" else 1):
                at = token.offset + 1
                return text[:at] + block + text[at:]
        if token.text in "({[":
            depth += 1
        elif token.text in ")}]":
            depth = max(depth - 1, 0)
    return text + block


def check_syntax(text: str, prefixes: Mapping[str, str]) -> None:
    """Parse the query locally, so a syntax error names the user's line and column (the text sent
    has PREFIX lines in front). Parsing an in-memory store's query evaluates nothing yet."""
    from pyoxigraph import Store

    try:
        Store().query(text, prefixes=dict(prefixes))
    except SyntaxError as error:
        raise syntax_error(str(error), text) from None
    except Exception:  # noqa: BLE001 - anything but syntax is for the server to judge
        pass


@dataclass
class RemoteBackend:
    """A SPARQL 1.1 query endpoint (``--endpoint URL``), spoken to with the SPARQL 1.1 Protocol.

    A query is POSTed as ``application/sparql-query`` with the predeclared prefixes in front;
    ``graph`` is passed as ``default-graph-uri``; bindings become a ``VALUES`` block at the head of the WHERE group
    (``with_values``: escaped terms, never raw text). SELECT and ASK ask for SPARQL JSON
    results, CONSTRUCT and DESCRIBE for N-Triples. Credentials come from the environment
    (``auth_headers``); ``environ`` replaces ``os.environ`` for that.
    """

    endpoint: str
    graph: str | None = None
    prefixes: Mapping[str, str] = field(default_factory=lambda: dict(PREFIXES))
    max_depth: int = MAX_DEPTH
    max_bytes: int = DEFAULT_MAX_ANSWER
    environ: Mapping[str, str] | None = None

    def __post_init__(self) -> None:
        check_endpoint(self.endpoint)
        if self.graph is not None:
            check_graph_iri(self.graph)
        auth_headers(self.environ)  # fail now, not at the first query, on half-set credentials

    @property
    def label(self) -> str:
        graph = f" (graph <{self.graph}>)" if self.graph else ""
        return f"the endpoint {self.endpoint}{graph}"

    def request_url(self) -> str:
        """The endpoint URL with the protocol's ``default-graph-uri`` when a graph is chosen."""
        return with_parameters(self.endpoint, [("default-graph-uri", self.graph)] if self.graph else [])

    def run(self, text: str, bindings: Bindings | None = None, timeout: float = DEFAULT_TIMEOUT) -> QueryResult:
        """Check the query, send it, and read the answer strictly."""
        form = check_query(text, self.max_depth)
        check_syntax(text, self.prefixes)
        sent = prologue(text, self.prefixes) + (with_values(text, bindings) if bindings else text)
        graph_form = form in ("CONSTRUCT", "DESCRIBE")
        headers = {
            "Content-Type": "application/sparql-query",
            "Accept": f"{N_TRIPLES}, text/turtle;q=0.5" if graph_form else SPARQL_JSON,
            **auth_headers(self.environ),
        }
        url = self.request_url()
        try:
            answer = http_request(
                "POST", url, body=sent.encode("utf-8"), headers=headers, timeout=timeout, max_bytes=self.max_bytes
            )
        except EndpointTimeout as error:
            raise QueryTimeout(f"{error}; raise --timeout or narrow the query") from None
        except EndpointError as error:
            raise QueryFailed(str(error)) from None
        if answer.status != 200:
            raise QueryFailed(refusal_message(answer, url, self.environ))
        if graph_form:
            return self._graph(answer)
        return self._table(answer, form)

    def _broken(self, answer: HttpAnswer, what: str, detail: str) -> Exception:
        tail = " ".join(answer.body[-300:].decode("utf-8", "replace").split())
        if any(mark in answer.body[-2000:].lower() for mark in _CANCELLED_MARKS):
            return QueryTimeout(
                f"{self.label} stopped the query at its own time limit and sent a cut-short answer ending "
                f"{tail[-120:]!r}; narrow the query"
            )
        return QueryFailed(f"{self.label} sent an answer that is not valid {what} ({detail}); nothing is shown")

    def _table(self, answer: HttpAnswer, form: str | None) -> SelectResult | AskResult:
        if answer.media_type not in _JSON_TYPES:
            raise QueryFailed(
                f"{self.label} answered with {answer.media_type or 'no media type'}, not {SPARQL_JSON}: "
                f"{answer.excerpt()}"
            )
        try:
            document = json.loads(answer.body.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as error:
            raise self._broken(answer, "SPARQL JSON results", str(error)) from None
        problem = _json_results_problem(document, form)
        if problem:
            raise self._broken(answer, "SPARQL JSON results", problem)
        try:
            return parse_sparql_results(answer.body, "json")
        except (ValueError, SyntaxError) as error:
            raise self._broken(answer, "SPARQL JSON results", str(error)) from None

    def _graph(self, answer: HttpAnswer) -> GraphResult:
        syntax = _GRAPH_TYPES.get(answer.media_type)
        if syntax is None:
            raise QueryFailed(
                f"{self.label} answered with {answer.media_type or 'no media type'}, not {N_TRIPLES}: "
                f"{answer.excerpt()}"
            )
        try:
            return parse_graph(answer.body, syntax)
        except (ValueError, SyntaxError) as error:
            raise self._broken(answer, syntax, str(error)) from None


def _json_results_problem(document: Any, form: str | None) -> str | None:
    """Why a decoded JSON document is not the SPARQL results of a ``form`` query, or None."""
    if not isinstance(document, dict) or not isinstance(document.get("head"), dict):
        return "no head"
    if form == "ASK":
        return None if isinstance(document.get("boolean"), bool) else "an ASK answer needs a boolean"
    results = document.get("results")
    if "boolean" in document or not isinstance(results, dict) or not isinstance(results.get("bindings"), list):
        return "a SELECT answer needs results.bindings"
    if not isinstance(document["head"].get("vars", []), list):
        return "head.vars is not a list"
    return None


FETCH_GRAPH_QUERY = "CONSTRUCT { ?s ?p ?o } WHERE { ?s ?p ?o }"


def fetch_graph(
    endpoint: str,
    graph: str | None = None,
    timeout: float = DEFAULT_TIMEOUT,
    max_bytes: int = DEFAULT_MAX_ANSWER,
    environ: Mapping[str, str] | None = None,
) -> bytes:
    """The whole graph of ``endpoint`` (its default graph, or ``graph``) as N-Triples, fetched with one
    CONSTRUCT query and read strictly; for checking a remote graph with the shapes."""
    from pyoxigraph import RdfFormat, serialize

    backend = RemoteBackend(endpoint, graph, max_bytes=max_bytes, environ=environ)
    result = backend.run(FETCH_GRAPH_QUERY, None, timeout)
    if not isinstance(result, GraphResult):
        raise QueryFailed(f"{backend.label} answered a CONSTRUCT query with something other than triples")
    return serialize(result.triples, format=RdfFormat.N_TRIPLES) or b""
