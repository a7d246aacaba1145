"""The pySHACL engine (``validate --engine pyshacl``) on a small graph: how each kind of term goes to
rdflib, how each kind of SHACL path comes back, severities, messages, SHACL-SPARQL constraints, and
the shapes read again when their file changes. Quick: the shipped data's comparison of the engines is
in ``tests/test_engines.py``."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyoxigraph import BlankNode, RdfFormat, Store

from sotakg.rules.validate import RawResult, pyshacl_engine

EX = "https://example.org/"
SH = "http://www.w3.org/ns/shacl#"
INTEGER = "http://www.w3.org/2001/XMLSchema#integer"

DATA = b"""
@prefix ex: <https://example.org/> .
@prefix xsd: <http://www.w3.org/2001/XMLSchema#> .
ex:a a ex:Thing ; ex:p "x"@en, "y", "1"^^xsd:integer ; ex:r ex:b .
ex:b ex:r ex:c ; ex:q [ ex:s "deep" ] .
ex:c a ex:Thing .
"""

SHAPES = """
@prefix sh: <http://www.w3.org/ns/shacl#> .
@prefix ex: <https://example.org/> .
ex:S a sh:NodeShape ; sh:targetClass ex:Thing ;
  sh:property [ sh:path ex:p ; sh:maxCount 1 ; sh:severity sh:Warning ; sh:message "too many" ] ;
  sh:property [ sh:path ex:p ; sh:datatype ex:none ] ;
  sh:property [ sh:path [ sh:inversePath ex:r ] ; sh:minCount 5 ] ;
  sh:property [ sh:path ( ex:r ex:r ) ; sh:minCount 5 ] ;
  sh:property [ sh:path [ sh:alternativePath ( ex:p ex:r ) ] ; sh:maxCount 1 ] ;
  sh:property [ sh:path [ sh:zeroOrMorePath ex:r ] ; sh:maxCount 1 ] ;
  sh:property [ sh:path [ sh:oneOrMorePath ex:r ] ; sh:minCount 5 ] ;
  sh:property [ sh:path [ sh:zeroOrOnePath ex:r ] ; sh:minCount 5 ; sh:severity sh:Info ] .
ex:B a sh:NodeShape ; sh:targetSubjectsOf ex:s ; sh:property [ sh:path ex:s ; sh:maxLength 1 ] .
ex:Q a sh:NodeShape ; sh:targetClass ex:Thing ;
  sh:sparql [ sh:select "SELECT $this WHERE { $this <https://example.org/r> ?next }" ; sh:message "links on" ] .
"""
#: Two SPARQL constraints of one shape (the engine keeps each query it parsed: by its whole text) and a
#: named property shape (reported as itself, not as the shape it belongs to).
MORE = """
@prefix sh: <http://www.w3.org/ns/shacl#> .
@prefix ex: <https://example.org/> .
ex:W a sh:NodeShape ; sh:targetClass ex:Thing ; sh:property ex:named ;
  sh:sparql [ sh:select "SELECT $this WHERE { $this <https://example.org/r> ?next }" ; sh:message "one" ] ;
  sh:sparql [ sh:select "SELECT $this WHERE { $this a ?type }" ; sh:message "two" ] .
ex:named sh:path ex:p ; sh:minCount 5 .
"""


@pytest.fixture
def store() -> Store:
    graph = Store()
    graph.load(DATA, format=RdfFormat.TURTLE)
    return graph


def _shapes(tmp_path: Path, text: str = SHAPES) -> Path:
    path = tmp_path / "shapes.ttl"
    path.write_text(text, encoding="utf-8")
    return path


def _seen(results: list[RawResult]) -> set[tuple]:
    return {(r.focus, r.path, r.value, r.severity.removeprefix(SH)) for r in results}


def test_every_kind_of_path_term_and_severity_comes_back_as_sotakg_writes_them(store, tmp_path):
    results = pyshacl_engine(store, [_shapes(tmp_path)])
    (blank,) = {quad.subject for quad in store if isinstance(quad.subject, BlankNode)}
    r, p = f"<{EX}r>", f"<{EX}p>"
    assert _seen(results) == {
        (f"_:{blank.value}", f"{EX}s", '"deep"', "Violation"),
        (f"{EX}a", f"({p}|{r})", None, "Violation"),
        (f"{EX}a", f"({r}/{r})", None, "Violation"),
        (f"{EX}c", f"({r}/{r})", None, "Violation"),
        (f"{EX}a", f"{r}*", None, "Violation"),
        (f"{EX}a", f"{r}+", None, "Violation"),
        (f"{EX}c", f"{r}+", None, "Violation"),
        (f"{EX}a", f"{r}?", None, "Info"),
        (f"{EX}c", f"{r}?", None, "Info"),
        (f"{EX}a", f"^{r}", None, "Violation"),
        (f"{EX}c", f"^{r}", None, "Violation"),
        (f"{EX}a", f"{EX}p", f'"1"^^<{INTEGER}>', "Violation"),
        (f"{EX}a", f"{EX}p", '"x"@en', "Violation"),
        (f"{EX}a", f"{EX}p", '"y"', "Violation"),
        (f"{EX}a", f"{EX}p", None, "Warning"),
        (f"{EX}a", None, f"<{EX}a>", "Violation"),
    }
    (warning,) = [result for result in results if result.severity == SH + "Warning"]
    assert warning.message == "too many" and warning.source_shape.startswith("_:")
    (linked,) = [result for result in results if result.path is None]
    assert linked.message == "links on" and linked.source_shape == f"{EX}Q"


def test_the_engine_reads_the_shapes_again_when_their_file_changes(store, tmp_path):
    shapes = _shapes(tmp_path)
    assert len(pyshacl_engine(store, [shapes])) == 16
    assert len(pyshacl_engine(store, [shapes])) == 16  # the parsed shapes and queries, kept
    only = "@prefix sh: <http://www.w3.org/ns/shacl#> .\n@prefix ex: <https://example.org/> .\n"
    only += "ex:B a sh:NodeShape ; sh:targetSubjectsOf ex:s ; sh:property [ sh:path ex:s ; sh:maxLength 1 ] .\n"
    _shapes(tmp_path, only)
    (left,) = pyshacl_engine(store, [shapes])
    assert left.path == f"{EX}s" and left.source_shape.startswith("_:")


def test_two_shapes_files_are_read_together(store, tmp_path):
    first = _shapes(tmp_path)
    second = tmp_path / "more.ttl"
    second.write_text(
        "@prefix sh: <http://www.w3.org/ns/shacl#> .\n@prefix ex: <https://example.org/> .\n"
        "ex:M a sh:NodeShape ; sh:targetNode ex:c ; sh:property [ sh:path ex:p ; sh:minCount 1 ] .\n",
        encoding="utf-8",
    )
    results = pyshacl_engine(store, [first, second])
    assert len(results) == 17
    assert (f"{EX}c", f"{EX}p", None, "Violation") in _seen(results)


# ------------------------------------------------------------------------- the SPARQL engine, alike


def test_the_sparql_engine_reports_the_same_results_with_their_shapes_severities_and_messages(store, tmp_path):
    from sotakg.rules.validate import sparql_engine

    shapes = _shapes(tmp_path)
    results = sparql_engine(store, [shapes])
    # The same focus nodes, values and severities as pySHACL (paths are written in another form).
    assert {(r.focus, r.value, r.severity) for r in results} == {
        (r.focus, r.value, r.severity) for r in pyshacl_engine(store, [shapes])
    }
    (warning,) = [result for result in results if result.severity == SH + "Warning"]
    assert warning.message == "too many" and warning.source_shape == f"{EX}S"  # the root of a blank shape
    (linked,) = [result for result in results if result.path is None]
    assert linked.message == "links on" and linked.source_shape == f"{EX}Q"
    assert {result.source_shape for result in results} == {f"{EX}S", f"{EX}B", f"{EX}Q"}
    assert all(result.message for result in results)


def test_the_sparql_engine_reads_its_shapes_again_when_they_change_whatever_the_file_is_called(store, tmp_path):
    from sotakg.rules.validate import sparql_engine

    shapes = tmp_path / "rules.shacl"
    shapes.write_text(SHAPES, encoding="utf-8")
    assert len(sparql_engine(store, [shapes])) == 16
    assert len(sparql_engine(store, [shapes])) == 16
    shapes.write_text(SHAPES.replace("sh:maxLength 1", "sh:maxLength 100"), encoding="utf-8")
    assert len(sparql_engine(store, [shapes])) == 15


#: A SHACL-AF custom target: the compiler refuses it, pySHACL (without its advanced features) skips it.
CUSTOM_TARGET = (
    "ex:T a sh:NodeShape ; sh:property [ sh:path ex:zzz ; sh:minCount 1 ] ;\n"
    '  sh:target [ a sh:SPARQLTarget ; sh:select "SELECT ?this WHERE { ?this a ex:Thing }" ] .\n'
)


def test_shapes_the_sparql_engine_cannot_run_go_to_pyshacl_saying_so(store, tmp_path, capsys):
    from sotakg.rules.validate import sparql_engine

    shapes = _shapes(tmp_path, SHAPES + CUSTOM_TARGET)
    results = sparql_engine(store, [shapes], lambda *step: None)
    assert _seen(results) == _seen(pyshacl_engine(store, [shapes])) and len(results) == 16
    warning = capsys.readouterr().err
    assert warning.startswith("warning: the sparql engine cannot run these shapes (shape https://example.org/T ")
    assert warning.endswith("; using pyshacl\n")


@pytest.mark.parametrize("engine", ["pyshacl", "sparql"])
def test_each_constraint_answers_for_itself_and_a_named_property_shape_is_its_own_source(store, tmp_path, engine):
    from sotakg.rules.validate import ENGINES

    results = ENGINES[engine](store, [_shapes(tmp_path, MORE)])
    messages = sorted((r.focus.removeprefix(EX), r.message) for r in results if r.path is None)
    assert messages == [("a", "one"), ("a", "two"), ("c", "two")]
    assert {r.source_shape for r in results if r.path is not None} == {f"{EX}named"}


@pytest.mark.parametrize("engine", ["pyshacl", "sparql"])
def test_two_shapes_files_of_one_size_and_time_are_told_apart(store, tmp_path, engine):
    import os

    from sotakg.rules.validate import ENGINES

    head = "@prefix sh: <http://www.w3.org/ns/shacl#> .\n@prefix ex: <https://example.org/> .\n"
    first, second = tmp_path / "one.ttl", tmp_path / "two.ttl"
    first.write_text(
        head + "ex:X a sh:NodeShape ; sh:targetNode ex:a ; sh:property [ sh:path ex:p ; sh:maxCount 1 ] .\n"
    )
    second.write_text(
        head + "ex:X a sh:NodeShape ; sh:targetNode ex:c ; sh:property [ sh:path ex:p ; sh:minCount 1 ] .\n"
    )
    assert first.stat().st_size == second.stat().st_size
    for path in (first, second):
        os.utime(path, ns=(1_700_000_000_000_000_000, 1_700_000_000_000_000_000))
    one, two = (ENGINES[engine](store, [path]) for path in (first, second))
    assert {r.focus for r in one} == {f"{EX}a"} and {r.focus for r in two} == {f"{EX}c"}
