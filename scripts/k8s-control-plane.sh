#!/usr/bin/env bash
# A real Kubernetes control plane on loopback for tests: etcd, kube-apiserver and kwok (simulated
# nodes and pod lifecycles), built from their released Go modules as pinned in
# tests/kubernetes/controlplane/ (kube-apiserver and etcd in go.mod, kwok in kwok/go.mod). No
# kube-scheduler and no controller manager: baton is the scheduler, and nothing else acts on
# the objects a test creates (a namespace gets no `default` ServiceAccount by itself, so a test
# that creates pods there creates it first).
#
#   k8s-control-plane.sh build             build etcd, kube-apiserver and kwok once into
#                                          $BATON_K8S_CACHE/<versions>-<hash>/ (default
#                                          /var/cache/baton-k8s); when they are there, print the
#                                          folder and build nothing. Needs Go 1.26 and the module proxy.
#   k8s-control-plane.sh bin-dir           print that folder; exit 1 when it is not built
#   k8s-control-plane.sh start DIR         PKI and tokens into DIR, then etcd, kube-apiserver
#                                          (TLS, token auth, RBAC) and kwok on free loopback ports;
#                                          returns once /readyz answers ok
#   k8s-control-plane.sh stop DIR          TERM each process of DIR/pids (KILL after 20 s), wait
#                                          until each is gone
#   k8s-control-plane.sh add-nodes DIR N [NODES_PER_LEAF]
#                                          N more kwok nodes with 8 nvidia.com/gpu each and the
#                                          topology labels of `baton topo --export k8s-labels`
#
# What start leaves in DIR: server (the https URL), ca.crt, admin.token and kubeconfig-admin
# (user "admin", group system:masters), baton.token and kubeconfig-baton (the identity baton
# has in a cluster: user system:serviceaccount:baton-system:baton with the ServiceAccount groups,
# so RBAC bound to that ServiceAccount in deploy/kubernetes/ applies to it; it may do nothing
# until that RBAC exists), pids ("NAME PID" per line), log/NAME.log, etcd-data/.
#
# A cold build (empty Go build cache; the module downloads, about half a minute, not counted) on
# the project machine, its 2 cores shared with two C++ builds, under nice -n 19, measured with
# `time` on 2026-12-04: 25 min 47 s (kube-apiserver and etcd 21 min 30 s; kwok, and the apiserver
# linked again with its version stamped, 4 min 17 s; 22 min of CPU in all). A warm call of build:
# 0.03 s; start: about 3 s.
set -euo pipefail

src=$(cd "$(dirname "$0")/.." && pwd)
mod="$src/tests/kubernetes/controlplane"
cache_root=${BATON_K8S_CACHE:-/var/cache/baton-k8s}

die() { echo "k8s-control-plane: $*" >&2; exit 1; }

module_version() {  # module_version GO_MOD MODULE
  awk -v m="$2" '$1 == m { print $2; exit } $1 == "require" && $2 == m { print $3; exit }' "$1"
}

# The cache key: the three versions a person reads, then a hash of what is pinned (go.mod, go.sum),
# etcd's entry point and build_recipe, so a change to any of them builds anew. Raise build_recipe
# when cmd_build changes what it makes (flags, stages).
build_recipe=1
bin_dir() {
  local kube etcd kwok sum
  kube=$(module_version "$mod/go.mod" k8s.io/kubernetes)
  etcd=$(module_version "$mod/go.mod" go.etcd.io/etcd/server/v3)
  kwok=$(module_version "$mod/kwok/go.mod" sigs.k8s.io/kwok)
  [[ -n $kube && -n $etcd && -n $kwok ]] || die "cannot read the pinned versions from $mod"
  sum=$({ echo "recipe $build_recipe"
          cat "$mod/go.mod" "$mod/go.sum" "$mod/etcd/main.go" "$mod/kwok/go.mod" "$mod/kwok/go.sum"
        } | sha256sum | cut -c1-12)
  echo "$cache_root/kube-$kube-etcd-$etcd-kwok-$kwok-$sum"
}

built() { [[ -x $1/etcd && -x $1/kube-apiserver && -x $1/kwok && -f $1/kwok-stages.yaml ]]; }

cmd_build() {
  local out tmp kube
  out=$(bin_dir)
  if built "$out"; then echo "$out"; return 0; fi
  command -v go >/dev/null || die "go is not on PATH (Go 1.26 builds the control plane)"
  mkdir -p "$cache_root"
  # One build at a time per cache; the loser of the race finds the binaries there.
  exec 9>"$cache_root/.build.lock"
  flock 9
  if built "$out"; then echo "$out"; return 0; fi
  tmp=$(mktemp -d "$cache_root/.build.XXXXXX")
  kube=$(module_version "$mod/go.mod" k8s.io/kubernetes)
  local minor=${kube#v1.}; minor=${minor%%.*}
  # The version the apiserver reports (/version, and kwok reads it); its feature gates and
  # API levels come from the source itself.
  local ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$kube"
  ldflags+=" -X k8s.io/component-base/version.gitMajor=1"
  ldflags+=" -X k8s.io/component-base/version.gitMinor=$minor"
  ldflags+=" -X k8s.io/component-base/version.gitTreeState=clean"
  echo "building kube-apiserver $kube and etcd into $out (a cold build takes a while)" >&2
  (cd "$mod" && GOFLAGS=-mod=readonly nice -n 19 go build -trimpath -ldflags "$ldflags" \
      -o "$tmp/" k8s.io/kubernetes/cmd/kube-apiserver ./etcd)
  echo "building kwok $(module_version "$mod/kwok/go.mod" sigs.k8s.io/kwok)" >&2
  (cd "$mod/kwok" && GOFLAGS=-mod=readonly nice -n 19 go build -trimpath -ldflags "-s -w" \
      -o "$tmp/" sigs.k8s.io/kwok/cmd/kwok)
  # kwok simulates nothing without Stage objects: the same defaults kwokctl uses (nodes become
  # Ready and renew a lease; pods on them run, complete and are deleted), from kwok's module.
  local kwok_src stage
  kwok_src=$(cd "$mod/kwok" && go list -m -f '{{.Dir}}' sigs.k8s.io/kwok)
  for stage in node/fast/node-initialize node/heartbeat-with-lease/node-heartbeat-with-lease \
               pod/fast/pod-ready pod/fast/pod-complete pod/fast/pod-delete; do
    echo "---"
    cat "$kwok_src/kustomize/stage/$stage.yaml"
  done >"$tmp/kwok-stages.yaml"
  chmod 755 "$tmp"
  rm -rf "$out"
  mv "$tmp" "$out"
  echo "$out"
}

free_port() {
  /usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

random_token() { od -An -tx1 -N16 /dev/urandom | tr -d ' \n'; }

write_kubeconfig() {  # write_kubeconfig FILE SERVER CA USER TOKEN
  cat >"$1" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: baton-test
  cluster:
    server: $2
    certificate-authority-data: $(base64 -w0 "$3")
users:
- name: $4
  user:
    token: $5
contexts:
- name: baton-test
  context: {cluster: baton-test, user: $4}
current-context: baton-test
EOF
  chmod 600 "$1"
}

# Whether PID is a process that has not exited (a zombie has).
alive() {  # alive PID
  [[ -r /proc/$1/stat ]] && ! sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | grep -q '^Z'
}

# A PID of DIR/pids is ours only while its command line still names DIR (PIDs are reused).
ours() {  # ours PID DIR
  [[ -r /proc/$1/cmdline ]] && tr '\0' ' ' <"/proc/$1/cmdline" | grep -qF -- "$2" && alive "$1"
}

start_process() {  # start_process DIR NAME BINARY ARGS...
  local dir=$1 name=$2; shift 2
  nohup "$@" </dev/null >"$dir/log/$name.log" 2>&1 &
  echo "$name $!" >>"$dir/pids"
}

# Why NAME (PID, a child of this shell) is gone: its exit status or the signal that killed it,
# the end of its log, and, when it logged nothing (a process killed before its first line, or a
# log the disk had no room for), the free disk and memory: the machines CI runs on are shared.
exited() {  # exited DIR NAME PID
  local dir=$1 name=$2 status=0
  wait "$3" 2>/dev/null || status=$?
  if ((status > 128)); then
    echo "k8s-control-plane: $name was killed by signal $((status - 128)) ($(kill -l $((status - 128)) 2>/dev/null))" >&2
  else
    echo "k8s-control-plane: $name exited with status $status" >&2
  fi
  if [[ -s $dir/log/$name.log ]]; then
    echo "the end of $dir/log/$name.log:" >&2
    tail -20 "$dir/log/$name.log" >&2
  else
    echo "$dir/log/$name.log is empty; free disk and memory:" >&2
    df -h "$dir" >&2 || true
    grep -E '^(MemAvailable|MemTotal):' /proc/meminfo >&2 || true
  fi
}

# NAME is a child of this shell, so its PID is not reused before `wait` reaps it: whether it runs
# is whether it is alive. (Not `ours`: while a process is in execve its command line reads empty
# for a moment, and a start under load once took the apiserver for exited there.)
wait_for() {  # wait_for DIR NAME SECONDS COMMAND...: until COMMAND succeeds while NAME runs
  local dir=$1 name=$2 seconds=$3 pid; shift 3
  pid=$(awk -v n="$name" '$1 == n { print $2 }' "$dir/pids")
  for _ in $(seq $((seconds * 5))); do
    "$@" >/dev/null 2>&1 && return 0
    if ! alive "$pid"; then
      exited "$dir" "$name" "$pid"
      cmd_stop "$dir"; exit 1
    fi
    sleep 0.2
  done
  echo "k8s-control-plane: $name not ready after $seconds s; the end of $dir/log/$name.log:" >&2
  tail -20 "$dir/log/$name.log" >&2
  cmd_stop "$dir"; exit 1
}

readyz() {  # readyz DIR
  [[ $(curl -sS --max-time 5 --cacert "$1/ca.crt" -H "Authorization: Bearer $(cat "$1/admin.token")" \
         "$(cat "$1/server")/readyz") == ok ]]
}

cmd_start() {
  local dir bin
  [[ -n ${1:-} ]] || die "usage: start DIR"
  mkdir -p "$1"
  dir=$(cd "$1" && pwd)
  [[ ! -s $dir/pids ]] || die "$dir/pids exists: stop that control plane first"
  bin=$(bin_dir)
  built "$bin" || die "not built: run $0 build first"
  command -v openssl >/dev/null || die "openssl is not installed"
  mkdir -p "$dir/pki" "$dir/log"
  : >"$dir/pids"

  # A CA, the apiserver's serving certificate for 127.0.0.1 and localhost, and the key that signs
  # ServiceAccount tokens.
  local pki=$dir/pki
  openssl req -x509 -newkey rsa:2048 -nodes -days 7 -subj /CN=baton-test-ca \
    -keyout "$pki/ca.key" -out "$pki/ca.crt" 2>/dev/null
  openssl req -newkey rsa:2048 -nodes -subj /CN=kube-apiserver \
    -keyout "$pki/apiserver.key" -out "$pki/apiserver.csr" 2>/dev/null
  printf 'subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:kubernetes.default.svc\n' >"$pki/san.ext"
  openssl x509 -req -in "$pki/apiserver.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" \
    -CAcreateserial -days 7 -extfile "$pki/san.ext" -out "$pki/apiserver.crt" 2>/dev/null
  openssl genrsa -out "$pki/sa.key" 2048 2>/dev/null
  cp "$pki/ca.crt" "$dir/ca.crt"

  local admin_token baton_token kwok_token
  admin_token=$(random_token); baton_token=$(random_token); kwok_token=$(random_token)
  {
    echo "$admin_token,admin,admin-uid,\"system:masters\""
    echo "$kwok_token,kwok,kwok-uid,\"system:masters\""
    echo "$baton_token,system:serviceaccount:baton-system:baton,baton-uid,\"system:serviceaccounts,system:serviceaccounts:baton-system\""
  } >"$pki/tokens.csv"
  chmod 600 "$pki/tokens.csv" "$pki"/*.key
  echo "$admin_token" >"$dir/admin.token"
  echo "$baton_token" >"$dir/baton.token"

  local etcd_port etcd_peer_port api_port kwok_port
  etcd_port=$(free_port); etcd_peer_port=$(free_port); api_port=$(free_port); kwok_port=$(free_port)
  local server="https://127.0.0.1:$api_port"
  echo "$server" >"$dir/server"
  write_kubeconfig "$dir/kubeconfig-admin" "$server" "$pki/ca.crt" admin "$admin_token"
  write_kubeconfig "$dir/kubeconfig-baton" "$server" "$pki/ca.crt" baton "$baton_token"
  write_kubeconfig "$dir/kubeconfig-kwok" "$server" "$pki/ca.crt" kwok "$kwok_token"

  # --unsafe-no-fsync: a test's etcd holds nothing worth a crash-safe disk, and fsync on a shared
  # disk would make every write wait.
  start_process "$dir" etcd "$bin/etcd" --name=baton-test --data-dir="$dir/etcd-data" \
    --listen-client-urls="http://127.0.0.1:$etcd_port" \
    --advertise-client-urls="http://127.0.0.1:$etcd_port" \
    --listen-peer-urls="http://127.0.0.1:$etcd_peer_port" \
    --initial-advertise-peer-urls="http://127.0.0.1:$etcd_peer_port" \
    --initial-cluster="baton-test=http://127.0.0.1:$etcd_peer_port" \
    --unsafe-no-fsync --log-level=warn
  wait_for "$dir" etcd 60 \
    sh -c "curl -sS --max-time 2 http://127.0.0.1:$etcd_port/health | grep -q '\"health\":\"true\"'"

  # --endpoint-reconciler-type=none: the apiserver refuses to publish a loopback address as the
  # endpoints of the `kubernetes` Service, and nothing here reaches it through that Service.
  start_process "$dir" kube-apiserver "$bin/kube-apiserver" \
    --etcd-servers="http://127.0.0.1:$etcd_port" \
    --bind-address=127.0.0.1 --advertise-address=127.0.0.1 --secure-port="$api_port" \
    --endpoint-reconciler-type=none \
    --tls-cert-file="$pki/apiserver.crt" --tls-private-key-file="$pki/apiserver.key" \
    --client-ca-file="$pki/ca.crt" \
    --token-auth-file="$pki/tokens.csv" --anonymous-auth=false \
    --authorization-mode=Node,RBAC \
    --service-account-issuer=https://kubernetes.default.svc \
    --service-account-key-file="$pki/sa.key" --service-account-signing-key-file="$pki/sa.key" \
    --service-cluster-ip-range=10.96.0.0/16 \
    --profiling=false
  wait_for "$dir" kube-apiserver 180 readyz "$dir"

  start_process "$dir" kwok "$bin/kwok" --kubeconfig="$dir/kubeconfig-kwok" \
    --config="$bin/kwok-stages.yaml" \
    --manage-all-nodes=false --manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake \
    --node-ip=127.0.0.1 --server-address="127.0.0.1:$kwok_port" \
    --node-lease-duration-seconds=40
  wait_for "$dir" kwok 60 curl -sSf --max-time 2 "http://127.0.0.1:$kwok_port/healthz"
  echo "control plane up: $server (kubeconfigs in $dir)"
}

cmd_stop() {
  local dir=${1:-}
  [[ -n $dir ]] || die "usage: stop DIR"
  dir=$(cd "$dir" && pwd)
  [[ -f $dir/pids ]] || return 0
  local name pid left=()
  # kwok and the apiserver before etcd, so that neither logs a lost store on its way out.
  while read -r name pid; do
    if ours "$pid" "$dir"; then kill -TERM "$pid" 2>/dev/null || true; left+=("$name:$pid"); fi
  done < <(tac "$dir/pids")
  local entry
  for entry in "${left[@]}"; do
    name=${entry%%:*}; pid=${entry##*:}
    for _ in $(seq 100); do ours "$pid" "$dir" || break; sleep 0.2; done
    if ours "$pid" "$dir"; then
      echo "k8s-control-plane: $name ($pid) ignored TERM for 20 s: KILL" >&2
      kill -KILL "$pid" 2>/dev/null || true
      for _ in $(seq 50); do ours "$pid" "$dir" || break; sleep 0.1; done
    fi
  done
  rm -f "$dir/pids"
}

cmd_add_nodes() {
  local dir=${1:-} n=${2:-} per_leaf=${3:-16}
  [[ -n $dir && $n =~ ^[0-9]+$ && $per_leaf =~ ^[1-9][0-9]*$ ]] ||
    die "usage: add-nodes DIR N [NODES_PER_LEAF]"
  local server token have
  server=$(cat "$dir/server"); token=$(cat "$dir/admin.token")
  have=$(curl -sSf --cacert "$dir/ca.crt" -H "Authorization: Bearer $token" \
           "$server/api/v1/nodes?labelSelector=type%3Dkwok" |
         /usr/bin/python3 -c 'import json, sys; print(len(json.load(sys.stdin)["items"]))')
  # One curl for all the nodes: its requests share one TLS connection.
  local config i name leaf rack body=$dir/.nodes
  mkdir -p "$body"; config=$body/curl.conf; : >"$config"
  for ((i = have; i < have + n; i++)); do
    printf -v name 'n%04d' $((i + 1))
    leaf=$((i / per_leaf + 1)); rack=$((i / 4 + 1))
    cat >"$body/$name.json" <<EOF
{"apiVersion": "v1", "kind": "Node",
 "metadata": {"name": "$name",
  "annotations": {"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
  "labels": {"type": "kwok", "kubernetes.io/hostname": "$name", "kubernetes.io/os": "linux",
   "kubernetes.io/arch": "amd64", "topology.kubernetes.io/zone": "zone-a",
   "baton.io/leaf": "leaf$leaf", "baton.io/spine": "spine", "baton.io/rack": "rack$rack",
   "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", "nvidia.com/gpu.count": "8"}},
 "status": {
  "capacity": {"cpu": "96", "memory": "2Ti", "pods": "110", "nvidia.com/gpu": "8"},
  "allocatable": {"cpu": "96", "memory": "2Ti", "pods": "110", "nvidia.com/gpu": "8"},
  "nodeInfo": {"architecture": "amd64", "operatingSystem": "linux", "kubeletVersion": "fake",
   "kubeProxyVersion": "fake", "containerRuntimeVersion": "fake", "osImage": "", "kernelVersion": "",
   "machineID": "", "systemUUID": "", "bootID": ""},
  "phase": "Running"}}
EOF
    ((i > have)) && echo "next" >>"$config"
    # Options do not carry over a "next": each request names them all.
    cat >>"$config" <<EOF
url = "$server/api/v1/nodes"
cacert = "$dir/ca.crt"
header = "Authorization: Bearer $token"
header = "Content-Type: application/json"
data = "@$body/$name.json"
output = "$body/$name.out"
write-out = "%{http_code} $name\\n"
EOF
  done
  ((n > 0)) || return 0
  local codes
  codes=$(curl -sS -K "$config")
  if grep -qv '^201 ' <<<"$codes"; then
    echo "k8s-control-plane: some nodes were not created:" >&2
    grep -v '^201 ' <<<"$codes" | head -5 >&2
    exit 1
  fi
  rm -rf "$body"
  echo "added $n nodes (now $((have + n)))"
}

case ${1:-} in
build) cmd_build ;;
bin-dir) d=$(bin_dir); built "$d" || exit 1; echo "$d" ;;
start) shift; cmd_start "$@" ;;
stop) shift; cmd_stop "$@" ;;
add-nodes) shift; cmd_add_nodes "$@" ;;
*) sed -n '2,/^set -euo/p' "$0" | sed '$d'; exit 2 ;;
esac
