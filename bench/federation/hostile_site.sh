#!/usr/bin/env bash
# What a hostile site can cost the broker (issue 29): for each MODE of bench/federation/
# hostile_site.py (drip, hang, huge: a 1.5 GB answer, garbage, lies), a broker under
# `/usr/bin/time -v` routes JOBS jobs with a hostile site (cheaper, listed first) beside a healthy
# `baton serve` (dry-run, 16 nodes x 8 GPUs). Prints per mode: how many jobs reached the healthy
# site and how long that took (given up after 60 s), what /api/v1/sites says of the hostile
# site, the bytes of a huge answer the hostile site managed to send, and the broker's peak
# resident memory (target: under 100 MB; a dev build's AddressSanitizer adds its own).
# Usage: bench/federation/hostile_site.sh [BATON_BINARY] [JOBS] [MODES...]
# (default build/release/src/cli/baton, else build/dev/src/cli/baton; 5 jobs; every mode)
set -uo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
source "$root/bench/lib.sh"
baton=$(bench_baton "$root" "${1:-}")
jobs=${2:-5}
shift 2 2>/dev/null || shift $#
modes=("$@")
[[ ${#modes[@]} -gt 0 ]] || modes=(drip hang huge garbage lies)
work=$(mktemp -d -t baton-hostile.XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null; done
  wait 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

token="admin-$(od -An -tx1 -N12 /dev/urandom | tr -d ' \n')"
site_token="fed-$(od -An -tx1 -N12 /dev/urandom | tr -d ' \n')"
cat >"$work/auth.yaml" <<EOT
principals:
  - {name: ops, role: admin, token: "$token"}
  - {name: federation, role: broker, token: "$site_token"}
EOT
export BATON_SITE_HEALTHY_TOKEN=$site_token BATON_SITE_HOSTILE_TOKEN=hostile-gets-its-own

port_of() {  # port_of LOG: the port a daemon logged it listens on
  for _ in $(seq 600); do
    p=$(sed -nE 's/.*listening on http:\/\/127\.0\.0\.1:([0-9]+).*/\1/p' "$1" | head -1)
    [[ -n $p ]] && { echo "$p"; return 0; }
    sleep 0.1
  done
  return 1
}

"$baton" serve --topology "$root/data/clusters/fake16.yaml" --executor dry-run --speedup 1 \
  --listen 127.0.0.1:0 --db "$work/healthy.db" --auth "$work/auth.yaml" >"$work/healthy.log" 2>&1 &
pids+=($!)
healthy=$(port_of "$work/healthy.log") || { echo "the healthy site did not start"; exit 1; }
echo "healthy site: baton serve (dry-run, fake16) on 127.0.0.1:$healthy; $jobs jobs per mode"
printf '| mode | jobs at the healthy site | seconds | hostile site in /api/v1/sites | huge bytes sent | broker peak RSS (MB) |\n'
printf '|---|---|---|---|---|---|\n'

for mode in "${modes[@]}"; do
  python3 "$root/bench/federation/hostile_site.py" "$mode" >"$work/hostile-$mode.log" 2>&1 &
  hpid=$!
  pids+=($hpid)
  for _ in $(seq 100); do grep -q '^listening' "$work/hostile-$mode.log" && break; sleep 0.1; done
  hostile=$(sed -nE 's/^listening ([0-9]+)/\1/p' "$work/hostile-$mode.log")
  cat >"$work/sites-$mode.yaml" <<EOT
sites:
  hostile:
    url: http://127.0.0.1:$hostile
    token_env: BATON_SITE_HOSTILE_TOKEN
    price_per_gpu_hour: 0.5
  healthy:
    url: http://127.0.0.1:$healthy
    token_env: BATON_SITE_HEALTHY_TOKEN
    price_per_gpu_hour: 2
wan:
  - {between: [hostile, healthy], gbps: 10, latency_ms: 5}
EOT
  /usr/bin/time -v -o "$work/time-$mode.txt" "$baton" federate --sites "$work/sites-$mode.yaml" \
    --listen 127.0.0.1:0 --db "$work/broker-$mode.db" --auth "$work/auth.yaml" \
    --site-timeout 30 --poll-interval 0.5 --request-timeout 2 --whatif-timeout 3 \
    >"$work/broker-$mode.log" 2>&1 &
  bpid=$!
  pids+=($bpid)
  broker=$(port_of "$work/broker-$mode.log") || { echo "$mode: the broker did not start"; continue; }
  url="http://127.0.0.1:$broker"
  sleep 1  # one health round, so the broker knows both sites' GPU counts
  ids=()
  for n in $(seq "$jobs"); do
    id=$(curl -sS -m 10 -H "Authorization: Bearer $token" -H 'Content-Type: application/json' \
      -d "{\"name\": \"job-$n\", \"gpus\": 8, \"estimated_runtime_s\": 3600}" "$url/api/v1/jobs" |
      jq -r '.id // empty')
    [[ -n $id ]] && ids+=("$id")
  done
  start=$(date +%s.%N)
  at_healthy=0
  while (( $(echo "$(date +%s.%N) - $start < 60" | bc) )); do
    at_healthy=0
    for id in "${ids[@]}"; do
      j=$(curl -sS -m 10 -H "Authorization: Bearer $token" "$url/api/v1/jobs/$id")
      [[ $(jq -r '"\(.site) \(.site_job // 0)"' <<<"$j") =~ ^healthy\ [1-9] ]] &&
        at_healthy=$((at_healthy + 1))
    done
    [[ $at_healthy -eq ${#ids[@]} ]] && break
    sleep 0.2
  done
  took=$(echo "$(date +%s.%N) - $start" | bc)
  said=$(curl -sS -m 10 -H "Authorization: Bearer $token" "$url/api/v1/sites" |
    jq -r '.sites[] | select(.name == "hostile") | .last_error // "-"')
  pkill -TERM -P "$bpid"  # the broker, a child of time (which then writes its report)
  wait "$bpid" 2>/dev/null
  kill -TERM "$hpid"
  wait "$hpid" 2>/dev/null
  huge=$(sed -nE 's/^huge answer bytes sent: ([0-9]+)/\1/p' "$work/hostile-$mode.log")
  rss=$(sed -nE 's/.*Maximum resident set size \(kbytes\): ([0-9]+)/\1/p' "$work/time-$mode.txt")
  printf '| %s | %d of %d | %.1f | %s | %s | %s |\n' "$mode" "$at_healthy" "${#ids[@]}" "$took" \
    "${said:0:110}" "${huge:--}" "$(( ${rss:-0} / 1024 ))"
done
