"""Fuzzing: random and mutated records and index pages give records or a clean error, never a traceback."""

from __future__ import annotations

from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sotakg.cli import cli
from sotakg.errors import DataError, ImportProblem
from sotakg.records.indexpage import parse_page
from sotakg.records.schema import KINDS, read_record

from .conftest import SEED_PAGE, SHIPPED_DATA

VALID_RECORDS = [p.read_bytes() for p in sorted((SHIPPED_DATA / "practices").glob("*.yaml"))[:8]]
VALID_RECORDS += [p.read_bytes() for p in sorted((SHIPPED_DATA / "papers").glob("*.yaml"))[:4]]
SEED = SEED_PAGE.read_text(encoding="utf-8")
YAML_PIECES = [
    "\n",
    ": ",
    "- ",
    "[",
    "]",
    "{",
    "}",
    "&a ",
    "*a",
    "!!",
    "'",
    '"',
    "#",
    "---",
    "\t",
    "  ",
    "\ufeff",
    "\r\n",
    "\x00",
    "\x85",
    "id",
    "status",
    "no",
    "~",
    "|",
    ">",
    "?",
    "%YAML 1.1\n",
    "\\",
    "é",
]


@st.composite
def mutated(draw, sources: list[bytes], pieces: list[str]) -> bytes:
    data = bytearray(draw(st.sampled_from(sources)))
    for _ in range(draw(st.integers(1, 6))):
        position = draw(st.integers(0, len(data)))
        action = draw(st.sampled_from(["insert", "delete", "byte"]))
        if action == "insert":
            data[position:position] = draw(st.sampled_from(pieces)).encode("utf-8")
        elif action == "delete":
            del data[position : position + draw(st.integers(1, 20))]
        else:
            data[position:position] = bytes([draw(st.integers(0, 255))])
    return bytes(data)


record_bytes = st.one_of(
    st.binary(max_size=300), mutated(VALID_RECORDS, YAML_PIECES), st.text(max_size=200).map(str.encode)
)


@given(content=record_bytes, kind=st.sampled_from(sorted(KINDS)))
@settings(max_examples=1500, deadline=2000, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_any_record_file_gives_a_record_or_a_clean_error(tmp_path: Path, content: bytes, kind: str):
    path = tmp_path / "SOTA-001.yaml"
    path.write_bytes(content)
    try:
        record = read_record(path, kind)
    except DataError as error:
        assert error.problems and all(p.file and p.message for p in error.problems)
        return
    assert record.kind == kind


page_text = st.one_of(
    mutated([SEED.encode("utf-8")], ["|", "\\|", " — ", "\n", "SOTA-", " v", "LIT-", "ARXIV-", "(2020)", "Rejected"]),
    st.text(max_size=400).map(str.encode),
)


@given(content=page_text)
@settings(max_examples=800, deadline=2000)
def test_any_index_page_parses_or_is_refused_cleanly(content: bytes):
    try:
        page = parse_page(content.decode("utf-8", errors="replace"), "page.md")
    except ImportProblem as error:
        assert str(error).startswith("page.md:")
        return
    assert page.topic_slug
    assert {kind for kind, _ in page.records} <= set(KINDS)


@given(content=page_text)
@settings(max_examples=60, deadline=5000, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_import_command_never_shows_a_traceback(tmp_path_factory, content: bytes):
    root = tmp_path_factory.mktemp("fuzz")
    page = root / "page.md"
    page.write_bytes(content)
    from click.testing import CliRunner

    result = CliRunner().invoke(cli, ["--data", str(root / "data"), "import", "markdown", str(page)])
    assert result.exit_code in (0, 1, 2), result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)


# ------------------------------------------------------------------------------------------ SPARQL

CANNED_TEXTS = [p.read_bytes() for p in sorted((SHIPPED_DATA.parent / "queries").glob("*.rq"))]
SPARQL_PIECES = [
    "{",
    "}",
    "(",
    ")",
    "[",
    "]",
    "SERVICE <http://x/> ",
    "LOAD <http://x/>",
    "FROM <http://x/>",
    "INSERT DATA { <a> <b> <c> }",
    '"',
    "'",
    "<",
    ">",
    "#",
    "?x",
    "$y",
    "FILTER(",
    "OPTIONAL",
    "UNION",
    "*",
    "+",
    "/",
    "^",
    ";",
    ".",
    ",",
    "\\",
    "\n",
    "\x00",
    "é",
    "SELECT",
    "ASK",
    "DESCRIBE",
]


@given(
    st.one_of(
        mutated(CANNED_TEXTS, SPARQL_PIECES),
        st.text(max_size=200).map(str.encode),
        st.integers(1, 5000).map(lambda n: ("SELECT * WHERE " + "{" * n + "}" * n).encode()),
    )
)
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_any_sparql_text_gives_results_or_a_clean_error(built_store, content: bytes):
    from sotakg.errors import SotakgError
    from sotakg.query.sparql import LocalBackend, run_query

    text = content.decode("utf-8", errors="replace")
    try:
        run_query(LocalBackend(built_store[1]), text, timeout=5)
    except SotakgError as error:
        assert str(error)
