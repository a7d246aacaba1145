"""Review: `sotakg import markdown` on realistic pages of other topics than the shipped one.

Each test writes a topic page as the anthology's curators write them (Evaluation, Data pipelines,
Inference serving, Scaling laws: the seed page's format, other numbers of rows and papers, other
names, other wording), imports it into a fresh data folder inside tmp_path and holds the records to
what the page states: nothing inferred and presented as stated, nothing stated left out. Each
docstring names the bug it fails on ("The bug: ...") and the rule it holds the import to.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from sotakg.cli import cli

#: The anthology's header, as on every topic page.
SCHEME = (
    "Topics — The twenty-eight kinds of claim this anthology files against — the primary axis of both the "
    "practice registry and the reading list, and the same twenty-eight for each (ADR-026). The filing rule is "
    "the point: take a domain topic when the claim is ABOUT the domain; a claim merely discovered in one still "
    "takes its kind. The axis organizes the record, it does not bound it: content the list cannot place is "
    "evidence the list is short (ADR-059)."
)
TABLE = "| # | Title | Summary | Status |\n|---|---|---|---|\n"


def _page(tmp_path: Path, slug: str, head: str, rows: list[str]) -> Path:
    """The topic page ``<slug>.md``: the header, ``head`` (label — scope), the count line, the rows."""
    page = tmp_path / f"{slug}.md"
    text = f"{SCHEME}\n{head}\n{len(rows)} of 449 SOTA documents. Back to the full index.\n{TABLE}" + "\n".join(rows)
    page.write_text(text, encoding="utf-8")
    return page


def _import(runner, tmp_path: Path, slug: str, head: str, rows: list[str]):
    data = tmp_path / "data"
    page = _page(tmp_path, slug, head, rows)
    result = runner.invoke(cli, ["--data", str(data), "import", "markdown", str(page)])
    assert result.exit_code == 0, result.output
    return data, result


def _read(data: Path, folder: str, record: str) -> str:
    path = data / folder / f"{record}.yaml"
    return path.read_text(encoding="utf-8") if path.exists() else ""


# ---------------------------------------------------------------- supersessions the page only hedges

EVALUATION = "Evaluation — benchmarks, held-out sets, contamination, significance, human raters."

HEDGED_REASONS = {
    "probably": "ADR-031 (superseding ADR-030) probably scopes this record out, since it is about raters",
    "possibly": "ADR-031 (superseding ADR-030) possibly files this under human evaluation instead",
    "unlikely": "a claim about annotation tooling. It is unlikely that ADR-031 (superseding ADR-030) keeps it here",
    "apparently": "Apparently ADR-031 (superseding ADR-030) scopes this record out of evaluation",
    "disputes": "Jones disputes that ADR-031 (superseding ADR-030) covers rater agreement at all",
    "argues": "Kapoor argues ADR-031 (superseding ADR-030) moves this to another topic",
    "doubts": "the curators’ note on LIT-406 doubts that ADR-031 (superseding ADR-030) applies",
}


@pytest.mark.parametrize("reason", list(HEDGED_REASONS.values()), ids=list(HEDGED_REASONS))
def test_an_aside_supersession_the_sentence_hedges_or_disputes_is_not_imported(runner, tmp_path, reason):
    """The bug: an aside supersession (``ADR-031 (superseding ADR-030)``) is imported wherever it
    stands unless its sentence holds a word of ``NOT_STATED_RE`` or ``HEDGE_RE``; those lists know
    "perhaps", "maybe", "allegedly", "disputed", "doubt", "claims", "says" ... but not "probably",
    "possibly", "unlikely", "apparently", nor the present tense of the verbs of dispute and report
    they hold in another form ("disputes" beside "disputed", "doubts" beside "doubt", "argues" beside
    "claims"). So a rejection reason saying "It is unlikely that ADR-031 (superseding ADR-030) keeps
    it here" or "Jones disputes that ADR-031 (superseding ADR-030) covers ..." makes ADR-030
    Superseded by ADR-031 in the graph: a supersession the page hedges or disputes, stated as fact.

    The rule: a supersession the page only hedges, reports or disputes is not stated by it: nothing
    is imported, and the warning says so (as for "If accepted, ADR-031 (superseding ADR-030) ...",
    "Jones proposes ADR-031 (superseding ADR-030)" or "... is disputed")."""
    rows = [
        "| SOTA-301 v3 | Report confidence intervals over at least 3 seeds, not a single best run | "
        "Bouthillier et al. (2021), LIT-401 — ARXIV-2103.03098v2. | Active |",
        "| SOTA-307 | Weight human raters by their agreement | Müller and van der Berg (2019), LIT-406 — "
        f"ARXIV-1905.01234. | Rejected — {reason} |",
    ]
    data, result = _import(runner, tmp_path, "evaluation", EVALUATION, rows)
    assert "reason_names: [ADR-030, ADR-031" in _read(data, "practices", "SOTA-307")  # holds: both named
    assert "superseded_by" not in _read(data, "adrs", "ADR-030"), _read(data, "adrs", "ADR-030")
    assert "status: Superseded" not in _read(data, "adrs", "ADR-030")
    assert "supersedes" not in _read(data, "adrs", "ADR-031")
    assert "'ADR-031 (superseding ADR-030)' is not imported as a supersession" in result.output


HEDGE_AFTER_ABBREVIATION = {
    "Suppl.": "If Suppl. Table 3 of LIT-406 holds, ADR-031 (superseding ADR-030) scopes this record out",
    "Exp.": "Unless Exp. B of LIT-406 replicates, ADR-031 (superseding ADR-030) scopes this record out",
    "Corp.": "Unless NVIDIA Corp. Research confirms it, ADR-031 (superseding ADR-030) scopes this record out",
}


@pytest.mark.parametrize("reason", list(HEDGE_AFTER_ABBREVIATION.values()), ids=list(HEDGE_AFTER_ABBREVIATION))
def test_an_abbreviation_does_not_cut_the_condition_off_an_aside_supersession(runner, tmp_path, reason):
    """The bug: ``SENTENCE_END_RE`` ends a sentence at any ". " before a capital letter unless the word
    before it is one of its listed abbreviations (Fig., Sec., Eq., Prof., App., ...). "Suppl.", "Exp."
    and "Corp." are not listed, so in "If Suppl. Table 3 of LIT-406 holds, ADR-031 (superseding
    ADR-030) scopes this record out" the sentence judged is "Table 3 of LIT-406 holds, ADR-031
    (superseding ADR-030) ...", which holds no "If": the conditional supersession is imported as
    stated (ADR-030 Superseded by ADR-031). "If Sec. A.2 holds, ..." or "Unless App. B says ..." are
    rightly not imported.

    The rule: the condition is the aside's whatever abbreviation stands in it: nothing is imported,
    and the warning says so."""
    rows = [
        "| SOTA-307 | Weight human raters by their agreement | Müller and van der Berg (2019), LIT-406 — "
        f"ARXIV-1905.01234. | Rejected — {reason} |",
    ]
    data, result = _import(runner, tmp_path, "evaluation", EVALUATION, rows)
    assert "superseded_by" not in _read(data, "adrs", "ADR-030"), _read(data, "adrs", "ADR-030")
    assert "supersedes" not in _read(data, "adrs", "ADR-031")
    assert "'ADR-031 (superseding ADR-030)' is not imported as a supersession" in result.output


@pytest.mark.parametrize("aside", ["(replaces ADR-030)", "(which replaces ADR-030)"])
def test_an_aside_with_replaces_is_read_as_its_supersedes_twin_is(runner, tmp_path, aside):
    """The bug: ``SUPERSEDES_ASIDE_RE`` reads the anthology's aside with "superseding", "supersedes",
    "which supersedes" and "replacing", and its passive with "superseded by" and "replaced by" -- but
    not "replaces" nor "which replaces". So a rejection reason on an evaluation page saying "ADR-031
    (replaces ADR-030) scopes this record out", as plain as "ADR-031 (supersedes ADR-030) scopes this
    record out" (which is imported), states a supersession the graph does not hold: ADR-030 is not
    superseded by ADR-031, and the import only warns that "'replaces' may state a supersession ... in
    a form the import does not read".

    The rule: what the page states is in the graph, whichever of the two verbs it uses: ADR-030 is
    superseded by ADR-031, exactly as for the "supersedes" aside."""
    rows = [
        "| SOTA-307 | Weight human raters by their agreement | Müller and van der Berg (2019), LIT-406 — "
        f"ARXIV-1905.01234. | Rejected — ADR-031 {aside} scopes this record out, it is about annotation tooling |",
    ]
    data, result = _import(runner, tmp_path, "evaluation", EVALUATION, rows)
    assert "superseded_by: ADR-031\n" in _read(data, "adrs", "ADR-030"), _read(data, "adrs", "ADR-030")
    assert "supersedes: [ADR-030]\n" in _read(data, "adrs", "ADR-031")
    assert "in a form the import does not read" not in result.output


# ---------------------------------------------------------------- authors the page does not state

DATA_PIPELINES = "Data pipelines — loading, sharding, shuffling, deduplication, input throughput."

LEADS = ["Crucially, ", "Importantly, ", "Nevertheless, ", "Thus, ", "First, ", "Overall, ", "Yet "]


@pytest.mark.parametrize("lead", LEADS)
def test_a_sentence_adverb_before_a_later_byline_is_not_made_part_of_its_authors(runner, tmp_path, lead):
    """The bug: the fix for "Later, Narayanan et al. (2021), LIT-902" is a word list
    (``_LINKING_WORDS``, ``_PROSE_OPENERS``): any other sentence adverb that opens the next sentence
    is still taken for a name by ``_names_only`` (it is capitalised, as names are). On a data
    pipelines page, "Lee et al. (2022), LIT-602 — ARXIV-2107.06499v2. Crucially, Broder (1997),
    LIT-603 — https://doi.org/10.1109/SEQUEN.1997.666900." records LIT-603 as written by
    "Crucially, Broder"; the same with "Importantly, ", "Nevertheless, ", "Thus, ", "First, ",
    "Overall, ", "Yet ". `why LIT-603`, `query papers-of` then show an author the page never names.

    The rule: the page names Broder as the author; a word that opens the sentence is no author:
    LIT-603 is recorded as written by "Broder", or (with a warning) without authors."""
    summary = (
        "Lee et al. (2022), LIT-602 — ARXIV-2107.06499v2. "
        f"{lead}Broder (1997), LIT-603 — https://doi.org/10.1109/SEQUEN.1997.666900."
    )
    rows = [
        "| SOTA-501 v4 | Shuffle at the shard level *and* within a buffer of at least 10,000 samples | "
        "Nguyễn Văn An and Trần Thị Bình (2022), LIT-601 — ARXIV-2203.00001v2. | Active |",
        f"| SOTA-502 | Deduplicate near-duplicates with MinHash before tokenizing | {summary} | Active |",
    ]
    data, _ = _import(runner, tmp_path, "data-pipelines", DATA_PIPELINES, rows)
    assert "authors: Nguyễn Văn An and Trần Thị Bình\n" in _read(data, "papers", "LIT-601")  # holds
    assert "authors: Lee et al.\n" in _read(data, "papers", "LIT-602")  # holds
    paper = _read(data, "papers", "LIT-603")
    assert lead.strip(", ") not in paper, paper


PREPOSITIONS = ["After ", "Like ", "With ", "Beyond ", "Via ", "Before "]


@pytest.mark.parametrize("lead", PREPOSITIONS)
def test_a_preposition_opening_the_summary_is_not_made_part_of_the_authors(runner, tmp_path, lead):
    """The bug: ``_PROSE_OPENERS`` lists "unlike", "following", "against", "despite" ... as words that
    open prose rather than a list of names, but not "After", "Like", "With", "Beyond", "Via",
    "Before". So "After Huang et al. (2018), LIT-016 — ARXIV-1811.06965, prefetch ..." is read as a
    byline whose authors are "After Huang et al.": LIT-016 (a paper of the distributed-optimization
    page, cited from this one) is recorded as written by "After Huang et al." — which also clashes
    with the seed page's "Huang et al." when both pages are imported into one data folder.

    The rule: the page names Huang et al. as the authors; a preposition that opens the sentence is no
    author's name: LIT-016 is recorded as written by "Huang et al.", or (with a warning) without
    authors."""
    summary = f"{lead}Huang et al. (2018), LIT-016 — ARXIV-1811.06965, fill the next batch during this one."
    rows = [f"| SOTA-503 | Prefetch the next batch while the current one trains | {summary} | Proposed |"]
    data, _ = _import(runner, tmp_path, "data-pipelines", DATA_PIPELINES, rows)
    paper = _read(data, "papers", "LIT-016")
    assert lead.strip() not in paper, paper


# ---------------------------------------------------------------- citations the page states, dropped

INFERENCE = "Inference serving — batching, caching, quantization and scheduling at serving time."


def test_a_byline_with_the_particle_des_is_a_citation(runner, tmp_path):
    """The bug: ``_AUTHOR_LOWER_WORDS`` knows "de", "du", "del", "della", "las", "los" ... but not the
    French "des", so "Tachet des Combes et al. (2020), LIT-811 — ARXIV-2003.04475." (Remi Tachet des
    Combes) is not read as a byline: the practice does not cite LIT-811, no paper record is made,
    and the warning calls LIT-811 "named outside its bylines" although the summary is nothing but
    its byline.

    The rule: a byline is a byline whatever its names' particles: the practice cites LIT-811, and
    the paper gets its authors, year and arXiv id (as "de Vries", "van der Maaten" and "de las Casas"
    do)."""
    rows = [
        "| SOTA-801 | Batch requests continuously rather than per static batch | Yu et al. (2022), LIT-810 — "
        "https://www.usenix.org/conference/osdi22/presentation/yu. | Active |",
        "| SOTA-802 | Re-weight the calibration set when the serving distribution shifts | Tachet des Combes et al. "
        "(2020), LIT-811 — ARXIV-2003.04475. | Proposed |",
    ]
    data, result = _import(runner, tmp_path, "inference-serving", INFERENCE, rows)
    assert "cites: [LIT-810]\n" in _read(data, "practices", "SOTA-801")  # holds
    assert "cites: [LIT-811]\n" in _read(data, "practices", "SOTA-802")
    assert _read(data, "papers", "LIT-811") == (
        "id: LIT-811\nauthors: Tachet des Combes et al.\nyear: 2020\narxiv: '2003.04475'\n"
    )
    assert "named in the summary outside its bylines" not in result.output


@pytest.mark.parametrize("et_al", ["*et al.*", "_et al._"])
def test_a_byline_with_et_al_in_emphasis_is_a_citation(runner, tmp_path, et_al):
    """The bug: a curator who sets "et al." in italics, as much of the literature does ("Kwon *et
    al.* (2023), LIT-812 — ARXIV-2309.06180."), loses the citation: ``_names_only`` takes the word
    "al.*" for a lower-case word of prose (it is not "al." exactly), so the byline is not read, the
    practice does not cite LIT-812, no paper record is made, and the warning calls LIT-812 "named
    outside its bylines". Markdown shows the summary as "Kwon et al. (2023), LIT-812 — ...".

    The rule: emphasis is the page's layout, not its words: the practice cites LIT-812, and the
    paper gets its year and arXiv id (its authors as written or as shown)."""
    rows = [
        f"| SOTA-803 | Page the KV cache in fixed-size blocks | Kwon {et_al} (2023), LIT-812 — ARXIV-2309.06180. "
        "| Active |",
    ]
    data, result = _import(runner, tmp_path, "inference-serving", INFERENCE, rows)
    assert "cites: [LIT-812]\n" in _read(data, "practices", "SOTA-803")
    paper = _read(data, "papers", "LIT-812")
    assert "year: 2023\n" in paper and "arxiv: '2309.06180'\n" in paper, paper
    assert f"authors: Kwon {et_al}\n" in paper or "authors: Kwon et al.\n" in paper, paper
    assert "named in the summary outside its bylines" not in result.output
