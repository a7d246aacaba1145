"""The README, the command help and the changelog agree with the code.

Run with SOTAKG_UPDATE_README=1 to regenerate the README's command reference.
"""

from __future__ import annotations

import os
import re

import click
import pytest

from sotakg.cli import cli

from .conftest import REPO

README = REPO / "README.md"


def all_commands(group: click.Group = cli, prefix: str = "sotakg") -> list[tuple[str, click.Command]]:
    found: list[tuple[str, click.Command]] = []
    for name in sorted(group.commands):
        command = group.commands[name]
        path = f"{prefix} {name}"
        found.append((path, command))
        if isinstance(command, click.Group):
            found.extend(all_commands(command, path))
    return found


def help_text(path: str) -> str:
    args = path.split()[1:] + ["--help"]
    result = click.testing.CliRunner().invoke(cli, args, prog_name="sotakg", terminal_width=100)
    assert result.exit_code == 0, result.output
    return result.output


def command_reference() -> str:
    blocks = [f"### `sotakg`\n\n```text\n{help_text('sotakg')}```\n"]
    for path, _command in all_commands():
        blocks.append(f"### `{path}`\n\n```text\n{help_text(path)}```\n")
    return "\n".join(blocks)


def test_readme_command_reference_is_current():
    text = README.read_text(encoding="utf-8")
    start, end = "<!-- commands:start -->\n", "<!-- commands:end -->"
    assert start in text and end in text
    current = text[text.index(start) + len(start) : text.index(end)]
    expected = command_reference()
    if os.environ.get("SOTAKG_UPDATE_README"):
        head, tail = text[: text.index(start) + len(start)], text[text.index(end) :]
        README.write_text(head + expected + tail, encoding="utf-8")
        current = expected
    assert current == expected, (
        "README command reference is stale: run SOTAKG_UPDATE_README=1 pytest tests/test_docs.py"
    )


@pytest.mark.parametrize("path, command", all_commands(), ids=[p for p, _ in all_commands()])
def test_every_command_has_help_ending_in_an_example(path, command):
    doc = command.help or ""
    assert doc.strip(), f"{path} has no help"
    assert "Example:" in doc, f"{path}'s docstring has no Example: block"
    assert doc.rstrip().split("Example:")[-1].strip(), f"{path}'s Example: block is empty"


@pytest.mark.parametrize("path, command", all_commands(), ids=[p for p, _ in all_commands()])
def test_every_example_line_shows_in_the_help_as_written(path, command):
    # click rewraps a paragraph unless a line of its own says \b before it: examples must stay one per line
    example = (command.help or "").rstrip().split("Example:")[-1]
    lines = [line.strip() for line in example.splitlines() if line.strip() and line.strip() != "\b"]
    shown = click.testing.CliRunner().invoke(cli, [*path.split()[1:], "--help"], terminal_width=80).output
    for line in lines:
        assert f"\n      {line}\n" in shown or f"\n          {line}\n" in shown, (path, line, shown)


def test_help_and_version_options():
    runner = click.testing.CliRunner()
    assert runner.invoke(cli, ["-h"]).exit_code == 0
    version = runner.invoke(cli, ["--version"])
    assert re.fullmatch(r"sotakg, version \d+\.\d+\.\d+\n", version.output)


def test_the_version_is_the_changelogs_newest_and_the_packages():
    from sotakg import __version__

    newest = re.search(r"^## \[(\d+\.\d+)\]", (REPO / "CHANGELOG.md").read_text(encoding="utf-8"), re.M)
    assert newest is not None and __version__.startswith(newest.group(1) + ".")
    declared = re.search(r'^version = "([^"]+)"', (REPO / "pyproject.toml").read_text(encoding="utf-8"), re.M)
    assert declared is not None and declared.group(1) == __version__


def test_changelog_has_dated_entries():
    text = (REPO / "CHANGELOG.md").read_text(encoding="utf-8")
    assert re.search(r"^## \[\d+\.\d+\] - \d{4}-\d{2}-\d{2}$", text, re.M)


def test_readme_opens_with_the_two_commands():
    text = README.read_text(encoding="utf-8")
    assert "pip install -e . && sotakg build" in text
    assert "pip install -e '.[test]' && python -m pytest" in text
    command = "pip install -e '.[test]' && python -m pytest"
    assert command in text
    assert command in (REPO / ".ci" / "run").read_text().splitlines()


@pytest.mark.parametrize("path, command", all_commands(), ids=[p for p, _ in all_commands()])
def test_every_option_a_command_has_is_in_its_help(path, command):
    """An error message may suggest an option (why's suggests --timeout): none is hidden from --help."""
    hidden = [param.name for param in command.params if getattr(param, "hidden", False)]
    assert hidden == [], f"{path} hides {hidden}"
    if any(param.name == "timeout" for param in command.params):
        assert "--timeout" in help_text(path)
