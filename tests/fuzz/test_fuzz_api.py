"""Property-based fuzzing of the service's JSON bodies: no body makes it answer 500.

The bodies of ``POST /v1/analyze``, ``POST /v1/queries`` and ``PUT /v1/queries/{id}/shared-with`` start from
valid ones (a real query of the repository with a few token edits, :mod:`fuzzkit`), then have fields dropped,
added or replaced by any JSON value; one body in three is sent as JSON text with token edits of its own
(unbalanced brackets, stray quotes, NUL, nesting thousands deep).  Each is sent by an operator (alice, who owns
the target query) or a reader (rita).  The property: never a 5xx; every refusal is an RFC 9457 problem whose
``status`` is the response's; a registration succeeds only for the operator and is hers.

150 bodies in the default run (each may compile a query), 10,000 in the slow run (``-m slow``).
"""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from fuzzkit import edited, mutated, sparql_seeds

RUNS = [pytest.param(150, id="150"), pytest.param(10_000, id="10000", marks=pytest.mark.slow)]

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=6,
)
NAMES = st.one_of(st.from_regex(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,70}$", fullmatch=True), st.text(max_size=80))


@st.composite
def requests(draw, target: str):
    """(method, path, body as JSON text, user)."""
    endpoint = draw(st.sampled_from(("analyze", "register", "share")))
    query = draw(mutated(sparql_seeds(), 2))
    body = {
        "analyze": {"query": query, "dialect": draw(st.sampled_from(("spark", "duckdb", "postgres", "sqlite")))},
        "register": {"name": draw(NAMES), "query": query, "allow_unbounded": draw(st.booleans()),
                     "idle_timeout": draw(st.sampled_from((None, 0.5, 1)))},
        "share": {"users": draw(st.lists(st.sampled_from(("rita", "alice", "nobody", "admin")), max_size=3))},
    }[endpoint]
    for key in list(body):
        change = draw(st.sampled_from(("keep", "keep", "keep", "drop", "replace")))
        if change == "drop":
            del body[key]
        elif change == "replace":
            body[key] = draw(JSON)
    if draw(st.booleans()):
        body[draw(st.text(max_size=10))] = draw(JSON)
    text = json.dumps(body)
    if draw(st.integers(0, 2)) == 0:
        text = draw(edited(text))
    method, path = {"analyze": ("POST", "/v1/analyze"), "register": ("POST", "/v1/queries"),
                    "share": ("PUT", f"/v1/queries/{target}/shared-with")}[endpoint]
    return method, path, text, draw(st.sampled_from(("alice", "rita")))


@pytest.mark.parametrize("n", RUNS)
def test_no_json_body_makes_a_server_error(service, n):
    c, users, target = service

    @seed(29)
    @settings(max_examples=n, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(requests(target))
    def run(request):
        method, path, text, user = request
        r = c.request(method, path, content=text.encode("utf-8", "surrogatepass"),
                      headers={**users[user], "Content-Type": "application/json"})
        assert r.status_code < 500, f"{method} {path} {text[:500]!r}: {r.status_code} {r.text[:500]}"
        if r.status_code >= 400:
            assert r.headers["content-type"].startswith("application/problem+json"), r.text
            problem = r.json()
            assert problem["status"] == r.status_code and problem["code"] and problem["detail"]
        elif path == "/v1/queries":
            assert user == "alice" and r.json()["owner"] == "alice"
            assert c.delete(f"/v1/queries/{r.json()['id']}", headers=users["alice"]).status_code == 204

    run()
