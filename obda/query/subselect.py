"""Subqueries: ``{ SELECT ?x ?y WHERE { P } }`` inside a group, read as P with its other variables made fresh.

A mixin of the tree walk (:mod:`obda.query.walk`).  SPARQL 1.1 §18.2.1 evaluates a subquery on its own and
joins its solutions, projected on its SELECT variables, with the group (bag projection: duplicates kept).  The
same solutions come from inlining P with every variable it does not project renamed to a fresh blank-node
variable (a blank node of the query text is an existential variable, never projected): the projected ones join
the group, the others are P's own.  So a subquery becomes branches like any group, with the verdicts and
executors of the rest of obda.

What cannot be inlined is refused, located: aggregates and ``GROUP BY`` (a subquery's groups; as the whole WHERE
clause, with FILTERs only, the query is an aggregate query of its own, :mod:`obda.query.aggregate_subquery`), ``LIMIT`` and
``OFFSET`` (a cut of a bag), ``SELECT DISTINCT`` in a query without DISTINCT (a set inside a bag; with the outer
DISTINCT, the inner one changes nothing and is dropped), ``(expression AS ?v)`` items other than a rename, and
``VALUES`` after the subquery.  ``ORDER BY`` alone orders nothing a join keeps, and is dropped.
"""

from __future__ import annotations

from rdflib.plugins.sparql.parserutils import CompValue
from rdflib.term import Variable

from obda.model.query import Var
from obda.query.aggregate_subquery import has_aggregates
from obda.query.expressions import aggregate_name, unwrap
from obda.query.locations import Located
from obda.query.normal_forms import Branch


class Subqueries(Located):
    """Nested SELECTs for the tree walk (which provides ``_group``, ``_fresh_bnode``, ``ts``, ``pos``)."""

    def _subselect(self, sub: CompValue, time: Var | None, open_i: int) -> list[Branch]:
        """The branches of ``{ SELECT … }`` whose '{' is token ``open_i``; leaves the cursor after its '}'."""
        close_i = self.ts.matching(open_i)
        select_i = self.ts.find_word("SELECT", open_i, close_i)
        where_open = self.ts.find_punct("{", (select_i if select_i is not None else open_i) + 1, close_i)
        self._subselect_modifiers(sub, select_i, where_open, close_i)
        renames: dict[Var, Var] = {}
        projected: list[Var] | None = None  # None: SELECT *
        if sub.projection:
            projected = []
            for item in sub.projection:
                if item.evar is None:
                    projected.append(Var(str(item["var"])))
                    continue
                source = unwrap(item["expr"])
                at = self.ts.find_var(str(item["evar"]), select_i or open_i, where_open)
                if not isinstance(source, Variable) or aggregate_name(item["expr"]):
                    raise self.unsupported("subquery", "a subquery selects variables (and renames them, (?x AS "
                                           "?y)); compute values with BIND inside it, and aggregates in the outer "
                                           "query", at)
                renames[Var(str(source))] = Var(str(item["evar"]))
                projected.append(Var(str(item["evar"])))
        scope = set(self.in_scope)
        inner = self._group(sub["where"], time, where_open)
        self.in_scope = scope
        out: list[Branch] = []
        for b in inner:
            keep = set(projected) if projected is not None else b.bound_vars()
            mapping = {}
            for v in sorted(b.bound_vars() | b.to_cq().variables):
                if v in renames:
                    mapping[v] = renames[v]
                elif v not in keep and not v.bnode:
                    mapping[v] = self._fresh_bnode()
                    if v in self.time_vars:  # a GRAPH variable the subquery does not project: still a time
                        mapping[v] = Var(mapping[v].name)
                        self.time_vars = self.time_vars | {mapping[v]}
            out.append(Branch.of(b.to_cq().substitute(mapping)) if mapping else b)
        self.in_scope.update(v for b in out for v in b.bound_vars() if not v.bnode)
        self.pos = close_i + 1
        return out

    def _subselect_modifiers(self, sub: CompValue, select_i: int | None, where_open: int | None, close_i: int) -> None:
        at = select_i
        if has_aggregates(sub):
            raise self.unsupported("subquery with aggregates", "an aggregate over an aggregate subquery's groups is "
                                   "not supported" if self.aggregated else "a subquery with GROUP BY or aggregates "
                                   "is supported as the whole WHERE clause, with FILTERs (they filter its groups); "
                                   "joined with other patterns it is not: aggregate in the outer query", at)
        lo = sub.limitoffset
        if lo is not None and (dict.get(lo, "limit") is not None or dict.get(lo, "offset") is not None):
            kw = "LIMIT" if dict.get(lo, "limit") is not None else "OFFSET"
            raise self.unsupported(f"{kw} in a subquery", f"{kw} in a subquery keeps an arbitrary part of its "
                                   "solutions; not supported", self.ts.find_word(kw, where_open or 0, close_i))
        if sub.modifier == "REDUCED":
            raise self.unsupported("REDUCED", "SELECT REDUCED is not supported; use SELECT or SELECT DISTINCT",
                                   self.ts.find_word("REDUCED", at or 0, close_i))
        if sub.modifier == "DISTINCT" and not self.distinct:
            raise self.unsupported("DISTINCT in a subquery", "SELECT DISTINCT in a subquery of a query without "
                                   "DISTINCT (a set inside a bag) is not supported; make the outer query SELECT "
                                   "DISTINCT, or drop the inner DISTINCT", self.ts.find_word("DISTINCT", at or 0, close_i))
        if sub.valuesClause:
            raise self.unsupported("VALUES", "VALUES after a subquery is not supported; put it inside the "
                                   "subquery's WHERE", self.ts.find_word("VALUES", where_open or 0, close_i))
