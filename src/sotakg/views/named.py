"""Named graph views: the CONSTRUCT queries of ``queries/views/*.rq``, and what they export to.

A view file has the same ``#+`` header as a canned query (summary, description, params) and holds a
CONSTRUCT query whose triples are one subgraph — the citations, the supersession chains, the
rejections, one topic — together with the statements that label its nodes (type, identifier, title,
status ...). A view exports as RDF straight from the CONSTRUCT, or as a diagram: Mermaid, Graphviz
DOT, or SVG drawn by Graphviz.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import ParameterProblem, QueryFailed, QueryHeaderError, UnknownView, UsageProblem
from ..query.canned import CannedQuery, bind_parameters, find_named, read_canned
from ..query.formats import RDF_FORMATS
from ..query.results import GraphResult, format_graph
from ..query.sparql import DEFAULT_TIMEOUT, Backend, query_form, run_query

if TYPE_CHECKING:
    from pyoxigraph import Triple

#: Diagram formats a view exports to, with the file extensions that imply them.
DIAGRAM_FORMATS: dict[str, tuple[str, ...]] = {
    "mermaid": ("mmd", "mermaid"),
    "dot": ("dot", "gv"),
    "svg": ("svg",),
}
#: The RDF formats a view exports to (its CONSTRUCT's triples): the names of formats.RDF_FORMATS.
VIEW_RDF_FORMATS = tuple(RDF_FORMATS)


def views_dir() -> Path:
    """The folder of shipped views (``queries/views``)."""
    from ..resources import resource_dir

    return resource_dir("queries") / "views"


def read_view(path: Path) -> CannedQuery:
    """Read one view file: a canned-query header over a CONSTRUCT query (QueryHeaderError if not)."""
    view = read_canned(path)
    if query_form(view.text) != "CONSTRUCT":
        from ..records.sources import display_path

        raise QueryHeaderError(f"{display_path(path)}: a view must be a CONSTRUCT query")
    return view


def load_views(directory: Path | None = None) -> list[CannedQuery]:
    """Every view of ``directory`` (default: the shipped views), sorted by name."""
    folder = directory if directory is not None else views_dir()
    return [read_view(path) for path in sorted(folder.glob("*.rq"))]


def find_view(name: str, directory: Path | None = None) -> CannedQuery:
    """The view called ``name`` (only its file is read); UnknownView, with a close match if any,
    otherwise."""
    folder = directory if directory is not None else views_dir()
    return find_named(folder, name, read_view, UnknownView, "view", "sotakg views")


def run_view(
    backend: Backend,
    view: CannedQuery | str,
    raw: Mapping[str, str] | None = None,
    timeout: float = DEFAULT_TIMEOUT,
) -> GraphResult:
    """Run a view (or the one named so) with ``raw`` parameter values; its triples, each once, sorted.
    A view with parameters that finds nothing is a ParameterProblem (the value matches no record)."""
    chosen = find_view(view) if isinstance(view, str) else view
    bindings = bind_parameters(chosen, raw or {}, noun="view")
    result = run_query(backend, chosen.text, bindings, timeout)
    if not isinstance(result, GraphResult):
        raise QueryFailed(f"view {chosen.name} answered with something other than triples")
    triples = sorted(set(result.triples), key=_triple_key)
    if not triples and chosen.params:
        given = " ".join(f"{name}={value}" for name, value in sorted((raw or {}).items()))
        raise ParameterProblem(f"view {chosen.name} found nothing for {given}: no record matches that value")
    return GraphResult(tuple(triples))


def _triple_key(triple: Triple) -> tuple[str, str, str]:
    return (str(triple.subject), str(triple.predicate), str(triple.object))


def resolve_view_format(name: str | None, output: Path | None) -> str:
    """The canonical format for ``--format NAME`` or, without it, the output file's extension: an RDF
    format (turtle, ntriples, jsonld ...) or a diagram (mermaid, dot, svg)."""
    if name is None:
        if output is None or str(output) == "-":
            raise UsageProblem("writing to standard output needs --format (for example --format mermaid)")
        name = output.suffix.lstrip(".")
        if not name:
            raise UsageProblem(f"cannot tell the format of {output}: give it an extension or pass --format")
    lowered = name.lower()
    for canonical, aliases in (*RDF_FORMATS.items(), *DIAGRAM_FORMATS.items()):
        if lowered == canonical or lowered in aliases:
            return canonical
    known = ", ".join([*VIEW_RDF_FORMATS, *DIAGRAM_FORMATS])
    raise UsageProblem(f"unknown view format {name!r}; use one of: {known}")


def render_view(
    result: GraphResult, format_name: str, title: str | None = None, notify: Callable[[str], None] | None = None
) -> str:
    """A view's triples in a canonical format (resolve_view_format): RDF, a Mermaid flowchart, a
    Graphviz digraph, or SVG (GraphvizMissing when Graphviz is not installed). SVG is drawn however
    long Graphviz takes; a diagram too large to draw quickly is said so to ``notify`` first."""
    if format_name in RDF_FORMATS:
        return format_graph(result, format_name)
    from .diagrams import MAX_DRAWN_LINKS, diagram_from_triples, render_svg, to_dot, to_mermaid

    diagram = diagram_from_triples(result.triples)
    if format_name == "mermaid":
        return to_mermaid(diagram, title)
    if format_name == "dot":
        return to_dot(diagram, title)
    if format_name == "svg":
        if len(diagram.edges) > MAX_DRAWN_LINKS and notify is not None:
            notify(
                f"the diagram has {len(diagram.nodes):,} nodes and {len(diagram.edges):,} links: Graphviz may "
                "take minutes to lay it out (--format dot or mermaid writes its source at once)"
            )
        return render_svg(to_dot(diagram, title))
    raise UsageProblem(f"unknown view format {format_name!r}")


def view_title(view: CannedQuery, raw: Mapping[str, str] | None = None) -> str:
    """``topic distributed-optimization``: the view's name and its parameter values."""
    values = [value for _, value in sorted((raw or {}).items())]
    return " ".join([view.name, *values])


def export_view(
    backend: Backend,
    name: str,
    raw: Mapping[str, str] | None,
    format_name: str,
    timeout: float = DEFAULT_TIMEOUT,
    notify: Callable[[str], None] | None = None,
) -> str:
    """Run the view ``name`` and render it in the canonical ``format_name``: what ``sotakg export view``
    writes (``notify``: see render_view)."""
    view = find_view(name)
    return render_view(run_view(backend, view, raw, timeout), format_name, view_title(view, raw), notify)


def view_details(name: str) -> str:
    """One view in full: summary, description, parameters and its CONSTRUCT query."""
    from ..query.canned import query_details

    return query_details(find_view(name), command="sotakg export view")
