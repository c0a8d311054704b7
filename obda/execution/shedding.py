"""Opt-in load shedding: a query that may not fall further behind its input than ``max_lag`` drops, unread,
the input files that waited longer — and counts every row it drops.

Without a :class:`Shed` setting nothing is ever dropped: a query behind its input reads its backlog in
micro-batches of bounded size (``max_bytes_per_batch``), however late (README, "Input faster than the
service").  With one, ``shed: {max_lag: PT5M, policy: drop_oldest}``:

**Policy ``drop_oldest``** (the only one): when a micro-batch is cut, every listed file of the query's
streams that has waited longer than ``max_lag`` — its age is wall time since its modification time, the
measure of the metric ``lag_seconds`` — is dropped; the newer files are read as usual.  So the answers
stay at most about ``max_lag`` behind the input, the rows a query skips are always older (in arrival) than
the rows it reads — dropping never makes a later row late — and a backlog that arrived within the bound is
never touched.  (Keeping every n-th file instead would keep a sample of old input but leave the query as
far behind as before: the lag, which the user bounded, would not shrink.)

**Counted exactly.**  A dropped file is read once by the reader (:func:`obda.execution.reader.read_records`,
the contract both backends share), only to count its rows — every record a micro-batch would have read,
``rows_read``'s measure, rejected ones included — and the application-time range of those whose
timestamp parses.  Each dropped file is one quarantine record ``{"stream", "reason": "shed: …", "file",
"rows", "from", "to", "shed": true}``; the metrics hold the totals (``shed``: rows and files per stream, the
recent ranges per stream) and ``incomplete_since`` becomes the first application time a dropped row had:
answers from there on may miss input.  :func:`summarize` totals a quarantine file the same way.

**Restart.**  A dropped file joins the query's consumed files and the totals join its metrics in the
micro-batch's commit: both are in the checkpoint written with the quarantine offset, so a restart neither
reads a dropped file nor counts it twice; a micro-batch that did not commit is decided again.
"""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass
from typing import Callable, Iterable

from obda.errors import ExecutionError, Location
from obda.execution.reader import Record, parse_field, read_records
from obda.execution.rows import micros_to_iso, to_micros
from obda.execution.spark_io import table_format
from obda.model.constraints import format_duration, parse_duration
from obda.model.sources import ColumnType, Table

DROP_OLDEST = "drop_oldest"
POLICIES = (DROP_OLDEST,)
READABLE = ("csv", "json")  # formats whose dropped rows the reader counts
RANGES_KEPT = 20  # per stream, the metrics keep the newest ranges (the quarantine keeps every dropped file)
SHED_REASON = "shed:"
MAX_LAG_LIMIT = 1e9  # seconds (about 31 years): the largest max_lag
_NUMBER = re.compile(r"[0-9]+(\.[0-9]*)?")


@dataclass(frozen=True)
class Shed:
    """A query's shedding setting: drop input that waited longer than ``max_lag_seconds``, by ``policy``."""

    max_lag_seconds: float
    policy: str = DROP_OLDEST

    @classmethod
    def parse(cls, spec, where: Location | None = None) -> "Shed":
        """From ``{"max_lag": "PT5M", "policy": "drop_oldest"}`` (``max_lag`` also a number of seconds)."""
        if isinstance(spec, Shed):
            return spec
        if not isinstance(spec, dict) or "max_lag" not in spec:
            raise ExecutionError("shed must be {max_lag: <duration, e.g. PT5M>, policy: drop_oldest}", where)
        unknown = sorted(set(spec) - {"max_lag", "policy"})
        if unknown:
            raise ExecutionError(f"shed: unknown setting {unknown[0]!r}; it takes max_lag and policy", where)
        lag = raw = spec["max_lag"]
        shown = repr(raw) if len(repr(raw)) <= 40 else repr(raw)[:40] + "…"
        if isinstance(lag, str) and _NUMBER.fullmatch(lag.strip()):  # seconds, as text (a command line's)
            lag = float(lag)
        if isinstance(lag, (int, float)) and not isinstance(lag, bool):
            seconds = float(lag)
        else:
            us = parse_duration(str(lag))
            if us is None:
                raise ExecutionError(f"shed: max_lag {shown} is not a duration; write it as PT5M, PT30S or "
                                     "P1DT2H (or a number of seconds)", where)
            seconds = us / 1e6 if us < MAX_LAG_LIMIT * 1_000_000 else float("inf")
        if not 0 < seconds <= MAX_LAG_LIMIT:
            raise ExecutionError(f"shed: max_lag must be more than 0 seconds and at most {MAX_LAG_LIMIT:.0e}, not "
                                 f"{shown}", where)
        policy = spec.get("policy") or DROP_OLDEST
        if policy not in POLICIES:
            raise ExecutionError(f"shed: unknown policy {policy!r}; the policies are {', '.join(POLICIES)}", where)
        return cls(seconds, policy)

    def to_dict(self) -> dict:
        return {"max_lag": format_duration(int(self.max_lag_seconds * 1e6)), "policy": self.policy}


def count_rows(path: str, table: Table, fmt: str) -> tuple[int, int | None, int | None]:
    """The rows a micro-batch would read from ``path`` (valid or not) and the first and last application
    time among those whose timestamp parses (µs; None when none does)."""
    rows, lo, hi = 0, None, None
    for rec in read_records(path, table, fmt, dict(table.options)):
        rows += 1
        if not isinstance(rec, Record) or not table.timestamp:
            continue
        text = rec.fields.get(table.timestamp)
        if not text:
            continue
        try:
            ts = parse_field(text, ColumnType.TIMESTAMP)
        except ValueError:
            continue
        lo = ts if lo is None else min(lo, ts)
        hi = ts if hi is None else max(hi, ts)
    return rows, lo, hi


class Shedder:
    """Applies a :class:`Shed` setting to a query's micro-batches: :meth:`split` when the batch is cut,
    :meth:`commit` when it commits (the counts and the consumed files join the checkpoint together)."""

    def __init__(self, shed: Shed, tables: Iterable[Table], wall_clock: Callable[[], float] = time.time):
        self.shed = shed
        self.tables = {t.name: t for t in tables}
        for t in self.tables.values():
            fmt = table_format(t)
            if fmt not in READABLE:
                raise ExecutionError(
                    f"stream {t.name!r} is read as {fmt}: shedding counts every dropped row with the CSV/JSON "
                    "reader, so it is available for csv and json streams only; run this query without shed",
                    t.source_location)
        self.wall_clock = wall_clock
        self._dropped: dict[str, list[tuple[str, float]]] = {}  # the cut micro-batch's: stream -> (file, age)

    def split(self, pending: dict[str, list[str]], metrics) -> dict[str, list[str]]:
        """``pending`` without the files to drop (remembered for :meth:`commit`); a file gone meanwhile is
        kept (its read reports it).  ``metrics.shed`` shows the setting and the totals from now on."""
        if metrics.shed is None:
            metrics.shed = new_totals(self.shed)
        metrics.shed.update(self.shed.to_dict())  # a restart with another setting: the totals go on
        now, bound = self.wall_clock(), self.shed.max_lag_seconds
        keep, self._dropped = {}, {}
        for stream, files in pending.items():
            keep[stream] = []
            for f in files:
                try:
                    age = now - os.stat(f).st_mtime
                except OSError:
                    age = 0.0
                if age > bound:
                    self._dropped.setdefault(stream, []).append((f, age))
                else:
                    keep[stream].append(f)
        return keep

    def commit(self, processed: dict[str, set[str]], metrics) -> list[dict]:
        """Count the cut micro-batch's dropped files, add them to ``processed`` and their counts to
        ``metrics`` (``shed``, ``incomplete_since``); returns their quarantine records."""
        dropped, self._dropped = self._dropped, {}
        if not dropped:
            return []
        totals = metrics.shed
        records = []
        first = None
        for stream, files in dropped.items():
            table = self.tables[stream]
            lo_all = hi_all = None
            n_rows = 0
            for f, age in files:
                rows, lo, hi = count_rows(f, table, table_format(table, f))
                records.append({
                    "stream": stream, "file": f, "rows": rows, "from": micros_to_iso(lo), "to": micros_to_iso(hi),
                    "shed": True, "line": None, "row": None,
                    "reason": f"{SHED_REASON} the file waited {age:.0f} s, more than max_lag "
                              f"{self.shed.to_dict()['max_lag']} ({self.shed.policy}); its {rows} row(s) were not read",
                })
                n_rows += rows
                if lo is not None:
                    lo_all = lo if lo_all is None else min(lo_all, lo)
                    hi_all = hi if hi_all is None else max(hi_all, hi)
            processed[stream].update(f for f, _ in files)
            totals["rows"][stream] = totals["rows"].get(stream, 0) + n_rows
            totals["files"][stream] = totals["files"].get(stream, 0) + len(files)
            ranges = totals["ranges"].setdefault(stream, [])
            ranges.append({"from": micros_to_iso(lo_all), "to": micros_to_iso(hi_all), "rows": n_rows,
                           "files": len(files)})
            del ranges[:-RANGES_KEPT]
            if lo_all is not None:
                first = lo_all if first is None else min(first, lo_all)
        metrics.shed = totals
        if first is not None and (metrics.incomplete_since is None or first < to_micros(metrics.incomplete_since)):
            metrics.incomplete_since = micros_to_iso(first)
        return records


def new_totals(shed: Shed) -> dict:
    """The metrics' ``shed`` entry before anything was dropped (plain data: it is checkpointed)."""
    return {**shed.to_dict(), "rows": {}, "files": {}, "ranges": {}}


def summarize(records: Iterable[dict]) -> dict:
    """Totals of quarantine records per kind (``shed``, ``late``, ``invalid``, ``changed``, ``constraint``) and
    stream: ``{"shed": {stream: {"rows", "files", "from", "to"}}, "late": {stream: rows}, …}``.  A shed record
    counts its ``rows``; every other record is one row (or one changed file)."""
    out: dict[str, dict] = {}
    for r in records:
        stream = r.get("stream") or r.get("table") or "?"
        reason = str(r.get("reason", ""))
        if r.get("shed"):
            s = out.setdefault("shed", {}).setdefault(stream, {"rows": 0, "files": 0, "from": None, "to": None})
            s["rows"] += int(r.get("rows") or 0)
            s["files"] += 1
            for k, pick in (("from", min), ("to", max)):
                if r.get(k) is not None:
                    s[k] = r[k] if s[k] is None else micros_to_iso(pick(to_micros(s[k]), to_micros(r[k])))
            continue
        kind = "constraint" if r.get("constraint") else reason.split(":", 1)[0] or "other"
        per = out.setdefault(kind, {})
        per[stream] = per.get(stream, 0) + int(r.get("rows") or 1) if kind == "constraint" else per.get(stream, 0) + 1
    return out
