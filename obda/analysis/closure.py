"""The transitive closure ``P⁺`` and the notions defined over it (Arasu §4, spec §2).

:class:`Closure` closes a conjunction of ``<``, ``<=``, ``=`` atoms over a
dense linear order (Arasu's ``P⁺`` only relates elements that occur in ``P``)
with bitsets, so closing a 60-element predicate takes well under a
millisecond.  On top of it: equivalence classes (Def. 4.4), redundancy
(Def. 4.1), lower/upper-boundedness and boundedness (Schiff–Özçep Def. 5 with
the domain rules of spec §1).

*Bounding elements* are the constants and the attributes of static relations
and finite streams: a finite set of values.  Our reading of spec §2 treats
them alike everywhere: an attribute equal to one is bounded, an attribute
between two of them is bounded when its domain is discrete, and an
inequality with a side equal to one is redundant (the analogue of Def. 4.1
(2)/(3)): it is a filter or a join with a finite relation, not a join between
two unbounded streams.

:func:`integer_satisfiable` decides satisfiability exactly for discrete
domains (``3 < A < 4`` has no integer solution) with Bellman–Ford over
difference constraints; the LTO machinery reasons densely like the paper.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Iterable, Sequence

from obda.analysis.elements import BOOLEAN, NUMERIC, STRING, TIMESTAMP, Attr, Const, Element

NONE, LE, LT, EQ = None, "<=", "<", "="


def constant_chain(constants: Iterable[Const]) -> list[tuple[Const, str, Const]]:
    """``k1 < k2 < …`` for the constants of each comparable domain."""
    by_domain: dict[str, list[Const]] = {}
    for c in set(constants):
        by_domain.setdefault(c.domain, []).append(c)
    out = []
    for cs in by_domain.values():
        cs.sort(key=lambda c: c.value)
        out.extend((a, "<", b) for a, b in zip(cs, cs[1:]))
    return out


class Closure:
    """``P⁺`` of a set of atoms over a dense order, with bounded-ness bookkeeping.

    ``bounding``: elements with finitely many values (constants, attributes of
    static relations and finite streams). ``discrete``: attributes of an
    integer-like domain. ``finite``: attributes bounded by their type alone
    (booleans) or by their relation (static / finite stream).
    """

    __slots__ = ("elements", "index", "n", "le", "lt", "ge", "satisfiable", "_cls", "bmask", "dmask", "fmask",
                 "derived")

    def __init__(
        self,
        atoms: Iterable[tuple[Element, str, Element]],
        elements: Sequence[Element] = (),
        bounding: Iterable[Element] = (),
        discrete: Iterable[Element] = (),
        finite: Iterable[Element] = (),
        derived: Iterable[tuple[Element, tuple[Element, ...]]] = (),
    ):
        atoms = list(atoms)
        derived = tuple(derived)
        elems: list[Element] = list(dict.fromkeys(list(elements) + [x for _, xs in derived for x in xs]))
        seen = set(elems)
        for a, _, b in atoms:
            for e in (a, b):
                if e not in seen:
                    seen.add(e)
                    elems.append(e)
        consts = [e for e in elems if isinstance(e, Const)]
        atoms.extend(constant_chain(consts))
        self.elements = tuple(elems)
        self.index = {e: i for i, e in enumerate(elems)}
        n = self.n = len(elems)
        le = [1 << i for i in range(n)]
        lt = [0] * n
        ix = self.index
        for a, op, b in atoms:
            i, j = ix[a], ix[b]
            if op == "<":
                lt[i] |= 1 << j
                le[i] |= 1 << j
            elif op == "<=":
                le[i] |= 1 << j
            elif op == "=":
                le[i] |= 1 << j
                le[j] |= 1 << i
            else:
                raise ValueError(f"closure cannot take {op!r}; split disequalities first")
        for k in range(n):
            bk = 1 << k
            lek, ltk = le[k], lt[k]
            for i in range(n):
                li = le[i]
                if li & bk:
                    t = lt[i] | ltk
                    if t & bk:
                        t |= lek
                    lt[i] = t
                    le[i] = li | lek
        self.le, self.lt = le, lt
        ge = [0] * n
        for i in range(n):
            m = le[i]
            while m:
                low = m & -m
                j = low.bit_length() - 1
                ge[j] |= 1 << i
                m ^= low
        self.ge = ge
        self.satisfiable = not any(lt[i] >> i & 1 for i in range(n))
        self._cls = [le[i] & ge[i] for i in range(n)]
        self.bmask = self._mask(bounding) | self._mask(consts)
        self.dmask = self._mask(discrete)
        self.fmask = self._mask(finite)
        # Rule 7 (docs/analysis.md): a derived attribute (a function of columns) -> the columns it reads
        self.derived = tuple((self.index[d], tuple(self.index[x] for x in xs)) for d, xs in derived if d in self.index)

    def _mask(self, els: Iterable[Element]) -> int:
        m = 0
        for e in els:
            i = self.index.get(e)
            if i is not None:
                m |= 1 << i
        return m

    def _bits(self, m: int) -> list[Element]:
        out = []
        while m:
            low = m & -m
            out.append(self.elements[low.bit_length() - 1])
            m ^= low
        return out

    # ---- relations -------------------------------------------------------
    def rel(self, a: Element, b: Element) -> str | None:
        """The strongest relation of ``a`` to ``b`` in ``P⁺``: ``<``, ``<=``, ``=`` or None."""
        i, j = self.index.get(a), self.index.get(b)
        if i is None or j is None:
            return None if a != b else EQ
        if self.lt[i] >> j & 1:
            return LT
        if self.le[i] >> j & 1:
            return EQ if self.le[j] >> i & 1 else LE
        return None

    def eq(self, a: Element, b: Element) -> bool:
        return self.rel(a, b) == EQ

    def cls(self, a: Element) -> frozenset[Element]:
        """Equivalence class of ``a`` (Def. 4.4)."""
        i = self.index.get(a)
        return frozenset([a]) if i is None else frozenset(self._bits(self._cls[i]))

    def cls_mask(self, a: Element) -> int:
        i = self.index.get(a)
        return 0 if i is None else self._cls[i]

    def class_key(self, a: Element) -> int:
        """A hashable id of the class of ``a`` (its lowest member index)."""
        m = self.cls_mask(a)
        return (m & -m).bit_length() if m else -1 - hash(a) % 1000003

    # ---- bounds (Schiff–Özçep Def. 5, spec §1) ----------------------------
    def pinned(self, a: Element) -> bool:
        """``a`` equals a constant or an attribute of a static relation / finite stream."""
        return bool(self.cls_mask(a) & self.bmask)

    def lower_bounded(self, a: Element) -> bool:
        i = self.index.get(a)
        return i is not None and bool(self.ge[i] & self.bmask)

    def upper_bounded(self, a: Element) -> bool:
        i = self.index.get(a)
        return i is not None and bool(self.le[i] & self.bmask)

    def bounded(self, a: Element) -> bool:
        """Finitely many values: pinned, or discrete and between two bounding elements; or (Rule 7) equal to a
        derived attribute all of whose columns are bounded."""
        i = self.index.get(a)
        if i is None:
            return False
        if self._bounded(i):
            return True
        c = self._cls[i]
        return any(c >> d & 1 and all(self._bounded(x) for x in xs) for d, xs in self.derived)

    def _bounded(self, i: int) -> bool:
        if (self.fmask | self.bmask) >> i & 1:
            return True
        c = self._cls[i]
        if c & self.bmask or c & self.fmask:
            return True
        return bool(c & self.dmask) and bool(self.ge[i] & self.bmask) and bool(self.le[i] & self.bmask)

    def constant_range(self, a: Element) -> tuple[Const | None, bool, Const | None, bool]:
        """Tightest constant bounds of ``a``: (low, low_strict, high, high_strict)."""
        i = self.index[a]
        lo = hi = None
        lo_s = hi_s = False
        for e in self._bits(self.ge[i] & self.bmask):
            if isinstance(e, Const) and e.domain in (NUMERIC, TIMESTAMP, BOOLEAN):
                s = bool(self.lt[self.index[e]] >> i & 1)
                if lo is None or e.value > lo.value or (e.value == lo.value and s):
                    lo, lo_s = e, s
        for e in self._bits(self.le[i] & self.bmask):
            if isinstance(e, Const) and e.domain in (NUMERIC, TIMESTAMP, BOOLEAN):
                s = bool(self.lt[i] >> self.index[e] & 1)
                if hi is None or e.value < hi.value or (e.value == hi.value and s):
                    hi, hi_s = e, s
        return lo, lo_s, hi, hi_s

    def bounding_in_class(self, a: Element) -> list[Element]:
        return self._bits(self.cls_mask(a) & self.bmask)

    def bounds_of(self, a: Element) -> tuple[list[Element], list[Element]]:
        """Bounding elements below and above ``a`` (for explanations and plans)."""
        i = self.index.get(a)
        if i is None:
            return [], []
        return self._bits(self.ge[i] & self.bmask & ~self._cls[i]), self._bits(self.le[i] & self.bmask & ~self._cls[i])

    # ---- redundancy (Def. 4.1, extended to <=) ----------------------------
    def between(self, a: Element, b: Element) -> list[Element]:
        """Elements ``e`` outside the classes of ``a`` and ``b`` with ``a ⊴ e ⊴ b`` in ``P⁺``."""
        i, j = self.index[a], self.index[b]
        return self._bits(self.le[i] & self.ge[j] & ~(self._cls[i] | self._cls[j]))

    def redundant(self, a: Element, b: Element) -> bool:
        """Is the inequality ``a < b`` / ``a <= b`` redundant (Def. 4.1)?

        Redundant when an element lies between the two classes, or when a side
        equals a bounding element (conditions (2), (3) of Def. 4.1, extended
        from constants to static / finite-stream attributes).
        """
        i, j = self.index[a], self.index[b]
        ci, cj = self._cls[i], self._cls[j]
        if (ci | cj) & self.bmask:
            return True
        return bool(self.le[i] & self.ge[j] & ~(ci | cj))

    def relations(self, among: Iterable[Element]) -> list[tuple[Element, str, Element]]:
        """``IND(among, P)`` (Def. 4.2) as a list of atoms."""
        els = [e for e in dict.fromkeys(among) if e in self.index]
        out = []
        for x in range(len(els)):
            for y in range(len(els)):
                if x == y:
                    continue
                r = self.rel(els[x], els[y])
                if r == LT or r == LE or (r == EQ and x < y):
                    out.append((els[x], r, els[y]))
        return out


# ---- exact satisfiability for discrete domains ------------------------------------------


def _const_number(c: Const, rank: dict[str, int]) -> Fraction:
    if c.domain == STRING:
        return Fraction(rank[c.value])
    if c.domain == BOOLEAN:
        return Fraction(int(bool(c.value)))
    return Fraction(c.value)


def integer_satisfiable(atoms: Iterable[tuple[Element, str, Element]], discrete: Iterable[Element]) -> bool:
    """Satisfiability of ``<``, ``<=``, ``=`` atoms where discrete elements take integer values.

    Difference constraints ``x - y ≤ (w, s)``: a strict atom between two
    integer-valued elements is ``x - y ≤ -1``; otherwise strictness is kept
    as an infinitesimal ``s = -1`` (dense domains).  A negative cycle
    (lexicographically) means unsatisfiable.  Integer difference systems with
    integer bounds have integer solutions when they have real ones, so this
    is exact.
    """
    atoms = list(atoms)
    disc = set(discrete)
    nodes: dict[Element, int] = {"__zero__": 0}  # type: ignore[dict-item]
    strings = sorted({e.value for a, _, b in atoms for e in (a, b) if isinstance(e, Const) and e.domain == STRING})
    rank = {s: i for i, s in enumerate(strings)}
    edges: list[tuple[int, int, Fraction, int]] = []  # x - y <= (w, s): edge y -> x

    def node(e: Element) -> int:
        if e not in nodes:
            nodes[e] = len(nodes)
            if isinstance(e, Const):
                v = _const_number(e, rank)
                edges.append((nodes[e], 0, v, 0))
                edges.append((0, nodes[e], -v, 0))
        return nodes[e]

    def integral(e: Element) -> bool:
        return e.is_integral if isinstance(e, Const) else e in disc

    for a, op, b in atoms:
        i, j = node(a), node(b)
        if op == "=":
            edges.append((i, j, Fraction(0), 0))
            edges.append((j, i, Fraction(0), 0))
        elif op == "<=":
            edges.append((i, j, Fraction(0), 0))
        elif op == "<":
            if integral(a) and integral(b):
                edges.append((i, j, Fraction(-1), 0))
            else:
                edges.append((i, j, Fraction(0), -1))
        else:
            raise ValueError(op)
    n = len(nodes)
    dist = [(Fraction(0), 0)] * n
    for it in range(n + 1):
        changed = False
        for x, y, w, s in edges:  # x - y <= w  ⇒  d[x] <= d[y] + w
            cand = (dist[y][0] + w, dist[y][1] + s)
            if cand < dist[x]:
                dist[x] = cand
                changed = True
        if not changed:
            return True
    return False


__all__ = ["Closure", "integer_satisfiable", "constant_chain", "LT", "LE", "EQ", "Attr", "Const"]
