"""Output formats chosen by name or by file extension, and writing results where the user asked."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import ExportError, UsageProblem
from ..records.sources import (
    SourceTooLarge,
    atomic_write_text,
    display_path,
    read_bounded,
    refuse_link_to_a_device,
    refuse_linked_folder,
)

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
        try:
            if isinstance(content, bytes):
                sys.stdout.buffer.write(content)
            else:
                sys.stdout.write(content)
            sys.stdout.flush()
        except BrokenPipeError:
            raise  # the reader has gone (`| head`): nothing to say to it
        except OSError as error:  # a full disk behind the redirection, ...: it has no file name
            raise ExportError(f"cannot write to standard output: {error.strerror or error}") from None
        return
    text = content.decode("utf-8") if isinstance(content, bytes) else content
    if output.parent != Path():
        refuse_linked_folder(output.parent, "output folder")  # the file itself, if a link, is replaced
    try:
        refuse_link_to_a_device(output)
        atomic_write_text(output, text)
    except OSError as error:
        raise ExportError(f"cannot write {display_path(output)}: {error.strerror or error}") from None


@dataclass
class WriteReport:
    """What writing a set of files did: file names (relative to the folder) written, left unchanged
    because they already held the same text, and removed."""

    written: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)

    def summary(self, folder: Path) -> str:
        def files(names: list[str]) -> str:
            return f"{len(names)} file{'s' if len(names) != 1 else ''}"

        removed = f", removed {files(self.removed)}" if self.removed else ""
        return f"Wrote {files(self.written)} to {display_path(folder)}, {len(self.unchanged)} unchanged{removed}."


def write_if_changed(path: Path, text: str) -> bool:
    """Write ``text`` to ``path`` atomically unless the file already holds it; True if written. A file
    left as it is keeps its modification time, so a rebuild from unchanged data changes no file."""
    try:
        # Only a regular file is compared (never read through a link, never a FIFO): anything else is
        # replaced, or refused by atomic_write_text.
        if path.is_file() and not path.is_symlink() and read_bounded(path, len(text) * 4 + 4) == text.encode("utf-8"):
            return False
    except SourceTooLarge:
        pass
    except FileNotFoundError:
        pass
    except OSError as error:
        raise ExportError(f"cannot read {path}: {error}") from None
    try:
        atomic_write_text(path, text)
    except OSError as error:
        raise ExportError(f"cannot write {display_path(path)}: {error.strerror or error}") from None
    return True


def check_output_folder(folder: Path) -> None:
    """UsageProblem (exit 2) when ``folder``, named for files to be written into, is a link or
    lies behind one, or exists and is not a folder: checked before anything is made for it."""
    refuse_linked_folder(folder, "output folder")
    if folder.exists() and not folder.is_dir():
        raise UsageProblem(f"{display_path(folder)} exists and is not a folder; name a folder to write the files into")


def write_files(folder: Path, files: Mapping[str, str]) -> WriteReport:
    """Write each ``{relative name: text}`` into ``folder`` (created if missing), skipping unchanged files."""
    check_output_folder(folder)
    report = WriteReport()
    for name in sorted(files):
        # The folder is the user's choice; a link below it (committed to a checkout, say) is not.
        parent = (folder / name).parent
        while parent != folder and folder in parent.parents:
            if parent.is_symlink():
                raise ExportError(f"{display_path(parent)} is a link; sotakg does not write through it: remove it")
            parent = parent.parent
        changed = write_if_changed(folder / name, files[name])
        (report.written if changed else report.unchanged).append(name)
    return report
