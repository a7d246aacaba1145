"""Plain words for SPARQL syntax errors.

The engine's parser reports the farthest place it got to and every token it could have taken there
(``expected one of LATERAL, SERVICE`` for a triple with no object), which rarely says what is wrong.
``explain_syntax_error`` looks at the query's tokens for the common mistakes — an unterminated string,
a misspelt keyword, an undeclared prefix, a bracket left open or closed twice, a triple missing its
object — and, when one of them lies at or before the engine's position, names it in plain words at its
own place. Anything else keeps the engine's message.

This module only reads tokens (``Token``-like objects with ``kind``, ``text`` and ``offset``, as
``sparql.tokens`` yields them); it runs nothing.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol


class TokenLike(Protocol):
    """What the lexer yields: ``kind`` (word, pname, var, iri, string, number, langtag, punct)."""

    @property
    def kind(self) -> str: ...

    @property
    def text(self) -> str: ...

    @property
    def offset(self) -> int: ...


@dataclass(frozen=True)
class _Tok:
    kind: str
    text: str
    offset: int

    @property
    def end(self) -> int:
        return self.offset + len(self.text)


#: SPARQL 1.1 keywords and built-in functions, with the ones Oxigraph adds (RDF-star, LATERAL).
KEYWORDS = frozenset(
    """
    BASE PREFIX SELECT DISTINCT REDUCED AS CONSTRUCT WHERE DESCRIBE ASK FROM NAMED GROUP BY HAVING ORDER
    ASC DESC LIMIT OFFSET VALUES LOAD SILENT INTO CLEAR DROP CREATE ADD MOVE COPY TO INSERT DATA DELETE
    WITH USING DEFAULT GRAPH ALL OPTIONAL SERVICE BIND UNDEF MINUS UNION FILTER LATERAL A NOT IN STR LANG
    LANGMATCHES DATATYPE BOUND IRI URI BNODE RAND ABS CEIL FLOOR ROUND CONCAT STRLEN UCASE LCASE
    ENCODE_FOR_URI CONTAINS STRSTARTS STRENDS STRBEFORE STRAFTER YEAR MONTH DAY HOURS MINUTES SECONDS
    TIMEZONE TZ NOW UUID STRUUID MD5 SHA1 SHA256 SHA384 SHA512 COALESCE IF STRLANG STRDT SAMETERM ISIRI
    ISURI ISBLANK ISLITERAL ISNUMERIC REGEX SUBSTR REPLACE EXISTS COUNT SUM MIN MAX AVG SAMPLE
    GROUP_CONCAT SEPARATOR TRUE FALSE TRIPLE SUBJECT PREDICATE OBJECT ISTRIPLE ADJUST HASLANG HASLANGDIR
    LANGDIR STRLANGDIR
    """.split()
)
#: The keywords a misspelling is most likely meant to be (clauses before functions).
_CLAUSES = (
    "SELECT CONSTRUCT DESCRIBE ASK WHERE PREFIX BASE DISTINCT REDUCED OPTIONAL FILTER BIND VALUES MINUS "
    "UNION GRAPH ORDER GROUP BY HAVING LIMIT OFFSET EXISTS NOT AS ASC DESC"
).split()
#: Words that open something other than a triple pattern inside a group.
_NOT_TRIPLES = frozenset(KEYWORDS - {"A", "TRUE", "FALSE"})
_PATH_GLUE = frozenset("/|")
_SEPARATORS = frozenset(".;,")
_OPENERS = {"{": "}", "(": ")", "[": "]"}
_CLOSERS = {closer: opener for opener, closer in _OPENERS.items()}


@dataclass(frozen=True)
class Explanation:
    """What is wrong (``message``) and where: a character offset in the query text."""

    offset: int
    message: str


def explain_syntax_error(
    text: str,
    tokens: Sequence[TokenLike],
    line: int,
    column: int,
    engine_detail: str,
    prefixes: Mapping[str, str],
) -> tuple[int, int, str] | None:
    """(line, column, message) naming the mistake behind the engine's syntax error at ``line``:``column``
    of ``text``, or None when none of the common mistakes explains it. ``prefixes`` are the predeclared
    ones; the query's own PREFIX declarations are read from its tokens."""
    toks = _normalise(tokens)
    limit = _offset(text, line, column)
    candidates = [
        *_unterminated_strings(toks),
        *_unknown_words(toks),
        *_undeclared_prefixes(toks, prefixes),
        *_brackets(text, toks),
        *_incomplete_triples(text, toks),
    ]
    fitting = [c for c in candidates if c.offset <= limit]
    if "Prefix not found" in engine_detail:
        fitting = [c for c in fitting if c.message.startswith("undeclared prefix")] or fitting
    if not fitting:
        return None
    best = min(fitting, key=lambda c: c.offset)
    found_line, found_column = _position(text, best.offset)
    return found_line, found_column, best.message


# ------------------------------------------------------------------------------------------ positions


def _offset(text: str, line: int, column: int) -> int:
    """The character offset of a 1-based line and column (clamped to the text)."""
    start = 0
    for _ in range(line - 1):
        newline = text.find("\n", start)
        if newline < 0:
            return len(text)
        start = newline + 1
    return min(start + max(column, 1) - 1, len(text))


def _position(text: str, offset: int) -> tuple[int, int]:
    line = text.count("\n", 0, offset) + 1
    return line, offset - (text.rfind("\n", 0, offset) + 1) + 1


def _where(text: str, offset: int) -> str:
    line, column = _position(text, offset)
    return f"line {line}, column {column}"


def _normalise(tokens: Sequence[TokenLike]) -> list[_Tok]:
    """The lexer keeps a triple's final dot on a prefixed name or number (``id:SOTA-049.``); split it off."""
    out: list[_Tok] = []
    for token in tokens:
        if token.kind in ("pname", "number") and len(token.text) > 1 and token.text.endswith("."):
            body = token.text.rstrip(".")
            out.append(_Tok(token.kind, body, token.offset))
            for i in range(len(body), len(token.text)):
                out.append(_Tok("punct", ".", token.offset + i))
        else:
            out.append(_Tok(token.kind, token.text, token.offset))
    return out


def _shorten(text: str, width: int = 40) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


# ------------------------------------------------------------------------------------------ the mistakes


def _unterminated_strings(toks: Sequence[_Tok]) -> list[Explanation]:
    found = []
    for tok in toks:
        if tok.kind != "string":
            continue
        quote = tok.text[:3] if tok.text[:3] in ('"""', "'''") else tok.text[0]
        if len(tok.text) < 2 * len(quote) or not tok.text.endswith(quote):
            found.append(Explanation(tok.offset, f"unterminated string: the string opened here has no closing {quote}"))
    return found


#: The longest name a "did you mean" is looked for: difflib's cost grows with the product of the
#: lengths, and a query is anyone's text (the serve guard explains its refusals).
SUGGESTED_NAME_CHARS = 64
#: The most declared prefixes a "did you mean" compares an undeclared one with.
SUGGESTION_CANDIDATES = 1000


def _close_match(word: str, candidates: Sequence[str], cutoff: float) -> str | None:
    if len(word) > SUGGESTED_NAME_CHARS:
        return None
    fitting = [c for c in candidates if len(c) <= SUGGESTED_NAME_CHARS][:SUGGESTION_CANDIDATES]
    close = difflib.get_close_matches(word, fitting, n=1, cutoff=cutoff)
    return close[0] if close else None


# Each explainer below gives the first explanation of its kind at most: only the earliest of all is
# shown, and explaining every one would cost a pass per token of a long query.


def _unknown_words(toks: Sequence[_Tok]) -> list[Explanation]:
    found = []
    for tok in toks:
        if tok.kind != "word" or tok.text.upper() in KEYWORDS:
            continue
        word = tok.text
        close = _close_match(word.upper(), _CLAUSES, 0.7) or _close_match(word.upper(), sorted(KEYWORDS), 0.75)
        if close:
            found.append(Explanation(tok.offset, f"unknown word `{word}`: did you mean {close}?"))
        else:
            found.append(
                Explanation(
                    tok.offset,
                    f"`{word}` is not a SPARQL keyword: write a variable (?{word}), a prefixed name "
                    f'(sota:{word}), an IRI in <...> or a string ("{word}")',
                )
            )
        break
    return found


def _undeclared_prefixes(toks: Sequence[_Tok], prefixes: Mapping[str, str]) -> list[Explanation]:
    declared = set(prefixes)
    for before, tok in zip(toks, toks[1:], strict=False):
        if before.kind == "word" and before.text.upper() == "PREFIX" and tok.kind == "pname":
            declared.add(tok.text.split(":", 1)[0])
    found = []
    for i, tok in enumerate(toks):
        if tok.kind != "pname" or (i > 0 and toks[i - 1].kind == "word" and toks[i - 1].text.upper() == "PREFIX"):
            continue
        prefix = tok.text.split(":", 1)[0]
        if prefix == "_" or prefix in declared:
            continue
        close = _close_match(prefix, sorted(declared), 0.6)
        hint = f"did you mean `{close}:`? Or declare" if close else "declare"
        predeclared = " ".join(f"{name}:" for name in prefixes)
        found.append(
            Explanation(
                tok.offset,
                f"undeclared prefix `{prefix}:` in `{tok.text}`: {hint} it with `PREFIX {prefix}: <...>`, "
                f"or use a predeclared one ({predeclared})",
            )
        )
        break
    return found


def _brackets(text: str, toks: Sequence[_Tok]) -> list[Explanation]:
    stack: list[_Tok] = []
    for tok in toks:
        if tok.kind != "punct":
            continue
        if tok.text in _OPENERS:
            stack.append(tok)
        elif tok.text in _CLOSERS:
            if not stack:
                message = f"unexpected `{tok.text}`: there is no open `{_CLOSERS[tok.text]}` for it to close"
                return [Explanation(tok.offset, message)]
            opener = stack.pop()
            if _OPENERS[opener.text] != tok.text:
                return [
                    Explanation(
                        tok.offset,
                        f"missing `{_OPENERS[opener.text]}`: the `{opener.text}` at {_where(text, opener.offset)} "
                        f"is still open where this `{tok.text}` closes",
                    )
                ]
    if stack:
        opener = stack[-1]
        end = toks[-1].end if toks else len(text)
        closer = _OPENERS[opener.text]
        where = _where(text, opener.offset)
        return [Explanation(end, f"missing `{closer}`: the `{opener.text}` at {where} is never closed")]
    return []


@dataclass
class _Segment:
    """The terms of one triple pattern (or predicate-object pair) since the last separator in a group."""

    after: str  # "start" (a new triple), ";" or ","
    terms: list[tuple[int, int]] = field(default_factory=list)  # (start, end) offsets of each term
    subject_group: bool = False  # the subject is a [ ... ] or ( ... ) that may stand alone
    checkable: bool = True
    glue: bool = False  # the next term continues a property path or a datatype (/, |, ^^)


def _incomplete_triples(text: str, toks: Sequence[_Tok]) -> list[Explanation]:
    """Triple patterns inside ``{ }`` that end before their object (or predicate)."""
    found: list[Explanation] = []
    # One entry per open bracket: its kind, and for a { group the current segment (None = not checked).
    stack: list[tuple[str, _Segment | None, int]] = []
    previous: _Tok | None = None

    def add_term(start: int, end: int, group: bool = False) -> None:
        if not stack or stack[-1][0] != "{":
            return
        segment = stack[-1][1]
        if segment is None:
            return
        if segment.glue and segment.terms:
            segment.terms[-1] = (segment.terms[-1][0], end)
            segment.glue = False
            return
        if group and not segment.terms:
            segment.subject_group = True
        segment.terms.append((start, end))

    def close_segment(at: _Tok) -> None:
        segment = stack[-1][1] if stack and stack[-1][0] == "{" else None
        if segment is None or not segment.checkable:
            return
        message = _incomplete(text, segment)
        if message:
            # A missing `.` is pointed at where the next triple starts; a missing part at what came instead.
            where = segment.terms[3][0] if message.startswith("missing `.`") else at.offset
            found.append(Explanation(where, message))

    for tok in toks:
        if tok.kind == "punct" and tok.text in _OPENERS:
            if tok.text == "{":
                data_block = _last_word(toks, tok) == "VALUES"
                inside_group = not stack or stack[-1][0] == "{"
                segment = _Segment("start") if inside_group and not data_block else None
                stack.append(("{", segment, tok.offset))
            else:
                stack.append((tok.text, None, tok.offset))
        elif tok.kind == "punct" and tok.text in _CLOSERS:
            if not stack:
                break
            if tok.text == "}" and stack[-1][0] == "{":
                close_segment(tok)
            kind, _, start = stack.pop()
            outer = stack[-1][1] if stack and stack[-1][0] == "{" else None
            if outer is not None:
                if kind == "{":
                    # After a nested group (OPTIONAL { }, a subquery...) a new triple may start.
                    stack[-1] = ("{", _Segment("start"), stack[-1][2])
                elif outer.checkable:
                    add_term(start, tok.end, group=tok.offset > start + 1)
                else:
                    # FILTER(...) or BIND(...) ends there; a triple may follow.
                    stack[-1] = ("{", _Segment("start"), stack[-1][2])
        elif stack and stack[-1][0] == "{" and stack[-1][1] is not None:
            segment = stack[-1][1]
            if tok.kind == "punct" and tok.text in _SEPARATORS:
                close_segment(tok)
                after = "start" if tok.text == "." else tok.text
                stack[-1] = ("{", _Segment(after), stack[-1][2])
            elif tok.kind == "word" and tok.text.upper() in _NOT_TRIPLES:
                segment.checkable = False
            elif tok.kind in ("var", "iri", "pname", "string", "number", "word"):
                add_term(tok.offset, tok.end)
            elif tok.kind == "langtag":
                pass
            elif tok.kind == "punct" and tok.text in _PATH_GLUE:
                segment.glue = True
            elif tok.kind == "punct" and tok.text == "^" and previous is not None and previous.text == "^":
                segment.glue = True
            elif tok.kind == "punct" and tok.text in "^*+?!":
                pass
            else:
                segment.checkable = False
        previous = tok
    return found


def _last_word(toks: Sequence[_Tok], before: _Tok) -> str | None:
    """The last bare word before ``before`` (to tell a VALUES data block from a group)."""
    last = None
    for tok in toks:
        if tok.offset >= before.offset:
            break
        if tok.kind == "word":
            last = tok.text.upper()
    return last


def _incomplete(text: str, segment: _Segment) -> str | None:
    count = len(segment.terms)
    add = "(a variable, an IRI, a prefixed name or a literal)"
    if count == 0:
        return f"missing object: a `,` must be followed by another object {add}" if segment.after == "," else None
    shown = _shorten(text[segment.terms[0][0] : segment.terms[-1][1]])
    if segment.after == "start":
        if segment.subject_group:
            return f"missing object: `{shown}` has a predicate but no object {add}" if count == 2 else None
        if count == 1:
            return f"missing predicate and object: the triple `{shown}` has only a subject"
        if count == 2:
            return f"missing object: the triple `{shown}` has a subject and a predicate but no object {add}"
        if count > 3:
            first = _shorten(text[segment.terms[0][0] : segment.terms[2][1]])
            return f"missing `.`: `{first}` is a whole triple, so a `.` must end it before the next one starts"
    elif segment.after == ";" and count == 1:
        return f"missing object: the predicate `{shown}` after `;` has no object {add}"
    return None
