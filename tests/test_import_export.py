"""`sotakg import markdown` and `sotakg export rdf|index`."""

from __future__ import annotations

import errno
import os
import re
from pathlib import Path

import pyoxigraph
import pytest
import yaml

from sotakg.cli import cli

from .conftest import FIXTURES, GOLDEN, REPO, SEED_PAGE, SHIPPED_DATA


def tree(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


# ------------------------------------------------------------------------------------------ import


def test_import_of_the_seed_page_makes_the_shipped_data(runner, tmp_path):
    result = runner.invoke(cli, ["--data", str(tmp_path / "data"), "import", "markdown", str(SEED_PAGE)])
    assert result.exit_code == 0, result.output
    assert "Wrote 42 practices, 18 papers, 3 ADRs, 1 topic, 1 registry; 0 unchanged." in result.stdout
    assert tree(tmp_path / "data") == tree(SHIPPED_DATA)


def test_import_warns_about_each_malformed_row_and_what_it_assumed(runner, tmp_path):
    result = runner.invoke(cli, ["--data", str(tmp_path / "data"), "import", "markdown", str(SEED_PAGE)])
    warnings = [line for line in result.stderr.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 2
    assert ":45: row SOTA-364: the status column is empty and the summary column holds 'Active'" in warnings[0]
    assert ":46: row SOTA-376:" in warnings[1]
    assert all("assumed that is the status and the practice has no summary" in w for w in warnings)


def test_reimport_changes_nothing(runner, data_copy):
    before = tree(data_copy)
    result = runner.invoke(cli, ["--data", str(data_copy), "import", "markdown", str(SEED_PAGE)])
    assert result.exit_code == 0
    assert "Wrote 0 practices, 0 papers, 0 ADRs, 0 topics, 0 registry; 65 unchanged." in result.stdout
    assert tree(data_copy) == before


def test_import_refuses_to_overwrite_a_changed_record_unless_forced(runner, data_copy):
    record = data_copy / "practices" / "SOTA-049.yaml"
    record.write_text(record.read_text().replace("title: Set buffer size", "title: Size the buffer"))
    before = tree(data_copy)
    result = runner.invoke(cli, ["--data", str(data_copy), "import", "markdown", str(SEED_PAGE)])
    assert result.exit_code == 1
    assert "practices/SOTA-049.yaml (SOTA-049) differs from the page: changed title" in result.output
    assert "--force" in result.output
    assert tree(data_copy) == before
    forced = runner.invoke(cli, ["--data", str(data_copy), "import", "markdown", "--force", str(SEED_PAGE)])
    assert forced.exit_code == 0
    assert tree(data_copy) == tree(SHIPPED_DATA)


def test_force_keeps_fields_the_page_does_not_give(runner, data_copy):
    paper = data_copy / "papers" / "LIT-222.yaml"
    paper.write_text(paper.read_text() + "title: Reliability at scale\n")
    practice = data_copy / "practices" / "SOTA-049.yaml"
    practice.write_text(practice.read_text().replace("title: Set buffer size", "title: Size the buffer"))
    result = runner.invoke(cli, ["--data", str(data_copy), "import", "markdown", "--force", str(SEED_PAGE)])
    assert result.exit_code == 0, result.output
    # the page's title wins on the practice; the paper's title is not a fact the page carries
    assert "title: Set buffer size to network bandwidth-delay product\n" in practice.read_text()
    assert paper.read_text().endswith("title: Reliability at scale\n")
    assert result.stdout.splitlines()[0].endswith("practices/SOTA-049.yaml (SOTA-049): changed title")
    assert "Wrote 1 practice, 0 papers" in result.stdout


def _page_without_sota_049_title_and_reason() -> str:
    text = SEED_PAGE.read_text(encoding="utf-8")
    row = next(line for line in text.split("\n") if line.startswith("| SOTA-049 |"))
    cells = row.split(" | ")
    emptied = " | ".join([cells[0], "", cells[2], "Rejected"]) + " |"
    return text.replace(row, emptied)


def test_force_removes_the_facts_the_page_leaves_empty_and_says_so(runner, data_copy, tmp_path):
    page = tmp_path / "page.md"
    page.write_text(_page_without_sota_049_title_and_reason(), encoding="utf-8")
    record = data_copy / "practices" / "SOTA-049.yaml"
    refused = runner.invoke(cli, ["--data", str(data_copy), "import", "markdown", str(page)])
    assert refused.exit_code == 1
    assert "(SOTA-049) differs from the page: removed title, reason, reason_names" in refused.output
    result = runner.invoke(cli, ["--data", str(data_copy), "import", "markdown", "--force", str(page)])
    assert result.exit_code == 0, result.output
    assert "row SOTA-049: the title column is empty; imported without a title" in result.stderr
    assert result.stdout.splitlines() == [
        f"{data_copy}/practices/SOTA-049.yaml (SOTA-049): removed title, reason, reason_names",
        "Wrote 1 practice, 0 papers, 0 ADRs, 0 topics, 0 registry; 64 unchanged.",
    ]
    assert record.read_text(encoding="utf-8") == (
        "id: SOTA-049\nversion: 1\n"
        "summary: Jiang et al. (2020), LIT-051 — https://www.usenix.org/conference/osdi20/presentation/jiang.\n"
        "status: Rejected\ncites: [LIT-051]\ntopic: distributed-optimization\n"
    )


def test_dry_run_shows_the_changes_and_writes_nothing(runner, data_copy, tmp_path):
    page = tmp_path / "page.md"
    page.write_text(_page_without_sota_049_title_and_reason(), encoding="utf-8")
    before = tree(data_copy)
    result = runner.invoke(cli, ["--data", str(data_copy), "import", "markdown", "--force", "--dry-run", str(page)])
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == [
        f"{data_copy}/practices/SOTA-049.yaml (SOTA-049): removed title, reason, reason_names",
        "Would write 1 practice, 0 papers, 0 ADRs, 0 topics, 0 registry; 64 unchanged.",
    ]
    assert tree(data_copy) == before


def test_force_replaces_a_paper_locator_and_keeps_its_other_fields(runner, data_copy, tmp_path):
    paper = data_copy / "papers" / "LIT-004.yaml"
    paper.write_text("id: LIT-004\ntitle: Training deep nets with sublinear memory cost\nurl: https://example.org/x\n")
    result = runner.invoke(cli, ["--data", str(data_copy), "import", "markdown", "--force", str(SEED_PAGE)])
    assert result.exit_code == 0, result.output
    assert f"{data_copy}/papers/LIT-004.yaml (LIT-004): added authors, year, arxiv; removed url" in result.stdout
    assert paper.read_text() == (
        "id: LIT-004\ntitle: Training deep nets with sublinear memory cost\nauthors: Chen et al.\nyear: 2016\n"
        "arxiv: '1604.06174'\n"
    )


# --------------------------------------------------------------------------------- locators


def test_an_arxiv_id_keeps_its_version(runner, tmp_path):
    data = tmp_path / "data"
    result = runner.invoke(cli, ["--data", str(data), "import", "markdown", str(FIXTURES / "other-topic.md")])
    assert result.exit_code == 0, result.output
    assert (data / "papers" / "LIT-903.yaml").read_text(encoding="utf-8") == (
        "id: LIT-903\nauthors: Åström and Øksendal\nyear: 2021\narxiv: '2101.00001'\narxiv_version: 2\n"
    )


def test_an_unreadable_locator_is_kept_verbatim_warned_about_and_validated(runner, tmp_path):
    page = tmp_path / "page.md"
    page.write_text(
        SEED_PAGE.read_text(encoding="utf-8").replace("ARXIV-1604.06174.", "ARXIV-16040.6174."), encoding="utf-8"
    )
    data = tmp_path / "data"
    result = runner.invoke(cli, ["--data", str(data), "import", "markdown", str(page)])
    assert result.exit_code == 0, result.output
    assert (
        f"warning: {page}:44: row SOTA-249: cannot read the locator 'ARXIV-16040.6174' of LIT-004 "
        "(expected ARXIV-YYMM.NNNNN or an http(s) URL); kept verbatim as the paper's `locator`, which validate reports"
    ) in result.stderr.splitlines()
    assert (data / "papers" / "LIT-004.yaml").read_text() == (
        "id: LIT-004\nauthors: Chen et al.\nyear: 2016\nlocator: ARXIV-16040.6174\n"
    )
    checked = runner.invoke(cli, ["--data", str(data), "--store", str(tmp_path / "s"), "validate"])
    assert checked.exit_code == 1
    assert f"{data}/papers/LIT-004.yaml:4: " in checked.output
    assert "[paper-locator-unread]" in checked.output


# ------------------------------------------------------------------------------- all or nothing


def _refuse_the_second_rename(monkeypatch, error: OSError) -> None:
    real_rename = os.rename
    calls = {"n": 0}

    def failing_rename(source, destination):
        if str(source).endswith(".import"):
            calls["n"] += 1
            if calls["n"] == 2:
                raise error
        return real_rename(source, destination)

    monkeypatch.setattr(os, "rename", failing_rename)


@pytest.mark.parametrize(
    "error, message",
    [
        (OSError(errno.ENOSPC, "No space left on device"), "No space left on device"),
        (PermissionError(errno.EACCES, "Permission denied"), "Permission denied"),
    ],
)
def test_a_failed_import_leaves_the_data_folder_byte_for_byte_as_before(
    runner, data_copy, tmp_path, monkeypatch, error, message
):
    page = tmp_path / "page.md"
    page.write_text(SEED_PAGE.read_text(encoding="utf-8").replace("Set buffer size", "Size the buffer"), "utf-8")
    (data_copy / "practices" / "SOTA-018.yaml").unlink()  # one new file too, which must not stay
    before = tree(data_copy)
    _refuse_the_second_rename(monkeypatch, error)
    result = runner.invoke(cli, ["--data", str(data_copy), "import", "markdown", "--force", str(page)])
    assert result.exit_code == 1
    assert f"cannot write {data_copy}/" in result.output
    assert f"{message}; nothing in {data_copy} was changed" in result.output
    assert tree(data_copy) == before
    assert sorted(p.name for p in data_copy.rglob(".*")) == []


def test_a_failed_write_of_a_staged_file_changes_nothing(runner, tmp_path, monkeypatch):
    data = tmp_path / "data"
    real_open = open

    def full_disk(file, mode="r", *args, **kwargs):
        if str(file).endswith(".import") and "SOTA-030" in str(file):
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_open(file, mode, *args, **kwargs)

    monkeypatch.setattr("builtins.open", full_disk)
    result = runner.invoke(cli, ["--data", str(data), "import", "markdown", str(SEED_PAGE)])
    assert result.exit_code == 1
    assert f"cannot write {data}/practices/SOTA-030.yaml: No space left on device" in result.output
    assert not data.exists()


def test_an_interrupted_import_puts_everything_back(runner, data_copy, tmp_path, monkeypatch):
    page = tmp_path / "page.md"
    page.write_text(SEED_PAGE.read_text(encoding="utf-8").replace("Set buffer size", "Size the buffer"), "utf-8")
    (data_copy / "practices" / "SOTA-018.yaml").unlink()
    before = tree(data_copy)
    _refuse_the_second_rename(monkeypatch, KeyboardInterrupt())  # type: ignore[arg-type]
    with pytest.raises(KeyboardInterrupt):
        from sotakg.records.importer import import_markdown

        import_markdown(page, data_copy, force=True)
    assert tree(data_copy) == before


def test_a_folder_in_the_way_is_named_and_nothing_is_written(runner, tmp_path):
    data = tmp_path / "data"
    (data / "practices" / "SOTA-047.yaml").mkdir(parents=True)
    result = runner.invoke(cli, ["--data", str(data), "import", "markdown", str(SEED_PAGE)])
    assert result.exit_code == 1
    assert f"cannot write {data}/practices/SOTA-047.yaml: a folder is in the way" in result.output
    assert sorted(str(p.relative_to(data)) for p in data.rglob("*")) == ["practices", "practices/SOTA-047.yaml"]


def test_a_record_folder_linking_outside_is_refused(runner, tmp_path):
    data, outside = tmp_path / "data", tmp_path / "outside"
    data.mkdir()
    outside.mkdir()
    (data / "papers").symlink_to(outside)
    result = runner.invoke(cli, ["--data", str(data), "import", "markdown", str(SEED_PAGE)])
    assert result.exit_code == 1
    assert "its folder leads outside the data folder" in result.output
    assert list(outside.iterdir()) == []
    assert sorted(p.name for p in data.iterdir()) == ["papers"]


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda t: t.replace("| SOTA-028 | Stage", "| SOTA-028 | Stage | extra"), ":9: a row needs 4 cells"),
        (lambda t: t.replace("| SOTA-028 |", "| SOTA-28x |"), ":9: expected a practice id"),
        (lambda t: t.replace("42 of 449 SOTA documents", "forty-two documents"), ":3: expected '<n> of <total>"),
        (lambda t: t.replace("| # | Title |", "| Id | Title |"), ":4: expected the table header"),
        (lambda t: t.replace("| SOTA-029 |", "| SOTA-028 |"), "SOTA-028 is listed twice (first on line 9)"),
    ],
)
def test_a_page_that_cannot_be_understood_is_refused_naming_the_line(runner, tmp_path, mutate, message):
    page = tmp_path / "page.md"
    page.write_text(mutate(SEED_PAGE.read_text(encoding="utf-8")), encoding="utf-8")
    result = runner.invoke(cli, ["--data", str(tmp_path / "data"), "import", "markdown", str(page)])
    assert result.exit_code == 1
    assert message in result.output
    assert not (tmp_path / "data").exists()


def _export_index(runner, data: Path, store: Path, *args: str):
    return runner.invoke(cli, ["--data", str(data), "--store", str(store), "export", "index", *args])


def test_both_pages_import_beside_each_other_and_export_byte_for_byte(runner, tmp_path):
    page = FIXTURES / "other-topic.md"
    data = tmp_path / "data"
    assert runner.invoke(cli, ["--data", str(data), "import", "markdown", str(SEED_PAGE)]).exit_code == 0
    result = runner.invoke(cli, ["--data", str(data), "import", "markdown", str(page)])
    assert result.exit_code == 0, result.output
    assert "Wrote 5 practices, 3 papers, 0 ADRs, 1 topic, 0 registry; 4 unchanged." in result.stdout
    assert "pipes | inside" in (data / "practices" / "SOTA-900.yaml").read_text()
    exported = _export_index(runner, data, tmp_path / "s", "--topic", "evaluation-and-benchmarks")
    assert exported.exit_code == 0, exported.output
    assert exported.stdout_bytes == page.read_bytes()
    seed = _export_index(runner, data, tmp_path / "s", "--topic", "distributed-optimization")
    assert seed.stdout_bytes == SEED_PAGE.read_bytes()
    every = _export_index(runner, data, tmp_path / "s", "--all", "-o", str(tmp_path / "pages"))
    assert every.exit_code == 0, every.output
    assert (tmp_path / "pages" / "evaluation-and-benchmarks.md").read_bytes() == page.read_bytes()
    assert (tmp_path / "pages" / "distributed-optimization.md").read_bytes() == SEED_PAGE.read_bytes()


@pytest.mark.parametrize("page", [SEED_PAGE, FIXTURES / "other-topic.md"], ids=["seed", "second"])
def test_import_export_import_gives_the_same_data_folder(runner, tmp_path, page):
    first, second = tmp_path / "first", tmp_path / "second"
    imported = runner.invoke(cli, ["--data", str(first), "import", "markdown", str(page)])
    assert imported.exit_code == 0, imported.output
    exported = tmp_path / "exported.md"
    result = _export_index(
        runner,
        first,
        tmp_path / "s",
        "--topic",
        page.stem if page == SEED_PAGE else "evaluation-and-benchmarks",
        "-o",
        str(exported),
    )
    assert result.exit_code == 0, result.output
    again = runner.invoke(cli, ["--data", str(second), "import", "markdown", str(exported)])
    assert again.exit_code == 0, again.output

    # the export is the page again: the same warnings (the seed's two status-in-summary rows), no new ones
    def unplaced(text: str) -> str:
        return re.sub(r"^warning: .*?\.md:", "warning: PAGE:", text, flags=re.M)

    assert unplaced(again.stderr) == unplaced(imported.stderr)
    assert ("status_column" in again.stderr) == (page == SEED_PAGE)
    assert tree(second) == tree(first)
    assert len(tree(first)) > 5


# ------------------------------------------------------------------------------------------ export


def test_index_export_reproduces_the_seed_page(runner, workdir):
    result = runner.invoke(cli, ["export", "index", "--topic", "distributed-optimization"])
    assert result.exit_code == 0, result.output
    assert result.stdout_bytes == SEED_PAGE.read_bytes()


def test_index_export_to_a_file(runner, workdir):
    result = runner.invoke(cli, ["export", "index", "--topic", "distributed-optimization", "-o", "page.md"])
    assert result.exit_code == 0
    assert (workdir / "page.md").read_text(encoding="utf-8").startswith("Topics — The twenty-eight kinds")


def test_index_export_of_an_unknown_topic(runner, workdir):
    result = runner.invoke(cli, ["export", "index", "--topic", "nope"])
    assert result.exit_code == 2
    assert "no topic with slug 'nope'; known topics: distributed-optimization" in result.output


def test_index_counts_come_from_the_graph(runner, workdir):
    # The page's "42 of 449" is what the topic declares (validate warns where the filed practices
    # differ); a topic that declares no size shows the number of its rows.
    (workdir / "data" / "practices" / "SOTA-437.yaml").unlink()
    result = runner.invoke(cli, ["export", "index", "--topic", "distributed-optimization"])
    assert result.stdout.split("\n")[2] == "42 of 449 SOTA documents. Back to the full index."
    assert "SOTA-437" not in result.stdout
    topic = workdir / "data" / "topics" / "distributed-optimization.yaml"
    topic.write_text(
        "".join(line for line in topic.read_text(encoding="utf-8").splitlines(True) if "declared_size" not in line),
        encoding="utf-8",
    )
    result = runner.invoke(cli, ["export", "index", "--topic", "distributed-optimization"])
    assert result.stdout.split("\n")[2] == "41 of 449 SOTA documents. Back to the full index."


def test_a_declared_size_the_rows_do_not_reach_is_exported_as_declared(runner, tmp_path):
    page = tmp_path / "pruning.md"
    page.write_text(
        "Topics — The kinds of claim.\nPruning — sparsity.\n5 of 449 SOTA documents. Back to the full index.\n"
        "| # | Title | Summary | Status |\n|---|---|---|---|\n| SOTA-901 | Prune | Doe (2020), LIT-901 — "
        "ARXIV-2001.00001. | Active |",
        encoding="utf-8",
    )
    data, store = tmp_path / "data", tmp_path / "store"
    imported = runner.invoke(cli, ["--data", str(data), "--store", str(store), "import", "markdown", str(page)])
    assert imported.exit_code == 0, imported.output
    assert f"warning: {page}:3: the page says 5 practices but its table has 1" in imported.output
    exported = runner.invoke(cli, ["--data", str(data), "--store", str(store), "export", "index", "--topic", "pruning"])
    assert exported.exit_code == 0, exported.output
    assert exported.stdout_bytes == page.read_bytes()


def test_rdf_export_matches_golden_turtle(runner, workdir):
    result = runner.invoke(cli, ["export", "rdf", "--format", "turtle"])
    assert result.exit_code == 0
    golden = GOLDEN / "anthology.ttl"
    if os.environ.get("SOTAKG_UPDATE_GOLDEN"):
        golden.write_bytes(result.stdout_bytes)
    assert result.stdout_bytes == golden.read_bytes()


@pytest.mark.parametrize(
    "name, pyoxigraph_format",
    [
        ("turtle", pyoxigraph.RdfFormat.TURTLE),
        ("ntriples", pyoxigraph.RdfFormat.N_TRIPLES),
        ("nquads", pyoxigraph.RdfFormat.N_QUADS),
        ("trig", pyoxigraph.RdfFormat.TRIG),
        ("jsonld", pyoxigraph.RdfFormat.JSON_LD),
        ("rdfxml", pyoxigraph.RdfFormat.RDF_XML),
    ],
)
def test_every_rdf_format_holds_the_whole_graph(runner, workdir, shipped_store, name, pyoxigraph_format):
    result = runner.invoke(cli, ["export", "rdf", "--format", name])
    assert result.exit_code == 0, result.output
    parsed = {(q.subject, q.predicate, q.object) for q in pyoxigraph.parse(result.stdout_bytes, pyoxigraph_format)}
    expected = {(q.subject, q.predicate, q.object) for q in shipped_store}
    assert parsed == expected
    assert len(parsed) > 700


@pytest.mark.parametrize("filename", ["g.ttl", "g.nt", "g.nq", "g.trig", "g.jsonld", "g.rdf"])
def test_rdf_format_is_guessed_from_the_file_extension(runner, workdir, filename):
    result = runner.invoke(cli, ["export", "rdf", "-o", filename])
    assert result.exit_code == 0, result.output
    fmt = pyoxigraph.RdfFormat.from_extension(filename.split(".")[1])
    assert len(list(pyoxigraph.parse(path=str(workdir / filename), format=fmt))) > 700


@pytest.mark.parametrize(
    "args, message",
    [
        ([], "writing to standard output needs --format"),
        (["-o", "graph"], "cannot tell the format of graph"),
        (["--format", "yaml"], "unknown RDF format 'yaml'"),
    ],
)
def test_rdf_export_usage_errors(runner, workdir, args, message):
    result = runner.invoke(cli, ["export", "rdf", *args])
    assert result.exit_code == 2
    assert message in result.output


def test_export_is_stable(runner, workdir):
    first = runner.invoke(cli, ["export", "rdf", "-f", "nt"]).stdout_bytes
    runner.invoke(cli, ["build", "--force"])
    assert runner.invoke(cli, ["export", "rdf", "-f", "nt"]).stdout_bytes == first


def test_a_fresh_build_of_the_shipped_data_regenerates_the_seed_page(runner, workdir):
    assert runner.invoke(cli, ["build", "--force"]).exit_code == 0
    result = runner.invoke(cli, ["export", "index", "--topic", "distributed-optimization"])
    assert result.exit_code == 0, result.output
    assert result.stdout_bytes == SEED_PAGE.read_bytes()


def test_year_suffixes_are_read_and_unreadable_bylines_are_warned_about(runner, tmp_path):
    page = tmp_path / "page.md"
    text = (FIXTURES / "other-topic.md").read_text(encoding="utf-8")
    text = text.replace("Doe (2021), LIT-901 — https", "Doe (2021b), LIT-901 — https")
    text = text.replace("Doe (2021), LIT-901.", "Doe (in press), LIT-901.")
    page.write_text(text, encoding="utf-8")
    result = runner.invoke(cli, ["--data", str(tmp_path / "data"), "import", "markdown", str(page)])
    assert result.exit_code == 0, result.output
    assert "year: 2021" in (tmp_path / "data" / "papers" / "LIT-901.yaml").read_text()
    assert (
        "row SOTA-902: could not read authors and year for LIT-901 from 'Doe (in press), LIT-901.' (a byline reads "
        "'Authors (year), LIT-NNN'); cited, and imported without them"
    ) in result.stderr


def test_a_record_file_that_is_a_link_is_never_read_or_written_through(runner, data_copy, tmp_path):
    victim = tmp_path / "victim.yaml"
    victim.write_text("id: SOTA-049\ntitle: kept\n", encoding="utf-8")
    record = data_copy / "practices" / "SOTA-049.yaml"
    record.unlink()
    record.symlink_to(victim)
    refused = runner.invoke(cli, ["--data", str(data_copy), "import", "markdown", str(SEED_PAGE)])
    assert refused.exit_code == 1
    assert "practices/SOTA-049.yaml is a symbolic link; replace it with the record file" in refused.output
    forced = runner.invoke(cli, ["--data", str(data_copy), "import", "markdown", "--force", str(SEED_PAGE)])
    assert forced.exit_code == 0, forced.output
    assert f"{record} (SOTA-049): replaced a symbolic link" in forced.stdout.splitlines()
    assert not record.is_symlink()
    assert record.read_bytes() == (SHIPPED_DATA / "practices" / "SOTA-049.yaml").read_bytes()
    assert victim.read_text(encoding="utf-8") == "id: SOTA-049\ntitle: kept\n"


@pytest.mark.parametrize("version", ["9" * 5000, "١٢"])
def test_a_row_version_that_is_no_small_ascii_number_is_refused_naming_the_row(runner, tmp_path, version):
    page = tmp_path / "page.md"
    page.write_text(SEED_PAGE.read_text(encoding="utf-8").replace("| SOTA-017 v2 |", f"| SOTA-017 v{version} |", 1))
    assert f"SOTA-017 v{version}" in page.read_text(encoding="utf-8")
    result = runner.invoke(cli, ["--data", str(tmp_path / "data"), "import", "markdown", str(page)])
    assert result.exit_code == 1
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert "page.md:" in result.output and "SOTA-017" in result.output
    assert len(result.output) < 400  # the number is never quoted whole
    assert not (tmp_path / "data").exists()


@pytest.mark.parametrize("version", ["0", "02"])
def test_a_row_version_of_zero_or_with_a_leading_zero_is_refused_naming_the_row(runner, tmp_path, version):
    page = tmp_path / "page.md"
    text = SEED_PAGE.read_text(encoding="utf-8")
    page.write_text(text.replace("| SOTA-017 v2 |", f"| SOTA-017 v{version} |", 1), encoding="utf-8")
    line = 1 + text.split("\n").index(_seed_row("SOTA-017 v2"))
    result = runner.invoke(cli, ["--data", str(tmp_path / "data"), "import", "markdown", str(page)])
    assert result.exit_code == 1
    assert result.output == (
        f"Error: {page}:{line}: row SOTA-017: v{version} is no version (versions count from 1, written without "
        f"a leading zero): fix the id cell\n"
    )
    assert not (tmp_path / "data").exists()


def test_a_row_version_past_the_cap_is_refused_naming_the_row(runner, tmp_path):
    page = tmp_path / "page.md"
    text = SEED_PAGE.read_text(encoding="utf-8")
    page.write_text(text.replace("| SOTA-017 v2 |", "| SOTA-017 v101 |", 1), encoding="utf-8")
    line = 1 + text.split("\n").index(_seed_row("SOTA-017 v2"))
    result = runner.invoke(cli, ["--data", str(tmp_path / "data"), "import", "markdown", str(page)])
    assert result.exit_code == 1
    assert result.output.endswith(
        f"{page}:{line}: 'version' is 101, more than any real record has (at most 100) (SOTA-017)\n"
    ), result.output
    assert not (tmp_path / "data").exists()
    page.write_text(text.replace("| SOTA-017 v2 |", "| SOTA-017 v100 |", 1), encoding="utf-8")
    result = runner.invoke(cli, ["--data", str(tmp_path / "data"), "import", "markdown", str(page)])
    assert result.exit_code == 0, result.output
    assert "version: 100\n" in (tmp_path / "data" / "practices" / "SOTA-017.yaml").read_text(encoding="utf-8")


def _page_with_row(tmp_path, row: str) -> tuple[Path, int]:
    """The seed page with one more row at its end (and, as the anthology writes it, no line end after the
    last row), and that row's line."""
    page = tmp_path / "page.md"
    text = SEED_PAGE.read_text(encoding="utf-8").rstrip("\n") + "\n" + row
    page.write_text(text, encoding="utf-8")
    return page, len(text.split("\n"))


def _imported_with_row(runner, tmp_path, row: str):
    """Import the seed page with ``row`` added: the page, the row's line, the data folder, the result."""
    page, line = _page_with_row(tmp_path, row)
    data = tmp_path / "data"
    return page, line, data, runner.invoke(cli, ["--data", str(data), "import", "markdown", str(page)])


def test_a_refused_cell_value_names_the_line_of_its_row(runner, tmp_path):
    page, line, _data, result = _imported_with_row(runner, tmp_path, "| SOTA-985 | BEL\x07here | x | Proposed |")
    assert result.exit_code == 1
    assert result.output == (
        f"Error: 1 problem in the data:\n{page}:{line}: 'title' holds the control character U+0007 (only tab and "
        f"newline are text); remove it (SOTA-985)\n"
    )
    assert line > 40


@pytest.mark.parametrize(
    ("sentence", "stated"),
    [
        ("Nothing here says that ADR-059 supersedes ADR-026.", False),
        ("It is unclear whether ADR-059 supersedes ADR-026.", False),
        # a sentence is judged whole: another clause of it may hedge or deny what it holds
        ("ADR-059 does not say so; ADR-059 supersedes ADR-026.", False),
        ("If accepted, ADR-059 supersedes ADR-026.", False),
        ("ADR-059 supersedes ADR-026; this is false.", False),
        ("It holds. ADR-059 supersedes ADR-026. More follows.", True),
        ("Since then ADR-059 supersedes ADR-026.", True),
        # only a few linking words may lead it: anything more is not plain, whatever it says
        ("The scope is not a training run — ADR-059 supersedes ADR-026.", False),
        ("A no-op change until now, and later ADR-059 supersedes ADR-026.", False),
    ],
)
def test_a_supersession_is_imported_only_where_the_page_states_it(runner, tmp_path, sentence, stated):
    page, line, data, result = _imported_with_row(runner, tmp_path, f"| SOTA-986 | T | {sentence} | Proposed |")
    assert result.exit_code == 0, result.output
    adr = (data / "adrs" / "ADR-026.yaml").read_text(encoding="utf-8")
    assert ("superseded_by: ADR-059" in adr) is stated
    assert "superseded_by: ADR-026" in (data / "adrs" / "ADR-020.yaml").read_text(encoding="utf-8")
    warned = f"{page}:{line}: 'ADR-059 supersedes ADR-026' is not imported as a supersession: its sentence does not"
    assert (warned in result.output) is not stated


def test_a_locator_the_import_cannot_place_is_warned_of(runner, tmp_path):
    row = "| SOTA-987 | T | Doe et al. (2020), LIT-971 and LIT-972 — ARXIV-2001.00001. Text. | Proposed |"
    page, line, data, result = _imported_with_row(runner, tmp_path, row)
    assert result.exit_code == 0, result.output
    assert (
        f"warning: {page}:{line}: row SOTA-987 gives one locator after 2 papers; it was not assigned to any of them "
        f"(give each paper its own row or byline)"
    ) in result.output
    assert "arxiv" not in (data / "papers" / "LIT-971.yaml").read_text(encoding="utf-8")


def test_two_rows_giving_a_paper_two_kinds_of_locator_are_warned_of(runner, tmp_path):
    row = "| SOTA-988 | T | Jiang et al. (2020), LIT-051 — ARXIV-2001.00001. X. | Proposed |"
    again = "| SOTA-989 | T | Jiang et al. (2020), LIT-051 — ARXIV-2001.00001. Y. | Proposed |"
    page, last, data, result = _imported_with_row(runner, tmp_path, row + "\n" + again)
    line = last - 1  # SOTA-988's row
    assert result.exit_code == 0, result.output
    assert f"warning: {page}:{line}: row SOTA-988 gives LIT-051 the arxiv '2001.00001', an earlier row the url " in (
        result.output
    )
    paper = (data / "papers" / "LIT-051.yaml").read_text(encoding="utf-8")
    assert "arxiv: 2001.00001" in paper.replace("'", "") and "url: " in paper
    assert result.output.count("gives LIT-051 the arxiv") == 1  # once, not again for every row citing it


# ------------------------------------------------------------------------------ status column


def _seed_row(practice: str) -> str:
    return next(line for line in SEED_PAGE.read_text(encoding="utf-8").split("\n") if line.startswith(f"| {practice} "))


def test_a_status_written_in_the_summary_cell_is_kept_as_the_pages_layout(runner, tmp_path):
    data = tmp_path / "data"
    result = runner.invoke(cli, ["--data", str(data), "import", "markdown", str(SEED_PAGE)])
    assert result.exit_code == 0, result.output
    assert _seed_row("SOTA-364").endswith("| Active | |")
    assert (data / "practices" / "SOTA-364.yaml").read_text(encoding="utf-8") == (
        "id: SOTA-364\nversion: 1\n"
        "title: Break batch normalization’s cross-sample leak before it solves your contrastive task for you\n"
        "status: Active\nstatus_column: summary\ntopic: distributed-optimization\n"
    )
    # a row that writes its status where it belongs records no layout
    assert "status_column" not in (data / "practices" / "SOTA-017.yaml").read_text(encoding="utf-8")


def test_the_layout_gives_way_once_the_practice_has_a_summary(runner, tmp_path):
    data = tmp_path / "data"
    assert runner.invoke(cli, ["--data", str(data), "import", "markdown", str(SEED_PAGE)]).exit_code == 0
    record = data / "practices" / "SOTA-364.yaml"
    record.write_text(record.read_text(encoding="utf-8") + "summary: Now it has one.\n", encoding="utf-8")
    result = _export_index(runner, data, tmp_path / "s", "--topic", "distributed-optimization")
    assert result.exit_code == 0, result.output
    row = next(line for line in result.stdout.split("\n") if line.startswith("| SOTA-364 "))
    assert row.endswith("| Now it has one. | Active |")
    untouched = next(line for line in result.stdout.split("\n") if line.startswith("| SOTA-376 "))
    assert untouched == _seed_row("SOTA-376")


def test_force_with_a_page_that_moved_the_status_back_removes_the_layout(runner, tmp_path):
    data = tmp_path / "data"
    assert runner.invoke(cli, ["--data", str(data), "import", "markdown", str(SEED_PAGE)]).exit_code == 0
    page = tmp_path / "page.md"
    row = _seed_row("SOTA-364")
    page.write_text(
        SEED_PAGE.read_text(encoding="utf-8").replace(row, row.removesuffix("| Active | |") + "| | Active |"),
        encoding="utf-8",
    )
    result = runner.invoke(cli, ["--data", str(data), "import", "markdown", "--force", str(page)])
    assert result.exit_code == 0, result.output
    assert f"{data}/practices/SOTA-364.yaml (SOTA-364): removed status_column" in result.stdout
    assert "status_column" not in (data / "practices" / "SOTA-364.yaml").read_text(encoding="utf-8")
    exported = _export_index(runner, data, tmp_path / "s", "--topic", "distributed-optimization")
    assert exported.stdout_bytes == page.read_bytes()


def test_a_status_column_other_than_summary_is_a_violation(runner, data_copy, tmp_path):
    record = data_copy / "practices" / "SOTA-364.yaml"
    record.write_text(record.read_text(encoding="utf-8").replace("status_column: summary", "status_column: title"))
    result = runner.invoke(cli, ["--data", str(data_copy), "--store", str(tmp_path / "s"), "validate"])
    assert result.exit_code == 1
    assert f"{data_copy}/practices/SOTA-364.yaml:5: [practice-status-column] violation:" in result.output


# ------------------------------------------------------------------- other pages: what a page says, exactly


def _read(data: Path, kind: str, record: str) -> str:
    return (data / kind / f"{record}.yaml").read_text(encoding="utf-8")


def test_every_byline_of_a_summary_gives_its_paper_authors_year_and_locator(runner, tmp_path):
    row = (
        "| SOTA-986 | T | Smith (2020), LIT-901 — ARXIV-2001.00001; Jones (2021), LIT-902 — "
        "https://example.org/p, with notes | Proposed |"
    )
    _page, _line, data, result = _imported_with_row(runner, tmp_path, row)
    assert result.exit_code == 0, result.output
    first, second = _read(data, "papers", "LIT-901"), _read(data, "papers", "LIT-902")
    assert "authors: Smith\n" in first and "year: 2020\n" in first and "arxiv: '2001.00001'" in first
    assert "authors: Jones\n" in second and "year: 2021\n" in second and "url: https://example.org/p\n" in second
    assert "could not read authors" not in result.output


@pytest.mark.parametrize(
    "summary",
    [
        "Goyal (2017), LIT-901 — ARXIV-1706.02677. Unlike LIT-902, this holds.",
        "Goyal (2017), LIT-901 — ARXIV-1706.02677. Refuted in part by LIT-902.",
        # prose before a later year is no byline: its paper is named, not cited
        "Goyal (2017), LIT-901 — ARXIV-1706.02677. In 2019 a rebuttal appeared. Jones (2021), LIT-902.",
        "Goyal (2017), LIT-901 — ARXIV-1706.02677. The schedule is from Narayanan et al. (2021), LIT-902.",
        # prose before a year at the start is no byline, nor names: its paper is named, not cited
        "Later work by Jones (2021), LIT-902 showed more.",
        "See also Jones (2021), LIT-902 — ARXIV-2101.00001.",
    ],
)
def test_a_paper_outside_a_byline_is_not_given_authors_and_further_on_not_cited(runner, tmp_path, summary):
    page, line, data, result = _imported_with_row(runner, tmp_path, f"| SOTA-986 | T | {summary} | Proposed |")
    assert result.exit_code == 0, result.output
    practice = _read(data, "practices", "SOTA-986")
    if summary.startswith("Goyal"):
        assert "cites: [LIT-901]\n" in practice
    else:
        assert "cites:" not in practice
    assert not (data / "papers" / "LIT-902.yaml").exists()
    warned = "LIT-902 named in the summary outside its bylines; not recorded as cited"
    assert f"warning: {page}:{line}: row SOTA-986: {warned}" in result.output


def _row_warnings(output: str, page: Path, line: int) -> list[str]:
    return [w for w in output.splitlines() if w.startswith(f"warning: {page}:{line}: ")]


_NAMED = "named in the summary outside its bylines; not recorded as cited (the summary keeps the text)"


def _unread(lits: str, summary: str) -> str:
    return (
        f"could not read authors and year for {lits} from {summary[:60]!r} (a byline reads 'Authors (year), "
        f"LIT-NNN'); cited, and imported without them"
    )


@pytest.mark.parametrize(
    ("summary", "cites", "warned"),
    [
        # a paper the summary's opening words only mention is no citation
        ("Not supported by LIT-100, despite claims.", "", [f"LIT-100 {_NAMED}"]),
        ("Unlike LIT-101, this holds.", "", [f"LIT-101 {_NAMED}"]),
        # the list of papers a byline-shaped opening gives is cited; a paper after it is only named
        (
            "Smith (2020), LIT-102, building on LIT-103.",
            "cites: [LIT-102]\n",
            [f"LIT-103 {_NAMED}", _unread("LIT-102", "Smith (2020), LIT-102, building on LIT-103.")],
        ),
        ("Doe (in press), LIT-901.", "cites: [LIT-901]\n", [_unread("LIT-901", "Doe (in press), LIT-901.")]),
        (
            "LIT-104 and LIT-105 disagree.",
            "cites: [LIT-104, LIT-105]\n",
            [_unread("LIT-104, LIT-105", "LIT-104 and LIT-105 disagree.")],
        ),
        (
            "Smith and Lee, LIT-106, LIT-107, and LIT-108.",
            "cites: [LIT-106, LIT-107, LIT-108]\n",
            [_unread("LIT-106, LIT-107, LIT-108", "Smith and Lee, LIT-106, LIT-107, and LIT-108.")],
        ),
        # names that are prose give no citation
        ("See also Narayanan et al., LIT-109.", "", [f"LIT-109 {_NAMED}"]),
        # ... nor do prose words before a byline, capitalised as names are: they name a paper, not rest on it
        ("Not Smith (2020), LIT-110, whose result does not replicate.", "", [f"LIT-110 {_NAMED}"]),
        ("Unlike Jones (2019), LIT-111, we warm up briefly.", "", [f"LIT-111 {_NAMED}"]),
        ("Contra Smith et al. (2020), LIT-112 — ARXIV-2001.00001.", "", [f"LIT-112 {_NAMED}"]),
        ("Huang et al. (2018), LIT-114. See Smith (2020), LIT-115.", "cites: [LIT-114]\n", [f"LIT-115 {_NAMED}"]),
        # a surname that is also an English word (De, He, An) is still a name
        ("De Sa et al. (2017), LIT-116.", "cites: [LIT-116]\n", []),
        ("He and An (2021), LIT-117.", "cites: [LIT-117]\n", []),
        ("So et al. (2021), LIT-118 — ARXIV-2109.08668.", "cites: [LIT-118]\n", []),
        ("Wang, An and So (2020), LIT-119.", "cites: [LIT-119]\n", []),
        ("Per Bak and Pace (1999), LIT-120.", "cites: [LIT-120]\n", []),
        ("In and Park (2018), LIT-121; To and Tran (2019), LIT-122.", "cites: [LIT-121, LIT-122]\n", []),
    ],
)
def test_only_a_byline_shaped_opening_cites_its_papers(runner, tmp_path, summary, cites, warned):
    page, line, data, result = _imported_with_row(runner, tmp_path, f"| SOTA-986 | T | {summary} | Proposed |")
    assert result.exit_code == 0, result.output
    assert _read(data, "practices", "SOTA-986") == (
        f"id: SOTA-986\nversion: 1\ntitle: T\nsummary: {summary}\nstatus: Proposed\n{cites}"
        "topic: distributed-optimization\n"
    )
    assert _row_warnings(result.output, page, line) == [f"warning: {page}:{line}: row SOTA-986: {w}" for w in warned]


@pytest.mark.parametrize(
    ("authors", "stored"),
    [
        ("DeVries &amp; Taylor", "DeVries & Taylor"),
        ("Jos&eacute; Ruiz and Lee", "José Ruiz and Lee"),
        # what Markdown shows as written stays as written: no ";", or no such entity
        ("Smith &amp Jones", "Smith &amp Jones"),
        ("Smith &nosuch; Lee", "Smith &nosuch; Lee"),
    ],
)
def test_a_character_reference_in_a_byline_is_read_as_the_page_shows_it(runner, tmp_path, authors, stored):
    summary = f"{authors} (2017), LIT-901 — ARXIV-1708.04552."
    page, line, data, result = _imported_with_row(runner, tmp_path, f"| SOTA-986 | T | {summary} | Proposed |")
    assert result.exit_code == 0, result.output
    assert "cites: [LIT-901]\n" in _read(data, "practices", "SOTA-986")
    assert _read(data, "papers", "LIT-901") == f"id: LIT-901\nauthors: {stored}\nyear: 2017\narxiv: '1708.04552'\n"
    assert _row_warnings(result.output, page, line) == []


def test_a_byline_after_a_label_with_a_colon_is_no_citation(runner, tmp_path):
    summary = "Retracted: Lee (2019), LIT-113 — gone."
    page, line, data, result = _imported_with_row(runner, tmp_path, f"| SOTA-986 | T | {summary} | Proposed |")
    assert result.exit_code == 0, result.output
    assert "cites:" not in _read(data, "practices", "SOTA-986")
    assert _row_warnings(result.output, page, line) == [f"warning: {page}:{line}: row SOTA-986: LIT-113 {_NAMED}"]


def test_authors_shared_by_several_papers_each_with_its_own_are_not_assigned(runner, tmp_path):
    row = "| SOTA-986 | T | Zhao et al. and Rajbhandari et al. (2022, 2020), LIT-901 and LIT-902. | Proposed |"
    page, line, data, result = _imported_with_row(runner, tmp_path, row)
    assert result.exit_code == 0, result.output
    assert "authors" not in _read(data, "papers", "LIT-901") + _read(data, "papers", "LIT-902")
    assert "year: 2022\n" in _read(data, "papers", "LIT-901")
    assert f"warning: {page}:{line}: row SOTA-986 gives 2 papers to the authors" in result.output


@pytest.mark.parametrize(
    ("sentence", "old", "new"),
    [
        ("ADR-070 was superseded by ADR-071.", "ADR-070", "ADR-071"),
        ("See ADR-060 (superseded by ADR-061) for the scope.", "ADR-060", "ADR-061"),
        ("So ADR-080 replaces ADR-081.", "ADR-081", "ADR-080"),
    ],
)
def test_a_plain_or_passive_supersession_is_imported(runner, tmp_path, sentence, old, new):
    _page, _line, data, result = _imported_with_row(runner, tmp_path, f"| SOTA-986 | T | {sentence} | Proposed |")
    assert result.exit_code == 0, result.output
    assert f"superseded_by: {new}\n" in _read(data, "adrs", old)
    assert f"supersedes: [{old}]\n" in _read(data, "adrs", new)
    assert "is not imported as a supersession" not in result.output


@pytest.mark.parametrize(
    "sentence",
    [
        "The claim that ADR-031 supersedes ADR-030 is false.",
        "ADR-031 replaced ADR-030 in draft only.",
        "Earlier drafts said ADR-031 supersedes ADR-030; that was withdrawn.",
        "Maybe: ADR-031 supersedes ADR-030?",
        "ADR-031 will supersede ADR-030.",
        "ADR-031 was not superseded by ADR-030.",
        # a clause too long to look at whole is no plain statement: its start may deny it
        "Nothing here says that " + "and " * 60 + "ADR-031 supersedes ADR-030.",
        "ADR-031 supersedes ADR-030" + " " * 200 + "in draft only.",
    ],
)
def test_a_supersession_the_sentence_does_not_plainly_state_is_warned_of_not_imported(runner, tmp_path, sentence):
    page, line, data, result = _imported_with_row(runner, tmp_path, f"| SOTA-986 | T | {sentence} | Proposed |")
    assert result.exit_code == 0, result.output
    assert "superseded_by" not in _read(data, "adrs", "ADR-030") + _read(data, "adrs", "ADR-031")
    assert f"warning: {page}:{line}: " in result.output and "is not imported as a supersession" in result.output


def test_a_second_supersession_of_one_adr_is_warned_of_and_the_first_kept(runner, tmp_path):
    row = "| SOTA-986 | T | ADR-027 (superseding ADR-020) holds. | Proposed |"
    page, line, data, result = _imported_with_row(runner, tmp_path, row)
    assert result.exit_code == 0, result.output
    assert "superseded_by: ADR-026\n" in _read(data, "adrs", "ADR-020")
    assert (
        f"warning: {page}:{line}: ADR-027 supersedes ADR-020, which the page already has superseded by ADR-026; "
        "kept the first"
    ) in result.output


def test_a_page_with_entities_backslashes_and_unicode_breaks_exports_as_written(runner, tmp_path):
    rows = [
        "| SOTA-986 | Entities &amp; more, &#169; and &lt;b&gt; | Doe (2020), LIT-901 — ARXIV-2001.00001. | Active |",
        "| SOTA-987 | Paths C:\\\\temp and a\\\\b, a pipe \\| here | Doe (2020), LIT-901 — "
        "ARXIV-2001.00001. | Active |",
        "| SOTA-988 | One\u2028line | Doe (2020), LIT-901 — ARXIV-2001.00001. | Active |",
    ]
    page = tmp_path / "distributed-optimization.md"
    text = SEED_PAGE.read_text(encoding="utf-8").rstrip("\n") + "\n" + "\n".join(rows)
    page.write_text(text, encoding="utf-8")
    data, store = tmp_path / "data", tmp_path / "store"
    options = ["--data", str(data), "--store", str(store)]
    imported = runner.invoke(cli, [*options, "import", "markdown", str(page)])
    assert imported.exit_code == 0, imported.output
    assert "Wrote 45 practices" in imported.output  # U+2028 ends no row
    exported = runner.invoke(cli, [*options, "export", "index", "--topic", "distributed-optimization"])
    assert exported.exit_code == 0, exported.output
    assert exported.stdout_bytes.decode("utf-8").split("\n")[-3:] == text.split("\n")[-3:]


def _one_row_page(path: Path, label: str, scope: str = "scope.") -> Path:
    """A page of one topic labelled ``label`` with one practice row, SOTA-901, at ``path``."""
    path.write_text(
        f"Topics — The kinds of claim.\n{label} — {scope}\n1 of 449 SOTA documents. Back to the full index.\n"
        "| # | Title | Summary | Status |\n|---|---|---|---|\n| SOTA-901 | T | Proposed | |",
        encoding="utf-8",
    )
    return path


def test_a_topic_named_registry_counts_as_a_topic(runner, tmp_path):
    page = _one_row_page(tmp_path / "registry.md", "Registry", "what a registry holds.")
    result = runner.invoke(cli, ["--data", str(tmp_path / "data"), "import", "markdown", str(page)])
    assert result.exit_code == 0, result.output
    assert "1 topic, 1 registry" in result.output


@pytest.mark.parametrize(
    ("label", "file_name", "slug"),
    [
        ("Régularisation avancée", "page.md", "regularisation-avancee"),
        ("正則化", "regularization.md", "regularization"),
    ],
)
def test_a_topic_slug_drops_accents_and_falls_back_to_the_page_file_name(runner, tmp_path, label, file_name, slug):
    page = _one_row_page(tmp_path / file_name, label)
    data = tmp_path / "data"
    result = runner.invoke(cli, ["--data", str(data), "import", "markdown", str(page)])
    assert result.exit_code == 0, result.output
    assert (data / "topics" / f"{slug}.yaml").is_file()
    assert f"topic: {slug}\n" in _read(data, "practices", "SOTA-901")


def test_a_topic_label_and_file_name_without_a_slug_are_refused(runner, tmp_path):
    page = _one_row_page(tmp_path / "頁.md", "正則化")
    result = runner.invoke(cli, ["--data", str(tmp_path / "data"), "import", "markdown", str(page)])
    assert result.exit_code == 1
    assert f"{page}:2: the topic label '正則化' gives no slug" in result.output
    assert "name the page file <slug>.md" in result.output
    assert not (tmp_path / "data").exists()


def test_a_rejection_with_an_empty_reason_is_rejected_without_a_reason(runner, tmp_path):
    page, line, data, result = _imported_with_row(runner, tmp_path, "| SOTA-986 | T | x | Rejected — |")
    assert result.exit_code == 0, result.output
    assert f"warning: {page}:{line}: row SOTA-986: rejected without a reason" in result.output
    assert "status: Rejected\n" in _read(data, "practices", "SOTA-986")


def test_an_arxiv_id_before_a_semicolon_is_read(runner, tmp_path):
    row = "| SOTA-986 | T | Doe (2019), LIT-901 — ARXIV-1901.00611; see appendix. | Proposed |"
    _page, _line, data, result = _imported_with_row(runner, tmp_path, row)
    assert result.exit_code == 0, result.output
    assert "arxiv: '1901.00611'" in _read(data, "papers", "LIT-901")


_NOT_PLAIN = "is not imported as a supersession"
_OTHER_FORM = "may state a supersession of ADRs in a form the import does not read"


@pytest.mark.parametrize(
    ("sentence", "warned"),
    [
        ("If ADR-031 (superseding ADR-030) passes, things change.", _NOT_PLAIN),
        ("Nothing says ADR-031 (superseding ADR-030) holds.", _NOT_PLAIN),
        ("A draft ADR-031 (superseding ADR-030) is under review.", _NOT_PLAIN),
        ("ADR-029 and ADR-030 (superseded by ADR-031) are gone.", _NOT_PLAIN),
        ("Does ADR-031 (superseding ADR-030) apply here?", _NOT_PLAIN),
        ("If Huang et al. are right, ADR-031 (superseding ADR-030) holds.", _NOT_PLAIN),
        ("Jones proposes ADR-031 (superseding ADR-030).", _NOT_PLAIN),
        ("ADR-031 (superseding ADR-030)... or not.", _NOT_PLAIN),
        ("ADR-031 (superseding ADR-030) is under review.", _NOT_PLAIN),
        ("ADR-031 (superseding ADR-030) was later reverted, so ADR-030 still scopes this.", _NOT_PLAIN),
        ("Pending ratification (est. Q3) ADR-031 (superseding ADR-030) scopes this out.", _NOT_PLAIN),
        # forms the import does not read at all
        ("ADR-031 (superseding ADR-030 and ADR-029) is in force.", _OTHER_FORM),
        ("ADR-031, which supersedes ADR-030, is in force.", _OTHER_FORM),
        ("ADR-031 supersedes both ADR-030 and ADR-029.", _OTHER_FORM),
    ],
)
def test_an_aside_or_wording_the_page_does_not_plainly_state_is_warned_of_not_imported(
    runner, tmp_path, sentence, warned
):
    page, line, data, result = _imported_with_row(runner, tmp_path, f"| SOTA-986 | T | {sentence} | Proposed |")
    assert result.exit_code == 0, result.output
    assert "superseded_by" not in _read(data, "adrs", "ADR-030")
    assert f"warning: {page}:{line}: " in result.output and warned in result.output


def test_lowercase_ids_make_no_supersession(runner, tmp_path):
    _page, _line, data, result = _imported_with_row(
        runner, tmp_path, "| SOTA-986 | T | adr-031 supersedes adr-030. | Proposed |"
    )
    assert result.exit_code == 0, result.output
    assert not (data / "adrs" / "ADR-030.yaml").exists() and not (data / "adrs" / "adr-030.yaml").exists()


def test_a_url_the_rules_refuse_is_kept_as_an_unread_locator(runner, tmp_path):
    row = '| SOTA-986 | T | Doe (2020), LIT-901 — https://example.org/"a". | Proposed |'
    page, line, data, result = _imported_with_row(runner, tmp_path, row)
    assert result.exit_code == 0, result.output
    assert 'locator: https://example.org/"a"\n' in _read(data, "papers", "LIT-901").replace("'", "")
    assert f"warning: {page}:{line}: row SOTA-986: cannot read the locator" in result.output


def test_a_blank_line_inside_the_table_is_warned_of(runner, tmp_path):
    page, line, data, result = _imported_with_row(runner, tmp_path, "\n| SOTA-986 | T | x | Proposed |")
    assert result.exit_code == 0, result.output
    assert f"warning: {page}:{line - 1}: a blank line inside the table (Markdown ends the table there)" in result.output
    assert (data / "practices" / "SOTA-986.yaml").is_file()


@pytest.mark.parametrize("cell", ["&#010; stays", "\u00a0no-break edges\u00a0"])
def test_what_markdown_keeps_in_a_cell_exports_as_written(runner, tmp_path, cell):
    page, _line = _page_with_row(tmp_path, f"| SOTA-986 | {cell} | x | Proposed |")
    data, store = tmp_path / "data", tmp_path / "store"
    options = ["--data", str(data), "--store", str(store)]
    assert runner.invoke(cli, [*options, "import", "markdown", str(page)]).exit_code == 0
    exported = runner.invoke(cli, [*options, "export", "index", "--topic", "distributed-optimization"])
    assert f"| SOTA-986 | {cell} | x | Proposed |" in exported.stdout


def test_a_note_after_a_status_that_is_no_rejection_is_no_rejection_reason(runner, tmp_path):
    row = "| SOTA-986 | T | Doe (2020), LIT-051. | Proposed — awaits a second source beyond LIT-051 |"
    page, _line = _page_with_row(tmp_path, row)
    data, store = tmp_path / "data", tmp_path / "store"
    options = ["--data", str(data), "--store", str(store)]
    assert runner.invoke(cli, [*options, "import", "markdown", str(page)]).exit_code == 0
    practice = _read(data, "practices", "SOTA-986")
    assert "status_note: awaits a second source beyond LIT-051\n" in practice and "\nreason:" not in practice
    why = runner.invoke(cli, [*options, "why", "SOTA-986"])
    assert why.exit_code == 0, why.output
    assert "rejected" not in why.output.lower()
    rejection = runner.invoke(cli, [*options, "query", "rejection-of", "-p", "practice=SOTA-986", "--format", "csv"])
    assert rejection.exit_code == 0 and "awaits" not in rejection.output
    exported = runner.invoke(cli, [*options, "export", "index", "--topic", "distributed-optimization"])
    assert row in exported.stdout
    validated = runner.invoke(cli, [*options, "validate"])
    assert "reason-only-if-rejected" not in validated.output


def test_the_importers_url_pattern_is_the_rules_pattern():
    # A URL the import takes as one must be one the paper-url rule takes (else it is an unread locator)
    import rdflib

    from sotakg.records.indexpage import GOOD_URL_RE

    shapes = rdflib.Graph().parse(REPO / "shapes" / "sotakg-shapes.ttl")
    rule = rdflib.URIRef("https://w3id.org/sotakg/shapes#paper-url")
    (pattern,) = shapes.objects(rule, rdflib.URIRef("http://www.w3.org/ns/shacl#pattern"))
    assert f"^{GOOD_URL_RE.pattern.replace('(?:', '(')}$" == str(pattern)


def test_a_status_other_than_rejected_gives_a_status_note_not_a_rejection_reason(runner, tmp_path):
    # an unknown status is kept as written: what follows it is a note on it, never a rejection reason
    row = "| SOTA-986 | T | Doe (2020), LIT-051. | Superseded — by SOTA-017 |"
    page, line, data, imported = _imported_with_row(runner, tmp_path, row)
    options = ["--data", str(data), "--store", str(tmp_path / "store")]
    assert imported.exit_code == 0, imported.output
    assert f"warning: {page}:{line}: row SOTA-986: unknown status 'Superseded'" in imported.output
    assert _read(data, "practices", "SOTA-986") == (
        "id: SOTA-986\nversion: 1\ntitle: T\nsummary: Doe (2020), LIT-051.\nstatus: Superseded\n"
        "status_note: by SOTA-017\ncites: [LIT-051]\ntopic: distributed-optimization\n"
    )
    exported = runner.invoke(cli, [*options, "export", "index", "--topic", "distributed-optimization"])
    assert exported.exit_code == 0, exported.output
    assert exported.stdout_bytes == page.read_bytes().rstrip(b"\n")


_LOCATOR_READ = "; its locator was read"


@pytest.mark.parametrize(
    ("summary", "paper", "warned"),
    [
        (
            "Smith et al., LIT-100 — ARXIV-2001.00001v3.",
            "id: LIT-100\narxiv: '2001.00001'\narxiv_version: 3\n",
            [_unread("LIT-100", "Smith et al., LIT-100 — ARXIV-2001.00001v3.") + _LOCATOR_READ],
        ),
        (
            "LIT-100 — https://example.org/p. More.",
            "id: LIT-100\nurl: https://example.org/p\n",
            [_unread("LIT-100", "LIT-100 — https://example.org/p. More.") + _LOCATOR_READ],
        ),
        (
            "Doe (in press), LIT-100 — ARXIV-16040.6174.",
            "id: LIT-100\nlocator: ARXIV-16040.6174\n",
            [
                "cannot read the locator 'ARXIV-16040.6174' of LIT-100 (expected ARXIV-YYMM.NNNNN or an http(s) "
                "URL); kept verbatim as the paper's `locator`, which validate reports",
                _unread("LIT-100", "Doe (in press), LIT-100 — ARXIV-16040.6174.") + _LOCATOR_READ,
            ],
        ),
        (
            "LIT-100 and LIT-101 — ARXIV-2001.00001.",
            "id: LIT-100\n",
            [
                "gives one locator after 2 papers; it was not assigned to any of them (give each paper its own row "
                "or byline)",
                _unread("LIT-100, LIT-101", "LIT-100 and LIT-101 — ARXIV-2001.00001."),
            ],
        ),
    ],
)
def test_the_locator_after_a_byline_the_import_cannot_read_is_kept(runner, tmp_path, summary, paper, warned):
    page, line, data, result = _imported_with_row(runner, tmp_path, f"| SOTA-986 | T | {summary} | Proposed |")
    assert result.exit_code == 0, result.output
    assert _read(data, "papers", "LIT-100") == paper
    where = f"warning: {page}:{line}: row SOTA-986"
    assert _row_warnings(result.output, page, line) == [
        f"{where} {w}" if w.startswith("gives") else f"{where}: {w}" for w in warned
    ]


@pytest.mark.parametrize(
    ("summary", "authors"),
    [
        ("d'Ascoli et al. (2021), LIT-101 — ARXIV-2103.10697.", "d'Ascoli et al."),
        ("d’Ascoli et al. (2021), LIT-101 — ARXIV-2103.10697.", "d’Ascoli et al."),
        ("G. l'Hôpital and J. Bernoulli (2021), LIT-101 — ARXIV-2103.10697.", "G. l'Hôpital and J. Bernoulli"),
        ("D'Souza and O'Brien (2021), LIT-101 — ARXIV-2103.10697.", "D'Souza and O'Brien"),
        ("Łukasz Kaiser and others (2021), LIT-101 — ARXIV-2103.10697.", "Łukasz Kaiser and others"),
    ],
)
def test_names_with_an_elided_particle_or_and_others_read_as_authors(runner, tmp_path, summary, authors):
    page, line, data, result = _imported_with_row(runner, tmp_path, f"| SOTA-986 | T | {summary} | Proposed |")
    assert result.exit_code == 0, result.output
    assert _row_warnings(result.output, page, line) == []
    assert "cites: [LIT-101]\n" in _read(data, "practices", "SOTA-986")
    assert _read(data, "papers", "LIT-101") == f"id: LIT-101\nauthors: {authors}\nyear: 2021\narxiv: '2103.10697'\n"


@pytest.mark.parametrize("authors", ["l'amour de Smith", "Work by d'Ascoli", "See also d'Ascoli and others"])
def test_prose_with_an_apostrophe_or_others_is_no_list_of_authors(runner, tmp_path, authors):
    summary = f"{authors} (2021), LIT-101 — ARXIV-2103.10697."
    page, line, data, result = _imported_with_row(runner, tmp_path, f"| SOTA-986 | T | {summary} | Proposed |")
    assert result.exit_code == 0, result.output
    assert "cites:" not in _read(data, "practices", "SOTA-986")
    assert _row_warnings(result.output, page, line) == [f"warning: {page}:{line}: row SOTA-986: LIT-101 {_NAMED}"]


@pytest.mark.parametrize(
    ("locator", "after"),
    [
        ("<https://example.org/x>", "."),
        ("[pdf](https://example.org/y.pdf)", ". More."),
        ('[the paper](https://example.org/y.pdf "Title")', ""),
        ("DOI 10.1145/3458817", "."),
        ("DOI: 10.1145/3458817", "; see appendix."),
    ],
)
def test_a_locator_in_another_markdown_form_is_kept_verbatim_and_exported_as_written(runner, tmp_path, locator, after):
    row = f"| SOTA-986 | T | Doe (2020), LIT-901 — {locator}{after} | Proposed |"
    page, line, data, imported = _imported_with_row(runner, tmp_path, row)
    options = ["--data", str(data), "--store", str(tmp_path / "store")]
    assert imported.exit_code == 0, imported.output
    assert _row_warnings(imported.output, page, line) == [
        f"warning: {page}:{line}: row SOTA-986: cannot read the locator {locator!r} of LIT-901 (expected "
        "ARXIV-YYMM.NNNNN or an http(s) URL); kept verbatim as the paper's `locator`, which validate reports"
    ]
    assert yaml.safe_load(_read(data, "papers", "LIT-901")) == {
        "id": "LIT-901",
        "authors": "Doe",
        "year": 2020,
        "locator": locator,
    }
    exported = runner.invoke(cli, [*options, "export", "index", "--topic", "distributed-optimization"])
    assert exported.exit_code == 0, exported.output
    assert exported.stdout_bytes == page.read_bytes().rstrip(b"\n")
    checked = runner.invoke(cli, [*options, "validate"])
    assert checked.exit_code == 1
    assert f"{data}/papers/LIT-901.yaml:4: " in checked.output and "[paper-locator-unread]" in checked.output


def _page_of(path: Path, scope: str, title: str = "T") -> Path:
    """A page of one topic with the scope note ``scope`` and one row, SOTA-901, titled ``title``."""
    path.write_text(
        f"Topics — The kinds of claim.\nRegularization — {scope}\n1 of 449 SOTA documents. Back to the full index.\n"
        f"| # | Title | Summary | Status |\n|---|---|---|---|\n| SOTA-901 | {title} | x | Proposed |",
        encoding="utf-8",
    )
    return path


@pytest.mark.parametrize(
    ("scope", "title"),
    [
        ("weight decay; see ADR-030 (superseding ADR-012).", "T"),
        ("weight decay.", "Decay weights, per ADR-030 (superseding ADR-012)"),
    ],
    ids=["scope", "title"],
)
def test_adrs_and_supersessions_of_the_scope_line_and_the_titles_are_read(runner, tmp_path, scope, title):
    page = _page_of(tmp_path / "regularization.md", scope, title)
    data, store = tmp_path / "data", tmp_path / "store"
    options = ["--data", str(data), "--store", str(store)]
    result = runner.invoke(cli, [*options, "import", "markdown", str(page)])
    assert result.exit_code == 0, result.output
    assert "warning:" not in result.output
    assert _read(data, "adrs", "ADR-012") == "id: ADR-012\nstatus: Superseded\nsuperseded_by: ADR-030\n"
    assert _read(data, "adrs", "ADR-030") == "id: ADR-030\nsupersedes: [ADR-012]\n"
    exported = runner.invoke(cli, [*options, "export", "index", "--topic", "regularization"])
    assert exported.stdout_bytes == page.read_bytes()


@pytest.mark.parametrize(
    ("scope", "title", "line"),
    [
        ("weight decay; if ADR-030 (superseding ADR-012) passes, more.", "T", 2),
        ("weight decay.", "Decay weights if ADR-030 (superseding ADR-012) passes", 6),
        ("weight decay; ADR-030 supersedes both ADR-012 and ADR-011.", "T", 2),
    ],
)
def test_a_supersession_of_the_scope_line_or_a_title_not_plainly_stated_is_warned_of_on_its_line(
    runner, tmp_path, scope, title, line
):
    page = _page_of(tmp_path / "regularization.md", scope, title)
    data = tmp_path / "data"
    result = runner.invoke(cli, ["--data", str(data), "import", "markdown", str(page)])
    assert result.exit_code == 0, result.output
    (warning,) = [w for w in result.output.splitlines() if w.startswith("warning:")]
    assert warning.startswith(f"warning: {page}:{line}: ")
    assert _NOT_PLAIN in warning or _OTHER_FORM in warning
    assert _read(data, "adrs", "ADR-012") == "id: ADR-012\n"


#: arXiv ids with the rules' verdict: new-style YYMM.NNNN(N), old-style archive[.subject-class]/YYMMNNN.
ARXIV_IDS = [
    ("1811.06965", True),
    ("0704.0001", True),
    ("cs/0501001", True),
    ("hep-th/9901001", True),
    ("math.GT/0309136", True),
    ("cond-mat.mes-hall/0210001", True),
    ("1813.06965", False),  # month 13
    ("1811.069", False),
    ("arXiv:1811.06965", False),
    ("cs/050100", False),
    ("cs/0513001", False),  # month 13
    ("CS/0501001", False),
    ("hep-th/9901001v2", False),  # the version is a field of its own
    ("math.GT/", False),
    ("/0501001", False),
]


def test_the_importers_arxiv_pattern_is_the_rules_pattern():
    # An id the import reads as an arXiv id must be one the paper-arxiv-id rule takes, and the other way round
    import rdflib

    from sotakg.records.indexpage import ARXIV_ID, _locator_at

    shapes = rdflib.Graph().parse(REPO / "shapes" / "sotakg-shapes.ttl")
    rule = rdflib.URIRef("https://w3id.org/sotakg/shapes#paper-arxiv-id")
    (pattern,) = shapes.objects(rule, rdflib.URIRef("http://www.w3.org/ns/shacl#pattern"))
    assert f"^({ARXIV_ID.replace('(?:', '(')})$" == str(pattern)
    for arxiv, good in ARXIV_IDS:
        assert (re.fullmatch(ARXIV_ID, arxiv) is not None) is good, arxiv
        assert (re.search(str(pattern), arxiv) is not None) is good, arxiv
        row = f"x — ARXIV-{arxiv}."
        read = _locator_at(row, 1)
        assert (read is not None and read[0] == "arxiv" and read[1] == arxiv) is good, arxiv


@pytest.mark.parametrize(
    ("locator", "arxiv", "version"),
    [
        ("cs/0501001", "cs/0501001", None),
        ("hep-th/9901001v2", "hep-th/9901001", 2),
        ("math.GT/0309136", "math.GT/0309136", None),
    ],
)
def test_an_old_style_arxiv_id_is_read_exported_as_written_and_valid(runner, tmp_path, locator, arxiv, version):
    row = f"| SOTA-986 | T | Doe (2003), LIT-901 — ARXIV-{locator}. | Proposed |"
    page, line, data, imported = _imported_with_row(runner, tmp_path, row)
    options = ["--data", str(data), "--store", str(tmp_path / "store")]
    assert imported.exit_code == 0, imported.output
    assert _row_warnings(imported.output, page, line) == []
    assert _read(data, "papers", "LIT-901") == (
        f"id: LIT-901\nauthors: Doe\nyear: 2003\narxiv: {arxiv}\n" + (f"arxiv_version: {version}\n" if version else "")
    )
    exported = runner.invoke(cli, [*options, "export", "index", "--topic", "distributed-optimization"])
    assert exported.exit_code == 0, exported.output
    assert exported.stdout_bytes == page.read_bytes().rstrip(b"\n")
    checked = runner.invoke(cli, [*options, "validate"])
    assert "LIT-901" not in checked.output, checked.output


# ------------------------------------------------------------------ layout the export does not give back

_LAYOUT = "; export index writes what the page says, not its layout"


def _swap_rows(text: str) -> str:
    lines = text.split("\n")
    lines[5], lines[6] = lines[6], lines[5]
    return "\n".join(lines)


@pytest.mark.parametrize(
    ("change", "where"),
    [
        (lambda text: text + "\n", "47: export index ends the page after its last row, with no line end or blank line"),
        (
            lambda text: text.replace("\n", "\r\n"),
            "1: the page ends its lines with CR LF or CR; export index writes LF",
        ),
        (lambda text: "\ufeff" + text, "1: the page starts with a byte-order mark, which export index does not write"),
        (lambda text: text.replace("| SOTA-017 v2 |", "|  SOTA-017 v2  |"), "6: export index will write this line"),
        (lambda text: text.replace("|---|---|---|---|", "| --- | --- | --- | --- |"), "5: export index will write"),
        (_swap_rows, "6: export index will write this line as '| SOTA-"),
        (lambda text: text.replace("42 of 449", "042 of 449"), "3: export index will write this line as '42 of 449"),
    ],
    ids=["final-line-end", "crlf", "bom", "padding", "rule", "row-order", "count"],
)
def test_a_page_whose_layout_the_export_does_not_give_back_is_imported_with_a_warning(runner, tmp_path, change, where):
    """What the page says is imported; where its bytes differ from what export index writes, one warning
    names the first such line (the page as the anthology publishes it gets none)."""
    page = tmp_path / "page.md"
    page.write_text(change(SEED_PAGE.read_text(encoding="utf-8")), encoding="utf-8", newline="")
    result = runner.invoke(cli, ["--data", str(tmp_path / "data"), "import", "markdown", str(page)])
    assert result.exit_code == 0, result.output
    layout = [line for line in result.output.splitlines() if line.endswith(_LAYOUT)]
    assert len(layout) == 1 and layout[0].startswith(f"warning: {page}:{where}"), result.output
    assert runner.invoke(cli, ["--data", str(tmp_path / "data"), "build"]).exit_code == 0
    exported = runner.invoke(cli, ["--data", str(tmp_path / "data"), "export", "index", "--topic",
                                   "distributed-optimization", "-o", str(tmp_path / "out.md")])  # fmt: skip
    assert exported.exit_code == 0, exported.output
    assert (tmp_path / "out.md").read_text(encoding="utf-8") == SEED_PAGE.read_text(encoding="utf-8")


def test_the_published_page_imports_without_a_layout_warning(runner, tmp_path):
    result = runner.invoke(cli, ["--data", str(tmp_path / "data"), "import", "markdown", str(SEED_PAGE)])
    assert result.exit_code == 0, result.output
    assert _LAYOUT not in result.output


@pytest.mark.parametrize("line", [0, 1])
def test_blanks_at_the_end_of_a_header_line_are_layout_not_data(runner, tmp_path, line):
    lines = SEED_PAGE.read_text(encoding="utf-8").split("\n")
    lines[line] += "  "
    page = tmp_path / "page.md"
    page.write_text("\n".join(lines), encoding="utf-8")
    data = tmp_path / "data"
    assert runner.invoke(cli, ["--data", str(data), "import", "markdown", str(page)]).exit_code == 0
    assert _read(data, "topics", "distributed-optimization").endswith("checkpointing.\ndeclared_size: 42\n")
    assert "(ADR-059).'\n" in (data / "registry.yaml").read_text(encoding="utf-8")


def test_a_one_practice_page_may_say_document(runner, tmp_path):
    lines = SEED_PAGE.read_text(encoding="utf-8").split("\n")
    page = tmp_path / "page.md"
    page.write_text("\n".join([*lines[:2], "1 of 449 SOTA document. Back to the full index.", *lines[3:6]]))
    result = runner.invoke(cli, ["--data", str(tmp_path / "data"), "import", "markdown", str(page)])
    assert result.exit_code == 0, result.output
    assert "3: export index will write this line as '1 of 449 SOTA documents." in result.output


@pytest.mark.parametrize("force", [False, True])
def test_a_practice_the_page_no_longer_lists_is_named_when_it_is_imported_again(runner, tmp_path, force):
    data = tmp_path / "data"
    assert runner.invoke(cli, ["--data", str(data), "import", "markdown", str(SEED_PAGE)]).exit_code == 0
    page = tmp_path / "page.md"
    lines = SEED_PAGE.read_text(encoding="utf-8").split("\n")
    page.write_text("\n".join(line for line in lines if not line.startswith("| SOTA-048 ")), encoding="utf-8")
    result = runner.invoke(cli, ["--data", str(data), "import", "markdown", *(["--force"] * force), str(page)])
    assert result.exit_code == 0, result.output
    assert (
        f"warning: {page}: 1 practice(s) of the data folder filed under distributed-optimization are not on the "
        "page: SOTA-048; they are kept, and export index lists them"
    ) in result.output
    assert (data / "practices" / "SOTA-048.yaml").exists()
    again = runner.invoke(cli, ["--data", str(data), "import", "markdown", str(SEED_PAGE)])
    assert "not on the page" not in again.output
