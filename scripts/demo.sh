#!/usr/bin/env bash
# The main job on the shipped demo, on a fresh machine:
#   1. set up (.venv with the pinned dependencies, Java check),
#   2. validate the demo project and check the query catalog (compile + bounded-memory verdicts),
#   3. start the HTTP service with the demo project, feed the demo streams, register a bounded
#      continuous query and print the curl line to watch its answers live (scripts/serve_demo.sh).
# Environment: DURATION (seconds the service runs; 0 = until Ctrl-C; default 0), PORT, OBDA_TOKEN,
# BACKEND (spark | local), QUERY (a catalog name), PARTS/POINTS (how much stream data is fed) — see scripts/serve_demo.sh.
# SOURCE=kafka: the same demo with its streams read from Kafka topics of a Tansu broker started on 127.0.0.1
# (the stream rows are published there instead of written as files; scripts/demo_kafka.py). SOURCE=files: the default.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
OBDA=.venv/bin/obda
case "${SOURCE:-files}" in
  files) ;;
  kafka) .venv/bin/python scripts/demo_kafka.py binary >/dev/null ;;  # the broker is there (else: run setup.sh)
  *) echo "demo: SOURCE must be files or kafka, not '$SOURCE'" >&2; exit 1 ;;
esac
echo "== validating the demo project (ontology, sources, mappings)"
$OBDA validate --project demo
echo "== checking the query catalog: every query compiled, analysed, verdict as expected"
$OBDA catalog check catalogs/demo.yaml --project demo
export DURATION=${DURATION:-0}
exec bash scripts/serve_demo.sh
