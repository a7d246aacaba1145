"""Every command but `publish` and `--endpoint` works with the network cut off at the socket level
(a fresh network namespace with only loopback), and none even tries to reach another address."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import SEED_PAGE, subprocess_env

OFFLINE = Path(__file__).resolve().parent / "offline"

#: (arguments, expected exit code) — each run inside the namespace, in a folder holding data/.
COMMANDS: list[tuple[list[str], int]] = [
    (["build"], 0),
    (["build", "--force"], 0),
    (["import", "markdown", "--force", str(SEED_PAGE)], 0),
    (["export", "rdf", "-f", "turtle", "-o", "graph.ttl"], 0),
    (["export", "rdf", "-f", "jsonld", "-o", "graph.jsonld"], 0),
    (["export", "rdf", "-f", "rdfxml", "-o", "graph.rdf"], 0),
    (["export", "index", "--topic", "distributed-optimization", "-o", "page.md"], 0),
    (["validate"], 0),
    (["validate", "--format", "sarif", "-o", "report.sarif"], 0),
    (["queries"], 0),
    (["query", "practices-citing", "-p", "paper=LIT-051", "-f", "json"], 0),
    (["query", "rejections"], 0),
    (["sparql", "SELECT (COUNT(*) AS ?n) WHERE { ?s ?p ?o }"], 0),
    (["sparql", "SELECT * WHERE { SERVICE <http://example.org/sparql> { ?s ?p ?o } }"], 2),
    (["why", "SOTA-049"], 0),
    (["views"], 0),
    (["export", "view", "citations", "-f", "mermaid", "-o", "citations.mmd"], 0),
    (["export", "view", "topic", "-p", "topic=distributed-optimization", "-f", "dot", "-o", "topic.dot"], 0),
    (["export", "index", "--all", "-o", "pages"], 0),
    (["export", "site", "site"], 0),
    (["serve", "--get", "/query?query=ASK%7B%7D"], 0),
    (["console", "-f", "csv", "<", "script.rq"], 0),
]


def namespace_works() -> bool:
    if shutil.which("unshare") is None or shutil.which("ip") is None:
        return False
    probe = subprocess.run(["unshare", "-n", "ip", "link", "set", "lo", "up"], capture_output=True)
    return probe.returncode == 0


pytestmark = pytest.mark.skipif(not namespace_works(), reason="needs root and unshare -n (a network namespace)")


@pytest.mark.parametrize("args, code", COMMANDS, ids=[" ".join(a[:2]) for a, _ in COMMANDS])
def test_command_works_offline_and_never_reaches_out(workdir, args, code):
    log = workdir / "network.log"
    env = subprocess_env()
    env["PYTHONPATH"] = f"{OFFLINE}:{env['PYTHONPATH']}"
    env["SOTAKG_NETWORK_LOG"] = str(log)
    (workdir / "script.rq").write_text(".run practices-citing paper=LIT-051\nSELECT * WHERE { ?s ?p ?o } LIMIT 3;\n")
    words = [arg if arg == "<" else _quote(arg) for arg in args]
    command = " ".join(["ip link set lo up &&", sys.executable, "-m", "sotakg", *words])
    result = subprocess.run(
        ["unshare", "-n", "sh", "-c", command], cwd=workdir, env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == code, result.stdout + result.stderr
    assert not log.exists(), log.read_text()


def _quote(arg: str) -> str:
    import shlex

    return shlex.quote(arg)


def test_the_harness_catches_an_attempt(workdir):
    log = workdir / "network.log"
    env = subprocess_env()
    env["PYTHONPATH"] = f"{OFFLINE}:{env['PYTHONPATH']}"
    env["SOTAKG_NETWORK_LOG"] = str(log)
    attempt = "import urllib.request; urllib.request.urlopen('http://example.org/', timeout=2)"
    command = f"ip link set lo up && {sys.executable} -c {_quote(attempt)}"
    result = subprocess.run(["unshare", "-n", "sh", "-c", command], cwd=workdir, env=env, capture_output=True)
    assert result.returncode != 0  # the namespace has no route out
    assert "example.org" in log.read_text()  # and the audit hook saw the attempt
