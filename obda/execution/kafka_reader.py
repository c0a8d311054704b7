"""Reading a Kafka stream's segments (:mod:`obda.execution.kafka_offsets`) under the reader contract.

Each record's payload is one row: ``payload: json`` one JSON object (as a line of a JSON-lines file; a line
break in it reads as a space), ``payload: csv`` one CSV record of the declared columns in their declared
order (no header); an empty payload reads as ``""``.  The fields are typed and checked exactly as a file's
(:mod:`obda.execution.reader`):

* the local backend parses the payloads with :mod:`obda.execution.reader`'s own functions
  (:func:`segment_records`, each record's ``line`` its offset);
* Spark reads the segments with a Python data source (:class:`KafkaSegments`, one input partition per
  segment, run on the executors) and parses the payloads with ``from_json``/``from_csv`` into the raw
  string columns that :mod:`obda.execution.spark_reader` types and classifies for files (:func:`read_frame`).

With ``time: record`` the timestamp column is the record's own timestamp (ISO 8601, UTC), not a payload field.
A rejected row is quarantined with its segment as ``file`` and its offset as ``line``
(:func:`locate_offsets` finds the offset of a row the Spark job rejected), then annotated with the topic,
partition and offset (:func:`obda.execution.kafka_offsets.annotate`).
"""

from __future__ import annotations

import json
from collections import OrderedDict, defaultdict, deque

from obda.execution.kafka_fetch import EMPTY, FORMAT, _text, record_time, source_class
from obda.execution.reader import (
    MALFORMED_CSV, MALFORMED_JSON, NOT_UTF8, Record, Rejected, _csv_records, _json_records, csv_dialect, row_text,
)
from obda.model.sources import Table

def payload_records(table: Table, messages) -> list[Record | Rejected]:
    """The rows of ``messages`` (``(offset, timestamp ms, value)``) under the contract, each at its offset."""
    src = table.kafka
    out: list[Record | Rejected] = []
    header = csv_dialect(dict(table.options))["delimiter"].join(c.name for c in table.columns)
    for offset, ms, value in messages:
        raw = value or EMPTY
        if src.payload == "json":
            got = _json_records(raw.replace(b"\r", b" ").replace(b"\n", b" "), table) if raw.strip() else []
            if not got:
                got = [Rejected(_text(raw), MALFORMED_JSON)]
        else:
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError:
                got = [Rejected(_text(raw), NOT_UTF8)]
            else:
                got = _csv_records(header + "\n" + text, table, {}) if text.strip() else []
                if len(got) != 1:
                    got = [Rejected(text, MALFORMED_CSV)]
        rec = got[0]
        if isinstance(rec, Rejected):
            out.append(Rejected(rec.text, rec.reason, offset))
            continue
        fields = dict(rec.fields)
        if src.time == "record" and table.timestamp:
            fields[table.timestamp] = record_time(ms)
        out.append(Record(offset, fields))
    return out


def segment_records(name: str, table: Table) -> list[Record | Rejected]:
    """The local backend's read of one segment (:func:`obda.execution.reader.read_records` of a Kafka stream)."""
    from obda.execution.kafka_offsets import segment_messages

    return payload_records(table, segment_messages(table, name))


# -- Spark --------------------------------------------------------------------------------------------------

_REGISTERED: set[int] = set()


def segments_frame(spark, table: Table, paths):
    """The records of segments ``paths`` as a DataFrame (read on the executors)."""
    if id(spark) not in _REGISTERED:
        spark.dataSource.register(source_class())
        _REGISTERED.add(id(spark))
    return (spark.read.format(FORMAT).option("segments", json.dumps(list(paths)))
            .option("kafka.password.conf", json.dumps(table.kafka.conf())).load())


def read_frame(spark, table: Table, paths, with_file: bool = True):
    """:func:`obda.execution.spark_io._read` of a Kafka stream: the declared columns typed, ``__bad``, ``__raw``,
    ``__why`` (and ``__file``, the segment), as :func:`obda.execution.spark_reader._read_text` gives a file's."""
    from pyspark.sql import functions as F

    from obda.execution.spark_reader import CORRUPT, _expressions, _Frame

    src = table.kafka
    exprs = _expressions(spark, table, "json" if src.payload == "json" else "csv", False)
    physical = [f"__c{i}" for i in range(len(table.columns))]
    ddl = ", ".join(f"`{n}` STRING" for n in ([c.name for c in table.columns] if src.payload == "json" else physical))
    opts = {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": CORRUPT}
    df = segments_frame(spark, table, paths)
    value = F.col("value")
    if src.payload == "json":
        text = F.regexp_replace(value, "[\r\n]", " ")
        parsed = F.from_json(text, f"{ddl}, `{CORRUPT}` STRING", opts)
    else:
        text = value
        parsed = F.from_csv(text, f"{ddl}, `{CORRUPT}` STRING", {**opts, "escape": '"', **dict(table.options)})
    blank = F.trim(value) == F.lit("")
    fields = [F.nullif(parsed[c.name if src.payload == "json" else physical[j]], F.lit("")).alias(exprs.raws[j])
              for j, c in enumerate(table.columns)]
    if src.time == "record" and table.timestamp:
        at = [c.name for c in table.columns].index(table.timestamp)
        fields[at] = F.col("__rts").alias(exprs.raws[at])
    corrupt = F.when(blank, text).otherwise(parsed[CORRUPT]).alias(CORRUPT)
    rows = df.select(*fields, corrupt, "__file")
    # ``__file`` always: the quarantine's job names each rejected row's segment by it (a file's by its metadata)
    return _Frame(rows.select(*exprs.out, "__file"), "__bad", "__raw", "__why")


_LOCATED: "OrderedDict[str, dict]" = OrderedDict()  # segment -> row text -> offsets (the last few segments)


def locate_offsets(record: dict, tables: dict[str, Table]) -> dict:
    """A quarantine record of a Kafka row without its offset (Spark's job) with it: found by reading its segment
    on the driver under the contract, as :func:`obda.execution.spark_reader.locate_lines` finds a file's lines."""
    from obda.execution.kafka_fetch import is_segment

    name, table = record.get("file"), tables.get(record.get("stream"))
    if record.get("line") is not None or table is None or not name or not is_segment(name):
        return record
    got = _LOCATED.get(name)
    if got is None:
        got = defaultdict(deque)
        for rec in segment_records(name, table):
            got[rec.text if isinstance(rec, Rejected) else row_text(table, rec.fields)].append(rec.line)
        _LOCATED[name] = got
        while len(_LOCATED) > 16:
            _LOCATED.popitem(last=False)
    offsets = got.get(record.get("row"))
    return {**record, "line": offsets.popleft()} if offsets else record
