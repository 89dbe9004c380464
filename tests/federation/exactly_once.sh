#!/usr/bin/env bash
# Each federated job runs once (issue 29): two dry-run sites and a broker on loopback, 160 jobs.
# Mid-run one site is killed (SIGKILL) for longer than the broker's site timeout and started again
# on its database, and the broker is killed (SIGKILL) and restarted four times. Then, from every
# site's own records (jobs matched by the broker's Idempotency-Key): every job succeeded exactly
# once across the sites, and no superseded copy at the killed site was placed again after it came
# back (its events end in a fence or hold, then the broker's cancel).
# Usage: exactly_once.sh BATON_BINARY SOURCE_DIR
set -uo pipefail
baton=$1
src=$(realpath "$2")
source "$src/tests/lib/e2e.sh"  # check, finish, new_token, wait_listening

readonly jobs=160 site_timeout=3
work=$(mktemp -d -t baton-once.XXXXXX)
declare -A site_pid
broker_pid=""
cleanup() {
  for p in "${site_pid[@]}" $broker_pid; do kill -TERM "$p" 2>/dev/null; done
  wait 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

token=$(new_token admin)
user_token=$(new_token alice)
site_token=$(new_token fed)
cat >"$work/auth.yaml" <<EOT
principals:
  - {name: ops, role: admin, token: "$token"}
  - {name: alice, role: tenant, tenant: team-a, token: "$user_token"}
  - {name: federation, role: broker, token: "$site_token"}
EOT
export BATON_SITE_TOKEN=$site_token
read -r p_a p_b p_br < <(python3 -c '
import socket
ss = [socket.socket() for _ in range(3)]
for s in ss: s.bind(("127.0.0.1", 0))
print(" ".join(str(s.getsockname()[1]) for s in ss))')
broker="http://127.0.0.1:$p_br"

api() { curl -sS -m 10 -H "Authorization: Bearer $token" "$@"; }
start_site() {  # start_site NAME PORT
  "$baton" serve --topology "$src/data/clusters/fake16.yaml" --executor dry-run --speedup 60 \
    --listen "127.0.0.1:$2" --db "$work/$1.db" --auth "$work/auth.yaml" >>"$work/$1.log" 2>&1 &
  site_pid[$1]=$!
  wait_listening "$work/$1.log" "${site_pid[$1]}"
}
start_broker() {
  "$baton" federate --sites "$work/sites.yaml" --listen "127.0.0.1:$p_br" --db "$work/broker.db" \
    --auth "$work/auth.yaml" --policy predicted-completion --site-timeout "$site_timeout" \
    --poll-interval 0.5 --request-timeout 2 >>"$work/broker.log" 2>&1 &
  broker_pid=$!
  wait_listening "$work/broker.log" "$broker_pid"
}
kill_broker() {
  kill -KILL "$broker_pid"
  wait "$broker_pid" 2>/dev/null
  : >"$work/broker.log"  # wait_listening reads the new start's lines
}

started=$(date +%s)
start_site alpha "$p_a" || exit 1
start_site beta "$p_b" || exit 1
cat >"$work/sites.yaml" <<EOT
sites:
  alpha:
    url: http://127.0.0.1:$p_a
    token_env: BATON_SITE_TOKEN
    price_per_gpu_hour: 1.6
  beta:
    url: http://127.0.0.1:$p_b
    token_env: BATON_SITE_TOKEN
    price_per_gpu_hour: 2.1
wan:
  - {between: [alpha, beta], gbps: 10, latency_ms: 28}
EOT
start_broker || exit 1

# 160 jobs of 8 GPUs, 10 minutes each at the sites' 60x speed-up (10 s of wall time).
ids=()
for n in $(seq "$jobs"); do
  id=$(curl -sS -m 10 -H "Authorization: Bearer $user_token" -H 'Content-Type: application/json' \
    -d "{\"name\": \"once-$n\", \"gpus\": 8, \"estimated_runtime_s\": 600}" "$broker/api/v1/jobs" |
    jq -r '.id // empty')
  [[ -n $id ]] && ids+=("$id")
done
check "$jobs jobs submitted to the broker" 0 $(( ${#ids[@]} == jobs ? 0 : 1 ))

# Wait until alpha runs some of them, then kill it past the site timeout.
for _ in $(seq 300); do
  running=$(api "http://127.0.0.1:$p_a/api/v1/jobs?state=running&limit=1000" | jq '.jobs | length')
  (( running >= 4 )) && break
  sleep 0.2
done
echo "alpha runs $running job(s): killing it (SIGKILL) for $((site_timeout + 5)) s"
kill -KILL "${site_pid[alpha]}"
wait "${site_pid[alpha]}" 2>/dev/null
sleep 1
kill_broker
start_broker || exit 1
echo "broker killed and restarted (1 of 4) while alpha is down"
sleep $((site_timeout + 4))
start_site alpha "$p_a" || exit 1
echo "alpha back on its database"
for round in 2 3 4; do
  sleep 4
  kill_broker
  start_broker || exit 1
  echo "broker killed and restarted ($round of 4)"
done

# Every job finishes (the broker's view), within a bound that is only a hang guard.
for _ in $(seq 600); do
  states=$(api "$broker/api/v1/jobs?limit=1000" | jq -r '.jobs[].state' | sort | uniq -c | xargs)
  [[ $states == "$jobs succeeded" ]] && break
  sleep 0.5
done
echo "broker: $states"
check "the broker reports all $jobs succeeded" 0 $([[ $states == "$jobs succeeded" ]]; echo $?) \
  "$states"

# Count from each site's own records.
declare -A succeeded copies where
for site in alpha beta; do
  port=$p_a
  [[ $site == beta ]] && port=$p_b
  while read -r key sid state; do
    [[ $key =~ ^baton-fed-[0-9a-f]{16}-([0-9]+)-[0-9]+$ ]] || continue
    job=${BASH_REMATCH[1]}
    copies[$job]=$(( ${copies[$job]:-0} + 1 ))
    [[ $state == succeeded ]] && succeeded[$job]=$(( ${succeeded[$job]:-0} + 1 ))
    where[$job]+="$site/$sid:$state "
    if [[ $site == alpha && $state != succeeded ]]; then
      echo "$sid" >>"$work/alpha-superseded"
    fi
  done < <(api "http://127.0.0.1:$port/api/v1/jobs?limit=1000" |
    jq -r '.jobs[] | "\(.idempotency_key // "-") \(.id) \(.state)"')
done
once=0 twice=0 never=0 moved=0
for id in "${ids[@]}"; do
  case ${succeeded[$id]:-0} in
    1) once=$((once + 1)) ;;
    0) never=$((never + 1)) ;;
    *)
      twice=$((twice + 1))
      echo "job $id succeeded ${succeeded[$id]} times: ${where[$id]}"
      for copy in ${where[$id]}; do
        site=${copy%%/*} sid=${copy#*/} sid=${sid%%:*}
        port=$p_a
        [[ $site == beta ]] && port=$p_b
        echo "  $site job $sid: $(api "http://127.0.0.1:$port/api/v1/jobs/$sid/events" |
          jq -r '[.events[] | "\(.time) \(.kind)"] | join(", ")')"
      done
      echo "  broker: $(api "$broker/api/v1/jobs/$id/events" |
        jq -r '[.events[] | "\(.time) \(.kind) \(.message[0:80])"] | join(" | ")')"
      ;;
  esac
  (( ${copies[$id]:-0} > 1 )) && moved=$((moved + 1))
done
echo "site records: $once job(s) succeeded once, $twice more than once, $never never;" \
  "$moved job(s) had a copy at more than one site"
by_copy=0
for id in "${ids[@]}"; do
  api "$broker/api/v1/jobs/$id/events" |
    jq -e '.events[] | select(.kind == "superseded_finished")' >/dev/null && by_copy=$((by_copy + 1))
done
echo "$by_copy job(s) done by a copy that succeeded before its site was lost (later attempt cancelled)"
check "every job succeeded exactly once, counted at the sites" 0 \
  $(( once == jobs && twice == 0 ? 0 : 1 ))
check "the killed site's jobs moved (the test exercised a move)" 0 $(( moved > 0 ? 0 : 1 ))

# No superseded copy at alpha was placed again after alpha came back.
bad=0 seen=0
while read -r sid; do
  [[ -n $sid ]] || continue
  seen=$((seen + 1))
  kinds=$(api "http://127.0.0.1:$p_a/api/v1/jobs/$sid/events" | jq -r '[.events[].kind] | join(" ")')
  after=$(awk '{ last = 0; for (i = 1; i <= NF; i++) if ($i == "fenced" || $i == "held") last = i;
                 if (last == 0) { print "none"; exit }
                 for (i = last + 1; i <= NF; i++) printf "%s ", $i }' <<<"$kinds")
  if [[ $after == none || $after == *placed* ]]; then
    bad=$((bad + 1))
    echo "alpha job $sid: $kinds"
  fi
done < <(cat "$work/alpha-superseded" 2>/dev/null)
echo "alpha: $seen superseded cop(ies), $bad placed again after alpha came back"
check "no superseded copy at the killed site ran again after it came back" 0 \
  $(( seen > 0 && bad == 0 ? 0 : 1 ))
echo "elapsed: $(( $(date +%s) - started )) s"
finish
