#!/usr/bin/env bash
# The test control plane (scripts/k8s-control-plane.sh) and deploy/kubernetes/ against it: builds
# etcd, kube-apiserver and kwok (once; cached by version), starts them on loopback, adds 4 kwok
# nodes, and checks as baton's own identity that it sees them Ready with 8 nvidia.com/gpu each;
# applies deploy/kubernetes/*.yaml with a server-side dry run and then for real; checks that the
# RBAC there lets baton do its work (bind a pending pod, which kwok then runs; delete it; write
# events; its lease) and nothing more (no node writes, no secrets, no pod creation, no leases
# outside its namespace); stops everything and checks that no process of it is left.
# Skips (exit 77), saying why, when the binaries are not built and there is no Go toolchain to
# build them. A cold build takes a while (tests/kubernetes/controlplane/README.md); then seconds.
# Usage: control_plane.sh SOURCE_DIR
set -uo pipefail
src=$(realpath "$1")
source "$src/tests/lib/e2e.sh"  # check, finish
plane="$src/scripts/k8s-control-plane.sh"

if ! "$plane" bin-dir >/dev/null && ! command -v go >/dev/null; then
  echo "SKIP: no Go toolchain to build kube-apiserver, etcd and kwok (Go 1.26 on PATH)"; exit 77
fi
"$plane" build || { echo "FAIL: building the control plane"; exit 1; }

work=$(mktemp -d -t baton-k8s.XXXXXX)
cleanup() { "$plane" stop "$work/plane" >/dev/null 2>&1; rm -rf "$work"; }
trap cleanup EXIT

"$plane" start "$work/plane" || { echo "FAIL: starting the control plane"; exit 1; }
cp "$work/plane/pids" "$work/pids.started"
admin=$(cat "$work/plane/admin.token")
baton=$(cat "$work/plane/baton.token")

source "$src/tests/kubernetes/lib.sh"  # api, json, message, ready_nodes

out=$("$plane" add-nodes "$work/plane" 4 2>&1)
check "add-nodes 4" 0 $? "$out" "added 4 nodes"

# kwok marks the nodes Ready within a second or two; baton's identity may read them once its
# ClusterRole is there, so until then this reads as admin.
ready=$(ready_nodes "$admin" 4)
check "kwok makes the 4 nodes Ready" 0 0 "$ready" "^4$"

code=$(api "$baton" GET /api/v1/nodes)
check "baton may not list nodes before deploy/kubernetes is applied" 0 0 "$code" "^403$"

# deploy/kubernetes: each object by server-side apply, first as a dry run (the namespace itself
# for real first: a dry run in a namespace that does not exist is refused for that alone).
/usr/bin/python3 - "$src/deploy/kubernetes" "$work/objects" <<'EOF' >"$work/objects.tsv"
import glob, json, os, sys, yaml
plural = {"Namespace": "namespaces", "ServiceAccount": "serviceaccounts",
          "ClusterRole": "clusterroles", "ClusterRoleBinding": "clusterrolebindings",
          "Role": "roles", "RoleBinding": "rolebindings", "Deployment": "deployments"}
os.makedirs(sys.argv[2])
for f in sorted(glob.glob(os.path.join(sys.argv[1], "*.yaml"))):
    for i, o in enumerate(d for d in yaml.safe_load_all(open(f)) if d):
        group_version = o["apiVersion"]
        path = "/api/" + group_version if "/" not in group_version else "/apis/" + group_version
        if "namespace" in o["metadata"]:
            path += "/namespaces/" + o["metadata"]["namespace"]
        path += "/" + plural[o["kind"]] + "/" + o["metadata"]["name"]
        body = os.path.join(sys.argv[2], "%s.%d.json" % (os.path.basename(f), i))
        json.dump(o, open(body, "w"))
        print("%s\t%s\t%s/%s" % (path, body, o["kind"], o["metadata"]["name"]))
EOF
check "deploy/kubernetes parses" 0 $? "$(cat "$work/objects.tsv")" "Deployment/baton"
apply() {  # apply PATH BODY [QUERY]
  api "$admin" PATCH "$1?fieldManager=baton-test&force=true${3:-}" "$2" application/apply-patch+yaml
}
ns_body=$(awk -F'\t' '$1 == "/api/v1/namespaces/baton-system" { print $2 }' "$work/objects.tsv")
code=$(apply /api/v1/namespaces/baton-system "$ns_body")
check "namespace baton-system created" 0 0 "$code" "^20[01]$"
while IFS=$'\t' read -r path body what; do
  code=$(apply "$path" "$body" "&dryRun=All")
  check "dry run accepts $what" 0 0 "$code $(message)" "^20[01] "
done <"$work/objects.tsv"
code=$(api "$admin" GET /apis/apps/v1/namespaces/baton-system/deployments/baton)
check "a dry run stores nothing" 0 0 "$code" "^404$"
while IFS=$'\t' read -r path body what; do
  code=$(apply "$path" "$body")
  check "applied $what" 0 0 "$code $(message)" "^20[01] "
done <"$work/objects.tsv"

# What baton may do, as baton: its own view of the nodes...
code=$(api "$baton" GET "/api/v1/nodes?labelSelector=type%3Dkwok")
gpus=$( [[ $code == 200 ]] && json 'print(" ".join(sorted(n["status"]["allocatable"].get("nvidia.com/gpu", "-") for n in d["items"])))')
check "baton lists 4 nodes with nvidia.com/gpu 8" 0 0 "$code $gpus" "^200 8 8 8 8$"
labels=$( [[ $code == 200 ]] && json 'print(" ".join(n["metadata"]["labels"]["baton.io/leaf"] + "/" + n["metadata"]["labels"]["topology.kubernetes.io/zone"] for n in d["items"]))')
check "the nodes carry topology labels" 0 0 "$labels" "^leaf1/zone-a leaf1/zone-a leaf1/zone-a leaf1/zone-a$"

# ...a pending pod of its scheduler bound to a node (which kwok then runs), and deleted.
cat >"$work/ns.json" <<'EOF'
{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "jobs"}}
EOF
cat >"$work/sa.json" <<'EOF'
{"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}}
EOF
cat >"$work/pod.json" <<'EOF'
{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "rank-0"},
 "spec": {"schedulerName": "baton", "containers": [{"name": "train", "image": "trainer",
   "resources": {"limits": {"nvidia.com/gpu": "8"}}}]}}
EOF
cat >"$work/binding.json" <<'EOF'
{"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "rank-0"},
 "target": {"apiVersion": "v1", "kind": "Node", "name": "n0002"}}
EOF
cat >"$work/event.json" <<'EOF'
{"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "rank-0.waiting"},
 "eventTime": "2026-01-01T00:00:00.000000Z", "reportingController": "baton.io/scheduler",
 "reportingInstance": "baton-0", "action": "Scheduling", "reason": "Waiting", "type": "Normal",
 "note": "gang waits for 8 GPUs on one leaf",
 "regarding": {"apiVersion": "v1", "kind": "Pod", "namespace": "jobs", "name": "rank-0"}}
EOF
cat >"$work/lease.json" <<'EOF'
{"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "baton"},
 "spec": {"holderIdentity": "baton-0", "leaseDurationSeconds": 15}}
EOF
code=$(api "$admin" POST /api/v1/namespaces "$work/ns.json")
code+=" $(api "$admin" POST /api/v1/namespaces/jobs/serviceaccounts "$work/sa.json")"
code+=" $(api "$admin" POST /api/v1/namespaces/jobs/pods "$work/pod.json")"
check "a pending pod with schedulerName baton" 0 0 "$code" "^201 201 201$"
code=$(api "$baton" POST /api/v1/namespaces/jobs/pods/rank-0/binding "$work/binding.json")
check "baton binds it (pods/binding create)" 0 0 "$code $(message)" "^201 "
phase=""
for _ in $(seq 100); do
  api "$baton" GET /api/v1/namespaces/jobs/pods/rank-0 >/dev/null
  phase=$(json 'print(d["spec"].get("nodeName", "") + " " + d["status"].get("phase", ""))')
  [[ $phase == "n0002 Running" ]] && break
  sleep 0.3
done
check "bound to n0002, kwok runs it" 0 0 "$phase" "^n0002 Running$"
code=$(api "$baton" POST /apis/events.k8s.io/v1/namespaces/jobs/events "$work/event.json")
check "baton writes an event on the pod" 0 0 "$code $(message)" "^201 "
code=$(api "$baton" POST /apis/coordination.k8s.io/v1/namespaces/baton-system/leases "$work/lease.json")
code+=" $(api "$baton" GET /apis/coordination.k8s.io/v1/namespaces/baton-system/leases/baton)"
check "baton creates and reads its lease" 0 0 "$code" "^201 200$"
code=$(api "$baton" DELETE /api/v1/namespaces/jobs/pods/rank-0)
check "baton deletes (preempts) the pod" 0 0 "$code" "^200$"

# ...and nothing more.
code=$(api "$baton" POST /api/v1/namespaces/jobs/pods "$work/pod.json")
check "baton may not create pods" 0 0 "$code" "^403$"
code=$(api "$baton" DELETE /api/v1/nodes/n0001)
check "baton may not delete nodes" 0 0 "$code" "^403$"
echo '{"spec": {"unschedulable": true}}' >"$work/cordon.json"
code=$(api "$baton" PATCH /api/v1/nodes/n0001 "$work/cordon.json" application/merge-patch+json)
check "baton may not cordon nodes" 0 0 "$code" "^403$"
code=$(api "$baton" GET /api/v1/namespaces/kube-system/secrets)
code+=" $(api "$baton" GET /api/v1/secrets)"
check "baton may not read secrets" 0 0 "$code" "^403 403$"
code=$(api "$baton" POST /apis/coordination.k8s.io/v1/namespaces/kube-system/leases "$work/lease.json")
check "baton may not take leases outside baton-system" 0 0 "$code" "^403$"
code=$(api "$baton" POST /apis/rbac.authorization.k8s.io/v1/clusterroles "$work/ns.json")
check "baton may not write RBAC" 0 0 "$code" "^403$"

"$plane" stop "$work/plane"
check "stop" 0 $?
left=""
while read -r name pid; do
  if [[ -d /proc/$pid ]] && ! sed 's/.*) //' "/proc/$pid/stat" 2>/dev/null | grep -q '^Z' &&
     tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF "$work/plane"; then
    left+="$name($pid) "
  fi
done <"$work/pids.started"
check "no process of the control plane is left" 0 0 "[$left]" '^\[\]$'

finish
