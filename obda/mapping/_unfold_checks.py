"""Checks: OPTIONAL's anti-join, MINUS and FILTER [NOT] EXISTS as conditions of a member.

Private helper of :mod:`obda.mapping.unfold`.  A check (:class:`~obda.model.query.Exists`) holds a query of its
own, ``SELECT DISTINCT`` the shared variables of another pattern; it is rewritten and unfolded once per
compilation (:class:`Checks`), and every member whose CQ carries it gets the condition

    [NOT] (term of ?a, term of ?b, ...) IN (that query's SQL)

over the member's terms for the shared variables (:class:`KeyIn`).  The other pattern
reads static tables (its answers do not change while the query runs; docs/analysis.md, rule A1) or, in the
timestamp of the member's own stream rows, streams too (the parser checks the shared ``GRAPH ?t``; rule A2).  A pattern no mapping answers has no solution: NOT EXISTS is then always true (no
condition) and EXISTS never (the member is unsatisfiable).
"""

from __future__ import annotations

from typing import Callable

from sqlglot import exp

from obda.errors import UnsupportedConstructError
from obda.mapping._unfold_compare import compare_terms, same_kind, term_kind
from obda.mapping._unfold_ir import CMP_SQL, Cmp, Col, Expr, Template, join_templates
from obda.mapping._unfold_terms import RDF_LANGSTRING, Slot, TermValue, Unsat, Val, projection_sql, time_sql
from obda.model.dialects import COMPARISON_CLASSES
from obda.model.mapping import TermType
from obda.model.query import COMPARE_ALIAS, WINDOW_ALIAS, Exists, Query


class Checks:
    """The unfolding of every check's pattern, computed once (``compile(query)`` → an ``Unfolding``)."""

    def __init__(self, compile: Callable[[Query, tuple], object], is_stream: Callable[[str], bool]):
        self._compile, self._is_stream = compile, is_stream
        self.done: dict[tuple[Query, tuple], object] = {}

    def compiled(self) -> tuple:
        """``(pattern query, its Unfolding)`` of every check unfolded."""
        return tuple((q, u) for (q, _), u in self.done.items())

    def unfolding(self, check: Exists):
        u = self.done.get((check.pattern, check.keep))
        if u is None:
            u = self._compile(check.pattern, check.keep)
            streams = sorted({t for m in u.members for _, t in m.origin.alias_tables if self._is_stream(t)})
            timed = any(a.time is not None for b in check.pattern.branches for a in b.atoms)
            if streams and not timed:  # the parser keeps stream patterns in a GRAPH shared with the branch (A2)
                raise UnsupportedConstructError(
                    check.construct, f"{check.construct} reads the stream {streams[0]} through the mappings outside "
                    f"GRAPH; write its stream patterns in the GRAPH ?t of the pattern it is compared with "
                    "(docs/semantics.md)", check.location)
            self.done[(check.pattern, check.keep)] = u
        return u

    def condition(self, check: Exists, bound: dict) -> KeyIn | None:
        """The member's condition for ``check`` (its terms ``bound`` by variable); None: always true."""
        u = self.unfolding(check)
        if not u.members:
            if check.negated:
                return None
            raise Unsat(f"{check.construct}: the pattern has no solution (no mapping answers it)")
        terms = []
        for v, kinds in zip(check.outer, u.kinds):
            tv = bound.get(v)
            if tv is None:
                raise UnsupportedConstructError(
                    check.construct, f"{check.construct} compares {v}, which this branch binds only in a FILTER or "
                    "not at all; bind it with a triple pattern", check.location)
            # compatible solutions agree on the same RDF terms: a term of another kind or datatype never matches
            same = [same_kind(term_kind(tv), k) for k in kinds]
            if not any(same):
                if check.negated:
                    return None
                raise Unsat(f"{check.construct}: {v} is {term_kind(tv)} here and never in the pattern")
            if not all(same):
                raise UnsupportedConstructError(
                    check.construct, f"{check.construct}: the pattern binds {v} to terms of different kinds or "
                    f"datatypes ({', '.join(sorted(str(k[1] or k[0]) for k in kinds))}); compare one kind: split "
                    "the pattern's UNION or variable predicate", check.location)
            terms.append(projection_sql(tv))
        window = ()
        if check.window is not None:  # the pattern's time (its last column) against the member's (rule A3)
            w, ts = check.window, bound[check.window.outer]
            window = tuple(b for b in (
                None if w.lower is None else (">" if w.lower_strict else ">=", time_sql(ts, w.lower or None)),
                None if w.upper is None else ("<" if w.upper_strict else "<=", time_sql(ts, w.upper or None)))
                if b is not None)
        compares = []
        for inner, op, outer in check.compares:  # a FILTER comparing the pattern's variables with the member's
            found = self._compare(check, u, inner, op, bound.get(outer),
                                  WINDOW_ALIAS if check.window is not None else COMPARE_ALIAS)
            if found is None:  # it never holds: no solution of the pattern agrees
                if check.negated:
                    return None
                raise Unsat(f"{check.construct}: {inner} {op} {outer} never holds")
            compares.extend(found)
        return KeyIn(tuple(terms), check.negated, u.sql, window, tuple(compares))

    @staticmethod
    def _compare(check: Exists, u, inner, op: str, tv, alias: str) -> list | None:
        """The condition of the pattern's column ``inner`` ``op`` the member's term ``tv``, as SPARQL compares the
        terms (:func:`compare_terms`): [] always, None never."""
        if tv is None:
            raise UnsupportedConstructError(
                check.construct, f"{check.construct}'s FILTER compares {inner} with a variable this branch binds only "
                "in a FILTER or not at all; bind it with a triple pattern", check.location)
        k = check.pattern.projection.index(inner)
        kinds = u.kinds[k]
        if len(kinds) != 1:
            raise UnsupportedConstructError(
                check.construct, f"{check.construct}: the pattern binds {inner} to terms of different kinds or "
                f"datatypes ({', '.join(sorted(str(x[1] or x[0]) for x in kinds))}); compare one kind",
                check.location)
        ((kind, datatype),) = kinds
        slot = (Slot(Val(Col(alias, u.sql.named_selects[k])), False),)
        if kind == "literal":
            tag = datatype[1:] if datatype.startswith("@") else None
            mine = TermValue(TermType.LITERAL, slot, RDF_LANGSTRING if tag is not None else datatype, tag, native=True)
        else:
            mine = TermValue(TermType.IRI if kind == "iri" else TermType.BLANK_NODE, slot)
        try:
            conds = compare_terms(op, mine, tv)
        except Unsat:
            return None
        if not all(isinstance(c, Cmp) for c in conds):
            raise UnsupportedConstructError(
                check.construct, f"{check.construct}'s FILTER {inner} {op} … compares terms that SQL compares only "
                "part by part; compare literals, or IRIs with = and !=", check.location)
        return conds


class KeyIn(Expr):
    """``[NOT] (t1, ...) IN (subquery)``: a check (OPTIONAL's anti-join, MINUS, [NOT] EXISTS) of a member's terms
    against another query's answers.  The subquery is that query's SQL with FROM aliases of its own: fixed text,
    never renamed with the member's.  With a ``window`` (rules A3–A6: ``(op, bound)`` pairs, each ``query's last
    column op bound``, a bound over the member's timestamp) it is the correlated
    ``[NOT] EXISTS (SELECT 1 FROM (subquery) AS __w WHERE __w.c1 = t1 AND … AND __w.time op bound …)``; with
    ``compares`` (conditions over ``__w``'s columns and the member's terms: a FILTER of the pattern reading the
    answer's variables) too."""

    __slots__ = ("terms", "negated", "query", "_qsql", "window", "compares")

    def __init__(self, terms: tuple[Expr, ...], negated: bool, query: exp.Expression,
                 window: tuple[tuple[str, Expr], ...] = (), compares: tuple[Expr, ...] = ()):
        super().__init__()
        self.terms, self.negated, self.query, self.window, self.compares = terms, negated, query, window, compares
        self._qsql = query.sql()

    def _template(self) -> Template:
        if self.window or self.compares:
            names = self.query.named_selects
            alias = WINDOW_ALIAS if self.window else COMPARE_ALIAS
            parts: list[Template] = [(f"{'NOT ' if self.negated else ''}EXISTS (SELECT 1 FROM ({self._qsql}) AS "
                                      f"{alias} WHERE ",)]
            conds = [(f"{alias}.{n} = ", t) for n, t in zip(names, self.terms)]
            conds += [(f"{alias}.{names[-1]} {CMP_SQL[op]} ", b) for op, b in self.window]
            conds += [("", c) for c in self.compares]  # over the same alias's columns
            for i, (text, e) in enumerate(conds):
                parts.append(((" AND " if i else "") + text,))
                parts.append(e.template)
            parts.append((")",))
            return join_templates(*parts)
        if not self.terms:
            return ((f"NOT EXISTS ({self._qsql})" if self.negated else f"EXISTS ({self._qsql})"),)
        parts: list[Template] = [("NOT (" if self.negated else "(",)]
        for i, t in enumerate(self.terms):
            if i:
                parts.append((", ",))
            parts.append(t.template)
        parts.append((f") IN ({self._qsql})",))
        return join_templates(*parts)

    def _rename(self, ren):
        return KeyIn(tuple(t.rename(ren) for t in self.terms), self.negated, self.query,
                     tuple((op, b.rename(ren)) for op, b in self.window), tuple(c.rename(ren) for c in self.compares))

    def to_sqlglot(self, amap=None):
        terms = [t.to_sqlglot(amap) for t in self.terms]
        if self.window or self.compares:
            names = self.query.named_selects
            alias = WINDOW_ALIAS if self.window else COMPARE_ALIAS
            col = lambda n: exp.column(n, table=alias)  # noqa: E731
            conds = [exp.EQ(this=col(n), expression=t) for n, t in zip(names, terms)]
            conds += [COMPARISON_CLASSES[op](this=col(names[-1]), expression=b.to_sqlglot(amap)) for op, b in self.window]
            conds += [c.to_sqlglot(amap) for c in self.compares]
            inner = exp.select("1").from_(exp.Subquery(this=self.query.copy(), alias=exp.TableAlias(
                this=exp.to_identifier(alias)))).where(exp.and_(*conds))
            node = exp.Exists(this=inner)
            return exp.Not(this=node) if self.negated else node
        if not terms:  # no shared variable: whether the other query has an answer at all
            node = exp.Exists(this=self.query.copy())
            return exp.Not(this=node) if self.negated else node
        this = terms[0] if len(terms) == 1 else exp.Tuple(expressions=terms)
        node = exp.In(this=this, query=exp.Subquery(this=self.query.copy()))
        return exp.Not(this=node) if self.negated else node
