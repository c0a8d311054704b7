"""SQL constants and sqlglot trees read into the light unfolding IR (:mod:`obda.mapping._unfold_ir`).

Private helper of :mod:`obda.mapping.unfold`.  A sqlglot constant becomes a :class:`~obda.mapping._unfold_ir.Const`
with its Python value (:func:`python_value`: values of one kind compare with each other, which simplification
uses); a mapping's condition or scalar becomes IR nodes (:func:`from_sqlglot`: comparisons, ``NOT x IS NULL``,
columns and constants their own nodes, anything else a :class:`~obda.mapping._unfold_ir.Raw` tree whose column
qualifiers are alias slots).
"""

from __future__ import annotations

import re
from datetime import date, datetime, timezone
from decimal import Decimal
from typing import Callable

from sqlglot import exp

from obda.mapping._unfold_ir import SLOT, Cmp, Col, Const, Expr, NotNull, Raw, Template
from obda.model.dialects import COMPARISON_CLASSES

CMP_OPS = {v: k for k, v in COMPARISON_CLASSES.items()}


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
        op = CMP_OPS.get(type(node))
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
            return exp.column(exp.to_identifier(n.name), table=exp.to_identifier(f"{SLOT}{slot_of[a]}"))
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
            if q.startswith(SLOT):
                col.set("table", exp.to_identifier(f"{marker}{q[len(SLOT):]}{marker}"))
        text = t.sql()
        pieces = re.split(rf"{marker}(\d+){marker}", text)
        expected = sum(1 for c in tree.find_all(exp.Column) if c.table.startswith(SLOT))
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
