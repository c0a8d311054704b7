"""Where the executor tests each condition of one SELECT: per row of one FROM entry, as a join between two
entries (the synopses'), on the joined row (Rule 8), or on the answer (a check's).

:func:`classify` reads a member's conjuncts — after :mod:`obda.analysis.forest.disjunctions` split a disjunction
over several entries — with the analysis's reading of the SELECT (:class:`SelectContext`, its FROM entries and
columns). A comparison whose sides each read one entry (Rule 6, :func:`obda.analysis.computed.separate`) is a
join; an interval join between two stream timestamps is one too, with the order it implies.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp
from sqlglot.optimizer.simplify import simplify

from obda.analysis import computed
from obda.analysis.forest.constants import unparen
from obda.analysis.forest.model import Attr, CrossPred
from obda.analysis.sql_reading import (
    SelectReading,
    check_query,
    check_terms,
    key_check,
    reads_stream,
    transform_outside_checks,
    window_check,
)
from obda.analysis.windows import implied_order, interval_comparison
from obda.errors import ExecutionError
from obda.model.dialects import COMPARISON_CLASSES
from obda.model.sources import ColumnType, Sources, Table

CMP = {cls: op for op, cls in COMPARISON_CLASSES.items()}


@dataclass(frozen=True, eq=False)
class SelectContext:
    """One SELECT as the analysis read it: its FROM entries (alias → table) and how a column resolves."""

    sel: exp.Select
    sources: Sources
    reading: SelectReading
    aliases: dict  # alias → Table

    def resolve(self, col: exp.Column) -> Attr:
        a = self.reading.column(col)
        return (a.alias, a.column)

    def is_ts(self, col: exp.Column) -> bool:
        alias, name = self.resolve(col)
        c = self.aliases[alias].column(name)
        return c is not None and c.type is ColumnType.TIMESTAMP

    def unq(self, e: exp.Expression) -> exp.Expression:
        return _unqualify(e, self.resolve, self.is_ts)

    def owners(self, e: exp.Expression) -> set:
        """The FROM entries ``e`` reads."""
        return {self.resolve(col)[0] for col in e.find_all(exp.Column)}

    @property
    def host(self) -> str:
        """The FROM entry a value or condition of constants is computed on: a static table's where there is one."""
        return next((a for a, t in self.aliases.items() if not t.is_stream), next(iter(self.aliases)))

    def never_null(self, col: exp.Column) -> bool:
        """A stream's timestamp (a row without one is refused when read)."""
        alias, name = self.resolve(col)
        t = self.aliases[alias]
        return t.is_stream and (t.timestamp or "").lower() == name.lower()


@dataclass
class Classified:
    """A member's conditions by where they are tested."""

    local: dict  # alias → conditions on its rows (unqualified columns)
    checks: list  # tested on answers: (terms, negated, query, timed, window, compares)
    joined: list  # conditions of several entries that do not separate (Rule 8), on the joined row
    cross: list  # CrossPred: joins between two entries
    exprs: list  # (attribute, expression over one entry) computed per row: a join's side
    unsatisfiable: bool


def classify(ctx: SelectContext, conds: list[exp.Expression]) -> Classified:
    """Each conjunct of ``conds`` where the executor tests it."""
    local: dict[str, list[exp.Expression]] = {a: [] for a in ctx.aliases}
    joined_checks: list[tuple] = []  # tested on answers: (terms, negated, query, timed, window)
    joined: list[exp.Expression] = []  # conditions of several entries that do not separate (Rule 8)
    cross: list[CrossPred] = []
    exprs: list[tuple[Attr, exp.Expression]] = []
    unsat = False

    def side(e: exp.Expression) -> Attr | None:
        """A comparison operand as an attribute: a column, or an expression over one alias (computed per row)."""
        if isinstance(e, exp.Column):
            return ctx.resolve(e)
        owners = ctx.owners(e)
        if len(owners) != 1:
            return None
        attr = (owners.pop(), f"#p{len(exprs)}")
        exprs.append((attr, ctx.unq(e)))
        return attr

    for c in conds:
        check = key_check(c)
        if check is not None:  # [NOT] (…) IN (static answers): per row, on the one FROM entry its terms read
            terms = check_terms(check)
            owners = ctx.owners(terms) if terms is not None else set()
            if not owners and ctx.aliases:  # [NOT] EXISTS: the same for every row; tested on the first entry's
                owners = {next(iter(ctx.aliases))}
            timed = reads_stream(check_query(check), ctx.sources)  # per timestamp (rule A2): on the answer too
            w = window_check(check) if isinstance(check, exp.Exists) else None  # in a window of time (A3), compared
            if len(owners) != 1 or timed or w is not None:  # on the joined answer (no owner: a member of
                # constants), its terms hidden items
                parts = [] if terms is None else list(terms.expressions) if isinstance(terms, exp.Tuple) else [terms]
                joined_checks.append(([unparen(t) for t in parts], isinstance(unparen(c), exp.Not),
                                      check_query(check), timed,
                                      (w.lower, w.lower_strict, w.upper, w.upper_strict) if w and w.windowed else None,
                                      tuple(op for _, op in w.compares) if w else ()))
                continue
            local[owners.pop()].append(ctx.unq(c))
            continue
        if any(isinstance(n, (exp.Exists, exp.Subquery, exp.Select)) for n in c.walk()):
            raise ExecutionError(f"the condition {c.sql()!r} tests a subquery inside OR / NOT: the executor tests "
                                 "IN (SELECT …) and EXISTS as conditions of their own (ANDed); write the OR as a UNION "
                                 "of two SELECTs", ctx.reading.ctx.loc(c))
        owners = ctx.owners(c)
        if not owners:
            s = simplify(c.copy())
            if isinstance(s, exp.Boolean):
                unsat = unsat or not s.this
                continue
            if not ctx.aliases:
                raise ExecutionError(f"cannot decide the constant condition {c.sql()!r}")
            # a function of constants (STRENDS of a class IRI): computed per row of one entry, a static table's
            # where there is one, as a value of constants is (the same for every row)
            local[ctx.host].append(ctx.unq(c))
            continue
        if len(owners) == 1:
            local[owners.pop()].append(ctx.unq(c))
            continue
        interval = _interval(c, ctx.resolve, ctx.aliases)
        if interval:
            cross.extend(interval)
            continue
        u = unparen(c)
        op = CMP.get(type(u))
        sep = computed.separate(u.this, u.expression, lambda col: ctx.resolve(col)[0]) if op else None  # Rule 6
        lhs, rhs = (side(unparen(sep[0])), side(unparen(sep[1]))) if sep else (None, None)
        if lhs is None or rhs is None:  # Rule 8: tested on the joined row, a hidden boolean item
            joined.append(c)
            continue
        cross.append(CrossPred(lhs, op, rhs))
    return Classified(local, joined_checks, joined, cross, exprs, unsat)


def _interval(c: exp.Expression, resolve, aliases: dict[str, Table]) -> list[CrossPred]:
    """An interval join ``a.ts op b.ts ± INTERVAL …`` between two stream timestamps: its CrossPred (with the
    offset in microseconds) and the order it implies (an edge of the forest); [] for any other condition."""
    try:
        found = interval_comparison(c)
    except ValueError as e:
        raise ExecutionError(f"condition {c.sql()!r}: {e}") from None
    if found is None:
        return []
    other, op, col, micros = found
    a, b = resolve(other), resolve(col)
    for alias, name in (a, b):
        t = aliases[alias]
        if not (t.is_stream and t.timestamp and t.timestamp.lower() == name.lower()):
            raise ExecutionError(f"condition {c.sql()!r} moves a column by a duration: only two stream timestamps "
                                 "can be compared that way (an interval join)")
    out = [CrossPred(a, op, b, micros)]
    order = implied_order(op, micros)
    if order is not None:
        out.append(CrossPred(a, order, b))
    return out


def _unqualify(e: exp.Expression, resolve, is_ts=None) -> exp.Expression:
    """Copy of ``e`` with columns renamed to the source column (no alias): ready for one table.  A timestamp
    column whose text is taken (``CAST(ts AS VARCHAR)``, in a template) is marked ``CAST(ts AS TIMESTAMP)``:
    the local backend holds timestamps as microseconds and formats such a cast as Spark does."""

    def tr(node):
        if isinstance(node, exp.Column):
            col = exp.column(resolve(node)[1], quoted=True)
            return exp.cast(col, "TIMESTAMP") if is_ts is not None and _text_of(node) and is_ts(node) else col
        return node

    return transform_outside_checks(e, tr)


def _text_of(node: exp.Column) -> bool:
    parent = node.parent
    return isinstance(parent, exp.Cast) and parent.to.is_type(*exp.DataType.TEXT_TYPES)


def mark_timestamps(e: exp.Expression, is_ts) -> exp.Expression:
    """Copy of ``e`` (over one table's columns) with every timestamp column whose text is taken marked as a
    timestamp (``CAST(CAST(ts AS TIMESTAMP) AS VARCHAR)``), as :func:`_unqualify` does."""

    def tr(node):
        if isinstance(node, exp.Column) and _text_of(node) and is_ts(node):
            return exp.cast(node.copy(), "TIMESTAMP")
        return node

    return transform_outside_checks(e, tr)
