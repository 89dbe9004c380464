#include "perf/estimator.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "perf/attention_kernels.h"

namespace baton::perf {

std::string_view RejectionName(Rejection r) {
  switch (r) {
    case Rejection::kNone:
      return "none";
    case Rejection::kGpuCount:
      return "gpu-count";
    case Rejection::kTensorParallel:
      return "tensor-parallel";
    case Rejection::kPipeline:
      return "pipeline";
    case Rejection::kVirtualStages:
      return "virtual-stages";
    case Rejection::kContextParallel:
      return "context-parallel";
    case Rejection::kExpertParallel:
      return "expert-parallel";
    case Rejection::kBatch:
      return "batch";
    case Rejection::kSequenceParallel:
      return "sequence-parallel";
    case Rejection::kZero:
      return "zero-stage";
    case Rejection::kOutOfMemory:
      return "out-of-memory";
    case Rejection::kCount:
      break;
  }
  return "?";
}

std::string_view GroupName(Group g) {
  switch (g) {
    case Group::kTp:
      return "tp";
    case Group::kCp:
      return "cp";
    case Group::kEp:
      return "ep";
    case Group::kDp:
      return "dp";
    case Group::kPp:
      return "pp";
  }
  return "?";
}

double GroupSpan::size() const {
  double s = 1;
  for (double f : factor) s *= f;
  return s;
}

int GroupSpan::top_tier() const {
  for (int i = kMaxTiers - 1; i > 0; --i) {
    if (factor[i] > 1.0 + 1e-9) return i;
  }
  return 0;
}

EvalContext::EvalContext(const ModelSpec& m, const TrainingSpec& t, const SystemSpec& s)
    : model(m), training(t), system(s) {
  peak_flops = s.gpu.Peak(t.dtype).value();
  double peak16 = s.gpu.Peak(topo::Dtype::kBf16).value();
  if (!(peak16 > 0)) peak16 = peak_flops;
  if (t.dtype == topo::Dtype::kFp8) {
    gemm_peak = peak16 * (t.fp8_recipe == Fp8Recipe::kRowwise ? s.calib.fp8_rowwise_gemm_speedup
                                                              : s.calib.fp8_gemm_speedup);
    attn_peak = peak16;
  } else {
    gemm_peak = peak_flops;
    attn_peak = peak_flops;
  }
  // Power capping (SystemSpec::power_fraction): the tensor cores clock down.
  const double clock = s.power_fraction < 1.0
                           ? std::pow(std::max(s.power_fraction, 0.01), s.calib.power_cap_exponent)
                           : 1.0;
  gemm_peak *= clock;
  attn_peak *= clock;
  hbm_bytes_per_s = s.gpu.hbm_bandwidth.value() * s.calib.hbm_efficiency;
  tier_count = std::max(1, s.tier_count);
  for (int i = 0; i < kMaxTiers; ++i) {
    const NetworkTier& tier = s.tiers[std::min(i, tier_count - 1)];
    bool nvlink = tier.level <= topo::Level::kNvlinkDomain;
    double eff = nvlink       ? s.calib.nvlink_efficiency
                 : s.ethernet ? s.calib.ethernet_efficiency
                              : s.calib.network_efficiency;
    tier_bw[i] = std::max(tier.link.bandwidth.value() * eff, 1.0);
    tier_latency[i] = tier.link.latency.value();
    tier_gpus[i] = i < s.tier_count ? tier.gpus : std::numeric_limits<int>::max();
  }
}

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

GroupSpan SpanFromStride(const EvalContext& ctx, double stride, double size) {
  GroupSpan g;
  double below = 1;
  for (int i = 0; i < ctx.tier_count; ++i) {
    double domain = ctx.tier_gpus[i];
    double members = i == ctx.tier_count - 1 ? size
                     : stride >= domain      ? 1.0
                                             : std::min(size, std::floor(domain / stride));
    members = std::max(members, below);
    g.factor[i] = members / below;
    below = members;
  }
  return g;
}

inline double SwigluMats(const ModelSpec& m) { return m.ffn_kind == FfnKind::kSwiGlu ? 3.0 : 2.0; }

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

}  // namespace

GroupSpans RankOrderSpans(const EvalContext& ctx, const ParallelPlan& p) {
  GroupSpans s;
  s.groups[static_cast<int>(Group::kTp)] = SpanFromStride(ctx, 1, p.tp);
  s.groups[static_cast<int>(Group::kCp)] = SpanFromStride(ctx, p.tp, p.cp);
  s.groups[static_cast<int>(Group::kEp)] = SpanFromStride(ctx, p.tp, p.ep);
  if (p.order == RankOrder::kTpCpEpDpPp) {
    // Gradients reduce over data and context parallel ranks together.
    s.groups[static_cast<int>(Group::kDp)] = SpanFromStride(ctx, p.tp, double(p.cp) * p.dp);
    s.groups[static_cast<int>(Group::kPp)] = SpanFromStride(ctx, double(p.tp) * p.cp * p.dp, p.pp);
  } else {
    // tp-cp-ep-pp-dp: the cp part stays at stride tp, the dp part strides over the pipeline.
    GroupSpan cp_part = SpanFromStride(ctx, p.tp, p.cp);
    GroupSpan dp_part = SpanFromStride(ctx, double(p.tp) * p.cp * p.pp, p.dp);
    GroupSpan& dp = s.groups[static_cast<int>(Group::kDp)];
    for (int i = 0; i < kMaxTiers; ++i) dp.factor[i] = cp_part.factor[i] * dp_part.factor[i];
    s.groups[static_cast<int>(Group::kPp)] = SpanFromStride(ctx, double(p.tp) * p.cp, p.pp);
  }
  return s;
}

Flops ForwardFlopsPerSequence(const ModelSpec& m) {
  double s = m.seq, h = m.hidden, kvd = double(m.kv_heads) * m.head_dim();
  double attn = 2 * s * (h * (h + 2 * kvd) + h * h) + 4 * s * s * h;
  double dense_mlp = 2 * s * SwigluMats(m) * h * m.ffn;
  double moe_mlp =
      2 * s * SwigluMats(m) * h * double(m.moe.expert_ffn) * (m.moe.top_k + m.moe.shared_experts) +
      2 * s * h * m.moe.experts;
  int moe_l = m.moe_layers();
  double layers = (m.layers - moe_l) * (attn + dense_mlp) + moe_l * (attn + moe_mlp);
  return Flops(layers + 2 * s * h * m.vocab);
}

Flops MegatronModelFlops(const ModelSpec& m, double batch) {
  double s = m.seq, l = m.layers, h = m.hidden, v = m.vocab;
  return Flops(72 * batch * s * l * h * h * (1 + s / (6 * h) + v / (12 * l * h)));
}

Flops MegatronHardwareFlopsFullRecompute(const ModelSpec& m, double batch) {
  double s = m.seq, l = m.layers, h = m.hidden, v = m.vocab;
  return Flops(96 * batch * s * l * h * h * (1 + s / (6 * h) + v / (16 * l * h)));
}

Rejection CheckPlan(const EvalContext& ctx, const ParallelPlan& p, int gpus) {
  const ModelSpec& m = ctx.model;
  if (p.tp <= 0 || p.pp <= 0 || p.dp <= 0 || p.cp <= 0 || p.ep <= 0 || p.mbs <= 0 || p.vp <= 0) {
    return Rejection::kGpuCount;
  }
  if (gpus > 0 && p.gpus() != gpus) return Rejection::kGpuCount;
  if (m.heads % p.tp != 0 || m.kv_heads % p.tp != 0 || m.ffn % p.tp != 0) {
    return Rejection::kTensorParallel;
  }
  if (p.pp > m.layers) return Rejection::kPipeline;
  int stage_layers = (m.layers + p.pp - 1) / p.pp;
  if (m.layers % p.pp != 0 && (!p.uneven_pp || stage_layers * (p.pp - 1) >= m.layers)) {
    return Rejection::kPipeline;
  }
  if (p.cp > 1 && m.seq % (2 * p.cp) != 0) return Rejection::kContextParallel;
  if (p.ep > 1 && (!m.is_moe() || m.moe.experts % p.ep != 0 || (p.dp * p.cp) % p.ep != 0)) {
    return Rejection::kExpertParallel;
  }
  long long per_step = static_cast<long long>(p.dp) * p.mbs;
  if (ctx.training.global_batch % per_step != 0) return Rejection::kBatch;
  int micro = static_cast<int>(ctx.training.global_batch / per_step);
  if (p.vp > 1 && (p.pp == 1 || stage_layers % p.vp != 0 || micro % p.pp != 0)) {
    return Rejection::kVirtualStages;
  }
  if (p.sequence_parallel && p.tp == 1) return Rejection::kSequenceParallel;
  if (p.zero < 0 || p.zero > 3) return Rejection::kZero;
  if (p.fsdp_group < 0 || (p.fsdp_group > 0 && (p.zero < 3 || (p.dp * p.cp) % p.fsdp_group != 0))) {
    return Rejection::kZero;
  }
  return Rejection::kNone;
}

void Evaluate(const EvalContext& ctx, const ParallelPlan& plan, int gpus, const GroupSpans* spans,
              StepEstimate* out, bool time_if_oom) {
  *out = StepEstimate{};
  Rejection rejection = CheckPlan(ctx, plan, gpus);
  if (rejection != Rejection::kNone) {
    out->rejection = rejection;
    return;
  }
  const ModelSpec& m = ctx.model;
  const Calibration& c = ctx.system.calib;
  const bool flash = ctx.training.flash_attention;
  const double t = plan.tp, p = plan.pp, v = plan.vp, d = double(plan.dp) * plan.cp;
  const int micro = ctx.training.global_batch / (plan.dp * plan.mbs);
  const double mb = micro;
  const double seq = m.seq, sl = seq / plan.cp, h = m.hidden, tokens = plan.mbs * sl;
  const double kvd = double(m.kv_heads) * m.head_dim(), ffn = m.ffn, vocab = m.vocab;
  const double mats = SwigluMats(m);
  // NOLINTNEXTLINE(bugprone-integer-division): whole layers, the busiest stage's ceil(layers / pp).
  const double stage_layers = (m.layers + plan.pp - 1) / plan.pp;
  const double moe_share = double(m.moe_layers()) / m.layers;
  const double ls_moe = stage_layers * moe_share, ls_dense = stage_layers - ls_moe;
  const double active_experts = m.moe.top_k + m.moe.shared_experts;
  const double eff_ffn = double(m.moe.expert_ffn);
  const double sp_div = plan.sequence_parallel ? t : 1.0;

  // ---- Memory of the heaviest (first) stage.
  double attn_params = m.AttentionParams();
  double expert_params = mats * h * eff_ffn;
  double dense_layer = m.DenseLayerParams();
  double moe_layer = attn_params +
                     (double(m.moe.experts) / plan.ep + m.moe.shared_experts) * expert_params +
                     h * m.moe.experts;
  double stage_params = (ls_dense * dense_layer + ls_moe * moe_layer) / t;
  double embed =
      plan.pp == 1 ? m.EmbeddingParams() : vocab * h + (m.learned_positions ? seq * h : 0.0);
  stage_params += embed / t;
  MemoryEstimate& mem = out->memory;
  mem.capacity = ctx.system.gpu.hbm;
  mem.usable = Bytes(std::max(
      0.0, (mem.capacity.value() - GiB(c.hbm_reserved_gib).value()) * (1 - c.hbm_fragmentation)));
  // ZeRO-3 shards over its group (HSDP: fsdp_group ranks), ZeRO-1/2 over every dp x cp rank.
  const double shard = plan.zero >= 3 && plan.fsdp_group > 0 ? double(plan.fsdp_group) : d;
  const bool fp8 = ctx.training.dtype == topo::Dtype::kFp8;
  const double weight_bytes = 2 + (fp8 ? c.fp8_weight_bytes : 0.0);
  mem.weights = Bytes(stage_params * weight_bytes / (plan.zero >= 3 ? shard : 1.0));
  const double grad_elem = ctx.training.fp32_grads ? 4.0 : 2.0;
  mem.gradients = Bytes(stage_params * grad_elem / (plan.zero >= 2 ? shard : 1.0));
  const double opt_state_bytes = ctx.training.bf16_optimizer_state ? 6.0 : 12.0;
  mem.optimizer = Bytes(stage_params * opt_state_bytes / (plan.zero >= 1 ? shard : 1.0));
  // Korthikanti et al. per-layer activations in bytes, generalised to GQA, SwiGLU and MoE.
  double replicated = (8 + (m.dropout ? 2 : 0)) * tokens * h / sp_div;
  double attn_split = 2 * tokens * (h + kvd) + 2 * tokens * kvd + 2 * tokens * h;
  double mlp_dense = (mats == 3 ? 6 : 4) * tokens * ffn / t;
  // fp8 recipes (Transformer Engine, torchao float8) save the fp8 cast of each GEMM's input for
  // the backward pass instead of the 16-bit tensor: one byte less per element of the QKV, fc1
  // (sequence-parallel LayerNorm outputs), projection and fc2 inputs.
  double fp8_saved = fp8 ? 2 * tokens * h / sp_div + tokens * h / t + tokens * ffn / t : 0.0;
  double mlp_moe = (mats == 3 ? 6 : 4) * tokens * eff_ffn * active_experts / t + 4 * tokens * h;
  // Unfused attention keeps the s x s scores (and softmax output, dropout mask) for the backward:
  // Megatron's fused-softmax path before FlashAttention, and PyTorch's math attention.
  const bool keeps_scores = !flash || ctx.training.attention_kernel == AttentionKernel::kMath;
  double scores = keeps_scores ? (m.dropout ? 5.0 : 2.0) * plan.mbs * m.heads * sl * seq / t : 0.0;
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
                  (ls_dense * mlp_dense + ls_moe * mlp_moe) / stage_layers - fp8_saved;
  }
  // Uneven stages give the first stage the remainder (Llama 3 405B: 7 of 126 layers on 16).
  double first_layers = plan.uneven_pp ? std::floor(double(m.layers) / plan.pp) : stage_layers;
  double in_flight = std::min(p, mb);
  double interleave = plan.vp > 1 ? 1 + (p - 1) / (p * v) : 1.0;
  mem.activations = Bytes(layer_act * first_layers * in_flight * interleave);
  double buffers = 2 * tokens * h / sp_div * in_flight;  // embedding output
  if (plan.pp == 1) buffers += 6 * tokens * vocab / t;   // fp16 logits + fp32 softmax
  // ZeRO-3: the unit in use and the prefetched one, gathered in bf16, and one unit's unsharded
  // fp32 gradients before its reduce-scatter.
  if (plan.zero >= 3) buffers += (2 * 2 + 4) * std::max(dense_layer, moe_layer) / t;
  mem.buffers = Bytes(buffers);
  if (mem.total() > mem.usable) {
    out->rejection = Rejection::kOutOfMemory;
    if (!time_if_oom) return;
  }

  // ---- Compute per micro-batch on the slowest stage.
  const double peak = ctx.peak_flops;
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
  // torchao's tensorwise TP styles (Float8ColwiseParallel, PrepareFloat8ModuleInput,
  // Float8RowwiseParallel in torchao/float8/float8_tensor_parallel.py, which torchtitan's
  // parallelize_llama uses whenever float8 is on) cast each sequence-sharded block input to fp8
  // before its all-gather, and each sharded output gradient of the projection and fc2 before the
  // backward's all-gather (_NoopFwToFloat8BwDynamic after the forward's redistribute): those
  // gathers move one byte per element, and those casts run on 1 / tp of the tokens.
  const bool fp8_tp_gather = fp8 && ctx.training.fp8_recipe == Fp8Recipe::kTensorwise &&
                             ctx.training.dtensor_tp && plan.sequence_parallel && plan.tp > 1;
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
      kLossFwdBytes * tokens * vocab / t / hbm;
  double fwd = layers_fwd + logits_fwd;
  // The backward pass costs twice the forward for every GEMM; a fused attention kernel's costs
  // 2.5 times its forward (FlashAttention-2 recomputes Q K^T and the softmax: 5 matrix products
  // against the forward's 2; Dao 2023, and the kernel charts in data/published/attention.csv
  // count forward+backward as 3.5 x the forward FLOPs, the rate the flash_* constants fit).
  const double attn_bwd = flash ? 2.5 : 2.0;
  double bwd = 2 * fwd + (attn_bwd - 2) * stage_layers * t_attn_core + cast_bwd_extra +
               (kLossBwdBytes - 2 * kLossFwdBytes) * tokens * vocab / t / hbm;
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

  // ---- Communication per micro-batch.
  GroupSpans rank_order;
  if (spans == nullptr) {
    rank_order = RankOrderSpans(ctx, plan);
    spans = &rank_order;
  }
  const GroupSpan& tp_g = spans->groups[static_cast<int>(Group::kTp)];
  const GroupSpan& cp_g = spans->groups[static_cast<int>(Group::kCp)];
  const GroupSpan& ep_g = spans->groups[static_cast<int>(Group::kEp)];
  const GroupSpan& dp_g = spans->groups[static_cast<int>(Group::kDp)];
  const GroupSpan& pp_g = spans->groups[static_cast<int>(Group::kPp)];
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
  // The layer's four TP-sharded GEMMs (one forward product each: QKV, the attention projection,
  // fc1 with SwiGLU's gate, fc2): both TE's userbuffer overlap and DTensor's async TP hide a
  // collective behind the one GEMM beside it, never more.
  double g_qkv = 0, g_o = 0, g_in = 0, g_out = 0;
  if (te_ub || dtensor_tp) {
    g_qkv = 2 * tokens * h * (h * s_q + 2 * kvd * s_kv) / t;
    g_o = 2 * tokens * h * h * s_o / t;
    g_in = 2 * tokens * h * ffn * (mats - 1) * s_in / t;
    g_out = 2 * tokens * ffn * h * s_out / t;
  }
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
  // The share of the forward's Megatron TP collectives a recomputation replays: all of them
  // (full), or the MLP's half (fc1's all-gather and fc2's reduce-scatter) and, for MoE layers,
  // the dispatch and combine (mlp).
  const double rc_tp_share = plan.recompute == Recompute::kFull  ? 1.0
                             : plan.recompute == Recompute::kMlp ? 0.5
                                                                 : 0.0;
  double rc_tp =
      plan.recompute == Recompute::kOps && dtensor_tp ? dt_ops_rc : rc_tp_share * comm_fwd_tp;
  // Selective recomputation re-runs core attention, and with it the forward ring.
  double rc_cp = plan.recompute != Recompute::kNone ? comm_fwd_cp : 0.0;
  double rc_ep = rc_tp_share > 0 ? comm_fwd_ep : 0.0;  // full and mlp rerun the MoE block
  double rc_comm = rc_tp + rc_cp + rc_ep;
  double t_fwd = fwd + comm_fwd_tp + comm_fwd_cp + comm_fwd_ep;
  // Megatron's TP backward: without sequence parallelism one all-reduce per block, as the forward
  // (the conjugate f / g operators); with it, the conjugates of the forward's all-gather and
  // reduce-scatter plus a second all-gather of the saved shard for the weight gradient: 1.5x.
  const double tp_bwd = plan.sequence_parallel ? 1.5 : 1.0;
  const double comm_bwd_tp = dtensor_tp ? dt_bwd
                             : te_ub    ? stage_layers * te_ub_bwd
                                        : tp_bwd * comm_fwd_tp;
  double t_bwd = bwd + comm_bwd_tp + 2 * comm_fwd_ep + comm_bwd_cp + rc + rc_comm;
  double t_mb = t_fwd + t_bwd;
  // Launch-bound micro-batches: the host must dispatch every pass of every layer of the stage,
  // every TP collective (a rendezvous of tp ranks behind a ring of tp - 1 dependent steps,
  // Calibration::host_collective_step_s: the forward's two all-reduces, or two all-gathers and
  // two reduce-scatters with sequence parallelism; the backward's 1x / 1.5x of those, tp_bwd
  // above; full recomputation's replay) and the micro-batch's work outside the layers.
  double passes = 3.0 + (plan.recompute != Recompute::kNone ? 1.0 : 0.0);
  const double tp_calls_fwd = plan.tp > 1 ? (plan.sequence_parallel ? 4.0 : 2.0) : 0.0;
  const double tp_calls = tp_calls_fwd * (1 + tp_bwd + rc_tp_share);
  const double host_mb = stage_layers * (passes * c.host_layer_pass_s +
                                         tp_calls * (t - 1) * c.host_collective_step_s) +
                         c.host_microbatch_s;
  double launch = std::max(0.0, host_mb - t_mb);
  // The output layer and the loss run on the last stage alone: Megatron-LM (2021-22: every stage
  // holds num_layers / pp layers; the first adds the embedding lookup, the last the final norm,
  // the logits GEMM and the cross-entropy) and DeepSpeed's PipelineModule
  // (partition_method="type:transformer") split the layers evenly and leave that work on top.
  // The steady state runs at the last stage's pace (m micro-batches of t_mb), but fill and drain
  // pass through the other p - 1 stages, which lack it: 1F1B takes m t_last + (p - 1) t_other
  // (a schedule simulation with one heavier stage gives exactly that), not (m + p - 1) t_last.
  const double logits_pass = 3 * logits_fwd + (kLossBwdBytes - 2 * kLossFwdBytes) * tokens * vocab /
                                                  t / hbm;  // its forward and backward
  const double t_mb_inner = std::max(t_mb - logits_pass, host_mb);
  t_mb += launch;

  out->micro_batches = micro;
  out->compute = Seconds(mb * (fwd + bwd));
  out->recompute = Seconds(mb * rc);
  out->tp_comm = Seconds(mb * (comm_fwd_tp + comm_bwd_tp + rc_tp));
  out->cp_comm = Seconds(mb * (comm_fwd_cp + comm_bwd_cp + rc_cp));
  out->ep_comm = Seconds(mb * (3 * comm_fwd_ep + rc_ep));
  out->launch = Seconds(mb * launch);
  out->bubble = Seconds(plan.pp > 1 ? (p - 1) / v * t_mb_inner : 0.0);
  if (plan.pp > 1) {
    // Split across TP ranks (Megatron's scatter-gather; DeepSpeed's engine partitions too).
    double p2p_bytes = 2 * tokens * h / t;
    double transfers = plan.batched_pp_p2p ? 2.0 : 4.0;  // per micro-batch, see plan.h
    out->pp_comm = Seconds(transfers * (v * mb + p - 1) * P2pTime(ctx, pp_g, p2p_bytes));
  }

  // ---- Data parallel gradient reduction, ZeRO gathers and the optimizer.
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
  out->dp_comm = Seconds(dp_time);
  double opt_params = stage_params / (plan.zero >= 1 ? d : 1.0);
  double opt_shard = plan.zero >= 3 && plan.fsdp_group > 0 ? double(plan.fsdp_group) : d;
  if (plan.zero >= 1) opt_params = stage_params / opt_shard;
  // Adam reads and writes its state (2 x 12 bytes in fp32, 2 x 6 in bf16), reads the gradient
  // and writes the 16-bit weight (4 + 4 bytes, rounding the 16-bit cases up).
  out->optimizer = Seconds(opt_params * (2 * opt_state_bytes + 8) / hbm + c.step_overhead_s);

  out->step = out->compute + out->recompute + out->tp_comm + out->cp_comm + out->ep_comm +
              out->pp_comm + out->dp_comm + out->bubble + out->optimizer + out->launch;

  // ---- Rates.
  const double gbs = ctx.training.global_batch;
  double fwd_seq = ForwardFlopsPerSequence(m).value();
  double model_flops = 3 * gbs * fwd_seq;
  double rc_flops = 0;
  double layer_share = 1 - 2 * seq * h * vocab / fwd_seq;
  if (plan.recompute == Recompute::kFull) rc_flops = gbs * fwd_seq * layer_share;
  if (plan.recompute == Recompute::kSelective) rc_flops = gbs * 4 * seq * seq * h * m.layers;
  if (plan.recompute == Recompute::kOps) {
    rc_flops = gbs * seq * m.layers * 2 * (h * kvd + h * h + h * ffn);
  }
  if (plan.recompute == Recompute::kMlp) {
    const double mlp_width = (ls_dense * ffn + ls_moe * eff_ffn * active_experts) / stage_layers;
    rc_flops = gbs * m.layers * (4 * seq * seq * h + seq * 2 * mats * h * mlp_width);
  }
  out->model_flops_per_step = Flops(model_flops);
  out->hardware_flops_per_step = Flops(model_flops + rc_flops);
  double world = plan.gpus();
  double s = out->step.value();
  out->tokens_per_step = gbs * seq;
  out->tokens_per_second = out->tokens_per_step / s;
  out->mfu = model_flops / (s * world * peak);
  out->mfu_causal = (model_flops - 3 * gbs * 2 * seq * seq * h * m.layers) / (s * world * peak);
  out->hfu = (model_flops + rc_flops) / (s * world * peak);
}

std::string ExplainRejection(const EvalContext& ctx, const ParallelPlan& plan,
                             const StepEstimate& e) {
  if (e.feasible()) return "";
  if (e.rejection == Rejection::kOutOfMemory) {
    return fmt::format("needs {:.1f} GiB per GPU, has {:.1f} ({:.1f} usable)",
                       ToGiB(e.memory.total()), ToGiB(e.memory.capacity), ToGiB(e.memory.usable));
  }
  Status st = ValidatePlan(ctx.model, plan, ctx.training, 0);
  if (!st.ok()) return st.message();
  return std::string(RejectionName(e.rejection));
}

Status CheckSystemRuns(const TrainingSpec& training, const SystemSpec& system) {
  if (system.gpu.Peak(training.dtype).value() <= 0) {
    return InvalidArgumentError(fmt::format("training.dtype: {} is not supported by {}",
                                            topo::DtypeName(training.dtype), system.gpu.name));
  }
  if (training.flash_attention) {
    RETURN_IF_ERROR(CheckAttentionKernel(system.calib, training.attention_kernel,
                                         topo::GpuFamilyName(system.gpu.family), system.gpu.name));
  }
  return Status::Ok();
}

Result<StepEstimate> Estimate(const ModelSpec& model, const ParallelPlan& plan,
                              const TrainingSpec& training, const SystemSpec& system) {
  RETURN_IF_ERROR(ValidateModel(model));
  RETURN_IF_ERROR(ValidateTraining(training));
  RETURN_IF_ERROR(CheckSystemRuns(training, system));
  if (system.tier_count <= 0) return InvalidArgumentError("system: no network tiers");
  RETURN_IF_ERROR(ValidatePlan(model, plan, training, system.gpus));
  EvalContext ctx(model, training, system);
  StepEstimate e;
  Evaluate(ctx, plan, system.gpus, nullptr, &e);
  return e;
}

Seconds EstimateStepTime(const ModelSpec& model, const ParallelPlan& plan,
                         const TrainingSpec& training, const SystemSpec& system) {
  auto e = Estimate(model, plan, training, system);
  if (!e.ok() || !e->feasible()) return Seconds(std::numeric_limits<double>::infinity());
  return e->step;
}

TrainingTotals ComputeTotals(const ModelSpec& model, const TrainingSpec& training,
                             const StepEstimate& e, int gpus) {
  TrainingTotals tt;
  if (e.feasible() && training.tokens_to_train > 0 && e.tokens_per_step > 0) {
    double steps = std::ceil(training.tokens_to_train / e.tokens_per_step);
    tt.time_to_train = e.step * steps;
    tt.gpu_hours = tt.time_to_train.value() * gpus / 3600.0;
    tt.cost_dollars = tt.gpu_hours * training.dollars_per_gpu_hour;
  }
  // bf16 weights + fp32 master weights + Adam m and v.
  tt.checkpoint_size = Bytes(model.TotalParams() * 14);
  tt.checkpoint_write = tt.checkpoint_size / training.checkpoint_bandwidth;
  tt.checkpoint_interval =
      Seconds(std::sqrt(2.0 * tt.checkpoint_write.value() * training.mtbf.value()));
  return tt;
}

}  // namespace baton::perf
