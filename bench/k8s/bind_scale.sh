#!/usr/bin/env bash
# How fast `baton serve --executor kubernetes` binds gangs on a large simulated cluster: a real
# etcd, kube-apiserver and kwok (scripts/k8s-control-plane.sh), NODES kwok nodes of 8 GPUs (16 per
# leaf), then GANGS gangs of PODS pods of 1 GPU each (all fit at once: nothing waits for capacity),
# created by 4 client threads as fast as the apiserver takes them. A watch records when each pod
# is created and when it is bound (both seen by this script's clock); it prints pods bound per
# second (first creation to last binding) and the time from a pod's creation to its binding
# (median, p90, p99, max), once every pod is bound or after the deadline.
#
# Usage: bench/k8s/bind_scale.sh [BATON] [NODES] [GANGS] [PODS]
#   defaults: build/release/src/cli/baton 2000 1000 10 (the issue's 2,000 nodes, 10,000 pods)
#   BATON_BENCH_LOG=FILE keeps baton's log there.
set -euo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
baton=$(realpath "${1:-$src/build/release/src/cli/baton}")
nodes=${2:-2000} gangs=${3:-1000} pods=${4:-10}
plane="$src/scripts/k8s-control-plane.sh"
"$plane" build >/dev/null

work=$(mktemp -d -t baton-k8s-bench.XXXXXX)
serve_pid=""
cleanup() {
  [[ -n ${BATON_BENCH_LOG:-} && -f $work/serve.log ]] && cp "$work/serve.log" "$BATON_BENCH_LOG"
  [[ -n $serve_pid ]] && kill -TERM "$serve_pid" 2>/dev/null && wait "$serve_pid" 2>/dev/null
  "$plane" stop "$work/plane" >/dev/null 2>&1
  rm -rf "$work"
}
trap cleanup EXIT
"$plane" start "$work/plane" >/dev/null
admin=$(cat "$work/plane/admin.token")
source "$src/tests/kubernetes/lib.sh"  # api, json, ready_nodes, apply_baton_rbac, jobs_namespace
"$plane" add-nodes "$work/plane" "$nodes" 16 >/dev/null
ready=$(ready_nodes "$admin" "$nodes" 600)
[[ $ready == "$nodes" ]] || { echo "only $ready of $nodes nodes Ready" >&2; exit 1; }
apply_baton_rbac "$src" >/dev/null
jobs_namespace >/dev/null

printf 'principals:\n  - {name: ops, role: admin, token: "%s"}\n' "$(head -c 24 /dev/urandom | base64 | tr -d '/+=')" >"$work/auth.yaml"
"$baton" serve --executor kubernetes --kubeconfig "$work/plane/kubeconfig-baton" \
  --listen 127.0.0.1:0 --db "$work/baton.db" --auth "$work/auth.yaml" --log-dir "$work/logs" \
  >"$work/serve.log" 2>&1 &
serve_pid=$!
for _ in $(seq 600); do grep -q "listening on" "$work/serve.log" && break; sleep 0.1; done
grep -m1 "cluster kubernetes" "$work/serve.log" || { cat "$work/serve.log" >&2; exit 1; }

set +e
/usr/bin/python3 - "$work/plane" "$gangs" "$pods" <<'EOF'
import http.client, json, ssl, statistics, sys, threading, time, urllib.parse

plane, gangs, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
server = urllib.parse.urlparse(open(plane + "/server").read().strip())
token = open(plane + "/admin.token").read().strip()
ctx = ssl.create_default_context(cafile=plane + "/ca.crt")
headers = {"Authorization": "Bearer " + token, "Content-Type": "application/json"}
def conn():
    return http.client.HTTPSConnection(server.hostname, server.port, context=ctx, timeout=600)

created, bound, lock = {}, {}, threading.Lock()
total = gangs * size
done = threading.Event()

def watch():
    # One watch from "now": every pod baton binds shows as a MODIFIED event with spec.nodeName.
    c = conn()
    c.request("GET", "/api/v1/namespaces/jobs/pods?limit=1", headers=headers)
    rv = json.loads(c.getresponse().read())["metadata"]["resourceVersion"]
    c.request("GET", "/api/v1/namespaces/jobs/pods?watch=1&allowWatchBookmarks=false"
              "&resourceVersion=" + rv, headers=headers)
    r = c.getresponse()
    buf = b""
    while not done.is_set():
        chunk = r.read1(1 << 16)
        if not chunk:
            break
        buf += chunk
        *lines, buf = buf.split(b"\n")
        now = time.monotonic()
        for line in lines:
            if not line.strip():
                continue
            ev = json.loads(line)
            pod = ev["object"]
            name = pod["metadata"]["name"]
            if pod.get("spec", {}).get("nodeName"):
                with lock:
                    if name not in bound:
                        bound[name] = now
                        if len(bound) == total:
                            done.set()

def create(part, parts):
    c = conn()
    for g in range(part, gangs, parts):
        for i in range(size):
            name = "g%04d-%d" % (g, i)
            body = {"apiVersion": "v1", "kind": "Pod",
                    "metadata": {"name": name,
                                 "labels": {"scheduling.x-k8s.io/pod-group": "g%04d" % g},
                                 "annotations": {"baton.io/gang-size": str(size)}},
                    "spec": {"schedulerName": "baton", "terminationGracePeriodSeconds": 1,
                             "containers": [{"name": "train", "image": "trainer",
                                             "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}
            c.request("POST", "/api/v1/namespaces/jobs/pods", body=json.dumps(body),
                      headers=headers)
            r = c.getresponse()
            r.read()
            if r.status != 201:
                sys.exit("creating %s: HTTP %d" % (name, r.status))
            with lock:
                created[name] = time.monotonic()

w = threading.Thread(target=watch, daemon=True)
w.start()
time.sleep(1)
start = time.monotonic()
threads = [threading.Thread(target=create, args=(k, 4)) for k in range(4)]
for t in threads:
    t.start()
for t in threads:
    t.join()
created_s = time.monotonic() - start
done.wait(timeout=max(600, 4 * created_s))
with lock:
    lat = sorted(bound[n] - created[n] for n in bound if n in created)
    last = max(bound.values()) if bound else start
    n = len(bound)
q = lambda p: lat[min(len(lat) - 1, int(p * len(lat)))]
print("%d gangs of %d pods (1 GPU each): created in %.1f s (%.0f pods/s)" %
      (gangs, size, created_s, total / created_s))
print("bound %d of %d pods in %.1f s from the first creation: %.0f pods/s" %
      (n, total, last - start, n / (last - start)))
if lat:
    print("creation to binding: median %.2f s, p90 %.2f s, p99 %.2f s, max %.2f s" %
          (statistics.median(lat), q(0.90), q(0.99), lat[-1]))
sys.exit(0 if n == total else 1)
EOF
rc=$?
# Where the CPU went (the whole run, start-up included): baton, and each control-plane process.
cpu() { awk -v t="$(getconf CLK_TCK)" '{printf "%.1f", ($14 + $15) / t}' "/proc/$1/stat" 2>/dev/null; }
line="CPU seconds: baton $(cpu "$serve_pid")"
while read -r name pid; do line+=", $name $(cpu "$pid")"; done <"$work/plane/pids"
echo "$line"
exit $rc
