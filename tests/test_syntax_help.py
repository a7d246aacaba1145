"""SPARQL syntax errors in plain words: each common mistake is named at its own place."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sotakg.errors import QuerySyntaxError
from sotakg.graph.vocab import PREFIXES
from sotakg.query.sparql import run_query, tokens
from sotakg.query.syntax_help import explain_syntax_error

from .conftest import REPO, invoke

PREDECLARED = "sota: id: topic: dcterms: skos: prov: cito: rdf: rdfs: owl: xsd:"


def first_line(backend, text: str) -> str:
    with pytest.raises(QuerySyntaxError) as caught:
        run_query(backend, text)
    return str(caught.value).splitlines()[0]


@pytest.mark.parametrize(
    "text, expected",
    [
        (
            "SELECT ?x WHERE { ?x ?y }",
            "syntax error at line 1, column 25: missing object: the triple `?x ?y` has a subject and a predicate "
            "but no object (a variable, an IRI, a prefixed name or a literal)",
        ),
        (
            "SELECT ?x WHERE { ?x sota:status sota:Rejected ; dcterms:title }",
            "syntax error at line 1, column 64: missing object: the predicate `dcterms:title` after `;` has no "
            "object (a variable, an IRI, a prefixed name or a literal)",
        ),
        (
            "ASK { ?x }",
            "syntax error at line 1, column 10: missing predicate and object: the triple `?x` has only a subject",
        ),
        (
            "SELECT * { ?s ?p ?o ?a }",
            "syntax error at line 1, column 21: missing `.`: `?s ?p ?o` is a whole triple, so a `.` must end it "
            "before the next one starts",
        ),
        (
            "SELECT * WHERE {\n  ?s sota:status ?o .\n  OPTIONAL { ?s dcterms:title ?t }\n",
            "syntax error at line 3, column 35: missing `}`: the `{` at line 1, column 16 is never closed",
        ),
        (
            "SELECT * WHERE { ?s ?p ?o FILTER(?o = 1 }",
            "syntax error at line 1, column 41: missing `)`: the `(` at line 1, column 33 is still open where "
            "this `}` closes",
        ),
        (
            "SELECT * WHERE { ?s ?p ?o }}",
            "syntax error at line 1, column 28: unexpected `}`: there is no open `{` for it to close",
        ),
        (
            "SELECT ?x WHERE { ?x foo:bar ?z }",
            f"syntax error at line 1, column 22: undeclared prefix `foo:` in `foo:bar`: declare it with "
            f"`PREFIX foo: <...>`, or use a predeclared one ({PREDECLARED})",
        ),
        (
            "SELECT ?x WHERE { ?x sotta:status ?y }",
            f"syntax error at line 1, column 22: undeclared prefix `sotta:` in `sotta:status`: did you mean "
            f"`sota:`? Or declare it with `PREFIX sotta: <...>`, or use a predeclared one ({PREDECLARED})",
        ),
        ("SELEC ?x WHERE { ?x ?y ?z }", "syntax error at line 1, column 1: unknown word `SELEC`: did you mean SELECT?"),
        ("SELECT ?x WHER { ?x ?y ?z }", "syntax error at line 1, column 11: unknown word `WHER`: did you mean WHERE?"),
        (
            "SELECT ?x WHERE { ?x ?y ?z . OPTINAL { ?x ?a ?b } }",
            "syntax error at line 1, column 30: unknown word `OPTINAL`: did you mean OPTIONAL?",
        ),
        (
            "SELECT ?x WHERE { ?x ?y ?z } ORDR BY ?x",
            "syntax error at line 1, column 30: unknown word `ORDR`: did you mean ORDER?",
        ),
        (
            'SELECT ?x WHERE { ?x ?y "abc }',
            'syntax error at line 1, column 25: unterminated string: the string opened here has no closing "',
        ),
    ],
    ids=[
        "missing-object",
        "missing-object-after-semicolon",
        "missing-predicate-and-object",
        "missing-dot",
        "missing-brace",
        "missing-parenthesis",
        "extra-brace",
        "undeclared-prefix",
        "misspelt-prefix",
        "misspelt-select",
        "misspelt-where",
        "misspelt-optional",
        "misspelt-order",
        "unterminated-string",
    ],
)
def test_each_common_mistake_is_named_where_it_is(backend, text, expected):
    assert first_line(backend, text) == expected


def test_the_first_undeclared_prefix_is_named_and_a_long_name_gets_no_guess(backend):
    """The bug: every undeclared name of a query was compared with every declared prefix (difflib),
    so 2,000 uses against 660 declarations took 25 s before the refusal (the serve guard explains
    its refusals too). The rule: the first one is named, as before; a name longer than
    ``SUGGESTED_NAME_CHARS`` gets no "did you mean"."""
    long = "p" * 70
    text = f"PREFIX {long}a: <http://x/> SELECT * WHERE {{ ?s {long}b:x ?o . ?s other:y ?o }}"
    column = text.index(f"{long}b:x") + 1
    assert first_line(backend, text) == (
        f"syntax error at line 1, column {column}: undeclared prefix `{long}b:` in `{long}b:x`: declare it with "
        f"`PREFIX {long}b: <...>`, or use a predeclared one ({PREDECLARED})"
    )
    short = text.replace(long, "pp")
    assert "did you mean `ppa:`? Or declare it with `PREFIX ppb: <...>`" in first_line(backend, short)


def test_the_caret_points_at_the_mistake(runner, built_store):
    text = "SELECT ?p WHERE {\n  ?p a sota:Practice ;\n     dcterms:title\n}"
    result = invoke(runner, built_store, "sparql", text)
    assert result.exit_code == 1
    assert result.stderr.splitlines() == [
        "Error: syntax error at line 4, column 1: missing object: the predicate `dcterms:title` after `;` has no "
        "object (a variable, an IRI, a prefixed name or a literal)",
        "   4 | }",
        "     | ^",
    ]


def test_a_mistake_it_does_not_know_keeps_the_engines_words(backend):
    line = first_line(backend, "SELECT ?s WHERE { BIND(1 AS 2) }")
    assert line == 'syntax error at line 1, column 29: expected one of "$", "?", NOT'


def shipped_queries() -> list[Path]:
    return sorted((REPO / "queries").rglob("*.rq"))


@pytest.mark.parametrize("path", shipped_queries(), ids=lambda p: p.stem)
def test_no_mistake_is_found_in_valid_queries(path):
    """The shipped queries are valid SPARQL: the helper must find nothing wrong anywhere in them."""
    text = path.read_text(encoding="utf-8")
    lines = text.splitlines()
    assert explain_syntax_error(text, list(tokens(text)), len(lines), len(lines[-1]) + 1, "", PREFIXES) is None


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("{}()[].;,?x a:b\"'<>/|^ \nSELECT WHERE foo")), max_size=60))
def test_any_text_gets_an_answer_and_never_an_exception(text):
    answer = explain_syntax_error(text, list(tokens(text)), text.count("\n") + 1, len(text) + 1, "", PREFIXES)
    if answer is not None:
        line, column, message = answer
        assert line >= 1 and column >= 1 and message
