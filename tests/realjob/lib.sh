# Shared by the realjob tests (sourced after `baton=$1 src=$2`): sources tests/lib/e2e.sh, skips
# (exit 77) where /usr/bin/python3 has no torch, makes $work with an admin principal
# ($admin_token, exported as BATON_TOKEN) and, on exit, kills the daemon ($pid; SIGTERM and a
# wait with REALJOB_GRACEFUL=1, else SIGKILL) and every rank a failed run left behind.
# Usage: source "$src/tests/realjob/lib.sh" NAME   (NAME names the temporary folder)
source "$src/tests/lib/e2e.sh"
if ! /usr/bin/python3 -c 'import torch.distributed' 2>/dev/null; then
  echo "SKIP: /usr/bin/python3 has no torch (apt-get install python3-torch)"; exit 77
fi

work=$(mktemp -d -t "baton-$1.XXXXXX")
pid=""
realjob_cleanup() {
  if [[ -n $pid ]]; then
    if [[ -n ${REALJOB_GRACEFUL:-} ]]; then
      kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
    else
      kill -9 "$pid" 2>/dev/null
    fi
  fi
  for f in "$work"/logs/job-*/attempt-*.pids; do
    [[ -f $f ]] && awk '{print $2}' "$f" | while read -r p; do kill -9 -- "-$p" 2>/dev/null; done
  done
  if ((failures > 0)) && [[ -n ${BATON_KEEP_WORK:-} ]]; then echo "kept $work"; else rm -rf "$work"; fi
}
trap realjob_cleanup EXIT
trap 'exit 1' INT TERM
admin_token=$(new_token admin)
printf 'principals:\n  - {name: ops, role: admin, token: "%s"}\n' "$admin_token" >"$work/auth.yaml"
export BATON_TOKEN=$admin_token XDG_CONFIG_HOME="$work/config"

# Starts `baton serve --executor local` on tests/realjob/cluster.yaml with $work's database, log
# and checkpoint directories (a restart finds them as the last run left them), waits until this
# start listens (60 s at most) and exports BATON_URL.
serve() {
  local before port=""
  before=$(grep -c "listening on" "$work/serve.log" 2>/dev/null) || before=0
  "$baton" serve --topology "$src/tests/realjob/cluster.yaml" --executor local \
    --log-dir "$work/logs" --listen 127.0.0.1:0 --db "$work/baton.db" --auth "$work/auth.yaml" \
    >>"$work/serve.log" 2>&1 &
  pid=$!
  port=$(listening_port "$work/serve.log" "$pid" $((before + 1))) || exit 1
  export BATON_URL="http://127.0.0.1:$port"
}

wait_for() {  # wait_for SECONDS COMMAND...: until the command succeeds
  local until=$((SECONDS + $1)); shift
  while ((SECONDS < until)); do "$@" && return 0; sleep 0.2; done
  return 1
}
state() { "$baton" job "$1" --json 2>/dev/null | sed -nE 's/^  "state": "(.*)",?$/\1/p'; }
# The last step baton recorded for job $1 ("checkpointed" events: "step N by attempt A").
recorded_step() {
  "$baton" job "$1" --json 2>/dev/null | sed -nE 's/.*"message": "step ([0-9]+) by attempt.*/\1/p' |
    tail -1
}
