"""Tests written to kill the mutants of ``rules/baseline.py`` that survived mutation testing (issue 20).

``sotakg validate --baseline BASE`` marks findings new, unchanged or absent against BASE and caches
BASE's findings beside the store. Each test pins one behaviour a surviving mutant changed: what a
finding is matched by, how duplicates are counted, what the marked report keeps of HEAD's, which
shapes and engine both sides are validated with, BASE's label and unreadable files, and the cache:
one file per tree, its modes, when it is trusted (a store outside the repository, a tracked file
beside it, a submodule beside it, git unable to answer), the files it refuses (a link, a FIFO, one
over the size limit) and what a failed or refused write leaves behind.

A cache is trusted when a forged one is believed: ``forge_empty_cache`` rewrites it to say BASE had
no findings, so a trusted cache makes HEAD's 8 findings new, a distrusted one leaves them unchanged.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import stat
import subprocess
import threading
from pathlib import Path

import pytest

from sotakg.cli import cli
from sotakg.errors import UsageProblem
from sotakg.graph import vocab as v
from sotakg.rules.baseline import CACHE_MAX_BYTES, baseline_findings, finding_key, mark_findings, validate_against
from sotakg.rules.validate import Finding, ValidationReport, load_rules, shapes_paths

from .conftest import SHIPPED_DATA
from .gitrepo import commit, git, isolate_git, new_repository

#: HEAD's findings against a cache believed to say BASE had none, and against BASE validated again.
TRUSTED = {"new": 8, "unchanged": 0, "absent": 0}
RECOMPUTED = {"new": 0, "unchanged": 8, "absent": 0}

#: One rule of the shipped shapes, alone in a shapes file: two findings on the shipped data.
SUMMARY_SHAPE = """\
@prefix rule: <https://w3id.org/sotakg/shapes#> .
@prefix sh: <http://www.w3.org/ns/shacl#> .
@prefix sota: <https://w3id.org/sotakg/ontology#> .

rule:practice-summary a sh:PropertyShape ;
    sh:targetClass sota:Practice ;
    sh:path sota:summary ;
    sh:minCount 1 ;
    sh:severity sh:Warning ;
    sh:message "A practice should have a summary: add `summary:`." .
"""
SUMMARY_FINDINGS = [
    ("practice-summary", "SOTA-364", "unchanged"),
    ("practice-summary", "SOTA-376", "unchanged"),
]
BROKEN_YAML = "id: SOTA-017\ntitle: [\n"
YAML_ERROR = "YAML syntax error: did not find expected node content"


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A git repository whose one commit (main) holds the shipped data; the working directory."""
    isolate_git(monkeypatch)
    root = new_repository(tmp_path / "repo")
    monkeypatch.chdir(root)
    return root


@pytest.fixture
def summary_shapes(tmp_path: Path) -> list[Path]:
    path = tmp_path / "summary.ttl"
    path.write_text(SUMMARY_SHAPE, encoding="utf-8")
    return [path]


def against(repo: Path, revision: str = "main", store: Path | None = None, **options) -> ValidationReport:
    return validate_against(repo / "data", store or repo / ".sotakg" / "store", revision, **options)


def cache_file(repo: Path, store: Path | None = None) -> Path:
    """Run a baseline check once and return the one cache file it wrote."""
    store = store or repo / ".sotakg" / "store"
    assert against(repo, store=store).state_counts() == RECOMPUTED
    caches = list((store.parent / "baselines").glob("*.json"))
    assert len(caches) == 1
    return caches[0]


def forge_empty_cache(repo: Path, store: Path | None = None) -> Path:
    """The cache file, rewritten to claim BASE had no findings."""
    cache = cache_file(repo, store)
    document = json.loads(cache.read_text(encoding="utf-8"))
    cache.write_text(json.dumps({"tree": document["tree"], "findings": []}), encoding="utf-8")
    return cache


def track(repo: Path, *paths: str) -> None:
    """Commit exactly these paths (forced past any ignore rule), leaving the store untracked."""
    git(repo, "add", "-f", "--", *paths)
    git(repo, "commit", "-q", "-m", "tracked in the store's folder")


def rows(report: ValidationReport) -> list[tuple[str, str | None, str | None]]:
    return [(f.rule_id, f.record, f.state) for f in report.findings + report.absent]


def warning(line: int, record: str | None = "SOTA-001", focus: str | None = None) -> Finding:
    return Finding("practice-summary", "warning", record, "p.yaml", line, "add `summary:`.", focus=focus)


# ------------------------------------------------------------------------------------ finding_key


def test_finding_key_is_rule_record_field_value_and_message_without_line_numbers() -> None:
    finding = Finding(
        "cites-resolve",
        "violation",
        "SOTA-001",
        "data/practices/SOTA-001.yaml",
        7,
        "LIT-999 (line 12, data/practices/SOTA-001.yaml:7) is no paper",
        focus=v.ID + "SOTA-001",
        path=v.CITES,
        value="LIT-999",
    )
    assert finding_key(finding) == (
        "cites-resolve",
        "SOTA-001",
        "cites",
        "LIT-999",
        "LIT-999 (line #, SOTA-001.yaml:#) is no paper",  # a file named by its name: the same from any folder
    )


def test_finding_key_of_a_finding_with_no_record_is_about_its_focus() -> None:
    finding = Finding("topic-declared-size", "warning", None, None, None, "m", focus=v.ID + "topics")
    assert finding_key(finding) == ("topic-declared-size", v.ID + "topics", None, None, "m")


def test_finding_key_of_a_finding_with_neither_record_nor_focus_has_an_empty_subject() -> None:
    assert finding_key(Finding("data-readable", "violation", None, None, None, "m")) == (
        "data-readable",
        "",
        None,
        None,
        "m",
    )


# ------------------------------------------------------------------------------------ mark_findings


def test_each_duplicate_in_both_head_and_base_is_unchanged() -> None:
    head = ValidationReport([warning(5), warning(6)], [], "sparql", 1)
    marked = mark_findings(head, [warning(1), warning(2)], "main")
    assert [(f.line, f.state) for f in marked.findings] == [(5, "unchanged"), (6, "unchanged")]
    assert marked.absent == []


def test_a_duplicate_fixed_of_three_is_one_absent_finding() -> None:
    head = ValidationReport([warning(5), warning(6)], [], "sparql", 1)
    marked = mark_findings(head, [warning(1), warning(2), warning(3)], "main")
    assert [(f.line, f.state) for f in marked.findings] == [(5, "unchanged"), (6, "unchanged")]
    assert [(f.line, f.state) for f in marked.absent] == [(3, "absent")]


def test_marked_report_keeps_head_rules_engine_and_record_count() -> None:
    rules = load_rules()
    marked = mark_findings(ValidationReport([], rules, "pyshacl", 7), [], "main (0123456789ab)")
    assert (marked.rules, marked.engine, marked.records, marked.readable) == (rules, "pyshacl", 7, True)
    assert marked.summary() == (
        "0 violations, 0 warnings, 0 infos in 7 records (engine pyshacl); "
        "against main (0123456789ab): 0 new, 0 unchanged, 0 fixed."
    )


def test_marked_report_of_an_unreadable_head_stays_unreadable() -> None:
    unreadable = Finding("data-readable", "violation", "SOTA-017", "data/practices/SOTA-017.yaml", 3, YAML_ERROR)
    head = ValidationReport([unreadable], [], "sparql", 0, readable=False)
    marked = mark_findings(head, [warning(1)], "main")
    assert marked.readable is False
    assert marked.summary() == (
        "1 violation, 0 warnings, 0 infos: the data cannot be read; fix the files named above and run again."
    )


# ------------------------------------------------------------------------------------ validate_against


def test_baseline_with_an_endpoint_is_refused_with_the_exact_message(tmp_path: Path) -> None:
    with pytest.raises(UsageProblem) as refused:
        validate_against(tmp_path / "data", tmp_path / "store", "main", endpoint="http://127.0.0.1:9/query")
    assert str(refused.value) == "--baseline compares data folders; it cannot be used with --endpoint"


def test_head_and_a_revision_are_both_validated_with_the_shapes_given(repo: Path, summary_shapes) -> None:
    report = against(repo, shapes=summary_shapes)
    assert rows(report) == SUMMARY_FINDINGS
    assert [rule.id for rule in report.rules] == ["data-readable", "practice-summary"]


def test_head_and_a_folder_are_both_validated_with_the_shapes_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, summary_shapes
) -> None:
    shutil.copytree(SHIPPED_DATA, tmp_path / "data")
    shutil.copytree(SHIPPED_DATA, tmp_path / "old")
    monkeypatch.chdir(tmp_path)
    report = validate_against(Path("data"), Path(".sotakg/store"), "./old", shapes=summary_shapes)
    assert report.baseline == "old"
    assert rows(report) == SUMMARY_FINDINGS


def test_head_is_validated_with_the_engine_asked_for(repo: Path, summary_shapes) -> None:
    report = against(repo, engine="pyshacl", shapes=summary_shapes)
    assert report.engine == "pyshacl"
    assert rows(report) == SUMMARY_FINDINGS


def test_an_unreadable_folder_baseline_has_its_unreadable_files_as_findings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shutil.copytree(SHIPPED_DATA, tmp_path / "data")
    shutil.copytree(SHIPPED_DATA, tmp_path / "old")
    (tmp_path / "old/practices/SOTA-017.yaml").write_text(BROKEN_YAML, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    label, findings = baseline_findings(Path("data"), Path(".sotakg/store"), "./old", "sparql", shapes_paths())
    assert (label, findings) == (
        "old",
        [Finding("data-readable", "violation", "SOTA-017", "old/practices/SOTA-017.yaml", 3, YAML_ERROR)],
    )


def test_an_unreadable_revision_has_its_unreadable_files_as_findings_fixed_by_head(repo: Path) -> None:
    shipped = (repo / "data/practices/SOTA-017.yaml").read_text(encoding="utf-8")
    (repo / "data/practices/SOTA-017.yaml").write_text(BROKEN_YAML, encoding="utf-8")
    commit(repo, "an unreadable record")
    (repo / "data/practices/SOTA-017.yaml").write_text(shipped, encoding="utf-8")
    report = against(repo)
    assert report.state_counts() == {"new": 8, "unchanged": 0, "absent": 1}
    assert report.absent == [
        Finding("data-readable", "violation", "SOTA-017", "data/practices/SOTA-017.yaml", 3, YAML_ERROR, state="absent")
    ]


def test_summary_names_the_revision_and_counts_by_state(runner, repo: Path) -> None:
    head = git(repo, "rev-parse", "HEAD").strip()
    result = runner.invoke(cli, ["validate", "--baseline", "main"])
    assert result.exit_code == 0
    assert result.stdout.splitlines()[-1] == (
        f"0 violations, 7 warnings, 1 info in 65 records (engine sparql); "
        f"against main ({head[:12]}): 0 new, 8 unchanged, 0 fixed."
    )


# ------------------------------------------------------------------------------------ the cache: where, how


def test_each_revision_of_the_data_is_cached_in_a_file_of_its_own(repo: Path) -> None:
    first = git(repo, "rev-parse", "HEAD").strip()
    (repo / "data/practices/SOTA-997.yaml").write_text(
        "id: SOTA-997\nversion: 1\ntitle: T\nsummary: S\nstatus: Proposed\ntopic: distributed-optimization\n",
        encoding="utf-8",
    )
    commit(repo, "a practice more")
    against(repo, first)
    against(repo, "main")
    trees = sorted(json.loads(p.read_text(encoding="utf-8"))["tree"] for p in (repo / ".sotakg/baselines").iterdir())
    assert trees == sorted(git(repo, "rev-parse", f"{rev}:data").strip() for rev in (first, "main"))


def test_the_cache_folder_and_file_are_made_rwxr_xr_x_and_rw_r_r_under_an_open_umask(repo: Path) -> None:
    umask = os.umask(0)
    try:
        against(repo)
    finally:
        os.umask(umask)
    assert stat.S_IMODE(os.stat(repo / ".sotakg/baselines").st_mode) == 0o755
    (cache,) = (repo / ".sotakg/baselines").iterdir()
    assert stat.S_IMODE(os.stat(cache).st_mode) == 0o644


def test_the_cache_file_holds_non_ascii_text_as_utf8(repo: Path) -> None:
    (repo / "data/practices/SOTA-997.yaml").write_text(
        "id: SOTA-997\nversion: 1\ntitle: T\nsummary: S\nstatus: Entwürf\ntopic: distributed-optimization\n",
        encoding="utf-8",
    )
    commit(repo, "a practice with an unknown status")
    against(repo)
    (cache,) = (repo / ".sotakg/baselines").iterdir()
    assert '"value": "Entwürf"'.encode() in cache.read_bytes()


def test_a_failed_baseline_run_creates_no_cache_folder(repo: Path) -> None:
    with pytest.raises(UsageProblem) as refused:
        baseline_findings(repo / "data", repo / ".sotakg/store", "main", "no-such-engine", shapes_paths())
    assert str(refused.value) == "unknown validation engine 'no-such-engine'; use one of: sparql, pyshacl"
    assert not (repo / ".sotakg").exists()


# ------------------------------------------------------------------------------------ the cache: trusted or not


def test_cache_of_a_store_outside_the_repository_is_trusted(repo: Path, tmp_path: Path) -> None:
    store = tmp_path / "elsewhere/.sotakg/store"
    forge_empty_cache(repo, store)
    assert against(repo, store=store).state_counts() == TRUSTED


def test_cache_is_not_trusted_when_git_cannot_list_the_store_folder(repo: Path) -> None:
    forge_empty_cache(repo)
    assert against(repo).state_counts() == TRUSTED
    (repo / ".git/index").write_bytes(b"not an index")  # git ls-files fails
    assert against(repo).state_counts() == RECOMPUTED


def test_cache_is_not_trusted_when_git_tracks_a_file_with_a_tab_in_its_name_in_the_cache_folder(repo: Path) -> None:
    forge_empty_cache(repo)
    (repo / ".sotakg/baselines/notes\tmore.txt").write_text("committed\n", encoding="utf-8")
    track(repo, ".sotakg/baselines/notes\tmore.txt")
    assert against(repo).state_counts() == RECOMPUTED


def test_cache_is_trusted_beside_a_tracked_file_whose_name_is_not_utf8(repo: Path) -> None:
    forge_empty_cache(repo)
    name = os.fsdecode(b".sotakg/notes-\xff.txt")
    (repo / name).write_text("committed\n", encoding="utf-8")
    track(repo, name)
    assert against(repo).state_counts() == TRUSTED


def test_cache_is_trusted_beside_a_submodule_in_the_store_folder(repo: Path) -> None:
    forge_empty_cache(repo)
    head = git(repo, "rev-parse", "HEAD").strip()
    git(repo, "update-index", "--add", "--cacheinfo", f"160000,{head},.sotakg/vendor")
    git(repo, "commit", "-q", "-m", "a submodule beside the cache folder")
    assert against(repo).state_counts() == TRUSTED


# ------------------------------------------------------------------------------------ the cache: refused files


def test_a_cache_file_that_is_a_link_is_not_followed_and_is_replaced(repo: Path, tmp_path: Path) -> None:
    cache = forge_empty_cache(repo)
    forged = tmp_path / "forged.json"
    shutil.move(cache, forged)
    os.symlink(forged, cache)
    assert against(repo).state_counts() == RECOMPUTED
    assert not cache.is_symlink() and json.loads(forged.read_text(encoding="utf-8"))["findings"] == []


def test_a_cache_file_that_is_a_fifo_is_passed_over_without_waiting_for_a_writer(repo: Path) -> None:
    cache = cache_file(repo)
    cache.unlink()
    os.mkfifo(cache)
    done: dict[str, ValidationReport] = {}
    worker = threading.Thread(target=lambda: done.update(report=against(repo)), daemon=True)
    worker.start()
    worker.join(timeout=60)
    waited = worker.is_alive()
    while worker.is_alive():  # blocked opening the FIFO: give it a writer, then fail
        with contextlib.suppress(OSError):
            os.close(os.open(cache, os.O_WRONLY | os.O_NONBLOCK))
        worker.join(timeout=0.1)
    assert not waited
    assert done["report"].state_counts() == RECOMPUTED
    assert stat.S_ISREG(os.lstat(cache).st_mode)


def write_padded_cache(cache: Path, size: int) -> None:
    """The forged cache document (BASE had no findings), after enough spaces to make ``size`` bytes."""
    document = json.dumps({"tree": json.loads(cache.read_text(encoding="utf-8"))["tree"], "findings": []}).encode()
    cache.write_bytes(b" " * (size - len(document)) + document)
    assert cache.stat().st_size == size


def test_a_cache_file_of_exactly_the_size_limit_is_read(repo: Path) -> None:
    cache = cache_file(repo)
    write_padded_cache(cache, CACHE_MAX_BYTES)
    assert against(repo).state_counts() == TRUSTED


def test_a_cache_file_one_byte_over_the_size_limit_is_not_read(repo: Path) -> None:
    cache = cache_file(repo)
    write_padded_cache(cache, CACHE_MAX_BYTES + 1)
    assert against(repo).state_counts() == RECOMPUTED


def test_a_cache_path_taken_by_a_folder_leaves_no_temporary_file(repo: Path) -> None:
    cache = cache_file(repo)
    cache.unlink()
    cache.mkdir()
    assert against(repo).state_counts() == RECOMPUTED
    assert [p.name for p in cache.parent.iterdir()] == [cache.name]
    assert list(cache.iterdir()) == []


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("chattr") is None, reason="append-only folders need root")
def test_a_cache_folder_where_files_cannot_be_renamed_or_removed_costs_only_time(repo: Path) -> None:
    # In an append-only folder the temporary file is made, but can be neither renamed nor removed.
    cache = cache_file(repo)
    cache.unlink()
    if subprocess.run(["chattr", "+a", str(cache.parent)], capture_output=True).returncode != 0:
        pytest.skip("this file system has no append-only folders")
    try:
        report = against(repo)
    finally:
        subprocess.run(["chattr", "-a", str(cache.parent)], check=True)
    assert report.state_counts() == RECOMPUTED
    assert not cache.exists()


def test_a_link_at_the_temporary_name_is_never_written_through(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The temporary name is random; were it guessed, a link planted there is still not followed.
    cache = cache_file(repo)
    cache.unlink()
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n", encoding="utf-8")
    monkeypatch.setattr(secrets, "token_hex", lambda *_: "guessed")
    os.symlink(victim, cache.parent / f".{cache.stem}.guessed.tmp")
    assert against(repo).state_counts() == RECOMPUTED
    assert victim.read_text(encoding="utf-8") == "precious\n"
    assert not cache.exists()


def test_cache_is_not_trusted_when_the_store_folder_lies_inside_a_submodule(repo: Path) -> None:
    # git names a gitlink only when it is asked for itself, not for a path inside it: a pull request
    # could commit a forged cache into the submodule's tree.
    store = repo / "vendor" / ".sotakg" / "store"
    head = git(repo, "rev-parse", "HEAD").strip()
    git(repo, "update-index", "--add", "--cacheinfo", f"160000,{head},vendor")
    git(repo, "commit", "-q", "-m", "a submodule holding the store's folder")
    forge_empty_cache(repo, store)
    assert against(repo, store=store).state_counts() == RECOMPUTED


def test_a_data_folder_whose_name_is_not_utf8_is_validated_against_its_base_and_cached(
    tmp_path: Path, monkeypatch
) -> None:
    isolate_git(monkeypatch)
    root = tmp_path / "repo"
    root.mkdir()
    odd = os.fsdecode(os.fsencode(root) + b"/d\xffata")
    shutil.copytree(SHIPPED_DATA, odd)
    git(root, "init", "-q", "-b", "main")
    commit(root, "the data, in a folder whose name is not UTF-8")
    monkeypatch.chdir(root)
    data, store = Path(odd), root / ".sotakg" / "store"
    assert validate_against(data, store, "main").state_counts() == RECOMPUTED
    caches = list((store.parent / "baselines").glob("*.json"))
    assert len(caches) == 1 and b"d\xffata" in caches[0].read_bytes()  # the name in its own bytes
    forged = json.loads(caches[0].read_bytes().decode("utf-8", "surrogateescape"))
    caches[0].write_bytes(json.dumps({"tree": forged["tree"], "findings": []}).encode())
    assert validate_against(data, store, "main").state_counts() == TRUSTED  # read back: the cache is used
