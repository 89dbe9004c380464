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
source "$src/tests/realjob/lib.sh" realjob
export BATON=$baton

serve

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
