"""Aggregate queries: per-group running aggregates over the characteristic query's answers.

Arasu et al. Theorem 8.4's strategy: the executor runs the characteristic query ``Q'``
(:class:`~obda.analysis.aggregates.AggregatePlan`) like any SPJ query; each of its answer
occurrences, at the timestamp that closed it, updates the aggregates of its group. The answer
of the aggregate query at a closed timestamp ``T`` is every group's row over the rows up to
``T``; the output is a **changelog**: at every closed timestamp, one
``{"emitted_at": T, "op": "upsert", "binding": {...}}`` line per group whose row changed at
``T``, and ``"op": "delete"`` (with the row it last had) when HAVING stops keeping a group.
Replaying the lines up to ``T`` (the last line of each group, a delete removing it) gives
the answer at ``T``.

Values follow SQL for an SQL query: COUNT counts non-NULL values (``COUNT(*)``
occurrences), SUM / MIN / MAX skip NULLs (NULL when all are), AVG is SUM / COUNT as a
double, MEDIAN interpolates (``quantile_cont(0.5)``). For a SPARQL query (``plan.sparql``)
they follow SPARQL 1.1 §18.5: AVG of integers and decimals is an exact decimal, SUM and AVG
of the empty global group are 0, ``/`` of integers is a decimal, and an error (division by
zero, an incomparable value) leaves the column unbound and makes a HAVING comparison false.
SAMPLE is the smallest value (any value is allowed; the smallest agrees across backends).

The state is one entry per group (bounded when the grouping attributes are) with, per
aggregate, a few numbers, or a count per value for COUNT(DISTINCT), MEDIAN and GROUP_CONCAT (bounded when
the aggregated attribute is, condition C2).

**When a line is written.** Every ``emitted_at`` is a closed **data timestamp**: a timestamp at which
one of the query's input streams (the stream tables its pattern reads) has a valid row, whether or
not that row matches the pattern. Replaying the changelog up to any data timestamp ``T`` gives the
query's answer over the rows up to ``T`` (with ``NOW()`` = ``T`` for a window); that is what the
differential tests check, at every timestamp of the query's streams. A change that happens between
two data timestamps — a window's rows leaving it at ``Window.leaves_at(ts)`` — is written at the
first data timestamp at or after it, where it is visible (so a group whose rows all leave the window
while no new row comes is deleted at the next timestamp the streams have, matching or not). A query
without GROUP BY has its one row from the first data timestamp on (COUNT 0, and for SPARQL SUM / AVG
0, when nothing matches, or when no row can ever match). A query whose pattern reads no stream at
all (static data only, or a pattern no stream mapping can produce) is answered once, like a query
over static data: its lines have ``emitted_at`` null.

The data timestamps come from the backend: on the local backend the readers count every valid row's
timestamp through a probe pipeline (:meth:`Aggregator.probes`, :meth:`Aggregator.observe`); on the
Spark backend the micro-batch's one collect job brings, for every time a pane may leave the window
(and the start of the range, for the global row), the first data timestamp at or after it
(:meth:`Aggregator.data_frame`): never every timestamp of the batch.

On the Spark backend the answers of ``Q'`` never reach the driver: the micro-batch's collect
job brings **partial aggregates per closed timestamp and group** (:meth:`Aggregator.partial_frames`:
counts, sums, extremes; a count per value for the holistic functions), which the driver merges
in timestamp order: its work follows the groups and the closed timestamps, not the rows.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass
from functools import reduce
from decimal import Decimal
from typing import Iterable

from obda.errors import ExecutionError
from obda.analysis.aggregates import AggregatePlan
from obda.execution.accumulators import HOLISTIC, arith, compare, initial, merge, number_of, reducer, update, value_of
from obda.execution.query_engine import Answer
from obda.model.query import XSD, Aggregate, Arithmetic, Literal, Comparison, Var
from obda.model.terms import order_key


@dataclass(frozen=True)
class _DataProbe:
    """A pipeline for :func:`obda.execution.rows.process_rows` that keeps every valid row, projected on
    nothing: its entries in a batch's groups are the timestamps of the batch's data."""

    id: int = -1
    filters: tuple = ()
    exprs: tuple = ()
    attrs: tuple = ()


_PROBE = _DataProbe()


class Aggregator:
    """The groups of an aggregate query and the changelog of the micro-batch being processed.

    Per group: the grouping values, one accumulator per aggregate, and the row last written to
    the changelog (the group's answer row, if HAVING keeps it), so that a line is written only
    when the row changes, and a ``delete`` when HAVING stops holding.

    Lines are written at closed data timestamps only (see the module's docstring): the answers'
    timestamps, and the data timestamps the backend reports — every closed one on the local
    backend (:meth:`observe`), on Spark the first one at or after each time a pane may leave the
    window (:meth:`data_frame`). A pane that leaves the window at ``leaves_at`` is dropped at the
    first data timestamp ``T >= leaves_at``: exactly when the SQL over the rows up to ``T`` (``NOW()``
    = ``T``) stops counting it.
    """

    def __init__(self, plan: AggregatePlan):
        self.plan = plan
        # group key -> its panes: pane -> one accumulator per planned call. A pane holds a timestamp's
        # partials under a window (ts -> accumulators), else everything (one pane, 0)
        self.panes: dict[tuple, dict[int, list]] = {}
        self._expiry: list[tuple] = []  # window: (leaves_at, seq, key, ts) of every pane, a heap
        self._seq = 0
        self.shown: dict[tuple, dict] = {}  # group key -> the row the changelog last gave it
        self.pending: list[tuple] = []  # (ts, kind, payload) of the micro-batch
        self.lines = 0  # changelog lines emitted so far (the query's rows_out)
        self._open: set[int] = set()  # local backend: data timestamps read, not closed yet
        self._data: set[int] = set()  # data timestamps the micro-batch closed (all, or those a window needs)
        self._group_index = {v: i for i, v in enumerate(plan.group_by)}
        self._call_index = {c.call: j for j, c in enumerate(plan.calls)}
        self._groups = plan.groups
        self._reducers = [(c.call, reducer(c.function.name)) for c in plan.calls]
        self._having = self._compiled(plan.having) if plan.having is not None else None
        self._items = [(it.name, self._compiled(it.expression)) for it in plan.items]
        self._order = [(it.name, self._compiled(it.expression)) for it in plan.order_items]

    def add(self, answers: Iterable[Answer]) -> None:
        """Answers of the characteristic query (any order within the micro-batch)."""
        self.pending.extend((a.emitted_at, "answer", a) for a in answers)

    def _needs_data(self) -> bool:
        """Whether lines may fall at data timestamps without answers: a window's panes leave it, or the
        global row has not started yet."""
        return self.plan.window is not None or (not self.plan.group_by and () not in self.panes)

    def probes(self) -> list:
        """Local backend: the extra pipeline to give :func:`~obda.execution.rows.process_rows` with a
        stream table's pipelines (none when no data timestamp is needed); :meth:`observe` takes its
        rows out of the batches again."""
        return [_PROBE] if self._needs_data() else []

    def observe(self, batches) -> None:
        """Local backend: the micro-batch's :class:`~obda.execution.runtime.TableBatch` es, read with
        :meth:`probes`; remembers the timestamps of their valid rows and removes the probe's entries
        (the runtime and the engine never see them)."""
        for b in batches:
            for ts in [t for t, per in b.groups.items() if _PROBE.id in per]:
                per = b.groups[ts]
                del per[_PROBE.id]
                self._open.add(ts)
                if not per:
                    del b.groups[ts]

    def data_frame(self, projected, lo: int | None, hi: int | None, flags: list[str], new_panes: bool = True):
        """Spark backend: a DataFrame (one column ``__at``) for the micro-batch's collect job, or None when
        nothing needs it. It holds, for every time at which a pane may leave the window — the pending
        ones, and ``leaves_at`` of every timestamp in the range with rows the query keeps (``new_panes``)
        — and for the start of the range while the global row has not started, the first data
        timestamp at or after it in ``(lo, hi]`` (``hi`` None: unbounded). ``flags``: the flag columns
        (:func:`~obda.execution.scan.flag_column`) of the query's stream pipelines, which tell its rows
        (NULL in the rows of reads it does not use) and the rows it keeps (true). Its rows are consumed
        with :meth:`add_partial` (kind ``"data"``). One aggregation per timestamp of the range and one window
        over its rows and those times: a few rows per timestamp, not per row, in the collect job's plan
        (no job of its own)."""
        from pyspark.sql import Window as W
        from pyspark.sql import functions as F
        from pyspark.sql import types as T

        from obda.execution.answers import AT
        from obda.execution.distributed import TS
        from obda.execution.spark_io import local_frame

        window = self.plan.window
        fixed = sorted({e for e, _, _, _ in self._expiry if hi is None or e <= hi}) if window is not None else []
        if not self.plan.group_by and () not in self.panes:
            fixed.append(lo + 1 if lo is not None else -(2**62))
        new_panes = new_panes and window is not None
        if not (fixed or new_panes) or not flags:
            return None
        ts = F.col(TS)
        mine = F.col("__v") & ts.isNotNull() & reduce(lambda a, b: a | b, [F.col(f).isNotNull() for f in flags])
        if lo is not None:
            mine = mine & (ts > F.lit(lo))
        if hi is not None:
            mine = mine & (ts <= F.lit(hi))
        kept = reduce(lambda a, b: a | b, [F.coalesce(F.col(f), F.lit(False)) for f in flags])
        # one row per data timestamp (__d 1), and where the query keeps rows, the time its panes leave (__d 0)
        per_ts = projected.where(mine).groupBy(ts.alias("__t")).agg(F.max(kept).alias("__k"))
        t = F.col("__t")
        if new_panes:
            shift = window.leaves_at(0)  # leaves_at(ts) = ts + shift
            pairs = F.array(F.struct(t.alias("__t"), F.lit(1).alias("__d")),
                            F.when(F.col("__k"), F.struct((t + F.lit(shift)).alias("__t"), F.lit(0).alias("__d"))))
            u = per_ts.select(F.explode(pairs).alias("__p")).where(F.col("__p").isNotNull()).select("__p.__t", "__p.__d")
        else:
            u = per_ts.select(t, F.lit(1).alias("__d"))
        if fixed:
            pairs = T.StructType([T.StructField("__t", T.LongType()), T.StructField("__d", T.IntegerType())])
            u = u.unionByName(local_frame(projected.sparkSession, [(e, 0) for e in fixed], pairs))
        # the first data timestamp at or after each time: a running MIN in descending order (a data
        # timestamp equal to a time sorts before it)
        w = W.orderBy(F.col("__t").desc(), F.col("__d").desc()).rowsBetween(W.unboundedPreceding, W.currentRow)
        nxt = F.min(F.when(F.col("__d") == 1, F.col("__t"))).over(w)
        return u.select(nxt.alias(AT), F.col("__d")).where((F.col("__d") == 0) & F.col(AT).isNotNull()).select(AT)

    def partial_frames(self, answers) -> list[tuple[object, object]]:
        """``(kind, DataFrame)`` of the partial aggregates of a Spark answers frame (``__at``, ``__b…``),
        one row per closed timestamp and group: ``"partial"`` (one partial per non-holistic
        aggregate: COUNT, SUM, (SUM, COUNT) for AVG, MIN, MAX, MIN for SAMPLE), and per holistic
        aggregate ``("values", j)`` (a count per value)."""
        from pyspark.sql import functions as F

        from obda.execution.answers import AT, value_column

        keys = [AT] + [value_column(i) for i in range(self.plan.groups)]
        aggs = []
        for c in self.plan.calls:
            name = c.function.name
            if name in HOLISTIC:
                continue
            x = F.lit(1) if c.position is None else F.col(value_column(c.position))
            if name == "count":
                aggs.append(F.count(x))
            elif name == "sum":
                aggs.append(F.sum(x))
            elif name == "avg":
                aggs += [F.sum(x), F.count(x)]
            elif name == "max":
                aggs.append(F.max(x))
            else:  # min, sample (the smallest value, as on the local backend)
                aggs.append(F.min(x))
        aggs = [a.alias(f"__p{i}") for i, a in enumerate(aggs or [F.count(F.lit(1))])]  # SUM and AVG may share a sum
        out = [("partial", answers.groupBy(*keys).agg(*aggs))]
        for j, c in enumerate(self.plan.calls):
            if c.function.name in HOLISTIC:
                v = value_column(c.position)
                out.append((("values", j), answers.where(F.col(v).isNotNull()).groupBy(*keys, v).count()))
        return out

    def add_partial(self, kind, at, vals: tuple) -> None:
        """One collected row of a :meth:`partial_frames` frame, or of :meth:`data_frame` (kind ``"data"``)."""
        if kind == "data":
            self._data.add(at)
            return
        self.pending.append((at, kind, vals))

    def _apply(self, kind, payload, accs: list) -> None:
        calls = self.plan.calls
        if kind == "answer":
            for j, c in enumerate(calls):
                v = 1 if c.position is None else payload.values[c.position]
                accs[j] = update(c.function.name, accs[j], v, payload.count)
            return
        g = self._groups
        if kind == "partial":
            parts = list(payload[g:])
            for j, c in enumerate(calls):
                name = c.function.name
                if name in HOLISTIC:
                    continue
                if name == "avg":
                    p, parts = (parts[0], parts[1]), parts[2:]
                else:
                    p, parts = parts[0], parts[1:]
                accs[j] = merge(name, accs[j], p)
            return
        j = kind[1]  # ("values", j): value, count
        value, n = payload[g], payload[g + 1]
        accs[j] = update(calls[j].function.name, accs[j], value, n)

    def _compiled(self, e):
        """``e`` (a HAVING condition or a SELECT item's expression) as a function of a group's key and its
        aggregates' values: compiled once per query, evaluated at every row."""
        if isinstance(e, Var):
            i = self._group_index[e]
            return lambda key, values: key[i]
        if isinstance(e, Aggregate):
            j = self._call_index[e]
            return lambda key, values: values[j]
        if isinstance(e, Literal):  # a number, or the text a HAVING comparison compares with
            n = e.lexical if e.datatype == XSD + "string" else number_of(e)
            return lambda key, values: n
        if isinstance(e, (Arithmetic, Comparison)):
            op, left, right, f = e.op, self._compiled(e.left), self._compiled(e.right), (
                arith if isinstance(e, Arithmetic) else compare)
            return lambda key, values: f(op, left(key, values), right(key, values))
        parts = [self._compiled(p) for p in e.parts]  # Connective: Kleene logic
        if e.op == "and":
            def conj(key, values):
                got = [p(key, values) for p in parts]
                return False if False in got else (None if None in got else True)
            return conj

        def disj(key, values):
            got = [p(key, values) for p in parts]
            return True if True in got else (None if None in got else False)
        return disj

    def row(self, key: tuple) -> dict | None:
        """The answer row of a group now, or None when it has no solution in the window or HAVING drops it."""
        if not self.panes.get(key) and self.plan.group_by:
            return None  # a window expired the group's last solution
        values = self._values(key)
        if self._having is not None and self._having(key, values) is not True:
            return None
        return {name: f(key, values) for name, f in self._items}

    def _values(self, key: tuple) -> list:
        """The values of the planned aggregates for the group ``key`` now."""
        per_call = zip(*(self.panes.get(key) or {None: self._fresh()}).values())  # each one's accumulator per pane
        return [value_of(call, combine(accs), self.plan.sparql) for (call, combine), accs in zip(self._reducers, per_call)]

    def _ordering(self, key: tuple) -> dict:
        """The ORDER BY values the SELECT does not name, for the group ``key`` now."""
        values = self._values(key)
        return {name: f(key, values) for name, f in self._order}

    def _table(self, entries: list[tuple[tuple, dict, object]]) -> list:
        """The items of ``(group key, row, item)`` entries in ORDER BY order (an expression the SELECT does not name
        computed for the group now), cut by OFFSET and LIMIT (a query over static data only)."""
        plan = self.plan
        if plan.order_by:
            if self._order:
                entries = [(k, {**row, **self._ordering(k)}, item) for k, row, item in entries]
            entries = sorted_by(entries, plan.order_by, lambda e, name: e[1][name])
        end = None if plan.limit is None else plan.offset + plan.limit
        return [item for _, _, item in entries[plan.offset:end]]

    def _fresh(self) -> list:
        return [initial(c.function.name) for c in self.plan.calls]

    def _schedule(self, key: tuple, ts: int) -> None:
        """Remember when the pane ``(key, ts)`` leaves the window (a heap: expiry costs what expires)."""
        self._seq += 1
        heapq.heappush(self._expiry, (self.plan.window.leaves_at(ts), self._seq, key, ts))

    def finish_batch(self, closed_upto: int | None = None, static: bool = False) -> list[dict]:
        """Apply the micro-batch's answers and partials in timestamp order; the changelog records, in order.

        ``closed_upto``: every timestamp up to it is closed (the local backend's data timestamps up to
        it are then closed too). Lines are written at the answers' timestamps and at the closed data
        timestamps the backend reported (:meth:`observe`, :meth:`data_frame`); with a window, the panes
        (the partials of one timestamp) with ``window.leaves_at(ts) <= T`` leave at each such ``T``,
        before its answers count. A query without GROUP BY has its one row from the first data
        timestamp on, even with nothing aggregated yet. ``static``: the query reads no stream (its
        answers, if any, came at ``None``): the global row is written at ``None``, once.
        """
        plan = self.plan
        window = plan.window
        events: dict[int | None, list[tuple]] = {}
        for ts, kind, payload in self.pending:
            events.setdefault(ts, []).append((kind, payload))
        self.pending = []
        data, self._data = self._data, set()
        if closed_upto is not None and self._open:
            closed = {t for t in self._open if t <= closed_upto}
            self._open -= closed
            data |= closed
        if not plan.group_by and () not in self.panes:
            if static:
                start = None
            else:  # the first data timestamp (an answer's timestamp is one too)
                start = min([t for t in events if t is not None] + list(data), default=None)
            if static or start is not None:
                events.setdefault(start, [])
                self.panes[()] = {}
        if window is not None:  # where panes may leave the window
            for t in data:
                events.setdefault(t, [])
        out: list[dict] = []
        keys: list[tuple] = []  # the group of each record
        touched: set[tuple] = set()  # Rule 9: every group the micro-batch's closed timestamps completed
        groups = self._groups
        for at in sorted(events, key=lambda t: (t is not None, t or 0)):
            changed: dict[tuple, None] = {} if plan.group_by else {(): None}
            if window is not None and at is not None:  # the panes out of the window at ``at``, first
                while self._expiry and self._expiry[0][0] <= at:
                    _, _, key, ts = heapq.heappop(self._expiry)
                    panes = self.panes.get(key)
                    if panes is not None and panes.pop(ts, None) is not None:
                        changed[key] = None
                        if not panes and plan.group_by:
                            del self.panes[key]
            pane_key = at if window is not None else 0
            for kind, payload in events[at]:
                key = tuple(payload.values[:groups] if kind == "answer" else payload[:groups])
                panes = self.panes.setdefault(key, {})
                accs = panes.get(pane_key)
                if accs is None:
                    accs = panes[pane_key] = self._fresh()
                    if window is not None:
                        self._schedule(key, pane_key)
                self._apply(kind, payload, accs)
                changed[key] = None
                touched.add(key)
            for key in sorted(changed, key=repr):
                row, before = self.row(key), self.shown.get(key)
                if row == before:
                    continue
                if row is None:
                    del self.shown[key]
                    out.append({"emitted_at": at, "op": "delete", "binding": before})
                else:
                    self.shown[key] = row
                    out.append({"emitted_at": at, "op": "upsert", "binding": row})
                keys.append(key)
        if self.time_keyed and not static:  # complete: their rows are written and never change (Rule 9)
            for key in touched:
                self.panes.pop(key, None)
                self.shown.pop(key, None)
        if static:  # the answer table of a query over static data only: ordered, cut
            out = self._table([(k, r["binding"], r) for k, r in zip(keys, out)])
            if plan.ask:  # an ASK: one row, whether some group passes
                out = [{"emitted_at": None, "op": "upsert", "binding": {plan.columns[0]: bool(out)}}]
        self.lines += len(out)
        return out

    @property
    def time_keyed(self) -> bool:
        """Rule 9 (docs/analysis.md): every group is keyed by its own timestamp (``GROUP BY ?t``, no window), and
        dropped once its row is written."""
        return self.plan.report.time_keyed

    def answer(self) -> list[dict]:
        """The answer now: the row of every group HAVING keeps, in ORDER BY order (else by group), cut by OFFSET
        and LIMIT."""
        if self.time_keyed:
            raise ExecutionError(TIME_KEYED_TABLE)
        rows = self._table([(k, self.shown[k], self.shown[k]) for k in sorted(self.shown, key=repr)])
        return [{self.plan.columns[0]: bool(rows)}] if self.plan.ask else rows

    @property
    def size(self) -> int:
        """State entries: per group its panes (one without a window), plus the values counted for
        COUNT(DISTINCT) / MEDIAN in each, plus the open data timestamps the local backend remembers."""
        return sum(len(panes) + sum(len(a) for accs in panes.values() for a in accs if isinstance(a, dict))
                   for panes in self.panes.values()) + sum(1 for p in self.panes.values() if not p) + len(self._open)

    def state(self) -> dict:
        return {"panes": [(k, list(p.items())) for k, p in self.panes.items()],
                "shown": [(k, v) for k, v in self.shown.items()], "lines": self.lines, "open": sorted(self._open)}

    def restore(self, st: dict) -> None:
        self.panes = {tuple(k): {ts: list(a) for ts, a in p} for k, p in st["panes"]}
        self._expiry, self._seq = [], 0
        if self.plan.window is not None:
            for key, panes in self.panes.items():
                for ts in panes:
                    self._schedule(key, ts)
        self.shown = {tuple(k): v for k, v in st["shown"]}
        self.lines = st["lines"]
        self._open, self._data = set(st.get("open", ())), set()
        self.pending = []


#: why an aggregate whose groups are keyed by their timestamps (Rule 9) has no answer table to give
TIME_KEYED_TABLE = ("this query groups by its timestamps (GROUP BY ?t): each group's row is written to the changelog "
                    "when its timestamp closes and is not kept, so the answer table, which grows with the stream, is "
                    "not held in memory; read the changelog (every line is a group's final row)")


def sorted_by(rows, order_by: tuple[tuple[str, bool], ...], value, typed: frozenset[str] = frozenset()) -> list:
    """``rows`` in ORDER BY order (stable): ``order_by`` holds (column, descending) pairs, ``value(row, column)``
    reads a row's value; ``typed``: the columns of several kinds of term, whose values are held encoded
    (:func:`obda.model.terms.order_key`: SPARQL's order of terms)."""
    rows = list(rows)
    for name, desc in reversed(order_by):
        key = order_key if name in typed else _order_key
        rows.sort(key=lambda r: key(value(r, name)), reverse=desc)
    return rows


def _order_key(v):
    """SPARQL ORDER BY: unbound first, then numbers, then other values as text."""
    if v is None:
        return (0, 0, "")
    if isinstance(v, (int, float, Decimal)) and not isinstance(v, bool):
        return (1, v, "")
    return (2, 0, str(v))
