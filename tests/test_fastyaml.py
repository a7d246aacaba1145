"""The fast reader of canonical records agrees with the full, strict reader whenever it answers."""

from __future__ import annotations

import string

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sotakg.records.fastyaml import parse_canonical, resolves_to_string
from sotakg.records.schema import Record, SourceRefusal, dump_record, parse_yaml_mapping

from .conftest import SHIPPED_DATA
from .test_fuzz import mutated
from .test_roundtrip import anthologies

SHIPPED = [p.read_text(encoding="utf-8") for p in sorted(SHIPPED_DATA.rglob("*.yaml"))]


def full(text: str):
    try:
        return parse_yaml_mapping(text)
    except SourceRefusal:
        return "refused"


def test_every_shipped_record_takes_the_fast_path_and_agrees():
    for text in SHIPPED:
        fast = parse_canonical(text)
        assert fast is not None, text
        assert fast[:2] == full(text)[:2]


@given(anthologies)
@settings(max_examples=200, deadline=None)
def test_dumped_records_agree(records: list[Record]):
    for record in records:
        text = dump_record(record)
        fast = parse_canonical(text)
        if fast is not None:
            assert fast[:3] == full(text)[:3]


# Records in the shape the fast path is for: identifiers, whole numbers and one-line text of the
# characters curated titles use (dump_record quotes what YAML would read otherwise, in single quotes).
canonical_text = st.text(string.ascii_letters + string.digits + " .,;()-/'&%+?!", min_size=1, max_size=60).filter(
    lambda value: value.strip() == value and value[:1].isalnum()
)
canonical_practice = st.fixed_dictionaries(
    {
        "id": st.from_regex(r"\ASOTA-[0-9]{3}\Z"),
        "version": st.integers(0, 1000),
        "title": canonical_text,
        "status": st.sampled_from(["Active", "Proposed", "Rejected"]),
        "reason": canonical_text,
        "cites": st.lists(st.from_regex(r"\ALIT-[0-9]{3}\Z"), max_size=4, unique=True).map(sorted),
        "topic": st.from_regex(r"\A[a-z][a-z-]{0,20}[a-z]\Z"),
    }
)


@given(canonical_practice)
@settings(max_examples=300, deadline=None)
def test_canonical_records_take_the_fast_path_and_agree(fields):
    text = dump_record(Record("practice", fields["id"], fields))
    fast = parse_canonical(text)
    assert fast is not None, text
    assert fast[:3] == full(text)[:3]
    assert fast[0] == fields


@pytest.mark.parametrize(
    "text",
    [
        "id: SOTA-001\n",
        "id: SOTA-001\nversion: 3\n",
        "id: SOTA-001\ntitle: 'yes'\n",
        "id: SOTA-001\ntitle: 'it''s fine'\n",
        'id: SOTA-001\ntitle: "plain in double quotes"\n',
        "id: SOTA-001\ncites: []\n",
        "id: SOTA-001\ncites: [LIT-001, LIT-002]\n",
        "{}\n",
    ],
)
def test_the_fast_path_answers_for_each_canonical_form(text):
    fast = parse_canonical(text)
    assert fast is not None
    assert fast[:3] == full(text)[:3]


@pytest.mark.parametrize(
    "text",
    [
        "id: SOTA-001\n# a comment\n",
        "id: SOTA-001\n\nversion: 1\n",
        "id: SOTA-001\nversion: 0x10\n",
        "id: SOTA-001\nversion: 017\n",
        "id: SOTA-001\nversion: 1_0\n",
        "id: SOTA-001\nyear: 33:40\n",
        "id: SOTA-001\nversion: " + "9" * 30 + "\n",
        "id: SOTA-001\ntitle: no\n",
        "id: SOTA-001\ntitle: ~\n",
        "id: SOTA-001\ntitle: 2020-01-01\n",
        "id: SOTA-001\ntitle: &a x\n",
        "id: SOTA-001\ntitle: !!str x\n",
        'id: SOTA-001\ntitle: "a\\tb"\n',
        "id: SOTA-001\ntitle: a\rb\n",
        "id: SOTA-001\ntitle: a\x85b\n",
        "id: SOTA-001\ntitle: a\u2028b\n",
        "id: SOTA-001\ntitle: |\n  block\n",
        "id: SOTA-001\ntitle: x",
    ],
)
def test_the_fast_path_leaves_everything_else_to_the_full_reader(text):
    assert parse_canonical(text) is None


@given(
    mutated(
        [t.encode() for t in SHIPPED],
        [
            "'",
            '"',
            "''",
            ": ",
            " #",
            "- ",
            "[",
            "]",
            ", ",
            "\t",
            "\\",
            "no",
            "0x1",
            "017",
            "1.5",
            "~",
            "&a",
            "*a",
            "!!str ",
            "\r",
            "\x85",
            "\n",
        ],
    )
)
@settings(max_examples=1500, deadline=None)
def test_mutated_records_agree_whenever_the_fast_path_answers(data: bytes):
    text = data.decode("utf-8", errors="replace")
    fast = parse_canonical(text)
    if fast is not None:
        assert full(text) != "refused", text
        assert fast[:3] == full(text)[:3], text


_SCALAR_EDGES = [
    "yes", "No", "OFF", "on", "null", "Null", "NULL", "nil", "True", "tRUE", "0", "007", "0o7", "0b101", "0x1F",
    "1_000", "1:30", "190:20:30.15", "1.5", "1e3", "1.5e+3", "2024-01-31", "2024-1-3 4:05:06.5 +01:00",
    "2024-01-31T10:00:00Z", "12abc", "3.", "(1.5)", "LIT-051", "Yes please", "n", "y", "Y",
]  # fmt: skip


@given(
    st.one_of(
        st.sampled_from(_SCALAR_EDGES),
        st.text(alphabet="0123456789-+._:eExXbBoOTtZ yYnNsuFfalLr(", min_size=1, max_size=24).filter(
            lambda text: text[0].isalnum() or text[0] == "("
        ),
    )
)
@settings(max_examples=1500, deadline=None)
def test_the_string_test_agrees_with_pyyaml(text: str):
    """fastyaml carries PyYAML's implicit resolvers so that reading records does not import yaml."""
    import yaml

    tag = yaml.resolver.Resolver().resolve(yaml.ScalarNode, text, (True, False))
    assert resolves_to_string(text) == (tag == "tag:yaml.org,2002:str")
