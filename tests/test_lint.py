"""ruff and mypy pass on the library (the house style's tooling, run with the tests)."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

from .conftest import REPO


@pytest.mark.skipif(shutil.which("ruff") is None, reason="ruff is not installed (pip install -e '.[test]')")
def test_ruff():
    result = subprocess.run(["ruff", "check", "src", "tests"], cwd=REPO, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_mypy():
    pytest.importorskip("mypy")
    result = subprocess.run([sys.executable, "-m", "mypy", "src/sotakg"], cwd=REPO, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.skipif(shutil.which("vulture") is None, reason="vulture is not installed (pip install -e '.[test]')")
def test_no_dead_code():
    # Paths and the allow-list come from [tool.vulture] in pyproject.toml.
    result = subprocess.run(["vulture"], cwd=REPO, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
