"""Measure the incremental build and validation against a full run, in one run, on synthetic data.

Every row is a fresh child process (``python -m sotakg ...``), as a curator or CI runs it. Per scale:

* full run: ``sotakg build`` into a new store, then ``sotakg validate`` with no stored findings;
* no-change floor: ``sotakg build`` and ``sotakg validate`` when nothing changed (the freshness check,
  and for validate the stored findings);
* one-record edit: a practice file changes (its status flips, alternating between two contents), then
  ``sotakg build`` (applies that file only), then ``sotakg validate`` (re-checks what it affects); and
  the edit followed by ``sotakg validate`` alone (which builds first);
* ``sotakg --version``: the interpreter and imports every command pays (the floor under the floor);
* the findings of the incremental store are compared with those of a fresh full run, in process.

It writes its own section of ``benchmarks/RESULTS.md`` (markers ``<!-- incremental scale N ... -->``)
and leaves the rest of the file alone.

    python -m benchmarks.incremental --scale 10 --runs 5
    python -m benchmarks.incremental --scale 100 --runs 5 --full-runs 1
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "benchmarks" / "RESULTS.md"
sys.path.insert(0, str(REPO / "src"))

from benchmarks.environment import child_env  # noqa: E402
from benchmarks.generate import generate  # noqa: E402

#: Per command: a child that runs longer than this is stopped and the row says so.
CHILD_TIMEOUT = 1800
#: The targets of issue 17 this script measures.
EDIT_SECONDS = 1.0
EDIT_SHARE = 0.05
FLOOR_SECONDS = 0.2


@dataclass
class Row:
    name: str
    times: list[float] = field(default_factory=list)
    peak_kb: int = 0
    exits: set[int] = field(default_factory=set)

    @property
    def median(self) -> float:
        return statistics.median(self.times) if self.times else float("nan")


def run_sotakg(row: Row, data: Path, store: Path, *args: str) -> None:
    """Run ``sotakg --data DATA --store STORE ARGS`` in a new process; add its time and peak memory."""
    command = [sys.executable, "-m", "sotakg", "--data", str(data), "--store", str(store), *args]
    started = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=child_env())
    deadline = time.monotonic() + CHILD_TIMEOUT
    while True:
        pid, status, usage = os.wait4(process.pid, os.WNOHANG)
        if pid:
            break
        if time.monotonic() > deadline:
            process.kill()
            pid, status, usage = os.wait4(process.pid, 0)
            raise SystemExit(f"{' '.join(args)} ran past {CHILD_TIMEOUT} s")
        time.sleep(0.005)
    elapsed = time.perf_counter() - started
    code = os.waitstatus_to_exitcode(status)
    stderr = process.stderr.read().decode() if process.stderr else ""
    process.returncode = code
    if code not in (0, 1) or "Traceback" in stderr:
        raise SystemExit(f"sotakg {' '.join(args)} failed ({code}):\n{stderr}")
    row.times.append(elapsed)
    row.exits.add(code)
    row.peak_kb = max(row.peak_kb, usage.ru_maxrss)


def edit_practice(path: Path, original: str, flip: bool) -> None:
    """Write one of two contents of a practice (the status flipped or not), so every edit changes it."""
    if flip:
        text = original.replace("status: Active", "status: Proposed", 1)
        if text == original:
            text = original.replace("status: Proposed", "status: Active", 1)
    else:
        text = original
    path.write_text(text, encoding="utf-8")


def measure(scale: float, runs: int, full_runs: int, work: Path) -> tuple[list[Row], dict[str, object]]:
    data = work / "data"
    counts = generate(data, scale)
    store = work / "store"
    rows = {name: Row(name) for name in (
        "start-up: sotakg --version",
        "full: build (new store)",
        "full: validate (no stored findings)",
        "no change: build",
        "no change: validate",
        "one-record edit: build",
        "one-record edit: validate after that build",
        "one-record edit: validate (builds first)",
    )}  # fmt: skip
    for _ in range(max(1, full_runs)):
        shutil.rmtree(work / "store-parent", ignore_errors=True)
        store = work / "store-parent" / "store"
        run_sotakg(rows["full: build (new store)"], data, store, "build")
        run_sotakg(rows["full: validate (no stored findings)"], data, store, "validate")
    for _ in range(runs):
        run_sotakg(rows["start-up: sotakg --version"], data, store, "--version")
        run_sotakg(rows["no change: build"], data, store, "build")
        run_sotakg(rows["no change: validate"], data, store, "validate")
    practices = sorted((data / "practices").iterdir())
    target = practices[len(practices) // 2]
    original = target.read_text(encoding="utf-8")
    flip = True
    for _ in range(runs):
        edit_practice(target, original, flip)
        flip = not flip
        run_sotakg(rows["one-record edit: build"], data, store, "build")
        run_sotakg(rows["one-record edit: validate after that build"], data, store, "validate")
        edit_practice(target, original, flip)
        flip = not flip
        run_sotakg(rows["one-record edit: validate (builds first)"], data, store, "validate")

    from sotakg.graph.store import StoreLayout, snapshot
    from sotakg.rules.validate import validate

    started = time.perf_counter()
    snapshot(data, StoreLayout(store).current_generation())
    scan_seconds = time.perf_counter() - started
    incremental = validate(data, store)
    fresh = validate(data, work / "fresh" / "store")
    info: dict[str, object] = {
        "files": sum(counts.values()),
        "counts": counts,
        "same_findings": incremental.findings == fresh.findings,
        "findings": len(fresh.findings),
        "scan_seconds": scan_seconds,
        "edited": target.name,
    }
    return list(rows.values()), info


def section(scale: float, runs: int, full_runs: int, rows: list[Row], info: dict[str, object], seconds: float) -> str:
    import pyoxigraph

    by_name = {row.name: row for row in rows}
    full_build = by_name["full: build (new store)"].median
    full_validate = by_name["full: validate (no stored findings)"].median
    lines = [
        f"### Incremental, scale {scale:g}",
        "",
        f"{info['files']} files; measured {time.strftime('%Y-%m-%d')} by `python -m benchmarks.incremental "
        f"--scale {scale:g} --runs {runs} --full-runs {full_runs}` on {os.cpu_count()} CPUs (shared; load average "
        f"{os.getloadavg()[0]:.1f} at the end), Python {platform.python_version()}, pyoxigraph "
        f"{pyoxigraph.__version__}; the run took {seconds:.0f} s. Cold processes, medians.",
        "",
        "| measure | median s | runs | peak MB | vs full run |",
        "|---|---:|---:|---:|---:|",
    ]
    for row in rows:
        base = full_build if "build" in row.name.split(": ", 1)[1].split(" ")[0] else full_validate
        share = "" if row.name.startswith(("full", "start-up")) else f"{row.median / base:.1%}"
        lines.append(f"| {row.name} | {row.median:.3f} | {len(row.times)} | {row.peak_kb / 1024:.0f} | {share} |")
    edit_build = by_name["one-record edit: build"].median
    edit_validate = by_name["one-record edit: validate after that build"].median
    floor = max(by_name["no change: build"].median, by_name["no change: validate"].median)

    def verdict(ok: bool) -> str:
        return "met" if ok else "not met"

    lines += [
        "",
        f"Findings of the incremental store after the edits equal a fresh full run's: "
        f"{'yes' if info['same_findings'] else 'NO'} ({info['findings']} findings). The freshness scan alone "
        f"(one stat a file, in process) took {info['scan_seconds']:.3f} s.",
        "",
        "Targets:",
        "",
        f"- one-record edit, `build` ≤ {EDIT_SECONDS:g} s and ≤ {EDIT_SHARE:.0%} of a full build: "
        f"{edit_build:.3f} s, {edit_build / full_build:.1%}: "
        f"{verdict(edit_build <= EDIT_SECONDS and edit_build <= EDIT_SHARE * full_build)}.",
        f"- one-record edit, `validate` ≤ {EDIT_SECONDS:g} s and ≤ {EDIT_SHARE:.0%} of a full validation: "
        f"{edit_validate:.3f} s, {edit_validate / full_validate:.1%}: "
        f"{verdict(edit_validate <= EDIT_SECONDS and edit_validate <= EDIT_SHARE * full_validate)}.",
        f"- no-change command floor ≤ {FLOOR_SECONDS:g} s: {floor:.3f} s (the slower of build and validate): "
        f"{verdict(floor <= FLOOR_SECONDS)}.",
        "",
    ]
    return "\n".join(lines)


def update_results(scale: float, body: str) -> None:
    heading = "## Incremental build and validation"
    start, end = f"<!-- incremental scale {scale:g} start -->", f"<!-- incremental scale {scale:g} end -->"
    text = RESULTS.read_text() if RESULTS.exists() else "# Benchmark results\n\n"
    if heading not in text:
        text = (
            text.rstrip("\n") + f"\n\n{heading}\n\n`python -m benchmarks.incremental --scale N` "
            "(this script; `benchmarks/run.py` does not touch this section) replaces its scale's block.\n"
        )
    block = f"{start}\n{body}{end}"
    if start in text and end in text:
        text = text[: text.index(start)] + block + text[text.index(end) + len(end) :]
    else:
        text = text.rstrip("\n") + "\n\n" + block + "\n"
    RESULTS.write_text(text)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Measure incremental build and validation against a full run.")
    parser.add_argument("--scale", type=float, default=10.0)
    parser.add_argument("--runs", type=int, default=5, help="runs of each no-change and edit row")
    parser.add_argument("--full-runs", type=int, default=3, help="runs of the full build and validation")
    parser.add_argument("--no-write", action="store_true", help="print the section instead of writing RESULTS.md")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="sotakg-incremental-") as folder:
        rows, info = measure(args.scale, args.runs, args.full_runs, Path(folder))
    body = section(args.scale, args.runs, args.full_runs, rows, info, time.perf_counter() - started)
    print(body)
    if not args.no_write:
        update_results(args.scale, body)


if __name__ == "__main__":
    main()
