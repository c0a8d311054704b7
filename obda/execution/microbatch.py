"""How a micro-batch is computed on Spark: one pass, for one query or a group of queries over the same streams.

A lone query (:meth:`ContinuousQuery.step <obda.execution.query.ContinuousQuery.step>`) is a group
of one; the service's shared loop (:class:`~obda.execution.shared.SharedScan`) hands every query
running over the same streams in one group.  :func:`spark_batch` is the whole micro-batch:

1. **Read.**  The micro-batch's files — the new ones, and the files that still hold rows of a
   query's open timestamps — become one projected DataFrame (:class:`~obda.execution.scan.Scan`),
   cached lazily: the stages of the one job below share its partitions, each parsed once.
2. **Plan every timestamp.**  Each query plans its answers, synopsis updates and aggregate partials
   for every timestamp after its last closed one, ``(lo, ∞)``, each row tagged with its timestamp
   (:meth:`ContinuousQuery.closing <obda.execution.query.ContinuousQuery.closing>`,
   :mod:`obda.execution.distributed`).
3. **One job.**  Those parts and the per-file stats (counts, late and invalid rows, timestamps: the
   marker's input, :func:`~obda.execution.scan.stats_frame`) are collected by **one** Spark job
   (:func:`obda.execution.distributed.collect_tagged`), the stats first.
4. **Close.**  From the stats each query's marker moves (``apply_stats``): ``(lo, hi]`` closes.  The
   driver keeps the rows of the job tagged at or before ``hi`` (answers emitted in timestamp order,
   updates merged into the synopses) and drops the rest; the timestamps after ``hi`` are answered
   by a later micro-batch, from the files that still hold their rows.
5. **Write.**  A sink that writes with Spark (a directory) writes the answers of ``(lo, hi]`` — a
   second job, over the cached rows.  The caller then commits (quarantine, sink, checkpoint).

A query with declared k-constraints runs in two phases instead: its check of a closed timestamp's
keys must come before the answers that the violating keys would change (the stats job first, then
the check and the closing; docs/cluster.md).  Jobs per micro-batch are counted in
tests/execution/test_exec_jobs.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from obda.execution import distributed
from obda.execution.scan import Scan, ScanRead, stats_frame, stats_of


@dataclass
class Member:
    """One query of a micro-batch: its new files, whether its input ends, and what the batch decided."""

    key: str
    query: object  # obda.execution.query.ContinuousQuery
    new: dict[str, list[str]]
    final: bool
    batch: object = None  # query._Batch: the range that closed, the quarantine
    closing: object = None  # query._Closing
    error: BaseException | None = None


def spark_batch(spark, members: list[Member], reads: list[ScanRead], cache: dict, new_bytes: int,
                fail: Callable[[Member, BaseException], None]) -> None:
    """Compute one micro-batch of ``members`` over ``reads`` (module docstring).  A member whose planning or
    closing raises is handed to ``fail`` (which may re-raise) and takes no further part."""
    pipelines = {m.query.ns: m.query.pipelines_by_table() for m in members}
    readers = {m.query.ns: m.query.reader() for m in members}
    with Scan(spark, reads, pipelines, cache, new_bytes) as scan:
        projected = scan.projected
        if projected is None or any(m.query.runtime.constraints is not None for m in members):
            stats = scan.stats(readers)
            for m in members:
                _guard(m, fail, lambda m=m: _closed(m, reads, stats, projected, new_bytes))
            _collect(members, [], new_bytes, None)
        else:
            for m in members:
                _guard(m, fail, lambda m=m: _open(m, projected, new_bytes))

            def close(rows):
                stats = stats_of(rows, readers)
                for m in members:
                    _guard(m, fail, lambda m=m: _range(m, reads, stats))

            _collect(members, [stats_frame(projected, readers)], new_bytes, close)
        for m in members:
            _guard(m, fail, lambda m=m: m.closing.finish())


def _closed(m: Member, reads, stats, projected, new_bytes: int) -> None:
    """Two phases: the range from the stats, then the closing planned for it."""
    m.batch = m.query.apply_stats(reads, stats, m.new, m.final)
    m.closing = m.query.closing(projected, m.batch, new_bytes=new_bytes)


def _open(m: Member, projected, new_bytes: int) -> None:
    """One pass: the closing planned for ``(lo, ∞)``, its range set once the stats are in."""
    from obda.execution.query import _Batch

    m.closing = m.query.closing(projected, _Batch(lo=m.query.runtime.closed_upto, final=m.final), open_ended=True,
                                new_bytes=new_bytes)


def _range(m: Member, reads, stats) -> None:
    m.batch = m.query.apply_stats(reads, stats, m.new, m.final)
    m.closing.set_range(m.batch)


def _guard(m: Member, fail, fn) -> None:
    if m.error is not None:
        return
    try:
        fn()
    except Exception as e:  # noqa: BLE001 - that query fails alone (``fail`` decides)
        m.error = e
        fail(m, e)


def _collect(members: list[Member], head: list, new_bytes: int, on_head) -> None:
    """One job: ``head`` (the stats, handed to ``on_head`` before any other row) and every member's parts,
    each row to its member's closing."""
    parts, owners = list(head), []
    for i, m in enumerate(members):
        if m.error is None:
            for t, df in enumerate(m.closing.parts):
                parts.append(df)
                owners.append((i, t))
    spill = next((d for m in members if m.error is None
                  for d in [m.query.spill_dir(m.closing, new_bytes)] if d is not None), None)
    got: list[tuple] = []
    pending = on_head is not None
    for tag, at, vals in distributed.collect_tagged(parts, spill_dir=spill):
        if tag < len(head):
            got.append(vals)
            continue
        if pending:
            on_head(got)
            pending = False
        i, local = owners[tag - len(head)]
        if members[i].error is None:
            members[i].closing.consume(local, at, vals)
    if pending:
        on_head(got)
