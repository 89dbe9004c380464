// Evaluate's communication stages: the collectives over a group's tiers, the exposed tensor,
// context and expert parallel communication of a micro-batch, the pipeline (host launch limit,
// fill and drain, P2P), data parallelism (gradient reduction, ZeRO and FSDP units) and the
// optimizer step.
#include <algorithm>
#include <cmath>

#include "perf/estimator_stages.h"

namespace baton::perf::internal {
namespace {

// Ring or tree (whichever is cheaper in latency), hierarchically over the tiers a group spans:
// reduce-scatter up the tiers, then all-gather down, each level on 1/k of the data below it.
double AllReduceTime(const EvalContext& ctx, const GroupSpan& g, double bytes) {
  double t = g.size() > 1.0 + 1e-9 ? ctx.system.calib.collective_overhead_s : 0.0;
  double b = bytes;
  for (int i = 0; i < ctx.tier_count; ++i) {
    double k = g.factor[i];
    if (k <= 1.0 + 1e-9) continue;
    double ring_steps = 2 * (k - 1);
    double tree_steps = 2 * std::ceil(std::log2(k));
    t += 2 * (k - 1) / k * b / ctx.tier_bw[i] +
         std::min(ring_steps, tree_steps) * ctx.tier_latency[i];
    b /= k;
  }
  return t;
}

// Reduce-scatter or all-gather: half the traffic of an all-reduce.
double HalfCollectiveTime(const EvalContext& ctx, const GroupSpan& g, double bytes) {
  double t = g.size() > 1.0 + 1e-9 ? ctx.system.calib.collective_overhead_s : 0.0;
  double b = bytes;
  for (int i = 0; i < ctx.tier_count; ++i) {
    double k = g.factor[i];
    if (k <= 1.0 + 1e-9) continue;
    t += (k - 1) / k * b / ctx.tier_bw[i] + (k - 1) * ctx.tier_latency[i];
    b /= k;
  }
  return t;
}

// All-to-all where each GPU holds `bytes`: the share bound for peers meeting at tier i travels at
// that tier's bandwidth.
double AllToAllTime(const EvalContext& ctx, const GroupSpan& g, double bytes) {
  double size = g.size();
  if (size <= 1.0 + 1e-9) return 0;
  double t = ctx.system.calib.collective_overhead_s;
  double inner = 1;
  for (int i = 0; i < ctx.tier_count; ++i) {
    double k = g.factor[i];
    if (k <= 1.0 + 1e-9) continue;
    double peers = inner * (k - 1);
    t += bytes * peers / size / ctx.tier_bw[i] + ctx.tier_latency[i];
    inner *= k;
  }
  return t;
}

double P2pTime(const EvalContext& ctx, const GroupSpan& g, double bytes) {
  int tier = g.top_tier();
  return bytes / ctx.tier_bw[tier] + ctx.tier_latency[tier] +
         ctx.system.calib.collective_overhead_s;
}
}  // namespace

double TpBackwardRatio(const ParallelPlan& plan) {
  // Megatron's TP backward: without sequence parallelism one all-reduce per block, as the forward
  // (the conjugate f / g operators); with it, the conjugates of the forward's all-gather and
  // reduce-scatter plus a second all-gather of the saved shard for the weight gradient: 1.5x.
  return plan.sequence_parallel ? 1.5 : 1.0;
}

double TpRecomputeShare(const ParallelPlan& plan) {
  // The share of the forward's Megatron TP collectives a recomputation replays: all of them
  // (full), or the MLP's half (fc1's all-gather and fc2's reduce-scatter) and, for MoE layers,
  // the dispatch and combine (mlp).
  return plan.recompute == Recompute::kFull ? 1.0 : plan.recompute == Recompute::kMlp ? 0.5 : 0.0;
}

ModelParallelComm ModelParallelCommOf(const EvalContext& ctx, const ParallelPlan& plan,
                                      const StageShape& s, const ComputeTimes& compute,
                                      const GroupSpans& spans) {
  const ModelSpec& m = ctx.model;
  const Calibration& c = ctx.system.calib;
  const bool fp8 = s.fp8, fp8_tp_gather = s.fp8_tp_gather;
  const double t = s.tp, tokens = s.tokens, h = s.hidden, kvd = s.kv_dim, sp_div = s.sp_div;
  const double stage_layers = s.layers, ls_moe = s.moe_layers;
  const double t_attn_step_diag = compute.attn_step_diag.value();
  const double t_attn_step_off = compute.attn_step_off.value();
  const double attn_bwd = compute.attn_backward_ratio;
  const double g_qkv = compute.gemm_qkv.value(), g_o = compute.gemm_proj.value();
  const double g_in = compute.gemm_fc1.value(), g_out = compute.gemm_fc2.value();
  const GroupSpan& tp_g = spans.groups[static_cast<int>(Group::kTp)];
  const GroupSpan& cp_g = spans.groups[static_cast<int>(Group::kCp)];
  const GroupSpan& ep_g = spans.groups[static_cast<int>(Group::kEp)];

  const double tp_hidden = !plan.tp_comm_overlap   ? 0.0
                           : ctx.training.async_tp ? c.async_tp_overlap_fraction
                                                   : c.tp_overlap_fraction;
  double tp_layer =
      plan.tp > 1 ? (1 - tp_hidden) * 2 * AllReduceTime(ctx, tp_g, 2 * tokens * h) : 0.0;
  // Transformer Engine's userbuffer overlap (Megatron --tp-comm-overlap, which needs sequence
  // parallelism; TE's pytorch/module/base.py initialize_ub and
  // common/comm_gemm_overlap/comm_gemm_overlap.cpp) runs each collective beside the one GEMM it
  // feeds or follows, never more. The forward's two all-gathers (before QKV and fc1) and two
  // reduce-scatters (after the projection and fc2) are split with their GEMM into tp chunks, one
  // chunk's transfer beside each GEMM chunk; one chunk's transfer of the tp has no GEMM chunk
  // beside it (the reduce-scatter's last, issued after the last GEMM chunk, in TE's pipeline
  // method; the all-gather's copy into the userbuffer before the ring exchange starts), so at
  // most (tp - 1) / tp of min(transfer, GEMM) hides. The backward's all-gathers of the
  // projection's and fc2's output gradients are split the same way against their
  // input-gradient GEMMs; its bulk overlaps (the QKV and fc1 inputs re-gathered beside their
  // input-gradient GEMMs, those gradients reduce-scattered beside the weight-gradient GEMMs) hide
  // at most min(transfer, GEMM). tp_overlap_fraction is the share of that ceiling each overlap
  // achieves (SMs lent to the comm kernels, gaps between chunks), no longer a share of the whole
  // transfer. (TE's default methods exactly, ring exchange over tp steps for the all-gathers and
  // a 4-way pipeline for the forward reduce-scatters, were measured and left out:
  // docs/perf/calibration-log.md.)
  // A profile whose overlap hides nothing (A100's 0: Megatron-LM ran there without TE's overlap)
  // runs none of it and pays none of its costs.
  const bool te_ub = plan.tp_comm_overlap && plan.sequence_parallel && plan.tp > 1 &&
                     !ctx.training.async_tp && !ctx.training.dtensor_tp &&
                     c.tp_overlap_fraction > 0;
  const bool dtensor_tp = ctx.training.dtensor_tp && plan.sequence_parallel && plan.tp > 1;
  auto exposed = [](double comm, double gemm, double hide) {
    return comm - hide * std::min(comm, gemm);
  };
  double te_ub_bwd = 0;
  if (te_ub) {
    // The old all-reduce pair's cost split into its four halves (userbuffers bypass NCCL).
    const double coll = 0.5 * AllReduceTime(ctx, tp_g, 2 * tokens * h);
    const double split_hide = c.tp_overlap_fraction * (t - 1) / t;
    auto split = [&](double gemm) { return exposed(coll, gemm, split_hide); };
    auto bulk = [&](double gemm) { return exposed(coll, gemm, c.tp_overlap_fraction); };
    // The pipelined reduce-scatters keep their SMs from the GEMM beside them for its whole run
    // (set_sm_margin): Transformer Engine's defaults (initialize_ub: num_sm 16, set_sm_margin for
    // every method but the ring exchange, TE 2.x) take 16 of the GPU's SMs (H100: 132) from the
    // projection's and fc2's forward GEMMs, which then take sms / (sms - 16) of their time.
    // (NeMo's per-model H100 configs, tp_overlap_configs/userbuffers.py, give the projection 24
    // and fc2 16, and the bulk overlaps' few SMs: measured and left out,
    // docs/perf/calibration-log.md. The ring exchanges move data by copy engine.) A declared GPU
    // without an SM count takes H100's, the part TE's default was set on.
    constexpr double kTeCommSms = 16;
    const double sms = ctx.system.gpu.sm_count > 0 ? ctx.system.gpu.sm_count : 132.0;
    const double sm_margin = (sms / (sms - kTeCommSms) - 1) * (g_o + g_out);
    tp_layer = split(g_qkv) + split(g_o) + split(g_in) + split(g_out) + sm_margin;
    te_ub_bwd = split(g_o) + split(g_out) + 2 * bulk(g_qkv) + 2 * bulk(g_in);
  }
  // The ring passes K and V of the local chunk cp - 1 times per layer; each transfer hides only
  // behind the attention step running at the same time (the previous chunk's), never behind
  // the GEMMs, which need the attention output. The backward pass sends K, V and their
  // gradients (twice the bytes) behind attention steps that take 2.5 times as long.
  // PyTorch's context_parallel (CpAttention::kTorch) passes K and V repeated to every query head
  // and gathers them with one all-gather (its default ALL_GATHER rotater: issued with the
  // diagonal step, waited on before the next), so only the diagonal step hides it; the backward
  // gathers K and V again the same way and passes dK and dV (fp32: twice K and V's bytes) round
  // the ring with one all-to-all per step (cp of them), each behind the next step's backward but
  // the last, which _templated_ring_attention_backward waits on right after its loop.
  // Under torch.compile (fused_elementwise: torchtitan compiles each block, and the ring is traced
  // into the block's graphs through DTensor's SDPA handler) none of these transfers overlaps: a
  // functional collective traced into a graph is followed at once by its wait_tensor
  // (torch/distributed/_functional_collectives.py, _maybe_wrap_tensor: "wait_tensor() op is
  // immediately called"), and Inductor moves waits only with reorder_for_compute_comm_overlap,
  // off by default (torch/_inductor/config.py). The eager AsyncCollectiveTensor waits at first use.
  double cp_layer = 0, cp_layer_bwd = 0;
  if (plan.cp > 1 && ctx.training.cp_attention == CpAttention::kTorch) {
    double chunk = 2 * 2 * tokens * h / t;
    double gather = HalfCollectiveTime(ctx, cp_g, plan.cp * chunk);
    double hop_dkv = P2pTime(ctx, cp_g, 2 * chunk);
    if (ctx.training.fused_elementwise) {
      cp_layer = gather;
      cp_layer_bwd = gather + plan.cp * hop_dkv;
    } else {
      cp_layer = std::max(0.0, gather - t_attn_step_diag);
      cp_layer_bwd = std::max(0.0, gather - attn_bwd * t_attn_step_diag) +
                     (plan.cp - 1) * std::max(0.0, hop_dkv - attn_bwd * t_attn_step_off) + hop_dkv;
    }
  } else if (plan.cp > 1 && ctx.training.cp_attention == CpAttention::kAllGather) {
    // Llama 3's all-gather CP: the gather of K and V (GQA width) and the backward's
    // reduce-scatter of their gradients sit on the critical path ("the all-gather latency is
    // exposed", Dubey et al. 2024, 3.3.2).
    double gathered = plan.cp * 2 * 2 * tokens * kvd / t;
    cp_layer = HalfCollectiveTime(ctx, cp_g, gathered);
    cp_layer_bwd = HalfCollectiveTime(ctx, cp_g, gathered);
  } else if (plan.cp > 1) {
    double chunk = 2 * 2 * tokens * kvd / t;  // K and V of the local chunk
    double hop = P2pTime(ctx, cp_g, chunk);
    double hop_bwd = P2pTime(ctx, cp_g, 2 * chunk);
    cp_layer = std::max(0.0, hop - t_attn_step_diag) +
               (plan.cp - 2) * std::max(0.0, hop - t_attn_step_off);
    cp_layer_bwd = std::max(0.0, hop_bwd - attn_bwd * t_attn_step_diag) +
                   (plan.cp - 2) * std::max(0.0, hop_bwd - attn_bwd * t_attn_step_off);
  }
  double ep_layer = 0;
  if (plan.ep > 1) {
    double a2a_bytes = 2 * tokens * h * m.moe.top_k / sp_div;
    ep_layer = 2 * AllToAllTime(ctx, ep_g, a2a_bytes);  // dispatch + combine
  }
  // TP as PyTorch's DTensor runs it (TrainingSpec::dtensor_tp, torchtitan's parallelize_llama):
  // per layer and pass, an all-gather before the QKV and fc1 (w1, w3) GEMMs and a reduce-scatter
  // after the projection and fc2 (w2) GEMMs, each a collective of its own (funcol). Two things
  // differ from Megatron's layers:
  //  - the all-gather is its own autograd op whose output the matmuls save, so the backward is
  //    the four conjugates alone (16-bit), not Megatron's 1.5x with the re-gather below;
  //  - async TP (torch._inductor's micro-pipeline pass: fused_all_gather_matmul,
  //    fused_matmul_reduce_scatter) runs each collective's chunks beside the chunks of the one GEMM
  //    it is fused with, so it hides at most that GEMM's time (in the backward the same GEMMs'
  //    input-gradient products): where fp8 halves a small GEMM (small h / tp) below its
  //    collective's time, less is hidden.
  // torchtitan's per-op checkpointing saves the reduce-scatters' outputs (its _save_list) but not
  // the all-gathers', which the backward reruns: their forward cost counts again. With torchao's
  // tensorwise fp8 the all-gathers of both passes move fp8 (fp8_tp_gather above; the forward's
  // alone, without the casts on 1 / tp of the tokens, was measured against it and left out:
  // docs/perf/calibration-log.md).
  double comm_fwd_tp = stage_layers * tp_layer;
  double dt_bwd = 0, dt_ops_rc = 0;
  if (dtensor_tp) {
    const double act = 2 * tokens * h;
    const double rs = HalfCollectiveTime(ctx, tp_g, act);
    const double ag = fp8_tp_gather ? HalfCollectiveTime(ctx, tp_g, act / 2) : rs;
    // With torchao's rowwise recipe only the matmul-reduce-scatters fuse: each all-gather feeds
    // a rowwise quantisation before its scaled_mm, which the pass does not match (pytorch/pytorch
    // issue 149990, open in 2025), so the all-gathers and their backward conjugates stay exposed.
    const double hide_ag = fp8 && ctx.training.fp8_recipe == Fp8Recipe::kRowwise ? 0.0 : tp_hidden;
    dt_ops_rc = stage_layers * (exposed(ag, g_qkv, hide_ag) + exposed(ag, g_in, hide_ag));
    comm_fwd_tp =
        dt_ops_rc + stage_layers * (exposed(rs, g_o, tp_hidden) + exposed(rs, g_out, tp_hidden));
    dt_bwd = stage_layers * (exposed(rs, g_qkv, tp_hidden) + exposed(ag, g_o, hide_ag) +
                             exposed(rs, g_in, tp_hidden) + exposed(ag, g_out, hide_ag));
  }
  double comm_fwd_cp = stage_layers * cp_layer;
  double comm_bwd_cp = stage_layers * cp_layer_bwd;
  double comm_fwd_ep = ls_moe * ep_layer;
  const double rc_tp_share = TpRecomputeShare(plan);
  double rc_tp =
      plan.recompute == Recompute::kOps && dtensor_tp ? dt_ops_rc : rc_tp_share * comm_fwd_tp;
  // Selective recomputation re-runs core attention, and with it the forward ring.
  double rc_cp = plan.recompute != Recompute::kNone ? comm_fwd_cp : 0.0;
  double rc_ep = rc_tp_share > 0 ? comm_fwd_ep : 0.0;  // full and mlp rerun the MoE block
  const double comm_bwd_tp = dtensor_tp ? dt_bwd
                             : te_ub    ? stage_layers * te_ub_bwd
                                        : TpBackwardRatio(plan) * comm_fwd_tp;
  ModelParallelComm out;
  out.tp_forward = Seconds(comm_fwd_tp);
  out.tp_backward = Seconds(comm_bwd_tp);
  out.tp_recompute = Seconds(rc_tp);
  out.cp_forward = Seconds(comm_fwd_cp);
  out.cp_backward = Seconds(comm_bwd_cp);
  out.cp_recompute = Seconds(rc_cp);
  out.ep_forward = Seconds(comm_fwd_ep);
  out.ep_backward = Seconds(2 * comm_fwd_ep);  // the dispatch and combine's conjugates
  out.ep_recompute = Seconds(rc_ep);
  return out;
}

MicroBatchTimes MicroBatchOf(const ComputeTimes& compute, const ModelParallelComm& comm) {
  const double rc_comm =
      comm.tp_recompute.value() + comm.cp_recompute.value() + comm.ep_recompute.value();
  MicroBatchTimes mb;
  mb.forward = Seconds(compute.forward.value() + comm.tp_forward.value() + comm.cp_forward.value() +
                       comm.ep_forward.value());
  mb.backward =
      Seconds(compute.backward.value() + comm.tp_backward.value() + comm.ep_backward.value() +
              comm.cp_backward.value() + compute.recompute.value() + rc_comm);
  return mb;
}

PipelineTimes PipelineOf(const EvalContext& ctx, const ParallelPlan& plan, const StageShape& s,
                         const ComputeTimes& compute, const MicroBatchTimes& mbt,
                         const GroupSpans& spans) {
  const Calibration& c = ctx.system.calib;
  const double t = s.tp, p = s.pp, v = s.vp, mb = s.micro_batches, stage_layers = s.layers;
  const double t_mb = mbt.forward.value() + mbt.backward.value();
  // Launch-bound micro-batches: the host must dispatch every pass of every layer of the stage,
  // every TP collective (a rendezvous of tp ranks behind a ring of tp - 1 dependent steps,
  // Calibration::host_collective_step_s: the forward's two all-reduces, or two all-gathers and
  // two reduce-scatters with sequence parallelism; the backward's 1x / 1.5x of those,
  // TpBackwardRatio; full recomputation's replay) and the micro-batch's work outside the layers.
  double passes = 3.0 + (plan.recompute != Recompute::kNone ? 1.0 : 0.0);
  const double tp_calls_fwd = plan.tp > 1 ? (plan.sequence_parallel ? 4.0 : 2.0) : 0.0;
  const double tp_calls = tp_calls_fwd * (1 + TpBackwardRatio(plan) + TpRecomputeShare(plan));
  const double host_mb = stage_layers * (passes * c.host_layer_pass_s +
                                         tp_calls * (t - 1) * c.host_collective_step_s) +
                         c.host_microbatch_s;
  PipelineTimes out;
  out.launch = Seconds(std::max(0.0, host_mb - t_mb));
  // The output layer and the loss run on the last stage alone: Megatron-LM (2021-22: every stage
  // holds num_layers / pp layers; the first adds the embedding lookup, the last the final norm,
  // the logits GEMM and the cross-entropy) and DeepSpeed's PipelineModule
  // (partition_method="type:transformer") split the layers evenly and leave that work on top.
  // The steady state runs at the last stage's pace (m micro-batches of t_mb), but fill and drain
  // pass through the other p - 1 stages, which lack it: 1F1B takes m t_last + (p - 1) t_other
  // (a schedule simulation with one heavier stage gives exactly that), not (m + p - 1) t_last.
  const double t_mb_inner = std::max(t_mb - compute.logits_pass.value(), host_mb);
  out.bubble = Seconds(plan.pp > 1 ? (p - 1) / v * t_mb_inner : 0.0);
  if (plan.pp > 1) {
    // Split across TP ranks (Megatron's scatter-gather; DeepSpeed's engine partitions too).
    double p2p_bytes = 2 * s.tokens * s.hidden / t;
    double transfers = plan.batched_pp_p2p ? 2.0 : 4.0;  // per micro-batch, see plan.h
    const GroupSpan& pp_g = spans.groups[static_cast<int>(Group::kPp)];
    out.p2p = Seconds(transfers * (v * mb + p - 1) * P2pTime(ctx, pp_g, p2p_bytes));
  }
  return out;
}

Seconds DataParallelCommOf(const EvalContext& ctx, const ParallelPlan& plan, const StageShape& s,
                           const MicroBatchTimes& mbt, const GroupSpans& spans) {
  const Calibration& c = ctx.system.calib;
  const double d = s.dp_cp, mb = s.micro_batches, stage_layers = s.layers;
  const double stage_params = s.params;
  const double t_fwd = mbt.forward.value(), t_bwd = mbt.backward.value();
  const GroupSpan& dp_g = spans.groups[static_cast<int>(Group::kDp)];

  double dp_time = 0;
  if (d > 1) {
    const topo::Dtype dt = ctx.training.dtype;
    double grad_bytes =
        (dt == topo::Dtype::kFp16 || !ctx.training.fp32_grads ? 2.0 : 4.0) * stage_params;
    double param_bytes = 2 * stage_params;
    double hide = plan.overlap_dp_comm ? c.dp_overlap_fraction : 0.0;
    if (plan.zero <= 2) {
      double reduce = plan.zero == 0 ? AllReduceTime(ctx, dp_g, grad_bytes)
                                     : HalfCollectiveTime(ctx, dp_g, grad_bytes);
      dp_time += std::max(0.0, reduce - hide * t_bwd);
      if (plan.zero >= 1) {
        double gather = HalfCollectiveTime(ctx, dp_g, param_bytes);
        dp_time += std::max(0.0, gather - hide * t_fwd);
      }
    } else {
      // ZeRO-3 / FSDP as it runs (PyTorch FSDP / FSDP2, Megatron FSDP): every layer is a unit.
      // Each micro-batch all-gathers a unit's parameters before its forward, frees them after
      // (reshard after forward) and gathers them again for its backward, then reduce-scatters the
      // unit's gradients. Prefetching hides one unit's collectives behind the compute of the
      // unit next to it, never more: the first gather of each pass is exposed, and a unit whose
      // collectives take longer than a neighbour's compute exposes the difference. HSDP shards
      // over fsdp_group ranks and all-reduces the gradient shards across the replicas once per
      // step, behind the last backward pass like ZeRO-1/2.
      const double units = stage_layers;
      const double unit_params = stage_params / units;
      const double shard_size = plan.fsdp_group > 0 ? double(plan.fsdp_group) : d;
      GroupSpan shard_g, replica_g;
      double left = shard_size;
      for (int i = 0; i < kMaxTiers; ++i) {
        double take = std::min(dp_g.factor[i], std::max(1.0, left));
        shard_g.factor[i] = take;
        replica_g.factor[i] = dp_g.factor[i] / take;
        left /= take;
      }
      double ag = HalfCollectiveTime(ctx, shard_g, 2 * unit_params);
      double rs = HalfCollectiveTime(ctx, shard_g, grad_bytes / units);
      double fhide = plan.overlap_dp_comm ? c.fsdp_overlap_fraction : 0.0;
      double unit_fwd = t_fwd / units, unit_bwd = t_bwd / units;
      double exposed_fwd = ag + (units - 1) * std::max(0.0, ag - fhide * unit_fwd);
      double exposed_bwd = rs + units * std::max(0.0, ag + rs - fhide * unit_bwd);
      dp_time += mb * (exposed_fwd + exposed_bwd);
      if (replica_g.size() > 1.0 + 1e-9) {
        double reduce = AllReduceTime(ctx, replica_g, grad_bytes / shard_size);
        dp_time += std::max(0.0, reduce - hide * t_bwd);
      }
    }
  }
  return Seconds(dp_time);
}

Seconds OptimizerStepOf(const EvalContext& ctx, const ParallelPlan& plan, const StageShape& s) {
  const double d = s.dp_cp, stage_params = s.params;
  const double opt_state_bytes = ctx.training.bf16_optimizer_state ? 6.0 : 12.0;

  double opt_params = stage_params / (plan.zero >= 1 ? d : 1.0);
  double opt_shard = plan.zero >= 3 && plan.fsdp_group > 0 ? double(plan.fsdp_group) : d;
  if (plan.zero >= 1) opt_params = stage_params / opt_shard;
  // Adam reads and writes its state (2 x 12 bytes in fp32, 2 x 6 in bf16), reads the gradient
  // and writes the 16-bit weight (4 + 4 bytes, rounding the 16-bit cases up).
  return Seconds(opt_params * (2 * opt_state_bytes + 8) / ctx.hbm_bytes_per_s +
                 ctx.system.calib.step_overhead_s);
}

}  // namespace baton::perf::internal
