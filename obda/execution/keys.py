"""Declared keys checked: a row that repeats the key of an earlier row of its timestamp is quarantined.

A table's ``key:`` lets the unfolding drop redundant self-joins and the forest drop synopsis entries
by key (keyed consumption); both are right only if no two rows share a key.  So keys are checked
before any of that sees the rows, on both backends: among the rows of one timestamp (a stream's key
includes its timestamp column, as the sources file's examples do; a static table is one timestamp),
the **first** row with a key value is kept — first in file-name order, then line order — and every
later one is a key violation: quarantined with the reason (the key's columns and values, as written)
and counted (``invalid`` and ``key_violations``).  Repeats across timestamps of a key without the
timestamp column are watched by the constraint ``<table>:key`` when keyed consumption relies on it
(:mod:`obda.execution.constraints`).

Memory: the keys of the timestamps still open (a closed timestamp's keys are dropped), kept in the
checkpoint as plain data.  The Spark backend checks the same rule in the micro-batch's one job:
optimistically, the job counts the rows per key and timestamp (:func:`obda.execution.scan.key_repeats`),
and a micro-batch where a key repeats is computed again with every row ranked in its key's group
(:func:`obda.execution.scan.dedupe_keys`; metric ``key_rechecks``).
"""

from __future__ import annotations

from obda.model.sources import Table


def key_reason(table: Table, values) -> str:
    """The reason of a key violation (both backends give this text)."""
    names = ", ".join(table.key)
    shown = ", ".join("NULL" if v is None else str(v) for v in values)
    return f"invalid: key ({names}) = ({shown}) repeats an earlier row of its timestamp; the first is kept"


class KeyCheck:
    """The keys seen per table and open timestamp (local backend)."""

    def __init__(self, tables) -> None:
        self.tables = {t.name: t for t in tables if t.key}
        self.seen: dict[str, dict[int | None, set[tuple]]] = {name: {} for name in self.tables}

    def repeats(self, table: Table, ts: int | None, row: dict, fields: dict) -> str | None:
        """The reason (with the ``fields``' text) when the typed ``row`` repeats a key seen at ``ts``; else
        records its key."""
        if table.name not in self.tables:
            return None
        key = tuple(_plain(row.get(k)) for k in table.key)
        slot = self.seen[table.name].setdefault(ts, set())
        if key in slot:
            return key_reason(table, [fields.get(k) for k in table.key])
        slot.add(key)
        return None

    def forget(self, closed_upto: int | None) -> None:
        """Drop the keys of closed timestamps (their later rows are late anyway)."""
        if closed_upto is None:
            return
        for per in self.seen.values():
            for ts in [t for t in per if t is not None and t <= closed_upto]:
                del per[ts]

    def state(self) -> dict:
        return {name: [[ts, [list(k) for k in keys]] for ts, keys in per.items()] for name, per in self.seen.items()}

    def restore(self, st: dict | None) -> None:
        for name, entries in (st or {}).items():
            if name in self.seen:
                self.seen[name] = {ts: {tuple(tuple(v) if isinstance(v, list) else v for v in k) for k in keys}
                                   for ts, keys in entries}


def _plain(v):
    """A key value as plain data (a checkpoint holds no Decimal): a decimal by its normalised text."""
    from decimal import Decimal

    return ("decimal", str(v.normalize())) if isinstance(v, Decimal) else v
