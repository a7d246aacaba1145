"""Focused cases for the SHACL -> SPARQL compiler beyond the W3C suite (tests/test_w3c_shacl.py)."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyoxigraph import Literal, NamedNode, RdfFormat, Store

from sotakg.errors import ShapesError, UnsupportedShape
from sotakg.rules.shacl_compiler import compile_shapes, rewrite_select, validate

PREFIXES = """
@prefix sh: <http://www.w3.org/ns/shacl#> .
@prefix xsd: <http://www.w3.org/2001/XMLSchema#> .
@prefix sota: <https://w3id.org/sotakg/ontology#> .
@prefix id: <https://w3id.org/sotakg/id/> .
@prefix ex: <http://example.org/> .
@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .
"""
SH = "http://www.w3.org/ns/shacl#"
SOTA = "https://w3id.org/sotakg/ontology#"
ID = "https://w3id.org/sotakg/id/"


def store_of(turtle: str) -> Store:
    store = Store()
    store.load((PREFIXES + turtle).encode(), format=RdfFormat.TURTLE)
    return store


class CountingStore:
    """A store that counts the queries run on it (the compiler calls ``query``, and
    ``quads_for_pattern`` to walk from a few chosen nodes)."""

    def __init__(self, store: Store):
        self.store = store
        self.queries: list[str] = []

    def query(self, text: str, **options):
        self.queries.append(text)
        return self.store.query(text, **options)

    def quads_for_pattern(self, *pattern):
        return self.store.quads_for_pattern(*pattern)


def many_practices(count: int) -> Store:
    lines = []
    for n in range(count):
        status = "sota:Rejected" if n % 10 == 0 else "sota:Active"
        reason = ' ; sota:rejectionReason "superseded"' if n % 20 == 0 else ""
        lines.append(f"id:SOTA-{n:03d} a sota:Practice ; sota:status {status}{reason} .")
    return store_of("\n".join(lines))


REJECTION_SHAPE = (
    PREFIXES
    + """
ex:RejectionNeedsReason a sh:NodeShape ;
    sh:targetClass sota:Practice ;
    sh:sparql [
        sh:message "{$this} is rejected but gives no reason" ;
        sh:select \"\"\"
            PREFIX sota: <https://w3id.org/sotakg/ontology#>
            SELECT $this WHERE {
                $this sota:status sota:Rejected .
                FILTER NOT EXISTS { $this sota:rejectionReason ?reason }
            }\"\"\" ;
    ] .
"""
)


def test_sparql_constraint_runs_once_over_all_focus_nodes() -> None:
    data = CountingStore(many_practices(200))
    report = validate(data, REJECTION_SHAPE)  # type: ignore[arg-type]
    # One query for the constraint, over all 200 practices, and one for the subclasses of sota:Practice.
    assert len(data.queries) == 2
    assert sum("rejectionReason" in q for q in data.queries) == 1
    assert "subClassOf>* <https://w3id.org/sotakg/ontology#Practice>" in data.queries[0]
    assert [r.focus.value for r in report.results] == [f"{ID}SOTA-{n:03d}" for n in range(10, 200, 20)]
    first = report.results[0]
    assert first.messages == (f"{ID}SOTA-010 is rejected but gives no reason",)
    assert first.component == SH + "SPARQLConstraintComponent"
    assert first.severity == SH + "Violation"
    assert first.source_shape == "http://example.org/RejectionNeedsReason"
    assert first.value == first.focus  # a node shape's value defaults to the focus node
    assert first.root_shape == "http://example.org/RejectionNeedsReason"
    assert first.path is None
    assert report.conforms is False


def test_core_components_run_one_query_each_with_default_messages_and_severity() -> None:
    data = CountingStore(
        store_of("""
        id:SOTA-001 a sota:Practice ; sota:title "A" .
        id:SOTA-002 a sota:Practice ; sota:title "B", "C" .
        id:SOTA-003 a sota:Practice .
    """)
    )
    shapes = (
        PREFIXES
        + """
    ex:OneTitle a sh:NodeShape ; sh:targetClass sota:Practice ;
        sh:property [ sh:path sota:title ; sh:minCount 1 ; sh:maxCount 1 ; sh:severity sh:Warning ] .
    """
    )
    report = validate(data, shapes)  # type: ignore[arg-type]
    assert len(data.queries) == 3  # the subclasses of sota:Practice, then one query per constraint
    assert [(r.focus.value, r.component, r.severity, r.path, r.messages) for r in report.results] == [
        (
            f"{ID}SOTA-002",
            SH + "MaxCountConstraintComponent",
            SH + "Warning",
            SOTA + "title",
            ("More than 1 values",),
        ),
        (
            f"{ID}SOTA-003",
            SH + "MinCountConstraintComponent",
            SH + "Warning",
            SOTA + "title",
            ("Fewer than 1 values",),
        ),
    ]


def test_property_path_substitution_and_message_template_variables() -> None:
    data = store_of("""
        id:SOTA-001 sota:reasonNames id:LIT-001, id:LIT-404 .
        id:LIT-001 a sota:Paper .
    """)
    shapes = (
        PREFIXES
        + """
    ex:ReasonsResolve a sh:PropertyShape ;
        sh:targetSubjectsOf sota:reasonNames ;
        sh:path sota:reasonNames ;
        sh:severity sh:Info ;
        sh:sparql [
            sh:message "{?value} named by {$this} does not exist" ;
            sh:select "SELECT $this ?value WHERE { $this $PATH ?value FILTER NOT EXISTS { ?value a ?any } }" ;
        ] .
    """
    )
    (result,) = validate(data, shapes).results
    assert (result.focus, result.value, result.path, result.severity, result.messages) == (
        NamedNode(f"{ID}SOTA-001"),
        NamedNode(f"{ID}LIT-404"),
        SOTA + "reasonNames",
        SH + "Info",
        (f"{ID}LIT-404 named by {ID}SOTA-001 does not exist",),
    )


def test_logical_components_judge_value_nodes_against_nested_shapes() -> None:
    data = store_of("""
        ex:a ex:p ex:good, ex:bad, "text" .
        ex:good a ex:C .
        ex:bad a ex:D .
    """)
    shapes = (
        PREFIXES
        + """
    ex:S a sh:NodeShape ; sh:targetNode ex:a ;
        sh:property [ sh:path ex:p ; sh:or ( [ sh:class ex:C ] [ sh:datatype xsd:string ] ) ] ;
        sh:property [ sh:path ex:p ; sh:not [ sh:nodeKind sh:Literal ] ] .
    """
    )
    report = validate(data, shapes)
    assert sorted((r.component.removeprefix(SH), str(r.value)) for r in report.results) == [
        ("NotConstraintComponent", '"text"'),
        ("OrConstraintComponent", "<http://example.org/bad>"),
    ]


def test_deactivated_shapes_and_constraints_report_nothing() -> None:
    data = store_of("ex:a a ex:C .")
    shapes = (
        PREFIXES
        + """
    ex:Off a sh:NodeShape ; sh:targetClass ex:C ; sh:deactivated true ; sh:class ex:Missing .
    ex:On a sh:NodeShape ; sh:targetClass ex:C ;
        sh:sparql [ sh:deactivated true ; sh:select "SELECT $this WHERE { }" ] .
    """
    )
    report = validate(data, shapes)
    assert report.conforms is True and report.results == ()


@pytest.mark.parametrize(
    ("shape", "feature"),
    [
        ("sh:path ex:p ; sh:datatype xsd:int", "sh:datatype xsd:int"),
        ("sh:rule [ ]", "sh:rule"),
        ('sh:sparql [ sh:select "SELECT $this WHERE { $this ?p ?o } LIMIT 1" ]', "LIMIT/OFFSET"),
        ('sh:sparql [ sh:select "SELECT (COUNT(*) AS ?n) WHERE { $this ?p ?o }" ]', "an aggregate"),
    ],
)
def test_unsupported_features_raise_naming_shape_and_feature(shape: str, feature: str) -> None:
    with pytest.raises(UnsupportedShape) as raised:
        compile_shapes(PREFIXES + f"ex:Bad a sh:NodeShape ; sh:targetNode ex:a ; {shape} .")
    assert raised.value.shape == "http://example.org/Bad"
    assert raised.value.feature.startswith(feature)
    assert str(raised.value).startswith(f"shape http://example.org/Bad uses {feature}")


def test_custom_ask_components_run_once_over_all_value_nodes() -> None:
    data = CountingStore(store_of("""ex:a ex:label "Hallo"@de, "Hello"@en . ex:b ex:label "Bonjour"@fr ."""))
    shapes = (
        PREFIXES
        + """
    ex:LanguageComponent a sh:ConstraintComponent ;
        sh:parameter [ sh:path ex:lang ] ;
        sh:validator [ a sh:SPARQLAskValidator ;
            sh:message "{?value} is not in language {$lang}" ;
            sh:ask "ASK { FILTER(langMatches(lang($value), $lang)) }" ] .
    ex:S a sh:PropertyShape ; sh:targetSubjectsOf ex:label ; sh:path ex:label ; ex:lang "en" .
    """
    )
    report = validate(data, shapes)  # type: ignore[arg-type]
    assert len(data.queries) == 1
    assert [(r.focus.value, r.value.value, r.component, r.messages) for r in report.results] == [
        (
            "http://example.org/a",
            "Hallo",
            "http://example.org/LanguageComponent",
            ("Hallo is not in language en",),
        ),
        (
            "http://example.org/b",
            "Bonjour",
            "http://example.org/LanguageComponent",
            ("Bonjour is not in language en",),
        ),
    ]


def test_ask_validators_may_not_assign_value() -> None:
    shapes = (
        PREFIXES
        + """
    ex:C a sh:ConstraintComponent ; sh:parameter [ sh:path ex:lang ] ;
        sh:validator [ sh:ask "ASK { BIND(true AS ?value) }" ] .
    ex:S a sh:NodeShape ; sh:targetNode ex:a ; ex:lang "en" .
    """
    )
    with pytest.raises(ShapesError, match=r"may not assign the pre-bound \$value"):
        compile_shapes(shapes)


def test_recursive_shapes_are_refused() -> None:
    shapes = PREFIXES + "ex:A a sh:NodeShape ; sh:targetNode ex:a ; sh:node ex:B . ex:B sh:node ex:A ."
    with pytest.raises(UnsupportedShape, match="a recursive shape reference"):
        compile_shapes(shapes)


def test_forbidden_sparql_is_a_shapes_error() -> None:
    shapes = (
        PREFIXES
        + """
    ex:S a sh:NodeShape ; sh:targetNode ex:a ;
        sh:sparql [ sh:select "SELECT $this WHERE { $this ?p ?o MINUS { $this ?p 1 } }" ] .
    """
    )
    with pytest.raises(ShapesError, match="forbids MINUS"):
        compile_shapes(shapes)


def test_rewrite_injects_the_focus_into_groups_that_mention_this() -> None:
    from sotakg.rules.shacl_compiler import FOCUS_MARK, Shape

    query = "SELECT ?value WHERE { ?x ?p ?value { FILTER($this = ?x) } UNION { ?y ?p ?value } }"
    rewritten = rewrite_select(query, Shape(NamedNode("http://example.org/S"), "http://example.org/S"), {"ex": "x:"})
    mark = "\n" + FOCUS_MARK
    assert rewritten == (
        "PREFIX ex: <x:>\n"
        f"SELECT ?this ?value WHERE {{{mark} ?x ?p ?value {{{mark} FILTER(?this = ?x) }} "
        "UNION { ?y ?p ?value } }"
    )


def test_results_are_sorted_and_deduplicated() -> None:
    data = store_of("ex:b ex:p 5 . ex:a ex:p 1, 7 .")
    shapes = (
        PREFIXES
        + """
    ex:S1 a sh:PropertyShape ; sh:targetSubjectsOf ex:p ; sh:path ex:p ; sh:maxInclusive 4 .
    ex:S2 a sh:NodeShape ; sh:targetSubjectsOf ex:p ; sh:property ex:S1 .
    """
    )
    report = validate(data, shapes)
    assert {r.root_shape for r in report.results} == {"http://example.org/S1"}  # S1 sorts before S2
    assert [(r.focus.value, r.value) for r in report.results] == [
        (
            "http://example.org/a",
            Literal("7", datatype=NamedNode("http://www.w3.org/2001/XMLSchema#integer")),
        ),
        (
            "http://example.org/b",
            Literal("5", datatype=NamedNode("http://www.w3.org/2001/XMLSchema#integer")),
        ),
    ]


def test_ill_formed_literals_fail_their_datatype() -> None:
    data = store_of('ex:a ex:year "2020"^^xsd:gYear, "20x"^^xsd:gYear, "2020" .')
    shapes = PREFIXES + "ex:S a sh:PropertyShape ; sh:targetNode ex:a ; sh:path ex:year ; sh:datatype xsd:gYear ."
    assert sorted(r.value.value for r in validate(data, shapes).results) == ["2020", "20x"]


def test_a_folder_of_shapes_keeps_each_files_blank_nodes_apart(tmp_path) -> None:
    (tmp_path / "a.ttl").write_text(
        PREFIXES + "ex:A a sh:NodeShape ; sh:targetNode ex:a ; sh:property _:p . _:p sh:path ex:p ; sh:minCount 1 ."
    )
    (tmp_path / "b.ttl").write_text(
        PREFIXES + "ex:B a sh:NodeShape ; sh:targetNode ex:a ; sh:property _:p . _:p sh:path ex:q ; sh:minCount 1 ."
    )
    (tmp_path / "notes.txt").write_text("not a shapes file")
    report = validate(store_of("ex:a ex:other 1 ."), tmp_path)
    assert sorted((r.root_shape, r.path) for r in report.results) == [
        ("http://example.org/A", "http://example.org/p"),
        ("http://example.org/B", "http://example.org/q"),
    ]


def test_class_targets_and_checks_follow_subclasses_in_the_data() -> None:
    # Class targets are "large" focus sets: checked with hash joins and MINUS instead of lookups.
    data = store_of("""
        ex:Report rdfs:subClassOf ex:Document . ex:Memo rdfs:subClassOf ex:Document .
        ex:r a ex:Report ; ex:cites ex:m, ex:x ; ex:title "R" .
        ex:m a ex:Memo ; ex:cites ex:r .
        ex:x a ex:Other .
    """)
    shapes = (
        PREFIXES
        + """
    ex:Docs a sh:NodeShape ; sh:targetClass ex:Document ;
        sh:property [ sh:path ex:cites ; sh:class ex:Document ] ;
        sh:property [ sh:path ex:title ; sh:minCount 1 ] .
    """
    )
    report = validate(data, shapes)
    assert [(r.focus.value, r.component.removeprefix(SH), r.value) for r in report.results] == [
        ("http://example.org/m", "MinCountConstraintComponent", None),
        ("http://example.org/r", "ClassConstraintComponent", NamedNode("http://example.org/x")),
    ]


# ------------------------------------------------------------------------------------------ anti-joins

ANTI_JOIN_DATA = """
ex:a ex:p ex:v1, ex:v2 ; ex:r ex:w1 .
ex:b ex:p ex:v1 .
ex:c ex:p ex:v3 ; ex:r ex:w2 .
ex:d ex:q ex:v9 .
ex:v1 ex:q ex:a .
ex:v3 ex:q ex:c .
ex:w1 ex:s ex:a .
ex:v2 ex:label "two"@en .
"""

#: SHACL-SPARQL constraints, each with NOT in the place of the NOT EXISTS test.
ANTI_JOIN_QUERIES = [
    "SELECT $this ?value WHERE { $this ex:p ?value . FILTER NOT { ?value ex:q $this } }",
    # the test comes before the pattern that binds ?value: it must still see ?value bound
    "SELECT $this ?value WHERE { FILTER NOT { ?value ex:q $this } $this ex:p ?value . }",
    "SELECT $this WHERE { $this ex:p ?v . OPTIONAL { $this ex:r ?w } FILTER NOT { ?w ex:s $this } }",
    'SELECT $this ?value WHERE { $this ex:p ?value . FILTER NOT { $this ex:p/ex:label "two"@en } }',
    "SELECT $this WHERE { $this ex:p ?v . FILTER NOT { $this ex:r/ex:s $this } }",
    # not rewritten: no $this, a FILTER inside, inside an OPTIONAL
    "SELECT $this WHERE { $this ex:p ?v . FILTER NOT { ?x ex:q ex:a } }",
    "SELECT $this ?value WHERE { $this ex:p ?value . FILTER NOT { ?value ex:q ?t FILTER(?t = $this) } }",
    "SELECT $this WHERE { $this ex:p ?v . OPTIONAL { $this ex:r ?w FILTER NOT { ?w ex:s $this } } }",
]


def anti_join_shapes(query: str) -> str:
    return (
        PREFIXES
        + f"""
    ex:S a sh:NodeShape ; sh:targetSubjectsOf ex:p, ex:q ;
        sh:sparql [ sh:prefixes ex:P ; sh:select \"\"\"{query}\"\"\" ] .
    ex:P sh:declare [ sh:prefix "ex" ; sh:namespace "http://example.org/"^^xsd:anyURI ] .
    """
    )


def findings(report) -> list[tuple[str, str | None]]:
    return [(r.focus.value, None if r.value is None else r.value.value) for r in report.results]


@pytest.mark.parametrize("query", ANTI_JOIN_QUERIES)
def test_a_not_exists_over_this_becomes_an_anti_join_with_the_same_findings(query: str) -> None:
    """FILTER NOT EXISTS { basic pattern with $this } runs as a MINUS at the end of its group; the same
    test written as FILTER (NOT EXISTS ...), which the compiler leaves alone, finds the same."""
    data = CountingStore(store_of(ANTI_JOIN_DATA))
    rewritten = findings(validate(data, anti_join_shapes(query.replace("NOT {", "NOT EXISTS {"))))  # type: ignore[arg-type]
    compiled = data.queries[-1]
    reference_query = re.sub(r"FILTER NOT \{([^{}]*)\}", r"FILTER (NOT EXISTS {\1})", query)
    assert reference_query != query
    reference = findings(validate(store_of(ANTI_JOIN_DATA), anti_join_shapes(reference_query)))
    assert rewritten == reference
    plain = ANTI_JOIN_QUERIES.index(query) < 5
    assert ("MINUS" in compiled) is plain
    assert ("NOT EXISTS" in compiled) is not plain


def test_the_anti_join_rewrite_is_exact() -> None:
    from sotakg.rules.shacl_compiler import FOCUS_MARK, Shape

    query = "SELECT $this WHERE { FILTER NOT EXISTS { ?v ex:q $this } $this ex:p ?v . }"
    rewritten = rewrite_select(query, Shape(NamedNode("http://example.org/S"), "http://example.org/S"), {})
    blanked = " " * 17  # FILTER NOT EXISTS { ... } gives way to blanks, in place; the MINUS goes last
    assert rewritten == f"SELECT ?this WHERE {{\n{FOCUS_MARK}{blanked}?this ex:p ?v . MINUS {{ ?v ex:q ?this }}\n}}"


def test_an_ask_validator_over_a_plain_pattern_runs_as_an_anti_join() -> None:
    data = CountingStore(store_of(ANTI_JOIN_DATA + "ex:a ex:allowed ex:v1 . ex:c ex:allowed ex:v3 ."))
    component = """
    ex:AllowedComponent a sh:ConstraintComponent ; sh:parameter [ sh:path ex:allowedBy ] ;
        sh:validator [ a sh:SPARQLAskValidator ; sh:message "{?value} is not allowed" ; sh:ask "ASK { %s }" ] .
    ex:S a sh:PropertyShape ; sh:targetSubjectsOf ex:p ; sh:path ex:p ; ex:allowedBy ex:allowed .
    """
    report = validate(data, PREFIXES + component % "$this $allowedBy $value")  # type: ignore[arg-type]
    assert "MINUS" in data.queries[-1] and "NOT EXISTS" not in data.queries[-1]
    reference = validate(
        store_of(ANTI_JOIN_DATA + "ex:a ex:allowed ex:v1 . ex:c ex:allowed ex:v3 ."),
        PREFIXES + component % "FILTER EXISTS { $this $allowedBy $value }",
    )
    assert (
        findings(report)
        == findings(reference)
        == [("http://example.org/a", "http://example.org/v2"), ("http://example.org/b", "http://example.org/v1")]
    )


# ------------------------------------------------------------------------ cycles of one predicate


def cycle_shapes(query: str, target: str = "sh:targetSubjectsOf ex:p") -> str:
    return (
        PREFIXES
        + f"""
    ex:NoCycle a sh:NodeShape ; {target} ;
        sh:sparql [ sh:prefixes ex:P ; sh:message "{{$this}} revises itself" ; sh:select \"\"\"{query}\"\"\" ] .
    ex:P sh:declare [ sh:prefix "ex" ; sh:namespace "http://example.org/"^^xsd:anyURI ] .
    """
    )


#: Found in one linear pass (Tarjan's components), not by walking the path from every node.
CYCLE_QUERY = "SELECT $this WHERE { $this ex:p+ $this . }"
#: The same question the compiler does not recognise, so it runs as the SPARQL query it is.
CYCLE_REFERENCE = "SELECT $this WHERE { $this ex:p+ $this . FILTER (true) }"


def cycle_findings(report) -> list[tuple[str, str | None, tuple[str, ...]]]:
    return [(str(r.focus), None if r.value is None else str(r.value), r.messages) for r in report.results]


EX = {"ex": "http://example.org/"}


@pytest.mark.parametrize(
    "query, prefixes, steps",
    [
        (CYCLE_QUERY, EX, (("http://example.org/p", False),)),
        ("select distinct ?this { ?this <http://example.org/p>+ $this }", {}, (("http://example.org/p", False),)),
        ("\n  SELECT $this\n  WHERE {\n    $this :p+ $this .\n  }", {"": "urn:x:"}, (("urn:x:p", False),)),
        (
            "SELECT $this WHERE { $this ( ex:p | ^ <urn:q> |^ex:r)+ $this }",
            EX,
            (("http://example.org/p", False), ("urn:q", True), ("http://example.org/r", True)),
        ),
        (CYCLE_QUERY, {}, None),  # an undeclared prefix: left to SPARQL, which reports it
        (CYCLE_REFERENCE, EX, None),
        ("SELECT $this WHERE { $this ex:p* $this . }", EX, None),
        ("SELECT $this WHERE { $this ex:p+ ?other . }", EX, None),
        ("SELECT $this WHERE { $this (ex:p/ex:q)+ $this . }", EX, None),
        ("SELECT $this WHERE { $this (ex:p|ex:q+)+ $this . }", EX, None),
        ("SELECT $this WHERE { $this ex:p.q+ $this . }", EX, None),
        ("SELECT $this WHERE { # a comment\n $this ex:p+ $this . }", EX, None),
        ("SELECT $this ?value WHERE { $this ex:p+ $this . }", EX, None),
        ("SELECT $THIS WHERE { $THIS ex:p+ $THIS . }", EX, None),  # another variable: SPARQL's are case-sensitive
        # letters and blanks only Unicode's rules take for ASCII ones: not read as the engine reads them
        ("SELECT $this WHERE { $this <\u212aex:p>+ $this }", EX, None),  # the Kelvin sign
        ("SELECT $this WHERE { $this (ex:p|ex:\u017f)+ $this }", EX, None),  # the long s
        ("SELECT $this WHERE { $this \u0131x:p+ $this }", {"x": "urn:x:", "ix": "urn:ix:"}, None),  # dotless i
        ("SELECT\u00a0$this WHERE { $this ex:p+ $this }", EX, None),  # a no-break space
    ],
)
def test_only_a_bare_self_reachability_query_is_recognised(query, prefixes, steps) -> None:
    from sotakg.rules.shacl_compiler import self_reachable_steps

    assert self_reachable_steps(query, prefixes) == steps


NODES = ["ex:a", "ex:b", "ex:c", "ex:d", "_:x", "_:y"]
#: Small graphs of two predicates, a target declaration and a path: the cycle rules' inputs.
CYCLE_EDGES = st.lists(
    st.tuples(st.sampled_from(NODES), st.sampled_from(["ex:p", "ex:q"]), st.sampled_from([*NODES, '"lit"'])),
    max_size=12,
)
CYCLE_TARGETS = st.sampled_from(
    ["sh:targetSubjectsOf ex:p", "sh:targetNode ex:a, ex:c, ex:z, 'lit'", "sh:targetObjectsOf ex:q"]
)
CYCLE_PATHS = st.sampled_from(["ex:p", "(ex:p|^ex:q)", "(^ex:q)", "(ex:q|ex:p)"])


@given(
    CYCLE_EDGES,
    CYCLE_TARGETS,
    CYCLE_PATHS,
)
@settings(max_examples=200, deadline=None)
def test_cycles_found_in_one_pass_are_exactly_what_the_sparql_query_finds(edges, target, path) -> None:
    data = store_of("".join(f"{s} {p} {o} .\n" for s, p, o in edges) + "ex:a ex:r ex:b .\n")
    counted = CountingStore(data)
    fast = validate(counted, cycle_shapes(CYCLE_QUERY.replace("ex:p", path), target))  # type: ignore[arg-type]
    assert not any("+" in query for query in counted.queries)
    reference = validate(data, cycle_shapes(CYCLE_REFERENCE.replace("ex:p", path), target))
    assert cycle_findings(fast) == cycle_findings(reference)


@given(
    CYCLE_EDGES,
    CYCLE_TARGETS,
    CYCLE_PATHS,
    st.sets(st.sampled_from(["a", "b", "c", "d", "z", "lit"])),
    st.sampled_from([0, 1, 3, 20_000]),
)
@settings(max_examples=200, deadline=None)
def test_cycles_of_chosen_focus_nodes_are_what_the_sparql_query_finds_for_them(
    edges, target, path, chosen, budget
) -> None:
    """A focused validation walks from each chosen node (or, past the walk's budget, reads the steps
    once, as a whole validation does) and finds exactly the chosen nodes the query finds."""
    from sotakg.rules import shacl_compiler

    data = store_of("".join(f"{s} {p} {o} .\n" for s, p, o in edges) + "ex:a ex:r ex:b .\n")
    focus = [Literal("lit") if name == "lit" else NamedNode("http://example.org/" + name) for name in sorted(chosen)]
    before = shacl_compiler.CYCLE_WALK_BUDGET
    shacl_compiler.CYCLE_WALK_BUDGET = budget
    try:
        counted = CountingStore(data)
        compiled = compile_shapes(cycle_shapes(CYCLE_QUERY.replace("ex:p", path), target))
        focused = compiled.validate(counted, focus=focus)  # type: ignore[arg-type]
    finally:
        shacl_compiler.CYCLE_WALK_BUDGET = before
    assert not any("+" in query for query in counted.queries)
    reference = validate(data, cycle_shapes(CYCLE_REFERENCE.replace("ex:p", path), target))
    expected = [finding for finding in cycle_findings(reference) if finding[0] in {str(term) for term in focus}]
    assert cycle_findings(focused) == expected


def test_cycles_agree_with_pyshacl() -> None:
    import pyshacl
    import rdflib

    turtle = PREFIXES + (
        "ex:a ex:p ex:b . ex:b ex:p ex:c . ex:c ex:p ex:a . ex:c ex:p ex:d . ex:d ex:p ex:e .\n"
        'ex:f ex:p ex:f . ex:g ex:p ex:h . ex:h ex:p ex:g . ex:h ex:p "lit" . _:x ex:p _:x . ex:i ex:p ex:a .\n'
    )
    report = validate(store_of(turtle), cycle_shapes(CYCLE_QUERY))
    found = {(str(r.focus), r.messages) for r in report.results if isinstance(r.focus, NamedNode)}
    expected = {(f"<http://example.org/{n}>", (f"http://example.org/{n} revises itself",)) for n in "abcfgh"}
    assert found == expected
    assert sum(1 for r in report.results if not isinstance(r.focus, NamedNode)) == 1

    _conforms, graph, _text = pyshacl.validate(
        rdflib.Graph().parse(data=turtle, format="turtle"),
        shacl_graph=rdflib.Graph().parse(data=cycle_shapes(CYCLE_QUERY), format="turtle"),
        advanced=True,
    )
    sh = rdflib.Namespace(SH)
    theirs = {str(node) for node in graph.objects(None, sh.focusNode) if isinstance(node, rdflib.URIRef)}
    assert {f"http://example.org/{n}" for n in "abcfgh"} == theirs
    assert sum(1 for node in graph.objects(None, sh.focusNode) if isinstance(node, rdflib.BNode)) == 1


def test_a_long_revision_chain_is_checked_for_cycles_in_linear_time() -> None:
    """Walking the path from every version took about 5 s for a chain of 1000 (quadratic): 5000 would
    take minutes. One pass over the chain finds the same: no query walks the path."""
    chain = "".join(f"ex:v{n} ex:p ex:v{n - 1} .\n" for n in range(1, 5000))
    for closing, expected in (("", 0), ("ex:v0 ex:p ex:v4999 .\n", 5000)):
        data = CountingStore(store_of(chain + closing))
        report = validate(data, cycle_shapes(CYCLE_QUERY))  # type: ignore[arg-type]
        assert len(report.results) == expected
        assert not any("+" in query for query in data.queries)


def test_the_shipped_cycle_rules_run_in_one_pass() -> None:
    from sotakg.resources import resource_dir

    shapes = compile_shapes(resource_dir("shapes")).targeted
    rule = next(shape for shape in shapes if shape.name.endswith("#version-no-cycle"))
    (constraint,) = rule.constraints
    assert constraint.args["cycle"] == (("http://www.w3.org/ns/prov#wasRevisionOf", False),)
    adrs = next(shape for shape in shapes if shape.name.endswith("#adr-no-cycle"))
    (constraint,) = adrs.constraints
    assert constraint.args["cycle"] == (
        ("http://purl.org/dc/terms/replaces", False),
        ("http://purl.org/dc/terms/isReplacedBy", True),
    )
    assert [s.name for s in shapes if any("cycle" in c.args for c in s.constraints)] == [adrs.name, rule.name]


# ------------------------------------------------------------------------------ refusals, exactly

NOT_SUPPORTED = "which the SPARQL engine does not support"


@pytest.mark.parametrize(
    ("shapes", "error", "message"),
    [
        (
            'ex:S a sh:NodeShape ; sh:targetNode ex:a ; sh:sparql [ sh:select "SELECT (COUNT(*) AS ?n) '
            'WHERE { $this ?p ?o }" ] .',
            UnsupportedShape,
            "shape http://example.org/S uses an aggregate without GROUP BY $this in a SPARQL constraint, "
            f"{NOT_SUPPORTED}: it cannot run over all focus nodes at once",
        ),
        (
            'ex:S a sh:NodeShape ; sh:targetNode ex:a ; sh:sparql [ sh:select "SELECT $this WHERE '
            '{ GRAPH ?g { $this ?p ?o } }" ] .',
            UnsupportedShape,
            f"shape http://example.org/S uses GRAPH in a SPARQL constraint, {NOT_SUPPORTED}",
        ),
        (  # even as the query's very last words
            'ex:S a sh:NodeShape ; sh:targetNode ex:a ; sh:sparql [ sh:select "SELECT $this WHERE '
            '{ $this ?p ?o } AS $this" ] .',
            ShapesError,
            "shape http://example.org/S: a SPARQL constraint may not assign the pre-bound $this",
        ),
        (
            'ex:S a sh:NodeShape ; sh:targetNode ex:a ; sh:sparql [ sh:select "ASK { $this ?p ?o }" ] .',
            ShapesError,
            "shape http://example.org/S: sh:select holds no SELECT query",
        ),
        (
            "ex:S a sh:NodeShape ; sh:targetNode ex:a ; sh:in ( ex:x _:b ) .",
            UnsupportedShape,
            f"shape http://example.org/S uses a blank node in sh:in, {NOT_SUPPORTED}: "
            "a blank node cannot be written into a query",
        ),
        (
            "ex:A a sh:NodeShape ; sh:targetNode ex:a ; sh:node ex:B . ex:B sh:node ex:A .",
            UnsupportedShape,
            f"shape http://example.org/A uses a recursive shape reference, {NOT_SUPPORTED}: "
            "SHACL leaves recursion undefined",
        ),
        (
            'ex:S a sh:NodeShape ; sh:targetNode ex:a ; sh:class "C" .',
            ShapesError,
            'shape http://example.org/S: sh:class must be an IRI, not "C"',
        ),
        (
            "ex:C a sh:ConstraintComponent ; sh:parameter [ sh:path ex:lang ] ; sh:validator ex:V ."
            ' ex:V sh:select "SELECT $this WHERE { }" . ex:S a sh:NodeShape ; sh:targetNode ex:a ; ex:lang "en" .',
            ShapesError,
            "constraint component http://example.org/C: validator http://example.org/V needs one sh:ask "
            "(or, as a node or property validator, one sh:select)",
        ),
        *(
            (
                f'ex:S a sh:PropertyShape ; sh:targetNode ex:a ; sh:path ex:p ; sh:{parameter} "q" .',
                ShapesError,
                f'shape http://example.org/S: sh:{parameter} must be an IRI, not "q"',
            )
            for parameter in ("equals", "disjoint", "lessThan")
        ),
        (
            'ex:C a sh:ConstraintComponent ; sh:parameter [ sh:optional true ] ; sh:validator [ sh:ask "ASK {}" ] .',
            ShapesError,
            "constraint component http://example.org/C: a parameter needs one IRI sh:path",
        ),
    ],
)
def test_refusals_name_the_shape_the_feature_and_the_reason_exactly(shapes: str, error: type, message: str) -> None:
    """What the compiler refuses it refuses when compiling, with a message that names the shape (or
    the constraint component), what in it is refused and, for what is not implemented, why."""
    with pytest.raises(error) as raised:
        compile_shapes(PREFIXES + shapes)
    assert type(raised.value) is error
    assert str(raised.value) == message


# ------------------------------------------------------------------------------ results and messages


def test_default_node_kind_message_names_the_kind() -> None:
    """sh:nodeKind's default message names the node kind asked for, as prefix:name."""
    data = store_of("ex:a ex:p 1 .")
    shapes = PREFIXES + "ex:S a sh:PropertyShape ; sh:targetNode ex:a ; sh:path ex:p ; sh:nodeKind sh:IRI ."
    (result,) = validate(data, shapes).results
    assert result.messages == ("Value is not of node kind sh:IRI",)


def test_path_in_a_message_is_the_result_path() -> None:
    """``{$path}`` in a message is the result's path: the shape's path, or for sh:closed the
    predicate that is not allowed."""
    data = store_of("ex:a ex:p 1 ; ex:q 2 .")
    shapes = (
        PREFIXES
        + """
    ex:Missing a sh:PropertyShape ; sh:targetNode ex:a ; sh:path ex:r ; sh:minCount 1 ;
        sh:message "{$path} is missing on {$this}" .
    ex:Closed a sh:NodeShape ; sh:targetNode ex:a ; sh:closed true ; sh:property [ sh:path ex:p ] .
    """
    )
    assert [(r.source_shape, r.path, r.messages) for r in validate(data, shapes).results] == [
        (
            "http://example.org/Closed",
            "http://example.org/q",
            ("Predicate http://example.org/q is not allowed (closed shape)",),
        ),
        (
            "http://example.org/Missing",
            "http://example.org/r",
            ("http://example.org/r is missing on http://example.org/a",),
        ),
    ]


def test_a_sparql_constraint_binding_message_overrides_the_template() -> None:
    """A SPARQL constraint that binds ``?message`` gets that literal as its result's message, not
    its sh:message template."""
    data = store_of("ex:a ex:p 1 .")
    shapes = (
        PREFIXES
        + """
    ex:S a sh:NodeShape ; sh:targetNode ex:a ;
        sh:sparql [ sh:message "the template" ;
            sh:select "SELECT $this ?message WHERE { $this ?p ?o BIND(CONCAT('bound ', STR(?o)) AS ?message) }" ] .
    """
    )
    (result,) = validate(data, shapes).results
    assert result.messages == ("bound 1",)


def test_a_component_message_is_used_when_its_validator_has_none() -> None:
    """A constraint component's own sh:message serves its validators that declare none."""
    data = store_of('ex:a ex:label "Hallo"@de, "Hello"@en .')
    shapes = (
        PREFIXES
        + """
    ex:LanguageComponent a sh:ConstraintComponent ;
        sh:parameter [ sh:path ex:lang ] ;
        sh:message "{?value} is not in language {$lang}" ;
        sh:validator [ a sh:SPARQLAskValidator ; sh:ask "ASK { FILTER(langMatches(lang($value), $lang)) }" ] .
    ex:S a sh:PropertyShape ; sh:targetNode ex:a ; sh:path ex:label ; ex:lang "en" .
    """
    )
    assert [(r.value.value, r.messages) for r in validate(data, shapes).results] == [
        ("Hallo", ("Hallo is not in language en",))
    ]


def test_an_ask_validator_on_a_complex_path_names_the_path_in_its_message() -> None:
    """An ASK validator of a property shape whose path is not one predicate reports that path, as
    SPARQL text, in the result and as ``{$path}`` in its message."""
    data = store_of('ex:a ex:p ex:b . ex:b ex:label "Hallo"@de, "Hello"@en .')
    shapes = (
        PREFIXES
        + """
    ex:LanguageComponent a sh:ConstraintComponent ;
        sh:parameter [ sh:path ex:lang ] ;
        sh:validator [ a sh:SPARQLAskValidator ; sh:message "{?value} at {$path} is not in language {$lang}" ;
            sh:ask "ASK { FILTER(langMatches(lang($value), $lang)) }" ] .
    ex:S a sh:PropertyShape ; sh:targetNode ex:a ; sh:path ( ex:p ex:label ) ; ex:lang "en" .
    """
    )
    path = "(<http://example.org/p>/<http://example.org/label>)"
    assert [(r.path, r.value.value, r.messages) for r in validate(data, shapes).results] == [
        (path, "Hallo", (f"Hallo at {path} is not in language en",))
    ]


@pytest.mark.parametrize("modifier", ["DISTINCT", "REDUCED"])
def test_a_constraint_projecting_distinct_values_without_this_still_reports_its_focus(modifier: str) -> None:
    """A SELECT DISTINCT (or REDUCED) constraint that does not project $this reports each row under
    the focus node it was found for."""
    data = store_of("ex:a ex:p ex:b, ex:c . ex:b ex:q 1 .")
    query = (
        f"SELECT {modifier} ?value WHERE {{ $this <http://example.org/p> ?value FILTER NOT EXISTS {{ ?value ?x ?y }} }}"
    )
    shapes = PREFIXES + f'ex:S a sh:NodeShape ; sh:targetNode ex:a ; sh:sparql [ sh:select "{query}" ] .'
    assert findings(validate(data, shapes)) == [("http://example.org/a", "http://example.org/c")]


def test_qualified_min_count_fails_a_focus_node_without_values() -> None:
    """sh:qualifiedMinCount counts zero conforming values for a focus node that has no value at all."""
    data = store_of("ex:a ex:p ex:x . ex:x a ex:C . ex:b ex:other 1 .")
    shapes = (
        PREFIXES
        + """
    ex:S a sh:PropertyShape ; sh:targetNode ex:a, ex:b ; sh:path ex:p ;
        sh:qualifiedValueShape ex:IsC ; sh:qualifiedMinCount 1 .
    ex:IsC sh:class ex:C .
    """
    )
    assert [(r.focus.value, r.component, r.messages) for r in validate(data, shapes).results] == [
        (
            "http://example.org/b",
            SH + "QualifiedMinCountConstraintComponent",
            ("Fewer than 1 values conform to <http://example.org/IsC>",),
        )
    ]


# ------------------------------------------------------------------------------ the shapes graph


def test_a_shapes_graph_holding_triple_terms_keeps_its_other_statements() -> None:
    """Statements whose object is an RDF 1.2 triple term are no SHACL; they are passed over, and
    the statements after them are read as usual."""
    data = store_of("ex:a ex:p 1 .")
    shapes = (
        PREFIXES
        + """
    ex:S ex:reviewed <<( ex:S sh:maxCount 0 )>> .
    ex:S a sh:PropertyShape ; sh:targetNode ex:a ; sh:path ex:p ; sh:maxCount 0 .
    """
    )
    assert [(r.focus.value, r.messages) for r in validate(data, shapes).results] == [
        ("http://example.org/a", ("More than 0 values",))
    ]


def test_a_shape_the_shapes_graph_says_nothing_about_is_empty() -> None:
    """A reference to a shape the shapes graph does not describe is to an empty shape: every node
    conforms to it (sh:node passes, sh:not fails)."""
    data = store_of("ex:a ex:p 1 .")
    shapes = PREFIXES + "ex:S a sh:NodeShape ; sh:targetNode ex:a ; sh:node ex:Nothing ; sh:not ex:Nothing ."
    assert [(r.component, r.messages) for r in validate(data, shapes).results] == [
        (SH + "NotConstraintComponent", ("Value conforms to <http://example.org/Nothing>, which it must not",))
    ]


def test_an_implicit_class_target_follows_subclasses_of_node_shape_in_the_shapes_graph() -> None:
    """A class that is a node shape through a subclass of sh:NodeShape (in the shapes graph) targets
    its instances, as one typed sh:NodeShape directly does."""
    data = store_of("ex:bob a ex:Person . ex:ann a ex:Person ; ex:name 'Ann' .")
    shapes = (
        PREFIXES
        + """
    ex:ShapeClass rdfs:subClassOf sh:NodeShape .
    ex:Person a rdfs:Class, ex:ShapeClass ; sh:property [ sh:path ex:name ; sh:minCount 1 ] .
    """
    )
    assert [(r.focus.value, r.root_shape, r.component) for r in validate(data, shapes).results] == [
        ("http://example.org/bob", "http://example.org/Person", SH + "MinCountConstraintComponent")
    ]


# ------------------------------------------------------------------------------ progress and plans


def test_progress_is_told_of_each_targeted_shape_and_of_the_end() -> None:
    """``progress(done, total, shape)`` is called before each targeted shape, by name, and once
    more at the end with ``"done"``."""
    compiled = compile_shapes(
        PREFIXES
        + "ex:T a sh:NodeShape ; sh:targetNode ex:a . ex:S a sh:NodeShape ; sh:targetNode ex:a ; sh:class ex:C ."
    )
    calls: list[tuple[int, int, str]] = []
    compiled.validate(store_of("ex:a ex:p 1 ."), progress=lambda *call: calls.append(call))
    assert calls == [(0, 2, "http://example.org/S"), (1, 2, "http://example.org/T"), (2, 2, "done")]


def test_an_or_narrowed_by_a_value_stays_a_hash_anti_join_over_a_class() -> None:
    """sh:or of "not this value" and another member, over a class target, checks the other member on
    the nodes with the value only, and still as an anti-join (MINUS) over that large focus."""
    data = CountingStore(many_practices(40))
    shapes = (
        PREFIXES
        + """
    ex:RejectedNeedsReason a sh:NodeShape ; sh:targetClass sota:Practice ;
        sh:or (
            [ sh:not [ sh:path sota:status ; sh:hasValue sota:Rejected ] ]
            [ sh:path sota:rejectionReason ; sh:minCount 1 ]
        ) .
    """
    )
    report = validate(data, shapes)  # type: ignore[arg-type]
    assert [(r.focus.value, r.component) for r in report.results] == [
        (f"{ID}SOTA-010", SH + "OrConstraintComponent"),
        (f"{ID}SOTA-030", SH + "OrConstraintComponent"),
    ]
    (check,) = [q for q in data.queries if "rejectionReason" in q]
    assert "ontology#Rejected>" in check and "MINUS" in check and "NOT EXISTS" not in check


# ------------------------------------------------------------------------------ pinned corners


def test_a_not_exists_opening_with_a_filter_stays_a_not_exists() -> None:
    """A FILTER NOT EXISTS whose group opens with a FILTER (written right after the brace) is no
    basic pattern: it stays a NOT EXISTS, whose FILTER sees the row's ?value (in a MINUS it would
    see none, and remove nothing)."""
    query = "SELECT $this ?value WHERE { $this ex:p ?value . FILTER NOT EXISTS {FILTER(?value = ex:v1) $this ex:r ?w} }"
    data = CountingStore(store_of(ANTI_JOIN_DATA))
    report = validate(data, anti_join_shapes(query))  # type: ignore[arg-type]
    assert "MINUS" not in data.queries[-1] and "NOT EXISTS" in data.queries[-1]
    assert findings(report) == [
        ("http://example.org/a", "http://example.org/v2"),
        ("http://example.org/b", "http://example.org/v1"),
        ("http://example.org/c", "http://example.org/v3"),
    ]


def test_a_variable_named_like_the_shapes_graph_in_another_case_may_be_assigned() -> None:
    """Only ``$shapesGraph`` is pre-bound: SPARQL variables are case-sensitive, so a constraint may
    assign ``?shapesgraph`` like any variable of its own."""
    query = "SELECT $this ?value WHERE { $this ex:p ?value . BIND(1 AS ?shapesgraph) FILTER(?value = ex:v1) }"
    assert findings(validate(store_of(ANTI_JOIN_DATA), anti_join_shapes(query))) == [
        ("http://example.org/a", "http://example.org/v1"),
        ("http://example.org/b", "http://example.org/v1"),
    ]


def test_current_shape_in_a_blank_node_shape_is_refused_naming_that_shape() -> None:
    """``$currentShape`` in a SPARQL constraint of a blank-node shape is refused, naming the blank
    node shape and saying why: a blank node cannot be written into a query."""
    shapes = (
        PREFIXES
        + """
    ex:S a sh:NodeShape ; sh:targetNode ex:a ;
        sh:property [ sh:path ex:p ; sh:sparql [ sh:select "SELECT $this WHERE { $this ?p $currentShape }" ] ] .
    """
    )
    with pytest.raises(UnsupportedShape) as raised:
        compile_shapes(shapes)
    shape = raised.value.shape
    assert isinstance(shape, str) and shape.startswith("_:")
    assert str(raised.value) == (
        f"shape {shape} uses $currentShape for a blank-node shape, {NOT_SUPPORTED}: "
        "a blank node cannot be written into a query"
    )


def test_default_disjoint_message_names_the_other_property() -> None:
    """sh:disjoint's default message says the value is also a value of the other property."""
    data = store_of("ex:a ex:p ex:x, ex:z ; ex:q ex:x, ex:y .")
    shapes = PREFIXES + "ex:S a sh:PropertyShape ; sh:targetNode ex:a ; sh:path ex:p ; sh:disjoint ex:q ."
    assert [(r.value.value, r.component, r.messages) for r in validate(data, shapes).results] == [
        (
            "http://example.org/x",
            SH + "DisjointConstraintComponent",
            ("Value is also a value of <http://example.org/q>",),
        )
    ]


def test_a_class_that_is_a_property_shape_targets_its_instances() -> None:
    """A class that is also a sh:PropertyShape (not a sh:NodeShape) is an implicit class target:
    its instances are validated against it."""
    data = store_of("ex:bob a ex:Person . ex:ann a ex:Person ; ex:name 'Ann' . ex:eve ex:name 'Eve' .")
    shapes = PREFIXES + "ex:Person a rdfs:Class, sh:PropertyShape ; sh:path ex:name ; sh:minCount 1 ."
    compiled = compile_shapes(shapes)
    (shape,) = compiled.targeted
    assert shape.targets == [("class", "http://example.org/Person")]
    assert [(r.focus.value, r.root_shape, r.component) for r in compiled.validate(data).results] == [
        ("http://example.org/bob", "http://example.org/Person", SH + "MinCountConstraintComponent")
    ]


def test_max_count_over_a_shared_object_path_is_one_group_by_over_a_large_focus() -> None:
    """sh:maxCount n >= 1 on ``p/^p`` over a large focus (any target but sh:targetNode): when no
    object of p has two subjects, every node reaches only itself, which one GROUP BY over p's
    objects shows; the path is not walked from each node."""
    data = CountingStore(store_of("ex:a ex:p ex:x . ex:b ex:p ex:y . ex:c ex:p ex:z, ex:w ."))
    shapes = (
        PREFIXES
        + """
    ex:S a sh:PropertyShape ; sh:targetSubjectsOf ex:p ; sh:path ( ex:p [ sh:inversePath ex:p ] ) ; sh:maxCount 1 .
    """
    )
    report = validate(data, shapes)  # type: ignore[arg-type]
    assert report.results == ()
    assert data.queries == [
        "SELECT ?shared WHERE { ?holder <http://example.org/p> ?shared } "
        "GROUP BY ?shared HAVING (COUNT(DISTINCT ?holder) > 1) LIMIT 1"
    ]


def test_an_or_of_not_this_value_and_a_negation_fails_only_the_nodes_with_the_value() -> None:
    """sh:or of "not this value" and a sh:not member: only the focus nodes with the value are judged
    by the sh:not, and of those the ones that fail it (have what it negates) fail the sh:or."""
    shapes = (
        PREFIXES
        + """
    ex:S a sh:NodeShape ; sh:targetSubjectsOf ex:p ;
        sh:or (
            [ sh:not [ sh:path ex:p ; sh:hasValue ex:v1 ] ]
            [ sh:not [ sh:path ex:r ; sh:minCount 1 ] ]
        ) .
    """
    )
    report = validate(store_of(ANTI_JOIN_DATA), shapes)
    assert [(r.focus.value, r.value, r.component) for r in report.results] == [
        ("http://example.org/a", NamedNode("http://example.org/a"), SH + "OrConstraintComponent")
    ]
