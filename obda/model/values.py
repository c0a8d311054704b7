"""Computed values of an ontology query: aggregates, arithmetic and function calls over its terms.

A SELECT item, a BIND, a HAVING side or a FILTER operand is a :data:`ValueExpression`: a term
(:mod:`obda.model.query_terms`), an :class:`Aggregate` of the group's solutions, :class:`Arithmetic` over
values, or a :class:`Call` of a SPARQL function (casts included).  The analysis and the unfolding read them;
:mod:`obda.model.query` holds the atoms, conditions and queries they are part of.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Union

from obda.errors import Location
from obda.model.query_terms import XSD, Var, IRI, Literal

COMPARISON_OPS = ("<", "<=", "=", "!=", ">", ">=")

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
CASTS = {XSD + t: f"xsd:{t}" for t in ("integer", "decimal", "double", "float", "boolean", "string", "dateTime")}
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
