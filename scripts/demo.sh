#!/usr/bin/env bash
# The demo command (README): installs the Debian packages, builds the release preset, shows the
# built-in cluster briefly, then runs the scheduling daemon on it for ~20 s with the dry-run
# executor (a simulated cluster in accelerated time) while --demo submits synthetic jobs from
# three tenants through the API, and shows what the client (baton jobs, job, nodes, top) and
# /metrics say. The daemon is stopped
# (SIGTERM, by PID) when the script exits, whatever happens.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install-deps.sh
cmake --preset release >/dev/null
cmake --build --preset release --target baton
baton=build/release/src/cli/baton

echo "\$ baton topo --preset superpod-h100 | head -8"
$baton topo --preset superpod-h100 | head -8 || true
echo

work=$(mktemp -d -t baton-demo.XXXXXX)
token="demo-admin-$(od -An -tx1 -N12 /dev/urandom | tr -d ' \n')"
cat >"$work/auth.yaml" <<EOF
principals:
  - {name: ops, role: admin, token: "$token"}
EOF
pid=""
cleanup() {
  if [[ -n $pid ]] && kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid"
    wait "$pid" || true
    echo "daemon (pid $pid) stopped; its last lines:"
    tail -n 3 "$work/serve.log"
  fi
  rm -rf "$work"
}
trap cleanup EXIT

echo "\$ baton serve --preset superpod-h100 --executor dry-run --speedup 120 --demo \\"
echo "    --listen 127.0.0.1:0 --db $work/baton.db --auth $work/auth.yaml"
BATON_TOKEN=$token $baton serve --preset superpod-h100 --executor dry-run --speedup 120 --demo \
  --listen 127.0.0.1:0 --db "$work/baton.db" --auth "$work/auth.yaml" >"$work/serve.log" 2>&1 &
pid=$!

port=""
for _ in $(seq 100); do
  port=$(sed -nE 's/.*listening on http:\/\/127\.0\.0\.1:([0-9]+).*/\1/p' "$work/serve.log" | head -1)
  [[ -n $port ]] && break
  kill -0 "$pid" 2>/dev/null || { cat "$work/serve.log"; exit 1; }
  sleep 0.1
done
[[ -n $port ]] || { echo "the daemon did not start listening"; cat "$work/serve.log"; exit 1; }
api="http://127.0.0.1:$port"
echo "daemon pid $pid listening on $api; letting the demo run for 20 s..."
sleep 20

# What an operator sees, through the client in the same binary (BATON_URL / BATON_TOKEN).
export BATON_URL=$api BATON_TOKEN=$token
show() {
  echo "\$ baton $*"
  $baton "$@" || true
  echo
}
show jobs --state queued --limit 8
show job 1
show nodes
show top -n 1

echo "\$ curl -s -H 'Authorization: Bearer …' $api/metrics | grep ^baton_ (no buckets)"
curl -sf -H "Authorization: Bearer $token" "$api/metrics" |
  grep -E '^baton_(jobs|gpus|nodes|scheduler_(queue|placements|preemptions|requeues|cycle_duration_seconds_(sum|count)))' || true
echo
echo "The daemon stops when this script ends. To keep one to explore (the dashboard at its URL,"
echo "signing in with the token; the client with BATON_URL and BATON_TOKEN):"
echo "  BATON_TOKEN=\$TOKEN $baton serve --preset superpod-h100 --demo --auth auth.yaml"
echo "  (auth.yaml: principals: [{name: ops, role: admin, token: \$TOKEN}]; docs/serve.md)"
