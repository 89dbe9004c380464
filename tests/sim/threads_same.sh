#!/usr/bin/env bash
# `baton sim --policies A,B,C` runs the policies on separate threads: the per-job CSV and the
# table must be the same as with --threads 1 (the runs one after the other), failures on.
# Usage: threads_same.sh BATON
set -euo pipefail
baton=$1
dir=$(mktemp -d -t baton-sim-threads.XXXXXX)
trap 'rm -rf "$dir"' EXIT
run() {
  "$baton" sim --trace synthetic:400 --cluster-gpus 256 --policies fifo,first-fit,backfill,las,topo \
    --failures --failure-rate-scale 50 --seed 5 -q --threads "$1" --csv "$dir/jobs-$1.csv" \
    >"$dir/table-$1.txt"
}
run 1
run 3
cmp "$dir/jobs-1.csv" "$dir/jobs-3.csv"
cmp "$dir/table-1.txt" "$dir/table-3.txt"
grep -q '^Verdict: ' "$dir/table-3.txt"
echo "same with 1 and 3 threads: $(($(wc -l <"$dir/jobs-1.csv") - 1)) job rows"
