"""The typed results of the aggregate analysis (:mod:`obda.analysis.aggregates`): the functions as Arasu et al.
§8.2 classifies them, the report of a verdict and its conditions, and the plan the executors run."""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlglot import exp

from obda.model.query import ASK_COLUMN, Aggregate, ValueExpression, Var


DISTRIBUTIVE, ALGEBRAIC, HOLISTIC = "distributive", "algebraic", "holistic"


@dataclass(frozen=True)
class Function:
    """How an aggregate function is computed online (Gray et al.) and whether duplicates change it."""

    name: str
    kind: str
    duplicate_sensitive: bool


FUNCTIONS = {f.name: f for f in (
    Function("count", DISTRIBUTIVE, True),
    Function("sum", DISTRIBUTIVE, True),
    Function("min", DISTRIBUTIVE, False),
    Function("max", DISTRIBUTIVE, False),
    Function("sample", DISTRIBUTIVE, False),
    Function("avg", ALGEBRAIC, True),
    Function("count_distinct", HOLISTIC, False),
    Function("median", HOLISTIC, True),
    Function("group_concat", HOLISTIC, True),  # SPARQL only: the SQL front end refuses GROUP_CONCAT
    Function("group_concat_distinct", HOLISTIC, False),
    Function("sum_distinct", HOLISTIC, False),  # SUM / AVG of the distinct values: a count per value, as COUNT's
    Function("avg_distinct", HOLISTIC, False),
)}

@dataclass(frozen=True)
class AggregateCall:
    """One aggregate expression ``f(S_i.A)`` of the query; ``argument`` None for ``COUNT(*)``."""

    function: Function
    argument: exp.Expression | None
    text: str


@dataclass(frozen=True)
class Condition:
    """One condition of the theorem applied: what it asks, whether it holds, why."""

    name: str
    holds: bool
    detail: str


@dataclass(frozen=True)
class AggregateReport:
    """The verdict on an aggregate query and the conditions it rests on."""

    verdict: str
    theorem: str
    conditions: tuple[Condition, ...]
    characteristic_sql: str
    reduced_sql: str
    reduced_verdict: str
    notes: tuple[str, ...] = field(default=())
    memory: str = ""  # what the state holds when bounded: constant per group, or per window
    window: str | None = None  # the query's window (NOW()), if any
    time_keyed: bool = False  # Rule 9: every group is keyed by its timestamp; dropped when the timestamp closes
    # the normal-form members of the characteristic query Q' as read for this verdict (a SPARQL aggregate's), which
    # the plan's analysis of Q' reuses (obda.analysis.execution_plan): Q' is read once
    members: tuple = field(default=(), compare=False, repr=False)

    def to_dict(self) -> dict:
        return {
            "verdict": self.verdict,
            "memory": self.memory,
            "window": self.window,
            "time_keyed": self.time_keyed,
            "theorem": self.theorem,
            "conditions": [{"name": c.name, "holds": c.holds, "detail": c.detail} for c in self.conditions],
            "characteristic_query": self.characteristic_sql,
            "reduced_characteristic_query": self.reduced_sql,
            "reduced_verdict": self.reduced_verdict,
            "notes": list(self.notes),
        }

    def to_text(self) -> str:
        lines = [f"verdict: {self.verdict.upper()} ({self.theorem})"]
        if self.memory:
            lines.append(f"  memory: {self.memory}")
        for c in self.conditions:
            lines.append(f"  [{'ok' if c.holds else 'FAILS'}] {c.name}: {c.detail}")
        lines.append(f"  Q'  = {self.characteristic_sql}")
        lines.append(f"  Q'R = {self.reduced_sql} ({self.reduced_verdict})")
        lines += [f"  note: {n}" for n in self.notes]
        return "\n".join(lines)


@dataclass(frozen=True)
class OutputItem:
    """One column of the aggregate query's answer: ``expression`` over the group's grouping
    variables (:class:`~obda.model.query_terms.Var`) and aggregates (:class:`~obda.model.values.Aggregate`)."""

    name: str
    expression: ValueExpression


@dataclass(frozen=True)
class PlannedCall:
    """One aggregate computed per group: its function and where its argument is in an answer of
    ``Q'`` (None for ``COUNT(*)``)."""

    call: Aggregate
    function: Function
    position: int | None


@dataclass(frozen=True)
class AggregatePlan:
    """What the executor runs for an aggregate query (Theorem 8.4's strategy): the characteristic query
    ``Q'`` (its answers are the grouping variables, then the aggregated ones), aggregated per group.

    ``characteristic`` is SQL text (``characteristic_sql`` keeps duplicates even when every
    function ignores them: a running MAX needs no set of the values seen) or, for SPARQL, the
    :class:`~obda.model.compilation.Compilation` whose members are ``Q'``. ``having`` keeps a
    group in the answer; ``sparql`` selects SPARQL's values (AVG of integers an exact decimal,
    SUM / AVG of the empty global group 0) over SQL's.
    """

    items: tuple[OutputItem, ...]
    calls: tuple[PlannedCall, ...]
    group_by: tuple[Var, ...]  # the first ``len(group_by)`` values of a Q' answer
    characteristic: object
    report: AggregateReport
    having: object = None  # obda.model.query.Condition
    order_by: tuple[tuple[str, bool], ...] = ()
    sparql: bool = False
    window: object = None  # obda.model.query.Window: aggregate the solutions of the last ``width`` only
    order_items: tuple[OutputItem, ...] = ()  # ORDER BY expressions the SELECT does not name: ordering only
    limit: int | None = None  # LIMIT / OFFSET of a query over static data only (its answer table)
    offset: int = 0
    ask: bool = False  # an ASK of an aggregate subquery (static data only): one row, true when a group passes

    @property
    def groups(self) -> int:
        return len(self.group_by)

    @property
    def columns(self) -> tuple[str, ...]:
        return (ASK_COLUMN,) if self.ask else tuple(i.name for i in self.items)

    @property
    def characteristic_sql(self) -> str:
        c = self.characteristic
        return c if isinstance(c, str) else c.characteristic.sql()
