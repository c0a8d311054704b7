"""The files a continuous query reads: its streams' listing, the cut of a micro-batch, the read requests.

A mixin of :class:`~obda.execution.query.ContinuousQuery` (it reads the query's ``plan``, ``streams``,
``base_dir``, ``processed``, ``runtime``, ``shedder``, the batch limits and, on the local backend, ``aggregate``
and ``keys``): one listing per micro-batch (:func:`~obda.execution.kafka_offsets.pending_inputs`: the files not
consumed yet, or a Kafka stream's next offset ranges), the micro-batch cut from it (:func:`cut_files`), and what
is read — Spark read requests per table and format, or, on the local backend, the rows of each file.
"""

from __future__ import annotations

from obda.execution.reader import read_records
from obda.execution.rows import TableBatch, merge_batches, process_rows
from obda.execution.spark_io import table_format
from obda.execution.spark_query import cut_files


class QueryInputs:
    """Listing, cutting and reading a query's stream files (for :class:`~obda.execution.query.ContinuousQuery`)."""

    def _tables_by_name(self):
        return {t.name: t for t in self.plan.stream_tables()}

    def _pipelines_of(self, table_name: str):
        return [p for p in self.plan.pipelines if p.table.name == table_name]

    # -- micro-batches --------------------------------------------------------------------------
    def _pending(self) -> dict[str, list[str]]:
        """Per stream table all its unprocessed files (name order), one listing."""
        self.runtime.listed()
        tables = self._tables_by_name()
        from obda.execution.kafka_offsets import pending_inputs  # files, or a Kafka stream's next offset ranges

        out = {}
        for name in self.streams:
            out[name], self._gone[name] = pending_inputs(tables[name], self.base_dir, self.processed[name],
                                                         keep=self.backend == "local")
        return out

    def _cut(self, pending: dict[str, list[str]]) -> dict[str, list[str]]:
        """The next micro-batch of ``pending`` (:func:`cut_files` with this query's limits); the rest is the
        backlog (metrics)."""
        if self.shedder is not None:  # the files that waited longer than shed.max_lag are dropped (counted at commit)
            pending = self.shedder.split(pending, self.runtime.metrics)
        new = cut_files(pending, self.max_files_per_batch, self.max_bytes_per_batch)
        self.runtime.metrics.observe_input(pending, new)
        return new

    def requests(self, files: dict[str, list[str]]):
        from obda.execution.spark_io import ReadRequest

        tables = self._tables_by_name()
        requests = []
        for name, fs in files.items():
            table, pipes = tables[name], tuple(self._pipelines_of(name))
            by_fmt: dict[str, list[str]] = {}
            for f in fs:
                by_fmt.setdefault(table_format(table, f), []).append(f)
            requests.extend(ReadRequest(table, pipes, tuple(ps), fmt) for fmt, ps in by_fmt.items())
        return requests

    def _read_local(self, new: dict[str, list[str]], closed_upto: int | None) -> list[TableBatch]:
        """Local backend: one aggregated batch per stream table with new files."""
        tables = self._tables_by_name()
        out = []
        probes = self.aggregate.probes() if self.aggregate is not None else []  # an aggregate's data timestamps
        for name, files in new.items():
            table, pipes = tables[name], self._pipelines_of(name) + probes
            parts = [
                process_rows(table, pipes, read_records(f, table, table_format(table, f), dict(table.options)),
                             closed_upto, f, keys=self.keys)
                for f in files
            ]
            self.runtime.observe_files(name, {f: p.max_ts for f, p in zip(files, parts)})  # (Kafka: per partition)
            out.append(merge_batches(name, parts))
        if probes:
            self.aggregate.observe(out)
        return out
