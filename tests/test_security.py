"""What sotakg refuses so that no input reaches the network or expands: XML entities, remote contexts."""

from __future__ import annotations

import os
import stat

import pytest

from sotakg.cli import cli
from sotakg.query.results import parse_graph, parse_sparql_results

from .conftest import SEED_PAGE

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


def test_a_record_that_is_a_device_is_refused_not_read(runner, workdir):
    os.symlink("/dev/zero", workdir / "data" / "practices" / "SOTA-996.yaml")
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


def test_importing_a_device_is_refused(runner, tmp_path):
    result = runner.invoke(cli, ["--data", str(tmp_path / "data"), "import", "markdown", "/dev/zero"])
    assert result.exit_code == 1
    assert "cannot import /dev/zero: not a regular file" in result.output


def test_output_through_a_symlink_writes_the_target_and_keeps_the_link(runner, workdir):
    target = workdir / "target.md"
    target.write_text("old")
    os.symlink(target, workdir / "link.md")
    result = runner.invoke(cli, ["export", "index", "--topic", "distributed-optimization", "-o", "link.md"])
    assert result.exit_code == 0, result.output
    assert (workdir / "link.md").is_symlink()
    assert target.read_text(encoding="utf-8").startswith("Topics — ")


def test_output_to_a_device_writes_to_it_and_leaves_it_a_device(runner, workdir):
    result = runner.invoke(cli, ["export", "rdf", "-f", "nt", "-o", "/dev/null"])
    assert result.exit_code == 0, result.output
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)


def test_output_to_a_fifo_keeps_the_fifo(runner, workdir):
    fifo = workdir / "pipe"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        result = runner.invoke(cli, ["export", "index", "--topic", "distributed-optimization", "-o", str(fifo)])
        assert result.exit_code == 0, result.output
        assert os.read(reader, 5) == b"Topic"
    finally:
        os.close(reader)
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)


def test_an_unusable_store_path_is_an_error_not_a_traceback(runner, workdir):
    result = runner.invoke(cli, ["--store", "data/registry.yaml/store", "build"])
    assert result.exit_code == 1
    assert "cannot use" in result.output and "registry.yaml" in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)


def test_import_still_works_after_these_checks(runner, tmp_path):
    result = runner.invoke(cli, ["--data", str(tmp_path / "data"), "import", "markdown", str(SEED_PAGE)])
    assert result.exit_code == 0
