#!/usr/bin/env python3
"""Builds baton's validation tables from the shared 2024-2026 data set.

  python3 data/published/convert_2024.py ../shared/data/published data/published

reads runs-2024.csv and attention-kernels.csv from the first folder and writes
runs-2024.csv (runs.csv's columns plus group, stack, ffn_kind, hbm_gib, fsdp_group, flops, mfu_peak,
tp_overlap and assumptions), attention.csv (FlashAttention-2 forward+backward kernel rates) and
attention-kernels.csv (every kernel of the charts, as published) into the second. Every blank the source leaves is either filled by a rule below, which the row's
`assumptions` cell names, or left blank for the validation to search over (mbs, vp, recompute),
or the row is skipped and listed on stderr with the reason. No value is tuned to the model.
"""
import csv
import shutil
import re
import sys

SRC, DST = sys.argv[1], sys.argv[2]

OUT_COLS = ("id,source,group,stack,model,params_b,layers,hidden,heads,kv_heads,ffn,ffn_kind,seq,vocab,"
            "gbs,mbs,gpus,gpu,hbm_gib,power_w,network,tp,pp,dp,cp,vp,recompute,seq_parallel,zero,"
            "fsdp_group,dtype,metric,value,confidence,flash_attention,dp_overlap,pp_p2p,"
            "mfu_attention,flops,mfu_peak,tp_overlap,grads,fp8_recipe,compiled,cp_attention,"
            "tp_impl,dropout,attn_kernel,assumptions").split(",")

# Shapes the source does not print, from the model's own release (named in the assumption).
KNOWN_SHAPES = {
    "Llama2-34B": (48, 8192, 64, 8, 22016, 32000, "CodeLlama-34B config (48 x 8192; 64 heads; 8 kv; ffn 22016)"),
    "GPT3-125M": (12, 768, 12, 12, 3072, 50257, "GPT-3 paper Table 2.1 125M shape"),
    "GPT3-355M": (24, 1024, 16, 16, 4096, 50257, "GPT-3 paper Table 2.1 350M shape"),
    "GPT3-760M": (24, 1536, 16, 16, 6144, 50257, "GPT-3 paper Table 2.1 760M shape"),
    "GPT3-2.7B": (32, 2560, 20, 20, 10240, 50257, "GPT-3 2.7B shape with head dim 128 (source note)"),
}


def group_of(src, rid):
    if rid.startswith("nemo-longseq"):
        return "nemo-longseq"
    if rid.startswith("nemo2407"):
        return "nemo-2407"
    for key, name in (("torchtitan", "torchtitan"), ("Megatron-Bridge", "megatron-bridge"),
                      ("dgxc-benchmarking", "dgxc"), ("pytorch.github.io", "ibm-fsdp"),
                      ("fms-fsdp", "ibm-fsdp"), ("Megatron-LM", "megatron-lm"),
                      ("flash-attention", "flash-attn")):
        if key in src:
            return name
    return "other"


# The software stack a group's rows trained on, for leave-one-stack-out cross-validation
# (`baton plan validate --cv stack`): NeMo, Megatron-Bridge, the Megatron-LM README and dgxc's
# NeMo recipes all run Megatron-Core; dgxc's MaxText and Paxml recipes run JAX/XLA.
def stack_of(grp, rid):
    if grp == "dgxc":
        return "jax" if rid.startswith(("dgxc-maxtext", "dgxc-pax")) else "megatron-core"
    return {"nemo-2407": "megatron-core", "nemo-longseq": "megatron-core",
            "megatron-bridge": "megatron-core", "megatron-lm": "megatron-core",
            "torchtitan": "torchtitan", "ibm-fsdp": "pytorch-fsdp"}.get(grp, grp)


def clean(s):
    return s.replace(",", ";").replace("\n", " ").replace('"', "'").strip()


def num(s):
    s = s.strip().replace(",", "").replace(" ", "")
    if s.endswith("%"):
        return float(s[:-1]) / 100
    if s.endswith("k"):
        return float(s[:-1]) * 1000
    return float(s)


def convert(r, skipped):
    rid, src, grp = r["id"], r["source"], group_of(r["source"], r["id"])
    notes = r["notes"]
    a = []  # assumptions
    o = {c: "" for c in OUT_COLS}
    o.update(id=rid, source=clean(src)[:160], group=grp, stack=stack_of(grp, rid),
             confidence="secondary")
    name = r["model"]
    o["model"] = clean(name)
    base = re.sub(r"\s*\(.*", "", name).replace("_", "-").replace("LLAMA", "Llama")
    base = base.replace("Llama2-34b", "Llama2-34B")
    layers, hidden, heads, kv, ffn, vocab = (r[k].strip() for k in
                                             ("layers", "hidden", "heads", "kv_heads", "ffn", "vocab"))
    if not layers:
        for k, shape in KNOWN_SHAPES.items():
            if base.startswith(k):
                layers, hidden, heads, kv, ffn, vocab = (str(x) for x in shape[:6])
                a.append("shape not printed: " + shape[6])
                break
        else:
            skipped.append((rid, "model shape not printed"))
            return None
    if not kv:
        kv = heads
        a.append("kv_heads not printed: MHA (kv = heads) as GPT")
    llama = "llama" in name.lower()
    nemotron = "nemotron" in name.lower()
    if not ffn:
        ffn = str(4 * int(hidden))
        a.append("ffn not printed: 4 x hidden (GPT)")
    if not vocab:
        vocab = "256000" if nemotron else "51200"
        a.append(f"vocab not printed: {vocab} ({'Nemotron tokenizer' if nemotron else 'GPT-3 51200'})")
    o.update(layers=layers, hidden=hidden, heads=heads, kv_heads=kv, ffn=ffn, vocab=vocab)
    # Llama: SwiGLU. Nemotron-4: squared-ReLU (two matrices), GPT: GELU.
    o["ffn_kind"] = "swiglu" if llama else "gelu"
    seq = r["seq"].strip()
    if not seq:
        if grp == "torchtitan":
            seq = "8192"
            a.append("seq not printed: 8192 (torchtitan llama3 config default; source note)")
        elif grp == "ibm-fsdp":
            seq = "4096"
            a.append("seq not printed: 4096 (source text: 4k context)")
        else:
            skipped.append((rid, "seq not printed"))
            return None
    o["seq"] = seq
    gpus = int(r["gpus"])
    o["gpus"] = str(gpus)
    # GPU
    g = r["gpu"]
    if g.startswith("A100"):
        o["gpu"] = "A100-80GB"
    elif g.startswith("H200"):
        o["gpu"] = "H200"
    elif g.startswith("GB200"):
        o["gpu"] = "GB200"
    elif g.startswith("B200"):
        o["gpu"] = "B200"
    elif g.startswith("H100"):
        o["gpu"] = "H100-SXM"
        if "96" in g or "95GB" in g:
            o["hbm_gib"] = "94.5"
            o["power_w"] = "500"
            a.append("H100 96 GB HBM2e part at 500 W: 94.5 GiB usable by the driver; "
                     "tensor cores clocked as a 700 W H100 SXM capped at 500 W; HBM2e at "
                     "2.4 TB/s (torchtitan's async-TP benchmark notes on these parts)")
    else:
        skipped.append((rid, f"gpu '{g}' not in the catalogue"))
        return None
    # Network
    net = r["network"]
    if "8x 400 Gbit" in net or "400 Gb/s per GPU" in net or "400Gb/s" in net:
        o["network"] = "IB 400G per GPU"
    elif net.startswith("400Gbps inter-node"):
        o["network"] = "Ethernet 400G per node"
    elif net.startswith("800Gbps inter-node"):
        o["network"] = "Ethernet 800G per node"
    elif net.startswith("single node"):
        o["network"] = "IB 400G per GPU"
    elif grp == "ibm-fsdp" and o["gpu"] == "A100-80GB":
        # fms-fsdp is the IBM team's own repository; its 128-A100 table is the blog's cluster
        # (same models, GPU count and batch; 3,760 vs 3,700 tokens/s for 7B), whose network the
        # blog prints: 400 Gb/s inter-node Ethernet per 8-GPU node.
        o["network"] = "Ethernet 400G per node"
        a.append("network not printed: the PyTorch/IBM blog's 128-A100 cluster by the same team "
                 "(400 Gb/s Ethernet per node)")
    elif o["gpu"] == "A100-80GB":
        o["network"] = "DGX-A100 8xHDR200"
        a.append("network not printed: DGX A100 (8 x HDR 200G per node)")
    elif o["gpu"] == "GB200":
        o["network"] = "NVL72 IB 400G per GPU"
        a.append("network not printed: GB200 NVL72 rack (72-GPU NVLink domain) with 400G IB per GPU")
    else:
        o["network"] = "IB 400G per GPU"
        a.append("network not printed: DGX-style 400G InfiniBand per GPU")
    # The Trainy / WhiteFiber H200 hosts print only a "backend RDMA fabric" at 400 Gb/s
    # (ConnectX-7) per GPU: a dedicated training fabric, priced as InfiniBand.
    if "RDMA" in net and o["gpu"] == "H200":
        a.append("network: the source's backend RDMA fabric at 400 Gb/s per GPU, priced as "
                 "InfiniBand (InfiniBand or RoCE not printed)")
    if o["gpu"] == "H200" and not r.get("power_w", "").strip():
        a.append("H200 at its rated 700 W (power limit not printed)")
    if "fsdp float8 all-gather" in r["dtype"]:
        # Trainy's command: --float8.enable_fsdp_float8_all_gather,
        # --float8.precompute_float8_dynamic_scale_for_fsdp, --float8.force_recompute_fp8_weight_in_bwd.
        a.append("FSDP all-gathers the float8 weights (printed flags: enable_fsdp_float8_all_gather, "
                 "precompute_float8_dynamic_scale_for_fsdp, force_recompute_fp8_weight_in_bwd); "
                 "priced as a 16-bit all-gather, hidden behind compute at 32-64 GPUs either way")
    # Plan
    tp, pp, cp = (r[k].strip() or "" for k in ("tp", "pp", "cp"))
    zero_txt = r["zero"]
    # base is the model name ("Llama2-7B"); the 7B test once read " 7B" in " -7B", never true,
    # so the blog's 7B rows ran as FSDP over every GPU against fms-fsdp's HSDP.
    hsdp = zero_txt.strip() == "HSDP" or ("HSDP" in zero_txt and "7b/13b" in zero_txt and
                                          (base.endswith("-7B") or base.endswith("-13B")))
    # HSDP is FSDP sharded within a group and replicated across groups (fms-fsdp's 7b/13b
    # rows say only "HSDP"; they were read as plain data parallel before, and declared OOM).
    fsdp = ("FSDP" in zero_txt and "FSDP=0" not in zero_txt) or hsdp
    if not tp and not pp and not r["dp"].strip() and not fsdp:
        skipped.append((rid, "parallel plan not printed"))
        return None
    if not tp:
        tp = "1"
        a.append("tp not printed: 1 (FSDP-only JAX/PyTorch recipe)" if fsdp else "tp not printed: 1")
    if not pp:
        pp = "1"
        a.append("pp not printed: 1")
    if not cp:
        cp = "1"
    ep = r["ep"].strip()
    if ep and ep != "1":
        skipped.append((rid, "expert parallel rows not modelled here"))
        return None
    mp = int(tp) * int(pp) * int(cp)
    if gpus % mp:
        skipped.append((rid, f"gpus {gpus} not divisible by tp*pp*cp {mp}"))
        return None
    dp = r["dp"].strip()
    if not dp or int(dp) * mp != gpus:
        if dp:
            skipped.append((rid, f"printed tp*pp*dp*cp = {int(dp) * mp} is not the GPU count {gpus}"))
            return None
        else:
            a.append("dp not printed: gpus / (tp*pp*cp)")
        dp = str(gpus // mp)
    o.update(tp=tp, pp=pp, dp=dp, cp=cp)
    vp = r["vp"].strip()
    o["vp"] = "1" if vp in ("n/a", "1") else vp  # blank: searched
    if not vp:
        a.append("vp not printed: searched (fastest)" if int(pp) > 1 else "")
        if int(pp) == 1:
            o["vp"] = "1"
    mbs = r["mbs"].strip()
    local_batch = mbs
    if grp == "torchtitan" and int(pp) > 1 and mbs:
        # torchtitan's batch column is the local batch. The number of pipeline micro-batches is
        # not printed; torchtitan's default (pipeline_parallel_microbatches unset) is the pp
        # degree, so the micro-batch is local batch / pp.
        if int(mbs) % int(pp) == 0:
            a.append(f"local batch {mbs}; pipeline micro-batches not printed: pp ({pp}, "
                     "torchtitan's default)")
            mbs = str(int(mbs) // int(pp))
        else:
            a.append(f"local batch {mbs}; pipeline micro-batch size not printed: searched")
            mbs = ""
        if "1F1B" in notes and "Interleaved" not in notes:
            o["vp"] = "1"  # plain 1F1B: one stage per rank
            a[:] = [x for x in a if not x.startswith("vp not printed")]
            a.append("schedule 1F1B: vp 1")
        elif "Interleaved" in notes:
            # torchtitan's generate_split_points: multi-stage schedules default to two stages
            # per rank when no split points are given (torchtitan/parallelisms/pipelining_utils.py).
            o["vp"] = "2"
            a[:] = [x for x in a if not x.startswith("vp not printed")]
            a.append("schedule Interleaved 1F1B, stages per rank not printed: 2 (torchtitan's "
                     "default without split points)")
    if grp == "nemo-2407" and "(SFT)" in r["model"] and r["model"].startswith("LLAMA2-70B"):
        # The table's 70B run is NeMo-Framework-Launcher's examples/peft/llama/h100/70b_2node.sh
        # (16 GPUs, tp 4, pp 4, gbs 32, mbs 1, 4,096 packed): virtual_pipeline_model_parallel_size
        # 20, one layer per virtual stage.
        o["vp"] = "20"
        a[:] = [x for x in a if not x.startswith("vp not printed")]
        a.append("vp not printed: 20 (NeMo-Framework-Launcher examples/peft/llama/h100/"
                 "70b_2node.sh, the table's tp/pp/gbs/seq)")
    o["mbs"] = mbs
    if not mbs:
        a.append("mbs not printed: searched (fastest that fits)")
    gbs = r["gbs"].strip()
    if not gbs:
        if local_batch:
            per = int(local_batch)
            if grp == "ibm-fsdp":
                gbs = str(per * int(dp))
                a.append("gbs not printed: batch-size column per GPU x dp, one micro-batch per step")
            else:
                gbs = str(per * int(dp))
                a.append("gbs not printed: mbs x dp (one micro-batch per step)")
        elif grp == "flash-attn" and not mbs:
            tokens = 0.5e6 if "2.7b" not in rid else 1e6
            if "1.3b" in rid:
                tokens = 0.5e6
            gbs = str(int(round(tokens / int(seq))))
            a.append(f"gbs from the printed {tokens/1e6:g}M-token batch")
        else:
            skipped.append((rid, "global batch not printed"))
            return None
    o["gbs"] = gbs
    if grp == "ibm-fsdp" and not r["gbs"].strip():
        o["mbs"] = mbs
    # recompute
    rc = r["recompute"].lower()
    if not rc and grp == "dgxc" and "-pax-" in rid:
        # Paxml's GPT configs (paxml/contrib/gpu/scripts_gpu/configs.py: GPT5B, GPT175B) inherit
        # CHECKPOINT_POLICY = SAVE_NOTHING from TransformerLmSpmdAdafactor
        # (paxml/tasks/lm/model_params.py): every layer rematerialised in the backward pass.
        # dgxc's own configs (paxml/paxml_mod_configs.py: Synthetic5BCkpt SAVE_DOT_ONLY,
        # Synthetic175BCkpt SAVE_QKV_OUT_PROJ) name policies that save matmul outputs, but its
        # configure.sh runs them with ENABLE_TE=1: the layers are Transformer Engine's, whose
        # GEMMs sit inside custom-VJP functions the remat policy does not look into. Full
        # recomputation is what the bf16 5B rows show (within 3 %; saving the GEMM outputs,
        # recompute selective, puts them 26-29 % too fast).
        o["recompute"] = "full"
        a.append("recompute not printed: full (dgxc's SAVE_DOT_ONLY / SAVE_QKV_OUT_PROJ policies "
                 "do not reach into Transformer Engine's custom-VJP layers, ENABLE_TE=1; the bf16 "
                 "5B rows run as full recompute)")
    elif not rc and grp == "dgxc" and "-maxtext-" in rid:
        # dgxc maxtext/configure.sh (the 2024 recipe: seq 4096, FSDP 16 nodes from 64 nodes):
        # remat_policy=custom with query_proj, key_proj, value_proj, qkv_proj and out_proj
        # =device; bf16 also keeps mlpwo. Core attention and the MLP block are recomputed
        # (src/perf/plan.h Recompute::kMlp); for bf16 that overstates by wo's GEMM.
        o["recompute"] = "mlp"
        a.append("recompute not printed: mlp (dgxc configure.sh remat_policy=custom saving the "
                 "q/k/v/out projections; the bf16 recipe also saves mlpwo, recomputed here)")
    elif not rc:
        o["recompute"] = ""
        a.append("recompute not printed: searched (fastest of none/selective/full that fits)")
    elif rc.startswith("full") or rc.startswith("yes") or rc.endswith("=true"):
        o["recompute"] = "full"
    elif rc.startswith("selective layer") or "every n-th" in rc:
        o["recompute"] = "full"
        a.append("per-layer checkpointing modelled as full recompute (every layer; n not printed)")
    elif rc.startswith("selective"):
        o["recompute"] = "selective"
        if "op" in rc or grp == "torchtitan":
            if "op" not in rc:
                a.append("selective_ac_option not printed: op (the default of torchtitan's "
                         "llama3 train_configs)")
            # torchtitan's per-op SAC saves every other matmul's output and the attention
            # output; it is not Megatron's selective mode (which keeps every activation but
            # the attention scores) and needs far less memory (src/perf/plan.h, kOps).
            o["recompute"] = "ops"
            a.append("per-op selective AC (torchtitan selective_ac_option=op)")
    elif rc.startswith("none") or rc.startswith("no") or rc.endswith("=false"):
        o["recompute"] = "none"
    else:
        skipped.append((rid, f"recompute '{rc}' not understood"))
        return None
    sp = r["seq_parallel"].strip().lower()
    if int(tp) > 1:
        o["seq_parallel"] = "no" if sp.startswith("no") else "yes"
        if not sp:
            a.append("sequence parallel not printed: on with tp > 1 (NeMo/torchtitan default)")
    else:
        o["seq_parallel"] = "no"
    if fsdp:
        o["zero"] = "3"
        m = re.search(r"FSDP(?: column)?=(\d+)", zero_txt)
        if m and "column" not in zero_txt:
            o["fsdp_group"] = m.group(1)
            a.append(f"FSDP shard group {m.group(1)}; replicas across groups (HSDP)")
        elif hsdp:
            o["fsdp_group"] = "8"
            a.append("HSDP shard group = one 8-GPU node (fms-fsdp default)")
        elif "degree not printed" in zero_txt and grp == "dgxc" and "-pax-" in rid:
            # dgxc paxml/configure.sh (v25.01): --fdl.DCN_MESH_SHAPE=[nodes/FSDP, FSDP, 1] with
            # FSDP=1 (5B) or 16 nodes (175B), under the configs' ICI_MESH_SHAPE [1, 8, 1]
            # (paxml/contrib/gpu/scripts_gpu/configs.py): shards over 8 GPUs (5B, one node) or
            # 128 (175B, 16 nodes), replicas across the rest.
            g = "128" if "175b" in rid else "8"
            o["fsdp_group"] = g
            a.append(f"FSDP degree not printed: {g} (dgxc configure.sh DCN_MESH_SHAPE with "
                     f"ICI_MESH_SHAPE [1,8,1]); replicas across groups (HSDP)")
        elif "degree not printed" in zero_txt:
            a.append("FSDP degree not printed: full shard over dp")
        if grp == "ibm-fsdp":
            # fms-fsdp's "bf16 mixed precision" policy (fms_fsdp/policies/mixed_precision.py:
            # bfSixteen, reduce_dtype=torch.bfloat16) reduce-scatters gradients in bf16.
            o["grads"] = "bf16"
            a.append("gradients reduced in bf16 (fms-fsdp's bfSixteen mixed-precision policy)")
    elif grp in ("nemo-2407", "nemo-longseq", "megatron-bridge", "dgxc", "megatron-lm"):
        o["zero"] = "1"
        if grp in ("dgxc", "nemo-2407") and "340B" in o["model"]:
            # dgxc-benchmarking nemotron/nemotron4-340b-synth.yaml (the config its configure.sh
            # launches): optim distributed_fused_adam, dtype bf16, grad_sync_dtype bf16. Apex's
            # DistributedFusedAdam then keeps Adam's state in bf16, sharded over dp.
            o["grads"] = "bf16-adam"
            if grp == "dgxc":
                a.append("bf16 gradients and Adam state (dgxc nemotron4-340b-synth.yaml: optim "
                         "distributed_fused_adam, dtype bf16, grad_sync_dtype bf16), sharded over "
                         "dp (ZeRO-1)")
            else:
                a.append("bf16 gradients and Adam state sharded over dp assumed: NeMo launcher "
                         "nemotron_340b.yaml sets optim dtype bf16, grad_sync_dtype bf16 (as dgxc's "
                         "340B config, distributed_fused_adam)")
        elif grp == "nemo-2407" and "(SFT)" in o["model"]:
            # NeMo 24.07's SFT runs are NeMo-Framework-Launcher's peft=llama/sft
            # (launcher_scripts/conf/peft/llama/sft.yaml: optim distributed_fused_adam, dtype
            # bf16, grad_sync_dtype bf16; activations_checkpoint_granularity null). Its H100
            # examples add fp8_params=true: fp8 weights without a bf16 copy, and an fp32 master
            # shard in place of Apex's 16-bit remainder, 11 bytes per parameter either way.
            o["grads"] = "bf16-adam"
            a.append("bf16 gradients and Adam state sharded over dp (NeMo-Framework-Launcher "
                     "conf/peft/llama/sft.yaml: distributed_fused_adam, dtype bf16, grad_sync_dtype "
                     "bf16); fp8_params=true of its H100 examples not modelled (the same 11 bytes "
                     "per parameter: fp8 weights + bf16 gradients + fp32 master and bf16 Adam "
                     "state)")
        else:
            o["grads"] = "bf16"
            a.append("bf16 gradients (Megatron-Core DDP default grad_reduce_in_fp32=False)")
            a.append("Megatron distributed optimizer (ZeRO-1) assumed (NeMo / Megatron-Core default)")
    else:
        o["zero"] = "0"
        if grp == "flash-attn":
            a.append("plain data parallel (DDP) assumed")
    # dtype
    dt = r["dtype"].lower()
    if "fp8" in dt or "float8" in dt:
        if "no float8" in dt:
            o["dtype"] = "bf16"
        else:
            o["dtype"] = "fp8"
    elif dt:
        o["dtype"] = "bf16"
    else:
        if grp == "megatron-bridge":
            o["dtype"] = "fp8"
            a.append("precision not printed: fp8 (the printed model TFLOP/s is above what bf16 reaches)")
        else:
            o["dtype"] = "bf16"
            a.append("dtype not printed: bf16")
    # fp8 recipe: torchao float8 in torchtitan (dynamic tensorwise scaling unless the row says
    # rowwise: torchao's default at both benchmark dates), JAX's per-call casts in dgxc's Paxml /
    # MaxText containers, Transformer Engine's delayed scaling in every other NVIDIA stack (NeMo,
    # Megatron-Core).
    if o["dtype"] == "fp8":
        if "rowwise" in dt.lower():
            o["fp8_recipe"] = "rowwise"
        elif grp == "torchtitan":
            o["fp8_recipe"] = "tensorwise"
            if "tensorwise" not in dt.lower():
                a.append("float8 recipe not printed: tensorwise (torchao's default)")
        elif grp == "dgxc" and ("pax" in rid or "maxtext" in rid):
            # JAX casts per call (no fp8 weight cache across calls, src/perf/plan.h kJax):
            # MaxText's quantization=fp8 is Flax's Fp8DotGeneralOp, native XLA fp8 whose
            # quantize / dequantize are ops of their own around the dot (JAX-Toolbox
            # rosetta/docs/NATIVE_FP8.md); dgxc's Paxml runs Transformer Engine's JAX layers
            # (configure.sh ENABLE_TE=1, ENABLE_FP8=1), which cast and transpose every input and
            # weight per call.
            o["fp8_recipe"] = "jax"
            if "maxtext" in rid:
                a.append("fp8 recipe not printed: jax (MaxText quantization=fp8: Flax "
                         "Fp8DotGeneralOp, XLA's native fp8 with its own quantize ops)")
            else:
                a.append("fp8 recipe not printed: jax (Transformer Engine JAX layers, "
                         "ENABLE_TE=1: casts and transposes per call)")
        else:
            o["fp8_recipe"] = "delayed"
    # torchtitan ran eager unless the run says torch.compile (compile was off by default); every
    # other stack fuses its element-wise kernels (Transformer Engine, Megatron, XLA). main()
    # carries a compile note from one metric of a run to its other metrics.
    if grp == "torchtitan":
        o["compiled"] = "yes" if ("compile" in notes.lower() or "compile" in rid) else "no"
    elif grp == "ibm-fsdp":
        # The IBM/PyTorch follow-up post (pytorch.org/blog/maximizing-training-throughput, 2024)
        # opens: "we demonstrated how FSDP and selective activation checkpointing can be used to
        # achieve 57% MFU ... on A100" (these rows) and only then "continued ... by leveraging
        # torch.compile": the blog's and fms-fsdp's tables ran eager PyTorch.
        o["compiled"] = "no"
        a.append("eager PyTorch: torch.compile came in the team's follow-up post (these tables' "
                 "57 % MFU is its starting point)")
    # Context parallelism: torchtitan ran PyTorch's experimental context_parallel (SDPA ring
    # with eager fp32 merges, K/V repeated to every head, all-gather rotation); every other stack
    # Megatron-Core / Transformer Engine's ring (blank).
    o["cp_attention"] = ""
    if grp == "torchtitan" and cp and int(cp) > 1:
        o["cp_attention"] = "torch"
        a.append("cp attention not printed: PyTorch's context_parallel as torchtitan called it "
                 "(torch 1963fc8 defaults: load-balanced ring, ALL_GATHER rotation, fp32 merges; "
                 "K and V repeated to every head by the model before SDPA)")
    # Tensor parallelism: torchtitan's is PyTorch DTensor's (ColwiseParallel / RowwiseParallel
    # with SequenceParallel, each collective its own autograd op); every other stack Megatron's
    # linear layers (blank).
    o["tp_impl"] = ""
    if grp == "torchtitan" and int(tp) > 1:
        o["tp_impl"] = "dtensor"
        a.append("TP as torchtitan runs it: DTensor ColwiseParallel / RowwiseParallel with "
                 "SequenceParallel (parallelize_llama)")
    # Dropout: the 2024 stacks train without it (blank: no), except NeMo's GPT-3 configs, which
    # keep GPT-3's dropout of 0.1: NeMo-Framework-Launcher conf/training/gpt3/{5b,20b,175b}.yaml
    # and their *_fp8_performance.yaml variants (hidden_dropout: 0.1; attention_dropout 0.1 where
    # the file sets it, as 5b.yaml does), and dgxc-benchmarking nemo_megatron/gpt3_175b_hydra.yaml
    # (hidden_dropout 0.1, attention_dropout 0.1). The estimator prices the hidden dropout (its
    # masks and element-wise traffic); FlashAttention's in-kernel dropout costs a few per cent of
    # the attention kernel (TransformerEngine issue 3312), left out. Paxml's GPT-3 (JAX) is another stack: left blank. NeMo 24.07's
    # 512-GPU GPT-3 175B row is its MLPerf run (the table links its TFLOP/s to mlcommons.org; its
    # layout, mbs 2, gbs 2048, tp 4, pp 8, vp 6 on 64 nodes, is the launcher's
    # conf/training/gpt3/175b_mlperf.yaml), which sets both dropouts to 0.0.
    o["dropout"] = ""
    if grp == "megatron-lm":
        # Megatron-LM's README table prints no training flags: its GPT models run with the
        # stack's defaults, hidden and attention dropout 0.1 (megatron/training/arguments.py
        # --hidden-dropout / --attention-dropout; its examples/gpt3 script sets neither).
        o["dropout"] = "yes"
        a.append("dropout not printed: Megatron-LM's default 0.1 (--hidden-dropout, "
                 "--attention-dropout; examples/gpt3/train_gpt3_175b_distributed.sh sets neither)")
    if o["model"].startswith("GPT3-") and (grp == "nemo-2407" or (grp == "dgxc" and "nemo" in rid)):
        if "mlcommons" in notes.lower():
            a.append("dropout not printed: none (MLPerf run, NeMo-Framework-Launcher "
                     "conf/training/gpt3/175b_mlperf.yaml: hidden and attention dropout 0.0)")
        else:
            o["dropout"] = "yes"
            a.append("dropout not printed: hidden dropout 0.1 (NeMo-Framework-Launcher "
                     "conf/training/gpt3/*.yaml; dgxc nemo_megatron/gpt3_175b_hydra.yaml)")
    # Fused attention kernel: Transformer Engine prefers cuDNN's fused attention to
    # FlashAttention-2 on Hopper and later whenever both apply (get_attention_backend; NeMo's
    # memory_optimizations.rst from NVIDIA/NeMo pull request 9188, May 2024, on: "Transformer
    # Engine prefers cuDNN flash attention on Hopper+ architectures"; before it: "By default,
    # Flash Attention is enabled"). So: cuDNN for the PyTorch NVIDIA stacks released after that
    # change (NeMo 24.07 with TE 1.8, dgxc-benchmarking v25.01's NeMo 24.09 / 24.12 launches,
    # Megatron-Bridge) and for dgxc's JAX launches, which ask for it (maxtext/configure.sh:
    # attention=cudnn_flash_te, NVTE_FUSED_ATTN=1; paxml/configure.sh: ENABLE_TE=1,
    # NVTE_FUSED_ATTN=1: Transformer Engine JAX's fused attention is cuDNN's);
    # FlashAttention-2 (blank, the default) for NeMo 24.03's long-sequence runs and PyTorch SDPA
    # (torchtitan, IBM's FSDP). Megatron-LM's README table prints no container: left at the
    # default.
    o["attn_kernel"] = ""
    if grp in ("nemo-2407", "megatron-bridge"):
        o["attn_kernel"] = "cudnn"
        a.append("attention kernel not printed: cuDNN fused attention (Transformer Engine's "
                 "preference on Hopper and later in containers after May 2024)")
    elif grp == "dgxc" and ("pax" in rid or "maxtext" in rid):
        o["attn_kernel"] = "cudnn"
        a.append("attention kernel not printed: cuDNN fused attention (Transformer Engine JAX, "
                 "NVTE_FUSED_ATTN=1 in the recipe's configure.sh)")
    elif grp == "dgxc":
        o["attn_kernel"] = "cudnn"
        a.append("attention kernel not printed: cuDNN fused attention (Transformer Engine's "
                 "preference on Hopper and later in containers after May 2024)")
    o["flash_attention"] = "yes"
    o["dp_overlap"] = "yes"
    o["pp_p2p"] = "batched"
    # TP communication overlap: Megatron-Core --tp-comm-overlap (NVIDIA recipes: yes), PyTorch's
    # async TP in torchtitan (async) only where the row says so.
    if int(tp) > 1:
        if grp == "torchtitan":
            o["tp_overlap"] = "async" if ("asynctp" in rid.replace("-", "") and not rid.endswith("-0") and
                                        not rid.endswith("-2") and not rid.endswith("-4")) or \
                re.search(r"async[ -]?tp", notes.lower()) is not None or \
                rid.endswith("asynctp") else "no"
        elif grp == "nemo-longseq":
            # NeMo 24.03 turns Transformer Engine's userbuffer TP overlap on only when the config
            # asks (MegatronGPTModel: initialize_ub = cfg.get('ub_tp_comm_overlap', False)), and
            # the launcher's Llama 2 7B config these runs start from sets it off
            # (NeMo-Framework-Launcher conf/training/llama/llama2_7b.yaml: tp 1,
            # ub_tp_comm_overlap: False); the long-sequence doc raises tp to 2-8 without saying
            # it turned the overlap on.
            o["tp_overlap"] = "no"
            a.append("TP comm overlap not printed: off, the NeMo 24.03 default and the launcher's "
                     "llama2_7b.yaml (ub_tp_comm_overlap: False)")
        else:
            o["tp_overlap"] = "yes"
    # metric and FLOP convention
    metric = r["metric"]
    val = num(r["value"])
    peak = "dtype"
    flops = "full"
    if metric == "step_s":
        metric = "iteration_time_s"
    elif metric in ("mfu", "hfu"):
        if grp == "torchtitan":
            # 1ea476e9f (the A100 tables) counted every parameter, later commits all but the
            # token embedding (the source notes say which). "SXM peak" is the H100 SXM's peak of
            # the run's dtype: the float8 rows' MFU against tokens/s is half the bf16 rows'.
            flops = "6n-total" if "N_params(total)" in notes else "6n"
            peak = "dtype"
        elif grp == "ibm-fsdp":
            flops = "6n-total"
            peak = "bf16"
        elif grp == "dgxc":
            peak = "dtype"
            if "nemotron" in r["model"].lower():
                # The printed MFU over the printed step time implies 1.129x (15B) and 1.172x
                # (340B) the GQA FLOP count: exactly NeMo's nemotron formula with
                # query_groups = heads (K and V projections counted at full width).
                flops = "full-mha"
                a.append("MFU counts K/V projections as multi-head (implied by MFU / step time)")
        elif grp == "megatron-lm":
            peak = "bf16"
    elif metric == "tflops_per_gpu":
        if grp == "megatron-bridge":
            flops = "causal"
            a.append("model TFLOP/s counted causally (Megatron-Bridge 25.09 and later)")
        elif grp == "nemo-longseq":
            a.append("TFLOP/s counted over the full s x s square (NeMo 24.x)")
        elif grp == "nemo-2407" and "(SFT)" in o["model"]:
            # NeMo 24.07's fine-tuning table packs SQuAD-v1.1 samples into 4,096-token sequences
            # (its note), so attention runs within each ~200-token sample. Each run's printed
            # TFLOP/s over its printed tokens/s is 6 x (parameters but the token embedding) per
            # token to within 0.5 % (7B 3.984e10 against 3.964e10, 13B 7.734e10 / 7.711e10,
            # 70B 4.124e11 / 4.123e11), where the full-square count is 8-16 % above it.
            flops = "packed"
            a.append("model TFLOP/s counted as NeMo's printed pairs imply for packed SFT: 6 x "
                     "parameters but the token embedding per token, attention within the ~200-token "
                     "SQuAD samples under 0.5 % and left out")
    o["metric"] = metric
    o["value"] = f"{val:g}"
    o["flops"] = flops
    o["mfu_peak"] = peak
    o["assumptions"] = clean("; ".join(x for x in a if x)) or "none"
    return o


def main():
    skipped = []
    out = []
    with open(f"{SRC}/runs-2024.csv", newline="") as f:
        for r in csv.DictReader(f):
            if r["id"].startswith("nemo-longseq") and r["id"].endswith("-nocp"):
                skipped.append((r["id"], "no-CP baseline: its plan (tp/pp/dp) is not printed"))
                continue
            o = convert(r, skipped)
            if o:
                out.append(o)
    # One run printed as several metrics (ids differing in the suffix) shares its compile flag.
    suffix = re.compile(r"-(tps|wps|mfu|tflops|step|hfu)$")
    compiled = {suffix.sub("", o["id"]) for o in out if o["compiled"] == "yes"}
    for o in out:
        if o["compiled"] == "no" and suffix.sub("", o["id"]) in compiled:
            o["compiled"] = "yes"
        if o["compiled"] == "no":
            o["assumptions"] = clean(o["assumptions"].replace("none", "") + "; eager PyTorch: "
                                     "torch.compile not mentioned (off by default)").strip("; ")
    with open(f"{DST}/runs-2024.csv", "w", newline="") as f:
        f.write(",".join(OUT_COLS) + "\n")
        for o in out:
            f.write(",".join(o[c] for c in OUT_COLS) + "\n")
    # Attention kernels: the training kernels (FlashAttention-2 forward + backward) only.
    with open(f"{SRC}/attention-kernels.csv", newline="") as f, \
            open(f"{DST}/attention.csv", "w") as g:
        g.write("gpu,head_dim,causal,seq,tflops\n")
        n = 0
        for r in csv.DictReader(f):
            if r["kernel"].startswith("FlashAttention-2") and r["direction"] == "fwd+bwd":
                gpu = "A100-80GB" if r["gpu"].startswith("A100") else "H100-SXM"
                causal = "yes" if r["causal"] == "true" else "no"
                g.write(f"{gpu},{r['head_dim']},{causal},{r['seq']},{r['tflops']}\n")
                n += 1
    # Every kernel of the charts, as published: the other kernels' rates are fitted as ratios to
    # FlashAttention-2's (src/perf/attention_kernels.h).
    shutil.copyfile(f"{SRC}/attention-kernels.csv", f"{DST}/attention-kernels.csv")
    for rid, why in skipped:
        print(f"skipped {rid}: {why}", file=sys.stderr)
    print(f"wrote {len(out)} runs ({len(skipped)} skipped) and {n} attention points", file=sys.stderr)


main()
