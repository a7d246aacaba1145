"""The newcomer's path: a fresh virtualenv, `pip install .` with no extras, then the three uses — build,
the console (piped, and in a pseudo-terminal), serving (`serve --get`) and the static site.

This installs from the package registry into a new virtualenv, so it takes a minute or two: it runs in
CI (`.ci/run` runs the whole suite) and is deselected locally with ``-m "not newcomer"``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import REPO, SHIPPED_DATA, SHIPPED_TRIPLES

pytestmark = pytest.mark.newcomer


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, dict[str, str]]:
    """(the virtualenv's bin folder, a folder holding a copy of the shipped data, the environment)."""
    root = tmp_path_factory.mktemp("newcomer")
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    bin_dir = venv / "bin"
    # An environment as a newcomer's shell has it: nothing of this checkout on the import path.
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "COLUMNS", "LINES")}
    env.update(PATH=f"{bin_dir}{os.pathsep}{env.get('PATH', '')}", HOME=str(root), PIP_DISABLE_PIP_VERSION_CHECK="1")
    # pip's download cache stays the machine's, so a rerun does not fetch every package again
    env["PIP_CACHE_DIR"] = os.environ.get("PIP_CACHE_DIR", str(Path.home() / ".cache" / "pip"))
    # A copy of the checkout without its local state, so the build sees only what a clone has.
    source = root / "source"
    shutil.copytree(
        REPO,
        source,
        ignore=shutil.ignore_patterns(
            ".git", ".sotakg", "__pycache__", "node_modules", "*.egg-info", ".work", ".*_cache", ".hypothesis"
        ),
    )
    pip = subprocess.run(
        [str(bin_dir / "pip"), "install", "--quiet", str(source)], env=env, capture_output=True, text=True, timeout=600
    )
    assert pip.returncode == 0, pip.stdout + pip.stderr
    work = root / "work"
    work.mkdir()
    shutil.copytree(SHIPPED_DATA, work / "data")
    return bin_dir, work, env


def run(installed, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    bin_dir, work, env = installed
    return subprocess.run(
        [str(bin_dir / "sotakg"), *args], cwd=work, env=env, input=stdin, capture_output=True, text=True, timeout=180
    )


def test_the_installed_package_is_the_one_in_the_virtualenv(installed):
    bin_dir, work, env = installed
    where = subprocess.run(
        [str(bin_dir / "python"), "-c", "import sotakg, sys; print(sotakg.__file__); print(sys.prefix)"],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    module, prefix = where.stdout.splitlines()
    assert module.startswith(prefix) and "site-packages" in module
    assert not module.startswith(str(REPO))


def test_build(installed):
    done = run(installed, "build", "--force")  # whatever ran first: the console builds too
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(
        f"Built .sotakg/store: 42 practices, 18 papers, 3 ADRs, 1 topic, 1 registry; {SHIPPED_TRIPLES} triples"
    )


def test_console_piped(installed):
    done = run(
        installed,
        "console",
        "--format",
        "csv",
        stdin="ASK { id:SOTA-049 a sota:Practice };\n.run practices-citing paper=LIT-051\n",
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "true"
    assert lines[1] == "paper,practice,version,status,title" and len(lines) == 2 + 7


def test_console_in_a_pseudo_terminal(installed):
    pexpect = pytest.importorskip("pexpect")
    bin_dir, work, env = installed
    child = pexpect.spawn(
        str(bin_dir / "sotakg"),
        ["console"],
        env={**env, "TERM": "xterm", "PROMPT_TOOLKIT_NO_CPR": "1", "SOTAKG_HISTORY": str(work / "history")},
        cwd=str(work),
        dimensions=(40, 120),
        encoding="utf-8",
        timeout=60,
    )
    child.expect("Ctrl-D quits")
    child.expect("sparql>")
    child.send("SELECT ?title WHERE { id:SOTA-049 dcterms:title ?title };\r")
    child.expect("Set buffer size to network bandwidth-delay product")
    child.expect(r"1 row \(\d+\.\d{3} s\)")
    child.expect("sparql>")
    child.send("\x04")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0


def test_serve_get(installed):
    done = run(installed, "serve", "--get", "/query?query=ASK%7B%7D")
    assert (done.returncode, done.stdout) == (0, '{"head":{},"boolean":true}'), done.stderr  # the body as served


def test_export_site(installed):
    bin_dir, work, env = installed
    done = run(installed, "export", "site", "public")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "Wrote 68 files to public, 0 unchanged.\n"
    index = (work / "public" / "index.html").read_text(encoding="utf-8")
    assert index.startswith("<!DOCTYPE html>")
    topic = (work / "public" / "topic-distributed-optimization.html").read_text(encoding="utf-8")
    if shutil.which("dot"):
        assert "<svg" in topic and done.stderr == ""
    else:
        assert '<pre class="mermaid-source">' in topic and "Graphviz's dot is not installed" in done.stderr
