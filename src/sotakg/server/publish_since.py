"""``sotakg publish --since BASE``: send a server the change since BASE, not the whole graph.

The server's graph is first fetched from its Graph Store endpoint and compared, triple for triple,
with BASE's graph (the ontology and BASE's records). Only when they are the same is the change sent,
as one SPARQL Update (``DELETE DATA``/``INSERT DATA``, ``graph.delta``) to the update endpoint, which
applies it in one transaction. When the server holds anything else (another revision, a hand edit,
no graph yet), an update would leave it neither BASE nor HEAD, so the whole graph is published
instead (``publish.publish``, one PUT), and the report says why.

The fetch costs a download of the graph; a count would be cheaper but cannot tell two graphs of the
same size apart, and a wrong guess here corrupts the published graph.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from ..errors import EndpointError, UsageProblem
from ..graph.delta import sparql_update, triple_delta
from ..query.remote import (
    N_TRIPLES,
    authorized_request,
    canonical_value,
    check_endpoint,
    check_graph_iri,
    refusal_message,
)
from ..query.sparql import DEFAULT_TIMEOUT
from ..records.revisions import load_side
from ..records.schema import Anthology, load_anthology
from .publish import DEFAULT_MAX_BYTES, PublishReport, graph_store_url, publish, update_endpoint_beside

SPARQL_UPDATE = "application/sparql-update"


@dataclass(frozen=True)
class SinceReport:
    """What ``publish --since`` did: sent an update, or fell back to a full publish (and why)."""

    url: str
    graph: str | None
    inserted: int
    deleted: int
    status: int
    seconds: float
    fallback: PublishReport | None = None
    why_full: str = ""

    def describe(self) -> str:
        if self.fallback is not None:
            return f"The server's graph is not BASE's ({self.why_full}); published the whole graph instead.\n" + (
                self.fallback.describe()
            )
        target = f"the graph <{self.graph}>" if self.graph else "the default graph"
        if not self.inserted and not self.deleted:
            return f"{target[0].upper()}{target[1:]} already holds this graph; nothing sent to {self.url}."
        return (
            f"Updated {target} at {self.url}: {self.inserted} triples inserted, {self.deleted} deleted "
            f"(HTTP {self.status}) in {self.seconds:.2f} s."
        )


def update_endpoint_for(endpoint: str) -> str:
    """The update endpoint beside a Graph Store endpoint of a known server layout; UsageProblem when
    it cannot be told, asking for --update-endpoint."""
    beside = update_endpoint_beside(endpoint)
    if beside is None:
        raise UsageProblem(
            f"cannot tell the update endpoint of {endpoint}; give it with --update-endpoint "
            f"(Oxigraph: http://HOST:7878/update, Fuseki: http://HOST:3030/DATASET/update)"
        )
    return beside


def _graph_triples(ntriples: bytes) -> set[tuple[object, object, object]]:
    from pyoxigraph import RdfFormat, parse

    return {(q.subject, q.predicate, canonical_value(q.object)) for q in parse(ntriples, format=RdfFormat.N_TRIPLES)}


def expected_graph(anthology: Anthology) -> set[tuple[object, object, object]]:
    """The triples a full publish of ``anthology`` puts on a server (the ontology and the records), their
    literals in the form ``canonical_value`` gives, as the server's graph is read."""
    from pyoxigraph import RdfFormat, parse

    from ..graph.rdf import anthology_ntriples
    from ..resources import ontology_path

    triples = {
        (q.subject, q.predicate, canonical_value(q.object))
        for q in parse(path=str(ontology_path()), format=RdfFormat.TURTLE)
    }
    return triples | _graph_triples(anthology_ntriples(anthology))


def server_graph(
    endpoint: str, graph: str | None, timeout: float, max_bytes: int, environ: Mapping[str, str] | None
) -> set[tuple[object, object, object]] | None:
    """The server's graph, or None when it has none (404). EndpointError for other refusals."""
    url = graph_store_url(endpoint, graph)
    answer = authorized_request(
        "GET", url, headers={"Accept": N_TRIPLES}, timeout=timeout, max_bytes=max_bytes, environ=environ
    )
    if answer.status == 404:
        return None
    if not answer.ok:
        raise EndpointError(refusal_message(answer, url, environ))
    if answer.media_type not in (N_TRIPLES, "text/plain"):
        raise EndpointError(f"{url} answered a graph as {answer.media_type!r}, not N-Triples")
    try:
        return _graph_triples(answer.body)
    except SyntaxError as error:
        raise EndpointError(f"{url} answered with N-Triples that do not parse: {error}") from None


def publish_since(
    data_dir: Path,
    store_path: Path,
    endpoint: str,
    since: str,
    graph: str | None = None,
    update_endpoint: str | None = None,
    timeout: float = DEFAULT_TIMEOUT,
    max_bytes: int = DEFAULT_MAX_BYTES,
    environ: Mapping[str, str] | None = None,
    swap: bool = True,
    progress: Callable[[int, int], None] | None = None,
) -> SinceReport:
    """Turn the server's graph from BASE's (``since``: a git revision or a data folder) into this data
    folder's with one SPARQL Update, after checking the server holds BASE's graph; publish the whole
    graph instead when it does not (``publish.publish`` with ``update_endpoint``, ``swap`` and
    ``progress``), or when the graph read again after the update is not this folder's (it changed in
    between). Raises UsageProblem, RevisionError, DataError or EndpointError."""
    check_endpoint(endpoint)
    if graph is not None:
        check_graph_iri(graph)
    update_url = check_endpoint(update_endpoint, "--update-endpoint") if update_endpoint else None
    update_url = update_url or update_endpoint_for(endpoint)
    base = load_side(data_dir, since).anthology
    head = load_anthology(data_dir)
    there = server_graph(endpoint, graph, timeout, max_bytes, environ)
    expected = expected_graph(base)
    if there != expected:
        if there is None:
            why = "it has no such graph"
        else:
            why = f"it holds {len(there)} triples, {len(there - expected)} of them not BASE's; BASE has {len(expected)}"
        full = publish(
            data_dir, store_path, endpoint, graph, timeout, max_bytes, environ,
            update_endpoint=update_endpoint, swap=swap, progress=progress,
        )  # fmt: skip
        return SinceReport(full.url, graph, 0, 0, full.status, full.seconds, full, why)
    delta = triple_delta(base, head)
    if delta.empty:
        return SinceReport(update_url, graph, 0, 0, 0, 0.0)
    body = sparql_update(delta, graph).encode("utf-8")
    if len(body) > max_bytes:
        raise EndpointError(f"the update is {len(body)} bytes, over the limit of {max_bytes} bytes; raise --max-bytes")
    started = time.perf_counter()
    answer = authorized_request(
        "POST", update_url, body=body, headers={"Content-Type": SPARQL_UPDATE}, timeout=timeout, environ=environ
    )
    if not answer.ok:
        message = refusal_message(answer, update_url, environ, writing=True)
        if answer.status in (403, 404, 405):
            message += "\ndoes the server take updates there? without --since, publish sends the whole graph"
        raise EndpointError(message)
    # The check and the update are two requests: a graph another publish replaced in between got
    # this change too, and holds neither side's graph. Checked again, it is then published whole.
    now = server_graph(endpoint, graph, timeout, max_bytes, environ)
    if now != expected_graph(head):
        full = publish(
            data_dir, store_path, endpoint, graph, timeout, max_bytes, environ,
            update_endpoint=update_endpoint, swap=swap, progress=progress,
        )  # fmt: skip
        why = "the graph changed on the server while the change was sent (another publish?)"
        return SinceReport(full.url, graph, 0, 0, full.status, full.seconds, full, why)
    return SinceReport(
        update_url,
        graph,
        len(delta.inserted),
        len(delta.deleted),
        answer.status,
        time.perf_counter() - started,
    )
