"""The SELECT clause and the solution modifiers: answer variables, ``(… AS ?v)``, aggregates, ORDER BY.

After the tree walk (:mod:`obda.query.walk`) has turned the WHERE clause into branches, this mixin checks and
applies what follows it: renames and computed columns of a query without aggregates, the GROUP BY / HAVING /
aggregate items of an aggregate query (SPARQL 1.1 §11), ORDER BY of an answer table, and refuses LIMIT,
OFFSET and a trailing VALUES.  It reads the walk's ``ts``, ``time_vars``, ``select_binds`` and ``term``.
"""

from __future__ import annotations

from dataclasses import replace

from rdflib.plugins.sparql.parserutils import CompValue
from rdflib.term import Variable

from obda.model.query import (
    ERROR_PROPAGATING,
    Aggregate,
    Aggregation,
    Arithmetic,
    Comparison,
    Connective,
    SelectItem,
    Term,
    Var,
    value_variables,
)
from obda.query.expressions import FilterProblem, condition, expression_variables, unwrap, value_expression
from obda.query.functions import computed, time_readers
from obda.query.locations import Located
from obda.query.normal_forms import Branch
from obda.query.unbound import sometimes_unbound


class Solutions(Located):
    """SELECT items and solution modifiers, for the tree walk."""

    def _renames(self, q: CompValue, select_i: int | None, where_open: int | None) -> dict[str, tuple[str, int]]:
        """``(?x AS ?y)`` items of a query without aggregates: ``x → (y, token)``; any other expression is refused."""
        out: dict[str, tuple[str, int]] = {}
        plain = {str(item["var"]) for item in q.projection or [] if item.evar is None}
        for item in q.projection or []:
            if item.evar is None:
                continue
            new = str(item["evar"])
            i = self.ts.find_var(new, select_i or 0, where_open)
            open_i = self._enclosing_paren(i, select_i or 0)
            source = unwrap(item["expr"])
            if not isinstance(source, Variable):  # a computed column: a BIND at the end of the WHERE (§18.2.4.4)
                self.select_binds.append((new, item["expr"], open_i))
                continue
            name = str(source)
            if name in plain or name in out:
                raise self.unsupported("SELECT expression", f"?{name} is selected twice (as itself or renamed); "
                                       "select each variable once", open_i)
            out[name] = (new, i)
        return out

    def _group_binds(self, q: CompValue, where_close: int) -> None:
        """``GROUP BY (expression AS ?v)``: ``?v`` is computed per solution, as a BIND at the end of the WHERE
        (SPARQL 1.1 §18.2.4.1, Group), then grouped by like any variable.  Over static data only, an expression
        without a name (``GROUP BY (FLOOR(?age / 10))``) gets a fresh one, never selected (the answer is a table
        with a row per group); over streams the changelog is keyed by the groups, so it is refused (below)."""
        group_i = self.ts.find_words("GROUP BY", where_close)
        conditions = q.groupby.condition if q.groupby else []
        for k, g in enumerate(conditions):
            if isinstance(g, CompValue) and g.name == "GroupAs" and dict.get(g, "var") is not None:
                i = self.ts.find_var(str(g["var"]), group_i or where_close)
                self.select_binds.append((str(g["var"]), g["expr"], self._enclosing_paren(i, group_i or where_close)))
            elif not isinstance(unwrap(g), Variable) and not self.time_vars:
                name = self._fresh_column("group")
                self.select_binds.append((name, g["expr"] if isinstance(g, CompValue) and g.name == "GroupAs" else g,
                                          group_i))
                conditions[k] = Variable(name)

    def _select_binds(self, branches: list[Branch], where_close: int) -> list[Branch]:
        """``SELECT (expression AS ?v)`` without aggregates: ``?v`` is computed after the WHERE clause, as a BIND
        at its end (SPARQL 1.1 §18.2.4.4); the expression is one of obda.query.functions'."""
        for new, expr, at in self.select_binds:
            end = at
            if at is not None:  # ( … ), or a function's name and its ( … )
                paren = at if self.ts[at].is_punct("(") else self.ts.find_punct("(", at)
                end = self.ts.matching(paren) if paren is not None else at
            hoisted = self.aggregate_args.get(new)  # an aggregate's expression (obda.query.aggregate_args)
            try:
                value = computed(expr, self.term)
            except FilterProblem as p:
                clause = "ORDER BY" if new in self.hidden else "an aggregate's expression" if hoisted else "SELECT"
                raise self.problem(p, at, end, clause) from None
            var = Var(new)
            out = []
            for b in branches:
                bound = b.term_vars()
                if var in bound or var in self.time_vars:
                    raise self.unsupported("SELECT expression", f"(… AS {var}): {var} is already bound in the "
                                           "pattern; name the column with a new variable", at)
                reads_time = set(time_readers(value, self.time_vars))  # HOURS(?t): a number of the time
                for v in value_variables(value):
                    if v in self.time_vars and hoisted:
                        raise self.unsupported("aggregate of time", f"{hoisted[0]} reads {v}, which is application "
                                               "time (bound by GRAPH); aggregating timestamps is not supported",
                                               self.ts.find_var(v.name, at, end + 1) if at is not None else at)
                    if v in reads_time:
                        raise self.unsupported("SELECT expression", f"(… AS {var}) reads {v}, which is application "
                                               "time, itself; only YEAR, MONTH, DAY, HOURS, MINUTES and SECONDS of it, "
                                               "and its text STR(…), can be computed", self.ts.find_var(v.name, at, end + 1)
                                               if at is not None else at)
                # a variable the branch leaves unbound (an OPTIONAL's, or one no pattern binds): read as SPARQL does
                out.append(self._bound_in(b, var, value, b.bound_vars(), at, end))  # its times too (HOURS(?t))
            branches = out
        return branches

    def _rename(self, branches: list[Branch], renames: dict[str, tuple[str, int]]) -> list[Branch]:
        """Apply ``(?x AS ?y)``: ``?y`` is new to the pattern, so the solutions bind it where they bound ``?x``."""
        if not renames:
            return branches
        bound = set().union(*(b.term_vars() for b in branches)) if branches else set()
        mapping: dict[Var, Term] = {}
        for name, (new, at) in renames.items():
            if Var(new) in bound or Var(new) in self.time_vars:
                raise self.unsupported("SELECT expression", f"(?{name} AS ?{new}): ?{new} is already bound in the "
                                       "pattern; name the column with a new variable", at)
            mapping[Var(name)] = Var(new)
        # a renamed time variable stays one: the GRAPH it came from binds the new name
        self.time_vars = frozenset(mapping.get(v, v) for v in self.time_vars)
        out = []
        for b in branches:
            cq = b.to_cq().substitute(mapping)
            out.append(Branch.of(cq))
        return out

    def _cut_keyword(self, q: CompValue, where_close: int) -> tuple[str, int | None]:
        """The first of LIMIT / OFFSET after the WHERE clause, as written, and its token."""
        kw = "LIMIT" if q.limitoffset.limit is not None else "OFFSET"
        i = self.ts.find_word(("LIMIT", "OFFSET"), where_close)
        return (self.ts[i].text.upper() if i is not None else kw), i

    def _check_modifiers(self, q: CompValue, where_close: int, aggregate: bool) -> None:
        """Solution modifiers after the WHERE clause: ORDER BY of an aggregate query or of a query over static
        data only (a finite answer table); GROUP BY and HAVING of an aggregate query."""
        if q.orderby and not aggregate and self.time_vars:
            raise self.unsupported(
                "ORDER BY",
                "ORDER BY is not supported for continuous queries without aggregates: answers are emitted "
                "as a stream in application-time order; sort the results downstream (ORDER BY orders the "
                "answer table of an aggregate query, or of a query over static data only)",
                self.ts.find_words("ORDER BY", where_close),
            )
        if q.limitoffset and self.time_vars:
            kw, i = self._cut_keyword(q, where_close)
            why = ("an aggregate query's answer over streams is a changelog of its groups, not a table to cut "
                   "(LIMIT and OFFSET cut the answer table of a query over static data only)" if aggregate else
                   "the answer stream has no end to count from (LIMIT and OFFSET cut the answer table of a query "
                   "over static data only)")
            raise self.unsupported(kw, f"{kw} is not supported for continuous queries: {why}", i)

    def _limit_offset(self, q: CompValue) -> tuple[int | None, int]:
        """LIMIT and OFFSET of a query over static data only: (limit or None, offset)."""
        if not q.limitoffset:
            return None, 0
        limit, offset = q.limitoffset.limit, q.limitoffset.offset
        return (None if limit is None else int(limit)), (0 if offset is None else int(offset))

    def _order_keys(self, q: CompValue, where_close: int) -> list[tuple[object, bool, int | None]]:
        """ORDER BY of a query over static data only, read before the SELECT binds: (key, descending, token) per
        condition, the key a variable's name or, for an expression, the fresh name of a hidden column that a BIND
        at the end of the WHERE computes (SPARQL orders the solutions before projecting them, §15.1)."""
        keys: list[tuple[object, bool, int | None]] = []
        at = self.ts.find_words("ORDER BY", where_close)
        cursor = (at or where_close) + 2
        for e, desc in map(_order_condition, q.orderby.condition):
            if isinstance(e, Variable):
                i = self.ts.find_var(str(e), cursor)
                keys.append((str(e), desc, i))
                cursor = (i if i is not None else cursor) + 1
                while cursor < len(self.ts) and self.ts[cursor].is_punct(")"):  # of ASC( DESC(
                    cursor += 1
                continue
            open_i = self.ts.find_punct("(", cursor)  # the condition's first bracket: ASC( DESC( ( fn(
            start = cursor if cursor < len(self.ts) else open_i  # its first token: ASC, DESC, (, the function
            name = self._fresh_column("order")
            self.select_binds.append((name, e, start))
            self.hidden.add(name)
            self.hidden_reads[name] = set(expression_variables(e))
            keys.append((Var(name), desc, start))
            cursor = (self.ts.matching(open_i) if open_i is not None else cursor) + 1
        return keys

    def _hidden_order(self, keys: list, projection: tuple[Var, ...], branches: list[Branch],
                      renames: dict[str, tuple[str, int]]) -> tuple[tuple[tuple[str, bool], ...], tuple[Var, ...]]:
        """ORDER BY pairs (column, descending) and the hidden columns they add after the answer's: an expression's,
        and a variable the SELECT does not project (over static data, a table sorted before its projection); a
        variable the SELECT renames (``(?x AS ?y)``) orders by its answer column."""
        shown = {v.name for v in projection}
        order, hidden, free = [], [], None  # free: the token of a key that is no function of the answer
        for key, desc, i in keys:
            if isinstance(key, Var):  # an expression's column, computed by its BIND
                hidden.append(key)
                order.append((key.name, desc))
                reads = {renames[v][0] if v in renames else v for v in self.hidden_reads[key.name]}
                free = free if free is not None or reads <= shown else i
                continue
            key = renames[key][0] if key in renames else key
            if key not in shown and Var(key) not in hidden:
                hidden.extend(self._answer_variables([key], {key: i}, branches))
                free = i if free is None else free
            order.append((key, desc))
        if free is not None and self.distinct:
            raise self.unsupported("ORDER BY expression", "SELECT DISTINCT ordered by a value it does not select is "
                                   "not supported (a distinct answer's place would depend on which of its solutions "
                                   "comes first); select the value, or order by the selected columns", free)
        return tuple(order), tuple(hidden)

    def _order_items(self, q: CompValue, group: list[Var], where_close: int) -> tuple[SelectItem, ...]:
        """The ORDER BY expressions of an aggregate query that the SELECT does not name (ORDER BY DESC(COUNT(?s))):
        each computed per group under a fresh name (:attr:`~obda.model.query.Aggregation.order_items`), read by
        :meth:`_order_by`; an expression the SELECT names orders by its column."""
        self.order_named = {repr(unwrap(item["expr"])): str(item["evar"])
                            for item in q.projection or [] if item.evar is not None}
        if not q.orderby:
            return ()
        at = self.ts.find_words("ORDER BY", where_close) or where_close
        cut = self._cut_keyword(q, where_close)[1] if q.limitoffset else None
        end = (cut if cut is not None else len(self.ts)) - 1
        out: list[SelectItem] = []
        for e, _ in map(_order_condition, q.orderby.condition):
            if isinstance(e, Variable) or repr(e) in self.order_named:
                continue
            expr = self._with_written(self._located_calls(self._value(e, at, end), at, end))
            self._check_grouped(expr, group, at, end)
            self.order_named[repr(e)] = name = self._fresh_column("order")
            out.append(SelectItem(name, expr))
        return tuple(out)

    def _order_by(self, q: CompValue, where_close: int, columns: tuple[str, ...]) -> tuple[tuple[str, bool], ...]:
        """ORDER BY of an aggregate query: (column, descending) pairs, a column an answer column or the fresh name
        of an expression :meth:`_order_items` computes."""
        if not q.orderby:
            return ()
        at = self.ts.find_words("ORDER BY", where_close)
        order: list[tuple[str, bool]] = []
        for e, desc in map(_order_condition, q.orderby.condition):
            if isinstance(e, Variable) and str(e) not in columns:
                raise self.unsupported("ORDER BY variable", f"ORDER BY ?{e}: an aggregate query's answer table has the "
                                       f"columns {', '.join('?' + n for n in columns)}; order by one of them, or by "
                                       f"an expression of the groups (ORDER BY DESC(COUNT(?s)))",
                                       self.ts.find_var(str(e), at))
            order.append((str(e) if isinstance(e, Variable) else self.order_named[repr(e)], desc))
        return tuple(order)

    def _aggregation(self, q: CompValue, branches: list[Branch], select_i: int | None, where_open: int | None,
                     where_close: int) -> Aggregation:
        """GROUP BY, the SELECT items, HAVING and ORDER BY of an aggregate query (SPARQL 1.1 §11)."""
        sel = select_i or 0
        tail_end = len(self.ts) - 1
        group: list[Var] = []
        group_i = self.ts.find_words("GROUP BY", where_close)
        for g in (q.groupby.condition if q.groupby else []):
            if isinstance(g, CompValue) and g.name == "GroupAs" and dict.get(g, "var") is not None:
                g = g["var"]  # computed by _group_binds
            g = unwrap(g)
            if not isinstance(g, Variable):
                raise self.unsupported("GROUP BY expression", "GROUP BY an expression without a name cannot be "
                                       "selected, and obda keys the answer by its groups: write GROUP BY "
                                       "(expression AS ?v) and select ?v", group_i)
            v = Var(str(g))
            at = self.ts.find_var(v.name, group_i or where_close)
            if v not in group:
                group.append(v)
        if not q.projection:
            raise self.unsupported("SELECT * with aggregates", "SELECT * cannot be used with GROUP BY or aggregates; "
                                   "list the grouping variables and the aggregates", self.ts.find_punct("*", sel, where_open))
        bound = set().union(*(b.term_vars() for b in branches)) if branches else set()
        items: list[SelectItem] = []
        for item in q.projection:
            if item.evar is None:
                v = Var(str(item["var"]))
                if v not in group:
                    raise self.unsupported("ungrouped variable", f"{v} is selected but neither grouped (GROUP BY {v}) "
                                           "nor aggregated", self.ts.find_var(v.name, sel, where_open))
                items.append(SelectItem(v.name, v))
                continue
            name = str(item["evar"])
            as_i = self.ts.find_var(name, sel, where_open)
            open_i = self._enclosing_paren(as_i, sel) or sel
            expr = self._with_written(self._located_calls(self._value(item["expr"], open_i, as_i or open_i), open_i,
                                                          as_i or open_i))
            self._check_grouped(expr, group, open_i, as_i or open_i)
            if Var(name) in bound or Var(name) in self.time_vars or name in [i.name for i in items]:
                raise self.unsupported("SELECT expression", f"(… AS ?{name}): ?{name} is already bound; name the "
                                       "expression with a new variable", as_i)
            items.append(SelectItem(name, expr))
        # over streams the answer is a changelog keyed by the groups: a line without its group's value could not
        # be told from another group's; over static data only it is one table, a row per group
        selected = {i.expression for i in items if isinstance(i.expression, Var)}
        for g in group:
            if g not in selected and self.time_vars:
                raise self.unsupported("unselected grouping variable", f"GROUP BY {g}: select every grouping variable "
                                       "of a query over streams (its changelog is keyed by the groups)",
                                       self.ts.find_var(g.name, group_i or where_close))
        having = None
        written: list[tuple[object, int | None, int]] = []  # (HAVING's or a hoisted FILTER's condition, its tokens)
        if q.having:
            at = self.ts.find_word("HAVING", where_close)
            end = (self.ts.find_words("ORDER BY", at) or tail_end + 1) - 1
            written += [(c, at, end) for c in q.having.condition]
        written += self.hoisted_filters  # a subquery's groups, filtered (obda.query.aggregate_subquery)
        if written:
            parts = []
            for c, at, end in written:
                try:
                    part = self._with_written(condition(c, self.term))
                except FilterProblem as p:
                    raise self.problem(p, at, end) from None
                self._check_grouped(part, group, at, end)
                parts.append(part)
            having = parts[0] if len(parts) == 1 else Connective("and", tuple(parts))
        aggregation = Aggregation(tuple(group), tuple(items), having, self._order_items(q, group, where_close))
        for c in aggregation.calls:
            if c.argument is None:
                continue
            shown, arg, hoisted = str(c), c.shown_argument, self.aggregate_args.get(c.argument.name)
            at = hoisted[1] if hoisted else self.ts.find_var(c.argument.name, sel)
            if c.argument in self.time_vars:
                raise self.unsupported("aggregate of time", f"{c}: {c.argument} is application time (bound by GRAPH); "
                                       "aggregating timestamps is not supported", at)
            missing = [k for k, b in enumerate(branches, 1) if c.argument not in b.term_vars()]
            erring = [k for k, b in enumerate(branches, 1) if c.argument in sometimes_unbound(b.binds)]
            if erring and c.function in ERROR_PROPAGATING:
                raise self.unsupported(
                    "aggregate of a sometimes unbound variable",
                    f"{shown}: " + (f"{arg} is an error for some of its values (a division by zero), and SPARQL "
                                    f"makes the {c.function.removesuffix('_distinct').upper()} of a group an error "
                                    "(unbound) as soon as one of its solutions is; give it a value where it is an "
                                    "error (COALESCE(…, 0)), or COUNT it" if hoisted else
                                    f"the expression that computes {arg} is an error for some of its values (a "
                                    f"division by zero leaves {arg} unbound), and SPARQL makes the "
                                    f"{c.function.removesuffix('_distinct').upper()} of a group an error (unbound) as "
                                    f"soon as one of its solutions leaves {arg} unbound; give it a value where it is "
                                    "an error (BIND(COALESCE(…, 0) AS …)), or COUNT it"), at)
            if missing and c.function in ERROR_PROPAGATING:
                default = '""' if c.function.startswith("group_concat") else "0"
                raise self.unsupported(
                    "aggregate of a sometimes unbound variable",
                    f"{shown}: UNION branch {missing[0]} of {len(branches)} leaves {arg} "
                    f"{'without a value (a variable it reads is unbound there)' if hoisted else 'unbound'}, and "
                    f"SPARQL makes the {c.function.removesuffix('_distinct').upper()} of a group an error (unbound) as "
                    f"soon as one of its solutions does; give it a value in every branch (COALESCE({arg}, {default})), "
                    "or COUNT it", at)
        return aggregation

    def _value(self, e, start: int, end: int):
        try:
            return value_expression(e, self.term)
        except FilterProblem as p:
            raise self.problem(p, start, end) from None

    def _located_calls(self, e, start: int, end: int):
        """``e`` with each aggregate call located (the unfolding refuses one over terms it cannot aggregate)."""
        if isinstance(e, Aggregate):
            word = "GROUP_CONCAT" if e.function.startswith("group_concat") else e.function.split("_")[0].upper()
            return replace(e, location=self.loc(self.ts.find_word(word, start, end) or start))
        if isinstance(e, Arithmetic):
            return replace(e, left=self._located_calls(e.left, start, end), right=self._located_calls(e.right, start, end))
        return e

    def _check_grouped(self, e, group: list[Var], start: int, end: int) -> None:
        """A variable outside every aggregate must be a grouping variable (SPARQL 1.1 §11.4)."""
        for v in _ungrouped(e, group):
            raise self.unsupported("ungrouped variable", f"{v} is used outside an aggregate but not grouped "
                                   f"(GROUP BY {v})", self.ts.find_var(v.name, start, end + 1))

    def _projection(
        self, q: CompValue, branches: list[Branch], select_i: int | None, where_open: int | None, where_close: int
    ) -> tuple[Var, ...]:
        """Answer variables: the SELECT list, or for ``SELECT *`` every non-time, non-blank variable (a time
        variable is projected when the SELECT list names it)."""
        bound_per_branch = [b.term_vars() for b in branches]
        all_bound = set().union(*bound_per_branch) if bound_per_branch else set()
        if q.projection:
            names = list(dict.fromkeys(str(item["evar"] if item.evar is not None else item["var"])
                                       for item in q.projection))
            located = {n: self.ts.find_var(n, select_i or 0, where_open) for n in names}
        else:
            first = self.ts.first_var_positions(where_open or 0, where_close)
            candidates = {v.name for v in all_bound | self.in_scope
                          if not v.bnode and v not in self.time_vars and v.name not in self.hidden}
            names = sorted(candidates, key=lambda n: (first.get(n, len(self.ts)), n))
            star = self.ts.find_punct("*", select_i or 0, where_open)
            located = {n: star for n in names}
        out = self._answer_variables(names, located, branches)
        if not out:
            raise self.unsupported(
                "empty projection", "the query has no answer variables: its WHERE clause binds no variable", select_i
            )
        return out

    def _answer_variables(self, names: list[str], located: dict, branches: list[Branch]) -> tuple[Var, ...]:
        """The variables ``names`` as answer variables: bound by some branch (a time variable by a GRAPH of the
        branch: its value is the timestamp of that graph, docs/semantics.md); unbound in the others, and where
        the FILTERs dropped every branch that binds it."""
        out: list[Var] = []
        for n in names:
            v = Var(n)
            computed_here = any(name == n for name, _, _ in self.select_binds)  # (e AS ?v): unbound where e errs
            if v not in self.in_scope and not computed_here and not any(v in b.bound_vars() for b in branches):
                raise self.unsupported(
                    "unbound answer variable",
                    f"answer variable ?{n} does not occur in any triple pattern of the WHERE clause",
                    located[n],
                )
            out.append(v)
        return tuple(out)


def _order_condition(c) -> tuple[object, bool]:
    """An ORDER BY condition of rdflib's tree: (its expression, descending)."""
    if isinstance(c, CompValue) and c.name == "OrderCondition":
        return unwrap(c["expr"]), c.get("order") == "DESC"
    return unwrap(c), False


def _ungrouped(e, group: list[Var]) -> list[Var]:
    if isinstance(e, Var):
        return [] if e in group else [e]
    if isinstance(e, (Arithmetic, Comparison)):
        return _ungrouped(e.left, group) + _ungrouped(e.right, group)
    if isinstance(e, Connective):
        return [v for p in e.parts for v in _ungrouped(p, group)]
    return []  # a constant, or an aggregate (its variable is aggregated)

