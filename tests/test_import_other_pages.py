"""Fidelity of `sotakg import markdown` on topic pages other than the shipped one.

Each test builds a small page of another topic (Regularization) in its tmp_path, imports it into a
fresh data folder, and holds the records (or the built graph) to what the page states: nothing
inferred and presented as stated, nothing the page states left out. Each docstring names the bug it
was written against (found by reading the import as another topic's page would exercise it)."""

from __future__ import annotations

from pathlib import Path

import pytest

from sotakg.cli import cli

HEAD = (
    "Topics — The kinds of claim this anthology files against (ADR-026).\n"
    "Regularization — weight decay, dropout, noise.\n"
    "{count} of 449 SOTA documents. Back to the full index.\n"
    "| # | Title | Summary | Status |\n"
    "|---|---|---|---|\n"
)


def _page(tmp_path: Path, *rows: str, head: str = HEAD) -> Path:
    """A topic page of these rows, as the anthology writes one (no line end after the last row)."""
    page = tmp_path / "regularization.md"
    page.write_text(head.format(count=len(rows)) + "\n".join(rows), encoding="utf-8")
    return page


def _import_page(runner, tmp_path: Path, page: Path):
    """Import ``page`` into ``tmp_path/data``, which must succeed: the data folder and the result."""
    data = tmp_path / "data"
    result = runner.invoke(cli, ["--data", str(data), "import", "markdown", str(page)])
    assert result.exit_code == 0, result.output
    return data, result


def _import(runner, tmp_path: Path, *rows: str, head: str = HEAD):
    return _import_page(runner, tmp_path, _page(tmp_path, *rows, head=head))


def _read(data: Path, folder: str, record: str) -> str:
    return (data / folder / f"{record}.yaml").read_text(encoding="utf-8")


# ---------------------------------------------------------------- supersessions the page does not state


HEDGED_ASIDES = {
    # Capitalised abbreviations end no sentence: the condition before them is the aside's.
    "Prof.": "Unless Prof. Hinton objects, ADR-031 (superseding ADR-030) scopes this record out.",
    "Mr.": "If Mr. Smith is right, ADR-031 (superseding ADR-030) scopes this record out.",
    "Eq.": "If Eq. 3 holds, ADR-031 (superseding ADR-030) scopes this record out.",
    # A typographic apostrophe denies as the ASCII one does (the anthology writes "Horovod’s").
    "isn’t": "ADR-031 (superseding ADR-030) isn’t in force yet.",
    "it isn’t": "It isn’t settled that ADR-031 (superseding ADR-030) holds.",
    "doesn’t": "ADR-031 (superseding ADR-030) doesn’t scope this record.",
    # A question stays one in emphasis or quotes: its "?" is followed by the closing mark.
    "*?*": "*Does ADR-031 (superseding ADR-030) apply here?*",
    "_?_": "_Does ADR-031 (superseding ADR-030) apply here?_",
    '"?"': 'Smith asked: "Does ADR-031 (superseding ADR-030) apply here?"',
}


@pytest.mark.parametrize("reason", list(HEDGED_ASIDES.values()), ids=list(HEDGED_ASIDES))
def test_an_aside_supersession_in_a_hedged_sentence_is_warned_of_not_imported(runner, tmp_path, reason):
    """The bugs: the sentence splitter (SENTENCE_END_RE) spared the abbreviations ``prof``, ``mr``,
    ``eq`` ... only in lower case, so ``Prof.`` ended a sentence and cut "Unless ..." off the aside;
    NOT_STATED_RE knew ``isn't`` only with the ASCII apostrophe; and a ``?`` followed by the closing
    ``*``, ``_`` or quote of emphasis or a quotation ended no sentence. Each made ADR-030 filed as
    superseded by ADR-031 although the page only says so conditionally, denies it, or asks.

    The rule: the sentence is judged whole, whatever its case, apostrophes or emphasis: its aside is
    warned of and not imported, as "If Huang et al. are right, ADR-031 (superseding ADR-030) holds." is."""
    data, result = _import(runner, tmp_path, f"| SOTA-530 | T | S | Rejected — {reason} |")
    assert "superseded_by" not in _read(data, "adrs", "ADR-030")
    assert "supersedes" not in _read(data, "adrs", "ADR-031")
    assert "'ADR-031 (superseding ADR-030)' is not imported as a supersession" in result.output


# ---------------------------------------------------------------- citations the page states, dropped


@pytest.mark.parametrize(
    ("authors", "other_order"),
    [
        ("李 et al.", "Huang and 李"),
        ("王 and Huang", "Huang and 王"),
        ("محمد et al.", "Huang and محمد"),
    ],
)
def test_a_byline_whose_first_author_is_in_a_script_without_case_is_a_citation(runner, tmp_path, authors, other_order):
    """The bug: ``_names_only`` wants the first word of a byline's authors to start with an
    upper-case letter, and a letter of a script without case (Chinese, Arabic) is neither upper nor
    lower case. So "李 et al. (2020), LIT-901 — ARXIV-2001.00001." is not read as a byline: the
    practice does not cite LIT-901, the paper is not recorded, and the warning calls it a paper
    "named outside its bylines". Yet the same names in another order ("Huang and 李 (2020),
    LIT-901") are read, since a later word only has to be not lower case.

    The rule: such a name is no lower-case prose word: the byline is read, the practice cites
    the paper, and the paper gets its authors, year and locator."""
    rows = (
        f"| SOTA-560 | T | {authors} (2020), LIT-901 — ARXIV-2001.00001. | Active |",
        f"| SOTA-561 | T | {other_order} (2021), LIT-902 — ARXIV-2101.00001. | Active |",
    )
    data, result = _import(runner, tmp_path, *rows)
    assert "cites: [LIT-902]\n" in _read(data, "practices", "SOTA-561")  # the names read in the other order
    assert "cites: [LIT-901]\n" in _read(data, "practices", "SOTA-560")
    assert _read(data, "papers", "LIT-901") == f"id: LIT-901\nauthors: {authors}\nyear: 2020\narxiv: '2001.00001'\n"
    assert "named in the summary outside its bylines" not in result.output


@pytest.mark.parametrize("authors", ["Smith Jr. et al.", "St. Clair et al."])
def test_a_byline_with_an_abbreviated_name_part_is_a_citation(runner, tmp_path, authors):
    """The bug: ``_SENTENCE_IN_AUTHORS_RE`` takes any word of two letters or more before
    ". " for the end of a sentence of prose (only "al." is spared), so the authors "Smith Jr. et al."
    or "St. Clair et al." are read as prose: the practice does not cite the paper of the byline, and
    the paper is not recorded. (The sentence splitter itself knows ``jr`` and ``st`` as abbreviations.)

    The rule: "Smith Jr. et al. (2020), LIT-901 — ARXIV-2001.00001." is a byline like any other:
    the practice cites LIT-901, which gets its authors, year and arXiv id."""
    data, result = _import(
        runner, tmp_path, f"| SOTA-560 | T | {authors} (2020), LIT-901 — ARXIV-2001.00001. | Active |"
    )
    assert "cites: [LIT-901]\n" in _read(data, "practices", "SOTA-560")
    assert _read(data, "papers", "LIT-901") == f"id: LIT-901\nauthors: {authors}\nyear: 2020\narxiv: '2001.00001'\n"
    assert "named in the summary outside its bylines" not in result.output


# ---------------------------------------------------------------- the graph's reading of the description


def test_an_adr_the_scheme_description_names_right_after_a_cjk_word_is_referenced(runner, tmp_path):
    """The bug: the import reads the ids of a text with ASCII word boundaries (``RECORD_ID_RE``,
    re.ASCII), the graph with Unicode ones (``MENTIONED_ID`` in graph/rdf.py). A description that
    names ADR-026 right after a Chinese word ("分类见ADR-026。", written without a space as Chinese
    is) makes the ADR-026 record, but the graph has no ``id:topics dcterms:references id:ADR-026``,
    which it states for "... for each (ADR-026).": the graph says less than the page.

    The rule: the description cites every ADR it names, whatever script stands next to it: the
    graph references ADR-026 and ADR-059, the records the import made for them."""
    head = HEAD.replace(
        "The kinds of claim this anthology files against (ADR-026).", "本选集的主题分类见ADR-026，范围见ADR-059。"
    )
    data, _ = _import(runner, tmp_path, "| SOTA-560 | T | S | Proposed |", head=head)
    assert (data / "adrs" / "ADR-026.yaml").exists() and (data / "adrs" / "ADR-059.yaml").exists()
    store = tmp_path / "store"
    built = runner.invoke(cli, ["--data", str(data), "--store", str(store), "build"])
    assert built.exit_code == 0, built.output
    exported = runner.invoke(cli, ["--data", str(data), "--store", str(store), "export", "rdf", "--format", "ntriples"])
    assert exported.exit_code == 0, exported.output
    for adr in ("ADR-026", "ADR-059"):
        assert (
            f"<https://w3id.org/sotakg/id/topics> <http://purl.org/dc/terms/references> "
            f"<https://w3id.org/sotakg/id/{adr}> ."
        ) in exported.stdout


def _import_any(runner, tmp_path: Path, *rows: str, head: str = HEAD):
    """The page, the data folder and the outcome of importing these rows, whatever it is."""
    data = tmp_path / "data"
    page = _page(tmp_path, *rows, head=head)
    result = runner.invoke(cli, ["--data", str(data), "import", "markdown", str(page)])
    return page, data, result


def _imported_page(runner, tmp_path: Path, *rows: str, head: str = HEAD):
    page, data, result = _import_any(runner, tmp_path, *rows, head=head)
    assert result.exit_code == 0, result.output
    return page, data, result


def _assert_aside_not_imported(page: Path, data: Path, result) -> None:
    """ADR-030 is not filed as superseded by ADR-031, and the aside on line 6 is warned of."""
    assert "superseded_by" not in _read(data, "adrs", "ADR-030")
    assert "supersedes" not in _read(data, "adrs", "ADR-031")
    assert f"{page}:6: 'ADR-031 (superseding ADR-030)' is not imported as a supersession" in result.output


def _read_if_made(data: Path, folder: str, record: str) -> str:
    """The record's text, or "" where the import (rightly or not) made no such record."""
    path = data / folder / f"{record}.yaml"
    return path.read_text(encoding="utf-8") if path.exists() else ""


# ---------------------------------------------------------------- authors the page does not state


@pytest.mark.parametrize("lead", ["Later, ", "Earlier, ", "Independently, ", "In 2021, ", "Compare "])
def test_a_prose_word_before_a_later_byline_is_not_made_part_of_its_authors(runner, tmp_path, lead):
    """The bug: ``_names_only`` takes any word that is not lower case for part of a name, and
    ``_PROSE_OPENERS`` lists only some words that open a sentence ("However", "See", "Unlike" ...).
    So in "Huang et al. (2018), LIT-901 — ARXIV-1811.06965. Later, Narayanan et al. (2021), LIT-902 —
    ARXIV-2104.04473." the second byline's authors are read as "Later, Narayanan et al.", and the
    paper LIT-902 is recorded (and shown by `why`, `query`) as written by "Later, Narayanan et al.";
    the same with "Earlier, ", "Independently, ", "In 2021, " (a number is no name either) and
    "Compare ".

    The rule: the graph says what the page says. The page names Narayanan et al. as the authors;
    an adverb, a date or a verb that opens the sentence is no author: LIT-902's authors are never
    recorded with it (either "Narayanan et al." or, with a warning, none)."""
    summary = (
        f"Huang et al. (2018), LIT-901 — ARXIV-1811.06965. {lead}Narayanan et al. (2021), LIT-902 — ARXIV-2104.04473."
    )
    _, data, _ = _imported_page(runner, tmp_path, f"| SOTA-560 | Balance the stages | {summary} | Active |")
    paper = _read_if_made(data, "papers", "LIT-902")
    assert f"authors: {lead.strip()}" not in paper, paper
    assert lead.strip(", ") not in paper, paper


def test_the_and_of_a_serial_list_of_bylines_is_not_an_author(runner, tmp_path):
    """The bug: a summary listing its bylines serially, "A (2020), LIT-901 — ...; B (2021), LIT-902 —
    ...; and C (2022), LIT-903 — ...", has its third byline read with the authors "and Kim": "and" is
    one of the lower-case words a list of authors may hold (``_AUTHOR_LOWER_WORDS``), and
    ``_names_only`` lets a list of names start with one. The paper LIT-903 is recorded as written by
    "and Kim".

    The rule: no stated fact is invented: the page says Kim wrote LIT-903, not "and Kim"."""
    summary = (
        "Smith (2020), LIT-901 — ARXIV-2001.00001; Lee (2021), LIT-902 — https://example.org/lee21; "
        "and Kim (2022), LIT-903 — ARXIV-2201.00001."
    )
    _, data, _ = _imported_page(runner, tmp_path, f"| SOTA-560 | Use dropout before the head | {summary} | Active |")
    assert "authors: Lee\n" in _read(data, "papers", "LIT-902")
    assert "authors: and" not in _read_if_made(data, "papers", "LIT-903")


def test_two_author_groups_with_one_et_al_are_not_each_given_to_both_papers(runner, tmp_path):
    """The bug: a byline naming two groups of authors for two papers ("Zhao et al. and Rajbhandari
    (2022, 2020), LIT-901 and LIT-902": Zhao et al. wrote one, Rajbhandari the other, as the two
    years say) is taken for one group that wrote both, unless it holds "et al." twice
    (``len(_ET_AL_RE.findall(...)) > 1``). Both papers are recorded as written by "Zhao et al. and
    Rajbhandari" — a list of authors neither paper has on the page. With "Zhao et al. and
    Rajbhandari et al." the import rightly warns and assigns none.

    The rule: authors are assigned only where the page says whose they are: an "et al." closes a
    group of authors, so the names after it are another group; neither paper gets the joined list
    (a warning says why, as for the "et al." on both sides)."""
    summary = "Zhao et al. and Rajbhandari (2022, 2020), LIT-901 and LIT-902."
    _, data, _ = _imported_page(runner, tmp_path, f"| SOTA-560 | Shard the optimizer state | {summary} | Active |")
    for lit in ("LIT-901", "LIT-902"):
        assert "authors: Zhao et al. and Rajbhandari" not in _read(data, "papers", lit)


# ---------------------------------------------------------------- citations the page states, dropped


@pytest.mark.parametrize(
    "authors",
    [
        "de las Casas et al.",  # Diego de las Casas: "las" is a particle, as "la" and "los"
        "do Carmo and Lee",  # Portuguese "do", as "da", "dos" and "das"
        "al-Rashid et al.",  # the Arabic article, written lower case with its hyphen
    ],
)
def test_a_byline_opening_with_a_name_particle_the_list_lacks_is_a_citation(runner, tmp_path, authors):
    """The bug: ``_AUTHOR_LOWER_WORDS`` knows "de", "la", "da", "dos", "das", "al" ... but not "las",
    "los", "do" nor the hyphenated "al-" of Arabic names, so a byline whose authors start with one
    ("de las Casas et al. (2022), LIT-901 — ARXIV-2203.15556.") is not read: the practice does not
    cite LIT-901, no paper record is made, and the warning calls LIT-901 a paper "named outside its
    bylines" although the summary is nothing but that byline.

    The rule: a byline is a byline whatever its names' particles: the practice cites LIT-901 and the
    paper gets its authors, year and arXiv id (as "van der Maaten et al." and "de Vries" do)."""
    row = f"| SOTA-560 | Scale data with parameters | {authors} (2022), LIT-901 — ARXIV-2203.15556. | Active |"
    _, data, result = _imported_page(runner, tmp_path, row)
    assert "cites: [LIT-901]\n" in _read(data, "practices", "SOTA-560")
    assert _read(data, "papers", "LIT-901") == f"id: LIT-901\nauthors: {authors}\nyear: 2022\narxiv: '2203.15556'\n"
    assert "named in the summary outside its bylines" not in result.output


@pytest.mark.parametrize("authors", ["Yu. Nesterov", "Ya. Z. Tsypkin", "Th. Hofmann"])
def test_a_byline_with_a_two_letter_initial_is_a_citation(runner, tmp_path, authors):
    """The bug: ``_SENTENCE_IN_AUTHORS_RE`` takes any word of two letters or more before ". " for the
    end of a sentence of prose, and spares only "al", "Jr", "St", "Dr" ... So the initials of Russian
    and German given names as the literature writes them ("Yu. Nesterov", "Ya. Z. Tsypkin",
    "Th. Hofmann") make the byline prose: on an optimization page "Yu. Nesterov (1983), LIT-901 —
    https://example.org/nesterov83." is not read, the practice does not cite LIT-901 and there is no
    paper record ("Nesterov, Yu. (1983)", with the initial last, is read).

    The rule: "Yu." is an initial, not the end of a sentence: the practice cites LIT-901 and the paper
    gets its authors, year and URL."""
    row = f"| SOTA-560 | Use momentum | {authors} (1983), LIT-901 — https://example.org/nesterov83. | Active |"
    _, data, result = _imported_page(runner, tmp_path, row)
    assert "cites: [LIT-901]\n" in _read(data, "practices", "SOTA-560")
    assert _read(data, "papers", "LIT-901") == (
        f"id: LIT-901\nauthors: {authors}\nyear: 1983\nurl: https://example.org/nesterov83\n"
    )


# ---------------------------------------------------------------- locators the page gives, dropped silently


@pytest.mark.parametrize(
    "locator",
    [
        "[PDF](https://en.wikipedia.org/wiki/Dropout_(neural_networks))",  # balanced parentheses: a valid link
        "[x](javascript:alert(1))",  # a hostile link, which must be kept verbatim and reported
    ],
)
def test_a_link_locator_with_parentheses_is_kept_verbatim_and_warned_of(runner, tmp_path, locator):
    """The bug: ``LOCATOR_RE`` reads a Markdown link after a byline only where its destination holds
    no parenthesis (``\\([^()\\s]*+ ...\\)``), but Markdown link destinations may hold balanced ones
    (every Wikipedia URL of a disambiguated article, ``javascript:alert(1)``). Such a locator matches
    nothing, the byline is still read (it is followed by `` — ``), and the paper gets no ``locator``
    and no ``url``, with no warning at all: the page's locator is silently gone from the graph, and
    validate has nothing to report (``[x](javascript:alert)`` without parentheses *is* kept and warned
    of).

    The rule: a locator that cannot be read is kept verbatim as the paper's ``locator``, with a
    warning, "so that validate reports it on the paper instead of the import dropping it"."""
    row = f"| SOTA-560 | Use dropout | Srivastava et al. (2014), LIT-901 — {locator}. | Active |"
    page, data, result = _imported_page(runner, tmp_path, row)
    paper = _read(data, "papers", "LIT-901")
    assert "locator:" in paper or "url:" in paper, paper
    assert f"{page}:6: row SOTA-560: cannot read the locator" in result.output


# ---------------------------------------------------------------- supersessions the page does not state


@pytest.mark.parametrize(
    "reason",
    [
        "If Figs. 2 and 3 are right, ADR-031 (superseding ADR-030) scopes this record out.",
        "If Eqs. 3 and 4 hold, ADR-031 (superseding ADR-030) scopes this record out.",
        "If Refs. 3 and 4 hold, ADR-031 (superseding ADR-030) scopes this record out.",
        "If Sect. 4 holds, ADR-031 (superseding ADR-030) scopes this record out.",
        "If Thm. 1 holds, ADR-031 (superseding ADR-030) scopes this record out.",
        "If Alg. 1 converges, ADR-031 (superseding ADR-030) scopes this record out.",
        "ADR-031 (superseding ADR-030) is being drafted.",
        "ADR-031 (superseding ADR-030) awaits approval.",
        "ADR-031 (superseding ADR-030) is under consideration.",
        "ADR-031 (superseding ADR-030) is scheduled for next quarter.",
        "ADR-031 (superseding ADR-030) was repealed.",
        "According to Smith, ADR-031 (superseding ADR-030) scopes it.",
    ],
    ids=["Figs.", "Eqs.", "Refs.", "Sect.", "Thm.", "Alg."]
    + ["drafted", "awaits", "consideration", "scheduled", "repealed", "according-to"],
)
def test_an_aside_the_page_states_only_conditionally_or_as_not_in_force_is_not_imported(runner, tmp_path, reason):
    """The bug (first six): ``SENTENCE_END_RE`` spared a fixed list of abbreviations ("fig", "eq",
    "ref", "sec", ...) but not their plurals nor other common ones of a paper's prose ("Figs.",
    "Eqs.", "Refs.", "Sect.", "Thm.", "Alg."): their dot ended the sentence, which cut the condition
    "If ..." off the aside, and ADR-030 was filed as Superseded by ADR-031.

    The bug (the others): ``HEDGE_RE`` listed "draft", "pending", "considered", "revoked", "says" ...
    but not "drafted", "awaits", "consideration", "scheduled", "repealed" nor "according": each of
    these sentences, which say the supersession is not (or no longer, or only by someone's account)
    in force, filed ADR-030 as Superseded by ADR-031.

    The rule: a supersession the page states only conditionally, or as not in force, is not
    imported: ADR-030 keeps no ``superseded_by`` and the aside is warned of."""
    page, data, result = _imported_page(runner, tmp_path, f"| SOTA-530 | T | S | Rejected — {reason} |")
    _assert_aside_not_imported(page, data, result)


@pytest.mark.parametrize("joined", [" & ", "/"])
def test_an_aside_shared_by_adrs_listed_otherwise_than_with_and_is_not_imported(runner, tmp_path, joined):
    """The bug: ``_stated_aside`` refuses an aside that a list of ADRs shares ("ADR-020 and ADR-021
    (superseded by ADR-026)": which of them is superseded is not said) only where the list is joined
    by ",", "and" or "or". Joined by "&" or "/", the aside is imported for the
    last ADR alone: ADR-021 is filed as superseded by ADR-026, ADR-020 is not, and nothing is warned
    of — one reading of an ambiguous sentence presented as what the page states.

    The rule: as for "and": the supersession is warned of and not imported."""
    reason = f"ADR-020{joined}ADR-021 (superseded by ADR-026) scoped this record."
    page, data, result = _imported_page(runner, tmp_path, f"| SOTA-530 | T | S | Rejected — {reason} |")
    assert "superseded_by" not in _read(data, "adrs", "ADR-021")
    assert "supersedes" not in _read(data, "adrs", "ADR-026")
    assert f"{page}:6: 'ADR-021 (superseded by ADR-026)' is not imported as a supersession" in result.output


# ---------------------------------------------------------------- the graph's reading of the scope line


def test_an_adr_the_topic_scope_names_is_referenced_by_the_topic_in_the_graph(runner, tmp_path):
    """The bug: the import makes a record of every ADR the scope line names ("Regularization —
    weight decay, dropout; filed per ADR-059."), but the graph links the topic to none of them:
    ``record_statements`` derives ``dcterms:references`` from the topic scheme's description only.
    The same ADR named in line 1 is referenced by ``id:topics``; named in line 2 it is a record the
    graph ties to nothing, so `sotakg why ADR-059` says nothing cites it.

    The rule: no less than the page says: the scope line cites ADR-059, so the graph has a statement
    from the topic to ADR-059 (as the description's citation is ``id:topics dcterms:references``)."""
    head = HEAD.replace("weight decay, dropout, noise.", "weight decay, dropout; filed per ADR-059.")
    _, data, _ = _imported_page(runner, tmp_path, "| SOTA-560 | T | S | Proposed |", head=head)
    assert (data / "adrs" / "ADR-059.yaml").exists()
    store = tmp_path / "store"
    exported = runner.invoke(cli, ["--data", str(data), "--store", str(store), "export", "rdf", "--format", "ntriples"])
    assert exported.exit_code == 0, exported.output
    topic_to_adr = [
        line
        for line in exported.stdout.splitlines()
        if line.startswith("<https://w3id.org/sotakg/topic/regularization> ")
        and line.endswith("<https://w3id.org/sotakg/id/ADR-059> .")
    ]
    assert topic_to_adr, "no statement links the topic to the ADR its scope line cites"


# ---------------------------------------------------------------- hostile pages: an error, never a traceback


HUGE = "7" * 5000


@pytest.mark.parametrize(
    ("where", "line", "head", "row"),
    [
        ("count", 3, HEAD.replace("{count} of 449", f"{HUGE} of 449"), "| SOTA-560 | T | S | Active |"),
        ("total", 3, HEAD.replace("of 449", f"of {HUGE}"), "| SOTA-560 | T | S | Active |"),
        ("practice id", 6, HEAD, f"| SOTA-{HUGE} | T | S | Active |"),
    ],
    ids=["count", "total", "practice-id"],
)
def test_a_number_past_pythons_digit_limit_is_refused_naming_its_line(runner, tmp_path, where, line, head, row):
    """The bug: the count line's numbers (``int(count_match["count"])``, ``["total"]``) and a row's
    practice number (``_id_key``, when the page is rendered again to compare) are converted with
    ``int()`` unbounded, and Python refuses to convert a string of more than 4,300 digits: a page
    whose count, total or practice id has 5,000 digits stops the import with a ValueError traceback
    ("Exceeds the limit (4300 digits) for integer string conversion") instead of an error naming the
    page and line. (A 30-digit total is refused cleanly: "'declared_size' is 999..., more than any
    real record has".)

    The rule: a hostile page gives a clear error naming its file and line, never a traceback."""
    page, data, result = _import_any(runner, tmp_path, row, head=head)
    assert not isinstance(result.exception, ValueError), f"{where}: {result.exception!r}"
    assert result.exit_code == 1, result.output
    assert f"{page}:{line}:" in result.output
    assert not data.exists() or not any(data.rglob("*.yaml"))


# ---------------------------------------------------------------- pages of other topics (a review)

#: The anthology's header, as on every topic page.
TOPIC_SCHEME = (
    "Topics — The twenty-eight kinds of claim this anthology files against — the primary axis of both the "
    "practice registry and the reading list, and the same twenty-eight for each (ADR-026). The filing rule is "
    "the point: take a domain topic when the claim is ABOUT the domain; a claim merely discovered in one still "
    "takes its kind. The axis organizes the record, it does not bound it: content the list cannot place is "
    "evidence the list is short (ADR-059)."
)
TOPIC_TABLE = "| # | Title | Summary | Status |\n|---|---|---|---|\n"


def _topic_page(tmp_path: Path, slug: str, head: str, rows: list[str]) -> Path:
    """The topic page ``<slug>.md``: the header, ``head`` (label — scope), the count line, the rows."""
    page = tmp_path / f"{slug}.md"
    text = (
        f"{TOPIC_SCHEME}\n{head}\n{len(rows)} of 449 SOTA documents. Back to the full index.\n{TOPIC_TABLE}"
        + "\n".join(rows)
    )
    page.write_text(text, encoding="utf-8")
    return page


def _import_topic(runner, tmp_path: Path, slug: str, head: str, rows: list[str]):
    return _import_page(runner, tmp_path, _topic_page(tmp_path, slug, head, rows))


def _record_text(data: Path, folder: str, record: str) -> str:
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
    data, result = _import_topic(runner, tmp_path, "evaluation", EVALUATION, rows)
    assert "reason_names: [ADR-030, ADR-031" in _record_text(data, "practices", "SOTA-307")  # holds: both named
    assert "superseded_by" not in _record_text(data, "adrs", "ADR-030"), _record_text(data, "adrs", "ADR-030")
    assert "status: Superseded" not in _record_text(data, "adrs", "ADR-030")
    assert "supersedes" not in _record_text(data, "adrs", "ADR-031")
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
    data, result = _import_topic(runner, tmp_path, "evaluation", EVALUATION, rows)
    assert "superseded_by" not in _record_text(data, "adrs", "ADR-030"), _record_text(data, "adrs", "ADR-030")
    assert "supersedes" not in _record_text(data, "adrs", "ADR-031")
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
    data, result = _import_topic(runner, tmp_path, "evaluation", EVALUATION, rows)
    assert "superseded_by: ADR-031\n" in _record_text(data, "adrs", "ADR-030"), _record_text(data, "adrs", "ADR-030")
    assert "supersedes: [ADR-030]\n" in _record_text(data, "adrs", "ADR-031")
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
    data, _ = _import_topic(runner, tmp_path, "data-pipelines", DATA_PIPELINES, rows)
    assert "authors: Nguyễn Văn An and Trần Thị Bình\n" in _record_text(data, "papers", "LIT-601")  # holds
    assert "authors: Lee et al.\n" in _record_text(data, "papers", "LIT-602")  # holds
    paper = _record_text(data, "papers", "LIT-603")
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
    data, _ = _import_topic(runner, tmp_path, "data-pipelines", DATA_PIPELINES, rows)
    paper = _record_text(data, "papers", "LIT-016")
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
    data, result = _import_topic(runner, tmp_path, "inference-serving", INFERENCE, rows)
    assert "cites: [LIT-810]\n" in _record_text(data, "practices", "SOTA-801")  # holds
    assert "cites: [LIT-811]\n" in _record_text(data, "practices", "SOTA-802")
    assert _record_text(data, "papers", "LIT-811") == (
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
    data, result = _import_topic(runner, tmp_path, "inference-serving", INFERENCE, rows)
    assert "cites: [LIT-812]\n" in _record_text(data, "practices", "SOTA-803")
    paper = _record_text(data, "papers", "LIT-812")
    assert "year: 2023\n" in paper and "arxiv: '2309.06180'\n" in paper, paper
    assert f"authors: Kwon {et_al}\n" in paper or "authors: Kwon et al.\n" in paper, paper
    assert "named in the summary outside its bylines" not in result.output


def test_a_byline_followed_by_a_colon_and_its_note_is_a_citation(runner, tmp_path):
    """The bug: a byline whose note follows a colon instead of the dash ("Mohan et al. (2017),
    LIT-053: evidence.", as the benchmarks' generated anthology writes its summaries, and so as its
    exported pages show them) was read as prose: the practice cited LIT-053, but its paper was
    imported without the authors and year the byline gives, with a warning that they could not be
    read.

    The rule: the colon ends a byline as the dash does; words right after the id are still prose."""
    data, result = _import(
        runner,
        tmp_path,
        "| SOTA-804 | Pin label noise | Mohan et al. (2017), LIT-053: evidence. | Active |",
        "| SOTA-805 | Pin label noise again | Later work by Jones (2021), LIT-054 showed more. | Active |",
    )
    assert "cites: [LIT-053]\n" in _read(data, "practices", "SOTA-804")
    assert "summary: 'Mohan et al. (2017), LIT-053: evidence.'\n" in _read(data, "practices", "SOTA-804")
    assert _read(data, "papers", "LIT-053") == "id: LIT-053\nauthors: Mohan et al.\nyear: 2017\n"
    assert "could not read authors and year" not in result.output
    assert "cites:" not in _read(data, "practices", "SOTA-805")
    assert "LIT-054 named in the summary outside its bylines" in result.output
