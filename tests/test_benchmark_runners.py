"""The opt-in benchmark runners' own logic (they are never run by CI, their arithmetic is)."""

from __future__ import annotations

import json
import os
import sys
from fnmatch import fnmatch

import pytest

from benchmarks import mutation
from benchmarks.serve import median_round


def test_the_median_round_is_the_middle_by_throughput():
    rounds = [{"rps": 30.0, "errors": 1}, {"rps": 10.0, "errors": 2}, {"rps": 20.0, "errors": 3}]
    assert median_round(rounds) == {"rps": 20.0, "errors": 3}
    assert median_round(rounds[:2]) == {"rps": 10.0, "errors": 2}  # the lower middle of an even number


@pytest.fixture
def mutmut_calls(monkeypatch, tmp_path):
    """The payloads ``run`` would give mutmut, with a fake project at tmp_path holding one result."""
    module = "src/sotakg/records/sources.py"
    meta = tmp_path / "mutants" / f"{module}.meta"
    meta.parent.mkdir(parents=True)
    meta.write_text(json.dumps({"exit_code_by_key": {"m.a": 1, "m.b": 0, "m.c": 0, "m.d": 36}}))
    (tmp_path / "mutants" / module).write_text("# a mutated copy")
    monkeypatch.setattr(mutation, "REPO", tmp_path)
    calls: list[list] = []

    def fake_mutmut(argv, **_):  # runs what it is given, and forgets the rest, as mutmut does
        asked = json.loads(argv[-1])
        calls.append(asked)
        made = ("m.a", "m.b", "m.c", "m.d")
        run = {name: (1 if name == "m.b" else 0) for name in made if any(fnmatch(name, p) for p in asked[2])}
        meta.write_text(json.dumps({"exit_code_by_key": {"m.a": None, "m.b": None, "m.c": None, "m.d": None, **run}}))

    monkeypatch.setattr(mutation.subprocess, "run", fake_mutmut)
    return module, calls


def test_a_full_run_mutates_the_module_afresh(mutmut_calls):
    module, calls = mutmut_calls
    mutation.run(module, 2)
    deselected = [arg for test in mutation.CHILD_PROCESS_TESTS for arg in ("--deselect", test)]
    assert calls == [[module, mutation.TESTS[module] + deselected, ["sotakg.records.sources.*"], 2]]
    assert not (mutation.REPO / "mutants" / module).exists()


def test_a_survivors_run_after_a_sample_leaves_the_unchecked_mutants_alone(mutmut_calls):
    module, calls = mutmut_calls
    meta = mutation.REPO / "mutants" / f"{module}.meta"
    meta.write_text(json.dumps({"exit_code_by_key": {"m.a": 1, "m.b": 0, "m.c": None, "m.d": None}}))
    mutation.run(module, 1, survivors_only=True)
    assert [call[2] for call in calls] == [["m.b"]]  # m.c and m.d were never checked: not survivors


def test_a_full_run_forgets_the_verdicts_of_the_run_before(mutmut_calls, monkeypatch):
    module, _calls = mutmut_calls
    meta = mutation.REPO / "mutants" / f"{module}.meta"

    def keeping_mutmut(argv, **_):  # as mutmut does, a .meta left in place keeps its verdicts
        asked = json.loads(argv[-1])
        codes = json.loads(meta.read_text())["exit_code_by_key"] if meta.exists() else dict.fromkeys("abcd")
        codes = {name if name.startswith("m.") else f"m.{name}": code for name, code in codes.items()}
        codes.update({name: 1 for name in codes if any(fnmatch(name, pattern) for pattern in asked[2])})
        meta.write_text(json.dumps({"exit_code_by_key": codes}))

    monkeypatch.setattr(mutation.subprocess, "run", keeping_mutmut)
    mutation.run(module, 1, sample=1, seed=0)
    # only the drawn mutant has a verdict: the earlier run's verdicts on the others are gone
    assert sum(code is not None for code in mutation.exit_codes(module).values()) == 1


def test_a_survivors_run_names_only_the_mutants_left_alive_and_keeps_the_copy(mutmut_calls):
    module, calls = mutmut_calls
    mutation.run(module, 1, survivors_only=True)
    assert [call[2] for call in calls] == [["m.b", "m.c"]]
    assert (mutation.REPO / "mutants" / module).exists()
    assert mutation.verdicts(module) == {"m.a": "killed", "m.b": "killed", "m.c": "survived", "m.d": "timeout"}


def test_a_sampled_run_makes_the_mutants_first_then_runs_only_the_drawn_ones(mutmut_calls):
    module, calls = mutmut_calls
    mutation.run(module, 1, sample=2, seed=3)
    first, second = calls
    assert first[2] == ["sotakg.records.sources.*__sampled_later__"]  # matches no mutant: makes them, runs none
    assert len(second[2]) == 2 and len(set(second[2])) == 2
    assert set(second[2]) <= {"m.a", "m.b", "m.c", "m.d"}
    calls.clear()
    mutation.run(module, 1, sample=2, seed=3)
    assert calls[1][2] == second[2]  # the same seed draws the same mutants
    calls.clear()
    mutation.run(module, 1, sample=10, seed=3)
    assert sorted(calls[1][2]) == ["m.a", "m.b", "m.c", "m.d"]  # a sample larger than the module: all of it


def test_timed_processes_run_this_checkout_from_bytecode(monkeypatch, tmp_path):
    from benchmarks import environment

    package = tmp_path / "src" / "sotakg"
    package.mkdir(parents=True)
    (package / "mod.py").write_text("VALUE = 1\n")
    monkeypatch.setattr(environment, "SOURCE", tmp_path / "src")
    monkeypatch.setenv("PYTHONPATH", "elsewhere")
    environment.compiled.cache_clear()
    env = environment.child_env()
    environment.compiled.cache_clear()
    assert env["PYTHONPATH"] == os.pathsep.join([str(tmp_path / "src"), "elsewhere"])
    assert [path.name for path in (package / "__pycache__").iterdir()] == [f"mod.{sys.implementation.cache_tag}.pyc"]


def test_the_survivors_changes_are_kept_past_the_next_modules_run(monkeypatch, tmp_path):
    monkeypatch.setattr(mutation, "REPO", tmp_path)
    (tmp_path / "mutants" / "src" / "m").mkdir(parents=True)
    monkeypatch.setattr(mutation, "diff", lambda name: f"-old {name}\n+new {name}\n")
    found = {"m.a": "killed", "m.b": "survived", "m.c": "no tests"}
    text = mutation.survivor_diffs("src/m/x.py", found)
    assert text == (
        "#### `m.b` (survived)\n\n```diff\n-old m.b\n+new m.b\n```\n\n"
        "#### `m.c` (no tests)\n\n```diff\n-old m.c\n+new m.c\n```\n\n"
    )
    assert mutation.saved_diffs("src/m/x.py") == text
    assert mutation.saved_diffs("src/m/other.py") == ""
