"""Members: one choice of a mapping option per atom → an SPJ member (FROM entries, conditions, answer terms).

Private helper of :mod:`obda.mapping.unfold`.  Variables are bound by the first term map that produces them;
every other occurrence becomes an equality (:class:`_Member`); an atom answered by its per-atom view adds one
derived FROM entry.  FILTERs and BINDs of the CQ become conditions and computed values; the member is then
simplified, its self-joins on declared keys eliminated, ``IS NOT NULL`` added for the columns its term maps
read, and its aliases renumbered (:func:`_build`); :func:`_select` outputs it as a sqlglot SELECT.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from sqlglot import exp

from obda.errors import Location, MappingError, RewritingError, UnsupportedConstructError
from obda.mapping._unfold_assertions import Assertion
from obda.mapping._unfold_compare import compare_terms, same_kind, term_kind
from obda.mapping._unfold_instances import _constant_value, _Memo
from obda.mapping._unfold_ir import Arith, Cmp, Col, Expr, NotAll, NotNull, Raw, Seq
from obda.mapping._unfold_optimize import eliminate_self_joins, rename_aliases, simplify, split_cmp
from obda.mapping._unfold_read import const
from obda.mapping._unfold_tables import FromEntry, select_sql
from obda.mapping._unfold_terms import (Slot, TermValue, Unsat, Val, category, held_as_text, projection_sql,
                                         time_sql)
from obda.mapping._unfold_views import PLACEHOLDER, TS, ViewUse
from obda.mapping.functions import computed_value
from obda.model.compilation import AtomSource, MemberOrigin
from obda.model.mapping import TermType
from obda.model.query import (CQ, ERROR_PROPAGATING, IRI, NEGATE, XSD, Atom, Call, ClassAtom, Comparison, Literal,
                              Query, Shifted, Term, Var, is_computed)
from obda.model.sources import ColumnType
from obda.query.tokens import binding_position, filter_position
from obda.model.terms import INTEGER


@dataclass
class _Member:
    memo: _Memo
    entries: list[FromEntry] = field(default_factory=list)
    conds: list[Expr] = field(default_factory=list)
    used: list[Val] = field(default_factory=list)
    exempt: set[str] = field(default_factory=set)
    bound: dict[Var, TermValue] = field(default_factory=dict)
    errors: dict[Var, str] = field(default_factory=dict)  # BIND variables left unbound: an error for every row
    sources: list[tuple[Atom, Assertion, tuple[str, ...]]] = field(default_factory=list)
    counter: int = 0  # aliases m1..m<counter> are taken

    def bind(self, term: Term, value: TermValue) -> None:
        if isinstance(term, Var):
            if term in self.bound:
                self.conds.extend(self.memo.equal_terms(self.bound[term], value))
            else:
                self.bound[term] = value
        else:
            self.conds.extend(self.memo.equal_terms(self.memo.constant(term), value))


def _unfold_atom(m: _Member, atom: Atom, a: Assertion, kind: str) -> None:
    """Add the FROM entries, bindings and conditions of one atom unfolded with assertion ``a``."""
    if kind == "view":
        _view_atom(m, atom, a)
        return
    u = m.memo.unfold_assertion(a, m.counter)
    m.counter += len(u.entries)
    m.entries += u.entries
    m.conds += u.conds
    m.used += u.used
    m.exempt |= u.exempt
    aliases = u.aliases
    subj, obj, ts, tm = u.subj, u.obj, u.ts, a.triples_map
    if isinstance(atom, ClassAtom):
        m.bind(atom.term, subj)
        if kind == "dynamic-class":
            m.conds.extend(m.memo.equal_terms(obj, m.memo.constant(IRI(atom.cls))))
    elif kind == "type-property":
        m.bind(atom.subject, subj)
        m.bind(atom.object, obj if obj is not None else m.memo.constant(IRI(a.predicate)))
    else:
        m.bind(atom.subject, subj)
        m.bind(atom.object, obj)
    if atom.time is not None:
        if ts is None:  # a temporal assertion always has a timestamp (checked when indexing)
            raise MappingError(f"triples map {tm.name} reads a stream but has no timestamp column", tm.location)
        m.bind(atom.time, TermValue(TermType.LITERAL, (Slot(ts, False),), XSD + "dateTime", native=True,
                                    label=f"timestamp {ts.key()}"))
    m.sources.append((atom, a, tuple(aliases)))


def _view_atom(m: _Member, atom: Atom, use: ViewUse) -> None:
    """Add one atom answered by its per-atom view: one derived FROM entry, its columns bound to the variables."""
    m.counter += 1
    alias = f"m{m.counter}"
    view = use.view
    m.entries.append(FromEntry(alias, exp.Subquery(this=view.select), view.name, derived=True, stream=view.temporal,
                               source_text=view.text))
    m.exempt.update(Col(alias, c.name).sql() for c in view.table.columns)  # a view's columns are never NULL
    ren = {PLACEHOLDER: alias}
    for vc in use.columns:
        m.bind(vc.var, _rename_term(vc.term, ren))
    if atom.time is not None:
        m.bind(atom.time, TermValue(TermType.LITERAL, (Slot(Val(Col(alias, TS), ColumnType.TIMESTAMP), False),),
                                    XSD + "dateTime", native=True, label=f"timestamp {alias}.{TS}"))
    m.sources.append((atom, use, (alias,)))


def _filter(m: _Member, f: Comparison, cq: CQ) -> None:
    if f.not_true:  # holds where the comparison is not true: its conditions negated; never true (Unsat): always
        first = len(m.conds)
        try:
            _filter(m, replace(f, not_true=False), cq)
        except Unsat:
            del m.conds[first:]
            return
        conds = m.conds[first:]
        del m.conds[first:]
        if not conds:
            raise Unsat(f"FILTER: {f.op} of {f.left} and {f.right} always holds, so it is never not true")
        if len(conds) == 1 and isinstance(conds[0], Cmp):  # (columns are not NULL: a negated comparison is exact)
            m.conds.append(Cmp(NEGATE[conds[0].op], conds[0].left, conds[0].right))
        else:
            m.conds.append(NotAll(tuple(conds)))
        return
    _plain_filter(m, f, cq)


def _plain_filter(m: _Member, f: Comparison, cq: CQ) -> None:
    if isinstance(f.left, Shifted) or isinstance(f.right, Shifted):  # an interval join: timestamp columns
        def ts(t) -> Expr:
            return time_sql(m.bound[t.var], t.micros) if isinstance(t, Shifted) else time_sql(m.bound[t])

        m.conds.append(Cmp(f.op, ts(f.left), ts(f.right)))
        return

    def side(t: Term) -> TermValue:
        if isinstance(t, Var):
            if t in m.errors:  # a comparison with an unbound value is an error: the FILTER is false
                raise Unsat(f"FILTER ({f}): {t} is unbound here ({m.errors[t]})")
            if t not in m.bound:
                raise UnsupportedConstructError(
                    "unbound filter variable",
                    f"FILTER ({f}) uses {t}, which no triple pattern of the branch binds",
                )
            return m.bound[t]
        if is_computed(t):  # arithmetic or a function: one typed SQL value (obda.mapping.functions)
            return computed_value(t, side, f"FILTER ({f})")
        return _constant_value(t)

    same = _same_term_leaf(f)
    if same is not None:  # sameTerm(a, b) alone: the term equality of two terms of one kind and type
        (a, b), positive = same
        ta, tb = side(a), side(b)
        if ta.term_type is not TermType.BLANK_NODE and same_kind(term_kind(ta), term_kind(tb)):
            m.conds.extend(compare_terms("=" if positive else "!=", ta, tb))
            return
        if ta.term_type is not TermType.BLANK_NODE and tb.term_type is not TermType.BLANK_NODE:
            if positive:
                raise Unsat(f"FILTER ({f}): terms of different kinds, datatypes or tags are never the same term")
            return
    m.conds.extend(compare_terms(f.op, side(f.left), side(f.right)))  # filters are few: not memoised


def _same_term_leaf(f: Comparison):
    """``((a, b), positive)`` of a FILTER that is ``sameTerm(a, b)`` alone (``= true``) or negated (``= false``),
    over variables and constants; else None."""
    if not (isinstance(f.left, Call) and f.left.name == "sameTerm" and f.op == "=" and isinstance(f.right, Literal)
            and f.right.datatype == XSD + "boolean"):
        return None
    if any(is_computed(x) for x in f.left.args):
        return None
    return f.left.args, f.right.lexical == "true"


_DOUBLE = {XSD + "double", XSD + "float"}


def _located(e: UnsupportedConstructError, query: Query, at: tuple | Location | None) -> UnsupportedConstructError:
    """``e`` where the query writes what it refuses, when it has no line (the functions' errors name the BIND,
    FILTER or aggregate, not where it is written): ``at`` a (line, column) of the query's text, or a location."""
    if isinstance(at, tuple):
        at = Location(query.location.file, at[0], at[1]) if at[0] is not None else None
    if e.location.line is not None or at is None:
        return e
    return UnsupportedConstructError(e.construct, e.message, at)


def _bind_value(m: _Member, var: Var, e, label: str | None = None) -> TermValue:
    """The value ``BIND(e AS var)`` gives: the bound term of a variable, or a number computed in SQL (a native
    literal whose datatype follows SPARQL's numeric promotion: integer < decimal < double; ``/`` is decimal).
    ``label``: how messages name it (an aggregate of an expression: the call the query wrote)."""
    if isinstance(e, Var):
        if e in m.errors:  # an error: this BIND's value is one too
            raise Unsat(m.errors[e])
        if e not in m.bound:
            raise UnsupportedConstructError("BIND", f"{label or f'BIND({e} AS {var})'}: {e} is not bound by the branch")
        return m.bound[e]
    if isinstance(e, (IRI, Literal)) and not (isinstance(e, Literal) and category(e.datatype) == "numeric"):
        return _constant_value(e)  # BIND("text" AS ?v), BIND(<iri> AS ?v): the constant term
    if _has_call(e):  # a function: one typed SQL value (Unsat: an error for every row of the member)
        def term(t):
            if isinstance(t, Var):
                return _bind_value(m, var, t, label)
            return computed_value(t, term, label or f"BIND({e} AS {var})") if is_computed(t) else _constant_value(t)

        return computed_value(e, term, label or f"BIND({e} AS {var})")

    def number(x) -> tuple[Expr, str]:
        if isinstance(x, Literal):
            return const(exp.Literal.number(x.lexical)), x.datatype
        if isinstance(x, Var):
            tv = m.bound.get(x)
            if tv is not None:
                held_as_text(tv, label or f"BIND(… AS {var})")
            if tv is None or not tv.native or category(tv.datatype) != "numeric":
                raise UnsupportedConstructError(
                    "BIND", f"{label or f'BIND(… AS {var})'} computes with {x}, which is not a number column (a "
                    "literal of a numeric datatype read from one column)")
            return tv.parts[0].val.expr, tv.datatype  # type: ignore[union-attr]
        left, lt = number(x.left)
        right, rt = number(x.right)
        if lt in _DOUBLE or rt in _DOUBLE:
            dt = XSD + "double"
        elif x.op == "/" or lt not in INTEGER or rt not in INTEGER:
            dt = XSD + "decimal"
        else:
            dt = XSD + "integer"
        return Arith(x.op, left, right), dt

    value, dt = number(e)
    ctype = {XSD + "double": ColumnType.DOUBLE, XSD + "integer": ColumnType.INTEGER}.get(dt, ColumnType.DECIMAL)
    return TermValue(TermType.LITERAL, (Slot(Val(value, ctype), False),), dt, native=True, label=f"BIND {var}")


def _has_call(e) -> bool:
    return isinstance(e, Call) or (is_computed(e) and (_has_call(e.left) or _has_call(e.right)))


@dataclass
class _Built:
    """A surviving member before SQL output: FROM entries (final aliases), conditions, projected terms."""

    entries: list[FromEntry]  # aliases before renumbering (``ren`` gives the final ones), as in conds and bound
    conds: list[Expr]
    bound: list[tuple[str, TermValue | None]]  # same aliases as conds
    ren: dict[str, str]
    origin: MemberOrigin
    hidden: list[tuple[str, TermValue]] = field(default_factory=list)  # the branch's other variables, by name

    def skeleton(self) -> list[Expr]:
        """Small stand-ins of the solution for duplicate detection: the projected items, then the branch's other
        variables (two members projecting the same items from different solutions are no duplicates in a bag)."""
        return [_skeleton(tv) for _, tv in self.bound] + [_skeleton(tv) for _, tv in self.hidden]

    def items(self) -> list[tuple[str, exp.Expression]]:
        return [(n, projection_sql(tv).to_sqlglot(self.ren) if tv is not None else exp.Null()) for n, tv in self.bound]


def _build(query: Query, branch: int, cq: CQ, steps: tuple[str, ...], choice, memo: _Memo, checks=None) -> _Built:
    """One SPJ member for a choice of (alternative atom, alternative steps, assertion, kind) per atom; ``checks``
    (:class:`~obda.mapping._unfold_checks.Checks`) gives the conditions of the CQ's checks."""
    m = _Member(memo)
    for atom, _steps, a, kind in choice:
        _unfold_atom(m, atom, a, kind)
    # an aggregate of an expression reads a variable a BIND computes (obda.query.aggregate_args): named as written
    written = {c.argument: str(c) for c in query.aggregation.calls if c.written} if query.aggregation else {}
    for v, e in cq.binds:
        try:
            m.bind(v, _bind_value(m, v, e, written.get(v)))
        except Unsat as why:  # SPARQL: a BIND whose value is an error leaves its variable unbound (NULL)
            if v in m.bound:  # a value the branch's variable must equal (a variable predicate's): no solution
                raise
            m.errors[v] = str(why)
        except UnsupportedConstructError as e:  # located where the query binds the variable (``AS ?v``)
            raise _located(e, query, binding_position(query.text, v.name) if query.text else (None, None)) from None
    for f in cq.filters:
        try:
            _filter(m, f, cq)
        except UnsupportedConstructError as e:  # located at the FILTER (at the function it calls, if one)
            where = filter_position(query.text, (v.name for v in f.variables), e.construct) if query.text else None
            raise _located(e, query, where or (None, None)) from None
    for c in cq.checks:
        cond = checks.condition(c, m.bound)
        if cond is not None:
            m.conds.append(cond)
    branch_vars = query.branches[branch].variables if 0 <= branch < len(query.branches) else frozenset()
    bound: list[tuple[str, TermValue | None]] = []
    projected = set(query.projection)
    hidden = sorted(((v.name, tv) for v, tv in m.bound.items() if v in branch_vars and v not in projected),
                    key=lambda p: p[0])
    for v in query.projection:
        tv = m.bound.get(v)
        if tv is None and v in branch_vars and v not in m.errors:
            raise RewritingError(
                f"rewritten CQ {cq} of branch {branch + 1} does not bind answer variable {v}, which the branch "
                "binds (an answer variable must never be folded into an anonymous individual)",
                query.location,
            )
        bound.append((v.name, tv))
    if query.aggregation is not None:
        _check_aggregated(query, m.bound, m.errors)
    all_steps = tuple(steps) + tuple(s for _, st, _, _ in choice for s in st)
    expanded = cq.with_atoms(atom for atom, _, _, _ in choice)
    conds = simplify(m.conds, m.exempt)
    entries = list(m.entries)
    sources = list(m.sources)
    # self-join elimination on declared keys (repeat: a merge may enable another)
    while True:
        merges = eliminate_self_joins(entries, conds)
        if not merges:
            break
        ren = dict(merges)
        entries = [e for e in entries if e.alias not in ren]
        conds = simplify([rename_aliases(c, ren) for c in conds], m.exempt)
        bound = [(n, _rename_term(tv, ren)) for n, tv in bound]
        hidden = [(n, _rename_term(tv, ren)) for n, tv in hidden]
        m.used = [Val(rename_aliases(u.expr, ren), u.type) for u in m.used]
        sources = [(atom, a, tuple(dict.fromkeys(ren.get(x, x) for x in al))) for atom, a, al in sources]
    conds = conds + _not_null(m.used, conds, m.exempt)
    # renumber aliases m1..mk in FROM order (applied when the SQL is output)
    ren = {e.alias: f"m{i}" for i, e in enumerate(entries, 1)}
    atom_sources = tuple(_atom_source(atom, a, tuple(ren[x] for x in al)) for atom, a, al in sources)
    origin = MemberOrigin(
        branch=branch,
        cq=expanded,
        atom_sources=atom_sources,
        rewriting_steps=all_steps,
        alias_tables=tuple((ren[e.alias], e.table) for e in entries),
    )
    return _Built(entries, conds, bound, ren, origin, hidden)


def _check_aggregated(query: Query, bound: dict, errors: dict) -> None:
    """SUM and AVG add numbers, GROUP_CONCAT concatenates simple strings (SPARQL 1.1 §18.5.1): an argument that a
    member binds to another kind of term would make its group's value an error, and is refused; so is one a BIND
    makes an error for every solution of the member (``errors``: a type error), which all but COUNT and SAMPLE
    would make the group's value (SQL's aggregates would skip it)."""
    for c in query.aggregation.calls:
        if c.argument in errors and c.function in ERROR_PROPAGATING:
            raise UnsupportedConstructError(
                "aggregate of an error", f"{c}: {c.shown_argument} is an error for every solution of a UNION branch "
                f"({errors[c.argument].removeprefix(f'{c}: ')}), and SPARQL makes the {c.function.split('_')[0].upper()} of a group an "
                "error as soon as one of its solutions is; compute a value every solution has, or COUNT it",
                c.location or query.location)
        tv = bound.get(c.argument) if c.argument is not None else None
        if tv is None:
            continue
        if c.function.split("_")[0] in ("sum", "avg", "min", "max", "median"):  # numbers, not their text
            try:
                held_as_text(tv, str(c))
            except UnsupportedConstructError as e:
                raise _located(e, query, c.location or query.location) from None
        kind, dt = term_kind(tv)
        if c.function.startswith("group_concat"):
            if (kind, dt) == ("literal", XSD + "string"):
                continue
            construct, needs = "GROUP_CONCAT of a non-string", "concatenates simple strings only"
            fix = f"concatenate their text: GROUP_CONCAT(STR({c.shown_argument}))"
        elif c.function in ("sum", "avg", "sum_distinct", "avg_distinct"):
            if kind == "literal" and category(dt) == "numeric":
                continue
            construct, needs = f"{c.function.split('_')[0].upper()} of a non-number", "adds numbers only"
            fix = (f"aggregate a variable every solution binds to a number (the UNION branch or the variable "
                   f"predicate that binds {c.shown_argument} to other terms is the one to leave out)")
        else:
            continue
        what = {"iri": "an IRI", "bnode": "a blank node"}.get(kind) or (
            f"a literal tagged {dt}" if dt.startswith("@") else f"an {dt.replace(XSD, 'xsd:')} literal")
        raise UnsupportedConstructError(
            construct, f"{c}: {c.shown_argument} is {what} in some solutions, and SPARQL {needs} (the group's value "
            f"would be an error); {fix}", c.location or query.location)


def _atom_source(atom: Atom, a, aliases: tuple[str, ...]) -> AtomSource:
    """Provenance of one atom: its triples map, or every triples map behind its view."""
    if isinstance(a, ViewUse):
        tms = a.view.triples_maps
        return AtomSource(atom, tms[0][0], tms[0][1], tms[0][2], aliases, view=a.view.name,
                          triples_maps=tuple(t[0] for t in tms))
    return AtomSource(atom, a.triples_map.id, a.location.file or a.triples_map.location.file,
                      a.location.line or a.triples_map.location.line, aliases)


def _rename_term(tv: TermValue | None, ren: dict[str, str]) -> TermValue | None:
    """``tv`` with the FROM aliases of its columns renamed."""
    if tv is None:
        return None
    if not any(a in ren for p in tv.parts if isinstance(p, Slot) for a in p.val.expr.aliases()):
        return tv
    parts = tuple(
        p if isinstance(p, str) else Slot(Val(rename_aliases(p.val.expr, ren), p.val.type), p.encoded) for p in tv.parts
    )
    return replace(tv, parts=parts)


def _skeleton(tv: TermValue | None) -> Expr:
    """A small key that determines the projection of ``tv`` (compared instead of REPLACE chains)."""
    if tv is None:
        return Seq(("NULL",))
    out: list = [repr(f"{tv.term_type.value}|{tv.datatype}|{tv.language}|{tv.native}")]
    for p in tv.parts:
        out += [",", repr(p)] if isinstance(p, str) else [",S(", p.val.expr, f",{p.encoded})"]
    return Seq(tuple(out))


def _not_null(used: list[Val], conds: list[Expr], exempt: set[str]) -> list[Expr]:
    """``c IS NOT NULL`` for term-map columns no comparison of the member already requires non-null."""
    rejected: set[str] = set(exempt)
    for c in conds:
        s = split_cmp(c)
        if s is not None:
            rejected.update(x.sql() for x in (s[1], s[2]) if isinstance(x, Col))
        elif isinstance(c, NotNull):
            rejected.add(c.arg.sql())
        elif isinstance(c, Raw) and c.not_is is not None:
            rejected.add(c.not_is.sql())
    out: list[Expr] = []
    for u in used:
        if isinstance(u.expr, Col) and u.expr.sql() not in rejected:
            rejected.add(u.expr.sql())
            out.append(NotNull(u.expr))
    return out


def _select(b: _Built, distinct: bool) -> exp.Select:
    """The sqlglot SELECT of a member, a fresh tree on every call (FROM aliases renumbered)."""
    return select_sql(b.entries, b.conds, b.items(), distinct, b.ren)
