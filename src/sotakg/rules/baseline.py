"""``validate --baseline BASE``: findings marked ``new``, ``unchanged`` or ``absent`` against BASE.

HEAD (the data folder) and BASE (a git revision of the repository holding it, or another data folder
spelled as a path: ``records.revisions.side_source``) are both validated with the same rules and
engine, and their findings matched by what they are about, never by where they stand: rule, record
(or focus node), field and offending value, and the message with line numbers taken out. Lines move
when a file is edited above a finding; a matched finding is the same finding. Matching counts
duplicates, so a second finding of the same kind on the same record is new. As SARIF's
``baselineState`` says: ``new`` (only in HEAD), ``unchanged`` (in both), ``absent`` (only in BASE:
fixed by the change). When HEAD's records cannot be read, its only findings are the unreadable
files: nothing is known of BASE's other findings, so none is called fixed (they are left out rather
than closed by code scanning).

BASE's findings are cached by the git tree of its data folder (with the engine, the shapes and
sotakg's version), beside the store in ``baselines/``. A pull request controls the checkout, so a
cache file git tracks (one committed with the change) is never read: it could claim any finding
was already there, and nor is any other when git tracks anything in ``baselines/``, or when it or a
folder above it is a submodule (whose files git does not list as tracked). Nor does any read or write follow a link: the
store's folder (``.sotakg``) and ``baselines/`` are opened without following links (a link there
means no cache), the cache file is read only when it is a regular file, and written to a new
temporary name (``O_EXCL|O_NOFOLLOW``) renamed over it, which replaces a link rather than writing
through it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import re
import secrets
import stat
from collections import Counter
from collections.abc import Sequence
from pathlib import Path, PurePosixPath
from typing import Any

from .. import __version__
from ..errors import DataError, UsageProblem
from ..records.revisions import find_revision, read_revision, run_git, side_source
from ..records.schema import Anthology, load_anthology
from ..records.sources import display_path, max_file_bytes
from .validate import (
    DEFAULT_ENGINE,
    Finding,
    ValidationReport,
    field_of_path,
    findings_from_problems,
    shapes_paths,
    validate,
    validate_store,
)

CACHE_FOLDER = "baselines"
CACHE_FORMAT = 1
#: A cache file larger than this is not ours (the shipped data's findings take a few kB).
CACHE_MAX_BYTES = 64 * 1024 * 1024
_DIRECTORY_FLAGS = os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_CLOEXEC", 0)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_LINE_NUMBER = re.compile(r"(?<=line )\d+|(?<=:)\d+")
#: A record file named in a message, as the working directory or the revision shows it: only its
#: name is kept (``data/practices/SOTA-047.yaml`` and ``practices/SOTA-047.yaml`` are one file).
_FILE_IN_MESSAGE = re.compile(r"[^\s'\"]*/([^\s/'\"]+\.ya?ml)\b")


def finding_key(finding: Finding) -> tuple[Any, ...]:
    """What a finding is about, independent of the line it stands on and of where the command runs."""
    subject = finding.record or finding.focus or ""
    return (
        finding.rule_id,
        subject,
        field_of_path(finding.path),
        finding.value,
        _LINE_NUMBER.sub("#", _FILE_IN_MESSAGE.sub(r"\1", finding.message)),
    )


def mark_findings(report: ValidationReport, base_findings: Sequence[Finding], label: str) -> ValidationReport:
    """``report`` with each finding marked new or unchanged against ``base_findings``, and the base's
    findings it no longer has listed as absent."""
    marked = [
        dataclasses.replace(finding, state="unchanged" if matched else "new")
        for finding, matched in zip(report.findings, _matched(report.findings, base_findings), strict=True)
    ]
    absent = []
    # An unreadable HEAD has no findings but the unreadable files: nothing BASE had is known fixed.
    if report.readable:
        for finding, matched in zip(base_findings, _matched(base_findings, report.findings), strict=True):
            if not matched:
                absent.append(dataclasses.replace(finding, state="absent"))
    return ValidationReport(
        marked,
        report.rules,
        report.engine,
        report.records,
        report.readable,
        baseline=label,
        absent=sorted(absent, key=Finding.sort_key),
    )


def _place(finding: Finding) -> str:
    """Where a finding stands, as both sides name it: its record folder and file name."""
    return "/".join(PurePosixPath(finding.file).parts[-2:]) if finding.file else ""


def _matched(findings: Sequence[Finding], others: Sequence[Finding]) -> list[bool]:
    """For each of ``findings``, whether one of ``others`` is the same finding, each of ``others``
    matched once: first those in the same file, then any alike, so that of two findings alike but
    for their file, the one in the file the other side has too is the one matched."""
    in_place = Counter((finding_key(f), _place(f)) for f in others)
    alike = Counter(finding_key(f) for f in others)
    keys = [finding_key(f) for f in findings]
    matched = [False] * len(findings)
    for index, (finding, key) in enumerate(zip(findings, keys, strict=True)):
        if in_place[key, _place(finding)] > 0:
            in_place[key, _place(finding)] -= 1
            alike[key] -= 1
            matched[index] = True
    for index, key in enumerate(keys):
        if not matched[index] and alike[key] > 0:
            alike[key] -= 1
            matched[index] = True
    return matched


def anthology_findings(anthology: Anthology, engine: str, shapes: Sequence[Path]) -> list[Finding]:
    """The findings of ``anthology`` on a graph built in memory (nothing is written to disk)."""
    from pyoxigraph import RdfFormat, Store

    from ..graph.rdf import anthology_ntriples
    from ..resources import ontology_path

    store = Store()
    store.bulk_load(path=str(ontology_path()), format=RdfFormat.TURTLE)
    store.bulk_load(anthology_ntriples(anthology), format=RdfFormat.N_TRIPLES)
    return validate_store(store, anthology, engine, shapes).findings


def _cache_key(tree: str, engine: str, shapes: Sequence[Path]) -> str:
    digest = hashlib.sha256()
    # The file size limit decides which of BASE's files can be read at all: findings made under
    # another limit are not the ones this run would make.
    digest.update(json.dumps([CACHE_FORMAT, __version__, tree, engine, max_file_bytes()]).encode())
    for path in shapes:
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def _open_cache_folder(store_path: Path, create: bool) -> int | None:
    """A descriptor of the cache folder (``baselines/`` beside the store), reached without following
    a link in the folders sotakg makes: the store's folder and ``baselines/``. The folder above them
    is the user's (the working directory, or where --store points) and is opened as it is. None
    when there is no usable cache folder."""
    folder = store_path.parent
    names = [CACHE_FOLDER]
    if folder.name not in ("", ".", ".."):
        folder, names = folder.parent, [folder.name, CACHE_FOLDER]
    try:
        descriptor = os.open(folder, _DIRECTORY_FLAGS)
    except OSError:
        return None
    for name in names:
        try:
            if create:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(name, 0o755, dir_fd=descriptor)
            inner = os.open(name, _DIRECTORY_FLAGS | _NOFOLLOW, dir_fd=descriptor)
        except OSError:
            return None  # a link, a file, or no folder: no cache
        finally:
            os.close(descriptor)
        descriptor = inner
    return descriptor


def _from_the_checkout(repo: Path, store_folder: Path) -> bool:
    """Whether the checkout could have put files in the cache folder (``baselines/`` in the store's
    folder), so that none of its files may be trusted: git tracks something in it, or it or a folder
    above it in the work tree is a submodule (one tracked entry, a gitlink, whose files git does not
    list as tracked), or git cannot say. A folder outside the repository's work tree is not the
    checkout's."""
    cache = (store_folder / CACHE_FOLDER).resolve()
    top = repo.resolve()
    if not cache.is_relative_to(top):
        return False
    # The store's folder and every folder above it in the work tree: git lists a submodule (a gitlink)
    # only when it is named itself, never when a path inside it is.
    folder = store_folder.resolve()
    named = [folder, *(above for above in folder.parents if above.is_relative_to(top) and above != top)]
    answer = run_git(repo, "ls-files", "--stage", "-z", "--full-name", "--", *map(str, named))
    if answer.returncode != 0:
        return True
    for entry in answer.stdout.split(b"\0"):
        meta, _, name = entry.partition(b"\t")
        if not name:
            continue
        tracked = top / name.decode("utf-8", "surrogateescape")
        if (
            tracked == cache
            or tracked.is_relative_to(cache)
            or (meta.startswith(b"160000") and cache.is_relative_to(tracked))
        ):
            return True
    return False


def _read_cache(store_path: Path, key: str, repo: Path, tree: str) -> list[Finding] | None:
    folder = _open_cache_folder(store_path, create=False)
    if folder is None:
        return None
    name = f"{key}.json"
    try:
        if _from_the_checkout(repo, store_path.parent):
            return None
        handle = os.open(name, os.O_RDONLY | _NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0), dir_fd=folder)
        with os.fdopen(handle, "rb") as cache:
            status = os.fstat(cache.fileno())
            if not stat.S_ISREG(status.st_mode) or status.st_size > CACHE_MAX_BYTES:
                return None
            document = json.loads(cache.read(CACHE_MAX_BYTES + 1).decode("utf-8", "surrogateescape"))
        if document.get("tree") != tree:
            return None
        return [Finding(**item) for item in document["findings"]]
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return None  # a missing or damaged cache is recomputed, never trusted
    finally:
        os.close(folder)


def _write_cache(store_path: Path, key: str, tree: str, findings: Sequence[Finding]) -> None:
    """Write the cache file as a new file renamed into place; a cache that cannot be written
    only costs time."""
    document = {"tree": tree, "findings": [dataclasses.asdict(f) for f in findings]}
    try:
        # A file name that is not UTF-8 is held in its own bytes (as os reads it, and _read_cache back).
        data = (json.dumps(document, ensure_ascii=False) + "\n").encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:  # a text no bytes can hold: not cached
        return
    folder = _open_cache_folder(store_path, create=True)
    if folder is None:
        return
    temporary = f".{key}.{secrets.token_hex(8)}.tmp"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    try:
        handle = os.open(temporary, flags, 0o644, dir_fd=folder)
        try:
            with os.fdopen(handle, "wb") as cache:
                cache.write(data)
            os.replace(temporary, f"{key}.json", src_dir_fd=folder, dst_dir_fd=folder)
        except OSError:
            with contextlib.suppress(OSError):
                os.unlink(temporary, dir_fd=folder)
    except OSError:
        pass
    finally:
        os.close(folder)


def baseline_findings(
    data_dir: Path, store_path: Path, baseline: str, engine: str, shapes: Sequence[Path]
) -> tuple[str, list[Finding]]:
    """A label for ``baseline`` and its findings: those of ``data_dir`` at the git revision
    ``baseline`` (cached by the data folder's tree), or a data folder's when ``baseline`` is spelled
    as a path (``side_source``: the rule diff and publish --since share). Unreadable files are findings."""
    source = side_source(baseline)
    if isinstance(source, Path):
        try:
            return display_path(source), anthology_findings(load_anthology(source), engine, shapes)
        except DataError as error:
            return display_path(source), findings_from_problems(error.problems)
    revision = find_revision(data_dir, source)
    key = _cache_key(revision.tree, engine, shapes)
    cached = _read_cache(store_path, key, revision.repo, revision.tree)
    if cached is not None:
        return revision.label, cached
    try:
        findings = anthology_findings(read_revision(revision).anthology, engine, shapes)
    except DataError as error:
        findings = findings_from_problems(error.problems)
    _write_cache(store_path, key, revision.tree, findings)
    return revision.label, findings


def validate_against(
    data_dir: Path,
    store_path: Path,
    baseline: str,
    engine: str = DEFAULT_ENGINE,
    shapes: Sequence[Path] | None = None,
    endpoint: str | None = None,
) -> ValidationReport:
    """Validate the data folder and mark each finding against ``baseline`` (a git revision of the
    repository holding the data folder, or a data folder). The report fails only on new findings.
    Raises RevisionError (a UsageProblem) when the revision cannot be read."""
    if endpoint is not None:
        raise UsageProblem("--baseline compares data folders; it cannot be used with --endpoint")
    paths = list(shapes) if shapes is not None else shapes_paths()
    head = validate(data_dir, store_path, engine=engine, shapes=paths)
    label, findings = baseline_findings(data_dir, store_path, baseline, engine, paths)
    return mark_findings(head, findings, label)
