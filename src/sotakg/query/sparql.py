"""Running SPARQL safely: lexical checks, a backend interface, and the local backend with a time limit.

Every query, canned or ad hoc, goes through ``run_query(backend, text, bindings, timeout)``:

* ``check_query`` refuses, before anything runs, what must not run here: SPARQL Update (the graph is
  compiled from the data folder, never edited), ``SERVICE``, ``LOAD`` and ``FROM``/``FROM NAMED``
  (which would make the engine fetch from the network), and brackets or chains of prefix operators
  (``!!!…``) nested deeper than ``MAX_DEPTH`` (the engine's parser recurses and would overflow its stack).
* A backend runs the query. ``LocalBackend`` queries the embedded store in a forked worker process,
  because pyoxigraph cannot be interrupted from Python: on timeout the worker is killed and
  ``QueryTimeout`` raised; a worker that crashes becomes ``QueryFailed``. Nothing partial comes back.
* Parameter values are RDF terms bound to variables (``bindings``), never spliced into the text.
"""

from __future__ import annotations

import os
import re
import select
import signal
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from ..errors import QueryFailed, QueryRefused, QuerySyntaxError, QueryTimeout
from ..graph.vocab import PREFIXES
from .results import AskResult, QueryResult, Term, parse_graph, parse_sparql_results
from .syntax_help import explain_syntax_error

if TYPE_CHECKING:
    from pyoxigraph import Variable

#: Seconds a query may run before it is stopped (``--timeout``).
DEFAULT_TIMEOUT = 30.0
#: Deepest nesting of (), {} and [] accepted; pyoxigraph's parser overflows its stack in the thousands.
MAX_DEPTH = 100
#: Longest query text accepted, in characters.
MAX_QUERY_CHARS = 512 * 1024
#: Most terms (variables, IRIs, names, literals) in one query: a basic graph pattern of thousands of
#: triple patterns, a long collection or VALUES block makes the engine's planner recurse per term.
MAX_TERMS = 6000
#: Most UNION arms in one query.
MAX_UNIONS = 1000
_TERM_KINDS = frozenset({"var", "iri", "pname", "string", "number"})

Bindings = Mapping["Variable", Term]

UPDATE_KEYWORDS = frozenset({"INSERT", "DELETE", "LOAD", "CLEAR", "CREATE", "DROP", "COPY", "MOVE", "ADD"})
QUERY_FORMS = ("SELECT", "ASK", "CONSTRUCT", "DESCRIBE")
_OPENERS = {"(": ")", "{": "}", "[": "]"}
_CLOSERS = frozenset(_OPENERS.values())


# ------------------------------------------------------------------------------------------ lexing


@dataclass(frozen=True)
class Token:
    """A lexical unit of SPARQL text: ``kind`` is word (a bare keyword-like name), pname (a prefixed
    name), var, iri, string, number, langtag or punct; ``offset`` is its index in the text."""

    kind: str
    text: str
    offset: int


# The terminals of SPARQL 1.1 as the engine (Oxigraph 0.5's spargebra) parses them: its grammar is a
# PEG, whose repetitions never give back what they matched, hence the possessive quantifiers. Where
# the engine departs from the W3C grammar, the engine wins (PN_CHARS_BASE stops at U+FFFD; a local
# name holds at most one run of dots), because what matters is what the engine will see.
_BASE = (
    "A-Za-z\u00c0-\u00d6\u00d8-\u00f6\u00f8-\u02ff\u0370-\u037d\u037f-\u1fff\u200c-\u200d"
    "\u2070-\u218f\u2c00-\u2fef\u3001-\ud7ff\uf900-\ufdcf\ufdf0-\ufffd"
)
_U = "_" + _BASE
_CHARS = "\\-0-9\u00b7\u0300-\u036f\u203f-\u2040" + _U
_PLX = r"(?:%[0-9A-Fa-f]{2}|\\[_~.\-!$&'()*+,;=/?#@%])"
_PN_PREFIX = f"[{_BASE}][{_CHARS}]*+(?:\\.++[{_CHARS}]++)*+"
_PN_LOCAL = f"(?:[{_U}:0-9]|{_PLX})(?:[{_CHARS}:]|{_PLX})*+(?:\\.++(?:[{_CHARS}:]|{_PLX})++)?+"
_PNAME = re.compile(f"(?:{_PN_PREFIX})?+:(?:{_PN_LOCAL})?+")
_BLANK_NODE = re.compile(f"_:[{_U}0-9][{_CHARS}]*+(?:\\.++[{_CHARS}]++)*+")
_VAR = re.compile(f"[?$][{_U}0-9][{_U}0-9\u00b7\u0300-\u036f\u203f-\u2040]*+")
_WORD = re.compile(f"[{_U}][{_U}0-9]*+")
_LANGTAG = re.compile(r"@[a-zA-Z]++(?:-[a-zA-Z0-9]++)*+(?:--[a-zA-Z]++)?+")
_NUMBER = re.compile(
    r"[0-9]++\.[0-9]*+[eE][+-]?[0-9]++|\.[0-9]++[eE][+-]?[0-9]++|[0-9]++[eE][+-]?[0-9]++|[0-9]*+\.[0-9]++|[0-9]++"
)
_ESCAPES = r"""\\[tbnrf"'\\]|\\u[0-9A-Fa-f]{4}|\\U[0-9A-Fa-f]{8}"""
_STRING = {
    "'''": re.compile("'''(?:(?:''|')?+(?:[^'\\\\]|" + _ESCAPES + "))*+'''"),
    '"""': re.compile('"""(?:(?:""|")?+(?:[^"\\\\]|' + _ESCAPES + '))*+"""'),
    "'": re.compile("'(?:[^'\\\\\\n\\r]|" + _ESCAPES + ")*+'"),
    '"': re.compile('"(?:[^"\\\\\\n\\r]|' + _ESCAPES + ')*+"'),
}
# A string the engine cannot read (unterminated, a bad escape) fails the whole query there; it is
# still taken as one token so that tools reading unfinished text (the console) see where it runs.
_LOOSE_STRING = {
    "'''": re.compile(r"'''(?:[^'\\]|\\.|'(?!''))*+(?:'''|\Z)", re.S),
    '"""': re.compile(r'"""(?:[^"\\]|\\.|"(?!""))*+(?:"""|\Z)', re.S),
    "'": re.compile(r"'(?:[^'\\\n\r]|\\.)*+(?:'|$)", re.M),
    '"': re.compile(r'"(?:[^"\\\n\r]|\\.)*+(?:"|$)', re.M),
}
#: An IRI as SPARQL 1.1 defines it. Where the engine compares (``?a<?b>?c``), the standard's longest
#: token rule reads an IRI: such text is refused rather than given two meanings.
_STANDARD_IRIREF = re.compile(r'<[^<>"{}|^`\\\x00-\x20]*+>')
_WHITESPACE = re.compile(r"[ \t\r\n]++")
_COMMENT_END = re.compile(r"[\r\n]")
#: Tokens after which a ``<`` inside an expression compares rather than opens an IRI.
_OPERAND_KINDS = frozenset({"var", "iri", "pname", "string", "number", "langtag"})


@dataclass
class _Frame:
    """An open bracket while lexing: which one, and what the engine parses inside it. A ``{`` (and
    the text outside every bracket) holds a pattern, a projection (after SELECT) or solution
    modifiers (after the WHERE group); a ``(`` holds an expression or not (a collection, a path,
    VALUES); ``[`` never does."""

    opener: str
    mode: str


def _opens_expression(frame: _Frame, previous: Token | None, before: Token | None) -> bool:
    """Whether a ``(`` opens an expression, from what encloses it and the two tokens before it."""
    if frame.opener == "(":
        return frame.mode == "expression"
    if frame.opener == "[":
        return False
    if frame.mode in ("projection", "modifiers"):  # SELECT (…), GROUP BY (…), HAVING, ORDER BY
        return not (previous is not None and previous.kind == "word" and previous.text.upper() == "VALUES")
    if previous is None:
        return False
    if previous.kind == "word" and previous.text.upper() in ("FILTER", "BIND"):
        return True
    # FILTER regex(…), FILTER <f>(…), FILTER ex:f(…)
    return (
        previous.kind in ("word", "iri", "pname")
        and before is not None
        and before.kind == "word"
        and before.text.upper() == "FILTER"
    )


def _compares(frame: _Frame, previous: Token | None) -> bool:
    """Whether a ``<`` here is the less-than operator: only inside an expression, after an operand."""
    if frame.opener != "(" or frame.mode != "expression" or previous is None:
        return False
    if previous.kind in _OPERAND_KINDS:
        return True
    if previous.kind == "punct":
        return previous.text == ")"
    return previous.kind == "word" and previous.text.lower() in ("true", "false")


# The engine reads an IRI as ``<``, anything but ``>``, ``>``, then checks it: wherever an IRI may
# start, a ``<`` is an IRI or a syntax error (``<<`` aside, which no valid IRI begins with).


def tokens(text: str) -> Iterator[Token]:
    """Split SPARQL text into tokens as the query engine does, skipping whitespace and comments.

    Strings, IRIs, prefixed names (with their ``\\#`` and ``\\'`` escapes) and variables are single
    tokens, so a keyword inside them (``"DROP ALL"``, ``<http://x/load>``) is never taken for one,
    and a ``#`` or a quote is a comment or a string exactly where the engine takes it for one. A
    ``<`` opens an IRI except inside an expression after an operand, where it compares: that needs
    the brackets around it, which are tracked (``_Frame``). Signs are separate ``punct`` tokens, as
    the engine allows blanks between a sign and its number. Runs in time linear in the text."""
    stack = [_Frame("", "modifiers")]
    next_close = -2  # where the next ">" is (-1: none), found once per stretch: linear even for "< < < …"
    previous: Token | None = None
    before: Token | None = None
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c in " \t\r\n":
            i = _WHITESPACE.match(text, i).end()  # type: ignore[union-attr]
            continue
        if c == "#":
            end = _COMMENT_END.search(text, i)
            i = end.start() if end else n
            continue
        frame = stack[-1]
        if c in "\"'":
            quote = c * 3 if text.startswith(c * 3, i) else c
            match = _STRING[quote].match(text, i) or _LOOSE_STRING[quote].match(text, i)
            token = Token("string", text[i : match.end() if match else n], i)
        elif c == "<" and not text.startswith("<<", i) and not _compares(frame, previous):
            if next_close != -1 and next_close < i:
                next_close = text.find(">", i)
            token = Token("iri", text[i : next_close + 1], i) if next_close > i else Token("punct", c, i)
        elif c in "?$" and (var := _VAR.match(text, i)):
            token = Token("var", var.group(), i)
        elif c == "@" and (tag := _LANGTAG.match(text, i)):
            token = Token("langtag", tag.group(), i)
        elif (c.isdigit() or c == ".") and (number := _NUMBER.match(text, i)):
            token = Token("number", number.group(), i)
        elif c == "_" and (blank := _BLANK_NODE.match(text, i)):
            token = Token("pname", blank.group(), i)
        elif (name := _PNAME.match(text, i)) and name.end() > i:
            token = Token("pname", name.group(), i)
        elif word := _WORD.match(text, i):
            token = Token("word", word.group(), i)
        else:
            token = Token("punct", c, i)
        i = token.offset + len(token.text)
        if token.kind == "punct":
            if c == "(":
                stack.append(_Frame("(", "expression" if _opens_expression(frame, previous, before) else "plain"))
            elif c == "[":
                stack.append(_Frame("[", "plain"))
            elif c == "{":
                if frame.opener in ("", "{") and frame.mode == "projection":
                    frame.mode = "modifiers"  # once this WHERE group closes
                stack.append(_Frame("{", "pattern"))
            elif c in ")]}" and len(stack) > 1:
                stack.pop()
        elif token.kind == "word" and token.text.upper() == "SELECT" and frame.opener in ("", "{"):
            frame.mode = "projection"
        before, previous = previous, token
        yield token


def position(text: str, offset: int) -> tuple[int, int]:
    """1-based (line, column) of a character offset, columns counted in characters."""
    line = text.count("\n", 0, offset) + 1
    column = offset - (text.rfind("\n", 0, offset) + 1) + 1
    return line, column


def query_form(text: str) -> str | None:
    """SELECT, ASK, CONSTRUCT or DESCRIBE: the first query-form keyword of the text, if any."""
    for token in tokens(text):
        if token.kind == "word" and token.text.upper() in QUERY_FORMS:
            return token.text.upper()
    return None


#: Prefix operators the engine's parser recurses on, one level each: ``!``, unary ``-`` and ``+`` in
#: expressions, ``^`` (inverse) and ``!`` (negation) in property paths.
_UNARY = frozenset("!-+^")


class _Depth:
    """How deep the engine's parser recurses, fed one token at a time (see ``nesting_depth``)."""

    def __init__(self) -> None:
        self.open_brackets: list[int] = []  # for each open bracket, the prefix operators waiting on it
        self.pending = 0  # prefix operators since the last operand or bracket
        self.waiting = 0  # sum(open_brackets), kept as we go

    def feed(self, token: Token) -> int:
        """The level this token reaches."""
        if token.kind == "punct" and token.text in _UNARY:
            self.pending += 1
            return len(self.open_brackets) + self.waiting + self.pending
        if token.kind == "punct" and token.text in _OPENERS:
            self.open_brackets.append(self.pending)
            self.waiting += self.pending
            self.pending = 0
            return len(self.open_brackets) + self.waiting
        if token.kind == "punct" and token.text in _CLOSERS and self.open_brackets:
            self.waiting -= self.open_brackets.pop()
        self.pending = 0
        return 0


def nesting_depth(text: str) -> tuple[int, int]:
    """The deepest nesting of (), {} and [] outside strings, IRIs and comments, counting each prefix
    operator (``!``, ``-``, ``+``, ``^``) in a run of them as one more level until its operand ends,
    and the offset of the token that first reached it.

    The engine's parser recurses once per bracket and once per prefix operator, so
    ``FILTER(!!!…!true)`` is as deep as that many parentheses. Operators before a bracket stay open
    until the bracket closes; a binary ``-`` or ``+`` counts for a moment, which errs on the safe side.
    """
    depth = _Depth()
    deepest = where = 0
    for token in tokens(text):
        level = depth.feed(token)
        if level > deepest:
            deepest, where = level, token.offset
    return deepest, where


#: Words the engine would act on even glued to other letters: it matches keywords by prefix, with no
#: word boundary (``trueSERVICE``, ``1SERVICE`` and ``SERVICE:x`` reach its SERVICE rule).
_NETWORK_KEYWORDS = ("SERVICE", "FROM")
_KEYWORD_IN_WORD = re.compile("|".join(sorted({*UPDATE_KEYWORDS, *_NETWORK_KEYWORDS}, key=len, reverse=True)), re.I)
_NETWORK_IN_PREFIX = re.compile("|".join(_NETWORK_KEYWORDS), re.I)


@dataclass(frozen=True)
class QueryLimits:
    """How much a query may ask of the engine: below what it evaluates without overflowing its stack
    (measured in ``benchmarks/serve.py``-style probes; see ``MAX_*``), with a margin."""

    max_depth: int = MAX_DEPTH
    max_chars: int = MAX_QUERY_CHARS
    max_terms: int = MAX_TERMS
    max_unions: int = MAX_UNIONS


def _keyword_at(token: Token) -> tuple[str, int] | None:
    """A keyword the engine could read in this token, and its offset in the token."""
    if token.kind == "word" or token.kind == "number":
        found = _KEYWORD_IN_WORD.search(token.text)
    elif token.kind == "pname" and not token.text.startswith("_:"):
        found = _NETWORK_IN_PREFIX.search(token.text.split(":", 1)[0])
    else:
        return None
    return (found.group().upper(), found.start()) if found else None


def check_query(text: str, max_depth: int = MAX_DEPTH, limits: QueryLimits | None = None) -> str | None:
    """Refuse (QueryRefused) a text that is SPARQL Update, uses SERVICE, LOAD or a FROM clause, nests
    brackets and prefix operators deeper than ``max_depth`` (``nesting_depth``), or is bigger than
    ``limits`` allow (characters, tokens, terms, UNION arms). Returns the query form (``query_form``).

    The text is read with ``tokens``, which splits it as the engine does, and a keyword is refused
    wherever the engine could read it, glued to other letters included (``trueSERVICE``). One pass,
    stopping at the first limit passed: the cost is bounded whatever the size of the text."""
    limits = limits or QueryLimits(max_depth=max_depth)
    if len(text) > limits.max_chars:
        raise QueryRefused(
            f"the query is {len(text)} characters long; the limit is {limits.max_chars}. Split it into smaller queries"
        )
    form = None
    count = terms = unions = 0
    max_tokens, max_terms, max_unions = limits.max_terms * 4, limits.max_terms, limits.max_unions
    depth = _Depth()
    for token in tokens(text):
        count += 1
        kind = token.kind
        if kind in _TERM_KINDS:
            terms += 1
        elif kind == "word" and token.text.upper() == "UNION":
            unions += 1
        if count > max_tokens or terms > max_terms or unions > max_unions:
            limit, what = (
                (max_tokens, "tokens")
                if count > max_tokens
                else (max_terms, "terms (variables, IRIs, names, literals)")
                if terms > max_terms
                else (max_unions, "UNIONs")
            )
            line, column = position(text, token.offset)
            raise QueryRefused(
                f"the query has more than {limit} {what} (line {line}, column {column}); the engine "
                f"could not evaluate it safely. Split it into smaller queries"
            )
        if depth.feed(token) > limits.max_depth:
            line, column = position(text, token.offset)
            raise QueryRefused(
                f"the query nests brackets and prefix operators (! - + ^) more than {limits.max_depth} levels "
                f"deep (line {line}, column {column} reaches level {limits.max_depth + 1}); the limit is "
                f"{limits.max_depth}"
            )
        if token.kind == "punct" and token.text == "<" and _STANDARD_IRIREF.match(text, token.offset):
            line, column = position(text, token.offset)
            raise QueryRefused(
                f"'<' at line {line}, column {column} reads as an IRI in SPARQL 1.1 and as 'less than' in the "
                f"engine; put a space after '<' to compare"
            )
        if kind == "punct" or kind == "var" or kind == "iri" or kind == "string":
            continue  # nothing the engine could read as a keyword
        if form is None and kind == "word" and token.text.upper() in QUERY_FORMS:
            form = token.text.upper()
        found = _keyword_at(token)
        if found is None:
            continue
        keyword, inside = found
        line, column = position(text, token.offset + inside)
        where = f"line {line}, column {column}"
        if keyword == "SERVICE":
            raise QueryRefused(
                f"SERVICE ({where}) would make the store query a remote endpoint over the network; "
                f"queries here run on the local graph only"
            )
        if keyword == "LOAD":
            raise QueryRefused(
                f"LOAD ({where}) would make the store fetch data from the network and change the graph; "
                f"queries here are read-only (add records under the data folder instead)"
            )
        if keyword in UPDATE_KEYWORDS:
            raise QueryRefused(
                f"{keyword} ({where}) is SPARQL Update, and the graph is read-only here: it is compiled "
                f"from the data folder. Only SELECT, ASK, CONSTRUCT and DESCRIBE queries run"
            )
        if keyword == "FROM":
            raise QueryRefused(
                f"FROM ({where}) names a dataset the store would have to fetch; everything is in the "
                f"store's default graph, so leave the FROM clause out"
            )
    return form


# ------------------------------------------------------------------------------------------ syntax errors

_ERROR_AT = re.compile(r"^error at (\d+):(\d+): (.*)$", re.S)
_EXPECTED_ITEM = re.compile(r'"(?:[^"\\]|\\.)*"|\[[^\]]*\]|[A-Za-z_]\w*')
MAX_EXPECTED = 10


def _tidy_expected(detail: str) -> str:
    """pyoxigraph lists every token it expected, character classes included; keep the readable ones."""
    if not detail.startswith("expected one of "):
        return detail
    items = [item for item in _EXPECTED_ITEM.findall(detail[len("expected one of ") :]) if not item.startswith("[")]
    if not items:
        return "unexpected text"
    shown = ", ".join(items[:MAX_EXPECTED]) + (", …" if len(items) > MAX_EXPECTED else "")
    return f"expected one of {shown}"


def syntax_error(message: str, text: str) -> QuerySyntaxError:
    """Turn pyoxigraph's ``error at L:C: ...`` into a QuerySyntaxError that says line and column and
    shows the line with a caret. Positions are the user's, since prefixes are passed, not prepended."""
    match = _ERROR_AT.match(message.strip())
    if not match:
        return QuerySyntaxError(f"syntax error: {message}")
    line, column, raw = int(match.group(1)), int(match.group(2)), " ".join(match.group(3).split())
    explained = explain_syntax_error(text, list(tokens(text)), line, column, raw, PREFIXES)
    line, column, detail = explained or (line, column, _tidy_expected(raw))
    lines = text.splitlines() or [""]
    shown = lines[line - 1] if 0 < line <= len(lines) else ""
    gutter = f"{line:>4} | "
    caret = " " * (len(gutter) - 2) + "| " + " " * (max(column, 1) - 1) + "^"
    return QuerySyntaxError(
        f"syntax error at line {line}, column {column}: {detail}\n{gutter}{shown}\n{caret}", line, column
    )


# ------------------------------------------------------------------------------------------ backends


class Backend(Protocol):
    """Something that answers read-only SPARQL queries: the embedded store, or a remote endpoint.

    ``run`` returns a SelectResult, AskResult or GraphResult; ``bindings`` maps variables to RDF terms
    that replace them (the variables are projected by the query); ``timeout`` is in seconds. It raises
    QueryRefused, QuerySyntaxError, QueryTimeout or QueryFailed. ``label`` names it in messages."""

    @property
    def label(self) -> str: ...

    def run(self, text: str, bindings: Bindings | None = None, timeout: float = DEFAULT_TIMEOUT) -> QueryResult: ...


@dataclass
class LocalBackend:
    """The embedded Oxigraph store at ``store_path``, queried in a forked worker per query.

    With ``data_dir``, each query first checks that the store holds the current data and rebuilds
    it when not (a few stat calls when nothing changed), so a long-lived backend follows edits.
    """

    store_path: Path
    data_dir: Path | None = None
    prefixes: Mapping[str, str] = field(default_factory=lambda: dict(PREFIXES))
    max_depth: int = MAX_DEPTH

    @property
    def label(self) -> str:
        from ..records.schema import display_path

        return f"the store {display_path(self.store_path)}"

    def database(self) -> Path:
        """The Oxigraph database directory of the store's current generation (built first if stale)."""
        from ..graph.open import current_database

        return current_database(self.data_dir, self.store_path)

    def run(self, text: str, bindings: Bindings | None = None, timeout: float = DEFAULT_TIMEOUT) -> QueryResult:
        """Check the query, run it on the store in a worker process, and read its answer."""
        check_query(text, self.max_depth)
        database = str(self.database())
        prefixes = dict(self.prefixes)
        substitutions = dict(bindings) if bindings else None

        def work() -> bytes:
            return _execute(database, text, prefixes, substitutions)

        return _decode(run_in_worker(work, timeout), text)


def run_query(
    backend: Backend, text: str, bindings: Bindings | None = None, timeout: float = DEFAULT_TIMEOUT
) -> QueryResult:
    """Check a query (``check_query``) and run it on ``backend``. The one entry point for every query."""
    if timeout <= 0:
        from ..errors import UsageProblem

        raise UsageProblem(f"the timeout must be a positive number of seconds, not {timeout:g}")
    check_query(text, getattr(backend, "max_depth", MAX_DEPTH))
    return backend.run(text, bindings, timeout)


def values_clause(bindings: Bindings) -> str:
    """A trailing ``VALUES`` block stating ``bindings`` in SPARQL syntax, for a backend without
    pyoxigraph's substitutions (a remote endpoint). Terms are written by pyoxigraph, escaped, so a
    value can never close the block; the variables must be projected (canned queries are checked)."""
    names = " ".join(f"?{variable.value}" for variable in bindings)
    values = " ".join(str(term) for term in bindings.values())
    return f"\nVALUES ({names}) {{ ({values}) }}\n"


# ------------------------------------------------------------------------------------------ the worker

_KIND_SEPARATOR = b"\n"
_WORKER_OK = b"0"
_WORKER_FAILED = b"1"


def _execute(database: str, text: str, prefixes: dict[str, str], substitutions: dict | None) -> bytes:
    """Run in the worker: open the store read-only, query it, and encode the answer as ``kind\\n`` and
    the payload (SPARQL JSON results, ``true``/``false``, N-Triples, or an error message)."""
    from pyoxigraph import QueryBoolean, QueryResultsFormat, QuerySolutions, RdfFormat, Store

    try:
        store = Store.read_only(database)
    except OSError as error:
        return b"error\n" + f"cannot open the store: {error}".encode()
    try:
        answer = store.query(text, prefixes=prefixes, substitutions=substitutions)
        if isinstance(answer, QuerySolutions):
            return b"select\n" + (answer.serialize(format=QueryResultsFormat.JSON) or b"")
        if isinstance(answer, QueryBoolean):
            return b"ask\n" + (b"true" if bool(answer) else b"false")
        return b"graph\n" + (answer.serialize(format=RdfFormat.N_TRIPLES) or b"")
    except SyntaxError as error:
        return b"syntax\n" + str(error).encode()
    except Exception as error:  # noqa: BLE001 - the worker reports every failure instead of dying
        return b"error\n" + f"{type(error).__name__}: {error}".encode()


def _decode(payload: bytes, text: str) -> QueryResult:
    kind, _, body = payload.partition(_KIND_SEPARATOR)
    if kind == b"select":
        return parse_sparql_results(body, "json")
    if kind == b"ask":
        return AskResult(body == b"true")
    if kind == b"graph":
        return parse_graph(body, "ntriples")
    message = body.decode("utf-8", "replace")
    if kind == b"syntax":
        raise syntax_error(message, text)
    raise QueryFailed(f"the query failed: {message}")


def run_in_worker(work: Callable[[], bytes], timeout: float) -> bytes:
    """Run ``work`` in a forked child and return the bytes it produced.

    Raises QueryTimeout if the child has not finished within ``timeout`` seconds (it is killed; no
    partial answer is returned), and QueryFailed if ``work`` raises or the child dies by a signal.
    Fork, not spawn: the child starts in a millisecond with everything already imported.
    """
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the worker
        os.close(read_end)
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        _no_core_dump()
        code = 0
        try:
            try:
                payload = _WORKER_OK + work()
            except BaseException as error:  # noqa: BLE001 - reported to the parent, never raised here
                payload = _WORKER_FAILED + f"{type(error).__name__}: {error}".encode()
            with os.fdopen(write_end, "wb") as pipe:
                pipe.write(payload)
        except BaseException:  # noqa: BLE001 - the parent sees an empty answer
            code = 1
        finally:
            os._exit(code)
    os.close(write_end)
    chunks: list[bytes] = []
    finished = False
    deadline = time.monotonic() + timeout
    try:
        while True:
            remaining = deadline - time.monotonic()
            ready = select.select([read_end], [], [], max(remaining, 0))[0] if remaining > 0 else []
            if not ready:
                raise QueryTimeout(f"query ran longer than {timeout:g} s; raise --timeout or narrow the query")
            chunk = os.read(read_end, 1 << 16)
            if not chunk:
                break
            chunks.append(chunk)
        finished = True
    finally:
        os.close(read_end)
        if not finished:
            _kill(pid)
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        raise QueryFailed(
            f"the query engine crashed ({signal.Signals(number).name}); the query may be too large or too "
            f"deeply nested to evaluate"
        )
    payload = b"".join(chunks)
    if payload.startswith(_WORKER_OK):
        return payload[len(_WORKER_OK) :]
    if payload.startswith(_WORKER_FAILED):
        raise QueryFailed(f"the query failed: {payload[len(_WORKER_FAILED) :].decode('utf-8', 'replace')}")
    raise QueryFailed("the query engine stopped without an answer")


def _no_core_dump() -> None:
    """A worker that crashes (a stack overflow in the engine) is reported by the parent: no core
    file, and no Python traceback dump if faulthandler was enabled (as under pytest)."""
    import faulthandler
    import resource

    faulthandler.disable()

    try:
        resource.setrlimit(resource.RLIMIT_CORE, (0, resource.getrlimit(resource.RLIMIT_CORE)[1]))
    except (ValueError, OSError):
        pass


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    os.waitpid(pid, 0)


def read_query_text(query: str | None, query_file: Path | None) -> str:
    """The query of ``sotakg sparql``: the argument, else the file (``-`` is standard input), else
    standard input when it is not a terminal. UsageProblem when there is none or both are given."""
    import sys

    from ..errors import UsageProblem

    if query is not None and query_file is not None:
        raise UsageProblem("give the query as an argument or with --file, not both")
    if query is not None:
        text = query
    elif query_file is not None and str(query_file) != "-":
        try:
            text = query_file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as error:
            raise UsageProblem(f"cannot read the query from {query_file}: {error}") from None
    elif query_file is not None or not sys.stdin.isatty():
        text = sys.stdin.read()
    else:
        raise UsageProblem("give a query as an argument, with --file FILE, or on standard input")
    if not text.strip():
        raise UsageProblem("the query is empty")
    return text
