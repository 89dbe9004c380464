#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz preset: clang + ASan + UBSan) and runs each for SECONDS
# (default 60) on its seed corpus, inputs up to 64 KiB. Exits non-zero if any target crashes.
# Usage: fuzz/run.sh [SECONDS]
set -euo pipefail
seconds="${1:-60}"
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
targets=(fuzz_cluster_yaml fuzz_slurm_topology fuzz_job_spec fuzz_plan_request fuzz_dcgm
         fuzz_trace_itp fuzz_trace_philly fuzz_trace_swf fuzz_trace_openb fuzz_trace_jsonl
         fuzz_failure_trace fuzz_sites fuzz_daemon_history)
cmake --preset fuzz >/dev/null
cmake --build --preset fuzz --target "${targets[@]}"
status=0
for t in "${targets[@]}"; do
  work="build/fuzz/corpus/$t"  # new inputs go here; the seeds in fuzz/corpus stay untouched
  mkdir -p "$work" "build/fuzz/artifacts/$t"
  echo "== $t for ${seconds}s"
  if ! "build/fuzz/fuzz/$t" "$work" "fuzz/corpus/$t" -max_len=65536 -max_total_time="$seconds" \
      -rss_limit_mb=4096 -artifact_prefix="build/fuzz/artifacts/$t/" -print_final_stats=1; then
    echo "!! $t crashed; reproducer in build/fuzz/artifacts/$t/" >&2
    status=1
  fi
done
exit "$status"
