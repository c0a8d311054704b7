"""Opt-in load shedding (issue 29, item 2): input that waited longer than ``shed.max_lag`` is dropped by the
``drop_oldest`` policy, every dropped row counted per stream and application-time range in the quarantine
and the metrics, ``incomplete_since`` set; without the opt-in nothing is dropped; a restart neither reads a
dropped file nor counts it twice."""

from __future__ import annotations

import json
import os
import time
from collections import Counter

import pytest

from obda.analysis import plan_execution
from obda.errors import ExecutionError
from obda.execution import ContinuousQuery, JsonLinesSink, checkpoint
from obda.execution.shedding import Shed, count_rows, summarize
from obda.model.sources import Sources

YAML = """
tables:
  s: {kind: stream, timestamp: ts, location: data/s, format: csv, columns: {a: integer, ts: timestamp}}
  r: {kind: stream, timestamp: ts, location: data/r, format: json, columns: {b: integer, ts: timestamp}}
"""
SQL = "SELECT m.a AS a, n.b AS b FROM s AS m, r AS n WHERE m.ts = n.ts AND m.a > 0"
SHED = {"max_lag": "PT5M", "policy": "drop_oldest"}
OLD, FRESH = 900, 10  # seconds since the files were written: beyond and within max_lag


def _csv(i: int, extra: str = "") -> str:
    return "a,ts\n" + "".join(f"{k + 1},2024-01-01T00:{i:02d}:{k:02d}Z\n" for k in range(10)) + extra


def _json(i: int) -> str:
    return "".join(json.dumps({"b": k, "ts": f"2024-01-01T00:{i:02d}:{k:02d}Z"}) + "\n" for k in range(0, 10, 2))


def feed(root, ages: list[int]) -> list[tuple[str, str]]:
    """File i of each stream holds minute i of application time, written ``ages[i]`` seconds ago.  The
    first CSV file has an invalid and a malformed row too (read, so counted when dropped)."""
    now = time.time()
    files = []
    for sub in ("s", "r"):
        (root / "data" / sub).mkdir(parents=True, exist_ok=True)
    for i, age in enumerate(ages):
        s = root / "data" / "s" / f"part-{i:03d}.csv"
        s.write_text(_csv(i, "x,2024-01-01T00:00:30Z\n1,2,3\n" if i == 0 else ""))
        r = root / "data" / "r" / f"part-{i:03d}.json"
        r.write_text(_json(i))
        for f in (s, r):
            os.utime(f, (now - age, now - age))
            files.append((f.parent.name, str(f)))
    return files


def make(root, shed=None, ckpt=None, backend="local", **kw) -> ContinuousQuery:
    return ContinuousQuery(plan_execution(SQL, Sources.from_yaml(YAML), ["bounded"]), base_dir=root, backend=backend,
                           sink=JsonLinesSink(root / "out.jsonl"), checkpoint_dir=ckpt, shed=shed, **kw)


def outputs(root) -> Counter:
    p = root / "out.jsonl"
    return Counter(p.read_text().splitlines()) if p.exists() else Counter()


def test_without_the_opt_in_nothing_is_dropped_however_old(tmp_path):
    feed(tmp_path, [OLD * 100] * 4)
    q = make(tmp_path, max_files_per_batch=1)
    m = q.run_until_exhausted().to_dict()
    q.close()
    assert m["rows_read"] == {"s": 42, "r": 20} and "shed" not in m
    assert not [r for r in q.quarantine.read() if r.get("shed")]


# both backends cut and commit a micro-batch in the same ContinuousQuery methods; Spark's variant is slow-marked
@pytest.mark.parametrize("backend", ["local", pytest.param("spark", marks=[pytest.mark.spark, pytest.mark.slow])])
def test_drop_oldest_counts_every_dropped_row_per_stream_and_range(tmp_path, backend, request):
    if backend == "spark":
        request.getfixturevalue("spark")
    full, shed = tmp_path / "full", tmp_path / "shed"
    ages = [OLD, OLD, OLD, FRESH, FRESH, FRESH]
    for root in (full, shed):
        feed(root, ages)
    q = make(full, backend=backend)
    m_full = q.run_until_exhausted().to_dict()
    q.close()
    q = make(shed, shed=SHED, ckpt=shed / "ckpt", backend=backend)
    m = q.run_until_exhausted().to_dict()
    q.close()

    dropped = {"s": 3 * 10 + 2, "r": 3 * 5}  # the first CSV's invalid and malformed rows are rows too
    assert m["shed"]["rows"] == dropped and m["shed"]["files"] == {"s": 3, "r": 3}
    assert {k: m_full["rows_read"][k] - m["rows_read"][k] for k in dropped} == dropped
    assert m["shed"]["max_lag"] == "PT5M" and m["shed"]["policy"] == "drop_oldest"
    assert m["shed"]["ranges"]["s"] == [{"from": "2024-01-01T00:00:00Z", "to": "2024-01-01T00:02:09Z",
                                         "rows": 32, "files": 3}]
    assert m["incomplete_since"] == "2024-01-01T00:00:00Z"
    records = [r for r in q.quarantine.read() if r.get("shed")]
    assert len(records) == 6 and all(r["reason"].startswith("shed: the file waited") for r in records)
    assert {(r["stream"], r["file"].rsplit("/", 1)[1], r["rows"], r["from"], r["to"]) for r in records if r["stream"] == "r"} == {
        ("r", f"part-{i:03d}.json", 5, f"2024-01-01T00:{i:02d}:00Z", f"2024-01-01T00:{i:02d}:08Z") for i in range(3)}
    summary = summarize(q.quarantine.read())
    assert {k: v["rows"] for k, v in summary["shed"].items()} == dropped
    assert summary["shed"]["s"]["from"] == "2024-01-01T00:00:00Z" and summary["shed"]["s"]["to"] == "2024-01-01T00:02:09Z"
    assert "invalid" not in summary  # the dropped file's bad rows were never read: counted as shed, only
    # the answers are the full run's over minutes 3..5 only: the dropped minutes are missing, nothing else
    assert outputs(shed) == Counter(l for l in outputs(full).elements() if json.loads(l)["emitted_at"] >= "2024-01-01T00:03")
    assert len(outputs(shed)) > 0


def test_only_files_beyond_max_lag_are_dropped(tmp_path):
    feed(tmp_path, [OLD, FRESH, OLD, FRESH])  # by age, not by name
    q = make(tmp_path, shed={"max_lag": 300})
    m = q.run_until_exhausted().to_dict()
    q.close()
    names = sorted(r["file"].rsplit("/", 1)[1] for r in q.quarantine.read() if r.get("shed"))
    assert names == ["part-000.csv", "part-000.json", "part-002.csv", "part-002.json"]
    assert m["rows_read"] == {"s": 20, "r": 10} and m["shed"]["rows"] == {"s": 22, "r": 10}


def test_a_restart_neither_reads_a_dropped_file_nor_counts_it_twice(tmp_path, monkeypatch):
    feed(tmp_path, [OLD, OLD, FRESH, FRESH])
    ckpt = tmp_path / "ckpt"
    q = make(tmp_path, shed=SHED, ckpt=ckpt, max_files_per_batch=1)
    q.step()  # drops files 0 and 1 of both streams, reads file 2: committed
    q.close()
    feed_more = tmp_path / "data" / "s" / "part-009.csv"
    feed_more.write_text(_csv(9))
    os.utime(feed_more, (time.time() - OLD, time.time() - OLD))
    real = checkpoint.dump
    calls = []

    def crash(*a, **k):  # the micro-batch that drops part-009 dies before its checkpoint
        calls.append(1)
        raise OSError("simulated crash")

    q = make(tmp_path, shed=SHED, ckpt=ckpt, max_files_per_batch=1)
    monkeypatch.setattr(checkpoint, "dump", crash)
    with pytest.raises(Exception):
        q.step()
    assert calls
    monkeypatch.setattr(checkpoint, "dump", real)
    q.close()
    q = make(tmp_path, shed=SHED, ckpt=ckpt, max_files_per_batch=1)
    m = q.run_until_exhausted().to_dict()
    q.close()
    assert m["shed"]["rows"] == {"s": 22 + 10, "r": 10} and m["shed"]["files"] == {"s": 3, "r": 2}
    records = [r for r in q.quarantine.read() if r.get("shed")]
    assert sorted(r["file"].rsplit("/", 1)[1] for r in records) == [
        "part-000.csv", "part-000.json", "part-001.csv", "part-001.json", "part-009.csv"]
    assert m["rows_read"] == {"s": 20, "r": 10}  # files 2 and 3, each once


@pytest.mark.parametrize("spec, message", [
    ({"max_lag": "5 minutes"}, "is not a duration"),
    ({"max_lag": "PT0S"}, "more than 0 seconds"),
    ({"max_lag": "PT5M", "policy": "random"}, "unknown policy 'random'; the policies are drop_oldest"),
    ({"max_lag": "PT5M", "every": 3}, "unknown setting 'every'"),
    ({"policy": "drop_oldest"}, "shed must be {max_lag"),
])
def test_a_wrong_setting_is_refused_with_what_to_write(spec, message):
    with pytest.raises(ExecutionError, match=message.replace("{", r"\{").replace("(", r"\(")):
        Shed.parse(spec)


def test_a_stream_the_reader_cannot_count_refuses_shedding(tmp_path):
    yaml = "tables:\n  p: {kind: stream, timestamp: ts, location: data/p, format: parquet, columns: {a: integer, ts: timestamp}}\n"
    with pytest.raises(ExecutionError, match="csv and json streams only"):
        ContinuousQuery(plan_execution("SELECT x.a AS a FROM p AS x", Sources.from_yaml(yaml), ["bounded"]),
                        base_dir=tmp_path, backend="local", shed=SHED)


def test_count_rows_is_the_readers_count(tmp_path):
    f = tmp_path / "f.csv"
    f.write_text(_csv(4, "bad,also-bad\n\n7,2024-01-01T00:09:00Z\n"))
    table = Sources.from_yaml(YAML).table("s")
    assert count_rows(str(f), table, "csv") == (12, 1704067440000000, 1704067740000000)
