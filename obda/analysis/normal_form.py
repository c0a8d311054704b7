"""SQL (sqlglot AST) → typed SPJ members in normal form (spec §2, Schiff–Özçep Def. 4).

A query is a UNION [ALL] of ``SELECT <items> FROM <entries> WHERE <condition>``.
Each SELECT becomes one or more :class:`SpjMember` (one per disjunct of its
condition, see :func:`_disjuncts`).  Entries are resolved against the sources
catalog (stream / static, timestamp column, column types), columns are
resolved (qualified or not; ambiguity is an error), comparisons are
type-checked (timestamps only with timestamps) and turned into
:class:`~obda.analysis.elements.Predicate` atoms.

Everything outside the class raises :class:`~obda.errors.AnalysisError`
naming the construct and, when the SQL came as text, its line and column.
"""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass, field, replace
from decimal import Decimal, InvalidOperation
from fractions import Fraction
from typing import Mapping

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError

from obda.analysis import terms
from obda.analysis.closure import Closure, integer_satisfiable
from obda.analysis.elements import BOOLEAN, FLIP, NUMERIC, STRING, TIMESTAMP, Attr, Const, Element, Predicate
from obda.analysis.windows import implied_order, interval_comparison
from obda.errors import AnalysisError, Location
from obda.model.query import OPS
from obda.model.compilation import MemberOrigin
from obda.model.sources import ColumnType, Sources, Table

MAX_DISJUNCTS = 256


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


@dataclass(frozen=True)
class Projected:
    """One output column: the attributes and constants it is built from."""

    name: str
    kind: str  # column | constant | template
    attrs: tuple[Attr, ...] = ()
    constants: tuple[str, ...] = ()
    times: tuple[Attr, ...] = ()  # the stream timestamps its value determines (obda.analysis.terms)


@dataclass(frozen=True)
class Difference:
    """A difference constraint between two stream timestamps: ``left op right + micros`` (an interval join,
    ``m2.ts <= m1.ts + INTERVAL '300' SECOND``). Not an LTO atom: the order it implies is added to the
    member's predicates, and :mod:`obda.analysis.windows` decides whether the constraints bound every pair
    of timestamps (a window)."""

    left: Attr
    op: str  # < <= = >= >
    right: Attr
    micros: int
    location: Location | None = field(default=None, compare=False)

    def implied_order(self) -> str | None:
        """The order between ``left`` and ``right`` this constraint implies (``<``, ``<=``, ``>``, ``>=``), if any."""
        return implied_order(self.op, self.micros)

    def __str__(self) -> str:
        sign = "+" if self.micros >= 0 else "-"
        return f"{self.left} {self.op} {self.right} {sign} {abs(self.micros) / 1e6:g}s"


@dataclass(frozen=True)
class SpjMember:
    """One SPJ member in normal form: ``Π_{L ∪ C} σ_P(R_1 × … × S_n)`` (one disjunct of a SELECT)."""

    index: int  # position of the SELECT in the UNION
    sql: str
    distinct: bool
    relations: tuple[Relation, ...]
    types: Mapping[Attr, ColumnType]
    predicates: tuple[Predicate, ...]
    projection: tuple[Projected, ...]
    origin: MemberOrigin | None = None
    disjunct: tuple[int, int] = (0, 1)  # (i, n): i-th of n disjuncts of the WHERE clause
    contradiction: str | None = None  # why the selection is trivially false
    notes: tuple[str, ...] = field(default=())
    differences: tuple[Difference, ...] = ()  # interval-join constraints between stream timestamps
    # whole-term equalities of two instances of one template, read as these column pairs (obda.analysis.terms);
    # ``explicit``: column equalities some other condition states as well
    templates: tuple[tuple[tuple[Attr, Attr], ...], ...] = ()
    explicit: frozenset = frozenset()
    # the output columns that may key the answers by their latest stream's timestamp (None: any); a DISTINCT
    # union is keyed only on a column every member keys (obda.analysis.analyze)
    time_columns: frozenset | None = None

    @property
    def projection_kind(self) -> str:
        return "set" if self.distinct else "bag"

    def relation(self, alias: str) -> Relation:
        for r in self.relations:
            if r.alias == alias:
                return r
        raise KeyError(alias)

    @property
    def projected_attrs(self) -> tuple[Attr, ...]:
        return tuple(dict.fromkeys(a for p in self.projection for a in p.attrs))

    def is_timestamp(self, a: Element) -> bool:
        return isinstance(a, Attr) and self.types.get(a) is ColumnType.TIMESTAMP

    def condition_text(self) -> str:
        return " AND ".join(str(p) for p in self.predicates) or "TRUE"


# ---------------------------------------------------------------------------------------------
# positions and errors


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


# ---------------------------------------------------------------------------------------------
# union → selects


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


# ---------------------------------------------------------------------------------------------
# one SELECT


class _Select:
    def __init__(self, sel: exp.Select, ctx: _Ctx):
        self.sel = sel
        self.ctx = ctx
        self.relations: list[Relation] = []
        self.types: dict[Attr, ColumnType] = {}
        self.templates: list[tuple[tuple[Attr, Attr], ...]] = []  # whole-term equalities over one template
        self.explicit: set[tuple[Attr, Attr]] = set()  # column equalities stated by ordinary conditions

    # FROM --------------------------------------------------------------------------------
    def entries(self) -> list[exp.Expression]:
        """FROM entries and ON conditions of inner joins."""
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
            if j.args.get("using"):
                raise ctx.error("JOIN ... USING is not supported; write the join condition with ON a.x = b.x", j)
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

    # constants ---------------------------------------------------------------------------
    def constant(self, node: exp.Expression) -> Const | None:
        """A constant expression, or None if ``node`` is not a constant."""
        ctx = self.ctx
        if isinstance(node, exp.Paren):
            return self.constant(node.this)
        if isinstance(node, exp.Neg):
            c = self.constant(node.this)
            if c is None or c.domain != NUMERIC:
                return None
            return Const(NUMERIC, -c.value, "-" + c.text)
        if isinstance(node, exp.Boolean):
            return Const(BOOLEAN, bool(node.this), "TRUE" if node.this else "FALSE")
        if isinstance(node, exp.Literal):
            if node.is_string:
                return Const(STRING, node.this, "'" + node.this.replace("'", "''") + "'")
            return Const(NUMERIC, _number(node.this, node, ctx), node.this)
        if isinstance(node, exp.Cast) and isinstance(node.this, (exp.Literal, exp.Neg)):
            to = node.to.this
            text = node.this.this if isinstance(node.this, exp.Literal) else node.this.sql()
            if to in exp.DataType.TEMPORAL_TYPES:
                return Const(TIMESTAMP, _timestamp(str(text), node, ctx), f"TIMESTAMP '{text}'")
            if to in exp.DataType.TEXT_TYPES:
                return Const(STRING, str(text), "'" + str(text) + "'")
            if to in exp.DataType.NUMERIC_TYPES:
                return Const(NUMERIC, _number(str(text), node, ctx), str(text))
            raise ctx.error(f"unsupported constant type {node.to.sql()} in {_snippet(node)}", node)
        if isinstance(node, exp.Null):
            raise ctx.error("NULL in a comparison is never true; outside the analysable class", node)
        return None

    # values in conditions ----------------------------------------------------------------
    def operand(self, node: exp.Expression) -> Element:
        ctx = self.ctx
        while isinstance(node, exp.Paren):
            node = node.this
        if isinstance(node, exp.Column):
            return self.column(node)
        c = self.constant(node)
        if c is not None:
            return c
        if isinstance(node, exp.Cast) and isinstance(node.this, exp.Column):
            raise ctx.error(f"function CAST on a column in a condition ({_snippet(node)}) is outside the analysable class; compare the column itself", node)
        if isinstance(node, (exp.Subquery, exp.Select)):
            raise ctx.error("subquery in a condition is outside the analysable class", node)
        if isinstance(node, exp.Func):
            name = node.sql_name() if hasattr(node, "sql_name") else type(node).__name__
            raise ctx.error(f"function {name} in a condition ({_snippet(node)}) is outside the analysable class; conditions compare columns and constants", node)
        raise ctx.error(f"expression {type(node).__name__} in a condition ({_snippet(node)}) is outside the analysable class", node)

    def comparison(self, left: exp.Expression, op: str, right: exp.Expression, node: exp.Expression):
        """A typed atom, or True / False when both sides are constants."""
        if terms.is_template(left) and terms.is_template(right):
            return terms.whole_term_equality(self, left, op, right, node)
        if op in ("=", "!=") and (terms.is_template(left) or terms.is_template(right)):
            tmpl, other = (left, right) if terms.is_template(left) else (right, left)
            f = terms.template_constant(self, tmpl, other, node)
            if f is not None:
                return f if op == "=" else _negate(f)
        if isinstance(left.unnest(), _ARITH) or isinstance(right.unnest(), _ARITH):
            solved = self._solve(left, op, right, node)
            if not isinstance(solved, tuple):
                return solved
            a, op, b = solved
        else:
            a, b = self.operand(left), self.operand(right)
        loc = self.ctx.loc(node)
        ta, tb = self._domain(a), self._domain(b)
        if ta != tb:
            raise self.ctx.error(_type_message(a, ta, b, tb, node), node)
        if isinstance(a, Const) and isinstance(b, Const):
            return _compare(a.value, op, b.value)
        # integer attribute vs non-integral constant: tighten to integer bounds
        if isinstance(a, Const):
            a, b, op = b, a, {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "=": "=", "!=": "!="}[op]
        if isinstance(b, Const) and b.domain == NUMERIC and not b.is_integral and self.types.get(a) is ColumnType.INTEGER:
            v = b.value
            fl, ce = v.numerator // v.denominator, -((-v.numerator) // v.denominator)
            if op == "=":
                return False
            if op == "!=":
                return True
            if op in ("<", "<="):
                return Predicate.make(a, "<=", Const(NUMERIC, Fraction(fl), str(fl)), loc)
            return Predicate.make(a, ">=", Const(NUMERIC, Fraction(ce), str(ce)), loc)
        if op == "=" and isinstance(a, Attr) and isinstance(b, Attr):
            self.explicit.add((a, b))
        return Predicate.make(a, op, b, loc)

    def _solve(self, left: exp.Expression, op: str, right: exp.Expression, node: exp.Expression):
        """``f(col) op c`` with ``f`` linear (a BIND's number compared with a constant): ``col op' c'`` solved
        exactly over the rationals, as ``(col, op', Const)``; True / False when no column is left."""
        fl, fr = _linear(left), _linear(right)
        if fl is None or fr is None:
            raise self.ctx.error(f"condition {_snippet(node)}: arithmetic is analysable when it is linear in one "
                                 "column compared with a constant (e.g. col * 0.3048 > 50)", node)
        (cl, al, bl), (cr, ar, br) = fl, fr
        if cl is not None and cr is not None and cl is not cr:
            raise self.ctx.error(f"condition {_snippet(node)}: arithmetic over two columns is outside the "
                                 "analysable class; compare a column (times a number) with a constant", node)
        col = cl if cl is not None else cr
        a, b = al - ar, br - bl  # a·col op b
        if col is None or a == 0:
            return _compare(Fraction(0), op, b)
        if a < 0:
            op = FLIP[op]
        v = b / a
        return self.column(col), op, Const(NUMERIC, v, str(v))

    def _domain(self, e: Element) -> str:
        if isinstance(e, Const):
            return e.domain
        t = self.types[e]
        if t is ColumnType.TIMESTAMP:
            return TIMESTAMP
        if t.is_numeric:
            return NUMERIC
        return BOOLEAN if t is ColumnType.BOOLEAN else STRING

    # conditions → boolean formula ------------------------------------------------------
    def formula(self, node: exp.Expression):
        """Nested ('and'|'or', [...]) / Predicate / True / False, negations pushed to atoms."""
        return self._f(node, False)

    def _f(self, node: exp.Expression, neg: bool):
        ctx = self.ctx
        if isinstance(node, exp.Paren):
            return self._f(node.this, neg)
        if isinstance(node, exp.Not):
            inner = node.this
            while isinstance(inner, exp.Paren):
                inner = inner.this
            if isinstance(inner, exp.Is):
                return self._is(inner, not neg)
            return self._f(node.this, not neg)
        if isinstance(node, (exp.And, exp.Or)):
            op = "and" if isinstance(node, exp.And) else "or"
            if neg:
                op = "or" if op == "and" else "and"
            return (op, [self._f(node.left, neg), self._f(node.right, neg)])
        if isinstance(node, exp.Boolean):
            return bool(node.this) != neg
        ops = {exp.EQ: "=", exp.NEQ: "!=", exp.LT: "<", exp.LTE: "<=", exp.GT: ">", exp.GTE: ">="}
        for cls, op in ops.items():
            if type(node) is cls:
                if neg:
                    op = {"=": "!=", "!=": "=", "<": ">=", "<=": ">", ">": "<=", ">=": "<"}[op]
                return self.comparison(node.this, op, node.expression, node)
        if isinstance(node, exp.Between):
            lo = self.comparison(node.this, ">=", node.args["low"], node)
            hi = self.comparison(node.this, "<=", node.args["high"], node)
            return self._f_neg(("and", [lo, hi]), neg)
        if isinstance(node, exp.In):
            if node.args.get("query") is not None or node.args.get("unnest") is not None:
                raise ctx.error("IN (subquery) is outside the analysable class; use IN (constant, ...)", node)
            items = node.expressions
            if not items:
                raise ctx.error("empty IN list", node)
            eqs = [self.comparison(node.this, "=", it, node) for it in items]
            return self._f_neg(("or", eqs), neg)
        if isinstance(node, exp.Is):
            return self._is(node, neg)
        if isinstance(node, exp.Like) or isinstance(node, exp.ILike):
            raise ctx.error(f"LIKE ({_snippet(node)}) is outside the analysable class (only =, <>, <, <=, >, >=, BETWEEN, IN)", node)
        if isinstance(node, exp.Exists):
            raise ctx.error("EXISTS (subquery) is outside the analysable class", node)
        raise ctx.error(f"condition {type(node).__name__} ({_snippet(node)}) is outside the analysable class (only =, <>, <, <=, >, >=, BETWEEN, IN, AND, OR, NOT)", node)

    def _is(self, node: exp.Is, negated: bool):
        """``x IS NOT NULL`` is a per-tuple filter without effect on boundedness (the unfolder emits it)."""
        if isinstance(node.expression, exp.Null) and negated:
            self.operand(node.this)  # resolve the column (unknown columns are still errors)
            return True
        raise self.ctx.error(f"{'NOT ' if negated else ''}{_snippet(node)} is outside the analysable class (only IS NOT NULL is accepted)", node)

    @staticmethod
    def _f_neg(f, neg: bool):
        if not neg:
            return f
        return _negate(f)

    # projection --------------------------------------------------------------------------
    def projection(self) -> tuple[Projected, ...]:
        out = []
        for i, item in enumerate(self.sel.expressions):
            name = item.alias_or_name if isinstance(item, exp.Alias) else (item.name if isinstance(item, exp.Column) else f"_{i + 1}")
            node = item.this if isinstance(item, exp.Alias) else item
            p = self._item(name, node)
            if p.attrs:
                times = terms.determined_times(node, self.column, self.types, self._is_stream_ts)
                p = replace(p, times=times) if times else p
            out.append(p)
        return tuple(out)

    def _is_stream_ts(self, a: Attr) -> bool:
        r = next(r for r in self.relations if r.alias == a.alias)
        return r.is_stream and (r.table.timestamp == a.column or a.column in self.ctx.copies.get(a.alias.lower(), ()))

    def _item(self, name: str, node: exp.Expression) -> Projected:
        ctx = self.ctx
        while isinstance(node, exp.Paren):
            node = node.this
        if isinstance(node, exp.Star):
            raise ctx.error("SELECT * is outside the analysable class; list the projected columns", node)
        if isinstance(node, exp.Column):
            a = self._proj_attr(node)
            return Projected(name, "column", (a,))
        if isinstance(node, exp.Cast) and isinstance(node.this, exp.Null):
            return Projected(name, "constant", (), ("NULL",))
        if isinstance(node, exp.Null):
            return Projected(name, "constant", (), ("NULL",))
        c = self.constant(node) if not isinstance(node, exp.Cast) or not isinstance(node.this, exp.Column) else None
        if c is not None:
            return Projected(name, "constant", (), (str(c),))
        attrs: list[Attr] = []
        consts: list[str] = []
        if isinstance(node, _ARITH):  # a BIND's number: a function of the columns it reads
            lin = _arith_columns(node)
            if lin is None:
                raise ctx.error(f"projection {_snippet(node)}: arithmetic over columns and numbers only", node)
            return Projected(name, "template", tuple(self._proj_attr(c) for c in lin), ())
        self._template(node, attrs, consts)
        kind = "template" if consts or len(attrs) != 1 or not isinstance(node, exp.Cast) else "column"
        return Projected(name, kind, tuple(attrs), tuple(consts))

    def _proj_attr(self, col: exp.Column) -> Attr:
        """A projected column; a stream's timestamp is a value like any other (obda.analysis.terms)."""
        return self.column(col)

    def _template(self, node: exp.Expression, attrs: list[Attr], consts: list[str]) -> None:
        """IRI templates: CONCAT / || of string constants and (cast) columns."""
        ctx = self.ctx
        while isinstance(node, exp.Paren):
            node = node.this
        if isinstance(node, (exp.Concat, exp.ConcatWs)):
            for e in node.expressions:
                self._template(e, attrs, consts)
            return
        if isinstance(node, exp.DPipe):
            self._template(node.this, attrs, consts)
            self._template(node.expression, attrs, consts)
            return
        if isinstance(node, exp.Cast):
            self._template(node.this, attrs, consts)
            return
        if (isinstance(node, exp.Replace) and isinstance(node.expression, exp.Literal)
                and isinstance(node.args.get("replacement"), exp.Literal)):
            # the IRI-safe percent-encoding of a template value (R2RML): a one-to-one function of its argument
            self._template(node.this, attrs, consts)
            return
        if isinstance(node, exp.Column):
            attrs.append(self._proj_attr(node))
            return
        c = self.constant(node)
        if c is not None:
            consts.append(str(c))
            return
        if isinstance(node, exp.AggFunc):
            raise ctx.error(f"aggregate {_snippet(node)} is outside the SPJ class; {_AGGREGATES}", node)
        raise ctx.error(f"projected expression {type(node).__name__} ({_snippet(node)}) is outside the analysable class; "
                        "project columns, constants or CONCAT templates of them", node)


def _type_message(a: Element, ta: str, b: Element, tb: str, node: exp.Expression) -> str:
    def what(e: Element, t: str) -> str:
        if isinstance(e, Const):
            return f"{t} constant {e}"
        return f"{t} attribute {e}" if t != TIMESTAMP else f"timestamp attribute {e}"

    base = f"type error in {_snippet(node)}: compares {what(a, ta)} with {what(b, tb)}"
    if TIMESTAMP in (ta, tb):
        base += ("; timestamps are compared only with timestamps (attributes or constants such as "
                 "CAST('2024-01-01 00:00:00' AS TIMESTAMP))")
    return base


def _number(text: str, node: exp.Expression, ctx: _Ctx) -> Fraction:
    try:
        return Fraction(Decimal(text))
    except (InvalidOperation, ValueError):
        raise ctx.error(f"not a number: {text!r}", node) from None


def _timestamp(text: str, node: exp.Expression, ctx: _Ctx) -> int:
    t = text.strip().replace("Z", "+00:00")
    try:
        d = _dt.datetime.fromisoformat(t)
    except ValueError:
        raise ctx.error(f"not a timestamp: {text!r} (expected e.g. '2024-01-01 00:00:00')", node) from None
    if d.tzinfo is not None:
        d = d.astimezone(_dt.timezone.utc).replace(tzinfo=None)
    delta = d - _dt.datetime(1970, 1, 1)
    return (delta.days * 86400 + delta.seconds) * 1_000_000 + delta.microseconds


def _compare(x, op: str, y) -> bool:
    return OPS[op](x, y)


def _negate(f):
    if f is True or f is False:
        return not f
    if isinstance(f, Predicate):
        return f.negated()
    op, parts = f
    return ("or" if op == "and" else "and", [_negate(p) for p in parts])


def _dnf(f, ctx: _Ctx, node) -> list[list[Predicate]]:
    """Disjunctive normal form; ``[]`` = false, ``[[]]`` = true."""
    if f is True:
        return [[]]
    if f is False:
        return []
    if isinstance(f, Predicate):
        return [[f]]
    op, parts = f
    if op == "or":
        out = []
        for p in parts:
            out.extend(_dnf(p, ctx, node))
            if len(out) > MAX_DISJUNCTS:
                raise ctx.error(f"the condition expands to more than {MAX_DISJUNCTS} disjuncts; split the query into a UNION by hand", node)
        return out
    out = [[]]
    for p in parts:
        d = _dnf(p, ctx, node)
        out = [a + b for a in out for b in d]
        if len(out) > MAX_DISJUNCTS:
            raise ctx.error(f"the condition expands to more than {MAX_DISJUNCTS} disjuncts; split the query into a UNION by hand", node)
    return out


def _value_sat(conj: list[Predicate], types: Mapping[Attr, ColumnType]) -> bool:
    """Quick satisfiability of a conjunction (disequalities ignored) for pruning disjuncts."""
    atoms = [(p.left, p.op, p.right) for p in conj if p.op != "!="]
    disc = [a for a, t in types.items() if t.is_discrete]
    if not integer_satisfiable(atoms, disc):
        return False
    # a disequality between two elements forced equal
    cl = Closure(atoms)
    return all(not (p.op == "!=" and cl.eq(p.left, p.right)) for p in conj)


def _exclusive(disjuncts: list[list[Predicate]], types, ctx: _Ctx, node) -> list[list[Predicate]]:
    """Make disjuncts pairwise exclusive (D_k ∧ ¬D_1 ∧ … ∧ ¬D_{k-1}) so a bag union keeps multiplicities."""
    out: list[list[Predicate]] = []
    for k, d in enumerate(disjuncts):
        parts = [list(d)]
        for prev in disjuncts[:k]:
            nxt = []
            for conj in parts:
                if not _value_sat(conj + list(prev), types):
                    nxt.append(conj)  # already exclusive with ``prev``
                    continue
                for atom in prev:
                    cand = conj + [atom.negated()]
                    if _value_sat(cand, types):
                        nxt.append(cand)
            parts = nxt
            if len(parts) > MAX_DISJUNCTS:
                raise ctx.error(f"the condition expands to more than {MAX_DISJUNCTS} disjuncts; split the query into a UNION by hand", node)
        out.extend(parts)
    return out


def _disjuncts(f, sel: _Select, distinct: bool, node) -> list[list[Predicate]]:
    """Conjunctions whose union is the condition: plain DNF for sets, exclusive DNF for bags."""
    ds = _dnf(f, sel.ctx, node)
    ds = [d for d in ds if _value_sat(d, sel.types)] or ds[:1]
    if len(ds) > 1 and not distinct:
        ds = _exclusive(ds, sel.types, sel.ctx, node) or ds[:1]
    # drop duplicate atoms inside each conjunction, keep order
    return [list(dict.fromkeys(d)) for d in ds]


_AGGREGATES = ("a single aggregate SELECT is analysed by obda.analysis.aggregates.analyze_aggregate "
               "(`obda analyze --sql` picks it)")


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
    for node in sel.walk(prune=lambda n: ctx.view_of(n) is not None):
        if node is sel or ctx.view_of(node) is not None:
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


def extract_select(sel: exp.Select, index: int, distinct: bool, ctx: _Ctx, origin: MemberOrigin | None = None) -> list[SpjMember]:
    """One SELECT → its normal-form members (one per disjunct of the condition)."""
    _check_select(sel, ctx)
    s = _Select(sel, ctx)
    conds = s.entries()
    if not s.relations:
        for item in sel.expressions:
            node = item.this if isinstance(item, exp.Alias) else item
            if isinstance(node, exp.Column):
                raise ctx.error("a SELECT without FROM cannot reference columns", node)
    distinct = distinct or bool(sel.args.get("distinct"))
    where = sel.args.get("where")
    parts = list(conds) + ([where.this] if where is not None else [])
    parts, differences = _take_differences(parts, s)
    if differences and distinct:
        raise ctx.error("SELECT DISTINCT with an interval join (a timestamp compared with another one moved by a "
                        "duration) is outside the analysable class; use a bag (SELECT) or an aggregate",
                        differences[0][1])
    implied = [Predicate.make(d.left, d.implied_order(), d.right, d.location) for d, _ in differences
               if d.implied_order() is not None]
    parts_f = [s.formula(c) for c in parts] + implied
    f = ("and", parts_f) if parts_f else True
    proj = s.projection()
    sql = sel.sql()
    ds = _disjuncts(f, s, distinct, where.this if where is not None else sel)
    members = []
    if not ds:
        ds_out = [([], "the condition is always false")]
    else:
        ds_out = [(d, None) for d in ds]
    n = len(ds_out)
    for i, (d, contra) in enumerate(ds_out):
        if contra is None and not _value_sat(d, s.types):
            contra = "the selection is unsatisfiable"
        members.append(SpjMember(
            index=index, sql=sql, distinct=distinct, relations=tuple(s.relations), types=dict(s.types),
            predicates=tuple(d), projection=proj, origin=origin, disjunct=(i, n), contradiction=contra,
            differences=tuple(d for d, _ in differences), templates=tuple(dict.fromkeys(s.templates)),
            explicit=frozenset(s.explicit),
        ))
    return members


_ARITH = (exp.Add, exp.Sub, exp.Mul, exp.Div)


def _number_literal(e: exp.Expression) -> Fraction | None:
    e = e.unnest()
    if isinstance(e, exp.Neg):
        v = _number_literal(e.this)
        return None if v is None else -v
    if isinstance(e, exp.Literal) and not e.is_string:
        try:
            return Fraction(e.this)
        except ValueError:
            return None
    return None


def _linear(e: exp.Expression):
    """``e`` as ``a·col + b`` (``(column node or None, a, b)``, rationals), or None when it is not linear in at
    most one column. Casts to a number type and ``NULLIF(x, 0)`` of a non-zero constant are transparent."""
    e = e.unnest()
    if isinstance(e, exp.Column):
        return e, Fraction(1), Fraction(0)
    v = _number_literal(e)
    if v is not None:
        return None, Fraction(0), v
    if isinstance(e, exp.Cast) and e.to.is_type(*exp.DataType.NUMERIC_TYPES):
        return _linear(e.this)
    if isinstance(e, exp.Nullif) and _number_literal(e.expression) == 0:
        inner = _linear(e.this)
        return inner if inner is not None and inner[0] is None and inner[2] != 0 else None
    if isinstance(e, (exp.Add, exp.Sub)):
        l, r = _linear(e.this), _linear(e.expression)
        if l is None or r is None or (l[0] is not None and r[0] is not None):
            return None
        sign = 1 if isinstance(e, exp.Add) else -1
        return (l[0] if l[0] is not None else r[0]), l[1] + sign * r[1], l[2] + sign * r[2]
    if isinstance(e, exp.Mul):
        l, r = _linear(e.this), _linear(e.expression)
        if l is None or r is None or (l[0] is not None and r[0] is not None):
            return None
        const, lin = (l, r) if l[0] is None else (r, l)
        return lin[0], lin[1] * const[2], lin[2] * const[2]
    if isinstance(e, exp.Div):
        l, r = _linear(e.this), _linear(e.expression)
        if l is None or r is None or r[0] is not None or r[2] == 0:
            return None
        return l[0], l[1] / r[2], l[2] / r[2]
    return None


def _arith_columns(e: exp.Expression) -> list[exp.Column] | None:
    """The columns of ``+ - * /`` over columns and numbers (casts and NULLIF included), or None."""
    e = e.unnest()
    if isinstance(e, exp.Column):
        return [e]
    if _number_literal(e) is not None:
        return []
    if isinstance(e, (exp.Cast, exp.Neg)):
        return _arith_columns(e.this)
    if isinstance(e, (exp.Nullif, *_ARITH)):
        l, r = _arith_columns(e.this), _arith_columns(e.expression)
        return None if l is None or r is None else l + r
    return None


def _conjuncts(node: exp.Expression) -> list[exp.Expression]:
    node = node.unnest()
    if isinstance(node, exp.And):
        return _conjuncts(node.this) + _conjuncts(node.expression)
    return [node]


def _take_differences(parts: list[exp.Expression], s: "_Select"):
    """Split the top-level conjuncts into ordinary conditions and interval-join constraints
    ``ts1 op ts2 ± INTERVAL …`` between two stream timestamps (:class:`Difference`, with their node)."""
    rest: list[exp.Expression] = []
    found: list[tuple[Difference, exp.Expression]] = []
    for part in parts:
        for c in _conjuncts(part):
            d = _difference(c, s)
            if d is None:
                rest.append(c)
            else:
                found.append((d, c))
    return rest, found


def _difference(c: exp.Expression, s: "_Select") -> Difference | None:
    try:
        found = interval_comparison(c)
    except ValueError as e:
        raise s.ctx.error(f"{_snippet(c)}: {e}", c) from None
    if found is None:
        return None
    other, op, col, micros = found
    a, b = s.column(other), s.column(col)
    for attr in (a, b):
        rel = next(r for r in s.relations if r.alias == attr.alias)
        if not (rel.is_stream and rel.timestamp == attr):
            raise s.ctx.error(f"{attr} is moved by a duration or compared with a moved timestamp in "
                              f"{_snippet(c)}; only the timestamps of two streams can form an interval join", c)
    if a.alias == b.alias:
        raise s.ctx.error(f"{_snippet(c)} compares a timestamp with itself moved by a duration", c)
    return Difference(a, op, b, micros, s.ctx.loc(c))


def extract(node: exp.Expression, sources: Sources, text: str | None = None, file: str | None = None,
            origins: list[MemberOrigin | None] | None = None) -> list[SpjMember]:
    """A UNION [ALL] of SELECTs → normal-form members (spec §2)."""
    ctx = _Ctx(text, sources, file)
    selects = _selects(node, ctx)
    out: list[SpjMember] = []
    for i, (sel, distinct) in enumerate(selects):
        origin = origins[i] if origins and i < len(origins) else None
        out.extend(extract_select(sel, i, distinct, ctx, origin))
    return out


def from_sql(text: str, sources: Sources, file: str | None = None) -> list[SpjMember]:
    return extract(parse_sql(text, file), sources, text, file)
