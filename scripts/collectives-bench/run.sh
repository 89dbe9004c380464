#!/usr/bin/env bash
# Measures a cluster's collectives through a running `baton serve`: submits torch_collectives.py
# as a job of N ranks (nccl-tests' binaries instead, where every rank finds them on PATH), waits
# for it, and leaves OUT/all_reduce.txt, all_gather.txt, reduce_scatter.txt, alltoall.txt in
# nccl-tests' format for `baton plan calibrate --collectives` (docs/perf/collectives.md).
set -euo pipefail

usage() {
  cat >&2 <<'EOF'
usage: run.sh [options] OUT
  -n, --gpus N            ranks (GPUs) of the job (default 8)
  -g, --gpus-per-node K   ranks per node (default: as many as fit)
  -b, --min-bytes B       smallest size (default 8)
  -e, --max-bytes B       largest size (default 67108864, 64 MiB)
      --iters N           timed calls per size (default 20)
      --warmup N          untimed calls first (default 5)
      --ops LIST          of all_reduce,all_gather,reduce_scatter,alltoall (default all)
      --backend B         auto (nccl with CUDA, else gloo), nccl or gloo
      --no-nccl-tests     time with torch even where all_reduce_perf etc. are on PATH
      --timeout S         give up (and cancel the job) after S seconds (default 1800)
The daemon is $BATON_URL (token $BATON_TOKEN), the client ${BATON:-baton}. OUT and this folder
must be at the same path on the nodes (shared storage), as the job's rank 0 writes OUT.
Then: baton plan calibrate --collectives all_reduce=OUT/all_reduce.txt,all_gather=OUT/all_gather.txt
EOF
  exit 2
}

baton=${BATON:-baton}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
gpus=8 per_node="" timeout=1800 bench=()
while (($#)); do
  case $1 in
    -n | --gpus) gpus=$2; shift 2 ;;
    -g | --gpus-per-node) per_node=$2; shift 2 ;;
    -b | --min-bytes) bench+=(--min-bytes "$2"); shift 2 ;;
    -e | --max-bytes) bench+=(--max-bytes "$2"); shift 2 ;;
    --iters | --warmup | --ops | --backend) bench+=("$1" "$2"); shift 2 ;;
    --no-nccl-tests) bench+=("$1"); shift ;;
    --timeout) timeout=$2; shift 2 ;;
    -h | --help) usage ;;
    -*) echo "run.sh: unknown option $1" >&2; usage ;;
    *) [[ -z ${out:-} ]] || usage; out=$1; shift ;;
  esac
done
[[ -n ${out:-} ]] || usage
mkdir -p "$out"
out=$(cd "$out" && pwd)

submit=("$baton" submit --name collectives-bench --gpus "$gpus")
[[ -n $per_node ]] && submit+=(--gpus-per-node "$per_node")
reply=$("${submit[@]}" -- /usr/bin/python3 "$here/torch_collectives.py" --out "$out" \
  ${bench[@]+"${bench[@]}"} 2>&1) || { echo "$reply" >&2; exit 1; }
job=$(sed -nE 's/^submitted job ([0-9]+).*/\1/p' <<<"$reply")
[[ -n $job ]] || { echo "run.sh: no job id in: $reply" >&2; exit 1; }
echo "job $job: $gpus ranks, writing $out"

state=""
until=$((SECONDS + timeout))
while ((SECONDS < until)); do
  state=$("$baton" job "$job" --json 2>/dev/null | sed -nE 's/^  "state": "(.*)",?$/\1/p')
  case $state in succeeded | failed | cancelled) break ;; esac
  sleep 1
done
if [[ $state != succeeded ]]; then
  echo "run.sh: job $job is ${state:-unknown} after $((SECONDS))s" >&2
  [[ $state == failed || $state == cancelled ]] || "$baton" cancel "$job" >&2 || true
  "$baton" job "$job" | tail -8 >&2
  exit 1
fi
ls "$out"/*.txt
