// The stages `Evaluate` runs, in order, each a pure function of the typed context before it:
//
//   StageShape     the plan's dimensions on the busiest pipeline stage (estimator_memory.cc)
//   MemoryOf       weights, gradients, optimizer state, activations, buffers (estimator_memory.cc)
//   ComputeOf      GPU work per micro-batch: forward, backward, recompute (estimator_compute.cc)
//   ModelParallelCommOf  exposed TP, CP and EP communication per micro-batch (estimator_comm.cc)
//   PipelineOf     the micro-batch with host launch limits, fill and drain, P2P (estimator_comm.cc)
//   DataParallelCommOf   gradient reduction and ZeRO gathers per step (estimator_comm.cc)
//   OptimizerStepOf      the optimizer's memory-bound step (estimator_comm.cc)
//   FillRates      tokens/s, MFU, HFU (estimator.cc)
//
// Stage results are Seconds and Bytes; inside a stage the arithmetic is in plain doubles (SI
// units: seconds, bytes, FLOPs). Internal to src/perf: none of this is a public contract.
// Every function here is pure, allocation-free and thread-safe.
#pragma once

#include "core/units.h"
#include "perf/estimator.h"

namespace baton::perf::internal {

// The plan on the busiest (first) pipeline stage. Counts are doubles: they enter products.
struct StageShape {
  double tp = 1, pp = 1, vp = 1;
  double dp_cp = 1;       // dp x cp: the ranks gradients are reduced over
  int micro_batches = 0;  // per pipeline per step
  double seq = 0;         // tokens per sequence
  double seq_local = 0;   // per context-parallel rank
  double tokens = 0;      // per micro-batch per CP rank: mbs x seq_local
  double hidden = 0, kv_dim = 0, ffn = 0, vocab = 0;
  double mats = 2;            // weight matrices of the MLP: 3 with SwiGLU's gate, else 2
  double layers = 0;          // on the busiest stage: ceil(layers / pp)
  double moe_layers = 0;      // of those, MoE layers (the model's share)
  double dense_layers = 0;    // ... and dense ones
  double active_experts = 0;  // routed top-k plus shared experts
  double expert_ffn = 0;      // one expert's FFN width
  double sp_div = 1;          // tp with sequence parallelism, else 1
  bool flash = true;          // fused attention (TrainingSpec::flash_attention)
  bool fp8 = false;           // dtype fp8
  // torchao's tensorwise TP styles gather fp8 (see ComputeOf's casts and the DTensor TP terms).
  bool fp8_tp_gather = false;
  double dense_layer_params = 0, moe_layer_params = 0;  // one layer, before TP
  double params = 0;  // the busiest stage's parameters per GPU: TP-sharded, before ZeRO
};
StageShape ShapeOf(const EvalContext& ctx, const ParallelPlan& plan);

// Memory of the busiest stage per GPU and what the runtime leaves usable. Does not judge fit.
MemoryEstimate MemoryOf(const EvalContext& ctx, const ParallelPlan& plan, const StageShape& s);

// GPU work of one micro-batch on the busiest stage, communication excluded.
struct ComputeTimes {
  Seconds forward;      // the stage's layers plus the output layer and the loss
  Seconds backward;     // the same, backward, with gradient accumulation outside the GEMMs
  Seconds recompute;    // what the plan's recomputation replays
  Seconds logits_pass;  // the output layer and the loss, forward and backward (the last stage's)
  // Attention per layer: one CP ring step on the diagonal / off it (the whole core without CP).
  Seconds attn_step_diag, attn_step_off;
  double attn_backward_ratio = 2;  // backward / forward of the attention kernel
  // The forward time of each of a layer's four TP-sharded GEMMs (QKV, the attention projection,
  // fc1 with SwiGLU's gate, fc2): what a TP collective fused beside it can hide behind.
  Seconds gemm_qkv, gemm_proj, gemm_fc1, gemm_fc2;
};
ComputeTimes ComputeOf(const EvalContext& ctx, const ParallelPlan& plan, const StageShape& s);

// Exposed tensor, context and expert parallel communication of one micro-batch.
struct ModelParallelComm {
  Seconds tp_forward, tp_backward, tp_recompute;
  Seconds cp_forward, cp_backward, cp_recompute;
  Seconds ep_forward, ep_backward, ep_recompute;
};
ModelParallelComm ModelParallelCommOf(const EvalContext& ctx, const ParallelPlan& plan,
                                      const StageShape& s, const ComputeTimes& compute,
                                      const GroupSpans& spans);

// Megatron's TP backward moves 1.5x the forward's bytes with sequence parallelism, else 1x.
double TpBackwardRatio(const ParallelPlan& plan);
// The share of the forward's TP collectives a recomputation replays (full 1, mlp 0.5, else 0).
double TpRecomputeShare(const ParallelPlan& plan);

// One micro-batch through the pipeline: forward and backward with their exposed communication.
struct MicroBatchTimes {
  Seconds forward;   // compute + exposed TP/CP/EP forward
  Seconds backward;  // compute + exposed backward + recompute with its communication
};
MicroBatchTimes MicroBatchOf(const ComputeTimes& compute, const ModelParallelComm& comm);

struct PipelineTimes {
  Seconds launch;  // per micro-batch, GPUs idle while the host dispatches
  Seconds bubble;  // fill and drain, per step
  Seconds p2p;     // pipeline sends and receives on the critical path, per step
};
PipelineTimes PipelineOf(const EvalContext& ctx, const ParallelPlan& plan, const StageShape& s,
                         const ComputeTimes& compute, const MicroBatchTimes& mb,
                         const GroupSpans& spans);

// Exposed data-parallel communication per step: gradient reduction, ZeRO gathers, FSDP units.
Seconds DataParallelCommOf(const EvalContext& ctx, const ParallelPlan& plan, const StageShape& s,
                           const MicroBatchTimes& mb, const GroupSpans& spans);
// The optimizer's step over the stage's (sharded) parameters, memory-bound, plus the per-step
// overhead (Calibration::step_overhead_s).
Seconds OptimizerStepOf(const EvalContext& ctx, const ParallelPlan& plan, const StageShape& s);

// tokens/s, MFU, HFU and the FLOPs per step, from out->step.
void FillRates(const EvalContext& ctx, const ParallelPlan& plan, const StageShape& s,
               StepEstimate* out);

}  // namespace baton::perf::internal
