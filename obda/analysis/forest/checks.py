"""The checks a member tests on its answer (OPTIONAL, MINUS, [NOT] EXISTS over terms of several FROM entries):
:class:`OutputCheck`, what its query's answers are indexed by, and the SQL of the test, with the answers bound as
constants (:func:`bound_check`) once the check's query was answered.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, datetime
from decimal import Decimal

from sqlglot import exp

from obda.analysis.sql_reading import check_query, key_check
from obda.model.dialects import COMPARISON_CLASSES
from obda.model.query import sql_compare


FOREVER = 1 << 62  # µs: how long an answer may wait for a check whose window has no end (rule A6)

_COMPARE = COMPARISON_CLASSES
_EXTREME = {"<": min, "<=": min, ">": max, ">=": max}  # ``v op t`` holds for some v iff it does for this one


def _by_key(values, n: int, compares: tuple[str, ...]) -> dict[tuple, list[tuple]]:
    """A check's answers (``values``: tuples, keys first) by their first ``n`` values: the rest of each, or, for one
    ordering comparison (``column < term``), the extreme that decides it (the least value for ``<``)."""
    index: dict[tuple, list[tuple]] = {}
    for r in values:
        index.setdefault(tuple(r[:n]), []).append(tuple(r[n:]))
    if len(compares) == 1 and compares[0] in _EXTREME:
        for key, rest in index.items():
            try:
                index[key] = [_EXTREME[compares[0]](rest)]
            except TypeError:  # values that do not compare with each other: all of them
                pass
    return index


@dataclass(frozen=True)
class OutputCheck:
    """A check (OPTIONAL, MINUS, [NOT] EXISTS) over terms of several FROM entries: tested on the joined answer.

    ``positions``: the member's hidden output items (after the answer's columns) holding its terms; ``query``:
    the SQL text of the check's query (:attr:`Forest.checks`); ``values``: its answers once the query opened.
    ``timed``: the query reads streams in the answer's own timestamp (rule A2, :attr:`Forest.timed_checks`): its
    answers are those of the timestamp being closed, handed to :meth:`keeps`."""

    positions: tuple[int, ...]
    negated: bool
    query: str
    values: frozenset | None = None
    tree: object = field(default=None, compare=False, repr=False)  # the query's sqlglot tree (SQL input)
    timed: bool = False
    # in a window of the answer's time (rules A3, A4): the query's last column (its time) minus the answer's
    # timestamp (the last term) within (lower, lower strict, upper, upper strict), µs; the other terms equal
    window: tuple[int | None, bool, int | None, bool] | None = None
    # a FILTER of the check comparing its query's columns after the keys with the answer's terms (the last
    # positions): each ``column op term``; the check holds where an answer of its query agrees on the keys and
    # every comparison holds
    compares: tuple[str, ...] = ()

    @property
    def waits(self) -> int:
        """How long (µs) after its timestamp an answer may wait for this check (rule A4: a window reaching after it,
        decided at its first match or once its end closed; :data:`FOREVER` without an end, rule A6: until its first
        match); 0: decided when the answer's timestamp closes."""
        if self.window is None:
            return 0
        return FOREVER if self.window[2] is None else max(self.window[2], 0)

    def split(self, answer: tuple) -> tuple[tuple, tuple]:
        """A check in a window of time: the terms of ``answer`` (its hidden items, but the time) its query's answer
        equals, and those its FILTER compares."""
        key = tuple(answer[p] for p in self.positions[:-1])
        n = len(key) - len(self.compares)
        return key[:n], key[n:]

    def agrees(self, compared: tuple, mine: tuple) -> bool:
        """Whether the query's ``compared`` values (after its keys) stand in the check's comparisons to ``mine``."""
        return all(sql_compare(op, v, t) for op, v, t in zip(self.compares, compared, mine))

    def in_window(self, delta: int) -> bool:
        """Whether a query's answer ``delta`` µs after the answer's timestamp lies in the check's window."""
        lo, lo_strict, hi, hi_strict = self.window
        return ((lo is None or (delta > lo if lo_strict else delta >= lo))
                and (hi is None or (delta < hi if hi_strict else delta <= hi)))

    def index(self, values: frozenset | set | None = None):
        """What :meth:`keeps` looks answers up in: the query's answers (``values``, else :attr:`values`), or, for a
        check with comparisons, those answers by their keys (each key's values compared, or the one extreme that
        decides a single ordering comparison).  Built once per set of answers by the caller."""
        values = self.values if values is None else values
        return _by_key(values, len(self.positions) - len(self.compares), self.compares) if self.compares else values

    def keeps(self, answer: tuple, index) -> bool:
        """Whether the check keeps ``answer`` (its output tuple), given :meth:`index` of the query's answers."""
        n = len(self.positions) - len(self.compares)
        key = tuple(answer[p] for p in self.positions[:n])
        if None in key:
            return False  # NULL never agrees: IN is unknown, NOT IN too
        if not self.compares:
            return (key in index) != self.negated
        mine = tuple(answer[p] for p in self.positions[n:])
        return any(self.agrees(rest, mine) for rest in index.get(key, ())) != self.negated

    def condition(self, columns: list[str], dialect: str = "spark") -> str:
        """The check as an SQL condition on the answer's hidden ``columns`` (their names, by position)."""
        terms = [exp.column(columns[p], quoted=True) for p in self.positions]
        n = len(terms) - len(self.compares)
        not_null = [exp.Not(this=exp.Is(this=t.copy(), expression=exp.Null())) for t in terms[:n]]
        extremes = _by_key(self.values, 0, self.compares).get((), []) if self.compares and self.values and not n else []
        if len(self.compares) == 1 and len(extremes) == 1:  # one comparison with the value that decides it: no join
            test = exp.Coalesce(this=_COMPARE[self.compares[0]](this=literal(extremes[0][0]), expression=terms[0]),
                                expressions=[exp.false()])
            return (exp.Not(this=test) if self.negated else test).sql(dialect=dialect)
        if self.compares and self.values:  # an answer of the query agreeing on the keys, every comparison holding
            names = [f"__v{j}" for j in range(len(terms))]
            rows = exp.Values(expressions=[exp.Tuple(expressions=[literal(v) for v in r])
                                           for r in sorted(self.values, key=repr)],
                              alias=exp.TableAlias(this=exp.to_identifier("__k"),
                                                   columns=[exp.to_identifier(c) for c in names]))
            conds = [exp.EQ(this=exp.column(names[j], "__k"), expression=t.copy()) for j, t in enumerate(terms[:n])]
            conds += [_COMPARE[op](this=exp.column(names[n + i], "__k"), expression=t.copy())
                      for i, (op, t) in enumerate(zip(self.compares, terms[n:]))]
            test = exp.Exists(this=exp.select("1").from_(rows).where(exp.and_(*conds)))
            return exp.and_(*not_null, exp.Not(this=test) if self.negated else test).sql(dialect=dialect)
        if not self.values:
            test = exp.Boolean(this=self.negated)
        else:
            this = terms[0] if len(terms) == 1 else exp.Tuple(expressions=terms)
            test = exp.In(this=this, expressions=in_list(sorted(self.values, key=repr)))
            test = exp.Not(this=test) if self.negated else test
        return exp.and_(*not_null, test).sql(dialect=dialect)


def literal(v) -> exp.Expression:
    """A Python answer value as an SQL constant both backends read back as the same value."""
    if isinstance(v, bool):
        return exp.Boolean(this=v)
    if isinstance(v, (int, float, Decimal)):
        return exp.Literal.number(str(v))
    if isinstance(v, datetime):
        return exp.cast(exp.Literal.string(v.isoformat(sep=" ")), "TIMESTAMP")
    if isinstance(v, date):
        return exp.cast(exp.Literal.string(v.isoformat()), "DATE")
    return exp.Literal.string(str(v))


def in_list(rows) -> list[exp.Expression]:
    """A check's answers (tuples of Python values) as the items of an SQL ``IN (…)``: a constant per one-value row,
    a tuple of constants otherwise."""
    return [literal(r[0]) if len(r) == 1 else exp.Tuple(expressions=[literal(v) for v in r]) for r in rows]


def bound_check(f: exp.Expression, values: dict[str, list[tuple]]) -> exp.Expression:
    check = key_check(f)
    if check is None:
        return f
    rows = [r for r in values[check_query(check).sql()] if None not in r]  # NULL never matches
    negated = isinstance(f.unnest(), exp.Not)
    if not rows or isinstance(check, exp.Exists):
        # [NOT] EXISTS: whether the query has an answer; IN nothing is false everywhere (NOT IN nothing true)
        return exp.Boolean(this=negated != bool(rows))
    out = f.copy()
    node = key_check(out)
    node.set("query", None)
    node.set("expressions", in_list(rows))
    return out
