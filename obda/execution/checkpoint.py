"""The executor's checkpoint file: what it holds, how it is written and read back safely.

A checkpoint holds plain data only — synopsis entries (tuples of ints, floats, strings,
booleans, decimals, dates), counts, sets of emitted answers and consumed files, offsets,
an aggregate's panes, what the k-constraint watches observed (``ConstraintWatch.state()``:
dicts, lists and tuples of keys and timestamps, Bloom filter bits as bytes; the declared
constraints are configuration and come from the plan again) and the metrics dataclass, the
one class of obda's it names.  Every kind of query keeps to this (tests/execution/
test_checkpoint_kinds.py checks the file's globals).  It is written with :mod:`pickle` (C
speed: it is rewritten after every micro-batch) and atomically replaced (temporary file,
fsync, rename).

Reading uses an unpickler that resolves only the few classes a checkpoint contains, so a
checkpoint file that was altered or planted in the checkpoint directory cannot make the
executor call anything else (the ``Restricting Globals`` recipe of the :mod:`pickle`
documentation): it is refused with an :class:`~obda.errors.ExecutionError`.

A sink that must know when its output is covered by a checkpoint on disk (the HTTP service's
result log publishes answers only then) registers a callback with :func:`on_dump`; it runs right
after the file was replaced.
"""

from __future__ import annotations

import io
import os
import pickle
import threading
from pathlib import Path
from typing import Callable

from obda.errors import CheckpointError, ExecutionError

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
        super().__init__(io.BytesIO(data))
        self.path = path

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


def dump(state: dict, path: Path | None) -> int:
    """Serialise ``state``; when ``path`` is given, replace the file atomically.  Returns its size in bytes."""
    data = pickle.dumps(state, protocol=pickle.HIGHEST_PROTOCOL)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        fsync_path(path.parent)  # the rename itself on disk: what a sink publishes must not roll back
        callback = _after_dump.get(os.path.abspath(path))
        if callback is not None:
            callback()
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


def load(path: Path) -> dict:
    """The state in the checkpoint file ``path`` (refused when it holds anything but checkpoint data)."""
    try:
        data = path.read_bytes()
    except OSError as e:  # the file system's refusal (permissions, I/O): fixed outside, the checkpoint is fine
        raise ExecutionError(f"checkpoint {path} cannot be read ({e.strerror or type(e).__name__}); make it "
                             "readable, then run again with the same checkpoint: it resumes from it") from None
    try:
        state = _Unpickler(data, path).load()
    except ExecutionError:
        raise
    except Exception as e:  # truncated or not a checkpoint at all
        raise CheckpointError(f"checkpoint {path} cannot be read ({type(e).__name__}: {e}); use a fresh checkpoint "
                              "directory") from e
    if not isinstance(state, dict):
        raise CheckpointError(f"checkpoint {path} does not hold an executor state; use a fresh checkpoint directory")
    return state


def is_state_fault(error: BaseException) -> bool:
    """Whether a query's failure is its own saved state's fault — a checkpoint (or the output it records) that
    cannot be used — so that resuming from that checkpoint cannot succeed whatever is fixed outside.  Every
    other failure (a stream folder or file, a static table, Spark, a JDBC database, a disk: its environment or
    input) leaves the last checkpoint as it was, and the query can resume from it once the cause is fixed."""
    return isinstance(error, CheckpointError)
