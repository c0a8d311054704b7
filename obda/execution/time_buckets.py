"""Answers partitioned by time without a sampling job: partition ``k`` of ``n`` holds the ``k``-th slice of time.

A sink that writes with Spark writes a micro-batch's answers partition by partition, each partition's part
file in order (:meth:`~obda.execution.answers.AnswerFrame.in_time_order`).  ``repartitionByRange`` gives
that order, but Spark samples the partitions' bounds first in a job of its own, which computes the answers
once more (the micro-batch's joins included) before the write computes them again.  The executor knows
where the answers' timestamps lie — the range ``(lo, hi]`` the micro-batch closes, or an estimate of it —
so it cuts that range into ``n`` slices of equal length instead (:func:`slice_of`: monotone in the
timestamp, clamped at both ends, so any range gives the order; a good one gives balanced partitions).  A
backlog's single pass writes before its range is known: the first and last rows of its CSV files tell
about where it lies (:func:`csv_time_span`, a few KiB read per file on the driver).

Spark places a row by hash partitioning: partition ``pmod(murmur3(key, 42), n)`` (``HashPartitioning``,
the ``hash()`` SQL function).  :func:`partition_keys` finds, for each ``k < n``, an integer key that Spark
places in partition ``k``; slice ``k``'s rows carry that key, so they land in partition ``k``.  The hash is
Spark's ``Murmur3_x86_32.hashInt`` (:func:`spark_hash_int`), checked against Spark itself in
``tests/execution/test_time_buckets.py``.  Adaptive execution may merge adjacent partitions, which keeps
their order.
"""

from __future__ import annotations

from functools import lru_cache

_M = 0xFFFFFFFF
SEED = 42  # Spark's HashPartitioning seed


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _M


def spark_hash_int(value: int, seed: int = SEED) -> int:
    """Spark's ``hash()`` of an INT value: Murmur3 x86 32-bit (``Murmur3_x86_32.hashInt``), as a signed int."""
    k1 = (value & _M) * 0xCC9E2D51 & _M
    k1 = _rotl(k1, 15) * 0x1B873593 & _M
    h1 = _rotl((seed & _M) ^ k1, 13)
    h1 = (h1 * 5 + 0xE6546B64) & _M
    h1 ^= 4  # the input's length in bytes
    h1 ^= h1 >> 16
    h1 = h1 * 0x85EBCA6B & _M
    h1 ^= h1 >> 13
    h1 = h1 * 0xC2B2AE35 & _M
    h1 ^= h1 >> 16
    return h1 - (1 << 32) if h1 & 0x80000000 else h1


@lru_cache(maxsize=64)
def partition_keys(n: int) -> tuple[int, ...]:
    """For each partition ``k < n``, the smallest non-negative INT key Spark's hash partitioning into ``n``
    partitions places in ``k`` (``pmod(hash(key), n) == k``)."""
    keys: dict[int, int] = {}
    v = 0
    while len(keys) < n:
        keys.setdefault(spark_hash_int(v) % n, v)  # Python's % of a positive n is pmod
        v += 1
    return tuple(keys[k] for k in range(n))


def slice_of(at, lo: int, hi: int, n: int):
    """The slice ``0 … n-1`` of ``(lo, hi]`` (microseconds) that the timestamp column ``at`` falls in, as a
    Spark column: ``floor((at - lo - 1) * n / (hi - lo))``, clamped to ``[0, n - 1]`` (a timestamp outside the
    range goes to the nearest end, so the slices stay in time order whatever the range)."""
    from pyspark.sql import functions as F

    width = max(1, hi - lo)
    k = F.floor((at - F.lit(lo + 1)).cast("double") * F.lit(float(n)) / F.lit(float(width)))
    return F.least(F.greatest(k, F.lit(0)), F.lit(n - 1)).cast("int")


def by_time_slices(df, at, lo: int, hi: int, n: int):
    """``df`` in ``n`` partitions, partition ``k`` the rows of slice ``k`` of ``(lo, hi]`` (no sampling job)."""
    from pyspark.sql import functions as F

    keys = F.array(*(F.lit(k) for k in partition_keys(n)))
    placed = F.element_at(keys, F.coalesce(slice_of(at, lo, hi, n), F.lit(0)) + 1)  # no time: first, as sorted
    return df.repartition(n, placed)


SAMPLED_FILES = 4  # files read at each end of a read's list (in listing order) for the estimate
_TAIL = 16 << 10  # bytes read at a file's end for its last row


def csv_time_span(reads) -> tuple[int, int] | None:
    """Where the rows of a micro-batch's fresh CSV ``reads`` lie in time, estimated on the driver from the first
    and last rows of the first and last :data:`SAMPLED_FILES` files of each read (at most a few KiB each), for
    a write whose range is not known before its job (the single pass of a backlog).  ``(lo, hi)`` in µs, None
    when no such row could be read.  Only the partitions' balance depends on it: :func:`slice_of` clamps."""
    seen: list[int] = []
    for r in reads:
        table = r.table
        if not r.fresh or r.fmt != "csv" or not table.timestamp:
            continue
        paths = list(r.paths)
        for path in dict.fromkeys(paths[:SAMPLED_FILES] + paths[-SAMPLED_FILES:]):
            seen.extend(_first_and_last(path, table))
    return (min(seen), max(seen)) if seen else None


def _first_and_last(path: str, table) -> list[int]:
    """The timestamps of a CSV file's first and last rows that parse (none on any doubt: it is an estimate)."""
    import csv
    import io
    import os

    from obda.execution.reader import csv_dialect, file_header, header_names, parse_field, _text
    from obda.model.sources import ColumnType

    options = dict(table.options)
    header, rejected = file_header(path, table, options)
    if not header or rejected is not None:
        return []
    names, _ = header_names(table, list(header))
    if table.timestamp not in names:
        return []
    pos = names.index(table.timestamp)
    try:
        size = os.path.getsize(path)
        with open(path, "rb") as f:
            head = f.read(_TAIL)
            f.seek(max(0, size - _TAIL))
            tail = f.read(_TAIL)
    except OSError:
        return []
    out = []
    lines = _text(head).splitlines()[1:2]  # the header's line, then the first row's
    tail_lines = [x for x in _text(tail).splitlines()[1 if size > _TAIL else 0:] if x.strip()]
    for line in lines + tail_lines[-1:]:
        try:
            fields = next(csv.reader(io.StringIO(line), **csv_dialect(options)))
            out.append(parse_field(fields[pos], ColumnType.TIMESTAMP))
        except (csv.Error, StopIteration, IndexError, ValueError):
            continue
    return out
