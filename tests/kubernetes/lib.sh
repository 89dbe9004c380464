# Sourced by the tests of tests/kubernetes/ after they started a control plane in $work/plane
# (scripts/k8s-control-plane.sh start): requests to its apiserver with curl, and kwok's nodes.

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

# ready_nodes TOKEN N: waits (20 s at most) until N kwok nodes are Ready; prints how many are.
ready_nodes() {
  local ready=0
  for _ in $(seq 66); do
    api "$1" GET "/api/v1/nodes?labelSelector=type%3Dkwok" >/dev/null
    ready=$(json 'print(sum(any(c["type"] == "Ready" and c["status"] == "True" for c in n["status"].get("conditions", [])) for n in d["items"]))')
    [[ $ready == "$2" ]] && break
    sleep 0.3
  done
  echo "$ready"
}
