#!/usr/bin/env python3
"""The planner against ../shared/data/published/fsdp-scaling.csv (issue 28: FSDP / ZeRO-3 / HSDP
runs of one model at several GPU counts): error per row and the trend over GPU count.

  python3 bench/perf/fsdp_scaling.py [BATON] [SHARED_DIR]

BATON defaults to build/dev/src/cli/baton, SHARED_DIR to ../shared/data/published. Writes the
rows the model covers, in runs.csv's columns, to a temporary file and runs `baton plan validate
--runs` on it. Left out, and counted: DeepSpeed's Azure rows (ZeRO-3 with CPU offload of the
optimizer state and activation checkpoints, which the model does not price) and GPUs outside the
catalogue (MI300X). Rewritten per row, and said: the `network` cell into the documented words
(docs/perf/calibration.md), a blank flash_attention into the table's own assumption (no), and
MaxText's TFLOP/s per chip (6 x every parameter + causal
attention, `6n-total-causal`) into a step time.
"""
import csv
import json
import os
import subprocess
import sys
import tempfile

BATON = sys.argv[1] if len(sys.argv) > 1 else "build/dev/src/cli/baton"
SHARED = sys.argv[2] if len(sys.argv) > 2 else "../shared/data/published"

# The fabric each source describes, in the planner's words.
NETWORK = {
    # a3-highgpu-8g: 4 x 200G GPU NICs per VM over GPUDirect-TCPX (TCP on Ethernet).
    "GCP a3-highgpu-8g": "Ethernet 800G per node",
    # p5.48xlarge: EFA, 3,200 Gb/s per node (400 per GPU), AWS's dedicated RDMA fabric.
    "AWS p5.48xlarge": "400G per GPU",
}


def params(r):
    """Every parameter (embedding and output included) of a dense decoder row."""
    h, layers, ffn = int(r["hidden"]), int(r["layers"]), int(r["ffn"])
    heads, kv = int(r["heads"]), int(r["kv_heads"] or r["heads"])
    vocab = int(r["vocab"])
    kvd = h // heads * kv
    mats = 3 if r["ffn_kind"] == "swiglu" else 2
    per_layer = h * h * 2 + 2 * h * kvd + mats * h * ffn + 2 * h
    return layers * per_layer + 2 * vocab * h + h


def main():
    path = os.path.join(SHARED, "fsdp-scaling.csv")
    if not os.path.exists(path):
        print(f"skipped: {path} is absent (the shared data set)")
        return 0
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        cols = reader.fieldnames
        rows = list(reader)
    kept, left = [], {}
    for r in rows:
        if r["assumptions"].startswith("OFFLOAD"):
            left["CPU offload (DeepSpeed Azure), not modelled"] = left.get(
                "CPU offload (DeepSpeed Azure), not modelled", 0) + 1
            continue
        net = next((w for k, w in NETWORK.items() if r["network"].startswith(k)), None)
        if net is None:
            left[f"GPU or fabric outside the catalogue ({r['gpu']})"] = left.get(
                f"GPU or fabric outside the catalogue ({r['gpu']})", 0) + 1
            continue
        r = dict(r)
        r["network"] = net
        # AXLearn's Fuji rows: "flash attention not stated ... (config without -flash suffix
        # assumed)", the table's own reading.
        if not r["flash_attention"]:
            r["flash_attention"] = "no"
        if r["flops"] == "6n-total-causal":
            tokens = int(r["gbs"]) * int(r["seq"])
            per_token = 6 * params(r) + 6 * int(r["layers"]) * int(r["hidden"]) * int(r["seq"])
            step = tokens * per_token / (float(r["value"]) * 1e12 * int(r["gpus"]))
            r["metric"], r["value"], r["flops"] = "iteration_time_s", f"{step:.4f}", ""
        kept.append(r)
    for why, n in left.items():
        print(f"left out {n} rows: {why}")
    with tempfile.NamedTemporaryFile("w", suffix=".csv", delete=False, newline="") as f:
        w = csv.DictWriter(f, fieldnames=cols)
        w.writeheader()
        w.writerows(kept)
        tmp = f.name
    out = subprocess.run([BATON, "plan", "validate", "--runs", tmp, "--json"],
                         capture_output=True, text=True)
    os.unlink(tmp)
    if out.returncode != 0:
        print(out.stdout, out.stderr)
        return out.returncode
    rep = json.loads(out.stdout)
    gbs = {r["id"]: int(r["gbs"]) for r in kept}
    rows_out = [dict(r, gpus=r["plan"]["gpus"], gbs=gbs[r["id"]]) for r in rep["rows"]]
    print(f"{'run (step time, s)':<34} {'gpus':>5} {'measured':>9} {'estimated':>9} {'error':>7}")
    by_group = {}
    for row in rows_out:
        print(f"{row['id']:<34} {row['gpus']:>5} {row['published']:>9.3f} "
              f"{row['estimate']:>9.3f} {100 * row['error']:>+6.1f}%")
        by_group.setdefault(row["id"].rsplit("-", 2)[0], []).append(row)
    errs = [abs(r["error"]) for r in rows_out]
    print(f"mean |error| {100 * sum(errs) / len(errs):.1f}% over {len(errs)} rows; "
          f"within 15%: {sum(e <= 0.15 for e in errs)} of {len(errs)}")
    # The trend: per-GPU speed at the largest count over the smallest, measured and estimated
    # (step times: speed per GPU is tokens / (step x gpus)).
    for group, rs in by_group.items():
        rs = sorted(rs, key=lambda r: r["gpus"])
        lo, hi = rs[0], rs[-1]
        per_gpu = lambda r, k: r["gbs"] / (r[k] * r["gpus"])
        print(f"trend {group}: per-GPU speed at {hi['gpus']} over {lo['gpus']} GPUs: measured "
              f"{per_gpu(hi, 'published') / per_gpu(lo, 'published'):.2f}, estimated "
              f"{per_gpu(hi, 'estimate') / per_gpu(lo, 'estimate'):.2f}")
    return 0


sys.exit(main())
