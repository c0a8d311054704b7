"""The local backend's per-row evaluator (``obda.execution.rows.evaluate``) against DuckDB, NULLs included.

Conditions a mapping's ``rr:sqlQuery`` may hold, and those the executor writes itself (``NOT COALESCE(a, FALSE)``
of the disjunction split): an ``IN`` list of columns, ``CASE x WHEN v``, ``BETWEEN``, ``IS TRUE`` / ``IS FALSE``.
Every combination of NULL and non-NULL values of three integer columns; DuckDB computes the same expression.
"""

from __future__ import annotations

import itertools

import duckdb
import pytest
import sqlglot

from obda.execution.rows import evaluate

EXPRESSIONS = [
    "a IN (b, c)",
    "NOT a IN (b, c)",
    "a IN (b, 2)",
    "a IN (1, 2)",
    "CASE a WHEN 1 THEN 'one' WHEN b THEN 'b' ELSE 'else' END",
    "CASE WHEN a > b THEN 1 ELSE 0 END",
    "a BETWEEN b AND c",
    "NOT a BETWEEN 1 AND c",
    "(a > b) IS TRUE",
    "(a > b) IS FALSE",
    "NOT (a > b) IS TRUE",
    "a IS NULL",
    "NOT COALESCE(a = b AND b < c, FALSE)",
    "a = b AND b < c",
    "a = b OR b < c",
]

VALUES = (None, 1, 2, 3)


@pytest.mark.parametrize("text", EXPRESSIONS)
def test_the_evaluator_agrees_with_duckdb_on_every_null_combination(text):
    tree = sqlglot.parse_one(text)
    con = duckdb.connect()
    for a, b, c in itertools.product(VALUES, repeat=3):
        row = {"a": a, "b": b, "c": c}
        (expected,) = con.execute(f"SELECT {text} FROM (SELECT ?::INTEGER AS a, ?::INTEGER AS b, ?::INTEGER AS c)",
                                  [a, b, c]).fetchone()
        assert evaluate(tree, row) == expected, (text, row, expected)


DECIMAL_EXPRESSIONS = ["d = 2.33", "d < 2.33", "d >= 2.33", "d IN (2.33, 4.83)", "d + 0.1 + 0.2 = 2.63", "d * 2 <> 4.66",
                       "x = 2.33", "x < 2.34", "x IN (2.33, 1)", "x = d", "d BETWEEN 2.3 AND 2.33"]


@pytest.mark.parametrize("text", DECIMAL_EXPRESSIONS)
def test_decimal_and_double_values_compare_as_duckdb_compares_them(text):
    """A decimal literal is an exact DECIMAL (it was read as a double: ``2.33 = 2.33`` was false against a decimal
    column, so a capacity filter dropped or kept the wrong rows); a decimal with a double compares as doubles."""
    from decimal import Decimal

    tree = sqlglot.parse_one(text)
    con = duckdb.connect()
    for d, x in ((Decimal("2.33"), 2.33), (Decimal("4.83"), 2.5), (Decimal("2.30"), 1.0)):
        (expected,) = con.execute(f"SELECT {text} FROM (SELECT ?::DECIMAL(10, 2) AS d, ?::DOUBLE AS x)",
                                  [d, x]).fetchone()
        assert evaluate(tree, {"d": d, "x": x}) == expected, (text, d, x, expected)


@pytest.mark.parametrize("text", ["CEIL(x)", "FLOOR(x)", "FLOOR(x + 0.5)"])
def test_ceil_and_floor_of_nan_and_infinities_are_themselves_as_in_duckdb(text):
    """The reader accepts NaN and INF in a double column; CEIL of them stopped the run (an internal ValueError)."""
    import math

    con = duckdb.connect()
    for x in (float("nan"), float("inf"), float("-inf"), 2.5):
        (expected,) = con.execute(f"SELECT {text} FROM (SELECT ?::DOUBLE AS x)", [x]).fetchone()
        got = evaluate(sqlglot.parse_one(text), {"x": x})
        assert (math.isnan(got) and math.isnan(expected)) or got == expected, (text, x, got, expected)
