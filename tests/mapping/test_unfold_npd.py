"""Unfolding at NPD size (1177 triples maps, real ontology and queries): SQL valid in all dialects."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
import sqlglot
from sqlglot import exp
from shared_data import TESTDATA

NPD = TESTDATA / "npd"
pytestmark = [pytest.mark.slow, pytest.mark.skipif(not NPD.exists(), reason="NPD data not available")]


@pytest.mark.parametrize("name", ["01", "07", "08", "25", "26", "27"])
def test_npd_queries_unfold_to_valid_sql(name):
    from obda.mapping import load_mapping, unfold
    from obda.mapping.ddl import sources_from_ddl
    from obda.ontology import load_ontology
    from obda.query import parse_query
    from obda.rewrite import rewrite

    warnings.simplefilter("ignore")
    sources = sources_from_ddl((NPD / "npd-schema.psql").read_text())
    mapping = load_mapping([NPD / "npd-v2-ql.r2rml.ttl"])
    ontology = load_ontology([NPD / "npd-v2-ql.owl"], mode="lenient")
    q = parse_query((NPD / "queries" / f"{name}.rq").read_text())
    members, whole, removed, _views, *_ = unfold(q, rewrite(q, ontology), mapping, sources, ontology)
    assert members
    for m in members:
        assert [s.alias_or_name for s in m.select.expressions] == [v.name for v in q.projection]
        assert all(src.triples_map and src.mapping_line for src in m.origin.atom_sources)
    for d in ("spark", "duckdb", "postgres", "sqlite"):
        assert isinstance(sqlglot.parse_one(whole.sql(d), read=d), exp.Query)
