"""`sotakg import markdown`: the cases the mutation run of records/importer.py showed untested.

The report an import gives back, the exact messages of a refused import (each refusal on a line of
its own), what --force replaces, and the checks made again at write time (a folder or a link put in
place after the import looked)."""

from __future__ import annotations

import locale
import os
from pathlib import Path

import pytest

from sotakg.cli import cli
from sotakg.errors import ImportProblem, RecordConflict
from sotakg.records import importer
from sotakg.records.importer import RecordChange, import_markdown

from .conftest import FIXTURES, SEED_PAGE, SHIPPED_DATA


def tree(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _import(runner, data: Path, page: Path, *options: str):
    return runner.invoke(cli, ["--data", str(data), "import", "markdown", *options, str(page)])


def _seed(tmp_path: Path) -> Path:
    """A copy of the seed page outside the checkout, so that messages name it by its whole path."""
    page = tmp_path / SEED_PAGE.name
    page.write_bytes(SEED_PAGE.read_bytes())
    return page


def _none_written(unchanged: int, verb: str = "Wrote") -> str:
    return f"{verb} 0 practices, 0 papers, 0 ADRs, 0 topics, 0 registry; {unchanged} unchanged."


# ------------------------------------------------------------------------------ the report


def test_a_new_record_is_reported_as_new_and_not_listed(runner, data_copy):
    (data_copy / "practices" / "SOTA-018.yaml").unlink()
    result = _import(runner, data_copy, SEED_PAGE)
    assert result.exit_code == 0, result.output
    # a record the import makes is counted, never listed as a change
    assert result.stdout.splitlines() == ["Wrote 1 practice, 0 papers, 0 ADRs, 0 topics, 0 registry; 64 unchanged."]
    assert tree(data_copy) == tree(SHIPPED_DATA)


def test_the_report_names_each_new_record_with_its_file(data_copy):
    (data_copy / "practices" / "SOTA-018.yaml").unlink()
    report = import_markdown(SEED_PAGE, data_copy)
    where = f"{data_copy}/practices/SOTA-018.yaml"
    assert report.changes == [RecordChange(where, "SOTA-018", created=True)]
    assert report.changes[0].describe() == f"{where} (SOTA-018): new record"
    assert report.written == {"practice": 1, "paper": 0, "adr": 0, "topic": 0, "registry": 0}
    assert report.unchanged == 64
    assert report.dry_run is False


def test_a_dry_run_report_says_it_is_one_and_writes_nothing(data_copy):
    record = data_copy / "practices" / "SOTA-049.yaml"
    record.write_text(record.read_text(encoding="utf-8").replace("title: Set buffer size", "title: Size the buffer"))
    before = tree(data_copy)
    report = import_markdown(SEED_PAGE, data_copy, force=True, dry_run=True)
    assert report.dry_run is True
    assert report.changes == [
        RecordChange(f"{data_copy}/practices/SOTA-049.yaml", "SOTA-049", created=False, changed=("title",))
    ]
    assert report.written["practice"] == 1
    assert tree(data_copy) == before


def test_the_importer_refuses_a_differing_record_unless_asked_to_force(data_copy, tmp_path):
    page = _seed(tmp_path)
    record = data_copy / "practices" / "SOTA-049.yaml"
    record.write_text(record.read_text(encoding="utf-8").replace("title: Set buffer size", "title: Size the buffer"))
    before = tree(data_copy)
    with pytest.raises(RecordConflict) as refused:
        import_markdown(page, data_copy)  # force is off unless asked for
    assert str(refused.value) == (
        f"1 existing record(s) differ from {page}; nothing was written:\n"
        f"  {data_copy}/practices/SOTA-049.yaml (SOTA-049) differs from the page: changed title\n"
        "Check the differences, then run again with --force to let the page win."
    )
    assert tree(data_copy) == before
    report = import_markdown(SEED_PAGE, data_copy, force=True)
    # a record that existed is changed, not created
    assert report.changes == [
        RecordChange(f"{data_copy}/practices/SOTA-049.yaml", "SOTA-049", created=False, changed=("title",))
    ]
    assert tree(data_copy) == tree(SHIPPED_DATA)


# ------------------------------------------------------------- records the import cannot read


def _unreadable_linked_and_changed(data: Path, tmp_path: Path) -> Path:
    """SOTA-017 (the page's first row) not UTF-8, SOTA-028 a link to a file outside, LIT-004 (a paper,
    checked after every practice) of another year; the link's target, which must stay as it is."""
    (data / "practices" / "SOTA-017.yaml").write_bytes(b"id: SOTA-017\ntitle: caf\xe9\n")
    victim = tmp_path / "victim.yaml"
    victim.write_text("id: SOTA-028\ntitle: kept\n", encoding="utf-8")
    linked = data / "practices" / "SOTA-028.yaml"
    linked.unlink()
    linked.symlink_to(victim)
    paper = data / "papers" / "LIT-004.yaml"
    paper.write_text(paper.read_text(encoding="utf-8").replace("year: 2016", "year: 2017"), encoding="utf-8")
    return victim


def test_every_record_in_the_way_is_named_on_a_line_of_its_own_and_nothing_is_written(runner, data_copy, tmp_path):
    _unreadable_linked_and_changed(data_copy, tmp_path)
    before = tree(data_copy)
    page = _seed(tmp_path)
    result = _import(runner, data_copy, page)
    assert result.exit_code == 1
    assert result.output == (
        f"Error: 3 existing record(s) differ from {page}; nothing was written:\n"
        f"  {data_copy}/practices/SOTA-017.yaml cannot be read (not UTF-8 (byte 0xe9); save the file as UTF-8)\n"
        f"  {data_copy}/practices/SOTA-028.yaml is a symbolic link; replace it with the record file (or use --force)\n"
        f"  {data_copy}/papers/LIT-004.yaml (LIT-004) differs from the page: changed year\n"
        "Check the differences, then run again with --force to let the page win.\n"
    )
    assert tree(data_copy) == before
    assert (data_copy / "practices" / "SOTA-028.yaml").is_symlink()


def test_force_replaces_an_unreadable_file_and_a_link_and_goes_on_with_the_rest(runner, data_copy, tmp_path):
    victim = _unreadable_linked_and_changed(data_copy, tmp_path)
    result = _import(runner, data_copy, SEED_PAGE, "--force")
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == [
        f"{data_copy}/practices/SOTA-017.yaml (SOTA-017): replaced a file it could not read",
        f"{data_copy}/practices/SOTA-028.yaml (SOTA-028): replaced a symbolic link",
        f"{data_copy}/papers/LIT-004.yaml (LIT-004): changed year",
        "Wrote 2 practices, 1 paper, 0 ADRs, 0 topics, 0 registry; 62 unchanged.",
    ]
    assert tree(data_copy) == tree(SHIPPED_DATA)
    assert not (data_copy / "practices" / "SOTA-028.yaml").is_symlink()
    assert victim.read_text(encoding="utf-8") == "id: SOTA-028\ntitle: kept\n"


def test_the_report_of_a_forced_import_tells_what_was_replaced(data_copy, tmp_path):
    _unreadable_linked_and_changed(data_copy, tmp_path)
    report = import_markdown(SEED_PAGE, data_copy, force=True)
    assert report.changes == [
        RecordChange(
            f"{data_copy}/practices/SOTA-017.yaml", "SOTA-017", created=True, replaced="a file it could not read"
        ),
        RecordChange(f"{data_copy}/practices/SOTA-028.yaml", "SOTA-028", created=True, replaced="a symbolic link"),
        RecordChange(f"{data_copy}/papers/LIT-004.yaml", "LIT-004", created=False, changed=("year",)),
    ]
    assert report.unchanged == 62


def test_force_replaces_a_record_link_to_a_folder_and_leaves_the_folder_alone(runner, data_copy, tmp_path):
    folder = tmp_path / "elsewhere"
    folder.mkdir()
    (folder / "keep.txt").write_text("kept\n", encoding="utf-8")
    record = data_copy / "practices" / "SOTA-049.yaml"
    record.unlink()
    record.symlink_to(folder)
    refused = _import(runner, data_copy, SEED_PAGE)
    assert refused.exit_code == 1
    assert f"  {record} is a symbolic link; replace it with the record file (or use --force)\n" in refused.output
    forced = _import(runner, data_copy, SEED_PAGE, "--force")
    assert forced.exit_code == 0, forced.output
    assert forced.stdout.splitlines() == [
        f"{record} (SOTA-049): replaced a symbolic link",
        "Wrote 1 practice, 0 papers, 0 ADRs, 0 topics, 0 registry; 64 unchanged.",
    ]
    assert not record.is_symlink()
    assert tree(data_copy) == tree(SHIPPED_DATA)
    assert tree(folder) == {"keep.txt": b"kept\n"}


# ------------------------------------------------------------------------ pages refused


def test_a_page_over_the_size_limit_is_refused_naming_it(runner, tmp_path, monkeypatch):
    monkeypatch.setenv("SOTAKG_MAX_FILE_BYTES", "100")
    data, page = tmp_path / "data", _seed(tmp_path)
    result = _import(runner, data, page)
    assert result.exit_code == 1
    size = page.stat().st_size
    assert result.output == (
        f"Error: cannot import {page}: file is {size} bytes, over the 100-byte limit "
        "(raise it with SOTAKG_MAX_FILE_BYTES)\n"
    )
    assert not data.exists()


def test_a_page_that_is_gone_is_refused_with_the_reason(tmp_path):
    page = tmp_path / "gone.md"
    with pytest.raises(ImportProblem) as refused:
        import_markdown(page, tmp_path / "data")
    assert str(refused.value) == f"cannot read {page}: No such file or directory"
    assert not (tmp_path / "data").exists()


def test_a_page_that_is_not_utf8_is_refused_naming_the_line(runner, tmp_path):
    page = tmp_path / "page.md"
    lines = SEED_PAGE.read_bytes().split(b"\n")
    lines[2] = lines[2].replace(b"SOTA documents", b"SOTA docum\xe9nts")
    page.write_bytes(b"\n".join(lines))
    result = _import(runner, tmp_path / "data", page)
    assert result.exit_code == 1
    assert result.output == f"Error: {page}:3: not UTF-8 (byte 0xe9); save the file as UTF-8\n"
    assert not (tmp_path / "data").exists()


def test_only_a_md_file_name_gives_the_topic_its_slug(runner, tmp_path):
    page = tmp_path / "regularization.txt"
    page.write_text(
        "Topics — The kinds of claim.\n正則化 — scope.\n1 of 449 SOTA documents. Back to the full index.\n"
        "| # | Title | Summary | Status |\n|---|---|---|---|\n| SOTA-901 | T | x | Proposed |",
        encoding="utf-8",
    )
    result = _import(runner, tmp_path / "data", page)
    assert result.exit_code == 1
    assert result.output == (
        f"Error: {page}:2: the topic label '正則化' gives no slug (a slug holds a-z, 0-9 and '-'); use such "
        "letters or digits in the label, or name the page file <slug>.md\n"
    )
    assert not (tmp_path / "data").exists()


def test_a_data_folder_that_is_a_link_is_refused_naming_where_it_leads(runner, tmp_path):
    target = tmp_path / "real-data"
    target.mkdir()
    data = tmp_path / "data"
    data.symlink_to(target)
    result = _import(runner, data, SEED_PAGE)
    assert result.exit_code == 2
    assert result.output.endswith(
        f"Error: the data folder {data} is a symbolic link, and sotakg does not follow it (a checkout can commit "
        f"one); to use the folder it leads to, name that folder instead: {target}\n"
    )
    assert list(target.iterdir()) == []


# ---------------------------------------------------------------------- what a page decides


def test_a_paper_keeps_a_locator_the_page_does_not_give(runner, tmp_path):
    page = tmp_path / "page.md"
    text = SEED_PAGE.read_text(encoding="utf-8").rstrip("\n") + "\n| SOTA-986 | T | Doe (2020), LIT-901. | Proposed |\n"
    page.write_text(text, encoding="utf-8")
    data = tmp_path / "data"
    assert _import(runner, data, page).exit_code == 0
    paper = data / "papers" / "LIT-901.yaml"
    assert paper.read_text(encoding="utf-8") == "id: LIT-901\nauthors: Doe\nyear: 2020\n"
    paper.write_text("id: LIT-901\nauthors: Doe\nyear: 2020\nurl: https://example.org/p\n", encoding="utf-8")
    again = _import(runner, data, page)
    assert again.exit_code == 0, again.output
    assert again.stdout.splitlines() == [_none_written(67)]
    paper.write_text("id: LIT-901\nauthors: Doe\nyear: 2019\nurl: https://example.org/p\n", encoding="utf-8")
    forced = _import(runner, data, page, "--force")
    assert forced.exit_code == 0, forced.output
    assert forced.stdout.splitlines()[0] == f"{paper} (LIT-901): changed year"
    assert paper.read_text(encoding="utf-8") == "id: LIT-901\nauthors: Doe\nyear: 2020\nurl: https://example.org/p\n"


# ------------------------------------------------------------------- checked again at write time


def _after_the_plan(monkeypatch, action) -> None:
    """Run ``action`` once the import has decided what to write, before it writes: as another
    process changing the data folder in between would."""
    real_dump = importer.dump_record
    done: list[bool] = []

    def dump(record):
        if not done:
            done.append(True)
            action()
        return real_dump(record)

    monkeypatch.setattr(importer, "dump_record", dump)


def test_a_folder_put_in_the_way_after_the_check_is_named_and_nothing_is_written(runner, data_copy, monkeypatch):
    record = data_copy / "practices" / "SOTA-018.yaml"
    record.unlink()
    before = tree(data_copy)
    _after_the_plan(monkeypatch, record.mkdir)
    result = _import(runner, data_copy, SEED_PAGE)
    assert result.exit_code == 1
    assert result.output == f"Error: cannot write {record}: a folder is in the way; move it\n"
    assert tree(data_copy) == before
    assert sorted(p.name for p in data_copy.rglob(".*")) == []


def test_a_record_folder_turned_into_a_link_after_the_check_is_refused(runner, tmp_path, monkeypatch):
    data, outside = tmp_path / "data", tmp_path / "outside"
    outside.mkdir()

    def link_practices() -> None:
        data.mkdir()
        (data / "practices").symlink_to(outside)

    _after_the_plan(monkeypatch, link_practices)
    result = _import(runner, data, SEED_PAGE)
    assert result.exit_code == 1
    # the registry and the topic come first, then SOTA-017, the page's first row
    assert result.output == (
        f"Error: cannot write {data}/practices/SOTA-017.yaml: its folder leads outside the data folder\n"
    )
    assert list(outside.iterdir()) == []
    assert [p.name for p in data.iterdir()] == ["practices"]


def test_a_failure_without_an_error_code_is_reported_with_its_message(runner, data_copy, tmp_path, monkeypatch):
    page = tmp_path / "page.md"
    page.write_text(SEED_PAGE.read_text(encoding="utf-8").replace("Set buffer size", "Size the buffer"), "utf-8")
    (data_copy / "practices" / "SOTA-018.yaml").unlink()
    before = tree(data_copy)
    real_rename = os.rename
    renamed: list[str] = []

    def rename(source, destination):
        if str(source).endswith(".import"):
            renamed.append(str(destination))
            if len(renamed) == 2:
                raise OSError("the file system refused the rename")
        return real_rename(source, destination)

    monkeypatch.setattr(os, "rename", rename)
    result = _import(runner, data_copy, page, "--force")
    assert result.exit_code == 1
    assert renamed == [f"{data_copy}/practices/SOTA-018.yaml", f"{data_copy}/practices/SOTA-049.yaml"]
    assert result.output == (
        f"Error: cannot write {data_copy}/practices/SOTA-049.yaml: the file system refused the rename; "
        f"nothing in {data_copy} was changed\n"
    )
    assert tree(data_copy) == before


@pytest.fixture
def ascii_locale():
    """The C locale's ASCII as the locale's encoding, for the test's length."""
    saved = locale.setlocale(locale.LC_CTYPE)
    locale.setlocale(locale.LC_CTYPE, "C")
    try:
        yield
    finally:
        locale.setlocale(locale.LC_CTYPE, saved)


@pytest.mark.usefixtures("ascii_locale")
def test_records_are_written_as_utf8_whatever_the_locale(tmp_path):
    data = tmp_path / "data"
    report = import_markdown(FIXTURES / "other-topic.md", data)
    assert report.written["paper"] == 4
    assert (data / "papers" / "LIT-903.yaml").read_bytes() == (
        "id: LIT-903\nauthors: Åström and Øksendal\nyear: 2021\narxiv: '2101.00001'\narxiv_version: 2\n"
    ).encode()
    assert (
        "title: Mesurer la contamination avant l’évaluation — 汚染を先に測る\n".encode()
        in (data / "practices" / "SOTA-903.yaml").read_bytes()
    )


def test_a_conflict_is_told_right_in_a_data_folder_whose_name_holds_a_parenthesis_and_colon(runner, tmp_path):
    """The record's words were put in by replacing the first "): " of the line, which a folder named
    ``w (x): y`` holds first."""
    from sotakg.cli import cli

    from .conftest import SEED_PAGE

    data = tmp_path / "w (x): y" / "data"
    assert runner.invoke(cli, ["--data", str(data), "import", "markdown", str(SEED_PAGE)]).exit_code == 0
    record = data / "practices" / "SOTA-049.yaml"
    record.write_text(record.read_text(encoding="utf-8").replace("title: ", "title: Not "), encoding="utf-8")
    again = runner.invoke(cli, ["--data", str(data), "import", "markdown", str(SEED_PAGE)])
    assert again.exit_code == 1
    assert f"  {record} (SOTA-049) differs from the page: changed title\n" in again.stderr
