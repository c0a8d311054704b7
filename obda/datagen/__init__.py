"""Deterministic, seeded data for the turbine demo (and any sources catalog).

* :func:`generate_rows` — rows in memory (:class:`Dataset`), e.g. to load
  into DuckDB / SQLite with :meth:`Dataset.load_into`;
* :func:`generate` — the same rows written as CSV or Parquet files, one
  directory per table, streams split into ``files`` parts in time order;
* :func:`main_generate` — the ``obda generate`` command.

Same arguments and seed → the same rows and byte-identical files.
"""

from obda.datagen.dataset import Dataset, TableRows, format_timestamp
from obda.datagen.generator import DEFAULT_START, DEFAULT_STEP, GeneratorConfig, generate_dataset, generate_rows
from obda.datagen.writer import (
    GeneratedData,
    GeneratedTable,
    ProjectPaths,
    arrow_schema,
    generate,
    main_generate,
    read_project_paths,
    write_dataset,
)

__all__ = [
    "DEFAULT_START",
    "DEFAULT_STEP",
    "Dataset",
    "GeneratorConfig",
    "TableRows",
    "GeneratedData",
    "GeneratedTable",
    "ProjectPaths",
    "arrow_schema",
    "format_timestamp",
    "generate",
    "generate_dataset",
    "generate_rows",
    "main_generate",
    "read_project_paths",
    "write_dataset",
]
