"""Aggregate queries: per-group running aggregates over the characteristic query's answers.

Arasu et al. Theorem 8.4's strategy: the executor runs the characteristic query ``Q'``
(:class:`~obda.analysis.aggregates.AggregatePlan`) like any SPJ query; each of its answer
occurrences, at the timestamp that closed it, updates the aggregates of its group. The answer
of the aggregate query at a closed timestamp ``T`` is every group's row over the rows up to
``T``; the output is a **changelog**: at every closed timestamp, one
``{"emitted_at": T, "op": "upsert", "binding": {...}}`` line per group whose row changed at
``T``. Replaying the lines up to ``T`` (the last upsert of each group) gives the answer at ``T``.

Values follow SQL (what the analysed SQL means): COUNT counts non-NULL values (``COUNT(*)``
occurrences), SUM / MIN / MAX skip NULLs (NULL when all are), AVG is SUM / COUNT as a
double, MEDIAN interpolates (``quantile_cont(0.5)``), SAMPLE keeps the first value seen.

The state is one entry per group (bounded when the grouping attributes are) with, per
aggregate, a few numbers, or a count per value for COUNT(DISTINCT) and MEDIAN (bounded when
the aggregated attribute is, condition C2).

On the Spark backend the answers of ``Q'`` never reach the driver: the micro-batch's collect
job brings **partial aggregates per closed timestamp and group** (:meth:`Aggregator.partial_frames`:
counts, sums, extremes; a count per value for the holistic functions), which the driver merges
in timestamp order: its work follows the groups and the closed timestamps, not the rows.
"""

from __future__ import annotations

import json
from typing import Iterable

from obda.analysis.aggregates import AggregatePlan
from obda.execution.engine import Answer
from obda.execution.sinks import _json_scalar, micros_to_iso


def _init(name: str):
    if name in ("count_distinct", "median"):
        return {}
    if name == "avg":
        return [0, 0]
    if name == "count":
        return 0
    return None


def _update(name: str, acc, v, n: int):
    """The accumulator of one aggregate after ``n`` occurrences of value ``v``."""
    if name == "count":
        return acc + n if v is not None else acc
    if v is None:
        return acc
    if name == "sum":
        return v * n if acc is None else acc + v * n
    if name == "avg":
        acc[0] += v * n
        acc[1] += n
        return acc
    if name == "min":
        return v if acc is None or v < acc else acc
    if name == "max":
        return v if acc is None or v > acc else acc
    if name == "sample":
        return v if acc is None else acc
    acc[v] = acc.get(v, 0) + n  # count_distinct, median: a count per value
    return acc


def _value(name: str, acc):
    if name == "avg":
        return None if acc[1] == 0 else acc[0] / acc[1]
    if name == "count_distinct":
        return len(acc)
    if name == "median":
        if not acc:
            return None
        values = sorted(acc)
        total = sum(acc.values())
        lo, hi = _nth(values, acc, (total - 1) // 2), _nth(values, acc, total // 2)
        return (lo + hi) / 2
    return acc


def _nth(values: list, counts: dict, k: int):
    for v in values:
        k -= counts[v]
        if k < 0:
            return v
    raise IndexError(k)


def _merge(name: str, acc, p):
    """The accumulator of one aggregate after merging a partial of the same function (see ``partial_frames``)."""
    if name == "count":
        return acc + p
    if name == "avg":
        if p[1]:
            acc[0] += p[0]
            acc[1] += p[1]
        return acc
    if p is None:
        return acc
    if name == "sum":
        return p if acc is None else acc + p
    return _update(name, acc, p, 1)  # min, max, sample


_HOLISTIC = ("count_distinct", "median")


class Aggregator:
    """The groups of an aggregate query and the changelog of the micro-batch being processed."""

    def __init__(self, plan: AggregatePlan):
        self.plan = plan
        self.groups: dict[tuple, list] = {}  # group key -> one accumulator per output item (None for keys)
        self.pending: list[tuple] = []  # (ts, kind, payload) of the micro-batch
        self.lines = 0  # changelog lines emitted so far (the query's rows_out)

    def add(self, answers: Iterable[Answer]) -> None:
        """Answers of the characteristic query (any order within the micro-batch)."""
        self.pending.extend((a.emitted_at, "answer", a) for a in answers)

    def partial_frames(self, answers) -> list[tuple[object, object]]:
        """``(kind, DataFrame)`` of the partial aggregates of a Spark answers frame (``__at``, ``__b…``),
        one row per closed timestamp and group: ``"partial"`` (one partial per non-holistic
        aggregate: COUNT, SUM, (SUM, COUNT) for AVG, MIN, MAX, MIN for SAMPLE), and per holistic
        aggregate ``("values", j)`` (a count per value)."""
        from pyspark.sql import functions as F

        from obda.execution.answers import AT, value_column

        keys = [AT] + [value_column(i) for i in range(self.plan.groups)]
        aggs = []
        for it in self.plan.items:
            if it.function is None or it.function.name in _HOLISTIC:
                continue
            x = F.lit(1) if it.position is None else F.col(value_column(it.position))
            name = it.function.name
            if name == "count":
                aggs.append(F.count(x))
            elif name == "sum":
                aggs.append(F.sum(x))
            elif name == "avg":
                aggs += [F.sum(x), F.count(x)]
            elif name == "max":
                aggs.append(F.max(x))
            else:  # min, sample (any value of the group: the smallest, so that runs agree)
                aggs.append(F.min(x))
        out = [("partial", answers.groupBy(*keys).agg(*(aggs or [F.count(F.lit(1))])))]
        for j, it in enumerate(self.plan.items):
            if it.function is not None and it.function.name in _HOLISTIC:
                v = value_column(it.position)
                out.append((("values", j), answers.where(F.col(v).isNotNull()).groupBy(*keys, v).count()))
        return out

    def add_partial(self, kind, at, vals: tuple) -> None:
        """One collected row of a :meth:`partial_frames` frame."""
        self.pending.append((at, kind, vals))

    def _apply(self, kind, payload, accs: list) -> None:
        items = self.plan.items
        if kind == "answer":
            for j, it in enumerate(items):
                if it.function is not None:
                    v = 1 if it.position is None else payload.values[it.position]
                    accs[j] = _update(it.function.name, accs[j], v, payload.count)
            return
        g = self.plan.groups
        if kind == "partial":
            parts = list(payload[g:])
            for j, it in enumerate(items):
                if it.function is None or it.function.name in _HOLISTIC:
                    continue
                if it.function.name == "avg":
                    p, parts = (parts[0], parts[1]), parts[2:]
                else:
                    p, parts = parts[0], parts[1:]
                accs[j] = _merge(it.function.name, accs[j], p)
            return
        j = kind[1]  # ("values", j): value, count
        value, n = payload[g], payload[g + 1]
        accs[j] = _update(items[j].function.name, accs[j], value, n)

    def finish_batch(self) -> list[dict]:
        """Apply the micro-batch's answers and partials in timestamp order; the changelog records, in order."""
        plan = self.plan
        items = plan.items
        by_ts: dict[int | None, list[tuple]] = {}
        for ts, kind, payload in self.pending:
            by_ts.setdefault(ts, []).append((kind, payload))
        self.pending = []
        out: list[dict] = []
        for ts in sorted(by_ts, key=lambda t: (t is not None, t or 0)):
            changed: dict[tuple, None] = {}
            for kind, payload in by_ts[ts]:
                key = tuple(payload.values[: plan.groups] if kind == "answer" else payload[: plan.groups])
                accs = self.groups.get(key)
                if accs is None:
                    accs = self.groups[key] = [None if it.function is None else _init(it.function.name) for it in items]
                self._apply(kind, payload, accs)
                changed[key] = None
            for key in sorted(changed, key=repr):
                accs = self.groups[key]
                binding = {it.name: (key[it.position] if it.function is None else _value(it.function.name, accs[j]))
                           for j, it in enumerate(items)}
                out.append({"emitted_at": ts, "op": "upsert", "binding": binding})
        self.lines += len(out)
        return out

    @property
    def size(self) -> int:
        """State entries: groups, plus the values counted for COUNT(DISTINCT) / MEDIAN."""
        return sum(1 + sum(len(a) for a in accs if isinstance(a, dict)) for accs in self.groups.values())

    def state(self) -> dict:
        return {"groups": [(k, v) for k, v in self.groups.items()], "lines": self.lines}

    def restore(self, st: dict) -> None:
        self.groups = {tuple(k): list(v) for k, v in st["groups"]}
        self.lines = st["lines"]
        self.pending = []


def changelog_lines(records: list[dict], columns: tuple[str, ...]) -> list[str]:
    """The changelog records as JSON lines (``emitted_at`` as ISO text, values as JSON scalars)."""
    out = []
    for r in records:
        at = json.dumps(micros_to_iso(r["emitted_at"]))
        binding = ", ".join(f"{json.dumps(c)}: {_json_scalar(r['binding'][c])}" for c in columns)
        out.append(f'{{"emitted_at": {at}, "op": {json.dumps(r["op"])}, "binding": {{{binding}}}}}')
    return out
