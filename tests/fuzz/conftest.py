"""Fixtures of the fuzz tests: the seeds' folder on the path, and the HTTP service for the API's JSON bodies.

As in ``tests/api/conftest.py``: the repository root goes first on ``sys.path`` so ``import api`` is the
service (not the test folder ``tests/api``), whose helpers (``apikit``, ``userkit``) are put on the path too.
"""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
API_TESTS = HERE.parent / "api"
for p in (str(API_TESTS), str(HERE), str(HERE.parents[1])):
    if p in sys.path:
        sys.path.remove(p)
    sys.path.insert(0, p)
_early = sys.modules.get("api")
if _early is not None and API_TESTS in Path(getattr(_early, "__file__", None) or HERE).parents:
    del sys.modules["api"]  # the test folder was imported as `api` before: forget it
with warnings.catch_warnings():  # starlette's TestClient warns about httpx at import; import it once, quietly
    warnings.simplefilter("ignore")
    from fastapi import testclient

assert testclient.TestClient


@pytest.fixture(scope="module")
def service(tmp_path_factory):
    """The service on the demo project, with an operator and a reader; yields (client, headers, id of an
    operator's query)."""
    from fastapi.testclient import TestClient

    from api import create_app
    from apikit import BOUNDED, DEMO, settings_for
    from userkit import make_users

    base = tmp_path_factory.mktemp("fuzz-api")
    users = make_users(base / "users.json", {"alice": "operator", "rita": "reader"})
    # the demo project as it is: analysing and registering read its files, write nothing (no query is started)
    app = create_app(settings_for(DEMO, users_file=base / "users.json", rate_limit=0, max_registered=1000))
    with TestClient(app) as c:
        r = c.post("/v1/queries", json={"name": "target", "query": BOUNDED}, headers=users["alice"])
        assert r.status_code == 201, r.text
        yield c, users, r.json()["id"]
