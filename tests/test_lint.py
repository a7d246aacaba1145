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
