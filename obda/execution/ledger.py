"""Files are immutable once read: each read file's size and modification time, and the files that changed.

A stream file is read once, in the micro-batch that lists it first.  A writer that appends to a file
after obda read it (instead of writing the file whole under a temporary name and renaming it) would
otherwise lose the appended rows without a record.  :class:`FileLedger` records each read file's
size and modification time when its micro-batch commits and, at every later commit, compares them
with the files as they are: a file that changed is reported once per change — a quarantine record
with the reason (``changed: …``) and the metric ``changed_files`` — and its new bytes are **not**
read (the query's answers stay those of the rows read; the README says how to write files).  A file
removed after it was read is not a change (a retention job may delete old files).

The ledger also says when a consumed file may be forgotten (:mod:`obda.execution.consumed`): with each file
it keeps an upper bound of the timestamps the file held (the stream's largest timestamp once its micro-batch
was read) and the wall time it was recorded.

The ledger is part of the checkpoint as plain data (``{stream: {path: [size, mtime_ns, bound, recorded_at]}}``;
a checkpoint of an earlier release has ``[size, mtime_ns]``: its files are bounded by the stream's largest
timestamp when it is restored, and recorded then).
"""

from __future__ import annotations

import os
import time

#: one consumed file: its size and modification time when read (None: it could not be stat'ed), an upper bound
#: of its timestamps (None: the stream had no valid row yet) and the wall time it was recorded
Entry = tuple[int | None, int | None, int | None, float]


def _stat(path: str) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_size, st.st_mtime_ns


class FileLedger:
    """Per stream, the size and modification time of every file read (as recorded when it was read), the bound
    of its timestamps and when it was recorded."""

    def __init__(self, streams, clock=time.time) -> None:
        self.files: dict[str, dict[str, Entry]] = {s: {} for s in streams}
        self.clock = clock
        self.changed = 0  # changes reported so far

    def check(self) -> list[dict]:
        """Quarantine records of the read files that changed since they were recorded (each change once)."""
        out = []
        for stream, files in self.files.items():
            for path, (size, mtime, bound, at) in files.items():
                now = _stat(path)
                if now is None or size is None or now == (size, mtime):
                    continue
                files[path] = (*now, bound, at)
                self.changed += 1
                grew = f"grew from {size} to {now[0]} bytes" if now[0] > size else (
                    f"shrank from {size} to {now[0]} bytes" if now[0] < size else "was rewritten (same size, new time)")
                out.append({"stream": stream, "file": path, "line": None, "row": "",
                            "reason": f"changed: the file {grew} after it was read; what changed is not read. "
                                      "Write each file whole under a temporary name (.x, _x or x.tmp) and rename "
                                      "it when it is complete, or write new rows to a new file"})
        return out

    def record(self, new: dict[str, list[str]], bounds: dict[str, int | None]) -> None:
        """Record the files of a micro-batch that committed (``bounds``: per stream, its largest timestamp after
        the micro-batch, a bound of every file's timestamps)."""
        at = self.clock()
        for stream, paths in new.items():
            files = self.files.setdefault(stream, {})
            for p in paths:
                st = _stat(p) or (None, None)
                files[p] = (*st, bounds.get(stream), at)

    def entry(self, stream: str, path: str, bound: int | None) -> Entry:
        """The record of a consumed file; one that has none (dropped unread by shedding) is recorded now, with
        ``bound``."""
        files = self.files.setdefault(stream, {})
        got = files.get(path)
        if got is None:
            got = files[path] = (None, None, bound, self.clock())
        return got

    def forget(self, stream: str, paths) -> None:
        files = self.files.get(stream, {})
        for p in paths:
            files.pop(p, None)

    def state(self) -> dict:
        return {"files": {s: {p: list(v) for p, v in fs.items()} for s, fs in self.files.items()},
                "changed": self.changed}

    def restore(self, st: dict | None, bounds: dict[str, int | None]) -> None:
        """The ledger of a checkpoint (``bounds``: per stream its largest timestamp, for the entries of an earlier
        release's checkpoint, which have no bound)."""
        if not st:
            return
        at = self.clock()
        for s, fs in st.get("files", {}).items():
            self.files[s] = {p: (v[0], v[1], v[2], float(v[3])) if len(v) >= 4 else (int(v[0]), int(v[1]),
                                                                                   bounds.get(s), at)
                             for p, v in fs.items()}
        self.changed = int(st.get("changed", 0))
