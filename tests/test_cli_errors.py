"""The command line's promise on bad input of any kind (options, paths, standard streams, the
environment, a damaged store): a clear message naming what is wrong, a non-zero exit (1 for errors,
2 for usage errors), nothing lost, and never a Python traceback.

Each test failed on the code before its fix, for the reason its docstring gives (an adversarial
review found them)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from sotakg.cli import cli

from .conftest import subprocess_env

STORE = Path(".sotakg") / "store"


def _sotakg(
    args: list[str],
    cwd: Path,
    *,
    stdin: bytes | None = b"",
    env: dict[str, str] | None = None,
    timeout: float = 20,
    **kwargs,
) -> subprocess.CompletedProcess:
    """``python -m sotakg ARGS`` as a real process (stdout and stderr captured unless given)."""
    environment = subprocess_env()
    environment.update(env or {})
    kwargs.setdefault("stdout", subprocess.PIPE)
    kwargs.setdefault("stderr", subprocess.PIPE)
    return subprocess.run(
        [sys.executable, "-m", "sotakg", *args],
        input=stdin,
        cwd=cwd,
        env=environment,
        timeout=timeout,
        **kwargs,
    )


def _no_traceback(result) -> None:
    """A CliRunner result that ended by click's own exit, not by an exception escaping the command."""
    assert result.exception is None or isinstance(result.exception, SystemExit), (
        f"{type(result.exception).__name__}: {result.exception}"
    )


def _damage(workdir: Path) -> None:
    """Garble the current generation's Oxigraph database (its CURRENT file), as a disk error would."""
    current = (workdir / STORE).resolve() / "oxigraph" / "CURRENT"
    assert current.is_file()
    current.write_bytes(b"garbage")


# ------------------------------------------------------------------------------------------ --store


@pytest.mark.parametrize("store", [".", ""])
def test_build_into_a_store_named_dot_is_a_clear_error(runner, workdir: Path, store: str) -> None:
    """The bug: `sotakg --store . build` (or `--store ''`, e.g. an unset variable) dies with a
    traceback, `ValueError: PosixPath('.') has an empty name`, from StoreLayout.lock_path
    (Path.with_name on a path without a name); every reading command refuses the same value
    cleanly ("exists but is not a sotakg store").
    The rule: a --store value that cannot be a store is a clear error naming --store (exit 1 or 2),
    never a traceback."""
    result = runner.invoke(cli, ["--store", store, "build"])
    _no_traceback(result)
    assert result.exit_code in (1, 2)
    assert "store" in result.output


def test_store_path_not_utf8_names_the_store(runner, workdir: Path) -> None:
    """The bug: `sotakg --store $'st\\xff' build` says only `Error: cannot use: The DB path is not
    valid UTF-8`: pyoxigraph's OSError has no filename, so cli._translated prints "cannot use"
    followed by nothing; the user is not told which option or path is wrong.
    The rule: a message names the file or option it is about."""
    result = runner.invoke(cli, ["--store", os.fsdecode(b"st\xff"), "build"])
    _no_traceback(result)
    assert result.exit_code in (1, 2)
    assert "st\\xff" in result.output or "--store" in result.output, result.output


# ------------------------------------------------------------------------------------------ a damaged store


@pytest.mark.parametrize(
    "args",
    [
        ["export", "rdf", "-f", "nt"],
        ["export", "index", "--topic", "distributed-optimization"],
        ["validate"],
        ["query", "adrs", "-f", "csv"],
    ],
    ids=["export-rdf", "export-index", "validate", "query"],
)
def test_a_damaged_store_is_reported_with_its_path(runner, workdir: Path, args: list[str]) -> None:
    """The bug: when the store's database is damaged (its CURRENT file garbled), `export rdf`,
    `export index` and `validate` die with a traceback, `RuntimeError: Corruption: CURRENT file
    does not end with newline`: graph/store.py:open_read_only and rules/validate.py:_open_current
    catch only OSError from pyoxigraph's Store.read_only, which raises RuntimeError for corruption.
    `query` says `the query failed: RuntimeError: Corruption: ...` (query/sparql.py:_execute), naming
    neither the store nor the fix, and `sotakg build` calls the store "up to date" anyway.
    The rule: a damaged store gets a message naming it (.sotakg/store) and the way out
    (`sotakg build --force`), exit 1, never a traceback or a Python exception's class name."""
    assert runner.invoke(cli, ["build"]).exit_code == 0
    _damage(workdir)
    result = runner.invoke(cli, args)
    _no_traceback(result)
    assert result.exit_code == 1
    assert ".sotakg/store" in result.output, result.output
    assert "RuntimeError" not in result.output, result.output


# ------------------------------------------------------------------------------------------ standard output


@pytest.mark.parametrize(
    "args",
    [["query", "adrs"], ["export", "rdf", "-f", "nt"], ["validate"], ["why", "SOTA-049"], ["diff", "./data"]],
    ids=["query", "export-rdf", "validate", "why", "diff"],
)
def test_closed_standard_output_is_not_a_traceback(built_store, args: list[str]) -> None:
    """The bug: run with standard output closed (`sotakg query adrs >&-`, as a daemon or a careless
    cron job does), these commands die with a traceback, `AttributeError: 'NoneType' object has no
    attribute 'isatty'` / `'buffer'` / `'write'`: sys.stdout is None and cli.table_width,
    query/formats.py:write_output and the validate/diff writers use it unchecked.
    The rule: never a traceback; an output that cannot be written is an error saying so (exit 1)."""
    data, store = built_store
    result = _sotakg(
        ["--data", str(data), "--store", str(store), *args],
        data.parent,
        stdout=None,
        preexec_fn=lambda: os.close(1),
    )
    stderr = result.stderr.decode("utf-8", "replace")
    assert "Traceback" not in stderr, stderr[-800:]
    assert result.returncode == 1


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
@pytest.mark.parametrize("args", [["--help"], ["--version"]])
def test_top_level_help_on_a_full_disk_is_not_a_traceback(tmp_path: Path, args: list[str]) -> None:
    """The bug: `sotakg --help > file` (or `--version`) on a full disk dies with a traceback,
    `OSError: [Errno 28] No space left on device`: the top-level group's eager options print while
    click parses the arguments, outside SotakgGroup.invoke's translation (`sotakg export --help`
    on the same disk gets a one-line error).
    The rule: never a traceback; exit 1 with a message."""
    with open("/dev/full", "wb") as full:
        result = _sotakg(args, tmp_path, stdout=full)
    stderr = result.stderr.decode("utf-8", "replace")
    assert "Traceback" not in stderr, stderr[-800:]
    assert result.returncode == 1


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
def test_full_standard_output_message_names_it(built_store) -> None:
    """The bug: `sotakg export rdf -f nt > out.nt` on a full disk says only `Error: cannot use: No
    space left on device`: cli._translated builds "cannot use{where}" from the OSError's filename,
    which standard output does not have, so the message names nothing.
    The rule: a message names what it is about (here: standard output)."""
    data, store = built_store
    with open("/dev/full", "wb") as full:
        result = _sotakg(
            ["--data", str(data), "--store", str(store), "export", "rdf", "-f", "nt"], data.parent, stdout=full
        )
    stderr = result.stderr.decode("utf-8", "replace")
    assert result.returncode == 1
    assert "standard output" in stderr, stderr


# ------------------------------------------------------------------------------------------ sparql input


def test_sparql_file_that_is_a_fifo_does_not_hang(built_store, tmp_path: Path) -> None:
    """The bug: `sotakg sparql --file q.rq` where q.rq is a FIFO (or /dev/zero, /dev/stdin of a
    terminal ...) waits forever: query/sparql.py:read_query_text calls Path.read_text with no check
    that the file is a regular one and no size bound (`import markdown` and the site manifest
    refuse FIFOs and devices: "sotakg reads only files").
    The rule: bad input gets a clear message (exit 2), never a hang."""
    data, store = built_store
    fifo = tmp_path / "q.rq"
    os.mkfifo(fifo)
    try:
        result = _sotakg(
            ["--data", str(data), "--store", str(store), "sparql", "--file", str(fifo)], tmp_path, timeout=8
        )
    except subprocess.TimeoutExpired:
        pytest.fail("sotakg sparql --file FIFO was still waiting after 8 s")
    assert result.returncode == 2
    assert "q.rq" in result.stderr.decode("utf-8", "replace")


@pytest.mark.parametrize(
    ("command", "encoding"),
    [
        (["sparql"], None),
        (["sparql"], "utf-8:strict"),
        (["sparql", "--file", "-"], "utf-8:strict"),
        (["console"], "utf-8:strict"),
    ],
    ids=["sparql-default-locale", "sparql-strict-locale", "sparql-file-dash", "console-strict-locale"],
)
def test_query_on_stdin_that_is_not_utf8(built_store, tmp_path: Path, command: list[str], encoding) -> None:
    """The bug: a query piped in that is not UTF-8 (`printf '\\xff ASK{}' | sotakg sparql`) gives, in a
    C.UTF-8 locale, exit 1 and `the query failed: UnicodeEncodeError: 'utf-8' codec can't encode
    characters ...: surrogates not allowed`; where standard input decodes strictly (en_US.UTF-8,
    here PYTHONIOENCODING=utf-8:strict) a traceback, `UnicodeDecodeError`. The same bytes in
    `--file q.rq` get exit 2 and "cannot read the query from q.rq: 'utf-8' codec can't decode".
    query/sparql.py:read_query_text and the console read sys.stdin as text unchecked.
    The rule: input that is not UTF-8 is a usage error (exit 2) saying so, never a traceback."""
    data, store = built_store
    env = {"PYTHONIOENCODING": encoding} if encoding else {}
    stdin = b"\xff\xfe ASK {}" + (b";\n" if command == ["console"] else b"")
    result = _sotakg(["--data", str(data), "--store", str(store), *command], tmp_path, stdin=stdin, env=env)
    stderr = result.stderr.decode("utf-8", "replace")
    assert "Traceback" not in stderr, stderr[-800:]
    assert "UnicodeEncodeError" not in stderr and "UnicodeDecodeError" not in stderr, stderr
    assert "UTF-8" in stderr, stderr
    if command != ["console"]:  # the console reports a failed statement with exit 1, by design
        assert result.returncode == 2


# ------------------------------------------------------------------------------------------ --endpoint URLs


@pytest.mark.parametrize(
    "args",
    [
        ["sparql", "ASK {}", "--endpoint", "http://127.0.0.1:99999/query"],
        ["why", "SOTA-049", "--endpoint", "http://127.0.0.1:99999/query"],
        ["validate", "--endpoint", "http://127.0.0.1:99999/query"],
        ["sparql", "ASK {}", "--endpoint", "http://[::1/query"],
        ["console", "--endpoint", "http://[::1/query"],
        ["publish", "--endpoint", "http://[::1/store"],
        ["publish", "--endpoint", "http://127.0.0.1:99999/store", "--timeout", "2"],
        ["sparql", "ASK {}", "--endpoint", "http://127.0.0.1:abc/query"],
    ],
    ids=[
        "sparql-port-99999",
        "why-port-99999",
        "validate-port-99999",
        "sparql-bad-ipv6",
        "console-bad-ipv6",
        "publish-bad-ipv6",
        "publish-port-99999",
        "sparql-port-abc",
    ],
)
def test_malformed_endpoint_url_is_a_usage_error(runner, built_store, args: list[str]) -> None:
    """The bug: `--endpoint http://127.0.0.1:99999/query` dies with a traceback, `ValueError: Port
    out of range 0-65535` (query/remote.py:_connection_problem reads parts.port), and
    `--endpoint 'http://[::1/query'` with `ValueError: Invalid IPv6 URL` (query/remote.py:
    check_endpoint and cleartext_warning call urlsplit unguarded); `http://127.0.0.1:abc/` is exit 1
    "did not answer in HTTP (InvalidURL: nonnumeric port: 'abc')" after trying to connect.
    check_endpoint validates scheme and host but never the port or the brackets.
    The rule: a malformed --endpoint is a usage error (exit 2) naming --endpoint, never a traceback."""
    data, store = built_store
    result = runner.invoke(cli, ["--data", str(data), "--store", str(store), *args], input="")
    _no_traceback(result)
    assert result.exit_code == 2, result.output
    assert "--endpoint" in result.output


# ------------------------------------------------------------------------------------------ option values


def test_serve_get_refuses_an_invalid_max_memory(runner, built_store) -> None:
    """The bug: `sotakg serve --get '/query?query=ASK%7B%7D' --max-memory garbage` answers and exits
    0: cli.serve_command parses --max-memory (publish.parse_size) only on the path that serves, after
    the --get branch has returned; `--max-memory 0` and `x` slip through the same way, while
    `sotakg serve --max-memory x` is exit 2.
    The rule: an option value out of range or malformed is a usage error (exit 2) whatever other
    options are given."""
    data, store = built_store
    result = runner.invoke(
        cli,
        [
            "--data",
            str(data),
            "--store",
            str(store),
            "serve",
            "--get",
            "/query?query=ASK%7B%7D",
            "--max-memory",
            "garbage",
        ],
    )
    _no_traceback(result)
    assert result.exit_code == 2, result.output
    assert "--max-memory" in result.output


def test_max_file_bytes_with_a_unit_is_not_silently_ignored(runner, workdir: Path, monkeypatch) -> None:
    """The bug: `SOTAKG_MAX_FILE_BYTES=1K sotakg build` builds as if the variable were unset:
    records/sources.py:bytes_from_environment falls back to the 10 MB default for anything but
    ASCII digits, without a word, though the CLI's own sizes are written 512M, 64K (and the
    refusal message says "raise it with SOTAKG_MAX_FILE_BYTES", so a user writing 20M is ignored).
    The rule: an environment variable with an odd value gets a clear message (or is honoured);
    here a 1K cap must stop a 2 KB record file either way, so the build must not succeed."""
    record = workdir / "data" / "practices" / "SOTA-049.yaml"
    record.write_text(record.read_text(encoding="utf-8") + "# padding\n" * 250, encoding="utf-8")
    assert record.stat().st_size > 2048
    monkeypatch.setenv("SOTAKG_MAX_FILE_BYTES", "1K")
    result = runner.invoke(cli, ["build"])
    _no_traceback(result)
    assert result.exit_code != 0, result.output
    assert "SOTAKG_MAX_FILE_BYTES" in result.output


# ------------------------------------------------------------------------------------------ formats


@pytest.mark.parametrize(
    ("args", "name", "start"),
    [
        (["query", "adrs"], "adrs.csv", "adr,status"),
        (["sparql", "CONSTRUCT { ?s ?p ?o } WHERE { ?s ?p ?o } LIMIT 1"], "graph.nt", "<"),
    ],
    ids=["query-csv", "sparql-nt"],
)
def test_result_format_follows_the_output_extension(
    runner, built_store, tmp_path: Path, args: list[str], name: str, start: str
) -> None:
    """The bug: `sotakg query adrs -o adrs.csv` writes the aligned text table into adrs.csv, and
    `sotakg sparql 'CONSTRUCT ...' -o graph.nt` writes Turtle into graph.nt, exit 0: the results'
    -f/--format defaults to `table` and cli.format_option never looks at -o's extension, while
    `export rdf`/`export view` take the format from it (query/formats.py:resolve_rdf_format).
    The rule: formats are chosen by name or by file extension; a file named .csv gets CSV (or the
    command refuses the mismatch), never a table under a CSV name."""
    data, store = built_store
    output = tmp_path / name
    result = runner.invoke(cli, ["--data", str(data), "--store", str(store), *args, "-o", str(output)])
    _no_traceback(result)
    if result.exit_code == 0:
        assert output.read_text(encoding="utf-8").startswith(start), output.read_text(encoding="utf-8")[:200]
    else:
        assert result.exit_code == 2


# ------------------------------------------------------------------------------------------ -o through a link


def test_output_through_a_link_to_a_device_keeps_the_link(runner, built_store, tmp_path: Path) -> None:
    """The bug: `sotakg export rdf -o out.nt` where out.nt is a link to a device (/dev/null here;
    `-o /dev/stdout` is the everyday case, a link to /proc/self/fd/1) exits 0 having replaced the
    link with a 113 KB regular file: records/sources.py:atomic_write_text refuses a device or FIFO
    named directly ("not a regular file ... write to a file or to '-'") but renames its temporary
    file over a link without looking at what the link leads to. Run as root (CI containers),
    `sotakg export rdf -o /dev/stdout` replaces the system's /dev/stdout with a file; as anyone
    else it fails with "Permission denied" on /dev.
    The rule: nothing of the user's is lost: an -o that leads to a device is written through or
    refused with a message (exit 1 or 2), never replaced."""
    data, store = built_store
    link = tmp_path / "out.nt"
    link.symlink_to("/dev/null")
    result = runner.invoke(cli, ["--data", str(data), "--store", str(store), "export", "rdf", "-o", str(link)])
    _no_traceback(result)
    if result.exit_code == 0:
        assert link.is_symlink(), "the link out.nt -> /dev/null was replaced by a regular file"
    else:
        assert result.exit_code in (1, 2)
        assert link.is_symlink()


def test_baseline_that_is_a_file_is_not_called_missing(runner, workdir: Path) -> None:
    """The bug: `sotakg validate --baseline ./notes.txt` (and `sotakg diff ./notes.txt`), where
    notes.txt is a regular file, says "data folder notes.txt does not exist; pass --data DIR or create
    it with 'sotakg import markdown PAGE'": records/schema.py:load_anthology (and
    records/revisions.py:repository_of) test `is_dir()` and report every failure as missing, so the
    user is told to create what is already there.
    The rule: the message says what is wrong (here: notes.txt is a file, not a folder)."""
    (workdir / "notes.txt").write_text("not a folder\n", encoding="utf-8")
    result = runner.invoke(cli, ["validate", "--baseline", "./notes.txt"])
    _no_traceback(result)
    assert result.exit_code == 2
    assert "does not exist" not in result.output, result.output
    assert "notes.txt" in result.output


def test_output_with_a_trailing_slash_is_not_written_as_a_file(runner, built_store, tmp_path: Path) -> None:
    """The bug: `sotakg export index --topic distributed-optimization -o pages/` (a folder that does not
    exist yet, written as one) exits 0 having created a regular file named `pages`: click's Path
    conversion drops the slash, and cli.export_index_command checks `output.is_dir()` only for a
    folder that already exists. The next `sotakg export index --all -o pages/` then fails with
    "pages exists and is not a folder". The same holds for `export rdf -o out.ttl/` and
    `query -o res.csv/`; the system itself refuses to open "pages/" as a file (EISDIR).
    The rule: a path written as a folder where a file is expected is a usage error (exit 2) that
    says so, and nothing is created."""
    data, store = built_store
    target = tmp_path / "pages"
    result = runner.invoke(
        cli,
        [
            "--data", str(data), "--store", str(store),
            "export", "index", "--topic", "distributed-optimization", "-o", f"{target}/",
        ],
    )  # fmt: skip
    _no_traceback(result)
    assert not target.is_file(), "a file named pages was written for -o pages/"
    assert result.exit_code == 2


@pytest.mark.parametrize(
    "args",
    [
        ["export", "site", ""],
        ["export", "index", "--all", "-o", ""],
        ["export", "rdf", "-o", ""],
        ["validate", "-o", ""],
        ["serve", "--host", ""],
    ],
    ids=["export-site", "export-index", "export-rdf", "validate", "serve-host"],
)
def test_an_empty_path_or_address_is_a_usage_error(runner, workdir: Path, args: list[str]) -> None:
    """The bug: an empty value (an unset variable: `sotakg export site "$OUT"`) was the current
    folder for a path, where the site and the index pages were written, and every interface for
    `serve --host`, which put the server on the network with a warning.
    The rule: an empty path or address is a usage error (exit 2) saying so; nothing is written."""
    before = sorted(path.name for path in workdir.iterdir())
    result = runner.invoke(cli, args)
    _no_traceback(result)
    assert result.exit_code == 2, result.output
    assert "an empty" in result.output
    assert sorted(path.name for path in workdir.iterdir()) == before


def test_queries_markdown_with_a_name_is_a_usage_error(runner) -> None:
    """The bug: `sotakg queries adrs --markdown` printed the query's details and dropped --markdown
    without a word. The rule: an option that cannot apply is a usage error, not ignored."""
    result = runner.invoke(cli, ["queries", "adrs", "--markdown"])
    _no_traceback(result)
    assert result.exit_code == 2
    assert "--markdown prints the list of queries" in result.output


def test_a_store_path_that_is_no_store_is_refused_before_its_lock_is_made(runner, workdir: Path) -> None:
    """The bug: `sotakg --store data build` (the data folder named as the store) was refused, but
    left a `data.lock` beside it. The rule: a refused command leaves nothing behind."""
    result = runner.invoke(cli, ["--store", "data", "build"])
    assert result.exit_code == 1
    assert "data exists but is not a sotakg store" in result.output
    assert not (workdir / "data.lock").exists()


def test_an_interrupt_while_the_command_starts_is_aborted_not_a_traceback(monkeypatch, capsys) -> None:
    """The bug: a Ctrl-C within the first tens of milliseconds (while the command's modules were
    imported, before click could catch it) printed a KeyboardInterrupt traceback.
    The rule: the `sotakg` entry point imports the command line inside its own handler: an interrupt
    there is "Aborted!" and exit 130, as a shell reports one."""
    import types

    from sotakg import __main__ as entry

    class Interrupting(types.ModuleType):
        def __getattr__(self, name: str):
            raise KeyboardInterrupt

    monkeypatch.setitem(sys.modules, "sotakg.cli", Interrupting("sotakg.cli"))
    with pytest.raises(SystemExit) as exited:
        entry.main()
    assert exited.value.code == 130
    assert capsys.readouterr().err == "Aborted!\n"


def test_an_interrupted_command_exits_130_as_one_interrupted_at_start(tmp_path: Path) -> None:
    """Ctrl-C during a command printed "Aborted!" and exited 1 (click's code) while Ctrl-C during the
    start exited 130. The rule: one code for an interrupt, 130, as a shell reports one."""
    import signal
    import time

    (tmp_path / "data").mkdir()
    done = subprocess.Popen(
        [sys.executable, "-m", "sotakg", "console"],
        cwd=tmp_path,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=subprocess_env(),
    )
    # the console reads its statements from standard input, which stays open: it waits there
    try:
        time.sleep(1.5)
        done.send_signal(signal.SIGINT)
        _out, err = done.communicate(timeout=20)
    finally:
        if done.poll() is None:
            done.kill()
            done.wait()
    assert done.returncode == 130, err
    assert err.decode().endswith("Aborted!\n") and b"Traceback" not in err


# ------------------------------------------------------------------------------------------ the newcomer's mistakes


@pytest.mark.parametrize(
    ("args", "shown"),
    [
        (["build", "--data", "data"], "'sotakg --data DIR build ...'"),
        (["validate", "--store=x/store"], "'sotakg --store PATH validate ...'"),
        (["export", "index", "--data", "d", "--all", "-o", "pages"], "'sotakg --data DIR export index ...'"),
    ],
)
def test_an_option_of_sotakg_itself_after_the_command_says_where_it_goes(runner, tmp_path: Path, args, shown):
    """`sotakg build --data DIR` said only "No such option '--data'": --data and --store are options of
    sotakg itself. The rule: a usage error (exit 2) that shows the command line it takes."""
    result = runner.invoke(cli, args)
    _no_traceback(result)
    assert result.exit_code == 2
    assert f"is an option of sotakg itself: give it before the command, as in {shown}" in result.output


@pytest.mark.parametrize("args", [["build"], ["validate"], ["query", "adrs"], ["console"]])
def test_a_command_run_where_there_is_no_data_folder_makes_nothing(tmp_path: Path, args) -> None:
    """`sotakg build` in a folder without data/ exited 2 but left `.sotakg/store.lock` behind; the
    console went on to its prompt (piped: exit 0 with no input) and repeated the error at every
    query. The rule: exit 2 at once, naming the missing folder, and nothing written."""
    done = _sotakg(args, tmp_path, stdin=b"ASK {}\n")
    assert done.returncode == 2, done.stderr
    assert b"data folder data does not exist; pass --data DIR" in done.stderr
    assert b"Traceback" not in done.stderr
    assert list(tmp_path.iterdir()) == []


def test_pages_into_a_file_are_a_usage_error_before_any_page_is_made(runner, built_store, tmp_path: Path) -> None:
    """`export index --all -o README.md` (a file) exited 1 while `export site README.md` exited 2, and
    the site checked its folder only after making every page. The rule: exit 2 for both, the file
    left as it was."""
    data, store = built_store
    target = tmp_path / "README.md"
    target.write_text("mine\n", encoding="utf-8")
    result = runner.invoke(
        cli, ["--data", str(data), "--store", str(store), "export", "index", "--all", "-o", str(target)]
    )
    _no_traceback(result)
    assert result.exit_code == 2
    assert "exists and is not a folder; name a folder to write the files into" in result.output
    assert target.read_text(encoding="utf-8") == "mine\n"


def test_the_rdf_format_names_of_export_rdf_are_taken_by_sparql_and_query_too(runner, built_store) -> None:
    """`export rdf -f ttl` worked, `sparql -f ttl` was refused: one word meant a format in one command
    only. The rule: ttl, nt, nq, json-ld, ... name the same format everywhere (json and xml stay the
    SPARQL results formats of query answers)."""
    data, store = built_store
    construct = "CONSTRUCT { ?s a ?o } WHERE { ?s a ?o } ORDER BY ?s LIMIT 3"
    base = ["--data", str(data), "--store", str(store), "sparql", construct]
    for alias, canonical in (("ttl", "turtle"), ("nt", "ntriples"), ("n-triples", "ntriples"), ("json-ld", "jsonld")):
        aliased, named = runner.invoke(cli, [*base, "-f", alias]), runner.invoke(cli, [*base, "-f", canonical])
        assert aliased.exit_code == 0 and aliased.stdout == named.stdout and aliased.stdout, aliased.output
    select = runner.invoke(cli, [*base[:4], "sparql", "SELECT * WHERE { ?s ?p ?o } LIMIT 1", "-f", "xml"])
    assert select.exit_code == 0 and "<sparql" in select.stdout


@pytest.mark.parametrize(
    ("query", "name", "said"),
    [
        ("SELECT * WHERE { ?s ?p ?o } LIMIT 1", "out.ttl", "a SELECT or ASK query answers with a table, which out.ttl"),
        ("CONSTRUCT { ?s ?p ?o } WHERE { ?s ?p ?o } LIMIT 1", "out.csv", "answers with triples, which out.csv"),
    ],
)
def test_an_answer_to_a_file_of_the_other_kind_says_why(runner, built_store, tmp_path: Path, query, name, said):
    """`sparql 'SELECT ...' -o x.ttl` said "cannot tell the format of x.ttl from its extension": the
    extension is plain; a table cannot be written as Turtle. The rule: the message says that, and
    which extensions fit (exit 2, nothing written)."""
    data, store = built_store
    target = tmp_path / name
    result = runner.invoke(cli, ["--data", str(data), "--store", str(store), "sparql", query, "-o", str(target)])
    assert result.exit_code == 2 and said in result.output
    assert not target.exists()


@pytest.mark.parametrize("command", ["build", "validate"])
def test_a_data_folder_with_no_records_is_warned_of(runner, tmp_path: Path, command) -> None:
    """`sotakg --data src build` built 0 records and `validate` passed "0 violations in 0 records",
    silently: in CI a wrong --data would pass whatever the records say. The rule: a warning on
    standard error naming the folder and what it lacks; none for a real data folder."""
    (tmp_path / "src").mkdir()
    store = str(tmp_path / "store")
    result = runner.invoke(cli, ["--data", str(tmp_path / "src"), "--store", store, command])
    assert "holds no record folder (adrs/, papers/, practices/, topics/) and no registry.yaml" in result.stderr
    assert "is it the anthology's data folder?" in result.stderr
    (tmp_path / "src" / "papers").mkdir()
    again = runner.invoke(cli, ["--data", str(tmp_path / "src"), "--store", store, command])
    assert "warning" not in again.stderr


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["diff", "./a", "./b", "--graph", "https://example.org/g"], "--graph is for --format sparql-update"),
        (["diff", "./a", "./b", "--link-base", "https://x/"], "--link-base is for --format markdown"),
        (["diff", "./a", "./b", "-f", "json", "--graph", "https://example.org/g"], "--graph is for --format"),
    ],
)
def test_a_diff_option_of_another_format_is_a_usage_error(runner, tmp_path: Path, args, said) -> None:
    """`diff HEAD --graph IRI` without sparql-update, and `--link-base` without markdown, were
    silently ignored (validate and query refuse --graph without --endpoint). The rule: exit 2,
    saying which format the option is for."""
    result = runner.invoke(cli, args)
    _no_traceback(result)
    assert result.exit_code == 2 and said in result.output


def test_every_command_with_a_format_takes_f_for_it(runner) -> None:
    """`query`, `sparql`, `console` and `export` took -f for --format, `validate` and `diff` only
    --format. The rule: -f everywhere --format is."""
    for command in (["validate"], ["diff"], ["query"], ["sparql"], ["console"], ["export", "rdf"], ["export", "view"]):
        shown = runner.invoke(cli, [*command, "--help"]).output
        assert "-f, --format" in shown, command
