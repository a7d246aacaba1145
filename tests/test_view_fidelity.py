"""The views say exactly what the graph says: `sotakg diff`, `export view` (DOT/SVG), `export site`.

Each test builds a small data folder of its own under tmp_path: every value is shown as written
(character references and backslashes in SVG labels and tooltips, addresses with parentheses),
each column holds what it names, a note or a cycle the graph records is shown as such, and `diff`
reports every change once in the words of its direction and nothing that did not change. Each
failed on the code before its fix (an adversarial review found them)."""

from __future__ import annotations

import shutil
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path

import pytest

from sotakg.cli import cli

GRAPHVIZ = shutil.which("dot") is not None
SVG = "{http://www.w3.org/2000/svg}"
XLINK_TITLE = "{http://www.w3.org/1999/xlink}title"


def write_records(data: Path, records: dict[str, str]) -> Path:
    """Write ``records`` (path under ``data`` -> YAML text) and return ``data``."""
    for name, text in records.items():
        path = data / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return data


def run(runner, data: Path, store: Path, *args: str):
    return runner.invoke(cli, ["--data", str(data), "--store", str(store), *args])


def svg_node_texts(svg: str) -> dict[str, tuple[list[str], list[str]]]:
    """For each node group of a Graphviz SVG (by its <title>, the node's name): the texts drawn in it
    and the tooltips (xlink:title) it carries, as a reader sees them (XML entities decoded once)."""
    root = ET.fromstring(svg)
    nodes: dict[str, tuple[list[str], list[str]]] = {}
    for group in root.iter(f"{SVG}g"):
        if group.get("class") != "node":
            continue
        name = group.findtext(f"{SVG}title") or ""
        texts = ["".join(t.itertext()) for t in group.iter(f"{SVG}text")]
        tooltips = [a.get(XLINK_TITLE) or "" for a in group.iter(f"{SVG}a")]
        nodes[name] = (texts, tooltips)
    return nodes


# ------------------------------------------------------------------------------------ DOT / SVG


@pytest.mark.skipif(not GRAPHVIZ, reason="needs Graphviz's dot")
def test_svg_draws_a_title_holding_a_character_reference_as_written(runner, tmp_path: Path) -> None:
    """The bug: `_dot_string` (views/diagrams.py) escapes only backslash and quote. Graphviz reads
    `&name;` and `&#N;` in an ordinary label as character references, so a title the data holds as
    `Tips &amp; tricks for &lt;b&gt;` (the importer keeps entities as written) is drawn as
    `Tips & tricks for <b>`: the SVG (and every site page that inlines it) says something other than
    the graph, while the same page's HTML table, the Mermaid source and the grouped DOT tables
    (`_html`) all show the text as written.
    The rule: a view says exactly what the graph says; every value is escaped for its output."""
    title = "Tips &amp; tricks for &lt;b&gt;"
    data = write_records(
        tmp_path / "data",
        {
            "practices/SOTA-001.yaml": "id: SOTA-001\nversion: 1\ntitle: plain\nstatus: Active\ncites: [LIT-001]\n",
            "papers/LIT-001.yaml": f"id: LIT-001\ntitle: '{title}'\nyear: 2020\n",
        },
    )
    result = run(runner, data, tmp_path / "store", "export", "view", "citations", "--format", "svg")
    assert result.exit_code == 0, result.output
    texts, tooltips = svg_node_texts(result.output)["LIT_001"]
    assert title in texts, texts
    assert any(title in tooltip for tooltip in tooltips), tooltips


@pytest.mark.skipif(not GRAPHVIZ, reason="needs Graphviz's dot")
def test_svg_tooltip_shows_a_backslash_escape_in_a_title_as_written(runner, tmp_path: Path) -> None:
    """The bug: `_dot_tooltip` (views/diagrams.py) writes the title through `_dot_string`, which
    doubles each backslash. That is right for a label, but Graphviz expands `\\N`, `\\G`, `\\E`,
    `\\T`, `\\H` in a tooltip before it undoes `\\\\`, so the title `Divide by \\N and \\G` gets the
    tooltip `Divide by SOTA_001 and citations` (the node's and the graph's internal names): a
    tooltip on every node of `export view --format svg` and of the site states a title the graph
    does not hold.
    The rule: a view says exactly what the graph says (the tooltip is the node's id and full title)."""
    title = "Divide by \\N and \\G"
    data = write_records(
        tmp_path / "data",
        {
            "practices/SOTA-001.yaml": (
                f"id: SOTA-001\nversion: 1\ntitle: '{title}'\nstatus: Active\ncites: [LIT-001]\n"
            ),
            "papers/LIT-001.yaml": "id: LIT-001\ntitle: A paper\nyear: 2020\n",
        },
    )
    result = run(runner, data, tmp_path / "store", "export", "view", "citations", "--format", "svg")
    assert result.exit_code == 0, result.output
    texts, tooltips = svg_node_texts(result.output)["SOTA_001"]
    assert title in texts, texts  # the label is right
    assert tooltips == [f"SOTA-001\n{title}"], tooltips


# ------------------------------------------------------------------------------------ the site


class _Cells(HTMLParser):
    """The tables of a page: for each, its header cells and its rows of cell texts."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: list[tuple[list[str], list[list[str]]]] = []
        self._cell: list[str] | None = None
        self._row: list[str] | None = None
        self._header = False

    def handle_starttag(self, tag, attrs):
        if tag == "table":
            self.tables.append(([], []))
        elif tag == "tr":
            self._row = []
        elif tag in ("td", "th"):
            self._cell = []
            self._header = tag == "th"

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None and self._row is not None:
            self._row.append("".join(self._cell).strip())
            self._cell = None
        elif tag == "tr" and self._row is not None and self.tables:
            headers, rows = self.tables[-1]
            if self._header and not headers:
                headers.extend(self._row)
            else:
                rows.append(self._row)
            self._row = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)


def _tables(page: str) -> list[tuple[list[str], list[list[str]]]]:
    parser = _Cells()
    parser.feed(page)
    return parser.tables


def test_site_index_shows_a_papers_authors_under_authors_not_its_title(runner, tmp_path: Path) -> None:
    """The bug: `SiteBuilder.index_page` (views/site.py) fills the Papers table's "Authors" column
    with `story.title or story.authors`: a paper that has a title shows its title as its authors
    (`A Study of Pipelines` under "Authors"), and its authors appear nowhere on the index. (The
    "Decision records" table does the same with `story.title or story.summary` under "Summary".)
    The rule: a view says exactly what the graph says; a value is never presented as another field."""
    data = write_records(
        tmp_path / "data",
        {
            "practices/SOTA-001.yaml": "id: SOTA-001\nversion: 1\ntitle: plain\nstatus: Active\ncites: [LIT-001]\n",
            "papers/LIT-001.yaml": "id: LIT-001\ntitle: A Study of Pipelines\nauthors: Ada Lovelace\nyear: 2020\n",
        },
    )
    folder = tmp_path / "site"
    result = run(runner, data, tmp_path / "store", "export", "site", "--mermaid", str(folder))
    assert result.exit_code == 0, result.output
    tables = _tables((folder / "index.html").read_text(encoding="utf-8"))
    papers = next((headers, rows) for headers, rows in tables if "Cited by" in headers)
    headers, rows = papers
    row = next(r for r in rows if r and r[0] == "LIT-001")
    shown = dict(zip(headers, row, strict=True))
    assert shown.get("Authors") == "Ada Lovelace", shown


def test_site_does_not_name_a_decision_in_force_inside_a_supersession_cycle(runner, tmp_path: Path) -> None:
    """The bug: `query/why.py:_adr_chain` orders a cycle by depth and then by name (the depths of a
    cycle are cut arbitrarily), and `Governance.in_force` takes the last of that order; the site's
    `SiteBuilder._governance` (views/site.py) then states it. With ADR-001 and ADR-002 each
    superseding the other (both Superseded) and the registry naming ADR-002, every practice page
    says "Filing governed by ADR-001 (superseding ADR-002; the registry still names ADR-002)": it
    presents ADR-001 as the decision in force and the registry as out of date, though the graph
    equally states that ADR-002 replaced ADR-001 and that ADR-001 is Superseded.
    The rule: a view says exactly what the graph says; nothing inferred is presented as stated (a
    cycle has no decision in force: say it is a cycle, or show what is stated)."""
    data = write_records(
        tmp_path / "data",
        {
            "practices/SOTA-001.yaml": "id: SOTA-001\nversion: 1\ntitle: plain\nstatus: Active\ntopic: pipes\n",
            "topics/pipes.yaml": "id: pipes\nlabel: Pipelines\n",
            "adrs/ADR-001.yaml": "id: ADR-001\nstatus: Superseded\nsupersedes: [ADR-002]\nsuperseded_by: ADR-002\n",
            "adrs/ADR-002.yaml": "id: ADR-002\nstatus: Superseded\nsupersedes: [ADR-001]\nsuperseded_by: ADR-001\n",
            "registry.yaml": "title: Topics\ndescription: the scheme\ngoverned_by: [ADR-002]\n",
        },
    )
    folder = tmp_path / "site"
    result = run(runner, data, tmp_path / "store", "export", "site", "--mermaid", str(folder))
    assert result.exit_code == 0, result.output
    page = (folder / "SOTA-001.html").read_text(encoding="utf-8")
    governed = page.split("<dt>Filing governed by</dt>", 1)[1].split("</dd>", 1)[0]
    assert "the registry still names" not in governed, governed
    assert "superseding" not in governed, governed


def test_site_shows_a_practices_status_note(runner, tmp_path: Path) -> None:
    """The bug: the site's practice page (`SiteBuilder._practice`) and its topic table
    (`SiteBuilder.topic_page`, views/site.py) show the status and, for a rejected practice, the
    reason, but never `status_note`, which the graph states (sota:statusNote) and which
    `sotakg why` ("status: Proposed — awaits a second source") and `export index`
    ("| Proposed — awaits a second source |") both give: the site says less than the graph,
    though its pages are the provenance "as `sotakg why` tells it".
    The rule: a view says exactly what the graph says, no less."""
    note = "awaits a second source"
    data = write_records(
        tmp_path / "data",
        {
            "practices/SOTA-001.yaml": (
                f"id: SOTA-001\nversion: 1\ntitle: plain\nstatus: Proposed\nstatus_note: {note}\ntopic: pipes\n"
            ),
            "topics/pipes.yaml": "id: pipes\nlabel: Pipelines\n",
        },
    )
    folder = tmp_path / "site"
    result = run(runner, data, tmp_path / "store", "export", "site", "--mermaid", str(folder))
    assert result.exit_code == 0, result.output
    index = run(runner, data, tmp_path / "store", "export", "index", "--topic", "pipes")
    assert f"Proposed — {note}" in index.output  # the graph holds it
    missing = [
        name
        for name in ("SOTA-001.html", "topic-pipes.html")
        if note not in (folder / name).read_text(encoding="utf-8")
    ]
    assert missing == [], f"{missing} leave out the status note"


def test_site_links_an_identifier_in_a_title_shown_in_a_table(runner, tmp_path: Path) -> None:
    """The bug: the index's "Rejected practices" table (`SiteBuilder.index_page`) and the topic
    page's practice table (`SiteBuilder.topic_page`, views/site.py) write a practice's title with
    `esc(...)`, not `linked(...)`: the title `Folded into SOTA-001` shows SOTA-001 as plain text
    there, while the same title in SOTA-001's "Named in the rejection reasons of" list (`ref_item`)
    links it. (The index's Papers table does the same with `esc(story.title ...)`.)
    The rule (README, `export site`): every SOTA-, LIT- and ADR- id in a text links to its page."""
    data = write_records(
        tmp_path / "data",
        {
            "practices/SOTA-001.yaml": "id: SOTA-001\nversion: 1\ntitle: plain\nstatus: Active\ntopic: pipes\n",
            "practices/SOTA-002.yaml": (
                "id: SOTA-002\nversion: 1\ntitle: Folded into SOTA-001\nstatus: Rejected\n"
                "reason: see SOTA-001\nreason_names: [SOTA-001]\ntopic: pipes\n"
            ),
            "topics/pipes.yaml": "id: pipes\nlabel: Pipelines\n",
        },
    )
    folder = tmp_path / "site"
    result = run(runner, data, tmp_path / "store", "export", "site", "--mermaid", str(folder))
    assert result.exit_code == 0, result.output
    linked_title = 'Folded into <a href="SOTA-001.html">SOTA-001</a>'
    assert linked_title in (folder / "SOTA-001.html").read_text(encoding="utf-8")  # where the title is linked
    unlinked = [
        name
        for name in ("index.html", "topic-pipes.html")
        if linked_title not in (folder / name).read_text(encoding="utf-8")
    ]
    assert unlinked == [], f"{unlinked} show SOTA-001 in a title without its link"


def test_site_links_a_web_address_with_parentheses_to_that_address() -> None:
    """The bug: `linked` (views/site.py) strips every trailing `)` from a web address in a text, as
    sentence punctuation, even when the address opened that parenthesis itself: in the summary
    `See https://en.wikipedia.org/wiki/Pipeline_(computing).` the link goes to
    `https://en.wikipedia.org/wiki/Pipeline_(computing` (another page, or none) and the `)` is left
    outside it. (GitHub's own autolinking keeps a balanced parenthesis.)
    The rule: a view says exactly what the graph says: a link points where the text says."""
    from sotakg.query.results import SelectResult
    from sotakg.query.why import Facts
    from sotakg.views.site import SiteGraph, linked

    anthology = SiteGraph(Facts(SelectResult(("s", "p", "o"), ())), [], records={})
    address = "https://en.wikipedia.org/wiki/Pipeline_(computing)"
    assert linked(f"See {address}.", anthology) == (f'See <a href="{address}" rel="noopener">{address}</a>.')
    # A parenthesis the address did not open is still punctuation.
    assert linked("(see https://x.example/a).", anthology) == (
        '(see <a href="https://x.example/a" rel="noopener">https://x.example/a</a>).'
    )


# ------------------------------------------------------------------------------------ diff


def _two_folders(tmp_path: Path, old: str, new: str) -> tuple[Path, Path]:
    before = write_records(tmp_path / "old", {"practices/SOTA-001.yaml": old})
    after = write_records(tmp_path / "new", {"practices/SOTA-001.yaml": new})
    return before, after


@pytest.mark.parametrize(
    ("old_version", "new_version"),
    [("version: 3\n", "version: 2\n"), ("version: 1\n", "")],
    ids=["lowered", "removed"],
)
def test_diff_does_not_call_a_lowered_or_removed_version_new(
    runner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, old_version: str, new_version: str
) -> None:
    """The bug: `describe` (views/diff.py) words every change of `version` as
    "new version: vBEFORE -> vAFTER", so reverting a bump (v3 -> v2, which deletes the version v3
    from the graph) reads "new version: v3 -> v2", and dropping the field reads
    "new version: v1 -> v(none)": a reviewer is told a version was added where one was removed.
    The rule: diff reports every change as what it is (a version bump, and a version removed)."""
    monkeypatch.chdir(tmp_path)
    body = "id: SOTA-001\n{}title: plain\nstatus: Active\n"
    _two_folders(tmp_path, body.format(old_version), body.format(new_version))
    result = runner.invoke(cli, ["diff", "./old", "./new"])
    assert result.exit_code == 0, result.output
    lines = [line for line in result.output.splitlines() if line.startswith("  SOTA-001")]
    assert len(lines) == 1, result.output
    assert "new version" not in lines[0], lines[0]


def test_diff_reports_nothing_when_only_the_order_of_a_list_changed(
    runner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The bug: `record_changes` compares `cites` (and every `ids` field: reason_names, supersedes,
    governed_by) as Python lists, and `_list_change` words an equal set as "reordered". The graph
    holds no order (one triple per cited paper; the index pages and the site sort them), so the
    report says "practices: 1 changed (0 triples inserted, 0 deleted) ... cites: reordered", and
    `--format sparql-update` says "no change: the two graphs hold the same triples": a change
    reported that the anthology does not have, like a change only in YAML quoting.
    The rule: diff reports nothing that did not change."""
    monkeypatch.chdir(tmp_path)
    old = "id: SOTA-001\nversion: 1\ntitle: plain\nstatus: Active\ncites: [LIT-001, LIT-002]\n"
    new = "id: SOTA-001\nversion: 1\ntitle: plain\nstatus: Active\ncites:\n  - LIT-002\n  - LIT-001\n"
    _two_folders(tmp_path, old, new)
    update = runner.invoke(cli, ["diff", "./old", "./new", "--format", "sparql-update"])
    assert update.output.startswith("# no change"), update.output  # the graphs are the same
    result = runner.invoke(cli, ["diff", "./old", "./new"])
    assert result.exit_code == 0, result.output
    assert result.output == "old -> new: no change to the anthology\n", result.output
