"""The SQL text of one micro-batch's Spark plan: column names, small frames, relations and joins.

:class:`~obda.execution.distributed.SparkForest` plans a micro-batch as one statement of common table
expressions (:class:`Statement`) over the scan, the past synopses and the static tables; this module holds its
parts: the member's attribute names inside the plan (:class:`Names`), a small local frame of counted tuples
(:func:`small_frame`), a relation of the plan (:class:`SqlRel`) and the greedy join order (:class:`Joiner`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal
from typing import Iterable

from obda.analysis.forest import Attr, CrossPred
from obda.execution.relations import Counted
from obda.execution.spark_io import local_frame


class Names:
    """Column names of a member's attributes inside its Spark plan (unique, SQL-safe)."""

    def __init__(self):
        self._names: dict[Attr, str] = {}

    def __call__(self, a: Attr) -> str:
        n = self._names.get(a)
        if n is None:
            n = self._names[a] = f"x{len(self._names)}_" + re.sub(r"\W", "_", f"{a[0]}_{a[1]}")[:40]
        return n


def spark_type(values: Iterable):
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


def small_frame(spark, names: list[str], data: Counted, count: str | None, types: dict | None = None):
    """A small DataFrame of counted tuples (driver state or static rows): one column per name, plus ``count``."""
    from pyspark.sql import types as T

    rows = list(data.items())
    fields = []
    for i, n in enumerate(names):
        t = (types or {}).get(n) or spark_type(k[i] for k, _ in rows)
        fields.append(T.StructField(n, t, True))
    if count is not None:
        fields.append(T.StructField(count, T.LongType(), False))
        tuples = [tuple(k) + (c,) for k, c in rows]
    else:
        tuples = [tuple(k) for k, _ in rows]
    return local_frame(spark, tuples, T.StructType(fields))


def quoted(name: str) -> str:
    return f"`{name}`"


def predicate_sql(p: CrossPred, nm: Names) -> str:
    right = quoted(nm(p.right))
    if p.offset:  # an interval join: timestamps are long microseconds here (spark_io._projection)
        right = f"({right} + {int(p.offset)})"
    return f"{quoted(nm(p.left))} {p.op} {right}"


def conjunction(conds) -> str | None:
    conds = [c for c in conds if c]
    return " AND ".join(f"({c})" for c in conds) if conds else None


@dataclass
class SqlRel:
    """A relation of the member's plan: a common table expression, its attributes, timestamp and count columns."""

    name: str
    attrs: frozenset
    ts: str | None = None
    count: str | None = None


class Statement:
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

    def scoped(self, prefix: str) -> "Statement":
        """This statement for another plan (a check's query): the same expressions, its names prefixed."""
        out = Statement()
        out.ctes, out.args = self.ctes, self.args
        out.add = lambda name, sql: self.add(prefix + name, sql)  # type: ignore[method-assign]
        return out

    def frame(self, spark, select: str):
        ctes = ",\n".join(f"{quoted(n)} AS ({s})" for n, s in self.ctes.items())
        return spark.sql(f"WITH {ctes}\n{select}" if ctes else select, args=dict(self.args))


class Joiner:
    """Joins relations one by one, applying each condition as soon as its attributes are present."""

    def __init__(self, first: SqlRel, preds: Iterable[CrossPred], nm: Names):
        self.sql = quoted(first.name)
        self.attrs = set(first.attrs)
        self.counts = [first.count] if first.count else []
        self.pending = list(preds)
        self.nm = nm

    def join(self, rel: SqlRel, extra: str | None = None) -> None:
        self.attrs |= rel.attrs
        ready = [p for p in self.pending if set(p.attrs) <= self.attrs]
        self.pending = [p for p in self.pending if p not in ready]
        cond = conjunction([predicate_sql(p, self.nm) for p in ready] + [extra])
        # no broadcast: a broadcast is a Spark job of its own, and the micro-batch is one job
        # (spark_io.configure_session turns automatic broadcasts off)
        self.sql += f" JOIN {quoted(rel.name)} ON {cond}" if cond else f" CROSS JOIN {quoted(rel.name)}"
        if rel.count:
            self.counts.append(rel.count)

    def join_all(self, candidates: list[tuple["SqlRel", str | None, bool]]) -> None:
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
        return " * ".join(quoted(c) for c in self.counts) if self.counts else None

    def done(self, select: str) -> str:
        """``SELECT select FROM`` the joins ``WHERE`` the conditions among the first relation's own attributes."""
        where = conjunction([predicate_sql(p, self.nm) for p in self.pending])
        self.pending = []
        return f"SELECT {select} FROM {self.sql}" + (f" WHERE {where}" if where else "")
