"""``VALUES``: inline data joined with a group, or with the whole WHERE clause (SPARQL 1.1 §10.2, §18.2.4.3).

``VALUES (?x ?y) { (:a 1) (:b UNDEF) }`` is a table of solutions; a group's ``VALUES`` is one more element of
its join, a trailing ``VALUES`` (after the WHERE clause) is joined with the WHERE clause's solutions.  Each row
becomes a branch of its own (a bag union, as the join gives one solution per compatible row), where:

* a variable the branch binds must be *the same term* as the row's value: a ``sameTerm(?x, value)`` condition
  (SPARQL joins compatible solutions: ``1`` and ``1.0`` are different terms);
* a variable the branch does not bind takes the row's value (a ``BIND`` of the constant);
* ``UNDEF`` constrains nothing and binds nothing.

This is a mixin of the tree walk (:mod:`obda.query.walk`): it reads ``ts``, ``time_vars``, ``in_scope`` and
``term``.
"""

from __future__ import annotations

from dataclasses import replace

from pyparsing import ParseResults
from rdflib.plugins.sparql.parserutils import CompValue
from rdflib.term import Literal as RDFLiteral, URIRef, Variable

from obda.model.query import Call, Comparison, Var
from obda.query.functions import TRUE
from obda.query.normal_forms import MAX_BRANCHES, Branch


class InlineData:
    """``VALUES`` blocks, read from rdflib's parse tree (``InlineData`` in a group, ``ValuesClause`` at the end)."""

    def _values_rows(self, data: CompValue, at: int | None) -> tuple[tuple[Var, ...], list[tuple]]:
        """The variables of a VALUES block and its rows (model terms; None for ``UNDEF``)."""
        variables = tuple(Var(str(v)) for v in data["var"])
        for v in variables:
            if v in self.time_vars:
                raise self.unsupported("VALUES", f"VALUES over {v}, a time variable (bound by GRAPH), is not "
                                       "supported; compare the time in a FILTER", at)
        raw = list(data.get("value") or [])
        rows = [tuple(r) if isinstance(r, (ParseResults, list, tuple)) else (r,) for r in raw]
        out = []
        for row in rows:
            if len(row) != len(variables):
                raise self.unsupported("VALUES", f"a row of VALUES has {len(row)} values for {len(variables)} "
                                       "variables", at)
            out.append(tuple(None if _undef(x) else self._values_term(x, at) for x in row))
        if len(out) > MAX_BRANCHES:
            raise self.unsupported("VALUES", f"VALUES has {len(out)} rows; at most {MAX_BRANCHES} are joined "
                                   "(each row is a branch of the query)", at)
        return variables, out

    def _values_term(self, x, at: int | None):
        """A value of a VALUES row (rdflib has resolved its names and literals) as a model term."""
        if not isinstance(x, (URIRef, RDFLiteral)) or isinstance(x, Variable):
            raise self.unsupported("VALUES", f"VALUES holds IRIs, literals and UNDEF, not {x}", at)
        return self.term(x)

    def _join_values(self, branches: list[Branch], data: CompValue, at: int | None) -> list[Branch]:
        """The join of ``branches`` with the rows of VALUES block ``data`` (one branch per branch and row)."""
        variables, rows = self._values_rows(data, at)
        self.in_scope.update(variables)
        out: list[Branch] = []
        for b in branches:
            bound = b.bound_vars()
            for row in rows:
                filters, binds = list(b.filters), list(b.binds)
                for v, value in zip(variables, row):
                    if value is None:
                        continue
                    if v in bound:
                        filters.append(Comparison("=", Call("sameTerm", (v, value)), TRUE))
                    else:
                        binds.append((v, value))
                out.append(replace(b, filters=tuple(filters), binds=tuple(binds)))
            self._limit(out, at)
        return out


def _undef(x) -> bool:
    return isinstance(x, str) and not isinstance(x, (URIRef, RDFLiteral)) and x.upper() == "UNDEF"
