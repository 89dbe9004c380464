// Evaluate's first stages: the plan's shape on the busiest pipeline stage, and its memory.
#include <algorithm>
#include <cmath>

#include "perf/estimator_stages.h"

namespace baton::perf::internal {

StageShape ShapeOf(const EvalContext& ctx, const ParallelPlan& plan) {
  const ModelSpec& m = ctx.model;
  StageShape s;
  s.tp = plan.tp;
  s.pp = plan.pp;
  s.vp = plan.vp;
  s.dp_cp = double(plan.dp) * plan.cp;
  s.micro_batches = ctx.training.global_batch / (plan.dp * plan.mbs);
  s.seq = m.seq;
  s.seq_local = s.seq / plan.cp;
  s.tokens = plan.mbs * s.seq_local;
  s.hidden = m.hidden;
  s.kv_dim = double(m.kv_heads) * m.head_dim();
  s.ffn = m.ffn;
  s.vocab = m.vocab;
  s.mats = m.ffn_kind == FfnKind::kSwiGlu ? 3.0 : 2.0;
  // NOLINTNEXTLINE(bugprone-integer-division): whole layers, the busiest stage's ceil(layers / pp).
  s.layers = (m.layers + plan.pp - 1) / plan.pp;
  const double moe_share = double(m.moe_layers()) / m.layers;
  s.moe_layers = s.layers * moe_share;
  s.dense_layers = s.layers - s.moe_layers;
  s.active_experts = m.moe.top_k + m.moe.shared_experts;
  s.expert_ffn = double(m.moe.expert_ffn);
  s.sp_div = plan.sequence_parallel ? s.tp : 1.0;
  s.flash = ctx.training.flash_attention;
  s.fp8 = ctx.training.dtype == topo::Dtype::kFp8;
  // torchao's tensorwise TP styles (Float8ColwiseParallel, PrepareFloat8ModuleInput,
  // Float8RowwiseParallel in torchao/float8/float8_tensor_parallel.py, which torchtitan's
  // parallelize_llama uses whenever float8 is on) cast each sequence-sharded block input to fp8
  // before its all-gather, and each sharded output gradient of the projection and fc2 before the
  // backward's all-gather (_NoopFwToFloat8BwDynamic after the forward's redistribute): those
  // gathers move one byte per element, and those casts run on 1 / tp of the tokens.
  s.fp8_tp_gather = s.fp8 && ctx.training.fp8_recipe == Fp8Recipe::kTensorwise &&
                    ctx.training.dtensor_tp && plan.sequence_parallel && plan.tp > 1;

  const double h = s.hidden;
  const double expert_params = s.mats * h * s.expert_ffn;
  s.dense_layer_params = m.DenseLayerParams();
  s.moe_layer_params = m.AttentionParams() +
                       (double(m.moe.experts) / plan.ep + m.moe.shared_experts) * expert_params +
                       h * m.moe.experts;
  s.params = (s.dense_layers * s.dense_layer_params + s.moe_layers * s.moe_layer_params) / s.tp;
  const double embed =
      plan.pp == 1 ? m.EmbeddingParams() : s.vocab * h + (m.learned_positions ? s.seq * h : 0.0);
  s.params += embed / s.tp;
  return s;
}

MemoryEstimate MemoryOf(const EvalContext& ctx, const ParallelPlan& plan, const StageShape& s) {
  const ModelSpec& m = ctx.model;
  const Calibration& c = ctx.system.calib;
  const double t = s.tp, p = s.pp, h = s.hidden, kvd = s.kv_dim, ffn = s.ffn;
  const double tokens = s.tokens, sp_div = s.sp_div, mats = s.mats;
  MemoryEstimate mem;
  mem.capacity = ctx.system.gpu.hbm;
  mem.usable = Bytes(std::max(
      0.0, (mem.capacity.value() - GiB(c.hbm_reserved_gib).value()) * (1 - c.hbm_fragmentation)));
  // ZeRO-3 shards over its group (HSDP: fsdp_group ranks), ZeRO-1/2 over every dp x cp rank.
  const double shard = plan.zero >= 3 && plan.fsdp_group > 0 ? double(plan.fsdp_group) : s.dp_cp;
  const double weight_bytes = 2 + (s.fp8 ? c.fp8_weight_bytes : 0.0);
  mem.weights = Bytes(s.params * weight_bytes / (plan.zero >= 3 ? shard : 1.0));
  const double grad_elem = ctx.training.fp32_grads ? 4.0 : 2.0;
  mem.gradients = Bytes(s.params * grad_elem / (plan.zero >= 2 ? shard : 1.0));
  const double opt_state_bytes = ctx.training.bf16_optimizer_state ? 6.0 : 12.0;
  mem.optimizer = Bytes(s.params * opt_state_bytes / (plan.zero >= 1 ? shard : 1.0));
  // Korthikanti et al. per-layer activations in bytes, generalised to GQA, SwiGLU and MoE.
  double replicated = (8 + (m.dropout ? 2 : 0)) * tokens * h / sp_div;
  double attn_split = 2 * tokens * (h + kvd) + 2 * tokens * kvd + 2 * tokens * h;
  double mlp_dense = (mats == 3 ? 6 : 4) * tokens * ffn / t;
  // fp8 recipes (Transformer Engine, torchao float8) save the fp8 cast of each GEMM's input for
  // the backward pass instead of the 16-bit tensor: one byte less per element of the QKV, fc1
  // (sequence-parallel LayerNorm outputs), projection and fc2 inputs.
  double fp8_saved = s.fp8 ? 2 * tokens * h / sp_div + tokens * h / t + tokens * ffn / t : 0.0;
  double mlp_moe =
      (mats == 3 ? 6 : 4) * tokens * s.expert_ffn * s.active_experts / t + 4 * tokens * h;
  // Unfused attention keeps the s x s scores (and softmax output, dropout mask) for the backward:
  // Megatron's fused-softmax path before FlashAttention, and PyTorch's math attention.
  const bool keeps_scores = !s.flash || ctx.training.attention_kernel == AttentionKernel::kMath;
  double scores =
      keeps_scores ? (m.dropout ? 5.0 : 2.0) * plan.mbs * m.heads * s.seq_local * s.seq / t : 0.0;
  double layer_act;
  switch (plan.recompute) {
    case Recompute::kFull:
      layer_act = 2 * tokens * h / sp_div;
      break;
    case Recompute::kOps:
      // The layer input, the attention output and the odd matmuls' outputs in call order (q, k,
      // v, o, w1, w3, w2 with SwiGLU: q, v, w1, w2; q, k, v, o, fc1, fc2: q, v, fc1), in bf16
      // (torchtitan's _save_list policy: every second mm is recomputed).
      layer_act = 2 * tokens *
                  (h / sp_div + h / t + h / t + kvd / t + ffn / t + (mats == 3 ? h / sp_div : 0.0));
      break;
    case Recompute::kMlp:
      // The layer input and the attention projections' tensors (q, k, v and the attention
      // output, the projection's input, in 16 bits); the norms, the MLP block and the scores are
      // recomputed from them.
      layer_act = 2 * tokens * h / sp_div + attn_split / t;
      break;
    case Recompute::kSelective:
      scores = 0;
      [[fallthrough]];
    case Recompute::kNone:
    default:
      layer_act = replicated + attn_split / t + scores +
                  (s.dense_layers * mlp_dense + s.moe_layers * mlp_moe) / s.layers - fp8_saved;
  }
  // Uneven stages give the first stage the remainder (Llama 3 405B: 7 of 126 layers on 16).
  double first_layers = plan.uneven_pp ? std::floor(double(m.layers) / plan.pp) : s.layers;
  double in_flight = std::min(p, double(s.micro_batches));
  double interleave = plan.vp > 1 ? 1 + (p - 1) / (p * s.vp) : 1.0;
  mem.activations = Bytes(layer_act * first_layers * in_flight * interleave);
  double buffers = 2 * tokens * h / sp_div * in_flight;  // embedding output
  // The 16-bit logits and the fp32 softmax of the unfused loss, or the logits and their 16-bit
  // gradient of the fused one (TrainingSpec::fused_loss).
  const double loss_bytes = ctx.training.fused_loss ? 4.0 : 6.0;
  if (plan.pp == 1) buffers += loss_bytes * tokens * s.vocab / t;
  // ZeRO-3: the unit in use and the prefetched one, gathered in bf16, and one unit's unsharded
  // fp32 gradients before its reduce-scatter.
  if (plan.zero >= 3) {
    buffers += (2 * 2 + 4) * std::max(s.dense_layer_params, s.moe_layer_params) / t;
  }
  mem.buffers = Bytes(buffers);
  return mem;
}

}  // namespace baton::perf::internal
