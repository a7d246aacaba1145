"""The fast reader of canonical records agrees with the full, strict reader whenever it answers."""

from __future__ import annotations

from hypothesis import given, settings

from sotakg.records.fastyaml import parse_canonical
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
