#!/usr/bin/env bash
# sim_scale: how the simulator's cost grows with the trace. Times
#   baton sim --trace synthetic:N --cluster-gpus 16384 --policies backfill -q
# (the synthetic LLM workload on 16,384 GPUs, one policy) for N = 10,000, 30,000 and 100,000 jobs,
# pinned to one core (taskset, where installed), and prints the median wall time of REPEATS runs
# per size with the time per job, so that a cost growing faster than the work shows as a growing
# last column. Wall time from `date`, the command's own output discarded.
# Usage: bench/sim/sim_scale.sh [BATON] [N...]
#   BATON defaults to build/release/src/cli/baton; env REPEATS (default 3), CORE (default 0).
set -euo pipefail
baton=${1:-build/release/src/cli/baton}
shift || true
sizes=("$@")
[[ ${#sizes[@]} -eq 0 ]] && sizes=(10000 30000 100000)
repeats=${REPEATS:-3}
[[ -x $baton ]] || { echo "no baton binary at $baton (build the release preset)" >&2; exit 1; }
pin=()
command -v taskset >/dev/null && pin=(taskset -c "${CORE:-0}")

printf '%-9s %9s %7s %12s  %s\n' jobs "median s" runs "ms per job" "all runs (s)"
for n in "${sizes[@]}"; do
  times=()
  for ((r = 0; r < repeats; r++)); do
    t0=$(date +%s.%N)
    "${pin[@]}" "$baton" sim --trace "synthetic:$n" --cluster-gpus 16384 --policies backfill -q \
      >/dev/null
    t1=$(date +%s.%N)
    times+=("$(echo "$t1 - $t0" | bc -l)")
  done
  median=$(printf '%s\n' "${times[@]}" | sort -g | awk '{v[NR] = $1} END {
    print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }')
  printf '%-9s %9.2f %7s %12.3f  %s\n' "$n" "$median" "$repeats" \
    "$(echo "1000 * $median / $n" | bc -l)" "$(printf '%.2f ' "${times[@]}")"
done
