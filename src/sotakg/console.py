"""The SPARQL console: an interactive shell on the graph, and a script runner for piped input.

``run_console`` reads statements from a terminal (prompt_toolkit: multi-line editing, SPARQL
highlighting, completion, history kept across sessions) or, when standard input is not a terminal,
from a script, and runs each one like ``sotakg sparql`` does (``sparql.run_query``: same read-only
rules, same time limit). A statement is a SPARQL query or a dot-command (``.help`` lists them).

Where a statement ends: a dot-command is one line. A query ends at a ``;`` that closes a line, or at a
blank line, but only outside brackets and strings: inside ``{ }`` a ``;`` at the end of a line is
SPARQL's own predicate-list separator (``?p a sota:Practice ;``), and a blank line inside a query, or
after its PREFIX lines, is layout. So a ``.rq`` file piped in runs as it is. A ``;`` between brackets
at depth 0 is never valid SPARQL, so several queries on one line are split there.

The console is the one part of sotakg that needs prompt_toolkit and Pygments (dependencies of sotakg);
they are imported only when a terminal session starts, so other commands start no slower and piped
input works even where they are missing.
"""

from __future__ import annotations

import difflib
import io
import os
import re
import shlex
import shutil
import signal
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

import click

from .errors import ConsoleCommandError, ConsoleUnavailable, SotakgError
from .graph.vocab import PREFIXES
from .query.results import AskResult, GraphResult, QueryResult, SelectResult, format_result
from .query.sparql import DEFAULT_TIMEOUT, Backend, Token, run_query, tokens

if TYPE_CHECKING:
    from .query.canned import CannedQuery

#: Results longer than this are cut (``--max-rows``), so one careless query cannot flood the screen.
DEFAULT_MAX_ROWS = 10_000
#: ``.format`` choices. CONSTRUCT and DESCRIBE always answer in Turtle (JSON-LD under ``json``).
CONSOLE_FORMATS = ("table", "csv", "tsv", "json")
#: The environment variable that names the history file (else the user's state directory).
HISTORY_ENV = "SOTAKG_HISTORY"
PROMPT = "sparql> "

#: SPARQL 1.1 query keywords and functions offered by completion (Update, SERVICE, LOAD and FROM are
#: left out: the console refuses them).
KEYWORDS = (
    "SELECT", "DISTINCT", "REDUCED", "WHERE", "ASK", "CONSTRUCT", "DESCRIBE", "PREFIX", "BASE",
    "OPTIONAL", "FILTER", "UNION", "MINUS", "GRAPH", "BIND", "VALUES", "UNDEF", "AS", "EXISTS",
    "NOT", "IN", "ORDER", "BY", "ASC", "DESC", "GROUP", "HAVING", "LIMIT", "OFFSET", "a",
    "COUNT", "SUM", "MIN", "MAX", "AVG", "SAMPLE", "GROUP_CONCAT", "SEPARATOR",
    "STR", "LANG", "langMatches", "DATATYPE", "BOUND", "IRI", "URI", "BNODE", "RAND", "ABS", "CEIL",
    "FLOOR", "ROUND", "CONCAT", "STRLEN", "UCASE", "LCASE", "ENCODE_FOR_URI", "CONTAINS", "STRSTARTS",
    "STRENDS", "STRBEFORE", "STRAFTER", "YEAR", "MONTH", "DAY", "HOURS", "MINUTES", "SECONDS",
    "TIMEZONE", "TZ", "NOW", "UUID", "STRUUID", "MD5", "SHA1", "SHA256", "SHA384", "SHA512",
    "COALESCE", "IF", "STRLANG", "STRDT", "sameTerm", "isIRI", "isURI", "isBlank", "isLiteral",
    "isNumeric", "REGEX", "SUBSTR", "REPLACE", "true", "false",
)  # fmt: skip

#: Dot-commands: name -> (arguments, what it does).
DOT_COMMANDS: dict[str, tuple[str, str]] = {
    ".help": ("", "show this help"),
    ".prefixes": ("", "list the predeclared prefixes"),
    ".queries": ("[NAME]", "list the canned queries, or show one"),
    ".run": ("NAME [name=value ...]", "run a canned query with its parameters"),
    ".why": ("ID", "tell a record's provenance (SOTA-049, LIT-051, ADR-026)"),
    ".format": ("[table|csv|tsv|json]", "show or set the result format"),
    ".timing": ("[on|off]", "show or set the row count and time after each result"),
    ".output": ("[FILE]", "write results to FILE (truncated first); alone: back to the terminal"),
    ".quit": ("", "leave the console (also .exit, or Ctrl-D)"),
}
_ALIASES = {".exit": ".quit", ".q": ".quit", ".h": ".help", ".?": ".help"}

_DOT_LINE = re.compile(r"\s*(\.[A-Za-z?]+)(?:\s|$)")
_PROLOGUE_WORDS = frozenset({"PREFIX", "BASE"})
_OPENERS = {"(": ")", "{": "}", "[": "]"}
_CLOSERS = {")": "(", "}": "{", "]": "["}
_LONG_STRING_CLOSED = {
    '"""': re.compile(r'"""(?:[^"\\]|\\.|"(?!""))*"""', re.S),
    "'''": re.compile(r"'''(?:[^'\\]|\\.|'(?!''))*'''", re.S),
}


# ------------------------------------------------------------------------------------------ statements


@dataclass(frozen=True)
class Scan:
    """What the lexer saw in a statement typed so far: the brackets still open (outermost first),
    whether it stops inside a triple-quoted string, the offsets of the ``;`` at bracket depth 0, and
    its last token."""

    open_brackets: tuple[str, ...]
    in_long_string: bool
    separators: tuple[int, ...]
    last: Token | None


def scan(text: str) -> Scan:
    """Scan SPARQL text with ``sparql.tokens`` (strings, IRIs and comments are skipped over)."""
    stack: list[str] = []
    separators: list[int] = []
    last: Token | None = None
    in_long_string = False
    for token in tokens(text):
        last = token
        in_long_string = False
        if token.kind == "string":
            quote = token.text[:3]
            closed = _LONG_STRING_CLOSED.get(quote)
            in_long_string = closed is not None and not closed.fullmatch(token.text)
        elif token.kind == "punct":
            if token.text in _OPENERS:
                stack.append(token.text)
            elif token.text in _CLOSERS:
                if stack and stack[-1] == _CLOSERS[token.text]:
                    stack.pop()
                elif stack:  # a stray closer: the engine will say where; do not hold the statement open
                    stack.clear()
            elif token.text == ";" and not stack:
                separators.append(token.offset)
    return Scan(tuple(stack), in_long_string, tuple(separators), last)


def is_dot_command(text: str) -> bool:
    """A line that starts with ``.`` (after blanks) is a dot-command."""
    return text.lstrip().startswith(".")


def only_prologue(text: str) -> bool:
    """True when the text holds nothing but PREFIX/BASE declarations and comments (or nothing)."""
    for token in tokens(text):
        if token.kind == "word" and token.text.upper() in _PROLOGUE_WORDS:
            continue
        if token.kind in ("pname", "iri"):
            continue
        return False
    return True


def statement_end(text: str) -> bool:
    """Whether Enter at the end of ``text`` ends the statement: a dot-command always; a query when its
    last line ends with ``;``, or is blank, with no bracket or long string left open (and, for a blank
    line, something beyond PREFIX declarations typed)."""
    if not text.strip():
        return False
    if is_dot_command(text):
        return True
    state = scan(text)
    if state.in_long_string or state.open_brackets:
        return False
    last_line = text.rsplit("\n", 1)[-1]
    if not last_line.strip():
        return not only_prologue(text)
    return state.last is not None and state.last.kind == "punct" and state.last.text == ";"


@dataclass(frozen=True)
class Statement:
    """One query to run. ``text`` is padded with the blanks and line breaks that came before it in the
    script or input, so the engine's line and column numbers are the user's; ``line`` is the line its
    first token is on."""

    text: str
    line: int

    @property
    def source(self) -> str:
        """The statement as typed, without the padding."""
        return self.text.strip()


def split_statements(text: str, first_line: int = 1) -> list[Statement]:
    """Split the text of one or more queries at the ``;`` outside brackets; the ``;`` are dropped and
    pieces with no tokens (blank, or only comments) are skipped. ``first_line`` is the line the text
    starts on in its script."""
    bounds = [-1, *scan(text).separators, len(text)]
    found = []
    for start, end in zip(bounds, bounds[1:], strict=False):
        piece = text[start + 1 : end]
        first = next(iter(tokens(piece)), None)
        if first is None:
            continue
        padding = "\n" * (first_line - 1) + re.sub(r"[^\n]", " ", text[: start + 1])
        line = first_line + text.count("\n", 0, start + 1 + first.offset)
        found.append(Statement(padding + piece, line))
    return found


@dataclass(frozen=True)
class DotCommand:
    """A dot-command line and the line number it is on."""

    text: str
    line: int


def dot_command_name(line: str) -> str | None:
    """The canonical name of the known dot-command a line starts with (``.exit`` is ``.quit``), if any."""
    match = _DOT_LINE.match(line)
    if not match:
        return None
    name = match.group(1).lower()
    name = _ALIASES.get(name, name)
    return name if name in DOT_COMMANDS else None


def read_script(lines: Iterable[str]) -> Iterator[Statement | DotCommand]:
    """The statements and dot-commands of a script, in order, as soon as each one ends.

    A line starting with ``.`` is a dot-command when no query is being read; a line starting with a
    known dot-command (``.run``, ``.format`` ...) is one even then, and ends the query before it
    (no SPARQL line starts so). Comments and blank lines between statements are skipped."""
    pending: list[str] = []
    start = 1
    for number, raw in enumerate(lines, start=1):
        line = raw.rstrip("\r\n")
        reading = next(iter(tokens("\n".join(pending))), None) is not None
        if is_dot_command(line) and (not reading or dot_command_name(line)):
            if reading:
                yield from split_statements("\n".join(pending), start)
            pending = []
            yield DotCommand(line.strip(), number)
            continue
        if not pending and not line.strip():
            continue
        if not pending:
            start = number
        pending.append(line)
        text = "\n".join(pending)
        if statement_end(text):
            yield from split_statements(text, start)
            pending = []
    if pending:
        yield from split_statements("\n".join(pending), start)


# ------------------------------------------------------------------------------------------ completion


@dataclass
class Vocabulary:
    """What completion offers beyond keywords: prefixed names of terms in the graph ({name: what it
    is}), record identifiers ({SOTA-049: title}), the canned queries, and the prefixes."""

    terms: dict[str, str] = field(default_factory=dict)
    records: dict[str, str] = field(default_factory=dict)
    queries: dict[str, CannedQuery] = field(default_factory=dict)
    prefixes: Mapping[str, str] = field(default_factory=lambda: dict(PREFIXES))


TERMS_QUERY = """
SELECT ?term (SAMPLE(?type) AS ?kind) WHERE {
  { ?s ?term ?o } UNION { ?s a ?term }
  UNION { ?term ?p ?o FILTER(isIRI(?term)) } UNION { ?s ?p ?term FILTER(isIRI(?term)) }
  OPTIONAL { ?term a ?type }
}
GROUP BY ?term
"""

RECORDS_QUERY = """
PREFIX dcterms: <http://purl.org/dc/terms/>
PREFIX sota: <https://w3id.org/sotakg/ontology#>
SELECT ?id ?title WHERE {
  VALUES ?kind { sota:Practice sota:Paper sota:ADR }
  ?record a ?kind ; dcterms:identifier ?id .
  OPTIONAL { ?record dcterms:title ?named }
  OPTIONAL {
    ?record sota:authors ?authors ; sota:year ?year .
    BIND(CONCAT(?authors, " (", STR(?year), ")") AS ?byline)
  }
  OPTIONAL { ?record sota:summary ?summary }
  BIND(COALESCE(?named, ?byline, ?summary, "") AS ?title)
}
"""


def load_vocabulary(backend: Backend, timeout: float = DEFAULT_TIMEOUT) -> Vocabulary:
    """Read completion's vocabulary from the graph: every IRI under a declared prefix (ontology terms,
    records, versions, topics) as a prefixed name with its type, the record identifiers with their
    titles, and the canned queries. Raises what ``run_query`` raises."""
    from .query.canned import load_canned

    vocabulary = Vocabulary(queries={q.name: q for q in load_canned()})
    records = run_query(backend, RECORDS_QUERY, None, timeout)
    if isinstance(records, SelectResult):
        vocabulary.records.update((identifier, title) for identifier, title in records.texts() if identifier)
    terms = run_query(backend, TERMS_QUERY, None, timeout)
    if isinstance(terms, SelectResult):
        for term, kind in terms.texts():
            if term.startswith("<") or ":" not in term:  # not under a declared prefix, or a blank node
                continue
            prefix, _, local = term.partition(":")
            vocabulary.terms[term] = vocabulary.records.get(local, kind) if prefix == "id" else kind
    return vocabulary


@dataclass(frozen=True)
class Suggestion:
    """A completion: replace the ``replace`` characters before the cursor with ``text``."""

    text: str
    replace: int
    meta: str = ""


_WORD = re.compile(r"(?:[A-Za-z_][\w.-]*)?:[\w-]*$|[\w-]+$")
_VARIABLE = re.compile(r"[?$](\w*)$")


def suggestions(vocabulary: Vocabulary, before: str) -> list[Suggestion]:
    """The completions for the text before the cursor: dot-commands and their arguments on a line
    starting with ``.``; in a query, variables after ``?``, prefixed names after ``prefix:``, and
    otherwise keywords, prefixes, record identifiers and terms whose local name fits."""
    if is_dot_command(before) and "\n" not in before.strip():
        return _dot_suggestions(vocabulary, before.lstrip())
    if _in_comment_or_string(before):
        return []
    line = before.rsplit("\n", 1)[-1]
    variable = _VARIABLE.search(line)
    if variable:
        typed = variable.group(1)
        seen = dict.fromkeys(t.text[1:] for t in tokens(before) if t.kind == "var")
        return [
            Suggestion(name, len(typed), "variable")
            for name in seen
            if name.lower().startswith(typed.lower()) and name != typed
        ]
    match = _WORD.search(line)
    if not match:
        return []
    word = match.group()
    size = len(word)
    folded = word.lower()
    if ":" in word:
        return [Suggestion(name, size, about) for name, about in _smart_case(vocabulary.terms.items(), word)]
    found: list[Suggestion] = []
    for keyword in KEYWORDS:
        if keyword.lower().startswith(folded):
            text = keyword.lower() if word.islower() and keyword.isupper() else keyword
            found.append(Suggestion(text, size, "keyword"))
    found += [Suggestion(f"{p}:", size, "prefix") for p in vocabulary.prefixes if p and p.startswith(folded)]
    found += [Suggestion(name, size, title) for name, title in _smart_case(vocabulary.records.items(), word)]
    by_local = [(name.partition(":")[2], name, about) for name, about in vocabulary.terms.items()]
    found += [
        Suggestion(name, size, about)
        for _, name, about in _smart_case(by_local, word)
        if not name.startswith("id:")  # the bare identifier is offered already
    ]
    return found


def _smart_case(items: Iterable[tuple[str, ...]], typed: str) -> list[tuple[str, ...]]:
    """The items whose first element starts with ``typed``, sorted: matching case exactly when any do
    (``sota:rej`` is sota:rejectionReason, not sota:Rejected), else ignoring case."""
    ordered = sorted(items)
    exact = [item for item in ordered if item[0].startswith(typed)]
    return exact or [item for item in ordered if item[0].lower().startswith(typed.lower())]


def _in_comment_or_string(before: str) -> bool:
    """Whether the cursor is in a comment or a string, where nothing is completed."""
    last = scan(before).last
    end = 0 if last is None else last.offset + len(last.text)
    if "#" in before[end:]:
        return True
    if last is None or last.kind != "string" or end < len(before):
        return False
    quote = last.text[:3] if last.text[:3] in _LONG_STRING_CLOSED else last.text[0]
    return len(last.text) < 2 * len(quote) or not last.text.endswith(quote)


def _dot_suggestions(vocabulary: Vocabulary, line: str) -> list[Suggestion]:
    parts = line.split(" ")
    typed = parts[-1]
    size = len(typed)
    if len(parts) == 1:
        return [Suggestion(name, size, about) for name, (_, about) in DOT_COMMANDS.items() if name.startswith(typed)]
    command = _ALIASES.get(parts[0], parts[0])
    arguments = [p for p in parts[1:-1] if p]
    choices: list[tuple[str, str]] = []
    if command in (".run", ".queries") and not arguments:
        choices = [(name, q.summary) for name, q in vocabulary.queries.items()]
    elif command == ".run" and len(arguments) >= 1 and arguments[0] in vocabulary.queries:
        query = vocabulary.queries[arguments[0]]
        name, equals, value = typed.partition("=")
        parameter = query.parameter(name)
        if equals and parameter is not None:
            # Values worth offering: the record ids an id parameter's pattern accepts, the prefixed
            # names for an iri parameter; strings and numbers are the user's own.
            values = {"id": vocabulary.records, "iri": vocabulary.terms}.get(parameter.type, {})
            return [
                Suggestion(f"{name}={candidate}", size, about)
                for candidate, about in sorted(values.items())
                if candidate.startswith(value) and _fits(parameter.pattern, candidate)
            ]
        given = {a.partition("=")[0] for a in arguments[1:]}
        choices = [(f"{p.name}=", f"{p.type}, e.g. {p.example}") for p in query.params if p.name not in given]
    elif command == ".why" and not arguments:
        choices = sorted(vocabulary.records.items())
    elif command == ".format" and not arguments:
        choices = [(name, "") for name in CONSOLE_FORMATS]
    elif command == ".timing" and not arguments:
        choices = [("on", ""), ("off", "")]
    return [Suggestion(text, size, about) for text, about in choices if text.startswith(typed)]


def _fits(pattern: str | None, value: str) -> bool:
    return pattern is None or re.fullmatch(pattern, value) is not None


# ------------------------------------------------------------------------------------------ running


def history_path(environ: Mapping[str, str] | None = None) -> Path:
    """Where the console keeps its history: ``$SOTAKG_HISTORY``, else ``$XDG_STATE_HOME/sotakg/history``,
    else ``~/.local/state/sotakg/history``."""
    env = os.environ if environ is None else environ
    if env.get(HISTORY_ENV):
        return Path(env[HISTORY_ENV]).expanduser()
    state = env.get("XDG_STATE_HOME", "")
    base = Path(state) if state and Path(state).is_absolute() else Path.home() / ".local" / "state"
    return base / "sotakg" / "history"


class Console:
    """Runs statements and dot-commands and shows their results; counts the ones that failed.

    ``interactive`` decides the finishing touches: a pager for tall results, a blank line after
    each answer, colours on errors, and where status lines go (the terminal, or standard error so
    that a script's standard output holds only results)."""

    def __init__(
        self,
        backend: Backend,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        max_rows: int = DEFAULT_MAX_ROWS,
        format_name: str = "table",
        timing: bool = False,
        interactive: bool = False,
        out: TextIO | None = None,
        err: TextIO | None = None,
        width: Callable[[], int | None] = lambda: None,
    ):
        self.backend = backend
        self.timeout = timeout
        self.max_rows = max_rows
        self.format_name = format_name
        self.timing = timing
        self.interactive = interactive
        self.out = out if out is not None else sys.stdout
        self.err = err if err is not None else sys.stderr
        self.width = width
        self.output_path: Path | None = None
        self.failures = 0
        self.finished = False

    # -------------------------------------------------------------------- entry points

    def run_text(self, text: str) -> None:
        """Run what was typed at the prompt: one dot-command, or one or more queries."""
        if is_dot_command(text):
            self.run_dot(DotCommand(text.strip().splitlines()[0], 1))
            return
        for statement in split_statements(text):
            if self.finished:
                return
            self.run_statement(statement)

    def run_script(self, lines: Iterable[str]) -> int:
        """Run a script's statements in order; 1 if any failed, else 0."""
        for item in read_script(lines):
            if isinstance(item, DotCommand):
                self.run_dot(item)
            else:
                self.run_statement(item)
            if self.finished:
                break
        return 1 if self.failures else 0

    def run_statement(self, statement: Statement) -> bool:
        """Run one query and show its result, or report why it could not run."""
        return self._guarded(statement.line, lambda: self._query(statement.text))

    def run_dot(self, command: DotCommand) -> bool:
        """Run one dot-command; an unknown one, or wrong arguments, is reported as a failure."""
        name, _, rest = command.text.partition(" ")
        name = _ALIASES.get(name.lower(), name.lower())
        handler = self._dot_handlers().get(name)
        if handler is None:
            close = difflib.get_close_matches(name, list(DOT_COMMANDS), n=1)
            hint = f"did you mean {close[0]}? " if close else ""
            return self._fail(command.line, f"unknown command {name}; {hint}.help lists the commands")
        return self._guarded(command.line, lambda: handler(rest.strip()))

    # -------------------------------------------------------------------- internals

    def _guarded(self, line: int, work: Callable[[], None]) -> bool:
        try:
            work()
        except SotakgError as error:
            return self._fail(line, str(error))
        except KeyboardInterrupt:
            if not self.interactive:
                raise  # Ctrl-C stops a script; at the prompt it only stops this statement
            return self._fail(line, "cancelled")
        return True

    def _fail(self, line: int, message: str) -> bool:
        self.failures += 1
        if self.interactive:
            click.secho(f"Error: {message}", file=self.err, fg="red")
            click.echo("", file=self.out)
        else:
            click.echo(f"Error at line {line}: {message}", file=self.err)
        return False

    def _status(self, text: str) -> None:
        click.echo(text, file=self.out if self.interactive else self.err)

    def _show(self, text: str, to_destination: bool = True) -> None:
        """Print text to the terminal (through a pager when taller than the screen, interactively),
        or append it to the ``.output`` file."""
        if to_destination and self.output_path is not None:
            try:
                with self.output_path.open("a", encoding="utf-8") as stream:
                    stream.write(text)
            except OSError as error:
                raise ConsoleCommandError(f"cannot write to {self.output_path}: {error}") from None
            return
        if self.interactive and text.count("\n") > shutil.get_terminal_size().lines - 2:
            click.echo_via_pager(text)
        else:
            click.echo(text, file=self.out, nl=False)
        if self.interactive:
            click.echo("", file=self.out)

    def _query(self, text: str, bindings: Any = None) -> None:
        started = time.monotonic()
        result = run_query(self.backend, text, bindings, self.timeout)
        self._result(result, time.monotonic() - started)

    def _result(self, result: QueryResult, seconds: float) -> None:
        total = None
        if isinstance(result, SelectResult) and len(result.rows) > self.max_rows:
            total = len(result.rows)
            result = SelectResult(result.variables, result.rows[: self.max_rows])
        elif isinstance(result, GraphResult) and len(result.triples) > self.max_rows:
            total = len(result.triples)
            result = GraphResult(result.triples[: self.max_rows])
        name = self.format_name
        if isinstance(result, GraphResult):
            name = "jsonld" if name == "json" else "turtle"
        to_terminal = self.output_path is None
        text = format_result(result, name, self.width() if to_terminal and name == "table" else None)
        timing = f" ({seconds:.3f} s)" if self.timing else ""
        count = _count(result)
        if to_terminal and not isinstance(result, GraphResult) and name == "table" and timing:
            text = text.rstrip("\n") + timing + "\n"
            timing = ""
        self._show(text)
        unit = "triples" if isinstance(result, GraphResult) else "rows"
        if total is not None:
            self._status(f"(only the first {self.max_rows} of {total} {unit} are shown; --max-rows N raises the cap)")
        if self.output_path is not None and (self.interactive or timing):
            self._status(f"{count or 'the answer'} written to {self.output_path}{timing}")
        elif timing:
            self._status(f"{count}{timing}".strip())

    def _dot_handlers(self) -> dict[str, Callable[[str], None]]:
        return {
            ".help": self._help,
            ".prefixes": self._prefixes,
            ".queries": self._queries,
            ".run": self._run,
            ".why": self._why,
            ".format": self._format,
            ".timing": self._timing,
            ".output": self._output,
            ".quit": self._quit,
        }

    def _no_arguments(self, name: str, rest: str) -> None:
        if rest:
            raise ConsoleCommandError(f"{name} takes no arguments")

    def _help(self, rest: str) -> None:
        self._no_arguments(".help", rest)
        self._show(help_text(), to_destination=False)

    def _prefixes(self, rest: str) -> None:
        self._no_arguments(".prefixes", rest)
        lines = [f"PREFIX {prefix}: <{namespace}>" for prefix, namespace in PREFIXES.items()]
        self._show("\n".join(lines) + "\n", to_destination=False)

    def _queries(self, rest: str) -> None:
        from .query.canned import find_canned, listing, load_canned, query_details

        if rest:
            self._show(query_details(find_canned(rest)), to_destination=False)
        else:
            self._show(listing(load_canned()) + "Run one with: .run NAME name=value ...\n", to_destination=False)

    def _run(self, rest: str) -> None:
        from .query.canned import bind_parameters, find_canned

        try:
            words = shlex.split(rest)
        except ValueError as error:
            raise ConsoleCommandError(f'.run: {error} (quote values with spaces: text="two words")') from None
        if not words:
            raise ConsoleCommandError("usage: .run NAME name=value ...  (.queries lists the canned queries)")
        query = find_canned(words[0])
        usage = f".run {query.name} " + " ".join(p.usage() for p in query.params)
        raw: dict[str, str] = {}
        for word in words[1:]:
            name, equals, value = word.partition("=")
            if not equals or not name:
                raise ConsoleCommandError(f"parameters are given as name=value, not {word!r}; usage: {usage}")
            if name in raw:
                raise ConsoleCommandError(f"parameter {name} is given twice")
            if query.parameter(name) is None:
                takes = ", ".join(p.name for p in query.params) or "no parameters"
                raise ConsoleCommandError(f"query {query.name} has no parameter {name}; it takes {takes}")
            raw[name] = value
        missing = [p.name for p in query.params if p.name not in raw]
        if missing:
            raise ConsoleCommandError(f"query {query.name} needs {', '.join(missing)}; usage: {usage.strip()}")
        self._query(query.text, bind_parameters(query, raw))

    def _why(self, rest: str) -> None:
        from .query.why import render_provenance, why

        if not rest or " " in rest:
            raise ConsoleCommandError("usage: .why ID  (a record identifier such as SOTA-049, LIT-051 or ADR-026)")
        story = why(self.backend, rest, self.timeout)
        self._show(render_provenance(story, self.width() or 100))

    def _setting(self, changed: bool, text: str) -> None:
        """Say a setting's value when asked, or confirm a change at the prompt (scripts stay quiet)."""
        if not changed or self.interactive:
            self._status(text)

    def _format(self, rest: str) -> None:
        if rest and rest.lower() not in CONSOLE_FORMATS:
            raise ConsoleCommandError(f"unknown format {rest!r}; use one of: {', '.join(CONSOLE_FORMATS)}")
        self.format_name = rest.lower() or self.format_name
        self._setting(bool(rest), f"format: {self.format_name}")

    def _timing(self, rest: str) -> None:
        if rest and rest.lower() not in ("on", "off"):
            raise ConsoleCommandError(f"usage: .timing on|off, not {rest!r}")
        if rest:
            self.timing = rest.lower() == "on"
        self._setting(bool(rest), f"timing: {'on' if self.timing else 'off'}")

    def _output(self, rest: str) -> None:
        if rest:
            path = Path(os.path.expanduser(rest))
            try:
                path.write_text("", encoding="utf-8")
            except OSError as error:
                raise ConsoleCommandError(f"cannot write to {rest}: {error.strerror or error}") from None
            self.output_path = path
        else:
            self.output_path = None
        self._setting(True, f"output: {self.output_path or 'the terminal'}")

    def _quit(self, rest: str) -> None:
        self.finished = True


def _count(result: QueryResult) -> str:
    if isinstance(result, SelectResult):
        return f"{len(result)} row{'s' if len(result) != 1 else ''}"
    if isinstance(result, GraphResult):
        return f"{len(result)} triple{'s' if len(result) != 1 else ''}"
    assert isinstance(result, AskResult)
    return ""


def help_text() -> str:
    """The text of ``.help``."""
    width = max(len(f"{name} {args}".strip()) for name, (args, _) in DOT_COMMANDS.items())
    lines = [
        "Type a SPARQL query (SELECT, ASK, CONSTRUCT, DESCRIBE); it runs when a line ends with ;",
        "or at a blank line (outside brackets). Esc Enter runs it at once; Ctrl-C drops it; Ctrl-D quits.",
        "Tab completes keywords, prefixes, prefixed names and record ids; Up recalls history.",
        "The prefixes are predeclared (.prefixes). Updates, SERVICE, LOAD and FROM are refused.",
        "",
    ]
    for name, (args, about) in DOT_COMMANDS.items():
        lines.append(f"  {f'{name} {args}'.strip().ljust(width)}  {about}")
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------------------------------ the session


def run_console(
    backend: Backend,
    *,
    timeout: float = DEFAULT_TIMEOUT,
    max_rows: int = DEFAULT_MAX_ROWS,
    format_name: str = "table",
    interactive: bool | None = None,
    input_stream: TextIO | None = None,
    out: TextIO | None = None,
    err: TextIO | None = None,
) -> int:
    """Run the console on ``backend``: a prompt_toolkit session when standard input is a terminal
    (``interactive`` overrides the guess), else the statements read from ``input_stream`` without
    prompts. Returns the exit code: 0, or 1 when a piped statement failed."""
    stream = input_stream if input_stream is not None else sys.stdin
    if interactive is None:
        interactive = stream.isatty()
    if format_name not in CONSOLE_FORMATS:
        raise ConsoleCommandError(f"unknown format {format_name!r}; use one of: {', '.join(CONSOLE_FORMATS)}")
    console = Console(
        backend,
        timeout=timeout,
        max_rows=max_rows,
        format_name=format_name,
        timing=interactive,
        interactive=interactive,
        out=out,
        err=err,
        width=_terminal_width(interactive),
    )
    if not interactive:
        if input_stream is None and hasattr(stream, "buffer"):
            # UTF-8 whatever the locale says, and strictly: bytes that are not UTF-8 are refused
            stream = io.TextIOWrapper(stream.buffer, encoding="utf-8", errors="strict")
        try:
            return console.run_script(stream)
        except UnicodeDecodeError as error:
            raise ConsoleCommandError(
                f"standard input is not UTF-8 (byte {error.start + 1} of a read); send UTF-8 text"
            ) from None
    _interactive_session(console, history_path())
    return 0


def _terminal_width(interactive: bool) -> Callable[[], int | None]:
    def width() -> int | None:
        if interactive or os.environ.get("COLUMNS", "").isdigit() or sys.stdout.isatty():
            return shutil.get_terminal_size().columns
        return None

    return width


def _interactive_session(console: Console, history_file: Path) -> None:
    try:
        from prompt_toolkit import PromptSession
        from prompt_toolkit.auto_suggest import AutoSuggestFromHistory
        from prompt_toolkit.history import FileHistory, History, InMemoryHistory
        from prompt_toolkit.lexers import PygmentsLexer
        from pygments.lexers.rdf import SparqlLexer
    except ImportError as error:
        raise ConsoleUnavailable(
            f"the interactive console needs prompt_toolkit and Pygments ({error}), which sotakg depends on: "
            "reinstall it with pip install sotakg (piped input, sotakg console < script.rq, works without them)"
        ) from None

    history: History
    try:
        history_file.parent.mkdir(parents=True, exist_ok=True)
        history_file.touch(exist_ok=True)
        history = FileHistory(str(history_file))
    except OSError as error:
        click.echo(f"warning: history is not kept ({history_file}: {error.strerror or error})", err=True)
        history = InMemoryHistory()

    vocabulary = Vocabulary()
    try:
        vocabulary = load_vocabulary(console.backend, console.timeout)
    except SotakgError as error:  # the same error will show on the first query; completion makes do
        click.secho(f"Error: {error}", err=True, fg="red")
    session: PromptSession[str] = PromptSession(
        PROMPT,
        multiline=True,
        key_bindings=_key_bindings(),
        lexer=PygmentsLexer(SparqlLexer),
        completer=prompt_completer(vocabulary),
        complete_while_typing=True,
        auto_suggest=AutoSuggestFromHistory(),
        history=history,
        prompt_continuation=_continuation,
    )
    click.echo(
        f"sotakg console on {console.backend.label}. End a query with ; or a blank line; "
        ".help lists the commands; Ctrl-D quits."
    )
    # Ctrl-C must cancel a running query even when the console was started with SIGINT ignored
    # (a parent's choice that is inherited; a committed build leaves it so in its process).
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        _prompt_loop(console, session)
    finally:
        signal.signal(signal.SIGINT, previous)


def _prompt_loop(console: Console, session: Any) -> None:
    while not console.finished:
        try:
            text = session.prompt()
        except KeyboardInterrupt:
            continue
        except EOFError:
            break
        try:
            console.run_text(text)
        except KeyboardInterrupt:  # Ctrl-C between two statements, or while reporting one
            click.echo("cancelled")


def _continuation(width: int, line_number: int, wrap_count: int) -> str:
    """The prompt of a query's next lines: shows the bracket still open, so a statement that does
    not end at a blank line says why."""
    from prompt_toolkit.application import get_app

    text = get_app().current_buffer.text
    opened = scan("\n".join(text.split("\n")[:line_number])).open_brackets
    mark = "..." + (opened[-1] if opened else "")
    return f"{mark}> ".rjust(width)


def _key_bindings() -> Any:
    """Enter runs the statement when it has ended (``statement_end``): at a closing ``;`` wherever the
    cursor is, at a blank line when the cursor is on it. Otherwise Enter starts a new line. Enter on a
    highlighted completion just takes it; Esc Enter always runs."""
    from prompt_toolkit.document import Document
    from prompt_toolkit.enums import DEFAULT_BUFFER
    from prompt_toolkit.filters import completion_is_selected, has_focus
    from prompt_toolkit.key_binding import KeyBindings

    bindings = KeyBindings()
    in_editor = has_focus(DEFAULT_BUFFER)

    @bindings.add("enter", filter=in_editor & completion_is_selected)
    def _take_completion(event: Any) -> None:
        event.current_buffer.complete_state = None

    @bindings.add("enter", filter=in_editor & ~completion_is_selected)
    def _enter(event: Any) -> None:
        buffer = event.current_buffer
        document = buffer.document
        text = document.text
        at_end = not document.text_after_cursor.strip()
        # A ';' ends the statement wherever the cursor is (as in pgcli); a blank line only where typed.
        if not text.strip() or statement_end(text.rstrip()) or (at_end and statement_end(text)):
            text = document.text.rstrip()
            buffer.document = Document(text, len(text))
            buffer.validate_and_handle()
        else:
            buffer.newline(copy_margin=True)

    @bindings.add("escape", "enter", filter=in_editor)
    def _run_now(event: Any) -> None:
        event.current_buffer.validate_and_handle()

    return bindings


def prompt_completer(vocabulary: Vocabulary) -> Any:
    """A prompt_toolkit Completer offering ``suggestions``."""
    from prompt_toolkit.completion import CompleteEvent, Completer, Completion
    from prompt_toolkit.document import Document

    class SparqlCompleter(Completer):
        def get_completions(self, document: Document, complete_event: CompleteEvent) -> Iterator[Completion]:
            for found in suggestions(vocabulary, document.text_before_cursor):
                yield Completion(found.text, -found.replace, display_meta=found.meta)

    return SparqlCompleter()
