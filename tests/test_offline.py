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


#: Ways to start a process in a network namespace of its own: as root, or (anyone, where the kernel
#: allows unprivileged user namespaces) inside a user namespace that maps the caller to root.
UNSHARE_WAYS = (["unshare", "-n"], ["unshare", "-rn"])


def network_namespace() -> tuple[list[str] | None, str]:
    """The command prefix that drops the network here (and keeps loopback), or None and why not."""
    missing = [tool for tool in ("unshare", "ip") if shutil.which(tool) is None]
    if missing:
        return (
            None,
            f"cannot cut the network off: {' and '.join(missing)} not installed (apt-get install util-linux iproute2)",
        )
    failures = []
    for prefix in UNSHARE_WAYS:
        try:
            probe = subprocess.run(
                [*prefix, "ip", "link", "set", "lo", "up"], capture_output=True, text=True, timeout=30
            )
        except (OSError, subprocess.TimeoutExpired) as error:
            failures.append(f"{' '.join(prefix)}: {error}")
            continue
        if probe.returncode == 0:
            return prefix, ""
        failures.append(f"{' '.join(prefix)}: {(probe.stderr.strip().splitlines() or ['failed'])[-1]}")
    return None, (
        "this machine lets no process drop its network (" + "; ".join(failures) + "): run as root, or enable "
        "unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1)"
    )


UNSHARE, WHY_NOT = network_namespace()
pytestmark = pytest.mark.skipif(UNSHARE is None, reason=WHY_NOT)


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
        [*(UNSHARE or []), "sh", "-c", command], cwd=workdir, env=env, capture_output=True, text=True, timeout=120
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
    result = subprocess.run([*(UNSHARE or []), "sh", "-c", command], cwd=workdir, env=env, capture_output=True)
    assert result.returncode != 0  # the namespace has no route out
    assert "example.org" in log.read_text()  # and the audit hook saw the attempt
