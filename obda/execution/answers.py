"""Answers computed by Spark: a typed handle on the DataFrame the executors produce.

The distributed path (:mod:`obda.execution.distributed`) never brings answers
to the driver: a micro-batch's answers are a Spark DataFrame, one row per
answer **occurrence** (bags stay bags), with

* ``__at``: the closed timestamp that produced the answer (µs since the epoch, long);
* ``__b0`` … ``__b{n-1}``: the binding's values, in the order of ``columns``.

A sink made for it (``Sink.writes_frames``: :class:`~obda.execution.DirectorySink`)
writes it with Spark's own writers, on the executors.  The other sinks (a single
file, the console, memory) are for small outputs: the executor brings their
answers to the driver in the micro-batch's one collect job
(:func:`~obda.execution.collect.collect_tagged`, streamed one partition at a
time) and hands them over with ``write_lines``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from obda.model.terms import LETTER

AT = "__at"

#: The order of one timestamp's answers in every sink (issue 26, item 4): the binding's values as text (Spark's
#: ``CAST(value AS STRING)``, compared as UTF-8 bytes), variable by variable in the query's column order, an
#: unbound value first.  Two answers with the same texts are the same line, so the order is total.
TIE_BREAK = "the binding's values as text, variable by variable in column order, unbound first"


def value_column(i: int) -> str:
    """Name of the column holding the ``i``-th variable's value."""
    return f"__b{i}"


@dataclass(frozen=True)
class AnswerFrame:
    """One micro-batch's answers as a Spark DataFrame (see the module docstring)."""

    df: object  # pyspark.sql.DataFrame
    columns: tuple[str, ...]
    partitions: int | None = None  # of the written answers (in_time_order); None: the default parallelism
    # the columns of several kinds of term, whose values are held encoded (obda.model.terms.encode)
    typed: frozenset[int] = frozenset()
    # where the answers' timestamps lie, (lo, hi] in µs (the range the micro-batch closes, or an estimate): the
    # partitions are its slices, without a sampling job (obda.execution.time_buckets); None: Spark samples
    span: tuple[int, int] | None = None

    def emitted_at(self):
        """``emitted_at`` as ISO-8601 UTC text, exactly as the JSON-lines sinks print it."""
        from pyspark.sql import functions as F

        at = F.col(AT)
        base = F.date_format(F.timestamp_micros(at), "yyyy-MM-dd'T'HH:mm:ss")
        frac = F.lpad(F.pmod(at, F.lit(1_000_000)).cast("string"), 6, "0")
        return F.when(at.isNull(), F.lit(None)).otherwise(
            F.concat(base, F.when(F.pmod(at, F.lit(1_000_000)) == 0, F.lit("")).otherwise(F.concat(F.lit("."), frac)), F.lit("Z"))
        )

    def binding(self):
        """The binding as one struct column named after the query's variables."""
        from pyspark.sql import functions as F

        return F.struct(*[self._text(i).alias(c) for i, c in enumerate(self.columns)])

    def _text(self, i: int):
        """The ``i``-th value; in a column of several kinds of term, its text (without its class's letter)."""
        from pyspark.sql import functions as F

        v = F.col(value_column(i))
        return F.substring(v, 2, 1 << 30) if i in self.typed else v

    def in_time_order(self) -> "AnswerFrame":
        """The same answers range-partitioned by their timestamp and sorted within each partition: written
        partition by partition, they are in application-time order.  Within one timestamp the tie-break is
        :data:`TIE_BREAK`, the order the driver's answers come in too
        (:func:`~obda.execution.collect.collect_tagged`), so every sink sees one total order.

        Into ``partitions`` (the micro-batch's scan's, :func:`obda.execution.scan.partitions`): with a ``span``,
        partition ``k`` holds the ``k``-th slice of it (:func:`~obda.execution.time_buckets.by_time_slices`);
        without one, Spark samples the bounds of more than one partition in a job of its own, which computes the
        answers once more.  Spark's sort spills what exceeds its memory to disk, so no partition's answers need
        to fit in the heap."""
        from pyspark.sql import functions as F

        from obda.execution.time_buckets import by_time_slices

        keys = [F.col(AT)] + [F.col(value_column(i)).cast("string") for i in range(len(self.columns))]
        parts = self.partitions or self.df.sparkSession.sparkContext.defaultParallelism
        if self.span is not None and parts > 1:
            df = by_time_slices(self.df, F.col(AT), *self.span, parts)
        else:
            df = self.df.repartitionByRange(parts, F.col(AT))
        return AnswerFrame(df.sortWithinPartitions(*keys), self.columns, parts, self.typed, self.span)

    def records(self):
        """A DataFrame ``(emitted_at string, binding struct)``: what Parquet part files hold."""
        return self.df.select(self.emitted_at().alias("emitted_at"), self.binding().alias("binding"))

    def json_lines(self):
        """A DataFrame with one string column ``value``: the JSON line of each occurrence (NULLs kept)."""
        from pyspark.sql import functions as F

        rec = F.struct(self.emitted_at().alias("emitted_at"), self.binding().alias("binding"))
        if not self.typed:
            return self.df.select(F.to_json(rec, {"ignoreNullFields": "false"}).alias("value"))
        # a column of several kinds of term: a number or a boolean is written as one, the rest as a string (the
        # driver's sinks write them so: obda.model.terms.decode); the line is put together from its values' JSON
        parts = [F.lit('{"emitted_at":'), _json(self.emitted_at()), F.lit(',"binding":{')]
        for i, c in enumerate(self.columns):
            parts.append(F.lit(("," if i else "") + json.dumps(c) + ":"))
            parts.append(self._typed_json(i) if i in self.typed else _json(F.col(value_column(i))))
        return self.df.select(F.concat(*parts, F.lit("}}")).alias("value"))

    def _typed_json(self, i: int):
        """The JSON of a value of a column of several kinds of term (:func:`obda.model.terms.decode`)."""
        from pyspark.sql import functions as F

        v, text = F.col(value_column(i)), self._text(i)
        letter = F.substring(v, 1, 1)
        raw = (((letter == LETTER["number"]) & text.rlike(_JSON_NUMBER))
               | ((letter == LETTER["boolean"]) & text.isin("true", "false")))
        return F.when(v.isNull(), F.lit("null")).when(raw, text).otherwise(_json(text))


#: a JSON number (RFC 8259): what a number's text is written as, unquoted
_JSON_NUMBER = r"^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?$"


def _json(column):
    """A column's value as JSON text (``null`` for NULL), as Spark's ``to_json`` writes it in a record."""
    from pyspark.sql import functions as F

    whole = F.to_json(F.struct(column.alias("v")), {"ignoreNullFields": "false"})  # {"v":<value>}, on one line
    return F.regexp_extract(whole, r'^\{"v":(.*)\}$', 1)
