#!/usr/bin/env bash
# `baton serve --executor kubernetes` against the real control plane (scripts/k8s-control-plane.sh):
# 4 kwok nodes of 8 GPUs, baton's RBAC from deploy/kubernetes/, baton with its own identity
# (kubeconfig-baton). Gangs of pods (schedulerName baton, scheduling.x-k8s.io/pod-group +
# baton.io/gang-size) created as admin must become baton jobs, be bound whole in rank order with
# their rank annotations, and their phases must drive the jobs: Running keeps the job running, all
# Succeeded (kwok completes pods a Job owns) succeeds it, one Failed deletes the rest and fails the
# job once they are gone (a pod still Terminating holds its node).
# A gang with a pod missing is not bound. Skips (77) like control_plane.sh when the control plane
# cannot be built.
# Usage: executor.sh BATON SOURCE_DIR
set -uo pipefail
baton=$(realpath "$1")
src=$(realpath "$2")
name=exec
source "$src/tests/kubernetes/session.sh"  # $plane, $work, $admin, stop_serve; lib.sh

out=$("$plane" add-nodes "$work/plane" 4 2>&1)
check "add-nodes 4" 0 $? "$out" "added 4 nodes"
ready=$(ready_nodes "$admin" 4)
check "kwok makes the 4 nodes Ready" 0 0 "$ready" "^4$"

code=$(apply_baton_rbac "$src")
check "baton's RBAC applied" 0 0 "$code" "^(201 )+$"
code=$(jobs_namespace)
check "namespace jobs" 0 0 "$code" "^201 201$"

token=$(new_token admin)
cat >"$work/auth.yaml" <<EOF
principals:
  - {name: ops, role: admin, token: "$token"}
EOF
serve() {  # serve LOG: starts baton serve as baton's ServiceAccount; sets serve_pid and BATON_URL
  "$baton" serve --executor kubernetes --kubeconfig "$work/plane/kubeconfig-baton" \
    --listen 127.0.0.1:0 --db "$work/baton.db" --auth "$work/auth.yaml" --log-dir "$work/logs" \
    >"$1" 2>&1 &
  serve_pid=$!
  local port
  port=$(listening_port "$1" "$serve_pid") || return 1
  export BATON_URL="http://127.0.0.1:$port" BATON_TOKEN=$token
}
serve "$work/serve.log"
check "baton serve --executor kubernetes starts" 0 $? "$(grep -m1 'cluster kubernetes' "$work/serve.log")" \
  "cluster kubernetes: 4 nodes, 32 GPUs; executor kubernetes"

# pod NAME GROUP SIZE [OWNED]: a pod of gang GROUP of SIZE pods asking for 8 GPUs, created as admin.
# With $finalizer set, the pod carries that finalizer: deleted, it stays Terminating until the
# finalizer is removed (as a pod whose kubelet is slow to stop it).
pod() {
  local owner=""
  [[ -n ${4:-} ]] && owner=', "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "'$2'", "uid": "00000000-0000-0000-0000-0000000000'${#1}'0"}]'
  [[ -n ${finalizer:-} ]] && owner+=', "finalizers": ["'$finalizer'"]'
  cat >"$work/pod-$1.json" <<EOF
{"apiVersion": "v1", "kind": "Pod",
 "metadata": {"name": "$1", "labels": {"scheduling.x-k8s.io/pod-group": "$2"},
              "annotations": {"baton.io/gang-size": "$3"}$owner},
 "spec": {"schedulerName": "baton", "terminationGracePeriodSeconds": 1,
          "containers": [{"name": "train", "image": "trainer",
                          "resources": {"limits": {"nvidia.com/gpu": "8"}}}]}}
EOF
  api "$admin" POST /api/v1/namespaces/jobs/pods "$work/pod-$1.json"
}
# pods_say PYTHON-EXPR SECONDS PATTERN: polls the jobs namespace's pods until the expression (over
# `pods`, name -> pod) prints something matching PATTERN; echoes the last value.
pods_say() {
  local v=""
  for _ in $(seq $(($2 * 4))); do
    api "$admin" GET /api/v1/namespaces/jobs/pods >/dev/null
    v=$(json "pods = {p['metadata']['name']: p for p in d['items']}; $1" 2>&1)
    grep -qE -- "$3" <<<"$v" && break
    sleep 0.25
  done
  echo "$v"
}
node_of='lambda n: pods[n]["spec"].get("nodeName", "-")'
ann='lambda n, k: pods[n]["metadata"].get("annotations", {}).get("baton.io/" + k, "-")'

# A gang of 2, its rank-1 pod created first: bound whole, rank 0 to the placement's first node.
code="$(pod train-1 train 2) $(pod train-0 train 2)"
check "gang 'train' of 2 pods created" 0 0 "$code" "^201 201$"
v=$(pods_say "node = $node_of; a = $ann; print(' '.join('%s:%s:%s' % (n, a(n, 'rank'), a(n, 'world-size')) for n in ('train-0', 'train-1') if node(n) != '-'))" 30 "train-0:0:2 train-1:1:2")
check "baton binds both pods with their ranks" 0 0 "$v" "^train-0:0:2 train-1:1:2$"
v=$(pods_say "node = $node_of; a = $ann; print(a('train-1', 'rank0-pod'), a('train-1', 'master-addr') == node('train-0'), node('train-0') != node('train-1'))" 5 ".")
check "rank-0 pod and master address on every pod; one pod per node" 0 0 "$v" "^train-0 True True$"
v=$(job_state train 10 "running")
check "the gang is baton job 1, running" 0 0 "$v" "^1 running$"
placed=$("$baton" job 1 2>&1)
v=$(pods_say "node = $node_of; print(node('train-0'), node('train-1'))" 5 ".")
check "baton's placement lists rank 0's node first" 0 0 "$(grep -oE 'n000[0-9]' <<<"$placed" | head -2 | tr '\n' ' ')" "^$v $"
v=$(pods_say "print(pods['train-0']['status'].get('phase'), pods['train-1']['status'].get('phase'))" 30 "Running Running")
check "kwok runs them" 0 0 "$v" "^Running Running$"
sleep 1
v=$(job_state train 1 ".")
check "a running gang keeps its job running" 0 0 "$v" "^1 running$"

# A gang missing a pod is not bound and is no job.
code=$(pod part-0 part 2)
sleep 2
v=$(pods_say "print(($node_of)('part-0'))" 1 ".")
check "half a gang stays unbound" 0 0 "$code $v" "^201 -$"
v=$(job_state part 1 ".")
check "half a gang is no job" 0 0 "[$v]" '^\[\]$'
api "$admin" GET /apis/events.k8s.io/v1/namespaces/jobs/events >/dev/null
v=$(json "print(' '.join(e['regarding']['name'] + ' ' + e['reason'] + ': ' + e['note'] for e in d['items'] if e['regarding']['name'] == 'part-0'))")
check "an event on it says why it waits" 0 0 "$v" "^part-0 GangWaiting: 1 of 2 pods pending$"

# A gang a Job owns: kwok completes its pods; the job succeeds.
code="$(pod done-0 done 2 owned) $(pod done-1 done 2 owned)"
check "gang 'done' created" 0 0 "$code" "^201 201$"
v=$(job_state done 30 "succeeded")
check "every pod Succeeded: the job succeeds" 0 0 "$v" "^[0-9]+ succeeded$"

# A gang of 3 while 2 nodes are free: a queued job.
code="$(pod big-0 big 3 owned) $(pod big-1 big 3 owned) $(pod big-2 big 3 owned)"
v=$(job_state big 10 "queued")
check "gang 'big' (3 nodes, 2 free) waits as a queued job" 0 0 "$code $v" "^201 201 201 [0-9]+ queued$"
big=${v%% *}

# baton restarted: it adopts the running gang by its pods' baton.io/job annotation, binds nothing
# twice, and its job stays running.
kill -TERM "$serve_pid"; wait "$serve_pid" 2>/dev/null
check "baton serve stops on SIGTERM" 0 $?
serve "$work/serve2.log"
check "baton serve starts again" 0 $?
v=$(job_state train 10 "running")
check "the running gang's job is still running" 0 0 "$v" "^1 running$"
for _ in $(seq 20); do grep -q "job 1 adopted" "$work/serve2.log" && break; sleep 0.25; done
check "its pods are adopted, not bound again" 0 0 \
  "$(grep -c 'adopted: 2 bound pods' "$work/serve2.log") $(grep -c 'job 1 bound' "$work/serve2.log")" "^1 0$"

v=$(job_state big 10 "queued")
check "the queued gang is the same job, once" 0 0 "$v" "^$big queued$"

# A pod of the running gang deleted by somebody else: its job fails naming it, baton deletes the
# gang's other pod, and the queued gang takes the freed nodes.
code=$(api "$admin" DELETE /api/v1/namespaces/jobs/pods/train-1)
v=$(job_state train 30 "failed")
check "a deleted pod fails its gang's job" 0 0 "$code $v" "^200 1 failed$"
check "its event names the pod" 0 0 "$("$baton" job 1 2>&1)" "pod jobs/train-1 (was|is being) deleted"
v=$(pods_say "print('train-0' in pods)" 30 "False")
check "the gang's other pod is deleted" 0 0 "$v" "^False$"
v=$(pods_say "node = $node_of; print(' '.join(node(n) != '-' and 'bound' or 'pending' for n in ('big-0', 'big-1', 'big-2')))" 30 "bound bound bound")
check "the queued gang is bound once nodes free up" 0 0 "$v" "^bound bound bound$"
v=$(job_state big 30 "succeeded")
check "and succeeds" 0 0 "$v" "^$big succeeded$"

# A gang whose rank 1 fails: baton deletes rank 0, and the job fails naming rank 1 once rank 0 is
# gone. Until then rank 0 holds its GPUs (a finalizer keeps it Terminating here): the job has not
# ended, and a gang that needs its node waits.
code="$(finalizer=baton.test/hold pod bad-0 bad 2) $(pod bad-1 bad 2)"
v=$(pods_say "print(pods['bad-0']['status'].get('phase'), pods['bad-1']['status'].get('phase'))" 30 "Running Running")
check "gang 'bad' runs" 0 0 "$code $v" "^201 201 Running Running$"
echo '{"status": {"phase": "Failed", "reason": "Error", "message": "exit code 3"}}' >"$work/fail.json"
code=$(api "$admin" PATCH /api/v1/namespaces/jobs/pods/bad-1/status "$work/fail.json" application/merge-patch+json)
v=$(pods_say "print('deletionTimestamp' in pods['bad-0']['metadata'])" 30 "True")
check "a pod Failed: baton deletes the gang's other pod" 0 0 "$code $v" "^200 True$"
code="$(pod wide-0 wide 4 owned) $(pod wide-1 wide 4 owned) $(pod wide-2 wide 4 owned) $(pod wide-3 wide 4 owned)"
sleep 3
v=$(job_state bad 1 ".")
check "while that pod terminates, the job has not ended" 0 0 "$code $v" "^201 201 201 201 [0-9]+ running$"
id=${v%% *}
v=$(pods_say "print(' '.join(($node_of)(n) for n in ('wide-0', 'wide-1', 'wide-2', 'wide-3')))" 1 ".")
check "and a gang of 4 is not bound beside it" 0 0 "$v" "^- - - -$"
echo '{"metadata": {"finalizers": null}}' >"$work/unhold.json"
code=$(api "$admin" PATCH /api/v1/namespaces/jobs/pods/bad-0 "$work/unhold.json" application/merge-patch+json)
v=$(pods_say "print('bad-0' in pods)" 30 "False")
check "the pod goes once its finalizer is removed" 0 0 "$code $v" "^200 False$"
v=$(job_state bad 30 "failed")
check "then the job fails" 0 0 "$v" "^$id failed$"
events=$("$baton" job "$id" 2>&1)
check "its event names the failed pod" 0 0 "$events" "pod jobs/bad-1 failed: Error: exit code 3"
v=$(job_state wide 30 "succeeded")
check "and the gang of 4 takes the freed nodes" 0 0 "$v" "^[0-9]+ succeeded$"

# A gang found half bound after a restart (as after a crash between its two binds): its job fails
# and the bound half is deleted, all or nothing.
code="$(pod late-0 late 2) $(pod late-1 late 2)"
v=$(job_state late 30 "running")
check "gang 'late' runs" 0 0 "$code $v" "^201 201 [0-9]+ running$"
late=${v%% *}
kill -TERM "$serve_pid"; wait "$serve_pid" 2>/dev/null
check "baton serve stops" 0 $?
code=$(api "$admin" DELETE /api/v1/namespaces/jobs/pods/late-1)
v=$(pods_say "print('late-1' in pods)" 30 "False")
code+=" $v $(pod late-1 late 2)"
check "late-1 replaced by an unbound pod while baton is down" 0 0 "$code" "^200 False 201$"
serve "$work/serve3.log"
v=$(job_state late 30 "failed")
check "the half-bound gang's job fails" 0 0 "$v" "^$late failed$"
check "its event says so" 0 0 "$("$baton" job "$late" 2>&1)" "only 1 of its 2 pods were bound"
v=$(pods_say "print('late-0' in pods, ($node_of)('late-1'))" 30 "False -")
check "its bound pod is deleted, the new one left unbound" 0 0 "$v" "^False -$"

# A bind that fails undoes the gang: a queued gang loses its last pod, then nodes free up; baton
# binds ranks 0 and 1, rank 2's bind is refused (the pod is gone), and it deletes ranks 0 and 1.
code="$(pod hold-0 hold 2) $(pod hold-1 hold 2)"
v=$(job_state hold 30 "running")
check "gang 'hold' runs" 0 0 "$code $v" "^201 201 [0-9]+ running$"
code="$(pod undo-0 undo 3) $(pod undo-1 undo 3) $(pod undo-2 undo 3)"
v=$(job_state undo 30 "queued")
check "gang 'undo' waits" 0 0 "$code $v" "^201 201 201 [0-9]+ queued$"
undo=${v%% *}
code="$(api "$admin" DELETE /api/v1/namespaces/jobs/pods/undo-2)"
v=$(pods_say "print('undo-2' in pods)" 30 "False")
code+=" $v $(api "$admin" DELETE /api/v1/namespaces/jobs/pods/hold-0)"
check "undo-2 deleted while queued; hold-0 deleted to free the nodes" 0 0 "$code" "^200 False 200$"
v=$(job_state undo 30 "failed")
check "the gang's bind fails" 0 0 "$v" "^$undo failed$"
check "naming the pod, and undoing the others" 0 0 "$("$baton" job "$undo" 2>&1)" \
  "binding pod jobs/undo-2 \(rank 2\) to node n000[0-9] failed: .*2 pod\(s\) of the gang bound before it were deleted"
v=$(pods_say "print('undo-0' in pods, 'undo-1' in pods)" 30 "False False")
check "ranks 0 and 1 are gone" 0 0 "$v" "^False False$"

kill -TERM "$serve_pid"; wait "$serve_pid" 2>/dev/null
check "baton serve stops" 0 $?
serve_pid=""
finish
