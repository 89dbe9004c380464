#!/usr/bin/env bash
# What a broker pays per site: `POST /api/v1/whatif` latency on a live `baton serve` (dry-run
# executor, the superpod-h100 preset: 1,024 GPUs, the daemon's scheduler config) with a deep
# queue. Submits JOBS jobs of 8-256 GPUs and 1-10 h (the same sequence every run), waits for the
# daemon's forecast, then times ASKS what-ifs (curl's time_total: connect, request, answer) and
# prints the median and p90 in ms, with the queue depth they were measured at.
# Usage: bench/federation/whatif_http.sh [BATON_BINARY] [JOBS] [ASKS]
# (default build/release/src/cli/baton, else build/dev/src/cli/baton; 600 jobs; 200 asks)
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
source "$root/bench/lib.sh"
baton=$(bench_baton "$root" "${1:-}")
jobs=${2:-600}
asks=${3:-200}
work=$(mktemp -d -t baton-whatif.XXXXXX)
pid=""
cleanup() {
  [[ -n $pid ]] && kill -TERM "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
token="admin-$(od -An -tx1 -N12 /dev/urandom | tr -d ' \n')"
printf 'principals:\n  - {name: ops, role: admin, token: "%s"}\n' "$token" >"$work/auth.yaml"
"$baton" serve --preset superpod-h100 --executor dry-run --speedup 1 --listen 127.0.0.1:0 \
  --db "$work/baton.db" --auth "$work/auth.yaml" >"$work/serve.log" 2>&1 &
pid=$!
port=""
for _ in $(seq 300); do
  port=$(sed -nE 's/.*listening on http:\/\/127\.0\.0\.1:([0-9]+).*/\1/p' "$work/serve.log" | head -1)
  [[ -n $port ]] && break
  sleep 0.1
done
[[ -n $port ]] || { echo "the daemon did not start"; cat "$work/serve.log"; exit 1; }
url="http://127.0.0.1:$port"

sizes=(8 8 16 16 32 64 128 256)
tenants=(team-a team-b research)
RANDOM=7
cfg="$work/submit.cfg"
: >"$cfg"
for ((i = 0; i < jobs; i++)); do
  ((i > 0)) && echo "next" >>"$cfg"
  printf 'url = "%s/api/v1/jobs"\nrequest = "POST"\nheader = "Authorization: Bearer %s"\nheader = "Content-Type: application/json"\ndata = "{\\"name\\": \\"j%d\\", \\"tenant\\": \\"%s\\", \\"gpus\\": %d, \\"estimated_runtime_s\\": %d}"\nwrite-out = "%%{http_code}\\n"\noutput = "/dev/null"\n' \
    "$url" "$token" "$i" "${tenants[$((RANDOM % 3))]}" "${sizes[$((RANDOM % 8))]}" \
    $((3600 + RANDOM % 32400)) >>"$cfg"
done
curl -s --no-progress-meter --parallel --parallel-max 8 -K "$cfg" | sort | uniq -c | grep -v ' 201$' &&
  { echo "a submission was not accepted"; exit 1; }
sleep 3  # a scheduling cycle and its forecast
queued=$(curl -s -H "Authorization: Bearer $token" "$url/api/v1/jobs?state=queued&limit=1000" |
  grep -o '"state": *"queued"' | wc -l)
running=$(curl -s -H "Authorization: Bearer $token" "$url/api/v1/jobs?state=running&limit=1000" |
  grep -o '"state": *"running"' | wc -l)

body='{"name": "probe", "tenant": "team-a", "gpus": 64, "estimated_runtime_s": 7200}'
: >"$work/times"
for ((i = 0; i < asks; i++)); do
  curl -s -o "$work/answer.json" -w '%{time_total}\n' -X POST -H "Authorization: Bearer $token" \
    -H "Content-Type: application/json" -d "$body" "$url/api/v1/whatif" >>"$work/times"
done
grep -q '"estimated_start"' "$work/answer.json" || { echo "no estimated start:"; cat "$work/answer.json"; exit 1; }
sort -n "$work/times" | awk -v q="$queued" -v r="$running" -v n="$asks" '
  { t[NR] = $1 * 1000 }
  END { printf "what-if over HTTP on 1,024 GPUs, %d running, %d queued: median %.2f ms, p90 %.2f ms (%d asks)\n",
        r, q, t[int((NR + 1) / 2)], t[int(NR * 0.9 + 0.5)], n }'
echo "last answer: $(head -c 300 "$work/answer.json")"
