"""Arithmetic in conditions: ``+ - * /`` over one column and numbers as a linear form, solved exactly.

``f(col) op c`` with ``f`` linear (a BIND's number compared with a constant) becomes ``col op' c'`` over the
rationals (:meth:`Arithmetic._solve`); casts to a number type and ``NULLIF(x, 0)`` of a non-zero constant are
transparent.  :func:`_arith_columns` names the columns of such an expression (a projected BIND's value).
"""

from __future__ import annotations

from fractions import Fraction

from sqlglot import exp

from obda.analysis.conditions import _compare
from obda.analysis.elements import FLIP, NUMERIC, Const
from obda.analysis.sql_reading import SelectReading, _snippet

_ARITH = (exp.Add, exp.Sub, exp.Mul, exp.Div)


def _number_literal(e: exp.Expression) -> Fraction | None:
    e = e.unnest()
    if isinstance(e, exp.Neg):
        v = _number_literal(e.this)
        return None if v is None else -v
    if isinstance(e, exp.Literal) and not e.is_string:
        try:
            return Fraction(e.this)
        except ValueError:
            return None
    return None


def _linear(e: exp.Expression):
    """``e`` as ``a·col + b`` (``(column node or None, a, b)``, rationals), or None when it is not linear in at
    most one column. Casts to a number type and ``NULLIF(x, 0)`` of a non-zero constant are transparent."""
    e = e.unnest()
    if isinstance(e, exp.Column):
        return e, Fraction(1), Fraction(0)
    v = _number_literal(e)
    if v is not None:
        return None, Fraction(0), v
    if isinstance(e, exp.Cast) and e.to.is_type(*exp.DataType.NUMERIC_TYPES):
        return _linear(e.this)
    if isinstance(e, exp.Nullif) and _number_literal(e.expression) == 0:
        inner = _linear(e.this)
        return inner if inner is not None and inner[0] is None and inner[2] != 0 else None
    if isinstance(e, (exp.Add, exp.Sub)):
        l, r = _linear(e.this), _linear(e.expression)
        if l is None or r is None or (l[0] is not None and r[0] is not None):
            return None
        sign = 1 if isinstance(e, exp.Add) else -1
        return (l[0] if l[0] is not None else r[0]), l[1] + sign * r[1], l[2] + sign * r[2]
    if isinstance(e, exp.Mul):
        l, r = _linear(e.this), _linear(e.expression)
        if l is None or r is None or (l[0] is not None and r[0] is not None):
            return None
        const, lin = (l, r) if l[0] is None else (r, l)
        return lin[0], lin[1] * const[2], lin[2] * const[2]
    if isinstance(e, exp.Div):
        l, r = _linear(e.this), _linear(e.expression)
        if l is None or r is None or r[0] is not None or r[2] == 0:
            return None
        return l[0], l[1] / r[2], l[2] / r[2]
    return None


def _arith_columns(e: exp.Expression) -> list[exp.Column] | None:
    """The columns of ``+ - * /`` over columns and numbers (casts and NULLIF included), or None."""
    e = e.unnest()
    if isinstance(e, exp.Column):
        return [e]
    if _number_literal(e) is not None:
        return []
    if isinstance(e, (exp.Cast, exp.Neg)):
        return _arith_columns(e.this)
    if isinstance(e, (exp.Nullif, *_ARITH)):
        l, r = _arith_columns(e.this), _arith_columns(e.expression)
        return None if l is None or r is None else l + r
    return None


class Arithmetic(SelectReading):
    """Linear arithmetic of one SELECT's conditions."""

    def _one_column(self, left: exp.Expression, right: exp.Expression) -> bool:
        """Both sides linear in one column together (the paper's atoms after :meth:`_solve`)."""
        fl, fr = _linear(left), _linear(right)
        return fl is not None and fr is not None and (fl[0] is None or fr[0] is None or fl[0] is fr[0])

    def _solve(self, left: exp.Expression, op: str, right: exp.Expression, node: exp.Expression):
        """``f(col) op c`` with ``f`` linear (a BIND's number compared with a constant): ``col op' c'`` solved
        exactly over the rationals, as ``(col, op', Const)``; True / False when no column is left."""
        fl, fr = _linear(left), _linear(right)
        if fl is None or fr is None:
            raise self.ctx.error(f"condition {_snippet(node)}: arithmetic is analysable when it is linear in one "
                                 "column compared with a constant (e.g. col * 0.3048 > 50)", node)
        (cl, al, bl), (cr, ar, br) = fl, fr
        if cl is not None and cr is not None and cl is not cr:
            raise self.ctx.error(f"condition {_snippet(node)}: arithmetic over two columns is outside the "
                                 "analysable class; compare a column (times a number) with a constant", node)
        col = cl if cl is not None else cr
        a, b = al - ar, br - bl  # a·col op b
        if col is None or a == 0:
            return _compare(Fraction(0), op, b)
        if a < 0:
            op = FLIP[op]
        v = b / a
        return self.column(col), op, Const(NUMERIC, v, str(v))
