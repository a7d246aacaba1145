"""``sotakg publish``: push the graph to a SPARQL server with the SPARQL 1.1 Graph Store HTTP Protocol.

The whole graph goes in one ``PUT`` of N-Triples to the endpoint, addressed ``?graph=IRI`` (a named
graph) or ``?default`` (the default graph). PUT replaces the graph's content in one request, so a
reader of the server sees the old graph or the new one, never half of it (as far as the server
applies a request atomically, which Oxigraph, Fuseki, GraphDB and Virtuoso do).
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from ..errors import EndpointError, UsageProblem
from ..query.remote import (
    N_TRIPLES,
    auth_headers,
    check_endpoint,
    check_graph_iri,
    http_request,
    refusal_message,
    with_parameters,
)
from ..query.sparql import DEFAULT_TIMEOUT

#: Largest body ``publish`` sends unless told otherwise (``--max-bytes``).
DEFAULT_MAX_BYTES = 512 * 1024 * 1024
_SIZE = re.compile(r"\s*(\d+)\s*([KMG]i?B?|B)?\s*", re.IGNORECASE)
_UNITS = {"": 1, "B": 1, "K": 1024, "M": 1024**2, "G": 1024**3}


@dataclass(frozen=True)
class PublishReport:
    """What a publish did: where to, how much, and what the server answered."""

    url: str
    graph: str | None
    triples: int
    size: int
    status: int
    seconds: float

    def describe(self) -> str:
        target = f"the graph <{self.graph}>" if self.graph else "the default graph"
        return (
            f"Published {self.triples} triples ({self.size} bytes of N-Triples) to {target} at {self.url} "
            f"(HTTP {self.status}) in {self.seconds:.2f} s."
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


def graph_ntriples(data_dir: Path, store_path: Path) -> bytes:
    """The store's default graph (ontology and records) as N-Triples, built first when stale."""
    from pyoxigraph import DefaultGraph, RdfFormat

    from ..graph.open import open_graph

    store = open_graph(data_dir, store_path)
    return store.dump(format=RdfFormat.N_TRIPLES, from_graph=DefaultGraph()) or b""


def publish(
    data_dir: Path,
    store_path: Path,
    endpoint: str,
    graph: str | None = None,
    timeout: float = DEFAULT_TIMEOUT,
    max_bytes: int = DEFAULT_MAX_BYTES,
    environ: Mapping[str, str] | None = None,
) -> PublishReport:
    """Replace ``graph`` (or the default graph) at the Graph Store endpoint with the store's graph.

    Credentials come from the environment (``remote.auth_headers``; ``environ`` replaces
    ``os.environ``). Raises UsageProblem for a bad URL, IRI or credentials setting, EndpointError when
    the graph is over ``max_bytes``, the server cannot be reached or answers other than 2xx, and
    EndpointTimeout when it does not answer within ``timeout`` seconds.
    """
    check_endpoint(endpoint)
    if graph is not None:
        check_graph_iri(graph)
    headers = {"Content-Type": N_TRIPLES, **auth_headers(environ)}
    body = graph_ntriples(data_dir, store_path)
    if len(body) > max_bytes:
        raise EndpointError(
            f"the graph is {len(body)} bytes of N-Triples, over the limit of {max_bytes} bytes; raise it with "
            f"--max-bytes (the server may have a limit of its own)"
        )
    url = graph_store_url(endpoint, graph)
    started = time.perf_counter()
    answer = http_request("PUT", url, body=body, headers=headers, timeout=timeout)
    if not answer.ok:
        message = refusal_message(answer, url, environ)
        if answer.status in (404, 405):
            message += (
                "\nis it the server's Graph Store endpoint? (Oxigraph: http://HOST:7878/store, "
                "Fuseki: http://HOST:3030/DATASET/data)"
            )
        elif answer.status == 413:
            message += "\nthe server's request size limit is below the graph's size"
        raise EndpointError(message)
    return PublishReport(url, graph, body.count(b"\n"), len(body), answer.status, time.perf_counter() - started)
