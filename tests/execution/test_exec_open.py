"""Configure, then start: constructing a query does no I/O; ``open()`` (or the first ``step``/``start``) loads
the static tables, restores the checkpoint and starts Spark on first use."""

from __future__ import annotations

import pytest

from execution.exec_harness import CASE, STATIC_R, random_splits, random_streams, sources, write_csv_batches, write_static
from obda.errors import ExecutionError
from obda.analysis import plan_execution
from obda.execution import ContinuousQuery, JsonLinesSink


def _files(tmp_path, seed=3):
    src = sources(s="data/s", t="data/t", u="data/u", r="data/r")
    write_csv_batches(tmp_path / "data", random_splits(random_streams(seed), seed, max_chunk=6), src)
    write_static(tmp_path / "data", "r", STATIC_R)
    return src


def _query(tmp_path, src, backend="local", **kw):
    case = CASE["tree_static_bag"]
    return ContinuousQuery(plan_execution(case.sql, src, [case.verdict]), base_dir=tmp_path, backend=backend,
                           sink=JsonLinesSink(tmp_path / "out.jsonl"), **kw)


def test_the_constructor_reads_nothing_and_starts_no_spark(tmp_path, monkeypatch):
    from obda.execution import query_inputs

    src = _files(tmp_path)
    (tmp_path / "ck").mkdir()
    (tmp_path / "ck" / "state.pkl").write_bytes(b"not a checkpoint")  # read by open(), not before
    read = []
    monkeypatch.setattr(query_inputs, "read_records", lambda *a, **k: read.append(a) or [])
    q = _query(tmp_path, src, backend="spark", checkpoint_dir=tmp_path / "ck")
    assert q._spark is None and not read
    assert q.describe()["members"]  # the plan is there
    q.close()


def test_open_refuses_another_querys_checkpoint_and_runs_after_a_clean_one(tmp_path):
    src = _files(tmp_path)
    (tmp_path / "ck").mkdir()
    (tmp_path / "ck" / "state.pkl").write_bytes(b"not a checkpoint")
    q = _query(tmp_path, src, checkpoint_dir=tmp_path / "ck")  # no error yet: nothing read
    with pytest.raises(ExecutionError):
        q.open()
    with pytest.raises(ExecutionError):  # the first micro-batch opens it too
        q.step()
    q.close()
    (tmp_path / "ck" / "state.pkl").unlink()
    q = _query(tmp_path, src, checkpoint_dir=tmp_path / "ck")
    assert q.open() is q and q.open() is q  # once
    q.run_until_exhausted()
    q.close()
    assert q.metrics.rows_out == len((tmp_path / "out.jsonl").read_text().splitlines()) > 0


def test_the_executor_runs_the_plan_it_is_given_without_analysing(tmp_path, monkeypatch):
    """One plan, computed once: constructing and running a query from an ExecutionPlan calls no analysis; an
    aggregate's report handed to ``plan_execution`` is not computed again."""
    import obda.analysis as analysis
    from obda.analysis import aggregates, analyze_query

    src = _files(tmp_path)
    sql = "SELECT m1.a AS a, COUNT(*) AS n FROM s AS m1 WHERE 0 < m1.a AND m1.a < 5 GROUP BY m1.a"
    report = analyze_query(sql, src)
    calls = []
    real = aggregates.analyze_aggregate
    monkeypatch.setattr(aggregates, "analyze_aggregate", lambda *a, **k: calls.append("aggregate") or real(*a, **k))
    plan = plan_execution(sql, src, report)
    assert calls == [] and plan.aggregate.report is report

    def refuse(*a, **k):
        raise AssertionError("the executor analysed")

    monkeypatch.setattr(analysis, "analyze", refuse)
    monkeypatch.setattr(aggregates, "analyze_aggregate", refuse)
    monkeypatch.setattr(analysis, "build_forest", refuse)
    q = ContinuousQuery(plan, base_dir=tmp_path, backend="local", sink=JsonLinesSink(tmp_path / "agg.jsonl"))
    q.run_until_exhausted()
    assert q.columns == ("a", "n") and (tmp_path / "agg.jsonl").read_text()
    with pytest.raises(ExecutionError, match="runs an ExecutionPlan"):
        ContinuousQuery(sql, base_dir=tmp_path, backend="local")
