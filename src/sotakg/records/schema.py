"""Records as YAML files: a strict, safe reader, the record schema, and a deterministic writer.

The reader walks PyYAML's event stream itself instead of using a loader, so that it can refuse what
a hand-edited record must not contain (tags, anchors and aliases, duplicate keys, deep nesting),
never recurses, and keeps the line of every field for error messages and validation reports.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import DataError, Problem
from .fastyaml import parse_canonical
from .sources import (
    FOLDER_KINDS,
    REGISTRY_FILE,
    NotARegularFile,
    SourceFile,
    SourceTooLarge,
    atomic_write_text,
    display_path,
    max_file_bytes,
    read_bounded,
    require_data_folder,
    scan_sources,
)

if TYPE_CHECKING:
    import yaml

__all__ = [
    "atomic_write_text",
    "SourceFile",
    "display_path",
    "max_file_bytes",
    "scan_sources",
    "REGISTRY_FILE",
    "FOLDER_KINDS",
]

MAX_DEPTH = 32
#: Bounds that keep a typo from blowing up the compiled graph. A practice's ``version`` makes one node
#: per version, chained by prov:wasRevisionOf: no real practice is revised a hundred times, and the cap
#: bounds what a few bytes of data can make the build and the version rules do.
HIGHEST = {"version": 100, "arxiv_version": 1000, "year": 9999, "declared_size": 10**9}

#: ASCII only, matched whole (``fullmatch``: a ``$`` would let a trailing newline through into an IRI).
IDENTIFIER_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
#: How an integer field must be written: plain ASCII decimal (no 0x, 0o, 0b, 1_000, 33:40 sexagesimal).
DECIMAL_RE = re.compile(r"[-+]?(?:0|[1-9][0-9]*)")
#: The lowest value of each bounded integer field.
LOWEST = {"version": 0, "year": -9999, "declared_size": 0}
#: Control characters a text field may not hold (tab and newline are text).
CONTROL_RE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")
#: How much of an offending value a message quotes.
QUOTE_LIMIT = 80
DECLARED_ID_RE = re.compile(r"^id:[ \t]*['\"]?([A-Za-z0-9][A-Za-z0-9._-]*)", re.M)


@dataclass(frozen=True)
class FieldSpec:
    """The type of one record field: ``str``, ``int`` or ``ids`` (a list of identifiers)."""

    name: str
    type: str
    required: bool = False


@dataclass(frozen=True)
class KindSpec:
    """One kind of record: the folder it lives in and its fields, in the order files are written."""

    kind: str
    folder: str
    fields: tuple[FieldSpec, ...]

    def field(self, name: str) -> FieldSpec | None:
        for spec in self.fields:
            if spec.name == name:
                return spec
        return None


KINDS: dict[str, KindSpec] = {
    spec.kind: spec
    for spec in (
        KindSpec(
            "practice",
            "practices",
            (
                FieldSpec("id", "id", required=True),
                FieldSpec("version", "int"),
                FieldSpec("title", "str"),
                FieldSpec("summary", "str"),
                FieldSpec("status", "str"),
                FieldSpec("status_column", "str"),
                FieldSpec("reason", "str"),
                FieldSpec("status_note", "str"),
                FieldSpec("reason_names", "ids"),
                FieldSpec("cites", "ids"),
                FieldSpec("topic", "id"),
            ),
        ),
        KindSpec(
            "paper",
            "papers",
            (
                FieldSpec("id", "id", required=True),
                FieldSpec("title", "str"),
                FieldSpec("authors", "str"),
                FieldSpec("year", "int"),
                FieldSpec("arxiv", "str"),
                FieldSpec("arxiv_version", "int"),
                FieldSpec("url", "str"),
                FieldSpec("locator", "str"),
                FieldSpec("topic", "id"),
            ),
        ),
        KindSpec(
            "adr",
            "adrs",
            (
                FieldSpec("id", "id", required=True),
                FieldSpec("title", "str"),
                FieldSpec("status", "str"),
                FieldSpec("summary", "str"),
                FieldSpec("supersedes", "ids"),
                FieldSpec("superseded_by", "id"),
            ),
        ),
        KindSpec(
            "topic",
            "topics",
            (
                FieldSpec("id", "id", required=True),
                FieldSpec("label", "str"),
                FieldSpec("scope", "str"),
                FieldSpec("declared_size", "int"),
            ),
        ),
        KindSpec(
            "registry",
            "",
            (
                FieldSpec("title", "str"),
                FieldSpec("description", "str"),
                FieldSpec("declared_size", "int"),
                FieldSpec("governed_by", "ids"),
            ),
        ),
    )
}

REGISTRY_ID = "registry"
assert FOLDER_KINDS == {spec.folder: spec.kind for spec in KINDS.values() if spec.folder}


@dataclass
class Record:
    """One record: its kind, identifier, field values, and where each field stands in its file."""

    kind: str
    id: str
    fields: dict[str, Any]
    file: str = ""
    line: int = 1
    lines: dict[str, int] = field(default_factory=dict)

    def get(self, name: str, default: Any = None) -> Any:
        return self.fields.get(name, default)

    def line_of(self, name: str | None) -> int:
        """The line of field ``name`` in the record's file, or the record's own line."""
        if name is None:
            return self.line
        return self.lines.get(name, self.line)


@dataclass
class Anthology:
    """All records of a data folder, by kind and identifier."""

    records: list[Record]

    def of_kind(self, kind: str) -> list[Record]:
        return [r for r in self.records if r.kind == kind]

    def by_id(self) -> dict[str, Record]:
        return {r.id: r for r in self.records}

    def counts(self) -> dict[str, int]:
        counts = {kind: 0 for kind in KINDS}
        for record in self.records:
            counts[record.kind] += 1
        return counts


# ---------------------------------------------------------------------------------------- reading


class SourceRefusal(Exception):
    def __init__(self, line: int | None, message: str):
        super().__init__(message)
        self.line = line
        self.message = message


def decode(data: bytes) -> str:
    """Decode UTF-8 (a BOM is accepted and dropped); raise SourceRefusal naming the line otherwise."""
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data[: error.start].count(b"\n") + 1
        raise SourceRefusal(line, f"not UTF-8 (byte 0x{data[error.start]:02x}); save the file as UTF-8") from None


def shorten(text: str, limit: int = QUOTE_LIMIT) -> str:
    """``text`` cut to about ``limit`` characters for a message (a data file's content goes into CI
    logs: never quote much of it)."""
    return text if len(text) <= limit else text[: limit - 3] + "..."


def quoted(value: Any) -> str:
    """``repr`` of a value, at most about QUOTE_LIMIT characters."""
    return shorten(repr(value))


class YamlDate(str):
    """A plain scalar YAML 1.1 reads as a date or time: kept as its text, refused in a text field."""


@functools.cache
def _scalar_tools() -> tuple[yaml.resolver.Resolver, yaml.constructor.SafeConstructor]:
    import yaml

    return yaml.resolver.Resolver(), yaml.constructor.SafeConstructor()


def _scalar_value(event: yaml.ScalarEvent) -> Any:
    if event.implicit[0]:
        import yaml

        resolver, constructor = _scalar_tools()
        tag = resolver.resolve(yaml.ScalarNode, event.value, (True, False))
        if tag == "tag:yaml.org,2002:timestamp":
            return YamlDate(event.value)
        if tag in ("tag:yaml.org,2002:merge", "tag:yaml.org,2002:value"):
            return event.value
        if tag == "tag:yaml.org,2002:int" and len(event.value) > 40:
            # Python refuses to convert integers of thousands of digits: no record has one anyway.
            raise SourceRefusal(
                event.start_mark.line + 1 if event.start_mark is not None else None,
                f"the number {shorten(event.value, 24)} has {len(event.value)} characters; no field takes one so large",
            )
        try:
            return constructor.construct_object(yaml.ScalarNode(tag, event.value))
        except (ValueError, OverflowError, yaml.YAMLError):
            # YAML 1.1's patterns take texts its constructors cannot build ("0b_", "0x_": no digits).
            raise SourceRefusal(
                event.start_mark.line + 1 if event.start_mark is not None else None,
                f"{shorten(event.value, 24)} reads as a YAML 1.1 {tag.rsplit(':', 1)[-1]} but is not one; "
                f"quote it to keep it as text",
            ) from None
    return event.value


@dataclass
class _Scalar:
    """A scalar value with the text it was written as (to suggest a fix for a wrong type)."""

    value: Any
    text: str
    plain: bool


def parse_yaml_mapping(text: str) -> tuple[dict[str, Any], dict[str, int], dict[str, str], int]:
    """Parse one YAML document holding a mapping.

    Returns the values, the line of each top-level key, the source text of each top-level scalar
    value, and the line the mapping starts on. Raises SourceRefusal for anything a record may not hold.
    """
    import yaml  # here, not at the top: most records take the fast reader, and most commands read none

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    stack: list[tuple[Any, Any]] = []  # (container, pending key or None)
    key_lines: list[dict[str, int]] = []
    top: Any = None
    top_lines: dict[str, int] = {}
    top_texts: dict[str, str] = {}
    start_line = 1
    documents = 0

    def line_of(event: Any) -> int:
        return event.start_mark.line + 1 if event.start_mark is not None else 0

    def add(value: Any, event: Any) -> None:
        nonlocal top
        if not stack:
            top = value
            return
        container, pending = stack[-1]
        if isinstance(container, list):
            container.append(value)
            return
        if pending is None:
            if isinstance(value, (dict, list)):
                raise SourceRefusal(line_of(event), "a mapping key must be a plain string")
            key = value.value if isinstance(value, _Scalar) else value
            if not isinstance(key, str):
                key = str(key)
            if key in container:
                first = key_lines[-1][key]
                raise SourceRefusal(
                    line_of(event),
                    f"duplicate key '{shorten(key)}' (first on line {first}); keep one of them",
                )
            key_lines[-1][key] = line_of(event)
            stack[-1] = (container, key)
        else:
            container[pending] = value
            if len(stack) == 1 and isinstance(value, _Scalar):
                top_texts[pending] = value.text
            stack[-1] = (container, None)

    try:
        for event in yaml.parse(text, Loader=loader):
            if isinstance(event, yaml.DocumentStartEvent):
                documents += 1
                if documents > 1:
                    raise SourceRefusal(line_of(event), "more than one YAML document; keep one record per file")
                continue
            if isinstance(event, (yaml.StreamStartEvent, yaml.StreamEndEvent, yaml.DocumentEndEvent)):
                continue
            if isinstance(event, yaml.AliasEvent):
                raise SourceRefusal(
                    line_of(event), f"alias *{event.anchor}: anchors and aliases are not allowed; write the value out"
                )
            anchor = getattr(event, "anchor", None)
            if anchor is not None:
                raise SourceRefusal(
                    line_of(event), f"anchor &{anchor}: anchors and aliases are not allowed; write the value out"
                )
            tag = getattr(event, "tag", None)
            if tag is not None:
                raise SourceRefusal(line_of(event), f"YAML tag {tag!r} is not allowed; write a plain value")
            if isinstance(event, yaml.ScalarEvent):
                add(_Scalar(_scalar_value(event), event.value, event.implicit[0]), event)
            elif isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
                if len(stack) >= MAX_DEPTH:
                    raise SourceRefusal(line_of(event), f"nested deeper than {MAX_DEPTH} levels")
                container: Any = {} if isinstance(event, yaml.MappingStartEvent) else []
                if not stack:
                    start_line = line_of(event)
                add(container, event)
                stack.append((container, None))
                key_lines.append({})
                if len(stack) == 1:
                    top_lines = key_lines[0]
            elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
                stack.pop()
                key_lines.pop()
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        line = mark.line + 1 if mark is not None else None
        problem = error.problem or str(error)
        context = error.context_mark
        if error.context and context is not None and context.line + 1 != line:
            problem += f" ({error.context} started on line {context.line + 1})"
        raise SourceRefusal(line, f"YAML syntax error: {problem}") from None
    except yaml.reader.ReaderError as error:
        line = text.count("\n", 0, error.position) + 1
        raise SourceRefusal(
            line, f"YAML syntax error: {error.reason} (character U+{error.character:04X}); remove it"
        ) from None
    except yaml.YAMLError as error:
        raise SourceRefusal(None, f"YAML error: {error}") from None
    except RecursionError:
        raise SourceRefusal(None, f"nested deeper than {MAX_DEPTH} levels") from None

    if top is None:
        raise SourceRefusal(1, "empty file; a record is a mapping of fields (id: ..., title: ...)")
    if not isinstance(top, dict):
        raise SourceRefusal(start_line, "a record must be a mapping of fields (id: ..., title: ...)")
    return _unwrap(top), top_lines, top_texts, start_line


def _unwrap(value: Any) -> Any:
    # Iterative, so deep structures cannot exhaust the Python stack.
    if isinstance(value, _Scalar):
        return value.value
    result: Any = {} if isinstance(value, dict) else []
    work = [(value, result)]
    while work:
        source, target = work.pop()
        items = source.items() if isinstance(source, dict) else enumerate(source)
        for key, item in items:
            if isinstance(item, _Scalar):
                converted: Any = item.value
            else:
                converted = {} if isinstance(item, dict) else []
                work.append((item, converted))
            if isinstance(target, dict):
                target[key] = converted
            else:
                target.append(converted)
    return result


def _describe(value: Any) -> str:
    if value is None:
        return "nothing (null)"
    if isinstance(value, bool):
        return f"the boolean {str(value).lower()}"
    if isinstance(value, (int, float)):
        return f"the number {shorten(str(value), 24)}"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, YamlDate):
        return f"the date {quoted(str(value))}"
    return f"the text {quoted(value)}"


def _check_field(spec: FieldSpec, value: Any, text: str | None) -> str | None:
    """Return why ``value`` does not fit ``spec``, or None."""
    if spec.type in ("str", "id"):
        if isinstance(value, str) and not (spec.type == "str" and isinstance(value, YamlDate)):
            if spec.type == "id" and not IDENTIFIER_RE.fullmatch(value):
                return (
                    f"'{spec.name}' must be an identifier (ASCII letters, digits, '.', '_', '-'; at most 128), "
                    f"got {quoted(value)}"
                )
            if spec.type == "str" and not value.strip():
                return f"'{spec.name}' is empty; give a value or leave the field out"
            control = CONTROL_RE.search(value)
            if control is not None:
                return (
                    f"'{spec.name}' holds the control character U+{ord(control[0]):04X} "
                    f"(only tab and newline are text); remove it"
                )
            return None
        hint = ""
        if text is not None and not isinstance(value, (dict, list)):
            shown = shorten(text, 40)
            hint = f'; YAML reads {shown} as {_describe(value)}: quote it, {spec.name}: "{shown}"'
        return f"'{spec.name}' must be text, got {_describe(value)}{hint}"
    if spec.type == "int":
        if not isinstance(value, int) or isinstance(value, bool):
            return f"'{spec.name}' must be a whole number, got {_describe(value)}"
        if text is not None and not DECIMAL_RE.fullmatch(text):
            return (
                f"'{spec.name}' must be written as a plain decimal number, got {shorten(text, 40)} "
                f"(YAML 1.1 reads that as {shorten(str(value), 24)}); write the digits 0-9 only"
            )
        highest = HIGHEST.get(spec.name)
        if highest is not None and value > highest:
            return f"'{spec.name}' is {shorten(str(value), 24)}, more than any real record has (at most {highest})"
        lowest = LOWEST.get(spec.name)
        if lowest is not None and value < lowest:
            return f"'{spec.name}' is {shorten(str(value), 24)}, less than any real record has (at least {lowest})"
        return None
    if spec.type == "ids":
        if not isinstance(value, list):
            return f"'{spec.name}' must be a list of identifiers ([LIT-016, ...]), got {_describe(value)}"
        for item in value:
            if not isinstance(item, str) or not IDENTIFIER_RE.fullmatch(item):
                return f"'{spec.name}' must list identifiers such as LIT-016, got {_describe(item)}"
        if len(set(value)) != len(value):
            return f"'{spec.name}' lists the same identifier twice"
        return None
    raise AssertionError(spec.type)


def read_record(path: Path, kind: str, shown: str | None = None, data: bytes | None = None) -> Record:
    """Read and check one record file (or its already read ``data``).

    Raises DataError naming the file, line and record."""
    shown = shown or display_path(path)
    fallback_id = shorten(path.stem, 40) if kind != "registry" else REGISTRY_ID
    try:
        if data is None:
            data = read_bounded(path, max_file_bytes())
        text = decode(data)
        parsed = parse_canonical(text)
        if parsed is None:
            declared = DECLARED_ID_RE.search(text)
            if declared and kind != "registry":
                fallback_id = declared[1]
            parsed = parse_yaml_mapping(text)
        values, lines, texts, start = parsed
    except SourceRefusal as refusal:
        raise DataError([Problem(shown, refusal.line, fallback_id, refusal.message)]) from None
    except (NotARegularFile, SourceTooLarge) as error:
        raise DataError([Problem(shown, None, fallback_id, str(error))]) from None
    except OSError as error:
        raise DataError([Problem(shown, None, fallback_id, f"cannot read: {error.strerror}")]) from None
    return check_record(kind, values, shown, lines, texts, start)


#: The problems of one record's fields that are listed; the rest are counted (each costs memory and a line).
MAX_PROBLEMS_PER_FILE = 50


def check_record(
    kind: str,
    values: dict[str, Any],
    shown: str = "<record>",
    lines: dict[str, int] | None = None,
    texts: dict[str, str] | None = None,
    start: int = 1,
) -> Record:
    """Check field names and types against the schema of ``kind`` and make a Record."""
    spec = KINDS[kind]
    lines = lines or {}
    texts = texts or {}
    record_id = values.get("id") if kind != "registry" else REGISTRY_ID
    valid_id = isinstance(record_id, str) and IDENTIFIER_RE.fullmatch(record_id)
    label = record_id if valid_id else shorten(stem_and_suffix(shown)[0], 40)
    problems: list[Problem] = []
    unreported = 0  # past MAX_PROBLEMS_PER_FILE: counted, not kept (a file of 100,000 bad fields)
    known = ", ".join(f.name for f in spec.fields)
    for name, value in values.items():
        field_spec = spec.field(name)
        why: str | None
        if field_spec is None:
            why = f"unknown field '{shorten(name, 40)}'; a {kind} has: {known}"
        else:
            why = _check_field(field_spec, value, texts.get(name))
        if not why:
            continue
        if len(problems) < MAX_PROBLEMS_PER_FILE:
            problems.append(Problem(shown, lines.get(name, start), label, why))
        else:
            unreported += 1
    for field_spec in spec.fields:
        if field_spec.required and field_spec.name not in values:
            problems.append(Problem(shown, start, label, f"missing '{field_spec.name}'"))
    if unreported:
        problems.append(
            Problem(
                shown,
                problems[MAX_PROBLEMS_PER_FILE - 1].line,
                label,
                f"and {unreported} more problems of its fields after this line, not listed; fix those above first",
                stands_for=unreported,
            )
        )
    if problems:
        raise DataError(problems)
    ordered = {f.name: values[f.name] for f in spec.fields if f.name in values}
    return Record(kind, str(label), ordered, shown, lines.get("id", start), dict(lines))


def load_anthology(
    data_dir: Path, sources: list[SourceFile] | None = None, contents: Mapping[str, bytes] | None = None
) -> Anthology:
    """Read every record of ``data_dir``; raise DataError listing every problem found.

    ``sources`` and ``contents`` (file bytes by relative path) let a caller that already scanned
    and read the folder avoid doing it twice."""
    require_data_folder(data_dir)
    problems: list[Problem] = []
    records: list[Record] = []
    for source in sources if sources is not None else scan_sources(data_dir):
        record, found = read_source(source, contents)
        problems.extend(found)
        if record is not None:
            records.append(record)  # even when misnamed, so that a duplicate id is reported too
    problems.extend(_duplicate_problems(records))
    problems.extend(reserved_id_problems(records))
    if problems:
        raise DataError(problems)
    return Anthology(records)


def outside_record_folder(shown: str, relative: str) -> Problem:
    """The problem of a record file outside the record folders (it is never read)."""
    folders = ", ".join(sorted(FOLDER_KINDS))
    return Problem(
        shown, None, shorten(Path(relative).stem, 40), f"not in a record folder; move it into one of: {folders}"
    )


def read_source(source: SourceFile, contents: Mapping[str, bytes] | None = None) -> tuple[Record | None, list[Problem]]:
    """One listed file as load_anthology reads it: its record (None when it cannot be read) and its
    problems (a refusal, a file outside the record folders, what read_record finds, a misnamed file)."""
    if source.refusal is not None:
        return None, [Problem(source.shown, None, shorten(Path(source.relative).stem, 40), source.refusal)]
    if source.kind is None:
        return None, [outside_record_folder(source.shown, source.relative)]
    data = contents.get(source.relative) if contents is not None else None
    try:
        record = read_record(Path(source.path), source.kind, source.shown, data)
    except DataError as error:
        return None, list(error.problems)
    misnamed = file_name_problem(source, record)
    return record, [] if misnamed is None else [misnamed]


def stem_and_suffix(path: str) -> tuple[str, str]:
    """The stem and suffix of the last part of a ``/``-separated path, as pathlib gives them
    (``"a/b.c.yaml"``: ``"b.c"``, ``".yaml"``; ``".yaml"``: itself, none), without making a Path
    (two a file would cost a tenth of a build)."""
    name = path.rstrip("/").rpartition("/")[2]
    dot = name.rfind(".")
    if 0 < dot < len(name) - 1:
        return name[:dot], name[dot:]
    return name, ""


def file_name_problem(source: SourceFile, record: Record) -> Problem | None:
    """The problem of a record file not named after the id it holds (the registry has no id), or None."""
    stem, suffix = stem_and_suffix(source.relative)
    if record.kind == "registry" or stem == record.id:
        return None
    return Problem(
        record.file,
        record.line,
        record.id,
        f"the file is named {shorten(stem, 40)}{suffix} but holds id {record.id}; "
        f"rename the file to {record.id}{suffix} or fix 'id'",
    )


def _duplicate_problems(records: Iterable[Record]) -> list[Problem]:
    # Practices, papers and ADRs share one identifier space (their IRIs); topics have their own.
    seen: dict[tuple[bool, str], Record] = {}
    problems = []
    for record in records:
        key = (record.kind == "topic", record.id)
        first = seen.get(key)
        if first is None:
            seen[key] = record
            continue
        problems.append(
            Problem(
                record.file,
                record.line,
                record.id,
                f"identifier {record.id} is also used by {first.file}:{first.line}; keep one of the two",
                rule="id-unique",
            )
        )
    return problems


#: The local name of the topic scheme's IRI under id: (vocab.TOPIC_SCHEME_IRI), which the registry
#: describes. Kept here as text: the schema does not import the graph's vocabulary.
SCHEME_ID = "topics"
#: An id that names a version of a practice, as vocab.version_iri writes it: ``<practice>-v<n>``.
VERSION_ID_RE = re.compile(r"(?P<practice>.+)-v(?P<number>[1-9][0-9]*)")
#: The kinds whose records are nodes under id: (topics have a namespace of their own).
ID_KINDS = ("practice", "paper", "adr")


def version_owner(record_id: str) -> tuple[str, int] | None:
    """The practice id and version number that ``record_id`` would be the version IRI of (version_iri
    mints ``id:<practice>-v<n>`` for n from 1 to the highest version a practice may have), or None."""
    match = VERSION_ID_RE.fullmatch(record_id)
    if match is None or len(match["number"]) > len(str(HIGHEST["version"])):
        return None
    number = int(match["number"])
    return (match["practice"], number) if number <= HIGHEST["version"] else None


def reserved_id_problem(record: Record, practices: dict[str, Record]) -> Problem | None:
    """The problem of a practice, paper or ADR whose id is an IRI sotakg gives a node of its own: the
    topic scheme's (``id:topics``), or a version's of a practice in ``practices`` (by id), whether or
    not that practice has that version yet. Its statements would be about that node. None otherwise."""
    if record.kind not in ID_KINDS:
        return None
    if record.id == SCHEME_ID:
        message = (
            f"id {record.id} is the IRI sotakg gives the topic scheme (id:{SCHEME_ID}, which {REGISTRY_FILE} "
            f"describes); give this record another id, and its file that name"
        )
        return Problem(record.file, record.line, record.id, message, rule="id-unique")
    owner = version_owner(record.id)
    practice = practices.get(owner[0]) if owner is not None else None
    if owner is None or practice is None:
        return None
    message = (
        f"id {record.id} is the IRI sotakg gives version {owner[1]} of practice {practice.id} "
        f"({practice.file}:{practice.line}; a practice's versions are <id>-v1, <id>-v2, ...); "
        f"give this record another id, and its file that name"
    )
    return Problem(record.file, record.line, record.id, message, rule="id-unique")


def reserved_id_problems(records: Iterable[Record]) -> list[Problem]:
    """The problems of the records whose id is an IRI sotakg mints itself (see reserved_id_problem)."""
    records = list(records)
    practices: dict[str, Record] = {}
    for record in records:
        if record.kind == "practice":
            practices.setdefault(record.id, record)
    return [problem for record in records if (problem := reserved_id_problem(record, practices)) is not None]


# ---------------------------------------------------------------------------------------- writing


def record_path(data_dir: Path, record: Record) -> Path:
    """Where a record's file belongs in a data folder."""
    if record.kind == "registry":
        return data_dir / REGISTRY_FILE
    return data_dir / KINDS[record.kind].folder / f"{record.id}.yaml"


def dump_record(record: Record) -> str:
    """The YAML text of a record: one field a line in schema order, lists of identifiers inline,
    strings quoted only where YAML needs it."""
    import yaml

    spec = KINDS[record.kind]
    lines = []
    for field_spec in spec.fields:
        if field_spec.name not in record.fields:
            continue
        value = record.fields[field_spec.name]
        if isinstance(value, list):
            flow = yaml.safe_dump(value, default_flow_style=True, allow_unicode=True, width=2**31 - 1)
            lines.append(f"{field_spec.name}: {flow.strip()}\n")
        else:
            # YAML reads NEL and the Unicode line and paragraph separators as line breaks: escape them.
            raw_unicode = not (isinstance(value, str) and any(c in value for c in "\x85\u2028\u2029"))
            lines.append(
                yaml.safe_dump(
                    {field_spec.name: value}, default_flow_style=False, allow_unicode=raw_unicode, width=2**31 - 1
                )
            )
    return "".join(lines) or "{}\n"
