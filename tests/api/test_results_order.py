"""The service's results on the Spark backend, in application-time order: its pages and its SSE stream.

Issue 26, item 4 (evidence 4, with tests/execution/test_sink_order.py for the file and directory sinks):
a query's answers are committed by micro-batch as the part files of a directory sink (api/results.py); with
Spark's writers a micro-batch is many part files (here at most 4 answers each).  Paged with ``?after=`` and
read as Server-Sent Events, ``emitted_at`` never decreases, within one ``emitted_at`` the answers follow the
one tie-break (the binding's values as text, column by column), and a second query over the same files —
other micro-batches, its answers through the driver — numbers the very same sequence.
"""

from __future__ import annotations

import csv
import datetime as dt
import json
import random
from collections import Counter
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from api import create_app
from apikit import AUTH, PREFIX, answers, api_answers, make_workspace, settings_for
from execution.test_sink_order import assert_in_order
from obda.execution.committed_output import iter_committed
from obda.project import Project
from waiting import wait_for

pytestmark = pytest.mark.spark

#: every reading above 10: a single stream, bounded, many answers per timestamp
READINGS = PREFIX + "SELECT ?sensor ?v WHERE {\n  GRAPH ?t { ?m :measuredBy ?sensor ; :hasValue ?v . }\n  FILTER(?v > 10)\n}\n"
COLUMNS = ("sensor", "v")
RANGES = 2  # time ranges of three timestamps; each written by two writers (two files)


def write_readings(ws: Path, seed: int = 11, per_range: int = 3, per_ts: int = 30) -> None:
    """``RANGES`` pairs of measurement files; the two files of a pair cover the same ``per_range`` timestamps
    (two writers), with ``per_ts`` readings per timestamp between them, sensor ids of one, two and three digits
    (their text order is not their numeric order).  A micro-batch of a pair reads rows of one timestamp from
    both files: only a sort puts them in order."""
    rng = random.Random(seed)
    folder = ws / "data" / "measurement"
    k = 0
    for i in range(RANGES):
        files: list[list] = [[], []]
        for _ in range(per_range):
            ts = (dt.datetime(2024, 1, 1) + dt.timedelta(minutes=k)).isoformat(sep=" ")
            k += 1
            for j, sensor in enumerate(rng.sample(range(1, 151), per_ts)):  # (sensor_id, ts) is the declared key
                files[j % 2].append((sensor, rng.randint(0, 130), ts))
        for w, rows in enumerate(files):
            name = f"feed-{i:06d}-{w}.csv"
            with open(folder / f".{name}.tmp", "w", newline="") as f:
                out = csv.writer(f)
                out.writerow(["sensor_id", "value", "ts"])
                out.writerows(rows)
            (folder / f".{name}.tmp").rename(folder / name)


@pytest.fixture()
def spark_service(spark, monkeypatch, tmp_path):
    """The service on the tests' SparkSession, with at most 4 answers per part file Spark writes."""
    monkeypatch.setattr("obda.execution.spark_io.get_spark", lambda *a, **k: spark)
    key = "spark.sql.files.maxRecordsPerFile"
    before = spark.conf.get(key)
    spark.conf.set(key, "4")
    ws, _ = make_workspace(tmp_path / "ws", blocks=1)  # every stream has a file (the oracle reads them all)
    (ws / "data" / "measurement" / "feed-000000.csv").unlink()
    # no declared key on measurement: its check (a window over the timestamp and the key) would shuffle the rows
    # into timestamp order before the sink; without it, a micro-batch's answers are its two files' rows, as read
    src = (ws / "sources.yaml").read_text()
    at = src.index("  measurement:")
    cut = src.index("    key: [sensor_id, ts]\n", at)
    (ws / "sources.yaml").write_text(src[:cut] + src[cut + len("    key: [sensor_id, ts]\n"):])
    write_readings(ws)  # the measurement files: these
    app = create_app(settings_for(ws, backend="spark", state_dir=tmp_path / "state"))
    try:
        yield ws, app
    finally:
        spark.conf.set(key, before)


def pages(c, qid: str, limit: int = 25) -> list[dict]:
    items, after = [], 0
    while True:
        page = c.get(f"/v1/queries/{qid}/results", params={"after": after, "limit": limit}, headers=AUTH).json()
        if not page["items"]:
            return items
        assert [a["seq"] for a in page["items"]] == list(range(after + 1, after + 1 + len(page["items"])))
        items += page["items"]
        after = page["next_after"]


def sse(c, qid: str) -> list[dict]:
    """The whole stream of a stopped query: every answer, then the status event that ends it."""
    with c.stream("GET", f"/v1/queries/{qid}/results/stream", headers=AUTH) as s:
        assert s.status_code == 200
        text = s.read().decode()
    events = []
    for block in text.split("\n\n"):
        ev = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line and not line.startswith(":"))
        if "event" in ev:
            events.append(ev)
    assert events[-1]["event"] == "status", events[-1:]
    return [{"seq": int(e["id"]), **json.loads(e["data"])} for e in events[:-1] if e["event"] == "result"]


def test_pages_and_the_sse_stream_are_in_order_over_many_parts(spark_service):
    ws, app = spark_service
    registry = app.state.service.registry
    registry.shared.max_files_per_batch = 2  # a pair of files per micro-batch: several micro-batches
    build = registry._executor

    def executor(q):  # the first query's answers written by Spark's writers in every micro-batch
        handle = build(q)
        if q.name == "parts":
            handle.driver_answers = 0
        return handle

    registry._executor = executor
    project = Project.load(ws)
    expected = answers(ws, project.sources, project.compile(READINGS).to_sql("duckdb"))
    total = sum(expected.values())
    assert total > 150
    with TestClient(app) as c:
        got = {}
        for name in ("parts", "again"):  # the second one runs after the first, over the same files
            r = c.post("/v1/queries", json={"name": name, "query": READINGS, "idle_timeout": 0.3}, headers=AUTH)
            assert r.status_code == 201, r.text
            qid = r.json()["id"]
            assert c.post(f"/v1/queries/{qid}/start", headers=AUTH).json()["status"] == "running"
            done = wait_for(lambda: (i := c.get(f"/v1/queries/{qid}", headers=AUTH).json())["status"] != "running"
                            or i["results"] >= total and i, timeout=120)
            assert done["status"] == "running", done["error"]
            assert c.post(f"/v1/queries/{qid}/stop", headers=AUTH).json()["status"] == "stopped"
            items = pages(c, qid)
            assert api_answers(items, COLUMNS) == expected and len(items) == total
            assert_in_order(items, COLUMNS, f"results pages of {name!r}")
            streamed = sse(c, qid)
            assert_in_order(streamed, COLUMNS, f"SSE stream of {name!r}")
            assert streamed == [{**a, "op": None} for a in items]  # the same answers under the same numbers
            got[name] = [(a["emitted_at"], a["binding"]) for a in items]
            if name == "parts":
                batches = list(iter_committed(registry.settings.state_dir / qid / "results"))
                assert len(batches) >= 2 and max(len(b.files) for b in batches) >= 5, [len(b.files) for b in batches]
        assert got["again"] == got["parts"], "two runs over the same files numbered the answers in different orders"
        assert Counter(b["sensor"] for _, b in got["parts"])  # (non-empty)
