"""Simplification of unfolded SPJ members.

Private helper of :mod:`obda.mapping.unfold`, over the light expressions of
:mod:`obda.mapping._unfold_ir` (conditions are compared by their SQL text):

* :func:`simplify` normalises a member's WHERE conjunction, evaluates
  comparisons between constants and detects unsatisfiable conjunctions
  (``x < x``, ``a = 1 AND a = 2``, ``a > 5 AND a < 3``, ...) with a
  union-find over column equalities plus per-class constant bounds;
* :func:`eliminate_self_joins` merges two FROM entries of the same table when
  the table has a declared key and the WHERE clause equates the full key
  (both entries then always match the same single row, so multiplicity is kept);
* :func:`canonical_key` gives a string that is equal for two members that are
  equal up to renaming of aliases and order of FROM entries and conditions.
"""

from __future__ import annotations

import itertools
from collections import defaultdict

from obda.mapping._unfold_ir import Cmp, Col, Expr, NotNull, render
from obda.mapping._unfold_read import constant_value, split_cmp
from obda.mapping._unfold_tables import FromEntry
from obda.mapping._unfold_terms import Unsat
from obda.model.unionfind import UnionFind

from obda.model.query import FLIP as _FLIP


def make_cmp(op: str, left: Expr, right: Expr) -> Expr:
    return Cmp(op, left, right)


def _holds(op: str, a, b) -> bool | None:
    """Evaluate ``a op b`` for two constants of the same kind; None if they do not compare."""
    if a[0] != b[0]:
        return None
    x, y = a[1], b[1]
    try:
        return {"=": x == y, "!=": x != y, "<": x < y, "<=": x <= y, ">": x > y, ">=": x >= y}[op]
    except TypeError:
        return None


def _orient(c: Expr) -> Expr:
    """Put a column on the left of a comparison with a constant (``5 < a.x`` → ``a.x > 5``)."""
    s = split_cmp(c)
    if s is None:
        return c
    op, l, r = s
    if constant_value(l) is not None and constant_value(r) is None:
        return Cmp(_FLIP[op], r, l)
    return c


def simplify(conds: list[Expr], exempt: set[str]) -> list[Expr]:
    """Normalised, duplicate-free conditions; raises :class:`Unsat` (with the reason) if never true.

    ``exempt`` holds columns known to be non-null (keys, timestamps): ``x = x``
    on them is dropped; on other columns it becomes ``x IS NOT NULL``.
    (Conditions are conjuncts already: inlined ``rr:sqlQuery`` conditions are
    split when the logical table is analysed.)
    """
    out: list[Expr] = []
    seen: set[str] = set()
    for c in conds:
        c = _orient(c)
        s = split_cmp(c)
        if s is not None:
            op, l, r = s
            vl, vr = constant_value(l), constant_value(r)
            if vl is not None and vr is not None:
                h = _holds(op, vl, vr)
                if h is True:
                    continue
                if h is False:
                    raise Unsat(f"{c.sql()} is false")
            if l.sql() == r.sql():
                if op in ("<", ">", "!="):
                    raise Unsat(f"{c.sql()} is never true")
                if l.sql() in exempt:
                    continue
                c = NotNull(l)
        key = c.sql()
        if key not in seen:
            seen.add(key)
            out.append(c)
    _check(out)
    return out


def _side(e: Expr) -> tuple:
    v = constant_value(e)
    return ("k", v) if v is not None else ("c", e.sql())


def _check(conds: list[Expr]) -> None:
    """Raise Unsat when equalities and constant bounds contradict each other."""
    uf = UnionFind()
    cmps = []
    for c in conds:
        s = split_cmp(c)
        if s is None:
            continue
        op, l, r = s
        lk, rk = _side(l), _side(r)
        cmps.append((op, lk, rk, c))
        if op == "=" and lk[0] == "c" and rk[0] == "c":
            uf.union(lk[1], rk[1])
    const: dict[str, tuple] = {}
    bounds: dict[str, list] = defaultdict(list)
    for op, lk, rk, c in cmps:
        if lk[0] == "c" and rk[0] == "k":
            root = uf.find(lk[1])
            if op == "=":
                prev = const.get(root)
                if prev is not None and _holds("=", prev, rk[1]) is False:
                    raise Unsat(f"{c.sql()} contradicts an equality with {_show(prev)}")
                const[root] = rk[1]
            bounds[root].append((op, rk[1], c))
    for op, lk, rk, c in cmps:
        if lk[0] == "c" and rk[0] == "c" and op in ("<", ">", "!=") and uf.find(lk[1]) == uf.find(rk[1]):
            raise Unsat(f"{c.sql()} contradicts the equalities of the member")
    for root, bs in bounds.items():
        if root in const:
            for op, v, c in bs:
                if _holds(op, const[root], v) is False:
                    raise Unsat(f"{c.sql()} contradicts {_show(const[root])}")
            continue
        lo = hi = None  # (value, strict, cond)
        for op, v, c in bs:
            if op in (">", ">="):
                if lo is None or _holds(">", v, lo[0]) or (_holds("=", v, lo[0]) and op == ">"):
                    lo = (v, op == ">", c)
            elif op in ("<", "<="):
                if hi is None or _holds("<", v, hi[0]) or (_holds("=", v, hi[0]) and op == "<"):
                    hi = (v, op == "<", c)
        if lo is not None and hi is not None:
            if _holds(">", lo[0], hi[0]) or (_holds("=", lo[0], hi[0]) and (lo[1] or hi[1])):
                raise Unsat(f"{lo[2].sql()} contradicts {hi[2].sql()}")


def _show(v) -> str:
    return repr(v[1]) if v[0] == "s" else str(v[1])


class Equalities:
    """The equivalence classes that the ``=`` conjuncts of a member induce on its columns (and constants)."""

    def __init__(self, conds: list[Expr]):
        self.uf = UnionFind()
        self.const: dict[str, tuple] = {}
        pending = []
        for c in conds:
            s = split_cmp(c)
            if s is None or s[0] != "=":
                continue
            _, l, r = s
            vl, vr = constant_value(l), constant_value(r)
            if vl is None and vr is None:
                self.uf.union(l.sql(), r.sql())
            elif vl is None:
                pending.append((l.sql(), vr))
            elif vr is None:
                pending.append((r.sql(), vl))
        for col, v in pending:
            self.const[self.uf.find(col)] = v

    def same(self, a: str, b: str) -> bool:
        """Do the equalities force columns ``a`` and ``b`` (SQL text) to be equal?"""
        ra, rb = self.uf.find(a), self.uf.find(b)
        if ra == rb:
            return True
        return ra in self.const and rb in self.const and _holds("=", self.const[ra], self.const[rb]) is True


def rename_aliases(e: Expr, mapping: dict[str, str]) -> Expr:
    """``e`` with column qualifiers renamed."""
    return e.rename(mapping)


def eliminate_self_joins(entries: list[FromEntry], conds: list[Expr]) -> list[tuple[str, str]]:
    """Pairs (removed alias, kept alias) of FROM entries that must match the same row.

    Two entries qualify when they read the same base table, the table declares
    a key, and ``conds`` equate every key column of the two entries.  Only the
    merge plan is computed; the caller renames.  Merges are found greedily.
    """
    candidates = [e for e in entries if not e.derived and e.key]
    tables = [e.table.lower() for e in candidates]
    if len(set(tables)) == len(tables):
        return []  # no table is used twice
    merges: list[tuple[str, str]] = []
    removed: set[str] = set()
    eq = Equalities(conds)
    for i, e1 in enumerate(entries):
        if e1.derived or not e1.key or e1.alias in removed:
            continue
        for e2 in entries[i + 1:]:
            if e2.derived or e2.alias in removed or e2.table.lower() != e1.table.lower():
                continue
            if all(eq.same(Col(e1.alias, k).sql(), Col(e2.alias, k).sql()) for k in e1.key):
                merges.append((e2.alias, e1.alias))
                removed.add(e2.alias)
    return merges


def _norm_template(c: Expr):
    """What :func:`canonical_key` renders of a condition: (op, left, right) templates, or (None, template)."""
    s = split_cmp(c)
    if s is None:
        return (None, c.template, None)
    op, l, r = s
    if op in (">", ">="):
        op, l, r = _FLIP[op], r, l
    return (op, l.template, r.template)


def _norm(pre, mapping: dict[str, str]) -> str:
    op, lt, rt = pre
    if op is None:
        return render(lt, mapping)
    ls, rs = render(lt, mapping), render(rt, mapping)
    if op in ("=", "!=") and rs < ls:
        ls, rs = rs, ls
    return f"{ls} {op} {rs}"


_MAX_PERMUTATIONS = 5040


def canonical_key(entries: list[FromEntry], conds: list[Expr], items: list[Expr]) -> str:
    """Equal for members equal up to alias renaming and order of FROM entries / conditions.

    Entries are grouped by their source; aliases are assigned by trying every
    order within groups of equal sources (bounded by ``_MAX_PERMUTATIONS``; beyond
    it, the given order is used) and taking the least serialisation.
    """
    groups: dict[str, list[str]] = defaultdict(list)
    for e in entries:
        groups[e.sql_source()].append(e.alias)
    ordered = sorted(groups.items())
    perms_per_group = [list(itertools.permutations(aliases)) for _, aliases in ordered]
    total = 1
    for p in perms_per_group:
        total *= len(p)
    if total > _MAX_PERMUTATIONS:
        perms_per_group = [[tuple(aliases)] for _, aliases in ordered]
    from_part = "|".join(src for src, aliases in ordered for _ in aliases)
    cond_pre = [_norm_template(c) for c in conds]
    item_tpls = [i.template for i in items]
    best = None
    for choice in itertools.product(*perms_per_group):
        mapping: dict[str, str] = {}
        n = 0
        for perm in choice:
            for a in perm:
                n += 1
                mapping[a] = f"__c{n}"
        item_part = "|".join(render(t, mapping) for t in item_tpls)
        cond_part = "|".join(sorted(_norm(p, mapping) for p in cond_pre))
        key = f"{from_part}#{item_part}#{cond_part}"
        if best is None or key < best:
            best = key
    return best or ""

