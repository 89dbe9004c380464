#!/usr/bin/env bash
# Enforces the dependency rule of ARCHITECTURE.md: a module includes only headers of the modules
# it may depend on. Exits non-zero, naming file and line, on the first violation it finds.
set -euo pipefail
cd "$(dirname "$0")/.."

declare -A allowed=(
  [core]="core"
  [topology]="core topology"
  [perf]="core topology perf"
  [health]="core topology health"
  [sched]="core topology health sched"
  [planning]="core topology perf sched planning"
  [sim]="core topology perf health sched planning sim"
  [server]="core topology perf health sched planning server"
  [cli]="core topology perf health sched planning sim server cli"
)

status=0
for module in "${!allowed[@]}"; do
  [[ -d src/$module ]] || continue
  while IFS= read -r hit; do
    file=${hit%%:*}
    rest=${hit#*:}
    line=${rest%%:*}
    target=$(sed -E 's/.*#include "([a-z_]+)\/.*/\1/' <<<"${rest#*:}")
    if [[ " ${allowed[$module]} " != *" $target "* ]]; then
      echo "$file:$line: module '$module' may not include '$target/' (allowed: ${allowed[$module]})"
      status=1
    fi
  done < <(grep -rnE '^#include "[a-z_]+/' "src/$module" || true)
done
if [[ $status -eq 0 ]]; then echo "include rule: ok"; fi
exit $status
