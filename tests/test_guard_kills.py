"""Tests written to kill the mutants of ``server/guard.py`` that the guard's tests let live (issue 20):
each asserts what the guard answers, says, forwards or counts, exactly. The pure parts (screening,
turns, buffers, the relay's socket side) are called directly; the proxy runs in this process before a
stand-in engine on 127.0.0.1 (``conftest.stand_in_server``), so no test here needs an Oxigraph server.
Every wait is bounded and no assertion depends on how fast the machine is."""

from __future__ import annotations

import collections
import html
import http.server
import re
import socket
import sys
import threading
import urllib.parse
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from sotakg.server import guard
from sotakg.server.guard import (
    Buffers,
    GuardSettings,
    Refusal,
    Turns,
    asks_for_description,
    ends_whole,
    running_guard,
    screen_query,
    screen_request,
)
from sotakg.server.wire import Headers

from .conftest import stand_in_server
from .test_guard import raw_request, requests_on

SERVICE = "SELECT * WHERE { SERVICE <http://x/> { ?s ?p ?o } }"
ONE_QUERY = Refusal(400, "refused: a request carries one query; send each query in a request of its own\n")
SERVICE_REFUSED = Refusal(
    400,
    "refused: SERVICE (line 1, column 18) would make the store query a remote endpoint over the network; "
    "queries here run on the local graph only\n",
)
UPDATE = "INSERT DATA { <x:a> <x:b> <x:c> }"
UPDATE_REFUSED = Refusal(
    403,
    "refused: INSERT (line 1, column 1) is SPARQL Update, and the graph is read-only here: it is compiled from "
    "the data folder. Only SELECT, ASK, CONSTRUCT and DESCRIBE queries run\n",
)
READ_ONLY = Refusal(403, "refused: this server is read-only; SPARQL Update is not accepted\n")
NOT_UTF8_QUERY_STRING = Refusal(400, "refused: the query string is not valid percent-encoded UTF-8\n")
NOT_UTF8_FORM = Refusal(400, "refused: the form is not valid percent-encoded UTF-8\n")
POST_MEDIA = Refusal(
    415,
    "refused: POST /query takes a application/sparql-query body or a application/x-www-form-urlencoded form "
    "with a query\n",
)
UNDECLARED_RDF = Refusal(
    400,
    "refused: syntax error at line 1, column 10: the prefix rdf: is not declared; declare it with PREFIX rdf: <…>\n"
    "   1 | ASK { ?s rdf:type ?o }\n     |          ^\n",
)


def q(text: str) -> str:
    return urllib.parse.quote(text, safe="")


# ------------------------------------------------------------------------------------------ screening


def test_framing_two_of_a_header_and_targets_that_are_not_printable_ascii():
    one = Headers([("Content-Type", "a"), ("Content-Length", "1")])
    assert guard._framing_refusal("/query", one) is None
    for name in guard._ONCE:
        two = Headers([(name, "a"), (name.upper(), "b"), ("X-A", "1")])
        assert guard._framing_refusal("/query", two) == Refusal(
            400, f"refused: the request has more than one {name} header\n"
        )
    three = Headers([("Transfer-Encoding", "a")] * 3)
    assert guard._framing_refusal("/", three) == Refusal(
        400, "refused: the request has more than one Transfer-Encoding header\n"
    )
    bad = Refusal(400, "refused: percent-encode spaces, control characters and non-ASCII in the request target\n")
    for target in ("/\xe9", "/\x01", "/a b", "/\x7f", "/é?x"):
        assert guard._framing_refusal(target, one) == bad, target
    assert guard._framing_refusal("/query?query=ASK%7B%7D", one) is None


def test_screen_query_says_why_with_its_status():
    assert screen_query(SERVICE) == SERVICE_REFUSED
    assert screen_query(UPDATE) == UPDATE_REFUSED
    assert screen_query("ASK {}") is None
    # the engine knows no prefix the query does not declare
    assert screen_query("ASK { ?s rdf:type ?o }") == UNDECLARED_RDF
    deep = "ASK {" + "{" * 20 + "}" * 20 + "}"
    assert screen_query(deep) is None
    assert screen_query(deep, max_depth=5) == Refusal(
        400,
        "refused: the query nests brackets and prefix operators (! - + ^) more than 5 levels deep "
        "(line 1, column 10 reaches level 6); the limit is 5\n",
    )
    assert screen_query('ASK { "abc }') == Refusal(
        400,
        'refused: syntax error at line 1, column 7: unterminated string: the string opened here has no closing "\n'
        '   1 | ASK { "abc }\n     |       ^\n',
    )


@pytest.mark.parametrize("method", ["GET", "HEAD"])
def test_screening_a_url_as_the_engine_reads_it(method):
    assert screen_request(method, "/query?query=" + q(SERVICE), None, None, b"") == SERVICE_REFUSED
    assert screen_request(method, "/query?query=" + q(UPDATE), None, None, b"") == UPDATE_REFUSED
    # one query a request: a second is refused before either is checked
    assert screen_request(method, "/x?query=ASK%7B%7D&query=" + q(SERVICE), None, None, b"") == ONE_QUERY
    assert screen_request(method, "/x?query=ASK%7B%7D&query=ASK%7B%7D", None, None, b"") == ONE_QUERY
    # the protocol's dataset parameters are FROM in another spelling
    for name in ("default-graph-uri", "named-graph-uri"):
        refused = screen_request(method, f"/query?query=ASK%7B%7D&{name}=urn:x", None, None, b"")
        assert refused is not None and refused.status == 400 and name in refused.message
    assert screen_request(method, "/query?query=ASK%7B%7D" + "&a" * 99, None, None, b"") is None  # 100
    assert screen_request(method, "/query?query=ASK%7B%7D" + "&a" * 100, None, None, b"") == Refusal(
        400, "refused: the query string holds more than 100 parameters\n"
    )
    assert screen_request(method, "/query?update=CLEAR%20ALL", None, None, b"") == READ_ONLY
    assert screen_request(method, "/query?update=", None, None, b"") == READ_ONLY
    assert screen_request(method, "/query?query=%ff", None, None, b"") == NOT_UTF8_QUERY_STRING
    assert screen_request(method, "/query?query=" + q("ASK { ?s rdf:type ?o }"), None, None, b"") == UNDECLARED_RDF
    # a parameter without "=" is no error, and the query after it is read
    assert screen_request(method, "/query?x&query=ASK%7B%7D", None, None, b"") is None
    assert screen_request(method, "/query?x&query=" + q(SERVICE), None, None, b"") == SERVICE_REFUSED
    assert screen_request(method, "/", None, None, b"") is None
    assert screen_request(method, "/query?query=ASK%7B%7D", "text/plain", "gzip", b"ignored") is None
    # the depth limit is the one given
    deep = "/query?query=" + q("ASK {" + "{" * 20 + "}" * 20 + "}")
    assert screen_request(method, deep, None, None, b"") is None
    assert screen_request(method, deep, None, None, b"", max_depth=5).status == 400
    # past the remembered length, the same verdicts
    long = "/query?query=" + q(SERVICE) + "&pad=" + "a" * guard.SCREENED_TARGETS_CHARS
    assert screen_request(method, long, None, None, b"") == SERVICE_REFUSED
    long_deep = deep + "&pad=" + "a" * guard.SCREENED_TARGETS_CHARS
    assert screen_request(method, long_deep, None, None, b"") is None
    assert screen_request(method, long_deep, None, None, b"", max_depth=5).status == 400
    assert screen_request(method, "/?pad=" + "a" * guard.SCREENED_TARGETS_CHARS, None, None, b"") is None


@pytest.mark.parametrize("path", ["/query", "/sparql"])
@pytest.mark.parametrize("pad", [0, guard.SCREENED_TARGETS_CHARS])
def test_screening_a_post(path, pad):
    target = path + ("?pad=" + "a" * pad if pad else "")
    media = guard.QUERY_MEDIA
    assert screen_request("POST", target, media, None, b"ASK {}") is None
    assert screen_request("POST", target, media + "; charset=utf-8", None, b"ASK {}") is None
    assert screen_request("POST", target, " Application/SPARQL-Query ;x=y", "", b"ASK {}") is None
    assert screen_request("POST", target, media, None, SERVICE.encode()) == SERVICE_REFUSED
    assert screen_request("POST", target, media, None, UPDATE.encode()) == UPDATE_REFUSED
    assert screen_request("POST", target, media, None, b"ASK { ?s rdf:type ?o }") == UNDECLARED_RDF
    deep = ("ASK {" + "{" * 20 + "}" * 20 + "}").encode()
    assert screen_request("POST", target, media, None, deep) is None
    assert screen_request("POST", target, media, None, deep, max_depth=5).status == 400
    assert screen_request("POST", target, media, None, b"ASK {\xff}") == Refusal(
        400, "refused: the query is not valid UTF-8\n"
    )
    for encoding in (None, "identity", " Identity ", "IDENTITY"):
        assert screen_request("POST", target, media, encoding, b"ASK {}") is None, encoding
    for encoding in ("gzip", "identity, gzip", "x"):
        assert screen_request("POST", target, media, encoding, b"ASK {}") == Refusal(
            415, "refused: send the query uncompressed (no Content-Encoding)\n"
        )
    form = guard.FORM_MEDIA
    assert screen_request("POST", target, form, None, b"query=ASK%7B%7D") is None
    assert screen_request("POST", target, form.upper() + "; charset=x", None, b"query=ASK%7B%7D") is None
    assert screen_request("POST", target, form, None, b"a=1&query=" + q(SERVICE).encode()) == SERVICE_REFUSED
    assert screen_request("POST", target, form, None, b"x&query=" + q(SERVICE).encode()) == SERVICE_REFUSED
    assert screen_request("POST", target, form, None, b"update=" + q(UPDATE).encode()) == READ_ONLY
    assert screen_request("POST", target, form, None, b"update=") == READ_ONLY
    assert screen_request("POST", target, form, None, b"query=%ff") == NOT_UTF8_FORM
    assert screen_request("POST", target, form, None, b"query=\xe9") == NOT_UTF8_FORM
    for other in (None, "", "text/plain", "multipart/form-data", "application/sparql-update"):
        assert screen_request("POST", target, other, None, b"ASK {}") == POST_MEDIA, other
    # the URL's parameters are screened too
    url = target + ("&" if pad else "?") + "query=" + q(SERVICE)
    assert screen_request("POST", url, form, None, b"x=1") == SERVICE_REFUSED
    assert screen_request("POST", url, media, None, b"ASK {}") == ONE_QUERY  # the URL's and the body's
    assert screen_request("POST", target, form, None, b"query=ASK%7B%7D&query=ASK%7B%7D") == ONE_QUERY
    assert screen_request("POST", target, form, None, b"query=ASK%7B%7D&named-graph-uri=urn:x").status == 400
    assert screen_request("POST", target, form, None, b"query=ASK%7B%7D" + b"&a" * 100) == Refusal(
        400, "refused: the form holds more than 100 parameters\n"
    )
    url = target + ("&" if pad else "?") + "update=x"
    assert screen_request("POST", url, media, None, b"ASK {}") == READ_ONLY


@pytest.mark.parametrize("pad", ["", "&pad=" + "a" * guard.SCREENED_TARGETS_CHARS])
def test_what_is_not_a_read_is_refused(pad):
    for method, path in [("PUT", "/store"), ("POST", "/update"), ("POST", "/"), ("DELETE", "/query"), ("get", "/")]:
        target = path + "?default" + pad
        assert screen_request(method, target, guard.QUERY_MEDIA, None, b"ASK {}") == Refusal(
            403,
            f"refused: {method} {path}: this server is read-only; it answers GET and HEAD requests "
            "and queries POSTed to /query\n",
        )


def test_which_requests_ask_for_the_service_description():
    for pad in ("", "&pad=" + "a" * guard.SCREENED_TARGETS_CHARS):
        for path in guard.QUERY_PATHS:
            for method in ("GET", "HEAD"):
                assert asks_for_description(method, path + "?x=1" + pad) is True
                assert asks_for_description(method, path + "?query=ASK%7B%7D" + pad) is False
                assert asks_for_description(method, path + "?%71uery=ASK%7B%7D" + pad) is False
                assert asks_for_description(method, path + "?query=" + pad) is False
                assert asks_for_description(method, path + "?x&y=%ff" + pad) is False  # unreadable: no description
                assert asks_for_description(method, path + "?x" + pad) is True
            assert asks_for_description("POST", path + "?x=1" + pad) is False
            assert asks_for_description("get", path + "?x=1" + pad) is False
        assert asks_for_description("GET", "/other?x=1" + pad) is False
        assert asks_for_description("GET", "/" + pad.replace("&", "?")) is False
    assert asks_for_description("GET", "/query") is True


def test_answers_end_whole_only_with_their_closing_mark():
    assert ends_whole("application/sparql-results+json", b'{"boolean":true}\n  ')
    assert ends_whole(" Application/RDF+XML ; charset=utf-8", b"</rdf:RDF>")
    assert not ends_whole("application/rdf+xml; charset=utf-8", b"<p>x</p>error")
    assert not ends_whole("application/rdf+xml", b"</rdf:RDF> error")
    assert ends_whole("text/csv; x=application/rdf+xml", b"a,b")
    assert not ends_whole("application/sparql-results+xml;a=b;c=d", b"</results>")
    assert ends_whole("application/sparql-results+xml;a=b;c=d", b"</sparql>")
    assert ends_whole("", b"")
    assert not ends_whole("application/ld+json", b"")


def test_pieces_and_hosts():
    assert guard._piece(b"", True) == b""
    assert guard._piece(b"", False) == b""
    assert guard._piece(b"abc", False) == b"abc"
    assert guard._piece(b"x" * 26, True) == b"1a\r\n" + b"x" * 26 + b"\r\n"
    assert guard._host_of(("10.0.0.1", 5)) == "10.0.0.1"
    assert guard._host_of("/run/socket") == "/run/socket"


def test_unread_bytes_counts_what_waits_in_the_socket():
    left, right = socket.socketpair()
    with left, right:
        assert guard._unread_bytes(right) == 0
        left.sendall(b"x" * 300)
        for _ in range(100):  # bounded: the bytes are in at once on a socketpair
            if guard._unread_bytes(right) == 300:
                break
            threading.Event().wait(0.01)
        assert guard._unread_bytes(right) == 300
    assert guard._unread_bytes(right) == 0  # closed: unknown, so 0


# ------------------------------------------------------------------------------------------ turns, buffers


def _outcome(turns: Turns, seconds: float) -> tuple[bool, bool]:
    """(what ``turns.acquire(seconds)`` returns, whether it queued): a turn held by the test is given
    back as soon as the newcomer is queued, so a queued newcomer gets it."""
    result: list[bool] = []
    before = len(turns._queue)
    thread = threading.Thread(target=lambda: result.append(turns.acquire(seconds)), daemon=True)
    thread.start()
    queued = False
    for _ in range(2000):  # bounded: 10 s at most
        if result:
            break
        if len(turns._queue) > before:
            queued = True
            turns.release()
            break
        threading.Event().wait(0.005)
    thread.join(10)
    assert result, "acquire neither returned nor queued"
    return result[0], queued


def _paced(running: int, per_turn: float) -> Turns:
    """Turns with every slot held and ``per_turn`` seconds the measured time per turn."""
    turns = Turns(running, 10)
    for _ in range(running):
        assert turns.acquire(0.0)
    turns.release(per_turn * 8)  # a fresh average moves an eighth of the way: 0 -> per_turn
    assert turns.acquire(0.0)
    assert turns._seconds_per_turn == per_turn
    return turns


def test_free_turns_are_counted_exactly():
    turns = Turns(2, 0)
    assert turns.acquire(0.0) and turns.acquire(0.0)
    assert turns.acquire(5.0) is False  # none free, none may wait: at once
    turns.release()
    turns.release()
    assert turns.acquire(0.0) and turns.acquire(0.0)
    assert turns.acquire(0.0) is False
    one = Turns(1, 0)
    assert one.acquire(0.0)
    assert one.acquire(0.0) is False


def test_a_newcomer_waits_only_within_the_queue_and_the_pace():
    fresh = Turns(1, 10)
    assert fresh.acquire(0.0)
    assert _outcome(fresh, 0.9) == (True, True)  # nothing known of the pace: it waits, and gets the turn
    full = Turns(1, 0)
    assert full.acquire(0.0)
    assert _outcome(full, 5.0) == (False, False)  # no place to wait
    one_place = Turns(1, 1)
    assert one_place.acquire(0.0)
    waiting = threading.Thread(target=one_place.acquire, args=(10.0,), daemon=True)
    waiting.start()
    for _ in range(2000):
        if len(one_place._queue) == 1:
            break
        threading.Event().wait(0.005)
    assert len(one_place._queue) == 1
    assert one_place.acquire(10.0) is False  # the one place is taken
    one_place.release()
    waiting.join(10)
    assert _outcome(_paced(1, 1.0), 0.9) == (False, False)  # a second ahead, 0.9 s allowed
    assert _outcome(_paced(1, 1.0), 1.0) == (True, True)  # exactly in time
    assert _outcome(_paced(1, 1.0), 1.5) == (True, True)
    assert _outcome(_paced(2, 1.0), 0.6) == (True, True)  # two slots: half a second a turn
    assert _outcome(_paced(2, 1.0), 0.4) == (False, False)
    assert _outcome(_paced(1, 2.0), 1.0) == (False, False)


def test_a_wait_that_runs_out_is_no_turn_and_leaves_no_place_taken():
    turns = Turns(1, 10)
    assert turns.acquire(0.0)
    done: list[bool] = []
    thread = threading.Thread(target=lambda: done.append(turns.acquire(0.0)), daemon=True)
    thread.start()
    thread.join(10)
    assert done == [False]
    assert len(turns._queue) == 0
    turns.release()
    assert turns.acquire(0.0)


def test_a_turn_handed_over_just_as_the_wait_ran_out_is_the_waiters():
    class Racing(collections.deque):
        def remove(self, value):  # the turn was handed to this waiter just as its wait ran out
            super().remove(value)
            raise ValueError

    turns = Turns(1, 10)
    assert turns.acquire(0.0)
    turns._queue = Racing()
    assert turns.acquire(0.0) is True


def test_the_pace_is_a_moving_average_of_how_long_turns_are_held():
    turns = Turns(1, 10)
    assert turns._seconds_per_turn == 0.0
    turns.acquire(0.0)
    turns.release(8.0)
    assert turns._seconds_per_turn == 1.0
    turns.acquire(0.0)
    turns.release(9.0)
    assert turns._seconds_per_turn == 2.0
    turns.acquire(0.0)
    turns.release()
    assert turns._seconds_per_turn == 2.0
    assert turns.acquire(0.0)


def test_a_turn_is_given_back_once_with_how_long_it_was_held():
    turns = Turns(1, 0)
    assert turns.acquire(0.0)
    turn = guard._Turn(turns)
    turn._began -= 80.0
    turn.release()
    assert 10.0 <= turns._seconds_per_turn < 20.0
    turn.release()  # a second time: nothing
    assert turns.acquire(0.0)
    assert turns.acquire(0.0) is False


def test_buffers_reserve_up_to_their_limit():
    buffers = Buffers(10)
    assert buffers.used == 0 and buffers.limit == 10
    assert buffers.reserve(11) is False
    assert buffers.used == 0
    assert buffers.reserve(4) is True
    assert buffers.reserve(6) is True
    assert buffers.used == 10
    assert buffers.reserve(1) is False
    buffers.free(4)
    assert buffers.used == 6
    assert buffers.reserve(4) is True
    buffers.free(10)
    assert buffers.used == 0


# ------------------------------------------------------------------------------------------ the relay


def _pair(buffer: int = 4096) -> tuple[socket.socket, socket.socket]:
    sender, reader = socket.socketpair()
    sender.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, buffer)
    reader.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, buffer)
    return sender, reader


def _read_all(connection: socket.socket, into: bytearray) -> threading.Thread:
    def read() -> None:
        connection.settimeout(10)
        try:
            while data := connection.recv(65536):
                into.extend(data)
        except OSError:
            pass

    thread = threading.Thread(target=read, daemon=True)
    thread.start()
    return thread


def test_the_relay_sends_what_the_socket_takes_and_keeps_the_rest_in_order():
    sender, reader = _pair()
    with sender, reader:
        buffers = Buffers(1 << 20)
        relay = guard._Relay(sender, buffers, seconds=10.0)
        assert sender.gettimeout() == 0.0 and relay.complete is False and relay.gone is False
        relay.push(b"")
        assert buffers.used == 0
        pieces = [bytes([65 + n]) * 50_000 for n in range(4)]
        for piece in pieces:
            relay.push(piece)  # nobody reads yet: most of it waits
        assert 0 < buffers.used < sum(map(len, pieces))
        assert buffers.used == len(relay._waiting) == relay._reserved
        received = bytearray()
        thread = _read_all(reader, received)
        relay.finish(b"end")
        assert relay.complete is True and relay.gone is False
        assert sender.gettimeout() == 10.0
        relay.close()
        relay.close()  # twice, as the handler may: nothing more is given back
        assert buffers.used == 0 and relay._waiting == bytearray()
        assert sender.gettimeout() == 10.0
        sender.shutdown(socket.SHUT_WR)
        thread.join(10)
    assert bytes(received) == b"".join(pieces) + b"end"


def test_the_relay_sends_at_once_without_buffer_space_when_the_socket_takes_it():
    sender, reader = socket.socketpair()
    with sender, reader:
        relay = guard._Relay(sender, Buffers(0))
        relay.push(b"abc")
        reader.settimeout(10)
        assert reader.recv(16) == b"abc"
        relay.finish(b"")
        assert relay.complete is True


def test_past_the_buffers_the_relay_says_too_slow():
    sender, reader = _pair()
    with sender, reader:
        buffers = Buffers(1000)
        relay = guard._Relay(sender, buffers)
        with pytest.raises(guard._TooSlow):
            for _ in range(100):  # bounded: the socket's buffer fills long before
                relay.push(b"x" * 600)
        assert buffers.used <= 1000
        relay.close()
        assert buffers.used == 0


def test_a_client_gone_makes_the_relay_gone_and_it_reserves_nothing_more():
    sender, reader = _pair()
    with sender:
        buffers = Buffers(1 << 20)
        relay = guard._Relay(sender, buffers)
        for _ in range(5):
            relay.push(b"x" * 50_000)
        waiting = buffers.used
        assert waiting > 0
        reader.close()
        relay.push(b"y" * 10)
        assert relay.gone is True
        gone_with = buffers.used
        assert gone_with in (waiting, waiting + 10)
        relay.push(b"z" * 10_000)
        assert buffers.used == gone_with
        relay.finish(b"end")
        assert relay.complete is False and relay.gone is True
        relay.close()
        assert buffers.used == 0
    sender, reader = socket.socketpair()
    with sender:
        relay = guard._Relay(sender, Buffers(1 << 20))
        reader.close()
        relay.push(b"x")
        assert relay.gone is True


def test_a_client_that_does_not_take_the_rest_in_time_is_gone():
    sender, reader = _pair()
    with sender, reader:
        buffers = Buffers(1 << 20)
        relay = guard._Relay(sender, buffers, seconds=0.3)
        for _ in range(5):
            relay.push(b"x" * 50_000)
        finished = threading.Thread(target=relay.finish, args=(b"end",), daemon=True)
        finished.start()
        finished.join(10)
        assert not finished.is_alive()
        assert relay.complete is False and relay.gone is True
        relay.close()
        assert buffers.used == 0


# ------------------------------------------------------------------------------------------ the watchdog


def test_the_watchdog_shuts_a_late_request_and_only_that_one():
    watchdog = guard.Watchdog()
    try:
        assert watchdog._thread.name == "sotakg-guard-watchdog" and watchdog._thread.daemon is True
        late, late_peer = socket.socketpair()
        kept, kept_peer = socket.socketpair()
        with late, late_peer, kept, kept_peer:
            watchdog.arm(kept, 60.0)
            assert watchdog._deadlines[kept] > guard.time.monotonic() + 30
            watchdog.arm(late, 0.0)
            late_peer.settimeout(10)
            assert late_peer.recv(1) == b""  # shut down by the watchdog
            assert late not in watchdog._deadlines
            watchdog.disarm(kept)
            watchdog.disarm(kept)  # not armed: nothing
            assert kept not in watchdog._deadlines
            kept.sendall(b"k")
            kept_peer.settimeout(10)
            assert kept_peer.recv(1) == b"k"
    finally:
        watchdog.stop()
    assert not watchdog._thread.is_alive()


def test_the_watchdog_shuts_a_request_at_its_deadline_not_after(monkeypatch):
    monkeypatch.setattr(guard.time, "monotonic", lambda: 1000.0)  # a clock that stands still
    watchdog = guard.Watchdog()
    try:
        connection, peer = socket.socketpair()
        with connection, peer:
            watchdog.arm(connection, 0.0)  # due now, and now is ever the same instant
            peer.settimeout(10)
            assert peer.recv(1) == b""
    finally:
        watchdog.stop()


# ------------------------------------------------------------------------------------------ the proxy

#: The Date field the guard writes (RFC 9110 IMF-fixdate).
DATE = re.compile(rb"\r\nDate: [A-Z][a-z]{2}, [0-9]{2} [A-Z][a-z]{2} [0-9]{4} [0-9]{2}:[0-9]{2}:[0-9]{2} GMT\r\n")


def undated(answer: bytes) -> bytes:
    """``answer`` with its one Date field's value taken out (it is checked for its form)."""
    head, _, _ = answer.partition(b"\r\n\r\n")
    assert len(DATE.findall(head + b"\r\n")) == 1, head
    return DATE.sub(b"\r\nDate: -\r\n", answer, count=1)


def plain(status: bytes, message: bytes, *extra: bytes, head_only: bool = False) -> bytes:
    """An answer the guard writes itself (``_plain``), with its Date taken out."""
    fields = [
        b"Server: " + SERVER,
        b"Date: -",
        b"Content-Type: text/plain; charset=utf-8",
        b"Content-Length: %d" % len(message),
        *extra,
        b"Connection: close",
    ]
    return (
        b"HTTP/1.1 "
        + status
        + b"\r\n"
        + b"".join(f + b"\r\n" for f in fields)
        + b"\r\n"
        + (b"" if head_only else message)
    )


SERVER = f"{guard.GuardHandler.server_version} Python/{sys.version.split()[0]}".encode()


class Engine:
    """A stand-in engine: records each request (head and body) and answers it with ``reply(head, body)``
    (bytes to send; None: close the connection). Connections are kept alive as the answers allow."""

    def __init__(self, reply: Callable[[bytes, bytes], bytes | None] | None = None):
        self.requests: list[tuple[bytes, bytes]] = []
        self.reply = reply or (
            lambda head, body: b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\r\nok"
        )

    def __call__(self, connection: socket.socket) -> None:
        connection.settimeout(10)
        for head, body in requests_on(connection):
            self.requests.append((head, body))
            answer = self.reply(head, body)
            if answer is None:
                return
            connection.sendall(answer)


@contextmanager
def guarded(engine: Engine | Callable[[socket.socket], None] | None = None, **settings: Any) -> Iterator[Any]:
    """The guard in this process before a stand-in engine (``Engine()`` if None); log lines go to
    ``guard.lines``."""
    lines: list[str] = []
    with stand_in_server(engine or Engine()) as (port, _):
        options = {"log": lines.append, **settings}
        with running_guard("127.0.0.1", 0, GuardSettings("127.0.0.1", port, **options)) as server:
            server.lines = lines  # type: ignore[attr-defined]
            yield server


def error_page(status: bytes, message: str, explain: str) -> bytes:
    """An answer the base class writes (``send_error``), with its Date taken out."""
    code = int(status.split()[0])
    body = (
        http.server.BaseHTTPRequestHandler.error_message_format
        % {"code": code, "message": html.escape(message, quote=False), "explain": html.escape(explain, quote=False)}
    ).encode()
    return (
        b"HTTP/1.1 " + status + b"\r\nServer: " + SERVER + b"\r\nDate: -\r\nConnection: close\r\n"
        b"Content-Type: text/html;charset=utf-8\r\nContent-Length: %d\r\n\r\n" % len(body)
    ) + body


def ask(server: Any, request: bytes, seconds: float = 10.0) -> bytes:
    """The whole answer to ``request`` on a fresh connection, its Date taken out."""
    return undated(raw_request(server.port, request, seconds))


def test_refusals_are_plain_text_with_their_status_and_reason():
    with guarded(max_request_bytes=100) as server:
        refused = SERVICE_REFUSED.message.encode()
        get = b"/query?query=" + q("ASK{SERVICE<http://x/>{}}").encode()
        text = screen_request("GET", get.decode(), None, None, b"")
        assert text is not None and text.status == 400
        assert ask(server, b"GET " + get + b" HTTP/1.1\r\nHost: x\r\n\r\n") == plain(
            b"400 Bad Request", text.message.encode()
        )
        head = b"HEAD " + get + b" HTTP/1.1\r\nHost: x\r\n\r\n"
        assert ask(server, head) == plain(b"400 Bad Request", text.message.encode(), head_only=True)
        update = b"/query?query=" + q("CLEAR ALL").encode()
        assert ask(server, b"GET " + update + b" HTTP/1.1\r\n\r\n").startswith(b"HTTP/1.1 403 Forbidden\r\n")
        # the URL's length against --max-request-bytes
        long = b"/query?query=ASK%7B%7D&x=" + b"a" * (100 - 25)
        assert len(long) == 100
        answer = ask(server, b"GET " + long + b" HTTP/1.1\r\nConnection: close\r\n\r\n")
        assert answer.startswith(b"HTTP/1.1 200 OK\r\n")
        assert ask(server, b"GET " + long + b"a HTTP/1.1\r\n\r\n") == plain(
            b"414 Request-URI Too Long",
            b"refused: the request URL is 101 bytes, over the server's limit of 100 (--max-request-bytes of sotakg "
            b"serve)\n",
        )
        body = SERVICE.encode()
        post = b"POST /query HTTP/1.1\r\nContent-Type: application/sparql-query\r\nContent-Length: %d\r\n\r\n"
        assert ask(server, post % len(body) + body) == plain(b"400 Bad Request", refused)
        put = b"PUT /store HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc"
        assert ask(server, put) == plain(
            b"403 Forbidden",
            b"refused: PUT /store: this server is read-only; it answers GET and HEAD requests and queries POSTed "
            b"to /query\n",
        )
        twice = b"POST /query HTTP/1.1\r\nContent-Type: a\r\ncontent-TYPE: b\r\nContent-Length: 0\r\n\r\n"
        assert ask(server, twice) == plain(
            b"400 Bad Request", b"refused: the request has more than one Content-Type header\n"
        )
        assert ask(server, b"GET /\xe9 HTTP/1.1\r\n\r\n") == plain(
            b"400 Bad Request",
            b"refused: percent-encode spaces, control characters and non-ASCII in the request target\n",
        )
        assert ask(server, b"GET /[ HTTP/1.1\r\nConnection: close\r\n\r\n").startswith(b"HTTP/1.1 200 OK\r\n")
        assert server.lines == []


def test_request_bodies_are_framed_by_a_plain_content_length():
    post = b"POST /query HTTP/1.1\r\nContent-Type: application/sparql-query\r\n"
    with guarded(max_request_bytes=10) as server:
        chunked = plain(b"411 Length Required", b"refused: send the request with a Content-Length, not chunked\n")
        for field in (b"Transfer-Encoding: chunked", b"transfer-encoding: gzip", b"Transfer-Encoding: "):
            assert ask(server, post + field + b"\r\nContent-Length: 5\r\n\r\nASK{}") == chunked, field
        not_a_count = plain(b"400 Bad Request", b"refused: the Content-Length is not a byte count\n")
        for value in (b"5X", b"X5", b"\x0c5", b"5\x0b", b"0000000000000000005", b"+5"):
            assert ask(server, post + b"Content-Length: " + value + b"\r\n\r\nASK{}") == not_a_count, value
        for value in (b"5", b"000000000000000005", b"\t5"):
            answer = ask(server, post + b"Content-Length: " + value + b"\r\nConnection: close\r\n\r\nASK{}")
            assert answer.startswith(b"HTTP/1.1 200 OK\r\n"), (value, answer)
        # exactly the limit is in; a byte more is not
        answer = ask(server, post + b"Content-Length: 10\r\nConnection: close\r\n\r\nASK{     }")
        assert answer.startswith(b"HTTP/1.1 200 OK\r\n")
        assert ask(server, post + b"Content-Length: 11\r\n\r\nASK{      }") == plain(
            b"413 Request Entity Too Large",
            b"refused: the request body is 11 bytes, over the server's limit of 10 (--max-request-bytes of sotakg "
            b"serve)\n",
        )
        assert server.lines == []
        # a body without a Content-Length is none: the request is answered without waiting for one
        answer = ask(
            server, b"POST /query HTTP/1.1\r\nContent-Type: application/sparql-query\r\nConnection: close\r\n\r\n"
        )
        assert answer.startswith(b"HTTP/1.1 200 OK\r\n")


def test_a_body_over_the_limit_is_read_and_dropped_before_the_connection_closes():
    size = 8 << 20  # far more than the sockets' buffers hold: the client finishes only if the guard reads it
    with guarded(max_request_bytes=10) as server:
        with socket.create_connection(("127.0.0.1", server.port), timeout=15) as client:
            client.sendall(
                b"POST /query HTTP/1.1\r\nContent-Type: application/sparql-query\r\nContent-Length: %d\r\n\r\n" % size
            )
            sent: list[BaseException | None] = []

            def send() -> None:
                try:
                    client.sendall(b"x" * size)
                    sent.append(None)
                except OSError as error:
                    sent.append(error)

            sender = threading.Thread(target=send, daemon=True)
            sender.start()
            sender.join(15)
            assert sent == [None]
            answer = b""
            while data := client.recv(65536):  # then a clean close (no reset: nothing was left unread)
                answer += data
        assert undated(answer) == plain(
            b"413 Request Entity Too Large",
            b"refused: the request body is 8388608 bytes, over the server's limit of 10 (--max-request-bytes of "
            b"sotakg serve)\n",
        )
        assert server.lines == []


def test_a_refused_body_that_stops_coming_is_not_waited_for():
    with guarded(max_request_bytes=10, client_seconds=60.0) as server:
        with socket.create_connection(("127.0.0.1", server.port), timeout=20) as client:
            client.sendall(b"POST /query HTTP/1.1\r\nContent-Type: text/plain\r\nContent-Length: 1000\r\n\r\nabc")
            answer = b""
            while data := client.recv(65536):  # the guard gives up on the rest within a second or so
                answer += data
        assert undated(answer).startswith(b"HTTP/1.1 413 Request Entity Too Large\r\n")
        assert server.lines == []


def test_request_lines_and_fields_the_guard_will_not_read():
    with guarded() as server:
        assert ask(server, b"GET /x HTTP/1.x\r\n\r\n") == error_page(
            b"400 Bad request line", "Bad request line", "send METHOD TARGET HTTP/1.1 and CRLF"
        )
        assert ask(server, b"GET /x HTTP/2.0\r\n\r\n") == error_page(
            b"505 HTTP/2.0 is not served", "HTTP/2.0 is not served", "send HTTP/1.1"
        )
        assert ask(server, b"GET /x HTTP/0.9\r\n\r\n") == error_page(
            b"505 HTTP/0.9 is not served", "HTTP/0.9 is not served", "send HTTP/1.1"
        )
        for target in (b"ftp://x/", b"http://[::1/query", b"mailto:x"):
            assert ask(server, b"GET " + target + b" HTTP/1.1\r\n\r\n") == error_page(
                b"400 Bad request target", "Bad request target", "send the target as a path, or as http://host/path"
            ), target
        assert ask(server, b"GET /x HTTP/1.1\r\nHost : x\r\n\r\n") == error_page(
            b"400 Bad header", "Bad header", "header line 1 is not 'name: value'"
        )
        fields = b"X-A: " + b"a" * 9000 + b"\r\n"
        assert ask(server, b"GET /x HTTP/1.1\r\nHost: x\r\n" + fields + b"\r\n") == error_page(
            b"431 Line too long",
            "Line too long",
            "got more than 65536 bytes when reading header fields over 8192 bytes",
        )
        assert raw_request(server.port, b"GET /x\r\n\r\n", 5) == b""  # HTTP/0.9: no status line to answer with
        assert server.lines == []


# ------------------------------------------------------------------------------------------ the description

SD = "http://www.w3.org/ns/sparql-service-description#"
DESCRIPTION = (f"@prefix sd: <{SD}> . <> a sd:Service ; sd:feature sd:BasicFederatedQuery , sd:EmptyGraphs .").encode()
WITHOUT_FEDERATION = (f"<http://g:1/query> a <{SD}Service> ;\n\t<{SD}feature> <{SD}EmptyGraphs> .\n").encode()


def test_the_description_loses_federation_and_its_relative_iris():
    without = guard.without_federation
    assert without(DESCRIPTION, "text/turtle", "http://g:1/query") == WITHOUT_FEDERATION
    assert without(DESCRIPTION, "Text/Turtle; charset=utf-8;x=y", "http://g:1/query") == WITHOUT_FEDERATION
    only = f"<http://s> <http://p> <{guard.SD_FEDERATED}> .\n".encode()
    assert without(only, "application/n-triples", "http://g/") == b""
    assert without(b"abc", "", "http://g/") == b"abc"  # no format, nothing to take out: as it is
    assert without(b"abc", "text/csv", "http://g/") == b"abc"
    with pytest.raises(guard.DescriptionUnreadable) as refused:
        without(only, "Text/CSV; charset=utf-8;x=y", "http://g/")
    assert str(refused.value) == "a service description of type 'text/csv'"
    with pytest.raises(guard.DescriptionUnreadable) as refused:
        without(only, "", "http://g/")
    assert str(refused.value) == "a service description of type 'none'"
    with pytest.raises(guard.DescriptionUnreadable) as refused:
        without(b"<> <x:p> .", "text/turtle", "http://g/")
    assert str(refused.value) == "Parser error at line 1 column 10: . is not a valid RDF object (line 1)"


def test_what_waits_goes_out_as_the_client_takes_it():
    sender, reader = _pair()
    with sender, reader:
        buffers = Buffers(1 << 20)
        relay = guard._Relay(sender, buffers)
        first = b"a" * 200_000
        relay.push(first)
        waiting = buffers.used
        assert 0 < waiting == len(relay._waiting) == relay._reserved
        received = bytearray()
        reader.settimeout(10)
        while len(received) < len(first) - waiting:  # the client takes what is in flight
            received += reader.recv(65536)
        relay.push(b"b" * 10)  # and what waits goes out as far as the socket takes it
        assert buffers.used == len(relay._waiting) == relay._reserved
        assert buffers.used < waiting + 10
        thread = _read_all(reader, received)
        relay.finish(b"")
        relay.close()
        assert buffers.used == 0
        sender.shutdown(socket.SHUT_WR)
        thread.join(10)
    assert bytes(received) == first + b"b" * 10


def ok(body: bytes, *fields: bytes, status: bytes = b"200 OK") -> bytes:
    return (
        b"HTTP/1.1 "
        + status
        + b"\r\n"
        + b"".join(f + b"\r\n" for f in fields)
        + b"Content-Length: %d\r\n\r\n" % len(body)
        + body
    )


def chunked(body: bytes, *fields: bytes, piece: int = 50_000) -> bytes:
    chunks = b"".join(
        b"%x\r\n%s\r\n" % (len(body[n : n + piece]), body[n : n + piece]) for n in range(0, len(body), piece)
    )
    return (
        b"HTTP/1.1 200 OK\r\n"
        + b"".join(f + b"\r\n" for f in fields)
        + b"Transfer-Encoding: chunked\r\n\r\n"
        + (chunks + b"0\r\n\r\n")
    )


def unchunk(body: bytes) -> tuple[bytes, bool]:
    """The content of a chunked body, and whether it ended with its last chunk."""
    content = b""
    while body:
        size, _, rest = body.partition(b"\r\n")
        length = int(size, 16)
        if length == 0:
            return content, rest == b"\r\n"
        content += rest[:length]
        body = rest[length + 2 :]
    return content, False


def test_the_engine_gets_the_request_as_screened_and_the_guard_named():
    engine = Engine()
    with guarded(engine) as server:
        own = f"127.0.0.1:{server.port}".encode()
        request = (
            b"GET /query?query=ASK%7B%7D HTTP/1.1\r\nHost: x.example:8080\r\nAccept: text/csv\r\nConnection: close\r\n"
            b"Keep-Alive: 5\r\nTE: trailers\r\nX-Forwarded-For: 1.2.3.4\r\nAccept-Encoding: gzip\r\nX-A: 1\r\n\r\n"
        )
        assert ask(server, request) == b"".join(
            [
                b"HTTP/1.1 200 OK\r\nServer: " + SERVER + b"\r\nDate: -\r\nContent-Type: text/plain\r\n",
                b"Content-Length: 2\r\nConnection: close\r\n\r\nok",
            ]
        )
        ask(server, b"HEAD /x HTTP/1.1\r\nhost: bad host\r\nConnection: close\r\n\r\n")
        ask(server, b"GET /x HTTP/1.1\r\nConnection: close\r\n\r\n")
        body = b"ASK {}"
        post = (
            b"POST /sparql HTTP/1.1\r\ncontent-encoding: identity\r\nX-B: 2\r\n"
            b"CONTENT-TYPE: application/sparql-query\r\nContent-Length: 6\r\nExpect: 100-Continue\r\n"
            b"Connection: close\r\n\r\n" + body
        )
        answer = raw_request(server.port, post)
        assert answer.startswith(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\n"), answer
        answer = raw_request(server.port, post.replace(b"HTTP/1.1", b"HTTP/1.0"))  # no interim answer for 1.0
        assert answer.startswith(b"HTTP/1.1 200 OK\r\n"), answer
        ask(server, b"GET http://evil.example:666/a/?b HTTP/1.1\r\nConnection: close\r\n\r\n")
        ask(server, b"GET http://evil.example HTTP/1.1\r\nConnection: close\r\n\r\n")
        ask(server, b"GET //x/ HTTP/1.1\r\nConnection: close\r\n\r\n")
        ask(server, b"GET HTTP://evil.example//c/ HTTP/1.1\r\nConnection: close\r\n\r\n")
        assert server.lines == []
    assert engine.requests == [
        (b"GET /query?query=ASK%7B%7D HTTP/1.1\r\nAccept: text/csv\r\nX-A: 1\r\nHost: x.example:8080", b""),
        (b"GET /x HTTP/1.1\r\nHost: " + own, b""),
        (b"GET /x HTTP/1.1\r\nHost: " + own, b""),
        (
            b"POST /sparql HTTP/1.1\r\nX-B: 2\r\nContent-Type: application/sparql-query\r\n"
            b"Content-Encoding: identity\r\nHost: " + own + b"\r\nContent-Length: 6",
            body,
        ),
        (
            b"POST /sparql HTTP/1.1\r\nX-B: 2\r\nContent-Type: application/sparql-query\r\n"
            b"Content-Encoding: identity\r\nHost: " + own + b"\r\nContent-Length: 6",
            body,
        ),
        (b"GET /a/?b HTTP/1.1\r\nHost: " + own, b""),
        (b"GET / HTTP/1.1\r\nHost: " + own, b""),
        (b"GET /x/ HTTP/1.1\r\nHost: " + own, b""),
        (b"GET /c/ HTTP/1.1\r\nHost: " + own, b""),
    ]


def test_the_answer_is_relayed_with_the_guards_server_and_date():
    reply = ok(
        b"abc", b"Server: oxigraph", b"Date: then", b"Content-Type: text/csv", b"Connection: keep-alive", b"X-E: 1"
    )
    engine = Engine(lambda head, body: reply)
    with guarded(engine) as server:
        expected = (
            b"HTTP/1.1 200 OK\r\nServer: " + SERVER + b"\r\nDate: -\r\nContent-Type: text/csv\r\nX-E: 1\r\n"
            b"Content-Length: 3\r\n"
        )
        assert (
            ask(server, b"GET /x HTTP/1.1\r\nConnection: close\r\n\r\n") == expected + b"Connection: close\r\n\r\nabc"
        )
        assert ask(server, b"HEAD /x HTTP/1.1\r\nConnection: close\r\n\r\n") == expected + b"Connection: close\r\n\r\n"
        assert ask(server, b"GET /x HTTP/1.0\r\n\r\n") == expected + b"Connection: close\r\n\r\nabc"
        with socket.create_connection(("127.0.0.1", server.port), timeout=10) as client:
            for version in (b"HTTP/1.1", b"HTTP/1.0"):  # kept alive: two answers on one connection
                keep = b"Connection: Keep-Alive\r\n" if version == b"HTTP/1.0" else b""
                for _ in range(2):
                    client.sendall(b"GET /x " + version + b"\r\n" + keep + b"\r\n")
                    answer = b""
                    while not answer.endswith(b"abc"):
                        answer += client.recv(65536)
                    said = b"Connection: keep-alive\r\n" if version == b"HTTP/1.0" else b""
                    assert undated(answer) == expected + said + b"\r\nabc"
        assert server.lines == []
    assert [head.split(b"\r\n")[0] for head, _ in engine.requests] == [b"GET /x HTTP/1.1"] * 7


@pytest.mark.parametrize("status", [b"204 No Content", b"304 Not Modified"])
def test_an_answer_without_a_body_is_relayed_without_one(status):
    engine = Engine(lambda head, body: b"HTTP/1.1 " + status + b"\r\nContent-Length: 5\r\nX-E: 1\r\n\r\n")
    with guarded(engine) as server:
        with socket.create_connection(("127.0.0.1", server.port), timeout=10) as client:
            for _ in range(2):  # kept alive
                client.sendall(b"GET /x HTTP/1.1\r\n\r\n")
                answer = b""
                while not answer.endswith(b"\r\n\r\n"):
                    answer += client.recv(65536)
                assert (
                    undated(answer)
                    == b"HTTP/1.1 " + status + b"\r\nServer: " + SERVER + b"\r\nDate: -\r\nX-E: 1\r\n\r\n"
                )
        assert server.lines == []


def test_a_large_answer_streams_chunked_and_ends_with_its_last_chunk():
    content = bytes(range(256)) * 1000
    engine = Engine(lambda head, body: chunked(content, b"Content-Type: text/csv"))
    with guarded(engine) as server:
        answer = ask(server, b"GET /x HTTP/1.1\r\nConnection: close\r\n\r\n", 20)
        head, _, body = answer.partition(b"\r\n\r\n")
        assert head == b"HTTP/1.1 200 OK\r\nServer: " + SERVER + b"\r\nDate: -\r\nContent-Type: text/csv\r\n" + (
            b"Transfer-Encoding: chunked\r\nConnection: close"
        )
        assert unchunk(body) == (content, True)
        with socket.create_connection(("127.0.0.1", server.port), timeout=10) as client:
            for _ in range(2):  # kept alive
                client.sendall(b"GET /x HTTP/1.1\r\n\r\n")
                answer = b""
                while not answer.endswith(b"\r\n0\r\n\r\n"):
                    data = client.recv(65536)
                    assert data
                    answer += data
                assert unchunk(answer.partition(b"\r\n\r\n")[2]) == (content, True)
        # HTTP/1.0 has no chunks: the answer is read whole and sent with its length
        answer = ask(server, b"GET /x HTTP/1.0\r\n\r\n", 20)
        head, _, body = answer.partition(b"\r\n\r\n")
        assert head == b"HTTP/1.1 200 OK\r\nServer: " + SERVER + b"\r\nDate: -\r\nContent-Type: text/csv\r\n" + (
            b"Content-Length: 256000\r\nConnection: close"
        )
        assert body == content
        assert server.lines == []


def test_a_small_answer_of_unknown_length_is_sent_whole_with_its_length():
    engine = Engine(
        lambda head, body: b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n"
    )
    with guarded(engine) as server:
        assert ask(server, b"GET /x HTTP/1.1\r\nConnection: close\r\n\r\n") == (
            b"HTTP/1.1 200 OK\r\nServer: "
            + SERVER
            + b"\r\nDate: -\r\nContent-Length: 5\r\nConnection: close\r\n\r\nabcde"
        )
        assert ask(server, b"HEAD /x HTTP/1.1\r\nConnection: close\r\n\r\n") == (
            b"HTTP/1.1 200 OK\r\nServer: " + SERVER + b"\r\nDate: -\r\nConnection: close\r\n\r\n"
        )
        assert server.lines == []


def test_by_default_the_log_is_a_line_on_standard_error(capsys):
    guard._stderr("sotakg serve: a line")
    assert capsys.readouterr() == ("", "sotakg serve: a line\n")
