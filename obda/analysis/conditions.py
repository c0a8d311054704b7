"""Conditions: a SELECT's WHERE / ON → a boolean formula of typed atoms → its disjuncts (one member each).

Negations are pushed to the atoms (:meth:`Conditions.formula`); the formula's disjunctive normal form is
pruned of unsatisfiable disjuncts and, for a bag, made pairwise exclusive so the union keeps multiplicities
(:func:`_disjuncts`, at most :data:`MAX_DISJUNCTS`).  Interval-join constraints between two stream
timestamps (``ts1 op ts2 ± INTERVAL …``) are taken out of the top-level conjuncts first
(:func:`_take_differences`, :class:`Difference`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

from sqlglot import exp

from obda.analysis.closure import Closure, integer_satisfiable
from obda.analysis.elements import Attr, Predicate
from obda.analysis.sql_reading import (
    SelectReading,
    _Ctx,
    _snippet,
    check_query,
    check_terms,
    conjuncts,
    key_check,
    reads_stream,
    window_check,
)
from obda.analysis.windows import implied_order, interval_comparison
from obda.errors import Location
from obda.model.query import NEGATE, OPS
from obda.model.sources import ColumnType

MAX_DISJUNCTS = 256


@dataclass(frozen=True)
class Difference:
    """A difference constraint between two stream timestamps: ``left op right + micros`` (an interval join,
    ``m2.ts <= m1.ts + INTERVAL '300' SECOND``). Not an LTO atom: the order it implies is added to the
    member's predicates, and :mod:`obda.analysis.windows` decides whether the constraints bound every pair
    of timestamps (a window)."""

    left: Attr
    op: str  # < <= = >= >
    right: Attr
    micros: int
    location: Location | None = field(default=None, compare=False)

    def implied_order(self) -> str | None:
        """The order between ``left`` and ``right`` this constraint implies (``<``, ``<=``, ``>``, ``>=``), if any."""
        return implied_order(self.op, self.micros)

    def __str__(self) -> str:
        sign = "+" if self.micros >= 0 else "-"
        return f"{self.left} {self.op} {self.right} {sign} {abs(self.micros) / 1e6:g}s"


class Conditions(SelectReading):
    """A SELECT's conditions as a formula, negations pushed to the atoms."""

    # conditions → boolean formula ------------------------------------------------------
    def formula(self, node: exp.Expression):
        """Nested ('and'|'or', [...]) / Predicate / True / False, negations pushed to atoms."""
        return self._f(node, False)

    def _f(self, node: exp.Expression, neg: bool):
        ctx = self.ctx
        if isinstance(node, exp.Paren):
            return self._f(node.this, neg)
        if isinstance(node, exp.Not):
            inner = node.this
            while isinstance(inner, exp.Paren):
                inner = inner.this
            if isinstance(inner, exp.Is):
                return self._is(inner, not neg)
            return self._f(node.this, not neg)
        if isinstance(node, (exp.And, exp.Or)):
            op = "and" if isinstance(node, exp.And) else "or"
            if neg:
                op = "or" if op == "and" else "and"
            return (op, [self._f(node.left, neg), self._f(node.right, neg)])
        if isinstance(node, exp.Boolean):
            return bool(node.this) != neg
        ops = {exp.EQ: "=", exp.NEQ: "!=", exp.LT: "<", exp.LTE: "<=", exp.GT: ">", exp.GTE: ">="}
        for cls, op in ops.items():
            if type(node) is cls:
                if neg:
                    op = NEGATE[op]
                return self.comparison(node.this, op, node.expression, node)
        if isinstance(node, exp.Between):
            lo = self.comparison(node.this, ">=", node.args["low"], node)
            hi = self.comparison(node.this, "<=", node.args["high"], node)
            return self._f_neg(("and", [lo, hi]), neg)
        if isinstance(node, (exp.In, exp.Exists)) and key_check(node) is not None:
            # a check against static answers (rule A1) or those of the row's own timestamp (A2): a filter without
            # effect on boundedness
            # (A3, A4: those of a window of its time, kept for the window's length; A4: the answer waits for the
            # window's end)
            window = window_check(node, ctx) if isinstance(node, exp.Exists) else None  # first: its errors located
            terms = check_terms(node)
            entries = {self.column(col).alias for col in (terms.find_all(exp.Column) if terms is not None else ())}
            windowed = window is not None and window.windowed
            if windowed and (window.lower is not None or window.upper is None or window.upper > 0):
                self.check_windows.append((window.lower, window.upper))
            if windowed and window.lower is None:
                self.kept_keys.append(window.query)
            rule = (("A6" if window.upper is None else "A5" if window.lower is None else "A4" if window.upper > 0
                     else "A3") if windowed else "A2" if reads_stream(check_query(node), ctx.sources) else "A1")
            if len(entries) > 1 and rule == "A1":  # tested on the joined answer: its terms are kept like projected
                self.joined_terms.extend(terms.expressions if isinstance(terms, exp.Tuple) else [terms])
            label = (f"EXISTS (… in a window of {_snippet(terms.expressions[-1])})" if windowed
                     else "EXISTS (… compared with " + ", ".join(_snippet(terms.expressions[i]) for i, _ in
                                                                  window.compares) + ")" if window is not None
                     else f"{_snippet(terms)} IN (…)" if terms is not None else "EXISTS (…)")
            self.checks.append((("NOT " if neg else "") + label, rule))
            return True
        if isinstance(node, exp.In):
            if node.args.get("query") is not None or node.args.get("unnest") is not None:
                raise ctx.error("IN (subquery) is outside the analysable class; use IN (constant, ...)", node)
            items = node.expressions
            if not items:
                raise ctx.error("empty IN list", node)
            eqs = [self.comparison(node.this, "=", it, node) for it in items]
            return self._f_neg(("or", eqs), neg)
        if isinstance(node, exp.Is):
            return self._is(node, neg)
        if isinstance(node, exp.Like) or isinstance(node, exp.ILike):
            raise ctx.error(f"LIKE ({_snippet(node)}) is outside the analysable class (only =, <>, <, <=, >, >=, BETWEEN, IN)", node)
        if isinstance(node, exp.Exists):
            raise ctx.error("EXISTS (subquery) is outside the analysable class", node)
        raise ctx.error(f"condition {type(node).__name__} ({_snippet(node)}) is outside the analysable class (only =, <>, <, <=, >, >=, BETWEEN, IN, AND, OR, NOT)", node)

    def _is(self, node: exp.Is, negated: bool):
        """``x IS NOT NULL`` is a per-tuple filter without effect on boundedness (the unfolder emits it)."""
        if isinstance(node.expression, exp.Null) and negated:
            self.operand(node.this)  # resolve the column (unknown columns are still errors)
            return True
        raise self.ctx.error(f"{'NOT ' if negated else ''}{_snippet(node)} is outside the analysable class (only IS NOT NULL is accepted)", node)

    @staticmethod
    def _f_neg(f, neg: bool):
        if not neg:
            return f
        return _negate(f)


def _compare(x, op: str, y) -> bool:
    return OPS[op](x, y)


def _negate(f):
    if f is True or f is False:
        return not f
    if isinstance(f, Predicate):
        return f.negated()
    op, parts = f
    return ("or" if op == "and" else "and", [_negate(p) for p in parts])


def _dnf(f, ctx: _Ctx, node) -> list[list[Predicate]]:
    """Disjunctive normal form; ``[]`` = false, ``[[]]`` = true."""
    if f is True:
        return [[]]
    if f is False:
        return []
    if isinstance(f, Predicate):
        return [[f]]
    op, parts = f
    if op == "or":
        out = []
        for p in parts:
            out.extend(_dnf(p, ctx, node))
            if len(out) > MAX_DISJUNCTS:
                raise ctx.error(f"the condition expands to more than {MAX_DISJUNCTS} disjuncts; split the query into a UNION by hand", node)
        return out
    out = [[]]
    for p in parts:
        d = _dnf(p, ctx, node)
        out = [a + b for a in out for b in d]
        if len(out) > MAX_DISJUNCTS:
            raise ctx.error(f"the condition expands to more than {MAX_DISJUNCTS} disjuncts; split the query into a UNION by hand", node)
    return out


def _value_sat(conj: list[Predicate], types: Mapping[Attr, ColumnType]) -> bool:
    """Quick satisfiability of a conjunction (disequalities ignored) for pruning disjuncts."""
    atoms = [(p.left, p.op, p.right) for p in conj if p.op != "!="]
    disc = [a for a, t in types.items() if t.is_discrete]
    if not integer_satisfiable(atoms, disc):
        return False
    # a disequality between two elements forced equal
    cl = Closure(atoms)
    return all(not (p.op == "!=" and cl.eq(p.left, p.right)) for p in conj)


def _exclusive(disjuncts: list[list[Predicate]], types, ctx: _Ctx, node) -> list[list[Predicate]]:
    """Make disjuncts pairwise exclusive (D_k ∧ ¬D_1 ∧ … ∧ ¬D_{k-1}) so a bag union keeps multiplicities."""
    out: list[list[Predicate]] = []
    for k, d in enumerate(disjuncts):
        parts = [list(d)]
        for prev in disjuncts[:k]:
            nxt = []
            for conj in parts:
                if not _value_sat(conj + list(prev), types):
                    nxt.append(conj)  # already exclusive with ``prev``
                    continue
                for atom in prev:
                    cand = conj + [atom.negated()]
                    if _value_sat(cand, types):
                        nxt.append(cand)
            parts = nxt
            if len(parts) > MAX_DISJUNCTS:
                raise ctx.error(f"the condition expands to more than {MAX_DISJUNCTS} disjuncts; split the query into a UNION by hand", node)
        out.extend(parts)
    return out


def _disjuncts(f, sel: SelectReading, distinct: bool, node) -> list[list[Predicate]]:
    """Conjunctions whose union is the condition: plain DNF for sets, exclusive DNF for bags."""
    ds = _dnf(f, sel.ctx, node)
    ds = [d for d in ds if _value_sat(d, sel.types)] or ds[:1]
    if len(ds) > 1 and not distinct:
        ds = _exclusive(ds, sel.types, sel.ctx, node) or ds[:1]
    # drop duplicate atoms inside each conjunction, keep order
    return [list(dict.fromkeys(d)) for d in ds]


def _take_differences(parts: list[exp.Expression], s: SelectReading):
    """Split the top-level conjuncts into ordinary conditions and interval-join constraints
    ``ts1 op ts2 ± INTERVAL …`` between two stream timestamps (:class:`Difference`, with their node)."""
    rest: list[exp.Expression] = []
    found: list[tuple[Difference, exp.Expression]] = []
    for part in parts:
        for c in conjuncts(part):
            d = _difference(c, s)
            if d is None:
                rest.append(c)
            else:
                found.append((d, c))
    return rest, found


def _difference(c: exp.Expression, s: SelectReading) -> Difference | None:
    try:
        found = interval_comparison(c)
    except ValueError as e:
        raise s.ctx.error(f"{_snippet(c)}: {e}", c) from None
    if found is None:
        return None
    other, op, col, micros = found
    a, b = s.column(other), s.column(col)
    for attr in (a, b):
        rel = next(r for r in s.relations if r.alias == attr.alias)
        if not (rel.is_stream and rel.timestamp == attr):
            raise s.ctx.error(f"{attr} is moved by a duration or compared with a moved timestamp in "
                              f"{_snippet(c)}; only the timestamps of two streams can form an interval join", c)
    if a.alias == b.alias:
        raise s.ctx.error(f"{_snippet(c)} compares a timestamp with itself moved by a duration", c)
    return Difference(a, op, b, micros, s.ctx.loc(c))
