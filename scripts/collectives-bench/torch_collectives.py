#!/usr/bin/python3
"""Times collectives with torch.distributed and writes them as nccl-tests prints them.

Run by every rank of a job (baton's executors and torchrun set RANK, WORLD_SIZE, LOCAL_RANK,
LOCAL_WORLD_SIZE, MASTER_ADDR and MASTER_PORT; baton also BATON_NODE). Backend: nccl when CUDA
is available, else gloo on CPU. For each collective and each size from --min-bytes to
--max-bytes, doubling, every rank runs --warmup calls, a barrier, then --iters calls timed back to
back; the time of a call is the ranks' average, as nccl-tests takes it. Rank 0 writes
OUT/OP.txt per collective in nccl-tests' format (the '#  Rank ... on HOST' lines, the table with
its out-of-place and in-place blocks, '# Avg bus bandwidth'), which
`baton plan calibrate --collectives all_reduce=OUT/all_reduce.txt,...` reads.

Sizes, counts and bandwidths follow nccl-tests (float32): size is the bytes of the larger buffer
(all_gather: the gathered output; reduce_scatter: the input; alltoall: each rank's buffer),
algbw = size / time, busbw = algbw x 2 (n - 1) / n for all_reduce and (n - 1) / n for the others.
A size too small to give every rank one element is raised to n elements, and a size met twice is
timed once.

Where nccl-tests' binaries (all_reduce_perf, ...) are on every rank's PATH, rank 0 runs them
instead and writes what they print: on one node as one process over the node's GPUs (-g), on
several through mpirun (which must then be on rank 0's PATH, reaching the nodes by name).
--no-nccl-tests always uses torch.

Each rank prints 'start rank=R world=W resume_step=0 attempt=A t=T' and 'end rank=R step=K ...'
(K: collectives done) to its log, which tests/realjob/check_ranks.py reads.
Python stdlib and torch only.
"""
import argparse
import os
import shutil
import socket
import subprocess
import sys
import time

import torch
import torch.distributed as dist

OPS = ("all_reduce", "all_gather", "reduce_scatter", "alltoall")
WORD = 4  # float32


def log(kind, **fields):
    fields["attempt"] = os.environ.get("BATON_ATTEMPT", "1")
    fields["t"] = f"{time.time():.6f}"
    print(kind, " ".join(f"{k}={v}" for k, v in fields.items()), flush=True)


def bus_factor(op, n):
    return 2 * (n - 1) / n if op == "all_reduce" else (n - 1) / n


class Bench:
    def __init__(self, backend, device, rank, n):
        self.backend, self.device, self.rank, self.n = backend, device, rank, n
        self.gloo = backend == "gloo"

    def sync(self):
        if self.device.type == "cuda":
            torch.cuda.synchronize()

    def buffers(self, op, count):
        """(call, check) for `count` elements per rank-share: call(inplace) runs the collective
        once; check() returns the number of wrong elements of the last out-of-place call."""
        n, r, dev = self.n, self.rank, self.device
        full = count * n
        if op == "all_reduce":
            src = torch.full((count,), float(r + 1), device=dev)
            out = torch.empty_like(src)

            def call(inplace):
                if inplace:
                    dist.all_reduce(src)  # torch's all_reduce is in place
                else:
                    out.copy_(src)
                    dist.all_reduce(out)

            def reset():
                src.fill_(float(r + 1))
                out.copy_(src)
                dist.all_reduce(out)
                return torch.full_like(out, n * (n + 1) / 2), out
        elif op == "all_gather":
            src = torch.full((count,), float(r + 1), device=dev)
            out = torch.empty(full, device=dev)
            outs = list(out.chunk(n))
            into = getattr(dist, "all_gather_into_tensor", None)

            def call(inplace):
                mine = outs[r] if inplace else src
                if into is not None and not self.gloo:
                    into(out, mine)
                else:
                    dist.all_gather(outs, mine)

            def reset():
                call(False)
                want = torch.arange(1, n + 1, device=dev, dtype=out.dtype).repeat_interleave(count)
                return want, out
        elif op == "reduce_scatter":
            src = torch.full((full,), float(r + 1), device=dev)
            out = torch.empty(count, device=dev)
            tmp = torch.empty(full, device=dev)
            native = getattr(dist, "reduce_scatter_tensor", None) or \
                getattr(dist, "_reduce_scatter_base", None)

            def call(inplace):
                dst = src[r * count:(r + 1) * count] if inplace else out
                if self.gloo:
                    # gloo (torch 1.13) has no reduce_scatter: alltoall, then sum the n shares.
                    dist.all_to_all_single(tmp, src)
                    torch.sum(tmp.view(n, count), dim=0, out=dst)
                else:
                    native(dst, src)

            def reset():
                src.fill_(float(r + 1))
                call(False)
                return torch.full_like(out, n * (n + 1) / 2), out
        elif op == "alltoall":
            src = torch.full((full,), float(r + 1), device=dev)
            out = torch.empty(full, device=dev)

            def call(inplace):
                # torch has no in-place alltoall; the in-place block times the same call.
                dist.all_to_all_single(out, src)

            def reset():
                call(False)
                want = torch.arange(1, n + 1, device=dev, dtype=out.dtype).repeat_interleave(count)
                return want, out
        else:
            raise ValueError(op)

        def check():
            want, got = reset()
            self.sync()
            return int((want != got).sum().item())
        return call, check

    def avg_seconds(self, seconds):
        t = torch.tensor([seconds], dtype=torch.float64, device=self.device)
        dist.all_reduce(t)
        return t.item() / self.n

    def time(self, call, inplace, warmup, iters):
        for _ in range(warmup):
            call(inplace)
        self.sync()
        dist.barrier()
        start = time.perf_counter()
        for _ in range(iters):
            call(inplace)
        self.sync()
        return self.avg_seconds((time.perf_counter() - start) / iters)


def fmt_time(us):
    return f"{us:7.0f}" if us >= 10000 else f"{us:7.1f}" if us >= 100 else f"{us:7.2f}"


def header(args, op, ranks, backend):
    lines = [
        f"# Collective test starting: {op}_perf",
        f"# torch.distributed {torch.__version__} ({backend}) by "
        "scripts/collectives-bench/torch_collectives.py, in nccl-tests' format",
    ]
    if op == "reduce_scatter" and backend == "gloo":
        lines.append("# gloo has no reduce_scatter here: timed as alltoall + local sum")
    if op in ("all_reduce", "alltoall"):
        lines.append("# torch has no out-of-place all_reduce nor in-place alltoall: "
                     "both blocks time torch's one call (all_reduce out-of-place adds a copy)")
    lines += [
        f"# nThread 1 nGpus 1 minBytes {args.min_bytes} maxBytes {args.max_bytes} step: 2(factor) "
        f"warmup iters: {args.warmup} iters: {args.iters} agg iters: 1 validation: 1 graph: 0",
        "#",
        "# Using devices",
    ]
    for r, (host, pid, dev, name) in enumerate(ranks):
        lines.append(f"#  Rank {r:2d} Group  0 Pid {pid:6d} on {host:>10} device {dev:2d} "
                     f"[{name}]")
    lines += [
        "#",
        f"# {'':>58}out-of-place                       in-place          ",
        "#       size         count      type   redop    root     time   algbw   busbw #wrong"
        "     time   algbw   busbw #wrong",
        "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)       "
        "     (us)  (GB/s)  (GB/s)       ",
    ]
    return lines


def run_torch(args, op, bench, ranks, out_dir):
    n = bench.n
    split = op != "all_reduce"
    rows, seen, busbws = [], set(), []
    size = args.min_bytes
    while size <= args.max_bytes:
        count = max(1, size // (WORD * n)) if split else max(1, size // WORD)
        size *= 2
        nbytes = count * WORD * (n if split else 1)
        if nbytes in seen:
            continue
        seen.add(nbytes)
        call, check = bench.buffers(op, count)
        cols = []
        for inplace in (False, True):
            sec = bench.time(call, inplace, args.warmup, args.iters)
            algbw = nbytes / 1e9 / sec
            busbw = algbw * bus_factor(op, n)
            wrong = check()
            cols.append(f"  {fmt_time(sec * 1e6)}  {algbw:6.2f}  {busbw:6.2f}  {wrong:5d}")
            busbws.append(busbw)
        redop = "sum" if op in ("all_reduce", "reduce_scatter") else "none"
        rows.append(f"{nbytes:12d}  {count:12d}  {'float':>8}  {redop:>6}  {-1:6d}" + "".join(cols))
    if bench.rank == 0:
        lines = header(args, op, ranks, bench.backend) + rows + [
            "# Out of bounds values : 0 OK",
            f"# Avg bus bandwidth    : {sum(busbws) / len(busbws):g} ",
            "#",
        ]
        write(out_dir, op, "\n".join(lines) + "\n")


def write(out_dir, op, text):
    path = os.path.join(out_dir, f"{op}.txt")
    with open(path + ".tmp", "w") as f:
        f.write(text)
    os.replace(path + ".tmp", path)


def run_nccl_tests(args, op, ranks, local_world, out_dir):
    """Rank 0 runs OP_perf: one process over the node's GPUs, or mpirun over the nodes."""
    n = len(ranks)
    flags = ["-b", str(args.min_bytes), "-e", str(args.max_bytes), "-f", "2",
             "-w", str(args.warmup), "-n", str(args.iters)]
    env = dict(os.environ)
    hosts = sorted({h for h, _, _, _ in ranks})
    if len(hosts) == 1:
        env["CUDA_VISIBLE_DEVICES"] = ",".join(str(d) for _, _, d, _ in ranks)
        cmd = [f"{op}_perf", "-g", str(n)] + flags
    else:
        cmd = ["mpirun", "-np", str(n), "-H", ",".join(f"{h}:{local_world}" for h in hosts),
               f"{op}_perf", "-g", "1"] + flags
    print("running", " ".join(cmd), flush=True)
    done = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, text=True)
    sys.stdout.write(done.stdout)
    if done.returncode != 0:
        raise SystemExit(f"{cmd[0]} exited {done.returncode}")
    write(out_dir, op, done.stdout)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", required=True, help="folder rank 0 writes OP.txt into")
    p.add_argument("--ops", default=",".join(OPS), help="comma-separated, of " + ",".join(OPS))
    p.add_argument("--min-bytes", type=int, default=8)
    p.add_argument("--max-bytes", type=int, default=64 << 20)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--backend", choices=("auto", "nccl", "gloo"), default="auto")
    p.add_argument("--no-nccl-tests", action="store_true",
                   help="time with torch even where nccl-tests' binaries are on PATH")
    args = p.parse_args()
    ops = [o for o in args.ops.split(",") if o]
    bad = [o for o in ops if o not in OPS]
    if bad or not ops or args.min_bytes < 1 or args.max_bytes < args.min_bytes or \
            args.iters < 1 or args.warmup < 0:
        p.error(f"bad --ops {bad} or sizes/iterations")

    rank, n = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    local_world = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
    log("start", rank=rank, world=n, resume_step=0)
    backend = args.backend
    if backend == "auto":
        backend = "nccl" if torch.cuda.is_available() else "gloo"
    if backend == "nccl":
        device = torch.device("cuda", torch.cuda.current_device() if
                              os.environ.get("CUDA_VISIBLE_DEVICES") else local_rank)
        torch.cuda.set_device(device)
    else:
        device = torch.device("cpu")
    dist.init_process_group(backend, rank=rank, world_size=n)

    host = os.environ.get("BATON_NODE") or socket.gethostname()
    gpu = os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")[0]
    dev_index = int(gpu) if gpu.isdigit() else local_rank
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu (gloo)"
    ranks = [None] * n
    dist.all_gather_object(ranks, (host, os.getpid(), dev_index, name))
    have = torch.tensor([0 if args.no_nccl_tests else
                         int(all(shutil.which(f"{o}_perf") for o in ops))], device=device)
    dist.all_reduce(have, op=dist.ReduceOp.MIN)
    use_nccl_tests = bool(have.item())
    if rank == 0:
        os.makedirs(args.out, exist_ok=True)
    bench = Bench(backend, device, rank, n)
    done = 0
    for op in ops:
        if use_nccl_tests:
            if rank == 0:
                run_nccl_tests(args, op, ranks, local_world, args.out)
            dist.barrier()  # the others wait while rank 0's nccl-tests run holds the GPUs
        else:
            run_torch(args, op, bench, ranks, args.out)
        done += 1
        if rank == 0:
            print(f"{op}: {'nccl-tests' if use_nccl_tests else backend} done", flush=True)
    dist.barrier()
    dist.destroy_process_group()
    log("end", rank=rank, step=done)


if __name__ == "__main__":
    main()
