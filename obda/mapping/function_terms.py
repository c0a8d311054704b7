"""Term tests of computed values in SQL: ``isIRI`` … ``isNUMERIC``, ``LANG``, ``LANGMATCHES``, ``sameTerm`` and
``DATATYPE``.

A term map fixes its term's kind, datatype and language tag, so each is a constant of the member, NULL where
the argument is an error (a BIND's value).  Part of :mod:`obda.mapping.functions`, which hands these the
``value`` of an argument expression (its SQL and type).
"""

from __future__ import annotations

from sqlglot import exp

from obda.errors import UnsupportedConstructError
from obda.mapping._unfold_compare import same_kind, term_kind
from obda.mapping._unfold_ir import Expr
from obda.mapping._unfold_terms import RDF_LANGSTRING, Unsat, category
from obda.mapping.function_types import BOOLEAN, STRING, Value, light, sql
from obda.model.query import Arithmetic, Call


def term_kind_of(e, term, value: Value) -> tuple[str, str | None, Expr | None]:
    """What a term is — ``iri``, ``bnode`` or ``literal`` —, a literal's type (a datatype or ``@tag``), and the SQL
    that is NULL where ``e`` is an error (None: never; a BIND's value may be), all static per term map."""
    if not isinstance(e, (Call, Arithmetic)):
        tv = term(e)
        kind, dt = term_kind(tv)
        return kind, dt, (tv.parts[0].val.expr if kind == "literal" and tv.native else None)  # type: ignore[union-attr]
    v, dt = value(e)
    return ("iri", None, None) if dt == "iri" else ("literal", dt, v)


def term_test(c: Call, term, value: Value, label: str) -> tuple[Expr, str]:
    """``isIRI`` … ``isNUMERIC``, ``LANG`` and ``LANGMATCHES``: constants per member (a term map fixes its term's
    kind, datatype and tag), NULL where the argument is an error (a BIND's value)."""
    fn = c.name
    if fn == "LANGMATCHES":
        (tag, nullable), rng = lang_of(c.args[0], term, value, label), c.args[1]
        if not (hasattr(rng, "lexical") and getattr(rng, "datatype", None) in (None, STRING)):
            raise UnsupportedConstructError("LANGMATCHES", f"{label}: LANGMATCHES needs a string constant as its "
                                            "range (LANGMATCHES(LANG(?x), \"en\"))")
        r = rng.lexical.lower()  # type: ignore[union-attr]
        t = tag.lower()
        value = bool(t) if r == "*" else (t == r or t.startswith(r + "-"))  # RFC 4647 basic filtering
        return nullable_sql(exp.Boolean(this=value), nullable), BOOLEAN
    if fn == "LANG":
        tag, nullable = lang_of(c, term, value, label)
        return nullable_sql(exp.Literal.string(tag), nullable), STRING
    kind, dt, nullable = term_kind_of(c.args[0], term, value)
    value = {"isIRI": kind == "iri", "isBLANK": kind == "bnode", "isLITERAL": kind == "literal",
             "isNUMERIC": kind == "literal" and dt is not None and category(dt) == "numeric"}[fn]
    return nullable_sql(exp.Boolean(this=value), nullable), BOOLEAN


def same_term(c: Call, term, value: Value, label: str) -> tuple[Expr, str]:
    """``sameTerm(a, b)``: false where the kinds, datatypes or tags differ (constants of the member); else the
    equality of the two IRIs' texts or of the two values (literals: a typed column holds one lexical form per
    value, its canonical one).  (A FILTER of it alone compares the terms as ``=`` does: ``_unfold_members``.)"""
    (ka, da, _), (kb, db, _) = (term_kind_of(x, term, value) for x in c.args)
    if not same_kind((ka, da), (kb, db)):
        return light(exp.Boolean(this=False)), BOOLEAN
    if ka == "bnode":
        raise UnsupportedConstructError("sameTerm", f"{label}: sameTerm of blank nodes is not supported")
    a, b = (sql(value(x)[0]) for x in c.args)
    return light(exp.Paren(this=exp.EQ(this=a, expression=b))), BOOLEAN


def datatype_of(c: Call, term, value: Value, label: str) -> tuple[str, Expr | None]:
    """``DATATYPE(x)``'s IRI — the literal's datatype, ``rdf:langString`` for a tagged string: static per member —
    and the SQL that is NULL where ``x`` is an error."""
    kind, dt, nullable = term_kind_of(c.args[0], term, value)
    if kind != "literal":
        raise Unsat(f"{label}: DATATYPE of {c.args[0]}, which is not a literal, is a type error")
    return (RDF_LANGSTRING if dt is not None and dt.startswith("@") else (dt or STRING)), nullable


def lang_of(e, term, value: Value, label: str) -> tuple[str, Expr | None]:
    """The language tag ``LANG(x)`` gives (``""`` for a literal without one) and its NULL-where-error SQL; ``e`` is
    ``LANG(x)`` or a string constant."""
    if isinstance(e, Call) and e.name == "LANG":
        kind, dt, nullable = term_kind_of(e.args[0], term, value)
        if kind != "literal":
            raise Unsat(f"{label}: LANG of {e.args[0]}, which is not a literal, is a type error")
        return (dt[1:] if dt and dt.startswith("@") else ""), nullable
    if hasattr(e, "lexical") and not isinstance(e, (Call, Arithmetic)) and getattr(e, "datatype", None) in (None, STRING):
        return e.lexical, None  # type: ignore[union-attr]
    raise UnsupportedConstructError("LANGMATCHES", f"{label}: LANGMATCHES compares LANG(…) or a string constant "
                                    "with a range")


def nullable_sql(value: exp.Expression, nullable: Expr | None) -> Expr:
    """``value``, or NULL (SPARQL's error) where ``nullable`` is NULL."""
    if nullable is None:
        return light(value)
    return light(exp.Case(ifs=[exp.If(this=exp.Not(this=exp.Is(this=sql(nullable), expression=exp.Null())),
                                       true=value)]))
