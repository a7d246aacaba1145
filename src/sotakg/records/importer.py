"""``sotakg import markdown``: bring a published index page into the data folder as records.

An import is all or nothing: every file is first written next to its destination under a temporary
name, then the files are renamed into place; on any failure (disk full, permission, a folder in the
way, Ctrl-C) the files already moved are put back, so ``data/`` is byte for byte as before.
"""

from __future__ import annotations

import codecs
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import DataError, ImportProblem, RecordConflict
from .indexpage import parse_page
from .schema import (
    KINDS,
    Record,
    SourceRefusal,
    check_record,
    decode,
    display_path,
    dump_record,
    read_record,
    record_path,
)
from .sources import NotARegularFile, SourceTooLarge, max_file_bytes, read_bounded, refuse_linked_folder

#: A page states everything about its practices and its topic: with --force, a fact of theirs the
#: page leaves empty is removed. Papers, ADRs and the registry are shared with other pages, so a
#: page decides only what it gives (a paper's locators as one group); their other fields are kept.
OWNED_FIELDS: dict[str, tuple[str, ...]] = {
    "practice": (
        "version",
        "title",
        "summary",
        "status",
        "status_column",
        "reason",
        "status_note",
        "reason_names",
        "cites",
        "topic",
    ),
    "topic": ("label", "scope", "declared_size"),
}
PAPER_LOCATORS = ("arxiv", "arxiv_version", "url", "locator")


def page_decides(kind: str, given: dict[str, Any]) -> set[str]:
    """The fields of a ``kind`` record that a page giving ``given`` decides (sets, or removes)."""
    decided = set(OWNED_FIELDS.get(kind, ())) | set(given)
    if kind == "paper" and decided & set(PAPER_LOCATORS):
        decided |= set(PAPER_LOCATORS)
    return decided


@dataclass(frozen=True)
class RecordChange:
    """What an import does to one record file: the fields it adds, changes and removes."""

    path: str
    record: str
    created: bool
    added: tuple[str, ...] = ()
    changed: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    #: What a forced import replaced that was not a readable record (a link, an unreadable file).
    replaced: str = ""

    def describe(self, joined: str = ": ") -> str:
        """``data/practices/SOTA-049.yaml (SOTA-049): changed title; removed reason`` (``joined``: what
        stands between the record and its change)."""
        head = f"{self.path} ({self.record}){joined}"
        if self.replaced:
            return f"{head}replaced {self.replaced}"
        if self.created:
            return f"{head}new record"
        parts = [
            f"{verb} {', '.join(names)}"
            for verb, names in (("added", self.added), ("changed", self.changed), ("removed", self.removed))
            if names
        ]
        return head + "; ".join(parts)


@dataclass
class ImportReport:
    """What an import wrote (or, with ``dry_run``, would write), left alone, and warned about."""

    written: dict[str, int] = field(default_factory=dict)
    unchanged: int = 0
    warnings: list[str] = field(default_factory=list)
    changes: list[RecordChange] = field(default_factory=list)
    dry_run: bool = False


def import_markdown(page: Path, data_dir: Path, force: bool = False, dry_run: bool = False) -> ImportReport:
    """Parse ``page`` and write its records into ``data_dir``.

    A record that already exists is left alone when it already says what the page says; when it
    says something else the import stops before writing anything, unless ``force``: then each
    record says what the page says for the facts the page decides (``page_decides``: a practice or
    topic fact the page leaves empty is removed) and keeps its other fields. ``dry_run`` reports the changes and writes
    nothing. Raises ImportProblem or RecordConflict; ``data_dir`` is then unchanged.
    """
    refuse_linked_folder(data_dir, "data folder")
    shown = display_path(page)
    try:
        raw = read_bounded(page, max_file_bytes())
        text = decode(raw)
    except (NotARegularFile, SourceTooLarge) as error:
        raise ImportProblem(f"cannot import {shown}: {error}") from None
    except OSError as error:
        raise ImportProblem(f"cannot read {shown}: {error.strerror}") from None
    except SourceRefusal as refusal:
        raise ImportProblem(f"{shown}:{refusal.line}: {refusal.message}") from None
    parsed = parse_page(text, shown, file_slug=page.stem if page.suffix == ".md" else None)
    report = ImportReport(warnings=list(parsed.warnings), dry_run=dry_run)
    if raw.startswith(codecs.BOM_UTF8):
        report.warnings.append(
            f"{shown}:1: the page starts with a byte-order mark, which export index does not write; export index "
            f"writes what the page says, not its layout"
        )

    planned: list[tuple[Path, Record]] = []
    conflicts: list[str] = []
    for kind, fields in parsed.records:
        line = parsed.lines.get((kind, "registry" if kind == "registry" else str(fields.get("id"))), 1)
        new = check_record(kind, fields, shown, start=line)
        path = record_path(data_dir, new)
        where = display_path(path)
        if not _inside(data_dir, path.parent):
            raise ImportProblem(f"cannot write {where}: its folder leads outside the data folder")
        if os.path.islink(path):
            # Never read or write through a link: with --force the record replaces the link itself.
            if not force:
                conflicts.append(f"{where} is a symbolic link; replace it with the record file (or use --force)")
                continue
            planned.append((path, new))
            report.changes.append(RecordChange(where, new.id, created=True, replaced="a symbolic link"))
            continue
        if os.path.isdir(path):
            raise ImportProblem(f"cannot write {where}: a folder is in the way; move it, then import again")
        if not os.path.lexists(path):
            planned.append((path, new))
            report.changes.append(RecordChange(where, new.id, created=True))
            continue
        try:
            old = read_record(path, kind)
        except DataError as error:
            if not force:
                conflicts.append(f"{where} cannot be read ({error.problems[0].message})")
                continue
            planned.append((path, new))
            report.changes.append(RecordChange(where, new.id, created=True, replaced="a file it could not read"))
            continue
        merged = _page_wins(kind, old.fields, new.fields)
        change = _change(kind, where, new.id, old.fields, merged)
        if merged == old.fields:
            report.unchanged += 1
        elif force:
            planned.append((path, Record(kind, new.id, merged)))
            report.changes.append(change)
        else:
            conflicts.append(change.describe(" differs from the page: "))
    if conflicts:
        raise RecordConflict(
            f"{len(conflicts)} existing record(s) differ from {shown}; nothing was written:\n  "
            + "\n  ".join(conflicts)
            + "\nCheck the differences, then run again with --force to let the page win."
        )
    report.warnings += _filed_but_not_on_the_page(data_dir, parsed.topic_slug, {row.id for row in parsed.rows}, shown)
    if not dry_run:
        _write_all(data_dir, [(path, dump_record(record)) for path, record in planned])
    for _, record in planned:
        report.written[record.kind] = report.written.get(record.kind, 0) + 1
    report.written = {kind: report.written.get(kind, 0) for kind in KINDS}
    return report


#: How many such practices a warning names (the count is always given).
_NAMED_AT_MOST = 10


def _filed_but_not_on_the_page(data_dir: Path, slug: str, on_page: set[str], shown: str) -> list[str]:
    """A warning naming the practices of the data folder filed under the topic ``slug`` that the page
    does not list (they stay, and export index lists them, so the page would not come back as it is);
    none when there are none. Files that cannot be read are left to ``build`` to report."""
    from .sources import scan_sources

    missing = []
    for source in scan_sources(data_dir):
        if source.kind != "practice" or source.refusal is not None:
            continue
        try:
            record = read_record(Path(source.path), "practice", source.shown)
        except (DataError, OSError, SourceRefusal):
            continue
        if record.get("topic") == slug and record.id not in on_page:
            missing.append(record.id)
    if not missing:
        return []
    missing.sort()
    named = ", ".join(missing[:_NAMED_AT_MOST]) + (
        f" and {len(missing) - _NAMED_AT_MOST} more" if len(missing) > _NAMED_AT_MOST else ""
    )
    return [
        f"{shown}: {len(missing)} practice(s) of the data folder filed under {slug} are not on the page: {named}; they "
        f"are kept, and export index lists them: remove their files or file them under another topic if the page "
        f"dropped them"
    ]


def _page_wins(kind: str, old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """The record ``old`` saying what the page says (``new``) for the facts the page carries."""
    decided = page_decides(kind, new)
    merged = {name: value for name, value in old.items() if name not in decided}
    merged.update(new)
    return {spec.name: merged[spec.name] for spec in KINDS[kind].fields if spec.name in merged}


def _change(kind: str, where: str, record_id: str, old: dict[str, Any], new: dict[str, Any]) -> RecordChange:
    names = [spec.name for spec in KINDS[kind].fields]
    return RecordChange(
        where,
        record_id,
        created=False,
        added=tuple(n for n in names if n in new and n not in old),
        changed=tuple(n for n in names if n in new and n in old and new[n] != old[n]),
        removed=tuple(n for n in names if n in old and n not in new),
    )


# ------------------------------------------------------------------------------------------ writing


def _write_all(data_dir: Path, files: list[tuple[Path, str]]) -> None:
    """Write every file or none: stage each next to its destination, then rename them into place,
    putting back what was moved when anything fails (BaseException too: Ctrl-C)."""
    created_dirs: list[Path] = []
    staged: list[tuple[Path, Path]] = []  # (temporary, destination)
    moved: list[tuple[Path, Path | None]] = []  # (destination, backup of the file it replaced)
    current = data_dir
    try:
        for path, text in files:
            current = path
            _make_parents(path.parent, created_dirs)
            if not _inside(data_dir, path.parent):
                raise ImportProblem(f"cannot write {display_path(path)}: its folder leads outside the data folder")
            if os.path.isdir(path) and not os.path.islink(path):
                raise ImportProblem(f"cannot write {display_path(path)}: a folder is in the way; move it")
            temporary = path.with_name(f".{path.name}.{os.getpid()}.import")
            staged.append((temporary, path))
            with open(temporary, "x", encoding="utf-8", newline="\n") as handle:
                handle.write(text)
                handle.flush()
                os.fsync(handle.fileno())
        for temporary, path in staged:
            current = path
            backup: Path | None = None
            if os.path.lexists(path):
                backup = path.with_name(f".{path.name}.{os.getpid()}.before-import")
                os.rename(path, backup)
            moved.append((path, backup))
            os.rename(temporary, path)
        for _, backup in moved:
            if backup is not None:
                os.unlink(backup)
    except BaseException as error:
        _undo(staged, moved, created_dirs)
        if isinstance(error, ImportProblem):
            raise
        if isinstance(error, OSError):
            reason = error.strerror or str(error)
            raise ImportProblem(
                f"cannot write {display_path(current)}: {reason}; nothing in {display_path(data_dir)} was changed"
            ) from None
        raise


def _inside(data_dir: Path, folder: Path) -> bool:
    """Whether ``folder``, links resolved, is the data folder or inside it."""
    root, real = os.path.realpath(data_dir), os.path.realpath(folder)
    return real == root or real.startswith(root + os.sep)


def _make_parents(folder: Path, created: list[Path]) -> None:
    """Make ``folder`` and its missing parents, noting each in ``created`` so an undo can remove it."""
    missing: list[Path] = []
    probe = folder
    while not os.path.lexists(probe) and probe != probe.parent:
        missing.append(probe)
        probe = probe.parent
    for path in reversed(missing):
        os.mkdir(path)
        created.append(path)


def _undo(staged: list[tuple[Path, Path]], moved: list[tuple[Path, Path | None]], created: list[Path]) -> None:
    for path, backup in reversed(moved):
        try:
            if os.path.lexists(path) and not os.path.isdir(path):
                os.unlink(path)
            if backup is not None:
                os.rename(backup, path)
        except OSError:
            pass
    for temporary, _ in staged:
        try:
            os.unlink(temporary)
        except OSError:
            pass
    for folder in reversed(created):
        try:
            os.rmdir(folder)
        except OSError:
            pass
