"""The filing rules (shapes/) and `sotakg validate`: every rule broken and satisfied, located to the line;
the shipped data's findings exactly; every report format against a golden file or its schema; exit codes."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

import jsonschema
import pytest
import yaml
from pyoxigraph import RdfFormat, Store, parse

from sotakg import __version__
from sotakg.cli import cli
from sotakg.graph.rdf import anthology_triples, as_quads
from sotakg.records.schema import load_anthology
from sotakg.resources import ontology_path
from sotakg.rules.report import FORMATS, github_command, render
from sotakg.rules.validate import (
    DATA_READABLE,
    DEFAULT_ENGINE,
    ENGINES,
    Finding,
    field_of_path,
    load_rules,
    rule_table_markdown,
    shapes_paths,
    short_term,
    validate,
    validate_store,
)

from .conftest import GOLDEN, REPO

SARIF_SUBSET_SCHEMA = Path(__file__).resolve().parent / "schemas" / "sarif-2.1.0-subset.schema.json"

TURTLE_PREFIXES = """
@prefix sota: <https://w3id.org/sotakg/ontology#> .
@prefix id: <https://w3id.org/sotakg/id/> .
@prefix dcterms: <http://purl.org/dc/terms/> .
@prefix prov: <http://www.w3.org/ns/prov#> .
@prefix xsd: <http://www.w3.org/2001/XMLSchema#> .
"""

#: (rule, severity, record, file, line) of every finding on the shipped data.
SHIPPED = [
    ("arxiv-year", "warning", "LIT-083", "data/papers/LIT-083.yaml", 3),
    ("active-cites-paper", "warning", "SOTA-214", "data/practices/SOTA-214.yaml", 5),
    ("active-cites-paper", "warning", "SOTA-219", "data/practices/SOTA-219.yaml", 5),
    ("practice-summary", "warning", "SOTA-364", "data/practices/SOTA-364.yaml", 1),
    ("active-cites-paper", "warning", "SOTA-364", "data/practices/SOTA-364.yaml", 4),
    ("practice-summary", "warning", "SOTA-376", "data/practices/SOTA-376.yaml", 1),
    ("active-cites-paper", "warning", "SOTA-376", "data/practices/SOTA-376.yaml", 4),
    # one topic of the registry's 449 practices is in the data: the others are missing, as expected
    ("registry-declared-size", "info", "registry", "data/registry.yaml", 3),
]


def key(finding: Finding) -> tuple[str, str, str | None, str | None, int | None]:
    return (finding.rule_id, finding.severity, finding.record, finding.file, finding.line)


# ------------------------------------------------------------------------------------ helpers


def set_field(data: Path, relative: str, name: str, value: str | None) -> None:
    """Replace the line of field ``name`` in a record file (None removes it; a new field is appended)."""
    path = data / relative
    lines = path.read_text(encoding="utf-8").splitlines()
    index = next((i for i, line in enumerate(lines) if line.startswith(f"{name}:")), None)
    if index is None:
        assert value is not None, f"{relative} has no {name}"
        lines.append(f"{name}: {value}")
    elif value is None:
        del lines[index]
    else:
        lines[index] = f"{name}: {value}"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def quads(turtle: str) -> list:
    if not turtle.strip():
        return []
    return list(parse(input=TURTLE_PREFIXES + turtle, format=RdfFormat.TURTLE))


def check(data: Path, add: str = "", remove: str = ""):
    """Validate ``data`` with pyshacl from an in-memory store built as `sotakg build` builds one,
    after removing and adding the given triples (for rules the YAML cannot break)."""
    anthology = load_anthology(data)
    store = Store()
    store.bulk_load(path=str(ontology_path()), format=RdfFormat.TURTLE)
    store.bulk_extend(list(as_quads(anthology_triples(anthology))))
    for quad in quads(remove):
        assert quad in store, quad
        store.remove(quad)
    for quad in quads(add):
        store.add(quad)
    return validate_store(store, anthology)


@dataclass
class Case:
    """A minimal change to the shipped data that breaks ``rule``, and the findings it must produce
    beyond the shipped data's own."""

    rule: str
    expected: list[tuple[str, str, str | None, str | None, int | None]]
    fields: list[tuple[str, str, str | None]] = field(default_factory=list)
    files: dict[str, str] = field(default_factory=dict)
    add: str = ""
    remove: str = ""
    name: str = ""

    @property
    def id(self) -> str:
        return self.name or self.rule


def V(rule: str, record: str, file: str, line: int, severity: str = "violation"):
    return (rule, severity, record, f"data/{file}", line)


P17 = "practices/SOTA-017.yaml"
P49 = "practices/SOTA-049.yaml"

CASES = [
    Case(
        "practice-id",
        [
            V("practice-id", "SOTA-17", "practices/SOTA-17.yaml", 1),
            # one practice more under the topic than its page declares
            V("topic-declared-size", "distributed-optimization", "topics/distributed-optimization.yaml", 4, "warning"),
        ],
        # A file must be named after its id (else the build refuses it), so the bad id has a file of its own.
        files={
            "practices/SOTA-17.yaml": "id: SOTA-17\nversion: 1\ntitle: T\nsummary: S\nstatus: Proposed\n"
            "topic: distributed-optimization\n"
        },
    ),
    Case(
        "paper-id",
        [V("paper-id", "LIT-9", "papers/LIT-9.yaml", 1)],
        files={"papers/LIT-9.yaml": "id: LIT-9\nauthors: Doe et al.\nyear: 2020\n"},
    ),
    Case("adr-id", [V("adr-id", "ADR-1", "adrs/ADR-1.yaml", 1)], files={"adrs/ADR-1.yaml": "id: ADR-1\n"}),
    Case(
        "id-unique",
        [
            V("id-unique", "SOTA-017", P17, 1),
            V("id-unique", "SOTA-018", "practices/SOTA-018.yaml", 1),
            V("practice-id", "SOTA-018", "practices/SOTA-018.yaml", 1),
        ],
        add='id:SOTA-018 dcterms:identifier "SOTA-017" .',
    ),
    Case("practice-title", [V("practice-title", "SOTA-017", P17, 1)], fields=[(P17, "title", None)]),
    Case("practice-status", [V("practice-status", "SOTA-017", P17, 5)], fields=[(P17, "status", "Accepted")]),
    Case(
        "practice-status",
        [V("practice-status", "SOTA-017", P17, 1)],
        fields=[(P17, "status", None)],
        name="practice-status-missing",
    ),
    Case(
        "practice-status-column",
        [V("practice-status-column", "SOTA-017", P17, 8)],
        fields=[(P17, "status_column", "status")],
    ),
    # a practice moved out of its topic leaves the topic one short of the size its page declares
    Case(
        "practice-topic",
        [
            V("practice-topic", "SOTA-017", P17, 1),
            V("topic-declared-size", "distributed-optimization", "topics/distributed-optimization.yaml", 4, "warning"),
        ],
        fields=[(P17, "topic", None)],
    ),
    Case(
        "topic-resolves",
        [
            V("topic-resolves", "SOTA-017", P17, 7),
            V("topic-declared-size", "distributed-optimization", "topics/distributed-optimization.yaml", 4, "warning"),
        ],
        fields=[(P17, "topic", "no-such-topic")],
    ),
    Case("rejected-has-reason", [V("rejected-has-reason", "SOTA-049", P49, 5)], fields=[(P49, "reason", None)]),
    Case(
        "reason-only-if-rejected",
        [V("reason-only-if-rejected", "SOTA-049", P49, 6)],
        fields=[(P49, "status", "Active")],
    ),
    Case("cites-resolve", [V("cites-resolve", "SOTA-017", P17, 6)], fields=[(P17, "cites", "[LIT-999]")]),
    Case(
        "reason-names-resolve",
        [V("reason-names-resolve", "SOTA-049", P49, 7)],
        fields=[(P49, "reason_names", "[SOTA-048, SOTA-999]")],
    ),
    Case(
        "reason-names-listed",
        [V("reason-names-listed", "SOTA-049", P49, 6)],
        fields=[(P49, "reason_names", "[]")],
    ),
    Case(
        "active-cites-paper",
        [V("active-cites-paper", "SOTA-017", P17, 5, "warning")],
        fields=[(P17, "cites", None)],
    ),
    Case(
        "practice-summary",
        [V("practice-summary", "SOTA-017", P17, 1, "warning")],
        fields=[(P17, "summary", None)],
    ),
    Case(
        "filed-unplaced",
        [
            V("filed-unplaced", "SOTA-017", P17, 7, "info"),
            V("topic-declared-size", "distributed-optimization", "topics/distributed-optimization.yaml", 4, "warning"),
        ],
        fields=[(P17, "topic", "unplaced")],
    ),
    Case("current-version", [V("current-version", "SOTA-017", P17, 1)], fields=[(P17, "version", None)]),
    Case(
        "current-version-highest",
        [V("current-version-highest", "SOTA-017", P17, 2)],
        remove="id:SOTA-017 sota:currentVersion id:SOTA-017-v2 .",
        add="id:SOTA-017 sota:currentVersion id:SOTA-017-v1 .",
    ),
    Case(
        "version-number",
        [V("version-number", "SOTA-017", P17, 2)],
        add="id:SOTA-017-v3 a sota:PracticeVersion ; dcterms:isVersionOf id:SOTA-017 ; "
        "prov:wasRevisionOf id:SOTA-017-v2 .",
    ),
    Case(
        "version-of-practice",
        [V("version-of-practice", "SOTA-028", "practices/SOTA-028.yaml", 2)],
        add="id:SOTA-028-v1 dcterms:isVersionOf id:SOTA-029 .",
    ),
    Case(
        "version-revises-previous",
        [V("version-revises-previous", "SOTA-017", P17, 2)],
        remove="id:SOTA-017-v2 prov:wasRevisionOf id:SOTA-017-v1 .",
    ),
    Case(
        "version-chain",
        [V("version-chain", "SOTA-017", P17, 2)],
        add="id:SOTA-017-v2 prov:wasRevisionOf id:SOTA-028-v1 .",
    ),
    Case(
        "version-no-branch",
        [V("version-no-branch", "SOTA-017", P17, 2)],
        add="""id:SOTA-017-v3 a sota:PracticeVersion ; sota:versionNumber 2 ;
                 dcterms:isVersionOf id:SOTA-017 ; prov:wasRevisionOf id:SOTA-017-v1 .""",
    ),
    Case(
        "version-no-cycle",
        [
            V("version-no-cycle", "SOTA-017", P17, 2),
            V("version-no-cycle", "SOTA-017", P17, 2),
            V("version-chain", "SOTA-017", P17, 2),
        ],
        add="id:SOTA-017-v1 prov:wasRevisionOf id:SOTA-017-v2 .",
    ),
    Case(
        # v1 -> v4 -> v3 -> v2 -> v1: every version of the cycle is found, found in one pass
        "version-no-cycle",
        [V("version-no-cycle", "SOTA-017", P17, 2)] * 4 + [V("version-chain", "SOTA-017", P17, 2)],
        fields=[(P17, "version", "4")],
        add="id:SOTA-017-v1 prov:wasRevisionOf id:SOTA-017-v4 .",
        name="version-no-cycle-through-four",
    ),
    Case(
        "adr-status",
        [V("adr-status", "ADR-059", "adrs/ADR-059.yaml", 2)],
        fields=[("adrs/ADR-059.yaml", "status", "Final")],
    ),
    Case(
        "supersedes-resolves",
        [V("supersedes-resolves", "ADR-026", "adrs/ADR-026.yaml", 2)],
        fields=[("adrs/ADR-026.yaml", "supersedes", "[ADR-020, ADR-999]")],
    ),
    Case(
        "superseded-by-resolves",
        [V("superseded-by-resolves", "ADR-020", "adrs/ADR-020.yaml", 3)],
        fields=[("adrs/ADR-020.yaml", "superseded_by", "ADR-999"), ("adrs/ADR-026.yaml", "supersedes", None)],
    ),
    Case(
        "adr-superseded-once",
        [V("adr-superseded-once", "ADR-020", "adrs/ADR-020.yaml", 1)],
        fields=[
            ("adrs/ADR-020.yaml", "superseded_by", None),
            ("adrs/ADR-059.yaml", "supersedes", "[ADR-020]"),
        ],
    ),
    Case(
        "adr-supersession-agrees",
        [V("adr-supersession-agrees", "ADR-020", "adrs/ADR-020.yaml", 3)],
        fields=[("adrs/ADR-020.yaml", "superseded_by", "ADR-059")],
    ),
    Case(
        "adr-replaced-is-superseded",
        [V("adr-replaced-is-superseded", "ADR-020", "adrs/ADR-020.yaml", 2)],
        fields=[("adrs/ADR-020.yaml", "status", "Accepted")],
    ),
    Case(
        "adr-superseded-has-successor",
        [V("adr-superseded-has-successor", "ADR-059", "adrs/ADR-059.yaml", 2)],
        fields=[("adrs/ADR-059.yaml", "status", "Superseded")],
    ),
    Case(
        "adr-no-cycle",
        [
            V("adr-no-cycle", "ADR-020", "adrs/ADR-020.yaml", 3),
            V("adr-no-cycle", "ADR-026", "adrs/ADR-026.yaml", 4),
        ],
        files={
            "adrs/ADR-020.yaml": "id: ADR-020\nstatus: Superseded\nsupersedes: [ADR-026]\nsuperseded_by: ADR-026\n",
            "adrs/ADR-026.yaml": "id: ADR-026\nstatus: Superseded\nsummary: A summary.\n"
            "supersedes: [ADR-020]\nsuperseded_by: ADR-020\n",
        },
    ),
    Case(
        "paper-authors",
        [V("paper-authors", "LIT-004", "papers/LIT-004.yaml", 1)],
        fields=[("papers/LIT-004.yaml", "authors", None)],
    ),
    Case(
        "paper-year",
        [V("paper-year", "LIT-206", "papers/LIT-206.yaml", 3)],
        fields=[("papers/LIT-206.yaml", "year", "16")],
    ),
    Case(
        "paper-arxiv-id",
        [V("paper-arxiv-id", "LIT-016", "papers/LIT-016.yaml", 4)],
        fields=[("papers/LIT-016.yaml", "arxiv", "'arXiv:1811.06965'")],
    ),
    Case(
        "paper-url",
        [V("paper-url", "LIT-051", "papers/LIT-051.yaml", 4)],
        fields=[("papers/LIT-051.yaml", "url", "www.usenix.org/conference/osdi20/presentation/jiang")],
    ),
    Case(
        "paper-url",
        [V("paper-url", "LIT-051", "papers/LIT-051.yaml", 4)],
        fields=[("papers/LIT-051.yaml", "url", "'https://www.usenix.org/\"><script>'")],
    ),
    Case(
        "arxiv-year",
        [V("arxiv-year", "LIT-016", "papers/LIT-016.yaml", 3, "warning")],
        fields=[("papers/LIT-016.yaml", "year", "2017")],
    ),
    Case(
        "topic-label",
        [V("topic-label", "distributed-optimization", "topics/distributed-optimization.yaml", 1)],
        fields=[("topics/distributed-optimization.yaml", "label", None)],
    ),
    Case(
        "governed-by-resolves",
        [V("governed-by-resolves", "registry", "registry.yaml", 4)],
        fields=[("registry.yaml", "governed_by", "[ADR-026, ADR-059, ADR-999]")],
    ),
    Case(
        "paper-arxiv-version",
        [V("paper-arxiv-version", "LIT-016", "papers/LIT-016.yaml", 5)],
        fields=[("papers/LIT-016.yaml", "arxiv_version", "0")],
    ),
    Case(
        "arxiv-version-needs-id",
        [V("arxiv-version-needs-id", "LIT-051", "papers/LIT-051.yaml", 5)],
        fields=[("papers/LIT-051.yaml", "arxiv_version", "2")],
    ),
    Case(
        "paper-locator-unread",
        [V("paper-locator-unread", "LIT-004", "papers/LIT-004.yaml", 4)],
        fields=[("papers/LIT-004.yaml", "arxiv", None), ("papers/LIT-004.yaml", "locator", "ARXIV-16040.6174")],
    ),
    Case(
        "topic-declared-size",
        [V("topic-declared-size", "distributed-optimization", "topics/distributed-optimization.yaml", 4, "warning")],
        fields=[("topics/distributed-optimization.yaml", "declared_size", "41")],
    ),
    Case(
        "registry-declared-size",
        [V("registry-declared-size", "registry", "registry.yaml", 1, "info")],
        files={"registry.yaml": "declared_size: 449\ntitle: Topics\n"},
    ),
]

#: Fixes of the shipped data's own findings: the data sets that satisfy the rules the shipped data breaks.
FIXES = {
    "arxiv-year": [("papers/LIT-083.yaml", "year", "2023")],
    "active-cites-paper": [
        (f"practices/{p}.yaml", "cites", "[LIT-004]") for p in ("SOTA-214", "SOTA-219", "SOTA-364", "SOTA-376")
    ],
    "practice-summary": [(f"practices/{p}.yaml", "summary", "A summary.") for p in ("SOTA-364", "SOTA-376")],
    "registry-declared-size": [("registry.yaml", "declared_size", "42")],
}


@pytest.fixture(scope="module")
def shipped_report():
    """The shipped data's report, located relative to a working directory holding data/."""
    cwd = os.getcwd()
    os.chdir(REPO)
    try:
        return check(Path("data"))
    finally:
        os.chdir(cwd)


def apply(case_fields, files, data: Path) -> None:
    for relative, text in files.items():
        (data / relative).write_text(text, encoding="utf-8")
    for relative, name, value in case_fields:
        set_field(data, relative, name, value)


# ------------------------------------------------------------------------------------ the rules


def test_every_rule_has_a_breaking_case() -> None:
    rules = {rule.id for rule in load_rules()}
    assert rules - {DATA_READABLE} == {case.rule for case in CASES}


def test_shipped_data_findings_exactly(shipped_report) -> None:
    assert [key(f) for f in shipped_report.findings] == SHIPPED
    assert shipped_report.conforms and shipped_report.counts == {"violation": 0, "warning": 7, "info": 1}
    assert shipped_report.records == 65


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.id)
def test_rule_broken(case: Case, workdir: Path) -> None:
    data = Path("data")
    apply(case.fields, case.files, data)
    report = check(data, add=case.add, remove=case.remove)
    new = sorted(key(f) for f in report.findings if key(f) not in SHIPPED)
    assert new == sorted(case.expected)
    assert report.failed(strict=True)
    assert report.failed() == any(severity == "violation" for _rule, severity, *_ in case.expected)


@pytest.mark.parametrize("rule", sorted({case.rule for case in CASES}))
def test_rule_satisfied(rule: str, workdir: Path, shipped_report) -> None:
    if rule not in FIXES:
        assert [f for f in shipped_report.findings if f.rule_id == rule] == []
        return
    assert [f for f in shipped_report.findings if f.rule_id == rule]  # the shipped data breaks it: fix it
    apply(FIXES[rule], {}, Path("data"))
    report = check(Path("data"))
    assert [f for f in report.findings if f.rule_id == rule] == []


def test_unplaced_is_a_known_topic_and_an_info(workdir: Path) -> None:
    set_field(Path("data"), "papers/LIT-004.yaml", "topic", "unplaced")
    report = check(Path("data"))
    assert [key(f) for f in report.findings if key(f) not in SHIPPED] == [
        V("filed-unplaced", "LIT-004", "papers/LIT-004.yaml", 5, "info")
    ]
    assert not report.failed(strict=False)


def test_findings_name_the_value_and_the_fix(workdir: Path) -> None:
    set_field(Path("data"), P17, "cites", "[LIT-016, LIT-999]")
    set_field(Path("data"), "adrs/ADR-020.yaml", "superseded_by", "ADR-059")
    report = check(Path("data"))
    new = [f for f in report.findings if key(f) not in SHIPPED]
    assert [(f.rule_id, f.message, f.value, f.path) for f in new] == [
        (
            "adr-supersession-agrees",
            "`superseded_by` disagrees with ADR-026, which lists this ADR under `supersedes`: "
            "make both name the same ADR.",
            "ADR-026",
            None,
        ),
        (
            "cites-resolve",
            "LIT-999 in `cites` is not a paper of data/papers/: fix the id or add the paper's record.",
            "LIT-999",
            "http://purl.org/spar/cito/cites",
        ),
    ]
    assert [f.focus for f in new] == [
        "https://w3id.org/sotakg/id/ADR-020",
        "https://w3id.org/sotakg/id/SOTA-017",
    ]


def test_inverse_paths_are_reported_in_sparql_syntax(workdir: Path) -> None:
    set_field(Path("data"), "adrs/ADR-059.yaml", "supersedes", "[ADR-020]")
    set_field(Path("data"), "adrs/ADR-020.yaml", "superseded_by", None)
    finding = next(f for f in check(Path("data")).findings if f.rule_id == "adr-superseded-once")
    assert finding.path == "^<http://purl.org/dc/terms/replaces>"
    assert finding.value is None


def test_rules_follow_the_shape_conventions() -> None:
    text = "".join(path.read_text(encoding="utf-8") for path in shapes_paths())
    predicates = {q.predicate.value for path in shapes_paths() for q in parse(path=str(path), format=RdfFormat.TURTLE)}
    assert "http://www.w3.org/2002/07/owl#imports" not in predicates
    assert not {p for p in predicates if p.startswith("http://www.w3.org/ns/shacl#shapesGraph")}
    rules = load_rules()
    assert len({rule.id for rule in rules}) == len(rules)
    for rule in rules:
        assert rule.iri == f"https://w3id.org/sotakg/shapes#{rule.id}"
        assert re.fullmatch(r"[a-z]+(-[a-z]+)*", rule.id), rule.id
        assert rule.severity in ("violation", "warning", "info")
        assert rule.message and rule.comment and rule.source, rule.id
    # Every SHACL-SPARQL constraint is a SELECT on $this (what a second engine can run).
    selects = re.findall(r'sh:select """(.*?)"""', text, re.DOTALL)
    assert selects and all(re.match(r"\s*SELECT \$this\b", s) for s in selects)


# ------------------------------------------------------------------------------------ locations


def test_field_of_path() -> None:
    assert field_of_path("https://w3id.org/sotakg/ontology#status") == "status"
    assert field_of_path("^<http://purl.org/dc/terms/replaces>") == "superseded_by"
    assert field_of_path("(<http://purl.org/dc/terms/identifier>/^<http://purl.org/dc/terms/identifier>)") == "id"
    assert field_of_path("http://example.org/other") is None
    assert field_of_path(None) is None


def test_short_term() -> None:
    assert short_term("<https://w3id.org/sotakg/id/LIT-051>") == "LIT-051"
    assert short_term("<https://w3id.org/sotakg/topic/unplaced>") == "unplaced"
    assert short_term('"2022"^^<http://www.w3.org/2001/XMLSchema#gYear>') == "2022"
    assert short_term('"say \\"hi\\"\\n\\u00e9"') == 'say "hi"\né'
    assert short_term("<http://example.org/x>") == "http://example.org/x"


# ------------------------------------------------------------------------------------ unreadable data


def test_unreadable_files_are_findings_and_the_store_is_untouched(workdir: Path) -> None:
    data = Path("data")
    (data / "practices/SOTA-018.yaml").write_text("id: SOTA-018\nstatus: Active\nstatus: Active\n")
    (data / "practices/SOTA-019.yaml").write_bytes(b"id: SOTA-019\ntitle: caf\xe9\n")
    (data / "papers/LIT-999.yaml").write_text("id: LIT-004\nauthors: Doe\nyear: 2020\n")
    (data / "adrs/ADR-020.yaml").write_text("id: ADR-020\nstatus: [Superseded\n")
    (data / "notes").mkdir()
    (data / "notes/todo.yaml").write_text("id: SOTA-500\n")
    report = validate(data, Path(".sotakg/store"))
    assert [key(f) + (f.message,) for f in report.findings] == [
        (
            "data-readable",
            "violation",
            "ADR-020",
            "data/adrs/ADR-020.yaml",
            3,
            "YAML syntax error: did not find expected ',' or ']' (while parsing a flow sequence started on line 2)",
        ),
        (
            "data-readable",
            "violation",
            "todo",
            "data/notes/todo.yaml",
            None,
            "not in a record folder; move it into one of: adrs, papers, practices, topics",
        ),
        (
            "data-readable",
            "violation",
            "LIT-004",
            "data/papers/LIT-999.yaml",
            1,
            "the file is named LIT-999.yaml but holds id LIT-004; rename the file to LIT-004.yaml or fix 'id'",
        ),
        (
            "id-unique",
            "violation",
            "LIT-004",
            "data/papers/LIT-999.yaml",
            1,
            "identifier LIT-004 is also used by data/papers/LIT-004.yaml:1; keep one of the two",
        ),
        (
            "data-readable",
            "violation",
            "SOTA-018",
            "data/practices/SOTA-018.yaml",
            3,
            "duplicate key 'status' (first on line 2); keep one of them",
        ),
        (
            "data-readable",
            "violation",
            "SOTA-019",
            "data/practices/SOTA-019.yaml",
            2,
            "not UTF-8 (byte 0xe9); save the file as UTF-8",
        ),
    ]
    assert not report.readable and report.failed()
    assert not Path(".sotakg").exists()
    assert render(report, "text").splitlines()[2] == (
        "data/notes/todo.yaml: [data-readable] violation: "
        "not in a record folder; move it into one of: adrs, papers, practices, topics (todo)"
    )


def test_a_node_no_record_stands_behind_is_reported_last_by_its_iri(workdir: Path) -> None:
    report = check(Path("data"), add="id:SOTA-999 a sota:Practice .")
    unlocated = [f for f in report.findings if f.file is None]
    assert report.findings[-len(unlocated) :] == unlocated
    assert sorted(f.rule_id for f in unlocated) == [
        "current-version",
        "practice-id",
        "practice-status",
        "practice-summary",
        "practice-title",
        "practice-topic",
    ]
    assert {(f.record, f.line, f.focus) for f in unlocated} == {(None, None, "https://w3id.org/sotakg/id/SOTA-999")}
    assert render_text_of(unlocated[:1]) == (
        "<https://w3id.org/sotakg/id/SOTA-999>: [current-version] violation: "
        "A practice has exactly one current version: "
        "set `version:` to its highest version number (1 for a first version).\n"
    )


def test_validate_builds_the_store_and_reuses_it(workdir: Path) -> None:
    first = validate(Path("data"), Path(".sotakg/store"))
    assert [key(f) for f in first.findings] == SHIPPED
    assert Path(".sotakg/store").is_symlink()
    set_field(Path("data"), P17, "status", "Accepted")
    second = validate(Path("data"), Path(".sotakg/store"))
    assert [key(f) for f in second.findings if key(f) not in SHIPPED] == [V("practice-status", "SOTA-017", P17, 5)]


# ------------------------------------------------------------------------------------ formats


@pytest.fixture(scope="module")
def mixed(tmp_path_factory: pytest.TempPathFactory):
    """The report on the shipped data plus one violation (a reason on an Active practice) and one info
    (a practice filed as unplaced), run through validate() with a store on disk, from a working
    directory holding data/."""
    root = tmp_path_factory.mktemp("mixed")
    shutil.copytree(REPO / "data", root / "data")
    set_field(root / "data", P49, "status", "Active")
    set_field(root / "data", P17, "topic", "unplaced")
    cwd = os.getcwd()
    os.chdir(root)
    try:
        return validate(Path("data"), Path(".sotakg/store"))
    finally:
        os.chdir(cwd)


def golden(name: str) -> str:
    return (GOLDEN / name).read_text(encoding="utf-8").replace("@VERSION@", __version__)


@pytest.mark.parametrize(
    ("fmt", "name"),
    [
        ("text", "validate-mixed.txt"),
        ("json", "validate-mixed.json"),
        ("junit", "validate-mixed.junit.xml"),
        ("sarif", "validate-mixed.sarif"),
        ("github", "validate-mixed.github.txt"),
    ],
)
def test_formats_match_golden_files(mixed, fmt: str, name: str) -> None:
    if os.environ.get("SOTAKG_UPDATE_GOLDEN"):  # regenerate after changing the rules; review the diff
        (GOLDEN / name).write_text(render(mixed, fmt).replace(__version__, "@VERSION@"), encoding="utf-8")
    assert render(mixed, fmt) == golden(name)


def test_json_report(mixed) -> None:
    document = json.loads(render(mixed, "json"))
    assert document["counts"] == {"violation": 1, "warning": 8, "info": 2}
    assert (document["conforms"], document["failed"], document["engine"]) == (False, True, "sparql")
    violation = next(f for f in document["findings"] if f["severity"] == "violation")
    assert violation == {
        "rule": "reason-only-if-rejected",
        "severity": "violation",
        "record": "SOTA-049",
        "file": "data/practices/SOTA-049.yaml",
        "line": 6,
        "message": "Only a Rejected practice has a rejection reason: remove `reason:` and `reason_names:`, "
        "or set `status: Rejected`.",
        "focus": "https://w3id.org/sotakg/id/SOTA-049",
        "path": None,
        "value": None,
    }


def test_junit_report_parses(mixed) -> None:
    root = ET.fromstring(render(mixed, "junit").encode("utf-8"))
    suite = root.find("testsuite")
    assert suite is not None
    cases = {case.get("name"): case for case in suite.findall("testcase")}
    assert list(cases) == [rule.id for rule in load_rules()]
    assert (root.get("tests"), root.get("failures")) == (str(len(cases)), "1")
    failure = cases["reason-only-if-rejected"].find("failure")
    assert failure is not None and failure.get("type") == "violation"
    assert failure.text == (
        "data/practices/SOTA-049.yaml:6: [reason-only-if-rejected] violation: Only a Rejected practice has a "
        "rejection reason: remove `reason:` and `reason_names:`, or set `status: Rejected`. (SOTA-049)"
    )
    assert cases["practice-summary"].find("failure") is None
    assert (cases["practice-summary"].findtext("system-out") or "").count("[practice-summary]") == 2
    strict = ET.fromstring(render(mixed, "junit", strict=True).encode("utf-8"))
    # the violation's rule and the four warnings' rules (the unplaced practice leaves its topic short)
    assert strict.get("failures") == "5"


def test_sarif_report_is_valid_sarif_2_1_0(mixed) -> None:
    log = json.loads(render(mixed, "sarif"))
    schema = json.loads(SARIF_SUBSET_SCHEMA.read_text(encoding="utf-8"))
    jsonschema.Draft4Validator.check_schema(schema)
    jsonschema.Draft4Validator(schema).validate(log)
    run_ = log["runs"][0]
    rules = run_["tool"]["driver"]["rules"]
    assert [rule["id"] for rule in rules] == [rule.id for rule in load_rules()]
    for result in run_["results"]:
        assert rules[result["ruleIndex"]]["id"] == result["ruleId"]
    levels = sorted({(r["ruleId"], r["level"]) for r in run_["results"]})
    assert levels == [
        ("active-cites-paper", "warning"),
        ("arxiv-year", "warning"),
        ("filed-unplaced", "note"),
        ("practice-summary", "warning"),
        ("reason-only-if-rejected", "error"),
        ("registry-declared-size", "note"),
        ("topic-declared-size", "warning"),
    ]
    first = run_["results"][0]["locations"][0]
    assert first["physicalLocation"] == {
        "artifactLocation": {"uri": "data/papers/LIT-083.yaml", "uriBaseId": "%SRCROOT%"},
        "region": {"startLine": 3},
    }
    assert first["logicalLocations"] == [{"name": "LIT-083", "kind": "object"}]


def test_sarif_check_refuses_what_sarif_refuses(mixed) -> None:
    # The structural check is not vacuous: what the SARIF schema forbids, it forbids too.
    schema = json.loads(SARIF_SUBSET_SCHEMA.read_text(encoding="utf-8"))
    log = json.loads(render(mixed, "sarif"))
    for breaking in (
        lambda d: d["runs"][0]["results"][0].update(level="fatal"),
        lambda d: d["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["region"].update(startLine=0),
        lambda d: d["runs"][0]["results"][0].pop("message"),
        lambda d: d["runs"][0]["tool"]["driver"].pop("name"),
        lambda d: d["runs"][0]["results"][0].update(file="x"),
        lambda d: d.update(version="2.0.0"),
    ):
        broken = json.loads(json.dumps(log))
        breaking(broken)
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.Draft4Validator(schema).validate(broken)


def test_github_commands_escape_what_github_requires() -> None:
    finding = Finding("rule-x", "warning", "SOTA-1", "data/a,b:c.yaml", 3, "50% done\nnext line")
    assert github_command(finding) == (
        "::warning file=data/a%2Cb%3Ac.yaml,line=3,title=rule-x::50%25 done%0Anext line (SOTA-1)"
    )
    unlocated = Finding("rule-y", "info", None, None, None, "m", focus="https://example.org/x")
    assert github_command(unlocated) == "::notice title=rule-y::<https://example.org/x>: m"
    assert render_text_of([unlocated]) == "<https://example.org/x>: [rule-y] info: m\n"


def test_github_commands_show_control_characters_as_escapes() -> None:
    """A file name or message holding terminal escapes or a bidirectional override must not colour
    or reorder the CI log: they are shown escaped, as in the text format."""
    finding = Finding("rule-x", "violation", "SOTA-1", "data/c\x1b[31m\u202e.yaml", 1, "bad\x07 \x9b name")
    assert github_command(finding) == (
        "::error file=data/c\\x1b[31m\\u202e.yaml,line=1,title=rule-x::bad\\x07 \\x9b name (SOTA-1)"
    )


def render_text_of(findings: list[Finding]) -> str:
    from sotakg.rules.report import finding_line

    return "".join(finding_line(f) + "\n" for f in findings)


def test_every_format_ends_with_a_newline(shipped_report) -> None:
    for fmt in FORMATS:
        assert render(shipped_report, fmt).endswith("\n")


# ------------------------------------------------------------------------------------ CLI


def run(runner, *args: str):
    return runner.invoke(cli, list(args), catch_exceptions=False)


def test_shipped_data_exits_0_and_fails_with_strict(runner, workdir: Path) -> None:
    result = run(runner, "validate")
    assert result.exit_code == 0
    assert result.output == golden("validate-shipped.txt")
    strict = runner.invoke(cli, ["validate", "--strict", "--format", "json", "-o", "report.json"])
    assert strict.exit_code == 1
    assert json.loads(Path("report.json").read_text(encoding="utf-8"))["failed"] is True
    assert strict.stdout == ""
    assert strict.stderr == "0 violations, 7 warnings, 1 info in 65 records (engine sparql).\n"


def test_unusable_options_and_missing_data_exit_2(runner, workdir: Path) -> None:
    assert run(runner, "validate", "--format", "yaml").exit_code == 2
    assert run(runner, "validate", "--engine", "jena").exit_code == 2
    missing = run(runner, "--data", "nowhere", "validate")
    assert missing.exit_code == 2
    assert "data folder nowhere does not exist" in missing.output
    assert not Path(".sotakg").exists()


def test_broken_data_exits_1_naming_rule_record_file_and_line(runner, workdir: Path) -> None:
    set_field(Path("data"), P49, "reason", None)
    result = run(runner, "validate")
    assert result.exit_code == 1
    assert (
        "data/practices/SOTA-049.yaml:5: [rejected-has-reason] violation: "
        "A Rejected practice says why it was rejected: "
        "add a `reason:` (and the ids it names under `reason_names:`). (SOTA-049)"
    ) in result.output.splitlines()
    assert result.output.splitlines()[-1] == "1 violation, 7 warnings, 1 info in 65 records (engine sparql)."


def test_unreadable_data_exits_1(runner, workdir: Path) -> None:
    Path("data/practices/SOTA-017.yaml").write_text("id: SOTA-017\ntitle: [unclosed\n")
    result = run(runner, "validate", "--format", "github")
    assert result.exit_code == 1
    assert result.output == (
        "::error file=data/practices/SOTA-017.yaml,line=3,title=data-readable::YAML syntax error: "
        "did not find expected ',' or ']' (while parsing a flow sequence started on line 2) (SOTA-017)\n"
        "1 violation, 0 warnings, 0 infos: "
        "the data cannot be read; fix the files named above and run again.\n"
    )
    assert not Path(".sotakg").exists()


def test_engine_option_lists_the_registry(runner) -> None:
    help_text = run(runner, "validate", "--help").output
    assert f"[{'|'.join(ENGINES)}]" in help_text.replace("\n", "").replace(" ", "")
    assert "Example:" in help_text


def test_cli_import_stays_light() -> None:
    code = "import sys, sotakg.cli; print(sorted(m for m in ('rdflib', 'pyshacl') if m in sys.modules))"
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": str(REPO / "src")},
    ).stdout
    assert out.strip() == "[]"


# ------------------------------------------------------------------------------------ docs and CI


def test_readme_rule_table_is_generated_from_the_shapes() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    match = re.search(r"<!-- rules:start -->\n(.*?)<!-- rules:end -->", readme, re.DOTALL)
    assert match is not None, "README.md lacks the <!-- rules:start --> ... <!-- rules:end --> markers"
    assert match[1] == rule_table_markdown()
    assert rule_table_markdown().count("\n") == len(load_rules()) + 2


def test_ci_workflow_and_pre_commit_hook_run_validate_for_github() -> None:
    workflow = yaml.safe_load((REPO / ".github/workflows/validate.yml").read_text(encoding="utf-8"))
    steps = workflow["jobs"]["filing-rules"]["steps"]
    assert "sotakg validate --format github" in [step.get("run") for step in steps]
    assert any(step.get("uses", "").startswith("github/codeql-action/upload-sarif") for step in steps)
    hooks = yaml.safe_load((REPO / ".pre-commit-hooks.yaml").read_text(encoding="utf-8"))
    assert hooks == [
        {
            "id": "sotakg-validate",
            "name": "sotakg filing rules",
            "description": "Check the anthology's YAML records against its filing rules (SHACL shapes).",
            "entry": "sotakg validate --format github",
            "language": "python",
            "files": "^(data|shapes)/",
            "pass_filenames": False,
            "require_serial": True,
        }
    ]


# ------------------------------------------------------------------------------------ baselines


@pytest.fixture
def anthology_repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A git repository (in the test's temp dir) whose one commit, main, holds the shipped data; the
    working directory is its top."""
    from .gitrepo import isolate_git, new_repository

    isolate_git(monkeypatch)
    repo = new_repository(tmp_path / "repo")
    monkeypatch.chdir(repo)
    return repo


def baseline_json(runner, *args: str) -> tuple[int, dict]:
    result = runner.invoke(cli, ["validate", "--baseline", "main", "--format", "json", *args])
    return result.exit_code, json.loads(result.stdout)


def states(document: dict) -> list[tuple[str, str | None, str]]:
    rows = [(f["rule"], f["record"], f["state"]) for f in document["findings"]]
    return rows + [(f["rule"], f["record"], f["state"]) for f in document["absent"]]


def prepend_lines(path: Path, count: int) -> None:
    path.write_text("# moved down\n" * count + path.read_text(encoding="utf-8"), encoding="utf-8")


def test_baseline_matches_findings_whose_lines_moved(runner, anthology_repo: Path) -> None:
    from .gitrepo import set_fields

    prepend_lines(anthology_repo / "data/papers/LIT-083.yaml", 3)
    set_fields(anthology_repo / "data/practices/SOTA-364.yaml", title="Reworded, findings untouched")
    prepend_lines(anthology_repo / "data/practices/SOTA-364.yaml", 2)
    code, document = baseline_json(runner, "--strict")
    # Only records with pre-existing findings changed: nothing new, so even --strict passes.
    assert code == 0
    assert document["failed"] is False
    assert document["states"] == {"new": 0, "unchanged": 8, "absent": 0}
    lines = {(f["record"], f["rule"]): f["line"] for f in document["findings"]}
    assert lines[("LIT-083", "arxiv-year")] == 6
    assert lines[("SOTA-364", "practice-summary")] == 3
    assert run(runner, "validate", "--strict").exit_code == 1  # without a baseline every warning counts


def test_baseline_new_violation_fails_new_warning_only_with_strict(runner, anthology_repo: Path) -> None:
    practices = anthology_repo / "data/practices"
    (practices / "SOTA-997.yaml").write_text(
        "id: SOTA-997\nversion: 1\ntitle: No summary yet\nstatus: Proposed\ntopic: distributed-optimization\n",
        encoding="utf-8",
    )
    code, document = baseline_json(runner)
    assert code == 0
    # New too: the topic now holds one practice more than its page declares.
    assert [row for row in states(document) if row[2] == "new"] == [
        ("practice-summary", "SOTA-997", "new"),
        ("topic-declared-size", "distributed-optimization", "new"),
    ]
    assert baseline_json(runner, "--strict")[0] == 1
    (practices / "SOTA-998.yaml").write_text(
        "id: SOTA-998\nversion: 1\ntitle: T\nsummary: S\nstatus: Proposed\ncites: [LIT-9999]\n"
        "topic: distributed-optimization\n",
        encoding="utf-8",
    )
    code, document = baseline_json(runner)
    assert code == 1
    assert ("cites-resolve", "SOTA-998", "new") in states(document)


def test_baseline_fixed_findings_are_absent_in_every_format(runner, anthology_repo: Path) -> None:
    from .gitrepo import set_fields

    set_fields(anthology_repo / "data/papers/LIT-083.yaml", year="2023")
    set_fields(anthology_repo / "data/practices/SOTA-364.yaml", summary="Now it has one.")
    (anthology_repo / "data/practices/SOTA-997.yaml").write_text(
        "id: SOTA-997\nversion: 1\ntitle: No summary yet\nstatus: Proposed\ntopic: distributed-optimization\n",
        encoding="utf-8",
    )
    code, document = baseline_json(runner)
    assert code == 0
    assert sorted(states(document)) == sorted(
        [
            ("active-cites-paper", "SOTA-214", "unchanged"),
            ("active-cites-paper", "SOTA-219", "unchanged"),
            ("active-cites-paper", "SOTA-364", "unchanged"),
            ("practice-summary", "SOTA-376", "unchanged"),
            ("active-cites-paper", "SOTA-376", "unchanged"),
            ("practice-summary", "SOTA-997", "new"),
            ("topic-declared-size", "distributed-optimization", "new"),
            ("registry-declared-size", "registry", "unchanged"),
            ("arxiv-year", "LIT-083", "absent"),
            ("practice-summary", "SOTA-364", "absent"),
        ]
    )
    # Absent findings are BASE's: their file and line are where they stood there.
    assert [(f["file"], f["line"]) for f in document["absent"]] == [
        ("data/papers/LIT-083.yaml", 3),
        ("data/practices/SOTA-364.yaml", 1),
    ]

    main_run = runner.invoke(cli, ["validate", "--baseline", "main"]).stdout
    assert main_run.index("New findings (not in main (") < main_run.index("Already in main (")
    assert main_run.index("Already in main (") < main_run.index("Fixed by this change (in main (")
    assert main_run.splitlines()[1] == (
        "data/practices/SOTA-997.yaml:1: [practice-summary] warning: A practice should have a summary: "
        "add `summary:`. (SOTA-997)"
    )
    assert main_run.splitlines()[-1].endswith(": 2 new, 6 unchanged, 2 fixed.")

    sarif = json.loads(runner.invoke(cli, ["validate", "--baseline", "main", "--format", "sarif"]).stdout)
    schema = json.loads(SARIF_SUBSET_SCHEMA.read_text(encoding="utf-8"))
    jsonschema.Draft4Validator(schema).validate(sarif)
    results = sarif["runs"][0]["results"]
    assert sorted((r["ruleId"], r["baselineState"]) for r in results) == sorted(
        (rule, state) for rule, _record, state in states(document)
    )
    rules = sarif["runs"][0]["tool"]["driver"]["rules"]
    assert all(rules[r["ruleIndex"]]["id"] == r["ruleId"] for r in results)

    github = runner.invoke(cli, ["validate", "--baseline", "main", "--format", "github"]).stdout.splitlines()
    assert github[:-1] == [
        "::warning file=data/practices/SOTA-997.yaml,line=1,title=practice-summary::"
        "A practice should have a summary: add `summary:`. (SOTA-997)",
        "::warning file=data/topics/distributed-optimization.yaml,line=4,title=topic-declared-size::"
        + next(f["message"] for f in document["findings"] if f["rule"] == "topic-declared-size")
        + " (distributed-optimization)",
    ]
    junit = ET.fromstring(
        runner.invoke(cli, ["validate", "--baseline", "main", "--format", "junit", "--strict"]).stdout
    )
    failures = [case.get("name") for case in junit.iter("testcase") if case.find("failure") is not None]
    assert failures == ["practice-summary", "topic-declared-size"]
    # a rule whose findings are all already in the baseline is no failure in the counts either
    assert junit.get("failures") == junit.find("testsuite").get("failures") == str(len(failures))


def _forged_baseline_cache(runner, anthology_repo: Path) -> Path:
    """Run a baseline check with a new violation, then edit sotakg's cache of BASE's findings to claim
    the new findings were already in BASE: the cache file, which sotakg believes while it is its own."""
    from .gitrepo import git

    (anthology_repo / "data/practices/SOTA-998.yaml").write_text(
        "id: SOTA-998\nversion: 1\ntitle: T\nsummary: S\nstatus: Proposed\ncites: [LIT-9999]\n"
        "topic: distributed-optimization\n",
        encoding="utf-8",
    )
    code, document = baseline_json(runner)
    assert code == 1
    caches = list((anthology_repo / ".sotakg/baselines").glob("*.json"))
    assert len(caches) == 1
    cached = json.loads(caches[0].read_text(encoding="utf-8"))
    assert cached["tree"] == git(anthology_repo, "rev-parse", "main:data").strip()
    assert len(cached["findings"]) == 8
    for new in (f for f in document["findings"] if f["state"] == "new"):
        forged = {k: v for k, v in new.items() if k != "state"}
        cached["findings"].append({"rule_id": forged.pop("rule"), **forged})
    caches[0].write_text(json.dumps(cached), encoding="utf-8")
    return caches[0]


def test_baseline_cache_is_used_unless_git_tracks_it(runner, anthology_repo: Path) -> None:
    from .gitrepo import git

    cache = _forged_baseline_cache(runner, anthology_repo)
    # A cache claiming the new violation was already in BASE is believed while it is sotakg's own ...
    code, document = baseline_json(runner)
    assert (code, document["states"]["new"]) == (0, 0)
    # ... and never once the change itself carries it (a pull request controls the checkout).
    git(anthology_repo, "add", "-f", str(cache))
    git(anthology_repo, "commit", "-q", "-m", "a forged baseline cache")
    code, document = baseline_json(runner)
    assert (code, document["states"]["new"]) == (1, 2)


def test_baseline_cache_is_not_trusted_in_a_store_folder_that_is_a_submodule(runner, anthology_repo: Path) -> None:
    from .gitrepo import git

    cache = _forged_baseline_cache(runner, anthology_repo)
    # A submodule at .sotakg: one tracked entry (a gitlink), and its files are not listed as tracked.
    head = git(anthology_repo, "rev-parse", "HEAD").strip()
    git(anthology_repo, "update-index", "--add", "--cacheinfo", f"160000,{head},.sotakg")
    git(anthology_repo, "commit", "-q", "-m", "the store folder as a submodule")
    assert git(anthology_repo, "ls-files", "--", str(cache)) == ""
    code, document = baseline_json(runner)
    assert (code, document["states"]["new"]) == (1, 2)


def test_baseline_cache_is_used_for_a_store_at_the_top_of_the_repository(runner, anthology_repo: Path) -> None:
    # The store's folder is then the whole work tree, which git tracks: only the cache folder counts.
    store = ["--store", "store"]
    runner.invoke(cli, [*store, "validate", "--baseline", "main", "--format", "json"])
    caches = list((anthology_repo / "baselines").glob("*.json"))
    assert len(caches) == 1
    cached = json.loads(caches[0].read_text(encoding="utf-8"))
    cached["findings"] = []  # sotakg's own cache is believed: BASE then had no findings
    caches[0].write_text(json.dumps(cached), encoding="utf-8")
    result = runner.invoke(cli, [*store, "validate", "--baseline", "main", "--format", "json"])
    assert json.loads(result.stdout)["states"]["unchanged"] == 0


def test_baseline_unreadable_head_file_is_a_new_finding(runner, anthology_repo: Path) -> None:
    (anthology_repo / "data/practices/SOTA-017.yaml").write_text("id: SOTA-017\ntitle: [\n", encoding="utf-8")
    code, document = baseline_json(runner)
    assert code == 1
    assert [(f["rule"], f["record"], f["state"]) for f in document["findings"]] == [
        ("data-readable", "SOTA-017", "new")
    ]


def test_baseline_refusals_exit_2(runner, anthology_repo: Path) -> None:
    missing = runner.invoke(cli, ["validate", "--baseline", "no-such-branch"])
    assert missing.exit_code == 2
    assert "no revision 'no-such-branch'" in missing.output
    remote = runner.invoke(cli, ["validate", "--baseline", "main", "--endpoint", "http://127.0.0.1:9/query"])
    assert remote.exit_code == 2
    assert "cannot be used with --endpoint" in remote.output


def test_baseline_folder_named_like_base_is_never_the_baseline(runner, anthology_repo: Path) -> None:
    # The workflow's base SHA is predictable: a pull request committing data under that name (or
    # origin/main) must not stand in for the base and hide its new findings.
    from .gitrepo import commit, git

    base = git(anthology_repo, "rev-parse", "HEAD").strip()
    (anthology_repo / "data/practices/SOTA-999.yaml").write_text(
        "id: SOTA-999\nversion: 1\ntitle: Bogus\nstatus: Bogus\ncites: [LIT-999]\ntopic: distributed-optimization\n",
        encoding="utf-8",
    )
    for decoy in (base, "origin/main"):
        shutil.copytree(anthology_repo / "data", anthology_repo / decoy)
    commit(anthology_repo, "SOTA-999, and data where the baseline would be looked for")
    git(anthology_repo, "update-ref", "refs/remotes/origin/main", base)
    new = [
        ("practice-status", "SOTA-999", "new"),
        ("cites-resolve", "SOTA-999", "new"),
        ("practice-summary", "SOTA-999", "new"),
        ("topic-declared-size", "distributed-optimization", "new"),
    ]
    for revision in (base, "origin/main"):
        result = runner.invoke(cli, ["validate", "--baseline", revision, "--format", "json"])
        assert result.exit_code == 1
        document = json.loads(result.stdout)
        assert document["states"] == {"new": 4, "unchanged": 8, "absent": 0}
        assert sorted(row for row in states(document) if row[2] == "new") == sorted(new)
    github = runner.invoke(cli, ["validate", "--baseline", base, "--format", "github"])
    assert github.exit_code == 1
    assert len([line for line in github.stdout.splitlines() if line.startswith("::")]) == 4
    # The folder is the baseline only when asked for as a path.
    explicit = runner.invoke(cli, ["validate", "--baseline", f"./{base}", "--format", "json"])
    assert (explicit.exit_code, json.loads(explicit.stdout)["states"]) == (0, {"new": 0, "unchanged": 12, "absent": 0})
    empty = runner.invoke(cli, ["validate", "--baseline", ""])
    assert empty.exit_code == 2
    assert "'' is not a git revision" in empty.output


def test_baseline_cache_never_writes_through_a_link(runner, anthology_repo: Path, tmp_path: Path) -> None:
    from sotakg.rules.baseline import _cache_key, baseline_findings

    from .gitrepo import commit, git

    tree = git(anthology_repo, "rev-parse", "main:data").strip()
    key = _cache_key(tree, DEFAULT_ENGINE, shapes_paths())
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n", encoding="utf-8")
    cache_folder = anthology_repo / ".sotakg" / "baselines"
    cache_folder.mkdir(parents=True)
    os.symlink(victim, cache_folder / f"{key}.json")
    git(anthology_repo, "add", "-f", ".sotakg/baselines")
    commit(anthology_repo, "a cache file that is a link out of the checkout")
    code, document = baseline_json(runner)
    assert (code, document["states"]) == (0, {"new": 0, "unchanged": 8, "absent": 0})
    assert victim.read_text(encoding="utf-8") == "precious\n"
    # The link was replaced by sotakg's own file, never written through.
    cache = cache_folder / f"{key}.json"
    assert not cache.is_symlink() and json.loads(cache.read_text(encoding="utf-8"))["tree"] == tree

    # A cache folder that is a link, or a store folder that is one, gets no cache at all.
    outside = tmp_path / "outside"
    outside.mkdir()
    shutil.rmtree(cache_folder)
    os.symlink(outside, cache_folder)
    assert baseline_json(runner)[0] == 0
    store_folder = tmp_path / "store-folder"
    os.symlink(outside, store_folder)
    label, findings = baseline_findings(
        anthology_repo / "data", store_folder / "store", "main", DEFAULT_ENGINE, shapes_paths()
    )
    assert (label.split(" ")[0], len(findings)) == ("main", 8)
    assert list(outside.iterdir()) == []


def test_baseline_against_an_unreadable_head_calls_nothing_fixed(runner, anthology_repo: Path, monkeypatch) -> None:
    monkeypatch.setenv("SOTAKG_MAX_FILE_BYTES", "1000")
    (anthology_repo / "data/papers/LIT-950.yaml").write_text(
        "id: LIT-950\ntitle: Long\nyear: 2024\n" + "# padding\n" * 200, encoding="utf-8"
    )
    code, document = baseline_json(runner)
    assert code == 1
    # HEAD could not be read, so nothing is known of BASE's findings: none is reported fixed.
    assert states(document) == [("data-readable", "LIT-950", "new")]
    assert document["states"] == {"new": 1, "unchanged": 0, "absent": 0}
    sarif = json.loads(runner.invoke(cli, ["validate", "--baseline", "main", "--format", "sarif"]).stdout)
    results = sarif["runs"][0]["results"]
    assert [(r["ruleId"], r["baselineState"]) for r in results] == [("data-readable", "new")]


def test_mark_findings_counts_duplicates_and_ignores_lines() -> None:
    from sotakg.rules.baseline import mark_findings
    from sotakg.rules.validate import ValidationReport

    def finding(line: int, value: str) -> Finding:
        return Finding("cites-resolve", "violation", "SOTA-1", "p.yaml", line, f"{value} is no paper", value=value)

    base = [finding(3, "LIT-1"), finding(9, "LIT-2")]
    head = ValidationReport([finding(5, "LIT-1"), finding(6, "LIT-1"), finding(7, "LIT-3")], [], "sparql", 1)
    marked = mark_findings(head, base, "main")
    assert [(f.line, f.state) for f in marked.findings] == [(5, "unchanged"), (6, "new"), (7, "new")]
    assert [(f.line, f.value, f.state) for f in marked.absent] == [(9, "LIT-2", "absent")]
    assert marked.failed() and marked.state_counts() == {"new": 2, "unchanged": 1, "absent": 1}


def test_ci_workflow_reviews_pull_requests_against_their_base() -> None:
    workflow = yaml.safe_load((REPO / ".github/workflows/validate.yml").read_text(encoding="utf-8"))
    steps = workflow["jobs"]["filing-rules"]["steps"]
    assert steps[0]["with"]["fetch-depth"] == 0  # the base commit must be in the clone
    by_name = {step.get("name"): step for step in steps}
    summary = by_name["Summarize the change"]
    assert summary["if"] == "github.event_name == 'pull_request'"
    assert summary["run"].startswith('sotakg diff "$BASE_SHA" --format markdown ')
    assert summary["run"].endswith('>> "$GITHUB_STEP_SUMMARY"')
    assert summary["env"]["BASE_SHA"] == "${{ github.event.pull_request.base.sha }}"
    checked = by_name["Check the filing rules (new findings only)"]
    assert checked["run"] == 'sotakg validate --format github --baseline "$BASE_SHA"'
    assert by_name["Check the filing rules"]["if"] == "github.event_name != 'pull_request'"
    # Values from the event reach the shell through the environment, never spliced into the script.
    assert all("${{" not in step.get("run", "") for step in steps)
