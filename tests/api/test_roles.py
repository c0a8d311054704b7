"""Users and roles: every endpoint × role × owner / non-owner, with the status each must answer.

The users are real (a users file with scrypt-hashed tokens, :mod:`api.users`): alice and bob are operators,
rita a reader, ada an admin, and the service's ``--token`` is the admin ``admin``.  Queries: A is alice's,
shared with rita; B is bob's; C is bob's, shared with alice; D is ada's.  A caller who may not see a query
gets 404 exactly as for a query that does not exist; one who may read but not change it gets 403.
"""

from __future__ import annotations

import re
import sqlite3
import time

import pytest
from fastapi.routing import APIRoute
from fastapi.testclient import TestClient

from api import create_app
from api.users import remove_user

from apikit import AUTH, BOUNDED, settings_for
from test_endpoints import problem, sse_events
from userkit import make_users
from waiting import wait_for

OWNERS = {"A": ("alice", ["rita"]), "B": ("bob", []), "C": ("bob", ["alice"]), "D": ("ada", [])}

# (caller, target, may see it, may change it)
CALLERS = [
    ("alice", "A", True, True),  # operator, owner
    ("bob", "A", False, False),  # operator, not the owner, not shared with him
    ("alice", "C", True, False),  # operator, not the owner, shared with her
    ("rita", "A", True, False),  # reader, shared with her
    ("rita", "B", False, False),  # reader, not shared with her
    ("ada", "D", True, True),  # admin, owner
    ("ada", "B", True, True),  # admin, not the owner
    ("admin", "A", True, True),  # the --token admin, not the owner
]

# (method, path, body, only reads, status when allowed)
PER_QUERY = [
    ("GET", "/v1/queries/{q}", None, True, 200),
    ("GET", "/v1/queries/{q}/results", None, True, 200),
    ("GET", "/v1/queries/{q}/answer", None, True, 409),  # a bag query: not_an_aggregate — after the 404 check
    ("GET", "/v1/queries/{q}/results/stream", None, True, 200),
    ("POST", "/v1/queries/{q}/results/stream-session", None, True, 204),
    ("POST", "/v1/queries/{q}/start", None, False, 200),
    ("POST", "/v1/queries/{q}/stop", None, False, 200),
    ("PUT", "/v1/queries/{q}/shared-with", "same", False, 200),
    ("DELETE", "/v1/queries/{q}", None, False, 204),
]

# (method, path, body, status per role)
GLOBAL = [
    ("POST", "/v1/analyze", {"query": BOUNDED}, {"reader": 200, "operator": 200, "admin": 200}),
    ("POST", "/v1/queries", "fresh", {"reader": 403, "operator": 201, "admin": 201}),
    ("GET", "/v1/queries", None, {"reader": 200, "operator": 200, "admin": 200}),
    ("GET", "/v1/me", None, {"reader": 200, "operator": 200, "admin": 200}),
    ("GET", "/v1/ontology", None, {"reader": 200, "operator": 200, "admin": 200}),
    ("POST", "/v1/validate", None, {"reader": 200, "operator": 200, "admin": 200}),
    ("GET", "/healthz", None, {"reader": 200, "operator": 200, "admin": 200}),
    ("GET", "/readyz", None, {"reader": 200, "operator": 200, "admin": 200}),
]
ROLE_OF = {"alice": "operator", "bob": "operator", "rita": "reader", "ada": "admin", "admin": "admin"}


@pytest.fixture(scope="module")
def env(workspace, tmp_path_factory):
    """The service with the users and the queries A-D; yields (client, headers per user, id per query)."""
    path = tmp_path_factory.mktemp("users") / "users.json"
    users = make_users(path)
    app = create_app(settings_for(workspace, users_file=path, rate_limit=0, max_running=8))
    with TestClient(app) as c:
        ids = {k: register(c, users[owner], f"q{k}", shared) for k, (owner, shared) in OWNERS.items()}
        for qid in ids.values():  # stopped (not only registered): a stopped query's stream ends once it was sent
            assert c.post(f"/v1/queries/{qid}/start", headers=AUTH).status_code == 200
            assert c.post(f"/v1/queries/{qid}/stop", headers=AUTH).json()["status"] == "stopped"
        yield c, users, ids
        for qid in ids.values():
            c.delete(f"/v1/queries/{qid}", headers=AUTH)


def register(c, headers, name, shared=(), query=BOUNDED) -> str:
    r = c.post("/v1/queries", json={"name": name, "query": query, "shared_with": list(shared)}, headers=headers)
    assert r.status_code == 201, r.text
    return r.json()["id"]


def call(c, method, path, headers, body=None):
    if path.endswith("/stream"):
        with c.stream(method, path, params={"limit": 1}, headers=headers) as s:
            s.read()
            return s
    return c.request(method, path, headers=headers, **({"json": body} if body is not None else {}))


@pytest.mark.parametrize("caller,target,sees,controls", CALLERS, ids=[f"{a}-{t}" for a, t, *_ in CALLERS])
@pytest.mark.parametrize("method,path,body,reads,ok", PER_QUERY, ids=[f"{m} {p}" for m, p, *_ in PER_QUERY])
def test_per_query_endpoints_by_role_and_owner(env, caller, target, sees, controls, method, path, body, reads, ok):
    c, users, ids = env
    owner, shared = OWNERS[target]
    qid = ids[target]
    if method == "DELETE":  # a fresh query of the same owner and sharing, so the others stay
        qid = register(c, users[owner], f"del-{caller}-{target}", shared)
    if path.endswith("/stream"):  # a stopped query's stream ends once it was sent
        assert c.post(f"/v1/queries/{qid}/stop", headers=users[owner]).json()["status"] == "stopped"
    if body == "same":
        body = {"users": shared}
    r = call(c, method, path.format(q=qid), users[caller], body)
    expected = (ok if reads or controls else 403) if sees else 404
    assert r.status_code == expected, r.read()
    if expected in (403, 404):
        problem(r, expected, {403: "forbidden", 404: "query_not_found"}[expected])
    if method == "POST" and path.endswith("/start"):
        c.post(f"/v1/queries/{qid}/stop", headers=users[owner])
    if method == "DELETE":
        gone = c.get(f"/v1/queries/{qid}", headers=AUTH).status_code == 404
        assert gone is (expected == 204)
        c.delete(f"/v1/queries/{qid}", headers=AUTH)


@pytest.mark.parametrize("caller", ["alice", "rita", "ada", "admin"])
@pytest.mark.parametrize("method,path,body,status", GLOBAL, ids=[f"{m} {p}" for m, p, *_ in GLOBAL])
def test_global_endpoints_by_role(env, caller, method, path, body, status):
    c, users, _ = env
    if body == "fresh":
        body = {"name": f"fresh-{caller}", "query": BOUNDED}
    r = call(c, method, path, users[caller], body)
    assert r.status_code == status[ROLE_OF[caller]], r.text
    if r.status_code == 403:
        problem(r, 403, "forbidden")
    if r.status_code == 201:
        assert r.json()["owner"] == caller
        c.delete(f"/v1/queries/{r.json()['id']}", headers=users[caller])


def test_every_endpoint_is_in_the_matrix(env):
    c, _, _ = env
    covered = {(m, p.replace("{q}", "{query_id}")) for m, p, *_ in PER_QUERY} | {(m, p) for m, p, *_ in GLOBAL}
    routes = {(method, r.path) for r in c.app.routes if isinstance(r, APIRoute) and r.include_in_schema
              for method in r.methods}
    assert routes == covered


def test_each_user_lists_the_queries_it_may_see(env):
    c, users, ids = env
    seen = {u: {q["id"] for q in c.get("/v1/queries", headers=h).json()["queries"]} for u, h in users.items()}
    everything = set(ids.values())
    assert seen["alice"] == {ids["A"], ids["C"]}
    assert seen["bob"] == {ids["B"], ids["C"]}
    assert seen["rita"] == {ids["A"]}
    assert seen["ada"] == seen["admin"] == everything
    me = c.get("/v1/me", headers=users["rita"]).json()
    assert me == {"name": "rita", "role": "reader", "rate_limit": 0}


def test_another_users_query_is_not_revealed(env):
    """bob asks for alice's query A and for an id nobody has: the same answers, but for the id."""
    c, users, ids = env
    nobody = "f" * 32
    for method, path, body, *_ in PER_QUERY:
        body = {"users": []} if body == "same" else body
        a = call(c, method, path.format(q=ids["A"]), users["bob"], body)
        b = call(c, method, path.format(q=nobody), users["bob"], body)
        assert a.status_code == b.status_code == 404
        ja, jb = a.json(), b.json()
        assert ja["detail"].replace(ids["A"], nobody) == jb["detail"]
        assert {k: v for k, v in ja.items() if k not in ("detail", "instance")} == \
               {k: v for k, v in jb.items() if k not in ("detail", "instance")}
    assert c.get(f"/v1/queries/{ids['A']}", headers=users["alice"]).json()["shared_with"] == ["rita"]  # unchanged


def test_a_name_is_unique_per_owner_only(env):
    c, users, ids = env
    other = register(c, users["bob"], "qA")  # alice has a query "qA": bob does not learn it
    try:
        r = c.post("/v1/queries", json={"name": "qA", "query": BOUNDED}, headers=users["alice"])
        problem(r, 409, "name_taken")
    finally:
        c.delete(f"/v1/queries/{other}", headers=users["bob"])


def test_sharing_with_an_unknown_user_is_refused(env):
    c, users, ids = env
    r = c.put(f"/v1/queries/{ids['A']}/shared-with", json={"users": ["rita", "nobody"]}, headers=users["alice"])
    assert problem(r, 422, "unknown_user")["users"] == ["nobody"]
    r = c.post("/v1/queries", json={"name": "x", "query": BOUNDED, "shared_with": ["ghost"]}, headers=users["alice"])
    problem(r, 422, "unknown_user")


def test_the_stream_cookie_is_bound_to_its_user_and_query(env):
    c, users, ids = env
    qid = ids["A"]
    c.post(f"/v1/queries/{qid}/stop", headers=users["alice"])
    r = c.post(f"/v1/queries/{qid}/results/stream-session", headers=users["rita"])
    assert r.status_code == 204
    ticket = r.cookies["obda_stream"]
    c.cookies.clear()
    assert ticket.endswith(".rita") and "obda_" not in ticket  # names the user, carries no token
    with c.stream("GET", f"/v1/queries/{qid}/results/stream", params={"limit": 1}, cookies={"obda_stream": ticket}) as s:
        assert s.status_code == 200 and sse_events(s.read().decode())
    forged = ticket.rsplit(".", 1)[0] + ".alice"  # the same MAC under another user's name
    r = c.get(f"/v1/queries/{qid}/results/stream", params={"limit": 1}, cookies={"obda_stream": forged})
    problem(r, 401, "unauthorized")
    r = c.get(f"/v1/queries/{ids['B']}/results/stream", params={"limit": 1}, cookies={"obda_stream": ticket})
    problem(r, 401, "unauthorized")  # another query's stream
    # unshared: the cookie's user may no longer see the query — 404, as for a query that does not exist
    assert c.put(f"/v1/queries/{qid}/shared-with", json={"users": []}, headers=users["alice"]).status_code == 200
    try:
        r = c.get(f"/v1/queries/{qid}/results/stream", params={"limit": 1}, cookies={"obda_stream": ticket})
        problem(r, 404, "query_not_found")
    finally:
        c.put(f"/v1/queries/{qid}/shared-with", json={"users": ["rita"]}, headers=users["alice"])


def test_a_removed_user_is_refused_at_once_with_its_token_and_its_cookie(workspace, tmp_path):
    path = tmp_path / "users.json"
    users = make_users(path, {"olga": "operator"})
    with TestClient(create_app(settings_for(workspace, users_file=path))) as c:
        qid = register(c, users["olga"], "olgas")
        c.post(f"/v1/queries/{qid}/results/stream-session", headers=users["olga"])
        ticket = c.cookies["obda_stream"]
        c.cookies.clear()
        remove_user(path, "olga")
        wait_for(lambda: c.get("/v1/me", headers=users["olga"]).status_code == 401, timeout=5)
        r = c.get(f"/v1/queries/{qid}/results/stream", params={"limit": 1}, cookies={"obda_stream": ticket})
        problem(r, 401, "unauthorized")
        assert c.get(f"/v1/queries/{qid}", headers=AUTH).json()["owner"] == "olga"  # an admin still sees it
        c.delete(f"/v1/queries/{qid}", headers=AUTH)


def test_rate_limits_are_per_token_with_retry_after(workspace, tmp_path):
    path = tmp_path / "users.json"
    users = make_users(path, {"alice": "operator", "bob": "operator", "slow": "reader"}, slow=1)
    with TestClient(create_app(settings_for(workspace, users_file=path, rate_limit=60, rate_burst=3))) as c:
        assert [c.get("/v1/me", headers=users["alice"]).status_code for _ in range(3)] == [200] * 3
        r = c.get("/v1/queries", headers=users["alice"])
        body = problem(r, 429, "rate_limited")
        assert r.headers["retry-after"] == "1" and body["retry_after"] == 1 and "alice" in body["detail"]
        assert c.get("/v1/me", headers=users["bob"]).status_code == 200  # another token: its own bucket
        assert c.get("/v1/me", headers=AUTH).status_code == 200
        assert c.get("/readyz", headers=users["alice"]).status_code == 200  # probes are not limited
        time.sleep(1.05)  # one request a second comes back
        assert c.get("/v1/me", headers=users["alice"]).status_code == 200
        assert c.get("/v1/me", headers=users["slow"]).json()["rate_limit"] == 1  # its own rate (users file)
        for _ in range(2):
            c.get("/v1/me", headers=users["slow"])
        r = c.get("/v1/me", headers=users["slow"])
        assert r.status_code == 429 and int(r.headers["retry-after"]) > 30  # one a minute


def test_wrong_tokens_are_rate_limited_per_client_and_do_not_spend_a_users_bucket(workspace, tmp_path):
    path = tmp_path / "users.json"
    users = make_users(path, {"alice": "operator"})
    with TestClient(create_app(settings_for(workspace, users_file=path, rate_limit=60, rate_burst=3))) as c:
        wrong = {"Authorization": "Bearer not-a-token"}
        assert [c.get("/v1/me", headers=wrong).status_code for _ in range(2)] == [401] * 2
        assert c.get("/v1/me").status_code == 401  # a missing token counts too
        r = c.get("/v1/me", headers=wrong)
        body = problem(r, 429, "rate_limited")
        assert "without a valid token" in body["detail"] and r.headers["retry-after"] == "1"
        assert "not-a-token" not in r.text  # the token tried is never echoed
        assert [c.get("/v1/me", headers=users["alice"]).status_code for _ in range(3)] == [200] * 3  # her own bucket


def test_queries_of_a_registry_older_than_users_belong_to_the_admin(workspace, tmp_path):
    state = tmp_path / "state"
    state.mkdir()
    con = sqlite3.connect(state / "registry.sqlite3")
    con.executescript(
        "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);"
        "INSERT INTO meta VALUES ('schema_version', '1');"
        "CREATE TABLE queries (id TEXT PRIMARY KEY, name TEXT NOT NULL UNIQUE, text TEXT NOT NULL,"
        " allow_unbounded INTEGER NOT NULL, idle_timeout REAL, status TEXT NOT NULL, error TEXT,"
        " created_at TEXT NOT NULL, started_at TEXT, stopped_at TEXT, checkpoint TEXT,"
        " last_seq INTEGER NOT NULL DEFAULT 0, first_seq INTEGER NOT NULL DEFAULT 1, failure TEXT);")
    con.execute("INSERT INTO queries (id, name, text, allow_unbounded, status, created_at) VALUES (?, 'old', ?, 0, "
                "'registered', '2024-01-01')", ("a" * 32, BOUNDED))
    con.commit()
    con.close()
    users = make_users(tmp_path / "users.json", {"alice": "operator"})
    with TestClient(create_app(settings_for(workspace, state_dir=state, users_file=tmp_path / "users.json"))) as c:
        old = c.get(f"/v1/queries/{'a' * 32}", headers=AUTH).json()
        assert (old["owner"], old["name"], old["shared_with"]) == ("admin", "old", [])
        problem(c.get(f"/v1/queries/{'a' * 32}", headers=users["alice"]), 404, "query_not_found")
        mine = register(c, users["alice"], "old")  # the name is alice's to use: unique per owner now
        assert {q["id"] for q in c.get("/v1/queries", headers=users["alice"]).json()["queries"]} == {mine}
    con = sqlite3.connect(state / "registry.sqlite3")
    try:
        assert con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone() == ("2",)
        assert dict(con.execute("SELECT id, owner FROM queries").fetchall()) == {"a" * 32: "admin", mine: "alice"}
    finally:
        con.close()


def test_a_token_never_appears_in_a_response(env):
    c, users, ids = env
    tokens = [h["Authorization"].split()[1] for h in users.values()]
    texts = [c.get(p, headers=users["ada"]).text for p in ("/v1/queries", "/v1/me", f"/v1/queries/{ids['A']}")]
    assert not any(re.search(re.escape(t), x) for t in tokens for x in texts)
