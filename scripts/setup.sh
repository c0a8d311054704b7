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
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
stamp=.venv/.obda-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  .venv/bin/python -m pip install -q --upgrade pip
  .venv/bin/python -m pip install -q -e '.[test]'
  touch "$stamp"
fi
