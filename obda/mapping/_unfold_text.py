"""The unfolding IR's nodes of a term's text: a cast to text, a timestamp's ``xsd:dateTime`` text, IRI-safe
percent-encoding and concatenation (an IRI template or a literal built from columns).

Private helper of :mod:`obda.mapping.unfold`; the node base, templates and the other nodes are
:mod:`obda.mapping._unfold_ir`'s.
"""

from __future__ import annotations

import string

from sqlglot import exp

from obda.mapping._unfold_ir import Expr, Template, join_templates

UNRESERVED = frozenset(string.ascii_letters + string.digits + "-._~")
# printable ASCII characters that IRI-safe encoding replaces ('%' must come first)
ENCODED_CHARS = "%" + "".join(c for c in map(chr, range(32, 127)) if c not in UNRESERVED and c != "%")


class Cast(Expr):
    """``CAST(x AS VARCHAR)`` (the text of a column in an IRI or string comparison)."""

    __slots__ = ("arg",)

    def __init__(self, arg: Expr):
        super().__init__()
        self.arg = arg

    def _template(self) -> Template:
        return join_templates(("CAST(",), self.arg.template, (" AS VARCHAR)",))

    def _rename(self, ren):
        return Cast(self.arg.rename(ren))

    def to_sqlglot(self, amap=None):
        # as exp.cast(x, "VARCHAR"): the target type is also the node's type annotation
        to = exp.DataType(**_VARCHAR.args)
        cast = exp.Cast(this=self.arg.to_sqlglot(amap), to=to)
        cast.type = to
        return cast


_VARCHAR = exp.DataType.build("VARCHAR")


class IsoText(Expr):
    """``REPLACE(CAST(x AS VARCHAR), ' ', 'T')``: a timestamp's text as the canonical ``xsd:dateTime`` lexical
    form (R2RML's natural RDF lexical form of a TIMESTAMP): ``2024-01-01T10:00:00``, fractional seconds
    without trailing zeros, as Spark, DuckDB and PostgreSQL cast a timestamp to text (with a space)."""

    __slots__ = ("arg",)

    def __init__(self, arg: Expr):
        super().__init__()
        self.arg = arg

    def _template(self) -> Template:
        return join_templates(("REPLACE(CAST(",), self.arg.template, (" AS VARCHAR), ' ', 'T')",))

    def _rename(self, ren):
        return IsoText(self.arg.rename(ren))

    def to_sqlglot(self, amap=None):
        return exp.Replace(this=Cast(self.arg).to_sqlglot(amap), expression=exp.Literal.string(" "),
                           replacement=exp.Literal.string("T"))


_ENC_HEAD = "REPLACE(" * len(ENCODED_CHARS)
_ENC_TAIL = "".join(
    ", " + exp.Literal.string(ch).sql() + ", " + exp.Literal.string("%%%02X" % ord(ch)).sql() + ")" for ch in ENCODED_CHARS
)


class Encode(Expr):
    """IRI-safe percent-encoding of a string expression: a nested ``REPLACE`` chain (one per encoded character)."""

    __slots__ = ("arg",)

    def __init__(self, arg: Expr):
        super().__init__()
        self.arg = arg

    def _template(self) -> Template:
        return join_templates((_ENC_HEAD,), self.arg.template, (_ENC_TAIL,))

    def _rename(self, ren):
        return Encode(self.arg.rename(ren))

    def to_sqlglot(self, amap=None):
        e = self.arg.to_sqlglot(amap)
        for ch, code in _ENC_PAIRS:
            e = exp.Replace(this=e, expression=exp.Literal(this=ch, is_string=True),
                            replacement=exp.Literal(this=code, is_string=True))
        return e


_ENC_PAIRS = tuple((ch, "%%%02X" % ord(ch)) for ch in ENCODED_CHARS)


class Concat(Expr):
    """``CONCAT(a, b, ...)``."""

    __slots__ = ("args",)

    def __init__(self, args: tuple[Expr, ...]):
        super().__init__()
        self.args = tuple(args)

    def _template(self) -> Template:
        parts: list[Template] = [("CONCAT(",)]
        for i, a in enumerate(self.args):
            if i:
                parts.append((", ",))
            parts.append(a.template)
        parts.append((")",))
        return join_templates(*parts)

    def _rename(self, ren):
        return Concat(tuple(a.rename(ren) for a in self.args))

    def to_sqlglot(self, amap=None):
        return exp.Concat(expressions=[a.to_sqlglot(amap) for a in self.args], **_CONCAT_ARGS)


# what exp.func("CONCAT", ...) sets besides the arguments (default dialect)
_CONCAT_ARGS = {
    k: v for k, v in exp.func("CONCAT", exp.Literal.string("a"), exp.Literal.string("b")).args.items() if k != "expressions"
}
