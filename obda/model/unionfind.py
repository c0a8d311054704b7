"""Disjoint sets of names (union-find), shared by the stages that group names by equalities.

The mapping stage groups columns that conditions make equal (:mod:`obda.mapping._unfold_optimize`);
the analysis groups the aliases a query joins on equal timestamps or keys
(:mod:`obda.analysis.forest`).  The representative of a set is its smallest name, so the
result does not depend on the order of the unions.
"""

from __future__ import annotations

from typing import Iterable


class UnionFind:
    """Sets of names; a name not seen before is a set of its own."""

    def __init__(self, items: Iterable[str] = ()) -> None:
        self.parent: dict[str, str] = {i: i for i in items}

    def __contains__(self, x: str) -> bool:
        return x in self.parent

    def find(self, x: str) -> str:
        """The representative (smallest name) of ``x``'s set."""
        self.parent.setdefault(x, x)
        while self.parent[x] != x:
            self.parent[x] = self.parent[self.parent[x]]
            x = self.parent[x]
        return x

    def union(self, a: str, b: str) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[max(ra, rb)] = min(ra, rb)
