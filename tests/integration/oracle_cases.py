"""Oracle cases over the multiplicity fixture (``multiplicity/``), shared by the construct tests of issue 27.

A :class:`Case` is a query with the verdict it must get and the size of the oracle's bag (so that it is never
vacuous). :func:`check_sql_and_local` compares obda's SQL on DuckDB and the local executor's answer lines with
the W3C bag oracle (``bag_oracle.py``: pyoxigraph over the independently materialised, closed dataset);
:func:`check_spark` does the same for the Spark executor.

Fixture data: person(id, name, age) 1 Ann 34 | 2 Bob 45 | 3 Cid 29 | 4 Dee 52 | 5 Eve 41 | 6 Fay 38 | 7 Gus 27 |
8 Hal 60; names also for dept/1..3 and from tag (``Bobby``, ``Operations``); reading(sensor, value, ts): 10:00
(1,20) x2 (2,30) (2,31) | 10:01 (1,20) (3,25) x3 | 10:02 (2,30); alarm(person, level, ts): 10:00 (1,2) x2 (4,3) |
10:01 (1,2) (9,1) | 10:02 (3,3) x2.
"""

from __future__ import annotations

import datetime as dt
import json
import shutil
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import obda
import pytest
from obda.analysis import plan_execution
from obda.catalog import check_entry
from obda.execution.query import ContinuousQuery
from obda.execution.sinks import JsonLinesSink

from integration.bag_oracle import bag_diff, concatenations_sorted, sql_bag
from integration.oracle import norm

XSD_DATETIME = "http://www.w3.org/2001/XMLSchema#dateTime"

FIXTURE = Path(__file__).resolve().parent / "multiplicity"
PREFIX = ("PREFIX : <http://example.org/mult#>\nPREFIX xsd: <http://www.w3.org/2001/XMLSchema#>\n"
          "PREFIX rdf: <http://www.w3.org/1999/02/22-rdf-syntax-ns#>\n")


@dataclass(frozen=True)
class Case:
    id: str
    query: str
    verdict: str
    size: int  # answers (with multiplicity) the oracle gives: the case must not be vacuous
    oracle_query: str = ""  # the query the oracle answers, where it differs (an equivalent the oracle reads alike)
    # rule A4: an answer waits until its check's window has closed, so the executors emit, by the end of the data,
    # the oracle's answers that pass this FILTER (those whose window ended by the last timestamp read)
    released: str = ""

    @property
    def text(self) -> str:
        return PREFIX + self.query

    def executed_want(self, oracle, columns: list) -> Counter:
        """The oracle's bag the executors give: all of it, or (:attr:`released`) the answers decided by the end."""
        if not self.released:
            return oracle.answers(self.oracle_text, columns)
        q = self.oracle_query or self.query
        end = q.rindex("}")
        return oracle.answers(PREFIX + q[:end] + f"FILTER({self.released}) " + q[end:], columns)

    @property
    def oracle_text(self) -> str:
        return PREFIX + (self.oracle_query or self.query)

    @property
    def stream(self) -> bool:
        return "GRAPH" in self.query

    @property
    def changelog(self) -> bool:
        """A stream aggregate writes a changelog, not a bag: its executors are checked elsewhere."""
        return self.stream and "GROUP BY" in self.query


def answer_records(project, comp, tmp_path: Path, backend: str = "local", spark=None) -> list[dict]:
    """The answer lines (parsed, in order) of a compiled query run by the executor over the fixture's files
    (copied: state is written)."""
    base = tmp_path / f"{backend}-project"
    shutil.copytree(FIXTURE, base)
    out = tmp_path / f"{backend}.jsonl"
    q = ContinuousQuery(plan_execution(comp, project.sources), base_dir=base, sink=JsonLinesSink(out),
                        backend=backend, spark=spark, allow_unbounded=True)
    q.run_until_exhausted()
    q.close()
    return [json.loads(line) for line in out.read_text().splitlines()] if out.exists() else []


def executed(project, comp, tmp_path: Path, backend: str, spark=None) -> Counter:
    """The bag of a compiled query run by the executor over the fixture's files; a projected time (a column of
    dateTime terms), written as ISO text, is read back as the oracle's datetime; any other text stays text."""
    records = answer_records(project, comp, tmp_path, backend, spark)
    times = {c for c, terms in comp.column_terms.items() if XSD_DATETIME in terms}
    return Counter(tuple(_time(v) if c in times else v for c in comp.columns for v in [norm(r["binding"].get(c))])
                   for r in records)


def _time(v):
    if isinstance(v, str) and len(v) >= 19 and v[4] == "-" and v[10] == "T" and v[13] == ":":
        try:
            return dt.datetime.fromisoformat(v.rstrip("Z")).replace(tzinfo=None)
        except ValueError:
            return v
    return v


def check_sql_and_local(world, case: Case, tmp_path: Path) -> None:
    """The oracle's bag has the case's size; obda's SQL on DuckDB and the local executor give it; the verdict."""
    project, con, oracle = world
    comp = project.compile(case.text)
    want = _sorted(oracle.answers(case.oracle_text, list(comp.columns)), comp)
    assert sum(want.values()) == case.size, f"{case.id}: the oracle gives {sorted(want.items(), key=str)}"
    got = sql_bag(con, comp.to_sql("duckdb"))
    assert got == want, f"{case.id}: SQL (DuckDB)\n" + bag_diff(got, want)
    assert obda.analyze(comp, project.sources).verdict == case.verdict
    if case.changelog:
        return
    if case.released:
        want = _sorted(case.executed_want(oracle, list(comp.columns)), comp)
        assert 0 < sum(want.values()) < case.size, f"{case.id}: the released answers {want}"
    got = executed(project, comp, tmp_path, "local")
    assert got == want, f"{case.id}: local executor\n" + bag_diff(got, want)


def check_spark(world, case: Case, tmp_path: Path, spark) -> None:
    """The Spark executor's answer lines are the oracle's bag."""
    project, _, oracle = world
    comp = project.compile(case.text)
    want = _sorted(case.executed_want(oracle, list(comp.columns)), comp)
    got = executed(project, comp, tmp_path, "spark", spark)
    assert got == want, f"{case.id}: Spark executor\n" + bag_diff(got, want)


def _sorted(bag: Counter, comp) -> Counter:
    if comp.query.ask and comp.query.time_variables:  # an ASK over streams answers true once, never false
        return Counter({row: n for row, n in bag.items() if row != (False,)})
    return concatenations_sorted(bag, comp.query) if comp.query.aggregation is not None else bag


def case_tests(cases: list[Case], spark_slow: frozenset = frozenset()):
    """The two tests of a module of cases: the SQL on DuckDB and the local executor, then (stream cases) Spark,
    each equal to pyoxigraph (``spark_slow``: the ids whose Spark run is under ``-m slow`` only). A module assigns
    them to its own names, which pytest collects."""

    @pytest.mark.parametrize("case", cases, ids=[c.id for c in cases])
    def test_sql_and_local_executor_equal_pyoxigraph(world, case, tmp_path):
        check_sql_and_local(world, case, tmp_path)

    @pytest.mark.spark
    @pytest.mark.parametrize("case", **spark_cases(cases, spark_slow))
    def test_spark_executor_equals_pyoxigraph(world, case, tmp_path, spark):
        check_spark(world, case, tmp_path, spark)

    return test_sql_and_local_executor_equal_pyoxigraph, test_spark_executor_equals_pyoxigraph


def spark_cases(cases: list[Case], slow: frozenset = frozenset()) -> dict:
    """``pytest.mark.parametrize`` arguments for the stream cases the Spark executor runs (those in ``slow``:
    under ``-m slow`` only)."""
    chosen = [c for c in cases if c.stream and not c.changelog]
    return {"argvalues": [pytest.param(c, marks=pytest.mark.slow) if c.id in slow else c for c in chosen],
            "ids": [c.id for c in chosen]}


def check_catalog_entry(demo_world, entry) -> None:
    """A catalog entry over the turbine demo: its expected verdict, and its SQL's bag on the demo's generated
    data equals pyoxigraph's (never empty)."""
    project, con, oracle = demo_world
    res = check_entry(project, entry)
    assert res.error is None, res.error
    assert res.verdict == entry.expected, f"{entry.name}: expected {entry.expected}, got {res.verdict} ({entry.why})"
    comp = project.compile(entry.query)
    want = oracle.answers(entry.query, list(comp.columns))
    assert want, f"{entry.name}: vacuous on the demo data"
    got = sql_bag(con, comp.to_sql("duckdb"))
    assert got == want, f"{entry.name}\n" + bag_diff(got, want)
