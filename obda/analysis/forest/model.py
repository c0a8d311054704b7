"""The typed synopsis forest: what the executor runs for every SPJ member (immutable objects).

Built by :mod:`obda.analysis.forest` (one pure rule per module) from the
members the unfolder emitted; consumed as is by :mod:`obda.execution` (the
Spark pipelines, the ordering runtime and the synopsis engine), which neither
parses SQL nor plans.

* :class:`Member` — one executable SPJ member: its FROM aliases (source tables
  or per-atom views), the conditions on one alias (``local``, run per row) and
  between two aliases (``cross``, run on synopses), the output items.
* :class:`Node` — a *unit* of the forest: stream aliases with equal
  timestamps; ``parent`` is the unit whose tuples are later (``τ_child <
  τ_parent``); ``key`` the attributes its synopsis keeps; ``compress`` the
  extreme kept for set semantics (MaxRef/MinRef, Arasu §5.2); ``cutoff`` the
  last timestamp of a finite stream.
* :class:`Pipeline` — per-row work on one alias (filter, kept attributes).
* :class:`MemberForest` — the forest of one member; :class:`Forest` — of the query,
  with :class:`ViewDedupe` saying how per-atom views are deduplicated per
  timestamp.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import date, datetime
from decimal import Decimal
from functools import cached_property

from sqlglot import exp

from obda.analysis.sql_reading import check_query, key_check
from obda.model.dialects import COMPARISON_CLASSES
from obda.model.sources import ColumnType, Table
from obda.model.terms import mixed, term_class

FOREST = -1  # evaluation site "above every tree": roots are joined here, outputs projected here

Attr = tuple[str, str]  # (FROM alias, column name or '#pK' for a computed expression over one alias)

from obda.model.query import FLIP, sql_compare  # noqa: E402,F401  (FLIP re-exported for the forest's modules)


@dataclass(frozen=True)
class CrossPred:
    """``left op right + offset`` between attributes of two different FROM aliases.

    ``offset`` (an integer, microseconds) is non-zero only between two stream timestamps: an interval
    join ``m2.ts <= m1.ts + INTERVAL '300' SECOND`` (timestamps are microseconds on both backends)."""

    left: Attr
    op: str
    right: Attr
    offset: int = 0

    @property
    def attrs(self) -> tuple[Attr, Attr]:
        return (self.left, self.right)

    def oriented(self, attr: Attr) -> str:
        """The operator seen from ``attr`` put on the left."""
        return self.op if self.left == attr else FLIP[self.op]

    def __str__(self) -> str:
        shift = f" {'+' if self.offset > 0 else '-'} {abs(self.offset)}µs" if self.offset else ""
        return f"{self.left[0]}.{self.left[1]} {self.op} {self.right[0]}.{self.right[1]}{shift}"


@dataclass(frozen=True)
class OutItem:
    """One projected answer variable: an attribute, a constant, or a CONCAT of both."""

    name: str
    kind: str  # attr | const | concat
    attr: Attr | None = None
    value: object = None
    parts: tuple[tuple[str, object], ...] = ()  # concat: ('const', str) | ('attr', Attr)
    times: tuple[Attr, ...] = ()  # the stream timestamps (alias, column) its value determines

    @property
    def attrs(self) -> tuple[Attr, ...]:
        if self.kind == "attr":
            return (self.attr,)  # type: ignore[return-value]
        if self.kind == "concat":
            return tuple(v for k, v in self.parts if k == "attr")  # type: ignore[misc]
        return ()


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


@dataclass(frozen=True)
class Member:
    """One executable SPJ member (one SELECT of the union, or one of its ≤ / ≠ timestamp splits)."""

    index: int
    aliases: tuple[tuple[str, Table], ...]
    local: tuple[tuple[str, tuple[exp.Expression, ...]], ...]  # alias -> conditions (unqualified columns)
    cross: tuple[CrossPred, ...]
    items: tuple[OutItem, ...]
    exprs: tuple[tuple[Attr, exp.Expression], ...] = ()  # computed single-alias expressions
    unsatisfiable: bool = False
    sql: str = ""
    origin: int = 0  # index of the SELECT this member came from (before splitting ≤ / ≠ on timestamps)
    views: tuple[tuple[str, object], ...] = ()  # alias -> per-atom view (obda.mapping AtomView) it reads
    checks: tuple[OutputCheck, ...] = ()  # checks over several entries; their terms are hidden items at the end
    # per answer column, the RDF term the member gives it (obda.model.compilation.SqlMember.terms); () when the
    # member was read from SQL text
    terms: tuple[str | None, ...] = ()

    @property
    def visible(self) -> int:
        """The answer's columns: the items before the checks' hidden ones."""
        return len(self.items) - sum(len(c.positions) for c in self.checks)

    def table(self, alias: str) -> Table:
        return dict(self.aliases)[alias]

    def local_of(self, alias: str) -> tuple[exp.Expression, ...]:
        return dict(self.local).get(alias, ())


@dataclass(frozen=True)
class Node:
    """A unit: stream aliases with equal timestamps; one node of the synopsis forest."""

    id: int
    aliases: tuple[str, ...]
    parent: int | None = None
    children: tuple[int, ...] = ()
    statics: tuple[str, ...] = ()  # static aliases joined at this node
    preds: tuple[CrossPred, ...] = ()  # evaluated when a tuple of this unit arrives
    key: tuple[Attr, ...] = ()  # synopsis key: attributes needed above the subtree
    compress: tuple[int, str] | None = None  # (position in key, 'min'|'max') for set semantics
    cutoff: int | None = None  # last possible timestamp (µs) from constant upper bounds; None: infinite
    depth: int = 0
    # interval joins: (position in ``key`` of a stream timestamp, lag µs): an entry whose timestamp + lag is at
    # most the last closed timestamp can no longer join a later row and is dropped (obda.analysis.windows)
    expiry: tuple[tuple[int, int], ...] = ()
    # k-constraints: ``expiry`` counts on them; ``plain_expiry`` is what the query's own conditions allow (used
    # once a constraint stops being used at run time; () when they allow nothing)
    plain_expiry: tuple[tuple[int, int], ...] = ()
    constrained: bool = False
    # OA(k) constraints (rule order_expiry): groups of (position in ``key``, constraint name); an entry is dead
    # when in every group some position holds a value below that constraint's value watermark (the largest
    # value of its stream more than k ago: no later row of the stream can equal it)
    value_expiry: tuple[tuple[tuple[int, str], ...], ...] = ()
    # many-one joins (rule keyed_consumption): (alias of a keyed stream in the parent unit, positions in ``key``
    # of its key columns, the key's constraint name): an entry is dead once that alias's row with its values came
    consumed: tuple[tuple[str, tuple[int, ...], str], ...] = ()

    def describe(self, forest: "MemberForest") -> dict:
        return {
            "unit": list(self.aliases),
            "tables": [forest.member.table(a).name for a in self.aliases],
            "kind": "finite" if self.cutoff is not None else "infinite",
            "parent": None if self.parent is None else list(forest.nodes[self.parent].aliases),
            "depth": self.depth,
            "key": [f"{a}.{c}" for a, c in self.key],
            "statics": list(self.statics),
            "synopsis": ("existence" if forest.distinct else "count")
            + (f", {self.compress[1]} of {self.key[self.compress[0]][0]}.{self.key[self.compress[0]][1]}"
               if self.compress else ""),
            "conditions": [str(p) for p in self.preds],
            **({"expiry": [f"{self.key[i][0]}.{self.key[i][1]} + {lag}µs" for i, lag in self.expiry]}
               if self.expiry else {}),
            **({"expiry_by_constraints": True} if self.constrained else {}),
            **({"consumed_by": [f"{t} ({forest.member.table(t).name} key "
                                f"{', '.join(f'{self.key[i][0]}.{self.key[i][1]}' for i in pos)})"
                                for t, pos, _ in self.consumed]} if self.consumed else {}),
            **({"expiry_by_order": [" or ".join(f"{self.key[i][0]}.{self.key[i][1]} < watermark({name})"
                                                for i, name in g) for g in self.value_expiry]}
               if self.value_expiry else {}),
        }


@dataclass(frozen=True)
class Pipeline:
    """Per-row work on one FROM alias, run in Spark (or the local backend): filter, project, count."""

    id: int
    member: int
    alias: str
    table: Table
    filters: tuple[exp.Expression, ...]
    attrs: tuple[Attr, ...]  # kept attributes, in key order
    exprs: tuple[tuple[Attr, exp.Expression], ...] = ()

    @property
    def columns(self) -> tuple[str, ...]:
        return tuple(a[1] for a in self.attrs)


@dataclass(frozen=True)
class MemberForest:
    """The synopsis forest of one member: units, edges, keys, cut-offs, evaluation sites, pipelines."""

    member: Member
    distinct: bool
    nodes: tuple[Node, ...]
    roots: tuple[int, ...]
    forest_statics: tuple[str, ...]
    forest_preds: tuple[CrossPred, ...]
    out_attrs: tuple[Attr, ...]
    pipelines: dict[str, Pipeline]  # alias -> pipeline (streams and statics)
    unsatisfiable: bool = False
    absorbed: tuple[CrossPred, ...] = ()
    constraints: tuple[str, ...] = ()  # the k-constraints its synopses drop state by
    # output columns (positions) whose value determines the timestamp of the member's one root: its answers at a
    # closed timestamp differ from every earlier one (docs/analysis.md, "Projected times")
    keyed: tuple[int, ...] = ()

    @property
    def orders(self) -> tuple[str, ...]:
        """The OA(k) constraints its synopses drop entries by (``Node.value_expiry``)."""
        return tuple(dict.fromkeys(name for n in self.nodes for g in n.value_expiry for _, name in g))

    @property
    def consumes(self) -> tuple[str, ...]:
        """The stream keys its synopses drop entries by (``Node.consumed``)."""
        return tuple(dict.fromkeys(name for n in self.nodes for _, _, name in n.consumed))

    @property
    def stream_aliases(self) -> tuple[str, ...]:
        return tuple(a for a, t in self.member.aliases if t.is_stream)

    @property
    def static_aliases(self) -> tuple[str, ...]:
        return tuple(a for a, t in self.member.aliases if not t.is_stream)

    def node_of(self, alias: str) -> Node | None:
        for n in self.nodes:
            if alias in n.aliases:
                return n
        return None

    def describe(self) -> dict:
        return {
            "member": self.member.index,
            "select": self.member.origin,
            "sql": self.member.sql,
            "unsatisfiable": self.unsatisfiable,
            "units": [n.describe(self) for n in self.nodes],
            "roots": [list(self.nodes[r].aliases) for r in self.roots],
            "absorbed_time_predicates": [str(p) for p in self.absorbed],
            "forest_conditions": [str(p) for p in self.forest_preds],
            **({"constraints": list(self.constraints)} if self.constraints else {}),
            **({"ordered_arrival": list(self.orders)} if self.orders else {}),
            **({"keys": list(self.consumes)} if self.consumes else {}),
        }


@dataclass(frozen=True)
class JoinBranch:
    """A view branch that joins several tables (a referencing object map, an ``rr:sqlQuery`` join).

    ``entries``: (FROM alias of the branch, pipeline id reading that table whole,
    its column names); ``conds`` and ``items`` (the view row) are over
    ``alias.column``.  A static branch is computed once, when the static tables
    are loaded.  A ``temporal`` one (the view reads a stream) is computed at
    every closed timestamp from the rows of its stream tables at that timestamp
    (their timestamps are equal: the unfolder equates them) and its static
    tables' rows, which the executor keeps (:func:`obda.execution.views.statics`).
    """

    target: int  # the view alias's pipeline id
    entries: tuple[tuple[str, int, tuple[str, ...]], ...]
    conds: tuple[exp.Expression, ...]
    items: tuple[exp.Expression, ...]
    temporal: bool = False
    streams: tuple[int, ...] = ()  # pipeline ids of the entries over stream tables


@dataclass(frozen=True)
class ViewDedupe:
    """How the rows of per-atom views are deduplicated per timestamp (docs/semantics.md).

    A view's alias has one pipeline per view branch (``branch_of``: branch
    pipeline id → the alias's pipeline id), each keeping the *whole* view row,
    so that rows are a set per timestamp however many branches, source rows or
    micro-batches produce them.  At the close of a timestamp each distinct row
    is projected (``positions``, -1 for the timestamp itself) onto the alias's
    synopsis attributes and counted once.  ``joins``: static branches over
    several tables.
    """

    branch_of: dict[int, int] = field(default_factory=dict)
    positions: dict[int, tuple[int, ...]] = field(default_factory=dict)
    joins: tuple[JoinBranch, ...] = ()


@dataclass(frozen=True)
class Forest:
    """The synopsis forests of every member of a query, and the pipelines that feed them."""

    members: tuple[MemberForest, ...]
    distinct: bool
    columns: tuple[str, ...]
    pipelines: tuple[Pipeline, ...]  # what runs per row: source-table pipelines and per-branch view pipelines
    views: ViewDedupe = field(default_factory=ViewDedupe)
    constraints: tuple = ()  # the declared k-constraints on its streams, watched at run time (model.constraints)
    monitors: tuple[tuple[str, str, int], ...] = ()  # (constraint, table, pipeline id): the raw rows it watches
    constraints_used: tuple[str, ...] = ()  # those some member drops state by
    # the checks' queries (OPTIONAL's anti-join, MINUS, [NOT] EXISTS), by the SQL text of the subquery their
    # pipelines' ``[NOT] (…) IN (subquery)`` filters read: static queries, answered once when the query opens
    checks: tuple[tuple[str, "Forest"], ...] = ()
    # the checks' queries over streams in the answer's own timestamp (rule A2), by the SQL text of the subquery:
    # answered at every closed timestamp from that timestamp's rows (their pipelines are among ``pipelines``)
    timed_checks: tuple[tuple[str, "Forest"], ...] = ()

    @property
    def keyed_by_time(self) -> bool:
        """A DISTINCT query whose every member keys its answers by its root's timestamp in one common column: no
        answer can repeat one of an earlier closed timestamp, so the emitted set is forgotten at each close."""
        live = [m for m in self.members if not m.unsatisfiable]
        return self.distinct and bool(live) and bool(set.intersection(*(set(m.keyed) for m in live)))

    @cached_property
    def text_columns(self) -> frozenset[int]:
        """The answer columns whose members give them values of different kinds (a number in one, a string in
        another: a UNION's branches, a variable predicate's alternatives): one column of one type holds them as
        their text, in the compiled SQL (the engines cast), in Spark and on the local backend alike."""
        kinds: dict[int, set[str]] = {}
        for m in self.members:
            if m.unsatisfiable:
                continue
            for k, item in enumerate(m.member.items):
                kind = _value_kind(m.member, item)
                if kind is not None:
                    kinds.setdefault(k, set()).add(kind)
        return frozenset(k for k, found in kinds.items() if len(found) > 1)

    @cached_property
    def typed_columns(self) -> dict[int, tuple[str | None, ...]]:
        """The answer columns whose members give them terms of several kinds (a number in one, a string or an IRI
        in another: :mod:`obda.model.terms`), each with the class of every member's term (by member; None:
        unbound there).  The executors hold those values with their class (:func:`obda.model.terms.encode`), so
        that they stay distinct, are written each as its own kind and sort as SPARQL sorts terms.  None when a
        member was read from SQL text, which says no terms."""
        live = [m.member for m in self.members if not m.unsatisfiable]
        if not live or any(not m.terms for m in live):
            return {}
        out = {}
        for k in range(len(self.columns)):
            classes = tuple(term_class(m.member.terms[k]) if k < len(m.member.terms) else None for m in self.members)
            if mixed(c for c, m in zip(classes, self.members) if not m.unsatisfiable):
                out[k] = classes
        return out

    def bind_checks(self, values: dict[str, list[tuple]]) -> "Forest":
        """This plan with every check's subquery replaced by its answers (``values``, by the subquery's SQL text:
        :attr:`checks`), as ``[NOT] (…) IN (v1, …)`` filters (obda.execution.checks answers them)."""
        pipelines = tuple(replace(p, filters=tuple(_bound_check(f, values) for f in p.filters)) for p in self.pipelines)
        by_id = {p.id: p for p in pipelines}
        members = tuple(replace(mf, pipelines={a: by_id.get(p.id, p) for a, p in mf.pipelines.items()})
                        for mf in self.members)
        joins = tuple(replace(j, conds=tuple(_bound_check(c, values) for c in j.conds)) for j in self.views.joins)
        members = tuple(mf if not mf.member.checks else replace(mf, member=replace(mf.member, checks=tuple(
            c if c.timed else replace(c, values=frozenset(r for r in values[c.query] if None not in r))
            for c in mf.member.checks)))
            for mf in members)
        return replace(self, members=members, pipelines=pipelines, views=replace(self.views, joins=joins), checks=())

    def stream_tables(self) -> list[Table]:
        seen: dict[str, Table] = {}
        for p in self.pipelines:
            if p.table.is_stream:
                seen.setdefault(p.table.name, p.table)
        return list(seen.values())

    def static_pipelines(self) -> list[Pipeline]:
        return [p for p in self.pipelines if not p.table.is_stream]

    def describe(self) -> dict:
        out = {"distinct": self.distinct, "columns": list(self.columns), "members": [m.describe() for m in self.members]}
        if self.timed_checks:  # rule A2: the checks' queries, read with the query's rows, decided per timestamp
            out["checks_in_the_answers_timestamp"] = [{"query": text, **f.describe()} for text, f in self.timed_checks]
        return out


def _value_kind(member: Member, item: OutItem) -> str | None:
    """What an answer value of ``item`` is — ``number``, ``string`` or ``boolean`` — where the member's tables say
    it (None: a computed value, or a timestamp, whose text the sinks write from its microseconds)."""
    if item.kind == "concat":
        return "string"
    if item.kind == "const":
        v = item.value
        return None if v is None else "boolean" if isinstance(v, bool) else "string" if isinstance(v, str) else "number"
    alias, column = item.attr
    col = member.table(alias).column(column)
    if col is None:
        return None
    if col.type.is_numeric:
        return "number"
    return None if col.type is ColumnType.TIMESTAMP else col.type.value


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


def _bound_check(f: exp.Expression, values: dict[str, list[tuple]]) -> exp.Expression:
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
