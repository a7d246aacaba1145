"""The query check's lexer and check as they were before the lexer's hot path moved into the regex
engine (``sotakg.query.sparql``): a per-character, per-token Python loop, kept verbatim as the
reference that ``tests/test_sparql_lexer.py`` holds the fast one to (same tokens, same refusals)."""

# ruff: noqa: E501
from __future__ import annotations

import itertools
import re
from collections.abc import Iterator
from dataclasses import dataclass

from sotakg.errors import QueryRefused
from sotakg.graph.vocab import PREFIXES
from sotakg.query.sparql import (
    _CLOSERS,
    _ENGINE_WORDS,
    _OPENERS,
    _REREAD_CALLS,
    _TERM_KINDS,
    MAX_DEPTH,
    QUERY_FORMS,
    UPDATE_KEYWORDS,
    QueryLimits,
    Token,
    _authority_prefix_refusal,
    _bad_string_refusal,
    _deep_reread_refusal,
    _glued_keyword_refusal,
    _keyword_refusal,
    _reifier_refusal,
    _rereadable_name_refusal,
    _surely_an_iri,
    _undeclared_prefix_error,
    _unknown_word_error,
    _unreadable_iri_refusal,
    position,
)

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
#: The code point of a \\u or \\U escape: the engine's string rule fails unless it is a character.
_ESCAPE_SEQUENCE = re.compile(r"\\(?:u([0-9A-Fa-f]{4})|U([0-9A-Fa-f]{8})|.)", re.S)
_STRING = {
    "'''": re.compile("'''(?:(?:''|')?+(?:[^'\\\\]|" + _ESCAPES + "))*+'''"),
    '"""': re.compile('"""(?:(?:""|")?+(?:[^"\\\\]|' + _ESCAPES + '))*+"""'),
    "'": re.compile("'(?:[^'\\\\\\n\\r]|" + _ESCAPES + ")*+'"),
    '"': re.compile('"(?:[^"\\\\\\n\\r]|' + _ESCAPES + ')*+"'),
}
# The engine tries the long form, then the short one (a failed long string is read again as short
# ones). A string neither reads fails the query there; it is still taken as one token, to the end of
# its line, so that tools reading unfinished text (the console) see where it runs.
_LOOSE_STRING = {
    "'": re.compile(r"'(?:[^'\\\n\r]|\\.)*+(?:'|$)", re.M),
    '"': re.compile(r'"(?:[^"\\\n\r]|\\.)*+(?:"|$)', re.M),
}


def _read_string(text: str, i: int) -> re.Match[str] | None:
    """The string the engine reads at ``i``: the first of the long and the short form that matches and
    whose escapes all name characters."""
    quote = text[i]
    for form in (quote * 3, quote):
        if form == quote * 3 and not text.startswith(form, i):
            continue
        match = _STRING[form].match(text, i)
        escapes = _ESCAPE_SEQUENCE.finditer(match.group()) if match else ()
        if match and all(_is_character(int(e.group(1) or e.group(2) or "0", 16)) for e in escapes):
            return match
    return None


def _is_character(code: int) -> bool:
    return code <= 0x10FFFF and not 0xD800 <= code <= 0xDFFF


#: An IRI as SPARQL 1.1 defines it. Where the engine compares (``?a<?b>?c``), the standard's longest
#: token rule reads an IRI: such text is refused rather than given two meanings.
_STANDARD_IRIREF = re.compile(r'<[^<>"{}|^`\\\x00-\x20]*+>')
#: An IRI the engine can read: SPARQL 1.1's IRIREF with its \u escapes.
_IRIREF_WITH_ESCAPES = re.compile(r'<(?:[^<>"{}|^`\\\x00-\x20]|\\u[0-9A-Fa-f]{4}|\\U[0-9A-Fa-f]{8})*>')
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
        return previous.text in (")", "}")  # EXISTS { … } is an operand
    return previous.kind == "word" and previous.text.lower() in ("true", "false")


# The engine reads an IRI as ``<``, anything but ``>``, ``>``, then checks it: wherever an IRI may
# start, a ``<`` is an IRI or a syntax error (``<<`` aside, which no valid IRI begins with). One
# holding another ``<`` never passes the check, so that ``<`` is read again, as the lexer reads it.


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
            match = _read_string(text, i) or _LOOSE_STRING[c].match(text, i)
            token = Token("string", text[i : match.end() if match else n], i)
        elif text.startswith("<<", i):  # SPARQL 1.2's << and <<(, whatever the context: refused
            token = Token("punct", "<<", i)
        elif c == "<" and not _compares(frame, previous):
            if next_close != -1 and next_close < i:
                next_close = text.find(">", i)
            next_open = text.find("<", i + 1)  # the engine refuses an IRI holding "<" and reads that "<" again
            is_iri = next_close > i and not 0 <= next_open < next_close
            token = Token("iri", text[i : next_close + 1], i) if is_iri else Token("punct", c, i)
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


_FRAME_WORDS = ("SELECT", "FILTER", "BIND", "VALUES", "UNION", "TRUE", "FALSE")


def _glued_frame_keyword(token: Token) -> tuple[str, int] | None:
    """A keyword that decides the brackets' reading, glued to more letters in a word or a name's prefix."""
    if token.kind == "word":
        where = token.text
        if where.upper() in _FRAME_WORDS:
            return None
    elif token.kind == "pname" and not token.text.startswith("_:"):
        where = token.text.split(":", 1)[0]
    else:
        return None
    found = re.search("|".join(_FRAME_WORDS), where, re.I)
    return (found.group().upper(), found.start()) if found else None


def _keyword_at(token: Token) -> tuple[str, int] | None:
    """A keyword the engine could read in this token, and its offset in the token."""
    if token.kind == "word" or token.kind == "number":
        found = _KEYWORD_IN_WORD.search(token.text)
    elif token.kind == "pname" and not token.text.startswith("_:"):
        found = _NETWORK_IN_PREFIX.search(token.text.split(":", 1)[0])
    else:
        return None
    return (found.group().upper(), found.start()) if found else None


def check_query(
    text: str, max_depth: int = MAX_DEPTH, limits: QueryLimits | None = None, predeclared: bool = True
) -> str | None:
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
    # The PREFIX declarations (of the tokens the check reads): a declared name is read as a name.
    scanned = list(itertools.islice(tokens(text), max_tokens + 1))
    declared = {
        k - 1: t.text
        for k, t in enumerate(scanned)
        if k >= 2
        and t.kind == "iri"
        and scanned[k - 1].kind == "pname"
        and not scanned[k - 1].text.startswith("_:")
        and scanned[k - 2].kind == "word"
        and scanned[k - 2].text.upper() == "PREFIX"
    }
    names = {scanned[k].text for k in declared}
    known = dict(PREFIXES) if predeclared else {}
    bases = known | {scanned[k].text[:-1]: iri[1:-1] for k, iri in sorted(declared.items())}
    authority_of = {
        scanned[k].text: found.group(1)
        for k, iri in declared.items()
        if (found := re.fullmatch(r"<(?:[A-Za-z][A-Za-z0-9+.\-]*:)?//([^/?#>]*)>", iri))
    }
    seen: list[Token] = []
    # For each open bracket: its own level (1 for a re-read call's "("), the highest level inside it, and
    # the highest since its last separator (what an IN's left operand holds).
    rereads: list[list[int]] = [[0, 0, 0]]
    for token in tokens(text):
        too_deep = False
        previous = seen[-1] if seen else None
        seen.append(token)
        reached = None
        if token.kind == "word" and token.text.upper() == "IN":
            reached = 1 + rereads[-1][2]
        elif token.kind == "punct" and token.text in _OPENERS:
            call = previous is not None and previous.kind == "word" and previous.text.upper() in _REREAD_CALLS
            rereads.append([1 if call and token.text == "(" else 0, 0, 0])
        elif token.kind == "punct" and token.text in _CLOSERS and len(rereads) > 1:
            own, inner, _ = rereads.pop()
            reached = own + inner
        elif token.kind == "punct" and token.text[0] in ",&|":
            rereads[-1][2] = 0
        if reached is not None:
            too_deep = reached > limits.max_reread_nesting
            rereads[-1][1], rereads[-1][2] = max(rereads[-1][1], reached), max(rereads[-1][2], reached)
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
        if kind == "string" and _read_string(text, token.offset) is None:
            raise _bad_string_refusal(text, token.offset)
        if kind == "punct" and token.text == "<<":
            raise _reifier_refusal(text, token.offset)
        if kind == "iri" and not _IRIREF_WITH_ESCAPES.fullmatch(token.text):
            raise _unreadable_iri_refusal(text, token.offset)
        if kind == "iri" and len(seen) - 2 in declared:
            host = re.fullmatch(r"<(?:[A-Za-z][A-Za-z0-9+.\-]*:)?//([^/?#>]*)>", token.text)
            if host and not re.fullmatch(r"[A-Za-z0-9._~-]*", host.group(1)):
                raise _authority_prefix_refusal(text, token.offset)
        if too_deep:  # checked after the limits above, as the fast check ranks its findings
            raise _deep_reread_refusal(text, token.offset, limits.max_reread_nesting)
        if kind == "punct" or kind == "var" or kind == "iri" or kind == "string":
            continue  # nothing the engine could read as a keyword
        if form is None and kind == "word" and token.text.upper() in QUERY_FORMS:
            form = token.text.upper()
        found = _keyword_at(token)
        if found is None:
            is_name = kind == "pname" and not token.text.startswith("_:")
            here = len(seen) - 1
            call_follows = here + 1 < len(scanned) and scanned[here + 1].text == "("
            declared_name = is_name and (
                here in declared or (token.text.split(":", 1)[0] + ":" in names and not call_follows)
            )
            declaration = re.match("PREFIX|BASE", token.text, re.I) if is_name and here not in declared else None
            if declaration is not None:  # PREFIXx: declares x: to the engine
                raise _glued_keyword_refusal(text, 0, declaration.group().upper(), token.offset)
            glued = None if declared_name else _glued_frame_keyword(token)
            if glued is not None:
                raise _glued_keyword_refusal(text, 0, glued[0], token.offset + glued[1])
            if kind == "word" and token.text.upper() not in _ENGINE_WORDS:
                raise _unknown_word_error(text, token.offset)
            prefix, _, local = token.text.partition(":")
            if is_name and here not in declared and prefix + ":" in authority_of and ":" in local:
                raise _authority_prefix_refusal(text, token.offset)
            if (
                is_name
                and here not in declared
                and re.search("|".join((*_FRAME_WORDS, "SERVICE", "FROM")), local, re.I)
            ):
                base = bases.get(prefix)
                if base is not None and not _surely_an_iri(base, local):
                    raise _rereadable_name_refusal(text, token.offset)
            if is_name and here not in declared and prefix not in bases:
                raise _undeclared_prefix_error(text, token.offset, token.offset + len(token.text))
            continue
        keyword, inside = found
        if kind == "pname":
            raise _keyword_refusal(text, 0, keyword, token.offset + inside, in_name=True)
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
