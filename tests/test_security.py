"""What sotakg refuses so that no input reaches the network or expands: XML entities, remote contexts."""

from __future__ import annotations

import pytest

from sotakg.results import parse_graph, parse_sparql_results

BILLION_LAUGHS = b"""<?xml version="1.0"?>
<!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">]>
<rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#">
  <rdf:Description rdf:about="http://example.org/a"><rdf:value>&lol2;</rdf:value></rdf:Description>
</rdf:RDF>"""

RESULTS_WITH_ENTITY = b"""<?xml version="1.0"?>
<!DOCTYPE sparql [<!ENTITY x SYSTEM "http://127.0.0.1:9/secret">]>
<sparql xmlns="http://www.w3.org/2005/sparql-results#"><head/><boolean>&x;</boolean></sparql>"""


def test_rdfxml_with_a_doctype_is_refused():
    with pytest.raises(ValueError, match="refused: XML with a DOCTYPE or ENTITY declaration"):
        parse_graph(BILLION_LAUGHS, "rdfxml")


def test_rdfxml_without_a_doctype_is_read():
    plain = BILLION_LAUGHS.replace(b"&lol2;", b"1").split(b"\n", 2)
    document = plain[0] + b"\n" + plain[2]
    assert len(parse_graph(document, "rdfxml").triples) == 1


def test_sparql_xml_results_with_an_entity_are_refused():
    with pytest.raises(ValueError, match="refused"):
        parse_sparql_results(RESULTS_WITH_ENTITY, "xml")


def test_jsonld_remote_contexts_are_never_fetched():
    document = b'{"@context": "http://127.0.0.1:9/context.jsonld", "@id": "http://example.org/a", "name": "x"}'
    with pytest.raises(ValueError, match="remote contexts"):
        parse_graph(document, "jsonld")
