#!/usr/bin/env bash
# The HTTP service end to end on the turbine demo:
#   1. copy the demo project into a fresh workspace (var/serve-demo) and write its static tables,
#   2. start `obda serve` (uvicorn) on 127.0.0.1 in the background,
#   3. register a bounded continuous query with the bearer token (curl) and start it,
#   4. feed the demo streams: a new part file per stream every few seconds (python -m api.feeder),
#   5. print the curl lines to watch the answers live (SSE) and page through them, show some live answers,
#   6. after DURATION seconds stop everything (DURATION=0: run until Ctrl-C).
#
# Environment: PORT (8000), OBDA_TOKEN (random), BACKEND (spark | local), OBDA_SPARK_MASTER (local[*]),
# DURATION (60), QUERY (a name in catalogs/demo.yaml; default hot_readings_after_maintenance),
# INTERVAL (2 s between part files), WORKSPACE (var/serve-demo), LOGDIR (var: serve-demo.log, serve-demo-feeder.log),
# PARTS (blocks fed per stream; 0 = forever, the default), POINTS (time points per block; 5),
# SOURCE (files | kafka: the streams are Kafka topics on a Tansu broker started here, scripts/demo_kafka.py).
# Expects the venv of scripts/setup.sh (scripts/demo.sh runs it first).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
PORT=${PORT:-8000}
HOST=127.0.0.1
BASE="http://$HOST:$PORT"
BACKEND=${BACKEND:-spark}
DURATION=${DURATION:-60}
QUERY=${QUERY:-hot_readings_after_maintenance}
INTERVAL=${INTERVAL:-2}
WORKSPACE=${WORKSPACE:-var/serve-demo}
LOGDIR=${LOGDIR:-var}
PARTS=${PARTS:-0}
POINTS=${POINTS:-5}
SOURCE=${SOURCE:-files}
TOKEN=${OBDA_TOKEN:-$($PY -c 'import secrets; print(secrets.token_urlsafe(18))')}
AUTH="Authorization: Bearer $TOKEN"

pids=()
broker=
cleanup() {
  [ -n "$broker" ] && kill -9 "$broker" 2>/dev/null || true  # memory storage: nothing to keep
  for pid in "${pids[@]:-}"; do
    [ -n "$pid" ] && kill "$pid" 2>/dev/null || true
  done
  wait 2>/dev/null || true
}
trap cleanup EXIT
trap 'exit 130' INT TERM

echo "== workspace $WORKSPACE: a copy of demo/ with its own data folder"
rm -rf "$WORKSPACE"
if [ "$SOURCE" = kafka ]; then
  TANSU=$($PY scripts/demo_kafka.py binary)
  KAFKA="127.0.0.1:$($PY scripts/demo_kafka.py port)"
  mkdir -p "$LOGDIR"
  echo "== starting a Tansu Kafka-protocol broker on $KAFKA (memory storage; log $LOGDIR/serve-demo-tansu.log)"
  "$TANSU" broker --listener-url "tcp://$KAFKA" --advertised-listener-url "tcp://$KAFKA" \
    --storage-engine memory://tansu/ >"$LOGDIR/serve-demo-tansu.log" 2>&1 &
  broker=$!
  $PY scripts/demo_kafka.py wait --bootstrap "$KAFKA"
  $PY scripts/demo_kafka.py prepare --project demo --workspace "$WORKSPACE" --bootstrap "$KAFKA"
else
  $PY -m api.feeder --project demo --workspace "$WORKSPACE" --static-only
fi

echo "== starting obda serve on $BASE (backend: $BACKEND${OBDA_SPARK_MASTER:+, master $OBDA_SPARK_MASTER})"
mkdir -p "$LOGDIR"
OBDA_TOKEN="$TOKEN" OBDA_TRIGGER_INTERVAL=0.5 .venv/bin/obda serve --project "$WORKSPACE" --host "$HOST" --port "$PORT" \
  --backend "$BACKEND" >"$LOGDIR/serve-demo.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 120); do
  curl -sf "$BASE/readyz" >/dev/null 2>&1 && break
  if ! kill -0 "${pids[0]}" 2>/dev/null; then cat "$LOGDIR/serve-demo.log"; echo "serve-demo: the server did not start" >&2; exit 1; fi
  sleep 0.5
done
curl -sf "$BASE/readyz" >/dev/null || { cat "$LOGDIR/serve-demo.log"; echo "serve-demo: the server is not ready" >&2; exit 1; }

echo "== registering the bounded query '$QUERY' (catalogs/demo.yaml)"
BODY=$($PY - "$QUERY" <<'PY'
import json, sys, yaml
name = sys.argv[1]
entry = next(e for e in yaml.safe_load(open("catalogs/demo.yaml")) if e["name"] == name)
print(json.dumps({"name": name, "query": entry["query"], "idle_timeout": 5}))
PY
)
CREATED=$(curl -sS -X POST "$BASE/v1/queries" -H "$AUTH" -H "Content-Type: application/json" -d "$BODY")
ID=$(printf '%s' "$CREATED" | $PY -c 'import json, sys; d = json.load(sys.stdin); print(d.get("id") or sys.exit("register failed: " + json.dumps(d)))')
printf '%s' "$CREATED" | $PY -c '
import json, sys
d = json.load(sys.stdin)
print("   id:", d["id"]); print("   verdict:", d["verdict"]); print("   SQL:", d["sql"])'

echo "== starting it (the first start warms up Spark; this can take a while)"
curl -sS -X POST "$BASE/v1/queries/$ID/start" -H "$AUTH" --max-time 600 \
  | $PY -c 'import json, sys; d = json.load(sys.stdin); print("   status:", d.get("status"), d.get("detail", ""))'

if [ "$SOURCE" = kafka ]; then
  echo "== feeding the demo streams: a block of records per topic every ${INTERVAL}s (Kafka, $KAFKA)"
  $PY scripts/demo_kafka.py feed --workspace "$WORKSPACE" --bootstrap "$KAFKA" --interval "$INTERVAL" \
    --points "$POINTS" --parts "$PARTS" >"$LOGDIR/serve-demo-feeder.log" 2>&1 &
else
  echo "== feeding the demo streams: a part file per stream every ${INTERVAL}s"
  $PY -m api.feeder --project "$WORKSPACE" --interval "$INTERVAL" --points "$POINTS" --parts "$PARTS" \
    >"$LOGDIR/serve-demo-feeder.log" 2>&1 &
fi
pids+=($!)

cat <<EOF

Watch the answers live (Server-Sent Events):
  curl -N -H "$AUTH" $BASE/v1/queries/$ID/results/stream
Page through them:
  curl -H "$AUTH" "$BASE/v1/queries/$ID/results?after=0&limit=20"
Status and metrics:  curl -H "$AUTH" $BASE/v1/queries/$ID
API docs:            $BASE/docs        (server log: $LOGDIR/serve-demo.log)

EOF

if [ "$DURATION" = "0" ]; then
  echo "== running until Ctrl-C"
  wait
fi
echo "== live answers for ${DURATION}s:"
# no ?limit=: the stream is watched for the whole DURATION (curl's --max-time ends it)
curl -sN -H "$AUTH" --max-time "$DURATION" "$BASE/v1/queries/$ID/results/stream" | grep -E '^(id|data):' || true
echo "== metrics"
curl -sS -H "$AUTH" "$BASE/v1/queries/$ID" | $PY -c '
import json, sys
d = json.load(sys.stdin); m = d["metrics"] or {}
print("   status:", d["status"], "| answers:", d["results"], "| rows in:", m.get("rows_in"), "| state entries:", m.get("state_entries"), "| late:", m.get("late"))'
curl -sS -X POST -H "$AUTH" "$BASE/v1/queries/$ID/stop" >/dev/null
echo "== stopped; shutting down"
