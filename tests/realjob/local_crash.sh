#!/usr/bin/env bash
# Real PyTorch jobs (examples/ddp_train.py: DDP over gloo on CPU, Debian's python3-torch) under
# `baton serve --executor local`, with the daemon killed -9 mid-run and restarted:
#  * job A (4 ranks on 2 nodes) keeps running while the daemon is away: the new daemon adopts it
#    and it finishes as one attempt;
#  * job B (2 ranks on 2 nodes) loses its ranks while the daemon is away (killed -9 with their
#    process groups, as a node's death would): the new daemon requeues it and attempt 2 resumes
#    from the checkpoint baton recorded.
# What ran is counted from the ranks' own logs (tests/realjob/check_ranks.py): no two attempts of
# a job ever ran at once. Skips (exit 77) where /usr/bin/python3 has no torch.
# Usage: local_crash.sh BATON_BINARY SOURCE_DIR
set -uo pipefail
baton=$1
src=$2
source "$src/tests/realjob/lib.sh" realjob

serve
steps=60
train=(/usr/bin/python3 "$src/examples/ddp_train.py" --steps $steps --checkpoint-every 10
  --step-seconds 0.15 --width 64)
a=$("$baton" submit --name ddp-a --gpus 4 --gpus-per-node 2 -- "${train[@]}" 2>&1 |
  sed -nE 's/^submitted job ([0-9]+).*/\1/p')
b=$("$baton" submit --name ddp-b --gpus 2 --gpus-per-node 1 -- "${train[@]}" 2>&1 |
  sed -nE 's/^submitted job ([0-9]+).*/\1/p')
check "two jobs submitted" 0 $([[ -n $a && -n $b ]]; echo $?)

step_at_least() { local s; s=$(recorded_step "$1"); [[ -n $s && $s -ge $2 ]]; }
wait_for 240 step_at_least "$a" 20
rc=$?
check "job A reports a checkpoint (step $(recorded_step "$a"))" 0 $rc
wait_for 120 step_at_least "$b" 20
rc=$?
check "job B reports a checkpoint (step $(recorded_step "$b"))" 0 $rc
out=$("$baton" job "$b" --json 2>&1)
check "job B's record carries its last checkpoint (the dashboard shows it)" 0 $? "$out" \
  '"checkpoint": \{'
((failures == 0)) || { tail -20 "$work/serve.log"; finish; exit 1; }

# The daemon dies; job B's ranks die with it (their whole process groups, wrappers included).
kill -9 "$pid"; wait "$pid" 2>/dev/null; pid=""
b_step=$(sed -nE 's/.*"step": ([0-9]+).*/\1/p' "$work/logs/checkpoints/job-$b/baton-checkpoint.json")
awk '{print $2}' "$work/logs/job-$b/attempt-1.pids" | while read -r p; do kill -9 -- "-$p"; done
serve
out=$(grep "running adopted" "$work/serve.log" | tail -1)
check "the restarted daemon adopts job A and requeues job B" 0 0 "$out" \
  "1 running adopted, 1 requeued"

succeeded() { [[ $(state "$1") == succeeded ]]; }
wait_for 300 succeeded "$a"
rc=$?
check "job A succeeded" 0 $rc "$(state "$a")"
wait_for 300 succeeded "$b"
rc=$?
check "job B succeeded" 0 $rc "$(state "$b")"
((rc == 0)) || "$baton" job "$b" | tail -8

out=$(/usr/bin/python3 "$src/tests/realjob/check_ranks.py" --steps $steps "$work"/logs/job-"$a"/rank-*.log 2>&1)
check "job A: one attempt, every rank to step $steps (ranks' logs)" 0 $? "$out" "^1 attempt\(s\), no problem"
echo "$out" | sed 's/^/     /'
out=$(/usr/bin/python3 "$src/tests/realjob/check_ranks.py" --steps $steps --resume-step "$b_step" \
  "$work"/logs/job-"$b"/rank-*.log 2>&1)
check "job B: attempt 2 resumed from step $b_step, never beside attempt 1 (ranks' logs)" 0 $? \
  "$out" "^2 attempt\(s\), no problem"
echo "$out" | sed 's/^/     /'
out=$("$baton" job "$b" 2>&1)
check "job B's requeue event says where it resumes" 0 $? "$out" "resumes from step $b_step"
finish
