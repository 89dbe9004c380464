#!/usr/bin/env bash
# What a node's death costs a real training job under `baton serve --executor slurm` (issue 27).
# On the 16-node fake Slurm (scripts/slurm-fake-cluster.sh, every node on this machine), REPS
# times: examples/ddp_train.py (DDP over gloo on CPU, 2 nodes x 2 ranks, a checkpoint every 10
# steps) is submitted; once baton has recorded its checkpoint of step 20, after a random 0-1.9 s,
# the node that does not run rank 0 is killed (`kill-node`: slurmd, slurmstepds and ranks, -9).
# From the ranks' own lines in Slurm's output files (each carries a wall-clock t=), per repetition:
#   failover   seconds from the kill to the first step attempt 2 logged, resumed from the
#              checkpoint; of which detect: to baton's replacement or requeue event (Slurm
#              marks the node NOT_RESPONDING), sbatch: to attempt 2's sbatch (baton waits until
#              Slurm has ended attempt 1); the rest is allocation, srun, Python and torch, gloo;
#   lost       steps attempt 1 logged after its last checkpoint (redone by attempt 2), and
#              seconds from that checkpoint to the kill (0 when rank 0, on the node that lives,
#              finished a checkpoint after it);
# then the medians. The figures include this machine's load: every rank and daemon shares its CPUs.
# Needs root, Slurm and /usr/bin/python3 with torch; takes about a minute per repetition.
# Usage: bench/realjob/slurm_failover.sh [BATON_BINARY] [REPS]
# (default build/release/src/cli/baton, else build/dev/src/cli/baton; 3 repetitions)
set -uo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
source "$root/bench/lib.sh"
baton=$(bench_baton "$root" "${1:-}")
reps=${2:-3}
cluster_sh="$root/scripts/slurm-fake-cluster.sh"
[[ $(id -u) -eq 0 ]] || { echo "needs root (the fake Slurm makes device files and runs munge)"; exit 1; }
command -v slurmctld >/dev/null || { echo "Slurm is not installed ($cluster_sh install)"; exit 1; }
/usr/bin/python3 -c 'import torch.distributed' 2>/dev/null ||
  { echo "/usr/bin/python3 has no torch (apt-get install python3-torch)"; exit 1; }

work=$(mktemp -d -t baton-failover.XXXXXX)
slurm_dir="$work/slurm"
pid=""
cleanup() {
  [[ -n $pid ]] && kill -TERM "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
  if [[ -f $slurm_dir/slurm.conf ]]; then
    SLURM_CONF="$slurm_dir/slurm.conf" squeue -h -o %i 2>/dev/null |
      xargs -r env SLURM_CONF="$slurm_dir/slurm.conf" scancel 2>/dev/null
    sleep 1
  fi
  bash "$cluster_sh" stop "$slurm_dir" >/dev/null 2>&1
  if [[ -n ${BATON_KEEP_WORK:-} ]]; then echo "kept $work"; return; fi
  # The daemons may still be writing their state as they exit.
  for _ in 1 2 3 4 5; do rm -rf "$work" 2>/dev/null && break; sleep 1; done
}
trap cleanup EXIT
trap 'exit 1' INT TERM

bash "$cluster_sh" start "$slurm_dir" >"$work/slurm-start.log" 2>&1 ||
  { echo "the fake Slurm did not start"; tail -5 "$work/slurm-start.log"; exit 1; }
export SLURM_CONF="$slurm_dir/slurm.conf"
token="admin-$(od -An -tx1 -N12 /dev/urandom | tr -d ' \n')"
printf 'principals:\n  - {name: ops, role: admin, token: "%s"}\n' "$token" >"$work/auth.yaml"
export BATON_TOKEN=$token XDG_CONFIG_HOME="$work/config"
"$baton" serve --executor slurm --slurm-conf "$SLURM_CONF" --executor-option job-prefix=failover \
  --log-dir "$work/logs" --listen 127.0.0.1:0 --db "$work/baton.db" --auth "$work/auth.yaml" \
  >"$work/serve.log" 2>&1 &
pid=$!
for _ in $(seq 300); do
  port=$(sed -nE 's/.*listening on http:\/\/127\.0\.0\.1:([0-9]+).*/\1/p' "$work/serve.log" | head -1)
  [[ -n $port ]] && break
  sleep 0.1
done
[[ -n $port ]] || { echo "the daemon did not start"; tail "$work/serve.log"; exit 1; }
export BATON_URL="http://127.0.0.1:$port"

job_json() { "$baton" job "$1" --json 2>/dev/null; }
recorded_step() { job_json "$1" | sed -nE 's/.*"message": "step ([0-9]+) by attempt.*/\1/p' | tail -1; }
wait_for() {  # wait_for SECONDS COMMAND...
  local until=$((SECONDS + $1)); shift
  while ((SECONDS < until)); do "$@" && return 0; sleep 0.1; done
  return 1
}
step_at_least() { local s; s=$(recorded_step "$1"); [[ -n $s && $s -ge $2 ]]; }
succeeded() { job_json "$1" | grep -q '"state": "succeeded"'; }
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

# From a job's Slurm output files: attempt 1's last checkpoint (step, t) and last step, attempt 2's
# resume step and first step's t.
read_logs() {
  /usr/bin/python3 - "$@" <<'PY'
import re, sys
ckpt, last, first2, resume2 = (0, 0.0), 0, None, None
for path in sys.argv[1:]:
    for line in open(path, errors="replace"):
        f = dict(re.findall(r"(\w+)=(\S+)", line))
        if "t" not in f or "attempt" not in f:
            continue
        t, a = float(f["t"]), int(f["attempt"])
        if a == 1 and line.startswith("checkpoint ") and int(f["step"]) >= ckpt[0]:
            ckpt = (int(f["step"]), t)
        elif a == 1 and line.startswith("step="):
            last = max(last, int(f["step"]))
        elif a == 2 and line.startswith("start "):
            resume2 = int(f["resume_step"])
        elif a == 2 and line.startswith("step=") and (first2 is None or t < first2):
            first2 = t
print(ckpt[0], f"{ckpt[1]:.3f}", last, resume2, f"{first2:.3f}" if first2 else "none")
PY
}

printf '| rep | nodes | killed | baton | checkpoint | resumed from | failover s | detect s | sbatch s |'
printf ' lost steps | lost s |\n|---|---|---|---|---|---|---|---|---|---|---|\n'
: >"$work/results"
for rep in $(seq "$reps"); do
  id=$("$baton" submit --name "failover-$rep" --gpus 4 --gpus-per-node 2 -- /usr/bin/python3 \
    "$root/examples/ddp_train.py" --steps 40 --checkpoint-every 10 --step-seconds 0.2 \
    --width 64 2>&1 | sed -nE 's/^submitted job ([0-9]+).*/\1/p')
  [[ -n $id ]] || { echo "submission failed"; exit 1; }
  wait_for 180 step_at_least "$id" 20 || { echo "rep $rep: no checkpoint of step 20"; exit 1; }
  sleep "$((RANDOM % 2)).$((RANDOM % 10))"  # into the 2.5 s until the next checkpoint
  nodes=$(job_json "$id" | sed -nE 's/.*"node": "([^"]+)".*/\1/p' | sort -u)
  victim=$(echo "$nodes" | tail -1)
  killed=$(date +%s.%N)
  bash "$cluster_sh" kill-node "$slurm_dir" "$victim" >/dev/null || { echo "kill-node failed"; exit 1; }
  wait_for 240 succeeded "$id" || { echo "rep $rep: job $id did not finish"; "$baton" job "$id"; exit 1; }
  event=$("$baton" job "$id" | grep -E "(requeued|placed) .*resumes from step" | tail -1)
  detected=$(date -d "$(awk '{ print $1 }' <<<"$event")" +%s.%N)
  how=$(sed -E 's/^ *[^ ]+ +//; s/;.*//; s/  +/: /' <<<"$event")
  sbatch_line=$(grep -E "slurm executor: job $id is Slurm job" "$work/serve.log" | tail -1)
  submitted=$(date -d "${sbatch_line%% *}" +%s.%N)
  read -r ckpt ckpt_t last resume first2 < <(read_logs "$work"/logs/failover-"$id"-*.out)
  [[ $resume == "$ckpt" ]] || echo "rep $rep: attempt 2 resumed from $resume, attempt 1 checkpointed $ckpt"
  line=$(awk -v k="$killed" -v d="$detected" -v b="$submitted" -v c="$ckpt_t" -v f="$first2" \
    -v l="$last" -v s="$ckpt" \
    'BEGIN { printf "%.1f %.1f %.1f %d %.1f", f - k, d - k, b - k, l - s, (k > c) ? k - c : 0 }')
  echo "$line" >>"$work/results"
  read -r failover detect sbatch lost_steps lost_s <<<"$line"
  printf '| %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n' "$rep" \
    "$(echo $nodes | tr ' ' ,)" "$victim" "$how" "$ckpt" "$resume" "$failover" "$detect" "$sbatch" \
    "$lost_steps" "$lost_s"
  bash "$cluster_sh" start-node "$slurm_dir" "$victim" >/dev/null 2>&1
done
printf '| median | | | | | |'
for col in 1 2 3 4 5; do printf ' %s |' "$(cut -d' ' -f$col "$work/results" | median)"; done
printf '\n'
echo "baton: ${baton#"$root/"}; $(nproc) CPUs; ddp_train.py --width 64 --step-seconds 0.2, 4 ranks"
