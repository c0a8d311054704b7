"""The NPD benchmark queries: each parses, or fails with a named, located unsupported construct."""

from __future__ import annotations

from pathlib import Path

import pytest

from obda.errors import UnsupportedConstructError
from obda.model.query import XSD, ClassAtom, Comparison, Literal, Var
from obda.query import parse_query
from shared_data import TESTDATA

NPD = TESTDATA / "npd" / "queries"
NPDV = "http://sws.ifi.uio.no/vocab/npd-v2#"

# file → None (parses) or (construct, text found at the reported position).
EXPECTED: dict[str, tuple[str, str] | None] = {
    "01.rq": None,
    "02.rq": None,
    "03.rq": None,
    "04.rq": None,
    "05.rq": None,
    "06.rq": None,  # (?length AS ?lenghtM) is a rename; ORDER BY of static data orders the answer table
    "07.rq": None,
    "08.rq": None,
    "09.rq": None,
    "10.rq": None,
    "11.rq": None,
    "12.rq": None,
    "13.rq": None,  # OPTIONAL: the join, and the solutions with the optional part unbound (checks)
    "14.rq": None,  # nested OPTIONAL
    "15.rq": None,
    "16.rq": None,
    "17.rq": None,
    "18.rq": None,
    "19.rq": None,
    "20.rq": None,
    "21.rq": None,
    "22.rq": None,
    "23.rq": None,
    "24.rq": None,
    "25.rq": None,
    "26.rq": None,
    "27.rq": None,
    "28.rq": None,
    "29.rq": None,
    "30.rq": None,
    "31.rq": None,
}


def test_every_npd_query_is_classified():
    assert sorted(p.name for p in NPD.glob("*.rq")) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_npd_query(name):
    path = NPD / name
    text = path.read_text()
    expected = EXPECTED[name]
    if expected is None:
        q = parse_query(text, file=str(path))
        assert q.branches and q.projection
        assert q.location.file == str(path)
        # a projected variable some branch leaves unbound is OPTIONAL's (in a branch with a check)
        assert set(q.projection) <= set().union(*(cq.variables for cq in q.branches))
        for cq in q.branches:
            assert set(q.projection) <= cq.variables or cq.checks
            assert not cq.time_variables  # NPD is static
        return
    construct, at = expected
    with pytest.raises(UnsupportedConstructError) as info:
        parse_query(text, file=str(path))
    err = info.value
    assert err.construct == construct
    assert err.location.file == str(path)
    line = text.splitlines()[err.location.line - 1]
    assert line[err.location.column - 1:].startswith(at), (line, err.location)


def test_npd_01_model():
    q = parse_query((NPD / "01.rq").read_text())
    assert q.distinct
    assert q.projection == (Var("licenceURI"), Var("interest"), Var("date"))
    (cq,) = q.branches
    lic = Var("b1", bnode=True)
    assert cq.atoms[0] == ClassAtom(NPDV + "ProductionLicence", Var("licenceURI"))
    assert cq.atoms[1] == ClassAtom(NPDV + "ProductionLicenceLicensee", lic)
    assert [a.predicate[len(NPDV):] for a in cq.atoms[2:]] == [
        "dateLicenseeValidFrom",
        "licenseeInterest",
        "licenseeForLicence",
    ]
    assert cq.filters == (Comparison(">", Var("date"), Literal("1979-12-31", XSD + "date")),)


def test_npd_07_select_star_in_text_order():
    q = parse_query((NPD / "07.rq").read_text())
    assert [v.name for v in q.projection] == ["year", "month", "con", "gas", "NGL", "oil", "maxOE"]
