"""What a k-constraint's watch remembers of the keys it has seen, in bounded memory (:mod:`obda.execution.constraints`).

* :class:`Reference` — one stream as a constraint's reference side: each key's first timestamp, exactly for
  ``margin · k``, then for a hashed sample of the keys (:func:`sampled`) for the window ``W``;
* :class:`Departed` — the keys that left it, in generations of Bloom filters (:class:`Bloom`: no false
  negatives, a false-positive rate kept below a target and reported);
* :class:`SideCheck` — one side of a constraint: the distances it measured, their sliding maximum over ``W``
  (the estimated ``k``).

Each has ``state()`` (plain data: lists, tuples, numbers, bytes) and ``restore(state)``, what a checkpoint keeps.
"""

from __future__ import annotations

import hashlib
import math
import struct
from collections import deque
from dataclasses import dataclass, field


class Bloom:
    """A Bloom filter of keys (tuples): no false negatives; ``fp_rate`` estimates the false positives."""

    def __init__(self, bits: int, hashes: int = 7):  # hashes ≤ 8 (one 64-byte digest)
        self.m, self.k, self.n = bits, hashes, 0
        self.bits = bytearray((bits + 7) // 8)

    def positions(self, key) -> list[int]:
        # one independent 64-bit hash per position (double hashing makes keys collide on all positions
        # together with probability ~2n/m², which dominates the false positives of a small filter)
        m, k = self.m, self.k
        return [x % m for x in struct.unpack(f"<{k}Q", hashlib.blake2b(repr(key).encode(), digest_size=8 * k).digest())]

    def add(self, key) -> None:
        for p in self.positions(key):
            self.bits[p >> 3] |= 1 << (p & 7)
        self.n += 1

    def __contains__(self, key) -> bool:
        return self.has(self.positions(key))

    def has(self, positions) -> bool:
        """Whether every one of ``positions`` (:meth:`positions` of a key, for a filter of this size) is set."""
        return all(self.bits[p >> 3] & (1 << (p & 7)) for p in positions)

    @property
    def fp_rate(self) -> float:
        return (1 - math.exp(-self.k * self.n / self.m)) ** self.k

    def state(self) -> dict:
        return {"bits": bytes(self.bits), "n": self.n}

    def restore(self, st: dict) -> None:
        bits = st["bits"]
        if len(bits) != len(self.bits):
            raise incompatible(f"a Bloom filter of {8 * len(bits)} bits where {8 * len(self.bits)} are configured "
                                "(bloom_bits changed)")
        self.bits, self.n = bytearray(bits), int(st["n"])


class Departed:
    """The keys that left the exact map, in a few generations of Bloom filters (``bits`` in all).

    One filter that keeps every key fills up: after enough keys every lookup is a hit, and every new key
    would look like a violation.  So the newest generation takes keys until its false-positive rate
    reaches ``fp_target``; then a fresh one starts and, beyond ``generations``, the oldest is forgotten.
    Memory stays ``bits``; a lookup's false-positive rate stays below ``generations · fp_target``; what is
    given up is reported: a key that left before ``remembered_since`` is no longer recognised."""

    def __init__(self, bits: int, generations: int = 4, fp_target: float = 1e-9):
        self.per = max(1024, bits // generations)
        self.generations, self.fp_target = generations, fp_target
        self.filters: deque = deque()  # (timestamp of its first key, Bloom), oldest first
        self.forgotten = 0  # keys of the generations dropped
        self.remembered_since: int | None = None  # None: nothing forgotten yet

    def add(self, ts: int, key) -> None:
        if not self.filters or self.filters[-1][1].fp_rate >= self.fp_target:
            self.filters.append((ts, Bloom(self.per)))
            if len(self.filters) > self.generations:
                _, old = self.filters.popleft()
                self.forgotten += old.n
                self.remembered_since = self.filters[0][0]
        self.filters[-1][1].add(key)

    def __contains__(self, key) -> bool:
        if not self.filters:
            return False
        at = self.filters[0][1].positions(key)  # the generations have one size: the key is hashed once
        return any(b.has(at) for _, b in reversed(self.filters))

    @property
    def n(self) -> int:
        return sum(b.n for _, b in self.filters)

    def state(self) -> dict:
        return {"filters": [(ts, b.state()) for ts, b in self.filters], "forgotten": self.forgotten,
                "remembered_since": self.remembered_since}

    def restore(self, st: dict) -> None:
        self.filters = deque()
        for ts, b in st["filters"]:
            bloom = Bloom(self.per)
            bloom.restore(b)
            self.filters.append((ts, bloom))
        self.forgotten, self.remembered_since = st["forgotten"], st["remembered_since"]

    @property
    def fp_rate(self) -> float:
        miss = 1.0
        for _, b in self.filters:
            miss *= 1 - b.fp_rate
        return 1 - miss


def sampled(key, p: float) -> bool:
    if p <= 0:
        return False
    h = int.from_bytes(hashlib.blake2b(repr(key).encode(), digest_size=8).digest(), "little")
    return h < p * 2 ** 64


@dataclass
class Reference:
    """The keys of one stream as a reference side: first timestamp per key, oldest first."""

    horizon: int  # exact for this long (margin · k)
    window: int  # sampled keys: this long
    sample: float
    departed: Departed
    first: dict = field(default_factory=dict)
    order: deque = field(default_factory=deque)  # (first ts, key) in insertion (= timestamp) order
    sampled: dict = field(default_factory=dict)
    sampled_order: deque = field(default_factory=deque)

    def seen(self, key):
        """``(first ts or None, known)``: the key's first timestamp if kept; ``known`` False for a Bloom hit."""
        t = self.first.get(key)
        if t is None:
            t = self.sampled.get(key)
        if t is not None:
            return t, True
        return (None, key in self.departed) if self.departed.n else (None, False)

    def add(self, ts: int, key) -> None:
        if key not in self.first and key not in self.sampled and not (self.departed.n and key in self.departed):
            self.first[key] = ts
            self.order.append((ts, key))

    def evict(self, now: int, dropped) -> None:
        """Keys older than the horizon leave the exact map (into the sample or the Bloom filter)."""
        while self.order and self.order[0][0] < now - self.horizon:
            t, key = self.order.popleft()
            del self.first[key]
            if dropped(t):
                self.departed.add(t, key)
            if sampled(key, self.sample):
                self.sampled[key] = t
                self.sampled_order.append((t, key))
        while self.sampled_order and self.sampled_order[0][0] < now - self.window:
            _, key = self.sampled_order.popleft()
            del self.sampled[key]

    @property
    def size(self) -> int:
        return len(self.first) + len(self.sampled)

    def state(self) -> dict:
        """``first`` and ``sampled`` are the maps of ``order`` and ``sampled_order`` (key → ts): stored once, as the
        lists."""
        return {"order": list(self.order), "sampled_order": list(self.sampled_order), "departed": self.departed.state()}

    def restore(self, st: dict) -> None:
        self.order = deque((t, key) for t, key in st["order"])
        self.first = {key: t for t, key in self.order}
        self.sampled_order = deque((t, key) for t, key in st["sampled_order"])
        self.sampled = {key: t for t, key in self.sampled_order}
        self.departed.restore(st["departed"])


@dataclass
class SideCheck:
    """Rows of ``table`` checked against the earlier rows of ``reference`` with ``bound`` (one side of a constraint)."""

    side: str
    table: str
    reference: str
    bound: int
    window: int
    maxima: deque = field(default_factory=deque)  # (ts, distance) with decreasing distances: the sliding max
    beyond_margin: int = 0  # violations whose distance is only known to exceed the margin (Bloom hits)

    def observe(self, ts: int, d: int) -> None:
        while self.maxima and self.maxima[-1][1] <= d:
            self.maxima.pop()
        self.maxima.append((ts, d))

    def estimate(self, now: int) -> int:
        while self.maxima and self.maxima[0][0] < now - self.window:
            self.maxima.popleft()
        return self.maxima[0][1] if self.maxima else 0

    def state(self) -> dict:
        return {"maxima": list(self.maxima), "beyond_margin": self.beyond_margin}

    def restore(self, st: dict) -> None:
        self.maxima = deque(tuple(x) for x in st["maxima"])
        self.beyond_margin = st["beyond_margin"]


def incompatible(why: str):
    """The error of a checkpoint whose constraint state the declared constraints do not fit."""
    from obda.errors import ExecutionError

    return ExecutionError(f"the checkpoint's k-constraint state does not fit the declared constraints: {why}; "
                          "use a fresh checkpoint directory (or the declarations it was written with)")
