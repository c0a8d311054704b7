"""The local backend's reader: a bad file is quarantined with its name and reason, never fatal to the query.

A byte that is not UTF-8, a CSV without its header line (its first row would be lost as a header), a
field larger than Python's csv default (131,072 characters) and a UTF-8 byte-order mark: the query goes
on, its answers are those of the good rows, and every refused file is in the quarantine."""

from __future__ import annotations

import json

from execution.exec_harness import sources
from obda.analysis import plan_execution
from obda.execution import ContinuousQuery, JsonLinesSink
from obda.execution.rows import Rejected, read_file_rows

SQL = "SELECT m1.a AS a, m1.b AS b FROM s AS m1 WHERE m1.a > 0"
HEADER = "a,b,c,ts\n"


def _write(d, name: str, data: bytes) -> None:
    d.mkdir(parents=True, exist_ok=True)
    (d / name).write_bytes(data)


def test_bad_files_are_quarantined_and_the_query_goes_on(tmp_path):
    d = tmp_path / "data" / "s"
    _write(d, "part-0.csv", (HEADER + "1,10,0,2024-01-01 00:00:01\n").encode())
    _write(d, "part-1.csv", (HEADER + "2,20,0,2024-01-01 00:00:02\n").encode() + b"3,\xff,0,2024-01-01 00:00:02\n")
    _write(d, "part-2.csv", b"\xef\xbb\xbf" + (HEADER + "4,40,0,2024-01-01 00:00:03\n").encode())  # BOM
    _write(d, "part-3.csv", b"5,50,0,2024-01-01 00:00:04\n6,60,0,2024-01-01 00:00:04\n")  # no header line
    big = "x" * 200_000
    _write(d, "part-4.csv", (HEADER + f'7,70,0,2024-01-01 00:00:05\n"{big}",1,0,2024-01-01 00:00:05\n').encode())
    _write(d, "part-5.csv", (HEADER + "8,80,0,2024-01-01 00:00:06\n").encode())
    src = sources(s="data/s", t="data/t", u="data/u", r="data/r")
    q = ContinuousQuery(plan_execution(SQL, src, ["bounded"]), base_dir=tmp_path, backend="local",
                        sink=JsonLinesSink(tmp_path / "out.jsonl"), quarantine=tmp_path / "q.jsonl",
                        max_files_per_batch=1)
    q.run_until_exhausted()
    q.close()
    got = sorted((x["binding"]["a"], x["binding"]["b"]) for x in map(json.loads, (tmp_path / "out.jsonl").read_text().splitlines()))
    assert got == [(1, 10), (4, 40), (7, 70), (8, 80)]  # part-1 refused whole (not UTF-8), part-3 (no header)
    quarantined = [json.loads(line) for line in (tmp_path / "q.jsonl").read_text().splitlines()]
    by_file = {r["file"].rsplit("/", 1)[-1]: r["reason"] for r in quarantined}
    assert "not UTF-8 (byte 0xff at line 3)" in by_file["part-1.csv"]
    assert "does not name the column(s) a, b, c, ts" in by_file["part-3.csv"]
    assert "part-4.csv" in by_file and "a" in by_file["part-4.csv"]  # the big field is not an integer: that row
    assert set(by_file) == {"part-1.csv", "part-3.csv", "part-4.csv"}


def test_the_header_is_matched_by_name_in_any_order(tmp_path):
    f = tmp_path / "x.csv"
    f.write_text("ts,c,b,a\n2024-01-01 00:00:01,0,2,1\n")
    assert read_file_rows(str(f), "csv", {}, ("a", "b", "c", "ts")) == [
        {"ts": "2024-01-01 00:00:01", "c": "0", "b": "2", "a": "1"}]
    f.write_text("a,b\n1,2\n")
    (r,) = read_file_rows(str(f), "csv", {}, ("a", "b", "c", "ts"))
    assert isinstance(r, Rejected) and "c, ts" in r.reason
