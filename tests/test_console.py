"""The SPARQL console: where statements end, completion, piped scripts, and sessions in a real terminal."""

from __future__ import annotations

import io
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pexpect
import pytest

from sotakg.cli import cli
from sotakg.console import (
    DOT_COMMANDS,
    DotCommand,
    Statement,
    Vocabulary,
    history_path,
    load_vocabulary,
    prompt_completer,
    read_script,
    run_console,
    split_statements,
    statement_end,
    suggestions,
)
from sotakg.query.sparql import LocalBackend

from .conftest import GOLDEN, REPO, SHIPPED_DATA, subprocess_env

CITING = ".run practices-citing paper=LIT-051\n"
SLOW = "SELECT (COUNT(*) AS ?n) WHERE { ?a ?b ?c . ?d ?e ?f . ?g ?h ?i . ?j ?k ?l };\n"


@pytest.fixture(scope="module")
def vocabulary(backend: LocalBackend) -> Vocabulary:
    return load_vocabulary(backend)


def golden(name: str) -> str:
    return (GOLDEN / name).read_bytes().decode("utf-8")  # CSV lines end in CRLF


# ------------------------------------------------------------------------------------------ statements


@pytest.mark.parametrize(
    "text, ends",
    [
        ("SELECT * WHERE { ?s ?p ?o };", True),
        ("SELECT * WHERE { ?s ?p ?o } ;  # done", True),
        ("SELECT * WHERE { ?s ?p ?o }", False),
        ("SELECT * WHERE { ?s ?p ?o }\n", True),  # a blank line
        ("SELECT * WHERE { ?s ?p ?o }\n   ", True),
        ("SELECT * WHERE {\n  ?p a sota:Practice ;", False),  # SPARQL's own ';' inside braces
        ("SELECT * WHERE {\n  ?p a sota:Practice ;\n", False),  # a blank line inside braces is layout
        ("SELECT * WHERE { ?s ?p ?o } # the end;", False),  # ';' in a comment
        ('SELECT * WHERE { ?s ?p "a;" }', False),  # ';' in a string
        ('SELECT * WHERE { ?s ?p """two\n', False),  # a long string stays open over a blank line
        ('SELECT * WHERE { ?s ?p """two\n\nlines""" };', True),
        ("PREFIX ex: <http://example.org/>\n", False),  # only the prologue so far
        ("# a comment\n", False),
        ("", False),
        ("   \n", False),
        (".format csv", True),
        ("  .help", True),
        ("SELECT * WHERE { ?s ?p ?o } }\n", True),  # a stray closer: let the engine say where
    ],
)
def test_statement_end(text, ends):
    assert statement_end(text) is ends


def test_split_statements_keeps_lines_and_columns():
    text = "ASK { ?s ?p ?o } ; ASK {\n?s ?p ?o } ;"
    assert split_statements(text) == [
        Statement("ASK { ?s ?p ?o } ", 1),
        Statement(" " * 18 + " ASK {\n?s ?p ?o } ", 1),
    ]
    assert split_statements("\n  SELECT * {}", first_line=3) == [Statement("\n\n\n  SELECT * {}", 4)]
    assert split_statements(" ; # nothing\n;") == []


def test_a_canned_query_file_is_one_statement():
    text = (REPO / "queries" / "practices-citing.rq").read_text(encoding="utf-8")
    items = list(read_script(io.StringIO(text)))
    assert len(items) == 1 and isinstance(items[0], Statement)
    assert items[0].source == text.strip()
    assert items[0].line == 13  # its first token: the first PREFIX line


def test_read_script():
    script = [
        "# a script\n",
        "\n",
        ".format csv\n",
        "SELECT ?p WHERE {\n",
        "  ?p a sota:Practice ;\n",
        "\n",
        "     sota:status sota:Rejected }\n",
        ".timing on\n",  # a known dot-command ends the query before it
        "ASK {} ; ASK {}\n",
        "\n",
        "\n",
        "  .bogus\n",
        "DESCRIBE id:SOTA-049",
    ]
    items = [
        (type(item).__name__, item.line, item.text if isinstance(item, DotCommand) else item.source)
        for item in read_script(script)
    ]
    assert items == [
        ("DotCommand", 3, ".format csv"),
        ("Statement", 4, "SELECT ?p WHERE {\n  ?p a sota:Practice ;\n\n     sota:status sota:Rejected }"),
        ("DotCommand", 8, ".timing on"),
        ("Statement", 9, "ASK {}"),
        ("Statement", 9, "ASK {}"),
        ("DotCommand", 12, ".bogus"),
        ("Statement", 13, "DESCRIBE id:SOTA-049"),
    ]


# ------------------------------------------------------------------------------------------ completion


@pytest.mark.parametrize(
    "typed, expected",
    [
        ("SELECT ?r WHERE { id:SOTA-049 sota:rej", ["sota:rejectionReason"]),
        ("sota:Rej", ["sota:Rejected"]),
        ("sota:REJ", ["sota:Rejected", "sota:rejectionReason"]),  # no exact-case match: case ignored
        ("SOTA-04", ["SOTA-046", "SOTA-047", "SOTA-048", "SOTA-049"]),
        ("?p cito:", ["cito:cites"]),
        ("?p a id:ADR", ["id:ADR-020", "id:ADR-026", "id:ADR-059"]),
        ("sel", ["select"]),
        ("SEL", ["SELECT"]),
        ("OPT", ["OPTIONAL"]),
        ("dct", ["dcterms:"]),
        ("rejection", ["sota:rejectionReason"]),
        ("SELECT ?practice WHERE { ?practice a ?type . ?pr", ["practice"]),
        ("SELECT ?x # sota:rej", []),  # in a comment
        ('SELECT ?x WHERE { ?x ?y "sota:rej', []),  # in a string
        (".ru", [".run"]),
        (".run practices-ci", ["practices-citing"]),
        (".run practices-citing ", ["paper="]),
        (".run practices-citing paper=LIT-05", ["paper=LIT-051", "paper=LIT-056", "paper=LIT-059"]),
        (".run practices-citing paper=SOTA", []),  # the parameter's pattern wants papers
        (".run statements-about resource=id:ADR-02", ["resource=id:ADR-020", "resource=id:ADR-026"]),
        (".run practices-mentioning text=", []),
        (".why ADR", ["ADR-020", "ADR-026", "ADR-059"]),
        (".format t", ["table", "tsv"]),
        (".timing o", ["on", "off"]),
    ],
)
def test_suggestions(vocabulary, typed, expected):
    assert [found.text for found in suggestions(vocabulary, typed)] == expected


def test_suggestions_say_what_they_are(vocabulary):
    assert [(s.text, s.replace, s.meta) for s in suggestions(vocabulary, "?p sota:rej")] == [
        ("sota:rejectionReason", 8, "owl:DatatypeProperty")
    ]
    assert [(s.text, s.meta) for s in suggestions(vocabulary, "LIT-051")] == [("LIT-051", "Jiang et al. (2020)")]
    assert [(s.text, s.meta) for s in suggestions(vocabulary, "id:SOTA-049")] == [
        ("id:SOTA-049", "Set buffer size to network bandwidth-delay product"),
        ("id:SOTA-049-v1", "sota:PracticeVersion"),
    ]


def test_prompt_toolkit_completer(vocabulary):
    from prompt_toolkit.completion import CompleteEvent
    from prompt_toolkit.document import Document

    completer = prompt_completer(vocabulary)
    document = Document("SELECT * WHERE {\n  ?p sota:rej")
    found = list(completer.get_completions(document, CompleteEvent(completion_requested=True)))
    assert [(c.text, c.start_position, c.display_meta_text) for c in found] == [
        ("sota:rejectionReason", -8, "owl:DatatypeProperty")
    ]


def test_history_path():
    assert history_path({"SOTAKG_HISTORY": "/tmp/h"}) == Path("/tmp/h")
    assert history_path({"XDG_STATE_HOME": "/state"}) == Path("/state/sotakg/history")
    home = Path.home() / ".local" / "state" / "sotakg" / "history"
    assert history_path({"XDG_STATE_HOME": "relative/ignored"}) == home
    assert history_path({}) == home


# ------------------------------------------------------------------------------------------ piped scripts


def run_piped(backend, script: str, **options) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = run_console(backend, interactive=False, input_stream=io.StringIO(script), out=out, err=err, **options)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture(autouse=True)
def no_columns(monkeypatch):
    """Tables in piped output keep whole values unless the terminal's width is known."""
    monkeypatch.delenv("COLUMNS", raising=False)


def test_piped_canned_query(backend):
    assert run_piped(backend, CITING) == (0, golden("practices-citing-LIT-051.table"), "")


def test_piped_formats_and_why(backend):
    code, out, err = run_piped(backend, ".format csv\n" + CITING + ".format json\n" + CITING + ".why SOTA-049\n")
    assert (code, err) == (0, "")
    assert out == (
        golden("practices-citing-LIT-051.csv") + golden("practices-citing-LIT-051.json") + golden("why-SOTA-049.txt")
    )


def test_piped_errors_are_reported_and_the_script_goes_on(backend):
    script = (
        "SELECT ?x WHERE {\n"
        "  ?x ?y };\n"
        "DELETE WHERE { ?s ?p ?o };\n"
        ".bogus\n"
        ".fromat csv\n"
        ".run practices-citing\n"
        ".run practices-citing paper=LIT-51x\n"
        ".run practices-citing paper=LIT-051 topic=x\n"
        ".why SOTA-999\n"
        ".format yaml\n"
        "ASK { id:SOTA-049 a sota:Practice } ;\n"
    )
    code, out, err = run_piped(backend, script)
    assert code == 1
    assert out == "true\n"
    assert err == (
        "Error at line 1: syntax error at line 2, column 9: missing object: the triple `?x ?y` has a subject and "
        "a predicate but no object (a variable, an IRI, a prefixed name or a literal)\n"
        "   2 |   ?x ?y }\n"
        "     |         ^\n"
        "Error at line 3: DELETE (line 3, column 1) is SPARQL Update, and the graph is read-only here: it is "
        "compiled from the data folder. Only SELECT, ASK, CONSTRUCT and DESCRIBE queries run\n"
        "Error at line 4: unknown command .bogus; .help lists the commands\n"
        "Error at line 5: unknown command .fromat; did you mean .format? .help lists the commands\n"
        "Error at line 6: query practices-citing needs paper; usage: .run practices-citing paper=LIT-051\n"
        "Error at line 7: parameter paper must look like LIT-051 (pattern ^LIT-\\d{3,}$), not 'LIT-51x'\n"
        "Error at line 8: query practices-citing has no parameter topic; it takes paper\n"
        "Error at line 9: no practice, paper or ADR has the identifier SOTA-999; "
        "did you mean SOTA-249 or SOTA-219 or SOTA-189?\n"
        "Error at line 10: unknown format 'yaml'; use one of: table, csv, tsv, json\n"
    )


def test_piped_timeout(backend):
    code, out, err = run_piped(backend, SLOW + "ASK {}\n", timeout=0.5)
    assert (code, out) == (1, "true\n")
    assert err == "Error at line 1: query ran longer than 0.5 s; raise --timeout or narrow the query\n"


def test_max_rows_cuts_results(backend):
    code, out, err = run_piped(backend, CITING, max_rows=2)
    assert code == 0
    assert out == (
        "paper       practice     version  status    title\n"
        "----------  -----------  -------  --------  --------------------------------------------\n"
        "id:LIT-051  id:SOTA-046        1  Rejected  Use hierarchical allreduce for tensors > 1MB\n"
        "id:LIT-051  id:SOTA-047        1  Active    Overlap communication with backward pass\n"
        "2 rows\n"
    )
    assert err == "(only the first 2 of 7 rows are shown; --max-rows N raises the cap)\n"


def test_output_file_and_timing(backend, tmp_path):
    target = tmp_path / "answer.tsv"
    script = f".timing on\n.format tsv\n.output {target}\n{CITING}.output\n.format table\nASK {{}};\n"
    code, out, err = run_piped(backend, script)
    assert code == 0
    assert target.read_text(encoding="utf-8") == golden("practices-citing-LIT-051.tsv")
    assert re.fullmatch(r"true \(\d+\.\d{3} s\)\n", out)
    assert re.fullmatch(rf"7 rows written to {re.escape(str(target))} \(\d+\.\d{{3}} s\)\n", err)


def test_construct_answers_in_turtle(backend):
    code, out, err = run_piped(
        backend, "CONSTRUCT { id:SOTA-049 sota:status ?s } WHERE { id:SOTA-049 sota:status ?s };"
    )
    assert (code, err) == (0, "")
    assert out.endswith("id:SOTA-049 sota:status sota:Rejected .\n")


def test_help_and_prefixes(backend):
    code, out, err = run_piped(backend, ".help\n.prefixes\n")
    assert (code, err) == (0, "")
    assert "  .run NAME [name=value ...]    run a canned query with its parameters\n" in out
    assert all(f"  {name}" in out for name in DOT_COMMANDS)
    assert out.endswith(
        "PREFIX sota: <https://w3id.org/sotakg/ontology#>\n"
        "PREFIX id: <https://w3id.org/sotakg/id/>\n"
        "PREFIX topic: <https://w3id.org/sotakg/topic/>\n"
        "PREFIX dcterms: <http://purl.org/dc/terms/>\n"
        "PREFIX skos: <http://www.w3.org/2004/02/skos/core#>\n"
        "PREFIX prov: <http://www.w3.org/ns/prov#>\n"
        "PREFIX cito: <http://purl.org/spar/cito/>\n"
        "PREFIX rdf: <http://www.w3.org/1999/02/22-rdf-syntax-ns#>\n"
        "PREFIX rdfs: <http://www.w3.org/2000/01/rdf-schema#>\n"
        "PREFIX owl: <http://www.w3.org/2002/07/owl#>\n"
        "PREFIX xsd: <http://www.w3.org/2001/XMLSchema#>\n"
    )


def test_quit_stops_a_script(backend):
    assert run_piped(backend, "ASK {};\n.quit\nASK { ?s ?p 1 };\n") == (0, "true\n", "")


def test_cli_console_with_piped_input(runner, built_store):
    data, store = built_store
    args = ["--data", str(data), "--store", str(store), "console", "--format", "tsv"]
    result = runner.invoke(cli, args, input=CITING)
    assert (result.exit_code, result.stdout) == (0, golden("practices-citing-LIT-051.tsv"))
    result = runner.invoke(cli, args, input="ASK { ?x };\n")
    assert result.exit_code == 1
    assert result.stderr.startswith(
        "Error at line 1: syntax error at line 1, column 10: missing predicate and object: the triple `?x` has "
        "only a subject\n"
    )


def test_console_script_builds_the_store_and_sets_the_exit_status(tmp_path):
    shutil.copytree(SHIPPED_DATA, tmp_path / "data")
    script = tmp_path / "script.rq"
    script.write_text("-- not SPARQL;\n" + CITING, encoding="utf-8")
    with script.open("rb") as stdin:
        done = subprocess.run(
            [sys.executable, "-m", "sotakg", "console"],
            stdin=stdin,
            capture_output=True,
            cwd=tmp_path,
            env={k: v for k, v in subprocess_env().items() if k != "COLUMNS"},
            timeout=60,
        )
    assert done.returncode == 1
    assert done.stdout.decode() == golden("practices-citing-LIT-051.table")
    assert done.stderr.decode().startswith(
        "Error at line 1: syntax error at line 1, column 8: `SPARQL` is not a SPARQL keyword"
    )
    assert (tmp_path / ".sotakg" / "store").exists()


# ------------------------------------------------------------------------------------------ in a terminal

ENTER = "\r"
UP = "\x1b[A"
CTRL_C = "\x03"
CTRL_D = "\x04"


def spawn_console(built_store, history: Path, rows: int = 40) -> pexpect.spawn:
    data, store = built_store
    env = {k: v for k, v in subprocess_env().items() if k not in ("COLUMNS", "LINES")}
    env.update(
        SOTAKG_HISTORY=str(history),
        TERM="xterm",
        PROMPT_TOOLKIT_NO_CPR="1",  # nobody answers the terminal's cursor-position requests here
        PAGER="sed s/^/paged:/",
    )
    child = pexpect.spawn(
        sys.executable,
        ["-m", "sotakg", "--data", str(data), "--store", str(store), "console"],
        env=env,
        cwd=str(history.parent),
        dimensions=(rows, 120),
        encoding="utf-8",
        timeout=20,
        # Started with Ctrl-C ignored, as a parent may leave it (an in-process build does): the console
        # takes Ctrl-C back, else a running query could not be stopped.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
    )
    child.expect("Ctrl-D quits")
    child.expect("sparql>")
    return child


def answer(child: pexpect.spawn, pattern: str) -> str:
    """Wait for ``pattern``, then the next prompt; return what came before the pattern."""
    child.expect(pattern)
    shown = child.before
    child.expect("sparql>")
    return shown


def quit_console(child: pexpect.spawn) -> None:
    child.send(CTRL_D)
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0


def test_a_session_in_a_terminal(built_store, tmp_path):
    history = tmp_path / "history"
    child = spawn_console(built_store, history)

    # A multi-line query: the ';' inside the braces does not end it, the one at the end does.
    for line in ["SELECT ?practice ?title WHERE {", "  ?practice sota:status sota:Rejected ;"]:
        child.send(line + ENTER)
    child.send("    dcterms:title ?title .  } ORDER BY ?practice LIMIT 2;" + ENTER)
    child.expect("id:SOTA-046  Use hierarchical allreduce for tensors > 1MB")
    child.expect("id:SOTA-049  Set buffer size to network bandwidth-delay product")
    answer(child, r"2 rows \(\d+\.\d{3} s\)")

    # Tab completes a prefixed name of the ontology.
    child.send("SELECT ?reason WHERE { id:SOTA-049 sota:rej")
    time.sleep(0.3)
    child.send("\t")
    child.expect("ectionReason")
    child.send(" ?reason };" + ENTER)
    answer(child, "collapses two different quantities into one unfollowable sentence")

    # A canned query with a parameter.
    child.send(CITING.strip() + ENTER)
    shown = answer(child, r"7 rows \(\d+\.\d{3} s\)")
    practices = re.findall(r"id:LIT-051  (id:SOTA-\d+)", shown)
    assert practices == [f"id:SOTA-0{n}" for n in (46, 47, 48, 49, 73, 74, 76)]

    # A syntax error is reported with its place, and the session goes on.
    child.send("SELECT ?x WHERE { ?x ?y };" + ENTER)
    answer(child, r"Error: syntax error at line 1, column 25: missing object")

    # Ctrl-C stops a running query (its worker is killed) and the session goes on.
    child.send(SLOW.strip() + ENTER)
    child.expect(re.escape("\x1b[?2004l"))  # the prompt has given the terminal back: the query runs
    time.sleep(0.3)
    child.send(CTRL_C)
    answer(child, "Error: cancelled")

    # Ctrl-C drops what was typed.
    child.send("SELECT nonsense")
    time.sleep(0.2)
    child.send(CTRL_C)
    child.expect("sparql>")
    child.send("ASK { id:SOTA-049 a sota:Practice };" + ENTER)
    answer(child, r"true \(\d+\.\d{3} s\)")

    quit_console(child)
    entries = history.read_text(encoding="utf-8")
    assert "+SELECT ?practice ?title WHERE {\n+  ?practice sota:status sota:Rejected ;\n" in entries
    assert "SELECT nonsense" not in entries


def test_history_across_sessions_and_the_pager(built_store, tmp_path):
    history = tmp_path / "history"
    child = spawn_console(built_store, history)
    child.send("ASK { id:LIT-051 a sota:Paper };" + ENTER)
    answer(child, r"true \(")
    quit_console(child)

    child = spawn_console(built_store, history, rows=24)
    child.send(UP)
    child.expect("Paper")
    time.sleep(0.2)
    child.send(ENTER)
    answer(child, r"true \(")

    # 42 practices do not fit 24 lines: they go through the pager.
    child.send("SELECT ?practice WHERE { ?practice a sota:Practice } ORDER BY ?practice;" + ENTER)
    child.expect("paged:id:SOTA-017")
    answer(child, r"paged:42 rows \(")
    quit_console(child)
