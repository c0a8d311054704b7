"""The executor's checkpoint file: what it holds, how it is written and read back safely.

A checkpoint holds plain data only — synopsis entries (tuples of ints, floats, strings,
booleans, decimals, dates), counts, sets of emitted answers and consumed files, offsets,
an aggregate's panes, what the k-constraint watches observed (``ConstraintWatch.state()``:
dicts, lists and tuples of keys and timestamps, Bloom filter bits as bytes; the declared
constraints are configuration and come from the plan again) and the metrics dataclass, the
one class of obda's it names.  Every kind of query keeps to this (tests/execution/
test_checkpoint_kinds.py checks the file's globals).  It is written with :mod:`pickle` (C
speed: it is rewritten after every micro-batch) and atomically replaced (temporary file,
fsync, rename).  The pickle is followed by a trailer, :data:`TRAILER_MAGIC`, the SHA-256 of the pickle and its
length: :func:`load` refuses a file whose bytes do not match it (a truncated, altered or bit-rotten checkpoint
is a :class:`~obda.errors.CheckpointError` naming the file, never a state that would give wrong answers).  A
file without the trailer (written before it existed) is read as before, and refused when bytes follow its pickle.

A write the file system refuses (a full disk: ``ENOSPC``, a quota: ``EDQUOT``, an I/O error) leaves the last
checkpoint as it was and removes the partial temporary file; it is raised as an
:class:`~obda.errors.ExecutionError` located at the folder, saying "no space left on device" for a full disk
(:func:`write_error`, used by the sinks too): a failure of the environment, so the query resumes from its last
checkpoint once space is back.

Reading uses an unpickler that resolves only the few classes a checkpoint contains, so a
checkpoint file that was altered or planted in the checkpoint directory cannot make the
executor call anything else (the ``Restricting Globals`` recipe of the :mod:`pickle`
documentation): it is refused with an :class:`~obda.errors.ExecutionError`.

A sink that must know when its output is covered by a checkpoint on disk (the HTTP service's
result log publishes answers only then) registers a callback with :func:`on_dump`; it runs right
after the file was replaced.
"""

from __future__ import annotations

import errno
import hashlib
import io
import os
import pickle
import threading
from pathlib import Path
from typing import Callable

from obda.errors import CheckpointError, ExecutionError, Location

# (module, name) of every class or function a checkpoint may refer to
ALLOWED = frozenset(
    {
        ("builtins", "int"),
        ("builtins", "float"),
        ("builtins", "str"),
        ("builtins", "bool"),
        ("builtins", "set"),
        ("builtins", "frozenset"),
        ("builtins", "list"),
        ("builtins", "tuple"),
        ("builtins", "dict"),
        ("builtins", "bytes"),
        ("collections", "defaultdict"),
        ("collections", "OrderedDict"),
        ("collections", "Counter"),
        ("decimal", "Decimal"),
        ("datetime", "datetime"),
        ("datetime", "date"),
        ("datetime", "time"),
        ("datetime", "timedelta"),
        ("datetime", "timezone"),
        ("obda.execution.runtime", "Metrics"),
    }
)


class _Unpickler(pickle.Unpickler):
    def __init__(self, data: bytes, path: Path):
        self._file = io.BytesIO(data)
        super().__init__(self._file)
        self.path = path

    @property
    def consumed(self) -> int:
        """Bytes read so far (after :meth:`load`: where the pickle ended)."""
        return self._file.tell()

    def find_class(self, module: str, name: str):
        if (module, name) not in ALLOWED:
            raise CheckpointError(
                f"checkpoint {self.path} refers to {module}.{name}, which no obda checkpoint contains; "
                "it was not written by obda and is not loaded (use a fresh checkpoint directory)"
            )
        return super().find_class(module, name)


_after_dump: dict[str, Callable[[], None]] = {}
_after_dump_lock = threading.Lock()


def on_dump(path: str | os.PathLike, callback: Callable[[], None] | None) -> None:
    """Call ``callback`` each time a checkpoint was written to ``path`` (None: no longer)."""
    key = os.path.abspath(path)
    with _after_dump_lock:
        if callback is None:
            _after_dump.pop(key, None)
        else:
            _after_dump[key] = callback


#: starts the trailer after a checkpoint's pickle: then 32 bytes of SHA-256 of the pickle, 8 of its length (big endian)
TRAILER_MAGIC = b"\n#obda-checkpoint-sha256\n"
_TRAILER = len(TRAILER_MAGIC) + 32 + 8


def _trailer(data: bytes) -> bytes:
    return TRAILER_MAGIC + hashlib.sha256(data).digest() + len(data).to_bytes(8, "big")


#: errno values that mean the file system has no room left for the write
NO_SPACE = (errno.ENOSPC, errno.EDQUOT)


def write_error(error: OSError, folder: Path, what: str, after: str) -> ExecutionError:
    """A write of ``what`` into ``folder`` that the file system refused, as a located ExecutionError: "no space
    left on device" for a full disk or quota, else the system's reason; ``after`` says what is left as it was."""
    if error.errno in NO_SPACE:
        why = "no space left on device" + (" (disk quota exceeded)" if error.errno == errno.EDQUOT else "")
    else:
        why = error.strerror or type(error).__name__
    if error.filename:
        why = f"{error.filename}: {why}"
    return ExecutionError(f"{why}: {what} could not be written; {after}", Location(file=str(folder)))


def _unlink_quietly(path: Path) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def dump(state: dict, path: Path | None) -> int:
    """Serialise ``state``; when ``path`` is given, replace the file atomically.  Returns its size in bytes.

    A write the file system refuses raises :func:`write_error` (the previous checkpoint is intact)."""
    data = pickle.dumps(state, protocol=pickle.HIGHEST_PROTOCOL)
    if path is not None:
        tmp = path.with_suffix(".tmp")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            with open(tmp, "wb") as f:
                f.write(data)
                f.write(_trailer(data))
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        except OSError as e:
            _unlink_quietly(tmp)  # the room it took is free again
            raise write_error(e, path.parent, f"the checkpoint {path.name}",
                              "the previous checkpoint is intact and nothing of this micro-batch was published") from e
        fsync_path(path.parent)  # the rename itself on disk: what a sink publishes must not roll back
        callback = _after_dump.get(os.path.abspath(path))
        if callback is not None:
            callback()
        return len(data) + _TRAILER
    return len(data)


def fsync_path(path: Path) -> None:
    """fsync a file or a folder (best effort: some file systems refuse a folder's fsync)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def write_atomic(path: Path, data: bytes) -> None:
    """Replace ``path`` by ``data``: temporary file (a name readers skip), fsync, rename, fsync of the folder.
    A refused write (OSError) removes the temporary file and leaves ``path`` as it was."""
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    fsync_path(path.parent)


def load(path: Path) -> dict:
    """The state in the checkpoint file ``path`` (refused when it holds anything but checkpoint data)."""
    try:
        data = path.read_bytes()
    except OSError as e:  # the file system's refusal (permissions, I/O): fixed outside, the checkpoint is fine
        raise ExecutionError(f"checkpoint {path} cannot be read ({e.strerror or type(e).__name__}); make it "
                             "readable, then run again with the same checkpoint: it resumes from it") from None
    body = _verified(data, path)
    unpickler = _Unpickler(body, path)
    try:
        state = unpickler.load()
    except ExecutionError:
        raise
    except Exception as e:  # truncated or not a checkpoint at all
        raise CheckpointError(f"checkpoint {path} cannot be read ({type(e).__name__}: {e}); use a fresh checkpoint "
                              "directory") from e
    if unpickler.consumed != len(body):
        raise CheckpointError(f"the checkpoint has {len(body) - unpickler.consumed} byte(s) after its end: it was "
                              "altered or is corrupt; use a fresh checkpoint directory", Location(file=str(path)))
    if not isinstance(state, dict):
        raise CheckpointError(f"checkpoint {path} does not hold an executor state; use a fresh checkpoint directory")
    return state


def _verified(data: bytes, path: Path) -> bytes:
    """The pickle of a checkpoint file's bytes, checked against its trailer (a file without one: all of it)."""
    tail = data[-_TRAILER:]
    if len(data) >= _TRAILER and tail.startswith(TRAILER_MAGIC):
        body = data[:-_TRAILER]
        digest, length = tail[len(TRAILER_MAGIC):-8], int.from_bytes(tail[-8:], "big")
        if length != len(body):
            raise CheckpointError(f"the checkpoint is truncated or altered: {len(body)} bytes before its checksum, "
                                  f"{length} written; use a fresh checkpoint directory", Location(file=str(path)))
        if hashlib.sha256(body).digest() != digest:
            raise CheckpointError("the checkpoint is corrupt: its bytes do not match the SHA-256 written with it; "
                                  "use a fresh checkpoint directory", Location(file=str(path)))
        return body
    if TRAILER_MAGIC in data:
        raise CheckpointError("the checkpoint is truncated or altered: its checksum is not at its end; use a fresh "
                              "checkpoint directory", Location(file=str(path)))
    return data  # written before checkpoints had a checksum


def is_state_fault(error: BaseException) -> bool:
    """Whether a query's failure is its own saved state's fault — a checkpoint (or the output it records) that
    cannot be used — so that resuming from that checkpoint cannot succeed whatever is fixed outside.  Every
    other failure (a stream folder or file, a static table, Spark, a JDBC database, a disk: its environment or
    input) leaves the last checkpoint as it was, and the query can resume from it once the cause is fixed."""
    return isinstance(error, CheckpointError)
