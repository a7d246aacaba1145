"""The wheel ships the ontology, shapes and canned queries as package data, and finds them installed."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from .conftest import REPO, subprocess_env


def build_wheel(folder: Path) -> Path:
    """The wheel of this checkout, built into ``folder`` (skipped without hatchling)."""
    hatchling_build = pytest.importorskip("hatchling.build")
    cwd = os.getcwd()
    os.chdir(REPO)
    try:
        return folder / hatchling_build.build_wheel(str(folder))
    finally:
        os.chdir(cwd)


def test_wheel_contains_resources_and_works_installed(tmp_path):
    wheel = build_wheel(tmp_path)
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


def test_one_install_brings_what_the_three_uses_need(tmp_path):
    """`pip install sotakg` (no extras) brings the build's, the console's and the server's packages; the
    old extras are empty aliases, so `pip install 'sotakg[serve]'` still works."""
    with zipfile.ZipFile(build_wheel(tmp_path)) as wheel:
        metadata = next(wheel.read(n).decode() for n in wheel.namelist() if n.endswith(".dist-info/METADATA"))
    requires = [line.split(": ", 1)[1] for line in metadata.splitlines() if line.startswith("Requires-Dist: ")]
    required = {re.split(r"[<>=;\[ ]", r, maxsplit=1)[0].lower() for r in requires if "extra ==" not in r}
    assert required >= {"click", "pyyaml", "pyoxigraph", "rdflib", "pyshacl", "prompt-toolkit", "pygments", "oxigraph"}
    extras = {line.split(": ", 1)[1] for line in metadata.splitlines() if line.startswith("Provides-Extra: ")}
    assert {"serve", "console"} <= extras
    aliases = [r for r in requires if "extra == 'serve'" in r or "extra == 'console'" in r]
    assert aliases == []


def test_commands_other_than_the_console_do_not_import_its_libraries(tmp_path):
    code = (
        "import sys\n"
        "from sotakg.cli import cli\n"
        "try:\n"
        "    cli.main(['queries'], prog_name='sotakg')\n"
        "except SystemExit as done:\n"
        "    assert done.code == 0, done.code\n"
        "print(sorted(m for m in ('prompt_toolkit', 'pygments') if m in sys.modules))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], env=subprocess_env(), cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "[]"
