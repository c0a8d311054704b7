"""Computed values of FILTER and BIND in SQL: ``+ - * /``, ``!`` and the functions of ``obda.model.values.FUNCTIONS``.

A computed value becomes a *native literal* :class:`TermValue` — one typed SQL scalar, as a ``BIND``'s number
always was — so that comparisons (:func:`compare_terms`), projection and the analysis treat it as any typed
column.  Its datatype is known statically: every variable of a member is bound to one term map, hence one
type.  A function applied to a value of the wrong type is a SPARQL type error, which a FILTER treats as
false: :class:`Unsat` (the member is removed, with the reason).  docs/semantics.md, "Functions and arithmetic
in FILTER and BIND", defines each function and its SQL; the SQL is built with sqlglot so that every dialect
prints it (``CONTAINS`` is ``STRPOS(a, b) > 0`` in DuckDB, ``LOCATE(b, a) > 0`` in Spark, ``INSTR`` in SQLite,
``POSITION(b IN a)`` in PostgreSQL).

* ``STR`` of an IRI is the whole IRI string: for a template, the concatenation of its fixed texts and
  (percent-encoded) column texts, exactly the text the member projects; of a string, the string; of an
  integer, its decimal text; of a dateTime (a time variable too), its canonical lexical form
  (``2024-01-01T10:00:00``, :class:`~obda.mapping._unfold_text.IsoText`, the text obda writes for the value
  itself); of a literal of another datatype held as text (a custom one in a string column), that text.  Other
  datatypes' lexical forms (decimals, doubles) differ between SQL engines: refused.
* ``ROUND`` is SPARQL's (halves toward positive infinity): ``FLOOR(x + 0.5)``, not SQL's ``ROUND``.
* ``STRSTARTS`` / ``STRENDS`` compare a ``SUBSTRING`` with the prefix / suffix (portable, no ``LIKE`` escaping).
* ``YEAR`` … ``SECONDS`` of a time value are ``EXTRACT(field FROM ts)`` (timestamps are UTC; SQLite's text is
  ``strftime``, ``obda.model.dialects``); ``REGEX`` with a constant pattern is the dialect's regular-expression
  match (``RLIKE``, ``REGEXP_MATCHES``, ``~``), ``"i"`` an embedded ``(?i)``; ``REPLACE`` is
  ``REGEXP_REPLACE`` of every match (its replacement spelled per dialect, ``obda.model.dialects``).
"""

from __future__ import annotations

from typing import Callable

from sqlglot import exp

from obda.errors import UnsupportedConstructError
from obda.mapping._unfold_ir import Arith, Expr
from obda.mapping._unfold_text import IsoText
from obda.mapping._unfold_terms import (
    RDF_LANGSTRING,
    Slot,
    TermValue,
    Unsat,
    Val,
    category,
    concat_sql,
    held_as_text,
    literal_sql,
    projection_sql,
)
from obda.mapping.function_casts import cast
from obda.mapping.function_terms import datatype_of, nullable_sql, same_term, term_kind_of, term_test
from obda.mapping.function_types import BOOLEAN as _BOOLEAN, DATETIME as _DATETIME, DOUBLE as _DOUBLE
from obda.mapping.function_types import STRING as _STRING, Value, lang as _lang, light as _light, sql as _sql
from obda.model.dialects import COMPARISON_CLASSES
from obda.model.mapping import TermType
from obda.model.query import CASTS, XSD, Arithmetic, Call, Term, short_iri
from obda.model.sources import ColumnType
from obda.query.unbound import ERROR

_CTYPE = {"integer": ColumnType.INTEGER, "decimal": ColumnType.DECIMAL, "double": ColumnType.DOUBLE,
          "string": ColumnType.STRING, "boolean": ColumnType.BOOLEAN}
_CMP = COMPARISON_CLASSES
# SPARQL's date functions -> the EXTRACT field (SECONDS keeps the fraction: a decimal)
_FIELDS = {"YEAR": "YEAR", "MONTH": "MONTH", "DAY": "DAY", "HOURS": "HOUR", "MINUTES": "MINUTE", "SECONDS": "SECOND"}


def computed_value(e, term: Callable[[Term], TermValue], label: str) -> TermValue:
    """The native-literal term of computed value ``e`` (Arithmetic or Call); ``term`` gives a variable's or a
    constant's term.  Unsat when ``e`` is a type error for every row (false in a FILTER)."""
    if isinstance(e, Call) and e.name == "DATATYPE":  # an IRI, constant per member (NULL where x is an error)
        iri, nullable = datatype_of(e, term, _bound(term, label), label)
        if nullable is None:
            return TermValue(TermType.IRI, (iri,), label=label)
        text = nullable_sql(exp.Literal.string(iri), nullable)
        return TermValue(TermType.IRI, (Slot(Val(text, ColumnType.STRING), False),), label=label)
    sql, dt = _value(e, term, label)
    if _lang(dt) is not None:  # a language-tagged string keeps its (static) tag
        return TermValue(TermType.LITERAL, (Slot(Val(sql, ColumnType.STRING), False),), RDF_LANGSTRING, _lang(dt),
                         native=True, label=label)
    ctype = _CTYPE["double" if dt in _DOUBLE else dt[len(XSD):]] if dt.startswith(XSD) else ColumnType.STRING
    return TermValue(TermType.LITERAL, (Slot(Val(sql, ctype), False),), dt, native=True, label=label)


def _bound(term, label: str) -> Value:
    """The ``value`` the split modules (casts, term tests) read an argument expression with."""
    return lambda e: _value(e, term, label)


def _value(e, term, label: str) -> tuple[Expr, str]:
    """(SQL, xsd datatype) of a value expression."""
    if isinstance(e, str) and e == ERROR:  # what reads a variable the branch leaves unbound (obda.query.unbound)
        raise Unsat(f"{label}: it reads a variable this part of the query leaves unbound (an error)")
    if isinstance(e, Arithmetic):
        (left, lt), (right, rt) = _number(e.left, term, label), _number(e.right, term, label)
        if lt in _DOUBLE or rt in _DOUBLE:
            dt = XSD + "double"
        elif e.op == "/" or lt != XSD + "integer" or rt != XSD + "integer":
            dt = XSD + "decimal"
        else:
            dt = XSD + "integer"
        return Arith(e.op, left, right), dt
    if isinstance(e, Call):
        return _call(e, term, label)
    tv = term(e)
    if tv.term_type is TermType.BLANK_NODE:
        raise Unsat(f"{label}: {e} is a blank node, which no function computes with (a type error)")
    if tv.term_type is not TermType.LITERAL:
        return _light(_sql(projection_sql(tv))), "iri"
    if tv.language or tv.datatype == RDF_LANGSTRING:  # its lexical form, typed by its tag
        return _literal_sql(tv, label), "@" + (tv.language or "")
    cat = category(tv.datatype)
    if cat == "numeric":
        dt = tv.datatype if tv.datatype in _DOUBLE or tv.datatype == XSD + "decimal" else XSD + "integer"
        return _literal_sql(tv, label), dt
    if cat == "string":
        return _literal_sql(tv, label), _STRING
    if cat == "boolean":
        return _literal_sql(tv, label), _BOOLEAN
    if cat == "datetime" and tv.native:
        return tv.parts[0].val.expr, _DATETIME  # type: ignore[union-attr]
    raise UnsupportedConstructError(
        "function argument", f"{label}: {e} is a literal of datatype {short_iri(tv.datatype)}; obda computes with "
        "strings, numbers and booleans (functions of time values are not supported yet)")


def _literal_sql(tv: TermValue, label: str) -> Expr:
    if tv.native:
        return tv.parts[0].val.expr  # type: ignore[union-attr]
    if tv.is_constant:
        return _light(literal_sql(tv.text, _STRING if tv.language else tv.datatype))
    if category(tv.datatype) != "string":
        raise UnsupportedConstructError("function argument", f"{label}: a {short_iri(tv.datatype)} literal built "
                                        "from a template cannot be computed with; map it from one typed column")
    return concat_sql(tv)


def _lexical_form(e, term) -> Expr | None:
    """STR of a literal of a datatype obda does not compute with (a custom one, ``xsd:date`` …) whose SQL holds its
    lexical form as text: a constant, or fixed text and string or integer columns (whose text is the lexical form
    in every dialect); None otherwise."""
    if isinstance(e, (Call, Arithmetic)):
        return None
    tv = term(e)
    if tv.term_type is not TermType.LITERAL or tv.language or category(tv.datatype) in (
            "numeric", "string", "boolean", "datetime"):
        return None
    if tv.is_constant:
        return _light(literal_sql(tv.text, _STRING))
    if all(isinstance(p, str) or p.val.type in (ColumnType.STRING, ColumnType.INTEGER) for p in tv.parts):
        return concat_sql(tv)
    return None


def _typed(e, term, label: str) -> None:
    """Refuse computing with a number, truth value or time that a term holds as text (``held_as_text``); its text
    is still its lexical form (STR)."""
    if not isinstance(e, (Arithmetic, Call)) and not (isinstance(e, str) and e == ERROR):
        held_as_text(term(e), label)


def _number(e, term, label: str) -> tuple[Expr, str]:
    _typed(e, term, label)
    sql, dt = _value(e, term, label)
    if dt == _DATETIME:
        raise UnsupportedConstructError("dateTime arithmetic", f"{label}: arithmetic on the dateTime {e} is not "
                                        "supported (compare time variables, or move one by a duration constant)")
    if category(dt) != "numeric":
        raise Unsat(f"{label}: {e} is not a number (arithmetic on it is a type error)")
    return sql, dt


def _string(e, term, label: str, fn: str) -> exp.Expression:
    return _text(e, term, label, fn)[0]


def _text(e, term, label: str, fn: str) -> tuple[exp.Expression, str]:
    """A string literal argument (SPARQL's "string literal": simple, xsd:string or language-tagged) and its type
    (``_STRING`` or ``@tag``)."""
    sql, dt = _value(e, term, label)
    if dt != _STRING and _lang(dt) is None:
        raise Unsat(f"{label}: {fn} of {e}, which is not a string, is a type error")
    return _sql(sql), dt


def _compatible_pair(c: Call, term, label: str) -> tuple[tuple[exp.Expression, str], tuple[exp.Expression, str]]:
    """The two string arguments of ``c`` when they are *compatible* (SPARQL 17.4.3: the second a simple string, or
    both with one language tag); else a type error."""
    (a, da), (b, db) = (_text(x, term, label, c.name) for x in c.args)
    if not (db == _STRING or (_lang(da) is not None and _lang(da).lower() == (_lang(db) or "").lower())):
        raise Unsat(f"{label}: {c} has incompatible arguments ({da}, {db}): a type error")
    return (a, da), (b, db)


def _call(c: Call, term, label: str) -> tuple[Expr, str]:
    fn = c.name
    if fn == "STR":
        lexical = _lexical_form(c.args[0], term)
        if lexical is not None:
            return lexical, _STRING
        sql, dt = _value(c.args[0], term, label)
        if dt in ("iri", _STRING) or _lang(dt) is not None:
            return sql, _STRING
        if dt in (XSD + "integer", _BOOLEAN):  # their canonical forms: xsd:string's cast
            return cast(Call("xsd:string", c.args), _bound(term, label), label)[0], _STRING
        if dt == _DATETIME:  # a timestamp's canonical lexical form, as obda writes the value itself
            return IsoText(sql), _STRING
        if category(dt) == "numeric":
            raise UnsupportedConstructError("STR", f"{label}: STR of an {short_iri(dt)} value is not supported (its "
                                            "lexical form differs between SQL engines); STR of IRIs, strings, "
                                            "integers, booleans and dateTimes is")
        raise Unsat(f"{label}: STR of {c.args[0]} is a type error")
    if fn in ("LCASE", "UCASE"):  # the argument's kind (its language tag) is kept
        text, dt = _text(c.args[0], term, label, fn)
        return _light((exp.Lower if fn == "LCASE" else exp.Upper)(this=text)), dt
    if fn == "STRLEN":
        return _light(exp.Length(this=_string(c.args[0], term, label, fn))), XSD + "integer"
    if fn == "CONCAT":  # one language tag for all: the result has it; else a simple string
        got = [_text(a, term, label, fn) for a in c.args]
        kinds = {d.lower() for _, d in got}
        dt = got[0][1] if len(kinds) == 1 else _STRING
        parts = [x for x, _ in got]
        return _light(parts[0] if len(parts) == 1 else exp.Concat(expressions=parts)), dt
    if fn in ("CONTAINS", "STRSTARTS", "STRENDS"):
        (a, _), (b, _) = _compatible_pair(c, term, label)
        if fn == "CONTAINS":
            node = exp.GT(this=exp.StrPosition(this=a, substr=b), expression=exp.Literal.number(0))
        elif fn == "STRSTARTS":
            node = exp.EQ(this=exp.Substring(this=a, start=exp.Literal.number(1), length=exp.Length(this=b.copy())),
                          expression=b)
        else:
            start = exp.Add(this=exp.Sub(this=exp.Length(this=a.copy()), expression=exp.Length(this=b.copy())),
                            expression=exp.Literal.number(1))
            node = exp.EQ(this=exp.Substring(this=a, start=start), expression=b)
        return _light(exp.Paren(this=node)), _BOOLEAN
    if fn == "EBV":  # FILTER(?v): a boolean's value, a number other than 0, a string other than ""; else an error
        tv = term(c.args[0])
        if tv.term_type is TermType.LITERAL and not (tv.language or tv.datatype == RDF_LANGSTRING) and category(
                tv.datatype) not in ("numeric", "string", "boolean"):
            raise Unsat(f"{label}: the truth value of {c.args[0]} (a {tv.datatype} literal) is a type error")
        sql, dt = _value(c.args[0], term, label)
        if dt == _BOOLEAN:
            return sql, _BOOLEAN
        if category(dt) == "numeric":
            return _light(exp.Paren(this=exp.NEQ(this=_sql(sql), expression=exp.Literal.number(0)))), _BOOLEAN
        if dt == _STRING or _lang(dt) is not None:
            return _light(exp.Paren(this=exp.GT(this=exp.Length(this=_sql(sql)), expression=exp.Literal.number(0)))), \
                _BOOLEAN
        raise Unsat(f"{label}: the truth value of {c.args[0]} (a {dt} term) is a type error")
    if fn == "BOUND":  # a pattern's variable is always bound (NULL columns give no triple); a BIND's, unless an error
        try:
            nullable = term_kind_of(c.args[0], term, _bound(term, label))[2]
        except Unsat:  # a BIND whose value is an error in every row: its variable is unbound
            return _light(exp.Boolean(this=False)), _BOOLEAN
        if nullable is None:
            return _light(exp.Boolean(this=True)), _BOOLEAN
        return _light(exp.Paren(this=exp.Not(this=exp.Is(this=_sql(nullable), expression=exp.Null())))), _BOOLEAN
    if fn in ("LANG", "isIRI", "isLITERAL", "isBLANK", "isNUMERIC", "LANGMATCHES"):
        return term_test(c, term, _bound(term, label), label)
    if fn == "sameTerm":
        return same_term(c, term, _bound(term, label), label)
    if fn == "DATATYPE":
        iri, nullable = datatype_of(c, term, _bound(term, label), label)
        return nullable_sql(exp.Literal.string(iri), nullable), "iri"
    if fn == "SUBSTR":  # start >= 1 and length >= 0 are constants (obda.query.functions): SQL's SUBSTRING agrees
        text, dt = _text(c.args[0], term, label, fn)
        nums = [exp.Literal.number(int(a.lexical)) for a in c.args[1:]]  # type: ignore[union-attr]
        node = exp.Substring(this=text, start=nums[0], **({"length": nums[1]} if len(nums) > 1 else {}))
        return _light(node), dt
    if fn in ("STRBEFORE", "STRAFTER"):  # "" when the second does not occur in the first
        (a, da), (b, _) = _compatible_pair(c, term, label)
        if _lang(da) is not None:
            raise UnsupportedConstructError(
                "language-tagged literal", f"{label}: {fn} of the language-tagged {c.args[0]}: its value keeps the "
                "tag where the second argument occurs and is a simple \"\" where it does not, a type that depends on "
                "the row (obda types each value statically); apply STR to the first argument")
        at = exp.StrPosition(this=a.copy(), substr=b.copy())
        if fn == "STRBEFORE":
            part = exp.Substring(this=a, start=exp.Literal.number(1), length=exp.Sub(this=at.copy(),
                                                                                     expression=exp.Literal.number(1)))
        else:
            part = exp.Substring(this=a, start=exp.Add(this=at.copy(), expression=exp.Length(this=b)))
        node = exp.Case(ifs=[exp.If(this=exp.GT(this=at, expression=exp.Literal.number(0)), true=part)],
                        default=exp.Literal.string(""))
        return _light(node), _STRING
    if fn in _FIELDS:
        sql, dt = _value(c.args[0], term, label)
        if dt != _DATETIME:
            raise Unsat(f"{label}: {fn} of {c.args[0]}, which is not a dateTime, is a type error")
        node = exp.Extract(this=exp.var(_FIELDS[fn]), expression=_sql(sql))
        return _light(node), XSD + ("decimal" if fn == "SECONDS" else "integer")
    if fn == "REGEX":  # the pattern is a string constant (obda.query.functions); "i": an embedded (?i)
        text = _string(c.args[0], term, label, fn)
        pattern = c.args[1].lexical  # type: ignore[union-attr]
        if len(c.args) > 2 and c.args[2].lexical == "i":  # type: ignore[union-attr]
            pattern = "(?i)" + pattern
        return _light(exp.Paren(this=exp.RegexpLike(this=text, expression=exp.Literal.string(pattern)))), _BOOLEAN
    if fn == "REPLACE":  # constants (obda.query.functions); the replacement in XPath's syntax (dialects prints each)
        text, dt = _text(c.args[0], term, label, fn)  # the text's kind (its language tag) is kept
        pattern = c.args[1].lexical  # type: ignore[union-attr]
        if len(c.args) > 3 and c.args[3].lexical == "i":  # type: ignore[union-attr]
            pattern = "(?i)" + pattern
        return _light(exp.RegexpReplace(this=text, expression=exp.Literal.string(pattern),
                                        replacement=exp.Literal.string(c.args[2].lexical))), dt  # type: ignore
    if fn in _CMP:  # a comparison as a value (IF's condition): literals of one category, IRIs by their text
        for x in c.args:
            _typed(x, term, label)
        (a, da), (b, db) = (_value(x, term, label) for x in c.args)
        if _lang(da) is not None or _lang(db) is not None:
            raise UnsupportedConstructError("language-tagged literal", f"{label}: {c} compares a language-tagged "
                                            "literal inside IF; compare STR(…) of it")
        ca, cb = category(da) if da != "iri" else "iri", category(db) if db != "iri" else "iri"
        if ca != cb or (ca == "iri" and fn not in ("=", "!=")):
            if fn in ("=", "!=") and "iri" in (ca, cb):
                return _light(exp.Boolean(this=fn == "!=")), _BOOLEAN  # an IRI is never a literal
            raise Unsat(f"{label}: {c} compares values of types {da} and {db} (a type error)")
        return _light(exp.Paren(this=_CMP[fn](this=_sql(a), expression=_sql(b)))), _BOOLEAN
    if fn in ("AND", "OR"):  # an error in a part is SQL's NULL: three-valued, as SPARQL's && and ||
        parts = []
        for x in c.args:
            try:
                sql, dt = _value(x, term, label)
            except Unsat:
                parts.append(exp.Cast(this=exp.Null(), to=exp.DataType.build("BOOLEAN")))
                continue
            if dt != _BOOLEAN:
                raise Unsat(f"{label}: {x} is not a boolean")
            parts.append(_sql(sql))
        node = parts[0]
        for x in parts[1:]:
            node = (exp.And if fn == "AND" else exp.Or)(this=node, expression=x)
        return _light(exp.Paren(this=node)), _BOOLEAN
    if fn == "IF":  # an error in the condition is an error; in the chosen branch, too (NULL)
        cond, dt = _value(c.args[0], term, label)
        if dt != _BOOLEAN:
            raise Unsat(f"{label}: IF's condition {c.args[0]} is not a boolean")
        branches = []
        for x in c.args[1:]:
            try:
                branches.append(_value(x, term, label))
            except Unsat:
                branches.append(None)
        if branches == [None, None]:
            raise Unsat(f"{label}: both branches of {c} are errors")
        dt = _unify([b[1] for b in branches if b is not None], c, label)
        then = [exp.Null() if b is None else _sql(b[0]) for b in branches]
        cond_sql = _sql(cond)
        node = exp.Case(ifs=[exp.If(this=cond_sql, true=then[0]), exp.If(this=exp.Not(this=cond_sql.copy()),
                                                                         true=then[1])])
        return _light(node), dt
    if fn == "COALESCE":  # the first argument that is no error; an argument that always is one is skipped
        args = []
        for x in c.args:
            try:
                args.append(_value(x, term, label))
            except Unsat:
                continue
        if not args:
            raise Unsat(f"{label}: every argument of {c} is an error")
        dt = _unify([d for _, d in args], c, label)
        if len(args) == 1:
            return args[0][0], dt
        return _light(exp.Coalesce(this=_sql(args[0][0]), expressions=[_sql(a) for a, _ in args[1:]])), dt
    if fn == "NOT":
        sql, dt = _value(c.args[0], term, label)
        if dt != _BOOLEAN:
            raise Unsat(f"{label}: ! of a non-boolean value")
        return _light(exp.Not(this=_sql(sql))), _BOOLEAN
    if fn in ("ABS", "ROUND", "CEIL", "FLOOR"):
        sql, dt = _number(c.args[0], term, label)
        if fn != "ABS" and dt == XSD + "integer":
            return sql, dt  # an integer is its own ROUND, CEIL and FLOOR
        arg = _sql(sql)
        if fn == "ROUND":  # SPARQL: halves toward positive infinity (fn:round)
            node = exp.Floor(this=exp.Add(this=exp.Paren(this=arg), expression=exp.Literal.number("0.5")))
        else:
            node = {"ABS": exp.Abs, "CEIL": exp.Ceil, "FLOOR": exp.Floor}[fn](this=arg)
        return _light(node), dt
    if fn in CASTS.values():
        return cast(c, _bound(term, label), label)
    raise UnsupportedConstructError(fn, f"{label}: function {fn} is not supported")


def _unify(dts: list[str], c: Call, label: str) -> str:
    """The one datatype of IF's branches / COALESCE's arguments (numbers promoted), or refused."""
    if all(category(d) == "numeric" for d in dts):
        if any(d in _DOUBLE for d in dts):
            return XSD + "double"
        return XSD + "integer" if all(d == XSD + "integer" for d in dts) else XSD + "decimal"
    if len(set(dts)) == 1 and dts[0] != "iri":
        return dts[0]
    if "iri" in dts:
        raise UnsupportedConstructError(c.name, f"{label}: {c} may give an IRI, and a value obda computes is a "
                                        "literal; give it the IRI's text (STR(?x)), or bind the IRI with OPTIONAL / "
                                        "UNION")
    raise UnsupportedConstructError(c.name, f"{label}: {c} gives values of different types "
                                    f"({', '.join(map(short_iri, dts))}); obda types every value statically: give its "
                                    "branches / arguments one type")
