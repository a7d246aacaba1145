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


_IRIREF = re.compile(r'<[^<>"{}|^`\\\x00-\x20]*>')
_NAME_CHAR = re.compile(r"[\w\-.:%\\]", re.UNICODE)
_LONG_STRING = {
    '"""': re.compile(r'"""(?:[^"\\]|\\.|"(?!""))*(?:"""|\Z)', re.S),
    "'''": re.compile(r"'''(?:[^'\\]|\\.|'(?!''))*(?:'''|\Z)", re.S),
}
_SHORT_STRING = {
    '"': re.compile(r'"(?:[^"\\\n\r]|\\.)*(?:"|$)', re.M),
    "'": re.compile(r"'(?:[^'\\\n\r]|\\.)*(?:'|$)", re.M),
}


def tokens(text: str) -> Iterator[Token]:
    """Split SPARQL text into tokens, skipping whitespace and comments. Strings and IRIs are single
    tokens, so a keyword inside them (``"DROP ALL"``, ``<http://x/load>``) is never taken for one."""
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c.isspace():
            i += 1
        elif c == "#":
            end = text.find("\n", i)
            i = n if end < 0 else end + 1
        elif c in "\"'":
            quote = text[i : i + 3]
            pattern = _LONG_STRING.get(quote) or _SHORT_STRING[c]
            match = pattern.match(text, i)
            end = match.end() if match else n
            yield Token("string", text[i:end], i)
            i = end
        elif c == "<" and (iri := _IRIREF.match(text, i)):
            yield Token("iri", iri.group(), i)
            i = iri.end()
        elif c in "?$" and i + 1 < n and (text[i + 1].isalnum() or text[i + 1] == "_"):
            end = i + 1
            while end < n and (text[end].isalnum() or text[end] == "_"):
                end += 1
            yield Token("var", text[i:end], i)
            i = end
        elif c == "@" and i + 1 < n and text[i + 1].isalpha():
            end = i + 1
            while end < n and (text[end].isalnum() or text[end] == "-"):
                end += 1
            yield Token("langtag", text[i:end], i)
            i = end
        elif _NAME_CHAR.match(c) and c not in ".\\":
            end = i
            while end < n and _NAME_CHAR.match(text[end]):
                end += 1
            word = text[i:end]
            if ":" in word:
                kind = "pname"
            elif word[0].isdigit() or word[0] in "-.":
                kind = "number"
            else:
                kind = "word"
                word = word.rstrip(".")  # a triple's final dot glued to a keyword-like name
            yield Token(kind, word, i)
            i = end
        else:
            yield Token("punct", c, i)
            i += 1


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


def nesting_depth(text: str) -> tuple[int, int]:
    """The deepest nesting of (), {} and [] outside strings, IRIs and comments, counting each prefix
    operator (``!``, ``-``, ``+``, ``^``) in a run of them as one more level until its operand ends,
    and the offset of the token that first reached it.

    The engine's parser recurses once per bracket and once per prefix operator, so
    ``FILTER(!!!…!true)`` is as deep as that many parentheses. Operators before a bracket stay open
    until the bracket closes; a binary ``-`` or ``+`` counts for a moment, which errs on the safe side.
    """
    open_brackets: list[int] = []  # for each open bracket, the prefix operators waiting on it
    pending = 0  # prefix operators since the last operand or bracket
    waiting = 0  # sum(open_brackets), kept as we go
    deepest = 0
    where = 0

    def reach(level: int, offset: int) -> None:
        nonlocal deepest, where
        if level > deepest:
            deepest, where = level, offset

    for token in tokens(text):
        if token.kind == "punct" and token.text in _UNARY:
            pending += 1
            reach(len(open_brackets) + waiting + pending, token.offset)
        elif token.kind == "number" and token.text.startswith("-"):
            dashes = len(token.text) - len(token.text.lstrip("-"))
            reach(len(open_brackets) + waiting + pending + dashes, token.offset)
            pending = pending + dashes if dashes == len(token.text) else 0
        elif token.kind == "punct" and token.text in _OPENERS:
            open_brackets.append(pending)
            waiting += pending
            pending = 0
            reach(len(open_brackets) + waiting, token.offset)
        elif token.kind == "punct" and token.text in _CLOSERS:
            if open_brackets:
                waiting -= open_brackets.pop()
            pending = 0
        else:
            pending = 0
    return deepest, where


def check_query(text: str, max_depth: int = MAX_DEPTH) -> str | None:
    """Refuse (QueryRefused) a text that is SPARQL Update, uses SERVICE, LOAD or a FROM clause, or
    nests brackets and prefix operators deeper than ``max_depth`` (``nesting_depth``). Returns the query
    form (``query_form``)."""
    form = None
    for token in tokens(text):
        if token.kind != "word":
            continue
        keyword = token.text.upper()
        line, column = position(text, token.offset)
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
        if form is None and keyword in QUERY_FORMS:
            form = keyword
    deepest, offset = nesting_depth(text)
    if deepest > max_depth:
        line, column = position(text, offset)
        raise QueryRefused(
            f"the query nests brackets and prefix operators (! - + ^) {deepest} levels deep (line {line}, "
            f"column {column} reaches level {max_depth + 1}); the limit is {max_depth}"
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
