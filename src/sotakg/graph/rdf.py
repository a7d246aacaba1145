"""The mapping between records and RDF, both ways, with pyoxigraph terms only (no rdflib)."""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Iterator
from typing import Any, NamedTuple

from pyoxigraph import Literal, NamedNode, Quad, Triple

from ..records.schema import KINDS, REGISTRY_ID, Anthology, Record
from . import vocab as v

_IRI_CACHE: dict[str, NamedNode] = {}
MENTIONED_ID = re.compile(r"\b(?:SOTA|LIT|ADR)-[0-9]+\b", re.ASCII)


def iri(value: str) -> NamedNode:
    """A (cached) NamedNode: the same few predicates are made thousands of times."""
    node = _IRI_CACHE.get(value)
    if node is None:
        node = _IRI_CACHE[value] = NamedNode(value)
    return node


class Lit(NamedTuple):
    """A literal in a statement: its lexical form and datatype IRI (None for a plain string)."""

    value: str
    datatype: str | None = None


#: A statement: subject IRI, predicate IRI, and an object that is an IRI (str) or a Lit.
Statement = tuple[str, str, "str | Lit"]


def record_subject(record: Record) -> str:
    """The IRI of a record's subject."""
    if record.kind == "topic":
        return v.topic_iri(record.id)
    if record.kind == "registry":
        return v.TOPIC_SCHEME_IRI
    return v.record_iri(record.id)


#: A status that can be the local name of an ontology IRI; any other text stays a literal, which
#: the practice-status and adr-status rules then report on that record (it is never spliced into an IRI).


def _status(value: str, known: tuple[str, ...]) -> str | Lit:
    # Only a status the ontology defines for the record's kind is its concept: any other is stated as
    # written, never as an IRI the ontology does not define ("rejected") or another kind's ("Superseded").
    return v.status_iri(value) if value in known else Lit(value)


def _integer(value: int) -> Lit:
    return Lit(str(value), v.XSD_INTEGER)


def _year(value: int) -> Lit:
    # xsd:gYear has at least four digits, after the sign of a year before 1 ("-0005"): "-5" is ill-typed.
    return Lit(f"{value:04d}" if value >= 0 else f"{value:05d}", v.XSD_GYEAR)


def record_statements(record: Record) -> Iterator[Statement]:
    """The statements that state one record: the one definition of the records-to-RDF mapping."""
    f = record.fields
    s = record_subject(record)
    t = v.TYPE

    def lit(prop: str, name: str) -> Iterator[Statement]:
        if name in f:
            yield s, prop, Lit(f[name])

    def refs(prop: str, name: str) -> Iterator[Statement]:
        for target in f.get(name, []):
            yield s, prop, v.record_iri(target)

    if record.kind == "practice":
        yield s, t, v.PRACTICE
        yield s, v.IDENTIFIER, Lit(record.id)
        yield from lit(v.TITLE, "title")
        yield from lit(v.SUMMARY, "summary")
        if "status" in f:
            yield s, v.HAS_STATUS, _status(f["status"], v.PRACTICE_STATUSES)
        yield from lit(v.STATUS_COLUMN, "status_column")
        yield from lit(v.REJECTION_REASON, "reason")
        yield from lit(v.STATUS_NOTE, "status_note")
        yield from refs(v.REASON_NAMES, "reason_names")
        # Derived from the text, never read back: lets a rule check the text against reason_names.
        for mentioned in sorted(set(MENTIONED_ID.findall(f.get("reason", ""))) - {record.id}):
            yield s, v.REASON_MENTIONS, v.record_iri(mentioned)
        yield from refs(v.CITES, "cites")
        if "topic" in f:
            yield s, v.FILED_UNDER, v.topic_iri(f["topic"])
        if "version" in f:
            number = f["version"]
            yield s, v.CURRENT_VERSION, v.version_iri(record.id, number)
            for n in range(1, max(number, 0) + 1):
                node = v.version_iri(record.id, n)
                yield node, t, v.PRACTICE_VERSION
                yield node, v.VERSION_NUMBER, _integer(n)
                yield node, v.IS_VERSION_OF, s
                if n > 1:
                    yield node, v.WAS_REVISION_OF, v.version_iri(record.id, n - 1)
    elif record.kind == "paper":
        yield s, t, v.PAPER
        yield s, v.IDENTIFIER, Lit(record.id)
        yield from lit(v.TITLE, "title")
        yield from lit(v.AUTHORS, "authors")
        if "year" in f:
            yield s, v.YEAR, _year(f["year"])
        yield from lit(v.ARXIV_ID, "arxiv")
        if "arxiv_version" in f:
            yield s, v.ARXIV_VERSION, _integer(f["arxiv_version"])
        if "url" in f:
            yield s, v.URL, Lit(f["url"], v.XSD_ANYURI)
        yield from lit(v.UNREAD_LOCATOR, "locator")
        if "topic" in f:
            yield s, v.FILED_UNDER, v.topic_iri(f["topic"])
    elif record.kind == "adr":
        yield s, t, v.ADR
        yield s, v.IDENTIFIER, Lit(record.id)
        yield from lit(v.TITLE, "title")
        if "status" in f:
            yield s, v.HAS_STATUS, _status(f["status"], v.ADR_STATUSES)
        yield from lit(v.SUMMARY, "summary")
        yield from refs(v.REPLACES, "supersedes")
        if "superseded_by" in f:
            yield s, v.IS_REPLACED_BY, v.record_iri(f["superseded_by"])
    elif record.kind == "topic":
        yield s, t, v.TOPIC_CLASS
        yield s, t, v.SKOS + "Concept"
        yield s, v.IDENTIFIER, Lit(record.id)
        yield s, v.SLUG, Lit(record.id)
        yield s, v.IN_SCHEME, v.TOPIC_SCHEME_IRI
        yield from lit(v.PREF_LABEL, "label")
        yield from lit(v.SCOPE_NOTE, "scope")
        if "declared_size" in f:
            yield s, v.DECLARED_SIZE, _integer(f["declared_size"])
        # Derived from the text, never read back: the scope note cites these records, nothing more.
        for cited in sorted(set(MENTIONED_ID.findall(f.get("scope", "")))):
            yield s, v.REFERENCES, v.record_iri(cited)
    elif record.kind == "registry":
        yield s, t, v.TOPIC_SCHEME
        yield s, t, v.SKOS + "ConceptScheme"
        yield from lit(v.TITLE, "title")
        yield from lit(v.DESCRIPTION, "description")
        if "declared_size" in f:
            yield s, v.DECLARED_SIZE, _integer(f["declared_size"])
        yield from refs(v.GOVERNED_BY, "governed_by")
        # Derived from the text, never read back: the description cites these records, nothing more.
        for cited in sorted(set(MENTIONED_ID.findall(f.get("description", "")))):
            yield s, v.REFERENCES, v.record_iri(cited)


def record_triples(record: Record) -> Iterator[Triple]:
    """The statements of one record as pyoxigraph triples."""
    for subject, predicate, obj in record_statements(record):
        yield Triple(iri(subject), iri(predicate), _term(obj))


def anthology_triples(anthology: Anthology) -> Iterator[Triple]:
    """Every triple of every record, records in file order."""
    for record in anthology.records:
        yield from record_triples(record)


def as_quads(triples: Iterable[Triple]) -> Iterator[Quad]:
    """Triples as quads in the default graph."""
    for triple in triples:
        yield Quad(triple.subject, triple.predicate, triple.object)


def _term(obj: str | Lit) -> NamedNode | Literal:
    if isinstance(obj, Lit):
        return Literal(obj.value) if obj.datatype is None else Literal(obj.value, datatype=iri(obj.datatype))
    return iri(obj)


def anthology_quads(anthology: Anthology) -> Iterator[Quad]:
    """Every statement of every record as pyoxigraph quads in the default graph, for a bulk load.

    Each IRI is a NamedNode (pyoxigraph checks it) made from an identifier already checked against
    its exact pattern, each value a Literal: no statement is ever assembled as text, so no value can
    add a statement of its own."""
    for record in anthology.records:
        for subject, predicate, obj in record_statements(record):
            yield Quad(iri(subject), iri(predicate), _term(obj))


def anthology_ntriples(anthology: Anthology) -> bytes:
    """Every statement of every record as N-Triples, written by pyoxigraph's serializer from the
    terms (which escapes every value): never assembled as text, so no value can add a statement."""
    from pyoxigraph import RdfFormat, serialize

    return serialize(anthology_triples(anthology), format=RdfFormat.N_TRIPLES) or b""


# ------------------------------------------------------------------------------------ RDF -> records


def _local(node: Any, prefix: str) -> str | None:
    value = getattr(node, "value", None)
    if isinstance(node, NamedNode) and value is not None and value.startswith(prefix):
        return value[len(prefix) :]
    return None


def records_from_triples(triples: Iterable[Triple]) -> list[Record]:
    """Read records back from the triples record_triples made (the round trip's second half).

    Only the statements sotakg itself writes are read; the ontology's own triples are ignored.
    """
    by_subject: dict[str, dict[str, list[Any]]] = defaultdict(lambda: defaultdict(list))
    for triple in triples:
        if isinstance(triple.subject, NamedNode):
            by_subject[triple.subject.value][triple.predicate.value].append(triple.object)

    kinds = {
        v.PRACTICE: "practice",
        v.PAPER: "paper",
        v.ADR: "adr",
        v.TOPIC_CLASS: "topic",
        v.TOPIC_SCHEME: "registry",
    }
    records: list[Record] = []
    for subject, props in by_subject.items():
        types = {node.value for node in props.get(v.TYPE, []) if isinstance(node, NamedNode)}
        kind = next((kinds[t] for t in kinds if t in types), None)
        if kind is None or (kind == "registry" and subject != v.TOPIC_SCHEME_IRI):
            continue
        records.append(_record_from_props(kind, subject, props))
    order = list(KINDS)
    records.sort(key=lambda r: (order.index(r.kind), r.id))
    return records


#: What each field of a record is read back from: (field, how, predicate). ``text`` is a literal's
#: text, ``int`` its number, ``ids`` the sorted local names of the records it links to, and a
#: namespace the local name of the one node it links to.
_FIELDS_OF_KIND: dict[str, list[tuple[str, str, str]]] = {
    "practice": [
        ("title", "text", v.TITLE),
        ("summary", "text", v.SUMMARY),
        ("status", "status", v.HAS_STATUS),
        ("status_column", "text", v.STATUS_COLUMN),
        ("reason", "text", v.REJECTION_REASON),
        ("status_note", "text", v.STATUS_NOTE),
        ("reason_names", "ids", v.REASON_NAMES),
        ("cites", "ids", v.CITES),
        ("topic", v.TOPIC, v.FILED_UNDER),
    ],
    "paper": [
        ("title", "text", v.TITLE),
        ("authors", "text", v.AUTHORS),
        ("year", "int", v.YEAR),
        ("arxiv", "text", v.ARXIV_ID),
        ("arxiv_version", "int", v.ARXIV_VERSION),
        ("url", "text", v.URL),
        ("locator", "text", v.UNREAD_LOCATOR),
        ("topic", v.TOPIC, v.FILED_UNDER),
    ],
    "adr": [
        ("title", "text", v.TITLE),
        ("status", "status", v.HAS_STATUS),
        ("summary", "text", v.SUMMARY),
        ("supersedes", "ids", v.REPLACES),
        ("superseded_by", v.ID, v.IS_REPLACED_BY),
    ],
    "topic": [
        ("label", "text", v.PREF_LABEL),
        ("scope", "text", v.SCOPE_NOTE),
        ("declared_size", "int", v.DECLARED_SIZE),
    ],
    "registry": [
        ("title", "text", v.TITLE),
        ("description", "text", v.DESCRIPTION),
        ("declared_size", "int", v.DECLARED_SIZE),
        ("governed_by", "ids", v.GOVERNED_BY),
    ],
}


def _record_from_props(kind: str, subject: str, props: dict[str, list[Any]]) -> Record:
    fields: dict[str, Any] = {}
    if kind == "registry":
        record_id = REGISTRY_ID
    elif kind == "topic":
        record_id = subject[len(v.TOPIC) :]
    else:
        record_id = subject[len(v.ID) :]
    if kind != "registry":
        fields["id"] = record_id
    if kind == "practice" and props.get(v.CURRENT_VERSION):
        fields["version"] = int(props[v.CURRENT_VERSION][0].value.rsplit("-v", 1)[1])
    for name, how, prop in _FIELDS_OF_KIND[kind]:
        values = props.get(prop, [])
        if not values:
            continue
        if how == "text":
            fields[name] = values[0].value
        elif how == "int":
            fields[name] = int(values[0].value)
        elif how == "ids":
            fields[name] = sorted(_local(node, v.ID) or "" for node in values)
        elif how == "status":  # a concept of the ontology, or a status stated as written
            status = values[0].value if isinstance(values[0], Literal) else _local(values[0], v.SOTA)
            if status is not None:
                fields[name] = status
        else:
            local = _local(values[0], how)
            if local is not None:
                fields[name] = local
    spec = KINDS[kind]
    ordered = {f.name: fields[f.name] for f in spec.fields if f.name in fields}
    return Record(kind, record_id, ordered)
