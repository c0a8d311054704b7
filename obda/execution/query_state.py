"""What a continuous query loads and keeps across micro-batches: its static tables (and its checks' answers,
read once when it opens), its checkpoint — restored by ``open()``, written after each committed micro-batch
— and the fingerprint that ties a checkpoint to its plan.  A mixin of
:class:`~obda.execution.query.ContinuousQuery`, whose members it reads and sets.
"""

from __future__ import annotations

import hashlib
import logging
from pathlib import Path

from obda.analysis import Forest
from obda.analysis.execution_plan import ExecutionPlan
from obda.errors import CheckpointError, ExecutionError
from obda.execution import checkpoint
from obda.execution import views as view_rows
from obda.execution.consumed import compact
from obda.execution.reader import read_records
from obda.execution.rows import static_rows
from obda.execution.spark_io import list_files, resolve_location, table_format

log = logging.getLogger("obda.execution")

CHECKPOINT_VERSION = 2


def fingerprint(plan: Forest, extra: str = "") -> str:
    h = hashlib.sha256()
    h.update(extra.encode())
    h.update(repr(plan.distinct).encode())
    if plan.constraints:  # a declared bound, kind or key changed: the watches' state means something else
        h.update(repr(sorted(map(repr, plan.constraints))).encode())
    if plan.typed_columns:  # answers of several kinds of term are held encoded (obda.model.terms)
        h.update(repr(sorted(plan.typed_columns.items())).encode())
    for m in plan.members:
        h.update(m.member.sql.encode())
        for a, t in m.member.aliases:
            h.update(f"{a}:{t.name}:{t.location}".encode())
    return h.hexdigest()


class QueryState:
    """Statics, checks' answers and checkpoint of one continuous query."""

    def _fingerprint(self) -> str:
        p = self.aggregate.plan if self.aggregate is not None else None
        extra = "" if p is None else repr((p.items, p.calls, p.having, p.group_by, p.window))
        return fingerprint(self.plan, extra)

    def _check_answers(self, forest: Forest) -> list[tuple]:
        """The answers of a check's query (static tables only), on this query's backend, read once."""
        child = type(self)(ExecutionPlan(forest, None, tuple("bounded" for _ in forest.members)),
                           base_dir=self.base_dir, backend=self.backend, spark=self._spark, master=self._master,
                           spark_conf=self._spark_conf)
        try:
            child.open()
            answers = child.engine.static_only()
        finally:
            child.close()
        read = {p.table.name for p in self.plan.static_pipelines()}
        self._static_quarantine.extend(r for r in child._static_quarantine if r.get("stream") not in read)
        self.engine.check_entries += len(answers)  # state held for the whole run, reported with the statics'
        return [a.values for a in answers]

    def _load_statics(self) -> tuple[dict[int, dict], dict[int, dict]]:
        out: dict[int, dict] = {}
        by_table: dict[str, list] = {}
        for p in self.plan.static_pipelines():
            by_table.setdefault(p.table.name, []).append(p)
        for name, pipes in by_table.items():
            table = pipes[0].table
            fmt = table_format(table)
            if self.backend == "spark":
                from obda.execution.spark_static import spark_table_batch

                paths = [] if fmt == "jdbc" else list_files(resolve_location(table, self.base_dir))
                if not paths and fmt != "jdbc":
                    raise ExecutionError(f"static table {name!r}: no data files at {resolve_location(table, self.base_dir)}")
                b = spark_table_batch(self.spark, table, pipes, paths, None, fmt)
                counted: dict[int, dict] = {}
                for per in b.groups.values():
                    for pid, rows in per.items():
                        dst = counted.setdefault(pid, {})
                        for k, c in rows.items():
                            dst[k] = dst.get(k, 0) + c
                quarantine = b.quarantine
            else:
                paths = list_files(resolve_location(table, self.base_dir))
                if not paths:  # as on Spark: a join with an empty table would silently answer nothing
                    raise ExecutionError(f"static table {name!r}: no data files at {resolve_location(table, self.base_dir)}")
                files = [(f, read_records(f, table, table_format(table, f), dict(table.options))) for f in paths]
                counted, quarantine = static_rows(table, pipes, (), files)
            if quarantine:
                log.warning("static table %s: %d invalid row(s) quarantined", name, len(quarantine))
                self._static_quarantine.extend(quarantine)
            out.update(counted)
        return view_rows.statics(self.plan.views, out)

    # -- checkpoint -------------------------------------------------------------------------------
    def _ckpt_file(self) -> Path | None:
        return self.checkpoint_dir / "state.pkl" if self.checkpoint_dir else None

    def _restore(self) -> None:
        path = self._ckpt_file()
        if path is None or not path.exists():
            self.sink.begin()  # a new run: an answer file of an earlier one starts afresh
            self.quarantine.begin()
            if self._static_quarantine:  # a restarted query wrote them on its first run
                self.quarantine.write(self._static_quarantine)
            return
        st = checkpoint.load(path)
        if st.get("version") != CHECKPOINT_VERSION or st.get("fingerprint") != self._fingerprint():
            raise CheckpointError(
                f"checkpoint {self.checkpoint_dir} belongs to a different query or version; "
                "use a fresh checkpoint directory"
            )
        self.runtime.restore(st["runtime"])
        self.processed = {s: compact(set(st["processed"].get(s, ()))) for s in self.streams}
        self.ledger.restore(st.get("files"), self.runtime.max_ts)
        self.keys.restore(st.get("keys"))
        self.runtime.metrics.changed_files = self.ledger.changed
        self.open_files = {s: dict(st["open_files"].get(s, {})) for s in self.streams}
        self.batch_id = st["batch_id"]
        self.finished = st.get("finished", False)
        if self.aggregate is not None:
            self.aggregate.restore(st["aggregate"])
        self.sink.recover(st["sink_offset"])
        self.quarantine.recover(st["quarantine_offset"])

    def _checkpoint(self, sink_offset, quarantine_offset) -> int:
        st = {
            "version": CHECKPOINT_VERSION,
            "fingerprint": self._fingerprint(),
            "aggregate": self.aggregate.state() if self.aggregate is not None else None,
            "runtime": self.runtime.state(),
            "processed": self.processed,
            "files": self.ledger.state(),
            "keys": self.keys.state(),
            "open_files": self.open_files,
            "batch_id": self.batch_id,
            "finished": self.finished,
            "sink_offset": sink_offset,
            "quarantine_offset": quarantine_offset,
        }
        return checkpoint.dump(st, self._ckpt_file())
