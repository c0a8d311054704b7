"""An answer column whose members give it terms of several kinds (obda.model.terms): each value keeps its kind.

A variable predicate's objects are numbers, strings and IRIs; a UNION's branches may bind one variable to an
integer and to a string.  SQL gives the column one type (text), so the compiled SQL carries each row's term type
beside it (``v__type``) and the executors hold each value with its class.  What the user sees, checked against
pyoxigraph over the materialised, closed data (as the other oracle tests), on both executors and every sink:

* a number is a JSON number, a string a string (before, every value of such a column was its text: ``"34"``);
* the integer 34 and the string "34" are two answers of a SELECT DISTINCT (their text is one);
* ORDER BY puts blank nodes, then IRIs, then literals — numbers by value (§15.1) — where a text order put
  ``"100"`` before ``"9"`` and IRIs among strings.
"""

from __future__ import annotations

import shutil
from collections import Counter

import pytest

from integration.bag_oracle import bag_diff, sql_bag
from integration.oracle import norm, sql_rows
from integration.oracle_cases import FIXTURE, PREFIX, answer_records, executed
from obda.analysis.execution_plan import plan_execution
from obda.execution import ContinuousQuery, DirectorySink
from obda.execution.committed_output import read_committed
from obda.model.query import XSD
from obda.model.terms import as_text

VOCABULARY = "FILTER(?p != <http://www.w3.org/2002/07/owl#sameAs>)"
# a stream variable predicate: ?v is a number (:value), a string (:level) or an IRI (:raisedBy ...)
IN_GRAPH = PREFIX + f"SELECT ?r ?p ?v WHERE {{ GRAPH ?t {{ ?r ?p ?v }} {VOCABULARY} }}"
# every age as an integer and as a string (34 and "34": one text, two terms)
DISTINCT = PREFIX + "SELECT DISTINCT ?o WHERE { { ?x :age ?o } UNION { ?x :age ?a BIND(STR(?a) AS ?o) } }"
ORDERED = [  # IRIs before numbers, numbers by value (ties are equal rows)
    PREFIX + "SELECT ?o WHERE { { ?x :age ?o } UNION { ?x :worksIn ?o } } ORDER BY ?o",
    PREFIX + "SELECT ?o WHERE { { ?x :age ?o } UNION { ?x :worksIn ?o } } ORDER BY DESC(?o)",
]


def test_the_compiled_sql_says_each_row_s_term_type(world):
    project, con, oracle = world
    comp = project.compile(DISTINCT)
    assert comp.typed == ("o",)
    assert "o__type" in comp.to_sql("duckdb")
    assert comp.to_dict()["term_types"] == {"o": "o__type"}
    assert comp.column_terms == {"o": (XSD + "integer", XSD + "string")}
    want = oracle.answers(DISTINCT, ["o"])
    assert {34.0, "34"} <= {r[0] for r in want}, want
    assert sql_bag(con, comp.to_sql("duckdb")) == want


def test_a_query_of_one_kind_per_column_has_no_type_column(world):
    project, _, _ = world
    comp = project.compile(PREFIX + "SELECT ?o WHERE { { ?x :age ?o } UNION { ?x :age ?a BIND(?a + 1 AS ?o) } }")
    assert comp.typed == () and "__type" not in comp.to_sql("duckdb")


@pytest.mark.parametrize("query", ORDERED, ids=["asc", "desc"])
def test_order_by_puts_iris_before_literals_and_numbers_by_value(world, tmp_path, query):
    project, con, oracle = world
    comp = project.compile(query)
    want = [tuple(norm(v) for v in row) for row in oracle.ordered(query, ["o"])]
    assert any(isinstance(r[0], str) for r in want) and any(isinstance(r[0], float) for r in want)
    assert [tuple(norm(v) for v in r) for r in sql_rows(con, comp.to_sql("duckdb"))] == want
    got = [(norm(r["binding"]["o"]),) for r in answer_records(project, comp, tmp_path)]
    assert got == want


def test_the_local_executor_keeps_the_integer_and_the_string_apart(world, tmp_path):
    project, _, oracle = world
    comp = project.compile(DISTINCT)
    records = answer_records(project, comp, tmp_path)
    values = [r["binding"]["o"] for r in records]
    assert values.count("34") == 1 and values.count(34) == 1, values
    assert executed(project, comp, tmp_path / "bag", "local") == oracle.answers(DISTINCT, ["o"])


def test_numbers_stay_numbers_in_the_local_executor_s_lines(world, tmp_path):
    project, _, _ = world
    records = answer_records(project, project.compile(IN_GRAPH), tmp_path)
    kinds = Counter(type(r["binding"]["v"]).__name__ for r in records)
    assert kinds["str"] and (kinds["int"] or kinds["float"]), kinds


@pytest.mark.spark
def test_spark_writes_each_kind_in_a_file_and_in_a_directory(world, tmp_path, spark):
    """The driver's lines (one file) and Spark's own writers (a directory's JSON part files) write the same
    values as the local executor, each of its kind; Parquet, one type per column, holds their text."""
    project, _, oracle = world
    comp = project.compile(IN_GRAPH)
    key = lambda r: (r["emitted_at"], repr(sorted(r["binding"].items())))  # noqa: E731  (one timestamp's
    # answers come in the order of the members on the local backend, in their text's on Spark)
    local = sorted(answer_records(project, comp, tmp_path / "local"), key=key)
    assert sorted(answer_records(project, comp, tmp_path / "spark", "spark", spark), key=key) == local
    written = {f: sorted(_directory(project, comp, tmp_path / f, spark, f), key=key) for f in ("json", "parquet")}
    assert written["json"] == local, bag_diff(Counter(map(repr, written["json"])), Counter(map(repr, local)))
    assert written["parquet"] == sorted(({**r, "binding": {**r["binding"], "v": as_text(r["binding"]["v"])}}
                                         for r in local), key=key)
    want = oracle.answers(IN_GRAPH, list(comp.columns))
    assert Counter(tuple(norm(r["binding"][c]) for c in comp.columns) for r in written["json"]) == want


def _directory(project, comp, tmp_path, spark, fmt: str) -> list[dict]:
    """The committed answers of the query run by Spark into a directory sink, written by Spark's writers."""
    base = tmp_path / "project"
    shutil.copytree(FIXTURE, base)
    q = ContinuousQuery(plan_execution(comp, project.sources), base_dir=base, sink=DirectorySink(tmp_path / "out", fmt),
                        backend="spark", spark=spark, allow_unbounded=True)
    q.driver_answers = 0  # however few, the answers are Spark's to write
    q.run_until_exhausted()
    q.close()
    return read_committed(tmp_path / "out")
