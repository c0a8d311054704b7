"""The W3C SPARQL 1.1 query evaluation tests of the patterns obda accepts beyond basic graph patterns (issue 27):
property paths with inverses and alternatives (``property-path``, pp30–pp33) and ``VALUES`` (``bindings``).

Run like ``test_w3c_functions.py`` (``runner.py``: the test's data through a generated R2RML mapping, obda's
SQL on DuckDB, the expected results compared as bags), printing passed / failed / refused per manifest.
The other tests of these manifests use what obda refuses (a variable predicate, repetition paths, negated
property sets, OPTIONAL, a subquery, a named graph IRI).
"""

from __future__ import annotations

from collections import Counter

import pytest

from w3c.runner import SUITE, manifest_tests, report, run

SELECTED = {
    "property-path": {"pp30", "pp31", "pp32", "pp33"},  # :p1|:p2/:p3|:p4, (:p1|:p2)/(:p3|:p4), ^:p1 in both
    "bindings": {"values1", "values8", "inline1"},  # a trailing VALUES (with UNDEF), VALUES inside the group
}


@pytest.fixture(scope="module")
def outcomes():
    outs = [run(t) for manifest, names in SELECTED.items()
            for t in manifest_tests(SUITE / manifest / "manifest.ttl", names)]
    print("\n" + report(outs))
    return outs


def test_every_selected_test_is_vendored(outcomes):
    found = Counter(o.test.manifest for o in outcomes)
    assert found == Counter({m: len(n) for m, n in SELECTED.items()})


def test_every_selected_test_passes(outcomes):
    assert all(o.status == "passed" for o in outcomes), report([o for o in outcomes if o.status != "passed"])
