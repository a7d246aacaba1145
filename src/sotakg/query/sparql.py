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

import copy
import functools
import os
import re
import select
import signal
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from itertools import compress, islice
from operator import attrgetter
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from ..errors import QueryFailed, QueryRefused, QuerySyntaxError, QueryTimeout
from ..graph.vocab import PREFIXES
from .results import AskResult, QueryResult, Term, parse_graph, parse_sparql_results

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
#: Most levels of REGEX, SUBSTR, REPLACE, GROUP_CONCAT (a form with an optional last argument) and IN
#: (in its left operand) nested in one another: the engine's parser reads such a call's arguments again
#: for the shorter form, which doubles its work at each level (20 levels of REGEX: 2 s; 40: 2^40
#: steps); 10 levels cost it a few ms.
MAX_REREAD_NESTING = 10
#: Stack of the engine's threads, here (the query worker's) and in the Oxigraph server behind ``sotakg
#: serve`` (RUST_MIN_STACK): at the default 2 MiB a basic graph pattern of 10,000 triple patterns or
#: 10,000 UNION arms overflows it, on the 8 MiB of a main thread a chain of 3,000 MINUS; at 256 MiB
#: (address space, used only as deep as a query needs) they evaluate. The check's limits stay below.
ENGINE_STACK_BYTES = 256 * 1024 * 1024
#: Where the query worker stops halving its thread's stack when the address space has no room for it.
_SMALLEST_ENGINE_STACK = 8 * 1024 * 1024
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
_NAME_MARKS = "\u00b7\u0300-\u036f\u203f-\u2040"  # the non-ASCII characters of PN_CHARS beyond PN_CHARS_U
_CHARS = "\\-0-9" + _NAME_MARKS + _U
_PLX = r"(?:%[0-9A-Fa-f]{2}|\\[_~.\-!$&'()*+,;=/?#@%])"
_PN_PREFIX = f"[{_BASE}][{_CHARS}]*+(?:\\.++[{_CHARS}]++)*+"
_PN_LOCAL = f"(?:[{_U}:0-9]|{_PLX})(?:[{_CHARS}:]|{_PLX})*+(?:\\.++(?:[{_CHARS}:]|{_PLX})++)?+"
_PNAME = f"(?:{_PN_PREFIX})?+:(?:{_PN_LOCAL})?+"
_BLANK_NODE = f"_:[{_U}0-9][{_CHARS}]*+(?:\\.++[{_CHARS}]++)*+"
_VAR = f"[?$][{_U}0-9][{_U}0-9{_NAME_MARKS}]*+"
_WORD = f"[{_U}][{_U}0-9]*+"
_LANGTAG = r"@[a-zA-Z]++(?:-[a-zA-Z0-9]++)*+(?:--[a-zA-Z]++)?+"
_NUMBER = r"[0-9]++\.[0-9]*+[eE][+-]?[0-9]++|\.[0-9]++[eE][+-]?[0-9]++|[0-9]++[eE][+-]?[0-9]++|[0-9]*+\.[0-9]++|[0-9]++"
# A \u or \U escape must name a Unicode scalar value (no surrogate, nothing past U+10FFFF): the
# engine's string rule fails on any other, and a failed long string is read again as shorter strings.
_SCALAR4 = "(?:[0-9A-Ca-cE-Fe-f][0-9A-Fa-f]{3}|[Dd][0-7][0-9A-Fa-f]{2})"
_ESCAPES = (
    r"""\\[tbnrf"'\\]|\\u"""
    + _SCALAR4
    + r"|\\U(?:0000"
    + _SCALAR4
    + "|000[1-9A-Fa-f][0-9A-Fa-f]{4}|0010[0-9A-Fa-f]{4})"
)
# The four string forms in the engine's order (its grammar is a PEG: the first form that reads the
# text wins, and a long string that fails, unterminated or with a bad escape, is read again as short
# ones: ``''' '`` is the strings ``''`` and ``' '``). Only where no form reads a string is it a
# bad string: taken as one token (to the end of the line or of the text) so that tools reading
# unfinished text (the console) see where it runs, and refused by the check.
_STRICT_STRINGS = "|".join(
    [
        "'''(?:(?:''|')?+(?:[^'\\\\]|" + _ESCAPES + "))*+'''",
        '"""(?:(?:""|")?+(?:[^"\\\\]|' + _ESCAPES + '))*+"""',
        "'(?:[^'\\\\\\n\\r]|" + _ESCAPES + ")*+'",
        '"(?:[^"\\\\\\n\\r]|' + _ESCAPES + ')*+"',
    ]
)
_BAD_STRINGS = "|".join(
    [
        r"'(?:[^'\\\n\r]|\\.)*+(?:'|(?m:$))",
        r"'[\s\S]*+",
        r'"(?:[^"\\\n\r]|\\.)*+(?:"|(?m:$))',
        r'"[\s\S]*+',
    ]
)
#: An IRI as SPARQL 1.1 defines it. Where the engine compares (``?a<?b>?c``), the standard's longest
#: token rule reads an IRI: such text is refused rather than given two meanings.
_STANDARD_IRIREF = re.compile(r'<[^<>"{}|^`\\\x00-\x20]*+>')
#: Characters whose upper case is ASCII letters (``"ﬁlter".upper() == "FILTER"``): a keyword read
#: with ``str.upper`` can be spelled with them, and the master pattern must see it the same way.
_UPPER_SPECIALS = {"ß": "SS", "ı": "I", "ſ": "S", "ﬀ": "FF", "ﬁ": "FI", "ﬂ": "FL", "ﬃ": "FFI", "ﬄ": "FFL"}
_UPPER_SPECIALS.update({"ﬅ": "ST", "ﬆ": "ST"})


def _spelled(word: str) -> str:
    """A pattern of the words ``w`` with ``w.upper() == word`` (``word`` in ASCII capitals)."""

    def rest(i: int) -> str:
        if i == len(word):
            return ""
        singles = word[i] + word[i].lower() + "".join(c for c, up in _UPPER_SPECIALS.items() if up == word[i])
        options = [f"[{singles}]" + rest(i + 1)]
        options += [
            c + rest(i + len(up)) for c, up in _UPPER_SPECIALS.items() if len(up) > 1 and word.startswith(up, i)
        ]
        return options[0] if len(options) == 1 else "(?:" + "|".join(options) + ")"

    return rest(0) + f"(?![{_U}0-9])"


# Kind codes: the number of the master pattern's group that matched. Its alternatives stand in the order
# the terminals are tried, so the first that matches is the token; whitespace and comments before a
# token belong to its match. A ``<`` opens an IRI up to the next ``>`` here; where the engine compares
# instead (inside an expression, after an operand) the scanner below takes it back (``_LT``).
_LPAREN, _RPAREN, _LBRACE, _RBRACE, _LBRACKET, _RBRACKET, _UNARY_, _PLAIN_PUNCT = range(1, 9)
_STRING, _BAD_STRING, _REIFY, _IRI, _VAR_, _LANG, _NUM, _BLANK, _PN = range(9, 18)
_BOOL, _SELECT, _FILTER, _BIND, _VALUES, _UNION, _FORM, _WORD_, _PUNCT, _END, _LT = range(18, 29)
_KEYWORD_STARTS = "tTfFsSbBvVuUaAcCdD\u017f\ufb01"  # the first characters of the words just below
_MASTER_PATTERN = (
    r"(?:[ \t\r\n]++|#[^\r\n]*+)*+(?:"
    # Punctuation that nothing else starts with comes first: most tokens are found in a few steps.
    + "|".join(f"({alternative})" for alternative in (r"\(", r"\)", r"\{", r"\}", r"\[", r"\]", r"[!+\-^]"))
    + r"|([,;*=&|/]|\.(?![0-9]))|"
    + "|".join(
        f"({alternative})"
        for alternative in (
            f"(?=['\"])(?:{_STRICT_STRINGS})",  # the lookaheads skip a group of alternatives in one step
            f"(?=['\"])(?:{_BAD_STRINGS})",
            "<<",  # SPARQL 1.2's triple terms and reifiers (<<, <<(): refused, never read as an IRI
            r"<[^<>]*+>",  # never one holding "<": the engine refuses such an IRI, and reads that "<" again
            _VAR,
            _LANGTAG,
            f"(?=[0-9.])(?:{_NUMBER})",
            _BLANK_NODE,
            _PNAME,
        )
    )
    + f"|(?=[{_KEYWORD_STARTS}])(?:"
    + "|".join(
        f"({alternative})"
        for alternative in (
            f"(?:[tT][rR][uU][eE]|[fF][aA][lL][sS][eE])(?![{_U}0-9])",
            _spelled("SELECT"),
            _spelled("FILTER"),
            _spelled("BIND"),
            _spelled("VALUES"),
            _spelled("UNION"),
            "|".join(_spelled(form) for form in ("ASK", "CONSTRUCT", "DESCRIBE")),
        )
    )
    + ")|"
    + "|".join(f"({alternative})" for alternative in (_WORD, r"[\s\S]", r"\Z"))
    + ")"
)


@functools.cache
def _master(ascii_only: bool) -> re.Pattern[str]:
    """The master pattern, compiled when first needed (the full one takes ~90 ms, most of a command's
    start-up); for a text that is all ASCII, the same pattern with its character classes cut down to
    ASCII, which reads such a text identically and compiles ten times faster."""
    pattern = _MASTER_PATTERN
    if ascii_only:
        pattern = pattern.replace(_BASE, "A-Za-z").replace(_NAME_MARKS, "")
        # what is left beyond ASCII are single letters of the keywords' spellings: no ASCII text has them
        assert {c for c in pattern if not c.isascii()} <= set(_UPPER_SPECIALS)
    compiled = re.compile(pattern)
    assert compiled.groups == _END
    return compiled


_KIND_NAMES: tuple[str, ...] = ("",) + ("punct",) * 8 + ("string", "string", "punct", "iri", "var", "langtag", "number")
_KIND_NAMES += ("pname",)
_KIND_NAMES += ("pname",) + ("word",) * 8 + ("punct",) * 3
_WORD_CODES = frozenset(range(_BOOL, _WORD_ + 1))
_TERM_CODES = (_VAR_, _IRI, _PN, _BLANK, _STRING, _BAD_STRING, _NUM)
#: Tokens after which a ``<`` inside an expression compares rather than opens an IRI.
#: (``}`` ends an operand in an expression: ``EXISTS { … } < …``.)
_OPERAND_CODES = frozenset({_VAR_, _IRI, _PN, _BLANK, _STRING, _BAD_STRING, _NUM, _LANG, _RPAREN, _RBRACE, _BOOL})


def _byte_class(codes: Iterable[int]) -> bytes:
    return b"[" + b"".join(re.escape(bytes([code])) for code in sorted(codes)) + b"]"


#: An operand followed by an IRI: where a ``<`` may compare instead (in an expression).
_MAY_COMPARE = re.compile(_byte_class(_OPERAND_CODES) + re.escape(bytes([_IRI])))
_FRAME_CODES = frozenset({_LPAREN, _RPAREN, _LBRACE, _RBRACE, _LBRACKET, _RBRACKET, _SELECT})
#: What a walk of a batch stops at: a token that opens or closes a frame (group 1), or an operand
#: followed by an IRI (group 2: where a ``<`` may compare), whichever comes first.
_WALK_EVENTS = re.compile(
    b"(" + _byte_class(_FRAME_CODES) + b")|(" + _byte_class(_OPERAND_CODES) + b")(?=" + re.escape(bytes([_IRI])) + b")"
)
_DEPTH_EVENTS = re.compile(_byte_class({_LPAREN, _RPAREN, _LBRACE, _RBRACE, _LBRACKET, _RBRACKET, _UNARY_}))
_OPENER_CODES = frozenset({_LPAREN, _LBRACE, _LBRACKET})
#: Frame modes: what the engine parses inside a bracket (see ``_Scan``).
_PATTERN, _PROJECTION, _MODIFIERS, _EXPRESSION, _PLAIN = range(5)
_match_start = re.Match.start
_match_end = re.Match.end
_kind_of = attrgetter("lastindex")


def _opens_expression(frame: list[int], previous: int, before: int) -> bool:
    """Whether a ``(`` opens an expression, from what encloses it and the two tokens before it."""
    opener, mode = frame
    if opener == _LPAREN:
        return mode == _EXPRESSION
    if opener == _LBRACKET:
        return False
    if mode == _PROJECTION or mode == _MODIFIERS:  # SELECT (…), GROUP BY (…), HAVING, ORDER BY
        return previous != _VALUES
    if previous == _FILTER or previous == _BIND:
        return True
    # FILTER regex(…), FILTER <f>(…), FILTER ex:f(…)
    return (previous in _WORD_CODES or previous in (_IRI, _PN, _BLANK)) and before == _FILTER


_RUN_OF_LT = re.compile("<+")


def _unpaired_lt(run: re.Match[str]) -> str:
    # A run of "<" lexes as "<<" tokens from its start (none can open an IRI after the last ">"); an
    # odd one left over becomes "\x01", which lexes as that "<" does there.
    return "<<" * (len(run.group()) // 2) + "\x01" * (len(run.group()) % 2)


class _Scan:
    """The tokens of a text as the engine reads them: ``kinds`` (codes), ``starts`` and ``ends``.

    The master pattern finds the tokens of long stretches at once (``_batch``). Only ``<`` depends on
    context: it compares inside an expression after an operand, and opens an IRI elsewhere. Brackets are
    tracked (``stack``: for each open one, its code and what the engine parses inside it: a pattern, a
    projection after SELECT, solution modifiers after the WHERE group, an expression or not) only where
    a batch has an operand before an IRI; where the ``<`` compares, tokens are read one at a time from
    just after it until they fall in step with the batch again. Linear in the text."""

    #: Tokens read one at a time after a comparing ``<`` before a fresh batch is lexed from there (doubling).
    in_step_budget = 256

    def __init__(self, text: str, limit: int | None):
        self.text = text
        close = text.rfind(">")
        # After the last ">" no "<" opens an IRI: "\x01" lexes as "<" does there (punctuation, or inside
        # a string or comment), so the IRI rule never scans to the end of the text for nothing.
        tail = text[close + 1 :]
        self.lexed = text if "<" not in tail else text[: close + 1] + _RUN_OF_LT.sub(_unpaired_lt, tail)
        self.master = _master(text.isascii())
        self.limit = limit if limit is not None else len(text) + 1
        self.kinds = bytearray()
        self.starts: list[int] = []
        self.ends: list[int] = []
        self.stack = [[0, _MODIFIERS]]
        self.previous = self.before = 0
        self._run()

    def _batch(self, pos: int) -> tuple[bytes, list[int], list[int], bool]:
        """Tokens from ``pos`` on, at most as many as are still wanted; and whether they reach the end."""
        wanted = self.limit - len(self.kinds)
        matches = list(islice(self.master.finditer(self.lexed, pos), wanted + 1))
        kinds = bytes(map(_kind_of, matches))
        end = kinds.find(_END)  # the end of the text, possibly twice: after its last blanks, and at it
        complete = end >= 0
        keep = end if complete else min(len(kinds), wanted)
        del matches[keep:]
        kinds = kinds[:keep]
        return kinds, list(map(_match_start, matches, kinds)), list(map(_match_end, matches)), complete

    def _run(self) -> None:
        pos, budget = 0, self.in_step_budget
        while len(self.kinds) < self.limit:
            kinds, starts, ends, complete = self._batch(pos)
            at, index_of = 0, None
            while True:
                compare = self._walk(kinds, at, complete)
                stop = len(kinds) if compare < 0 else compare
                self.kinds += kinds[at:stop]
                self.starts += starts[at:stop]
                self.ends += ends[at:stop]
                if stop - at >= 2:
                    self.previous, self.before = kinds[stop - 1], kinds[stop - 2]
                elif stop - at == 1:
                    self.previous, self.before = kinds[stop - 1], self.previous
                if compare < 0 or len(self.kinds) >= self.limit:
                    break
                self._add(_LT, starts[compare], starts[compare] + 1)
                if index_of is None:
                    index_of = dict(zip(starts, range(len(starts)), strict=True))
                resumed, pos = self._one_by_one(starts[compare] + 1, index_of, budget)
                if resumed is None:
                    break
                at = resumed
            if len(self.kinds) >= self.limit or (compare < 0 and complete):
                return
            if compare < 0:
                pos = ends[-1]  # the batch stopped at the limit, which one-by-one reading moved
            elif pos < 0:
                return  # the end of the text, read one token at a time
            else:
                budget *= 2  # not in step after that many tokens: a fresh batch from here

    def _add(self, code: int, start: int, end: int) -> None:
        self.kinds.append(code)
        self.starts.append(start)
        self.ends.append(end)
        self.before, self.previous = self.previous, code

    def _one_by_one(self, pos: int, index_of: dict[int, int], budget: int) -> tuple[int | None, int]:
        """Read tokens one at a time from ``pos`` (after a ``<`` that compares) until one starts where a
        token of the batch does: (its index in the batch, -) then; (None, where to go on) when the budget
        or the limit runs out first, (None, -1) at the end of the text."""
        lexed, stack = self.lexed, self.stack
        for _ in range(budget):
            if len(self.kinds) >= self.limit:
                return None, -1
            found = self.master.match(lexed, pos)
            assert found is not None  # the pattern matches everywhere, at the end with \Z
            code = found.lastindex or 0
            if code == _END:
                return None, -1
            start = found.start(code)
            if start in index_of:
                return index_of[start], -1
            frame = stack[-1]
            if code == _IRI and frame[0] == _LPAREN and frame[1] == _EXPRESSION and self.previous in _OPERAND_CODES:
                code, end = _LT, start + 1
            else:
                end = found.end()
            self._frame_event(code, self.previous, self.before)
            self._add(code, start, end)
            pos = end
        return None, pos

    def _frame_event(self, code: int, previous: int, before: int) -> None:
        """Follow the brackets (and SELECT) that a token of ``code`` opens or closes, given the two
        tokens before it."""
        stack = self.stack
        frame = stack[-1]
        if code == _LPAREN:
            stack.append([_LPAREN, _EXPRESSION if _opens_expression(frame, previous, before) else _PLAIN])
        elif code == _LBRACKET:
            stack.append([_LBRACKET, _PLAIN])
        elif code == _LBRACE:
            if frame[0] in (0, _LBRACE) and frame[1] == _PROJECTION:
                frame[1] = _MODIFIERS  # once this WHERE group closes
            stack.append([_LBRACE, _PATTERN])
        elif code in (_RPAREN, _RBRACKET, _RBRACE):
            if len(stack) > 1:
                stack.pop()
        elif code == _SELECT and frame[0] in (0, _LBRACE):
            frame[1] = _PROJECTION

    def _walk(self, kinds: bytes, at: int, complete: bool) -> int:
        """Follow the brackets of ``kinds[at:]`` and return the index of the first IRI there that is a
        ``<`` comparing, or -1. A batch with no operand before an IRI needs no walk (nothing follows it).

        It reads no further than that IRI (a walk resumes there after the ``<``): a long run of
        comparisons costs one pass over the batch in all, not one per comparison."""
        stack = self.stack
        frame = stack[-1]
        in_expression = frame[0] == _LPAREN and frame[1] == _EXPRESSION
        if at < len(kinds) and kinds[at] == _IRI and self.previous in _OPERAND_CODES and in_expression:
            return at
        if complete and _MAY_COMPARE.search(kinds, at) is None:
            return -1
        for event in _WALK_EVENTS.finditer(kinds, at):
            index = event.start()
            code = kinds[index]
            if event.lastindex == 1:
                previous = kinds[index - 1] if index > at else self.previous
                before = kinds[index - 2] if index - 2 >= at else self.previous if index - 1 == at else self.before
                self._frame_event(code, previous, before)
                frame = stack[-1]
                in_expression = frame[0] == _LPAREN and frame[1] == _EXPRESSION
                # a closing bracket is an operand too: ``(…) <`` compares in the frame it returns to
                if not (code in _OPERAND_CODES and index + 1 < len(kinds) and kinds[index + 1] == _IRI):
                    continue
            if in_expression:
                return index + 1
        return -1


def _scan(text: str, limit: int | None = None) -> _Scan:
    return _Scan(text, limit)


def tokens(text: str, limit: int | None = None) -> Iterator[Token]:
    """Split SPARQL text into tokens as the query engine does, skipping whitespace and comments.

    Strings, IRIs, prefixed names (with their ``\\#`` and ``\\'`` escapes) and variables are single
    tokens, so a keyword inside them (``"DROP ALL"``, ``<http://x/load>``) is never taken for one,
    and a ``#`` or a quote is a comment or a string exactly where the engine takes it for one. A
    ``<`` opens an IRI except inside an expression after an operand, where it compares: that needs
    the brackets around it, which are tracked (``_Scan``). Signs are separate ``punct`` tokens, as
    the engine allows blanks between a sign and its number. Runs in time linear in the text; with
    ``limit``, the text is read only until that many tokens or a few more (those read one at a time
    after a comparing ``<``) are found, in time linear in them."""
    scan = _Scan(text, limit)
    names = _KIND_NAMES
    for code, start, end in zip(scan.kinds, scan.starts, scan.ends, strict=True):
        yield Token(names[code], text[start:end], start)


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


def _levels(kinds: bytes, above: int | None) -> tuple[int, int]:
    """How deep the engine's parser recurses (see ``nesting_depth``): (deepest level, index of the
    token that first reached it); with ``above``, stop at the first token past that level."""
    open_brackets: list[int] = []  # for each open bracket, the prefix operators waiting on it
    pending = waiting = 0  # prefix operators since the last operand or bracket; sum(open_brackets)
    deepest = where = 0
    last = -2
    for event in _DEPTH_EVENTS.finditer(kinds):
        index = event.start()
        code = kinds[index]
        if index != last + 1:
            pending = 0  # some other token came between: the operators before it are done
        last = index
        if code == _UNARY_:
            pending += 1
            level = len(open_brackets) + waiting + pending
        elif code in _OPENER_CODES:
            open_brackets.append(pending)
            waiting += pending
            pending = 0
            level = len(open_brackets) + waiting
        else:
            if open_brackets:
                waiting -= open_brackets.pop()
            pending = 0
            continue
        if level > deepest:
            deepest, where = level, index
            if above is not None and level > above:
                break
    return deepest, where


def nesting_depth(text: str) -> tuple[int, int]:
    """The deepest nesting of (), {} and [] outside strings, IRIs and comments, counting each prefix
    operator (``!``, ``-``, ``+``, ``^``) in a run of them as one more level until its operand ends,
    and the offset of the token that first reached it.

    The engine's parser recurses once per bracket and once per prefix operator, so
    ``FILTER(!!!…!true)`` is as deep as that many parentheses. Operators before a bracket stay open
    until the bracket closes; a binary ``-`` or ``+`` counts for a moment, which errs on the safe side.
    """
    scan = _Scan(text, None)
    deepest, index = _levels(bytes(scan.kinds), None)
    return deepest, scan.starts[index] if deepest else 0


#: Words the engine would act on even glued to other letters: it matches keywords by prefix, with no
#: word boundary (``trueSERVICE``, ``1SERVICE`` and ``SERVICE:x`` reach its SERVICE rule).
_NETWORK_KEYWORDS = ("SERVICE", "FROM")
_KEYWORD_IN_WORD = re.compile(
    # The lookahead (the keywords' first letters, as IGNORECASE matches them) skips most positions at once.
    "(?=[idlcmasf\u0130\u0131\u017f])(?:"
    + "|".join(sorted({*UPDATE_KEYWORDS, *_NETWORK_KEYWORDS}, key=len, reverse=True))
    + ")",
    re.I,
)
#: The words whose place decides what the lexer takes a bracket to hold (an expression or not) or what
#: it counts: the engine reads them glued to other letters too (``FILTERSTR(`` is FILTER and STR(,
#: ``atrueFILTER(`` the verb a, true and FILTER), so a word or a name's prefix holding one and more
#: is refused: the lexer's view of the brackets after it could differ from the engine's.
_FRAME_KEYWORDS = ("SELECT", "FILTER", "BIND", "VALUES", "UNION", "TRUE", "FALSE")
_FRAME_KEYWORD_GLUED = re.compile("|".join(_FRAME_KEYWORDS), re.I)
#: Every word the engine reads (its grammar's keywords and function names, ``i("…")`` in Oxigraph
#: 0.5's parser, with ``a``, ``true`` and ``false``). Valid SPARQL holds no other word; another one
#: is a mistake, or keywords glued to other text (``COUNT(DISTINCT1<…``: DISTINCT and 1 to the engine,
#: one word to a lexer), and is a syntax error here, explained as one.
_ENGINE_WORDS = frozenset(
    """
    A ABS ADD ADJUST ALL AS ASC ASK AVG BASE BIND BNODE BOUND BY CEIL CLEAR COALESCE CONCAT CONSTRUCT
    CONTAINS COPY COUNT CREATE DATA DATATYPE DAY DEFAULT DELETE DESC DESCRIBE DISTINCT DROP ENCODE_FOR_URI
    EXISTS FALSE FILTER FLOOR FROM GRAPH GROUP GROUP_CONCAT HASLANG HASLANGDIR HAVING HOURS IF IN INSERT
    INTO IRI ISBLANK ISIRI ISLITERAL ISNUMERIC ISTRIPLE ISURI LANG LANGDIR LANGMATCHES LATERAL LCASE LIMIT
    LOAD MAX MD5 MIN MINUS MINUTES MONTH MOVE NAMED NOT NOW OBJECT OFFSET OPTIONAL ORDER PREDICATE PREFIX
    RAND REDUCED REGEX REPLACE ROUND SAMETERM SAMPLE SECONDS SELECT SEPARATOR SERVICE SHA1 SHA256 SHA384
    SHA512 SILENT STR STRAFTER STRBEFORE STRDT STRENDS STRLANG STRLANGDIR STRLEN STRSTARTS STRUUID SUBJECT
    SUBSTR SUM TIMEZONE TO TRIPLE TRUE TZ UCASE UNDEF UNION URI USING UUID VALUES VERSION WHERE WITH YEAR
    """.split()
)
#: What a name's prefix must not begin with: a declaration glued to its name (``PREFIXx: <…>``
#: declares ``x:`` to the engine, and is one name to a lexer).
_DECLARATION_GLUED = re.compile("PREFIX|BASE", re.I)
#: A prefix IRI that ends in its authority (``<http://h>``, ``<http://ex:>``, ``<//[::1]>``): a name's
#: local part appended there becomes part of the host or the port, and where that makes an IRI that
#: is not valid the engine reads the prefix alone and the local part again, as keywords. A plain host
#: is broken only by a ":" in the local part; a port, an IP literal or user information by anything.
_AUTHORITY_ONLY = re.compile(r"<(?:[A-Za-z][A-Za-z0-9+.\-]*:)?//([^/?#>]*)>")
_PLAIN_HOST = re.compile(r"[A-Za-z0-9._~-]*")
#: A network keyword in the prefix of a prefixed name (``SERVICEex:x``, an unknown prefix), the names
#: one per line. In the local part one counts only where the name's IRI is not sure to be valid
#: (``_first_rereadable_name``): ``prov:wasDerivedFrom`` is a name, and only a name.
_NETWORK_IN_PREFIX = re.compile("^[^:\n]*?(" + "|".join(_NETWORK_KEYWORDS) + ")", re.I | re.M)
#: What the engine acts on when it reads a name's local part again.
_REREAD_KEYWORDS = re.compile("|".join((*_FRAME_KEYWORDS, *_NETWORK_KEYWORDS)), re.I)


@dataclass(frozen=True)
class QueryLimits:
    """How much a query may ask of the engine: below what it evaluates without overflowing its stack
    (measured in ``benchmarks/serve.py``-style probes; see ``MAX_*``), with a margin."""

    max_depth: int = MAX_DEPTH
    max_chars: int = MAX_QUERY_CHARS
    max_terms: int = MAX_TERMS
    max_unions: int = MAX_UNIONS
    max_reread_nesting: int = MAX_REREAD_NESTING


#: Query texts up to this long have their verdict remembered (the check is a pure function of the
#: text and the limits), the last ``_CACHED_CHECKS`` of them: at most a few MB.
_CACHED_CHARS = 8 * 1024
_CACHED_CHECKS = 1024


def check_query(
    text: str, max_depth: int = MAX_DEPTH, limits: QueryLimits | None = None, predeclared: bool = True
) -> str | None:
    """Refuse (QueryRefused) a text that is SPARQL Update, uses SERVICE, LOAD or a FROM clause, nests
    brackets and prefix operators deeper than ``max_depth`` (``nesting_depth``), or is bigger than
    ``limits`` allow (characters, tokens, terms, UNION arms), or opens SPARQL 1.2's ``<<``; raise a
    QuerySyntaxError for a string no form of the engine's reads, or for a prefixed name whose prefix
    the engine does not know (the query's own PREFIX declarations, and sotakg's prefixes where the
    engine is given them: ``predeclared``; the Oxigraph server behind ``sotakg serve`` is not). Returns
    the query form (``query_form``).

    The text is read as ``tokens`` reads it, which splits it as the engine does, and a keyword is
    refused wherever the engine could read it, glued to other letters included (``trueSERVICE``).
    The first limit passed, in the order of the tokens, is the one reported; at most ``4 *
    max_terms`` tokens are read, so the cost is bounded whatever the size of the text. Verdicts on
    short texts are cached."""
    limits = limits or QueryLimits(max_depth=max_depth)
    if len(text) <= _CACHED_CHARS:
        form, refusal = _cached_verdict(text, limits, predeclared)
    else:
        form, refusal = _verdict(text, limits, predeclared)
    if refusal is not None:
        raise copy.copy(refusal)  # a fresh exception each time: the verdict may be a cached one
    return form


@functools.lru_cache(maxsize=_CACHED_CHECKS)
def _cached_verdict(
    text: str, limits: QueryLimits, predeclared: bool
) -> tuple[str | None, QueryRefused | QuerySyntaxError | None]:
    # keyed by the whole (frozen) QueryLimits: a limit added later can never be dropped from the key
    return _verdict(text, limits, predeclared)


def _verdict(
    text: str, limits: QueryLimits, predeclared: bool = True
) -> tuple[str | None, QueryRefused | QuerySyntaxError | None]:
    """(query form, None) for a text that passes, (None, the refusal or syntax error) for one that does not."""
    try:
        return _check(text, limits, predeclared), None
    except (QueryRefused, QuerySyntaxError) as refused:
        return None, refused


def _nth(kinds: bytes, codes: Iterable[int], n: int) -> int:
    """The index of the ``n``-th (0-based) token with one of ``codes``."""
    wanted = bytes(1 if code in set(codes) else 0 for code in range(256))
    return list(compress(range(len(kinds)), kinds.translate(wanted)))[n]


def _check(text: str, limits: QueryLimits, predeclared: bool = True) -> str | None:
    if len(text) > limits.max_chars:
        raise QueryRefused(
            f"the query is {len(text)} characters long; the limit is {limits.max_chars}. Split it into smaller queries"
        )
    max_tokens, max_terms, max_unions = limits.max_terms * 4, limits.max_terms, limits.max_unions
    scan = _Scan(text, max_tokens + 1)
    kinds = bytes(scan.kinds)
    starts, ends = scan.starts, scan.ends
    # Each check's first offending token; the earliest is reported, ties in the order of the checks.
    found: list[tuple[int, int, Callable[[], QueryRefused | QuerySyntaxError]]] = []

    def over(limit: int, what: str, index: int) -> Callable[[], QueryRefused]:
        def refusal() -> QueryRefused:
            line, column = position(text, starts[index])
            return QueryRefused(
                f"the query has more than {limit} {what} (line {line}, column {column}); the engine "
                f"could not evaluate it safely. Split it into smaller queries"
            )

        return refusal

    if len(kinds) > max_tokens:
        found.append((max_tokens, 0, over(max_tokens, "tokens", max_tokens)))
    if sum(map(kinds.count, _TERM_CODES)) > max_terms:
        index = _nth(kinds, _TERM_CODES, max_terms)
        found.append((index, 1, over(max_terms, "terms (variables, IRIs, names, literals)", index)))
    if kinds.count(_UNION) > max_unions:
        index = _nth(kinds, (_UNION,), max_unions)
        found.append((index, 2, over(max_unions, "UNIONs", index)))
    if sum(map(kinds.count, _OPENER_CODES)) + kinds.count(_UNARY_) > limits.max_depth:
        level, index = _levels(kinds, limits.max_depth)
        if level > limits.max_depth:

            def too_deep(index: int = index) -> QueryRefused:
                line, column = position(text, starts[index])
                return QueryRefused(
                    f"the query nests brackets and prefix operators (! - + ^) more than {limits.max_depth} levels "
                    f"deep (line {line}, column {column} reaches level {limits.max_depth + 1}); the limit is "
                    f"{limits.max_depth}"
                )

            found.append((index, 3, too_deep))
    for compare in re.finditer(re.escape(bytes([_LT])), kinds):
        index = compare.start()
        if _STANDARD_IRIREF.match(text, starts[index]):

            def iri_like(index: int = index) -> QueryRefused:
                line, column = position(text, starts[index])
                return QueryRefused(
                    f"'<' at line {line}, column {column} reads as an IRI in SPARQL 1.1 and as 'less than' in the "
                    f"engine; put a space after '<' to compare"
                )

            found.append((index, 4, iri_like))
            break
    keyword = _first_keyword(text, kinds, starts, ends)
    if keyword is not None:
        in_name = kinds[keyword[0]] == _PN
        found.append((keyword[0], 5, lambda: _keyword_refusal(text, *keyword, in_name=in_name)))
    declared = _declared_prefixes(text, kinds, starts, ends)
    glued = _first_glued_frame_keyword(text, kinds, starts, ends, declared)
    if glued is not None:
        found.append((glued[0], 9, lambda: _glued_keyword_refusal(text, *glued)))
    unknown = _first_unknown_word(text, kinds, starts, ends)
    if unknown >= 0:
        found.append((unknown, 12, lambda: _unknown_word_error(text, starts[unknown])))
    triple_term = _first_triple_term_function(text, kinds, starts, ends)
    if triple_term >= 0:
        found.append(
            (triple_term, 14, lambda: _triple_term_function_refusal(text, starts[triple_term], ends[triple_term]))
        )
    known = dict(PREFIXES) if predeclared else {}
    undeclared = _first_undeclared_name(text, kinds, starts, ends, declared, known)
    if undeclared >= 0:
        found.append((undeclared, 13, lambda: _undeclared_prefix_error(text, starts[undeclared], ends[undeclared])))
    reread = _first_deep_reread(text, kinds, starts, ends, limits.max_reread_nesting)
    if reread >= 0:
        found.append((reread, 15, lambda: _deep_reread_refusal(text, starts[reread], limits.max_reread_nesting)))
    rereadable = _first_rereadable_name(text, kinds, starts, ends, declared, known)
    if rereadable >= 0:
        found.append((rereadable, 11, lambda: _rereadable_name_refusal(text, starts[rereadable])))
    broken = _first_broken_authority(text, kinds, starts, ends, declared)
    if broken >= 0:
        found.append((broken, 10, lambda: _authority_prefix_refusal(text, starts[broken])))
    not_an_iri = _first_unreadable_iri(text, kinds, starts, ends)
    if not_an_iri >= 0:
        found.append((not_an_iri, 8, lambda: _unreadable_iri_refusal(text, starts[not_an_iri])))
    bad_string, reifier = kinds.find(_BAD_STRING), kinds.find(_REIFY)
    if bad_string >= 0:
        found.append((bad_string, 6, lambda: _bad_string_refusal(text, starts[bad_string])))
    if reifier >= 0:
        found.append((reifier, 7, lambda: _reifier_refusal(text, starts[reifier])))
    if found:
        refusal = min(found, key=lambda item: item[:2])[2]()
        if isinstance(refusal, QueryRefused) and not refusal.writes:
            # An update refused for another reason first (its prologue, its size) is still an update.
            refusal.writes = _first_word(text, kinds, starts, ends, UPDATE_KEYWORDS.__contains__) >= 0
        raise refusal
    select, other = kinds.find(_SELECT), kinds.find(_FORM)
    if other >= 0 and (select < 0 or other < select):
        return text[starts[other] : ends[other]].upper()
    return "SELECT" if select >= 0 else None


_IRI_SELECTOR = bytes(1 if code == _IRI else 0 for code in range(256))
#: IRIREFs as SPARQL 1.1 writes them, with the \u escapes it allows there (a backslash read again
#: outside an IRI is no SPARQL at all, so an escape hides nothing).
_IRIREF_BODY = r'(?:[^<>"{}|^`\\\x00-\x20]|\\u[0-9A-Fa-f]{4}|\\U[0-9A-Fa-f]{8})*+'
_READABLE_IRIREF = re.compile(f"<{_IRIREF_BODY}>")
_STANDARD_IRIREFS = re.compile(f"(?:<{_IRIREF_BODY}>)*+")


def _first_unreadable_iri(text: str, kinds: bytes, starts: list[int], ends: list[int]) -> int:
    """The index of the first IRI token that is no SPARQL 1.1 IRIREF (it holds a blank, a brace, a
    quote, a backslash other than a \\u escape, or another ``<``), or -1. The engine cannot take such
    text as an IRI, so it reads that ``<`` again, as "less than" (in an expression) or not at all: wherever the lexer's
    reading of the brackets around a ``<`` could differ from the engine's (``EXISTS {} <``,
    ``FILTERSTR(``, a keyword glued to a word), what such a token hides (``SERVICE <…> {}`` needs a
    brace) is refused rather than trusted."""
    chosen = kinds.translate(_IRI_SELECTOR)
    if _STANDARD_IRIREFS.fullmatch(_token_texts(text, kinds, starts, ends, _IRI_SELECTOR, gap="")):
        return -1
    for index in compress(range(len(kinds)), chosen):
        if not _READABLE_IRIREF.fullmatch(text, starts[index], ends[index]):
            return index
    return -1


def _declared_prefixes(text: str, kinds: bytes, starts: list[int], ends: list[int]) -> dict[int, str]:
    """The query's PREFIX declarations: the index of each declared name (``ex:``) and its IRI's text."""
    declared: dict[int, str] = {}
    for index in compress(range(len(kinds)), kinds.translate(_IRI_SELECTOR)):
        if index >= 2 and kinds[index - 1] == _PN and kinds[index - 2] in _WORD_CODES:
            if text[starts[index - 2] : ends[index - 2]].upper() == "PREFIX":
                declared[index - 1] = text[starts[index] : ends[index]]
    return declared


def _token_texts(text: str, kinds: bytes, starts: list[int], ends: list[int], selector: bytes, gap: str = "\n") -> str:
    """The texts of the tokens ``selector`` picks, joined by ``gap``: one regex search over them all is
    far cheaper than one a token."""
    chosen = kinds.translate(selector)
    return gap.join(map(text.__getitem__, map(slice, compress(starts, chosen), compress(ends, chosen))))


#: Any of what ``_first_glued_frame_keyword`` looks for in a name's prefix, the names one per line.
_GLUED_IN_PREFIX = re.compile("^[^:\n]*?(?:" + "|".join((*_FRAME_KEYWORDS, "PREFIX", "BASE")) + ")", re.I | re.M)
#: A keyword ``_first_rereadable_name`` looks for, in a name's local part, the names one per line.
_REREAD_IN_LOCAL = re.compile(
    "^[^:\n]*:[^\n]*?(?:" + "|".join((*_FRAME_KEYWORDS, *_NETWORK_KEYWORDS)) + ")", re.I | re.M
)


def _first_glued_frame_keyword(
    text: str, kinds: bytes, starts: list[int], ends: list[int], declared: dict[int, str]
) -> tuple[int, str, int] | None:
    """The first word, or prefix of a prefixed name that the query does not declare, that holds one of
    ``_FRAME_KEYWORDS`` and more (a word that is just the keyword has its own kind): its index, the
    keyword and where it stands. A declared prefix is read as the name it is (``PREFIX UNION: <…>``)."""
    names = {text[starts[index] : ends[index]] for index in declared}
    best: tuple[int, str, int] | None = None
    for selector, in_prefix, anywhere in (
        (_WORD_SELECTOR, False, _FRAME_KEYWORD_GLUED),
        (_PNAME_SELECTOR, True, _GLUED_IN_PREFIX),
    ):
        if anywhere.search(_token_texts(text, kinds, starts, ends, selector)) is None:
            continue  # no token of the kind holds any of them: none to look at one by one
        chosen = kinds.translate(selector)
        for index in compress(range(len(kinds)), chosen):
            if best is not None and index > best[0]:
                break
            start, end = starts[index], ends[index]
            if in_prefix:
                end = text.find(":", start, end)
                if index in declared:
                    continue
                glued_declaration = _DECLARATION_GLUED.match(text, start, end)
                if glued_declaration is not None:
                    best = (index, glued_declaration.group().upper(), start)
                    break
                # A declared name is read as one, unless a "(" follows: then the engine, failing a
                # triple there, reads FILTER and a call (``PREFIX FILTERs: <…>`` … ``FILTERs:f(``).
                if text[start : end + 1] in names and (index + 1 == len(kinds) or kinds[index + 1] != _LPAREN):
                    continue
            elif end - start <= 6 and text[start:end].upper() in _FRAME_KEYWORDS:
                continue  # the keyword itself, lexed as a word (a spelling the lexer does not code)
            hit = _FRAME_KEYWORD_GLUED.search(text, start, end)
            if hit is not None:
                best = (index, hit.group().upper(), hit.start())
                break
    return best


#: A prefix IRI, and a local part with its backslashes taken out, that together always make a valid
#: IRI (ASCII only, the local part in the path, or in the fragment without another '#'): where a name
#: is not sure to be one, the engine may read its prefix alone and its local part again.
_SIMPLE_BASE = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*:[!#-;=?-\[\]_a-z~]*")
_WITH_AUTHORITY = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*://")
_SIMPLE_LOCAL = re.compile(r"(?:[A-Za-z0-9._~:@!$&'()*+,;=/?#\-]|%[0-9A-Fa-f]{2})*")


@functools.lru_cache(maxsize=256)
def _base_shape(base: str) -> tuple[str, int] | None:
    """What ``_surely_an_iri`` needs of a prefix IRI, read once however many names use it (a long
    one read again for each name made the check quadratic): None when no name on it is sure to be an
    IRI; else the two characters after its scheme's colon, and how many '#' it holds."""
    if not _SIMPLE_BASE.fullmatch(base) or base.endswith(("//", ":")) or _AUTHORITY_ONLY.fullmatch(f"<{base}>"):
        return None
    return base.partition(":")[2][:2], base.count("#")


def _surely_an_iri(base: str, local: str) -> bool:
    shape = _base_shape(base)
    local = local.replace("\\", "")
    if shape is None or not _SIMPLE_LOCAL.fullmatch(local):
        return False
    after_scheme, hashes = shape
    if not after_scheme.startswith("//") and (after_scheme + local).startswith("//"):
        return False  # "h:/" and "/9:&" make an authority, whose port may not be valid
    return local.count("#") + hashes <= 1


def _first_word(text: str, kinds: bytes, starts: list[int], ends: list[int], wanted: Callable[[str], bool]) -> int:
    """The index of the first word whose upper-case spelling is ``wanted``, or -1."""
    for index in compress(range(len(kinds)), kinds.translate(_PLAIN_WORD_SELECTOR)):
        if wanted(text[starts[index] : ends[index]].upper()):
            return index
    return -1


#: The calls whose arguments the engine's parser reads twice (a form with, then one without, the
#: optional last argument), and the operator whose left operand it reads twice.
_REREAD_CALLS = frozenset({"REGEX", "SUBSTR", "REPLACE", "GROUP_CONCAT"})
_REREAD_OPERATOR = "IN"
_BRACKET_EVENTS = re.compile(_byte_class({_LPAREN, _RPAREN, _LBRACE, _RBRACE, _LBRACKET, _RBRACKET}))
_SEPARATOR_EVENTS = re.compile(_byte_class({_PLAIN_PUNCT}))
_CLOSER_CODES = frozenset({_RPAREN, _RBRACE, _RBRACKET})


def _first_deep_reread(text: str, kinds: bytes, starts: list[int], ends: list[int], limit: int) -> int:
    """The index of the first token that reaches more than ``limit`` levels of re-read constructs, or
    -1: a REGEX/SUBSTR/REPLACE/GROUP_CONCAT call's ``(`` is one level above what its brackets hold,
    and an IN (or NOT IN) one level above its left operand, what stands before it since the last
    ``,``, ``&&`` or ``||`` of its bracket (measured: ``((x IN (1, 2)) IN (1, 2))`` doubles the
    parse, ``((x IN (1, 2)) && y IN (1, 2))`` does not). One pass over these tokens, in order."""
    calls: set[int] = set()
    events: list[int] = []  # IN words, separators, brackets: in token order
    for index in compress(range(len(kinds)), kinds.translate(_PLAIN_WORD_SELECTOR)):
        word = text[starts[index] : ends[index]].upper()
        if word in _REREAD_CALLS and index + 1 < len(kinds) and kinds[index + 1] == _LPAREN:
            calls.add(index + 1)
        elif word == _REREAD_OPERATOR:
            events.append(index)
    if len(calls) + len(events) <= limit:
        return -1
    operators = set(events)
    events += (m.start() for m in _BRACKET_EVENTS.finditer(kinds))
    events += (m.start() for m in _SEPARATOR_EVENTS.finditer(kinds) if text[starts[m.start()]] in ",&|")
    # Each open bracket: [its own level (1 for a call's "("), the highest level inside it, the highest
    # since the last separator (an IN's left operand)].
    stack: list[list[int]] = [[0, 0, 0]]
    for index in sorted(events):
        frame = stack[-1]
        if index in operators:
            level = 1 + frame[2]
        elif kinds[index] in _OPENER_CODES:
            stack.append([1 if index in calls else 0, 0, 0])
            continue
        elif kinds[index] in _CLOSER_CODES:
            if len(stack) == 1:
                continue
            own, inner, _ = stack.pop()
            frame, level = stack[-1], own + inner
        else:  # a separator: what follows is no longer an IN's left operand
            frame[2] = 0
            continue
        if level > limit:
            return index
        frame[1], frame[2] = max(frame[1], level), max(frame[2], level)
    return -1


def _deep_reread_refusal(text: str, offset: int, limit: int) -> QueryRefused:
    line, column = position(text, offset)
    return QueryRefused(
        f"the query nests {', '.join(sorted(_REREAD_CALLS))} and IN more than {limit} levels deep (line {line}, column "
        f"{column}); the engine's parser takes twice as long at each level. Compute the inner values in "
        f"BINDs of their own"
    )


def _first_unknown_word(text: str, kinds: bytes, starts: list[int], ends: list[int]) -> int:
    """The index of the first word the engine does not know (``_ENGINE_WORDS``), or -1."""
    return _first_word(text, kinds, starts, ends, lambda word: word not in _ENGINE_WORDS)


#: SPARQL 1.2's functions of triple terms, which the engine takes: refused with ``<<``, for the same
#: reason (the graph holds no triple term), and because an answer holding one breaks off in the
#: formats that cannot write it (JSON-LD, RDF/XML) after its head has said 200.
_TRIPLE_TERM_FUNCTIONS = frozenset({"TRIPLE", "ISTRIPLE", "SUBJECT", "PREDICATE", "OBJECT"})


def _first_triple_term_function(text: str, kinds: bytes, starts: list[int], ends: list[int]) -> int:
    """The index of the first word that names a function of triple terms, or -1."""
    return _first_word(text, kinds, starts, ends, _TRIPLE_TERM_FUNCTIONS.__contains__)


def _triple_term_function_refusal(text: str, start: int, end: int) -> QueryRefused:
    line, column = position(text, start)
    return QueryRefused(
        f"{text[start:end]!r} at line {line}, column {column} is a SPARQL 1.2 function of triple terms, which "
        f"queries here do not take (the graph holds none)"
    )


def _unknown_word_error(text: str, offset: int) -> QuerySyntaxError:
    line, column = position(text, offset)
    return syntax_error(f"error at {line}:{column}: no SPARQL keyword or function is spelled so", text)


#: The prefix of each name, the names one per line.
_NAME_PREFIX = re.compile(r"^([^:\n]*):", re.M)


def _first_undeclared_name(
    text: str, kinds: bytes, starts: list[int], ends: list[int], declared: dict[int, str], known: Mapping[str, str]
) -> int:
    """The index of the first prefixed name whose prefix neither the query declares nor the engine
    knows (``known``), or -1. The engine never takes such a name as one: where it fails, it reads the
    same characters as other tokens (``a:SERVICE::1`` is ``a``, then ``:SERVICE::1`` and so SERVICE),
    which no check of the name as written can follow."""
    names = {text[starts[index] : ends[index] - 1] for index in declared} | set(known)
    used = set(_NAME_PREFIX.findall(_token_texts(text, kinds, starts, ends, _PNAME_SELECTOR)))
    if used <= names:
        return -1
    for index in compress(range(len(kinds)), kinds.translate(_PNAME_SELECTOR)):
        if index not in declared and text[starts[index] : text.find(":", starts[index], ends[index])] not in names:
            return index
    return -1


def _undeclared_prefix_error(text: str, start: int, end: int) -> QuerySyntaxError:
    line, column = position(text, start)
    prefix = text[start : text.find(":", start, end)]
    return syntax_error(
        f"error at {line}:{column}: the prefix {prefix}: is not declared; declare it with PREFIX {prefix}: <…>", text
    )


def _first_rereadable_name(
    text: str, kinds: bytes, starts: list[int], ends: list[int], declared: dict[int, str], known: Mapping[str, str]
) -> int:
    """The index of the first prefixed name whose local part holds one of ``_FRAME_KEYWORDS`` or a
    network keyword and whose IRI is not sure to be valid (its prefix declared in the query, or
    sotakg's own), or -1: where the IRI is not valid, the engine reads the prefix alone and the local
    part again (``x:FILTERs:\\#f(`` is ``x:``, FILTER and a call of ``s:\\#f``)."""
    if _REREAD_IN_LOCAL.search(_token_texts(text, kinds, starts, ends, _PNAME_SELECTOR)) is None:
        return -1
    bases = dict(known)
    for index, iri in sorted(declared.items()):
        bases[text[starts[index] : ends[index] - 1]] = iri[1:-1]
    for index in compress(range(len(kinds)), kinds.translate(_PNAME_SELECTOR)):
        if index in declared:
            continue
        prefix, _, local = text[starts[index] : ends[index]].partition(":")
        if _REREAD_KEYWORDS.search(local) is None:
            continue
        base = bases.get(prefix)
        if base is not None and not _surely_an_iri(base, local):
            return index
    return -1


def _rereadable_name_refusal(text: str, offset: int) -> QueryRefused:
    line, column = position(text, offset)
    return QueryRefused(
        f"the prefixed name at line {line}, column {column} holds a keyword, and its IRI is not sure to be valid; "
        f"where it is not, the engine reads the keyword there: write the IRI in full, as <…>"
    )


def _glued_keyword_refusal(text: str, index: int, keyword: str, offset: int) -> QueryRefused:
    line, column = position(text, offset)
    return QueryRefused(
        f"{keyword} (line {line}, column {column}) is glued to other letters; the engine reads it as the keyword "
        f"there, and the check could not follow the brackets after it: put a blank around it"
    )


def _first_broken_authority(
    text: str, kinds: bytes, starts: list[int], ends: list[int], declared: dict[int, str]
) -> int:
    """The index of the first token where a prefix IRI ending in its authority can break: a declaration
    of one whose authority is more than a plain host, or a name with a ":" in its local part that uses
    one; -1 if none."""
    authority_of: dict[str, str] = {}
    first = -1
    for index, iri in declared.items():
        found = _AUTHORITY_ONLY.fullmatch(iri)
        if found is None:
            continue
        if not _PLAIN_HOST.fullmatch(found.group(1)):
            first = index + 1 if first < 0 else min(first, index + 1)
        authority_of[text[starts[index] : ends[index]]] = found.group(1)
    if not authority_of:
        return first
    for index in compress(range(len(kinds)), kinds.translate(_PNAME_SELECTOR)):
        if index in declared or (first >= 0 and index > first):
            continue
        name = text[starts[index] : ends[index]]
        prefix, _, local = name.partition(":")
        if prefix + ":" in authority_of and ":" in local:
            return index if first < 0 else min(first, index)
    return first


def _authority_prefix_refusal(text: str, offset: int) -> QueryRefused:
    line, column = position(text, offset)
    return QueryRefused(
        f"line {line}, column {column}: a prefix IRI that ends in its host or port (no '/' after them) makes this "
        f"name's IRI one that may not be valid, and the engine then reads the rest again; end the prefix IRI with '/'"
    )


def _unreadable_iri_refusal(text: str, offset: int) -> QueryRefused:
    line, column = position(text, offset)
    return QueryRefused(
        f"'<' at line {line}, column {column} opens no IRI the engine can read (the text up to the next '>' holds "
        f"a blank, a brace, a quote, a backslash or another '<'), and the engine would read that '<' again; write "
        f"the IRI without those characters, or a comparison with blanks around '<' and keywords standing alone"
    )


_WORD_SELECTOR = bytes(1 if code in _WORD_CODES else 0 for code in range(256))
_PNAME_SELECTOR = bytes(1 if code == _PN else 0 for code in range(256))
_PLAIN_WORD_SELECTOR = bytes(1 if code == _WORD_ else 0 for code in range(256))


def _first_keyword(text: str, kinds: bytes, starts: list[int], ends: list[int]) -> tuple[int, str, int] | None:
    """The first token in which the engine could read a keyword: (its index, the keyword, the
    keyword's offset in the text). Words are searched whole, prefixed names in their prefix for the
    network keywords (numbers hold only digits, dots, signs and E: never a keyword)."""
    best: tuple[int, str, int] | None = None
    for selector, pattern in ((_WORD_SELECTOR, _KEYWORD_IN_WORD), (_PNAME_SELECTOR, _NETWORK_IN_PREFIX)):
        chosen = kinds.translate(selector)
        joined = _token_texts(text, kinds, starts, ends, selector)
        hit = pattern.search(joined)
        if hit is None:
            continue
        group = hit.lastindex or 0
        at = hit.start(group)
        nth = joined.count("\n", 0, at)
        index = list(compress(range(len(kinds)), chosen))[nth]
        inside = at - (joined.rfind("\n", 0, at) + 1)
        if best is None or index < best[0]:
            best = (index, hit.group(group).upper(), starts[index] + inside)
    return best


def _bad_string_refusal(text: str, offset: int) -> QuerySyntaxError:
    """A string no form reads is a syntax error (nothing else begins with a quote), told as the
    engine's are: an unterminated one is named as such (``syntax_help``), a bad escape here."""
    line, column = position(text, offset)
    return syntax_error(
        f"error at {line}:{column}: the string here holds an escape of no character (a \\u or \\U of a "
        f"surrogate or past U+10FFFF) or a backslash before something other than t b n r f \" ' \\; fix the escape",
        text,
    )


def _reifier_refusal(text: str, offset: int) -> QueryRefused:
    line, column = position(text, offset)
    return QueryRefused(
        f"'<<' at line {line}, column {column} opens a SPARQL 1.2 triple term or reifier, which queries here "
        f"do not take (the graph holds none); to compare, put a space between the two '<'"
    )


def _keyword_refusal(text: str, index: int, keyword: str, offset: int, in_name: bool = False) -> QueryRefused:
    line, column = position(text, offset)
    where = f"line {line}, column {column}"
    if in_name:
        return QueryRefused(
            f"{keyword} ({where}) is part of a prefixed name, and where that name's IRI is not valid the "
            f"engine reads {keyword} there as the keyword; write the IRI in full, as <…>"
        )
    if keyword == "SERVICE":
        return QueryRefused(
            f"SERVICE ({where}) would make the store query a remote endpoint over the network; "
            f"queries here run on the local graph only"
        )
    if keyword == "LOAD":
        return QueryRefused(
            f"LOAD ({where}) would make the store fetch data from the network and change the graph; "
            f"queries here are read-only (add records under the data folder instead)",
            writes=True,
        )
    if keyword in UPDATE_KEYWORDS:
        return QueryRefused(
            f"{keyword} ({where}) is SPARQL Update, and the graph is read-only here: it is compiled "
            f"from the data folder. Only SELECT, ASK, CONSTRUCT and DESCRIBE queries run",
            writes=True,
        )
    return QueryRefused(
        f"FROM ({where}) names a dataset the store would have to fetch; everything is in the "
        f"store's default graph, so leave the FROM clause out"
    )


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


#: Syntax errors of queries up to this many tokens are explained (``syntax_help``).
MAX_EXPLAINED_TOKENS = 4000


def syntax_error(message: str, text: str) -> QuerySyntaxError:
    """Turn pyoxigraph's ``error at L:C: ...`` into a QuerySyntaxError that says line and column and
    shows the line with a caret. Positions are the user's, since prefixes are passed, not prepended."""
    match = _ERROR_AT.match(message.strip())
    if not match:
        return QuerySyntaxError(f"syntax error: {message}")
    line, column, raw = int(match.group(1)), int(match.group(2)), " ".join(match.group(3).split())
    from .syntax_help import explain_syntax_error  # only a query that fails needs it

    read = list(tokens(text, MAX_EXPLAINED_TOKENS + 1))
    # A longer text gets the plain message: the explanations read every token several times over,
    # and the server's guard explains each query it refuses, before any of its limits applies.
    explained = (
        explain_syntax_error(text, read, line, column, raw, PREFIXES) if len(read) <= MAX_EXPLAINED_TOKENS else None
    )
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
        from ..records.sources import display_path

        return f"the store {display_path(self.store_path)}"

    def database(self) -> Path:
        """The Oxigraph database directory of the store's current generation (built first if stale)."""
        from ..graph.open import current_database

        return current_database(self.data_dir, self.store_path)

    def run(self, text: str, bindings: Bindings | None = None, timeout: float = DEFAULT_TIMEOUT) -> QueryResult:
        """Check the query, run it on the store in a worker process, and read its answer.

        Parameters are stated at the head of the WHERE group (``with_values``), as on a remote
        endpoint: given as pyoxigraph's substitutions, they are not known to the engine's planner,
        which then joins every practice before it looks at the one asked for (``practices-citing``:
        1 s against 1 ms at scale 100). A WHERE group that is a UNION of groups is the exception: there
        the engine evaluates what a branch holds besides the value in full before the join, and
        substitutions reach into the branches (``history``: 0.5 s against 4.5 s)."""
        check_query(text, self.max_depth)
        database = str(self.database())
        prefixes = dict(self.prefixes)
        substitutions = dict(bindings) if bindings and _where_is_a_union(text) else None
        bound = with_values(text, bindings) if bindings and substitutions is None else text

        def work() -> bytes:
            return _execute(database, bound, prefixes, substitutions)

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


def binds_clause(bindings: Bindings) -> str:
    """``bindings`` as ``BIND(term AS ?var)`` lines, terms written by pyoxigraph (escaped)."""
    return "\n" + "".join(f"BIND({term} AS ?{variable.value})\n" for variable, term in bindings.items())


def _where_is_a_union(text: str) -> bool:
    """Whether the query's WHERE group holds nothing but a UNION of groups (``{ … } UNION { … }``)."""
    listed = list(tokens(text))
    opening = _where_group(listed)
    if opening is None:
        return False
    branches, depth, expect_group = 0, 0, True
    for token in listed[opening + 1 :]:
        punct = token.text if token.kind == "punct" else ""
        if depth == 0:
            if punct == "}":
                return branches > 1 and not expect_group
            if expect_group and punct == "{":
                branches, expect_group = branches + 1, False
            elif not expect_group and token.kind == "word" and token.text.upper() == "UNION":
                expect_group = True
                continue
            else:
                return False
        if punct and punct in "({[":
            depth += 1
        elif punct and punct in ")}]":
            depth -= 1
    return False


def with_values(text: str, bindings: Bindings) -> str:
    """The query with ``bindings`` stated first in the query's WHERE group, as ``BIND(term AS ?var)``
    (``binds_clause``: terms written by pyoxigraph, escaped).

    There, as with pyoxigraph's substitutions, the values are in scope for the group's FILTERs, BINDs
    and GROUP BY; a block after the whole query would only be joined with its finished answer. A BIND
    at the head of a group is the same join as a one-row ``VALUES`` block, and unlike one, Virtuoso 7
    takes it as the bound start of a transitive property path (with VALUES it finds nothing, or
    refuses the query). A query without a WHERE group to hold it (``DESCRIBE <x>``, ``CONSTRUCT WHERE
    { ... }``, which has no FILTER) gets a ``VALUES`` block (``sparql.values_clause``) at its end, which
    is equivalent there.
    """
    listed = list(tokens(text))
    opening = _where_group(listed)
    if opening is None:
        return text + values_clause(bindings)
    at = listed[opening].offset + 1
    return text[:at] + binds_clause(bindings) + text[at:]


def _where_group(listed: list[Token]) -> int | None:
    """The index in ``listed`` (the query's tokens) of the ``{`` that opens its WHERE group, or None
    for a query without one (``DESCRIBE <x>``, ``CONSTRUCT WHERE { ... }``)."""
    form: str | None = None
    depth = 0
    groups_seen = 0
    for index, token in enumerate(listed):
        if form is None:
            if token.kind == "word" and token.text.upper() in QUERY_FORMS:
                form = token.text.upper()
            continue
        if form == "CONSTRUCT" and groups_seen == 0 and depth == 0 and token.kind == "word":
            if token.text.upper() == "WHERE":
                return None  # the short form: its template is its pattern
        if token.kind != "punct":
            continue
        if token.text == "{" and depth == 0:
            groups_seen += 1
            # CONSTRUCT's first top-level group is its template; the WHERE group comes next.
            if groups_seen == (2 if form == "CONSTRUCT" else 1):
                return index
        if token.text in "({[":
            depth += 1
        elif token.text in ")}]":
            depth = max(depth - 1, 0)
    return None


# ------------------------------------------------------------------------------------------ the worker

_KIND_SEPARATOR = b"\n"
_WORKER_OK = b"0"
_WORKER_FAILED = b"1"


def _execute(database: str, text: str, prefixes: dict[str, str], substitutions: dict | None = None) -> bytes:
    """Run in the worker: open the store read-only, query it, and encode the answer as ``kind\\n`` and
    the payload (SPARQL JSON results, ``true``/``false``, N-Triples, or an error message)."""
    from pyoxigraph import QueryBoolean, QueryResultsFormat, QuerySolutions, RdfFormat, Store

    try:
        store = Store.read_only(database)
    except OSError as error:
        return b"error\n" + f"cannot open the store: {error}".encode()
    except RuntimeError as error:  # RocksDB's word for a damaged database
        return b"damaged\n" + f"{database}\n{error}".encode()
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
    if kind == b"damaged":
        from ..records.sources import display_path

        database, _, why = message.partition("\n")
        raise QueryFailed(
            f"the store's database {display_path(Path(database))} is damaged ({why}); rebuild it with "
            f"'sotakg build --force'"
        )
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
            payload = _on_a_deep_stack(work)
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


def _on_a_deep_stack(work: Callable[[], bytes]) -> bytes:
    """``work()`` on a thread with an ``ENGINE_STACK_BYTES`` stack, as the worker's answer (ok or
    failed, with the error). The engine recurses once per link of a chain of MINUS, OPTIONAL, path
    alternatives or operators, which the check bounds only by the number of tokens: on the main
    thread's stack (8 MiB) a few thousand links overflow it, on this one none that the check lets by."""
    import threading

    answer: list[bytes] = []

    def run() -> None:
        try:
            answer.append(_WORKER_OK + work())
        except BaseException as error:  # noqa: BLE001 - reported to the parent, never raised here
            answer.append(_WORKER_FAILED + f"{type(error).__name__}: {error}".encode())

    size = ENGINE_STACK_BYTES
    while size >= _SMALLEST_ENGINE_STACK:
        try:
            threading.stack_size(size)
            thread = threading.Thread(target=run, name="sotakg-query")
            thread.start()
        except (RuntimeError, MemoryError, ValueError):
            size //= 2  # a limit on address space (ulimit -v) has no room for it: a smaller stack
            continue
        thread.join()
        return answer[0] if answer else _WORKER_FAILED + b"the query's thread ended without an answer"
    run()  # no thread could start at all: the main thread's stack, as before
    return answer[0]


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


def read_standard_input(limit: int, what: str) -> str:
    """Standard input as UTF-8 text, whatever the locale's encoding: UsageProblem when it holds more
    than ``limit`` bytes or bytes that are not UTF-8."""
    import sys

    from ..errors import UsageProblem

    data = sys.stdin.buffer.read(limit + 1)
    if len(data) > limit:
        raise UsageProblem(f"{what} on standard input is over {limit} bytes")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise UsageProblem(f"{what} on standard input is not UTF-8 (byte {error.start + 1}); send UTF-8 text") from None


def read_query_text(query: str | None, query_file: Path | None) -> str:
    """The query of ``sotakg sparql``: the argument, else the file (``-`` is standard input), else
    standard input when it is not a terminal. UsageProblem when there is none or both are given."""
    import sys

    from ..errors import UsageProblem

    if query is not None and query_file is not None:
        raise UsageProblem("give the query as an argument or with --file, not both")
    from ..records.sources import display_path, read_bounded

    # A query longer than the check takes is refused anyway; four bytes a character at most.
    limit = 4 * MAX_QUERY_CHARS
    if query is not None:
        text = query
    elif query_file is not None and str(query_file) != "-":
        try:  # a regular file only: a FIFO would wait, a device never end
            text = read_bounded(query_file, limit).decode("utf-8")
        except OSError as error:
            raise UsageProblem(f"cannot read the query from {display_path(query_file)}: {error}") from None
        except UnicodeDecodeError:
            raise UsageProblem(f"the query in {display_path(query_file)} is not UTF-8; save it as UTF-8") from None
    elif query_file is not None or not sys.stdin.isatty():
        text = read_standard_input(limit, "the query")
    else:
        raise UsageProblem("give a query as an argument, with --file FILE, or on standard input")
    if not text.strip():
        raise UsageProblem("the query is empty")
    return text
