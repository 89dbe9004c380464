#!/usr/bin/env bash
# Replays the attacks of issue 15 against a real `baton serve` on loopback and prints each one's
# outcome, then whether the daemon is still healthy. Bounded in time (each request has a
# timeout; the whole run takes about a minute) and loopback only.
#
#   bench/server/attacks.sh [path/to/baton]      (default: build/dev/src/cli/baton)
#
# Needs curl and bash (raw connections use bash's /dev/tcp). Exit status: 0 when every attack
# got the expected answer and the daemon stayed healthy, 1 otherwise.
set -u
BATON=${1:-build/dev/src/cli/baton}
[[ -x $BATON ]] || { echo "no baton binary at $BATON (build the 'baton' target)"; exit 2; }
command -v curl >/dev/null || { echo "curl is needed"; exit 2; }

dir=$(mktemp -d /tmp/baton-attacks.XXXXXX)
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$dir"' EXIT
admin=attack-admin-token-0123456789
tenant=attack-tenant-token-0123456789
cat >"$dir/auth.yaml" <<YAML
principals:
  - {name: ops, role: admin, token: $admin}
  - {name: eve, role: tenant, tenant: team-e, token: $tenant}
YAML

# A free port: bind-test a few random ones.
for _ in $(seq 20); do
  port=$((20000 + RANDOM % 20000))
  (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null || break
done
api=http://127.0.0.1:$port
"$BATON" serve --listen 127.0.0.1:$port --db "$dir/baton.db" --auth "$dir/auth.yaml" \
  --preset superpod-h100 --executor dry-run --speedup 1 >"$dir/daemon.log" 2>&1 &
pid=$!
for _ in $(seq 100); do
  curl -sf -m 1 "$api/healthz" >/dev/null && break
  sleep 0.1
done

fails=0
# Sets `got` to the exit status of PID ("exitN"), or "running" if it has not exited in 60 s.
exit_of() {
  for _ in $(seq 600); do kill -0 "$1" 2>/dev/null || break; sleep 0.1; done
  if kill -0 "$1" 2>/dev/null; then kill "$1"; wait "$1" 2>/dev/null; got=running; return; fi
  wait "$1"; got="exit$?"
}
# outcome NAME EXPECTED GOT [DETAIL]
outcome() {
  local verdict=ok
  [[ $3 == "$2" ]] || { verdict=FAIL; fails=$((fails + 1)); }
  printf '%-4s %-44s expected %-5s got %-5s %s\n' "$verdict" "$1" "$2" "$3" "${4:-}"
}
alive() { kill -0 $pid 2>/dev/null && curl -sf -m 2 "$api/healthz" >/dev/null && echo up || echo DOWN; }
A=(-H "Authorization: Bearer $tenant")
ADM=(-H "Authorization: Bearer $admin")
J=(-H 'Content-Type: application/json')

# 1. 120 KB of nested brackets in a job's plan, and in a plan request's model.
deep=$(printf '%*s' 60000 '' | tr ' ' '['; printf '%*s' 60000 '' | tr ' ' ']')
code=$(printf '{"name":"x","gpus":8,"plan":{"model":%s}}' "$deep" |
  curl -s -o "$dir/r" -w '%{http_code}' -m 10 "${A[@]}" "${J[@]}" --data-binary @- "$api/api/v1/jobs")
outcome "deep nesting in plan (120 KB)" 400 "$code" "daemon $(alive)"
for q in estimate search; do
  code=$(printf '{"gpus":8,"model":%s}' "$deep" |
    curl -s -o /dev/null -w '%{http_code}' -m 10 "${A[@]}" "${J[@]}" --data-binary @- "$api/api/v1/plan/$q")
  outcome "deep nesting in model (/plan/$q)" 400 "$code" "daemon $(alive)"
done
code=$(curl -s -o /dev/null -w '%{http_code}' -m 5 "${A[@]}" "${J[@]}" \
  -d '{"name":"x","gpus":8,"gpus":4096}' "$api/api/v1/jobs")
outcome "duplicate JSON key" 400 "$code"

# 2. 1 GB chunked uploads: without a token, and with one (over the 1 MiB limit).
read -r code sent < <(head -c 1G /dev/zero | curl -s -o /dev/null -w '%{http_code} %{size_upload}\n' \
  -m 20 -X POST -H 'Transfer-Encoding: chunked' "${J[@]}" -T - "$api/api/v1/jobs")
outcome "1 GB chunked upload, no token" 401 "$code" "client sent $sent bytes before the answer"
read -r code sent < <(head -c 1G /dev/zero | curl -s -o /dev/null -w '%{http_code} %{size_upload}\n' \
  -m 20 "${A[@]}" -X POST -H 'Transfer-Encoding: chunked' "${J[@]}" -T - "$api/api/v1/jobs")
outcome "1 GB chunked upload, tenant token" 413 "$code" "client sent $sent bytes before the answer"
rss=$(awk '/VmRSS/ {print $2 " " $3}' /proc/$pid/status)
echo "     daemon resident memory after the uploads: $rss"

# 3. Junk method names.
before=$(curl -s -m 5 "${ADM[@]}" "$api/metrics" | wc -c)
for i in $(seq 300); do curl -s -o /dev/null -m 2 -X "JUNK$i" "$api/api/v1/jobs"; done
after=$(curl -s -m 5 "${ADM[@]}" "$api/metrics")
junk=$(grep -c JUNK <<<"$after")
outcome "300 junk methods: JUNK labels in /metrics" 0 "$junk" "metrics $before -> ${#after} bytes"

# 4. 70 connections sending one byte a second; then five health checks (5 s timeout each).
slow=()
for i in $(seq 70); do
  ( exec 3<>/dev/tcp/127.0.0.1/$port || exit
    printf 'GET /healthz HTTP/1.1\r\n' >&3
    for _ in $(seq 30); do printf 'a' >&3 2>/dev/null || exit; sleep 1; done ) 2>/dev/null &
  slow+=($!)
done
sleep 2
ok=0
for _ in 1 2 3 4 5; do curl -sf -m 5 "$api/healthz" >/dev/null && ok=$((ok + 1)); sleep 0.5; done
kill "${slow[@]}" 2>/dev/null; wait "${slow[@]}" 2>/dev/null
outcome "slowloris x70: health checks answered" 5/5 "$ok/5"

# 5. A second daemon on the same port.
"$BATON" serve --listen 127.0.0.1:$port --db "$dir/second.db" --auth "$dir/auth.yaml" \
  --preset superpod-h100 --executor dry-run >"$dir/second.log" 2>&1 &
exit_of $!
outcome "second daemon on the same port" exit1 "$got" "$(tail -1 "$dir/second.log")"

# 6. /metrics without a token, and with a tenant's.
outcome "/metrics without a token" 401 "$(curl -s -o /dev/null -w '%{http_code}' -m 5 "$api/metrics")"
outcome "/metrics with a tenant token" 403 \
  "$(curl -s -o /dev/null -w '%{http_code}' -m 5 "${A[@]}" "$api/metrics")"

# 7. An auth file with a duplicate key (role: tenant, role: admin) and an oversized one.
printf 'principals:\n  - {name: m, role: tenant, tenant: t, role: admin, token: %s}\n' "$admin" >"$dir/dup.yaml"
"$BATON" serve --listen 127.0.0.1:0 --db "$dir/dup.db" --auth "$dir/dup.yaml" >"$dir/dup.log" 2>&1 &
exit_of $!
outcome "auth file with a duplicate key" exit1 "$got" "$(tail -1 "$dir/dup.log")"
head -c 3M /dev/zero | tr '\0' '#' >"$dir/big.yaml"
"$BATON" serve --listen 127.0.0.1:0 --db "$dir/big.db" --auth "$dir/big.yaml" >"$dir/big.log" 2>&1
outcome "3 MB auth file" exit1 "exit$?" "$(tail -1 "$dir/big.log")"

# 8. Node admin: an unknown node, and the date of a drain.
outcome "drain an unknown node" 404 \
  "$(curl -s -o /dev/null -w '%{http_code}' -m 5 "${ADM[@]}" -X POST "$api/api/v1/nodes/no-such-node:drain")"
node=$(curl -s -m 5 "${ADM[@]}" "$api/api/v1/nodes" | grep -o '"node":"[^"]*"' | head -1 | cut -d'"' -f4)
year=$(curl -s -m 5 "${ADM[@]}" -X POST "$api/api/v1/nodes/$node:drain" | grep -o '"updated_at":"[0-9]*' | cut -d'"' -f4)
outcome "drain reply's year" "$(date -u +%Y)" "$year" "node $node"
curl -s -o /dev/null -m 5 "${ADM[@]}" -X POST "$api/api/v1/nodes/$node:uncordon"

# 9. Cancel with no body (no Content-Length), and DELETE.
id=$(curl -s -m 5 "${A[@]}" "${J[@]}" -d '{"name":"c","gpus":8,"estimated_runtime_s":3600}' \
  "$api/api/v1/jobs" | grep -o '"id":[0-9]*' | cut -d: -f2)
start=$(date +%s%N)
reply=$( exec 3<>/dev/tcp/127.0.0.1/$port
  printf 'POST /api/v1/jobs/%s:cancel HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nConnection: close\r\n\r\n' "$id" "$tenant" >&3
  timeout 15 head -1 <&3 )
ms=$(( ($(date +%s%N) - start) / 1000000 ))
outcome "POST :cancel without a body" 202 "$(cut -d' ' -f2 <<<"$reply")" "answered in $ms ms"
id=$(curl -s -m 5 "${A[@]}" "${J[@]}" -d '{"name":"d","gpus":8}' "$api/api/v1/jobs" | grep -o '"id":[0-9]*' | cut -d: -f2)
outcome "DELETE /api/v1/jobs/{id}" 202 \
  "$(curl -s -o /dev/null -w '%{http_code}' -m 5 "${A[@]}" -X DELETE "$api/api/v1/jobs/$id")"

# 10. One state per job; topology counts against the summary (a 512-GPU job running).
id=$(curl -s -m 5 "${A[@]}" "${J[@]}" -d '{"name":"half","gpus":512,"estimated_runtime_s":3600}' \
  "$api/api/v1/jobs" | grep -o '"id":[0-9]*' | cut -d: -f2)
sleep 2
states=$(curl -s -m 5 "${A[@]}" "$api/api/v1/jobs/$id" | grep -o '"[a-z_]*\(state\|phase\)"' | wc -l)
outcome "state fields in a job reply" 1 "$states"
topo=$(curl -s -m 5 "${A[@]}" "$api/api/v1/topology")
counted=$(grep -o '"gpus_allocated":[0-9]*' <<<"$topo" | cut -d: -f2)
summary=$(grep -o 'allocated [0-9]*' <<<"$topo" | head -1 | cut -d' ' -f2)
outcome "topology: summary's allocated GPUs" "$counted" "$summary"

# 11. Admission: what can never run on this 1,024-GPU cluster.
for spec in '{"name":"a","gpus":4096}' '{"name":"a","gpus":8,"gpu_type":"B200"}' \
  '{"name":"a","gpus":16,"gpus_per_node":16}' '{"name":"a","gpus":16,"gpus_per_node":5}' \
  '{"name":"a","gpus":512,"topology":{"required":"leaf"}}'; do
  body=$(curl -s -w ' %{http_code}' -m 5 "${A[@]}" "${J[@]}" -d "$spec" "$api/api/v1/jobs")
  field=$(grep -o '"field":"[^"]*"' <<<"$body" | cut -d'"' -f4)
  outcome "admission $spec" 400 "${body##* }" "field $field"
done

# 12. One error shape: unknown path, wrong method, malformed JSON.
for req in "GET /nope" "PATCH /api/v1/jobs" "POST /api/v1/jobs"; do
  method=${req%% *} path=${req#* }
  data=(); [[ $method == POST ]] && data=(-d '{')
  body=$(curl -s -m 5 "${A[@]}" "${J[@]}" -X "$method" "${data[@]}" "$api$path")
  shape=$(grep -c '^{"error":{"code":"[A-Z_]*","message":"' <<<"$body")
  outcome "error shape: $req" 1 "$shape" "$body"
done

# 13. A 200 MB request line without a newline (httplib buffers a request line whole).
before=$(awk '/VmRSS/ {print $2}' /proc/$pid/status)
start=$(date +%s%N)
( exec 3<>/dev/tcp/127.0.0.1/$port || exit
  printf 'GET /' >&3
  head -c 200M /dev/zero | tr '\0' a | timeout 15 cat >&3 ) 2>/dev/null
ms=$(( ($(date +%s%N) - start) / 1000000 ))
grown=$(( ($(awk '/VmRSS/ {print $2}' /proc/$pid/status) - before) / 1024 ))
outcome "200 MB request line: daemon grew < 64 MB" yes "$([[ $grown -lt 64 ]] && echo yes || echo no)" \
  "grew $grown MB; connection cut after $ms ms"

echo
state=$(alive)
rss=$(awk '/VmRSS/ {print $2 " " $3}' /proc/$pid/status 2>/dev/null)
outcome "daemon still healthy at the end" up "$state" "resident $rss"
exit $((fails > 0))
