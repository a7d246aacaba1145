"""The package shows its pipeline: stage packages, no import cycles, the layers kept, data read once."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from sotakg.cli import cli

from .conftest import REPO

PACKAGE = REPO / "src" / "sotakg"
STAGES = ("records", "graph", "query", "rules", "views", "server")


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph() -> dict[str, set[str]]:
    """Every sotakg module and the sotakg modules it imports (at any depth of its code)."""
    modules = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")
                    base = base[: len(base) - (node.level - 1)]
                    stem = ".".join(base + ([node.module] if node.module else []))
                else:
                    stem = node.module or ""
                targets = [stem] + [f"{stem}.{alias.name}" for alias in node.names]
            for target in targets:
                if target in modules and target != name:
                    graph[name].add(target)
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle of ``graph`` (a list of modules, first == last), or None."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt) :] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        stack.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state and (found := visit(start)):
            return found
    return None


def test_the_cycle_finder_finds_a_cycle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_no_module_imports_another_in_a_loop():
    graph = import_graph()
    # Package imports (a module importing its package's __init__) are edges too; stages stay light.
    assert find_cycle(graph) is None, " -> ".join(find_cycle(graph) or [])


def test_every_stage_is_a_package_with_a_docstring_saying_what_it_takes_and_hands_on():
    for stage in STAGES:
        init = PACKAGE / stage / "__init__.py"
        doc = ast.get_docstring(ast.parse(init.read_text()))
        assert doc and "Takes in" in doc and "hands on" in doc, stage


def test_only_the_command_line_and_the_shared_modules_stay_at_the_top():
    top = sorted(p.stem for p in PACKAGE.glob("*.py"))
    assert top == ["__init__", "__main__", "cli", "console", "errors", "resources", "shacl_compiler"]


def test_the_store_does_not_import_the_build():
    assert "sotakg.graph.build" not in import_graph()["sotakg.graph.store"]


def test_the_readme_api_keeps_working_from_its_old_place():
    from sotakg.rules.shacl_compiler import compile_shapes
    from sotakg.shacl_compiler import compile_shapes as old

    assert old is compile_shapes


@pytest.mark.skipif(shutil.which("lint-imports") is None, reason="import-linter missing: pip install -e '.[test]'")
def test_the_import_linter_contracts_are_kept():
    result = subprocess.run(["lint-imports"], cwd=REPO, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr
    assert "0 broken" in result.stdout


def record_file_opens(action, data_dir: Path) -> dict[str, int]:
    """How often ``action()`` opens each file of ``data_dir`` (an audit hook sees every open)."""
    counts: dict[str, int] = {}
    root = str(data_dir.resolve())
    active = [True]

    def hook(event: str, args: tuple) -> None:
        if active[0] and event == "open" and isinstance(args[0], str | Path):
            path = str(Path(args[0]).resolve()) if not str(args[0]).startswith(root) else str(args[0])
            if path.startswith(root) and path.endswith(".yaml"):
                counts[path] = counts.get(path, 0) + 1

    sys.addaudithook(hook)
    try:
        action()
    finally:
        active[0] = False  # audit hooks cannot be removed: switch it off
    return counts


@pytest.mark.parametrize("store_state", ["none", "stale", "fresh"])
def test_validate_reads_each_record_file_once(runner, workdir, store_state):
    data = workdir / "data"
    if store_state != "none":
        assert runner.invoke(cli, ["build"]).exit_code == 0
    if store_state == "stale":
        target = data / "practices" / "SOTA-049.yaml"
        target.write_text(target.read_text().replace("title:", "title: Edited", 1))
    record_files = sorted(str(p.resolve()) for p in data.rglob("*.yaml"))
    results = []
    counts = record_file_opens(lambda: results.append(runner.invoke(cli, ["validate"])), data)
    assert results[0].exit_code == 0, results[0].output
    assert sorted(counts) == record_files
    assert set(counts.values()) == {1}, {k: v for k, v in counts.items() if v != 1}
