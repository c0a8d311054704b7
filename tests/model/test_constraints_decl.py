"""k-constraints in the sources file (issue 17): parsed into typed constraints, every mistake located."""

from __future__ import annotations

import pytest

from obda.errors import SourcesError
from obda.model.constraints import format_duration, parse_duration
from obda.model.sources import Sources

TABLES = """tables:
  measurement: {kind: stream, timestamp: ts, columns: {sensor_id: integer, value: integer, label: string, ts: timestamp}}
  alarm: {kind: stream, timestamp: ts, columns: {sensor_id: integer, severity: integer, ts: timestamp}}
  sensor: {kind: static, columns: {id: integer}}
constraints:
"""


def parse(body: str) -> Sources:
    return Sources.from_yaml(TABLES + body, "s.yaml")


def test_the_three_kinds_parse_with_their_bounds_and_settings():
    s = parse("""  - name: near
    referential: {from: alarm, to: measurement, on: [{sensor_id: sensor_id}]}
    after: PT5M
    margin: 3
    sample: 0.5
    window: PT1H
  - {name: clus, clustered: {stream: measurement, column: sensor_id}, within: PT2M}
  - {name: ord, ordered: {stream: alarm, column: severity}, within: PT0.5S}
""")
    near, clus, ord_ = s.constraints
    assert (near.left, near.right, near.on, near.after, near.before) == ("alarm", "measurement", (("sensor_id", "sensor_id"),), 300_000_000, None)
    assert near.monitoring.margin == 3 and near.monitoring.sample == 0.5 and near.window == 3_600_000_000
    assert near.describe() == "RI(alarm → measurement on sensor_id, after PT5M)"
    assert clus.describe() == "CA(measurement.sensor_id, PT2M)" and clus.after == clus.before == 120_000_000
    assert ord_.within == 500_000 and not ord_.exploitable and clus.exploitable
    assert near.location.line == 6


@pytest.mark.parametrize("body, message, line", [
    ("  - {name: a, referential: {from: nope, to: alarm, on: [sensor_id]}, after: PT1M}", "not a table", 6),
    ("  - {name: a, referential: {from: sensor, to: alarm, on: [id]}, after: PT1M}", "is static", 6),
    ("  - {name: a, referential: {from: measurement, to: alarm, on: [value2]}, after: PT1M}", "not a column of 'measurement'", 6),
    ("  - {name: a, referential: {from: measurement, to: alarm, on: [ts]}, after: PT1M}", "is the timestamp", 6),
    ("  - {name: a, referential: {from: measurement, to: alarm, on: [{label: sensor_id}]}, after: PT1M}", "cannot be equal", 6),
    ("  - {name: a, referential: {from: measurement, to: alarm, on: [sensor_id]}, after: 5 minutes}", "not a duration", 6),
    ("  - {name: a, referential: {from: measurement, to: alarm, on: [sensor_id]}, after: P1M}", "not a duration", 6),
    ("  - {name: a, referential: {from: measurement, to: alarm, on: [sensor_id]}}", "give 'after'", 6),
    ("  - {name: a, referential: {from: measurement, to: alarm, on: [sensor_id]}, within: PT1M}", "not 'within'", 6),
    ("  - {name: a, referential: {from: measurement, to: alarm, on: [sensor_id]}, after: PT1M, rows: 100}", "k in rows", 6),
    ("  - {name: a, clustered: {stream: measurement, column: sensor_id}}", "missing 'within'", 6),
    ("  - {name: a, ordered: {stream: measurement, column: label}, within: PT1M}", "numeric or timestamp", 6),
    ("  - {name: a, clustered: {stream: measurement}, within: PT1M}", "missing 'column'", 6),
    ("  - {name: a, clustered: {stream: measurement, column: sensor_id}, within: PT1M, margin: 0.5}", "at least 1", 6),
    ("  - {name: a, clustered: {stream: measurement, column: sensor_id}, within: PT1M}\n"
     "  - {name: a, clustered: {stream: measurement, column: sensor_id}, within: PT1M}", "declared twice", 7),
    ("  - {name: a, wobbly: {stream: measurement}, within: PT1M}", "unknown key 'wobbly'", 6),
    ("  - {clustered: {stream: measurement, column: sensor_id}, within: PT1M}", "without a 'name'", 6),
    ("  {name: a}", "must be a list", 6),
])
def test_every_mistake_is_a_located_sources_error(body, message, line):
    with pytest.raises(SourcesError, match=message) as e:
        parse(body)
    assert e.value.location.file == "s.yaml" and e.value.location.line == line


def test_durations_round_trip():
    for text, us in (("PT5M", 300_000_000), ("P1DT2H", 93_600_000_000), ("PT0.25S", 250_000), ("PT0S", 0)):
        assert parse_duration(text) == us and format_duration(us) == text
    assert parse_duration("PT") is None and parse_duration("-PT1M") is None
