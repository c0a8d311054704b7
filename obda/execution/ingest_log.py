"""The durable ingest log of a stream fed by a broker without replayable offsets (MQTT).

Layout under the stream's ``location`` (the folder the executor reads)::

    <location>/000000000001-000000000020.json      a part: messages 1..20, one JSON line each, in arrival order
    <location>/_mqtt/index/000000000001-000000000020.json   per line: topic, packet id, payload digest
    <location>/_mqtt/lock                            held (flock) by the one process that lands messages

Parts are immutable: each is written under a hidden name (``.<part>.tmp``, never listed), fsynced and
renamed, after its index entry was made durable the same way (so a part never exists without its index).
A message's **id** is its position in the log (1-based, never reused); the part's name gives the id of its
first line, so a quarantine record's file and line name the message.

A line is the message's payload with each CR and LF replaced by a space (a JSON text has no raw line
break inside a string, so a JSON payload keeps its meaning); an empty payload is landed as ``""`` so
that every message is one line the reader sees (and quarantines: it is not a JSON object).

**Repeats.** The caller acknowledges a message to the broker only after its part is renamed.  A crash
before that loses nothing: the broker sends the message again (MQTT's DUP flag set).  A crash after it
and before the acknowledgement reached the broker makes the broker send it again too: such a redelivery
(DUP set) whose packet id, topic and payload equal those of the last landed message with that packet
id is a repeat, acknowledged and not landed again.  Packet ids are reused by the broker only after the
earlier message with the id was acknowledged, so the index keeps, per packet id, only the last landing
(read back from the newest index entries at start, at most :data:`WINDOW` messages).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

from obda.errors import ExecutionError
from obda.execution.checkpoint import fsync_path, write_atomic

META = "_mqtt"  # the log's own folder under the stream location: skipped by the executor's listing
WINDOW = 65535  # packet ids are 16-bit: the last landing of each one is among the last 65535 messages
_PART = re.compile(r"^([0-9]{12})-([0-9]{12})\.json$")


@dataclass(frozen=True)
class Message:
    """A message as received: what the log keeps of it, and what acknowledging it needs."""

    topic: str
    packet_id: int
    payload: bytes
    dup: bool = False
    qos: int = 1
    generation: int = 0  # the connection it came on (an acknowledgement goes only to that connection)

    @property
    def digest(self) -> str:
        return hashlib.sha256(self.topic.encode("utf-8") + b"\x00" + self.payload).hexdigest()[:32]


def part_name(first: int, last: int) -> str:
    return f"{first:012d}-{last:012d}.json"


def line_of(payload: bytes) -> bytes:
    """The log line of a payload (see the module)."""
    text = payload.replace(b"\r", b" ").replace(b"\n", b" ")
    return text if text.strip() else b'""'


class IngestLog:
    """One stream's ingest log (see the module).  :meth:`acquire` takes the folder's lock (one lander)."""

    def __init__(self, folder: str | os.PathLike):
        self.folder = Path(folder)
        self.meta = self.folder / META
        self.index = self.meta / "index"
        self._lock_fd: int | None = None
        self.next_id = 1
        self.recent: dict[int, str] = {}  # packet id -> digest of its last landing
        self.landed = 0  # messages landed by this process
        self.repeats = 0  # redeliveries recognised as already landed (by this process)
        self._origins: dict[str, list] = {}  # part name -> its index lines (quarantine annotation)

    # -- opening ---------------------------------------------------------------------------------
    def acquire(self) -> bool:
        """Take the log's lock and recover it; False when another process holds it (it lands the messages)."""
        self.index.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.meta / "lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        self._lock_fd = fd
        self._recover()
        return True

    def release(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # closing the descriptor releases the flock
            self._lock_fd = None

    def _recover(self) -> None:
        """Remove what a crash left half-written; the next id and the recent packet ids from the index."""
        for d in (self.folder, self.index):
            for p in d.iterdir():
                if p.name.startswith(".") and p.name.endswith(".tmp"):
                    p.unlink()
        parts = {p.name for p in self.folder.iterdir() if _PART.match(p.name)}
        entries = sorted(p.name for p in self.index.iterdir() if _PART.match(p.name))
        # ids are never reused, not even those of an entry whose part was never renamed (a crash) or was
        # deleted (retention): the executor remembers the parts it read by name
        self.next_id = 1 + max(int(_PART.match(n).group(2)) for n in [*parts, *entries, part_name(0, 0)])
        self.recent, seen = {}, 0
        for name in reversed(entries):
            if name not in parts:  # its messages are not in the log: a redelivery of them is no repeat
                continue
            lines = self._entry(name)
            for topic_, packet_id, digest in reversed(lines):
                self.recent.setdefault(packet_id, digest)
            seen += len(lines)
            if seen >= WINDOW:
                break
        fsync_path(self.folder)

    def _entry(self, name: str) -> list:
        return json.loads((self.index / name).read_text(encoding="utf-8"))["messages"]

    # -- landing ---------------------------------------------------------------------------------
    def is_repeat(self, m: Message) -> bool:
        return m.dup and self.recent.get(m.packet_id) == m.digest

    def land(self, messages: list[Message]) -> tuple[list[Message], list[Message]]:
        """Land ``messages`` (in order) as one part; returns (landed, repeats): both may be acknowledged now."""
        if self._lock_fd is None:
            raise ExecutionError(f"the ingest log {self.folder} is not held by this process")
        fresh, repeats = [], []
        for m in messages:
            (repeats if self.is_repeat(m) else fresh).append(m)
        self.repeats += len(repeats)
        if not fresh:
            return [], repeats
        first, last = self.next_id, self.next_id + len(fresh) - 1
        name = part_name(first, last)
        lines = [[m.topic, m.packet_id, m.digest] for m in fresh]
        write_atomic(self.index / name, json.dumps({"first": first, "messages": lines}).encode("utf-8"))
        write_atomic(self.folder / name, b"\n".join(line_of(m.payload) for m in fresh) + b"\n")
        self.next_id = last + 1
        for m in fresh:
            self.recent[m.packet_id] = m.digest
        self.landed += len(fresh)
        return fresh, repeats

    # -- reading back -------------------------------------------------------------------------------
    def parts(self) -> list[Path]:
        return sorted(p for p in self.folder.iterdir() if _PART.match(p.name))

    def origin(self, file: str, line: int | None) -> dict | None:
        """The message at ``line`` of the part ``file`` of this log: its id, topic and packet id (None: not one)."""
        p = Path(file)
        m = _PART.match(p.name)
        if m is None or line is None or p.parent.resolve() != self.folder.resolve():
            return None
        if p.name not in self._origins:
            try:
                self._origins[p.name] = self._entry(p.name)
            except (OSError, ValueError):
                return None
            if len(self._origins) > 256:
                self._origins.pop(next(iter(self._origins)))
        lines = self._origins[p.name]
        if not 1 <= line <= len(lines):
            return None
        topic, packet_id, _ = lines[line - 1]
        return {"topic": topic, "message": int(m.group(1)) + line - 1, "packet_id": packet_id}
