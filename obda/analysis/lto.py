"""Derived LTO queries (Arasu Def. 5.1/5.2, spec §3 step 4), enumerated.

An LTO query adds filter predicates until, for every infinite stream ``S``,
``A(S) ∪ K`` is totally ordered, where ``K`` holds the constants and — our
reading of spec §2, where they bound attributes exactly like constants —
the attributes of static relations and finite streams.  Different choices
give a finite set of LTO queries whose union is the query (Arasu Thm 5.3).

Enumeration is exponential; it serves the naive checker (test oracle) and
the constant-size witness queries of Fig. 2 step (4).  Only attributes that
occur in the selection or the projection are ordered: an attribute in
neither influences no condition, and ordering it changes no other relation
between ordered elements except through filters of its own stream, which the
enumeration produces directly.
"""

from __future__ import annotations

import itertools
from typing import Callable, Iterator, Mapping, Sequence

from obda.analysis.closure import Closure
from obda.analysis.elements import Attr, Const, Element
from obda.model.sources import ColumnType


def domain_group(e: Element, types: Mapping[Attr, ColumnType]) -> str:
    if isinstance(e, Const):
        return e.domain
    t = types[e]
    if t.is_numeric:
        return "numeric"
    return "boolean" if t is ColumnType.BOOLEAN else "string"


def _compat(cl: Closure) -> Callable[[Element, Element, str], bool]:
    """Is placing ``x`` ``pos`` (``<``, ``=``, ``>``) relative to ``y`` allowed by ``P⁺``?"""

    def ok(x: Element, y: Element, pos: str) -> bool:
        r = cl.rel(x, y)
        if r == "<" and pos != "<":
            return False
        if r == "<=" and pos == ">":
            return False
        if r == "=" and pos != "=":
            return False
        rr = cl.rel(y, x)
        if rr == "<" and pos != ">":
            return False
        if rr == "<=" and pos == "<":
            return False
        return True

    return ok


def arrangements(items: Sequence[Element], blocks: list[list[Element]], ok) -> Iterator[list[list[Element]]]:
    """Every total preorder of ``items`` merged into the ordered ``blocks`` (each exactly once)."""
    if not items:
        yield blocks
        return
    x, rest = items[0], items[1:]
    n = len(blocks)
    below = [all(ok(x, y, ">") for y in b) for b in blocks]
    above = [all(ok(x, y, "<") for y in b) for b in blocks]
    # prefix/suffix feasibility
    pre = [True] * (n + 1)
    for i in range(n):
        pre[i + 1] = pre[i] and below[i]
    suf = [True] * (n + 1)
    for i in range(n - 1, -1, -1):
        suf[i] = suf[i + 1] and above[i]
    for pos in range(n):
        if pre[pos] and suf[pos + 1] and all(ok(x, y, "=") for y in blocks[pos]):
            yield from arrangements(rest, blocks[:pos] + [blocks[pos] + [x]] + blocks[pos + 1:], ok)
    for gap in range(n + 1):
        if pre[gap] and suf[gap]:
            yield from arrangements(rest, blocks[:gap] + [[x]] + blocks[gap:], ok)


def filters(blocks: list[list[Element]]) -> list[tuple[Element, str, Element]]:
    """The filter atoms stating a total preorder."""
    out = []
    for b in blocks:
        out.extend((b[0], "=", y) for y in b[1:])
    out.extend((b1[0], "<", b2[0]) for b1, b2 in zip(blocks, blocks[1:]))
    return out


def enumerate_ltos(
    base_atoms: Sequence[tuple[Element, str, Element]],
    attrs_by_stream: Mapping[str, Sequence[Attr]],
    bounding: Sequence[Element],
    types: Mapping[Attr, ColumnType],
    roles: dict,
) -> Iterator[Closure]:
    """``(P ∪ F)⁺`` for every derived LTO query (up to equal closures of the ordered elements)."""
    base_atoms = list(base_atoms)
    roles = dict(roles)

    def close(extra) -> Closure:
        return Closure(base_atoms + list(extra), **roles)

    c0 = close([])
    if not c0.satisfiable:
        return
    groups: dict[str, tuple[list[Const], list[Element]]] = {}
    for k in dict.fromkeys(bounding):
        g = domain_group(k, types)
        consts, others = groups.setdefault(g, ([], []))
        (consts if isinstance(k, Const) else others).append(k)
    # step A: a total preorder of K per domain
    k_options = []
    names = sorted(groups)
    for g in names:
        consts, others = groups[g]
        consts = sorted(set(consts), key=lambda c: c.value)
        k_options.append(list(arrangements(others, [[c] for c in consts], _compat(c0))))
    stream_items = []
    for s, attrs in attrs_by_stream.items():
        for g in sorted({domain_group(a, types) for a in attrs}):
            stream_items.append((g, [a for a in attrs if domain_group(a, types) == g]))

    for combo in itertools.product(*k_options) if k_options else [()]:
        k_blocks = dict(zip(names, combo))
        fk = [f for blocks in combo for f in filters(blocks)]
        ck = close(fk)
        if not ck.satisfiable:
            continue
        yield from _streams(stream_items, 0, k_blocks, fk, ck, close)


def _streams(items, i, k_blocks, acc, cl: Closure, close) -> Iterator[Closure]:
    if i == len(items):
        yield cl
        return
    g, attrs = items[i]
    base = [list(b) for b in k_blocks.get(g, [])]
    for blocks in arrangements(attrs, base, _compat(cl)):
        f = acc + filters(blocks)
        c = close(f)
        if c.satisfiable:
            yield from _streams(items, i + 1, k_blocks, f, c, close)
