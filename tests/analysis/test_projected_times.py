"""Projected times (docs/analysis.md, "Projected times"): Rule 1 — a projected timestamp is a value of its
stream; Rule 2 — an answer keyed by its own (latest) timestamp needs no memory to stay distinct.  Every case
runs both checkers (the ``verdicts`` fixture: polynomial and naive must agree)."""

from __future__ import annotations

import pytest

from obda.analysis import analyze, build_forest
from obda.analysis.explain import hint, plain, witness
from obda.analysis.normal_form import from_sql
from obda.analysis.preprocess import preprocess
from obda.analysis.criteria import check_polynomial

ISO = "REPLACE(CAST({} AS VARCHAR), ' ', 'T')"


@pytest.mark.parametrize("sql,verdict,criterion", [
    # Rule 1, bags
    ("SELECT S.t1, S.A FROM S", "bounded", "single_stream"),
    ("SELECT S.t1, S.A FROM S, T WHERE T.t2 < S.t1 AND T.D = 1", "bounded", "theorem1"),  # the root's time
    ("SELECT T.t2 FROM S, T WHERE T.t2 < S.t1", "unbounded", "theorem1"),  # a child's time (spec §7 row 3's shape)
    ("SELECT S.t1 FROM S, T WHERE S.A = 1 AND T.D = 2", "unbounded", "arasu_5_6"),  # several trees
    ("SELECT T.t2, S.A FROM S, T WHERE T.t2 < S.t1 AND T.t2 < TIMESTAMP '2024-01-01 00:00:00'",
     "bounded", "single_stream"),  # T is finite: its time is a finite value
    ("SELECT R.since, S.A FROM S, R WHERE S.B = R.x", "bounded", "single_stream"),  # a static timestamp
    # Rule 1, sets without the key
    ("SELECT DISTINCT T.t2 FROM S, T WHERE T.t2 < S.t1", "not_shown", "theorem2"),
    ("SELECT DISTINCT S.t1, T.t2 FROM S, T WHERE S.A = T.D AND 0 < S.A AND S.A < 5", "unbounded", "arasu_5_10"),
    # Rule 2: keyed by the latest stream's time
    ("SELECT DISTINCT S.t1, S.A FROM S", "bounded", "time_keyed"),
    ("SELECT DISTINCT S.A FROM S", "unbounded", "arasu_5_10"),  # the same without the key
    ("SELECT DISTINCT S.t1, S.A, T.D FROM S, T WHERE T.t2 < S.t1 AND 0 < T.D AND T.D < 5", "bounded", "time_keyed"),
    ("SELECT DISTINCT S.t1, T.D FROM S, T WHERE T.t2 < S.t1", "not_shown", "time_keyed"),  # C1 on the child
    ("SELECT DISTINCT S.t1 FROM S, T WHERE T.t2 < S.t1 AND S.A = T.D", "not_shown", "time_keyed"),  # C2: T.D
    ("SELECT DISTINCT S.t1 FROM S, T WHERE T.t2 < S.t1 AND S.A = T.D AND 0 < T.D AND T.D < 9", "bounded", "time_keyed"),
    ("SELECT DISTINCT T.t2 FROM S, T WHERE T.t2 < S.t1 AND S.A = T.D", "not_shown", "theorem2"),  # not the latest
    ("SELECT DISTINCT S.t1, S.A FROM S, T WHERE S.t1 = T.t2 AND S.B = T.E", "bounded", "time_keyed"),  # merged
    # in a template: keyed when the text determines the time
    (f"SELECT DISTINCT CONCAT('http://x/', CAST(S.A AS VARCHAR), '_', {ISO.format('S.t1')}) AS o FROM S",
     "bounded", "time_keyed"),
    (f"SELECT DISTINCT CONCAT('http://x/', M.label, {ISO.format('M.ts')}) AS o FROM M", "unbounded", "arasu_5_10"),
])
def test_projected_time_verdicts(verdicts, sql, verdict, criterion):
    poly, naive, report = verdicts(sql)
    assert poly == naive == verdict, (poly, naive, [v.message for m in report.members for v in m.violations])
    assert report.members[0].criterion == criterion


def test_a_child_time_violation_is_explained_as_a_time(sources):
    (m,) = from_sql("SELECT T.t2 AS t FROM S, T WHERE T.t2 < S.t1", sources)
    (mq,) = preprocess(m)
    (v,) = check_polynomial(mq).violations
    assert v.kind == "projection" and v.detail["time"] and "projected timestamp T.t2" in v.message
    assert "holds the timestamp of" in plain(mq, v) and "N timestamps" in witness(mq, v)
    assert "time of the latest stream" in hint(mq, v)


def test_keyed_plan_remembers_one_timestamp(sources):
    report = analyze("SELECT DISTINCT S.t1, S.A FROM S", sources)
    member = report.to_dict()["members"][0]
    assert member["criterion"] == "time_keyed"
    assert "answers of the open timestamp only" in " ".join(report.members[0].parts[0].plan.notes)
    assert report.forest.keyed_by_time


def test_a_union_is_keyed_only_on_a_column_every_select_keys(sources):
    keyed = ("SELECT DISTINCT S.t1 AS t, S.A AS v FROM S UNION "
             "SELECT DISTINCT U.t3 AS t, U.F AS v FROM U")
    r = analyze(keyed, sources)
    assert r.verdict == "bounded" and {m.criterion for m in r.members} == {"time_keyed"} and r.forest.keyed_by_time
    # the second SELECT writes its time in another column: an answer of one could repeat an older one of the other
    apart = ("SELECT DISTINCT S.t1 AS t, S.A AS v, S.A AS w FROM S UNION "
             "SELECT DISTINCT U.F AS t, U.F AS v, U.t3 AS w FROM U")
    r = analyze(apart, sources)
    assert r.verdict != "bounded" and "time_keyed" not in {m.criterion for m in r.members}
    assert not r.forest.keyed_by_time


def test_the_forest_keys_only_by_the_root(sources):
    assert build_forest("SELECT DISTINCT S.t1, T.D FROM S, T WHERE T.t2 < S.t1", sources).members[0].keyed == (0,)
    assert build_forest("SELECT DISTINCT T.t2, S.A FROM S, T WHERE T.t2 < S.t1", sources).members[0].keyed == ()
    assert not build_forest("SELECT DISTINCT S.t1, T.D FROM S, T", sources).keyed_by_time  # two roots
    assert not build_forest("SELECT S.t1, S.A FROM S", sources).keyed_by_time  # a bag: nothing to remember
