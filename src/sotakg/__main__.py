"""``python -m sotakg`` and the ``sotakg`` command (``sotakg.__main__:main``): nothing is imported
before ``main`` runs but the standard library, so what happens outside any command is handled."""

from __future__ import annotations

import os
import sys


def main() -> None:
    """The ``sotakg`` command: the click group, and what happens outside any of its commands: a
    standard output that is closed (``>&-``), or that fails while ``--help`` or ``--version``
    prints (a full disk), is an error of one line, exit 1, never a traceback."""
    if sys.stderr is None:  # nowhere to say anything: errors still exit non-zero
        sys.stderr = open(os.devnull, "w", encoding="utf-8")  # noqa: SIM115 - for the process's life
    if sys.stdout is None:
        sys.stderr.write("Error: standard output is closed; redirect it to a file or to /dev/null\n")
        raise SystemExit(1)
    try:
        from .cli import cli  # imported here: a Ctrl-C during the imports is an interrupt, not a traceback

        cli.main(prog_name="sotakg")
    except KeyboardInterrupt:
        sys.stderr.write("Aborted!\n")
        raise SystemExit(130) from None
    except BrokenPipeError:
        raise SystemExit(1) from None
    except OSError as error:  # only what click writes itself gets here (commands translate theirs)
        sys.stderr.write(f"Error: cannot write to standard output: {error.strerror or error}\n")
        raise SystemExit(1) from None


if __name__ == "__main__":
    main()
