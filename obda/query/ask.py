"""ASK (SPARQL 1.1 §16.3): ``SELECT DISTINCT (true AS ?boolean)`` over its pattern (docs/semantics.md, "ASK").

A mixin of the tree walk (:mod:`obda.query.walk`), which provides ``ts``, ``_rename``, ``_fresh_column``,
``_cut_keyword`` and ``select_binds``.  An ASK of an aggregate subquery with FILTERs is an aggregate query whose
answer is whether a group passes (:mod:`obda.query.aggregate_subquery`); it takes no ``?boolean`` column here.
"""

from __future__ import annotations

from rdflib.plugins.sparql.parserutils import CompValue
from rdflib.term import Literal as RDFLiteral

from obda.model.query import ASK_COLUMN, Var
from obda.query.locations import Located
from obda.query.normal_forms import Branch


class AskForm(Located):
    """ASK's modifiers and its answer column."""

    def _ask_modifiers(self, q: CompValue, where_close: int) -> None:
        """ASK takes no solution modifier: its answer is one boolean, not a table to group, order or cut."""
        for present, words in ((q.groupby, "GROUP BY"), (q.having, "HAVING"), (q.orderby, "ORDER BY")):
            if present:
                raise self._not_in_ask(words, self.ts.find_words(words, where_close))
        if q.limitoffset:
            raise self._not_in_ask(*self._cut_keyword(q, where_close))

    def _not_in_ask(self, kw: str, i: int | None):
        return self.unsupported(kw, f"{kw} is not supported in an ASK query: its answer is one boolean, true once "
                                "the pattern has a solution; write a SELECT query", i)

    def _ask_column(self, branches: list[Branch], ask_i: int | None) -> list[Branch]:
        """ASK's answer column ``?boolean``, true in every solution: a pattern variable of that name (never an
        answer of an ASK) is renamed out of its way first."""
        if any(Var(ASK_COLUMN) in b.term_vars() for b in branches) or Var(ASK_COLUMN) in self.time_vars:
            branches = self._rename(branches, {ASK_COLUMN: (self._fresh_column(ASK_COLUMN), ask_i)})
        self.select_binds.append((ASK_COLUMN, RDFLiteral(True), None))
        return branches
