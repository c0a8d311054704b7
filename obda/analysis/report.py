"""Typed analysis report with ``to_dict`` (JSON) and ``to_text`` (terminal).

Overall verdict: ``bounded`` iff every member is bounded; ``unbounded`` if some
member is proven unbounded; ``not_shown`` otherwise (Theorem 2 is only
sufficient).  A member's verdict aggregates its preprocessed parts the same
way.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from obda.analysis.plan import SynopsisPlan

BOUNDED, UNBOUNDED, NOT_SHOWN = "bounded", "unbounded", "not_shown"


def combine(verdicts) -> str:
    vs = list(verdicts)
    if all(v == BOUNDED for v in vs):
        return BOUNDED
    if any(v == UNBOUNDED for v in vs):
        return UNBOUNDED
    return NOT_SHOWN


@dataclass(frozen=True)
class ViolationReport:
    condition: str
    kind: str
    streams: tuple[str, ...]
    attributes: tuple[str, ...]
    message: str
    explanation: str
    witness: str
    hint: str
    provenance: tuple[dict, ...] = ()
    part: int | None = None

    def to_dict(self) -> dict:
        d = {"condition": self.condition, "kind": self.kind, "streams": list(self.streams),
             "attributes": list(self.attributes), "message": self.message, "explanation": self.explanation,
             "witness": self.witness, "hint": self.hint, "provenance": list(self.provenance)}
        if self.part is not None:
            d["part"] = self.part
        return d


@dataclass(frozen=True)
class PartReport:
    """One preprocessed part (step-1 choice combination) of a member."""

    index: int
    choices: tuple[str, ...]
    verdict: str
    criterion: str
    violations: tuple[ViolationReport, ...]
    streams: dict
    plan: SynopsisPlan | None
    removed: tuple[tuple[str, str], ...] = ()
    graph: dict = field(default_factory=dict)
    reason: str | None = None

    def to_dict(self) -> dict:
        return {
            "index": self.index, "choices": list(self.choices), "verdict": self.verdict, "criterion": self.criterion,
            "violations": [v.to_dict() for v in self.violations], "streams": self.streams,
            "plan": self.plan.to_dict() if self.plan else None,
            "plan_summary": self.plan.summary() if self.plan else None,
            "removed_self_joins": [{"removed": a, "covered_by": b} for a, b in self.removed],
            "graph": self.graph, **({"reason": self.reason} if self.reason else {}),
        }


@dataclass(frozen=True)
class MemberReport:
    index: int
    disjunct: tuple[int, int]
    sql: str
    condition: str
    projection: str  # bag | set
    verdict: str
    criterion: str
    violations: tuple[ViolationReport, ...]
    streams: dict
    plan: dict
    origin: dict
    parts: tuple[PartReport, ...]
    witness: str = ""
    hints: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    checker: str = "polynomial"
    memory: str = ""  # what a bounded member's state is proportional to, when it is not a constant (a window)
    constrained: object = None  # obda.analysis.constraints.ConstrainedVerdict: the verdict under declared k-constraints

    @property
    def constrained_verdict(self) -> str:
        """The verdict under the declared k-constraints (the plain one when none applies)."""
        return self.constrained.verdict if self.constrained is not None else self.verdict

    def to_dict(self) -> dict:
        return {
            **({"memory": self.memory} if self.memory else {}),
            **({"constrained": self.constrained.to_dict()} if self.constrained is not None else {}),
            "index": self.index, "disjunct": {"index": self.disjunct[0], "of": self.disjunct[1]},
            "sql": self.sql, "condition": self.condition, "projection": self.projection, "verdict": self.verdict,
            "criterion": self.criterion, "violations": [v.to_dict() for v in self.violations],
            "streams": self.streams, "plan": self.plan, "origin": self.origin,
            "witness": self.witness, "hints": list(self.hints), "notes": list(self.notes),
            "parts": [p.to_dict() for p in self.parts], "checker": self.checker,
        }


@dataclass(frozen=True)
class AnalysisReport:
    verdict: str
    members: tuple[MemberReport, ...]
    notes: tuple[str, ...] = ()
    forest: object = None  # obda.analysis.forest.Forest: what the executor runs (None: not executable)
    forest_error: object = None  # the ExecutionError that made the query not executable

    @property
    def constrained_verdict(self) -> str:
        """The verdict under the declared k-constraints: what the executor admits while the data keeps them."""
        return combine(m.constrained_verdict for m in self.members) if self.members else self.verdict

    @property
    def constraints_used(self) -> tuple[str, ...]:
        """The constraints a member needs to be bounded (its synopses drop state by them)."""
        return tuple(dict.fromkeys(n for m in self.members if m.verdict != BOUNDED and m.constrained is not None
                                   and m.constrained.verdict == BOUNDED for n in m.constrained.constraints))

    def select_verdicts(self, n: int, constrained: bool = False) -> list[str]:
        """The verdict of each of the query's ``n`` SELECTs: the worst of its member reports (disjuncts);
        with ``constrained``, their verdicts under the declared k-constraints."""
        out = [BOUNDED] * n
        covered = set()
        for m in self.members:
            if 0 <= m.index < n:
                covered.add(m.index)
                out[m.index] = combine((out[m.index], m.constrained_verdict if constrained else m.verdict))
        return [v if i in covered else self.verdict for i, v in enumerate(out)]

    def to_dict(self) -> dict:
        d = {"verdict": self.verdict, "members": [m.to_dict() for m in self.members], "notes": list(self.notes)}
        if any(m.constrained is not None for m in self.members):
            d["constrained_verdict"] = self.constrained_verdict
            d["constraints_used"] = list(self.constraints_used)
        if self.forest is not None:  # what the executor runs: per member, its units, keys, cut-offs, pipelines
            d["forest"] = self.forest.describe()
        elif self.forest_error is not None:
            d["not_executable"] = str(self.forest_error)
        return d

    def to_text(self) -> str:
        lines = [f"verdict: {self.verdict.upper()} ({_meaning(self.verdict)})"]
        if any(m.constrained is not None for m in self.members):
            used = ", ".join(self.constraints_used) or "none suffices"
            lines.append(f"under the declared k-constraints: {self.constrained_verdict.upper()} (using: {used}; "
                         "while the data keeps them, which the executor monitors)")
        if self.forest is None and self.forest_error is not None:  # the theory's verdict, but `obda run` refuses it
            lines.append(f"not executable: {self.forest_error}")
        for n in self.notes:
            lines.append(f"note: {n}")
        for m in self.members:
            tag = f"member {m.index + 1}" + (f" (disjunct {m.disjunct[0] + 1}/{m.disjunct[1]})" if m.disjunct[1] > 1 else "")
            lines.append("")
            lines.append(f"{tag}: {m.verdict} [{m.criterion}, {m.projection} projection]")
            lines.append(f"  sql: {m.sql}")
            if m.disjunct[1] > 1:
                lines.append(f"  condition: {m.condition}")
            if m.origin:
                atoms = m.origin.get("cq") or ""
                if atoms:
                    lines.append(f"  from: {atoms}")
            for name, s in m.streams.items():
                extra = f", parent {s['parent']}, depth {s['depth']}" if s.get("kind") == "infinite" else ""
                lines.append(f"  stream {name}: {s['kind']}{extra}" + (f" — {s['reason']}" if s.get("reason") else ""))
            for v in m.violations:
                lines.append(f"  ✗ {v.condition}: {v.explanation}")
                if v.provenance:
                    from obda.analysis.explain import provenance_text

                    lines.append(f"      from: {provenance_text(list(v.provenance))}")
                if v.witness:
                    lines.append(f"      witness: {v.witness}")
                if v.hint:
                    lines.append(f"      hint: {v.hint}")
            if m.memory:
                lines.append(f"  memory: {m.memory}")
            cv = m.constrained
            if cv is not None:
                lines.append(f"  under k-constraints {', '.join(cv.constraints)}: {cv.verdict}"
                             + (f" — {cv.note}" if cv.note else ""))
                if cv.memory:
                    lines.append(f"    memory: {cv.memory}")
                for a, keep in cv.lags:
                    lines.append(f"    {a}: keeps {keep}")
            if m.verdict == BOUNDED and m.plan:
                lines.append("  synopsis plan:")
                for name, p in m.plan.items():
                    lines.append(f"    {name}: {p['strategy']}; keeps {', '.join(p['keeps']) or 'nothing'}; {p['bound']}")
            for h in m.hints:
                if not any(h == v.hint for v in m.violations):
                    lines.append(f"  hint: {h}")
            for n in m.notes:
                lines.append(f"  note: {n}")
        return "\n".join(lines)


def _meaning(v: str) -> str:
    return {
        BOUNDED: "every member runs in memory independent of stream length",
        UNBOUNDED: "some member needs memory that grows with the streams",
        NOT_SHOWN: "bounded memory not shown: Theorem 2 is only a sufficient condition",
    }[v]
