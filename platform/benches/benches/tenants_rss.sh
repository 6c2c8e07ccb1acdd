#!/bin/bash
# Resident memory per tenant that publishes a Language another tenant
# already uses (docs/architecture.md, "Memory per tenant").
#
# Starts the real server (SQLite in a fresh data folder, an operator token,
# loopback only), creates tenants through the admin API and uploads the
# same component to each; samples VmRSS after 50 tenants and after 50+N,
# and prints (ΔRSS ÷ N) as bytes per additional tenant. The first 50 keep
# start-up and first-load transients out of the figure. Then restarts the
# server on the same data folder (the tenants loaded from the store, the
# compiled code from its cache) and prints its settled RSS, split into
# anonymous memory (the heap) and file-backed pages (the binary's code and
# the mapped compiled components): the idle RSS of a node with 50+N tenants.
#
#   platform/benches/benches/tenants_rss.sh [BINARY] [COMPONENT.wasm] [N] [PORT] [SERVE ARGUMENTS…]
#
# Defaults: target/debug/pilotage, the built workflow/v1 guest, 200, 18490;
# arguments after the port go to `pilotage serve` (e.g. `--demo-postgres off`).
set -eu
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BIN=${1:-${CARGO_TARGET_DIR:-$ROOT/target}/debug/pilotage}
WASM=${2:-$ROOT/target/guests/wasm32-wasip2/guest/workflow.wasm}
N=${3:-200}
PORT=${4:-18490}
EXTRA=("${@:5}")
DIR=$(mktemp -d)
TOKEN=tenants-rss-bench-token
ADMIN=http://127.0.0.1:$PORT/admin/v1
serve() {
  PILOTAGE_ADMIN_TOKEN=$TOKEN "$BIN" serve --listen 127.0.0.1:$PORT --data-dir "$DIR" "${EXTRA[@]}" >>"$DIR/log" 2>&1 &
  PID=$!
  for _ in $(seq 300); do
    [ "$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $TOKEN" $ADMIN/tenants)" = 200 ] && break
    sleep 0.2
  done
}
serve
trap 'kill $PID 2>/dev/null; wait $PID 2>/dev/null; rm -rf "$DIR"' EXIT
rss_kb() { awk '/VmRSS/ {print $2}' /proc/$PID/status; }
publish() {
  for i in $(seq "$1" "$2"); do
    curl -s -o /dev/null -w 'tenant %{http_code}, ' -H "Authorization: Bearer $TOKEN" \
      -H 'content-type: application/json' -d "{\"id\":\"t$i\"}" $ADMIN/tenants
    curl -s -o /dev/null -w 'upload %{http_code}\n' -H "Authorization: Bearer $TOKEN" \
      -H 'content-type: application/wasm' --data-binary @"$WASM" $ADMIN/tenants/t$i/languages
  done | sort | uniq -c
}
publish 1 50
sleep 10
BEFORE=$(rss_kb)
publish 51 $((50 + N))
sleep 10
AFTER=$(rss_kb)
echo "RSS after 50 tenants: ${BEFORE} kB; after $((50 + N)): ${AFTER} kB"
echo "per additional tenant: $(( (AFTER - BEFORE) * 1024 / N )) bytes"
kill $PID
wait $PID 2>/dev/null || true
serve
sleep 10
awk -v n=$((50 + N)) '/^VmRSS/ {t=$2} /^RssAnon/ {a=$2} /^RssFile/ {f=$2}
  END {printf "after a restart with %d tenants: RSS %d kB (anonymous %d kB, file-backed %d kB)\n", n, t, a, f}' /proc/$PID/status
