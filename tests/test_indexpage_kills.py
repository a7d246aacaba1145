"""records/indexpage.py: the cases the mutation run of the index-page parser and writer showed untested.

Each test holds one function of the module to its exact output (the records, the warnings, the cells,
the rendered page), on the inputs whose handling a surviving mutant changed: the full index page, the
sentence-length bound of a supersession, a character reference past Unicode, and so on."""

from __future__ import annotations

from typing import Any

import pytest

from sotakg.records.indexpage import (
    ParsedPage,
    PracticeRow,
    TopicRow,
    parse_page,
    render_full_index,
    render_page,
    split_cells,
)

HEAD = (
    "Topics — The kinds of claim.\n"
    "Pruning — sparsity.\n"
    "{count} of 449 SOTA documents. Back to the full index.\n"
    "| # | Title | Summary | Status |\n"
    "|---|---|---|---|\n"
)


def _page(*rows: str, count: int | None = None) -> ParsedPage:
    """A page of these table rows (the count line gives their number unless told otherwise)."""
    text = HEAD.format(count=len(rows) if count is None else count) + "\n".join(rows)
    return parse_page(text)


def _row(summary: str, title: str = "T", status: str = "Active", practice: str = "SOTA-001") -> str:
    return f"| {practice} | {title} | {summary} | {status} |"


def _records(page: ParsedPage, kind: str) -> list[dict[str, Any]]:
    return [fields for record_kind, fields in page.records if record_kind == kind]


def _adrs(page: ParsedPage) -> dict[str, dict[str, Any]]:
    return {adr["id"]: adr for adr in _records(page, "adr")}


# ------------------------------------------------------------------------------ the full index


def test_the_full_index_lists_the_topics_in_slug_order_with_their_counts_summed():
    text = render_full_index(
        "Topics",
        "The kinds.",
        449,
        [TopicRow("b-x", "B [x]", "scope|b", 3), TopicRow("a", "A", "sa", 2)],
    )
    assert text == (
        "Topics — The kinds.\n"
        "5 of 449 SOTA documents in 2 topics.\n"
        "| Topic | Scope | Count |\n"
        "|---|---|---|\n"
        "| [A](a.md) | sa | 2 |\n"
        "| [B \\[x\\]](b-x.md) | scope\\|b | 3 |"
    )


def test_the_full_index_of_one_topic_says_topic_and_of_none_topics():
    one = render_full_index("Topics", "The kinds.", 449, [TopicRow("a", "A", "sa", 2)])
    assert one.split("\n")[1] == "2 of 449 SOTA documents in 1 topic."
    none = render_full_index("Topics", "The kinds.", 449, [])
    assert none == "Topics — The kinds.\n0 of 449 SOTA documents in 0 topics.\n| Topic | Scope | Count |\n|---|---|---|"


# ------------------------------------------------------------------------------ supersessions


def test_a_plain_supersession_of_exactly_the_longest_sentence_judged_is_imported():
    sentence = "and " * 93 + "so " * 2 + "ADR-2 supersedes ADR-1."
    assert len(sentence) == 401  # 400 characters before its full stop: SENTENCE_CHARS
    page = _page(_row(sentence))
    assert _adrs(page) == {
        "ADR-1": {"id": "ADR-1", "superseded_by": "ADR-2", "status": "Superseded"},
        "ADR-2": {"id": "ADR-2", "supersedes": ["ADR-1"]},
    }
    assert page.warnings == []


def test_a_plain_supersession_in_a_sentence_one_longer_is_warned_of_not_imported():
    sentence = "and " * 94 + "so " + "ADR-2 supersedes ADR-1."
    assert len(sentence) == 402
    page = _page(_row(sentence))
    assert _adrs(page) == {"ADR-1": {"id": "ADR-1"}, "ADR-2": {"id": "ADR-2"}}
    assert page.warnings == [
        "<page>:6: 'ADR-2 supersedes ADR-1' is not imported as a supersession: its sentence does not plainly "
        f"state it ({sentence[sentence.index('ADR-2') - 40 :]!r}); add it to the ADRs by hand if it holds"
    ]
    assert sentence[sentence.index("ADR-2") - 40 :] == " and" * 9 + " so ADR-2 supersedes ADR-1."


def test_a_long_sentence_opening_with_a_supersession_is_quoted_from_its_start():
    summary = "ADR-2 supersedes ADR-1 " + "word " * 80 + "end."
    page = _page(_row(summary))
    assert _adrs(page) == {"ADR-1": {"id": "ADR-1"}, "ADR-2": {"id": "ADR-2"}}
    # the sentence's start bounds the quote: the supersession and the 40 characters after it
    assert page.warnings == [
        "<page>:6: 'ADR-2 supersedes ADR-1' is not imported as a supersession: its sentence does not plainly "
        f"state it ({('ADR-2 supersedes ADR-1 ' + 'word ' * 8)[:62]!r}); add it to the ADRs by hand if it holds"
    ]


def test_a_long_sentence_is_quoted_from_40_characters_before_the_supersession():
    summary = "Word " * 60 + "abcdefghi " * 4 + "ADR-2 supersedes ADR-1 " + "word " * 20 + "end."
    page = _page(_row(summary))
    assert page.warnings == [
        "<page>:6: 'ADR-2 supersedes ADR-1' is not imported as a supersession: its sentence does not plainly "
        f"state it ({('abcdefghi ' * 4 + 'ADR-2 supersedes ADR-1 ' + 'word ' * 20)[:80]!r}); add it to the ADRs "
        "by hand if it holds"
    ]


def test_a_short_plain_sentence_after_a_long_one_is_judged_alone():
    # the second sentence starts past SENTENCE_CHARS in the text: its own length is what is bounded
    summary = "Word " * 100 + "end. ADR-2 supersedes ADR-1."
    page = _page(_row(summary))
    assert _adrs(page)["ADR-1"] == {"id": "ADR-1", "superseded_by": "ADR-2", "status": "Superseded"}
    assert page.warnings == []


@pytest.mark.parametrize(
    "sentence",
    [
        "ADR-1 was replaced by ADR-2.",
        "ADR-1 is superseded by ADR-2.",
        "ADR-2 supersedes ADR-1!",
        "ADR-2 supersedes ADR-1",  # ended by the end of the text
    ],
)
def test_a_plain_supersession_ended_any_way_a_plain_one_may_be_is_imported(sentence):
    page = _page(_row(sentence))
    assert _adrs(page) == {
        "ADR-1": {"id": "ADR-1", "superseded_by": "ADR-2", "status": "Superseded"},
        "ADR-2": {"id": "ADR-2", "supersedes": ["ADR-1"]},
    }
    assert page.warnings == []


@pytest.mark.parametrize("sentence", ["ADR-2 supersede ADR-1.", "ADR-2 now supersedes ADR-1."])
def test_a_supersession_in_the_base_form_or_with_an_auxiliary_is_not_plain(sentence):
    page = _page(_row(sentence))
    assert _adrs(page) == {"ADR-1": {"id": "ADR-1"}, "ADR-2": {"id": "ADR-2"}}
    assert len(page.warnings) == 1 and "is not imported as a supersession" in page.warnings[0]


# ------------------------------------------------------------------------------ cells


def test_a_character_reference_past_unicode_is_text():
    assert split_cells("| a &#1114112; b | &#1114111; |") == ["a &#1114112; b", "&#1114111;"]
    assert split_cells("| &#1114112; |") == ["&#1114112;"]


# ------------------------------------------------------------------------------ the topic page


def test_a_topic_page_without_a_scope_heads_with_the_label_alone():
    rows = [PracticeRow("SOTA-2", 1, "T", "S", "Active", ""), PracticeRow("SOTA-10", 2, "U", "", "Rejected", "why")]
    assert render_page("Topics", "The kinds.", "Pruning", None, 449, rows) == (
        "Topics — The kinds.\n"
        "Pruning\n"
        "2 of 449 SOTA documents. Back to the full index.\n"
        "| # | Title | Summary | Status |\n"
        "|---|---|---|---|\n"
        "| SOTA-2 | T | S | Active |\n"
        "| SOTA-10 v2 | U | | Rejected — why |"
    )
