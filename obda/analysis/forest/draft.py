"""The state a member's forest is built in: each rule takes a :class:`Draft` and returns a new one."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from obda.analysis.forest.members import is_stream_ts
from obda.analysis.forest.model import Attr, CrossPred, Member, Node, Pipeline


@dataclass(frozen=True)
class Draft:
    """A member's forest under construction (immutable: rules return modified copies)."""

    member: Member
    distinct: bool
    first_pipeline_id: int = 0
    ts_preds: tuple[CrossPred, ...] = ()  # comparisons between two stream timestamps
    value_preds: tuple[CrossPred, ...] = ()  # every other cross comparison (and timestamps the forest does not order)
    nodes: tuple[Node, ...] = ()
    unit_of: dict[str, int] = field(default_factory=dict)  # stream alias -> node id
    unsatisfiable: bool = False
    roots: tuple[int, ...] = ()
    absorbed: tuple[CrossPred, ...] = ()  # timestamp comparisons guaranteed by the evaluation order
    site: dict[str, int] = field(default_factory=dict)  # alias -> node id where it is joined (FOREST: above all)
    forest_statics: tuple[str, ...] = ()
    pred_site: tuple[tuple[CrossPred, int], ...] = ()
    forest_preds: tuple[CrossPred, ...] = ()
    out_attrs: tuple[Attr, ...] = ()
    pipelines: dict[str, Pipeline] = field(default_factory=dict)
    kept: tuple[Attr, ...] = ()  # attributes a pipeline keeps for a key only (a timestamp that expires entries)
    constraints: tuple = ()  # the declared k-constraints (obda.model.constraints.Constraint)
    constraints_used: tuple[str, ...] = ()  # those the synopses drop state by (rule interval_expiry)

    def ancestors(self, i: int) -> list[int]:
        out = []
        while self.nodes[i].parent is not None:
            i = self.nodes[i].parent  # type: ignore[assignment]
            out.append(i)
        return out

    def subtree(self, i: int) -> set[int]:
        out = {i}
        for c in self.nodes[i].children:
            out |= self.subtree(c)
        return out

    def awaited(self, i: int) -> list[Node]:
        """The units whose later rows read an entry of node ``i`` again: its parent, or every other root."""
        n = self.nodes[i]
        if n.parent is not None:
            return [self.nodes[n.parent]]
        return [self.nodes[r] for r in self.roots if r != i]

    def is_stream_ts(self, attr: Attr) -> bool:
        return is_stream_ts(self.member, attr)


def start(member: Member, distinct: bool, first_pipeline_id: int = 0, constraints: tuple = ()) -> Draft:
    """The empty forest of ``member``: its cross comparisons split into timestamp and value ones."""
    d = Draft(member, distinct, first_pipeline_id, unsatisfiable=member.unsatisfiable, constraints=constraints)
    ts = tuple(p for p in member.cross if not p.offset and d.is_stream_ts(p.left) and d.is_stream_ts(p.right))
    return replace(d, ts_preds=ts, value_preds=tuple(p for p in member.cross if p not in ts))
