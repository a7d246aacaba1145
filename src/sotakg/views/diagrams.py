"""Diagrams of graph views: Mermaid (renders on GitHub and in Markdown previews) and Graphviz DOT.

A view's triples are read as nodes and edges. Nodes are the records and versions the triples talk
about, labelled by identifier and a short title and styled by kind (practice, version, paper, ADR,
topic) and status (a rejected practice is red and dashed, a proposed one amber and dotted, a
superseded ADR grey and dashed). Edges are the relations between records, labelled by what they say
(cites, names, revises, replaces, filed under, current version). Literal-valued statements (titles,
statuses, years) label the nodes instead of becoming nodes. Output is sorted, so the same triples
always give the same text.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import GraphvizMissing, SotakgError
from ..graph import vocab as v

if TYPE_CHECKING:
    from pyoxigraph import Triple

#: Characters of a title shown in a node before it is cut with an ellipsis.
TITLE_WIDTH = 40
#: The longest title a tooltip shows. Graphviz refuses a quoted string or HTML attribute past 16,384
#: characters (the whole diagram, not the node), and escaping can make a title six times longer.
TOOLTIP_WIDTH = 2000
ELLIPSIS = "…"
GRAPHVIZ_PACKAGE = "graphviz"
FONT = "Helvetica,Arial,sans-serif"

#: Relations drawn as edges, with their labels. isReplacedBy is drawn as the replaces it mirrors.
EDGE_LABELS: dict[str, str] = {
    v.CITES: "cites",
    v.REASON_NAMES: "names",
    v.WAS_REVISION_OF: "revises",
    v.REPLACES: "replaces",
    v.FILED_UNDER: "filed under",
    v.CURRENT_VERSION: "current version",
    v.GOVERNED_BY: "governed by",
    v.IN_SCHEME: "in scheme",
}
_INVERSE = {v.IS_REPLACED_BY: v.REPLACES}

#: Statements a view brings along so that its nodes can be labelled and styled.
LABEL_PREDICATES = (
    v.TYPE,
    v.IDENTIFIER,
    v.TITLE,
    v.HAS_STATUS,
    v.AUTHORS,
    v.YEAR,
    v.PREF_LABEL,
    v.SLUG,
    v.VERSION_NUMBER,
    v.IS_VERSION_OF,
)

KINDS = {
    v.TOPIC_CLASS: "topic",
    v.PRACTICE: "practice",
    v.PRACTICE_VERSION: "version",
    v.PAPER: "paper",
    v.ADR: "adr",
    v.TOPIC_SCHEME: "scheme",
}
KIND_ORDER = ("topic", "practice", "version", "paper", "adr", "scheme", "other")
#: Statuses worth saying in a node's label (the usual ones, Active and Accepted, go without saying).
NOTED_STATUSES = ("Proposed", "Rejected", "Superseded", "Deprecated")


@dataclass(frozen=True)
class Style:
    """How one class of node looks, in both renderers."""

    mermaid_shape: tuple[str, str]
    dot_shape: str
    fill: str
    stroke: str
    text: str = "#1a202c"
    dash: str | None = None  # "dashed" or "dotted"


STYLES: dict[str, Style] = {
    "topic": Style(("[[", "]]"), "folder", "#fffaf0", "#c05621"),
    "practice": Style(("(", ")"), "box", "#ebf4ff", "#2b6cb0"),
    "practiceProposed": Style(("(", ")"), "box", "#fffbea", "#b7791f", dash="dotted"),
    "practiceRejected": Style(("(", ")"), "box", "#fde8e8", "#c53030", "#9b2c2c", dash="dashed"),
    "version": Style(("([", "])"), "ellipse", "#f7fafc", "#718096"),
    "paper": Style(("[", "]"), "note", "#f0fff4", "#2f855a"),
    "adr": Style(("{{", "}}"), "hexagon", "#faf5ff", "#6b46c1"),
    "adrSuperseded": Style(("{{", "}}"), "hexagon", "#edf2f7", "#718096", "#4a5568", dash="dashed"),
    "scheme": Style(("[(", ")]"), "cylinder", "#fffaf0", "#c05621"),
    "other": Style(("[", "]"), "box", "#ffffff", "#4a5568"),
}

#: How each relation's edge is drawn: Mermaid arrow, and DOT attributes.
EDGE_STYLES: dict[str, tuple[str, dict[str, str]]] = {
    "names": ("-.->", {"style": "dashed", "color": "#c53030", "fontcolor": "#9b2c2c"}),
    "replaces": ("==>", {"penwidth": "2", "color": "#6b46c1", "fontcolor": "#553c9a"}),
    "revises": ("-->", {"color": "#4a5568"}),
}
_PLAIN_EDGE = ("-->", {"color": "#4a5568"})

_MERMAID_WORDS = {"end", "graph", "flowchart", "subgraph", "style", "class", "classdef", "click", "linkstyle"}


@dataclass(frozen=True)
class Node:
    """A record (or version, topic ...) in a diagram. ``name`` is its identifier in the diagram's
    source; ``heading`` and ``title`` are the two lines of its label; ``style`` a key of STYLES."""

    iri: str
    name: str
    kind: str
    heading: str
    title: str | None
    full_title: str | None
    status: str | None
    style: str


@dataclass(frozen=True)
class Edge:
    source: str
    relation: str
    target: str


@dataclass(frozen=True)
class Diagram:
    """Nodes and edges in drawing order."""

    nodes: tuple[Node, ...]
    edges: tuple[Edge, ...]

    def node(self, name: str) -> Node:
        return next(n for n in self.nodes if n.name == name)


# ------------------------------------------------------------------------------------------ reading


def natural_key(text: str) -> tuple[Any, ...]:
    """Sort key putting SOTA-9 before SOTA-10."""
    return tuple((0, int(part)) if part.isdigit() else (1, part) for part in re.split(r"(\d+)", text) if part)


def short_title(text: str, width: int = TITLE_WIDTH) -> str:
    """``text`` on one line, cut at a word boundary with an ellipsis when longer than ``width``."""
    flat = " ".join(text.split())
    if len(flat) <= width:
        return flat
    cut = flat[: width - 1]
    space = cut.rfind(" ")
    if space >= width * 2 // 3:
        cut = cut[:space]
    return cut.rstrip(" ,;:—-") + ELLIPSIS


def _local(iri: str) -> str:
    """The identifying end of an IRI: ``SOTA-049`` of id:SOTA-049, the slug of a topic, else the last
    segment of the path (or the IRI itself when it has none)."""
    for namespace in (v.ID, v.TOPIC, v.SOTA):
        if iri.startswith(namespace):
            return iri[len(namespace) :]
    return re.split(r"[/#]", iri.rstrip("/#"))[-1] or iri


def diagram_from_triples(triples: Iterable[Triple]) -> Diagram:
    """Read a view's triples as a diagram: IRIs that are subjects, or objects of a relation, are
    nodes; relations (EDGE_LABELS) are edges; the other statements label and style the nodes."""
    from pyoxigraph import Literal, NamedNode

    facts: dict[str, dict[str, list[Any]]] = defaultdict(lambda: defaultdict(list))
    edges: set[tuple[str, str, str]] = set()
    seen: list[str] = []
    for triple in triples:
        subject, predicate, value = triple.subject, triple.predicate.value, triple.object
        if not isinstance(subject, NamedNode):
            continue
        seen.append(subject.value)
        if isinstance(value, NamedNode) and predicate in EDGE_LABELS:
            edges.add((subject.value, EDGE_LABELS[predicate], value.value))
            seen.append(value.value)
        elif isinstance(value, NamedNode) and predicate in _INVERSE:
            edges.add((value.value, EDGE_LABELS[_INVERSE[predicate]], subject.value))
            seen.append(value.value)
        elif isinstance(value, NamedNode) and predicate == v.HAS_STATUS:
            facts[subject.value][predicate].append(_local(value.value))  # a concept: its name
        elif isinstance(value, NamedNode | Literal):
            facts[subject.value][predicate].append(value.value)  # a literal status as written

    def first(iri: str, predicate: str) -> str | None:
        values = sorted(facts.get(iri, {}).get(predicate, []))
        return values[0] if values else None

    drafts = []
    for iri in set(seen):
        types = facts.get(iri, {}).get(v.TYPE, [])
        kind = next((KINDS[t] for t in sorted(types) if t in KINDS), "other")
        drafts.append((iri, kind))
    names: dict[str, str] = {}
    taken: set[str] = set()  # the names given so far, kept as they are given: a set per node was quadratic
    nodes: list[Node] = []
    for iri, kind in sorted(drafts, key=lambda d: (KIND_ORDER.index(d[1]), natural_key(_local(d[0])), d[0])):
        names[iri] = _unique_name(iri, kind, taken)
        taken.add(names[iri])
        nodes.append(_node(iri, kind, names[iri], first))
    order = {node.iri: index for index, node in enumerate(nodes)}
    drawn = sorted(edges, key=lambda e: (order[e[0]], e[1], order[e[2]]))
    return Diagram(tuple(nodes), tuple(Edge(names[s], relation, names[t]) for s, relation, t in drawn))


def _unique_name(iri: str, kind: str, taken: set[str]) -> str:
    local = _local(iri)
    base = re.sub(r"[^A-Za-z0-9_]", "_", f"topic_{local}" if kind == "topic" else local).strip("_") or "node"
    if base.lower() in _MERMAID_WORDS or not base[0].isalpha() or base[0] in "ox":
        base = f"n_{base}"
    name, count = base, 1
    while name in taken:
        count += 1
        name = f"{base}_{count}"
    return name


def _node(iri: str, kind: str, name: str, first: Any) -> Node:
    identifier = first(iri, v.IDENTIFIER) or _local(iri)
    status = first(iri, v.HAS_STATUS)
    title = first(iri, v.TITLE)
    heading = identifier
    if kind == "paper" and title is None:
        authors, year = first(iri, v.AUTHORS), first(iri, v.YEAR)
        title = f"{authors} ({year})" if authors and year else authors or year
    elif kind == "topic":
        heading = first(iri, v.SLUG) or identifier
        title = first(iri, v.PREF_LABEL) or title
    elif kind == "version":
        practice = first(iri, v.IS_VERSION_OF)
        number = first(iri, v.VERSION_NUMBER)
        match = re.fullmatch(r"(.+)-v(\d+)", identifier)
        base = _local(practice) if practice else (match.group(1) if match else identifier)
        if number is None and match:
            number = match.group(2)
        heading = f"{base} v{number}" if number else identifier
    if status in NOTED_STATUSES and kind in ("practice", "adr"):
        heading = f"{heading} ({status})"
    style = kind
    if kind == "practice" and status in ("Proposed", "Rejected"):
        style = f"practice{status}"
    elif kind == "adr" and status in ("Superseded", "Deprecated"):
        style = "adrSuperseded"
    return Node(
        iri=iri,
        name=name,
        kind=kind,
        heading=heading,
        title=short_title(title) if title else None,
        full_title=short_title(title, TOOLTIP_WIDTH) if title else None,
        status=status,
        style=style,
    )


def term_value(term: Any) -> str:
    """An IRI's or literal's value (a quoted triple has none: its text stands in)."""
    return str(getattr(term, "value", term))


class Neighbourhoods:
    """The triples of one record's diagram, for each record of a graph (indexed once, so drawing
    every record of the site costs little): the relations it takes part in (cites, names, filed
    under, replaces, governed by), its version chain when it was revised, and the statements that
    label every node they reach."""

    def __init__(self, triples: Iterable[Triple]):
        self._relations: dict[str, list[Triple]] = defaultdict(list)  # by subject and by object
        self._labels: dict[str, list[Triple]] = defaultdict(list)  # by subject
        self._versions: dict[str, list[str]] = defaultdict(list)  # practice -> its versions
        self._revisions: dict[str, list[Triple]] = defaultdict(list)  # version -> its wasRevisionOf
        self._current: dict[str, list[Triple]] = defaultdict(list)  # practice -> its currentVersion
        relations = set(EDGE_LABELS) | set(_INVERSE)
        labels = set(LABEL_PREDICATES)
        for triple in triples:
            subject, predicate, value = term_value(triple.subject), triple.predicate.value, term_value(triple.object)
            if predicate in labels:
                self._labels[subject].append(triple)
            if predicate == v.IS_VERSION_OF:
                self._versions[value].append(subject)
            elif predicate == v.WAS_REVISION_OF:
                self._revisions[subject].append(triple)
            elif predicate == v.CURRENT_VERSION:
                self._current[subject].append(triple)
            elif predicate in relations:
                self._relations[subject].append(triple)
                if value != subject:
                    self._relations[value].append(triple)

    def of(self, iri: str) -> list[Triple]:
        """The triples of the diagram of the resource ``iri``."""
        chosen = list(self._relations.get(iri, []))
        revisions = [t for version in self._versions.get(iri, []) for t in self._revisions.get(version, [])]
        if revisions:
            chosen += self._current.get(iri, []) + revisions
        nodes = {iri} | {term_value(t.subject) for t in chosen} | {term_value(t.object) for t in chosen}
        return chosen + [t for node in sorted(nodes) for t in self._labels.get(node, [])]


def neighbourhood(triples: Iterable[Triple], iri: str) -> list[Triple]:
    """The triples of the diagram of one record (see Neighbourhoods)."""
    return Neighbourhoods(triples).of(iri)


# ------------------------------------------------------------------------------------------ Mermaid


def _mermaid_text(text: str) -> str:
    """Text inside a quoted Mermaid label: quotes and markup characters as Mermaid entity codes (``%``
    too: Mermaid reads ``%%{…}%%`` anywhere as a directive that reconfigures the diagram)."""
    replacements = {"#": "#35;", '"': "#quot;", "<": "#lt;", ">": "#gt;", "&": "#amp;", "`": "#96;", "%": "#37;"}
    return "".join(replacements.get(c, c) for c in text)


def to_mermaid(diagram: Diagram, title: str | None = None) -> str:
    """A Mermaid flowchart of the diagram (``flowchart LR``), ending in a newline. A crowded topic
    (``crowded_topic``) has its practices by status and its papers in one subgraph each, with one
    "filed under" arrow per subgraph."""
    lines = [f"%% sotakg view: {' '.join(title.split())}"] if title else []
    lines.append("flowchart LR")

    def declaration(node: Node, indent: str = "  ") -> str:
        opening, closing = STYLES[node.style].mermaid_shape
        label = _mermaid_text(node.heading)
        if node.title:
            label += "<br/>" + _mermaid_text(node.title)
        return f'{indent}{node.name}{opening}"{label}"{closing}'

    topic = crowded_topic(diagram)
    edges = list(diagram.edges)
    if topic is None:
        lines += [declaration(node) for node in diagram.nodes]
    else:
        grouped: set[str] = set()
        group_edges = []
        for index, (label, _style, members) in enumerate(_topic_groups(diagram, topic)):
            name = f"group_{index}"
            lines.append(f'  subgraph {name}["{_mermaid_text(label)}"]')
            lines += [declaration(node, "    ") for node in members]
            lines.append("  end")
            names = {node.name for node in members}
            if any(e.relation == "filed under" and e.target == topic.name and e.source in names for e in edges):
                group_edges.append(Edge(name, "filed under", topic.name))
            grouped |= names
        lines += [declaration(node) for node in diagram.nodes if node.name not in grouped]
        edges = group_edges + [
            e for e in edges if not (e.relation == "filed under" and e.target == topic.name and e.source in grouped)
        ]
    for edge in edges:
        arrow = EDGE_STYLES.get(edge.relation, _PLAIN_EDGE)[0]
        lines.append(f"  {edge.source} {arrow}|{edge.relation}| {edge.target}")
    used: dict[str, list[str]] = defaultdict(list)
    for node in diagram.nodes:
        used[node.style].append(node.name)
    for style_name in STYLES:
        if style_name not in used:
            continue
        style = STYLES[style_name]
        dash = {"dashed": ",stroke-dasharray:6 4", "dotted": ",stroke-dasharray:2 3"}.get(style.dash or "", "")
        lines.append(f"  classDef {style_name} fill:{style.fill},stroke:{style.stroke},color:{style.text}{dash}")
    for style_name in STYLES:
        if style_name in used:
            lines.append(f"  class {','.join(used[style_name])} {style_name}")
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------------------------------ DOT


def _dot_string(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", " ") + '"'


def _dot_attributes(attributes: Mapping[str, str]) -> str:
    return ", ".join(f"{key}={_dot_string(value)}" for key, value in attributes.items())


def to_dot(diagram: Diagram, title: str | None = None, links: Mapping[str, str] | None = None) -> str:
    """A Graphviz digraph of the diagram. ``links`` maps node IRIs to URLs the drawn nodes link to
    (in SVG output). Every node has a tooltip (its id and full title on two lines). A diagram with many
    records filed under one topic is drawn grouped (see ``crowded_topic``)."""
    name = " ".join((title or "view").split())
    lines = [
        f"digraph {_dot_string(name)} {{",
        f"  graph [rankdir=LR, nodesep=0.25, ranksep=0.5, fontname={_dot_string(FONT)}];",
        f'  node [fontname={_dot_string(FONT)}, fontsize=10, penwidth=1.2, margin="0.12,0.06"];',
        f"  edge [fontname={_dot_string(FONT)}, fontsize=9, arrowsize=0.7];",
    ]
    topic = crowded_topic(diagram)
    ends: dict[str, str] = {}  # node name -> how an edge names it: "table":"port" for a grouped record
    edges = list(diagram.edges)
    if topic is None:
        lines += [_dot_node(node, links) for node in diagram.nodes]
    else:
        grouped: set[str] = set()
        practice_tables = []
        for index, (label, style, members) in enumerate(_topic_groups(diagram, topic)):
            table = f"group_{index}"
            if style != "paper":
                practice_tables.append(_dot_string(table))
            lines.append(_dot_table(table, label, style, members, links))
            for node in members:
                ends[node.name] = f"{_dot_string(table)}:{_dot_string(node.name)}"
                grouped.add(node.name)
            filed = {edge.source for edge in edges if edge.relation == "filed under" and edge.target == topic.name}
            if filed & {node.name for node in members}:
                # One "filed under" arrow per group instead of one per record.
                lines.append(
                    f'  {_dot_string(table)} -> {_dot_string(topic.name)} [label="filed under", color="#4a5568"];'
                )
        # The practice tables stand in one column, the papers they cite to their right.
        lines.append(f"  {{ rank=same; {' '.join(practice_tables)} }}")
        edges = [
            e for e in edges if not (e.relation == "filed under" and e.target == topic.name and e.source in grouped)
        ]
        lines += [_dot_node(node, links) for node in diagram.nodes if node.name not in grouped]
    for edge in edges:
        attributes = {"label": edge.relation, **EDGE_STYLES.get(edge.relation, _PLAIN_EDGE)[1]}
        source = ends.get(edge.source, _dot_string(edge.source))
        target = ends.get(edge.target, _dot_string(edge.target))
        if edge.source in ends or edge.target in ends:
            del attributes["label"]  # the tables' headings and the edges' colours say it; labels would crowd
            if edge.relation == "cites":
                source, target = f"{source}:e", f"{target}:w"
            else:
                attributes["constraint"] = "false"
        lines.append(f"  {source} -> {target} [{_dot_attributes(attributes)}];")
    lines.append("}")
    return "\n".join(lines) + "\n"


#: Records filed under one topic past which its diagram is drawn grouped.
CROWDED = 12
_GROUPS = (
    ("practice", "Active practices"),
    ("practiceProposed", "Proposed practices"),
    ("practiceRejected", "Rejected practices"),
)


def crowded_topic(diagram: Diagram) -> Node | None:
    """The topic node that more than CROWDED records are filed under, if any. One node and one arrow
    per record would make a drawing many times taller than the page is wide, so such a diagram lists
    its practices by status and its papers in one table each (a row per record, linked and with its
    tooltip), with one "filed under" arrow per table and the citations drawn between rows."""
    counts: dict[str, int] = defaultdict(int)
    for edge in diagram.edges:
        if edge.relation == "filed under":
            counts[edge.target] += 1
    crowded = [name for name, count in counts.items() if count > CROWDED]
    return diagram.node(sorted(crowded)[0]) if crowded else None


def _topic_groups(diagram: Diagram, topic: Node) -> list[tuple[str, str, list[Node]]]:
    """(heading, style, nodes) of each non-empty group of a grouped diagram, in drawing order."""
    groups: list[tuple[str, str, list[Node]]] = []
    for style, label in _GROUPS:
        members = [node for node in diagram.nodes if node.style == style]
        if members:
            groups.append((f"{label} ({len(members)})", style, members))
    papers = [node for node in diagram.nodes if node.kind == "paper"]
    if papers:
        groups.append((f"Papers ({len(papers)})", "paper", papers))
    return groups


#: Characters XML 1.0 cannot hold, which Graphviz's HTML-like labels are parsed as: shown as U+FFFD.
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def _html(text: str) -> str:
    """Text inside a Graphviz HTML-like label or attribute; line breaks as character references, and
    a character XML cannot hold (U+FFFE) as U+FFFD, or dot refuses the whole diagram."""
    escaped = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")
    return _NOT_XML.sub("\ufffd", escaped).replace("\n", "&#10;")


def _dot_table(name: str, heading: str, style_name: str, members: list[Node], links: Mapping[str, str] | None) -> str:
    """One group of records as a table node: a heading row, then a row per record (its port is the
    record's node name), linked to its page and with a tooltip."""
    style = STYLES[style_name]
    rows = [
        f'<TR><TD BGCOLOR="{style.stroke}" ALIGN="LEFT"><FONT COLOR="#ffffff"><B>{_html(heading)}</B></FONT></TD></TR>'
    ]
    for node in members:
        # The table's heading says the status; each row says the id and the title.
        identifier = node.heading.removesuffix(f" ({node.status})")
        text = identifier + (f"  {node.title}" if node.title else "")
        tooltip = node.heading + (f"\n{node.full_title}" if node.full_title else "")
        link = f' HREF="{_html(links[node.iri])}" TARGET="_top"' if links and node.iri in links else ""
        rows.append(
            f'<TR><TD PORT="{node.name}" ALIGN="LEFT"{link} TOOLTIP="{_html(tooltip)}">'
            f'<FONT COLOR="{style.text}">{_html(text)}</FONT></TD></TR>'
        )
    table = (
        f'<TABLE BORDER="1" CELLBORDER="0" CELLSPACING="0" CELLPADDING="3" COLOR="{style.stroke}" '
        f'BGCOLOR="{style.fill}">{"".join(rows)}</TABLE>'
    )
    return f"  {_dot_string(name)} [shape=plain, label=<{table}>];"


def _dot_node(node: Node, links: Mapping[str, str] | None) -> str:
    style = STYLES[node.style]
    styles = ["filled"] + (["rounded"] if style.dot_shape == "box" else []) + ([style.dash] if style.dash else [])
    label = node.heading + (f"\n{node.title}" if node.title else "")
    attributes = {
        "shape": style.dot_shape,
        "style": ",".join(styles),
        "fillcolor": style.fill,
        "color": style.stroke,
        "fontcolor": style.text,
    }
    if links and node.iri in links:
        attributes["URL"] = links[node.iri]
        attributes["target"] = "_top"
    # An explicit tooltip with a real line break: without one, Graphviz shows the label's "\n" escape.
    tooltip = node.heading + (f"\n{node.full_title}" if node.full_title else "")
    return (
        f"  {_dot_string(node.name)} [label={_dot_label(label)}, {_dot_attributes(attributes)}, "
        f"tooltip={_dot_tooltip(tooltip)}];"
    )


def _dot_tooltip(text: str) -> str:
    r"""A quoted DOT tooltip, lines separated by ``\n`` (Graphviz makes it a real line break, &#10;).
    Graphviz reads a tooltip's escapes (``\N``, ``\G``, ...) before it undoes ``\\``, so each
    backslash of the text is written four times; ``&`` as ``&amp;``, since it reads references too."""
    lines = (line.replace("&", "&amp;").replace("\\", "\\\\\\\\").replace('"', '\\"') for line in text.split("\n"))
    return '"' + "\\n".join(lines) + '"'


def _dot_label(text: str) -> str:
    r"""A DOT label: quoted, lines separated by DOT's centred line break ``\n``; ``&`` as ``&amp;``
    (Graphviz reads ``&amp;``, ``&#38;`` in a label as the characters they stand for)."""
    return '"' + "\\n".join(_dot_string(line.replace("&", "&amp;"))[1:-1] for line in text.split("\n")) + '"'


# ------------------------------------------------------------------------------------------ SVG


def graphviz_available() -> bool:
    """Whether Graphviz's ``dot`` is on the PATH."""
    return shutil.which("dot") is not None


#: The most links a diagram has before laying it out takes Graphviz minutes and no page shows it
#: legibly (the citations view of 12,000 records: 6,000 links, 42 s; the time grows faster than the
#: links): a site page says so instead of drawing it, ``export view`` draws it after saying so.
MAX_DRAWN_LINKS = 1500
#: Seconds a ``dot`` run of a site's batch may take: its diagrams are at most MAX_DRAWN_LINKS each.
SITE_RENDER_TIMEOUT = 120.0

#: The DOT text one ``dot`` process is given at most: a site's diagrams are drawn by several processes
#: (as many at once as there are cores), each within the time limit, however large the site.
RENDER_BATCH_CHARS = 1 << 20


def render_svgs(sources: list[str], timeout: float | None = SITE_RENDER_TIMEOUT) -> list[str]:
    """Each DOT source drawn as SVG, by few ``dot`` runs (dot starts slowly): consecutive sources in
    batches of about ``RENDER_BATCH_CHARS``, as many batches at once as there are cores, each within
    ``timeout`` seconds (None: as long as dot takes). GraphvizMissing, naming the package, when dot
    is not installed."""
    if not sources:
        return []
    dot = shutil.which("dot")
    if dot is None:
        raise GraphvizMissing(
            f"SVG output needs Graphviz's dot program, which is not installed; install the "
            f"{GRAPHVIZ_PACKAGE} package (for example: apt-get install {GRAPHVIZ_PACKAGE}), "
            f"or use --format dot or mermaid"
        )
    batches: list[list[str]] = [[]]
    size = 0
    for source in sources:
        if batches[-1] and size + len(source) > RENDER_BATCH_CHARS:
            batches.append([])
            size = 0
        batches[-1].append(source)
        size += len(source)
    if len(batches) == 1:
        return _render_batch(dot, batches[0], timeout)
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(min(len(batches), os.cpu_count() or 1)) as pool:
        drawn = list(pool.map(lambda batch: _render_batch(dot, batch, timeout), batches))
    return [document for documents in drawn for document in documents]


def _render_batch(dot: str, sources: list[str], timeout: float | None) -> list[str]:
    try:
        completed = subprocess.run(
            [dot, "-Tsvg"], input="".join(sources).encode("utf-8"), capture_output=True, timeout=timeout
        )
    except subprocess.TimeoutExpired:
        raise SotakgError(
            f"Graphviz's dot did not draw the diagrams within {timeout:g} seconds; "
            "--format dot or mermaid writes their source at once"
        ) from None
    except OSError as error:
        raise SotakgError(f"Graphviz's dot could not draw the diagram: {error.strerror or error}") from None
    if completed.returncode != 0:
        message = completed.stderr.decode("utf-8", "replace").strip()
        raise SotakgError(f"Graphviz's dot could not draw the diagram: {message}")
    output = completed.stdout.decode("utf-8")
    documents = [part for part in re.split(r"(?=<\?xml )", output) if part.strip()]
    if len(documents) != len(sources):
        raise SotakgError(f"Graphviz's dot drew {len(documents)} diagrams for {len(sources)} sources")
    return documents


def render_svg(source: str, timeout: float | None = None) -> str:
    """One DOT source drawn as an SVG document, however long dot takes unless ``timeout`` says."""
    return render_svgs([source], timeout)[0]
