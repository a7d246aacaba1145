"""YAML -> RDF -> YAML is lossless, and so is a record -> index page row -> record (hypothesis over
generated records and titles)."""

from __future__ import annotations

import re
import string
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyoxigraph import Store

from sotakg.graph.rdf import anthology_triples, as_quads, record_triples, records_from_triples
from sotakg.records.indexpage import (
    ARXIV_ID,
    DASH,
    PracticeRow,
    TopicRow,
    escape_cell,
    page_lines,
    parse_page,
    render_full_index,
    render_page,
    split_cells,
)
from sotakg.records.schema import (
    HIGHEST,
    LOWEST,
    Anthology,
    Record,
    atomic_write_text,
    dump_record,
    load_anthology,
    record_path,
)

identifier = st.from_regex(r"\A[A-Za-z0-9][A-Za-z0-9._-]{0,12}\Z")
# Records refuse control characters other than tab and newline in text.
CONTROLS = "".join(chr(c) for c in (*range(0, 9), *range(11, 32), *range(127, 160)))
text = st.text(st.characters(exclude_categories=("Cs",), exclude_characters=CONTROLS), min_size=1, max_size=40).filter(
    lambda value: value.strip() != ""
)
ids = st.lists(identifier, min_size=1, max_size=4, unique=True).map(sorted)


def optional(fields: dict) -> st.SearchStrategy[dict]:
    return st.fixed_dictionaries({}, optional=fields)


practices = st.builds(
    lambda number, fields: {"id": f"SOTA-{number:03d}", **fields},
    st.integers(0, 999),
    optional(
        {
            "version": st.integers(1, 5),
            "title": text,
            "summary": text,
            "status": st.sampled_from(["Active", "Proposed", "Rejected", "Withdrawn"]),
            "reason": text,
            "status_note": text,
            "reason_names": ids,
            "cites": ids,
            "topic": identifier,
        }
    ),
)
papers = st.builds(
    lambda number, fields: {"id": f"LIT-{number:03d}", **fields},
    st.integers(0, 999),
    optional(
        {
            "title": text,
            "authors": text,
            "year": st.integers(LOWEST["year"], HIGHEST["year"]),
            "arxiv": st.from_regex(ARXIV_ID, fullmatch=True),
            "arxiv_version": st.integers(1, 20),
            "url": st.sampled_from(["https://example.org/a", "http://x.test/p?q=1"]),
            "locator": text,
            "topic": identifier,
        }
    ),
)
adrs = st.builds(
    lambda number, fields: {"id": f"ADR-{number:03d}", **fields},
    st.integers(0, 999),
    optional(
        {
            "title": text,
            "status": st.sampled_from(["Accepted", "Superseded"]),
            "summary": text,
            "supersedes": ids,
            "superseded_by": identifier,
        }
    ),
)
topics = st.builds(
    lambda slug, fields: {"id": slug, **fields},
    st.text(string.ascii_lowercase + "-", min_size=1, max_size=12).filter(lambda s: s[0] != "-"),
    optional({"label": text, "scope": text, "declared_size": st.integers(0, 10_000)}),
)
registry = optional({"title": text, "description": text, "declared_size": st.integers(0, 10_000), "governed_by": ids})


def unique(records: list[Record]) -> list[Record]:
    seen: dict[tuple[bool, str], Record] = {}
    for record in records:
        seen.setdefault((record.kind == "topic", record.id), record)
    return list(seen.values())


anthologies = st.builds(
    lambda ps, ls, ads, ts, reg: unique(
        [Record("practice", p["id"], p) for p in ps]
        + [Record("paper", p["id"], p) for p in ls]
        + [Record("adr", a["id"], a) for a in ads]
        + [Record("topic", t["id"], t) for t in ts]
        + [Record("registry", "registry", reg)]
    ),
    st.lists(practices, max_size=4),
    st.lists(papers, max_size=4),
    st.lists(adrs, max_size=3),
    st.lists(topics, max_size=2),
    registry,
)


def comparable(records: list[Record]) -> list[tuple[str, str, dict]]:
    return sorted((r.kind, r.id, r.fields) for r in records)


@given(anthologies)
@settings(max_examples=150, deadline=None)
def test_records_to_rdf_and_back_are_equal(records):
    triples = [t for r in records for t in record_triples(r)]
    assert comparable(records_from_triples(triples)) == comparable(records)


@given(anthologies)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_yaml_files_to_store_and_back_are_equal(tmp_path_factory, records):
    data = Path(tmp_path_factory.mktemp("data"))
    for record in records:
        atomic_write_text(record_path(data, record), dump_record(record))
    loaded = load_anthology(data)
    assert comparable(loaded.records) == comparable(records)
    store = Store()
    store.extend(as_quads(anthology_triples(Anthology(loaded.records))))
    back = records_from_triples(q.triple for q in store)
    assert comparable(back) == comparable(records)
    for record in back:
        assert dump_record(record) == record_path(data, record).read_text(encoding="utf-8")


# ------------------------------------------------------------------------------ index page cells

#: Any text a record may hold, with the characters that end a line or start an escape made likely.
awkward = (
    st.lists(
        st.one_of(
            st.characters(exclude_categories=("Cs",), exclude_characters="\x00"),
            st.sampled_from(list("|\\&#;\r\n\t \u2028\u2029\x85\x0b\x0c\x1c")),
            st.sampled_from(["&amp;", "&#124;", "\\|", "&#10;", " — "]),
        ),
        min_size=1,
        max_size=30,
    )
    .map("".join)
    .filter(lambda value: value.strip() != "")
)


@given(st.lists(awkward, min_size=1, max_size=4))
@settings(max_examples=300, deadline=None)
def test_any_cell_text_comes_back_from_a_table_row(cells):
    row = "| " + " | ".join(escape_cell(cell) for cell in cells) + " |"
    assert len(page_lines(row)) == 1
    assert split_cells(row) == cells


@given(awkward, awkward, awkward)
@settings(max_examples=150, deadline=None)
def test_any_title_summary_and_reason_round_trip_through_a_page(title, summary, reason):
    row = PracticeRow("SOTA-001", 3, title, summary, "Rejected", reason)
    page = render_page("Topics", "The scheme.", "A topic", "its scope.", 10, [row])
    parsed = parse_page(page)
    practice = dict(parsed.records)["practice"]
    assert (practice["title"], practice["summary"], practice["reason"], practice["version"]) == (
        title,
        summary,
        reason,
        3,
    )
    assert render_page("Topics", "The scheme.", "A topic", "its scope.", 10, [row]) == page


@given(awkward.filter(lambda text: DASH not in text), awkward.filter(lambda text: DASH not in text))
@settings(max_examples=150, deadline=None)
def test_the_header_lines_hold_any_title_and_scope_on_their_own_lines(label, scope):
    row = PracticeRow("SOTA-001", 1, "A title", "A summary.", "Active", "")
    hostile = "\n\n# Injected\n\n| SOTA-999 | Invented | made up | Active |\n[LIT-051]: https://evil.example"
    label = "Topic " + label  # a label with a letter gives the page its slug
    page = render_page("Topics" + hostile, "The scheme." + hostile, label, scope + hostile, 10, [row])
    assert len(page_lines(page)) == 6  # three header lines, the table's head and rule, one row
    parsed = parse_page(page)
    assert (parsed.scheme_title, parsed.scheme_description) == ("Topics" + hostile, "The scheme." + hostile)
    assert (parsed.topic_label, parsed.topic_scope) == (label, scope + hostile)
    assert [record["id"] for kind, record in parsed.records if kind == "practice"] == ["SOTA-001"]


BLOCK_STARTS = st.sampled_from(
    ["# ", "###### ", "<!-- ", "<div>", "<script>", "> ", "- ", "+ ", "* ", "1. ", "7) ", "---", "===", "***", "___",
     "```", "~~~", "[x]: https://evil.example", "| a | b |", "    ", "\t", "&#35; ", "&amp;#60;", "2024 "]
)  # fmt: skip


@given(BLOCK_STARTS, awkward.filter(lambda text: DASH not in text), BLOCK_STARTS, BLOCK_STARTS)
@settings(max_examples=200, deadline=None)
def test_a_header_line_starting_like_a_markdown_block_stays_the_page_s_first_paragraph(start, rest, label, full):
    """Rendered by a CommonMark reader with tables, the three header lines are one paragraph (no
    heading, comment, list, rule or code) before the table, whatever the title and the label start
    with, and the page reads back; so does the full index's first line."""
    from markdown_it import MarkdownIt

    markdown = MarkdownIt("commonmark").enable("table")
    row = PracticeRow("SOTA-001", 1, "A title", "A summary.", "Active", "")
    title, label = start + rest, label + "Topic"
    page = render_page(title, "The scheme.", label, "its scope.", 10, [row])
    kinds = [token.type for token in markdown.parse(page)]
    assert kinds[:4] == ["paragraph_open", "inline", "paragraph_close", "table_open"], (page, kinds)
    assert kinds.count("tr_open") == 2  # the head and the one row
    parsed = parse_page(page)
    assert (parsed.scheme_title, parsed.topic_label) == (title, label)
    index = render_full_index(full + "Topics", "The scheme.", 10, [TopicRow("t", "T", "s", 1)])
    assert [token.type for token in markdown.parse(index)][:4] == kinds[:4]


@pytest.mark.parametrize("title", ["-based methods", "*Optional* topics", "[Draft] Topics", "2024 topics", "#1 topics"])
def test_a_header_line_that_only_looks_like_a_block_is_written_as_it_is(title):
    row = PracticeRow("SOTA-001", 1, "A title", "A summary.", "Active", "")
    page = render_page(title, "The scheme.", "Topic " + title, "its scope.", 10, [row])
    assert page.startswith(f"{title} — The scheme.\nTopic {title} — its scope.\n")
    assert parse_page(page).scheme_title == title


@pytest.mark.parametrize("label", ["===", "--", "- x", "# x"])
def test_a_label_alone_that_would_make_the_line_above_a_heading_is_written_as_a_reference(label):
    """With no scope the label is the whole second line: "===" or "--" there would underline the first."""
    from markdown_it import MarkdownIt

    row = PracticeRow("SOTA-001", 1, "A title", "A summary.", "Active", "")
    page = render_page("Topics", "The scheme.", label, None, 10, [row])
    kinds = [token.type for token in MarkdownIt("commonmark").enable("table").parse(page)]
    assert kinds[:4] == ["paragraph_open", "inline", "paragraph_close", "table_open"], page
    assert parse_page(page, file_slug="t").topic_label == label


def test_a_reference_inside_a_header_line_is_text_as_written():
    row = PracticeRow("SOTA-001", 1, "A title", "A summary.", "Active", "")
    page = render_page("C&#35; tips &#35;1", "The scheme.", "Topic", "&#45; scope", 10, [row])
    parsed = parse_page(page)
    assert (parsed.scheme_title, parsed.topic_scope) == ("C&#35; tips &#35;1", "&#45; scope")


def test_a_topic_label_cannot_end_its_link_in_the_full_index():
    page = render_full_index("Topics", "The scheme.", 10, [TopicRow("t", "Label\\](https://evil.example) \\[", "s", 1)])
    assert page.splitlines()[-1] == "| [Label\\\\\\](https://evil.example) \\\\\\[](t.md) | s | 1 |"


def test_escapes_read_as_markdown_would_show_them():
    assert escape_cell("a|b") == "a\\|b"
    # Markdown ends a line at LF and CR only; U+2028 and the like are text in a cell
    assert escape_cell("line\nbreak\r\u2028here") == "line&#10;break&#13;\u2028here"
    assert escape_cell(" padded ") == "&#32;padded&#32;"
    assert escape_cell("R&D &amp; co") == "R&D &amp; co"  # no reference the reader would decode
    assert escape_cell("a &#10; literally") == "a &amp;#10; literally"
    assert escape_cell("ends in \\") == "ends in \\"  # the row's padding keeps it off the pipe
    assert escape_cell("pipe after \\|") == "pipe after \\\\\\|"
    assert escape_cell("C:\\path") == "C:\\path"  # a backslash that escapes nothing is left alone


#: What a published page may hold in a cell as written: entities and backslashes the writer never
#: makes (kept verbatim), and the escapes it does make.
_page_cell = st.lists(
    st.sampled_from(
        ["&", "amp;", "#", "10;", "169;", ";", "&#10;", "&#13;", "&#169;", "&#124;", "&amp;", "&lt;", "&copy;"]
        + ["\\\\", "\\|", "\\", "\\*", " ", "a", "é", "\u2028", "\x85", "’", ">"]
    ),
    max_size=14,
).map(lambda parts: "".join(parts).strip())


@given(_page_cell)
@settings(max_examples=400, deadline=None)
def test_a_page_cell_read_and_written_again_is_as_written(raw):
    row = f"| {raw} | b | c | d |" if raw else "| | b | c | d |"
    cells = split_cells(row)
    if len(cells) != 4 or raw.endswith("\\") or re.search(r"^(?:&#\d+;)+\s|\s(?:&#\d+;)+$", raw):
        # an unescaped pipe; a backslash run that escapes the cell's own end; whitespace at an edge
        # written partly as a reference and partly as itself: none of them a cell the writer makes
        return
    assert escape_cell(cells[0]) == raw


@pytest.mark.parametrize(
    ("raw", "text"),
    [
        ("Entities &amp; more", "Entities &amp; more"),
        ("&#169; &#124; &lt;", "&#169; &#124; &lt;"),
        ("5 &amp;&amp; 6", "5 &amp;&amp; 6"),
        ("C:\\\\temp and a\\\\b", "C:\\\\temp and a\\\\b"),
        ("a\\|b", "a|b"),
        ("a\\\\\\|b", "a\\|b"),
        ("line&#10;break", "line\nbreak"),
        ("&amp;#10;", "&#10;"),
        ("&#32;edge&#32;", " edge "),
        ("mid&#32;dle", "mid&#32;dle"),
    ],
)
def test_a_cell_decodes_only_what_the_writer_escapes(raw, text):
    assert split_cells(f"| {raw} | b | c | d |")[0] == text
    assert escape_cell(text) == raw
