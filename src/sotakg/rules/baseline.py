"""``validate --baseline BASE``: findings marked ``new``, ``unchanged`` or ``absent`` against BASE.

HEAD (the data folder) and BASE (a git revision of the repository holding it, or another data folder)
are both validated with the same rules and engine, and their findings matched by what they are
about, never by where they stand: rule, record (or focus node), field and offending value, and the
message with line numbers taken out. Lines move when a file is edited above a finding; a matched
finding is the same finding. Matching counts duplicates, so a second finding of the same kind on
the same record is new. As SARIF's ``baselineState`` says: ``new`` (only in HEAD), ``unchanged``
(in both), ``absent`` (only in BASE: fixed by the change).

BASE's findings are cached by the git tree of its data folder (with the engine, the shapes and
sotakg's version), beside the store in ``baselines/``. A pull request controls the checkout, so a
cache file git tracks (one committed with the change) is never read: it could claim any finding
was already there. Nor is a cache folder that is a symbolic link used.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import re
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .. import __version__
from ..errors import DataError, UsageProblem
from ..records.revisions import data_tree, load_revision, repository_of, resolve_commit, run_git
from ..records.schema import Anthology, load_anthology
from ..records.sources import atomic_write_text, display_path
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
_LINE_NUMBER = re.compile(r"(?<=line )\d+|(?<=:)\d+")


def finding_key(finding: Finding) -> tuple[Any, ...]:
    """What a finding is about, independent of the line it stands on."""
    subject = finding.record or finding.focus or ""
    return (
        finding.rule_id,
        subject,
        field_of_path(finding.path),
        finding.value,
        _LINE_NUMBER.sub("#", finding.message),
    )


def mark_findings(report: ValidationReport, base_findings: Sequence[Finding], label: str) -> ValidationReport:
    """``report`` with each finding marked new or unchanged against ``base_findings``, and the base's
    findings it no longer has listed as absent."""
    in_base = Counter(finding_key(f) for f in base_findings)
    marked = []
    for finding in report.findings:
        key = finding_key(finding)
        state = "unchanged" if in_base[key] > 0 else "new"
        in_base[key] -= 1
        marked.append(dataclasses.replace(finding, state=state))
    in_head = Counter(finding_key(f) for f in report.findings)
    absent = []
    for finding in base_findings:
        key = finding_key(finding)
        if in_head[key] > 0:
            in_head[key] -= 1
        else:
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
    digest.update(json.dumps([CACHE_FORMAT, __version__, tree, engine]).encode())
    for path in shapes:
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def _cache_file(store_path: Path, key: str) -> Path | None:
    folder = store_path.parent / CACHE_FOLDER
    if folder.is_symlink() or store_path.parent.is_symlink() or (folder.exists() and not folder.is_dir()):
        return None
    return folder / f"{key}.json"


def _tracked(repo: Path, path: Path) -> bool:
    answer = run_git(repo, "ls-files", "--full-name", "--", str(path.resolve()))
    return answer.returncode == 0 and bool(answer.stdout.strip())


def _read_cache(path: Path, repo: Path, tree: str) -> list[Finding] | None:
    if path.is_symlink() or not path.is_file() or _tracked(repo, path):
        return None
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
        if document.get("tree") != tree:
            return None
        return [Finding(**item) for item in document["findings"]]
    except (OSError, ValueError, TypeError, KeyError):
        return None  # a damaged cache is recomputed, never trusted


def _write_cache(path: Path, tree: str, findings: Sequence[Finding]) -> None:
    document = {"tree": tree, "findings": [dataclasses.asdict(f) for f in findings]}
    with contextlib.suppress(OSError):  # a cache that cannot be written only costs time
        atomic_write_text(path, json.dumps(document, ensure_ascii=False) + "\n")


def baseline_findings(
    data_dir: Path, store_path: Path, baseline: str, engine: str, shapes: Sequence[Path]
) -> tuple[str, list[Finding]]:
    """A label for ``baseline`` and its findings: a data folder's, or those of ``data_dir`` at the
    git revision ``baseline`` (cached by the data folder's tree). Unreadable files are findings."""
    folder = Path(baseline)
    if folder.is_dir():
        try:
            return display_path(folder), anthology_findings(load_anthology(folder), engine, shapes)
        except DataError as error:
            return display_path(folder), findings_from_problems(error.problems)
    repo, prefix = repository_of(data_dir)
    commit = resolve_commit(repo, baseline)
    tree = data_tree(repo, commit, prefix, baseline)
    label = f"{baseline} ({commit[:12]})"
    cache = _cache_file(store_path, _cache_key(tree, engine, shapes))
    cached = _read_cache(cache, repo, tree) if cache is not None else None
    if cached is not None:
        return label, cached
    try:
        findings = anthology_findings(load_revision(data_dir, commit).anthology, engine, shapes)
    except DataError as error:
        findings = findings_from_problems(error.problems)
    if cache is not None:
        _write_cache(cache, tree, findings)
    return label, findings


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
