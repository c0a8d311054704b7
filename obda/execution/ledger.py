"""Files are immutable once read: each read file's size and modification time, and the files that changed.

A stream file is read once, in the micro-batch that lists it first.  A writer that appends to a file
after obda read it (instead of writing the file whole under a temporary name and renaming it) would
otherwise lose the appended rows without a record.  :class:`FileLedger` records each read file's
size and modification time when its micro-batch commits and, at every later commit, compares them
with the files as they are: a file that changed is reported once per change — a quarantine record
with the reason (``changed: …``) and the metric ``changed_files`` — and its new bytes are **not**
read (the query's answers stay those of the rows read; the README says how to write files).  A file
removed after it was read is not a change (a retention job may delete old files).

The ledger is part of the checkpoint as plain data (``{stream: {path: [size, mtime_ns]}}``).
"""

from __future__ import annotations

import os


def _stat(path: str) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_size, st.st_mtime_ns


class FileLedger:
    """Per stream, the size and modification time of every file read (as recorded when it was read)."""

    def __init__(self, streams) -> None:
        self.files: dict[str, dict[str, tuple[int, int]]] = {s: {} for s in streams}
        self.changed = 0  # changes reported so far

    def check(self) -> list[dict]:
        """Quarantine records of the read files that changed since they were recorded (each change once)."""
        out = []
        for stream, files in self.files.items():
            for path, (size, mtime) in files.items():
                now = _stat(path)
                if now is None or now == (size, mtime):
                    continue
                files[path] = now
                self.changed += 1
                grew = f"grew from {size} to {now[0]} bytes" if now[0] > size else (
                    f"shrank from {size} to {now[0]} bytes" if now[0] < size else "was rewritten (same size, new time)")
                out.append({"stream": stream, "file": path, "line": None, "row": "",
                            "reason": f"changed: the file {grew} after it was read; what changed is not read. "
                                      "Write each file whole under a temporary name (.x, _x or x.tmp) and rename "
                                      "it when it is complete, or write new rows to a new file"})
        return out

    def record(self, new: dict[str, list[str]]) -> None:
        """Record the files of a micro-batch that committed."""
        for stream, paths in new.items():
            files = self.files.setdefault(stream, {})
            for p in paths:
                st = _stat(p)
                if st is not None:
                    files[p] = st

    def state(self) -> dict:
        return {"files": {s: {p: list(v) for p, v in fs.items()} for s, fs in self.files.items()},
                "changed": self.changed}

    def restore(self, st: dict | None) -> None:
        if not st:
            return
        for s, fs in st.get("files", {}).items():
            self.files[s] = {p: (int(v[0]), int(v[1])) for p, v in fs.items()}
        self.changed = int(st.get("changed", 0))
