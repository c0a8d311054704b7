"""SQL reading: SQL text → sqlglot tree → the SELECTs of a UNION, each SELECT's FROM entries and columns.

The analyser's front end (spec §2): :func:`parse_sql` parses with located errors; :func:`_selects` splits a
UNION [ALL] into SELECTs and :func:`_check_select` refuses what is outside the SPJ class; a
:class:`SelectReading` resolves FROM entries against the sources catalog (stream / static, timestamp column,
column types; per-atom views of a compilation) and column references (qualified or not; ambiguity is an
error).  :class:`_Ctx` carries the text and catalog and turns a node into a line and column.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError

from obda.analysis.elements import FLIP, Attr
from obda.analysis.windows import ORDER_OPS, interval_comparison
from obda.errors import AnalysisError, Location
from obda.model.query import COMPARE_ALIAS, WINDOW_ALIAS
from obda.model.sources import ColumnType, Sources, Table


@dataclass(frozen=True)
class Relation:
    """One FROM entry: alias, catalog table, stream or static, timestamp column."""

    alias: str
    table: Table

    @property
    def is_stream(self) -> bool:
        return self.table.is_stream

    @property
    def timestamp(self) -> Attr | None:
        return Attr(self.alias, self.table.timestamp) if self.table.timestamp else None


class _Ctx:
    """Parsing context: the SQL text (for positions) and the catalog."""

    def __init__(self, text: str | None, sources: Sources, file: str | None = None,
                 views: Mapping[str, Table] | None = None, copies: Mapping[str, frozenset] | None = None):
        self.text = text
        self.sources = sources
        self.file = file
        # FROM alias (lower case) → the relation a per-atom view stands for (a stream view is a stream:
        # deduplicated within its timestamp, docs/analysis.md)
        self.views = {k.lower(): v for k, v in (views or {}).items()}
        # FROM alias (lower case) → the view's columns that hold its timestamp (AtomView.timestamp_copies)
        self.copies = {k.lower(): v for k, v in (copies or {}).items()}

    def view_of(self, node: exp.Expression) -> Table | None:
        """The per-atom view a derived FROM entry stands for, if the compilation declared one."""
        if isinstance(node, exp.Subquery) and node.alias:
            return self.views.get(node.alias.lower())
        return None

    def loc(self, node: exp.Expression | None) -> Location | None:
        if node is None or self.text is None:
            return None
        starts = [m["start"] for n in node.walk() for m in [getattr(n, "_meta", None) or {}] if "start" in m]
        if not starts:
            return None
        start = min(starts)  # the leftmost token of the construct
        line = self.text.count("\n", 0, start) + 1
        col = start - (self.text.rfind("\n", 0, start) + 1) + 1
        return Location(self.file, line, col)

    def error(self, message: str, node: exp.Expression | None = None) -> AnalysisError:
        return AnalysisError(message, self.loc(node))


def _snippet(node: exp.Expression) -> str:
    s = node.sql()
    return s if len(s) <= 80 else s[:77] + "..."


def parse_sql(text: str, file: str | None = None, dialect: str | None = None) -> exp.Expression:
    """Parse SQL text with sqlglot (``dialect``: sqlglot's reader, default its own); errors are located."""
    try:
        statements = [s for s in sqlglot.parse(text, read=dialect) if s is not None]
    except ParseError as e:
        err = e.errors[0] if e.errors else {}
        desc = err.get("description") or str(e)
        desc = desc.split(" <Token")[0] + (f" {err['highlight']!r}" if err.get("highlight") else "")
        line, col = err.get("line"), err.get("col")
        if col is not None and err.get("highlight"):
            col = max(1, col - len(err["highlight"]) + 1)  # sqlglot reports the end of the offending token
        raise AnalysisError(f"malformed SQL: {desc}", Location(file, line, col)) from None
    except TokenError as e:
        raise AnalysisError(f"malformed SQL: {e}", Location(file)) from None
    if not statements:
        raise AnalysisError("empty SQL text: expected a SELECT or a UNION of SELECTs", Location(file, 1, 1))
    if len(statements) > 1:
        raise AnalysisError("expected one SQL statement, found several (separated by ';')", Location(file))
    return statements[0]


def _selects(node: exp.Expression, ctx: _Ctx, distinct: bool = False) -> list[tuple[exp.Select, bool]]:
    if isinstance(node, exp.Subquery) and not node.args.get("alias"):
        return _selects(node.this, ctx, distinct)
    if isinstance(node, exp.Union):
        d = distinct or bool(node.args.get("distinct"))
        for key in ("order", "limit", "offset"):
            if node.args.get(key):
                raise ctx.error(f"{key.upper()} on a UNION is outside the analysable class (continuous queries have no {key.upper()})", node.args[key])
        return _selects(node.left, ctx, d) + _selects(node.right, ctx, d)
    if isinstance(node, (exp.Intersect, exp.Except)):
        raise ctx.error(f"{type(node).__name__.upper()} is outside the analysable class (not monotonic / not SPJ)", node)
    if isinstance(node, exp.Select):
        return [(node, distinct)]
    raise ctx.error(f"expected a SELECT or a UNION of SELECTs, found {type(node).__name__}: {_snippet(node)}", node)


_AGGREGATES = ("a single aggregate SELECT is analysed by obda.analysis.aggregates.analyze_aggregate "
               "(`obda analyze --sql` picks it)")


def key_check(node: exp.Expression) -> exp.In | exp.Exists | None:
    """The ``IN`` of ``[NOT] (…) IN (SELECT …)``, or the ``EXISTS`` of ``[NOT] EXISTS (SELECT …)``: a check of a
    member's terms (none for EXISTS) against another query's answers (OPTIONAL's anti-join, MINUS, [NOT] EXISTS;
    docs/analysis.md, rule A1), or None."""
    node = _check_node(node)
    if isinstance(node, exp.In) and node.args.get("query") is not None:
        return node
    return node if isinstance(node, exp.Exists) and node.this is not None else None


def _check_node(e: exp.Expression) -> exp.Expression:
    e = e.unnest()
    return e.this.unnest() if isinstance(e, exp.Not) else e


_QUERY_ARG = {exp.In: "query", exp.Exists: "this"}


def check_query(check: exp.In | exp.Exists) -> exp.Expression:
    """The SELECT or UNION a check (:func:`key_check`) reads (a windowed check's: the one it correlates)."""
    if isinstance(check, exp.In):
        return check.args["query"].this
    window = window_check(check)
    return window.query if window is not None else check.this


def check_terms(check: exp.In | exp.Exists) -> exp.Expression | None:
    """The member's terms a check compares (a column expression or a tuple; a windowed check's end with the
    member's timestamp its window is relative to); None for [NOT] EXISTS."""
    if isinstance(check, exp.In):
        return check.this
    window = window_check(check)
    return None if window is None else exp.Tuple(expressions=[t.copy() for t in window.terms])


@dataclass(frozen=True)
class WindowCheck:
    """``[NOT] EXISTS (SELECT 1 FROM (query) AS __w WHERE __w.c1 = t1 AND … AND __w.time op ts ± INTERVAL …)``,
    what a check in a window of time unfolds into (rules A3–A6; :class:`obda.mapping._unfold_checks.KeyIn`), or
    ``… FROM (query) AS __c WHERE __c.c1 = t1 AND … AND __c.ck op e …``, a check whose FILTER compares the query's
    columns after its keys with the member's terms (``compares``: ``(column position, op)``, each ``column op its
    term``): ``terms`` — the member's terms compared with the query's columns in order (its keys, then those of
    ``compares``), then, in a window, its timestamp ``ts``; ``bounds`` — ``query's time − ts`` within
    ``[lower, upper]`` (µs; strict flags; None: unbounded)."""

    query: exp.Expression
    terms: tuple[exp.Expression, ...]
    lower: int | None
    lower_strict: bool
    upper: int | None
    upper_strict: bool
    compares: tuple[tuple[int, str], ...] = ()
    windowed: bool = True


def window_check(check: exp.Exists, ctx: "_Ctx | None" = None) -> WindowCheck | None:
    """The correlated check an ``EXISTS`` is — in a window of time, or comparing columns — or None (an
    uncorrelated ``[NOT] EXISTS (SELECT …)``).  A condition it cannot read is refused, located in the SQL text
    by ``ctx`` (the analysis's reading of the SQL; none: the executor's, after the analysis read it)."""

    def refused(message: str, node: exp.Expression) -> AnalysisError:
        return ctx.error(message, node) if ctx is not None else AnalysisError(message)
    sel = check.this
    frm = sel.args.get("from_") or sel.args.get("from") if isinstance(sel, exp.Select) else None
    sub = frm.this if frm is not None else None
    if not (isinstance(sub, exp.Subquery) and sub.alias in (WINDOW_ALIAS, COMPARE_ALIAS)
            and not sel.args.get("joins") and sel.args.get("where") is not None):
        return None
    alias, query = sub.alias, sub.this
    names = query.named_selects
    equal: dict[str, exp.Expression] = {}  # column -> the member's term it equals
    other: dict[str, tuple[str, exp.Expression]] = {}  # column -> (op, the member's term): a compared column
    ts, bounds = None, {"lower": None, "upper": None}
    for c in conjuncts(sel.args["where"].this):
        found = interval_comparison(c) if alias == WINDOW_ALIAS else None
        if found is None and isinstance(c, (exp.EQ, exp.NEQ, exp.LT, exp.LTE, exp.GT, exp.GTE)):
            found = (c.this.unnest(), "!=" if isinstance(c, exp.NEQ) else ORDER_OPS[type(c)], c.expression.unnest(), 0)
        if found is None:
            raise refused(f"condition {c.sql()!r} of a correlated check: compare its query's columns only", c)
        inner, op, outer, micros = found
        if not _mine(inner, alias):  # a op b + k  ⇔  b flip(op) a − k
            inner, outer, op, micros = outer, inner, FLIP[op], -micros
        if not _mine(inner, alias) or any(_mine(x, alias) for x in outer.find_all(exp.Column)):
            raise refused(f"condition {c.sql()!r} of a correlated check: compare one of its query's columns "
                          "with the member's terms", c)
        name = _column_of(inner).name
        if alias == WINDOW_ALIAS and name == names[-1] and op != "=":  # the window: inner − ts op micros
            ts = outer
            side, strict = ("upper", op == "<") if op in ("<", "<=") else ("lower", op == ">")
            bounds[side] = (micros, strict)
        elif op == "=" and not micros and name not in equal:
            equal[name] = outer
        elif not micros and name not in other and (alias == COMPARE_ALIAS or name != names[-1]):
            other[name] = (op, outer)
        else:
            raise refused(f"condition {c.sql()!r} of a {'windowed' if alias == WINDOW_ALIAS else 'correlated'} "
                          "check: equal columns, or its time in a window, or one comparison per other column", c)
    cols = names[:-1] if alias == WINDOW_ALIAS else names  # a window's last column is its time
    k = 0  # the keys: the query's first columns, each equal to a term; each other column compared with one
    while k < len(cols) and cols[k] in equal and cols[k] not in other:
        k += 1
    rest = cols[k:]
    if any((n in equal) == (n in other) for n in rest):
        raise refused("a correlated check compares its query's first columns with the member's terms, then "
                      "each of its other columns with one of them", check)
    compared = [(n, other.get(n) or ("=", equal[n])) for n in rest]
    terms = tuple(equal[n] for n in cols[:k]) + tuple(e for _, (_, e) in compared)
    compares = tuple((names.index(n), op) for n, (op, _) in compared)
    if alias == COMPARE_ALIAS:
        return WindowCheck(query, terms, None, False, None, False, compares, False)
    if ts is None or names[-1] in equal or names[-1] in other:
        raise refused("a windowed check compares its query's first columns with the member's terms and its "
                      "last column (a time) with the member's timestamp", check)
    lo, hi = bounds["lower"], bounds["upper"]
    return WindowCheck(query, terms + (ts,), lo and lo[0], bool(lo and lo[1]), hi and hi[0], bool(hi and hi[1]),
                       compares)


def _column_of(e: exp.Expression) -> exp.Expression:
    """The column under the casts SQL compares a term's text with (``CAST(__c.p AS VARCHAR)``)."""
    while isinstance(e, exp.Cast):
        e = e.this.unnest()
    return e


def _mine(e: exp.Expression, alias: str) -> bool:
    """Whether ``e`` is a column of the correlated check's query (``alias``), maybe under casts."""
    e = _column_of(e)
    return isinstance(e, exp.Column) and e.table == alias


def conjuncts(e: exp.Expression | None) -> list[exp.Expression]:
    """The top-level ``AND`` operands of ``e``, parentheses dropped; [] for None."""
    if e is None:
        return []
    e = e.unnest()
    return conjuncts(e.this) + conjuncts(e.expression) if isinstance(e, exp.And) else [e]


def transform_outside_checks(e: exp.Expression, fn) -> exp.Expression:
    """``e.copy().transform(fn)``, except the subquery of a check (:func:`key_check`), which has FROM aliases
    and columns of its own and is kept as it is."""
    check = key_check(e)
    if check is None:
        return e.copy().transform(fn)
    arg = _QUERY_ARG[type(check)]
    query = check.args[arg]
    detached = e.copy()
    _check_node(detached).set(arg, None)
    out = detached.transform(fn)
    _check_node(out).set(arg, query.copy())
    return out


def _is_check_query(node: exp.Expression) -> bool:
    return ((isinstance(node, exp.Subquery) and isinstance(node.parent, exp.In) and node.arg_key == "query")
            or (isinstance(node.parent, exp.Exists) and node.arg_key == "this"))


def _check_tables(query: exp.Expression, ctx: _Ctx) -> None:
    """A check's subquery reads known tables: static ones (rule A1), or streams in the timestamp of the member's
    own rows or a window of their past (rules A2, A3, whose shape the forest checks:
    :func:`obda.analysis.forest.timed.check_shape`)."""
    for t in query.find_all(exp.Table):
        table = ctx.sources.table(t.name) if isinstance(t.this, exp.Identifier) else None
        if table is None:
            raise ctx.error(f"unknown table {t.name!r} in the subquery of [NOT] IN / [NOT] EXISTS", t)


def reads_stream(query: exp.Expression, sources) -> bool:
    """Whether a check's subquery reads a stream (rule A2: decided per timestamp) rather than static tables only."""
    return any(isinstance(t.this, exp.Identifier) and (table := sources.table(t.name)) is not None and table.is_stream
               for t in query.find_all(exp.Table))


def _check_select(sel: exp.Select, ctx: _Ctx) -> None:
    """Reject constructs outside the SPJ class with their name and position."""
    for key, what in (("group", "GROUP BY"), ("having", "HAVING"), ("limit", "LIMIT"), ("offset", "OFFSET"),
                      ("order", "ORDER BY"), ("qualify", "QUALIFY"), ("with", "WITH (common table expression)"),
                      ("with_", "WITH (common table expression)")):
        if sel.args.get(key):
            more = f"; {_AGGREGATES}" if key in ("group", "having") else ""
            raise ctx.error(f"{what} is outside the SPJ class (queries without aggregation){more}", sel.args[key])
    d = sel.args.get("distinct")
    if d is not None and d.args.get("on"):
        raise ctx.error("DISTINCT ON is outside the analysable class", d)
    for node in sel.walk(prune=lambda n: ctx.view_of(n) is not None or _is_check_query(n)):
        if node is sel or ctx.view_of(node) is not None:
            continue
        if _is_check_query(node):
            _check_tables(node, ctx)
            continue
        if isinstance(node, exp.Window):
            raise ctx.error(f"window function {_snippet(node)} is outside the analysable class", node)
        if isinstance(node, exp.AggFunc):
            raise ctx.error(f"aggregate {_snippet(node)} is outside the SPJ class; {_AGGREGATES}", node)
        if isinstance(node, (exp.Select, exp.Union)) and node is not sel:
            if isinstance(node.parent, exp.Subquery) and isinstance(node.parent.parent, (exp.From, exp.Join)):
                raise ctx.error("derived table (subquery in FROM) is outside the analysable class; "
                                "inline it as an SPJ over source tables", node)
            raise ctx.error("subquery is outside the analysable class; the analyser takes a UNION of flat SELECTs", node)


def member_views(compilation) -> list[dict]:
    """Per member of a Compilation, its FROM aliases → the per-atom views they stand for."""
    return [{a: compilation.view(s.view) for s in m.origin.atom_sources if s.view for a in s.table_aliases}
            for m in compilation.members]


def select_context(sources: Sources, views: Mapping[str, object] | None = None, text: str | None = None,
                   file: str | None = None) -> _Ctx:
    """The context one SELECT is read in: the catalog, the per-atom views its FROM aliases stand for (a view's
    table, and its columns that hold its timestamp), and the SQL text and file that locate its errors."""
    from obda.analysis.terms import view_timestamp_keys

    views = views or {}
    return _Ctx(text, sources, file, {a: v.table for a, v in views.items()},
                {a: view_timestamp_keys(v, sources) for a, v in views.items()})


class SelectReading:
    """One SELECT being read: its FROM entries, their columns' types, and what the conditions add.

    The one reading of a SELECT's FROM entries and column references: the analysis's normal form
    (:mod:`obda.analysis.normal_form`) and the executor's members (:mod:`obda.analysis.forest.members`) both
    start from it, so a FROM entry or a column means the same in both, with the same located errors."""

    def __init__(self, sel: exp.Select, ctx: _Ctx):
        self.sel = sel
        self.ctx = ctx
        self.relations: list[Relation] = []
        self.types: dict[Attr, ColumnType] = {}
        self.templates: list[tuple[tuple[Attr, Attr], ...]] = []  # whole-term equalities over one template
        self.explicit: set[tuple[Attr, Attr]] = set()  # column equalities stated by ordinary conditions
        self.filters: list[str] = []  # computed conditions over one FROM entry (Rule 5)
        self.checks: list[tuple[str, str]] = []  # [NOT] (…) IN (SELECT …): (the check, its rule: A1 to A6)
        # each check's window of time (µs, rules A3, A4, A6: no upper bound), but those of the past without a lower
        # bound (A5: its kept keys)
        self.check_windows: list[tuple[int | None, int | None]] = []
        self.kept_keys: list[exp.Expression] = []  # rule A5: the query of each check without a lower bound
        self.joined_terms: list[exp.Expression] = []  # the terms of checks over several FROM entries
        self.joined_filters: list[exp.Expression] = []  # conditions of several entries that do not separate (Rule 8)
        self.finite_parts: dict[Attr, None] = {}  # projected date parts of a fixed range (HOURS(?t), Rule 7)
        self.derived: dict[Attr, tuple[Attr, ...]] = {}  # derived attributes -> the columns they read (Rule 6)
        self._on: list[exp.Expression] | None = None  # the ON conditions, once the FROM entries are read

    # FROM --------------------------------------------------------------------------------
    def entries(self) -> list[exp.Expression]:
        """FROM entries and ON conditions of inner joins (read once: the normal form and the executor's member
        of one SELECT share its reading)."""
        if self._on is None:
            self._on = self._read_entries()
        return list(self._on)

    def _read_entries(self) -> list[exp.Expression]:
        sel, ctx = self.sel, self.ctx
        conds: list[exp.Expression] = []
        frm = sel.args.get("from_") or sel.args.get("from")
        if frm is not None:
            self._entry(frm.this)
            for extra in frm.expressions or []:
                self._entry(extra)
        for j in sel.args.get("joins") or []:
            side = (j.args.get("side") or "").upper()
            kind = (j.args.get("kind") or "").upper()
            if side in ("LEFT", "RIGHT", "FULL") or kind in ("OUTER", "SEMI", "ANTI"):
                raise ctx.error(f"{' '.join(x for x in (side, kind) if x)} JOIN is outside the analysable class (outer joins are not monotonic SPJ); use an inner join", j)
            if j.args.get("using") or (j.args.get("method") or "").upper() == "NATURAL":
                what = "NATURAL JOIN" if not j.args.get("using") else "JOIN ... USING"
                raise ctx.error(f"{what} is not supported; write the join condition with ON a.x = b.x", j)
            self._entry(j.this)
            if j.args.get("on") is not None:
                conds.append(j.args["on"])
        return conds

    def _entry(self, node: exp.Expression) -> None:
        ctx = self.ctx
        if isinstance(node, exp.Table) and isinstance(node.this, exp.Identifier):
            table = ctx.sources.table(node.name)
            if table is None:
                known = ", ".join(t.name for t in ctx.sources.tables) or "none"
                raise ctx.error(f"unknown table {node.name!r} (not in the sources file; known tables: {known})", node)
            alias = node.alias or node.name
            if any(r.alias.lower() == alias.lower() for r in self.relations):
                raise ctx.error(f"FROM alias {alias!r} is used twice; give every FROM entry its own alias", node)
            self.relations.append(Relation(alias, table))
            for c in table.columns:
                self.types[Attr(alias, c.name)] = c.type
            return
        view = ctx.view_of(node)
        if view is not None:
            alias = node.alias
            if any(r.alias.lower() == alias.lower() for r in self.relations):
                raise ctx.error(f"FROM alias {alias!r} is used twice; give every FROM entry its own alias", node)
            self.relations.append(Relation(alias, view))
            for c in view.columns:
                self.types[Attr(alias, c.name)] = c.type
            return
        if isinstance(node, (exp.Subquery, exp.Select)) or (isinstance(node, exp.Table) and isinstance(node.this, exp.Subquery)):
            raise ctx.error("derived table (subquery in FROM) is outside the analysable class; inline it as an SPJ over source tables", node)
        raise ctx.error(f"FROM entry {type(node).__name__} ({_snippet(node)}) is outside the analysable class", node)

    # columns -----------------------------------------------------------------------------
    def column(self, col: exp.Column) -> Attr:
        ctx = self.ctx
        if col.args.get("db") or col.args.get("catalog"):
            raise ctx.error(f"column reference {col.sql()!r} has a schema qualifier; use alias.column", col)
        name = col.name
        qual = col.table
        if isinstance(col.this, exp.Star):
            raise ctx.error("SELECT * is outside the analysable class; list the projected columns", col)
        if qual:
            rel = next((r for r in self.relations if r.alias.lower() == qual.lower()), None)
            if rel is None:
                raise ctx.error(f"unknown table or alias {qual!r} in column {col.sql()!r}", col)
            c = rel.table.column(name)
            if c is None:
                raise ctx.error(f"unknown column {name!r} of table {rel.table.name!r} (alias {rel.alias}); columns: {', '.join(rel.table.column_names)}", col)
            return Attr(rel.alias, c.name)
        hits = [(r, r.table.column(name)) for r in self.relations if r.table.column(name) is not None]
        if not hits:
            raise ctx.error(f"unknown column {name!r}: no FROM entry has it", col)
        if len(hits) > 1:
            raise ctx.error(f"ambiguous column {name!r}: it exists in {', '.join(r.alias for r, _ in hits)}; qualify it", col)
        r, c = hits[0]
        return Attr(r.alias, c.name)
