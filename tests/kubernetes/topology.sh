#!/usr/bin/env bash
# `baton serve --executor kubernetes` on 64 kwok nodes of 8 GPUs under 4 leaf switches (the
# baton.io/leaf labels of scripts/k8s-control-plane.sh add-nodes), one of them cordoned. Gangs of
# 8-GPU pods that require one leaf (baton.io/topology-required: leaf) must land whole on one leaf
# and never on the cordoned node; a gang that fits no leaf stays pending as a queued job with an
# Event on its first pod naming why; a gang of a higher PriorityClass preempts a whole gang (its
# pods deleted, its job ended: Kubernetes cannot bind a deleted pod again); baton restarted adopts
# every bound gang and binds nothing twice. Then the dry-run executor, on the cluster `baton topo
# --kubeconfig` reads from the same apiserver, with the same scheduler config, the same node
# drained and the same job specs submitted in the same order, must place every job on the same
# nodes in the same rank order. Skips (77) like control_plane.sh when the control plane cannot be
# built.
# Usage: topology.sh BATON SOURCE_DIR
set -uo pipefail
baton=$(realpath "$1")
src=$(realpath "$2")
name=topo
source "$src/tests/kubernetes/session.sh"  # $plane, $work, $admin, stop_serve; lib.sh

out=$("$plane" add-nodes "$work/plane" 64 16 2>&1)
check "add-nodes 64, 16 per leaf" 0 $? "$out" "added 64 nodes"
check "kwok makes the 64 nodes Ready" 0 0 "$(ready_nodes "$admin" 64)" "^64$"
check "baton's RBAC applied" 0 0 "$(apply_baton_rbac "$src")" "^(201 )+$"
check "namespace jobs" 0 0 "$(jobs_namespace)" "^201 201$"
cat >"$work/urgent.json" <<'EOF'
{"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "urgent"},
 "value": 100, "description": "preempts the default priority (0)"}
EOF
check "PriorityClass urgent" 0 0 "$(api "$admin" POST /apis/scheduling.k8s.io/v1/priorityclasses "$work/urgent.json")" "^201$"

# The daemon's default config, with no minimum run time before a job may be preempted.
{ cat "$src/data/scheduler/daemon.yaml"; echo "min_run_time: 0"; } >"$work/scheduler.yaml"

# The cluster as baton reads it from the apiserver, for the dry-run comparison below.
out=$("$baton" topo --kubeconfig "$work/plane/kubeconfig-baton" --export yaml -o "$work/cluster.yaml" 2>&1)
check "baton topo --kubeconfig reads the cluster" 0 $? "$out"
out=$("$baton" topo --file "$work/cluster.yaml" 2>&1)
check "  64 nodes of 8 GPUs under 4 leaves" 0 0 "$(grep -E '^  (nodes|GPUs) |x leaf' <<<"$out" | awk '{print $NF == "leaf" ? $(NF-2) : $2}' | tr '\n' ' ')" "^64 512 4 $"

token=$(new_token admin)
cat >"$work/auth.yaml" <<EOF
principals:
  - {name: ops, role: admin, token: "$token"}
EOF
serve() {  # serve LOG EXECUTOR-FLAGS...: starts baton serve; sets serve_pid and BATON_URL
  local log=$1; shift
  "$baton" serve "$@" --scheduler-config "$work/scheduler.yaml" --listen 127.0.0.1:0 \
    --auth "$work/auth.yaml" --log-dir "$work/logs" >"$log" 2>&1 &
  serve_pid=$!
  local port
  port=$(listening_port "$log" "$serve_pid") || return 1
  export BATON_URL="http://127.0.0.1:$port" BATON_TOKEN=$token
}
k8s=(--executor kubernetes --kubeconfig "$work/plane/kubeconfig-baton" --db "$work/k8s.db")
serve "$work/serve.log" "${k8s[@]}"
check "baton serve --executor kubernetes starts" 0 $? \
  "$(grep -m1 'cluster kubernetes' "$work/serve.log")" "64 nodes, 512 GPUs"

# n0002 (leaf1) cordoned: baton sees it draining within its node poll (5 s).
echo '{"spec": {"unschedulable": true}}' >"$work/cordon.json"
code=$(api "$admin" PATCH /api/v1/nodes/n0002 "$work/cordon.json" application/merge-patch+json)
v=""
for _ in $(seq 60); do
  v=$("$baton" nodes --json 2>&1 | /usr/bin/python3 -c "import json, sys; print(' '.join(n['node'] + ':' + n['health'] for n in json.load(sys.stdin)['nodes'] if n['node'] == 'n0002'))" 2>&1)
  grep -q draining <<<"$v" && break
  sleep 0.25
done
check "a cordoned node is draining to baton" 0 0 "$code $v" "^200 n0002:draining$"

# gang NAME SIZE [PRIORITY-CLASS]: SIZE pods NAME-0.. of 8 GPUs requiring one leaf, in one curl.
gang() {
  local i conf="$work/gang-$1.conf" pc=""
  [[ -n ${3:-} ]] && pc=', "priorityClassName": "'$3'"'
  : >"$conf"
  for ((i = 0; i < $2; i++)); do
    cat >"$work/pod-$1-$i.json" <<EOF
{"apiVersion": "v1", "kind": "Pod",
 "metadata": {"name": "$1-$i", "labels": {"scheduling.x-k8s.io/pod-group": "$1"},
              "annotations": {"baton.io/gang-size": "$2", "baton.io/topology-required": "leaf"}},
 "spec": {"schedulerName": "baton", "terminationGracePeriodSeconds": 1$pc,
          "containers": [{"name": "train", "image": "trainer",
                          "resources": {"limits": {"nvidia.com/gpu": "8"}}}]}}
EOF
    ((i > 0)) && echo next >>"$conf"
    cat >>"$conf" <<EOF
url = "$(cat "$work/plane/server")/api/v1/namespaces/jobs/pods"
cacert = "$work/plane/ca.crt"
header = "Authorization: Bearer $admin"
header = "Content-Type: application/json"
data = "@$work/pod-$1-$i.json"
output = "$work/pod-$1-$i.out"
write-out = "%{http_code}\\n"
EOF
  done
  curl -sS --config "$conf" | sort | uniq -c | awk '{printf "%s x%s", $2, $1}'
}
# gang_nodes NAME SIZE: the nodes of its pods in rank order ("-" for an unbound pod).
gang_nodes() {
  api "$admin" GET "/api/v1/namespaces/jobs/pods?labelSelector=scheduling.x-k8s.io%2Fpod-group%3D$1" >/dev/null
  json "pods = {p['metadata']['name']: p for p in d['items']}; print(' '.join(pods['$1-%d' % i]['spec'].get('nodeName', '-') if '$1-%d' % i in pods else 'gone' for i in range($2)))"
}
# leaves NODES...: the distinct leaves of the nodes (n0001-n0016 are leaf1, ...).
leaves() {
  local n
  for n in "$@"; do echo "leaf$(( (10#${n#n} - 1) / 16 + 1 ))"; done | sort -u | tr '\n' ' '
}
# placed NAME SIZE: waits (30 s) until every pod of the gang is bound; prints its nodes.
placed() {
  local v=""
  for _ in $(seq 120); do
    v=$(gang_nodes "$1" "$2")
    grep -qE -- '(^| )(-|gone)( |$)' <<<"$v" || break
    sleep 0.25
  done
  echo "$v"
}

# Leaf-sized gangs: each lands whole on one leaf, none on n0002 (so leaf1, with 15 nodes left, can
# take the 12 of 'a' but not the 16 of 'b').
declare -A nodes_of
for g in a:12 b:16 c:16 e:8; do
  name=${g%%:*} size=${g##*:}
  code=$(gang "$name" "$size")
  nodes=$(placed "$name" "$size")
  nodes_of[$name]=$nodes
  check "gang $name ($size pods) lands whole on one leaf" 0 0 "$code | $(leaves $nodes)" "^201 x$size \| leaf[1-4] $"
  check "  on $size distinct nodes, none cordoned" 0 0 "$(tr ' ' '\n' <<<"$nodes" | sort -u | grep -c .) $(grep -c n0002 <<<"$nodes")" "^$size 0$"
  check "  and is a running job" 0 0 "$(job_state "$name" 10 running)" "^[0-9]+ running$"
done

# 'w' needs 12 nodes of one leaf; the most any leaf has free is 8: it waits, as a queued job, and
# an Event on its first pod says why (the scheduler's words).
code=$(gang w 12)
v=$(job_state w 10 queued)
check "gang w (12 pods, no leaf has room) is a queued job" 0 0 "$code $v" "^201 x12 [0-9]+ queued$"
w=${v%% *}
note=""
for _ in $(seq 40); do
  api "$admin" GET /apis/events.k8s.io/v1/namespaces/jobs/events >/dev/null
  note=$(json "print(' | '.join(e['reason'] + ': ' + e['note'] for e in d['items'] if e['regarding']['name'] == 'w-0'))")
  grep -q queued <<<"$note" && break
  sleep 0.25
done
check "an Event on w-0 says why it waits" 0 0 "$note" "GangWaiting: queued: .*leaf"
echo "  ($note)"
check "  its pods stay unbound" 0 0 "$(gang_nodes w 12)" "^(- ){11}-$"

# 'u' (PriorityClass urgent: spec.priority 100) needs a whole leaf: it preempts what runs on one
# (the least work to evict: gang e and leaf4's 8 idle nodes); the victims' pods are deleted and
# their jobs end (a pod cannot be bound again; its owner would make a new gang).
code=$(gang u 16 urgent)
nodes=$(placed u 16)
nodes_of[u]=$nodes
check "gang u (urgent, 16 pods) is bound whole on one leaf" 0 0 "$code | $(leaves $nodes)" "^201 x16 \| leaf[1-4] $"
victims="" survivors=""
for g in a b c e; do
  if [[ $(leaves ${nodes_of[$g]}) == "$(leaves $nodes)" ]]; then victims+="$g "; else survivors+="$g "; fi
done
check "  where gangs ran: the victims" 0 0 "$victims" "^[abce]( [abce])* $"
for g in $victims; do
  v=$(job_state "$g" 10 failed)
  check "  victim $g's job ends" 0 0 "$v" "^[0-9]+ failed$"
  check "  preempted by u, its pods deleted" 0 0 "$("$baton" job "${v%% *}" 2>&1)" "preempted by job [0-9]+"
  check "  and gone" 0 0 "$(gang_nodes "$g" "$(wc -w <<<"${nodes_of[$g]}")")" "^(gone )*gone$"
done
check "w still waits" 0 0 "$(job_state w 1 .)" "^$w queued$"

# baton restarted mid-run: every bound gang is adopted, nothing is bound twice.
stop_serve
serve "$work/serve2.log" "${k8s[@]}"
check "baton serve starts again" 0 $?
for g in $survivors u; do
  check "job $g is still running after the restart" 0 0 "$(job_state $g 10 running)" "^[0-9]+ running$"
done
bound=$(wc -w <<<"$survivors u")
for _ in $(seq 40); do [[ $(grep -c 'adopted' "$work/serve2.log") -ge $bound ]] && break; sleep 0.25; done
check "the $bound bound gangs are adopted, none bound again" 0 0 \
  "$(grep -c 'adopted: [0-9]* bound pods' "$work/serve2.log") $(grep -c 'bound: [0-9]* pods' "$work/serve2.log")" "^$bound 0$"
for g in $survivors u; do
  check "  gang $g's pods where they were" 0 0 "$(gang_nodes $g "$(wc -w <<<"${nodes_of[$g]}")")" "^${nodes_of[$g]}$"
done
check "w is the same queued job" 0 0 "$(job_state w 10 queued)" "^$w queued$"
"$baton" jobs --all --json >"$work/k8s-jobs.json"
stop_serve

# The dry-run executor on the same cluster, config, drained node and job specs, in the same order,
# each submitted once the one before is placed (or, for w, queued): the same nodes, rank by rank.
serve "$work/dry.log" --executor dry-run --topology "$work/cluster.yaml" --speedup 1 --db "$work/dry.db"
check "baton serve --executor dry-run on that cluster starts" 0 $?
check "n0002 drained" 0 0 "$("$baton" drain n0002 2>&1)" "n0002"
dry_nodes() {  # dry_nodes NAME: the nodes of baton's job NAME in rank order, or its state
  "$baton" jobs --all --json | /usr/bin/python3 -c "
import json, sys
for j in json.load(sys.stdin)['jobs']:
    if j['name'] == '$1':
        print(' '.join(n['node'] for n in j['placement']['nodes']) if j.get('placement') else j['state'])"
}
for g in a b c e w u; do
  /usr/bin/python3 -c "import json; print(json.dumps(next(j['spec'] for j in json.load(open('$work/k8s-jobs.json'))['jobs'] if j['name'] == '$g')))" >"$work/spec-$g.json"
  "$baton" submit "$work/spec-$g.json" >/dev/null 2>&1 || check "dry-run submission of $g" 0 1
  want=running; [[ $g == w ]] && want=queued
  check "dry-run job $g is $want" 0 0 "$(job_state $g 10 "$want")" "^[0-9]+ $want$"
  [[ $g == w ]] && continue
  check "  placed on the nodes the kubernetes executor bound" 0 0 "$(dry_nodes $g)" "^${nodes_of[$g]}$"
done
for g in $victims; do
  check "dry-run: u preempted $g too (requeued there)" 0 0 "$(job_state "$g" 10 queued)" "^[0-9]+ queued$"
done
stop_serve
finish
