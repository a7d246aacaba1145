"""Engine connections the guard keeps while it waits for a client that does not read.

The guard's connections to the engine are one shared ``EnginePool`` per server; a connection is
settled (given back, or closed) as soon as the query's turn is given back, before anything is
written to a client that may not read. These tests were written against the ways out of
``GuardHandler._relay_answer`` that kept it (``_in_use``) while the handler blocked, for up to
``client_seconds``, writing to such a client — outside --max-concurrent, since the turn was given
back first: a HEAD whose answer has a Content-Length, and an answer cut at --max-result-bytes.
Every wait here is bounded.
"""

from __future__ import annotations

import socket
import threading
import time

from .test_guard import ASK_REQUEST, _CappedEngine, assert_answered_at_once, stalled_clients, timed_request


def _head_ask(client: int) -> bytes:
    return b"HEAD /query?query=ASK%%7B%%7D&client=%d HTTP/1.1\r\nHost: x\r\n\r\n" % client


def _get_big(client: int) -> bytes:
    return b"GET /query?query=ASK%%7B%%7D&big&client=%d HTTP/1.1\r\nHost: x\r\n\r\n" % client


def _stalled_client(port: int) -> socket.socket:
    """A connection to the guard that takes (almost) nothing of what it is sent."""
    client = socket.socket()
    client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    client.settimeout(20)
    client.connect(("127.0.0.1", port))
    return client


def _fill_up(client: socket.socket, number: int, engine: _CappedEngine) -> None:
    """Have ``client``, which sent ``_get_big(number)`` and HEADs after it, take just enough of the
    big answer for the guard to send it whole (its first HEAD then reaches the engine), and no more:
    its sockets are then nearly full, and the HEADs' answers fill the rest."""
    ends = time.monotonic() + 20
    client.settimeout(0.05)
    while engine.by_client[number] < 2 and time.monotonic() < ends:
        try:
            client.recv(8192)  # a little at a time: what it takes after the first HEAD went out stays small
        except TimeoutError:
            pass
        time.sleep(0.001)
    client.settimeout(20)


def _until_still(count, seconds: float, bound: float) -> None:
    """Wait until ``count()`` has not changed for ``seconds`` (``bound`` seconds at most)."""
    ends = time.monotonic() + bound
    last, since = count(), time.monotonic()
    while time.monotonic() < ends:
        time.sleep(0.1)
        now = count()
        if now != last:
            last, since = now, time.monotonic()
        elif time.monotonic() - since >= seconds:
            return


def test_a_head_answered_with_a_length_holds_no_engine_connection_while_its_client_does_not_read():
    """The bug: for a HEAD, the guard asks the engine with a GET and sends the client the head
    only. When the engine's answer has a Content-Length (an ``ASK``, the service description, any
    error: all of them from the Oxigraph server), ``_abandon`` leaves the body unread, so
    ``_engine_done`` does not give the connection back, and ``_relay_answer`` gives the turn back and
    then writes the head to the client (``wfile.write``) while ``_in_use`` still holds the connection.
    Only ``_forward``'s ``finally`` closes it. Take a client that has HEADs pipelined behind a large
    answer and stops reading once the guard has sent that answer whole. Its socket buffers fill up,
    and a HEAD's write then blocks for up to client_seconds, holding one engine connection per client
    connection. It holds no turn and no
    buffer space while it does. Here the stand-in engine takes 2 connections and 2 such clients
    hold both; the next client's ``ASK {}`` waits for a connection the engine never accepts until
    --timeout and gets a 504, and the real `sotakg serve` then restarts the engine for it. Against
    the real Oxigraph server one stalled connection per client was seen held this way, with no
    query running and the pool empty.

    The rule: an answer with nothing more for the engine to do holds no engine connection while
    the guard waits for its client. It is closed (or read to its end and given back) before the head
    is written, so the next client's ``ASK {}`` is answered at once."""
    from sotakg.server.guard import GuardSettings, running_guard

    cap = 2
    engine = _CappedEngine(cap, big_bytes=4 << 20)  # more than the stalled client's sockets hold
    stalled: list[socket.socket] = []
    senders: list[threading.Thread] = []
    lines: list[str] = []
    try:
        settings = GuardSettings("127.0.0.1", engine.port, upstream_seconds=2.0, client_seconds=30.0, log=lines.append)
        with running_guard("127.0.0.1", 0, settings) as guard:
            try:
                for number in range(cap):
                    client = _stalled_client(guard.port)
                    stalled.append(client)
                    pipelined = _get_big(number) + _head_ask(number) * 6000
                    sender = threading.Thread(target=_send_quietly, args=(client, pipelined), daemon=True)
                    sender.start()
                    senders.append(sender)
                    _fill_up(client, number, engine)
                # The guard answers HEADs until each stalled client's sockets are full, then blocks.
                _until_still(lambda: tuple(engine.by_client.values()), seconds=1.5, bound=30)
                assert engine.big_answers_sent == cap
                # Each client's big answer went whole and HEADs reached the engine after it, not all of them.
                assert all(2 <= engine.by_client[number] < 6001 for number in range(cap)), engine.by_client
                answer, took = timed_request(guard.port, ASK_REQUEST, 10)
            finally:
                for client in stalled:
                    client.close()
                for sender in senders:
                    sender.join(5)
    finally:
        engine.close()
    assert_answered_at_once(answer, took, lines)


def _send_quietly(client: socket.socket, data: bytes) -> None:
    try:
        client.sendall(data)
    except OSError:
        pass


def test_an_answer_cut_at_the_cap_holds_no_engine_connection_while_its_client_does_not_read():
    """The bug: an answer over --max-result-bytes is cut there. ``_relay_answer`` calls
    ``_abandon``, which reads the engine's answer to its end, gives the turn back, and then calls
    ``out.finish`` to send the client what waits for it. That call blocks for up to client_seconds
    for a client that does not read, while ``_in_use`` still holds the engine connection, idle, its
    answer read to its end. ``_forward``'s ``finally`` closes it only afterwards. This is the case
    ``test_clients_slow_to_take_finished_answers_cannot_use_up_the_engines_connections`` holds fixed
    for whole answers, still open for cut ones. What waits per client is counted in ``Buffers``
    (here about 1.4 MB each), so the number of connections held this way is bounded by the buffers
    for slow clients, but not by --max-concurrent. Here the stand-in engine takes 2 connections and
    2 clients that do not read their cut answers hold both; the next client's ``ASK {}`` gets a 504
    after --timeout.

    The rule: once ``_abandon`` has read the answer to its end, the engine connection goes back
    to the pool (or is closed) before the guard waits on the client, so the next client's ``ASK {}``
    is answered at once."""
    from sotakg.server.guard import GuardSettings, running_guard

    cap = 2
    with _CappedEngine(cap, big_bytes=8 << 20) as engine:
        lines: list[str] = []
        settings = GuardSettings(
            "127.0.0.1",
            engine.port,
            upstream_seconds=3.0,
            client_seconds=30.0,
            max_result_bytes=4 << 20,
            max_buffered_bytes=64 << 20,
            log=lines.append,
        )
        with running_guard("127.0.0.1", 0, settings) as guard, stalled_clients() as stalled:
            for _ in range(cap):
                client = _stalled_client(guard.port)
                client.sendall(_get_big(0))
                stalled.append(client)  # never reads
            deadline = time.monotonic() + 15
            while engine.big_answers_sent < cap and time.monotonic() < deadline:
                time.sleep(0.05)
            assert engine.big_answers_sent == cap  # the guard read both answers to their end
            time.sleep(0.3)
            answer, took = timed_request(guard.port, ASK_REQUEST, 10)
    assert_answered_at_once(answer, took, lines)
