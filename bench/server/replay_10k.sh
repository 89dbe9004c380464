#!/usr/bin/env bash
# The acceptance run of issue 15, item 8: a 10,000-job daemon run (dry-run executor, the 16-node
# test cluster, mixed sizes, cancels, a node drained and resumed, one daemon restart) exported
# and replayed in `baton sim`; prints "placements identical: N/N (100.00 %)" and the what-if table.
# Usage: bench/server/replay_10k.sh [BATON_BINARY] [JOBS] [SPEEDUP]
# (default build/release/src/cli/baton, else build/dev/src/cli/baton; 10000 jobs; speedup 1000)
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
source "$root/bench/lib.sh"
baton=$(bench_baton "$root" "${1:-}")
exec "$root/tests/replay/replay_e2e.sh" "$baton" "$root" "${2:-10000}" "${3:-1000}"
