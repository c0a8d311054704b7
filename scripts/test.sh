#!/usr/bin/env bash
# Set up (if needed) and run the default test suite (slow tests and benchmarks excluded).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/python -m pytest --durations=30 "$@"
