"""The compiled SPARQL engine and pySHACL report the same findings: on the shipped data, on every
negative fixture of the filing-rules tests, and on randomly mutated copies of the data. And the default
engine keeps rdflib and pySHACL off the validate path."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyoxigraph import RdfFormat, Store

from sotakg.graph.rdf import anthology_triples, as_quads
from sotakg.records.schema import Anthology, Record, load_anthology
from sotakg.resources import ontology_path
from sotakg.rules.validate import validate_store

from .conftest import SHIPPED_DATA, subprocess_env
from .test_validate import CASES, Case, apply, quads

SHIPPED = load_anthology(SHIPPED_DATA)


def findings(anthology: Anthology, engine: str, add: str = "", remove: str = "") -> list[tuple]:
    store = Store()
    store.bulk_load(path=str(ontology_path()), format=RdfFormat.TURTLE)
    store.bulk_extend(list(as_quads(anthology_triples(anthology))))
    for quad in quads(remove):
        store.remove(quad)
    for quad in quads(add):
        store.add(quad)
    report = validate_store(store, anthology, engine=engine)
    found = [(f.rule_id, f.severity, f.record, f.file, f.line, f.value) for f in report.findings]
    # a key that orders None too: one rule can report the same line with and without a value
    return sorted(found, key=lambda finding: tuple((x is not None, str(x)) for x in finding))


def test_engines_agree_on_the_shipped_data():
    sparql = findings(SHIPPED, "sparql")
    assert sparql == findings(SHIPPED, "pyshacl")
    assert len(sparql) == 8


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.id)
def test_engines_agree_on_every_negative_fixture(case: Case, workdir: Path):
    apply(case.fields, case.files, Path("data"))
    anthology = load_anthology(Path("data"))
    sparql = findings(anthology, "sparql", case.add, case.remove)
    assert sparql == findings(anthology, "pyshacl", case.add, case.remove)
    assert any(rule == case.rule for rule, *_ in sparql)


IDS = sorted(r.id for r in SHIPPED.records) + ["SOTA-999", "LIT-998", "ADR-997", "X-1"]
VALUES = {
    "status": st.sampled_from(["Active", "Proposed", "Rejected", "Withdrawn", "Superseded", "Accepted"]),
    "version": st.integers(0, 4),
    "year": st.integers(1, 3000),
    "arxiv": st.sampled_from(["1811.06965", "2105.05720", "9912.1234", "18.1", "abc"]),
    "url": st.sampled_from(["https://example.org/a", "ftp://x", "not a url"]),
    "topic": st.sampled_from(["distributed-optimization", "unplaced", "nope"]),
    "reason": st.sampled_from(["too vague", "see SOTA-048 and LIT-998", "ADR-026 says so"]),
    "title": st.sampled_from(["A title", "Another"]),
    "summary": st.sampled_from(["A summary."]),
    "authors": st.sampled_from(["Someone et al."]),
    "superseded_by": st.sampled_from(IDS),
}
LISTS = ("cites", "reason_names", "supersedes", "governed_by")


@st.composite
def mutations(draw) -> list[Record]:
    records = copy.deepcopy(SHIPPED.records)
    for _ in range(draw(st.integers(1, 6))):
        record = draw(st.sampled_from(records))
        name = draw(st.sampled_from(sorted(set(VALUES) | set(LISTS))))
        if draw(st.booleans()) and name in record.fields and name != "id":
            del record.fields[name]
        elif name in LISTS:
            record.fields[name] = sorted(set(draw(st.lists(st.sampled_from(IDS), max_size=3))))
        else:
            record.fields[name] = draw(VALUES[name])
    return records


@given(mutations())
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_engines_agree_on_mutated_data(records: list[Record]):
    anthology = Anthology(records)
    assert findings(anthology, "sparql") == findings(anthology, "pyshacl")


def test_default_validate_imports_neither_rdflib_nor_pyshacl(workdir: Path):
    code = (
        "import json, sys\n"
        "from sotakg.cli import cli\n"
        "try:\n"
        "    cli(['validate', '--format', 'json', '-o', 'report.json'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "print(json.dumps(sorted(m for m in ('rdflib', 'pyshacl') if m in sys.modules)))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=workdir, env=subprocess_env(), capture_output=True, text=True
    )
    assert json.loads(result.stdout.strip().splitlines()[-1]) == [], result.stderr
    assert json.loads((workdir / "report.json").read_text())["engine"] == "sparql"
