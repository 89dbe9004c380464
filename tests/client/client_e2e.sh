#!/usr/bin/env bash
# End-to-end test of the `baton` client against a real daemon: starts `baton serve` (dry-run
# executor, embedded SQLite, the 16-node test cluster) on a free loopback port, then submits,
# lists, shows and cancels a job with the client only (queued jobs with their queue position,
# estimated start and waiting kind), and checks the one-line errors and exit
# codes for bad input, an unreachable daemon, a rejected token and a missing role.
# Usage: client_e2e.sh BATON_BINARY SOURCE_DIR
set -uo pipefail
baton=$1
src=$2
source "$src/tests/lib/e2e.sh"
start_daemon "$baton" "$src"
export XDG_CONFIG_HOME="$work/config"  # no stray user config

# The tenant's token from a config file, as a user would keep it.
mkdir -p "$XDG_CONFIG_HOME/baton"
printf 'token: %s\n' "$alice_token" >"$XDG_CONFIG_HOME/baton/config.yaml"

out=$("$baton" submit --name pretrain --gpus 16 --gpus-per-node 8 --time 3600 -- python train.py 2>&1)
check "submit with flags" 0 $? "$out" '^submitted job [0-9]+ \(pretrain, 16 GPUs, tenant team-a\)'
id=$(sed -nE 's/^submitted job ([0-9]+).*/\1/p' <<<"$out")

cat >"$work/job.yaml" <<EOF
name: eval
gpus: 4
command: [python, eval.py]
EOF
out=$("$baton" submit "$work/job.yaml" --json 2>&1)
check "submit a YAML file (--json)" 0 $? "$out" '"name": "eval"'

out=$("$baton" jobs 2>&1)
check "jobs lists both" 0 $? "$out" "^$id +pretrain +team-a"
out=$("$baton" queue --json 2>&1)
check "queue --json" 0 $? "$out" '"jobs"'

out=$("$baton" job "$id" 2>&1)
check "job shows spec and events" 0 $? "$out" 'queued'

# Estimated start and why-pending (issue 16 item 2). fake16 has 128 GPUs; pretrain (16, 1 h) and
# eval (4, no estimate) hold 20. `big` (112) needs pretrain's GPUs: it starts when pretrain ends
# by its estimate. `late` (24 GPUs for 2 h) would fit now, but ends after big's reservation, which
# leaves at most 16 GPUs outside it: it waits behind the reservation until big (10 min) ends.
submitted_at=$(date -u +%s)
big=$("$baton" submit --name big --gpus 112 --time 600 --json 2>&1 | sed -nE 's/^  "id": ([0-9]+),?$/\1/p')
late=$("$baton" submit --name late --gpus 24 --time 7200 --json 2>&1 | sed -nE 's/^  "id": ([0-9]+),?$/\1/p')
for _ in $(seq 50); do  # the forecast follows the next scheduling cycle
  out=$("$baton" job "$late" --json 2>&1)
  grep -q '"waiting_kind"' <<<"$out" && break
  sleep 0.1
done
check "a job behind a reservation: position 2, kind reservation" 0 $? "$out" \
  '"queue_position": 2'
check "  ...waiting_kind reservation" 0 0 "$out" '"waiting_kind": "reservation"'
out=$("$baton" job "$big" --json 2>&1)
check "the blocked head job: position 1, kind capacity" 0 $? "$out" '"waiting_kind": "capacity"'
start=$(sed -nE 's/^  "estimated_start": "(.*)",?$/\1/p' <<<"$out")
delta=$(( $(date -u -d "$start" +%s) - submitted_at ))
check "  ...estimated start when pretrain ends (+3600 s, got +$delta s)" 0 \
  $(( delta >= 3590 && delta <= 3610 ? 0 : 1 ))
out=$("$baton" jobs 2>&1)
check "jobs shows position, estimated start and kind" 0 $? "$out" \
  "^$late +late +team-a +queued +24 +- +- +2 +[0-9T:.-]+Z +reservation"
out=$("$baton" job "$late" 2>&1)
check "job shows the forecast" 0 $? "$out" '^queue position 2  estimated start .*Z  waiting for reservation'
"$baton" cancel "$big" "$late" >/dev/null 2>&1

out=$("$baton" cancel "$id" 2>&1)
check "cancel" 0 $? "$out" "^job $id: (cancelled|cancelling)"

out=$("$baton" cancel 999999 2>&1)
check "cancel of an unknown job: exit 5, naming the job once" 5 $? "$out" '^baton: job 999999 not found$'

out=$("$baton" job 999999 2>&1)
check "unknown job: exit 5, one line" 5 $? "$out" '^baton: .*not found'
[[ $(wc -l <<<"$out") -eq 1 ]] || { echo "FAIL unknown job: not one line"; failures=$((failures + 1)); }

out=$("$baton" nodes 2>&1)
check "nodes needs the admin role: exit 4" 4 $? "$out" '^baton: .*admin'

out=$("$baton" nodes --token "$admin_token" 2>&1)
check "nodes as admin, by leaf" 0 $? "$out" '^leaf1 +healthy +4 +32 +[0-9]+ +[0-9]+ +- +n\[01-04\]'
out=$("$baton" nodes --by rack --token "$admin_token" 2>&1)
check "nodes by rack" 0 $? "$out" '^RACK +STATE +NODES +GPUS +ALLOC +FREE +REASON +NODELIST'
out=$("$baton" nodes -N --token "$admin_token" 2>&1)
check "nodes, one line per node" 0 $? "$out" '^LEAF +NODE +STATE +GPUS'
node=$(awk 'NR==2 {print $2}' <<<"$out")
out=$("$baton" drain "$node" --reason "bad fan" --token "$admin_token" 2>&1)
check "drain" 0 $? "$out" "^node $node: draining"
out=$("$baton" nodes --token "$admin_token" 2>&1)
check "nodes shows the drain reason" 0 $? "$out" " drain +1 +8 +[0-9]+ +[0-9]+ +bad fan +$node"
out=$("$baton" resume "$node" --token "$admin_token" 2>&1)
check "resume" 0 $? "$out" "^node $node: active"

printf 'name: [unclosed\n' >"$work/bad.yaml"
out=$("$baton" submit "$work/bad.yaml" 2>&1)
check "malformed YAML: exit 2, names the file" 2 $? "$out" "bad.yaml:.*malformed YAML"

out=$("$baton" submit --gpus 0 2>&1)
check "no GPUs and no file: exit 2" 2 $? "$out" '^baton: '

out=$("$baton" submit --no-such-flag 2>&1)
check "an unknown flag: exit 2 (bad input), naming it" 2 $? "$out" 'no-such-flag'
out=$("$baton" submit --help 2>&1)
check "--help: exit 0" 0 $? "$out" 'Usage'

out=$("$baton" jobs --url http://127.0.0.1:1 2>&1)
check "unreachable daemon: exit 3" 3 $? "$out" '^baton: cannot reach baton at http://127.0.0.1:1'

out=$("$baton" jobs --token "expired-or-unknown-token-0000" 2>&1)
check "rejected token: exit 4" 4 $? "$out" '^baton: the daemon refused the token'

out=$("$baton" submit --gpus 16 --gpus-per-node 3 --name odd 2>&1)
check "a job the daemon refuses: exit 1" 1 $? "$out" '^baton: '

out=$("$baton" top -n 1 2>&1)
check "top, one refresh" 0 $? "$out" 'GPUs [0-9]+/[0-9]+ allocated'

out=$("$baton" completion bash 2>&1)
check "bash completion lists the commands" 0 $? "$out" 'submit jobs queue job cancel'

[[ -n ${SHOW:-} ]] && { "$baton" jobs --all; "$baton" job 1; "$baton" nodes --token "$admin_token" | head -6; "$baton" top -n 1; }
finish
