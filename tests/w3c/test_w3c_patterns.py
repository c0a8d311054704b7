"""The W3C SPARQL 1.1 query evaluation tests of the patterns obda accepts beyond basic graph patterns (issue 27):
property paths with inverses and alternatives (``property-path``, pp30–pp33) and ``VALUES`` (``bindings``).

Run like ``test_w3c_functions.py`` (``runner.py``: the test's data through a generated R2RML mapping, obda's
SQL on DuckDB, the expected results compared as bags), printing passed / failed / refused per manifest.
The other tests of these manifests use what obda refuses (repetition paths, negated property sets, OPTIONAL, a
subquery, a named graph IRI).
"""

from __future__ import annotations

import pytest

from w3c.runner import report, run_selected

SELECTED = {
    "property-path": {"pp30", "pp31", "pp32", "pp33"},  # :p1|:p2/:p3|:p4, (:p1|:p2)/(:p3|:p4), ^:p1 in both
    # a trailing VALUES (with UNDEF), VALUES inside the group; values2-6 join it with variable predicates
    "bindings": {"values1", "values2", "values3", "values4", "values5", "values6", "values8", "inline1"},
}


@pytest.fixture(scope="module")
def outcomes():
    return run_selected(SELECTED)  # prints the report; every selected test is vendored


def test_every_selected_test_passes(outcomes):
    assert all(o.status == "passed" for o in outcomes), report([o for o in outcomes if o.status != "passed"])
