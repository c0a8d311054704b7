"""Projection: a SELECT's output columns, each a column, a constant or a template of columns.

A template is a CONCAT / ``||`` of string constants and (cast, percent-encoded) columns, or a BIND's value (a
computed function or arithmetic over columns); each output column records the stream timestamps its value
determines (:mod:`obda.analysis.terms`, "Projected times").
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from sqlglot import exp

from obda.analysis import computed, terms
from obda.analysis.arithmetic import _ARITH, _arith_columns
from obda.analysis.elements import Attr
from obda.analysis.sql_reading import _AGGREGATES, SelectReading, _snippet
from obda.model.sources import ColumnType

FIXED_RANGES = {"MONTH": 12, "DAY": 31, "HOUR": 24, "MINUTE": 60}  # a date part's number of values


@dataclass(frozen=True)
class Projected:
    """One output column: the attributes and constants it is built from."""

    name: str
    kind: str  # column | constant | template
    attrs: tuple[Attr, ...] = ()
    constants: tuple[str, ...] = ()
    times: tuple[Attr, ...] = ()  # the stream timestamps its value determines (obda.analysis.terms)


class Projection(SelectReading):
    """The output columns of one SELECT."""

    # projection --------------------------------------------------------------------------
    def projection(self) -> tuple[Projected, ...]:
        out = []
        for i, item in enumerate(self.sel.expressions):
            name = item.alias_or_name if isinstance(item, exp.Alias) else (item.name if isinstance(item, exp.Column) else f"_{i + 1}")
            node = item.this if isinstance(item, exp.Alias) else item
            p = self._item(name, node)
            if p.attrs:
                times = terms.determined_times(node, self.column, self.types, self._is_stream_ts)
                p = replace(p, times=times) if times else p
            out.append(p)
        return tuple(out)

    def check_projection(self) -> tuple[Projected, ...]:
        """The terms of the checks over several FROM entries, and the conditions tested on the joined row (Rule 8;
        read by the conditions first): the executor keeps them with the answer to test it, so the verdict counts
        their columns as projected."""
        return (tuple(self._item(f"#check{i}", t) for i, t in enumerate(self.joined_terms))
                + tuple(self._item(f"#filter{i}", f) for i, f in enumerate(self.joined_filters)))

    def _is_stream_ts(self, a: Attr) -> bool:
        r = next(r for r in self.relations if r.alias == a.alias)
        return r.is_stream and (r.table.timestamp == a.column or a.column in self.ctx.copies.get(a.alias.lower(), ()))

    def _item(self, name: str, node: exp.Expression) -> Projected:
        ctx = self.ctx
        while isinstance(node, exp.Paren):
            node = node.this
        if isinstance(node, exp.Star):
            raise ctx.error("SELECT * is outside the analysable class; list the projected columns", node)
        if isinstance(node, exp.Column):
            a = self._proj_attr(node)
            return Projected(name, "column", (a,))
        if isinstance(node, exp.Cast) and isinstance(node.this, exp.Null):
            return Projected(name, "constant", (), ("NULL",))
        if isinstance(node, exp.Null):
            return Projected(name, "constant", (), ("NULL",))
        c = self.constant(node) if not isinstance(node, exp.Cast) or not isinstance(node.this, exp.Column) else None
        if c is not None:
            return Projected(name, "constant", (), (str(c),))
        attrs: list[Attr] = []
        consts: list[str] = []
        part = self._date_part(node)
        if part is not None:  # Rule 7: HOURS(?t) has 24 values, whatever the timestamps
            return Projected(name, "column", (part,))
        if computed.is_computed(node):  # a BIND's function value: a function of the columns it reads (Rule 7)
            cols = list(node.find_all(exp.Column))
            return Projected(name, "template", tuple(dict.fromkeys(self._proj_attr(c) for c in cols)), ())
        if isinstance(node, _ARITH):  # a BIND's number: a function of the columns it reads
            lin = _arith_columns(node)
            if lin is None:
                raise ctx.error(f"projection {_snippet(node)}: arithmetic over columns and numbers only", node)
            return Projected(name, "template", tuple(self._proj_attr(c) for c in lin), ())
        self._template(node, attrs, consts)
        kind = "template" if consts or len(attrs) != 1 or not isinstance(node, exp.Cast) else "column"
        return Projected(name, kind, tuple(attrs), tuple(consts))

    def _date_part(self, node: exp.Expression) -> Attr | None:
        """``EXTRACT(HOUR FROM m1.ts)`` (SPARQL's ``HOURS(?t)``; also MONTH, DAY, MINUTE) as a derived attribute of
        its entry with a fixed, finite range (:data:`FIXED_RANGES`): finite by its type, as a boolean is. YEAR and
        SECONDS (a decimal with microseconds) have no such range."""
        while isinstance(node, (exp.Paren, exp.Cast)):
            node = node.this
        if not isinstance(node, exp.Extract) or not isinstance(node.expression, exp.Column):
            return None
        unit = node.this.name.upper()
        if unit not in FIXED_RANGES:
            return None
        col = self.column(node.expression)
        attr = Attr(col.alias, f"⟨{unit}({col.column})⟩")
        self.types[attr] = ColumnType.INTEGER
        self.finite_parts[attr] = None
        return attr

    def _proj_attr(self, col: exp.Column) -> Attr:
        """A projected column; a stream's timestamp is a value like any other (obda.analysis.terms)."""
        return self.column(col)

    def _template(self, node: exp.Expression, attrs: list[Attr], consts: list[str]) -> None:
        """IRI templates: CONCAT / || of string constants and (cast) columns."""
        ctx = self.ctx
        while isinstance(node, exp.Paren):
            node = node.this
        if isinstance(node, (exp.Concat, exp.ConcatWs)):
            for e in node.expressions:
                self._template(e, attrs, consts)
            return
        if isinstance(node, exp.DPipe):
            self._template(node.this, attrs, consts)
            self._template(node.expression, attrs, consts)
            return
        if isinstance(node, exp.Cast):
            self._template(node.this, attrs, consts)
            return
        if (isinstance(node, exp.Replace) and isinstance(node.expression, exp.Literal)
                and isinstance(node.args.get("replacement"), exp.Literal)):
            # the IRI-safe percent-encoding of a template value (R2RML): a one-to-one function of its argument
            self._template(node.this, attrs, consts)
            return
        if isinstance(node, exp.Column):
            attrs.append(self._proj_attr(node))
            return
        c = self.constant(node)
        if c is not None:
            consts.append(str(c))
            return
        if isinstance(node, exp.AggFunc):
            raise ctx.error(f"aggregate {_snippet(node)} is outside the SPJ class; {_AGGREGATES}", node)
        if computed.is_computed(node) or (isinstance(node, _ARITH) and _arith_columns(node) is not None):
            # a part computed by a function or arithmetic (CONCAT(?n, STR(?b + 1))): a function of its columns
            attrs.extend(self._proj_attr(c) for c in node.find_all(exp.Column))
            return
        raise ctx.error(f"projected expression {type(node).__name__} ({_snippet(node)}) is outside the analysable class; "
                        "project columns, constants or CONCAT templates of them", node)
