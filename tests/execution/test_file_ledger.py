"""Files are immutable once read (issue 26, item 3): a file that changes after it was read is reported —
a quarantine record with the reason and the metric ``changed_files`` — once per change, across a restart,
and what changed is not read (never silently: the record says so)."""

from __future__ import annotations

import json
import os

import pytest

from execution.exec_harness import sources
from obda.analysis import plan_execution
from obda.execution import ContinuousQuery, JsonLinesSink

SQL = "SELECT m1.a AS a, m1.b AS b FROM s AS m1 WHERE m1.a > 0"
HEADER = "a,b,c,ts\n"


def _query(tmp_path, backend):
    src = sources(s="data/s", t="data/t", u="data/u", r="data/r")
    return ContinuousQuery(plan_execution(SQL, src, ["bounded"]), base_dir=tmp_path, backend=backend,
                           sink=JsonLinesSink(tmp_path / "out.jsonl"), checkpoint_dir=tmp_path / "ck",
                           quarantine=tmp_path / "q.jsonl")


@pytest.mark.parametrize("backend", ["local", pytest.param("spark", marks=pytest.mark.spark)])
def test_a_file_that_grows_after_it_was_read_is_reported_once_and_its_new_rows_are_not_read(tmp_path, backend, request):
    if backend == "spark":
        request.getfixturevalue("spark")
    d = tmp_path / "data" / "s"
    d.mkdir(parents=True)
    a = d / "a.csv"
    a.write_text(HEADER + "1,10,0,2024-01-01 00:00:01\n")
    before = a.stat().st_size
    q = _query(tmp_path, backend)
    q.step(exhausted=True)
    assert q.metrics.changed_files == 0
    with open(a, "a") as f:  # a writer that appends instead of writing a new file
        f.write("2,20,0,2024-01-01 00:00:02\n")
    (d / "b.csv").write_text(HEADER + "3,30,0,2024-01-01 00:00:03\n")
    q.step(exhausted=True)
    assert q.metrics.changed_files == 1
    q.step(exhausted=True)  # reported once per change
    assert q.metrics.changed_files == 1
    q.close()
    q = _query(tmp_path, backend)  # the ledger is in the checkpoint
    q.step(exhausted=True)
    assert q.metrics.changed_files == 1
    os.utime(a, ns=(1, 1))  # rewritten: a new modification time is a change too
    q.step(exhausted=True)
    assert q.metrics.changed_files == 2
    q.close()
    got = sorted(json.loads(x)["binding"]["a"] for x in (tmp_path / "out.jsonl").read_text().splitlines())
    assert got == [1, 3]  # the appended row is not read
    changed = [r for r in map(json.loads, (tmp_path / "q.jsonl").read_text().splitlines()) if r["reason"].startswith("changed")]
    assert [r["file"] for r in changed] == [str(a), str(a)]
    assert f"grew from {before} to {before + 27} bytes after it was read" in changed[0]["reason"]
    assert "rename" in changed[0]["reason"]
