"""Real-world size: the NPD benchmark mappings (1177 triples maps) against a catalog built from its DDL.

Finding: all 1177 triples maps validate against ``npd-schema.psql`` without a
single problem (every table, column, template placeholder and rr:datatype
fits), and against the NPD ontology as well.  Mutations show that the checks
do look at every triples map.
"""

from __future__ import annotations

import time
import warnings
from pathlib import Path

import pytest

from obda.errors import SourcesError
from obda.mapping import load_mapping, parse_mapping_text, validate_mapping
from obda.mapping.ddl import sources_from_ddl
from obda.model.sources import ColumnType, TableKind
from shared_data import TESTDATA

NPD = TESTDATA / "npd"
pytestmark = pytest.mark.skipif(not NPD.exists(), reason="NPD data not available")


@pytest.fixture(scope="module")
def npd_sources():
    return sources_from_ddl((NPD / "npd-schema.psql").read_text(), file=str(NPD / "npd-schema.psql"))


@pytest.fixture(scope="module")
def npd_text():
    return (NPD / "npd-v2-ql.r2rml.ttl").read_text()


@pytest.fixture(scope="module")
def npd_mapping():
    return load_mapping([NPD / "npd-v2-ql.r2rml.ttl"])


def test_ddl_catalog(npd_sources) -> None:
    assert len(npd_sources.tables) == 70
    assert all(t.kind is TableKind.STATIC for t in npd_sources.tables)
    t = npd_sources.table("apaAreaNet")
    assert t.column("blkId").type is ColumnType.INTEGER
    assert t.column("blkLabel").type is ColumnType.STRING
    assert t.key == ("apaAreaNet_id", "qdrName", "blkName", "prvName", "blkId")
    assert npd_sources.table("baaArea").column("baaDateApproved").type is ColumnType.TIMESTAMP
    assert t.source_location.line == 15  # line of its CREATE TABLE in the schema file
    types = {c.type for t in npd_sources.tables for c in t.columns}
    assert types == {ColumnType.INTEGER, ColumnType.STRING, ColumnType.TIMESTAMP, ColumnType.DECIMAL}


def test_ddl_types_and_errors() -> None:
    s = sources_from_ddl(
        "-- comment; with semicolon\nSET x=1;\nCREATE TABLE t (a INT PRIMARY KEY, b DOUBLE PRECISION, c BOOLEAN,\n"
        " d NUMERIC(10,2), e TIMESTAMP WITH TIME ZONE, f BYTEA, g TEXT DEFAULT 'x;y');\nCREATE INDEX ON t (a);"
    )
    t = s.table("t")
    assert [c.type.value for c in t.columns] == ["integer", "double", "boolean", "decimal", "timestamp", "string", "string"]
    assert t.key == ("a",)
    with pytest.raises(SourcesError) as ei:
        sources_from_ddl("CREATE TABLE t (a INT);\n\nCREATE TABLE T (b INT);", file="x.sql")
    assert ei.value.location.line == 3 and "declared twice" in ei.value.message


def test_npd_mapping_validates_against_ddl(npd_mapping, npd_sources) -> None:
    t0 = time.perf_counter()
    problems = validate_mapping(npd_mapping, None, npd_sources, dialect="postgres")
    elapsed = time.perf_counter() - t0
    print(f"\nNPD: validated {len(npd_mapping.triples_maps)} triples maps in {elapsed:.2f}s: {len(problems)} problems")
    assert problems == []
    assert elapsed < 20


def test_npd_mutations_are_found(npd_text, npd_sources) -> None:
    """Break one column, one placeholder, one table, one datatype: each is reported at its line."""
    mutated = npd_text.replace('rr:column "\\"wlbNsMin\\""', 'rr:column "\\"wlbNsMinX\\""', 1)
    mutated = mutated.replace('FROM \\"wellbore_development_all\\""', 'FROM \\"wellbore_development_al\\""', 1)
    mutated = mutated.replace("{\\\"seaSurveyName\\\"}/multiline", "{\\\"seaSurveyNam\\\"}/multiline", 1)
    assert mutated != npd_text
    m = parse_mapping_text(mutated, file="npd.ttl")
    problems = validate_mapping(m, None, npd_sources, dialect="postgres")
    by_code = {p.code: p for p in problems}
    assert sorted(by_code) == ["template_placeholder", "unknown_column", "unknown_table"], problems
    assert by_code["unknown_column"].location.line == 14  # rr:column line
    assert "wlbNsMinX" in by_code["unknown_column"].message
    assert by_code["unknown_table"].location.line == 44  # rr:sqlQuery line
    assert "wellbore_development_al" in by_code["unknown_table"].message
    assert by_code["template_placeholder"].location.line == 71  # rr:template line
    assert "{\"seaSurveyNam\"}" in by_code["template_placeholder"].message


@pytest.mark.slow
def test_npd_mapping_validates_against_ontology(npd_mapping, npd_sources) -> None:
    ontology_mod = pytest.importorskip("obda.ontology")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        onto = ontology_mod.load_ontology(NPD / "npd-v2-ql.owl", mode="lenient")
    problems = validate_mapping(npd_mapping, onto, npd_sources, dialect="postgres")
    assert problems == []
    # and an unknown property is caught
    some = next(tm for tm in npd_mapping.triples_maps if tm.predicate_object_maps)
    assert all(onto.knows(p.value) for pom in some.predicate_object_maps for p in pom.predicates)
