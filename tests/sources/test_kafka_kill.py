"""``kill -9`` of a query reading a Kafka topic (Tansu on 127.0.0.1) at random points, with a directory sink and a
checkpoint: after restarts, every record's answers are committed exactly once (3 seeds by default, 20 slow-marked).

The query runs in a process of its own (``python tests/sources/test_kafka_kill.py <sources> <out> <ckpt> [--end]``),
stepping micro-batches while records are produced; it is killed (SIGKILL) at random times and started again from
its checkpoint; the last run reads to the end of the topic and exits."""

from __future__ import annotations

import os
import random
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _main(argv: list[str]) -> None:
    sys.path.insert(0, str(ROOT / "tests"))
    from sources.kafkakit import SQL

    from obda.analysis import plan_execution
    from obda.execution import ContinuousQuery
    from obda.execution.directory_sink import DirectorySink
    from obda.model.sources_file import load_sources

    sources, out, ckpt = map(Path, argv[:3])
    q = ContinuousQuery(plan_execution(SQL, load_sources(sources), None), base_dir=sources.parent, backend="local",
                        sink=DirectorySink(out), checkpoint_dir=ckpt, allow_unbounded=True)
    q.open()
    print("started", flush=True)
    if "--end" in argv:
        q.run_until_exhausted()
        q.close()
        print("ended", flush=True)
        return
    while True:
        if q.step() == 0:
            time.sleep(0.01)


if __name__ == "__main__":
    _main(sys.argv[1:])


from brokers import running_tansu  # noqa: E402 - (the runner above imports only what it needs)
from waiting import wait_for  # noqa: E402
from sources.kafkakit import file_answers, interleaved, kafka_sources, produce  # noqa: E402


@pytest.fixture(scope="module")
def tansu():
    yield from running_tansu()


def runner(tmp: Path, *extra: str) -> subprocess.Popen:
    p = subprocess.Popen([sys.executable, __file__, str(tmp / "sources.yaml"), str(tmp / "out"), str(tmp / "ckpt"),
                          *extra], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    line = p.stdout.readline()
    assert line.startswith("started"), (line, p.stderr.read() if p.poll() is not None else "")
    return p


def kill_run(tmp: Path, tansu, seed: int, kills: int) -> tuple[Counter, Counter, int, int]:
    from obda.execution.committed_output import read_committed

    rnd = random.Random(seed)
    topic = f"kill-{seed}"
    tansu.create_topic(topic, partitions=3)
    items = interleaved(seed, rnd.randint(300, 500))
    kafka_sources(tmp, tansu.bootstrap, topic, f"      max_records: {rnd.choice((5, 20, 80))}\n")

    def feed():
        pace = random.Random(seed)
        sent = 0
        while sent < len(items):
            size = pace.randint(10, 60)
            produce(tansu.bootstrap, topic, items[sent:sent + size])
            sent += size
            time.sleep(pace.uniform(0.02, 0.2))

    t = threading.Thread(target=feed)
    t.start()
    killed = 0
    try:
        for k in range(kills):
            p = runner(tmp)
            if k == 0:  # the first kill after a commit (the consumer's start can outlast a short pause)
                wait_for(lambda: any((tmp / "out" / "_commits").glob("*.json")), timeout=60)
            time.sleep(rnd.uniform(0.05, 1.0))
            p.kill()  # SIGKILL: no clean-up, a micro-batch may be half done
            p.communicate()
            killed += 1
    finally:
        t.join()
    commits = len(list((tmp / "out" / "_commits").glob("*.json")))  # committed by the killed runs
    p = runner(tmp, "--end")
    _, err = p.communicate(timeout=120)
    assert p.returncode == 0, err
    got = Counter((x["emitted_at"], x["binding"]["a"], x["binding"]["c"]) for x in read_committed(tmp / "out"))
    quarantine = tmp / "ckpt" / "quarantine.jsonl"  # a record read twice after a restart would be late there
    assert not quarantine.exists() or quarantine.read_text() == "", quarantine.read_text()[:500]
    return got, file_answers(tmp / "files", [r for _, r in items]), killed, commits


@pytest.mark.parametrize("seed", [0, 1, 2] + [pytest.param(s, marks=pytest.mark.slow) for s in range(3, 20)])
def test_kill_9_during_a_kafka_run_commits_every_records_answers_once(tmp_path, tansu, seed):
    got, expected, killed, commits = kill_run(tmp_path, tansu, seed, kills=3)
    assert killed == 3 and commits > 0 and sum(expected.values()) >= 20  # the kills hit a running query
    assert got == expected
