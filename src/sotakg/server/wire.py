"""The head of an HTTP/1.x message (start line and header fields) read strictly and fast, for the
guard's two sides: the client's request and the engine's answer, and the guard's connection to
the engine.

The standard library reads header fields with the ``email`` package (``http.client.parse_headers``):
lenient (a folded line, a space before the colon, a bare CR all pass) and, on the guard's small
requests, most of its time per query. A header field here is ``name: value`` with a token for a
name (RFC 9110 §5.1) and no CR, LF or NUL in the value; anything else makes the whole message
unreadable (``BadHead``), since the guard and the engine could read it differently.
"""

from __future__ import annotations

import http.client
import io
import re
import socket
from typing import Protocol


class LineReader(Protocol):
    """A buffered binary stream: ``readline`` and ``read1`` (an ``io.BufferedReader`` has a head that
    is in its buffer already read at once)."""

    def readline(self, size: int = -1, /) -> bytes: ...

    def read1(self, size: int = -1, /) -> bytes: ...


#: Longest line of a head, and most fields in one, as the standard library allows.
MAX_LINE = 65536
MAX_FIELDS = 100
#: The most a client's header fields may hold in all: what the engine takes (Oxigraph refuses a head
#: over 8 KiB), so a client cannot make the guard hold 100 lines of 64 KiB while its request trickles in.
MAX_REQUEST_FIELD_BYTES = 8192

#: Seconds by which a connection's timeout may differ from the one asked for (``settimeout``).
TIMEOUT_SLACK = 0.05

_TOKEN = rb"[!#$%&'*+\-.^_`|~0-9A-Za-z]"
#: (The value's trailing blanks are cut off in code: a lazy value before them took time quadratic in a
#: run of blanks inside it.)
_FIELD = re.compile(rb"(" + _TOKEN + rb"+):[ \t]*+([^\x00\r\n]*+)\r?\n")
#: Header fields and the empty line after them, from the start of a buffer: lines ``_FIELD`` reads
#: whole, one by one, as ``read_fields`` does.
_FIELDS_BLOCK = re.compile(rb"(?:" + _TOKEN + rb"++:[^\x00\r\n]*+\r?\n)*+\r?\n")


class BadHead(http.client.HTTPException):
    """A header block that is not a sequence of ``name: value`` lines."""


class FieldsTooLarge(http.client.LineTooLong):
    """Header fields over the size asked for (``read_fields``'s ``max_bytes``): a 431, as a long line is."""


class Headers:
    """Header fields in the order received; names are compared without regard to case."""

    __slots__ = ("_fields", "_by_name")

    def __init__(self, fields: list[tuple[str, str]]):
        self._fields = fields
        self._by_name: dict[str, list[str]] = {}
        for name, value in fields:
            self._by_name.setdefault(name.lower(), []).append(value)

    def get(self, name: str, default: str | None = None) -> str | None:
        """The first value of the field ``name``, or ``default``."""
        values = self._by_name.get(name.lower())
        return values[0] if values else default

    def get_all(self, name: str) -> list[str]:
        """Every value of the field ``name``, in order."""
        return list(self._by_name.get(name.lower(), ()))

    def count(self, name: str) -> int:
        """How many times the field ``name`` is given."""
        return len(self._by_name.get(name.lower(), ()))

    def items(self) -> list[tuple[str, str]]:
        """Every (name, value), in order."""
        return list(self._fields)


def read_fields(stream: LineReader, first: bytes | None = None, max_bytes: int | None = None) -> Headers:
    """The header fields from ``stream`` (after ``first``, a line already read from it) up to and
    including the empty line that ends them.

    Raises ``http.client.LineTooLong`` for a line over ``MAX_LINE`` (``FieldsTooLarge`` for fields over
    ``max_bytes`` in all), ``BadHead`` for more than
    ``MAX_FIELDS`` fields, a line that is not a field (folded, no colon, a space before it, a CR or
    NUL in the value) or a stream that ends before the empty line."""
    if first is None:
        whole = _buffered_fields(stream, max_bytes)
        if whole is not None:
            return whole
    fields: list[tuple[str, str]] = []
    match = _FIELD.fullmatch
    left = max_bytes if max_bytes is not None else -1
    while True:
        line = stream.readline(MAX_LINE + 1 if left < 0 else min(MAX_LINE, left) + 1) if first is None else first
        first = None
        if left >= 0:
            left -= len(line)
            if left < 0:
                raise FieldsTooLarge(f"header fields over {max_bytes} bytes")
        if len(line) > MAX_LINE:
            raise http.client.LineTooLong("header line")
        if line == b"\r\n" or line == b"\n":
            return Headers(fields)
        found = match(line)
        if found is None:
            if not line:
                raise BadHead("the header ended before its empty line")
            raise BadHead(f"header line {len(fields) + 1} is not 'name: value'")
        if len(fields) == MAX_FIELDS:
            raise BadHead(f"more than {MAX_FIELDS} header fields")
        name, value = found.groups()
        fields.append((name.decode("ascii"), value.rstrip(b" \t").decode("iso-8859-1")))


def _buffered_fields(stream: LineReader, max_bytes: int | None) -> Headers | None:
    """The header fields, when all of them and the empty line are in the stream's buffer already and
    within every limit (most heads: one segment holds the request or the answer's head), read with
    two regular-expression calls instead of two per line; None (nothing read) for ``read_fields``'s
    line-by-line reading, which says what is wrong with a head that is not so."""
    if not isinstance(stream, io.BufferedReader):
        return None
    found = _FIELDS_BLOCK.match(stream.peek(0))
    if found is None:
        return None
    size = found.end()
    if size > MAX_LINE or (max_bytes is not None and size > max_bytes):
        return None
    pairs = _FIELD.findall(found.group())
    if len(pairs) > MAX_FIELDS:
        return None
    stream.read(size)
    return Headers([(name.decode("ascii"), value.rstrip(b" \t").decode("iso-8859-1")) for name, value in pairs])


#: A status line: version, three digits, a reason phrase without control characters.
_STATUS_LINE = re.compile(rb"HTTP/1\.([0-9]) ([1-5][0-9][0-9])(?: ([^\x00-\x08\x0a-\x1f\x7f]*))?\r?\n")
_CHUNK_SIZE = re.compile(rb"([0-9A-Fa-f]{1,15})[ \t]*+(?:;[^\r\n]*)?\r?\n")


class EngineConnection:
    """One kept-alive connection to the engine. A request goes out in one write; answers are read
    through one buffered reader for the connection's life (``http.client`` makes one per answer)."""

    def __init__(self, host: str, port: int, seconds: float, connected: socket.socket | None = None):
        """A connection to ``host:port``, or over ``connected``, a socket connected to the engine already."""
        self.sock = connected if connected is not None else socket.create_connection((host, port), seconds)
        self.sock.settimeout(seconds)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._reader = self.sock.makefile("rb")
        self._seconds = seconds

    def settimeout(self, seconds: float) -> None:
        """Let each read and write of the connection wait at most ``seconds``, give or take
        ``TIMEOUT_SLACK`` (a system call each time it is set: not for every read of an answer)."""
        if abs(seconds - self._seconds) > TIMEOUT_SLACK:
            self.sock.settimeout(seconds)
            self._seconds = seconds

    def request(self, method: str, target: str, fields: list[tuple[str, str]], body: bytes | None) -> EngineAnswer:
        """Send a request and read the head of its answer. ``method`` must be a token and ``target``
        and the fields free of CR and LF, as ``read_fields`` and the guard's request line leave them;
        a line break anywhere would make two requests of one, so it is refused here too."""
        lines = [f"{method} {target} HTTP/1.1\r\n"]
        lines += [f"{name}: {value}\r\n" for name, value in fields]
        lines.append("\r\n")
        head = "".join(lines)
        if head.count("\n") != len(lines) or head.count("\r") != len(lines):
            raise BadHead("a line break inside the request line or a header field")
        data = head.encode("iso-8859-1")
        self.sock.sendall(data + body if body else data)
        return EngineAnswer(self._reader, method)

    def answered_unasked(self) -> bool:
        """Whether the engine has written to (or closed) this connection while no request was on it:
        an idle connection it timed out (the Oxigraph server writes a 500 after 60 s without a request,
        then closes), which must not carry the next request."""
        import select

        try:
            waiting = select.poll()  # not select(): the guard may hold more than 1,024 descriptors
            waiting.register(self.sock, select.POLLIN)
            return bool(waiting.poll(0))
        except (OSError, ValueError):  # closed already
            return True

    def close(self) -> None:
        self._reader.close()
        self.sock.close()


class EngineAnswer:
    """An answer of the engine: ``status``, ``reason``, ``headers``, and its body through ``read1``.

    ``length`` is what is left of a body of known length (0 once it is all read; not 0 when the body
    ended short of it), None for a chunked body or one that lasts until the connection closes."""

    def __init__(self, reader: LineReader, method: str):
        self._reader = reader
        while True:
            line = reader.readline(MAX_LINE + 1)
            if not line:
                raise http.client.RemoteDisconnected("the engine closed the connection without an answer")
            found = _STATUS_LINE.fullmatch(line)
            if found is None:
                raise http.client.BadStatusLine(line.decode("iso-8859-1")[:80])
            minor, status, reason = found.groups()
            fields = read_fields(reader)
            if not status.startswith(b"1"):  # an interim answer (100 Continue): the real one follows
                break
        self.status = int(status)
        self.reason = (reason or b"").decode("iso-8859-1").strip()
        self.headers = fields
        coding = (fields.get("Transfer-Encoding") or "").strip().lower()
        self.chunked = coding == "chunked"
        self.length: int | None = None
        length = fields.get("Content-Length")
        if not self.chunked and length is not None and length.strip().isascii() and length.strip().isdigit():
            self.length = int(length)
        if self.status in (204, 304) or method == "HEAD":
            self.length = 0
        connection = (fields.get("Connection") or "").lower()
        self.will_close = (
            "close" in connection
            or (minor == b"0" and "keep-alive" not in connection)
            or (not self.chunked and self.length is None)
            or (bool(coding) and not self.chunked)
        )
        self._chunk_left = 0
        self._done = self.length == 0

    def getheader(self, name: str, default: str | None = None) -> str | None:
        """The field ``name``, its values joined by ", " when it is given more than once."""
        values = self.headers.get_all(name)
        return ", ".join(values) if values else default

    def getheaders(self) -> list[tuple[str, str]]:
        return self.headers.items()

    def isclosed(self) -> bool:
        """Whether the whole body has been read (the connection may then carry the next request)."""
        return self._done

    def read1(self, size: int) -> bytes:
        """At most ``size`` bytes of the body, from what one read gives; b"" at its end. Raises
        ``http.client.IncompleteRead`` for a chunked body that breaks off."""
        if self._done or size <= 0:
            return b""
        reader = self._reader
        if self.chunked:
            if self._chunk_left == 0 and not self._next_chunk():
                return b""
            data = reader.read1(min(size, self._chunk_left))
            if not data:
                raise http.client.IncompleteRead(b"", self._chunk_left)
            self._chunk_left -= len(data)
            if self._chunk_left == 0 and reader.readline(3) not in (b"\r\n", b"\n"):
                raise http.client.IncompleteRead(b"")
            return data
        wanted = size if self.length is None else min(size, self.length)
        data = reader.read1(wanted)
        if self.length is not None:
            self.length -= len(data)
            self._done = self.length == 0
        elif not data:
            self._done = True
        return data

    def _next_chunk(self) -> bool:
        line = self._reader.readline(MAX_LINE + 1)
        found = _CHUNK_SIZE.fullmatch(line)
        if found is None:
            raise http.client.IncompleteRead(b"")
        self._chunk_left = int(found.group(1), 16)
        if self._chunk_left:
            return True
        line = self._reader.readline(MAX_LINE + 1)
        if line not in (b"\r\n", b"\n"):  # a trailer, up to the empty line (most answers have none)
            if not line:
                raise http.client.IncompleteRead(b"")
            read_fields(self._reader, first=line)
        self._done = True
        return False
