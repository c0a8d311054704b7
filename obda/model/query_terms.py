"""The terms of an ontology query: variables, IRIs, literals, and a time variable moved by a duration.

Plain frozen dataclasses, so that rewriting (``obda.rewrite``) and unfolding (``obda.mapping``) can hash,
compare and substitute them freely; :mod:`obda.model.query` builds atoms and queries of them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Union

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
