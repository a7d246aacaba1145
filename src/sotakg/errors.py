"""Exceptions raised by the sotakg library. The CLI turns them into exit codes and messages."""

from __future__ import annotations

import re
from dataclasses import dataclass

#: What must not reach a terminal or a rendered page as it is: C0 controls, DEL and C1 controls,
#: bidirectional marks, overrides and isolates, line and paragraph separators, lone surrogates
#: (undecodable bytes of a file name).
_UNPRINTABLE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069\ud800-\udfff]")


def printable(text: str) -> str:
    """``text`` with every control character shown as a visible escape (``\\x1b``, ``\\u202e``)."""

    def escape(match: re.Match[str]) -> str:
        code = ord(match[0])
        return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"

    return _UNPRINTABLE.sub(escape, text)


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
    #: The filing rule the problem breaks, when it is one of validate's rules (``id-unique``).
    rule: str | None = None
    #: How many problems this one stands for: more than 1 for a line that counts those not listed.
    stands_for: int = 1

    def __str__(self) -> str:
        # A file name or a value may hold any character: none reaches a terminal or a CI log as it is.
        where = printable(self.file) if self.line is None else f"{printable(self.file)}:{self.line}"
        who = f" ({printable(self.record)})" if self.record else ""
        return f"{where}: {printable(self.message)}{who}"


class DataError(SotakgError):
    """The data folder holds records that cannot be read or do not fit the record schema."""

    def __init__(self, problems: list[Problem]):
        self.problems = problems
        lines = "\n".join(str(p) for p in problems)
        count = sum(problem.stands_for for problem in problems)
        super().__init__(f"{count} problem{'s' if count != 1 else ''} in the data:\n{lines}")


class DataFolderMissing(UsageProblem):
    """The --data folder does not exist."""


class LinkedFolder(UsageProblem):
    """A folder sotakg is told to read or write (the data folder, an export folder) is a symbolic
    link, or lies behind one: a checkout can commit such a link, and it would lead anywhere."""


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


# ------------------------------------------------------------------------------------- queries


class QueryHeaderError(SotakgError):
    """A canned query file (queries/*.rq) has a malformed grlc-style header."""


class UnknownQuery(UsageProblem):
    """No canned query has the name asked for."""


class ParameterProblem(UsageProblem):
    """A canned query's parameter is missing, unknown or does not have the expected form."""


class QueryRefused(UsageProblem):
    """A query would write to the store, reach the network or nest too deeply; it is not run.
    ``writes``: refused as SPARQL Update (a server answers that 403)."""

    def __init__(self, message: str, writes: bool = False):
        super().__init__(message)
        self.writes = writes


class QuerySyntaxError(SotakgError):
    """The query text is not valid SPARQL; ``line`` and ``column`` (1-based) say where."""

    def __init__(self, message: str, line: int | None = None, column: int | None = None):
        super().__init__(message)
        self.line = line
        self.column = column


class QueryTimeout(SotakgError):
    """The query ran longer than its time limit and was stopped; no partial result is given."""


class QueryFailed(SotakgError):
    """The query engine failed while running the query (it crashed or could not read the store)."""


class RecordNotFound(SotakgError):
    """No practice, paper or ADR has the identifier asked for."""


class ConsoleUnavailable(SotakgError):
    """The interactive console needs prompt_toolkit and Pygments, and they are not installed."""


class ConsoleCommandError(UsageProblem):
    """A console dot-command was given wrong arguments (reported; the console goes on)."""


# ------------------------------------------------------------------------------------- views and site


class UnknownView(UsageProblem):
    """No view (queries/views/*.rq) has the name asked for."""


class GraphvizMissing(SotakgError):
    """SVG output needs Graphviz's ``dot`` program, and it is not installed."""


# ------------------------------------------------------------------------------------- sharing


class EndpointError(SotakgError):
    """A remote SPARQL endpoint could not be reached, or answered with an error."""


class EndpointTimeout(EndpointError):
    """A remote SPARQL endpoint did not answer within the time limit."""


class ServeError(SotakgError):
    """The Oxigraph server cannot be found, started or asked."""


class ShapesError(SotakgError):
    """A shapes graph is not well-formed SHACL (what the SHACL specification calls a failure)."""


class UnsupportedShape(ShapesError):
    """A shape uses a feature the SPARQL compiler does not implement; validate it with pySHACL instead."""

    def __init__(self, shape: str, feature: str, why: str = ""):
        self.shape = shape
        self.feature = feature
        detail = f": {why}" if why else ""
        super().__init__(f"shape {shape} uses {feature}, which the SPARQL engine does not support{detail}")
