#!/usr/bin/env bash
# `baton sim --sites` as a user runs it (issue 17): the three-centre example on a small synthetic
# workload compares every routing policy, and bad sites files are refused naming file, line and
# field. Usage: sim_sites_e2e.sh BATON_BINARY SOURCE_DIR
set -euo pipefail
baton=$1
root=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() {
  echo "FAIL: $*" >&2
  exit 1
}

out=$("$baton" sim --sites "$root/data/federation/sites.yaml" --trace synthetic:40 \
  --synthetic-gap-s 120 --seed 3 --tenant-region team2:cn-south --deadline-factor 3 \
  --csv "$tmp/jobs.csv" --json "$tmp/runs.json" -q)
echo "$out"
for p in home-site least-loaded predicted-completion cheapest-by-deadline; do
  grep -q "^| $p | 40/40 |" <<<"$out" || fail "no row with 40/40 jobs done for $p"
done
# One CSV row per job and policy, plus the header.
[[ $(wc -l <"$tmp/jobs.csv") -eq 161 ]] || fail "jobs.csv: expected 161 lines"
grep -q '"routing": "predicted-completion"' "$tmp/runs.json" || fail "runs.json: no run"

# Bad input: each error names the file, the line and the field.
mkdir -p "$tmp/clusters"
cp "$root/data/federation/clusters/"*.yaml "$tmp/clusters/"
expect_error() {  # FILE_CONTENT_EDIT EXPECTED
  local expected=$1
  if "$baton" sim --sites "$tmp/sites.yaml" --trace synthetic:5 -q >"$tmp/out" 2>"$tmp/err"; then
    fail "accepted a bad sites file (expected: $expected)"
  fi
  grep -qF "$expected" "$tmp/err" || fail "expected '$expected', got: $(cat "$tmp/err")"
  echo "refused: $(cat "$tmp/err")"
}
sed 's/scheduler: daemon/scheduler: fastest/' "$root/data/federation/sites.yaml" >"$tmp/sites.yaml"
expect_error "$tmp/sites.yaml:21: field 'sites.shenzhen.scheduler': unknown"
sed 's|cluster: clusters/hefei.yaml|cluster: clusters/nowhere.yaml|' \
  "$root/data/federation/sites.yaml" >"$tmp/sites.yaml"
expect_error "$tmp/sites.yaml:40: field 'sites.hefei.cluster': "
sed 's/between: \[hefei, ulanqab\]/between: [hefei, wuhan]/' \
  "$root/data/federation/sites.yaml" >"$tmp/sites.yaml"
expect_error "$tmp/sites.yaml:65: field 'wan[2].between': unknown site 'wuhan'"
sed '/between: \[shenzhen, ulanqab\]/d' "$root/data/federation/sites.yaml" >"$tmp/sites.yaml"
expect_error "field 'wan': no entry between 'shenzhen' and 'ulanqab'"
sed 's/start_h: 24, hours: 6/start_h: 24, hours: -6/' \
  "$root/data/federation/sites.yaml" >"$tmp/sites.yaml"
expect_error "$tmp/sites.yaml:43: field 'sites.hefei.outages[0].hours': must be in"
# A dataset no job could name (federation.datasets takes job-style names) is refused at load.
sed 's|team0.pretrain:|team0/pretrain:|' "$root/data/federation/sites.yaml" >"$tmp/sites.yaml"
expect_error "$tmp/sites.yaml:23: field 'sites.shenzhen.datasets': 'team0/pretrain': a dataset name"
echo "OK"
