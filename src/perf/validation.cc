#include "perf/validation.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <map>

#include "core/strings.h"
#include "perf/stack.h"

namespace baton::perf {

std::string_view MetricName(Metric m) {
  switch (m) {
    case Metric::kIterationTime:
      return "iteration_time_s";
    case Metric::kHfuTflops:
      return "hfu_tflops_per_gpu";
    case Metric::kMfu:
      return "mfu";
    case Metric::kStateMemory:
      return "weights_grads_optimizer_gib";
    case Metric::kActivationMemory:
      return "activations_gib";
    case Metric::kTokensPerGpu:
      return "tokens_per_s_per_gpu";
    case Metric::kTokensTotal:
      return "tokens_per_s_total";
    case Metric::kModelTflops:
      return "tflops_per_gpu";
    case Metric::kHfu:
      return "hfu";
  }
  return "?";
}

bool IsMemoryMetric(Metric m) {
  return m == Metric::kStateMemory || m == Metric::kActivationMemory;
}

Result<ShortSystem> SystemForRun(std::string_view gpu, std::string_view network, int gpus) {
  ShortSystem s;
  s.gpu = std::string(gpu);
  s.gpus = gpus;
  s.gpus_per_node = 8;
  std::string net = ToLower(network);
  if (net.find("nvl72") != std::string::npos) {
    // GB200 NVL72: 18 trays of 4 GPUs share one NVLink domain of 72, with one 400G NIC per
    // GPU beyond; a leaf holds 4 racks.
    s.gpus_per_node = 4;
    s.nvlink_domain_gpus = 72;
    s.nic_gbits_per_gpu = 400;
    s.nodes_per_leaf = 4 * 18;
  } else if (net.find("400g per node") != std::string::npos) {  // NOLINT(bugprone-branch-clone)
    // The same numbers as Jean Zay's below, for another fabric: kept apart, each with its source.
    s.nic_gbits_per_gpu = 50;  // IBM Vela-type Ethernet: 400 Gb/s per 8-GPU node
    s.nodes_per_leaf = 16;
  } else if (net.find("800g per node") != std::string::npos) {
    s.nic_gbits_per_gpu = 100;  // 800 Gb/s per 8-GPU node
    s.nodes_per_leaf = 16;
  } else if (net.find("8xhdr200") != std::string::npos) {
    s.nic_gbits_per_gpu = 200;  // DGX A100: one HDR InfiniBand NIC per GPU
    s.nodes_per_leaf = 20;      // Selene scalable unit: 20 DGX per leaf group
  } else if (net.find("4x100g per 8-gpu node") != std::string::npos) {
    s.nic_gbits_per_gpu = 50;  // Jean Zay: 4 x 100 Gb/s Omni-Path per 8-GPU node
    s.nodes_per_leaf = 16;
  } else if (net.find("400g per gpu") != std::string::npos) {
    s.nic_gbits_per_gpu = 400;  // Meta's RoCE clusters: one 400G NIC per GPU
    s.nodes_per_leaf = 32;
  } else {
    return InvalidArgumentError(fmt::format("network: unknown description '{}'", network));
  }
  // "Ethernet ..." names the IBM cloud clusters' general-purpose fabric; Meta's "RoCE" clusters
  // are dedicated RDMA training fabrics and count as InfiniBand-like.
  s.ethernet = net.find("ethernet") != std::string::npos;
  return s;
}

namespace {

Result<int> IntField(std::string_view v, std::string_view col, bool allow_blank = false) {
  if (allow_blank && Trim(v).empty()) return 0;
  auto n = ParseInt64(v);
  if (!n || *n < 0 || *n > (1 << 30)) {
    return InvalidArgumentError(fmt::format("column {}: '{}' is not a count", col, Printable(v)));
  }
  return static_cast<int>(*n);
}

Result<bool> YesNo(std::string_view v, std::string_view col) {
  if (EqualsIgnoreCase(Trim(v), "yes")) return true;
  if (EqualsIgnoreCase(Trim(v), "no")) return false;
  return InvalidArgumentError(fmt::format("column {}: '{}' is not yes/no", col, Printable(v)));
}

Result<PublishedRun> ParseRow(const std::map<std::string, std::string_view>& f) {
  PublishedRun r;
  auto get = [&](const char* col) -> std::string_view {
    auto it = f.find(col);
    return it == f.end() ? std::string_view() : it->second;
  };
  r.id = std::string(get("id"));
  r.source = std::string(get("source"));
  r.confidence = std::string(get("confidence"));
  r.group = std::string(Trim(get("group")));
  if (r.group.empty()) {
    std::string_view src = Trim(get("source"));
    r.group = ToLower(src.substr(0, std::min(src.find(' '), src.size())));
  }
  r.stack = std::string(Trim(get("stack")));
  if (r.stack.empty()) r.stack = r.group;
  r.assumptions = std::string(get("assumptions"));
  r.network = std::string(get("network"));
  auto base = FindModel(Trim(get("model")));
  if (base.ok()) r.model = *base;
  r.model.name = std::string(get("model"));
  // A catalogue model's name (`baton plan models`) stands for its shape: a blank or absent shape
  // column keeps the catalogue's value; any other model spells every one out.
  for (auto [col, field] : {std::pair{"layers", &ModelSpec::layers},
                            {"hidden", &ModelSpec::hidden},
                            {"heads", &ModelSpec::heads},
                            {"kv_heads", &ModelSpec::kv_heads},
                            {"ffn", &ModelSpec::ffn},
                            {"seq", &ModelSpec::seq},
                            {"vocab", &ModelSpec::vocab}}) {
    if (base.ok() && Trim(get(col)).empty()) continue;
    Result<int> v = IntField(get(col), col);
    if (!v.ok() && Trim(get(col)).empty()) {
      return InvalidArgumentError(fmt::format(
          "column {}: blank, and model '{}' is not in the catalogue (baton plan models)", col,
          Printable(get("model"))));
    }
    if (!v.ok()) return v.status();
    r.model.*field = *v;
  }
  std::string_view ffn_kind = Trim(get("ffn_kind"));
  if (EqualsIgnoreCase(ffn_kind, "swiglu")) {
    r.model.ffn_kind = FfnKind::kSwiGlu;
  } else if (EqualsIgnoreCase(ffn_kind, "gelu")) {
    r.model.ffn_kind = FfnKind::kGelu;
  } else if (!ffn_kind.empty()) {
    return InvalidArgumentError(
        fmt::format("column ffn_kind: '{}' is not gelu or swiglu", Printable(ffn_kind)));
  }
  if (!ffn_kind.empty()) {
    // The 2024 tables describe modern stacks: untied embeddings for Llama, no dropout.
    r.model.dropout = false;
    r.model.tied_embeddings = r.model.ffn_kind != FfnKind::kSwiGlu;
    r.model.learned_positions = false;
  }
  // dropout (optional, yes | no): what the run's config trained with; blank keeps the default
  // above (none in the 2024 tables, the catalogue model's in runs.csv). NeMo's GPT-3 configs keep
  // GPT-3's 0.1 (data/published/README.md).
  if (std::string_view drop = Trim(get("dropout")); !drop.empty()) {
    ASSIGN_OR_RETURN(r.model.dropout, YesNo(drop, "dropout"));
  }
  RETURN_IF_ERROR(ValidateModel(r.model));
  ASSIGN_OR_RETURN(r.training.global_batch, IntField(get("gbs"), "gbs"));
  ASSIGN_OR_RETURN(r.plan.mbs, IntField(get("mbs"), "mbs", true));
  r.mbs_published = r.plan.mbs > 0;
  if (!r.mbs_published) r.plan.mbs = 1;
  ASSIGN_OR_RETURN(int gpus, IntField(get("gpus"), "gpus"));
  ASSIGN_OR_RETURN(r.system, SystemForRun(get("gpu"), get("network"), gpus));
  if (!Trim(get("hbm_gib")).empty()) {
    auto hbm = ParseDouble(Trim(get("hbm_gib")));
    if (!hbm || !(*hbm > 0) || *hbm > 4096) {
      return InvalidArgumentError(
          fmt::format("column hbm_gib: '{}' is not in (0, 4096]", Printable(get("hbm_gib"))));
    }
    r.system.hbm_gib = *hbm;
    // The only H100 SXM part above 80 GB is the 96 GB one (94.5 GiB usable), whose HBM2e runs
    // at 2.4 TB/s (ShortSystem::hbm_tbps gives the sources), not the 80 GB part's HBM3 3.35.
    auto part = topo::FindGpu(r.system.gpu);
    if (part.ok() && (*part)->name == "H100-SXM" && *hbm > 90) r.system.hbm_tbps = 2.41;
  }
  if (!Trim(get("power_w")).empty()) {
    auto w = ParseDouble(Trim(get("power_w")));
    if (!w || !(*w > 0) || *w > 5000) {
      return InvalidArgumentError(
          fmt::format("column power_w: '{}' is not in (0, 5000]", Printable(get("power_w"))));
    }
    r.system.power_limit_w = *w;
  }
  ASSIGN_OR_RETURN(r.plan.tp, IntField(get("tp"), "tp"));
  ASSIGN_OR_RETURN(r.plan.pp, IntField(get("pp"), "pp"));
  ASSIGN_OR_RETURN(r.plan.dp, IntField(get("dp"), "dp"));
  ASSIGN_OR_RETURN(r.plan.cp, IntField(get("cp"), "cp"));
  ASSIGN_OR_RETURN(r.plan.vp, IntField(get("vp"), "vp", true));
  r.vp_published = r.plan.vp > 0;
  if (!r.vp_published) r.plan.vp = 1;
  r.recompute_published = !Trim(get("recompute")).empty();
  if (r.recompute_published) {
    ASSIGN_OR_RETURN(r.plan.recompute, ParseRecompute(Trim(get("recompute"))));
  }
  ASSIGN_OR_RETURN(r.plan.sequence_parallel, YesNo(get("seq_parallel"), "seq_parallel"));
  ASSIGN_OR_RETURN(r.plan.zero, IntField(get("zero"), "zero"));
  if (r.plan.zero > 3) {
    return InvalidArgumentError(fmt::format("column zero: {} is not in 0..3", r.plan.zero));
  }
  ASSIGN_OR_RETURN(r.plan.fsdp_group, IntField(get("fsdp_group"), "fsdp_group", true));
  if (r.plan.fsdp_group > 0 &&
      (r.plan.zero != 3 || (r.plan.dp * r.plan.cp) % r.plan.fsdp_group != 0)) {
    return InvalidArgumentError(fmt::format(
        "column fsdp_group: {} needs zero 3 and must divide dp x cp", r.plan.fsdp_group));
  }
  std::string_view tp_overlap = Trim(get("tp_overlap"));
  if (EqualsIgnoreCase(tp_overlap, "async")) {
    // PyTorch's async TP (torchtitan), not Transformer Engine's userbuffer overlap (yes).
    r.plan.tp_comm_overlap = true;
    r.training.async_tp = true;
  } else if (!tp_overlap.empty()) {
    Result<bool> yes = YesNo(tp_overlap, "tp_overlap");
    if (!yes.ok()) {
      return InvalidArgumentError(
          fmt::format("column tp_overlap: '{}' is not yes, no or async", Printable(tp_overlap)));
    }
    r.plan.tp_comm_overlap = *yes;
  } else {
    // Tables before 2024 describe Megatron-LM without TP overlap; the calibration of their GPU
    // family (Ampere) hides none anyway.
    r.plan.tp_comm_overlap = true;
  }
  // Megatron-LM of that era reduced gradients after the backward pass, without overlap; the
  // optional column dp_overlap says when a run's stack did overlap (FSDP's reduce-scatter).
  r.plan.overlap_dp_comm = false;
  if (!Trim(get("dp_overlap")).empty()) {
    ASSIGN_OR_RETURN(r.plan.overlap_dp_comm, YesNo(get("dp_overlap"), "dp_overlap"));
  }
  r.plan.uneven_pp = r.model.layers % r.plan.pp != 0;
  // The optional column pp_p2p says how the run's pipeline engine moved activations: batched
  // (Megatron-LM, the default) or serial (DeepSpeed's pipeline engine, blocking calls in turn).
  std::string_view p2p = Trim(get("pp_p2p"));
  if (EqualsIgnoreCase(p2p, "serial")) {
    r.plan.batched_pp_p2p = false;
  } else if (!p2p.empty() && !EqualsIgnoreCase(p2p, "batched")) {
    return InvalidArgumentError(
        fmt::format("column pp_p2p: '{}' is not batched or serial", Printable(p2p)));
  }
  // The optional column mfu_attention says how the source counted attention FLOPs in an MFU
  // figure: full (the default) or causal (half the s x s square).
  std::string_view attention = Trim(get("mfu_attention"));
  if (EqualsIgnoreCase(attention, "causal")) {
    r.causal_attention_flops = true;
  } else if (!attention.empty() && !EqualsIgnoreCase(attention, "full")) {
    return InvalidArgumentError(
        fmt::format("column mfu_attention: '{}' is not full or causal", Printable(attention)));
  }
  std::string_view flops = Trim(get("flops"));
  if (flops.empty() || EqualsIgnoreCase(flops, "full")) {
    r.flops = r.causal_attention_flops ? FlopConvention::kCausal : FlopConvention::kFull;
  } else if (EqualsIgnoreCase(flops, "causal")) {
    r.flops = FlopConvention::kCausal;
  } else if (EqualsIgnoreCase(flops, "6n")) {
    r.flops = FlopConvention::kSixN;
  } else if (EqualsIgnoreCase(flops, "6n-total")) {
    r.flops = FlopConvention::kSixNTotal;
  } else if (EqualsIgnoreCase(flops, "full-mha")) {
    r.flops = FlopConvention::kFullMha;
  } else if (EqualsIgnoreCase(flops, "packed")) {
    r.flops = FlopConvention::kPacked;
  } else {
    return InvalidArgumentError(
        fmt::format("column flops: '{}' is not full, causal, 6n, 6n-total, full-mha or packed",
                    Printable(flops)));
  }
  std::string_view peak = Trim(get("mfu_peak"));
  if (EqualsIgnoreCase(peak, "bf16")) {
    r.mfu_peak_bf16 = true;
  } else if (!peak.empty() && !EqualsIgnoreCase(peak, "dtype")) {
    return InvalidArgumentError(
        fmt::format("column mfu_peak: '{}' is not bf16 or dtype", Printable(peak)));
  }
  ASSIGN_OR_RETURN(r.training.dtype, topo::ParseDtype(get("dtype")));
  ASSIGN_OR_RETURN(r.training.flash_attention, YesNo(get("flash_attention"), "flash_attention"));
  // The optional stack columns (grads, fp8_recipe, compiled, cp_attention, tp_impl; blank: the
  // default), read by the same table as `plan`'s flags and the API's fields (perf/stack.h).
  for (const StackSetting& s : StackSettings()) {
    std::string_view word = Trim(get(std::string(s.name).c_str()));
    if (word.empty()) continue;
    RETURN_IF_ERROR(ApplyStackSetting(s.name, word, fmt::format("column {}", s.name), &r.training));
  }
  std::string_view metric = Trim(get("metric"));
  bool found = false;
  for (Metric m : {Metric::kIterationTime, Metric::kHfuTflops, Metric::kMfu, Metric::kStateMemory,
                   Metric::kActivationMemory, Metric::kTokensPerGpu, Metric::kTokensTotal,
                   Metric::kModelTflops, Metric::kHfu}) {
    if (metric == MetricName(m)) {
      r.metric = m;
      found = true;
    }
  }
  if (!found) {
    return InvalidArgumentError(fmt::format("column metric: unknown '{}'", Printable(metric)));
  }
  auto value = ParseDouble(get("value"));
  if (!value || !(*value > 0)) {
    return InvalidArgumentError(
        fmt::format("column value: '{}' is not a positive number", Printable(get("value"))));
  }
  r.value = *value;
  return r;
}

}  // namespace

namespace {

// Builds the runs of a table one line at a time (ForEachFileLine / ForEachTextLine hand them on),
// so a table is never held whole.
class RunsTableParser {
 public:
  explicit RunsTableParser(std::string_view source) : source_(source) {}

  Status Line(int line_no, std::string_view line) {
    if (Trim(line).empty()) return Status::Ok();
    // RFC 4180 quoting: a source cell may hold commas ("Figure 5a, image ...").
    Result<std::vector<std::string>> split = SplitCsvLine(line);
    if (!split.ok()) return split.status().WithPrefix(fmt::format("{}:{}", source_, line_no));
    const std::vector<std::string>& cells = *split;
    if (header_.empty()) {
      for (const std::string& c : cells) {
        if (std::find(header_.begin(), header_.end(), Trim(c)) != header_.end()) {
          return InvalidArgumentError(fmt::format("{}:{}: column '{}' appears twice", source_,
                                                  line_no, Printable(Trim(c))));
        }
        header_.emplace_back(Trim(c));
      }
      return Status::Ok();
    }
    if (cells.size() != header_.size()) {
      return InvalidArgumentError(fmt::format("{}:{}: {} columns, header has {}", source_, line_no,
                                              cells.size(), header_.size()));
    }
    std::map<std::string, std::string_view> fields;
    for (std::size_t i = 0; i < cells.size(); ++i) fields[header_[i]] = cells[i];
    auto run = ParseRow(fields);
    if (!run.ok()) return run.status().WithPrefix(fmt::format("{}:{}", source_, line_no));
    runs_.push_back(std::move(run).value());
    return Status::Ok();
  }

  Result<std::vector<PublishedRun>> Finish() {
    if (runs_.empty()) return InvalidArgumentError(fmt::format("{}: no rows", source_));
    return std::move(runs_);
  }

 private:
  std::string source_;
  std::vector<std::string> header_;
  std::vector<PublishedRun> runs_;
};

}  // namespace

Result<std::vector<PublishedRun>> ParsePublishedRuns(std::string_view csv,
                                                     std::string_view source) {
  RunsTableParser parser(source);
  RETURN_IF_ERROR(ForEachTextLine(csv, source, kPerfCsvLimits,
                                  [&](int no, std::string_view l) { return parser.Line(no, l); }));
  return parser.Finish();
}

Result<std::vector<PublishedRun>> LoadPublishedRuns(const std::string& path) {
  RunsTableParser parser(path);
  RETURN_IF_ERROR(ForEachFileLine(path, "runs table", kPerfCsvLimits,
                                  [&](int no, std::string_view l) { return parser.Line(no, l); }));
  return parser.Finish();
}

namespace {

// Model FLOPs of one step under the source's convention.
double ModelFlops(const PublishedRun& run, const StepEstimate& e) {
  const ModelSpec& m = run.model;
  double gbs = run.training.global_batch, s = m.seq, h = m.hidden, l = m.layers;
  double tokens = gbs * s;
  switch (run.flops) {
    case FlopConvention::kFull:
      return e.model_flops_per_step.value();
    case FlopConvention::kCausal:
      return e.model_flops_per_step.value() - 3 * gbs * 2 * s * s * h * l;
    case FlopConvention::kSixN:
      return 6 * (m.TotalParams() - double(m.vocab) * h) * tokens + 12 * l * h * s * tokens;
    case FlopConvention::kSixNTotal:
      return 6 * m.TotalParams() * tokens + 12 * l * h * s * tokens;
    case FlopConvention::kFullMha: {
      // K and V projections at h x h instead of h x kv_heads x head_dim: 2 x 2 h (h - kvd)
      // forward FLOPs per token and layer, x3 with the backward pass.
      double kvd = double(m.kv_heads) * m.head_dim();
      return e.model_flops_per_step.value() + 3 * tokens * l * 4 * h * (h - kvd);
    }
    case FlopConvention::kPacked:
      return 6 * (m.TotalParams() - double(m.vocab) * h) * tokens;
  }
  return 0;
}

double Predicted(const PublishedRun& run, const ParallelPlan& plan, const StepEstimate& e) {
  double step = e.step.value(), gpus = plan.gpus();
  double peak = 0;
  auto gpu = topo::FindGpu(run.system.gpu);
  if (gpu.ok()) {
    peak = (*gpu)->Peak(run.mfu_peak_bf16 ? topo::Dtype::kBf16 : run.training.dtype).value();
  }
  switch (run.metric) {
    case Metric::kIterationTime:
      return step;
    case Metric::kHfuTflops: {
      // Megatron's reporting formula, so both sides count FLOPs the same way.
      double flops =
          plan.recompute == Recompute::kFull
              ? MegatronHardwareFlopsFullRecompute(run.model, run.training.global_batch).value()
              : e.hardware_flops_per_step.value();
      return flops / (step * gpus) / 1e12;
    }
    case Metric::kMfu:
      return ModelFlops(run, e) / (step * gpus * peak);
    case Metric::kHfu: {
      double rc = e.hardware_flops_per_step.value() - e.model_flops_per_step.value();
      return (ModelFlops(run, e) + rc) / (step * gpus * peak);
    }
    case Metric::kModelTflops:
      return ModelFlops(run, e) / (step * gpus) / 1e12;
    case Metric::kTokensPerGpu:
      return e.tokens_per_second / gpus;
    case Metric::kTokensTotal:
      return e.tokens_per_second;
    case Metric::kStateMemory:
      return ToGiB(e.memory.weights_grads_optimizer());
    case Metric::kActivationMemory:
      return ToGiB(e.memory.activations);
  }
  return 0;
}

// Calls fn with each plan the row allows: its published plan, with every micro-batch size,
// interleaving and recomputation tried where the source did not say which ran.
template <typename Fn>
void ForEachPlanOption(const PublishedRun& run, Fn fn) {
  std::vector<int> mbs_options = {run.plan.mbs};
  if (!run.mbs_published) mbs_options = {1, 2, 4, 8};
  std::vector<int> vp_options = {run.plan.vp};
  if (!run.vp_published) vp_options = {1, 2, 3, 4, 5, 6, 8};
  std::vector<Recompute> rc_options = {run.plan.recompute};
  if (!run.recompute_published) {
    rc_options = {Recompute::kNone, Recompute::kSelective, Recompute::kFull};
  }
  for (Recompute rc : rc_options) {
    for (int mbs : mbs_options) {
      for (int vp : vp_options) {
        ParallelPlan plan = run.plan;
        plan.mbs = mbs;
        plan.vp = vp;
        plan.recompute = rc;
        fn(plan);
      }
    }
  }
}

Result<ValidationRow> ValidateRunImpl(const PublishedRun& run, const Calibration* calibration,
                                      const SystemProfile* profile) {
  ASSIGN_OR_RETURN(SystemSpec system, SystemFromShort(run.system));
  if (profile != nullptr) ApplyProfile(*profile, &system);
  if (calibration != nullptr) system.calib = *calibration;
  EvalContext ctx(run.model, run.training, system);
  ValidationRow row;
  row.run = run;
  bool memory = IsMemoryMetric(run.metric);
  bool have = false;
  ForEachPlanOption(run, [&](const ParallelPlan& plan) {
    StepEstimate e;
    Evaluate(ctx, plan, run.system.gpus, nullptr, &e, /*time_if_oom=*/true);
    // The published plan ran, so a plan the memory model calls out-of-memory is still
    // timed (and reported); Korthikanti's "none" memory baseline never fitted.
    bool usable = e.rejection == Rejection::kNone || e.rejection == Rejection::kOutOfMemory;
    if (!usable) return;
    bool better =
        !have ||
        (!memory && ((e.feasible() && !row.estimate.feasible()) ||
                     (e.feasible() == row.estimate.feasible() && e.step < row.estimate.step)));
    if (better) {
      row.plan = plan;
      row.estimate = e;
      have = true;
    }
  });
  if (!have) {
    StepEstimate e;
    Evaluate(ctx, run.plan, run.system.gpus, nullptr, &e);
    return FailedPreconditionError(fmt::format("{}: no feasible plan ({}: {})", run.id,
                                               RejectionName(e.rejection),
                                               ExplainRejection(ctx, run.plan, e)));
  }
  row.predicted = Predicted(run, row.plan, row.estimate);
  row.error = (row.predicted - run.value) / run.value;
  return row;
}

}  // namespace

Result<ValidationRow> ValidateRun(const PublishedRun& run, const Calibration* calibration) {
  return ValidateRunImpl(run, calibration, nullptr);
}

Result<MemoryNeed> LeastMemoryNeed(const PublishedRun& run, const Calibration& calibration) {
  ASSIGN_OR_RETURN(SystemSpec system, SystemFromShort(run.system));
  system.calib = calibration;
  EvalContext ctx(run.model, run.training, system);
  MemoryNeed need;
  bool have = false;
  ForEachPlanOption(run, [&](const ParallelPlan& plan) {
    StepEstimate e;
    Evaluate(ctx, plan, run.system.gpus, nullptr, &e, /*time_if_oom=*/true);
    if (e.rejection != Rejection::kNone && e.rejection != Rejection::kOutOfMemory) return;
    if (!have || e.memory.total() < need.need) need.need = e.memory.total();
    need.capacity = e.memory.capacity;
    have = true;
  });
  if (!have) return FailedPreconditionError(fmt::format("{}: no plan the row allows", run.id));
  return need;
}

Result<ValidationRow> ValidateRunWithProfile(const PublishedRun& run,
                                             const SystemProfile& profile) {
  return ValidateRunImpl(run, nullptr, &profile);
}

std::string_view GpuFamilyOf(const PublishedRun& run) {
  auto gpu = topo::FindGpu(run.system.gpu);
  return gpu.ok() ? topo::GpuFamilyName((*gpu)->family) : std::string_view("?");
}

Result<std::vector<PublishedRun>> LoadPublishedTables(std::string_view paths) {
  std::vector<PublishedRun> all;
  std::map<std::string, std::string> seen;
  for (std::string_view path : Split(paths, ',')) {
    path = Trim(path);
    if (path.empty()) continue;
    ASSIGN_OR_RETURN(std::vector<PublishedRun> runs, LoadPublishedRuns(std::string(path)));
    for (PublishedRun& r : runs) {
      auto [it, inserted] = seen.emplace(r.id, std::string(path));
      if (!inserted) {
        return InvalidArgumentError(
            fmt::format("{}: run id '{}' already in {}", path, Printable(r.id), it->second));
      }
      all.push_back(std::move(r));
    }
  }
  if (all.empty()) return InvalidArgumentError("runs: no table named");
  return all;
}

std::string DefaultDataDir() {
  auto usable = [](const std::string& dir) { return std::filesystem::exists(dir + "/runs.csv"); };
  if (const char* d = std::getenv("BATON_DATA_DIR"); d != nullptr && *d != 0) return d;
  if (const char* d = std::getenv("BATON_SOURCE_DIR"); d != nullptr && *d != 0) {
    std::string dir = std::string(d) + "/data/published";
    if (usable(dir)) return dir;
  }
#ifdef BATON_DEFAULT_DATA_DIR
  if (usable(BATON_DEFAULT_DATA_DIR)) return BATON_DEFAULT_DATA_DIR;
#endif
  return "data/published";
}

std::string DevTables(const std::string& dir) {
  return dir + "/runs.csv," + dir + "/runs-2024.csv";
}

std::string_view ParallelismKind(const ParallelPlan& plan) {
  if (plan.zero >= 3) return "fsdp";
  if (plan.cp > 1) return "cp";
  if (plan.tp > 1 || plan.pp > 1) return "3d";
  return "dp";
}

std::string_view SequenceBucket(int seq) {
  if (seq <= 8192) return "<=8k";
  if (seq <= 32768) return "8k-32k";
  if (seq <= 131072) return "32k-128k";
  return ">128k";
}

bool IsLongContextRun(const PublishedRun& run) {
  return run.group == "nemo-longseq" || (run.group == "torchtitan" && run.plan.cp > 1);
}

std::vector<BucketError> ErrorBreakdown(const std::vector<ValidationRow>& rows) {
  std::vector<BucketError> out;
  auto add = [&](std::string_view dim, std::string_view bucket, double err) {
    auto it = std::find_if(out.begin(), out.end(), [&](const BucketError& b) {
      return b.dimension == dim && b.bucket == bucket;
    });
    if (it == out.end()) {
      out.push_back({std::string(dim), std::string(bucket), 0, 0, 0, 0});
      it = out.end() - 1;
    }
    ++it->rows;
    it->bias += err;
    it->mae += std::abs(err);
    it->max = std::max(it->max, std::abs(err));
  };
  for (const char* dim : {"source", "parallelism", "sequence", "gpu", "dtype", "long-context"}) {
    for (const ValidationRow& r : rows) {
      if (IsMemoryMetric(r.run.metric)) continue;
      std::string_view d = dim;
      if (d == "source") {
        add(d, r.run.group, r.error);
      } else if (d == "parallelism") {
        add(d, ParallelismKind(r.plan), r.error);
      } else if (d == "sequence" || (d == "long-context" && IsLongContextRun(r.run))) {
        add(d, SequenceBucket(r.run.model.seq), r.error);
      } else if (d == "gpu") {
        add(d, GpuFamilyOf(r.run), r.error);
      } else if (d == "dtype") {
        add(d, topo::DtypeName(r.run.training.dtype), r.error);
      }
    }
  }
  for (BucketError& b : out) {
    b.bias /= b.rows;
    b.mae /= b.rows;
  }
  // Sequence buckets shortest first (the rest stay in first-seen order within a dimension).
  auto seq_rank = [](const BucketError& b) {
    if (b.dimension != "sequence" && b.dimension != "long-context") return 0;
    const char* order[] = {"<=8k", "8k-32k", "32k-128k", ">128k"};
    for (int i = 0; i < 4; ++i) {
      if (b.bucket == order[i]) return i;
    }
    return 4;
  };
  auto dim_rank = [](const BucketError& b) {
    const char* dims[] = {"source", "parallelism", "sequence", "gpu", "dtype", "long-context"};
    for (int i = 0; i < 6; ++i) {
      if (b.dimension == dims[i]) return i;
    }
    return 6;
  };
  std::stable_sort(out.begin(), out.end(), [&](const BucketError& a, const BucketError& b) {
    return dim_rank(a) * 10 + seq_rank(a) < dim_rank(b) * 10 + seq_rank(b);
  });
  return out;
}

std::string FormatBreakdown(const std::vector<BucketError>& buckets) {
  std::string out = fmt::format("{:<13} {:<16} {:>5} {:>8} {:>8} {:>8}\n", "by", "bucket", "rows",
                                "bias", "mean", "max");
  for (const BucketError& b : buckets) {
    out += fmt::format("{:<13} {:<16} {:>5} {:>+7.1f}% {:>7.1f}% {:>7.1f}%\n", b.dimension,
                       b.bucket, b.rows, 100 * b.bias, 100 * b.mae, 100 * b.max);
  }
  return out;
}

void Summarise(ValidationReport* rep) {
  rep->breakdown = ErrorBreakdown(rep->rows);
  rep->perf_mae = rep->perf_max = 0;
  rep->memory_mae = rep->memory_max = rep->perf_p90 = 0;
  rep->perf_rows = rep->oom_rows = 0;
  rep->groups.clear();
  int mem_n = 0;
  std::vector<double> errs;
  for (const ValidationRow& row : rep->rows) {
    double err = std::abs(row.error);
    if (IsMemoryMetric(row.run.metric)) {
      rep->memory_mae += err;
      rep->memory_max = std::max(rep->memory_max, err);
      ++mem_n;
      continue;
    }
    // A performance figure was measured, so its plan ran; the memory rows are Korthikanti's
    // tables, whose no-recomputation baselines did not fit (and are not counted).
    if (row.estimate.rejection == Rejection::kOutOfMemory) ++rep->oom_rows;
    rep->perf_mae += err;
    rep->perf_max = std::max(rep->perf_max, err);
    ++rep->perf_rows;
    errs.push_back(err);
    auto g = std::find_if(rep->groups.begin(), rep->groups.end(),
                          [&](const GroupError& x) { return x.group == row.run.group; });
    if (g == rep->groups.end()) {
      rep->groups.push_back({row.run.group, 0, 0, 0});
      g = rep->groups.end() - 1;
    }
    ++g->rows;
    g->mae += err;
    g->max = std::max(g->max, err);
  }
  for (GroupError& g : rep->groups) g.mae /= g.rows;
  if (rep->perf_rows > 0) rep->perf_mae /= rep->perf_rows;
  if (mem_n > 0) rep->memory_mae /= mem_n;
  if (!errs.empty()) {
    std::sort(errs.begin(), errs.end());
    rep->perf_p90 = errs[std::min(errs.size() - 1, static_cast<std::size_t>(0.9 * errs.size()))];
  }
}

namespace {

Result<ValidationReport> RunValidationImpl(const std::vector<PublishedRun>& runs,
                                           const Calibration* calibration,
                                           const SystemProfile* profile) {
  ValidationReport rep;
  for (const PublishedRun& run : runs) {
    ASSIGN_OR_RETURN(ValidationRow row, ValidateRunImpl(run, calibration, profile));
    rep.rows.push_back(std::move(row));
  }
  Summarise(&rep);
  return rep;
}

}  // namespace

Result<ValidationReport> RunValidation(const std::vector<PublishedRun>& runs,
                                       const Calibration* calibration) {
  return RunValidationImpl(runs, calibration, nullptr);
}

Result<ValidationReport> RunValidationWithProfile(const std::vector<PublishedRun>& runs,
                                                  const SystemProfile& profile) {
  return RunValidationImpl(runs, nullptr, &profile);
}

Result<VtrainReport> ValidateVtrain(const std::string& path) {
  std::vector<double> errors;
  std::vector<VtrainPoint> rows;
  auto parse_line = [&](int line_no, std::string_view line) -> Status {
    if (line_no == 1 || Trim(line).empty()) return Status::Ok();  // the header
    std::vector<std::string_view> cells = Split(line, ',');
    std::vector<double> v;
    for (std::string_view c : cells) {
      auto d = ParseDouble(c);
      if (!d)
        return InvalidArgumentError(
            fmt::format("{}:{}: '{}' is not a number", path, line_no, Printable(c)));
      v.push_back(*d);
    }
    if (v.size() != 11) {
      return InvalidArgumentError(fmt::format("{}:{}: expected 11 columns", path, line_no));
    }
    ModelSpec m;
    m.name = "vtrain-gpt";
    m.hidden = static_cast<int>(v[3]);
    m.heads = m.kv_heads = static_cast<int>(v[4]);
    m.layers = static_cast<int>(v[5]);
    m.seq = static_cast<int>(v[6]);
    m.ffn = 4 * m.hidden;
    m.vocab = 50304;  // GPT-2's 50,257 padded to a multiple of 128, as Megatron does
    m.learned_positions = true;
    RETURN_IF_ERROR(ValidateModel(m).WithPrefix(fmt::format("{}:{}", path, line_no)));
    TrainingSpec t;
    t.global_batch = static_cast<int>(v[1]);
    t.dtype = topo::Dtype::kFp16;
    t.flash_attention = false;
    ShortSystem sh;
    sh.gpu = "A100-80GB";
    sh.gpus = static_cast<int>(v[0]);
    sh.nic_gbits_per_gpu = 200;
    ASSIGN_OR_RETURN(SystemSpec system, SystemFromShort(sh));
    ParallelPlan p;
    p.tp = static_cast<int>(v[7]);
    p.dp = static_cast<int>(v[8]);
    p.pp = static_cast<int>(v[9]);
    p.mbs = static_cast<int>(v[2]);
    p.recompute = Recompute::kFull;
    p.overlap_dp_comm = false;
    EvalContext ctx(m, t, system);
    StepEstimate e;
    Evaluate(ctx, p, sh.gpus, nullptr, &e, /*time_if_oom=*/true);
    if (e.rejection != Rejection::kNone && e.rejection != Rejection::kOutOfMemory) {
      return InvalidArgumentError(
          fmt::format("{}:{}: plan rejected ({})", path, line_no, RejectionName(e.rejection)));
    }
    double measured = v[10] / 1000.0;
    errors.push_back((e.step.value() - measured) / measured);
    rows.push_back({m, p, e.micro_batches, measured, e.step.value()});
    return Status::Ok();
  };
  RETURN_IF_ERROR(ForEachFileLine(path, "vTrain table", kPerfCsvLimits, parse_line));
  VtrainReport rep;
  rep.rows = std::move(rows);
  rep.points = static_cast<int>(errors.size());
  if (errors.empty()) return InvalidArgumentError(fmt::format("{}: no rows", path));
  for (double e : errors) {
    rep.mae += std::abs(e);
    rep.max = std::max(rep.max, std::abs(e));
  }
  rep.mae /= errors.size();
  std::sort(errors.begin(), errors.end());
  rep.median = errors[errors.size() / 2];
  return rep;
}

std::string FormatValidationReport(const ValidationReport& rep) {
  std::string out = fmt::format("{:<24} {:<27} {:>10} {:>10} {:>7}  {}\n", "run", "metric",
                                "published", "estimate", "error", "plan");
  for (const ValidationRow& r : rep.rows) {
    out += fmt::format("{:<24} {:<27} {:>10.4g} {:>10.4g} {:>+6.1f}%  {}\n", r.run.id,
                       MetricName(r.run.metric), r.run.value, r.predicted, 100 * r.error,
                       PlanToString(r.plan));
    if (!IsMemoryMetric(r.run.metric) && !r.estimate.feasible()) {
      out.pop_back();
      out += fmt::format("  [estimator: needs {:.1f} GiB of {:.1f} usable]\n",
                         ToGiB(r.estimate.memory.total()), ToGiB(r.estimate.memory.usable));
    }
  }
  out +=
      "\nerror by bucket (bias: mean signed error; long-context: NeMo long-sequence and "
      "torchtitan CP rows)\n";
  out += FormatBreakdown(rep.breakdown);
  out += fmt::format("runs the memory model calls out of memory: {}\n", rep.oom_rows);
  out += fmt::format("time / TFLOP/s / MFU: p90 |error| {:.1f}%\n", 100 * rep.perf_p90);
  out += fmt::format(
      "time / TFLOP/s / MFU: mean |error| {:.1f}%, max {:.1f}%  ({} rows)\n"
      "memory:               mean |error| {:.1f}%, max {:.1f}%  (bound 10%)\n",
      100 * rep.perf_mae, 100 * rep.perf_max, rep.perf_rows, 100 * rep.memory_mae,
      100 * rep.memory_max);
  return out;
}

}  // namespace baton::perf
