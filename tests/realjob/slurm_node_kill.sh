#!/usr/bin/env bash
# A real PyTorch job (examples/ddp_train.py: DDP over gloo on CPU, Debian's python3-torch) under
# `baton serve --executor slurm` on the 16-node fake Slurm (scripts/slurm-fake-cluster.sh), the
# cluster read from Slurm's own slurm.conf and topology.conf. The job runs 2 ranks on each of 2
# nodes; once baton has recorded a checkpoint, one of its nodes dies as a real one would
# (`kill-node`: its slurmd, its slurmsteps and the ranks, all killed -9). baton must requeue the
# job onto healthy nodes and attempt 2 must resume from the step baton recorded and finish.
# What ran is counted from the ranks' own logs, which Slurm writes (LOG-DIR/NAME.out, one file
# per batch job; tests/realjob/check_ranks.py): no two attempts ever ran at once.
# Skips (exit 77), saying why, when not root, without Slurm or torch, or when another slurmctld
# holds the fake cluster's fixed ports.
# Usage: slurm_node_kill.sh BATON_BINARY SOURCE_DIR
set -uo pipefail
baton=$1
src=$(realpath "$2")
source "$src/tests/lib/e2e.sh"  # check, finish, listening_port
cluster_sh="$src/scripts/slurm-fake-cluster.sh"

if [[ $(id -u) -ne 0 ]]; then
  echo "SKIP: not root (the fake Slurm needs mknod and munge)"; exit 77
fi
for bin in /usr/sbin/slurmctld /usr/sbin/slurmd /usr/sbin/munged /usr/bin/sbatch /usr/bin/srun; do
  [[ -x $bin ]] || { echo "SKIP: $bin is not installed (scripts/slurm-fake-cluster.sh install)"; exit 77; }
done
if ! /usr/bin/python3 -c 'import torch.distributed' 2>/dev/null; then
  echo "SKIP: /usr/bin/python3 has no torch (apt-get install python3-torch)"; exit 77
fi

work=$(mktemp -d -t baton-realslurm.XXXXXX)
slurm_dir="$work/slurm"
pid=""
cleanup() {
  [[ -n ${watcher:-} ]] && kill "$watcher" 2>/dev/null
  [[ -n $pid ]] && kill -TERM "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
  # The batch jobs first (Slurm kills their ranks), then every daemon of the fake cluster.
  if [[ -f $slurm_dir/slurm.conf ]]; then
    SLURM_CONF="$slurm_dir/slurm.conf" squeue -h -o %i 2>/dev/null |
      xargs -r env SLURM_CONF="$slurm_dir/slurm.conf" scancel 2>/dev/null
    sleep 1
  fi
  bash "$cluster_sh" stop "$slurm_dir" >/dev/null 2>&1
  if ((failures > 0)) && [[ -n ${BATON_KEEP_WORK:-} ]]; then echo "kept $work"; return; fi
  # The daemons may still be writing their state as they exit.
  for _ in 1 2 3 4 5; do rm -rf "$work" 2>/dev/null && break; sleep 1; done
}
trap cleanup EXIT
trap 'exit 1' INT TERM

if ! bash "$cluster_sh" start "$slurm_dir" >"$work/slurm-start.log" 2>&1; then
  if grep -q "already running" "$work/slurm-start.log"; then
    echo "SKIP: another test holds the fake cluster's fixed ports: $(tail -1 "$work/slurm-start.log")"
    exit 77
  fi
  echo "FAIL the fake Slurm did not start:"; tail -5 "$work/slurm-start.log"; exit 1
fi
if [[ $(SLURM_CONF="$slurm_dir/slurm.conf" sinfo -h -t idle -o %D) != 16 ]]; then
  echo "FAIL the fake Slurm's 16 nodes are not idle:"; tail -5 "$work/slurm-start.log"; exit 1
fi
export SLURM_CONF="$slurm_dir/slurm.conf"

admin_token="admin-$(od -An -tx1 -N12 /dev/urandom | tr -d ' \n')"
printf 'principals:\n  - {name: ops, role: admin, token: "%s"}\n' "$admin_token" >"$work/auth.yaml"
export BATON_TOKEN=$admin_token XDG_CONFIG_HOME="$work/config"
"$baton" serve --executor slurm --slurm-conf "$slurm_dir/slurm.conf" \
  --executor-option job-prefix=realjob --log-dir "$work/logs" --listen 127.0.0.1:0 \
  --db "$work/baton.db" --auth "$work/auth.yaml" >"$work/serve.log" 2>&1 &
pid=$!
port=$(listening_port "$work/serve.log" "$pid") || exit 1
export BATON_URL="http://127.0.0.1:$port"

job_json() { "$baton" job "$1" --json 2>/dev/null; }
state() { job_json "$1" | sed -nE 's/^  "state": "(.*)",?$/\1/p'; }
# The last step baton recorded for job $1 ("checkpointed" events: "step N by attempt A").
recorded_step() { job_json "$1" | sed -nE 's/.*"message": "step ([0-9]+) by attempt.*/\1/p' | tail -1; }
wait_for() {  # wait_for SECONDS COMMAND...: until the command succeeds
  local until=$((SECONDS + $1)); shift
  while ((SECONDS < until)); do "$@" && return 0; sleep 0.2; done
  return 1
}

steps=60
id=$("$baton" submit --name ddp-slurm --gpus 4 --gpus-per-node 2 -- /usr/bin/python3 \
  "$src/examples/ddp_train.py" --steps $steps --checkpoint-every 10 --step-seconds 0.2 --width 64 \
  2>&1 | sed -nE 's/^submitted job ([0-9]+).*/\1/p')
check "job submitted" 0 $([[ -n $id ]]; echo $?)
# Which attempts of the job have live processes, every 0.2 s: "TIME ATTEMPT" per attempt seen.
while :; do
  t=$(date +%s.%N)
  grep -lzx "BATON_CHECKPOINT_DIR=$work/logs/checkpoints/job-$id" /proc/[0-9]*/environ 2>/dev/null |
    xargs -r grep -hzo 'BATON_ATTEMPT=[0-9]*' 2>/dev/null | tr '\0' '\n' | sort -u |
    sed "s/^BATON_ATTEMPT=/$t /"
  sleep 0.2
done >"$work/processes" 2>/dev/null &
watcher=$!

step_at_least() { local s; s=$(recorded_step "$1"); [[ -n $s && $s -ge $2 ]]; }
wait_for 150 step_at_least "$id" 10
rc=$?
check "baton records a checkpoint (step $(recorded_step "$id"))" 0 $rc
((failures == 0)) || { tail -20 "$work/serve.log"; "$baton" job "$id"; finish; exit 1; }

# The node that does not run rank 0: its death leaves attempt 1's other ranks running until Slurm
# ends the job, so that the logs can show whether attempt 2 waited for them.
nodes=$(job_json "$id" | sed -nE 's/.*"node": "([^"]+)".*/\1/p' | sort -u)
victim=$(echo "$nodes" | tail -1)
check "the job runs on 2 nodes ($(echo $nodes))" 0 0 "$(echo "$nodes" | wc -l)" '^2$'
out=$(bash "$cluster_sh" kill-node "$slurm_dir" "$victim" 2>&1)
check "kill-node $victim" 0 $? "$out" "killed [0-9]+ processes"
left=$(grep -lzx "SLURMD_NODENAME=$victim" /proc/[0-9]*/environ 2>/dev/null | wc -l)
check "nothing of $victim survives" 0 0 "$left" '^0$'

# Slurm notices (NOT_RESPONDING); baton replaces the node (or requeues the job when no node can
# stand in) and ends attempt 1 in Slurm before attempt 2 starts.
restarted() { "$baton" job "$1" 2>/dev/null | grep -qE "(requeued|placed) .*resumes from step"; }
wait_for 60 restarted "$id"
rc=$?
check "baton replaces $victim or requeues the job" 0 $rc
succeeded() { [[ $(state "$1") == succeeded ]]; }
wait_for 150 succeeded "$id"
rc=$?
check "the job succeeded" 0 $rc "$(state "$id")"
((rc == 0)) || { "$baton" job "$id" | tail -12; tail -20 "$work/serve.log"; }
kill "$watcher" 2>/dev/null; wait "$watcher" 2>/dev/null

events=$("$baton" job "$id" 2>&1)
step=$(echo "$events" | sed -nE 's/.*resumes from step ([0-9]+).*/\1/p' | tail -1)
last=$(echo "$events" | sed -nE 's/.*checkpointed +step ([0-9]+) by attempt 1 .*/\1/p' | tail -1)
check "attempt 2 restarts from the last checkpoint baton recorded of attempt 1 (step ${last:-?})" \
  0 $([[ -n $step && $step == "$last" ]]; echo $?) "$(echo "$events" | grep -E "resumes|attempt 1")"
alloc=$(echo "$events" | grep -E " placed " | tail -1 | sed -nE 's/.*\[alloc (.*)\]/\1/p')
check "attempt 2 runs without $victim ($alloc)" 0 \
  $([[ -n $alloc && ! $alloc =~ (^|,)$victim: ]]; echo $?)
both=$(awk '{ at[$1] = at[$1] " " $2 }
  END { for (t in at) if (at[t] ~ / 1/ && at[t] ~ / 2/) n++; print n + 0 }' "$work/processes")
seen=$(awk '{ print $2 }' "$work/processes" | sort -u | paste -sd' ')
check "no process of attempt 1 beside one of attempt 2 (/proc every 0.2 s saw attempts $seen)" \
  0 0 "$both $seen" '^0 1 2$'
logs=("$work"/logs/realjob-"$id"-*.out)
out=$(/usr/bin/python3 "$src/tests/realjob/check_ranks.py" --steps $steps --resume-step "${step:-0}" \
  "${logs[@]}" 2>&1)
check "attempt 2 resumed from step ${step:-?}, never beside attempt 1 (${#logs[@]} Slurm output files)" \
  0 $? "$out" "^2 attempt\(s\), no problem"
echo "$out" | sed 's/^/     /'
((failures == 0)) || echo "$events" | tail -12
finish
