"""The SQL of a SPARQL answer table: an aggregate query's grouping and aggregates over the unfolded
pattern, and the ORDER BY of a query over static data only (:func:`ordered_table`).

The unfolded UNION [ALL] is the aggregation's *characteristic query* (a bag whose columns
are the grouping variables, then the aggregated variables, named after them); the whole
query groups it::

    SELECT g, COUNT(x) AS n, … FROM (<characteristic query>) AS q GROUP BY g HAVING … ORDER BY …

SPARQL 1.1 §18.5 decides where SQL differs:

* ``SUM`` and ``AVG`` of the empty global group are 0 (``COALESCE``); ``COUNT`` is 0 in both;
* ``SAMPLE`` returns some value of the group; obda's is the smallest (``MIN``), so that every
  engine and the executor agree;
* ``GROUP_CONCAT`` joins the group's strings in an order SPARQL leaves open; obda's is the strings'
  (``ORDER BY``, code points), so that every engine and the executor agree; the empty group's is ``""``;
* ``/`` divides as decimals, and dividing by zero is an error, so unbound (``NULLIF``);
* a HAVING comparison that errs is false, as SQL's NULL is;
* a window ``FILTER(?t > NOW() - d)`` is ``WHERE q.t > CURRENT_TIMESTAMP - INTERVAL d``: NOW() is
  the timestamp being closed, so the SQL run at time T gives the answer at T (the unfolded
  pattern then also projects ``?t``).
"""

from __future__ import annotations

from sqlglot import exp

from obda.mapping._unfold_ir import arithmetic_sql
from obda.model.dialects import COMPARISON_CLASSES
from obda.model.query import Aggregate, Aggregation, Arithmetic, Literal, Comparison, Var, Window
from obda.model.terms import NUMERIC, XSD, mixed_columns, type_column

__all__ = ["aggregate_select", "ordered_table", "typed_union"]

_FUNCTIONS = {"count": exp.Count, "sum": exp.Sum, "avg": exp.Avg, "min": exp.Min, "max": exp.Max,
              "sample": exp.Min}
_COMPARE = COMPARISON_CLASSES
ALIAS = "q"


def aggregate_select(aggregation: Aggregation, characteristic: exp.Expression, window: Window | None = None,
                     order_by: tuple[tuple[str, bool], ...] = (), limit: int | None = None,
                     offset: int = 0) -> exp.Select:
    """``SELECT … FROM (characteristic) AS q [WHERE window] GROUP BY … [HAVING …] [ORDER BY …] [LIMIT …]``; an
    ORDER BY expression the SELECT does not name (``aggregation.order_items``) is a column of that SELECT, which
    ``SELECT <answer columns> FROM (…) AS q ORDER BY …`` orders by and leaves out."""
    glob = not aggregation.group_by
    sel = exp.select(*(exp.alias_(_value(i.expression, glob), i.name)
                       for i in aggregation.items + aggregation.order_items))
    sel = sel.from_(exp.Subquery(this=characteristic.copy(), alias=exp.TableAlias(this=exp.to_identifier(ALIAS))))
    if window is not None:
        seconds, micros = divmod(window.width, 1_000_000)
        unit, amount = ("SECOND", seconds) if not micros else ("MICROSECOND", window.width)
        since = exp.Sub(this=exp.CurrentTimestamp(),
                        expression=exp.Interval(this=exp.Literal.string(str(amount)), unit=exp.var(unit)))
        sel = sel.where((exp.GTE if window.inclusive else exp.GT)(this=_column(window.variable.name), expression=since))
    if aggregation.group_by:
        sel = sel.group_by(*(_column(v.name) for v in aggregation.group_by))
    if aggregation.having is not None:
        sel = sel.having(_condition(aggregation.having, glob))
    if aggregation.order_items:  # ordered by columns the answer leaves out
        return ordered_table(sel, order_by, limit, offset, aggregation.columns)
    return cut(ordered(sel, order_by), limit, offset)


def typed_union(union: exp.Expression, terms: list[tuple], columns: tuple[str, ...]) -> tuple[exp.Expression,
                                                                                            tuple[str, ...]]:
    """``union`` (the unfolded members' SELECTs, in order) with a term-type column beside each answer column its
    members give terms of several kinds (:mod:`obda.model.terms`): each member's SELECT gives it its term as a
    constant.  ``terms``: the members' (:attr:`~obda.model.compilation.SqlMember.terms`).  Returns the SQL and
    the typed columns."""
    typed = tuple(columns[k] for k in mixed_columns(terms, len(columns)))
    if not typed:
        return union, ()
    selects, node = [], union
    while isinstance(node, exp.Union):  # a left-deep chain (obda.mapping.unfold)
        selects.append(node.expression)
        node = node.this
    selects.append(node)
    for sel, member in zip(reversed(selects), terms):
        for c in typed:
            term = member[columns.index(c)]
            value = exp.cast(exp.Null(), "VARCHAR") if term is None else exp.Literal.string(term)
            sel.select(exp.alias_(value, type_column(c)), copy=False)
    return union, typed


def ordered_table(union: exp.Expression, order_by: tuple[tuple[str, bool], ...], limit: int | None = None,
                  offset: int = 0, columns: tuple[str, ...] | None = None, typed: tuple[str, ...] = ()) -> exp.Select:
    """The answer table of a query over static data only, ordered and cut:
    ``SELECT * FROM (union) AS q ORDER BY … LIMIT n OFFSET m``; ``columns``: the answer's (and their term types'),
    when ``union`` also has hidden columns to order by; ``typed``: the columns with a term-type column
    (:func:`typed_union`), ordered in SPARQL's order of terms."""
    sub = exp.Subquery(this=union.copy(), alias=exp.TableAlias(this=exp.to_identifier(ALIAS)))
    select = exp.select("*") if columns is None else exp.select(*(_column(c) for c in columns))
    return cut(ordered(select.from_(sub), order_by, typed), limit, offset)


def cut(sel: exp.Select, limit: int | None, offset: int) -> exp.Select:
    """``sel LIMIT n OFFSET m`` (either left out when not given)."""
    if limit is not None:
        sel = sel.limit(limit)
    return sel.offset(offset) if offset else sel


def ask_table(union: exp.Expression, column: str) -> exp.Select:
    """The answer table of an ASK over static data only: one row, ``column`` true when ``union`` has a row —
    ``SELECT COUNT(*) > 0 AS column FROM (SELECT * FROM (union) AS q LIMIT 1) AS q``."""
    one = ordered_table(union, (), 1)
    count = exp.GT(this=exp.Count(this=exp.Star()), expression=exp.Literal.number(0))
    return exp.select(exp.alias_(count, column)).from_(
        exp.Subquery(this=one, alias=exp.TableAlias(this=exp.to_identifier(ALIAS))))


def ordered(sel: exp.Select, order_by: tuple[tuple[str, bool], ...], typed: tuple[str, ...] = ()) -> exp.Select:
    """``sel ORDER BY …`` over its answer columns; SPARQL puts unbound values first, as ``NULLS FIRST`` does.  A
    column of several kinds of term (``typed``) is ordered as SPARQL orders terms (§15.1): by its term type's class
    (unbound, blank nodes, IRIs, numbers, booleans, other literals), then numbers by value, then by text."""
    if not order_by:
        return sel
    keys = []
    for n, d in order_by:
        if n in typed:
            keys.extend(exp.Ordered(this=k, desc=d, nulls_first=not d) for k in _term_order(n))
        keys.append(exp.Ordered(this=exp.column(n), desc=d, nulls_first=not d))
    return sel.order_by(*keys)


def _term_order(column: str) -> tuple[exp.Expression, exp.Expression]:
    """The keys ordering a column of several kinds of term before its text: its class's rank, a number's value."""
    t = exp.column(type_column(column))
    numeric = exp.In(this=t, expressions=[exp.Literal.string(x) for x in sorted(NUMERIC)])
    rank = exp.Case(ifs=[exp.If(this=exp.Is(this=exp.column(column), expression=exp.Null()), true=exp.Literal.number(0)),
                         exp.If(this=exp.EQ(this=t.copy(), expression=exp.Literal.string("bnode")), true=exp.Literal.number(1)),
                         exp.If(this=exp.EQ(this=t.copy(), expression=exp.Literal.string("iri")), true=exp.Literal.number(2)),
                         exp.If(this=numeric, true=exp.Literal.number(3)),
                         exp.If(this=exp.EQ(this=t.copy(), expression=exp.Literal.string(XSD + "boolean")),
                                true=exp.Literal.number(4))],
                    default=exp.Literal.number(5))
    value = exp.Case(ifs=[exp.If(this=numeric.copy(), true=exp.TryCast(this=exp.column(column),
                                                                        to=exp.DataType.build("DOUBLE")))])
    return rank, value


def _column(name: str) -> exp.Column:
    return exp.column(name, ALIAS)


def _value(e, glob: bool) -> exp.Expression:
    if isinstance(e, Var):
        return _column(e.name)
    if isinstance(e, Literal):  # a number, or the text a HAVING comparison compares with
        return exp.Literal.string(e.lexical) if e.datatype == XSD + "string" else exp.Literal.number(e.lexical)
    if isinstance(e, Aggregate):
        if e.argument is None:
            return exp.Count(this=exp.Star())
        arg = _column(e.argument.name)
        if e.function == "count_distinct":
            return exp.Count(this=exp.Distinct(expressions=[arg]))
        if e.function in ("sum_distinct", "avg_distinct"):
            call = _FUNCTIONS[e.function[:3]](this=exp.Distinct(expressions=[arg]))
            return exp.Coalesce(this=call, expressions=[exp.Literal.number(0)]) if glob else call
        if e.function.startswith("group_concat"):
            values = exp.Distinct(expressions=[arg]) if e.function.endswith("_distinct") else arg
            concat = exp.GroupConcat(this=exp.Order(this=values, expressions=[exp.Ordered(this=arg.copy())]),
                                     separator=exp.Literal.string(e.separator))
            return exp.Coalesce(this=concat, expressions=[exp.Literal.string("")])
        call = _FUNCTIONS[e.function](this=arg)
        if glob and e.function in ("sum", "avg"):  # the empty global group: 0, not unbound
            return exp.Coalesce(this=call, expressions=[exp.Literal.number(0)])
        return call
    if isinstance(e, Arithmetic):
        return arithmetic_sql(e.op, _value(e.left, glob), _value(e.right, glob))
    raise TypeError(f"not a value expression: {e!r}")


def _condition(c, glob: bool) -> exp.Expression:
    if isinstance(c, Comparison):
        return _COMPARE[c.op](this=_value(c.left, glob), expression=_value(c.right, glob))
    parts = [exp.Paren(this=_condition(p, glob)) for p in c.parts]
    out = parts[0]
    for p in parts[1:]:
        out = (exp.And if c.op == "and" else exp.Or)(this=out, expression=p)
    return out
