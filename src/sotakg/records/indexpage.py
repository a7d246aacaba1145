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

import bisect
import html
import html.entities
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ..errors import ImportProblem

DASH = " — "
HEADER = "| # | Title | Summary | Status |"
RULE = "|---|---|---|---|"
STATUSES = ("Active", "Proposed", "Rejected")
#: "1 of 449 SOTA document." is read too (and given back as "documents", which the warning that the page is
#: not reproduced says).
COUNT_RE = re.compile(r"^(?P<count>\d+) of (?P<total>\d+) SOTA documents?\. Back to the full index\.$", re.ASCII)
RECORD_ID_RE = re.compile(r"\b(?:SOTA|LIT|ADR)-\d+\b", re.ASCII)
LIT_RE = re.compile(r"\bLIT-\d+\b", re.ASCII)
ADR_RE = re.compile(r"\bADR-\d+\b", re.ASCII)
#: Digits are ASCII throughout (re.ASCII): another script's digits are no part of an id or a count.
#: A row's version is a small count; a number of thousands of digits is refused before conversion.
MAX_VERSION_DIGITS = 6
#: The longest record id (the records' identifier pattern allows 128 characters).
MAX_ID_CHARS = 128
#: The count line's numbers: far above any anthology, far below what int() refuses.
MAX_COUNT_DIGITS = 9
PRACTICE_CELL_RE = re.compile(r"^(?P<id>SOTA-[0-9]+)(?: v(?P<version>[0-9]+))?$")
#: The text of a list of names: no parenthesis, pipe or semicolon, but for the ``;`` that ends a
#: character reference (``DeVries &amp; Taylor``, ``Jos&eacute; Ruiz``).
_NAMES = r"(?:[^()|;&]|&(?:#?[0-9A-Za-z]+;)?)+?"
#: A byline: ``Huang et al. (2018), LIT-016`` (or several papers, ``LIT-1, LIT-2 and LIT-3``, with as
#: many years). A summary may hold several, separated by ``; `` or ``. ``; each may have its locator.
BYLINE_RE = re.compile(
    rf"(?P<authors>{_NAMES}) "
    r"\((?P<years>\d{4}[a-z]?(?:, \d{4}[a-z]?)*)\), "
    r"(?P<lits>LIT-\d+(?:(?:,| and|, and) LIT-\d+)*)",
    re.ASCII,
)
#: What separates two bylines: ``; `` (with the ``and`` of a serial list: ``…; and Kim (2022), LIT-903``)
#: or the ``. `` that ends a sentence; a sentence may open with a linking phrase (``Later, ``,
#: ``In 2021, ``), which is no author's name.
_LINKING_WORDS = (
    "Later Earlier Independently Similarly Likewise Conversely Subsequently Recently Previously Meanwhile "
    "Moreover Furthermore Additionally Notably Instead Alternatively Accordingly Consequently Elsewhere "
    "Finally Lastly Again Separately Concurrently Then Next Also Crucially Importantly Critically "
    "Nevertheless Nonetheless However Thus Hence Therefore Overall Yet Still Indeed Interestingly "
    "Surprisingly Specifically Analogously Relatedly Further Ultimately Originally Initially Historically "
    "Today Now Namely Especially Particularly Generally Typically Usually Often Sometimes Fortunately "
    "Unfortunately Naturally Clearly Obviously Admittedly Regardless Otherwise Afterwards Afterward "
    "Thereafter Together Jointly Collectively Empirically Theoretically Formally Briefly Broadly "
    "First Second Third Fourth Fifth Firstly Secondly Thirdly"
).split()
BYLINE_SEPARATOR_RE = re.compile(
    r"(?:\.?;\s+(?:and\s+)?|\.\s+)(?:(?:"
    + "|".join(_LINKING_WORDS)
    + r"|In contrast|By contrast|In turn|(?:In|By|Since|As of|Until) [0-9]{4}),\s+)?",
    re.ASCII,
)
#: What a summary may open with for its papers to be cited, when it is no byline the import reads:
#: the list of papers at its start, or after names (``Smith et al., LIT-100``) and an aside in
#: parentheses (``Doe (in press), LIT-901``); the names must read as names (``_names_only``).
OPENING_CITATION_RE = re.compile(
    rf"(?:(?P<names>{_NAMES})(?: \([^()]*\))?, )?(?P<lits>LIT-\d+(?:(?:,| and|, and) LIT-\d+)*)\b", re.ASCII
)
#: A locator ends at a space or the end of the summary; the punctuation that closes a sentence or a
#: clause just before that is not part of it (as Markdown's autolinks read it): it is cut off in code
#: (``_locator_at``), since a pattern that gives it back one character at a time takes quadratic time.
_TRAILING_PUNCTUATION = ".,;:!?"
#: What a byline's note may follow instead of the dash: "Goyal (2017), LIT-901: large batches."
_NOTE_COLON = ": "
#: An arXiv id, without prefix or version (``rule:paper-arxiv-id``'s pattern, which a test holds it to):
#: YYMM.NNNN or YYMM.NNNNN (1811.06965), or before April 2007 archive[.subject-class]/YYMMNNN
#: (``cs/0501001``, ``hep-th/9901001``, ``math.GT/0309136``). Each part is ended by what follows it:
#: no backtracking beyond one character.
ARXIV_ID = (
    r"[0-9]{2}(?:0[1-9]|1[0-2])[.][0-9]{4,5}"
    r"|[a-z]+(?:-[a-z]+)*(?:[.][A-Za-z]+(?:-[A-Za-z]+)*)?/[0-9]{2}(?:0[1-9]|1[0-2])[0-9]{3}"
)
ARXIV_RE = re.compile(
    rf" — ARXIV-(?P<arxiv>{ARXIV_ID})(?:v(?P<version>[1-9]\d{{0,2}}))?(?=[.,;:!?]*+(?:\s|$))", re.ASCII
)
#: What reads as a locator the page gives but that is not a well-formed arXiv id or http(s) URL: an
#: id with its prefix (``DOI:10.1145/3458817``, ``DOI 10.1145/3458817``, ``DOI: 10.1145/...``), a
#: URL of another scheme, a Markdown autolink (``<https://...>``) or link (``[pdf](https://...)``,
#: with a title or not, its destination with parentheses or not: any ``[text](`` starts one). Each
#: runs to the next blank, as written (every quantifier is possessive: no backtracking).
LOCATOR_RE = re.compile(
    r" — (?P<locator>(?:(?:DOI|doi):?+ 10\.|(?:ARXIV|arXiv|arxiv|DOI|doi)[-:]|\w++://|<[A-Za-z][\w+.-]*+:[^\s<>]*+>"
    r'|\[[^\[\]\n]*+\]\((?:[^()\s]|\([^()\s]*+\))*+(?: "[^"\n]*+")?+\)|\[[^\[\]\n]*+\]\()\S*+)'
)
URL_RE = re.compile(r" — (?P<url>https?://\S++)")
#: An http(s) URL the rules take (``rule:paper-url``'s pattern, which a test holds it to); another is
#: kept as an unread ``locator``.
GOOD_URL_RE = re.compile(r'https?://[^/?#\s<>"{}|\\^`]+(?:[/?#][^\s<>"{}|\\^`]*)?')
#: A byline's authors hold no end of a sentence (a word of two letters or more, then ". "; not "al" nor
#: the abbreviation of a part of a name, "Jr.", "St.", "Dr.", nor a two-letter initial, "Yu.", "Th."):
#: ``In 2019 a rebuttal appeared. Jones (2021), LIT-018`` is prose before a byline, not its authors;
#: ``Smith Jr. et al.`` are authors.
_SENTENCE_IN_AUTHORS_RE = re.compile(
    r"(?<![A-Za-z])(?!(?i:al|jr|sr|st|ste|dr|mr|mrs|ms|prof|mme|mlle|hr|fr)[.!?])(?![A-Z][a-z][.]\s)"
    r"[A-Za-z]{2,}[.!?]\s"
)
#: Words that make a sentence say a supersession does not hold, or may not: "Nothing here says that
#: ADR-059 supersedes ADR-026" states no supersession, and the import must not make one.
NOT_STATED_RE = re.compile(
    r"(?<![\w-])(?:not|no|nothing|never|neither|nor|none|nobody|without|whether|if|unless|until|unclear|"
    r"cannot|can['’]t|won['’]t|isn['’]t|doesn['’]t|didn['’]t|wasn['’]t|aren['’]t|hardly)(?![\w-])|n['’]t(?![\w-])",
    re.I | re.ASCII,
)
#: Where a sentence ends: at ``.``, ``!`` or ``?`` before a blank or the end (past the closing marks of
#: emphasis or a quotation: ``*Does it?*``, ``"Does it?"``) and not before a digit or a lower-case
#: letter (``Figs. 2 and 3``, ``approx. half``), or at a line break. Case does not matter:
#: ``Prof.``, ``Eq.`` and ``prof.``, ``eq.`` are the same abbreviation.
SENTENCE_END_RE = re.compile(
    # not the dot of an ellipsis, an initial (J.) or a common abbreviation (et al., e.g., i.e., etc., vs.)
    r"(?<!\.)(?<![\s(.][a-z])(?<!\bal)(?<!e\.g)(?<!i\.e)(?<!etc)(?<!\bvs)(?<!\bcf)(?<!\best)(?<!\bfig)"
    r"(?<!\bsec)(?<!approx)(?<!\bdr)(?<!\bno)(?<!\bvol)(?<!\bpp)(?<!\bch)(?<!\beq)(?<!\bref)(?<!\bmr)(?<!\bms)"
    r"(?<!prof)(?<!\bjr)(?<!\bsr)(?<!\bst)(?<!\bfigs)(?<!\beqs)(?<!\brefs)(?<!\bsect)(?<!\bsecs)(?<!\bthm)"
    r"(?<!\balg)(?<!\blem)(?<!\bcor)(?<!\btab)(?<!\bapp)(?<!\bdef)(?<!\bprop)(?<!\bsuppl)(?<!\bsupp)(?<!\bexp)"
    r"(?<!\bex)(?<!\bcorp)(?<!\binc)(?<!\bltd)(?<!\bco)"
    # what follows a sentence's end is a new sentence: not a number or a word in lower case ("Figs. 2")
    r"[.!?](?!\.)(?=[*_\"”’')\]]*+(?:\s++(?-i:(?![0-9a-z]))|$))|\n",
    re.I | re.ASCII,
)
#: Words that make a sentence report, hedge, condition or deny what it holds: a supersession in such a
#: sentence is not stated by the page ("If accepted, ADR-026 supersedes ADR-020", "A draft ADR-026
#: (superseding ADR-020) is under review").
HEDGE_RE = re.compile(
    r"(?<![\w-])(?:if|unless|whether|once|had|when|would|could|should|may|might|maybe|perhaps|allegedly|"
    r"reportedly|supposedly|hypothetically|draft|drafts|propose|proposes|proposed|proposal|rejected|rumou?rs?|"
    r"say|says|said|claims|claimed|claiming|believe|believes|believed|think|thinks|suggest|suggests|suggested|expect|"
    r"expects|expected|hope|hopes|planned|pending|tentative|tentatively|review|abandoned|rescinded|revoked|"
    r"disputes?|disputed|disputing|contests?|contested|contesting|doubts?|doubted|doubting|doubtful|argue|argues|"
    r"argued|arguing|assuming|assumption|questions?|questioned|questioning|questionable|contends?|contended|"
    r"alleges?|alleged|speculates?|speculated|speculative|speculation|probably|"
    r"possibly|likely|unlikely|apparently|presumably|arguably|seemingly|purportedly|ostensibly|conceivably|"
    r"false|wrong|untrue|incorrect|mistaken|withdrawn|retracted|contrary|nope|"
    r"reverted|revert|rolled|voted|vetoed|overturned|overruled|discussion|debated|considered|candidate|still|"
    r"ratification|ratified|unratified|later|being|drafted|drafting|await|awaits|awaiting|approval|"
    r"consideration|considering|scheduled|repeal|repealed|according|upcoming|forthcoming|soon|intend|intends|"
    r"intended|plan|plans|aim|aims|suspended|reconsidered|eventually)"
    r"(?![\w-])",
    re.I | re.ASCII,
)
#: The longest sentence judged: a longer one holding a supersession is warned of, not imported.
SENTENCE_CHARS = 400
#: Any wording of a supersession, for the warning on one that was not imported.
SUPERSESSION_WORD_RE = re.compile(r"(?<![\w-])(?:supersed|replac)\w*", re.I | re.ASCII)
#: The only words that may come before a supersession in its clause for it to be stated plainly.
PLAIN_LEAD_WORDS = frozenset(
    {"and", "so", "thus", "hence", "since", "then", "now", "later", "today", "here", "which", "also", "finally"}
)
#: A supersession in the anthology's own form, an aside: ``ADR-026 (superseding ADR-020)``,
#: ``ADR-020 (superseded by ADR-026)``. Stated wherever it stands.
SUPERSEDES_ASIDE_RE = re.compile(
    r"\b(?P<new>ADR-\d+) \((?:superseding|supersedes|which supersedes|replacing|replaces|which replaces) "
    r"(?P<old>ADR-\d+)\)"
    r"|\b(?P<old2>ADR-\d+) \((?:superseded|replaced) by (?P<new2>ADR-\d+)\)",
    re.ASCII,
)
#: A supersession in prose, in any tense or mood: stated only where its clause says just that.
SUPERSEDES_PROSE_RE = re.compile(
    r"\b(?P<first>ADR-\d+)(?P<auxiliary>(?i:(?: (?:is|was|has|had|been|will|would|may|might|should|could|can|"
    r"must|does|did|do|to|not|now|also))*)) (?P<verb>(?i:supersedes|superseded|supersede|superseding|replaces|"
    r"replaced|replace|replacing))(?P<by>(?i: by))? (?P<second>ADR-\d+)\b",
    re.ASCII,
)
_PLAIN_ACTIVE = frozenset({"supersedes", "superseded", "replaces", "replaced"})
_PLAIN_PASSIVE = frozenset({"", " is", " was", " has been", " had been"})


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
    """The slug of a topic label: ``Distributed optimization`` -> ``distributed-optimization``;
    accented letters lose their accents (``Régularisation`` -> ``regularisation``)."""
    import unicodedata

    plain = "".join(c for c in unicodedata.normalize("NFKD", label) if not unicodedata.combining(c))
    return re.sub(r"[^a-z0-9]+", "-", plain.lower()).strip("-")


#: A slug as ``slugify`` makes one (and a page's file name gives one, ``<slug>.md``).
SLUG_RE = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*", re.ASCII)


#: The characters that end a line in Markdown (CommonMark: LF, CR, and CR LF), which a cell cannot
#: hold as written. Other characters Python calls line breaks (NEL, U+2028, FF ...) are text to Markdown.
LINE_BREAKS = frozenset("\n\r")
_LINE_END_RE = re.compile(r"\r\n|\r|\n")
#: A decimal character reference as the writer makes it (no leading zero: ``&#010;`` is text).
_CHAR_REF_RE = re.compile(r"&#(0|[1-9][0-9]{0,6});", re.ASCII)
_REF_BODY_RE = re.compile(r"#(0|[1-9][0-9]{0,6});", re.ASCII)
#: What Markdown trims at a cell's edges: spaces and tabs (a no-break space is text).
_BLANKS = " \t"
_AMP = "&amp;"


def page_lines(text: str) -> list[str]:
    """The lines of a page as Markdown ends them (LF, CR or CR LF), without a leading byte-order mark."""
    return _LINE_END_RE.split(text.removeprefix("\ufeff"))


def _referenced(code: str) -> str | None:
    number = int(code)
    if number > 0x10FFFF or 0xD800 <= number <= 0xDFFF:
        return None
    return chr(number)


_BACKSLASHES_RE = re.compile(r"\\*")


def _backslashes_end(text: str, index: int) -> int:
    """Where the run of backslashes starting at ``text[index]`` ends."""
    return _BACKSLASHES_RE.match(text, index).end()  # type: ignore[union-attr]  # "*" matches anywhere


def split_cells(line: str) -> list[str]:
    """The cells of a Markdown table row, unescaped: the exact inverse of ``escape_cell``.

    A pipe after an odd run of backslashes is text (the run's pairs each stand for one backslash);
    after an even run (or none) it ends the cell. Anything the writer does not escape reads as
    written: ``&amp; more``, ``&copy;``, ``C:\\temp`` are kept verbatim, so a page that is read and
    written again comes out as it went in."""
    body = line.strip(_BLANKS)
    raw_cells: list[str] = []
    current: list[str] = []
    index, ended_on_pipe = 0, False
    while index < len(body):
        char = body[index]
        if char == "\\":
            run_end = _backslashes_end(body, index)
            run = run_end - index
            if run_end < len(body) and body[run_end] == "|" and run % 2:
                current.append(body[index : run_end + 1])  # the escaped pipe stays escaped until decoded
                index = run_end + 1
            else:
                current.append(body[index:run_end])
                index = run_end
            ended_on_pipe = False
            continue
        if char == "|":
            raw_cells.append("".join(current))
            current = []
            ended_on_pipe = True
        else:
            current.append(char)
            ended_on_pipe = False
        index += 1
    if not ended_on_pipe:
        raw_cells.append("".join(current))
    if body.startswith("|") and raw_cells:
        raw_cells = raw_cells[1:]
    return [decode_cell(cell.strip(_BLANKS)) for cell in raw_cells]


def _edges(raw: str) -> tuple[int, int]:
    """Where the leading run of whitespace references of ``raw`` ends and the trailing one starts."""
    lead = 0
    while (found := _CHAR_REF_RE.match(raw, lead)) and (char := _referenced(found[1])) is not None and char in _BLANKS:
        lead = found.end()
    trail = len(raw)
    refs = [found for found in _CHAR_REF_RE.finditer(raw, lead)]
    for found in reversed(refs):
        char = _referenced(found[1])
        if found.end() != trail or char is None or char not in _BLANKS:
            break
        trail = found.start()
    return lead, max(trail, lead)


#: The first characters of a Markdown block other than a paragraph, or of a line that turns the one
#: before into a heading; a header line starting with one of them as such a block starts has it
#: written as a reference (``_BLOCK_START_RE``), and the reader decodes such a reference there.
_BLOCK_STARTERS = frozenset("#><-+*_=`~[0123456789")
_BLOCK_START_RE = re.compile(
    r"""\#{1,6}(?:[ \t]|$)          # a heading
    |>                                # a quote
    |<[A-Za-z/!?]                     # HTML: a comment, a tag, a declaration
    |[-+*](?:[ \t]|$)                # a list item
    |[0-9]{1,9}[.)](?:[ \t]|$)       # an ordered list item
    |(?:[-*_][ \t]*){3,}$            # a rule
    |=+[ \t]*$|-+[ \t]*$            # a setext underline (of the line before)
    |`{3,}|~{3,}                      # a fence
    |\[(?:[^\]\\]|\\.)*\]:         # a link reference definition
    """,
    re.VERBOSE | re.ASCII,
)


def _starts_a_block(text: str) -> bool:
    """Whether ``text`` at the start of a line starts a block other than a paragraph."""
    return _BLOCK_START_RE.match(text) is not None


def _is_read(char: str | None, leading: bool, trailing: bool, line_start: bool = False) -> bool:
    """Whether the writer makes a reference to ``char`` there: a line break anywhere, whitespace at
    either edge of the cell, and at the start of a header line a character that could start a block."""
    if char is None:
        return False
    at_edge = char in _BLANKS and (leading or trailing)
    return char in LINE_BREAKS or at_edge or (line_start and char in _BLOCK_STARTERS)


def _after_amps(text: str, index: int) -> tuple[str | None, int]:
    """For an ``&`` at ``text[index]`` followed by (``amp;``)* and ``#N;``: the character of N and
    where that ``#N;`` ends; otherwise (None, -1)."""
    after = index + 1
    while text.startswith("amp;", after):
        after += len("amp;")
    body = _REF_BODY_RE.match(text, after)
    if body is None:
        return None, -1
    return _referenced(body[1]), body.end()


def decode_cell(raw: str, line_start: bool = False) -> str:
    """A stripped cell's text: ``\\|`` and the backslash pairs before it, the references the
    writer makes (line breaks, whitespace at the edges, with ``line_start`` a block's first character
    at the start), and ``&amp;`` where it stands before one of those (or before another such
    ``&amp;``). The rest is text as written."""
    lead, trail = _edges(raw)
    out: list[str] = []
    index = 0
    while index < len(raw):
        char = raw[index]
        if char == "\\":
            run_end = _backslashes_end(raw, index)
            if run_end < len(raw) and raw[run_end] == "|":
                out.append("\\" * ((run_end - index) // 2) + "|")
                index = run_end + 1
            else:
                out.append(raw[index:run_end])
                index = run_end
            continue
        if char == "&":
            found = _CHAR_REF_RE.match(raw, index)
            if found:
                referenced = _referenced(found[1])
                if _is_read(referenced, index < lead, index >= trail, line_start and index == 0):
                    out.append(referenced or "")
                    index = found.end()
                    continue
            elif raw.startswith(_AMP, index):
                # "&amp;" stands for "&" where the "&" alone would start a reference that is read
                referenced, end = _after_amps(raw, index + len(_AMP) - 1)
                if _is_read(referenced, index == lead, end >= trail, line_start and index == 0):
                    out.append("&")
                    index += len(_AMP)
                    continue
        out.append(char)
        index += 1
    return "".join(out)


def escape_cell(text: str, line_start: bool = False) -> str:
    """``text`` written so that ``split_cells`` reads it back exactly: ``\\|`` for a pipe (and a
    run of backslashes before a pipe doubled), a character reference (``&#10;``) for a line break
    and for whitespace at either end of the cell (which a reader strips), and ``&amp;`` for an ``&``
    only where the reader would otherwise take what follows for such a reference. With
    ``line_start`` (the text starts a header line, ``decode_cell`` reads it with the same flag), a
    first character that could start a block other than a paragraph is a reference too. Nothing
    else is touched; Markdown renders all of these as the text."""
    lead = len(text) - len(text.lstrip(_BLANKS))
    block = line_start and _starts_a_block(text)
    trail_start = len(text.rstrip(_BLANKS)) if text.strip(_BLANKS) else len(text)
    out: list[str] = []
    index = 0
    while index < len(text):
        char = text[index]
        if index < lead or index >= trail_start or char in LINE_BREAKS or (block and index == 0):
            out.append(f"&#{ord(char)};")
        elif char == "\\":
            run_end = _backslashes_end(text, index)
            run = text[index:run_end]
            out.append(run * 2 if run_end < len(text) and text[run_end] == "|" else run)
            index = run_end
            continue
        elif char == "|":
            out.append("\\|")
        elif char == "&" and _amp_is_read(text, index, lead, trail_start, line_start):
            out.append(_AMP)
        else:
            out.append(char)
        index += 1
    return "".join(out)


def _amp_is_read(text: str, index: int, lead: int, trail_start: int, line_start: bool = False) -> bool:
    """Whether an ``&`` at ``text[index]``, written as it is, would start what the reader decodes:
    ``&#N;`` of a line break, ``&#N;`` of whitespace just after the leading whitespace or just
    before the trailing whitespace, at the start of a header line ``&#N;`` of a block's first
    character, or ``&amp;`` (amp;)* before one of those."""
    referenced, end = _after_amps(text, index)
    return _is_read(referenced, index == lead, end == trail_start, line_start and index == 0)


def _ids_in_order(text: str, pattern: re.Pattern[str] = RECORD_ID_RE) -> list[str]:
    return list(dict.fromkeys(pattern.findall(text)))


def parse_page(text: str, source: str = "<page>", file_slug: str | None = None) -> ParsedPage:
    """Parse an index page. Raises ImportProblem, naming the line, for what cannot be understood.

    The topic's slug comes from its label; where the label has no letter or digit a slug can hold
    (``正則化``), from the page's file name (``file_slug``, the ``<slug>`` of ``<slug>.md``), if any."""
    lines = page_lines(text)

    def fail(line: int, message: str) -> ImportProblem:
        return ImportProblem(f"{source}:{line}: {message}")

    if len(lines) < 5:
        raise fail(len(lines) or 1, "too short for an index page (three header lines, then the table)")
    # Blanks at either end of each part are layout, as around a cell; the writer gives data blanks as references.
    title_part, _, description_part = (part.strip(_BLANKS) for part in lines[0].partition(DASH))
    scheme_title, scheme_description = decode_cell(title_part, line_start=True), decode_cell(description_part)
    if not scheme_description:
        raise fail(1, f"expected 'Topics — <description of the topic scheme>', got {lines[0][:60]!r}")
    label_part, _, scope_part = (part.strip(_BLANKS) for part in lines[1].partition(DASH))
    topic_label, topic_scope = decode_cell(label_part, line_start=True), decode_cell(scope_part)
    if not topic_label.strip():
        raise fail(2, "expected '<Topic label> — <scope note>'")
    count_match = COUNT_RE.match(lines[2].strip())
    if not count_match:
        raise fail(3, f"expected '<n> of <total> SOTA documents. Back to the full index.', got {lines[2][:60]!r}")
    for name in ("count", "total"):
        if len(count_match[name]) > MAX_COUNT_DIGITS:
            raise fail(
                3,
                f"the {name} {count_match[name][:12]}... has {len(count_match[name])} digits; a page counts "
                f"at most {MAX_COUNT_DIGITS}-digit numbers of documents: fix the count line",
            )
    if lines[3].strip() != HEADER:
        raise fail(4, f"expected the table header {HEADER!r}")
    if lines[4].replace(" ", "") != RULE:
        raise fail(5, f"expected the table rule {RULE!r}")

    page = ParsedPage(
        scheme_title=scheme_title,
        scheme_description=scheme_description,
        topic_label=topic_label,
        topic_scope=topic_scope or None,
        topic_slug=slugify(topic_label),
        topic_count=int(count_match["count"]),
        registry_size=int(count_match["total"]),
        rows=[],
        records=[],
    )
    if not page.topic_slug and file_slug is not None and SLUG_RE.fullmatch(file_slug):
        page.topic_slug = file_slug
        page.warnings.append(
            f"{source}:2: the topic label {page.topic_label!r} gives no slug (a slug holds a-z, 0-9 and '-'); "
            f"filed as {file_slug!r}, from the page's file name"
        )
    if not page.topic_slug:
        raise fail(
            2,
            f"the topic label {topic_label!r} gives no slug (a slug holds a-z, 0-9 and '-'); use such letters or "
            f"digits in the label, or name the page file <slug>.md",
        )
    seen_rows: dict[str, int] = {}
    blank_line, warned_of_blank = 0, False
    for number, line in enumerate(lines[5:], start=6):
        if not line.strip(_BLANKS):
            blank_line = blank_line or number
            continue
        if blank_line and not warned_of_blank:
            page.warnings.append(
                f"{source}:{blank_line}: a blank line inside the table (Markdown ends the table there); the rows "
                f"after it were imported too: remove the blank line"
            )
            warned_of_blank = True
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
    difference = _unreproduced(text, page)
    if difference:
        page.warnings.append(f"{source}:{difference}")
    return page


def _unreproduced(text: str, page: ParsedPage) -> str:
    """Where ``export index`` of what ``page`` says would not give ``text`` back byte for byte (the
    first place, as ``LINE: what``), or "" when it would: the page's layout (line ends, padding, row
    order, a spelling the writer does not use) is not data, so it is not kept."""
    rows = [
        PracticeRow(r.id, r.version, r.title, r.summary or "", r.status or "", r.reason or "", r.status_column or "")
        for r in page.rows
    ]
    written = render_page(
        page.scheme_title,
        page.scheme_description,
        page.topic_label,
        page.topic_scope,
        page.registry_size or 0,
        rows,
        page.topic_count,
    )
    if text == written:
        return ""
    keep = "; export index writes what the page says, not its layout"
    if "\r" in text:
        return f"1: the page ends its lines with CR LF or CR; export index writes LF{keep}"
    had, will = text.split("\n"), written.split("\n")
    for number, (line, again) in enumerate(zip(had, will, strict=False), start=1):
        if line != again:
            return f"{number}: export index will write this line as {again[:100]!r}, not {line[:100]!r}{keep}"
    if len(had) > len(will):
        return f"{len(will)}: export index ends the page after its last row, with no line end or blank line{keep}"
    return f"{len(had) + 1}: export index will write more lines than the page has{keep}"


def _parse_row(number: int, cells: list[str], warnings: list[str], source: str) -> PageRow:
    id_cell, title, summary, status_cell = cells
    match = PRACTICE_CELL_RE.match(id_cell)
    if not match:
        raise ImportProblem(
            f"{source}:{number}: expected a practice id such as 'SOTA-017' or 'SOTA-017 v2', got {id_cell!r}"
        )
    practice_id = match["id"]
    if len(practice_id) > MAX_ID_CHARS:
        raise ImportProblem(
            f"{source}:{number}: the practice id {practice_id[:24]}... has {len(practice_id)} characters; "
            f"an id has at most {MAX_ID_CHARS}: fix the id cell"
        )
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
    if not reason and status.endswith(DASH.rstrip()):  # "Rejected —": the cell's end was stripped
        status = status[: -len(DASH.rstrip())]
    status = status.strip()
    if status and status not in STATUSES:
        warnings.append(f"{where}: unknown status {status!r} (expected one of {', '.join(STATUSES)}); kept as written")
    if status == "Rejected" and not reason.strip():
        warnings.append(f"{where}: rejected without a reason")
    if not title:
        warnings.append(f"{where}: the title column is empty; imported without a title")
    return PageRow(number, practice_id, version, title, summary or None, status or None, reason or None, status_column)


def _locator_at(text: str, at: int) -> tuple[str, str, str | None, int] | None:
    """The locator at ``text[at:]`` after a byline: its kind (``arxiv``, ``url``, or ``locator`` for one
    that cannot be read), its text, an arXiv version if any, and where it ends (before the
    punctuation after it); None if there is none."""
    arxiv = ARXIV_RE.match(text, at)
    if arxiv:
        return "arxiv", arxiv["arxiv"], arxiv["version"], arxiv.end()
    for group, pattern in (("url", URL_RE), ("locator", LOCATOR_RE)):
        found = pattern.match(text, at)
        if found:
            value = found[group].rstrip(_TRAILING_PUNCTUATION)
            kind = "locator" if group == "url" and not GOOD_URL_RE.fullmatch(value) else group
            return kind, value, None, found.start(group) + len(value)
    return None


def _locator(text: str, at: int, warnings: list[str], where: str, lit: str) -> dict[str, Any]:
    """The paper facts of the locator at ``text[at:]`` after a byline (`` — ARXIV-1811.06965.`` or
    `` — https://...``).

    A locator that looks like one but cannot be read is kept verbatim (``locator``), with a warning,
    so that validate reports it on the paper instead of the import dropping it."""
    found = _locator_at(text, at)
    if found is None:
        return {}
    kind, value, version, _ = found
    if kind == "arxiv":
        return {"arxiv": value, "arxiv_version": int(version)} if version else {"arxiv": value}
    if kind == "url":
        return {"url": value}
    warnings.append(
        f"{where}: cannot read the locator {value!r} of {lit} (expected ARXIV-YYMM.NNNNN "
        f"or an http(s) URL); kept verbatim as the paper's `locator`, which validate reports"
    )
    return {"locator": value}


#: The lowercase words a list of authors holds: "et al.", "and", "others", and the particles of names.
_AUTHOR_LOWER_WORDS = frozenset(
    "et al al. and & others van von de der den da das di du del della dos le la bin ibn ter ten zu y las los do"
    " e degli dei delle af av op vom zum zur lo el al ben bint abu des het".split()
)
#: A name after a particle joined by a hyphen: ``al-Rashid``, ``el-Sayed``, ``ibn-Sina``.
_HYPHENED_PARTICLE_RE = re.compile(r"[a-z]{1,4}-(?P<name>.+)", re.S)
#: A name after an elided particle: ``d'Ascoli``, ``d’Ascoli`` (U+2019), ``l'Hôpital``, ``dell'Oro``.
_ELIDED_PARTICLE_RE = re.compile(r"(?:d|l|dell|dall)['’](?P<name>.+)", re.S)
_ET_AL_RE = re.compile(r"\bet al\b", re.ASCII)
#: An "et al." with more after it: another group of authors begins.
_ET_AL_THEN_MORE_RE = re.compile(r"\bet al\b\.?+\s*+\S", re.ASCII)


_REFERENCE_RE = re.compile(r"&(?:#([0-9]{1,7})|#[xX]([0-9A-Fa-f]{1,6})|([A-Za-z][A-Za-z0-9]{0,31}));")


def decode_references(text: str) -> str:
    """``text`` with the character references CommonMark decodes replaced by their characters: a
    decimal or hexadecimal one (U+FFFD for a code point that is none, or 0), or an HTML5 entity name
    with its ``;``. Anything else (``&amp`` without ``;``, ``&nosuch;``) is text, as Markdown shows it."""

    def character(match: re.Match[str]) -> str:
        if match[3] is not None:
            return html.entities.html5.get(match[3] + ";", match[0])
        code = int(match[1]) if match[1] is not None else int(match[2], 16)
        return chr(code) if 0 < code <= 0x10FFFF and not 0xD800 <= code <= 0xDFFF else "\ufffd"

    return _REFERENCE_RE.sub(character, text)


def _particle_name(word: str) -> bool:
    """Whether ``word`` is one of the lowercase words of names (``_AUTHOR_LOWER_WORDS``) or a capitalised
    name after an elided particle (``d'Ascoli``, ``l'Hôpital``)."""
    if word.lower() in _AUTHOR_LOWER_WORDS:
        return True
    joined = _ELIDED_PARTICLE_RE.fullmatch(word) or _HYPHENED_PARTICLE_RE.fullmatch(word)
    return joined is not None and joined["name"][0].isupper()


#: English words that open a sentence and are nobody's name: "Not Smith (2020), LIT-920", "Unlike
#: Jones (2019), LIT-701", "See Smith (2020), LIT-917", "Contra Smith et al. (2020)" name a paper
#: without resting on it. Only the first word is looked at, and words that are also names (So, No,
#: To, In, An, He, Per, Pace, Even, May, Will, ...) are not here: a byline of theirs must stay one.
_PROSE_OPENERS = frozenset(
    """not unlike see contra cf also unpublished retracted disputed refuted contrary despite following
    against although though however whereas because unless until if when whether without from according
    extending extends building refuting confirming replicating reproducing cited citing quoting the this
    that these those our their we they it its both either neither compare contrast e.g. i.e. after before
    like with beyond via for on over under through across between during within upon about around toward
    towards into onto amid among at of as by than""".split()
) | {word.lower() for word in _LINKING_WORDS}


def _names_only(authors: str) -> bool:
    """Whether ``authors`` reads as names (``Huang et al.``, ``J. Smith and K. Lee``, ``de Vries``,
    ``d'Ascoli et al.``, ``Łukasz Kaiser and others``, ``DeVries &amp; Taylor``, ``李 et al.``), not prose before them
    (``See also Narayanan et al.``, ``Later work by Smith``, ``Not Smith``, ``Retracted: Lee``): no
    opening word of prose (``_PROSE_OPENERS``), no colon."""
    # Emphasis marks around a word are Markdown's, not the name's: "Kwon *et al.*", "_et al._".
    words = [word.strip("*_") or word for word in authors.replace(",", " ").split()]
    # A name opens with a capital, or with a letter of a script without case (李, محمد), or a particle.
    if not words or not ((words[0][0].isalpha() and not words[0][0].islower()) or _particle_name(words[0])):
        return False
    if ":" in authors or words[0].rstrip(".").lower() in _PROSE_OPENERS or words[0].lower() in _PROSE_OPENERS:
        return False
    if any(character.isdigit() for character in authors):  # "In 2021, Narayanan": a date, no name
        return False
    return all(not word[0].islower() or _particle_name(word) for word in words)


def _several_author_groups(authors: str) -> bool:
    """Whether a byline's authors may be more than one group of them: ``Zhao et al. and Rajbhandari``,
    ``Zhao et al., Lee et al.`` (an "et al." ends a group; another name after one, or a second one,
    starts the next). ``Douillard et al.`` and ``Smith and Jones`` are one group."""
    et_als = _ET_AL_RE.findall(authors)
    return len(et_als) > 1 or (len(et_als) == 1 and _ET_AL_THEN_MORE_RE.search(authors) is not None)


def _opening_citation(summary: str) -> re.Match[str] | None:
    """The list of papers a summary opens with, byline-shaped though perhaps unreadable
    (``OPENING_CITATION_RE``): ``Doe (in press), LIT-901``, ``Smith et al., LIT-100``, ``LIT-100``.
    None when the summary opens otherwise (``Unlike LIT-101, ...``, ``Not supported by LIT-100``)."""
    found = OPENING_CITATION_RE.match(summary)
    if found is None or found["names"] is None:
        return found
    names = found["names"]
    if _SENTENCE_IN_AUTHORS_RE.search(names) or not _names_only(names):
        return None
    return found


def _bylines(summary: str) -> list[re.Match[str]]:
    """The bylines a summary opens with: the first at its start, each next one after ``; `` or ``. ``
    (past the locator of the one before). A byline is followed by a locator, `` — `` or ``: `` and a
    note, a separator or the end of the summary, and its authors hold no end of a sentence: anything
    else is prose, not a byline."""
    found: list[re.Match[str]] = []
    at = 0
    while (byline := BYLINE_RE.match(summary, at)) is not None:
        if _SENTENCE_IN_AUTHORS_RE.search(byline["authors"]) or not _names_only(byline["authors"]):
            break
        locator = _locator_at(summary, byline.end())
        end = byline.end() if locator is None else locator[3]
        separator = BYLINE_SEPARATOR_RE.match(summary, end)
        followed = summary.startswith((DASH, _NOTE_COLON), end) or not summary[end:].strip().strip(
            _TRAILING_PUNCTUATION
        )
        if locator is None and separator is None and not followed:
            break  # words right after it: prose ("Later work by Smith (2020), LIT-017 showed more")
        found.append(byline)
        if separator is None:
            break
        at = separator.end()
    return found


def _sentence(text: str, start: int, end: int, stops: list[tuple[int, int]]) -> tuple[int, int, str]:
    """Where the sentence around ``text[start:end]`` starts and ends, and what ends it (``.``, ``!``,
    ``?``, or "" at a line break or the end of the text). ``stops``: each end of a sentence
    (``SENTENCE_END_RE``) of the text, in order."""
    before = bisect.bisect_left(stops, (start, -1)) - 1  # the last stop that starts before start
    begin = stops[before][1] if before >= 0 else 0
    after = bisect.bisect_left(stops, (end, -1))
    if after < len(stops):
        return begin, stops[after][0], text[stops[after][0] : stops[after][1]].strip()
    return begin, len(text), ""


def _hedged(sentence: str) -> bool:
    return NOT_STATED_RE.search(sentence) is not None or HEDGE_RE.search(sentence) is not None


def _plainly_stated(text: str, match: re.Match[str], stops: list[tuple[int, int]]) -> tuple[bool, str]:
    """Whether a prose supersession is stated plainly: its sentence is just the statement (an active
    or passive verb in the present or past, no modal, no infinitive), after at most a few linking
    words (``PLAIN_LEAD_WORDS``), and ends with a full stop or the text. Returns the verdict and the
    sentence, for the warning."""
    begin, stop, ending = _sentence(text, match.start(), match.end(), stops)
    if stop - begin > SENTENCE_CHARS:
        return False, text[max(begin, match.start() - 40) : match.end() + 40]
    before, after = text[begin : match.start()], text[match.end() : stop]
    auxiliary = match["auxiliary"].lower()
    verb = match["verb"].lower()
    if match["by"]:
        plain_verb = verb in {"superseded", "replaced"} and auxiliary in _PLAIN_PASSIVE
    else:
        plain_verb = verb in _PLAIN_ACTIVE and auxiliary == ""
    lead = before.split()
    plain = (
        plain_verb
        and ending in (".", "!", "")
        and not after.strip()
        and all(word.lower() in PLAIN_LEAD_WORDS for word in lead)
    )
    return plain, text[begin:stop].strip()


#: An ADR listed just before an aside's ADR, by any separator (``ADR-020 and ``, ``ADR-020, ``,
#: ``ADR-020 & ``, ``ADR-020/``, ``ADR-020 or ``, ``ADR-020 as well as ``): the aside is then shared
#: by the list, and the page does not say which of them it is about.
_LISTED_BEFORE_RE = re.compile(
    r"ADR-\d+\s*+(?:[,;]\s*+)?(?:(?:and/or|and|or|nor|plus|as well as|&amp;|[&/+|])\s*+)?\Z", re.I | re.ASCII
)


def _stated_aside(text: str, match: re.Match[str], stops: list[tuple[int, int]]) -> tuple[bool, str]:
    """Whether an aside supersession (``ADR-026 (superseding ADR-020)``) is stated: its sentence
    neither hedges nor denies (``_hedged``), and the aside is not shared by a list of ADRs
    (``ADR-020 and ADR-021 (superseded by ADR-026)``). Returns the verdict and the sentence."""
    begin, stop, ending = _sentence(text, match.start(), match.end(), stops)
    if stop - begin > SENTENCE_CHARS:
        return False, text[max(begin, match.start() - 40) : match.end() + 40]
    sentence = text[begin:stop].strip()
    listed = _LISTED_BEFORE_RE.search(text, max(begin, match.start() - 32), match.start())
    return ending != "?" and not _hedged(sentence) and listed is None, sentence


def _supersede(adrs: dict[str, dict[str, Any]], new: str, old: str, warnings: list[str], where: str) -> None:
    older = adrs.setdefault(old, {"id": old})
    if older.get("superseded_by", new) != new:
        warnings.append(
            f"{where}: {new} supersedes {old}, which the page already has superseded by {older['superseded_by']}; "
            f"kept the first (an ADR is superseded by one other)"
        )
        return
    newer = adrs.setdefault(new, {"id": new})
    newer["supersedes"] = sorted(set(newer.get("supersedes", [])) | {old})
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
        if row.reason and row.status == "Rejected":
            practice["reason"] = row.reason
            named = [i for i in _ids_in_order(row.reason) if i != row.id]
            if named:
                practice["reason_names"] = sorted(named)
        elif row.reason:
            # "Proposed — awaits a second source", "Superseded — by SOTA-017" (an unknown status): a note on
            # the status, never a rejection reason (only a rejected practice has one)
            practice["status_note"] = row.reason
        summary = row.summary or ""
        where = f"{source}:{row.line}: row {row.id}"
        bylines = _bylines(summary)
        # A practice cites the papers of its bylines, and of the list of papers its summary opens with (a
        # byline the import cannot read: "Doe (in press), LIT-901."); a paper named elsewhere is only named.
        opening = _opening_citation(summary)
        opening_lits = "" if opening is None else opening["lits"]
        cites = _ids_in_order(" ".join([opening_lits, *(b["lits"] for b in bylines)]), LIT_RE)
        named_only = [lit for lit in _ids_in_order(summary, LIT_RE) if lit not in cites]
        if named_only:
            page.warnings.append(
                f"{where}: {', '.join(named_only)} named in the summary outside its bylines; not recorded as cited "
                f"(the summary keeps the text)"
            )
        if cites:
            practice["cites"] = sorted(cites)
        practice["topic"] = page.topic_slug
        practices.append(practice)
        lines[("practice", row.id)] = row.line
        for lit in cites:
            papers.setdefault(lit, {"id": lit})
            lines.setdefault(("paper", lit), row.line)
        read: set[str] = set()
        for byline in bylines:
            lits = _ids_in_order(byline["lits"], LIT_RE)
            years = [int(y[:4]) for y in byline["years"].split(", ")]
            # as the page shows them: "DeVries &amp; Taylor" is DeVries & Taylor
            facts_each: dict[str, Any] = {"authors": decode_references(byline["authors"].strip())}
            if len(lits) > 1 and _several_author_groups(byline["authors"]):
                # "Zhao et al. and Rajbhandari et al. (2022, 2020), LIT-083 and LIT-027": each its own
                page.warnings.append(
                    f"{where} gives {len(lits)} papers to the authors {byline['authors'].strip()!r}, who may each "
                    f"have written one; no authors were assigned (give each paper its own byline)"
                )
                facts_each = {}
            if len(years) != len(lits):
                page.warnings.append(
                    f"{where} gives {len(years)} years for {len(lits)} papers; the years were not assigned"
                )
            for index, lit in enumerate(lits):
                facts = dict(facts_each)
                if len(years) == len(lits):
                    facts["year"] = years[index]
                if len(lits) == 1:
                    facts.update(_locator(summary, byline.end(), page.warnings, where, lit))
                elif index == 0 and LOCATOR_RE.match(summary, byline.end()):
                    page.warnings.append(
                        f"{where} gives one locator after {len(lits)} papers; it was "
                        f"not assigned to any of them (give each paper its own row or byline)"
                    )
                note_paper(lit, facts, row)
                read.add(lit)
        unread = [lit for lit in cites if lit not in read]
        if unread:
            # The locator after a byline the import cannot read is read as after one it can read.
            located = ""
            opened = _ids_in_order(opening_lits, LIT_RE)
            if opening is not None and len(opened) == 1 and opened[0] in unread:
                facts = _locator(summary, opening.end("lits"), page.warnings, where, opened[0])
                if facts:
                    note_paper(opened[0], facts, row)
                    located = "; its locator was read"
            elif opening is not None and LOCATOR_RE.match(summary, opening.end("lits")):
                page.warnings.append(
                    f"{where} gives one locator after {len(opened)} papers; it was "
                    f"not assigned to any of them (give each paper its own row or byline)"
                )
            page.warnings.append(
                f"{where}: could not read authors and year for {', '.join(unread)} from {summary[:60]!r} (a byline "
                f"reads 'Authors (year), LIT-NNN'); cited, and imported without them{located}"
            )
        for text in (row.title, row.reason or "", row.summary or ""):
            for adr in _ids_in_order(text, ADR_RE):
                adrs.setdefault(adr, {"id": adr})
                lines.setdefault(("adr", adr), row.line)

    # The header and the topic's scope line cite ADRs ("... (ADR-026)"): that makes them records (given on
    # the first line that names them), and nothing more; a supersession they state is read as in a row.
    for line, text in ((1, page.scheme_description), (2, page.topic_scope or "")):
        for adr in _ids_in_order(text, ADR_RE):
            adrs.setdefault(adr, {"id": adr})
            lines[("adr", adr)] = min(lines.get(("adr", adr), line), line)
    texts = [(1, page.scheme_description), (2, page.topic_scope or "")]
    texts += [(r.line, text) for r in page.rows for text in (r.title, r.reason or "", r.summary or "") if text]
    for line, text in texts:
        where = f"{source}:{line}"
        if SUPERSESSION_WORD_RE.search(text) is None:
            continue
        stops = [found.span() for found in SENTENCE_END_RE.finditer(text)]
        judged: list[tuple[int, int]] = []  # the spans of the supersessions imported or warned of
        asides = [(match, True) for match in SUPERSEDES_ASIDE_RE.finditer(text)]
        for match, aside in asides + [(match, False) for match in SUPERSEDES_PROSE_RE.finditer(text)]:
            judged.append(match.span())
            stated, sentence = (_stated_aside if aside else _plainly_stated)(text, match, stops)
            if not stated:
                page.warnings.append(
                    f"{where}: {match.group()!r} is not imported as a supersession: its sentence does not plainly "
                    f"state it ({sentence[:80]!r}); add it to the ADRs by hand if it holds"
                )
            elif aside:
                _supersede(adrs, match["new"] or match["new2"], match["old"] or match["old2"], page.warnings, where)
            else:
                first, second = match["first"], match["second"]
                new, old = (second, first) if match["by"] else (first, second)
                _supersede(adrs, new, old, page.warnings, where)
        if ADR_RE.search(text) is None:
            continue
        judged.sort()
        for word in SUPERSESSION_WORD_RE.finditer(text):
            inside = bisect.bisect_right(judged, (word.start(), len(text))) - 1
            if inside < 0 or not judged[inside][0] <= word.start() < judged[inside][1]:
                page.warnings.append(
                    f"{where}: {word.group()!r} ({text[max(0, word.start() - 30) : word.end() + 30]!r}) may state a "
                    f"supersession of ADRs in a form the import does not read; none was imported: add it to the "
                    f"ADRs by hand if it holds"
                )
                break  # one warning a text

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
    topic_count: int | None = None,
) -> str:
    """The index page of one topic, in the published format (no newline after the last row).
    ``topic_count`` is the number of practices the page declares ("42 of 449"); without one, the
    number of rows."""
    rows = sorted(rows, key=lambda r: _id_key(r.id))
    # The header lines are written as cells are: a line break in a title or a scope would otherwise
    # start lines of its own (a heading, a table row, a link definition) that no record states.
    # Their first characters too: "# x" or "<!--" would start a heading or a comment, "===" under the
    # first line make it a heading.
    label = escape_cell(topic_label, line_start=True)
    head = f"{label}{DASH}{escape_cell(topic_scope)}" if topic_scope else label
    lines = [
        f"{escape_cell(scheme_title, line_start=True)}{DASH}{escape_cell(scheme_description)}",
        head,
        f"{len(rows) if topic_count is None else topic_count} of {registry_size} SOTA documents. "
        "Back to the full index.",
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


def _id_key(record_id: str) -> tuple[str, int, str, str]:
    # Numeric order without int(): a number of any length (Python refuses to convert more than
    # 4,300 digits) orders by its digits' count, then by its digits, leading zeros left out.
    prefix, _, number = record_id.partition("-")
    if not (number.isascii() and number.isdigit()):
        return (prefix, -1, "", record_id)
    digits = number.lstrip("0") or "0"
    return (prefix, len(digits), digits, record_id)


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


_LINK_TEXT_SPECIALS = re.compile(r"[\\\[\]]")


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
        f"{escape_cell(scheme_title, line_start=True)}{DASH}{escape_cell(scheme_description)}",
        f"{filed} of {registry_size} SOTA documents in {len(rows)} topic{'s' if len(rows) != 1 else ''}.",
        FULL_INDEX_HEADER,
        FULL_INDEX_RULE,
    ]
    for topic in rows:
        # every backslash and bracket escaped: a label's own "\\]" must not close the link text
        label = escape_cell(_LINK_TEXT_SPECIALS.sub(r"\\\g<0>", topic.label))
        link = f"[{label}]({topic_page_name(topic.slug)})"
        lines.append(f"| {link} | {escape_cell(topic.scope)} | {topic.count} |")
    return "\n".join(lines)
