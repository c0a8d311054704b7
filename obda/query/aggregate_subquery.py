"""An aggregate subquery filtered by its query: ``SELECT … WHERE { { SELECT … (AGG(…) AS ?a) … GROUP BY … } FILTER(…) }``.

A mixin of the tree walk (:mod:`obda.query.walk`).  SPARQL 1.1 §18.2.1 evaluates the subquery on its own: its
solutions are its groups, one per group that HAVING keeps, each binding the grouping variables it selects and
its ``(expression AS ?a)`` items.  A query whose WHERE clause is that subquery and FILTERs only keeps the groups
whose row passes the FILTERs, and selects some of the row's columns.  That is the subquery with the FILTERs
added to its HAVING — each FILTER's ``?a`` replaced by the expression it names (HAVING is evaluated per group
before the SELECT items are, SPARQL 1.1 §18.2.4.1, so it reads the aggregates, never their names) — and with
the outer SELECT's columns.  So the query becomes an aggregate query of its own, with the verdicts and
executors of the rest of obda: a FILTER on an aggregate over a stream is a HAVING over a stream.

An ``ASK`` of that shape is true when some group passes: over static data only, its table is one row, ``false``
when no group passes.  Over streams an ASK of an aggregate is refused (a group passing now may fail later, so
no ``true`` is final), located.

What else joins the subquery's solutions (a triple pattern, another subquery, OPTIONAL) needs the groups as a
table of their own, and stays refused by :mod:`obda.query.subselect`.
"""

from __future__ import annotations

from pyparsing import ParseResults
from rdflib.plugins.sparql.parserutils import CompValue
from rdflib.term import Variable

from obda.query.expressions import aggregate_name, tree_nodes
from obda.query.locations import Located


def has_aggregates(sub: CompValue) -> bool:
    """Whether a SELECT groups or aggregates: ``GROUP BY``, ``HAVING`` or an aggregate among its items."""
    return bool(sub.groupby or sub.having or any(item.evar is not None and aggregate_name(item["expr"])
                                                 for item in sub.projection or []))


def _reads_pattern(expr) -> bool:
    """Whether a FILTER expression holds ``[NOT] EXISTS`` (a pattern of its own, not a condition on a group)."""
    return any(isinstance(n, CompValue) and n.name in ("Builtin_EXISTS", "Builtin_NOTEXISTS") for n in tree_nodes(expr))


def _substituted(node, names: dict[str, object]):
    """``node`` (an rdflib expression tree) with each variable of ``names`` replaced by its expression."""
    if isinstance(node, Variable):
        return names.get(str(node), node)
    if isinstance(node, CompValue):
        out = CompValue(node.name)
        for k, v in node.items():
            out[k] = _substituted(v, names)
        return out
    if isinstance(node, ParseResults):
        return ParseResults([_substituted(v, names) for v in node])
    if isinstance(node, list):
        return [_substituted(v, names) for v in node]
    return node


def _reads_graph(sub: CompValue) -> bool:
    """Whether a subquery's pattern has a ``GRAPH`` (reads a stream)."""
    return any(isinstance(n, CompValue) and n.name == "GraphGraphPattern" for n in tree_nodes(sub.where))


class AggregateSubqueries(Located):
    """The hoisting of an aggregate subquery for the tree walk (which provides ``ts``, ``_filter_end``)."""

    # the FILTERs moved into HAVING: (their expression over the subquery's aggregates, first token, last token)
    hoisted_filters: list[tuple[object, int | None, int]]

    def _hoisted_aggregate(self, q: CompValue, ask: bool, where_open: int | None, where_close: int):
        """None, or ``(query, select token, WHERE '{' token, its '}' token)``: the aggregate query of a WHERE
        clause that is an aggregate subquery and FILTERs, with the subquery's tokens."""
        self.hoisted_filters = []
        where = q.where
        if where is None or where_open is None:
            return None
        if where.name == "SubSelect":
            sub, filters = where, []
        else:
            subs = [p for p in where.part or [] if p.name == "GroupOrUnionGraphPattern" and len(p.graph) == 1
                    and p.graph[0].name == "SubSelect"]
            filters = [p for p in where.part or [] if p.name == "Filter"]
            if len(subs) != 1 or len(subs) + len(filters) != len(where.part or []):
                return None
            sub = subs[0].graph[0]
        if not has_aggregates(sub) or any(_reads_pattern(f["expr"]) for f in filters):
            return None
        sub_open = where_open if where.name == "SubSelect" else self.ts.find_punct("{", where_open + 1, where_close)
        sub_close = self.ts.matching(sub_open)
        select_i = self.ts.find_word("SELECT", sub_open, sub_close)
        inner_open = self.ts.find_punct("{", (select_i or sub_open) + 1, sub_close)
        inner_close = self.ts.matching(inner_open) if inner_open is not None else sub_close
        self._inner_modifiers(sub, inner_close, sub_close)
        if q.valuesClause:
            raise self.unsupported("VALUES", "VALUES after the WHERE clause of an aggregate subquery is not supported; "
                                   "put it inside the subquery's WHERE", self.ts.find_word("VALUES", where_close))

        items = {str(it["var"] if it.evar is None else it.evar): it for it in sub.projection or []}
        kept = list(sub.projection or [])
        if q.projection and not ask:
            kept = []
            for item in q.projection:
                name = str(item["var"] if item.evar is None else item.evar)
                at = self.ts.find_var(name, 0, where_open)
                if item.evar is not None:
                    raise self.unsupported("SELECT expression over an aggregate subquery", f"(… AS ?{name}): compute "
                                           "the value inside the aggregate subquery, as one of its SELECT items", at)
                if name not in items:
                    raise self.unsupported("variable the subquery does not select", f"?{name} is not selected by the "
                                           "aggregate subquery, the only pattern of the WHERE clause", at)
                kept.append(items[name])
        if q.modifier == "DISTINCT":
            self._distinct_groups(sub, kept, self.ts.find_word("DISTINCT", 0, where_open))
        if sub.modifier == "DISTINCT":  # the groups' rows as a set: the same rule, inside
            self._distinct_groups(sub, list(sub.projection or []), self.ts.find_word("DISTINCT", sub_open, sub_close))

        starts = [i for i in range(where_open + 1, where_close)
                  if self.ts[i].is_word("FILTER") and not sub_open <= i <= sub_close]
        defined = {n: (it["var"] if it.evar is None else it["expr"]) for n, it in items.items()}
        for f, at in zip(filters, starts):
            for node in tree_nodes(f["expr"]):
                if isinstance(node, Variable) and str(node) not in items:
                    raise self.unsupported("FILTER on a variable the subquery does not select",
                                           f"FILTER reads {node.n3()}, which the aggregate subquery does not select "
                                           "(the WHERE clause binds nothing else)", self.ts.find_var(str(node), at))
            self.hoisted_filters.append((_substituted(f["expr"], defined), at, self._filter_end(at)))
        if ask and _reads_graph(sub):
            raise self.unsupported("ASK of an aggregate over streams", "an ASK of an aggregate subquery over streams "
                                   "is not supported: a group passing now may fail later, so no answer is final; "
                                   "write SELECT, whose changelog says when each group passes",
                                   self.ts.find_word("ASK"))
        hoisted = CompValue("SelectQuery", projection=kept, where=sub.where, groupby=sub.groupby, having=sub.having,
                            orderby=q.orderby, limitoffset=q.limitoffset, datasetClause=q.datasetClause)
        return hoisted, select_i, inner_open, inner_close

    def _inner_modifiers(self, sub: CompValue, inner_close: int, sub_close: int) -> None:
        """What the subquery may not have: LIMIT / OFFSET (a cut of its groups), REDUCED, a trailing VALUES."""
        lo = sub.limitoffset
        if lo is not None and (dict.get(lo, "limit") is not None or dict.get(lo, "offset") is not None):
            kw = "LIMIT" if dict.get(lo, "limit") is not None else "OFFSET"
            raise self.unsupported(f"{kw} in a subquery", f"{kw} in an aggregate subquery keeps an arbitrary part "
                                   "of its groups; not supported: filter the groups with HAVING, or cut the outer "
                                   "query", self.ts.find_word(kw, inner_close, sub_close))
        if sub.modifier == "REDUCED":
            raise self.unsupported("REDUCED", "SELECT REDUCED is not supported; use SELECT or SELECT DISTINCT",
                                   self.ts.find_word("REDUCED", 0, sub_close))
        if sub.valuesClause:
            raise self.unsupported("VALUES", "VALUES after a subquery is not supported; put it inside the "
                                   "subquery's WHERE", self.ts.find_word("VALUES", inner_close, sub_close))

    def _distinct_groups(self, sub: CompValue, kept: list, at: int | None) -> None:
        """The outer SELECT DISTINCT changes nothing when it keeps every grouping variable (each group one row);
        else two groups could give equal rows, a set inside the groups' bag, which is refused."""
        selected = {str(it["var"]) for it in kept if it.evar is None}
        for g in (sub.groupby.condition if sub.groupby else []):
            g = g["var"] if isinstance(g, CompValue) and g.name == "GroupAs" and dict.get(g, "var") is not None else g
            if not isinstance(g, Variable) or str(g) not in selected:
                raise self.unsupported("DISTINCT over an aggregate subquery", "SELECT DISTINCT over an aggregate "
                                       "subquery must select every grouping variable (each group is then one row); "
                                       "select them, or drop DISTINCT", at)
