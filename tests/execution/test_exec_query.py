"""ContinuousQuery over files (local backend): sinks, verdict gating, checkpoint/restart exactly once."""

import io
import json
from collections import Counter

import pytest

from execution.exec_harness import (
    CASE,
    STATIC_R,
    Oracle,
    random_splits,
    random_streams,
    sources,
    write_csv_batches,
    write_static,
)
from obda.errors import ExecutionError
from obda.analysis import plan_execution
from obda.execution import ConsoleSink, ContinuousQuery, JsonLinesSink, MemorySink


def project(tmp_path, seed=5, steps=14):
    rows = random_streams(seed, steps=steps)
    batches = random_splits(rows, seed)
    src = sources(s="data/s", t="data/t", u="data/u", r="data/r")
    write_csv_batches(tmp_path / "data", batches, src)
    write_static(tmp_path / "data", "r", STATIC_R)
    return src, rows


def bindings(lines, columns):
    return Counter(tuple(d["binding"][c] for c in columns) for d in lines)


def test_jsonl_output_equals_duckdb(tmp_path):
    src, rows = project(tmp_path)
    case = CASE["tree_static_bag"]
    sink = JsonLinesSink(tmp_path / "out.jsonl")
    q = ContinuousQuery(plan_execution(case.sql, src, [case.verdict]), base_dir=tmp_path, sink=sink, backend="local", max_files_per_batch=1)
    q.run_until_exhausted()
    lines = sink.read()
    assert lines and set(lines[0]) == {"emitted_at", "binding"} and lines[0]["emitted_at"].endswith("Z")
    assert bindings(lines, ("a", "n")) == Oracle(src, rows, {"r": STATIC_R}).answers(case.sql)
    m = q.metrics.to_dict()
    assert m["rows_out"] == len(lines) and m["rows_in"]["s"] == len(rows["s"]) and m["late"] == m["invalid"] == 0
    assert m["batches"] > 1 and m["static_entries"] == len(STATIC_R)


def test_console_and_memory_sinks_emit_one_line_per_occurrence(tmp_path):
    src, rows = project(tmp_path)
    case = CASE["row5_bag"]
    buf = io.StringIO()
    q = ContinuousQuery(plan_execution(case.sql, src, ["bounded"]), base_dir=tmp_path, sink=ConsoleSink(buf), backend="local")
    q.run_until_exhausted()
    console = [json.loads(line) for line in buf.getvalue().splitlines()]
    mem = MemorySink()
    ContinuousQuery(plan_execution(case.sql, src, ["bounded"]), base_dir=tmp_path, sink=mem, backend="local").run_until_exhausted()
    drained = mem.drain()
    assert console == drained
    expected = Oracle(src, rows).answers(case.sql)
    assert bindings(drained, ("a",)) == expected and max(expected.values()) > 1  # bag: repeated lines


def test_unbounded_members_need_the_opt_in(tmp_path):
    src, _ = project(tmp_path)
    with pytest.raises(ExecutionError, match="allow_unbounded"):
        ContinuousQuery(plan_execution(CASE["row3_bag"].sql, src, ["unbounded"]), base_dir=tmp_path, backend="local")
    with pytest.raises(ExecutionError, match="not shown"):
        ContinuousQuery(plan_execution(CASE["row3_bag"].sql, src), base_dir=tmp_path, backend="local")
    q = ContinuousQuery(plan_execution(CASE["row3_bag"].sql, src, ["unbounded"]), base_dir=tmp_path, backend="local", allow_unbounded=True)
    q.run_until_exhausted()
    assert q.metrics.unbounded_members == [0]
    assert q.metrics.to_dict()["state_growth"] is not None
    assert q.describe()["members"][0]["verdict"] == "unbounded"


def test_report_verdicts_are_read_per_member_of_the_forest(tmp_path):
    """The executor runs the report's forest; each member's verdict is its SELECT's in the report (typed)."""
    import dataclasses

    from obda.analysis import analyze

    src, _ = project(tmp_path)
    report = analyze(CASE["union_bag"].sql, src)
    q = ContinuousQuery(plan_execution(CASE["union_bag"].sql, src, report), base_dir=tmp_path, backend="local")
    assert q.plan is report.forest and q.verdicts == ["bounded", "bounded"]
    m0, m1 = report.members
    worse = dataclasses.replace(report, members=(m0, dataclasses.replace(m1, verdict="not_shown")))
    with pytest.raises(ExecutionError, match="member 2: not_shown"):
        ContinuousQuery(plan_execution(CASE["union_bag"].sql, src, worse), base_dir=tmp_path, backend="local")

    class Lookalike:  # not a report: refused, never matched by its attributes
        members = report.members

    with pytest.raises(ExecutionError, match="AnalysisReport or a list of verdicts"):
        ContinuousQuery(plan_execution(CASE["union_bag"].sql, src, Lookalike()), base_dir=tmp_path, backend="local")


def test_describe_reports_the_synopsis_plan(tmp_path):
    src, _ = project(tmp_path)
    q = ContinuousQuery(plan_execution(CASE["row9_set"].sql, src, ["bounded"]), base_dir=tmp_path, backend="local")
    units = {tuple(u["tables"]): u for u in q.describe()["members"][0]["units"]}
    assert units[("u",)]["parent"] == ["m2"] and units[("u",)]["depth"] == 2 and units[("u",)]["key"] == ["m3.f"]
    assert units[("s",)]["depth"] == 0 and units[("s",)]["synopsis"].startswith("existence")


def _run(tmp_path, ckpt, out, batches=None, **kw):
    src = kw.pop("src")
    q = ContinuousQuery(
        plan_execution(CASE[kw.pop("case")].sql,
        src,
        ["bounded"]),
        base_dir=tmp_path,
        sink=JsonLinesSink(out),
        checkpoint_dir=ckpt,
        backend="local",
        max_files_per_batch=1,
    )
    q.run_until_exhausted(max_batches=batches)
    q.close()
    return q


@pytest.mark.parametrize("case", ["row9_set", "tree_static_bag", "row8_bag"])
def test_restart_from_checkpoint_equals_uninterrupted_run(tmp_path, case):
    src, _ = project(tmp_path, seed=11)
    _run(tmp_path, tmp_path / "ck_full", tmp_path / "full.jsonl", src=src, case=case)
    full = (tmp_path / "full.jsonl").read_text()
    assert full
    _run(tmp_path, tmp_path / "ck", tmp_path / "part.jsonl", batches=3, src=src, case=case)
    partial = (tmp_path / "part.jsonl").read_text()
    assert full.startswith(partial) and partial != full
    _run(tmp_path, tmp_path / "ck", tmp_path / "part.jsonl", src=src, case=case)
    assert (tmp_path / "part.jsonl").read_text() == full


def test_crash_between_output_and_checkpoint_gives_no_duplicates(tmp_path, monkeypatch):
    src, _ = project(tmp_path, seed=12)
    _run(tmp_path, tmp_path / "ck_full", tmp_path / "full.jsonl", src=src, case="row5_bag")
    full = (tmp_path / "full.jsonl").read_text()
    q = ContinuousQuery(
        plan_execution(CASE["row5_bag"].sql, src, ["bounded"]), base_dir=tmp_path, sink=JsonLinesSink(tmp_path / "o.jsonl"),
        checkpoint_dir=tmp_path / "ck", backend="local", max_files_per_batch=1,
    )
    q.run_until_exhausted(max_batches=4)
    real = q._checkpoint
    committed = {"offset": (tmp_path / "o.jsonl").stat().st_size}

    def crash(sink_offset, q_offset):
        if sink_offset > committed["offset"]:  # this batch wrote answers: die before committing them
            raise RuntimeError("simulated crash after the sink was written")
        return real(sink_offset, q_offset)

    monkeypatch.setattr(q, "_checkpoint", crash)
    with pytest.raises(RuntimeError):
        q.run_until_exhausted()
    q.sink.close()
    written = (tmp_path / "o.jsonl").read_text()
    assert len(written.encode()) > committed["offset"]  # uncommitted answers are in the file
    _run(tmp_path, tmp_path / "ck", tmp_path / "o.jsonl", src=src, case="row5_bag")
    assert (tmp_path / "o.jsonl").read_text() == full


def test_new_files_after_a_finished_run_continue_the_query(tmp_path):
    src, rows = project(tmp_path, seed=13)
    case = CASE["row5_bag"]
    _run(tmp_path, tmp_path / "ck", tmp_path / "o.jsonl", src=src, case="row5_bag")
    # more data with later timestamps arrives; the restarted query only adds the new answers
    more = random_streams(14, steps=30)
    later = {k: [r for r in v if r["ts"] > max(x["ts"] for x in rows["s"] + rows["t"])] for k, v in more.items()}
    write_csv_batches(tmp_path / "data2", [later], src)
    for name in ("s", "t", "u"):
        f = tmp_path / "data2" / name / "part-00000.csv"
        if f.exists():
            f.rename(tmp_path / "data" / name / "part-90000.csv")
    _run(tmp_path, tmp_path / "ck", tmp_path / "o.jsonl", src=src, case="row5_bag")
    lines = JsonLinesSink(tmp_path / "o.jsonl").read()
    allrows = {k: rows[k] + later[k] for k in rows}
    assert bindings(lines, ("a",)) == Oracle(src, allrows).answers(case.sql)


def test_checkpoint_of_another_query_is_refused(tmp_path):
    src, _ = project(tmp_path)
    _run(tmp_path, tmp_path / "ck", tmp_path / "o.jsonl", batches=1, src=src, case="row5_bag")
    with pytest.raises(ExecutionError, match="different query"):
        _run(tmp_path, tmp_path / "ck", tmp_path / "o.jsonl", src=src, case="row4_bag")


class _Planted:
    """Unpickling this runs ``open(path, "w")``: a stand-in for any code a planted checkpoint could run."""

    def __init__(self, path):
        self.path = str(path)

    def __reduce__(self):
        return (open, (self.path, "w"))


@pytest.mark.parametrize("payload", ["planted", "garbage", "not_a_state"])
def test_a_checkpoint_obda_did_not_write_is_refused_without_running_anything(tmp_path, payload):
    import pickle

    src, _ = project(tmp_path)
    _run(tmp_path, tmp_path / "ck", tmp_path / "o.jsonl", batches=1, src=src, case="row5_bag")
    ck = tmp_path / "ck" / "state.pkl"
    witness = tmp_path / "pwned"
    data = {
        "planted": pickle.dumps({"version": 1, "runtime": _Planted(witness)}),
        "garbage": ck.read_bytes()[: len(ck.read_bytes()) // 2],
        "not_a_state": pickle.dumps([1, 2, 3]),
    }[payload]
    ck.write_bytes(data)
    with pytest.raises(ExecutionError, match="checkpoint") as err:
        _run(tmp_path, tmp_path / "ck", tmp_path / "o.jsonl", src=src, case="row5_bag")
    assert not witness.exists()
    if payload == "planted":
        assert "io.open, which no obda checkpoint contains" in str(err.value)


def test_checkpoint_round_trip_keeps_every_value_type(tmp_path):
    """Everything a synopsis or the metrics may hold survives the restricted reader."""
    import datetime as dt
    from collections import defaultdict
    from decimal import Decimal

    from obda.execution import checkpoint
    from obda.execution.runtime import Metrics

    counts = defaultdict(int, {(1, "a", 2.5, True, None, Decimal("1.10")): 3})
    state = {
        "past": {0: counts, 1: {(dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc), dt.date(2024, 1, 2)): 1}},
        "emitted": {("x", -1), ("y", float("inf"))},
        "files": frozenset({"a.csv"}),
        "metrics": Metrics(),
        "offsets": [0, 12],
    }
    path = tmp_path / "c" / "state.pkl"
    assert checkpoint.dump(state, path) == path.stat().st_size
    back = checkpoint.load(path)
    assert back == state and isinstance(back["past"][0], defaultdict)


def test_invalid_and_late_rows_go_to_the_quarantine_file(tmp_path):
    src, rows = project(tmp_path, seed=15)
    (tmp_path / "data" / "s" / "part-99998.csv").write_text(
        "a,b,c,ts\n1,x,3,2024-01-01 00:00:01\n1,2,3,\n1,2\n7,0,0,2023-12-31 23:59:50\n"
    )
    q = ContinuousQuery(
        plan_execution(CASE["row5_bag"].sql, src, ["bounded"]), base_dir=tmp_path, checkpoint_dir=tmp_path / "ck", backend="local",
        max_files_per_batch=1,
    )
    q.run_until_exhausted()
    m = q.metrics
    assert (m.invalid, m.late) == (3, 1)
    recs = q.quarantine.read()
    assert (tmp_path / "ck" / "quarantine.jsonl").exists() and len(recs) == 4
    assert sorted(r["reason"].split(":")[0] for r in recs) == ["invalid", "invalid", "invalid", "late"]
    assert bindings(q.sink.drain(), ("a",)) == Oracle(src, rows).answers(CASE["row5_bag"].sql)


def test_static_only_query_is_answered_once(tmp_path):
    src, _ = project(tmp_path)
    sql = "SELECT m1.name AS n FROM r AS m1 WHERE m1.id > 2"
    mem = MemorySink()
    q = ContinuousQuery(plan_execution(sql, src, ["bounded"]), base_dir=tmp_path, sink=mem, backend="local")
    q.run_until_exhausted()
    q.step()
    lines = mem.drain()
    assert sorted(d["binding"]["n"] for d in lines) == ["n3", "n4", "n5"]
    assert all(d["emitted_at"] is None for d in lines)


def test_start_picks_up_new_files_and_stop_keeps_the_checkpoint(tmp_path):
    from waiting import wait_for

    src, rows = project(tmp_path, seed=16)
    data = tmp_path / "data"
    later = tmp_path / "later"
    (later / "s").mkdir(parents=True)
    for f in sorted((data / "s").glob("*.csv"))[2:]:  # hold back most of s: it arrives while running
        f.rename(later / "s" / f.name)
    mem = MemorySink()
    expected = Oracle(src, rows).answers(CASE["row5_bag"].sql)
    # The idle timeout is far longer than the files take to arrive: had it passed before they
    # arrive, the other streams' buffered timestamps would close and s's held-back rows be late
    # (by design, and tested with late rows elsewhere) -- here they must all be read as valid.
    q = ContinuousQuery(
        plan_execution(CASE["row5_bag"].sql, src, ["bounded"]), base_dir=tmp_path, sink=mem, backend="local",
        checkpoint_dir=tmp_path / "ck", trigger_interval=0.05, idle_timeout=3.0,
    )
    q.start()
    wait_for(lambda: q.metrics.batches >= 1, timeout=30)
    for f in sorted((later / "s").glob("*.csv")):
        f.rename(data / "s" / f.name)
    wait_for(lambda: q.metrics.rows_in.get("s", 0) >= len(rows["s"]), timeout=30)
    got = Counter()
    # once every stream is idle for idle_timeout, all buffered timestamps close: nothing is held back
    wait_for(lambda: got.update(bindings(mem.drain(), ("a",))) or got == expected, timeout=30)
    q.stop()
    assert not q.running and q.error is None
    assert q.metrics.rows_in["s"] == len(rows["s"]) and q.metrics.late == 0
    assert got == expected and not mem.drain()
