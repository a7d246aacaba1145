"""Behaviours of ``rules/validate.py`` that its mutation run (issue 20) found untested: where a
finding without a file is located, when a run fails, the summary against a baseline, the README's
rule table, the endpoint's options, the errors of a missing or broken store, and how a literal's
escapes are shown."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from sotakg.errors import StoreError, UsageProblem
from sotakg.rules import validate as validation
from sotakg.rules.validate import Finding, ValidationReport

# ------------------------------------------------------------------------------------ findings


def _finding(severity: str = "violation", state: str | None = None, **where) -> Finding:
    fields = {"record": None, "file": None, "line": None, **where}
    return Finding(
        "rule", severity, fields["record"], fields["file"], fields["line"], "m", state=state, focus=where.get("focus")
    )


@pytest.mark.parametrize(
    ("where", "shown"),
    [
        ({}, "(graph)"),
        ({"focus": "https://example.org/x"}, "<https://example.org/x>"),
        ({"file": "data/a.yaml"}, "data/a.yaml"),
        ({"file": "data/a.yaml", "line": 7}, "data/a.yaml:7"),
    ],
)
def test_a_finding_is_located_by_file_and_line_else_by_its_focus_else_as_the_graph(where, shown):
    assert _finding(**where).location() == shown


def _report(*findings: Finding, baseline: str | None = None) -> ValidationReport:
    return ValidationReport(list(findings), [], "sparql", 3, baseline=baseline)


def test_strict_fails_on_one_warning_and_not_without_one():
    assert _report(_finding("warning")).failed(strict=True)
    assert not _report(_finding("warning")).failed()
    assert not _report(_finding("info")).failed(strict=True)
    assert not _report().failed(strict=True)


def test_against_a_baseline_only_new_findings_fail_a_run_strict_or_not():
    for strict in (False, True):
        assert _report(_finding("violation", "new"), baseline="HEAD").failed(strict=strict)
        assert not _report(_finding("violation", "unchanged"), baseline="HEAD").failed(strict=strict)
    assert _report(_finding("warning", "new"), baseline="HEAD").failed(strict=True)
    assert not _report(_finding("warning", "new"), baseline="HEAD").failed()


def test_the_summary_against_a_baseline_gives_the_counts_and_the_states():
    report = _report(_finding("violation", "new"), _finding("warning", "unchanged"), baseline="main")
    report.absent = [_finding()]
    assert report.summary() == (
        "1 violation, 1 warning, 0 infos in 3 records (engine sparql); against main: 1 new, 1 unchanged, 1 fixed."
    )


# ------------------------------------------------------------------------------------ the rule table


def test_the_rule_table_is_made_of_the_shapes_files_it_is_given_with_bars_escaped(tmp_path):
    shapes = tmp_path / "own.ttl"
    shapes.write_text(
        "@prefix sh: <http://www.w3.org/ns/shacl#> .\n"
        "@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .\n"
        "@prefix dct: <http://purl.org/dc/terms/> .\n"
        "<https://example.org/rules#own-rule> a sh:NodeShape ; sh:severity sh:Warning ;\n"
        '  rdfs:comment "either a | or b" ; dct:source "ADR-1 | ADR-2" .\n',
        encoding="utf-8",
    )
    table = validation.rule_table_markdown([shapes])
    assert table.splitlines()[-1] == "| `own-rule` | either a \\| or b | warning | ADR-1 \\| ADR-2 |"
    assert "practice-status" not in table  # the shipped shapes were not read


# ------------------------------------------------------------------------------------ options


def test_graph_without_endpoint_is_a_usage_problem_that_says_what_to_add(built_store):
    data, store = built_store
    with pytest.raises(UsageProblem) as raised:
        validation.validate(data, store, graph="https://example.org/g")
    assert str(raised.value) == ("--graph needs --endpoint: the embedded store keeps everything in its default graph")


def test_an_endpoint_gets_the_graph_timeout_and_method_asked_for(built_store, monkeypatch):
    from pyoxigraph import DefaultGraph, RdfFormat, serialize

    from sotakg.graph.open import open_graph
    from sotakg.query import remote

    data, store = built_store
    graph = open_graph(data, store)
    ntriples = serialize(graph.quads_for_pattern(None, None, None, DefaultGraph()), format=RdfFormat.N_TRIPLES)
    del graph
    calls = []

    def fetched(endpoint, graph, timeout, method):
        calls.append((endpoint, graph, timeout, method))
        return ntriples

    monkeypatch.setattr(remote, "fetch_graph", fetched)
    endpoint = "http://127.0.0.1:9/sparql"
    heard = []
    report = validation.validate(data, store, endpoint=endpoint, progress=lambda *step: heard.append(step))
    named = validation.validate(data, store, endpoint=endpoint, graph="https://example.org/g", timeout=5, method="post")
    assert heard[0] == (0, 1, "reading the data") and heard[-1][2] == "done" and len(heard) > 10
    assert calls == [(endpoint, None, 30.0, "auto"), (endpoint, "https://example.org/g", 5, "post")]
    assert report.findings == named.findings and report.records > 0
    assert report.engine == "sparql" and [rule.id for rule in report.rules][:2] == ["data-readable", "practice-id"]


# ------------------------------------------------------------------------------------ the store


def test_without_a_store_the_error_names_it_and_says_to_build(tmp_path, monkeypatch):
    from sotakg.graph.store import StoreLayout

    monkeypatch.chdir(tmp_path)
    with pytest.raises(StoreError) as raised:
        validation._open_current(StoreLayout(Path("nowhere") / "store"))
    assert str(raised.value) == "no store at nowhere/store; run 'sotakg build' first"


def test_a_store_that_cannot_be_opened_is_named_in_the_error(tmp_path, monkeypatch):
    from sotakg.graph.build import build
    from sotakg.graph.store import DATABASE, StoreLayout

    from .conftest import SHIPPED_DATA

    shutil.copytree(SHIPPED_DATA, tmp_path / "data")
    monkeypatch.chdir(tmp_path)
    build(Path("data"), Path(".sotakg") / "store")
    layout = StoreLayout(Path(".sotakg") / "store")
    generation = layout.current_generation()
    assert generation is not None
    shutil.rmtree(generation / DATABASE)
    (generation / DATABASE).write_text("not a database", encoding="utf-8")
    with pytest.raises(StoreError) as raised:
        validation._open_current(layout)
    assert str(raised.value).startswith("cannot open the store at .sotakg/store: ")


# ------------------------------------------------------------------------------------ literals


@pytest.mark.parametrize(
    ("term", "shown"),
    [
        ('"a\\U0001F600b"', "a\U0001f600b"),
        ('"\\u00e9t\\u00C9"', "\u00e9t\u00c9"),
        ('"odd \\q escape"', "odd q escape"),
        ('"tab\\there"@en', "tab\there"),
        ('"say \\"hi\\""@en', 'say "hi"'),
        ('"ends in a backslash \\\\"', "ends in a backslash \\"),
        ('"\\\\\\""', '\\"'),
        ('"\\""^^<http://www.w3.org/2001/XMLSchema#string>', '"'),
        ('""', ""),
        ('"unclosed', "unclosed"),
        ('"x', "x"),
        ('"unclosed \\"', 'unclosed "'),  # its last quote is escaped: no closing quote
    ],
)
def test_a_literals_escapes_are_shown_as_the_characters_they_stand_for(term, shown):
    assert validation.short_term(term) == shown


def test_a_namespace_alone_is_no_short_id():
    from sotakg.graph import vocab

    assert validation.short_iri(vocab.ID) == vocab.ID
    assert validation.short_iri(vocab.ID + "SOTA-017") == "SOTA-017"


def test_findings_sort_by_file_line_rule_record_message_value_focus_with_blanks_first():
    def finding(**fields):
        values = {
            "file": "A.yaml",
            "line": 1,
            "rule_id": "r",
            "record": "R",
            "message": "m",
            "value": "v",
            "focus": "f",
        }
        values.update(fields)
        return Finding(
            values["rule_id"], "violation", values["record"], values["file"], values["line"], values["message"],
            focus=values["focus"], value=values["value"],
        )  # fmt: skip

    pairs = [
        (finding(file="A.yaml"), finding(file=None)),
        (finding(line=None, rule_id="z"), finding(line=1, rule_id="a")),
        (finding(record=None), finding(record="A")),
        (finding(record="A", message="z"), finding(record="B", message="a")),
        (finding(value=None), finding(value="A")),
        (finding(value="A", focus="z"), finding(value="B", focus="a")),
        (finding(focus=None), finding(focus="A")),
    ]
    for first, second in pairs:
        assert sorted([second, first], key=Finding.sort_key) == [first, second]


def test_a_severity_of_its_own_is_counted_too():
    report = ValidationReport([_finding("notice"), _finding("notice"), _finding("warning")], [], "sparql")
    assert report.counts == {"violation": 0, "warning": 1, "info": 0, "notice": 2}


# ------------------------------------------------------------------------------------ what a run uses


def _one_rule_shapes(tmp_path: Path) -> Path:
    """A shapes file of one rule: every practice must have a title of at most 3 characters."""
    shapes = tmp_path / "short-titles.ttl"
    shapes.write_text(
        "@prefix sh: <http://www.w3.org/ns/shacl#> .\n"
        "<https://example.org/rules#short-title> a sh:NodeShape ; sh:severity sh:Violation ;\n"
        "  sh:targetClass <https://w3id.org/sotakg/ontology#Practice> ;\n"
        "  sh:property [ sh:path <http://purl.org/dc/terms/title> ; sh:maxLength 3 ] .\n",
        encoding="utf-8",
    )
    return shapes


def test_a_run_checks_the_rules_of_the_shapes_it_is_given_and_keeps_their_findings_apart(data_copy, tmp_path):
    store = tmp_path / "store"
    shipped = validation.validate(data_copy, store)
    own = validation.validate(data_copy, store, shapes=[_one_rule_shapes(tmp_path)])
    assert [rule.id for rule in own.rules] == ["data-readable", "short-title"]
    assert {finding.rule_id for finding in own.findings} == {"short-title"}
    assert len(own.findings) == 42  # every practice's title is longer
    again = validation.validate(data_copy, store)
    assert again.findings == shipped.findings and len(shipped.findings) == 8


def test_the_findings_of_one_engine_are_not_taken_for_another_s(data_copy, tmp_path, monkeypatch):
    store = tmp_path / "store"
    assert len(validation.validate(data_copy, store).findings) == 8
    monkeypatch.setitem(validation.ENGINES, "silent", lambda store, shapes, progress=None, focus=None: [])
    silent = validation.validate(data_copy, store, engine="silent")
    assert silent.findings == [] and silent.engine == "silent"


def test_after_an_edit_the_engine_is_given_the_changed_records_and_the_progress(data_copy, tmp_path, monkeypatch):
    store = tmp_path / "store"
    validation.validate(data_copy, store)
    calls = []
    real = validation.ENGINES["sparql"]

    def spy(store, shapes, progress=None, focus=None):
        calls.append((progress, None if focus is None else set(focus)))
        return real(store, shapes, progress, focus)

    monkeypatch.setitem(validation.ENGINES, "sparql", spy)
    path = data_copy / "practices" / "SOTA-017.yaml"
    path.write_text(path.read_text(encoding="utf-8").replace("title: ", "title: Edited ", 1), encoding="utf-8")
    heard = []
    report = validation.validate(data_copy, store, progress=lambda *step: heard.append(step))
    assert len(calls) == 1
    progress, focus = calls[0]
    assert progress is not None and focus is not None
    assert "https://w3id.org/sotakg/id/SOTA-017" in focus
    assert heard[0] == (0, 1, "reading the data") and len(report.findings) == 8


def _break_a_record(data: Path) -> None:
    (data / "practices" / "SOTA-017.yaml").write_text("id: SOTA-017\ntitle: [unclosed\n", encoding="utf-8")


@pytest.mark.parametrize("endpoint", [None, "http://127.0.0.1:9/sparql"], ids=["embedded", "endpoint"])
def test_data_that_cannot_be_read_is_reported_with_the_rules_and_the_engine(data_copy, tmp_path, monkeypatch, endpoint):
    from sotakg.query import remote

    monkeypatch.setattr(remote, "fetch_graph", lambda *args, **kwargs: pytest.fail("the graph was fetched"))
    _break_a_record(data_copy)
    report = validation.validate(data_copy, tmp_path / "store", endpoint=endpoint)
    assert report.readable is False and report.records == 0 and report.engine == "sparql"
    assert [rule.id for rule in report.rules] == [rule.id for rule in validation.load_rules(validation.shapes_paths())]
    assert [(f.rule_id, f.file) for f in report.findings] == [
        ("data-readable", str(data_copy / "practices" / "SOTA-017.yaml"))
    ]
    assert report.findings[0].line == 3 and report.failed()


def test_a_manifest_without_counts_is_rebuilt_and_its_records_counted(data_copy, tmp_path):
    import json

    from sotakg.graph.store import MANIFEST, StoreLayout

    store = tmp_path / "store"
    validation.validate(data_copy, store)
    manifest = StoreLayout(store).current_generation() / MANIFEST
    document = json.loads(manifest.read_text(encoding="utf-8"))
    del document["counts"]
    manifest.write_text(json.dumps(document), encoding="utf-8")
    report = validation.validate(data_copy, store)
    assert report.records == 65 and len(report.findings) == 8
    assert "counts" in json.loads((StoreLayout(store).current_generation() / MANIFEST).read_text(encoding="utf-8"))


def test_a_store_validated_in_process_is_checked_against_the_shapes_given(data_copy, tmp_path):
    from pyoxigraph import RdfFormat, Store

    from sotakg.graph.rdf import anthology_ntriples
    from sotakg.records.schema import load_anthology

    anthology = load_anthology(data_copy)
    store = Store()
    store.load(anthology_ntriples(anthology), format=RdfFormat.N_TRIPLES)
    shipped = validation.validate_store(store, anthology)
    own = validation.validate_store(store, anthology, engine="sparql", shapes=[_one_rule_shapes(tmp_path)])
    assert [rule.id for rule in own.rules] == ["data-readable", "short-title"] and own.engine == "sparql"
    assert len(own.findings) == 42 and {f.rule_id for f in own.findings} == {"short-title"}
    assert shipped.engine == "sparql" and len(shipped.rules) > 10 and shipped.records == len(anthology.records)


def test_a_version_iri_is_located_at_its_practice_only(built_store):
    from sotakg.graph import vocab
    from sotakg.records.schema import load_anthology

    locator = validation.Locator(load_anthology(built_store[0]))
    practice, field = locator.record_of(vocab.ID + "SOTA-017-v2")
    assert practice is not None and practice.id == "SOTA-017" and field == "version"
    assert locator.record_of(vocab.ID + "LIT-051-v2") == (None, None)  # a paper has no versions
    assert locator.record_of(vocab.ID + "SOTA-999999-v2") == (None, None)


# ------------------------------------------------------------------------------------ results to findings


def _findings(built_store, *results, rules=()):
    from sotakg.records.schema import load_anthology

    return validation.findings_from_results(list(results), load_anthology(built_store[0]), list(rules))


SH = "http://www.w3.org/ns/shacl#"
PRACTICE = "https://w3id.org/sotakg/id/SOTA-017"


def test_a_result_of_a_shape_no_rule_declares_is_named_by_its_shape_and_keeps_its_severity(built_store):
    from sotakg.rules.validate import RawResult

    (warning,) = _findings(built_store, RawResult(PRACTICE, None, None, "https://example.org/r#own", SH + "Warning"))
    assert (warning.rule_id, warning.severity, warning.message, warning.record) == ("own", "warning", "own", "SOTA-017")
    (odd,) = _findings(
        built_store, RawResult("https://example.org/elsewhere", None, None, "https://example.org/r/odd", "x:y", "said")
    )
    assert (odd.rule_id, odd.severity, odd.message, odd.record, odd.file, odd.line) == (
        "odd",
        "violation",
        "said",
        None,
        None,
        None,
    )


def test_a_declared_rule_gives_its_severity_message_and_field(built_store):
    from sotakg.rules.validate import RawResult, Rule

    # The rule's own id, whatever its IRI's local name (a Rule may be made by hand).
    rule = Rule("mine", "https://example.org/r#shape-7", "info", "{$this} / {?this}: {?value}", "c", "s", "title")
    result = RawResult(PRACTICE, None, '"x"', rule.iri, "not-a-severity")
    (finding,) = _findings(built_store, result, rules=[rule])
    assert (finding.rule_id, finding.severity, finding.message) == ("mine", "info", "SOTA-017 / SOTA-017: x")
    assert finding.value == "x" and finding.line is not None and finding.line > 1  # the title's line
    unworded = Rule("bare", "https://example.org/r#bare", "warning", "", "c", "s")
    (plain,) = _findings(
        built_store, RawResult(PRACTICE, None, None, unworded.iri, "x", "the engine's"), rules=[unworded]
    )
    assert plain.message == "the engine's" and plain.severity == "warning"


def test_a_node_shape_result_that_repeats_its_focus_has_no_value(built_store):
    from sotakg.rules.validate import RawResult

    shape = "https://example.org/r#n"
    (finding,) = _findings(built_store, RawResult(PRACTICE, None, f"<{PRACTICE}>", shape, SH + "Violation", "{?value}"))
    assert finding.value is None and finding.message == "(none)"
    (other,) = _findings(
        built_store,
        RawResult(PRACTICE, None, "<https://w3id.org/sotakg/id/LIT-051>", shape, SH + "Violation", "{?value}"),
    )
    assert other.value == "LIT-051" and other.message == "LIT-051"


# ------------------------------------------------------------------------------------ rules and engines


def test_rules_are_read_as_turtle_whatever_the_file_is_called_with_defaults_for_what_they_leave_out(tmp_path):
    shapes = tmp_path / "rules.shacl"  # no .ttl: the name says nothing of the syntax
    shapes.write_text(
        "@prefix sh: <http://www.w3.org/ns/shacl#> .\n"
        "<https://example.org/r#odd> a sh:NodeShape ; sh:severity <https://example.org/Custom> ; sh:message [] .\n"
        "<https://example.org/r#bare> a sh:NodeShape ; sh:severity sh:Info .\n"
        "[] sh:severity sh:Warning .\n",
        encoding="utf-8",
    )
    rules = {rule.id: rule for rule in validation.load_rules([shapes])}
    assert list(rules) == ["data-readable", "odd", "bare"]
    assert rules["odd"].severity == "violation" and rules["odd"].message.startswith("_:")
    assert (rules["bare"].severity, rules["bare"].message, rules["bare"].comment, rules["bare"].source) == (
        "info",
        "",
        "",
        "",
    )
    assert rules["bare"].report_field is None


def test_an_unknown_engine_is_a_usage_problem_naming_the_engines():
    with pytest.raises(UsageProblem) as raised:
        validation.engine_named("fast")
    assert str(raised.value) == "unknown validation engine 'fast'; use one of: sparql, pyshacl"
