"""The ``sotakg`` command line: parse options, call one library function, format its result."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import click

from . import __version__
from .errors import SotakgError, UsageProblem

CONTEXT_SETTINGS = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


class LazyChoice(click.Choice):
    """A choice among the names of ``module.attribute``, read when first needed (parsing a value,
    help, completion) rather than when the command line is defined: a command imports only what it
    uses, not every module that names the choices of an option it does not use."""

    def __init__(self, module: str, attribute: str, case_sensitive: bool = True, aliases: str | None = None):
        # click.Choice.__init__ would read the choices at once
        self._where = (module, attribute)
        self._names: tuple[str, ...] | None = None
        self.case_sensitive = case_sensitive
        #: ``module.aliases``: other names taken for some choices ({alias: choice}), not listed in help.
        self._aliases = aliases

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if self._aliases is not None and isinstance(value, str):
            import importlib

            value = getattr(importlib.import_module(self._where[0]), self._aliases).get(value.lower(), value)
        return super().convert(value, param, ctx)

    @property  # type: ignore[override]
    def choices(self) -> tuple[str, ...]:
        if self._names is None:
            import importlib

            module, attribute = self._where
            self._names = tuple(getattr(importlib.import_module(module), attribute))
        return self._names

    @choices.setter
    def choices(self, names: tuple[str, ...]) -> None:
        self._names = tuple(names)


def _shown(error: Exception) -> str:
    """An error's message for the terminal: its lines as they are, any other control character (from a
    server's answer, a file name) escaped."""
    from .errors import printable

    return "\n".join(printable(line) for line in str(error).split("\n"))


def _translated(invoke: Callable[[click.Context], Any], ctx: click.Context) -> Any:
    try:
        return invoke(ctx)
    except UsageProblem as error:
        raise click.UsageError(_shown(error), ctx) from None
    except SotakgError as error:
        raise click.ClickException(_shown(error)) from None
    except OSError as error:  # a path the system refuses: say which and why, not a traceback
        import os

        from .errors import printable
        from .records.sources import display_path

        # The name may come from a checkout (a folder named with a line break): never print it raw.
        where = f" {printable(display_path(os.fsdecode(error.filename)))}" if error.filename else ""
        raise click.ClickException(f"cannot use{where}: {printable(str(error.strerror or error))}") from None


def _listen_address(value: str) -> str:
    """``--host``, refused when empty: the system would take it for every interface (an unset
    variable would put the server on the network); every interface is asked for as 0.0.0.0."""
    if not value.strip():
        raise click.BadParameter("an empty address; give one (127.0.0.1, or 0.0.0.0 for every interface)")
    return value


def _store_path(value: Path) -> Path:
    """``--store``, refused (exit 2) when it names no folder of its own (``.``, ``..``, ``/``, an
    empty value) or is not UTF-8 (the database takes only UTF-8 paths)."""
    if value.name in ("", ".", ".."):
        raise click.BadParameter(
            f"{str(value)!r} names no folder of its own; give the store a name (e.g. .sotakg/store)",
            param_hint="'--store'",
        )
    try:
        str(value).encode("utf-8")
    except UnicodeEncodeError:
        raise click.BadParameter(
            "the path is not UTF-8; the store's database takes UTF-8 paths only", param_hint="'--store'"
        ) from None
    return value


#: The options of ``sotakg`` itself, which come before the command.
_GROUP_OPTIONS = ("--data", "--store")


def _before_the_command(error: click.NoSuchOption, ctx: click.Context) -> click.NoSuchOption:
    """``sotakg build --data DIR``: an option of sotakg itself given after the command is told where
    it goes (click only says there is no such option)."""
    name = error.option_name.split("=", 1)[0]
    if name not in _GROUP_OPTIONS:
        return error
    command = ctx.command_path.split(" ", 1)[1] if " " in ctx.command_path else ctx.info_name
    value = "DIR" if name == "--data" else "PATH"
    message = (
        f"{name} is an option of sotakg itself: give it before the command, as in 'sotakg {name} {value} {command} ...'"
    )
    return click.NoSuchOption(name, message, ctx=ctx)


class SotakgCommand(click.Command):
    """A command that turns the library's exceptions into click's: exit 2 for usage, 1 otherwise."""

    def invoke(self, ctx: click.Context) -> Any:
        return _translated(super().invoke, ctx)

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        try:
            return super().parse_args(ctx, args)
        except click.NoSuchOption as error:
            raise _before_the_command(error, ctx) from None


class SotakgGroup(click.Group):
    """A group whose commands and subgroups translate the library's exceptions."""

    command_class = SotakgCommand

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return _translated(super().invoke, ctx)
        except (KeyboardInterrupt, click.Abort):
            # As a shell reports an interrupted command, and as an interrupt before any command
            # exits (``__main__``): 130, not click's 1.
            click.echo("Aborted!", err=True)
            raise click.exceptions.Exit(130) from None

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        try:
            return super().parse_args(ctx, args)
        except click.NoSuchOption as error:
            raise _before_the_command(error, ctx) from None


SotakgGroup.group_class = SotakgGroup


@click.group(cls=SotakgGroup, context_settings=CONTEXT_SETTINGS)
@click.version_option(__version__, "--version", prog_name="sotakg")
@click.option(
    "--data",
    "data_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("data"),
    show_default=True,
    envvar="SOTAKG_DATA",
    help="Folder of YAML records.",
)
@click.option(
    "--store",
    "store_path",
    type=click.Path(path_type=Path),
    default=Path(".sotakg/store"),
    show_default=True,
    envvar="SOTAKG_STORE",
    callback=lambda ctx, param, value: _store_path(value),
    help="Embedded Oxigraph store (rebuilt when the data is newer).",
)
@click.pass_context
def cli(ctx: click.Context, data_dir: Path, store_path: Path) -> None:
    """sotakg: the ML engineering practices anthology as a knowledge graph.

    Records live as YAML under --data; `sotakg build` compiles them into an
    embedded Oxigraph store that the other commands read.

    Example:

        sotakg build && sotakg export index --topic distributed-optimization
    """
    ctx.obj = {"data": data_dir, "store": store_path}


PLURALS = {"practice": "practices", "paper": "papers", "adr": "ADRs", "topic": "topics", "registry": "registry"}


def describe_counts(counts: dict[str, int]) -> str:
    """``{"practice": 42, ...}`` as ``42 practices, ...``."""
    singular = {"adr": "ADR"}
    return ", ".join(f"{n} {PLURALS[kind] if n != 1 else singular.get(kind, kind)}" for kind, n in counts.items())


def output_option(func: Callable[..., Any]) -> Callable[..., Any]:
    """-o/--output FILE, written atomically; standard output when absent."""
    return click.option(
        "-o",
        "--output",
        type=OutputPath(dir_okay=False, path_type=Path),
        default=None,
        help="Write to FILE instead of standard output.",
    )(func)


#: ``ctx.meta`` key: the -o value was written as a folder (``pages/``), which a Path forgets.
OUTPUT_WRITTEN_AS_FOLDER = "sotakg.output_written_as_folder"


class OutputPath(click.Path):
    """An output path. One written as a folder (``out.ttl/``) is refused where only a file may be
    written (``dir_okay=False``): the slash, which the Path would drop, says a folder was meant;
    elsewhere it is remembered (``OUTPUT_WRITTEN_AS_FOLDER``)."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, str) and not value.strip():
            # Path("") is the current folder: an unset variable would write into it
            self.fail("an empty path; give the name of the file or folder to write", param, ctx)
        if isinstance(value, str) and value != "-" and value.endswith("/"):
            if not self.dir_okay:
                self.fail(f"{value!r} is written as a folder; give the name of the file to write", param, ctx)
            if ctx is not None:
                ctx.meta[OUTPUT_WRITTEN_AS_FOLDER] = True
        return super().convert(value, param, ctx)


def force_option(help_text: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    return click.option("--force", is_flag=True, help=help_text)


class DelayedProgress:
    """A click progress bar on standard error for work that reports ``(done, total, step)``: shown only
    once the work has taken ``delay`` seconds, and only when the stream is a terminal (never in CI logs)."""

    def __init__(self, label: str, delay: float = 1.0, stream: Any = None):
        import sys
        import time

        self.label = label
        self.stream = stream if stream is not None else sys.stderr
        self.deadline = time.monotonic() + delay
        self.bar: Any = None

    def __call__(self, done: int, total: int, step: str) -> None:
        import time

        if self.bar is None:
            if not self.stream.isatty() or time.monotonic() < self.deadline:
                return
            self.bar = click.progressbar(
                length=total,
                label=self.label,
                file=self.stream,
                item_show_func=lambda item: item and item.rpartition("#")[2],
            )
            self.bar.__enter__()
        self.bar.length = max(total, 1)
        self.bar.update(done - self.bar.pos, step)

    def __enter__(self) -> DelayedProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.bar is not None:
            self.bar.__exit__(None, None, None)


def open_graph(ctx: click.Context):
    """The store of the current context, rebuilt first when the data changed."""
    from .graph.open import open_graph as open_built_graph

    return open_built_graph(ctx.obj["data"], ctx.obj["store"])


# ------------------------------------------------------------------------------------------ build


@cli.command(name="build")
@force_option("Rebuild even when the store is up to date.")
@click.pass_context
def build_command(ctx: click.Context, force: bool) -> None:
    """Compile the data and the ontology into the embedded store.

    The new graph is built beside the old one and swapped in atomically; a failed
    or interrupted build leaves the previous store as it was.

    Example:

        sotakg build --force
    """
    from .graph.build import build
    from .graph.store import InterruptGuard

    warn_if_no_records(ctx.obj["data"])
    with InterruptGuard().installed() as guard:
        with DelayedProgress("Building") as progress:
            report = build(ctx.obj["data"], ctx.obj["store"], force=force, guard=guard, progress=progress)
        if not report.rebuilt:
            click.echo(f"{report.store} is up to date ({report.triples} triples); nothing to do (--force rebuilds).")
            return
        counts = describe_counts(report.counts)
        click.echo(f"Built {report.store}: {counts}; {report.triples} triples in {report.seconds:.2f} s.")


# ------------------------------------------------------------------------------------------ import


@cli.group(name="import")
def import_group() -> None:
    """Bring records into the data folder from published pages.

    Example:

        sotakg import markdown distributed-optimization.md
    """


@import_group.command(name="markdown")
@click.argument("page", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@force_option("Let the page win: records say what the page says (a fact it leaves empty is removed).")
@click.option("--dry-run", is_flag=True, help="Show what would be added, changed and removed; write nothing.")
@click.pass_context
def import_markdown_command(ctx: click.Context, page: Path, force: bool, dry_run: bool) -> None:
    """Import a topic index page (the anthology's published format) into --data.

    Malformed rows are imported with a warning saying what was assumed. A record
    that exists with different content stops the import (nothing is written)
    unless --force. Every changed record is listed with the fields added,
    changed and removed. The import is all or nothing.

    Example:

    \b
        sotakg --data data import markdown --force --dry-run pages/distributed-optimization.md
    """
    from .records.importer import import_markdown

    report = import_markdown(page, ctx.obj["data"], force=force, dry_run=dry_run)
    for warning in report.warnings:
        click.echo(f"warning: {warning}", err=True)
    for change in report.changes:
        if not change.created or change.replaced:
            click.echo(change.describe())
    verb = "Would write" if dry_run else "Wrote"
    click.echo(f"{verb} {describe_counts(report.written)}; {report.unchanged} unchanged.")


# ------------------------------------------------------------------------------------------ export


@cli.group(name="export")
def export_group() -> None:
    """Write the graph, or views of it, as files.

    Example:

        sotakg export rdf -o anthology.ttl
    """


@export_group.command(name="rdf")
@click.option(
    "-f",
    "--format",
    "format_name",
    default=None,
    help="turtle, ntriples, nquads, trig, jsonld or rdfxml (default: from -o's extension).",
)
@output_option
@click.pass_context
def export_rdf_command(ctx: click.Context, format_name: str | None, output: Path | None) -> None:
    """Write the whole graph (ontology and records) as RDF.

    Writing to standard output needs --format.

    Example:

        sotakg export rdf --format turtle > anthology.ttl
    """
    from .query.formats import resolve_rdf_format, write_output
    from .views.export import export_rdf

    canonical = resolve_rdf_format(format_name, output)
    write_output(export_rdf(open_graph(ctx), canonical), output)


@export_group.command(name="index")
@click.option("--topic", "slug", default=None, help="The topic's slug, e.g. distributed-optimization.")
@click.option("--all", "all_topics", is_flag=True, help="Every topic's page and the full index (needs -o DIR).")
@click.option(
    "-o",
    "--output",
    type=OutputPath(path_type=Path),
    default=None,
    help="Write to FILE (with --topic) or into the folder DIR (with --all) instead of standard output.",
)
@click.pass_context
def export_index_command(ctx: click.Context, slug: str | None, all_topics: bool, output: Path | None) -> None:
    """Write a topic's index page in the anthology's published Markdown format.

    With --all, write every topic's page as DIR/<slug>.md and the full index they
    link back to as DIR/index.md; files whose content is unchanged are not rewritten.

    Example:

    \b
        sotakg export index --topic distributed-optimization -o distributed-optimization.md
        sotakg export index --all -o pages/
    """
    from .query.formats import write_output
    from .views.export import export_index, write_all_indexes

    if all_topics == (slug is not None):
        raise UsageProblem("give either --topic SLUG or --all")
    if all_topics:
        if output is None or str(output) == "-":
            raise UsageProblem("--all writes one file per topic: give the folder with -o DIR")
        click.echo(write_all_indexes(open_graph(ctx), output).summary(output))
        return
    if output is not None and (output.is_dir() or ctx.meta.get(OUTPUT_WRITTEN_AS_FOLDER)):
        raise UsageProblem(f"{output}/ is a folder; with --topic, -o names the file to write")
    write_output(export_index(open_graph(ctx), slug or ""), output)


# ------------------------------------------------------------------------ queries: canned, SPARQL, why


def format_option(func: Callable[..., Any]) -> Callable[..., Any]:
    """-f/--format for query results: a table, the W3C results formats, or RDF for graphs."""
    return click.option(
        "-f",
        "--format",
        "format_name",
        type=LazyChoice("sotakg.query.results", "ALL_FORMATS", case_sensitive=False, aliases="GRAPH_FORMAT_ALIASES"),
        default=None,
        help="table, csv, tsv, json or xml (W3C SPARQL results) for SELECT/ASK; "
        "turtle, ntriples, jsonld ... for CONSTRUCT/DESCRIBE (table means Turtle there). "
        "Default: the table, or what -o's extension names (.csv, .json, .ttl, ...).",
    )(func)


#: The longest time limit any command takes (a day): past that a limit means nothing and overflows timers.
MAX_SECONDS = 86400.0


class Seconds(click.FloatRange):
    """A time limit: a finite number of seconds above 0 and at most MAX_SECONDS (``inf``, ``nan``,
    ``1e308`` and 0 are usage errors, exit 2; FloatRange alone lets ``nan`` through)."""

    def __init__(self) -> None:
        super().__init__(min=0.0, max=MAX_SECONDS, min_open=True)

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        import math

        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number of seconds", param, ctx)
        return number


class SizeText(click.ParamType):
    """A size such as ``512M``: at most 24 characters, so a number of thousands of digits is a usage
    error (exit 2) before anything converts it."""

    name = "size"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        text = str(value)
        if len(text) > 24:
            self.fail(f"{text[:24]}... is not a size; write a number with a unit, e.g. 512M", param, ctx)
        return text


class Utf8Text(click.ParamType):
    """A ``NAME=VALUE`` parameter: valid UTF-8 with digits written in ASCII (an argument with other
    bytes, or with digits such as Arabic-Indic ones that a ``\\d`` pattern would match, is a usage
    error, exit 2)."""

    name = "text"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        import unicodedata

        text = str(value)
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as error:
            # Arguments that are not UTF-8 arrive as lone surrogates (Python's surrogateescape).
            byte = ord(text[error.start]) & 0xFF
            where = f"byte 0x{byte:02x} at character {error.start + 1}"
            self.fail(f"not valid UTF-8 ({where}); pass UTF-8 text", param, ctx)
        for position, char in enumerate(text, start=1):
            if char > "\x7f" and unicodedata.category(char) == "Nd":
                where = f"U+{ord(char):04X} at character {position}"
                self.fail(f"the digit {char!r} ({where}) is not ASCII; write digits as 0-9", param, ctx)
        return text


def seconds_option(help_text: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """--timeout SECONDS (30 by default), a time limit checked by ``Seconds``; ``help_text`` says what stops."""
    return click.option("--timeout", type=Seconds(), default=30.0, show_default=True, metavar="SECONDS", help=help_text)


def param_option(func: Callable[..., Any]) -> Callable[..., Any]:
    """-p/--param NAME=VALUE (repeatable): a value bound to a query's parameter; lands in ``params``."""
    return click.option(
        "-p",
        "--param",
        "params",
        multiple=True,
        type=Utf8Text(),
        metavar="NAME=VALUE",
        help="A parameter value (repeatable).",
    )(func)


#: --timeout SECONDS of a query: it is stopped (an error, never a partial answer) after that long.
timeout_option = seconds_option("Stop the query after this many seconds.")


def size_option(flag: str, default: str, help_text: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """``flag`` SIZE (``512M``, ``64K``, ``1000``: ``publish.parse_size`` reads it), ``default`` if not given."""
    return click.option(flag, type=SizeText(), default=default, show_default=True, metavar="SIZE", help=help_text)


def _remember(ctx: click.Context, param: click.Parameter, value: str | None) -> None:
    if value is not None:
        ctx.ensure_object(dict)[param.name or ""] = value


def method_option(func: Callable[..., Any]) -> Callable[..., Any]:
    """--method: how queries travel to --endpoint (SPARQL 1.1 Protocol); lands in ctx.obj["method"]."""
    return click.option(
        "--method",
        type=LazyChoice("sotakg.query.remote", "METHODS"),
        default=None,
        expose_value=False,
        callback=_remember,
        help="With --endpoint: send queries by GET, form POST or direct POST; auto (the default) uses GET "
        "for short URLs, a form POST for long ones, and tries the other when one is refused (405/415/501).",
    )(func)


def endpoint_options(func: Callable[..., Any]) -> Callable[..., Any]:
    """--endpoint URL, --graph IRI and --method: run on a remote SPARQL 1.1 query endpoint instead of
    the store. The values land in ctx.obj, where query_backend reads them."""
    func = method_option(func)
    func = click.option(
        "--graph",
        metavar="IRI",
        default=None,
        expose_value=False,
        callback=_remember,
        help="With --endpoint: query this named graph (default-graph-uri) instead of the default graph.",
    )(func)
    return click.option(
        "--endpoint",
        metavar="URL",
        default=None,
        expose_value=False,
        callback=_remember,
        help="Query this SPARQL 1.1 endpoint instead of the embedded store "
        "(credentials from SOTAKG_USER/SOTAKG_PASSWORD or SOTAKG_TOKEN).",
    )(func)


def warn_if_no_records(data_dir: Path) -> None:
    """Warn on standard error when the data folder holds no record folder and no registry: a build
    or validation of it succeeds with 0 records, which in CI would pass whatever the records say."""
    from .records.sources import FOLDER_KINDS, REGISTRY_FILE, display_path, looks_like_a_data_folder

    if data_dir.is_dir() and not looks_like_a_data_folder(data_dir):
        folders = ", ".join(f"{name}/" for name in sorted(FOLDER_KINDS))
        click.echo(
            f"warning: {display_path(data_dir)} holds no record folder ({folders}) and no {REGISTRY_FILE}: "
            f"is it the anthology's data folder? (pass it with sotakg --data DIR)",
            err=True,
        )


def echo_note(note: str) -> None:
    """A note on standard error: what the user should know of a command that goes on."""
    click.echo(f"Note: {note}.", err=True)


def warn_cleartext(endpoint: str) -> None:
    """Warn on standard error when the environment's credentials would go unencrypted to another host."""
    from .query.remote import cleartext_warning

    warning = cleartext_warning(endpoint)
    if warning:
        click.echo(f"warning: {warning}", err=True)


def query_backend(ctx: click.Context):
    """The backend queries run on: the remote endpoint of --endpoint (and --graph), else the embedded
    store, rebuilt first when the data changed. The one place that chooses."""
    endpoint, graph = ctx.obj.get("endpoint"), ctx.obj.get("graph")
    if endpoint is not None:
        from .query.remote import RemoteBackend

        backend = RemoteBackend(endpoint, graph, method=ctx.obj.get("method") or "auto")
        warn_cleartext(endpoint)
        return backend
    if graph is not None:
        raise UsageProblem("--graph needs --endpoint: the embedded store keeps everything in its default graph")
    if ctx.obj.get("method") is not None:
        raise UsageProblem("--method needs --endpoint: it says how queries travel to a remote server")
    from .query.sparql import LocalBackend
    from .records.sources import require_data_folder

    require_data_folder(ctx.obj["data"])  # at once, not at the first query (a console would go on)
    return LocalBackend(ctx.obj["store"], data_dir=ctx.obj["data"])


def table_width(output: Path | None) -> int | None:
    """Cut table cells to the terminal's width; files and pipes get whole values."""
    import os
    import shutil
    import sys

    if output is not None and str(output) != "-":
        return None
    if os.environ.get("COLUMNS", "").isdigit() or sys.stdout.isatty():
        return shutil.get_terminal_size().columns
    return None


@cli.command(name="queries")
@click.argument("name", required=False)
@click.option("--markdown", is_flag=True, help="Print the list as the README's Markdown table.")
def queries_command(name: str | None, markdown: bool) -> None:
    """List the canned queries, or show one in full.

    The list gives each query's name, parameters and summary; with NAME, its
    description, the form of each parameter and its SPARQL.

    Example:

        sotakg queries practices-citing
    """
    from .query.canned import find_canned, listing, load_canned, queries_table_markdown, query_details

    if name:
        if markdown:
            raise UsageProblem("--markdown prints the list of queries; leave out NAME, or --markdown")
        click.echo(query_details(find_canned(name)), nl=False)
    else:
        click.echo(queries_table_markdown() if markdown else listing(load_canned()), nl=False)


@cli.command(name="query")
@click.argument("name")
@param_option
@format_option
@endpoint_options
@timeout_option
@output_option
@click.pass_context
def query_command(
    ctx: click.Context,
    name: str,
    params: tuple[str, ...],
    format_name: str | None,
    timeout: float,
    output: Path | None,
) -> None:
    """Run a canned query (`sotakg queries` lists them).

    Parameter values are bound to the query's variables as RDF terms, never
    spliced into its text; a value of the wrong form is refused.

    Example:

        sotakg query practices-citing -p paper=LIT-051 --format csv
    """
    from .query.canned import find_canned, parse_assignments, run_canned
    from .query.formats import write_output
    from .query.results import format_for_output, format_result

    query = find_canned(name)
    result = run_canned(query_backend(ctx), query, parse_assignments(params), timeout)
    chosen = format_name or format_for_output(result, output)
    write_output(format_result(result, chosen, table_width(output)), output)


@cli.command(name="sparql")
@click.argument("query", required=False)
@endpoint_options
@click.option(
    "--file",
    "query_file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Read the query from FILE (- for standard input).",
)
@format_option
@timeout_option
@output_option
@click.pass_context
def sparql_command(
    ctx: click.Context,
    query: str | None,
    query_file: Path | None,
    format_name: str | None,
    timeout: float,
    output: Path | None,
) -> None:
    """Run a read-only SPARQL query.

    SELECT, ASK, CONSTRUCT or DESCRIBE, given as an argument, with --file, or on
    standard input. The ontology's prefixes (sota:, id:, topic:, dcterms:,
    skos:, prov:, cito:, rdf:, rdfs:, owl:, xsd:) are predeclared. Updates, SERVICE, LOAD and
    FROM are refused.

    Example:

    \b
        sotakg sparql 'SELECT ?p WHERE { ?p sota:status sota:Rejected }' --format tsv
    """
    from .query.formats import write_output
    from .query.results import format_for_output, format_result
    from .query.sparql import read_query_text, run_query

    text = read_query_text(query, query_file)
    result = run_query(query_backend(ctx), text, None, timeout)
    chosen = format_name or format_for_output(result, output)
    write_output(format_result(result, chosen, table_width(output)), output)


@cli.command(name="why")
@click.argument("record_id", metavar="ID")
@endpoint_options
@timeout_option
@click.pass_context
def why_command(ctx: click.Context, record_id: str, timeout: float) -> None:
    """Tell a record's provenance in prose.

    For a practice: status, versions, rejection reason and the records it names,
    papers, topic and the ADRs governing its filing. For a paper: the practices
    resting on it. For an ADR: its supersession chain.

    Example:

        sotakg why SOTA-049
    """
    from .query.why import render_provenance, why

    width = table_width(None) or 100
    click.echo(render_provenance(why(query_backend(ctx), record_id, timeout), width), nl=False)


# ------------------------------------------------------------------------------------------ validate

#: The default of --engine (``sotakg.rules.validate.DEFAULT_ENGINE``; a test holds them equal).
DEFAULT_ENGINE = "sparql"


@cli.command(name="validate")
@click.option(
    "-f",
    "--format",
    "format_name",
    type=LazyChoice("sotakg.rules.report", "FORMATS"),
    default="text",
    show_default=True,
    help="text for people, json for scripts, junit or sarif for CI dashboards, github for PR annotations.",
)
@click.option("--strict", is_flag=True, help="Fail (exit 1) on warnings too, not only on violations.")
@click.option(
    "--engine",
    type=LazyChoice("sotakg.rules.validate", "ENGINES"),
    default=DEFAULT_ENGINE,
    show_default=True,
    help="The SHACL engine that runs the shapes.",
)
@click.option(
    "--baseline",
    metavar="BASE",
    default=None,
    help="Mark findings new, unchanged or absent against BASE (a git revision, or a data folder "
    "written as a path: ./DIR or /DIR); only new findings fail.",
)
@endpoint_options
@seconds_option("With --endpoint: give up fetching the graph from the server after this long.")
@output_option
@click.pass_context
def validate_command(
    ctx: click.Context,
    format_name: str,
    strict: bool,
    engine: str,
    baseline: str | None,
    timeout: float,
    output: Path | None,
) -> None:
    """Check the data against the filing rules (shapes/) and point at the lines to fix.

    Builds the store first when the data changed. Exit 0 when there are no
    violations (warnings and infos are printed), 1 when there are (or warnings,
    with --strict), also when a data file cannot be read; 2 for unusable options
    or a missing data folder. With --endpoint, the rules run over the graph
    published there; --data still locates each finding's file and line.
    With --baseline BASE, BASE is validated too (cached by its git tree) and
    only findings BASE does not have (new) count for the exit status.

    Example:

    \b
        sotakg validate --format github --strict
        sotakg validate --baseline origin/main --format github
    """
    from .query.formats import write_output
    from .rules.report import render
    from .rules.validate import validate

    if ctx.obj.get("method") is not None and ctx.obj.get("endpoint") is None:
        raise UsageProblem("--method needs --endpoint: it says how queries travel to a remote server")
    if ctx.obj.get("endpoint") is not None:
        warn_cleartext(ctx.obj["endpoint"])
    else:
        warn_if_no_records(ctx.obj["data"])
    if baseline is not None:
        from .rules.baseline import validate_against

        report = validate_against(
            ctx.obj["data"], ctx.obj["store"], baseline, engine=engine, endpoint=ctx.obj.get("endpoint")
        )
    else:
        with DelayedProgress("Validating") as progress:
            report = validate(
                ctx.obj["data"],
                ctx.obj["store"],
                engine=engine,
                endpoint=ctx.obj.get("endpoint"),
                graph=ctx.obj.get("graph"),
                method=ctx.obj.get("method") or "auto",
                timeout=timeout,
                progress=progress,
            )
    write_output(render(report, format_name, strict=strict), output)
    if output is not None and str(output) != "-":
        click.echo(report.summary(), err=True)
    if report.failed(strict):
        ctx.exit(1)


# ------------------------------------------------------------------------------------------ diff


@cli.command(name="diff")
@click.argument("base")
@click.argument("head", required=False)
@click.option(
    "-f",
    "--format",
    "format_name",
    type=click.Choice(["text", "markdown", "json", "sparql-update"]),
    default="text",
    show_default=True,
    help="text for people, markdown for a PR comment or job summary, json for scripts, "
    "sparql-update for the update that turns BASE's graph into HEAD's.",
)
@click.option("--graph", metavar="IRI", default=None, help="With sparql-update: write into this named graph.")
@click.option("--link-base", metavar="URL", default=None, help="With markdown: prefix of the links to record files.")
@output_option
@click.pass_context
def diff_command(
    ctx: click.Context,
    base: str,
    head: str | None,
    format_name: str,
    graph: str | None,
    link_base: str | None,
    output: Path | None,
) -> None:
    """Say what a change does to the anthology: records added, removed and changed.

    BASE and HEAD are git revisions of the repository holding --data (HEAD
    defaults to the working tree), or data folders written as paths (./DIR,
    ../DIR or /DIR; a folder is never taken for a revision of its name). A
    revision is read with git itself, never checked out. Reports practices added and removed,
    status changes with the new reason, new versions, changed titles,
    summaries, reasons and citations, papers, ADR status and supersession,
    and topics. Exit 0 whatever changed; 1 when a side's records cannot be
    read; 2 for a revision that does not exist or a folder not in git.

    Example:

    \b
        sotakg diff origin/main --format markdown >> "$GITHUB_STEP_SUMMARY"
        sotakg diff HEAD~1 HEAD --format sparql-update -o change.ru
    """
    from .query.formats import write_output
    from .records.revisions import load_side
    from .views.diff import compute_diff, render_diff

    if graph is not None and format_name != "sparql-update":
        raise click.UsageError("--graph is for --format sparql-update (the named graph the update writes into)")
    if link_base is not None and format_name != "markdown":
        raise click.UsageError("--link-base is for --format markdown (the prefix of its links to record files)")
    changes = compute_diff(load_side(ctx.obj["data"], base), load_side(ctx.obj["data"], head))
    write_output(render_diff(changes, format_name, link_base=link_base, graph=graph), output)


# ------------------------------------------------------------------------------------------ console


@cli.command(name="console")
@click.option(
    "-f",
    "--format",
    "format_name",
    type=click.Choice(["table", "csv", "tsv", "json"], case_sensitive=False),
    default="table",
    show_default=True,
    help="The result format to start with (.format changes it).",
)
@timeout_option
@click.option(
    "--max-rows",
    type=click.IntRange(min=1),
    default=10_000,
    show_default=True,
    metavar="N",
    help="Show at most N rows (or triples) of a result.",
)
@endpoint_options
@click.pass_context
def console_command(ctx: click.Context, format_name: str, timeout: float, max_rows: int) -> None:
    """Explore the graph in an interactive SPARQL shell.

    Queries end with ; or a blank line; Tab completes keywords, prefixes,
    prefixed names and record ids; history is kept across sessions
    ($SOTAKG_HISTORY, else $XDG_STATE_HOME/sotakg/history). Dot-commands:
    .help, .prefixes, .queries, .run NAME name=value, .why ID, .format,
    .timing, .output FILE, .quit. Queries follow the rules of `sotakg sparql`.
    With piped input the statements run without prompts, and the exit status
    is 1 if any failed.

    Example:

        sotakg console < questions.rq
    """
    from .console import run_console

    ctx.exit(run_console(query_backend(ctx), timeout=timeout, max_rows=max_rows, format_name=format_name.lower()))


# ------------------------------------------------------------------------------- views, diagrams, site


@cli.command(name="views")
@click.argument("name", required=False)
def views_command(name: str | None) -> None:
    """List the graph views that `sotakg export view` draws, or show one in full.

    Each view is a file queries/views/NAME.rq with the same header as a canned
    query; the list gives its name, parameters and summary.

    Example:

    \b
        sotakg views
        sotakg views topic
    """
    from .query.canned import listing
    from .views.named import load_views, view_details

    click.echo(listing(load_views()) if name is None else view_details(name), nl=False)


@export_group.command(name="view")
@click.argument("name")
@param_option
@click.option(
    "-f",
    "--format",
    "format_name",
    default=None,
    help="ttl, nt, jsonld (RDF), mermaid, dot or svg (default: from -o's extension: .ttl .nt .jsonld .mmd .dot .svg).",
)
@timeout_option
@output_option
@endpoint_options
@click.pass_context
def export_view_command(
    ctx: click.Context,
    name: str,
    params: tuple[str, ...],
    format_name: str | None,
    timeout: float,
    output: Path | None,
) -> None:
    """Write a graph view (`sotakg views` lists them) as RDF or as a diagram.

    RDF formats give the view's triples; mermaid (renders on GitHub) and dot
    (Graphviz) draw them with ids and short titles, node styles by kind and
    status and edge labels by relation; svg needs Graphviz's dot installed.
    Writing to standard output needs --format.

    Example:

    \b
        sotakg export view rejections --format mermaid
        sotakg export view topic -p topic=distributed-optimization -o topic.svg
    """
    from .query.canned import parse_assignments
    from .query.formats import write_output
    from .views.named import export_view, resolve_view_format

    canonical = resolve_view_format(format_name, output)
    written = export_view(query_backend(ctx), name, parse_assignments(params), canonical, timeout, echo_note)
    write_output(written, output)


@export_group.command(name="site")
@click.argument("folder", metavar="DIR", type=OutputPath(file_okay=False, path_type=Path))
@click.option("--mermaid", is_flag=True, help="Show diagrams as Mermaid source even when Graphviz is installed.")
@timeout_option
@endpoint_options
@click.pass_context
def export_site_command(ctx: click.Context, folder: Path, mermaid: bool, timeout: float) -> None:
    """Write the anthology as a static HTML site into DIR.

    An index, a page per topic and per view, and a page per practice, paper and
    ADR with its provenance; diagrams are inline SVG (Graphviz) or, without
    Graphviz, Mermaid source. No external assets or scripts: it works offline.
    Unchanged pages are not rewritten; pages of records that are gone are removed.

    Example:

        sotakg export site public/ && python -m http.server -d public
    """
    from .views.site import build_site

    report = build_site(query_backend(ctx), folder, graphviz=False if mermaid else None, timeout=timeout)
    for note in report.notes:
        echo_note(note)
    click.echo(report.summary(folder))


# ------------------------------------------------------------------ sharing: serve, publish (remote: --endpoint)


@cli.command(name="serve")
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    callback=lambda ctx, param, value: _listen_address(value),
    help="Address to listen on (loopback by default; 0.0.0.0 for every interface).",
)
@click.option("--port", type=click.IntRange(1, 65535), default=7878, show_default=True, help="Port to listen on.")
@click.option(
    "--timeout",
    type=click.IntRange(min=1, max=int(MAX_SECONDS)),
    default=30,
    show_default=True,
    metavar="SECONDS",
    help="Stop each query after this many whole seconds.",
)
@click.option(
    "--get",
    "get_path",
    metavar="PATH",
    default=None,
    help="Answer one GET of PATH on a free loopback port, print the body and exit (0 on HTTP 200).",
)
@size_option("--max-request-bytes", "1M", "Refuse requests larger than this (413).")
@size_option("--max-result-bytes", "64M", "Cut answers off (truncated, logged) past this size.")
@click.option(
    "--max-concurrent",
    type=click.IntRange(min=1),
    default=None,
    metavar="N",
    help="Run at most N queries at once; more wait briefly, then get 503 (default: the number of cores).",
)
@click.option(
    "--max-memory",
    type=SizeText(),
    default=None,
    metavar="SIZE",
    help="Restart the query engine when it holds more memory than this; the queries it was answering "
    "get 503 (default: half the machine's memory).",
)
@click.pass_context
def serve_command(
    ctx: click.Context,
    host: str,
    port: int,
    timeout: int,
    get_path: str | None,
    max_request_bytes: str,
    max_result_bytes: str,
    max_concurrent: int | None,
    max_memory: str | None,
) -> None:
    """Serve the graph read-only over the SPARQL 1.1 Protocol.

    Runs the Oxigraph server (the oxigraph package, installed with sotakg) on the
    store, built first if stale, behind a guard: a query page at /, the endpoint at /query.
    Updates and Graph Store writes are refused (403); SERVICE, LOAD, FROM and
    deep nesting too (400). It serves the build it started with: restart it
    after `sotakg build`. Ctrl-C stops it.

    Example:

    \b
        sotakg serve --port 7878
        sotakg serve --get '/query?query=ASK%7B%7D'
    """
    from .server import serve
    from .server.publish import parse_size

    request_cap = parse_size(max_request_bytes, "--max-request-bytes")
    result_cap = parse_size(max_result_bytes, "--max-result-bytes")
    memory_cap = parse_size(max_memory, "--max-memory") if max_memory is not None else None
    if get_path is not None:
        answer = serve.get_once(
            ctx.obj["data"],
            ctx.obj["store"],
            get_path,
            timeout,
            max_request_bytes=request_cap,
            max_result_bytes=result_cap,
        )
        if answer.status != 200:
            raise click.ClickException(f"GET {get_path}: HTTP {answer.status} {answer.reason}: {answer.excerpt()}")
        click.echo(answer.body, nl=False)
        return
    serve.serve(
        ctx.obj["data"],
        ctx.obj["store"],
        host,
        port,
        timeout,
        echo=lambda text: click.echo(text, nl=False),
        warn=lambda text: click.echo(text, err=True),
        max_request_bytes=request_cap,
        max_result_bytes=result_cap,
        max_concurrent=max_concurrent,
        max_memory=memory_cap,
    )
    click.echo("Stopped.")


@cli.command(name="publish")
@click.option("--endpoint", required=True, metavar="URL", help="The server's Graph Store endpoint (e.g. .../store).")
@click.option("--graph", metavar="IRI", default=None, help="Replace this named graph (default: the default graph).")
@seconds_option("Give up if the server has not answered after this long.")
@size_option("--max-bytes", "512M", "Refuse to send more than this.")
@click.option(
    "--since",
    metavar="BASE",
    default=None,
    help="Send only the change since BASE (a git revision, or a data folder as ./DIR) as one SPARQL Update, "
    "if the server holds BASE's graph; else publish it all.",
)
@click.option(
    "--update-endpoint",
    metavar="URL",
    default=None,
    help="The server's SPARQL Update endpoint, for the swap and for --since (default: the one beside "
    "--endpoint for Oxigraph /store, Virtuoso /sparql-graph-crud[-auth] and Fuseki /DATASET/data).",
)
@click.option(
    "--swap/--no-swap",
    default=True,
    show_default=True,
    help="Stage the graph and swap it in with one SPARQL MOVE, or PUT it onto the target directly.",
)
@click.pass_context
def publish_command(
    ctx: click.Context,
    endpoint: str,
    graph: str | None,
    timeout: float,
    max_bytes: str,
    since: str | None,
    update_endpoint: str | None,
    swap: bool,
) -> None:
    """Replace a graph on a SPARQL server with this one, so readers never see half of it.

    The graph is streamed as N-Triples (SPARQL 1.1 Graph Store Protocol) into a
    staging graph, then swapped onto the target with one SPARQL Update (MOVE);
    without an update endpoint, it goes in one PUT onto the target. Credentials
    come from the environment only: SOTAKG_USER and SOTAKG_PASSWORD (Basic or
    Digest, as the server asks), or SOTAKG_TOKEN (bearer). With --since BASE,
    only the change since BASE is sent (one SPARQL Update), after checking that
    the server holds BASE's graph; otherwise the whole graph is published.

    Example:

    \b
        SOTAKG_TOKEN=... sotakg publish --endpoint http://127.0.0.1:7878/store \\
            --graph https://w3id.org/sotakg
        sotakg publish --endpoint http://127.0.0.1:7878/store --since HEAD~1
    """
    from .server.publish import parse_size, publish

    limit = parse_size(max_bytes)
    warn_cleartext(endpoint)
    with _upload_progress() as progress:
        if since is not None:
            from .server.publish_since import publish_since

            changed = publish_since(
                ctx.obj["data"], ctx.obj["store"], endpoint, since, graph, update_endpoint, timeout, limit,
                swap=swap, progress=progress,
            )  # fmt: skip
            click.echo(changed.describe())
            return
        report = publish(
            ctx.obj["data"],
            ctx.obj["store"],
            endpoint,
            graph,
            timeout,
            limit,
            update_endpoint=update_endpoint,
            swap=swap,
            progress=progress,
        )
    click.echo(report.describe())


@contextmanager
def _upload_progress() -> Iterator[Callable[[int, int], None] | None]:
    """A progress callback that shows a bar on a terminal once an upload has taken a second; none
    when standard error is not a terminal (CI logs)."""
    import sys
    import time

    if not sys.stderr.isatty():
        yield None
        return
    started = time.monotonic()
    bar: Any = None
    shown = 0

    def progress(sent: int, total: int) -> None:
        nonlocal bar, shown
        if bar is None:
            if time.monotonic() - started < 1.0:
                return
            bar = click.progressbar(length=total, label="Publishing", file=sys.stderr)
            bar.__enter__()
        bar.update(sent - shown)
        shown = sent

    try:
        yield progress
    finally:
        if bar is not None:
            bar.__exit__(None, None, None)
