"""One test module, three real SPARQL engines: the Oxigraph server, OpenLink Virtuoso 7 and Apache
Jena ARQ (Debian's Jena 4.5, behind Fuseki's dataset endpoints: ``tests/jena/ArqServer.java``).

Each server is started once per test session on free loopback ports (Virtuoso in a temporary folder
with its own ini, its publishing account granted with ``isql-vt``, stopped by its pid), the graph is
published to it with ``sotakg publish`` (staged, then swapped in with one MOVE), and then every
canned query, ``why``, ``validate --endpoint`` and a piped console answer on it exactly as on the
embedded store. Jena 4.5 refuses to MOVE a named graph (its check of the source graph falls through
to "Invalid source target for operation"; newer Jena is not tested here): there the graph is put with one Graph
Store PUT instead, the publishing tests that need the MOVE skip saying so, and one test holds that
such a refusal leaves the published graph as it was and no staging graph behind. A server missing
from the machine skips with its install command named.
"""

from __future__ import annotations

import json
import re
import shutil
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from sotakg.cli import cli
from sotakg.query.canned import CannedQuery, load_canned

from . import servers
from .conftest import NO_CREDENTIALS, SHIPPED_TRIPLES
from .servers import jena, jena_missing, oxigraph, virtuoso, virtuoso_missing

GRAPH = "https://example.org/graphs/sotakg-shared"
CANNED = load_canned()
RECORDS = ["SOTA-049", "SOTA-017", "SOTA-076", "SOTA-214", "LIT-051", "ADR-020", "ADR-026"]
TRIPLES = SHIPPED_TRIPLES


@dataclass(frozen=True)
class Target:
    """A running server: where queries go, where graphs are stored, and who may write."""

    name: str
    query: str
    store: str
    update: str
    writer: dict[str, str] = field(default_factory=dict)
    read_only_store: str | None = None  # a Graph Store endpoint that refuses writes
    moves_named_graphs: bool = True  # False: the server refuses `MOVE <staging> TO ...` (Jena 4.5)

    def env(self) -> dict[str, str | None]:
        return {**NO_CREDENTIALS, **self.writer}


def _oxigraph(root: Path) -> Iterator[Target]:
    if shutil.which("oxigraph") is None:
        try:
            from sotakg.server.serve import find_oxigraph

            find_oxigraph()
        except Exception:  # noqa: BLE001 - any failure to find it means the same: skip, saying how to install
            pytest.skip("the Oxigraph server is not installed; install it with: pip install oxigraph")
    with oxigraph(root / "db") as base:
        yield Target("oxigraph", f"{base}/query", f"{base}/store", f"{base}/update")


def _virtuoso(root: Path) -> Iterator[Target]:
    missing = virtuoso_missing()
    if missing:
        pytest.skip(missing)
    with virtuoso(root) as server:
        yield Target(
            "virtuoso",
            f"{server.base}/sparql",
            f"{server.base}/sparql-graph-crud-auth",
            f"{server.base}/sparql-auth",
            {"SOTAKG_USER": server.user, "SOTAKG_PASSWORD": server.password},
            read_only_store=f"{server.base}/sparql-graph-crud",
        )


def _jena(root: Path) -> Iterator[Target]:
    missing = jena_missing()
    if missing:
        pytest.skip(missing)
    with jena(root) as base:
        yield Target("jena", f"{base}/ds/query", f"{base}/ds/data", f"{base}/ds/update", moves_named_graphs=False)


STARTERS = {"oxigraph": _oxigraph, "virtuoso": _virtuoso, "jena": _jena}


@pytest.fixture(scope="session", params=list(STARTERS))
def server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    """Each real server, started once per session."""
    yield from STARTERS[request.param](tmp_path_factory.mktemp(f"server-{request.param}"))


def put_graph(target: Target, side: tuple[Path, Path], graph: str) -> int:
    """Put the graph of ``side`` (data, store) into ``graph`` with one Graph Store PUT, not through
    ``sotakg publish``: for a server that cannot take publish's MOVE. The number of triples sent."""
    from click.testing import CliRunner

    from sotakg.server.publish import graph_store_url

    exported = run(CliRunner(), side, "export", "rdf", "-f", "nt")
    assert exported.exit_code == 0, exported.output
    body = exported.stdout.encode("utf-8")
    request = urllib.request.Request(
        graph_store_url(target.store, graph), data=body, method="PUT", headers={"Content-Type": "application/n-triples"}
    )
    with urllib.request.urlopen(request, timeout=30) as answer:
        assert answer.status in (200, 201, 204)
    return exported.stdout.count("\n")


def publish_to(runner, target: Target, side: tuple[Path, Path], graph: str):
    """Publish ``side`` into ``graph`` with ``sotakg publish`` where the server takes its MOVE, else
    with one Graph Store PUT (``put_graph``)."""
    if target.moves_named_graphs:
        result = run(runner, side, "publish", "--endpoint", target.store, "--graph", graph, env=target.env())
        assert result.exit_code == 0, result.output
        return int(result.stdout.split()[1])
    return put_graph(target, side, graph)


def needs_move(target: Target) -> None:
    """Skip a test of ``sotakg publish`` itself on a server that refuses its MOVE."""
    if not target.moves_named_graphs:
        pytest.skip(f"{target.name} refuses MOVE of a named graph (Jena 4.5's MOVE check falls through to an error)")


@pytest.fixture(scope="session")
def published(server: Target, built_store: tuple[Path, Path]) -> Target:
    """The server with the shipped graph published into GRAPH by the command line (where the server
    takes publish's MOVE; else put there with one Graph Store PUT)."""
    from click.testing import CliRunner

    if not server.moves_named_graphs:
        assert put_graph(server, built_store, GRAPH) == TRIPLES
        return server
    result = run(CliRunner(), built_store, "publish", "--endpoint", server.store, "--graph", GRAPH, env=server.env())
    assert result.exit_code == 0, result.output
    assert f"Published {TRIPLES} triples" in result.stdout
    assert f"staged and swapped in with one MOVE at {server.update}" in result.stdout
    return server


def run(runner, built_store: tuple[Path, Path], *args: str, env: dict | None = None, **kwargs):
    data, store = built_store
    return runner.invoke(
        cli, ["--data", str(data), "--store", str(store), *args], env={**NO_CREDENTIALS, **(env or {})}, **kwargs
    )


def rows(json_text: str) -> tuple[list[str], list[str]]:
    """Variables and rows (as canonical JSON, in order) of a SPARQL JSON results document."""
    document = json.loads(json_text)
    return document["head"]["vars"], [json.dumps(row, sort_keys=True) for row in document["results"]["bindings"]]


def count(target: Target, graph: str) -> int:
    """Triples in ``graph`` on the server, asked with a plain GET (not through sotakg)."""
    query = urllib.parse.quote(f"SELECT (COUNT(*) AS ?n) WHERE {{ GRAPH <{graph}> {{ ?s ?p ?o }} }}")
    request = urllib.request.Request(
        f"{target.query}?query={query}", headers={"Accept": "application/sparql-results+json"}
    )
    with urllib.request.urlopen(request, timeout=10) as answer:
        return int(json.load(answer)["results"]["bindings"][0]["n"]["value"])


def staged(target: Target) -> int:
    """Triples left in any staging graph of sotakg's on the server (each publish stages its graph in
    one of its own, ``urn:sotakg:staging:<target digest>-<random>``)."""
    from sotakg.server.publish import STAGING_PREFIX

    text = f'SELECT (COUNT(*) AS ?n) WHERE {{ GRAPH ?g {{ ?s ?p ?o }} FILTER(STRSTARTS(STR(?g), "{STAGING_PREFIX}")) }}'
    request = urllib.request.Request(
        f"{target.query}?query={urllib.parse.quote(text)}", headers={"Accept": "application/sparql-results+json"}
    )
    with urllib.request.urlopen(request, timeout=10) as answer:
        return int(json.load(answer)["results"]["bindings"][0]["n"]["value"])


# ------------------------------------------------------------------------------------------ queries


def _cases() -> list[tuple[CannedQuery, list[str]]]:
    """Each canned query with its parameters' examples and, for a query of one record parameter, with
    each of RECORDS its pattern admits (an ADR's history is not a practice's: another path, another
    server bug)."""
    cases = []
    for query in CANNED:
        cases.append((query, [arg for p in query.params for arg in ("-p", p.usage())]))
        if len(query.params) == 1 and query.params[0].type == "id" and query.params[0].pattern:
            param = query.params[0]
            cases += [
                (query, ["-p", f"{param.name}={record}"])
                for record in RECORDS
                if record != param.example and re.fullmatch(param.pattern, record)
            ]
    return cases


CASES = _cases()


@pytest.mark.parametrize(("query", "params"), CASES, ids=[" ".join([q.name, *p[1::2]]) for q, p in CASES])
def test_every_canned_query_answers_as_the_embedded_store(runner, built_store, published, query, params):
    local = run(runner, built_store, "query", query.name, *params, "-f", "json")
    remote = run(
        runner, built_store, "query", query.name, *params, "-f", "json", "--endpoint", published.query, "--graph", GRAPH
    )
    assert local.exit_code == 0 and remote.exit_code == 0, remote.output
    variables, expected = rows(local.stdout)
    got_variables, got = rows(remote.stdout)
    assert got_variables == variables
    # Every canned query orders its rows, but not always totally (ties): the same rows, as a multiset.
    assert sorted(got) == sorted(expected)
    examples = [arg for p in query.params for arg in ("-p", p.usage())]
    # the examples are chosen to answer: not a comparison of two empty answers
    assert expected or params != examples or query.name == "orphan-papers"


def test_the_history_of_adrs_in_a_cycle_is_the_same_on_the_server(runner, published, data_copy, tmp_path):
    """A pull request can commit supersessions that go round (validate reports them; query and publish
    still run): the positions must not depend on whether a server's `+` gives back its start."""
    target = "https://example.org/graphs/sotakg-cycle"
    adrs = data_copy / "adrs"
    (adrs / "ADR-104.yaml").write_text("id: ADR-104\nsupersedes: [ADR-105]\nsuperseded_by: ADR-105\n", encoding="utf-8")
    (adrs / "ADR-105.yaml").write_text("id: ADR-105\nsupersedes: [ADR-104]\nsuperseded_by: ADR-104\n", encoding="utf-8")
    (adrs / "ADR-112.yaml").write_text("id: ADR-112\nsupersedes: [ADR-112]\n", encoding="utf-8")
    side = (data_copy, tmp_path / "store")
    publish_to(runner, published, side, target)
    for adr in ("ADR-104", "ADR-112"):
        local = run(runner, side, "query", "history", "-p", f"id={adr}", "-f", "json")
        remote = run(runner, side, "query", "history", "-p", f"id={adr}", "-f", "json",
                     "--endpoint", published.query, "--graph", target)  # fmt: skip
        assert local.exit_code == 0 and remote.exit_code == 0, remote.output
        assert sorted(rows(remote.stdout)[1]) == sorted(rows(local.stdout)[1]) != []


@pytest.mark.parametrize("method", ["get", "post-form", "auto"])
def test_each_protocol_method_gets_the_same_answer(runner, built_store, published, method):
    query = "SELECT ?p ?v WHERE { ?p sota:currentVersion/sota:versionNumber ?v FILTER(?v > 1) } ORDER BY ?p"
    local = run(runner, built_store, "sparql", query, "-f", "tsv")
    remote = run(
        runner, built_store, "sparql", query, "-f", "tsv", "--endpoint", published.query, "--graph", GRAPH,
        "--method", method,
    )  # fmt: skip
    assert remote.exit_code == 0, remote.output
    assert remote.stdout == local.stdout and local.stdout.count("\n") > 2


def test_a_direct_post_answers_on_oxigraph_and_times_out_on_virtuoso(runner, built_store, published):
    """Why ``auto`` never POSTs the query as its body: Virtuoso 7 never answers that; the deadline holds."""
    query = "SELECT (COUNT(*) AS ?n) WHERE { ?p a sota:Practice }"
    started = time.monotonic()
    result = run(
        runner, built_store, "sparql", query, "-f", "csv", "--endpoint", published.query, "--graph", GRAPH,
        "--method", "post-direct", "--timeout", "1",
    )  # fmt: skip
    if published.name == "virtuoso":
        assert result.exit_code == 1
        assert result.stderr.endswith(" did not answer within 1 s; raise --timeout or narrow the query\n"), (
            result.stderr
        )
        assert time.monotonic() - started < 5
    else:
        assert result.exit_code == 0, result.output
        assert result.stdout == "n\n42\n"


def test_a_long_query_goes_as_a_form_post_and_answers(runner, built_store, published):
    padding = "# " + "x" * 3000 + "\n"  # past the safe GET length: auto switches to a form POST
    query = padding + "SELECT (COUNT(*) AS ?n) WHERE { ?p a sota:Practice }"
    result = run(runner, built_store, "sparql", query, "-f", "csv", "--endpoint", published.query, "--graph", GRAPH)
    assert result.exit_code == 0, result.output
    assert result.stdout == "n\n42\n"


def test_ask_answers_true_and_false(runner, built_store, published):
    for query, expected in [
        ("ASK { id:SOTA-049 sota:status sota:Rejected }", "true"),
        ("ASK { id:nothing ?p ?o }", "false"),
    ]:
        result = run(
            runner, built_store, "sparql", query, "-f", "json", "--endpoint", published.query, "--graph", GRAPH
        )
        assert result.exit_code == 0, result.output
        assert json.loads(result.stdout)["boolean"] is (expected == "true")


@pytest.mark.parametrize("record", RECORDS)
def test_why_tells_the_same_story(runner, built_store, published, record):
    local = run(runner, built_store, "why", record)
    remote = run(runner, built_store, "why", record, "--endpoint", published.query, "--graph", GRAPH)
    assert local.exit_code == 0 and remote.exit_code == 0, remote.output
    assert remote.stdout == local.stdout


def test_views_and_the_site_are_made_on_the_server_as_on_the_embedded_store(runner, built_store, published, tmp_path):
    """Each view (the topic view's subquery and FILTER IN among them) and the whole site, from the
    server's graph: the same triples and the same pages as from the embedded store."""
    remote = ["--endpoint", published.query, "--graph", GRAPH]
    for name, params in (("citations", []), ("topic", ["-p", "topic=distributed-optimization"])):
        here = run(runner, built_store, "export", "view", name, *params, "-f", "nt")
        there = run(runner, built_store, "export", "view", name, *params, "-f", "nt", *remote)
        assert here.exit_code == 0 and there.exit_code == 0, there.output
        assert sorted(there.stdout.splitlines()) == sorted(here.stdout.splitlines()), name
        assert here.stdout.count("\n") > 20
    local, distant = tmp_path / "local", tmp_path / "remote"
    assert run(runner, built_store, "export", "site", str(local), "--mermaid").exit_code == 0
    result = run(runner, built_store, "export", "site", str(distant), "--mermaid", *remote)
    assert result.exit_code == 0, result.output
    pages = sorted(path.name for path in local.iterdir())
    assert sorted(path.name for path in distant.iterdir()) == pages
    for page in pages:
        assert (distant / page).read_text(encoding="utf-8") == (local / page).read_text(encoding="utf-8"), page


def test_validate_on_the_server_reports_what_the_embedded_store_reports(runner, built_store, published):
    local = run(runner, built_store, "validate", "--format", "json")
    remote = run(runner, built_store, "validate", "--format", "json", "--endpoint", published.query, "--graph", GRAPH)
    assert (local.exit_code, remote.exit_code) == (0, 0), remote.output
    assert json.loads(remote.stdout)["findings"] == json.loads(local.stdout)["findings"]
    assert len(json.loads(local.stdout)["findings"]) == 8


def test_the_piped_console_answers_as_on_the_embedded_store(runner, built_store, published):
    script = (
        ".run practices-citing paper=LIT-051\nSELECT (COUNT(*) AS ?n) WHERE { ?s a sota:Practice };\n.why ADR-026\n"
    )
    local = run(runner, built_store, "console", "-f", "csv", input=script)
    remote = run(
        runner, built_store, "console", "-f", "csv", "--endpoint", published.query, "--graph", GRAPH, input=script
    )
    assert local.exit_code == 0 and remote.exit_code == 0, remote.output
    assert remote.stdout == local.stdout
    assert "SOTA-076" in remote.stdout and "\nn\n42\n" in remote.stdout


# ------------------------------------------------------------------------------------------ publishing


def test_publishing_again_replaces_the_graph_and_leaves_no_staging_graph(
    runner, built_store, published, data_copy, tmp_path
):
    needs_move(published)
    other = "https://example.org/graphs/sotakg-replaced"
    first = run(runner, built_store, "publish", "--endpoint", published.store, "--graph", other, env=published.env())
    assert first.exit_code == 0, first.output
    assert count(published, other) == TRIPLES
    (data_copy / "practices" / "SOTA-049.yaml").unlink()
    smaller = run(
        runner, (data_copy, tmp_path / "store"), "publish", "--endpoint", published.store, "--graph", other,
        env=published.env(),
    )  # fmt: skip
    assert smaller.exit_code == 0, smaller.output
    triples = int(smaller.stdout.split()[1])
    assert 700 < triples < TRIPLES
    assert count(published, other) == triples
    assert staged(published) == 0


def test_readers_see_the_old_graph_or_the_new_one_never_half(runner, built_store, published, data_copy, tmp_path):
    """A reader polls the graph's size while it is published over and over, alternating two versions:
    every answer is one of the two sizes."""
    needs_move(published)
    target = "https://example.org/graphs/sotakg-swapped"
    (data_copy / "practices" / "SOTA-049.yaml").unlink()
    versions = [built_store, (data_copy, tmp_path / "store")]
    first = run(runner, versions[0], "publish", "--endpoint", published.store, "--graph", target, env=published.env())
    assert first.exit_code == 0, first.output
    smaller = run(runner, versions[1], "publish", "--endpoint", published.store, "--graph", target, env=published.env())
    sizes = {TRIPLES, int(smaller.stdout.split()[1])}
    seen: list[int] = []
    stop = threading.Event()

    def read() -> None:
        deadline = time.monotonic() + 60  # bounded, whatever happens to the publisher
        while not stop.is_set() and time.monotonic() < deadline:
            seen.append(count(published, target))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        for round_ in range(6):
            again = run(
                runner, versions[round_ % 2], "publish", "--endpoint", published.store, "--graph", target,
                env=published.env(),
            )  # fmt: skip
            assert again.exit_code == 0, again.output
    finally:
        stop.set()
        reader.join(65)
    assert len(seen) > 3
    assert set(seen) <= sizes, sorted(set(seen) - sizes)


def year_on(target: Target, graph: str, record: str) -> list[str]:
    """The years the server holds for ``record`` in ``graph``, as their values (not lexical forms)."""
    query = urllib.parse.quote(
        "SELECT ?year WHERE { GRAPH <" + graph + "> { "
        f"<https://w3id.org/sotakg/id/{record}> <https://w3id.org/sotakg/ontology#year> ?year }} }}"
    )
    request = urllib.request.Request(
        f"{target.query}?query={query}", headers={"Accept": "application/sparql-results+json"}
    )
    with urllib.request.urlopen(request, timeout=10) as answer:
        return [row["year"]["value"] for row in json.load(answer)["results"]["bindings"]]


def test_publish_since_sends_the_change_whatever_form_the_server_writes_a_value_in(
    runner, published, data_copy, tmp_path
):
    """Virtuoso writes the year -5 back as "-005", not as sent ("-0005"): the server still holds BASE's
    graph, so only the change goes, and the change replaces that year."""
    import shutil as files

    from .gitrepo import set_fields

    target = "https://example.org/graphs/sotakg-since"
    set_fields(data_copy / "papers" / "LIT-051.yaml", year="-5")
    base = tmp_path / "base"
    files.copytree(data_copy, base)
    head = (data_copy, tmp_path / "store")
    args = ["publish", "--endpoint", published.store, "--graph", target]
    publish_to(runner, published, (base, tmp_path / "base-store"), target)
    assert len(year_on(published, target, "LIT-051")) == 1

    set_fields(data_copy / "papers" / "LIT-051.yaml", year="-6", authors="Someone Else")
    since = run(runner, head, *args, "--since", str(base), env=published.env())
    assert since.exit_code == 0, since.output
    assert since.stdout.startswith(f"Updated the graph <{target}> at {published.update}: 2 triples inserted, 2 deleted")
    assert [int(year) for year in year_on(published, target, "LIT-051")] == [-6]
    full = publish_to(runner, published, head, target + "-full")
    assert count(published, target) == count(published, target + "-full") == full

    again = run(runner, head, *args, "--since", str(data_copy), env=published.env())
    assert "already holds this graph; nothing sent to " in again.stdout, again.output


def test_the_default_graph(runner, built_store, published):
    needs_move(published)
    result = run(runner, built_store, "publish", "--endpoint", published.store, env=published.env())
    if published.name == "virtuoso":
        # Virtuoso's default graph is the union of all graphs: there is none to replace.
        assert result.exit_code == 1
        assert "requires declaration of a plain default graph" in result.stderr
        assert result.stderr.rstrip().endswith(
            "this server has no default graph to replace: pass --graph IRI to publish into a named graph\n"
            f"the graph at {published.store}?default was left as it was"
        )
        assert staged(published) == 0  # the staging graph was dropped
        return
    assert result.exit_code == 0, result.output
    answer = run(
        runner,
        built_store,
        "sparql",
        "SELECT (COUNT(*) AS ?n) { ?s ?p ?o }",
        "-f",
        "csv",
        "--endpoint",
        published.query,
    )
    assert answer.stdout == f"n\n{TRIPLES}\n"


def test_wrong_credentials_are_refused(runner, built_store, published):
    if not published.writer:
        pytest.skip(f"the {published.name} server here has no accounts")
    wrong = {"SOTAKG_USER": published.writer["SOTAKG_USER"], "SOTAKG_PASSWORD": "not-the-password"}
    result = run(runner, built_store, "publish", "--endpoint", published.store, "--graph", GRAPH, env=wrong)
    assert result.exit_code == 1
    assert "answered HTTP 401 Unauthorized" in result.stderr
    assert "the credentials from SOTAKG_USER/SOTAKG_PASSWORD were refused; check them" in result.stderr
    assert "not-the-password" not in result.output
    assert count(published, GRAPH) == TRIPLES  # the published graph is untouched


def test_a_read_only_endpoint_says_so(runner, built_store, published, tmp_path):
    if published.read_only_store is None:
        pytest.skip("covered by test_publish.py against oxigraph serve-read-only")
    result = run(runner, built_store, "publish", "--endpoint", published.read_only_store, "--graph", GRAPH)
    assert result.exit_code == 1
    assert "answered HTTP 403 Forbidden: " in result.stderr
    assert "Permission denied" in result.stderr and "<" not in result.stderr.splitlines()[0]
    assert "the server is read-only here: it refuses to change the graph" in result.stderr
    assert "SOTAKG_USER" not in result.stderr and "credentials" not in result.stderr
    assert count(published, GRAPH) == TRIPLES


def test_a_missing_virtuoso_is_named_with_its_install_command(monkeypatch):
    import shutil as shutil_module

    monkeypatch.setattr(shutil_module, "which", lambda name: None)
    assert virtuoso_missing() == (
        "virtuoso-t and isql-vt not installed; install Virtuoso 7 with: apt-get install -y virtuoso-opensource"
    )


def test_a_refused_move_leaves_the_graph_and_no_staging_graph(runner, built_store, published, data_copy, tmp_path):
    """On a server that refuses the MOVE (Jena 4.5), publish says so, names the graph it left alone,
    and drops the staging graph it had filled."""
    if published.moves_named_graphs:
        pytest.skip(f"{published.name} takes the MOVE (tested by the publishing tests above)")
    from sotakg.server.publish import graph_store_url

    (data_copy / "practices" / "SOTA-049.yaml").unlink()
    result = run(
        runner, (data_copy, tmp_path / "store"), "publish", "--endpoint", published.store, "--graph", GRAPH,
        env=published.env(),
    )  # fmt: skip
    assert result.exit_code == 1
    assert result.stderr.startswith(f"Error: {published.update} answered HTTP 400 Bad Request: ")
    assert "Invalid source target for operation" in result.stderr
    assert result.stderr.rstrip().endswith(f"the graph at {graph_store_url(published.store, GRAPH)} was left as it was")
    assert count(published, GRAPH) == TRIPLES
    assert staged(published) == 0
    # The way round it the README gives: one PUT onto the target.
    target = "https://example.org/graphs/sotakg-no-swap"
    put = run(
        runner, (data_copy, tmp_path / "store"), "publish", "--endpoint", published.store, "--graph", target,
        "--no-swap", env=published.env(),
    )  # fmt: skip
    assert put.exit_code == 0, put.output
    assert 700 < count(published, target) == int(put.stdout.split()[1]) < TRIPLES


# ------------------------------------------------------------------------------------------ found by a review


@pytest.fixture(scope="module")
def virtuoso_target(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    """A real Virtuoso 7 configured as tests/test_servers_shared.py configures it."""
    yield from _virtuoso(tmp_path_factory.mktemp("review-virtuoso"))


#: Rows a capped Virtuoso answers at most: below the shipped graph's 806 triples, as Debian's default
#: of 10000 is below the graph of a full anthology (449 practices, about 20 triples each).
CAP = 500


@pytest.fixture(scope="module")
def capped_virtuoso(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    """A real Virtuoso 7 whose ResultSetMaxRows is CAP (Debian's virtuoso.ini ships 10000)."""
    missing = virtuoso_missing()
    if missing:
        pytest.skip(missing)
    ini = servers.VIRTUOSO_INI
    assert "ResultSetMaxRows      = 1000000" in ini
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(
            servers, "VIRTUOSO_INI", ini.replace("ResultSetMaxRows      = 1000000", f"ResultSetMaxRows      = {CAP}")
        )
        starter = _virtuoso(tmp_path_factory.mktemp("review-virtuoso-capped"))
        target = next(starter)
    try:
        yield target
    finally:
        starter.close()


@pytest.fixture(scope="module", params=["virtuoso", "oxigraph"])
def mover(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    """Each server that takes publish's MOVE (Virtuoso: the module's one)."""
    if request.param == "virtuoso":
        yield request.getfixturevalue("virtuoso_target")
        return
    yield from _oxigraph(tmp_path_factory.mktemp("review-mover-oxigraph"))


def published_side(runner, target: Target, side: tuple[Path, Path], graph: str) -> int:
    """Publish ``side`` into ``graph`` with ``sotakg publish`` (staged, then one MOVE)."""
    result = run(runner, side, "publish", "--endpoint", target.store, "--graph", graph, env=target.env())
    assert result.exit_code == 0, result.output
    return int(result.stdout.split()[1])


# ------------------------------------------------------------------------------------------ values


def _local_and_remote(
    runner, target: Target, side: tuple[Path, Path], graph: str, name: str, parameter: str
) -> tuple[str, str]:
    """The JSON answers of canned query ``name`` (one ``-p`` parameter) on ``side``'s store and on
    ``target``, after publishing ``side`` there into ``graph``."""
    publish_to(runner, target, side, graph)
    args = ["query", name, "-p", parameter, "-f", "json"]
    local = run(runner, side, *args)
    remote = run(runner, side, *args, "--endpoint", target.query, "--graph", graph)
    assert local.exit_code == 0 and remote.exit_code == 0, remote.output
    return local.stdout, remote.stdout


def test_a_canned_query_shows_a_year_before_1_as_the_embedded_store_does_on_virtuoso(
    runner, virtuoso_target, data_copy, tmp_path
):
    """The bug: Virtuoso 7 stores the xsd:gYear "-0005" (year -5, which the records allow: -9999 to
    9999) and writes it back as "-005", a form xsd:gYear does not even allow. sotakg knows this
    (``publish_since.comparable`` reads both as the same value when it compares graphs), but the query
    path does not: ``sotakg query papers-of -p practice=SOTA-017 --endpoint`` shows the year as
    "-005"^^xsd:gYear where the embedded store shows "-0005" (so do ``most-cited-papers``,
    ``statements-about`` and the byline of ``rejection-of``).
    The rule: a canned query answers the same on every server as locally."""
    from .gitrepo import set_fields

    graph = "https://example.org/graphs/review-year"
    set_fields(data_copy / "papers" / "LIT-016.yaml", year="-5")  # the paper SOTA-017 cites
    local, remote = _local_and_remote(
        runner, virtuoso_target, (data_copy, tmp_path / "store"), graph, "papers-of", "practice=SOTA-017"
    )
    assert '"-0005"' in local
    assert rows(remote) == rows(local)


# ------------------------------------------------------------------------------------------ cut answers


def test_a_select_answer_virtuoso_cut_at_its_row_limit_is_not_shown_as_whole(runner, built_store, capped_virtuoso):
    """The bug: Virtuoso answers at most ResultSetMaxRows rows (10000 in Debian's virtuoso.ini) and
    says that it cut the answer only in the header ``X-SPARQL-MaxRows: N`` of an HTTP 200.
    ``RemoteBackend.run`` reads neither that header nor anything else that would tell, so
    ``sotakg sparql "SELECT ?s ?p ?o WHERE { ?s ?p ?o }" --endpoint`` on the 806-triple graph exits
    0 with the first 500 rows, as if they were all.
    The rule: a truncated result is an error with a clear message and a non-zero exit, never a cut
    answer presented as complete."""
    graph = "https://example.org/graphs/review-capped-select"
    triples = published_side(runner, capped_virtuoso, built_store, graph)
    assert triples > CAP
    result = run(
        runner, built_store, "sparql", "SELECT ?s ?p ?o WHERE { ?s ?p ?o }", "-f", "json",
        "--endpoint", capped_virtuoso.query, "--graph", graph,
    )  # fmt: skip
    if result.exit_code == 0:
        assert len(rows(result.stdout)[1]) == triples, "a cut answer was shown as the whole answer"
    else:
        assert str(CAP) in result.stderr, result.stderr  # the message names the server's limit


def test_validate_on_virtuoso_does_not_check_a_graph_cut_at_its_row_limit(runner, built_store, capped_virtuoso):
    """The bug: ``validate --endpoint`` fetches the graph with one CONSTRUCT (``remote.fetch_graph``).
    Virtuoso cuts a CONSTRUCT answer at ResultSetMaxRows too, and there without even the
    X-SPARQL-MaxRows header; sotakg checks the shapes on the 500 triples it got and reports hundreds of
    violations (practices without a title, a status, a topic...) that the published graph does not
    have: the embedded store reports none. With other data the cut can as well drop the triples that
    violate a rule, and a check that should fail passes.
    The rule: a cut answer is never presented as complete; validate on a server reports what the
    embedded store reports, or fails saying the server did not give the whole graph."""
    graph = "https://example.org/graphs/review-capped-validate"
    published_side(runner, capped_virtuoso, built_store, graph)
    local = run(runner, built_store, "validate", "--format", "json")
    remote = run(
        runner, built_store, "validate", "--format", "json", "--endpoint", capped_virtuoso.query, "--graph", graph
    )
    assert local.exit_code == 0, local.output
    try:
        findings = json.loads(remote.stdout)["findings"]
    except (json.JSONDecodeError, KeyError):
        findings = None
    if findings is not None:
        violations = sum(1 for finding in findings if finding.get("severity") == "violation")
        assert findings == json.loads(local.stdout)["findings"], (
            f"validate --endpoint exited {remote.exit_code} with {violations} violations found in a cut graph"
        )
    else:
        assert remote.exit_code != 0 and "Traceback" not in remote.output, remote.output


# ------------------------------------------------------------------------------------------ races


def test_two_publishes_of_one_graph_at_once_leave_the_graph_one_of_them_reported(
    runner, mover, built_store, data_copy, tmp_path
):
    """The bug: every publish of a graph stages it in the same staging graph
    (``publish.staging_graph`` is a hash of the target's IRI alone). Two publishes of one graph at once
    (two CI jobs; here interleaved deterministically: A puts its staging graph, B puts the same staging
    graph, A moves it, B moves it): A's MOVE moves B's triples onto the target and reports A's graph as
    published; B's MOVE finds no staging graph. Virtuoso answers that MOVE with 200 "-- done" and
    clears the target, so both report success and the target is left EMPTY; Oxigraph refuses it, so
    A reports success (806 triples) while the server holds B's graph.
    The rule: the graph published is exactly the local graph; never a silently partial (here empty)
    publish. A staging graph of its own for each publish (a random suffix) keeps two apart."""
    from sotakg.server import publish as publishing

    graph = "https://example.org/graphs/review-race"
    (data_copy / "practices" / "SOTA-049.yaml").unlink()
    smaller = (data_copy, tmp_path / "store")
    environ = {key: value for key, value in mover.env().items() if value is not None}
    original = publishing._update
    b_staged, a_moved = threading.Event(), threading.Event()
    outcome: dict[str, object] = {}

    def publish_b() -> None:
        try:
            outcome["B"] = publishing.publish(smaller[0], smaller[1], mover.store, graph, environ=environ, timeout=30)
        except Exception as error:  # noqa: BLE001 - the outcome is what is checked
            outcome["B"] = error

    def interleaved(url: str, update: str, timeout: float, env) -> object:
        if not update.startswith("MOVE"):
            return original(url, update, timeout, env)
        if threading.current_thread().name == "publish-B":
            b_staged.set()  # B has put its staging graph; it moves it after A's move
            a_moved.wait(30)
            return original(url, update, timeout, env)
        other = threading.Thread(target=publish_b, name="publish-B", daemon=True)
        other.start()
        assert b_staged.wait(30), "B never reached its MOVE"
        try:
            return original(url, update, timeout, env)
        finally:
            a_moved.set()
            outcome["thread"] = other

    # Build B's store first, so that no build is part of the race (built_store is built already).
    assert run(runner, smaller, "build").exit_code == 0
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(publishing, "_update", interleaved)
        try:
            outcome["A"] = publishing.publish(
                built_store[0], built_store[1], mover.store, graph, environ=environ, timeout=30
            )
        except Exception as error:  # noqa: BLE001
            outcome["A"] = error
        thread = outcome.get("thread")
        if isinstance(thread, threading.Thread):
            thread.join(60)
    reported = {
        name: report.triples
        for name, report in outcome.items()
        if name in ("A", "B") and isinstance(report, publishing.PublishReport)
    }
    held = count(mover, graph)
    assert reported, outcome
    assert held > 0, f"both publishes {sorted(reported)} reported success and the graph is empty"
    # The graph on the server is the graph of the publish that reported success last (B, when both did).
    last = "B" if "B" in reported else "A"
    assert held == reported[last], (
        f"{last} reported publishing {reported[last]} triples; the server holds {held} "
        f"(outcomes: { {k: (v if isinstance(v, Exception) else 'ok') for k, v in outcome.items() if k != 'thread'} })"
    )


def _graph_on(target: Target, graph: str) -> set[str]:
    """The triples of ``graph`` on the server, fetched with a plain Graph Store GET (not through sotakg)."""
    import urllib.parse
    import urllib.request

    from pyoxigraph import RdfFormat, parse

    url = f"{target.read_only_store or target.store}?graph={urllib.parse.quote(graph, safe='')}"
    request = urllib.request.Request(url, headers={"Accept": "application/n-triples"})
    with urllib.request.urlopen(request, timeout=30) as answer:
        return {str(triple) for triple in parse(answer.read(), format=RdfFormat.N_TRIPLES)}


def _local_graph(runner, side: tuple[Path, Path]) -> set[str]:
    from pyoxigraph import RdfFormat, parse

    exported = run(runner, side, "export", "rdf", "-f", "nt")
    assert exported.exit_code == 0, exported.output
    return {str(triple) for triple in parse(exported.stdout.encode("utf-8"), format=RdfFormat.N_TRIPLES)}


def test_publish_since_does_not_apply_its_change_to_a_graph_replaced_after_its_check(
    runner, mover, built_store, data_copy, tmp_path
):
    """The bug: ``publish --since BASE`` fetches the server's graph, checks that it is BASE's, and then
    sends DELETE DATA/INSERT DATA in a second, separate request: nothing ties the update to what was
    checked. When another publish (a second CI job) replaces the graph between the two requests, the
    change BASE→HEAD is applied to that other graph: the server ends with a graph that is neither
    HEAD's nor the other publish's (here: the other graph, without SOTA-049, with HEAD's new authors of
    LIT-051), and publish reports "Updated ...: 1 triples inserted, 1 deleted", exit 0.
    The rule: the graph published is exactly the local graph, or the command fails; the docstring's
    "only when they are the same is the change sent" must hold when the change is applied, e.g. with an
    update whose WHERE clause requires what was checked (a marker triple holding BASE's digest,
    replaced by HEAD's in the same update), falling back to a full publish when it did not apply."""
    import shutil

    from sotakg.server import publish as publishing
    from sotakg.server import publish_since

    from .gitrepo import set_fields

    graph = "https://example.org/graphs/review-since-race"
    base = tmp_path / "base"
    shutil.copytree(data_copy, base)
    other = tmp_path / "other"
    shutil.copytree(data_copy, other)
    (other / "practices" / "SOTA-049.yaml").unlink()
    set_fields(data_copy / "papers" / "LIT-051.yaml", authors="Someone Else")
    head = (data_copy, tmp_path / "store")
    other_side = (other, tmp_path / "other-store")
    for side in (head, other_side, (base, tmp_path / "base-store")):
        assert run(runner, side, "build").exit_code == 0
    published_side(runner, mover, (base, tmp_path / "base-store"), graph)
    environ = {key: value for key, value in mover.env().items() if value is not None}

    original = publish_since.authorized_request
    replaced = []

    def meanwhile(method: str, url: str, **kwargs):
        if method == "POST" and not replaced:  # the update, after the check: another job publishes now
            replaced.append(publishing.publish(other_side[0], other_side[1], mover.store, graph, environ=environ))
        return original(method, url, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(publish_since, "authorized_request", meanwhile)
        try:
            report = publish_since.publish_since(
                head[0], head[1], mover.store, str(base), graph, environ=environ, timeout=30
            )
        except Exception as error:  # noqa: BLE001 - failing is one right outcome
            report = error
    assert replaced, "the update was never sent"
    held = _graph_on(mover, graph)
    if isinstance(report, Exception):
        assert held == _local_graph(runner, other_side), "a failed publish --since changed the graph"
        return
    assert held in (_local_graph(runner, head), _local_graph(runner, other_side)), (
        f"publish --since reported {report.describe()!r}; the server holds {len(held)} triples, "
        f"neither HEAD's graph nor the one published in between"
    )


# ------------------------------------------------------------------------------------------ case


@pytest.mark.xfail(
    strict=True,
    reason="known: Virtuoso 7's LCASE maps a word-final capital sigma to a medial one; the canned query "
    "relies on the engine's LCASE (not fixed: a case fold in Python would need every row fetched)",
)
def test_practices_mentioning_finds_on_virtuoso_what_it_finds_locally(runner, virtuoso_target, data_copy, tmp_path):
    """The bug: ``practices-mentioning`` matches "ignoring case" with
    ``CONTAINS(LCASE(?title), LCASE(?text))``, and the engines lower-case differently: the embedded
    store (Rust's ``to_lowercase``) and Jena (Java's) write the Greek capital sigma at the end of a word
    as the final sigma (ΛΟΓΟΣ → λογος), as Unicode's full case mapping says; Virtuoso 7 as a medial
    sigma (λογοσ). So ``sotakg query practices-mentioning -p text=λογος`` (the word as a Greek reader
    types it) finds the practice whose title says ΛΟΓΟΣ on the embedded store and on Jena, and nothing
    on Virtuoso. (Virtuoso also lower-cases İ to a plain i, and leaves ẞ U+1E9E and Ǆ as they are.)
    Titles are verbatim text from the pages and may be in any script.
    The rule: a canned query answers the same on every server as locally. (A fix: compare case-folded
    text in Python after the server returns the candidate rows, or match with one rule all engines
    share.)"""
    from .gitrepo import set_fields

    graph = "https://example.org/graphs/review-case"
    set_fields(data_copy / "practices" / "SOTA-189.yaml", title='"Track the ΛΟΓΟΣ of each run"')
    local, remote = _local_and_remote(
        runner, virtuoso_target, (data_copy, tmp_path / "store"), graph, "practices-mentioning", "text=λογος"
    )
    assert "SOTA-189" in local
    assert rows(remote) == rows(local)
