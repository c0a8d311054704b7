"""Fixtures shared by the oracle tests: each world (a project, its tables in DuckDB, its W3C bag oracle) is built
once per session — materialising and closing a dataset is the slow part."""

from __future__ import annotations

from pathlib import Path

import pytest

from obda.project import Project

from integration.bag_oracle import BagOracle, load_csv_tables
from integration.oracle import demo_database

ROOT = Path(__file__).resolve().parents[2]
MULT = Path(__file__).resolve().parent / "multiplicity"


@pytest.fixture(scope="session")
def world():
    """The multiplicity fixture (``multiplicity/``): its project, tables and oracle."""
    project = Project.load(MULT)
    con = load_csv_tables(MULT, project.sources)
    return project, con, BagOracle.of_project(project, con)


@pytest.fixture(scope="session")
def demo_world():
    """The turbine demo over its generated data: its project, tables and oracle."""
    project = Project.load(ROOT / "demo")
    con = demo_database(project)
    return project, con, BagOracle.of_project(project, con)
