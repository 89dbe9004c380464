# Sourced by the end-to-end test scripts. start_daemon starts a real `baton serve` (dry-run
# executor, embedded SQLite, the 16-node test cluster, two principals) on a free loopback port and
# stops it on exit; after start_daemon BATON SRC, $work (a temp dir), $pid, $port, $BATON_URL,
# $admin_token and $alice_token (tenant team-a) are set. check counts passes and failures, and
# finish prints the closing "N passed, N failed" line and sets the exit status; new_token makes a
# random token, wait_listening waits for a daemon started by the script itself and
# listening_port also says on which loopback port.
failures=0
passes=0
check() {  # check NAME EXPECTED_EXIT ACTUAL_EXIT [OUTPUT PATTERN]
  local name=$1 want=$2 got=$3 out=${4:-} pattern=${5:-}
  if [[ $got -ne $want ]]; then
    echo "FAIL $name: exit $got, expected $want"; echo "$out" | head -5; failures=$((failures + 1))
  elif [[ -n $pattern ]] && ! grep -qE -- "$pattern" <<<"$out"; then
    echo "FAIL $name: output does not match /$pattern/:"; echo "$out" | head -5
    failures=$((failures + 1))
  else
    echo "ok   $name"; passes=$((passes + 1))
  fi
}

new_token() {  # new_token PREFIX: a random bearer token, "PREFIX-<24 hex digits>"
  echo "$1-$(od -An -tx1 -N12 /dev/urandom | tr -d ' \n')"
}

wait_listening() {  # wait_listening LOG PID: until the daemon logging to LOG listens (60 s at most)
  for _ in $(seq 600); do
    grep -q 'listening on' "$1" && return 0
    kill -0 "$2" 2>/dev/null || { echo "daemon exited:"; tail -20 "$1"; return 1; }
    sleep 0.1
  done
  echo "not listening after 60 s:"; tail -20 "$1"; return 1
}

# listening_port LOG PID [NTH]: prints the loopback port of the NTH (default 1st) "listening on"
# line of the daemon PID logging to LOG, once it is there (60 s at most); on failure says why on
# stderr and returns 1. NTH lets a restarted daemon appending to the same log be told apart.
listening_port() {
  local log=$1 daemon=$2 nth=${3:-1} port=""
  for _ in $(seq 600); do
    port=$(sed -nE 's/.*listening on http:\/\/127\.0\.0\.1:([0-9]+).*/\1/p' "$log" | sed -n "${nth}p")
    [[ -n $port ]] && { echo "$port"; return 0; }
    kill -0 "$daemon" 2>/dev/null || { echo "daemon exited:" >&2; tail -20 "$log" >&2; return 1; }
    sleep 0.1
  done
  echo "the daemon did not start listening in 60 s:" >&2; tail -20 "$log" >&2; return 1
}

finish() {
  echo "$passes passed, $failures failed"
  [[ $failures -eq 0 ]]
}

start_daemon() {
  local baton=$1 src=$2
  work=$(mktemp -d -t baton-e2e.XXXXXX)
  pid=""
  trap 'stop_daemon' EXIT
  admin_token="admin-$(od -An -tx1 -N12 /dev/urandom | tr -d ' \n')"
  alice_token="alice-$(od -An -tx1 -N12 /dev/urandom | tr -d ' \n')"
  cat >"$work/auth.yaml" <<EOT
principals:
  - {name: ops, role: admin, token: "$admin_token"}
  - {name: alice, role: tenant, tenant: team-a, token: "$alice_token"}
EOT
  "$baton" serve --topology "$src/data/clusters/fake16.yaml" --executor dry-run --speedup 1 \
    --listen 127.0.0.1:0 --db "$work/baton.db" --auth "$work/auth.yaml" >"$work/serve.log" 2>&1 &
  pid=$!
  port=$(listening_port "$work/serve.log" "$pid") || exit 1
  export BATON_URL="http://127.0.0.1:$port"
}

stop_daemon() {
  if [[ -n ${pid:-} ]] && kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid"
    wait "$pid" 2>/dev/null
  fi
  [[ -n ${work:-} ]] && rm -rf "$work"
}
