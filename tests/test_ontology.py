"""The ontology parses, and every term it defines or uses has a label and a comment."""

from __future__ import annotations

import pyoxigraph

from sotakg.graph import vocab as v
from sotakg.graph.rdf import record_triples
from sotakg.records.schema import load_anthology
from sotakg.resources import ontology_path

from .conftest import SHIPPED_DATA

LABEL = pyoxigraph.NamedNode(v.RDFS + "label")
COMMENT = pyoxigraph.NamedNode(v.RDFS + "comment")


def ontology() -> list[pyoxigraph.Triple]:
    return [q.triple for q in pyoxigraph.parse(path=str(ontology_path()))]


def test_every_defined_term_has_a_label_and_a_comment():
    triples = ontology()
    subjects = {t.subject for t in triples if t.subject.value.startswith(v.SOTA)}
    assert len(subjects) > 20
    for subject in subjects:
        props = {t.predicate for t in triples if t.subject == subject}
        assert LABEL in props and COMMENT in props, subject


def test_every_predicate_and_class_the_data_uses_is_described():
    described = {t.subject for t in ontology() if t.predicate == COMMENT}
    used = set()
    for record in load_anthology(SHIPPED_DATA).records:
        for triple in record_triples(record):
            if triple.predicate.value != v.TYPE:
                used.add(triple.predicate)
            elif triple.object.value.startswith(v.SOTA):
                used.add(triple.object)
    assert used - described == set()


def test_a_version_holds_only_its_number_and_chain_and_the_ontology_says_so():
    versions = set()
    stated: set[str] = set()
    triples = [t for r in load_anthology(SHIPPED_DATA).records for t in record_triples(r)]
    for triple in triples:
        if triple.predicate.value == v.TYPE and triple.object.value == v.PRACTICE_VERSION:
            versions.add(triple.subject)
    for triple in triples:
        if triple.subject in versions:
            stated.add(triple.predicate.value)
    assert stated == {v.TYPE, v.VERSION_NUMBER, v.IS_VERSION_OF, v.WAS_REVISION_OF}
    comments = {t.subject.value: t.object.value for t in ontology() if t.predicate == COMMENT}
    assert "of an earlier version the graph knows only that it existed" in comments[v.PRACTICE_VERSION]
    assert "are those the page gives this version" in comments[v.CURRENT_VERSION]
