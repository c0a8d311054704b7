"""Disjunctions over several FROM entries → disjoint members, as the analysis's normal form splits them.

A condition of two or more FROM entries that is a disjunction (``a.x = b.y OR a.z = b.y``, ``NOT (A AND B)``,
``b.y IN (a.x, a.z)``) does not separate: kept whole, it is tested on the joined row (Rule 8), so the executor
would keep every value of its columns. The analysis reads the member in normal form instead
(:func:`obda.analysis.conditions._disjuncts`, spec §2): one member per disjunct, its verdict theirs. The
executor's members follow the same split, so the state they keep is the one the verdict speaks of: each
disjunct's comparisons are joins (synopsis keys, expiry), not a filter on the joined row.

For a bag the members are made disjoint, exactly, in SQL's three-valued logic: member ``k`` holds ``D_k`` and,
for every earlier disjunct ``D_j = a_1 ∧ … ∧ a_n``, one of the exclusive ways for ``D_j`` not to be true:
``¬⁺a_1``, ``a_1 ∧ ¬⁺a_2``, …, ``a_1 ∧ … ∧ a_{n-1} ∧ ¬⁺a_n``, where ``¬⁺a`` ("``a`` is not true") is
the negated comparison when its columns are never NULL (stream timestamps), else ``NOT COALESCE(a, FALSE)``. A
joined row is then in exactly one member, and a row where an earlier disjunct is unknown (NULL) still counts
once. For a set (DISTINCT) the members are the disjuncts; the union removes duplicates.
"""

from __future__ import annotations

from itertools import product
from typing import Callable

from sqlglot import exp

from obda.analysis.forest.constants import unparen
from obda.analysis.forest.member_conditions import CMP
from obda.analysis.sql_reading import conjuncts, key_check
from obda.model.dialects import COMPARISON_CLASSES
from obda.model.query import NEGATE

#: at most this many members per SELECT; beyond, the disjunction stays whole (a filter on the joined row, Rule 8)
MAX_MEMBERS = 256


def split(conds: list[exp.Expression], owners: Callable[[exp.Expression], set], distinct: bool,
          never_null: Callable[[exp.Column], bool]) -> list[list[exp.Expression]]:
    """The condition lists of the members a SELECT's conjuncts ``conds`` stand for (one list when no conjunct is
    a disjunction over several FROM entries). ``owners(e)``: the FROM entries ``e`` reads; ``never_null(col)``:
    whether a column is never NULL (a negated comparison of such columns is their ``¬⁺``)."""
    done: list[list[exp.Expression]] = []
    todo = [list(conds)]
    while todo:
        v = todo.pop()
        at = next(((i, ds) for i, c in enumerate(v) for ds in [_disjuncts(c, owners)] if ds), None)
        if at is None:
            done.append(v)
            continue
        i, ds = at
        rest = v[:i] + v[i + 1:]
        new = []
        for k, d in enumerate(ds):
            ways = [] if distinct else [_not_true_ways(conjuncts(e), never_null) for e in ds[:k]]
            new.extend(rest + conjuncts(d) + [c for way in choice for c in way] for choice in product(*ways))
        if len(done) + len(todo) + len(new) > MAX_MEMBERS:
            return [list(conds)]
        todo.extend(reversed(new))
    return done


def _disjuncts(c: exp.Expression, owners) -> list[exp.Expression] | None:
    """The disjuncts of ``c`` when it is a disjunction over several FROM entries, without a check's subquery."""
    u = unparen(c)
    if key_check(u) is not None or any(isinstance(n, (exp.Subquery, exp.Select, exp.Exists)) for n in u.walk()):
        return None
    if len(owners(u)) < 2:
        return None
    if isinstance(u, exp.Or):
        return list(u.flatten())
    if isinstance(u, exp.Not) and isinstance(unparen(u.this), exp.And):  # De Morgan (it holds with NULLs too)
        return [_negated(p) for p in unparen(u.this).flatten()]
    if isinstance(u, exp.In) and u.expressions and not u.args.get("query"):
        return [exp.EQ(this=u.this.copy(), expression=item.copy()) for item in u.expressions]
    return None


def _negated(a: exp.Expression) -> exp.Expression:
    """``NOT a``, a comparison's negation its opposite comparison (the same in three-valued logic)."""
    u = unparen(a)
    op = CMP.get(type(u))
    if op is not None:
        return COMPARISON_CLASSES[NEGATE[op]](this=u.this.copy(), expression=u.expression.copy())
    return exp.Not(this=exp.paren(u.copy(), copy=False))


def _not_true_ways(atoms: list[exp.Expression], never_null) -> list[list[exp.Expression]]:
    """The exclusive ways for the conjunction of ``atoms`` not to be true (the module's ``¬⁺``)."""
    return [[a.copy() for a in atoms[:i]] + [_not_true(atoms[i], never_null)] for i in range(len(atoms))]


def _not_true(a: exp.Expression, never_null) -> exp.Expression:
    u = unparen(a)
    if CMP.get(type(u)) is not None and _never_null(u.this, never_null) and _never_null(u.expression, never_null):
        return _negated(u)
    return exp.Not(this=exp.Coalesce(this=exp.paren(u.copy(), copy=False), expressions=[exp.false()]))


def _never_null(x: exp.Expression, never_null) -> bool:
    """Whether a comparison's side is never NULL: such a column, a constant other than NULL (a typed one too),
    or such a side moved by an interval."""
    x = unparen(x)
    if isinstance(x, exp.Column):
        return never_null(x)
    if isinstance(x, (exp.Literal, exp.Boolean, exp.Interval)):
        return True
    if isinstance(x, exp.Cast):
        return isinstance(unparen(x.this), exp.Literal)
    if isinstance(x, (exp.Add, exp.Sub)):
        return _never_null(x.this, never_null) and _never_null(x.expression, never_null)
    return False
