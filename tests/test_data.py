"""The shipped data folder holds every record of the seed page, with its facts."""

from __future__ import annotations

import re

import pytest

from sotakg.records.schema import load_anthology

from .conftest import SEED_PAGE, SHIPPED_DATA


@pytest.fixture(scope="module")
def records():
    return load_anthology(SHIPPED_DATA).by_id()


def seed_rows() -> list[list[str]]:
    lines = SEED_PAGE.read_text(encoding="utf-8").splitlines()[5:]
    return [[cell.strip() for cell in line.strip().strip("|").split("|")] for line in lines]


def test_every_practice_on_the_page_is_a_record(records):
    page_ids = [row[0].split(" ")[0] for row in seed_rows()]
    assert len(page_ids) == 42
    practices = sorted(r.id for r in records.values() if r.kind == "practice")
    assert practices == sorted(page_ids)


def test_versions_titles_and_statuses_match_the_page(records):
    for cells in seed_rows():
        label, title, summary, status = cells
        practice_id, _, version = label.partition(" v")
        record = records[practice_id]
        assert record.get("version") == (int(version) if version else 1)
        assert record.get("title") == title
        if not status:  # the two malformed rows: status in the summary column
            assert practice_id in ("SOTA-364", "SOTA-376")
            assert record.get("status") == summary == "Active"
            assert "summary" not in record.fields
            continue
        assert record.get("summary") == summary
        state, _, reason = status.partition(" — ")
        assert record.get("status") == state
        assert record.get("reason") == (reason or None)


@pytest.mark.parametrize(
    "practice_id, names",
    [
        ("SOTA-046", ["LIT-051"]),
        ("SOTA-049", ["SOTA-048"]),
        ("SOTA-055", ["LIT-059", "SOTA-054"]),
        ("SOTA-073", ["LIT-051", "SOTA-048"]),
        ("SOTA-074", ["SOTA-054"]),
        ("SOTA-076", ["ADR-020", "ADR-026"]),
    ],
)
def test_rejections_name_the_records_in_their_reason(records, practice_id, names):
    record = records[practice_id]
    assert record.get("status") == "Rejected"
    assert record.get("reason_names") == names


def test_only_rejected_practices_have_reasons(records):
    rejected = sorted(r.id for r in records.values() if r.kind == "practice" and r.get("status") == "Rejected")
    assert rejected == ["SOTA-046", "SOTA-049", "SOTA-055", "SOTA-073", "SOTA-074", "SOTA-076"]
    with_reason = sorted(r.id for r in records.values() if r.kind == "practice" and "reason" in r.fields)
    assert with_reason == rejected


@pytest.mark.parametrize(
    "paper_id, facts",
    [
        ("LIT-004", {"authors": "Chen et al.", "year": 2016, "arxiv": "1604.06174"}),
        ("LIT-016", {"authors": "Huang et al.", "year": 2018, "arxiv": "1811.06965"}),
        ("LIT-027", {"authors": "Rajbhandari et al.", "year": 2020, "arxiv": "1910.02054"}),
        (
            "LIT-051",
            {
                "authors": "Jiang et al.",
                "year": 2020,
                "url": "https://www.usenix.org/conference/osdi20/presentation/jiang",
            },
        ),
        ("LIT-056", {"authors": "Lin et al.", "year": 2017, "arxiv": "1712.01887"}),
        (
            "LIT-059",
            {
                "authors": "Mohan et al.",
                "year": 2021,
                "url": "https://www.usenix.org/conference/fast21/presentation/mohan",
            },
        ),
        ("LIT-083", {"authors": "Zhao et al.", "year": 2022, "arxiv": "2304.11277"}),
        ("LIT-206", {"authors": "Liu et al.", "year": 2023}),
        ("LIT-212", {"authors": "Douillard et al.", "year": 2023}),
        ("LIT-214", {"authors": "Douillard et al.", "year": 2025}),
        ("LIT-222", {"authors": "CoreWeave", "year": 2025}),
        ("LIT-254", {"authors": "Assran et al.", "year": 2018}),
        ("LIT-302", {"authors": "Lian et al.", "year": 2017}),
        ("LIT-315", {"authors": "de Vos et al.", "year": 2023}),
        ("LIT-323", {"authors": "Wang et al.", "year": 2020}),
        ("LIT-735", {"authors": "Jangda et al.", "year": 2021, "arxiv": "2105.05720"}),
        ("LIT-736", {"authors": "Korthikanti et al.", "year": 2022, "arxiv": "2205.05198"}),
        ("LIT-750", {"authors": "Hershcovitch et al.", "year": 2024}),
    ],
)
def test_papers_hold_exactly_what_the_page_says(records, paper_id, facts):
    assert records[paper_id].fields == {"id": paper_id, **facts}


def test_every_cited_paper_is_a_record_and_nothing_more(records):
    cited = set(re.findall(r"LIT-\d+", SEED_PAGE.read_text(encoding="utf-8")))
    papers = {r.id for r in records.values() if r.kind == "paper"}
    assert papers == cited


@pytest.mark.parametrize(
    "practice_id, cites",
    [("SOTA-017", ["LIT-016"]), ("SOTA-155", ["LIT-212", "LIT-214"]), ("SOTA-214", None), ("SOTA-364", None)],
)
def test_citations(records, practice_id, cites):
    assert records[practice_id].get("cites") == cites


def test_adrs(records):
    assert records["ADR-020"].fields == {"id": "ADR-020", "status": "Superseded", "superseded_by": "ADR-026"}
    assert records["ADR-026"].get("supersedes") == ["ADR-020"]
    # The page only cites ADR-026 and ADR-059 in its header: it says nothing else about them.
    assert records["ADR-026"].fields == {"id": "ADR-026", "supersedes": ["ADR-020"]}
    assert records["ADR-059"].fields == {"id": "ADR-059"}


def test_topic_and_registry(records):
    topic = records["distributed-optimization"]
    assert topic.fields == {
        "id": "distributed-optimization",
        "label": "Distributed optimization",
        "scope": "parallelism and sharding, communication, memory management, checkpointing.",
        "declared_size": 42,
    }
    registry = records["registry"]
    assert registry.get("title") == "Topics"
    assert registry.get("declared_size") == 449
    assert "governed_by" not in registry.fields  # the page never says "govern"
    assert registry.get("description").startswith("The twenty-eight kinds of claim")
    assert all(r.get("topic") == "distributed-optimization" for r in records.values() if r.kind == "practice")
