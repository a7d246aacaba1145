"""What sotakg refuses so that no input reaches the network, expands, or reaches outside the project:
XML entities, remote contexts, and the hostile checkout of a pull request (issue 13's threat model)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import subprocess
import sys
import tracemalloc
from pathlib import Path

import pytest

from sotakg.cli import cli
from sotakg.graph.store import GENERATION_MARKER
from sotakg.query.results import parse_graph, parse_sparql_results
from sotakg.records.sources import SourceTooLarge, read_bounded

from .conftest import SEED_PAGE, SHIPPED_DATA, subprocess_env

BILLION_LAUGHS = b"""<?xml version="1.0"?>
<!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">]>
<rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#">
  <rdf:Description rdf:about="http://example.org/a"><rdf:value>&lol2;</rdf:value></rdf:Description>
</rdf:RDF>"""

RESULTS_WITH_ENTITY = b"""<?xml version="1.0"?>
<!DOCTYPE sparql [<!ENTITY x SYSTEM "http://127.0.0.1:9/secret">]>
<sparql xmlns="http://www.w3.org/2005/sparql-results#"><head/><boolean>&x;</boolean></sparql>"""


def test_rdfxml_with_a_doctype_is_refused():
    with pytest.raises(ValueError, match="refused: XML with a DOCTYPE or ENTITY declaration"):
        parse_graph(BILLION_LAUGHS, "rdfxml")


def test_rdfxml_without_a_doctype_is_read():
    plain = BILLION_LAUGHS.replace(b"&lol2;", b"1").split(b"\n", 2)
    document = plain[0] + b"\n" + plain[2]
    assert len(parse_graph(document, "rdfxml").triples) == 1


def test_sparql_xml_results_with_an_entity_are_refused():
    with pytest.raises(ValueError, match="refused"):
        parse_sparql_results(RESULTS_WITH_ENTITY, "xml")


def test_jsonld_remote_contexts_are_never_fetched():
    document = b'{"@context": "http://127.0.0.1:9/context.jsonld", "@id": "http://example.org/a", "name": "x"}'
    with pytest.raises(ValueError, match="remote contexts"):
        parse_graph(document, "jsonld")


# ------------------------------------------------------------------------ hostile paths and values


def tree_digest(root: Path) -> dict[str, str]:
    """Every entry under ``root`` (links as their target text, files as a hash), to compare later;
    the build lock, which sotakg makes in the store folder before it looks at the link, left out."""
    found = {}
    for path in sorted(root.rglob("*")):
        rel = str(path.relative_to(root))
        if rel == ".sotakg/store.lock":
            continue
        if path.is_symlink():
            found[rel] = "link:" + os.readlink(path)
        elif path.is_file():
            found[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
        else:
            found[rel] = "dir" if path.is_dir() else "other"
    return found


@pytest.fixture
def victim(workdir: Path) -> Path:
    """A folder outside the data folder and the store, with a file that must survive every test."""
    folder = workdir / "victim"
    folder.mkdir()
    (folder / "keep.txt").write_text("SECRET-LINE root:x:0:0\n")
    return folder


def replace_field(workdir: Path, record: str, name: str, line: str) -> Path:
    folder = {"SOTA": "practices", "LIT": "papers", "ADR": "adrs"}[record.split("-")[0]]
    path = workdir / "data" / folder / f"{record}.yaml"
    lines = [ln for ln in path.read_text(encoding="utf-8").splitlines() if not ln.startswith(f"{name}:")]
    lines.insert(1, line)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def a_device(path: Path) -> Path:
    """A character device like /dev/zero, made inside the test's folder (needs root)."""
    try:
        os.mknod(path, stat.S_IFCHR | 0o600, os.makedev(1, 5))
    except PermissionError:
        pytest.skip("making a device node needs root")
    return path


def test_a_record_that_is_a_device_is_refused_not_read(runner, workdir):
    a_device(workdir / "data" / "practices" / "SOTA-996.yaml")
    result = runner.invoke(cli, ["build"])
    assert result.exit_code == 1
    assert "data/practices/SOTA-996.yaml: not a regular file" in result.output


def test_a_record_that_is_a_fifo_does_not_hang_the_build(runner, workdir):
    os.mkfifo(workdir / "data" / "practices" / "SOTA-997.yaml")
    result = runner.invoke(cli, ["build"])
    assert result.exit_code == 1
    assert "data/practices/SOTA-997.yaml: not a regular file" in result.output


def test_an_implausible_version_is_refused_before_it_is_compiled(runner, workdir):
    path = workdir / "data" / "practices" / "SOTA-049.yaml"
    path.write_text(path.read_text().replace("version: 1", "version: 100000000"))
    result = runner.invoke(cli, ["build"])
    assert result.exit_code == 1
    assert "data/practices/SOTA-049.yaml:2: 'version' is 100000000, more than any real record has" in result.output


#: The practice of the audit: a few bytes that asked for a chain of versions (1000 were accepted, each
#: file took seconds to validate, 50 of them stalled CI for minutes).
LONG_CHAIN = "id: SOTA-500\nversion: {}\ntitle: t\nstatus: Proposed\ntopic: distributed-optimization\nsummary: s\n"


def test_a_practice_one_version_past_the_cap_is_refused_with_its_file_line_and_record(runner, workdir):
    from sotakg.records.schema import HIGHEST

    assert HIGHEST["version"] == 100
    (workdir / "data" / "practices" / "SOTA-500.yaml").write_text(LONG_CHAIN.format(101))
    why = "'version' is 101, more than any real record has (at most 100) (SOTA-500)"
    result = runner.invoke(cli, ["build"])
    assert result.exit_code == 1
    assert result.output == f"Error: 1 problem in the data:\ndata/practices/SOTA-500.yaml:2: {why}\n"
    result = runner.invoke(cli, ["validate"])
    assert result.exit_code == 1
    assert result.output.startswith(f"data/practices/SOTA-500.yaml:2: [data-readable] violation: {why}\n")


def test_fifty_practices_at_the_version_cap_validate_clean(runner, workdir):
    # (How long it takes is for benchmarks/, not a test: that the cycle rules run in one pass over
    # the chains, not as a path walked from every version, is held in tests/test_shacl_compiler.py.)
    for n in range(500, 550):
        (workdir / "data" / "practices" / f"SOTA-{n}.yaml").write_text(LONG_CHAIN.replace("500", str(n)).format(100))
    result = runner.invoke(cli, ["validate"])
    assert result.exit_code == 0, result.output
    assert "0 violations" in result.output


def test_importing_a_device_is_refused(runner, tmp_path):
    device = a_device(tmp_path / "zero")
    result = runner.invoke(cli, ["--data", str(tmp_path / "data"), "import", "markdown", str(device)])
    assert result.exit_code == 1
    assert f"cannot import {device}: not a regular file" in result.output


# ---------------------------------------------------------------- 1. the store removes only what it made


@pytest.mark.parametrize("command", [["build"], ["build", "--force"], ["query", "adrs"], ["why", "SOTA-049"]])
@pytest.mark.parametrize("target", ["../victim", "ABSOLUTE", "..", "../..", "store.gen-abc-1"])
def test_a_committed_store_link_to_elsewhere_is_refused_and_nothing_removed(runner, workdir, victim, target, command):
    (workdir / ".sotakg").mkdir()
    if target == "ABSOLUTE":
        target = str(victim)
    elif target == "store.gen-abc-1":  # the right name, but a link to the victim rather than a generation
        os.symlink(victim, workdir / ".sotakg" / target)
    os.symlink(target, workdir / ".sotakg" / "store")
    before = tree_digest(workdir)
    result = runner.invoke(cli, command)
    assert result.exit_code == 1, result.output
    assert "which is not a store generation sotakg made; sotakg removes nothing there." in result.output
    assert "Remove the link (rm .sotakg/store) and run 'sotakg build'" in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert tree_digest(workdir) == before


@pytest.mark.parametrize("forgery", ["no-marker", "copied-marker"])
def test_a_committed_generation_is_not_taken_for_one_sotakg_made(runner, workdir, forgery):
    assert runner.invoke(cli, ["build"]).exit_code == 0
    real = workdir / ".sotakg" / os.readlink(workdir / ".sotakg" / "store")
    forged = workdir / ".sotakg" / "store.gen-f00d-1"
    # What a checkout holding a committed .sotakg has: the files, but not the directory sotakg marked.
    shutil.copytree(real, forged)
    if forgery == "no-marker":
        (forged / GENERATION_MARKER).unlink()
    os.unlink(workdir / ".sotakg" / "store")
    os.symlink(forged.name, workdir / ".sotakg" / "store")
    before = tree_digest(workdir)
    result = runner.invoke(cli, ["why", "SOTA-049"])
    assert result.exit_code == 1
    assert "'store.gen-f00d-1', which is not a store generation sotakg made" in result.output
    assert tree_digest(workdir) == before


def test_leftovers_are_removed_only_when_sotakg_made_them(runner, workdir, victim):
    assert runner.invoke(cli, ["build"]).exit_code == 0
    sotakg_dir = workdir / ".sotakg"
    os.symlink(victim, sotakg_dir / "store.gen-dead-2")  # a link named like a generation
    foreign = sotakg_dir / "store.gen-beef-3"  # a folder named like one, not marked
    foreign.mkdir()
    (foreign / "notes.txt").write_text("mine")
    (sotakg_dir / "store.gen-cafe-4").mkdir()  # a build killed before its marker: empty
    os.symlink("store.gen-dead-2", sotakg_dir / "store.link-5")  # a half-made link
    victim_before = tree_digest(victim)
    assert runner.invoke(cli, ["build", "--force"]).exit_code == 0
    names = sorted(p.name for p in sotakg_dir.iterdir())
    current = os.readlink(sotakg_dir / "store")
    assert names == sorted(["store", "store.lock", current, "store.gen-dead-2", "store.gen-beef-3"])
    assert (foreign / "notes.txt").read_text() == "mine"
    assert tree_digest(victim) == victim_before


def test_a_store_folder_that_is_a_link_is_refused(runner, workdir, victim):
    os.symlink(victim, workdir / ".sotakg")
    before = tree_digest(victim)
    result = runner.invoke(cli, ["build"])
    assert result.exit_code == 1
    assert "the store folder .sotakg is a symbolic link, and sotakg does not follow it" in result.output
    assert tree_digest(victim) == before


def test_a_lock_file_that_is_a_link_is_never_written_through(runner, workdir, victim):
    (workdir / ".sotakg").mkdir()
    os.symlink(victim / "keep.txt", workdir / ".sotakg" / "store.lock")
    result = runner.invoke(cli, ["build"])
    assert result.exit_code == 1
    assert "cannot use .sotakg/store.lock as the build lock" in result.output
    assert (victim / "keep.txt").read_text() == "SECRET-LINE root:x:0:0\n"


def test_a_lock_file_that_is_a_fifo_is_an_error_not_a_hang(runner, workdir):
    (workdir / ".sotakg").mkdir()
    os.mkfifo(workdir / ".sotakg" / "store.lock")
    result = runner.invoke(cli, ["build"])
    assert result.exit_code == 1
    assert "cannot use .sotakg/store.lock as the build lock (not a regular file)" in result.output


# ----------------------------------------------------------------------------------- 2. terms, not text

INJECTION = (
    'status: "Active> .\\n<https://w3id.org/sotakg/id/SOTA-049> <http://purl.org/dc/terms/title> \\"PWNED\\" .\\n'
    '<https://w3id.org/sotakg/id/x> <https://w3id.org/sotakg/ontology#status> <https://w3id.org/sotakg/ontology#A"'
)


def test_a_status_cannot_add_statements_and_is_reported_by_validate(runner, workdir):
    replace_field(workdir, "SOTA-049", "status", INJECTION)
    assert runner.invoke(cli, ["build"]).exit_code == 0
    why = runner.invoke(cli, ["why", "SOTA-049"])
    assert why.output.splitlines()[0] == "SOTA-049: Set buffer size to network bandwidth-delay product"
    assert "PWNED" not in why.output.splitlines()[0]
    count = runner.invoke(
        cli, ["sparql", "-f", "csv", 'SELECT (COUNT(*) AS ?n) WHERE { ?s dcterms:title "PWNED" }']
    ).output
    assert count.split() == ["n", "0"]
    report = runner.invoke(cli, ["validate"])
    assert report.exit_code == 1
    assert "data/practices/SOTA-049.yaml:2: [practice-status] violation:" in report.output


def test_the_n_triples_of_the_records_hold_exactly_their_statements(tmp_path):
    from pyoxigraph import RdfFormat, parse

    from sotakg.graph.rdf import anthology_ntriples, anthology_quads
    from sotakg.records.schema import Anthology, check_record

    status = json.loads(INJECTION.split(": ", 1)[1])
    record = check_record("practice", {"id": "SOTA-049", "title": 'a "b"\n<c> .', "status": status})
    anthology = Anthology([record])
    parsed = list(parse(anthology_ntriples(anthology), format=RdfFormat.N_TRIPLES))
    assert sorted(map(str, parsed)) == sorted(map(str, anthology_quads(anthology)))
    assert len(parsed) == 4  # type, identifier, title, status (a literal) and nothing else


@pytest.mark.parametrize("status", ["Foo Bar", "Active>", "Acti<ve", "x" * 300])
def test_a_status_that_cannot_be_an_iri_is_a_finding_not_a_crash(runner, workdir, status):
    replace_field(workdir, "SOTA-049", "status", f"status: {json.dumps(status)}")
    result = runner.invoke(cli, ["validate"])
    assert result.exit_code == 1
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert "data/practices/SOTA-049.yaml:2: [practice-status] violation:" in result.output


@pytest.mark.parametrize(
    ("record", "name", "line"),
    [
        ("SOTA-049", "id", 'id: "SOTA-049\\n"'),
        ("SOTA-049", "cites", 'cites: ["LIT-051\\n"]'),
        ("SOTA-049", "topic", 'topic: "distributed-optimization\\n"'),
        ("LIT-051", "topic", 'topic: "a b"'),
    ],
)
def test_an_identifier_with_a_newline_or_space_is_an_error_naming_the_line(runner, workdir, record, name, line):
    path = replace_field(workdir, record, name, line)
    result = runner.invoke(cli, ["build"])
    assert result.exit_code == 1
    assert f"{path.relative_to(workdir)}:2: '{name}' must" in result.output
    assert "Traceback" not in result.output


# ------------------------------------------------------------------ 3. data files stay in the data folder


def test_a_record_linking_outside_the_data_folder_is_refused_and_never_opened(runner, workdir, victim):
    os.mkfifo(victim / "pipe")  # opening it would hang: the refusal must come before any open
    os.symlink(victim / "keep.txt", workdir / "data" / "practices" / "SOTA-900.yaml")
    os.symlink(victim / "pipe", workdir / "data" / "practices" / "SOTA-901.yaml")
    result = runner.invoke(cli, ["build"])
    assert result.exit_code == 1
    lines = result.output.splitlines()
    refusal = "a link to something outside the data folder; sotakg opens nothing there: replace the link with the file"
    assert f"data/practices/SOTA-900.yaml: {refusal} (SOTA-900)" in lines
    assert f"data/practices/SOTA-901.yaml: {refusal} (SOTA-901)" in lines
    assert "SECRET" not in result.output


def test_a_link_inside_the_data_folder_is_read(runner, workdir):
    practices = workdir / "data" / "practices"
    (workdir / "data" / "SOTA-049.moved").write_bytes((practices / "SOTA-049.yaml").read_bytes())
    (practices / "SOTA-049.yaml").unlink()
    os.symlink("../SOTA-049.moved", practices / "SOTA-049.yaml")
    result = runner.invoke(cli, ["build"])
    assert result.exit_code == 0, result.output
    assert "42 practices" in result.output


def _export_triples(runner) -> set[str]:
    result = runner.invoke(cli, ["export", "rdf", "--format", "ntriples"])
    assert result.exit_code == 0, result.output
    return set(result.output.splitlines())


def _title_of(runner, record: str) -> str:
    result = runner.invoke(cli, ["sparql", "--format", "csv", f"SELECT ?t WHERE {{ id:{record} dcterms:title ?t }}"])
    assert result.exit_code == 0, result.output
    return result.output.splitlines()[1]


def test_edits_behind_a_linked_record_folder_are_seen_and_pointing_it_elsewhere_rebuilds(runner, workdir):
    data = workdir / "data"
    (data / "practices").rename(data / ".practices")
    os.symlink(".practices", data / "practices")
    assert runner.invoke(cli, ["build"]).exit_code == 0
    record = data / ".practices" / "SOTA-049.yaml"
    record.write_text(record.read_text().replace("title: ", "title: Edited ", 1))
    assert _title_of(runner, "SOTA-049").startswith("Edited ")  # the store follows the edit
    # another folder behind the same link: one record gone, one changed
    shutil.copytree(data / ".practices", data / ".other")
    (data / ".other" / "SOTA-048.yaml").unlink()
    other = data / ".other" / "SOTA-047.yaml"
    other.write_text(other.read_text().replace("title: ", "title: Other ", 1))
    (data / "practices").unlink()
    os.symlink(".other", data / "practices")
    incremental = _export_triples(runner)
    built = runner.invoke(cli, ["build", "--force"])
    assert built.exit_code == 0, built.output
    assert incremental == _export_triples(runner)
    typed = "<https://w3id.org/sotakg/id/SOTA-048> <http://www.w3.org/1999/02/22-rdf-syntax-ns#type>"
    assert not any(line.startswith(typed) for line in incremental)
    assert _title_of(runner, "SOTA-047").startswith("Other ")


def test_a_record_name_that_is_not_utf8_is_an_error_naming_it(runner, workdir):
    assert runner.invoke(cli, ["build"]).exit_code == 0
    record = os.fsencode(workdir / "data" / "practices") + b"/SOTA-\xff.yaml"
    with open(record, "wb") as handle:  # a copy of a record under a name git can hold but UTF-8 cannot
        handle.write((workdir / "data" / "practices" / "SOTA-049.yaml").read_bytes())
    message = "a name that is not UTF-8 (shown here with \\x escapes); rename it: sotakg reads names as UTF-8"
    for command in (["build"], ["build", "--force"], ["validate"]):
        result = runner.invoke(cli, command)
        assert result.exit_code == 1, (command, result.output)
        assert result.exception is None or isinstance(result.exception, SystemExit), command
        assert f"data/practices/SOTA-\\xff.yaml: {message}" in result.output.replace("[data-readable] violation: ", "")
    os.unlink(record)
    assert runner.invoke(cli, ["build"]).exit_code == 0  # nothing of it was kept


def test_folders_nested_past_the_depth_limit_are_an_error_not_a_crash(runner, workdir):
    assert runner.invoke(cli, ["build"]).exit_code == 0
    deepest = os.fsencode(workdir / "data" / "practices")
    for _ in range(300):  # far past the limit (pytest must still be able to remove it)
        deepest += b"/a"
        os.mkdir(deepest)
    with open(deepest + b"/SOTA-995.yaml", "wb") as handle:
        handle.write(b"id: SOTA-995\n")
    shown = "data/practices" + "/a" * 32
    for command in (["build"], ["validate"], ["validate", "--format", "sarif"]):
        result = runner.invoke(cli, command)
        assert result.exit_code == 1, (command, result.output)
        assert result.exception is None or isinstance(result.exception, SystemExit), command
        assert shown in result.output and shown + "/a" not in result.output
    assert "a folder nested more than 32 levels deep" in runner.invoke(cli, ["build"]).output


@pytest.mark.parametrize(
    ("make", "shown", "message"),
    [
        (
            lambda d, v: os.symlink(d / "nowhere.yaml", d / "practices" / "SOTA-900.yaml"),
            "practices/SOTA-900.yaml",
            "a link to nothing (its target is missing); remove the link or restore its target",
        ),
        (
            lambda d, v: (d / "practices" / "SOTA-900.yaml").mkdir(),
            "practices/SOTA-900.yaml",
            "a folder named like a record file; a record is a file",
        ),
        (
            lambda d, v: (shutil.rmtree(d / "papers"), (d / "papers").write_text("x")),
            "papers",
            "'papers' must be a folder of record files, not a file",
        ),
        (
            lambda d, v: (shutil.rmtree(d / "papers"), os.symlink(v, d / "papers")),
            "papers",
            "a link to something outside the data folder; sotakg opens nothing there: replace the link with the file",
        ),
        (
            lambda d, v: os.symlink(v, d / "practices" / "more"),
            "practices/more",
            "a link to something outside the data folder; sotakg opens nothing there: replace the link with the file",
        ),
    ],
    ids=["dangling-link", "folder-named-like-a-record", "kind-folder-is-a-file", "kind-folder-links-out", "dir-link"],
)
def test_odd_entries_in_the_data_folder_are_each_a_clear_error(runner, workdir, victim, make, shown, message):
    make(workdir / "data", victim)
    before = tree_digest(victim)
    result = runner.invoke(cli, ["build"])
    assert result.exit_code == 1
    assert f"data/{shown}: {message}" in result.output
    assert tree_digest(victim) == before


def test_a_record_must_be_named_after_its_id(runner, workdir):
    practices = workdir / "data" / "practices"
    (practices / "SOTA-900.yaml").write_text((practices / "SOTA-049.yaml").read_text().replace("SOTA-049", "SOTA-901"))
    result = runner.invoke(cli, ["build"])
    assert result.exit_code == 1
    assert (
        "data/practices/SOTA-900.yaml:1: the file is named SOTA-900.yaml but holds id SOTA-901; "
        "rename the file to SOTA-901.yaml or fix 'id' (SOTA-901)"
    ) in result.output


def test_messages_quote_at_most_about_80_characters_of_a_value(runner, workdir):
    replace_field(workdir, "SOTA-049", "topic", "topic: " + "secret " * 100)
    result = runner.invoke(cli, ["build"])
    assert result.exit_code == 1
    (line,) = [ln for ln in result.output.splitlines() if "'topic'" in ln]
    assert "'secret secret" in line and "secret " * 13 not in line
    assert len(line) < 260


# ----------------------------------------------------------------------------------------- 4. values


@pytest.mark.parametrize(
    ("record", "line", "expected"),
    [
        ("SOTA-049", "version: " + "9" * 5000, ":2: the number 999999999999999999999... has 5000 characters"),
        (
            "SOTA-049",
            "version: -" + "9" * 30,
            ":2: 'version' is -99999999999999999999..., less than any real record has",
        ),
        ("LIT-051", "year: " + "1" * 5000, ":2: the number 111111111111111111111... has 5000 characters"),
        ("LIT-051", "year: 33:40", ":2: 'year' must be written as a plain decimal number, got 33:40 (YAML 1.1 reads"),
        ("SOTA-049", "version: 0x10", ":2: 'version' must be written as a plain decimal number, got 0x10"),
        ("SOTA-049", "version: 010", ":2: 'version' must be written as a plain decimal number, got 010"),
        ("SOTA-049", "version: 1_0", ":2: 'version' must be written as a plain decimal number, got 1_0"),
        ("SOTA-049", "version: 0b11", ":2: 'version' must be written as a plain decimal number, got 0b11"),
        ("SOTA-049", "version: 0o7", ":2: 'version' must be a whole number, got the text '0o7'"),
        ("SOTA-049", "version: \u0663", ":2: 'version' must be a whole number, got the text '\u0663'"),
        ("LIT-051", "year: \u0662\u0660\u0662\u0660", ":2: 'year' must be a whole number"),
        ("SOTA-049", "id: SOTA-\u0660\u0664\u0669", ":2: 'id' must be an identifier (ASCII letters"),
        ("SOTA-049", 'title: "a\\0b"', ":2: 'title' holds the control character U+0000"),
        ("SOTA-049", 'title: "a\\x9bb"', ":2: 'title' holds the control character U+009B"),
        ("SOTA-049", 'title: "a\\rb"', ":2: 'title' holds the control character U+000D"),
        ("SOTA-049", "title: 2020-01-01", ":2: 'title' must be text, got the date '2020-01-01'; YAML reads"),
        ("SOTA-049", "summary: 12:30:00", ":2: 'summary' must be text, got the number 45000; YAML reads 12:30:00"),
    ],
)
def test_surprising_values_are_refused_naming_file_line_and_record(runner, workdir, record, line, expected):
    path = replace_field(workdir, record, line.split(":")[0], line)
    result = runner.invoke(cli, ["build"])
    assert result.exit_code == 1, result.output
    assert f"{path.relative_to(workdir)}{expected}" in result.output
    assert f"({record})" in result.output or "(SOTA-" in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)


@pytest.mark.parametrize("value", ["inf", "-inf", "nan", "1e308", "1e309", "0", "-1", "86401", "x"])
def test_a_timeout_must_be_a_finite_positive_number(runner, built_store, value):
    from .conftest import invoke

    result = invoke(runner, built_store, "query", "adrs", "--timeout", value)
    assert result.exit_code == 2
    assert "Invalid value for '--timeout'" in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)


def test_a_parameter_that_is_not_utf8_is_a_usage_error(tmp_path):
    shutil.copytree(SHIPPED_DATA, tmp_path / "data")
    command = [
        sys.executable,
        "-m",
        "sotakg",
        "query",
        "practices-citing",
        "-p",
        b"paper=\xff".decode(errors="surrogateescape"),
    ]
    result = subprocess.run(command, cwd=tmp_path, capture_output=True, env=subprocess_env(), timeout=120)
    assert result.returncode == 2
    assert b"Invalid value for '-p' / '--param': not valid UTF-8 (byte 0xff at character 7)" in result.stderr
    assert b"Traceback" not in result.stderr


def test_a_parameter_with_non_ascii_digits_is_a_usage_error(runner, built_store):
    from .conftest import invoke

    result = invoke(runner, built_store, "query", "papers-since", "-p", "since=\u0662\u0660\u0662\u0660")
    assert result.exit_code == 2
    assert "the digit '\u0662' (U+0662 at character 7) is not ASCII; write digits as 0-9" in result.output


@pytest.mark.parametrize(
    "args",
    [
        ["publish", "--endpoint", "http://127.0.0.1:9/store", "--max-bytes", "9" * 5000],
        ["serve", "--max-request-bytes", "9" * 5000],
        ["serve", "--max-result-bytes", "9" * 5000],
        ["serve", "--timeout", "9" * 5000],
        ["console", "--max-rows", "9" * 5000],
    ],
    ids=["publish-max-bytes", "serve-max-request", "serve-max-result", "serve-timeout", "console-max-rows"],
)
def test_a_number_of_thousands_of_digits_on_the_command_line_is_a_usage_error(runner, built_store, args):
    from .conftest import invoke

    result = invoke(runner, built_store, *args)
    assert result.exit_code == 2, result.output
    assert "Invalid value for" in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)


# ------------------------------------------------------------------------------------- 7. reading scales


def test_a_small_file_is_read_with_a_buffer_of_its_own_size(tmp_path):
    path = tmp_path / "small.yaml"
    path.write_bytes(b"id: SOTA-001\n")
    tracemalloc.start()
    try:
        assert read_bounded(path, 10 * 1024 * 1024) == b"id: SOTA-001\n"
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 64 * 1024


def test_the_cap_holds_for_the_size_found_and_for_the_bytes_read(tmp_path):
    path = tmp_path / "big.yaml"
    path.write_bytes(b"x" * 101)
    with pytest.raises(SourceTooLarge, match="file is 101 bytes, over the 100-byte limit"):
        read_bounded(path, 100)
    assert read_bounded(path, 101) == b"x" * 101


# ------------------------------------------------------------------------------------- 8. output paths


def test_output_onto_a_link_replaces_the_link_and_leaves_its_target(runner, workdir, victim):
    os.symlink(victim / "keep.txt", workdir / "link.md")
    result = runner.invoke(cli, ["export", "index", "--topic", "distributed-optimization", "-o", "link.md"])
    assert result.exit_code == 0, result.output
    assert not (workdir / "link.md").is_symlink()
    assert (workdir / "link.md").read_text(encoding="utf-8").startswith("Topics — ")
    assert (victim / "keep.txt").read_text() == "SECRET-LINE root:x:0:0\n"


def test_output_onto_a_dangling_link_creates_no_folder_for_its_target(runner, workdir, victim):
    os.symlink(victim / "new" / "deep" / "file.md", workdir / "out.md")
    result = runner.invoke(cli, ["export", "index", "--topic", "distributed-optimization", "-o", "out.md"])
    assert result.exit_code == 0, result.output
    assert not (victim / "new").exists()
    assert (workdir / "out.md").is_file() and not (workdir / "out.md").is_symlink()


def test_output_to_a_device_is_an_error_and_leaves_it_a_device(runner, workdir):
    device = a_device(workdir / "zero")
    result = runner.invoke(cli, ["export", "rdf", "-f", "nt", "-o", "zero"])
    assert result.exit_code == 1
    assert "Error: cannot write zero: not a regular file (a device, FIFO or socket); write to a file or to '-'" in (
        result.output
    )
    assert stat.S_ISCHR(os.lstat(device).st_mode)


def test_output_to_a_fifo_is_an_error_not_a_hang(workdir):
    os.mkfifo(workdir / "pipe")
    command = [sys.executable, "-m", "sotakg", "export", "index", "--topic", "distributed-optimization", "-o", "pipe"]
    result = subprocess.run(command, cwd=workdir, capture_output=True, text=True, env=subprocess_env(), timeout=120)
    assert result.returncode == 1
    assert "cannot write pipe: not a regular file" in result.stderr
    assert stat.S_ISFIFO(os.lstat(workdir / "pipe").st_mode)


def test_a_predictable_temporary_name_is_never_written_through(runner, workdir, victim):
    # The old scheme's name, planted as a link: the write must not follow it.
    os.symlink(victim / "keep.txt", workdir / f".out.md.{os.getpid()}.tmp")
    result = runner.invoke(cli, ["export", "index", "--topic", "distributed-optimization", "-o", "out.md"])
    assert result.exit_code == 0, result.output
    assert (victim / "keep.txt").read_text() == "SECRET-LINE root:x:0:0\n"
    assert sorted(p.name for p in workdir.iterdir() if p.name.startswith(".out.md")) == [f".out.md.{os.getpid()}.tmp"]


def test_export_site_replaces_a_link_in_its_folder_rather_than_writing_through(runner, workdir, victim):
    site = workdir / "site"
    site.mkdir()
    os.symlink(victim / "keep.txt", site / "index.html")
    result = runner.invoke(cli, ["export", "site", str(site), "--mermaid"])
    assert result.exit_code == 0, result.output
    assert not (site / "index.html").is_symlink()
    assert (site / "index.html").read_text(encoding="utf-8").lstrip().lower().startswith("<!doctype html")
    assert (victim / "keep.txt").read_text() == "SECRET-LINE root:x:0:0\n"


def test_written_files_never_go_through_a_link_below_the_folder_named(workdir, victim):
    from sotakg.errors import ExportError
    from sotakg.query.formats import write_files

    out = workdir / "out"
    out.mkdir()
    os.symlink(victim, out / "pages")
    before = tree_digest(victim)
    with pytest.raises(ExportError, match="out/pages is a link; sotakg does not write through it: remove it"):
        write_files(out, {"pages/keep.txt": "overwritten"})
    assert tree_digest(victim) == before


def test_an_unusable_store_path_is_an_error_not_a_traceback(runner, workdir):
    result = runner.invoke(cli, ["--store", "data/registry.yaml/store", "build"])
    assert result.exit_code == 1
    assert "cannot use" in result.output and "registry.yaml" in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)


def test_import_still_works_after_these_checks(runner, tmp_path):
    data = tmp_path / "data"
    result = runner.invoke(cli, ["--data", str(data), "import", "markdown", str(SEED_PAGE)])
    assert result.exit_code == 0, result.output
    written = sorted(str(p.relative_to(data)) for p in data.rglob("*.yaml"))
    shipped = sorted(str(p.relative_to(SHIPPED_DATA)) for p in SHIPPED_DATA.rglob("*.yaml"))
    assert written == shipped
    for name in written:
        assert (data / name).read_bytes() == (SHIPPED_DATA / name).read_bytes(), name
