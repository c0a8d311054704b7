"""XPath's casts of computed values in SQL: ``xsd:integer(x)`` … ``xsd:string(x)``, ``xsd:dateTime(x)`` (SPARQL
1.1 §17.5).

Part of :mod:`obda.mapping.functions`, which hands :func:`cast` the ``value`` of an argument expression
(its SQL and type).
"""

from __future__ import annotations

from sqlglot import exp

from obda.errors import UnsupportedConstructError
from obda.mapping._unfold_ir import Expr
from obda.mapping._unfold_text import IsoText
from obda.mapping._unfold_terms import Unsat, category
from obda.mapping.function_types import BOOLEAN, DATETIME, DOUBLE, STRING, Value, lang, light, sql
from obda.model.query import XSD, Call, short_iri

# the lexical forms a cast from a string reads (XML Schema's, without the spaces its whitespace facet drops)
_INTEGER_TEXT = r"^[+-]?[0-9]+$"
_DOUBLE_TEXT = r"^[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+)?$"
_DECIMAL_TEXT = r"^[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)$"


def cast(c: Call, value: Value, label: str) -> tuple[Expr, str]:
    """``xsd:integer(x)`` … ``xsd:string(x)`` (SPARQL 1.1 §17.5, XPath's casting rules): a number, a boolean or a
    string whose lexical form is one of the target's is cast; any other value is a type error (unbound).  A number
    to an integer drops its fraction (toward zero); a string is read only in the target's lexical form, with no
    space around it."""
    target = XSD + c.name[len("xsd:"):]
    v, dt = value(c.args[0])
    x = sql(v)
    numeric, what = category(dt) == "numeric", f"{label}: {c}"

    def when(cond: exp.Expression, then: exp.Expression) -> Expr:
        return light(exp.Case(ifs=[exp.If(this=cond, true=then)]))

    def lexical(pattern: str) -> exp.Expression:
        return exp.RegexpLike(this=x.copy(), expression=exp.Literal.string(pattern))

    if dt == target or (target in DOUBLE and dt in DOUBLE):
        return v, target
    if dt == BOOLEAN and target != STRING:  # true is 1, false 0
        one, zero = (("1", "0") if target in (XSD + "integer", XSD + "decimal") else ("1.0", "0.0"))
        if target == BOOLEAN:
            return v, target
        node = exp.Case(ifs=[exp.If(this=x, true=exp.Literal.number(one)),
                             exp.If(this=exp.Not(this=x.copy()), true=exp.Literal.number(zero))])
        return light(node if target not in DOUBLE else exp.cast(node, "DOUBLE")), target
    if target == XSD + "integer":
        if numeric:  # toward zero
            toward = exp.Case(ifs=[exp.If(this=exp.LT(this=x.copy(), expression=exp.Literal.number(0)),
                                          true=exp.Ceil(this=x.copy()))], default=exp.Floor(this=x.copy()))
            return light(exp.cast(toward, "BIGINT")), target
        if dt == STRING:
            return when(lexical(_INTEGER_TEXT), exp.cast(x.copy(), "BIGINT")), target
    if target in DOUBLE:
        if numeric:
            return light(exp.cast(x, "DOUBLE")), target
        if dt == STRING:
            return when(lexical(_DOUBLE_TEXT), exp.cast(x.copy(), "DOUBLE")), target
    if target == XSD + "decimal":  # a double's or a decimal text's value, held as a double (about 15 digits)
        if dt == XSD + "integer":
            return v, target
        if numeric:
            return light(exp.cast(x, "DOUBLE")), target
        if dt == STRING:
            return when(lexical(_DECIMAL_TEXT), exp.cast(x.copy(), "DOUBLE")), target
    if target == BOOLEAN:
        if numeric:
            return light(exp.Paren(this=exp.NEQ(this=x, expression=exp.Literal.number(0)))), target
        if dt == STRING:
            words = {v: exp.In(this=x.copy(), expressions=[exp.Literal.string(w) for w in ws])
                     for v, ws in ((True, ("true", "1")), (False, ("false", "0")))}
            return light(exp.Case(ifs=[exp.If(this=words[v], true=exp.Boolean(this=v)) for v in (True, False)])), target
    if target == STRING:
        if dt == "iri" or lang(dt) is not None:  # an IRI's text; a tagged string's lexical form, untagged
            return v, target
        if dt == DATETIME:  # its canonical lexical form, as STR gives it
            return IsoText(v), target
        if dt == XSD + "integer":
            return light(exp.cast(x, "VARCHAR")), target
        if dt == BOOLEAN:
            return light(exp.Case(ifs=[exp.If(this=x, true=exp.Literal.string("true")),
                                        exp.If(this=exp.Not(this=x.copy()), true=exp.Literal.string("false"))])), target
    if target == DATETIME and dt == STRING:  # a constant's is read when the query is (obda.query.functions)
        raise UnsupportedConstructError(c.name, f"{what}: casting a string column to xsd:dateTime is not supported "
                                        "(SQL engines read dateTime text with time zones differently); map the column "
                                        "as a timestamp, or cast a constant (xsd:dateTime(\"2024-01-01T10:00:00\"))")
    if numeric or dt == STRING or dt == BOOLEAN:  # a cast XPath allows, whose result obda does not compute
        raise UnsupportedConstructError(c.name, f"{what}: casting an {short_iri(dt)} value to {short_iri(target)} is "
                                        "not supported (the lexical form or the precision it gives differs between "
                                        "SQL engines); integer, decimal, double, float, boolean and string casts of "
                                        "numbers, booleans and strings are")
    raise Unsat(f"{what}: an {short_iri(dt)} value cannot be cast to {short_iri(target)} (a type error)")
