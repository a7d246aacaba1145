"""Exceptions raised by the sotakg library. The CLI turns them into exit codes and messages."""

from __future__ import annotations

from dataclasses import dataclass


class SotakgError(Exception):
    """Base class of every error sotakg reports to a user."""


class UsageProblem(SotakgError):
    """The user asked for something that cannot work as asked (exit 2 in the CLI)."""


@dataclass(frozen=True)
class Problem:
    """One problem in a data file: where it is, which record, and what to do."""

    file: str
    line: int | None
    record: str | None
    message: str

    def __str__(self) -> str:
        where = self.file if self.line is None else f"{self.file}:{self.line}"
        who = f" ({self.record})" if self.record else ""
        return f"{where}: {self.message}{who}"


class DataError(SotakgError):
    """The data folder holds records that cannot be read or do not fit the record schema."""

    def __init__(self, problems: list[Problem]):
        self.problems = problems
        lines = "\n".join(str(p) for p in problems)
        count = len(problems)
        super().__init__(f"{count} problem{'s' if count != 1 else ''} in the data:\n{lines}")


class DataFolderMissing(UsageProblem):
    """The --data folder does not exist."""


class StoreBusy(SotakgError):
    """Another process is building the same store."""


class StoreError(SotakgError):
    """The store cannot be opened, built or swapped in."""


class ImportProblem(SotakgError):
    """An index page cannot be imported."""


class RecordConflict(SotakgError):
    """Importing would overwrite a record whose content differs."""


class ExportError(SotakgError):
    """An export cannot be written as asked."""


class ShapesError(SotakgError):
    """A shapes graph is not well-formed SHACL (what the SHACL specification calls a failure)."""


class UnsupportedShape(ShapesError):
    """A shape uses a feature the SPARQL compiler does not implement; validate it with pySHACL instead."""

    def __init__(self, shape: str, feature: str, why: str = ""):
        self.shape = shape
        self.feature = feature
        detail = f": {why}" if why else ""
        super().__init__(f"shape {shape} uses {feature}, which the SPARQL engine does not support{detail}")
