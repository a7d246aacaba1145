"""Graph views: the CONSTRUCT files, `sotakg views`, and `sotakg export view` as RDF, Mermaid, DOT and SVG."""

from __future__ import annotations

import os
import random
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from pyoxigraph import Literal, NamedNode, RdfFormat, Triple, parse

from sotakg.cli import cli
from sotakg.errors import GraphvizMissing, ParameterProblem, QueryHeaderError, SotakgError, UnknownView
from sotakg.graph import vocab as v
from sotakg.query.canned import load_canned, queries_dir
from sotakg.query.results import GraphResult
from sotakg.views.diagrams import (
    Diagram,
    diagram_from_triples,
    neighbourhood,
    render_svgs,
    short_title,
    to_dot,
    to_mermaid,
)
from sotakg.views.named import find_view, load_views, resolve_view_format, run_view, views_dir

from .conftest import GOLDEN, REPO, assert_golden, invoke

MERMAID_CHECKER = Path(__file__).resolve().parent / "mermaid"

#: Every shipped view, with the parameters it is exported with in the golden files.
VIEWS = {
    "citations": [],
    "rejections": [],
    "supersessions": [],
    "topic": ["-p", "topic=distributed-optimization"],
}


def iri(record: str) -> NamedNode:
    return NamedNode(v.record_iri(record))


# ------------------------------------------------------------------------------------------ the view files


def test_the_shipped_views_and_their_listing(runner, built_store):
    assert [view.name for view in load_views()] == list(VIEWS)
    assert [p.name for p in find_view("topic").params] == ["topic"]
    result = invoke(runner, built_store, "views")
    assert result.exit_code == 0, result.output
    assert result.stdout == (
        "NAME           PARAMETERS                                     SUMMARY\n"
        "citations      -                                              Practices and the papers their summaries cite\n"
        "rejections     -                                              Rejected practices and the records their "
        "rejection reasons name\n"
        "supersessions  -                                              Supersession chains: revised practices with "
        "their versions, and ADRs replacing ADRs\n"
        "topic          topic (string, e.g. distributed-optimization)  One topic's subgraph: its practices, the "
        "papers they cite and the records their reasons name\n"
    )


def test_canned_queries_do_not_include_the_views():
    assert views_dir() == queries_dir() / "views"
    assert {query.path.parent for query in load_canned()} == {queries_dir()}
    # `rejections` is both a canned query (a table) and a view (a graph): each finds its own
    canned = {query.name: query for query in load_canned()}
    assert canned["rejections"].text.count("SELECT") >= 1 and "CONSTRUCT" not in canned["rejections"].text
    assert "CONSTRUCT" in find_view("rejections").text


def test_a_view_must_be_a_construct_query(tmp_path):
    (tmp_path / "table.rq").write_text("#+ summary: a table\nSELECT ?s WHERE { ?s ?p ?o }\n", encoding="utf-8")
    with pytest.raises(QueryHeaderError, match=r"table\.rq: a view must be a CONSTRUCT query"):
        load_views(tmp_path)


@pytest.mark.parametrize(
    "body",
    [
        "CONSTRUCT { ?s ?p ?topic } WHERE { ?s ?p ?o }",  # only in the template
        "CONSTRUCT { ?s ?p ?o } WHERE { { SELECT ?s ?p ?o WHERE { ?s ?p ?o } } }",  # nowhere
    ],
)
def test_a_view_parameter_must_occur_in_the_where_clause(tmp_path, body):
    header = (
        "#+ summary: one topic\n#+ params:\n#+   - name: topic\n#+     type: string\n"
        "#+     example: distributed-optimization\n"
    )
    (tmp_path / "bad.rq").write_text(header + body + "\n", encoding="utf-8")
    with pytest.raises(QueryHeaderError, match="parameter topic does not occur in the WHERE clause"):
        load_views(tmp_path)


def test_a_view_parameter_is_bound_not_spliced(tmp_path, backend):
    header = (
        "#+ summary: one topic\n#+ params:\n#+   - name: slug\n#+     type: string\n"
        "#+     example: distributed-optimization\n"
    )
    body = "CONSTRUCT { ?t a sota:Topic } WHERE { ?t sota:slug ?slug }\n"
    (tmp_path / "one.rq").write_text(header + body, encoding="utf-8")
    view = find_view("one", tmp_path)
    result = run_view(backend, view, {"slug": "distributed-optimization"})
    assert result.triples == (
        Triple(NamedNode(v.topic_iri("distributed-optimization")), NamedNode(v.TYPE), NamedNode(v.TOPIC_CLASS)),
    )
    with pytest.raises(ParameterProblem, match=r"view one found nothing for slug=x\" \} ; DROP ALL ; #"):
        run_view(backend, view, {"slug": 'x" } ; DROP ALL ; #'})


# ------------------------------------------------------------------------------------------ what the views hold


def test_the_rejections_view(backend):
    triples = set(run_view(backend, "rejections").triples)
    names = NamedNode(v.REASON_NAMES)
    assert {(t.subject, t.object) for t in triples if t.predicate == names} == {
        (iri(a), iri(b))
        for a, b in [
            ("SOTA-046", "LIT-051"),
            ("SOTA-049", "SOTA-048"),
            ("SOTA-055", "LIT-059"),
            ("SOTA-055", "SOTA-054"),
            ("SOTA-073", "LIT-051"),
            ("SOTA-073", "SOTA-048"),
            ("SOTA-074", "SOTA-054"),
            ("SOTA-076", "ADR-020"),
            ("SOTA-076", "ADR-026"),
        ]
    }
    # the labels the diagram needs come along
    assert Triple(iri("SOTA-049"), NamedNode(v.HAS_STATUS), NamedNode(v.status_iri("Rejected"))) in triples
    assert Triple(iri("SOTA-048"), NamedNode(v.TITLE), Literal("Group small tensors before communication")) in triples
    assert Triple(iri("LIT-051"), NamedNode(v.AUTHORS), Literal("Jiang et al.")) in triples


def test_the_supersessions_view_states_each_replacement_once(backend):
    triples = run_view(backend, "supersessions").triples
    relations = sorted(
        (t.subject.value.removeprefix(v.ID), t.predicate.value, t.object.value.removeprefix(v.ID))
        for t in triples
        if t.predicate.value in (v.REPLACES, v.IS_REPLACED_BY, v.WAS_REVISION_OF, v.CURRENT_VERSION)
    )
    revised = ["SOTA-017", "SOTA-018", "SOTA-019", "SOTA-031", "SOTA-054", "SOTA-058", "SOTA-222"]
    expected = [("ADR-026", v.REPLACES, "ADR-020")]
    expected += [(p, v.CURRENT_VERSION, f"{p}-v2") for p in revised]
    expected += [(f"{p}-v2", v.WAS_REVISION_OF, f"{p}-v1") for p in revised]
    assert relations == sorted(expected)


def test_the_topic_view(backend):
    triples = run_view(backend, "topic", {"topic": "distributed-optimization"}).triples
    topic = NamedNode(v.topic_iri("distributed-optimization"))
    filed = {t.subject for t in triples if t.predicate.value == v.FILED_UNDER}
    assert len(filed) == 42 and all(t.object == topic for t in triples if t.predicate.value == v.FILED_UNDER)
    assert Triple(topic, NamedNode(v.PREF_LABEL), Literal("Distributed optimization")) in triples
    cites = {(t.subject, t.object) for t in triples if t.predicate.value == v.CITES}
    assert (iri("SOTA-049"), iri("LIT-051")) in cites and len(cites) == 36


def test_view_results_are_sorted_and_without_repeats(backend):
    triples = run_view(backend, "citations").triples
    assert len(set(triples)) == len(triples)
    assert list(triples) == sorted(triples, key=lambda t: (str(t.subject), str(t.predicate), str(t.object)))


# ------------------------------------------------------------------------------------------ golden diagrams


@pytest.mark.parametrize("fmt, extension", [("mermaid", "mmd"), ("dot", "dot")])
@pytest.mark.parametrize("name", list(VIEWS))
def test_view_diagrams_golden(runner, built_store, name, fmt, extension):
    result = invoke(runner, built_store, "export", "view", name, *VIEWS[name], "--format", fmt)
    assert result.exit_code == 0, result.output
    assert_golden(f"views/{name}.{extension}", result.stdout)


def test_rejected_practices_look_different(runner, built_store):
    mermaid = (GOLDEN / "views" / "rejections.mmd").read_text(encoding="utf-8")
    assert '  SOTA_049("SOTA-049 (Rejected)<br/>Set buffer size to network…")' in mermaid
    assert "  SOTA_049 -.->|names| SOTA_048" in mermaid
    assert "  class SOTA_046,SOTA_049,SOTA_055,SOTA_073,SOTA_074,SOTA_076 practiceRejected" in mermaid
    assert "  classDef practiceRejected fill:#fde8e8,stroke:#c53030,color:#9b2c2c,stroke-dasharray:6 4" in mermaid
    dot = (GOLDEN / "views" / "rejections.dot").read_text(encoding="utf-8")
    assert (
        '  "SOTA_049" [label="SOTA-049 (Rejected)\\nSet buffer size to network…", shape="box", '
        'style="filled,rounded,dashed", fillcolor="#fde8e8", color="#c53030", fontcolor="#9b2c2c", '
        'tooltip="SOTA-049 (Rejected)\\nSet buffer size to network bandwidth-delay product"];'
    ) in dot
    assert '  "SOTA_048" [label="SOTA-048\\nGroup small tensors before communication", shape="box", ' in dot


# A grammar of the Mermaid flowchart subset diagrams.to_mermaid writes: every line must be one of these.
_MERMAID_ID = r"[A-Za-z][A-Za-z0-9_]*"
_MERMAID_LABEL = r'"(?:[^"<>#]|#(?:quot|lt|gt|amp|\d+);|<br/>)*"'
_MERMAID_SHAPES = [("(", ")"), ("[", "]"), ("([", "])"), ("[[", "]]"), ("{{", "}}"), ("[(", ")]")]
_MERMAID_NODE = re.compile(
    rf" {{2,4}}(?P<id>{_MERMAID_ID})(?:"
    + "|".join(re.escape(a) + _MERMAID_LABEL + re.escape(b) for a, b in _MERMAID_SHAPES)
    + ")"
)
_MERMAID_SUBGRAPH = re.compile(rf"  subgraph (?P<id>{_MERMAID_ID})\[{_MERMAID_LABEL}\]")
_MERMAID_EDGE = re.compile(rf"  (?P<a>{_MERMAID_ID}) (?:-->|-\.->|==>)\|[a-z ]+\| (?P<b>{_MERMAID_ID})")
_MERMAID_CLASSDEF = re.compile(r"  classDef (?P<name>[A-Za-z]+) [a-z-]+:[#\w. ]+(?:,[a-z-]+:[#\w. ]+)*")
_MERMAID_CLASS = re.compile(rf"  class (?P<ids>{_MERMAID_ID}(?:,{_MERMAID_ID})*) (?P<name>[A-Za-z]+)")
_MERMAID_RESERVED = {"end", "graph", "flowchart", "subgraph", "style", "class", "classdef", "click", "linkstyle"}


def check_mermaid(text: str) -> None:
    """Fail unless ``text`` is a flowchart in the subset: declared nodes before edges, known classes."""
    lines = text.split("\n")
    assert lines[-1] == "", "ends with a newline"
    lines = [line for line in lines[:-1] if not line.startswith("%% ")]
    assert lines[0] == "flowchart LR"
    nodes: set[str] = set()
    defined: set[str] = set()
    open_subgraph = False
    for line in lines[1:]:
        if match := _MERMAID_SUBGRAPH.fullmatch(line):
            assert not open_subgraph and match["id"] not in nodes, line
            open_subgraph = True
            nodes.add(match["id"])  # an edge may start or end at a subgraph
        elif line == "  end":
            assert open_subgraph, "end without subgraph"
            open_subgraph = False
        elif (match := _MERMAID_NODE.fullmatch(line)) and line.startswith("    ") == open_subgraph:
            assert match["id"] not in nodes, f"node declared twice: {line}"
            assert match["id"].lower() not in _MERMAID_RESERVED and match["id"][0] not in "ox"
            nodes.add(match["id"])
        elif match := _MERMAID_EDGE.fullmatch(line):
            assert {match["a"], match["b"]} <= nodes, f"edge between undeclared nodes: {line}"
        elif match := _MERMAID_CLASSDEF.fullmatch(line):
            defined.add(match["name"])
        elif match := _MERMAID_CLASS.fullmatch(line):
            assert match["name"] in defined and set(match["ids"].split(",")) <= nodes, line
        else:
            raise AssertionError(f"not in the Mermaid subset: {line!r}")
    assert not open_subgraph, "a subgraph is not closed"


@pytest.mark.parametrize("name", list(VIEWS))
def test_mermaid_of_each_view_is_in_the_grammar(name):
    check_mermaid((GOLDEN / "views" / f"{name}.mmd").read_text(encoding="utf-8"))


def test_the_mermaid_grammar_check_can_fail():
    good = (GOLDEN / "views" / "rejections.mmd").read_text(encoding="utf-8")
    for broken in [
        good.replace("-.->|names|", "-.->|names"),
        good.replace('"SOTA-048<br/>', '"SOTA-048"<br/>'),
        good.replace("SOTA_049 -.->", "SOTA_999 -.->"),
        good.replace("flowchart LR", "flowchart"),
    ]:
        with pytest.raises(AssertionError):
            check_mermaid(broken)


def test_mermaid_parses_with_mermaid_js(tmp_path):
    """The real Mermaid parser, when installed with `npm install --prefix tests/mermaid` (see its package.json)."""
    node = shutil.which("node")
    if node is None or not (MERMAID_CHECKER / "node_modules" / "mermaid").is_dir():
        pytest.skip("Mermaid's parser is not installed (npm install --prefix tests/mermaid)")
    files = [str(GOLDEN / "views" / f"{name}.mmd") for name in VIEWS]
    broken = tmp_path / "broken.mmd"
    broken.write_text("flowchart LR\n  A --> --> B\n", encoding="utf-8")
    result = subprocess.run(
        [node, str(MERMAID_CHECKER / "parse.mjs"), *files, str(broken)], capture_output=True, text=True, timeout=120
    )
    lines = result.stdout.splitlines()
    assert lines[:-1] == [f"{file}: ok flowchart-v2" for file in files], result.stdout + result.stderr
    assert lines[-1].startswith(f"{broken}: Parse error on line 2")
    assert result.returncode == 1


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz is not installed (apt-get install graphviz)")
def test_dot_of_each_view_renders_with_graphviz():
    sources = [(GOLDEN / "views" / f"{name}.dot").read_text(encoding="utf-8") for name in VIEWS]
    svgs = render_svgs(sources)
    for source, svg in zip(sources, svgs, strict=True):
        assert svg.startswith('<?xml version="1.0" encoding="UTF-8" standalone="no"?>')
        assert svg.rstrip().endswith("</svg>")
        declared = len(re.findall(r"^  \"\w+\" \[(?:shape=plain, )?label=", source, re.M))
        drawn_edges = len(re.findall(r"^  \"\w+\"(?::\"\w+\"(?::[ew])?)? -> ", source, re.M))
        assert svg.count('class="node"') == declared
        assert svg.count('class="edge"') == drawn_edges
    assert ">SOTA&#45;049 (Rejected)</text>" in svgs[1]


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz is not installed (apt-get install graphviz)")
def test_many_diagrams_are_drawn_in_batches_each_in_its_place(monkeypatch: pytest.MonkeyPatch):
    """A site's diagrams go to several dot processes (batches of about RENDER_BATCH_CHARS, as many
    at once as there are cores); each source still gets its own drawing, in order."""
    from sotakg.views import diagrams

    sources = [f'digraph "g{n:02d}" {{ "a{n}" -> "b{n}" }}\n' for n in range(10, 50)]  # of one length
    calls: list[int] = []
    real = diagrams._render_batch

    def counting(dot, batch, timeout):
        calls.append(len(batch))
        return real(dot, batch, timeout)

    monkeypatch.setattr(diagrams, "_render_batch", counting)
    monkeypatch.setattr(diagrams, "RENDER_BATCH_CHARS", 3 * len(sources[0]))
    svgs = render_svgs(sources)
    assert sorted(calls) == [1] + [3] * 13
    assert [re.search(r"<title>(g\d+)</title>", svg).group(1) for svg in svgs] == [f"g{n}" for n in range(10, 50)]


#: The site's page is 74rem wide less 1.5rem of padding each side, at 16px a rem: 1136px, or 852pt.
SITE_PAGE_WIDTH_PT = (74 - 3) * 16 * 72 / 96


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz is not installed (apt-get install graphviz)")
def test_the_topic_diagram_is_grouped_and_fits_the_site_page(backend):
    """42 practices filed under one topic: one table per status and one for the papers, one "filed
    under" arrow per table, and a drawing within the site's page width, not many times taller."""
    view = run_view(backend, "topic", {"topic": "distributed-optimization"})
    source = to_dot(diagram_from_triples(view.triples), "topic distributed-optimization")
    headings = re.findall(r"<B>([^<]+)</B>", source)
    assert headings == ["Active practices (28)", "Proposed practices (8)", "Rejected practices (6)", "Papers (18)"]
    assert source.count('label="filed under"') == 3  # one per practice table (papers are not filed here)
    rows = re.findall(r'<TD PORT="(\w+)"', source)
    assert len(rows) == len(set(rows)) == 28 + 8 + 6 + 18
    svg = render_svgs([source])[0]
    width, height = (float(n) for n in re.search(r'<svg width="([\d.]+)pt" height="([\d.]+)pt"', svg).groups())
    assert width <= SITE_PAGE_WIDTH_PT
    assert height <= 3 * width


def test_the_topic_mermaid_groups_practices_by_status_and_papers():
    mermaid = (GOLDEN / "views" / "topic.mmd").read_text(encoding="utf-8")
    assert re.findall(r'^  subgraph (group_\d)\["([^"]+)"\]$', mermaid, re.M) == [
        ("group_0", "Active practices (28)"),
        ("group_1", "Proposed practices (8)"),
        ("group_2", "Rejected practices (6)"),
        ("group_3", "Papers (18)"),
    ]
    assert re.findall(r"^  (\S+) -->\|filed under\| (\S+)$", mermaid, re.M) == [
        (f"group_{n}", "topic_distributed_optimization") for n in range(3)
    ]
    check_mermaid(mermaid)


def test_a_topic_with_few_records_is_drawn_node_by_node():
    def filed(n: int) -> list[Triple]:
        practice = iri(f"SOTA-{n:03}")
        return [
            Triple(practice, NamedNode(v.FILED_UNDER), NamedNode(v.TOPIC + "small")),
            Triple(practice, NamedNode(v.TYPE), NamedNode(v.PRACTICE)),
        ]

    twelve = [t for n in range(1, 13) for t in filed(n)]
    source = to_dot(diagram_from_triples(twelve))
    assert "TABLE" not in source and source.count('label="filed under"') == 12
    paper = Triple(iri("LIT-001"), NamedNode(v.FILED_UNDER), NamedNode(v.TOPIC + "small"))  # untyped: not grouped
    source = to_dot(diagram_from_triples([*twelve, *filed(13), paper]))
    assert source.count("<TABLE") == 1 and source.count('label="filed under"') == 2
    assert '"LIT_001" -> "small" [label="filed under"' in source


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz is not installed (apt-get install graphviz)")
def test_svg_tooltips_have_real_line_breaks(backend):
    """Graphviz shows a node's label as its tooltip, with the label's \\n escape spelt out; each node
    and table row gets its own tooltip whose line break is a real one."""
    for name, params in (("citations", {}), ("topic", {"topic": "distributed-optimization"})):
        diagram = diagram_from_triples(run_view(backend, name, params).triples)
        links = {node.iri: f"{node.name}.html" for node in diagram.nodes}
        svg = render_svgs([to_dot(diagram, name, links)])[0]
        titles = re.findall(r'xlink:title="([^"]*)"', svg)
        assert titles and not [t for t in titles if "\\n" in t]
        assert "LIT&#45;016&#10;Huang et al. (2018)" in titles
        assert "SOTA&#45;049 (Rejected)&#10;Set buffer size to network bandwidth&#45;delay product" in titles or (
            "SOTA&#45;049&#10;Set buffer size to network bandwidth&#45;delay product" in titles
        )


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz is not installed (apt-get install graphviz)")
@pytest.mark.parametrize("practices", [1, 13], ids=["node by node", "in a table"])
def test_a_title_past_graphviz_string_limit_is_cut_in_its_tooltip(practices):
    """Graphviz refuses a whole diagram with a quoted string or HTML attribute past 16,384
    characters: one record's long title (escaped up to six times longer) must not stop it."""
    long_title = " ".join(['"&\\<x>'] * 2400)  # 16,800 characters, each of them escaped in DOT and HTML
    triples = [
        Triple(iri("SOTA-001"), NamedNode(v.TITLE), Literal(long_title)),
        *[
            Triple(iri(f"SOTA-{n:03}"), NamedNode(predicate), NamedNode(value))
            for n in range(1, practices + 1)
            for predicate, value in ((v.TYPE, v.PRACTICE), (v.FILED_UNDER, v.TOPIC + "small"))
        ],
    ]
    diagram = diagram_from_triples(triples)
    links = {node.iri: f"{node.name}.html" for node in diagram.nodes}  # Graphviz keeps a cell's tooltip with a link
    svg = render_svgs([to_dot(diagram, "long", links)])[0]
    tooltip = next(t for t in re.findall(r'xlink:title="([^"]*)"', svg) if t.startswith("SOTA&#45;001&#10;"))
    assert tooltip.endswith("\u2026") and 1000 < len(tooltip.split("&#10;", 1)[1]) < len(long_title)


# ------------------------------------------------------------------------------------------ the command


@pytest.mark.parametrize(
    "fmt, rdf_format", [("ttl", RdfFormat.TURTLE), ("nt", RdfFormat.N_TRIPLES), ("jsonld", RdfFormat.JSON_LD)]
)
def test_rdf_formats_hold_the_view(runner, built_store, backend, fmt, rdf_format):
    result = invoke(runner, built_store, "export", "view", "rejections", "--format", fmt)
    assert result.exit_code == 0, result.output
    parsed = {quad.triple for quad in parse(result.stdout_bytes, rdf_format)}
    assert parsed == set(run_view(backend, "rejections").triples)


@pytest.mark.parametrize(
    "filename, start",
    [
        ("view.ttl", "@prefix "),
        ("view.nt", "<https://w3id.org/sotakg/id/ADR-020> "),
        ("view.jsonld", '[{"@id":'),
        ("view.mmd", "%% sotakg view: supersessions\nflowchart LR\n"),
        ("view.dot", 'digraph "supersessions" {\n'),
        pytest.param(
            "view.svg",
            "<?xml",
            marks=pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz is not installed"),
        ),
    ],
)
def test_the_format_is_guessed_from_the_file_extension(runner, built_store, tmp_path, filename, start):
    target = tmp_path / filename
    result = invoke(runner, built_store, "export", "view", "supersessions", "-o", str(target))
    assert result.exit_code == 0, result.output
    assert result.output == ""
    assert target.read_text(encoding="utf-8").startswith(start)


@pytest.mark.parametrize(
    "args, code, message",
    [
        (["rejections"], 2, "writing to standard output needs --format (for example --format mermaid)"),
        (["rejections", "-o", "view"], 2, "cannot tell the format of view"),
        (
            ["rejections", "--format", "png"],
            2,
            "unknown view format 'png'; use one of: turtle, ntriples, nquads, trig, jsonld, rdfxml, mermaid, dot, svg",
        ),
        (["rejection", "--format", "dot"], 2, "no view called 'rejection'; did you mean rejections?"),
        (["topic", "--format", "dot"], 2, "view topic needs -p topic=distributed-optimization"),
        (["topic", "-p", "topic=No Such", "--format", "dot"], 2, "parameter topic must match"),
        (
            ["topic", "-p", "topic=nope", "--format", "dot"],
            2,
            "view topic found nothing for topic=nope: no record matches that value",
        ),
        (["citations", "-p", "topic=x", "--format", "dot"], 2, "view citations has no parameter topic"),
    ],
)
def test_export_view_usage_errors(runner, built_store, args, code, message):
    result = invoke(runner, built_store, "export", "view", *args)
    assert result.exit_code == code, result.output
    assert message in " ".join(result.output.split())


def test_svg_without_graphviz_names_the_package(runner, built_store, monkeypatch):
    monkeypatch.setattr(shutil, "which", lambda name, *args, **kwargs: None)
    result = invoke(runner, built_store, "export", "view", "rejections", "--format", "svg")
    assert result.exit_code == 1
    assert result.output == (
        "Error: SVG output needs Graphviz's dot program, which is not installed; install the graphviz package "
        "(for example: apt-get install graphviz), or use --format dot or mermaid\n"
    )
    with pytest.raises(GraphvizMissing):
        render_svgs(["digraph {}"])


def _fake_dot(folder: Path, seconds: float) -> Path:
    """A ``dot`` that takes ``seconds`` and then draws one empty SVG per graph it is given."""
    import sys

    script = folder / "dot"
    script.write_text(
        f"#!{sys.executable}\nimport sys, time\ntext = sys.stdin.read()\ntime.sleep({seconds})\n"
        "sys.stdout.write(\"<?xml version='1.0'?><svg></svg>\\n\" * text.count('digraph'))\n",
        encoding="utf-8",
    )
    script.chmod(0o755)
    return script


def test_a_large_view_is_drawn_after_a_note_however_long_dot_takes(runner, built_store, monkeypatch, tmp_path):
    import sotakg.views.diagrams as diagrams

    _fake_dot(tmp_path, 0)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setattr(diagrams, "MAX_DRAWN_LINKS", 2)
    limits = []
    real_run = subprocess.run
    monkeypatch.setattr(diagrams.subprocess, "run", lambda *a, **k: limits.append(k["timeout"]) or real_run(*a, **k))
    result = invoke(runner, built_store, "export", "view", "rejections", "--format", "svg")
    assert result.exit_code == 0, result.output
    assert result.stdout == "<?xml version='1.0'?><svg></svg>\n"
    links = result.stderr.split(" links:")[0].rsplit(" ", 1)[-1]
    assert int(links) > 2
    assert result.stderr.endswith(
        " links: Graphviz may take minutes to lay it out (--format dot or mermaid writes its source at once).\n"
    )
    assert result.stderr.startswith("Note: the diagram has ")
    assert limits == [None]  # asked for on the command line: never cut by the site's limit

    monkeypatch.setattr(diagrams, "MAX_DRAWN_LINKS", 1_000_000)
    quiet = invoke(runner, built_store, "export", "view", "rejections", "--format", "svg")
    assert (quiet.exit_code, quiet.stderr) == (0, "")


def test_a_site_batch_past_its_time_limit_says_so(tmp_path, monkeypatch):
    _fake_dot(tmp_path, 5)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    with pytest.raises(SotakgError) as raised:
        render_svgs(["digraph {}"], timeout=0.5)
    assert str(raised.value) == (
        "Graphviz's dot did not draw the diagrams within 0.5 seconds; "
        "--format dot or mermaid writes their source at once"
    )


def test_a_view_lookup_reads_only_the_named_file(tmp_path):
    (tmp_path / "one.rq").write_text("#+ summary: one\nCONSTRUCT { ?s a ?t } WHERE { ?s a ?t }\n", encoding="utf-8")
    (tmp_path / "select.rq").write_text("#+ summary: not a view\nSELECT * WHERE { ?s ?p ?o }\n", encoding="utf-8")
    assert find_view("one", tmp_path).summary == "one"
    with pytest.raises(QueryHeaderError, match="select.rq: a view must be a CONSTRUCT query"):
        find_view("select", tmp_path)
    with pytest.raises(
        UnknownView, match="no view called 'on'; did you mean one\\? 'sotakg views' lists them: one, select"
    ):
        find_view("on", tmp_path)


def test_unknown_view_is_a_usage_problem():
    with pytest.raises(UnknownView, match="'sotakg views' lists them: citations, rejections, supersessions, topic"):
        find_view("nope")
    assert resolve_view_format(None, Path("x.gv")) == "dot"
    assert resolve_view_format("MMD", None) == "mermaid"


# ------------------------------------------------------------------------------------------ the renderers


def test_titles_are_cut_at_a_word_with_an_ellipsis():
    assert short_title("Group small tensors before communication") == "Group small tensors before communication"
    assert short_title("Set buffer size to network bandwidth-delay product") == "Set buffer size to network…"
    assert short_title("x" * 50) == "x" * 39 + "…"
    assert short_title("  spread\nover   lines ") == "spread over lines"


def _practice(record: str, title: str, status: str = "Active") -> list[Triple]:
    node = iri(record)
    return [
        Triple(node, NamedNode(v.TYPE), NamedNode(v.PRACTICE)),
        Triple(node, NamedNode(v.IDENTIFIER), Literal(record)),
        Triple(node, NamedNode(v.TITLE), Literal(title)),
        Triple(node, NamedNode(v.HAS_STATUS), NamedNode(v.status_iri(status))),
    ]


def test_labels_are_escaped_in_both_languages():
    triples = _practice("SOTA-001", 'Say "no" to <b> & #1 `x` \\ here')
    mermaid = to_mermaid(diagram_from_triples(triples))
    assert '  SOTA_001("SOTA-001<br/>Say #quot;no#quot; to #lt;b#gt; #amp; #35;1 #96;x#96; \\ here")' in mermaid
    dot = to_dot(diagram_from_triples(triples))
    # "&" as "&amp;": Graphviz reads character references in a label (and a tooltip)
    assert '  "SOTA_001" [label="SOTA-001\\nSay \\"no\\" to <b> &amp; #1 `x` \\\\ here", shape="box"' in dot
    check_mermaid(mermaid)


def test_a_label_cannot_hold_a_mermaid_directive():
    triples = _practice("SOTA-001", "%%{init: {'theme': 'dark'}}%% 100%")
    mermaid = to_mermaid(diagram_from_triples(triples))
    assert "%%{" not in mermaid and "}%%" not in mermaid
    assert "#37;#37;{init: {'theme': 'dark'}}#37;#37; 100#37;" in mermaid
    check_mermaid(mermaid)


def test_node_names_are_safe_and_unique():
    triples = [
        Triple(NamedNode("https://example.org/end"), NamedNode(v.CITES), NamedNode("https://example.org/o-1")),
        Triple(NamedNode("https://example.org/o_1"), NamedNode(v.CITES), NamedNode("https://example.org/end")),
    ]
    diagram = diagram_from_triples(triples)
    assert [node.name for node in diagram.nodes] == ["n_end", "n_o_1", "n_o_1_2"]
    check_mermaid(to_mermaid(diagram))


def test_replacement_is_drawn_once_whichever_way_it_is_stated():
    old, new = iri("ADR-020"), iri("ADR-026")
    triples = [
        Triple(new, NamedNode(v.REPLACES), old),
        Triple(old, NamedNode(v.IS_REPLACED_BY), new),
        Triple(old, NamedNode(v.TYPE), NamedNode(v.ADR)),
        Triple(new, NamedNode(v.TYPE), NamedNode(v.ADR)),
        Triple(old, NamedNode(v.HAS_STATUS), NamedNode(v.status_iri("Superseded"))),
    ]
    diagram = diagram_from_triples(triples)
    assert [(e.source, e.relation, e.target) for e in diagram.edges] == [("ADR_026", "replaces", "ADR_020")]
    assert [(n.name, n.heading, n.style) for n in diagram.nodes] == [
        ("ADR_020", "ADR-020 (Superseded)", "adrSuperseded"),
        ("ADR_026", "ADR-026", "adr"),
    ]


def test_diagrams_do_not_depend_on_the_order_of_the_triples(backend):
    triples = list(run_view(backend, "topic", {"topic": "distributed-optimization"}).triples)
    expected_mermaid = to_mermaid(diagram_from_triples(triples))
    expected_dot = to_dot(diagram_from_triples(triples))
    shuffled = triples[:]
    random.Random(7).shuffle(shuffled)
    assert to_mermaid(diagram_from_triples(shuffled)) == expected_mermaid
    assert to_dot(diagram_from_triples(reversed(triples))) == expected_dot


def test_a_record_neighbourhood(backend):
    everything = list(run_view(backend, "topic", {"topic": "distributed-optimization"}).triples)
    diagram: Diagram = diagram_from_triples(neighbourhood(everything, v.record_iri("SOTA-049")))
    assert [(e.source, e.relation, e.target) for e in diagram.edges] == [
        ("SOTA_049", "cites", "LIT_051"),
        ("SOTA_049", "filed under", "topic_distributed_optimization"),
        ("SOTA_049", "names", "SOTA_048"),
    ]


def test_the_readme_shows_the_supersessions_diagram():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    diagram = (GOLDEN / "views" / "supersessions.mmd").read_text(encoding="utf-8")
    assert f"```mermaid\n{diagram}```" in readme


def test_graph_result_renders_empty(backend):
    assert to_mermaid(diagram_from_triples(GraphResult(()).triples)) == "flowchart LR\n"


def test_views_shows_one_view_in_full(runner):
    result = runner.invoke(cli, ["views", "topic"])
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("topic: One topic's subgraph")
    assert "Usage: sotakg export view topic -p topic=distributed-optimization\n" in result.stdout
    assert "CONSTRUCT" in result.stdout
    unknown = runner.invoke(cli, ["views", "topik"])
    assert unknown.exit_code == 2
    assert "no view called 'topik'; did you mean topic?" in unknown.output


FORMAT_RUNS = [
    *(["export", "view", "rejections", "--format", fmt] for fmt in ("ttl", "nt", "jsonld", "mermaid", "dot")),
    *(["export", "rdf", "-f", fmt] for fmt in ("turtle", "ntriples", "nquads", "trig", "jsonld", "rdfxml")),
    *(["sparql", "DESCRIBE id:SOTA-049", "--format", fmt] for fmt in ("turtle", "ntriples", "jsonld", "rdfxml")),
    *(["sparql", "SELECT ?p WHERE { ?p a sota:Practice } LIMIT 2", "--format", fmt] for fmt in ("csv", "tsv", "xml")),
    *(["sparql", "ASK {}", "--format", fmt] for fmt in ("table", "csv", "tsv", "json", "xml")),
]


@pytest.mark.parametrize("args", FORMAT_RUNS, ids=[" ".join(a[:2] + a[-1:]) for a in FORMAT_RUNS])
def test_output_ends_with_a_line_break_in_every_format(runner, built_store, args):
    result = invoke(runner, built_store, *args)
    assert result.exit_code == 0, result.output
    assert result.stdout.endswith("\n") and not result.stdout.endswith("\n\n\n")
