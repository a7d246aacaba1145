"""``sotakg diff``: what a change does to the anthology, in the anthology's own terms.

Records are matched across the two sides by kind and identifier, so a file that moves is one record
whose file changed, and a record whose identifier changes is one removed and one added. Each field
that differs is one change; a practice's status change carries its new reason (and the records that
reason names) instead of listing them apart. The formats are text for people, Markdown for a
pull-request comment or ``$GITHUB_STEP_SUMMARY``, JSON for scripts, and ``sparql-update``, the
``DELETE DATA``/``INSERT DATA`` that turns BASE's graph into HEAD's (``graph.delta``).

Every value in a report comes from the records or their file names, which a pull request controls.
Text and Markdown show control characters (C0, DEL, C1, bidirectional overrides, line separators)
as visible escapes (``\x1b``), so none reaches a terminal; Markdown escapes every character with
inline meaning in CommonMark and GitHub's dialect (links, images, code, emphasis, HTML, entities,
table pipes, math), and percent-encodes link targets, so no value renders as anything but text.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..errors import printable
from ..graph.delta import TripleDelta, sparql_update, triple_delta
from ..query.remote import check_graph_iri
from ..records.revisions import DataSide
from ..records.schema import KINDS, Anthology, Record

FORMATS = ("text", "markdown", "json", "sparql-update")
KIND_ORDER = ("practice", "paper", "adr", "topic", "registry")
KIND_TITLE = {"practice": "Practices", "paper": "Papers", "adr": "ADRs", "topic": "Topics", "registry": "Registry"}
_NOUN = {"practice": "practice", "paper": "paper", "adr": "ADR", "topic": "topic", "registry": "registry"}
#: Fields a status change carries with it rather than listing apart.
_WITH_STATUS = ("reason", "reason_names")
#: Text cells longer than this are cut (with an ellipsis) in text and Markdown; JSON keeps them whole.
CELL_CHARS = 160


@dataclass(frozen=True)
class Change:
    """One change to one record: ``change`` is ``added``, ``removed``, ``file`` (moved) or the name of
    the field that changed; ``before`` and ``after`` are the field's values (None: not set)."""

    kind: str
    record: str
    change: str
    before: Any = None
    after: Any = None
    file: str | None = None
    #: For a status change: the new reason and the records it names.
    reason: str | None = None
    reason_names: tuple[str, ...] = ()
    #: HEAD's file of the record as links name it (from the top of its repository); None when
    #: HEAD has no file to link to (a removed record).
    link: str | None = None

    def as_dict(self) -> dict[str, Any]:
        document: dict[str, Any] = {
            "kind": self.kind,
            "record": self.record,
            "change": self.change,
            "before": self.before,
            "after": self.after,
            "file": self.file,
        }
        if self.change == "status":
            document["reason"] = self.reason
            document["reason_names"] = list(self.reason_names)
        return document


@dataclass
class AnthologyDiff:
    """Every change from BASE to HEAD, records in kind order then identifier order."""

    base: str
    head: str
    changes: list[Change]
    triples: TripleDelta
    counts: dict[str, dict[str, int]] = field(init=False)

    def __post_init__(self) -> None:
        self.counts = {}
        changed: dict[str, set[str]] = {}
        for change in self.changes:
            tally = self.counts.setdefault(change.kind, {"added": 0, "removed": 0, "changed": 0})
            if change.change in ("added", "removed"):
                tally[change.change] += 1
            else:
                changed.setdefault(change.kind, set()).add(change.record)
        for kind, records in changed.items():
            self.counts[kind]["changed"] = len(records)

    def summary(self) -> str:
        """One line: what changed, by kind, and in triples."""
        parts = []
        for kind in KIND_ORDER:
            tally = self.counts.get(kind)
            if not tally:
                continue
            noun = _NOUN[kind]
            words = [f"{n} {what}" for what, n in tally.items() if n]
            plural = noun if kind == "registry" else noun + "s"
            parts.append(f"{plural}: {', '.join(words)}")
        if not parts:
            return "no change to the anthology"
        deleted, inserted = len(self.triples.deleted), len(self.triples.inserted)
        noun = "triple" if inserted == 1 else "triples"
        return "; ".join(parts) + f" ({inserted} {noun} inserted, {deleted} deleted)"


def compute_diff(base: DataSide, head: DataSide) -> AnthologyDiff:
    """The changes that turn ``base``'s records into ``head``'s."""
    changes = [
        change
        if change.file is None or change.change == "removed"
        else dataclasses.replace(change, link=head.link_path(change.file))
        for change in record_changes(base.anthology, head.anthology, base.relative_file, head.relative_file)
    ]
    return AnthologyDiff(base.label, head.label, changes, triple_delta(base.anthology, head.anthology))


def _keyed(anthology: Anthology) -> dict[tuple[str, str], Record]:
    return {(record.kind, record.id): record for record in anthology.records}


def _order(key: tuple[str, str]) -> tuple[int, str]:
    return KIND_ORDER.index(key[0]), key[1]


def _same(shown: str) -> str:
    return shown


def record_changes(
    base: Anthology,
    head: Anthology,
    base_file: Callable[[str], str] = _same,
    head_file: Callable[[str], str] = _same,
) -> list[Change]:
    """The changes between two anthologies, record by record and field by field in schema order.

    ``base_file`` and ``head_file`` make a record's file relative to its side's data folder, so a
    record is "moved" only when its place in the data folder changed."""
    before, after = _keyed(base), _keyed(head)
    changes: list[Change] = []
    for key in sorted(before.keys() | after.keys(), key=_order):
        kind, record_id = key
        old, new = before.get(key), after.get(key)
        if old is None and new is not None:
            changes.append(Change(kind, record_id, "added", None, dict(new.fields), new.file or None))
            continue
        if new is None and old is not None:
            changes.append(Change(kind, record_id, "removed", dict(old.fields), None, old.file or None))
            continue
        assert old is not None and new is not None
        status_changed = old.get("status") != new.get("status")
        for spec in KINDS[kind].fields:
            name = spec.name
            was, now = old.get(name), new.get(name)
            if was == now or (status_changed and name in _WITH_STATUS and kind == "practice"):
                continue
            if spec.type == "ids" and set(was or []) == set(now or []):
                continue  # the graph holds a set: another order of the same ids is no change
            if name == "status" and kind == "practice":
                changes.append(
                    Change(
                        kind,
                        record_id,
                        "status",
                        was,
                        now,
                        new.file or None,
                        new.get("reason"),
                        tuple(new.get("reason_names", [])),
                    )
                )
            else:
                changes.append(Change(kind, record_id, name, was, now, new.file or None))
        if old.file and new.file and base_file(old.file) != head_file(new.file):
            changes.append(Change(kind, record_id, "file", old.file, new.file, new.file))
    return changes


# ------------------------------------------------------------------------------------ describing


def _cut(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= CELL_CHARS else text[: CELL_CHARS - 1] + "…"


#: How much of what two values share is shown before the place they first differ, when that place is
#: past what a cut value shows.
_CONTEXT = 40


def _changed_values(before: Any, after: Any) -> tuple[str, str] | None:
    """Two texts as shown side by side: cut so that where they first differ is in view (from a little
    before it, after an ellipsis, when that is past the cut), or None when only whitespace changed
    (the shown forms, whitespace collapsed, are the same)."""
    if not isinstance(before, str) or not isinstance(after, str):
        return _value(before), _value(after)
    was, now = " ".join(before.split()), " ".join(after.split())
    if was == now:
        return None
    common = len(os.path.commonprefix([was, now]))
    if common < CELL_CHARS - _CONTEXT:
        return _cut(was), _cut(now)
    start = common - _CONTEXT
    return _cut("…" + was[start:]), _cut("…" + now[start:])


def _value(value: Any) -> str:
    if value is None:
        return "(none)"
    if isinstance(value, list):
        return ", ".join(value) if value else "(none)"
    return _cut(str(value))


def _list_change(before: list[str] | None, after: list[str] | None) -> str:
    was, now = set(before or []), set(after or [])
    return " ".join([f"+{item}" for item in sorted(now - was)] + [f"-{item}" for item in sorted(was - now)])


def _version_change(before: object, after: object) -> str:
    """A version change by its direction: a new (higher) version, one lowered, one set or removed."""
    if after is None:
        return f"version removed (was v{_value(before)})"
    if before is None:
        return f"version set: v{_value(after)}"
    if isinstance(before, int) and isinstance(after, int) and after < before:
        return f"version lowered: v{before} -> v{after}"
    return f"new version: v{_value(before)} -> v{_value(after)}"


def describe(change: Change) -> str:
    """One change in a sentence of the anthology's terms."""
    noun = _NOUN[change.kind]
    if change.change == "added":
        fields = change.after or {}
        title = fields.get("title") or fields.get("label")
        words = [f"new {noun}"]
        if title:
            words.append(f'"{_cut(title)}"')
        if "status" in fields:
            words.append(f"({fields['status']})")
        if change.kind == "practice":
            cites = fields.get("cites") or []
            words.append(f"cites {', '.join(cites)}" if cites else "cites nothing")
        # what a reviewer needs to judge a new record: its claim, and why it was rejected
        said = [f"{name}: {_cut(str(fields[name]))}" for name in ("summary", "reason", "scope") if fields.get(name)]
        return "; ".join([" ".join(words), *said])
    if change.change == "removed":
        fields = change.before or {}
        title = fields.get("title") or fields.get("label")
        return f"{noun} removed" + (f' (was "{_cut(title)}")' if title else "")
    if change.change == "file":
        return f"file moved from {change.before} to {change.after}"
    if change.change == "status":
        text = f"status {_value(change.before)} -> {_value(change.after)}"
        if change.reason:
            text += f"; reason: {_cut(change.reason)}"
        if change.reason_names:
            text += f" (names {', '.join(change.reason_names)})"
        return text
    if change.change == "version":
        return _version_change(change.before, change.after)
    spec = KINDS[change.kind].field(change.change)
    if spec is not None and spec.type == "ids":
        return f"{change.change.replace('_', ' ')}: {_list_change(change.before, change.after)}"
    shown = _changed_values(change.before, change.after)
    if shown is None:
        return f"{change.change.replace('_', ' ')}: only whitespace changed"
    return f"{change.change.replace('_', ' ')}: {shown[0]} -> {shown[1]}"


def _by_kind(diff: AnthologyDiff) -> list[tuple[str, list[Change]]]:
    groups: dict[str, list[Change]] = {}
    for change in diff.changes:
        groups.setdefault(change.kind, []).append(change)
    return [(kind, groups[kind]) for kind in KIND_ORDER if kind in groups]


#: Characters with inline meaning in CommonMark or GitHub Flavored Markdown, backslash-escaped:
#: escapes, code, emphasis, strikethrough, links and images, table pipes, math. (Block syntax needs
#: a line start, and every line a value lands on begins with sotakg's own text.)
_MARKDOWN_SPECIAL = re.compile(r"([\\`*_~\[\]()!|$])")
#: HTML tags, autolinks (``<...>``) and character references, written as entities.
_HTML = {"&": "&amp;", "<": "&lt;"}


def render_text(diff: AnthologyDiff, link_base: str | None = None) -> str:
    """A heading line, then the changes by kind, one a line (control characters escaped)."""
    lines = [f"{printable(diff.base)} -> {printable(diff.head)}: {printable(diff.summary())}"]
    for kind, changes in _by_kind(diff):
        lines += ["", KIND_TITLE[kind]]
        rows = [(printable(change.record), printable(describe(change))) for change in changes]
        width = max(len(record) for record, _ in rows)
        lines += [f"  {record:<{width}}  {what}" for record, what in rows]
    return "\n".join(lines) + "\n"


#: What GitHub turns into a mention, an issue or pull-request link, or a link where a diff is posted as
#: a comment (``@user``, ``a@b.example``, ``#12``, ``GH-12``, ``https://…``, ``www.…``): a zero-width
#: space after its first character keeps a record's text from pinging people or linking anywhere, as
#: bots that post release notes do (``@&#8203;user``).
_AUTOLINKED = re.compile(r"(@)(?=[A-Za-z0-9_-])|(#)(?=[0-9])|(GH)(?=-[0-9])|(:)(?=//)|(www)(?=\.)", re.IGNORECASE)
_ZERO_WIDTH_SPACE = "&#8203;"


def markdown_text(text: str) -> str:
    """``text`` as Markdown that renders as exactly that text, on one line, in a table cell or not,
    with a zero-width space where GitHub would otherwise make a mention or a link (``_AUTOLINKED``)."""
    text = _MARKDOWN_SPECIAL.sub(r"\\\1", printable(text))
    text = "".join(_HTML.get(character, character) for character in text)
    return _AUTOLINKED.sub(lambda match: match[0] + _ZERO_WIDTH_SPACE, text)


def markdown_code(text: str) -> str:
    """``text`` as a Markdown code span: fenced by more backticks than it holds in a row."""
    text = printable(text)
    fence = "`" * (max((len(run) for run in re.findall("`+", text)), default=0) + 1)
    padding = " " if text.startswith("`") or text.endswith("`") or text.startswith(" ") else ""
    return f"{fence}{padding}{text}{padding}{fence}"


def link_target(link_base: str | None, path: str) -> str:
    """A link to ``path`` under ``link_base``, percent-encoded so that no character of either can end
    the link or change what it points at (``path`` is taken as path segments only; ``&`` is encoded
    too, since Markdown decodes character references in a link target)."""
    base = urllib.parse.quote(link_base or "", safe=":/?#@!$'*+,;=%~", errors="surrogateescape")
    return base + urllib.parse.quote(path, safe="/", errors="surrogateescape")


def _link(change: Change, link_base: str | None) -> str:
    name = markdown_text(change.record)
    if change.link is None:
        return name
    return f"[{name}]({link_target(link_base, change.link)})"


def render_markdown(diff: AnthologyDiff, link_base: str | None = None) -> str:
    """A summary line, then one table per kind: record (linked to its file), change, before, after."""
    lines = [
        # The summary holds only counts and kind names (no value of a record).
        f"**sotakg diff** {markdown_code(diff.base)} → {markdown_code(diff.head)}: {diff.summary()}"
    ]
    for kind, changes in _by_kind(diff):
        lines += ["", f"### {KIND_TITLE[kind]}", "", "| Record | Change | What |", "|---|---|---|"]
        for change in changes:
            lines.append(
                f"| {_link(change, link_base)} | {markdown_text(change.change)} | {markdown_text(describe(change))} |"
            )
    return "\n".join(lines) + "\n"


def render_json(diff: AnthologyDiff, link_base: str | None = None) -> str:
    document = {
        "base": diff.base,
        "head": diff.head,
        "summary": diff.summary(),
        "counts": diff.counts,
        "triples": {"deleted": len(diff.triples.deleted), "inserted": len(diff.triples.inserted)},
        "changes": [change.as_dict() for change in diff.changes],
    }
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"


def render_diff(diff: AnthologyDiff, format_name: str, link_base: str | None = None, graph: str | None = None) -> str:
    """The diff in one of FORMATS; ``graph`` is the named graph a sparql-update writes to."""
    if format_name == "sparql-update":
        if graph is not None:
            check_graph_iri(graph)
        return sparql_update(diff.triples, graph)
    renderers: dict[str, Callable[[AnthologyDiff, str | None], str]] = {
        "text": render_text,
        "markdown": render_markdown,
        "json": render_json,
    }
    return renderers[format_name](diff, link_base)
