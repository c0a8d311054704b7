"""Per-atom views (T-mappings): the duplicate-free extension of one query atom.

Private helper of :mod:`obda.mapping.unfold`.  The virtual RDF dataset is a
*set* of quads (docs/semantics.md), so an atom ``P(x, y)@t`` stands for the set
of ``(x, y, t)`` that some triples map produces, however many triples maps,
hierarchy alternatives or equal source rows produce it.  For every atom of a
rewritten CQ this module

1. builds one *branch* per way to produce the atom (a hierarchy alternative
   × a mapping assertion): a single-atom SPJ over the source tables whose
   output is the atom's terms;
2. groups the branches by *term shape* on the variables that matter for
   joins (variables shared with another atom or used in a filter): IRI
   template and literal datatype.  Within a group the shared variables are
   the same columns-with-template in every branch, so joins with other atoms
   stay column equalities.  A variable used by this atom alone is *rendered*
   (its whole term as one string column), so branches with different
   templates still share one view and the number of members does not
   multiply with the number of triples maps (Ontop's T-mapping views);
3. removes branches that are duplicates of, or contained in, another branch
   of the group (same table, same term columns, a superset of conditions —
   e.g. a subclass mapped by a filter over its superclass's table);
4. decides whether the group is provably duplicate-free: one branch whose
   tables' declared keys are determined by the atom's columns, or several
   such branches that can never produce the same term.  Such a group with a
   single branch is *inlined* (its tables join the member as before); any
   other group becomes a :class:`AtomView`: ``SELECT DISTINCT`` (or a
   ``UNION`` of the branches) as a derived table, with one column per term
   slot and ``ts`` for stream atoms — the dedupe is per timestamp, since the
   timestamp is a column of the view.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp

from obda.mapping._unfold_compare import equal_terms
from obda.mapping._unfold_ir import Col, Const, Expr
from obda.mapping._unfold_read import const, split_cmp
from obda.mapping._unfold_tables import FromEntry, select_sql
from obda.mapping._unfold_terms import Slot, TermValue, Unsat, Val, concat_sql, literal_sql, projection_sql
from obda.mapping.template_text import determined_parts
from obda.model.mapping import TermType
from obda.model.query import XSD, Atom, Var
from obda.model.sources import Column, ColumnType, Table, TableKind

TS = "ts"  # the timestamp column of a stream view


@dataclass(frozen=True)
class ViewColumn:
    """Where a variable's term lives in a view: its term shape with slots naming view columns."""

    var: Var
    term: TermValue  # parts over placeholder alias ``#v``; slots are view columns


@dataclass(frozen=True)
class ViewBranch:
    """One branch of a view as the executor runs it: a filter and a projection over its source tables.

    ``tables`` and ``aliases`` name its FROM entries (an empty table name: a
    derived table).  Over one table, ``conds`` and ``items`` are sqlglot trees
    over the table's columns (unqualified); over several (a triples map joined
    with its parent, an ``rr:sqlQuery`` join) they are qualified by
    ``aliases``.
    """

    tables: tuple[str, ...]
    aliases: tuple[str, ...]
    conds: tuple[exp.Expression, ...]
    items: tuple[tuple[str, exp.Expression], ...]
    origin: tuple[str, str | None, int | None] = ("", None, None)  # the triples map (id, file, line) behind it

    @property
    def single(self) -> bool:
        return len(self.tables) == 1 and bool(self.tables[0])

    @property
    def table(self) -> str:
        return self.tables[0]


@dataclass(frozen=True)
class AtomView:
    """A duplicate-free view of one atom: a derived table over the source tables.

    ``table`` is how later stages see it: a stream (timestamp ``ts``) or a
    static relation with typed columns.  ``select`` is the SQL (a ``SELECT
    DISTINCT`` or a ``UNION [ALL]`` of single-atom branches).  ``triples_maps``
    are the (id, file, line) of the triples maps behind its branches.
    """

    name: str
    table: Table
    select: exp.Expression
    distinct: bool
    branches: int
    triples_maps: tuple[tuple[str, str | None, int | None], ...]
    pruned: tuple[str, ...] = ()  # why branches were dropped (duplicate, contained)
    text: str = ""  # SQL text of ``select`` (computed once)
    parts: tuple[ViewBranch, ...] = ()  # the branches as typed single-table filters and projections

    @property
    def temporal(self) -> bool:
        return self.table.is_stream

    def to_dict(self) -> dict:
        return {
            "name": self.name,
            "kind": self.table.kind.value,
            "columns": {c.name: c.type.value for c in self.table.columns},
            "distinct": self.distinct,
            "branches": self.branches,
            "triples_maps": [{"id": i, "file": f, "line": ln} for i, f, ln in self.triples_maps],
            "pruned": list(self.pruned),
            "sql": self.select.sql(),
        }


@dataclass(frozen=True)
class ViewUse:
    """An atom answered by a view: the view and the terms of the atom's variables over its columns."""

    view: AtomView
    columns: tuple[ViewColumn, ...]
    time: Var | None


PLACEHOLDER = "#v"


# ----------------------------------------------------------------------------- shapes


def _slot_shape(p) -> object:
    return p if isinstance(p, str) else ("slot", p.val.type, p.encoded, isinstance(p.val.expr, Const) and p.val.expr.sql())


def fine_shape(tv: TermValue) -> tuple:
    """The term shape that decides column-wise joins: template text, slot types, literal type."""
    return ("S", tv.term_type, tv.datatype, tv.language, tv.native, tuple(_slot_shape(p) for p in tv.parts))


def coarse_shape(tv: TermValue) -> tuple:
    """The shape of a rendered term: its kind, and a literal's datatype and language.

    Literals are always grouped this way (never by column or constant): one
    literal produced from a column by one triples map and as a constant by
    another is one term, and must be one row of one view.
    """
    if tv.term_type is TermType.LITERAL:
        return ("L", _datatype(tv), (tv.language or "").lower())
    return ("R", tv.term_type)


def _datatype(tv: TermValue) -> str:
    """A literal's datatype IRI (a plain literal is an xsd:string, a language-tagged one an rdf:langString)."""
    if tv.datatype:
        return tv.datatype
    return "http://www.w3.org/1999/02/22-rdf-syntax-ns#langString" if tv.language else XSD + "string"


_TYPE_OF = {
    "integer": ColumnType.INTEGER, "int": ColumnType.INTEGER, "long": ColumnType.INTEGER, "short": ColumnType.INTEGER,
    "decimal": ColumnType.DECIMAL, "double": ColumnType.DOUBLE, "float": ColumnType.DOUBLE,
    "boolean": ColumnType.BOOLEAN, "dateTime": ColumnType.TIMESTAMP, "dateTimeStamp": ColumnType.TIMESTAMP,
}


def literal_column_type(terms: list[TermValue]) -> ColumnType | None:
    """The typed column one literal variable of a view can be (None: only its lexical form, as text).

    Typed columns of one type, and constants of the literal's datatype, fit a
    typed column; templates, or columns of different types, do not.
    """
    natives = {tv.parts[0].val.type for tv in terms if tv.native}  # type: ignore[union-attr]
    if any(not tv.native and not tv.is_constant for tv in terms) or len(natives) > 1:
        return None
    if natives:
        return natives.pop()
    dt = _datatype(terms[0]).rsplit("#", 1)[-1]
    return _TYPE_OF.get(dt, ColumnType.STRING)


def injective(tv: TermValue) -> bool:
    """Do equal texts of ``tv`` imply equal slot values (so that deduping on slots dedupes terms)?

    True when the text determines every slot (:func:`obda.mapping.template_text.determined_parts`: each slot
    ends at a separator it cannot contain, read from the left or from the right).  ``Sensor_{station}_{kind}``
    over two strings is not: ``A`` + ``B_temp`` and ``A_B`` + ``temp`` are one IRI.
    """
    shaped = [p if isinstance(p, str) else (p.val.type, p.encoded) for p in tv.parts]
    return len(determined_parts(shaped)) == sum(1 for p in tv.parts if isinstance(p, Slot))


def may_overlap(a: TermValue, b: TermValue) -> bool:
    """Can two terms of different shapes ever be the same RDF term?"""
    if a.term_type is TermType.LITERAL or b.term_type is TermType.LITERAL:
        return False  # literal shapes differ in datatype: different terms
    try:
        equal_terms(a, b)
    except Unsat:
        return False
    return True


# ----------------------------------------------------------------------------- branches


@dataclass
class Branch:
    """One way to produce an atom, as a single-atom SPJ (aliases ``m1, m2, …``)."""

    option: tuple  # (alt atom, steps, assertion, kind) as in unfold
    sig: dict  # the terms the option binds the atom's variables to, as a member would bind them
    entries: list[FromEntry]
    conds: list[Expr]  # simplified, with IS NOT NULL
    terms: dict[Var, TermValue]  # the atom's variables (not the time variable)
    ts: Val | None
    key: str = ""  # canonical text: equal for duplicate branches

    @property
    def assertion(self):
        return self.option[2]


def _determined(b: Branch) -> set[str]:
    """Columns (SQL text) whose values the atom's terms determine, closed under ``=`` conditions.

    A term determines its slot columns when its template is injective (equal
    texts, equal slots); the timestamp of a stream atom is determined too.
    """
    known: set[str] = set()
    for tv in b.terms.values():
        if injective(tv):
            known.update(p.val.expr.sql() for p in tv.parts if isinstance(p, Slot) and isinstance(p.val.expr, Col))
    if b.ts is not None and isinstance(b.ts.expr, Col):
        known.add(b.ts.expr.sql())
    eqs = []
    for c in b.conds:
        s = split_cmp(c)
        if s is not None and s[0] == "=":
            eqs.append((s[1], s[2]))
    keys = {e.alias: [Col(e.alias, k).sql() for k in e.key] for e in b.entries if e.key and not e.derived}

    def row_known(col: Col) -> bool:  # a declared key that is known determines every column of its row
        key = keys.get(next(iter(col.aliases()), ""))
        return bool(key) and all(k in known for k in key)

    changed = True
    while changed:
        changed = False
        for l, r in eqs:
            for x, y in ((l, r), (r, l)):
                if not isinstance(y, Col) or y.sql() in known:
                    continue
                if not isinstance(x, Col) or x.sql() in known or row_known(y):
                    known.add(y.sql())
                    changed = True
                elif row_known(x):
                    known.add(x.sql())
                    changed = True
    return known


def duplicate_free(b: Branch) -> bool:
    """Does every row of the branch's tables give a different atom (declared keys determined by its terms)?"""
    known = _determined(b)
    for e in b.entries:
        if e.derived or not e.key:
            return False
        if not all(Col(e.alias, k).sql() in known for k in e.key):
            return False
    return True


def contained(small: Branch, big: Branch, small_out: list[str], big_out: list[str]) -> bool:
    """Is every row of ``small`` a row of ``big``?

    ``big`` reads one table; ``small`` reads the same table under the same
    alias (and possibly more tables, which only restrict it: a triples map
    joined with its parent), has the same outputs and a superset of
    ``big``'s conditions.  E.g. a subclass mapped by a filter over its
    superclass's table, or a domain axiom's property over the class's table.
    """
    if len(big.entries) != 1:
        return False
    eb = big.entries[0]
    if eb.derived or small_out != big_out:
        return False
    if not any(not e.derived and e.alias == eb.alias and e.sql_source() == eb.sql_source() for e in small.entries):
        return False
    return {c.sql() for c in big.conds} <= {c.sql() for c in small.conds}


def column_layout(atom: Atom, group: list[dict[Var, TermValue]], rendered: set[Var]) -> list[tuple]:
    """(variable, how, column name, column type) in view-column order.

    ``how`` is ``slots`` (the template kept, one column per slot), ``native``
    (a literal as a typed column) or ``text`` (the whole term as a string).
    Columns are named by position (``s`` subject, ``o`` object), not by
    variable, so that atoms over other variables share the same view.
    """
    out: list[tuple] = []
    for v, base in zip(atom.terms, ("s", "o")):
        if not isinstance(v, Var) or any(v == x[0] for x in out):
            continue
        terms = [t[v] for t in group]
        if v not in rendered:
            out.append((v, "slots", base, None))
        elif terms[0].term_type is TermType.LITERAL and (ct := literal_column_type(terms)) is not None:
            out.append((v, "native", base, ct))
        else:
            out.append((v, "text", base, ColumnType.STRING))
    return out


def branch_items(b: Branch, layout) -> list[tuple[str, Expr, ColumnType]]:
    """The output columns of a branch: name, expression, type."""
    items: list[tuple[str, Expr, ColumnType]] = []
    for v, how, base, ct in layout:
        tv = b.terms[v]
        if how == "slots":
            k = 0
            for p in tv.parts:
                if isinstance(p, Slot):
                    k += 1
                    items.append((f"{base}_{k}", p.val.expr, p.val.type or ColumnType.STRING))
        elif how == "native":
            if tv.native:
                items.append((base, tv.parts[0].val.expr, ct))  # type: ignore[union-attr]
            else:  # a constant literal, typed like the other branches' column
                items.append((base, const(literal_sql(tv.text, tv.datatype, ct)), ct))
        else:
            text_tv = TermValue(TermType.IRI if tv.term_type is not TermType.LITERAL else TermType.LITERAL,
                                tv.parts, tv.datatype, tv.language)
            items.append((base, projection_sql(text_tv) if tv.term_type is not TermType.LITERAL
                          else concat_sql(text_tv), ColumnType.STRING))
    if b.ts is not None:
        items.append((TS, b.ts.expr, ColumnType.TIMESTAMP))
    if not items:
        items.append(("present", Const(exp.Literal.number(1), ("n", 1)), ColumnType.INTEGER))
    return items


def view_terms(b: Branch, layout) -> tuple[ViewColumn, ...]:
    """The atom's variables as terms over the view's columns (placeholder alias)."""
    out = []
    for v, how, base, ct in layout:
        tv = b.terms[v]
        if how == "slots":
            parts: list = []
            k = 0
            for p in tv.parts:
                if isinstance(p, Slot):
                    k += 1
                    parts.append(Slot(Val(Col(PLACEHOLDER, f"{base}_{k}"), p.val.type), p.encoded))
                else:
                    parts.append(p)
            out.append(ViewColumn(v, TermValue(tv.term_type, tuple(parts), tv.datatype, tv.language, tv.native,
                                               label=tv.label or f"view column of {v}")))
        elif how == "native":
            out.append(ViewColumn(v, TermValue(TermType.LITERAL, (Slot(Val(Col(PLACEHOLDER, base), ct), False),),
                                               tv.datatype, tv.language, True, label=tv.label or f"view column of {v}")))
        else:
            out.append(ViewColumn(v, TermValue(tv.term_type, (Slot(Val(Col(PLACEHOLDER, base), ColumnType.STRING),
                                                                    False),),
                                               tv.datatype, tv.language, False, label=tv.label or f"view column of {v}")))
    return tuple(out)


def build_view(name: str, atom: Atom, branches: list[Branch], layout, disjoint: bool, all_free: bool,
               pruned: tuple[str, ...]) -> AtomView:
    """The derived table of a group of branches (``SELECT DISTINCT`` or ``UNION [ALL]``)."""
    selects = []
    parts = []
    cols: list[Column] = []
    for b in branches:
        items = branch_items(b, layout)
        if not cols:
            cols = [Column(n, t) for n, _, t in items]
        selects.append(select_sql(b.entries, b.conds, [(n, e.to_sqlglot()) for n, e, _ in items], False))
        plain = _bare if len(b.entries) == 1 else (lambda e: e)
        parts.append(ViewBranch(tuple("" if e.derived else e.table for e in b.entries), tuple(e.alias for e in b.entries),
                                tuple(plain(c.to_sqlglot()) for c in b.conds),
                                tuple((n, plain(e.to_sqlglot())) for n, e, _ in items), _origin(b)))
    need_distinct = not (all_free and (len(branches) == 1 or disjoint))
    if len(selects) == 1:
        body: exp.Expression = selects[0]
        if need_distinct:
            body.set("distinct", exp.Distinct())
    else:
        body = selects[0]
        for s in selects[1:]:
            body = exp.Union(this=body, expression=s, distinct=need_distinct)
    temporal = atom.time is not None
    table = Table(name, TableKind.STREAM if temporal else TableKind.STATIC, tuple(cols),
                  timestamp=TS if temporal else None)
    tms = tuple({_origin(b)[0]: _origin(b) for b in branches}.values())
    return AtomView(name, table, body, need_distinct, len(branches), tms, pruned, "(" + body.sql() + ")",
                    tuple(parts))


def _origin(b: Branch) -> tuple[str, str | None, int | None]:
    """The triples map behind a branch: its id, and the file and line of the assertion."""
    a = b.assertion
    return (a.triples_map.id, a.location.file or a.triples_map.location.file,
            a.location.line or a.triples_map.location.line)


def _bare(e: exp.Expression) -> exp.Expression:
    """``e`` with column qualifiers removed (a single-table branch reads its table's columns by name)."""

    def tr(node):
        if isinstance(node, exp.Column) and node.table:
            return exp.column(node.name, quoted=True)
        return node

    return e.transform(tr)

