"""``sotakg import markdown``: bring a published index page into the data folder as records."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ..errors import DataError, ImportProblem, RecordConflict
from .indexpage import parse_page
from .schema import (
    KINDS,
    REGISTRY_ID,
    Record,
    SourceRefusal,
    atomic_write_text,
    check_record,
    decode,
    display_path,
    dump_record,
    read_record,
    record_path,
)
from .sources import NotARegularFile, SourceTooLarge, max_file_bytes, read_bounded


@dataclass
class ImportReport:
    """What an import wrote, left alone, and warned about."""

    written: dict[str, int] = field(default_factory=dict)
    unchanged: int = 0
    warnings: list[str] = field(default_factory=list)


def import_markdown(page: Path, data_dir: Path, force: bool = False) -> ImportReport:
    """Parse ``page`` and write its records into ``data_dir``.

    A record that already exists is left alone when it already says everything the page says; when
    it says something else the import stops before writing anything, unless ``force``, which lets
    the page's facts win and keeps the fields the page does not give.
    """
    shown = display_path(page)
    try:
        text = decode(read_bounded(page, max_file_bytes()))
    except (NotARegularFile, SourceTooLarge) as error:
        raise ImportProblem(f"cannot import {shown}: {error}") from None
    except OSError as error:
        raise ImportProblem(f"cannot read {shown}: {error.strerror}") from None
    except SourceRefusal as refusal:
        raise ImportProblem(f"{shown}:{refusal.line}: {refusal.message}") from None
    parsed = parse_page(text, shown)
    report = ImportReport(warnings=list(parsed.warnings))

    planned: list[tuple[Path, Record]] = []
    conflicts: list[str] = []
    for kind, fields in parsed.records:
        new = check_record(kind, fields, shown)
        path = record_path(data_dir, new)
        if not path.exists():
            planned.append((path, new))
            continue
        try:
            old = read_record(path, kind)
        except DataError as error:
            if not force:
                conflicts.append(f"{display_path(path)} cannot be read ({error.problems[0].message})")
                continue
            planned.append((path, new))
            continue
        differing = [name for name, value in new.fields.items() if old.fields.get(name) != value]
        if not differing:
            report.unchanged += 1
        elif force:
            merged = {**old.fields, **new.fields}
            planned.append((path, Record(kind, new.id, merged)))
        else:
            names = ", ".join(differing)
            conflicts.append(f"{display_path(path)} differs in {names}")
    if conflicts:
        raise RecordConflict(
            f"{len(conflicts)} existing record(s) differ from {shown}; nothing was written:\n  "
            + "\n  ".join(conflicts)
            + "\nCheck the differences, then run again with --force to let the page win."
        )
    for path, record in planned:
        atomic_write_text(path, dump_record(record))
        label = "registry" if record.id == REGISTRY_ID else record.kind
        report.written[label] = report.written.get(label, 0) + 1
    report.written = {kind: report.written.get(kind, 0) for kind in KINDS}
    return report
