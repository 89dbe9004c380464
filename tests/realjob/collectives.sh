#!/usr/bin/env bash
# scripts/collectives-bench/run.sh against a real `baton serve --executor local`: a job of 4 gloo
# ranks on CPU (2 "nodes" of tests/realjob/cluster.yaml) times the four collectives at small
# sizes and writes nccl-tests' output, which `baton plan calibrate --collectives` fits; each
# rank's own log shows it ran once (tests/realjob/check_ranks.py). Skips (exit 77) where
# /usr/bin/python3 has no torch.
# Usage: collectives.sh BATON_BINARY SOURCE_DIR
set -uo pipefail
baton=$1
src=$2
source "$src/tests/lib/e2e.sh"
if ! /usr/bin/python3 -c 'import torch.distributed' 2>/dev/null; then
  echo "SKIP: /usr/bin/python3 has no torch (apt-get install python3-torch)"; exit 77
fi

work=$(mktemp -d -t baton-realjob.XXXXXX)
pid=""
cleanup() {
  [[ -n $pid ]] && kill -9 "$pid" 2>/dev/null
  for f in "$work"/logs/job-*/attempt-*.pids; do
    [[ -f $f ]] && awk '{print $2}' "$f" | while read -r p; do kill -9 -- "-$p" 2>/dev/null; done
  done
  if ((failures > 0)) && [[ -n ${BATON_KEEP_WORK:-} ]]; then echo "kept $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT
trap 'exit 1' INT TERM
admin_token=$(new_token admin)
printf 'principals:\n  - {name: ops, role: admin, token: "%s"}\n' "$admin_token" >"$work/auth.yaml"
export BATON_TOKEN=$admin_token XDG_CONFIG_HOME="$work/config" BATON=$baton

"$baton" serve --topology "$src/tests/realjob/cluster.yaml" --executor local \
  --log-dir "$work/logs" --listen 127.0.0.1:0 --db "$work/baton.db" --auth "$work/auth.yaml" \
  >"$work/serve.log" 2>&1 &
pid=$!
wait_listening "$work/serve.log" "$pid" || exit 1
port=$(sed -nE 's/.*listening on http:\/\/127\.0\.0\.1:([0-9]+).*/\1/p' "$work/serve.log" | head -1)
export BATON_URL="http://127.0.0.1:$port"

run=$("$src/scripts/collectives-bench/run.sh" -n 4 -g 2 -b 8 -e 16384 --iters 3 --warmup 1 \
  --backend gloo --no-nccl-tests --timeout 50 "$work/out" 2>&1)
check "run.sh: the job succeeded" 0 $? "$run" "alltoall.txt"
echo "$run" | sed 's/^/     /'
for op in all_reduce all_gather reduce_scatter alltoall; do
  check "$op.txt is nccl-tests output" 0 0 "$(cat "$work/out/$op.txt" 2>&1)" \
    "^# Avg bus bandwidth"
done

out=$("$baton" plan calibrate --collectives \
  "all_reduce=$work/out/all_reduce.txt,all_gather=$work/out/all_gather.txt" 2>&1)
check "baton plan calibrate --collectives fits a fabric" 0 $? "$out" \
  "^fabric 'yours' \(.*NVLink domain 2 GPUs\)"
echo "$out" | sed -n '1,/^collective/p' | sed 's/^/     /'

job=$(sed -nE 's/^ *job ([0-9]+):.*/\1/p' <<<"$run")
out=$(/usr/bin/python3 "$src/tests/realjob/check_ranks.py" --steps 4 "$work"/logs/job-"$job"/rank-*.log 2>&1)
check "every rank ran once and did the 4 collectives (ranks' logs)" 0 $? "$out" \
  "^1 attempt\(s\), no problem"
check "... ranks 0-3 of a world of 4" 0 0 "$out" "^attempt 1: ranks \[0, 1, 2, 3\] world \[4\] "
echo "$out" | sed 's/^/     /'
finish
