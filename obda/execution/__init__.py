"""Execution stage: run unfolded SQL continuously, in application-time order, in bounded memory.

Python API (what the CLI and the HTTP API call)::

    from obda.execution import ContinuousQuery, JsonLinesSink, get_spark

    q = ContinuousQuery(
        sql,                      # SQL text, sqlglot expression or Compilation: UNION [ALL] of SPJ members
        sources,                  # obda.model.sources.Sources (locations relative to base_dir)
        report,                   # obda.analysis report, verdict strings per SELECT, or None (analysed here)
        base_dir="demo",
        sink=JsonLinesSink("out.jsonl"),   # or ConsoleSink(), MemorySink() (default; .queue / .drain())
        quarantine="quarantine.jsonl",     # late / invalid rows with reasons (default: <checkpoint>/quarantine.jsonl, else memory)
        checkpoint_dir="ckpt",    # synopsis state + consumed files + sink offsets; restart continues exactly once
        allow_unbounded=False,    # members not verdict 'bounded' run only with this opt-in (full-history state)
        idle_timeout=None,        # seconds without new rows after which a stream no longer holds markers back
        spark=None, master=None,  # a SparkSession, or a master URL for get_spark (default local[*])
        backend="spark",          # or "local": the same pipelines evaluated in Python (small inputs, tests)
        max_files_per_batch=None, # per stream table and micro-batch
        prefetch=32,              # Spark: micro-batches read ahead, in the job of the current one (0: none)
        prefetch_bytes=128 << 20, # Spark: files one such job reads at most (bytes; at least one micro-batch)
    )
    q.run_until_exhausted()       # read every file present, then close all timestamps (end of input)
    q.start(); ...; q.stop()      # background polling for new files every trigger_interval seconds
    q.step()                      # one micro-batch
    q.metrics.to_dict()           # rows in per stream, rows out, late, invalid, state entries/bytes, latency
    q.describe()                  # the executed plan: per member its verdict and synopses

    get_spark(master=None) -> SparkSession   # UTC session time zone, UI off, quiet logs

Output lines (one per answer occurrence; DISTINCT queries emit each answer once)::

    {"emitted_at": "2024-01-01T00:00:05Z", "binding": {"x": "http://.../turbine/7"}}

Design (why a driven micro-batch loop instead of ``readStream.foreachBatch``):

* The query reads **several** stream tables with different schemas and must
  process them in one application-time order with one marker; the synopsis
  state, the set of consumed files of every stream and the output offset must
  be committed **atomically** for exactly-once restarts.  Spark Structured
  Streaming commits offsets per query and source and cannot checkpoint our
  driver-side synopses with them.  So the executor drives the loop itself,
  exactly as Spark's FileStreamSource does internally: list each stream's
  directory, take the new files (in name order, optionally at most
  ``max_files_per_batch``), read them with ``spark.read`` (distributed), and
  commit ``(consumed files, synopses, open-timestamp buffer, sink offset)`` in
  one atomic checkpoint file after the sink was flushed.  On restart the sink
  is truncated to the committed offset and the uncommitted batch is re-read:
  no lost and no repeated output.
* Per micro-batch **one Spark job** reads the new files of every stream table
  (one DataFrame per table and format: explicit schema, PERMISSIVE +
  ``_corrupt_record``, every declared column parsed so that a bad value
  anywhere marks the row invalid), projects each to a tag, the row's validity,
  its timestamp, one flag per pipeline (that alias' local conditions, as
  Spark SQL) and the synopsis keys, unites them by name and groups by all of
  these with a count (:mod:`obda.execution.spark_io`).  Only these aggregated
  rows reach the driver.  Lateness is decided on the driver from the grouped
  timestamps (the job does not depend on the marker).  A second job runs only
  when a batch has late or invalid rows, to collect them for the quarantine.
  Why one job and not one per table: on a small cluster a micro-batch's cost
  is mostly per-job overhead (DataFrame analysis, planning, scheduling of a
  map and a result stage), not rows; measured in
  ``benchmarks/executor_vs_spark.py``.  The groups leave Spark as Arrow
  batches (``DataFrame.toArrow``), not pickled ``Row`` objects.
* **Read-ahead**: when more files are waiting, one job reads micro-batch k
  and up to ``prefetch`` following ones, as many as fit in ``prefetch_bytes``
  of files with it (:func:`spark_io.collect_batches`:
  one read per table and format, every row also grouped by its file, a
  64-bit hash of its name, and the groups split back per micro-batch), since
  a small micro-batch's cost is mostly the per-job overhead.  As soon as the
  micro-batches read ahead have at most ``prefetch_bytes`` of files, the
  job of the next ones starts in a helper thread, so Spark plans and scans
  the next files while the driver updates synopses, writes answers and
  checkpoints.  Each micro-batch is
  still decoded (lateness), closed, emitted and checkpointed on its own, so
  the output equals that of one job per micro-batch.  This is safe because
  the job does not depend on the marker; its result is a cache (files count
  as consumed only when their batch is checkpointed).  The byte budget, not
  the count, is what bounds the groups read ahead in memory (at most one
  group per row of twice ``prefetch_bytes`` of files); with it, a backlog (a
  catch-up after downtime) is read in as few jobs as it allows: the
  benchmark's 8 waiting micro-batches in one job instead of two, about 20%
  less time.
* :mod:`obda.execution.runtime` buffers the open timestamps (aggregated) and
  closes a timestamp when every stream passed it, at the end of input, or when
  the lagging streams were idle for ``idle_timeout``.
* The synopsis forest of every member comes from the analysis
  (:mod:`obda.analysis.forest`: merged synchronous streams, parent/child by
  ``τ_child < τ_parent``, static tables attached where they join, keys =
  attributes still needed above, per-atom views); the executor neither
  parses SQL nor plans.  :mod:`obda.execution.views` deduplicates view rows
  per timestamp; :mod:`obda.execution.engine` keeps Theorem 1 counters (current/past) or
  Theorem 2 existence sets with one extreme attribute, and computes answers at
  every closed timestamp.  The same machinery runs unbounded members when
  opted in: their keys then contain unbounded attributes, so the state is the
  (aggregated) full history, and its growth is reported in ``metrics``.
"""

from obda.execution.engine import Answer, QueryEngine
from obda.execution.query import ContinuousQuery, member_verdicts
from obda.execution.runtime import Metrics, Runtime, TableBatch
from obda.execution.sinks import ConsoleSink, JsonLinesSink, MemorySink, QuarantineSink, Sink, answer_lines
from obda.execution.spark_io import get_spark
from obda.execution.directory_sink import DirectorySink  # after sinks: it imports them

__all__ = [
    "Answer",
    "ConsoleSink",
    "ContinuousQuery",
    "DirectorySink",
    "JsonLinesSink",
    "MemorySink",
    "Metrics",
    "QuarantineSink",
    "QueryEngine",
    "Runtime",
    "Sink",
    "TableBatch",
    "answer_lines",
    "get_spark",
    "member_verdicts",
]
