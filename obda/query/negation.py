"""OPTIONAL, MINUS and FILTER [NOT] EXISTS: patterns whose solutions decide about others (docs/semantics.md).

A mixin of the tree walk (:mod:`obda.query.walk`).  Each construct is multiplied out into the branches the rest
of obda already runs, plus *checks* (:class:`~obda.model.query.Exists`) on them (SPARQL 1.1 §18.5):

* ``P OPTIONAL { Q }`` — LeftJoin(P, Q) = Join(P, Q) ∪ Diff(P, Q): for every branch ``p`` of P, the branches
  ``p ⋈ q`` for every branch ``q`` of Q, and ``p`` itself with one check per shared-variable set: *no*
  solution of those ``q`` agrees with it on the variables both bind (``q``'s other variables stay unbound).
* ``P MINUS { Q }`` — ``p`` with the same checks; a ``q`` sharing no variable with ``p`` removes nothing.
* ``FILTER NOT EXISTS { Q }`` / ``FILTER EXISTS { Q }`` — on every branch of the group (filter scope), the
  check over the variables ``Q`` shares with the branch.

The other pattern ``Q`` is read as any group.  Over static data its answers do not change while the query
runs, so a check is decided once per row (docs/analysis.md, rule A1).  Over stream data it is in the timestamp
of the branch it is compared with — every stream pattern of both in one ``GRAPH ?t``, ``?t`` shared (rule A2) —
or in a window of that timestamp's past, which its FILTER states (``?t2 >= ?t - d && ?t2 < ?t``: rule A3,
:mod:`obda.query.windows`); either is decided when the branch's timestamp closes.  A check is a query of its own
(``SELECT DISTINCT`` the shared variables, and the pattern's time for a window), rewritten and
unfolded as any query.
"""

from __future__ import annotations

from rdflib.plugins.sparql.parserutils import CompValue

from dataclasses import replace

from obda.model.query import CQ, FLIP, Comparison, Exists, Query, Shifted, Var
from obda.query.expressions import unwrap
from obda.query.locations import Located
from obda.query.normal_forms import Branch
from obda.query.windows import check_window

SAME_TIMESTAMP = ("over stream data runs within one timestamp only: the pattern it is compared with and its own "
                  "stream patterns in one GRAPH {time} (docs/semantics.md, rule A2); across timestamps its answers "
                  "would be final only once no later row can change them, which is not executed yet")


def exists_filter(expr) -> bool | None:
    """``True`` for ``FILTER NOT EXISTS { … }`` alone (in parentheses or not), ``False`` for ``FILTER EXISTS { … }``,
    else None."""
    name = getattr(unwrap(expr), "name", None)
    return {"Builtin_NOTEXISTS": True, "Builtin_EXISTS": False}.get(name)


class Negation(Located):
    """OPTIONAL, MINUS and [NOT] EXISTS for the tree walk (which provides ``_group``, ``ts``, ``pos``)."""

    def _other_pattern(self, gp: CompValue, time: Var | None, kw: str, at: int | None, close_i: int,
                       in_scope: bool, optional: tuple[frozenset, list] | None = None) -> list[Branch]:
        """The branches of the group after keyword ``kw`` (token ``at``); its variables join the scope of SELECT *
        only for OPTIONAL (``in_scope``); ``optional``: OPTIONAL's (``Converter._group``)."""
        open_i = self.ts.find_punct("{", (at if at is not None else self.pos) + 1, close_i)
        scope = set(self.in_scope)
        inner = self._group(gp, time, open_i, optional)
        if not in_scope:
            self.in_scope = scope
        times = {a.time for b in inner for a in b.atoms if a.time is not None}
        if len(times) > 1:
            raise self.unsupported(kw, f"{kw} " + SAME_TIMESTAMP.format(time="?t"), at)
        return inner

    def _check(self, group: list[Branch], shared: tuple[Var, ...], negated: bool, kw: str, at: int | None,
               p: Branch, window: list = (), compares: list = ()) -> Exists:
        """The check of ``p`` against ``group`` on ``shared``; a ``group`` over stream data must be in ``p``'s
        timestamp — every stream pattern of both in one ``GRAPH ?t``, ``?t`` shared (rule A2) — or in a window of
        it (``window``: the comparisons of the group's time with ``p``'s; rules A3–A6, :mod:`obda.query.windows`).
        ``compares``: its FILTER's comparisons of the group's variables with ``p``'s (``(pattern's, op, p's)``
        triples, with the FILTER's token), a correlated [NOT] EXISTS."""
        times = {a.time for b in group for a in b.atoms if a.time is not None}
        mine = {a.time for a in p.atoms if a.time is not None}
        span = None
        if window:
            span = check_window(self, window, times, mine, kw, at, negated)
            shared = tuple(v for v in shared if v != span.inner)
        elif times:
            (time,) = times
            if time not in shared or mine != times:
                raise self.unsupported(kw, f"{kw} " + SAME_TIMESTAMP.format(time=time), at)
        pairs = []
        for comparisons, token in compares:
            for c in comparisons:
                if c[2] not in p.bound_vars():
                    raise self.unsupported(f"FILTER in {kw}", f"the FILTER compares {c[0]} with {c[2]}, which neither "
                                           f"the {kw} pattern nor its group binds, so the FILTER is never true", token)
                pairs.append(c)
        compared = tuple(dict.fromkeys(v for v, _, _ in pairs if v not in shared))
        projection = shared + compared + ((span.inner,) if span else ())
        pattern = Query(projection=projection, branches=tuple(q.to_cq() for q in group), distinct=True,
                        location=self.loc(at))
        return Exists(pattern, shared, negated, construct=kw, location=self.loc(at), window=span,
                      compares=tuple(pairs))

    def _by_shared(self, p: Branch, inner: list[Branch]) -> dict[tuple[Var, ...], list[Branch]]:
        """The branches of the other pattern grouped by the variables each shares with ``p``."""
        bound = p.bound_vars()
        groups: dict[tuple[Var, ...], list[Branch]] = {}
        for q in inner:
            shared = tuple(sorted((q.bound_vars() & bound) - {v for v in q.bound_vars() if v.bnode}))
            groups.setdefault(shared, []).append(q)
        return groups

    def join_conditions(self, branches: list[Branch], filters: list, outer: frozenset, conditions: list | None,
                        window: list | None = None, compares: list | None = None) -> list:
        """An OPTIONAL's FILTERs: the parts (``&&`` operands) reading only the group's variables stay its filters
        (returned); the parts reading variables bound only before the OPTIONAL (``outer``) become the left join's
        condition (appended to ``conditions``); a part comparing the group's time with a time bound before it goes
        to ``window`` as its comparisons (rules A3–A6); a part reading both kinds otherwise is refused, located.
        A [NOT] EXISTS's (``conditions`` None; ``outer`` the query's time variables): the same, but a part reading
        only times bound outside it is refused, and a comparison of a variable bound inside with one that is not
        (neither a time) goes to ``compares`` (its group must bind that one: :meth:`_check`)."""
        from obda.query.expressions import expression_variables

        inside = set().union(*(b.bound_vars() for b in branches)) if branches else set()
        if conditions is None:
            outer = outer - inside
        kept = []
        for f in filters:
            e = unwrap(f.expr)
            parts = [e["expr"], *e["other"]] if getattr(e, "name", None) == "ConditionalAndExpression" else [f.expr]
            if all({Var(n) for n in expression_variables(x)} <= inside for x in parts):
                kept.append(f)
                continue
            for x in parts:
                names = {Var(n) for n in expression_variables(x)}
                if names <= inside:
                    kept.append(replace(f, expr=x, dnf=self._dnf_of(x, f)))
                elif (window is not None and names <= (outer & self.time_vars) | inside
                      and names & inside and names - inside and names & inside <= self.time_vars):
                    window.append((self._window_part(x, f), f.start))  # the pattern's time against the answer's
                elif compares is not None and names & inside and names - inside and not names & self.time_vars:
                    # a correlated comparison: of the EXISTS pattern with the answer, of the OPTIONAL's with the
                    # solution it extends (a correlated left join)
                    compares.append((self._compare_part(x, f, inside, "OPTIONAL" if conditions is not None else "EXISTS"),
                                     f.start))
                elif names <= outer and conditions is None:
                    raise self.unsupported(
                        "FILTER in NOT EXISTS", "a FILTER inside [NOT] EXISTS that reads only times bound outside it "
                        "is not supported; write that condition outside the EXISTS", f.start)
                elif names <= outer:
                    conditions.append(replace(f, expr=x, dnf=()))
                elif not names <= outer | inside:  # a variable bound on neither side: the scope error of the group
                    kept.append(replace(f, expr=x, dnf=self._dnf_of(x, f)))
                else:
                    raise self.unsupported(
                        "FILTER in OPTIONAL", "a FILTER operand inside OPTIONAL that reads a time variable and "
                        "variables of both sides of the OPTIONAL is supported as a window of times only (its GRAPH "
                        "time compared with the answer's, each moved by a duration at most); write it as && of parts "
                        "each reading one side", f.start)
        return kept

    def _window_part(self, x, f) -> tuple:
        """A FILTER part comparing two times (``?t2 >= ?t1 - "PT1H"^^xsd:dayTimeDuration``): its comparisons,
        one conjunction; anything else is refused, located."""
        from obda.model.query import Shifted

        alternatives = self._dnf_of(x, f)
        if len(alternatives) != 1 or not all(
                isinstance(t, (Var, Shifted)) and c.op != "!=" for c in alternatives[0] for t in (c.left, c.right)):
            raise self.unsupported(
                "FILTER in NOT EXISTS", "a FILTER inside [NOT] EXISTS (or OPTIONAL) that reads the time of the "
                "answer is supported as a window of times only: comparisons (&&) of the pattern's GRAPH time with "
                "the answer's, each moved by a duration at most", f.start)
        return alternatives[0]

    def _compare_part(self, x, f, inside: set, kw: str) -> list[tuple[Var, str, Var]]:
        """A FILTER part inside [NOT] EXISTS (or OPTIONAL) comparing the pattern's variables with the answer's
        (``FILTER(?v2 > ?v)``): its comparisons as ``(pattern's variable, op, answer's variable)``, one conjunction;
        anything else is refused, located."""
        alternatives = self._dnf_of(x, f)
        out = []
        for c in alternatives[0] if len(alternatives) == 1 else ():
            left, right = (c.left, c.right) if c.left in inside else (c.right, c.left)
            op = c.op if c.left in inside else FLIP[c.op]
            if c.not_true or not (isinstance(left, Var) and isinstance(right, Var)) or right in inside:
                break
            out.append((left, op, right))
        else:
            if out:
                return out
        if kw == "OPTIONAL":
            raise self.unsupported(
                "FILTER in OPTIONAL", "a FILTER inside OPTIONAL that reads a variable bound before it (a correlated "
                "left join) is supported as comparisons (&&) of a variable of the OPTIONAL's pattern with one bound "
                "before it (?a > ?lim) only", f.start)
        raise self.unsupported(
            "FILTER in NOT EXISTS", "a FILTER inside [NOT] EXISTS that reads a variable of the answer is supported "
            "as comparisons (&&) of a pattern's variable with an answer's (?v2 > ?v) only", f.start)

    def _dnf_of(self, e, f):
        from obda.query.expressions import FilterProblem

        try:
            return self._dnf(e)
        except FilterProblem as p:
            raise self.problem(p, f.start, f.end) from None

    def _condition(self, conditions: list, mode: str, bound: set) -> list[tuple]:
        """Exclusive alternatives of the solutions where the conjunction of ``conditions`` is ``mode`` (``true`` or
        ``not_true``) in a branch binding ``bound``."""
        from obda.query.dnf import exclusive_dnf
        from obda.query.expressions import FilterProblem
        from obda.query.normal_forms import MAX_BRANCHES

        def alts(f, m):
            try:
                return exclusive_dnf(f.expr, self.term, m, frozenset(bound), MAX_BRANCHES)
            except FilterProblem as p:
                raise self.problem(p, f.start, f.end) from None

        out: list[tuple] = []
        prefix: list[tuple] = [()]  # the earlier conditions true
        for f in conditions:
            if mode == "not_true":  # the first condition that is not true decides
                out.extend(a + b for a in prefix for b in alts(f, "not_true"))
            prefix = [a + b for a in prefix for b in alts(f, "true")]
            self._limit(prefix + out, f.start)
        return prefix if mode == "true" else out

    def _optional(self, branches: list[Branch], inner: list[Branch], at: int | None,
                  conditions: list | None = None, window: list = (), compares: list = ()) -> list[Branch]:
        """LeftJoin(P, Q, c): Join(P, Q) where ``c`` is true, and each P solution for which no compatible Q solution
        makes ``c`` true — with ``c`` reading P's variables only: where ``c`` is not true, or where it is and no Q
        solution is compatible (SPARQL 1.1 §18.5; the alternatives are exclusive).  ``window``: the parts of ``c``
        comparing Q's time with P's — filters of the join (an interval join), the window of the check (A3).
        ``compares``: the parts comparing a variable of Q with one of P (a correlated left join) — filters of the
        join, and of the check: a P solution is kept alone where no compatible Q solution satisfies them."""
        out: list[Branch] = []
        for p in branches:
            if not p.atoms:  # LeftJoin of the empty solution: Q's solutions, or one empty answer when it has none
                raise self.unsupported("OPTIONAL", "OPTIONAL with no triple pattern before it in its group would "
                                       "answer one empty solution when its pattern has none; write the pattern "
                                       "without OPTIONAL (or put a triple pattern before it)", at)
            bound = p.term_vars() | {a.time for a in p.atoms if a.time is not None}
            holds = self._condition(conditions, "true", bound) if conditions else [()]
            timing = tuple(c for comparisons, _ in window for c in comparisons) + tuple(
                Comparison(op, mine, theirs) for triples, _ in compares for mine, op, theirs in triples)
            if self.distinct and any(isinstance(t, Shifted) for c in timing for t in (c.left, c.right)):
                raise self.unsupported("OPTIONAL", "SELECT DISTINCT with an interval join (OPTIONAL's pattern in a "
                                       "window of time joins the answer) is not supported yet; use SELECT (each "
                                       "answer once per solution) or an aggregate", at)
            out.extend(replace(p.join(q), filters=p.filters + q.filters + timing + a) for q in inner for a in holds)
            checks = []
            for shared, group in self._by_shared(p, inner).items():  # none shared: kept when Q has no solution
                checks.append(self._check(group, shared, True, "OPTIONAL", at, p, window, compares))
            out.extend(replace(p, filters=p.filters + a, checks=p.checks + tuple(checks)) for a in holds)
            if conditions:
                out.extend(replace(p, filters=p.filters + a) for a in self._condition(conditions, "not_true", bound))
        return out

    def _minus(self, branches: list[Branch], inner: list[Branch], at: int | None) -> list[Branch]:
        out: list[Branch] = []
        for p in branches:
            # a branch of Q sharing no variable with p removes nothing (SPARQL 1.1 §18.5, Minus)
            checks = tuple(self._check(group, shared, True, "MINUS", at, p)
                           for shared, group in self._by_shared(p, inner).items() if shared)
            out.append(replace(p, checks=p.checks + checks))
        return out

    def _exists(self, branches: list[Branch], pending: list[tuple[list[Branch], bool, int | None, list, list]]
                ) -> list[Branch]:
        """A group's FILTER [NOT] EXISTS, on every branch of the group (filter scope: the whole group); each with
        the comparisons of its pattern's time with the answer's, its window, and of its variables with the
        answer's."""
        out: list[Branch] = []
        for p in branches:
            checks: list[Exists] = []
            for inner, negated, at, window, compares in pending:
                kw = "NOT EXISTS" if negated else "EXISTS"
                groups = self._by_shared(p, inner)  # none shared: whether the pattern has a solution at all
                if not negated and len(groups) > 1:
                    raise self.unsupported(kw, "FILTER EXISTS over a UNION whose branches share different "
                                           "variables with the group is not supported; write one FILTER EXISTS per "
                                           "branch in a UNION of the group", at)
                checks.extend(self._check(group, shared, negated, kw, at, p, window, compares)
                              for shared, group in groups.items())
            out.append(replace(p, checks=p.checks + tuple(checks)))
        return out


def keep_named(cq: CQ, named: frozenset[Var]) -> CQ:
    """``cq`` with every check keeping named the pattern variables in ``named`` or in the CQ's filters (what the
    rewriting of the branch joining the pattern keeps named too), recursively into the checks' patterns."""
    if not cq.checks:
        return cq
    named = named | frozenset(v for f in cq.filters for v in f.variables)
    checks = []
    for c in cq.checks:
        inner = c.pattern
        keep = tuple(sorted(v for v in set().union(*(b.variables for b in inner.branches)) & named
                            if v not in c.outer and not v.bnode))
        inner_named = frozenset(inner.projection) | frozenset(keep)
        inner = replace(inner, branches=tuple(keep_named(b, inner_named) for b in inner.branches))
        checks.append(replace(c, pattern=inner, keep=keep))
    return replace(cq, checks=tuple(checks))
