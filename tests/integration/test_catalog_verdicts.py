"""Evidence: every demo catalog query gets its expected verdict (issue 3, item 3)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from obda.analysis import analyze
from obda.catalog import check_entry, load_catalog
from obda.project import Project

ROOT = Path(__file__).resolve().parents[2]
ENTRIES = load_catalog(ROOT / "catalogs" / "demo.yaml")


@pytest.fixture(scope="module")
def project():
    return Project.load(ROOT / "demo")


@pytest.mark.parametrize("entry", ENTRIES, ids=[e.name for e in ENTRIES])
def test_expected_verdict(project, entry):
    assert entry.expected, f"{entry.name} has no expect.verdict"
    res = check_entry(project, entry)
    assert res.error is None, res.error
    assert res.verdict == entry.expected, f"{entry.name}: expected {entry.expected}, got {res.verdict} ({entry.why})"


def test_catalog_covers_each_verdict_for_bags_and_sets(project):
    kinds = Counter()
    for e in ENTRIES:
        comp = project.compile(e.query)
        verdict = analyze(comp, project.sources).verdict
        kinds[("set" if comp.distinct else "bag", getattr(verdict, "value", verdict))] += 1
    for proj in ("bag", "set"):
        assert kinds[(proj, "bounded")] and kinds[(proj, "unbounded")], kinds
    assert kinds[("set", "not_shown")], kinds
    assert len(ENTRIES) >= 15
