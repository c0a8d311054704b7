"""A bad file dropped into a stream folder while 3 queries run on it (issue 26, evidence 2).

The service (FastAPI TestClient, a state folder) runs three bounded queries over the demo's readings stream
(``measurement``): two bag queries with different filters and the bounded join with the maintenance stream.
Once they processed a first block, three files are dropped into the readings folder (written under a hidden
name and renamed, as a well-behaved writer does; named so they list after the good file before them):

* ``feed-000000z-bytes.csv``: a good header and good rows around a row holding the byte ``0xff`` and a row
  whose ``value`` is a 5 MB field;
* ``feed-000000z-noheader.csv``: rows without a header line (its first row is no header);
* ``feed-000000z-reordered.csv``: the header's columns in another order (a good file: its rows are read).

Every query reads them (a micro-batch of readings files only: the join's other stream has no new file in it),
then more good blocks are fed.  Every query keeps running (none fails); each query's quarantine (the
``quarantine.jsonl`` of its checkpoint folder) holds exactly the reader contract's records
(:mod:`obda.execution.reader`): the ``0xff`` row at its line as not UTF-8, the 5 MB row at its line with its
column named, the header-less file whole at line 1 because its header does not name the columns — each with
the file's name; the metrics count them; and each query's answers equal DuckDB's over the good rows (the fed
files, the good rows of the first file and the reordered file's rows).  On the local backend and on Spark.
"""

from __future__ import annotations

import csv
import datetime as dt
import json
import os
import shutil
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from api import create_app
from apikit import AUTH, BOUNDED, BOUNDED_JOIN, PREFIX, answers, api_answers, make_workspace, pages, settings_for
from obda.datagen import DEFAULT_START, DEFAULT_STEP
from obda.project import Project
from waiting import wait_for

#: a second bag query over the readings with another filter (bounded: one stream, no DISTINCT)
WARM = PREFIX + "SELECT ?sensor ?v WHERE {\n  GRAPH ?t { ?m :measuredBy ?sensor ; :hasValue ?v . }\n  FILTER(?v >= 50)\n}\n"
#: started in this order: the join (two streams) first, so that it is in step with the service's shared loop on
#: both its streams, and the dropped files are the first micro-batch with files of one of them only
QUERIES = {"join": (BOUNDED_JOIN, ["turbine", "v"]), "hot": (BOUNDED, ["sensor", "v"]), "warm": (WARM, ["sensor", "v"])}
POINTS = 5
STREAM = "measurement"
HEADER = ["sensor_id", "value", "ts"]
BIG = "9" * (5 << 20)  # a 5 MB field: digits, but no 64-bit integer

NOT_UTF8 = "invalid: the record is not UTF-8 text (it holds bytes that are not UTF-8, read as U+FFFD)"
BIG_REASON = f"invalid: column 'value' (integer): \"{'9' * 40}…\" is not a 64-bit integer"
NO_HEADER = ("invalid: the header (line 1) does not name the column(s) sensor_id, value, ts; the first line of a CSV "
             "file must name each column once (in any order); no row of it was read")


def ts_text(minutes: float) -> str:
    return (DEFAULT_START + dt.timedelta(minutes=minutes)).isoformat(sep=" ")


def last_ts_micros(blocks: int) -> int:
    last = DEFAULT_START.replace(tzinfo=dt.timezone.utc) + (blocks * POINTS - 1) * DEFAULT_STEP
    return int(last.timestamp()) * 1_000_000


def drop(path: Path, data: bytes) -> Path:
    """Write ``data`` under a hidden temporary name, then rename it: the reader never sees half a file."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)
    return path


def drop_bad_files(folder: Path) -> tuple[dict[str, Path], list[tuple[int, int, str]]]:
    """The three files (after block 0, whose last time point is minute 4; block 1 starts at minute 5: the
    rows here are between, later in each later file, so none is late and none repeats a key).
    Returns the files by kind and the good rows among them (sensor_id, value, ts)."""
    good_bytes = [(1, 95, ts_text(4.2)), (2, 60, ts_text(4.2)), (4, 99, ts_text(4.2))]
    lines = [
        ",".join(HEADER).encode(),
        f"{good_bytes[0][0]},{good_bytes[0][1]},{good_bytes[0][2]}".encode(),  # line 2
        b"3,9\xff7," + ts_text(4.2).encode(),  # line 3: the byte 0xff inside the value
        f"{good_bytes[1][0]},{good_bytes[1][1]},{good_bytes[1][2]}".encode(),  # line 4
        f"5,{BIG},{ts_text(4.2)}".encode(),  # line 5: a 5 MB field
        f"{good_bytes[2][0]},{good_bytes[2][1]},{good_bytes[2][2]}".encode(),  # line 6
    ]
    files = {"bytes": drop(folder / "feed-000000z-bytes.csv", b"\n".join(lines) + b"\n")}
    # no header line: its first row (a reading) is taken as the header and refused, the file is quarantined whole
    files["noheader"] = drop(folder / "feed-000000z-noheader.csv",
                             f"7,97,{ts_text(4.5)}\n8,98,{ts_text(4.5)}\n".encode())
    # the header's columns in another order: a good file
    good_reordered = [(10, 93, ts_text(4.7)), (13, 20, ts_text(4.7)), (16, 120, ts_text(4.7))]
    files["reordered"] = drop(folder / "feed-000000z-reordered.csv", (
        "ts,value,sensor_id\n" + "".join(f"{t},{v},{s}\n" for s, v, t in good_reordered)).encode())
    return files, good_bytes + good_reordered


def oracle_workspace(ws: Path, dest: Path, bad: dict[str, Path], good_rows) -> Path:
    """A copy of the workspace whose readings folder holds the fed files and one file of the good rows of
    the dropped files (in the declared column order), not the dropped files: what DuckDB reads."""
    shutil.copytree(ws, dest)
    for p in bad.values():
        (dest / "data" / STREAM / p.name).unlink()
    with open(dest / "data" / STREAM / "good-rows-of-dropped-files.csv", "w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(HEADER)
        w.writerows(good_rows)
    return dest


def expected_answers(ws: Path) -> dict:
    project = Project.load(ws)
    return {name: answers(ws, project.sources, project.compile(q).to_sql("duckdb")) for name, (q, _) in QUERIES.items()}




@pytest.fixture(params=["local", pytest.param("spark", marks=[pytest.mark.spark, pytest.mark.slow])])  # spark: ~50 s
def backend(request, monkeypatch):
    if request.param == "spark":
        spark = request.getfixturevalue("spark")
        monkeypatch.setattr("obda.execution.spark_io.get_spark", lambda *a, **k: spark)
    return request.param


def test_a_bad_file_in_a_stream_folder_is_quarantined_and_no_query_stops(backend, tmp_path):
    ws, feeder = make_workspace(tmp_path / "ws", blocks=1, seed=5, points=POINTS)
    state = tmp_path / "state"
    folder = ws / "data" / STREAM
    app = create_app(settings_for(ws, backend=backend, state_dir=state))
    with TestClient(app) as c:
        def info(qid):
            return c.get(f"/v1/queries/{qid}", headers=AUTH).json()

        def all_running(ids) -> dict:
            infos = {name: info(qid) for name, qid in ids.items()}
            failed = {n: (i["status"], (i["error"] or "")[:400]) for n, i in infos.items() if i["status"] != "running"}
            assert not failed, f"a query stopped on the bad files: {failed}"
            return infos

        def caught_up(ids, expected, closed_upto: int, invalid: int):
            """Every query running, its timestamps closed up to ``closed_upto``, every expected answer published."""
            def done():
                infos = all_running(ids)
                return all((i["metrics"] or {}).get("closed_upto") is not None
                           and i["metrics"]["closed_upto"] >= closed_upto
                           and i["metrics"]["invalid"] >= invalid
                           and i["results"] >= sum(expected[n].values()) for n, i in infos.items()) and infos
            try:
                return wait_for(done, timeout=45, every=0.1)
            except AssertionError:
                seen = {n: (i["results"], sum(expected[n].values()), {k: (i["metrics"] or {}).get(k) for k in
                                                                      ("closed_upto", "invalid", "late", "key_violations")})
                        for n, i in all_running(ids).items()}
                raise AssertionError(f"not caught up (results, expected, metrics) by query: {seen}; closed_upto "
                                     f"wanted {closed_upto}, invalid {invalid}") from None

        ids = {}
        for name, (query, _) in QUERIES.items():
            r = c.post("/v1/queries", json={"name": name, "query": query, "idle_timeout": 0.3}, headers=AUTH)
            assert r.status_code == 201, r.text
            ids[name] = r.json()["id"]
        for qid in ids.values():
            assert c.post(f"/v1/queries/{qid}/start", headers=AUTH).json()["status"] == "running"
        caught_up(ids, expected_answers(ws), last_ts_micros(1), 0)  # block 0 processed

        bad, good_rows = drop_bad_files(folder)
        # the dropped files are read (a micro-batch of readings files only), and every query goes on
        caught_up(ids, {n: {} for n in ids}, last_ts_micros(1), 3)
        feeder.feed_block()
        feeder.feed_block()
        oracle_ws = oracle_workspace(ws, tmp_path / "oracle", bad, good_rows)
        expected = expected_answers(oracle_ws)
        assert all(sum(e.values()) > 0 for e in expected.values()), expected
        infos = caught_up(ids, expected, last_ts_micros(3), 3)
        for name, i in infos.items():
            m = i["metrics"]
            assert (m["invalid"], m["invalid_by_stream"], m["late"], m["key_violations"]) == (3, {STREAM: 3}, 0, 0), (name, m)
        for name, qid in ids.items():
            assert c.post(f"/v1/queries/{qid}/stop", headers=AUTH).json()["status"] == "stopped"
            items = pages(c, qid)
            assert [a["seq"] for a in items] == list(range(1, len(items) + 1))
            assert api_answers(items, QUERIES[name][1]) == expected[name], name  # DuckDB over the good rows

    for name, qid in ids.items():
        records = [json.loads(line) for line in (state / qid / "quarantine.jsonl").read_text().splitlines()]
        got = sorted(((Path(r["file"]).name, r["line"], r["reason"], r["stream"]) for r in records), key=str)
        want = sorted([
            (bad["bytes"].name, 3, NOT_UTF8, STREAM),
            (bad["bytes"].name, 5, BIG_REASON, STREAM),
            (bad["noheader"].name, 1, NO_HEADER, STREAM),
        ], key=str)
        assert got == want, (name, [{k: (v[:80] if isinstance(v, str) else v) for k, v in r.items()} for r in records])
        for r in records:
            kind = "bytes" if Path(r["file"]).name == bad["bytes"].name else "noheader"
            assert Path(r["file"]).resolve() == bad[kind].resolve()  # the file's path, not only its name
        rows = {(Path(r["file"]).name, r["line"]): r["row"] for r in records}
        assert rows[(bad["noheader"].name, 1)] == f"7,97,{ts_text(4.5)}"  # the refused header as read
        assert BIG in rows[(bad["bytes"].name, 5)]  # the whole row is kept: nothing is lost without a record
        assert "\ufffd" in rows[(bad["bytes"].name, 3)]

