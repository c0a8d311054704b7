"""Elements of a selection predicate: attributes, constants, atoms (Arasu §4, Table II).

An *element* is an attribute of a FROM entry (``alias.column``) or a constant.
Constants carry a comparability domain so that the closure only orders
constants that can be compared (numbers with numbers, strings with strings,
timestamps with timestamps).  Timestamps are integers (microseconds since the
epoch): application time is discrete (spec §1).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from typing import Union

from obda.errors import Location

# comparability domains
NUMERIC = "numeric"
STRING = "string"
BOOLEAN = "boolean"
TIMESTAMP = "timestamp"

OPS = ("<", "<=", "=", "!=")
#: spec §3 step 1, the one rule both the analysis (obda.analysis.preprocess) and the executor's members
#: (obda.analysis.forest.members) split a comparison of two stream timestamps by: disjoint alternatives
#: (the analysis also splits every other ``≠``; the executor runs those as they are)
TIMESTAMP_SPLITS = {"<=": ("<", "="), ">=": (">", "="), "!=": ("<", ">")}
from obda.model.query import FLIP, NEGATE  # noqa: E402,F401  (re-exported: the analysis imports them from here)


@dataclass(frozen=True, order=True)
class Attr:
    """Attribute ``alias.column`` of one FROM entry."""

    alias: str
    column: str

    def __str__(self) -> str:
        return f"{self.alias}.{self.column}"


@dataclass(frozen=True, order=True)
class Const:
    """A constant: domain, comparable value, and its SQL text for messages."""

    domain: str
    value: Union[Fraction, str, int, bool]
    text: str = field(default="", compare=False)

    def __str__(self) -> str:
        return self.text or str(self.value)

    @property
    def is_integral(self) -> bool:
        if self.domain in (TIMESTAMP, BOOLEAN):
            return True
        return self.domain == NUMERIC and isinstance(self.value, Fraction) and self.value.denominator == 1


Element = Union[Attr, Const]


@dataclass(frozen=True)
class Predicate:
    """Atom ``left op right``; ``op`` in ``< <= = !=`` (``>``/``>=`` are flipped by :meth:`make`)."""

    left: Element
    op: str
    right: Element
    location: Location | None = field(default=None, compare=False)

    @staticmethod
    def make(left: Element, op: str, right: Element, location: Location | None = None) -> "Predicate":
        if op in (">", ">="):
            left, right, op = right, left, FLIP[op]
        if op not in OPS:
            raise ValueError(op)
        return Predicate(left, op, right, location)

    def negated(self) -> "Predicate":
        return Predicate.make(self.left, NEGATE[self.op], self.right, self.location)

    def __str__(self) -> str:
        return f"{self.left} {self.op} {self.right}"

    @property
    def elements(self) -> tuple[Element, Element]:
        return (self.left, self.right)


