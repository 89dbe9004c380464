#include "perf/estimator.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "perf/attention_kernels.h"
#include "perf/estimator_stages.h"

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
  const internal::StageShape shape = internal::ShapeOf(ctx, plan);
  out->memory = internal::MemoryOf(ctx, plan, shape);
  if (out->memory.total() > out->memory.usable) {
    out->rejection = Rejection::kOutOfMemory;
    if (!time_if_oom) return;
  }
  GroupSpans rank_order;
  if (spans == nullptr) {
    rank_order = RankOrderSpans(ctx, plan);
    spans = &rank_order;
  }
  const internal::ComputeTimes compute = internal::ComputeOf(ctx, plan, shape);
  const internal::ModelParallelComm comm =
      internal::ModelParallelCommOf(ctx, plan, shape, compute, *spans);
  const internal::MicroBatchTimes micro_batch = internal::MicroBatchOf(compute, comm);
  const internal::PipelineTimes pipeline =
      internal::PipelineOf(ctx, plan, shape, compute, micro_batch, *spans);

  const double mb = shape.micro_batches;
  out->micro_batches = shape.micro_batches;
  out->compute = (compute.forward + compute.backward) * mb;
  out->recompute = compute.recompute * mb;
  out->tp_comm = (comm.tp_forward + comm.tp_backward + comm.tp_recompute) * mb;
  out->cp_comm = (comm.cp_forward + comm.cp_backward + comm.cp_recompute) * mb;
  out->ep_comm = (comm.ep_forward + comm.ep_backward + comm.ep_recompute) * mb;
  out->launch = pipeline.launch * mb;
  out->bubble = pipeline.bubble;
  out->pp_comm = pipeline.p2p;
  out->dp_comm = internal::DataParallelCommOf(ctx, plan, shape, micro_batch, *spans);
  out->optimizer = internal::OptimizerStepOf(ctx, plan, shape);
  out->step = out->compute + out->recompute + out->tp_comm + out->cp_comm + out->ep_comm +
              out->pp_comm + out->dp_comm + out->bubble + out->optimizer + out->launch;
  internal::FillRates(ctx, plan, shape, out);
}

namespace internal {

void FillRates(const EvalContext& ctx, const ParallelPlan& plan, const StageShape& sh,
               StepEstimate* out) {
  const ModelSpec& m = ctx.model;
  const double peak = ctx.peak_flops;
  const double seq = sh.seq, h = sh.hidden, kvd = sh.kv_dim, ffn = sh.ffn, vocab = sh.vocab;
  const double mats = sh.mats, stage_layers = sh.layers;
  const double ls_dense = sh.dense_layers, ls_moe = sh.moe_layers;
  const double eff_ffn = sh.expert_ffn, active_experts = sh.active_experts;

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

}  // namespace internal

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
