"""Light SQL expressions for unfolding: built, compared and renamed without sqlglot.

Private helper of :mod:`obda.mapping.unfold`.  Unfolding a large product
(NPD query 28: thousands of candidate members) spent nearly all its time
copying, renaming and printing sqlglot trees.  Members are therefore built from
these small immutable nodes; a sqlglot tree is created only once per
*surviving* member (:meth:`Expr.to_sqlglot`).

Every node knows its SQL text as a *template*: a tuple
``(text, alias, text, alias, ..., text)`` whose odd positions are FROM aliases.
Joining the template with the aliases gives exactly what sqlglot prints for the
equivalent tree in the default dialect (``Expr.sql()``), so conditions are
compared, deduplicated and keyed by text as before; with another alias map
(:meth:`Expr.render`) it gives the text after renaming, which is all that
duplicate detection needs.  Renaming (:meth:`Expr.rename`) rebuilds only the
small node, never a REPLACE chain or an inlined condition tree.

Node kinds here: :class:`Col` (a qualified column), :class:`Const` (an SQL constant,
a sqlglot leaf shared read-only), :class:`Cmp` (binary comparison), :class:`Shift` and
:class:`Arith` (a timestamp moved by a duration, arithmetic), :class:`NotNull` (``NOT x IS NULL``),
:class:`NotAll` (``NOT (c1 AND c2 ...)``), :class:`Raw` (any other sqlglot
tree, e.g. an inlined ``rr:sqlQuery`` condition, with its column qualifiers as
alias slots) and :class:`Seq` (a comparison key).  A term's text — ``Cast``, ``IsoText``, ``Encode``,
``Concat`` — is :mod:`obda.mapping._unfold_text`; a check's ``KeyIn`` is :mod:`obda.mapping._unfold_checks`;
reading SQL constants and sqlglot trees into these nodes is :mod:`obda.mapping._unfold_read`.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Iterable, Mapping

from sqlglot import exp

from obda.model.dialects import COMPARISON_CLASSES

Template = tuple  # (text, alias, text, ..., text): odd positions are aliases

CMP_SQL = {"=": "=", "!=": "<>", "<": "<", "<=": "<=", ">": ">", ">=": ">="}  # a comparison's SQL text


def join_templates(*templates: Template) -> Template:
    """Concatenate templates (adjacent text parts merge)."""
    out: list = []
    for t in templates:
        if not out:
            out.extend(t)
        else:
            out[-1] = out[-1] + t[0]
            out.extend(t[1:])
    return tuple(out)


def render(template: Template, amap: Mapping[str, str] | None = None) -> str:
    """The text of a template with its aliases renamed by ``amap`` (unmapped aliases kept)."""
    if len(template) == 1:
        return template[0]
    if amap is None:
        return "".join(template)
    parts = list(template)
    for i in range(1, len(parts), 2):
        parts[i] = amap.get(parts[i], parts[i])
    return "".join(parts)


@lru_cache(maxsize=None)
def ident_sql(name: str) -> str:
    """How sqlglot prints ``exp.to_identifier(name)`` (quoted unless a safe identifier)."""
    return exp.to_identifier(name).sql()


@lru_cache(maxsize=None)
def _quoted(name: str) -> bool:
    return bool(exp.to_identifier(name).args.get("quoted"))


def identifier(name: str) -> exp.Identifier:
    """``exp.to_identifier(name)``, built directly (the tree is the same)."""
    return exp.Identifier(this=name, quoted=_quoted(name))


def column(name: str, alias: str) -> exp.Column:
    """``exp.column(name, table=alias)`` with identifiers as ``exp.to_identifier`` makes them, built directly."""
    return exp.Column(this=identifier(name), table=identifier(alias), db=None, catalog=None)


def fast_copy(node: exp.Expression) -> exp.Expression:
    """A deep copy of a small tree, rebuilt node by node (``copy()`` goes through ``copy.deepcopy``)."""
    if node.comments or node._type is not None or node._meta:
        return node.copy()
    args = {}
    for k, v in node.args.items():
        if isinstance(v, exp.Expression):
            v = fast_copy(v)
        elif type(v) is list:
            v = [fast_copy(x) if isinstance(x, exp.Expression) else x for x in v]
        args[k] = v
    return type(node)(**args)


class Expr:
    """An immutable SQL expression of one member (see the module docstring)."""

    __slots__ = ("_tpl", "_sql")

    def __init__(self) -> None:
        self._tpl: Template | None = None
        self._sql: str | None = None

    # -- text
    def _template(self) -> Template:
        raise NotImplementedError

    @property
    def template(self) -> Template:
        if self._tpl is None:
            self._tpl = self._template()
        return self._tpl

    def sql(self) -> str:
        """The SQL text sqlglot prints for :meth:`to_sqlglot` (default dialect)."""
        if self._sql is None:
            self._sql = render(self.template)
        return self._sql

    def render(self, amap: Mapping[str, str]) -> str:
        """The SQL text after renaming FROM aliases by ``amap``."""
        return render(self.template, amap)

    def aliases(self) -> Iterable[str]:
        return self.template[1::2]

    # -- structure
    def rename(self, ren: Mapping[str, str]) -> "Expr":
        """The same expression over renamed FROM aliases (``self`` when none is renamed)."""
        if not any(a in ren for a in self.aliases()):
            return self
        return self._rename(ren)

    def _rename(self, ren: Mapping[str, str]) -> "Expr":
        raise NotImplementedError

    def to_sqlglot(self, amap: Mapping[str, str] | None = None) -> exp.Expression:
        """A fresh sqlglot tree (aliases renamed by ``amap``)."""
        raise NotImplementedError

    # -- value semantics by text (as sqlglot trees were compared)
    def __eq__(self, other: object) -> bool:
        return isinstance(other, Expr) and self.sql() == other.sql()

    def __hash__(self) -> int:
        return hash(self.sql())

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.sql()})"


class Col(Expr):
    """A column ``alias.name``."""

    __slots__ = ("alias", "name")

    def __init__(self, alias: str, name: str):
        super().__init__()
        self.alias = alias
        self.name = name

    def _template(self) -> Template:
        return ("", self.alias, "." + ident_sql(self.name))

    def _rename(self, ren):
        return Col(ren.get(self.alias, self.alias), self.name)

    def to_sqlglot(self, amap=None):
        return column(self.name, amap.get(self.alias, self.alias) if amap else self.alias)


class Const(Expr):
    """An SQL constant (a sqlglot tree without columns, shared read-only; copied on output)."""

    __slots__ = ("expr", "value")

    def __init__(self, expr: exp.Expression, value=None):
        super().__init__()
        self.expr = expr
        self.value = value  # python_value(expr), filled in by the caller; None: not a comparable constant

    def _template(self) -> Template:
        return (self.expr.sql(),)

    def _rename(self, ren):
        return self

    def to_sqlglot(self, amap=None):
        return fast_copy(self.expr)


class _Binary(Expr):
    """``left op right``: the shape of comparisons and arithmetic."""

    __slots__ = ("op", "left", "right")

    def __init__(self, op: str, left: Expr, right: Expr):
        super().__init__()
        self.op = op
        self.left = left
        self.right = right

    def _rename(self, ren):
        return type(self)(self.op, self.left.rename(ren), self.right.rename(ren))


class Cmp(_Binary):
    """A binary comparison ``left op right`` (op one of = != < <= > >=)."""

    __slots__ = ()

    def _template(self) -> Template:
        return join_templates(self.left.template, (f" {CMP_SQL[self.op]} ",), self.right.template)

    def to_sqlglot(self, amap=None):
        return COMPARISON_CLASSES[self.op](this=self.left.to_sqlglot(amap), expression=self.right.to_sqlglot(amap))


class Shift(Expr):
    """``arg + INTERVAL 'n' unit`` (``-`` for a negative shift): a timestamp moved by a constant duration
    (one side of an interval join). ``micros`` is the shift in microseconds."""

    __slots__ = ("arg", "micros")

    def __init__(self, arg: Expr, micros: int):
        super().__init__()
        self.arg = arg
        self.micros = micros

    def _parts(self) -> tuple[type, str, str]:
        seconds, rest = divmod(abs(self.micros), 1_000_000)
        amount, unit = (str(seconds), "SECOND") if not rest else (str(abs(self.micros)), "MICROSECOND")
        return (exp.Add if self.micros >= 0 else exp.Sub), amount, unit

    def _template(self) -> Template:
        op, amount, unit = self._parts()
        return join_templates(self.arg.template, (f" {'+' if op is exp.Add else '-'} INTERVAL '{amount}' {unit}",))

    def _rename(self, ren):
        return Shift(self.arg.rename(ren), self.micros)

    def to_sqlglot(self, amap=None):
        op, amount, unit = self._parts()
        return op(this=self.arg.to_sqlglot(amap), expression=exp.Interval(this=exp.Literal.string(amount),
                                                                           unit=exp.var(unit)))


def arithmetic_sql(op: str, left: exp.Expression, right: exp.Expression) -> exp.Expression:
    """SPARQL's ``left op right`` over numbers in SQL (BIND values, aggregate expressions): ``/`` divides as
    decimals, and a zero divisor gives NULL — SPARQL's error, an unbound value."""
    if op == "/":
        num = exp.Cast(this=exp.Paren(this=left), to=exp.DataType.build("DOUBLE"))
        return exp.Paren(this=exp.Div(this=num, expression=exp.Nullif(this=exp.Paren(this=right),
                                                                       expression=exp.Literal.number(0))))
    return exp.Paren(this={"+": exp.Add, "-": exp.Sub, "*": exp.Mul}[op](this=left, expression=right))


class Arith(_Binary):
    """``(left op right)`` over numbers (a BIND's value), as :func:`arithmetic_sql` writes it."""

    __slots__ = ()

    def _template(self) -> Template:
        if self.op == "/":
            return join_templates(("(CAST((",), self.left.template, (") AS DOUBLE) / NULLIF((",), self.right.template,
                         ("), 0))",))
        return join_templates(("(",), self.left.template, (f" {self.op} ",), self.right.template, (")",))

    def to_sqlglot(self, amap=None):
        return arithmetic_sql(self.op, self.left.to_sqlglot(amap), self.right.to_sqlglot(amap))


class NotNull(Expr):
    """``NOT x IS NULL``."""

    __slots__ = ("arg",)

    def __init__(self, arg: Expr):
        super().__init__()
        self.arg = arg

    def _template(self) -> Template:
        return join_templates(("NOT ",), self.arg.template, (" IS NULL",))

    def _rename(self, ren):
        return NotNull(self.arg.rename(ren))

    def to_sqlglot(self, amap=None):
        return exp.Not(this=exp.Is(this=self.arg.to_sqlglot(amap), expression=exp.Null()))


class NotAll(Expr):
    """``NOT (c1 AND c2 AND ...)`` (``!=`` between multi-column IRIs)."""

    __slots__ = ("conds",)

    def __init__(self, conds: tuple[Expr, ...]):
        super().__init__()
        self.conds = tuple(conds)

    def _template(self) -> Template:
        parts: list[Template] = [("NOT (",)]
        for i, c in enumerate(self.conds):
            if i:
                parts.append((" AND ",))
            parts.append(c.template)
        parts.append((")",))
        return join_templates(*parts)

    def _rename(self, ren):
        return NotAll(tuple(c.rename(ren) for c in self.conds))

    def to_sqlglot(self, amap=None):
        return exp.Not(this=exp.Paren(this=exp.and_(*(c.to_sqlglot(amap) for c in self.conds), copy=False)))


SLOT = "slot"  # the column qualifier prefix of a Raw tree's alias slots (slot0, slot1, ...)


class Raw(Expr):
    """Any other sqlglot tree; its columns' qualifiers are slots bound to member aliases.

    ``tree`` is shared read-only; its ``exp.Column`` nodes have qualifier
    ``slot{i}`` (``i`` indexes ``binding``).  ``not_is`` is the text of ``x`` when
    the tree is ``NOT x IS ...`` (such a condition rejects NULL in ``x``).
    """

    __slots__ = ("tree", "base", "binding", "not_is")

    def __init__(self, tree: exp.Expression, base: Template, binding: tuple[str, ...], not_is: "Expr | None" = None):
        super().__init__()
        self.tree = tree
        self.base = base  # template with slot indexes (ints) at odd positions
        self.binding = binding
        self.not_is = not_is

    def _template(self) -> Template:
        parts = list(self.base)
        for i in range(1, len(parts), 2):
            parts[i] = self.binding[parts[i]]
        return tuple(parts)

    def _rename(self, ren):
        ni = self.not_is.rename(ren) if self.not_is is not None else None
        return Raw(self.tree, self.base, tuple(ren.get(a, a) for a in self.binding), ni)

    def to_sqlglot(self, amap=None):
        names = [amap.get(a, a) if amap else a for a in self.binding]

        def fn(node: exp.Expression) -> exp.Expression:
            if isinstance(node, exp.Column) and node.table.startswith(SLOT):
                return column(node.name, names[int(node.table[len(SLOT):])])
            return node

        return self.tree.copy().transform(fn, copy=False)


class Seq(Expr):
    """Text and expressions printed one after the other (a key for comparisons, never SQL output)."""

    __slots__ = ("parts",)

    def __init__(self, parts: tuple):
        super().__init__()
        self.parts = tuple(parts)

    def _template(self) -> Template:
        return join_templates(*((p,) if isinstance(p, str) else p.template for p in self.parts)) if self.parts else ("",)

    def _rename(self, ren):
        return Seq(tuple(p if isinstance(p, str) else p.rename(ren) for p in self.parts))

    def to_sqlglot(self, amap=None):  # pragma: no cover - keys only
        raise TypeError("Seq is a comparison key, not SQL")
