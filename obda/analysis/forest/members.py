"""Executable members: the unfolder's SELECT trees (and per-atom views) as typed :class:`Member` objects.

The one place where the executable structure of a member is built, from the analysis's reading of its SELECT:
FROM aliases (source tables or per-atom views), its conditions where they are tested
(:mod:`obda.analysis.forest.member_conditions`), output items (attributes, constants, CONCAT templates, values
of the joined row).  A disjunction over several FROM entries splits the SELECT into one member per disjunct
(:mod:`obda.analysis.forest.disjunctions`), and a ``≤`` / ``≥`` / ``≠`` between two stream timestamps into
disjoint ``<`` / ``=`` members, as the analysis splits them.
"""

from __future__ import annotations

from dataclasses import replace

from sqlglot import exp

from obda.analysis.elements import TIMESTAMP_SPLITS, Attr as EAttr
from obda.analysis.forest import disjunctions
from obda.analysis.forest.checks import OutputCheck
from obda.analysis.forest.constants import constant_value, unparen
from obda.analysis.forest.member_conditions import CMP, SelectContext, classify
from obda.analysis.forest.model import Attr, CrossPred, Member, OutItem
from obda.analysis.sql_reading import SelectReading, conjuncts, member_views, parse_sql, select_context
from obda.analysis.terms import determined_times, view_timestamp_keys
from obda.errors import ExecutionError, Location
from obda.model.compilation import Compilation
from obda.model.sources import ColumnType, Sources, Table
from obda.query.tokens import binding_position


def members_of(source, sources: Sources, dialect: str | None = None,
               readings: dict | None = None) -> tuple[tuple[Member, ...], bool, tuple[str, ...]]:
    """Executable members of a Compilation (the unfolder's SELECT trees and views), a sqlglot tree or SQL text.

    SQL text is read by the analyser's front end (:func:`obda.analysis.sql_reading.parse_sql`).
    Members are expanded so that no member has a ``≤``/``≥``/``≠`` between two
    stream timestamps (split into disjoint ``<``/``=`` members, spec §3 step 1).
    ``readings``: SELECT position → the analysis's reading of that SELECT (:attr:`SpjMember.reading`), reused.
    Returns the members, whether the query is DISTINCT, and the output columns.
    """
    views: list[dict] = []
    if isinstance(source, Compilation):
        selects = [m.select for m in source.members]
        distinct = bool(source.distinct)
        columns = tuple(v.name for v in source.query.projection)  # the members' (an aggregate's Q')
        views = member_views(source)
    else:
        tree = source if isinstance(source, exp.Expression) else parse_sql(source, dialect=dialect)
        selects, distinct = _flatten_union(tree)
        columns = tuple(_item_name(e) for e in selects[0].expressions) if selects else ()
    terms = [m.terms for m in source.members] if isinstance(source, Compilation) else [() for _ in selects]
    locate = _binding_locator(source.query) if isinstance(source, Compilation) else None
    text = source if isinstance(source, str) else None
    members: list[Member] = []
    for origin, sel in enumerate(selects):
        read = (readings or {}).get(origin)
        read = read if read is not None and read.sel is sel else None
        for parsed in _parse_members(sel, sources, origin, views[origin] if views else {}, locate, text, read,
                                     distinct):
            for m in _expand_members(parsed):
                members.append(replace(m, index=len(members), terms=terms[origin]))
    return tuple(members), distinct, columns


def _flatten_union(tree: exp.Expression) -> tuple[list[exp.Select], bool]:
    if isinstance(tree, exp.Subquery):
        return _flatten_union(tree.this)
    if isinstance(tree, exp.Union):
        left, dl = _flatten_union(tree.this)
        right, dr = _flatten_union(tree.expression)
        return left + right, bool(tree.args.get("distinct")) or dl or dr
    if isinstance(tree, exp.Select):
        return [tree], bool(tree.args.get("distinct"))
    raise ExecutionError(f"expected a UNION [ALL] of SELECTs, got {type(tree).__name__}: {tree.sql()[:80]}")


def _item_name(e: exp.Expression) -> str:
    if isinstance(e, exp.Alias):
        return e.alias
    if isinstance(e, exp.Column):
        return e.name
    raise ExecutionError(f"projected item {e.sql()!r} has no name (use AS)")


def _binding_locator(query):
    """Answer variable → where the query binds it (``AS ?v``), for the errors of the values this module reads."""
    def locate(name: str) -> Location | None:
        if name.startswith("#") or not query.text:
            return None
        line, column = binding_position(query.text, name)
        return Location(query.location.file, line, column) if line is not None else None
    return locate


def _parse_members(sel: exp.Select, sources: Sources, index: int, views: dict | None = None, locate=None,
                   text: str | None = None, reading: SelectReading | None = None,
                   distinct: bool = False) -> list[Member]:
    """A SELECT's executable members: one per disjunct of a disjunction over several FROM entries, as the
    analysis's normal form has them (:mod:`obda.analysis.forest.disjunctions`), else one."""
    # FROM entries and columns: the analysis's reading (sql_reading.SelectReading), errors located in ``text``
    reading = reading or SelectReading(sel, select_context(sources, views, text))
    conds = [c for on in reading.entries() for c in conjuncts(on)]  # reads the FROM entries (reading.relations)
    ctx = SelectContext(sel, sources, reading, {r.alias: r.table for r in reading.relations})
    conds.extend(conjuncts(sel.args.get("where").this if sel.args.get("where") else None))
    used_views = {a: v for a, v in (views or {}).items() if a in ctx.aliases}
    split = disjunctions.split(conds, ctx.owners, distinct or bool(sel.args.get("distinct")), ctx.never_null)
    return [_member(ctx, index, classify(ctx, cs), used_views, locate) for cs in split]


def _member(ctx: SelectContext, index: int, found, used_views: dict, locate) -> Member:
    """The executable member of a SELECT whose conditions are ``found``: its output items (the answer's, then each
    check's terms and each joined-row filter, hidden)."""
    sel, aliases, resolve, is_ts, unq, exprs = ctx.sel, ctx.aliases, ctx.resolve, ctx.is_ts, ctx.unq, found.exprs
    types = {EAttr(a, c.name): c.type for a, t in aliases.items() for c in t.columns}

    def stream_ts(a: EAttr) -> bool:
        t = aliases[a.alias]
        copies = view_timestamp_keys(used_views[a.alias], ctx.sources) if a.alias in used_views else ()
        return t.is_stream and t.timestamp is not None and (t.timestamp.lower() == a.column.lower()
                                                            or a.column in copies)

    def times(body: exp.Expression) -> tuple:
        found = determined_times(body, lambda c: EAttr(*resolve(c)), types, stream_ts)
        return tuple((a.alias, a.column) for a in found)

    # a value of constants the SQL computes (a function's, STRLEN("abc")): computed per row of one FROM entry,
    # a static table's where there is one (a stream's attribute of the answer would count against its verdict)
    host = ctx.host if aliases else None
    items: list[OutItem] = []
    for e in sel.expressions:
        body = unparen(e.this if isinstance(e, exp.Alias) else e)
        item = _out_item(_item_name(e), body, resolve, exprs, unq, is_ts, host, locate)
        items.append(replace(item, times=times(body)))
    checks: list[OutputCheck] = []
    for k, (terms_of, negated, query, timed, window, compares) in enumerate(found.checks):
        start = len(items)
        items.extend(replace(_out_item(f"#check{k}.{i}", t, resolve, exprs, unq, is_ts), times=times(t))
                     for i, t in enumerate(terms_of))
        checks.append(OutputCheck(tuple(range(start, len(items))), negated, query.sql(), tree=query, timed=timed,
                                  window=window, compares=compares))
    filters = tuple(range(len(items), len(items) + len(found.joined)))
    items.extend(_joined_item(f"#filter{k}", c, resolve, is_ts) for k, c in enumerate(found.joined))
    return Member(
        index=index,
        aliases=tuple(aliases.items()),
        local=tuple((a, tuple(cs)) for a, cs in found.local.items()),
        cross=tuple(found.cross),
        items=tuple(items),
        exprs=tuple(exprs),
        unsatisfiable=found.unsatisfiable,
        sql=sel.sql(dialect="spark"),
        origin=index,
        views=tuple(used_views.items()),
        checks=tuple(checks),
        filters=filters,
    )


def iso_text_sql(e: exp.Expression) -> exp.Expression:
    """``REPLACE(CAST(CAST(e AS TIMESTAMP) AS STRING), ' ', 'T')``: a timestamp's canonical xsd:dateTime text,
    the value of a projected time on both backends (what the unfolder's SQL projects is the timestamp)."""
    return exp.Replace(this=exp.cast(exp.cast(e, "TIMESTAMP"), "STRING"), expression=exp.Literal.string(" "),
                       replacement=exp.Literal.string("T"))


def _out_item(name: str, body: exp.Expression, resolve, exprs: list, unq, is_ts, host: str | None = None,
              locate=None) -> OutItem:
    """One output item; ``locate``: answer variable → where the query binds it (its errors' location)."""
    cols = list(body.find_all(exp.Column))
    owners = {resolve(c)[0] for c in cols}
    if isinstance(body, exp.Column) and is_ts(body):  # a projected time: its xsd:dateTime text
        attr = (resolve(body)[0], f"#p{len(exprs)}")
        exprs.append((attr, iso_text_sql(exp.column(resolve(body)[1], quoted=True))))
        return OutItem(name, "attr", attr=attr)
    if isinstance(body, exp.Column):
        return OutItem(name, "attr", attr=resolve(body))
    if not owners:
        try:
            if isinstance(body, exp.Concat):
                return OutItem(name, "const", value="".join(str(constant_value(unparen(a))) for a in body.expressions))
            return OutItem(name, "const", value=constant_value(body))
        except ExecutionError:
            if host is None:  # a member of constants only: no row to compute it on
                raise ExecutionError(f"?{name}: the value {body.sql()!r} of constants only is computed by SQL, and "
                                     "this part of the query reads no table to compute it on; give its group a "
                                     "triple pattern, or write the value itself", locate and locate(name)) from None
            owners = {host}
    if len(owners) == 1:
        alias = owners.pop()
        attr = (alias, f"#p{len(exprs)}")
        exprs.append((attr, unq(body)))
        return OutItem(name, "attr", attr=attr)
    if isinstance(body, exp.Concat) and all(len({resolve(c)[0] for c in a.find_all(exp.Column)}) <= 1
                                            for a in body.expressions):
        parts: list[tuple[str, object]] = []
        for a in body.expressions:
            a = unparen(a)
            a_owners = {resolve(c)[0] for c in a.find_all(exp.Column)}
            if not a_owners:
                parts.append(("const", str(constant_value(a))))
            else:
                attr = (a_owners.pop(), f"#p{len(exprs)}")
                exprs.append((attr, exp.cast(unq(a), "STRING")))
                parts.append(("attr", attr))
        return OutItem(name, "concat", parts=tuple(parts))
    return _joined_item(name, body, resolve, is_ts, locate)


def _joined_item(name: str, body: exp.Expression, resolve, is_ts, locate=None) -> OutItem:
    """A value computed from the columns of several FROM entries (``?v2 - ?v1`` of two joined rows, or a condition
    of them that does not separate, Rule 8): each column an attribute of its entry, the expression computed on the
    joined row, its columns ``__a0``, ``__a1``, … the item's attributes in order
    (:func:`obda.execution.engine.binder`; the Spark backend's answer statement)."""
    args: list[Attr] = []

    def placeholder(node: exp.Expression) -> exp.Expression:
        if not isinstance(node, exp.Column):
            return node
        if is_ts(node):  # a time is held as microseconds where the answers are computed, not as SQL's timestamp
            what = f"the condition {body.sql()!r}" if name.startswith("#") else f"?{name}: the value {body.sql()!r}"
            raise ExecutionError(f"{what} computes with a stream's timestamp and columns of other FROM entries; "
                                 "bind the time alone, or compute with the values only", locate and locate(name))
        attr = resolve(node)
        if attr not in args:
            args.append(attr)
        return exp.column(f"__a{args.index(attr)}")

    return OutItem(name, "expr", value=body.copy().transform(placeholder), parts=tuple(("attr", a) for a in args))


def is_stream_ts(m: Member, attr: Attr) -> bool:
    t = m.table(attr[0])
    return t.is_stream and t.timestamp is not None and t.timestamp.lower() == attr[1].lower()


def _expand_members(m: Member) -> list[Member]:
    """Split ``τi ≤ τj`` into ``<`` / ``=`` and ``τi ≠ τj`` into ``<`` / ``>`` (disjoint members, the analysis's
    rule: :data:`obda.analysis.elements.TIMESTAMP_SPLITS`)."""
    for i, p in enumerate(m.cross):
        if p.op in TIMESTAMP_SPLITS and not p.offset and is_stream_ts(m, p.left) and is_stream_ts(m, p.right):
            out = []
            for op in TIMESTAMP_SPLITS[p.op]:
                cross = m.cross[:i] + (CrossPred(p.left, op, p.right),) + m.cross[i + 1 :]
                out.extend(_expand_members(replace(m, cross=cross)))
            return out
    return [m]


# ----------------------------------------------------------------------------------------------
# Planning



def infer_local_conditions(m: Member) -> dict[str, tuple[exp.Expression, ...]]:
    """Constant conditions implied through equality joins (``a.x = b.y ∧ 0 < b.y`` ⊢ ``0 < a.x``).

    Pure constraint propagation (same result), so Spark drops rows that can never join before
    they are counted.  Only between columns of the same declared type.
    """
    local: dict[str, list[exp.Expression]] = {a: list(m.local_of(a)) for a, _ in m.aliases}
    seen = {a: {c.sql() for c in cs} for a, cs in local.items()}
    added: dict[str, list[exp.Expression]] = {}
    for _ in range(len(m.aliases)):
        changed = False
        for p in m.cross:
            if p.op != "=":
                continue
            for src, dst in ((p.right, p.left), (p.left, p.right)):
                if column_type(m.table(src[0]), src[1]) != column_type(m.table(dst[0]), dst[1]):
                    continue
                for c in list(local[src[0]]):
                    cols = list(c.find_all(exp.Column))
                    if not cols or any(col.name != src[1] for col in cols) or CMP.get(type(unparen(c))) is None:
                        continue
                    new = c.copy().transform(
                        lambda n: exp.column(dst[1], quoted=True) if isinstance(n, exp.Column) else n
                    )
                    if new.sql() not in seen[dst[0]]:
                        seen[dst[0]].add(new.sql())
                        local[dst[0]].append(new)
                        added.setdefault(dst[0], []).append(new)
                        changed = True
        if not changed:
            break
    return {a: tuple(cs) for a, cs in added.items()}



def column_type(table: Table, name: str) -> ColumnType | None:
    c = table.column(name)
    return c.type if c else None

