"""SSE and lifecycle: Last-Event-ID wins on a browser reconnect, a gone client stops the writing, dropped answers
are signalled (pages and SSE), POST /stop during a start calls the start off, DELETE removes everything."""

from __future__ import annotations

import asyncio
import json
import os
import threading
import time

from fastapi.testclient import TestClient

from api import create_app
from apikit import AUTH, BOUNDED, BOUNDED_JOIN, answers, make_workspace, settings_for
from obda.project import Project
from serverkit import EventSource, Server
from waiting import wait_for


def register(c, name, query=BOUNDED, **kw):
    r = c.post("/v1/queries", json={"name": name, "query": query, **kw}, headers=AUTH)
    assert r.status_code == 201, r.text
    return r.json()["id"]


def sse_events(text: str) -> list[dict]:
    events = []
    for block in text.split("\n\n"):
        ev = {}
        for line in block.splitlines():
            if line and not line.startswith(":") and ":" in line:
                k, v = line.split(":", 1)
                ev[k] = v.lstrip(" ")
        if "event" in ev:
            events.append(ev)
    return events


#: every reading: many answers
ALL_READINGS = BOUNDED.replace("  FILTER(?v > 90)\n", "")


def run_to_end(c, qid, ws, query=BOUNDED) -> int:
    """Start, wait for every answer of the fed files (DuckDB over them), stop; returns the number of answers."""
    project = Project.load(ws)
    n = sum(answers(ws, project.sources, project.compile(query).to_sql("duckdb")).values())
    c.post(f"/v1/queries/{qid}/start", headers=AUTH)
    wait_for(lambda: c.get(f"/v1/queries/{qid}", headers=AUTH).json()["results"] >= n)
    c.post(f"/v1/queries/{qid}/stop", headers=AUTH)
    assert c.get(f"/v1/queries/{qid}", headers=AUTH).json()["results"] == n
    return n


def test_last_event_id_wins_over_after(tmp_path):
    ws, _ = make_workspace(tmp_path / "ws", blocks=2, seed=1)
    with TestClient(create_app(settings_for(ws))) as c:
        qid = register(c, "s", idle_timeout=0.2)
        n = run_to_end(c, qid, ws)
        assert n > 5
        # an EventSource opened with ?after=0 reconnects to the same URL, with the id it saw last
        with c.stream("GET", f"/v1/queries/{qid}/results/stream", params={"after": 0},
                      headers={**AUTH, "Last-Event-ID": "5"}) as s:
            events = sse_events(s.read().decode())
        assert [int(e["id"]) for e in events if e["event"] == "result"] == list(range(6, n + 1))
        # without the header, ?after= is where the replay starts
        with c.stream("GET", f"/v1/queries/{qid}/results/stream", params={"after": 3}, headers=AUTH) as s:
            events = sse_events(s.read().decode())
        assert [int(e["id"]) for e in events if e["event"] == "result"] == list(range(4, n + 1))


def test_browser_like_reconnects_deliver_every_answer_once(tmp_path):
    """A stream that ends every 7 answers (?limit=7): the EventSource reconnects to the same URL with
    Last-Event-ID, many times, while the query runs and rows arrive; every answer arrives exactly once."""
    ws, feeder = make_workspace(tmp_path / "ws", blocks=1, seed=5)
    srv = Server(ws, None).start()
    es = None
    try:
        qid = srv.post("/v1/queries", json={"name": "hot", "query": BOUNDED, "idle_timeout": 0.3}).json()["id"]
        srv.post(f"/v1/queries/{qid}/start")
        es = EventSource(f"{srv.base}/v1/queries/{qid}/results/stream?after=0&limit=7", retry=0.02).start()
        for _ in range(3):
            feeder.feed_block()
            time.sleep(0.2)
        project = Project.load(ws)
        n = sum(answers(ws, project.sources, project.compile(BOUNDED).to_sql("duckdb")).values())
        wait_for(lambda: srv.get(f"/v1/queries/{qid}").json()["results"] >= n, timeout=20)
        srv.post(f"/v1/queries/{qid}/stop")
        assert srv.get(f"/v1/queries/{qid}").json()["results"] == n
        assert es.ended.wait(20)
        got = es.results()
        assert [a["seq"] for a in got] == list(range(1, n + 1))
        assert got == srv.page_all(qid)
        assert es.connections >= n // 7  # it did reconnect, every 7 answers
    finally:
        if es is not None:
            es.close()
        srv.stop()


def test_dropped_answers_are_signalled_on_pages_and_sse(tmp_path):
    ws, _ = make_workspace(tmp_path / "ws", blocks=2, seed=1)
    with TestClient(create_app(settings_for(ws, max_results=4))) as c:
        qid = register(c, "s", idle_timeout=0.2)
        n = run_to_end(c, qid, ws)
        assert n > 6
        page = c.get(f"/v1/queries/{qid}/results", params={"after": 1}, headers=AUTH).json()
        assert page["first_seq"] == n - 3 and [a["seq"] for a in page["items"]] == list(range(n - 3, n + 1))
        assert page["gap"] == {"from": 2, "to": n - 4, "dropped": n - 5}
        page = c.get(f"/v1/queries/{qid}/results", params={"after": n - 2}, headers=AUTH).json()
        assert page["gap"] is None
        with c.stream("GET", f"/v1/queries/{qid}/results/stream", headers=AUTH) as s:
            events = sse_events(s.read().decode())
        assert events[0]["event"] == "gap" and events[0]["id"] == str(n - 4)
        assert json.loads(events[0]["data"])["dropped"] == n - 4
        assert [int(e["id"]) for e in events[1:-1]] == list(range(n - 3, n + 1))
        assert events[-1]["event"] == "status"


def test_a_client_that_disconnects_stops_the_writing(tmp_path):
    """The ASGI server reports the disconnection (``http.disconnect``) after the first events; the replay of
    the thousands of kept answers stops within one page instead of being written to nobody."""
    ws, _ = make_workspace(tmp_path / "ws", blocks=8, seed=2, points=80)
    app = create_app(settings_for(ws))
    with TestClient(app) as c:
        qid = register(c, "s", ALL_READINGS, idle_timeout=0.2)
        n = run_to_end(c, qid, ws, ALL_READINGS)
    assert n > 1500

    async def drive() -> int:
        sent: list[bytes] = []
        gone = asyncio.Event()

        async def receive():
            await gone.wait()
            return {"type": "http.disconnect"}

        async def send(message):
            if message["type"] == "http.response.body":
                sent.append(message.get("body", b""))
                if len(sent) >= 10:
                    gone.set()  # the client left after 10 chunks
                await asyncio.sleep(0)

        scope = {"type": "http", "asgi": {"version": "3.0", "spec_version": "2.4"}, "http_version": "1.1",
                 "method": "GET", "scheme": "http", "path": f"/v1/queries/{qid}/results/stream", "raw_path": b"",
                 "query_string": b"", "root_path": "", "client": ("127.0.0.1", 1), "server": ("127.0.0.1", 80),
                 "headers": [(b"authorization", AUTH["Authorization"].encode()), (b"host", b"t")]}
        await asyncio.wait_for(app(scope, receive, send), 20)
        return sum(b"event: result" in chunk for chunk in sent)

    written = asyncio.run(drive())
    assert written < 600 < n  # one page (500 answers) at most after the client left, not all n


def test_stop_during_start_calls_the_start_off(tmp_path):
    """The start blocks on a static file that is a FIFO (the executor reads it while it is built); POST /stop
    meanwhile answers `stopped`, and once the build finishes the query does not run."""
    ws, _ = make_workspace(tmp_path / "ws", blocks=1)
    fifo = ws / "data" / "sensor" / "zz-slow.csv"
    os.mkfifo(fifo)
    with TestClient(create_app(settings_for(ws))) as c:
        qid = register(c, "j", BOUNDED_JOIN, idle_timeout=0.2)
        started: list = []
        t = threading.Thread(target=lambda: started.append(c.post(f"/v1/queries/{qid}/start", headers=AUTH)))
        t.start()
        try:
            wait_for(lambda: c.get(f"/v1/queries/{qid}", headers=AUTH).json()["status"] == "starting")
            r = c.post(f"/v1/queries/{qid}/stop", headers=AUTH)
            assert r.status_code == 200 and r.json()["status"] == "stopped"
        finally:
            with open(fifo, "w") as f:  # the build goes on: the static file ends
                f.write("id,kind,turbine_id\n")
            t.join(10)
        assert started[0].status_code == 200 and started[0].json()["status"] == "stopped"
        time.sleep(0.3)
        info = c.get(f"/v1/queries/{qid}", headers=AUTH).json()
        assert info["status"] == "stopped" and info["metrics"]["batches"] == 0  # it never ran
        # a later start runs it
        os.remove(fifo)
        assert c.post(f"/v1/queries/{qid}/start", headers=AUTH).json()["status"] == "running"


def test_delete_removes_everything_of_the_query(tmp_path):
    ws, _ = make_workspace(tmp_path / "ws", blocks=1)
    state = tmp_path / "state"
    settings = settings_for(ws, state_dir=state)
    with TestClient(create_app(settings)) as c:
        keep = register(c, "keep", idle_timeout=0.2)
        gone = register(c, "gone", idle_timeout=0.2)
        run_to_end(c, gone, ws)
        assert (state / gone / "state.pkl").exists()
        assert c.delete(f"/v1/queries/{gone}", headers=AUTH).status_code == 204
        assert not (state / gone).exists()
    import sqlite3

    db = sqlite3.connect(state / "registry.sqlite3")
    # the answers lived in the query's folder (its results), gone with it; the registry holds none
    assert db.execute("SELECT count(*) FROM sqlite_master WHERE name = 'answers'").fetchone()[0] == 0
    assert [r[0] for r in db.execute("SELECT id FROM queries")] == [keep]
    db.close()
    # a restarted service knows only the kept query; the deleted id is 404
    with TestClient(create_app(settings)) as c:
        assert [q["id"] for q in c.get("/v1/queries", headers=AUTH).json()["queries"]] == [keep]
        assert c.get(f"/v1/queries/{gone}", headers=AUTH).status_code == 404
