"""Interval joins (``?t2 <= ?t1 + "PT5M"^^xsd:dayTimeDuration``) run in the memory of a window (issue 15).

The answers are checked against DuckDB after every timestamp by the catalog differentials
(``test_exec_demo``, ``test_exec_distributed``, ``test_exec_sparql_aggregate``); here: the state of a
windowed interval join stays flat as the stream grows at a fixed rate, because the synopses drop what no
later row can join (``relations.expire``) — without that it grows with the stream.
"""

from __future__ import annotations


import pytest

from execution.exec_harness import demo_world, write_seed
from obda.analysis import plan_execution
from obda.execution import ContinuousQuery, JsonLinesSink

PREFIX = 'PREFIX : <http://example.org/turbine#>\nPREFIX xsd: <http://www.w3.org/2001/XMLSchema#>\n'
# neither stream is ordered after the other: without the durations both would keep every past row
BAND = PREFIX + """SELECT ?sensor ?v ?sev WHERE {
  GRAPH ?t1 { ?m :measuredBy ?sensor ; :hasValue ?v . }
  GRAPH ?t2 { ?a :raisedBy ?sensor ; :hasSeverity ?sev . }
  FILTER(?t2 <= ?t1 + "PT2M"^^xsd:dayTimeDuration && ?t1 <= ?t2 + "PT3M"^^xsd:dayTimeDuration)
}"""


def _run(demo, tmp_path, text: str, timestamps: int, backend: str = "local", spark=None) -> ContinuousQuery:
    src = demo.sources
    streams, statics = demo_world(src, 3, timestamps=timestamps, rows_per_timestamp=(3, 3), value_range=(0, 10**6))
    base = tmp_path / f"{backend}-{timestamps}"
    located = write_seed(base, src, streams, statics, 3)
    q = ContinuousQuery(plan_execution(demo.compile(text), located), base_dir=base, sink=JsonLinesSink(base / "o.jsonl"),
                        backend=backend, spark=spark, max_files_per_batch=2, allow_unbounded=True)
    q.run_until_exhausted()
    q.close()
    return q


def test_interval_join_is_bounded_by_its_window(demo):
    from obda.analysis import analyze_query

    report = analyze_query(demo.compile(BAND), demo.sources)
    (member,) = report.members
    assert report.verdict == "bounded" and member.criterion == "interval_window"
    assert member.memory.startswith("window, per solution: the rows of the last 3 min")
    units = report.forest.members[0].nodes
    assert all(n.expiry for n in units)  # every synopsis forgets: m1 after 2 min, m2 after 3 min
    lags = sorted(lag for n in units for _, lag in n.expiry)
    assert lags == [120_000_000, 180_000_000]


@pytest.mark.parametrize("backend", ["local", pytest.param("spark", marks=pytest.mark.slow)])  # spark: 65 s
def test_state_flat_with_expiry_and_growing_without(demo, tmp_path, backend, request, monkeypatch):
    spark = request.getfixturevalue("spark") if backend == "spark" else None
    small, large = (20, 200) if backend == "local" else (10, 60)
    # the synopses once every timestamp closed: the rows of the last window (rows of open timestamps, read
    # per micro-batch, are buffered apart and grow with the files, not with the stream)
    flat = [_run(demo, tmp_path, BAND, n, backend, spark).metrics.synopsis_entries for n in (small, large)]
    print(f"{backend}: synopsis entries after {small} and {large} timestamps: {flat}")  # -s
    assert 0 < flat[1] <= flat[0] + 4, flat
    if backend == "local":  # the same run without dropping dead entries: the state follows the stream
        import obda.execution.engine as engine

        monkeypatch.setattr(engine, "expire", lambda rel, expiry, closed_upto: 0)
        grown = [_run(demo, tmp_path / "noexpiry", BAND, n).metrics.synopsis_entries for n in (small, large)]
        print(f"without expiry: {grown}")
        assert grown[1] >= 5 * grown[0] and grown[1] > 5 * flat[1], (grown, flat)
