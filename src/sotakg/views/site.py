"""``sotakg export site DIR``: the anthology as a static HTML site generated from the graph.

Pages: ``index.html`` (the topic scheme, its topics, the rejected practices, the decision records,
the papers and the views), ``topic-<slug>.html`` per topic (its index table and diagram),
``view-<name>.html`` per view without parameters, and ``<ID>.html`` per practice, paper and ADR
(its provenance, as ``sotakg why`` tells it, and a diagram of its neighbourhood).

Everything a page needs is inside it: inline CSS, diagrams as inline SVG drawn by Graphviz (or, when
Graphviz is not installed, their Mermaid source), no script, so the site works offline and from any
file server. All text is escaped; every record identifier in a text links to the record's page when
the record exists. Output depends on the graph only (no timestamps, sorted everything), files are
written atomically and only when their content changes, and pages of records that no longer exist
are removed (the folder's ``.sotakg-site`` lists what the last build wrote).
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import ExportError, QueryFailed
from ..graph import vocab as v
from ..query.formats import WriteReport, check_output_folder, write_files
from ..query.results import SelectResult
from ..query.sparql import DEFAULT_TIMEOUT, Backend, run_query
from ..query.why import Facts, Governance, Provenance, Ref, arxiv_with_version, provenance
from ..records.indexpage import RECORD_ID_RE
from ..records.sources import NotARegularFile, SourceTooLarge, read_bounded
from .diagrams import (
    MAX_DRAWN_LINKS,
    Diagram,
    Neighbourhoods,
    diagram_from_triples,
    natural_key,
    render_svgs,
    term_value,
    to_dot,
    to_mermaid,
)

if TYPE_CHECKING:
    from pyoxigraph import Triple

MANIFEST = ".sotakg-site"
_PAGE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*\.html")

#: Every statement about the anthology's own resources (records, versions, topics, the topic scheme);
#: the ontology's statements are left out.
STATEMENTS_QUERY = """
SELECT ?s ?p ?o WHERE {
  ?s ?p ?o .
  FILTER(STRSTARTS(STR(?s), STR(id:)) || STRSTARTS(STR(?s), STR(topic:)))
}
"""

KIND_TYPES = {"practice": v.PRACTICE, "paper": v.PAPER, "ADR": v.ADR}

CSS = """
:root { color-scheme: light; }
* { box-sizing: border-box; }
body { margin: 0; color: #1a202c; background: #ffffff;
  font: 16px/1.55 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif; }
header.site { background: #2a4365; color: #ffffff; padding: .65rem 1.5rem; }
header.site a { color: #ffffff; font-weight: 700; text-decoration: none; letter-spacing: .02em; }
main { max-width: 74rem; margin: 0 auto; padding: 1rem 1.5rem 3rem; }
nav.crumbs { font-size: .9rem; color: #4a5568; margin: .25rem 0 .75rem; }
h1 { font-size: 1.7rem; line-height: 1.25; margin: .5rem 0 1rem; }
h1 .id { color: #2b6cb0; margin-right: .4rem; }
h2 { font-size: 1.2rem; margin: 2rem 0 .6rem; border-bottom: 1px solid #e2e8f0; padding-bottom: .2rem; }
a { color: #2b6cb0; }
a:hover { color: #1a365d; }
p.lead { font-size: 1.05rem; color: #2d3748; }
table { border-collapse: collapse; width: 100%; margin: .75rem 0; font-size: .95rem; }
th, td { border-bottom: 1px solid #e2e8f0; padding: .4rem .6rem; text-align: left; vertical-align: top; }
th { background: #f7fafc; font-weight: 600; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
td.id { white-space: nowrap; }
tr.rejected td { background: #fff5f5; }
table.practices td:nth-child(2) { width: 22%; }
table.practices td:nth-child(4) { width: 38%; }
.status { display: inline-block; padding: 0 .45em; border: 1px solid; border-radius: .3em;
  font-size: .8rem; font-weight: 600; white-space: nowrap; }
.status-active, .status-accepted { color: #276749; background: #f0fff4; border-color: #68d391; }
.status-proposed { color: #975a16; background: #fffbea; border-color: #d69e2e; border-style: dotted; }
.status-rejected { color: #9b2c2c; background: #fde8e8; border-color: #c53030; border-style: dashed; }
.status-superseded, .status-deprecated { color: #4a5568; background: #edf2f7; border-color: #a0aec0;
  border-style: dashed; }
dl.facts { display: grid; grid-template-columns: max-content 1fr; gap: .35rem 1.25rem; margin: 1rem 0; }
dl.facts dt { font-weight: 600; color: #4a5568; }
dl.facts dd { margin: 0; }
blockquote.reason { margin: .5rem 0; padding: .5rem 1rem; border-left: 4px solid #c53030; background: #fff5f5; }
ul.refs { padding-left: 1.2rem; }
ul.refs li { margin: .2rem 0; }
.muted { color: #718096; }
.diagram { overflow-x: auto; border: 1px solid #e2e8f0; border-radius: .4rem; padding: .5rem; margin: .75rem 0; }
.diagram svg { max-width: 100%; height: auto; }
pre { background: #f7fafc; border: 1px solid #e2e8f0; border-radius: .4rem; padding: .75rem; overflow-x: auto;
  font-size: .85rem; }
ul.legend { font-size: .9rem; color: #4a5568; }
footer { max-width: 74rem; margin: 0 auto; padding: 1rem 1.5rem 2rem; color: #718096; font-size: .85rem; }
""".strip()

LEGEND = (
    "Rounded boxes are practices: blue active, amber dotted proposed, red dashed rejected.",
    "Notes are papers, hexagons decision records (grey dashed when superseded), folders topics, "
    "ellipses practice versions.",
    "Edges say how records relate: cites, names (a rejection reason names the record), revises, "
    "replaces, filed under, current version.",
)


# ------------------------------------------------------------------------------------------ the graph


@dataclass
class SiteGraph:
    """The graph's statements about the anthology, read once, with the pages they give."""

    facts: Facts
    triples: list[Triple]
    records: dict[str, str] = field(default_factory=dict)  # id -> kind (practice, paper, ADR)
    topics: list[str] = field(default_factory=list)  # topic IRIs, by slug

    def kind_of(self, record_id: str) -> str | None:
        return self.records.get(record_id)

    def ids(self, kind: str) -> list[str]:
        return sorted((i for i, k in self.records.items() if k == kind), key=natural_key)

    def slug(self, topic: str) -> str:
        return self.facts.text(topic, v.SLUG) or topic.removeprefix(v.TOPIC)

    def page(self, iri: str) -> str | None:
        """The page of a resource: a record's, a topic's, or (for a version) its practice's."""
        if iri.startswith(v.ID):
            local = iri[len(v.ID) :]
            if local in self.records:
                return record_page(local)
            version_of = self.facts.text(iri, v.IS_VERSION_OF)
            if version_of:
                return self.page(version_of)
            if iri == v.TOPIC_SCHEME_IRI:
                return "index.html"
        if iri in self.topics:
            return topic_page(self.slug(iri))
        return None


def record_page(record_id: str) -> str:
    return f"{record_id}.html"


def topic_page(slug: str) -> str:
    return f"topic-{slug}.html"


def view_page(name: str) -> str:
    return f"view-{name}.html"


def read_site_graph(backend: Backend, timeout: float = DEFAULT_TIMEOUT) -> SiteGraph:
    """Every statement about the anthology's records, topics and topic scheme, in one query."""
    from pyoxigraph import Triple

    result = run_query(backend, STATEMENTS_QUERY, None, timeout)
    if not isinstance(result, SelectResult):
        raise QueryFailed(f"{backend.label} answered the site's query with something other than a table")
    triples = [Triple(*row) for row in result.rows if None not in row]  # type: ignore[arg-type,misc]
    anthology = SiteGraph(Facts(result), triples)
    for triple in triples:
        if triple.predicate.value != v.TYPE:
            continue
        subject, type_iri = term_value(triple.subject), term_value(triple.object)
        kind = next((k for k, t in KIND_TYPES.items() if t == type_iri), None)
        if kind and subject.startswith(v.ID):
            anthology.records[subject[len(v.ID) :]] = kind
        elif type_iri == v.TOPIC_CLASS:
            anthology.topics.append(subject)
    anthology.topics = sorted(set(anthology.topics), key=lambda t: natural_key(anthology.slug(t)))
    return anthology


# ------------------------------------------------------------------------------------------ HTML pieces


def esc(text: object) -> str:
    """Text escaped for HTML content and attribute values."""
    return html.escape(str(text), quote=True)


#: An arXiv identifier as the anthology writes it in text (``ARXIV-1910.02054``, ``arXiv:1910.02054v2``,
#: or bare): YYMM.NNNN or YYMM.NNNNN, with a real month, and an optional version.
ARXIV_IN_TEXT = re.compile(r"(?:\barxiv[:\s-]?)?\b(?P<arxiv>\d{2}(?:0[1-9]|1[0-2])\.\d{4,5}(?:v\d+)?)\b", re.I)
_LINKABLE = re.compile(RECORD_ID_RE.pattern + r"|https?://[^\s<>\"']+|" + ARXIV_IN_TEXT.pattern, re.I)


def linked(text: str | None, anthology: SiteGraph) -> str:
    """``text`` escaped, each record identifier in it a link to the record's page when it exists, each
    arXiv identifier a link to its abstract page, and each web address a link to it (without the
    punctuation that ends a sentence)."""
    if not text:
        return ""
    parts: list[str] = []
    position = 0
    for match in _LINKABLE.finditer(text):
        found = match.group()
        if found.lower().startswith("http"):
            address = _address_without_closing_punctuation(found)
            parts.append(esc(text[position : match.start()]) + external_link(address))
            position = match.start() + len(address)
            continue
        parts.append(esc(text[position : match.start()]))
        if match.group("arxiv"):
            address = f"https://arxiv.org/abs/{match.group('arxiv')}"
            parts.append(f'<a href="{esc(address)}" rel="noopener">{esc(found)}</a>')
            position = match.end()
            continue
        if anthology.kind_of(found):
            parts.append(f'<a href="{esc(record_page(found))}">{esc(found)}</a>')
        else:
            parts.append(esc(found))
        position = match.end()
    parts.append(esc(text[position:]))
    return "".join(parts)


def _address_without_closing_punctuation(found: str) -> str:
    """A web address without the punctuation that ends the sentence after it; a ``)`` stays when the
    address opened one (``…/Pipeline_(computing)``), as GitHub's Markdown reads it."""
    address = found
    while address:
        last = address[-1]
        if last in ".,;:!?’”":
            address = address[:-1]
        elif last == ")" and address.count(")") > address.count("("):
            address = address[:-1]
        else:
            return address
    return address


def link(href: str | None, text: str) -> str:
    """A link with escaped text, or the escaped text alone when there is no page."""
    return f'<a href="{esc(href)}">{esc(text)}</a>' if href else esc(text)


def external_link(url: str) -> str:
    """A link to the web, only for http(s) addresses (anything else is shown as text)."""
    if re.match(r"https?://", url, re.I):
        return f'<a href="{esc(url)}" rel="noopener">{esc(url)}</a>'
    return esc(url)


def status_badge(status: str | None) -> str:
    if not status:
        return '<span class="muted">status not recorded</span>'
    return f'<span class="status status-{esc(status.lower())}">{esc(status)}</span>'


def ref_item(ref: Ref, anthology: SiteGraph, show_kind: bool = True, quote_intro: str = "") -> str:
    """One record in a list: its id linked, what it is, its label, and the words of a rejection reason
    about it (``quote_intro`` says whose)."""
    facts = [ref.kind if show_kind else None, f"v{ref.version}" if ref.version else None]
    head = link(record_page(ref.id) if anthology.kind_of(ref.id) else None, ref.id)
    details = ", ".join(esc(f) for f in facts if f)
    parts = [head]
    if details:
        parts.append(f'<span class="muted">{details}</span>')
    if ref.status:
        parts.append(status_badge(ref.status))
    if ref.label:
        parts.append("— " + linked(ref.label, anthology))
    if ref.quote:
        parts.append(f'<br><span class="muted">{esc(quote_intro)}</span><q>{linked(ref.quote, anthology)}</q>')
    return "<li>" + " ".join(parts) + "</li>"


def ref_list(refs: Iterable[Ref], anthology: SiteGraph, show_kind: bool = True, quote_intro: str = "") -> str:
    items = [ref_item(ref, anthology, show_kind, quote_intro) for ref in refs]
    return '<ul class="refs">\n' + "\n".join(items) + "\n</ul>" if items else ""


def facts_list(rows: Iterable[tuple[str, str]]) -> str:
    items = [f"<dt>{esc(name)}</dt><dd>{value}</dd>" for name, value in rows if value]
    return '<dl class="facts">\n' + "\n".join(items) + "\n</dl>" if items else ""


def page_html(title: str, body: str, crumbs: Iterable[tuple[str | None, str]] = ()) -> str:
    """A whole page: inline style, a header linking home, breadcrumbs, and the body."""
    trail = [link(href, text) for href, text in crumbs]
    nav = f'<nav class="crumbs">{" › ".join(trail)}</nav>\n' if trail else ""
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{esc(title)} · sotakg</title>\n<style>\n{CSS}\n</style>\n</head>\n<body>\n"
        '<header class="site"><a href="index.html">sotakg anthology</a></header>\n'
        f"<main>\n{nav}{body}\n</main>\n"
        "<footer>Generated from the knowledge graph by sotakg export site.</footer>\n"
        "</body>\n</html>\n"
    )


# ------------------------------------------------------------------------------------------ diagrams


@dataclass
class DiagramSlot:
    """A diagram a page shows: filled in (SVG, or Mermaid source) once every page's diagram is known,
    so Graphviz runs once for the whole site."""

    key: str
    diagram: Diagram
    title: str
    links: dict[str, str]


class Diagrams:
    """The site's diagrams: placeholders in the pages while they are built, drawn together at the end."""

    def __init__(self, anthology: SiteGraph, graphviz: bool):
        self.anthology = anthology
        self.graphviz = graphviz
        self.slots: list[DiagramSlot] = []

    def placeholder(self, triples: Iterable[Triple], title: str, command: str | None = None) -> str:
        """Where the diagram of ``triples`` goes on a page; ``command`` draws it from the command line."""
        statements = list(triples)
        if not statements:
            return '<p class="muted">Nothing to draw.</p>'
        diagram = diagram_from_triples(statements)
        if len(diagram.edges) > MAX_DRAWN_LINKS:
            drawn_by = f" <code>{esc(command)}</code> draws it." if command else ""
            return (
                f'<p class="muted">This diagram has {len(diagram.nodes)} nodes and {len(diagram.edges)} links, '
                f"more than a page can show legibly (at most {MAX_DRAWN_LINKS} links are drawn here).{drawn_by}</p>"
            )
        links = {}
        for node in diagram.nodes:
            page = self.anthology.page(node.iri)
            if page:
                links[node.iri] = page
        key = f"\x00diagram-{len(self.slots)}\x00"
        self.slots.append(DiagramSlot(key, diagram, title, links))
        return key

    def fill(self, pages: dict[str, str]) -> dict[str, str]:
        """The pages with each placeholder replaced by its drawing."""
        drawings: dict[str, str] = {}
        if self.graphviz:
            sources = [to_dot(slot.diagram, slot.title, slot.links) for slot in self.slots]
            for slot, svg in zip(self.slots, render_svgs(sources), strict=True):
                drawings[slot.key] = '<div class="diagram">\n' + _inline_svg(svg) + "</div>"
        else:
            for slot in self.slots:
                source = to_mermaid(slot.diagram, slot.title)
                drawings[slot.key] = (
                    '<p class="muted">Graphviz is not installed where this site was built (apt-get install '
                    "graphviz), so here is the diagram's Mermaid source.</p>\n"
                    f'<pre class="mermaid-source">{esc(source)}</pre>'
                )
        pattern = re.compile("\x00diagram-\\d+\x00")
        return {name: pattern.sub(lambda m: drawings[m.group()], text) for name, text in pages.items()}


def _inline_svg(document: str) -> str:
    """Graphviz's SVG document as an element to put inside HTML: no XML prolog, doctype or comments."""
    start = document.find("<svg")
    body = document[start:] if start >= 0 else document
    return re.sub(r"<!--.*?-->\n?", "", body, flags=re.S)


# ------------------------------------------------------------------------------------------ pages


class SiteBuilder:
    """Builds every page's HTML from the anthology and the views."""

    def __init__(self, backend: Backend, anthology: SiteGraph, graphviz: bool, timeout: float):
        self.backend = backend
        self.anthology = anthology
        self.timeout = timeout
        self.diagrams = Diagrams(anthology, graphviz)
        self.neighbourhoods = Neighbourhoods(anthology.triples)
        facts = anthology.facts
        self.scheme_title = facts.text(v.TOPIC_SCHEME_IRI, v.TITLE) or "Topics"
        self.scheme_description = facts.text(v.TOPIC_SCHEME_IRI, v.DESCRIPTION) or ""
        size = facts.text(v.TOPIC_SCHEME_IRI, v.DECLARED_SIZE)
        self.registry_size = int(size) if size and size.isdigit() else len(anthology.ids("practice"))
        self._practices_of: dict[str, list[str]] = {}
        self.stories: dict[str, Provenance] = {}
        for record_id in anthology.records:
            story = provenance(facts, record_id)
            if story is not None:
                self.stories[record_id] = story

    # -- helpers

    def practices_of(self, topic: str) -> list[str]:
        """The practices filed under ``topic``, in id order; found once per topic (three pages ask)."""
        if topic not in self._practices_of:
            filed = self.anthology.facts.subjects(v.FILED_UNDER, topic)
            self._practices_of[topic] = sorted(
                (i for i in self.anthology.ids("practice") if v.record_iri(i) in filed),
                key=natural_key,
            )
        return self._practices_of[topic]

    def topic_name(self, topic: str) -> str:
        return self.anthology.facts.text(topic, v.PREF_LABEL) or self.anthology.slug(topic)

    def version_label(self, record_id: str) -> str:
        story = self.stories.get(record_id)
        version = story.current_version if story else None
        return f" v{version}" if version and version > 1 else ""

    # -- the pages

    def build(self) -> dict[str, str]:
        from .named import load_views, run_view

        pages: dict[str, str] = {}
        owners: dict[str, str] = {}  # page name, case-folded -> what the page is for

        def add(name: str, owner: str, page: str) -> None:
            # A record's id, a topic's slug and a view's name all become file names: one may not
            # replace another's page (a record named "index", "topic-<slug>"), nor differ only in case.
            folded = name.casefold()
            if folded in owners:
                raise ExportError(
                    f"the site's page {name} would be both {owners[folded]}'s and {owner}'s; rename one of "
                    f"them (record ids, topic slugs and view names give the pages their names)"
                )
            owners[folded] = owner
            pages[name] = page

        views = load_views()
        plain_views = [view for view in views if not view.params]
        topic_view = next((view for view in views if [p.name for p in view.params] == ["topic"]), None)
        add("index.html", "the index", self.index_page(plain_views))
        for topic in self.anthology.topics:
            slug = self.anthology.slug(topic)
            triples: list[Triple] = []
            if topic_view is not None:
                triples = list(run_view(self.backend, topic_view, {"topic": slug}, self.timeout).triples)
            add(topic_page(slug), f"topic {slug}", self.topic_page(topic, triples))
        for view in plain_views:
            triples = list(run_view(self.backend, view, None, self.timeout).triples)
            add(view_page(view.name), f"view {view.name}", self.view_page(view, triples))
        for record_id in sorted(self.stories, key=natural_key):
            add(record_page(record_id), f"record {record_id}", self.record_page(self.stories[record_id]))
        return self.diagrams.fill(pages)

    def index_page(self, views: list[Any]) -> str:
        anthology = self.anthology
        topics = anthology.topics
        filed = sum(len(self.practices_of(t)) for t in topics)
        body = [
            f"<h1>{esc(self.scheme_title)}</h1>",
            f'<p class="lead">{linked(self.scheme_description, anthology)}</p>',
            f"<p>{filed} of {self.registry_size} SOTA documents in {len(topics)} "
            f"topic{'s' if len(topics) != 1 else ''}; {len(anthology.ids('paper'))} papers and "
            f"{len(anthology.ids('ADR'))} decision records.</p>",
            "<h2>Topics</h2>",
            "<table>\n<thead><tr><th>Topic</th><th>Scope</th><th>Practices</th></tr></thead>\n<tbody>",
        ]
        for topic in topics:
            scope = anthology.facts.text(topic, v.SCOPE_NOTE) or ""
            body.append(
                f"<tr><td>{link(topic_page(anthology.slug(topic)), self.topic_name(topic))}</td>"
                f'<td>{linked(scope, anthology)}</td><td class="num">{len(self.practices_of(topic))}</td></tr>'
            )
        body.append("</tbody>\n</table>")
        rejected = [i for i in anthology.ids("practice") if self.stories[i].status == "Rejected"]
        if rejected:
            body += [
                "<h2>Rejected practices</h2>",
                "<p>Each was rejected for a reason, which often names the record that carries what survived.</p>",
                "<table>\n<thead><tr><th>#</th><th>Title</th><th>The reason names</th></tr></thead>\n<tbody>",
            ]
            for record_id in rejected:
                story = self.stories[record_id]
                names = ", ".join(link(self._page_of_id(r.id), r.id) for r in story.reason_names) or "–"
                body.append(
                    f'<tr class="rejected"><td class="id">{link(record_page(record_id), record_id)}</td>'
                    f"<td>{linked(story.title, anthology)}</td><td>{names}</td></tr>"
                )
            body.append("</tbody>\n</table>")
        if views:
            body.append("<h2>Views</h2>\n<ul>")
            for view in views:
                body.append(f"<li>{link(view_page(view.name), view.name)} — {esc(view.summary)}</li>")
            body.append("</ul>")
        adr_rows = [
            f'<tr><td class="id">{link(record_page(record_id), record_id)}</td>'
            f"<td>{status_badge(story.status)}</td>"
            f"<td>{linked(story.title, anthology)}</td><td>{linked(story.summary, anthology)}</td></tr>"
            for record_id, story in ((i, self.stories[i]) for i in anthology.ids("ADR"))
        ]
        body += _table("Decision records", ["#", "Status", "Title", "Summary"], adr_rows)
        # each column what the graph says of it: a paper without authors has an empty Authors cell
        paper_rows = [
            f'<tr><td class="id">{link(record_page(record_id), record_id)}</td>'
            f"<td>{linked(story.title, anthology)}</td><td>{esc(story.authors or '')}</td>"
            f'<td>{esc(story.year or "")}</td><td class="num">{len(story.cited_by)}</td></tr>'
            for record_id, story in ((i, self.stories[i]) for i in anthology.ids("paper"))
        ]
        body += _table("Papers", ["#", "Title", "Authors", "Year", "Cited by"], paper_rows)
        return page_html(self.scheme_title, "\n".join(body))

    def _page_of_id(self, record_id: str) -> str | None:
        return record_page(record_id) if self.anthology.kind_of(record_id) else None

    def topic_page(self, topic: str, triples: list[Triple]) -> str:
        anthology = self.anthology
        name = self.topic_name(topic)
        scope = anthology.facts.text(topic, v.SCOPE_NOTE)
        practices = self.practices_of(topic)
        body = [f"<h1>{esc(name)}</h1>"]
        if scope:
            body.append(f'<p class="lead">{linked(scope, anthology)}</p>')
        body += [
            f'<p>{len(practices)} of {self.registry_size} SOTA documents. <a href="index.html">Back to the full '
            "index.</a></p>",
            '<table class="practices">',
            "<thead><tr><th>#</th><th>Title</th><th>Summary</th><th>Status</th></tr></thead>\n<tbody>",
        ]
        for record_id in practices:
            story = self.stories[record_id]
            status = status_badge(story.status) if story.status else ""
            if story.status_note:
                status += " — " + linked(story.status_note, anthology)
            if story.reason:
                status += " — " + linked(story.reason, anthology)
            row_class = ' class="rejected"' if story.status == "Rejected" else ""
            body.append(
                f'<tr{row_class}><td class="id">{link(record_page(record_id), record_id)}'
                f"{esc(self.version_label(record_id))}</td><td>{linked(story.title, anthology)}</td>"
                f"<td>{linked(story.summary, anthology)}</td><td>{status}</td></tr>"
            )
        body.append("</tbody>\n</table>")
        body += [
            "<h2>Diagram</h2>",
            self.diagrams.placeholder(
                triples,
                f"topic {anthology.slug(topic)}",
                f"sotakg export view topic -p topic={anthology.slug(topic)} -o topic.svg",
            ),
            _legend(),
        ]
        crumbs = [("index.html", "Index"), (None, name)]
        return page_html(name, "\n".join(body), crumbs)

    def view_page(self, view: Any, triples: list[Triple]) -> str:
        body = [
            f'<h1>View: <span class="id">{esc(view.name)}</span></h1>',
            f'<p class="lead">{esc(view.summary)}</p>',
        ]
        if view.description:
            body.append(f"<p>{linked(view.description, self.anthology)}</p>")
        body += [
            self.diagrams.placeholder(triples, view.name, f"sotakg export view {view.name} -o {view.name}.svg"),
            _legend(),
            f'<p class="muted">The same view from the command line: <code>sotakg export view {esc(view.name)} '
            "--format mermaid</code> (or ttl, nt, jsonld, dot, svg).</p>",
        ]
        crumbs = [("index.html", "Index"), (None, f"view {view.name}")]
        return page_html(f"view {view.name}", "\n".join(body), crumbs)

    def record_page(self, story: Provenance) -> str:
        render: Callable[[Provenance], tuple[str, list[str]]] = {
            "practice": self._practice,
            "paper": self._paper,
            "ADR": self._adr,
        }[story.kind]
        heading, body = render(story)
        named_by = ref_list(story.named_by, self.anthology)
        if named_by:
            body += ["<h2>Named in the rejection reasons of</h2>", named_by]
        iri = v.record_iri(story.id)
        body += [
            "<h2>Neighbourhood</h2>",
            self.diagrams.placeholder(self.neighbourhoods.of(iri), story.id),
            _legend(),
        ]
        crumbs: list[tuple[str | None, str]] = [("index.html", "Index")]
        topic = v.topic_iri(story.topic) if story.topic else None
        if topic and topic in self.anthology.topics:
            crumbs.append((topic_page(story.topic or ""), story.topic_label or story.topic or ""))
        crumbs.append((None, story.id))
        title = f"{story.id} — {heading}" if heading else story.id
        h1 = f'<h1><span class="id">{esc(story.id)}</span> {esc(heading)}</h1>'
        return page_html(title, "\n".join([h1, *body]), crumbs)

    def _topic_link(self, story: Provenance) -> str:
        if not story.topic:
            return ""
        topic = v.topic_iri(story.topic)
        href = topic_page(story.topic) if topic in self.anthology.topics else None
        return link(href, story.topic_label or story.topic)

    def _practice(self, story: Provenance) -> tuple[str, list[str]]:
        anthology = self.anthology
        versions = " → ".join(f"v{n} (current)" if n == story.current_version else f"v{n}" for n in story.versions)
        governing = ", ".join(self._governance(g) for g in story.governed_by)
        body = [
            facts_list(
                [
                    (
                        "Status",
                        status_badge(story.status)
                        + (f" — {linked(story.status_note, anthology)}" if story.status_note else ""),
                    ),
                    ("Versions", esc(versions)),
                    ("Topic", self._topic_link(story)),
                    ("Summary", linked(story.summary, anthology)),
                    ("Filing governed by", governing),
                ]
            )
        ]
        if story.reason:
            body += [
                "<h2>Why it was rejected</h2>",
                f'<blockquote class="reason">{linked(story.reason, anthology)}</blockquote>',
            ]
        if story.reason_names:
            body += ["<h2>The reason names</h2>", ref_list(story.reason_names, anthology)]
        count = len(story.papers)
        body.append(f"<h2>Attributed to {count} paper{'s' if count != 1 else ''}</h2>")
        concerns = "its rejection reason concerns this source: "
        body.append(
            ref_list(story.papers, anthology, show_kind=False, quote_intro=concerns)
            or '<p class="muted">The page attributes it to no paper.</p>'
        )
        return story.title or "", body

    def _governance(self, governance: Governance) -> str:
        if governance.cyclic:
            return (
                f"{link(self._page_of_id(governance.named.id), governance.named.id)} ({esc(governance.cycle_note())})"
            )
        in_force = governance.in_force
        text = link(self._page_of_id(in_force.id), in_force.id)
        earlier = [r for r in governance.chain if r.id != in_force.id]
        notes = []
        if earlier:
            notes.append("superseding " + ", ".join(link(self._page_of_id(r.id), r.id) for r in earlier))
        if governance.named.id != in_force.id:
            notes.append("the registry still names " + link(self._page_of_id(governance.named.id), governance.named.id))
        return f"{text} ({'; '.join(notes)})" if notes else text

    def _paper(self, story: Provenance) -> tuple[str, list[str]]:
        who = story.authors or "unknown authors"
        heading = story.title or (f"{who} ({story.year})" if story.year else who)
        arxiv = ""
        arxiv_id = arxiv_with_version(story)
        if arxiv_id:
            arxiv = f'<a href="https://arxiv.org/abs/{esc(arxiv_id)}" rel="noopener">arXiv:{esc(arxiv_id)}</a>'
        body = [
            facts_list(
                [
                    ("Title", esc(story.title or "")),
                    ("Authors", esc(story.authors or "")),
                    ("Year", esc(story.year or "")),
                    ("arXiv", arxiv),
                    ("URL", external_link(story.url) if story.url else ""),
                    ("Locator (as written; not readable)", esc(story.locator or "")),
                    ("Topic", self._topic_link(story)),
                ]
            )
        ]
        count = len(story.cited_by)
        body.append(f"<h2>{count} practice{'s' if count != 1 else ''} attributed to it</h2>")
        body.append(ref_list(story.cited_by, self.anthology, show_kind=False) or '<p class="muted">No practice.</p>')
        return heading, body

    def _adr(self, story: Provenance) -> tuple[str, list[str]]:
        chain = " → ".join(
            link(self._page_of_id(r.id), r.id) + (f" ({esc(r.status)})" if r.status else "") for r in story.chain
        )
        governs = ", ".join(link("index.html", name) for name in story.governs)
        body = [
            facts_list(
                [
                    ("Status", status_badge(story.status)),
                    ("Summary", linked(story.summary, self.anthology)),
                    (
                        "Supersession chain",
                        chain if len(story.chain) > 1 else '<span class="muted">not recorded</span>',
                    ),
                    ("Governs", governs),
                    ("Cited in the description of", ", ".join(link("index.html", name) for name in story.cited_in)),
                ]
            )
        ]
        return story.title or "Decision record", body


def _legend() -> str:
    return '<ul class="legend">\n' + "\n".join(f"<li>{esc(line)}</li>" for line in LEGEND) + "\n</ul>"


# ------------------------------------------------------------------------------------------ writing


def site_pages(backend: Backend, graphviz: bool | None = None, timeout: float = DEFAULT_TIMEOUT) -> dict[str, str]:
    """Every page of the site by file name. ``graphviz`` says whether to draw diagrams as SVG (default:
    when Graphviz's dot is installed) or show their Mermaid source."""
    from .diagrams import graphviz_available

    anthology = read_site_graph(backend, timeout)
    draw = graphviz_available() if graphviz is None else graphviz
    return SiteBuilder(backend, anthology, draw, timeout).build()


def build_site(
    backend: Backend, folder: Path, graphviz: bool | None = None, timeout: float = DEFAULT_TIMEOUT
) -> SiteReport:
    """Write the site into ``folder``: changed pages atomically, unchanged ones left alone, and pages
    the previous build wrote that no longer exist removed (only those, as listed in ``.sotakg-site``)."""
    from .diagrams import graphviz_available

    check_output_folder(folder)  # before anything in it is read, or any page made
    draw = graphviz_available() if graphviz is None else graphviz
    pages = site_pages(backend, draw, timeout)
    previous = _manifest(folder)
    written = write_files(folder, {**pages, MANIFEST: "".join(f"{name}\n" for name in sorted(pages))})
    report = SiteReport(written.written, written.unchanged, written.removed)
    if graphviz is None and not draw:
        report.notes.append(GRAPHVIZ_FALLBACK_NOTE)
    report.written = [name for name in report.written if name != MANIFEST]
    report.unchanged = [name for name in report.unchanged if name != MANIFEST]
    for name in sorted(previous - set(pages)):
        stale = folder / name
        if stale.is_file() and not stale.is_symlink():
            stale.unlink()
            report.removed.append(name)
    return report


GRAPHVIZ_FALLBACK_NOTE = (
    "Graphviz's dot is not installed, so the site's diagrams are Mermaid source instead of drawings: "
    "install the graphviz package (for example: apt-get install graphviz) and export again, "
    "or pass --mermaid to choose Mermaid source"
)


@dataclass
class SiteReport(WriteReport):
    """What ``build_site`` wrote, and ``notes`` for the person running it (the Graphviz fallback)."""

    notes: list[str] = field(default_factory=list)


#: The largest list of pages read back (``.sotakg-site``): far more pages than any anthology has.
MAX_MANIFEST_BYTES = 16 * 1024 * 1024


def _manifest(folder: Path) -> set[str]:
    """The pages the last build wrote; only plain page names count (a tampered list removes nothing else).
    A list that is a link, a FIFO or a device, or larger than any list a build writes, is none: it is
    never read through, waited on or read without end."""
    listed = folder / MANIFEST
    try:
        if listed.is_symlink():
            return set()
        lines = read_bounded(listed, MAX_MANIFEST_BYTES).decode("utf-8").splitlines()
    except (FileNotFoundError, NotADirectoryError, UnicodeDecodeError, NotARegularFile, SourceTooLarge):
        return set()
    return {line for line in lines if _PAGE_NAME.fullmatch(line)}


def _table(heading: str, headers: list[str], rows: list[str]) -> list[str]:
    """An index-page section: a heading and a table of ``rows`` (already HTML), or nothing without rows."""
    if not rows:
        return []
    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    return [
        f"<h2>{esc(heading)}</h2>",
        f"<table>\n<thead><tr>{head}</tr></thead>\n<tbody>",
        *rows,
        "</tbody>\n</table>",
    ]
