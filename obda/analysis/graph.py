"""The dependency graph of a modified LTO query and its trees (spec §4).

Vertices are the infinite streams (after merging synchronous streams); an
edge ``S_i → S_j`` (parent → child) for every non-redundant ``τ_j < τ_i``:
a tuple of the parent can only join child tuples that arrived before it.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property


@dataclass(frozen=True)
class DependencyGraph:
    nodes: tuple[str, ...]
    edges: tuple[tuple[str, str], ...]  # (parent, child)

    @cached_property
    def _parents(self) -> dict[str, tuple[str, ...]]:
        out: dict[str, list[str]] = {n: [] for n in self.nodes}
        for p, c in self.edges:
            out[c].append(p)
        return {k: tuple(v) for k, v in out.items()}

    @cached_property
    def _children(self) -> dict[str, tuple[str, ...]]:
        out: dict[str, list[str]] = {n: [] for n in self.nodes}
        for p, c in self.edges:
            out[p].append(c)
        return {k: tuple(v) for k, v in out.items()}

    def parents(self, n: str) -> tuple[str, ...]:
        return self._parents[n]

    def children(self, n: str) -> tuple[str, ...]:
        return self._children[n]

    @property
    def has_edges(self) -> bool:
        return bool(self.edges)

    @cached_property
    def components(self) -> tuple[tuple[str, ...], ...]:
        """Connected components ignoring direction (``G_S``), in node order."""
        seen: set[str] = set()
        comps = []
        for n in self.nodes:
            if n in seen:
                continue
            stack, comp = [n], []
            seen.add(n)
            while stack:
                x = stack.pop()
                comp.append(x)
                for y in self._parents[x] + self._children[x]:
                    if y not in seen:
                        seen.add(y)
                        stack.append(y)
            comps.append(tuple(sorted(comp, key=self.nodes.index)))
        return tuple(comps)

    def component(self, n: str) -> tuple[str, ...]:
        return next(c for c in self.components if n in c)

    def forms_tree(self, comp: tuple[str, ...]) -> bool:
        """A rooted tree: one stream without parent, every other with exactly one."""
        roots = [n for n in comp if not self._parents[n]]
        return len(roots) == 1 and all(len(self._parents[n]) <= 1 for n in comp)

    def root(self, comp: tuple[str, ...]) -> str | None:
        if not self.forms_tree(comp):
            return None
        return next(n for n in comp if not self._parents[n])

    @cached_property
    def depths(self) -> dict[str, int | None]:
        """``d(S)``: distance from the root of its tree; None when ``G_S`` is not a tree."""
        out: dict[str, int | None] = {}
        for comp in self.components:
            r = self.root(comp)
            if r is None:
                out.update({n: None for n in comp})
                continue
            frontier, d = [r], 0
            while frontier:
                nxt = []
                for x in frontier:
                    out[x] = d
                    nxt.extend(self._children[x])
                frontier, d = nxt, d + 1
        return out

    def depth(self, n: str) -> int | None:
        return self.depths[n]

    def parent(self, n: str) -> str | None:
        ps = self._parents[n]
        return ps[0] if len(ps) == 1 else None

    @property
    def single_tree(self) -> bool:
        """G connected and a tree: one root later than every other stream."""
        return len(self.components) == 1 and self.forms_tree(self.components[0])

    @property
    def single_root(self) -> str | None:
        return self.root(self.components[0]) if self.single_tree else None

    def to_dict(self) -> dict:
        return {"nodes": list(self.nodes), "edges": [{"parent": p, "child": c} for p, c in self.edges]}
