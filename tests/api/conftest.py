"""Fixtures of the API tests: a fresh copy of the demo project with fed data, an app, a client.

The test folder is called ``api`` like the service package; this folder is not a
package, and the repository root goes first on ``sys.path`` so ``import api``
is the service.  Helpers live in ``apikit`` (this folder, put on the path).
"""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
for p in (str(HERE), str(HERE.parents[1])):
    if p in sys.path:
        sys.path.remove(p)
    sys.path.insert(0, p)
_early = sys.modules.get("api")
if _early is not None and HERE in Path(getattr(_early, "__file__", None) or HERE).parents:
    del sys.modules["api"]  # something imported this folder as `api` before: forget it
with warnings.catch_warnings():  # starlette's TestClient warns about httpx at import; import it once, quietly
    warnings.simplefilter("ignore")
    import fastapi.testclient  # noqa: F401

from api import create_app  # noqa: E402
from apikit import AUTH, make_workspace, settings_for  # noqa: E402


@pytest.fixture(scope="session")
def workspace(tmp_path_factory) -> Path:
    """A copy of the demo project with static tables and one block of stream rows (read-only for tests)."""
    ws, _ = make_workspace(tmp_path_factory.mktemp("ws"))
    return ws


@pytest.fixture(scope="session")
def app(workspace):
    return create_app(settings_for(workspace))


@pytest.fixture()
def client(app):
    """A TestClient on the shared app; registered queries are deleted afterwards."""
    from fastapi.testclient import TestClient

    with TestClient(app) as c:
        yield c
        for q in c.get("/v1/queries", headers=AUTH).json()["queries"]:
            c.delete(f"/v1/queries/{q['id']}", headers=AUTH)
