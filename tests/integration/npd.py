"""The NPD benchmark subset (../shared/testdata/npd) as an obda project."""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def npd_dir() -> Path:
    env = os.environ.get("OBDA_NPD_DIR")
    if env:
        return Path(env)
    from shared_data import TESTDATA

    return TESTDATA / "npd"


def load_npd(validate: bool = False):
    """Ontology + mappings + a static sources catalog derived from the PostgreSQL schema."""
    from obda.mapping.ddl import sources_from_ddl
    from obda.project import Project

    d = npd_dir()
    schema = d / "npd-schema.psql"
    sources = sources_from_ddl(schema.read_text(encoding="utf-8"), "postgres", file=str(schema))
    return Project.from_files(
        [d / "npd-v2-ql.owl"], [d / "npd-v2-ql.r2rml.ttl"], sources, profile="lenient", name="npd", validate=validate
    )
