"""Remote SPARQL 1.1 servers: HTTP with a deadline, credentials from the environment, and
``RemoteBackend``, the query backend behind ``--endpoint``.

Every request has a time limit on the whole exchange (connecting, waiting, and reading the answer)
and a cap on the answer's size: a SPARQL server streams results, and an unbounded SELECT can send
gigabytes in seconds. Redirects are not followed, so credentials never travel to another address.
A bearer token goes with every request; a user and password only in the form the server's challenge
asks for (Digest, else Basic). Queries go by GET, form POST or direct POST (``RemoteBackend.method``).

An answer is read strictly. The Oxigraph server, for one, reports a query stopped at its time limit
by writing an error message into a body it has already begun with HTTP 200; such an answer, or one
cut short, is an error here, never a partial result.
"""

from __future__ import annotations

import base64
import hashlib
import html
import ipaddress
import os
import re
import secrets
import socket
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import (
    EndpointError,
    EndpointTimeout,
    QueryFailed,
    QueryTimeout,
    UsageProblem,
)
from ..graph.vocab import PREFIXES, XSD_GYEAR, XSD_INTEGER
from .results import AskResult, GraphResult, QueryResult, SelectResult, parse_graph, parse_sparql_results
from .sparql import (
    DEFAULT_TIMEOUT,
    MAX_DEPTH,
    Bindings,
    check_query,
    syntax_error,
    tokens,
    with_values,
)

#: Environment variables holding credentials: a user and password (Basic or Digest, as the server
#: asks), or a bearer token.
ENV_USER = "SOTAKG_USER"
ENV_PASSWORD = "SOTAKG_PASSWORD"
ENV_TOKEN = "SOTAKG_TOKEN"
CREDENTIALS_HINT = (
    f"set {ENV_USER} and {ENV_PASSWORD} (Basic or Digest, as the server asks) or {ENV_TOKEN} (a bearer token) "
    "in the environment"
)

#: Largest answer read from an endpoint (bytes) before the request is abandoned.
DEFAULT_MAX_ANSWER = 512 * 1024 * 1024
#: How much of an error answer is read and shown.
ERROR_BODY_BYTES = 64 * 1024
EXCERPT_CHARS = 200
#: How much of a server's reason a refusal shows.
REASON_CHARS = 300
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
    """``url`` if it is an absolute http(s) URL with a host (and a port in range, if any);
    UsageProblem otherwise."""
    try:
        parts = urllib.parse.urlsplit(url)
        parts.port  # noqa: B018 - read for its check: "Port out of range", "Port could not be cast"
    except ValueError as error:
        raise UsageProblem(f"{option} is not a URL that can be read ({error}): {url!r}") from None
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


@dataclass(frozen=True)
class Credentials:
    """Credentials from the environment: a bearer ``token``, or a ``user`` and ``password`` whose scheme
    (Basic or Digest) the server's challenge decides."""

    token: str | None = field(default=None, repr=False)  # never in a message or a traceback
    user: str | None = None
    password: str | None = field(default=None, repr=False)


def credentials(environ: Mapping[str, str] | None = None) -> Credentials | None:
    """The credentials in the environment: ``SOTAKG_TOKEN`` (bearer) or ``SOTAKG_USER`` with
    ``SOTAKG_PASSWORD`` (Basic or Digest, as the server asks); None when unset. Credentials never come
    from command-line options, which other users of the machine can read in the process list."""
    env = os.environ if environ is None else environ
    token, user, password = env.get(ENV_TOKEN), env.get(ENV_USER), env.get(ENV_PASSWORD)
    if token and (user or password):
        raise UsageProblem(f"set {ENV_TOKEN} or {ENV_USER}/{ENV_PASSWORD}, not both")
    if token:
        if not _HEADER_SAFE.fullmatch(token):
            raise UsageProblem(f"{ENV_TOKEN} holds characters a bearer token cannot have (spaces, line breaks)")
        return Credentials(token=token)
    if user is None and password is None:
        return None
    if not user or password is None:
        raise UsageProblem(f"basic authentication needs both {ENV_USER} and {ENV_PASSWORD}")
    if ":" in user or not _HEADER_SAFE.fullmatch(user) or '"' in user or "\\" in user:
        raise UsageProblem(f"{ENV_USER} must not hold a colon, a quote, a backslash, spaces or line breaks")
    return Credentials(user=user, password=password)


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
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:  # no URL at all: check_endpoint refuses it
        return None
    source = credentials_source(environ)
    if source and parts.scheme == "http" and not is_loopback(parts.hostname or ""):
        return f"the credentials from {source} are sent unencrypted to {parts.hostname}; use an https:// URL"
    return None


_HEADER_SAFE = re.compile(r"[\x21-\x7e]+")
_CHALLENGE_PARAM = re.compile(r'\s*([A-Za-z0-9_.-]+)\s*=\s*("(?:[^"\\]|\\.)*"|[^\s,]*)\s*,?')
_CHALLENGE_SCHEME = re.compile(r"\s*,?\s*([A-Za-z][A-Za-z0-9_.-]*)(?=\s|$|,)")


def parse_challenges(values: Iterable[str]) -> list[tuple[str, dict[str, str]]]:
    """The challenges of ``WWW-Authenticate`` header values (RFC 9110 11.6.1), as (scheme in lower
    case, parameters with lower-case names); a header may hold several, comma-separated."""
    found: list[tuple[str, dict[str, str]]] = []
    for value in values:
        at = 0
        while at < len(value):
            scheme = _CHALLENGE_SCHEME.match(value, at)
            if scheme is None:
                break
            at = scheme.end()
            params: dict[str, str] = {}
            while True:
                param = _CHALLENGE_PARAM.match(value, at)
                if param is None:
                    break
                raw = param.group(2)
                params[param.group(1).lower()] = (
                    re.sub(r"\\(.)", r"\1", raw[1:-1]) if raw.startswith('"') and len(raw) >= 2 else raw
                )
                at = param.end()
            found.append((scheme.group(1).lower(), params))
    return found


_DIGEST_HASHES = {"md5": hashlib.md5, "sha-256": hashlib.sha256}


@dataclass
class DigestChallenge:
    """A server's Digest challenge (RFC 7616): answered for each request with a fresh client nonce and
    the next nonce count, until the server calls the nonce stale."""

    realm: str
    nonce: str
    algorithm: str = "MD5"
    qop: str | None = "auth"
    opaque: str | None = None
    count: int = 0

    @classmethod
    def from_params(cls, params: Mapping[str, str]) -> DigestChallenge | None:
        """The challenge, or None when it asks for what this client does not do (auth-int, an unknown
        algorithm)."""
        algorithm = params.get("algorithm", "MD5")
        if algorithm.lower().removesuffix("-sess") not in _DIGEST_HASHES or "nonce" not in params:
            return None
        offered = [option.strip().lower() for option in params.get("qop", "").split(",") if option.strip()]
        if offered and "auth" not in offered:
            return None
        return cls(
            params.get("realm", ""), params["nonce"], algorithm, "auth" if offered else None, params.get("opaque")
        )

    def authorization(self, method: str, url: str, user: str, password: str) -> str:
        """The ``Authorization`` header value for one request."""
        hash_name = self.algorithm.lower().removesuffix("-sess")

        def digest(text: str) -> str:
            return _DIGEST_HASHES[hash_name](text.encode("utf-8")).hexdigest()

        parts = urllib.parse.urlsplit(url)
        uri = parts.path or "/"
        if parts.query:
            uri += "?" + parts.query
        self.count += 1
        count = f"{self.count:08x}"
        client_nonce = secrets.token_hex(16)
        secret = digest(f"{user}:{self.realm}:{password}")
        if self.algorithm.lower().endswith("-sess"):
            secret = digest(f"{secret}:{self.nonce}:{client_nonce}")
        request = digest(f"{method}:{uri}")
        if self.qop:
            response = digest(f"{secret}:{self.nonce}:{count}:{client_nonce}:{self.qop}:{request}")
        else:
            response = digest(f"{secret}:{self.nonce}:{request}")
        fields = [
            f'username="{user}"',
            f'realm="{_quoted(self.realm)}"',
            f'nonce="{_quoted(self.nonce)}"',
            f'uri="{_quoted(uri)}"',
            f"algorithm={self.algorithm}",
            f'response="{response}"',
        ]
        if self.qop:
            fields += [f"qop={self.qop}", f"nc={count}", f'cnonce="{client_nonce}"']
        if self.opaque is not None:
            fields.append(f'opaque="{_quoted(self.opaque)}"')
        return "Digest " + ", ".join(fields)


def _quoted(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')


#: What each server (scheme, host, port) asked for last: "basic" or its Digest challenge. Asking once
#: saves sending every request twice; a stale or changed challenge is learned again.
_LEARNED_AUTH: dict[tuple[str, str, int | None], str | DigestChallenge] = {}


def _origin(url: str) -> tuple[str, str, int | None]:
    parts = urllib.parse.urlsplit(url)
    return parts.scheme, (parts.hostname or "").lower(), parts.port


def _learn(url: str, answer: HttpAnswer) -> str | DigestChallenge | None:
    """What a 401 answer asks for, remembered for its server: Digest when offered, else Basic."""
    challenges = parse_challenges(answer.challenges)
    for scheme, params in challenges:
        if scheme == "digest":
            challenge = DigestChallenge.from_params(params)
            if challenge is not None:
                _LEARNED_AUTH[_origin(url)] = challenge
                return challenge
    if any(scheme == "basic" for scheme, _ in challenges):
        _LEARNED_AUTH[_origin(url)] = "basic"
        return "basic"
    return None


def _authorization(learned: str | DigestChallenge, method: str, url: str, creds: Credentials) -> str:
    assert creds.user is not None and creds.password is not None
    if isinstance(learned, DigestChallenge):
        return learned.authorization(method, url, creds.user, creds.password)
    pair = base64.b64encode(f"{creds.user}:{creds.password}".encode()).decode("ascii")
    return f"Basic {pair}"


def authorized_request(
    method: str,
    url: str,
    *,
    body: bytes | StreamedBody | None = None,
    headers: Mapping[str, str] | None = None,
    timeout: float = DEFAULT_TIMEOUT,
    max_bytes: int = DEFAULT_MAX_ANSWER,
    environ: Mapping[str, str] | None = None,
    label: str | None = None,
    deadline: float | None = None,
) -> HttpAnswer:
    """``http_request`` with the environment's credentials, all within one deadline.

    A bearer token is sent with the request. A user and password are sent only in the form the server
    asks for in its ``WWW-Authenticate`` challenge (Digest, else Basic): the first request to a server
    goes without them and, on 401, once more with them. A streamed body (a large upload) is not sent
    twice: a bodiless ``HEAD`` asks for the challenge first.
    """
    deadline = time.monotonic() + timeout if deadline is None else deadline
    creds = credentials(environ)
    sent_headers = dict(headers or {})

    def send(verb: str, payload: bytes | StreamedBody | None, extra: Mapping[str, str]) -> HttpAnswer:
        return http_request(
            verb,
            url,
            body=payload,
            headers={**sent_headers, **extra},
            timeout=timeout,
            max_bytes=max_bytes,
            label=label,
            deadline=deadline,
        )

    if creds is None:
        return send(method, body, {})
    if creds.token:
        return send(method, body, {"Authorization": f"Bearer {creds.token}"})
    learned = _LEARNED_AUTH.get(_origin(url))
    if learned is None and isinstance(body, StreamedBody):
        probe = send("HEAD", None, {})
        if probe.status == 401:
            learned = _learn(url, probe)
    answer = send(method, body, {"Authorization": _authorization(learned, method, url, creds)} if learned else {})
    if answer.status != 401:
        return answer
    relearned = _learn(url, answer)
    if relearned is None:
        return answer
    if learned == "basic" and relearned == "basic":
        return answer  # Basic was answered already: the credentials themselves are refused
    # Otherwise the first try went without credentials, or its Digest nonce went stale: once more.
    return send(method, body, {"Authorization": _authorization(relearned, method, url, creds)})


# ------------------------------------------------------------------------------------------ HTTP


@dataclass(frozen=True)
class HttpAnswer:
    """An HTTP answer: status, reason, media type (no parameters), headers of interest and body."""

    status: int
    reason: str
    media_type: str
    body: bytes
    location: str | None = None
    challenges: tuple[str, ...] = ()  # the WWW-Authenticate header values
    #: Virtuoso's X-SPARQL-MaxRows: the answer was cut at this many rows (its ResultSetMaxRows).
    max_rows: str | None = None

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300

    def excerpt(self, limit: int = EXCERPT_CHARS) -> str:
        """The start of the body on one line, for messages; an HTML page's text without its markup."""
        text = self.body.decode("utf-8", "replace")
        if self.media_type in ("text/html", "application/xhtml+xml") or text.lstrip().startswith("<"):
            text = html_text(text)
        text = " ".join(text.split())
        return text if len(text) <= limit else text[: limit - 1] + "…"


def html_text(page: str) -> str:
    """The text of an HTML error page: its head, scripts and styles dropped, tags stripped, entities
    decoded. Servers put the reason in the body (Virtuoso: inside ``<xmp>``)."""
    page = re.sub(r"(?is)<!--.*?-->|<(head|script|style)\b.*?</\1\s*>|<!DOCTYPE[^>]*>", " ", page)
    return html.unescape(re.sub(r"(?s)<[^>]*>", " ", page))


@dataclass(frozen=True)
class StreamedBody:
    """A request body sent in chunks with its length announced: ``chunks`` is called for each sending
    (a retry after a challenge sends it again), and must give ``size`` bytes in all."""

    size: int
    chunks: Callable[[], Iterator[bytes]]


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """Redirects are reported, not followed: following one would send credentials to another address
    (urllib keeps the Authorization header) and would turn a POST into a GET."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


class _Watchdog:
    """Shuts the connection of a request still going at ``deadline`` (which an upload moves on as it
    sends): a socket's timeout bounds each read, not the answer, so without it a server that sends
    its status line a byte a second, or 100 Continue heads without end, would hold the command for ever."""

    def __init__(self, deadline: float) -> None:
        import threading

        self.deadline = deadline
        self.sock: socket.socket | None = None
        self.fired = False
        self._stop = threading.Event()
        threading.Thread(target=self._watch, name="sotakg-request-deadline", daemon=True).start()

    #: How long after the deadline the watchdog acts: a socket's own timeout, which ends a silent wait
    #: at the deadline with the clearer message, comes first.
    GRACE = 0.25

    def _watch(self) -> None:
        while not self._stop.wait(max(0.0, min(0.1, self.deadline + self.GRACE - time.monotonic()))):
            if time.monotonic() >= self.deadline + self.GRACE and self.sock is not None:
                self.fired = True
                try:
                    self.sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                return

    def stop(self) -> None:
        self._stop.set()


def _watched(base: type[Any], watchdog: _Watchdog) -> Callable[..., Any]:
    """A connection class of ``base`` whose socket, once connected, ``watchdog`` holds."""

    def connection(*args: Any, **kwargs: Any) -> Any:
        made = base(*args, **kwargs)
        create = made._create_connection

        def create_and_watch(*create_args: Any, **create_kwargs: Any) -> socket.socket:
            sock = create(*create_args, **create_kwargs)
            watchdog.sock = sock
            return sock

        made._create_connection = create_and_watch
        return made

    return connection


class _WatchedHTTP(urllib.request.HTTPHandler):
    def __init__(self, watchdog: _Watchdog) -> None:
        super().__init__()
        self.watchdog = watchdog

    def http_open(self, req: Any) -> Any:
        import http.client

        return self.do_open(_watched(http.client.HTTPConnection, self.watchdog), req)


class _WatchedHTTPS(urllib.request.HTTPSHandler):
    def __init__(self, watchdog: _Watchdog) -> None:
        super().__init__()
        self.watchdog = watchdog

    def https_open(self, req: Any) -> Any:
        import http.client

        context = getattr(self, "_context", None)  # what the base class would pass (None: the default)
        return self.do_open(_watched(http.client.HTTPSConnection, self.watchdog), req, context=context)


def _opener(url: str, watchdog: _Watchdog | None = None) -> urllib.request.OpenerDirector:
    handlers: list[urllib.request.BaseHandler] = [_NoRedirect()]
    if watchdog is not None:
        handlers += [_WatchedHTTP(watchdog), _WatchedHTTPS(watchdog)]
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


def _connection_problem(url: str, reason: object, timeout: float, label: str | None = None) -> EndpointError:
    """A clear message for a request that got no HTTP answer at all."""
    import errno
    import ssl

    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or url
    where = f"{host}:{parts.port or (443 if parts.scheme == 'https' else 80)}"
    shown = label or url
    if isinstance(reason, TimeoutError):
        return EndpointTimeout(f"{shown} did not answer within {timeout:g} s")
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
    return EndpointError(f"cannot reach {shown}: {reason}")


class _Upload:
    """A streamed body for urllib: its chunks, each sent within the socket's time limit, and the moment
    the last one went, from which the wait for the answer is counted."""

    def __init__(self, body: StreamedBody, watchdog: _Watchdog, timeout: float) -> None:
        self.body = body
        self.finished: float | None = None
        self.watchdog = watchdog
        self.timeout = timeout

    def __iter__(self) -> Iterator[bytes]:
        sent = 0
        for chunk in self.body.chunks():
            sent += len(chunk)
            self.watchdog.deadline = time.monotonic() + self.timeout  # each chunk within the timeout
            yield chunk
        if sent != self.body.size:
            raise EndpointError(f"the body changed while it was sent ({sent} bytes, not {self.body.size})")
        self.finished = time.monotonic()
        self.watchdog.deadline = self.finished + self.timeout  # and the answer within it after the last


def http_request(
    method: str,
    url: str,
    *,
    body: bytes | StreamedBody | None = None,
    headers: Mapping[str, str] | None = None,
    timeout: float = DEFAULT_TIMEOUT,
    max_bytes: int = DEFAULT_MAX_ANSWER,
    label: str | None = None,
    deadline: float | None = None,
) -> HttpAnswer:
    """Send one HTTP request and read the whole answer within ``timeout`` seconds in all (or by
    ``deadline``, a ``time.monotonic()`` instant, when given; messages still name ``timeout``).

    A StreamedBody is sent chunk by chunk with its Content-Length (no chunked encoding: not every
    server takes it); each chunk must go within ``timeout``, and the answer must come within
    ``timeout`` after the last. Any status comes back as an HttpAnswer (the body of a non-2xx answer is
    cut to its first ERROR_BODY_BYTES). No answer at all is an EndpointError saying why (refused,
    unknown host, unreachable, closed) or an EndpointTimeout; a 2xx body over ``max_bytes`` or cut
    short is an EndpointError. ``label`` replaces the URL in messages (a GET's URL holds the query).
    """
    import http.client

    deadline = time.monotonic() + timeout if deadline is None else deadline
    shown = label or url
    if deadline - time.monotonic() <= 0:
        raise EndpointTimeout(f"{shown} did not answer within {timeout:g} s")
    watchdog = _Watchdog(deadline)
    try:
        answer = _exchange(method, url, body, headers, timeout, max_bytes, shown, label, deadline, watchdog)
    except (EndpointError, OSError, http.client.HTTPException):
        if watchdog.fired:
            raise EndpointTimeout(f"{shown} did not finish answering within {timeout:g} s") from None
        raise
    finally:
        watchdog.stop()
    if watchdog.fired:  # a body read to its "end" may have been cut there
        raise EndpointTimeout(f"{shown} did not finish answering within {timeout:g} s")
    return answer


def _exchange(
    method: str,
    url: str,
    body: bytes | StreamedBody | None,
    headers: Mapping[str, str] | None,
    timeout: float,
    max_bytes: int,
    shown: str,
    label: str | None,
    deadline: float,
    watchdog: _Watchdog,
) -> HttpAnswer:
    """``http_request``'s request and answer, with ``watchdog`` holding the connection to the deadline."""
    import http.client
    import urllib.error

    remaining = deadline - time.monotonic()
    all_headers = dict(headers or {})
    upload = _Upload(body, watchdog, timeout) if isinstance(body, StreamedBody) else None
    data: Any = body
    if upload is not None:
        data = upload
        all_headers["Content-Length"] = str(upload.body.size)
    request = urllib.request.Request(url, data=data, method=method, headers=all_headers)
    try:
        response = _opener(url, watchdog).open(request, timeout=min(remaining, timeout) if upload is None else timeout)
    except urllib.error.HTTPError as error:
        if upload is not None and upload.finished is not None:
            deadline = max(deadline, upload.finished + timeout)
        try:
            text = _read_body(error.fp or error, deadline, ERROR_BODY_BYTES, False, shown, timeout)
        finally:
            error.close()
        return HttpAnswer(
            error.code,
            str(error.reason or ""),
            error.headers.get_content_type() if error.headers else "",
            text,
            error.headers.get("Location") if error.headers else None,
            tuple(error.headers.get_all("WWW-Authenticate") or ()) if error.headers else (),
        )
    except urllib.error.URLError as error:
        raise _connection_problem(url, error.reason, timeout, label) from None
    except (TimeoutError, ConnectionError) as error:
        raise _connection_problem(url, error, timeout, label) from None
    except http.client.HTTPException as error:
        raise EndpointError(f"{shown} did not answer in HTTP ({type(error).__name__}: {error})") from None
    if upload is not None and upload.finished is not None:
        deadline = max(deadline, upload.finished + timeout)
    with response:
        text = _read_body(response, deadline, max_bytes, True, shown, timeout)
        return HttpAnswer(
            response.status,
            str(response.reason or ""),
            response.headers.get_content_type(),
            text,
            response.headers.get("Location"),
            tuple(response.headers.get_all("WWW-Authenticate") or ()),
            response.headers.get("X-SPARQL-MaxRows"),
        )


QUERY_ENDPOINT_HINT = (
    "is it the server's query endpoint? (Oxigraph: http://HOST:7878/query, Virtuoso: http://HOST:8890/sparql, "
    "Fuseki: http://HOST:3030/DATASET/query)"
)


def refusal_message(
    answer: HttpAnswer, url: str, environ: Mapping[str, str] | None = None, *, writing: bool = False
) -> str:
    """What a non-2xx answer means, with the server's own reason (markup stripped, its first
    REASON_CHARS characters) and what to do where that is clear. A 403 says the server refuses the
    request (read-only, when ``writing``), with no hint about credentials: it knows who is asking."""
    head = f"{url} answered HTTP {answer.status} {answer.reason}".rstrip()
    excerpt = answer.excerpt(REASON_CHARS)
    text = f"{head}: {excerpt}" if excerpt else head
    if answer.status == 401:
        source = credentials_source(environ)
        asked = parse_challenges(answer.challenges)
        answerable = any(scheme == "basic" for scheme, _ in asked) or any(
            scheme == "digest" and DigestChallenge.from_params(params) is not None for scheme, params in asked
        )
        creds = credentials(environ) if source else None
        if creds is not None and creds.token is None and not answerable:
            schemes = ", ".join(sorted({scheme for scheme, _ in asked})) or "nothing sotakg can read"
            return (
                f"{text}\nthe server asks for {schemes} in a form sotakg does not answer, so the credentials "
                f"from {source} were not sent (sotakg answers Basic, and Digest with MD5 or SHA-256 and "
                f"qop=auth or none)"
            )
        if source:
            return f"{text}\nthe credentials from {source} were refused; check them"
        return f"{text}\nthe server wants credentials: {CREDENTIALS_HINT}"
    if answer.status == 403:
        if writing:
            return f"{text}\nthe server is read-only here: it refuses to change the graph"
        return f"{text}\nthe server refuses this request"
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


#: The SPARQL 1.1 Protocol's three ways to send a query, and ``auto``, which picks GET or a form POST.
METHODS = ("auto", "get", "post-form", "post-direct")
#: Longest GET URL ``auto`` sends; past it, a form POST (servers and proxies commonly cap URLs at 8 KB,
#: some at 2 KB).
SAFE_URL_LENGTH = 2000
#: Answers meaning "not this way": ``auto`` tries the other way once.
_OTHER_WAY_STATUSES = frozenset({405, 415, 501})
#: The method that worked where ``auto``'s first choice was refused, per endpoint, for this process.
_PREFERRED_METHOD: dict[str, str] = {}


def check_method(method: str) -> str:
    """``method`` if it is one of METHODS; UsageProblem otherwise."""
    if method not in METHODS:
        raise UsageProblem(f"--method must be one of {', '.join(METHODS)}, not {method!r}")
    return method


@dataclass
class RemoteBackend:
    """A SPARQL 1.1 query endpoint (``--endpoint URL``), spoken to with the SPARQL 1.1 Protocol.

    A query goes with the predeclared prefixes in front, by ``method``: ``get`` (``?query=``),
    ``post-form`` (``application/x-www-form-urlencoded``), ``post-direct``
    (``application/sparql-query``, which some servers, Virtuoso 7 among them, never answer), or
    ``auto``: GET while the URL stays under SAFE_URL_LENGTH, a form POST past it, and on 405, 415 or
    501 the other of the two once, remembered for the endpoint. ``graph`` is passed as
    ``default-graph-uri``; bindings become a ``VALUES`` block at the head of the WHERE group
    (``with_values``: escaped terms, never raw text). SELECT and ASK ask for SPARQL JSON results,
    CONSTRUCT and DESCRIBE for N-Triples. Credentials come from the environment (``credentials``);
    ``environ`` replaces ``os.environ`` for that.
    """

    endpoint: str
    graph: str | None = None
    prefixes: Mapping[str, str] = field(default_factory=lambda: dict(PREFIXES))
    max_depth: int = MAX_DEPTH
    max_bytes: int = DEFAULT_MAX_ANSWER
    environ: Mapping[str, str] | None = None
    method: str = "auto"

    def __post_init__(self) -> None:
        check_endpoint(self.endpoint)
        if self.graph is not None:
            check_graph_iri(self.graph)
        check_method(self.method)
        credentials(self.environ)  # fail now, not at the first query, on half-set credentials

    @property
    def label(self) -> str:
        graph = f" (graph <{self.graph}>)" if self.graph else ""
        return f"the endpoint {self.endpoint}{graph}"

    def request_url(self) -> str:
        """The endpoint URL with the protocol's ``default-graph-uri`` when a graph is chosen."""
        return with_parameters(self.endpoint, self._graph_parameters())

    def _graph_parameters(self) -> list[tuple[str, str | None]]:
        return [("default-graph-uri", self.graph)] if self.graph else []

    def run(self, text: str, bindings: Bindings | None = None, timeout: float = DEFAULT_TIMEOUT) -> QueryResult:
        """Check the query, send it, and read the answer strictly."""
        form = check_query(text, self.max_depth)
        check_syntax(text, self.prefixes)
        sent = prologue(text, self.prefixes) + (with_values(text, bindings) if bindings else text)
        graph_form = form in ("CONSTRUCT", "DESCRIBE")
        accept = f"{N_TRIPLES}, text/turtle;q=0.5" if graph_form else SPARQL_JSON
        url = self.request_url()
        try:
            answer = self._ask(sent, accept, timeout)
        except EndpointTimeout as error:
            raise QueryTimeout(f"{error}; raise --timeout or narrow the query") from None
        except EndpointError as error:
            raise QueryFailed(str(error)) from None
        if answer.status != 200:
            message = refusal_message(answer, url, self.environ)
            if answer.status in (404, 405, 406, 415):
                # what a Graph Store or update endpoint, or a page that is no endpoint, answers a query
                message += f"\n{QUERY_ENDPOINT_HINT}"
            raise QueryFailed(message)
        result: QueryResult = self._graph(answer) if graph_form else self._table(answer, form)
        self._refuse_cut(answer, result)
        return _in_canonical_form(result)

    def _refuse_cut(self, answer: HttpAnswer, result: QueryResult) -> None:
        """QueryFailed when the server says it cut the answer at its row limit (Virtuoso's
        X-SPARQL-MaxRows: ResultSetMaxRows, 10000 in Debian's virtuoso.ini) and the answer has that
        many rows: a cut answer is never shown as whole."""
        limit = (answer.max_rows or "").strip()
        if not (limit.isascii() and limit.isdigit()):
            return
        size = len(result.triples) if isinstance(result, GraphResult) else len(getattr(result, "rows", ()))
        if size >= int(limit):
            raise QueryFailed(
                f"{self.label} cut its answer at {limit} rows (its X-SPARQL-MaxRows: Virtuoso's ResultSetMaxRows); "
                f"nothing is shown: narrow the query, or raise the server's limit"
            )

    def first_method(self, text: str) -> str:
        """The method the query ``text`` goes by first."""
        if self.method != "auto":
            return self.method
        preferred = _PREFERRED_METHOD.get(self.endpoint)
        if preferred is not None:
            return preferred
        return "get" if len(self._get_url(text)) <= SAFE_URL_LENGTH else "post-form"

    def _ask(self, text: str, accept: str, timeout: float) -> HttpAnswer:
        deadline = time.monotonic() + timeout
        method = self.first_method(text)
        answer = self._send(method, text, accept, timeout, deadline)
        if self.method == "auto" and answer.status in _OTHER_WAY_STATUSES:
            other = "post-form" if method == "get" else "get"
            retried = self._send(other, text, accept, timeout, deadline)
            if retried.ok:
                _PREFERRED_METHOD[self.endpoint] = other
            return retried
        return answer

    def _get_url(self, text: str) -> str:
        return with_parameters(self.endpoint, [("query", text), *self._graph_parameters()])

    def _send(self, method: str, text: str, accept: str, timeout: float, deadline: float) -> HttpAnswer:
        headers = {"Accept": accept}
        body: bytes | None = None
        if method == "get":
            verb, url = "GET", self._get_url(text)
        elif method == "post-form":
            verb, url = "POST", self.endpoint
            body = urllib.parse.urlencode([("query", text), *self._graph_parameters()]).encode("ascii")
            headers["Content-Type"] = "application/x-www-form-urlencoded"
        else:
            verb, url = "POST", self.request_url()
            body = text.encode("utf-8")
            headers["Content-Type"] = "application/sparql-query"
        return authorized_request(
            verb,
            url,
            body=body,
            headers=headers,
            timeout=timeout,
            max_bytes=self.max_bytes,
            environ=self.environ,
            label=self.request_url(),
            deadline=deadline,
        )

    def _broken(self, answer: HttpAnswer, what: str, detail: str) -> Exception:
        tail = " ".join(answer.body[-300:].decode("utf-8", "replace").split())
        if any(mark in answer.body[-2000:].lower() for mark in _CANCELLED_MARKS):
            return QueryTimeout(
                f"{self.label} stopped the query at its own time limit and sent a cut-short answer ending "
                f"{tail[-120:]!r}; narrow the query"
            )
        return QueryFailed(f"{self.label} sent an answer that is not valid {what} ({detail}); nothing is shown")

    def _table(self, answer: HttpAnswer, form: str | None) -> SelectResult | AskResult:
        # One reader, pyoxigraph's (streaming, in Rust): a decoding of the whole document in Python first
        # took about 48 times its size in memory, recursed on deep nesting, and could read a duplicate
        # key otherwise than the reader whose answer is shown.
        if answer.media_type not in _JSON_TYPES:
            raise QueryFailed(
                f"{self.label} answered with {answer.media_type or 'no media type'}, not {SPARQL_JSON}: "
                f"{answer.excerpt()}"
            )
        try:
            result = parse_sparql_results(answer.body, "json")
        except ValueError as error:
            raise self._broken(answer, "SPARQL JSON results", str(error)) from None
        problem = _boolean_document_problem(answer.body) if isinstance(result, AskResult) else None
        if problem:
            raise self._broken(answer, "SPARQL JSON results", problem)
        if form == "ASK" and isinstance(result, SelectResult):
            boolean = _virtuoso_ask(result)
            if boolean is None:
                raise self._broken(answer, "SPARQL JSON results", "an ASK answer needs a boolean")
            return AskResult(boolean)
        if form != "ASK" and isinstance(result, AskResult):
            raise self._broken(answer, "SPARQL JSON results", "a SELECT answer needs results.bindings")
        return result

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


#: The most a boolean answer's document may hold: it is ``{"head": {}, "boolean": true}`` and a little more.
MAX_BOOLEAN_DOCUMENT = 64 * 1024


def _boolean_document_problem(body: bytes) -> str | None:
    """Why a document pyoxigraph read as a boolean answer is not one whole (it stops reading at the
    boolean, so what follows is checked here: nothing after the document, no key given twice), or
    None. Such a document is small; a larger one is refused unread."""
    import json

    if len(body) > MAX_BOOLEAN_DOCUMENT:
        return f"a boolean answer of {len(body)} bytes (more than {MAX_BOOLEAN_DOCUMENT})"

    def no_repeats(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        keys = [key for key, _value in pairs]
        if len(set(keys)) != len(keys):
            raise ValueError(f"a key given twice in {keys}")
        return dict(pairs)

    try:
        json.loads(body.decode("utf-8"), object_pairs_hook=no_repeats)
    except (UnicodeDecodeError, ValueError, RecursionError) as error:
        return str(error)[:200]
    return None


def _virtuoso_ask(result: SelectResult) -> bool | None:
    """The answer of an ASK query that Virtuoso 7 wrote as a one-column table (``__ASK_RETVAL``, 1 or
    0, or no row) instead of a boolean; None for any other table."""
    if result.variables != ("__ASK_RETVAL",):
        return None
    if not result.rows:
        return False
    if len(result.rows) != 1:
        return None
    (value,) = result.rows[0]
    text = getattr(value, "value", None)
    if not isinstance(text, str) or text not in ("0", "1"):
        return None
    return text == "1"


def _whole_number(sign: str, digits: str) -> tuple[str, str]:
    """The sign ("" or "-") and digits of a whole number in canonical form: no "+", no leading zero,
    no "-0". On the text, not int(): a server's answer may hold more digits than int() reads."""
    digits = digits.lstrip("0") or "0"
    return ("-" if sign == "-" and digits != "0" else ""), digits


def _year_form(match: re.Match[str]) -> str:
    sign, digits = _whole_number(match[1], match[2])
    return sign + digits.zfill(4) + (match[3] or "")


def _integer_form(match: re.Match[str]) -> str:
    return "".join(_whole_number(match[1], match[2]))


#: The typed literals whose value a server may write in another lexical form than the one sent, each
#: with the exact pattern of a lexical form and its value's canonical form. Virtuoso 7 writes the
#: xsd:gYear "-0005" back as "-005" (a form xsd:gYear does not allow), "+7"^^xsd:integer as "7".
_VALUE_FORMS: dict[str, tuple[re.Pattern[str], Callable[[re.Match[str]], str]]] = {
    XSD_GYEAR: (re.compile(r"([+-]?)(\d+)(Z|[+-]\d\d:\d\d)?", re.ASCII), _year_form),
    XSD_INTEGER: (re.compile(r"([+-]?)(\d+)", re.ASCII), _integer_form),
}


def canonical_value(term: object) -> object:
    """``term``, or for a literal of a type in ``_VALUE_FORMS``, the literal with its value in canonical
    form: two graphs are the same when they hold the same values, whichever form a server wrote."""
    from pyoxigraph import Literal

    if not isinstance(term, Literal):
        return term
    form = _VALUE_FORMS.get(term.datatype.value)
    if form is None:
        return term
    pattern, canonical = form
    match = pattern.fullmatch(term.value)
    return Literal(canonical(match), datatype=term.datatype) if match else term


def _in_canonical_form(result: QueryResult) -> QueryResult:
    """``result`` with each value a server may write in another form (``canonical_value``) as the
    embedded store writes it, so that an answer shows what the local one does."""
    from pyoxigraph import Triple

    if isinstance(result, SelectResult):
        rows = tuple(tuple(canonical_value(term) for term in row) for row in result.rows)
        return SelectResult(result.variables, rows)  # type: ignore[arg-type]
    if isinstance(result, GraphResult):
        triples = tuple(Triple(t.subject, t.predicate, canonical_value(t.object)) for t in result.triples)  # type: ignore[arg-type]
        return GraphResult(triples)
    return result


FETCH_GRAPH_QUERY = "CONSTRUCT { ?s ?p ?o } WHERE { ?s ?p ?o }"


def fetch_graph(
    endpoint: str,
    graph: str | None = None,
    timeout: float = DEFAULT_TIMEOUT,
    max_bytes: int = DEFAULT_MAX_ANSWER,
    environ: Mapping[str, str] | None = None,
    method: str = "auto",
) -> bytes:
    """The whole graph of ``endpoint`` (its default graph, or ``graph``) as N-Triples, fetched with one
    CONSTRUCT query (sent by ``method``, as RemoteBackend does) and read strictly; for checking a
    remote graph with the shapes."""
    from pyoxigraph import RdfFormat, serialize

    backend = RemoteBackend(endpoint, graph, max_bytes=max_bytes, environ=environ, method=method)
    result = backend.run(FETCH_GRAPH_QUERY, None, timeout)
    if not isinstance(result, GraphResult):
        raise QueryFailed(f"{backend.label} answered a CONSTRUCT query with something other than triples")
    # A server may cut a CONSTRUCT answer at its row limit without a word (Virtuoso does): the
    # graph is checked only when it is all there, as the server counts it.
    counted = backend.run(COUNT_GRAPH_QUERY, None, timeout)
    total = _single_count(counted)
    fetched = len(set(result.triples))
    if total is None:
        raise QueryFailed(f"{backend.label} did not answer how many triples its graph holds; nothing is checked")
    if fetched != total:
        raise QueryFailed(
            f"{backend.label} sent {fetched} of the {total} triples it holds (a row limit of the server's, such as "
            f"Virtuoso's ResultSetMaxRows, or a graph that changed meanwhile); nothing is checked: raise the "
            f"server's limit, or try again"
        )
    return serialize(result.triples, format=RdfFormat.N_TRIPLES) or b""


COUNT_GRAPH_QUERY = "SELECT (COUNT(*) AS ?triples) WHERE { ?s ?p ?o }"


def _single_count(result: QueryResult) -> int | None:
    """The one integer of a one-row, one-column answer, or None."""
    rows = getattr(result, "rows", None)
    if not rows or len(rows) != 1 or len(rows[0]) != 1:
        return None
    text = getattr(rows[0][0], "value", None)
    return int(text) if isinstance(text, str) and text.isascii() and text.isdigit() else None
