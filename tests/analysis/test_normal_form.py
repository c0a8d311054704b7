"""SQL → normal form: accepted shapes, disjunction splitting, and clear errors with positions."""

from __future__ import annotations

import pytest
import sqlglot

from obda.analysis import analyze, members_of
from obda.analysis.elements import Attr, Const, Predicate
from obda.errors import AnalysisError


def one(sources, sql):
    (m,) = members_of(sql, sources)
    return m


def preds(m):
    return {str(p) for p in m.predicates}


# ---- accepted shapes -------------------------------------------------------------------------


def test_union_all_and_union(sources):
    ms = members_of("SELECT S.A AS x FROM S UNION ALL SELECT T.D AS x FROM T", sources)
    assert [m.projection_kind for m in ms] == ["bag", "bag"]
    ms = members_of("SELECT S.A AS x FROM S UNION SELECT T.D AS x FROM T", sources)
    assert [m.projection_kind for m in ms] == ["set", "set"]
    assert [m.index for m in ms] == [0, 1]


def test_aliases_comma_and_inner_joins(sources):
    m = one(sources, "SELECT m1.A FROM S AS m1 JOIN T m2 ON m1.B = m2.D INNER JOIN U ON U.F = m2.E, R WHERE R.x = m1.C")
    assert [r.alias for r in m.relations] == ["m1", "m2", "U", "R"]
    assert preds(m) == {"m1.B = m2.D", "U.F = m2.E", "R.x = m1.C"}


def test_unqualified_columns_resolved(sources):
    m = one(sources, "SELECT A FROM S, U WHERE B < H")
    assert m.projected_attrs == (Attr("S", "A"),)
    assert preds(m) == {"S.B < U.H"}


def test_comparison_operators_normalised(sources):
    m = one(sources, "SELECT S.A FROM S, T WHERE S.A > T.D AND S.B >= 3 AND 5 <= S.C AND S.A != 2 AND S.B <> T.E")
    assert preds(m) == {"T.D < S.A", "3 <= S.B", "5 <= S.C", "S.A != 2", "S.B != T.E"}


def test_between_and_timestamp_constants(sources):
    m = one(sources, "SELECT S.A FROM S WHERE S.A BETWEEN 1 AND 4 AND S.t1 < CAST('2024-01-01 00:00:00' AS TIMESTAMP) "
                     "AND S.t1 >= TIMESTAMP '2023-06-01T12:00:00Z'")
    ps = {str(p) for p in m.predicates}
    assert "1 <= S.A" in ps and "S.A <= 4" in ps
    ts = [p for p in m.predicates if isinstance(p.right, Const) and p.right.domain == "timestamp"
          or isinstance(p.left, Const) and p.left.domain == "timestamp"]
    assert len(ts) == 2


def test_in_list_splits_into_exclusive_members(sources):
    ms = members_of("SELECT S.A FROM S, T WHERE S.A IN (1, 2, 3) AND S.B = T.D", sources)
    assert len(ms) == 3 and {m.disjunct[1] for m in ms} == {3}
    assert [[str(p) for p in m.predicates if "S.A" in str(p)] for m in ms] == [["S.A = 1"], ["S.A = 2"], ["S.A = 3"]]


def test_or_split_dnf_set_and_exclusive_bag(sources):
    sql = "SELECT {d}S.A FROM S, T WHERE S.B = T.D AND (S.A = 1 OR T.E < 4)"
    set_ms = members_of(sql.format(d="DISTINCT "), sources)
    assert [preds(m) for m in set_ms] == [{"S.B = T.D", "S.A = 1"}, {"S.B = T.D", "T.E < 4"}]
    bag_ms = members_of(sql.format(d=""), sources)
    # bag: the second disjunct excludes the first so multiplicities are kept
    assert preds(bag_ms[1]) == {"S.B = T.D", "T.E < 4", "S.A != 1"}


def test_not_pushed_to_atoms(sources):
    m = one(sources, "SELECT S.A FROM S WHERE NOT (S.A < 3 OR S.B = 4)")
    assert preds(m) == {"3 <= S.A", "S.B != 4"}


def test_is_not_null_accepted(sources):
    m = one(sources, "SELECT S.A FROM S WHERE S.A IS NOT NULL AND NOT S.B IS NULL AND S.C > 0")
    assert preds(m) == {"0 < S.C"}


def test_iri_template_projection(sources):
    m = one(sources, "SELECT CONCAT('http://ex.org/t/', CAST(m1.A AS VARCHAR), '/', CAST(m1.B AS VARCHAR)) AS t, "
                     "'http://ex.org/x' || CAST(m1.C AS VARCHAR) AS u, 'lit' AS c, 42 AS n FROM S m1")
    kinds = [(p.name, p.kind, tuple(map(str, p.attrs))) for p in m.projection]
    assert kinds == [("t", "template", ("m1.A", "m1.B")), ("u", "template", ("m1.C",)),
                     ("c", "constant", ()), ("n", "constant", ())]


def test_projected_timestamps_are_values(sources):
    """docs/analysis.md, "Projected times": a stream's timestamp in the output, alone or in a template."""
    m = one(sources, "SELECT S.t1 AS t, CONCAT('x', CAST(S.t1 AS VARCHAR)) AS u, R.since AS s FROM S, R")
    assert [tuple(map(str, p.attrs)) for p in m.projection] == [("S.t1",), ("S.t1",), ("R.since",)]
    assert [tuple(map(str, p.times)) for p in m.projection] == [("S.t1",), ("S.t1",), ()]  # R is static


def test_integer_column_vs_decimal_constant_is_tightened(sources):
    m = one(sources, "SELECT S.A FROM S WHERE S.A < 5.5 AND S.B > 2.5")
    assert preds(m) == {"S.A <= 5", "3 <= S.B"}
    m = one(sources, "SELECT S.A FROM S WHERE S.A = 5.5")
    assert m.contradiction


def test_constant_comparisons_and_unsatisfiable(sources):
    r = analyze("SELECT S.A FROM S, T WHERE 1 = 0 AND S.A = T.D", sources)
    assert r.verdict == "bounded" and r.members[0].criterion == "unsatisfiable"
    r = analyze("SELECT S.A FROM S, T WHERE S.A > 3 AND S.A < 4 AND S.A = T.D", sources)  # no integer in (3, 4)
    assert r.members[0].criterion == "unsatisfiable"
    r = analyze("SELECT M.sensor FROM M, T WHERE M.value > 3 AND M.value < 4 AND M.sensor = T.D", sources)
    assert r.members[0].criterion != "unsatisfiable"  # decimals: (3, 4) is not empty


def test_sqlglot_expression_input(sources):
    e = sqlglot.parse_one("SELECT S.A FROM S, T WHERE T.t2 < S.t1")
    assert analyze(e, sources).verdict == "bounded"


def test_predicate_make_flips():
    p = Predicate.make(Attr("S", "A"), ">", Const("numeric", 3, "3"))
    assert (p.left, p.op, p.right) == (Const("numeric", 3, "3"), "<", Attr("S", "A"))


# ---- errors: message and position ------------------------------------------------------------


def err(sources, sql) -> AnalysisError:
    with pytest.raises(AnalysisError) as e:
        analyze(sql, sources)
    return e.value


@pytest.mark.parametrize("sql,words,line,col", [
    ("SELECT S.A FROM WHERE S.A = 1", "malformed SQL", 1, 17),
    ("SELECT S.A FROM S WHERE S.A = ", "malformed SQL", None, None),
    ("SELECT S.A FROM Nope", "unknown table 'Nope'", 1, 17),
    ("SELECT S.Z FROM S", "unknown column 'Z' of table 'S'", 1, 8),
    ("SELECT S.A FROM S WHERE\n  S.Q = 1", "unknown column 'Q'", 2, 3),
    ("SELECT x.A FROM S", "unknown table or alias 'x'", 1, 8),
    ("SELECT F FROM T, U", "ambiguous column 'F'", 1, 8),
    ("SELECT S.A FROM S WHERE S.t1 < 5", "type error", 1, 25),
    ("SELECT S.A FROM S WHERE S.A < TIMESTAMP '2024-01-01 00:00:00'", "type error", 1, 25),
    ("SELECT S.A FROM S, T WHERE S.t1 = T.D", "timestamp attribute S.t1", 1, 28),
    ("SELECT S.A FROM S WHERE S.t1 < '2024-01-01'", "timestamps are compared only with timestamps", 1, 25),
    ("SELECT S.A FROM S, M WHERE S.A = M.label", "type error", 1, 28),
    ("SELECT S.A FROM S, T WHERE CONCAT('x', CAST(S.A AS VARCHAR)) = CONCAT('y', CAST(T.D AS VARCHAR))",
     "not instances of one template", 1, 28),
    ("SELECT S.A FROM S, T WHERE CONCAT('x', CAST(S.A AS VARCHAR)) = CONCAT('x', CAST(T.t2 AS VARCHAR))",
     "not instances of one template", 1, 28),
    ("SELECT S.A FROM S, T WHERE NOT CONCAT('x', CAST(S.A AS VARCHAR), '_', CAST(S.B AS VARCHAR)) = "
     "CONCAT('x', CAST(T.D AS VARCHAR), '_', CAST(T.E AS VARCHAR))", "a disequality of two terms of one template", 1, 32),
    ("SELECT S.A FROM (SELECT * FROM S) AS q", "derived table", None, None),
    ("SELECT S.A FROM S WHERE S.A IN (SELECT T.D FROM T)", "subquery", None, None),
    ("SELECT S.A FROM S LEFT JOIN T ON S.A = T.D", "LEFT JOIN", None, None),
    ("SELECT S.A, COUNT(*) FROM S GROUP BY S.A", "GROUP BY", None, None),
    ("SELECT COUNT(S.A) FROM S", "aggregate", None, None),
    ("SELECT S.A FROM S LIMIT 3", "LIMIT", None, None),
    ("SELECT S.A FROM S ORDER BY S.A", "ORDER BY", None, None),
    ("SELECT ROW_NUMBER() OVER (ORDER BY S.A) FROM S", "window function", None, None),
    ("SELECT M.sensor FROM M WHERE M.label LIKE 'a%'", "LIKE", None, None),
    ("SELECT S.A FROM S WHERE S.A IS NULL", "IS NULL", None, None),
    ("SELECT * FROM S", "SELECT *", None, None),
    ("SELECT S.A FROM S INTERSECT SELECT T.D FROM T", "INTERSECT", None, None),
    ("SELECT S.A FROM S, S", "used twice", None, None),
    ("WITH q AS (SELECT S.A FROM S) SELECT q.A FROM q", "WITH", None, None),
    # NATURAL JOIN was read as a cross product (no join condition: wrong answers, a wrong verdict)
    ("SELECT S.A FROM S NATURAL JOIN T", "NATURAL JOIN is not supported", 1, 32),  # at the joined table
    ("SELECT S.A FROM S JOIN T USING (A)", "JOIN ... USING is not supported", 1, 24),
])
def test_errors(sources, sql, words, line, col):
    e = err(sources, sql)
    assert words in e.message, e.message
    if line is not None:
        assert (e.location.line, e.location.column) == (line, col), e
    assert e.code == "analysis_error" and e.to_dict()["message"] == e.message


def test_error_positions_point_at_the_construct(sources):
    sql = "SELECT m1.A\nFROM S m1, T m2\nWHERE m1.B = m2.D AND m2.t2 < 7"
    e = err(sources, sql)
    assert (e.location.line, e.location.column) == (3, 23)
    assert sql.splitlines()[2][22:].startswith("m2.t2")


def test_missing_sources():
    with pytest.raises(AnalysisError, match="sources catalog"):
        analyze("SELECT 1", None)


@pytest.mark.parametrize("cond,atom", [
    ("S.A * 2 + 1 < 7", "S.A < 3"),
    ("((CAST(((S.A * 9)) AS DOUBLE) / NULLIF((5), 0)) + 32) > 200", "94 <= S.A"),  # a BIND's value, integers
    ("(S.A - 10) * -2 >= 4", "S.A <= 8"),
    ("3 > S.A / 4", "S.A < 12"),
])
def test_linear_arithmetic_of_one_column_is_solved(sources, cond, atom):
    """A BIND's number compared with a constant (NPD's ``?l * 0.3048 > 50``) is an LTO atom on the column."""
    m = one(sources, f"SELECT S.B FROM S WHERE {cond}")
    assert [str(p) for p in m.predicates] == [atom]
