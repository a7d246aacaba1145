"""The fast reader of canonical records agrees with the full, strict reader whenever it answers."""

from __future__ import annotations

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
