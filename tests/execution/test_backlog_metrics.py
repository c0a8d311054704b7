"""Input outpacing the query is reported (issue 29, item 2): per stream the files and bytes listed but not yet
read, how long the oldest has waited (wall time), and how far closing trails the newest row read (application
time) — on both backends, after every micro-batch, and back to zero once the query caught up."""

from __future__ import annotations

import os
import time

import pytest

from obda.analysis import plan_execution
from obda.execution import ContinuousQuery, JsonLinesSink
from obda.model.sources import Sources

YAML = """
tables:
  s: {kind: stream, timestamp: ts, location: data/s, format: csv, columns: {a: integer, ts: timestamp}}
"""
SQL = "SELECT m.a AS a FROM s AS m WHERE m.a > 0"


# the Spark variant is slow-marked (about 15 s): both backends observe the backlog in the same ``_cut`` and commit
@pytest.mark.parametrize("backend", ["local", pytest.param("spark", marks=[pytest.mark.spark, pytest.mark.slow])])
def test_backlog_and_lag_are_reported_after_every_micro_batch(tmp_path, backend, request):
    if backend == "spark":
        request.getfixturevalue("spark")
    d = tmp_path / "data" / "s"
    d.mkdir(parents=True)
    now = time.time()
    sizes = []
    for i in range(5):  # file i: times 10i .. 10i+9 s; written 500 - 100 i seconds ago
        f = d / f"part-{i}.csv"
        f.write_text("a,ts\n" + "".join(f"{k},2024-01-01T00:00:{10 * i + k:02d}Z\n" for k in range(10)))
        os.utime(f, (now - 500 + 100 * i, now - 500 + 100 * i))
        sizes.append(f.stat().st_size)
    q = ContinuousQuery(plan_execution(SQL, Sources.from_yaml(YAML), ["bounded"]), base_dir=tmp_path, backend=backend,
                        sink=JsonLinesSink(tmp_path / "out.jsonl"), max_files_per_batch=1)
    seen = []
    for i in range(5):
        q.step()
        m = q.metrics.to_dict()
        seen.append((m["backlog_files"], m["backlog_bytes"]))
        assert m["backlog_files"] == {"s": 4 - i} and m["backlog_bytes"] == {"s": sum(sizes[i + 1:])}, (i, m)
        if i < 4:  # the oldest unread file is file i+1
            assert 400 - 100 * i - 5 <= m["lag_seconds"] <= 400 - 100 * i + 60, (i, m["lag_seconds"])
        else:
            assert m["lag_seconds"] == 0.0
        # the newest row read is at 10i+9 s; timestamps up to the previous file's are closed (this file's stay open)
        if i > 0:
            assert m["app_lag_seconds"] > 0, (i, m)
    q.step(exhausted=True)
    q.close()
    m = q.metrics.to_dict()
    assert (m["backlog_files"], m["backlog_bytes"], m["lag_seconds"], m["app_lag_seconds"]) == ({"s": 0}, {"s": 0}, 0.0, 0.0)
