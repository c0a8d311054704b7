"""SQL (sqlglot AST) → typed SPJ members in normal form (spec §2, Schiff–Özçep Def. 4).

A query is a UNION [ALL] of ``SELECT <items> FROM <entries> WHERE <condition>``.
Each SELECT becomes one or more :class:`SpjMember` (one per disjunct of its
condition, :func:`obda.analysis.conditions._disjuncts`).  This module holds the
member model and assembles it; the jobs are :mod:`obda.analysis.sql_reading`
(text, UNION, FROM entries, columns), :mod:`obda.analysis.comparisons` (typing:
comparisons type-checked into :class:`~obda.analysis.elements.Predicate`
atoms), :mod:`obda.analysis.arithmetic` (linear arithmetic),
:mod:`obda.analysis.conditions` (formula → disjuncts, interval joins) and
:mod:`obda.analysis.projection` (output columns).

Everything outside the class raises :class:`~obda.errors.AnalysisError`
naming the construct and, when the SQL came as text, its line and column.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

from sqlglot import exp

from obda.analysis.comparisons import Typing
from obda.analysis.conditions import Conditions, Difference, _disjuncts, _take_differences, _value_sat
from obda.analysis.elements import Attr, Element, Predicate
from obda.analysis.projection import Projected, Projection
from obda.analysis.sql_reading import Relation, SelectReading, _Ctx, _selects, _check_select, _snippet, parse_sql
from obda.model.compilation import MemberOrigin
from obda.model.sources import ColumnType, Sources


@dataclass(frozen=True)
class SpjMember:
    """One SPJ member in normal form: ``Π_{L ∪ C} σ_P(R_1 × … × S_n)`` (one disjunct of a SELECT)."""

    index: int  # position of the SELECT in the UNION
    sql: str
    distinct: bool
    relations: tuple[Relation, ...]
    types: Mapping[Attr, ColumnType]
    predicates: tuple[Predicate, ...]
    projection: tuple[Projected, ...]
    origin: MemberOrigin | None = None
    disjunct: tuple[int, int] = (0, 1)  # (i, n): i-th of n disjuncts of the WHERE clause
    contradiction: str | None = None  # why the selection is trivially false
    notes: tuple[str, ...] = field(default=())
    differences: tuple[Difference, ...] = ()  # interval-join constraints between stream timestamps
    # whole-term equalities of two instances of one template, read as these column pairs (obda.analysis.terms);
    # ``explicit``: column equalities some other condition states as well
    templates: tuple[tuple[tuple[Attr, Attr], ...], ...] = ()
    explicit: frozenset = frozenset()
    # the output columns that may key the answers by their latest stream's timestamp (None: any); a DISTINCT
    # union is keyed only on a column every member keys (obda.analysis.analyze)
    time_columns: frozenset | None = None
    # computed conditions (obda.analysis.computed): per-row filters over one FROM entry (Rule 5), and derived
    # attributes of comparisons of two entries with the columns they read (Rules 6, 7)
    filters: tuple[str, ...] = ()
    derived: tuple[tuple[Attr, tuple[Attr, ...]], ...] = ()
    joined: tuple[str, ...] = ()  # conditions of several entries that do not separate: on the joined row (Rule 8)
    finite_parts: tuple[Attr, ...] = ()  # projected date parts of a fixed range (HOURS(?t)): finite (Rule 7)
    # checks in a window of the answer's time (rules A3, A4): each window's bounds (µs) relative to the answer's
    check_windows: tuple[tuple[int | None, int | None], ...] = ()
    # checks in a window without a lower bound (rule A5): their queries (keys, then the time), whose keys are kept
    kept_keys: tuple[exp.Expression, ...] = ()
    # the reading of the SELECT (its FROM entries and columns), which the executor's member of it reuses
    # (obda.analysis.forest.members): each SELECT is read once
    reading: SelectReading | None = field(default=None, compare=False, repr=False)

    @property
    def projection_kind(self) -> str:
        return "set" if self.distinct else "bag"

    def relation(self, alias: str) -> Relation:
        for r in self.relations:
            if r.alias == alias:
                return r
        raise KeyError(alias)

    @property
    def projected_attrs(self) -> tuple[Attr, ...]:
        return tuple(dict.fromkeys(a for p in self.projection for a in p.attrs))

    def is_timestamp(self, a: Element) -> bool:
        return isinstance(a, Attr) and self.types.get(a) is ColumnType.TIMESTAMP

    def condition_text(self) -> str:
        return " AND ".join(str(p) for p in self.predicates) or "TRUE"


class _Select(Typing, Conditions, Projection):
    """One SELECT being read into members: typing, arithmetic, conditions and projection over its FROM entries."""


def extract_select(sel: exp.Select, index: int, distinct: bool, ctx: _Ctx, origin: MemberOrigin | None = None) -> list[SpjMember]:
    """One SELECT → its normal-form members (one per disjunct of the condition)."""
    _check_select(sel, ctx)
    s = _Select(sel, ctx)
    conds = s.entries()
    if not s.relations:
        for item in sel.expressions:
            node = item.this if isinstance(item, exp.Alias) else item
            if isinstance(node, exp.Column):
                raise ctx.error("a SELECT without FROM cannot reference columns", node)
    distinct = distinct or bool(sel.args.get("distinct"))
    where = sel.args.get("where")
    parts = list(conds) + ([where.this] if where is not None else [])
    parts, differences = _take_differences(parts, s)
    if differences and distinct:
        raise ctx.error("SELECT DISTINCT with an interval join (a timestamp compared with another one moved by a "
                        "duration) is outside the analysable class; use a bag (SELECT) or an aggregate",
                        differences[0][1])
    implied = [Predicate.make(d.left, d.implied_order(), d.right, d.location) for d, _ in differences
               if d.implied_order() is not None]
    parts_f = [s.formula(c) for c in parts] + implied
    f = ("and", parts_f) if parts_f else True
    proj = s.projection() + s.check_projection()
    sql = sel.sql()
    ds = _disjuncts(f, s, distinct, where.this if where is not None else sel)
    members = []
    if not ds:
        ds_out = [([], "the condition is always false")]
    else:
        ds_out = [(d, None) for d in ds]
    n = len(ds_out)
    for i, (d, contra) in enumerate(ds_out):
        if contra is None and not _value_sat(d, s.types):
            contra = "the selection is unsatisfiable"
        members.append(SpjMember(
            index=index, sql=sql, distinct=distinct, relations=tuple(s.relations), types=dict(s.types),
            predicates=tuple(d), projection=proj, origin=origin, disjunct=(i, n), contradiction=contra,
            differences=tuple(d for d, _ in differences), templates=tuple(dict.fromkeys(s.templates)),
            explicit=frozenset(s.explicit), filters=tuple(dict.fromkeys(s.filters)), derived=tuple(s.derived.items()),
            joined=tuple(dict.fromkeys(_snippet(f) for f in s.joined_filters)), finite_parts=tuple(s.finite_parts),
            notes=tuple(f"check {c}: {_CHECK_NOTES[rule]}" for c, rule in dict.fromkeys(s.checks)),
            check_windows=tuple(s.check_windows), kept_keys=tuple(s.kept_keys), reading=s,
        ))
    return members


_CHECK_NOTES = {
    "A1": "the answers of a query over static tables (OPTIONAL, MINUS, [NOT] EXISTS), computed once when the query "
          "opens and tested per row; it keeps no synopsis (rule A1)",
    "A2": "the answers of a query over streams in the answer's own timestamp (OPTIONAL, MINUS, [NOT] EXISTS), "
          "computed when that timestamp closes and tested on its answers; it keeps no synopsis (rule A2)",
    "A3": "the answers of a query over streams in a window of the answer's past ([NOT] EXISTS), kept for the "
          "window's length and tested on the answers when their timestamp closes: a window, per answer (rule A3)",
    "A4": "the answers of a query over streams in a window reaching after the answer's time ([NOT] EXISTS): each "
          "answer waits until that query's first answer in the window decides it, or the window's end closes; "
          "that query's answers are kept for the window's part before the answer: a window, per answer (rule A4)",
    "A5": "the answers of a query over streams in a window of the answer's past without a lower bound ([NOT] "
          "EXISTS): each key of that query is kept forever, with its earliest timestamp; the memory is the set of "
          "those keys (rule A5)",
    "A6": "the answers of a query over streams in a window without an end (EXISTS): each answer waits until that "
          "query's first answer in the window, which may never come (rule A6)",
}


def extract(node: exp.Expression, sources: Sources, text: str | None = None, file: str | None = None,
            origins: list[MemberOrigin | None] | None = None) -> list[SpjMember]:
    """A UNION [ALL] of SELECTs → normal-form members (spec §2)."""
    ctx = _Ctx(text, sources, file)
    selects = _selects(node, ctx)
    out: list[SpjMember] = []
    for i, (sel, distinct) in enumerate(selects):
        origin = origins[i] if origins and i < len(origins) else None
        out.extend(extract_select(sel, i, distinct, ctx, origin))
    return out


def from_sql(text: str, sources: Sources, file: str | None = None) -> list[SpjMember]:
    return extract(parse_sql(text, file), sources, text, file)
