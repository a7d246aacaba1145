"""``sotakg export``: the graph as RDF, and topic index pages generated from the graph."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import ExportError, UsageProblem
from ..graph import vocab as v
from ..query.formats import pyoxigraph_format
from ..records.indexpage import PracticeRow, TopicRow, render_full_index, render_page, topic_page_name

if TYPE_CHECKING:
    from collections.abc import Mapping
    from pathlib import Path

    from pyoxigraph import BlankNode, Literal, NamedNode, QuerySolution, Store, Variable

    from ..query.formats import WriteReport


class UnknownTopic(UsageProblem):
    """No topic has the slug asked for."""


def export_rdf(store: Store, canonical_format: str) -> bytes:
    """The whole graph in ``canonical_format`` (see formats.RDF_FORMATS), in a stable order."""
    from pyoxigraph import DefaultGraph, Quad, Triple, serialize

    quads = sorted(store.quads_for_pattern(None, None, None, DefaultGraph()), key=str)
    fmt = pyoxigraph_format(canonical_format)
    statements: list[Quad] | list[Triple] = quads if fmt.supports_datasets else [q.triple for q in quads]
    data = serialize(statements, format=fmt, prefixes=v.PREFIXES) or b""
    # Some serialisers (JSON-LD, RDF/XML) stop without a final line break; every output file ends with one.
    return data if data == b"" or data.endswith(b"\n") else data + b"\n"


_TOPIC_QUERY = """
SELECT ?slug ?topic ?label ?scope ?topicSize ?schemeTitle ?schemeDescription ?registrySize WHERE {
  ?topic a sota:Topic ; sota:slug ?slug .
  OPTIONAL { ?topic skos:prefLabel ?label }
  OPTIONAL { ?topic skos:scopeNote ?scope }
  OPTIONAL { ?topic sota:declaredSize ?topicSize }
  OPTIONAL { id:topics dcterms:title ?schemeTitle }
  OPTIONAL { id:topics dcterms:description ?schemeDescription }
  OPTIONAL { id:topics sota:declaredSize ?registrySize }
}
"""

_ROWS_QUERY = """
SELECT ?topic ?id ?version ?title ?summary ?status ?statusColumn ?reason ?note WHERE {
  ?practice a sota:Practice ; dcterms:identifier ?id ; sota:filedUnder ?topic .
  OPTIONAL { ?practice sota:currentVersion/sota:versionNumber ?version }
  OPTIONAL { ?practice dcterms:title ?title }
  OPTIONAL { ?practice sota:summary ?summary }
  OPTIONAL { ?practice sota:status ?status }
  OPTIONAL { ?practice sota:statusColumn ?statusColumn }
  OPTIONAL { ?practice sota:statusNote ?note }
  OPTIONAL { ?practice sota:rejectionReason ?reason }
}
"""

_COUNT_QUERY = "SELECT (COUNT(?p) AS ?n) WHERE { ?p a sota:Practice }"

_TOPICS_QUERY = """
SELECT ?slug ?label ?scope (COUNT(?practice) AS ?count) WHERE {
  ?topic a sota:Topic ; sota:slug ?slug .
  OPTIONAL { ?topic skos:prefLabel ?label }
  OPTIONAL { ?topic skos:scopeNote ?scope }
  OPTIONAL { ?practice a sota:Practice ; dcterms:identifier [] ; sota:filedUnder ?topic }
}
GROUP BY ?slug ?label ?scope
ORDER BY ?slug
"""

_SCHEME_QUERY = """
SELECT ?schemeTitle ?schemeDescription ?registrySize WHERE {
  OPTIONAL { id:topics dcterms:title ?schemeTitle }
  OPTIONAL { id:topics dcterms:description ?schemeDescription }
  OPTIONAL { id:topics sota:declaredSize ?registrySize }
}
"""

FULL_INDEX_NAME = "index.md"

_SLUGS_QUERY = "SELECT ?slug WHERE { ?t a sota:Topic ; sota:slug ?slug } ORDER BY ?slug"


def _select(
    store: Store, query: str, bindings: Mapping[Variable, NamedNode | BlankNode | Literal] | None = None
) -> list[QuerySolution]:
    """Run a SELECT query with the ontology's prefixes and bound parameters (stated at the head of its
    WHERE group, where the engine's planner sees them: ``with_values``)."""
    from ..query.sparql import with_values

    bound = with_values(query, bindings) if bindings else query
    result = store.query(bound, prefixes=v.PREFIXES)
    return list(result)  # type: ignore[arg-type]


def _value(solution: QuerySolution, name: str) -> str | None:
    term = solution[name]
    return None if term is None else term.value


def topic_slugs(store: Store) -> list[str]:
    """The slugs of every topic in the graph, sorted."""
    return [s["slug"].value for s in _select(store, _SLUGS_QUERY)]


def export_index(store: Store, slug: str) -> str:
    """The published index page of the topic ``slug``, generated from the graph."""
    from pyoxigraph import Literal, NamedNode, Variable

    topics = _select(store, _TOPIC_QUERY, {Variable("slug"): Literal(slug)})
    if not topics:
        known = ", ".join(topic_slugs(store)) or "none"
        raise UnknownTopic(f"no topic with slug {slug!r}; known topics: {known}")
    topic = topics[0]
    rows = []
    for solution in _select(store, _ROWS_QUERY, {Variable("topic"): topic["topic"]}):
        stated = solution["status"]
        # the concept's name, or a status stated as a literal exactly as written
        status = (
            stated.value.removeprefix(v.SOTA) if isinstance(stated, NamedNode) else _value(solution, "status") or ""
        )
        rows.append(
            PracticeRow(
                id=_value(solution, "id") or "",
                version=int(_value(solution, "version") or 1),
                title=_value(solution, "title") or "",
                summary=_value(solution, "summary") or "",
                status=status,
                reason=_value(solution, "reason") or _value(solution, "note") or "",
                status_column=_value(solution, "statusColumn") or "",
            )
        )
    size = _value(topic, "registrySize")
    if size is None:
        size = _select(store, _COUNT_QUERY)[0]["n"].value
    declared = _value(topic, "topicSize")
    return render_page(
        scheme_title=_value(topic, "schemeTitle") or "Topics",
        scheme_description=_value(topic, "schemeDescription") or "",
        topic_label=_value(topic, "label") or slug,
        topic_scope=_value(topic, "scope"),
        registry_size=int(size),
        rows=rows,
        topic_count=None if declared is None else int(declared),
    )


def export_full_index(store: Store) -> str:
    """The full index page: the topic scheme's description and a table of every topic (label linked
    to its page ``<slug>.md``, scope, count of practices filed under it)."""
    scheme = _select(store, _SCHEME_QUERY)[0]
    size = _value(scheme, "registrySize")
    if size is None:
        size = _select(store, _COUNT_QUERY)[0]["n"].value
    topics = [
        TopicRow(
            slug=_value(row, "slug") or "",
            label=_value(row, "label") or _value(row, "slug") or "",
            scope=_value(row, "scope") or "",
            count=int(_value(row, "count") or 0),
        )
        for row in _select(store, _TOPICS_QUERY)
    ]
    return render_full_index(
        scheme_title=_value(scheme, "schemeTitle") or "Topics",
        scheme_description=_value(scheme, "schemeDescription") or "",
        registry_size=int(size),
        topics=topics,
    )


def export_all_indexes(store: Store) -> dict[str, str]:
    """Every index page by file name: ``<slug>.md`` per topic (exactly what ``export_index`` gives)
    and ``index.md``, the full index they link back to."""
    slugs = topic_slugs(store)
    # One file a page, also where names differ only in case (the file systems of macOS and Windows).
    seen: dict[str, str] = {FULL_INDEX_NAME.casefold(): "the full index"}
    for slug in slugs:
        earlier = seen.setdefault(topic_page_name(slug).casefold(), f"the topic {slug!r}")
        if earlier != f"the topic {slug!r}":
            raise ExportError(
                f"the topic {slug!r} has the page file {topic_page_name(slug)}, which {earlier} has too (names "
                f"that differ only in case are one file on some systems); give the topic another slug"
            )
    pages = {topic_page_name(slug): export_index(store, slug) for slug in slugs}
    pages[FULL_INDEX_NAME] = export_full_index(store)
    return pages


def write_all_indexes(store: Store, folder: Path) -> WriteReport:
    """Write every index page (``export_all_indexes``) into ``folder``; files already holding the same
    text are left untouched."""
    from ..query.formats import write_files

    return write_files(folder, export_all_indexes(store))
