"""Query results in a shape that does not depend on where the query ran, and their output formats.

A backend (the embedded store, or later a remote SPARQL endpoint) hands back one of three results:
``SelectResult`` (variables and rows of pyoxigraph terms), ``AskResult`` (a boolean) or ``GraphResult``
(triples, from CONSTRUCT or DESCRIBE). ``format_result`` turns any of them into text: an aligned table
for a terminal, the W3C SPARQL 1.1 results formats (JSON, CSV, TSV, XML), or RDF for graphs.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import UsageProblem, printable
from ..graph.vocab import PREFIXES, XSD, XSD_STRING
from .formats import RDF_FORMATS

if TYPE_CHECKING:
    from pathlib import Path

    from pyoxigraph import BlankNode, Literal, NamedNode, Triple

    Term = NamedNode | BlankNode | Literal | Triple
else:
    Term = Any

#: Formats of SELECT and ASK results (``table`` is for people, the others are the W3C formats).
TABULAR_FORMATS = ("table", "csv", "tsv", "json", "xml")
#: Formats of CONSTRUCT and DESCRIBE results (``table`` also works: it means Turtle).
GRAPH_FORMATS = ("turtle", "ntriples", "nquads", "trig", "jsonld", "rdfxml")
#: The other names of the RDF formats that ``export rdf`` takes too (``ttl``, ``nt``, ...); ``json``
#: and ``xml`` name the SPARQL results formats here, never JSON-LD or RDF/XML.
GRAPH_FORMAT_ALIASES = {
    alias: canonical
    for canonical, aliases in RDF_FORMATS.items()
    for alias in aliases
    if alias != canonical and alias not in TABULAR_FORMATS
}
#: Every format ``--format`` names (it takes GRAPH_FORMAT_ALIASES too).
ALL_FORMATS = TABULAR_FORMATS + GRAPH_FORMATS

ELLIPSIS = "…"
COLUMN_GAP = "  "
MIN_COLUMN_WIDTH = 6
NUMERIC_TYPES = frozenset(
    XSD + name
    for name in (
        "integer",
        "decimal",
        "double",
        "float",
        "int",
        "long",
        "short",
        "byte",
        "nonNegativeInteger",
        "positiveInteger",
        "negativeInteger",
        "nonPositiveInteger",
        "unsignedInt",
        "unsignedLong",
    )
)
_LOCAL_NAME = re.compile(r"[A-Za-z0-9_](?:[\w.-]*[\w-])?")


# ------------------------------------------------------------------------------------------ results


@dataclass(frozen=True)
class SelectResult:
    """The answer to a SELECT query: variable names in projection order, and one tuple per solution
    holding a pyoxigraph term per variable (None where the variable is unbound)."""

    variables: tuple[str, ...]
    rows: tuple[tuple[Term | None, ...], ...]

    def __len__(self) -> int:
        return len(self.rows)

    def column(self, name: str) -> list[Term | None]:
        """The values of one variable, row by row."""
        index = self.variables.index(name)
        return [row[index] for row in self.rows]

    def dicts(self) -> list[dict[str, Term]]:
        """Each row as {variable: term}, unbound variables left out."""
        return [
            {name: value for name, value in zip(self.variables, row, strict=True) if value is not None}
            for row in self.rows
        ]

    def texts(self) -> list[tuple[str, ...]]:
        """Each row as display strings (``term_text``), '' where unbound."""
        return [tuple("" if value is None else term_text(value) for value in row) for row in self.rows]


@dataclass(frozen=True)
class AskResult:
    """The answer to an ASK query."""

    value: bool


@dataclass(frozen=True)
class GraphResult:
    """The answer to a CONSTRUCT or DESCRIBE query: the triples, in the order the engine gave them."""

    triples: tuple[Triple, ...]

    def __len__(self) -> int:
        return len(self.triples)


QueryResult = SelectResult | AskResult | GraphResult


# ------------------------------------------------------------------------------------------ parsing


_XML_DECLARATIONS = re.compile(rb"<!\s*(DOCTYPE|ENTITY)", re.IGNORECASE)


def refuse_xml_declarations(data: bytes | str) -> None:
    """Refuse XML with a DOCTYPE or entity declarations: sotakg never expands XML entities, so a
    document cannot grow (billion laughs) or pull in anything it names. Raises ValueError."""
    raw = data.encode("utf-8") if isinstance(data, str) else data
    if _XML_DECLARATIONS.search(raw):
        raise ValueError("refused: XML with a DOCTYPE or ENTITY declaration (entities are never expanded)")


def parse_sparql_results(data: bytes | str, format_name: str = "json") -> SelectResult | AskResult:
    """Read W3C SPARQL results (``json``, ``xml`` or ``tsv``) into a SelectResult or an AskResult.

    This is how the local backend reads what its worker process sends, and how a remote endpoint's
    answer can be read. Raises ValueError on text that is not SPARQL results.
    """
    from pyoxigraph import QueryBoolean, parse_query_results

    if format_name == "xml":
        refuse_xml_declarations(data)
    problem = ""
    parsed: object = None
    try:  # solutions are read as they are iterated: a broken one is found there
        parsed = parse_query_results(data, _results_format(format_name))
        if isinstance(parsed, QueryBoolean):
            return AskResult(bool(parsed))
        variables = tuple(variable.value for variable in parsed.variables)
        rows = tuple(tuple(solution[name] for name in variables) for solution in parsed)
    except SyntaxError as error:
        problem = str(error)
    if problem:
        # Raised here, where no traceback holds the reader: pyoxigraph's may only be dropped by the
        # thread that made it, and a traceback kept by the caller can be collected on another.
        parsed = None
        raise ValueError(f"not SPARQL {format_name} results: {problem}")
    return SelectResult(variables, rows)


def parse_graph(data: bytes | str, format_name: str = "ntriples") -> GraphResult:
    """Read triples in an RDF format (canonical names of formats.RDF_FORMATS) into a GraphResult."""
    from pyoxigraph import parse

    from .formats import pyoxigraph_format

    if format_name == "rdfxml":
        refuse_xml_declarations(data)
    try:
        quads = parse(data, pyoxigraph_format(format_name))
        return GraphResult(tuple(quad.triple for quad in quads))
    except SyntaxError as error:
        raise ValueError(f"not {format_name}: {error}") from None


def _results_format(name: str) -> Any:
    from pyoxigraph import QueryResultsFormat

    return {
        "json": QueryResultsFormat.JSON,
        "xml": QueryResultsFormat.XML,
        "csv": QueryResultsFormat.CSV,
        "tsv": QueryResultsFormat.TSV,
    }[name]


# ------------------------------------------------------------------------------------------ terms


def compact_iri(iri: str, prefixes: Mapping[str, str] = PREFIXES) -> str:
    """``prefix:local`` when a known namespace starts the IRI and the rest is a plain name, else ``<iri>``."""
    best: tuple[str, str] | None = None
    for prefix, namespace in prefixes.items():
        if iri.startswith(namespace) and (best is None or len(namespace) > len(best[1])):
            best = (prefix, namespace)
    if best is not None:
        local = iri[len(best[1]) :]
        if local == "" or _LOCAL_NAME.fullmatch(local):
            return f"{best[0]}:{local}"
    return f"<{iri}>"


def term_text(term: Term, prefixes: Mapping[str, str] = PREFIXES) -> str:
    """A term as a person reads it in a table: IRIs as prefixed names, literals as their bare value."""
    from pyoxigraph import BlankNode, Literal, NamedNode

    if isinstance(term, NamedNode):
        return compact_iri(term.value, prefixes)
    if isinstance(term, Literal):
        return term.value
    if isinstance(term, BlankNode):
        return f"_:{term.value}"
    return (
        f"<< {term_text(term.subject, prefixes)} {term_text(term.predicate, prefixes)} "
        f"{term_text(term.object, prefixes)} >>"
    )


def term_json(term: Term) -> dict[str, Any]:
    """One RDF term in the W3C SPARQL 1.1 JSON results encoding."""
    from pyoxigraph import BlankNode, Literal, NamedNode

    if isinstance(term, NamedNode):
        return {"type": "uri", "value": term.value}
    if isinstance(term, BlankNode):
        return {"type": "bnode", "value": term.value}
    if isinstance(term, Literal):
        encoded: dict[str, Any] = {"type": "literal", "value": term.value}
        if term.language:
            encoded["xml:lang"] = term.language
        elif term.datatype.value != XSD_STRING:
            encoded["datatype"] = term.datatype.value
        return encoded
    return {
        "type": "triple",
        "value": {
            "subject": term_json(term.subject),
            "predicate": term_json(term.predicate),
            "object": term_json(term.object),
        },
    }


def sparql_json(result: SelectResult | AskResult) -> dict[str, Any]:
    """The W3C SPARQL 1.1 Query Results JSON document of a SELECT or ASK result."""
    if isinstance(result, AskResult):
        return {"head": {}, "boolean": result.value}
    bindings = [
        {name: term_json(value) for name, value in zip(result.variables, row, strict=True) if value is not None}
        for row in result.rows
    ]
    return {"head": {"vars": list(result.variables)}, "results": {"bindings": bindings}}


# ------------------------------------------------------------------------------------------ formats


#: The results format a file's extension names, for SELECT and ASK (``.txt``: the table).
_TABULAR_EXTENSIONS = {
    "csv": "csv",
    "tsv": "tsv",
    "json": "json",
    "srj": "json",
    "xml": "xml",
    "srx": "xml",
    "txt": "table",
}


def format_for_output(result: QueryResult, output: Path | None) -> str:
    """The format ``result`` is written in without ``--format``: the table on standard output, else
    the one the output file's extension names for this kind of result (``.csv``, ``.json``,
    ``.xml``; ``.ttl``, ``.nt``, ``.jsonld`` ... for CONSTRUCT and DESCRIBE); UsageProblem for an
    extension that names none."""
    if output is None or str(output) == "-":
        return "table"
    extension = output.suffix.lower().lstrip(".")
    graph_format = next((name for name, aliases in RDF_FORMATS.items() if extension in (name, *aliases)), None)
    if isinstance(result, GraphResult):
        if extension == "txt":
            return "turtle"
        found, choices = graph_format, ", ".join(GRAPH_FORMATS)
        if found is None and extension in _TABULAR_EXTENSIONS:
            raise UsageProblem(
                f"a CONSTRUCT or DESCRIBE query answers with triples, which {output.name} (a table's extension) "
                f"cannot hold; write to .ttl, .nt, .jsonld ... or pass --format ({choices})"
            )
    else:
        found, choices = _TABULAR_EXTENSIONS.get(extension), ", ".join(TABULAR_FORMATS)
        if found is None and graph_format is not None:
            raise UsageProblem(
                f"a SELECT or ASK query answers with a table, which {output.name} (an RDF extension) cannot "
                f"hold; write to .csv, .tsv, .json or .xml, or pass --format ({choices})"
            )
    if found is None:
        raise UsageProblem(f"cannot tell the format of {output.name} from its extension; pass --format ({choices})")
    return found


def format_result(result: QueryResult, format_name: str = "table", width: int | None = None) -> str:
    """Render a result: ``table`` (aligned; cells cut to ``width`` columns when given), ``json``,
    ``csv``, ``tsv``, ``xml`` (W3C SPARQL 1.1 results formats) for SELECT and ASK, and an RDF format
    (``table`` meaning Turtle) for CONSTRUCT and DESCRIBE. A format that does not fit the result's
    kind is a UsageProblem naming the formats that do."""
    name = GRAPH_FORMAT_ALIASES.get(format_name.lower(), format_name.lower())
    if name not in ALL_FORMATS:
        raise UsageProblem(f"unknown format {format_name!r}; use one of: {', '.join(ALL_FORMATS)}")
    if isinstance(result, GraphResult):
        if name == "table":
            name = "turtle"
        if name not in GRAPH_FORMATS:
            hint = " (jsonld for JSON)" if name == "json" else ""
            raise UsageProblem(
                f"a CONSTRUCT or DESCRIBE query answers with triples: use --format {', '.join(GRAPH_FORMATS)}{hint}"
            )
        return format_graph(result, name)
    if name not in TABULAR_FORMATS:
        kind = "an ASK" if isinstance(result, AskResult) else "a SELECT"
        raise UsageProblem(
            f"{name} is for CONSTRUCT and DESCRIBE results; {kind} query takes --format {', '.join(TABULAR_FORMATS)}"
        )
    if name == "table":
        if isinstance(result, AskResult):
            return "true\n" if result.value else "false\n"
        return render_table(result, width)
    if name == "json":
        return json.dumps(sparql_json(result), indent=2, ensure_ascii=False) + "\n"
    return with_final_newline(_w3c_text(result, name))


def with_final_newline(text: str) -> str:
    """``text`` ending with a line break unless it is empty. Some serialisers (JSON-LD, RDF/XML) stop
    without one, and output that does not end a line runs into the shell prompt or the next file."""
    return text if text == "" or text.endswith("\n") else text + "\n"


def _w3c_text(result: SelectResult | AskResult, name: str) -> str:
    """CSV, TSV and XML written by pyoxigraph's own serialisers, fed the JSON encoding of the result,
    so their escaping and term syntax are exactly the W3C formats'."""
    from pyoxigraph import parse_query_results

    encoded = json.dumps(sparql_json(result)).encode("utf-8")
    parsed = parse_query_results(encoded, _results_format("json"))
    return (parsed.serialize(format=_results_format(name)) or b"").decode("utf-8")


def format_graph(result: GraphResult, format_name: str = "turtle") -> str:
    """Triples in an RDF format, sorted so the same graph always reads the same; Turtle and TriG
    use the ontology's prefixes."""
    from pyoxigraph import Quad, serialize

    from .formats import pyoxigraph_format

    triples = sorted(result.triples, key=lambda t: (str(t.subject), str(t.predicate), str(t.object)))
    items: Iterable[Any] = triples
    if format_name in ("nquads", "trig"):
        items = [Quad(t.subject, t.predicate, t.object) for t in triples]
    prefixes = dict(PREFIXES) if format_name in ("turtle", "trig") else None
    text = (serialize(items, format=pyoxigraph_format(format_name), prefixes=prefixes) or b"").decode("utf-8")
    return with_final_newline(text)


def _is_numeric(term: Term | None) -> bool:
    from pyoxigraph import Literal

    return isinstance(term, Literal) and term.datatype.value in NUMERIC_TYPES


def _cell(term: Term | None) -> str:
    if term is None:
        return ""
    text = term_text(term)
    # A line break inside a cell would break the table's rows apart; any other control character
    # (an escape sequence, a bidi override, from a server or the data) is shown, not sent to the terminal.
    return printable(" ".join(text.split()) if any(c in text for c in "\n\r\t") else text)


def fit_widths(widths: Sequence[int], available: int, minimum: int = MIN_COLUMN_WIDTH) -> list[int]:
    """Column widths that fit ``available`` characters: the widest columns are cut first, all to the
    same cap, so narrow columns (ids, numbers, statuses) stay whole. Never below ``minimum``."""
    if sum(widths) <= available:
        return list(widths)
    for cap in range(max(widths), minimum - 1, -1):
        if sum(min(w, cap) for w in widths) <= available:
            return [min(w, cap) for w in widths]
    return [min(w, minimum) for w in widths]


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: max(width - 1, 0)] + ELLIPSIS


def render_table(result: SelectResult, width: int | None = None) -> str:
    """An aligned text table with a header, a rule, one line per row and a row count. Numeric columns
    are right-aligned. With ``width``, long cells are cut with an ellipsis so each line fits."""
    headers = list(result.variables)
    cells = [[_cell(value) for value in row] for row in result.rows]
    natural = [max([len(h)] + [len(row[i]) for row in cells]) for i, h in enumerate(headers)]
    widths = natural
    if width is not None and headers:
        widths = fit_widths(natural, width - len(COLUMN_GAP) * (len(headers) - 1))
    numeric = [
        bool(result.rows) and all(row[i] is None or _is_numeric(row[i]) for row in result.rows)
        for i in range(len(headers))
    ]

    def line(values: Sequence[str]) -> str:
        parts = []
        for i, value in enumerate(values):
            text = _cut(value, widths[i])
            parts.append(text.rjust(widths[i]) if numeric[i] else text.ljust(widths[i]))
        return COLUMN_GAP.join(parts).rstrip()

    lines = [line(headers), COLUMN_GAP.join("-" * w for w in widths)]
    lines += [line(row) for row in cells]
    count = len(result.rows)
    lines.append(f"{count} row{'s' if count != 1 else ''}")
    return "\n".join(lines) + "\n"
