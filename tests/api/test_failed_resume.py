"""A failing query can resume (issue 26, item 5): a query stopped by a failure of its environment or input resumes
after the cause is fixed, from its checkpoint, under its id, numbering continuing; a failure of its own saved
state is a 409 that says which failures cannot be resumed and what to do.  (FastAPI TestClient, local backend,
a state folder; a "restart" is a new app over the same state folder.)"""

from __future__ import annotations

import json
import shutil
import sqlite3

from fastapi.testclient import TestClient

from api import create_app
from api.store import Store
from apikit import AUTH, BOUNDED, BOUNDED_JOIN, answers, api_answers, make_workspace, pages, settings_for
from obda.project import Project
from test_endpoints import problem, register
from waiting import wait_for


def info(c, qid: str) -> dict:
    return c.get(f"/v1/queries/{qid}", headers=AUTH).json()




def _made(folder) -> bool:
    try:
        folder.mkdir()
        return True
    except FileExistsError:
        return False


def oracle(ws, query: str):
    project = Project.load(ws)
    return answers(ws, project.sources, project.compile(query).to_sql("duckdb"))


def run_to_the_end(c, qid: str, expected) -> list[dict]:
    """Wait until the query published every answer of ``expected``, stop it, return its pages."""
    wait_for(lambda: info(c, qid)["results"] >= sum(expected.values()), timeout=30)
    c.post(f"/v1/queries/{qid}/stop", headers=AUTH)
    return pages(c, qid, limit=7)


def stored(state, qid: str) -> dict:
    con = sqlite3.connect(state / "registry.sqlite3")
    try:
        row = con.execute("SELECT status, error, failure FROM queries WHERE id = ?", (qid,)).fetchone()
    finally:
        con.close()
    return dict(zip(("status", "error", "failure"), row))


def answers_of(items) -> list[tuple]:
    return [(a["emitted_at"], json.dumps(a["binding"], sort_keys=True)) for a in items]


def test_a_query_failed_for_a_missing_static_table_resumes_once_it_is_restored(tmp_path):
    ws, feeder = make_workspace(tmp_path / "ws", blocks=2, seed=6)
    state = tmp_path / "state"
    settings = settings_for(ws, state_dir=state)
    with TestClient(create_app(settings)) as c:
        qid = register(c, "join", BOUNDED_JOIN, idle_timeout=0.5)["id"]
        assert c.post(f"/v1/queries/{qid}/start", headers=AUTH).json()["status"] == "running"
        first = oracle(ws, BOUNDED_JOIN)
        assert sum(first.values()) > 0
        wait_for(lambda: info(c, qid)["results"] >= sum(first.values()), timeout=30)
        before = pages(c, qid, limit=7)
    # the service stops; meanwhile the static table's file is removed and rows keep arriving
    static = ws / "data" / "sensor" / "part-00000.csv"
    saved = static.read_bytes()
    static.unlink()
    feeder.feed_block()
    with TestClient(create_app(settings)) as c:  # it resumes the running query: that fails
        failed = wait_for(lambda: (i := info(c, qid))["status"] == "failed" and i, timeout=30)
        assert "static table 'sensor': no data files at" in failed["error"] and failed["resumable"] is True
        # the cause is still there: the start answers it, and the query stays failed (and resumable)
        body = problem(c.post(f"/v1/queries/{qid}/start", headers=AUTH), 422, "execution_error")
        assert "static table 'sensor'" in body["detail"] and "start the query again" in body["detail"]
        assert info(c, qid)["status"] == "failed" and info(c, qid)["resumable"] is True
        static.write_bytes(saved)  # fixed
        feeder.feed_block()
        resumed = c.post(f"/v1/queries/{qid}/start", headers=AUTH)
        assert resumed.status_code == 200, resumed.text
        assert resumed.json()["id"] == qid and resumed.json()["status"] == "running" and resumed.json()["error"] is None
        expected = oracle(ws, BOUNDED_JOIN)
        assert sum(expected.values()) > len(before)
        items = run_to_the_end(c, qid, expected)
        assert [a["seq"] for a in items] == list(range(1, len(items) + 1))  # numbering continued, no gap
        assert items[: len(before)] == before  # what was published stays, under the same numbers
        assert api_answers(items, ["turbine", "v"]) == expected  # none lost, none twice
        # an uninterrupted run over the same files: the same answers in the same order
        ref = register(c, "uninterrupted", BOUNDED_JOIN, idle_timeout=0.5)["id"]
        c.post(f"/v1/queries/{ref}/start", headers=AUTH)
        assert answers_of(run_to_the_end(c, ref, expected)) == answers_of(items)
    assert stored(state, qid)["error"] is None


def test_a_query_failed_while_running_resumes_from_its_checkpoint(tmp_path):
    """The state folder cannot be written (here: the checkpoint's temporary name is taken by a folder) while a
    micro-batch ends: its answers were staged, its checkpoint not written.  Failed, resumable, stored so; once
    fixed, POST /start resumes from the last checkpoint: the staged answers are computed again, once."""
    ws, feeder = make_workspace(tmp_path / "ws", blocks=1, seed=8)
    state = tmp_path / "state"
    with TestClient(create_app(settings_for(ws, state_dir=state))) as c:
        qid = register(c, "hot", BOUNDED, idle_timeout=0.3)["id"]
        c.post(f"/v1/queries/{qid}/start", headers=AUTH)
        first = oracle(ws, BOUNDED)
        wait_for(lambda: info(c, qid)["results"] >= sum(first.values()), timeout=30)
        before = pages(c, qid, limit=7)
        blocker = state / qid / "state.tmp"
        # (a micro-batch may be writing its own state.tmp this instant: wait for it to be renamed)
        wait_for(lambda: _made(blocker), timeout=10)
        feeder.feed_block()
        failed = wait_for(lambda: (i := info(c, qid))["status"] == "failed" and i, timeout=30)
        assert f"{blocker}: Is a directory" in failed["error"] and failed["resumable"] is True
        assert "Traceback" not in failed["error"]
        assert stored(state, qid) == {"status": "failed", "error": failed["error"], "failure": "environment"}
        assert pages(c, qid, limit=7) == before  # the failed micro-batch published nothing
        blocker.rmdir()  # fixed
        feeder.feed_block()
        r = c.post(f"/v1/queries/{qid}/start", headers=AUTH)
        assert r.status_code == 200, r.text
        resumed = r.json()
        assert (resumed["id"], resumed["status"], resumed["resumable"]) == (qid, "running", None)
        expected = oracle(ws, BOUNDED)
        items = run_to_the_end(c, qid, expected)
        assert [a["seq"] for a in items] == list(range(1, len(items) + 1)) and items[: len(before)] == before
        assert api_answers(items, ["sensor", "v"]) == expected
    assert stored(state, qid) == {"status": "stopped", "error": None, "failure": None}


def test_a_query_failed_before_its_first_checkpoint_resumes_from_the_first_file(tmp_path):
    """Its first micro-batch staged answers and quarantined a row, then its checkpoint could not be written:
    nothing was committed, so the resumed query starts from the first file — each answer and each quarantined
    row once."""
    ws, _ = make_workspace(tmp_path / "ws", blocks=2, seed=9)
    expected = oracle(ws, BOUNDED)  # (before the malformed file, which DuckDB cannot read)
    (ws / "data" / "measurement" / "feed-000000x.csv").write_text(
        "sensor_id,value,ts\n1,not-a-number,2024-01-01 00:04:00\n")
    state = tmp_path / "state"
    with TestClient(create_app(settings_for(ws, state_dir=state))) as c:
        qid = register(c, "hot", BOUNDED, idle_timeout=0.3)["id"]
        blocker = state / qid / "state.tmp"
        blocker.mkdir(parents=True)
        c.post(f"/v1/queries/{qid}/start", headers=AUTH)
        failed = wait_for(lambda: (i := info(c, qid))["status"] == "failed" and i, timeout=30)
        assert failed["resumable"] is True and failed["results"] == 0
        assert not (state / qid / "state.pkl").exists()
        blocker.rmdir()
        r = c.post(f"/v1/queries/{qid}/start", headers=AUTH)
        assert r.status_code == 200 and r.json()["status"] == "running", r.text
        items = run_to_the_end(c, qid, expected)
        assert [a["seq"] for a in items] == list(range(1, len(items) + 1))
        assert api_answers(items, ["sensor", "v"]) == expected  # the staged answers of the failed batch: not kept
    quarantined = (state / qid / "quarantine.jsonl").read_text().splitlines()
    assert len(quarantined) == 1 and "not-a-number" in quarantined[0]


def test_a_query_whose_checkpoint_cannot_be_used_is_a_409_that_says_what_to_do(tmp_path):
    ws, _ = make_workspace(tmp_path / "ws", blocks=1, seed=2)
    state = tmp_path / "state"
    settings = settings_for(ws, state_dir=state)
    with TestClient(create_app(settings)) as c:
        qid = register(c, "hot", BOUNDED, idle_timeout=0.3)["id"]
        c.post(f"/v1/queries/{qid}/start", headers=AUTH)
        wait_for(lambda: info(c, qid)["results"] > 0, timeout=30)
    (state / qid / "state.pkl").write_bytes(b"not a checkpoint")  # corrupt while the service is down
    with TestClient(create_app(settings)) as c:
        failed = wait_for(lambda: (i := info(c, qid))["status"] == "failed" and i, timeout=30)
        assert "checkpoint" in failed["error"] and failed["resumable"] is False
        body = problem(c.post(f"/v1/queries/{qid}/start", headers=AUTH), 409, "query_failed")
        detail = body["detail"]
        assert body["resumable"] is False and "cannot be resumed" in detail and "state.pkl" in detail
        assert "after a failure of its environment or input" in detail  # which failures resume
        assert "corrupt, altered, or written for another query or version" in detail  # which do not
        assert "delete the query and register it again" in detail  # what to do
        assert info(c, qid)["status"] == "failed"
        assert c.delete(f"/v1/queries/{qid}", headers=AUTH).status_code == 204
        again = register(c, "hot", BOUNDED, idle_timeout=0.3)["id"]
        assert c.post(f"/v1/queries/{again}/start", headers=AUTH).json()["status"] == "running"


def test_without_a_state_folder_a_failed_query_cannot_resume_and_is_told_why(tmp_path):
    ws, feeder = make_workspace(tmp_path / "ws", blocks=1, seed=3)
    with TestClient(create_app(settings_for(ws))) as c:
        qid = register(c, "hot", BOUNDED, idle_timeout=0.3)["id"]
        c.post(f"/v1/queries/{qid}/start", headers=AUTH)
        wait_for(lambda: info(c, qid)["results"] > 0, timeout=30)
        staging = c.app.state.service.registry.get(qid).results.directory / "_staging"
        shutil.rmtree(staging)
        staging.write_text("")  # the results folder cannot be written
        feeder.feed_block()
        failed = wait_for(lambda: (i := info(c, qid))["status"] == "failed" and i, timeout=30)
        assert failed["resumable"] is False
        detail = problem(c.post(f"/v1/queries/{qid}/start", headers=AUTH), 409, "query_failed")["detail"]
        assert "the service keeps no checkpoints" in detail and "--state-dir" in detail
        assert "delete the query and register it again" in detail.lower()


def test_a_registry_of_an_earlier_version_gets_the_failure_column(tmp_path):
    db = tmp_path / "registry.sqlite3"
    con = sqlite3.connect(db)
    con.executescript(
        "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);"
        "INSERT INTO meta VALUES ('schema_version', '1');"
        "CREATE TABLE queries (id TEXT PRIMARY KEY, name TEXT NOT NULL UNIQUE, text TEXT NOT NULL,"
        " allow_unbounded INTEGER NOT NULL, idle_timeout REAL, status TEXT NOT NULL, error TEXT,"
        " created_at TEXT NOT NULL, started_at TEXT, stopped_at TEXT, checkpoint TEXT,"
        " last_seq INTEGER NOT NULL DEFAULT 0, first_seq INTEGER NOT NULL DEFAULT 1);"
        "INSERT INTO queries (id, name, text, allow_unbounded, status, error, created_at)"
        " VALUES ('a', 'a', 'q', 0, 'failed', 'boom', 't');")
    con.close()
    store = Store(db)
    try:
        [row] = store.queries()
        assert (row["status"], row["error"], row["failure"]) == ("failed", "boom", None)
        store.update_query("a", failure="environment")
        assert store.queries()[0]["failure"] == "environment"
    finally:
        store.close()
