"""Execution stage: run unfolded SQL continuously, in application-time order, in bounded memory.

Python API (what the CLI and the HTTP API call)::

    from obda.analysis import plan_execution
    from obda.execution import ContinuousQuery, JsonLinesSink, get_spark

    q = ContinuousQuery(
        plan_execution(           # the analysis's one plan: forest, verdicts, aggregate plan (computed once)
            sql,                  # SQL text, sqlglot expression or Compilation: UNION [ALL] of SPJ members
            sources,              # obda.model.sources.Sources (locations relative to base_dir)
            report),              # the analysis report already shown, verdict strings per SELECT, or None
        base_dir="demo",
        sink=JsonLinesSink("out.jsonl"),   # or ConsoleSink(), MemorySink() (default; .queue / .drain())
        quarantine="quarantine.jsonl",     # late / invalid rows with reasons (default: <checkpoint>/quarantine.jsonl, else memory)
        checkpoint_dir="ckpt",    # synopsis state + consumed files + sink offsets; restart continues exactly once
        allow_unbounded=False,    # members not verdict 'bounded' run only with this opt-in (full-history state)
        idle_timeout=None,        # seconds without new rows after which a stream no longer holds markers back
        spark=None, master=None,  # a SparkSession, or a master URL for get_spark (default local[*])
        backend="spark",          # or "local": the same forest evaluated in Python (small inputs, tests)
        max_files_per_batch=None, # per stream table and micro-batch
        max_bytes_per_batch=256 << 20,  # bytes of new files one micro-batch reads (at least one file per stream)
        shared=None,              # a SharedScan: run with the other queries over the same streams
    )
    q.run_until_exhausted()       # read every file present, then close all timestamps (end of input)
    q.start(); ...; q.stop()      # background polling for new files every trigger_interval seconds
    q.step()                      # one micro-batch
    q.metrics.to_dict()           # rows in per stream, rows out, late, invalid, state entries/bytes, latency
    q.describe()                  # the executed plan: per member its verdict and synopses

    get_spark(master=None) -> SparkSession   # UTC session time zone, UI off, quiet logs

Output lines (one per answer occurrence; DISTINCT queries emit each answer once)::

    {"emitted_at": "2024-01-01T00:00:05Z", "binding": {"x": "http://.../turbine/7"}}

With ``sink=DirectorySink("out/")`` the answers are part files written by the Spark
executors and published by an atomic commit log (exactly once across restarts).

Design (why a driven micro-batch loop instead of ``readStream.foreachBatch``):

* The query reads **several** stream tables with different schemas and must
  process them in one application-time order with one marker; the synopsis
  state, the set of consumed files of every stream and the output offset must
  be committed **atomically** for exactly-once restarts.  Spark Structured
  Streaming commits offsets per query and source and cannot checkpoint our
  synopses with them.  So the executor drives the loop itself, as Spark's
  FileStreamSource does internally: list each stream's directory, take the new
  files (name order, within ``max_files_per_batch`` and ``max_bytes_per_batch``),
  read them with ``spark.read`` and commit ``(consumed files, files with open
  rows, synopses, sink offset)`` in one atomic checkpoint after the sink was
  flushed; the sink publishes after the checkpoint.
* **Answers are computed where the data is** (Spark backend; docs/cluster.md):
  the micro-batch's files are read once into one projected, cached DataFrame
  (:mod:`obda.execution.scan`); a per-file stats job gives the marker; the range
  of timestamps that closes is answered by Spark (:mod:`obda.execution.distributed`:
  the synopsis forest over the range's rows, the past synopses broadcast), the
  answers are written by the sink, and only the synopsis updates (aggregated per
  key) reach the driver.  Rows of timestamps still open are not held: their files
  are read again by the next micro-batch.
* :mod:`obda.execution.shared` runs several queries over the same streams with
  one listing, one read and one collect job per micro-batch (the service does).
* The local backend (:mod:`obda.execution.rows`, :mod:`obda.execution.runtime`,
  :mod:`obda.execution.engine`) evaluates the same forest in Python one closed
  timestamp at a time: Theorem 1 counters or Theorem 2 existence sets with one
  extreme attribute.  The same machinery runs unbounded members when opted in:
  their keys then contain unbounded attributes, so the state is the (aggregated)
  full history, and its growth is reported in ``metrics``.
* The synopsis forest of every member comes from the analysis
  (:mod:`obda.analysis.forest`), handed over in one
  :class:`~obda.analysis.execution_plan.ExecutionPlan`; the executor neither parses SQL nor analyses.
"""

from obda.execution.query_engine import Answer, QueryEngine
from obda.execution.query import ContinuousQuery
from obda.execution.rows import TableBatch
from obda.execution.runtime import Metrics, Runtime
from obda.execution.sinks import ConsoleSink, JsonLinesSink, MemorySink, QuarantineSink, Sink, answer_lines
from obda.execution.spark_io import get_spark
from obda.execution.directory_sink import DirectorySink  # after sinks: it imports them
from obda.execution.shared import SharedScan

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
    "SharedScan",
    "Sink",
    "TableBatch",
    "answer_lines",
    "get_spark",
]
