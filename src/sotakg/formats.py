"""Output formats chosen by name or by file extension, and writing results where the user asked."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

from .errors import UsageProblem
from .records import atomic_write_text

if TYPE_CHECKING:
    from pyoxigraph import RdfFormat

#: RDF format names a user may give, with the file extensions that imply them.
RDF_FORMATS: dict[str, tuple[str, ...]] = {
    "turtle": ("ttl", "turtle"),
    "ntriples": ("nt", "ntriples", "n-triples"),
    "nquads": ("nq", "nquads", "n-quads"),
    "trig": ("trig",),
    "jsonld": ("jsonld", "json-ld", "json"),
    "rdfxml": ("rdf", "xml", "owl", "rdfxml", "rdf-xml"),
}


def rdf_format_names() -> list[str]:
    """Every name --format accepts for RDF, canonical names first."""
    names = list(RDF_FORMATS)
    for aliases in RDF_FORMATS.values():
        names += [a for a in aliases if a not in names]
    return names


def resolve_rdf_format(name: str | None, output: Path | None) -> str:
    """The canonical RDF format for ``--format NAME`` or, without it, the output file's extension."""
    if name is None:
        if output is None:
            raise UsageProblem("writing to standard output needs --format (for example --format turtle)")
        name = output.suffix.lstrip(".")
        if not name:
            raise UsageProblem(f"cannot tell the format of {output}: give it an extension or pass --format")
    lowered = name.lower()
    for canonical, aliases in RDF_FORMATS.items():
        if lowered == canonical or lowered in aliases:
            return canonical
    raise UsageProblem(f"unknown RDF format {name!r}; use one of: {', '.join(RDF_FORMATS)}")


def pyoxigraph_format(canonical: str) -> RdfFormat:
    from pyoxigraph import RdfFormat

    return {
        "turtle": RdfFormat.TURTLE,
        "ntriples": RdfFormat.N_TRIPLES,
        "nquads": RdfFormat.N_QUADS,
        "trig": RdfFormat.TRIG,
        "jsonld": RdfFormat.JSON_LD,
        "rdfxml": RdfFormat.RDF_XML,
    }[canonical]


def write_output(content: str | bytes, output: Path | None) -> None:
    """Write to ``output`` atomically, or to standard output when it is None or ``-``."""
    if output is None or str(output) == "-":
        if isinstance(content, bytes):
            sys.stdout.buffer.write(content)
            sys.stdout.flush()
        else:
            sys.stdout.write(content)
        return
    text = content.decode("utf-8") if isinstance(content, bytes) else content
    atomic_write_text(output, text)
