"""Reading records: every kind of bad input is refused with file, line and record; odd but valid input is read."""

from __future__ import annotations

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from sotakg.cli import cli
from sotakg.errors import DataError
from sotakg.records.schema import check_record, load_anthology, read_record

GOOD = "id: SOTA-900\nversion: 1\ntitle: A practice\nstatus: Active\ntopic: distributed-optimization\n"


def write(data, name: str, content: str | bytes):
    path = data / name
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    return path


@pytest.mark.parametrize(
    "content, line, message",
    [
        ("id: SOTA-900\ntitle: 'unclosed\n", 3, "YAML syntax error: found unexpected end of stream"),
        ("id: SOTA-900\ntitle: A\ntitle: B\n", 3, "duplicate key 'title' (first on line 2); keep one of them"),
        ("id: SOTA-900\nsource: somewhere\n", 2, "unknown field 'source'; a practice has: id, version, title"),
        ("id: SOTA-900\nstatus: no\n", 2, "'status' must be text, got the boolean false; YAML reads no as"),
        ("id: SOTA-900\nversion: two\n", 2, "'version' must be a whole number, got the text 'two'"),
        ("id: SOTA-900\ncites: LIT-016\n", 2, "'cites' must be a list of identifiers"),
        ("id: SOTA-900\ncites: [LIT 016]\n", 2, "'cites' must list identifiers such as LIT-016"),
        (
            "id: SOTA-900\ntitle: !!python/object:os.system echo\n",
            2,
            "YAML tag 'tag:yaml.org,2002:python/object:os.system'",
        ),
        ("id: SOTA-900\ntitle: &t A\nsummary: *t\n", 2, "anchor &t: anchors and aliases are not allowed"),
        ("id: SOTA-900\ntitle: \x07bell\n", 2, "YAML syntax error: control characters are not allowed"),
        ("id: SOTA-900\n---\nid: SOTA-901\n", 2, "more than one YAML document; keep one record per file"),
        ("", 1, "empty file"),
        ("- id: SOTA-900\n", 1, "a record must be a mapping of fields"),
        ("title: no id\n", 1, "missing 'id'"),
        ("id: SOTA-900\ntitle: '   '\n", 2, "'title' is empty"),
        ("id: SOTA-900\nversion: 0b_\n", 2, "0b_ reads as a YAML 1.1 int but is not one; quote it to keep it as text"),
        ("id: SOTA-900\nversion: +0x_\n", 2, "+0x_ reads as a YAML 1.1 int but is not one; quote it"),
    ],
)
def test_bad_record_names_file_line_and_record(tmp_path, content, line, message):
    path = write(tmp_path, "SOTA-900.yaml", content)
    with pytest.raises(DataError) as caught:
        read_record(path, "practice", "data/practices/SOTA-900.yaml")
    problem = caught.value.problems[0]
    assert (problem.file, problem.line) == ("data/practices/SOTA-900.yaml", line)
    assert problem.record == "SOTA-900"
    assert message in problem.message


def test_non_utf8_file_names_the_line_of_the_bad_byte(tmp_path):
    path = write(tmp_path, "LIT-999.yaml", b"id: LIT-999\nyear: 2020\nauthors: M\xfcller et al.\n")
    with pytest.raises(DataError) as caught:
        read_record(path, "paper")
    problem = caught.value.problems[0]
    assert problem.line == 3 and problem.record == "LIT-999"
    assert "not UTF-8 (byte 0xfc); save the file as UTF-8" in problem.message


def test_the_same_id_in_two_files_names_both(data_copy):
    write(data_copy / "practices", "SOTA-049.yml", (data_copy / "practices" / "SOTA-049.yaml").read_text())
    with pytest.raises(DataError) as caught:
        load_anthology(data_copy)
    (problem,) = caught.value.problems
    assert problem.file.endswith("practices/SOTA-049.yaml") or problem.file.endswith("SOTA-049.yml")
    assert "identifier SOTA-049 is also used by" in problem.message
    assert "SOTA-049.yml" in str(problem) and "practices/SOTA-049.yaml:1" in str(problem)


def test_files_outside_record_folders_are_reported(data_copy):
    (data_copy / "misc").mkdir()
    write(data_copy / "misc", "x.yaml", GOOD)
    with pytest.raises(DataError, match="misc/x.yaml: not in a record folder"):
        load_anthology(data_copy)


def test_every_problem_is_reported_at_once(data_copy):
    write(data_copy / "practices", "SOTA-900.yaml", "id: SOTA-900\nstatus: no\n")
    write(data_copy / "papers", "LIT-900.yaml", "id: LIT-900\nyear: [1]\n")
    with pytest.raises(DataError) as caught:
        load_anthology(data_copy)
    assert [p.record for p in caught.value.problems] == ["LIT-900", "SOTA-900"]


def test_bom_and_crlf_are_accepted_and_lines_stay_right(tmp_path):
    path = write(tmp_path, "SOTA-900.yaml", b"\xef\xbb\xbfid: SOTA-900\r\ntitle: A\r\nstatus: Active\r\n")
    record = read_record(path, "practice")
    assert record.fields == {"id": "SOTA-900", "title": "A", "status": "Active"}
    assert record.lines == {"id": 1, "title": 2, "status": 3}


def test_deep_nesting_is_a_clean_error(tmp_path):
    path = write(tmp_path, "SOTA-900.yaml", "id: SOTA-900\ntitle: " + "[" * 20000 + "]" * 20000 + "\n")
    with pytest.raises(DataError, match=r"nested deeper than 32 levels|exceeded maximum nesting depth"):
        read_record(path, "practice")


def test_alias_bomb_is_refused_before_expansion(tmp_path):
    lines = ["id: SOTA-900", "a: &a [x, x, x, x, x, x, x, x, x]"]
    lines += [f"{chr(98 + i)}: &{chr(98 + i)} [*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}]" for i in range(9)]
    path = write(tmp_path, "SOTA-900.yaml", "\n".join(lines) + "\n")
    with pytest.raises(DataError, match="anchors and aliases are not allowed"):
        read_record(path, "practice")


def test_file_over_the_size_cap_is_refused_unread(tmp_path, monkeypatch):
    monkeypatch.setenv("SOTAKG_MAX_FILE_BYTES", "100")
    path = write(tmp_path, "SOTA-900.yaml", GOOD + "summary: " + "x" * 200 + "\n")
    with pytest.raises(DataError, match=r"over the 100-byte limit \(raise it with SOTAKG_MAX_FILE_BYTES\)"):
        read_record(path, "practice")


def test_quoted_arxiv_id_keeps_its_trailing_zero(tmp_path):
    bad = write(tmp_path, "LIT-735.yaml", "id: LIT-735\narxiv: 2105.05720\n")
    with pytest.raises(DataError, match='YAML reads 2105.05720 as the number 2105.0572: quote it, arxiv: "2105.05720"'):
        read_record(bad, "paper")


def test_check_record_accepts_a_good_record():
    record = check_record("paper", {"id": "LIT-1", "year": 2020, "authors": "A"})
    assert record.id == "LIT-1" and record.fields["year"] == 2020


def test_cli_reports_bad_data_with_exit_1_and_keeps_the_data(runner, workdir):
    path = workdir / "data" / "practices" / "SOTA-049.yaml"
    original = path.read_text()
    path.write_text(original.replace("status: Rejected", "status: no"))
    result = runner.invoke(cli, ["build"])
    assert result.exit_code == 1
    assert "data/practices/SOTA-049.yaml:5: 'status' must be text, got the boolean false" in result.output
    assert "(SOTA-049)" in result.output
    assert path.read_text() == original.replace("status: Rejected", "status: no")
    assert not (workdir / ".sotakg" / "store").exists()


@settings(max_examples=300, deadline=None)
@given(
    st.tuples(
        st.sampled_from(["", "+", "-"]),
        st.sampled_from(["", "0b", "0x", "0o", "0", "1", ".", "1:", "1e"]),  # YAML 1.1's number prefixes
        st.text(st.sampled_from("0123456789+-._:xobeEnaNifINF_"), max_size=5),
    )
    .map("".join)
    .filter(bool)
)
def test_any_plain_scalar_is_read_or_refused_never_a_crash(tmp_path_factory, text):
    """YAML 1.1's resolver takes texts its constructors cannot build ("0b_"): each is refused cleanly."""
    path = tmp_path_factory.mktemp("scalar") / "SOTA-900.yaml"
    path.write_text(f"id: SOTA-900\nversion: {text}\ntitle: {text}\n", encoding="utf-8")
    try:
        read_record(path, "practice", "data/practices/SOTA-900.yaml")
    except DataError as refused:
        assert all(problem.file == "data/practices/SOTA-900.yaml" for problem in refused.problems)


KINDS = ["practice", "paper", "adr", "topic"]
_YAML_PIECES = [
    "id: SOTA-900\n",
    "title: ",
    "version: ",
    "cites: ",
    "status: ",
    "year: ",
    "\n",
    "  ",
    "- ",
    ": ",
    ", ",
    "[",
    "]",
    "{",
    "}",
    "'",
    '"',
    "#",
    "&a ",
    "*a",
    "!!str ",
    "!!int ",
    "!!binary ",
    "!x ",
    "? ",
    "|\n",
    ">\n",
    "---\n",
    "...\n",
    "0b_",
    "0x1F",
    "0o7",
    "1_000",
    "1:30",
    ".inf",
    ".NaN",
    "-.5e3",
    "2024-01-01",
    "~",
    "null",
    "yes",
    "<<: ",
    "=",
    "\\",
    "\t",
    "\x85",
    "\u2028",
    "\ufeff",
    "é",
    "LIT-016",
    "SOTA-017 v2",
    "%YAML 1.1\n",
]


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(_YAML_PIECES), max_size=14).map("".join), st.sampled_from(KINDS))
def test_any_yaml_text_is_read_or_refused_with_its_file_never_a_traceback(tmp_path_factory, text, kind):
    """A pull request writes any text into a record file: it is a record or a DataError, nothing else."""
    path = tmp_path_factory.mktemp("record") / "SOTA-900.yaml"
    path.write_text(text, encoding="utf-8")
    try:
        record = read_record(path, kind, "data/records/SOTA-900.yaml")
    except DataError as refused:
        assert refused.problems and all(p.file == "data/records/SOTA-900.yaml" for p in refused.problems)
    else:
        assert record.kind == kind


# ---------------------------------------------------------------- ids that are IRIs sotakg mints

SCHEME_TAKEN = (
    "id topics is the IRI sotakg gives the topic scheme (id:topics, which registry.yaml describes); "
    "give this record another id, and its file that name (topics)"
)


def version_taken(record_id: str, number: int, practice: str) -> str:
    return (
        f"id {record_id} is the IRI sotakg gives version {number} of practice {practice} "
        f"(data/practices/{practice}.yaml:1; a practice's versions are <id>-v1, <id>-v2, ...); "
        f"give this record another id, and its file that name ({record_id})"
    )


def graph_facts(root) -> list[tuple[str, str]]:
    """What the store says of the scheme and of the versions of SOTA-047 and SOTA-900."""
    from sotakg.graph.store import StoreLayout, open_read_only

    store = open_read_only(StoreLayout(root / ".sotakg" / "store"))
    query = """SELECT ?s ?p ?o WHERE { ?s ?p ?o .
        FILTER (?s = <https://w3id.org/sotakg/id/topics> || STRSTARTS(STR(?s), "https://w3id.org/sotakg/id/SOTA-047-v")
                || STRSTARTS(STR(?s), "https://w3id.org/sotakg/id/SOTA-900")) }"""
    return sorted((str(row["s"]), str(row["p"]), str(row["o"])) for row in store.query(query))


def full_reads_only(monkeypatch):
    """Make an incremental build the only way: a full read of the data fails the test."""
    from sotakg.graph import build as build_module

    def full_read(*args, **kwargs):
        raise AssertionError("a full read of the data")

    monkeypatch.setattr(build_module, "_read_records", full_read)


@pytest.mark.parametrize("how", ["full", "incremental"])
@pytest.mark.parametrize(
    "file, content, message",
    [
        ("adrs/topics.yaml", "id: topics\ntitle: Evil scheme title\nstatus: Accepted\n", SCHEME_TAKEN),
        ("papers/topics.yaml", "id: topics\ntitle: Evil scheme title\n", SCHEME_TAKEN),
        ("papers/SOTA-047-v1.yaml", "id: SOTA-047-v1\ntitle: Evil\n", version_taken("SOTA-047-v1", 1, "SOTA-047")),
        # a version the practice does not have yet is its all the same: the next revision makes it
        ("adrs/SOTA-047-v2.yaml", "id: SOTA-047-v2\ntitle: Evil\n", version_taken("SOTA-047-v2", 2, "SOTA-047")),
        (
            "practices/SOTA-047-v100.yaml",
            "id: SOTA-047-v100\nversion: 1\ntitle: Evil\n",
            version_taken("SOTA-047-v100", 100, "SOTA-047"),
        ),
    ],
)
def test_an_id_that_is_an_iri_sotakg_mints_is_refused_and_the_store_kept(
    runner, workdir, monkeypatch, how, file, content, message
):
    from .test_build import store_files

    assert runner.invoke(cli, ["build"]).exit_code == 0
    before, facts = store_files(workdir), graph_facts(workdir)
    assert ("<https://w3id.org/sotakg/id/topics>", "<http://purl.org/dc/terms/title>", '"Topics"') in facts
    (workdir / "data" / file).write_text(content, encoding="utf-8")
    if how == "incremental":
        full_reads_only(monkeypatch)
    result = runner.invoke(cli, ["build"] if how == "incremental" else ["build", "--force"])
    assert result.exit_code == 1
    assert result.output == f"Error: 1 problem in the data:\ndata/{file}:1: {message}\n"
    assert store_files(workdir) == before and graph_facts(workdir) == facts


@pytest.mark.parametrize("how", ["full", "incremental"])
def test_a_new_practice_whose_versions_an_existing_record_is_named_after_is_refused(runner, workdir, monkeypatch, how):
    from .test_build import store_files

    # Harmless while no practice SOTA-900 exists.
    (workdir / "data" / "papers" / "SOTA-900-v3.yaml").write_text("id: SOTA-900-v3\ntitle: A paper\n")
    assert runner.invoke(cli, ["build"]).exit_code == 0
    before, facts = store_files(workdir), graph_facts(workdir)
    (workdir / "data" / "practices" / "SOTA-900.yaml").write_text(GOOD)
    if how == "incremental":
        full_reads_only(monkeypatch)
    result = runner.invoke(cli, ["build"] if how == "incremental" else ["build", "--force"])
    assert result.exit_code == 1
    taken = version_taken("SOTA-900-v3", 3, "SOTA-900")
    assert result.output == f"Error: 1 problem in the data:\ndata/papers/SOTA-900-v3.yaml:1: {taken}\n"
    assert store_files(workdir) == before and graph_facts(workdir) == facts


def test_ids_near_a_minted_iri_are_records_like_any_other(runner, workdir, monkeypatch):
    """Not a version of a practice in the data (none named so, v0, a leading zero, past the cap), or
    not the scheme's (its case): nothing sotakg mints, so nothing to refuse. An incremental build
    takes them as a full one does."""
    papers = workdir / "data" / "papers"
    for paper_id in ("SOTA-999-v1", "SOTA-047-v0", "SOTA-047-v01", "SOTA-047-v101", "Topics", "topics-v1"):
        (papers / f"{paper_id}.yaml").write_text(f"id: {paper_id}\ntitle: A paper\n")
    result = runner.invoke(cli, ["build"])
    assert result.exit_code == 0, result.output
    full_reads_only(monkeypatch)
    (workdir / "data" / "practices" / "SOTA-900.yaml").write_text(GOOD)
    (papers / "SOTA-900-v01.yaml").write_text("id: SOTA-900-v01\ntitle: A paper\n")
    result = runner.invoke(cli, ["build"])
    assert result.exit_code == 0, result.output


def test_the_reserved_ids_are_the_iris_the_graph_mints():
    from sotakg.graph import vocab
    from sotakg.records.schema import HIGHEST, SCHEME_ID, version_owner

    assert vocab.record_iri(SCHEME_ID) == vocab.TOPIC_SCHEME_IRI
    for number in (1, 2, 57, HIGHEST["version"]):
        local = vocab.version_iri("SOTA-047", number)[len(vocab.ID) :]
        assert version_owner(local) == ("SOTA-047", number)
    assert version_owner("A-v1-v2") == ("A-v1", 2)
    assert [version_owner(i) for i in ("SOTA-047-v0", "SOTA-047-v01", "SOTA-047-v101", "SOTA-047v1")] == [None] * 4


def test_the_shipped_data_takes_no_minted_iri(data_copy):
    from sotakg.records.schema import reserved_id_problems

    assert reserved_id_problems(load_anthology(data_copy).records) == []


@settings(max_examples=500, deadline=None)
@given(st.lists(st.text(alphabet="ab.c/ _-", min_size=1, max_size=6), min_size=1, max_size=4).map("/".join))
def test_a_file_names_stem_and_suffix_are_pathlibs(path):
    from pathlib import PurePosixPath

    from sotakg.records.schema import stem_and_suffix

    # pathlib drops "." parts, which the scan's relative paths never have
    assume(PurePosixPath(path).name == path.rstrip("/").rpartition("/")[2])
    assert stem_and_suffix(path) == (PurePosixPath(path).stem, PurePosixPath(path).suffix)
