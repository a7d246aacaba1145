"""Mutation testing (issue 20): mutmut mutates one module at a time and runs the tests of its area.

    pip install -e '.[test]'   # brings mutmut==3.8.1
    nice -n 19 python -m benchmarks.mutation [--module src/sotakg/records/sources.py ...] [--max-children 1]

From the checkout's root. Opt-in and slow, never run by CI: each module's run collects which of its
tests reach which function (one pass of those tests), runs them once clean, then each mutant against
the tests that reach the mutated function. On the 2 shared cores of RESULTS.md, ``records/sources.py``
(359 mutants) and ``records/fastyaml.py`` (123) took 12 to 15 minutes each with ``--max-children 2``;
``mutants/`` (git-ignored) holds mutmut's copy of the project and its results.

The configuration is ``[tool.mutmut]`` in pyproject.toml (the scope, the files the tests read, the
pytest options); this runner narrows it to the module asked for and to ``TESTS[module]``, reruns every
mutant of that module (no result is taken from an earlier run; ``--survivors`` reruns only the ones the
last run left alive, against the tests as they are now, and keeps the other verdicts: the quick check
of new tests written to kill them; ``--leave-out TEST_FILE`` runs without one slow test file of the
area, a stricter and quicker run; ``--sample N`` runs N of the module's mutants drawn at random, for a
module too large to run in full on these cores: its kill rate is then an estimate), reads the verdicts from mutmut's
``mutants/<module>.meta`` and prints a Markdown table — mutants, killed, survived, timeout,
suspicious, no tests, kill rate — and the surviving mutants; their changes are kept in
``mutants/<module>.survivors.md`` (``--diff`` prints them), since the next module's run replaces
the copy ``mutmut show NAME`` reads. Which survivors are equivalent, and why, is recorded in RESULTS.md.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

#: Each module of the issue's scope and the tests of its area (``tests/test_mutation_kills.py`` holds
#: the tests written to kill survivors).
TESTS = {
    "src/sotakg/records/sources.py": [
        "tests/test_hostile_tree.py",
        "tests/test_security.py",
        "tests/test_records.py",
    ],
    "src/sotakg/records/fastyaml.py": ["tests/test_fastyaml.py", "tests/test_records.py"],
    "src/sotakg/graph/rdf.py": [
        "tests/test_roundtrip.py",
        "tests/test_records.py",
        "tests/test_security.py",
        "tests/test_rdf_kills.py",
    ],
    "src/sotakg/rules/report.py": ["tests/test_validate.py"],
    "src/sotakg/records/schema.py": [
        "tests/test_records.py",
        "tests/test_fastyaml.py",
        "tests/test_data.py",
        "tests/test_security.py",
        "tests/test_schema_kills.py",
    ],
    "src/sotakg/graph/store.py": [
        "tests/test_build.py",
        "tests/test_hostile_tree.py",
        "tests/test_security.py",
        "tests/test_incremental.py",
        "tests/test_layout.py",
        "tests/test_store_kills.py",
    ],
    "src/sotakg/server/guard.py": ["tests/test_guard.py", "tests/test_guard_kills.py"],
    "src/sotakg/graph/delta.py": ["tests/test_diff.py"],
    "src/sotakg/graph/open.py": ["tests/test_build.py", "tests/test_incremental.py", "tests/test_open_kills.py"],
    "src/sotakg/graph/vocab.py": ["tests/test_ontology.py", "tests/test_records.py", "tests/test_rdf_kills.py"],
    "src/sotakg/rules/baseline.py": ["tests/test_validate.py", "tests/test_baseline_kills.py"],
    "src/sotakg/records/importer.py": [
        "tests/test_import_export.py",
        "tests/test_schema_kills.py",
        "tests/test_importer_kills.py",
    ],
    "src/sotakg/records/revisions.py": ["tests/test_diff.py", "tests/test_revisions_kills.py"],
    "src/sotakg/records/indexpage.py": [
        "tests/test_import_export.py",
        "tests/test_roundtrip.py",
        "tests/test_fuzz.py",
        "tests/test_indexpage_kills.py",
        "tests/test_import_other_pages.py",
    ],
    "src/sotakg/graph/build.py": [
        "tests/test_build.py",
        "tests/test_incremental.py",
        "tests/test_layout.py",
        "tests/test_progress.py",
        "tests/test_build_kills.py",
    ],
    "src/sotakg/rules/validate.py": [
        "tests/test_validate.py",
        "tests/test_engines.py",
        "tests/test_incremental.py",
        "tests/test_validate_kills.py",
        "tests/test_progress.py",
        "tests/test_pyshacl_engine.py",
    ],
    "src/sotakg/rules/shacl_compiler.py": [
        "tests/test_shacl_compiler.py",
        "tests/test_w3c_shacl.py",
        "tests/test_validate.py",
        "tests/test_logical_differential.py",
    ],
    "src/sotakg/rules/incremental.py": [
        "tests/test_incremental.py",
        "tests/test_build.py",
        "tests/test_incremental_kills.py",
    ],
}
KILLS = "tests/test_mutation_kills.py"
#: Tests that run sotakg in a child process are left out (and ``tests/test_crash_safety.py``, made of
#: them): mutmut maps tests to functions inside the test process only, and in that mapping pass a
#: child process, whose working directory holds no pyproject.toml, fails on mutmut's configuration.
CHILD_PROCESS_TESTS = [
    "tests/test_security.py::test_a_parameter_that_is_not_utf8_is_a_usage_error",
    "tests/test_security.py::test_output_to_a_fifo_is_an_error_not_a_hang",
    "tests/test_engines.py::test_default_validate_imports_neither_rdflib_nor_pyshacl",
]

#: mutmut with its configuration narrowed to one module and its tests (argv[1]: JSON of
#: [module, tests, mutant names or globs, max children]); a changed test selection makes mutmut
#: collect its test-to-function map afresh.
_RUN = """
import json, sys
from mutmut import configuration
module, tests, names, children = json.loads(sys.argv[1])
settings = configuration.config()
settings.only_mutate = [module]
settings.pytest_add_cli_args_test_selection = tests
from mutmut.__main__ import cli
cli(["run", "--max-children", str(children), *names])
"""

COLUMNS = ("killed", "survived", "timeout", "suspicious", "no tests", "not checked")


def mutant_glob(module: str) -> str:
    """The names mutmut gives a module's mutants: ``sotakg.records.sources.x_scan_sources__mutmut_3``."""
    return module.removeprefix("src/").removesuffix(".py").replace("/", ".") + ".*"


def run(
    module: str,
    max_children: int,
    survivors_only: bool = False,
    leave_out: Sequence[str] = (),
    sample: int | None = None,
    seed: int = 0,
) -> None:
    """``mutmut run`` on every mutant of ``module`` with the tests of its area (but ``leave_out``);
    with ``survivors_only``, on those the last run left alive (with the tests as they are now),
    keeping the other verdicts; with ``sample``, on that many of its mutants drawn at random
    (``seed``), the others left "not checked"."""
    tests = TESTS.get(module, []) + ([KILLS] if (REPO / KILLS).exists() else [])
    tests = [test for test in tests if test not in leave_out]
    tests += [arg for test in CHILD_PROCESS_TESTS for arg in ("--deselect", test)]
    kept: dict[str, object] = {}
    if survivors_only:
        codes = exit_codes(module)
        left = ("killed", "timeout", "not checked")  # a sample's unchecked mutants are not survivors
        names = [name for name, status in verdicts(module).items() if status not in left]
        if not names:
            return
        kept = {name: code for name, code in codes.items() if name not in names}
    else:
        names = [mutant_glob(module)]
        # mutmut takes a copy newer than its source for mutated already: a copy left unmutated by the
        # run of another module would be taken for this module's mutants. Removed, it is mutated afresh.
        (REPO / "mutants" / module).unlink(missing_ok=True)
        # mutmut keeps each mutant's exit code in the .meta beside it: an earlier run's would stand
        # for mutants this run does not check (a sample), so the table would mix runs.
        (REPO / "mutants" / f"{module}.meta").unlink(missing_ok=True)
        if sample is not None:
            # A name no mutant has: mutmut makes the mutants and maps the tests, and runs none; then
            # the sample is drawn from the names it made.
            payload = json.dumps([module, tests, [mutant_glob(module) + "__sampled_later__"], max_children])
            subprocess.run([sys.executable, "-c", _RUN, payload], cwd=REPO, check=False)
            made = sorted(exit_codes(module))
            names = random.Random(seed).sample(made, min(sample, len(made)))
    payload = json.dumps([module, tests, names, max_children])
    subprocess.run([sys.executable, "-c", _RUN, payload], cwd=REPO, check=False)
    if kept:
        # mutmut forgets the verdicts on the mutants it was not asked to run: the earlier ones stand.
        path = REPO / "mutants" / f"{module}.meta"
        meta = json.loads(path.read_text(encoding="utf-8"))
        for name, code in kept.items():
            if meta["exit_code_by_key"].get(name) is None:
                meta["exit_code_by_key"][name] = code
        path.write_text(json.dumps(meta, indent=4), encoding="utf-8")


def exit_codes(module: str) -> dict[str, object]:
    """mutmut's exit code for each mutant of ``module`` (``mutants/<module>.meta``; None: not run)."""
    path = REPO / "mutants" / f"{module}.meta"
    if not path.exists():
        return {}
    return dict(json.loads(path.read_text(encoding="utf-8"))["exit_code_by_key"])


def verdicts(module: str) -> dict[str, str]:
    """Each mutant of ``module`` and mutmut's verdict on it, from ``mutants/<module>.meta``."""
    from mutmut.stats import status_by_exit_code

    return {name: status_by_exit_code[code] for name, code in sorted(exit_codes(module).items())}  # type: ignore[index]


def table(module: str, found: dict[str, str]) -> str:
    """The Markdown table of one module's verdicts and the list of its survivors."""
    counts = {column: sum(1 for status in found.values() if status == column) for column in COLUMNS}
    tested = len(found) - counts["not checked"]
    rate = f"{100 * (counts['killed'] + counts['timeout']) / tested:.1f}%" if tested else "n/a"
    lines = [
        f"### `{module}`",
        "",
        "| mutants | " + " | ".join(COLUMNS) + " | kill rate |",
        "|---:|" + "---:|" * len(COLUMNS) + "---:|",
        f"| {len(found)} | " + " | ".join(str(counts[column]) for column in COLUMNS) + f" | {rate} |",
        "",
    ]
    others = sorted(name for name, status in found.items() if status not in ("killed", "timeout", "not checked"))
    lines += [f"- `{name}`: {found[name]}" for name in others] or ["No survivors."]
    return "\n".join(lines) + "\n"


def diff(name: str) -> str:
    """A mutant's change, as ``mutmut show`` prints it."""
    return subprocess.run(["mutmut", "show", name], cwd=REPO, capture_output=True, text=True).stdout


def main() -> None:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.mutation", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--module", action="append", help="a module to mutate (repeatable); default: all of TESTS")
    parser.add_argument("--max-children", type=int, default=1, help="mutants tested at once (default 1)")
    parser.add_argument("--no-run", action="store_true", help="only report the results of the last run")
    parser.add_argument(
        "--survivors",
        action="store_true",
        help="run again only the mutants the last run left alive (after new tests), keeping the other verdicts",
    )
    parser.add_argument(
        "--sample",
        type=int,
        metavar="N",
        help="run only N of the module's mutants, drawn at random (a module too large to run in full)",
    )
    parser.add_argument("--seed", type=int, default=0, help="the seed of --sample's draw (default 0)")
    parser.add_argument("--diff", action="store_true", help="show each survivor's change")
    parser.add_argument(
        "--leave-out",
        action="append",
        default=[],
        metavar="TEST_FILE",
        help="run without this test file of the module's area (repeatable): a quicker, stricter run",
    )
    args = parser.parse_args()
    for module in args.module or list(TESTS):
        if not args.no_run:
            run(
                module,
                args.max_children,
                survivors_only=args.survivors,
                leave_out=args.leave_out,
                sample=args.sample,
                seed=args.seed,
            )
        found = verdicts(module)
        if not found:
            print(f"### `{module}`\n\nNot run (no results in mutants/).\n")
            continue
        print(table(module, found))
        survivors = survivor_diffs(module, found) if not args.no_run else saved_diffs(module)
        if args.diff:
            print(survivors)


def survivors_path(module: str) -> Path:
    """Where the changes of a module's surviving mutants are kept (``mutants/<module>.survivors.md``):
    the next module's run replaces mutmut's copy of the project, after which ``mutmut show`` cannot
    show them any more."""
    return REPO / "mutants" / f"{module}.survivors.md"


def survivor_diffs(module: str, found: dict[str, str]) -> str:
    """The change of each of ``module``'s surviving mutants, as Markdown, written to ``survivors_path``."""
    text = "".join(
        f"#### `{name}` ({status})\n\n```diff\n{diff(name)}```\n\n"
        for name, status in found.items()
        if status not in ("killed", "timeout", "not checked")  # a sample leaves most unchecked
    )
    survivors_path(module).write_text(text, encoding="utf-8")
    return text


def saved_diffs(module: str) -> str:
    """The survivors' changes kept by the module's last run (``survivor_diffs``), if any."""
    path = survivors_path(module)
    return path.read_text(encoding="utf-8") if path.exists() else ""


if __name__ == "__main__":
    main()
