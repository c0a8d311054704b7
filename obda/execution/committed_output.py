"""The committed output of a directory sink (:class:`~obda.execution.directory_sink.DirectorySink`): its
layout, its commit records, and reading them, checked, from any process.

Layout of ``DirectorySink(path, format)``::

    <path>/_staging/<batch>/w-<k>/...      written, not committed: readers never look here
    <path>/data/batch-<batch>-part-<i>.json  committed part files (.parquet with format="parquet")
    <path>/_commits/<batch>.json           one per committed batch: its data files and line counts

Batch numbers (``<batch>`` is zero-padded to 8 digits) are the sink's own counter: a
micro-batch that wrote something (``write_lines`` with at least one line, or ``write_frame``)
gets the next number when it is flushed; :meth:`DirectorySink.flush` returns that number,
the *offset* the executor keeps in its checkpoint.  A flush without output opens no batch
and returns the last number again (0 before the first batch).

A commit file is the commit point.  It is written atomically (temporary file, fsync,
rename, fsync of the folder) after the batch's part files were moved into ``data/`` (names
fixed beforehand by a manifest in the staging folder, so a commit interrupted half-way is
finished by the next call).  It holds::

    {"batch": 12, "format": "json", "first": 101, "lines": 40,
     "files": [{"name": "batch-00000012-part-00000.json", "lines": 40, "bytes": 2315, "crc32": 3735928559}],
     "check": 1234567890}

``first`` is the position (1-based) of the batch's first line in the committed output:
batch order, then part order, then line order.  Readers list ``_commits/``, never
``data/``: a part file that is there without a commit file is not output yet.

Integrity: every read of a part file (:func:`read_part`, :meth:`CommittedBatch.rows`,
:func:`read_committed`, the service's result pages) checks it against its commit file — its size,
its CRC-32 and its line count — and ``check`` (the CRC-32 of the commit record without it) checks
the commit file itself.  A truncated, altered or bit-rotten part or commit file, a commit file that
does not parse, or a part a commit lists that is missing (while its commit file is still there) is a
:class:`~obda.errors.CheckpointError` located at that file: it is refused, never read as answers.
Commit files written before these fields existed are checked for their line counts only.

Other processes read the committed output with :func:`iter_committed` /
:func:`read_committed`; the sink's
:meth:`~obda.execution.directory_sink.DirectorySink.drop_committed` (retention) deletes old batches, commit
file first.
"""

from __future__ import annotations

import datetime as _dt
import io
import json
import os
import re
import zlib
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Iterator

from obda.errors import CheckpointError, Location

STAGING, DATA, COMMITS = "_staging", "data", "_commits"


def batch_name(batch: int) -> str:
    return f"{batch:08d}"


def batch_number(name: str) -> int | None:
    """The batch number of a staging folder or commit file name (None: not one)."""
    stem = name[:-5] if name.endswith(".json") else name
    return int(stem) if stem.isdigit() else None


def record_check(rec: dict) -> int:
    """CRC-32 of a commit record without its ``check`` (keys sorted, compact): the commit file's own checksum."""
    body = {k: v for k, v in rec.items() if k != "check"}
    return zlib.crc32(json.dumps(body, sort_keys=True, separators=(",", ":")).encode())


def _plain(v):
    """A Parquet value as the JSON-lines output spells it."""
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items()}
    if isinstance(v, Decimal):
        return int(v) if v == v.to_integral_value() else float(v)
    if isinstance(v, _dt.datetime):
        return v.isoformat()
    if isinstance(v, (_dt.date, _dt.time)):
        return v.isoformat()
    return v


@dataclass(frozen=True)
class PartCheck:
    """What a commit file records of one part: its lines and (commit files written since they exist) its size
    and CRC-32; ``commit``: the commit file (named by a refusal)."""

    lines: int
    size: int | None = None
    crc32: int | None = None
    commit: str = ""


_PART_NAME = re.compile(r"^batch-(\d+)-part-\d+\.(json|parquet)$")


def _recorded_check(path: Path) -> PartCheck | None:
    """The check of a committed part file found by its name in its sink's commit file (None: the file is not a
    part of a sink's ``data/`` folder, or its commit file is gone: retention dropped the batch)."""
    m = _PART_NAME.match(path.name)
    if m is None or path.parent.name != DATA:
        return None
    c = load_commit(path.parent.parent, int(m.group(1)))
    if c is None:
        return None
    for (name, _), check in zip(c.files, c.checks()):
        if name == path.name:
            return check
    raise CheckpointError(f"the part file is not listed by its batch's commit file {c.commit_file()}; the output "
                          "folder was altered", Location(file=str(path)))


def _refuse_part(path: Path, why: str, check: PartCheck) -> CheckpointError:
    return CheckpointError(f"the part file {why}{f' (its commit file: {check.commit})' if check.commit else ''}; "
                           "its answers are not read: restore it from a copy, or run the query again into a fresh "
                           "output folder with a fresh checkpoint", Location(file=str(path)))


def read_part(path: str | os.PathLike, check: PartCheck | None = None) -> list[dict]:
    """The answers of one part file: ``{"emitted_at": …, "binding": {…}}`` dicts, in file order.

    Checked against ``check`` — by default what the commit file of its batch records, when the file is a
    committed part of a sink's ``data/`` folder: a part whose size, CRC-32 or line count differs, or that does
    not parse, is refused with a :class:`~obda.errors.CheckpointError` located at it (never answers)."""
    path = Path(path)
    if check is None:
        check = _recorded_check(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        # retention deletes a batch's commit file before its parts: a part missing while its commit file is still
        # there was removed by something else
        if check is not None and check.commit and os.path.exists(check.commit):
            raise _refuse_part(path, "is missing but its batch is committed (the output folder was altered)",
                               check) from None
        raise
    if check is not None:
        if check.size is not None and len(data) != check.size:
            raise _refuse_part(path, f"has {len(data)} bytes, {check.size} were committed (truncated or altered)",
                               check)
        if check.crc32 is not None and zlib.crc32(data) != check.crc32:
            raise _refuse_part(path, "is corrupt: its bytes do not match the CRC-32 committed with it", check)
    try:
        if path.suffix == ".parquet":
            import pyarrow.parquet as pq

            rows = [_plain(r) for r in pq.read_table(io.BytesIO(data)).to_pylist()]
        else:
            rows = []
            for n, line in enumerate(data.decode("utf-8").splitlines(), 1):
                if line.strip():
                    try:
                        rows.append(json.loads(line))
                    except ValueError as e:
                        raise CheckpointError(f"line {n} of the part file is not JSON ({e}); the file is corrupt",
                                              Location(file=str(path), line=n)) from None
    except CheckpointError:
        raise
    except Exception as e:  # not UTF-8, not Parquet: corrupt
        raise CheckpointError(f"the part file cannot be read ({type(e).__name__}: {e}); it is corrupt",
                              Location(file=str(path))) from None
    if check is not None and len(rows) != check.lines:
        raise _refuse_part(path, f"holds {len(rows)} answers, {check.lines} were committed (truncated or altered)",
                           check)
    return rows


@dataclass(frozen=True)
class CommittedBatch:
    """One committed batch, as its commit file describes it."""

    root: Path  # the sink's folder
    batch: int
    first: int  # position of its first line in the committed output (1-based)
    lines: int
    files: tuple[tuple[str, int], ...]  # (data file name, lines), in part order
    format: str = "json"
    sums: tuple[tuple[int, int] | None, ...] = ()  # per file (bytes, CRC-32) when the commit file records them

    @property
    def last(self) -> int:
        """Position of its last line (``first - 1`` when it is empty)."""
        return self.first + self.lines - 1

    def paths(self) -> list[Path]:
        return [self.root / DATA / name for name, _ in self.files]

    def commit_file(self) -> Path:
        return self.root / COMMITS / f"{batch_name(self.batch)}.json"

    def checks(self) -> list[PartCheck]:
        """What the commit file records of each part, in part order."""
        sums = self.sums or (None,) * len(self.files)
        return [PartCheck(lines, *(s or (None, None)), commit=str(self.commit_file()))
                for (_, lines), s in zip(self.files, sums)]

    def rows(self) -> list[dict]:
        """Its answers, each part checked against the commit file (:func:`read_part`); raises FileNotFoundError
        when retention deleted it meanwhile, a located CheckpointError when a part was altered."""
        out: list[dict] = []
        for p, check in zip(self.paths(), self.checks()):
            out.extend(read_part(p, check))
        return out

    @classmethod
    def from_record(cls, root: Path, rec: dict) -> "CommittedBatch":
        files = rec["files"]
        sums = tuple((int(f["bytes"]), int(f["crc32"])) if "crc32" in f else None for f in files)
        return cls(Path(root), int(rec["batch"]), int(rec["first"]), int(rec["lines"]),
                   tuple((f["name"], int(f["lines"])) for f in files), rec.get("format", "json"), sums)


def commit_numbers(root: Path) -> list[int]:
    try:
        names = os.listdir(root / COMMITS)
    except FileNotFoundError:
        return []
    return sorted(n for n in (batch_number(x) for x in names if x.endswith(".json") and not x.startswith(".")) if n is not None)


def load_commit(root: Path, batch: int) -> CommittedBatch | None:
    """The commit file of ``batch`` (None: none, deleted by retention meanwhile); a commit file that does not
    parse, or whose ``check`` does not match it, is refused with a CheckpointError located at it."""
    path = root / COMMITS / f"{batch_name(batch)}.json"
    try:
        data = path.read_bytes()
    except FileNotFoundError:  # deleted by retention meanwhile
        return None
    try:
        rec = json.loads(data)
        if "check" in rec and rec["check"] != record_check(rec):
            raise ValueError("its bytes do not match the CRC-32 written in it")
        c = CommittedBatch.from_record(root, rec)
        if c.batch != batch:
            raise ValueError(f"it records batch {c.batch}")
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        raise CheckpointError(f"the commit file of batch {batch} is corrupt or altered ({type(e).__name__}: {e}); "
                              "the output folder cannot be read: restore the file from a copy, or run the query "
                              "again into a fresh output folder with a fresh checkpoint", Location(file=str(path))) from None
    return c


def committed_batches(path: str | os.PathLike, after_batch: int | None = None) -> list[CommittedBatch]:
    """The committed batches of the sink folder ``path`` with a number above ``after_batch``, in order."""
    return list(iter_committed(path, after_batch))


def iter_committed(path: str | os.PathLike, after_batch: int | None = None) -> Iterator[CommittedBatch]:
    """The committed batches after ``after_batch``, one at a time, for readers in any process.

    Each has ``batch``, ``first``/``lines`` (positions in the committed output) and
    ``rows()``; a consumer that remembers the last batch it processed resumes with
    ``after_batch=`` that number and sees every committed answer exactly once.  Staged
    (uncommitted) output is never listed.
    """
    root = Path(path)
    for b in commit_numbers(root):
        if after_batch is not None and b <= after_batch:
            continue
        c = load_commit(root, b)
        if c is not None:
            yield c


def read_committed(path: str | os.PathLike, after_batch: int | None = None) -> list[dict]:
    """Every committed answer after ``after_batch``, in batch order, then part order, then line order."""
    out: list[dict] = []
    for c in iter_committed(path, after_batch):
        try:
            out.extend(c.rows())
        except FileNotFoundError:  # retention deleted it while we read (a part missing otherwise is refused)
            continue
    return out
