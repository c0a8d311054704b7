"""Where the shared test data lives: ../shared/testdata beside the repository (CI and developers),
or $OBDA_SHARED_DIR."""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _find() -> Path:
    env = os.environ.get("OBDA_SHARED_DIR")
    candidates = [Path(env)] if env else []
    candidates += [ROOT.parent / "shared", Path("/work/shared")]
    for c in candidates:
        if (c / "testdata").is_dir():
            return c
    return candidates[0]


SHARED = _find()
TESTDATA = SHARED / "testdata"
