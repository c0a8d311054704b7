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

Node kinds: :class:`Col` (a qualified column), :class:`Const` (an SQL constant,
a sqlglot leaf shared read-only), :class:`Cmp` (binary comparison),
:class:`Cast` (``CAST(x AS VARCHAR)``), :class:`IsoText` (a timestamp's ``xsd:dateTime`` text), :class:`Encode` (IRI-safe REPLACE
chain), :class:`Concat`, :class:`NotNull` (``NOT x IS NULL``),
:class:`NotAll` (``NOT (c1 AND c2 ...)``) and :class:`Raw` (any other sqlglot
tree, e.g. an inlined ``rr:sqlQuery`` condition, with its column qualifiers as
alias slots).
"""

from __future__ import annotations

import re
import string
from datetime import date, datetime, timezone
from decimal import Decimal
from functools import lru_cache
from typing import Callable, Iterable, Mapping

from sqlglot import exp

from obda.model.dialects import COMPARISON_CLASSES
from obda.model.query import COMPARE_ALIAS, WINDOW_ALIAS

UNRESERVED = frozenset(string.ascii_letters + string.digits + "-._~")
# printable ASCII characters that IRI-safe encoding replaces ('%' must come first)
ENCODED_CHARS = "%" + "".join(c for c in map(chr, range(32, 127)) if c not in UNRESERVED and c != "%")

Template = tuple  # (text, alias, text, ..., text): odd positions are aliases

_CMP_CLASSES = COMPARISON_CLASSES
_CMP_OPS = {v: k for k, v in _CMP_CLASSES.items()}
_CMP_SQL = {"=": "=", "!=": "<>", "<": "<", "<=": "<=", ">": ">", ">=": ">="}


def _join(*templates: Template) -> Template:
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
        return _join(self.left.template, (f" {_CMP_SQL[self.op]} ",), self.right.template)

    def to_sqlglot(self, amap=None):
        return _CMP_CLASSES[self.op](this=self.left.to_sqlglot(amap), expression=self.right.to_sqlglot(amap))


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
        return _join(self.arg.template, (f" {'+' if op is exp.Add else '-'} INTERVAL '{amount}' {unit}",))

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
            return _join(("(CAST((",), self.left.template, (") AS DOUBLE) / NULLIF((",), self.right.template,
                         ("), 0))",))
        return _join(("(",), self.left.template, (f" {self.op} ",), self.right.template, (")",))

    def to_sqlglot(self, amap=None):
        return arithmetic_sql(self.op, self.left.to_sqlglot(amap), self.right.to_sqlglot(amap))


class Cast(Expr):
    """``CAST(x AS VARCHAR)`` (the text of a column in an IRI or string comparison)."""

    __slots__ = ("arg",)

    def __init__(self, arg: Expr):
        super().__init__()
        self.arg = arg

    def _template(self) -> Template:
        return _join(("CAST(",), self.arg.template, (" AS VARCHAR)",))

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
        return _join(("REPLACE(CAST(",), self.arg.template, (" AS VARCHAR), ' ', 'T')",))

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
        return _join((_ENC_HEAD,), self.arg.template, (_ENC_TAIL,))

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
        return _join(*parts)

    def _rename(self, ren):
        return Concat(tuple(a.rename(ren) for a in self.args))

    def to_sqlglot(self, amap=None):
        return exp.Concat(expressions=[a.to_sqlglot(amap) for a in self.args], **_CONCAT_ARGS)


# what exp.func("CONCAT", ...) sets besides the arguments (default dialect)
_CONCAT_ARGS = {
    k: v for k, v in exp.func("CONCAT", exp.Literal.string("a"), exp.Literal.string("b")).args.items() if k != "expressions"
}


class NotNull(Expr):
    """``NOT x IS NULL``."""

    __slots__ = ("arg",)

    def __init__(self, arg: Expr):
        super().__init__()
        self.arg = arg

    def _template(self) -> Template:
        return _join(("NOT ",), self.arg.template, (" IS NULL",))

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
        return _join(*parts)

    def _rename(self, ren):
        return NotAll(tuple(c.rename(ren) for c in self.conds))

    def to_sqlglot(self, amap=None):
        return exp.Not(this=exp.Paren(this=exp.and_(*(c.to_sqlglot(amap) for c in self.conds), copy=False)))


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
            if isinstance(node, exp.Column) and node.table.startswith(_SLOT):
                return column(node.name, names[int(node.table[len(_SLOT):])])
            return node

        return self.tree.copy().transform(fn, copy=False)


_SLOT = "slot"


def parse_datetime(lexical: str) -> datetime:
    """An xsd:dateTime / xsd:date lexical form as a naive UTC datetime."""
    text = lexical.strip()
    if text.endswith("Z"):
        text = text[:-1] + "+00:00"
    try:
        dt = datetime.fromisoformat(text)
    except ValueError:
        d = date.fromisoformat(text)
        dt = datetime(d.year, d.month, d.day)
    if dt.tzinfo is not None:
        dt = dt.astimezone(timezone.utc).replace(tzinfo=None)
    return dt


def python_value(e: exp.Expression):
    """The Python value of an SQL constant built by unfolding; None if not a constant.

    ``(kind, value)`` with kind ``s`` (string), ``n`` (number), ``b`` (boolean),
    ``t`` (timestamp): values of one kind compare with each other.
    """
    if isinstance(e, exp.Literal):
        if e.is_string:
            return ("s", e.this)
        return ("n", Decimal(e.this))
    if isinstance(e, exp.Boolean):
        return ("b", bool(e.this))
    if isinstance(e, exp.Cast) and isinstance(e.this, exp.Literal) and e.to.is_type("timestamp"):
        try:
            return ("t", parse_datetime(e.this.this))
        except ValueError:
            return None
    if isinstance(e, exp.Neg) and isinstance(e.this, exp.Literal) and not e.this.is_string:
        return ("n", -Decimal(e.this.this))
    return None


def const(e: exp.Expression) -> Const:
    """A constant node for a sqlglot constant."""
    return Const(e, python_value(e))


def split_cmp(e: Expr):
    """(op, left, right) for a binary comparison, else None."""
    if isinstance(e, Cmp):
        return e.op, e.left, e.right
    return None


def constant_value(e: Expr):
    """The Python value of a constant (see ``python_value``); None for anything else."""
    return e.value if isinstance(e, Const) else None


# ----------------------------------------------------------------------------- from sqlglot


def from_sqlglot(e: exp.Expression, alias_of: Callable[[str], str] | None = None) -> Expr:
    """The light form of a sqlglot condition or scalar (columns qualified by ``alias_of(qualifier)``).

    Comparisons, ``NOT x IS NULL``, columns and constants get their own nodes
    (so that simplification sees them, as it saw the sqlglot tree); anything
    else becomes a :class:`Raw` node.
    """
    alias_of = alias_of or (lambda t: t)

    def conv(node: exp.Expression) -> Expr:
        if isinstance(node, exp.Column) and node.table:
            return Col(alias_of(node.table), node.name)
        v = python_value(node)
        if v is not None or (not any(isinstance(n, exp.Column) for n in node.walk()) and _plain_constant(node)):
            return Const(node.copy(), v)
        op = _CMP_OPS.get(type(node))
        if op is not None:
            return Cmp(op, conv(node.this), conv(node.expression))
        if isinstance(node, exp.Not) and isinstance(node.this, exp.Is) and isinstance(node.this.expression, exp.Null):
            return NotNull(conv(node.this.this))
        return _raw(node, alias_of, conv)

    return conv(e)


def _plain_constant(node: exp.Expression) -> bool:
    return isinstance(node, (exp.Literal, exp.Boolean, exp.Null))


def _raw(node: exp.Expression, alias_of, conv) -> Raw:
    tree = node.copy()
    binding: list[str] = []
    slot_of: dict[str, int] = {}

    def fn(n: exp.Expression) -> exp.Expression:
        if isinstance(n, exp.Subquery):
            return n
        if isinstance(n, exp.Column) and n.table:
            a = alias_of(n.table)
            if a not in slot_of:
                slot_of[a] = len(binding)
                binding.append(a)
            return exp.column(exp.to_identifier(n.name), table=exp.to_identifier(f"{_SLOT}{slot_of[a]}"))
        return n

    tree = tree.transform(fn, copy=False)
    base = _slot_template(tree, len(binding))
    not_is = None
    if isinstance(node, exp.Not) and isinstance(node.this, exp.Is):
        not_is = conv(node.this.this)
    return Raw(tree, base, tuple(binding), not_is)


def _slot_template(tree: exp.Expression, n: int) -> Template:
    """The template of a tree whose column qualifiers are ``slot{i}``: printed with unique markers, then split."""
    for attempt in range(10):
        marker = f"zq{attempt}x"
        t = tree.copy()
        for col in t.find_all(exp.Column):
            q = col.table
            if q.startswith(_SLOT):
                col.set("table", exp.to_identifier(f"{marker}{q[len(_SLOT):]}{marker}"))
        text = t.sql()
        pieces = re.split(rf"{marker}(\d+){marker}", text)
        expected = sum(1 for c in tree.find_all(exp.Column) if c.table.startswith(_SLOT))
        if len(pieces) == 2 * expected + 1:
            return tuple(int(p) if i % 2 else p for i, p in enumerate(pieces))
    raise AssertionError(f"cannot template {tree.sql()}")  # pragma: no cover - needs 10 marker collisions


def flatten_conjuncts(e: exp.Expression) -> list[exp.Expression]:
    """The conjuncts of a sqlglot condition (parentheses and nested ANDs removed)."""
    while isinstance(e, exp.Paren):
        e = e.this
    if isinstance(e, exp.And):
        out: list[exp.Expression] = []
        for part in e.flatten():
            out.extend(flatten_conjuncts(part))
        return out
    return [e]


class Seq(Expr):
    """Text and expressions printed one after the other (a key for comparisons, never SQL output)."""

    __slots__ = ("parts",)

    def __init__(self, parts: tuple):
        super().__init__()
        self.parts = tuple(parts)

    def _template(self) -> Template:
        return _join(*((p,) if isinstance(p, str) else p.template for p in self.parts)) if self.parts else ("",)

    def _rename(self, ren):
        return Seq(tuple(p if isinstance(p, str) else p.rename(ren) for p in self.parts))

    def to_sqlglot(self, amap=None):  # pragma: no cover - keys only
        raise TypeError("Seq is a comparison key, not SQL")


class KeyIn(Expr):
    """``[NOT] (t1, ...) IN (subquery)``: a check (OPTIONAL's anti-join, MINUS, [NOT] EXISTS) of a member's terms
    against another query's answers.  The subquery is that query's SQL with FROM aliases of its own: fixed text,
    never renamed with the member's.  With a ``window`` (rules A3–A6: ``(op, bound)`` pairs, each ``query's last
    column op bound``, a bound over the member's timestamp) it is the correlated
    ``[NOT] EXISTS (SELECT 1 FROM (subquery) AS __w WHERE __w.c1 = t1 AND … AND __w.time op bound …)``; with
    ``compares`` (conditions over ``__w``'s columns and the member's terms: a FILTER of the pattern reading the
    answer's variables) too."""

    __slots__ = ("terms", "negated", "query", "_qsql", "window", "compares")

    def __init__(self, terms: tuple[Expr, ...], negated: bool, query: exp.Expression,
                 window: tuple[tuple[str, Expr], ...] = (), compares: tuple[Expr, ...] = ()):
        super().__init__()
        self.terms, self.negated, self.query, self.window, self.compares = terms, negated, query, window, compares
        self._qsql = query.sql()

    def _template(self) -> Template:
        if self.window or self.compares:
            names = self.query.named_selects
            alias = WINDOW_ALIAS if self.window else COMPARE_ALIAS
            parts: list[Template] = [(f"{'NOT ' if self.negated else ''}EXISTS (SELECT 1 FROM ({self._qsql}) AS "
                                      f"{alias} WHERE ",)]
            conds = [(f"{alias}.{n} = ", t) for n, t in zip(names, self.terms)]
            conds += [(f"{alias}.{names[-1]} {_CMP_SQL[op]} ", b) for op, b in self.window]
            conds += [("", c) for c in self.compares]  # over the same alias's columns
            for i, (text, e) in enumerate(conds):
                parts.append(((" AND " if i else "") + text,))
                parts.append(e.template)
            parts.append((")",))
            return _join(*parts)
        if not self.terms:
            return ((f"NOT EXISTS ({self._qsql})" if self.negated else f"EXISTS ({self._qsql})"),)
        parts: list[Template] = [("NOT (" if self.negated else "(",)]
        for i, t in enumerate(self.terms):
            if i:
                parts.append((", ",))
            parts.append(t.template)
        parts.append((f") IN ({self._qsql})",))
        return _join(*parts)

    def _rename(self, ren):
        return KeyIn(tuple(t.rename(ren) for t in self.terms), self.negated, self.query,
                     tuple((op, b.rename(ren)) for op, b in self.window), tuple(c.rename(ren) for c in self.compares))

    def to_sqlglot(self, amap=None):
        terms = [t.to_sqlglot(amap) for t in self.terms]
        if self.window or self.compares:
            names = self.query.named_selects
            alias = WINDOW_ALIAS if self.window else COMPARE_ALIAS
            col = lambda n: exp.column(n, table=alias)  # noqa: E731
            conds = [exp.EQ(this=col(n), expression=t) for n, t in zip(names, terms)]
            conds += [_CMP_CLASSES[op](this=col(names[-1]), expression=b.to_sqlglot(amap)) for op, b in self.window]
            conds += [c.to_sqlglot(amap) for c in self.compares]
            inner = exp.select("1").from_(exp.Subquery(this=self.query.copy(), alias=exp.TableAlias(
                this=exp.to_identifier(alias)))).where(exp.and_(*conds))
            node = exp.Exists(this=inner)
            return exp.Not(this=node) if self.negated else node
        if not terms:  # no shared variable: whether the other query has an answer at all
            node = exp.Exists(this=self.query.copy())
            return exp.Not(this=node) if self.negated else node
        this = terms[0] if len(terms) == 1 else exp.Tuple(expressions=terms)
        node = exp.In(this=this, query=exp.Subquery(this=self.query.copy()))
        return exp.Not(this=node) if self.negated else node
