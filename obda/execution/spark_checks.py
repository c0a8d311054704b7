"""The checks of a Spark plan: OPTIONAL, MINUS and [NOT] EXISTS tested on a micro-batch's answers.

A mixin of :class:`~obda.execution.distributed.SparkForest` (it reads its ``forest``, ``engine``, ``spark``,
``ns``, ``_timed`` — a plan per check query decided per timestamp — ``_scan``, ``_rng`` and ``_view``).  A check
against static answers is an ``IN`` list (rule A1); one decided in the answer's own timestamp (A2) is an
anti-join or semi-join with its query's answers at that timestamp, in the same plan; one in a window of the
answer's past (A3) reads those answers and the ones the driver kept from earlier micro-batches, their
timestamps in the window (joined by time bucket).  docs/semantics.md, "Negation in time".
"""

from __future__ import annotations

from obda.execution.answers import AT, value_column
from obda.execution.statement import Statement, conjunction, quoted, small_frame


class SparkChecks:
    """The plans of a query's checks (for :class:`~obda.execution.distributed.SparkForest`)."""

    def _check_condition(self, st: Statement, c, values: list[str], name: str) -> str:
        """A check on the answers of CTE ``name`` (hidden items in ``values`` columns): against its query's static
        answers (an IN list), or, decided in the answer's timestamp (rule A2), against the answers of its query at
        that timestamp — ``[NOT] EXISTS``, an anti-join (semi-join) in the same plan — or in a window of its past
        (A3), against those answers and the driver's kept ones, their timestamps in the window."""
        if not c.timed:
            return c.condition(values)
        terms = [f"{quoted(name)}.{quoted(values[p])}" for p in c.positions]
        if c.window is not None:  # the key terms equal, the time in the window (µs): not the answer's own
            terms = terms[:-1]
        n = len(terms) - len(c.compares)  # then the terms a FILTER of the check compares its columns with
        present = [f"{t} IS NOT NULL" for t in terms[:n]]  # NULL never agrees (as the IN of the static checks)
        answers = self._timed_answers.get(c.query)
        if answers is None:  # the query has no member that can answer
            return conjunction(present + ["TRUE" if c.negated else "FALSE"])
        same = [f"__k.{quoted(value_column(j))} = {t}" for j, t in enumerate(terms[:n])]
        same += [f"__k.{quoted(value_column(n + i))} {op} {t}" for i, (op, t) in enumerate(zip(c.compares, terms[n:]))]
        if c.window is None:
            same.insert(0, f"__k.{quoted(AT)} = {quoted(name)}.{quoted(AT)}")
        else:
            lo, lo_strict, hi, hi_strict = c.window
            gap = f"(__k.{quoted(AT)} - {quoted(name)}.{quoted(AT)})"
            same += [f"{gap} {'<' if hi_strict else '<='} {int(hi)}"]
            if lo is not None:
                same.append(f"{gap} {'>' if lo_strict else '>='} {int(lo)}")
            # a time bucket of the window's width joins too: each answer meets the check's answers of at most two
            # buckets of its key, not all of the micro-batch's (measured: 1M readings, 143k maintenance of 20
            # turbines, 59.6 s without, 29.4 s with); with no key, a join without one would be a broadcast nested
            # loop join (a job of its own, every pair compared).  Without a lower bound (rule A5: the driver keeps
            # each key's earliest answer) one bucket of 2^60 µs holds every time since 1970, and the next ones the
            # sequence's end
            width = max(int(hi) - int(lo), 1) if lo is not None else 2 ** 60
            last = f"floor(({quoted(AT)} - {int(lo)}) / {width})" if lo is not None else "1"
            answers = st.add(f"{answers}_b", f"SELECT *, explode(sequence(CAST(floor(({quoted(AT)} - {int(hi)}) / "
                             f"{width}) AS BIGINT), CAST({last} AS BIGINT))) AS __b FROM {quoted(answers)}")
            same.append(f"__k.__b = CAST(floor({quoted(name)}.{quoted(AT)} / {width}) AS BIGINT)")
        test = f"{'NOT ' if c.negated else ''}EXISTS (SELECT 1 FROM {quoted(answers)} AS __k WHERE {' AND '.join(same)})"
        return conjunction(present + [test])

    def _timed_plans(self, st: Statement) -> None:
        """The answers of every check decided per timestamp, over the micro-batch's rows and range: one CTE each;
        for a check in a window of time (rules A3, A4), with the answers of earlier micro-batches the driver keeps
        (``engine.windows``), and a frame of the range's for the driver to keep (:attr:`window_frames`)."""
        self._timed_answers, self.window_frames = {}, {}
        windows = self.engine.windows
        for k, (text, child) in enumerate(self._timed.items()):
            child.ns, child._scan, child._rng, child._pasts = self.ns, self._scan, self._rng, {}
            scoped = st.scoped(f"c{k}_")
            parts = [sql for mi, mf in enumerate(child.forest.members) if not mf.unsatisfiable and mf.nodes
                     for sql in child._answers(scoped, mi, {})]
            if text not in windows.times:
                self._timed_answers[text] = st.add(f"c{k}_answers", " UNION ALL ".join(parts)) if parts else None
                continue
            keys = [value_column(j) for j in range(len(child.forest.columns) - 1)]  # without the time
            cols = ", ".join(quoted(c) for c in [AT] + keys)
            batch = st.add(f"c{k}_batch", " UNION ALL ".join(parts)) if parts else None
            if batch is not None:
                self.window_frames[text] = f"SELECT {cols} FROM {quoted(batch)}"
            if not any(c.query == text and not c.waits for mf in self.forest.members for c in mf.member.checks):
                continue  # only read by checks that wait for their window's end: the driver's (rule A4)
            sources = [f"SELECT {cols} FROM {quoted(batch)}"] if batch is not None else []
            kept = {key + (t,): 1 for key, times in windows.times[text].items() for t in times}
            if kept:
                view = self._pasts[("window", k)] = self._view(small_frame(self.spark, keys + [AT], kept, None), f"window{k}")
                sources.append(f"SELECT {cols} FROM {quoted(view)}")
            self._timed_answers[text] = st.add(f"c{k}_answers", " UNION ALL ".join(sources)) if sources else None
