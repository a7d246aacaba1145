"""Start-up: a command imports only what it uses (#17). Each command runs in a fresh interpreter, so
the modules it leaves in sys.modules are exactly the ones it pulled in."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import SHIPPED_DATA, subprocess_env

#: Runs the CLI in this process, then prints the top-level names of the modules it imported.
PROBE = """
import json, sys
from sotakg.cli import cli
code = None
try:
    cli.main(args=sys.argv[1:], prog_name="sotakg")
except SystemExit as done:
    code = done.code
print(json.dumps({"code": code, "modules": sorted(sys.modules)}), file=sys.stderr)
"""

HEAVY = {"yaml", "rdflib", "pyshacl", "prompt_toolkit"}
COMPILER = "sotakg.rules.shacl_compiler"


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the shipped data with its store built, so no command below rebuilds."""
    root = tmp_path_factory.mktemp("startup")
    shutil.copytree(SHIPPED_DATA, root / "data")
    built = run(root, "build")
    assert built["code"] == 0
    return root


def run(cwd: Path, *args: str) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *args],
        cwd=cwd,
        env=subprocess_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    return json.loads(done.stderr.strip().splitlines()[-1])


def heavy_modules(modules: list[str]) -> set[str]:
    return {name for name in modules if name.split(".")[0] in HEAVY}


def test_version_imports_nothing_heavy(folder):
    probe = run(folder, "--version")
    assert probe["code"] == 0
    assert heavy_modules(probe["modules"]) == set()
    assert COMPILER not in probe["modules"]
    assert "pyoxigraph" not in probe["modules"]
    # the options' choices are read when an option is used, not when the command line is defined
    assert {"sotakg.query.remote", "sotakg.query.sparql", "sotakg.rules.validate", "http.client"}.isdisjoint(
        probe["modules"]
    )


def test_a_canned_query_imports_neither_yaml_nor_the_compiler(folder):
    probe = run(folder, "query", "papers-of", "-p", "practice=SOTA-049")
    assert probe["code"] == 0
    assert heavy_modules(probe["modules"]) == set()
    assert COMPILER not in probe["modules"]
    assert "sotakg.graph.rdf" not in probe["modules"]  # the store was fresh: no rebuild
    # nor the record reader: the query's header needs only the YAML 1.1 scalar rule
    assert "sotakg.records.schema" not in probe["modules"]
    # nor what only a stale store or a syntax error needs
    assert {"sotakg.graph.build", "sotakg.query.syntax_help"}.isdisjoint(probe["modules"])
    assert {"sotakg.query.remote", "sotakg.rules.validate", "http.client"}.isdisjoint(probe["modules"])


def test_validate_imports_neither_yaml_nor_rdflib(folder):
    probe = run(folder, "validate")
    assert probe["code"] == 0
    assert heavy_modules(probe["modules"]) == set()
    assert COMPILER in probe["modules"]  # the engine it runs


def test_the_default_engine_the_command_line_names_is_the_librarys():
    from sotakg.cli import DEFAULT_ENGINE
    from sotakg.rules.validate import DEFAULT_ENGINE as LIBRARY_DEFAULT

    assert DEFAULT_ENGINE == LIBRARY_DEFAULT
