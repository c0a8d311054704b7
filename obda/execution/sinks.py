"""Output and quarantine sinks.

An output line is one answer **occurrence** (bags stay bags)::

    {"emitted_at": "2024-01-01T00:00:05Z", "binding": {"var": value, ...}}

``emitted_at`` is the closed application timestamp whose marker produced the
answer.  Sinks report an ``offset`` after each flush; the executor stores it
in the checkpoint *after* the sink was flushed, and on restart calls
``recover(offset)``: a file sink truncates what a crashed batch wrote after
the last checkpoint, so replaying that batch gives no duplicates (exactly
once).  The quarantine sink works the same way for late and invalid rows.
"""

from __future__ import annotations

import json
from math import isfinite as _finite
from json.encoder import encode_basestring_ascii as _encode_str
import os
import stat
import queue
import sys
from decimal import Decimal
from pathlib import Path
from typing import Iterable, TextIO

from obda.execution.query_engine import Answer
from obda.execution.rows import micros_to_iso


def json_value(v):
    """A value as JSON sees it, the same in every output (sinks, changelogs, ``--final``, the HTTP API): an
    ``xsd:decimal`` (a Python Decimal) is a JSON number — an integer when integral, else the nearest double."""
    if isinstance(v, Decimal):
        return int(v) if v == v.to_integral_value() else float(v)
    if isinstance(v, (int, float, str, bool)) or v is None:
        return v
    return str(v)


def _json_scalar(v) -> str:
    """``json.dumps(v)`` for the values of a binding, without building an encoder per call."""
    t = type(v)
    if t is str:
        return _encode_str(v)
    if t is int:
        return int.__repr__(v)
    if v is None:
        return "null"
    if t is bool:
        return "true" if v else "false"
    if t is float:
        return float.__repr__(v) if _finite(v) else json.dumps(v)  # json.dumps: NaN / Infinity spelled as json does
    if t is Decimal and v.is_finite():  # json_value's number, spelled as json.dumps spells it
        return int.__repr__(int(v)) if v == v.to_integral_value() else _json_scalar(float(v))
    return json.dumps(json_value(v))


def row_lines(rows: Iterable[dict], columns: tuple[str, ...]) -> list[str]:
    """Answer rows (an aggregate query's answer table) as JSON lines, columns in ``columns`` order."""
    return ["{" + ", ".join(f"{json.dumps(c)}: {_json_scalar(r[c])}" for c in columns) + "}" for r in rows]


def answer_lines(answers: Iterable[Answer], columns: tuple[str, ...]) -> list[str]:
    """JSON lines of answers, one per occurrence.

    Byte-identical to ``json.dumps({"emitted_at": ..., "binding": {...}})`` per answer; the
    ``emitted_at`` text and the quoted variable names are formatted once, not once per answer.
    """
    out: list[str] = []
    prefixes: dict = {}
    keys = [_encode_str(c) + ": " for c in columns]
    scalar = _json_scalar
    for a in answers:
        prefix = prefixes.get(a.emitted_at)
        if prefix is None:
            prefix = prefixes[a.emitted_at] = '{"emitted_at": ' + json.dumps(micros_to_iso(a.emitted_at)) + ', "binding": {'
        line = prefix + ", ".join([k + scalar(v) for k, v in zip(keys, a.values)]) + "}}"
        if a.count == 1:
            out.append(line)
        else:
            out.extend([line] * a.count)
    return out


class Sink:
    """Base class: receives answers; ``flush`` returns a recoverable offset (or None).

    Protocol, per micro-batch: ``write_lines`` (answers computed on the driver: the local
    backend, static-only queries) and/or ``write_frame`` (answers computed by Spark), then
    ``flush`` → offset, stored in the checkpoint; ``commit(offset)`` once that checkpoint is
    on disk (a sink that publishes only committed output does it here); on restart
    ``recover(offset)`` with the checkpointed offset, else ``begin()``: a run no checkpoint continues.
    """

    def write_lines(self, lines: list[str]) -> None:
        raise NotImplementedError

    #: True for a sink that writes Spark's answers itself (``write_frame``, on the executors);
    #: the executor brings the answers of any other sink to the driver and calls ``write_lines``.
    writes_frames = False

    def write_frame(self, frame) -> int | None:
        """Answers computed by Spark (:class:`~obda.execution.answers.AnswerFrame`), written with
        Spark; returns how many occurrences were written, when the sink counted them (None: the
        executor counts).  Called only when ``writes_frames``.
        """
        raise NotImplementedError(f"{type(self).__name__} does not write Spark frames (writes_frames is False)")

    def commit(self, offset) -> None:
        """The checkpoint recording ``offset`` is on disk."""
        return None

    def flush(self):
        return None

    def recover(self, offset) -> None:
        return None

    def begin(self) -> None:
        """A run that no checkpoint continues starts writing (a sink that accumulates runs does nothing)."""
        return None

    def close(self) -> None:
        return None


class JsonLinesSink(Sink):
    """Appends lines to a file; offset = file size after an fsync.  A run that no checkpoint continues starts
    the file afresh (:meth:`begin`): the answers of an earlier run are not repeated after themselves.

    A target that is not a regular file (``/dev/null``, a named pipe, a terminal) is written as a stream:
    no fsync, nothing truncated on recovery (a device or a pipe cannot be rolled back), so after a
    restart from a checkpoint the answers of a micro-batch that did not commit may come again.
    """

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._f = None
        self._written = 0  # bytes written to a target that is not a regular file (its offset)

    @property
    def regular(self) -> bool:
        """Whether the target is a regular file (or does not exist yet: it will be one)."""
        try:
            return stat.S_ISREG(os.stat(self.path).st_mode)
        except FileNotFoundError:
            return True

    def _file(self):
        if self._f is None:
            self._f = open(self.path, "a", encoding="utf-8")
        return self._f

    def write_lines(self, lines: list[str]) -> None:
        if lines:
            text = "\n".join(lines) + "\n"
            try:
                self._file().write(text)
            except OSError as e:
                raise self._refused(e) from e
            self._written += len(text.encode("utf-8"))

    def flush(self):
        try:
            f = self._file()
            f.flush()
            if not self.regular:
                return self._written
            os.fsync(f.fileno())
            return f.tell()
        except OSError as e:
            raise self._refused(e) from e

    def _refused(self, error: OSError):
        """A write the file system refused (a full disk): what was buffered is dropped (``recover`` truncates the
        file to the last checkpoint's offset), so closing the sink does not fail again; a located ExecutionError."""
        from obda.execution.checkpoint import write_error

        f, self._f = self._f, None
        if f is not None:
            try:
                f.close()
            except OSError:
                pass
        return write_error(error, self.path, "the lines of this micro-batch",
                           "its lines up to the last checkpoint are intact (a query continued from its checkpoint drops "
                           "what follows them and writes this micro-batch again)")

    def recover(self, offset) -> None:
        """Drop anything written after the checkpointed offset (a batch that did not commit)."""
        self.close()
        if offset is None:
            offset = 0
        if not self.regular:
            self._written = offset
        elif self.path.exists() and self.path.stat().st_size > offset:
            with open(self.path, "r+b") as f:
                f.truncate(offset)

    def begin(self) -> None:
        """Empty a regular file an earlier run wrote (a device or a pipe is written as it is)."""
        self.recover(0)

    def close(self) -> None:
        if self._f is not None:
            self._f.close()
            self._f = None

    def read(self) -> list[dict]:
        if not self.path.exists():
            return []
        return [json.loads(line) for line in self.path.read_text(encoding="utf-8").splitlines() if line]


class ConsoleSink(Sink):
    def __init__(self, stream: TextIO | None = None):
        self.stream = stream or sys.stdout

    def write_lines(self, lines: list[str]) -> None:
        for line in lines:
            self.stream.write(line + "\n")
        self.stream.flush()


class MemorySink(Sink):
    """A thread-safe queue of output dicts, read by the API (``drain`` or ``queue.get``)."""

    def __init__(self, maxsize: int = 0):
        self.queue: queue.Queue = queue.Queue(maxsize)

    def write_lines(self, lines: list[str]) -> None:
        for line in lines:
            self.queue.put(json.loads(line))

    def drain(self) -> list[dict]:
        out = []
        while True:
            try:
                out.append(self.queue.get_nowait())
            except queue.Empty:
                return out


class QuarantineSink:
    """Late and invalid rows with their reason: a JSON-lines file, or kept in memory."""

    def __init__(self, path: str | os.PathLike | None = None):
        self.file = JsonLinesSink(path) if path is not None else None
        self.records: list[dict] = []
        #: record -> record: says more of where a row came from (an MQTT ingest log names the message)
        self.annotators: list = []

    def write(self, records: list[dict]) -> None:
        for annotate in self.annotators:
            records = [annotate(r) for r in records]
        if self.file is not None:
            self.file.write_lines([json.dumps(r, default=str) for r in records])
        else:
            self.records.extend(records)

    def flush(self):
        return self.file.flush() if self.file is not None else len(self.records)

    def recover(self, offset) -> None:
        if self.file is not None:
            self.file.recover(offset)
        elif offset is not None:
            del self.records[offset:]

    def begin(self) -> None:
        if self.file is not None:
            self.file.begin()

    def read(self) -> list[dict]:
        return self.file.read() if self.file is not None else list(self.records)

    def close(self) -> None:
        if self.file is not None:
            self.file.close()


def changelog_lines(records: list[dict], columns: tuple[str, ...]) -> list[str]:
    """The changelog records as JSON lines (``emitted_at`` as ISO text, values as JSON scalars)."""
    out = []
    keys = [(c, json.dumps(c) + ": ") for c in columns]
    stamps: dict = {}  # emitted_at -> its JSON text (many records share one closed timestamp)
    for r in records:
        at = stamps.get(r["emitted_at"])
        if at is None:
            at = stamps[r["emitted_at"]] = json.dumps(micros_to_iso(r["emitted_at"]))
        b = r["binding"]
        binding = ", ".join([k + _json_scalar(b[c]) for c, k in keys])
        out.append(f'{{"emitted_at": {at}, "op": "{r["op"]}", "binding": {{{binding}}}}}')
    return out
