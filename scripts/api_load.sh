#!/usr/bin/env bash
# Load test of `tessera serve` on loopback with wrk (Debian package `wrk`): sustained job
# submissions, then listing, each for DURATION seconds over CONNS connections.
#   scripts/api_load.sh [TESSERA_BINARY] [DURATION] [CONNS] [THREADS]
# TESSERA_SERVE_FLAGS adds flags to the server (e.g. --sync-full).
# The server gets 1 virtual GPU and one job that holds it, so every submission stays pending:
# the queue grows by the whole run (tens of thousands of jobs), which is the hard case for the
# scheduler cycle that runs beside the API.
set -euo pipefail
BIN=${1:-build/release/src/tessera}
DURATION=${2:-20}
CONNS=${3:-16}
THREADS=${4:-2}
command -v wrk >/dev/null || { echo "needs wrk (apt-get install wrk)" >&2; exit 2; }
DIR=$(mktemp -d)
trap 'kill $SERVER 2>/dev/null || true; wait $SERVER 2>/dev/null || true; rm -rf "$DIR"' EXIT
"$BIN" serve --listen 127.0.0.1:0 --addr-file "$DIR/addr" --db "$DIR/tessera.db" \
  --virtual-gpus 1 --admin-token load-admin --max-pending-per-tenant 100000000 \
  --max-submissions-per-second 0 ${TESSERA_SERVE_FLAGS:-} 2>"$DIR/serve.log" &
SERVER=$!
for _ in $(seq 100); do [ -s "$DIR/addr" ] && break; sleep 0.05; done
ADDR=$(cat "$DIR/addr")
TOKEN=$(curl -s -X POST -H 'Authorization: Bearer load-admin' -H 'Content-Type: application/json' \
  -d '{"name":"team-a"}' "http://$ADDR/v1/tenants" | sed 's/.*"token":"\([0-9a-f]*\)".*/\1/')
curl -s -o /dev/null -X POST -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json' \
  -d '{"name":"holder","command":["sleep","3600"]}' "http://$ADDR/v1/jobs"

cat >"$DIR/submit.lua" <<LUA
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer $TOKEN"
wrk.body = '{"name":"load","gang":{"min":1,"max":1},"resources":{"gpus":1},"command":["sh","-c","true"]}'
done = function(summary, latency, requests)
  io.write(string.format("non-2xx/3xx: %d\n", summary.errors.status))
end
LUA
echo "== submissions: POST /v1/jobs, $CONNS connections, ${DURATION}s"
wrk -t"$THREADS" -c"$CONNS" -d"${DURATION}s" --latency -s "$DIR/submit.lua" "http://$ADDR/v1/jobs"
JOBS=$(curl -s -H "Authorization: Bearer load-admin" "http://$ADDR/metrics" | awk '/^tessera_pending_jobs/ {print $2}')
echo "== pending jobs after the run: $JOBS"

cat >"$DIR/list.lua" <<LUA
wrk.headers["Authorization"] = "Bearer $TOKEN"
LUA
echo "== listing: GET /v1/jobs?state=pending&limit=100, $CONNS connections, ${DURATION}s"
wrk -t"$THREADS" -c"$CONNS" -d"${DURATION}s" --latency -s "$DIR/list.lua" \
  "http://$ADDR/v1/jobs?state=pending&limit=100"
echo "== scheduling cycles during the run"
curl -s -H "Authorization: Bearer load-admin" "http://$ADDR/metrics" | grep -E '^tessera_cycle_seconds_(sum|count)'
