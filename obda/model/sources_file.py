"""The sources file (YAML) read into :class:`~obda.model.sources.Sources`, every error located (file, line).

File format (YAML)::

    tables:
      measurement:
        kind: stream            # stream | static
        timestamp: ts           # required for streams: the application-time column
        columns: {sensor_id: integer, value: integer, ts: timestamp}
        location: data/measurement   # optional: file or directory
        format: csv                  # optional: csv | json | parquet (jdbc: static tables only; mqtt, kafka:
                                     # streams only, see obda/model/mqtt_source.py, kafka_source.py)
        key: [sensor_id, ts]         # optional: a unique key (enables self-join elimination)
      sensor:
        kind: static
        columns: {id: integer, kind: string, turbine_id: integer}
    constraints:                     # optional: k-constraints (obda/model/constraints.py)
      - name: alarm_near_reading
        referential: {from: alarm, to: measurement, on: [sensor_id]}
        after: PT5M
        before: PT5M

Column types: integer, decimal, double, string, boolean, timestamp.
Table and column names are matched case-insensitively (SQL semantics);
the spelling of the file is kept for output.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import yaml

from obda.errors import Location, SourcesError
from obda.model.constraints import KINDS, ORDERED, REFERENTIAL, Constraint, Monitoring, parse_duration
from obda.model.kafka_source import parse_bootstrap, parse_kafka_options
from obda.model.mqtt_source import parse_mqtt_options
from obda.model.sources import (FORMATS, STREAM_FORMATS, UNSUPPORTED_FORMATS, Column, ColumnType, Sources, Table,
                                TableKind)


def _loc(file: str | None, node: yaml.Node | None) -> Location:
    if node is None:
        return Location(file)
    return Location(file, node.start_mark.line + 1, node.start_mark.column + 1)


def _mapping_items(node: yaml.Node, file: str | None, what: str) -> list[tuple[yaml.Node, yaml.Node]]:
    if not isinstance(node, yaml.MappingNode):
        raise SourcesError(f"{what} must be a mapping (key: value)", _loc(file, node))
    for k, _ in node.value:  # a complex key (`? [a, b]`) would become the repr of a YAML node
        if not isinstance(k, yaml.ScalarNode):
            raise SourcesError(f"a key of {what} is a list or mapping; write a name", _loc(file, k))
    return list(node.value)


def _text(node: yaml.Node, file: str | None, what: str) -> str:
    """The text of a single value; a list or mapping where one value belongs is refused, located."""
    if not isinstance(node, yaml.ScalarNode):
        shape = "list" if isinstance(node, yaml.SequenceNode) else "mapping"
        raise SourcesError(f"{what} must be a single value, not a {shape}", _loc(file, node))
    return str(node.value)


#: lists and mappings nested deeper than this are refused before the YAML is composed (PyYAML's composer
#: recurses per level and would run out of Python stack); a sources file nests five or six levels
MAX_NESTING = 64
_OPENING = (yaml.BlockMappingStartToken, yaml.BlockSequenceStartToken, yaml.FlowMappingStartToken,
            yaml.FlowSequenceStartToken)
_CLOSING = (yaml.BlockEndToken, yaml.FlowMappingEndToken, yaml.FlowSequenceEndToken)


def _nesting_error(text: str, file: str | None) -> SourcesError | None:
    """The error for the first list or mapping that opens level ``MAX_NESTING + 1`` (the scanner does not
    recurse), or None."""
    depth = 0
    try:
        for token in yaml.scan(text):
            if isinstance(token, _OPENING):
                depth += 1
                if depth > MAX_NESTING:
                    m = token.start_mark
                    return SourcesError(f"sources file: lists and mappings nested more than {MAX_NESTING} deep are "
                                        "not supported; flatten the nesting", Location(file, m.line + 1, m.column + 1))
            elif isinstance(token, _CLOSING):
                depth -= 1
    except yaml.YAMLError:
        return None  # not YAML: composing it says where
    return None


def _yaml_location(e: yaml.YAMLError, text: str, file: str | None) -> Location:
    mark = getattr(e, "problem_mark", None)
    if mark is not None:
        return Location(file, mark.line + 1, mark.column + 1)
    position = getattr(e, "position", None)  # a ReaderError (a character YAML does not allow): an offset
    if isinstance(position, int) and isinstance(text, str) and 0 <= position <= len(text):
        before = text[:position]
        return Location(file, before.count("\n") + 1, position - (before.rfind("\n") + 1) + 1)
    return Location(file)


def read_utf8(path: str | Path, what: str, error=SourcesError) -> str:
    """The text of a UTF-8 file; an unreadable or non-UTF-8 file raises ``error`` located at the bad byte."""
    p = Path(path)
    try:
        data = p.read_bytes()
    except OSError as e:
        raise error(f"cannot read {what}: {e.strerror}", Location(str(p))) from e
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        column = e.start - (data.rfind(b"\n", 0, e.start) + 1) + 1
        raise error(f"{what} is not UTF-8 text: byte 0x{data[e.start]:02x} at byte offset {e.start} ({e.reason}); "
                    "save it as UTF-8", Location(str(p), line, column)) from None


def load_sources(path: str | Path) -> Sources:
    """Read and check a sources file; raises :class:`SourcesError` with file and line."""
    p = Path(path)
    return parse_sources(read_utf8(p, "sources file"), str(p))


def parse_sources(text: str, file: str | None = None) -> Sources:
    deep = _nesting_error(text, file)
    if deep is not None:
        raise deep
    try:
        root = yaml.compose(text)
    except RecursionError:  # within the limit, but called with little stack left
        raise SourcesError("sources file: lists and mappings nested too deeply to read here; flatten the nesting",
                           Location(file, 1)) from None
    except yaml.YAMLError as e:
        loc = _yaml_location(e, text, file)
        raise SourcesError(f"sources file is not valid YAML: {getattr(e, 'problem', e)}", loc) from e
    if root is None:
        raise SourcesError("sources file is empty; expected a 'tables:' mapping", Location(file, 1))
    tables_node = constraints_node = None
    for k, v in _mapping_items(root, file, "the sources file"):
        if k.value == "tables":
            tables_node = v
        elif k.value == "constraints":
            constraints_node = v
        else:
            raise SourcesError(f"unknown top-level key {k.value!r}; expected 'tables' or 'constraints'", _loc(file, k))
    if tables_node is None:
        raise SourcesError("missing 'tables:' mapping", _loc(file, root))
    tables: list[Table] = []
    seen: set[str] = set()
    for name_node, body in _mapping_items(tables_node, file, "'tables'"):
        name = str(name_node.value)
        if name.lower() in seen:
            raise SourcesError(f"table {name!r} is declared twice", _loc(file, name_node))
        seen.add(name.lower())
        tables.append(_parse_table(name, name_node, body, file))
    sources = Sources(tuple(tables), file)
    if constraints_node is not None:
        sources = replace(sources, constraints=parse_constraints(constraints_node, sources, file))
    return sources


def parse_constraints(node: yaml.Node, sources: Sources, file: str | None) -> tuple[Constraint, ...]:
    """The ``constraints:`` list of a sources file (or of a catalog entry), checked against ``sources``."""
    if not isinstance(node, yaml.SequenceNode):
        raise SourcesError("'constraints' must be a list of constraints (- name: …)", _loc(file, node))
    out: list[Constraint] = []
    for item in node.value:
        c = _parse_constraint(item, sources, file)
        if any(o.name == c.name for o in out) or sources.constraint(c.name) is not None:
            raise SourcesError(f"constraint {c.name!r} is declared twice", c.location)
        out.append(c)
    return tuple(out)


_MONITORING = {"margin", "sample", "window", "max_violation_rate", "bloom_bits"}


def _parse_constraint(node: yaml.Node, sources: Sources, file: str | None) -> Constraint:
    fields = {str(k.value): (k, v) for k, v in _mapping_items(node, file, "a constraint")}
    allowed = {"name", "after", "before", "within", "rows", *KINDS, *_MONITORING}
    for key, (k, _) in fields.items():
        if key not in allowed:
            raise SourcesError(f"constraint: unknown key {key!r} (expected name, one of {', '.join(KINDS)}, "
                               f"after/before (referential) or within, and {', '.join(sorted(_MONITORING))})", _loc(file, k))
    if "name" not in fields:
        raise SourcesError("constraint without a 'name'", _loc(file, node))
    name = _text(fields["name"][1], file, "the name of a constraint")
    at = _loc(file, fields["name"][1])
    kinds = [k for k in KINDS if k in fields]
    if len(kinds) != 1:
        raise SourcesError(f"constraint {name!r}: give exactly one of {', '.join(KINDS)} (got {kinds or 'none'})", at)
    kind = kinds[0]
    if "rows" in fields:
        raise SourcesError(f"constraint {name!r}: k in rows is not supported: in application time a count of rows "
                           "bounds no state (how long k rows take depends on the streams' rates) and does not combine "
                           "with the query's time windows; give k as a duration (after/before/within: PT5M) that "
                           "covers k rows at the streams' slowest rate (the metrics report the k observed)",
                           _loc(file, fields["rows"][0]))

    def duration(key: str) -> int | None:
        if key not in fields:
            return None
        v = fields[key][1]
        us = parse_duration(v.value) if isinstance(v, yaml.ScalarNode) else None
        if us is None:
            raise SourcesError(f"constraint {name!r}: {key} {getattr(v, 'value', v)!r} is not a duration: write an "
                               "xsd:dayTimeDuration such as PT5M, PT30S or P1DT2H (no years or months)", _loc(file, v))
        return us

    spec = fields[kind][1]
    parts = {str(k.value): (k, v) for k, v in _mapping_items(spec, file, f"constraint {name!r}: {kind}")}
    if kind == REFERENTIAL:
        expected = ("from", "to", "on")
        if "within" in fields:
            raise SourcesError(f"constraint {name!r}: a referential constraint has 'after' and/or 'before' "
                               "(how much later / earlier the joining row arrives), not 'within'",
                               _loc(file, fields["within"][0]))
        after, before = duration("after"), duration("before")
        if after is None and before is None:
            raise SourcesError(f"constraint {name!r}: give 'after' (the joining '{_scalar(parts.get('to'))}' row "
                               "arrives at most this much later) and/or 'before' (at most this much earlier)", at)
    else:
        expected = ("stream", "column")
        for side in ("after", "before"):
            if side in fields:
                raise SourcesError(f"constraint {name!r}: a {kind} constraint has 'within', not '{side}'",
                                   _loc(file, fields[side][0]))
        after = before = duration("within")
        if after is None:
            raise SourcesError(f"constraint {name!r}: missing 'within' (a duration such as PT2M)", at)
    for key, (k, _) in parts.items():
        if key not in expected:
            raise SourcesError(f"constraint {name!r}: unknown key {key!r} in {kind} (expected {', '.join(expected)})",
                               _loc(file, k))
    for key in expected:
        if key not in parts:
            raise SourcesError(f"constraint {name!r}: {kind} needs {', '.join(expected)} (missing {key!r})",
                               _loc(file, spec))

    def stream(key: str) -> Table:
        v = parts[key][1]
        t = sources.table(_scalar(parts[key]))
        if t is None:
            raise SourcesError(f"constraint {name!r}: {key} {v.value!r} is not a table of the sources file", _loc(file, v))
        if not t.is_stream:
            raise SourcesError(f"constraint {name!r}: {t.name!r} is static; k-constraints describe how streams "
                               "arrive", _loc(file, v))
        return t

    def column(t: Table, v: yaml.Node) -> str:
        c = t.column(str(v.value)) if isinstance(v, yaml.ScalarNode) else None
        if c is None:
            raise SourcesError(f"constraint {name!r}: {getattr(v, 'value', v)!r} is not a column of {t.name!r}",
                               _loc(file, v))
        if c.name == t.timestamp:
            raise SourcesError(f"constraint {name!r}: {c.name!r} is the timestamp of {t.name!r}; a k-constraint is on "
                               "another column (the timestamps are ordered by the application-time marker)",
                               _loc(file, v))
        return c.name

    if kind == REFERENTIAL:
        left, right = stream("from"), stream("to")
        on_node = parts["on"][1]
        items = on_node.value if isinstance(on_node, yaml.SequenceNode) else [on_node]
        on: list[tuple[str, str]] = []
        for item in items:
            if isinstance(item, yaml.MappingNode):  # {from_column: to_column}
                for k, v in item.value:
                    on.append((column(left, k), column(right, v)))
            else:
                on.append((column(left, item), column(right, item)))
        if not on:
            raise SourcesError(f"constraint {name!r}: 'on' names no column", _loc(file, on_node))
        for (a, b), item in zip(on, items):
            ta, tb = left.column(a).type, right.column(b).type
            if ta != tb and not (ta.is_numeric and tb.is_numeric):
                raise SourcesError(f"constraint {name!r}: {left.name}.{a} ({ta.value}) and {right.name}.{b} "
                                   f"({tb.value}) cannot be equal: a join needs comparable types", _loc(file, item))
    else:
        left = right = stream("stream")
        col = column(left, parts["column"][1])
        if kind == ORDERED and left.column(col).type.value in ("string", "boolean"):
            raise SourcesError(f"constraint {name!r}: ordered arrival needs a numeric or timestamp column, "
                               f"{left.name}.{col} is {left.column(col).type.value}", _loc(file, parts["column"][1]))
        on = [(col, col)]
    mon = {}
    for key in _MONITORING:
        if key not in fields:
            continue
        v = fields[key][1]
        if key == "window":
            mon[key] = duration("window")
            continue
        try:
            mon[key] = int(v.value) if key == "bloom_bits" else float(v.value)
        except (TypeError, ValueError):
            raise SourcesError(f"constraint {name!r}: {key} {v.value!r} is not a number", _loc(file, v)) from None
        ok = {"margin": mon[key] >= 1, "sample": 0 <= mon[key] <= 1, "max_violation_rate": 0 <= mon[key] <= 1,
              "bloom_bits": 1024 <= mon[key] <= 1 << 33}[key]
        if not ok:
            rng = {"margin": "at least 1", "sample": "between 0 and 1", "max_violation_rate": "between 0 and 1",
                   "bloom_bits": "between 1024 and 2^33"}[key]
            raise SourcesError(f"constraint {name!r}: {key} must be {rng}, not {v.value}", _loc(file, v))
    return Constraint(name, kind, left.name, right.name, tuple(on), after, before, Monitoring(**mon), at)


def _scalar(entry) -> str:
    return "" if entry is None else str(entry[1].value)


def _parse_table(name: str, name_node: yaml.Node, body: yaml.Node, file: str | None) -> Table:
    fields: dict[str, tuple[yaml.Node, yaml.Node]] = {}
    for k, v in _mapping_items(body, file, f"table {name!r}"):
        if k.value not in ("kind", "timestamp", "columns", "location", "format", "options", "key"):
            raise SourcesError(
                f"table {name!r}: unknown key {k.value!r} (expected kind, timestamp, columns, location, format, options, key)",
                _loc(file, k),
            )
        fields[k.value] = (k, v)
    if "kind" not in fields:
        raise SourcesError(f"table {name!r}: missing 'kind' (stream or static)", _loc(file, name_node))
    kind_node = fields["kind"][1]
    try:
        kind = TableKind(_text(kind_node, file, f"table {name!r}: kind"))
    except ValueError:
        raise SourcesError(
            f"table {name!r}: kind {kind_node.value!r} is not 'stream' or 'static'", _loc(file, kind_node)
        ) from None
    if "columns" not in fields:
        raise SourcesError(f"table {name!r}: missing 'columns'", _loc(file, name_node))
    columns: list[Column] = []
    seen: set[str] = set()
    for cn, ct in _mapping_items(fields["columns"][1], file, f"columns of table {name!r}"):
        cname = str(cn.value)
        if cname.lower() in seen:
            raise SourcesError(f"table {name!r}: column {cname!r} declared twice", _loc(file, cn))
        seen.add(cname.lower())
        if cname.startswith("__") or cname.lower() == "_corrupt_record":
            raise SourcesError(
                f"table {name!r}: column name {cname!r} is reserved (names starting with '__' and "
                "'_corrupt_record' are the executor's own columns); rename the column",
                _loc(file, cn),
            )
        try:
            ctype = ColumnType(_text(ct, file, f"table {name!r}: the type of column {cname!r}").lower())
        except ValueError:
            allowed = ", ".join(t.value for t in ColumnType)
            raise SourcesError(
                f"table {name!r}: column {cname!r} has unknown type {ct.value!r} (allowed: {allowed})",
                _loc(file, ct),
            ) from None
        columns.append(Column(cname, ctype))
    if not columns:
        raise SourcesError(f"table {name!r} has no columns", _loc(file, fields["columns"][1]))
    timestamp = None
    if "timestamp" in fields:
        ts_node = fields["timestamp"][1]
        timestamp = _text(ts_node, file, f"table {name!r}: timestamp")
        col = next((c for c in columns if c.name.lower() == timestamp.lower()), None)
        if kind is TableKind.STATIC:
            raise SourcesError(f"table {name!r} is static but declares a timestamp column", _loc(file, ts_node))
        if col is None:
            raise SourcesError(
                f"stream {name!r}: timestamp column {timestamp!r} is not among its columns", _loc(file, ts_node)
            )
        if col.type is not ColumnType.TIMESTAMP:
            raise SourcesError(
                f"stream {name!r}: timestamp column {timestamp!r} has type {col.type.value}, expected timestamp",
                _loc(file, ts_node),
            )
        timestamp = col.name
    elif kind is TableKind.STREAM:
        raise SourcesError(
            f"stream {name!r} has no 'timestamp' column; a stream needs exactly one application-time column",
            _loc(file, name_node),
        )
    if kind is TableKind.STREAM:
        others = [c.name for c in columns if c.type is ColumnType.TIMESTAMP and c.name != timestamp]
        if others:
            raise SourcesError(
                f"stream {name!r}: columns {others} also have type timestamp; a stream carries exactly one "
                f"timestamp column ({timestamp!r})",
                _loc(file, fields["columns"][1]),
            )
    location = _text(fields["location"][1], file, f"table {name!r}: location") if "location" in fields else None
    fmt = None
    if "format" in fields:
        fmt = _text(fields["format"][1], file, f"table {name!r}: format").lower()
        if fmt in UNSUPPORTED_FORMATS:
            raise SourcesError(f"table {name!r}: format {fmt!r} is not supported: {UNSUPPORTED_FORMATS[fmt]}",
                               _loc(file, fields["format"][1]))
        if kind is TableKind.STREAM and fmt not in STREAM_FORMATS:
            raise SourcesError(
                f"stream {name!r}: format {fmt!r} is for static tables only (a stream is read as new files in its "
                f"location: {', '.join(STREAM_FORMATS)}); make the table static or export it to files",
                _loc(file, fields["format"][1]),
            )
        if fmt not in FORMATS:
            raise SourcesError(
                f"table {name!r}: unknown format {fmt!r} (allowed: {', '.join(FORMATS)})", _loc(file, fields["format"][1])
            )
    options: dict[str, str] = {}
    ingest = kafka = None
    if fmt in ("mqtt", "kafka"):  # a broker's stream: never static, and its location says where
        if kind is TableKind.STATIC:
            raise SourcesError(f"table {name!r}: format {fmt!r} is for streams (a static table is read from files)",
                               _loc(file, fields["format"][1]))
        if location is None:
            needs = ("the folder of the ingest log obda lands the messages in" if fmt == "mqtt" else
                     "the bootstrap servers (host:port[,host:port…])")
            raise SourcesError(f"stream {name!r}: format {fmt!r} needs a 'location': {needs}", _loc(file, name_node))
    if fmt == "mqtt":
        ingest = parse_mqtt_options(name, fields["options"][1] if "options" in fields else None, file,
                                    _loc(file, fields["format"][1]))
        fmt = "json"  # the executor reads the ingest log's JSON-lines part files
    elif fmt == "kafka":
        location = parse_bootstrap(name, location, _loc(file, fields["location"][1]))
        kafka = parse_kafka_options(name, fields["options"][1] if "options" in fields else None, file,
                                    _loc(file, fields["format"][1]), location, _loc(file, fields["location"][1]))
    elif "options" in fields:
        for k, v in _mapping_items(fields["options"][1], file, f"options of table {name!r}"):
            options[str(k.value)] = _text(v, file, f"table {name!r}: option {k.value!r}")
    key: list[str] = []
    if "key" in fields:
        knode = fields["key"][1]
        items = knode.value if isinstance(knode, yaml.SequenceNode) else [knode]
        for item in items:
            kname = _text(item, file, f"table {name!r}: a key column")
            col = next((c for c in columns if c.name.lower() == kname.lower()), None)
            if col is None:
                raise SourcesError(f"table {name!r}: key column {item.value!r} is not among its columns", _loc(file, item))
            key.append(col.name)
    return Table(
        name=name,
        key=tuple(key),
        kind=kind,
        columns=tuple(columns),
        timestamp=timestamp,
        location=location,
        format=fmt,
        options=options,
        source_location=_loc(file, name_node),
        ingest=ingest,
        kafka=kafka,
    )
