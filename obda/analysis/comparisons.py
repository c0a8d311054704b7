"""Typing: constants and operands in their domains, comparisons type-checked into predicates.

A comparison's sides are columns (their catalog type), constants (number, string, boolean, timestamp) or
expressions; timestamps compare only with timestamps, and an integer column against a non-integral constant is
tightened to integer bounds.  Templates compared as whole terms are :mod:`obda.analysis.terms`'; computed
conditions (:mod:`obda.analysis.computed`) become per-row filters over one FROM entry (Rule 5) or atoms between
derived attributes of two (Rules 6, 7); linear arithmetic is :mod:`obda.analysis.arithmetic`'s.
"""

from __future__ import annotations

import datetime as _dt
from decimal import Decimal, InvalidOperation
from fractions import Fraction

from sqlglot import exp

from obda.analysis import computed, terms
from obda.analysis.arithmetic import _ARITH, Arithmetic
from obda.analysis.conditions import _compare, _negate
from obda.analysis.elements import BOOLEAN, NUMERIC, STRING, TIMESTAMP, Attr, Const, Element, Predicate
from obda.analysis.sql_reading import _Ctx, _snippet
from obda.model.query import FLIP
from obda.model.sources import ColumnType


class Typing(Arithmetic):
    """Typed constants, operands and comparisons of one SELECT."""

    # constants ---------------------------------------------------------------------------
    def constant(self, node: exp.Expression) -> Const | None:
        """A constant expression, or None if ``node`` is not a constant."""
        ctx = self.ctx
        if isinstance(node, exp.Paren):
            return self.constant(node.this)
        if isinstance(node, exp.Neg):
            c = self.constant(node.this)
            if c is None or c.domain != NUMERIC:
                return None
            return Const(NUMERIC, -c.value, "-" + c.text)
        if isinstance(node, exp.Boolean):
            return Const(BOOLEAN, bool(node.this), "TRUE" if node.this else "FALSE")
        if isinstance(node, exp.Literal):
            if node.is_string:
                return Const(STRING, node.this, "'" + node.this.replace("'", "''") + "'")
            return Const(NUMERIC, _number(node.this, node, ctx), node.this)
        if isinstance(node, exp.Cast) and isinstance(node.this, (exp.Literal, exp.Neg)):
            to = node.to.this
            text = node.this.this if isinstance(node.this, exp.Literal) else node.this.sql()
            if to in exp.DataType.TEMPORAL_TYPES:
                return Const(TIMESTAMP, _timestamp(str(text), node, ctx), f"TIMESTAMP '{text}'")
            if to in exp.DataType.TEXT_TYPES:
                return Const(STRING, str(text), "'" + str(text) + "'")
            if to in exp.DataType.NUMERIC_TYPES:
                return Const(NUMERIC, _number(str(text), node, ctx), str(text))
            raise ctx.error(f"unsupported constant type {node.to.sql()} in {_snippet(node)}", node)
        if isinstance(node, exp.Null):
            raise ctx.error("NULL in a comparison is never true; outside the analysable class", node)
        return None

    # values in conditions ----------------------------------------------------------------
    def operand(self, node: exp.Expression) -> Element:
        ctx = self.ctx
        while isinstance(node, exp.Paren):
            node = node.this
        if isinstance(node, exp.Column):
            return self.column(node)
        c = self.constant(node)
        if c is not None:
            return c
        if isinstance(node, exp.Cast) and isinstance(node.this, exp.Column):
            a = self.column(node.this)  # a number widened to another number type (a cast to xsd:double): the
            if node.to.is_type(*exp.DataType.NUMERIC_TYPES) and self._domain(a) == NUMERIC:  # same value
                return a
            raise ctx.error(f"function CAST on a column in a condition ({_snippet(node)}) is outside the analysable class; compare the column itself", node)
        if isinstance(node, (exp.Subquery, exp.Select)):
            raise ctx.error("subquery in a condition is outside the analysable class", node)
        if isinstance(node, exp.Func):
            name = node.sql_name() if hasattr(node, "sql_name") else type(node).__name__
            raise ctx.error(f"function {name} in a condition ({_snippet(node)}) is outside the analysable class; conditions compare columns and constants", node)
        raise ctx.error(f"expression {type(node).__name__} in a condition ({_snippet(node)}) is outside the analysable class", node)

    def comparison(self, left: exp.Expression, op: str, right: exp.Expression, node: exp.Expression):
        """A typed atom, or True / False when both sides are constants."""
        if terms.is_template(left) and terms.is_template(right):
            return terms.whole_term_equality(self, left, op, right, node)
        if op in ("=", "!=") and (terms.is_template(left) or terms.is_template(right)):
            tmpl, other = (left, right) if terms.is_template(left) else (right, left)
            f = terms.template_constant(self, tmpl, other, node)
            if f is not None:
                return f if op == "=" else _negate(f)
        if computed.is_computed(left) or computed.is_computed(right) or computed.takes_text(left) or \
                computed.takes_text(right) or (
                (computed.has_arith(left) or computed.has_arith(right)) and not self._one_column(left, right)):
            return self._computed(left, op, right, node)
        if isinstance(left.unnest(), _ARITH) or isinstance(right.unnest(), _ARITH):
            solved = self._solve(left, op, right, node)
            if not isinstance(solved, tuple):
                return solved
            a, op, b = solved
        else:
            a, b = self.operand(left), self.operand(right)
        loc = self.ctx.loc(node)
        ta, tb = self._domain(a), self._domain(b)
        if ta != tb:
            raise self.ctx.error(_type_message(a, ta, b, tb, node), node)
        if isinstance(a, Const) and isinstance(b, Const):
            return _compare(a.value, op, b.value)
        # integer attribute vs non-integral constant: tighten to integer bounds
        if isinstance(a, Const):
            a, b, op = b, a, FLIP[op]
        if isinstance(b, Const) and b.domain == NUMERIC and not b.is_integral and self.types.get(a) is ColumnType.INTEGER:
            v = b.value
            fl, ce = v.numerator // v.denominator, -((-v.numerator) // v.denominator)
            if op == "=":
                return False
            if op == "!=":
                return True
            if op in ("<", "<="):
                return Predicate.make(a, "<=", Const(NUMERIC, Fraction(fl), str(fl)), loc)
            return Predicate.make(a, ">=", Const(NUMERIC, Fraction(ce), str(ce)), loc)
        if op == "=" and isinstance(a, Attr) and isinstance(b, Attr):
            self.explicit.add((a, b))
        return Predicate.make(a, op, b, loc)

    def _computed(self, left: exp.Expression, op: str, right: exp.Expression, node: exp.Expression):
        """A computed condition (obda.analysis.computed): a per-row filter over one FROM entry (Rule 5), an atom
        between derived attributes of two entries (Rule 6), or a filter on the joined row (Rule 8: no atom)."""
        def owner(col: exp.Column) -> str:
            return self.column(col).alias

        read = computed.owners(node, owner)
        if len(read) <= 1:
            self.filters.append(_snippet(node))
            return True
        sep = computed.separate(left, right, owner)
        if sep is None:  # Rule 8: tested on the joined row, its columns kept with the answer
            self.joined_filters.append(node)
            return True
        a, b = (self._derived(side, owner) for side in sep)
        ta, tb = self._domain(a), self._domain(b)
        if ta != tb:
            raise self.ctx.error(_type_message(a, ta, b, tb, node), node)
        return Predicate.make(a, op, b, self.ctx.loc(node))

    def _derived(self, side: exp.Expression, owner) -> Attr:
        """The attribute a separated side is: its column, or a derived attribute of its FROM entry."""
        while isinstance(side, exp.Paren):
            side = side.this
        if isinstance(side, exp.Column):
            return self.column(side)
        cols = [self.column(c) for c in side.find_all(exp.Column)]
        text = side.copy().transform(lambda n: exp.column(n.name) if isinstance(n, exp.Column) else n).sql()
        attr = Attr(cols[0].alias, f"⟨{text}⟩")
        domain = computed.domain_of(side)
        if domain is None:  # IF / COALESCE of columns: their type
            col_type = self.types[cols[0]]
            domain = "string" if col_type is ColumnType.STRING else "boolean" if col_type is ColumnType.BOOLEAN else None
        self.types[attr] = {"string": ColumnType.STRING, "boolean": ColumnType.BOOLEAN}.get(domain, ColumnType.DOUBLE)
        self.derived[attr] = tuple(dict.fromkeys(cols))
        return attr

    def _domain(self, e: Element) -> str:
        if isinstance(e, Const):
            return e.domain
        t = self.types[e]
        if t is ColumnType.TIMESTAMP:
            return TIMESTAMP
        if t.is_numeric:
            return NUMERIC
        return BOOLEAN if t is ColumnType.BOOLEAN else STRING


def _type_message(a: Element, ta: str, b: Element, tb: str, node: exp.Expression) -> str:
    def what(e: Element, t: str) -> str:
        if isinstance(e, Const):
            return f"{t} constant {e}"
        return f"{t} attribute {e}" if t != TIMESTAMP else f"timestamp attribute {e}"

    base = f"type error in {_snippet(node)}: compares {what(a, ta)} with {what(b, tb)}"
    if TIMESTAMP in (ta, tb):
        base += ("; timestamps are compared only with timestamps (attributes or constants such as "
                 "CAST('2024-01-01 00:00:00' AS TIMESTAMP))")
    return base


def _number(text: str, node: exp.Expression, ctx: _Ctx) -> Fraction:
    try:
        return Fraction(Decimal(text))
    except (InvalidOperation, ValueError):
        raise ctx.error(f"not a number: {text!r}", node) from None


def _timestamp(text: str, node: exp.Expression, ctx: _Ctx) -> int:
    t = text.strip().replace("Z", "+00:00")
    try:
        d = _dt.datetime.fromisoformat(t)
    except ValueError:
        raise ctx.error(f"not a timestamp: {text!r} (expected e.g. '2024-01-01 00:00:00')", node) from None
    if d.tzinfo is not None:
        d = d.astimezone(_dt.timezone.utc).replace(tzinfo=None)
    delta = d - _dt.datetime(1970, 1, 1)
    return (delta.days * 86400 + delta.seconds) * 1_000_000 + delta.microseconds
