"""Ontology queries: unions of conjunctive queries with application time.

A SPARQL ``SELECT`` is parsed (``obda.query``) into a :class:`Query`: a
projection, a DISTINCT flag and a union of :class:`CQ` branches.  Each CQ is a
set of atoms over the ontology vocabulary plus a conjunction of comparisons.
An atom inside ``GRAPH ?t { ... }`` carries ``time=Var('t')``: it is a stream
assertion at application time ``?t``; an atom with ``time=None`` is static.

Terms are plain frozen dataclasses so that rewriting (``obda.rewrite``) and
unfolding (``obda.mapping``) can hash, compare and substitute them freely.
"""

from __future__ import annotations

import json
import operator
from dataclasses import dataclass, field, replace
from typing import Iterable, Union

from obda.errors import Location

XSD = "http://www.w3.org/2001/XMLSchema#"
RDF_TYPE = "http://www.w3.org/1999/02/22-rdf-syntax-ns#type"


@dataclass(frozen=True, order=True)
class Var:
    """A variable.  ``bnode`` marks a blank node of the query text (never projected)."""

    name: str
    bnode: bool = False

    def __str__(self) -> str:
        return ("_:" if self.bnode else "?") + self.name


@dataclass(frozen=True, order=True)
class IRI:
    value: str

    def __str__(self) -> str:
        return f"<{self.value}>"


@dataclass(frozen=True, order=True)
class Literal:
    """An RDF literal: lexical form, datatype IRI (xsd:string if plain) and language tag."""

    lexical: str
    datatype: str = XSD + "string"
    language: str | None = None

    def __str__(self) -> str:
        if self.language:
            return f'"{self.lexical}"@{self.language}'
        if self.datatype == XSD + "string":
            return f'"{self.lexical}"'
        return f'"{self.lexical}"^^<{self.datatype}>'

    @property
    def is_datetime(self) -> bool:
        return self.datatype in (XSD + "dateTime", XSD + "dateTimeStamp", XSD + "date")


Term = Union[Var, IRI, Literal]


@dataclass(frozen=True, order=True)
class Shifted:
    """``?t + duration``: a time variable moved by a constant (``micros``, negative for ``- duration``).

    Only a side of a comparison between two time variables: ``?t2 <= ?t1 + "PT5M"^^xsd:dayTimeDuration``
    (an *interval join*, a difference constraint ``?t2 - ?t1 <= 5 min``).
    """

    var: Var
    micros: int

    def __str__(self) -> str:
        sign = "+" if self.micros >= 0 else "-"
        seconds = f"{abs(self.micros) / 1_000_000:f}".rstrip("0").rstrip(".")
        return f'{self.var} {sign} "PT{seconds}S"'



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
        s = f"{_short(self.cls)}({self.term})"
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
        s = f"{_short(self.prop)}({self.subject}, {self.object})"
        return s + (f"@{self.time}" if self.time else "")


Atom = Union[ClassAtom, PropertyAtom]

COMPARISON_OPS = ("<", "<=", "=", "!=", ">", ">=")
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


AGGREGATE_FUNCTIONS = ("count", "count_distinct", "sum", "avg", "min", "max", "sample", "median",  # median: SQL only
                       "group_concat", "group_concat_distinct", "sum_distinct", "avg_distinct")
# the set functions whose value is an error as soon as one value of the group is (SPARQL 1.1 §18.5.1; COUNT skips
# errors, SAMPLE picks a value): where a solution may leave their argument unbound, obda refuses them (SQL skips NULL)
ERROR_PROPAGATING = ("sum", "avg", "min", "max", "median", "group_concat", "group_concat_distinct", "sum_distinct",
                     "avg_distinct")
ARITHMETIC_OPS = ("+", "-", "*", "/")


@dataclass(frozen=True, order=True)
class Aggregate:
    """A SPARQL set function over the solutions of a group: ``COUNT(*)`` has ``argument`` None.

    ``function`` is one of :data:`AGGREGATE_FUNCTIONS` (``count_distinct`` is ``COUNT(DISTINCT ?x)``,
    ``group_concat_distinct`` ``GROUP_CONCAT(DISTINCT ?x)``, ``sum_distinct`` / ``avg_distinct`` ``SUM`` / ``AVG``
    of the group's distinct values; ``MIN``, ``MAX`` and ``SAMPLE`` of the distinct
    values are those of the values); ``separator`` is GROUP_CONCAT's (SPARQL's default: one space).
    ``location``: where the call is in the query text, for errors (not compared).
    """

    function: str
    argument: Var | None = None
    separator: str = " "
    location: Location | None = field(default=None, compare=False, repr=False)
    # an aggregate of an expression (``AVG(?v * 2)``) reads a fresh variable a BIND computes
    # (obda.query.aggregate_args): the call and its expression as the query wrote them, for messages
    written: tuple[str, str] | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.function not in AGGREGATE_FUNCTIONS:
            raise ValueError(f"unknown aggregate function {self.function!r}")

    @property
    def shown_argument(self) -> str:
        """The argument as the query wrote it: the variable, or the expression obda computes into one."""
        return self.written[1] if self.written else str(self.argument)

    def __str__(self) -> str:
        if self.written:
            return self.written[0]
        if self.function in ("count_distinct", "sum_distinct", "avg_distinct"):
            return f"{self.function.split('_')[0].upper()}(DISTINCT {self.argument})"
        if self.function.startswith("group_concat"):
            distinct = "DISTINCT " if self.function.endswith("_distinct") else ""
            sep = "" if self.separator == " " else f"; SEPARATOR={json.dumps(self.separator, ensure_ascii=False)}"
            return f"GROUP_CONCAT({distinct}{self.argument}{sep})"
        return f"{self.function.upper()}({self.argument if self.argument is not None else '*'})"


@dataclass(frozen=True)
class Arithmetic:
    """``left op right`` over numbers (op in ``+ - * /``); SPARQL's numeric type promotion applies."""

    op: str
    left: "ValueExpression"
    right: "ValueExpression"

    def __post_init__(self) -> None:
        if self.op not in ARITHMETIC_OPS:
            raise ValueError(f"unknown arithmetic operator {self.op!r}")

    def __str__(self) -> str:
        return f"({self.left} {self.op} {self.right})"


#: SPARQL 1.1 §17.4 functions obda computes in FILTER and BIND (docs/semantics.md, "Functions"): name -> the
#: number of arguments (None: one or more)
FUNCTIONS = {
    "STR": 1, "STRLEN": 1, "LCASE": 1, "UCASE": 1, "CONTAINS": 2, "STRSTARTS": 2, "STRENDS": 2, "CONCAT": None,
    "ABS": 1, "ROUND": 1, "CEIL": 1, "FLOOR": 1, "NOT": 1, "REGEX": None, "REPLACE": None, "SUBSTR": None,
    "STRBEFORE": 2, "STRAFTER": 2, "BOUND": 1, "LANG": 1, "LANGMATCHES": 2, "isIRI": 1, "isLITERAL": 1, "isBLANK": 1,
    "isNUMERIC": 1, "DATATYPE": 1, "sameTerm": 2,
    "EBV": 1,  # a variable alone as a condition (FILTER(?v)): its effective boolean value (§17.2.2)
    "YEAR": 1, "MONTH": 1, "DAY": 1, "HOURS": 1, "MINUTES": 1, "SECONDS": 1, "IF": 3, "COALESCE": None,
    # a comparison or a connective as a value (IF's condition)
    "=": 2, "!=": 2, "<": 2, "<=": 2, ">": 2, ">=": 2, "AND": None, "OR": None,
}
#: the XPath constructor functions (casts, SPARQL 1.1 §17.5) obda computes: the datatype IRI -> the function's name
CASTS = {XSD + t: f"xsd:{t}" for t in ("integer", "decimal", "double", "float", "boolean", "string")}
FUNCTIONS.update({name: 1 for name in CASTS.values()})


def replacement_parts(text: str) -> tuple[str | int, ...] | None:
    """REPLACE's replacement in XPath's syntax (``fn:replace``) as literal texts and group numbers: ``$1`` … ``$9``
    a group (one digit: what every engine obda prints reads alike), ``\\$`` and ``\\\\`` a ``$`` and a ``\\``.  None
    when it is not one: a ``$`` before anything else, or a ``\\`` before anything but ``$`` and ``\\``."""
    parts: list[str | int] = []
    i = 0
    while i < len(text):
        c = text[i]
        if c == "\\" or c == "$":
            nxt = text[i + 1:i + 2]
            if c == "\\" and nxt in ("$", "\\"):
                parts.append(nxt)
            elif c == "$" and nxt in "123456789" and nxt and not text[i + 2:i + 3].isdigit():
                parts.append(int(nxt))
            else:
                return None
            i += 2
            continue
        parts.append(c)
        i += 1
    out: list[str | int] = []
    for p in parts:  # adjacent texts joined
        if isinstance(p, str) and out and isinstance(out[-1], str):
            out[-1] += p
        else:
            out.append(p)
    return tuple(out)


#: the functions whose value is a boolean (a FILTER may be one of them alone)
BOOLEAN_FUNCTIONS = frozenset({"CONTAINS", "STRSTARTS", "STRENDS", "REGEX", "NOT", "AND", "OR", "BOUND", "EBV",
                               "LANGMATCHES", "isIRI", "isLITERAL", "isBLANK", "isNUMERIC", "sameTerm",
                               "=", "!=", "<", "<=", ">", ">="})


@dataclass(frozen=True)
class Call:
    """A SPARQL function call ``NAME(args…)`` (a name of :data:`FUNCTIONS`); ``NOT`` is ``!`` over a boolean
    function. Its arguments are value expressions; an error (a type error, a division by zero) is unbound."""

    name: str
    args: tuple["ValueExpression", ...]

    def __post_init__(self) -> None:
        if self.name not in FUNCTIONS:
            raise ValueError(f"unknown function {self.name!r}")

    @property
    def is_boolean(self) -> bool:
        return self.name in BOOLEAN_FUNCTIONS

    def __str__(self) -> str:
        if self.name == "NOT":
            return f"!{self.args[0]}"
        if self.name in COMPARISON_OPS or self.name in ("AND", "OR"):
            op = {"AND": " && ", "OR": " || "}.get(self.name, f" {self.name} ")
            return "(" + op.join(map(str, self.args)) + ")"
        return f"{self.name}({', '.join(map(str, self.args))})"


ValueExpression = Union[Var, Literal, Aggregate, Arithmetic, Call, IRI]


def is_computed(e) -> bool:
    """Whether ``e`` is computed (arithmetic or a function call), not a term."""
    return isinstance(e, (Arithmetic, Call))


def value_variables(e) -> tuple[Var, ...]:
    """The variables of a value expression, in order."""
    if isinstance(e, Var):
        return (e,)
    if isinstance(e, Arithmetic):
        return value_variables(e.left) + value_variables(e.right)
    if isinstance(e, Call):
        return tuple(v for a in e.args for v in value_variables(a))
    if isinstance(e, Aggregate) and e.argument is not None:
        return (e.argument,)
    return ()


def substitute_expression(e, mapping: dict) -> "ValueExpression":
    """A value expression with its variables renamed by ``mapping``."""
    if isinstance(e, Var):
        return mapping.get(e, e)
    if isinstance(e, Arithmetic):
        return Arithmetic(e.op, substitute_expression(e.left, mapping), substitute_expression(e.right, mapping))
    if isinstance(e, Call):
        return Call(e.name, tuple(substitute_expression(a, mapping) for a in e.args))
    return e


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
    ``aggregation.columns``.  ``branches`` holds the disjunctive normal form of the WHERE clause: one CQ
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
            return self.aggregation.columns
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


def _short(iri: str) -> str:
    for ns, p in _SHORT.items():
        if iri.startswith(ns):
            return p + iri[len(ns):]
    for sep in ("#", "/"):
        if sep in iri:
            return iri.rsplit(sep, 1)[1] or iri
    return iri
