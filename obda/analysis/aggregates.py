"""Aggregate queries: Arasu et al. 2004, §8.2 (Theorems 8.3–8.6), on top of the SPJ analysis.

An aggregate query ``SELECT G, F FROM … WHERE P GROUP BY G`` is ``_G𝒢_F(σ_P(S_1 × … × S_n))``.
Its answer at a marker is the aggregate over everything received so far, and that answer
is kept in memory, so the number of groups counts: a grouping attribute that is not
bounded makes the query unbounded (the answer itself grows).

* **Functions** (Gray et al., as the paper classifies them): SUM, COUNT, MIN, MAX are
  distributive, AVG algebraic, COUNT-DISTINCT, MEDIAN and SPARQL's GROUP_CONCAT holistic; MIN, MAX,
  COUNT-DISTINCT and GROUP_CONCAT(DISTINCT) are duplicate-insensitive. SPARQL's SAMPLE keeps any one value of the
  group: distributive, duplicate-insensitive.
* **Characteristic query** ``Q' = Π_{G ∪ A(F)} σ_P(…)`` and **reduced** ``Q'_R = Π_G σ_P(…)``,
  with ``Π = π`` when every function is duplicate-insensitive, ``π̇`` otherwise.
* **One stream** (Theorems 8.3 / 8.5): bounded iff every grouping attribute is bounded and no
  holistic function aggregates an unbounded attribute.
* **Several streams** (Theorem 8.6, with 8.4 for the sufficiency of ``Q'``): bounded iff the
  grouping attributes are bounded, C1 ``Q'_R`` is bounded (the SPJ analysis of the
  application-time criteria), C2 every COUNT-DISTINCT / MEDIAN / GROUP_CONCAT attribute is bounded, and C3
  every MAX (MIN) of an unbounded ``S_i.A`` has ``MaxRef(S_i)`` (``MinRef(S_i)``) empty or
  equal, up to equality, to ``{S_i.A}``.

A condition is checked on every modified part of every member of ``Q'`` (a WHERE with
disjunctions is split into exclusive disjuncts, each aggregated on its own and combined
per group); the report says which condition fails, on which attribute, and why.
"""

from __future__ import annotations

from dataclasses import replace

from sqlglot import exp

from obda.analysis.aggregate_model import (
    FUNCTIONS,
    HOLISTIC,
    AggregateCall,
    AggregatePlan,
    AggregateReport,
    Condition,
    Function,
    OutputItem,
    PlannedCall,
)
from obda.analysis.criteria import BOUNDED, NOT_SHOWN, UNBOUNDED
from obda.analysis.normal_form import SpjMember, from_sql
from obda.analysis.sql_reading import _Ctx, parse_sql
from obda.analysis.plan import max_min_refs
from obda.analysis.preprocess import preprocess
from obda.analysis.windows import describe_micros, member_bounds
from obda.errors import AnalysisError, Location
from obda.model.query import Aggregate, Var
from obda.model.sources import Sources
from obda.query.tokens import words_position

_SQLGLOT = {exp.Count: "count", exp.Sum: "sum", exp.Min: "min", exp.Max: "max", exp.Avg: "avg",
            exp.Median: "median", exp.AnyValue: "sample"}


def aggregate_plan(source, sources: Sources, file: str | None = None, dialect: str | None = None,
                   report: AggregateReport | None = None) -> AggregatePlan:
    """The plan of an aggregate query: SQL text whose SELECT list holds grouping columns and named
    aggregates, or the :class:`~obda.model.compilation.Compilation` of a SPARQL aggregate query.

    Raises :class:`~obda.errors.AnalysisError` for what the analysis refuses, and, for SQL, for what
    is analysed but not planned: HAVING, no GROUP BY, an expression over aggregates, an unnamed aggregate.
    ``report``: the query's :func:`analyze_aggregate` report when the caller has it (not computed again).
    """
    from obda.model.compilation import Compilation

    if report is None:
        report = analyze_aggregate(source, sources, file, dialect)
    if isinstance(source, Compilation):
        agg = source.aggregation
        where = {v: i for i, v in enumerate(source.query.projection)}
        calls = tuple(PlannedCall(c, FUNCTIONS[c.function], None if c.argument is None else where[c.argument])
                      for c in agg.calls)
        items = tuple(OutputItem(i.name, i.expression) for i in agg.items)
        return AggregatePlan(items, calls, agg.group_by, source, report, agg.having, source.query.order_by, sparql=True,
                             window=source.query.window,
                             order_items=tuple(OutputItem(i.name, i.expression) for i in agg.order_items),
                             limit=source.query.limit, offset=source.query.offset, ask=source.query.ask)
    node, ctx = parse_sql(source, file, dialect), _Ctx(source, sources, file)
    if node.args.get("having") is not None:
        raise ctx.error("HAVING in SQL is analysed but not executed; write the query in SPARQL, "
                        "or filter the answers downstream", node.args["having"])
    group = list(node.args["group"].expressions) if node.args.get("group") is not None else []
    if not group:
        raise ctx.error("an SQL aggregate without GROUP BY (one global group) is analysed but not executed; "
                        "write the query in SPARQL", node)
    group_vars = tuple(Var(f"__g{i}") for i in range(len(group)))
    by_text = {g.sql(): v for g, v in zip(group, group_vars)}
    found = calls_of(node, ctx)  # one per aggregate item, in SELECT order (an aggregate of an aggregate is refused)
    next_call = iter(found)
    items: list[OutputItem] = []
    calls: list[PlannedCall] = []
    k = len(group)
    for e in node.expressions:
        inner = e.this if isinstance(e, exp.Alias) else e
        if isinstance(inner, exp.Column) and inner.sql() in by_text:
            items.append(OutputItem(e.alias_or_name, by_text[inner.sql()]))
            continue
        if not isinstance(inner, exp.AggFunc):
            raise ctx.error(f"{e.sql()}: only grouping columns and aggregates are executed in SQL, not expressions "
                            "of them (SPARQL computes them)", e)
        if not isinstance(e, exp.Alias):
            raise ctx.error(f"{e.sql()}: name the aggregate ({e.sql()} AS name)", e)
        found_call = next(next_call)
        pos = None
        if found_call.argument is not None:
            pos, k = k, k + 1
        call = Aggregate(found_call.function.name, None if pos is None else Var(f"__a{pos}"))
        calls.append(PlannedCall(call, found_call.function, pos))
        items.append(OutputItem(e.alias, call))
    args = [c.argument for c in found if c.argument is not None]
    return AggregatePlan(tuple(items), tuple(calls), group_vars, _project(node, group + args, False).sql(), report)


def is_aggregate(node: exp.Expression) -> bool:
    """Whether a parsed query is an aggregate query (GROUP BY or an aggregate function in SELECT)."""
    sel = node if isinstance(node, exp.Select) else None
    if sel is None:
        return False
    return sel.args.get("group") is not None or any(e.find(exp.AggFunc) for e in sel.expressions)


def calls_of(sel: exp.Select, ctx: _Ctx) -> list[AggregateCall]:
    """The aggregate expressions of the SELECT list, classified; a located error for any other function."""
    out: list[AggregateCall] = []
    for e in sel.expressions:
        for agg in e.find_all(exp.AggFunc):
            parent = agg.parent
            if isinstance(parent, (exp.Window, exp.Filter)):  # a window function, an aggregate of some rows
                what = "window function" if isinstance(parent, exp.Window) else "aggregate with FILTER (WHERE …)"
                raise ctx.error(f"{what} {parent.sql()} is outside the analysable class; aggregate with GROUP BY"
                                + ("" if isinstance(parent, exp.Window) else ", and move the condition to WHERE"),
                                parent)
            name = _SQLGLOT.get(type(agg))
            arg = agg.this
            if isinstance(agg, (exp.Count, exp.Sum, exp.Avg)) and isinstance(arg, exp.Distinct):
                name, arg = f"{name}_distinct", arg.expressions[0] if len(arg.expressions) == 1 else None
                if arg is None:
                    raise ctx.error(f"{name.split('_')[0].upper()}(DISTINCT …) of several expressions is not "
                                    f"supported: {agg.sql()}", agg)
            if name is None:
                raise ctx.error(f"aggregate function {agg.sql()} is not one the analysis knows "
                                f"(COUNT, SUM, MIN, MAX, AVG, COUNT(DISTINCT), MEDIAN, SAMPLE)", agg)
            if isinstance(arg, exp.Star):
                arg = None
            if arg is not None and not isinstance(arg, exp.Column):
                raise ctx.error(f"{agg.sql()}: aggregate over an expression; aggregate a column", agg)
            out.append(AggregateCall(FUNCTIONS[name], arg, agg.sql()))
    return out


def _project(sel: exp.Select, cols: list[exp.Expression], distinct: bool) -> exp.Select:
    """The SPJ core of ``sel`` projecting ``cols`` (a constant when there are none)."""
    core = sel.copy()
    core.set("group", None)
    core.set("having", None)
    core.set("order", None)
    core.set("distinct", exp.Distinct() if distinct else None)
    items = [exp.alias_(c.copy(), f"__c{i}") for i, c in enumerate(cols)] or [exp.alias_(exp.Literal.number(1), "__one")]
    core.set("expressions", items)
    return core


def _check_not_time(node: exp.Select, cols: list[exp.Column], sources: Sources, ctx: _Ctx) -> None:
    """Grouping by or aggregating application time is refused here (windows over it are ``NOW()``'s)."""
    tables = {}
    for t in node.find_all(exp.Table):
        table = sources.table(t.name)
        if table is not None:
            tables[(t.alias_or_name).lower()] = table
    for c in cols:
        table = tables.get(c.table.lower()) if c.table else (next(iter(tables.values())) if len(tables) == 1 else None)
        if table is not None and table.timestamp and table.timestamp.lower() == c.name.lower():
            where = "GROUP BY" if c.find_ancestor(exp.Group) else "aggregate of"
            raise ctx.error(f"{where} {c.sql()}: {c.sql()} is the application time of {table.name}; "
                            "grouping or aggregating timestamps is not supported", c)


def analyze_aggregate(source, sources: Sources, file: str | None = None,
                      dialect: str | None = None) -> AggregateReport:
    """The bounded-memory verdict of an aggregate query (Arasu §8.2), with the conditions checked.

    ``source``: SQL text, or the :class:`~obda.model.compilation.Compilation` of a SPARQL
    aggregate query (its members are the characteristic query).
    """
    from obda.analysis import analyze
    from obda.model.compilation import Compilation

    if isinstance(source, Compilation):
        return _analyze_compilation(source, sources, file)
    node, ctx = parse_sql(source, file, dialect), _Ctx(source, sources, file)
    if not isinstance(node, exp.Select) or not is_aggregate(node):
        raise ctx.error("not an aggregate query: no GROUP BY and no aggregate function in the SELECT list", node)
    calls = calls_of(node, ctx)
    group = list(node.args["group"].expressions) if node.args.get("group") is not None else []
    for g in group:
        if not isinstance(g, exp.Column):
            raise ctx.error(f"GROUP BY {g.sql()}: group by columns", g)
    args = [c.argument for c in calls if c.argument is not None]
    _check_not_time(node, group + args, sources, ctx)
    distinct = all(not c.function.duplicate_sensitive for c in calls)
    char = _project(node, group + args, distinct).sql()
    reduced = _project(node, group, distinct).sql()
    positions, k = [], len(group)
    for c in calls:
        positions.append(None if c.argument is None else k)
        k += c.argument is not None
    return _judge(from_sql(char, sources), [g.sql() for g in group],
                  [(c.function, p, c.text) for c, p in zip(calls, positions)],
                  analyze(reduced, sources).verdict, char, reduced)


def _analyze_compilation(comp, sources: Sources, file: str | None) -> AggregateReport:
    """A SPARQL aggregate: the compiled members are ``Q'`` as a bag; ``π`` when every function ignores duplicates."""
    from obda.analysis import analyze_members, members_of

    agg = comp.aggregation
    calls = [(FUNCTIONS[c.function], c) for c in agg.calls]
    distinct = all(not f.duplicate_sensitive for f, _ in calls)
    read = members_of(comp, sources, file)
    members = [replace(m, distinct=distinct) for m in read]
    k = len(agg.group_by)
    where = {v: i for i, v in enumerate(comp.query.projection)}
    specs = [(f, None if c.argument is None else where[c.argument], str(c)) for f, c in calls]
    reduced = [replace(m, projection=m.projection[:k]) for m in members]
    reduced_verdict = analyze_members(reduced).verdict if reduced else BOUNDED
    proj = "π" if distinct else "π̇"
    char_text = f"{proj}[{', '.join(map(str, comp.query.projection))}] of the WHERE clause ({len(members)} member(s))"
    reduced_text = f"{proj}[{', '.join(map(str, agg.group_by))}] of the WHERE clause"
    report = _judge(members, [str(g) for g in agg.group_by], specs, reduced_verdict, char_text, reduced_text,
                    time_keyed=comp.query.window is None)
    report = replace(report, members=tuple(read))
    if report.time_keyed and comp.query.order_by:  # nothing for ORDER BY to order (Rule 9)
        q = comp.query
        line, column = words_position(q.text, "ORDER BY") if q.text else (None, None)
        raise AnalysisError("ORDER BY orders an aggregate query's answer table, and a query grouped by its "
                            "timestamps (GROUP BY ?t) keeps none: each group's row is written to the changelog, in "
                            "timestamp order, when its timestamp closes; drop ORDER BY",
                            Location(q.location.file, line, column) if line is not None else q.location)
    widths = [member_bounds(m) for m in members if m.differences]
    if report.verdict == BOUNDED and widths and all(b.windowed for b in widths):
        width = describe_micros(max(b.width for b in widths))
        report = replace(report, memory="window, per solution: one entry per group (a count per value for "
                                        "COUNT(DISTINCT) and GROUP_CONCAT), and the interval join's rows of the last "
                                        f"{width} (the characteristic query's state)")
    window = comp.query.window
    if window is None:
        return report
    return _windowed(report, window)


def _time_keyed_groups(parts, group: list[str]) -> str | None:
    """Rule 9 (docs/analysis.md): with one stream (infinite; the other relations static) and no check waiting for a
    window after the solution's time, a grouping variable whose value determines that stream's timestamp
    (``GROUP BY ?t``) keys every group by one timestamp. All of a group's solutions come when that timestamp
    closes, so its row is final then: the executor writes it and drops the group. Returns why, or None when some
    part's groups are not so keyed."""
    shown = None
    for m, mq in parts:
        if not mq.infinite:
            continue
        if any(s.kind == "finite" for s in mq.streams):  # its rows may join an earlier timestamp's, later
            return None
        if any(upper is None or upper > 0 for _, upper in m.check_windows):  # rules A4, A6: a solution waits for a
            return None  # window after its timestamp, and comes when that window decides it
        (stream,) = mq.infinite  # so the latest stream
        found = next((g for i, g in enumerate(group) if mq.determines_latest_time(m.projection[i])), None)
        if found is None:
            return None
        tables = ", ".join(mq.stream(stream).tables)
        shown = shown or f"GROUP BY {found}: every group is the solutions of one timestamp of the one stream " \
                         f"{stream} ({tables}), complete when that timestamp closes (its row is written then and " \
                         "never changes)"
    return shown


def _windowed(report: AggregateReport, window) -> AggregateReport:
    """A window over the one time variable: the state is the window's, independent of the stream's length.

    Per group the executor keeps one partial aggregate per timestamp in the window (panes), and drops a
    pane when its timestamp leaves the window, a group when its last pane does. With the Theorem 8.5
    conditions holding, that is at most (groups) × (timestamps in the window) partials whatever the
    rows per timestamp; when a grouping attribute or a COUNT(DISTINCT) attribute is unbounded, the
    groups and counted values are those of the solutions in the window: proportional to them.
    """
    failing = [c for c in report.conditions if not c.holds]
    seconds = window.width / 1_000_000
    shown = f"{window.variable} {'>=' if window.inclusive else '>'} NOW() - {seconds:g} s"
    if not failing:
        memory = ("window, per timestamp: one partial aggregate per group and timestamp in the window "
                  f"({shown}); the rows per timestamp do not count")
    else:
        memory = ("window, per solution: proportional to the solutions in the window "
                  f"({shown}), since " + "; ".join(c.detail for c in failing))
    notes = report.notes + ("a window: the answer at a closed timestamp T aggregates the solutions in it; a group "
                            "leaves the answer (a delete) when its last solution leaves the window",)
    conditions = tuple(c if c.holds else replace(c, name=c.name + " (unbounded without the window; decides its memory)")
                       for c in report.conditions)
    return replace(report, verdict=BOUNDED, memory=memory, window=shown, notes=notes, conditions=conditions,
                   theorem=report.theorem + " within the window")


def _judge(members: list[SpjMember], group: list[str], calls: list[tuple[Function, int | None, str]],
           reduced_verdict: str, char: str, reduced: str, time_keyed: bool = False) -> AggregateReport:
    """Theorems 8.5 / 8.6 on the parts of ``Q'``'s members: ``group`` names the first ``len(group)``
    projected items; each call is its function, the position of its argument in the projection, its text.
    ``time_keyed``: the query has no window, so groups keyed by their own timestamp may be dropped once it
    closes (:func:`_time_keyed_groups`)."""
    conditions: list[Condition] = []
    parts = [(m, mq) for m in members for mq in preprocess(m) if mq.satisfiable]
    n_streams = max((len(mq.infinite) for _, mq in parts), default=0)
    keyed = _time_keyed_groups(parts, group) if time_keyed and n_streams == 1 else None
    if keyed is not None:
        return AggregateReport(BOUNDED, "time-keyed groups (docs/analysis.md, Rule 9)", (Condition(
            "time-keyed groups", True, keyed),), char, reduced, reduced_verdict, time_keyed=True,
            memory="the groups of the open timestamps: each is complete when its timestamp closes, its row written "
                   "then and dropped",
            notes=("the answer table (a row per timestamp) is the changelog's: ORDER BY, --final and GET …/answer, "
                   "which would order or hold it, are refused",))
    for m, mq in parts:
        cl = mq.closure
        where = f" (member {m.index + 1}, part {mq.part + 1})" if len(parts) > 1 else ""
        for i, g in enumerate(group):
            attrs = m.projection[i].attrs
            ok = all(cl.bounded(a) for a in attrs)
            shown = ", ".join(map(str, attrs)) or "a constant"
            conditions.append(Condition("grouping attribute bounded", ok,
                                        f"GROUP BY {g}: {shown} is {'bounded' if ok else 'unbounded'}{where}"
                                        + ("" if ok else ": the number of groups, and so the answer, grows")))
        for function, pos, text in calls:
            if pos is None:
                continue
            attrs = m.projection[pos].attrs
            shown = ", ".join(map(str, attrs)) or "a constant"
            bounded = all(cl.bounded(a) for a in attrs)
            if function.kind == HOLISTIC:
                conditions.append(Condition("C2: holistic aggregate over a bounded attribute", bounded,
                                            f"{text}: {shown} is {'bounded' if bounded else 'unbounded'}{where}"
                                            + ("" if bounded else ": a count per distinct value would grow")))
                if function.name == "group_concat" and mq.infinite:
                    conditions.append(Condition(
                        "GROUP_CONCAT of every solution over a stream", False,
                        f"{text}: its value holds one string per solution of the group{where}, and a stream's "
                        "solutions grow: the answer itself grows (GROUP_CONCAT(DISTINCT …) of a bounded attribute, "
                        "or a window, keeps it bounded)"))
            elif function.name in ("max", "min") and not bounded and len(mq.infinite) > 1:
                a = attrs[0]
                stream = mq.stream_of.get(a.alias)
                mx, mn = max_min_refs(mq, cl, stream) if stream else ([], [])
                refs = mx if function.name == "max" else mn
                label = "MaxRef" if function.name == "max" else "MinRef"
                classes = {cl.class_key(r) for r in refs}
                ok = len(attrs) == 1 and (not refs or (len(classes) == 1 and cl.class_key(a) in classes))
                conditions.append(Condition(f"C3: {function.name.upper()} of an unbounded attribute", ok,
                                            f"{text}: {label}({stream}) = {{{', '.join(map(str, refs))}}}{where}"
                                            + ("" if ok else f": the {function.name} per bucket and the join need "
                                               "different extremes")))
    if n_streams > 1:
        conditions.insert(0, Condition("C1: reduced characteristic query bounded", reduced_verdict == BOUNDED,
                                       f"Q'_R is {reduced_verdict}"))
        theorem = "Arasu et al. Theorem 8.6"
    else:
        theorem = "Arasu et al. Theorem 8.5"
    if all(c.holds for c in conditions):
        verdict = BOUNDED
    elif n_streams > 1 and reduced_verdict == NOT_SHOWN and all(c.holds for c in conditions[1:]):
        verdict = NOT_SHOWN
    else:
        verdict = UNBOUNDED
    memory = "constant: one entry per group (a count per value for COUNT(DISTINCT) and GROUP_CONCAT)" if verdict == BOUNDED else ""
    return AggregateReport(verdict, theorem, tuple(conditions), char, reduced, reduced_verdict, memory=memory)


__all__ = ["FUNCTIONS", "Function", "AggregateCall", "AggregateReport", "Condition", "analyze_aggregate",
           "is_aggregate", "calls_of", "AggregatePlan", "OutputItem", "PlannedCall", "aggregate_plan"]
