"""Every endpoint of the HTTP API and every error it documents (FastAPI TestClient, local backend)."""

from __future__ import annotations

import json
from collections import Counter

import pytest
from fastapi.testclient import TestClient

from api import create_app
from api.problems import PROBLEM_JSON
from obda.analysis import analyze
from obda.project import Project

from apikit import AUTH, BOUNDED, BOUNDED_JOIN, PREFIX, TOKEN, UNBOUNDED, answers, api_answers, load, make_workspace, settings_for
from waiting import wait_for

ID0 = "0" * 32


def problem(r, status: int, code: str) -> dict:
    assert r.status_code == status, r.text
    assert r.headers["content-type"].startswith(PROBLEM_JSON)
    body = r.json()
    assert body["status"] == status and body["code"] == code
    assert body["type"] == f"urn:obda:problem:{code}" and body["title"] and body["detail"]
    return body


def register(client, name="q", query=BOUNDED, **kw):
    r = client.post("/v1/queries", json={"name": name, "query": query, **kw}, headers=AUTH)
    assert r.status_code == 201, r.text
    return r.json()


# ------------------------------------------------------------------------------------------ probes


def test_healthz_and_readyz_need_no_token(client):
    assert client.get("/healthz").json() == {"status": "ok"}
    r = client.get("/readyz")
    assert r.status_code == 200 and r.json()["ready"] is True and r.json()["backend"] == "local"


def test_broken_project_is_not_ready_and_endpoints_say_why(tmp_path):
    ws, _ = make_workspace(tmp_path / "ws", blocks=0)
    (ws / "sources.yaml").write_text("tables:\n  measurement: {kind: stream, columns: {a: integer}}\n")
    with TestClient(create_app(settings_for(ws))) as c:
        r = c.get("/readyz")  # without the token: no paths, no message, only the code
        assert r.status_code == 503 and r.json()["ready"] is False
        assert r.json()["error"] == {"code": "sources_error"} and r.json()["project"] == ws.name
        assert str(tmp_path) not in r.text
        r = c.get("/readyz", headers=AUTH)  # with it: where and why
        assert r.json()["error"]["code"] == "sources_error" and r.json()["error"]["location"]["line"] == 2
        assert r.json()["project"] == str(ws)
        assert c.get("/healthz").status_code == 200
        body = problem(c.post("/v1/analyze", json={"query": BOUNDED}, headers=AUTH), 503, "project_not_loaded")
        assert body["error"]["code"] == "sources_error"
        problem(c.get("/v1/ontology", headers=AUTH), 503, "project_not_loaded")
        v = c.post("/v1/validate", headers=AUTH).json()
        assert v["ok"] is False and v["problems"][0]["location"]["line"] == 2


# ------------------------------------------------------------------------------------------ authentication

ENDPOINTS = [
    ("post", "/v1/analyze", {"query": BOUNDED}),
    ("post", "/v1/queries", {"name": "x", "query": BOUNDED}),
    ("get", "/v1/queries", None),
    ("get", f"/v1/queries/{ID0}", None),
    ("post", f"/v1/queries/{ID0}/start", None),
    ("post", f"/v1/queries/{ID0}/stop", None),
    ("delete", f"/v1/queries/{ID0}", None),
    ("get", f"/v1/queries/{ID0}/results", None),
    ("get", f"/v1/queries/{ID0}/results/stream", None),
    ("get", "/v1/ontology", None),
    ("post", "/v1/validate", None),
]


@pytest.mark.parametrize("method,path,body", ENDPOINTS)
@pytest.mark.parametrize(
    "headers,error",
    [
        ({}, None),
        ({"Authorization": "Bearer wrong-token-000000"}, "invalid_token"),
        ({"Authorization": f"Basic {TOKEN}"}, None),
        ({"Authorization": f"Bearer {TOKEN}x"}, "invalid_token"),
    ],
)
def test_every_v1_endpoint_needs_the_token(client, method, path, body, headers, error):
    r = getattr(client, method)(path, headers=headers, **({"json": body} if body is not None else {}))
    problem(r, 401, "unauthorized")
    assert r.headers["www-authenticate"].startswith("Bearer")
    assert (error in r.headers["www-authenticate"]) if error else ("error=" not in r.headers["www-authenticate"])


# ------------------------------------------------------------------------------------------ analyze


def test_analyze_returns_compilation_and_the_analysers_verdict(client, workspace):
    r = client.post("/v1/analyze", json={"query": BOUNDED_JOIN, "dialect": "duckdb"}, headers=AUTH)
    assert r.status_code == 200, r.text
    body = r.json()
    project = Project.load(workspace)
    comp = project.compile(BOUNDED_JOIN)
    report = analyze(comp, project.sources)
    assert body["verdict"] == report.verdict == "bounded"
    assert body["compilation"]["sql"] == comp.to_sql("duckdb")
    assert body["compilation"]["columns"] == ["turbine", "v"]
    assert len(body["compilation"]["members"]) == len(comp.members)
    assert body["report"] == json.loads(json.dumps(report.to_dict(), default=str))
    assert body["report_text"] == report.to_text()
    assert client.get("/v1/queries", headers=AUTH).json()["queries"] == []  # nothing registered


def test_analyze_reports_unbounded_with_reasons(client):
    body = client.post("/v1/analyze", json={"query": UNBOUNDED}, headers=AUTH).json()
    assert body["verdict"] == "unbounded"
    assert body["report"]["members"][0]["verdict"] == "unbounded"
    assert "UNBOUNDED" in body["report_text"]


@pytest.mark.parametrize(
    "text,line,column",
    [
        ("SELECT ?x WHERE {\n  ?x ?y }", 2, None),
        (PREFIX + "SELECT ?x WHERE {\n  ?x a :Turbine .\n  FILTER(?x > ) }", 4, None),
        ("SELEC ?x WHERE { ?x a ?y }", 1, 1),
    ],
)
def test_syntax_error_is_400_with_its_position(client, text, line, column):
    body = problem(client.post("/v1/analyze", json={"query": text}, headers=AUTH), 400, "query_syntax_error")
    assert body["location"]["line"] == line
    if column is not None:
        assert body["location"]["column"] == column
    assert body["instance"] == "/v1/analyze"


def test_unsupported_construct_names_it_and_its_position(client):
    text = PREFIX + "SELECT ?x WHERE {\n  ?x a :Sensor .\n  OPTIONAL { GRAPH ?t { ?m :measuredBy ?x } }\n}"
    body = problem(client.post("/v1/analyze", json={"query": text}, headers=AUTH), 422, "unsupported_construct")
    assert body["construct"] == "OPTIONAL" and body["location"]["line"] == 4


def test_unknown_term_is_located(client):
    text = PREFIX + "SELECT ?x WHERE {\n  ?x a :Windmill .\n}"
    body = problem(client.post("/v1/analyze", json={"query": text}, headers=AUTH), 422, "unknown_term")
    assert body["location"] == {"line": 3, "column": 8}
    assert "Windmill" in body["detail"]


def test_user_text_is_a_constant_never_sql(client, workspace):
    """A literal that looks like SQL ends up as one quoted constant; running the SQL drops nothing."""
    import sqlglot

    evil = "x' OR 1=1; DROP TABLE sensor; --"
    text = PREFIX + 'SELECT ?s WHERE { ?s :hasKind "' + evil + '" . }'
    for dialect in ("spark", "duckdb"):
        body = client.post("/v1/analyze", json={"query": text, "dialect": dialect}, headers=AUTH).json()
        sql = body["compilation"]["sql"]
        assert len(sqlglot.parse(sql, read=dialect)) == 1  # one statement
        literals = [lit.this for lit in sqlglot.parse_one(sql, read=dialect).find_all(sqlglot.exp.Literal) if lit.is_string]
        assert evil in literals
    con = load(workspace, Project.load(workspace).sources)
    assert con.execute(sql).fetchall() == []
    assert con.execute("SELECT count(*) FROM sensor").fetchone()[0] > 0


def test_request_and_query_size_limits(workspace):
    app = create_app(settings_for(workspace, max_body_bytes=2048, max_query_chars=300))
    with TestClient(app) as c:
        big = {"query": BOUNDED + "#" * 3000}
        problem(c.post("/v1/analyze", json=big, headers=AUTH), 413, "request_too_large")

        def chunked():
            yield b'{"query": "'
            for _ in range(10):
                yield b"#" * 500
            yield b'"}'

        r = c.post("/v1/analyze", content=chunked(), headers={**AUTH, "Content-Type": "application/json"})
        problem(r, 413, "request_too_large")
        long = {"query": BOUNDED + "#" * 400}
        body = problem(c.post("/v1/analyze", json=long, headers=AUTH), 413, "query_too_long")
        assert "300" in body["detail"]
        problem(c.post("/v1/queries", json={"name": "n", **long}, headers=AUTH), 413, "query_too_long")
        assert c.post("/v1/analyze", json={"query": BOUNDED}, headers=AUTH).status_code == 200


@pytest.mark.parametrize(
    "payload",
    [
        {"query": BOUNDED, "extra": 1},
        {"query": ""},
        {"query": BOUNDED, "dialect": "oracle"},
        {},
        [1, 2],
    ],
)
def test_malformed_requests_are_422_problems(client, payload):
    body = problem(client.post("/v1/analyze", json=payload, headers=AUTH), 422, "invalid_request")
    assert body["errors"]


def test_invalid_json_is_a_problem(client):
    r = client.post("/v1/analyze", content=b"{not json", headers={**AUTH, "Content-Type": "application/json"})
    problem(r, 400, "malformed_json")
    r = client.post("/v1/analyze", content=b"query=x", headers={**AUTH, "Content-Type": "application/x-www-form-urlencoded"})
    problem(r, 415, "unsupported_media_type")


def test_unexpected_errors_are_500_problems_without_internals(workspace):
    app = create_app(settings_for(workspace))

    def boom(text):
        raise RuntimeError("secret internal detail")

    app.state.service.compile = boom
    with TestClient(app, raise_server_exceptions=False) as c:
        body = problem(c.post("/v1/analyze", json={"query": BOUNDED}, headers=AUTH), 500, "internal_error")
        assert "secret" not in json.dumps(body)


# ------------------------------------------------------------------------------------------ queries


def test_register_returns_id_sql_and_verdict(client):
    body = register(client, "hot", BOUNDED)
    assert len(body["id"]) == 32 and body["status"] == "registered" and body["verdict"] == "bounded"
    assert "FROM measurement" in body["sql"] and body["columns"] == ["sensor", "v"]
    assert body["report"]["verdict"] == "bounded" and body["compilation"]["sql"] == body["sql"]
    assert body["links"]["stream"] == f"/v1/queries/{body['id']}/results/stream"
    got = client.get(f"/v1/queries/{body['id']}", headers=AUTH).json()
    assert got["name"] == "hot" and got["metrics"] is None and got["results"] == 0
    listed = client.get("/v1/queries", headers=AUTH).json()
    assert [q["id"] for q in listed["queries"]] == [body["id"]] and listed["running"] == 0


def test_unbounded_query_needs_the_opt_in(client):
    body = problem(client.post("/v1/queries", json={"name": "u", "query": UNBOUNDED}, headers=AUTH), 422, "execution_error")
    assert "allow_unbounded" in body["detail"]
    assert register(client, "u", UNBOUNDED, allow_unbounded=True)["verdict"] == "unbounded"


def test_register_errors(client, workspace):
    register(client, "same")
    problem(client.post("/v1/queries", json={"name": "same", "query": BOUNDED}, headers=AUTH), 409, "name_taken")
    problem(client.post("/v1/queries", json={"name": "bad name!", "query": BOUNDED}, headers=AUTH), 422, "invalid_request")
    problem(client.post("/v1/queries", json={"name": "s", "query": "SELECT"}, headers=AUTH), 400, "query_syntax_error")
    problem(client.post("/v1/queries", json={"name": "i", "query": BOUNDED, "idle_timeout": 0}, headers=AUTH), 422,
            "invalid_request")
    with TestClient(create_app(settings_for(workspace, max_registered=1))) as c:
        register(c, "one")
        problem(c.post("/v1/queries", json={"name": "two", "query": BOUNDED}, headers=AUTH), 429, "too_many_queries")


def test_unknown_and_malformed_ids(client):
    problem(client.get(f"/v1/queries/{ID0}", headers=AUTH), 404, "query_not_found")
    problem(client.post(f"/v1/queries/{ID0}/start", headers=AUTH), 404, "query_not_found")
    problem(client.get(f"/v1/queries/{ID0}/results", headers=AUTH), 404, "query_not_found")
    problem(client.get(f"/v1/queries/{ID0}/results/stream", headers=AUTH), 404, "query_not_found")
    problem(client.delete(f"/v1/queries/{ID0}", headers=AUTH), 404, "query_not_found")
    problem(client.get("/v1/queries/../etc", headers=AUTH), 404, "not_found")
    problem(client.get("/v1/queries/XYZ", headers=AUTH), 422, "invalid_request")
    problem(client.get("/v1/nothing", headers=AUTH), 404, "not_found")
    problem(client.put("/v1/queries", headers=AUTH), 405, "method_not_allowed")


@pytest.mark.parametrize("query,columns", [(BOUNDED, ["sensor", "v"]), (BOUNDED_JOIN, ["turbine", "v"])])
def test_run_results_equal_a_full_history_evaluation(tmp_path, query, columns):
    """Start, feed two more blocks, stop: the answers are exactly those of DuckDB over every fed row."""
    ws, feeder = make_workspace(tmp_path / "ws", blocks=1, seed=3)
    with TestClient(create_app(settings_for(ws))) as c:
        # The feeder writes a block's measurement file, then its maintenance file: a poll between the
        # two sees only the first.  The idle timeout must outlast that (else maintenance, idle since
        # the start, would not hold the marker back and its new rows would be late).
        q = register(c, "run", query, idle_timeout=1.0)
        r = c.post(f"/v1/queries/{q['id']}/start", headers=AUTH)
        assert r.status_code == 200 and r.json()["status"] == "running" and r.json()["started_at"]
        assert c.post(f"/v1/queries/{q['id']}/start", headers=AUTH).json()["status"] == "running"  # idempotent
        feeder.feed_block()
        feeder.feed_block()
        project = Project.load(ws)
        expected = answers(ws, project.sources, project.compile(query).to_sql("duckdb"))
        assert sum(expected.values()) > 0
        # every timestamp closes (idle timeout): the answer count reaches the oracle's
        wait_for(lambda: c.get(f"/v1/queries/{q['id']}", headers=AUTH).json()["results"] >= sum(expected.values()))
        info = c.get(f"/v1/queries/{q['id']}", headers=AUTH).json()
        assert info["metrics"]["rows_in"]["measurement"] > 0 and info["metrics"]["late"] == 0
        stopped = c.post(f"/v1/queries/{q['id']}/stop", headers=AUTH).json()
        assert stopped["status"] == "stopped" and stopped["stopped_at"]
        items, after = [], 0
        while True:  # page through with small pages
            page = c.get(f"/v1/queries/{q['id']}/results", params={"after": after, "limit": 7}, headers=AUTH).json()
            if not page["items"]:
                break
            assert [a["seq"] for a in page["items"]] == list(range(after + 1, after + 1 + len(page["items"])))
            items += page["items"]
            after = page["next_after"]
        assert api_answers(items, columns) == expected
        assert page["last_seq"] == len(items) and page["next_after"] is None


#: readings_and_alarms_any_time of catalogs/demo.yaml: unbounded, bounded under an RI constraint
ANY_TIME = PREFIX + "SELECT ?sensor ?v WHERE {\n  GRAPH ?t1 { ?m :measuredBy ?sensor ; :hasValue ?v . }\n" \
    "  GRAPH ?t2 { ?a :raisedBy ?sensor . }\n}\n"


def test_a_query_bounded_by_a_k_constraint_runs_without_the_opt_in_and_reports_it(tmp_path):
    """Declared in the sources file, the constraint admits the query; GET shows both verdicts, the constraint
    used, and its watch in the metrics; the answers are DuckDB's over every fed row (the data keeps it)."""
    ws, feeder = make_workspace(tmp_path / "ws", blocks=1, seed=4)
    with open(ws / "sources.yaml", "a") as f:
        f.write("constraints:\n  - name: alarm_near_reading\n"
                "    referential: {from: measurement, to: alarm, on: [sensor_id]}\n    after: P1D\n    before: P1D\n")
    with TestClient(create_app(settings_for(ws))) as c:
        q = register(c, "any_time", ANY_TIME, idle_timeout=1.0)  # no allow_unbounded
        assert (q["verdict"], q["constrained_verdict"], q["constraints"]) == ("unbounded", "bounded", ["alarm_near_reading"])
        assert c.post(f"/v1/queries/{q['id']}/start", headers=AUTH).json()["status"] == "running"
        feeder.feed_block()
        project = Project.load(ws)
        expected = answers(ws, project.sources, project.compile(ANY_TIME).to_sql("duckdb"))
        assert sum(expected.values()) > 0
        wait_for(lambda: c.get(f"/v1/queries/{q['id']}", headers=AUTH).json()["results"] >= sum(expected.values()),
                 timeout=30)
        info = c.get(f"/v1/queries/{q['id']}", headers=AUTH).json()
        watch = info["metrics"]["constraints"]["alarm_near_reading"]
        assert watch["in_use"] and watch["used_by_query"] and watch["rows"] > 0 and watch["violations"] == 0
        assert watch["declared"] == {"after": "P1D", "before": "P1D"} and set(watch["estimated"]) == {"after", "before"}
        assert info["metrics"]["constraint_violations"] == 0 and info["metrics"]["incomplete_since"] is None
        c.post(f"/v1/queries/{q['id']}/stop", headers=AUTH)
        items = c.get(f"/v1/queries/{q['id']}/results", params={"limit": 1000}, headers=AUTH).json()["items"]
        assert api_answers(items, ["sensor", "v"]) == expected
        problem(c.post("/v1/queries", json={"name": "plain", "query": UNBOUNDED}, headers=AUTH), 422, "execution_error")


def test_stop_resume_keeps_state_and_sequence(tmp_path):
    ws, feeder = make_workspace(tmp_path / "ws", blocks=1, seed=5)
    with TestClient(create_app(settings_for(ws))) as c:
        q = register(c, "r", BOUNDED, idle_timeout=0.2)
        qid = q["id"]
        c.post(f"/v1/queries/{qid}/start", headers=AUTH)
        wait_for(lambda: c.get(f"/v1/queries/{qid}", headers=AUTH).json()["metrics"]["rows_in"].get("measurement"))
        c.post(f"/v1/queries/{qid}/stop", headers=AUTH)
        assert c.post(f"/v1/queries/{qid}/stop", headers=AUTH).json()["status"] == "stopped"  # idempotent
        feeder.feed_block()
        c.post(f"/v1/queries/{qid}/start", headers=AUTH)
        project = Project.load(ws)
        expected = answers(ws, project.sources, project.compile(BOUNDED).to_sql("duckdb"))
        wait_for(lambda: c.get(f"/v1/queries/{qid}", headers=AUTH).json()["results"] >= sum(expected.values()))
        c.post(f"/v1/queries/{qid}/stop", headers=AUTH)
        items = c.get(f"/v1/queries/{qid}/results", params={"limit": 1000}, headers=AUTH).json()["items"]
        assert api_answers(items, ["sensor", "v"]) == expected  # nothing lost, nothing repeated


def test_cap_on_running_queries(tmp_path):
    ws, _ = make_workspace(tmp_path / "ws", blocks=1)
    with TestClient(create_app(settings_for(ws, max_running=1))) as c:
        a, b = register(c, "a"), register(c, "b")
        assert c.post(f"/v1/queries/{a['id']}/start", headers=AUTH).status_code == 200
        problem(c.post(f"/v1/queries/{b['id']}/start", headers=AUTH), 429, "too_many_running")
        assert c.get("/v1/queries", headers=AUTH).json()["running"] == 1
        c.post(f"/v1/queries/{a['id']}/stop", headers=AUTH)
        assert c.post(f"/v1/queries/{b['id']}/start", headers=AUTH).json()["status"] == "running"
        assert c.delete(f"/v1/queries/{b['id']}", headers=AUTH).status_code == 204
        problem(c.get(f"/v1/queries/{b['id']}", headers=AUTH), 404, "query_not_found")


def test_start_that_cannot_execute_is_a_problem(tmp_path):
    ws, _ = make_workspace(tmp_path / "ws", blocks=0)
    sources = (ws / "sources.yaml").read_text()
    (ws / "sources.yaml").write_text(sources.replace("    location: data/sensor\n", ""))  # sensor: no location
    with TestClient(create_app(settings_for(ws))) as c:
        q = register(c, "j", BOUNDED_JOIN)
        body = problem(c.post(f"/v1/queries/{q['id']}/start", headers=AUTH), 422, "execution_error")
        assert "sensor" in body["detail"]
        assert c.get(f"/v1/queries/{q['id']}", headers=AUTH).json()["status"] == "registered"


# ------------------------------------------------------------------------------------------ SSE


def sse_events(text: str) -> list[dict]:
    events = []
    for block in text.split("\n\n"):
        ev = {}
        for line in block.splitlines():
            if line.startswith(":") or ":" not in line:
                continue
            k, v = line.split(":", 1)
            ev[k] = v[1:] if v.startswith(" ") else v
        if "event" in ev:
            events.append(ev)
    return events


def test_sse_replays_resumes_and_ends_when_stopped(tmp_path):
    ws, feeder = make_workspace(tmp_path / "ws", blocks=2, seed=1)
    with TestClient(create_app(settings_for(ws))) as c:
        q = register(c, "s", BOUNDED, idle_timeout=0.2)
        qid = q["id"]
        c.post(f"/v1/queries/{qid}/start", headers=AUTH)
        n = wait_for(lambda: c.get(f"/v1/queries/{qid}", headers=AUTH).json()["results"] >= 4 and
                     c.get(f"/v1/queries/{qid}", headers=AUTH).json()["results"])
        # a bounded number of events while the query runs
        with c.stream("GET", f"/v1/queries/{qid}/results/stream", params={"limit": 3}, headers=AUTH) as s:
            assert s.status_code == 200 and s.headers["content-type"].startswith("text/event-stream")
            events = sse_events(s.read().decode())
        assert [e["event"] for e in events] == ["result"] * 3 and [e["id"] for e in events] == ["1", "2", "3"]
        c.post(f"/v1/queries/{qid}/stop", headers=AUTH)
        total = c.get(f"/v1/queries/{qid}", headers=AUTH).json()["results"]
        assert total >= n
        # resume after event 2 (Last-Event-ID): the rest, then the status event that ends the stream
        with c.stream("GET", f"/v1/queries/{qid}/results/stream", headers={**AUTH, "Last-Event-ID": "2"}) as s:
            events = sse_events(s.read().decode())
        assert [int(e["id"]) for e in events[:-1]] == list(range(3, total + 1))
        assert events[-1]["event"] == "status" and json.loads(events[-1]["data"])["status"] == "stopped"
        page = c.get(f"/v1/queries/{qid}/results", params={"after": 2, "limit": 1000}, headers=AUTH).json()
        assert [json.loads(e["data"]) for e in events[:-1]] == [
            {"emitted_at": a["emitted_at"], "op": a["op"], "binding": a["binding"]} for a in page["items"]
        ]


def test_a_browser_reads_the_stream_with_a_short_lived_cookie(tmp_path, monkeypatch):
    """An EventSource cannot send `Authorization`: POST …/stream-session sets an HttpOnly cookie scoped to that query's
    stream URL; the stream accepts it (and only for that query, and not once expired); no token is in a URL."""
    import api.app as app_module

    ws, feeder = make_workspace(tmp_path / "ws", blocks=1, seed=1)
    with TestClient(create_app(settings_for(ws))) as c:
        q, other = register(c, "s", BOUNDED, idle_timeout=0.2), register(c, "o", BOUNDED)
        qid = q["id"]
        c.post(f"/v1/queries/{qid}/start", headers=AUTH)
        wait_for(lambda: c.get(f"/v1/queries/{qid}", headers=AUTH).json()["results"] >= 2)
        assert c.post(f"/v1/queries/{qid}/results/stream-session").status_code == 401  # it needs the bearer token
        r = c.post(f"/v1/queries/{qid}/results/stream-session", headers=AUTH)
        assert r.status_code == 204
        cookie = r.headers["set-cookie"]
        assert "HttpOnly" in cookie and "SameSite=strict" in cookie and f"Path=/v1/queries/{qid}/results/stream" in cookie
        ticket = r.cookies["obda_stream"]
        c.cookies.clear()
        with c.stream("GET", f"/v1/queries/{qid}/results/stream", params={"limit": 2},
                      cookies={"obda_stream": ticket}) as s:  # no Authorization header
            assert s.status_code == 200
            assert [e["event"] for e in sse_events(s.read().decode())] == ["result", "result"]
        r = c.get(f"/v1/queries/{other['id']}/results/stream", params={"limit": 1}, cookies={"obda_stream": ticket})
        assert r.status_code == 401  # another query's stream
        monkeypatch.setattr(app_module.time, "time", lambda: 10**12)  # long after it expired
        r = c.get(f"/v1/queries/{qid}/results/stream", params={"limit": 1}, cookies={"obda_stream": ticket})
        assert r.status_code == 401 and "expired" in r.json()["detail"]


# ------------------------------------------------------------------------------------------ project


def test_ontology_lists_terms_with_labels(client, workspace):
    body = client.get("/v1/ontology", headers=AUTH).json()
    onto = Project.load(workspace).ontology
    assert {c["iri"] for c in body["classes"]} == set(onto.classes)
    assert {p["iri"] for p in body["object_properties"]} == set(onto.object_properties)
    assert {p["iri"] for p in body["data_properties"]} == set(onto.data_properties)
    ns = "http://example.org/turbine#"
    alarm = next(c for c in body["classes"] if c["iri"] == ns + "Alarm")
    assert alarm["label"] == "alarm" and alarm["local_name"] == "Alarm" and ns + "Event" in alarm["superclasses"]
    assert body["prefixes"] == {"": ns}
    has_value = next(p for p in body["data_properties"] if p["local_name"] == "hasValue")
    assert has_value["label"] == "has value"


def test_validate_reports_problems_with_file_and_line(client, tmp_path):
    ok = client.post("/v1/validate", headers=AUTH).json()
    assert ok == {"ok": True, "errors": 0, "warnings": ok["warnings"], "problems": ok["problems"]}
    ws, _ = make_workspace(tmp_path / "ws", blocks=0)
    app = create_app(settings_for(ws))
    # break the sources after loading: validate checks the folder as it is now
    text = (ws / "sources.yaml").read_text().replace("value: integer", "reading: integer")
    (ws / "sources.yaml").write_text(text)
    with TestClient(app) as c:
        body = c.post("/v1/validate", headers=AUTH).json()
    assert body["ok"] is False and body["errors"] >= 1
    errs = [p for p in body["problems"] if p["severity"] == "error"]
    assert any("value" in p["message"] and p["location"]["line"] for p in errs)


def test_openapi_document_and_docs_page(client):
    doc = client.get("/openapi.json").json()
    paths = doc["paths"]
    for p in ["/v1/analyze", "/v1/queries", "/v1/queries/{query_id}", "/v1/queries/{query_id}/start",
              "/v1/queries/{query_id}/stop", "/v1/queries/{query_id}/results", "/v1/queries/{query_id}/results/stream",
              "/v1/ontology", "/v1/validate", "/healthz", "/readyz"]:
        assert p in paths, p
    assert doc["components"]["securitySchemes"]["HTTPBearer"]["scheme"] == "bearer"
    assert paths["/v1/queries"]["post"]["security"] == [{"HTTPBearer": []}]
    assert "application/problem+json" in paths["/v1/analyze"]["post"]["responses"]["400"]["content"]
    assert "text/event-stream" in paths["/v1/queries/{query_id}/results/stream"]["get"]["responses"]["200"]["content"]
    r = client.get("/docs")
    assert r.status_code == 200 and "swagger" in r.text.lower()
    # the limit the server enforces, not the hard ceiling
    limit = client.app.state.service.settings.max_query_chars
    for name in ("AnalyzeRequest", "RegisterRequest"):
        assert doc["components"]["schemas"][name]["properties"]["query"]["maxLength"] == limit


def test_state_dir_keeps_checkpoint_and_quarantine(tmp_path):
    """With a state folder, each query checkpoints there; malformed rows are counted and quarantined, not lost."""
    ws, feeder = make_workspace(tmp_path / "ws", blocks=1, seed=2)
    (ws / "data" / "measurement" / "feed-000000x.csv").write_text("sensor_id,value,ts\n1,not-a-number,2024-01-01 00:04:00\n")
    with TestClient(create_app(settings_for(ws, state_dir=tmp_path / "state"))) as c:
        q = register(c, "st", BOUNDED, idle_timeout=0.2)
        c.post(f"/v1/queries/{q['id']}/start", headers=AUTH)
        m = wait_for(lambda: (c.get(f"/v1/queries/{q['id']}", headers=AUTH).json()["metrics"] or {}).get("invalid") and
                     c.get(f"/v1/queries/{q['id']}", headers=AUTH).json()["metrics"])
        assert m["invalid"] == 1 and m["invalid_by_stream"] == {"measurement": 1}
        c.post(f"/v1/queries/{q['id']}/stop", headers=AUTH)
    folder = tmp_path / "state" / q["id"]
    assert (folder / "state.pkl").exists()
    quarantined = [json.loads(line) for line in (folder / "quarantine.jsonl").read_text().splitlines()]
    assert len(quarantined) == 1 and "not-a-number" in json.dumps(quarantined[0])


def test_a_slow_start_blocks_no_other_request(tmp_path):
    """While an executor is being built (a Spark session can take long), the query is `starting` and counts
    toward the cap; other requests are answered meanwhile."""
    import threading

    ws, _ = make_workspace(tmp_path / "ws", blocks=1)
    app = create_app(settings_for(ws, max_running=1))
    registry = app.state.service.registry
    release = threading.Event()
    build = registry._executor

    def slow_executor(q):
        release.wait(10)
        return build(q)

    registry._executor = slow_executor
    with TestClient(app) as c:
        a, b = register(c, "a"), register(c, "b")
        t = threading.Thread(target=lambda: c.post(f"/v1/queries/{a['id']}/start", headers=AUTH))
        t.start()
        try:
            wait_for(lambda: c.get(f"/v1/queries/{a['id']}", headers=AUTH).json()["status"] == "starting")
            assert c.get("/v1/queries", headers=AUTH).json()["running"] == 1
            problem(c.post(f"/v1/queries/{b['id']}/start", headers=AUTH), 429, "too_many_running")
            problem(c.delete(f"/v1/queries/{a['id']}", headers=AUTH), 409, "query_starting")
        finally:
            release.set()
            t.join(10)
        assert c.get(f"/v1/queries/{a['id']}", headers=AUTH).json()["status"] == "running"


def test_a_start_waiting_for_the_shared_micro_batch_blocks_no_other_request(tmp_path):
    """A start joins the shared loop, which waits for the loop's micro-batch in flight (the loop holds its lock for
    the whole micro-batch: the 20 queries' Spark jobs in the soak, up to 165 s).  It waits outside the registry's
    lock: listing, reading and registering are answered meanwhile (issue 29's soak)."""
    import threading
    import time

    ws, _ = make_workspace(tmp_path / "ws", blocks=1)
    app = create_app(settings_for(ws))
    registry = app.state.service.registry
    with TestClient(app) as c:
        a, b = register(c, "a"), register(c, "b")
        c.post(f"/v1/queries/{a['id']}/start", headers=AUTH).raise_for_status()
        held, release = threading.Event(), threading.Event()

        def micro_batch_in_flight():
            with registry.shared._lock:  # as SharedScan.step holds it
                held.set()
                release.wait(30)

        loop = threading.Thread(target=micro_batch_in_flight)
        loop.start()
        held.wait(10)
        t = threading.Thread(target=lambda: c.post(f"/v1/queries/{b['id']}/start", headers=AUTH))
        t.start()
        try:
            wait_for(lambda: c.get(f"/v1/queries/{b['id']}", headers=AUTH).json()["status"] == "starting")
            t0 = time.monotonic()
            assert c.get("/v1/queries", headers=AUTH).json()["running"] == 2
            c.get(f"/v1/queries/{a['id']}/results?after=0", headers=AUTH).raise_for_status()
            took = {"list, read": time.monotonic() - t0}
            register(c, "c")
            took["register"] = time.monotonic() - t0 - took["list, read"]
            assert max(took.values()) < 5, f"a request waited for the shared loop's micro-batch: {took}"
            assert t.is_alive()  # the start itself still waits for the loop
        finally:
            release.set()
            loop.join(10)
            t.join(30)
        assert c.get(f"/v1/queries/{b['id']}", headers=AUTH).json()["status"] == "running"


AGGREGATE = PREFIX + (
    "SELECT ?sensor (COUNT(*) AS ?n) (SUM(?v) AS ?total) (MAX(?v) AS ?high) WHERE {\n"
    "  GRAPH ?t { ?m :measuredBy ?sensor ; :hasValue ?v . }\n"
    "  ?turbine :hasSensor ?sensor .\n"
    "} GROUP BY ?sensor ORDER BY DESC(?total)\n"
)


def test_aggregate_query_current_answer_and_changelog(tmp_path):
    """An aggregate query: GET /answer is the current table (ORDER BY order), the results are its changelog
    (op upsert), and both equal DuckDB's GROUP BY over every fed row."""
    ws, feeder = make_workspace(tmp_path / "ws", blocks=1, seed=3)
    columns = ["sensor", "n", "total", "high"]
    with TestClient(create_app(settings_for(ws))) as c:
        q = register(c, "agg", AGGREGATE, idle_timeout=0.5)
        assert q["verdict"] == "bounded" and "Theorem 8.5" in json.dumps(q["report"])
        problem(c.get(f"/v1/queries/{q['id']}/answer", headers=AUTH), 409, "not_started")
        c.post(f"/v1/queries/{q['id']}/start", headers=AUTH)
        feeder.feed_block()
        project = Project.load(ws)
        expected = answers(ws, project.sources, project.compile(AGGREGATE).to_sql("duckdb"))
        assert len(expected) > 1

        def table():
            return c.get(f"/v1/queries/{q['id']}/answer", headers=AUTH).json()

        wait_for(lambda: Counter(tuple(r[k] for k in columns) for r in table()["rows"]) == expected)
        c.post(f"/v1/queries/{q['id']}/stop", headers=AUTH)
        body = table()
        assert body["columns"] == columns and body["closed_upto"]
        totals = [r["total"] for r in body["rows"]]
        assert totals == sorted(totals, reverse=True)  # ORDER BY DESC(?total)
        items = c.get(f"/v1/queries/{q['id']}/results", params={"limit": 1000}, headers=AUTH).json()["items"]
        assert items and {a["op"] for a in items} == {"upsert"}
        replayed = {a["binding"]["sensor"]: tuple(a["binding"][k] for k in columns) for a in items}
        assert Counter(replayed.values()) == expected
        plain = register(c, "spj", BOUNDED)
        problem(c.get(f"/v1/queries/{plain['id']}/answer", headers=AUTH), 409, "not_an_aggregate")
        # GROUP BY ?t (Rule 9): its groups are written and dropped, so it has no answer table: the changelog holds it
        keyed = register(c, "per_time", PREFIX + "SELECT ?t (COUNT(*) AS ?n) WHERE { GRAPH ?t { ?m :measuredBy ?s ; "
                         ":hasValue ?v . } } GROUP BY ?t\n", idle_timeout=0.5)
        assert keyed["verdict"] == "bounded"
        c.post(f"/v1/queries/{keyed['id']}/start", headers=AUTH)
        problem(c.get(f"/v1/queries/{keyed['id']}/answer", headers=AUTH), 409, "time_keyed")
        c.post(f"/v1/queries/{keyed['id']}/stop", headers=AUTH)


def test_a_decimal_is_the_same_json_number_in_the_answer_table_and_the_changelog(tmp_path):
    """AVG of integers is an xsd:decimal: /answer, the changelog pages and the CLI's --final all give it as the same
    JSON number (not a string in one place and a number in another)."""
    from obda.execution.sinks import row_lines

    ws, feeder = make_workspace(tmp_path / "ws", blocks=1, seed=3)
    text = PREFIX + ("SELECT ?sensor (AVG(?v) AS ?mean) WHERE { GRAPH ?t { ?m :measuredBy ?sensor ; :hasValue ?v . } "
                     "?turbine :hasSensor ?sensor . } GROUP BY ?sensor\n")
    with TestClient(create_app(settings_for(ws))) as c:
        q = register(c, "avg", text, idle_timeout=0.5)
        c.post(f"/v1/queries/{q['id']}/start", headers=AUTH)
        feeder.feed_block()

        def table():
            return c.get(f"/v1/queries/{q['id']}/answer", headers=AUTH).json()["rows"]

        wait_for(lambda: len(table()) > 1)
        c.post(f"/v1/queries/{q['id']}/stop", headers=AUTH)
        rows = table()
        items = c.get(f"/v1/queries/{q['id']}/results", params={"limit": 1000}, headers=AUTH).json()["items"]
    replayed = {a["binding"]["sensor"]: a["binding"]["mean"] for a in items}
    assert rows and all(isinstance(r["mean"], (int, float)) for r in rows)
    assert {r["sensor"]: r["mean"] for r in rows} == replayed
    from decimal import Decimal

    final = [json.loads(line) for line in row_lines([{"sensor": "s", "mean": Decimal(2) / Decimal(3)}], ("sensor", "mean"))]
    assert final[0]["mean"] == float(Decimal(2) / Decimal(3))


def test_concurrent_analyses_are_capped_with_a_429(tmp_path, monkeypatch):
    """At most ``max_analyses`` compilations at once (each may take seconds): one more is a 429 with Retry-After, and
    the analyses that ran are unaffected."""
    import threading

    from obda.project import Project as ProjectClass

    ws, _ = make_workspace(tmp_path / "ws", blocks=0)
    entered, release = threading.Event(), threading.Event()
    real = ProjectClass.compile

    def slow(self, *a, **k):
        entered.set()
        release.wait(30)
        return real(self, *a, **k)

    monkeypatch.setattr(ProjectClass, "compile", slow)
    with TestClient(create_app(settings_for(ws, max_analyses=1))) as c:
        results = {}
        t = threading.Thread(target=lambda: results.setdefault(
            "first", c.post("/v1/analyze", json={"query": BOUNDED}, headers=AUTH).status_code))
        t.start()
        assert entered.wait(30)
        r = c.post("/v1/analyze", json={"query": BOUNDED}, headers=AUTH)
        problem(r, 429, "too_many_analyses")
        assert r.headers["retry-after"] == "1"
        release.set()
        t.join(30)
        assert results["first"] == 200
        assert c.post("/v1/analyze", json={"query": BOUNDED}, headers=AUTH).status_code == 200


def test_registrations_get_429_while_a_running_query_is_behind_its_input(tmp_path):
    """``max_lag_seconds``: while the oldest unread input file of a running query has waited longer than the
    bound (its metric ``lag_seconds``), a registration is refused with 429 and the reason; once it caught up,
    registrations are accepted again."""
    import os
    import time

    ws, _ = make_workspace(tmp_path / "ws", blocks=1)
    with TestClient(create_app(settings_for(ws, max_lag_seconds=60))) as c:
        a = register(c, "a")
        assert c.post(f"/v1/queries/{a['id']}/start", headers=AUTH).status_code == 200
        handle = c.app.state.service.registry.get(a["id"]).handle
        old = ws / "data" / "measurement" / "waiting.csv"
        old.write_text("sensor_id,value,ts\n")
        os.utime(old, (time.time() - 600, time.time() - 600))
        with handle._lock:  # the query between two micro-batches, with a file that waited 10 minutes unread
            handle.metrics.observe_input({"measurement": [str(old)]}, {})
            body = problem(c.post("/v1/queries", json={"name": "b", "query": BOUNDED}, headers=AUTH), 429,
                           "service_behind")
            assert "waited 600 s, more than the bound of 60 s" in body["detail"]
        wait_for(lambda: c.get(f"/v1/queries/{a['id']}", headers=AUTH).json()["metrics"]["lag_seconds"] == 0.0)
        register(c, "b")


@pytest.mark.parametrize("pattern, answer", [("?turbine :hasModel ?model", True),
                                             ('?turbine :hasModel "no such model"', False)])
def test_an_ask_over_static_data_answers_one_boolean(tmp_path, pattern, answer):
    """ASK through the service: its verdict on register, then one result, true or false (the SQL's one row)."""
    ws, _ = make_workspace(tmp_path / "ws", blocks=1, seed=3)
    query = PREFIX + f"ASK {{ {pattern} }}"
    with TestClient(create_app(settings_for(ws))) as c:
        q = register(c, "ask", query)
        assert q["verdict"] == "bounded" and "COUNT(*) > 0 AS boolean" in q["sql"]
        c.post(f"/v1/queries/{q['id']}/start", headers=AUTH)
        wait_for(lambda: c.get(f"/v1/queries/{q['id']}", headers=AUTH).json()["results"] >= 1)
        page = c.get(f"/v1/queries/{q['id']}/results", headers=AUTH).json()
        assert [item["binding"] for item in page["items"]] == [{"boolean": answer}]
