# Sourced by the tests of tests/kubernetes/ after they started a control plane in $work/plane
# (scripts/k8s-control-plane.sh start): requests to its apiserver with curl, kwok's nodes, and
# baton's jobs by name (job_state, with $baton set).

# api TOKEN METHOD PATH [BODY-FILE [CONTENT-TYPE]]: prints the HTTP status; the body is in $work/out.
api() {
  local args=(-sS -o "$work/out" -w '%{http_code}' --cacert "$work/plane/ca.crt"
              -H "Authorization: Bearer $1" -X "$2")
  [[ -n ${4:-} ]] && args+=(--data-binary "@$4" -H "Content-Type: ${5:-application/json}")
  curl "${args[@]}" "$(cat "$work/plane/server")$3"
}
# json PYTHON: runs PYTHON with the last answer's body as `d`.
json() { /usr/bin/python3 -c "import json, sys; d = json.load(open('$work/out')); $1"; }
message() { json 'print(d.get("message", ""))' 2>/dev/null; }  # a failure Status's reason

# ready_nodes TOKEN N [SECONDS]: waits (20 s unless told) until N kwok nodes are Ready; prints how
# many are.
ready_nodes() {
  local ready=0 until=$((SECONDS + ${3:-20}))
  while :; do
    api "$1" GET "/api/v1/nodes?labelSelector=type%3Dkwok" >/dev/null
    ready=$(json 'print(sum(any(c["type"] == "Ready" and c["status"] == "True" for c in n["status"].get("conditions", [])) for n in d["items"]))')
    if [[ $ready == "$2" ]] || ((SECONDS >= until)); then break; fi
    sleep 0.3
  done
  echo "$ready"
}

# apply_baton_rbac SOURCE_DIR: baton's namespace, ServiceAccount and RBAC from deploy/kubernetes/
# (not its Deployment: the tests run baton here, as that ServiceAccount), created as admin; prints
# each answer's HTTP status.
apply_baton_rbac() {
  /usr/bin/python3 - "$1/deploy/kubernetes" "$work/objects" <<'EOF2' >"$work/objects.tsv"
import glob, json, os, sys, yaml
plural = {"Namespace": "namespaces", "ServiceAccount": "serviceaccounts",
          "ClusterRole": "clusterroles", "ClusterRoleBinding": "clusterrolebindings",
          "Role": "roles", "RoleBinding": "rolebindings"}
os.makedirs(sys.argv[2])
for f in sorted(glob.glob(os.path.join(sys.argv[1], "*.yaml"))):
    for i, o in enumerate(d for d in yaml.safe_load_all(open(f)) if d):
        if o["kind"] not in plural:
            continue
        gv = o["apiVersion"]
        path = ("/api/" if "/" not in gv else "/apis/") + gv
        if "namespace" in o["metadata"]:
            path += "/namespaces/" + o["metadata"]["namespace"]
        path += "/" + plural[o["kind"]]
        body = os.path.join(sys.argv[2], "%s.%d.json" % (os.path.basename(f), i))
        json.dump(o, open(body, "w"))
        print("%s\t%s\t%s/%s" % (path, body, o["kind"], o["metadata"]["name"]))
EOF2
  local codes="" path body
  while IFS=$'\t' read -r path body _; do
    codes+="$(api "$admin" POST "$path" "$body") "
  done <"$work/objects.tsv"
  echo "$codes"
}

# jobs_namespace: the namespace "jobs" and its default ServiceAccount (no controller manager
# makes it); prints the two HTTP statuses.
jobs_namespace() {
  echo '{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "jobs"}}' >"$work/ns.json"
  echo '{"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}}' >"$work/sa.json"
  echo "$(api "$admin" POST /api/v1/namespaces "$work/ns.json") $(api "$admin" POST /api/v1/namespaces/jobs/serviceaccounts "$work/sa.json")"
}
# job_state NAME SECONDS PATTERN: "ID STATE" of the job NAME that "$baton jobs --all" lists,
# polled every 0.25 s until it matches PATTERN or SECONDS pass.
job_state() {
  local v=""
  for _ in $(seq $(($2 * 4))); do
    v=$("$baton" jobs --all --json 2>&1 | /usr/bin/python3 -c "import json, sys; print(' '.join('%s %s' % (j['id'], j['state']) for j in json.load(sys.stdin)['jobs'] if j['name'] == '$1'))" 2>&1)
    grep -qE -- "$3" <<<"$v" && break
    sleep 0.25
  done
  echo "$v"
}
