"""An adversarial review of `sotakg serve`: requests that break a promise of the README's serve section
(and issue 15) on the code as it is. Every server is a real Oxigraph server behind the guard on
127.0.0.1; every wait is bounded."""

from __future__ import annotations

import socket
import string
import threading
import time
import urllib.parse

from .test_guard import _read_until_closed_or, answer_of, guard_over_engine, query_url
from .test_serve import serving

# ------------------------------------------------------------------ the protocol's dataset parameters


def test_the_protocols_dataset_parameters_are_refused_as_from_is(built_store):
    """The bug: the guard screens only the ``query`` (and ``update``) parameters. The SPARQL 1.1
    Protocol's ``default-graph-uri`` and ``named-graph-uri`` say exactly what ``FROM`` and ``FROM
    NAMED`` say, and the Oxigraph server obeys them, so
    ``GET /query?query=ASK{?s ?p ?o}&default-graph-uri=urn:x`` is forwarded and answered 200 with
    ``false`` (the query ran over another dataset), while ``ASK FROM <urn:x> {?s ?p ?o}`` is a 400
    ("names a dataset the store would have to fetch; everything is in the store's default graph").
    The same goes for the parameters in a POSTed form or beside an ``application/sparql-query`` body.

    The rule: FROM and FROM NAMED are refused whatever the lexical form; the protocol's dataset
    parameters are FROM in another spelling, so a request carrying them (in the URL or a form) gets
    the same 400, and every query answered runs over the store's default graph."""
    ask = "ASK { ?s ?p ?o }"
    with guard_over_engine(built_store) as guard:
        base = f"http://127.0.0.1:{guard.port}"
        assert answer_of(query_url(base, ask))[2] == b'{"head":{},"boolean":true}'
        status, _, body = answer_of(query_url(base, "ASK FROM <urn:x> { ?s ?p ?o }"))
        assert status == 400 and body.startswith(b"refused: FROM"), (status, body)
        seen = []
        for name, text in (
            ("default-graph-uri", ask),
            ("named-graph-uri", "ASK { GRAPH ?g { ?s ?p ?o } }"),
        ):
            encoded = urllib.parse.urlencode({"query": text, name: "urn:x"})
            seen.append((name, "GET") + answer_of(base + "/query?" + encoded)[::2])
            seen.append(
                (name, "form")
                + answer_of(base + "/query", "POST", encoded.encode(), "application/x-www-form-urlencoded")[::2]
            )
            seen.append(
                (name, "body")
                + answer_of(
                    base + "/query?" + urllib.parse.urlencode({name: "urn:x"}),
                    "POST",
                    text.encode(),
                    "application/sparql-query",
                )[::2]
            )
        forwarded = [entry for entry in seen if entry[2] != 400]
        assert forwarded == [], f"dataset parameters the engine obeyed: {forwarded}"


# ------------------------------------------------------------------ screening cost


_DIGITS = string.ascii_letters + string.digits


def _name(number: int) -> str:
    text = ""
    while True:
        text = _DIGITS[number % 62] + text
        number //= 62
        if not number:
            return text


def _many_queries_form(size: int = 1024 * 1024) -> bytes:
    """A form of ``size`` bytes at most holding as many distinct ``query=ASK{}#N`` fields as fit
    (each passes the check on its own; distinct, so no verdict is remembered)."""
    parts: list[str] = []
    used = 0
    number = 0
    while True:
        part = f"query=ASK{{}}#{_name(number)}"
        if used + len(part) + 1 > size:
            return "&".join(parts).encode()
        parts.append(part)
        used += len(part) + 1
        number += 1


def test_a_form_of_many_small_queries_is_refused_within_the_timeout(data_copy, tmp_path):
    """The bug: the guard screens every ``query`` field of a form, one ``check_query`` after another,
    before the request has a turn (so neither ``--timeout`` nor ``--max-concurrent`` applies), and
    only then forwards it, for the engine to refuse at once ("The URL query parameter query must be
    set at most once"). A 1 MB form (under ``--max-request-bytes``) of 65,000 distinct
    ``query=ASK{}#N`` fields costs the guard about 5 s of CPU (the issue's budget: < 50 ms per MB);
    three such POSTs at once (one address, well inside its connection share) hold `sotakg serve` at a
    full core for some fifteen seconds, with ``--timeout 1``, before any of them is answered.

    The rule: no request may stall the server, and the work a request causes stops within
    --timeout + 2 s (screening is linear and cheap): a request with more than one query, which no
    engine answers, is refused at once, without checking each of them."""
    body = _many_queries_form()
    head = (
        b"POST /query HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-www-form-urlencoded\r\n"
        b"Content-Length: %d\r\nConnection: close\r\n\r\n" % len(body)
    )
    with serving(data_copy, tmp_path / "store", "--timeout", "1") as served:
        port = int(served.base.rsplit(":", 1)[1])
        answers: list[tuple[bytes, float]] = []

        def post() -> None:
            with socket.create_connection(("127.0.0.1", port), timeout=10) as connection:
                started = time.monotonic()
                connection.sendall(head + body)
                answer = _read_until_closed_or(connection, 1 + 2 + 1)
                answers.append((answer, time.monotonic() - started))

        clients = [threading.Thread(target=post) for _ in range(3)]
        for client in clients:
            client.start()
        for client in clients:
            client.join(15)
    assert len(answers) == 3
    for answer, took in answers:
        assert answer.startswith(b"HTTP/1.1 4"), f"no refusal within {took:.1f} s (--timeout 1): {answer[:80]!r}"
        assert took < 1 + 2, took
