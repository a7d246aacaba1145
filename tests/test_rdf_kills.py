"""Tests written to kill the mutants of ``src/sotakg/graph/rdf.py`` that survived mutation testing,
and to pin the rest of the records-to-RDF mapping the same way.

Each asserts an exact behaviour: the statements each kind of record makes, in order, with the
datatype of every literal (xsd:integer, xsd:gYear padded to four digits, xsd:anyURI); the terms
and N-Triples bytes they become; and which records, with which fields in which order, are read back
from triples, including triples sotakg never writes (untyped subjects, a second scheme, links to
nodes outside its namespaces).
"""

from __future__ import annotations

import pytest
from pyoxigraph import BlankNode, Literal, NamedNode, Quad, Store, Triple

from sotakg.graph.rdf import (
    Lit,
    anthology_ntriples,
    anthology_quads,
    anthology_triples,
    as_quads,
    iri,
    record_statements,
    record_triples,
    records_from_triples,
)
from sotakg.records.schema import Anthology, Record

SOTA = "https://w3id.org/sotakg/ontology#"
ID = "https://w3id.org/sotakg/id/"
TOPIC = "https://w3id.org/sotakg/topic/"
DCT = "http://purl.org/dc/terms/"
SKOS = "http://www.w3.org/2004/02/skos/core#"
PROV = "http://www.w3.org/ns/prov#"
CITO = "http://purl.org/spar/cito/"
TYPE = "http://www.w3.org/1999/02/22-rdf-syntax-ns#type"
INTEGER = "http://www.w3.org/2001/XMLSchema#integer"
GYEAR = "http://www.w3.org/2001/XMLSchema#gYear"
ANYURI = "http://www.w3.org/2001/XMLSchema#anyURI"
SCHEME = "https://w3id.org/sotakg/id/topics"

REASON = "Superseded by SOTA-901; see LIT-002 and LIT-001, and SOTA-901 again; not SOTA-900 itself."
DESCRIPTION = "Governed by ADR-002 and SOTA-010; see ADR-002 and LIT-001."


def practice() -> Record:
    return Record(
        "practice",
        "SOTA-900",
        {
            "id": "SOTA-900",
            "version": 3,
            "title": "Gradient clipping",
            "summary": "Clip it.",
            "status": "Rejected",
            "status_column": "Rejected (see SOTA-901)",
            "reason": REASON,
            "reason_names": ["SOTA-901"],
            "cites": ["LIT-001", "LIT-002"],
            "topic": "optimization",
        },
    )


def paper() -> Record:
    return Record(
        "paper",
        "LIT-001",
        {
            "id": "LIT-001",
            "title": "Adam",
            "authors": "Kingma and Ba",
            "year": 2014,
            "arxiv": "1412.6980",
            "arxiv_version": 9,
            "url": "https://arxiv.org/abs/1412.6980",
            "locator": "shelf 3",
            "topic": "optimization",
        },
    )


def adr() -> Record:
    return Record(
        "adr",
        "ADR-003",
        {
            "id": "ADR-003",
            "title": "Records as YAML",
            "status": "Superseded",
            "summary": "One file per record.",
            "supersedes": ["ADR-001", "ADR-002"],
            "superseded_by": "ADR-004",
        },
    )


def topic() -> Record:
    return Record(
        "topic",
        "optimization",
        {"id": "optimization", "label": "Optimization", "scope": "How models are trained.", "declared_size": 12},
    )


def registry() -> Record:
    return Record(
        "registry",
        "registry",
        {"title": "Topics", "description": DESCRIPTION, "declared_size": 40, "governed_by": ["ADR-002"]},
    )


# ------------------------------------------------------------------------------ records -> statements


def test_a_full_practice_states_every_field_and_each_version_in_order():
    s = ID + "SOTA-900"
    v1, v2, v3 = ID + "SOTA-900-v1", ID + "SOTA-900-v2", ID + "SOTA-900-v3"
    assert list(record_statements(practice())) == [
        (s, TYPE, SOTA + "Practice"),
        (s, DCT + "identifier", Lit("SOTA-900")),
        (s, DCT + "title", Lit("Gradient clipping")),
        (s, SOTA + "summary", Lit("Clip it.")),
        (s, SOTA + "status", SOTA + "Rejected"),
        (s, SOTA + "statusColumn", Lit("Rejected (see SOTA-901)")),
        (s, SOTA + "rejectionReason", Lit(REASON)),
        (s, SOTA + "reasonNames", ID + "SOTA-901"),
        (s, SOTA + "reasonMentions", ID + "LIT-001"),
        (s, SOTA + "reasonMentions", ID + "LIT-002"),
        (s, SOTA + "reasonMentions", ID + "SOTA-901"),
        (s, CITO + "cites", ID + "LIT-001"),
        (s, CITO + "cites", ID + "LIT-002"),
        (s, SOTA + "filedUnder", TOPIC + "optimization"),
        (s, SOTA + "currentVersion", v3),
        (v1, TYPE, SOTA + "PracticeVersion"),
        (v1, SOTA + "versionNumber", Lit("1", INTEGER)),
        (v1, DCT + "isVersionOf", s),
        (v2, TYPE, SOTA + "PracticeVersion"),
        (v2, SOTA + "versionNumber", Lit("2", INTEGER)),
        (v2, DCT + "isVersionOf", s),
        (v2, PROV + "wasRevisionOf", v1),
        (v3, TYPE, SOTA + "PracticeVersion"),
        (v3, SOTA + "versionNumber", Lit("3", INTEGER)),
        (v3, DCT + "isVersionOf", s),
        (v3, PROV + "wasRevisionOf", v2),
    ]


def test_a_status_that_cannot_be_a_local_name_stays_a_plain_literal():
    record = Record("practice", "SOTA-903", {"id": "SOTA-903", "status": "on hold?"})
    assert list(record_statements(record))[2] == (ID + "SOTA-903", SOTA + "status", Lit("on hold?"))


def test_a_practice_of_version_zero_names_its_version_but_states_no_version_nodes():
    record = Record("practice", "SOTA-902", {"id": "SOTA-902", "version": 0})
    assert list(record_statements(record)) == [
        (ID + "SOTA-902", TYPE, SOTA + "Practice"),
        (ID + "SOTA-902", DCT + "identifier", Lit("SOTA-902")),
        (ID + "SOTA-902", SOTA + "currentVersion", ID + "SOTA-902-v0"),
    ]


def test_a_practice_of_version_one_is_no_revision_of_anything():
    record = Record("practice", "SOTA-904", {"id": "SOTA-904", "version": 1})
    assert list(record_statements(record))[2:] == [
        (ID + "SOTA-904", SOTA + "currentVersion", ID + "SOTA-904-v1"),
        (ID + "SOTA-904-v1", TYPE, SOTA + "PracticeVersion"),
        (ID + "SOTA-904-v1", SOTA + "versionNumber", Lit("1", INTEGER)),
        (ID + "SOTA-904-v1", DCT + "isVersionOf", ID + "SOTA-904"),
    ]


def test_a_full_paper_states_typed_year_version_and_url():
    s = ID + "LIT-001"
    assert list(record_statements(paper())) == [
        (s, TYPE, SOTA + "Paper"),
        (s, DCT + "identifier", Lit("LIT-001")),
        (s, DCT + "title", Lit("Adam")),
        (s, SOTA + "authors", Lit("Kingma and Ba")),
        (s, SOTA + "year", Lit("2014", GYEAR)),
        (s, SOTA + "arxivId", Lit("1412.6980")),
        (s, SOTA + "arxivVersion", Lit("9", INTEGER)),
        (s, SOTA + "url", Lit("https://arxiv.org/abs/1412.6980", ANYURI)),
        (s, SOTA + "unreadLocator", Lit("shelf 3")),
        (s, SOTA + "filedUnder", TOPIC + "optimization"),
    ]


@pytest.mark.parametrize(
    "year, lexical",
    [
        (0, "0000"),
        (7, "0007"),
        (999, "0999"),
        (1000, "1000"),
        (2014, "2014"),
        (-5, "-0005"),
        (-44, "-0044"),
        (-9999, "-9999"),
    ],
)
def test_a_year_is_a_gyear_of_at_least_four_digits(year, lexical):
    record = Record("paper", "LIT-009", {"id": "LIT-009", "year": year})
    assert list(record_statements(record))[2] == (ID + "LIT-009", SOTA + "year", Lit(lexical, GYEAR))
    # well-typed for the engine: YEAR() reads it back (an ill-typed "-5" gives no value)
    store = Store()
    store.extend(Quad(triple.subject, triple.predicate, triple.object) for triple in record_triples(record))
    found = list(store.query("SELECT (YEAR(?y) AS ?year) WHERE { ?s <" + SOTA + "year> ?y }"))
    assert [solution["year"].value for solution in found] == [str(year)]


def test_a_full_adr_states_what_it_replaces_and_what_replaced_it():
    s = ID + "ADR-003"
    assert list(record_statements(adr())) == [
        (s, TYPE, SOTA + "ADR"),
        (s, DCT + "identifier", Lit("ADR-003")),
        (s, DCT + "title", Lit("Records as YAML")),
        (s, SOTA + "status", SOTA + "Superseded"),
        (s, SOTA + "summary", Lit("One file per record.")),
        (s, DCT + "replaces", ID + "ADR-001"),
        (s, DCT + "replaces", ID + "ADR-002"),
        (s, DCT + "isReplacedBy", ID + "ADR-004"),
    ]


def test_a_full_topic_is_a_concept_of_the_scheme_with_an_integer_size():
    s = TOPIC + "optimization"
    assert list(record_statements(topic())) == [
        (s, TYPE, SOTA + "Topic"),
        (s, TYPE, SKOS + "Concept"),
        (s, DCT + "identifier", Lit("optimization")),
        (s, SOTA + "slug", Lit("optimization")),
        (s, SKOS + "inScheme", SCHEME),
        (s, SKOS + "prefLabel", Lit("Optimization")),
        (s, SKOS + "scopeNote", Lit("How models are trained.")),
        (s, SOTA + "declaredSize", Lit("12", INTEGER)),
    ]


def test_the_full_registry_is_the_scheme_and_references_each_record_its_description_names_once():
    assert list(record_statements(registry())) == [
        (SCHEME, TYPE, SOTA + "TopicScheme"),
        (SCHEME, TYPE, SKOS + "ConceptScheme"),
        (SCHEME, DCT + "title", Lit("Topics")),
        (SCHEME, DCT + "description", Lit(DESCRIPTION)),
        (SCHEME, SOTA + "declaredSize", Lit("40", INTEGER)),
        (SCHEME, SOTA + "governedBy", ID + "ADR-002"),
        (SCHEME, DCT + "references", ID + "ADR-002"),
        (SCHEME, DCT + "references", ID + "LIT-001"),
        (SCHEME, DCT + "references", ID + "SOTA-010"),
    ]


@pytest.mark.parametrize(
    "record, statements",
    [
        (
            Record("practice", "SOTA-901", {"id": "SOTA-901"}),
            [(ID + "SOTA-901", TYPE, SOTA + "Practice"), (ID + "SOTA-901", DCT + "identifier", Lit("SOTA-901"))],
        ),
        (
            Record("paper", "LIT-002", {"id": "LIT-002"}),
            [(ID + "LIT-002", TYPE, SOTA + "Paper"), (ID + "LIT-002", DCT + "identifier", Lit("LIT-002"))],
        ),
        (
            Record("adr", "ADR-001", {"id": "ADR-001"}),
            [(ID + "ADR-001", TYPE, SOTA + "ADR"), (ID + "ADR-001", DCT + "identifier", Lit("ADR-001"))],
        ),
        (
            Record("topic", "misc", {"id": "misc"}),
            [
                (TOPIC + "misc", TYPE, SOTA + "Topic"),
                (TOPIC + "misc", TYPE, SKOS + "Concept"),
                (TOPIC + "misc", DCT + "identifier", Lit("misc")),
                (TOPIC + "misc", SOTA + "slug", Lit("misc")),
                (TOPIC + "misc", SKOS + "inScheme", SCHEME),
            ],
        ),
        (
            Record("registry", "registry", {}),
            [(SCHEME, TYPE, SOTA + "TopicScheme"), (SCHEME, TYPE, SKOS + "ConceptScheme")],
        ),
    ],
    ids=["practice", "paper", "adr", "topic", "registry"],
)
def test_a_record_of_only_its_identifier_states_only_its_type_and_identifier(record, statements):
    assert list(record_statements(record)) == statements


# ------------------------------------------------------------------------------ statements -> terms


def test_record_triples_make_plain_and_typed_literals_and_named_nodes():
    record = Record("topic", "misc", {"id": "misc", "label": "Misc", "declared_size": 3})
    s = NamedNode(TOPIC + "misc")
    expected = [
        Triple(s, NamedNode(TYPE), NamedNode(SOTA + "Topic")),
        Triple(s, NamedNode(TYPE), NamedNode(SKOS + "Concept")),
        Triple(s, NamedNode(DCT + "identifier"), Literal("misc")),
        Triple(s, NamedNode(SOTA + "slug"), Literal("misc")),
        Triple(s, NamedNode(SKOS + "inScheme"), NamedNode(SCHEME)),
        Triple(s, NamedNode(SKOS + "prefLabel"), Literal("Misc")),
        Triple(s, NamedNode(SOTA + "declaredSize"), Literal("3", datatype=NamedNode(INTEGER))),
    ]
    triples = list(record_triples(record))
    assert triples == expected
    assert triples[-1].object.datatype == NamedNode(INTEGER)
    assert triples[-2].object.datatype == NamedNode("http://www.w3.org/2001/XMLSchema#string")
    assert list(anthology_triples(Anthology([record]))) == expected
    assert list(anthology_quads(Anthology([record]))) == [Quad(t.subject, t.predicate, t.object) for t in expected]
    assert list(as_quads(expected)) == [Quad(t.subject, t.predicate, t.object) for t in expected]


def test_the_n_triples_of_a_paper_escape_its_text_and_type_its_year():
    record = Record("paper", "LIT-001", {"id": "LIT-001", "title": 'A "q"\nb', "year": 999, "arxiv_version": 2})
    assert anthology_ntriples(Anthology([record])) == (
        b"<https://w3id.org/sotakg/id/LIT-001> <http://www.w3.org/1999/02/22-rdf-syntax-ns#type>"
        b" <https://w3id.org/sotakg/ontology#Paper> .\n"
        b'<https://w3id.org/sotakg/id/LIT-001> <http://purl.org/dc/terms/identifier> "LIT-001" .\n'
        b'<https://w3id.org/sotakg/id/LIT-001> <http://purl.org/dc/terms/title> "A \\"q\\"\\nb" .\n'
        b'<https://w3id.org/sotakg/id/LIT-001> <https://w3id.org/sotakg/ontology#year> "0999"'
        b"^^<http://www.w3.org/2001/XMLSchema#gYear> .\n"
        b'<https://w3id.org/sotakg/id/LIT-001> <https://w3id.org/sotakg/ontology#arxivVersion> "2"'
        b"^^<http://www.w3.org/2001/XMLSchema#integer> .\n"
    )


def test_the_n_triples_of_an_empty_anthology_are_no_bytes_at_all():
    assert anthology_ntriples(Anthology([])) == b""


def test_iri_hands_back_the_very_node_it_made_the_first_time():
    first = iri("https://example.org/rdf-kills/cached")
    assert first == NamedNode("https://example.org/rdf-kills/cached")
    assert iri("https://example.org/rdf-kills/cached") is first
    assert iri("https://example.org/rdf-kills/other") == NamedNode("https://example.org/rdf-kills/other")


# ------------------------------------------------------------------------------ triples -> records


def read_back(records: list[Record]) -> list[tuple[str, str, list]]:
    triples = [t for r in records for t in record_triples(r)]
    return [(r.kind, r.id, list(r.fields.items())) for r in records_from_triples(triples)]


def test_full_records_of_every_kind_come_back_sorted_by_kind_with_fields_in_schema_order():
    assert read_back([registry(), topic(), adr(), paper(), practice()]) == [
        (
            "practice",
            "SOTA-900",
            [
                ("id", "SOTA-900"),
                ("version", 3),
                ("title", "Gradient clipping"),
                ("summary", "Clip it."),
                ("status", "Rejected"),
                ("status_column", "Rejected (see SOTA-901)"),
                ("reason", REASON),
                ("reason_names", ["SOTA-901"]),
                ("cites", ["LIT-001", "LIT-002"]),
                ("topic", "optimization"),
            ],
        ),
        (
            "paper",
            "LIT-001",
            [
                ("id", "LIT-001"),
                ("title", "Adam"),
                ("authors", "Kingma and Ba"),
                ("year", 2014),
                ("arxiv", "1412.6980"),
                ("arxiv_version", 9),
                ("url", "https://arxiv.org/abs/1412.6980"),
                ("locator", "shelf 3"),
                ("topic", "optimization"),
            ],
        ),
        (
            "adr",
            "ADR-003",
            [
                ("id", "ADR-003"),
                ("title", "Records as YAML"),
                ("status", "Superseded"),
                ("summary", "One file per record."),
                ("supersedes", ["ADR-001", "ADR-002"]),
                ("superseded_by", "ADR-004"),
            ],
        ),
        (
            "topic",
            "optimization",
            [
                ("id", "optimization"),
                ("label", "Optimization"),
                ("scope", "How models are trained."),
                ("declared_size", 12),
            ],
        ),
        (
            "registry",
            "registry",
            [("title", "Topics"), ("description", DESCRIPTION), ("declared_size", 40), ("governed_by", ["ADR-002"])],
        ),
    ]


def test_records_of_the_same_kind_come_back_sorted_by_identifier():
    records = [Record("paper", i, {"id": i}) for i in ("LIT-3", "LIT-1", "LIT-2")]
    assert [r.id for r in records_from_triples(t for r in records for t in record_triples(r))] == [
        "LIT-1",
        "LIT-2",
        "LIT-3",
    ]


def test_a_record_without_its_optional_fields_comes_back_with_only_its_identifier():
    assert read_back([Record("practice", "SOTA-901", {"id": "SOTA-901"}), Record("registry", "registry", {})]) == [
        ("practice", "SOTA-901", [("id", "SOTA-901")]),
        ("registry", "registry", []),
    ]


@pytest.mark.parametrize(
    "record_id, version",
    [("SOTA-017", 12), ("SOTA-v2", 3), ("a-v1-v2", 7), ("SOTA-900", 0)],
)
def test_the_version_is_read_from_the_last_v_of_the_current_version_iri(record_id, version):
    assert read_back([Record("practice", record_id, {"id": record_id, "version": version})]) == [
        ("practice", record_id, [("id", record_id), ("version", version)])
    ]


def test_year_and_sizes_come_back_as_numbers_from_their_padded_literals():
    records = [Record("paper", "LIT-009", {"id": "LIT-009", "year": 7}), Record("topic", "t", {"id": "t"})]
    assert read_back(records) == [("paper", "LIT-009", [("id", "LIT-009"), ("year", 7)]), ("topic", "t", [("id", "t")])]


def t(subject: str, predicate: str, obj) -> Triple:
    return Triple(NamedNode(subject), NamedNode(predicate), NamedNode(obj) if isinstance(obj, str) else obj)


def test_subjects_sotakg_does_not_write_are_not_read_as_records():
    triples = [
        t(ID + "SOTA-950", DCT + "title", Literal("no type at all")),
        t(ID + "SOTA-951", TYPE, Literal(SOTA + "Practice")),  # a type that is a literal, not a class
        t(ID + "SOTA-952", TYPE, SOTA + "Status"),  # a class of the ontology, not of a record
        t(ID + "other-scheme", TYPE, SOTA + "TopicScheme"),  # a second scheme
        t(ID + "other-scheme", DCT + "title", Literal("Not the registry")),
        Triple(BlankNode("b1"), NamedNode(TYPE), NamedNode(SOTA + "Practice")),
        t(SCHEME, TYPE, SOTA + "TopicScheme"),
        t(SCHEME, DCT + "title", Literal("Topics")),
    ]
    assert [(r.kind, r.id, r.fields) for r in records_from_triples(triples)] == [
        ("registry", "registry", {"title": "Topics"})
    ]


def test_an_untyped_subject_alone_reads_as_no_records():
    assert records_from_triples([t(ID + "SOTA-950", DCT + "title", Literal("no type at all"))]) == []


def test_a_subject_of_two_record_classes_is_read_as_the_first_kind():
    triples = [t(ID + "X-1", TYPE, SOTA + "ADR"), t(ID + "X-1", TYPE, SOTA + "Paper")]
    assert [(r.kind, r.id, r.fields) for r in records_from_triples(triples)] == [("paper", "X-1", {"id": "X-1"})]


def test_links_to_nodes_outside_the_record_namespace_read_as_empty_identifiers():
    s = ID + "SOTA-960"
    quoted = Triple(NamedNode(ID + "LIT-1"), NamedNode(CITO + "cites"), NamedNode(ID + "LIT-2"))
    triples = [
        t(s, TYPE, SOTA + "Practice"),
        t(s, CITO + "cites", ID + "LIT-001"),
        t(s, CITO + "cites", "http://example.org/elsewhere/LIT-002"),
        t(s, CITO + "cites", Literal(ID + "LIT-003")),
        t(s, CITO + "cites", BlankNode("b2")),
        t(s, CITO + "cites", quoted),
    ]
    (record,) = records_from_triples(triples)
    assert record.fields == {"id": "SOTA-960", "cites": ["", "", "", "", "LIT-001"]}


@pytest.mark.parametrize(
    "node",
    [
        NamedNode("http://example.org/elsewhere/optimization"),
        NamedNode(ID + "optimization"),
        Literal(TOPIC + "optimization"),
        BlankNode("b3"),
        Triple(NamedNode(ID + "LIT-1"), NamedNode(CITO + "cites"), NamedNode(ID + "LIT-2")),
    ],
    ids=["foreign-iri", "record-iri", "literal", "blank-node", "quoted-triple"],
)
def test_a_topic_or_status_that_is_not_a_node_of_its_namespace_is_left_out(node):
    s = ID + "SOTA-961"
    triples = [t(s, TYPE, SOTA + "Practice"), t(s, SOTA + "filedUnder", node), t(s, SOTA + "status", node)]
    (record,) = records_from_triples(triples)
    # a status stated as a literal is one the ontology does not define, read back as written
    expected = {"id": "SOTA-961", "status": node.value} if isinstance(node, Literal) else {"id": "SOTA-961"}
    assert record.fields == expected


@pytest.mark.parametrize(
    ("kind", "status", "concept"),
    [
        ("practice", "Rejected", True),
        ("practice", "rejected", False),  # no concept of that name
        ("practice", "Superseded", False),  # an ADR's status, not a practice's
        ("practice", "Active.", False),
        ("adr", "Superseded", True),
        ("adr", "Active", False),  # a practice's status, not an ADR's
        ("adr", "Proposed", True),
    ],
)
def test_only_a_status_the_ontology_defines_for_the_kind_is_its_concept(kind, status, concept):
    record_id = "SOTA-961" if kind == "practice" else "ADR-961"
    record = Record(kind, record_id, {"id": record_id, "status": status})
    (stated,) = [o for _s, p, o in record_statements(record) if p == SOTA + "status"]
    assert stated == (SOTA + status if concept else Lit(status))
    (back,) = records_from_triples(record_triples(record))
    assert back.fields["status"] == status


def test_an_adr_replaced_by_a_node_outside_the_record_namespace_has_no_superseded_by():
    s = ID + "ADR-009"
    triples = [
        t(s, TYPE, SOTA + "ADR"),
        t(s, DCT + "isReplacedBy", TOPIC + "ADR-010"),
        t(s, SOTA + "status", SOTA + "Accepted"),
    ]
    (record,) = records_from_triples(triples)
    assert record.fields == {"id": "ADR-009", "status": "Accepted"}
