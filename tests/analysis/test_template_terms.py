"""Terms built from templates (docs/analysis.md, "Terms built from templates"): Rule 3 — a whole-term equality
over one template is read as the equality of its columns, except where that would bound a column the term
does not; Rule 4 — a template against a constant is the disjunction of the constant's parses."""

from __future__ import annotations

import pytest

from obda.analysis import analyze, members_of
from obda.analysis.criteria import check_polynomial
from obda.analysis.elements import Attr
from obda.analysis.naive import check_naive
from obda.analysis.preprocess import preprocess
from obda.analysis.report import combine
from obda.model.sources_file import parse_sources

SOURCES = parse_sources("""
tables:
  A: {kind: stream, timestamp: ts, columns: {x: string, y: string, n: integer, ts: timestamp}}
  B: {kind: stream, timestamp: ts, columns: {x: string, y: string, n: integer, ts: timestamp}}
  C: {kind: stream, timestamp: ts, columns: {k: integer, ts: timestamp}}
  R: {kind: static, columns: {x: string, y: string}}
""", "templates.yaml")

SA = "CONCAT('s_', a.x, '_', a.y)"
SB = "CONCAT('s_', b.x, '_', b.y)"


def both(sql: str) -> str:
    """The verdict of both checkers on every part (they must agree)."""
    poly, naive = [], []
    for m in members_of(sql, SOURCES):
        for mq in preprocess(m):
            p = check_polynomial(mq).verdict if mq.satisfiable else "bounded"
            n = check_naive(mq).verdict if mq.satisfiable else "bounded"
            poly.append(p)
            naive.append(n)
    assert combine(poly) == combine(naive), sql
    return combine(poly)


def test_a_whole_term_equality_is_the_equality_of_its_columns():
    (m,) = members_of(f"SELECT a.n FROM A a, R r WHERE {SA} = CONCAT('s_', r.x, '_', r.y)", SOURCES)
    assert {str(p) for p in m.predicates} == {"a.x = r.x", "a.y = r.y"}
    assert m.templates == (((Attr("a", "x"), Attr("r", "x")), (Attr("a", "y"), Attr("r", "y"))),)
    assert both(f"SELECT a.n FROM A a, R r WHERE {SA} = CONCAT('s_', r.x, '_', r.y)") == "bounded"


# {A, B} are one unit (equal timestamps), a child of C; a.x is projected, so it must be bounded (Theorem 1 C3)
MIXED = (f"SELECT a.x FROM A a, B b, C c WHERE a.ts = b.ts AND a.ts < c.ts AND {SA} = {SB} AND b.x = 'k'")


def test_a_column_bounded_through_part_of_a_term_is_not_bounded():
    """b.x = 'k' with b.y free bounds nothing of a's term ('k_1' + '2' and 'k' + '1_2' are one term): the
    column reading would call the member bounded; the analysis reads the terms as opaque values there."""
    report = analyze(MIXED, SOURCES)
    assert report.verdict == "unbounded" and both(MIXED) == "unbounded"
    (v,) = [v for m in report.members for v in m.violations]
    assert v.kind == "projection" and v.attributes == ("a.x",)
    (mq,) = preprocess(members_of(MIXED, SOURCES)[0])
    assert mq.whole_terms == (0,)
    assert any("term(x, y)" in str(e) for t in mq.value_atoms for e in (t[0], t[2]))


def test_a_term_bounded_as_a_whole_keeps_the_column_reading():
    sql = MIXED + " AND b.y = 'z'"
    assert analyze(sql, SOURCES).verdict == "bounded" and both(sql) == "bounded"
    (mq,) = preprocess(members_of(sql, SOURCES)[0])
    assert mq.whole_terms == ()


@pytest.mark.parametrize("const,parses", [
    ("s_p_q_r", [{"a.x = 'p'", "a.y = 'q_r'"}, {"a.x = 'p_q'", "a.y = 'r'"}]),
    ("s_p_q", [{"a.x = 'p'", "a.y = 'q'"}]),
    ("t_p_q", []),  # the fixed text never matches: no answer
])
def test_a_template_against_a_constant_is_the_disjunction_of_its_parses(const, parses):
    sql = f"SELECT a.n FROM A a WHERE {SA} = '{const}'"
    ms = members_of(sql, SOURCES)
    got = [{str(p) for p in m.predicates if "!=" not in str(p)} for m in ms if not m.contradiction]
    assert got == parses
    assert analyze(sql, SOURCES).verdict == "bounded"


def test_template_constants_take_the_column_types():
    (m,) = members_of("SELECT c.k FROM C c WHERE CONCAT('e_', CAST(c.k AS VARCHAR), '_x') = 'e_12_x'", SOURCES)
    assert {str(p) for p in m.predicates} == {"c.k = 12"}
    (m,) = members_of("SELECT c.k FROM C c WHERE CONCAT('e_', CAST(c.k AS VARCHAR), '_x') = 'e_012_x'", SOURCES)
    assert m.contradiction  # 012 is no integer's text
    ms = members_of("SELECT c.k FROM C c WHERE CONCAT('e_', CAST(c.k AS VARCHAR), '_x') <> 'e_12_x'", SOURCES)
    assert [{str(p) for p in m.predicates} for m in ms] == [{"c.k != 12"}]
