"""A service that survives restarts: a real `obda serve` with --state-dir, SIGTERM and kill -9 while feeding.

Evidence: the answers a client reads through paging and through a browser-like SSE client (same URL,
``Last-Event-ID`` on reconnect) are, seq by seq, the same, numbered 1..n without a gap or a repeat, and
their multiset equals the full-history answers (DuckDB over every fed file) — what an uninterrupted run gives.
"""

from __future__ import annotations

import random
import sqlite3
import time

import pytest

from apikit import BOUNDED, answers, api_answers, make_workspace
from obda.execution.committed_output import read_committed
from obda.project import Project
from serverkit import EventSource, Server


def run_with_interruptions(tmp_path, seed: int, kinds: list[str], blocks: int) -> dict:
    """Feed ``blocks`` blocks; after randomly chosen blocks stop the server (``kinds``: "term" | "kill") and
    start it again; then check what a pager and an EventSource client read.  Returns a few figures."""
    rng = random.Random(seed)
    ws, feeder = make_workspace(tmp_path / "ws", blocks=0, seed=seed)
    state = tmp_path / "state"
    srv = Server(ws, state).start()
    es = None
    try:
        r = srv.post("/v1/queries", json={"name": "hot", "query": BOUNDED, "idle_timeout": 0.3})
        assert r.status_code == 201, r.text
        qid = r.json()["id"]
        assert srv.post(f"/v1/queries/{qid}/start").json()["status"] == "running"
        es = EventSource(f"{srv.base}/v1/queries/{qid}/results/stream").start()
        at = sorted(rng.sample(range(1, blocks), len(kinds)))
        want = 1  # connections the client must have made before the next interruption
        for b in range(blocks):
            feeder.feed_block()
            time.sleep(rng.uniform(0.0, 0.2))
            while at and at[0] == b:
                # the client is connected to this server process, so the interruption cuts it off
                # (on a loaded machine it may still be reconnecting to the previous restart)
                until = time.monotonic() + 20
                while es.connections < want and time.monotonic() < until:
                    time.sleep(0.05)
                want += 1
                at.pop(0)
                kind = kinds[len(kinds) - len(at) - 1]
                if kind == "term":
                    # uvicorn re-raises the signal after its graceful shutdown: exit status -15
                    assert srv.sigterm() in (0, -15), srv.output()[-2000:]
                    assert srv.output().rstrip().endswith("Finished server process [%d]" % srv.proc.pid)
                else:
                    srv.kill9()
                if rng.random() < 0.5:  # rows keep arriving while the service is down
                    feeder.feed_block()
                srv.start()
                listed = srv.get("/v1/queries").json()["queries"]
                assert [q["id"] for q in listed] == [qid]  # same id, reattached
                assert listed[0]["status"] in ("starting", "running")
        project = Project.load(ws)
        expected = answers(ws, project.sources, project.compile(BOUNDED).to_sql("duckdb"))
        n = sum(expected.values())
        assert n > 0
        end = time.monotonic() + 30
        while srv.get(f"/v1/queries/{qid}").json()["results"] < n and time.monotonic() < end:
            time.sleep(0.1)
        info = srv.get(f"/v1/queries/{qid}").json()
        assert info["results"] == n, (info["results"], n, info["metrics"])
        assert srv.post(f"/v1/queries/{qid}/stop").json()["status"] == "stopped"
        assert es.ended.wait(15), "the SSE client did not get the status event"
        pages = srv.page_all(qid)
        streamed = es.results()
        assert [a["seq"] for a in pages] == list(range(1, n + 1))
        assert [a["seq"] for a in streamed] == list(range(1, n + 1)), "SSE lost or repeated answers"
        assert streamed == pages  # the same answer under every seq, whichever way it was read
        assert api_answers(pages, ["sensor", "v"]) == expected
        assert info["metrics"]["late"] == 0 and info["metrics"]["invalid"] == 0
        # the durable registry: SQLite in WAL mode in the state directory
        db = sqlite3.connect(state / "registry.sqlite3")
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert db.execute("SELECT last_seq FROM queries WHERE id = ?", (qid,)).fetchone()[0] == n
        db.close()
        # the answers: the committed part files of the query's results folder, each once, nothing staged
        committed = read_committed(state / qid / "results")
        assert [{"seq": i, "op": a.get("op"), **a} for i, a in enumerate(committed, 1)] == pages  # op: aggregates
        assert not any((state / qid / "results" / "_staging").iterdir())
        return {"answers": n, "reconnects": es.connections - 1}
    finally:
        if es is not None:
            es.close()
        srv.stop()


def test_sigterm_and_kill9_while_feeding_lose_and_repeat_nothing(tmp_path):
    figures = run_with_interruptions(tmp_path, seed=3, kinds=["term", "kill", "kill"], blocks=6)
    assert figures["reconnects"] >= 3  # the client really was cut off at every interruption


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(4))
def test_twenty_random_interruptions(tmp_path, seed):
    rng = random.Random(1000 + seed)
    kinds = [rng.choice(["term", "kill"]) for _ in range(5)]  # 4 seeds x 5 = 20 interruptions
    run_with_interruptions(tmp_path, seed=1000 + seed, kinds=kinds, blocks=12)
