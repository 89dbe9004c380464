#!/usr/bin/env bash
# An elastic PyTorch job (examples/ddp_train.py: DDP over gloo on CPU, Debian's python3-torch)
# under `baton serve --executor local` on tests/realjob/cluster.yaml (4 nodes of 2 devices):
#  * submitted with --gpus 2:4 while a rigid job holds 6 of the 8 devices, it starts at 2 ranks;
#  * the rigid job is cancelled: it grows to 4 ranks (attempt 2);
#  * a higher-priority rigid job asks for 6 devices: it shrinks back to 2 ranks (attempt 3)
#    instead of being preempted, and the rigid job runs beside it.
# What ran is counted from the ranks' own logs (tests/realjob/check_ranks.py): no two attempts at
# once, each resumed from the step the one before last checkpointed; and the loss carries on
# across both resizes instead of starting over. Skips (exit 77) where /usr/bin/python3 has no
# torch.
# Usage: elastic.sh BATON_BINARY SOURCE_DIR
set -uo pipefail
baton=$1
src=$2
REALJOB_GRACEFUL=1
source "$src/tests/realjob/lib.sh" elastic

serve

attempts() { "$baton" job "$1" --json 2>/dev/null | sed -nE 's/^  "attempts": ([0-9]+),?$/\1/p'; }
submit() { "$baton" submit "$@" 2>&1 | sed -nE 's/^submitted job ([0-9]+).*/\1/p'; }
running() { [[ $(state "$1") == running ]]; }
succeeded() { [[ $(state "$1") == succeeded ]]; }
step_at_least() { local s; s=$(recorded_step "$1"); [[ -n $s && $s -ge $2 ]]; }
attempt_is() { [[ $(attempts "$1") == "$2" ]]; }

steps=80
train=(/usr/bin/python3 "$src/examples/ddp_train.py" --steps $steps --checkpoint-every 5
  --step-seconds 0.1 --width 64)
# A rigid job holds 6 of the 8 devices; the elastic job starts in the 2 left.
blocker=$(submit --name blocker --gpus 6 --gpus-per-node 2 -- /bin/sleep 600)
wait_for 60 running "$blocker"
check "the rigid blocker runs on 6 devices" 0 $?
el=$(submit --name elastic --gpus 2:4 -- "${train[@]}")
check "the elastic job is submitted with --gpus 2:4" 0 $([[ -n $el ]]; echo $?)
wait_for 120 step_at_least "$el" 20
check "attempt 1 (2 ranks) reports a checkpoint (step $(recorded_step "$el"))" 0 $?
((failures == 0)) || { tail -20 "$work/serve.log"; finish; exit 1; }

# GPUs free up: it grows to 4 ranks, a new attempt resuming from its checkpoint.
grow_from=$(recorded_step "$el")
"$baton" cancel "$blocker" >/dev/null 2>&1
wait_for 60 attempt_is "$el" 2
check "the blocker's end grows it (attempt 2)" 0 $? "$(attempts "$el")"
out=$("$baton" job "$el" 2>&1)
check "its event says it grew from 2 to 4 GPUs and where it resumes" 0 0 "$out" \
  "resized from 2 to 4 GPUs; restarted: resumes from step [0-9]+"
wait_for 120 step_at_least "$el" $((grow_from + 15))
check "attempt 2 (4 ranks) checkpoints past step $((grow_from + 15))" 0 $?

# A higher-priority rigid job wants 6 devices: the elastic job shrinks to 2 rather than stop.
high=$(submit --name high --gpus 6 --gpus-per-node 2 --priority 10 -- /bin/sleep 600)
wait_for 60 running "$high"
check "the higher-priority rigid job runs" 0 $?
wait_for 60 attempt_is "$el" 3
check "it shrinks the elastic job (attempt 3)" 0 $? "$(attempts "$el")"
out=$("$baton" job "$el" 2>&1)
check "its event says it shrank from 4 to 2 GPUs" 0 0 "$out" "resized from 4 to 2 GPUs; restarted"
check "the elastic job was never preempted" 1 $(grep -q preempted <<<"$out"; echo $?)

wait_for 180 succeeded "$el"
rc=$?
check "the elastic job succeeded" 0 $rc "$(state "$el")"
((rc == 0)) || "$baton" job "$el" | tail -8
"$baton" cancel "$high" >/dev/null 2>&1

out=$(/usr/bin/python3 "$src/tests/realjob/check_ranks.py" --steps $steps \
  "$work"/logs/job-"$el"/rank-*.log 2>&1)
check "3 attempts, each resumed from the last checkpoint, never two at once (ranks' logs)" 0 $? \
  "$out" "^3 attempt\(s\), no problem"
echo "$out" | sed 's/^/     /'
worlds=$(sed -nE 's/^attempt ([0-9]+): .* world \[([0-9]+)\].*/\2/p' <<<"$out" | tr '\n' ' ')
check "world sizes 2, 4, 2" 0 0 "$worlds" "^2 4 2 $"

# The loss carries on: each attempt's first loss is below where attempt 1 started (a restart
# from scratch would begin near ln(vocab) again), and the last is lower still.
out=$(awk '$1 ~ /^step=/ && / rank=0 / {
    split($1, s, "="); split($2, l, "="); split($4, a, "=");
    if (!(a[2] in first)) { first[a[2]] = l[2]; fstep[a[2]] = s[2] } last[a[2]] = l[2]; lstep[a[2]] = s[2] }
  END { for (k in first) printf "attempt %s: step %s loss %s .. step %s loss %s\n", k, fstep[k], first[k], lstep[k], last[k] }' \
  "$work"/logs/job-"$el"/rank-*.log | sort)
echo "$out" | sed 's/^/     /'
awk '{ f[$2 + 0] = $6; l[$2 + 0] = $11 } END {
    ok = (2 in f) && (3 in f) && f[2] < 0.95 * f[1] && f[3] < 0.95 * f[1] && l[3] < f[2];
    exit ok ? 0 : 1 }' <<<"$out"
check "the loss continues across both resizes (no attempt starts over)" 0 $? "$out"
finish
