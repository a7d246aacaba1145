"""SHACL shapes compiled to SPARQL and run on a pyoxigraph Store, a whole set of focus nodes at a time.

pySHACL walks the data graph node by node and runs every SHACL-SPARQL constraint once per focus node,
which is what makes it slow on large graphs. Here each constraint of each shape becomes ONE SPARQL query
that binds ``?this`` to all of the shape's focus nodes at once (the targets, or the value nodes of an
enclosing shape, written as a subquery), so the store's own join machinery does the work. Logical
components (``sh:not``, ``sh:and``, ``sh:or``, ``sh:xone``, ``sh:node``) and qualified value shapes are
evaluated set-at-a-time too: the nested shape is validated once over all the value nodes it must judge,
and the sets of nodes that fail it are combined in Python.

SPARQL-based constraint components declared in the shapes graph (``sh:ConstraintComponent`` with ASK or
SELECT validators) are compiled the same way: an ASK validator becomes one query over all value nodes.

What is not implemented raises :class:`~sotakg.errors.UnsupportedShape` naming the shape and the feature
(never a silent skip), so a caller can fall back to pySHACL or fail loudly. A shapes graph that is not
well-formed SHACL raises :class:`~sotakg.errors.ShapesError`.

Known limits that come from pyoxigraph's store rather than from SHACL: the store rewrites literals of the
types derived from ``xsd:integer`` (``xsd:int``, ``xsd:byte``, ...) to ``xsd:integer`` and
``xsd:dateTimeStamp`` to ``xsd:dateTime``, and keeps valid numbers in canonical form (``"01"`` becomes
``"1"``). So ``sh:datatype`` with one of those derived types is refused as unsupported, and
``sh:pattern``/``sh:minLength`` see canonical lexical forms of valid typed literals.

Only pyoxigraph is imported: no rdflib, no pySHACL.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Union

from pyoxigraph import BlankNode, DefaultGraph, Literal, NamedNode, Quad, RdfFormat, Store, Triple, parse

from ..errors import ShapesError, UnsupportedShape
from ..graph.vocab import OWL, PREFIXES, RDF, RDFS, SH, XSD

Term = Union[NamedNode, BlankNode, Literal]  # noqa: UP007 (pyoxigraph classes as a runtime alias)

RDF_TYPE = RDF + "type"
RDF_FIRST = RDF + "first"
RDF_REST = RDF + "rest"
RDF_NIL = RDF + "nil"
RDFS_CLASS = RDFS + "Class"
RDFS_SUBCLASS_OF = RDFS + "subClassOf"

VIOLATION = SH + "Violation"
WARNING = SH + "Warning"
INFO = SH + "Info"

_TARGETS = ("targetClass", "targetNode", "targetSubjectsOf", "targetObjectsOf")
# A node may be both a shape and the SPARQL constraint of one, hence select/prefixes/declare.
_ANNOTATIONS = tuple(
    """path severity message deactivated name description order group defaultValue
    select prefixes declare""".split()
)
_COMPONENT_PARAMETERS = tuple(
    """class datatype nodeKind minCount maxCount minExclusive minInclusive maxExclusive maxInclusive minLength
    maxLength pattern flags languageIn uniqueLang in hasValue equals disjoint lessThan lessThanOrEquals closed
    ignoredProperties not and or xone node property qualifiedValueShape qualifiedMinCount qualifiedMaxCount
    qualifiedValueShapesDisjoint sparql""".split()
)
#: Predicates of the SHACL namespace a shape may carry; any other ``sh:`` predicate is refused.
KNOWN_SHAPE_PREDICATES = frozenset(SH + name for name in (*_TARGETS, *_ANNOTATIONS, *_COMPONENT_PARAMETERS))

#: Components that SHACL allows on property shapes only.
_PROPERTY_ONLY = ("minCount", "maxCount", "uniqueLang", "lessThan", "lessThanOrEquals", "qualifiedValueShape")

#: Datatypes pyoxigraph's store rewrites on load, so that a value's declared datatype is lost.
NORMALISED_DATATYPES = frozenset(
    XSD + name
    for name in """int long short byte unsignedInt unsignedLong unsignedShort unsignedByte nonNegativeInteger
    positiveInteger negativeInteger nonPositiveInteger dateTimeStamp""".split()
)
#: Datatypes whose SPARQL cast function fails on an ill-formed lexical form (a valid one is kept as is).
CASTABLE_DATATYPES = frozenset(
    XSD + name
    for name in """integer decimal float double boolean date dateTime time gYear gYearMonth gMonth gDay
    gMonthDay duration dayTimeDuration yearMonthDuration""".split()
)

_PREDICATE_PATH = re.compile(r"\^?<[^>]*>")
#: A path from a node to an object of a predicate and back to every subject of that object.
_SHARED_OBJECT_PATH = re.compile(r"\((<[^>]*>)/\^\1\)")

#: Constraint kinds that judge each value node on its own; a shape's are checked in one query.
VALUE_CHECKS = frozenset({"class", "datatype", "nodeKind", "range", "length", "pattern", "languageIn", "in"})

_NODE_KINDS = {
    SH + "IRI": "isIRI(?value)",
    SH + "BlankNode": "isBlank(?value)",
    SH + "Literal": "isLiteral(?value)",
    SH + "BlankNodeOrIRI": "(isBlank(?value) || isIRI(?value))",
    SH + "BlankNodeOrLiteral": "(isBlank(?value) || isLiteral(?value))",
    SH + "IRIOrLiteral": "(isIRI(?value) || isLiteral(?value))",
}


# ------------------------------------------------------------------------------------------ results


@dataclass(frozen=True)
class ValidationResult:
    """One SHACL validation result.

    ``path`` is the result path as an IRI string for a predicate path, as SPARQL property-path text
    (``(^<p>/<q>)``) for a complex one, or None. ``source_shape`` and ``source_constraint`` are IRIs, or
    ``_:id`` for blank nodes. ``component`` and ``severity`` are IRIs. ``root_shape`` names the targeted
    shape whose validation produced the result (the named shape a blank property shape belongs to, say);
    when two targeted shapes produce the same result, it is kept once, under the first root by name.
    """

    focus: Term
    path: str | None
    value: Term | None
    source_shape: str
    component: str
    severity: str
    messages: tuple[str, ...] = ()
    source_constraint: str | None = None
    root_shape: str = ""

    def sort_key(self) -> tuple[str, ...]:
        return (
            str(self.focus),
            self.source_shape,
            self.component,
            self.path or "",
            "" if self.value is None else str(self.value),
            self.severity,
            self.source_constraint or "",
            "\0".join(self.messages),
        )


@dataclass(frozen=True)
class ValidationReport:
    """The results of a validation, sorted.

    ``conforms`` means what it means for ``sotakg validate`` (its exit status and its JSON report's
    ``"conforms"``): no result of severity sh:Violation, warnings and infos allowed. ``shacl_conforms``
    is the SHACL specification's sh:conforms: no result of any severity.
    """

    results: tuple[ValidationResult, ...]

    @property
    def conforms(self) -> bool:
        """No violations (results of severity sh:Warning or sh:Info may remain)."""
        return not any(result.severity == VIOLATION for result in self.results)

    @property
    def shacl_conforms(self) -> bool:
        """sh:conforms as the SHACL specification defines it: no validation result at all."""
        return not self.results


# ------------------------------------------------------------------------------------- shapes graph


def node_id(node: Term) -> str:
    """A shape's or constraint's name in results: its IRI, or ``_:id`` for a blank node."""
    if isinstance(node, NamedNode):
        return node.value
    if isinstance(node, BlankNode):
        return f"_:{node.value}"
    return str(node)


class ShapesGraph:
    """The triples of a shapes graph, indexed for the lookups compiling needs (shapes graphs are small)."""

    def __init__(self, triples: Iterable[Triple | Quad]):
        self._out: dict[Term, dict[str, list[Term]]] = defaultdict(lambda: defaultdict(list))
        self._in: dict[Term, dict[str, list[Term]]] = defaultdict(lambda: defaultdict(list))
        for triple in triples:
            subject, predicate, obj = triple.subject, triple.predicate.value, triple.object
            if not isinstance(subject, (NamedNode, BlankNode)) or not isinstance(obj, (NamedNode, BlankNode, Literal)):
                continue
            self._out[subject][predicate].append(obj)
            self._in[obj][predicate].append(subject)

    @classmethod
    def parse(
        cls, source: str | bytes | Path, format: RdfFormat = RdfFormat.TURTLE, base_iri: str | None = None
    ) -> ShapesGraph:
        """Parse Turtle (or ``format``) text, or a file, or every ``*.ttl`` file of a folder."""
        if isinstance(source, Path):
            files = sorted(source.glob("*.ttl")) if source.is_dir() else [source]
            triples: list[Triple | Quad] = []
            for file in files:
                # Blank node labels are local to a file: keep two files' _:x apart.
                base = base_iri or file.resolve().as_uri()
                triples.extend(parse(path=str(file), format=format, base_iri=base, rename_blank_nodes=True))
            return cls(triples)
        return cls(parse(source, format=format, base_iri=base_iri))

    @classmethod
    def from_store(cls, store: Store) -> ShapesGraph:
        """The default graph of a store as a shapes graph."""
        return cls(store.quads_for_pattern(None, None, None, DefaultGraph()))

    def objects(self, node: Term, predicate: str) -> list[Term]:
        return list(self._out.get(node, {}).get(predicate, ()))

    def subjects(self, predicate: str, obj: Term) -> list[Term]:
        return list(self._in.get(obj, {}).get(predicate, ()))

    def predicates(self, node: Term) -> list[str]:
        return list(self._out.get(node, {}))

    def subjects_with(self, predicate: str) -> list[Term]:
        return [s for s, props in self._out.items() if predicate in props]

    def has_type(self, node: Term, class_iri: str) -> bool:
        """Whether ``node`` is a SHACL instance of ``class_iri`` (rdf:type/rdfs:subClassOf* in this graph)."""
        for direct in self.objects(node, RDF_TYPE):
            if class_iri in {c.value for c in self.superclasses(direct) if isinstance(c, NamedNode)}:
                return True
        return False

    def superclasses(self, node: Term) -> set[Term]:
        """``node`` and its superclasses in this graph."""
        seen = {node}
        work = [node]
        while work:
            for parent in self.objects(work.pop(), RDFS_SUBCLASS_OF):
                if parent not in seen:
                    seen.add(parent)
                    work.append(parent)
        return seen

    def instances(self, class_iri: str) -> list[Term]:
        """SHACL instances of ``class_iri``: rdf:type one of its subclasses in this graph."""
        classes: set[Term] = {NamedNode(class_iri)}
        work: list[Term] = [NamedNode(class_iri)]
        while work:
            for sub in self.subjects(RDFS_SUBCLASS_OF, work.pop()):
                if sub not in classes:
                    classes.add(sub)
                    work.append(sub)
        found: dict[Term, None] = {}
        for cls in classes:
            for instance in self.subjects(RDF_TYPE, cls):
                found[instance] = None
        return list(found)

    def list_items(self, node: Term, owner: str) -> list[Term]:
        """The members of the RDF list at ``node``; ShapesError if it is not a well-formed list."""
        items: list[Term] = []
        seen: set[Term] = set()
        while not (isinstance(node, NamedNode) and node.value == RDF_NIL):
            firsts, rests = self.objects(node, RDF_FIRST), self.objects(node, RDF_REST)
            if len(firsts) != 1 or len(rests) != 1 or node in seen:
                raise ShapesError(f"{owner}: {node_id(node)} is not a well-formed RDF list")
            seen.add(node)
            items.append(firsts[0])
            node = rests[0]
        return items


# ------------------------------------------------------------------------------------ compiled form


@dataclass(eq=False)
class Constraint:
    """One constraint of a shape: a component with its parameter values."""

    component: str
    kind: str
    args: dict[str, object]
    message: str = ""
    source: Term | None = None


@dataclass(frozen=True)
class _Component:
    """A SPARQL-based constraint component declared in the shapes graph."""

    node: Term
    name: str
    parameters: list[tuple[str, bool]]  # (parameter path IRI, optional)
    validator: Term | None
    node_validator: Term | None
    property_validator: Term | None


def _local_name(iri: str) -> str:
    """The variable a parameter binds: the local name of its path (after the last '#' or '/')."""
    return re.split(r"[#/:]", iri)[-1]


@dataclass(eq=False)
class Shape:
    """A shape as the evaluator needs it."""

    node: Term
    name: str
    path: str | None = None
    path_iri: str | None = None
    #: (kind, SPARQL text): ("class", IRI), ("nodes", terms), ("subjectsOf", IRI), ("objectsOf", IRI)
    targets: list[tuple[str, str]] = field(default_factory=list)
    severity: str = VIOLATION
    messages: tuple[str, ...] = ()
    deactivated: bool = False
    constraints: list[Constraint] = field(default_factory=list)

    @property
    def is_property(self) -> bool:
        return self.path is not None

    @property
    def result_path(self) -> str | None:
        return self.path_iri if self.path_iri is not None else self.path


def term_text(term: Term, shape: str, what: str) -> str:
    """An RDF term as SPARQL text (pyoxigraph's N-Triples form, which escapes everything it must)."""
    if isinstance(term, BlankNode):
        raise UnsupportedShape(shape, what, "a blank node cannot be written into a query")
    return str(term)


def _display(term: Term | None) -> str:
    """A term as a message shows it: an IRI as prefix:name where a known prefix fits."""
    if term is None:
        return ""
    if isinstance(term, NamedNode):
        for prefix, namespace in (*PREFIXES.items(), ("sh", SH)):
            if term.value.startswith(namespace) and re.fullmatch(r"[A-Za-z0-9_\-]*", term.value[len(namespace) :]):
                return f"{prefix}:{term.value[len(namespace) :]}"
        return f"<{term.value}>"
    if isinstance(term, Literal):
        return term.value
    return node_id(term)


def _template_value(term: Term) -> str:
    """A term as it replaces ``{?var}`` in a message template (pySHACL's convention: the plain value)."""
    if isinstance(term, BlankNode):
        return node_id(term)
    return term.value


def fill_template(message: str, bindings: dict[str, Term]) -> str:
    """Replace ``{?name}`` and ``{$name}`` with the bound terms; unbound names stay as written."""

    def replace(match: re.Match[str]) -> str:
        term = bindings.get(match.group(1))
        return match.group(0) if term is None else _template_value(term)

    return re.sub(r"\{[?$]([A-Za-z_][A-Za-z0-9_]*)\}", replace, message)


class _Compiler:
    """Reads shapes out of a shapes graph into :class:`Shape` objects, refusing what it cannot run."""

    def __init__(self, graph: ShapesGraph):
        self.graph = graph
        self.shapes: dict[Term, Shape] = {}
        self._components = self._custom_components()

    def _custom_components(self) -> list[_Component]:
        """The SPARQL-based constraint components declared in the shapes graph."""
        found = []
        for node in self.graph.instances(SH + "ConstraintComponent"):
            if isinstance(node, NamedNode) and node.value.startswith(SH):
                continue  # SHACL's own components, should the vocabulary be loaded
            parameters = []
            for parameter in self.graph.objects(node, SH + "parameter"):
                paths = self.graph.objects(parameter, SH + "path")
                if len(paths) != 1 or not isinstance(paths[0], NamedNode):
                    raise ShapesError(f"constraint component {node_id(node)}: a parameter needs one IRI sh:path")
                optional = self.graph.objects(parameter, SH + "optional")
                parameters.append((paths[0].value, bool(optional) and optional[0].value == "true"))
            if not parameters:
                raise ShapesError(f"constraint component {node_id(node)} has no sh:parameter")

            def one(predicate: str, node: Term = node) -> Term | None:
                values = self.graph.objects(node, SH + predicate)
                return values[0] if values else None

            found.append(
                _Component(
                    node,
                    node_id(node),
                    parameters,
                    one("validator"),
                    one("nodeValidator"),
                    one("propertyValidator"),
                )
            )
        return found

    def shape_nodes(self) -> list[Term]:
        """Every node the shapes graph declares or uses as a shape."""
        nodes: dict[Term, None] = {}
        for kind in ("NodeShape", "PropertyShape"):
            for node in self.graph.instances(SH + kind):
                nodes[node] = None
        for target in (*_TARGETS, "target"):
            for node in self.graph.subjects_with(SH + target):
                nodes[node] = None
        return list(nodes)

    def compile(self) -> list[Shape]:
        for node in self.shape_nodes():
            self.shape(node)
        self._check_acyclic()
        return list(self.shapes.values())

    # -- one shape

    def shape(self, node: Term) -> Shape:
        existing = self.shapes.get(node)
        if existing is not None:
            return existing
        if isinstance(node, Literal):
            raise ShapesError(f"a literal ({node}) is used as a shape")
        graph = self.graph
        name = node_id(node)
        shape = Shape(node, name)
        self.shapes[node] = shape
        for predicate in graph.predicates(node):
            if predicate.startswith(SH) and predicate not in KNOWN_SHAPE_PREDICATES:
                raise UnsupportedShape(name, f"sh:{predicate[len(SH) :]}")
        paths = graph.objects(node, SH + "path")
        if len(paths) > 1:
            raise ShapesError(f"shape {name} has {len(paths)} values of sh:path")
        if paths:
            shape.path = self.path_text(paths[0], name)
            if isinstance(paths[0], NamedNode):
                shape.path_iri = paths[0].value
        elif graph.has_type(node, SH + "PropertyShape"):
            raise ShapesError(f"property shape {name} has no sh:path")
        shape.targets = self._targets(node, name)
        severities = graph.objects(node, SH + "severity")
        if len(severities) > 1 or (severities and not isinstance(severities[0], NamedNode)):
            raise ShapesError(f"shape {name} needs at most one IRI as sh:severity")
        if severities:
            shape.severity = severities[0].value
        shape.messages = tuple(m.value for m in graph.objects(node, SH + "message") if isinstance(m, Literal))
        shape.deactivated = self._boolean(node, "deactivated", name)
        shape.constraints = self._constraints(shape)
        return shape

    def _boolean(self, node: Term, parameter: str, name: str) -> bool:
        values = self.graph.objects(node, SH + parameter)
        if not values:
            return False
        if len(values) > 1:
            raise ShapesError(f"shape {name}: sh:{parameter} must be one boolean")
        # Only the literal true switches a boolean parameter on ("1"^^xsd:boolean does not, per the suite).
        return values[0] == Literal("true", datatype=NamedNode(XSD + "boolean"))

    def _integer(self, term: Term, parameter: str, name: str) -> int:
        if not isinstance(term, Literal) or not re.fullmatch(r"[+-]?[0-9]+", term.value):
            raise ShapesError(f"shape {name}: sh:{parameter} must be an integer, not {term}")
        return int(term.value)

    def _iri(self, term: Term, parameter: str, name: str) -> str:
        if not isinstance(term, NamedNode):
            raise ShapesError(f"shape {name}: sh:{parameter} must be an IRI, not {term}")
        return term.value

    def path_text(self, node: Term, name: str, depth: int = 0) -> str:
        """A SHACL property path as SPARQL property-path text."""
        if depth > 64:
            raise ShapesError(f"shape {name}: sh:path nests too deeply (a cycle?)")
        graph = self.graph
        if isinstance(node, NamedNode):
            return f"<{node.value}>"
        if isinstance(node, Literal):
            raise ShapesError(f"shape {name}: a literal is not a path")
        if graph.objects(node, RDF_FIRST):
            items = graph.list_items(node, f"shape {name}")
            if len(items) < 2:
                raise ShapesError(f"shape {name}: a sequence path needs at least two members")
            return "(" + "/".join(self.path_text(item, name, depth + 1) for item in items) + ")"
        kinds = {
            "inversePath": ("^", ""),
            "zeroOrMorePath": ("", "*"),
            "oneOrMorePath": ("", "+"),
            "zeroOrOnePath": ("", "?"),
        }
        for kind, (before, after) in kinds.items():
            values = graph.objects(node, SH + kind)
            if len(values) == 1:
                inner = self.path_text(values[0], name, depth + 1)
                wrapped = inner if inner.startswith(("<", "(")) else f"({inner})"
                return f"{before}{wrapped}{after}" if before else f"({inner}){after}"
        alternatives = graph.objects(node, SH + "alternativePath")
        if len(alternatives) == 1:
            items = graph.list_items(alternatives[0], f"shape {name}")
            if len(items) < 2:
                raise ShapesError(f"shape {name}: an alternative path needs at least two members")
            return "(" + "|".join(self.path_text(item, name, depth + 1) for item in items) + ")"
        raise ShapesError(f"shape {name}: {node_id(node)} is not a well-formed SHACL path")

    def _targets(self, node: Term, name: str) -> list[tuple[str, str]]:
        graph = self.graph
        patterns: list[tuple[str, str]] = []
        if graph.objects(node, SH + "target"):
            raise UnsupportedShape(name, "sh:target", "SHACL-AF custom targets are not implemented")
        classes = [self._iri(c, "targetClass", name) for c in graph.objects(node, SH + "targetClass")]
        if (
            isinstance(node, NamedNode)
            and graph.has_type(node, RDFS_CLASS)
            and (graph.has_type(node, SH + "NodeShape") or graph.has_type(node, SH + "PropertyShape"))
        ):
            classes.append(node.value)
        for iri in dict.fromkeys(classes):
            patterns.append(("class", iri))
        nodes = [term_text(n, name, "a blank node as sh:targetNode") for n in graph.objects(node, SH + "targetNode")]
        if nodes:
            patterns.append(("nodes", " ".join(dict.fromkeys(nodes))))
        for predicate in graph.objects(node, SH + "targetSubjectsOf"):
            patterns.append(("subjectsOf", self._iri(predicate, "targetSubjectsOf", name)))
        for predicate in graph.objects(node, SH + "targetObjectsOf"):
            patterns.append(("objectsOf", self._iri(predicate, "targetObjectsOf", name)))
        return patterns

    # -- constraints

    def _constraints(self, shape: Shape) -> list[Constraint]:
        graph, node, name = self.graph, shape.node, shape.name
        constraints: list[Constraint] = []

        def values(parameter: str) -> list[Term]:
            return graph.objects(node, SH + parameter)

        def add(parameter: str, kind: str, args: dict[str, object], message: str) -> None:
            if parameter in _PROPERTY_ONLY and not shape.is_property:
                raise ShapesError(f"shape {name}: sh:{parameter} is allowed on property shapes only")
            component = SH + parameter[0].upper() + parameter[1:] + "ConstraintComponent"
            constraints.append(Constraint(component, kind, args, message))

        for cls in values("class"):
            add(
                "class",
                "class",
                {"class": self._iri(cls, "class", name)},
                f"Value does not have class {_display(cls)}",
            )
        for datatype in values("datatype"):
            iri = self._iri(datatype, "datatype", name)
            if iri in NORMALISED_DATATYPES:
                raise UnsupportedShape(
                    name,
                    f"sh:datatype {_display(datatype)}",
                    "pyoxigraph's store rewrites such literals to their base type, so it cannot be checked",
                )
            add(
                "datatype",
                "datatype",
                {"datatype": iri},
                f"Value is not a literal of datatype {_display(datatype)}",
            )
        for kind in values("nodeKind"):
            if not isinstance(kind, NamedNode) or kind.value not in _NODE_KINDS:
                raise ShapesError(f"shape {name}: sh:nodeKind {kind} is not a SHACL node kind")
            add(
                "nodeKind",
                "nodeKind",
                {"test": _NODE_KINDS[kind.value]},
                f"Value is not of node kind {_display(kind)}",
            )
        for count in values("minCount"):
            n = self._integer(count, "minCount", name)
            add("minCount", "minCount", {"n": n}, f"Fewer than {n} values")
        for count in values("maxCount"):
            n = self._integer(count, "maxCount", name)
            add("maxCount", "maxCount", {"n": n}, f"More than {n} values")
        for parameter, operator in (
            ("minExclusive", ">"),
            ("minInclusive", ">="),
            ("maxExclusive", "<"),
            ("maxInclusive", "<="),
        ):
            for bound in values(parameter):
                if not isinstance(bound, Literal):
                    raise ShapesError(f"shape {name}: sh:{parameter} must be a literal")
                add(
                    parameter,
                    "range",
                    {"operator": operator, "bound": str(bound)},
                    f"Value is not {operator} {bound.value}",
                )
        for parameter, operator, words in (("minLength", ">=", "fewer"), ("maxLength", "<=", "more")):
            for length in values(parameter):
                n = self._integer(length, parameter, name)
                add(
                    parameter,
                    "length",
                    {"operator": operator, "n": n},
                    f"Value has {words} than {n} characters",
                )
        flags = values("flags")
        if len(flags) > 1 or (flags and not isinstance(flags[0], Literal)):
            raise ShapesError(f"shape {name}: sh:flags must be one string")
        for pattern in values("pattern"):
            if not isinstance(pattern, Literal):
                raise ShapesError(f"shape {name}: sh:pattern must be a string")
            flag_text = str(Literal(flags[0].value)) if flags else '""'
            add(
                "pattern",
                "pattern",
                {"pattern": str(Literal(pattern.value)), "flags": flag_text},
                f'Value does not match pattern "{pattern.value}"',
            )
        for languages in values("languageIn"):
            tags = graph.list_items(languages, f"shape {name}")
            if not all(isinstance(tag, Literal) for tag in tags):
                raise ShapesError(f"shape {name}: sh:languageIn must list strings")
            add(
                "languageIn",
                "languageIn",
                {"tags": [str(Literal(t.value)) for t in tags]},
                "Language tag is not one of " + ", ".join(t.value for t in tags),
            )
        if self._boolean(node, "uniqueLang", name):
            add("uniqueLang", "uniqueLang", {}, "More than one value has the language tag {?lang}")
        for members in values("in"):
            items = graph.list_items(members, f"shape {name}")
            texts = [term_text(item, name, "a blank node in sh:in") for item in items]
            add("in", "in", {"items": texts}, "Value is not one of " + ", ".join(_display(i) for i in items))
        for value in values("hasValue"):
            add(
                "hasValue",
                "hasValue",
                {"value": term_text(value, name, "a blank node as sh:hasValue")},
                f"Missing expected value {_display(value)}",
            )
        for parameter, words in (
            ("equals", "differs from the values of"),
            ("disjoint", "is also a value of"),
            ("lessThan", "is not less than the value of"),
            ("lessThanOrEquals", "is not less than or equal to the value of"),
        ):
            for other in values(parameter):
                iri = self._iri(other, parameter, name)
                add(parameter, parameter, {"other": iri}, f"Value {words} {_display(other)}")
        if self._boolean(node, "closed", name):
            allowed: list[str] = []
            for child in values("property"):
                for path in graph.objects(child, SH + "path"):
                    if isinstance(path, NamedNode):
                        allowed.append(path.value)
            for ignored in values("ignoredProperties"):
                for item in graph.list_items(ignored, f"shape {name}"):
                    allowed.append(self._iri(item, "ignoredProperties", name))
            add(
                "closed",
                "closed",
                {"allowed": sorted(set(allowed))},
                "Predicate {?path} is not allowed (closed shape)",
            )
        for other in values("not"):
            add(
                "not",
                "not",
                {"shape": self.shape(other)},
                f"Value conforms to {_display(other)}, which it must not",
            )
        for parameter, words in (("and", "every shape"), ("or", "any shape"), ("xone", "exactly one shape")):
            for members in values(parameter):
                shapes = [self.shape(m) for m in graph.list_items(members, f"shape {name}")]
                listed = ", ".join(_display(m.node) for m in shapes)
                add(parameter, parameter, {"shapes": shapes}, f"Value does not conform to {words} of {listed}")
        for other in values("node"):
            add(
                "node",
                "node",
                {"shape": self.shape(other)},
                f"Value does not conform to shape {_display(other)}",
            )
        for child in values("property"):
            constraints.append(Constraint(SH + "PropertyConstraintComponent", "property", {"shape": self.shape(child)}))
        self._qualified(shape, constraints, add)
        for sparql in values("sparql"):
            constraints.extend(self._sparql(shape, sparql))
        for component in self._components:
            constraints.extend(self._custom(shape, component))
        return constraints

    def _custom(self, shape: Shape, component: _Component) -> list[Constraint]:
        """Constraints of a SPARQL-based constraint component, one per combination of parameter values."""
        graph, name = self.graph, shape.name
        values = {path: graph.objects(shape.node, path) for path, _ in component.parameters}
        if any(not values[path] for path, optional in component.parameters if not optional):
            return []  # the shape does not use this component
        if shape.is_property:
            validator = component.property_validator or component.validator
        else:
            validator = component.node_validator or component.validator
        if validator is None:
            return []  # SHACL: without a suitable validator the component is ignored
        combinations: list[dict[str, Term]] = [{}]
        for path, terms in values.items():
            if terms:
                combinations = [{**c, path: t} for c in combinations for t in terms]
        ask = graph.objects(validator, SH + "ask")
        select = graph.objects(validator, SH + "select")
        prefixes = self._prefixes(validator, name)
        messages = tuple(
            m.value
            for source in (validator, component.node)
            for m in graph.objects(source, SH + "message")
            if isinstance(m, Literal)
        )
        constraints = []
        for combination in combinations:
            bound = {_local_name(path): term for path, term in combination.items()}
            constants = {var: term_text(term, name, f"a blank node as ${var}") for var, term in bound.items()}
            if len(ask) == 1 and isinstance(ask[0], Literal):
                kind, query = "ask", rewrite_ask(ask[0].value, shape, prefixes, constants)
            elif len(select) == 1 and isinstance(select[0], Literal) and validator != component.validator:
                kind, query = "sparql", rewrite_select(select[0].value, shape, prefixes, constants)
            else:
                raise ShapesError(
                    f"constraint component {component.name}: validator {node_id(validator)} needs "
                    "one sh:ask (or, as a node or property validator, one sh:select)"
                )
            constraints.append(
                Constraint(component.name, kind, {"query": query, "messages": messages, "parameters": bound})
            )
        return constraints

    def _qualified(
        self,
        shape: Shape,
        constraints: list[Constraint],
        add: Callable[[str, str, dict[str, object], str], None],
    ) -> None:
        graph, node, name = self.graph, shape.node, shape.name
        qualified = graph.objects(node, SH + "qualifiedValueShape")
        minimum = graph.objects(node, SH + "qualifiedMinCount")
        maximum = graph.objects(node, SH + "qualifiedMaxCount")
        if not qualified:
            return  # the counts alone do not make a constraint
        if not shape.is_property:
            raise ShapesError(f"shape {name}: sh:qualifiedValueShape is allowed on property shapes only")
        disjoint = self._boolean(node, "qualifiedValueShapesDisjoint", name)
        siblings: list[Term] = []
        if disjoint:
            for parent in graph.subjects(SH + "property", node):
                for sibling_property in graph.objects(parent, SH + "property"):
                    for sibling in graph.objects(sibling_property, SH + "qualifiedValueShape"):
                        if sibling not in qualified and sibling not in siblings:
                            siblings.append(sibling)
        for value_shape in qualified:
            target = self.shape(value_shape)
            others = [self.shape(s) for s in siblings]
            for bound, parameter, words in (
                (minimum, "qualifiedMinCount", "Fewer"),
                (maximum, "qualifiedMaxCount", "More"),
            ):
                for count in bound:
                    n = self._integer(count, parameter, name)
                    component = SH + parameter[0].upper() + parameter[1:] + "ConstraintComponent"
                    constraints.append(
                        Constraint(
                            component,
                            parameter,
                            {"n": n, "shape": target, "siblings": others},
                            f"{words} than {n} values conform to {_display(value_shape)}",
                        )
                    )

    def _sparql(self, shape: Shape, node: Term) -> list[Constraint]:
        graph, name = self.graph, shape.name
        if self._boolean(node, "deactivated", name):
            return []
        selects = graph.objects(node, SH + "select")
        if len(selects) != 1 or not isinstance(selects[0], Literal):
            if graph.objects(node, SH + "ask"):
                raise UnsupportedShape(name, "sh:ask in sh:sparql", "only SELECT-based constraints are implemented")
            raise ShapesError(f"shape {name}: SPARQL constraint {node_id(node)} needs exactly one sh:select")
        prefixes = self._prefixes(node, name)
        query = rewrite_select(selects[0].value, shape, prefixes)
        messages = [m.value for m in graph.objects(node, SH + "message") if isinstance(m, Literal)]
        args: dict[str, object] = {"query": query, "messages": tuple(messages)}
        steps = self_reachable_steps(selects[0].value, prefixes)
        if steps is not None:
            args["cycle"] = steps
        return [Constraint(SH + "SPARQLConstraintComponent", "sparql", args, source=node)]

    def _prefixes(self, node: Term, name: str) -> dict[str, str]:
        declared: dict[str, str] = {}
        owners = list(self.graph.objects(node, SH + "prefixes"))
        for owner in owners:  # grows: declarations of owl:imports-ed ontologies count too
            for imported in self.graph.objects(owner, OWL + "imports"):
                if imported not in owners:
                    owners.append(imported)
            for declaration in self.graph.objects(owner, SH + "declare"):
                prefix = self.graph.objects(declaration, SH + "prefix")
                namespace = self.graph.objects(declaration, SH + "namespace")
                if len(prefix) != 1 or len(namespace) != 1:
                    raise ShapesError(f"shape {name}: a sh:declare needs one sh:prefix and one sh:namespace")
                declared[prefix[0].value] = namespace[0].value
        return declared

    def _check_acyclic(self) -> None:
        """Refuse recursive shapes (SHACL leaves their meaning undefined)."""

        def children(shape: Shape) -> Iterator[Shape]:
            for constraint in shape.constraints:
                for key in ("shape",):
                    child = constraint.args.get(key)
                    if isinstance(child, Shape):
                        yield child
                for key in ("shapes", "siblings"):
                    members = constraint.args.get(key)
                    if isinstance(members, list):
                        yield from (m for m in members if isinstance(m, Shape))

        state: dict[int, int] = {}  # 1 on the stack, 2 done
        for root in self.shapes.values():
            if state.get(id(root)):
                continue
            stack: list[tuple[Shape, Iterator[Shape]]] = [(root, children(root))]
            state[id(root)] = 1
            while stack:
                current, pending = stack[-1]
                child = next(pending, None)
                if child is None:
                    state[id(current)] = 2
                    stack.pop()
                elif state.get(id(child)) == 1:
                    raise UnsupportedShape(
                        child.name, "a recursive shape reference", "SHACL leaves recursion undefined"
                    )
                elif not state.get(id(child)):
                    state[id(child)] = 1
                    stack.append((child, children(child)))


# -------------------------------------------------------------------------------- SHACL-SPARQL


_TOKEN_RE = re.compile(
    r"""
    (?P<ws>\s+)
  | (?P<comment>\#[^\n]*)
  | (?P<string>\"\"\"(?:[^"\\]|\\.|"(?!""))*\"\"\"|'''(?:[^'\\]|\\.|'(?!''))*'''
               |"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*')
  | (?P<iri><[^<>"{}|^`\\\x00-\x20]*>)
  | (?P<var>[?$][A-Za-z0-9_\u00B7\u00C0-\uFFFF]+)
  | (?P<brace>[{}])
  | (?P<word>[A-Za-z_][A-Za-z0-9_\-]*(?::[^\s{}()<>,;"']*)?)
  | (?P<other>.)
    """,
    re.VERBOSE | re.DOTALL,
)
_AGGREGATES = {"COUNT", "SUM", "MIN", "MAX", "AVG", "SAMPLE", "GROUP_CONCAT"}


@dataclass
class _Token:
    kind: str
    text: str

    @property
    def keyword(self) -> str:
        return self.text.upper() if self.kind == "word" else ""

    @property
    def variable(self) -> str:
        return self.text[1:] if self.kind == "var" else ""


def _tokens(query: str) -> list[_Token]:
    return [_Token(m.lastgroup or "other", m.group()) for m in _TOKEN_RE.finditer(query)]


#: Marks where the focus subquery goes; replaced when the query runs, once the focus nodes are known.
FOCUS_MARK = "#FOCUS#\n"
#: Marks where the value-node pattern of an ASK validator goes.
VALUES_MARK = "#VALUES#\n"


def _substitute(
    query: str, shape: Shape, prebound: tuple[str, ...], constants: dict[str, str]
) -> tuple[list[_Token], list[int]]:
    """Tokenise a SHACL-SPARQL query, refuse what SHACL forbids, and put in the pre-bound values.

    ``prebound`` are the variables the caller binds itself (``this``, and ``value`` for ASK validators):
    they may not be assigned. ``constants`` maps parameter names to SPARQL term text. Returns the tokens
    and the indexes of the significant ones (not whitespace or comments)."""
    name = shape.name
    tokens = _tokens(query)
    significant = [i for i, t in enumerate(tokens) if t.kind not in ("ws", "comment")]
    for position, index in enumerate(significant):
        token = tokens[index]
        keyword = token.keyword
        if keyword in ("MINUS", "SERVICE", "VALUES"):
            raise ShapesError(f"shape {name}: SHACL-SPARQL forbids {keyword} in constraints")
        if keyword == "GRAPH":
            raise UnsupportedShape(name, "GRAPH in a SPARQL constraint")
        if keyword == "AS" and position + 1 < len(significant):
            bound = tokens[significant[position + 1]].variable
            if bound in (*prebound, *constants, "currentShape", "shapesGraph"):
                raise ShapesError(f"shape {name}: a SPARQL constraint may not assign the pre-bound ${bound}")
        variable = token.variable
        if variable == "shapesGraph":
            raise UnsupportedShape(name, "$shapesGraph", "the shapes graph is not in the data store")
        if variable == "PATH":
            if shape.path is None:
                raise ShapesError(f"shape {name}: $PATH in a SPARQL constraint of a node shape")
            token.kind, token.text = "path", shape.path
        elif variable == "currentShape":
            token.kind, token.text = (
                "iri",
                term_text(shape.node, name, "$currentShape for a blank-node shape"),
            )
        elif variable in constants:
            token.kind, token.text = "term", constants[variable]
        elif variable in prebound:
            token.text = f"?{variable}"
    return tokens, significant


def rewrite_ask(query: str, shape: Shape, prefixes: dict[str, str], constants: dict[str, str]) -> str:
    """Turn a SHACL ASK validator into a SELECT of the (focus, value) pairs it rejects, over all of them.

    The ASK body becomes a ``FILTER NOT EXISTS`` after the value pattern: EXISTS sees the row's ``?this``
    and ``?value`` wherever they occur in it, which is what pre-binding them means."""
    tokens, significant = _substitute(query, shape, ("this", "value"), constants)
    asks = [i for i in significant if tokens[i].keyword == "ASK"]
    if not asks:
        raise ShapesError(f"shape {shape.name}: sh:ask holds no ASK query")
    opens = _match_braces(tokens, shape.name)
    body_open = next((i for i in significant if i > asks[0] and tokens[i].text == "{"), None)
    if body_open is None:
        raise ShapesError(f"shape {shape.name}: the ASK query has no WHERE clause")
    prologue = "".join(t.text for t in tokens[: asks[0]])
    body = "".join(t.text for t in tokens[body_open : opens[body_open] + 1])
    declared = "".join(f"PREFIX {prefix}: <{namespace}>\n" for prefix, namespace in prefixes.items())
    inside = tokens[body_open + 1 : opens[body_open]]
    # A plain pattern over the bound ?this or ?value: a hash anti-join instead of one probe per pair.
    test = "MINUS" if _anti_join_safe(inside, ("this", "value")) else "FILTER NOT EXISTS"
    select = f"SELECT DISTINCT ?this ?value WHERE {{\n{FOCUS_MARK}{VALUES_MARK}{test} {body} }}"
    return f"{declared}{prologue}{select}"


#: Words that make a group more than a basic graph pattern (with property paths).
_NOT_BASIC = {
    "FILTER", "OPTIONAL", "BIND", "UNION", "EXISTS", "NOT", "VALUES", "GRAPH", "SERVICE", "MINUS", "SELECT",
}  # fmt: skip


def _anti_join_safe(inside: list[_Token], bound: tuple[str, ...]) -> bool:
    """Whether ``FILTER NOT EXISTS { inside }`` may become ``MINUS { inside }`` with the same answers.

    They agree when the group is a basic graph pattern (triples and property paths: no FILTER, no nested
    group) sharing a variable that every solution binds (``bound``: ``?this``, and ``?value`` for ASK
    validators): NOT EXISTS asks whether the pattern, with the row's bindings put in, has a solution;
    MINUS whether a solution of the pattern is compatible with the row on a shared variable, and such a
    variable always exists. The MINUS goes at the end of its group, where the FILTER took effect."""
    mentions = False
    previous = ""
    for token in inside:
        if token.kind in ("ws", "comment"):
            continue
        if token.kind == "brace" or token.keyword in _NOT_BASIC:
            return False
        if token.kind == "word" and ":" not in token.text and token.text not in ("a", "true", "false"):
            if previous != "@":  # a language tag
                return False
        mentions = mentions or token.variable in bound
        previous = token.text
    return mentions


def _anti_joins(tokens: list[_Token], significant: list[int], opens: dict[int, int], group: int) -> None:
    """Move each ``FILTER NOT EXISTS { basic pattern over ?this }`` directly in ``group`` to a ``MINUS``
    at the group's end (see _anti_join_safe), in place in ``tokens``."""
    close = opens[group]
    position = {index: n for n, index in enumerate(significant)}
    moved: list[str] = []
    for index in sorted(opens):
        if not group < index < close or tokens[index].kind != "brace":
            continue
        n = position[index]
        if n < 3 or [tokens[significant[n - k]].keyword for k in (3, 2, 1)] != ["FILTER", "NOT", "EXISTS"]:
            continue
        start = significant[n - 3]
        enclosing = max(o for o in opens if o < start < opens[o])
        if enclosing != group or not _anti_join_safe(tokens[index + 1 : opens[index]], ("this",)):
            continue
        moved.append("".join(t.text for t in tokens[index : opens[index] + 1]))
        for blank in range(start, opens[index] + 1):
            tokens[blank] = _Token("ws", " ")
    if moved:
        tokens[close] = _Token("brace", "".join(f"MINUS {body}\n" for body in moved) + "}")


def rewrite_select(query: str, shape: Shape, prefixes: dict[str, str], constants: dict[str, str] | None = None) -> str:
    """Turn a SHACL-SPARQL SELECT into a query that runs once over all focus nodes.

    SHACL pre-binds ``$this`` to one focus node at a time. Here every group that mentions ``$this`` (and
    the outermost one) starts with the focus subquery, which binds ``?this`` to every focus node: for
    a FILTER or BIND inside such a group this is what pre-binding means, and joining on ``?this``
    keeps each focus node's solutions apart. ``$PATH`` becomes the shape's path, ``$currentShape`` its
    IRI. Queries SHACL forbids (MINUS, SERVICE, VALUES, ``AS $this``, subqueries that do not return
    ``$this``) raise ShapesError; ``$shapesGraph``, GRAPH, aggregates not grouped by ``$this`` and
    LIMIT/OFFSET raise UnsupportedShape.
    """
    name = shape.name
    tokens, significant = _substitute(query, shape, ("this",), constants or {})
    selects = [i for i in significant if tokens[i].keyword == "SELECT"]
    if not selects:
        raise ShapesError(f"shape {name}: sh:select holds no SELECT query")
    opens = _match_braces(tokens, name)
    top_select = selects[0]
    top_open = next((i for i in significant if i > top_select and tokens[i].text == "{"), None)
    if top_open is None:
        raise ShapesError(f"shape {name}: the SELECT query has no WHERE clause")
    top_close = opens[top_open]
    projection = [tokens[i] for i in significant if top_select < i < top_open]
    after = [tokens[i] for i in significant if i > top_close]
    _check_top_level(name, projection, after)

    inject: set[int] = {top_open}
    skip_until = -1
    for index in sorted(opens):
        if index == top_open or index <= skip_until:
            continue
        close = opens[index]
        before = [tokens[i] for i in significant if i < index]
        following = [tokens[i] for i in significant if i > index]
        if before and before[-1].keyword == "EXISTS":
            # EXISTS sees the bindings of the row it tests, so ?this is already bound inside.
            skip_until = close
            continue
        mentions_this = any(tokens[i].variable == "this" for i in range(index, close))
        if following and following[0].keyword == "SELECT":
            sub_open = next(i for i in significant if i > index and tokens[i].text == "{")
            sub_projection = [tokens[i] for i in significant if index < i < sub_open]
            if not any(t.variable == "this" for t in sub_projection):
                raise ShapesError(f"shape {name}: a subquery of a SPARQL constraint must return $this")
            inject.add(sub_open)
            continue
        if mentions_this:
            inject.add(index)

    _anti_joins(tokens, significant, opens, top_open)

    if not any(t.variable == "this" for t in projection) and not any(t.text == "*" for t in projection):
        first = projection[0] if projection else None
        anchor = top_select
        if first is not None and first.keyword in ("DISTINCT", "REDUCED"):
            anchor = tokens.index(first)
        tokens[anchor] = _Token("word", tokens[anchor].text + " ?this")

    parts: list[str] = [f"PREFIX {prefix}: <{namespace}>\n" for prefix, namespace in prefixes.items()]
    for index, token in enumerate(tokens):
        parts.append(token.text)
        if index in inject:
            parts.append("\n" + FOCUS_MARK)
    return "".join(parts)


#: One step of a path: a predicate or an inverse one, as an IRI or a prefixed name (plain local names only).
_STEP = (
    r"""(?P<inverse>\^\s*)?(?:<(?P<iri>[A-Za-z][A-Za-z0-9+.-]*:[^<>"{}|^`\\\x00-\x20]*)>"""
    r"|(?P<prefix>(?:[A-Za-z][A-Za-z0-9_-]*)?):(?P<local>[A-Za-z0-9_](?:[A-Za-z0-9_-]*[A-Za-z0-9_])?))"
)
_STEP_RE = re.compile(_STEP)
_ANY_STEP = re.sub(r"\(\?P<[a-z]+>", "(?:", _STEP)
#: ``SELECT $this WHERE { $this (P|^Q|...)+ $this }``: the focus nodes on a cycle of steps along P and
#: against Q, written with nothing else (no comment, PREFIX, FILTER or second pattern), so that it means
#: exactly that. Blanks are SPARQL's four (``\s`` also takes Unicode ones, which the engine does not).
_BLANK = r"[ \t\r\n]"
_SELF_REACHABLE = re.compile(
    rf"{_BLANK}*SELECT{_BLANK}+(?:DISTINCT{_BLANK}+|REDUCED{_BLANK}+)?[$?](?-i:this){_BLANK}+(?:WHERE{_BLANK}*)?"
    rf"\{{{_BLANK}*[$?](?-i:this){_BLANK}+"
    rf"(?P<path>{_ANY_STEP}|\({_BLANK}*{_ANY_STEP}(?:{_BLANK}*\|{_BLANK}*{_ANY_STEP})*{_BLANK}*\))"
    rf"\+{_BLANK}*[$?](?-i:this){_BLANK}*\.?{_BLANK}*\}}{_BLANK}*",
    re.IGNORECASE | re.ASCII,  # ASCII: K (Kelvin), ſ and ı are no letters of a keyword or a name here
)


def self_reachable_steps(query: str, prefixes: dict[str, str]) -> tuple[tuple[str, bool], ...] | None:
    """The steps of the path, (predicate IRI, inverse), when ``query`` is exactly
    ``SELECT $this WHERE { $this (P|^Q|...)+ $this }`` (IRIs or declared prefixed names), else None.

    Such a query asks for the focus nodes that lie on a cycle of those steps (a version that revises
    itself through others, an ADR that supersedes itself). Evaluated as SPARQL it walks the whole path
    from every focus node, which is quadratic in the length of a chain: no SPARQL 1.1 query answers it
    in linear time, since a property path is evaluated from each node anew and SPARQL has no other
    recursion to share one node's reachability with the next. The evaluator finds the same nodes with
    one pass of Tarjan's strongly connected components over the statements of the steps instead
    (:func:`nodes_on_cycles`)."""
    match = _SELF_REACHABLE.fullmatch(query)
    if match is None:
        return None
    steps = []
    for step in _STEP_RE.finditer(match["path"]):
        if step["iri"] is not None:
            predicate = step["iri"]
        elif step["prefix"] in prefixes:
            predicate = prefixes[step["prefix"]] + step["local"]
        else:
            return None  # an undeclared prefix: left to the query, which reports it
        steps.append((predicate, step["inverse"] is not None))
    return tuple(steps)


def nodes_on_cycles(edges: Iterable[tuple[Term, Term]]) -> set[Term]:
    """The nodes from which a path of one or more ``edges`` leads back to themselves (``?x P+ ?x``).

    Those are the nodes with an edge to themselves and the members of strongly connected components of
    two nodes or more; found by Tarjan's algorithm, iteratively (a long chain cannot exhaust the stack),
    in time linear in the edges."""
    successors: dict[Term, list[Term]] = {}
    on_cycle: set[Term] = set()
    for subject, obj in edges:
        if subject == obj:
            on_cycle.add(subject)
        successors.setdefault(subject, []).append(obj)
    index: dict[Term, int] = {}
    low: dict[Term, int] = {}
    stack: list[Term] = []
    on_stack: set[Term] = set()

    def visit(node: Term) -> Iterator[Term]:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        return iter(successors.get(node, ()))

    for root in successors:
        if root in index:
            continue
        work = [(root, visit(root))]
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    work.append((child, visit(child)))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        on_cycle.update(component)
    return on_cycle


def _match_braces(tokens: list[_Token], name: str) -> dict[int, int]:
    pairs: dict[int, int] = {}
    stack: list[int] = []
    for index, token in enumerate(tokens):
        if token.text == "{" and token.kind == "brace":
            stack.append(index)
        elif token.text == "}" and token.kind == "brace":
            if not stack:
                raise ShapesError(f"shape {name}: unbalanced braces in a SPARQL constraint")
            pairs[stack.pop()] = index
    if stack:
        raise ShapesError(f"shape {name}: unbalanced braces in a SPARQL constraint")
    return pairs


def _check_top_level(name: str, projection: list[_Token], after: list[_Token]) -> None:
    keywords = [t.keyword for t in after]
    if "LIMIT" in keywords or "OFFSET" in keywords:
        raise UnsupportedShape(
            name, "LIMIT/OFFSET in a SPARQL constraint", "it cannot run over all focus nodes at once"
        )
    grouped = "GROUP" in keywords
    if grouped:
        start = keywords.index("GROUP") + 2
        end = next((i for i in range(start, len(after)) if after[i].keyword in ("HAVING", "ORDER")), len(after))
        if not any(t.variable == "this" for t in after[start:end]):
            raise UnsupportedShape(
                name,
                "GROUP BY without $this in a SPARQL constraint",
                "it cannot run over all focus nodes at once",
            )
    elif any(t.keyword in _AGGREGATES for t in projection):
        raise UnsupportedShape(
            name,
            "an aggregate without GROUP BY $this in a SPARQL constraint",
            "it cannot run over all focus nodes at once",
        )


# ---------------------------------------------------------------------------------------- focus


@dataclass(frozen=True)
class Focus:
    """A set of focus nodes, as a group graph pattern that binds ``?this`` (other variables are private).

    ``simple`` means the pattern binds nothing but ``?this`` and never repeats a node, so it can be used
    as it is instead of through a DISTINCT subquery (which the store would materialise first). ``large``
    means it may hold a good part of the graph (class and predicate targets, not listed nodes): then the
    queries are written so that the store joins with hash tables rather than looking each node up, which
    is several times faster on its on-disk indexes.
    """

    where: str
    simple: bool = False
    large: bool = False

    def subquery(self, variable: str = "this") -> str:
        if self.simple and variable == "this":
            return f"{{ {self.where} }}"
        projection = "?this" if variable == "this" else f"(?this AS ?{variable})"
        return f"{{ SELECT DISTINCT {projection} WHERE {{ {self.where} }} }}"


@dataclass(frozen=True)
class _NodeSet:
    """Focus nodes that fail a shape: ``nodes``, or (``complement``) every focus node but ``nodes``.

    sh:not turns one into the other, so that a member such as ``[ sh:not [ sh:path status ;
    sh:hasValue Rejected ] ]`` is the few Rejected practices, never a list of every practice."""

    nodes: frozenset[Term]
    complement: bool = False

    def flipped(self) -> _NodeSet:
        return _NodeSet(self.nodes, not self.complement)


def _union(parts: list[_NodeSet]) -> _NodeSet:
    listed = [part.nodes for part in parts if not part.complement]
    others = [part.nodes for part in parts if part.complement]
    if not others:
        return _NodeSet(frozenset().union(*listed))
    # (F - c1) | (F - c2) | p = F - ((c1 & c2) - p), the p being focus nodes
    return _NodeSet(frozenset.intersection(*others).difference(*listed), complement=True)


def _intersection(parts: list[_NodeSet]) -> _NodeSet:
    listed = [part.nodes for part in parts if not part.complement]
    others = [part.nodes for part in parts if part.complement]
    if listed:
        return _NodeSet(frozenset.intersection(*listed).difference(*others))
    return _NodeSet(frozenset().union(*others), complement=True)


def _has_value_pattern(shape: Shape) -> str | None:
    """``?this <path> <value>`` for a shape that is one sh:hasValue on a path (its focus nodes that
    conform are those the pattern matches: a triple pattern matches the very term, as sameTerm does)."""
    if shape.deactivated or shape.path is None or len(shape.constraints) != 1:
        return None
    constraint = shape.constraints[0]
    if constraint.kind != "hasValue":
        return None
    return f"?this {shape.path} {constraint.args['value']}"


def _negated(shape: Shape) -> Shape | None:
    """The member of a shape that is one sh:not on the focus node itself, else None."""
    if shape.deactivated or shape.path is not None or len(shape.constraints) != 1:
        return None
    constraint = shape.constraints[0]
    member = constraint.args.get("shape") if constraint.kind == "not" else None
    return member if isinstance(member, Shape) else None


#: The constraints of a node shape whose failing nodes are composed from their members' (``failing_nodes``).
_COMPOSED_KINDS = frozenset({"not", "and", "or", "node", "property"})


#: How many nodes a focused validation walks, in all, to find the chosen nodes on a cycle before it
#: reads every statement of the steps once instead (what a whole validation does).
CYCLE_WALK_BUDGET = 20_000
#: How many chosen focus nodes one query names (see CompiledShapes.validate).
FOCUS_BLOCK = 500


class _Evaluator:
    """Runs compiled shapes on one store."""

    def __init__(self, store: Store, focus: str | None = None):
        self.store = store
        #: When set, the only focus nodes a target may give: the terms of a VALUES block.
        self.focus = focus
        self._fresh = 0
        self._failing: dict[tuple[int, str], frozenset[Term]] = {}
        self._subclasses: dict[str, list[str]] = {}
        self.queries = 0

    def subclasses(self, iri: str) -> list[str]:
        """``iri`` and its subclasses in the data graph, asked once per class.

        Matching ``rdf:type`` against this list is much cheaper than the path
        ``rdf:type/rdfs:subClassOf*`` evaluated again for every node."""
        found = self._subclasses.get(iri)
        if found is None:
            query = f"SELECT DISTINCT ?class WHERE {{ ?class <{RDFS_SUBCLASS_OF}>* <{iri}> }}"
            found = sorted({row["class"].value for row in self.select(query) if isinstance(row["class"], NamedNode)})
            if iri not in found:
                found.insert(0, iri)
            self._subclasses[iri] = found
        return found

    def typed(self, variable: str, iri: str) -> tuple[str, bool]:
        """A pattern matching SHACL instances of ``iri`` in ``?variable``; whether it can repeat a node."""
        classes = self.subclasses(iri)
        if len(classes) == 1:
            return f"?{variable} <{RDF_TYPE}> <{iri}> .", False
        class_variable = self.fresh("class")
        listed = " ".join(f"<{c}>" for c in classes)
        return f"VALUES ?{class_variable} {{ {listed} }} ?{variable} <{RDF_TYPE}> ?{class_variable} .", True

    def targets_focus(self, shape: Shape) -> Focus:
        patterns: list[str] = []
        repeats = len(shape.targets) > 1
        large = any(kind != "nodes" for kind, _ in shape.targets)
        for kind, text in shape.targets:
            if kind == "class":
                pattern, repeating = self.typed("this", text)
                repeats = repeats or repeating
            elif kind == "nodes":
                pattern = f"VALUES ?this {{ {text} }}"
            elif kind == "subjectsOf":
                pattern, repeats = f"?this <{text}> ?{self.fresh('object')} .", True
            else:
                pattern, repeats = f"?{self.fresh('subject')} <{text}> ?this .", True
            patterns.append(pattern)
        if len(patterns) == 1:
            focus = Focus(patterns[0], simple=not repeats, large=large)
        else:
            focus = Focus(" UNION ".join(f"{{ {pattern} }}" for pattern in patterns), large=large)
        if self.focus is None:
            return focus
        # The chosen nodes first, so that the store starts from them and looks each one up; each is
        # listed once, so the join repeats none, and the focus is no longer large.
        return Focus(f"VALUES ?this {{ {self.focus} }} {{ {focus.where} }}", simple=focus.simple, large=False)

    def fresh(self, stem: str) -> str:
        self._fresh += 1
        return f"{stem}_{self._fresh}"

    def select(self, query: str) -> Iterator[dict[str, Term]]:
        self.queries += 1
        try:
            solutions = self.store.query(query)
        except (SyntaxError, ValueError, OSError) as error:
            raise ShapesError(f"a compiled query failed: {error}\n{query}") from None
        names = [variable.value for variable in solutions.variables]  # type: ignore[union-attr]
        for solution in solutions:  # type: ignore[union-attr]
            row = {}
            for name in names:
                term = solution[name]
                if term is not None:
                    row[name] = term
            yield row

    # -- shapes

    def value_pattern(self, shape: Shape, focus: Focus, variable: str = "value") -> str:
        """A pattern binding ``?variable`` to the value nodes of ``?this``.

        For a large focus and a predicate path, the triples of the predicate are read in a subquery of
        their own, which the store hash-joins with the focus nodes instead of seeking once per node."""
        if shape.path is None:
            return f"BIND(?this AS ?{variable})"
        if focus.large and _PREDICATE_PATH.fullmatch(shape.path):
            return f"{{ SELECT ?this ?{variable} WHERE {{ ?this {shape.path} ?{variable} }} }}"
        return f"?this {shape.path} ?{variable} ."

    def value_focus(self, shape: Shape, focus: Focus) -> Focus:
        """The value nodes of ``shape`` for ``focus``, as a focus of their own."""
        if shape.path is None:
            return focus
        parent = self.fresh("parent")
        if focus.large and _PREDICATE_PATH.fullmatch(shape.path):
            # As in value_pattern: the predicate's triples in a subquery of their own, hash-joined with
            # the focus nodes (a seek per focus node is several times slower on the on-disk indexes).
            steps = f"{{ SELECT ?{parent} ?this WHERE {{ ?{parent} {shape.path} ?this }} }}"
            return Focus(f"{focus.subquery(parent)} {steps}", large=True)
        return Focus(f"{focus.subquery(parent)} ?{parent} {shape.path} ?this .", large=focus.large)

    def evaluate(self, shape: Shape, focus: Focus) -> list[ValidationResult]:
        if shape.deactivated:
            return []
        results: list[ValidationResult] = []
        # Over a large focus, sh:class runs on its own as an anti-join (MINUS), much faster than a
        # NOT EXISTS per value; the other value checks share one query.
        merged = [c for c in shape.constraints if c.kind in VALUE_CHECKS and not (focus.large and c.kind == "class")]
        if merged:
            results.extend(self.value_checks(shape, merged, focus))
        for constraint in shape.constraints:
            if constraint not in merged:
                results.extend(self.constraint(shape, constraint, focus))
        return results

    def value_checks(self, shape: Shape, constraints: list[Constraint], focus: Focus) -> list[ValidationResult]:
        """All constraints that judge each value node on its own, in one query over the value nodes."""
        if len(constraints) == 1:
            condition = self.violation(constraints[0])
            values = self.value_pattern(shape, focus)
            query = f"SELECT DISTINCT ?this ?value WHERE {{ {focus.subquery()} {values} FILTER({condition}) }}"
            return [self.result(shape, constraints[0], row["this"], row["value"]) for row in self.select(query)]
        binds = " ".join(f"BIND({self.violation(c)} AS ?broken{i})" for i, c in enumerate(constraints))
        flags = " ".join(f"?broken{i}" for i in range(len(constraints)))
        any_broken = " || ".join(f"?broken{i}" for i in range(len(constraints)))
        values = self.value_pattern(shape, focus)
        query = (
            f"SELECT DISTINCT ?this ?value {flags} WHERE {{ {focus.subquery()} {values} {binds} FILTER({any_broken}) }}"
        )
        results = []
        for row in self.select(query):
            for i, constraint in enumerate(constraints):
                flag = row.get(f"broken{i}")
                if isinstance(flag, Literal) and flag.value == "true":
                    results.append(self.result(shape, constraint, row["this"], row["value"]))
        return results

    def failing_nodes(self, shape: Shape, focus: Focus) -> _NodeSet:
        """The nodes of ``focus`` that do not conform to ``shape``, as ``failing`` finds them but
        composed where a shape is made of others: on the focus node itself (no path), sh:or is the
        nodes failing every member, sh:and, sh:node and sh:property those failing any, sh:not those
        conforming to its member; a sh:hasValue member is the focus less the nodes with the value.
        No query then lists every focus node, and no result is made for a node that does conform."""
        if shape.deactivated:
            return _NodeSet(frozenset())
        if shape.path is None and shape.constraints and all(c.kind in _COMPOSED_KINDS for c in shape.constraints):
            return _union([self.constraint_failing(shape, c, focus) for c in shape.constraints])
        has = _has_value_pattern(shape)
        if has is not None:
            query = f"SELECT DISTINCT ?this WHERE {{ {focus.subquery()} {has} }}"
            return _NodeSet(frozenset(row["this"] for row in self.select(query)), complement=True)
        return _NodeSet(self.failing(shape, focus))

    def constraint_failing(self, shape: Shape, constraint: Constraint, focus: Focus) -> _NodeSet:
        """The focus nodes that fail one composed constraint (``_COMPOSED_KINDS``) of a shape without a path."""
        kind, args = constraint.kind, constraint.args
        if kind == "property":
            child = args["shape"]
            assert isinstance(child, Shape)
            return self.failing_nodes(child, focus)
        members = [args["shape"]] if "shape" in args else args["shapes"]
        assert isinstance(members, list)
        if kind == "or":
            return self.failing_all(members, focus)
        parts = [self.failing_nodes(member, focus) for member in members]
        if kind == "not":
            return parts[0].flipped()
        return _union(parts)  # and, node

    def failing_all(self, members: list[Shape], focus: Focus) -> _NodeSet:
        """The focus nodes failing every member (sh:or). A member that is a sh:hasValue, or the
        sh:not of one, narrows the focus in the query itself (an anti-join with, or a join with, the
        nodes that have the value), and the other members are judged on what is left: a Rejected
        practice's reason is checked on the Rejected practices, not on every practice."""
        narrowed, rest = focus, []
        for member in members:
            has = _has_value_pattern(member)
            if has is not None:
                narrowed = Focus(f"{{ {narrowed.where} }} MINUS {{ {has} }}", large=narrowed.large)
                continue
            negated = _negated(member)
            has = _has_value_pattern(negated) if negated is not None else None
            if has is not None:
                narrowed = Focus(f"{{ {narrowed.where} }} {{ {has} }}", large=narrowed.large)
                continue
            rest.append(member)
        if narrowed is focus:
            return _intersection([self.failing_nodes(member, focus) for member in members])
        if not rest:
            return _NodeSet(self.focus_nodes(narrowed))
        bad = _intersection([self.failing_nodes(member, narrowed) for member in rest])
        # a complement here is of the narrowed focus: made a list of nodes, valid for any focus
        return _NodeSet(self.focus_nodes(narrowed) - bad.nodes) if bad.complement else bad

    def _some_object_shared(self, predicate: str) -> bool:
        query = (
            f"SELECT ?shared WHERE {{ ?holder {predicate} ?shared }} "
            "GROUP BY ?shared HAVING (COUNT(DISTINCT ?holder) > 1) LIMIT 1"
        )
        return any(True for _ in self.select(query))

    def focus_nodes(self, focus: Focus) -> frozenset[Term]:
        """Every node of ``focus``."""
        return frozenset(row["this"] for row in self.select(f"SELECT DISTINCT ?this WHERE {{ {focus.where} }}"))

    def failing(self, shape: Shape, focus: Focus) -> frozenset[Term]:
        """The nodes of ``focus`` that do not conform to ``shape`` (each judged as a focus node)."""
        key = (id(shape), focus.where)
        found = self._failing.get(key)
        if found is None:
            found = self._failing[key] = self._failing_focus_nodes(shape, focus)
        return found

    def _failing_focus_nodes(self, shape: Shape, focus: Focus) -> frozenset[Term]:
        nested = [c for c in shape.constraints if c.kind == "property"]
        if shape.path is None or not nested or shape.deactivated:
            return frozenset(r.focus for r in self.evaluate(shape, focus))
        # A sh:property of a property shape judges the value nodes (its results are about them): a
        # focus node fails when one of its values does.
        direct = replace(shape, constraints=[c for c in shape.constraints if c.kind != "property"])
        nodes = {r.focus for r in self.evaluate(direct, focus)}
        value_focus = self.value_focus(shape, focus)
        bad_values: set[Term] = set()
        for constraint in nested:
            child = constraint.args["shape"]
            assert isinstance(child, Shape)
            bad_values |= self.failing(child, value_focus)
        if bad_values:
            nodes |= {node for node, value in self.pairs(shape, focus) if value in bad_values}
        return frozenset(nodes)

    def result(
        self,
        shape: Shape,
        constraint: Constraint,
        focus: Term,
        value: Term | None,
        path: str | None = None,
        extra: dict[str, Term] | None = None,
    ) -> ValidationResult:
        bindings: dict[str, Term] = {"this": focus}
        if value is not None:
            bindings["value"] = value
        result_path = path if path is not None else shape.result_path
        if result_path is not None:
            is_iri = path is not None or shape.path_iri is not None
            bindings["path"] = NamedNode(result_path) if is_iri else Literal(result_path)
        if extra:
            bindings.update(extra)
        templates = shape.messages or ((constraint.message,) if constraint.message else ())
        return ValidationResult(
            focus=focus,
            path=result_path,
            value=value,
            source_shape=shape.name,
            component=constraint.component,
            severity=shape.severity,
            messages=tuple(fill_template(t, bindings) for t in templates),
        )

    # -- constraints

    def constraint(self, shape: Shape, constraint: Constraint, focus: Focus) -> list[ValidationResult]:
        kind, args = constraint.kind, constraint.args
        this = focus.subquery()
        values = self.value_pattern(shape, focus)
        if kind == "property":
            child = args["shape"]
            assert isinstance(child, Shape)
            return self.evaluate(child, self.value_focus(shape, focus))
        if kind in ("not", "and", "or", "xone", "node"):
            return self.logical(shape, constraint, focus)
        if kind in ("qualifiedMinCount", "qualifiedMaxCount"):
            return self.qualified(shape, constraint, focus)
        if kind == "sparql":
            return self.sparql(shape, constraint, focus)
        if kind == "ask":
            return self.ask(shape, constraint, focus)
        if kind in ("minCount", "maxCount"):
            n = args["n"]
            shared = _SHARED_OBJECT_PATH.fullmatch(shape.path or "")
            # over a large focus only: a focused validation's few nodes are cheaper to walk than p's objects
            at_most_one = kind == "maxCount" and isinstance(n, int) and n >= 1 and focus.large
            if at_most_one and shared is not None and not self._some_object_shared(shared[1]):
                # ``p/^p`` (the nodes that share an object of p): each node reaches only itself when no
                # object of p has two subjects, so none reaches more than one. A GROUP BY of the
                # objects answers that in one scan, where the path walks every node's.
                return []
            if kind == "minCount" and n == 1 and values.startswith("{"):
                query = f"SELECT ?this WHERE {{ {this} MINUS {values} }}"  # a hash anti-join
            elif kind == "minCount" and n == 1:
                query = f"SELECT ?this WHERE {{ {this} FILTER NOT EXISTS {{ {values} }} }}"
            elif kind == "minCount":
                query = (
                    f"SELECT ?this WHERE {{ {this} OPTIONAL {{ {values} }} }} "
                    f"GROUP BY ?this HAVING (COUNT(DISTINCT ?value) < {n})"
                )
            else:
                query = f"SELECT ?this WHERE {{ {this} {values} }} GROUP BY ?this HAVING (COUNT(DISTINCT ?value) > {n})"
            return [self.result(shape, constraint, row["this"], None) for row in self.select(query)]
        if kind == "class":  # a large focus: see evaluate()
            typed, _ = self.typed("value", str(args["class"]))
            query = f"SELECT DISTINCT ?this ?value WHERE {{ {this} {values} MINUS {{ {typed} }} }}"
            return [self.result(shape, constraint, row["this"], row["value"]) for row in self.select(query)]
        if kind == "hasValue":
            wanted = args["value"]
            if shape.path is None:
                query = f"SELECT ?this WHERE {{ {this} FILTER(!sameTerm(?this, {wanted})) }}"
            elif focus.large:
                # A triple pattern matches the very term (sameTerm): a hash anti-join, not a probe per node.
                query = f"SELECT ?this WHERE {{ {this} MINUS {{ ?this {shape.path} {wanted} }} }}"
            else:
                query = (
                    f"SELECT ?this WHERE {{ {this} FILTER NOT EXISTS {{ ?this {shape.path} ?value . "
                    f"FILTER(sameTerm(?value, {wanted})) }} }}"
                )
            return [self.result(shape, constraint, row["this"], None) for row in self.select(query)]
        if kind == "uniqueLang":
            query = (
                f"SELECT ?this ?lang WHERE {{ {this} {values} BIND(LANG(?value) AS ?lang) "
                f'FILTER(?lang != "") }} GROUP BY ?this ?lang HAVING (COUNT(DISTINCT ?value) > 1)'
            )
            return [
                self.result(shape, constraint, row["this"], None, extra={"lang": row["lang"]})
                for row in self.select(query)
            ]
        if kind == "closed":
            allowed = ", ".join(f"<{iri}>" for iri in args["allowed"])  # type: ignore[attr-defined]
            exclude = f"FILTER(?predicate NOT IN ({allowed}))" if allowed else ""
            nodes = self.value_pattern(shape, focus, "node")
            query = (
                f"SELECT DISTINCT ?this ?predicate ?object WHERE {{ {this} {nodes} "
                f"?node ?predicate ?object . {exclude} }}"
            )
            return [
                self.result(shape, constraint, row["this"], row["object"], path=row["predicate"].value)
                for row in self.select(query)
            ]
        if kind == "equals":
            other = f"<{args['other']}>"
            if shape.path is None:
                back = "FILTER(sameTerm(?value, ?this))"
            else:
                back = f"?this {shape.path} ?value ."
            query = (
                f"SELECT DISTINCT ?this ?value WHERE {{ {{ {this} {values} FILTER NOT EXISTS "
                f"{{ ?this {other} ?value }} }} UNION {{ {this} ?this {other} ?value . "
                f"FILTER NOT EXISTS {{ {back} }} }} }}"
            )
        elif kind == "disjoint":
            query = f"SELECT DISTINCT ?this ?value WHERE {{ {this} {values} ?this <{args['other']}> ?value . }}"
        elif kind in ("lessThan", "lessThanOrEquals"):
            operator = "<" if kind == "lessThan" else "<="
            query = (
                f"SELECT DISTINCT ?this ?value WHERE {{ {this} {values} ?this <{args['other']}> ?other . "
                f"FILTER(!COALESCE(?value {operator} ?other, false)) }}"
            )
        else:
            raise AssertionError(f"no query for {kind}")
        return [self.result(shape, constraint, row["this"], row.get("value")) for row in self.select(query)]

    def violation(self, constraint: Constraint) -> str:
        """A SPARQL expression, true exactly when ``?value`` violates a value-type or value-range constraint.

        Never an error: comparisons that fail (a string against a number, an ill-formed literal) count
        as violations, as SHACL says they must."""
        kind, args = constraint.kind, constraint.args
        if kind == "class":
            pattern, _ = self.typed("value", str(args["class"]))
            return f"NOT EXISTS {{ {pattern} }}"
        if kind == "datatype":
            datatype = args["datatype"]
            test = f"isLiteral(?value) && sameTerm(DATATYPE(?value), <{datatype}>)"
            if datatype in CASTABLE_DATATYPES:
                # An ill-formed literal keeps its datatype in the store, but casting it fails.
                test += f" && sameTerm(DATATYPE(<{datatype}>(?value)), <{datatype}>)"
            return f"!COALESCE({test}, false)"
        if kind == "nodeKind":
            return f"!{args['test']}"
        if kind == "range":
            return f"!COALESCE(?value {args['operator']} {args['bound']}, false)"
        if kind == "length":
            length = f"STRLEN(STR(?value)) {args['operator']} {args['n']}"
            return f"!COALESCE(!isBlank(?value) && {length}, false)"
        if kind == "pattern":
            regex = f"REGEX(STR(?value), {args['pattern']}, {args['flags']})"
            return f"!COALESCE(!isBlank(?value) && {regex}, false)"
        if kind == "languageIn":
            tags = args["tags"]
            assert isinstance(tags, list)
            matches = " || ".join(f"langMatches(LANG(?value), {tag})" for tag in tags) or "false"
            return f"!COALESCE(isLiteral(?value) && ({matches}), false)"
        if kind == "in":
            items = args["items"]
            assert isinstance(items, list)
            same = " || ".join(f"sameTerm(?value, {item})" for item in items) or "false"
            return f"!({same})"
        raise AssertionError(f"no value check for {kind}")

    def pairs(self, shape: Shape, focus: Focus, keep_empty: bool = False) -> list[tuple[Term, Term | None]]:
        """(focus node, value node) pairs; with ``keep_empty``, focus nodes without values as (node, None)."""
        values = self.value_pattern(shape, focus)
        body = f"OPTIONAL {{ {values} }}" if keep_empty else values
        query = f"SELECT DISTINCT ?this ?value WHERE {{ {focus.subquery()} {body} }}"
        return [(row["this"], row.get("value")) for row in self.select(query)]

    def logical(self, shape: Shape, constraint: Constraint, focus: Focus) -> list[ValidationResult]:
        kind, args = constraint.kind, constraint.args
        if kind in _COMPOSED_KINDS:
            # The value nodes that fail, composed from the members' sets; on a path, the pairs of
            # focus and value are read only when some value fails.
            value_focus = self.value_focus(shape, focus)
            failing_values = self.constraint_failing(shape, constraint, value_focus)
            bad_values = failing_values.nodes
            if failing_values.complement:
                bad_values = self.focus_nodes(value_focus) - bad_values
            if shape.path is None:
                return [self.result(shape, constraint, node, node) for node in bad_values]
            if not bad_values:
                return []
            pairs = self.pairs(shape, focus)
            return [self.result(shape, constraint, node, value) for node, value in pairs if value in bad_values]
        value_focus = self.value_focus(shape, focus)
        members = [args["shape"]] if "shape" in args else args["shapes"]
        assert isinstance(members, list)
        failing = [self.failing(member, value_focus) for member in members]
        if kind in ("node", "and") and not any(failing):
            return []
        results = []
        for node, value in self.pairs(shape, focus):
            assert value is not None
            conforming = sum(1 for fails in failing if value not in fails)
            if kind in ("node", "and"):
                bad = conforming < len(members)
            elif kind == "not":
                bad = conforming == 1
            elif kind == "or":
                bad = conforming == 0
            else:
                bad = conforming != 1
            if bad:
                results.append(self.result(shape, constraint, node, value))
        return results

    def qualified(self, shape: Shape, constraint: Constraint, focus: Focus) -> list[ValidationResult]:
        args = constraint.args
        value_focus = self.value_focus(shape, focus)
        target = args["shape"]
        siblings = args["siblings"]
        assert isinstance(target, Shape) and isinstance(siblings, list)
        failing = self.failing(target, value_focus)
        sibling_failing = [self.failing(sibling, value_focus) for sibling in siblings]
        counts: dict[Term, int] = {}
        for node, value in self.pairs(shape, focus, keep_empty=True):
            counts.setdefault(node, 0)
            if value is None or value in failing:
                continue
            if any(value not in fails for fails in sibling_failing):
                continue
            counts[node] += 1
        n = args["n"]
        assert isinstance(n, int)
        minimum = constraint.kind == "qualifiedMinCount"
        return [
            self.result(shape, constraint, node, None)
            for node, count in counts.items()
            if (count < n if minimum else count > n)
        ]

    def sparql(self, shape: Shape, constraint: Constraint, focus: Focus) -> list[ValidationResult]:
        args = constraint.args
        query = str(args["query"]).replace(FOCUS_MARK, focus.subquery() + "\n")
        templates = args["messages"] or shape.messages
        assert isinstance(templates, tuple)
        steps = args.get("cycle")
        rows = self.cycle_rows(steps, focus) if isinstance(steps, tuple) else self.select(query)
        results = []
        seen: set[tuple[Term, str | None, Term | None, tuple[str, ...]]] = set()
        for row in rows:
            failure = row.get("failure")
            if isinstance(failure, Literal) and failure.value in ("true", "1"):
                raise ShapesError(f"shape {shape.name}: a SPARQL constraint reported a failure (?failure)")
            node = row.get("this")
            if node is None:
                continue
            path_term = row.get("path")
            path = path_term.value if isinstance(path_term, NamedNode) else shape.result_path
            value = row.get("value", node if shape.path is None else None)
            bindings = {**args.get("parameters", {}), **row}  # type: ignore[dict-item]
            if value is not None:
                bindings.setdefault("value", value)
            if "message" in row and isinstance(row["message"], Literal):
                messages: tuple[str, ...] = (row["message"].value,)
            else:
                messages = tuple(fill_template(t, bindings) for t in templates)
            key = (node, path, value, messages)
            if key in seen:
                continue
            seen.add(key)
            results.append(
                ValidationResult(
                    focus=node,
                    path=path,
                    value=value,
                    source_shape=shape.name,
                    component=constraint.component,
                    severity=shape.severity,
                    messages=messages,
                    source_constraint=node_id(constraint.source) if constraint.source is not None else None,
                )
            )
        return results

    def cycle_rows(self, steps: tuple[tuple[str, bool], ...], focus: Focus) -> Iterator[dict[str, Term]]:
        """The solutions of ``SELECT $this WHERE { $this (P|^Q|...)+ $this }`` over ``focus`` (``steps``:
        P, Q, ... and whether each is inverse), in time linear in the graph: the focus nodes, once each,
        that lie on a cycle of the steps. Their statements are read once, whatever the focus; for a
        few chosen focus nodes, only what can be reached from each is walked (see reaches_itself)."""
        if self.focus is not None:
            nodes = [row["this"] for row in self.select(f"SELECT DISTINCT ?this WHERE {{ {focus.subquery()} }}")]
            budget = [CYCLE_WALK_BUDGET]
            found = []
            for chosen in nodes:
                verdict = self.reaches_itself(chosen, steps, budget)
                if verdict is None:  # the chains are too long to walk from each node: the one pass below
                    break
                if verdict:
                    found.append(chosen)
            else:
                yield from ({"this": chosen} for chosen in found)
                return
        edges: list[tuple[Term, Term]] = []
        for predicate, inverse in steps:
            for row in self.select(f"SELECT ?s ?o WHERE {{ ?s <{predicate}> ?o }}"):
                edges.append((row["o"], row["s"]) if inverse else (row["s"], row["o"]))
        cyclic = nodes_on_cycles(edges)
        if not cyclic:
            return
        for row in self.select(f"SELECT DISTINCT ?this WHERE {{ {focus.subquery()} }}"):
            node = row.get("this")
            if node is not None and node in cyclic:
                yield {"this": node}

    def reaches_itself(self, start: Term, steps: tuple[tuple[str, bool], ...], budget: list[int]) -> bool | None:
        """Whether a path of one or more ``steps`` leads from ``start`` back to it, walking the default
        graph from ``start``; None once more than ``budget[0]`` nodes have been reached (the budget
        is shared by the calls of one constraint)."""
        graph = DefaultGraph()
        links = [(NamedNode(predicate), inverse) for predicate, inverse in steps]
        reached: set[Any] = set()
        pending: list[Any] = [start]
        while pending:
            node = pending.pop()
            for predicate, inverse in links:
                following: list[Any]
                if inverse:
                    following = [q.subject for q in self.store.quads_for_pattern(None, predicate, node, graph)]
                elif not isinstance(node, Literal):
                    following = [q.object for q in self.store.quads_for_pattern(node, predicate, None, graph)]
                else:  # a literal has no statements of its own
                    continue
                for neighbour in following:
                    if neighbour == start:
                        return True
                    if neighbour not in reached:
                        reached.add(neighbour)
                        pending.append(neighbour)
                        budget[0] -= 1
                        if budget[0] < 0:
                            return None
        return False

    def ask(self, shape: Shape, constraint: Constraint, focus: Focus) -> list[ValidationResult]:
        """An ASK validator of a constraint component, over all value nodes at once."""
        args = constraint.args
        query = (
            str(args["query"])
            .replace(FOCUS_MARK, focus.subquery() + "\n")
            .replace(VALUES_MARK, self.value_pattern(shape, focus) + "\n")
        )
        templates = args["messages"] or shape.messages
        parameters = args["parameters"]
        assert isinstance(templates, tuple) and isinstance(parameters, dict)
        results = []
        for row in self.select(query):
            node, value = row["this"], row["value"]
            bindings = {**parameters, "this": node, "value": value}
            if shape.result_path is not None:
                bindings["path"] = NamedNode(shape.result_path) if shape.path_iri else Literal(shape.result_path)
            results.append(
                ValidationResult(
                    focus=node,
                    path=shape.result_path,
                    value=value,
                    source_shape=shape.name,
                    component=constraint.component,
                    severity=shape.severity,
                    messages=tuple(fill_template(t, bindings) for t in templates),
                )
            )
        return results


# ------------------------------------------------------------------------------------------ API


ShapesSource = Union[ShapesGraph, Store, Path, str, bytes]  # noqa: UP007


class CompiledShapes:
    """Shapes compiled once; :meth:`validate` runs them on any number of stores."""

    def __init__(self, shapes: list[Shape]):
        self.shapes = shapes
        self.targeted = sorted((s for s in shapes if s.targets), key=lambda s: s.name)
        self.last_query_count = 0

    def validate(
        self,
        data: Store,
        progress: Callable[[int, int, str], None] | None = None,
        focus: Iterable[NamedNode | Literal] | None = None,
    ) -> ValidationReport:
        """Validate the default graph of ``data``; results are deduplicated and sorted. ``progress(done,
        total, shape)`` is told of each targeted shape before it runs, and once more at the end.

        With ``focus`` (IRIs and literals; a blank node cannot be named in a query), only the targets
        of the shapes that are among these nodes are validated: each target chosen gets the results
        a whole validation gives it, and every result is one a whole validation gives (a nested
        shape's results name the value nodes reached from a chosen target)."""
        evaluators = [_Evaluator(data)]
        if focus is not None:
            terms = list(dict.fromkeys(focus))
            if not all(type(term) in (NamedNode, Literal) for term in terms):
                raise TypeError("focus nodes are NamedNode or Literal terms")
            # In blocks: past about a thousand rows the store joins a VALUES block with a pattern by
            # comparing every pair (2,000 rows took 4 s against a 75,000-node class, 500 took 0.05 s).
            # Each focus node's results depend on it alone, so the blocks are validated apart.
            evaluators = [
                _Evaluator(data, " ".join(map(str, terms[start : start + FOCUS_BLOCK])))  # N-Triples: valid SPARQL
                for start in range(0, len(terms), FOCUS_BLOCK)
            ]
        found: dict[ValidationResult, str] = {}  # result -> the first targeted shape that produced it
        for done, shape in enumerate(self.targeted):
            if progress is not None:
                progress(done, len(self.targeted), shape.name)
            if shape.deactivated:
                continue
            for evaluator in evaluators:
                for result in evaluator.evaluate(shape, evaluator.targets_focus(shape)):
                    found.setdefault(result, shape.name)
        if progress is not None:
            progress(len(self.targeted), len(self.targeted), "done")
        self.last_query_count = sum(evaluator.queries for evaluator in evaluators)
        results = tuple(
            sorted(
                (replace(result, root_shape=root) for result, root in found.items()),
                key=ValidationResult.sort_key,
            )
        )
        return ValidationReport(results=results)


def compile_shapes(source: ShapesSource) -> CompiledShapes:
    """Compile a shapes graph: a ShapesGraph, a Store (its default graph), a Turtle file or a folder of
    ``*.ttl`` files (Path), or Turtle text (str or bytes).

    Raises UnsupportedShape (naming the shape and the feature) when a shape needs something this engine
    does not implement, and ShapesError when the shapes graph is not well-formed SHACL.
    """
    if isinstance(source, ShapesGraph):
        graph = source
    elif isinstance(source, Store):
        graph = ShapesGraph.from_store(source)
    else:
        graph = ShapesGraph.parse(source)
    return CompiledShapes(_Compiler(graph).compile())


def validate(data: Store, shapes: ShapesSource | CompiledShapes) -> ValidationReport:
    """Validate ``data`` (its default graph) against ``shapes``; see :func:`compile_shapes`."""
    compiled = shapes if isinstance(shapes, CompiledShapes) else compile_shapes(shapes)
    return compiled.validate(data)
