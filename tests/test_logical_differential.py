"""The SPARQL engine (sotakg.rules.shacl_compiler) against pySHACL on generated logical constraints.

sh:or, sh:not, sh:and, sh:xone, sh:node and sh:property nest one another here, with sh:hasValue members
on a path (predicate, inverse, sequence, alternative, sh:zeroOrMorePath) and on the focus node itself,
the sh:not of a hasValue, counts, sh:class, sh:in, sh:datatype, sh:nodeKind, deactivated members, named
helper shapes referred to from several places, node and property shapes as targeted shapes, and every
kind of target (class, node, subjects of, objects of). The data graphs are small: a few IRIs and two
blank nodes of two classes, 0-3 values per property drawn from IRIs, blank nodes and plain, typed and
language-tagged literals, so that a value node is often the value of several focus nodes, or a literal,
or a node outside every target.

Both engines read the very same triples (blank node labels kept), and the reports are compared as sets of
(focus, path, value, sourceConstraintComponent, severity, sourceShape) over the report's sh:result
values (pySHACL's sh:detail results, nested under a logical constraint's result, are not results of
the report). A case the compiler refuses (UnsupportedShape: a shape that refers to itself) is skipped.

The explicit tests below the generator are the disagreements it found, each made minimal.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyoxigraph import BlankNode, Literal, NamedNode, Quad, RdfFormat, Store, parse

from sotakg.errors import UnsupportedShape
from sotakg.rules.shacl_compiler import ShapesGraph, _Compiler, compile_shapes, node_id
from sotakg.rules.validate import _rdflib_term

SH = "http://www.w3.org/ns/shacl#"
EX = "http://example.org/"
XSD_STRING = "http://www.w3.org/2001/XMLSchema#string"
PREFIXES = """@prefix sh: <http://www.w3.org/ns/shacl#> .
@prefix ex: <http://example.org/> .
@prefix xsd: <http://www.w3.org/2001/XMLSchema#> .
@prefix rdf: <http://www.w3.org/1999/02/22-rdf-syntax-ns#> .
"""

# ---------------------------------------------------------------------------------------- both engines


def _oxigraph(term):
    import rdflib

    if isinstance(term, rdflib.URIRef):
        return NamedNode(str(term))
    if isinstance(term, rdflib.BNode):
        return BlankNode(str(term))
    if term.language:
        return Literal(str(term), language=term.language)
    if term.datatype is not None:
        return Literal(str(term), datatype=NamedNode(str(term.datatype)))
    return Literal(str(term))


def _graph(triples):
    import rdflib

    graph = rdflib.Graph()
    for triple in triples:
        graph.add((_rdflib_term(triple.subject), _rdflib_term(triple.predicate), _rdflib_term(triple.object)))
    return graph


def sparql_findings(shapes_triples, data_triples) -> set[tuple]:
    store = Store()
    store.extend(Quad(t.subject, t.predicate, t.object) for t in data_triples)
    report = compile_shapes(ShapesGraph(shapes_triples)).validate(store)
    return {
        (str(r.focus), r.path, None if r.value is None else str(r.value), r.component, r.severity, r.source_shape)
        for r in report.results
    }


def pyshacl_findings(shapes_triples, data_triples) -> set[tuple]:
    import pyshacl
    import rdflib

    _conforms, report, _text = pyshacl.validate(
        _graph(data_triples),
        shacl_graph=_graph(shapes_triples),
        inference="none",
        allow_warnings=True,
        meta_shacl=False,
        advanced=False,
    )
    sh = rdflib.Namespace(SH)
    # The report's paths written as the compiler writes them: read by the compiler from the report.
    report_graph = ShapesGraph(
        [Quad(_oxigraph(s), _oxigraph(p), _oxigraph(o)) for s, p, o in report]  # type: ignore[arg-type]
    )
    compiler = _Compiler(report_graph)
    found = set()
    for result in report.objects(None, sh.result):
        path = report.value(result, sh.resultPath)
        if path is None:
            path_text = None
        elif isinstance(path, rdflib.URIRef):
            path_text = str(path)
        else:
            path_text = compiler.path_text(_oxigraph(path), "report")
        value = report.value(result, sh.value)
        found.add(
            (
                str(_oxigraph(report.value(result, sh.focusNode))),
                path_text,
                None if value is None else str(_oxigraph(value)),
                str(report.value(result, sh.sourceConstraintComponent)),
                str(report.value(result, sh.resultSeverity)),
                node_id(_oxigraph(report.value(result, sh.sourceShape))),
            )
        )
    return found


def _findings(shapes: str, data: str) -> tuple[set[tuple], set[tuple]] | UnsupportedShape:
    """The SPARQL engine's findings and pySHACL's, for Turtle (the prefixes above are added), or the
    compiler's refusal of the shapes."""
    shapes_triples = list(parse(PREFIXES + shapes, format=RdfFormat.TURTLE))
    data_triples = list(parse(PREFIXES + data, format=RdfFormat.TURTLE))
    try:
        sparql = sparql_findings(shapes_triples, data_triples)
    except UnsupportedShape as error:
        return error
    return sparql, pyshacl_findings(shapes_triples, data_triples)


def both(shapes: str, data: str) -> tuple[set[tuple], set[tuple]]:
    """As ``_findings``; a refused shape skips the test."""
    found = _findings(shapes, data)
    if isinstance(found, UnsupportedShape):
        pytest.skip(f"unsupported: {found}")
    return found


def assert_agree(shapes: str, data: str) -> None:
    """Both engines give the same findings (nothing to compare when the compiler refuses the shapes)."""
    found = _findings(shapes, data)
    if isinstance(found, UnsupportedShape):
        return  # a helper shape that refers to itself
    sparql, reference = found
    only_sparql = sorted(sparql - reference, key=repr)
    only_pyshacl = sorted(reference - sparql, key=repr)
    assert (only_sparql, only_pyshacl) == ([], []), (
        f"\nSHAPES:\n{shapes}\nDATA:\n{data}\nonly the sparql engine: {only_sparql}\nonly pySHACL: {only_pyshacl}"
    )


def one(component: str, focus: str, value: str | None = None, path: str | None = None, shape: str = "S") -> tuple:
    return (focus, path, value, SH + component + "ConstraintComponent", SH + "Violation", EX + shape)


# ------------------------------------------------------------------------------------------- generator

NODES = ["ex:n0", "ex:n1", "ex:n2", "ex:n3", "ex:out"]
BLANKS = ["_:b0", "_:b1"]
LITERALS = ['"x"', '"x"@en', '"1"^^xsd:integer', '"2"^^xsd:integer', '"y"^^xsd:string', "true", '"ex:n0"']
TERMS = NODES + LITERALS  # sh:hasValue and sh:in take no blank node (the compiler refuses one)
PREDICATES = ["ex:p", "ex:q", "ex:r"]
CLASSES = ["ex:A", "ex:B"]
PATHS = [
    "ex:p",
    "ex:q",
    "ex:r",
    "[ sh:inversePath ex:p ]",
    "[ sh:inversePath ex:r ]",
    "( ex:r ex:p )",
    "[ sh:zeroOrMorePath ex:r ]",
    "( ex:r [ sh:zeroOrMorePath ex:r ] )",
    "[ sh:alternativePath ( ex:p ex:q ) ]",
]
TARGETS = [
    "sh:targetClass ex:A",
    "sh:targetClass ex:B",
    # a target node absent from the data with a zero-length path is a known disagreement (the
    # xfail tests below): the generator names target nodes the data holds
    "sh:targetNode ex:n0, ex:n2",
    'sh:targetNode "x"',
    "sh:targetSubjectsOf ex:p",
    "sh:targetObjectsOf ex:p",
    "sh:targetObjectsOf ex:r",
]
#: Parameters pySHACL allows once per shape (it refuses a second sh:minCount, say).
_ONCE = {"sh:minCount", "sh:maxCount", "sh:datatype", "sh:nodeKind", "sh:in"}

terms = st.sampled_from(TERMS)
paths = st.sampled_from(PATHS)
value_checks = st.one_of(
    terms.map(lambda v: f"sh:hasValue {v}"),
    st.sampled_from(CLASSES).map(lambda c: f"sh:class {c}"),
    st.lists(terms, min_size=1, max_size=3, unique=True).map(lambda xs: f"sh:in ( {' '.join(xs)} )"),
    st.sampled_from(["xsd:integer", "xsd:string", "rdf:langString"]).map(lambda d: f"sh:datatype {d}"),
    st.sampled_from(["sh:IRI", "sh:Literal", "sh:BlankNode"]).map(lambda k: f"sh:nodeKind {k}"),
)
counts = st.one_of(
    st.integers(0, 2).map(lambda n: f"sh:minCount {n}"), st.integers(0, 2).map(lambda n: f"sh:maxCount {n}")
)


def _shape(constraints: list[str], path: str | None, deactivated: bool) -> str:
    parts = ([f"sh:path {path}"] if path is not None else []) + constraints
    return "[ " + " ; ".join(parts + (["sh:deactivated true"] if deactivated else [])) + " ]"


def _is_property(shape: str) -> bool:
    return shape == "ex:HP" or shape.startswith("[ sh:path")


@st.composite
def shapes(draw, depth: int) -> str:
    """A node or property shape, as the Turtle of a blank node (or a named helper shape's IRI)."""
    is_property = draw(st.booleans())
    if draw(st.integers(0, 7)) == 0:
        return "ex:HP" if is_property else "ex:HN"
    path = draw(paths) if is_property else None
    deactivated = draw(st.integers(0, 9)) == 0
    special = draw(st.integers(0, 5))
    if is_property and special == 0:  # a hasValue on a path, alone: it narrows an sh:or's focus
        return _shape([f"sh:hasValue {draw(terms)}"], path, deactivated)
    if special == 1:  # the sh:not of one: it narrows an sh:or's focus too
        inner = _shape([f"sh:hasValue {draw(terms)}"], draw(paths), draw(st.integers(0, 9)) == 0)
        return _shape([f"sh:not {inner}"], None, deactivated)
    constraints: list[str] = []
    for _ in range(draw(st.integers(1, 2))):
        choices = [value_checks] + ([counts] if is_property else [])
        if depth > 0:
            choices.append(logical(depth - 1))
        constraint = draw(st.one_of(*choices))
        if constraint.split()[0] not in _ONCE or all(c.split()[0] != constraint.split()[0] for c in constraints):
            constraints.append(constraint)
    return _shape(constraints, path, deactivated)


@st.composite
def logical(draw, depth: int) -> str:
    kind = draw(st.sampled_from(["or", "or", "and", "not", "not", "xone", "node", "property"]))
    if kind in ("or", "and", "xone"):
        members = draw(st.lists(shapes(depth), min_size=1, max_size=3))
        return f"sh:{kind} ( {' '.join(members)} )"
    member = draw(shapes(depth))
    if kind == "property" and not _is_property(member):  # pySHACL: sh:property names a property shape
        member = "ex:HP" if member == "ex:HN" else "[ sh:path ex:p ; " + member[2:]
    if kind == "node" and _is_property(member):  # and sh:node a node shape
        member = f"[ sh:and ( {member} ) ]"
    return f"sh:{kind} {member}"


@st.composite
def shapes_graphs(draw) -> str:
    node_helper = draw(shapes(1).filter(lambda t: t.startswith("[ ") and not _is_property(t)))
    property_helper = draw(shapes(1).filter(lambda t: t.startswith("[ sh:path")))
    lines = [
        f"ex:HN a sh:NodeShape ; {node_helper[2:-2]} .",
        f"ex:HP a sh:PropertyShape ; {property_helper[2:-2]} .",
    ]
    for i in range(draw(st.integers(1, 2))):
        is_property = draw(st.integers(0, 2)) == 0
        body = [f"sh:path {draw(paths)}"] if is_property else []
        body += draw(st.lists(st.sampled_from(TARGETS), min_size=1, max_size=2, unique=True))
        body += [draw(logical(2)) for _ in range(draw(st.integers(1, 2)))]
        if draw(st.integers(0, 12)) == 0:
            body.append("sh:deactivated true")
        kind = "sh:PropertyShape" if is_property else "sh:NodeShape"
        lines.append(f"ex:S{i} a {kind} ;\n  " + " ;\n  ".join(body) + " .")
    return "\n".join(lines)


values = st.sampled_from(NODES + BLANKS + LITERALS)


@st.composite
def data_graphs(draw) -> str:
    # every target node is in the data (see TARGETS and KNOWN_ZERO_LENGTH_GAP)
    lines = ['ex:n3 ex:q "x" .', "ex:n0 a ex:Seen .", "ex:n2 a ex:Seen ."]
    for subject in NODES[:4] + BLANKS:
        for cls in CLASSES:
            if draw(st.booleans()):
                lines.append(f"{subject} a {cls} .")
        for predicate in PREDICATES:
            for value in draw(st.lists(values, max_size=3, unique=True)):
                if predicate != "ex:r" or value in NODES + BLANKS:  # ex:r links nodes, for the paths
                    lines.append(f"{subject} {predicate} {value} .")
    return "\n".join(lines)


# derandomize: the same examples on every run (a suite with a random seed must not pass one run and
# fail the next); a longer search with other seeds is a separate, opt-in run.
@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck), database=None, derandomize=True)
@given(shapes=shapes_graphs(), data=data_graphs())
def test_the_engines_agree_on_generated_logical_constraints(shapes: str, data: str) -> None:
    assert_agree(shapes, data)


# ------------------------------------------------------------------------ the disagreements, minimal

NESTED_DATA = "ex:a ex:p ex:b .\n"  # ex:b has no ex:q: ex:a's value fails [ sh:path ex:q ; sh:minCount 1 ]


def test_a_property_shape_with_a_nested_property_shape_fails_its_focus_node_under_sh_node() -> None:
    """The bug: a node shape reached by sh:node is judged by composing its members' failing nodes, and
    the failing nodes of its property shape ``[ sh:path ex:p ; sh:property [ sh:path ex:q ; sh:minCount
    1 ] ]`` are taken from the nested results, whose focus is the *value* node ex:b, not ex:a. Since the
    composed sets (27776d1) the sparql engine reports sh:node failing at ex:b, a node that is no focus
    node of ex:S at all; before them it reported nothing. pySHACL reports ex:a.
    The rule: a shape's failing nodes are the focus nodes it was asked about; a property shape fails a
    focus node when one of its value nodes fails the nested property shape."""
    shapes = """
ex:S a sh:NodeShape ; sh:targetNode ex:a ;
  sh:node [ sh:property [ sh:path ex:p ; sh:property [ sh:path ex:q ; sh:minCount 1 ] ] ] .
"""
    sparql, reference = both(shapes, NESTED_DATA)
    assert reference == {one("Node", f"<{EX}a>", f"<{EX}a>")}
    assert sparql == reference


def test_a_property_shape_with_a_nested_property_shape_is_a_member_of_sh_or_sh_not_and_sh_xone() -> None:
    """The bug: as a member of sh:or, sh:not or sh:xone the property shape ``[ sh:path ex:p ; sh:property
    [ sh:path ex:q ; sh:minCount 1 ] ]`` is taken to fail only ex:b (the focus of the nested result),
    so ex:a passes it: sh:or is satisfied and sh:not and sh:xone are not (the opposite of pySHACL).
    Older than the composed sets.
    The rule: the member fails ex:a, because ex:a's value ex:b fails the nested property shape."""
    member = "[ sh:path ex:p ; sh:property [ sh:path ex:q ; sh:minCount 1 ] ]"
    for constraint, expected in (
        (f"sh:or ( {member} [ sh:path ex:r ; sh:minCount 1 ] )", {one("Or", f"<{EX}a>", f"<{EX}a>")}),
        (f"sh:not {member}", set()),
        (f"sh:xone ( {member} [ sh:path ex:p ; sh:minCount 1 ] )", set()),
    ):
        shapes = f"ex:S a sh:NodeShape ; sh:targetNode ex:a ; {constraint} .\n"
        sparql, reference = both(shapes, NESTED_DATA)
        assert reference == expected, constraint
        assert sparql == reference, constraint


#: A known disagreement with pySHACL, older than the composed sets: not fixed yet.
KNOWN_ZERO_LENGTH_GAP = pytest.mark.xfail(
    strict=True,
    reason="known: the store binds no zero-length path step for a node absent from the data (SPARQL's "
    "bottom-up evaluation), where SHACL takes the focus node itself as a value node; not fixed yet",
)


@KNOWN_ZERO_LENGTH_GAP
def test_a_zero_length_path_reaches_a_target_node_absent_from_the_data() -> None:
    """The bug: a path of sh:zeroOrMorePath (or sh:zeroOrOnePath) reaches the focus node itself, but
    the store's zero-length path matches only terms that occur in the data graph: for a sh:targetNode
    that does not occur (ex:out, the literal "x") the sparql engine finds no value node, so
    ``sh:minCount 1`` fails, ``sh:hasValue`` of the node itself fails, and an sh:or whose member is
    ``[ sh:path [ sh:zeroOrMorePath ex:r ] ; sh:hasValue ex:out ]`` (the narrowing MINUS of the
    composed sh:or) fails too. pySHACL reports none of these. Older than the composed sets.
    The rule: the value nodes of a zero-or-more (zero-or-one) path always include the focus node."""
    data = "ex:n1 ex:p ex:n2 .\n"
    for shapes in (
        "ex:S a sh:NodeShape ; sh:targetNode ex:out ;\n"
        "  sh:property [ sh:path [ sh:zeroOrMorePath ex:r ] ; sh:minCount 1 ] .\n",
        'ex:S a sh:NodeShape ; sh:targetNode "x" ;\n'
        '  sh:property [ sh:path [ sh:zeroOrOnePath ex:r ] ; sh:hasValue "x" ] .\n',
        "ex:S a sh:NodeShape ; sh:targetNode ex:out ;\n"
        "  sh:or ( [ sh:path [ sh:zeroOrMorePath ex:r ] ; sh:hasValue ex:out ] [ sh:path ex:p ; sh:minCount 1 ] ) .\n",
    ):
        sparql, reference = both(shapes, data)
        assert reference == set(), shapes
        assert sparql == reference, shapes


@KNOWN_ZERO_LENGTH_GAP
def test_a_zero_length_path_member_of_sh_or_judges_a_target_node_absent_from_the_data() -> None:
    """The bug: ``[ sh:path [ sh:zeroOrMorePath ex:r ] ; sh:class ex:A ]`` has the value node ex:out
    for the focus node ex:out (zero steps), which is no ex:A, so the member fails and so does the
    sh:or; the sparql engine finds no value node for ex:out (absent from the data graph) and lets it
    pass. Older than the composed sets.
    The rule: as above, the focus node is a value node of a zero-or-more path, in the data or not."""
    shapes = (
        "ex:S a sh:NodeShape ; sh:targetNode ex:out ;\n"
        "  sh:or ( [ sh:path [ sh:zeroOrMorePath ex:r ] ; sh:class ex:A ] ) .\n"
    )
    sparql, reference = both(shapes, "ex:n1 a ex:A .\n")
    assert reference == {one("Or", f"<{EX}out>", f"<{EX}out>")}
    assert sparql == reference


def test_the_pyshacl_engine_reports_only_the_results_of_the_report_not_their_sh_detail(tmp_path) -> None:
    """The bug: for sh:node pySHACL attaches the nested shape's own results to the sh:NodeConstraintComponent
    result as sh:detail; sotakg's ``pyshacl_engine`` (validate --engine pyshacl) reads every subject of
    type sh:ValidationResult, so it reports the nested sh:hasValue failure as a finding of its own, one
    the sparql engine (rightly) does not report: the two engines disagree on any failing sh:node.
    The rule: the findings are the report's sh:result values; a sh:detail explains one, it is not one."""
    from sotakg.rules.validate import pyshacl_engine, sparql_engine

    shapes = tmp_path / "shapes.ttl"
    shapes.write_text(PREFIXES + "ex:S a sh:NodeShape ; sh:targetNode ex:a ; sh:node [ sh:hasValue ex:n0 ] .\n")
    store = Store()
    store.load(b"<http://example.org/a> <http://example.org/p> 1 .", format=RdfFormat.TURTLE)
    expected = [(f"{EX}a", None, f"<{EX}a>", f"{EX}S")]
    assert [(r.focus, r.path, r.value, r.source_shape) for r in sparql_engine(store, [shapes])] == expected
    assert [(r.focus, r.path, r.value, r.source_shape) for r in pyshacl_engine(store, [shapes])] == expected
