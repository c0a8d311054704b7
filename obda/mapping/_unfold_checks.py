"""Checks: OPTIONAL's anti-join, MINUS and FILTER [NOT] EXISTS as conditions of a member.

Private helper of :mod:`obda.mapping.unfold`.  A check (:class:`~obda.model.query.Exists`) holds a query of its
own, ``SELECT DISTINCT`` the shared variables of another pattern; it is rewritten and unfolded once per
compilation (:class:`Checks`), and every member whose CQ carries it gets the condition

    [NOT] (term of ?a, term of ?b, ...) IN (that query's SQL)

over the member's terms for the shared variables (:class:`~obda.mapping._unfold_ir.KeyIn`).  The other pattern
reads static tables (its answers do not change while the query runs; docs/analysis.md, rule A1) or, in the
timestamp of the member's own stream rows, streams too (the parser checks the shared ``GRAPH ?t``; rule A2).  A pattern no mapping answers has no solution: NOT EXISTS is then always true (no
condition) and EXISTS never (the member is unsatisfiable).
"""

from __future__ import annotations

from typing import Callable

from obda.errors import UnsupportedConstructError
from obda.mapping._unfold_ir import Cmp, Col, KeyIn
from obda.mapping._unfold_terms import (RDF_LANGSTRING, Slot, TermValue, Unsat, Val, compare_terms, projection_sql,
                                        same_kind, term_kind, time_sql)
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

