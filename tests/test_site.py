"""Published pages: `sotakg export index --all` and the static site of `sotakg export site`, checked on the
files and in a real headless browser (Debian's chromium) when one is installed."""

from __future__ import annotations

import html
import os
import re
import shutil
import struct
import subprocess
import zlib
from collections import deque
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

from sotakg.cli import cli
from sotakg.query.results import SelectResult
from sotakg.query.sparql import LocalBackend
from sotakg.query.why import Facts
from sotakg.records.schema import load_anthology
from sotakg.views.site import MANIFEST, SiteGraph, build_site, linked

from .conftest import FIXTURES, GOLDEN, SEED_PAGE, SHIPPED_DATA, invoke

ID_RE = re.compile(r"\b(?:SOTA|LIT|ADR)-\d+\b")
SHIPPED = load_anthology(SHIPPED_DATA)
RECORD_IDS = sorted(r.id for r in SHIPPED.records if r.kind in ("practice", "paper", "adr"))
GRAPHVIZ = shutil.which("dot") is not None
CHROMIUM_CANDIDATES = [
    shutil.which("chromium"),
    shutil.which("chromium-browser"),
    # the binaries behind Debian's and Ubuntu's wrapper scripts, for where a wrapper itself is broken
    "/usr/lib/chromium/chromium",
    "/usr/lib/chromium-browser/chromium-browser",
]
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def find_browser(candidates: list[str | None], probe_dir: Path) -> tuple[str | None, str]:
    """The first candidate that renders a page headless, or None and why none did (each one's failure)."""
    failures = []
    for candidate in dict.fromkeys(c for c in candidates if c):
        if not os.access(candidate, os.X_OK):
            continue
        profile = probe_dir / f"probe-{len(failures)}"
        try:
            probe = subprocess.run(
                [candidate, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", "--dump-dom", "about:blank"],
                capture_output=True,
                text=True,
                timeout=60,
                env={**os.environ, "HOME": str(profile)},
            )
        except (OSError, subprocess.TimeoutExpired) as error:
            failures.append(f"{candidate}: {error}")
            continue
        if probe.returncode == 0 and "<body" in probe.stdout:
            return candidate, ""
        last = (probe.stderr.strip().splitlines() or ["no output"])[-1]
        failures.append(f"{candidate} exited {probe.returncode}: {last[:200]}")
    if not failures:
        return None, "chromium is not installed (apt-get install chromium)"
    return None, "no working chromium: " + "; ".join(failures)


@pytest.fixture(scope="session")
def chromium(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A headless Chromium that works here (skips, saying why, when there is none)."""
    found, why = find_browser(CHROMIUM_CANDIDATES, tmp_path_factory.mktemp("browser-probe"))
    if found is None:
        pytest.skip(why)
    return found


def test_find_browser_passes_over_a_broken_wrapper(tmp_path):
    broken = tmp_path / "chromium"
    broken.write_text("#!/bin/sh\necho 'wrapper: cannot find the browser' >&2\nexit 127\n")
    broken.chmod(0o755)
    working = tmp_path / "real-chromium"
    working.write_text("#!/bin/sh\necho '<html><head></head><body></body></html>'\n")
    working.chmod(0o755)
    assert find_browser([str(broken), str(working)], tmp_path) == (str(working), "")
    assert find_browser([str(broken), str(tmp_path / "absent")], tmp_path) == (
        None,
        f"no working chromium: {broken} exited 127: wrapper: cannot find the browser",
    )
    assert find_browser([None, str(tmp_path / "absent")], tmp_path) == (
        None,
        "chromium is not installed (apt-get install chromium)",
    )


# ------------------------------------------------------------------------------------------ export index --all


def test_index_all_writes_each_topic_page_and_the_full_index(runner, built_store, tmp_path):
    pages = tmp_path / "pages"
    result = invoke(runner, built_store, "export", "index", "--all", "-o", str(pages))
    assert result.exit_code == 0, result.output
    assert result.stdout == f"Wrote 2 files to {pages}, 0 unchanged.\n"
    assert sorted(p.name for p in pages.iterdir()) == ["distributed-optimization.md", "index.md"]
    single = invoke(runner, built_store, "export", "index", "--topic", "distributed-optimization")
    assert (pages / "distributed-optimization.md").read_text(encoding="utf-8") == single.stdout
    description = next(r.fields["description"] for r in SHIPPED.records if r.kind == "registry")
    index = (pages / "index.md").read_text(encoding="utf-8")
    lines = index.split("\n")
    assert lines[0] == f"Topics — {description}"
    assert lines[1:] == [
        "42 of 449 SOTA documents in 1 topic.",
        "| Topic | Scope | Count |",
        "|---|---|---|",
        "| [Distributed optimization](distributed-optimization.md) | parallelism and sharding, communication, "
        "memory management, checkpointing. | 42 |",
    ]
    # the topic page's "Back to the full index." is the page the index writes
    assert single.stdout.split("\n")[2].endswith("Back to the full index.")

    modified = {p.name: p.stat().st_mtime_ns for p in pages.iterdir()}
    again = invoke(runner, built_store, "export", "index", "--all", "-o", str(pages))
    assert again.stdout == f"Wrote 0 files to {pages}, 2 unchanged.\n"
    assert {p.name: p.stat().st_mtime_ns for p in pages.iterdir()} == modified


@pytest.mark.parametrize(
    ("slug", "named", "earlier"),
    [
        ("index", "index", "the full index"),
        # topics in the order of their slugs: the upper-case one first
        ("Distributed-Optimization", "distributed-optimization", "the topic 'Distributed-Optimization'"),
    ],
)
def test_index_all_refuses_two_pages_of_one_file_name_and_writes_nothing(runner, workdir, slug, named, earlier):
    topic = workdir / "data" / "topics" / f"{slug}.yaml"
    topic.write_text(f"id: {slug}\nlabel: Clash\nscope: a page name taken already\n", encoding="utf-8")
    result = runner.invoke(cli, ["export", "index", "--all", "-o", "pages"])
    assert result.exit_code == 1
    assert result.output == (
        f"Error: the topic {named!r} has the page file {named}.md, which {earlier} has too (names that differ "
        f"only in case are one file on some systems); give the topic another slug\n"
    )
    assert not (workdir / "pages").exists()


@pytest.mark.parametrize(
    ("record_id", "page", "owner"),
    [
        ("index", "index.html", "the index"),
        ("topic-distributed-optimization", "topic-distributed-optimization.html", "topic distributed-optimization"),
        ("view-citations", "view-citations.html", "view citations"),
        ("lit-051", "lit-051.html", "record LIT-051"),  # one file where names are case-blind
    ],
)
def test_a_record_cannot_take_another_page_of_the_site(runner, workdir, record_id, page, owner):
    planted = workdir / "data" / "papers" / f"{record_id}.yaml"
    planted.write_text(f'id: {record_id}\ntitle: "the anthology moved"\nyear: 2020\n', encoding="utf-8")
    result = runner.invoke(cli, ["export", "site", "--mermaid", "site"])
    assert result.exit_code == 1, result.output
    assert result.output == (
        f"Error: the site's page {page} would be both {owner}'s and record {record_id}'s; rename one of them "
        "(record ids, topic slugs and view names give the pages their names)\n"
    )
    assert not (workdir / "site").exists()


@pytest.mark.parametrize("topic_id", ["Evil_Topic", "v1.2", "A", "x" * 128])
def test_any_topic_id_the_records_accept_gets_its_page_and_diagram(runner, workdir, topic_id):
    """The topic view's parameter takes every identifier a record may have: a topic that builds and
    validates is not refused by the site (once with an error about a parameter nobody gave)."""
    from sotakg.records.schema import IDENTIFIER_RE
    from sotakg.views.named import find_view

    assert find_view("topic").params[0].pattern == f"^{IDENTIFIER_RE.pattern}$"
    (workdir / "data" / "topics" / f"{topic_id}.yaml").write_text(
        f"id: {topic_id}\nlabel: Another topic\nscope: what else.\n", encoding="utf-8"
    )
    practice = workdir / "data" / "practices" / "SOTA-017.yaml"
    practice.write_text(
        practice.read_text(encoding="utf-8").replace("topic: distributed-optimization", f"topic: {topic_id}")
    )
    result = runner.invoke(cli, ["export", "site", "--mermaid", "site"])
    assert result.exit_code == 0, result.output
    page = (workdir / "site" / f"topic-{topic_id}.html").read_text(encoding="utf-8")
    assert "Another topic" in page and "SOTA-017" in page


@pytest.mark.parametrize(
    "command", [["export", "site", "--mermaid", "site"], ["export", "index", "--all", "-o", "site"]]
)
def test_an_output_folder_that_is_a_link_is_not_written_through(runner, workdir, command):
    victim = workdir / "victim"
    victim.mkdir()
    (victim / "keep.html").write_text("kept", encoding="utf-8")
    (victim / MANIFEST).write_text("keep.html\n", encoding="utf-8")  # a stale list would remove it
    (workdir / "site").symlink_to("victim")
    result = runner.invoke(cli, command)
    assert result.exit_code == 2, result.output
    assert (
        "Error: the output folder site is a symbolic link, and sotakg does not follow it (a checkout can commit "
        f"one); to use the folder it leads to, name that folder instead: {victim.resolve()}\n"
    ) in result.output
    assert sorted(path.name for path in victim.iterdir()) == [MANIFEST, "keep.html"]


def test_index_all_with_two_topics(runner, tmp_path):
    data = tmp_path / "data"
    for page in (SEED_PAGE, FIXTURES / "other-topic.md"):
        assert runner.invoke(cli, ["--data", str(data), "import", "markdown", str(page)]).exit_code == 0
    pages = tmp_path / "pages"
    args = ["--data", str(data), "--store", str(tmp_path / "store"), "export", "index"]
    result = runner.invoke(cli, [*args, "--all", "-o", str(pages)])
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in pages.iterdir()) == [
        "distributed-optimization.md",
        "evaluation-and-benchmarks.md",
        "index.md",
    ]
    other = (pages / "evaluation-and-benchmarks.md").read_text(encoding="utf-8")
    assert other == (FIXTURES / "other-topic.md").read_text(encoding="utf-8")
    table = (pages / "index.md").read_text(encoding="utf-8").split("\n")[1:]
    assert table[0] == f"{42 + 5} of 449 SOTA documents in 2 topics."
    assert [row.split(" | ")[0] for row in table[3:]] == [
        "| [Distributed optimization](distributed-optimization.md)",
        "| [Evaluation and benchmarks](evaluation-and-benchmarks.md)",
    ]
    assert [row.rsplit(" | ", 1)[1] for row in table[3:]] == ["42 |", "5 |"]


@pytest.mark.parametrize(
    "args, message",
    [
        (["--all"], "--all writes one file per topic: give the folder with -o DIR"),
        ([], "give either --topic SLUG or --all"),
        (["--all", "--topic", "distributed-optimization", "-o", "x"], "give either --topic SLUG or --all"),
    ],
)
def test_index_usage_errors(runner, built_store, args, message):
    result = invoke(runner, built_store, "export", "index", *args)
    assert result.exit_code == 2
    assert message in result.output


# ------------------------------------------------------------------------------------------ the site


@pytest.fixture(scope="module")
def site(built_store, tmp_path_factory) -> Path:
    data, store = built_store
    folder = tmp_path_factory.mktemp("site") / "public"
    build_site(LocalBackend(store, data_dir=data), folder)
    return folder


def test_a_diagram_too_large_for_a_page_is_not_drawn_and_says_how_to_draw_it(
    built_store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """Past MAX_DRAWN_LINKS links a page shows no drawing (no layout is legible there, and
    Graphviz's grows faster than the links) but says how large it is and which command draws it;
    smaller diagrams are drawn as before."""
    from sotakg.views import site as site_module

    data, store = built_store
    monkeypatch.setattr(site_module, "MAX_DRAWN_LINKS", 30)
    folder = tmp_path / "public"
    build_site(LocalBackend(store, data_dir=data), folder, graphviz=False)
    citations = (folder / "view-citations.html").read_text(encoding="utf-8")
    assert "more than a page can show legibly (at most 30 links are drawn here)" in citations
    assert "<code>sotakg export view citations -o citations.svg</code> draws it" in citations
    assert "mermaid-source" not in citations
    topic = (folder / "topic-distributed-optimization.html").read_text(encoding="utf-8")
    assert "sotakg export view topic -p topic=distributed-optimization -o topic.svg" in topic
    adr = (folder / "ADR-026.html").read_text(encoding="utf-8")
    assert "mermaid-source" in adr and "more than a page can show" not in adr  # a small one, drawn


class Page(HTMLParser):
    """What a test needs of a page: its links, its text outside links, and what it embeds."""

    SKIPPED = {"a", "pre", "style", "title", "h1", "nav"}

    def __init__(self, text: str):
        super().__init__(convert_charrefs=True)
        self.links: list[tuple[str, str, str]] = []  # (tag, attribute, target)
        self.tags: list[str] = []
        self.loose_text: list[str] = []  # text outside links, headings, navigation, code and styles
        self.open: list[str] = []
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        for name, value in attrs:
            if name in ("href", "xlink:href", "src") and value is not None:
                self.links.append((tag, name, value))
        self.open.append(tag)

    def handle_startendtag(self, tag, attrs):
        self.handle_starttag(tag, attrs)
        self.open.pop()

    def handle_endtag(self, tag):
        if tag in self.open:
            while self.open.pop() != tag:
                pass

    def handle_data(self, data):
        if not self.SKIPPED & set(self.open):
            self.loose_text.append(data)


def pages_of(folder: Path) -> dict[str, str]:
    return {p.name: p.read_text(encoding="utf-8") for p in sorted(folder.glob("*.html"))}


def internal_targets(name: str, page: Page) -> list[str]:
    targets = []
    for _, _, target in page.links:
        parts = urlsplit(target)
        if parts.scheme in ("http", "https"):
            continue
        assert not parts.scheme and not parts.netloc, f"{name} links to {target}"
        targets.append(unquote(parts.path) or name)
    return targets


def test_the_site_has_a_page_per_record_topic_and_view(site):
    expected = {f"{record}.html" for record in RECORD_IDS}
    expected |= {"index.html", "topic-distributed-optimization.html"}
    expected |= {f"view-{name}.html" for name in ("citations", "rejections", "supersessions")}
    assert {p.name for p in site.iterdir()} == expected | {MANIFEST}
    assert (site / MANIFEST).read_text(encoding="utf-8") == "".join(f"{n}\n" for n in sorted(expected))


def test_no_broken_links_and_every_page_reachable_from_the_index(site):
    pages = {name: Page(text) for name, text in pages_of(site).items()}
    for name, page in pages.items():
        for target in internal_targets(name, page):
            assert (site / target).is_file(), f"{name} links to {target}, which does not exist"
    reached, queue = {"index.html"}, deque(["index.html"])
    while queue:
        name = queue.popleft()
        for target in internal_targets(name, pages[name]):
            if target not in reached:
                reached.add(target)
                queue.append(target)
    assert reached == set(pages)


def test_pages_embed_nothing_from_outside_and_run_no_script(site):
    for name, text in pages_of(site).items():
        page = Page(text)
        assert not {"script", "link", "img", "iframe", "object", "embed"} & set(page.tags), name
        assert [link for link in page.links if link[1] == "src"] == [], name
        style = text[text.index("<style>") : text.index("</style>")]
        assert "url(" not in style and "@import" not in style and "http" not in style, name
        external = [t for _, _, t in page.links if urlsplit(t).scheme]
        assert all(urlsplit(t).scheme in ("http", "https") for t in external), name
        assert text.startswith('<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'), name


def test_every_identifier_in_a_text_links_to_its_record(site):
    for name, text in pages_of(site).items():
        loose = " ".join(Page(text).loose_text)
        unlinked = [i for i in ID_RE.findall(loose) if i in RECORD_IDS]
        assert unlinked == [], f"{name} mentions {unlinked} without linking them"


def test_identifiers_link_only_when_the_record_exists():
    anthology = SiteGraph(Facts(SelectResult(("s", "p", "o"), ())), [], records={"SOTA-048": "practice"})
    text = 'SOTA-048 carries it, not SOTA-999 <b> & "x" (see https://example.org/a?b=1&c=2).'
    assert linked(text, anthology) == (
        '<a href="SOTA-048.html">SOTA-048</a> carries it, not SOTA-999 &lt;b&gt; &amp; &quot;x&quot; (see '
        '<a href="https://example.org/a?b=1&amp;c=2" rel="noopener">https://example.org/a?b=1&amp;c=2</a>).'
    )


def test_a_rejected_practice_page(site):
    text = (site / "SOTA-049.html").read_text(encoding="utf-8")
    assert "<title>SOTA-049 — Set buffer size to network bandwidth-delay product · sotakg</title>" in text
    assert (
        '<nav class="crumbs"><a href="index.html">Index</a> › '
        '<a href="topic-distributed-optimization.html">Distributed optimization</a> › SOTA-049</nav>'
    ) in text
    assert '<dt>Status</dt><dd><span class="status status-rejected">Rejected</span></dd>' in text
    assert "<dt>Versions</dt><dd>v1 (current)</dd>" in text
    assert "governed by" not in text  # the page never says the ADRs it cites govern filing
    assert (
        '<h2>Why it was rejected</h2>\n<blockquote class="reason">collapses two different quantities into one '
        "unfollowable sentence — a TCP socket buffer sized by bandwidth-delay product, and a gradient fusion buffer "
        'sized by the overlap trade. The fusion-buffer half is <a href="SOTA-048.html">SOTA-048</a>, which now '
        "carries Horovod’s attributable 64 MB default; the transport half is a claim about networks with no source "
        "here</blockquote>"
    ) in text
    assert (
        '<h2>The reason names</h2>\n<ul class="refs">\n<li><a href="SOTA-048.html">SOTA-048</a> '
        '<span class="muted">practice, v1</span> <span class="status status-active">Active</span> — Group small '
        "tensors before communication</li>\n</ul>"
    ) in text
    assert '<h2>Attributed to 1 paper</h2>\n<ul class="refs">\n<li><a href="LIT-051.html">LIT-051</a> — ' in text
    assert "Rests on" not in text
    if GRAPHVIZ:
        diagram = text[text.index('<div class="diagram">') :]
        for target in ("SOTA-049.html", "SOTA-048.html", "LIT-051.html", "topic-distributed-optimization.html"):
            assert f'xlink:href="{target}"' in diagram


def test_a_rejection_reason_naming_the_cited_paper_is_quoted_not_rested_on(site):
    text = (site / "SOTA-046.html").read_text(encoding="utf-8")
    section = text[text.index("<h2>Attributed to 1 paper</h2>") :]
    section = section[: section.index("</ul>")]
    assert (
        '<br><span class="muted">its rejection reason concerns this source: </span><q>the ’&gt; 1MB’ crossover '
        "has no owner: NCCL measures the algorithm choice per topology rather than publishing a constant, and "
        '<a href="LIT-051.html">LIT-051</a> does not discuss it.</q></li>'
    ) in section


def test_an_adr_page_says_what_is_not_recorded(site):
    text = (site / "ADR-059.html").read_text(encoding="utf-8")
    assert '<dt>Status</dt><dd><span class="muted">status not recorded</span></dd>' in text
    assert '<dt>Supersession chain</dt><dd><span class="muted">not recorded</span></dd>' in text
    assert '<dt>Cited in the description of</dt><dd><a href="index.html">Topics</a></dd>' in text
    assert "Summary" not in text and "supersedes nothing" not in text


def test_a_practice_named_in_rejections_lists_them(site):
    text = (site / "SOTA-048.html").read_text(encoding="utf-8")
    section = text[text.index("<h2>Named in the rejection reasons of</h2>") :]
    section = section[: section.index("</ul>")]
    assert re.findall(r'<li><a href="([^"]+)">', section) == ["SOTA-049.html", "SOTA-073.html"]


def test_a_paper_page_lists_the_practices_citing_it(site):
    citing = sorted(
        (r.id for r in SHIPPED.records if r.kind == "practice" and "LIT-051" in r.fields.get("cites", [])),
        key=lambda i: int(i.split("-")[1]),
    )
    text = (site / "LIT-051.html").read_text(encoding="utf-8")
    assert '<h1><span class="id">LIT-051</span> Jiang et al. (2020)</h1>' in text
    section = text[text.index(f"<h2>{len(citing)} practices attributed to it</h2>") :]
    section = section[: section.index("</ul>")]
    assert re.findall(r'<li><a href="([^"]+)">', section) == [f"{i}.html" for i in citing]
    assert (
        '<dt>URL</dt><dd><a href="https://www.usenix.org/conference/osdi20/presentation/jiang" rel="noopener">'
    ) in text


def test_an_adr_page_shows_its_supersession_chain(site):
    text = (site / "ADR-020.html").read_text(encoding="utf-8")
    assert (
        '<dt>Supersession chain</dt><dd><a href="ADR-020.html">ADR-020</a> (Superseded) → '
        '<a href="ADR-026.html">ADR-026</a></dd>'
    ) in text
    assert re.findall(r'<li><a href="([^"]+)">', text.split("<h2>Named in the rejection reasons of</h2>")[1])[:1] == [
        "SOTA-076.html"
    ]


def test_the_topic_page(site):
    text = (site / "topic-distributed-optimization.html").read_text(encoding="utf-8")
    assert '<p>42 of 449 SOTA documents. <a href="index.html">Back to the full index.</a></p>' in text
    rows = re.findall(r'<tr(?: class="rejected")?><td class="id"><a href="(SOTA-\d+)\.html">', text)
    assert rows == sorted((r.id for r in SHIPPED.records if r.kind == "practice"), key=lambda i: int(i[5:]))
    assert '<td class="id"><a href="SOTA-017.html">SOTA-017</a> v2</td>' in text
    assert text.count('<tr class="rejected">') == 6


def test_a_rebuild_with_unchanged_data_changes_no_file(site, built_store, tmp_path):
    data, store = built_store
    before = {p.name: (p.stat().st_mtime_ns, p.read_bytes()) for p in site.iterdir()}
    report = build_site(LocalBackend(store, data_dir=data), site)
    assert (report.written, report.removed, len(report.unchanged)) == ([], [], len(before) - 1)
    assert {p.name: (p.stat().st_mtime_ns, p.read_bytes()) for p in site.iterdir()} == before
    elsewhere = tmp_path / "again"
    build_site(LocalBackend(store, data_dir=data), elsewhere)
    assert {p.name: p.read_bytes() for p in elsewhere.iterdir()} == {n: b for n, (_, b) in before.items()}


def test_pages_of_records_that_are_gone_are_removed(runner, data_copy, tmp_path):
    args = ["--data", str(data_copy), "--store", str(tmp_path / "store"), "export", "site", "--mermaid"]
    folder = tmp_path / "public"
    assert runner.invoke(cli, [*args, str(folder)]).exit_code == 0
    (folder / "notes.txt").write_text("mine", encoding="utf-8")
    with (folder / MANIFEST).open("a", encoding="utf-8") as manifest:
        manifest.write("../outside.html\nnotes.txt\n")
    (tmp_path / "outside.html").write_text("not the site's", encoding="utf-8")
    (data_copy / "practices" / "SOTA-437.yaml").unlink()
    report = build_site(LocalBackend(tmp_path / "store", data_dir=data_copy), folder, graphviz=False)
    # the pages that counted or cited SOTA-437 change, its own page goes, the rest stay as they were
    assert report.written == [
        "LIT-750.html",
        "index.html",
        "topic-distributed-optimization.html",
        "view-citations.html",
    ]
    assert (report.removed, len(report.unchanged)) == (["SOTA-437.html"], 63)
    assert not (folder / "SOTA-437.html").exists()
    assert (folder / "notes.txt").read_text() == "mine" and (tmp_path / "outside.html").exists()


@pytest.mark.parametrize("kind", ["fifo", "link to a list outside", "link to a fifo outside"])
def test_a_list_of_pages_that_is_no_plain_file_is_never_read(runner, built_store, tmp_path, kind):
    """A committed ``.sotakg-site`` that is a FIFO (the export waited on it for ever) or a link (its
    target was read, or waited on) counts as no list: nothing is removed, nothing blocks."""
    import os
    import signal

    folder = tmp_path / "public"
    folder.mkdir()
    (folder / "keep.html").write_text("mine", encoding="utf-8")
    listed = folder / MANIFEST
    if kind == "fifo":
        os.mkfifo(listed)
    elif kind == "link to a fifo outside":
        os.mkfifo(tmp_path / "outside.fifo")
        listed.symlink_to(tmp_path / "outside.fifo")
    else:
        outside = tmp_path / "outside.txt"
        outside.write_text("keep.html\n", encoding="utf-8")
        listed.symlink_to(outside)

    def stalled(*_):
        raise AssertionError("the export waited on the list of pages")

    previous = signal.signal(signal.SIGALRM, stalled)
    signal.alarm(60)
    try:
        result = invoke(runner, built_store, "export", "site", "--mermaid", str(folder))
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    assert (folder / "keep.html").read_text(encoding="utf-8") == "mine"
    if kind == "fifo":  # not written over either: said so
        assert result.exit_code == 1
        assert f"cannot write {listed}: not a regular file (a device, FIFO or socket)" in result.stderr
        return
    assert result.exit_code == 0, result.output
    assert not listed.is_symlink() and listed.is_file()  # replaced by the list this build wrote
    assert "index.html\n" in listed.read_text(encoding="utf-8")


def test_export_site_command(runner, built_store, tmp_path):
    folder = tmp_path / "public"
    result = invoke(runner, built_store, "export", "site", "--mermaid", str(folder))
    assert result.exit_code == 0, result.output
    assert result.stdout == f"Wrote 68 files to {folder}, 0 unchanged.\n"
    again = invoke(runner, built_store, "export", "site", "--mermaid", str(folder))
    assert again.stdout == f"Wrote 0 files to {folder}, 68 unchanged.\n"


def test_without_graphviz_diagrams_are_mermaid_source(built_store, tmp_path):
    data, store = built_store
    backend = LocalBackend(store, data_dir=data)
    folder = tmp_path / "public"
    build_site(backend, folder, graphviz=False)
    pages = pages_of(folder)
    assert not any("<svg" in text for text in pages.values())
    text = pages["topic-distributed-optimization.html"]
    source = html.unescape(text.split('<pre class="mermaid-source">')[1].split("</pre>")[0])
    # the same text `sotakg export view topic -p topic=distributed-optimization --format mermaid` writes
    assert source == (GOLDEN / "views" / "topic.mmd").read_text(encoding="utf-8")
    assert "apt-get install graphviz" in text


def test_the_site_says_on_standard_error_when_it_falls_back_to_mermaid(runner, built_store, tmp_path, monkeypatch):
    monkeypatch.setattr("sotakg.views.diagrams.graphviz_available", lambda: False)
    result = invoke(runner, built_store, "export", "site", str(tmp_path / "public"))
    assert result.exit_code == 0, result.output
    assert result.stderr == (
        "Note: Graphviz's dot is not installed, so the site's diagrams are Mermaid source instead of drawings: "
        "install the graphviz package (for example: apt-get install graphviz) and export again, or pass "
        "--mermaid to choose Mermaid source.\n"
    )
    assert result.stdout == f"Wrote 68 files to {tmp_path / 'public'}, 0 unchanged.\n"
    chosen = invoke(runner, built_store, "export", "site", "--mermaid", str(tmp_path / "chosen"))
    assert (chosen.exit_code, chosen.stderr) == (0, "")


def test_arxiv_identifiers_in_text_link_to_their_abstracts():
    anthology = SiteGraph(Facts(SelectResult(("s", "p", "o"), ())), [], records={"LIT-027": "paper"})
    text = (
        "LIT-027 — ARXIV-1910.02054. Also arXiv:2105.05720v2, 1604.06174, https://arxiv.org/abs/1811.06965 "
        "and 1913.02054."
    )
    assert linked(text, anthology) == (
        '<a href="LIT-027.html">LIT-027</a> — <a href="https://arxiv.org/abs/1910.02054" rel="noopener">'
        'ARXIV-1910.02054</a>. Also <a href="https://arxiv.org/abs/2105.05720v2" rel="noopener">arXiv:2105.05720v2'
        '</a>, <a href="https://arxiv.org/abs/1604.06174" rel="noopener">1604.06174</a>, '
        '<a href="https://arxiv.org/abs/1811.06965" rel="noopener">https://arxiv.org/abs/1811.06965</a> and '
        "1913.02054."  # month 13: not an arXiv id
    )


def test_arxiv_identifiers_in_summaries_are_links_on_the_site(site):
    text = (site / "SOTA-029.html").read_text(encoding="utf-8")
    assert '<a href="https://arxiv.org/abs/1910.02054" rel="noopener">ARXIV-1910.02054</a>' in text
    for name, page in pages_of(site).items():
        loose = " ".join(Page(page).loose_text)
        assert not re.search(r"\bARXIV-\d{4}\.\d{4,5}", loose), f"{name} shows an arXiv id without its link"


def test_text_from_the_data_is_escaped(runner, data_copy, tmp_path):
    record = data_copy / "practices" / "SOTA-048.yaml"
    record.write_text(
        record.read_text(encoding="utf-8").replace(
            "title: Group small tensors before communication",
            "title: '<script>alert(\"x\")</script> & friends'",
        ),
        encoding="utf-8",
    )
    folder = tmp_path / "public"
    args = ["--data", str(data_copy), "--store", str(tmp_path / "store"), "export", "site", str(folder)]
    result = runner.invoke(cli, args)
    assert result.exit_code == 0, result.output
    for name in ("SOTA-048.html", "SOTA-049.html", "topic-distributed-optimization.html"):
        text = (folder / name).read_text(encoding="utf-8")
        assert "<script" not in text, name
        assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; friends" in text, name


def test_export_site_into_a_file_is_refused(runner, built_store, tmp_path):
    target = tmp_path / "file"
    target.write_text("x", encoding="utf-8")
    result = invoke(runner, built_store, "export", "site", str(target))
    assert result.exit_code == 2
    assert "is a file" in result.output


# ------------------------------------------------------------------------------------------ in a browser


def browse(chromium: str, profile: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [chromium, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "HOME": str(profile)},
    )


def dump_dom(chromium: str, profile: Path, page: Path) -> str:
    result = browse(chromium, profile, "--dump-dom", page.as_uri())
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.startswith('<!DOCTYPE html>\n<html lang="en">'), result.stdout[:200]
    return result.stdout


def follow(page: Path, dom: str, text: str) -> Path:
    """The file the link with ``text`` on the rendered ``page`` leads to (it must exist)."""
    hrefs = re.findall(rf'<a href="([^"]+)">{re.escape(text)}</a>', dom)
    assert hrefs, f"no link {text!r} on {page.name}"
    target = (page.parent / unquote(urlsplit(hrefs[0]).path)).resolve()
    assert target.is_file(), f"{page.name} links {text} to {hrefs[0]}, which does not exist"
    return target


def test_in_a_browser_from_the_index_to_a_rejected_practice_and_what_its_reason_names(site, tmp_path, chromium):
    profile = tmp_path / "profile"

    index = dump_dom(chromium, profile, site / "index.html")
    assert "<h2>Rejected practices</h2>" in index
    rejected = follow(site / "index.html", index, "SOTA-049")
    assert rejected.name == "SOTA-049.html"
    dom = dump_dom(chromium, profile, rejected)
    assert '<span class="status status-rejected">Rejected</span>' in dom
    assert "Set buffer size to network bandwidth-delay product</h1>" in dom
    named = follow(rejected, dom, "SOTA-048")
    assert named.name == "SOTA-048.html"
    dom = dump_dom(chromium, profile, named)
    assert "Group small tensors before communication</h1>" in dom
    assert '<a href="SOTA-049.html">SOTA-049</a>' in dom.split("Named in the rejection reasons of")[1]
    back = follow(named, dom, "Distributed optimization")
    assert back.name == "topic-distributed-optimization.html"
    dom = dump_dom(chromium, profile, back)
    assert follow(back, dom, "Back to the full index.").name == "index.html"
    if GRAPHVIZ:
        assert dom.count("<svg") == 1 and 'xlink:href="SOTA-049.html"' in dom


def png_colours(data: bytes) -> set[bytes]:
    """The distinct pixel values of an 8-bit PNG (greyscale, RGB or RGBA, not interlaced), decoded with
    zlib and the PNG row filters in pure Python."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    position, compressed = 8, b""
    width = height = channels = 0
    while position < len(data):
        (length,) = struct.unpack(">I", data[position : position + 4])
        kind, body = data[position + 4 : position + 8], data[position + 8 : position + 8 + length]
        if kind == b"IHDR":
            width, height, depth, colour_type, _, _, interlace = struct.unpack(">IIBBBBB", body)
            assert depth == 8 and interlace == 0
            channels = {0: 1, 2: 3, 4: 2, 6: 4}[colour_type]
        elif kind == b"IDAT":
            compressed += body
        position += 12 + length
    raw = zlib.decompress(compressed)
    stride = width * channels
    previous = bytearray(stride)
    colours: set[bytes] = set()
    for row in range(height):
        start = row * (stride + 1)
        kind, line = raw[start], bytearray(raw[start + 1 : start + 1 + stride])
        for i in range(stride):
            left = line[i - channels] if i >= channels else 0
            up = previous[i]
            if kind == 1:
                line[i] = (line[i] + left) & 0xFF
            elif kind == 2:
                line[i] = (line[i] + up) & 0xFF
            elif kind == 3:
                line[i] = (line[i] + (left + up) // 2) & 0xFF
            elif kind == 4:
                corner = previous[i - channels] if i >= channels else 0
                guess = left + up - corner
                near = min((abs(guess - left), 0, left), (abs(guess - up), 1, up), (abs(guess - corner), 2, corner))
                line[i] = (line[i] + near[2]) & 0xFF
        colours.update(bytes(line[i : i + channels]) for i in range(0, stride, channels))
        previous = line
    return colours


def test_a_screenshot_of_the_index_is_not_blank(site, tmp_path, chromium):
    shot = tmp_path / "index.png"
    result = browse(
        chromium, tmp_path / "profile", f"--screenshot={shot}", "--window-size=1200,900", (site / "index.html").as_uri()
    )
    assert result.returncode == 0, result.stderr[-2000:]
    colours = png_colours(shot.read_bytes())
    assert len(colours) > 2
    header = bytes([0x2A, 0x43, 0x65])  # the header bar's colour, so the inline style was applied
    assert any(colour[:3] == header for colour in colours)


def test_png_colours_reads_a_blank_and_a_two_colour_image():
    def png(rows: list[bytes], width: int) -> bytes:
        def chunk(kind: bytes, body: bytes) -> bytes:
            return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

        header = struct.pack(">IIBBBBB", width, len(rows), 8, 2, 0, 0, 0)
        return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(b"".join(rows)))

    white = b"\x00" + b"\xff" * 6
    assert png_colours(png([white, white], 2)) == {b"\xff\xff\xff"}
    # a Sub-filtered row: the second pixel is the first plus (1, 2, 3); an Up row repeats the one above
    assert png_colours(png([b"\x01" + bytes([10, 20, 30, 1, 2, 3]), b"\x02" + b"\x00" * 6], 2)) == {
        bytes([10, 20, 30]),
        bytes([11, 22, 33]),
    }


def test_a_character_xml_cannot_hold_does_not_stop_graphviz():
    # U+FFFE is text to Markdown and YAML; in dot's HTML-like labels it made dot refuse the diagram
    from sotakg.views.diagrams import _html

    assert _html("a\ufffeb <c> & \x0b") == "a\ufffdb &lt;c&gt; &amp; \ufffd"
