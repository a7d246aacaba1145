"""Where the shipped ontology, shapes and canned queries are, installed or in a checkout."""

from __future__ import annotations

from functools import cache
from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent


@cache
def resource_dir(name: str) -> Path:
    """The folder ``name`` (ontology, shapes, queries): inside the installed package (a wheel ships
    them as package data) or, in a source checkout, at the top of the repository."""
    for candidate in (_PACKAGE / name, _PACKAGE.parent.parent / name):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"sotakg is installed without its {name}/ folder; reinstall the package")


def ontology_path() -> Path:
    """The ontology in Turtle."""
    return resource_dir("ontology") / "sotakg.ttl"
