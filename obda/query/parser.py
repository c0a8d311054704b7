"""SPARQL 1.1 SELECT → :class:`obda.model.query.Query` (a UCQ with application time).

rdflib parses the text (``parseQuery``) and resolves prefixed names, BASE and
property paths with its own algebra helpers; this module walks the resulting
parse tree (which, unlike rdflib's algebra, keeps the triples in text order)
and builds typed model objects:

* a basic graph pattern becomes atoms (``?x a :C`` → ClassAtom, ``?x :p ?y`` →
  PropertyAtom); blank nodes become non-projected variables; a sequence path
  ``:p/:q`` becomes a chain of atoms through fresh blank-node variables;
* ``GRAPH ?t { P }`` gives the atoms of ``P`` the time label ``?t``;
* UNION and the ``||`` alternatives of FILTERs are expanded into disjunctive
  normal form: one CQ per combination, each with a conjunction of comparisons.

Every construct outside that fragment raises
:class:`~obda.errors.UnsupportedConstructError` naming it, with the line and
column found by re-scanning the text (:mod:`obda.query.tokens`), because
rdflib's tree has no positions.
"""

from __future__ import annotations

import functools
import sys
import threading
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Iterable

from pyparsing import ParseBaseException
from rdflib.paths import AlternativePath, InvPath, MulPath, NegatedPath, Path, SequencePath
from rdflib.plugins.sparql.algebra import translatePath, translatePName, traverse
from rdflib.plugins.sparql.parser import parseQuery
from rdflib.plugins.sparql.parserutils import CompValue
from rdflib.plugins.sparql.sparql import Prologue
from rdflib.term import BNode, Identifier, Literal as RDFLiteral, URIRef, Variable

from obda.errors import Location, ObdaError, QuerySyntaxError, UnsupportedConstructError
from obda.model.query import (
    CQ,
    IRI,
    RDF_TYPE,
    XSD,
    Aggregate,
    Aggregation,
    Arithmetic,
    Atom,
    ClassAtom,
    Comparison,
    Connective,
    Literal,
    PropertyAtom,
    Query,
    SelectItem,
    Shifted,
    Term,
    Var,
    Window,
    value_variables,
)
from obda.query import rspql
from obda.query import tokens as tk
from obda.query.expressions import (
    FilterProblem,
    Hint,
    aggregate_name,
    condition,
    conjunction,
    conjuncts,
    has_now,
    window_condition,
    expression_variables,
    time_comparison_problem,
    to_dnf,
    to_exclusive_dnf,
    unwrap,
    value_expression,
)

# Upper bound on the number of CQs of the disjunctive normal form: UNION and ||
# multiply out, so a deeply nested query can explode; fail clearly instead.
MAX_BRANCHES = 10_000

# Upper bound on how deeply { }, ( ) and [ ] nest (all kinds counted together): rdflib's parser recurses
# some 40 Python frames per parenthesis level, so a query nested much deeper exhausts the interpreter's
# recursion limit; beyond this depth the query is refused with its location instead.
MAX_NESTING = 16

# Keywords that end a block of triples inside a group (start of a GraphPatternNotTriples).
_BLOCK_END_WORDS = ("OPTIONAL", "MINUS", "GRAPH", "SERVICE", "FILTER", "BIND", "VALUES")

_QUERY_FORMS = {"AskQuery": "ASK", "ConstructQuery": "CONSTRUCT", "DescribeQuery": "DESCRIBE"}

# Group parts that are never supported: parse-tree name → (construct, keyword, message).
_UNSUPPORTED_PARTS = {
    "OptionalGraphPattern": ("OPTIONAL", "OPTIONAL", "OPTIONAL is non-monotonic and not supported"),
    "MinusGraphPattern": ("MINUS", "MINUS", "MINUS is non-monotonic and not supported"),
    "ServiceGraphPattern": ("SERVICE", "SERVICE", "SERVICE (federated query) is not supported"),
    "InlineData": ("VALUES", "VALUES", "VALUES is not supported; use FILTER with = and ||"),
}


def parse_query(text: str, *, file: str | None = None, base: str | None = None) -> Query:
    """Parse a SPARQL ``SELECT`` / ``SELECT DISTINCT`` query into a :class:`Query`.

    ``file`` is only used in error locations and ``Query.location``; ``base``
    is the base IRI for relative IRIs (a ``BASE`` in the text overrides it).
    Raises :class:`QuerySyntaxError` when the text does not parse and
    :class:`UnsupportedConstructError` for constructs outside the supported
    fragment (see the module docstring).  An RSP-QL text (``REGISTER``, ``FROM NAMED WINDOW``, ``WINDOW``) is
    rewritten to this SPARQL first (:mod:`obda.query.rspql`); its errors point at the RSP-QL text.
    """
    translation = rspql.translate(text, file)
    if translation is None:
        return _parse_sparql(text, file, base)
    try:
        query = _parse_sparql(translation.text, file, base)
    except ObdaError as e:
        raise translation.relocate(e) from None
    rspql.check(translation, query.aggregation is not None)  # located in the RSP-QL text already
    return replace(query, text=text, location=translation.locate(query.location))


def _parse_sparql(text: str, file: str | None, base: str | None) -> Query:
    tokens = tk.tokenize(text)
    deep = tk.too_deep(tokens, MAX_NESTING)
    if deep is not None:  # rdflib's parser recurses per level: fail here, located, not with a RecursionError
        raise _nesting_error(deep, MAX_NESTING + 1, file)
    try:
        with _stack_for(tk.deepest(tokens)[1]):
            tree = parseQuery(text)
    except ParseBaseException as e:
        raise QuerySyntaxError(f"SPARQL syntax error: {e.msg}", Location(file, e.lineno, e.col)) from None
    except RecursionError:  # within the limit, but called with little stack left
        raise _nesting_error(*tk.deepest(tokens), file) from None
    except Exception as e:  # rdflib raises plain exceptions for some lexical errors
        raise QuerySyntaxError(f"SPARQL syntax error: {e}", Location(file)) from None
    try:
        return _Converter(text, file, base).convert(tree)
    except RecursionError:
        raise _nesting_error(*tk.deepest(tokens), file) from None


# Python frames rdflib's parser uses per nesting level (measured: about 40 for a parenthesis inside FILTER,
# 26 for a { } group), and for a query without nesting, with a margin.
_FRAMES_PER_LEVEL = 50
_FRAMES_BASE = 300


@contextmanager
def _stack_for(depth: int):
    """Make sure the recursion limit leaves rdflib's parser room for ``depth`` nested brackets.

    A RecursionError inside rdflib's parser leaves its grammar in a broken state (later queries parse
    into wrong trees), so the parser must never run out of frames: when the caller is already deep
    (a server thread, a test runner) the limit is raised — bounded, since ``depth`` is at most
    :data:`MAX_NESTING` — and never lowered again while another thread may rely on it.
    """
    frame, used = sys._getframe(), 0
    while frame is not None:
        used += 1
        frame = frame.f_back
    need = used + _FRAMES_BASE + _FRAMES_PER_LEVEL * depth
    with _LIMIT_LOCK:
        if need > sys.getrecursionlimit():
            sys.setrecursionlimit(need)
    yield


_LIMIT_LOCK = threading.Lock()


def _nesting_error(t: "tk.Token | None", level: int, file: str | None) -> UnsupportedConstructError:
    """Nesting too deep: beyond :data:`MAX_NESTING`, or (``level`` within it) deeper than the stack left allows."""
    where = f"this '{t.text}' opens level {level}" if t is not None else "the query is nested too deeply"
    if level > MAX_NESTING:
        what = f"brackets nested more than {MAX_NESTING} deep are not supported"
    else:
        what = "the query is nested too deeply to parse here (Python recursion limit)"
    return UnsupportedConstructError(
        "nesting",
        f"{what} ({where}; the limit of {MAX_NESTING} counts {{ }} groups, ( ) and [ ] together); flatten the nesting",
        Location(file, t.line, t.column) if t is not None else Location(file),
    )


@dataclass(frozen=True)
class _Branch:
    """One conjunctive branch under construction: atoms and comparisons in text order."""

    atoms: tuple[Atom, ...] = ()
    filters: tuple[Comparison, ...] = ()
    binds: tuple[tuple[Var, object], ...] = ()  # BIND(expression AS ?v), in text order

    def join(self, other: "_Branch") -> "_Branch":
        return _Branch(self.atoms + other.atoms, self.filters + other.filters, self.binds + other.binds)

    def term_vars(self) -> set[Var]:
        return {t for a in self.atoms for t in a.terms if isinstance(t, Var)} | {v for v, _ in self.binds}

    def bound_vars(self) -> set[Var]:
        """The variables a solution of this branch binds: its terms', its BINDs' and its time variables."""
        return self.term_vars() | {a.time for a in self.atoms if a.time is not None}

    def to_cq(self) -> CQ:
        return CQ(_dedup(self.atoms), _dedup(self.filters), self.binds)


def _dedup(items: Iterable) -> tuple:
    """Drop repeated items, keeping the first occurrence (set semantics of a BGP's triples)."""
    return tuple(dict.fromkeys(items))


def _product(left: list[_Branch], right: list[_Branch]) -> list[_Branch]:
    """Join of two unions of branches (distributes the join over the unions)."""
    return [a.join(b) for a in left for b in right]


@dataclass
class _PendingFilter:
    """A FILTER of a group, checked once the whole group is known (SPARQL filter scope)."""

    expr: object
    start: int  # token index of the FILTER keyword
    end: int  # token index of the last token of the FILTER
    dnf: list[tuple[Comparison, ...]]


class _Converter:
    """One conversion of one query text; holds the tokens and a cursor over them."""

    def __init__(self, text: str, file: str | None, base: str | None):
        self.text = text
        self.file = file
        self.base = base
        self.ts = tk.TokenStream(text)
        self.pos = 0  # token cursor: constructs are searched for from here, in text order
        self.time_vars: frozenset[Var] = frozenset()
        self.windows: list[tuple[Window, int]] = []  # the NOW() comparisons of the FILTERs, with their token
        self.bnode_names: dict[str, str] = {}
        self.labels: set[str] = set()
        self.taken: set[str] = set()
        self.fresh = 0

    # ------------------------------------------------------------------ errors

    def loc(self, i: int | None) -> Location:
        line, col = self.ts.position(i)
        return Location(self.file, line, col)

    def unsupported(self, construct: str, message: str, i: int | None) -> UnsupportedConstructError:
        return UnsupportedConstructError(construct, message, self.loc(i))

    # ------------------------------------------------------------------ query level

    def convert(self, tree) -> Query:
        prologue_tree, q = tree[0], tree[1]
        if q.name in _QUERY_FORMS:
            kw = _QUERY_FORMS[q.name]
            raise self.unsupported(kw, f"{kw} queries are not supported; write a SELECT query", self.ts.find_word(kw))

        prologue, prefixes = self._prologue(prologue_tree)
        q = self._resolve_names(q, prologue)

        select_i = self.ts.find_word("SELECT")
        where_open = self.ts.find_punct("{", select_i or 0)
        where_close = self.ts.matching(where_open) if where_open is not None else len(self.ts) - 1

        if q.modifier == "REDUCED":
            raise self.unsupported("REDUCED", "SELECT REDUCED is not supported; use SELECT or SELECT DISTINCT",
                                   self.ts.find_word("REDUCED", select_i or 0))
        aggregate = bool(q.groupby or q.having or any(
            item.evar is not None and aggregate_name(item["expr"]) for item in q.projection or []))
        renames = {} if aggregate else self._renames(q, select_i, where_open)
        if q.datasetClause:
            i = self.ts.find_word("FROM", select_i or 0, where_open)
            named = i is not None and i + 1 < len(self.ts) and self.ts[i + 1].is_word("NAMED")
            kw = "FROM NAMED" if named else "FROM"
            raise self.unsupported(kw, f"{kw} is not supported; the data comes from the mappings and sources", i)

        # an aggregate query's pattern is a bag (its solutions are counted); its DISTINCT is a no-op, since
        # every grouping variable is selected and each group is one answer row
        self.distinct = q.modifier == "DISTINCT" and not aggregate
        self.time_vars = frozenset(Var(str(v)) for v in _graph_variables(q.where))
        self._collect_names()

        self.pos = where_open + 1 if where_open is not None else 0
        branches = self._group(q.where, None, where_open if where_open is not None else 0)

        self._check_modifiers(q, where_close, aggregate)
        branches = self._rename(branches, renames)

        aggregation = None
        if aggregate:
            aggregation = self._aggregation(q, branches, select_i, where_open, where_close)
            names = [v.name for v in aggregation.group_by + aggregation.arguments]
            located = {n: self.ts.find_var(n, select_i or 0) for n in names}
            projection = self._answer_variables(names, located, branches)
        else:
            projection = self._projection(q, branches, select_i, where_open, where_close)
        columns = aggregation.columns if aggregation is not None else tuple(v.name for v in projection)
        return Query(
            projection=projection,
            branches=tuple(b.to_cq() for b in branches),
            distinct=self.distinct,
            text=self.text,
            prefixes=prefixes,
            location=self.loc(select_i),
            aggregation=aggregation,
            window=self._window(aggregate),
            order_by=self._order_by(q, where_close, columns),
        )

    def _prologue(self, prologue_tree) -> tuple[Prologue, tuple[tuple[str, str], ...]]:
        """BASE and PREFIX declarations, resolved as rdflib's ``translatePrologue`` does."""
        prologue = Prologue()
        prologue.base = self.base or ""
        prefixes: list[tuple[str, str]] = []
        for decl in prologue_tree:
            if decl.name == "Base":
                prologue.base = decl.iri
            elif decl.name == "PrefixDecl":
                iri = prologue.absolutize(decl.iri)
                prologue.bind(decl.prefix, iri)
                prefixes.append((decl.prefix or "", str(iri)))
        return prologue, tuple(prefixes)

    def _resolve_names(self, q: CompValue, prologue: Prologue) -> CompValue:
        """Expand prefixed names / relative IRIs and build rdflib property-path objects."""
        try:
            q = traverse(q, visitPost=functools.partial(translatePName, prologue=prologue))
        except Exception as e:
            msg = str(e)
            if "Unknown namespace prefix" in msg:
                prefix = msg.split(":", 1)[1].strip()
                prefix = "" if prefix == "None" else prefix
                i = self.ts.find(lambda t: t.kind == "pname" and t.text.split(":", 1)[0] == prefix)
                raise QuerySyntaxError(f"undeclared prefix '{prefix}:'; add PREFIX {prefix}: <...>", self.loc(i)) from None
            raise QuerySyntaxError(f"cannot resolve names: {msg}", Location(self.file)) from None
        if q.where is not None:
            q["where"] = traverse(q.where, visitPost=translatePath)
        return q

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
            if not isinstance(source, Variable):
                raise self.unsupported(
                    "SELECT expression",
                    f"SELECT (expression AS ?{new}) is not supported without aggregates; project variables, or "
                    f"rename one: (?x AS ?{new})",
                    open_i,
                )
            name = str(source)
            if name in plain or name in out:
                raise self.unsupported("SELECT expression", f"?{name} is selected twice (as itself or renamed); "
                                       "select each variable once", open_i)
            out[name] = (new, i)
        return out

    def _rename(self, branches: list[_Branch], renames: dict[str, tuple[str, int]]) -> list[_Branch]:
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
            out.append(_Branch(cq.atoms, cq.filters, cq.binds))
        return out

    def _enclosing_paren(self, i: int | None, start: int) -> int | None:
        """Index of the outermost '(' after ``start`` whose bracket pair contains token ``i``."""
        if i is None:
            return None
        j = self.ts.find(lambda t: t.is_punct("("), start, i)
        while j is not None and self.ts.matching(j) < i:
            j = self.ts.find(lambda t: t.is_punct("("), j + 1, i)
        return i if j is None else j

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
        if q.limitoffset:
            kw = "LIMIT" if q.limitoffset.limit is not None else "OFFSET"
            i = self.ts.find_word(("LIMIT", "OFFSET"), where_close)
            if i is not None:
                kw = self.ts[i].text.upper()
            raise self.unsupported(
                kw, f"{kw} is not supported for continuous queries: the answer stream has no end to count from", i
            )
        if q.valuesClause:
            raise self.unsupported("VALUES", "VALUES is not supported; use FILTER with = and ||",
                                   self.ts.find_word("VALUES", where_close))

    def _order_by(self, q: CompValue, where_close: int, columns: tuple[str, ...]) -> tuple[tuple[str, bool], ...]:
        """ORDER BY answer columns: (column, descending) pairs."""
        if not q.orderby:
            return ()
        at = self.ts.find_words("ORDER BY", where_close)
        order: list[tuple[str, bool]] = []
        for c in q.orderby.condition:
            desc = isinstance(c, CompValue) and c.name == "OrderCondition" and c.get("order") == "DESC"
            e = unwrap(c["expr"] if isinstance(c, CompValue) and c.name == "OrderCondition" else c)
            if not isinstance(e, Variable) or str(e) not in columns:
                raise self.unsupported("ORDER BY expression", "ORDER BY orders the answer table by its columns "
                                       f"({', '.join('?' + n for n in columns)})",
                                       self.ts.find_var(str(e), at) if isinstance(e, Variable) else at)
            order.append((str(e), desc))
        return tuple(order)

    def _aggregation(self, q: CompValue, branches: list[_Branch], select_i: int | None, where_open: int | None,
                     where_close: int) -> Aggregation:
        """GROUP BY, the SELECT items, HAVING and ORDER BY of an aggregate query (SPARQL 1.1 §11)."""
        sel = select_i or 0
        tail_end = len(self.ts) - 1
        group: list[Var] = []
        group_i = self.ts.find_words("GROUP BY", where_close)
        for g in (q.groupby.condition if q.groupby else []):
            g = unwrap(g)
            if not isinstance(g, Variable):
                raise self.unsupported("GROUP BY expression", "GROUP BY an expression is not supported; group by "
                                       "variables (bind the value in the pattern)", group_i)
            v = Var(str(g))
            at = self.ts.find_var(v.name, group_i or where_close)
            if v in self.time_vars:
                raise self.unsupported("GROUP BY time variable", f"GROUP BY {v}: {v} is application time (bound by "
                                       "GRAPH); grouping by timestamps is not supported", at)
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
            expr = self._value(item["expr"], open_i, as_i or open_i)
            self._check_grouped(expr, group, open_i, as_i or open_i)
            if Var(name) in bound or Var(name) in self.time_vars or name in [i.name for i in items]:
                raise self.unsupported("SELECT expression", f"(… AS ?{name}): ?{name} is already bound; name the "
                                       "expression with a new variable", as_i)
            items.append(SelectItem(name, expr))
        selected = {i.expression for i in items if isinstance(i.expression, Var)}
        for g in group:
            if g not in selected:
                raise self.unsupported("unselected grouping variable", f"GROUP BY {g}: select every grouping variable "
                                       "(the answer is keyed by the groups)", self.ts.find_var(g.name, group_i or where_close))
        having = None
        if q.having:
            at = self.ts.find_word("HAVING", where_close)
            end = (self.ts.find_words("ORDER BY", at) or tail_end + 1) - 1
            try:
                parts = tuple(condition(c, self.term) for c in q.having.condition)
            except FilterProblem as p:
                raise self.unsupported(p.construct, p.message, self._locate_hint(p.hint, at, end)) from None
            having = parts[0] if len(parts) == 1 else Connective("and", parts)
            self._check_grouped(having, group, at, end)
        aggregation = Aggregation(tuple(group), tuple(items), having)
        for c in aggregation.calls:
            if c.argument is None:
                continue
            at = self.ts.find_var(c.argument.name, sel)
            if c.argument in self.time_vars:
                raise self.unsupported("aggregate of time", f"{c}: {c.argument} is application time (bound by GRAPH); "
                                       "aggregating timestamps is not supported", at)
        return aggregation

    def _value(self, e, start: int, end: int):
        try:
            return value_expression(e, self.term)
        except FilterProblem as p:
            raise self.unsupported(p.construct, p.message, self._locate_hint(p.hint, start, end)) from None

    def _check_grouped(self, e, group: list[Var], start: int, end: int) -> None:
        """A variable outside every aggregate must be a grouping variable (SPARQL 1.1 §11.4)."""
        for v in _ungrouped(e, group):
            raise self.unsupported("ungrouped variable", f"{v} is used outside an aggregate but not grouped "
                                   f"(GROUP BY {v})", self.ts.find_var(v.name, start, end + 1))

    def _projection(
        self, q: CompValue, branches: list[_Branch], select_i: int | None, where_open: int | None, where_close: int
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
            candidates = {v.name for v in all_bound if not v.bnode and v not in self.time_vars}
            names = sorted(candidates, key=lambda n: (first.get(n, len(self.ts)), n))
            star = self.ts.find_punct("*", select_i or 0, where_open)
            located = {n: star for n in names}
        out = self._answer_variables(names, located, branches)
        if not out:
            raise self.unsupported(
                "empty projection", "the query has no answer variables: its WHERE clause binds no variable", select_i
            )
        return out

    def _answer_variables(self, names: list[str], located: dict, branches: list[_Branch]) -> tuple[Var, ...]:
        """The variables ``names`` as answer variables: bound in every branch (a time variable by a GRAPH of
        the branch: its value is the timestamp of that graph, docs/semantics.md)."""
        bound_per_branch = [b.bound_vars() for b in branches]
        all_bound = set().union(*bound_per_branch) if bound_per_branch else set()
        out: list[Var] = []
        for n in names:
            v = Var(n)
            if v not in all_bound:
                raise self.unsupported(
                    "unbound answer variable",
                    f"answer variable ?{n} does not occur in any triple pattern of the WHERE clause",
                    located[n],
                )
            missing = [k for k, bound in enumerate(bound_per_branch, 1) if v not in bound]
            if missing:
                raise self.unsupported(
                    "answer variable unbound in a UNION branch",
                    f"answer variable ?{n} is not bound in every UNION alternative (missing in branch "
                    f"{missing[0]} of {len(branches)}); every alternative must bind every answer variable",
                    located[n],
                )
            out.append(v)
        return tuple(out)

    # ------------------------------------------------------------------ names

    def _collect_names(self) -> None:
        """Remember blank-node labels and variable names so fresh names never collide."""
        for t in self.ts.tokens:
            if t.kind == "bnode":
                self.labels.add(t.text[2:])
            elif t.kind == "var":
                self.taken.add(t.text[1:])
        self.taken |= self.labels

    def _fresh_bnode(self) -> Var:
        while True:
            self.fresh += 1
            name = f"b{self.fresh}"
            if name not in self.taken:
                self.taken.add(name)
                return Var(name, bnode=True)

    def _bnode(self, b: BNode) -> Var:
        """A labelled blank node keeps its label; an anonymous one gets a fresh name (b1, b2, ...)."""
        key = str(b)
        if key in self.labels:
            return Var(key, bnode=True)
        if key not in self.bnode_names:
            self.bnode_names[key] = self._fresh_bnode().name
        return Var(self.bnode_names[key], bnode=True)

    def term(self, x: Identifier) -> Term:
        """rdflib term → model term."""
        if isinstance(x, Variable):
            return Var(str(x))
        if isinstance(x, BNode):
            return self._bnode(x)
        if isinstance(x, URIRef):
            return IRI(str(x))
        if isinstance(x, RDFLiteral):
            if x.language:
                return Literal(str(x), language=x.language)
            return Literal(str(x), str(x.datatype) if x.datatype else XSD + "string")
        raise TypeError(f"unexpected term {x!r}")

    # ------------------------------------------------------------------ graph patterns

    def _group(self, gp: CompValue, time: Var | None, open_i: int) -> list[_Branch]:
        """Branches of a group ``{ ... }`` whose '{' is token ``open_i``; leaves the cursor after its '}'."""
        close_i = self.ts.matching(open_i)
        self.pos = open_i + 1
        if gp.name == "SubSelect":
            raise self.unsupported("subquery", "subqueries (nested SELECT) are not supported",
                                   self.ts.find_word("SELECT", open_i, close_i))
        branches = [_Branch()]
        filters: list[_PendingFilter] = []
        for part in gp.part or []:
            name = part.name
            if name == "TriplesBlock":
                end = self._block_end(self.pos, close_i)
                atoms = self._triples(part["triples"], time, self.pos, end)
                branches = [b.join(_Branch(atoms)) for b in branches]
                self.pos = end
            elif name == "Bind":
                branches = self._bind(part, branches, time, close_i)
            elif name == "Filter":
                f = self._filter(part, close_i)
                if f is not None:  # None: the FILTER was a window only
                    filters.append(f)
            elif name == "GraphGraphPattern":
                at = self.pos
                branches = self._limit(_product(branches, self._graph(part, close_i)), at)
            elif name == "GroupOrUnionGraphPattern":
                alternatives: list[_Branch] = []
                first_open = self.ts.find_punct("{", self.pos, close_i)
                for g in part["graph"]:
                    sub_open = self.ts.find_punct("{", self.pos, close_i)
                    alternatives.extend(self._group(g, time, sub_open))
                branches = self._limit(_product(branches, alternatives), first_open)
            elif name in _UNSUPPORTED_PARTS:
                construct, kw, message = _UNSUPPORTED_PARTS[name]
                raise self.unsupported(construct, message, self.ts.find_word(kw, self.pos, close_i))
            else:
                raise self.unsupported(name, f"{name} is not supported", self.pos)
        branches = self._apply_filters(branches, filters, time)
        self.pos = close_i + 1
        return branches

    def _bind(self, part: CompValue, branches: list[_Branch], time: Var | None, close_i: int) -> list[_Branch]:
        """``BIND(expression AS ?v)``: ``?v`` takes the value of ``+ - * /`` over variables bound before it in the
        group and numbers; a filter or the projection reading ``?v`` reads that value (SPARQL 1.1 §18.2.2.5)."""
        at = self.ts.find_word("BIND", self.pos, close_i)
        start = at if at is not None else self.pos
        open_i = self.ts.find_punct("(", start, close_i)
        end = self.ts.matching(open_i) if open_i is not None else start
        self.pos = end + 1
        var = Var(str(part["var"]))
        expr = self._value(part["expr"], start, end)
        if any(isinstance(x, Aggregate) for x in _walk(expr)):
            raise self.unsupported("BIND of an aggregate", "BIND cannot compute an aggregate; aggregate in the "
                                   "SELECT clause with GROUP BY", at)
        var_at = self.ts.find_var(var.name, start, end + 1)
        if time is not None:
            raise self.unsupported("BIND in GRAPH", "BIND inside GRAPH ?t is not supported; bind the value outside "
                                   "the GRAPH block", at)
        for b in branches:
            bound = b.term_vars() | {a.time for a in b.atoms if a.time is not None}
            if var in bound:
                raise self.unsupported("BIND", f"BIND(… AS {var}): {var} is already bound before the BIND in its group "
                                       "(SPARQL forbids rebinding it); name the value with a new variable", var_at)
            for v in value_variables(expr):
                if v in self.time_vars:
                    raise self.unsupported("BIND", f"BIND reads the time variable {v}; arithmetic on application "
                                           "time is not supported (compare time variables in FILTER)",
                                           self.ts.find_var(v.name, start, end + 1))
                if v not in bound:
                    raise self.unsupported("BIND", f"BIND reads {v}, which no pattern before it in the group binds "
                                           "(its value would be unbound)", self.ts.find_var(v.name, start, end + 1))
        return [_Branch(b.atoms, b.filters, b.binds + ((var, expr),)) for b in branches]

    def _limit(self, branches: list[_Branch], at: int) -> list[_Branch]:
        """Fail when the DNF grows beyond MAX_BRANCHES conjunctive queries."""
        if len(branches) > MAX_BRANCHES:
            raise self.unsupported(
                "too many UNION / || alternatives",
                f"the query expands to more than {MAX_BRANCHES} conjunctive queries (UNION and || multiply out); "
                "simplify the nesting of UNION and ||",
                at,
            )
        return branches

    def _block_end(self, start: int, close_i: int) -> int:
        """End (exclusive) of the triples block starting at token ``start``."""
        i = self.ts.find(lambda t: t.is_punct("{", "}") or t.is_word(*_BLOCK_END_WORDS), start, close_i)
        return close_i if i is None else i

    def _graph(self, part: CompValue, close_i: int) -> list[_Branch]:
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

    def _triples(self, blocks, time: Var | None, start: int, end: int) -> tuple[Atom, ...]:
        """Atoms of a triples block (rdflib has already expanded ``;`` ``,`` and ``[ ]``)."""
        flat: list[Identifier] = [x for block in blocks for x in block]
        roles = tk.triple_roles(self.ts, start, end)
        atoms: list[Atom] = []
        for k in range(0, len(flat), 3):
            s, p, o = flat[k], flat[k + 1], flat[k + 2]
            for s2, p2, o2 in self._expand_path(s, p, o, roles):
                atoms.append(self._atom(s2, p2, o2, time, roles))
        return tuple(atoms)

    def _role_token(self, roles: list[tuple[int, str]], wanted: set[str], pred) -> int | None:
        for i, role in roles:
            if role in wanted and pred(self.ts[i]):
                return i
        return roles[0][0] if roles else self.pos

    def _expand_path(self, s, p, o, roles) -> list[tuple]:
        """A sequence path ``s :p/:q o`` becomes ``s :p _:b . _:b :q o``; other paths are rejected."""
        if not isinstance(p, Path):
            return [(s, p, o)]
        preds = self._path_steps(p, roles)
        nodes = [s] + [self._fresh_bnode() for _ in preds[1:]] + [o]
        return [(nodes[k], pred, nodes[k + 1]) for k, pred in enumerate(preds)]

    def _path_steps(self, p, roles) -> list[URIRef]:
        """The IRIs of a pure sequence path, in order; any other path operator is an error."""
        if not isinstance(p, Path):
            return [p]
        if isinstance(p, SequencePath):
            return [step for arg in p.args for step in self._path_steps(arg, roles)]
        if isinstance(p, AlternativePath):
            op, what = "|", "alternative paths"
        elif isinstance(p, MulPath):
            op, what = p.mod, "repetition paths"
        elif isinstance(p, InvPath):
            op, what = "^", "inverse paths"
        elif isinstance(p, NegatedPath):
            op, what = "!", "negated property sets"
        else:  # pragma: no cover - rdflib has no other path kinds
            op, what = str(p), "this property path"
        i = self._role_token(roles, {tk.PATH_OP}, lambda t: t.text == op)
        raise self.unsupported(
            f"property path {op}",
            f"property path operator {op} ({what}) is not supported; only sequences p/q are",
            i,
        )

    def _atom(self, s, p, o, time: Var | None, roles) -> Atom:
        """One triple pattern → ClassAtom / PropertyAtom, enforcing the term rules."""
        if isinstance(s, Var):  # a fresh blank node from a path expansion
            subj: Term = s
        else:
            subj = self.term(s)
        obj: Term = o if isinstance(o, Var) else self.term(o)
        if isinstance(p, Variable):
            raise self.unsupported(
                "variable predicate",
                f"variable ?{p} in predicate position is not supported; use an ontology property or class",
                self._role_token(roles, {tk.PREDICATE}, lambda t: t.var_name == str(p)),
            )
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

    # ------------------------------------------------------------------ filters

    def _filter(self, part: CompValue, close_i: int) -> _PendingFilter:
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
        try:
            # bag semantics needs exclusive alternatives (one answer per solution), sets do not
            dnf = (to_dnf if self.distinct else to_exclusive_dnf)(expr, self.term, MAX_BRANCHES)
            for conj in dnf:
                for c in conj:
                    problem = time_comparison_problem(c, self.time_vars)
                    if problem:
                        raise problem
                    if self.distinct and isinstance(c.right if isinstance(c.right, Shifted) else c.left, Shifted):
                        raise FilterProblem("interval join", "SELECT DISTINCT with an interval join (a time variable "
                                            "moved by a duration) is not supported yet; use SELECT (each answer once "
                                            "per solution) or an aggregate", Hint("word", "FILTER"))
        except FilterProblem as p:
            raise self.unsupported(p.construct, p.message, self._locate_hint(p.hint, start, end)) from None
        return _PendingFilter(expr, start, end, dnf)

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
                raise self.unsupported(p.construct, p.message, self._locate_hint(p.hint, start, end)) from None
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

    def _filter_end(self, start: int) -> int:
        """Last token of the FILTER at ``start``: ``FILTER (...)``, ``FILTER fn(...)``, ``FILTER [NOT] EXISTS {...}``."""
        j = start + 1
        while j < len(self.ts) and not self.ts[j].is_punct("(", "{"):
            j += 1
        return self.ts.matching(j) if j < len(self.ts) else len(self.ts) - 1

    def _locate_hint(self, hint: Hint, start: int, end: int) -> int:
        ts, stop = self.ts, end + 1
        i: int | None = None
        if hint.kind == "word":
            i = ts.find_word(hint.text, start, stop)
        elif hint.kind == "words":
            i = ts.find_words(hint.text, start, stop)
        elif hint.kind == "punct":
            i = ts.find_punct(hint.text, start + 1, stop)
        elif hint.kind == "var":
            i = ts.find_var(hint.text, start, stop)
        elif hint.kind == "callee":
            i = ts.find(
                lambda t: t.kind in ("iri", "pname"), start, stop
            )
            while i is not None and not (i + 1 < len(ts) and ts[i + 1].is_punct("(")):
                i = ts.find(lambda t: t.kind in ("iri", "pname"), i + 1, stop)
        return start if i is None else i

    def _apply_filters(self, branches: list[_Branch], filters: list[_PendingFilter], time: Var | None) -> list[_Branch]:
        """Attach a group's FILTERs to every branch of the group (SPARQL filter scope).

        A FILTER sees only the variables bound inside its group — not those of
        enclosing groups, and not the variable of the GRAPH the group belongs to.
        A variable bound in no branch is an error; an alternative of the DNF
        that uses a variable unbound in some branch is never true there and is
        dropped for that branch.
        """
        if not filters:
            return branches

        def bound(b: _Branch) -> set[Var]:
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
        out: list[_Branch] = []
        for b, vs in zip(branches, bound_sets):
            alternatives: list[tuple[Comparison, ...]] = [()]
            for f in filters:
                if self.distinct:
                    here = [c for c in f.dnf if _vars_of(c) <= vs]
                else:  # exclusive alternatives, unbound comparisons read as false first
                    here = to_exclusive_dnf(f.expr, self.term, MAX_BRANCHES, bound=vs)
                alternatives = [a + c for a in alternatives for c in here]
                self._limit(alternatives, f.start)
            out.extend(_Branch(b.atoms, b.filters + a, b.binds) for a in alternatives)
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


def _walk(e):
    """A value expression and its sub-expressions."""
    yield e
    if isinstance(e, Arithmetic):
        yield from _walk(e.left)
        yield from _walk(e.right)


def _ungrouped(e, group: list[Var]) -> list[Var]:
    if isinstance(e, Var):
        return [] if e in group else [e]
    if isinstance(e, (Arithmetic, Comparison)):
        return _ungrouped(e.left, group) + _ungrouped(e.right, group)
    if isinstance(e, Connective):
        return [v for p in e.parts for v in _ungrouped(p, group)]
    return []  # a constant, or an aggregate (its variable is aggregated)


def _vars_of(conj: tuple[Comparison, ...]) -> set[Var]:
    return {v for c in conj for v in c.variables}


def _graph_variables(where) -> list[Variable]:
    """Variables named by ``GRAPH ?t`` anywhere in the pattern (the time variables)."""
    out: list[Variable] = []

    def walk(x) -> None:
        if isinstance(x, CompValue):
            if x.name == "GraphGraphPattern" and isinstance(x.term, Variable):
                out.append(x["term"])
            for v in x.values():
                walk(v)
        elif isinstance(x, (list, tuple)):
            for v in x:
                walk(v)

    walk(where)
    return out
