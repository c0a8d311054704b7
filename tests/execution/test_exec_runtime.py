"""Application-time ordering: markers, late rows, invalid rows, idle timeout."""

import datetime as dt
from collections import Counter

from execution.exec_harness import BASE, CASE, Oracle, counter_of, drive, random_splits, random_streams, sources
from obda.analysis.forest import build_forest
from obda.execution.rows import micros_to_iso, to_micros


def at(k: int) -> dt.datetime:
    return BASE + dt.timedelta(seconds=k)


def test_timestamp_closes_only_when_every_stream_passed_it():
    src = sources()
    sql = CASE["row5_bag"].sql
    b1 = {"t": [{"d": 2, "e": 0, "ts": at(0)}], "s": [{"a": 9, "b": 0, "c": 0, "ts": at(1)}]}
    b2 = {"t": [{"d": 3, "e": 0, "ts": at(1)}, {"d": 1, "e": 0, "ts": at(5)}]}
    seen = []
    rt, out = drive(sql, src, [b1, b2], on_close=lambda rt, out: seen.append((rt.closed_upto, len(out))))
    # after b1: t is at 0, s at 1 → nothing at or after 0 is closed (more t rows of 0 may come)
    assert seen[0] == (to_micros(at(0)) - 1, 0)
    # after b2: t is at 5, s at 1 → timestamps < 1 close (t@0; s@1 stays open); the end of input closes the rest
    assert seen[1] == (to_micros(at(1)) - 1, 0)
    assert counter_of(out) == Counter({(9,): 1})  # a=9 > d=2 (t@0 < s@1); t@1 is not earlier than s@1


def test_late_rows_are_counted_quarantined_and_do_not_change_results():
    src = sources()
    sql = CASE["row5_bag"].sql
    rows = random_streams(4)
    batches = random_splits(rows, 4)
    late = [{"a": 100, "b": 0, "c": 0, "ts": at(0)}, {"a": 101, "b": 0, "c": 0, "ts": at(0)}]
    batches.append({"s": late + [{"a": 5, "b": 0, "c": 0, "ts": at(50)}], "t": [{"d": 1, "e": 0, "ts": at(50)}]})
    rt, out = drive(sql, src, batches)
    assert rt.metrics.late == 2 and rt.metrics.late_by_stream == {"s": 2}
    valid = {k: list(v) for k, v in rows.items()}
    valid["s"].append({"a": 5, "b": 0, "c": 0, "ts": at(50)})
    valid["t"].append({"d": 1, "e": 0, "ts": at(50)})
    assert counter_of(out) == Oracle(src, valid).answers(sql)


def test_invalid_rows_are_counted_with_reasons():
    from obda.execution.reader import MALFORMED_CSV, Record, Rejected
    from obda.execution.rows import process_rows

    src = sources()
    plan = build_forest(CASE["row5_bag"].sql, src, "spark")
    pipes = [p for p in plan.pipelines if p.table.name == "s"]
    raw = [
        Record(2, {"a": "1", "b": "2", "c": "3", "ts": "2024-01-01 00:00:01"}),
        Record(3, {"a": "x", "b": "2", "c": "3", "ts": "2024-01-01 00:00:01"}),  # wrong type
        Record(4, {"a": "1", "b": "2", "c": "3", "ts": None}),  # missing timestamp
        Record(5, {"a": "1", "b": "2", "c": "3", "ts": "yesterday"}),  # unparseable timestamp
        Rejected("1,2", MALFORMED_CSV, 6),  # malformed line
        Record(7, {"a": "1", "b": "2", "c": "3", "ts": "2023-01-01 00:00:00"}),  # late
    ]
    b = process_rows(src.table("s"), pipes, raw, to_micros("2023-06-01 00:00:00"), "f.csv")
    assert (b.rows, b.valid, b.invalid, b.late) == (6, 1, 4, 1)
    reasons = [q["reason"] for q in b.quarantine]
    assert any("column 'a'" in r for r in reasons)
    assert any("missing timestamp" in r for r in reasons)
    assert any("column 'ts'" in r for r in reasons)
    assert any("malformed" in r for r in reasons)
    assert any(r.startswith("late:") for r in reasons)
    assert all(q["file"] == "f.csv" and q["stream"] == "s" for q in b.quarantine)
    assert [q["line"] for q in b.quarantine] == [3, 4, 5, 6, 7]


def test_idle_timeout_closes_timestamps_of_a_silent_stream():
    src = sources()
    sql = CASE["row1_bag"].sql
    now = [0.0]
    clock = lambda: now[0]  # noqa: E731
    batches = [
        {"t": [{"d": 1, "e": 0, "ts": at(0)}], "s": []},
        {"s": [{"a": 4, "b": 0, "c": 0, "ts": at(3)}]},
        {"s": [{"a": 5, "b": 0, "c": 0, "ts": at(4)}]},
    ]
    closed = []

    def on_close(rt, out):
        closed.append((rt.closed_upto, len(out)))
        now[0] += 10.0  # ten seconds of wall time per batch

    # without a timeout, t (silent after 0) holds every later timestamp open until the end of input
    drive(sql, src, batches, on_close=on_close, clock=clock)
    assert closed[1:3] == [(to_micros(at(0)) - 1, 0)] * 2
    closed.clear()
    now[0] = 0.0
    rt, out = drive(sql, src, batches, on_close=on_close, clock=clock, idle_timeout=5.0)
    # with a 5 s idle timeout t no longer holds markers back: s@3 closes once s passed it
    assert closed[1] == (to_micros(at(3)) - 1, 0)
    assert closed[2] == (to_micros(at(4)) - 1, 1)
    assert out[0].emitted_at == to_micros(at(3))


def test_emitted_at_is_iso_utc():
    assert micros_to_iso(to_micros("2024-01-01 00:00:05")) == "2024-01-01T00:00:05Z"
    assert micros_to_iso(to_micros("2024-01-01T00:00:05.25")) == "2024-01-01T00:00:05.250000Z"
