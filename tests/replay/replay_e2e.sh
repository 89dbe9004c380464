#!/usr/bin/env bash
# The daemon replayed in the simulator, end to end: starts a real `baton serve` (dry-run
# executor, embedded SQLite, the 16-node test cluster, its default scheduler config), submits
# JOBS jobs of mixed sizes, runtimes, tenants and priorities through the HTTP API in bursts,
# cancels some (queued and running), drains a node and resumes it midway, waits until every job
# has ended (restarting the daemon once on the way), exports the daemon's scheduling history (`baton export`) and replays it
# (`baton sim --replay-daemon`), which must reproduce every placement. Then a what-if replay
# under strict FIFO must run too.
#
# Usage: replay_e2e.sh BATON_BINARY SOURCE_DIR [JOBS] [SPEEDUP]
#   JOBS     jobs to submit (default 300; bench/server/replay_10k.sh runs 10,000)
#   SPEEDUP  dry-run simulated seconds per real second (default 100: jobs queue)
# KEEP=DIR keeps the database and the history in DIR.
set -uo pipefail
baton=$1
src=$2
jobs=${3:-300}
speedup=${4:-100}
source "$src/tests/lib/e2e.sh"

work=$(mktemp -d -t baton-replay.XXXXXX)
pid=""
cleanup() {
  if [[ -n $pid ]] && kill -0 "$pid" 2>/dev/null; then kill -TERM "$pid"; wait "$pid" 2>/dev/null; fi
  if [[ -n ${KEEP:-} ]]; then mkdir -p "$KEEP" && cp "$work"/baton.db "$work"/history.jsonl "$KEEP"/ 2>/dev/null; fi
  rm -rf "$work"
}
trap cleanup EXIT
token=$(new_token admin)
cat >"$work/auth.yaml" <<EOT
principals:
  - {name: ops, role: admin, token: "$token"}
EOT
start() {  # a daemon on the database; sets pid, port, url
  "$baton" serve --topology "$src/data/clusters/fake16.yaml" --executor dry-run --speedup "$speedup" \
    --listen 127.0.0.1:0 --db "$work/baton.db" --auth "$work/auth.yaml" >"$work/serve.log" 2>&1 &
  pid=$!
  port=$(listening_port "$work/serve.log" "$pid") || exit 1
  url="http://127.0.0.1:$port"
}
start
export BATON_URL=$url BATON_TOKEN=$token XDG_CONFIG_HOME="$work/config"

# One curl per burst: a config file of requests on one keep-alive connection per worker.
sizes=(1 1 2 2 4 4 8 8 8 16 16 32)
tenants=(team-a team-b research)
RANDOM=42  # the same job sequence every run
submit_burst() {  # submit_burst FIRST COUNT
  local first=$1 count=$2 i cfg="$work/burst.cfg"
  : >"$cfg"
  for ((i = first; i < first + count; i++)); do
    ((i > first)) && echo "next" >>"$cfg"
    local gpus=${sizes[$((RANDOM % ${#sizes[@]}))]} tenant=${tenants[$((RANDOM % 3))]}
    local runtime=$((30 + RANDOM % 300)) priority=0
    ((RANDOM % 10 == 0)) && priority=100
    printf 'url = "%s/api/v1/jobs"\nrequest = "POST"\nheader = "Authorization: Bearer %s"\nheader = "Content-Type: application/json"\ndata = "{\\"name\\": \\"r%d\\", \\"tenant\\": \\"%s\\", \\"gpus\\": %d, \\"priority\\": %d, \\"estimated_runtime_s\\": %d, \\"grace_period_s\\": 30}"\nwrite-out = "%%{http_code}\\n"\noutput = "/dev/null"\n' \
      "$url" "$token" "$i" "$tenant" "$gpus" "$priority" "$runtime" >>"$cfg"
  done
  curl -s --no-progress-meter --parallel --parallel-max 8 -K "$cfg" | sort | uniq -c | grep -v ' 201$' && return 1
  return 0
}

bursts=10
per=$(((jobs + bursts - 1) / bursts))
submitted=0
cancelled=0
node=n05
for ((b = 0; b < bursts && submitted < jobs; b++)); do
  n=$((jobs - submitted < per ? jobs - submitted : per))
  submit_burst "$submitted" "$n" || { echo "FAIL: a submission was not accepted"; exit 1; }
  submitted=$((submitted + n))
  sleep 0.5
  # Cancel a few of this burst's jobs: some still queued, some running by now.
  last=$(curl -s -H "Authorization: Bearer $token" "$url/api/v1/jobs?limit=1000&state=queued" \
    | jq -r '.jobs[].id' | tail -3)
  running=$(curl -s -H "Authorization: Bearer $token" "$url/api/v1/jobs?limit=1000&state=running" \
    | jq -r '.jobs[].id' | head -2)
  for id in $last $running; do
    curl -s -o /dev/null -X DELETE -H "Authorization: Bearer $token" "$url/api/v1/jobs/$id" &&
      cancelled=$((cancelled + 1))
  done
  if ((b == bursts / 3)); then "$baton" drain "$node" --reason "replay test" >/dev/null || exit 1; fi
  if ((b == 2 * bursts / 3)); then "$baton" resume "$node" >/dev/null || exit 1; fi
  if ((b == bursts / 2)); then  # a daemon restart: the history gets a second run
    kill -TERM "$pid"; wait "$pid" 2>/dev/null
    start
    export BATON_URL=$url
  fi
done
echo "submitted $submitted jobs, cancel requests $cancelled, drained and resumed $node, restarted the daemon once"

# Wait until nothing is queued, running or being cancelled.
count() {
  curl -s -H "Authorization: Bearer $token" "$url/api/v1/jobs?limit=1000&state=$1" | jq '.jobs | length'
}
open=-1
for _ in $(seq 6000); do
  open=$(($(count queued) + $(count running) + $(count cancelling)))
  [[ $open -eq 0 ]] && break
  sleep 0.2
done
check "every job ended" 0 "$open"
kill -TERM "$pid"; wait "$pid" 2>/dev/null; pid=""

out=$("$baton" export --db "$work/baton.db" --out "$work/history.jsonl" 2>&1)
check "export" 0 $? "$out" '^exported [0-9]+ history line'
echo "$out"
out=$("$baton" sim --replay-daemon "$work/history.jsonl" 2>&1)
rc=$?
echo "$out"
check "replay reproduces every placement" 0 $rc "$out" 'placements identical: ([0-9]+)/\1 \(100\.00 %\)'
out=$("$baton" sim --replay-daemon "$work/history.jsonl" --policies fifo,backfill 2>&1)
rc=$?
echo "$out"
check "what-if under fifo and backfill" 0 $rc "$out" "jobs submitted +$submitted +$submitted"
finish
