"""Constant folding of a member's projected SQL expressions of constants only, in Python (both backends answer
the folded value; :mod:`obda.analysis.forest.members`)."""

from __future__ import annotations

from sqlglot import exp

from obda.errors import ExecutionError


def unparen(e: exp.Expression) -> exp.Expression:
    while isinstance(e, exp.Paren):
        e = e.this
    return e


def constant_value(e: exp.Expression):
    """The value of a projected SQL expression of constants only (a literal, or arithmetic, COALESCE, NULLIF and
    casts of them: what a BIND of constants unfolds to); :class:`ExecutionError` for any other (a function of
    constants, which the SQL computes)."""
    if isinstance(e, exp.Literal):
        if e.is_string:
            return e.this
        txt = e.this
        try:
            return int(txt)
        except ValueError:
            return float(txt)
    if isinstance(e, exp.Boolean):
        return bool(e.this)
    if isinstance(e, exp.Null):
        return None
    if isinstance(e, exp.Neg) and isinstance(e.this, exp.Literal):
        return -constant_value(e.this)
    if isinstance(e, exp.Paren):
        return constant_value(e.this)
    if isinstance(e, (exp.Add, exp.Sub, exp.Mul, exp.Div)):  # a computed value a BIND folded to constants
        a, b = constant_value(e.this), constant_value(e.expression)
        if a is None or b is None or (isinstance(e, exp.Div) and b == 0):  # SQL: NULL (the unfolder's NULLIF)
            return None
        return a + b if isinstance(e, exp.Add) else a - b if isinstance(e, exp.Sub) else a * b if isinstance(
            e, exp.Mul) else a / b
    if isinstance(e, (exp.Coalesce, exp.Nullif)):
        values = [constant_value(x) for x in (e.this, *e.expressions)] if isinstance(e, exp.Coalesce) else [
            constant_value(e.this), constant_value(e.expression)]
        if isinstance(e, exp.Nullif):
            return None if values[0] == values[1] else values[0]
        return next((v for v in values if v is not None), None)
    if isinstance(e, (exp.Cast, exp.TryCast)):
        v = constant_value(unparen(e.this))
        to = e.to.this.name if hasattr(e.to.this, "name") else str(e.to.this)
        if v is None:
            return None
        if to in ("TEXT", "VARCHAR", "CHAR", "STRING", "NVARCHAR"):
            return str(v)
        if to in ("INT", "BIGINT", "SMALLINT", "TINYINT"):
            return int(v)
        if to in ("DOUBLE", "FLOAT"):
            return float(v)
    raise ExecutionError(f"unsupported constant expression {e.sql()!r} in the projection")
