"""Normal forms of the pattern: UNION and the ``||`` of FILTERs multiplied out into conjunctive branches.

A branch (:class:`Branch`) is one CQ under construction; a group's FILTERs are converted to disjunctive
normal form when read (exclusive alternatives under bag semantics) and attached to every branch of the group
once the group is known (SPARQL filter scope), each alternative a branch of its own, up to
:data:`MAX_BRANCHES`.  The ``NOW()`` comparisons of a FILTER are taken out of it as the query's window.
This is a mixin of the tree walk (:mod:`obda.query.walk`), whose state it reads: ``ts``, ``pos``,
``distinct``, ``time_vars``, ``windows`` and ``term``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Iterable

from rdflib.plugins.sparql.parserutils import CompValue

from obda.model.query import CQ, Atom, Comparison, Exists, Shifted, Var, Window, value_variables
from obda.query.expressions import FilterProblem, Hint, expression_variables, time_comparison_problem
from obda.query.now_windows import conjunction, conjuncts, has_now, window_condition
from obda.query import unbound
from obda.query.dnf import to_dnf, to_exclusive_dnf
from obda.query.functions import time_function_problem
from obda.query.locations import Located

# Upper bound on the number of CQs of the disjunctive normal form: UNION and ||
# multiply out, so a deeply nested query can explode; fail clearly instead.
MAX_BRANCHES = 10_000


@dataclass(frozen=True)
class Branch:
    """One conjunctive branch under construction: atoms and comparisons in text order."""

    atoms: tuple[Atom, ...] = ()
    filters: tuple[Comparison, ...] = ()
    binds: tuple[tuple[Var, object], ...] = ()  # BIND(expression AS ?v), in text order
    checks: tuple[Exists, ...] = ()  # OPTIONAL's anti-join, MINUS, FILTER [NOT] EXISTS (obda.query.negation)

    def join(self, other: "Branch") -> "Branch":
        return Branch(self.atoms + other.atoms, self.filters + other.filters, self.binds + other.binds,
                      self.checks + other.checks)

    def term_vars(self) -> set[Var]:
        return {t for a in self.atoms for t in a.terms if isinstance(t, Var)} | {v for v, _ in self.binds}

    def bound_vars(self) -> set[Var]:
        """The variables a solution of this branch binds: its terms', its BINDs' and its time variables."""
        return self.term_vars() | {a.time for a in self.atoms if a.time is not None}

    def to_cq(self) -> CQ:
        return CQ(_dedup(self.atoms), _dedup(self.filters), self.binds, _dedup(self.checks))

    @staticmethod
    def of(cq: CQ) -> "Branch":
        """The branch of a CQ (after a substitution: a rename, a subquery's fresh variables)."""
        return Branch(cq.atoms, cq.filters, cq.binds, cq.checks)


def _in_branch(alternative: tuple[Comparison, ...], bound: frozenset[Var]) -> tuple[Comparison, ...] | None:
    """An alternative of a FILTER's DNF in a branch binding ``bound``: None where it is never true there."""
    out = []
    for c in alternative:
        c = unbound.leaf(c, bound)
        if c is unbound.ERROR or c is False:
            return None
        if c is not True:
            out.append(c)
    return tuple(out)


def _dedup(items: Iterable) -> tuple:
    """Drop repeated items, keeping the first occurrence (set semantics of a BGP's triples)."""
    return tuple(dict.fromkeys(items))


def product(left: list[Branch], right: list[Branch]) -> list[Branch]:
    """Join of two unions of branches (distributes the join over the unions)."""
    return [a.join(b) for a in left for b in right]


@dataclass
class PendingFilter:
    """A FILTER of a group, checked once the whole group is known (SPARQL filter scope)."""

    expr: object
    start: int  # token index of the FILTER keyword
    end: int  # token index of the last token of the FILTER
    dnf: list[tuple[Comparison, ...]]
    # SELECT DISTINCT with a time moved by a duration: refused where the FILTER joins (not where it is the window
    # of a [NOT] EXISTS, rules A3, A4), once that is known
    interval: Exception | None = None


class NormalForms(Located):
    """FILTERs and the DNF bound, for the tree walk."""

    def _bound_in(self, b: Branch, var: Var, expr, bound: set, start: int | None, end: int | None) -> Branch:
        """Branch ``b`` with ``BIND(expr AS var)`` (a SELECT expression too): a variable ``b`` leaves unbound read as
        SPARQL reads it (``BOUND`` false, ``COALESCE`` skips it, ``IF`` folded); where the value is then an error,
        ``var`` stays unbound in ``b``."""
        missing = frozenset(v for v in value_variables(expr) if v not in bound)
        try:
            value = unbound.fold(expr, missing) if missing else expr
        except FilterProblem as p:
            raise self.problem(p, start, end) from None
        if value == unbound.ERROR or unbound.reads(value, missing):
            return b
        return replace(b, binds=b.binds + ((var, value),))

    def _dnf(self, expr) -> list[tuple[Comparison, ...]]:
        """A FILTER expression's alternatives: exclusive under bag semantics (one answer per solution), sets need
        not be."""
        return (to_dnf if self.distinct else to_exclusive_dnf)(expr, self.term, MAX_BRANCHES)

    def _limit(self, branches: list[Branch], at: int) -> list[Branch]:
        """Fail when the DNF grows beyond MAX_BRANCHES conjunctive queries."""
        if len(branches) > MAX_BRANCHES:
            raise self.unsupported(
                "too many UNION / || alternatives",
                f"the query expands to more than {MAX_BRANCHES} conjunctive queries (UNION and || multiply out); "
                "simplify the nesting of UNION and ||",
                at,
            )
        return branches

    def _filter(self, part: CompValue, close_i: int) -> PendingFilter:
        """Record a FILTER: convert it to DNF now (errors in text order), check scope later."""
        start = self.ts.find_word("FILTER", self.pos, close_i)
        start = self.pos if start is None else start
        end = self._filter_end(start)
        self.pos = end + 1
        expr = part["expr"]
        if has_now(expr):
            expr = self._take_windows(expr, start, end)
            if expr is None:
                return None
        interval = None
        try:
            dnf = self._dnf(expr)
            for conj in dnf:
                for c in conj:
                    problem = time_function_problem(c, self.time_vars) or time_comparison_problem(c, self.time_vars)
                    if problem:
                        raise problem
                    if self.distinct and interval is None and isinstance(
                            c.right if isinstance(c.right, Shifted) else c.left, Shifted):
                        interval = self.problem(FilterProblem(
                            "interval join", "SELECT DISTINCT with an interval join (a time variable moved by a "
                            "duration) is not supported yet; use SELECT (each answer once per solution) or an "
                            "aggregate", Hint("word", "FILTER")), start, end)
        except FilterProblem as p:
            raise self.problem(p, start, end) from None
        return PendingFilter(expr, start, end, dnf, interval)

    def _take_windows(self, expr, start: int, end: int):
        """Remove the ``NOW()`` comparisons of a FILTER (its top-level ``&&`` operands) into ``self.windows``;
        the rest of the FILTER, or None."""
        keep = []
        for c in conjuncts(expr):
            if not has_now(c):
                keep.append(c)
                continue
            try:
                op, var, offset = window_condition(c, self.term)
                if var not in self.time_vars:
                    raise FilterProblem("NOW()", f"{var} is compared with NOW(), but only a time variable (bound by "
                                        "GRAPH ?t) can be", Hint("var", var.name))
                if op in ("<", "<=") and offset >= 0:
                    continue  # a closed timestamp is never after NOW(): always true
                if op not in (">", ">="):
                    raise FilterProblem("NOW()", f"{var} {op} NOW() … is not a window: a window keeps the recent "
                                        "solutions, FILTER(?t > NOW() - \"PT10M\"^^xsd:dayTimeDuration) (solutions older "
                                        "than a duration would be a delay, which is not supported)", Hint("word", "NOW"))
                width = -offset
                if width < 0 or (width == 0 and op == ">"):
                    raise FilterProblem("NOW()", f"{var} {op} NOW() + … is never true: a closed timestamp is never "
                                        "after NOW()", Hint("word", "NOW"))
            except FilterProblem as p:
                raise self.problem(p, start, end) from None
            self.windows.append((Window(var, width, op == ">="), self._locate_hint(Hint("word", "NOW"), start, end)))
        return conjunction(keep)

    def _window(self, aggregate: bool) -> Window | None:
        """The query's window: the narrowest of its NOW() comparisons, on its one time variable."""
        if not self.windows:
            return None
        window, at = min(self.windows, key=lambda w: (w[0].width, w[0].inclusive))
        for w, i in self.windows:
            if w.variable != window.variable:
                raise self.unsupported("NOW()", f"windows on two time variables ({window.variable}, {w.variable}) are "
                                       "not supported; a window is on the one time variable of an aggregate query", i)
        if len(self.time_vars) > 1:
            names = ", ".join(sorted(map(str, self.time_vars)))
            raise self.unsupported("NOW()", f"a window over a query with several time variables ({names}) is not "
                                   "supported yet (NOW() is then the latest of them: an interval join); window a query over one GRAPH ?t", at)
        if not aggregate:
            # A query without aggregates emits each answer once, at its own timestamp: ?t = NOW() is in the
            # window when the answer enters, so the window removes nothing from the (append-only) output.
            return None
        return window

    def _apply_filters(self, branches: list[Branch], filters: list[PendingFilter], time: Var | None) -> list[Branch]:
        """Attach a group's FILTERs to every branch of the group (SPARQL filter scope).

        A FILTER sees only the variables bound inside its group — not those of
        enclosing groups, and not the variable of the GRAPH the group belongs to.
        A variable bound in no branch is an error; an alternative of the DNF
        that uses a variable unbound in some branch is never true there and is
        dropped for that branch.
        """
        self.in_scope.update(v for b in branches for v in b.bound_vars())
        for f in filters:
            if f.interval is not None:
                raise f.interval
        if not filters:
            return branches

        def bound(b: Branch) -> set[Var]:
            return b.term_vars() | {a.time for a in b.atoms if a.time is not None and a.time != time}

        bound_sets = [bound(b) for b in branches]
        in_group = set().union(*bound_sets) if bound_sets else set()
        for f in filters:
            for name in expression_variables(f.expr):
                if Var(name) not in in_group:
                    hint = ""
                    if time is not None and name == time.name:
                        hint = f" (?{name} is bound by the enclosing GRAPH only outside it: move the FILTER after the GRAPH block)"
                    raise self.unsupported(
                        "FILTER on unbound variable",
                        f"FILTER uses ?{name}, which is not bound in its group {{ ... }}, so the FILTER is never "
                        f"true{hint}",
                        self._locate_hint(Hint("var", name), f.start, f.end),
                    )
        out: list[Branch] = []
        for b, vs in zip(branches, bound_sets):
            alternatives: list[tuple[Comparison, ...]] = [()]
            for f in filters:
                try:
                    if self.distinct:  # the DNF, each alternative in this branch (folded where it leaves vars unbound)
                        here = [alt for alt in (_in_branch(c, frozenset(vs)) for c in f.dnf) if alt is not None]
                    else:  # exclusive alternatives, an error (a comparison over an unbound variable) not true
                        here = to_exclusive_dnf(f.expr, self.term, MAX_BRANCHES, bound=vs)
                except FilterProblem as p:
                    raise self.problem(p, f.start, f.end) from None
                alternatives = [a + c for a in alternatives for c in here]
                self._limit(alternatives, f.start)
            out.extend(replace(b, filters=b.filters + a) for a in alternatives)
            self._limit(out, filters[0].start)
        if not out:
            f = filters[0]
            raise self.unsupported(
                "FILTER on unbound variable",
                "the FILTERs of this group are never true: no UNION alternative binds all the variables of any "
                "alternative of the FILTER",
                f.start,
            )
        return out
