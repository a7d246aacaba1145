"""The anthology's published topic index page: parse one into records, and render one from rows.

The format, line by line::

    Topics — <the topic scheme's description>
    <Topic label> — <scope note>
    <n> of <registry size> SOTA documents. Back to the full index.
    | # | Title | Summary | Status |
    |---|---|---|---|
    | SOTA-017 v2 | <title> | <summary> | Active |
    | SOTA-049 | <title> | <summary> | Rejected — <reason> |
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ..errors import ImportProblem

DASH = " — "
HEADER = "| # | Title | Summary | Status |"
RULE = "|---|---|---|---|"
STATUSES = ("Active", "Proposed", "Rejected")
COUNT_RE = re.compile(r"^(?P<count>\d+) of (?P<total>\d+) SOTA documents\. Back to the full index\.$", re.ASCII)
RECORD_ID_RE = re.compile(r"\b(?:SOTA|LIT|ADR)-\d+\b", re.ASCII)
LIT_RE = re.compile(r"\bLIT-\d+\b", re.ASCII)
ADR_RE = re.compile(r"\bADR-\d+\b", re.ASCII)
#: Digits are ASCII throughout (re.ASCII): another script's digits are no part of an id or a count.
#: A row's version is a small count; a number of thousands of digits is refused before conversion.
MAX_VERSION_DIGITS = 6
PRACTICE_CELL_RE = re.compile(r"^(?P<id>SOTA-[0-9]+)(?: v(?P<version>[0-9]+))?$")
CITATION_RE = re.compile(
    r"^(?P<authors>[^()|]+?) \((?P<years>\d{4}[a-z]?(?:, \d{4}[a-z]?)*)\), "
    r"(?P<lits>LIT-\d+(?:(?:,| and|, and) LIT-\d+)*)(?P<rest>.*)$",
    re.S | re.ASCII,
)
LOOKS_CITED_RE = re.compile(r"^[^|()]{1,120}\([^)]{1,40}\),? LIT-\d+", re.ASCII)
ARXIV_RE = re.compile(r"^ — ARXIV-(?P<arxiv>\d{4}\.\d{4,5})(?:v(?P<version>[1-9]\d{0,2}))?(?:\.|\s|$)", re.ASCII)
#: What reads as a locator the page gives but that is not a well-formed arXiv id or http(s) URL.
LOCATOR_RE = re.compile(r"^ — (?P<locator>(?:ARXIV|arXiv|arxiv|DOI|doi)[-:]\S*?|\w+://\S*?)\.?(?:\s|$)")
URL_RE = re.compile(r"^ — (?P<url>https?://\S+?)\.?(?:\s|$)")
#: Words that make a sentence say a supersession does not hold, or may not: "Nothing here says that
#: ADR-059 supersedes ADR-026" states no supersession, and the import must not make one.
NOT_STATED_RE = re.compile(
    r"(?<![\w-])(?:not|no|nothing|never|neither|nor|none|nobody|without|whether|if|unless|until|unclear|"
    r"cannot|can't|won't|isn't|doesn't|didn't|wasn't|aren't|hardly)(?![\w-])|n't(?![\w-])",
    re.I | re.ASCII,
)
#: Where the clause of a match starts: after the last end of a sentence or clause before it (a dash,
#: a comma or a bracket too), and at most this many words before it.
SENTENCE_END_RE = re.compile(r"[.!?;:,()](?:\s|$)|\s[—–-]\s|\n")
CLAUSE_WORDS = 8
SUPERSEDES_RE = re.compile(
    r"\b(?P<new>ADR-\d+) \((?:superseding|supersedes|which supersedes|replacing) (?P<old>ADR-\d+)\)"
    r"|\b(?P<new2>ADR-\d+) (?:supersedes|superseded|replaces|replaced) (?P<old2>ADR-\d+)\b",
    re.ASCII,
)


@dataclass
class PageRow:
    """One practice row of an index page, as written and as understood."""

    line: int
    id: str
    version: int
    title: str
    summary: str | None
    status: str | None
    reason: str | None
    #: "summary" when the page writes the status in the Summary cell (and Status is empty).
    status_column: str | None = None


@dataclass
class ParsedPage:
    """Everything an index page says, as records ready to be written."""

    scheme_title: str
    scheme_description: str
    topic_label: str
    topic_scope: str | None
    topic_slug: str
    topic_count: int | None
    registry_size: int | None
    rows: list[PageRow]
    records: list[tuple[str, dict[str, Any]]]  # (kind, fields)
    warnings: list[str] = field(default_factory=list)
    #: The page line each record is first given on, by (kind, id; "registry" for the registry).
    lines: dict[tuple[str, str], int] = field(default_factory=dict)


def slugify(label: str) -> str:
    """The slug of a topic label: ``Distributed optimization`` -> ``distributed-optimization``."""
    return re.sub(r"[^a-z0-9]+", "-", label.lower()).strip("-")


#: Characters a cell cannot hold as written: ``str.splitlines`` ends a line at each of them.
LINE_BREAKS = frozenset("\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029")
_REFERENCE_RE = re.compile(r"&(?:#(\d{1,7})|amp);", re.ASCII)


def split_cells(line: str) -> list[str]:
    """The cells of a Markdown table row, unescaped (see ``escape_cell``)."""
    body = line.strip()
    cells: list[str] = []
    current: list[str] = []
    index, ended_on_pipe = 0, False
    while index < len(body):
        char = body[index]
        if char == "\\" and index + 1 < len(body) and body[index + 1] in "\\|":
            current.append(body[index + 1])
            index += 2
            ended_on_pipe = False
            continue
        if char == "|":
            cells.append("".join(current))
            current = []
            ended_on_pipe = True
        else:
            current.append(char)
            ended_on_pipe = False
        index += 1
    if not ended_on_pipe:
        cells.append("".join(current))
    if body.startswith("|") and cells:
        cells = cells[1:]
    return [_REFERENCE_RE.sub(_unreference, cell.strip()) for cell in cells]


def _unreference(match: re.Match[str]) -> str:
    if match[1] is None:
        return "&"
    code = int(match[1])
    if code > 0x10FFFF or 0xD800 <= code <= 0xDFFF:
        return match[0]
    return chr(code)


def escape_cell(text: str) -> str:
    """``text`` written so that ``split_cells`` reads it back exactly: ``\\|`` for a pipe, ``\\\\``
    for a backslash that would otherwise escape, and a character reference (``&#10;``) for a line
    break and for whitespace at either end of the cell (which a reader strips). ``&`` is written
    ``&amp;`` only where it would start such a reference; Markdown renders all of these as the text."""
    lead = len(text) - len(text.lstrip())
    trail = len(text) - len(text.rstrip()) if text.strip() else 0
    out: list[str] = []
    for index, char in enumerate(text):
        if char == "&" and _REFERENCE_RE.match(text, index):
            out.append("&amp;")
        elif char == "\\" and (index + 1 == len(text) or text[index + 1] in "\\|"):
            out.append("\\\\")
        elif char == "|":
            out.append("\\|")
        elif char in LINE_BREAKS or index < lead or index >= len(text) - trail:
            out.append(f"&#{ord(char)};")
        else:
            out.append(char)
    return "".join(out)


def _ids_in_order(text: str, pattern: re.Pattern[str] = RECORD_ID_RE) -> list[str]:
    seen: list[str] = []
    for match in pattern.findall(text):
        if match not in seen:
            seen.append(match)
    return seen


def parse_page(text: str, source: str = "<page>") -> ParsedPage:
    """Parse an index page. Raises ImportProblem, naming the line, for what cannot be understood."""
    lines = text.lstrip("\ufeff").splitlines()

    def fail(line: int, message: str) -> ImportProblem:
        return ImportProblem(f"{source}:{line}: {message}")

    if len(lines) < 5:
        raise fail(len(lines) or 1, "too short for an index page (three header lines, then the table)")
    scheme_title, _, scheme_description = lines[0].partition(DASH)
    if not scheme_description:
        raise fail(1, f"expected 'Topics — <description of the topic scheme>', got {lines[0][:60]!r}")
    topic_label, _, topic_scope = lines[1].partition(DASH)
    if not topic_label.strip():
        raise fail(2, "expected '<Topic label> — <scope note>'")
    count_match = COUNT_RE.match(lines[2].strip())
    if not count_match:
        raise fail(3, f"expected '<n> of <total> SOTA documents. Back to the full index.', got {lines[2][:60]!r}")
    if lines[3].strip() != HEADER:
        raise fail(4, f"expected the table header {HEADER!r}")
    if lines[4].replace(" ", "") != RULE:
        raise fail(5, f"expected the table rule {RULE!r}")

    page = ParsedPage(
        scheme_title=scheme_title.strip(),
        scheme_description=scheme_description,
        topic_label=topic_label.strip(),
        topic_scope=topic_scope or None,
        topic_slug=slugify(topic_label),
        topic_count=int(count_match["count"]),
        registry_size=int(count_match["total"]),
        rows=[],
        records=[],
    )
    if not page.topic_slug:
        raise fail(2, f"the topic label {topic_label!r} gives no slug; use letters or digits")
    seen_rows: dict[str, int] = {}
    for number, line in enumerate(lines[5:], start=6):
        if not line.strip():
            continue
        cells = split_cells(line)
        if len(cells) != 4:
            raise fail(number, f"a row needs 4 cells (# | Title | Summary | Status), this one has {len(cells)}")
        row = _parse_row(number, cells, page.warnings, source)
        if row.id in seen_rows:
            raise fail(number, f"{row.id} is listed twice (first on line {seen_rows[row.id]})")
        seen_rows[row.id] = number
        page.rows.append(row)
    if page.topic_count is not None and page.topic_count != len(page.rows):
        page.warnings.append(
            f"{source}:3: the page says {page.topic_count} practices but its table has {len(page.rows)}"
        )
    page.records = _records(page, source)
    return page


def _parse_row(number: int, cells: list[str], warnings: list[str], source: str) -> PageRow:
    id_cell, title, summary, status_cell = cells
    match = PRACTICE_CELL_RE.match(id_cell)
    if not match:
        raise ImportProblem(
            f"{source}:{number}: expected a practice id such as 'SOTA-017' or 'SOTA-017 v2', got {id_cell!r}"
        )
    practice_id = match["id"]
    if len(match["version"] or "") > MAX_VERSION_DIGITS:
        raise ImportProblem(
            f"{source}:{number}: row {practice_id[:40]}: version v{match['version'][:12]}... has "
            f"{len(match['version'])} digits; a version has at most {MAX_VERSION_DIGITS}: fix the id cell"
        )
    if match["version"] is not None and (match["version"].startswith("0")):
        raise ImportProblem(
            f"{source}:{number}: row {practice_id}: v{match['version'][:12]} is no version (versions count "
            f"from 1, written without a leading zero): fix the id cell"
        )
    version = int(match["version"] or 1)
    where = f"{source}:{number}: row {practice_id}"
    status_column = None
    if not status_cell and _looks_like_status(summary):
        warnings.append(
            f"{where}: the status column is empty and the summary column holds {summary!r}; "
            f"assumed that is the status and the practice has no summary (kept as `status_column: summary`)"
        )
        status_cell, summary, status_column = summary, "", "summary"
    elif not status_cell:
        warnings.append(f"{where}: the status column is empty; imported without a status")
    status, _, reason = status_cell.partition(DASH)
    status = status.strip()
    if status and status not in STATUSES:
        warnings.append(f"{where}: unknown status {status!r} (expected one of {', '.join(STATUSES)}); kept as written")
    if status == "Rejected" and not reason.strip():
        warnings.append(f"{where}: rejected without a reason")
    if not title:
        warnings.append(f"{where}: the title column is empty; imported without a title")
    return PageRow(number, practice_id, version, title, summary or None, status or None, reason or None, status_column)


def _locator(rest: str, warnings: list[str], where: str, lit: str) -> dict[str, Any]:
    """The paper facts of the locator after a byline (`` — ARXIV-1811.06965.`` or `` — https://...``).

    A locator that looks like one but cannot be read is kept verbatim (``locator``), with a warning,
    so that validate reports it on the paper instead of the import dropping it."""
    arxiv = ARXIV_RE.match(rest)
    if arxiv:
        facts: dict[str, Any] = {"arxiv": arxiv["arxiv"]}
        if arxiv["version"]:
            facts["arxiv_version"] = int(arxiv["version"])
        return facts
    url = URL_RE.match(rest)
    if url:
        return {"url": url["url"]}
    unread = LOCATOR_RE.match(rest)
    if unread:
        warnings.append(
            f"{where}: cannot read the locator {unread['locator']!r} of {lit} (expected ARXIV-YYMM.NNNNN "
            f"or an http(s) URL); kept verbatim as the paper's `locator`, which validate reports"
        )
        return {"locator": unread["locator"]}
    return {}


def _sentence_start(text: str, end: int) -> int:
    start = 0
    for found in SENTENCE_END_RE.finditer(text, 0, end):
        start = found.end()
    words = text[start:end].split()
    if len(words) > CLAUSE_WORDS:  # only the words just before the match
        start = end - len(" ".join(words[-CLAUSE_WORDS:])) - 1
    return start


def _supersede(adrs: dict[str, dict[str, Any]], new: str, old: str) -> None:
    newer = adrs.setdefault(new, {"id": new})
    newer["supersedes"] = sorted(set(newer.get("supersedes", [])) | {old})
    older = adrs.setdefault(old, {"id": old})
    older["superseded_by"] = new
    older["status"] = "Superseded"


def _looks_like_status(text: str) -> bool:
    return text.partition(DASH)[0].strip() in STATUSES


_LOCATOR_KEYS = ("arxiv", "url", "locator")


def _records(page: ParsedPage, source: str) -> list[tuple[str, dict[str, Any]]]:
    """The page's records; ``page.lines`` gets the line each is first given on."""
    papers: dict[str, dict[str, Any]] = {}
    adrs: dict[str, dict[str, Any]] = {}
    practices: list[dict[str, Any]] = []
    lines = page.lines
    warned: set[tuple[str, str, str]] = set()  # (paper, locator kind given, locator kind known): once each
    lines[("registry", "registry")] = 1
    lines[("topic", page.topic_slug)] = 2

    def note_paper(lit: str, facts: dict[str, Any], row: PageRow) -> None:
        paper = papers.setdefault(lit, {"id": lit})
        lines.setdefault(("paper", lit), row.line)
        given = [key for key in _LOCATOR_KEYS if key in facts]
        known = [key for key in _LOCATOR_KEYS if key in paper and key not in facts]
        if given and known and (lit, given[0], known[0]) not in warned:
            warned.add((lit, given[0], known[0]))
            page.warnings.append(
                f"{source}:{row.line}: row {row.id} gives {lit} the {given[0]} {facts[given[0]]!r}, an earlier row "
                f"the {known[0]} {paper[known[0]]!r}; kept both (check they are the same paper)"
            )
        for key, value in facts.items():
            if key in paper and paper[key] != value:
                page.warnings.append(
                    f"{source}:{row.line}: row {row.id} gives {lit} {key} {value!r}, "
                    f"an earlier row gave {paper[key]!r}; kept the earlier"
                )
            else:
                paper.setdefault(key, value)

    for row in page.rows:
        practice: dict[str, Any] = {"id": row.id, "version": row.version}
        if row.title:
            practice["title"] = row.title
        if row.summary:
            practice["summary"] = row.summary
        if row.status:
            practice["status"] = row.status
        if row.status_column:
            practice["status_column"] = row.status_column
        if row.reason:
            practice["reason"] = row.reason
            named = [i for i in _ids_in_order(row.reason) if i != row.id]
            if named:
                practice["reason_names"] = sorted(named)
        cites = _ids_in_order(row.summary or "", LIT_RE)
        if cites:
            practice["cites"] = sorted(cites)
        practice["topic"] = page.topic_slug
        practices.append(practice)
        lines[("practice", row.id)] = row.line
        for lit in cites:
            papers.setdefault(lit, {"id": lit})
            lines.setdefault(("paper", lit), row.line)
        citation = CITATION_RE.match(row.summary or "")
        if citation is None and LOOKS_CITED_RE.match(row.summary or ""):
            page.warnings.append(
                f"{source}:{row.line}: row {row.id}: could not read authors and year from "
                f"{(row.summary or '')[:60]!r}; its papers were imported without them"
            )
        if citation:
            lits = _ids_in_order(citation["lits"], LIT_RE)
            years = [int(y[:4]) for y in citation["years"].split(", ")]
            rest = citation["rest"]
            facts_each: dict[str, Any] = {"authors": citation["authors"].strip()}
            for index, lit in enumerate(lits):
                facts = dict(facts_each)
                if len(years) == len(lits):
                    facts["year"] = years[index]
                elif index == 0:
                    page.warnings.append(
                        f"{source}:{row.line}: row {row.id} gives {len(years)} years for {len(lits)} papers; "
                        f"the years were not assigned"
                    )
                if len(lits) == 1:
                    facts.update(_locator(rest, page.warnings, f"{source}:{row.line}: row {row.id}", lit))
                elif index == 0 and LOCATOR_RE.match(rest):
                    page.warnings.append(
                        f"{source}:{row.line}: row {row.id} gives one locator after {len(lits)} papers; it was "
                        f"not assigned to any of them (give each paper its own row or byline)"
                    )
                note_paper(lit, facts, row)
        for text in (row.reason or "", row.summary or ""):
            for adr in _ids_in_order(text, ADR_RE):
                adrs.setdefault(adr, {"id": adr})
                lines.setdefault(("adr", adr), row.line)

    # The header only cites its ADRs ("... (ADR-026)"): that makes them records, and nothing more.
    for adr in _ids_in_order(page.scheme_description, ADR_RE):
        adrs.setdefault(adr, {"id": adr})
        lines[("adr", adr)] = 1
    texts = [(1, page.scheme_description)]
    texts += [(r.line, text) for r in page.rows for text in (r.reason or "", r.summary or "") if text]
    for line, text in texts:
        for match in SUPERSEDES_RE.finditer(text):
            new = match["new"] or match["new2"]
            old = match["old"] or match["old2"]
            sentence = text[_sentence_start(text, match.start()) : match.start()]
            if NOT_STATED_RE.search(sentence):
                page.warnings.append(
                    f"{source}:{line}: {match.group()!r} stands in a sentence that says it does not hold, or may "
                    f"not ({sentence.strip()[-60:]!r}); no supersession was imported: add it to the ADRs by hand "
                    f"if it holds"
                )
                continue
            _supersede(adrs, new, old)

    registry: dict[str, Any] = {"title": page.scheme_title, "description": page.scheme_description}
    if page.registry_size is not None:
        registry["declared_size"] = page.registry_size
    topic: dict[str, Any] = {"id": page.topic_slug, "label": page.topic_label}
    if page.topic_scope:
        topic["scope"] = page.topic_scope
    if page.topic_count is not None:
        topic["declared_size"] = page.topic_count

    records: list[tuple[str, dict[str, Any]]] = [("registry", registry), ("topic", topic)]
    records += [("practice", p) for p in practices]
    records += [("paper", papers[k]) for k in sorted(papers)]
    records += [("adr", adrs[k]) for k in sorted(adrs)]
    return records


# ------------------------------------------------------------------------------------------ render


@dataclass
class PracticeRow:
    """What one row of an index page shows."""

    id: str
    version: int
    title: str
    summary: str
    status: str
    reason: str
    #: "summary": the status is written in the Summary cell, which the practice leaves empty.
    status_column: str = ""


def render_page(
    scheme_title: str,
    scheme_description: str,
    topic_label: str,
    topic_scope: str | None,
    registry_size: int,
    rows: Iterable[PracticeRow],
) -> str:
    """The index page of one topic, in the published format (no newline after the last row)."""
    rows = sorted(rows, key=lambda r: _id_key(r.id))
    head = f"{topic_label}{DASH}{topic_scope}" if topic_scope else topic_label
    lines = [
        f"{scheme_title}{DASH}{scheme_description}",
        head,
        f"{len(rows)} of {registry_size} SOTA documents. Back to the full index.",
        HEADER,
        RULE,
    ]
    for row in rows:
        label = row.id if row.version <= 1 else f"{row.id} v{row.version}"
        status = f"{row.status}{DASH}{row.reason}" if row.reason else row.status
        if row.status_column == "summary" and not row.summary:
            cells = [label, row.title, status, ""]
        else:
            cells = [label, row.title, row.summary, status]
        lines.append(_table_row(cells))
    return "\n".join(lines)


def _table_row(cells: Iterable[str]) -> str:
    """One table row as the anthology writes it: ``| a | b |``, an empty cell as ``| |``."""
    return "|" + "|".join(f" {escape_cell(c)} " if c else " " for c in cells) + "|"


def _id_key(record_id: str) -> tuple[str, int, str]:
    prefix, _, number = record_id.partition("-")
    return (prefix, int(number) if number.isdigit() else -1, record_id)


@dataclass
class TopicRow:
    """What one row of the full index page shows: a topic, linked to its page."""

    slug: str
    label: str
    scope: str
    count: int


FULL_INDEX_HEADER = "| Topic | Scope | Count |"
FULL_INDEX_RULE = "|---|---|---|"


def topic_page_name(slug: str) -> str:
    """The file name of a topic's index page next to the full index: ``<slug>.md``."""
    return f"{slug}.md"


def render_full_index(
    scheme_title: str, scheme_description: str, registry_size: int, topics: Iterable[TopicRow]
) -> str:
    """The full index page, which the topic pages link back to, in the published style::

        Topics — <the topic scheme's description>
        <n> of <registry size> SOTA documents in <k> topics.
        | Topic | Scope | Count |
        |---|---|---|
        | [Distributed optimization](distributed-optimization.md) | <scope note> | 42 |

    Topics in slug order; no newline after the last row, like the topic pages."""
    rows = sorted(topics, key=lambda t: t.slug)
    filed = sum(t.count for t in rows)
    lines = [
        f"{scheme_title}{DASH}{scheme_description}",
        f"{filed} of {registry_size} SOTA documents in {len(rows)} topic{'s' if len(rows) != 1 else ''}.",
        FULL_INDEX_HEADER,
        FULL_INDEX_RULE,
    ]
    for topic in rows:
        label = escape_cell(topic.label).replace("[", "\\[").replace("]", "\\]")
        link = f"[{label}]({topic_page_name(topic.slug)})"
        lines.append(f"| {link} | {escape_cell(topic.scope)} | {topic.count} |")
    return "\n".join(lines)
