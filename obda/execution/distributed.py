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
from obda.execution.engine import Counted, MemberEngine, QueryEngine
from obda.execution.scan import flag_column, key_column
from obda.model.query import OPS

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
    return spark.createDataFrame(tuples, T.StructType(fields))


def _pred(p: CrossPred, nm: _Names):
    from pyspark.sql import functions as F

    left, right = F.col(nm(p.left)), F.col(nm(p.right))
    if p.offset:  # an interval join: timestamps are long microseconds here (spark_io._projection)
        right = right + F.lit(p.offset).cast("long")
    return OPS[p.op](left, right)


@dataclass
class _Rel:
    """A relation of the member's plan: DataFrame, its attributes, its timestamp column, its count column."""

    df: object
    attrs: frozenset
    ts: str | None = None
    count: str | None = None


class _Joiner:
    """Joins relations one by one, applying each condition as soon as its attributes are present."""

    def __init__(self, first: _Rel, preds: Iterable[CrossPred], nm: _Names):
        self.df = first.df
        self.attrs = set(first.attrs)
        self.counts = [first.count] if first.count else []
        self.pending = list(preds)
        self.nm = nm

    def join(self, rel: _Rel, extra=None) -> None:
        from pyspark.sql import functions as F

        self.attrs |= rel.attrs
        ready = [p for p in self.pending if set(p.attrs) <= self.attrs]
        self.pending = [p for p in self.pending if p not in ready]
        cond = None
        for c in [_pred(p, self.nm) for p in ready] + ([extra] if extra is not None else []):
            cond = c if cond is None else cond & c
        # no broadcast: a broadcast is a Spark job of its own, and the micro-batch is one job
        # (spark_io.configure_session turns automatic broadcasts off)
        self.df = self.df.join(rel.df, on=cond, how="inner") if cond is not None else self.df.crossJoin(rel.df)
        if rel.count:
            self.counts.append(rel.count)

    def join_all(self, candidates: list[tuple["_Rel", object, bool]]) -> None:
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

    def count_expr(self):
        from pyspark.sql import functions as F

        if not self.counts:
            return None
        e = F.col(self.counts[0])
        for c in self.counts[1:]:
            e = e * F.col(c)
        return e

    def done(self):
        for p in self.pending:  # conditions among the first relation's own attributes
            self.df = self.df.where(_pred(p, self.nm))
        self.pending = []
        return self.df


class SparkForest:
    """The Spark side of one query: builds, per micro-batch, its answers and synopsis updates.

    The static tables' rows (as the driver loaded them, ``engine``'s statics) become one
    cached DataFrame per static alias, built on first use.
    """

    def __init__(self, spark, forest: Forest, engine: QueryEngine, ns: str = ""):
        self.spark = spark
        self.ns = ns  # the query's namespace in the columns of a shared scan (obda.execution.scan)
        self.forest = forest
        self.engine = engine
        self._names = [_Names() for _ in forest.members]
        self._statics: dict[tuple[int, str], _Rel] = {}

    # -- inputs -------------------------------------------------------------------------------
    def _range(self, lo: int | None, hi: int | None):
        from pyspark.sql import functions as F

        ts = F.col(TS)
        cond = ts.isNotNull()
        if lo is not None:
            cond = cond & (ts > F.lit(lo))
        if hi is not None:
            cond = cond & (ts <= F.lit(hi))
        return cond

    def _alias_rows(self, batch, mi: int, alias: str, rng, tcol: str) -> _Rel:
        """The rows of a stream alias in the range: its timestamp as ``tcol``, its attributes."""
        from pyspark.sql import functions as F

        mf = self.forest.members[mi]
        nm = self._names[mi]
        p = mf.pipelines[alias]
        views: ViewDedupe = self.forest.views
        positions = views.positions.get(p.id)
        if positions is None:
            df = batch.where(F.col(flag_column(p.id, self.ns)) & rng).select(
                F.col(TS).alias(tcol), *[F.col(key_column(p.id, j, self.ns)).alias(nm(a)) for j, a in enumerate(p.attrs)]
            )
            return _Rel(df, frozenset(p.attrs), tcol)
        # a per-atom view: the distinct rows of every branch per timestamp, projected onto the alias
        branches = sorted(b for b, t in views.branch_of.items() if t == p.id)
        width = len(next(q for q in self.forest.pipelines if q.id == branches[0]).attrs)
        union = None
        for b in branches:
            part = batch.where(F.col(flag_column(b, self.ns)) & rng).select(
                F.col(TS).alias(tcol), *[F.col(key_column(b, j, self.ns)).alias(f"__r{j}") for j in range(width)]
            )
            union = part if union is None else union.unionByName(part)
        union = union.distinct()
        df = union.select(
            F.col(tcol), *[(F.col(tcol) if i < 0 else F.col(f"__r{i}")).alias(nm(a)) for i, a in zip(positions, p.attrs)]
        )
        return _Rel(df, frozenset(p.attrs), tcol)

    def _static(self, mi: int, alias: str) -> _Rel:
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
            df = _frame(self.spark, [nm(a) for a in p.attrs], data, count)
            rel = self._statics[key] = _Rel(df, frozenset(p.attrs), None, count)
        return rel

    def _past(self, mi: int, node_id: int, tcol: str, count: str) -> _Rel | None:
        """The node's past synopsis (driver state) as a DataFrame with a NULL timestamp, or None when empty."""
        from pyspark.sql import functions as F
        from pyspark.sql import types as T

        me = self.engine.members[mi]
        node = me.plan.nodes[node_id]
        data = me.past[node_id].data
        if not data:
            return None
        nm = self._names[mi]
        df = _frame(self.spark, [nm(a) for a in node.key], data, count)
        df = df.select(F.lit(None).cast(T.LongType()).alias(tcol), *[nm(a) for a in node.key], count)
        return _Rel(df, frozenset(node.key), tcol, count)

    # -- one member ---------------------------------------------------------------------------
    def _cur(self, batch, mi: int, node_id: int, rng, memo: dict) -> _Rel:
        """``cur(n)`` over the range: (timestamp, key attributes, count?) — not aggregated."""
        if node_id in memo:
            return memo[node_id]
        from pyspark.sql import functions as F

        mf = self.forest.members[mi]
        nm = self._names[mi]
        n = mf.nodes[node_id]
        tcol = f"__t{node_id}"
        first = self._alias_rows(batch, mi, n.aliases[0], rng, tcol)
        j = _Joiner(first, n.preds, nm)
        candidates = []
        for k, a in enumerate(n.aliases[1:]):  # the unit's other aliases: same timestamp
            other = self._alias_rows(batch, mi, a, rng, f"{tcol}_{k}")
            candidates.append((other, F.col(f"{tcol}_{k}") == F.col(tcol), True))
        for c in n.children:  # strictly earlier rows of each child (its past has no timestamp)
            rel = self._all(batch, mi, c, rng, memo, f"__a{node_id}_{c}")
            if rel is None:
                memo[node_id] = None
                return None
            candidates.append((rel, F.col(rel.ts).isNull() | (F.col(rel.ts) < F.col(tcol)), False))
        for s in n.statics:
            candidates.append((self._static(mi, s), None, False))
        j.join_all(candidates)
        df = j.done()
        count = j.count_expr()
        cname = f"__c{node_id}"
        cols = [F.col(tcol)] + [F.col(nm(a)) for a in n.key] + ([count.alias(cname)] if count is not None else [])
        rel = _Rel(df.select(*cols), frozenset(n.key), tcol, cname if count is not None else None)
        memo[node_id] = rel
        return rel

    def _all(self, batch, mi: int, node_id: int, rng, memo: dict, prefix: str) -> _Rel | None:
        """``past ∪ cur`` of a node, its timestamp and count columns renamed with ``prefix``."""
        from pyspark.sql import functions as F

        nm = self._names[mi]
        node = self.forest.members[mi].nodes[node_id]
        tcol, count = f"{prefix}_t", f"{prefix}_c"
        cur = self._cur(batch, mi, node_id, rng, memo)
        parts = []
        if cur is not None and self.forest.members[mi].distinct:
            # set semantics: a later row reads only whether an entry with its key came before it, so the
            # batch's rows of one key shrink to the earliest before joining (dense data: each reading would
            # otherwise join every earlier row of its key in the batch, and only then be deduplicated)
            keys = [nm(a) for a in node.key]
            earliest = F.min(F.col(cur.ts)).alias(tcol)
            df = cur.df.groupBy(*keys).agg(earliest) if keys else cur.df.agg(earliest).where(F.col(tcol).isNotNull())
            parts.append(df.select(F.col(tcol), *keys, F.lit(1).cast("long").alias(count)))
        elif cur is not None:
            parts.append(
                cur.df.select(
                    F.col(cur.ts).alias(tcol), *[nm(a) for a in node.key],
                    (F.col(cur.count) if cur.count else F.lit(1).cast("long")).alias(count),
                )
            )
        past = self._past(mi, node_id, tcol, count)
        if past is not None:
            parts.append(past.df)
        if not parts:
            return None
        df = parts[0] if len(parts) == 1 else parts[0].unionByName(parts[1])
        return _Rel(df, frozenset(node.key), tcol, count)

    def _answers(self, batch, mi: int, rng, memo: dict):
        """The member's answers in the range: ``__at``, the bound values, one row per occurrence."""
        from pyspark.sql import functions as F

        mf = self.forest.members[mi]
        nm = self._names[mi]
        out = None
        for i, r in enumerate(mf.roots):
            cur = self._cur(batch, mi, r, rng, memo)
            if cur is None:
                continue
            j = _Joiner(cur, mf.forest_preds, nm)
            candidates = []
            for k, q in enumerate(mf.roots):
                if k == i:
                    continue
                rel = self._all(batch, mi, q, rng, memo, f"__r{mi}_{i}_{k}")
                if rel is None:
                    break
                before = F.col(rel.ts) < F.col(cur.ts) if k < i else F.col(rel.ts) <= F.col(cur.ts)
                candidates.append((rel, F.col(rel.ts).isNull() | before, False))
            else:
                for s in mf.forest_statics:
                    candidates.append((self._static(mi, s), None, False))
                j.join_all(candidates)
                candidates = None
            if candidates is not None:  # another root has no rows at all yet: no answer
                continue
            df = j.done()
            count = j.count_expr()
            cols = [F.col(cur.ts).alias(AT)] + [
                self._bind(it, nm).alias(value_column(k)) for k, it in enumerate(mf.member.items)
            ]
            if count is not None and not self.forest.distinct:
                df = df.select(*cols, count.alias("__n")).where(F.col("__n") > 0)
                df = df.select(AT, *[value_column(k) for k in range(len(cols) - 1)],
                               F.explode(F.array_repeat(F.lit(0), F.col("__n").cast("int"))).alias("__rep")).drop("__rep")
            else:
                df = df.select(*cols)
            out = df if out is None else out.unionByName(df)
        return out

    @staticmethod
    def _bind(item, nm: _Names):
        from pyspark.sql import functions as F

        if item.kind == "attr":
            return F.col(nm(item.attr))
        if item.kind == "const":
            return F.lit(item.value)
        parts = [F.lit(v) if k == "const" else F.col(nm(v)).cast("string") for k, v in item.parts]
        return F.concat(*parts)

    # -- the micro-batch ------------------------------------------------------------------------
    def evaluate(self, batch, lo: int | None, hi: int | None,
                 keep_upto: int | None = None) -> tuple[object | None, dict[int, dict[int, object]]]:
        """The answers of the closed range ``(lo, hi]`` and, per member and node, the synopsis update frames.

        ``batch``: the projected rows of the micro-batch.  ``hi`` None: no upper bound.
        Returns the answers DataFrame (None when no member can answer) and ``{member: {node:
        DataFrame of the node's key (+ count)}}`` for the nodes whose past the engine keeps
        once ``keep_upto`` (default ``hi``) closed.
        """
        keep_upto = hi if keep_upto is None else keep_upto
        rng = self._range(lo, hi)
        answers = None
        updates: dict[int, dict[int, object]] = {}
        for mi, mf in enumerate(self.forest.members):
            if mf.unsatisfiable or not mf.nodes:
                continue
            memo: dict = {}
            df = self._answers(batch, mi, rng, memo)
            if df is not None:
                answers = df if answers is None else answers.unionByName(df)
            me: MemberEngine = self.engine.members[mi]
            for n in mf.nodes:
                if keep_upto is None or not me.keeps_after(n.id, keep_upto):
                    continue
                cur = self._cur(batch, mi, n.id, rng, memo)
                if cur is not None:
                    updates.setdefault(mi, {})[n.id] = self._update(mi, n.id, cur)
        return answers, updates

    def _update(self, mi: int, node_id: int, cur: _Rel):
        """``cur(n)`` aggregated on the node's key, per timestamp (``__at``): counts summed (bags), the extreme
        kept (compressed sets); a set's key once, at its earliest timestamp.  The timestamp lets a range
        computed open-ended (the micro-batch's marker known only after its one job) keep the updates of
        the timestamps that close (``microbatch.Closing.consume``)."""
        from pyspark.sql import functions as F

        mf = self.forest.members[mi]
        nm = self._names[mi]
        n = mf.nodes[node_id]
        keys = [nm(a) for a in n.key]
        at = F.col(cur.ts).alias(AT)
        if not mf.distinct:
            c = F.col(cur.count) if cur.count else F.lit(1)
            return cur.df.groupBy(at, *keys).agg(F.sum(c).cast("long").alias("__n"))
        if n.compress is not None:
            pos, mode = n.compress
            rest = [k for i, k in enumerate(keys) if i != pos]
            agg = (F.min if mode == "min" else F.max)(F.col(keys[pos])).alias(keys[pos])
            return cur.df.groupBy(at, *rest).agg(agg).select(AT, *keys)
        return cur.df.groupBy(*keys).agg(F.min(F.col(cur.ts)).alias(AT))

    def release(self) -> None:
        """Drop the cached static frames (the query closes)."""
        for rel in self._statics.values():
            rel.df.unpersist()
        self._statics = {}


def _decoder(dtype):
    """The Python value of a column of ``dtype`` from its Spark string cast (NULL stays None)."""
    from pyspark.sql import types as T

    if isinstance(dtype, (T.LongType, T.IntegerType, T.ShortType, T.ByteType)):
        return lambda s: None if s is None else int(s)
    if isinstance(dtype, (T.DoubleType, T.FloatType)):
        return lambda s: None if s is None else float(s)
    if isinstance(dtype, T.DecimalType):
        return lambda s: None if s is None else Decimal(s)
    if isinstance(dtype, T.BooleanType):
        return lambda s: None if s is None else s == "true"
    return lambda s: s


def collect_tagged(parts: list, stream: bool = True, by_time: bool = False, spill_dir: str | None = None):
    """Collect several DataFrames of different schemas in **one** Spark job.

    ``parts``: DataFrames, each with value columns and optionally ``__at``.  They are united
    as ``(tag, __at, array of the values as strings)``, sorted by tag, then ``__at`` (``by_time``:
    by ``__at`` first, then by tag, so that a consumer can work one timestamp at a time), and
    read back in that order; each value is decoded with its column's type.  Yields
    ``(tag, at, values)``.  Why one job: a micro-batch's cost on a small cluster is mostly per
    job (planning, scheduling), not per row.

    How the rows reach the driver:

    * ``spill_dir`` (a folder the executors and the driver both see): the union keeps its
      partitions, each sorted on the executors, and Spark's writer stores them as Parquet part
      files there; the driver then merges the part files in order, one Arrow record batch per
      file at a time (:func:`_merge_spilled`), and deletes them.  Neither the JVM nor Python ever
      holds a whole micro-batch's rows: for answers that go through the driver.
    * else ``stream``: the union in one sorted partition read through ``toLocalIterator`` (the
      driver JVM holds that partition: for parts bounded by the state, or a small batch).
    * else one ``collect`` (the job's observed metrics, :func:`obda.execution.scan.observed_stats`,
      are then reported).
    """
    from pyspark.sql import functions as F

    frames, decoders = [], []
    for tag, df in enumerate(parts):
        cols = [c for c in df.columns if c != AT]
        decoders.append(tuple(_decoder(df.schema[c].dataType) for c in cols))
        at = F.col(AT) if AT in df.columns else F.lit(None).cast("long")
        values = F.array(*[F.col(c).cast("string") for c in cols]) if cols else F.array().cast("array<string>")
        frames.append(df.select(F.lit(tag).alias("__k"), at.alias(AT), values.alias("__v")))
    if not frames:
        return
    union = frames[0]
    for f in frames[1:]:
        union = union.unionByName(f)
    order = (AT, "__k") if by_time else ("__k", AT)
    if spill_dir is not None:
        rows = _spilled(union.sortWithinPartitions(*order), spill_dir, by_time)
    else:
        ordered = union.coalesce(1).sortWithinPartitions(*order)
        rows = ordered.toLocalIterator() if stream else ordered.collect()
    for k, at, vals in rows:
        dec = decoders[k]
        yield k, at, tuple(d(v) for d, v in zip(dec, vals))


def _spilled(ordered, spill_dir: str, by_time: bool):
    """Write ``ordered`` (each partition sorted) as Parquet under a fresh folder of ``spill_dir``; yield its
    rows merged in order, then delete the folder."""
    import os
    import shutil
    import uuid

    folder = os.path.join(spill_dir, f"spill-{uuid.uuid4().hex}")
    try:
        ordered.write.mode("errorifexists").parquet(folder)
        yield from _merge_spilled(folder, by_time)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _merge_spilled(folder: str, by_time: bool, batch_rows: int = 8192):
    """The rows of the sorted Parquet part files of ``folder`` as ``(tag, at, values)``, merged in order
    (tag, then ``__at`` with NULL first; ``by_time``: ``__at`` first), one record batch per file in memory."""
    import heapq
    import os

    import pyarrow.parquet as pq

    def rows(path: str):
        f = pq.ParquetFile(path)
        try:
            for b in f.iter_batches(batch_size=batch_rows, columns=["__k", AT, "__v"]):
                yield from zip(*(c.to_pylist() for c in b.columns))
        finally:
            f.close()

    def at_key(at):
        return (at is not None, at if at is not None else 0)

    key = (lambda r: (at_key(r[1]), r[0])) if by_time else (lambda r: (r[0], at_key(r[1])))
    files = sorted(os.path.join(folder, n) for n in os.listdir(folder) if n.endswith(".parquet"))
    yield from heapq.merge(*(rows(p) for p in files), key=key)
