"""RDF terms in the normal form: whole-term template equalities and projected timestamps.

Two rules of docs/analysis.md ("Terms built from templates and times") read the unfolder's SQL here:

* **One template, compared whole.**  ``CONCAT('…/Sensor_', m1.station, '_', m1.kind) = CONCAT('…/Sensor_',
  m2.station, '_', m2.kind)`` — two instances of one IRI template whose parts can run into each other (two
  string columns around ``_``), so the unfolder compares the whole terms.  For the verdict it is read as the
  equality of the columns slot by slot (:func:`template_pairs`); :func:`mixed_groups` finds the members where
  that reading would let one column be bounded through the equality while another column of the same term is
  not, and there the two terms are compared as two opaque values instead (:func:`virtual_reading`).
* **Projected times.**  A stream's timestamp column in the output — ``?t`` of ``GRAPH ?t``, or a column of an
  IRI or literal built from it — is a value of its stream (:func:`projected_times`); the criteria decide it
  (obda.analysis.criteria: an answer keyed by its own timestamp needs no memory to stay distinct).
"""

from __future__ import annotations

import re
from datetime import datetime
from decimal import Decimal, InvalidOperation
from fractions import Fraction
from typing import Callable, Iterable, Mapping
from urllib.parse import unquote

from sqlglot import exp

from obda.analysis.elements import BOOLEAN, NUMERIC, STRING, TIMESTAMP, Attr, Const, Predicate
from obda.mapping.template_text import UNRESERVED, can_contain, determined_columns, is_template, iso_text
from obda.mapping.template_text import sql_template_parts as template_parts
from obda.model.sources import ColumnType

__all__ = [
    "is_template", "template_parts", "template_pairs", "whole_term_equality", "template_constant", "piece_value",
    "mixed_groups", "virtual_reading", "projected_times", "determined_times", "view_timestamp_keys",
]

# a template part: fixed text, or a column with the SQL that turns it into text (the column as '{}')
Part = tuple[str, object]

def template_pairs(left: list[Part], right: list[Part], types: Mapping[Attr, ColumnType]) -> list[tuple[Attr, Attr]] | None:
    """The column pairs of two instances of one template (the same fixed texts, and at every slot the same
    text function of columns of the same type), or None when the two sides are not one template."""
    if len(left) != len(right):
        return None
    pairs: list[tuple[Attr, Attr]] = []
    for (kl, vl), (kr, vr) in zip(left, right):
        if kl != kr:
            return None
        if kl == "text":
            if vl != vr:
                return None
            continue
        (a, fa), (b, fb) = vl, vr
        if fa != fb or types.get(a) is not types.get(b):
            return None
        if a != b:
            pairs.append((a, b))
    return pairs


def pair_predicates(pairs: Iterable[tuple[Attr, Attr]], location) -> list[Predicate]:
    return [Predicate.make(a, "=", b, location) for a, b in pairs]


def whole_term_equality(sel, left: exp.Expression, op: str, right: exp.Expression, node: exp.Expression):
    """``CONCAT(…) = CONCAT(…)`` over one template, in a SELECT being read (``normal_form._Select``): the
    equality of its columns slot by slot, for the verdict (the SQL compares the whole terms); the pairs are
    recorded in ``sel.templates``.  Anything else with a concatenation on both sides is a located error."""
    lp = template_parts(left, sel.column)
    rp = template_parts(right, sel.column)
    pairs = template_pairs(lp, rp, sel.types) if lp is not None and rp is not None else None
    text = node.sql()
    text = text if len(text) <= 80 else text[:77] + "..."
    if pairs is None:
        raise sel.ctx.error(f"condition {text} compares two concatenations that are not instances of one template "
                            "(the same fixed text around columns of the same types); outside the analysable class", node)
    if op != "=":
        raise sel.ctx.error(f"condition {text}: a disequality of two terms of one template whose parts can run into "
                            "each other is outside the analysable class (only their equality is read as the equality "
                            "of their columns)", node)
    if not pairs:
        return True
    sel.templates.append(tuple(pairs))
    preds = pair_predicates(pairs, sel.ctx.loc(node))
    return preds[0] if len(preds) == 1 else ("and", preds)


MAX_PARSES = 64


def template_constant(sel, tmpl: exp.Expression, other: exp.Expression, node: exp.Expression):
    """``CONCAT(…) = 'text'`` (a template whose parts can run into each other, against a constant term): the
    disjunction, over the finitely many ways to cut the text into the template's parts, of its columns
    equal to the values of their pieces (False when there is none); None when ``other`` is not a string
    constant or ``tmpl`` not a template of columns."""
    parts = template_parts(tmpl, sel.column)
    c = sel.constant(other)
    if parts is None or c is None or not isinstance(c.value, str):
        return None
    shaped = [v if k == "text" else (sel.types.get(v[0]), "R'%'" in v[1]) for k, v in parts]
    out = []
    for cut in _parses(shaped, c.value, 0, 0):
        conj = []
        for i, text in cut:
            value = piece_value(shaped[i][0], shaped[i][1], text)
            if value is None:
                break
            conj.append(Predicate.make(parts[i][1][0], "=", value, sel.ctx.loc(node)))
        else:
            out.append(("and", conj) if len(conj) > 1 else conj[0] if conj else True)
        if len(out) > MAX_PARSES:
            text = node.sql()
            raise sel.ctx.error(f"condition {text[:77]}: the constant can be cut into the template's parts in more "
                                f"than {MAX_PARSES} ways; outside the analysable class", node)
    if not out:
        return False
    return out[0] if len(out) == 1 else ("or", out)


def _parses(parts, text: str, i: int, pos: int):
    """Every way to cut ``text[pos:]`` into ``parts[i:]``: lists of (part index, its text)."""
    if i == len(parts):
        if pos == len(text):
            yield []
        return
    p = parts[i]
    if isinstance(p, str):
        if text.startswith(p, pos):
            yield from _parses(parts, text, i + 1, pos + len(p))
        return
    end = pos
    while True:
        for rest in _parses(parts, text, i + 1, end):
            yield [(i, text[pos:end])] + rest
        if end == len(text) or not can_contain(p[0], p[1], text[end]):
            return
        end += 1


def piece_value(column_type: ColumnType | None, encoded: bool, text: str) -> Const | None:
    """The column value whose text (encoded when ``encoded``) is ``text``, as a constant; None when no value of
    the type has that text (its text is canonical: ``007`` is no integer's, ``%41`` no encoded string's)."""
    if encoded and column_type in (ColumnType.STRING, ColumnType.TIMESTAMP, None):
        decoded = unquote(text, errors="strict") if "%" in text else text
        if "".join(ch if ch in UNRESERVED or ord(ch) > 127 else "%%%02X" % ord(ch) for ch in decoded) != text:
            return None
        text = decoded
    if column_type is ColumnType.INTEGER:
        return Const(NUMERIC, Fraction(int(text)), text) if re.fullmatch(r"-?(0|[1-9][0-9]*)", text) and text != "-0" else None
    if column_type in (ColumnType.DECIMAL, ColumnType.DOUBLE):
        try:
            return Const(NUMERIC, Fraction(Decimal(text)), text)
        except (InvalidOperation, ValueError):
            return None
    if column_type is ColumnType.BOOLEAN:
        return Const(BOOLEAN, text == "true", text.upper()) if text in ("true", "false") else None
    if column_type is ColumnType.TIMESTAMP:
        try:
            d = datetime.fromisoformat(text)
        except ValueError:
            return None
        if d.tzinfo is not None or iso_text(d) != text:
            return None
        delta = d - datetime(1970, 1, 1)
        return Const(TIMESTAMP, (delta.days * 86400 + delta.seconds) * 1_000_000 + delta.microseconds, f"TIMESTAMP '{text}'")
    return Const(STRING, text, "'" + text.replace("'", "''") + "'")


# ---------------------------------------------------------------------------------------------------------
# the exactness guard


def mixed_groups(groups, bounded: Callable[[Attr], bool]) -> list[int]:
    """Indexes of the template equalities whose columns are partly bounded under the column reading.

    A term's value is bounded iff each of its columns is (a value has finitely many parses), so where all
    columns of both terms are bounded, or none is, the column reading and the term reading agree on every
    attribute; where only some are, the column reading bounds a column through the equality that the term
    equality does not bound (``m1.station = 'A'`` says nothing of ``m2.station`` when ``m2.kind`` is free:
    ``A_x`` + ``y`` and ``A`` + ``x_y`` are one IRI)."""
    out = []
    for i, pairs in enumerate(groups):
        flags = {bounded(x) for pair in pairs for x in pair}
        if len(flags) > 1:
            out.append(i)
    return out


def virtual_reading(groups, which: Iterable[int], atoms, explicit: frozenset, types: Mapping[Attr, ColumnType]):
    """``atoms`` with the template equalities ``which`` read as equalities of two opaque terms: the column
    pairs leave (unless an ordinary condition states them too) and ``a.term(cols) = b.term(cols)`` comes in,
    a string attribute of each side.  Returns the atoms and the added attribute types.  A side whose columns
    come from several FROM entries keeps the column reading (there is no single relation to hold the term)."""
    atoms = list(atoms)
    added: dict[Attr, ColumnType] = {}
    for i in which:
        pairs = groups[i]
        left_aliases = {a.alias for a, _ in pairs}
        right_aliases = {b.alias for _, b in pairs}
        if len(left_aliases) != 1 or len(right_aliases) != 1:
            continue
        drop = {(a, b) for a, b in pairs if (a, b) not in explicit and (b, a) not in explicit}
        atoms = [t for t in atoms if not (t[1] == "=" and ((t[0], t[2]) in drop or (t[2], t[0]) in drop))]
        ta = Attr(left_aliases.pop(), "term(" + ", ".join(a.column for a, _ in pairs) + ")")
        tb = Attr(right_aliases.pop(), "term(" + ", ".join(b.column for _, b in pairs) + ")")
        added[ta] = added[tb] = ColumnType.STRING
        atoms.append((ta, "=", tb))
    return atoms, added


# ---------------------------------------------------------------------------------------------------------
# projected times


def projected_times(attrs: Iterable[Attr], is_stream_timestamp: Callable[[Attr], bool]) -> tuple[Attr, ...]:
    """The projected attributes that are a stream's timestamp (``?t`` itself, or a column of a term built
    from it)."""
    return tuple(a for a in attrs if is_stream_timestamp(a))


def determined_times(node: exp.Expression, column: Callable[[exp.Column], Attr], types: Mapping[Attr, ColumnType],
                     is_stream_timestamp: Callable[[Attr], bool]) -> tuple[Attr, ...]:
    """The stream timestamps whose value a projected term determines: the column itself, or a template's
    timestamp part that its text determines (obda.mapping.template_text.determined_parts: in
    ``Observation_{station}_{time}`` the time, in ``{name}{time}`` with a string ``name`` not)."""
    return tuple(a for a in determined_columns(node, column, types.get) if is_stream_timestamp(a))


def view_timestamp_keys(view, sources) -> frozenset[str]:
    """The columns of a stream view (``obda.mapping`` AtomView) whose value determines the row's timestamp in
    every branch: a copy of it (a template's time slot ``s_3``), or a rendered term whose text determines it
    (``s`` = ``…/Observation_{station}_{time}``)."""
    if not view.temporal or not view.parts:
        return frozenset()
    out: set[str] | None = None
    for br in view.parts:
        items = dict(br.items)
        ts = items.get("ts")
        if not isinstance(ts, exp.Column):
            return frozenset()
        tables = dict(zip(br.aliases, br.tables))

        def type_of(key, br=br, tables=tables):
            name = br.table if br.single else tables.get(key[0])
            table = sources.table(name) if name else None
            col = table.column(key[1]) if table is not None else None
            return col.type if col is not None else None

        def key(c: exp.Column):
            return (c.table or "", c.name)

        same = {key(ts)}  # the columns the branch equates with its timestamp (a join's other stream)
        for _ in range(len(br.conds)):
            for cond in br.conds:
                if isinstance(cond, exp.EQ) and all(isinstance(x, exp.Column) for x in (cond.this, cond.expression)):
                    pair = {key(cond.this), key(cond.expression)}
                    if pair & same:
                        same |= pair
        found = {c for c, e in items.items() if c != "ts" and same & set(determined_columns(e, key, type_of))}
        out = found if out is None else out & found
    return frozenset(out or ())
