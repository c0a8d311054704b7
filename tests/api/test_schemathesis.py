"""Property-based tests from the OpenAPI document (schemathesis), with two users: no input makes the service
fail, and no user reads another's query.

Two operators, uno and duo, each register a query.  Every operation gets a small, bounded number of
generated requests:

* sent with uno's token, operations on one query aimed at uno's query: each response must not be a server
  error, must use a documented status code and content type, and must match its documented schema (the live
  stream, which would follow a running query forever, and DELETE are left out);
* sent with duo's token, operations on one query aimed at uno's query (DELETE and the stream too): each must
  answer 404 ``query_not_found`` — or refuse the request itself (malformed JSON, too large, invalid
  parameters) the same way for any id — and neither listing nor registering shows duo uno's query id.
"""

from __future__ import annotations

import pytest
import schemathesis
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from api import create_app
from apikit import BOUNDED, settings_for
from userkit import make_users

CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]
#: refusals of the request itself, the same whatever the query id (nothing about the query is read)
REQUEST_ERRORS = {400: None, 405: "method_not_allowed", 413: "request_too_large", 415: "unsupported_media_type",
                  422: "invalid_request"}  # 400: malformed JSON, or a body that cannot be parsed at all


@pytest.fixture(scope="module")
def fuzzed(workspace, tmp_path_factory):
    """A fresh app with two operators and one query of each; yields (app, headers per user, id per user)."""
    path = tmp_path_factory.mktemp("schemathesis-users") / "users.json"
    users = make_users(path, {"uno": "operator", "duo": "operator"})
    app = create_app(settings_for(workspace, users_file=path, max_running=1, rate_limit=0))
    with TestClient(app) as c:
        ids = {}
        for user in ("uno", "duo"):
            r = c.post("/v1/queries", json={"name": "fuzz-target", "query": BOUNDED, "idle_timeout": 1},
                       headers=users[user])
            assert r.status_code == 201, r.text
            ids[user] = r.json()["id"]
        yield app, users, ids, c


@pytest.fixture()
def api_schema(fuzzed):
    return schemathesis.openapi.from_asgi("/openapi.json", fuzzed[0])


schema = schemathesis.pytest.from_fixture("api_schema")


def _aim(case, query_id: str) -> bool:
    """Point an operation on one query at ``query_id``; False for operations on no query."""
    if "{query_id}" not in case.path:
        return False
    if not isinstance(case.path_parameters, dict):
        case.path_parameters = {}
    case.path_parameters["query_id"] = query_id
    return True


@schema.parametrize()
@settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
def test_no_server_errors(case, fuzzed):
    _, users, ids, _ = fuzzed
    if case.method != "DELETE" and not case.path.endswith("/stream"):
        _aim(case, ids["uno"])
    case.call_and_validate(headers=users["uno"], checks=CHECKS)


@schema.parametrize()
@settings(max_examples=5, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
def test_no_cross_user_read(case, fuzzed):
    _, users, ids, c = fuzzed
    theirs = ids["uno"]
    if "{query_id}" not in case.path and case.path != "/v1/queries":
        return  # analyse, validate, the ontology, the probes: no query in them (test_no_server_errors runs them)
    # uno's run may have shared its query by chance: shared with nobody now
    assert c.put(f"/v1/queries/{theirs}/shared-with", json={"users": []}, headers=users["uno"]).status_code == 200
    on_query = _aim(case, theirs)
    case.headers = {**(case.headers or {}), **users["duo"]}  # duo's token, whatever header the case made up
    response = case.call()
    assert response.status_code < 500, f"{case.method} {case.path}: {response.status_code} {response.text[:300]}"
    if not on_query:  # (a 404 names the id it was asked for)
        assert theirs not in response.text, f"{case.method} {case.path} showed uno's query to duo"
    else:
        try:
            code = response.json().get("code")
        except (ValueError, AttributeError):
            code = None
        status = response.status_code
        allowed = status == 404 and code == "query_not_found" or \
            status in REQUEST_ERRORS and REQUEST_ERRORS[status] in (None, code)
        assert allowed, f"{case.method} {case.path} with duo's token on uno's query: {response.status_code} {code}"
    assert c.get(f"/v1/queries/{theirs}", headers=users["uno"]).status_code == 200  # not deleted by duo
