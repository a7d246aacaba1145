"""The environment the benchmarks run sotakg in: this checkout's code, read from bytecode.

Cold commands are timed as an installed package runs them. ``pip install`` compiles the package's
bytecode; a checkout run with ``PYTHONDONTWRITEBYTECODE`` (set on some machines) would otherwise
compile every changed module anew in every timed process, tens to hundreds of milliseconds each.
"""

from __future__ import annotations

import compileall
import functools
import os
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SOURCE = REPO / "src"


@functools.cache
def compiled() -> None:
    """Write the bytecode of this checkout's package (once per benchmark process)."""
    compileall.compile_dir(str(SOURCE / "sotakg"), quiet=1)


def child_env() -> dict[str, str]:
    """The environment of a timed sotakg process: this checkout's ``src`` first, its bytecode written."""
    compiled()
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(SOURCE), env.get("PYTHONPATH", "")]))
    return env
