"""The change between two anthologies' graphs as triples, and as the SPARQL Update that makes it.

Both graphs are made by the one records-to-RDF mapping (``rdf.record_triples``); the ontology is the
same on both sides (it ships with sotakg, not with the data), so the records' triples are the whole
difference. The update text is written by pyoxigraph's N-Triples serializer from term objects, never
spliced from record values, and its order is fixed (sorted), so the same change gives the same text.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyoxigraph import NamedNode, RdfFormat, Triple, serialize

from ..records.schema import Anthology
from .rdf import anthology_triples


@dataclass(frozen=True)
class TripleDelta:
    """The triples BASE's graph has and HEAD's has not (``deleted``), and the other way (``inserted``)."""

    deleted: tuple[Triple, ...]
    inserted: tuple[Triple, ...]

    @property
    def empty(self) -> bool:
        return not self.deleted and not self.inserted


def triple_delta(base: Anthology, head: Anthology) -> TripleDelta:
    """The triples that turn ``base``'s graph into ``head``'s, each list sorted by its N-Triples text."""
    before = set(anthology_triples(base))
    after = set(anthology_triples(head))
    return TripleDelta(tuple(sorted(before - after, key=str)), tuple(sorted(after - before, key=str)))


def _block(triples: tuple[Triple, ...], graph: NamedNode | None) -> str:
    text = (serialize(list(triples), format=RdfFormat.N_TRIPLES) or b"").decode("utf-8")
    # Split on LF only: a literal may hold NEL or U+2028, which str.splitlines() would cut at.
    indent = "    " if graph is not None else "  "
    body = "".join(f"{indent}{line}\n" for line in text.split("\n") if line)
    if graph is None:
        return body
    return f"  GRAPH {graph} {{\n{body}  }}\n"


def sparql_update(delta: TripleDelta, graph: str | None = None) -> str:
    """``DELETE DATA { ... } ; INSERT DATA { ... }`` for ``delta``, into the default graph or into
    ``graph`` (an IRI checked by the caller). An empty delta is a comment alone (a valid, empty update)."""
    target = NamedNode(graph) if graph is not None else None
    parts = []
    if delta.deleted:
        parts.append("DELETE DATA {\n" + _block(delta.deleted, target) + "}")
    if delta.inserted:
        parts.append("INSERT DATA {\n" + _block(delta.inserted, target) + "}")
    if not parts:
        return "# no change: the two graphs hold the same triples\n"
    return " ;\n".join(parts) + "\n"
