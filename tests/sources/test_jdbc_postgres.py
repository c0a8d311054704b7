"""JDBC static tables against a real PostgreSQL server started here (Debian's `postgresql` and
`libpostgresql-jdbc-java`, installed by scripts/setup.sh): a static table read over JDBC, joined with a CSV
stream, gives the same answers as the CSV version of the table."""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "api"))
from apikit import BOUNDED_JOIN, make_workspace  # noqa: E402

JAR = os.environ.get("OBDA_SPARK_JARS") or "/usr/share/java/postgresql.jar"


def pg_bin(name: str) -> str | None:
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    return found[-1] if found else shutil.which(name)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def postgres():
    """A throw-away PostgreSQL cluster on 127.0.0.1 (trust auth, user obda): yields (port, psql command)."""
    initdb, pg_ctl, psql = pg_bin("initdb"), pg_bin("pg_ctl"), pg_bin("psql")
    if not (initdb and pg_ctl and psql):
        pytest.skip("PostgreSQL is not installed and could not be (scripts/setup.sh installs Debian's postgresql)")
    if not Path(JAR).is_file():
        pytest.skip(f"no PostgreSQL JDBC driver at {JAR} (scripts/setup.sh installs libpostgresql-jdbc-java)")
    base = Path(tempfile.mkdtemp(prefix="obda-pg-"))
    run_as: list[str] = []
    if os.geteuid() == 0:  # the server refuses to run as root
        try:
            pw = pwd.getpwnam("postgres")
        except KeyError:
            pytest.skip("running as root and there is no 'postgres' user to run the server as")
        os.chown(base, pw.pw_uid, pw.pw_gid)
        run_as = ["runuser", "-u", "postgres", "--"]
    port = free_port()
    data = base / "data"
    subprocess.run(run_as + [initdb, "-D", str(data), "-A", "trust", "-U", "obda", "--no-sync"], check=True,
                   capture_output=True)
    subprocess.run(run_as + [pg_ctl, "-D", str(data), "-l", str(base / "log"), "-w", "-t", "60", "-o",
                             f"-p {port} -k {base} -c listen_addresses=127.0.0.1 -c fsync=off", "start"],
                   check=True, capture_output=True)
    try:
        yield port, [psql, "-h", "127.0.0.1", "-p", str(port), "-U", "obda", "-d", "postgres", "-v", "ON_ERROR_STOP=1"]
    finally:
        subprocess.run(run_as + [pg_ctl, "-D", str(data), "-m", "immediate", "stop"], capture_output=True)
        shutil.rmtree(base, ignore_errors=True)


def run_answers(ws: Path, spark) -> Counter:
    from obda.analysis import analyze
    from obda.analysis import plan_execution
    from obda.execution import ContinuousQuery, MemorySink
    from obda.project import Project

    project = Project.load(ws)
    comp = project.compile(BOUNDED_JOIN)
    sink = MemorySink()
    cq = ContinuousQuery(plan_execution(comp, project.sources, analyze(comp, project.sources)), base_dir=project.directory,
                         sink=sink, spark=spark, backend="spark")
    try:
        cq.run_until_exhausted()
    finally:
        cq.close()
    return Counter(tuple(sorted(a["binding"].items())) for a in sink.drain())


@pytest.mark.spark
def test_jdbc_static_table_joined_with_csv_stream_equals_its_csv_version(tmp_path, spark, postgres):
    if JAR not in (spark.conf.get("spark.jars", "") or ""):
        pytest.skip(f"the test SparkSession was created without {JAR} (tests/conftest.py adds it when present)")
    port, psql = postgres
    ws, _ = make_workspace(tmp_path / "ws", blocks=3, seed=4)
    from_csv = run_answers(ws, spark)
    assert sum(from_csv.values()) > 0

    sensor_csv = ws / "data" / "sensor" / "part-00000.csv"
    subprocess.run(psql + ["-c", "CREATE TABLE sensor (id bigint PRIMARY KEY, turbine_id bigint, kind text)",
                           "-c", f"\\copy sensor FROM '{sensor_csv}' WITH (FORMAT csv, HEADER true)"],
                   check=True, capture_output=True)
    shutil.move(str(ws / "data" / "sensor"), str(tmp_path / "sensor-csv"))  # only PostgreSQL has the table now
    text = (ws / "sources.yaml").read_text()
    text = text.replace(
        "    location: data/sensor\n    format: csv\n",
        f"    location: jdbc:postgresql://127.0.0.1:{port}/postgres\n    format: jdbc\n"
        "    options: {dbtable: sensor, user: obda, driver: org.postgresql.Driver}\n",
    )
    assert "format: jdbc" in text
    (ws / "sources.yaml").write_text(text)

    from typer.testing import CliRunner

    from obda.cli import app

    r = CliRunner().invoke(app, ["validate", "--project", str(ws)])
    assert r.exit_code == 0, r.output
    from_jdbc = run_answers(ws, spark)
    assert from_jdbc == from_csv
