"""`sotakg why ID`: a record's provenance as readable text, for a practice, a paper and an ADR."""

from __future__ import annotations

import pytest

from sotakg.errors import RecordNotFound, UsageProblem
from sotakg.query.why import render_provenance, why

from .conftest import assert_golden, invoke


@pytest.mark.parametrize("record", ["SOTA-049", "SOTA-017", "SOTA-076", "SOTA-214", "LIT-051", "ADR-020", "ADR-026"])
def test_why_reads_well(runner, built_store, record):
    result = invoke(runner, built_store, "why", record)
    assert result.exit_code == 0, result.output
    assert_golden(f"why-{record}.txt", result.stdout)


def test_a_status_the_page_writes_in_the_summary_cell_is_said_to_be_there(backend):
    story = why(backend, "SOTA-364")
    assert (story.status, story.status_column, story.summary) == ("Active", "summary", None)
    assert "status: Active (the index page writes it in the Summary cell, whose summary is empty)\n" in (
        render_provenance(story, width=1000)
    )
    plain = why(backend, "SOTA-017")
    assert plain.status_column is None
    assert "status: Active\n" in render_provenance(plain, width=1000)


def test_the_note_after_a_status_is_told_with_it(runner, data_copy, tmp_path):
    from sotakg.query.sparql import LocalBackend

    practice = data_copy / "practices" / "SOTA-047.yaml"
    noted = practice.read_text(encoding="utf-8") + "status_note: awaits a second source\n"
    practice.write_text(noted, encoding="utf-8")
    story = why(LocalBackend(tmp_path / "store", data_dir=data_copy), "SOTA-047")
    assert story.status_note == "awaits a second source"
    assert "status: Active — awaits a second source\n" in render_provenance(story, width=1000)


def test_a_status_written_as_an_iri_is_shown_as_written_not_as_that_concept(runner, data_copy, tmp_path):
    """The graph states such a status as a literal; why, export index and the diagrams show its text."""
    from sotakg.cli import cli
    from sotakg.query.sparql import LocalBackend

    spelled = "https://w3id.org/sotakg/ontology#Rejected"
    practice = data_copy / "practices" / "SOTA-017.yaml"
    practice.write_text(practice.read_text(encoding="utf-8").replace("status: Active", f'status: "{spelled}"'))
    story = why(LocalBackend(tmp_path / "store", data_dir=data_copy), "SOTA-017")
    assert story.status == spelled
    page = tmp_path / "page.md"
    args = ["--data", str(data_copy), "--store", str(tmp_path / "store"), "export", "index"]
    assert runner.invoke(cli, [*args, "--topic", "distributed-optimization", "-o", str(page)]).exit_code == 0
    (row,) = [line for line in page.read_text(encoding="utf-8").splitlines() if line.startswith("| SOTA-017 ")]
    assert row.endswith(f"| {spelled} |")
    view = runner.invoke(cli, [*args[:4], "export", "view", "topic", "-p", "topic=distributed-optimization",
                               "-f", "mermaid"])  # fmt: skip
    assert view.exit_code == 0 and "SOTA-017 (Rejected)" not in view.output


def test_a_rejected_practice(backend):
    story = why(backend, "SOTA-073")
    assert (story.kind, story.status, story.versions, story.current_version) == (
        "practice",
        "Rejected",
        [1],
        1,
    )
    assert story.reason is not None and story.reason.startswith("states no signal, threshold or action")
    assert [(r.id, r.kind, r.status) for r in story.reason_names] == [
        ("LIT-051", "paper", None),
        ("SOTA-048", "practice", "Active"),
    ]
    assert [r.id for r in story.papers] == ["LIT-051"]
    assert story.papers[0].label == "Jiang et al. (2020), https://www.usenix.org/conference/osdi20/presentation/jiang"
    assert (story.topic, story.topic_label) == ("distributed-optimization", "Distributed optimization")
    assert story.governed_by == []  # the page cites ADR-026 and ADR-059; it never says they govern
    # the reason's own words about the paper the practice is attributed to
    assert story.papers[0].quote == (
        "states no signal, threshold or action, so there is nothing to do differently on reading it, "
        "and LIT-051 does not argue for it."
    )


@pytest.mark.parametrize(
    "record, words",
    [
        ("SOTA-046", "and LIT-051 does not discuss it.”"),
        ("SOTA-073", "and LIT-051 does not argue for it.”"),
        ("SOTA-055", "“LIT-059 names epoch-granular, hand-tuned checkpointing as the problem it solves"),
    ],
)
def test_a_rejection_reason_about_the_cited_paper_is_quoted_never_rested_on(backend, record, words):
    text = render_provenance(why(backend, record), width=1000)
    assert "rests on" not in text and "evidence" not in text
    paper_line = text.split("the page attributes it to 1 paper:\n", 1)[1].splitlines()[1]
    assert paper_line.strip().startswith("its rejection reason concerns this source: “")
    assert words in paper_line


def test_a_practice_whose_reason_does_not_name_its_paper_has_no_quote(backend):
    story = why(backend, "SOTA-049")
    assert [(p.id, p.quote) for p in story.papers] == [("LIT-051", None)]


def test_a_revised_practice_has_its_version_chain(backend):
    story = why(backend, "SOTA-054")
    assert (story.versions, story.current_version, story.status) == ([1, 2], 2, "Active")
    assert [r.id for r in story.named_by] == ["SOTA-055", "SOTA-074"]
    assert "versions: v1 → v2 (current)\n" in render_provenance(story)


def test_an_earlier_version_is_only_known_to_have_existed(runner, built_store):
    result = invoke(runner, built_store, "why", "SOTA-054-v1")
    assert result.exit_code == 0, result.output
    assert result.stdout == (
        "SOTA-054-v1: version 1 of SOTA-054; nothing else is recorded about it\nthe current version of SOTA-054: v2\n"
    )


def test_the_current_version_tells_the_practice_story(backend):
    practice = render_provenance(why(backend, "SOTA-054"))
    current = render_provenance(why(backend, "SOTA-054-v2"))
    assert current == (
        "SOTA-054-v2: version 2 of SOTA-054, its current version; what follows is what the data says of\n"
        "  SOTA-054\n" + practice
    )


def test_a_version_that_does_not_exist_is_not_found(runner, built_store):
    result = invoke(runner, built_store, "why", "SOTA-054-v3")
    assert result.exit_code == 1
    assert result.stderr == "Error: SOTA-054 has no version 3 (its versions: v1, v2); ask for SOTA-054\n"


def test_a_paper(backend):
    story = why(backend, "LIT-059")
    assert (story.kind, story.authors, story.year, story.url) == (
        "paper",
        "Mohan et al.",
        "2021",
        "https://www.usenix.org/conference/fast21/presentation/mohan",
    )
    assert [(r.id, r.version, r.status) for r in story.cited_by] == [
        ("SOTA-054", 2, "Active"),
        ("SOTA-055", 1, "Rejected"),
        ("SOTA-056", 1, "Active"),
        ("SOTA-057", 1, "Active"),
    ]
    assert [r.id for r in story.named_by] == ["SOTA-055"]


def test_an_adr_chain_is_the_same_from_either_end(backend):
    for adr in ("ADR-020", "ADR-026"):
        story = why(backend, adr)
        assert [(r.id, r.status) for r in story.chain] == [("ADR-020", "Superseded"), ("ADR-026", None)]
    assert why(backend, "ADR-026").governs == []
    assert why(backend, "ADR-026").cited_in == ["Topics"]
    assert why(backend, "ADR-020").cited_in == []


def test_what_the_data_does_not_say_of_an_adr_is_not_recorded(backend):
    lonely = why(backend, "ADR-059")
    assert [r.id for r in lonely.chain] == ["ADR-059"]
    assert render_provenance(lonely) == (
        "ADR-059: decision record\n"
        "status: not recorded\n"
        "supersession: not recorded\n"
        "cited in the description of: Topics\n"
    )


def test_text_is_wrapped_to_the_width(backend):
    text = render_provenance(why(backend, "SOTA-049"), width=60)
    lines = text.splitlines()
    # a URL is never cut: it goes whole on a line of its own
    assert all(len(line) <= 60 for line in lines if "https://" not in line)
    assert "  collapses two different quantities into one unfollowable" in lines
    assert lines[-2:] == [
        "  LIT-051  Jiang et al. (2020),",
        "           https://www.usenix.org/conference/osdi20/presentation/jiang",
    ]


def test_unknown_record_suggests_close_identifiers(runner, built_store, backend):
    with pytest.raises(
        RecordNotFound, match="^no practice, paper or ADR has the identifier SOTA-0499; did you mean SOTA-049"
    ):
        why(backend, "SOTA-0499")
    result = invoke(runner, built_store, "why", "LIT-0511")
    assert result.exit_code == 1
    assert result.stderr.startswith(
        "Error: no practice, paper or ADR has the identifier LIT-0511; did you mean LIT-051"
    )
    assert result.stdout == ""
    far = invoke(runner, built_store, "why", "XYZ-123")
    assert far.stderr == "Error: no practice, paper or ADR has the identifier XYZ-123\n"


def test_a_topic_is_not_a_record(backend):
    with pytest.raises(UsageProblem, match="is not a record identifier; give one like SOTA-049, LIT-051 or ADR-026"):
        why(backend, "distributed optimization")


def test_not_an_identifier_exits_2(runner, built_store):
    result = invoke(runner, built_store, "why", "<http://x/>")
    assert result.exit_code == 2
    assert "is not a record identifier" in result.stderr


def test_a_versioned_arxiv_id_links_to_that_version_and_an_unread_locator_is_shown(runner, tmp_path):
    from sotakg.cli import cli

    from .conftest import FIXTURES, SEED_PAGE

    data, store = tmp_path / "data", tmp_path / "store"
    seed = tmp_path / "seed.md"
    seed.write_text(
        SEED_PAGE.read_text(encoding="utf-8").replace("ARXIV-1604.06174.", "ARXIV-16040.6174."), encoding="utf-8"
    )
    for page in (seed, FIXTURES / "other-topic.md"):
        assert runner.invoke(cli, ["--data", str(data), "import", "markdown", str(page)]).exit_code == 0
    paper = runner.invoke(cli, ["--data", str(data), "--store", str(store), "why", "LIT-903"])
    assert paper.stdout == (
        "LIT-903: Åström and Øksendal (2021)\n"
        "arXiv: 2101.00001v2 (https://arxiv.org/abs/2101.00001v2)\n"
        "1 practice is attributed to it:\n"
        "  SOTA-903  v2, Active — Mesurer la contamination avant l’évaluation — 汚染を先に測る\n"
    )
    practice = runner.invoke(cli, ["--data", str(data), "--store", str(store), "why", "SOTA-903"])
    assert "  LIT-903  Åström and Øksendal (2021), arXiv:2101.00001v2\n" in practice.stdout
    unread = runner.invoke(cli, ["--data", str(data), "--store", str(store), "why", "LIT-004"])
    assert "locator (as written; not readable): ARXIV-16040.6174\n" in unread.stdout
    assert "arXiv" not in unread.stdout


def _adr_data(tmp_path, links):
    """A copy of the shipped data with ADRs ADR-1000... linked as ``links`` (each: the ADRs it supersedes)."""
    import shutil

    from .conftest import SHIPPED_DATA

    data = tmp_path / "data"
    shutil.copytree(SHIPPED_DATA, data)
    for number, earlier in enumerate(links, start=1000):
        supersedes = ", ".join(f"ADR-{e}" for e in earlier)
        (data / "adrs" / f"ADR-{number}.yaml").write_text(
            f"id: ADR-{number}\n" + (f"supersedes: [{supersedes}]\n" if earlier else ""), encoding="utf-8"
        )
    return data


@pytest.mark.parametrize(
    ("shape", "links"),
    [
        ("a chain of 450", [[]] + [[1000 + n - 1] for n in range(1, 450)]),
        ("each superseding the two before it", [[]] + [[999 + n] + ([998 + n] if n > 1 else []) for n in range(1, 40)]),
    ],
)
def test_a_long_or_branching_adr_chain_is_told_oldest_first(runner, tmp_path, shape, links):
    """(They recursed once per link, and followed every line of supersessions apart: a chain of 450
    overflowed the stack, 22 ADRs that each supersede the two before took seconds, 40 for ever.)"""
    from sotakg.cli import cli

    data = _adr_data(tmp_path, links)
    store = tmp_path / "store"
    newest = f"ADR-{999 + len(links)}"
    told = runner.invoke(cli, ["--data", str(data), "--store", str(store), "why", newest])
    assert told.exit_code == 0, told.output
    chain = told.stdout.split("supersession chain (oldest first): ", 1)[1]
    assert chain.split() == " → ".join(f"ADR-{number}" for number in range(1000, 1000 + len(links))).split()
