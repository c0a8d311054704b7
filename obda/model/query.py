"""Ontology queries: unions of conjunctive queries with application time.

A SPARQL ``SELECT`` is parsed (``obda.query``) into a :class:`Query`: a
projection, a DISTINCT flag and a union of :class:`CQ` branches.  Each CQ is a
set of atoms over the ontology vocabulary plus a conjunction of comparisons.
An atom inside ``GRAPH ?t { ... }`` carries ``time=Var('t')``: it is a stream
assertion at application time ``?t``; an atom with ``time=None`` is static.

Terms are plain frozen dataclasses so that rewriting (``obda.rewrite``) and
unfolding (``obda.mapping``) can hash, compare and substitute them freely; they are
defined in :mod:`obda.model.query_terms`, computed values (aggregates, arithmetic,
function calls) in :mod:`obda.model.values`, and both are importable from here.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass, field, replace
from typing import Iterable, Union

from obda.errors import Location
from obda.model.query_terms import RDF_TYPE, XSD, IRI, Literal, Shifted, Term, Var  # noqa: F401 (the model's names)
from obda.model.values import (  # noqa: F401 (the model's names)
    AGGREGATE_FUNCTIONS, ARITHMETIC_OPS, BOOLEAN_FUNCTIONS, CASTS, COMPARISON_OPS, ERROR_PROPAGATING, FUNCTIONS,
    Aggregate, Arithmetic, Call, ValueExpression, is_computed, replacement_parts, substitute_expression,
    value_variables,
)


@dataclass(frozen=True, order=True)
class ClassAtom:
    """``cls(term)``, at application time ``time`` (None: static)."""

    cls: str
    term: Term
    time: Var | None = None

    @property
    def terms(self) -> tuple[Term, ...]:
        return (self.term,)

    @property
    def predicate(self) -> str:
        return self.cls

    def __str__(self) -> str:
        s = f"{short_iri(self.cls)}({self.term})"
        return s + (f"@{self.time}" if self.time else "")


@dataclass(frozen=True, order=True)
class PropertyAtom:
    """``prop(subject, object)`` for an object or data property, at time ``time``."""

    prop: str
    subject: Term
    object: Term
    time: Var | None = None

    @property
    def terms(self) -> tuple[Term, ...]:
        return (self.subject, self.object)

    @property
    def predicate(self) -> str:
        return self.prop

    def __str__(self) -> str:
        s = f"{short_iri(self.prop)}({self.subject}, {self.object})"
        return s + (f"@{self.time}" if self.time else "")


Atom = Union[ClassAtom, PropertyAtom]

#: ``a op b`` == ``b FLIP[op] a`` (the one table of it: mapping, analysis and execution import it)
FLIP = {"<": ">", "<=": ">=", "=": "=", "!=": "!=", ">": "<", ">=": "<="}
#: the comparison that holds exactly where one does not (of values that compare without an error)
NEGATE = {"<": ">=", "<=": ">", "=": "!=", "!=": "=", ">": "<=", ">=": "<"}
#: ``op`` -> the comparison itself, for Python values and Spark columns alike (the one definition: the
#: engines, the aggregates, the Spark plans and the analysis's constant folding use it)
OPS = {"=": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge}


def sql_compare(op: str, a, b) -> bool:
    """SQL's ``a op b`` over Python values: NULL compares false, and so do values of types that do not compare."""
    if a is None or b is None:
        return False
    try:
        return OPS[op](a, b)
    except TypeError:
        return False


@dataclass(frozen=True, order=True)
class Comparison:
    """``left op right``; op in ``< <= = != > >=``. In a CQ's filters the sides are terms, a time variable
    moved by a duration (:class:`Shifted`) or computed values (:class:`Arithmetic`, :class:`Call`); in an
    aggregation's HAVING they are value expressions (an error is false).  ``not_true``: the filter holds where
    ``left op right`` is *not true* — false, or an error (a branch of an exclusive DNF, :mod:`obda.query.dnf`)."""

    op: str
    left: Term
    right: Term
    not_true: bool = False

    def __post_init__(self) -> None:
        if self.op not in COMPARISON_OPS:
            raise ValueError(f"unknown comparison operator {self.op!r}")

    @property
    def variables(self) -> frozenset[Var]:
        """The variables of a filter comparison's sides (the time variable of a :class:`Shifted` side too, the
        variables of a computed side)."""
        out: set[Var] = set()
        for t in (self.left, self.right):
            if isinstance(t, Shifted):
                out.add(t.var)
            elif isinstance(t, Var):
                out.add(t)
            elif isinstance(t, (Arithmetic, Call)):
                out.update(value_variables(t))
        return frozenset(out)

    def flipped(self) -> "Comparison":
        return Comparison(FLIP[self.op], self.right, self.left, self.not_true)

    def __str__(self) -> str:
        return f"{self.left} {self.op} {self.right}"


@dataclass(frozen=True)
class CQ:
    """A conjunctive query: atoms, a conjunction of comparisons (a branch of a UCQ), and the values its ``BIND``s
    compute: ``binds`` pairs a new variable with an expression (``+ - * /`` over the CQ's variables and numbers);
    a filter or the projection reading that variable reads the value."""

    atoms: tuple[Atom, ...]
    filters: tuple[Comparison, ...] = ()
    binds: tuple[tuple[Var, "ValueExpression"], ...] = ()
    # OPTIONAL's anti-join, MINUS, FILTER [NOT] EXISTS: conditions on another pattern's solutions (:class:`Exists`)
    checks: tuple["Exists", ...] = ()

    @property
    def check_inputs(self) -> frozenset[Var]:
        """The variables the checks compare with another pattern's (kept by rewriting, as answer variables)."""
        return frozenset(v for c in self.checks for v in c.outer + tuple(b for _, _, b in c.compares))

    @property
    def bind_inputs(self) -> frozenset[Var]:
        """The variables the BIND expressions read (their values must survive rewriting, as answer variables do)."""
        return frozenset(v for _, e in self.binds for v in value_variables(e))

    @property
    def variables(self) -> frozenset[Var]:
        out: set[Var] = set(v for v, _ in self.binds) | self.bind_inputs
        for a in self.atoms:
            out.update(t for t in a.terms if isinstance(t, Var))
            if a.time is not None:
                out.add(a.time)
        for c in self.filters:
            out.update(c.variables)
        return frozenset(out | self.check_inputs)

    @property
    def time_variables(self) -> frozenset[Var]:
        return frozenset(a.time for a in self.atoms if a.time is not None)

    def substitute(self, mapping: dict[Var, Term]) -> "CQ":
        def s(t):
            if isinstance(t, Shifted):
                return Shifted(mapping.get(t.var, t.var), t.micros)
            if isinstance(t, (Arithmetic, Call)):
                return substitute_expression(t, mapping)
            return mapping.get(t, t) if isinstance(t, Var) else t

        atoms = []
        for a in self.atoms:
            time = s(a.time) if a.time is not None else None
            if isinstance(a, ClassAtom):
                atoms.append(replace(a, term=s(a.term), time=time))
            else:
                atoms.append(replace(a, subject=s(a.subject), object=s(a.object), time=time))
        filters = tuple(replace(c, left=s(c.left), right=s(c.right)) for c in self.filters)
        binds = tuple((s(v), substitute_expression(e, mapping)) for v, e in self.binds)
        checks = tuple(replace(c, outer=tuple(mapping.get(v, v) for v in c.outer), window=c.window and replace(
            c.window, outer=mapping.get(c.window.outer, c.window.outer)),
            compares=tuple((a, op, mapping.get(b, b)) for a, op, b in c.compares)) for c in self.checks)
        return CQ(tuple(atoms), filters, binds, checks)

    def with_atoms(self, atoms: Iterable[Atom], filters: Iterable[Comparison] | None = None) -> "CQ":
        """This CQ with other atoms (and filters); its BINDs and checks are kept."""
        return CQ(tuple(atoms), self.filters if filters is None else tuple(filters), self.binds, self.checks)

    def __str__(self) -> str:
        parts = [str(a) for a in self.atoms] + [str(f) for f in self.filters]
        parts += [f"BIND({e} AS {v})" for v, e in self.binds]
        parts += [str(c) for c in self.checks]
        return " ∧ ".join(parts)


ASK_COLUMN = "boolean"  # the answer column of an ASK (SPARQL 1.1 §16.3; the SPARQL results formats' ``boolean``)
WINDOW_ALIAS = "__w"  # in SQL, the FROM alias of the query a check in a window of time reads (rules A3–A6)
COMPARE_ALIAS = "__c"  # that of a check whose FILTER compares the pattern's variables with the answer's


@dataclass(frozen=True, order=True)
class TimeWindow:
    """Where a check's pattern is matched in time, relative to the answer's (docs/analysis.md, rules A2–A6): the
    pattern's time ``inner`` (projected last by the check's pattern) within ``[outer + lower, outer + upper]``
    (microseconds; ``*_strict``: the bound itself excluded; None: unbounded on that side)."""

    outer: Var
    inner: Var
    lower: int | None
    lower_strict: bool
    upper: int | None
    upper_strict: bool

    def __str__(self) -> str:
        lo = "-∞" if self.lower is None else f"{self.outer}{self.lower:+d}µs"
        hi = "+∞" if self.upper is None else f"{self.outer}{self.upper:+d}µs"
        return f"{self.inner} ∈ {'(' if self.lower_strict else '['}{lo}, {hi}{')' if self.upper_strict else ']'}"


@dataclass(frozen=True)
class Exists:
    """A condition of a CQ on the solutions of another pattern (docs/semantics.md, "OPTIONAL, MINUS and NOT
    EXISTS"): a solution of the CQ is kept when some solution of ``pattern`` (``negated``: none) agrees with it
    on the shared variables.  ``pattern`` is a query of its own, ``SELECT DISTINCT`` the shared variables (its
    projection, in the order of ``outer``, the CQ's variables they are compared with); its variables are its own.
    ``construct`` (OPTIONAL, MINUS, NOT EXISTS, EXISTS) and ``location`` say where it comes from.  Two checks
    are equal when they compare the same variables with the same pattern."""

    pattern: "Query"
    outer: tuple[Var, ...]
    negated: bool = True
    # the pattern's other variables that the query projects or filters on: named (never anonymous individuals)
    # when the pattern is rewritten, as they are in the branch joining it (OPTIONAL's), so both agree
    keep: tuple[Var, ...] = ()
    construct: str = field(default="NOT EXISTS", compare=False)
    location: Location = field(default_factory=Location, compare=False)
    window: TimeWindow | None = None  # the pattern in a window of the answer's time (it projects its time last)
    # a FILTER of the pattern comparing its variables with the answer's: ``(pattern's, op, answer's)``, each
    # pattern variable projected after the shared ones (and before the window's time)
    compares: tuple[tuple[Var, str, Var], ...] = ()

    def __str__(self) -> str:
        head = "NOT EXISTS" if self.negated else "EXISTS"
        inner = "  ∪  ".join(f"{{{b}}}" for b in self.pattern.branches)
        shared = " ".join(map(str, self.outer))
        where = [str(self.window)] if self.window else []
        where += [f"{a} {op} {b}" for a, op, b in self.compares]
        return f"{head}[{shared}] {inner}" + (f" where {' ∧ '.join(where)}" if where else "")


@dataclass(frozen=True)
class Connective:
    """``&&`` (op ``and``) or ``||`` (op ``or``) of HAVING conditions (Kleene logic, an error is false at the top)."""

    op: str
    parts: tuple["Condition", ...]

    def __str__(self) -> str:
        return "(" + (" && " if self.op == "and" else " || ").join(map(str, self.parts)) + ")"


Condition = Union[Comparison, Connective]  # a HAVING comparison's sides are value expressions


@dataclass(frozen=True)
class SelectItem:
    """One answer column of an aggregate query: ``?name`` or ``(expression AS ?name)``."""

    name: str
    expression: ValueExpression


@dataclass(frozen=True)
class Aggregation:
    """The grouping and aggregation of a SPARQL query (``GROUP BY``, aggregates, ``HAVING``, ``ORDER BY``).

    The query's WHERE clause is the :class:`Query` it belongs to, whose ``projection`` is
    then the *characteristic query* (Arasu §8.2): the grouping variables, then every
    aggregated variable, each once, as a bag. ``group_by`` is empty for one global group.
    """

    group_by: tuple[Var, ...]
    items: tuple[SelectItem, ...]
    having: Condition | None = None
    # ORDER BY an expression the SELECT does not name (ORDER BY DESC(COUNT(?s))): computed per group under a
    # fresh name, ordering the answer table, never answered
    order_items: tuple[SelectItem, ...] = ()

    @property
    def columns(self) -> tuple[str, ...]:
        return tuple(i.name for i in self.items)

    @property
    def calls(self) -> tuple[Aggregate, ...]:
        """Every distinct aggregate of the SELECT list, ORDER BY and HAVING, in order of first occurrence."""
        out: dict[Aggregate, None] = {}

        def walk(e) -> None:
            if isinstance(e, Aggregate):
                out[e] = None
            elif isinstance(e, (Arithmetic, Comparison)):
                walk(e.left)
                walk(e.right)
            elif isinstance(e, Connective):
                for p in e.parts:
                    walk(p)

        for it in self.items + self.order_items:
            walk(it.expression)
        if self.having is not None:
            walk(self.having)
        return tuple(out)

    @property
    def arguments(self) -> tuple[Var, ...]:
        """The aggregated variables that are not grouping variables, each once, in order."""
        return tuple(dict.fromkeys(c.argument for c in self.calls
                                   if c.argument is not None and c.argument not in self.group_by))

    def __str__(self) -> str:
        items = " ".join(i.name if i.expression == Var(i.name) else f"({i.expression} AS ?{i.name})" for i in self.items)
        out = f"{items} GROUP BY {' '.join(map(str, self.group_by))}" if self.group_by else items
        return out + (f" HAVING {self.having}" if self.having is not None else "")


@dataclass(frozen=True)
class Window:
    """A sliding window in application time: ``FILTER(?t > NOW() - width)`` (``inclusive``: ``>=``).

    ``NOW()`` is the timestamp being closed: at a closed timestamp ``T`` the query sees the
    solutions whose ``?t`` is in ``(T - width, T]`` (``[T - width, T]`` when inclusive).
    ``width`` is in microseconds.
    """

    variable: Var
    width: int
    inclusive: bool = False

    def contains(self, ts: int, now: int) -> bool:
        """Whether a solution at time ``ts`` is in the window at ``now``."""
        return (ts >= now - self.width) if self.inclusive else (ts > now - self.width)

    def leaves_at(self, ts: int) -> int:
        """The first time at which a solution at ``ts`` is no longer in the window: ``ts + width`` (one µs
        later when inclusive). An instant, not a timestamp of the data: an aggregate's changelog shows
        the solution leaving at the first closed data timestamp at or after it (``obda.execution.aggregate``)."""
        return ts + self.width + (1 if self.inclusive else 0)

    def __str__(self) -> str:
        return f"{self.variable} {'>=' if self.inclusive else '>'} NOW() - {self.width}µs"


@dataclass(frozen=True)
class Query:
    """A parsed SPARQL SELECT: a union of CQs with a projection.

    ``distinct`` is True for ``SELECT DISTINCT`` (set semantics, Π = π) and
    False for ``SELECT`` (bag semantics, Π = π̇).  ``projection`` lists the
    answer variables in SELECT order; time variables are never projected.
    With ``aggregation`` the projection is the aggregation's characteristic query
    (its grouping variables, then its aggregated variables) and the answer columns are
    ``aggregation.columns`` (an ASK's: ``boolean``).  ``branches`` holds the disjunctive normal form of the WHERE clause: one CQ
    per UNION branch and per ``||`` alternative of FILTERs.
    """

    projection: tuple[Var, ...]
    branches: tuple[CQ, ...]
    distinct: bool = False
    text: str = ""
    prefixes: tuple[tuple[str, str], ...] = ()
    location: Location = field(default_factory=Location, compare=False)
    aggregation: Aggregation | None = None
    window: Window | None = None  # aggregate queries: FILTER(?t > NOW() - duration)
    # ORDER BY: (answer column, descending) pairs. They order an answer *table*: an aggregate query's current
    # answer (``--final``), never its changelog (application-time order); the answers of a query over static
    # data only (no GRAPH), which are emitted once. A continuous query without aggregates has none.
    order_by: tuple[tuple[str, bool], ...] = ()
    # LIMIT / OFFSET of a query over static data only (its answer table, after ORDER BY and DISTINCT)
    limit: int | None = None
    offset: int = 0
    # ASK: the query is SELECT DISTINCT (true AS ?boolean) over its pattern (at most one answer, once it has a
    # solution); over static data only, its answer table is one row, ``false`` when the pattern has none
    ask: bool = False
    # ORDER BY of a query over static data only by a value the SELECT does not project (an expression, another
    # variable): that many hidden columns end ``projection``, computed and sorted on, never answered
    order_keys: int = 0

    @property
    def columns(self) -> tuple[str, ...]:
        """The answer's column names: the projection (without ORDER BY's hidden columns), or the aggregation's
        SELECT items."""
        if self.aggregation is not None:
            return (ASK_COLUMN,) if self.ask else self.aggregation.columns
        return tuple(v.name for v in self.projection[:len(self.projection) - self.order_keys])

    @property
    def time_variables(self) -> frozenset[Var]:
        out: set[Var] = set()
        for b in self.branches:
            out |= b.time_variables
        return frozenset(out)

    def with_branches(self, branches: Iterable[CQ]) -> "Query":
        return replace(self, branches=tuple(branches))

    def __str__(self) -> str:
        head = ("SELECT DISTINCT " if self.distinct else "SELECT ") + " ".join(map(str, self.projection))
        if self.aggregation is not None:
            head = "SELECT " + str(self.aggregation) + " OF " + head
        return head + " WHERE " + "  ∪  ".join(f"{{{b}}}" for b in self.branches)


_SHORT = {
    "http://www.w3.org/1999/02/22-rdf-syntax-ns#": "rdf:",
    "http://www.w3.org/2000/01/rdf-schema#": "rdfs:",
    "http://www.w3.org/2002/07/owl#": "owl:",
    XSD: "xsd:",
}


def short_iri(iri: str) -> str:
    for ns, p in _SHORT.items():
        if iri.startswith(ns):
            return p + iri[len(ns):]
    for sep in ("#", "/"):
        if sep in iri:
            return iri.rsplit(sep, 1)[1] or iri
    return iri
