// Evaluate's compute stage: the GPU work of one micro-batch on the busiest pipeline stage
// (GEMMs, attention, element-wise and fp8 cast kernels, the output layer and the loss, gradient
// accumulation, recomputation), communication excluded.
#include <algorithm>
#include <cmath>

#include "perf/attention_kernels.h"
#include "perf/estimator_stages.h"

namespace baton::perf::internal {
namespace {

// torchao's float8 linears (Fp8Recipe::kTensorwise / kRowwise) gain nothing over bf16 on H100
// below these forward GEMM shapes (K = in_features, the contraction; N = out_features, both as
// the GPU runs them): torchao's own microbenchmarks of a float8 linear's forward and backward
// with its casts against bf16 (torchao/float8/README.md "Performance" tables, float8_roofline.py
// --shape_gen_name sweep), which its opt-in module filter encodes (torchao/float8/
// float8_linear_utils.py _auto_filter_for_tensorwise / _auto_filter_for_rowwise, "Dims below
// these thresholds may result in worse performance"; test/float8/test_auto_filter.py pins the
// convention: Linear(4096, 1024) is below the tensorwise line). torchtitan converts every linear
// but the output layer (filter_fqns ["output"]; the auto filter is opt-in), so those GEMMs run
// fp8 kernels at no gain. Other recipes (Transformer Engine, JAX) keep their fitted speed-up.
bool TorchaoFp8NoGain(Fp8Recipe recipe, double k, double n) {
  if (recipe == Fp8Recipe::kTensorwise) return k <= 4096 && n <= 1024;
  if (recipe == Fp8Recipe::kRowwise) return n <= 2048 || k <= 1024 || (n <= 4096 && k <= 2048);
  return false;
}

// HBM bytes per logit of the unfused vocab-parallel cross-entropy (Megatron-Core's
// _VocabParallelCrossEntropy; torchtitan's and FSDP stacks' F.cross_entropy on logits.float() move
// the same order). Forward: the bf16 logits cast to fp32 (read 2, write 4), their max (4), the
// max subtracted in place (8), exp in place (8), the sum (4) and the division by it (8): 38.
// Backward: the saved fp32 softmax scaled by the incoming gradient in place (8) and cast back to
// bf16 for the output layer's GEMM (6): 14.
constexpr double kLossFwdBytes = 38;
constexpr double kLossBwdBytes = 14;
// The fused loss (TrainingSpec::fused_loss; flash-attn's flash_attn/ops/triton/cross_entropy.py):
// the forward kernel reads each 16-bit logit once, keeping the running max and log-sum-exp of a
// row in fp32 registers (2); the backward reads it again and writes its 16-bit gradient (4).
constexpr double kFusedLossFwdBytes = 2;
constexpr double kFusedLossBwdBytes = 4;
}  // namespace

ComputeTimes ComputeOf(const EvalContext& ctx, const ParallelPlan& plan, const StageShape& s) {
  const ModelSpec& m = ctx.model;
  const Calibration& c = ctx.system.calib;
  const bool flash = s.flash, fp8 = s.fp8;
  const double t = s.tp, mb = s.micro_batches;
  const double seq = s.seq, sl = s.seq_local, h = s.hidden, tokens = s.tokens;
  const double kvd = s.kv_dim, ffn = s.ffn, vocab = s.vocab, mats = s.mats;
  const double stage_layers = s.layers, ls_moe = s.moe_layers, ls_dense = s.dense_layers;
  const double active_experts = s.active_experts, eff_ffn = s.expert_ffn, sp_div = s.sp_div;
  const double stage_params = s.params;
  const double loss_fwd_bytes = ctx.training.fused_loss ? kFusedLossFwdBytes : kLossFwdBytes;
  const double loss_bwd_bytes = ctx.training.fused_loss ? kFusedLossBwdBytes : kLossBwdBytes;

  const double hbm = ctx.hbm_bytes_per_s;
  auto gemm_rate = [&](double dim) {
    const double gflop = 2e-9 * tokens * dim * h;
    return ctx.gemm_peak * c.gemm_peak_fraction * dim / (dim + c.gemm_half_dim) * tokens /
           (tokens + c.gemm_half_tokens) * gflop / (gflop + c.gemm_half_gflop);
  };
  const double rate = gemm_rate(h / t);
  // Seconds per FLOP of each layer GEMM (forward shapes: q and k / v K = h, N = h / tp and
  // kv / tp; the projection K = h / tp, N = h; the MLP's up / gate K = h, N = ffn / tp; its down
  // K = ffn / tp, N = h): 1 / rate, or the 16-bit rate where torchao's fp8 gains nothing
  // (TorchaoFp8NoGain; the casts below are still paid). Dense layers only: MoE expert GEMMs
  // keep rate.
  double s_q = 1 / rate, s_kv = 1 / rate, s_o = 1 / rate, s_in = 1 / rate, s_out = 1 / rate;
  if (fp8) {
    const Fp8Recipe recipe = ctx.training.fp8_recipe;
    const double s16 = 1 / (rate * ctx.attn_peak / ctx.gemm_peak);
    if (TorchaoFp8NoGain(recipe, h, h / t)) s_q = s16;
    if (TorchaoFp8NoGain(recipe, h, kvd / t)) s_kv = s16;
    if (TorchaoFp8NoGain(recipe, h / t, h)) s_o = s16;
    if (TorchaoFp8NoGain(recipe, h, ffn / t)) s_in = s16;
    if (TorchaoFp8NoGain(recipe, ffn / t, h)) s_out = s16;
  }
  double attn_model_flops = 4 * tokens * seq * h / t;
  double t_attn_core;
  // Context parallelism runs attention as a ring of cp steps (Megatron-Core / Transformer
  // Engine): the sequence is cut into 2 * cp chunks and rank r holds chunks r and 2cp-1-r, so
  // causal work is balanced across ranks (the reason CheckPlan wants seq % 2cp == 0; a plain
  // contiguous split would leave the last rank (2cp-1)/cp times the mean). Each step is its own
  // kernel on 1/cp of the work: step 0 the causal diagonal block (sl x sl), the others
  // rectangular blocks with one side of sl / 2, where the kernel is less efficient. After each
  // off-diagonal step the fp32 partial output is rescaled by the new log-sum-exp and
  // accumulated (read and write fp32, read the step's bf16 result: 10 bytes per element); the
  // backward pass accumulates dQ the same way, and costs twice the forward like every term here.
  double t_attn_step_diag = 0, t_attn_step_off = 0;
  if (flash) {
    // The kernel-chart fit (Calibration::flash_*): a causal block of L tokens runs like a full
    // one of L / 2; an off-diagonal CP step is a full block of sl / 2 keys.
    const double hd = m.head_dim();
    // Another kernel (cuDNN's, FlashAttention 1 or 3, ...) runs at FlashAttention-2's rate times
    // its own ratio (attention_kernels.h); a training step's attention is causal.
    const double hd_eff =
        hd / (hd + c.flash_half_head_dim) *
        AttentionKernelSpeedup(c, ctx.training.attention_kernel, hd, /*causal=*/true);
    auto flash_rate = [&](double len) {
      return ctx.attn_peak * c.flash_attention_fraction * len / (len + c.flash_half_length) *
             hd_eff;
    };
    double step_work = 0.5 * attn_model_flops / plan.cp;
    t_attn_step_diag = step_work / flash_rate(sl / 2);
    if (plan.cp > 1 && ctx.training.cp_attention == CpAttention::kAllGather) {
      // All-gather CP (Llama 3): each of the two local query chunks runs one kernel against its
      // causal prefix of the gathered keys, (2cp + 1) sl / 4 keys on average, i.e. the causal
      // work of the whole sequence at the rate of one causal kernel over it (L = seq / 2).
      t_attn_step_diag = 0.5 * attn_model_flops / flash_rate(seq / 2);
    } else if (plan.cp > 1) {
      t_attn_step_off = step_work / flash_rate(sl / 2) + 10 * tokens * h / t / hbm;
    }
    t_attn_core = t_attn_step_diag + (plan.cp - 1) * t_attn_step_off;
  } else {
    double softmax_elems = (m.dropout ? 4.5 : 2.0) * plan.mbs * (m.heads / t) * sl * seq;
    t_attn_core = attn_model_flops / (ctx.attn_peak * c.gemm_peak_fraction * tokens /
                                      (tokens + c.gemm_half_tokens)) +
                  2 * softmax_elems / hbm;
    t_attn_step_diag = t_attn_step_off = t_attn_core / plan.cp;
  }
  const double attn_gemm_s = 2 * tokens * (h * h * s_q + 2 * h * kvd * s_kv + h * h * s_o) / t;
  double norm_bytes = 2 * (m.dropout ? 15.0 : 10.0) * tokens * h / sp_div;
  // Eager element-wise kernels (TrainingSpec::fused_elementwise false): counting the kernels of
  // torchtitan's eager Llama block against one fused kernel each (read 2 + write 2 bytes per
  // element). RMSNorm (x.float(), pow, mean, rsqrt, mul, type_as, mul weight) moves 36 bytes per
  // element instead of 4, twice per layer; rotary embedding on q and k (float, complex multiply,
  // type_as) 20 instead of 4; SwiGLU's silu and multiply as two kernels 10 instead of 6 per ffn
  // element. Their backward passes cost twice, like every element-wise term here.
  const double eager_bytes = ctx.training.fused_elementwise
                                 ? 0.0
                                 : 2 * 32.0 * tokens * h / sp_div + 16.0 * tokens * (h + kvd) / t +
                                       (mats == 3 ? 4.0 : 0.0) * tokens * ffn / t;
  // fp8 casts (dtype fp8): HBM bytes per element of each GEMM's activation-side input (forward:
  // the QKV, projection, fc1 and fc2 inputs; backward: the gradients of their outputs) and of its
  // weight, from each recipe's data flow: an unfused cast reads 2 bytes (bf16) and writes 1 (fp8).
  //  delayed (Transformer Engine): fused into the producing kernel, only the fp8 copy is written
  //    (1 byte); the backward writes the fp8 gradient and a transposed copy of the input (1 + 1);
  //    fp8 weights are cached across micro-batches.
  //  tensorwise (torchao): forward 3 bytes per input and weight element; backward 3 per gradient
  //    element and 2 (read and write one fp8 byte) to transpose each saved fp8 input and weight.
  //    JAX's fp8 (Fp8Recipe::kJax) moves these bytes (less the amax pass below): no fp8 weight
  //    survives a call, XLA's quantize ops (or Transformer Engine JAX's cast-transpose kernels)
  //    read each 16-bit input and weight and write its fp8 copy and, for the backward's GEMMs,
  //    its transpose.
  //  rowwise (torchao): as tensorwise forward; the backward quantises each gradient along both
  //    axes (6) and re-quantises each input and weight column-wise from 16 bits (3).
  //  torchao's dynamic tensorwise scale is torch.max(torch.abs(x)) over the whole tensor
  //    (torchao/float8/float8_utils.py tensor_to_amax), and the cast needs the finished amax:
  //    Inductor cannot fuse a full reduction with the pointwise op that consumes its result, so
  //    each activation and gradient is read once more (2 bytes) by its own amax kernel before
  //    the cast. Rowwise scales reduce along the contiguous row that the cast kernel holds (one
  //    persistent-reduction kernel), but its column-wise casts for the weight-gradient GEMM
  //    (axiswise_dim 0: a reduction over every token) read their 16-bit source once more too
  //    (+2 on the gradient, input and weight). Transformer Engine's delayed scaling and JAX's
  //    take the scale from the amax history, so their amax fuses with the cast. Weights keep
  //    their bytes (a small share; under FSDP's float8 all-gather with
  //    precompute_float8_dynamic_scale_for_fsdp their amax runs once per step).
  const bool fp8_tp_gather = s.fp8_tp_gather;  // ShapeOf says why
  double cast_fwd_dense = 0, cast_bwd_dense = 0, cast_fwd_moe = 0, cast_bwd_moe = 0;
  double cast_mlp_dense = 0, cast_mlp_moe = 0;  // the MLP block's share of the forward's
  if (fp8) {
    constexpr double kAmaxRead = 2;  // torchao's separate amax pass re-reads a 16-bit source
    double act_f = 1, grad_b = 1, act_b = 1, w_f = 0, w_b = 0;
    if (ctx.training.fp8_recipe == Fp8Recipe::kJax) {
      act_f = 3, grad_b = 3, act_b = 2, w_f = 3, w_b = 2;
    } else if (ctx.training.fp8_recipe == Fp8Recipe::kTensorwise) {
      act_f = 3 + kAmaxRead, grad_b = 3 + kAmaxRead, act_b = 2, w_f = 3, w_b = 2;
    } else if (ctx.training.fp8_recipe == Fp8Recipe::kRowwise) {
      act_f = 3, grad_b = 6 + kAmaxRead, act_b = 3 + kAmaxRead, w_f = 3, w_b = 3 + kAmaxRead;
    }
    auto casts = [&](double width, double* fwd_s, double* bwd_s, double* mlp_s) {
      const double gathered = fp8_tp_gather ? h / t : h;  // QKV / fc1 input, o / fc2 grad
      double in = tokens * (2 * h + h / t + width / t);
      double in_cast = tokens * (2 * gathered + h / t + width / t);
      double grad = tokens * ((h + 2 * kvd) / t + 2 * gathered + (mats - 1) * width / t);
      double w = (h * (h + 2 * kvd) + h * h + mats * h * width) / t;
      *fwd_s = (act_f * in_cast + w_f * w) / hbm;
      *bwd_s = (grad_b * grad + act_b * in + w_b * w) / hbm;
      *mlp_s = (act_f * tokens * (gathered + width / t) + w_f * mats * h * width / t) / hbm;
    };
    casts(ffn, &cast_fwd_dense, &cast_bwd_dense, &cast_mlp_dense);
    casts(eff_ffn * active_experts, &cast_fwd_moe, &cast_bwd_moe, &cast_mlp_moe);
  }
  // PyTorch's experimental context_parallel (CpAttention::kTorch; torch.distributed.tensor.
  // experimental._attention, the version torchtitan ran in 2024-25) does the bookkeeping of each
  // ring step as eager ops on the local query's elements (E = tokens x hidden / tp; K and V are
  // repeated to every head, so they hold E elements too), in bytes per element per step after
  // the first, half the steps on the full query and half on its second chunk (load balancing):
  //  forward  torch.cat of K and V to pass on (8); the block output cast to fp32 (6) and merged,
  //           out - sigmoid(lse_b - lse) * (out - out_b) as three fp32 kernels (32), both on
  //           0.75 E on average; a partial step's _partial_update cats the full fp32 output (8,
  //           half the steps): 40.5 in all, of which the ring above already counts 10;
  //  backward the cat of K and V (8); SDPA's dQ accumulator zeroed and converted per call (14 on
  //           0.75 E); dK and dV in fp32 added to the ring's buffer, half the steps through
  //           _partial_update's cat (23); the fp32 cat of dK and dV to pass on (16); dQ added in
  //           fp32 (11.5): 69 in all, where the ring above counts 2.5 x 10.
  // Full recomputation replays the forward, so these count wherever the forward does.
  double torch_cp_fwd = 0, torch_cp_bwd = 0;
  if (plan.cp > 1 && flash && ctx.training.cp_attention == CpAttention::kTorch) {
    const double steps_elems = (plan.cp - 1) * tokens * h / t;
    torch_cp_fwd = (40.5 - 10) * steps_elems / hbm;
    torch_cp_bwd = (69 - 2.5 * 10) * steps_elems / hbm;
  }
  double common = attn_gemm_s + t_attn_core + torch_cp_fwd + (norm_bytes + eager_bytes) / hbm +
                  c.layer_overhead_s;
  double dense_fwd = common + 2 * tokens * h * ffn * ((mats - 1) * s_in + s_out) / t +
                     2 * (mats == 3 ? 3.0 : 2.0) * tokens * ffn / t / hbm + cast_fwd_dense;
  double moe_fwd =
      common +
      (2 * tokens * mats * h * eff_ffn * active_experts / t + 2 * tokens * h * m.moe.experts) /
          rate +
      2 * (mats == 3 ? 3.0 : 2.0) * tokens * eff_ffn * active_experts / t / hbm + cast_fwd_moe;
  double layers_fwd = ls_dense * dense_fwd + ls_moe * moe_fwd;
  // The backward's casts replace twice the forward's (bwd = 2 fwd below).
  const double cast_bwd_extra = ls_dense * (cast_bwd_dense - 2 * cast_fwd_dense) +
                                ls_moe * (cast_bwd_moe - 2 * cast_fwd_moe) +
                                stage_layers * (torch_cp_bwd - 2 * torch_cp_fwd);
  // The output layer stays in 16 bits under every fp8 recipe: Megatron-Core's output layer is a
  // plain ColumnParallelLinear outside Transformer Engine's fp8 autocast, and torchtitan's float8
  // conversion skips the module named "output" (its filter_fqns). attn_peak is the 16-bit peak.
  const double logits_peak_ratio = ctx.attn_peak / ctx.gemm_peak;
  double logits_fwd =
      2 * tokens * h * vocab / t / (gemm_rate(std::min(h, vocab / t)) * logits_peak_ratio) +
      loss_fwd_bytes * tokens * vocab / t / hbm;
  double fwd = layers_fwd + logits_fwd;
  // The backward pass costs twice the forward for every GEMM; a fused attention kernel's costs
  // 2.5 times its forward (FlashAttention-2 recomputes Q K^T and the softmax: 5 matrix products
  // against the forward's 2; Dao 2023, and the kernel charts in data/published/attention.csv
  // count forward+backward as 3.5 x the forward FLOPs, the rate the flash_* constants fit).
  const double attn_bwd = flash ? 2.5 : 2.0;
  double bwd = 2 * fwd + (attn_bwd - 2) * stage_layers * t_attn_core + cast_bwd_extra +
               (loss_bwd_bytes - 2 * loss_fwd_bytes) * tokens * vocab / t / hbm;
  // Gradient accumulation outside the weight-gradient GEMMs (TrainingSpec::grad_accum, plan.h):
  // an element-wise pass over the stage's gradients after each micro-batch's backward, 10 bytes
  // per parameter (fp32 main_grad += 16-bit grad) every micro-batch, or 6 (16-bit .grad +=) on
  // all but the first. At one sequence of 2,048 tokens per micro-batch that is about a tenth of
  // the backward's GEMM time, the gap between Narayanan 2021's and Korthikanti 2022's Megatron on
  // the same 530B and 1T layouts. ZeRO-3 / FSDP gradients leave after every pass: none.
  if (plan.zero <= 2 && ctx.training.grad_accum != GradAccum::kFused) {
    const double accum_bytes =
        ctx.training.grad_accum == GradAccum::kFp32 ? 10.0 : 6.0 * (mb - 1) / mb;
    bwd += accum_bytes * stage_params / hbm;
  }
  // Per-op checkpointing reruns the even matmuls (k, o and w3 or fc2) and the element-wise ops.
  const double ops_rc_gemm =
      2 * tokens * (h * kvd * s_kv + h * h * s_o + h * ffn * (mats == 3 ? s_in : s_out)) / t;
  // MLP recomputation reruns core attention and each layer's MLP block: its GEMMs, activation
  // kernels and fp8 casts (the forward's, less the common part and the attention GEMMs' casts).
  const double mlp_rc = ls_dense * (dense_fwd - common - cast_fwd_dense + cast_mlp_dense) +
                        ls_moe * (moe_fwd - common - cast_fwd_moe + cast_mlp_moe) +
                        stage_layers * t_attn_core;
  double rc = plan.recompute == Recompute::kFull        ? layers_fwd
              : plan.recompute == Recompute::kSelective ? stage_layers * t_attn_core
              : plan.recompute == Recompute::kMlp       ? mlp_rc
              : plan.recompute == Recompute::kOps
                  ? stage_layers * (ops_rc_gemm + (norm_bytes + eager_bytes) / hbm)
                  : 0.0;

  ComputeTimes out;
  out.forward = Seconds(fwd);
  out.backward = Seconds(bwd);
  out.recompute = Seconds(rc);
  // The output layer and the loss, forward and backward (the last pipeline stage's extra work).
  out.logits_pass =
      Seconds(3 * logits_fwd + (loss_bwd_bytes - 2 * loss_fwd_bytes) * tokens * vocab / t / hbm);
  out.attn_step_diag = Seconds(t_attn_step_diag);
  out.attn_step_off = Seconds(t_attn_step_off);
  out.attn_backward_ratio = attn_bwd;
  out.gemm_qkv = Seconds(2 * tokens * h * (h * s_q + 2 * kvd * s_kv) / t);
  out.gemm_proj = Seconds(2 * tokens * h * h * s_o / t);
  out.gemm_fc1 = Seconds(2 * tokens * h * ffn * (mats - 1) * s_in / t);
  out.gemm_fc2 = Seconds(2 * tokens * ffn * h * s_out / t);
  return out;
}

}  // namespace baton::perf::internal
