#!/usr/bin/env bash
# End-to-end test of `baton federate` on loopback (issue 17): three sites and a broker.
#   shenzhen, hefei: `baton serve`, dry-run executor (fake16: 16 nodes x 8 GPUs, 60x speed-up);
#                    shenzhen stores the dataset the jobs read;
#   slurm:           `baton serve --executor slurm` on the real 16-node fake Slurm
#                    (scripts/slurm-fake-cluster.sh); skipped, saying why, where Slurm cannot run
#                    (not root, not installed, or another test holds its fixed ports).
# Six 64-GPU jobs (30 s each) are submitted to the broker, which routes them by predicted
# completion; each job's events must say why. Then the dry-run site with the most running jobs
# is killed (SIGKILL) mid-run: after the site timeout its jobs are re-dispatched elsewhere; the
# site is restarted (same database and port) and the broker cancels the abandoned copies there.
# Every job must then have finished exactly once, counted from each site's own records (GET on
# each site, jobs matched by the broker's Idempotency-Key), and the broker's view must agree.
# Usage: federation_e2e.sh BATON_BINARY SOURCE_DIR
set -uo pipefail
baton=$1
src=$(realpath "$2")
source "$src/tests/lib/e2e.sh"  # check, finish, new_token, wait_listening

work=$(mktemp -d -t baton-fed.XXXXXX)
slurm_dir=""
declare -A site_pid
broker_pid=""
cleanup() {
  for p in "${site_pid[@]}" $broker_pid; do
    kill -TERM "$p" 2>/dev/null
  done
  wait 2>/dev/null
  [[ -n $slurm_dir ]] && bash "$src/scripts/slurm-fake-cluster.sh" stop "$slurm_dir" >/dev/null 2>&1
  rm -rf "$work"
}
trap cleanup EXIT

token=$(new_token admin)
user_token=$(new_token alice)
bob_token=$(new_token bob)
site_token=$(new_token fed)
cat >"$work/auth.yaml" <<EOT
principals:
  - {name: ops, role: admin, token: "$token"}
  - {name: alice, role: tenant, tenant: team-a, token: "$user_token"}
  - {name: bob, role: tenant, tenant: team-b, token: "$bob_token"}
  - {name: federation, role: broker, token: "$site_token"}
EOT
# hefei keeps its own tenancy: team-b may ask for priorities 0..50, and no tenant evicts another's.
cat >"$work/hefei-sched.yaml" <<EOT
tenancy:
  cross_tenant_preemption: deny
  tenants:
    team-a: {priority: {min: 0, max: 100}}
    team-b: {priority: {min: 0, max: 50}}
EOT
# The federation's own policy, at the broker: team-b up to priority 950 (hefei allows it 0..50).
cat >"$work/broker-tenancy.yaml" <<EOT
tenancy:
  tenants:
    team-a: {priority: {min: 0, max: 100}}
    team-b: {priority: {min: 0, max: 950}}
EOT
# The broker's token at every site: each site's own token_env (the broker never sends its own).
export BATON_SITE_TOKEN=$site_token

read -r p_sz p_hf p_sl p_br < <(python3 -c '
import socket
ss = [socket.socket() for _ in range(4)]
for s in ss: s.bind(("127.0.0.1", 0))
print(" ".join(str(s.getsockname()[1]) for s in ss))')

start_dry_site() {  # start_dry_site NAME PORT LOG
  local extra=()
  [[ -f $work/$1-sched.yaml ]] && extra=(--scheduler-config "$work/$1-sched.yaml")
  "$baton" serve --topology "$src/data/clusters/fake16.yaml" --executor dry-run --speedup 60 \
    --listen "127.0.0.1:$2" --db "$work/$1.db" --auth "$work/auth.yaml" "${extra[@]}" \
    >"$work/$3" 2>&1 &
  site_pid[$1]=$!
  wait_listening "$work/$3" "${site_pid[$1]}"
}

slurm_why=""
if [[ $(id -u) -ne 0 ]]; then
  slurm_why="not root (the fake Slurm needs mknod and munge)"
elif ! command -v slurmctld >/dev/null || ! command -v slurmd >/dev/null; then
  slurm_why="Slurm is not installed (scripts/slurm-fake-cluster.sh install)"
elif pgrep -x slurmctld >/dev/null; then
  slurm_why="a slurmctld is already running (another test holds the fake cluster's fixed ports)"
fi
if [[ -z $slurm_why ]]; then
  slurm_dir="$work/slurm"
  if ! bash "$src/scripts/slurm-fake-cluster.sh" start "$slurm_dir" >"$work/slurm-start.log" 2>&1; then
    slurm_why="the fake Slurm did not start: $(tail -1 "$work/slurm-start.log")"
  fi
fi

started=$(date +%s)
start_dry_site shenzhen "$p_sz" shenzhen.log || exit 1
start_dry_site hefei "$p_hf" hefei.log || exit 1
sites="shenzhen hefei"
if [[ -z $slurm_why ]]; then
  "$baton" serve --executor slurm --slurm-conf "$slurm_dir/slurm.conf" \
    --executor-option job-prefix=fede2e --log-dir "$work/slurm-logs" \
    --listen "127.0.0.1:$p_sl" --db "$work/slurm.db" --auth "$work/auth.yaml" \
    >"$work/slurm.log" 2>&1 &
  site_pid[slurm]=$!
  wait_listening "$work/slurm.log" "${site_pid[slurm]}" || exit 1
  sites="$sites slurm"
  echo "site slurm: baton serve --executor slurm on the 16-node fake Slurm"
else
  echo "SKIP site slurm: $slurm_why"
fi

cat >"$work/sites.yaml" <<EOT
sites:
  shenzhen:
    url: http://127.0.0.1:$p_sz
    token_env: BATON_SITE_TOKEN
    regions: [cn, cn-south]
    price_per_gpu_hour: 2.1
    datasets:
      corpus-zh: {size_gib: 8}
  hefei:
    url: http://127.0.0.1:$p_hf
    token_env: BATON_SITE_TOKEN
    regions: [cn, cn-east]
    price_per_gpu_hour: 1.6
EOT
if [[ $sites == *slurm* ]]; then
  cat >>"$work/sites.yaml" <<EOT
  slurm:
    url: http://127.0.0.1:$p_sl
    token_env: BATON_SITE_TOKEN
    regions: [cn]
    price_per_gpu_hour: 1.2
wan:
  - {between: [shenzhen, hefei], gbps: 10, latency_ms: 28}
  - {between: [shenzhen, slurm], gbps: 40, latency_ms: 30}
  - {between: [hefei, slurm], gbps: 100, latency_ms: 2}
EOT
else
  printf 'wan:\n  - {between: [shenzhen, hefei], gbps: 10, latency_ms: 28}\n' >>"$work/sites.yaml"
fi

"$baton" federate --sites "$work/sites.yaml" --listen "127.0.0.1:$p_br" --db "$work/broker.db" \
  --auth "$work/auth.yaml" --policy predicted-completion --site-timeout 3 --poll-interval 0.5 \
  --request-timeout 2 --quota team-a=512 --tenancy "$work/broker-tenancy.yaml" >"$work/broker.log" 2>&1 &
broker_pid=$!
wait_listening "$work/broker.log" "$broker_pid" || exit 1
broker="http://127.0.0.1:$p_br"

api() {  # api URL [curl args...]: GET (or what the args say) with the admin token
  local url=$1
  shift
  curl -sS -m 10 -H "Authorization: Bearer $token" "$@" "$url"
}

site_url() {
  case $1 in shenzhen) echo "http://127.0.0.1:$p_sz" ;; hefei) echo "http://127.0.0.1:$p_hf" ;;
    slurm) echo "http://127.0.0.1:$p_sl" ;; esac
}

# --- Bad input is refused by the broker, naming the field. ---
out=$(curl -sS -m 10 -H "Authorization: Bearer $user_token" -H 'Content-Type: application/json' \
  -d '{"name": "x", "gpus": 8, "federation": {"datasets": ["corpus-en"]}}' "$broker/api/v1/jobs")
check "an unknown dataset is refused naming the field" 0 $? "$out" \
  '"field":"federation.datasets\[0\]"'
out=$(curl -sS -m 10 -H "Authorization: Bearer $user_token" -H 'Content-Type: application/json' \
  -d '{"name": "x", "gpus": 1024}' "$broker/api/v1/jobs")
check "a job above the tenant's federation quota is refused" 0 $? "$out" 'in flight across'

# --- The sites' tenancy holds through the broker: each job is its tenant's at the site. ---
out=$(curl -sS -m 10 -H "Authorization: Bearer $bob_token" -H 'Content-Type: application/json' \
  -d '{"name": "bob-urgent", "gpus": 8, "priority": 990}' "$broker/api/v1/jobs")
check "the broker refuses bob's priority 990 itself (its own tenancy), naming the field" 0 \
  $([[ $(jq -r .error.field <<<"$out") == priority ]]; echo $?) "$out" \
  "tenant 'team-b' may use priorities 0\\.\\.950"
direct=$(curl -sS -m 10 -H "Authorization: Bearer $bob_token" -H 'Content-Type: application/json' \
  -d '{"name": "bob-urgent", "gpus": 8, "priority": 900}' "http://127.0.0.1:$p_hf/api/v1/jobs")
check "hefei refuses bob's priority 900 directly, naming the field" 0 $? "$direct" \
  '"field":"priority"'
out=$(curl -sS -m 10 -H "Authorization: Bearer $bob_token" -H 'Content-Type: application/json' \
  -d '{"name": "bob-urgent", "gpus": 8, "priority": 900,
       "federation": {"require_regions": ["cn-east"]}}' "$broker/api/v1/jobs")
bob_id=$(jq -r '.id // empty' <<<"$out")
for _ in $(seq 100); do
  [[ $(api "$broker/api/v1/jobs/$bob_id" | jq -r .state) == failed ]] && break
  sleep 0.2
done
bob_end=$(api "$broker/api/v1/jobs/$bob_id/events" | jq -r '.events[-1].message')
echo "bob's priority 900 through the broker: $bob_end"
want=$(jq -r .error.message <<<"$direct")
check "through the broker it is refused too, with hefei's own error and field" 0 \
  $([[ $bob_end == *"hefei: 400 $want"* && $want == "field 'priority':"* ]]; echo $?) "$bob_end"
out=$(curl -sS -m 10 -H "Authorization: Bearer $site_token" "http://127.0.0.1:$p_hf/api/v1/nodes")
check "the broker's token at a site is no admin's" 0 $? "$out" '"code":"INVALID_ARGUMENT"|PERMISSION_DENIED'
out=$(curl -sS -m 10 -H "Authorization: Bearer $site_token" -H "Baton-Tenant: team-a" \
  "http://127.0.0.1:$p_hf/api/v1/nodes")
check "nor is it an admin's when it names a tenant" 0 $? "$out" 'PERMISSION_DENIED'

# --- Six jobs, routed by predicted completion. ---
ids=()
for n in 1 2 3 4 5 6; do
  out=$(curl -sS -m 10 -H "Authorization: Bearer $user_token" -H 'Content-Type: application/json' \
    -d "{\"name\": \"fed-$n\", \"gpus\": 64, \"gpus_per_node\": 8, \"estimated_runtime_s\": 1800,
         \"command\": [\"sleep\", \"30\"],
         \"federation\": {\"datasets\": [\"corpus-zh\"], \"checkpoint_gib\": 4}}" \
    "$broker/api/v1/jobs")
  id=$(jq -r '.id // empty' <<<"$out")
  [[ -n $id ]] || { echo "FAIL submit fed-$n: $out"; failures=$((failures + 1)); continue; }
  ids+=("$id")
done
check "six jobs submitted to the broker" 0 $(( ${#ids[@]} == 6 ? 0 : 1 ))

for _ in $(seq 200); do  # all dispatched, and some running at a dry-run site
  dispatched=0 running_dry=0
  for id in "${ids[@]}"; do
    j=$(api "$broker/api/v1/jobs/$id")
    [[ $(jq -r '.site_job // 0' <<<"$j") -gt 0 ]] && dispatched=$((dispatched + 1))
    [[ $(jq -r '"\(.site) \(.site_state)"' <<<"$j") =~ ^(shenzhen|hefei)\ running$ ]] &&
      running_dry=$((running_dry + 1))
  done
  [[ $dispatched -eq ${#ids[@]} && $running_dry -gt 0 ]] && break
  sleep 0.2
done
declare -A first_site first_state
for id in "${ids[@]}"; do
  j=$(api "$broker/api/v1/jobs/$id")
  first_site[$id]=$(jq -r '.site // "-"' <<<"$j")
  first_state[$id]=$(jq -r '.site_state // "-"' <<<"$j")
done
echo "dispatched: $(for id in "${ids[@]}"; do printf 'job %s -> %s (%s)  ' "$id" "${first_site[$id]}" "${first_state[$id]}"; done)"

# No cross-tenant preemption through the broker: bob's priority-50 job for the whole of hefei
# (allowed there, above alice's priority 0) waits behind alice's running jobs instead of evicting
# them, since hefei denies cross-tenant preemption.
alice_at_hefei=()
for id in "${ids[@]}"; do
  [[ ${first_site[$id]} == hefei ]] || continue
  # Dispatched as queued, it starts at hefei's next cycle (the broker's poll reports it).
  for _ in $(seq 50); do
    [[ $(api "$broker/api/v1/jobs/$id" | jq -r '.site_state // "-"') == running ]] && break
    sleep 0.2
  done
  [[ $(api "$broker/api/v1/jobs/$id" | jq -r '.site_state // "-"') == running ]] &&
    alice_at_hefei+=("$id")
done
out=$(curl -sS -m 10 -H "Authorization: Bearer $bob_token" -H 'Content-Type: application/json' \
  -d '{"name": "bob-big", "gpus": 128, "gpus_per_node": 8, "priority": 50,
       "estimated_runtime_s": 60, "federation": {"require_regions": ["cn-east"]}}' \
  "$broker/api/v1/jobs")
bob_big=$(jq -r '.id // empty' <<<"$out")
for _ in $(seq 100); do
  [[ $(api "$broker/api/v1/jobs/$bob_big" | jq -r '.site_job // 0') -gt 0 ]] && break
  sleep 0.2
done
bob_site_job=$(api "$broker/api/v1/jobs/$bob_big" | jq -r '.site_job // 0')
for _ in $(seq 100); do  # until hefei's scheduler has weighed it (and said why it waits)
  bob_at_hefei=$(api "http://127.0.0.1:$p_hf/api/v1/jobs/$bob_site_job")
  [[ $(jq -r '.waiting_reason // ""' <<<"$bob_at_hefei") == topology:* ]] && break
  sleep 0.2
done
echo "bob's priority-50 job at hefei: $(jq -c '{state, tenant, waiting_reason}' <<<"$bob_at_hefei")"
preempted=0
for id in "${alice_at_hefei[@]}"; do
  sid=$(api "$broker/api/v1/jobs/$id" | jq -r '.site_job')
  api "http://127.0.0.1:$p_hf/api/v1/jobs/$sid/events" |
    jq -e '.events[] | select(.kind == "preempted")' >/dev/null && preempted=$((preempted + 1))
done
check "bob's job reached hefei as team-b's and waits there (${#alice_at_hefei[@]} of alice's run)" \
  0 $([[ ${#alice_at_hefei[@]} -gt 0 && $(jq -r .tenant <<<"$bob_at_hefei") == team-b &&
         $(jq -r .state <<<"$bob_at_hefei") == queued ]]; echo $?) "$bob_at_hefei"
check "no job of alice's at hefei was preempted by bob's (cross-tenant preemption denied)" 0 \
  $(( preempted == 0 ? 0 : 1 ))
api "$broker/api/v1/jobs/$bob_big" -X DELETE >/dev/null
check "every job dispatched to a site ($dispatched of ${#ids[@]})" 0 \
  $(( dispatched == ${#ids[@]} ? 0 : 1 ))

id1=${ids[0]}
events=$(api "$broker/api/v1/jobs/$id1/events")
routed=$(jq -r '.events[] | select(.kind == "routed") | .message' <<<"$events" | head -1)
echo "job $id1 routed: $routed"
check "the routed event explains the choice against the runner-up" 0 $? "$routed" \
  'by predicted-completion: start .*, staging .* → done .* (earlier|later) than '
out=$(jq -r '.events[] | select(.kind == "dispatched") | .message' <<<"$events")
check "the dispatch names its site, site job and idempotency key" 0 $? "$out" \
  '^attempt 1 at [a-z]+ as its job [0-9]+ \(key baton-fed-[0-9a-f]{16}-[0-9]+-1\)$'
out=$(api "$broker/api/v1/sites")
check "GET /api/v1/sites: every site healthy with its last answer" 0 $? "$out" \
  '"healthy":true.*"last_answer"'
out=$(curl -sS -H "Authorization: Bearer $user_token" "$broker/api/v1/sites")
check "a tenant sees each site's name and health only (no URL, no other tenant's answer)" \
  0 $([[ $out == *'"healthy"'* && $out != *'"url"'* && $out != *'last_answer'* ]]; echo $?) "$out"

# The broker itself crashes (SIGKILL) and restarts on its database: it rebuilds each job's
# attempt from its events and goes on following it; nothing is dispatched twice (counted below).
kill -KILL "$broker_pid"
wait "$broker_pid" 2>/dev/null
"$baton" federate --sites "$work/sites.yaml" --listen "127.0.0.1:$p_br" --db "$work/broker.db" \
  --auth "$work/auth.yaml" --policy predicted-completion --site-timeout 3 --poll-interval 0.5 \
  --request-timeout 2 --quota team-a=512 --tenancy "$work/broker-tenancy.yaml" >"$work/broker-restart.log" 2>&1 &
broker_pid=$!
wait_listening "$work/broker-restart.log" "$broker_pid" || exit 1
out=$(api "$broker/api/v1/jobs/${ids[0]}")
check "the broker restarted after SIGKILL and still follows job ${ids[0]} at its site" 0 $? \
  "$out" "\"site\":\"${first_site[${ids[0]}]}\""

# --- Kill the dry-run site with the most jobs, mid-run. ---
victim=shenzhen
n_sz=0 n_hf=0
for id in "${ids[@]}"; do
  [[ ${first_site[$id]} == shenzhen && ${first_state[$id]} == running ]] && n_sz=$((n_sz + 1))
  [[ ${first_site[$id]} == hefei && ${first_state[$id]} == running ]] && n_hf=$((n_hf + 1))
done
(( n_hf > n_sz )) && victim=hefei
moved=()
for id in "${ids[@]}"; do [[ ${first_site[$id]} == "$victim" ]] && moved+=("$id"); done
echo "killing site $victim (SIGKILL) mid-run, with job(s) ${moved[*]}"
kill -KILL "${site_pid[$victim]}"
wait "${site_pid[$victim]}" 2>/dev/null
unset "site_pid[$victim]"

for _ in $(seq 150); do  # re-dispatched after the 3 s site timeout
  left=0
  for id in "${moved[@]}"; do
    s=$(api "$broker/api/v1/jobs/$id" | jq -r '"\(.site // "-") \(.state)"')
    [[ $s == "$victim "* || $s == "- queued" ]] && left=$((left + 1))
  done
  [[ $left -eq 0 ]] && break
  sleep 0.2
done
check "the killed site's jobs are re-dispatched elsewhere" 0 $(( left == 0 ? 0 : 1 ))
for id in "${moved[@]}"; do
  out=$(api "$broker/api/v1/jobs/$id/events" | jq -r '.events[] | "\(.kind): \(.message)"')
  lost=$(grep '^site_lost' <<<"$out")
  echo "job $id: $lost"
  check "job $id: its events say the site was lost" 0 $? "$out" "^site_lost: $victim unreachable"
  rerouted=$(grep '^routed' <<<"$out" | tail -1)
  echo "job $id: $rerouted"
  check "job $id: re-routed elsewhere, saying why" 0 $? "$rerouted" \
    "^routed: (shenzhen|hefei|slurm) by predicted-completion: .*staging"
  check "job $id: not back to $victim" 1 $(grep -qE "^routed: $victim " <<<"$rerouted"; echo $?)
done

# The site comes back (same database and port): the broker cancels the abandoned copies there.
start_dry_site "$victim" "$(site_url "$victim" | sed 's/.*://')" "$victim-restart.log" || exit 1
echo "site $victim restarted (same database and port)"
for _ in $(seq 100); do
  cancelled=0
  for id in "${moved[@]}"; do
    api "$broker/api/v1/jobs/$id/events" | jq -e '.events[] | select(.kind == "orphan_cancelled")' \
      >/dev/null && cancelled=$((cancelled + 1))
  done
  [[ $cancelled -eq ${#moved[@]} ]] && break
  sleep 0.2
done
check "the abandoned copies at $victim are cancelled when it returns" 0 \
  $(( cancelled == ${#moved[@]} ? 0 : 1 ))
# Fenced, not trusted to stop: the restarted site stopped each leased copy instead of adopting it,
# and none was placed again there after the restart (counted from the site's own events).
victim_url=$(site_url "$victim")
for id in "${moved[@]}"; do
  sid=$(api "$victim_url/api/v1/jobs?limit=1000" |
    jq -r --arg re "^baton-fed-[0-9a-f]{16}-$id-[0-9]+\$" \
      '.jobs[] | select(.idempotency_key // "" | test($re)) | .id' | head -1)
  kinds=$(api "$victim_url/api/v1/jobs/$sid/events" | jq -r '[.events[].kind] | join(" ")')
  echo "job $id: its abandoned copy at $victim (job $sid): $kinds"
  # After the last fence or hold (the restart's), nothing placed it again.
  after=$(awk '{ last = 0; for (i = 1; i <= NF; i++) if ($i == "fenced" || $i == "held") last = i;
                 if (last == 0) { print "none"; exit }
                 for (i = last + 1; i <= NF; i++) printf "%s ", $i }' <<<"$kinds")
  check "job $id: the restarted site fenced or held its abandoned copy and never ran it again" 0 \
    $([[ $after != none && $after != *placed* && $kinds == *cancelled ]]; echo $?) "$kinds"
done

# --- Everything finishes; count completions from each site's own records. ---
for _ in $(seq 300); do
  done_n=0
  for id in "${ids[@]}"; do
    [[ $(api "$broker/api/v1/jobs/$id" | jq -r .state) == succeeded ]] && done_n=$((done_n + 1))
  done
  [[ $done_n -eq ${#ids[@]} ]] && break
  sleep 0.5
done
check "the broker reports every job succeeded ($done_n of ${#ids[@]})" 0 \
  $(( done_n == ${#ids[@]} ? 0 : 1 ))

declare -A records
for site in $sites; do
  records[$site]=$(api "$(site_url "$site")/api/v1/jobs?limit=1000" |
    jq -r '.jobs[] | "\(.idempotency_key // "-") \(.id) \(.state) \(.tenant)"')
done
for id in "${ids[@]}"; do
  succeeded=0 where="" copies=""
  for site in $sites; do
    while read -r key sid state tenant; do
      [[ $key =~ ^baton-fed-[0-9a-f]{16}-$id-[0-9]+$ ]] || continue
      copies+="$site/$sid:$state "
      check "job $id at $site is alice's tenant's (team-a), not the broker's" 0 \
        $([[ $tenant == team-a ]]; echo $?) "$tenant"
      if [[ $state == succeeded ]]; then
        succeeded=$((succeeded + 1))
        where="$site (job $sid)"
      fi
    done <<<"${records[$site]}"
  done
  final=$(api "$broker/api/v1/jobs/$id/events" | jq -r '.events[] | select(.kind == "succeeded") | .message')
  echo "job $id: site records $copies-> succeeded $succeeded time(s); broker: $final"
  n_copies=$(wc -w <<<"$copies")
  want=1
  [[ " ${moved[*]} " == *" $id "* ]] && want=2
  check "job $id: $want cop(ies) made at the sites, no duplicate dispatch" 0 \
    $(( n_copies == want ? 0 : 1 ))
  check "job $id finished exactly once, counted at the sites" 0 $(( succeeded == 1 ? 0 : 1 ))
  check "job $id: the broker's view agrees with the sites" 0 \
    $([[ "$final" == "succeeded at $where" ]] && echo 0 || echo 1)
done

echo "elapsed: $(( $(date +%s) - started )) s"
finish
