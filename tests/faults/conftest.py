"""The fault tests import the service (``api``) as the tests of tests/api do: the repository root first on
``sys.path``, so that ``import api`` is the service package, not the test folder of the same name."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) in sys.path:
    sys.path.remove(str(ROOT))
sys.path.insert(0, str(ROOT))
_early = sys.modules.get("api")
if _early is not None and getattr(_early, "__file__", None) is None:  # the test folder, as a namespace package
    del sys.modules["api"]
