#!/usr/bin/env bash
# Idempotent set-up: a Python 3.11 virtualenv in .venv with obda and its pinned
# dependencies, and a Java runtime for Spark. Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3.11}
command -v "$PY" >/dev/null 2>&1 || PY=python3
if ! command -v java >/dev/null 2>&1; then
  echo "setup: no java found; installing OpenJDK 17 (Spark needs a JRE)" >&2
  if command -v apt-get >/dev/null 2>&1; then
    apt-get update -qq && apt-get install -y -qq openjdk-17-jre-headless >/dev/null
  else
    echo "setup: please install a Java 17+ runtime" >&2; exit 1
  fi
fi
# PostgreSQL and its JDBC driver, for the JDBC static-table test (tests/sources/test_jdbc_postgres.py,
# skipped with the reason where they cannot be installed). Installed only when missing.
pg_missing=()
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || pg_missing+=(postgresql)
[ -f /usr/share/java/postgresql.jar ] || pg_missing+=(libpostgresql-jdbc-java)
if [ ${#pg_missing[@]} -gt 0 ]; then
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    echo "setup: installing ${pg_missing[*]} (JDBC tests)" >&2
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${pg_missing[@]}" >/dev/null; } \
      || echo "setup: could not install ${pg_missing[*]}; the PostgreSQL JDBC test will be skipped" >&2
  else
    echo "setup: ${pg_missing[*]} missing (needs apt-get as root); the PostgreSQL JDBC test will be skipped" >&2
  fi
fi
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
stamp=.venv/.obda-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  .venv/bin/python -m pip install -q --upgrade pip
  .venv/bin/python -m pip install -q -e '.[test]'
  touch "$stamp"
fi
