"""Shared fixtures: a session-scoped local SparkSession for tests marked ``@pytest.mark.spark``."""

import os

import pytest


@pytest.fixture(scope="session")
def spark():
    """local[2], 2 shuffle partitions, UI off, UTC session time zone, quiet logs."""
    # the venv's interpreter (not its realpath: that is the base Python, without pyarrow)
    os.environ.setdefault("PYSPARK_PYTHON", os.sys.executable)
    from pyspark.sql import SparkSession

    session = (
        SparkSession.builder.master("local[2]")
        .appName("obda-tests")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.extraJavaOptions", "-Duser.timezone=UTC -Dlog4j2.level=ERROR")
        .config("spark.sql.csv.parser.columnPruning.enabled", "false")
        # hundreds of queries run in this one session: keep the status store small (the executor's
        # plans are large) and give the driver JVM, which is also the executor, room. The session's heap
        # grows by a few MB per query even after a full GC (measured the same before the interval-join
        # work), so 2g ran out of aggregation memory once the suite passed ~600 Spark queries.
        .config("spark.driver.memory", "3g")
        .config("spark.sql.ui.retainedExecutions", "20")
        .config("spark.ui.retainedJobs", "50")
        .config("spark.ui.retainedStages", "50")
        # the PostgreSQL JDBC driver (scripts/setup.sh installs it) for tests/sources/test_jdbc_postgres.py
        .config("spark.jars", os.environ.get("OBDA_SPARK_JARS") or ("/usr/share/java/postgresql.jar" if os.path.isfile("/usr/share/java/postgresql.jar") else ""))
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture(scope="session")
def demo():
    """The turbine demo project (demo/), loaded once."""
    from pathlib import Path

    from obda.project import Project

    return Project.load(Path(__file__).resolve().parents[1] / "demo")
