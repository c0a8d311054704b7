"""Answers computed where the data is: a micro-batch's answers and synopsis updates as Spark DataFrames.

The synopsis forest (:mod:`obda.analysis.forest`) says, per member, which units
(nodes) there are, which children a unit reads (``τ_child < τ_parent``), which
static tables it joins and on which keys its synopsis is kept.  The local
backend (:mod:`obda.execution.engine`) evaluates that forest one closed
timestamp at a time on the driver.  Here the same forest is evaluated for
**every timestamp of a micro-batch at once**, as one Spark plan over

* the batch's rows of the closed range ``(lo, hi]`` (each alias: its pipeline's
  flag and kept attributes, from the cached projection of the files read);
* the **past** synopses (the driver's state, bounded by construction) shipped
  as small local DataFrames, with no timestamp (older than every row of
  the range);
* the static tables (one cached copy per query).

For a unit ``n``: ``cur(n)`` joins its aliases' rows on equal timestamps, each
child's ``past ∪ cur(child)`` restricted to timestamps *strictly before* the
row's, and its statics, under the unit's conditions.  The answers join, for
each root ``r_i`` whose row is the latest of the combination (emitted at its
timestamp ``T``), the other roots' ``past ∪ cur``: strictly before ``T`` for the
roots listed before ``r_i`` and at or before ``T`` for the ones after it, so a
combination is counted once, at the closing of its latest timestamp — exactly
what the per-timestamp engine computes (tests/execution/test_exec_distributed.py
checks both against DuckDB).  Bags stay bags: counts of past and static
entries multiply, stream rows count one each.

What comes back to the driver per micro-batch is only what updates the
synopses: ``cur(n)`` aggregated on the unit's key, for the units whose past is
still needed (bounded by the key domains), and, for DISTINCT queries, the new
distinct answers (the emitted set is part of a DISTINCT query's state).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal
from typing import Iterable

from obda.analysis.forest import Attr, CrossPred, Forest, ViewDedupe
from obda.execution.answers import AT, value_column
from obda.execution.engine import MemberEngine
from obda.execution.relations import Counted
from obda.execution.query_engine import QueryEngine
from obda.execution.scan import flag_column, key_column
from obda.execution.spark_io import drop_view, local_frame

TS = "__ts"


class _Names:
    """Column names of a member's attributes inside its Spark plan (unique, SQL-safe)."""

    def __init__(self):
        self._names: dict[Attr, str] = {}

    def __call__(self, a: Attr) -> str:
        n = self._names.get(a)
        if n is None:
            n = self._names[a] = f"x{len(self._names)}_" + re.sub(r"\W", "_", f"{a[0]}_{a[1]}")[:40]
        return n


def _spark_type(values: Iterable):
    """The Spark type of a column of Python values (as the executor's projections type them)."""
    from pyspark.sql import types as T

    for v in values:
        if v is None:
            continue
        if isinstance(v, bool):
            return T.BooleanType()
        if isinstance(v, int):
            return T.LongType()
        if isinstance(v, float):
            return T.DoubleType()
        if isinstance(v, Decimal):
            return T.DecimalType(38, 10)
        return T.StringType()
    return T.StringType()


def _frame(spark, names: list[str], data: Counted, count: str | None, types: dict | None = None):
    """A small DataFrame of counted tuples (driver state or static rows): one column per name, plus ``count``."""
    from pyspark.sql import types as T

    rows = list(data.items())
    fields = []
    for i, n in enumerate(names):
        t = (types or {}).get(n) or _spark_type(k[i] for k, _ in rows)
        fields.append(T.StructField(n, t, True))
    if count is not None:
        fields.append(T.StructField(count, T.LongType(), False))
        tuples = [tuple(k) + (c,) for k, c in rows]
    else:
        tuples = [tuple(k) for k, _ in rows]
    return local_frame(spark, tuples, T.StructType(fields))


def _q(name: str) -> str:
    return f"`{name}`"


def _pred(p: CrossPred, nm: _Names) -> str:
    right = _q(nm(p.right))
    if p.offset:  # an interval join: timestamps are long microseconds here (spark_io._projection)
        right = f"({right} + {int(p.offset)})"
    return f"{_q(nm(p.left))} {p.op} {right}"


def _and(conds) -> str | None:
    conds = [c for c in conds if c]
    return " AND ".join(f"({c})" for c in conds) if conds else None


@dataclass
class _Rel:
    """A relation of the member's plan: a common table expression, its attributes, timestamp and count columns."""

    name: str
    attrs: frozenset
    ts: str | None = None
    count: str | None = None


class _Statement:
    """The common table expressions of one micro-batch's plan (in order) and its parameters."""

    def __init__(self):
        self.ctes: dict[str, str] = {}
        self.args: dict[str, object] = {}

    def add(self, name: str, sql: str) -> str:
        self.ctes[name] = sql
        return name

    def param(self, value) -> str:
        key = f"p{len(self.args)}"
        self.args[key] = value
        return f":{key}"

    def scoped(self, prefix: str) -> "_Statement":
        """This statement for another plan (a check's query): the same expressions, its names prefixed."""
        out = _Statement()
        out.ctes, out.args = self.ctes, self.args
        out.add = lambda name, sql: self.add(prefix + name, sql)  # type: ignore[method-assign]
        return out

    def frame(self, spark, select: str):
        ctes = ",\n".join(f"{_q(n)} AS ({s})" for n, s in self.ctes.items())
        return spark.sql(f"WITH {ctes}\n{select}" if ctes else select, args=dict(self.args))


class _Joiner:
    """Joins relations one by one, applying each condition as soon as its attributes are present."""

    def __init__(self, first: _Rel, preds: Iterable[CrossPred], nm: _Names):
        self.sql = _q(first.name)
        self.attrs = set(first.attrs)
        self.counts = [first.count] if first.count else []
        self.pending = list(preds)
        self.nm = nm

    def join(self, rel: _Rel, extra: str | None = None) -> None:
        self.attrs |= rel.attrs
        ready = [p for p in self.pending if set(p.attrs) <= self.attrs]
        self.pending = [p for p in self.pending if p not in ready]
        cond = _and([_pred(p, self.nm) for p in ready] + [extra])
        # no broadcast: a broadcast is a Spark job of its own, and the micro-batch is one job
        # (spark_io.configure_session turns automatic broadcasts off)
        self.sql += f" JOIN {_q(rel.name)} ON {cond}" if cond else f" CROSS JOIN {_q(rel.name)}"
        if rel.count:
            self.counts.append(rel.count)

    def join_all(self, candidates: list[tuple["_Rel", str | None, bool]]) -> None:
        """Join every candidate ``(relation, extra condition, extra is an equality)``, in an
        order that gives each join an equality key when one exists (as the local engine orders its
        joins): a relation linked by an equality first, then one linked by any condition, then the
        rest.  Joining a relation linked only by ``τ_child < τ_parent`` before the one that brings the
        equality key would make Spark pair every row with every row (a nested-loop join)."""
        rest = list(candidates)
        while rest:
            def linked(c, eq_only: bool) -> bool:
                rel, _, eq_extra = c
                if eq_only and eq_extra:
                    return True
                return any(
                    (not eq_only or (p.op == "=" and not p.offset))
                    and ((p.left in self.attrs and p.right in rel.attrs) or (p.right in self.attrs and p.left in rel.attrs))
                    for p in self.pending
                )

            pick = next((c for c in rest if linked(c, True)), None) or next((c for c in rest if linked(c, False)), rest[0])
            rest.remove(pick)
            rel, extra, _ = pick
            self.join(rel, extra)

    def count_expr(self) -> str | None:
        return " * ".join(_q(c) for c in self.counts) if self.counts else None

    def done(self, select: str) -> str:
        """``SELECT select FROM`` the joins ``WHERE`` the conditions among the first relation's own attributes."""
        where = _and([_pred(p, self.nm) for p in self.pending])
        self.pending = []
        return f"SELECT {select} FROM {self.sql}" + (f" WHERE {where}" if where else "")


class SparkForest:
    """The Spark side of one query: builds, per micro-batch, its answers and synopsis updates.

    The plan is SQL text over temporary views (the micro-batch's projected rows, each past synopsis
    and static table as a local relation), analysed by Spark once per statement: one round trip
    from Python per statement instead of one per DataFrame operation, each of which Spark
    analyses again (the cost of planning a micro-batch).  The static tables' rows (as the driver
    loaded them, ``engine``'s statics) become one view per static alias, built on first use.
    """

    _serial = 0

    def __init__(self, spark, forest: Forest, engine: QueryEngine, ns: str = ""):
        self.spark = spark
        self.ns = ns  # the query's namespace in the columns of a shared scan (obda.execution.scan)
        self.forest = forest
        self.engine = engine
        self._names = [_Names() for _ in forest.members]
        self._statics: dict[tuple[int, str], _Rel] = {}
        self._join_statics: dict[int, str] = {}  # static tables of view branches joined per timestamp
        self._views: set[str] = set()
        SparkForest._serial += 1
        self._prefix = f"__obda{SparkForest._serial}_"  # of its temporary views in the session
        # the checks decided in the answer's own timestamp (rule A2): their queries' plans over the same rows
        self._timed = {text: SparkForest(spark, f, engine.timed[text], ns) for text, f in forest.timed_checks}
        self._timed_answers: dict[str, str | None] = {}
        # the checks in a window of time (rules A3, A4): their query's answers of the range, for the driver's store
        self.window_frames: dict[str, object] = {}
        # the answers of the range of members whose check waits for the end of its window (rule A4), with their
        # hidden terms, per member: the driver holds them (engine.waiting)
        self.waiting_frames: dict[int, object] = {}

    def _view(self, df, name: str) -> str:
        name = self._prefix + name
        df.createOrReplaceTempView(name)
        self._views.add(name)
        return name

    # -- inputs -------------------------------------------------------------------------------
    @staticmethod
    def _range(lo: int | None, hi: int | None) -> str:
        ts = _q(TS)
        cond = f"{ts} IS NOT NULL"
        if lo is not None:
            cond += f" AND {ts} > {int(lo)}"
        if hi is not None:
            cond += f" AND {ts} <= {int(hi)}"
        return cond

    def _alias_rows(self, st: _Statement, mi: int, alias: str, tcol: str) -> _Rel:
        """The rows of a stream alias in the range: its timestamp as ``tcol``, its attributes."""
        mf = self.forest.members[mi]
        nm = self._names[mi]
        p = mf.pipelines[alias]
        views: ViewDedupe = self.forest.views
        positions = views.positions.get(p.id)
        name = f"m{mi}_{tcol}"
        if positions is None:
            cols = ", ".join(f"{_q(key_column(p.id, j, self.ns))} AS {_q(nm(a))}" for j, a in enumerate(p.attrs))
            sql = f"SELECT {_q(TS)} AS {_q(tcol)}{', ' if cols else ''}{cols} FROM {_q(self._scan)} " \
                  f"WHERE {_q(flag_column(p.id, self.ns))} AND {self._rng}"
            return _Rel(st.add(name, sql), frozenset(p.attrs), tcol)
        # a per-atom view: the distinct rows of every branch per timestamp, projected onto the alias
        branches = sorted(b for b, t in views.branch_of.items() if t == p.id)
        joins = [j for j in views.joins if j.temporal and j.target == p.id]
        width = len(next(q for q in self.forest.pipelines if q.id == branches[0]).attrs) if branches else len(joins[0].items)
        parts = []
        for b in branches:
            cols = "".join(f", {_q(key_column(b, j, self.ns))} AS __r{j}" for j in range(width))
            parts.append(f"SELECT {_q(TS)} AS {_q(tcol)}{cols} FROM {_q(self._scan)} "
                         f"WHERE {_q(flag_column(b, self.ns))} AND {self._rng}")
        parts += [self._join_branch(j, tcol) for j in joins]
        union = st.add(name + "_u", "SELECT DISTINCT * FROM (" + " UNION ALL ".join(parts) + ")")
        cols = "".join(f", {_q(tcol) if i < 0 else f'__r{i}'} AS {_q(nm(a))}" for i, a in zip(positions, p.attrs))
        return _Rel(st.add(name, f"SELECT {_q(tcol)}{cols} FROM {_q(union)}"), frozenset(p.attrs), tcol)

    def _join_branch(self, j, tcol: str) -> str:
        """The rows of a view branch joining a stream with other tables (a referencing object map), per
        timestamp of the range: its stream tables' rows of equal timestamps and its static tables' rows (the
        driver's, the engine's ``joined_statics``), under its conditions; the view row computed from them
        (timestamps are µs here, as ``TIMESTAMP_MICROS`` for the conditions and the row)."""
        from sqlglot import exp

        tables = {q.id: q.table for q in self.forest.pipelines}
        froms, conds, refs, first = [], [], {}, None
        for k, (alias, pid, columns) in enumerate(j.entries):
            name = f"__e{k}"
            if pid in j.streams:
                cols = ", ".join(f"{_q(key_column(pid, i, self.ns))} AS __c{i}" for i in range(len(columns)))
                froms.append(f"(SELECT {_q(TS)}, {cols} FROM {_q(self._scan)} "
                             f"WHERE {_q(flag_column(pid, self.ns))} AND {self._rng}) AS {name}")
                conds.append(f"{name}.{_q(TS)} = {first}.{_q(TS)}" if first else None)
                first = first or name
            else:
                view = self._join_statics.get(pid)
                if view is None:
                    rows = self.engine.joined_statics.get(pid, {})
                    frame = _frame(self.spark, [f"__c{i}" for i in range(len(columns))], rows, None)
                    view = self._join_statics[pid] = self._view(frame, f"joinstatic{pid}")
                froms.append(f"{_q(view)} AS {name}")
            for i, c in enumerate(columns):
                col = tables[pid].column(c)
                refs[(alias, c)] = (exp.column(f"__c{i}", name), col is not None and col.type.value == "timestamp")

        def spark_sql(e) -> str:
            if isinstance(e, exp.Column) and (e.table, e.name) in refs:  # a plain column, as the scan keeps it (µs)
                return refs[(e.table, e.name)][0].sql(dialect="spark")

            def tr(n):
                if isinstance(n, exp.Column) and (n.table, n.name) in refs:
                    ref, ts = refs[(n.table, n.name)]
                    return exp.func("TIMESTAMP_MICROS", ref.copy()) if ts else ref.copy()
                return n

            return e.transform(tr).sql(dialect="spark")

        where = _and(conds + [spark_sql(c) for c in j.conds])
        row = "".join(f", {spark_sql(e)} AS __r{i}" for i, e in enumerate(j.items))
        return f"SELECT {first}.{_q(TS)} AS {_q(tcol)}{row} FROM {', '.join(froms)}" + (f" WHERE {where}" if where else "")

    def _static(self, st: _Statement, mi: int, alias: str) -> _Rel:
        key = (mi, alias)
        rel = self._statics.get(key)
        if rel is None:
            mf = self.forest.members[mi]
            nm = self._names[mi]
            p = mf.pipelines[alias]
            data = self.engine.members[mi].statics[alias].data
            count = f"__cs{len(self._statics)}"
            # a local relation (the rows are the driver's), joined by shuffling (a broadcast would be a job
            # per micro-batch); a cached frame would be computed by a job of its own
            view = self._view(_frame(self.spark, [nm(a) for a in p.attrs], data, count), f"static{mi}_{len(self._statics)}")
            rel = self._statics[key] = _Rel(view, frozenset(p.attrs), None, count)
        return rel

    def _past(self, st: _Statement, mi: int, node_id: int, tcol: str, count: str) -> str | None:
        """The node's past synopsis (driver state) with a NULL timestamp, as a SELECT; None when empty."""
        me = self.engine.members[mi]
        node = me.plan.nodes[node_id]
        data = me.past[node_id].data
        if not data:
            return None
        nm = self._names[mi]
        view = self._pasts.get((mi, node_id))
        if view is None:
            keys = [nm(a) for a in node.key]
            view = self._pasts[(mi, node_id)] = self._view(_frame(self.spark, keys, data, "__n"), f"past{mi}_{node_id}")
        cols = "".join(f", {_q(nm(a))}" for a in node.key)
        return f"SELECT CAST(NULL AS BIGINT) AS {_q(tcol)}{cols}, __n AS {_q(count)} FROM {_q(view)}"

    # -- one member ---------------------------------------------------------------------------
    def _cur(self, st: _Statement, mi: int, node_id: int, memo: dict) -> _Rel | None:
        """``cur(n)`` over the range: (timestamp, key attributes, count?) — not aggregated."""
        if node_id in memo:
            return memo[node_id]
        mf = self.forest.members[mi]
        nm = self._names[mi]
        n = mf.nodes[node_id]
        tcol = f"__t{node_id}"
        first = self._alias_rows(st, mi, n.aliases[0], tcol)
        j = _Joiner(first, n.preds, nm)
        candidates = []
        for k, a in enumerate(n.aliases[1:]):  # the unit's other aliases: same timestamp
            other = self._alias_rows(st, mi, a, f"{tcol}_{k}")
            candidates.append((other, f"{_q(f'{tcol}_{k}')} = {_q(tcol)}", True))
        for c in n.children:  # strictly earlier rows of each child (its past has no timestamp)
            rel = self._all(st, mi, c, memo, f"__a{node_id}_{c}")
            if rel is None:
                memo[node_id] = None
                return None
            candidates.append((rel, f"{_q(rel.ts)} IS NULL OR {_q(rel.ts)} < {_q(tcol)}", False))
        for s in n.statics:
            candidates.append((self._static(st, mi, s), None, False))
        j.join_all(candidates)
        count = j.count_expr()
        cname = f"__c{node_id}"
        cols = ", ".join([_q(tcol)] + [_q(nm(a)) for a in n.key] + ([f"{count} AS {cname}"] if count else []))
        rel = _Rel(st.add(f"m{mi}_cur{node_id}", j.done(cols)), frozenset(n.key), tcol, cname if count else None)
        memo[node_id] = rel
        return rel

    def _all(self, st: _Statement, mi: int, node_id: int, memo: dict, prefix: str) -> _Rel | None:
        """``past ∪ cur`` of a node, its timestamp and count columns renamed with ``prefix``."""
        nm = self._names[mi]
        node = self.forest.members[mi].nodes[node_id]
        tcol, count = f"{prefix}_t", f"{prefix}_c"
        cur = self._cur(st, mi, node_id, memo)
        keys = [_q(nm(a)) for a in node.key]
        ks = "".join(f", {k}" for k in keys)
        parts = []
        if cur is not None and self.forest.members[mi].distinct:
            # set semantics: a later row reads only whether an entry with its key came before it, so the
            # batch's rows of one key shrink to the earliest before joining (dense data: each reading would
            # otherwise join every earlier row of its key in the batch, and only then be deduplicated)
            earliest = f"SELECT MIN({_q(cur.ts)}) AS {_q(tcol)}{ks} FROM {_q(cur.name)}"
            sql = (f"{earliest} GROUP BY {', '.join(keys)}" if keys
                   else f"SELECT * FROM ({earliest}) WHERE {_q(tcol)} IS NOT NULL")
            parts.append(f"SELECT {_q(tcol)}{ks}, CAST(1 AS BIGINT) AS {_q(count)} FROM ({sql})")
        elif cur is not None:
            c = _q(cur.count) if cur.count else "CAST(1 AS BIGINT)"
            parts.append(f"SELECT {_q(cur.ts)} AS {_q(tcol)}{ks}, {c} AS {_q(count)} FROM {_q(cur.name)}")
        past = self._past(st, mi, node_id, tcol, count)
        if past is not None:
            parts.append(past)
        if not parts:
            return None
        return _Rel(st.add(f"m{mi}{prefix}", " UNION ALL ".join(parts)), frozenset(node.key), tcol, count)

    def _answers(self, st: _Statement, mi: int, memo: dict) -> list[str]:
        """The member's answers in the range as SELECTs: ``__at``, the bound values, one row per occurrence; for a
        member whose check waits for the end of its window (rule A4), all its values and a count ``__n`` (those
        checks are the driver's)."""
        mf = self.forest.members[mi]
        nm = self._names[mi]
        waits = mi in self.engine.waiting.wait
        checks = [c for c in mf.member.checks if not c.waits]
        out = []
        for i, r in enumerate(mf.roots):
            cur = self._cur(st, mi, r, memo)
            if cur is None:
                continue
            j = _Joiner(cur, mf.forest_preds, nm)
            candidates = []
            for k, q in enumerate(mf.roots):
                if k == i:
                    continue
                rel = self._all(st, mi, q, memo, f"__r{mi}_{i}_{k}")
                if rel is None:
                    break
                before = f"{_q(rel.ts)} {'<' if k < i else '<='} {_q(cur.ts)}"
                candidates.append((rel, f"{_q(rel.ts)} IS NULL OR {before}", False))
            else:
                for s in mf.forest_statics:
                    candidates.append((self._static(st, mi, s), None, False))
                j.join_all(candidates)
                candidates = None
            if candidates is not None:  # another root has no rows at all yet: no answer
                continue
            count = j.count_expr()
            values = [value_column(k) for k in range(len(mf.member.items))]
            text = self.forest.text_columns  # values of different kinds in different members: their text
            cols = ", ".join([f"{_q(cur.ts)} AS {_q(AT)}"] + [
                f"{f'CAST({self._bind(st, it, nm)} AS STRING)' if k in text else self._bind(st, it, nm)} AS {_q(v)}"
                for k, (it, v) in enumerate(zip(mf.member.items, values))])
            # a check tested on the answer reads its hidden items, which are then left out
            shown = ", ".join(_q(c) for c in [AT] + values[:mf.member.visible])
            bag = count is not None and not self.forest.distinct
            name = st.add(f"m{mi}_ans{i}", j.done(f"{cols}, {count} AS __n" if bag else cols))
            if checks:
                checked = " AND ".join(self._check_condition(st, c, values, name) for c in checks)
                name = st.add(f"m{mi}_chk{i}", f"SELECT * FROM {_q(name)} WHERE {checked}")
            if waits:
                every = ", ".join(_q(c) for c in [AT] + values)
                n = "1" if self.forest.distinct else "SUM(__n)" if bag else "COUNT(*)"
                out.append(f"SELECT {every}, CAST({n} AS BIGINT) AS __n FROM {_q(name)}"
                           f"{' WHERE __n > 0' if bag else ''} GROUP BY {every}")
            elif bag:
                out.append(f"SELECT {shown} FROM {_q(name)} LATERAL VIEW explode(array_repeat(0, CAST(__n AS INT))) "
                           f"__e AS __rep WHERE __n > 0")
            else:
                out.append(f"SELECT {shown} FROM {_q(name)}")
        return out

    def _check_condition(self, st: _Statement, c, values: list[str], name: str) -> str:
        """A check on the answers of CTE ``name`` (hidden items in ``values`` columns): against its query's static
        answers (an IN list), or, decided in the answer's timestamp (rule A2), against the answers of its query at
        that timestamp — ``[NOT] EXISTS``, an anti-join (semi-join) in the same plan — or in a window of its past
        (A3), against those answers and the driver's kept ones, their timestamps in the window."""
        if not c.timed:
            return c.condition(values)
        terms = [f"{_q(name)}.{_q(values[p])}" for p in c.positions]
        if c.window is not None:  # the key terms equal, the time in the window (µs): not the answer's own
            terms = terms[:-1]
        n = len(terms) - len(c.compares)  # then the terms a FILTER of the check compares its columns with
        present = [f"{t} IS NOT NULL" for t in terms[:n]]  # NULL never agrees (as the IN of the static checks)
        answers = self._timed_answers.get(c.query)
        if answers is None:  # the query has no member that can answer
            return _and(present + ["TRUE" if c.negated else "FALSE"])
        same = [f"__k.{_q(value_column(j))} = {t}" for j, t in enumerate(terms[:n])]
        same += [f"__k.{_q(value_column(n + i))} {op} {t}" for i, (op, t) in enumerate(zip(c.compares, terms[n:]))]
        if c.window is None:
            same.insert(0, f"__k.{_q(AT)} = {_q(name)}.{_q(AT)}")
        else:
            lo, lo_strict, hi, hi_strict = c.window
            gap = f"(__k.{_q(AT)} - {_q(name)}.{_q(AT)})"
            same += [f"{gap} {'<' if hi_strict else '<='} {int(hi)}"]
            if lo is not None:
                same.append(f"{gap} {'>' if lo_strict else '>='} {int(lo)}")
            # a time bucket of the window's width joins too: each answer meets the check's answers of at most two
            # buckets of its key, not all of the micro-batch's (measured: 1M readings, 143k maintenance of 20
            # turbines, 59.6 s without, 29.4 s with); with no key, a join without one would be a broadcast nested
            # loop join (a job of its own, every pair compared).  Without a lower bound (rule A5: the driver keeps
            # each key's earliest answer) one bucket of 2^60 µs holds every time since 1970, and the next ones the
            # sequence's end
            width = max(int(hi) - int(lo), 1) if lo is not None else 2 ** 60
            last = f"floor(({_q(AT)} - {int(lo)}) / {width})" if lo is not None else "1"
            answers = st.add(f"{answers}_b", f"SELECT *, explode(sequence(CAST(floor(({_q(AT)} - {int(hi)}) / "
                             f"{width}) AS BIGINT), CAST({last} AS BIGINT))) AS __b FROM {_q(answers)}")
            same.append(f"__k.__b = CAST(floor({_q(name)}.{_q(AT)} / {width}) AS BIGINT)")
        test = f"{'NOT ' if c.negated else ''}EXISTS (SELECT 1 FROM {_q(answers)} AS __k WHERE {' AND '.join(same)})"
        return _and(present + [test])

    def _timed_plans(self, st: _Statement) -> None:
        """The answers of every check decided per timestamp, over the micro-batch's rows and range: one CTE each;
        for a check in a window of time (rules A3, A4), with the answers of earlier micro-batches the driver keeps
        (``engine.windows``), and a frame of the range's for the driver to keep (:attr:`window_frames`)."""
        self._timed_answers, self.window_frames = {}, {}
        windows = self.engine.windows
        for k, (text, child) in enumerate(self._timed.items()):
            child.ns, child._scan, child._rng, child._pasts = self.ns, self._scan, self._rng, {}
            scoped = st.scoped(f"c{k}_")
            parts = [sql for mi, mf in enumerate(child.forest.members) if not mf.unsatisfiable and mf.nodes
                     for sql in child._answers(scoped, mi, {})]
            if text not in windows.times:
                self._timed_answers[text] = st.add(f"c{k}_answers", " UNION ALL ".join(parts)) if parts else None
                continue
            keys = [value_column(j) for j in range(len(child.forest.columns) - 1)]  # without the time
            cols = ", ".join(_q(c) for c in [AT] + keys)
            batch = st.add(f"c{k}_batch", " UNION ALL ".join(parts)) if parts else None
            if batch is not None:
                self.window_frames[text] = f"SELECT {cols} FROM {_q(batch)}"
            if not any(c.query == text and not c.waits for mf in self.forest.members for c in mf.member.checks):
                continue  # only read by checks that wait for their window's end: the driver's (rule A4)
            sources = [f"SELECT {cols} FROM {_q(batch)}"] if batch is not None else []
            kept = {key + (t,): 1 for key, times in windows.times[text].items() for t in times}
            if kept:
                view = self._pasts[("window", k)] = self._view(_frame(self.spark, keys + [AT], kept, None), f"window{k}")
                sources.append(f"SELECT {cols} FROM {_q(view)}")
            self._timed_answers[text] = st.add(f"c{k}_answers", " UNION ALL ".join(sources)) if sources else None

    @staticmethod
    def _bind(st: _Statement, item, nm: _Names) -> str:
        if item.kind == "attr":
            return _q(nm(item.attr))
        if item.kind == "const":
            return st.param(item.value)
        parts = [st.param(v) if k == "const" else f"CAST({_q(nm(v))} AS STRING)" for k, v in item.parts]
        return f"concat({', '.join(parts)})"

    # -- the micro-batch ------------------------------------------------------------------------
    def evaluate(self, batch, lo: int | None, hi: int | None,
                 keep_upto: int | None = None) -> tuple[object | None, dict[int, dict[int, object]]]:
        """The answers of the closed range ``(lo, hi]`` and, per member and node, the synopsis update frames.

        ``batch``: the projected rows of the micro-batch.  ``hi`` None: no upper bound.
        Returns the answers DataFrame (None when no member can answer) and ``{member: {node:
        DataFrame of the node's key (+ count)}}`` for the nodes whose past the engine keeps
        once ``keep_upto`` (default ``hi``) closed.  One SQL statement for the answers and one per
        update, over the same common table expressions.
        """
        keep_upto = hi if keep_upto is None else keep_upto
        self._scan = self._view(batch, "scan")
        self._rng = self._range(lo, hi)
        self._pasts: dict[tuple[int, int], str] = {}
        st = _Statement()
        self._timed_plans(st)
        answers: list[str] = []
        updates: dict[int, dict[int, str]] = {}
        waiting: dict[int, list[str]] = {}
        for mi, mf in enumerate(self.forest.members):
            if mf.unsatisfiable or not mf.nodes:
                continue
            memo: dict = {}
            (waiting.setdefault(mi, []) if mi in self.engine.waiting.wait else answers).extend(self._answers(st, mi, memo))
            me: MemberEngine = self.engine.members[mi]
            for n in mf.nodes:
                if keep_upto is None or not me.keeps_after(n.id, keep_upto):
                    continue
                cur = self._cur(st, mi, n.id, memo)
                if cur is not None:
                    updates.setdefault(mi, {})[n.id] = self._update(mi, n.id, cur)
        frames = {mi: {nid: st.frame(self.spark, sql) for nid, sql in per.items()} for mi, per in updates.items()}
        self.window_frames = {text: st.frame(self.spark, sql) for text, sql in self.window_frames.items()}
        self.waiting_frames = {mi: st.frame(self.spark, " UNION ALL ".join(parts)) for mi, parts in waiting.items()
                               if parts}
        out = st.frame(self.spark, " UNION ALL ".join(answers)) if answers else None
        # the frames hold their analysed plans: the micro-batch's views go (the statics' stay while the query runs)
        for name in [self._scan, *self._pasts.values()]:
            drop_view(self.spark, name)
            self._views.discard(name)
        return out, frames

    def _update(self, mi: int, node_id: int, cur: _Rel) -> str:
        """``cur(n)`` aggregated on the node's key, per timestamp (``__at``): counts summed (bags), the extreme
        kept (compressed sets); a set's key once, at its earliest timestamp.  The timestamp lets a range
        computed open-ended (the micro-batch's marker known only after its one job) keep the updates of
        the timestamps that close (``microbatch.Closing.consume``)."""
        mf = self.forest.members[mi]
        nm = self._names[mi]
        n = mf.nodes[node_id]
        keys = [_q(nm(a)) for a in n.key]
        at, src = f"{_q(cur.ts)} AS {_q(AT)}", _q(cur.name)
        if not mf.distinct:
            c = _q(cur.count) if cur.count else "1"
            return (f"SELECT {', '.join([at] + keys)}, CAST(SUM({c}) AS BIGINT) AS __n FROM {src} "
                    f"GROUP BY {', '.join([_q(cur.ts)] + keys)}")
        if n.compress is not None:
            pos, mode = n.compress
            rest = [k for i, k in enumerate(keys) if i != pos]
            extreme = f"{mode.upper()}({keys[pos]}) AS {keys[pos]}"
            inner = f"SELECT {', '.join([at] + rest + [extreme])} FROM {src} GROUP BY {', '.join([_q(cur.ts)] + rest)}"
            return f"SELECT {', '.join([_q(AT)] + keys)} FROM ({inner})"
        group = f" GROUP BY {', '.join(keys)}" if keys else ""
        return f"SELECT {''.join(k + ', ' for k in keys)}MIN({_q(cur.ts)}) AS {_q(AT)} FROM {src}{group}"

    def release(self) -> None:
        """Drop the query's temporary views (the query closes)."""
        for name in self._views:
            drop_view(self.spark, name)
        self._views = set()
        self._statics = {}
        for child in self._timed.values():
            child.release()
