"""Overload (issue 29, item 2; evidence 2): input fed at about ten times the rate the service processes it,
for a bounded time, through the HTTP service on the local backend.

Shown: the micro-batch byte budget keeps the service's memory flat (resident set sampled, slope asserted);
the lag of a query without shedding grows and is reported (``lag_seconds``, ``backlog_files``); a
registration meanwhile is refused with 429 ``service_behind`` and the reason; a query that opted in to
shedding stays within its bound and every row it dropped is counted exactly: its quarantine summary equals
the rows fed minus the rows it read (the slow variant also lets the query without shedding drain the whole
input, and compares the two runs' inputs directly), its answers are exactly those of the files it read, and
``incomplete_since`` is the first dropped row's time.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import threading
import time
from collections import Counter

import pytest
from fastapi.testclient import TestClient

from api import create_app
from obda.execution.shedding import summarize

from apikit import AUTH, BOUNDED, make_workspace, pages, settings_for
from waiting import wait_for

ROWS = 400  # rows per fed file: a small file, so a micro-batch (one file, by the byte budget) is quick
BUDGET = 4096  # bytes of new files per micro-batch: one file of ROWS rows (the service's max_bytes_per_batch)
BASE = dt.datetime(2030, 1, 1, tzinfo=dt.timezone.utc)
MAX_LAG = 2.0  # seconds: the service's registration bound and the shedding query's max_lag


def rss_bytes() -> int:
    """This process's resident set now (not its peak): /proc/self/status VmRSS."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS in /proc/self/status")


def slope(points: list[tuple[float, float]]) -> float:
    """Least-squares slope of (x, y) points."""
    n = len(points)
    mx, my = sum(p[0] for p in points) / n, sum(p[1] for p in points) / n
    sxx = sum((x - mx) ** 2 for x, _ in points)
    return sum((x - mx) * (y - my) for x, y in points) / sxx


def file_rows(i: int) -> list[tuple[int, int, int]]:
    """The rows of fed file ``i``: (sensor_id, value, seconds after BASE); each file its own seconds."""
    return [(k % 50, (i * 7 + k * 13) % 100, i * ROWS + k) for k in range(ROWS)]


class Input:
    """Writes measurement files (whole, under a temporary name, then renamed); remembers each one's number only
    (its rows are :func:`file_rows` again: the test's own memory does not grow with the input)."""

    def __init__(self, folder):
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        self.files: dict[str, int] = {}  # path -> file number
        self.bytes = 0

    def write(self) -> None:
        i = len(self.files)
        text = "sensor_id,value,ts\n" + "".join(
            f"{s},{v},{(BASE + dt.timedelta(seconds=t)).strftime('%Y-%m-%dT%H:%M:%SZ')}\n" for s, v, t in file_rows(i))
        path = self.folder / f"ov-{i:06d}.csv"
        tmp = self.folder / f".ov-{i:06d}.csv"
        tmp.write_text(text)
        os.rename(tmp, path)
        self.bytes += len(text)
        self.files[str(path)] = i

    def rows(self, files) -> int:
        return ROWS * len(list(files))

    def values(self, f: str) -> list[tuple[int, int]]:
        """(value, timestamp µs) of each row of fed file ``f``."""
        base_us = int(BASE.timestamp() * 1e6)
        return [(v, base_us + t * 1_000_000) for _, v, t in file_rows(self.files[f])]


def iso(us: int) -> str:
    return (dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc) + dt.timedelta(microseconds=us)).strftime("%Y-%m-%dT%H:%M:%SZ")


def run_overload(tmp_path, seconds: float, drain_full: bool):
    ws, _ = make_workspace(tmp_path / "ws", blocks=0)
    feed = Input(ws / "data" / "measurement")
    state = tmp_path / "state"
    settings = settings_for(ws, state_dir=state, max_lag_seconds=MAX_LAG, max_bytes_per_batch=BUDGET)
    with TestClient(create_app(settings)) as c:
        def info(qid):
            return c.get(f"/v1/queries/{qid}", headers=AUTH).json()

        def register(name, **kw):
            r = c.post("/v1/queries", json={"name": name, "query": BOUNDED, "idle_timeout": 1.0, **kw}, headers=AUTH)
            assert r.status_code == 201, r.text
            assert c.post(f"/v1/queries/{r.json()['id']}/start", headers=AUTH).status_code == 200
            return r.json()["id"]

        full = register("full")
        shed = register("shed", shed={"max_lag": "PT2S", "policy": "drop_oldest"})
        assert info(shed)["shed"] == {"max_lag": "PT2S", "policy": "drop_oldest"} and info(full)["shed"] is None

        # the processing rate: 20 files, fresh, read by both queries (one file per micro-batch: the budget)
        for _ in range(20):
            feed.write()
        t0 = time.monotonic()
        wait_for(lambda: info(full)["metrics"]["rows_read"].get("measurement") == 20 * ROWS, timeout=60)
        rate = 20 / (time.monotonic() - t0)  # files per second the service gets through
        consumed_before = 20

        # overload: about ten times that rate, for `seconds`
        stop = threading.Event()
        written = []

        def feeder():
            start, n = time.monotonic(), 0
            while not stop.is_set() and time.monotonic() - start < seconds:
                n += 1
                feed.write()
                delay = start + n / (10 * rate) - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
            written.append((n, time.monotonic() - start))

        thread = threading.Thread(target=feeder, daemon=True)
        rss, lags, refusal = [], [], None
        start = time.monotonic()
        thread.start()
        while thread.is_alive():
            m = info(full)["metrics"]
            now = time.monotonic() - start
            rss.append((now, rss_bytes()))
            lags.append((now, m["lag_seconds"], sum(m["backlog_files"].values()), info(shed)["metrics"]["lag_seconds"]))
            if refusal is None and m["lag_seconds"] > MAX_LAG:
                refusal = c.post("/v1/queries", json={"name": "late", "query": BOUNDED}, headers=AUTH)
            time.sleep(0.2)
        thread.join()
        fed, took = written[0]
        full_done = info(full)["metrics"]["rows_read"]["measurement"] // ROWS - consumed_before
        feed_ratio = (fed / took) / max(full_done / took, 1e-9)

        # the shedding query catches up within its bound: every file it did not read is in its quarantine
        all_files = set(feed.files)

        def shed_caught_up():
            m = info(shed)["metrics"]
            return m["backlog_files"]["measurement"] == 0 and \
                m["rows_read"]["measurement"] + sum(m["shed"]["rows"].values()) == feed.rows(all_files)

        wait_for(shed_caught_up, timeout=60)
        time.sleep(1.5)  # idle: its last timestamps close
        assert c.post(f"/v1/queries/{shed}/stop", headers=AUTH).status_code == 200
        shed_info = info(shed)
        full_info = None
        if drain_full:
            wait_for(lambda: info(full)["metrics"]["rows_read"]["measurement"] == feed.rows(all_files),
                     timeout=900, every=1.0)
            full_info = info(full)
        records = [json.loads(line) for line in (state / shed / "quarantine.jsonl").read_text().splitlines() if line]
        shed_answers = pages(c, shed, limit=1000)
    return dict(feed=feed, rate=rate, fed_rate=fed / took, feed_ratio=feed_ratio, rss=rss, lags=lags, refusal=refusal,
                shed_info=shed_info, full_info=full_info, records=records, answers=shed_answers, fed_bytes=feed.bytes)


def check(r, seconds: float) -> None:
    feed, shed_info, records = r["feed"], r["shed_info"], r["records"]
    print(f"\noverload: processing {r['rate']:.1f} files/s measured, fed {r['fed_rate']:.1f} files/s "
          f"({r['fed_rate'] / r['rate']:.1f}x that; {r['feed_ratio']:.1f}x what the query without shedding got through "
          f"meanwhile); {len(feed.files)} files, {feed.rows(feed.files)} rows, {r['fed_bytes']} bytes")
    # memory flat: the resident set's slope over the second half of the overload
    half = [(t, b) for t, b in r["rss"] if t >= seconds / 2]
    grow = slope(half) * (seconds / 2)
    print(f"RSS {r['rss'][0][1] >> 20} MiB at the start, {r['rss'][-1][1] >> 20} MiB at the end; slope over the "
          f"second half {slope(half) / 2**20:.2f} MiB/s, {grow / 2**20:.1f} MiB over it")
    assert r["feed_ratio"] >= 4, f"the input was fed at only {r['feed_ratio']:.1f}x the processing rate"
    # a service that kept its backlog in memory would grow by at least the bytes fed meanwhile (about 1 MiB/s here)
    assert grow < 4 * 2**20, f"memory grew {grow / 2**20:.1f} MiB in the second half of the overload"
    # the lag of the query without shedding grows and is reported; the shedding query's stays near its bound
    first, last = r["lags"][0], r["lags"][-1]
    print(f"lag without shedding {first[1]:.1f} s -> {last[1]:.1f} s, backlog {first[2]} -> {last[2]} files; "
          f"with shedding at most {max(x[3] for x in r['lags']):.1f} s")
    assert last[1] > MAX_LAG and last[1] > first[1] + 1 and last[2] > first[2] + 20
    assert max(x[3] for x in r["lags"][len(r["lags"]) // 2:]) < MAX_LAG + 3
    # registrations refused while behind, with the reason
    refusal = r["refusal"]
    assert refusal is not None and refusal.status_code == 429, refusal and refusal.text
    body = refusal.json()
    assert body["code"] == "service_behind" and "behind its input" in body["detail"] and refusal.headers["Retry-After"]
    # every dropped row counted exactly: quarantine summary = rows fed - rows read
    shed_records = [x for x in records if x.get("shed")]
    dropped = {x["file"] for x in shed_records}
    read = set(feed.files) - dropped
    assert len(dropped) == len(shed_records) and dropped <= set(feed.files) and dropped
    summary = summarize(records)["shed"]["measurement"]
    m = shed_info["metrics"]
    assert summary["rows"] == feed.rows(dropped) == feed.rows(feed.files) - m["rows_read"]["measurement"]
    assert m["rows_read"]["measurement"] == feed.rows(read) and m["shed"]["rows"] == {"measurement": summary["rows"]}
    assert summary["files"] == len(dropped) == m["shed"]["files"]["measurement"]
    times = [ts for f in dropped for _, ts in feed.values(f)]
    assert (summary["from"], summary["to"]) == (iso(min(times)), iso(max(times)))
    assert shed_info["incomplete_since"] == iso(min(times)) == m["incomplete_since"]
    # its answers: exactly the hot readings of the files it read
    got = Counter(a["binding"]["v"] for a in r["answers"])
    assert got == Counter(v for f in read for v, _ in feed.values(f) if v > 90) and got
    print(f"shed: {summary['rows']} rows of {len(dropped)} files dropped ({summary['from']} .. {summary['to']}), "
          f"{m['rows_read']['measurement']} read; incomplete_since {shed_info['incomplete_since']}")
    if r["full_info"] is not None:  # the two runs' inputs, compared directly
        full = r["full_info"]["metrics"]
        assert full["rows_read"]["measurement"] - m["rows_read"]["measurement"] == summary["rows"]
        assert "shed" not in full and r["full_info"]["incomplete_since"] is None


@pytest.mark.slow  # 13 s alone, 63 s in a full run; shedding's counting is in the default run (test_shedding.py)
def test_overload_lag_grows_memory_flat_registrations_refused_shed_rows_counted(tmp_path):
    check(run_overload(tmp_path, seconds=6.0, drain_full=False), 6.0)


@pytest.mark.slow
def test_overload_for_longer_and_the_full_run_drains(tmp_path):
    check(run_overload(tmp_path, seconds=20.0, drain_full=True), 20.0)


def test_shed_is_checked_kept_and_reported_across_a_restart(tmp_path):
    """The registration's ``shed`` is checked (422 with what to write), kept in the registry (a restarted service
    runs the query with it) and shown by ``GET``; a query without it shows ``shed: null``."""
    ws, _ = make_workspace(tmp_path / "ws", blocks=1)
    settings = settings_for(ws, state_dir=tmp_path / "state")
    with TestClient(create_app(settings)) as c:
        for shed, words in (({"max_lag": "5 minutes"}, "is not a duration; write it as PT5M"),
                            ({"max_lag": "PT0S"}, "more than 0 seconds")):
            r = c.post("/v1/queries", json={"name": "bad", "query": BOUNDED, "shed": shed}, headers=AUTH)
            assert r.status_code == 422 and words in r.json()["detail"], r.text
        r = c.post("/v1/queries", json={"name": "bad", "query": BOUNDED, "shed": {"max_lag": 60, "policy": "x"}},
                   headers=AUTH)
        assert r.status_code == 422 and "drop_oldest" in r.text
        qid = c.post("/v1/queries", json={"name": "s", "query": BOUNDED, "shed": {"max_lag": 90}},
                     headers=AUTH).json()["id"]
        plain = c.post("/v1/queries", json={"name": "p", "query": BOUNDED}, headers=AUTH).json()["id"]
        assert c.post(f"/v1/queries/{qid}/start", headers=AUTH).status_code == 200
        wait_for(lambda: c.get(f"/v1/queries/{qid}", headers=AUTH).json()["metrics"]["batches"] > 0)
    with TestClient(create_app(settings)) as c:
        got = wait_for(lambda: (lambda j: j if j["status"] == "running" and j["metrics"] else None)(
            c.get(f"/v1/queries/{qid}", headers=AUTH).json()))
        assert got["shed"] == {"max_lag": "PT1M30S", "policy": "drop_oldest"}
        assert got["metrics"]["shed"]["rows"] == {} and got["incomplete_since"] is None  # fresh input: none dropped
        assert c.get(f"/v1/queries/{plain}", headers=AUTH).json()["shed"] is None
        handle = c.app.state.service.registry.get(qid).handle
        assert handle.shedder is not None and handle.shedder.shed.max_lag_seconds == 90
