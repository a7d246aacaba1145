"""A fast reader for the plain YAML that sotakg itself writes (records.dump_record).

Reading 100,000 record files through PyYAML's event stream costs seconds; almost every record is in
the canonical shape `key: value` a line, so this reader takes that shape and nothing else. It is
conservative: whenever a file is not exactly in that shape (comments, blank lines, block scalars,
escapes, anything YAML might read differently) it returns None and the caller uses the full, strict
reader. A differential test holds it to the full reader's results.
"""

from __future__ import annotations

import functools
import re
from typing import Any

_KEY_LINE = re.compile(r"([a-z_]+): (.*)")
_PLAIN = re.compile(r"[A-Za-z0-9(][^\t#]*")
_FLOW_ITEM = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
# Longer numbers are the full reader's to refuse (Python will not even convert thousands of digits).
_DECIMAL = re.compile(r"[-+]?(?:0|[1-9][0-9]{0,17})")


@functools.cache
def _not_plain_text() -> re.Pattern[str]:
    """Characters the YAML reader refuses or reads as line breaks: leave those files to the full reader.
    Compiled when first needed (9 ms, for its wide ranges): reading a query's header needs none of it."""
    return re.compile("[^\x0a\x20-\x7e\xa0-\u2027\u202a-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


# The plain scalars YAML 1.1 does not read as strings: PyYAML's implicit resolvers (bool, null, float,
# int, timestamp; 6.0) for the first characters a canonical plain scalar can have (a letter, a digit or
# a parenthesis). Kept here so that reading records does not import yaml; a test holds it to PyYAML.
_NOT_A_STRING = re.compile(
    r"""(?:yes|Yes|YES|no|No|NO|true|True|TRUE|false|False|FALSE|on|On|ON|off|Off|OFF
    |null|Null|NULL
    |[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+][0-9]+)?
    |[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+\.[0-9_]*
    |[-+]?0b[0-1_]+
    |[-+]?0[0-7_]+
    |[-+]?(?:0|[1-9][0-9_]*)
    |[-+]?0x[0-9a-fA-F_]+
    |[-+]?[1-9][0-9_]*(?::[0-5]?[0-9])+
    |[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]
    |[0-9][0-9][0-9][0-9] -[0-9][0-9]? -[0-9][0-9]?
     (?:[Tt]|[ \t]+)[0-9][0-9]?
     :[0-9][0-9] :[0-9][0-9] (?:\.[0-9]*)?
     (?:[ \t]*(?:Z|[-+][0-9][0-9]?(?::[0-9][0-9])?))?)""",
    re.X,
)


#: The first characters of everything ``_NOT_A_STRING`` matches: a text starting otherwise is a string
#: without trying the pattern's alternatives (most titles and summaries).
_MAY_NOT_BE_A_STRING = frozenset("yYnNtTfFoO+-0123456789")


def resolves_to_string(text: str) -> bool:
    """Whether YAML reads ``text``, a plain scalar starting with a letter, digit or ``(``, as a string."""
    return not (text[:1] in _MAY_NOT_BE_A_STRING and _NOT_A_STRING.fullmatch(text))


ParseResult = tuple[dict[str, Any], dict[str, int], dict[str, str], int]


def _plain_value(text: str) -> Any:
    """The value of a plain scalar in the canonical subset, or _NO when it is outside it."""
    if not _PLAIN.fullmatch(text) or ": " in text or text.endswith((" ", ":")):
        return _NO
    if _DECIMAL.fullmatch(text):
        return int(text)
    if not resolves_to_string(text):
        return _NO
    return text


class _Outside:
    pass


_NO = _Outside()


def _value(text: str) -> Any:
    if not text:
        return _NO
    first = text[0]
    if first == "'":
        if len(text) < 2 or not text.endswith("'"):
            return _NO
        inner = text[1:-1]
        if "'" in inner.replace("''", ""):
            return _NO
        return inner.replace("''", "'")
    if first == '"':
        inner = text[1:-1]
        if len(text) < 2 or not text.endswith('"') or '"' in inner or "\\" in inner:
            return _NO
        return inner
    if first == "[":
        if not text.endswith("]"):
            return _NO
        inner = text[1:-1]
        if not inner:
            return []
        items = inner.split(", ")
        for item in items:
            if not _FLOW_ITEM.fullmatch(item) or _plain_value(item) != item:
                return _NO
        return items
    return _plain_value(text)


@functools.lru_cache(maxsize=256)
def _is_plain_key(key: str) -> bool:
    # Records use a few keys, each checked once rather than once a line of every file.
    return _plain_value(key) == key


def parse_canonical(text: str) -> ParseResult | None:
    """Parse ``text`` if it is in the canonical record shape; None means: use the full reader."""
    if text == "{}\n":
        return {}, {}, {}, 1
    if not text.endswith("\n") or _not_plain_text().search(text):
        return None
    values: dict[str, Any] = {}
    lines: dict[str, int] = {}
    texts: dict[str, str] = {}
    for number, line in enumerate(text[:-1].split("\n"), start=1):
        match = _KEY_LINE.fullmatch(line)
        if match is None:
            return None
        key, raw = match.groups()
        if key in values or not _is_plain_key(key):  # e.g. `on:` is a boolean key in YAML 1.1
            return None
        value = _value(raw)
        if value is _NO:
            return None
        values[key] = value
        lines[key] = number
        if not isinstance(value, list):
            texts[key] = raw if raw[0] not in "'\"" else value
    if not values:
        return None
    return values, lines, texts, 1
