"""The guard in front of ``sotakg serve``: a small reverse proxy that screens every request before the
Oxigraph server sees it, runs a bounded number of queries at once, and passes answers back complete
or visibly broken.

The Oxigraph server runs whatever query it gets: ``SERVICE <http://...>`` makes it fetch from the
network, and a pathologically large query overflows its stack and kills it. It has no option to
turn either off, so the server listens on a loopback port only this process knows, and this proxy,
on the address users see, forwards only what passes:

* ``GET``/``HEAD`` of any path (the query page ``/``, its assets, ``/query?query=...``; HEAD is asked
  of the server as GET, and only the headers are passed on). Every ``query`` parameter goes through
  ``sparql.check_query`` first: SPARQL Update is refused with 403; ``SERVICE``, ``LOAD``,
  ``FROM``/``FROM NAMED``, over-deep nesting and over-large queries with 400, as plain text saying why.
* ``POST /query`` (and ``/sparql``, where the query page sends its queries) with an
  ``application/sparql-query`` body or an ``application/x-www-form-urlencoded`` form, screened the
  same way; other media types and encoded bodies are refused (415).
* Anything else (``/update``, Graph Store ``PUT``/``POST``/``DELETE``, other methods) is answered 403
  and never forwarded.

At most ``max_concurrent`` queries are forwarded at once; up to ``DEFAULT_WAITING`` more wait their turn
in order of arrival (at most ``wait_seconds``, and only while the queue ahead drains within that at the
recent pace) and the rest are answered 503 with Retry-After at once (``Turns``). With an ``engine``
(``serve.Engine``), a query that passes its time gets 504 and the engine holding it is restarted (the
server cannot cancel a running query); while it restarts, queries get 503 with Retry-After.

A request body over ``--max-request-bytes`` is refused with 413 before it is read. An answer over
``--max-result-bytes`` that announces its length, or that goes to an HTTP/1.0 client (no chunked
encoding: it is buffered up to the cap), is answered 502 instead. Otherwise it is streamed through;
once it passes the cap the proxy stops and closes the connection without finishing the answer (no
final chunk), so the client sees a truncated answer rather than a short one that looks complete, and
a line on standard error names the option. A turn ends when the engine has sent its answer, not
when the client has read it: what a slow client has not taken yet waits in memory (``_Relay``; all
clients together at most ``max_buffered_bytes``, past which a slow client's answer is cut off), and
it has CLIENT_SECONDS to take the rest. A request has HEAD_SECONDS for its line and fields and
CLIENT_SECONDS in all to arrive (``Watchdog``), and at most ``max_connections`` clients are served at
once, a quarter of them from any one address (each holds a thread). When all are taken, the
connection idle the longest (waiting for its request, or the rest of it) is closed to make room; when
none is idle, the next one is answered 503 and closed. The service description leaves out
``sd:BasicFederatedQuery``, which the guard refuses.
"""

from __future__ import annotations

import collections
import functools
import http.client
import http.server
import os
import re
import socket
import socketserver
import sys
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..errors import QueryRefused, QuerySyntaxError, ServeError
from ..query.sparql import MAX_DEPTH, check_query
from .wire import MAX_REQUEST_FIELD_BYTES, EngineAnswer, EngineConnection, Headers, read_fields

#: Largest request body (a POSTed query or form) accepted, in bytes (``--max-request-bytes``).
DEFAULT_MAX_REQUEST = 1024 * 1024
#: Largest answer passed on to a client, in bytes (``--max-result-bytes``).
DEFAULT_MAX_RESULT = 64 * 1024 * 1024
#: Seconds a client has to send its request, in all (a client that trickles bytes holds a thread),
#: and to take an answer the engine has finished (``_Relay``).
CLIENT_SECONDS = 60.0
#: Seconds a connection may wait for its request line and header fields to arrive (the first
#: request, and each next one on a kept-alive connection): an idle or trickling client holds a
#: thread no longer than that. The body then has what is left of CLIENT_SECONDS.
HEAD_SECONDS = 10.0
#: Seconds a connection waits for its request before it may be closed to make room for a newcomer:
#: a client that has just connected has not had the time to send its request yet (170 clients at
#: once from one address lost one to a connection closed between its connect and its send).
IDLE_GRACE_SECONDS = 1.0
#: Client connections served at once; past them a new connection is answered 503 and closed.
DEFAULT_MAX_CONNECTIONS = 512
#: Seconds between two looks of the watchdog at the deadlines of requests being read.
WATCH_SECONDS = 0.25
CHUNK = 1 << 16
#: A Host header that can stand in a URL as it is: a name or IPv4 address, or a bracketed IPv6 one, and a port.
#: A request target in absolute form (RFC 9112 §3.2.2), and what follows its authority.
_PLAIN_AUTHORITY = re.compile(r"(?:[A-Za-z0-9.\-]{1,253}|\[[0-9A-Fa-f:.]{2,45}\])(?::[0-9]{1,5})?")
_ABSOLUTE_FORM = re.compile(r"[Hh][Tt][Tt][Pp][Ss]?://(?:" + _PLAIN_AUTHORITY.pattern + r")(?P<rest>[/?].*)?", re.S)
#: How much of a refused body is read and dropped, and for how long, before the connection closes.
DRAIN_BYTES = 64 * 1024 * 1024
DRAIN_SECONDS = 5.0
REQUEST_OPTION = "--max-request-bytes"
RESULT_OPTION = "--max-result-bytes"

QUERY_MEDIA = "application/sparql-query"
#: Where queries are POSTed: the protocol's /query, and /sparql, where the query page sends them.
QUERY_PATHS = ("/query", "/sparql")
#: Queries that may wait for a turn (beyond them: 503 at once), as many as the listen backlog.
DEFAULT_WAITING = 128
#: Seconds the guard waits, after the engine failed to answer, to learn whether it died.
ENGINE_EXIT_SECONDS = 0.5
#: Seconds a client is told to wait before it retries a 503.
RETRY_AFTER = 1
#: Idle connections to the engine kept for reuse beyond one per query that may run at once.
SPARE_ENGINE_CONNECTIONS = 4
#: Seconds an idle connection to the engine is kept for reuse: well below the Oxigraph server's 60 s,
#: after which it answers a 500 on the connection and closes it.
ENGINE_IDLE_SECONDS = 20.0
SD_FEDERATED = "http://www.w3.org/ns/sparql-service-description#BasicFederatedQuery"
FORM_MEDIA = "application/x-www-form-urlencoded"
#: Headers that describe one connection, not the message: never passed through.
_HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "proxy-connection",
        "te",
        "trailer",
        "trailers",
        "transfer-encoding",
        "upgrade",
        "host",
        "content-length",
        "expect",
        "accept-encoding",  # the proxy counts plain bytes, so the server sends them plain
        # The engine takes its own address from these (the service description's sd:endpoint):
        # a client must not set it. The guard is the proxy here, and it forwards no such claim.
        "forwarded",
        "x-forwarded-host",
        "x-forwarded-proto",
        "x-forwarded-for",
        "x-forwarded-port",
    }
)
#: Not passed on from the engine's answers: its own Server and Date, for which the guard's stand
#: (each is one field), and what describes its connection to the guard.
_NOT_RELAYED = _HOP_BY_HOP | {"server", "date"}


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


@dataclass(frozen=True)
class Refusal:
    """A request the guard answers itself: an HTTP status and a plain-text reason."""

    status: int
    message: str


@dataclass
class GuardSettings:
    """Where the Oxigraph server listens and what the guard lets through."""

    upstream_host: str
    upstream_port: int
    max_request_bytes: int = DEFAULT_MAX_REQUEST
    max_result_bytes: int = DEFAULT_MAX_RESULT
    max_depth: int = MAX_DEPTH
    #: Seconds a query may take (``--timeout``); past that the engine holding it is restarted.
    upstream_seconds: float = 40.0
    log: Callable[[str], object] = field(default=_stderr)
    #: Queries forwarded at once (``--max-concurrent``), and how many more may wait for a turn.
    max_concurrent: int = field(default_factory=lambda: os.cpu_count() or 1)
    max_waiting: int = 0  # 0: DEFAULT_WAITING, or four times max_concurrent if more
    #: Seconds a query waits for a turn before it is answered 503.
    wait_seconds: float = 5.0
    #: Bytes of answers held for clients that read slower than the engine writes, all clients
    #: together (0: four times ``max_result_bytes``); past it, such a client's answer is cut off.
    max_buffered_bytes: int = 0
    #: Client connections at once (each holds a thread), and seconds a client has to send a request.
    max_connections: int = DEFAULT_MAX_CONNECTIONS
    #: Connections one client address may hold at once (0: a quarter of ``max_connections``).
    max_connections_per_address: int = 0
    client_seconds: float = CLIENT_SECONDS
    head_seconds: float = HEAD_SECONDS
    #: Seconds a connection must have waited for its request before it may be closed to make room.
    idle_grace_seconds: float = IDLE_GRACE_SECONDS
    #: The engine behind the guard when it can restart (``serve.Engine``); None: a fixed upstream.
    engine: EngineLink | None = None
    #: How to reach the engine of a generation within some seconds, when not straight at its port
    #: (an engine in a network of its own: ``serve.OxigraphServer.connect``); None: a TCP connection.
    connect: Callable[[int, float], socket.socket] | None = None


class EngineLink(Protocol):
    """What the guard needs of a restartable engine: where it listens now, and a way to stop one."""

    def address(self, wait: float) -> tuple[str, int, int] | None:
        """(host, port, generation) of the running engine, waiting up to ``wait`` s; None if down."""
        ...

    def stop_runaway(self, generation: int, reason: str) -> None:
        """Kill the engine of ``generation`` (it holds a query past its time); it is restarted."""
        ...

    def has_stopped(self, generation: int, wait: float) -> bool:
        """Whether the engine of ``generation`` is gone (or replaced), waiting up to ``wait`` s to know."""
        ...


# ------------------------------------------------------------------------------------------ screening


#: A request line as RFC 9112 writes it: a token, one space, a target, one space, HTTP/digit.digit.
_REQUEST_LINE = re.compile(rb"([!#$%&'*+\-.^_`|~0-9A-Za-z]+) ([^ \t\r\n]+) HTTP/([0-9])\.([0-9])\r?\n")
#: Headers whose value the guard screens; each may come at most once, and is forwarded as screened.
_SCREENED = frozenset({"content-type", "content-encoding"})
_NOT_FORWARDED = _HOP_BY_HOP | _SCREENED
#: Headers that say what the body is or how long: two of one (in any spelling) make the request
#: mean one thing to the guard and another to the engine.
_ONCE = ("Content-Type", "Content-Encoding", "Content-Length", "Transfer-Encoding")


def _framing_refusal(target: str, headers: Headers) -> Refusal | None:
    """A refusal for a request the guard and the engine could read differently: a header of ``_ONCE``
    given twice, or a target with bytes that are not printable ASCII (http.client would fail on them)."""
    for name in _ONCE:
        if headers.count(name) > 1:
            return Refusal(400, f"refused: the request has more than one {name} header\n")
    if not (target.isascii() and target.isprintable()) or " " in target:
        return Refusal(400, "refused: percent-encode spaces, control characters and non-ASCII in the request target\n")
    return None


def screen_query(text: str, max_depth: int = MAX_DEPTH) -> Refusal | None:
    """Why a query text must not reach the server (403 for SPARQL Update, 400 for the rest of what
    ``check_query`` refuses), or None."""
    try:
        check_query(text, max_depth, predeclared=False)  # the Oxigraph server knows only the query's prefixes
    except QueryRefused as refused:
        return Refusal(403 if refused.writes else 400, f"refused: {refused}\n")
    except QuerySyntaxError as error:  # one the check finds itself: a string no reading of it takes
        return Refusal(400, f"refused: {error}\n")
    return None


#: Parameters a query string or form may hold: the protocol's requests have a handful (parsing a
#: megabyte of ``a&a&…`` takes a second of a guard thread).
MAX_PARAMETERS = 100
#: The protocol's spelling of FROM and FROM NAMED, which the guard refuses as it refuses those.
DATASET_PARAMETERS = ("default-graph-uri", "named-graph-uri")
_DATASET_REFUSAL = Refusal(
    400,
    "refused: default-graph-uri and named-graph-uri name a dataset the store would have to fetch, as FROM "
    "does; every query runs over the store's default graph: leave them out\n",
)
_ONE_QUERY_REFUSAL = Refusal(400, "refused: a request carries one query; send each query in a request of its own\n")


def _parameters(encoded: str, where: str) -> dict[str, list[str]] | Refusal:
    if encoded.count("&") >= MAX_PARAMETERS:
        return Refusal(400, f"refused: the {where} holds more than {MAX_PARAMETERS} parameters\n")
    try:
        return urllib.parse.parse_qs(encoded, keep_blank_values=True, strict_parsing=False, errors="strict")
    except (UnicodeDecodeError, ValueError):
        return Refusal(400, f"refused: the {where} is not valid percent-encoded UTF-8\n")


def screen_request(
    method: str,
    target: str,
    content_type: str | None,
    content_encoding: str | None,
    body: bytes,
    max_depth: int = MAX_DEPTH,
) -> Refusal | None:
    """Why a request must not reach the server, or None to forward it.

    ``target`` is the request target (path and query string), ``body`` the request body (empty for
    GET and HEAD). Queries are looked for wherever the SPARQL 1.1 Protocol puts them: ``query``
    parameters of the URL, a form body, or an ``application/sparql-query`` body.
    """
    if method in ("GET", "HEAD") and len(target) <= SCREENED_TARGETS_CHARS:
        return _screen_target(target, max_depth)  # a pure function of the URL: remembered
    return _screen(method, target, content_type, content_encoding, body, max_depth)


def asks_for_description(method: str, target: str) -> bool:
    """Whether a request asks for the service description: a GET or HEAD of a query path without a
    query, whose query string is read as the engine reads it (``%71uery=`` is a query too)."""
    if len(target) <= SCREENED_TARGETS_CHARS:
        return _remembered_asks_for_description(method, target)
    return _asks_for_description(method, target)


def _asks_for_description(method: str, target: str) -> bool:
    parts = urllib.parse.urlsplit(target)
    if method not in ("GET", "HEAD") or parts.path not in QUERY_PATHS:
        return False
    parameters = _parameters(parts.query, "query string")
    return not isinstance(parameters, Refusal) and "query" not in parameters


#: Request targets up to this long have the verdict on them remembered, the last ``SCREENED_TARGETS``.
SCREENED_TARGETS_CHARS = 8 * 1024
SCREENED_TARGETS = 1024


_remembered_asks_for_description = functools.lru_cache(maxsize=SCREENED_TARGETS)(_asks_for_description)


@functools.lru_cache(maxsize=SCREENED_TARGETS)
def _screen_target(target: str, max_depth: int) -> Refusal | None:
    return _screen("GET", target, None, None, b"", max_depth)


def _screen(
    method: str,
    target: str,
    content_type: str | None,
    content_encoding: str | None,
    body: bytes,
    max_depth: int,
) -> Refusal | None:
    parts = urllib.parse.urlsplit(target)
    found = _parameters(parts.query, "query string")
    if isinstance(found, Refusal):
        return found
    texts = list(found.get("query", []))
    if "update" in found:
        return Refusal(403, "refused: this server is read-only; SPARQL Update is not accepted\n")
    if any(name in found for name in DATASET_PARAMETERS):
        return _DATASET_REFUSAL
    if method in ("GET", "HEAD"):
        pass
    elif method == "POST" and parts.path in QUERY_PATHS:
        if (content_encoding or "identity").strip().lower() != "identity":
            return Refusal(415, "refused: send the query uncompressed (no Content-Encoding)\n")
        media = (content_type or "").split(";", 1)[0].strip().lower()
        if media == QUERY_MEDIA:
            try:
                texts.append(body.decode("utf-8"))
            except UnicodeDecodeError:
                return Refusal(400, "refused: the query is not valid UTF-8\n")
        elif media == FORM_MEDIA:
            try:
                form = _parameters(body.decode("ascii"), "form")
            except UnicodeDecodeError:
                return Refusal(400, "refused: the form is not valid percent-encoded UTF-8\n")
            if isinstance(form, Refusal):
                return form
            if "update" in form:
                return Refusal(403, "refused: this server is read-only; SPARQL Update is not accepted\n")
            if any(name in form for name in DATASET_PARAMETERS):
                return _DATASET_REFUSAL
            texts.extend(form.get("query", []))
        else:
            return Refusal(
                415, f"refused: POST /query takes a {QUERY_MEDIA} body or a {FORM_MEDIA} form with a query\n"
            )
    else:
        return Refusal(
            403,
            f"refused: {method} {parts.path}: this server is read-only; it answers GET and HEAD requests "
            f"and queries POSTed to /query\n",
        )
    if len(texts) > 1:  # the engine takes one; each screened would cost the check for nothing
        return _ONE_QUERY_REFUSAL
    return screen_query(texts[0], max_depth) if texts else None


# ------------------------------------------------------------------------------------------ the proxy


class GuardHandler(http.server.BaseHTTPRequestHandler):
    """One client connection: read the request, screen it, wait for a turn, forward it, and pass the
    answer back, complete or visibly broken."""

    server: GuardServer
    headers: Headers  # type: ignore[assignment]  # read by wire.read_fields, not the email package
    raw_requestline: bytes
    protocol_version = "HTTP/1.1"  # for chunked answers, so a cut-short answer is visibly cut short
    timeout = CLIENT_SECONDS  # every read and write of the client's socket (``setup``: the settings' own)
    server_version = "sotakg-guard"

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the base class's name
        pass  # no access log; refusals need none and caps are logged where they happen

    def date_time_string(self, timestamp: float | None = None) -> str:
        if timestamp is not None:
            return super().date_time_string(timestamp)
        global _date_field
        second = int(time.time())
        if _date_field[0] != second:  # formatting it costs more than the rest of a small answer's head
            _date_field = (second, super().date_time_string(second))
        return _date_field[1]

    def _plain(self, status: int, message: str, retry_after: int | None = None) -> None:
        body = message.encode("utf-8")
        self.close_connection = True
        self.send_response(status)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        if retry_after is not None:
            self.send_header("Retry-After", str(retry_after))
        self.send_header("Connection", "close")
        self.wfile.write(self._head() + (body if self.command != "HEAD" else b""))

    def _body(self) -> bytes | None:
        """The request body, or None once a refusal has been sent."""
        settings = self.server.settings
        if self.headers.get("Transfer-Encoding") is not None:  # an empty value too: framing is not guessed
            self._plain(411, "refused: send the request with a Content-Length, not chunked\n")
            return None
        raw = self.headers.get("Content-Length")
        if raw is None:
            return b""
        digits = raw.strip(" \t")
        # Only digits (int() would also take "+5", "5_0" or " 5 "), and not absurdly many.
        if not (digits.isascii() and digits.isdigit() and len(digits) <= 18):
            self._plain(400, "refused: the Content-Length is not a byte count\n")
            return None
        length = int(digits)
        if length > settings.max_request_bytes:
            self._plain(
                413,
                f"refused: the request body is {length} bytes, over the server's limit of "
                f"{settings.max_request_bytes} ({REQUEST_OPTION} of sotakg serve)\n",
            )
            self._drain(length)
            return None
        body = self.rfile.read(length)
        if len(body) < length:
            # The client ended its side before the length it announced (RFC 9112 §6.3: an incomplete
            # message): what came is not the request it meant, and is never screened nor forwarded.
            self.close_connection = True
            self._plain(400, f"refused: the request body ended after {len(body)} of its {length} bytes\n")
            return None
        return body

    def _drain(self, length: int) -> None:
        """Read and drop what the client is still sending (briefly), so closing does not reset the
        connection before it has read the refusal."""
        deadline = time.monotonic() + DRAIN_SECONDS
        try:
            self.wfile.flush()
            self.connection.settimeout(1.0)
            left = min(length, DRAIN_BYTES)
            while left > 0 and time.monotonic() < deadline:
                data = self.rfile.read1(min(left, CHUNK))
                if not data:
                    return
                left -= len(data)
        except OSError:
            return

    def setup(self) -> None:
        super().setup()
        self.connection.settimeout(self.server.settings.client_seconds)
        # Headers and body go out as separate writes: without this, Nagle's algorithm holds the second
        # for the client's delayed acknowledgement (tens of milliseconds per answer).
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        #: The connection to the engine this client's request is using (taken from the server's
        #: pool, given back once its answer is read to the end).
        self._in_use: tuple[tuple[str, int, int], EngineConnection] | None = None
        #: The answer being relayed, until it is read to its end or abandoned (``_abandon``).
        self._pending: tuple[EngineAnswer, EngineConnection, float, int] | None = None

    def parse_request(self) -> bool:
        """Read the request line and header fields strictly (``wire``); False once the connection
        is to be closed, after an error answer where one can be understood."""
        self.command = ""
        self.close_connection = True
        line: bytes = self.raw_requestline
        self.requestline = line.decode("iso-8859-1").rstrip("\r\n")
        found = _REQUEST_LINE.fullmatch(line)
        if found is None:
            # HTTP/0.9 ("GET /" and no version) has no headers and no status line: the base class would
            # wait for headers that never come, and any answer would read as the document itself.
            if len(line.split()) == 2:
                return False
            self.request_version = "HTTP/1.0"  # so the error has a status line
            self.send_error(400, "Bad request line", "send METHOD TARGET HTTP/1.1 and CRLF")
            return False
        method, target, major, minor = found.groups()
        self.request_version = f"HTTP/{major.decode()}.{minor.decode()}"
        if major != b"1":
            self.request_version = "HTTP/1.0"
            self.send_error(505, f"HTTP/{major.decode()}.{minor.decode()} is not served", "send HTTP/1.1")
            return False
        self.command, self.path = method.decode("ascii"), target.decode("iso-8859-1")
        absolute = _ABSOLUTE_FORM.fullmatch(self.path)
        if absolute is not None:
            # "GET http://host/query": the engine would take the client's URL for its own (the service
            # description's sd:endpoint, the base of relative IRIs). It gets the path; the guard's
            # own address is named as for any request (``_own_authority``).
            self.path = "/" + (absolute["rest"] or "").lstrip("/")
        elif not self.path.startswith("/"):
            # Only a path (origin form) goes on: another scheme's URL, a target in authority form ("GET
            # query", "GET [::1]:80") or one it cannot split aborts the engine's whole HTTP layer.
            self.send_error(400, "Bad request target", "send the target as a path, or as http://host/path")
            return False
        if self.path.startswith("//"):  # as the base class does: "//host/x" would read as another host
            self.path = "/" + self.path.lstrip("/")
        try:
            self.headers = read_fields(self.rfile, max_bytes=MAX_REQUEST_FIELD_BYTES)
        except http.client.LineTooLong as error:
            self.send_error(431, "Line too long", str(error))
            return False
        except http.client.HTTPException as error:
            self.send_error(400, "Bad header", str(error))
            return False
        connection = (self.headers.get("Connection") or "").lower()
        self.close_connection = minor == b"0" or connection == "close"
        if minor == b"0" and connection == "keep-alive":
            self.close_connection = False
        # The head is in: the rest of the request (its body) has what is left of client_seconds.
        self.server.watchdog.arm(
            self.connection, self.server.settings.client_seconds - (time.monotonic() - self._request_started)
        )
        if (self.headers.get("Expect") or "").lower() == "100-continue" and minor != b"0":
            return self.handle_expect_100()
        return True

    def handle_one_request(self) -> None:
        # The request line and fields must arrive within head_seconds, the whole request within
        # client_seconds: a client that trickles a byte now and then would otherwise hold its thread
        # for ever. Until the whole request is in, the connection is idle: the one idle the longest
        # is closed when every connection is taken (``GuardServer.process_request``).
        settings = self.server.settings
        self._request_started = time.monotonic()
        self.server.watchdog.arm(self.connection, min(settings.head_seconds, settings.client_seconds))
        self.server.idle(self.connection, self.client_address, True)
        try:
            super().handle_one_request()
        finally:
            self.server.idle(self.connection, self.client_address, False)
            self.server.watchdog.disarm(self.connection)

    def finish(self) -> None:
        self._drop_upstream()
        super().finish()

    def _drop_upstream(self) -> None:
        """Close the connection to the engine this request used (its answer was not read to the end)."""
        if self._in_use is not None:
            self._in_use[1].close()
            self._in_use = None

    def _release(self, turn: _Turn, response: EngineAnswer) -> None:
        """Give the query's turn back. The guard reads no more of the engine's answer then, so the
        connection it came over is settled at once, before anything is written to a client that may
        not read: back to the pool when the answer was read to its end, else closed. (Held until the
        client had taken its answer, it would be one engine connection per stalled client, outside
        --max-concurrent.)"""
        turn.release()
        self._settle(response)

    def _settle(self, response: EngineAnswer, reusable: bool = True) -> None:
        """Give the engine connection of ``response`` back to the pool when its answer was read to
        its end (and ``reusable``), else close it."""
        if reusable and response.isclosed() and not response.will_close:
            self._give_back_upstream()
        else:
            self._pending = None  # nothing is left to drain over a closed connection
            self._drop_upstream()

    def _give_back_upstream(self) -> None:
        """Give the connection this request used back to the server's pool, its answer read to the end."""
        if self._in_use is not None:
            where, upstream = self._in_use
            self._in_use = None
            self.server.engine_pool.give_back(where, upstream)

    def _connection_to(self, where: tuple[str, int, int]) -> tuple[EngineConnection, bool]:
        """A connection to the engine at ``where``: an idle one of the server's pool (kept alive since
        an earlier answer, to any client), else a new one; and whether it was reused."""
        self._drop_upstream()
        upstream = self.server.engine_pool.take(where)
        reused = upstream is not None
        if upstream is None:
            settings = self.server.settings
            handed = settings.connect(where[2], settings.upstream_seconds) if settings.connect is not None else None
            upstream = EngineConnection(where[0], where[1], settings.upstream_seconds, handed)
        self._in_use = (where, upstream)
        return upstream, reused

    def _handle(self) -> None:
        settings = self.server.settings
        if len(self.path) > settings.max_request_bytes:
            self._plain(
                414,
                f"refused: the request URL is {len(self.path)} bytes, over the server's limit of "
                f"{settings.max_request_bytes} ({REQUEST_OPTION} of sotakg serve)\n",
            )
            return
        # Read the body even of a write that will be refused: closing a socket with unread data resets
        # the connection, and the client could lose the refusal.
        read = self._body()
        self.server.watchdog.disarm(self.connection)  # read in time; the answer has deadlines of its own
        # The whole request is in: from here the connection does work, and is never closed to make room.
        self.server.idle(self.connection, self.client_address, False)
        if read is None:
            return
        body = read
        refusal = _framing_refusal(self.path, self.headers)
        if refusal is None:
            try:
                refusal = screen_request(
                    self.command,
                    self.path,
                    self.headers.get("Content-Type"),
                    self.headers.get("Content-Encoding"),
                    body,
                    settings.max_depth,
                )
            except ValueError:  # a target urlsplit cannot read (an unclosed IPv6 bracket, ...)
                refusal = Refusal(400, "refused: the request target cannot be read as a URL\n")
        if refusal is not None:
            self._plain(refusal.status, refusal.message)
            return
        if not self.server.turns.acquire(settings.wait_seconds):
            self._plain(
                503,
                f"the server is busy: {settings.max_concurrent} queries run and more wait; retry shortly\n",
                RETRY_AFTER,
            )
            return
        turn = _Turn(self.server.turns)
        try:
            self._forward(body if self.command == "POST" else None, turn)
        finally:
            turn.release()

    do_GET = do_HEAD = do_POST = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = _handle

    def _upstream(self) -> tuple[str, int, int] | None:
        settings = self.server.settings
        if settings.engine is None:
            return settings.upstream_host, settings.upstream_port, 0
        return settings.engine.address(wait=RETRY_AFTER)

    def _forward(self, body: bytes | None, turn: _Turn) -> None:
        settings = self.server.settings
        where = self._upstream()
        if where is None:
            self._plain(503, "the query engine is restarting; retry in a second\n", RETRY_AFTER)
            return
        host, port, generation = where
        # The engine gets exactly the type and encoding that were screened (each header is there at
        # most once: _framing_refusal), whatever the spelling of the names the client sent.
        fields = [(name, value) for name, value in self.headers.items() if name.lower() not in _NOT_FORWARDED]
        for name in ("Content-Type", "Content-Encoding"):
            value = self.headers.get(name)
            if value is not None:
                fields.append((name, value))
        # The engine names itself after the Host it is sent (the service description's sd:endpoint,
        # absolute in N-Triples): the guard's address, never the engine's private one.
        fields.append(("Host", self._own_authority()))
        if body is not None:
            fields.append(("Content-Length", str(len(body))))
        deadline = time.monotonic() + settings.upstream_seconds
        # The engine answers HEAD of a query with 404: ask it with GET and send the headers only.
        method = "GET" if self.command == "HEAD" else self.command
        for attempt in range(2):  # a kept-alive connection the engine has closed meanwhile: once more
            reused = False
            try:
                upstream, reused = self._connection_to(where)
                upstream.settimeout(settings.upstream_seconds)
                response = upstream.request(method, self.path, fields, body)
            except TimeoutError:
                self._drop_upstream()
                self._timed_out(generation, turn)
                return
            except (OSError, http.client.HTTPException) as error:
                self._drop_upstream()
                if reused and attempt == 0:
                    continue
                self._engine_failed(generation, error, turn)
                return
            break
        complete = False
        self._pending = (response, upstream, deadline, generation)
        try:
            complete = self._relay(response, upstream, deadline, generation, turn)
        finally:
            # A client gone or too slow: the turn is still held here (the other ways out drain
            # before they give it back).
            self._abandon()
            self._settle(response, reusable=complete)

    def _abandon(self) -> None:
        """Read and drop the rest of an answer no client takes (a HEAD, an answer cut at the cap, a
        client gone or too slow), until the engine ends it or the query's deadline passes; then the
        engine is stopped as for any query past ``--timeout``. Closing the connection at once, or
        after so many bytes, would leave the engine computing until it next writes, which for a
        query whose later rows are costly may be hours away (a first megabyte of rows at once, then
        a product that matches nothing): ``--timeout`` holds for every query forwarded. Called with
        the query's turn held, so abandoned queries count against ``--max-concurrent``; an answer
        with a length was complete already."""
        pending, self._pending = self._pending, None
        if pending is None:
            return
        response, upstream, deadline, generation = pending
        if response.isclosed() or response.length is not None:
            return
        try:
            while True:
                self._wait_budget(upstream, deadline)
                if not response.read1(CHUNK):
                    return
        except TimeoutError:
            self._stop_engine(generation)
        except (OSError, http.client.HTTPException):
            return  # the engine ended the connection: it is done with the query

    def _timed_out(self, generation: int, turn: _Turn) -> None:
        self._pending = None
        settings = self.server.settings
        seconds = settings.upstream_seconds
        settings.log(f"sotakg serve: {self.command} {self._short()} ran past {seconds:g} s; stopping the engine")
        if settings.engine is not None:
            settings.engine.stop_runaway(generation, f"a query ran past {seconds:g} s (--timeout)")
        turn.release()
        self._plain(504, f"the query ran longer than {seconds:g} s (--timeout of sotakg serve) and was stopped\n")

    def _engine_failed(self, generation: int, error: object, turn: _Turn) -> None:
        settings = self.server.settings
        turn.release()  # what follows waits for the engine and writes to the client: no turn for that
        # A connection refused or reset right after the engine died comes before its exit is
        # visible: give the process a moment to be reported gone, and call it a restart then.
        if settings.engine is not None and settings.engine.has_stopped(generation, wait=ENGINE_EXIT_SECONDS):
            self._plain(503, "the query engine stopped and is restarting; retry in a second\n", RETRY_AFTER)
            return
        settings.log(f"sotakg serve: the Oxigraph server did not answer {self.command} {self._short()}: {error}")
        self._plain(502, "the Oxigraph server did not answer; see the server's log\n")

    def _unfinished(self, content_type: str, say_so: bool) -> None:
        """Log an answer the engine gave up on; with ``say_so`` (nothing of it sent yet), answer 502."""
        self.server.settings.log(
            f"sotakg serve: the engine could not finish the answer to {self.command} {self._short()} as "
            f"{content_type} (it wrote an error into it); the client got it visibly broken"
        )
        if say_so:
            self._plain(502, f"the engine could not write this answer as {content_type}; ask for another format\n")

    def _short(self) -> str:
        return self.path if len(self.path) <= 80 else self.path[:79] + "…"

    def _own_authority(self) -> str:
        """The guard's host and port as the client addressed it (its Host, where that is a plain
        host and port; else the guard's own address)."""
        host = self.headers.get("Host") or ""
        if not _PLAIN_AUTHORITY.fullmatch(host):
            name, port = str(self.server.server_address[0]), int(self.server.server_address[1])
            host = f"[{name}]:{port}" if ":" in name else f"{name}:{port}"
        return host

    def _own_url(self) -> str:
        """This request's URL as the client addressed the guard, without the query string: the base
        of the service description's ``<>``."""
        return f"http://{self._own_authority()}{urllib.parse.urlsplit(self.path).path}"

    def _relay(
        self, response: EngineAnswer, upstream: EngineConnection, deadline: float, generation: int, turn: _Turn
    ) -> bool:
        """Pass the answer on; True when it was passed on whole (the connections may be kept alive).

        The turn is given back as soon as the engine has sent all of its answer: a client that reads
        slower than the engine writes never holds one (what it has not taken yet waits in ``out``, or,
        for a buffered answer, in memory counted in ``Buffers``)."""
        self._held = 0
        try:
            return self._relay_answer(response, upstream, deadline, generation, turn)
        finally:
            self.server.buffers.free(self._held)
            self._held = 0

    def _relay_answer(
        self, response: EngineAnswer, upstream: EngineConnection, deadline: float, generation: int, turn: _Turn
    ) -> bool:
        settings = self.server.settings
        no_body = self.command == "HEAD" or response.status in (204, 304) or 100 <= response.status < 200
        # The length the engine gave (digits only; None: chunked, or until it closes); none for 1xx, 204, 304.
        length = response.length if response.status not in (204, 304) and response.status >= 200 else None
        # A HEAD is answered as the GET it stands for would be: over the cap, that is a 502 too.
        if length is not None and length > settings.max_result_bytes and (self.command == "HEAD" or not no_body):
            self._release(turn, response)
            self._too_large()
            return False
        buffered: bytes | bytearray | None = None
        prefix = b""  # what was read of a larger answer before streaming it
        if response.status == 200 and asks_for_description(self.command, self.path):
            buffered = self._read_all(response, upstream, deadline, generation, turn)
            if buffered is None:
                return False
            try:
                buffered = without_federation(
                    bytes(buffered), response.getheader("Content-Type") or "", self._own_url()
                )
            except DescriptionUnreadable as error:
                self._release(turn, response)
                settings.log(f"sotakg serve: could not take federation out of the service description: {error}")
                self._plain(502, "the server could not prepare its service description; ask for N-Triples\n")
                return False
            length = len(buffered)
        elif length is None and not no_body and self.request_version != "HTTP/1.1":
            # No chunked encoding for this client: an answer cut short would look complete. Buffer it
            # up to the cap and send it with its length, or an error status.
            buffered = self._read_all(response, upstream, deadline, generation, turn)
            if buffered is None:
                return False
            length = len(buffered)
        elif not no_body and (length is None or length <= CHUNK):
            # Up to CHUNK bytes are read first: a small answer (most are) is then sent whole, with its
            # length, and the turn is free before its head is written; a larger one streams on from there.
            first = min(CHUNK, settings.max_result_bytes + 1)  # one byte over the cap shows it is passed
            read = self._read_all(response, upstream, deadline, generation, turn, stop_after=first)
            if read is None:
                return False
            if response.isclosed() and len(read) <= settings.max_result_bytes:
                buffered, length = read, len(read)
            else:
                prefix = bytes(read)
        content_type = response.getheader("Content-Type") or ""
        if response.status == 200 and buffered is not None and not ends_whole(content_type, bytes(buffered[-64:])):
            self._release(turn, response)
            self._unfinished(content_type, say_so=True)
            return False
        chunked = not no_body and length is None
        keep_alive = not self.close_connection and (no_body or length is not None or chunked)
        # The engine's status line and fields were read strictly (``wire``): no line break in them.
        lines = [
            f"{self.protocol_version} {response.status} {response.reason}\r\n"
            f"Server: {self.version_string()}\r\nDate: {self.date_time_string()}\r\n"
        ]
        lines += [f"{name}: {value}\r\n" for name, value in response.getheaders() if name.lower() not in _NOT_RELAYED]
        if length is not None:
            lines.append(f"Content-Length: {length}\r\n")
        elif chunked:
            lines.append("Transfer-Encoding: chunked\r\n")
        if not keep_alive:
            lines.append("Connection: close\r\n")
        elif self.request_version == "HTTP/1.0":  # kept open only when said so: an HTTP/1.0 client closes otherwise
            lines.append("Connection: keep-alive\r\n")
        lines.append("\r\n")
        # The head goes out with the first piece of the body, and each piece with the next read: one
        # write (one TCP segment) for a small answer instead of three.
        held = "".join(lines).encode("iso-8859-1")
        self.close_connection = True  # until the answer is through
        if no_body or buffered is not None:
            if no_body:
                self._abandon()  # a HEAD: the engine computes the body all the same
            self._release(turn, response)
            if no_body or not buffered:
                self.wfile.write(held)
            elif len(buffered) <= CHUNK:
                self.wfile.write(held + buffered)
            else:  # no third copy of a large answer
                self.wfile.write(held)
                self.wfile.write(buffered)
            self.close_connection = not keep_alive
            return True
        out = _Relay(self.connection, self.server.buffers, settings.client_seconds)
        sent = 0
        holding_body = False
        tail = b""  # the answer's last bytes, to tell a whole one from one the engine gave up on
        try:
            while True:
                try:
                    if prefix:
                        data, prefix = prefix, b""
                    else:
                        self._wait_budget(upstream, deadline)
                        data = response.read1(CHUNK)
                except TimeoutError:
                    self._stop_engine(generation)
                    self._release(turn, response)
                    out.finish(held)
                    return False  # unfinished: the client sees a truncated answer
                except (OSError, http.client.HTTPException) as error:
                    settings.log(f"sotakg serve: the answer to {self.command} {self._short()} broke off: {error}")
                    self._release(turn, response)
                    out.finish(held)
                    return False  # unfinished: the client sees a truncated answer
                if not data and response.length:  # the engine ended short of its Content-Length
                    settings.log(
                        f"sotakg serve: the answer to {self.command} {self._short()} broke off "
                        f"{response.length} bytes short of its length"
                    )
                    self._release(turn, response)
                    out.finish(held)
                    return False  # unfinished: fewer bytes than the length the client was told
                if not data:
                    break
                if out.gone:
                    return False  # the client went away: stop reading the engine's answer for nobody
                if sent + len(data) > settings.max_result_bytes:
                    self._abandon()
                    self._release(turn, response)
                    out.finish(held + _piece(data[: settings.max_result_bytes - sent], chunked))
                    settings.log(
                        f"sotakg serve: stopped the answer to {self.command} {self._short()} at "
                        f"{settings.max_result_bytes} bytes ({RESULT_OPTION}); the client got a truncated answer"
                    )
                    return False
                if holding_body:
                    out.push(held)
                    held = b""
                held += _piece(data, chunked)
                holding_body = True
                sent += len(data)
                tail = (tail + data)[-64:]
            self._release(turn, response)
            if response.status == 200 and not ends_whole(content_type, tail):
                nothing_sent = held.startswith(b"HTTP/")
                if nothing_sent:
                    out.close()
                else:
                    out.finish(b"")  # without its last piece (and the last chunk): visibly short
                self._unfinished(content_type, say_so=nothing_sent)
                return False
            out.finish(held + b"0\r\n\r\n" if chunked else held)
            if not out.complete:
                return False  # the client went away, or did not take its answer in time
        except _TooSlow:
            settings.log(
                f"sotakg serve: cut off the answer to {self.command} {self._short()}: the client reads slower "
                f"than the engine writes and {self.server.buffers.limit} bytes already wait for such clients"
            )
            return False
        finally:
            out.close()
        self.close_connection = not keep_alive
        return True

    @staticmethod
    def _wait_budget(upstream: EngineConnection, deadline: float) -> None:
        """Let the next read wait only until the query's deadline."""
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError
        upstream.settimeout(remaining)

    def _stop_engine(self, generation: int) -> None:
        self._pending = None  # the engine is stopped: nothing more to read of its answer
        settings = self.server.settings
        settings.log(f"sotakg serve: {self.command} {self._short()} ran past {settings.upstream_seconds:g} s")
        if settings.engine is not None:
            settings.engine.stop_runaway(generation, f"a query ran past {settings.upstream_seconds:g} s (--timeout)")

    def _read_all(
        self,
        response: EngineAnswer,
        upstream: EngineConnection,
        deadline: float,
        generation: int,
        turn: _Turn,
        stop_after: int | None = None,
    ) -> bytearray | None:
        """The whole answer, or None once an error status has been sent (over the cap, too slow,
        short of its length, or no room left in ``Buffers`` for it). With ``stop_after``, only the
        first that many bytes or more (``response.isclosed()`` tells whether that is all), and no
        refusal over the cap: the answer streams on, and is cut there. What it holds is counted in
        ``Buffers`` (``self._held``) until ``_relay`` is done."""
        settings = self.server.settings
        body = bytearray()
        try:
            while stop_after is None or len(body) < stop_after:
                self._wait_budget(upstream, deadline)
                data = response.read1(CHUNK if stop_after is None else stop_after - len(body))
                if not data and response.length:
                    raise http.client.IncompleteRead(bytes(body), response.length)
                if not data:
                    return body
                if len(body) + len(data) > settings.max_result_bytes and stop_after is None:
                    self._abandon()
                    self._release(turn, response)
                    self._too_large()
                    return None
                if not self.server.buffers.reserve(len(data)):
                    self._abandon()
                    self._release(turn, response)
                    settings.log(
                        f"sotakg serve: refused the answer to {self.command} {self._short()}: "
                        f"{self.server.buffers.limit} bytes of answers already wait for their clients"
                    )
                    self._plain(
                        503, "the server is busy: too many answers wait for their clients; retry shortly\n", RETRY_AFTER
                    )
                    return None
                self._held += len(data)
                body += data
            return body
        except TimeoutError:
            self._timed_out(generation, turn)
        except (OSError, http.client.HTTPException) as error:
            self._engine_failed(generation, error, turn)
        return None

    def _too_large(self) -> None:
        settings = self.server.settings
        settings.log(
            f"sotakg serve: refused the answer to {self.command} {self._short()}: over "
            f"{settings.max_result_bytes} bytes ({RESULT_OPTION})"
        )
        self._plain(
            502,
            f"the answer is larger than the server's limit of {settings.max_result_bytes} bytes ({RESULT_OPTION} "
            f"of sotakg serve); narrow the query or add a LIMIT\n",
        )

    def _head(self) -> bytes:
        """The status line and headers sent so far (``send_response``, ``send_header``), ended, as bytes
        to write: what ``end_headers`` would write at once."""
        buffer: list[bytes] = getattr(self, "_headers_buffer", [])
        if self.request_version != "HTTP/0.9":
            buffer.append(b"\r\n")
        self._headers_buffer: list[bytes] = []
        return b"".join(buffer)


#: How answers in these formats end when they are whole. The engine writes an error message into
#: an answer it cannot finish (RDF/XML refuses some predicates, ``rdf:about`` say) and then ends the
#: body as if it were whole: without its closing tag, such an answer is passed on visibly broken.
_CLOSING_TAGS: dict[str, tuple[bytes, ...]] = {
    "application/rdf+xml": (b"</rdf:RDF>",),
    "application/sparql-results+xml": (b"</sparql>",),
    "application/ld+json": (b"]", b"}"),  # JSON-LD cannot write a triple term: its error ends the body
    "application/sparql-results+json": (b"}",),
}


def ends_whole(content_type: str, tail: bytes) -> bool:
    """Whether an answer of ``content_type`` whose last bytes are ``tail`` ends as such an answer
    ends when it is whole (formats without a closing mark always do)."""
    closing = _CLOSING_TAGS.get(content_type.split(";", 1)[0].strip().lower())
    return closing is None or tail.rstrip().endswith(closing)


def _piece(data: bytes, chunked: bool) -> bytes:
    """``data`` as it goes on the wire: a chunk of a chunked body, or as it is."""
    if not data:
        return b""
    return b"%x\r\n%s\r\n" % (len(data), data) if chunked else data


def without_federation(body: bytes, content_type: str, base_iri: str) -> bytes:
    """The service description without ``sd:feature sd:BasicFederatedQuery``: the guard refuses
    SERVICE, so it must not be advertised. Read in the answer's own format, its relative IRIs (Turtle's
    and RDF/XML's ``<>``, the service itself) against ``base_iri``, and written in that format with
    absolute IRIs. A description that cannot be read that way is not passed on as it is (it would
    still advertise SERVICE): ``DescriptionUnreadable``."""
    from pyoxigraph import NamedNode, RdfFormat, parse, serialize

    media = content_type.split(";", 1)[0].strip().lower()
    rdf_format = RdfFormat.from_media_type(media) if media else None
    if rdf_format is None:
        if SD_FEDERATED.encode() in body:
            raise DescriptionUnreadable(f"a service description of type {media or 'none'!r}")
        return body
    try:
        triples = [t for t in parse(body, format=rdf_format, base_iri=base_iri) if t.object != NamedNode(SD_FEDERATED)]
    except (SyntaxError, ValueError) as error:
        raise DescriptionUnreadable(str(error)) from None
    return serialize(triples, format=rdf_format) or b""


class DescriptionUnreadable(Exception):
    """The engine's service description could not be read to take federation out of it."""


class _Turn:
    """One held turn of ``Turns``, given back once (when the engine is done, or at the latest when the
    request is), with how long it was held."""

    def __init__(self, turns: Turns):
        self._turns: Turns | None = turns
        self._began = time.monotonic()

    def release(self) -> None:
        if self._turns is not None:
            turns, self._turns = self._turns, None
            turns.release(time.monotonic() - self._began)


class _TooSlow(Exception):
    """The client reads slower than the engine writes, and the buffers for such clients are full."""


class Buffers:
    """The bytes of answers waiting for slow clients, all connections together, up to ``limit``."""

    def __init__(self, limit: int):
        self.limit = limit
        self._used = 0
        self._lock = threading.Lock()

    def reserve(self, size: int) -> bool:
        with self._lock:
            if self._used + size > self.limit:
                return False
            self._used += size
            return True

    def free(self, size: int) -> None:
        with self._lock:
            self._used -= size

    @property
    def used(self) -> int:
        return self._used


class _Relay:
    """The client's side of an answer being streamed: what the client socket takes at once goes out
    at once (never waiting), the rest waits in memory (counted in ``Buffers``; ``_TooSlow`` when they
    are full), so the engine's side is never held up by the client. ``finish`` sends the rest,
    waiting at most CLIENT_SECONDS in all; ``complete`` says whether all of it went out."""

    def __init__(self, connection: socket.socket, buffers: Buffers, seconds: float = CLIENT_SECONDS):
        self._socket = connection
        self._seconds = seconds
        self._buffers = buffers
        self._waiting = bytearray()
        self._reserved = 0
        self._gone = False
        self.complete = False
        connection.settimeout(0.0)

    def push(self, data: bytes) -> None:
        if self._gone or not data:
            return
        if not self._waiting:
            try:
                data = data[self._socket.send(data) :]
            except BlockingIOError:
                pass
            except OSError:
                self._gone = True
                return
            if not data:
                return
        if not self._buffers.reserve(len(data)):
            raise _TooSlow
        self._reserved += len(data)
        self._waiting += data
        self._send_waiting()

    def _send_waiting(self) -> None:
        try:
            while self._waiting:
                count = self._socket.send(self._waiting)
                del self._waiting[:count]
                self._buffers.free(count)
                self._reserved -= count
        except BlockingIOError:
            pass
        except OSError:
            self._gone = True

    @property
    def gone(self) -> bool:
        """Whether the client has gone away (a send failed)."""
        return self._gone

    def finish(self, data: bytes) -> None:
        """Send ``data`` after what waits, blocking up to CLIENT_SECONDS in all."""
        if self._gone:
            return
        self._waiting += data
        self._socket.settimeout(self._seconds)
        try:
            self._socket.sendall(self._waiting)  # the timeout bounds the whole call
        except OSError:
            self._gone = True
            return
        self._waiting.clear()
        self.complete = True

    def close(self) -> None:
        """Give back the buffer space and leave the socket as the handler expects it."""
        self._buffers.free(self._reserved)
        self._reserved = 0
        self._waiting = bytearray()
        try:
            self._socket.settimeout(self._seconds)
        except OSError:
            pass


class EnginePool:
    """Kept-alive connections to the engine, shared by every client of the guard. A request takes one
    (or opens a new one) and gives it back once the answer was read to its end; at most ``keep`` idle
    ones are kept, the others are closed. So the engine sees at most the queries running at once plus
    ``keep`` connections, however many clients keep theirs open to the guard: the Oxigraph server
    accepts only so many at once (128 a core), and idle clients each holding one would shut out the
    rest."""

    def __init__(self, keep: int, idle_seconds: float = ENGINE_IDLE_SECONDS) -> None:
        self.keep = keep
        self.idle_seconds = idle_seconds
        self._idle: list[tuple[tuple[str, int, int], EngineConnection, float]] = []
        self._lock = threading.Lock()

    def take(self, where: tuple[str, int, int]) -> EngineConnection | None:
        """An idle connection to the engine at ``where`` (host, port, generation), or None. Idle
        connections that cannot carry a request are closed: to an engine restarted since, idle longer
        than ``idle_seconds``, or written to or closed by the engine meanwhile."""
        stale: list[EngineConnection] = []
        found = None
        now = time.monotonic()
        with self._lock:
            while self._idle:
                at, connection, since = self._idle.pop()  # the most recently used: the least likely closed
                if at == where and now - since <= self.idle_seconds:
                    found = connection
                    break
                stale.append(connection)
        if found is not None and found.answered_unasked():
            stale.append(found)
            found = None
        for connection in stale:
            connection.close()
        return found

    def give_back(self, where: tuple[str, int, int], connection: EngineConnection) -> None:
        """Keep ``connection`` (its answer read to the end) for the next request, or close it when
        ``keep`` are idle already."""
        with self._lock:
            if len(self._idle) < self.keep:
                self._idle.append((where, connection, time.monotonic()))
                return
        connection.close()

    def idle(self) -> int:
        """How many connections are idle in the pool."""
        with self._lock:
            return len(self._idle)

    def close(self) -> None:
        """Close every idle connection."""
        with self._lock:
            idle, self._idle = self._idle, []
        for _, connection, _since in idle:
            connection.close()


class Turns:
    """At most ``running`` holders at once and at most ``waiting`` more queued for a turn, first come
    first served; the rest are turned away at once, so overload is an answer, not a hang.

    A newcomer is also turned away at once when the queue ahead of it would not drain within the
    wait it is allowed (its place times the recent time per turn, shared by the running slots): a
    client told "busy" after a wait it could never have survived waited for nothing. A queued one
    waits at most ``seconds``; turns go to the longest waiting first (a plain semaphore wakes waiters
    in no order, so under a steady load some starved past their wait while others had many turns)."""

    def __init__(self, running: int, waiting: int):
        self._running = running
        self._free = running
        self._lock = threading.Lock()
        self._queue: collections.deque[threading.Lock] = collections.deque()
        self._max_waiting = waiting
        self._seconds_per_turn = 0.0  # a moving average of how long a turn is held

    def acquire(self, seconds: float) -> bool:
        """Take a turn, waiting at most ``seconds``; False when none could be had."""
        with self._lock:
            if self._free > 0 and not self._queue:
                self._free -= 1
                return True
            ahead = len(self._queue)
            if ahead >= self._max_waiting or (ahead + 1) * self._seconds_per_turn > seconds * self._running:
                return False
            waiter = threading.Lock()
            waiter.acquire()
            self._queue.append(waiter)
        if waiter.acquire(timeout=seconds):
            return True
        with self._lock:
            try:
                self._queue.remove(waiter)
            except ValueError:
                return True  # handed a turn just as the wait ran out: it is this one's
        return False

    def release(self, held: float | None = None) -> None:
        """Give the turn back (``held``: for how many seconds it was held), to the first in line if any."""
        with self._lock:
            if held is not None:
                self._seconds_per_turn += (held - self._seconds_per_turn) / 8
            if self._queue:
                self._queue.popleft().release()
            else:
                self._free += 1


class Watchdog:
    """Deadlines of requests being read: one thread shuts down the connection of a request that is
    not in by its deadline (the handler's read then fails and the thread is free)."""

    def __init__(self) -> None:
        self._deadlines: dict[socket.socket, float] = {}
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="sotakg-guard-watchdog", daemon=True)
        self._thread.start()

    def arm(self, connection: socket.socket, seconds: float) -> None:
        with self._lock:
            self._deadlines[connection] = time.monotonic() + seconds

    def disarm(self, connection: socket.socket) -> None:
        with self._lock:
            self._deadlines.pop(connection, None)

    def _watch(self) -> None:
        while not self._stopped.wait(WATCH_SECONDS):
            now = time.monotonic()
            with self._lock:  # held while shutting down: a request disarmed in time is never cut
                late = [connection for connection, deadline in self._deadlines.items() if deadline <= now]
                for connection in late:
                    del self._deadlines[connection]
                    try:
                        connection.shutdown(socket.SHUT_RDWR)
                    except OSError:
                        pass

    def stop(self) -> None:
        self._stopped.set()
        self._thread.join(5)


def _unread_bytes(connection: socket.socket) -> int:
    """Bytes the client sent that its thread has not read yet (Linux's FIONREAD; 0 where unknown): a
    connection whose request has come in but is not read yet (its thread only just started) is not
    idle, and is not closed to make room."""
    try:
        import fcntl
        import termios

        buffer = fcntl.ioctl(connection.fileno(), termios.FIONREAD, b"\0\0\0\0")
        return int.from_bytes(buffer, sys.byteorder, signed=True)
    except (ImportError, OSError, ValueError):
        return 0


def _host_of(client_address: Any) -> Any:
    """The host part of a client's address (the whole of it for a socket family without ports)."""
    return client_address[0] if isinstance(client_address, tuple) else client_address


#: The Date field of answers, formatted once a second: (the second, the text).
_date_field: tuple[int, str] = (0, "")

#: What a connection past ``max_connections`` gets before it is closed.
_TOO_MANY = (
    b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\n"
    b"Retry-After: %d\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s"
)


class GuardServer(http.server.ThreadingHTTPServer):
    """The proxy's listening socket and its settings; one thread per connection, at most
    ``max_connections`` of them and ``per_address`` from one client address (a connection past
    either is answered 503 and closed at once)."""

    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128  # the listen backlog: a burst of clients waits in the kernel, not refused

    def __init__(self, host: str, port: int, settings: GuardSettings):
        self.settings = settings
        running = max(1, settings.max_concurrent)
        self.turns = Turns(running, settings.max_waiting or max(DEFAULT_WAITING, 4 * running))
        #: Connections to the engine, shared by every client: idle clients hold none of them.
        self.engine_pool = EnginePool(running + SPARE_ENGINE_CONNECTIONS)
        self.buffers = Buffers(settings.max_buffered_bytes or 4 * settings.max_result_bytes)
        self._connections = 0
        self._by_address: dict[Any, int] = {}
        #: Connections waiting for (the rest of) a request: since when, and their client's address
        #: (the oldest is closed first when all are taken).
        self._idle: dict[socket.socket, tuple[float, Any]] = {}
        #: Connections one client address may hold at once: one address cannot take every thread.
        self.per_address = settings.max_connections_per_address or max(1, settings.max_connections // 4)
        self._connections_lock = threading.Lock()
        bare = host.strip("[]")
        self.address_family = socket.AF_INET6 if ":" in bare else socket.AF_INET
        try:
            super().__init__((bare, port), GuardHandler)
        except socket.gaierror as error:
            raise ServeError(f"cannot listen on {host}: {error.strerror}") from None
        except OSError as error:
            raise ServeError(f"cannot listen on {host} port {port}: {error.strerror}") from None
        self.watchdog = Watchdog()

    def idle(self, connection: socket.socket, client_address: Any, waiting: bool) -> None:
        """Note that ``connection`` waits for a request (``waiting``), or no longer does."""
        with self._connections_lock:
            if waiting:
                self._idle[connection] = (time.monotonic(), _host_of(client_address))
            else:
                self._idle.pop(connection, None)

    def _make_room(self, address: Any | None) -> bool:
        """Close the connection idle the longest (of ``address``; None: of anyone), if it has waited
        at least ``idle_grace_seconds``, so that a new one can be served; whether there was one.
        Its thread ends as soon as its read fails. Called locked."""
        settled = time.monotonic() - self.settings.idle_grace_seconds
        waiting = [
            item
            for item in self._idle.items()
            if (address is None or item[1][1] == address) and item[1][0] <= settled and not _unread_bytes(item[0])
        ]
        if not waiting:
            return False
        oldest = min(waiting, key=lambda item: item[1][0])[0]
        del self._idle[oldest]
        try:
            oldest.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        return True

    def process_request(self, request: Any, client_address: Any) -> None:
        address = _host_of(client_address)
        with self._connections_lock:
            admitted = self._connections < self.settings.max_connections
            mine = self._by_address.get(address, 0)
            own_share = mine < self.per_address
            # When every connection (or this address's share) is taken, the one idle the longest makes
            # room: connections that send nothing cannot lock the others out.
            if not own_share:
                if self._make_room(address):  # one of its own: a place in all and in its share
                    own_share = admitted = True
            elif not admitted:
                admitted = self._make_room(None)
            if admitted and own_share:
                self._connections += 1
                self._by_address[address] = mine + 1
        if admitted and own_share:
            try:
                super().process_request(request, client_address)
            except BaseException:  # no thread to count it down: the connection is not served
                self._count_down(address)
                raise
            return
        message = b"the server is busy: too many connections; retry shortly\n"
        if admitted:
            message = b"the server is busy: too many connections from your address; retry shortly\n"
        try:
            request.setblocking(False)
            request.send(_TOO_MANY % (RETRY_AFTER, len(message), message))
        except OSError:
            pass
        self.shutdown_request(request)

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._count_down(_host_of(client_address))

    def _count_down(self, address: Any) -> None:
        with self._connections_lock:
            self._connections -= 1
            left = self._by_address.pop(address) - 1
            if left:
                self._by_address[address] = left

    def server_close(self) -> None:
        super().server_close()
        self.watchdog.stop()
        self.engine_pool.close()

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that went away (reset, broken pipe, timeout) is no error; anything else is logged
        in one line, not a traceback per request."""
        error = sys.exc_info()[1]
        if isinstance(error, OSError):
            return
        self.settings.log(f"sotakg serve: error answering {client_address[0]}: {type(error).__name__}: {error}")

    def server_bind(self) -> None:
        # HTTPServer.server_bind looks up the host's full name, which can stall on DNS; it is not needed.
        socketserver.TCPServer.server_bind(self)
        self.server_name = str(self.server_address[0])
        self.server_port = int(self.server_address[1])

    @property
    def port(self) -> int:
        return int(self.server_address[1])


@contextmanager
def running_guard(host: str, port: int, settings: GuardSettings) -> Iterator[GuardServer]:
    """The guard listening on ``host:port`` (0: a free port) and serving in a thread until the block ends."""
    server = GuardServer(host, port, settings)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
