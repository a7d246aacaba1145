"""Tests written to kill the mutants of records/schema.py that survived mutation testing.

Each pins behaviour a surviving mutant changed: the exact message of each problem and how much of a
long value or name it quotes, the line a problem is reported at when a field's line is unknown,
numbers at exactly their bounds, how the registry (which has no id) is read, named and written, the
duplicate-id rule, how dump_record writes lists (inline, on one line, non-ASCII as it is), and the
exact line and message of each refusal of the full YAML reader (syntax errors with their context,
refused characters, nesting, keys that are not text).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from sotakg.errors import DataError, DataFolderMissing, Problem
from sotakg.records import schema
from sotakg.records.schema import (
    Anthology,
    Record,
    SourceRefusal,
    check_record,
    decode,
    dump_record,
    file_name_problem,
    load_anthology,
    read_record,
    read_source,
    record_path,
    scan_sources,
    shorten,
)
from sotakg.records.sources import SourceFile

SHOWN = "data/practices/SOTA-900.yaml"
PRACTICE_FIELDS = "id, version, title, summary, status, status_column, reason, status_note, reason_names, cites, topic"
#: A name or value of 41 characters: one over the 40 a message quotes whole, so it is cut to 37 and "...".
LONG = "a" * 41
CUT = "a" * 37 + "..."


def problems_of(tmp_path: Path, content: str | bytes, kind: str = "practice", shown: str = SHOWN) -> list[Problem]:
    path = tmp_path / "SOTA-900.yaml"
    path.write_bytes(content if isinstance(content, bytes) else content.encode("utf-8"))
    with pytest.raises(DataError) as caught:
        read_record(path, kind, shown)
    return caught.value.problems


def source_of(tmp_path: Path, relative: str, kind: str | None, content: str | None, refusal: str | None = None):
    """A listed file of a data folder at tmp_path/data, as scan_sources would list it (written when ``content``)."""
    path = tmp_path / "data" / relative
    if content is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content, encoding="utf-8")
    return SourceFile(str(path), relative, f"data/{relative}", kind, 0, 0, refusal)


# ------------------------------------------------------------------------------------ messages


@pytest.mark.parametrize(
    "content, line, message",
    [
        # A number in a text field: the text quoted at most 40 characters, the number at most 24.
        (
            "id: SOTA-900\ntitle: 1." + "0" * 39 + "\n",
            2,
            "'title' must be text, got the number 1.0; YAML reads 1."
            + "0" * 35
            + '... as the number 1.0: quote it, title: "1.'
            + "0" * 35
            + '..."',
        ),
        (
            "id: SOTA-900\ntitle: 1234567890123456789012345\n",
            2,
            "'title' must be text, got the number 123456789012345678901...; YAML reads 1234567890123456789012345 "
            'as the number 123456789012345678901...: quote it, title: "1234567890123456789012345"',
        ),
        # No hint for a mapping or a list: there is no text to quote.
        ("id: SOTA-900\ntitle: {a: b}\n", 2, "'title' must be text, got a mapping"),
        ("id: SOTA-900\ntitle: [a]\n", 2, "'title' must be text, got a list"),
        ("id: SOTA-900\nversion: null\n", 2, "'version' must be a whole number, got nothing (null)"),
        (
            f"id: SOTA-900\nversion: {hex(10**24)}\n",
            2,
            f"'version' must be written as a plain decimal number, got {hex(10**24)} "
            "(YAML 1.1 reads that as 100000000000000000000...); write the digits 0-9 only",
        ),
        (
            "id: SOTA-900\ncites: LIT-016\n",
            2,
            "'cites' must be a list of identifiers ([LIT-016, ...]), got the text 'LIT-016'",
        ),
        (
            "id: SOTA-900\ncites: [LIT 016]\n",
            2,
            "'cites' must list identifiers such as LIT-016, got the text 'LIT 016'",
        ),
        ("id: SOTA-900\nversion: 101\n", 2, "'version' is 101, more than any real record has (at most 100)"),
        ("id: SOTA-900\nversion: -1\n", 2, "'version' is -1, less than any real record has (at least 0)"),
        (f"id: SOTA-900\n{LONG}: x\n", 2, f"unknown field '{CUT}'; a practice has: {PRACTICE_FIELDS}"),
        ("# a comment\n\ntitle: T\n", 3, "missing 'id'"),
    ],
    ids=[
        "float-in-text",
        "long-int-in-text",
        "mapping-in-text",
        "list-in-text",
        "null-number",
        "hex-number",
        "one-id-not-a-list",
        "bad-id-in-list",
        "over-highest",
        "under-lowest",
        "long-unknown-field",
        "missing-id-after-a-comment",
    ],
)
def test_each_problem_has_its_exact_message_and_line(tmp_path, content, line, message):
    assert problems_of(tmp_path, content) == [Problem(SHOWN, line, "SOTA-900", message)]


def test_a_number_too_large_for_any_record_is_quoted_at_most_24_digits(tmp_path):
    (problem,) = problems_of(tmp_path, "id: LIT-900\nyear: 1234567890123456789012345\n", "paper")
    assert problem.message == "'year' is 123456789012345678901..., more than any real record has (at most 9999)"


def test_a_non_decimal_text_of_an_integer_is_quoted_at_most_40_characters():
    # Through a file an integer's text has at most 40 characters (longer ones are refused as they are
    # read); check_record is also given texts directly, as the importer's callers may.
    text = "0x" + "0" * 38 + "1"
    with pytest.raises(DataError) as caught:
        check_record("practice", {"id": "SOTA-900", "version": 1}, SHOWN, {"version": 2}, {"version": text})
    assert caught.value.problems == [
        Problem(
            SHOWN,
            2,
            "SOTA-900",
            "'version' must be written as a plain decimal number, got 0x" + "0" * 35 + "... "
            "(YAML 1.1 reads that as 1); write the digits 0-9 only",
        )
    ]


def test_every_problem_of_a_record_without_lines_is_reported_at_its_start():
    # As the importer calls it: no lines, no texts. Both problems are listed, at the default start line 1.
    with pytest.raises(DataError) as caught:
        check_record("practice", {"id": "SOTA-900", "colour": "red", "title": 5})
    assert caught.value.problems == [
        Problem("<record>", 1, "SOTA-900", f"unknown field 'colour'; a practice has: {PRACTICE_FIELDS}"),
        Problem("<record>", 1, "SOTA-900", "'title' must be text, got the number 5"),
    ]
    with pytest.raises(DataError) as caught:
        check_record("practice", {"id": "SOTA-900", "colour": "red", "title": 5}, "x/SOTA-900.yaml", start=4)
    assert [(p.file, p.line) for p in caught.value.problems] == [("x/SOTA-900.yaml", 4), ("x/SOTA-900.yaml", 4)]


def test_a_record_with_a_bad_id_is_named_after_its_file_stem_cut_to_40():
    with pytest.raises(DataError) as caught:
        check_record("practice", {"id": "not valid!"}, f"data/practices/{LONG}.yaml")
    assert caught.value.problems == [
        Problem(
            f"data/practices/{LONG}.yaml",
            1,
            CUT,
            "'id' must be an identifier (ASCII letters, digits, '.', '_', '-'; at most 128), got 'not valid!'",
        )
    ]


def test_a_field_of_an_unknown_type_is_an_internal_error_naming_the_type():
    with pytest.raises(AssertionError) as caught:
        schema._check_field(schema.FieldSpec("weight", "float"), 1.5, None)
    assert caught.value.args == ("float",)


@pytest.mark.parametrize(
    "number, message",
    [
        # 40 characters: read (and its text quoted whole); 41: refused as it is read.
        (
            "0x" + "0" * 37 + "1",
            "'version' must be written as a plain decimal number, got 0x" + "0" * 37 + "1 "
            "(YAML 1.1 reads that as 1); write the digits 0-9 only",
        ),
        ("1" * 41, "the number " + "1" * 21 + "... has 41 characters; no field takes one so large"),
    ],
    ids=["40-characters", "41-characters"],
)
def test_an_integer_of_more_than_40_characters_is_refused_as_it_is_read(tmp_path, number, message):
    assert problems_of(tmp_path, f"id: SOTA-900\nversion: {number}\n") == [Problem(SHOWN, 2, "SOTA-900", message)]


def test_a_plain_merge_key_or_value_sign_is_read_as_text(tmp_path):
    path = tmp_path / "SOTA-900.yaml"
    path.write_text("id: SOTA-900\ntitle: <<\nsummary: =\n", encoding="utf-8")
    assert read_record(path, "practice").fields == {"id": "SOTA-900", "title": "<<", "summary": "="}


def test_a_document_that_is_a_plain_value_is_refused_at_line_1(tmp_path):
    assert problems_of(tmp_path, "hello\n") == [
        Problem(SHOWN, 1, "SOTA-900", "a record must be a mapping of fields (id: ..., title: ...)")
    ]


def test_records_are_read_without_libyaml(monkeypatch):
    import yaml

    monkeypatch.delattr(yaml, "CSafeLoader", raising=False)
    assert schema.parse_yaml_mapping("id: SOTA-900\ncites: [LIT-001]\n") == (
        {"id": "SOTA-900", "cites": ["LIT-001"]},
        {"id": 1, "cites": 2},
        {"id": "SOTA-900"},
        1,
    )


@pytest.mark.parametrize(
    "text, line, message",
    [
        # The context is named only when it started on another line than the problem.
        (
            "id: SOTA-900\ntitle: [a, b\nsummary: c\n",
            3,
            "YAML syntax error: did not find expected ',' or ']' (while parsing a flow sequence started on line 2)",
        ),
        ("id: SOTA-900\ntitle: [a b: c: d]\n", 2, "YAML syntax error: did not find expected ',' or ']'"),
        ("id: a: b\n", 1, "YAML syntax error: mapping values are not allowed in this context"),
        # A refused character is reported at its own line, whatever comes before or after it.
        (
            "\nid: SOTA-900\ntitle: \x07bell\nsummary: x\nstatus: y\n",
            3,
            "YAML syntax error: control characters are not allowed (character U+0007); remove it",
        ),
        ("id: SOTA-900\n? [a]\n: b\n", 2, "a mapping key must be a plain string"),
        ("id: SOTA-900\ntitle: *t\n", 2, "alias *t: anchors and aliases are not allowed; write the value out"),
        ("id: SOTA-900\ntitle: " + "[" * 32 + "]" * 32 + "\n", 2, "nested deeper than 32 levels"),
        ("", 1, "empty file; a record is a mapping of fields (id: ..., title: ...)"),
        ("id: SOTA-900\n---\nid: SOTA-901\n", 2, "more than one YAML document; keep one record per file"),
        ("id: SOTA-900\ntitle: &t A\n", 2, "anchor &t: anchors and aliases are not allowed; write the value out"),
    ],
    ids=[
        "context-on-another-line",
        "context-on-the-same-line",
        "no-context",
        "control-character",
        "list-as-key",
        "alias",
        "33-levels",
        "empty",
        "two-documents",
        "anchor",
    ],
)
def test_each_refusal_of_the_full_reader_has_its_exact_message_and_line(text, line, message):
    with pytest.raises(SourceRefusal) as caught:
        schema.parse_yaml_mapping(text)
    assert (caught.value.line, caught.value.message) == (line, message)


def test_a_key_that_yaml_reads_as_a_number_is_its_text():
    assert schema.parse_yaml_mapping("1: x\n2: y\n")[:2] == ({"1": "x", "2": "y"}, {"1": 1, "2": 2})


def test_32_levels_of_nesting_are_read():
    values, _, _, _ = schema.parse_yaml_mapping("id: SOTA-900\ntitle: " + "[" * 31 + "]" * 31 + "\n")
    nested = values["title"]
    for _ in range(30):
        (nested,) = nested
    assert nested == []


# -------------------------------------------------------------------------------------- bounds


@pytest.mark.parametrize(
    "kind, values",
    [
        ("practice", {"id": "SOTA-900", "version": 100}),
        ("practice", {"id": "SOTA-900", "version": 0}),
        ("paper", {"id": "LIT-900", "arxiv_version": 1000, "year": 9999}),
        ("paper", {"id": "LIT-900", "year": -9999}),
        ("topic", {"id": "t", "declared_size": 10**9}),
        ("topic", {"id": "t", "declared_size": 0}),
    ],
)
def test_numbers_at_exactly_their_highest_and_lowest_bound_are_accepted(kind, values):
    assert check_record(kind, values).fields == values


# ------------------------------------------------------------------------- records and their lines


def test_a_record_read_without_lines_stands_on_line_1_of_record():
    record = check_record("paper", {"id": "LIT-1"})
    assert (record.id, record.file, record.line, record.lines) == ("LIT-1", "<record>", 1, {})


def test_a_record_stands_on_the_line_of_its_id(tmp_path):
    path = tmp_path / "SOTA-900.yaml"
    path.write_text("title: A\nid: SOTA-900\n", encoding="utf-8")
    record = read_record(path, "practice", SHOWN)
    assert (record.line, record.lines) == (2, {"title": 1, "id": 2})


def test_record_get_and_line_of_fall_back_to_their_defaults():
    record = Record("paper", "LIT-1", {"id": "LIT-1"}, "x.yaml", 3, {"id": 3, "title": 5})
    assert record.get("year", 2020) == 2020 and record.get("year") is None and record.get("id") == "LIT-1"
    assert (record.line_of("year"), record.line_of("title"), record.line_of(None)) == (3, 5, 3)


def test_anthology_counts_the_records_of_each_kind():
    records = [Record("practice", "A", {}), Record("practice", "B", {}), Record("topic", "t", {})]
    assert Anthology(records).counts() == {"practice": 2, "paper": 0, "adr": 0, "topic": 1, "registry": 0}


# ---------------------------------------------------------------------------------------- registry


def test_the_registry_is_named_registry_whatever_its_file_or_fields():
    record = check_record("registry", {"title": "T"})
    assert (record.id, record.line) == ("registry", 1)
    with pytest.raises(DataError) as caught:
        check_record("registry", {"id": "elsewhere"})
    assert [p.record for p in caught.value.problems] == ["registry"]


def test_an_unreadable_registry_is_reported_as_the_registry_not_by_its_file_or_an_id_in_it(tmp_path):
    path = tmp_path / "reg.yaml"
    path.write_text("id: elsewhere\ntitle: [unclosed\n", encoding="utf-8")
    with pytest.raises(DataError) as caught:
        read_record(path, "registry", "data/reg.yaml")
    assert [(p.line, p.record) for p in caught.value.problems] == [(3, "registry")]


def test_the_registry_stands_on_the_line_its_mapping_starts(tmp_path):
    path = tmp_path / "registry.yaml"
    path.write_text("# the registry\ntitle: T\n", encoding="utf-8")
    assert read_record(path, "registry").line == 2


def test_the_registry_file_is_never_misnamed_and_is_always_registry_yaml(tmp_path):
    registry = Record("registry", "registry", {"title": "T"}, "data/other.yaml")
    assert file_name_problem(source_of(tmp_path, "other.yaml", "registry", None), registry) is None
    assert record_path(tmp_path, Record("registry", "other", {})) == tmp_path / "registry.yaml"


# ------------------------------------------------------------------------------------ read_record


def test_an_unparsable_record_is_named_after_the_id_it_declares(tmp_path):
    (problem,) = problems_of(tmp_path, "id: SOTA-042\ntitle: [unclosed\n")
    assert problem.record == "SOTA-042"


def test_an_unparsable_record_without_an_id_is_named_after_its_file_stem_cut_to_40(tmp_path):
    path = tmp_path / f"{LONG}.yaml"
    path.write_text("- a\n", encoding="utf-8")
    with pytest.raises(DataError) as caught:
        read_record(path, "practice", "shown.yaml")
    assert caught.value.problems == [
        Problem("shown.yaml", 1, CUT, "a record must be a mapping of fields (id: ..., title: ...)")
    ]


def test_a_record_read_without_a_shown_name_is_shown_by_its_path(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "SOTA-900.yaml").write_text("id: SOTA-900\n", encoding="utf-8")
    (tmp_path / "SOTA-901.yaml").write_text("id: SOTA-901\ntitle: [a]\n", encoding="utf-8")
    assert read_record(tmp_path / "SOTA-900.yaml", "practice").file == "SOTA-900.yaml"
    with pytest.raises(DataError) as caught:
        read_record(tmp_path / "SOTA-901.yaml", "practice")
    assert [p.file for p in caught.value.problems] == ["SOTA-901.yaml"]


def test_a_missing_record_file_is_a_problem_naming_file_and_record(tmp_path):
    with pytest.raises(DataError) as caught:
        read_record(tmp_path / "SOTA-900.yaml", "practice", SHOWN)
    assert caught.value.problems == [Problem(SHOWN, None, "SOTA-900", "cannot read: No such file or directory")]


def test_a_record_file_over_the_size_cap_is_a_problem_naming_the_record(tmp_path, monkeypatch):
    monkeypatch.setenv("SOTAKG_MAX_FILE_BYTES", "10")
    assert problems_of(tmp_path, "id: SOTA-900\n" + "#" * 20 + "\n") == [
        Problem(
            SHOWN, None, "SOTA-900", "file is 34 bytes, over the 10-byte limit (raise it with SOTAKG_MAX_FILE_BYTES)"
        )
    ]


def test_a_canonical_record_is_read_without_the_full_yaml_reader(tmp_path, monkeypatch):
    def refuse(text: str):
        raise AssertionError("the full reader was used")

    monkeypatch.setattr(schema, "parse_yaml_mapping", refuse)
    path = tmp_path / "SOTA-900.yaml"
    path.write_text("id: SOTA-900\ntitle: A practice\n", encoding="utf-8")
    assert read_record(path, "practice").fields == {"id": "SOTA-900", "title": "A practice"}


# ------------------------------------------------------------------------------------ read_source


def test_a_refused_or_stray_file_is_named_after_its_stem_cut_to_40(tmp_path):
    refused = source_of(tmp_path, f"practices/{LONG}.yaml", "practice", None, "a link to nothing")
    assert read_source(refused) == (None, [Problem(f"data/practices/{LONG}.yaml", None, CUT, "a link to nothing")])
    stray = source_of(tmp_path, f"misc/{LONG}.yaml", None, "id: SOTA-900\n")
    assert read_source(stray) == (
        None,
        [
            Problem(
                f"data/misc/{LONG}.yaml",
                None,
                CUT,
                "not in a record folder; move it into one of: adrs, papers, practices, topics",
            )
        ],
    )


def test_a_misnamed_record_file_is_quoted_at_most_40_characters(tmp_path):
    source = source_of(tmp_path, f"practices/{LONG}.yaml", "practice", "id: SOTA-900\n")
    record, problems = read_source(source)
    assert record is not None and record.id == "SOTA-900"
    assert problems == [
        Problem(
            f"data/practices/{LONG}.yaml",
            1,
            "SOTA-900",
            f"the file is named {CUT}.yaml but holds id SOTA-900; rename the file to SOTA-900.yaml or fix 'id'",
        )
    ]


def test_read_source_shows_the_listed_name_and_reads_the_given_contents(tmp_path):
    source = source_of(tmp_path, "practices/SOTA-900.yaml", "practice", "id: SOTA-900\ntitle: On disk\n")
    record, problems = read_source(source, {"practices/SOTA-900.yaml": b"id: SOTA-900\ntitle: Given\n"})
    assert problems == [] and record is not None
    assert (record.file, record.get("title")) == ("data/practices/SOTA-900.yaml", "Given")
    _, problems = read_source(source, {"practices/SOTA-900.yaml": b"id: SOTA-900\ntitle: [a]\n"})
    assert problems == [Problem("data/practices/SOTA-900.yaml", 2, "SOTA-900", "'title' must be text, got a list")]


# ---------------------------------------------------------------------------------- load_anthology


def test_a_missing_data_folder_is_named_with_how_to_make_one(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(DataFolderMissing) as caught:
        load_anthology(tmp_path / "nodata")
    assert str(caught.value) == (
        "data folder nodata does not exist; pass --data DIR or create it with 'sotakg import markdown PAGE'"
    )


def test_load_anthology_reads_only_the_sources_and_contents_it_is_given(tmp_path):
    good = source_of(tmp_path, "practices/SOTA-900.yaml", "practice", "id: SOTA-900\ntitle: On disk\n")
    source_of(tmp_path, "practices/SOTA-901.yaml", "practice", "id: SOTA-901\ntitle: [not text]\n")
    data = tmp_path / "data"
    assert [r.id for r in load_anthology(data, [good]).records] == ["SOTA-900"]
    given = load_anthology(data, [good], {"practices/SOTA-900.yaml": b"id: SOTA-900\ntitle: Given\n"})
    assert [r.get("title") for r in given.records] == ["Given"]


def test_a_duplicate_id_is_an_id_unique_problem_at_the_second_records_id_line(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    source_of(tmp_path, "practices/SOTA-900.yaml", "practice", "id: SOTA-900\n")
    source_of(tmp_path, "practices/SOTA-900.yml", "practice", "title: Again\nid: SOTA-900\n")
    with pytest.raises(DataError) as caught:
        load_anthology(tmp_path / "data")
    assert caught.value.problems == [
        Problem(
            "data/practices/SOTA-900.yml",
            2,
            "SOTA-900",
            "identifier SOTA-900 is also used by data/practices/SOTA-900.yaml:1; keep one of the two",
            rule="id-unique",
        )
    ]


def test_a_topic_may_share_its_id_with_a_paper(tmp_path):
    source_of(tmp_path, "papers/shared.yaml", "paper", "id: shared\n")
    source_of(tmp_path, "topics/shared.yaml", "topic", "id: shared\n")
    data = tmp_path / "data"
    assert [(r.kind, r.id) for r in load_anthology(data, scan_sources(data)).records] == [
        ("paper", "shared"),
        ("topic", "shared"),
    ]


# ----------------------------------------------------------------------------------- small helpers


def test_decode_drops_a_byte_order_mark():
    assert decode(b"\xef\xbb\xbfid: SOTA-900\n") == "id: SOTA-900\n"


def test_shorten_keeps_a_text_of_exactly_the_limit():
    assert shorten("x" * 80) == "x" * 80
    assert shorten("x" * 81) == "x" * 77 + "..."
    assert shorten("abcde", 5) == "abcde"


def test_a_source_refusal_says_its_message():
    refusal = SourceRefusal(3, "nested deeper than 32 levels")
    assert str(refusal) == refusal.message == "nested deeper than 32 levels"
    assert refusal.line == 3


def test_a_nested_mapping_is_read_as_a_mapping():
    values, _, _, _ = schema.parse_yaml_mapping("a:\n  b: [c, {d: e}]\n")
    assert values == {"a": {"b": ["c", {"d": "e"}]}}


# ------------------------------------------------------------------------------------- dump_record


def test_a_long_list_is_written_on_one_line():
    cites = [f"LIT-{n:03}" for n in range(1, 21)]
    text = dump_record(Record("practice", "SOTA-900", {"id": "SOTA-900", "cites": cites}))
    assert text == "id: SOTA-900\ncites: [" + ", ".join(cites) + "]\n"


def test_a_list_is_written_inline_with_its_non_ascii_text_as_it_is():
    assert dump_record(Record("practice", "X", {"cites": ["Zoë-1"]})) == "cites: [Zoë-1]\n"
    assert dump_record(Record("practice", "X", {"cites": [["LIT-001"]]})) == "cites: [[LIT-001]]\n"


def test_a_record_without_fields_is_written_as_an_empty_mapping():
    assert dump_record(Record("registry", "registry", {})) == "{}\n"
