"""What a query consumed, and when a consumed input is forgotten: the checkpoint stays as large as the input on disk.

A query knows its consumed inputs by name (its checkpoint's ``processed``, with the file ledger of
:mod:`obda.execution.ledger`): a listed file is new unless its name was consumed.  Kept for ever, these sets grow
with every file the stream ever had (the soak measured ~120 bytes per file per query).  Two rules keep them as
small as what they describe:

* **Kafka** (:func:`compact`): per topic partition only the last consumed segment is kept; the next segment starts
  where it ended, so the earlier ones say nothing more.
* **Files** (:func:`forgettable`): a consumed file is forgotten when

  1. it is no longer listed (a retention job removed it),
  2. it is *settled*: every timestamp it can hold is closed (its bound, the stream's largest timestamp when it
     was read, is at or below the closed timestamp) and no later micro-batch reads it again for rows of open
     timestamps (the Spark backend's carried files), and
  3. it was recorded more than ``forget_after`` seconds ago (default :data:`FORGET_AFTER`, one hour).

  A copy of a forgotten file written back under its name is a new file; its rows are of closed timestamps, so
  they are quarantined as late, never answered twice.  The grace of rule 3 keeps a folder removed by mistake
  and restored within it recognised file by file (README "Faults"): while a folder is missing, its files are
  not listed, but none is forgotten before the grace has passed.

With retention, a stream's checkpoint holds the files on disk plus those removed within the grace; without
retention the folder itself grows, and the checkpoint with it, by the same ~120 bytes per file.

The shared loop (:mod:`obda.execution.shared`) compares its cursor with each query's consumed set, so a file
is forgotten by every query of the loop at once or by none (:meth:`SharedScan._forget`); :func:`behind` and
:func:`ahead` compare compacted sets, and a query started again after the loop forgot files it had read forgets
them too (:func:`stale`) instead of waiting for a loop that will never read them.
"""

from __future__ import annotations

import os
from typing import Iterable

from obda.execution.kafka_fetch import parse_segment, segment_name

FORGET_AFTER = 3600.0  # seconds a consumed file that is gone and settled is still remembered


def compact(names: set[str]) -> set[str]:
    """``names`` with only the last segment of each Kafka topic partition (files unchanged)."""
    last: dict[tuple[str, int], tuple[int, str]] = {}
    out = set()
    for n in names:
        s = parse_segment(n) if n.startswith("kafka:") else None
        if s is None:
            out.add(n)
        elif last.get((s[0], s[1]), (-1, ""))[0] < s[3]:
            last[(s[0], s[1])] = (s[3], n)
    if not last:
        return names
    return out | {n for _, n in last.values()}


def _ends(names: Iterable[str]) -> dict[tuple[str, int], int]:
    ends: dict[tuple[str, int], int] = {}
    for n in names:
        s = parse_segment(n) if n.startswith("kafka:") else None
        if s is not None:
            ends[(s[0], s[1])] = max(ends.get((s[0], s[1]), 0), s[3])
    return ends


def behind(cursor: set[str], done: set[str]) -> list[str]:
    """What the loop consumed (``cursor``) and a query did not (``done``): files by name (name order); a Kafka
    partition as one range, from where the query's last segment ended to where the loop's did."""
    theirs, ours = _ends(cursor), _ends(done)
    files = sorted(f for f in cursor - done if not f.startswith("kafka:"))
    ranges = [segment_name(t, p, ours.get((t, p), 0), end) for (t, p), end in sorted(theirs.items())
              if end > ours.get((t, p), 0)]
    return files + ranges


def ahead(cursor: set[str], done: set[str]) -> bool:
    """Whether a query consumed something the loop did not (it resumed from a later checkpoint)."""
    theirs = _ends(cursor)
    if any(end > theirs.get(k, 0) for k, end in _ends(done).items()):
        return True
    return any(not f.startswith("kafka:") for f in done - cursor)


def gone(done: set[str], listed: Iterable[str]) -> set[str]:
    """The consumed files that a listing no longer shows (Kafka segments are never listed: not included)."""
    return {f for f in done - set(listed) if not f.startswith("kafka:")}


def forgettable(query, stream: str, candidates: set[str], now: float) -> set[str]:
    """The files of ``candidates`` (consumed by ``query`` on ``stream``, gone from its listing) that are settled for
    ``query`` and were recorded more than its ``forget_after`` seconds before ``now``."""
    if not candidates:
        return set()
    closed = query.runtime.closed_upto
    carried = query.open_files.get(stream, {})
    bound_now = query.runtime.max_ts.get(stream)
    out = set()
    for f in candidates:
        if f not in query.processed[stream] or f in carried:
            continue
        _, _, bound, at = query.ledger.entry(stream, f, bound_now)
        if now - at < query.forget_after:
            continue
        if bound is None or (closed is not None and bound <= closed):
            out.add(f)
    return out


def stale(query, stream: str, cursor: set[str]) -> set[str]:
    """The files ``query`` consumed that the shared loop's ``cursor`` does not hold and that are no longer on disk,
    except those a later micro-batch reads again: files the loop forgot while the query was stopped."""
    carried = query.open_files.get(stream, {})
    return {f for f in query.processed[stream] - cursor
            if not f.startswith("kafka:") and f not in carried and not os.path.exists(f)}


def forget(query, stream: str, files: set[str]) -> None:
    """Drop ``files`` from what ``query`` remembers of ``stream`` (its consumed set and its file ledger)."""
    if files:
        query.processed[stream] -= files
        query.ledger.forget(stream, files)
