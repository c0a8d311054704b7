"""Property-based tests from the OpenAPI document (schemathesis): no input makes the service fail.

Every operation gets a small, bounded number of generated requests, sent
with the bearer token; each response must not be a server error, must use a
documented status code and content type, and must match its documented
schema.  Operations on one query get the id of a registered query (so
paging, start and stop run against a real one), except the live stream
(which would follow a running query forever) and DELETE.
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
from apikit import AUTH, BOUNDED, settings_for

CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]


@pytest.fixture(scope="module")
def fuzzed(workspace):
    """A fresh app with one registered query; its executors are stopped at the end."""
    app = create_app(settings_for(workspace, max_running=1))
    with TestClient(app) as c:
        r = c.post("/v1/queries", json={"name": "fuzz-target", "query": BOUNDED, "idle_timeout": 1}, headers=AUTH)
        assert r.status_code == 201
        yield app, r.json()["id"]


@pytest.fixture()
def api_schema(fuzzed):
    return schemathesis.openapi.from_asgi("/openapi.json", fuzzed[0])


schema = schemathesis.pytest.from_fixture("api_schema")


@schema.parametrize()
@settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
def test_no_server_errors(case, fuzzed):
    if "{query_id}" in case.path and case.method != "DELETE" and not case.path.endswith("/stream"):
        if isinstance(case.path_parameters, dict) and "query_id" in case.path_parameters:
            case.path_parameters["query_id"] = fuzzed[1]
    case.call_and_validate(headers=AUTH, checks=CHECKS)
