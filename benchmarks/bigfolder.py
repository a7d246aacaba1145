"""``python -m benchmarks.bigfolder``: build a data folder of 200,000 record files and record the
build's peak memory (issue 13, "reading scales"), against a build of a tenth of the files in the same
run, and write the figures into their own section of RESULTS.md.

Before reading used a buffer of each file's own size, every file was read into a 10 MB buffer that
stayed a memory mapping of its own, and a build died with MemoryError at about 65,000 files (the
kernel's ``vm.max_map_count``). The target: 200k files build, and peak memory grows with the data
(the graph), not with the cap times the file count.

    python -m benchmarks.bigfolder            # 200k files and a 20k baseline; a few minutes
    python -m benchmarks.bigfolder --files 50000 --no-write
"""

from __future__ import annotations

import argparse
import math
import os
import shutil
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from benchmarks.generate import generate  # noqa: E402
from benchmarks.run import RESULTS, WORK, Runner, sotakg  # noqa: E402

#: Record files the generator writes at scale 1 (practices, papers, ADRs, topics and the registry).
FILES_AT_SCALE_1 = 449 + 750 + 60 + 28 + 1
START, END = "<!-- bigfolder start -->", "<!-- bigfolder end -->"


def data_folder(files: int, seed: int) -> tuple[Path, int]:
    """A generated data folder of at least ``files`` record files (made once, then reused)."""
    scale = math.ceil(files / FILES_AT_SCALE_1 * 1.03 * 100) / 100  # the generator's mix rounds down a little
    folder = WORK / f"bigfolder-{scale:g}-seed-{seed}"
    data = folder / "data"
    stamp = folder / "done"
    if not stamp.exists():
        shutil.rmtree(folder, ignore_errors=True)
        started = time.perf_counter()
        generate(data, scale, seed)
        stamp.write_text("")
        print(f"  generated scale {scale:g} in {time.perf_counter() - started:.0f} s", flush=True)
    count = sum(len(names) for _, _, names in os.walk(data))
    return data, count


def measure(runner: Runner, label: str, files: int, seed: int) -> tuple[int, float, float]:
    """(files, median seconds, peak RSS MB) of ``sotakg build --force`` on a folder of ``files``."""
    data, count = data_folder(files, seed)
    store = data.parent / "store" / "store"
    store.parent.mkdir(exist_ok=True)
    first = runner.measure(f"{label}: first build", sotakg(data, store, "build"), data.parent, runs=1)
    if first.error:
        raise SystemExit(f"{label}: the build failed: {first.error}")
    result = runner.measure(f"{label}: build --force", sotakg(data, store, "build", "--force"), data.parent)
    if result.error or result.median is None:
        raise SystemExit(f"{label}: the build failed: {result.error}")
    peak = max(first.peak_kb, result.peak_kb) / 1024
    return count, result.median, peak


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bigfolder", description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=200_000, help="record files in the big folder")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--budget", type=float, default=300.0)
    parser.add_argument("--timeout", type=float, default=3600.0)
    parser.add_argument("--no-write", action="store_true", help="print only; leave RESULTS.md alone")
    args = parser.parse_args()
    WORK.mkdir(parents=True, exist_ok=True)
    runner = Runner(args.runs, args.budget, args.timeout)
    load = os.getloadavg()[0]
    started = time.perf_counter()
    small = measure(runner, "baseline", args.files // 10, args.seed)
    big = measure(runner, "big", args.files, args.seed)
    seconds = time.perf_counter() - started
    peak_ratio = big[2] / small[2]
    file_ratio = big[0] / small[0]
    # Built at all (measure stops the run otherwise), at full size, and memory not growing faster than the files.
    verdict = "met" if big[0] >= 200_000 and peak_ratio <= file_ratio else "not met"
    body = (
        "## Build of a 200k-file data folder (issue 13)\n\n"
        f"`python -m benchmarks.bigfolder` (generated data, seed {args.seed}); measured "
        f"{time.strftime('%Y-%m-%d')} on {os.cpu_count()} shared CPUs, load average {load:.1f} before and "
        f"{os.getloadavg()[0]:.1f} after; the run took {seconds:.0f} s. Peak memory is the build's maximum "
        "resident set (GNU time); times are medians of forced rebuilds.\n\n"
        "| data folder | record files | build --force, median s | peak RSS MB |\n|---|---|---|---|\n"
        f"| baseline (a tenth) | {small[0]} | {small[1]:.1f} | {small[2]:.0f} |\n"
        f"| big | {big[0]} | {big[1]:.1f} | {big[2]:.0f} |\n\n"
        f"Target: a data folder of 200k files builds, its memory growing with the data and not with the "
        f"10 MB size cap per file — **{verdict}**: {big[0]} files built (before the fix a build died with "
        f"MemoryError at about 65,000), peak {big[2]:.0f} MB; {file_ratio:.1f}× the files took "
        f"{peak_ratio:.1f}× the baseline's peak memory and {big[1] / small[1]:.1f}× its time.\n"
    )
    print(body)
    if not args.no_write:
        text = RESULTS.read_text()
        block = f"{START}\n{body}{END}"
        if START in text and END in text:
            text = text[: text.index(START)] + block + text[text.index(END) + len(END) :]
        else:
            text = text.rstrip("\n") + "\n\n" + block + "\n"
        RESULTS.write_text(text)
        print(f"wrote {RESULTS.relative_to(REPO)}")


if __name__ == "__main__":
    main()
