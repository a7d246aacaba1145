"""The guard's HTTP on the wire (``server/wire.py``): strict header fields, the engine's answers."""

from __future__ import annotations

import http.client
import io
import socket

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sotakg.server.wire import MAX_FIELDS, MAX_LINE, BadHead, EngineAnswer, EngineConnection, read_fields

TOKEN_CHARS = "!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
names = st.text(TOKEN_CHARS, min_size=1, max_size=20)
# A field value as sent: no CR, LF or NUL, no blanks at either end (they are not part of the value).
values = st.text(st.characters(min_codepoint=1, max_codepoint=255, exclude_characters="\r\n"), max_size=40).map(
    lambda value: value.strip(" \t")
)


def stream(data: bytes) -> io.BufferedReader:
    return io.BufferedReader(io.BytesIO(data))


@given(st.lists(st.tuples(names, values), max_size=MAX_FIELDS), st.sampled_from([b"\r\n", b"\n"]))
def test_fields_read_back_as_they_were_written(fields, end):
    text = b"".join(f"{name}:  {value}\t".encode("latin-1") + end for name, value in fields) + end + b"BODY"
    source = stream(text)
    headers = read_fields(source)
    assert headers.items() == fields
    assert source.read() == b"BODY"  # the empty line is taken, nothing after it
    for name, value in fields:
        assert headers.get(name.upper()) == next(v for n, v in fields if n.lower() == name.lower())
        assert headers.count(name) == sum(1 for n, _ in fields if n.lower() == name.lower())
        assert value in headers.get_all(name.swapcase())


@pytest.mark.parametrize(
    "head",
    [
        b"Host: x\r\n folded: on\r\n\r\n",  # obs-fold
        b"Host : x\r\n\r\n",  # a blank before the colon
        b"Host x\r\n\r\n",  # no colon
        b": x\r\n\r\n",  # no name
        b"Ho\x00st: x\r\n\r\n",
        b"Host: a\rb\r\n\r\n",  # a bare CR inside the value
        b"Host: a\x00b\r\n\r\n",
        b"H(st: x\r\n\r\n",  # not a token
        b"Host: x\r\n",  # ends before the empty line
    ],
)
def test_a_line_that_is_not_a_field_makes_the_head_unreadable(head):
    with pytest.raises(BadHead):
        read_fields(stream(head))


def test_the_limits_of_the_standard_library_hold():
    with pytest.raises(BadHead, match="more than 100 header fields"):
        read_fields(stream(b"".join(b"X-%d: 1\r\n" % n for n in range(MAX_FIELDS + 1)) + b"\r\n"))
    most = read_fields(stream(b"".join(b"X-%d: 1\r\n" % n for n in range(MAX_FIELDS)) + b"\r\n"))
    assert len(most.items()) == MAX_FIELDS
    with pytest.raises(http.client.LineTooLong):
        read_fields(stream(b"X: " + b"a" * MAX_LINE + b"\r\n\r\n"))


def answer(data: bytes, method: str = "GET") -> EngineAnswer:
    return EngineAnswer(stream(data), method)


def body_of(reply: EngineAnswer, size: int = 7) -> bytes:
    pieces = []
    while piece := reply.read1(size):
        pieces.append(piece)
    return b"".join(pieces)


@given(st.binary(max_size=300), st.lists(st.integers(1, 50), max_size=10), st.booleans())
def test_a_chunked_body_reads_whole_however_it_is_cut_into_chunks(body, cuts, trailer):
    chunks, at = [], 0
    for size in cuts:
        if at < len(body):
            chunks.append(body[at : at + size])
            at += size
    chunks.append(body[at:])
    wire = b"".join(b"%x\r\n%s\r\n" % (len(chunk), chunk) for chunk in chunks if chunk)
    wire += b"0\r\n" + (b"X-Trailer: yes\r\n" if trailer else b"") + b"\r\nNEXT"
    reply = answer(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + wire)
    assert reply.chunked and reply.length is None and not reply.will_close
    assert body_of(reply) == body
    assert reply.isclosed()
    assert reply._reader.read() == b"NEXT"  # the next answer on the connection is left alone


@given(st.binary(min_size=1, max_size=200), st.data())
def test_a_chunked_body_that_breaks_off_never_reads_as_complete(body, data):
    head = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
    wire = head + b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body)
    cut = data.draw(st.integers(len(head), len(wire) - 1))
    reply = answer(wire[:cut])
    with pytest.raises(http.client.HTTPException):  # IncompleteRead, or BadHead in the final empty line
        body_of(reply)
    assert not reply.isclosed()


def test_a_body_of_known_length_says_when_it_ends_short():
    whole = answer(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhelloNEXT")
    assert (body_of(whole, 2), whole.length, whole.isclosed(), whole.will_close) == (b"hello", 0, True, False)
    short = answer(b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nhello")
    assert (body_of(short), short.length, short.isclosed()) == (b"hello", 4, False)


def test_the_head_of_an_answer():
    reply = answer(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.0 404 Not  Found \r\nA: 1\r\nA: 2\r\n\r\ngone")
    assert (reply.status, reply.reason, reply.getheader("a"), reply.getheaders()) == (
        404,
        "Not  Found",
        "1, 2",
        [("A", "1"), ("A", "2")],
    )
    assert reply.will_close and reply.length is None  # HTTP/1.0, no length: the body lasts until the close
    assert body_of(reply) == b"gone" and reply.isclosed()
    assert answer(b"HTTP/1.1 204 No Content\r\n\r\n").isclosed()
    assert answer(b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n", method="HEAD").isclosed()
    assert answer(b"HTTP/1.1 200 OK\r\nContent-Length: +9\r\n\r\n").length is None  # digits only
    assert answer(b"HTTP/1.1 200 OK\r\nContent-Length: \xb2\r\n\r\n").length is None  # "²" is a digit to str
    assert answer(b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 1\r\n\r\nx").will_close


@pytest.mark.parametrize(
    "line, error",
    [
        (b"", http.client.RemoteDisconnected),
        (b"HTTP/2 200 OK\r\n\r\n", http.client.BadStatusLine),
        (b"HTTP/1.1 200 O\rK\r\n\r\n", http.client.BadStatusLine),
        (b"HTTP/1.1 20 OK\r\n\r\n", http.client.BadStatusLine),
        (b"ICY 200 OK\r\n\r\n", http.client.BadStatusLine),
    ],
)
def test_a_status_line_the_guard_cannot_read_is_an_error(line, error):
    with pytest.raises(error):
        answer(line)


def test_a_request_goes_out_in_one_piece_and_no_line_break_gets_through():
    ours, theirs = socket.socketpair()
    with ours, theirs:
        connection = EngineConnection.__new__(EngineConnection)
        connection.sock, connection._reader, connection._seconds = ours, ours.makefile("rb"), 5.0
        theirs.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        reply = connection.request("POST", "/query?x=1", [("Host", "e:1"), ("Content-Length", "3")], b"ASK")
        assert theirs.recv(4096) == b"POST /query?x=1 HTTP/1.1\r\nHost: e:1\r\nContent-Length: 3\r\n\r\nASK"
        assert body_of(reply) == b"ok"
        for method, target, fields in [
            ("GET", "/q HTTP/1.1\r\nX: y", []),
            ("GET", "/q", [("X", "a\r\nInjected: yes")]),
            ("GET", "/q", [("X\n", "a")]),
        ]:
            with pytest.raises(BadHead):
                connection.request(method, target, fields, None)
        theirs.setblocking(False)
        with pytest.raises(BlockingIOError):
            theirs.recv(4096)  # nothing of the refused requests was sent


class Unbuffered:
    """The same bytes without a buffer to look into: ``read_fields`` reads them line by line."""

    def __init__(self, data: bytes):
        self._stream = stream(data)

    def readline(self, size: int = -1) -> bytes:
        return self._stream.readline(size)

    def read1(self, size: int = -1) -> bytes:
        return self._stream.read1(size)


def outcome(source) -> tuple[object, bytes]:
    try:
        read = read_fields(source, max_bytes=200)
        result: object = read.items()
    except http.client.HTTPException as error:
        result = (type(error), str(error))
    return result, source.read1(10_000)


HEAD_BYTES = st.lists(
    st.sampled_from([b"Host: x", b"X-%d:  v \t", b"A:", b"B : x", b" folded", b"C: a\rb", b"D: \x00", b"E" * 90])
    .flatmap(lambda line: st.sampled_from([line + b"\r\n", line + b"\n", line]))
    .map(lambda line: line.replace(b"%d", b"7")),
    max_size=8,
).map(b"".join)


@given(HEAD_BYTES, st.sampled_from([b"\r\n", b"\n", b"\r", b""]), st.binary(max_size=8))
def test_a_head_in_the_buffer_reads_as_the_line_by_line_reading_does(head, end, rest):
    data = head + end + rest
    assert outcome(stream(data)) == outcome(Unbuffered(data))


def test_a_head_in_the_buffer_is_read_without_reading_line_by_line(monkeypatch):
    source = stream(b"Host: x\r\nAccept: */*\r\n\r\nBODY")
    monkeypatch.setattr(source, "readline", None, raising=False)
    assert read_fields(source).items() == [("Host", "x"), ("Accept", "*/*")]
    assert source.read() == b"BODY"


def test_an_engine_connection_tells_whether_the_engine_wrote_to_it_unasked():
    import socket

    from sotakg.server.wire import EngineConnection

    with socket.create_server(("127.0.0.1", 0)) as listener:
        connection = EngineConnection("127.0.0.1", listener.getsockname()[1], 5.0)
        engine, _ = listener.accept()
    try:
        assert not connection.answered_unasked()
        engine.sendall(b"HTTP/1.1 500 Internal Server Error\r\n")
        assert connection.answered_unasked()
    finally:
        connection.close()
        engine.close()
    assert connection.answered_unasked()  # closed: it can carry nothing either


def test_a_connection_past_descriptor_1024_is_not_taken_for_a_stale_one():
    """select() cannot watch a descriptor past 1,023; the guard holds up to 512 clients and more."""
    import os
    import resource
    import socket

    from sotakg.server.wire import EngineConnection

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 1200:
        pytest.skip(f"this process may open only {hard} descriptors")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 1200), hard))
    fillers: list[int] = []
    try:
        while not fillers or fillers[-1] < 1030:
            fillers.append(os.dup(0))
        with socket.create_server(("127.0.0.1", 0)) as listener:
            connection = EngineConnection("127.0.0.1", listener.getsockname()[1], 5.0)
            engine, _ = listener.accept()
            try:
                assert connection.sock.fileno() > 1023
                assert not connection.answered_unasked()
            finally:
                connection.close()
                engine.close()
    finally:
        for descriptor in fillers:
            os.close(descriptor)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
