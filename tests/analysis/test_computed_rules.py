"""Computed conditions (docs/analysis.md, Rules 5–7): one test per rule, and the executor on them.

Rule 5: a computed condition over one FROM entry is a per-row filter (bounded carries over; unbounded is
not shown).  Rule 6: a computed comparison of two entries separates into an atom between derived attributes
(or is refused).  Rule 7: a derived attribute of bounded columns is bounded.  On every case the polynomial
checker equals the naive one (before the Rule 5/6 adjustment, which both get alike), and the local executor
equals DuckDB on 50 random seeds after every closed timestamp.
"""

from __future__ import annotations

import pytest

from obda.analysis import analyze, build_forest
from obda.analysis.computed import separate
from obda.analysis.normal_form import from_sql
from obda.errors import AnalysisError

from execution.exec_harness import Oracle, counter_of, drive, from_us, random_splits, random_streams
from execution.exec_harness import sources as exec_sources
from seeds import seed_sets


def one(sources, sql):
    (m,) = from_sql(sql, sources)
    return m


# ---------------------------------------------------------------------------------------------- Rule 5

def test_rule5_filter_over_one_entry_is_a_pipeline_filter(sources, verdicts):
    sql = "SELECT m1.A FROM S m1 WHERE ABS(m1.B - 3) < 2 AND LENGTH(CAST(m1.C AS VARCHAR)) > 1"
    m = one(sources, sql)
    assert m.predicates == () and len(m.filters) == 2
    poly, naive, report = verdicts(sql)
    assert poly == naive == "bounded" and report.verdict == "bounded"
    assert report.members[0].criterion == "single_stream"
    assert any("Rule 5" in n for n in report.members[0].notes)
    forest = build_forest(sql, sources)
    (pipe,) = [p for mf in forest.members for p in mf.pipelines.values()]
    assert len(pipe.filters) == 2  # run per row, before any synopsis


def test_rule5_unbounded_becomes_not_shown_with_the_reason(sources, verdicts):
    sql = "SELECT DISTINCT m1.A FROM S m1 WHERE ABS(m1.B) < 3"
    poly, naive, report = verdicts(sql)
    assert poly == naive == "unbounded"  # what the criteria say without the filter
    assert report.verdict == "not_shown"
    assert any("unbounded is not shown" in n and "ABS(m1.B) < 3" in n for n in report.members[0].notes)


def test_rule5_leaves_linear_one_column_conditions_exact(sources):
    m = one(sources, "SELECT m1.A FROM S m1 WHERE m1.B * 2 + 1 < 7")
    assert [str(p) for p in m.predicates] == ["m1.B < 3"] and m.filters == ()


def test_a_number_column_cast_to_double_is_the_column_in_a_condition(sources, verdicts):
    """``xsd:double(?l) >= 2.5``: the cast of a number column keeps its value, so the atom is the column's own,
    as exact as ``m1.B >= 2.5`` (an atom the criteria read, not a Rule 5 filter); a cast of a string is none."""
    m = one(sources, "SELECT m1.A FROM S m1 WHERE CAST(m1.B AS DOUBLE) >= 2.5")
    assert [str(p) for p in m.predicates] == [str(p) for p in one(sources, "SELECT m1.A FROM S m1 WHERE m1.B >= 2.5").predicates]
    assert m.filters == ()
    poly, naive, report = verdicts("SELECT DISTINCT m1.A FROM S m1 WHERE CAST(m1.B AS DOUBLE) < 3 AND m1.B > 0")
    assert poly == naive == report.verdict


# ---------------------------------------------------------------------------------------------- Rule 6

def test_rule6_separation():
    owner = lambda c: c.table  # noqa: E731
    parse = lambda s: __import__("sqlglot").parse_one(s)  # noqa: E731
    l, r = separate(parse("(m2.v - m1.v)"), parse("0.5"), owner)
    assert (l.sql(), r.sql()) == ("m2.v", "m1.v + 0.5")
    l, r = separate(parse("m1.a * 2 + m2.b"), parse("m1.c - 3"), owner)
    assert (l.sql(), r.sql()) == ("m1.a * 2 - (m1.c)", "0 - (m2.b) - (3)")
    assert separate(parse("m1.a * m2.b"), parse("3"), owner) is None  # a term reads both entries
    assert separate(parse("m1.a + m2.b"), parse("m3.c"), owner) is None  # three entries


def test_rule6_atom_between_derived_attributes(sources, verdicts):
    sql = "SELECT m2.D FROM S m1, T m2 WHERE m1.t1 < m2.t2 AND (m2.D - m1.A) > 0.5"
    m = one(sources, sql)
    assert [str(p) for p in m.predicates if "t" not in str(p)] == ["m1.⟨A + 0.5⟩ < m2.D"]
    assert [str(a) for a, _ in m.derived] == ["m1.⟨A + 0.5⟩"]
    poly, naive, report = verdicts(sql)
    assert poly == naive == "unbounded"  # C5: m1's side of the inequality join is unbounded
    assert report.verdict == "not_shown"
    forest = build_forest(sql, sources)
    (mf,) = forest.members
    assert any(a[1].startswith("#p") for a, _ in mf.member.exprs)  # m1.A + 0.5 computed in m1's pipeline


# ---------------------------------------------------------------------------------------------- Rule 8

def test_rule8_what_does_not_separate_is_a_filter_on_the_joined_row(sources, verdicts):
    """``m1.A * m2.D > 4`` (no f(m1) op g(m2)): no atom; its columns count as projected (kept with the answer to
    test it); the verdict is the member's without it — bounded stays bounded, unbounded is not shown."""
    sql = "SELECT m2.D FROM S m1, T m2 WHERE m1.t1 = m2.t2 AND m1.A * m2.D > 4"
    m = one(sources, sql)
    assert len(m.predicates) == 1  # m1.t1 = m2.t2 only
    assert m.joined == ("m1.A * m2.D > 4",) and {str(a) for p in m.projection for a in p.attrs} == {
        "m2.D", "m1.A"}
    poly, naive, report = verdicts(sql)
    assert poly == naive == report.verdict == "bounded"
    assert any("Rule 8" in n for n in report.members[0].notes)
    (mf,) = build_forest(sql, sources).members
    (k,) = mf.member.filters
    assert mf.member.items[k].kind == "expr" and mf.member.visible == 1
    # across timestamps without a bound on the values: the member without it is unbounded, which is not shown
    poly, naive, report = verdicts("SELECT m2.D FROM S m1, T m2 WHERE m1.t1 < m2.t2 AND m1.A * m2.D > 4")
    assert poly == naive == "unbounded" and report.verdict == "not_shown"


# ---------------------------------------------------------------------------------------------- Rule 7

def test_rule7_function_of_bounded_columns_is_bounded(sources, verdicts):
    sql = ("SELECT m2.D FROM S m1, T m2 WHERE m1.t1 < m2.t2 AND (m2.D - m1.A) > 0.5 AND m1.A >= 0 AND "
           "m1.A <= 100")
    poly, naive, report = verdicts(sql)
    assert poly == naive == report.verdict == "bounded"
    assert report.members[0].criterion == "theorem1"
    # without the columns' bounds the same join is C5's violation
    poly, naive, _ = verdicts("SELECT m2.D FROM S m1, T m2 WHERE m1.t1 < m2.t2 AND (m2.D - m1.A) > 0.5")
    assert poly == naive == "unbounded"
    # the bound does not flow back: a derived value equal to a bounded one leaves its column free
    poly, naive, report = verdicts("SELECT m1.A FROM S m1, T m2 WHERE m1.t1 < m2.t2 AND "
                                   "m1.A * 2 = m2.D + 1 AND m2.D >= 0 AND m2.D <= 3")
    assert poly == naive == "unbounded" and report.verdict == "not_shown"


def test_rule7_projected_function_reads_its_columns(sources):
    m = one(sources, "SELECT UPPER(m1.label) AS u FROM M m1")
    assert [str(a) for a in m.projection[0].attrs] == ["m1.label"]


# ---------------------------------------------------------------------------------------------- executor

EXEC_SQL = [
    # Rule 6 across two streams (bounded by Rule 7), and a Rule 5 filter with functions
    "SELECT m2.d AS d, m1.a AS a FROM s AS m1, t AS m2 WHERE m1.ts < m2.ts AND (m2.d - m1.a) > 1 AND m1.a >= 0 "
    "AND m1.a <= 5",
    "SELECT m1.a AS a, m1.b AS b FROM s AS m1 WHERE ABS(m1.a - m1.b) >= 2 AND FLOOR(m1.c / 2) = 1",
    "SELECT m1.a AS a, m2.e AS e FROM s AS m1, t AS m2 WHERE m1.ts = m2.ts AND m1.a * 2 < m2.e + 3",
]


@seed_sets()
@pytest.mark.parametrize("sql", EXEC_SQL)
def test_local_executor_equals_duckdb_on_seeds(sql, seeds):
    src = exec_sources()
    assert analyze(sql, src).verdict == "bounded"
    nonempty = 0
    for seed in seeds:
        rows = random_streams(seed, steps=10)
        oracle = Oracle(src, rows)
        snapshots = {}

        def on_close(rt, out):
            if rt.closed_upto is not None:
                snapshots[from_us(rt.closed_upto)] = counter_of(out)

        _, out = drive(sql, src, random_splits(rows, seed), on_close=on_close)
        expected_at = oracle.answers_at(sql, sorted(snapshots))
        for mark, got in snapshots.items():
            assert got == expected_at[mark], (seed, mark, got - expected_at[mark], expected_at[mark] - got)
        final = oracle.answers(sql)
        assert counter_of(out) == final
        nonempty += bool(final)
    assert nonempty >= len(seeds) / 2


def test_rule7_a_value_of_two_entries_is_an_item_of_the_joined_row():
    """``SELECT m1.a - m2.d`` (a BIND over two joined patterns): the forest computes it on the joined row from one
    attribute of each entry; with a stream's timestamp among its columns it is refused, naming the answer column
    (a time is held as microseconds where the answers are computed)."""
    from obda.errors import ExecutionError

    forest = build_forest("SELECT m1.a AS a, ABS(m1.b - m2.d) AS gap FROM s AS m1, t AS m2 WHERE m1.ts = m2.ts",
                          exec_sources())
    item = forest.members[0].member.items[1]
    assert item.kind == "expr" and item.attrs == (("m1", "b"), ("m2", "d"))
    assert item.value.sql() == "ABS(__a0 - __a1)"
    with pytest.raises(ExecutionError, match=r"\?late: the value .* computes with a stream's timestamp"):
        build_forest("SELECT m1.a AS a, m1.b + m2.ts AS late FROM s AS m1, t AS m2 WHERE m1.ts = m2.ts", exec_sources())


def test_rule7_a_date_part_of_a_fixed_range_is_finite(sources, verdicts):
    """HOURS(?t) (``EXTRACT(HOUR FROM …)``; also MONTH, DAY, MINUTE) has finitely many values whatever the timestamps:
    a set of them is bounded; YEAR has no such range, so the same set of years is not."""
    poly, naive, report = verdicts("SELECT DISTINCT EXTRACT(HOUR FROM m1.t1) AS h FROM S m1 WHERE m1.A > 3")
    assert poly == naive == report.verdict == "bounded"
    assert [str(a) for a in one(sources, "SELECT EXTRACT(MINUTE FROM m1.t1) AS h FROM S m1").projection[0].attrs] == [
        "m1.⟨MINUTE(t1)⟩"]
    poly, naive, report = verdicts("SELECT DISTINCT EXTRACT(YEAR FROM m1.t1) AS y FROM S m1")
    assert poly == naive == "unbounded"
