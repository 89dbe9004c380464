#!/usr/bin/env bash
# The simulation acceptance of issue 17: routing policies compared on a multi-site workload with
# datasets. Runs `baton sim --sites` on the three-centre example (data/federation/sites.yaml: 3 x
# 512 GPUs of H100, H800 and A100, 3 TiB pre-training corpora, a 6-hour outage at hefei) with the
# synthetic LLM workload split over eight tenants, every routing policy on the same jobs and seed,
# twice, and checks that the two runs print the same table (a run is deterministic for a seed).
# Prints the table the README quotes and the wall time of one run.
# Usage: bench/federation/sim_sites.sh [BATON_BINARY] [JOBS] [GAP_S] [SEED]
# (default build/release/src/cli/baton, else build/dev/src/cli/baton; 2000 jobs; 45 s; seed 1)
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
source "$root/bench/lib.sh"
baton=$(bench_baton "$root" "${1:-}")
jobs=${2:-2000}
gap=${3:-45}
seed=${4:-1}
cmd=("$baton" sim --sites "$root/data/federation/sites.yaml" --trace "synthetic:$jobs"
  --synthetic-gap-s "$gap" --seed "$seed" --routing all --tenant-region team2:cn-south
  --deadline-factor 3 -q)
echo "${cmd[*]#"$root/"}"
start=$(date +%s.%N)
first=$("${cmd[@]}")
end=$(date +%s.%N)
second=$("${cmd[@]}")
echo "$first"
if [[ "$first" != "$second" ]]; then
  echo "NOT DETERMINISTIC: a second run printed a different table" >&2
  exit 1
fi
echo "deterministic: a second run printed the same table"
echo "wall time of one run (4 policies): $(echo "$end - $start" | bc) s"
