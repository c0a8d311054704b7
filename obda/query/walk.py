"""The tree walk: rdflib's parse tree of a SELECT or ASK query → :class:`obda.model.query.Query`.

rdflib's tree, unlike its algebra, keeps the triples in text order; :class:`Converter` walks it with a cursor
over the query's tokens (so every refusal is located, :mod:`obda.query.locations`): groups ``{ }``,
``GRAPH ?t``, UNION, BIND and triple patterns (→ atoms; sequence paths → chains of atoms through fresh
blank-node variables).  FILTERs and the branch product are :mod:`obda.query.normal_forms`'; the
SELECT clause, ASK and the solution modifiers :mod:`obda.query.solutions`'; the prologue, terms and fresh
names :mod:`obda.query.names`'.
"""

from __future__ import annotations

from rdflib.paths import AlternativePath, InvPath, MulPath, NegatedPath, Path, SequencePath
from rdflib.plugins.sparql.parserutils import CompValue
from rdflib.term import Identifier, Variable

from obda.model.query import (
    ASK_COLUMN,
    IRI,
    RDF_TYPE,
    Atom,
    ClassAtom,
    Literal,
    PropertyAtom,
    Query,
    Term,
    Var,
    Window,
    value_variables,
)
from obda.query import tokens as tk
from obda.query.aggregate_args import AggregateArguments
from obda.query.aggregate_subquery import AggregateSubqueries, has_aggregates
from obda.query.ask import AskForm
from obda.query.expressions import FilterProblem, aggregate_name, tree_nodes, unwrap
from obda.query.functions import computed, time_readers
from obda.query.names import Names
from obda.query.negation import Negation, exists_filter, keep_named
from obda.query.normal_forms import Branch, NormalForms, PendingFilter, product
from obda.query.predicates import AnyPredicate
from obda.query.solutions import Solutions
from obda.query.subselect import Subqueries
from obda.query.values import InlineData

_QUERY_FORMS = {"ConstructQuery": "CONSTRUCT", "DescribeQuery": "DESCRIBE"}

# Group parts that are never supported: parse-tree name → (construct, keyword, message).
_UNSUPPORTED_PARTS = {
    "ServiceGraphPattern": ("SERVICE", "SERVICE", "SERVICE (federated query) is not supported"),
}


class Converter(Names, NormalForms, Solutions, AskForm, AggregateArguments, AggregateSubqueries, InlineData, AnyPredicate,
                Negation, Subqueries):
    """One conversion of one query text; holds the tokens and a cursor over them."""

    def __init__(self, text: str, file: str | None, base: str | None, vocabulary=None):
        self.text = text
        self.vocabulary = vocabulary  # obda.model.ontology.Ontology: what a variable predicate ranges over
        self.file = file
        self.base = base
        self.ts = tk.TokenStream(text)
        self.pos = 0  # token cursor: constructs are searched for from here, in text order
        self.time_vars: frozenset[Var] = frozenset()
        self.windows: list[tuple[Window, int]] = []  # the NOW() comparisons of the FILTERs, with their token
        self.in_scope: set[Var] = set()  # what some branch binds before FILTERs drop branches (SPARQL's scope)
        self.select_binds: list[tuple[str, object, int | None]] = []  # SELECT (expression AS ?v) without aggregates
        self.hidden: set[str] = set()  # the columns of ORDER BY expressions (never answers)
        self.hidden_reads: dict[str, set[str]] = {}  # the variables each of them reads
        self.aggregated = False  # the query groups or aggregates (its subqueries may not, obda.query.subselect)
        self.hoisted_filters: list = []  # the FILTERs over an aggregate subquery's groups (obda.query.aggregate_subquery)
        self.aggregate_args: dict[str, tuple[str, int | None]] = {}  # AVG(?v * 2)'s fresh variable: (its text, token)
        self.bnode_names: dict[str, str] = {}
        self.labels: set[str] = set()
        self.taken: set[str] = set()
        self.fresh: dict[str, int] = {}  # the last fresh name's number, per stem (obda.query.names)

    # ------------------------------------------------------------------ query level

    def convert(self, tree) -> Query:
        prologue_tree, q = tree[0], tree[1]
        if q.name in _QUERY_FORMS:
            kw = _QUERY_FORMS[q.name]
            raise self.unsupported(kw, f"{kw} queries are not supported; write a SELECT query", self.ts.find_word(kw))

        prologue, prefixes = self._prologue(prologue_tree)
        q = self._resolve_names(q, prologue)

        ask = q.name == "AskQuery"  # SELECT DISTINCT (true AS ?boolean): one answer, once the pattern matches
        select_i = self.ts.find_word("ASK" if ask else "SELECT")
        where_open = self.ts.find_punct("{", select_i or 0)
        where_close = self.ts.matching(where_open) if where_open is not None else len(self.ts) - 1

        if q.modifier == "REDUCED":
            raise self.unsupported("REDUCED", "SELECT REDUCED is not supported; use SELECT or SELECT DISTINCT",
                                   self.ts.find_word("REDUCED", select_i or 0))
        if ask:
            self._ask_modifiers(q, where_close)
        aggregate = has_aggregates(q)
        hoisted = None if aggregate else self._hoisted_aggregate(q, ask, where_open, where_close)
        if hoisted is not None:  # a subquery's groups, filtered: an aggregate query (obda.query.aggregate_subquery)
            q, select_i, where_open, where_close = hoisted
            aggregate = True
        self.aggregated = aggregate
        renames = {} if aggregate else self._renames(q, select_i, where_open)
        if q.datasetClause:
            i = self.ts.find_word("FROM", select_i or 0, where_open)
            named = i is not None and i + 1 < len(self.ts) and self.ts[i + 1].is_word("NAMED")
            kw = "FROM NAMED" if named else "FROM"
            raise self.unsupported(kw, f"{kw} is not supported; the data comes from the mappings and sources", i)

        # an aggregate query's pattern is a bag (its solutions are counted); its DISTINCT is a no-op, since
        # every grouping variable is selected and each group is one answer row
        self.distinct = (q.modifier == "DISTINCT" or ask) and not aggregate
        self.time_vars = frozenset(Var(str(v)) for v in _graph_variables(q.where))
        self._collect_names()

        self.pos = where_open + 1 if where_open is not None else 0
        branches = self._group(q.where, None, where_open if where_open is not None else 0)
        if q.valuesClause:  # a trailing VALUES: joined with the WHERE clause's solutions
            branches = self._join_values(branches, q.valuesClause, self.ts.find_word("VALUES", where_close))

        self._check_modifiers(q, where_close, aggregate)
        if ask and not aggregate:
            branches = self._ask_column(branches, select_i)
        branches = self._rename(branches, renames)
        if aggregate:
            self._group_binds(q, where_close)
            self._aggregate_binds(q, select_i, where_open, where_close)
        static_order = q.orderby and not aggregate and not ask  # a table's order: computed columns allowed
        keys = self._order_keys(q, where_close) if static_order else []
        branches = self._select_binds(branches, where_close)

        aggregation = None
        if aggregate:
            aggregation = self._aggregation(q, branches, select_i, where_open, where_close)
            names = [v.name for v in aggregation.group_by + aggregation.arguments]
            located = {n: self.ts.find_var(n, select_i or 0) for n in names}
            projection = self._answer_variables(names, located, branches)
        elif ask:
            projection = (Var(ASK_COLUMN),)
        else:
            projection = self._projection(q, branches, select_i, where_open, where_close)
        columns = aggregation.columns if aggregation is not None else tuple(v.name for v in projection)
        order_by, hidden = self._hidden_order(keys, projection, branches, renames) if static_order else (
            self._order_by(q, where_close, columns), ())
        limit, offset = self._limit_offset(q)
        named = frozenset(projection + hidden)
        return Query(
            projection=projection + hidden,
            branches=tuple(keep_named(b.to_cq(), named) for b in branches),
            distinct=self.distinct,
            text=self.text,
            prefixes=prefixes,
            location=self.loc(select_i),
            aggregation=aggregation,
            window=self._window(aggregate),
            order_by=order_by,
            limit=limit,
            offset=offset,
            ask=ask,
            order_keys=len(hidden),
        )

    # ------------------------------------------------------------------ graph patterns

    def _group(self, gp: CompValue, time: Var | None, open_i: int,
               optional: tuple | None = None) -> list[Branch]:
        """Branches of a group ``{ ... }`` whose '{' is token ``open_i``; leaves the cursor after its '}'.
        ``optional``: the group is an OPTIONAL's — the variables bound before it, and the list that receives the
        parts of its FILTERs reading them, the left join's condition — or a [NOT] EXISTS's — the time variables,
        the list, and the list receiving the comparisons of its time with the answer's, its window
        (:meth:`~obda.query.negation.Negation.join_conditions`)."""
        close_i = self.ts.matching(open_i)
        self.pos = open_i + 1
        if gp.name == "SubSelect":
            return self._subselect(gp, time, open_i)
        branches = [Branch()]
        filters: list[PendingFilter] = []
        exists: list[tuple[list[Branch], bool, int | None]] = []  # FILTER [NOT] EXISTS (obda.query.negation)
        inline: list[tuple[CompValue, int | None]] = []  # VALUES blocks
        for part in gp.part or []:
            name = part.name
            if inline and name in ("Bind", "OptionalGraphPattern", "MinusGraphPattern"):
                # SPARQL joins a VALUES block where it stands (§18.2.2.6): what extends, left-joins or subtracts
                # after it sees its variables bound (elsewhere in the group the join's place changes nothing)
                for block, at in inline:
                    branches = self._join_values(branches, block, at)
                inline = []
            if name == "TriplesBlock":
                end = self._block_end(self.pos, close_i)
                alternatives = [Branch(atoms, (), binds)
                                for atoms, binds in self._triples(part["triples"], time, self.pos, end)]
                branches = self._limit(product(branches, alternatives), self.pos)
                self.pos = end
            elif name == "Bind":
                branches = self._bind(part, branches, time, close_i)
            elif name == "InlineData":  # joined with the group's other elements, before its FILTERs
                at = self.ts.find_word("VALUES", self.pos, close_i)
                block = self.ts.find_punct("{", (at if at is not None else self.pos) + 1, close_i)
                self.pos = (self.ts.matching(block) if block is not None else self.pos) + 1
                inline.append((part, at))
            elif name == "Filter" and exists_filter(part["expr"]) is not None:
                at = self.ts.find_word("FILTER", self.pos, close_i)
                end = self._filter_end(at if at is not None else self.pos)
                negated = exists_filter(part["expr"])
                kw = "NOT EXISTS" if negated else "EXISTS"
                window: list = []  # its FILTERs' comparisons of its time with the answer's (rules A3–A6)
                compares: list = []  # and of its variables with the answer's
                inner = self._other_pattern(unwrap(part["expr"])["graph"], time, kw, at, close_i, in_scope=False,
                                            optional=(self.time_vars, None, window, compares))
                exists.append((inner, negated, at, window, compares))
                self.pos = end + 1
            elif name in ("OptionalGraphPattern", "MinusGraphPattern"):
                kw = "OPTIONAL" if name == "OptionalGraphPattern" else "MINUS"
                at = self.ts.find_word(kw, self.pos, close_i)
                if kw == "OPTIONAL":
                    outer, conditions, window = frozenset(v for b in branches for v in b.bound_vars()), [], []
                    compares: list = []  # its FILTERs' comparisons of its variables with those bound before it
                    inner = self._other_pattern(part["graph"], time, kw, at, close_i, in_scope=True,
                                                optional=(outer, conditions, window, compares))
                    branches = self._limit(self._optional(branches, inner, at, conditions, window, compares), at)
                else:
                    inner = self._other_pattern(part["graph"], time, kw, at, close_i, in_scope=False)
                    branches = self._limit(self._minus(branches, inner, at), at)
            elif name == "Filter":
                f = self._filter(part, close_i)
                if f is not None:  # None: the FILTER was a window only
                    filters.append(f)
            elif name == "GraphGraphPattern":
                at = self.pos
                branches = self._limit(product(branches, self._graph(part, close_i)), at)
            elif name == "GroupOrUnionGraphPattern":
                alternatives: list[Branch] = []
                first_open = self.ts.find_punct("{", self.pos, close_i)
                for g in part["graph"]:
                    sub_open = self.ts.find_punct("{", self.pos, close_i)
                    alternatives.extend(self._group(g, time, sub_open))
                branches = self._limit(product(branches, alternatives), first_open)
            elif name in _UNSUPPORTED_PARTS:
                construct, kw, message = _UNSUPPORTED_PARTS[name]
                raise self.unsupported(construct, message, self.ts.find_word(kw, self.pos, close_i))
            else:
                raise self.unsupported(name, f"{name} is not supported", self.pos)
        for part, at in inline:
            branches = self._join_values(branches, part, at)
        if exists:
            branches = self._exists(branches, exists)
        if optional is not None:
            filters = self.join_conditions(branches, filters, *optional)
        branches = self._apply_filters(branches, filters, time)
        self.pos = close_i + 1
        return branches

    def _bind(self, part: CompValue, branches: list[Branch], time: Var | None, close_i: int) -> list[Branch]:
        """``BIND(expression AS ?v)``: ``?v`` takes the value of ``+ - * /`` over variables bound before it in the
        group and numbers; a filter or the projection reading ``?v`` reads that value (SPARQL 1.1 §18.2.2.5)."""
        at = self.ts.find_word("BIND", self.pos, close_i)
        start = at if at is not None else self.pos
        open_i = self.ts.find_punct("(", start, close_i)
        end = self.ts.matching(open_i) if open_i is not None else start
        self.pos = end + 1
        var = Var(str(part["var"]))
        if aggregate_name(part["expr"]):
            raise self.unsupported("BIND of an aggregate", "BIND cannot compute an aggregate; aggregate in the "
                                   "SELECT clause with GROUP BY", at)
        try:
            expr = computed(part["expr"], self.term)
        except FilterProblem as p:
            raise self.problem(p, start, end, "BIND") from None
        var_at = self.ts.find_var(var.name, start, end + 1)
        if time is not None:
            raise self.unsupported("BIND in GRAPH", "BIND inside GRAPH ?t is not supported; bind the value outside "
                                   "the GRAPH block", at)
        in_group = set().union(*(b.bound_vars() for b in branches)) if branches else set()
        out = []
        for k, b in enumerate(branches, 1):
            bound = b.bound_vars()
            if var in bound:
                raise self.unsupported("BIND", f"BIND(… AS {var}): {var} is already bound before the BIND in its group "
                                       "(SPARQL forbids rebinding it); name the value with a new variable", var_at)
            for v in time_readers(expr, self.time_vars):  # HOURS(?t) is a number of the time, ?t + 1 is not
                raise self.unsupported("BIND", f"BIND reads the time variable {v} itself; only YEAR, MONTH, DAY, "
                                       f"HOURS, MINUTES and SECONDS of it, and its text STR(…), can be computed "
                                       f"(select {v} to see the "
                                       "time, compare time variables in FILTER)",
                                       self.ts.find_var(v.name, start, end + 1))
            for v in value_variables(expr):
                if v not in in_group:
                    raise self.unsupported("BIND", f"BIND reads {v}, which no pattern before it in the group binds "
                                           "(its value would be unbound)", self.ts.find_var(v.name, start, end + 1))
            out.append(self._bound_in(b, var, expr, bound, start, end))  # an input unbound here: read as SPARQL does
        return out

    def _graph(self, part: CompValue, close_i: int) -> list[Branch]:
        """``GRAPH ?t { P }``: the atoms of P get time label ?t."""
        kw = self.ts.find_word("GRAPH", self.pos, close_i)
        term = part["term"]
        if not isinstance(term, Variable):
            raise self.unsupported(
                "GRAPH <IRI>",
                f"GRAPH with a fixed IRI {term.n3() if hasattr(term, 'n3') else term} is not supported; use "
                "GRAPH ?t to match stream assertions at application time ?t",
                kw,
            )
        open_i = self.ts.find_punct("{", (kw or self.pos) + 1, close_i)
        time = Var(str(term))
        branches = self._group(part["graph"], time, open_i)
        if any(all(a.time != time for a in b.atoms) for b in branches):
            # SPARQL would let ?t range over every named graph, multiplying the
            # answers by the number of time points: not a meaningful stream query.
            raise self.unsupported(
                "GRAPH without triple patterns",
                f"GRAPH ?{term} {{ ... }} has no triple pattern of its own (in some UNION alternative, or its "
                f"patterns are all inside a nested GRAPH), so ?{term} would range over every time point; put a "
                "triple pattern inside it",
                kw,
            )
        return branches

    # ------------------------------------------------------------------ triples

    def _triples(self, blocks, time: Var | None, start: int, end: int) -> list[tuple[tuple[Atom, ...], tuple]]:
        """The alternatives of a triples block (rdflib has already expanded ``;`` ``,`` and ``[ ]``): one
        ``(atoms, binds)``, or several where an alternative path ``:p|:q`` or a variable predicate
        (:mod:`obda.query.predicates`, whose alternatives bind it) makes a bag union (SPARQL 1.1 §18.4)."""
        flat: list[Identifier] = [x for block in blocks for x in block]
        roles = tk.triple_roles(self.ts, start, end)
        out: list[tuple[tuple[Atom, ...], tuple]] = [((), ())]
        for k in range(0, len(flat), 3):
            s, p, o = flat[k], flat[k + 1], flat[k + 2]
            if isinstance(p, Variable):
                here = self._any_predicate(s, p, o, time, roles)
            elif str(p) == RDF_TYPE and isinstance(o, Variable):
                here = self._any_class(s, o, time, roles)
            else:
                here = [(tuple(self._atom(s2, p2, o2, time, roles) for s2, p2, o2 in chain), ())
                        for chain in self._path_chains(s, p, o, roles)]
            out = [(a + b, x + y) for a, x in out for b, y in here if _agree(x, y)]
            self._limit(out, start)
        return [(atoms, tuple(dict.fromkeys(binds))) for atoms, binds in out]

    def _path_chains(self, s, p, o, roles) -> list[list[tuple]]:
        """The triple patterns of ``s p o`` for each alternative of path ``p``: a sequence ``:p/:q`` is
        ``s :p _:b . _:b :q o``, an inverse ``^:p`` is ``o :p s``, an alternative ``:p|:q`` two patterns (a bag
        union); repetition paths and negated property sets are refused."""
        if not isinstance(p, Path):
            return [[(s, p, o)]]
        if isinstance(p, InvPath):
            return self._path_chains(o, p.arg, s, roles)
        if isinstance(p, AlternativePath):
            return [chain for arg in p.args for chain in self._path_chains(s, arg, o, roles)]
        if isinstance(p, SequencePath):
            nodes = [s] + [self._fresh_bnode() for _ in p.args[1:]] + [o]
            out: list[list[tuple]] = [[]]
            for k, arg in enumerate(p.args):
                steps = self._path_chains(nodes[k], arg, nodes[k + 1], roles)
                out = [a + b for a in out for b in steps]
            return out
        if isinstance(p, MulPath):
            op, what = p.mod, "repetition paths"
        elif isinstance(p, NegatedPath):
            op, what = "!", "negated property sets"
        else:  # pragma: no cover - rdflib has no other path kinds
            op, what = str(p), "this property path"
        i = self._role_token(roles, {tk.PATH_OP}, lambda t: t.text == op)
        raise self.unsupported(
            f"property path {op}",
            f"property path operator {op} ({what}) is not supported; sequences p/q, inverses ^p and alternatives "
            "p|q are",
            i,
        )

    def _atom(self, s, p, o, time: Var | None, roles) -> Atom:
        """One triple pattern → ClassAtom / PropertyAtom, enforcing the term rules."""
        if isinstance(s, Var):  # a fresh blank node from a path expansion
            subj: Term = s
        else:
            subj = self.term(s)
        obj: Term = o if isinstance(o, Var) else self.term(o)
        if isinstance(subj, Literal):
            raise self.unsupported(
                "literal subject",
                f"literal {subj} cannot be the subject of a triple pattern",
                self._role_token(roles, {tk.SUBJECT}, lambda t: t.kind in ("string", "number") or t.is_word("true", "false")),
            )
        for t in (subj, obj):
            if isinstance(t, Var) and not t.bnode and t in self.time_vars:
                raise self.unsupported(
                    "time variable as term",
                    f"?{t.name} is a time variable (it names a GRAPH) and cannot also be a subject or object",
                    self._role_token(roles, {tk.SUBJECT, tk.OBJECT}, lambda tok, n=t.name: tok.var_name == n),
                )
        if str(p) == RDF_TYPE:
            if isinstance(obj, IRI):
                return ClassAtom(obj.value, subj, time)
            what = f"variable {obj}" if isinstance(obj, Var) and not obj.bnode else str(obj)
            raise self.unsupported(
                "variable class" if isinstance(obj, Var) else "non-IRI class",
                f"the class of rdf:type must be an IRI, not {what}",
                self._role_token(roles, {tk.OBJECT}, lambda tok: isinstance(obj, Var) and tok.var_name == obj.name),
            )
        return PropertyAtom(str(p), subj, obj, time)


def _agree(binds: tuple, more: tuple) -> bool:
    """Whether two alternatives' constant bindings agree (a predicate variable used twice takes one value)."""
    known = dict(binds)
    return all(known.get(v, c) == c for v, c in more)


def _graph_variables(where) -> list[Variable]:
    """Variables named by ``GRAPH ?t`` anywhere in the pattern (the time variables)."""
    return [x["term"] for x in tree_nodes(where)
            if isinstance(x, CompValue) and x.name == "GraphGraphPattern" and isinstance(x.term, Variable)]
