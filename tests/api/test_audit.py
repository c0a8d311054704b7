"""The audit log: every state-changing call, allowed or refused, as one JSON line (who, what, which query, when,
how it ended) in the state folder — and never a token."""

from __future__ import annotations

import json
import logging
import stat
from datetime import datetime

from fastapi.testclient import TestClient

from api import create_app
from api.audit import action_of

from apikit import AUTH, BOUNDED, TOKEN, settings_for
from userkit import bearer, make_users

FIELDS = ["time", "user", "action", "query_id", "outcome", "status"]


def entries(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_every_state_changing_call_is_audited_with_its_outcome(workspace, tmp_path, caplog):
    state = tmp_path / "state"
    users = make_users(tmp_path / "users.json", {"alice": "operator", "rita": "reader", "bob": "operator"})
    settings = settings_for(workspace, state_dir=state, users_file=tmp_path / "users.json", rate_limit=0,
                            max_body_bytes=4096)
    caplog.set_level(logging.DEBUG)
    with TestClient(create_app(settings)) as c:
        alice, rita, bob = users["alice"], users["rita"], users["bob"]
        qid = c.post("/v1/queries", json={"name": "a", "query": BOUNDED}, headers=alice).json()["id"]
        calls = [  # (method, path, headers, body) → (user, action, query id, outcome, status[, code])
            ("POST", f"/v1/queries/{qid}/start", alice, None),
            ("POST", f"/v1/queries/{qid}/stop", alice, None),
            ("PUT", f"/v1/queries/{qid}/shared-with", alice, {"users": ["rita"]}),
            ("POST", f"/v1/queries/{qid}/results/stream-session", rita, None),
            ("POST", f"/v1/queries/{qid}/stop", rita, None),  # a reader: 403
            ("DELETE", f"/v1/queries/{qid}", bob, None),  # not his, not shared: 404
            ("POST", "/v1/queries", rita, {"name": "r", "query": BOUNDED}),  # a reader registers: 403
            ("POST", "/v1/queries", {}, {"name": "x", "query": BOUNDED}),  # no token: 401
            ("POST", "/v1/queries", bearer("obda_000000000000_" + "x" * 43), {"name": "x", "query": BOUNDED}),
            ("POST", "/v1/queries", alice, {"name": "big", "query": "#" * 5000}),  # 413 before any endpoint
            ("POST", "/v1/analyze", alice, {"query": BOUNDED}),  # reads: not audited
            ("GET", f"/v1/queries/{qid}", alice, None),
            ("POST", "/v1/validate", alice, None),
            ("DELETE", f"/v1/queries/{qid}", AUTH, None),  # the --token admin
        ]
        statuses = [c.request(m, p, headers=h, **({"json": b} if b is not None else {})).status_code
                    for m, p, h, b in calls]
        assert statuses == [200, 200, 200, 204, 403, 404, 403, 401, 401, 413, 200, 200, 200, 204]
    log = entries(state / "audit.jsonl")
    assert [[e[k] for k in FIELDS[1:]] + [e.get("code")] for e in log] == [
        ["alice", "register", qid, "ok", 201, None],
        ["alice", "start", qid, "ok", 200, None],
        ["alice", "stop", qid, "ok", 200, None],
        ["alice", "share", qid, "ok", 200, None],
        ["rita", "stream_session", qid, "ok", 204, None],
        ["rita", "stop", qid, "refused", 403, "forbidden"],
        ["bob", "delete", qid, "refused", 404, "query_not_found"],
        ["rita", "register", None, "refused", 403, "forbidden"],
        [None, "register", None, "refused", 401, "unauthorized"],
        [None, "register", None, "refused", 401, "unauthorized"],
        [None, "register", None, "refused", 413, "request_too_large"],
        ["admin", "delete", qid, "ok", 204, None],
    ]
    for e in log:
        assert list(e)[:6] == FIELDS and datetime.strptime(e["time"], "%Y-%m-%dT%H:%M:%S.%fZ")
    assert stat.S_IMODE((state / "audit.jsonl").stat().st_mode) == 0o600
    # no token anywhere: the audit file, the server's log, the users file
    tokens = [TOKEN] + [h["Authorization"].split()[1] for h in users.values()]
    written = (state / "audit.jsonl").read_text() + caplog.text + (tmp_path / "users.json").read_text()
    assert not [t for t in tokens if t in written]
    assert sum('"action":"register"' in r.getMessage() for r in caplog.records if r.name == "obda.audit") == 5


def test_rate_limited_calls_are_audited_and_a_restart_appends(workspace, tmp_path):
    state = tmp_path / "state"
    settings = settings_for(workspace, state_dir=state, rate_limit=60, rate_burst=1)
    for _ in range(2):  # the second service appends to the same file
        with TestClient(create_app(settings)) as c:
            assert c.get("/v1/me", headers=AUTH).status_code == 200
            r = c.post("/v1/queries", json={"name": "a", "query": BOUNDED}, headers=AUTH)
            assert r.status_code == 429
    assert [(e["user"], e["action"], e["status"], e.get("code")) for e in entries(state / "audit.jsonl")] == \
        [("admin", "register", 429, "rate_limited")] * 2


def test_which_calls_are_audited():
    q = "0" * 32
    assert action_of("POST", "/v1/queries") == ("register", None)
    assert action_of("POST", f"/v1/queries/{q}/start") == ("start", q)
    assert action_of("POST", f"/v1/queries/{q}/stop") == ("stop", q)
    assert action_of("DELETE", f"/v1/queries/{q}") == ("delete", q)
    assert action_of("PUT", f"/v1/queries/{q}/shared-with") == ("share", q)
    assert action_of("POST", f"/v1/queries/{q}/results/stream-session") == ("stream_session", q)
    for method, path in [("GET", "/v1/queries"), ("GET", f"/v1/queries/{q}"), ("POST", "/v1/analyze"),
                         ("POST", "/v1/validate"), ("GET", f"/v1/queries/{q}/results/stream"), ("GET", "/readyz")]:
        assert action_of(method, path) is None
