"""The query's engine: the union of its members' answers per closed timestamp, with the checks tested on them.

:class:`QueryEngine` steps every member's synopsis engine (:class:`obda.execution.engine.MemberEngine`) over the
rows of a closed timestamp and turns each member's output tuples into answers (:func:`_answer`): bound to the
query's variables, tested by the checks decided on the answer — against static answers (rule A1), those of the
timestamp being closed (A2), those kept for a window of time (A3, A5, :class:`~obda.execution.check_windows.
CheckWindows`) — or held until a later check decides them (A4, A6, :class:`~obda.execution.check_windows.Waiting`:
:meth:`QueryEngine.hold`, :meth:`QueryEngine.close_waiting`).  A DISTINCT query emits each answer once.  Both
backends run it: the local one steps it, Spark computes the members' answers in its job and the driver uses the
same checks and waiting answers (:mod:`obda.execution.microbatch`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from obda.analysis.forest import Forest, MemberForest
from obda.execution.check_windows import CheckWindows, Waiting
from obda.execution.engine import MemberEngine, binder
from obda.execution.relations import Counted
from obda.model.terms import as_text, encode


@dataclass
class Answer:
    """One answer tuple occurrence (bags stay bags: a count > 1 is emitted as several lines)."""

    emitted_at: int | None  # closed timestamp, µs since epoch
    values: tuple
    count: int = 1


def cut(answers: list[Answer], limit: int | None, offset: int) -> list[Answer]:
    """``answers`` (in order, each ``count`` times) without the first ``offset`` and at most ``limit`` after them:
    SPARQL's OFFSET and LIMIT over the answer table, duplicates included."""
    out: list[Answer] = []
    skip, left = offset, limit
    for a in answers:
        n = a.count
        dropped = min(skip, n)
        skip -= dropped
        n -= dropped
        if left is not None:
            n = min(n, left)
            left -= n
        if n:
            out.append(Answer(a.emitted_at, a.values, n))
        if left == 0:
            break
    return out


def _answer(mp: MemberForest, text_columns: frozenset[int], classes: dict[int, str | None], timed: dict[str, set],
            windows: "CheckWindows") -> Callable[[tuple], tuple | None]:
    """A member's output tuple → its answer tuple; None where a check tested on the answer (its terms hidden items
    after the answer's columns), or a condition computed on the joined row (Rule 8, a hidden item after those),
    does not keep it.  ``classes``: the class of the member's term in each answer
    column of several kinds (:attr:`ExecutionPlan.typed <obda.analysis.execution_plan.ExecutionPlan.typed>`), whose
    values it holds encoded (:func:`obda.model.terms.encode`).  ``timed``: the answers of the checks decided per
    timestamp, at the timestamp being closed; ``windows``: those of the checks in a window of time
    (:meth:`QueryEngine.step`).  A member with a check decided later (rule A4, :class:`Waiting`) keeps the hidden
    items, for that check."""
    bind = _typed(_texts(binder(mp.member.items, mp.out_attrs), text_columns), classes, mp.member.visible)
    checks, visible = [c for c in mp.member.checks if not c.waits], mp.member.visible
    filters = mp.member.filters  # Rule 8: conditions computed on the joined row, hidden items after the checks'
    if len(checks) < len(mp.member.checks):
        visible = len(mp.member.items) - len(filters)
    if not checks and not filters:  # none, or only waiting ones: the whole tuple
        return bind

    indexes: dict[int, tuple[object, object]] = {}  # check -> (the set of its query's answers, their index)

    def keeps(i: int, c, full: tuple) -> bool:
        if c.window is not None:  # rule A3: its query's answers kept for the window
            keys, compared = c.split(full)
            return None not in keys and windows.found(c, keys, compared, windows.now) != c.negated
        values = timed[c.query] if c.timed else c.values  # a timed check's: those of the timestamp being closed
        got = indexes.get(i)
        if got is None or got[0] is not values:
            got = indexes[i] = (values, c.index(values))
        return c.keeps(full, got[1])

    def checked(values: tuple) -> tuple | None:
        full = bind(values)
        if any(full[p] is not True for p in filters) or not all(keeps(i, c, full) for i, c in enumerate(checks)):
            return None
        return full[:visible]
    return checked


def _texts(bind: Callable[[tuple], tuple], columns: frozenset[int]) -> Callable[[tuple], tuple]:
    """``bind`` with the values of ``columns`` (a query's text columns) as their text."""
    if not columns:
        return bind
    return lambda values: tuple(as_text(v) if k in columns else v for k, v in enumerate(bind(values)))


def _typed(bind: Callable[[tuple], tuple], classes: dict[int, str | None], visible: int) -> Callable[[tuple], tuple]:
    """``bind`` with the answer's values in columns of several kinds of term encoded with the class of the
    member's term there (the checks' hidden items, after ``visible``, are compared as they are)."""
    classes = {k: c for k, c in classes.items() if c is not None and k < visible}
    if not classes:
        return bind
    return lambda values: tuple(encode(classes[k], v) if k in classes else v for k, v in enumerate(bind(values)))


def _ordered(tuples) -> list[tuple]:
    """Output tuples in a deterministic order: their natural order, by ``repr`` where values do not compare."""
    try:
        return sorted(tuples)
    except TypeError:  # NULLs or mixed types in one position
        return sorted(tuples, key=repr)


class QueryEngine:
    """All members of a query; union of their answers (DISTINCT: duplicates suppressed)."""

    def __init__(self, plan: Forest, statics: dict[int, Counted], typed: dict[int, tuple] | None = None):
        """``statics``: pipeline id -> counted rows of the static table alias; ``typed``: the answer's columns of
        several kinds of term, with each member's class (:attr:`ExecutionPlan.typed
        <obda.analysis.execution_plan.ExecutionPlan.typed>`; a check's engine has none)."""
        self.check_entries = 0  # the checks' answers held for the run (set when the query opens)
        self.plan = plan
        self.typed = dict(typed or {})
        self.members = [MemberEngine(mp, {}) for mp in plan.members]
        # the checks decided in the answer's own timestamp (rule A2): their queries' engines, stepped with the
        # same rows, and their answers at the timestamp being closed
        self.timed = {text: QueryEngine(f, statics) for text, f in plan.timed_checks}
        self._timed_answers: dict[str, set] = {text: set() for text in self.timed}
        self.windows = CheckWindows(plan)
        self.waiting = Waiting(plan)
        self._index = {id(mf): mi for mi, mf in enumerate(plan.members)}
        self.set_statics(statics)
        self._binders = {id(m.plan): _answer(m.plan, plan.text_columns, self._classes(i), self._timed_answers,
                                             self.windows)
                         for i, m in enumerate(self.members)}
        self.emitted: set[tuple] = set()
        self.static_done = False
        if plan.keyed_by_time:  # answers keyed by their own timestamp: none repeats an earlier closed one
            for m in self.members:
                m.after_absorb = self.emitted.clear

    def bind_checks(self, plan: Forest) -> None:
        """``plan``: this engine's plan with its checks' answers (:meth:`Forest.bind_checks`), tested on answers."""
        for i, (m, mf) in enumerate(zip(self.members, plan.members)):
            self._binders[id(m.plan)] = _answer(mf, plan.text_columns, self._classes(i), self._timed_answers,
                                                self.windows)

    def _classes(self, i: int) -> dict[int, str | None]:
        """The class of member ``i``'s term in each answer column of several kinds."""
        return {k: classes[i] for k, classes in self.typed.items()}

    def set_statics(self, statics: dict[int, Counted], joined: dict[int, Counted] | None = None) -> None:
        """``statics``: pipeline id -> counted rows of the static table alias (loaded when the query opens);
        ``joined``: those of the static tables of view branches joined per timestamp (:func:`obda.execution.
        views.statics`)."""
        self.joined_statics = dict(joined or {})
        for m in self.members:
            m.set_statics({a: statics.get(p.id, {}) for a, p in m.plan.pipelines.items() if not p.table.is_stream})
        for e in self.timed.values():
            e.set_statics(statics, joined)

    def state(self) -> dict:
        out = {"members": [m.state() for m in self.members], "emitted": self.emitted, "static_done": self.static_done}
        if self.windows.times:
            out["windows"] = self.windows.state()
        if self.waiting.wait:
            out["waiting"] = self.waiting.state()
        return out

    def restore(self, st: dict) -> None:
        self.windows.restore(st.get("windows", {}))
        self.waiting.restore(st.get("waiting", []), self.windows)
        for m, s in zip(self.members, st["members"]):
            m.restore(s)
        self.emitted.clear()  # in place: the members' after_absorb holds it
        self.emitted.update(st["emitted"])
        self.static_done = st["static_done"]

    @property
    def entries(self) -> int:
        return sum(m.entries for m in self.members) + len(self.emitted) + self.windows.entries + self.waiting.entries

    @property
    def static_entries(self) -> int:
        """The static tables' rows the members hold, and the answers of the checks (obda.execution.checks)."""
        return sum(m.static_entries for m in self.members) + self.check_entries

    def _collect(self, mp: MemberForest, out: Counted, emitted_at, answers: list[Answer]) -> None:
        """Append the answers of ``out`` in a deterministic order (by the member's output tuple); those of a member
        with a check decided later wait for it (rules A4, A6: :meth:`hold`, :meth:`close_waiting`)."""
        bind = self._binders[id(mp)]
        mi = self._index.get(id(mp))
        if mi in self.waiting.wait:
            for vals in _ordered(out):
                full = bind(vals)
                if full is not None:
                    self.hold(mi, emitted_at, full, out[vals], answers)
            return
        if self.plan.distinct:
            # most answers of a DISTINCT query were emitted before: drop them before sorting
            fresh = {}
            for vals in out:
                b = bind(vals)
                if b is not None and b not in self.emitted:
                    fresh[vals] = b
            for vals in _ordered(fresh):
                b = fresh[vals]
                if b in self.emitted:  # two output tuples of this step with the same binding
                    continue
                self.emitted.add(b)
                answers.append(Answer(emitted_at, b, 1))
        else:
            for vals in _ordered(out):
                b = bind(vals)
                if b is not None:  # None: a check over several FROM entries drops it
                    answers.append(Answer(emitted_at, b, out[vals]))

    def set_marks(self, marks: dict) -> None:
        """What the synopses drop entries by at the last closed timestamp: the OA constraints' value watermarks
        (:func:`expire_by_order`) and the keys in use (:func:`consume`)."""
        for m in self.members:
            m.marks = marks

    def relax(self) -> None:
        """A k-constraint stopped being used (its violation rate): keep what the query's own conditions need."""
        for m in self.members:
            m.relaxed = True

    def step(self, ts: int, cur: dict[int, Counted]) -> list[Answer]:
        """``cur``: pipeline id -> counted rows of closed timestamp ``ts``."""
        answers = self.emit_static(ts)
        for text, e in self.timed.items():  # one timestamp's answers, none kept after it (rule A2) but for a window
            found = e.step(ts, cur)
            e.emitted.clear()
            if text in self.windows.times:
                self.windows.add(text, ts, found)
            else:
                self._timed_answers[text] = {a.values for a in found}
        self.close_waiting(ts, answers)
        for m in self.members:
            rows = {a: cur.get(p.id) for a, p in m.plan.pipelines.items() if p.table.is_stream}
            if not any(rows.values()):
                continue
            self._collect(m.plan, m.step(ts, rows), ts, answers)
        if self.plan.keyed_by_time:
            self.emitted.clear()
        return answers

    def emit_static(self, ts: int) -> list[Answer]:
        """The answers of the members over static tables only (or constants), once: at the first closed timestamp,
        whether or not a stream row passed the query's filters by then."""
        answers: list[Answer] = []
        if not self.static_done:
            self.static_done = True
            for m in self.members:
                self._collect(m.plan, m.static_answers(), ts, answers)
        return answers

    def close_waiting(self, ts: int, answers: list[Answer]) -> None:
        """At closed timestamp ``ts``, once the checks' answers of ``ts`` are in :attr:`windows`: they decide the
        waiting answers whose window they fall in, and the checks whose window ended by ``ts`` are decided without
        a match (rules A4, A6); the answers every check keeps are emitted at ``ts``.  Then what no window can read
        any more is dropped.  The answers of ``ts`` itself start waiting after this (:meth:`hold`)."""
        for mi, _, full, count in self.waiting.settle(ts, self.windows.take_arrived()):
            self._emit_waited(mi, ts, full, count, answers)
        if self.windows.times:
            self.windows.expire(ts)

    def hold(self, mi: int, ts: int, full: tuple, count: int, answers: list[Answer]) -> None:
        """Member ``mi``'s answer of closed timestamp ``ts`` (with its hidden terms) meets its waiting checks: it is
        emitted at ``ts`` when the answers kept already decide them all to keep it, else it waits."""
        if self.waiting.hold(mi, ts, full, count, self.windows):
            self._emit_waited(mi, ts, full, count, answers)

    def _emit_waited(self, mi: int, ts: int, full: tuple, count: int, answers: list[Answer]) -> None:
        b = full[:self.plan.members[mi].member.visible]
        if self.plan.distinct:
            if b in self.emitted:
                return
            self.emitted.add(b)
            count = 1
        answers.append(Answer(ts, b, count))

    def static_only(self) -> list[Answer]:
        """For a query without any stream table: all answers, once."""
        return self.emit_static(None)
