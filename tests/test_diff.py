"""`sotakg diff`: the change between two git revisions (or data folders) in the anthology's terms, in
every format, on temporary repositories with real commits; the SPARQL Update turns BASE's graph into
HEAD's exactly; revisions are read with git's plumbing, never a checkout, and hostile trees stay inert."""

from __future__ import annotations

import json
import os
import re
import shutil
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt
from pyoxigraph import DefaultGraph, NamedNode, RdfFormat, Store

from sotakg.cli import cli
from sotakg.graph.build import build
from sotakg.graph.delta import sparql_update, triple_delta
from sotakg.graph.rdf import anthology_ntriples
from sotakg.graph.store import DATABASE, StoreLayout
from sotakg.records.revisions import load_revision
from sotakg.records.schema import Anthology, Record, load_anthology
from sotakg.resources import ontology_path
from sotakg.views.diff import link_target, markdown_code, markdown_text, printable, record_changes

from .conftest import NO_CREDENTIALS, SHIPPED_DATA, SHIPPED_TRIPLES
from .gitrepo import commit, empty_repository, git, isolate_git, new_repository, set_fields
from .servers import closed_port, oxigraph


@dataclass
class History:
    """A repository with a base commit, a change commit, and a merge commit on top."""

    repo: Path
    base: str
    change: str
    main_only: str
    merge: str

    def short(self, commit_id: str) -> str:
        return commit_id[:12]


def make_change(data: Path) -> None:
    """One pull request's worth of curation: every kind of change the diff reports."""
    practices = data / "practices"
    set_fields(practices / "SOTA-047.yaml", status="Rejected", reason="folded into SOTA-048", reason_names="[SOTA-048]")
    (practices / "SOTA-999.yaml").write_text(
        "id: SOTA-999\nversion: 1\ntitle: Shard the optimizer state\nstatus: Proposed\n"
        "topic: distributed-optimization\n",
        encoding="utf-8",
    )
    set_fields(practices / "SOTA-048.yaml", version="2")
    set_fields(practices / "SOTA-018.yaml", title="Balance pipeline stages")
    set_fields(practices / "SOTA-017.yaml", cites="[LIT-016, LIT-051]")
    (practices / "SOTA-049.yaml").rename(practices / "SOTA-049.yml")  # renamed; a file keeps its id as its name
    (practices / "SOTA-437.yaml").unlink()
    set_fields(data / "papers" / "LIT-083.yaml", year="2023")
    set_fields(data / "adrs" / "ADR-026.yaml", status="Superseded", superseded_by="ADR-059")
    set_fields(data / "adrs" / "ADR-059.yaml", status="Accepted", supersedes="[ADR-026]")
    set_fields(data / "topics" / "distributed-optimization.yaml", declared_size="43")


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> Iterator[History]:
    with pytest.MonkeyPatch.context() as monkeypatch:
        isolate_git(monkeypatch)
        repo = new_repository(tmp_path_factory.mktemp("diff") / "anthology")
        base = git(repo, "rev-parse", "HEAD").strip()
        make_change(repo / "data")
        change = commit(repo, "reject SOTA-047, add SOTA-999, supersede ADR-026, ...")
        git(repo, "checkout", "-q", "-b", "feature")
        (repo / "data" / "papers" / "LIT-900.yaml").write_text(
            "id: LIT-900\ntitle: A paper from the branch\nyear: 2025\n", encoding="utf-8"
        )
        commit(repo, "add LIT-900")
        git(repo, "checkout", "-q", "main")
        set_fields(repo / "data" / "practices" / "SOTA-019.yaml", summary="Rewritten on main.")
        main_only = commit(repo, "rewrite SOTA-019's summary")
        git(repo, "merge", "-q", "--no-ff", "-m", "merge feature", "feature")
        merge = git(repo, "rev-parse", "HEAD").strip()
        monkeypatch.chdir(repo)
        yield History(repo, base, change, main_only, merge)


def diff(runner, *args: str):
    return runner.invoke(cli, ["diff", *args])


def test_text_names_each_change(runner, history: History) -> None:
    result = diff(runner, history.base, history.change)
    assert result.exit_code == 0, result.output
    b, c = history.short(history.base), history.short(history.change)
    assert result.output == (
        f"{history.base} ({b}) -> {history.change} ({c}): practices: 1 added, 1 removed, 5 changed; "
        "papers: 1 changed; ADRs: 2 changed; topics: 1 changed (26 triples inserted, 16 deleted)\n"
        "\n"
        "Practices\n"
        "  SOTA-017  cites: +LIT-051\n"
        "  SOTA-018  title: Balance pipeline stages to minimize bubble overhead -> Balance pipeline stages\n"
        "  SOTA-047  status Active -> Rejected; reason: folded into SOTA-048 (names SOTA-048)\n"
        "  SOTA-048  new version: v1 -> v2\n"
        "  SOTA-049  file moved from data/practices/SOTA-049.yaml to data/practices/SOTA-049.yml\n"
        '  SOTA-437  practice removed (was "Store and move model checkpoints losslessly compressed: code the '
        'float exponent as its own stream with an entropy coder alone, and store successive checkpoints…")\n'
        '  SOTA-999  new practice "Shard the optimizer state" (Proposed) cites nothing\n'
        "\n"
        "Papers\n"
        "  LIT-083  year: 2022 -> 2023\n"
        "\n"
        "ADRs\n"
        "  ADR-026  status (none) -> Superseded\n"
        "  ADR-026  superseded by: (none) -> ADR-059\n"
        "  ADR-059  status (none) -> Accepted\n"
        "  ADR-059  supersedes: +ADR-026\n"
        "\n"
        "Topics\n"
        "  distributed-optimization  declared size: 42 -> 43\n"
    )


def test_markdown_has_a_summary_line_and_a_table_per_kind_linking_the_files(runner, history: History) -> None:
    result = diff(runner, history.base, history.change, "--format", "markdown", "--link-base", "https://x.test/b/")
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].startswith(f"**sotakg diff** `{history.base} ({history.short(history.base)})` → ")
    assert lines[0].endswith("topics: 1 changed (26 triples inserted, 16 deleted)")
    assert [line for line in lines if line.startswith("### ")] == [
        "### Practices",
        "### Papers",
        "### ADRs",
        "### Topics",
    ]
    assert lines.count("| Record | Change | What |") == 4
    assert (
        "| [SOTA-047](https://x.test/b/data/practices/SOTA-047.yaml) | status | "
        "status Active -> Rejected; reason: folded into SOTA-048 \\(names SOTA-048\\) |" in lines
    )
    assert (
        '| [SOTA-999](https://x.test/b/data/practices/SOTA-999.yaml) | added | new practice "Shard the optimizer '
        'state" \\(Proposed\\) cites nothing |' in lines
    )
    # A removed record has no file in HEAD to link to.
    assert any(line.startswith("| SOTA-437 | removed | practice removed") for line in lines)
    assert "| [LIT-083](https://x.test/b/data/papers/LIT-083.yaml) | year | year: 2022 -> 2023 |" in lines


def test_an_edit_past_the_cut_is_in_view_and_a_whitespace_edit_is_named() -> None:
    from sotakg.views.diff import CELL_CHARS, Change, describe

    shared = "word " * 60  # 300 characters the two sides share
    shown = describe(Change("practice", "SOTA-001", "summary", shared + "before the end.", shared + "after the end."))
    was, now = shown.removeprefix("summary: ").split(" -> ")
    assert was != now
    assert was.startswith("…") and was.endswith("before the end.") and now.endswith("after the end.")
    # from 40 characters before the first difference: what the two share is shown just before it
    assert (
        was == "…" + (shared + "before the end.")[len(shared) - 40 :]
        and now == "…" + (shared + "after the end.")[len(shared) - 40 :]
    )
    assert len(was) <= CELL_CHARS and len(now) <= CELL_CHARS
    # a difference inside the cut needs no window
    assert describe(Change("paper", "LIT-001", "title", "A b", "A c")) == "title: A b -> A c"
    assert describe(Change("paper", "LIT-001", "title", "A  b", "A b")) == "title: only whitespace changed"


def test_an_added_record_shows_its_claim_and_its_reason() -> None:
    from sotakg.views.diff import Change, describe

    fields = {"title": "T", "status": "Rejected", "summary": "Do x.", "reason": "folded into SOTA-002", "cites": []}
    assert describe(Change("practice", "SOTA-001", "added", None, fields)) == (
        'new practice "T" (Rejected) cites nothing; summary: Do x.; reason: folded into SOTA-002'
    )
    topic = {"label": "L", "scope": "what it holds."}
    assert describe(Change("topic", "t", "added", None, topic)) == 'new topic "L"; scope: what it holds.'


def test_markdown_cells_cannot_break_the_table(tmp_path: Path, runner, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    old, new = Path("old"), Path("new")
    (old / "practices").mkdir(parents=True)
    (old / "practices" / "SOTA-001.yaml").write_text("id: SOTA-001\ntitle: plain\n", encoding="utf-8")
    shutil.copytree(old, new)
    (new / "practices" / "SOTA-001.yaml").write_text("id: SOTA-001\ntitle: 'a | b <script> `x`'\n", encoding="utf-8")
    result = diff(runner, "./old", "./new", "--format", "markdown")
    assert result.exit_code == 0, result.output
    # A folder in no repository: links start at the data folder, whatever the working directory.
    assert result.output.splitlines()[-1] == (
        "| [SOTA-001](practices/SOTA-001.yaml) | title | title: plain -> a \\| b &lt;script> \\`x\\` |"
    )


def hostile_repository(root: Path, monkeypatch: pytest.MonkeyPatch, name: str = "SOTA-777.yaml") -> tuple[Path, str]:
    """A repository whose second commit adds SOTA-777 (in the file ``name``) with a title of Markdown
    links, images, emphasis and HTML; the working directory is its top. (Control characters cannot
    reach a title: the records stage refuses them, so they are tried in file names.)"""
    isolate_git(monkeypatch)
    repo = new_repository(root)
    (repo / "data" / "practices" / name).write_text(
        'id: SOTA-777\nversion: 1\ntitle: "![img](http://evil/x.png) [click](http://evil) *b* <b>&amp; '
        '`x` ~~s~~ | $m$"\nstatus: Proposed\ntopic: distributed-optimization\n',
        encoding="utf-8",
    )
    commit(repo, "a hostile title")
    monkeypatch.chdir(repo)
    return repo, name


HOSTILE_NAME = "a\n\n# HACKED <img src=x onerror=alert(1)>\x1b[2J\u202e\n\nb.yaml"


def test_markdown_escapes_every_value_and_encodes_links(runner, tmp_path: Path, monkeypatch) -> None:
    hostile_repository(tmp_path / "repo", monkeypatch)
    result = diff(runner, "HEAD~1", "HEAD", "--format", "markdown", "--link-base", "https://x.test/(b)/")
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    # One summary line, one table: nothing a value holds starts a line of its own.
    assert len(lines) == 7
    assert lines[-1] == (
        "| [SOTA-777](https://x.test/%28b%29/data/practices/SOTA-777.yaml) | added | new practice "
        '"\\!\\[img\\]\\(http:&#8203;//evil/x.png\\) \\[click\\]\\(http:&#8203;//evil\\) \\*b\\* &lt;b>&amp;amp; '
        '\\`x\\` \\~\\~s\\~\\~ \\| \\$m\\$" \\(Proposed\\) cites nothing |'
    )


def test_a_hostile_file_name_is_shown_with_its_control_characters_escaped(runner, tmp_path: Path, monkeypatch) -> None:
    repo, name = hostile_repository(tmp_path / "repo", monkeypatch, HOSTILE_NAME)
    for args in (("HEAD~1", "HEAD"), ("HEAD~1", "HEAD", "--format", "markdown")):
        result = diff(runner, *args)
        assert result.exit_code == 1
        # The file is refused (it is not named after its id), and its name shows on one line.
        assert "data/practices/a\\x0a\\x0a# HACKED <img src=x onerror=alert(1)>\\x1b[2J\\u202e\\x0a\\x0ab.yaml" in (
            result.output
        )
        assert not any(character in result.output for character in "\x1b\u202e")
        assert "\n# HACKED" not in result.output


COMMONMARK = MarkdownIt("commonmark").enable(["table", "strikethrough"])
MARKDOWN_TRAPS = ["![i](http://e/x.png)", "[c](http://e)", "<http://e>", "<b>x</b>", "&lt;", "&#x41;", "`c`"]
MARKDOWN_TRAPS += ["*e* _e_ ~~s~~", "a | b", "\\|", "x\\", "$m$", "\x1b[2J", "a\nb", "[x]: http://e", "  "]
MARKDOWN_TRAPS += ["@octocat", "cc @org/team", "a@b.example", "fixes #1", "o/r#12", "GH-7", "www.e.example", "ftp://e"]
#: What GitHub makes a mention, an issue link or a link of, in a comment's text.
GITHUB_AUTOLINKS = re.compile(r"@[A-Za-z0-9_-]|#[0-9]|GH-[0-9]|://|www\.", re.IGNORECASE)


@settings(max_examples=300, deadline=None)
@given(text=st.text() | st.sampled_from(MARKDOWN_TRAPS))
def test_markdown_cell_text_renders_as_the_text_itself(text: str) -> None:
    tokens = COMMONMARK.parse(f"| a |\n|---|\n| {markdown_text(text)} |\n")
    assert [t.type for t in tokens][:2] == ["table_open", "thead_open"]
    cell = [t for t in tokens if t.type == "inline"][1]
    assert [child.type for child in cell.children or []] in ([], ["text"])
    shown = "".join(child.content for child in cell.children or [])
    # the text itself, but for zero-width spaces where GitHub would make a mention or a link
    assert shown.replace("\u200b", "").strip() == printable(text).replace("\u200b", "").strip()
    assert not GITHUB_AUTOLINKS.search(shown)


@settings(max_examples=300, deadline=None)
@given(text=st.text(min_size=1) | st.sampled_from(MARKDOWN_TRAPS), path=st.text(min_size=1))
def test_markdown_code_spans_and_links_hold_any_value(text: str, path: str) -> None:
    code = COMMONMARK.parseInline(markdown_code(text))[0].children or []
    assert [child.type for child in code] == ["code_inline"]
    assert code[0].content == printable(text) or not printable(text).strip()
    link = COMMONMARK.parseInline(f"[SOTA-1]({link_target('https://x.test/(b)/', path)})")[0].children or []
    assert [child.type for child in link] == ["link_open", "text", "link_close"]
    href = link[0].attrs["href"]
    assert href.startswith("https://x.test/%28b%29/")
    assert urllib.parse.unquote(href.removeprefix("https://x.test/%28b%29/"), errors="surrogateescape") == path


def test_json_lists_every_change_with_its_values(runner, history: History) -> None:
    result = diff(runner, history.base, history.change, "--format", "json")
    document = json.loads(result.output)
    assert document["counts"] == {
        "practice": {"added": 1, "removed": 1, "changed": 5},
        "paper": {"added": 0, "removed": 0, "changed": 1},
        "adr": {"added": 0, "removed": 0, "changed": 2},
        "topic": {"added": 0, "removed": 0, "changed": 1},
    }
    assert document["triples"] == {"deleted": 16, "inserted": 26}
    by_record = {(c["record"], c["change"]): c for c in document["changes"]}
    assert by_record[("SOTA-047", "status")] == {
        "kind": "practice",
        "record": "SOTA-047",
        "change": "status",
        "before": "Active",
        "after": "Rejected",
        "file": "data/practices/SOTA-047.yaml",
        "reason": "folded into SOTA-048",
        "reason_names": ["SOTA-048"],
    }
    assert by_record[("SOTA-999", "added")]["after"] == {
        "id": "SOTA-999",
        "version": 1,
        "title": "Shard the optimizer state",
        "status": "Proposed",
        "topic": "distributed-optimization",
    }
    assert by_record[("SOTA-017", "cites")]["before"] == ["LIT-016"]
    assert by_record[("SOTA-017", "cites")]["after"] == ["LIT-016", "LIT-051"]
    assert by_record[("SOTA-437", "removed")]["after"] is None
    assert by_record[("ADR-026", "superseded_by")]["after"] == "ADR-059"
    assert len(document["changes"]) == 13


def graph_of(anthology: Anthology) -> Store:
    store = Store()
    store.bulk_load(path=str(ontology_path()), format=RdfFormat.TURTLE)
    store.bulk_load(anthology_ntriples(anthology), format=RdfFormat.N_TRIPLES)
    return store


def triples_of(store: Store) -> set:
    return {(q.subject, q.predicate, q.object) for q in store.quads_for_pattern(None, None, None, DefaultGraph())}


def test_sparql_update_applied_to_base_store_gives_head_triples(runner, history: History, tmp_path: Path) -> None:
    result = diff(runner, history.base, history.change, "--format", "sparql-update")
    assert result.exit_code == 0, result.output
    assert result.output.startswith("DELETE DATA {\n") and " ;\nINSERT DATA {\n" in result.output
    # BASE's real store, built by `sotakg build` from BASE's data folder (a copy of the base commit's).
    base_data = tmp_path / "base-data"
    git(history.repo, "worktree", "add", "-q", "--detach", str(tmp_path / "base-tree"), history.base)
    shutil.copytree(tmp_path / "base-tree" / "data", base_data)
    git(history.repo, "worktree", "remove", "--force", str(tmp_path / "base-tree"))
    build(base_data, tmp_path / "store")
    generation = StoreLayout(tmp_path / "store").current_generation()
    assert generation is not None
    store = Store(str(generation / DATABASE))
    before = triples_of(store)
    store.update(result.output)
    head = load_revision(history.repo / "data", history.change).anthology
    assert triples_of(store) == triples_of(graph_of(head))
    assert triples_of(store) != before
    del store


def test_sparql_update_into_a_named_graph(runner, history: History) -> None:
    result = diff(runner, history.base, history.change, "--format", "sparql-update", "--graph", "https://x.test/g")
    base = load_revision(history.repo / "data", history.base).anthology
    head = load_revision(history.repo / "data", history.change).anthology
    store = Store()
    graph = NamedNode("https://x.test/g")
    store.load(anthology_ntriples(base), format=RdfFormat.N_TRIPLES, to_graph=graph)
    store.update(result.output)
    expected = Store()
    expected.load(anthology_ntriples(head), format=RdfFormat.N_TRIPLES, to_graph=graph)
    assert set(store) == set(expected)
    assert diff(runner, history.base, "--format", "sparql-update", "--graph", "not an iri").exit_code == 2


TEXT = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=40).filter(
    lambda s: s.strip()
)


STATUS = st.sampled_from(["Active", "Proposed", "Rejected"])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    before=st.lists(
        st.tuples(st.integers(1, 30), TEXT, st.sampled_from(["Active", "Proposed", "Rejected"])), max_size=6
    ),
    after=st.lists(
        st.tuples(st.integers(1, 30), TEXT, st.sampled_from(["Active", "Proposed", "Rejected"])), max_size=6
    ),
)
def test_sparql_update_round_trips_any_values(before, after) -> None:
    def anthology(rows) -> Anthology:
        records = {}
        for number, title, status in rows:
            record_id = f"SOTA-{number:03d}"
            fields = {"id": record_id, "version": number % 3 + 1, "title": title, "status": status}
            if status == "Rejected":
                fields["reason"] = title + " SOTA-001"
            records[record_id] = Record("practice", record_id, fields)
        return Anthology(list(records.values()))

    base, head = anthology(before), anthology(after)
    store = graph_of(base)
    store.update(sparql_update(triple_delta(base, head)))
    assert triples_of(store) == triples_of(graph_of(head))


def test_working_tree_is_the_default_head_and_is_left_alone(runner, history: History) -> None:
    status_before = git(history.repo, "status", "--porcelain=v1", "--untracked-files=all")
    head_before = git(history.repo, "rev-parse", "HEAD")
    sota = history.repo / "data" / "practices" / "SOTA-030.yaml"
    original = sota.read_text(encoding="utf-8")
    try:
        set_fields(sota, status="Proposed")
        result = diff(runner, "HEAD")
        assert result.exit_code == 0, result.output
        assert result.output.splitlines()[0].endswith(
            "-> working tree (data): practices: 1 changed (1 triple inserted, 1 deleted)"
        )
        assert "  SOTA-030  status Active -> Proposed\n" in result.output
        assert git(history.repo, "rev-parse", "HEAD") == head_before
        assert git(history.repo, "status", "--porcelain=v1", "--untracked-files=all") == (
            " M data/practices/SOTA-030.yaml\n" + status_before
        )
    finally:
        sota.write_text(original, encoding="utf-8")


def test_merge_commit_against_each_parent(runner, history: History) -> None:
    first = diff(runner, history.main_only, history.merge)
    assert first.output.splitlines()[2:] == ["Papers", '  LIT-900  new paper "A paper from the branch"']
    both = diff(runner, f"{history.merge}^2", history.merge)
    assert both.output.splitlines()[2:] == [
        "Practices",
        "  SOTA-019  summary: Huang et al. (2018), LIT-016 — ARXIV-1811.06965. -> Rewritten on main.",
    ]


def test_the_same_revision_is_no_change(runner, history: History) -> None:
    result = diff(runner, history.base, history.base, "--format", "sparql-update")
    assert result.output == "# no change: the two graphs hold the same triples\n"
    text = diff(runner, "main", "main")
    assert text.output.endswith(": no change to the anthology\n")


def test_two_data_folders_need_no_git(runner, tmp_path: Path) -> None:
    old = tmp_path / "old"
    shutil.copytree(SHIPPED_DATA, old)
    new = tmp_path / "new"
    shutil.copytree(old, new)
    (new / "papers" / "LIT-083.yaml").unlink()
    result = runner.invoke(cli, ["--data", str(tmp_path / "nowhere"), "diff", str(old), str(new)])
    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[2:] == ["Papers", "  LIT-083  paper removed"]


def test_missing_revision_and_folder_outside_git_are_clear_errors(runner, history: History, tmp_path: Path) -> None:
    missing = diff(runner, "no-such-branch")
    assert missing.exit_code == 2
    assert "no revision 'no-such-branch' in the repository" in missing.output
    dashed = diff(runner, "--", "-n")
    assert dashed.exit_code == 2 and "is not a git revision" in dashed.output
    outside = tmp_path / "outside" / "data"
    shutil.copytree(history.repo / "data", outside)
    result = runner.invoke(
        cli, ["--data", str(outside), "diff", "HEAD"], env={"GIT_CEILING_DIRECTORIES": str(tmp_path)}
    )
    assert result.exit_code == 2
    assert "is not in a git repository, so it has no revisions" in result.output
    assert "Traceback" not in result.output


def test_a_revision_without_the_data_folder(runner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    isolate_git(monkeypatch)
    repo = empty_repository(tmp_path / "repo")
    (repo / "README").write_text("x\n", encoding="utf-8")
    first = commit(repo, "no data yet")
    shutil.copytree(SHIPPED_DATA, repo / "data")
    monkeypatch.chdir(repo)
    result = diff(runner, first)
    assert result.exit_code == 2
    assert "has no folder data" in result.output


def test_unreadable_record_in_a_revision_names_file_and_line(runner, tmp_path: Path, monkeypatch) -> None:
    isolate_git(monkeypatch)
    repo = new_repository(tmp_path / "repo")
    (repo / "data" / "practices" / "SOTA-017.yaml").write_text("id: SOTA-017\ntitle: [unclosed\n", encoding="utf-8")
    broken = commit(repo, "break a record")
    monkeypatch.chdir(repo)
    result = diff(runner, "main~1", broken)
    assert result.exit_code == 1
    assert "data/practices/SOTA-017.yaml:" in result.output and "(SOTA-017)" in result.output
    assert "Traceback" not in result.output


def test_hostile_trees_stay_inert(runner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A committed symbolic link is never followed, and repository attributes cannot rewrite records.
    isolate_git(monkeypatch)
    victim = tmp_path / "victim.yaml"
    victim.write_text("id: SOTA-666\ntitle: secret from outside the data folder\n", encoding="utf-8")
    repo = new_repository(tmp_path / "repo")
    base = git(repo, "rev-parse", "HEAD").strip()
    os.symlink(victim, repo / "data" / "practices" / "SOTA-666.yaml")
    (repo / ".gitattributes").write_text("*.yaml export-subst filter=evil\n", encoding="utf-8")
    set_fields(repo / "data" / "practices" / "SOTA-017.yaml", title="'$Format:%H$'")
    linked = commit(repo, "a link out, and attributes")
    monkeypatch.chdir(repo)
    result = diff(runner, base, linked)
    assert result.exit_code == 1
    assert "data/practices/SOTA-666.yaml: a link to something outside the data folder" in result.output
    assert "secret" not in result.output
    os.unlink(repo / "data" / "practices" / "SOTA-666.yaml")
    unlinked = commit(repo, "drop the link")
    result = diff(runner, linked + "~1", unlinked)
    assert result.exit_code == 0, result.output
    assert "  SOTA-017  title: Use micro-batch splitting for pipeline parallelism -> $Format:%H$\n" in result.output
    assert victim.read_text(encoding="utf-8").startswith("id: SOTA-666")


def test_a_record_name_in_a_revision_that_is_not_utf8_is_an_error(runner, tmp_path: Path, monkeypatch) -> None:
    isolate_git(monkeypatch)
    repo = new_repository(tmp_path / "repo")
    base = git(repo, "rev-parse", "HEAD").strip()
    odd = os.fsencode(repo / "data" / "practices") + b"/SOTA-\xff.yaml"
    with open(odd, "wb") as handle:
        handle.write((repo / "data" / "practices" / "SOTA-049.yaml").read_bytes())
    named = commit(repo, "a record under a name that is not UTF-8")
    os.unlink(odd)
    monkeypatch.chdir(repo)
    result = diff(runner, base, named)
    assert result.exit_code == 1
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert (
        "data/practices/SOTA-\\xff.yaml: a name that is not UTF-8 (shown here with \\x escapes); rename it: "
        "sotakg reads names as UTF-8 (SOTA-\\xff)" in result.output
    )


def test_a_folder_named_like_base_is_never_taken_for_it(runner, tmp_path: Path, monkeypatch) -> None:
    # A pull request can commit folders named like the base commit, or origin/main: BASE stays the revision.
    isolate_git(monkeypatch)
    repo = new_repository(tmp_path / "repo")
    base = git(repo, "rev-parse", "HEAD").strip()
    (repo / "data" / "practices" / "SOTA-999.yaml").write_text(
        "id: SOTA-999\nversion: 1\ntitle: Sneaked in\nstatus: Proposed\ntopic: distributed-optimization\n",
        encoding="utf-8",
    )
    for decoy in (base, "origin/main", "nosuch"):
        shutil.copytree(repo / "data", repo / decoy)
    commit(repo, "SOTA-999, and decoy folders")
    monkeypatch.chdir(repo)
    result = diff(runner, base)
    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[2:] == [
        "Practices",
        '  SOTA-999  new practice "Sneaked in" (Proposed) cites nothing',
    ]
    git(repo, "update-ref", "refs/remotes/origin/main", base)
    assert diff(runner, "origin/main").output == result.output.replace(f"{base} (", "origin/main (", 1)
    # A name that is no revision is refused, even with a folder of that name, which is only ever
    # taken when written as a path.
    refused = diff(runner, "nosuch")
    assert refused.exit_code == 2
    assert "no revision 'nosuch'" in refused.output
    assert (
        "a folder named 'nosuch' is not taken for a revision: to compare with that data folder, "
        "write it as a path (./nosuch)" in " ".join(refused.output.split())
    )
    explicit = diff(runner, "./nosuch")
    assert (explicit.exit_code, explicit.output) == (0, "nosuch -> working tree (data): no change to the anthology\n")
    # publish --since reads BASE by the same rule: refused before any connection is tried.
    port = closed_port()
    since = runner.invoke(
        cli, ["publish", "--endpoint", f"http://127.0.0.1:{port}/store", "--since", "nosuch"], env=NO_CREDENTIALS
    )
    assert since.exit_code == 2
    assert "no revision 'nosuch'" in since.output


def test_an_empty_base_is_no_revision(runner, history: History) -> None:
    for args in ([""], ["HEAD", ""], [" "]):
        result = diff(runner, *args)
        assert result.exit_code == 2, args
        assert f"Error: {args[-1]!r} is not a git revision; give a branch, tag or commit" in result.output
    port = closed_port()
    since = runner.invoke(cli, ["publish", "--endpoint", f"http://127.0.0.1:{port}/store", "--since", ""])
    assert since.exit_code == 2
    assert "'' is not a git revision" in since.output


def test_a_file_name_too_long_for_the_disk_is_named_as_in_the_revision(runner, tmp_path: Path, monkeypatch) -> None:
    # Git holds names no file system takes (over 255 bytes); the revision is read without writing one.
    isolate_git(monkeypatch)
    repo = new_repository(tmp_path / "repo")
    long_name = "SOTA-778" + "0" * 291 + ".yaml"  # named after its id, as every record file is
    record = repo / "record.yaml"
    record.write_text(
        f"id: {long_name[:-5]}\nversion: 1\ntitle: A long name\nstatus: Proposed\ntopic: distributed-optimization\n",
        encoding="utf-8",
    )
    blob = git(repo, "hash-object", "-w", str(record)).strip()
    record.unlink()
    git(repo, "update-index", "--add", "--cacheinfo", f"100644,{blob},data/practices/{long_name}")
    git(repo, "commit", "-q", "-m", "a long file name")
    monkeypatch.chdir(repo)
    # An id is at most 128 characters, so a record of a name that long cannot be well named: the
    # refusal names the file as the revision holds it, never a temporary path.
    result = diff(runner, "HEAD~1", "HEAD")
    assert result.exit_code == 1
    assert f"data/practices/{long_name}:1:" in result.output
    assert "sotakg-revision" not in result.output and "File name too long" not in result.output
    (repo / "bad.yaml").write_text("id: SOTA-779\ntitle: [\n", encoding="utf-8")
    blob = git(repo, "hash-object", "-w", str(repo / "bad.yaml")).strip()
    (repo / "bad.yaml").unlink()
    git(repo, "update-index", "--add", "--cacheinfo", f"100644,{blob},data/practices/SOTA-779{'y' * 291}.yaml")
    git(repo, "rm", "-q", "--cached", f"data/practices/{long_name}")
    git(repo, "commit", "-q", "-m", "a long, broken file")
    broken = diff(runner, "HEAD~2", "HEAD")
    assert broken.exit_code == 1
    assert f"data/practices/SOTA-779{'y' * 291}.yaml:3:" in broken.output
    assert "sotakg-revision" not in broken.output and "File name too long" not in broken.output


def test_links_start_at_the_repository_top_whatever_the_working_directory(runner, tmp_path: Path, monkeypatch) -> None:
    isolate_git(monkeypatch)
    # The data folder is the repository's top, reached from its parent by a name with a space.
    top = tmp_path / "r7 sp"
    top.mkdir()
    git(top, "init", "-q", "-b", "main")
    shutil.copytree(SHIPPED_DATA, top, dirs_exist_ok=True)
    commit(top, "the anthology at the top")
    set_fields(top / "practices" / "SOTA-047.yaml", status="Rejected", reason="folded into SOTA-048")
    commit(top, "reject SOTA-047")
    set_fields(top / "practices" / "SOTA-048.yaml", version="2")
    monkeypatch.chdir(tmp_path)
    wanted = {
        "| [SOTA-047](https://x/practices/SOTA-047.yaml) | status | "
        "status Active -> Rejected; reason: folded into SOTA-048 |",
        "| [SOTA-048](https://x/practices/SOTA-048.yaml) | version | new version: v1 -> v2 |",
    }
    for data in ("r7 sp", str(top)):
        result = runner.invoke(
            cli, ["--data", data, "diff", "HEAD~1", "--format", "markdown", "--link-base", "https://x/"]
        )
        assert result.exit_code == 0, result.output
        assert {line for line in result.output.splitlines() if line.startswith("| [")} == wanted
    # The data folder below the top, named from outside the repository by an absolute path.
    repo = new_repository(tmp_path / "repo")
    set_fields(repo / "data" / "practices" / "SOTA-048.yaml", version="2")
    result = runner.invoke(
        cli, ["--data", str(repo / "data"), "diff", "HEAD", "--format", "markdown", "--link-base", "https://x/"]
    )
    assert result.output.splitlines()[-1] == (
        "| [SOTA-048](https://x/data/practices/SOTA-048.yaml) | version | new version: v1 -> v2 |"
    )


def test_record_changes_match_records_by_identifier_not_file() -> None:
    one = Record("paper", "LIT-1", {"id": "LIT-1", "title": "A"}, "papers/a.yaml")
    moved = Record("paper", "LIT-1", {"id": "LIT-1", "title": "A"}, "papers/b.yaml")
    renamed = Record("paper", "LIT-2", {"id": "LIT-2", "title": "A"}, "papers/a.yaml")
    assert [c.change for c in record_changes(Anthology([one]), Anthology([moved]))] == ["file"]
    assert [(c.record, c.change) for c in record_changes(Anthology([one]), Anthology([renamed]))] == [
        ("LIT-1", "removed"),
        ("LIT-2", "added"),
    ]


def test_load_anthology_of_a_revision_equals_the_checked_out_folder(history: History, tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    git(history.repo, "worktree", "add", "-q", "--detach", str(tree), history.change)
    try:
        on_disk = load_anthology(tree / "data")
        from_git = load_revision(history.repo / "data", history.change).anthology
        assert sorted((r.kind, r.id, tuple(r.fields.items()).__repr__()) for r in on_disk.records) == sorted(
            (r.kind, r.id, tuple(r.fields.items()).__repr__()) for r in from_git.records
        )
    finally:
        git(history.repo, "worktree", "remove", "--force", str(tree))


# ------------------------------------------------------------------------------------ publish --since


GRAPH = "https://example.org/graphs/sotakg"


def count(base: str, graph: str) -> int:
    """Triples in ``graph`` on the server, asked over HTTP."""
    query = urllib.parse.quote(f"SELECT (COUNT(*) AS ?n) WHERE {{ GRAPH <{graph}> {{ ?s ?p ?o }} }}")
    request = urllib.request.Request(
        f"{base}/query?query={query}", headers={"Accept": "application/sparql-results+json"}
    )
    with urllib.request.urlopen(request, timeout=10) as answer:
        return int(json.load(answer)["results"]["bindings"][0]["n"]["value"])


def server_triples(base: str) -> set:
    """The server's default graph, fetched over HTTP, as a set of N-Triples lines."""
    request = urllib.request.Request(f"{base}/store?default", headers={"Accept": "application/n-triples"})
    with urllib.request.urlopen(request, timeout=10) as answer:
        return {line for line in answer.read().decode("utf-8").split("\n") if line}


def test_publish_since_sends_the_change_when_the_server_holds_base(runner, tmp_path, monkeypatch) -> None:
    isolate_git(monkeypatch)
    repo = new_repository(tmp_path / "repo")
    monkeypatch.chdir(repo)
    with oxigraph(tmp_path / "db") as server:
        endpoint = f"{server}/store"
        first = runner.invoke(cli, ["publish", "--endpoint", endpoint], env=NO_CREDENTIALS)
        assert first.exit_code == 0, first.output
        set_fields(repo / "data/practices/SOTA-047.yaml", status="Rejected", reason="folded into SOTA-048")
        (repo / "data/papers/LIT-083.yaml").unlink()
        commit(repo, "reject SOTA-047, drop LIT-083")
        since = runner.invoke(cli, ["publish", "--endpoint", endpoint, "--since", "main~1"], env=NO_CREDENTIALS)
        assert since.exit_code == 0, since.output
        assert since.stdout == (
            f"Updated the default graph at {server}/update: 3 triples inserted, 6 deleted (HTTP 204) in "
            + since.stdout.rsplit(" in ", 1)[1]
        )
        updated = server_triples(server)
        # The update made exactly what a full publish of HEAD makes.
        full = runner.invoke(cli, ["publish", "--endpoint", endpoint], env=NO_CREDENTIALS)
        assert full.exit_code == 0, full.output
        assert updated == server_triples(server)
        assert any("folded into SOTA-048" in line for line in updated)
        # The server now holds HEAD, not main~1: the update would be wrong, so all of it is sent.
        again = runner.invoke(cli, ["publish", "--endpoint", endpoint, "--since", "main~1"], env=NO_CREDENTIALS)
        assert again.exit_code == 0, again.output
        held = SHIPPED_TRIPLES - 3  # the edit took out 6 triples and put in 3
        assert again.stdout.startswith(f"The server's graph is not BASE's (it holds {held} triples, 3 of them not")
        assert f"published the whole graph instead.\nPublished {held} triples" in again.stdout
        assert server_triples(server) == updated
        # Nothing changed since HEAD: nothing is sent.
        same = runner.invoke(cli, ["publish", "--endpoint", endpoint, "--since", "main"], env=NO_CREDENTIALS)
        assert same.stdout == f"The default graph already holds this graph; nothing sent to {server}/update.\n"


def test_publish_since_falls_back_when_the_server_has_no_graph(runner, tmp_path, monkeypatch) -> None:
    isolate_git(monkeypatch)
    repo = new_repository(tmp_path / "repo")
    monkeypatch.chdir(repo)
    with oxigraph(tmp_path / "db") as server:
        named = ["--graph", GRAPH, "--since", "main"]
        result = runner.invoke(cli, ["publish", "--endpoint", f"{server}/store", *named], env=NO_CREDENTIALS)
        assert result.exit_code == 0, result.output
        assert result.stdout.startswith("The server's graph is not BASE's (it has no such graph)")
        assert count(server, GRAPH) == SHIPPED_TRIPLES


def test_publish_since_falls_back_with_the_options_given(runner, tmp_path, monkeypatch) -> None:
    """The full publish a --since falls back to swaps at the --update-endpoint given, not the one it
    would guess, and honours --no-swap."""
    isolate_git(monkeypatch)
    monkeypatch.chdir(new_repository(tmp_path / "repo"))
    with oxigraph(tmp_path / "db") as server:
        elsewhere = f"http://127.0.0.1:{closed_port()}/update"
        args = ["publish", "--endpoint", f"{server}/store", "--graph", GRAPH, "--since", "main"]
        swapped = runner.invoke(cli, [*args, "--update-endpoint", elsewhere], env=NO_CREDENTIALS)
        assert swapped.exit_code == 1
        assert f"connection refused by {elsewhere.split('/')[2]}" in swapped.output
        assert count(server, GRAPH) == 0
        put = runner.invoke(cli, [*args, "--no-swap"], env=NO_CREDENTIALS)
        assert put.exit_code == 0, put.output
        assert put.stdout.startswith("The server's graph is not BASE's (it has no such graph)")
        assert ", in one PUT " in put.stdout
        assert count(server, GRAPH) == SHIPPED_TRIPLES


def test_publish_since_needs_an_update_endpoint_it_can_tell(runner, tmp_path, monkeypatch) -> None:
    isolate_git(monkeypatch)
    monkeypatch.chdir(new_repository(tmp_path / "repo"))
    port = closed_port()
    args = ["publish", "--endpoint", f"http://127.0.0.1:{port}/graphs", "--since", "main"]
    result = runner.invoke(cli, args, env=NO_CREDENTIALS)
    assert result.exit_code == 2
    assert "give it with --update-endpoint" in result.output


# ------------------------------------------------------------ repositories a pull request could plant


def plant_bare_repository(data: Path, config: str) -> None:
    """Files that make git take ``data`` for a bare repository, with ``config`` as its configuration."""
    for folder in ("objects/info", "refs/heads"):
        (data / folder).mkdir(parents=True, exist_ok=True)
        (data / folder / "keep").write_text("", encoding="utf-8")
    (data / "HEAD").write_text("ref: refs/heads/main\n", encoding="utf-8")
    (data / "config").write_text(config, encoding="utf-8")


def test_a_bare_repository_committed_in_the_data_folder_runs_no_command(runner, tmp_path: Path, monkeypatch) -> None:
    # Taken for the data folder's repository, this config makes git run a promisor remote's
    # uploadpack command the moment it misses an object (the base commit): it must never be read.
    isolate_git(monkeypatch)
    repo = new_repository(tmp_path / "repo")
    base = git(repo, "rev-parse", "HEAD").strip()
    ran = tmp_path / "command-ran"
    plant_bare_repository(
        repo / "data",
        "[core]\n\trepositoryformatversion = 1\n\tworktree = .\n[extensions]\n\tpartialClone = origin\n"
        f'[remote "origin"]\n\turl = .\n\tpromisor = true\n\tuploadpack = "touch {ran}; false"\n',
    )
    commit(repo, "a pull request")
    monkeypatch.chdir(repo)
    endpoint = f"http://127.0.0.1:{closed_port()}/store"
    for args in (
        ["diff", base],
        ["validate", "--baseline", base],
        ["publish", "--endpoint", endpoint, "--since", base],
    ):
        result = runner.invoke(cli, args, env=NO_CREDENTIALS)
        assert result.exit_code == 2, (args, result.output)
        assert "for a bare repository (it holds HEAD, objects/ and refs/)" in result.output
        assert not ran.exists(), args


def test_a_bare_repository_in_the_data_folder_cannot_stand_in_for_the_base(runner, tmp_path: Path, monkeypatch) -> None:
    # The planted repository maps the base commit (refs/replace) to a commit of the pull request's own
    # records: read through it, a new violation would count as "unchanged" against the base.
    isolate_git(monkeypatch)
    repo = new_repository(tmp_path / "repo")
    base = git(repo, "rev-parse", "HEAD").strip()
    practice = repo / "data" / "practices" / "SOTA-017.yaml"
    set_fields(practice, status="Rejected")  # a rejection without its reason: a new violation
    forged = git(repo, "commit-tree", "-m", "forged", git(repo, "write-tree", "--prefix=data/").strip()).strip()
    scratch = tmp_path / "scratch.git"
    git(tmp_path, "init", "-q", "--bare", str(scratch))
    git(repo, "push", "-q", str(scratch), f"{forged}:refs/heads/forged")
    plant_bare_repository(repo / "data", "[core]\n\trepositoryformatversion = 0\n\tworktree = .\n")
    shutil.copytree(scratch / "objects", repo / "data" / "objects", dirs_exist_ok=True)
    (repo / "data" / "refs" / "replace").mkdir()
    (repo / "data" / "refs" / "replace" / base).write_text(forged + "\n", encoding="utf-8")
    commit(repo, "a pull request")
    monkeypatch.chdir(repo)
    result = runner.invoke(cli, ["validate", "--baseline", base, "--format", "json"])
    assert result.exit_code == 2, result.output
    assert "for a bare repository" in result.output
    assert "unchanged" not in result.output


def test_a_replace_ref_does_not_change_what_a_revision_holds(runner, tmp_path: Path, monkeypatch) -> None:
    isolate_git(monkeypatch)
    repo = new_repository(tmp_path / "repo")
    base = git(repo, "rev-parse", "HEAD").strip()
    set_fields(repo / "data" / "practices" / "SOTA-017.yaml", title="A changed title")
    head = commit(repo, "change a title")
    git(repo, "replace", base, head)  # to git's porcelain, BASE now reads as HEAD
    monkeypatch.chdir(repo)
    result = diff(runner, base, head)
    assert result.exit_code == 0, result.output
    assert "SOTA-017  title: Use micro-batch splitting for pipeline parallelism -> A changed title" in result.output


def test_a_partial_clone_fetches_nothing_and_says_what_is_missing(runner, tmp_path: Path, monkeypatch) -> None:
    isolate_git(monkeypatch)
    origin = new_repository(tmp_path / "origin")
    base = git(origin, "rev-parse", "HEAD").strip()
    set_fields(origin / "data" / "practices" / "SOTA-017.yaml", title="A changed title")
    commit(origin, "change a title")
    git(origin, "config", "uploadpack.allowFilter", "true")
    git(tmp_path, "clone", "-q", "--filter=blob:none", (origin).as_uri(), "clone")
    monkeypatch.chdir(tmp_path / "clone")
    result = diff(runner, base)
    assert result.exit_code == 2, result.output
    assert "(a partial clone), and sotakg fetches nothing; fetch the revision in full first" in result.output
    assert git(tmp_path / "clone", "cat-file", "--batch-check", "--batch-all-objects").count(" blob ") == len(
        [path for path in (origin / "data").rglob("*") if path.is_file()]
    )  # only the checked-out blobs: the base's old record was not fetched


# ------------------------------------------------------------------------------------------ review findings

#: A practice with a new violation: it cites a paper that no record holds.
DANGLING_CITATION = (
    "id: SOTA-998\nversion: 1\ntitle: T\nsummary: S\nstatus: Proposed\ncites: [LIT-9999]\n"
    "topic: distributed-optimization\n"
)


@pytest.fixture
def shipped_repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A repository (branch main) whose first commit holds the shipped data in ``data/``; the working
    directory is its top, and git ignores the machine's configuration."""
    isolate_git(monkeypatch)
    top = new_repository(tmp_path / "shipped_repo")
    monkeypatch.chdir(top)
    return top


def baseline_json(runner, *args: str) -> tuple[int, dict]:
    result = runner.invoke(cli, [*args, "--format", "json"])
    assert result.stdout.startswith("{"), result.output
    return result.exit_code, json.loads(result.stdout)


def test_a_finding_naming_a_file_is_unchanged_whatever_the_working_directory(
    runner, shipped_repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The bug: findings are matched by their message, and some messages name a file as the working
    directory shows it (``identifier SOTA-047 is also used by data/practices/SOTA-047.yaml:1``),
    while BASE's name it from the top of the repository. Run from the data folder
    (``cd data && sotakg --data . validate --baseline main``), or against a data folder elsewhere,
    the same unchanged duplicate id is reported new and the run exits 1.

    The rule: a finding is matched by what it is about, never by where the command runs; an
    unchanged finding is ``unchanged`` from any working directory."""
    shutil.copy(shipped_repo / "data/practices/SOTA-047.yaml", shipped_repo / "data/practices/SOTA-900.yaml")
    commit(shipped_repo, "a duplicate id, already on main")
    # From the top of the repository both findings are already there ...
    _code, document = baseline_json(runner, "validate", "--baseline", "main")
    assert {f["state"] for f in document["findings"]} == {"unchanged"} and len(document["findings"]) == 2
    # ... and so they are from the data folder itself.
    monkeypatch.chdir(shipped_repo / "data")
    arguments = ("--data", ".", "--store", "../.sotakg/store", "validate", "--baseline", "main")
    _code, document = baseline_json(runner, *arguments)
    assert {f["state"] for f in document["findings"]} == {"unchanged"} and len(document["findings"]) == 2


def test_a_committed_link_out_of_the_data_folder_is_not_a_new_finding(
    runner, shipped_repo: Path, tmp_path: Path
) -> None:
    """The bug: a record file that is a symbolic link leading out of the data folder, committed on
    main and untouched since, is reported by the folder reader as "a link to something outside the
    data folder" and by the revision reader as "a symbolic link in this revision"; the messages
    differ, so ``sotakg validate --baseline main`` calls it new and exits 1 on a change that did
    nothing.

    The rule: a file that is the same in BASE and HEAD gives the same finding on both sides
    (``unchanged``), and a change that adds no finding passes."""
    outside = tmp_path / "outside.yaml"
    outside.write_text("id: SOTA-666\ntitle: outside\n", encoding="utf-8")
    os.symlink(outside, shipped_repo / "data/practices/SOTA-666.yaml")
    commit(shipped_repo, "a link out of the data folder, on main")
    code, document = baseline_json(runner, "validate", "--baseline", "main")
    assert [(f["rule"], f["record"], f["state"]) for f in document["findings"]] == [
        ("data-readable", "SOTA-666", "unchanged")
    ]
    assert code == 1  # data that cannot be read fails whatever BASE held


def test_a_record_folder_that_is_a_link_in_a_revision_is_not_silently_empty(runner, shipped_repo: Path) -> None:
    """The bug: a top-level record folder that is a symbolic link inside the data folder
    (``data/papers -> .papers``) is followed by the folder reader, but a revision's ``papers`` entry
    (a link, mode 120000, not named .yaml) is skipped without a word, so the revision reads as one
    with no papers at all. On a clean checkout, ``sotakg diff HEAD`` says "papers: 18 added" and
    exits 0, and ``validate --baseline HEAD`` calls 39 findings fixed.

    The rule: a link where records should be is reported, never followed and never dropped: the
    revision cannot be read (exit 1, naming data/papers), and no paper is called added."""
    papers = shipped_repo / "data/papers"
    papers.rename(shipped_repo / "data/.papers")
    os.symlink(".papers", papers)
    commit(shipped_repo, "papers kept in a hidden folder, linked as papers/")
    assert runner.invoke(cli, ["validate"]).exit_code == 0  # the working tree reads fine
    result = runner.invoke(cli, ["diff", "HEAD"])
    assert "papers: 18 added" not in result.output
    assert result.exit_code == 1, result.output
    assert "data/papers" in result.output


def test_a_record_folder_that_is_a_file_in_a_revision_is_an_error_as_on_disk(runner, shipped_repo: Path) -> None:
    """The bug: a change that replaces the folder ``data/adrs`` with a file is refused by the folder
    reader ("'adrs' must be a folder of record files, not a file"), but the revision reader skips a
    top-level entry not named .yaml, so ``sotakg diff HEAD~1 HEAD`` reports "ADRs: 3 removed" and
    exits 0, while ``sotakg diff HEAD~1`` on the checkout of that very commit exits 1.

    The rule: a revision reads as its checkout does: the same tree that cannot be read on disk
    cannot be read as a revision (exit 1, naming data/adrs)."""
    shutil.rmtree(shipped_repo / "data/adrs")
    (shipped_repo / "data/adrs").write_text("not a folder\n", encoding="utf-8")
    commit(shipped_repo, "adrs/ is a file now")
    on_disk = runner.invoke(cli, ["diff", "HEAD~1"])
    assert on_disk.exit_code == 1 and "'adrs' must be a folder of record files" in on_disk.output
    result = runner.invoke(cli, ["diff", "HEAD~1", "HEAD"])
    assert "ADRs: 3 removed" not in result.output
    assert result.exit_code == 1, result.output
    assert "data/adrs" in result.output


def test_an_unreadable_head_does_not_pass_a_baseline_check(runner, shipped_repo: Path) -> None:
    """The bug: when a file was already unreadable in BASE and still is, HEAD's only finding is that
    file, ``unchanged``; no filing rule runs on HEAD, yet ``sotakg validate --baseline main`` exits 0
    ("failed": false) while saying "the data cannot be read; fix the files named above and run
    again". A change adding a practice that cites a paper that does not exist passes the check.

    The rule: an unreadable HEAD never passes: its rules were not checked, so nothing shows it adds
    no violation (exit 1, as `validate` does for data it cannot read)."""
    with (shipped_repo / "data/practices/SOTA-017.yaml").open("a", encoding="utf-8") as handle:
        handle.write("colour: red\n")  # an unknown field: the file cannot be read
    commit(shipped_repo, "an unreadable record, already on main")
    (shipped_repo / "data/practices/SOTA-998.yaml").write_text(DANGLING_CITATION, encoding="utf-8")
    code, document = baseline_json(runner, "validate", "--baseline", "main")
    assert document["readable"] is False
    assert document["failed"] is True
    assert code == 1


def test_a_base_missing_from_a_shallow_clone_says_the_clone_is_shallow(runner, tmp_path: Path, monkeypatch) -> None:
    """The bug: in a shallow clone (CI's default checkout, depth 1), ``sotakg diff HEAD~1`` says "no
    revision 'HEAD~1' ... fetch it first (git fetch origin HEAD~1)": a command that cannot work (a
    remote has no ref named HEAD~1), and nothing says the clone is shallow.

    The rule: when the revision is missing because the clone is shallow, the message says so and
    how to get the history (git fetch --deepen / --unshallow), as it does for an incomplete tree."""
    isolate_git(monkeypatch)
    origin = new_repository(tmp_path / "origin")
    (origin / "data/papers/LIT-083.yaml").unlink()
    commit(origin, "drop LIT-083")
    git(tmp_path, "clone", "-q", "--depth", "1", origin.as_uri(), "clone")
    monkeypatch.chdir(tmp_path / "clone")
    result = runner.invoke(cli, ["diff", "HEAD~1"])
    assert result.exit_code == 2
    assert "git fetch origin HEAD~1" not in result.output
    assert "shallow" in result.output


def test_the_baseline_cache_is_not_reused_under_another_file_size_limit(runner, shipped_repo: Path) -> None:
    """The bug: BASE's findings depend on the file size limit (``SOTAKG_MAX_FILE_BYTES``: a larger
    file is an unreadable-file finding), but the cache of them is keyed by tree, engine, shapes and
    version only. After one run with a low limit, a run with the default limit reuses the findings of
    an unreadable BASE: ``validate --baseline main`` on an unchanged checkout reports all 8 findings
    new and 23 fixed (without the cache file: 0 new, 8 unchanged).

    The rule: a cached result is reused only where it is the result the run would compute; the
    limit that made BASE's findings is part of what they are cached by."""
    low = runner.invoke(cli, ["validate", "--baseline", "main"], env={"SOTAKG_MAX_FILE_BYTES": "300"})
    assert "cannot be read" in low.output
    code, document = baseline_json(runner, "validate", "--baseline", "main")
    assert document["states"] == {"new": 0, "unchanged": 8, "absent": 0}
    assert code == 0


def test_a_finding_in_an_untouched_file_is_not_new_when_a_copy_is_added(runner, shipped_repo: Path) -> None:
    """The bug: findings that are alike but for their file are matched in report order, not file
    first. BASE has ``SOTA-017.yml`` with an unknown field; the change adds ``SOTA-017.yaml`` with the
    same mistake. The finding in the untouched ``SOTA-017.yml`` is reported new (and annotated by
    ``--format github``), the one in the file the change added is called already there.

    The rule: of findings alike but for their place, one in the same file as BASE's is matched to
    it first: the untouched file's finding is ``unchanged``, the added file's is ``new``."""
    practice = shipped_repo / "data/practices/SOTA-017.yaml"
    practice.write_text(practice.read_text(encoding="utf-8") + "colour: red\n", encoding="utf-8")
    practice.rename(practice.with_suffix(".yml"))
    commit(shipped_repo, "an unreadable SOTA-017.yml, already on main")
    shutil.copy(practice.with_suffix(".yml"), practice)
    code, document = baseline_json(runner, "validate", "--baseline", "main")
    assert sorted((f["file"], f["state"]) for f in document["findings"]) == [
        ("data/practices/SOTA-017.yaml", "new"),
        ("data/practices/SOTA-017.yml", "unchanged"),
    ]
