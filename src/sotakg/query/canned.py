"""Canned queries: ``queries/*.rq`` files with a grlc-style header, their parameters, and running them.

A file starts with header lines ``#+ `` holding YAML::

    #+ summary: The practices that cite a paper, with version and status
    #+ description: Longer text for `sotakg queries NAME`.
    #+ params:
    #+   - name: paper
    #+     type: id                  # id | iri | string | integer
    #+     pattern: '^LIT-\\d{3,}$'   # required for ids; the whole value must match
    #+     example: LIT-051
    #+     description: the paper's identifier

Each parameter names a variable the query projects (``SELECT ?paper ...``); its value is turned into
an RDF term (an id becomes the record's IRI) and bound to that variable, never written into the text.
A malformed header is a QueryHeaderError naming the file.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import ParameterProblem, QueryHeaderError, UnknownQuery
from ..graph.vocab import PREFIXES, XSD_INTEGER, record_iri
from .sparql import DEFAULT_TIMEOUT, Backend, Bindings, query_form, run_query, tokens

if TYPE_CHECKING:
    from .results import QueryResult

HEADER_MARK = "#+"
HEADER_KEYS = ("summary", "description", "params")
PARAM_KEYS = ("name", "type", "pattern", "example", "description")
PARAM_TYPES = ("id", "iri", "string", "integer")
_PARAM_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_INTEGER = re.compile(r"[+-]?[0-9]+")
_ABSOLUTE_IRI = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:[^\s<>\"{}|\\^`]*")
_CURIE = re.compile(r"([A-Za-z][\w.-]*)?:([^\s<>\"{}|\\^`]*)")

README_START = "<!-- queries:start -->"
README_END = "<!-- queries:end -->"


@dataclass(frozen=True)
class Parameter:
    """One parameter of a canned query: ``type`` is id, iri, string or integer."""

    name: str
    type: str
    example: str
    pattern: str | None = None
    description: str = ""

    def usage(self) -> str:
        """``name=EXAMPLE`` as a user types it."""
        return f"{self.name}={self.example}"

    def expected_form(self) -> str:
        """What a value must look like, for error messages."""
        if self.type == "id":
            return f"look like {self.example} (pattern {self.pattern})"
        if self.type == "integer":
            shape = f" (pattern {self.pattern})" if self.pattern else ""
            return f"be a whole number like {self.example}{shape}"
        if self.type == "iri":
            return f"be an IRI like {self.example} (a full IRI, or a prefixed name such as id:SOTA-049)"
        if self.pattern:
            return f"match {self.pattern}, like {self.example}"
        return f"be text like {self.example}"


@dataclass(frozen=True)
class CannedQuery:
    """A query shipped under ``queries/``: its name is the file name without ``.rq``."""

    name: str
    path: Path
    summary: str
    description: str
    params: tuple[Parameter, ...]
    text: str

    def parameter(self, name: str) -> Parameter | None:
        return next((p for p in self.params if p.name == name), None)

    def signature(self) -> str:
        """The parameters as ``-p name=EXAMPLE`` arguments (empty when there are none)."""
        return " ".join(f"-p {p.usage()}" for p in self.params)


# ------------------------------------------------------------------------------------------ reading


def queries_dir() -> Path:
    """The folder of shipped canned queries."""
    from ..resources import resource_dir

    return resource_dir("queries")


def load_canned(directory: Path | None = None) -> list[CannedQuery]:
    """Every ``*.rq`` file of ``directory`` (default: the shipped queries), sorted by name.
    Raises QueryHeaderError on the first malformed file."""
    folder = directory if directory is not None else queries_dir()
    return [read_canned(path) for path in sorted(folder.glob("*.rq"))]


def find_canned(name: str, directory: Path | None = None) -> CannedQuery:
    """The canned query called ``name`` (only its file is read); UnknownQuery, with a close match if
    any, otherwise."""
    folder = directory if directory is not None else queries_dir()
    return find_named(folder, name, read_canned, UnknownQuery, "canned query", "sotakg queries")


def find_named(
    folder: Path,
    name: str,
    read: Callable[[Path], CannedQuery],
    error: type[Exception],
    noun: str,
    listing: str,
) -> CannedQuery:
    """``read`` of the file ``NAME.rq`` of ``folder``, the other files left unread; otherwise ``error``
    naming a close match, if any, and the command that lists them. ``name`` is looked up among the
    folder's file names, never joined to the folder, so no name reaches a file outside it."""
    files = {path.stem: path for path in sorted(folder.glob("*.rq"))}
    if name in files:
        return read(files[name])
    import difflib  # only a name that is not there needs it

    close = difflib.get_close_matches(name, list(files), n=1)
    hint = f"did you mean {close[0]}? " if close else ""
    raise error(f"no {noun} called {name!r}; {hint}'{listing}' lists them: {', '.join(files)}")


def read_canned(path: Path) -> CannedQuery:
    """Read one ``.rq`` file and check its header (QueryHeaderError names the file and the problem)."""
    from ..records.sources import display_path

    shown = display_path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise QueryHeaderError(f"{shown}: cannot read the query: {error}") from None

    def fail(message: str, line: int | None = None) -> QueryHeaderError:
        where = f"{shown}:{line}" if line else shown
        return QueryHeaderError(f"{where}: {message}")

    header_lines, first_header_line = _header_lines(text, fail)
    if not header_lines:
        raise fail("no header: the file must start with '#+ summary: ...' lines")
    header = _parse_header("\n".join(header_lines), first_header_line, fail)
    summary = header.get("summary")
    if not isinstance(summary, str) or not summary.strip():
        raise fail("the header has no summary (add '#+ summary: what the query answers')")
    description = header.get("description", "")
    if not isinstance(description, str):
        raise fail("description must be text")
    params = _parse_params(header.get("params", []), fail)
    _check_variables(text, params, fail)
    query = CannedQuery(path.stem, path, " ".join(summary.split()), description.strip(), params, text)
    for parameter in params:
        try:
            bind_value(parameter, parameter.example)
        except ParameterProblem as error:
            raise fail(f"the example of parameter {parameter.name} does not fit it: {error}") from None
    return query


def _header_lines(text: str, fail: Any) -> tuple[list[str], int]:
    """The YAML of the ``#+`` lines in the file's leading comment block, and the first one's number."""
    yaml_lines: list[str] = []
    first = 0
    in_header = True
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if stripped.startswith(HEADER_MARK):
            if not in_header:
                raise fail("a '#+' header line comes after the query has started; move it to the top", number)
            content = stripped[len(HEADER_MARK) :]
            yaml_lines.append(content[1:] if content.startswith(" ") else content)
            first = first or number
        elif stripped and not stripped.startswith("#"):
            in_header = False
    return yaml_lines, first


_HEADER_KEY = re.compile(r"([a-z_]+):(?: (.*))?")
_ITEM_KEY = re.compile(r"    ([a-z_]+): (.+)|  - ([a-z_]+): (.+)")


def quick_header(source: str) -> dict[str, Any] | None:
    """The header as ``yaml.safe_load`` reads it, for the plain shape the shipped queries use (``key:
    value`` lines, ``>-`` folded text, a ``params`` list of ``key: value`` items); None for anything
    else, which the full YAML reader then takes. Running one query so needs no yaml import."""
    header: dict[str, Any] = {}
    lines = source.split("\n")
    index = 0
    while index < len(lines):
        match = _HEADER_KEY.fullmatch(lines[index])
        if match is None or match.group(1) in header:
            return None
        key, rest = match.groups()
        index += 1
        block = []
        while index < len(lines) and lines[index].startswith(" "):
            block.append(lines[index])
            index += 1
        if rest == ">-":
            value: Any = _folded(block)
        elif rest is None and key == "params":
            value = _items(block)
        elif rest is not None and not block:
            value = _scalar(rest)
        else:
            return None
        if value is None:
            return None
        header[key] = value
    return header or None


def _folded(block: list[str]) -> str | None:
    """A ``>-`` block of lines with one indentation, no blank or trailing-space line: joined by spaces."""
    if not block:
        return None
    indent = len(block[0]) - len(block[0].lstrip(" "))
    if any(line[:indent] != " " * indent for line in block):
        return None
    texts = [line[indent:] for line in block]
    if any(not t or t[0] == " " or t[-1] in " \t" or not t.isprintable() for t in texts):
        return None
    return " ".join(texts)


def _items(block: list[str]) -> list[dict[str, Any]] | None:
    """``  - key: value`` items, each continued by ``    key: value`` lines."""
    items: list[dict[str, Any]] = []
    for line in block:
        match = _ITEM_KEY.fullmatch(line)
        if match is None:
            return None
        more_key, more_value, first_key, first_value = match.groups()
        if first_key is not None:
            items.append({})
        elif not items:
            return None
        key, text = (first_key, first_value) if first_key is not None else (more_key, more_value)
        value = _scalar(text)
        if value is None or key in items[-1]:
            return None
        items[-1][key] = value
    return items or None


def _scalar(text: str) -> str | int | None:
    """A quoted or plain scalar that YAML reads as a string or a decimal integer; None otherwise."""
    from ..records.fastyaml import resolves_to_string

    if not text or not text.isprintable() or text != text.strip():
        return None
    if text[0] == "'":
        inner = text[1:-1]
        if len(text) < 2 or text[-1] != "'" or "'" in inner.replace("''", ""):
            return None
        return inner.replace("''", "'")
    if text[0] == '"':
        inner = text[1:-1]
        if len(text) < 2 or text[-1] != '"' or '"' in inner or "\\" in inner:
            return None
        return inner
    if not (text[0].isascii() and (text[0].isalnum() or text[0] == "(")):
        return None
    if ": " in text or " #" in text or text.endswith(":"):
        return None
    if re.fullmatch(r"[-+]?(?:0|[1-9][0-9]*)", text):
        return int(text)
    return text if resolves_to_string(text) else None


def _parse_header(source: str, first_line: int, fail: Any) -> dict[str, Any]:
    quick = quick_header(source)
    if quick is not None:
        return _checked_header(quick, first_line, fail)
    import yaml

    try:
        header = yaml.safe_load(source)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        line = first_line + mark.line if mark is not None else None
        problem = getattr(error, "problem", None) or str(error)
        raise fail(f"the header is not valid YAML: {problem}", line) from None
    return _checked_header(header, first_line, fail)


def _checked_header(header: Any, first_line: int, fail: Any) -> dict[str, Any]:
    if not isinstance(header, dict):
        raise fail("the header must be YAML keys (summary, description, params)", first_line)
    unknown = [str(key) for key in header if key not in HEADER_KEYS]
    if unknown:
        keys = ", ".join(HEADER_KEYS)
        raise fail(f"unknown header key {', '.join(unknown)}; the keys are {keys}", first_line)
    return header


def _parse_params(raw: Any, fail: Any) -> tuple[Parameter, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise fail("params must be a list of parameters (- name: ..., type: ..., example: ...)")
    params: list[Parameter] = []
    for index, item in enumerate(raw, start=1):
        if not isinstance(item, dict):
            raise fail(f"parameter {index} must be YAML keys ({', '.join(PARAM_KEYS)})")
        unknown = [str(key) for key in item if key not in PARAM_KEYS]
        if unknown:
            keys = ", ".join(PARAM_KEYS)
            raise fail(f"parameter {index} has unknown key {', '.join(unknown)}; the keys are {keys}")
        name = item.get("name")
        if not isinstance(name, str) or not _PARAM_NAME.fullmatch(name):
            raise fail(f"parameter {index} needs a name that is a SPARQL variable name (letters, digits, _)")
        if any(p.name == name for p in params):
            raise fail(f"parameter {name} is declared twice")
        kind = item.get("type")
        if kind not in PARAM_TYPES:
            given = "no type" if kind is None else f"type {kind!r}"
            raise fail(f"parameter {name} has {given}; the type must be one of {', '.join(PARAM_TYPES)}")
        pattern = item.get("pattern")
        if pattern is not None:
            if not isinstance(pattern, str):
                raise fail(f"the pattern of parameter {name} must be text (a regular expression)")
            try:
                re.compile(pattern)
            except re.error as error:
                raise fail(f"the pattern of parameter {name} is not a regular expression: {error}") from None
        elif kind == "id":
            raise fail(f"parameter {name} is an id and needs a pattern, e.g. '^LIT-\\d{{3,}}$'")
        example = item.get("example")
        if example is None or isinstance(example, (dict, list)):
            raise fail(f"parameter {name} needs an example value")
        description = item.get("description", "")
        if not isinstance(description, str):
            raise fail(f"the description of parameter {name} must be text")
        params.append(Parameter(name, kind, str(example), pattern, description))
    return tuple(params)


def _check_variables(text: str, params: tuple[Parameter, ...], fail: Any) -> None:
    """Each parameter must be a variable the query projects: pyoxigraph substitutes only those.
    A CONSTRUCT query (a view) projects nothing: there the variable must occur in its WHERE clause."""
    if not params:
        return
    items = list(tokens(text))
    if query_form(text) == "CONSTRUCT":
        _check_where_variables(items, params, fail)
        return
    words = [(i, t.text.upper()) for i, t in enumerate(items) if t.kind == "word"]
    select = next((i for i, word in words if word == "SELECT"), None)
    anywhere = {t.text[1:] for t in items if t.kind == "var"}
    if select is None:
        projected = anywhere
    else:
        projected = set()
        depth = 0
        for token in items[select + 1 :]:
            if token.kind == "punct" and token.text == "(":
                depth += 1
            elif token.kind == "punct" and token.text == ")":
                depth -= 1
            elif depth == 0 and (
                (token.kind == "punct" and token.text == "{")
                or (token.kind == "word" and token.text.upper() == "WHERE")
            ):
                break
            elif depth == 0 and token.kind == "punct" and token.text == "*":
                projected = anywhere
                break
            elif token.kind == "var":
                projected.add(token.text[1:])
    for parameter in params:
        if parameter.name not in projected:
            raise fail(
                f"parameter {parameter.name} is not a variable the query projects; add ?{parameter.name} "
                f"to its SELECT clause (values are bound to projected variables)"
            )


def _check_where_variables(items: list[Any], params: tuple[Parameter, ...], fail: Any) -> None:
    """pyoxigraph binds a CONSTRUCT query's variables in its WHERE pattern (a variable used only in
    the template, or only inside a subquery that does not project it, is refused when the query runs)."""
    words = [i for i, t in enumerate(items) if t.kind == "word" and t.text.upper() == "WHERE"]
    where = {t.text[1:] for t in items[words[0] + 1 :] if t.kind == "var"} if words else set()
    for parameter in params:
        if parameter.name not in where:
            raise fail(
                f"parameter {parameter.name} does not occur in the WHERE clause of the CONSTRUCT query; "
                f"use ?{parameter.name} in its WHERE pattern (values are bound to the pattern's variables)"
            )


# ------------------------------------------------------------------------------------------ binding


def parse_assignments(pairs: Iterable[str]) -> dict[str, str]:
    """``["paper=LIT-051", ...]`` as a dict; a pair without ``=`` or given twice is a ParameterProblem."""
    values: dict[str, str] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        name = name.strip()
        if not sep or not name:
            raise ParameterProblem(f"parameters are given as -p NAME=VALUE, not {pair!r}")
        if name in values:
            raise ParameterProblem(f"parameter {name} is given twice")
        values[name] = value
    return values


def bind_value(parameter: Parameter, value: str) -> Any:
    """The RDF term for one parameter value, or ParameterProblem saying the expected form."""
    from pyoxigraph import Literal, NamedNode

    def wrong() -> ParameterProblem:
        return ParameterProblem(f"parameter {parameter.name} must {parameter.expected_form()}, not {value!r}")

    # ASCII: a query's \\d means 0-9 here, as in SPARQL, never another script's digits.
    if parameter.pattern is not None and not re.fullmatch(parameter.pattern, value, re.ASCII):
        raise wrong()
    if parameter.type == "id":
        try:
            return NamedNode(record_iri(value))
        except ValueError:
            raise wrong() from None
    if parameter.type == "string":
        return Literal(value)
    if parameter.type == "integer":
        if not _INTEGER.fullmatch(value.strip()):
            raise wrong()
        return Literal(str(int(value)), datatype=NamedNode(XSD_INTEGER))
    # iri: <...>, a prefixed name of the ontology's prefixes, or an absolute IRI
    candidate = value.strip()
    if candidate.startswith("<") and candidate.endswith(">"):
        candidate = candidate[1:-1]
    curie = _CURIE.fullmatch(candidate)
    if curie and (curie.group(1) or "") in PREFIXES:
        candidate = PREFIXES[curie.group(1) or ""] + curie.group(2)
    if not _ABSOLUTE_IRI.fullmatch(candidate):
        raise wrong()
    try:
        return NamedNode(candidate)
    except ValueError:
        raise wrong() from None


def bind_parameters(query: CannedQuery, raw: Mapping[str, str], noun: str = "query") -> Bindings:
    """The bindings of ``raw`` values ({name: text}) for ``query``: every parameter given, none unknown,
    each of the expected form (ParameterProblem otherwise). ``noun`` names the query in messages
    (``view`` for the graph views)."""
    from pyoxigraph import Variable

    unknown = [name for name in raw if query.parameter(name) is None]
    if unknown:
        takes = (
            "takes " + ", ".join(f"{p.name} ({p.type}, e.g. -p {p.usage()})" for p in query.params)
            if query.params
            else "takes no parameters"
        )
        raise ParameterProblem(f"{noun} {query.name} has no parameter {', '.join(unknown)}; it {takes}")
    missing = [p for p in query.params if p.name not in raw]
    if missing:
        needed = " ".join(f"-p {p.usage()}" for p in missing)
        forms = "; ".join(f"{p.name} must {p.expected_form()}" for p in missing)
        raise ParameterProblem(f"{noun} {query.name} needs {needed} ({forms})")
    return {Variable(p.name): bind_value(p, raw[p.name]) for p in query.params}


def run_canned(
    backend: Backend,
    query: CannedQuery | str,
    raw: Mapping[str, str] | None = None,
    timeout: float = DEFAULT_TIMEOUT,
) -> QueryResult:
    """Run a canned query (or the one named so) with ``raw`` parameter values on ``backend``."""
    canned = find_canned(query) if isinstance(query, str) else query
    bindings = bind_parameters(canned, raw or {})
    return run_query(backend, canned.text, bindings, timeout)


# ------------------------------------------------------------------------------------------ listing


def parameters_text(query: CannedQuery) -> str:
    """``paper (id, e.g. LIT-051)`` for each parameter, or ``-``."""
    return ", ".join(f"{p.name} ({p.type}, e.g. {p.example})" for p in query.params) or "-"


def listing(queries: Iterable[CannedQuery]) -> str:
    """Canned queries or views as an aligned text table: name, parameters, summary."""
    rows = [(q.name, parameters_text(q), q.summary) for q in queries]
    header = ("NAME", "PARAMETERS", "SUMMARY")
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(2)]
    lines = [f"{r[0].ljust(widths[0])}  {r[1].ljust(widths[1])}  {r[2]}" for r in [header, *rows]]
    return "\n".join(lines) + "\n"


def query_details(query: CannedQuery, command: str = "sotakg query") -> str:
    """One canned query (or view) in full: summary, description, parameters with their forms, and its
    SPARQL; ``command`` is what runs it."""
    lines = [f"{query.name}: {query.summary}"]
    if query.description:
        lines += ["", query.description]
    lines += ["", f"Usage: {command} {query.name} {query.signature()}".rstrip()]
    for p in query.params:
        about = f" - {p.description}" if p.description else ""
        lines.append(f"  {p.name} ({p.type}): must {p.expected_form()}{about}")
    body = "\n".join(line for line in query.text.splitlines() if not line.strip().startswith(HEADER_MARK))
    lines += ["", body.strip()]
    return "\n".join(lines) + "\n"


def queries_table_markdown(queries: Iterable[CannedQuery] | None = None) -> str:
    """The README's table of canned queries (between README_START and README_END)."""
    lines = ["| name | parameters | answers |", "|---|---|---|"]
    for q in load_canned() if queries is None else queries:
        params = ", ".join(f"`{p.name}` ({p.type}, e.g. `{p.example}`)" for p in q.params) or "–"
        summary = q.summary.replace("|", "\\|")
        lines.append(f"| `{q.name}` | {params} | {summary} |")
    return "\n".join(lines) + "\n"
