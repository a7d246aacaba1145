"""``sotakg why ID``: one record's provenance told as readable text.

One query fetches the record's neighbourhood (its own statements, the records it cites or names, the
records that cite, name or reference it, its versions, its topic and the ADRs the data says govern the
topic scheme, with their supersession chains); the story is then read off those statements in Python.
So ``why`` costs one query on any backend.

The story says what the data says and nothing more: a fact the graph does not hold is "not
recorded", never a negative; a paper a practice cites is what the page attributes it to, and where
the practice's rejection reason names that paper the story quotes the reason's own words.
"""

from __future__ import annotations

import difflib
import re
import textwrap
from collections import defaultdict
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any

from ..errors import QueryFailed, RecordNotFound, UsageProblem
from ..graph import vocab as v
from .results import SelectResult
from .sparql import DEFAULT_TIMEOUT, Backend, run_query

_ID_FORM = re.compile(r"[A-Za-z][A-Za-z0-9]*-\d+(-v\d+)?")
_CHAIN = "(dcterms:replaces|^dcterms:replaces|dcterms:isReplacedBy|^dcterms:isReplacedBy)"

NEIGHBOURHOOD_QUERY = f"""
SELECT ?record ?s ?p ?o WHERE {{
  {{
    ?record (sota:reasonNames|cito:cites|sota:filedUnder|^dcterms:isVersionOf
             |^cito:cites|^sota:reasonNames|^sota:governedBy|^dcterms:references)? ?s .
  }}
  UNION {{ ?record ^cito:cites/sota:currentVersion ?s . }}
  UNION {{ ?record sota:filedUnder/skos:inScheme ?s . }}
  UNION {{ ?record {_CHAIN}* ?s . }}
  UNION {{ ?record sota:filedUnder/skos:inScheme/sota:governedBy/{_CHAIN}* ?s . }}
  ?s ?p ?o .
}}
"""

IDENTIFIERS_QUERY = """
SELECT ?id WHERE {
  ?record dcterms:identifier ?id ; a ?kind .
  VALUES ?kind { sota:Practice sota:Paper sota:ADR }
}
"""

KIND_NAMES = {v.PRACTICE: "practice", v.PAPER: "paper", v.ADR: "ADR", v.PRACTICE_VERSION: "version"}


# ------------------------------------------------------------------------------------------ facts


class Facts:
    """Statements grouped by subject IRI, with accessors that read values as text."""

    def __init__(self, result: SelectResult):
        self._by_subject: dict[str, dict[str, list[Any]]] = defaultdict(lambda: defaultdict(list))
        for row in result.dicts():
            subject, predicate, value = row.get("s"), row.get("p"), row.get("o")
            if subject is None or predicate is None or value is None:
                continue
            values = self._by_subject[str(getattr(subject, "value", subject))][
                str(getattr(predicate, "value", predicate))
            ]
            if value not in values:
                values.append(value)

    def __contains__(self, iri: str) -> bool:
        return iri in self._by_subject

    def all(self, iri: str, predicate: str) -> list[Any]:
        return list(self._by_subject.get(iri, {}).get(predicate, []))

    def text(self, iri: str, predicate: str) -> str | None:
        values = self.all(iri, predicate)
        return values[0].value if values else None

    def iris(self, iri: str, predicate: str) -> list[str]:
        return sorted(value.value for value in self.all(iri, predicate) if hasattr(value, "value"))

    def subjects(self, predicate: str, target: str) -> list[str]:
        """Subjects that state ``predicate target``."""
        return sorted(self._by_object.get((predicate, target), ()))

    @cached_property
    def _by_object(self) -> dict[tuple[str, str], set[str]]:
        # Made once, when first asked: looking through every subject for each question made a
        # site of 4,500 practices take minutes (each practice asks several).
        index: dict[tuple[str, str], set[str]] = defaultdict(set)
        for subject, props in self._by_subject.items():
            for predicate, values in props.items():
                for value in values:
                    target = getattr(value, "value", None)
                    if isinstance(target, str):
                        index[predicate, target].add(subject)
        return index

    def kind(self, iri: str) -> str | None:
        for type_iri in self.iris(iri, v.TYPE):
            if type_iri in KIND_NAMES:
                return KIND_NAMES[type_iri]
        return None

    def local(self, iri: str, predicate: str, namespace: str) -> str | None:
        """The local name under ``namespace`` of the IRI stated, or a literal's text exactly as written
        (a status written as an IRI's text is that text, not the concept)."""
        from pyoxigraph import NamedNode

        values = self.all(iri, predicate)
        if not values:
            return None
        value = values[0]
        if isinstance(value, NamedNode) and value.value.startswith(namespace):
            return value.value[len(namespace) :]
        return value.value


def _identifier(iri: str) -> str:
    return iri[len(v.ID) :] if iri.startswith(v.ID) else iri


# ------------------------------------------------------------------------------------------ the story


@dataclass(frozen=True)
class Ref:
    """A record mentioned in a story: its identifier, kind and a short description."""

    id: str
    kind: str | None
    status: str | None = None
    version: int | None = None
    label: str | None = None
    #: The words of a rejection reason about this record (the sentences naming it), when there are.
    quote: str | None = None


@dataclass(frozen=True)
class Governance:
    """An ADR the topic scheme names as governing filing (``named``), and the supersession chain it
    belongs to, oldest first: the last of the chain is the decision in force."""

    named: Ref
    chain: tuple[Ref, ...]
    #: The chain holds a supersession cycle (which validate reports): no ADR of it is in force.
    cyclic: bool = False

    @property
    def in_force(self) -> Ref:
        return self.chain[-1] if self.chain else self.named

    def cycle_note(self) -> str:
        """What is said of a chain with a cycle instead of a decision in force."""
        ids = ", ".join(r.id for r in self.chain)
        return f"its supersession chain ({ids}) holds a cycle, so no decision in force can be named"


@dataclass
class Provenance:
    """What ``why`` knows about one record. ``kind`` is practice, paper, ADR or version (a practice
    version other than the current one, of which the graph knows only that it existed); the other
    fields are filled for the kinds they apply to. ``asked_version`` is the version number the
    question named (SOTA-054-v2), if any."""

    id: str
    kind: str
    title: str | None = None
    status: str | None = None
    #: "summary": the index page writes this practice's status in its Summary cell.
    status_column: str | None = None
    #: What the page writes after a status other than Rejected ("Active — awaits a second source").
    status_note: str | None = None
    summary: str | None = None
    versions: list[int] = field(default_factory=list)
    current_version: int | None = None
    topic: str | None = None
    topic_label: str | None = None
    governed_by: list[Governance] = field(default_factory=list)
    reason: str | None = None
    reason_names: list[Ref] = field(default_factory=list)
    papers: list[Ref] = field(default_factory=list)
    authors: str | None = None
    year: str | None = None
    arxiv: str | None = None
    arxiv_version: str | None = None
    url: str | None = None
    locator: str | None = None
    cited_by: list[Ref] = field(default_factory=list)
    named_by: list[Ref] = field(default_factory=list)
    chain: list[Ref] = field(default_factory=list)
    governs: list[str] = field(default_factory=list)
    cited_in: list[str] = field(default_factory=list)
    asked_version: int | None = None
    practice: str | None = None


def why(backend: Backend, record_id: str, timeout: float = DEFAULT_TIMEOUT) -> Provenance:
    """The provenance of the practice, paper or ADR ``record_id``. A version id (SOTA-054-v2) gives the
    practice's story when it is the current version (the facts the page gives are the current
    version's), and a story of kind "version" saying only that it existed otherwise. RecordNotFound,
    with a close identifier when there is one, if it is unknown."""
    from pyoxigraph import NamedNode, Variable

    wanted = record_id.strip()
    if not _ID_FORM.fullmatch(wanted):
        raise UsageProblem(f"{record_id!r} is not a record identifier; give one like SOTA-049, LIT-051 or ADR-026")
    version = re.fullmatch(r"(.+)-v(\d+)", wanted)
    if version:
        wanted = version.group(1)
    iri = v.record_iri(wanted)
    result = run_query(backend, NEIGHBOURHOOD_QUERY, {Variable("record"): NamedNode(iri)}, timeout)
    if not isinstance(result, SelectResult):
        raise QueryFailed(f"{backend.label} answered the provenance query with something other than a table")
    story = provenance(Facts(result), wanted)
    if story is None:
        raise RecordNotFound(_not_found(backend, wanted, timeout))
    if version:
        return _version_story(story, record_id.strip(), int(version.group(2)))
    return story


def _version_story(story: Provenance, asked: str, number: int) -> Provenance:
    if story.kind != "practice" or number not in story.versions:
        known = ", ".join(f"v{n}" for n in story.versions) or "none recorded"
        raise RecordNotFound(f"{story.id} has no version {number} (its versions: {known}); ask for {story.id}")
    if number == story.current_version:
        story.asked_version = number
        return story
    return Provenance(
        id=asked, kind="version", asked_version=number, practice=story.id, current_version=story.current_version
    )


def provenance(facts: Facts, record_id: str) -> Provenance | None:
    """The story of the practice, paper or ADR ``record_id`` read off ``facts`` (its neighbourhood, or
    the whole graph), or None when the facts hold no such record."""
    iri = v.record_iri(record_id)
    kind = facts.kind(iri) if iri in facts else None
    if kind not in ("practice", "paper", "ADR"):
        return None
    story = Provenance(id=record_id, kind=kind or "")
    story.title = facts.text(iri, v.TITLE)
    story.status = facts.local(iri, v.HAS_STATUS, v.SOTA)
    story.status_column = facts.text(iri, v.STATUS_COLUMN)
    story.status_note = facts.text(iri, v.STATUS_NOTE)
    story.summary = facts.text(iri, v.SUMMARY)
    story.named_by = [_ref(facts, p) for p in facts.subjects(v.REASON_NAMES, iri)]
    if kind == "practice":
        _practice(facts, iri, story)
    elif kind == "paper":
        _paper(facts, iri, story)
    else:
        story.chain = _adr_chain(facts, iri)
        story.governs = [facts.text(s, v.TITLE) or _identifier(s) for s in facts.subjects(v.GOVERNED_BY, iri)]
        story.cited_in = [facts.text(s, v.TITLE) or _identifier(s) for s in facts.subjects(v.REFERENCES, iri)]
    for index, ref in enumerate(story.named_by):
        reason = facts.text(v.record_iri(ref.id), v.REJECTION_REASON)
        story.named_by[index] = replace(ref, quote=words_naming(reason, record_id))
    return story


def _not_found(backend: Backend, wanted: str, timeout: float) -> str:
    result = run_query(backend, IDENTIFIERS_QUERY, None, timeout)
    known = [row[0] for row in result.texts()] if isinstance(result, SelectResult) else []
    close = difflib.get_close_matches(wanted, known, n=3, cutoff=0.75)
    hint = f"; did you mean {' or '.join(close)}?" if close else ""
    return f"no practice, paper or ADR has the identifier {wanted}{hint}"


def _version_of(facts: Facts, practice: str) -> int | None:
    current = facts.text(practice, v.CURRENT_VERSION)
    number = facts.text(current, v.VERSION_NUMBER) if current else None
    if number is None and current and "-v" in current:
        number = current.rsplit("-v", 1)[1]
    return int(number) if number and number.isdigit() else None


def _ref(facts: Facts, iri: str) -> Ref:
    kind = facts.kind(iri)
    label = facts.text(iri, v.TITLE)
    if kind == "paper" and label is None:
        label = _paper_label(facts, iri)
    return Ref(
        id=_identifier(iri),
        kind=kind,
        status=facts.local(iri, v.HAS_STATUS, v.SOTA),
        version=_version_of(facts, iri) if kind == "practice" else None,
        label=label,
    )


def _paper_label(facts: Facts, iri: str) -> str | None:
    authors, year = facts.text(iri, v.AUTHORS), facts.text(iri, v.YEAR)
    if authors and year:
        return f"{authors} ({year})"
    return authors or year


def _practice(facts: Facts, iri: str, story: Provenance) -> None:
    story.current_version = _version_of(facts, iri)
    numbers = []
    for node in facts.subjects(v.IS_VERSION_OF, iri):
        number = facts.text(node, v.VERSION_NUMBER)
        if number and number.isdigit():
            numbers.append(int(number))
    story.versions = sorted(numbers) or ([story.current_version] if story.current_version else [])
    topic = facts.text(iri, v.FILED_UNDER)
    if topic:
        story.topic = facts.text(topic, v.SLUG) or topic.removeprefix(v.TOPIC)
        story.topic_label = facts.text(topic, v.PREF_LABEL)
        for scheme in facts.iris(topic, v.IN_SCHEME):
            for adr in facts.iris(scheme, v.GOVERNED_BY):
                cyclic = _has_cycle(facts, _linked_adrs(facts, adr))
                story.governed_by.append(Governance(_ref(facts, adr), tuple(_adr_chain(facts, adr)), cyclic))
    story.reason = facts.text(iri, v.REJECTION_REASON)
    story.reason_names = [_ref(facts, named) for named in facts.iris(iri, v.REASON_NAMES)]
    story.papers = [
        replace(_paper_ref(facts, paper), quote=words_naming(story.reason, _identifier(paper)))
        for paper in facts.iris(iri, v.CITES)
    ]


def words_naming(reason: str | None, record_id: str) -> str | None:
    """The sentences of a rejection reason that name ``record_id``, in the reason's own words."""
    if not reason:
        return None
    named = re.compile(rf"\b{re.escape(record_id)}\b")
    sentences = [s for s in re.split(r"(?<=[.!?])\s+", reason.strip()) if named.search(s)]
    return " … ".join(sentences) or None


def _paper_ref(facts: Facts, iri: str) -> Ref:
    parts = [_paper_label(facts, iri)]
    arxiv, url, title = _arxiv(facts, iri), facts.text(iri, v.URL), facts.text(iri, v.TITLE)
    if title:
        parts.insert(0, title)
    if arxiv:
        parts.append(f"arXiv:{arxiv}")
    if url:
        parts.append(url)
    return Ref(_identifier(iri), "paper", label=", ".join(p for p in parts if p))


def _arxiv(facts: Facts, iri: str) -> str | None:
    """A paper's arXiv id with its version when the data gives one (2101.00001v2)."""
    arxiv, version = facts.text(iri, v.ARXIV_ID), facts.text(iri, v.ARXIV_VERSION)
    return f"{arxiv}v{version}" if arxiv and version else arxiv


def arxiv_with_version(story: Provenance) -> str | None:
    """The story's arXiv id with its version when the data gives one (2101.00001v2)."""
    return f"{story.arxiv}v{story.arxiv_version}" if story.arxiv and story.arxiv_version else story.arxiv


def _paper(facts: Facts, iri: str, story: Provenance) -> None:
    story.authors = facts.text(iri, v.AUTHORS)
    story.year = facts.text(iri, v.YEAR)
    story.arxiv = facts.text(iri, v.ARXIV_ID)
    story.arxiv_version = facts.text(iri, v.ARXIV_VERSION)
    story.url = facts.text(iri, v.URL)
    story.locator = facts.text(iri, v.UNREAD_LOCATOR)
    topic = facts.text(iri, v.FILED_UNDER)
    if topic:
        story.topic = facts.text(topic, v.SLUG) or topic.removeprefix(v.TOPIC)
        story.topic_label = facts.text(topic, v.PREF_LABEL)
    story.cited_by = [_ref(facts, practice) for practice in facts.subjects(v.CITES, iri)]


def _earlier(facts: Facts, adr: str) -> set[str]:
    return set(facts.iris(adr, v.REPLACES)) | set(facts.subjects(v.IS_REPLACED_BY, adr))


def _later(facts: Facts, adr: str) -> set[str]:
    return set(facts.iris(adr, v.IS_REPLACED_BY)) | set(facts.subjects(v.REPLACES, adr))


def _adr_chain(facts: Facts, adr: str) -> list[Ref]:
    """The ADRs linked to ``adr`` by supersession, oldest first (by how many each supersedes)."""
    seen = _linked_adrs(facts, adr)
    depths = _supersession_depths(facts, seen)
    return [_ref(facts, node) for node in sorted(seen, key=lambda n: (depths[n], n))]


def _linked_adrs(facts: Facts, adr: str) -> set[str]:
    """``adr`` and every ADR a line of supersessions links to it, either way."""
    seen = {adr}
    frontier = [adr]
    while frontier:
        current = frontier.pop()
        for other in _earlier(facts, current) | _later(facts, current):
            if other not in seen:
                seen.add(other)
                frontier.append(other)
    return seen


def _has_cycle(facts: Facts, nodes: set[str]) -> bool:
    """Whether some of ``nodes`` supersede themselves through the others."""
    return _supersession_walk(facts, nodes)[1]


def _supersession_depths(facts: Facts, nodes: set[str]) -> dict[str, int]:
    return _supersession_walk(facts, nodes)[0]


def _supersession_walk(facts: Facts, nodes: set[str]) -> tuple[dict[str, int], bool]:
    """How long the longest line of supersessions below each of ``nodes`` is (0: it supersedes none),
    and whether a line leads back into itself (a cycle, which validate reports; the link back is
    left out of the lengths). Each node is visited once, without recursion: a chain of hundreds of
    ADRs, or ADRs that each supersede the two before them, cost time linear in the links."""
    depths: dict[str, int] = {}
    following: set[str] = set()
    cyclic = False
    for root in sorted(nodes):
        if root in depths:
            continue
        stack = [(root, iter(sorted(_earlier(facts, root))))]
        following.add(root)
        while stack:
            node, below = stack[-1]
            step = next(below, None)
            if step is None:
                stack.pop()
                following.discard(node)
                depths[node] = max((1 + depths[e] for e in _earlier(facts, node) if e in depths), default=0)
                continue
            if step in following:
                cyclic = True
                continue
            if step in depths:
                continue
            following.add(step)
            stack.append((step, iter(sorted(_earlier(facts, step)))))
    return depths, cyclic


# ------------------------------------------------------------------------------------------ rendering


def _wrap(text: str, **options: Any) -> list[str]:
    # Identifiers and hyphenated terms (SOTA-048, fusion-buffer) stay whole on one line.
    return textwrap.wrap(text, break_on_hyphens=False, break_long_words=False, **options)


def _ref_line(ref: Ref, width: int, id_width: int, show_kind: bool, quote_intro: str) -> list[str]:
    facts = [ref.kind if show_kind else None, f"v{ref.version}" if ref.version else None, ref.status]
    head = ", ".join(f for f in facts if f)
    text = " — ".join(part for part in (head, ref.label) if part)
    indent = " " * (id_width + 4)
    lines = _wrap(
        text or "(no details in the graph)",
        width=max(width, 40),
        initial_indent=f"  {ref.id.ljust(id_width)}  ",
        subsequent_indent=indent,
    ) or [f"  {ref.id}"]
    if ref.quote:
        lines += _wrap(
            f"{quote_intro}“{ref.quote}”", width=max(width, 40), initial_indent=indent, subsequent_indent=indent
        )
    return lines


def _refs(title: str, refs: list[Ref], width: int, show_kind: bool = True, quote_intro: str = "") -> list[str]:
    if not refs:
        return []
    id_width = max(len(r.id) for r in refs)
    lines = [title]
    for ref in refs:
        lines += _ref_line(ref, width, id_width, show_kind, quote_intro)
    return lines


def _chain_text(chain: list[Ref]) -> str:
    return " → ".join(f"{r.id} ({r.status})" if r.status else r.id for r in chain)


def _governance_text(governance: Governance) -> str:
    if governance.cyclic:
        return f"{governance.named.id} ({governance.cycle_note()})"
    in_force = governance.in_force
    earlier = [r.id for r in governance.chain if r.id != in_force.id]
    text = in_force.id
    notes = []
    if earlier:
        notes.append(f"superseding {', '.join(earlier)}")
    if governance.named.id != in_force.id:
        notes.append(f"the registry still names {governance.named.id}")
    return f"{text} ({'; '.join(notes)})" if notes else text


def _field(name: str, value: str, width: int) -> list[str]:
    return _wrap(f"{name}: {value}", width=max(width, 40), subsequent_indent="  ")


def _for_terminal(lines: list[str]) -> str:
    """The lines as text, any control character in them (a server's answer may hold escape sequences)
    shown as an escape."""
    from ..errors import printable

    return "".join(printable(line) + "\n" for line in lines)


def render_provenance(story: Provenance, width: int = 100) -> str:
    """The story as text lines no wider than ``width`` (long reasons and titles are wrapped)."""
    lines: list[str] = []
    if story.kind == "version":
        lines += _field(
            story.id, f"version {story.asked_version} of {story.practice}; nothing else is recorded about it", width
        )
        lines += _field(f"the current version of {story.practice}", f"v{story.current_version}", width)
        return _for_terminal(lines)
    if story.kind == "practice":
        if story.asked_version is not None:
            lines += _field(
                f"{story.id}-v{story.asked_version}",
                f"version {story.asked_version} of {story.id}, its current version; "
                f"what follows is what the data says of {story.id}",
                width,
            )
        lines += _field(story.id, story.title or "(title not recorded)", width)
        status = story.status or "not recorded"
        if story.status and story.status_column == "summary":
            status += " (the index page writes it in the Summary cell, whose summary is empty)"
        if story.status_note:
            status += f" — {story.status_note}"
        lines += _field("status", status, width)
        if story.versions:
            chain = " → ".join(f"v{n} (current)" if n == story.current_version else f"v{n}" for n in story.versions)
            lines += _field("versions", chain, width)
        if story.topic:
            label = f" ({story.topic_label})" if story.topic_label else ""
            lines += _field("topic", f"{story.topic}{label}", width)
        if story.governed_by:
            governing = ", ".join(_governance_text(g) for g in story.governed_by)
            lines += _field("filing governed by", governing, width)
        if story.reason:
            lines += ["rejected because:"]
            lines += _wrap(story.reason, width=max(width, 40), initial_indent="  ", subsequent_indent="  ")
        lines += _refs("the reason names:", story.reason_names, width)
        count = len(story.papers)
        lines += _refs(
            f"the page attributes it to {count} paper{'s' if count != 1 else ''}:",
            story.papers,
            width,
            False,
            "its rejection reason concerns this source: ",
        )
        if not story.papers:
            lines.append("the page attributes it to no paper")
    elif story.kind == "paper":
        lines += _field(story.id, _paper_title(story), width)
        arxiv = arxiv_with_version(story)
        if arxiv:
            lines += _field("arXiv", f"{arxiv} (https://arxiv.org/abs/{arxiv})", width)
        if story.url:
            lines += _field("url", story.url, width)
        if story.locator:
            lines += _field("locator (as written; not readable)", story.locator, width)
        if story.topic:
            lines += _field("topic", story.topic, width)
        count = len(story.cited_by)
        title = f"{count} practice{'s are' if count != 1 else ' is'} attributed to it:"
        lines += _refs(title, story.cited_by, width, False)
        if not story.cited_by:
            lines.append("no practice is attributed to it")
    else:
        lines += _field(story.id, story.title or "decision record", width)
        lines += _field("status", story.status or "not recorded", width)
        if story.summary:
            lines += _field("summary", story.summary, width)
        if len(story.chain) > 1:
            lines += _field("supersession chain (oldest first)", _chain_text(story.chain), width)
        else:
            lines += _field("supersession", "not recorded", width)
        if story.governs:
            lines += _field("governs", ", ".join(story.governs), width)
        if story.cited_in:
            lines += _field("cited in the description of", ", ".join(story.cited_in), width)
    lines += _refs("named in the rejection reasons of:", story.named_by, width)
    return _for_terminal(lines)


def _paper_title(story: Provenance) -> str:
    who = story.authors or "unknown authors"
    when = f" ({story.year})" if story.year else ""
    return f"{story.title}, {who}{when}" if story.title else f"{who}{when}"
