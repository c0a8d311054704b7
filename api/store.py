"""The service's durable registry: one SQLite database (standard library, WAL mode) in the state directory.

What it holds, so that a restarted service (after SIGTERM or ``kill -9``) carries on where it stopped:

* ``queries`` — every registered query: id, name, SPARQL text, options, the status the user asked for
  (``registered | running | stopped | failed``: a ``running`` one is resumed on start), its error and what
  kind of failure it was (``failure``: ``environment`` — resumable from the checkpoint once the cause is
  fixed — or ``state``: its checkpoint or results cannot be used), its executor's checkpoint folder, and
  ``last_seq`` / ``first_seq``: the newest *published* answer and the oldest one kept (older ones were
  dropped by the retention limit); its ``owner`` (the user who registered it: :mod:`api.access`) and the users
  it is ``shared_with`` (a JSON list) — query names are unique per owner;

The answers themselves are not here: each query's :class:`api.results.ResultLog` keeps them in its results
folder (an :class:`obda.execution.DirectorySink`: part files and an atomic commit log).  They become
visible to readers only once the executor's checkpoint that covers them is on disk and the sink commits
them (``last_seq`` moves); a crash in between leaves staged parts nobody has read, which the restarted
executor deletes (``recover``) and computes again from its checkpoint.  So a client never sees an answer
under a sequence number that a restart gives to another answer.

Every transaction is ``synchronous=FULL``: a commit is on disk before the executor writes the checkpoint
that refers to it.  With no state directory the same schema lives in memory (lost at exit).
"""

from __future__ import annotations

import json
import sqlite3
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

DB_NAME = "registry.sqlite3"
SCHEMA_VERSION = 2  # 2: owner and shared_with, names unique per owner (a version 1 registry is migrated)
#: the owner of the queries of a registry written before users (the single --token's user)
LEGACY_OWNER = "admin"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS queries (
    id TEXT PRIMARY KEY,
    owner TEXT NOT NULL DEFAULT 'admin',
    shared_with TEXT NOT NULL DEFAULT '[]',
    name TEXT NOT NULL,
    text TEXT NOT NULL,
    allow_unbounded INTEGER NOT NULL,
    idle_timeout REAL,
    status TEXT NOT NULL,
    error TEXT,
    created_at TEXT NOT NULL,
    started_at TEXT,
    stopped_at TEXT,
    checkpoint TEXT,
    last_seq INTEGER NOT NULL DEFAULT 0,
    first_seq INTEGER NOT NULL DEFAULT 1,
    failure TEXT,
    shed TEXT,
    output TEXT,
    UNIQUE (owner, name)
);
-- answers were kept here by earlier versions (now in each query's results folder)
DROP TABLE IF EXISTS answers;
"""

QUERY_FIELDS = ("id", "name", "text", "allow_unbounded", "idle_timeout", "status", "error", "created_at",
                "started_at", "stopped_at", "checkpoint", "last_seq", "first_seq", "failure", "owner", "shared_with",
                "shed", "output")
#: the columns of a version 1 registry, copied by the migration to version 2
V1_FIELDS = QUERY_FIELDS[:14]
#: columns added after the first version of the schema: (name, definition), added to an older database in place
# shed: a query's shedding setting, JSON; output: its Kafka output URL
ADDED_COLUMNS = (("failure", "TEXT"), ("shed", "TEXT"), ("output", "TEXT"))


class StoreError(RuntimeError):
    """The registry database cannot be opened or is not one this service wrote."""


class Store:
    """One SQLite connection shared by the service's threads (serialised by a lock)."""

    def __init__(self, path: Path | None = None):
        self.path = Path(path) if path is not None else None
        try:
            if self.path is not None:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            self.conn = sqlite3.connect(str(self.path) if self.path else ":memory:", check_same_thread=False,
                                        isolation_level=None)
            self.lock = threading.RLock()
            if self.path is not None:
                mode = self.conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
                if str(mode).lower() != "wal":
                    raise StoreError(f"{self.path}: SQLite refused WAL mode (journal mode {mode})")
            self.conn.execute("PRAGMA synchronous=FULL")
            self.conn.execute("PRAGMA foreign_keys=ON")
            self.conn.execute("PRAGMA busy_timeout=10000")
            with self.transaction() as c:  # executescript would commit: one statement at a time
                for stmt in filter(None, (s.strip() for s in _SCHEMA.split(";"))):
                    c.execute(stmt)
                have = {r[1] for r in c.execute("PRAGMA table_info(queries)").fetchall()}
                for name, definition in ADDED_COLUMNS:  # a registry an earlier version wrote: the same, plus these
                    if name not in have:
                        c.execute(f"ALTER TABLE queries ADD COLUMN {name} {definition}")
                row = c.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
                if row is not None and row[0] not in ("1", str(SCHEMA_VERSION)):
                    raise StoreError(f"{self.path}: registry schema version {row[0]}, this service reads "
                                     f"{SCHEMA_VERSION}; use another --state-dir")
                if "owner" not in have:  # version 1: no owners, names unique over the service
                    _migrate_to_owners(c)
                c.execute("INSERT OR REPLACE INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
        except sqlite3.DatabaseError as e:
            raise StoreError(f"{self.path or 'in-memory registry'}: {e}") from e

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """``BEGIN IMMEDIATE`` … ``COMMIT`` (rolled back on an exception), under the store's lock."""
        with self.lock:
            self.conn.execute("BEGIN IMMEDIATE")
            try:
                yield self.conn
            except BaseException:
                self.conn.execute("ROLLBACK")
                raise
            self.conn.execute("COMMIT")

    def read(self, sql: str, params=()) -> list[tuple]:
        with self.lock:
            return self.conn.execute(sql, params).fetchall()

    # -- queries --------------------------------------------------------------------------------
    def insert_query(self, row: dict) -> None:
        with self.transaction() as c:
            c.execute(f"INSERT INTO queries ({', '.join(row)}) VALUES ({', '.join('?' * len(row))})", tuple(row.values()))

    def update_query(self, query_id: str, **values) -> None:
        if not values:
            return
        with self.transaction() as c:
            c.execute(f"UPDATE queries SET {', '.join(f'{k} = ?' for k in values)} WHERE id = ?",
                      (*values.values(), query_id))

    def delete_query(self, query_id: str) -> None:
        with self.transaction() as c:
            c.execute("DELETE FROM queries WHERE id = ?", (query_id,))

    def share(self, query_id: str, users: list[str]) -> None:
        self.update_query(query_id, shared_with=json.dumps(sorted(set(users))))

    def queries(self) -> list[dict]:
        rows = self.read(f"SELECT {', '.join(QUERY_FIELDS)} FROM queries ORDER BY created_at, id")
        out = [dict(zip(QUERY_FIELDS, r)) for r in rows]
        for row in out:
            row["shared_with"] = tuple(json.loads(row["shared_with"] or "[]"))
        return out

    def close(self) -> None:
        with self.lock:
            try:
                self.conn.close()
            except sqlite3.Error:
                pass


def _migrate_to_owners(c: sqlite3.Connection) -> None:
    """Version 1 → 2, in the caller's transaction: the table rebuilt with ``owner`` and ``shared_with`` (names
    unique per owner; SQLite cannot drop the old UNIQUE in place); every query belongs to :data:`LEGACY_OWNER`."""
    c.execute("ALTER TABLE queries RENAME TO queries_v1")
    create = next(s for s in _SCHEMA.split(";") if "CREATE TABLE IF NOT EXISTS queries" in s)
    c.execute(create)
    cols = ", ".join(V1_FIELDS)
    c.execute(f"INSERT INTO queries ({cols}, owner, shared_with) SELECT {cols}, ?, '[]' FROM queries_v1",
              (LEGACY_OWNER,))
    c.execute("DROP TABLE queries_v1")
