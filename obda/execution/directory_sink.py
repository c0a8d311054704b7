"""A directory of part files with an atomic commit log: exactly-once output across restarts.

The folder's layout, its commit records and their checked reading, from any process, are
:mod:`obda.execution.committed_output`'s; this module writes the part files and commits them.

A write the file system refuses (a full disk: ``ENOSPC``) is an :class:`~obda.errors.ExecutionError`
located at the sink's folder (:func:`obda.execution.checkpoint.write_error`), saying "no space left on
device"; what was committed stays as it was, a partial part file is removed, and the query resumes from
its checkpoint once space is back (a batch the checkpoint covers is committed then).

Exactly once, with the executor's protocol (per micro-batch ``write_*``, ``flush`` →
offset, checkpoint written, ``commit(offset)``; on restart ``recover(checkpointed offset)``):

* crash before the checkpoint: the staged batch is newer than the checkpointed offset,
  ``recover`` deletes it and the executor computes it again;
* crash after the checkpoint, before or during the commit: the staged batch is not newer than
  the offset, ``recover`` commits it (the checkpoint says it is done);
* a committed batch newer than the checkpointed offset cannot happen (commit follows the
  checkpoint); if it is there, the folder does not belong to that checkpoint (or was
  altered): ``recover`` refuses with an :class:`~obda.errors.ExecutionError`; so it does when
  the checkpointed batch is neither committed nor staged (the folder was deleted or replaced).
* ``recover(None)`` (no checkpoint yet) deletes every staged batch; numbering continues after
  the last commit.  Without any ``recover`` call (the executor runs without a checkpoint
  folder), the first ``write_*``/``flush`` does the same, so a leftover of a crashed
  run is never committed under a new number.

Answers computed by Spark (:class:`~obda.execution.answers.AnswerFrame`) are written by
Spark's writers, on the executors, into the staging folder (the folder must be one the
executors and the driver share on a cluster); the driver only renames files and counts
their lines at commit (a byte count of the part files, or the Parquet footers' row
counts: no answer is parsed or held).  Answers computed on the driver are written as one
part file per ``write_lines`` call (Parquet through pyarrow, with the schema Spark's
records have: ``emitted_at`` string, ``binding`` struct).
"""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
import threading
import zlib
from pathlib import Path

from obda.errors import CheckpointError, ExecutionError
from obda.execution.checkpoint import fsync_path, write_atomic, write_error
from obda.execution.committed_output import (COMMITS, DATA, STAGING, CommittedBatch, batch_name, batch_number,
                                             commit_numbers, committed_batches, load_commit, read_committed,
                                             record_check)
from obda.execution.sinks import Sink

FORMATS = ("json", "parquet")
_EXT = {"json": "json", "parquet": "parquet"}
MANIFEST = "_manifest.json"
#: what a refused write of a micro-batch's answers leaves (obda.execution.checkpoint.write_error)
AGAIN = ("the committed output is intact; the micro-batch is computed again when the query continues from its "
         "checkpoint")


def _fsync_file(path: Path) -> None:
    """fsync a written file; unlike a folder's (:func:`fsync_path`), its failure is raised (data not on disk)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _part_order(rel: str) -> list:
    """Sort key of a staged part's path: its digit runs compared as numbers. Spark numbers the files one task
    writes ``…-c000``, ``…-c001``, …, ``…-c999``, ``…-c1000`` (``spark.sql.files.maxRecordsPerFile``), which
    sort as text with ``c1000`` before ``c101``; as numbers they keep the order Spark wrote them in."""
    return [int(x) if i % 2 else x for i, x in enumerate(re.split(r"(\d+)", rel))]


def _no_space(error: BaseException) -> bool:
    """Whether a failed Spark write failed for a full disk (the Java exception's text, causes included)."""
    return isinstance(error, Exception) and type(error).__module__.startswith(("py4j", "pyspark")) and (
        "No space left on device" in str(error) or "Disk quota exceeded" in str(error))


def _is_part(name: str) -> bool:
    """A data file of a writer (Spark also writes ``_SUCCESS``, ``_temporary/``, ``.part-….crc``)."""
    return not (name.startswith("_") or name.startswith(".") or name.endswith(".crc"))


def _scan_part(path: Path) -> tuple[int, int, int]:
    """(lines, bytes, CRC-32) of a part: a JSON-lines part's lines are its newlines (counted in 1 MiB chunks; a
    last line without one counts), a Parquet part's its footer's row count."""
    n, last, size, crc = 0, b"\n", 0, 0
    with open(path, "rb") as f:
        while True:
            chunk = f.read(1 << 20)
            if not chunk:
                break
            n += chunk.count(b"\n")
            last = chunk[-1:]
            size += len(chunk)
            crc = zlib.crc32(chunk, crc)
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        return pq.read_metadata(path).num_rows, size, crc
    return n + (last != b"\n"), size, crc


class DirectorySink(Sink):
    """Part files in a folder, published by an atomic commit log (see the module docstring).

    ``format``: ``json`` (JSON-lines part files) or ``parquet``.
    """

    writes_frames = True  # the answers computed by Spark are written by Spark, on the executors

    def __init__(self, path: str | os.PathLike, format: str = "json"):
        if format not in FORMATS:
            raise ExecutionError(f"unknown output format {format!r} (json or parquet)")
        self.path = Path(path)
        self.format = format
        self.ext = _EXT[format]
        self._lock = threading.RLock()
        for sub in (STAGING, DATA, COMMITS):
            (self.path / sub).mkdir(parents=True, exist_ok=True)
        committed = commit_numbers(self.path)
        self._last_committed = committed[-1] if committed else 0
        last = load_commit(self.path, self._last_committed) if committed else None
        self._total = last.last if last is not None else 0  # lines committed so far
        # the counter never reuses a number a staged folder has, until recover() says what it is
        self._counter = max([self._last_committed, *self._staged_numbers()])
        self._writes = 0  # writes in the open batch (number counter + 1)
        self._recovered = False

    # -- folders --------------------------------------------------------------------------------
    def _staged_numbers(self) -> list[int]:
        try:
            names = os.listdir(self.path / STAGING)
        except FileNotFoundError:
            return []
        return sorted(n for n in map(batch_number, names) if n is not None)

    def _staging(self, batch: int) -> Path:
        return self.path / STAGING / batch_name(batch)

    @property
    def last_committed(self) -> int:
        """Number of the newest committed batch (0: none)."""
        return self._last_committed

    @property
    def committed_lines(self) -> int:
        """Position of the last committed line: answers committed since the folder was created."""
        return self._total

    def _ensure_recovered(self) -> None:
        """The executor runs without a checkpoint (no ``recover``): nothing staged may be committed later."""
        if not self._recovered:
            self.recover(None)

    def _next_write_dir(self) -> Path:
        self._ensure_recovered()
        batch = self._counter + 1
        folder = self._staging(batch)
        if self._writes == 0 and folder.exists():  # not ours (defensive): never mixed into this batch
            shutil.rmtree(folder)
        sub = folder / f"w-{self._writes:05d}"
        self._writes += 1
        return sub

    # -- the sink protocol ----------------------------------------------------------------------
    def write_lines(self, lines: list[str]) -> None:
        """Answers computed on the driver: one part file in the open batch's staging folder."""
        if not lines:
            return
        with self._lock:
            sub = self._next_write_dir()
            try:
                sub.mkdir(parents=True, exist_ok=True)
                target = sub / f"part-00000.{self.ext}"
                if self.format == "json":
                    with open(target, "w", encoding="utf-8") as f:
                        f.write("\n".join(lines))
                        f.write("\n")
                else:
                    _write_parquet_lines(target, lines)
            except OSError as e:  # a full disk: the partial part never joins the batch, its room is free again
                shutil.rmtree(sub, ignore_errors=True)
                raise write_error(e, self.path, "a part file of this micro-batch's answers", AGAIN) from e

    def write_frame(self, frame) -> None:
        """Answers computed by Spark: written by Spark's writers (on the executors) into a staging sub-folder.

        In application-time order: the answers are range-partitioned by ``emitted_at`` (Spark samples the
        bounds: a small job of its own) and sorted within each partition (by time, then the tie-break every
        sink keeps, :data:`~obda.execution.answers.TIE_BREAK`), so that part file k holds answers no later
        than part file k+1's, and the files read in the commit's order (their names, numbers compared as
        numbers: :func:`_part_order`) are in order. No partition holds the whole micro-batch's answers."""
        frame = frame.in_time_order()
        with self._lock:
            sub = self._next_write_dir()
            try:
                if self.format == "json":
                    frame.json_lines().write.mode("overwrite").text(str(sub.resolve()))
                else:
                    frame.records().write.mode("overwrite").parquet(str(sub.resolve()))
            except BaseException as e:
                shutil.rmtree(sub, ignore_errors=True)  # a failed job's leftovers never join the batch
                if _no_space(e):  # Spark's writers found the disk full: said so, located at this folder
                    raise write_error(OSError(errno.ENOSPC, os.strerror(errno.ENOSPC)), self.path,
                                      "a part file of this micro-batch's answers (written by Spark)", AGAIN) from None
                raise

    def flush(self) -> int:
        """Close the open batch (fsync its files) and return its number; without output, the last number."""
        with self._lock:
            self._ensure_recovered()
            if self._writes:
                folder = self._staging(self._counter + 1)
                try:
                    for root, dirs, files in os.walk(folder):
                        for name in files:
                            _fsync_file(Path(root) / name)
                        fsync_path(Path(root))
                except OSError as e:
                    raise write_error(e, self.path, "this micro-batch's answers", AGAIN) from e
                fsync_path(folder.parent)
                self._counter += 1
                self._writes = 0
            return self._counter

    def commit(self, offset) -> None:
        """Publish every flushed batch up to ``offset``: idempotent, and finishes a commit a crash interrupted."""
        if offset is None:
            return
        offset = int(offset)
        with self._lock:
            if offset > self._counter:
                raise CheckpointError(
                    f"{self.path}: commit of batch {offset}, but the newest batch flushed is {self._counter}")
            for b in self._staged_numbers():
                if b > offset:
                    break
                if b <= self._last_committed:  # committed; a crash left its staging folder
                    shutil.rmtree(self._staging(b), ignore_errors=True)
                else:
                    try:
                        self._commit_one(b)
                    except OSError as e:  # a full disk: the staged batch stays, the next commit or recover ends it
                        raise write_error(e, self.path, f"the commit of batch {b}",
                                          "the checkpoint covers the batch: its staged answers are kept and committed "
                                          "when the query continues from that checkpoint") from e

    def _commit_one(self, batch: int) -> None:
        folder = self._staging(batch)
        manifest = folder / MANIFEST
        if manifest.exists():  # a commit a crash interrupted: the same names again
            entries = json.loads(manifest.read_bytes())
        else:
            entries = []
            parts = sorted(
                (p.relative_to(folder).as_posix()
                 for w in folder.iterdir() if w.is_dir() and _is_part(w.name)
                 for p in w.iterdir() if p.is_file() and _is_part(p.name)),
                key=_part_order,
            )
            for rel in parts:
                n, size, crc = _scan_part(folder / rel)
                if n == 0:  # Spark writes empty parts for empty partitions
                    continue
                ext = "parquet" if rel.endswith(".parquet") else "json"
                entries.append({"src": rel, "name": f"batch-{batch:08d}-part-{len(entries):05d}.{ext}", "lines": n,
                                "bytes": size, "crc32": crc})
            write_atomic(manifest, json.dumps(entries).encode())
        data = self.path / DATA
        for e in entries:
            src, dst = folder / e["src"], data / e["name"]
            if src.exists():
                os.replace(src, dst)
            elif not dst.exists():
                raise CheckpointError(f"{self.path}: part {e['src']} of staged batch {batch} is missing "
                                     "from the staging folder and from data/; the output folder was altered")
        fsync_path(data)
        lines = sum(e["lines"] for e in entries)
        record = {"batch": batch, "format": self.format, "first": self._total + 1, "lines": lines,
                  "files": [{k: e[k] for k in ("name", "lines", "bytes", "crc32") if k in e} for e in entries]}
        record["check"] = record_check(record)
        write_atomic(self.path / COMMITS / f"{batch_name(batch)}.json", json.dumps(record).encode())
        shutil.rmtree(folder, ignore_errors=True)
        self._last_committed = batch
        self._total += lines

    def recover(self, offset) -> None:
        """On restart, with the checkpointed offset: commit staged batches ≤ offset, delete newer ones.

        ``None`` (no checkpoint yet): delete every staged batch; numbering continues after the last commit.
        """
        with self._lock:
            self._writes = 0
            if offset is None:
                shutil.rmtree(self.path / STAGING, ignore_errors=True)
                (self.path / STAGING).mkdir(parents=True, exist_ok=True)
                self._counter = self._last_committed
                self._recovered = True
                return
            offset = int(offset)
            if self._last_committed > offset:
                raise CheckpointError(
                    f"{self.path}: batch {self._last_committed} is committed but the checkpoint records batch "
                    f"{offset} as the last one written; the output folder does not belong to this checkpoint "
                    "(or was altered). Use a fresh output folder with a fresh checkpoint.")
            staged = self._staged_numbers()
            if offset > self._last_committed and offset not in staged:
                raise CheckpointError(
                    f"{self.path}: the checkpoint records batch {offset} as written, but the folder has neither "
                    f"its commit file nor its staged parts (newest committed batch: {self._last_committed}); "
                    "the output folder was deleted or replaced, or the checkpoint belongs to another output. "
                    "Use a fresh output folder with a fresh checkpoint.")
            self._counter = max(offset, self._last_committed)
            for b in staged:
                if b > offset:
                    shutil.rmtree(self._staging(b), ignore_errors=True)  # computed again
            self._recovered = True
            self.commit(offset)

    def close(self) -> None:
        return None

    # -- readers ------------------------------------------------------------------------------------
    def committed(self, after_batch: int | None = None) -> list[CommittedBatch]:
        """The committed batches (after ``after_batch``), in order."""
        return committed_batches(self.path, after_batch)

    def committed_files(self) -> list[Path]:
        """The committed data files, in batch order, then part order."""
        return [p for c in self.committed() for p in c.paths()]

    def read(self) -> list[dict]:
        """Every committed answer, in batch order, then part order, then line order."""
        return read_committed(self.path)

    # -- retention ----------------------------------------------------------------------------------
    def drop_committed(self, through_batch: int) -> int:
        """Delete the committed batches up to ``through_batch`` (commit file first, then the data files).

        The newest committed batch is always kept (its commit file carries the numbering on).
        Returns the number of batches deleted.
        """
        with self._lock:
            n = 0
            for b in commit_numbers(self.path):
                if b > through_batch or b >= self._last_committed:
                    break
                c = load_commit(self.path, b)
                try:
                    os.remove(self.path / COMMITS / f"{batch_name(b)}.json")
                except FileNotFoundError:
                    pass
                if c is not None:
                    for p in c.paths():
                        try:
                            os.remove(p)
                        except FileNotFoundError:
                            pass
                n += 1
            if n:
                fsync_path(self.path / COMMITS)
            return n


def _write_parquet_lines(target: Path, lines: list[str]) -> None:
    """JSON answer lines as a Parquet file: ``emitted_at`` string, ``binding`` struct (as Spark's records)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    recs = [json.loads(line) for line in lines]
    names: list[str] = []
    for r in recs:  # variables in the order of the lines (every line has them all)
        for k in r.get("binding", {}):
            if k not in names:
                names.append(k)
    fields = []
    for k in names:
        values = [r.get("binding", {}).get(k) for r in recs]
        try:
            arr = pa.array(values)
        except (pa.ArrowInvalid, pa.ArrowTypeError):  # mixed types: kept as their JSON text
            arr = pa.array([None if v is None else (v if isinstance(v, str) else json.dumps(v)) for v in values],
                           pa.string())
        if pa.types.is_null(arr.type):
            arr = arr.cast(pa.string())
        fields.append((k, arr))
    emitted = pa.array([r.get("emitted_at") for r in recs], pa.string())
    if fields:
        binding = pa.StructArray.from_arrays([a for _, a in fields], names=[k for k, _ in fields])
    else:
        binding = pa.array([{} for _ in recs], pa.struct([]))
    pq.write_table(pa.table({"emitted_at": emitted, "binding": binding}), target)
