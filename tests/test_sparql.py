"""Ad-hoc SPARQL: read-only and offline refusals, syntax errors, time limits, nesting, result kinds,
the worker process, and the light import path of `sotakg query` and `sotakg sparql`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from sotakg.cli import cli
from sotakg.errors import QueryFailed, QueryRefused, QuerySyntaxError, QueryTimeout
from sotakg.query import sparql
from sotakg.query.results import AskResult, GraphResult, SelectResult
from sotakg.query.sparql import (
    MAX_DEPTH,
    LocalBackend,
    check_query,
    nesting_depth,
    query_form,
    run_query,
    tokens,
    values_clause,
)

from .conftest import REPO, SHIPPED_TRIPLES, invoke

SLOW = "SELECT (COUNT(*) AS ?n) WHERE { ?a ?b ?c . ?d ?e ?f . ?g ?h ?i . ?j ?k ?l }"


def nested(depth: int) -> str:
    """A valid query whose brackets nest ``depth`` levels: { BIND( and depth-2 parentheses."""
    inner = depth - 2
    return "SELECT ?x WHERE { BIND(" + "(" * inner + "1" + ")" * inner + " AS ?x) }"


# ------------------------------------------------------------------------------------------ lexing


def test_tokens_keep_strings_iris_and_comments_whole():
    text = "SELECT ?load WHERE { ?s <http://x/DROP> \"INSERT {\" ; sota:add '''DELETE\n}''' } # LOAD <x>\n"
    kinds = [(t.kind, t.text) for t in tokens(text)]
    assert kinds == [
        ("word", "SELECT"),
        ("var", "?load"),
        ("word", "WHERE"),
        ("punct", "{"),
        ("var", "?s"),
        ("iri", "<http://x/DROP>"),
        ("string", '"INSERT {"'),
        ("punct", ";"),
        ("pname", "sota:add"),
        ("string", "'''DELETE\n}'''"),
        ("punct", "}"),
    ]


def test_a_less_than_sign_is_not_an_iri():
    assert [t.kind for t in tokens("FILTER(?a < ?b)")] == ["word", "punct", "var", "punct", "var", "punct"]


def test_query_form():
    assert query_form("PREFIX x: <http://x/>\n# ASK\nselect * { ?s ?p ?o }") == "SELECT"
    assert query_form("DESCRIBE id:SOTA-049") == "DESCRIBE"
    assert query_form("CONSTRUCT WHERE { ?s ?p ?o }") == "CONSTRUCT"
    assert query_form("ASK { }") == "ASK"
    assert query_form("nothing here") is None


def test_nesting_depth_ignores_brackets_in_strings_comments_and_iris():
    assert nesting_depth(nested(7))[0] == 7
    assert nesting_depth('SELECT ?x { BIND("((((((((" AS ?x) } # ((((((\n')[0] == 2
    assert nesting_depth("SELECT * { ?s <http://x/((((> [ ?p [ ?q ?o ] ] }")[0] == 3


# ------------------------------------------------------------------------------------------ refusals


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "INSERT DATA { <http://x/a> <http://x/b> <http://x/c> }",
            "INSERT (line 1, column 1) is SPARQL Update",
        ),
        ("delete where { ?s ?p ?o }", "DELETE (line 1, column 1) is SPARQL Update"),
        ("PREFIX x: <http://x/>\nDROP ALL", "DROP (line 2, column 1) is SPARQL Update"),
        ("CLEAR DEFAULT", "CLEAR (line 1, column 1) is SPARQL Update"),
        ("CREATE GRAPH <http://x/g>", "CREATE (line 1, column 1) is SPARQL Update"),
        ("COPY DEFAULT TO <http://x/g>", "COPY (line 1, column 1) is SPARQL Update"),
        ("MOVE DEFAULT TO <http://x/g>", "MOVE (line 1, column 1) is SPARQL Update"),
        ("ADD DEFAULT TO <http://x/g>", "ADD (line 1, column 1) is SPARQL Update"),
        ("LOAD <http://example.org/data.ttl>", "LOAD (line 1, column 1) would make the store fetch data"),
        (
            "SELECT * WHERE {\n  SERVICE <http://dbpedia.org/sparql> { ?s ?p ?o }\n}",
            "SERVICE (line 2, column 3) would make the store query a remote endpoint",
        ),
        (
            "SELECT * FROM <http://example.org/g> WHERE { ?s ?p ?o }",
            "FROM (line 1, column 10) names a dataset",
        ),
        ("SELECT * FROM NAMED <http://example.org/g> WHERE { ?s ?p ?o }", "FROM (line 1, column 10)"),
        ("select * from id:SOTA-049 where { ?s ?p ?o }", "FROM (line 1, column 10)"),
    ],
)
def test_refusals(text, message):
    with pytest.raises(QueryRefused) as caught:
        check_query(text)
    assert str(caught.value).startswith(message)


def test_keywords_inside_strings_iris_names_and_comments_are_not_refused(backend):
    text = (
        "# INSERT DATA, DROP ALL, SERVICE, FROM\n"
        "SELECT ?load ?drop WHERE {\n"
        '  BIND("DELETE WHERE { ?s ?p ?o } ; LOAD <http://x/>" AS ?load)\n'
        "  BIND(<http://example.org/service/from/add> AS ?drop)\n"
        "}"
    )
    result = run_query(backend, text)
    assert isinstance(result, SelectResult)
    assert result.texts() == [("DELETE WHERE { ?s ?p ?o } ; LOAD <http://x/>", "<http://example.org/service/from/add>")]


def test_cli_refusals_exit_2(runner, built_store):
    for text, message in (
        ("DROP ALL", "DROP (line 1, column 1) is SPARQL Update"),
        ("SELECT * { SERVICE <http://x/> { ?s ?p ?o } }", "SERVICE (line 1, column 12)"),
        ("LOAD <http://x/>", "LOAD (line 1, column 1)"),
        ("SELECT * FROM <http://x/> { ?s ?p ?o }", "FROM (line 1, column 10)"),
    ):
        result = invoke(runner, built_store, "sparql", text)
        assert result.exit_code == 2, result.output
        assert message in result.stderr
        assert result.stdout == ""


def test_the_store_refuses_updates_even_past_the_check(backend):
    """Below the lexical check, pyoxigraph's query parser does not take update text either."""
    update = "INSERT DATA { <http://x/a> <http://x/b> 1 }"
    answer = sparql._execute(str(backend.database()), update, {}, None)  # in this process, no check
    with pytest.raises(QuerySyntaxError, match="^syntax error at line 1, column"):
        sparql._decode(answer, update)
    count = run_query(backend, "SELECT (COUNT(*) AS ?n) WHERE { ?s ?p ?o }")
    assert isinstance(count, SelectResult)
    assert count.texts() == [(str(SHIPPED_TRIPLES),)]


# ------------------------------------------------------------------------------------------ syntax errors


def test_syntax_error_says_line_and_column(runner, built_store):
    text = "SELECT ?s WHERE {\n  ?s a sota:Practice .\n  BIND(1 AS 2)\n}"
    result = invoke(runner, built_store, "sparql", text)
    assert result.exit_code == 1
    assert result.stderr.splitlines() == [
        'Error: syntax error at line 3, column 13: expected one of "$", "?", NOT',
        "   3 |   BIND(1 AS 2)",
        "     |             ^",
    ]


def test_syntax_error_positions_are_the_users_own_despite_predeclared_prefixes(backend):
    with pytest.raises(QuerySyntaxError) as caught:
        run_query(backend, "SELECT * WHERE { ?s sota:status ?o")
    assert (caught.value.line, caught.value.column) == (1, 35)
    assert str(caught.value).startswith("syntax error at line 1, column 35: missing `}`: the `{` at line 1, column 16")
    assert "[" not in str(caught.value).splitlines()[0]  # pyoxigraph's character classes are left out


def test_an_unknown_prefix_is_a_syntax_error(backend):
    with pytest.raises(QuerySyntaxError, match="line 1, column"):
        run_query(backend, "SELECT * WHERE { ?s nope:x ?o }")


def test_the_query_can_redeclare_a_predeclared_prefix(backend):
    result = run_query(backend, "PREFIX sota: <http://example.org/other#>\nASK { ?s sota:status ?o }")
    assert result == AskResult(False)


# ------------------------------------------------------------------------------------------ time limit


def test_a_runaway_query_times_out_and_its_worker_is_killed(backend, monkeypatch):
    forked: list[int] = []
    real_fork = os.fork

    def fork() -> int:
        pid = real_fork()
        if pid:
            forked.append(pid)
        return pid

    monkeypatch.setattr(os, "fork", fork)
    started = time.monotonic()
    with pytest.raises(QueryTimeout, match=r"^query ran longer than 1 s; raise --timeout or narrow the query$"):
        run_query(backend, SLOW, timeout=1)
    assert time.monotonic() - started < 5
    assert len(forked) == 1
    with pytest.raises(ProcessLookupError):
        os.kill(forked[0], 0)  # killed and reaped


def test_cli_timeout(runner, built_store):
    result = invoke(runner, built_store, "sparql", "--timeout", "1", SLOW)
    assert result.exit_code == 1
    assert result.stderr == "Error: query ran longer than 1 s; raise --timeout or narrow the query\n"
    assert result.stdout == ""


def test_canned_queries_share_the_time_limit(backend):
    from sotakg.query.canned import run_canned

    with pytest.raises(QueryTimeout):
        run_canned(backend, "most-cited-papers", {}, timeout=0.000001)


def test_timeout_must_be_positive(runner, built_store):
    result = invoke(runner, built_store, "sparql", "--timeout", "0", "ASK {}")
    assert result.exit_code == 2


# ------------------------------------------------------------------------------------------ nesting


def test_nesting_at_the_limit_runs(backend):
    result = run_query(backend, nested(MAX_DEPTH))
    assert isinstance(result, SelectResult)
    assert result.texts() == [("1",)]


def test_nesting_past_the_limit_is_refused(runner, built_store):
    result = invoke(runner, built_store, "sparql", nested(MAX_DEPTH + 1))
    assert result.exit_code == 2
    assert (
        "the query nests brackets and prefix operators (! - + ^) more than 100 levels deep (line 1, column 122 reaches "
        "level 101); the limit is 100"
    ) in result.stderr


def negated(count: int) -> str:
    """An ASK query whose FILTER holds ``count`` consecutive ``!`` operators."""
    return "ASK { FILTER(" + "!" * count + "true) }"


def test_nesting_depth_counts_chains_of_prefix_operators():
    assert nesting_depth(negated(50)) == (52, 62)  # { and ( and 50 operators; the last ! is at offset 62
    assert nesting_depth("ASK { FILTER(" + "- " * 30 + "1) }")[0] == 32
    assert nesting_depth("ASK { FILTER(------1) }")[0] == 8
    assert nesting_depth("ASK { ?s ^^^:p ?o }")[0] == 4
    assert nesting_depth("ASK { FILTER(" + "!(" * 30 + "true" + ")" * 30 + ") }")[0] == 62
    # Binary operators, != and the ^^ of a typed literal are not chains.
    assert nesting_depth('ASK { FILTER(?a - ?b != 1 + 2 && "1"^^xsd:int = -1) }')[0] == 4
    assert nesting_depth("ASK { FILTER(!true) } ASK { FILTER(!true) }")[0] == 3


def test_long_chains_of_prefix_operators_are_refused(backend):
    assert run_query(backend, negated(50)) == AskResult(True)  # an even number of negations
    with pytest.raises(
        QueryRefused,
        match=r"nests brackets and prefix operators \(! - \+ \^\) more than 100 levels deep \(line 1, column 112 ",
    ):
        check_query(negated(200))
    for chain in ("-" * 200 + "1", "+" * 200 + "1"):
        with pytest.raises(QueryRefused):
            check_query("ASK { FILTER(" + chain + " = 1) }")
    with pytest.raises(QueryRefused):
        check_query("ASK { ?s " + "^" * 200 + "<http://x/p> ?o }")


def test_a_remote_query_is_checked_before_it_is_parsed_here(runner, built_store):
    """`--endpoint` parses the query in this process for its syntax errors; a chain that would overflow
    pyoxigraph's parser is refused before that (no server is needed to see it: the port is closed)."""
    from .servers import closed_port

    endpoint = f"http://127.0.0.1:{closed_port()}/query"
    result = invoke(runner, built_store, "sparql", negated(20000), "--endpoint", endpoint)
    assert result.exit_code == 2, result.output
    assert "nests brackets and prefix operators (! - + ^) more than 100 levels deep" in result.stderr


def test_an_engine_crash_is_a_clean_error(built_store, monkeypatch):
    """Past the check (switched off on purpose here), pyoxigraph's parser overflows its stack on deep
    nesting and the worker dies by a signal; the caller gets an error, not a crash."""
    monkeypatch.setattr(sparql, "check_query", lambda text, max_depth=0: None)
    reckless = LocalBackend(built_store[1], max_depth=10**6)
    with pytest.raises(QueryFailed, match=r"^the query engine crashed \(SIG[A-Z]+\)"):
        reckless.run(nested(200_000))  # past what the worker thread's 256 MiB stack holds


def test_a_worker_dying_by_a_signal_is_reported(backend, monkeypatch):
    import signal

    def die(*_args: object) -> bytes:
        os.kill(os.getpid(), signal.SIGKILL)
        return b""

    monkeypatch.setattr(sparql, "_execute", die)
    with pytest.raises(QueryFailed, match=r"^the query engine crashed \(SIGKILL\)"):
        run_query(backend, "ASK {}")


def test_a_worker_exception_is_reported(backend, monkeypatch):
    def fail(*_args: object) -> bytes:
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(sparql, "_execute", fail)
    with pytest.raises(QueryFailed, match="^the query failed: RuntimeError: disk on fire$"):
        run_query(backend, "ASK {}")


# ------------------------------------------------------------------------------------------ result kinds


def test_select_ask_construct_describe(backend):
    select = run_query(backend, "SELECT ?p WHERE { ?p sota:status sota:Rejected } ORDER BY ?p LIMIT 2")
    assert select == SelectResult(("p",), select.rows)
    assert select.texts() == [("id:SOTA-046",), ("id:SOTA-049",)]
    assert run_query(backend, "ASK { id:SOTA-049 sota:status sota:Rejected }") == AskResult(True)
    assert run_query(backend, "ASK { id:SOTA-049 sota:status sota:Active }") == AskResult(False)
    graph = run_query(
        backend,
        "CONSTRUCT { ?p sota:rests ?paper } WHERE { ?p cito:cites id:LIT-016 ; cito:cites ?paper }",
    )
    assert isinstance(graph, GraphResult)
    assert sorted(str(t.subject) for t in graph.triples) == [
        f"<https://w3id.org/sotakg/id/SOTA-0{n}>" for n in (17, 18, 19)
    ]
    described = run_query(backend, "DESCRIBE id:SOTA-049")
    assert isinstance(described, GraphResult)
    assert len(described) == 11


def test_describe_as_turtle_and_ntriples(runner, built_store):
    turtle = invoke(runner, built_store, "sparql", "DESCRIBE id:SOTA-049")
    assert turtle.exit_code == 0, turtle.output
    assert "@prefix sota: <https://w3id.org/sotakg/ontology#> ." in turtle.stdout
    assert 'id:SOTA-049 dcterms:identifier "SOTA-049" ;' in turtle.stdout
    assert "\tsota:status sota:Rejected ;" in turtle.stdout
    ntriples = invoke(runner, built_store, "sparql", "DESCRIBE id:SOTA-049", "--format", "ntriples")
    lines = ntriples.stdout.splitlines()
    assert len(lines) == 11
    assert (
        "<https://w3id.org/sotakg/id/SOTA-049> <https://w3id.org/sotakg/ontology#status> "
        "<https://w3id.org/sotakg/ontology#Rejected> ." in lines
    )
    refused = invoke(runner, built_store, "sparql", "DESCRIBE id:SOTA-049", "--format", "csv")
    assert refused.exit_code == 2
    assert "a CONSTRUCT or DESCRIBE query answers with triples: use --format turtle, ntriples" in refused.stderr


def test_ask_in_every_tabular_format(runner, built_store):
    expected = {"table": "true\n", "json": '{\n  "head": {},\n  "boolean": true\n}\n'}
    for fmt, text in expected.items():
        result = invoke(runner, built_store, "sparql", "ASK { ?s a sota:Practice }", "--format", fmt)
        assert result.exit_code == 0, result.output
        assert result.stdout == text
    xml = invoke(runner, built_store, "sparql", "ASK { ?s a sota:Nothing }", "--format", "xml")
    assert "<boolean>false</boolean>" in xml.stdout


def test_select_formats_from_the_command_line(runner, built_store):
    query = "SELECT ?p ?v WHERE { ?p sota:currentVersion/sota:versionNumber ?v FILTER(?v > 1) } ORDER BY ?p LIMIT 2"
    table = invoke(runner, built_store, "sparql", query)
    assert table.stdout == "p            v\n-----------  -\nid:SOTA-017  2\nid:SOTA-018  2\n2 rows\n"
    tsv = invoke(runner, built_store, "sparql", query, "-f", "tsv")
    assert tsv.stdout == "?p\t?v\n<https://w3id.org/sotakg/id/SOTA-017>\t2\n<https://w3id.org/sotakg/id/SOTA-018>\t2\n"
    document = json.loads(invoke(runner, built_store, "sparql", query, "-f", "json").stdout)
    assert document["head"] == {"vars": ["p", "v"]}
    assert len(document["results"]["bindings"]) == 2


def test_query_from_a_file_and_from_stdin(runner, built_store, tmp_path):
    path = tmp_path / "q.rq"
    path.write_text("ASK { id:LIT-051 a sota:Paper }\n")
    from_file = invoke(runner, built_store, "sparql", "--file", str(path))
    assert (from_file.exit_code, from_file.stdout) == (0, "true\n")
    from_stdin = invoke(runner, built_store, "sparql", input="ASK { id:LIT-051 a sota:Practice }\n")
    assert (from_stdin.exit_code, from_stdin.stdout) == (0, "false\n")
    dash = invoke(runner, built_store, "sparql", "--file", "-", input="ASK {}\n")
    assert (dash.exit_code, dash.stdout) == (0, "true\n")
    both = invoke(runner, built_store, "sparql", "ASK {}", "--file", str(path))
    assert both.exit_code == 2
    assert "not both" in both.stderr
    empty = invoke(runner, built_store, "sparql", input="  \n")
    assert empty.exit_code == 2
    assert "the query is empty" in empty.stderr


def test_values_clause_escapes_what_it_binds(backend):
    """For a backend without substitutions, bindings go into a trailing VALUES block that no value
    can break out of."""
    from pyoxigraph import Literal, NamedNode, Variable

    injection = 'LIT-051" } ; DROP ALL ; #'
    clause = values_clause(
        {
            Variable("text"): Literal(injection),
            Variable("paper"): NamedNode("https://w3id.org/sotakg/id/LIT-051"),
        }
    )
    assert (
        clause == '\nVALUES (?text ?paper) { ("LIT-051\\" } ; DROP ALL ; #" <https://w3id.org/sotakg/id/LIT-051>) }\n'
    )
    text = "SELECT ?text ?paper ?p WHERE { ?p cito:cites ?paper ; dcterms:title ?t FILTER(CONTAINS(?t, ?text)) }"
    result = run_query(backend, text + clause)
    assert isinstance(result, SelectResult)
    assert result.rows == ()


# ------------------------------------------------------------------------------------------ speed


WRAPPER = """
import runpy, sys
sys.argv = ["sotakg", *sys.argv[1:]]
code = 0
try:
    runpy.run_module("sotakg", run_name="__main__")
except SystemExit as stop:
    code = stop.code or 0
heavy = sorted(name for name in sys.modules if name.split(".")[0] in ("rdflib", "pyshacl"))
print("HEAVY", heavy, "EXIT", code, file=sys.stderr)
"""


@pytest.mark.parametrize(
    "args",
    [
        ["query", "practices-citing", "-p", "paper=LIT-051", "--format", "csv"],
        ["sparql", "SELECT ?p WHERE { ?p cito:cites id:LIT-051 }", "--format", "tsv"],
    ],
)
def test_query_paths_do_not_import_rdflib_or_pyshacl_and_answer_quickly(built_store, args):
    data, store = built_store
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-c", WRAPPER, "--data", str(data), "--store", str(store), *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        timeout=60,
    )
    elapsed = time.monotonic() - started
    assert done.stderr.strip().splitlines()[-1] == "HEAVY [] EXIT 0", done.stderr
    assert len(done.stdout.splitlines()) == 8  # a header and the seven practices citing LIT-051
    assert elapsed < 5, f"a cold query took {elapsed:.2f} s"


@pytest.mark.parametrize(
    "chain",
    [
        pytest.param(lambda n: "ASK { " + "MINUS{}" * n + " }", id="MINUS"),
        pytest.param(lambda n: "ASK { " + "OPTIONAL{}" * n + " }", id="OPTIONAL"),
        pytest.param(lambda n: "ASK { ?s " + "|".join(["a"] * n) + " ?o }", id="path alternatives"),
    ],
)
def test_a_chain_as_long_as_the_check_lets_by_does_not_crash_the_engine(runner, workdir, chain):
    # The engine recurses once per link of such a chain (no bracket nests): on a main thread's 8 MiB
    # stack a few thousand links overflow it; the worker's query thread has the server's stack.
    links = 1
    while True:  # the longest the check allows (its token limit)
        try:
            check_query(chain(links * 2))
        except QueryRefused:
            break
        links *= 2
    low, high = links, links * 2
    while high - low > 1:
        middle = (low + high) // 2
        try:
            check_query(chain(middle))
            low = middle
        except QueryRefused:
            high = middle
    assert low > 3000  # past what overflowed the main thread's stack
    result = runner.invoke(cli, ["sparql", chain(low)])
    assert result.exit_code == 0, result.output
    assert result.output.strip() in ("true", "false")


def test_a_worker_without_room_for_a_deep_stack_still_answers():
    # Under a limit on address space (ulimit -v) the 256 MiB thread cannot start: a smaller one does
    script = (
        "import resource, sys; sys.path.insert(0, 'src')\n"
        "resource.setrlimit(resource.RLIMIT_AS, (200 * 2**20, 200 * 2**20))\n"
        "from sotakg.query.sparql import run_in_worker\n"
        "print(run_in_worker(lambda: b'answered', 20).decode())\n"
    )
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "answered"


@pytest.mark.parametrize("word", ["TRIPLE", "isTRIPLE", "subject", "PREDICATE", "Object"])
def test_sparql_12_functions_of_triple_terms_are_refused(word):
    text = f"SELECT * WHERE {{ BIND({word}(<http://x/s>) AS ?t) }}"
    with pytest.raises(QueryRefused) as refused:
        sparql.check_query(text)
    assert str(refused.value) == (
        f"{word!r} at line 1, column 23 is a SPARQL 1.2 function of triple terms, which queries here do not "
        "take (the graph holds none)"
    )


def test_names_and_variables_spelled_like_those_functions_are_taken():
    assert sparql.check_query(
        "PREFIX ex: <http://x/> SELECT ?subject ?object WHERE { ?subject ex:object ?object }"
    ) == ("SELECT")


@pytest.mark.parametrize(
    ("text", "union"),
    [
        ("SELECT * WHERE { { ?a ?b ?c } UNION { ?d ?e ?f } }", True),
        ("SELECT * { { ?a ?b ?c } UNION { ?d ?e ?f } UNION { ?g ?h ?i } }", True),
        ("SELECT * WHERE { { ?a ?b ?c } UNION { ?d ?e ?f } ?x ?y ?z }", False),  # more than the UNION
        ("SELECT * WHERE { ?x ?y ?z { ?a ?b ?c } UNION { ?d ?e ?f } }", False),
        ("SELECT * WHERE { { ?a ?b ?c } }", False),  # one group is no UNION
        ("SELECT * WHERE { { ?a ?b ?c } UNION }", False),
        ("ASK { { ?a ?b '}' } UNION { ?d ?e ?f } }", True),  # a brace in a string is no brace
    ],
)
def test_a_where_group_that_is_a_union_of_groups_is_told(text, union):
    # Such a query gets its parameters as substitutions on the embedded store, any other stated in its text.
    assert sparql._where_is_a_union(text) is union
