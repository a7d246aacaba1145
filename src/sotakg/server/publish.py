"""``sotakg publish``: push the graph to a SPARQL server with the SPARQL 1.1 Graph Store HTTP Protocol.

The graph goes as N-Triples, streamed from the store with its length announced (never one string of
the whole graph in memory). Where the server has a SPARQL Update endpoint (given, or known from the
Graph Store endpoint's address), the graph is ``PUT`` into a staging graph first and then swapped in
with one ``MOVE``: a reader of the server sees the old graph or the new one, never half of it, on any
server that applies an update in one transaction (Oxigraph and Virtuoso do). Without one, the graph
goes in one ``PUT`` to ``?graph=IRI`` (a named graph) or ``?default``, which some servers (Oxigraph
among them) apply as a clear followed by a load.

Credentials come from the environment (``remote.credentials``): a bearer token, or a user and
password sent as the server's challenge asks (Basic or Digest).
"""

from __future__ import annotations

import hashlib
import re
import secrets
import time
import urllib.parse
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import EndpointError, UsageProblem
from ..query.remote import (
    N_TRIPLES,
    HttpAnswer,
    StreamedBody,
    authorized_request,
    check_endpoint,
    check_graph_iri,
    credentials,
    refusal_message,
    with_parameters,
)
from ..query.sparql import DEFAULT_TIMEOUT

#: Largest body ``publish`` sends unless told otherwise (``--max-bytes``).
DEFAULT_MAX_BYTES = 512 * 1024 * 1024
_SIZE = re.compile(r"\s*(\d+)\s*([KMG]i?B?|B)?\s*", re.IGNORECASE)
_UNITS = {"": 1, "B": 1, "K": 1024, "M": 1024**2, "G": 1024**3}
#: Triples serialized at a time while streaming.
BATCH = 2000
#: The SPARQL Update endpoint beside each known Graph Store endpoint (the last path segment):
#: Oxigraph's server, Virtuoso's (authenticated and not) and Fuseki's.
UPDATE_BESIDE = {
    "store": "update",
    "sparql-graph-crud-auth": "sparql-auth",
    "sparql-graph-crud": "sparql",
    "data": "update",
}
STAGING_PREFIX = "urn:sotakg:staging:"


@dataclass(frozen=True)
class PublishReport:
    """What a publish did: where to, how much, what the server answered, and the swap endpoint."""

    url: str
    graph: str | None
    triples: int
    size: int
    status: int
    seconds: float
    swapped_at: str | None = None
    #: Why there was no swap: --no-swap was given (else no update endpoint was known).
    swap_declined: bool = False

    def describe(self) -> str:
        target = f"the graph <{self.graph}>" if self.graph else "the default graph"
        if self.swapped_at:
            how = f"staged and swapped in with one MOVE at {self.swapped_at}"
        elif self.swap_declined:
            how = "in one PUT (--no-swap)"
        else:
            how = "in one PUT (no update endpoint to swap it in with)"
        return (
            f"Published {self.triples} triples ({self.size} bytes of N-Triples) to {target} at {self.url} "
            f"(HTTP {self.status}), {how}, in {self.seconds:.2f} s."
        )


def parse_size(text: str, option: str = "--max-bytes") -> int:
    """A byte count written as ``1000``, ``64K``, ``512M`` or ``2G`` (powers of 1024); ``option`` names
    the option it came from in the UsageProblem for anything else."""
    match = _SIZE.fullmatch(text)
    if not match:
        raise UsageProblem(f"{option} takes a size such as 512M, 2G or 1000000, not {text!r}")
    unit = (match.group(2) or "").upper()[:1]
    size = int(match.group(1)) * _UNITS[unit]
    if size <= 0:
        raise UsageProblem(f"{option} must be more than 0")
    return size


def graph_store_url(endpoint: str, graph: str | None) -> str:
    """The Graph Store Protocol address of ``graph`` (or of the default graph) at ``endpoint``."""
    return with_parameters(endpoint, [("graph", graph)] if graph else [("default", None)])


def update_endpoint_beside(endpoint: str) -> str | None:
    """The SPARQL Update endpoint of a known server layout beside the Graph Store ``endpoint`` (Oxigraph
    ``/store`` → ``/update``, Virtuoso ``/sparql-graph-crud-auth`` → ``/sparql-auth``, Fuseki
    ``/DATASET/data`` → ``/DATASET/update``), or None."""
    parts = urllib.parse.urlsplit(endpoint)
    folder, _, last = parts.path.rpartition("/")
    beside = UPDATE_BESIDE.get(last)
    if beside is None:
        return None
    return urllib.parse.urlunsplit(parts._replace(path=f"{folder}/{beside}"))


def staging_graph(graph: str | None) -> str:
    """A staging graph for ``graph`` (or the default graph) of this publish alone: the target's digest
    and a random part. Two publishes of one graph at once each move their own triples (a shared one
    moved one run's triples under the other's report, and on Virtuoso, whose MOVE of a graph gone
    clears the target, left it empty). A publish killed between its upload and its swap leaves its
    staging graph behind (``urn:sotakg:staging:…``): DROP it."""
    digest = hashlib.sha256((graph or "default graph").encode("utf-8")).hexdigest()[:24]
    return f"{STAGING_PREFIX}{digest}-{secrets.token_hex(8)}"


def swap_update(staging: str, graph: str | None) -> str:
    """The SPARQL Update that moves ``staging`` onto ``graph`` (or the default graph) in one operation.
    The IRIs are written by pyoxigraph from checked NamedNodes, never spliced as raw text."""
    from pyoxigraph import NamedNode

    target = str(NamedNode(graph)) if graph else "DEFAULT"
    return f"MOVE {NamedNode(staging)} TO {target}"


@dataclass(frozen=True)
class NTriplesStream:
    """A store's default graph as N-Triples, serialized batch by batch each time it is sent."""

    store: Any
    triples: int
    size: int

    @classmethod
    def measure(cls, store: Any) -> NTriplesStream:
        """Count the triples and bytes with one pass that keeps only one batch in memory."""
        triples = size = 0
        for chunk in _ntriples_chunks(store):
            size += len(chunk)
            triples += chunk.count(b"\n")
        return cls(store, triples, size)

    def body(self, progress: Callable[[int], None] | None = None) -> StreamedBody:
        """The body to send; ``progress`` is told how many bytes have gone, after each chunk (from 0
        again when the body is sent again)."""

        def chunks() -> Iterator[bytes]:
            sent = 0
            for chunk in _ntriples_chunks(self.store):
                yield chunk
                sent += len(chunk)
                if progress is not None:
                    progress(sent)

        return StreamedBody(self.size, chunks)


def _ntriples_chunks(store: Any) -> Iterator[bytes]:
    from pyoxigraph import DefaultGraph, RdfFormat, serialize

    batch = []
    for quad in store.quads_for_pattern(None, None, None, DefaultGraph()):
        batch.append(quad.triple)
        if len(batch) == BATCH:
            yield serialize(batch, format=RdfFormat.N_TRIPLES) or b""
            batch = []
    if batch:
        yield serialize(batch, format=RdfFormat.N_TRIPLES) or b""


def publish(
    data_dir: Path,
    store_path: Path,
    endpoint: str,
    graph: str | None = None,
    timeout: float = DEFAULT_TIMEOUT,
    max_bytes: int = DEFAULT_MAX_BYTES,
    environ: Mapping[str, str] | None = None,
    update_endpoint: str | None = None,
    swap: bool = True,
    progress: Callable[[int, int], None] | None = None,
) -> PublishReport:
    """Replace ``graph`` (or the default graph) at the Graph Store ``endpoint`` with the store's graph.

    With ``swap`` and an update endpoint (``update_endpoint``, else the one beside ``endpoint`` in a
    known layout), the graph is PUT into ``staging_graph(graph)`` and moved onto the target with one
    SPARQL Update; otherwise it is PUT onto the target directly. ``progress(sent, total)`` follows the
    upload. Credentials come from the environment (``environ`` replaces ``os.environ``). Raises
    UsageProblem for a bad URL, IRI or credentials setting; EndpointError when the graph is over
    ``max_bytes`` (nothing is sent), the server cannot be reached or refuses (its reason shown); and
    EndpointTimeout when a wait exceeds ``timeout`` seconds.
    """
    check_endpoint(endpoint)
    if graph is not None:
        check_graph_iri(graph)
    if update_endpoint is not None:
        check_endpoint(update_endpoint, "--update-endpoint")
    credentials(environ)
    swap_at = (update_endpoint or update_endpoint_beside(endpoint)) if swap else None
    store = open_store(data_dir, store_path)
    stream = NTriplesStream.measure(store)
    if stream.size > max_bytes:
        raise EndpointError(
            f"the graph is {stream.size} bytes of N-Triples, over the limit of {max_bytes} bytes; raise it with "
            f"--max-bytes (the server may have a limit of its own)"
        )

    def advance(sent: int) -> None:
        if progress is not None:
            progress(sent, stream.size)

    url = graph_store_url(endpoint, graph)
    started = time.perf_counter()
    if swap_at is None:
        answer = _put(url, stream.body(advance), timeout, environ)
        _check_put(answer, url, graph, environ)
        seconds = time.perf_counter() - started
        return PublishReport(url, graph, stream.triples, stream.size, answer.status, seconds, swap_declined=not swap)
    staging = staging_graph(graph)
    staging_url = graph_store_url(endpoint, staging)
    answer = _put(staging_url, stream.body(advance), timeout, environ)
    _check_put(answer, staging_url, staging, environ)
    moved = _update(swap_at, swap_update(staging, graph), timeout, environ)
    if not moved.ok:
        _drop_quietly(swap_at, staging, timeout, environ)
        message = refusal_message(moved, swap_at, environ, writing=True)
        if graph is None and moved.status not in (401, 403) and "default" in moved.excerpt(2000).lower():
            message += "\nthis server has no default graph to replace: pass --graph IRI to publish into a named graph"
        elif moved.status in (404, 405):
            message += "\nis it the server's SPARQL Update endpoint? give the right one with --update-endpoint"
        raise EndpointError(message + f"\nthe graph at {url} was left as it was")
    return PublishReport(
        url, graph, stream.triples, stream.size, answer.status, time.perf_counter() - started, swapped_at=swap_at
    )


def open_store(data_dir: Path, store_path: Path) -> Any:
    """The store (its default graph holds the ontology and records), built first when stale."""
    from ..graph.open import open_graph

    return open_graph(data_dir, store_path)


def _put(url: str, body: StreamedBody, timeout: float, environ: Mapping[str, str] | None) -> HttpAnswer:
    return authorized_request(
        "PUT", url, body=body, headers={"Content-Type": N_TRIPLES}, timeout=timeout, environ=environ
    )


def _update(url: str, update: str, timeout: float, environ: Mapping[str, str] | None) -> HttpAnswer:
    body = urllib.parse.urlencode([("update", update)]).encode("ascii")
    headers = {"Content-Type": "application/x-www-form-urlencoded"}
    return authorized_request("POST", url, body=body, headers=headers, timeout=timeout, environ=environ)


def _drop_quietly(url: str, staging: str, timeout: float, environ: Mapping[str, str] | None) -> None:
    """Remove the staging graph after a failed swap, as far as the server lets us (best effort: the
    next publish replaces it anyway)."""
    from pyoxigraph import NamedNode

    try:
        _update(url, f"DROP SILENT GRAPH {NamedNode(staging)}", timeout, environ)
    except EndpointError:
        pass


def _check_put(answer: HttpAnswer, url: str, graph: str | None, environ: Mapping[str, str] | None) -> None:
    if answer.ok:
        return
    message = refusal_message(answer, url, environ, writing=True)
    if graph is None and answer.status not in (401, 403) and "default" in answer.excerpt(2000).lower():
        message += "\nthis server has no default graph to replace: pass --graph IRI to publish into a named graph"
    elif answer.status in (404, 405):
        message += (
            "\nis it the server's Graph Store endpoint? (Oxigraph: http://HOST:7878/store, "
            "Virtuoso: http://HOST:8890/sparql-graph-crud-auth, Fuseki: http://HOST:3030/DATASET/data)"
        )
    elif answer.status == 413:
        message += "\nthe server's request size limit is below the graph's size"
    raise EndpointError(message)
