# Sourced by the tests of tests/kubernetes/ (with $src, the source folder, and $name set): skips
# (77) when the control plane can neither be found built nor built (no Go toolchain), builds it
# once, starts it in a fresh $work/plane and sets $admin (its admin token). The EXIT trap stops
# baton serve ($serve_pid, stop_serve) and the control plane and removes $work. Then lib.sh.
source "$src/tests/lib/e2e.sh"  # check, finish, new_token, wait_listening
plane="$src/scripts/k8s-control-plane.sh"

if ! "$plane" bin-dir >/dev/null && ! command -v go >/dev/null; then
  echo "SKIP: no Go toolchain to build kube-apiserver, etcd and kwok (Go 1.26 on PATH)"; exit 77
fi
"$plane" build >/dev/null || { echo "FAIL: building the control plane"; exit 1; }

work=$(mktemp -d -t "baton-k8s-$name.XXXXXX")
serve_pid=""
stop_serve() {
  if [[ -n $serve_pid ]] && kill -0 "$serve_pid" 2>/dev/null; then
    kill -TERM "$serve_pid"; wait "$serve_pid" 2>/dev/null
  fi
  serve_pid=""
}
cleanup() {
  stop_serve
  "$plane" stop "$work/plane" >/dev/null 2>&1
  rm -rf "$work"
}
trap cleanup EXIT

"$plane" start "$work/plane" >/dev/null || { echo "FAIL: starting the control plane"; exit 1; }
admin=$(cat "$work/plane/admin.token")
source "$src/tests/kubernetes/lib.sh"  # api, json, ready_nodes, apply_baton_rbac, jobs_namespace
