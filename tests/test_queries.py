"""Canned queries: their headers, parameters, answers on the shipped data, output formats, the README."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sotakg.cli import cli
from sotakg.errors import ParameterProblem, QueryHeaderError, UnknownQuery
from sotakg.query.canned import (
    README_END,
    README_START,
    bind_parameters,
    find_canned,
    load_canned,
    parse_assignments,
    queries_dir,
    queries_table_markdown,
    quick_header,
    read_canned,
    run_canned,
)
from sotakg.query.results import SelectResult
from sotakg.query.sparql import LocalBackend
from sotakg.records.schema import load_anthology

from .conftest import REPO, SHIPPED_TRIPLES, assert_golden, invoke

INJECTION = 'LIT-051" } ; DROP ALL ; #'

FIXED_NAMES = {
    "practices-citing",
    "papers-of",
    "rejections",
    "rejection-of",
    "history",
    "status-by-topic",
    "most-cited-papers",
    "uncited-practices",
    "single-source-practices",
    "proposed",
    "adrs",
    "orphan-papers",
}


def rows(backend: LocalBackend, name: str, **params: str) -> list[tuple[str, ...]]:
    result = run_canned(backend, name, params)
    assert isinstance(result, SelectResult)
    return result.texts()


def column(backend: LocalBackend, name: str, variable: str, **params: str) -> list[str]:
    result = run_canned(backend, name, params)
    assert isinstance(result, SelectResult)
    return [row[result.variables.index(variable)] for row in result.texts()]


# ------------------------------------------------------------------------------------------ the set


def test_the_fixed_names_are_all_shipped():
    names = {q.name for q in load_canned()}
    assert FIXED_NAMES <= names
    assert len(names) >= len(FIXED_NAMES) + 4


def test_every_shipped_query_is_standalone_sparql():
    """Each file declares its own prefixes, so it runs in any SPARQL engine (here with no predeclared
    prefixes, on an empty store, with its parameters' examples)."""
    from pyoxigraph import Store

    store = Store()
    for query in load_canned():
        store.query(query.text, substitutions=dict(bind_parameters(query, {p.name: p.example for p in query.params})))


# ------------------------------------------------------------------------------------------ answers


def test_practices_citing(backend):
    assert rows(backend, "practices-citing", paper="LIT-051") == [
        ("id:LIT-051", "id:SOTA-046", "1", "Rejected", "Use hierarchical allreduce for tensors > 1MB"),
        ("id:LIT-051", "id:SOTA-047", "1", "Active", "Overlap communication with backward pass"),
        ("id:LIT-051", "id:SOTA-048", "1", "Active", "Group small tensors before communication"),
        ("id:LIT-051", "id:SOTA-049", "1", "Rejected", "Set buffer size to network bandwidth-delay product"),
        ("id:LIT-051", "id:SOTA-073", "1", "Rejected", "Monitor network utilization during training"),
        ("id:LIT-051", "id:SOTA-074", "1", "Rejected", "Adapt buffer sizes to network conditions"),
        ("id:LIT-051", "id:SOTA-076", "1", "Rejected", "Place replicas to minimize cross-rack traffic"),
    ]
    assert column(backend, "practices-citing", "practice", paper="LIT-016") == [
        "id:SOTA-017",
        "id:SOTA-018",
        "id:SOTA-019",
    ]
    assert rows(backend, "practices-citing", paper="LIT-999") == []


def test_practices_citing_agrees_with_the_records(backend, built_store):
    anthology = load_anthology(built_store[0])
    for paper in anthology.of_kind("paper"):
        expected = sorted(f"id:{p.id}" for p in anthology.of_kind("practice") if paper.id in p.get("cites", []))
        assert column(backend, "practices-citing", "practice", paper=paper.id) == expected


def test_papers_of(backend):
    assert rows(backend, "papers-of", practice="SOTA-155") == [
        ("id:SOTA-155", "id:LIT-212", "Douillard et al.", "2023", "", ""),
        ("id:SOTA-155", "id:LIT-214", "Douillard et al.", "2025", "", ""),
    ]
    assert rows(backend, "papers-of", practice="SOTA-017") == [
        ("id:SOTA-017", "id:LIT-016", "Huang et al.", "2018", "1811.06965", ""),
    ]
    assert rows(backend, "papers-of", practice="SOTA-049") == [
        (
            "id:SOTA-049",
            "id:LIT-051",
            "Jiang et al.",
            "2020",
            "",
            "https://www.usenix.org/conference/osdi20/presentation/jiang",
        ),
    ]
    assert rows(backend, "papers-of", practice="SOTA-214") == []


def test_rejections(backend, built_store):
    result = run_canned(backend, "rejections")
    assert isinstance(result, SelectResult)
    assert result.variables == ("practice", "title", "names", "reason")
    assert [(r[0], r[2]) for r in result.texts()] == [
        ("id:SOTA-046", "LIT-051"),
        ("id:SOTA-049", "SOTA-048"),
        ("id:SOTA-055", "LIT-059, SOTA-054"),
        ("id:SOTA-073", "LIT-051, SOTA-048"),
        ("id:SOTA-074", "SOTA-054"),
        ("id:SOTA-076", "ADR-020, ADR-026"),
    ]
    records = load_anthology(built_store[0]).by_id()
    for practice, title, _names, reason in result.texts():
        record = records[practice.removeprefix("id:")]
        assert (title, reason) == (record.get("title"), record.get("reason"))


def test_rejection_of(backend):
    assert [r[3:] for r in rows(backend, "rejection-of", practice="SOTA-073")] == [
        ("id:LIT-051", "Paper", "", "Jiang et al. (2020)", "true"),
        ("id:SOTA-048", "Practice", "Active", "Group small tensors before communication", "false"),
    ]
    only = rows(backend, "rejection-of", practice="SOTA-049")
    assert [r[:2] for r in only] == [("id:SOTA-049", "Rejected")]
    assert only[0][2].startswith("collapses two different quantities")
    assert [r[3:6] for r in rows(backend, "rejection-of", practice="SOTA-076")] == [
        ("id:ADR-020", "ADR", "Superseded"),
        ("id:ADR-026", "ADR", ""),
    ]
    assert rows(backend, "rejection-of", practice="SOTA-047") == [("id:SOTA-047", "Active", "", "", "", "", "", "")]
    # SOTA-074's "(SOTA-054)" is an analogy, not its source: the reason's words say so
    assert [r[3::4] for r in rows(backend, "rejection-of", practice="SOTA-074")] == [("id:SOTA-054", "false")]


def test_history_of_a_practice_and_of_an_adr(backend):
    assert rows(backend, "history", id="SOTA-017") == [
        ("id:SOTA-017", "1", "id:SOTA-017-v1", "", ""),
        ("id:SOTA-017", "2", "id:SOTA-017-v2", "id:SOTA-017-v1", "Active"),
    ]
    assert rows(backend, "history", id="SOTA-049") == [("id:SOTA-049", "1", "id:SOTA-049-v1", "", "Rejected")]
    for adr in ("ADR-020", "ADR-026"):
        assert rows(backend, "history", id=adr) == [
            (f"id:{adr}", "1", "id:ADR-020", "", "Superseded"),
            (f"id:{adr}", "2", "id:ADR-026", "id:ADR-020", ""),
        ]
    assert rows(backend, "history", id="ADR-059") == [("id:ADR-059", "1", "id:ADR-059", "", "")]
    assert rows(backend, "history", id="SOTA-999") == []


def test_history_of_an_adr_walks_the_whole_chain_whichever_way_each_link_is_stated():
    """Three ADRs, the first link stated only as ``isReplacedBy``, the second both ways: each member's
    history is the same three rows, once each, in chain order; an unlinked ADR is its own chain."""
    from pyoxigraph import Literal, NamedNode, Quad, Store

    def node(local: str) -> NamedNode:
        return NamedNode(f"https://w3id.org/sotakg/{local}")

    dcterms, rdf_type = "http://purl.org/dc/terms/", NamedNode("http://www.w3.org/1999/02/22-rdf-syntax-ns#type")
    store = Store()
    for adr in ("ADR-001", "ADR-002", "ADR-003", "ADR-004"):
        store.add(Quad(node(f"id/{adr}"), rdf_type, node("ontology#ADR")))
    store.add(Quad(node("id/ADR-001"), NamedNode(dcterms + "isReplacedBy"), node("id/ADR-002")))
    store.add(Quad(node("id/ADR-003"), NamedNode(dcterms + "replaces"), node("id/ADR-002")))
    store.add(Quad(node("id/ADR-002"), NamedNode(dcterms + "isReplacedBy"), node("id/ADR-003")))
    store.add(Quad(node("id/ADR-001"), node("ontology#status"), node("status/superseded")))
    pref_label = NamedNode("http://www.w3.org/2004/02/skos/core#prefLabel")
    store.add(Quad(node("status/superseded"), pref_label, Literal("Superseded")))
    query = find_canned("history")

    def history(adr: str) -> list[tuple[str, ...]]:
        answer = store.query(query.text, substitutions=dict(bind_parameters(query, {"id": adr})))
        return [
            tuple("" if row[v] is None else row[v].value.rsplit("/", 1)[-1] for v in answer.variables) for row in answer
        ]

    for adr in ("ADR-001", "ADR-002", "ADR-003"):
        assert history(adr) == [
            (adr, "1", "ADR-001", "", "Superseded"),
            (adr, "2", "ADR-002", "ADR-001", ""),
            (adr, "3", "ADR-003", "ADR-002", ""),
        ]
    assert history("ADR-004") == [("ADR-004", "1", "ADR-004", "", "")]
    # in a cycle a record is not counted among those it supersedes
    store.add(Quad(node("id/ADR-004"), NamedNode(dcterms + "replaces"), node("id/ADR-004")))
    assert history("ADR-004") == [("ADR-004", "1", "ADR-004", "ADR-004", "")]


def test_status_by_topic(backend):
    assert rows(backend, "status-by-topic") == [
        ("distributed-optimization", "Distributed optimization", "Active", "28"),
        ("distributed-optimization", "Distributed optimization", "Proposed", "8"),
        ("distributed-optimization", "Distributed optimization", "Rejected", "6"),
    ]


def test_most_cited_papers(backend):
    ranked = rows(backend, "most-cited-papers")
    assert len(ranked) == 18
    assert ranked[:6] == [
        ("id:LIT-051", "Jiang et al.", "2020", "7", "2"),
        ("id:LIT-027", "Rajbhandari et al.", "2020", "4", "4"),
        ("id:LIT-083", "Zhao et al.", "2022", "4", "4"),
        ("id:LIT-059", "Mohan et al.", "2021", "4", "3"),
        ("id:LIT-016", "Huang et al.", "2018", "3", "3"),
        ("id:LIT-056", "Lin et al.", "2017", "2", "2"),
    ]
    assert {r[0] for r in ranked[6:]} == {
        "id:LIT-004",
        "id:LIT-206",
        "id:LIT-254",
        "id:LIT-302",
        "id:LIT-735",
        "id:LIT-736",
        "id:LIT-212",
        "id:LIT-214",
        "id:LIT-222",
        "id:LIT-315",
        "id:LIT-323",
        "id:LIT-750",
    }
    assert all(r[3] == "1" for r in ranked[6:])


def test_uncited_practices(backend):
    assert [(r[0], r[1]) for r in rows(backend, "uncited-practices")] == [
        ("id:SOTA-214", "Active"),
        ("id:SOTA-215", "Proposed"),
        ("id:SOTA-216", "Proposed"),
        ("id:SOTA-219", "Active"),
        ("id:SOTA-220", "Proposed"),
        ("id:SOTA-364", "Active"),
        ("id:SOTA-376", "Active"),
    ]


def test_single_source_practices(backend, built_store):
    found = rows(backend, "single-source-practices")
    assert len(found) == 24
    assert found[0][:3] == ("id:SOTA-017", "id:LIT-016", "Huang et al.")
    anthology = load_anthology(built_store[0])
    expected = sorted(
        (f"id:{p.id}", f"id:{p.get('cites')[0]}")
        for p in anthology.of_kind("practice")
        if p.get("status") == "Active" and len(p.get("cites", [])) == 1
    )
    assert [(r[0], r[1]) for r in found] == expected


def test_proposed(backend):
    assert [(r[0], r[2]) for r in rows(backend, "proposed")] == [
        ("id:SOTA-155", "id:LIT-212"),
        ("id:SOTA-155", "id:LIT-214"),
        ("id:SOTA-189", "id:LIT-222"),
        ("id:SOTA-215", ""),
        ("id:SOTA-216", ""),
        ("id:SOTA-220", ""),
        ("id:SOTA-222", "id:LIT-323"),
        ("id:SOTA-223", "id:LIT-315"),
        ("id:SOTA-437", "id:LIT-750"),
    ]


def test_adrs(backend):
    assert [r[:4] for r in rows(backend, "adrs")] == [
        ("id:ADR-020", "Superseded", "", "ADR-026"),
        ("id:ADR-026", "", "ADR-020", ""),
        ("id:ADR-059", "", "", ""),
    ]


def test_orphan_papers_is_empty_on_the_shipped_data(backend):
    assert rows(backend, "orphan-papers") == []


def test_orphan_papers_finds_an_uncited_paper(runner, workdir):
    (workdir / "data" / "papers" / "LIT-900.yaml").write_text(
        "id: LIT-900\nauthors: Nobody et al.\nyear: 2024\narxiv: '2401.00001'\n"
    )
    result = runner.invoke(cli, ["query", "orphan-papers", "--format", "tsv"])
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == [
        "?paper\t?authors\t?year\t?arxiv\t?url",
        '<https://w3id.org/sotakg/id/LIT-900>\t"Nobody et al."\t"2024"^^<http://www.w3.org/2001/XMLSchema#gYear>'
        '\t"2401.00001"\t',
    ]


def test_the_curator_extras(backend):
    assert [r[1] for r in rows(backend, "practices-mentioning", text="BUFFER")] == [
        "id:SOTA-049",
        "id:SOTA-074",
        "id:SOTA-214",
    ]
    assert [(r[1], r[3], r[4]) for r in rows(backend, "papers-since", since="2024")] == [
        ("id:LIT-214", "2025", "1"),
        ("id:LIT-222", "2025", "1"),
        ("id:LIT-750", "2024", "1"),
    ]
    about = rows(backend, "statements-about", resource="id:SOTA-049")
    assert ("id:SOTA-049", "subject", "sota:reasonNames", "id:SOTA-048") in about
    assert ("id:SOTA-049", "object", "dcterms:isVersionOf", "id:SOTA-049-v1") in about
    assert len(about) == 12
    full = rows(backend, "statements-about", resource="<https://w3id.org/sotakg/id/SOTA-049>")
    assert full == about
    assert rows(backend, "topic-sizes") == [("distributed-optimization", "Distributed optimization", "42", "42", "0")]
    assert [(r[0], r[1]) for r in rows(backend, "revised-practices")] == [
        ("id:SOTA-017", "2"),
        ("id:SOTA-018", "2"),
        ("id:SOTA-019", "2"),
        ("id:SOTA-031", "2"),
        ("id:SOTA-054", "2"),
        ("id:SOTA-058", "2"),
        ("id:SOTA-222", "2"),
    ]
    assert [r[1] for r in rows(backend, "named-in-rejections", record="SOTA-048")] == [
        "id:SOTA-049",
        "id:SOTA-073",
    ]
    assert [r[1] for r in rows(backend, "named-in-rejections", record="ADR-026")] == ["id:SOTA-076"]


# ------------------------------------------------------------------------------------------ parameters


def test_parameters_become_terms():
    from pyoxigraph import Literal, NamedNode, Variable

    assert bind_parameters(find_canned("practices-citing"), {"paper": "LIT-051"}) == {
        Variable("paper"): NamedNode("https://w3id.org/sotakg/id/LIT-051")
    }
    assert bind_parameters(find_canned("papers-since"), {"since": "2023"}) == {
        Variable("since"): Literal("2023", datatype=NamedNode("http://www.w3.org/2001/XMLSchema#integer"))
    }
    assert bind_parameters(find_canned("practices-mentioning"), {"text": INJECTION}) == {
        Variable("text"): Literal(INJECTION)
    }
    assert bind_parameters(find_canned("statements-about"), {"resource": "topic:distributed-optimization"}) == {
        Variable("resource"): NamedNode("https://w3id.org/sotakg/topic/distributed-optimization")
    }


@pytest.mark.parametrize(
    ("name", "raw", "message"),
    [
        (
            "practices-citing",
            {"paper": "LIT-51x"},
            "parameter paper must look like LIT-051 (pattern ^LIT-\\d{3,}$), not 'LIT-51x'",
        ),
        ("practices-citing", {"paper": "LIT-051\n"}, "parameter paper must look like LIT-051"),
        ("practices-citing", {"paper": INJECTION}, "parameter paper must look like LIT-051"),
        ("practices-citing", {"paper": "SOTA-049"}, "parameter paper must look like LIT-051"),
        (
            "practices-citing",
            {},
            "query practices-citing needs -p paper=LIT-051 (paper must look like LIT-051",
        ),
        (
            "practices-citing",
            {"paper": "LIT-051", "topic": "x"},
            "query practices-citing has no parameter topic; it takes paper (id, e.g. -p paper=LIT-051)",
        ),
        (
            "rejections",
            {"practice": "SOTA-049"},
            "query rejections has no parameter practice; it takes no parameters",
        ),
        (
            "papers-since",
            {"since": "20x3"},
            "parameter since must be a whole number like 2023 (pattern ^\\d{4}$), not '20x3'",
        ),
        ("history", {"id": "LIT-051"}, "parameter id must look like SOTA-017 (pattern ^(SOTA|ADR)-\\d{3,}$)"),
        (
            "statements-about",
            {"resource": "not an iri"},
            "parameter resource must be an IRI like id:SOTA-049",
        ),
        ("statements-about", {"resource": "SOTA-049"}, "parameter resource must be an IRI"),
        (
            "statements-about",
            {"resource": "<http://x> } ; DROP ALL ; #"},
            "parameter resource must be an IRI",
        ),
    ],
)
def test_bad_parameters_say_the_expected_form(name, raw, message):
    with pytest.raises(ParameterProblem) as caught:
        bind_parameters(find_canned(name), raw)
    assert str(caught.value).startswith(message)


def test_assignments():
    assert parse_assignments(["paper=LIT-051", "text=a=b"]) == {"paper": "LIT-051", "text": "a=b"}
    with pytest.raises(ParameterProblem, match="parameters are given as -p NAME=VALUE, not 'LIT-051'"):
        parse_assignments(["LIT-051"])
    with pytest.raises(ParameterProblem, match="parameter paper is given twice"):
        parse_assignments(["paper=LIT-051", "paper=LIT-016"])


def test_unknown_query_suggests_a_close_name():
    with pytest.raises(UnknownQuery, match="no canned query called 'rejection'; did you mean rejections?"):
        find_canned("rejection")


def test_a_lookup_reads_only_the_named_file(tmp_path):
    """Running one query must not parse the others: a malformed neighbour does not stand in its way,
    and a name that is a path reaches no file outside the folder."""
    (tmp_path / "good.rq").write_text("#+ summary: every type\nSELECT ?t WHERE { ?s a ?t }\n", encoding="utf-8")
    (tmp_path / "broken.rq").write_text("#+ summary: [unclosed\nSELECT * WHERE {}\n", encoding="utf-8")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.rq").write_text("#+ summary: outside the folder\nSELECT * WHERE {}\n", encoding="utf-8")
    folder = tmp_path
    assert find_canned("good", folder).summary == "every type"
    with pytest.raises(QueryHeaderError, match="broken.rq"):
        find_canned("broken", folder)
    with pytest.raises(UnknownQuery, match=r"no canned query called 'goo'; did you mean good\? .* broken, good$"):
        find_canned("goo", folder)
    with pytest.raises(UnknownQuery, match="no canned query called 'outside/secret'"):
        find_canned("outside/secret", folder)
    with pytest.raises(UnknownQuery):
        find_canned("../" + tmp_path.name + "/good", folder)


def test_injection_is_only_a_string_that_matches_nothing(runner, built_store, backend):
    result = invoke(runner, built_store, "query", "practices-mentioning", "-p", f"text={INJECTION}")
    assert result.exit_code == 0, result.output
    assert result.stdout == "text  practice  status  title\n----  --------  ------  -----\n0 rows\n"
    refused = invoke(runner, built_store, "query", "practices-citing", "-p", f"paper={INJECTION}")
    assert refused.exit_code == 2
    assert "parameter paper must look like LIT-051" in refused.stderr
    # the graph is untouched: still every triple, and the paper still has its seven practices
    from sotakg.query.sparql import run_query

    count = run_query(backend, "SELECT (COUNT(*) AS ?n) WHERE { ?s ?p ?o }")
    assert isinstance(count, SelectResult)
    assert count.texts() == [(str(SHIPPED_TRIPLES),)]
    assert len(rows(backend, "practices-citing", paper="LIT-051")) == 7


# ------------------------------------------------------------------------------------------ CLI


def test_cli_bad_parameters_exit_2(runner, built_store):
    cases = [
        (
            ["query", "practices-citing", "-p", "paper=LIT-51x"],
            "parameter paper must look like LIT-051 (pattern ^LIT-\\d{3,}$), not 'LIT-51x'",
        ),
        (["query", "practices-citing"], "query practices-citing needs -p paper=LIT-051"),
        (
            ["query", "practices-citing", "-p", "paper=LIT-051", "-p", "year=2020"],
            "query practices-citing has no parameter year",
        ),
        (["query", "practices-citing", "-p", "LIT-051"], "parameters are given as -p NAME=VALUE"),
        (["query", "practises-citing", "-p", "paper=LIT-051"], "did you mean practices-citing?"),
    ]
    for args, message in cases:
        result = invoke(runner, built_store, *args)
        assert result.exit_code == 2, (args, result.output)
        assert message in result.stderr
        assert result.stdout == ""


def test_queries_lists_every_query(runner):
    result = runner.invoke(cli, ["queries"])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["NAME", "PARAMETERS", "SUMMARY"]
    assert len(lines) == 1 + len(load_canned())
    citing = next(line for line in lines if line.startswith("practices-citing "))
    assert citing.split(None, 1)[1].startswith("paper (id, e.g. LIT-051)")
    assert citing.endswith("The practices that cite a paper, with their version and status")
    assert lines[0].index("SUMMARY") == citing.index("The practices")


def test_queries_shows_one_in_full(runner):
    result = runner.invoke(cli, ["queries", "practices-citing"])
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith(
        "practices-citing: The practices that cite a paper, with their version and status\n"
    )
    assert "Usage: sotakg query practices-citing -p paper=LIT-051\n" in result.stdout
    assert "  paper (id): must look like LIT-051 (pattern ^LIT-\\d{3,}$) - the paper's identifier\n" in result.stdout
    assert "SELECT ?paper ?practice ?version ?status ?title WHERE {" in result.stdout
    assert "#+" not in result.stdout


@pytest.mark.parametrize("fmt", ["table", "csv", "tsv", "json"])
def test_formats_golden(runner, built_store, fmt):
    result = invoke(runner, built_store, "query", "practices-citing", "-p", "paper=LIT-051", "--format", fmt)
    assert result.exit_code == 0, result.output
    # stdout_bytes: click's .stdout turns the CSV's CRLF line ends into LF
    assert_golden(f"practices-citing-LIT-051.{fmt}", result.stdout_bytes.decode("utf-8"))


def test_w3c_formats_read_back_as_the_same_results(runner, built_store, backend):
    from pyoxigraph import QueryResultsFormat, parse_query_results

    expected = run_canned(backend, "papers-of", {"practice": "SOTA-049"})
    assert isinstance(expected, SelectResult)
    for fmt, parsed_as in (
        ("json", QueryResultsFormat.JSON),
        ("xml", QueryResultsFormat.XML),
        ("tsv", QueryResultsFormat.TSV),
    ):
        result = invoke(runner, built_store, "query", "papers-of", "-p", "practice=SOTA-049", "-f", fmt)
        assert result.exit_code == 0, result.output
        parsed = parse_query_results(result.stdout, parsed_as)
        assert [v.value for v in parsed.variables] == list(expected.variables)
        assert [tuple(s[v] for v in expected.variables) for s in parsed] == list(expected.rows)
    document = json.loads(
        invoke(runner, built_store, "query", "papers-of", "-p", "practice=SOTA-049", "-f", "json").stdout
    )
    assert document["head"]["vars"] == ["practice", "paper", "authors", "year", "arxiv", "url"]
    assert document["results"]["bindings"][0]["year"] == {
        "type": "literal",
        "value": "2020",
        "datatype": "http://www.w3.org/2001/XMLSchema#gYear",
    }
    assert "arxiv" not in document["results"]["bindings"][0]  # unbound variables are left out


def test_csv_is_w3c_csv(runner, built_store):
    result = invoke(runner, built_store, "query", "papers-of", "-p", "practice=SOTA-155", "-f", "csv")
    assert result.stdout_bytes.decode("utf-8") == (
        "practice,paper,authors,year,arxiv,url\r\n"
        "https://w3id.org/sotakg/id/SOTA-155,https://w3id.org/sotakg/id/LIT-212,Douillard et al.,2023,,\r\n"
        "https://w3id.org/sotakg/id/SOTA-155,https://w3id.org/sotakg/id/LIT-214,Douillard et al.,2025,,\r\n"
    )


def test_table_fits_the_terminal_width(runner, built_store):
    result = invoke(runner, built_store, "query", "rejections", env={"COLUMNS": "60"})
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert all(len(line) <= 60 for line in lines)
    assert lines[2].startswith("id:SOTA-046  ")
    assert "…" in lines[2]
    assert lines[-1] == "6 rows"
    whole = invoke(runner, built_store, "query", "rejections")  # not a terminal: nothing is cut
    assert "…" not in whole.stdout
    assert "which is not a practice a reader acts on" in whole.stdout


def test_output_file_gets_the_whole_table(runner, built_store, tmp_path):
    target = tmp_path / "rejections.txt"
    result = invoke(runner, built_store, "query", "rejections", "-o", str(target), env={"COLUMNS": "60"})
    assert result.exit_code == 0, result.output
    assert result.stdout == ""
    assert "which is not a practice a reader acts on" in target.read_text()


def test_a_graph_format_for_a_table_is_refused(runner, built_store):
    result = invoke(runner, built_store, "query", "adrs", "--format", "turtle")
    assert result.exit_code == 2
    assert "turtle is for CONSTRUCT and DESCRIBE results; a SELECT query takes --format table, csv, tsv, json" in (
        result.stderr
    )


# ------------------------------------------------------------------------------------------ headers

GOOD_BODY = "SELECT ?paper ?x WHERE { ?x <http://purl.org/spar/cito/cites> ?paper }\n"
GOOD_PARAM = (
    "#+ params:\n#+   - name: paper\n#+     type: id\n#+     pattern: '^LIT-\\d{3,}$'\n#+     example: LIT-051\n"
)


def write_query(folder: Path, name: str, text: str) -> Path:
    folder.mkdir(exist_ok=True)
    path = folder / f"{name}.rq"
    path.write_text(text, encoding="utf-8")
    return path


def test_a_good_header_reads(tmp_path):
    path = write_query(tmp_path, "good", "#+ summary: Citing practices\n" + GOOD_PARAM + "\n" + GOOD_BODY)
    query = read_canned(path)
    assert (query.name, query.summary, query.description) == ("good", "Citing practices", "")
    assert [(p.name, p.type, p.pattern, p.example) for p in query.params] == [
        ("paper", "id", "^LIT-\\d{3,}$", "LIT-051")
    ]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("#+ summary: [unclosed\n" + GOOD_BODY, "bad.rq:1: the header is not valid YAML"),
        ("#+ summary: fine\n#+ method: GET\n" + GOOD_BODY, "bad.rq:1: unknown header key method"),
        ("#+ description: no summary\n" + GOOD_BODY, "bad.rq: the header has no summary"),
        (GOOD_BODY, "bad.rq: no header"),
        (
            "#+ summary: s\n#+ params:\n#+   - name: paper\n#+     example: LIT-051\n" + GOOD_BODY,
            "bad.rq: parameter paper has no type; the type must be one of id, iri, string, integer",
        ),
        (
            "#+ summary: s\n#+ params:\n#+   - name: paper\n#+     type: date\n#+     example: x\n" + GOOD_BODY,
            "bad.rq: parameter paper has type 'date'",
        ),
        (
            "#+ summary: s\n#+ params:\n#+   - name: paper\n#+     type: id\n#+     example: LIT-051\n" + GOOD_BODY,
            "bad.rq: parameter paper is an id and needs a pattern",
        ),
        (
            "#+ summary: s\n" + GOOD_PARAM + "SELECT ?x WHERE { ?x ?p ?paper }\n",
            "bad.rq: parameter paper is not a variable the query projects; add ?paper to its SELECT clause",
        ),
        (
            "#+ summary: s\n" + GOOD_PARAM.replace("example: LIT-051", "example: LIT-5") + GOOD_BODY,
            "bad.rq: the example of parameter paper does not fit it",
        ),
        (
            "#+ summary: s\n" + GOOD_PARAM + GOOD_PARAM.replace("#+ params:\n", "") + GOOD_BODY,
            "bad.rq: parameter paper is declared twice",
        ),
        (
            "#+ summary: s\n" + GOOD_PARAM + "#+     colour: red\n" + GOOD_BODY,
            "bad.rq: parameter 1 has unknown key colour",
        ),
        (
            "#+ summary: s\n" + GOOD_BODY + "#+ description: late\n",
            "bad.rq:3: a '#+' header line comes after the query has started",
        ),
        ("#+ - just\n#+ - a list\n" + GOOD_BODY, "bad.rq:1: the header must be YAML keys"),
    ],
)
def test_malformed_headers_are_errors_naming_the_file(tmp_path, text, message):
    path = write_query(tmp_path, "bad", text)
    with pytest.raises(QueryHeaderError) as caught:
        read_canned(path)
    assert message in str(caught.value)


def test_projection_check_understands_select_star_and_expressions(tmp_path):
    star = "#+ summary: s\n" + GOOD_PARAM + "SELECT * WHERE { ?x ?p ?paper }\n"
    assert read_canned(write_query(tmp_path, "star", star)).params[0].name == "paper"
    expression = (
        "#+ summary: s\n" + GOOD_PARAM + "SELECT ?paper (COUNT(?x) AS ?n) WHERE { ?x ?p ?paper } GROUP BY ?paper\n"
    )
    assert read_canned(write_query(tmp_path, "expr", expression)).params[0].name == "paper"


def test_a_malformed_shipped_query_fails_the_listing_loudly(runner, tmp_path, monkeypatch):
    write_query(tmp_path, "fine", "#+ summary: fine\nSELECT * WHERE { ?s ?p ?o }\n")
    write_query(tmp_path, "broken", "#+ summary: fine\n#+ sumary: typo\nSELECT * WHERE { ?s ?p ?o }\n")
    monkeypatch.setattr("sotakg.query.canned.queries_dir", lambda: tmp_path)
    result = runner.invoke(cli, ["queries"])
    assert result.exit_code == 1
    assert "broken.rq:1: unknown header key sumary" in result.stderr
    assert result.stdout == ""


# ------------------------------------------------------------------------------------------ docs


def test_every_query_has_a_summary_and_is_in_the_readme():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    for path in sorted(queries_dir().glob("*.rq")):
        query = read_canned(path)
        assert query.summary
        assert f"`{query.name}`" in readme, f"{query.name} is not in README.md"


def test_the_readme_table_is_generated_from_the_queries():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    start, end = readme.index(README_START) + len(README_START), readme.index(README_END)
    assert readme[start:end] == "\n" + queries_table_markdown()


# ------------------------------------------------------------------------------------------ rewrites

#: The first formulations of the queries rewritten for scale (#17), kept as the reference their answers
#: are held to: the obvious reading of the question, quadratic in Oxigraph.
REFERENCE_FORMULATIONS = {
    "most-cited-papers": """
        PREFIX cito: <http://purl.org/spar/cito/>
        PREFIX sota: <https://w3id.org/sotakg/ontology#>
        SELECT ?paper ?authors ?year (COUNT(DISTINCT ?practice) AS ?practices)
               (COUNT(DISTINCT ?active) AS ?active) WHERE {
          ?paper a sota:Paper .
          OPTIONAL { ?paper sota:authors ?authors }
          OPTIONAL { ?paper sota:year ?year }
          OPTIONAL {
            ?practice cito:cites ?paper .
            OPTIONAL { ?practice sota:status sota:Active . BIND(?practice AS ?active) }
          }
        }
        GROUP BY ?paper ?authors ?year
        ORDER BY DESC(?practices) DESC(?active) ?paper""",
    "orphan-papers": """
        PREFIX cito: <http://purl.org/spar/cito/>
        PREFIX sota: <https://w3id.org/sotakg/ontology#>
        SELECT ?paper ?authors ?year ?arxiv ?url WHERE {
          ?paper a sota:Paper .
          FILTER NOT EXISTS { ?practice cito:cites ?paper }
          OPTIONAL { ?paper sota:authors ?authors }
          OPTIONAL { ?paper sota:year ?year }
          OPTIONAL { ?paper sota:arxivId ?arxiv }
          OPTIONAL { ?paper sota:url ?url }
        }
        ORDER BY ?paper""",
    "topic-sizes": """
        PREFIX skos: <http://www.w3.org/2004/02/skos/core#>
        PREFIX sota: <https://w3id.org/sotakg/ontology#>
        SELECT ?topic ?label ?declared (COUNT(DISTINCT ?practice) AS ?practices)
               (COUNT(DISTINCT ?paper) AS ?papers) WHERE {
          ?topicNode a sota:Topic ; sota:slug ?topic .
          OPTIONAL { ?topicNode skos:prefLabel ?label }
          OPTIONAL { ?topicNode sota:declaredSize ?declared }
          OPTIONAL { ?practice a sota:Practice ; sota:filedUnder ?topicNode }
          OPTIONAL { ?paper a sota:Paper ; sota:filedUnder ?topicNode }
        }
        GROUP BY ?topic ?label ?declared
        ORDER BY ?topic""",
    "single-source-practices": """
        PREFIX cito: <http://purl.org/spar/cito/>
        PREFIX dcterms: <http://purl.org/dc/terms/>
        PREFIX sota: <https://w3id.org/sotakg/ontology#>
        SELECT ?practice ?paper ?authors ?title WHERE {
          {
            SELECT ?practice (SAMPLE(?cited) AS ?paper) WHERE {
              ?practice a sota:Practice ; sota:status sota:Active ; cito:cites ?cited .
            }
            GROUP BY ?practice
            HAVING (COUNT(DISTINCT ?cited) = 1)
          }
          OPTIONAL { ?paper sota:authors ?authors }
          OPTIONAL { ?practice dcterms:title ?title }
        }
        ORDER BY ?practice""",
}


@pytest.fixture(scope="module")
def generated_store(tmp_path_factory: pytest.TempPathFactory):
    """The benchmark generator's anthology at scale 0.3: many topics, papers filed under topics,
    practices citing one paper or two, topics with no papers; opened read-only."""
    import sys

    from sotakg.graph.build import build
    from sotakg.graph.store import StoreLayout, open_read_only

    sys.path.insert(0, str(REPO))
    from benchmarks.generate import generate

    root = tmp_path_factory.mktemp("generated")
    generate(root / "data", 0.3, seed=7)
    build(root / "data", root / "store")
    return open_read_only(StoreLayout(root / "store"))


@pytest.mark.parametrize("name", sorted(REFERENCE_FORMULATIONS))
def test_a_rewritten_query_answers_as_its_reference_formulation(name, generated_store, shipped_store):
    query = find_canned(name)
    at_least_shipped = 0 if name == "orphan-papers" else 1  # the shipped data cites every paper
    for store, at_least in ((generated_store, 20), (shipped_store, at_least_shipped)):
        expected = [tuple(map(str, row)) for row in store.query(REFERENCE_FORMULATIONS[name])]
        answered = [tuple(map(str, row)) for row in store.query(query.text)]
        assert answered == expected
        assert len(answered) >= at_least


#: The topic view's first formulation: the node labels joined straight to the path from the topic
#: (seconds per topic at 10,000 records: the engine walked the path back from every labelled node).
TOPIC_VIEW_REFERENCE = """
PREFIX cito: <http://purl.org/spar/cito/>
PREFIX dcterms: <http://purl.org/dc/terms/>
PREFIX rdf: <http://www.w3.org/1999/02/22-rdf-syntax-ns#>
PREFIX skos: <http://www.w3.org/2004/02/skos/core#>
PREFIX sota: <https://w3id.org/sotakg/ontology#>
CONSTRUCT {
  ?member sota:filedUnder ?topicNode .
  ?member ?link ?target .
  ?node ?property ?value .
} WHERE {
  {
    ?topicNode a sota:Topic ; sota:slug ?topic .
    ?member sota:filedUnder ?topicNode .
    OPTIONAL { ?member ?link ?target . VALUES ?link { cito:cites sota:reasonNames } }
  }
  UNION
  {
    ?labelled a sota:Topic ; sota:slug ?topic .
    ?labelled (^sota:filedUnder/(cito:cites|sota:reasonNames)?)? ?node .
    ?node ?property ?value .
    VALUES ?property {
      rdf:type dcterms:identifier dcterms:title sota:status sota:authors sota:year skos:prefLabel sota:slug
    }
  }
}"""


def test_the_topic_view_answers_as_its_reference_formulation(generated_store, shipped_store):
    """Bound as the embedded store binds it (substitutions) and as a remote server gets it (a
    trailing VALUES block), for every topic: the same triples as the first formulation."""
    from pyoxigraph import Literal, Variable

    from sotakg.query.sparql import values_clause
    from sotakg.views.named import find_view

    view = find_view("topic").text
    for store in (generated_store, shipped_store):
        slugs = [row["s"].value for row in store.query("SELECT ?s { ?t <https://w3id.org/sotakg/ontology#slug> ?s }")]
        assert len(slugs) >= 1
        for slug in slugs:
            bound = {Variable("topic"): Literal(slug)}
            expected = set(map(str, store.query(TOPIC_VIEW_REFERENCE, substitutions=bound)))
            assert len(expected) > 1
            assert set(map(str, store.query(view, substitutions=bound))) == expected
            assert set(map(str, store.query(view + values_clause(bound)))) == expected


# ------------------------------------------------------------------------------------------ header reader

_HEADER_PIECES = [
    "summary: Papers by year", "summary: 2023", "summary: yes", "summary: 'quoted: text'", "summary: \"dq\"",
    "summary: it's", "summary: a # not a comment?", "summary: ends:", "summary: 1.5", "summary: null",
    "summary: (grouped) text", "summary: ", "summary:", "description: >-", "description: >", "description: |",
    "  folded line one", "  folded line two", "    more indented", " less", "", "  ", "params:", "params: []",
    "  - name: paper", "    type: id", "    pattern: '^LIT-\\d{3,}$'", "    example: 2023", "    example: LIT-051",
    "  - name: 'x''y'", "    description: >-", "      nested", "    example: on", "  -  name: odd", "#+ x",
    "summary: Papers by year", "params:", "  - name: text",
]  # fmt: skip


@given(st.lists(st.sampled_from(_HEADER_PIECES), min_size=1, max_size=10))
@settings(max_examples=1500, deadline=None)
def test_the_quick_header_reader_agrees_with_yaml_whenever_it_answers(pieces: list[str]):
    import yaml

    source = "\n".join(pieces)
    quick = quick_header(source)
    if quick is None:
        return
    assert quick == yaml.safe_load(source)


def test_every_shipped_header_takes_the_quick_reader():
    """So that `sotakg query NAME` runs without importing yaml (see test_startup.py)."""
    import yaml

    from sotakg.query.canned import _header_lines

    for path in [*sorted(queries_dir().glob("*.rq")), *sorted((queries_dir() / "views").glob("*.rq"))]:
        lines, _first = _header_lines(path.read_text(encoding="utf-8"), AssertionError)
        source = "\n".join(lines)
        assert quick_header(source) == yaml.safe_load(source), path.name


@pytest.mark.parametrize(
    ("name", "raw"), [("practices-citing", {"paper": "LIT-٠٥١"}), ("papers-since", {"since": "٢٠٢٣"})]
)
def test_the_library_refuses_digits_of_another_script(name, raw):
    # The CLI refuses them too; the library must on its own (serve, console and Python callers).
    with pytest.raises(ParameterProblem):
        bind_parameters(find_canned(name), raw)
