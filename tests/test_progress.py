"""Progress bars: `build` and `validate` show one on a terminal once the work takes over a second,
never in a log (#17)."""

from __future__ import annotations

import io

from sotakg.cli import DelayedProgress, cli
from sotakg.graph.build import build
from sotakg.rules.validate import validate


class Terminal(io.StringIO):
    """A stream that says it is a terminal, as a curator's stderr is."""

    def isatty(self) -> bool:
        return True


def steps_of(call) -> list[tuple[int, int, str]]:
    heard: list[tuple[int, int, str]] = []
    call(lambda done, total, step: heard.append((done, total, step)))
    return heard


def test_build_reports_each_step_of_a_rebuild_and_none_when_fresh(tmp_path, data_copy):
    store = tmp_path / "store"
    assert steps_of(lambda progress: build(data_copy, store, progress=progress)) == [
        (0, 3, "reading the records"),
        (1, 3, "loading the graph"),
        (2, 3, "swapping it in"),
        (3, 3, "built"),
    ]
    assert steps_of(lambda progress: build(data_copy, store, progress=progress)) == []


def test_validate_reports_reading_then_each_shape(tmp_path, data_copy):
    heard = steps_of(lambda progress: validate(data_copy, tmp_path / "store", progress=progress))
    assert heard[0] == (0, 1, "reading the data")
    shapes = heard[1:]
    total = shapes[0][1]
    assert total > 10
    assert [done for done, _, _ in shapes] == list(range(total + 1))
    assert {t for _, t, _ in shapes} == {total}
    assert shapes[-1][2] == "done"
    assert all(step.startswith("https://w3id.org/sotakg/shapes#") for _, _, step in shapes[:-1])


def test_the_bar_shows_on_a_terminal_once_the_delay_has_passed():
    terminal = Terminal()
    with DelayedProgress("Validating", delay=0, stream=terminal) as progress:
        progress(0, 4, "first")
        progress(2, 4, "third")
        progress(4, 4, "done")
    shown = terminal.getvalue()
    assert "Validating" in shown
    assert "50%" in shown and "100%" in shown
    assert "third" in shown


def test_no_bar_before_the_delay_or_off_a_terminal():
    quick = Terminal()
    with DelayedProgress("Building", delay=60, stream=quick) as progress:
        progress(0, 3, "reading the records")
        progress(3, 3, "built")
    assert quick.getvalue() == ""
    log = io.StringIO()
    with DelayedProgress("Building", delay=0, stream=log) as progress:
        progress(0, 3, "reading the records")
        progress(3, 3, "built")
    assert log.getvalue() == ""


def test_the_commands_print_no_bar_in_a_log(runner, workdir):
    built = runner.invoke(cli, ["build", "--force"])
    assert built.exit_code == 0, built.output
    assert built.stderr == ""
    checked = runner.invoke(cli, ["validate"])
    assert checked.exit_code in (0, 1), checked.output
    assert "Validating" not in checked.stderr and "%" not in checked.stderr
