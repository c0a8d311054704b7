"""Bad files are quarantined with their name, line and reason, never fatal to the query — on both backends.

A byte that is not UTF-8, a CSV without its header line (its first row would be lost as a header), a
field larger than Python's csv default (131,072 characters) and a UTF-8 byte-order mark: the query goes
on, its answers are those of the good rows, and every refused file or row is in the quarantine, the
same on the local backend and on Spark."""

from __future__ import annotations

import json

from execution.exec_harness import sources
from obda.analysis import plan_execution
from obda.execution import ContinuousQuery, JsonLinesSink
import pytest

from obda.execution.reader import Rejected, read_records
from obda.model.sources import Column, ColumnType, Table, TableKind

SQL = "SELECT m1.a AS a, m1.b AS b FROM s AS m1 WHERE m1.a > 0"
HEADER = "a,b,c,ts\n"


def _write(d, name: str, data: bytes) -> None:
    d.mkdir(parents=True, exist_ok=True)
    (d / name).write_bytes(data)


@pytest.mark.parametrize("backend", ["local", pytest.param("spark", marks=pytest.mark.spark)])
def test_bad_files_are_quarantined_and_the_query_goes_on(tmp_path, backend, request):
    if backend == "spark":
        request.getfixturevalue("spark")
    d = tmp_path / "data" / "s"
    _write(d, "part-0.csv", (HEADER + "1,10,0,2024-01-01 00:00:01\n").encode())
    _write(d, "part-1.csv", (HEADER + "2,20,0,2024-01-01 00:00:02\n").encode() + b"3,\xff,0,2024-01-01 00:00:02\n")
    _write(d, "part-2.csv", b"\xef\xbb\xbf" + (HEADER + "4,40,0,2024-01-01 00:00:03\n").encode())  # BOM
    _write(d, "part-3.csv", b"5,50,0,2024-01-01 00:00:04\n6,60,0,2024-01-01 00:00:04\n")  # no header line
    big = "x" * 200_000
    _write(d, "part-4.csv", (HEADER + f'7,70,0,2024-01-01 00:00:05\n"{big}",1,0,2024-01-01 00:00:05\n').encode())
    _write(d, "part-5.csv", (HEADER + "8,80,0,2024-01-01 00:00:06\n").encode())
    src = sources(s="data/s", t="data/t", u="data/u", r="data/r")
    q = ContinuousQuery(plan_execution(SQL, src, ["bounded"]), base_dir=tmp_path, backend=backend,
                        sink=JsonLinesSink(tmp_path / "out.jsonl"), quarantine=tmp_path / "q.jsonl",
                        max_files_per_batch=1)
    q.run_until_exhausted()
    q.close()
    got = sorted((x["binding"]["a"], x["binding"]["b"]) for x in map(json.loads, (tmp_path / "out.jsonl").read_text().splitlines()))
    assert got == [(1, 10), (2, 20), (4, 40), (7, 70), (8, 80)]  # part-3 refused whole (no header)
    quarantined = [json.loads(line) for line in (tmp_path / "q.jsonl").read_text().splitlines()]
    by_file = {r["file"].rsplit("/", 1)[-1]: (r["line"], r["reason"]) for r in quarantined}
    assert by_file["part-1.csv"] == (3, "invalid: the record is not UTF-8 text (it holds bytes that are not UTF-8, "
                                        "read as U+FFFD)")
    assert by_file["part-3.csv"][0] == 1 and "does not name the column(s) a, b, c, ts" in by_file["part-3.csv"][1]
    assert by_file["part-4.csv"][0] == 3 and "column 'a' (integer)" in by_file["part-4.csv"][1]
    assert set(by_file) == {"part-1.csv", "part-3.csv", "part-4.csv"}


TABLE = Table("s", TableKind.STREAM, tuple(Column(n, ColumnType.INTEGER) for n in "abc")
              + (Column("ts", ColumnType.TIMESTAMP),), timestamp="ts")


def test_the_header_is_matched_by_name_in_any_order(tmp_path):
    f = tmp_path / "x.csv"
    f.write_text("ts,c,b,a\n2024-01-01 00:00:01,0,2,1\n")
    (r,) = read_records(str(f), TABLE, "csv")
    assert r.line == 2 and r.fields == {"ts": "2024-01-01 00:00:01", "c": "0", "b": "2", "a": "1"}
    f.write_text("a,b\n1,2\n")
    (r,) = read_records(str(f), TABLE, "csv")
    assert isinstance(r, Rejected) and "c, ts" in r.reason and r.line == 1


def test_a_static_table_without_files_is_an_error_on_the_local_backend_as_on_spark(tmp_path):
    import pytest as _pytest

    from obda.errors import ExecutionError

    (tmp_path / "data" / "s").mkdir(parents=True)
    (tmp_path / "data" / "r").mkdir(parents=True)  # no file: a join with it would silently answer nothing
    src = sources(s="data/s", t="data/t", u="data/u", r="data/r")
    sql = "SELECT m1.a AS a, r.name AS name FROM s AS m1, r WHERE m1.a = r.id"
    q = ContinuousQuery(plan_execution(sql, src, ["bounded"]), base_dir=tmp_path, backend="local")
    with _pytest.raises(ExecutionError, match="static table 'r': no data files at"):
        q.open()


def test_a_folder_that_cannot_be_listed_is_an_error_not_an_empty_stream(tmp_path, monkeypatch):
    import os

    import pytest as _pytest

    from obda.errors import ExecutionError
    from obda.execution import spark_io

    real = os.walk

    def walk(top, onerror=None, **kw):
        onerror(PermissionError(13, "Permission denied", str(top)))
        return real(top, onerror=onerror, **kw)

    monkeypatch.setattr(spark_io.os, "walk", walk)
    with _pytest.raises(ExecutionError, match="cannot list .*: Permission denied"):
        spark_io.list_files(tmp_path)
