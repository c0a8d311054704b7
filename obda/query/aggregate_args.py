"""Aggregates of an expression (``AVG(?v * 1.8 + 32)``, ``SUM(?price * ?qty)``, ``COUNT(DISTINCT STR(?x))``).

A mixin of the tree walk (:mod:`obda.query.walk`).  SPARQL 1.1 §18.5 evaluates an aggregate's expression on
each solution of the group, then aggregates the values.  obda reads such an aggregate as a BIND at the end of
the WHERE clause into a fresh variable, which the aggregate then reads like any variable:

    SELECT ?s (AVG(?v * 1.8 + 32) AS ?f) WHERE { P } GROUP BY ?s
    ≡ SELECT ?s (AVG(?agg1) AS ?f) WHERE { P BIND(?v * 1.8 + 32 AS ?agg1) } GROUP BY ?s

An expression that is an error for a solution leaves the fresh variable unbound there, as SPARQL's aggregate
sees an error: ``COUNT`` skips it, and the aggregates an error makes an error (``SUM``, ``AVG``, ``MIN``…) are
refused where that can happen, as for a variable (:meth:`~obda.query.solutions.Solutions._aggregation`).  The
same expression written in the SELECT, in HAVING and in ORDER BY is one variable.  The rewriting changes
rdflib's parse tree of this one conversion in place, before the SELECT items are read.
"""

from __future__ import annotations

from dataclasses import replace

from rdflib.plugins.sparql.parserutils import CompValue
from rdflib.term import Variable

from obda.model.query import Aggregate, Arithmetic, Comparison, Connective
from obda.query.expressions import AGGREGATE_WORDS, aggregate_name, unwrap
from obda.query.locations import Located


class AggregateArguments(Located):
    """Hoists the expressions aggregates read into BINDs (reads the walk's ``ts``, ``select_binds``, ``taken``)."""

    def _aggregate_binds(self, q: CompValue, select_i: int | None, where_open: int | None, where_close: int) -> None:
        """Give every aggregate of an expression in the SELECT, HAVING and ORDER BY a fresh variable, computed by
        a BIND at the end of the WHERE (``select_binds``); ``aggregate_args`` says, per fresh name, the text of its
        expression and the token of its aggregate, for the messages that would otherwise name the variable."""
        hoisted: dict[str, Variable] = {}
        having_i = self.ts.find_word("HAVING", where_close)
        order_i = self.ts.find_words("ORDER BY", where_close)
        end = len(self.ts)
        clauses = [([item["expr"] for item in q.projection or [] if item.evar is not None],
                    select_i or 0, where_open if where_open is not None else end)]
        if q.having:
            clauses.append((list(q.having.condition), having_i or where_close, order_i or end))
        if q.orderby:
            clauses.append(([c for c in q.orderby.condition], order_i or where_close, end))
        for exprs, start, stop in clauses:
            cursor = [start]
            for e in exprs:
                self._hoist(e, hoisted, cursor, stop)

    def _hoist(self, e, hoisted: dict[str, Variable], cursor: list[int], stop: int) -> None:
        """The aggregates inside ``e``, in text order (``cursor``: the token to search their name from)."""
        if isinstance(e, list):
            for x in e:
                self._hoist(x, hoisted, cursor, stop)
            return
        if not isinstance(e, CompValue):
            return
        word = AGGREGATE_WORDS.get(e.name)
        if word is None:
            for v in e.values():
                self._hoist(v, hoisted, cursor, stop)
            return
        at = self.ts.find_word(word, cursor[0], stop)
        cursor[0] = (at if at is not None else cursor[0]) + 1
        arg = e.get("vars")
        if arg is None or arg == "*" or isinstance(unwrap(arg), Variable):
            return
        inner = aggregate_name(arg)
        if inner:
            raise self.unsupported("aggregate in an aggregate", f"{word} of an expression that holds {inner}(…): an "
                                   "aggregate reads the values of single solutions, not of a group", at)
        key = repr(unwrap(arg))
        if key not in hoisted:
            name = self._fresh_column("agg")
            hoisted[key] = Variable(name)
            self.select_binds.append((name, arg, at))
            self.aggregate_args[name] = (f"{word}({self._argument_text(at)})", at)
        e["vars"] = hoisted[key]
        if at is not None:  # the aggregate's own brackets: its name is found once
            paren = self.ts.find_punct("(", at)
            if paren is not None:
                cursor[0] = self.ts.matching(paren) + 1

    def _argument_text(self, at: int | None) -> str:
        """The text between the brackets of the aggregate whose name is token ``at`` (``DISTINCT`` included)."""
        if at is None:
            return "…"
        paren = self.ts.find_punct("(", at)
        if paren is None:
            return "…"
        close = self.ts.matching(paren)
        return " ".join(self.ts.text[self.ts[paren + 1].offset:self.ts[close].offset].split())

    def _with_written(self, e):
        """``e`` (a SELECT item's or HAVING's value expression) with each aggregate of a hoisted expression knowing
        how the query wrote it (:attr:`~obda.model.values.Aggregate.written`), for the messages of later stages."""
        if isinstance(e, Aggregate):
            hoisted = self.aggregate_args.get(e.argument.name) if e.argument is not None else None
            return e if hoisted is None else replace(e, written=(hoisted[0], _argument_of(hoisted[0])))
        if isinstance(e, Arithmetic):
            return replace(e, left=self._with_written(e.left), right=self._with_written(e.right))
        if isinstance(e, Comparison):
            return replace(e, left=self._with_written(e.left), right=self._with_written(e.right))
        if isinstance(e, Connective):
            return replace(e, parts=tuple(self._with_written(p) for p in e.parts))
        return e


def _argument_of(call: str) -> str:
    """``AVG(DISTINCT ?v * 2)`` → ``?v * 2``; ``GROUP_CONCAT(STR(?x); SEPARATOR=",")`` → ``STR(?x)``."""
    arg = call[call.index("(") + 1:-1]
    if arg[:9].upper() == "DISTINCT ":
        arg = arg[9:]
    if ";" in arg and "SEPARATOR" in arg.upper():
        arg = arg[:arg.rindex(";")].rstrip()
    return arg
