#!/usr/bin/env bash
# Fuzzes every libFuzzer target (built by the dev preset: clang + ASan + UBSan) for SECONDS each
# (default 60) from its seed corpus, inputs up to 64 KiB. The targets are the folders of
# fuzz/corpus. Exits non-zero if any target crashes.
# Usage: fuzz/run.sh [SECONDS]
set -euo pipefail
seconds="${1:-60}"
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
targets=()
for dir in fuzz/corpus/*/; do targets+=("$(basename "$dir")"); done
cmake --preset dev >/dev/null
cmake --build --preset dev --target "${targets[@]}"
status=0
for t in "${targets[@]}"; do
  work="build/dev/fuzz-work/corpus/$t"  # new inputs go here; the seeds in fuzz/corpus stay untouched
  artifacts="build/dev/fuzz-work/artifacts/$t"
  mkdir -p "$work" "$artifacts"
  echo "== $t for ${seconds}s"
  if ! "build/dev/fuzz/$t" "$work" "fuzz/corpus/$t" -max_len=65536 -max_total_time="$seconds" \
      -rss_limit_mb=4096 -artifact_prefix="$artifacts/" -print_final_stats=1; then
    echo "!! $t crashed; reproducer in $artifacts/" >&2
    status=1
  fi
done
exit "$status"
