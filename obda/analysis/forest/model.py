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
* a member's checks tested on its answer (OPTIONAL, MINUS, [NOT] EXISTS): :mod:`obda.analysis.forest.checks`.
* :class:`MemberForest` — the forest of one member; :class:`Forest` — of the query,
  with :class:`ViewDedupe` saying how per-atom views are deduplicated per
  timestamp.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import cached_property

from sqlglot import exp

from obda.analysis.forest.checks import OutputCheck, bound_check
from obda.model.sources import ColumnType, Table
from obda.model.terms import mixed_columns, term_class

FOREST = -1  # evaluation site "above every tree": roots are joined here, outputs projected here

Attr = tuple[str, str]  # (FROM alias, column name or '#pK' for a computed expression over one alias)

from obda.model.query import FLIP  # noqa: E402,F401  (FLIP re-exported for the forest's modules)


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
    """One projected answer variable: an attribute, a constant, a CONCAT of both, or a value computed from the
    attributes of several FROM entries on the joined row (``expr``)."""

    name: str
    kind: str  # attr | const | concat | expr
    attr: Attr | None = None
    value: object = None  # const: the value; expr: the SQL expression over columns __a0, __a1, … (its attributes)
    parts: tuple[tuple[str, object], ...] = ()  # concat: ('const', str) | ('attr', Attr); expr: ('attr', Attr)
    times: tuple[Attr, ...] = ()  # the stream timestamps (alias, column) its value determines

    @property
    def attrs(self) -> tuple[Attr, ...]:
        if self.kind == "attr":
            return (self.attr,)  # type: ignore[return-value]
        if self.kind in ("concat", "expr"):
            return tuple(v for k, v in self.parts if k == "attr")  # type: ignore[misc]
        return ()


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
    # conditions of several FROM entries that do not separate (Rule 8): hidden boolean items after the checks',
    # computed on the joined row; an answer is kept where each is true
    filters: tuple[int, ...] = ()
    # per answer column, the RDF term the member gives it (obda.model.compilation.SqlMember.terms); () when the
    # member was read from SQL text
    terms: tuple[str | None, ...] = ()

    @property
    def visible(self) -> int:
        """The answer's columns: the items before the checks' and the filters' hidden ones."""
        return len(self.items) - sum(len(c.positions) for c in self.checks) - len(self.filters)

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
        return {k: tuple(term_class(m.member.terms[k]) if k < len(m.member.terms) else None for m in self.members)
                for k in mixed_columns([m.terms for m in live], len(self.columns))}

    def bind_checks(self, values: dict[str, list[tuple]]) -> "Forest":
        """This plan with every check's subquery replaced by its answers (``values``, by the subquery's SQL text:
        :attr:`checks`), as ``[NOT] (…) IN (v1, …)`` filters (obda.execution.checks answers them)."""
        pipelines = tuple(replace(p, filters=tuple(bound_check(f, values) for f in p.filters)) for p in self.pipelines)
        by_id = {p.id: p for p in pipelines}
        members = tuple(replace(mf, pipelines={a: by_id.get(p.id, p) for a, p in mf.pipelines.items()})
                        for mf in self.members)
        joins = tuple(replace(j, conds=tuple(bound_check(c, values) for c in j.conds)) for j in self.views.joins)
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
    if item.kind == "expr":
        return None
    alias, column = item.attr
    col = member.table(alias).column(column)
    if col is None:
        return None
    if col.type.is_numeric:
        return "number"
    return None if col.type is ColumnType.TIMESTAMP else col.type.value
