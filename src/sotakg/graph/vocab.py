"""IRIs of the sotakg ontology and the vocabularies it reuses, as plain strings.

Kept free of rdflib and pyoxigraph so every command can import it cheaply.
"""

SOTA = "https://w3id.org/sotakg/ontology#"
ID = "https://w3id.org/sotakg/id/"
TOPIC = "https://w3id.org/sotakg/topic/"
DCTERMS = "http://purl.org/dc/terms/"
SKOS = "http://www.w3.org/2004/02/skos/core#"
PROV = "http://www.w3.org/ns/prov#"
CITO = "http://purl.org/spar/cito/"
RDF = "http://www.w3.org/1999/02/22-rdf-syntax-ns#"
RDFS = "http://www.w3.org/2000/01/rdf-schema#"
OWL = "http://www.w3.org/2002/07/owl#"
XSD = "http://www.w3.org/2001/XMLSchema#"
SH = "http://www.w3.org/ns/shacl#"

#: Prefixes predeclared for every query (canned, ad-hoc, console) and used in exports.
PREFIXES: dict[str, str] = {
    "sota": SOTA,
    "id": ID,
    "topic": TOPIC,
    "dcterms": DCTERMS,
    "skos": SKOS,
    "prov": PROV,
    "cito": CITO,
    "rdf": RDF,
    "rdfs": RDFS,
    "owl": OWL,
    "xsd": XSD,
}

# Classes
PRACTICE = SOTA + "Practice"
PRACTICE_VERSION = SOTA + "PracticeVersion"
PAPER = SOTA + "Paper"
TOPIC_CLASS = SOTA + "Topic"
ADR = SOTA + "ADR"
STATUS = SOTA + "Status"
ADR_STATUS = SOTA + "ADRStatus"
TOPIC_SCHEME = SOTA + "TopicScheme"

# Properties
IDENTIFIER = DCTERMS + "identifier"
TITLE = DCTERMS + "title"
SUMMARY = SOTA + "summary"
DESCRIPTION = DCTERMS + "description"
HAS_STATUS = SOTA + "status"
STATUS_COLUMN = SOTA + "statusColumn"
REJECTION_REASON = SOTA + "rejectionReason"
STATUS_NOTE = SOTA + "statusNote"
REASON_NAMES = SOTA + "reasonNames"
REASON_MENTIONS = SOTA + "reasonMentions"
CITES = CITO + "cites"
FILED_UNDER = SOTA + "filedUnder"
CURRENT_VERSION = SOTA + "currentVersion"
VERSION_NUMBER = SOTA + "versionNumber"
IS_VERSION_OF = DCTERMS + "isVersionOf"
WAS_REVISION_OF = PROV + "wasRevisionOf"
REPLACES = DCTERMS + "replaces"
IS_REPLACED_BY = DCTERMS + "isReplacedBy"
AUTHORS = SOTA + "authors"
YEAR = SOTA + "year"
ARXIV_ID = SOTA + "arxivId"
ARXIV_VERSION = SOTA + "arxivVersion"
UNREAD_LOCATOR = SOTA + "unreadLocator"
REFERENCES = DCTERMS + "references"
URL = SOTA + "url"
DECLARED_SIZE = SOTA + "declaredSize"
GOVERNED_BY = SOTA + "governedBy"
SLUG = SOTA + "slug"
PREF_LABEL = SKOS + "prefLabel"
SCOPE_NOTE = SKOS + "scopeNote"
IN_SCHEME = SKOS + "inScheme"
TYPE = RDF + "type"

STATUS_SCHEME = SOTA + "StatusScheme"
ADR_STATUS_SCHEME = SOTA + "ADRStatusScheme"
TOPIC_SCHEME_IRI = ID + "topics"

PRACTICE_STATUSES = ("Active", "Proposed", "Rejected")
ADR_STATUSES = ("Proposed", "Accepted", "Superseded", "Deprecated")

XSD_STRING = XSD + "string"
XSD_INTEGER = XSD + "integer"
XSD_GYEAR = XSD + "gYear"
XSD_ANYURI = XSD + "anyURI"


def record_iri(record_id: str) -> str:
    """IRI of a practice, paper or ADR with identifier ``record_id``."""
    return ID + record_id


def version_iri(practice_id: str, number: int) -> str:
    """IRI of version ``number`` of a practice."""
    return f"{ID}{practice_id}-v{number}"


def topic_iri(slug: str) -> str:
    """IRI of the topic with slug ``slug``."""
    return TOPIC + slug


def status_iri(status: str) -> str:
    """IRI of a practice or ADR status concept (``Active`` -> ``sota:Active``)."""
    return SOTA + status
