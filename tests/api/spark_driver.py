"""Run one continuous query through the HTTP API on a Spark master; print the answers as JSON.

    python spark_driver.py WORKSPACE MASTER QUERY_FILE LAST_TIMESTAMP_MICROS

Used by test_spark_cluster.py in a fresh process per master (a JVM holds one
SparkContext, bound to one master).  The query runs until the last fed
timestamp closed (idle timeout), then its answers are paged out.
"""

from __future__ import annotations

import json
import sys
import time
import warnings
from pathlib import Path

warnings.simplefilter("ignore")


def main(workspace: str, master: str, query_file: str, last_ts: str) -> None:
    here = Path(__file__).resolve()  # tests/api, tests (pytest's pythonpath) and the repository
    sys.path[:0] = [str(here.parent), str(here.parents[1]), str(here.parents[2])]
    from fastapi.testclient import TestClient

    from api import create_app
    from apikit import AUTH, settings_for

    query = Path(query_file).read_text()
    app = create_app(settings_for(Path(workspace), backend="spark", master=master, trigger_interval=0.2))
    with TestClient(app) as c:
        q = c.post("/v1/queries", json={"name": "cluster", "query": query, "idle_timeout": 1}, headers=AUTH).json()
        started = c.post(f"/v1/queries/{q['id']}/start", headers=AUTH)
        assert started.status_code == 200, started.text
        t0 = time.monotonic()
        end = t0 + 180
        while True:
            info = c.get(f"/v1/queries/{q['id']}", headers=AUTH).json()
            assert info["status"] == "running", info
            m = info["metrics"]
            if m["closed_upto"] == int(last_ts):
                break
            assert time.monotonic() < end, f"timestamps did not close: {m}"
            time.sleep(0.2)
        c.post(f"/v1/queries/{q['id']}/stop", headers=AUTH)
        print(f"driver: {time.monotonic() - t0:.1f} s to close every timestamp", file=sys.stderr)
        items = c.get(f"/v1/queries/{q['id']}/results", params={"limit": 1000}, headers=AUTH).json()["items"]
        from pyspark import SparkContext

        print(json.dumps({"master": SparkContext._active_spark_context.master, "metrics": m,
                          "answers": [[a["emitted_at"], a["binding"]] for a in items]}))


if __name__ == "__main__":
    main(*sys.argv[1:5])
