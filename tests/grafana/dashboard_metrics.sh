#!/usr/bin/env bash
# Every metric the Grafana dashboard (deploy/grafana/baton.json) queries exists in a real
# daemon's /metrics, so the board never shows "no data" for a renamed series.
# Usage: dashboard_metrics.sh BATON_BINARY SOURCE_DIR
set -uo pipefail
baton=$1
src=$2
source "$src/tests/lib/e2e.sh"
start_daemon "$baton" "$src"

metrics=$(curl -sf -H "Authorization: Bearer $admin_token" "$BATON_URL/metrics")
check "GET /metrics" 0 $? "$metrics" '^# TYPE baton_'
# Series names in the board's queries; histogram series are exposed under their family's name.
names=$(grep -oE '"expr": "[^"]*"' "$src/deploy/grafana/baton.json" | grep -oE 'baton_[a-z_]+' |
  sed -E 's/_(bucket|sum|count)$//' | sort -u)
[[ -n $names ]] || { echo "FAIL: no baton_ metric in the dashboard"; exit 1; }
for name in $names; do
  grep -q "^# TYPE $name " <<<"$metrics"
  check "dashboard metric $name is exposed" 0 $?
done
finish
