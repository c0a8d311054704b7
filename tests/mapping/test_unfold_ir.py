"""The light expressions of unfolding print exactly what sqlglot prints for the same tree.

Duplicate detection, simplification and removal messages compare conditions by
their text, so the template of every node (``Expr.sql()`` / ``Expr.render``)
must equal sqlglot's SQL of ``Expr.to_sqlglot()`` — checked here against
sqlglot itself (the oracle), on generated expressions and on parsed conditions.
"""

from __future__ import annotations

import sqlglot
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlglot import exp

from obda.mapping._unfold_ir import Cmp, Col, NotAll, NotNull, fast_copy
from obda.mapping._unfold_read import const, flatten_conjuncts, from_sqlglot
from obda.mapping._unfold_text import Cast, Concat, Encode

ALIASES = ["m1", "m2", "m3"]
names = st.sampled_from(["id", "wlbName", "my col", "1st", "Select", 'q"uote'])
aliases = st.sampled_from(ALIASES)
texts = st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=0x2FF), max_size=8)

constants = st.one_of(
    texts.map(lambda t: const(exp.Literal.string(t))),
    st.integers(-10**6, 10**6).map(lambda n: const(exp.Literal.number(n))),
    st.booleans().map(lambda b: const(exp.Boolean(this=b))),
    st.just(const(exp.cast(exp.Literal.string("2024-01-01 00:00:00"), exp.DataType.build("TIMESTAMP")))),
)
columns = st.builds(Col, aliases, names)
scalars = st.recursive(
    st.one_of(columns, constants),
    lambda inner: st.one_of(
        st.builds(Cast, inner),
        st.builds(Encode, inner),
        st.lists(inner, min_size=2, max_size=4).map(lambda xs: Concat(tuple(xs))),
    ),
    max_leaves=4,
)
ops = st.sampled_from(["=", "!=", "<", "<=", ">", ">="])
comparisons = st.builds(Cmp, ops, scalars, scalars)
conditions = st.one_of(
    comparisons,
    st.builds(NotNull, scalars),
    st.lists(comparisons, min_size=1, max_size=3).map(lambda cs: NotAll(tuple(cs))),
)
renamings = st.dictionaries(st.sampled_from(ALIASES), st.sampled_from(["m7", "__c1", "x"]))


@settings(max_examples=120, deadline=None)
@given(conditions, renamings)
def test_template_text_equals_sqlglot_text(e, ren):
    assert e.sql() == e.to_sqlglot().sql()
    assert e.render(ren) == e.to_sqlglot(ren).sql()
    assert e.rename(ren).sql() == e.render(ren)
    assert e.rename(ren).to_sqlglot().sql() == e.to_sqlglot(ren).sql()


@settings(max_examples=40, deadline=None)
@given(conditions)
def test_output_trees_are_fresh(e):
    a, b = e.to_sqlglot(), e.to_sqlglot()
    assert a == b and all(x is not y for x, y in zip(a.walk(), b.walk()))


CONDITIONS = [
    "t.a = 1",
    "t.a <> 'it''s'",
    "5 < t.a",
    "t.a IS NOT NULL",
    "NOT t.a IS TRUE",
    "t.a = -3",
    "t.a >= CAST('2020-01-01' AS TIMESTAMP)",
    "(t.a = 1 OR u.b = 2)",
    "t.a IN (1, 2, 3) AND (u.b LIKE 'x%' AND t.c BETWEEN 1 AND 4)",
    "UPPER(t.a) = u.\"Mixed Col\"",
    "COALESCE(t.a, u.b) = 'zq0x'",
    "t.a = 'zq0x0zq0x.'",
    "NOT (t.a = 1 AND u.b = 2)",
]


def test_parsed_conditions_keep_their_text_and_structure():
    for text in CONDITIONS:
        tree = sqlglot.parse_one(text)
        for part in flatten_conjuncts(tree):
            light = from_sqlglot(part, lambda q: {"t": "m1", "u": "m2"}[q])
            oracle = part.transform(
                lambda n: exp.column(exp.to_identifier(n.name), table=exp.to_identifier({"t": "m1", "u": "m2"}[n.table]))
                if isinstance(n, exp.Column) and n.table else n
            )
            assert light.sql() == oracle.sql(), text
            assert light.to_sqlglot() == oracle, text
            assert light.render({"m1": "m9"}) == light.to_sqlglot({"m1": "m9"}).sql(), text


def test_comparisons_and_null_checks_are_recognised():
    (cmp,) = [from_sqlglot(p, str) for p in flatten_conjuncts(sqlglot.parse_one("5 < t.a"))]
    assert isinstance(cmp, Cmp) and cmp.op == "<" and cmp.left.value == ("n", 5) and isinstance(cmp.right, Col)
    assert isinstance(from_sqlglot(sqlglot.parse_one("t.a IS NOT NULL")), NotNull)
    raw = from_sqlglot(sqlglot.parse_one("NOT t.a IS TRUE"))
    assert raw.not_is is not None and raw.not_is.sql() == "t.a"
    assert [c.sql() for c in flatten_conjuncts(sqlglot.parse_one("(a = 1 AND (b = 2)) AND ((c = 3 AND d = 4))"))] == [
        "a = 1", "b = 2", "c = 3", "d = 4"]


def test_fast_copy_equals_copy():
    for text in ["SELECT 1", "x", "'a'", "CAST('2020-01-01' AS TIMESTAMP)", "t AS m1", "-- c\nSELECT a FROM t"]:
        tree = sqlglot.parse_one(text)
        c = fast_copy(tree)
        assert c == tree.copy() and c.sql() == tree.sql() and c is not tree
