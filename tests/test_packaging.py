"""The wheel ships the ontology, shapes and canned queries as package data, and finds them installed."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile

import pytest

from .conftest import REPO


def test_wheel_contains_resources_and_works_installed(tmp_path):
    hatchling_build = pytest.importorskip("hatchling.build")
    cwd = os.getcwd()
    os.chdir(REPO)
    try:
        name = hatchling_build.build_wheel(str(tmp_path))
    finally:
        os.chdir(cwd)
    wheel = tmp_path / name
    names = set(zipfile.ZipFile(wheel).namelist())
    assert "sotakg/ontology/sotakg.ttl" in names
    assert any(n.startswith("sotakg/shapes/") for n in names)
    assert any(n.startswith("sotakg/queries/") for n in names)
    assert "sotakg/cli.py" in names

    # Unpacked alone (no checkout around it), the package still finds its ontology.
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    code = "from sotakg.resources import ontology_path; print(ontology_path())"
    env = {**os.environ, "PYTHONPATH": str(site)}
    out = subprocess.run([sys.executable, "-c", code], env=env, cwd=tmp_path, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == str(site / "sotakg" / "ontology" / "sotakg.ttl")
