"""An executable README: every ```console block is run against the shipped data.

In a block, a line starting with ``$ `` is a command (run by bash in a folder holding a copy of the
shipped ``data/``, with ``sotakg`` this checkout's), and the lines below it, up to the next command, are
what it prints (standard output and standard error, in order). In expected output, ``…`` stands for any
text within a line (timings, and cells cut to the width of the terminal) and a line ``...`` for any
number of lines. A command with no lines below it must run and exit 0; its output is not shown. The
commands of a block run in order in a folder of their own, as a reader following the README would. The interactive
console session is typed into a pseudo-terminal. A README example that fails is a failing test.

Commands that cannot run here (a server that runs until stopped, a machine on the network, a file of
the reader's) are listed in NOT_RUN with the reason; the list must match the README exactly.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from .conftest import REPO, SHIPPED_DATA, subprocess_env

README = REPO / "README.md"
COLUMNS = 100

NOT_RUN = {
    "sotakg serve": "serves until stopped (`serve --get` below runs instead)",
    "sotakg diff origin/main": "needs the git history of a pull request (tests/test_diff.py builds one)",
    "sotakg serve --host 0.0.0.0 --port 8080 --timeout 10 --max-result-bytes 16M": (
        "serves on every address until stopped"
    ),
    "sotakg sparql --file my-question.rq --format tsv --timeout 5": "reads a file of the reader's",
    "SOTAKG_TOKEN=... sotakg publish --endpoint https://sparql.example.org/ds/data --graph https://w3id.org/sotakg": (
        "publishes to a server on the network"
    ),
    "sotakg query practices-citing -p paper=LIT-051 --endpoint http://127.0.0.1:7878/query": (
        "needs a server on port 7878"
    ),
    "sotakg why SOTA-049 --endpoint https://sparql.example.org/ds/query --graph https://w3id.org/sotakg": (
        "queries a server on the network"
    ),
    "isql-vt 1111 dba \"$DBA_PASSWORD\" exec=\"DB.DBA.USER_CREATE('sotakg', '…'); GRANT SPARQL_UPDATE TO "
    '\\"sotakg\\"; DB.DBA.RDF_DEFAULT_USER_PERMS_SET(\'sotakg\', 3);"': (
        "needs a Virtuoso server (tests/servers.py starts one in a temporary folder)"
    ),
    "SOTAKG_USER=sotakg SOTAKG_PASSWORD=… sotakg publish --endpoint http://HOST:8890/sparql-graph-crud-auth "
    "--graph https://w3id.org/sotakg": "needs a Virtuoso server (tests/test_servers_shared.py publishes to one)",
    "sotakg query adrs --endpoint http://HOST:8890/sparql --graph https://w3id.org/sotakg": (
        "needs a Virtuoso server (tests/test_servers_shared.py queries one)"
    ),
    "sotakg publish --endpoint http://HOST:3030/DATASET/data --graph https://w3id.org/sotakg": (
        "needs a Fuseki server (tests/test_servers_shared.py publishes to Jena ARQ behind its endpoints)"
    ),
    "sotakg query adrs --endpoint http://HOST:3030/DATASET/query --graph https://w3id.org/sotakg": (
        "needs a Fuseki server (tests/test_servers_shared.py queries Jena ARQ behind its endpoints)"
    ),
    "oxigraph serve --location /srv/oxigraph --bind 127.0.0.1:7878": (
        "starts a server on a system path (tests/test_servers_shared.py runs one in a temporary folder)"
    ),
    "sotakg publish --endpoint http://127.0.0.1:7878/store --graph https://w3id.org/sotakg": (
        "needs the server above (tests/test_servers_shared.py publishes to one)"
    ),
    "sotakg query adrs --endpoint http://127.0.0.1:7878/query --graph https://w3id.org/sotakg": (
        "needs the server above (tests/test_servers_shared.py queries one)"
    ),
}


@dataclass
class Example:
    """One command of a console block, the README line it is on, and the output shown under it."""

    line: int
    command: str
    expected: list[str] = field(default_factory=list)


def console_blocks(text: str) -> list[tuple[int, list[str]]]:
    """(line number of the block's first line, its lines) of every ```console block."""
    blocks, lines = [], text.split("\n")
    index = 0
    while index < len(lines):
        if lines[index].strip() == "```console":
            start = index + 1
            end = next(i for i in range(start, len(lines)) if lines[i].strip() == "```")
            blocks.append((start + 1, lines[start:end]))
            index = end
        index += 1
    return blocks


def examples_of(start: int, lines: list[str]) -> list[Example]:
    found: list[Example] = []
    for offset, line in enumerate(lines):
        if line.startswith("$ "):
            found.append(Example(start + offset, line[2:]))
        elif found and found[-1].command.endswith("\\") and not found[-1].expected:
            found[-1].command = found[-1].command[:-1] + line.strip()  # a command continued on this line
        elif found:
            found[-1].expected.append(line)
        else:
            raise AssertionError(f"README.md:{start + offset}: output before any command in a console block")
    for example in found:
        while example.expected and not example.expected[-1].strip():
            example.expected.pop()
    return found


def may_run(example: Example) -> bool:
    """Only sotakg's own commands, on the reader's folder, are run: anything else (a server started
    on a system path, a database client) or a command that talks to a server is never run, whatever
    NOT_RUN says, and must be listed there with its reason."""
    return example.command.startswith("sotakg ") and "--endpoint" not in example.command


def is_session(example: Example) -> bool:
    return example.command == "sotakg console" and any(line.startswith("sparql> ") for line in example.expected)


BLOCKS = [examples_of(start, lines) for start, lines in console_blocks(README.read_text(encoding="utf-8"))]
ALL = [example for block in BLOCKS for example in block]
RUN = [
    run
    for run in ([e for e in block if e.command not in NOT_RUN and may_run(e) and not is_session(e)] for block in BLOCKS)
    if run
]
SESSIONS = [e for e in ALL if is_session(e)]


def line_pattern(expected: str) -> re.Pattern[str]:
    """An expected line as a regular expression: ``…`` matches any text, the rest literally."""
    return re.compile(".*?".join(re.escape(part) for part in expected.split("…")))


def matches(expected: list[str], actual: list[str], in_order_within: bool = False) -> bool:
    """Whether ``actual`` lines are ``expected``: line by line, ``...`` lines standing for any number of
    lines. With ``in_order_within``, the expected lines need only occur in order (a terminal's screen
    also holds the echo of what was typed)."""

    def match(e: int, a: int) -> bool:
        if e == len(expected):
            return a == len(actual) or in_order_within
        if expected[e] == "...":
            return any(match(e + 1, k) for k in range(a, len(actual) + 1))
        if in_order_within:
            pattern = line_pattern(expected[e])
            return any(pattern.fullmatch(actual[k]) and match(e + 1, k + 1) for k in range(a, len(actual)))
        return a < len(actual) and bool(line_pattern(expected[e]).fullmatch(actual[a])) and match(e + 1, a + 1)

    return match(0, 0)


def test_the_matcher():
    assert matches(["Built … in … s."], ["Built .sotakg/store: 42 practices in 0.13 s."])
    assert not matches(["Built … in … s."], ["Built .sotakg/store", "in 0.13 s."])
    assert matches(["a", "...", "z"], ["a", "b", "c", "z"]) and matches(["a", "...", "z"], ["a", "z"])
    assert not matches(["a", "z"], ["a", "b", "z"]) and not matches(["a"], ["a", "b"])
    assert matches(["2 rows (… s)"], ["echo", "2 rows (0.081 s)", "prompt"], in_order_within=True)
    assert not matches(["b", "a"], ["a", "b"], in_order_within=True)


def test_every_example_is_run_or_says_why_not():
    commands = {example.command for example in ALL}
    assert set(NOT_RUN) <= commands, f"NOT_RUN lists commands the README no longer has: {set(NOT_RUN) - commands}"
    never_run = {example.command for example in ALL if not may_run(example)}
    assert never_run <= set(NOT_RUN), f"say in NOT_RUN why these are not run: {never_run - set(NOT_RUN)}"
    assert RUN and SESSIONS


@pytest.fixture
def reader_folder(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A folder holding a copy of the shipped data, and an environment whose ``sotakg`` is this checkout's."""
    root = tmp_path
    shutil.copytree(SHIPPED_DATA, root / "data")
    bin_dir = root / "bin"
    bin_dir.mkdir()
    shim = bin_dir / "sotakg"
    shim.write_text(f'#!/bin/sh\nexec {sys.executable} -m sotakg "$@"\n', encoding="utf-8")
    shim.chmod(0o755)
    env = {k: v for k, v in subprocess_env().items() if k not in ("LINES", "PAGER")}
    env.update(
        PATH=f"{bin_dir}{os.pathsep}{env.get('PATH', '')}",
        COLUMNS=str(COLUMNS),
        PYTHONUNBUFFERED="1",  # standard output and error reach the pipe in the order they were written
        SOTAKG_HISTORY=str(root / "history"),
        HOME=str(root),
    )
    return root, env


@pytest.mark.parametrize("block", RUN, ids=[f"README.md:{block[0].line}" for block in RUN])
def test_readme_console_block(block: list[Example], reader_folder):
    folder, env = reader_folder
    for example in block:
        run_example(example, folder, env)


def run_example(example: Example, folder: Path, env: dict[str, str]) -> None:
    done = subprocess.run(
        ["bash", "-c", example.command + " 2>&1"],
        cwd=folder,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=180,
    )
    shown = done.stdout
    assert done.returncode == 0, f"README.md:{example.line}: `{example.command}` exited {done.returncode}:\n{shown}"
    if example.expected:
        actual = shown.rstrip("\n").split("\n")
        assert matches(example.expected, actual), (
            f"README.md:{example.line}: `{example.command}` printed\n{shown}\nbut the README shows\n"
            + "\n".join(example.expected)
        )


_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07]*\x07|\x1b[=>()][0-9A-Za-z]?")
_CONTINUATION = re.compile(r"^\s*\.\.\.\S*> ")


def screen_lines(raw: str) -> list[str]:
    """What a terminal showed, as lines without escape sequences or carriage returns."""
    text = _ANSI.sub("", raw).replace("\r\n", "\n")
    text = re.sub(r"[\x00-\x08\x0b-\x0c\x0e-\x1f]", "", text)
    return [line.rstrip("\r").rsplit("\r", 1)[-1].rstrip() for line in text.split("\n")]


def session_steps(expected: list[str]) -> tuple[list[str], list[tuple[list[str], list[str]]]]:
    """The banner lines, then (typed lines, output lines) for each statement of a console session."""
    banner: list[str] = []
    steps: list[tuple[list[str], list[str]]] = []
    for line in expected:
        if line.startswith("sparql> "):
            steps.append(([line[len("sparql> ") :]], []))
        elif steps and not steps[-1][1] and _CONTINUATION.match(line):
            steps[-1][0].append(_CONTINUATION.sub("", line))
        elif steps:
            steps[-1][1].append(line)
        else:
            banner.append(line)
    return banner, [(typed, [o for o in output if o.strip()]) for typed, output in steps]


def drain(child, quiet: float = 2.0, limit: float = 60.0) -> list[str]:
    """The screen's lines from what the terminal shows until it has been quiet for ``quiet`` seconds."""
    import pexpect

    chunks: list[str] = []
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        try:
            chunks.append(child.read_nonblocking(65536, timeout=quiet))
        except pexpect.TIMEOUT:
            break
    return [line for line in screen_lines("".join(chunks)) if line.strip()]


@pytest.mark.parametrize("example", SESSIONS, ids=[f"README.md:{e.line}" for e in SESSIONS])
def test_readme_console_session_in_a_terminal(example: Example, reader_folder):
    pexpect = pytest.importorskip("pexpect")
    folder, env = reader_folder
    env = {**env, "TERM": "xterm", "PROMPT_TOOLKIT_NO_CPR": "1", "PAGER": "cat"}
    env.pop("COLUMNS")
    banner, steps = session_steps(example.expected)
    child = pexpect.spawn(
        "bash",
        ["-c", example.command],
        env=env,
        cwd=str(folder),
        dimensions=(80, COLUMNS),
        encoding="utf-8",
        timeout=60,
    )
    child.expect("sparql>", timeout=120)  # a fresh folder: the store is built first
    shown = screen_lines(child.before) + drain(child)
    assert matches(banner, shown, in_order_within=True), "\n".join(shown)
    for typed, output in steps:
        if typed == ["<Ctrl-D>"]:
            child.send("\x04")
            child.expect(pexpect.EOF)
            break
        for line in typed:
            if "<Tab>" in line:
                before, after = line.split("<Tab>", 1)
                completed, rest = re.match(r"(\S*)(.*)", after).groups()  # type: ignore[union-attr]
                child.send(before)
                time.sleep(0.3)
                child.send("\t")
                child.expect(re.escape(completed))
                line = rest
            child.send(line + "\r")
        shown = drain(child)
        assert any(line.startswith("sparql>") for line in shown[-2:]), "no prompt after:\n" + "\n".join(shown)
        assert matches(output, shown, in_order_within=True), (
            f"README.md:{example.line}: after typing\n"
            + "\n".join(typed)
            + "\nthe terminal showed\n"
            + "\n".join(shown)
            + "\nbut the README shows\n"
            + "\n".join(output)
        )
    child.close()
    assert child.exitstatus == 0


def python_blocks(text: str) -> list[tuple[int, str]]:
    """(line number, code) of every ```python block that uses sotakg."""
    found = []
    for match in re.finditer(r"^```python\n(.*?)^```", text, re.M | re.S):
        if "sotakg" in match.group(1):
            found.append((text.count("\n", 0, match.start()) + 2, match.group(1)))
    return found


PYTHON_BLOCKS = python_blocks(README.read_text(encoding="utf-8"))


@pytest.mark.parametrize("line, code", PYTHON_BLOCKS, ids=[f"README.md:{line}" for line, _ in PYTHON_BLOCKS])
def test_readme_python_example_works_from_any_folder(line, code, reader_folder):
    """Run in a folder that is not the checkout: resources are found through the package. Each
    ``print(...)  # OUTPUT`` line must print its comment; ``conforms`` says what the CLI's JSON says."""
    folder, env = reader_folder
    expected = [m.group(1).strip() for m in re.finditer(r"^print\(.*\)\s+#\s*(.+)$", code, re.M)]
    assert expected, f"README.md:{line}: the example shows none of its output"
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=folder, env=env, capture_output=True, text=True, timeout=180
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == expected
    if "report.conforms" in code:
        import json

        cli = subprocess.run(
            ["sotakg", "validate", "--format", "json"], cwd=folder, env=env, capture_output=True, text=True, timeout=180
        )
        conforms = done.stdout.split()[0] == "True"
        assert json.loads(cli.stdout)["conforms"] is conforms
