// `baton plan`: estimate one parallel plan, search every plan, check the estimator against
// published runs, and write the launch spec for a placement.
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <thread>

#include "cli/commands.h"
#include "core/strings.h"
#include "perf/calibrate.h"
#include "perf/collectives.h"
#include "perf/estimator.h"
#include "perf/placement.h"
#include "perf/profile.h"
#include "perf/report.h"
#include "perf/search.h"
#include "perf/stack.h"
#include "perf/validation.h"
#include "topology/builders/fabrics.h"
#include "topology/gpu.h"
#include "topology/io/cluster_file.h"

namespace baton::cli {
namespace {

using perf::ParallelPlan;

struct PlanOptions {
  // model and training
  std::string model = "gpt3-175b";
  int global_batch = 0;
  double global_batch_tokens = 0;
  std::string dtype = "bf16";
  double tokens = 0;
  double price = 0;
  bool no_flash = false;
  // The software stack (perf/stack.h) by setting name; "" = the default. Map nodes stay put, so
  // CLI11 can write into them.
  std::map<std::string, std::string, std::less<>> stack;
  double checkpoint_gbps = 100;
  double mtbf_hours = 24;
  // system
  std::string gpu = "H100-SXM";
  std::string gpus_arg;  // "N" or a list "1024,2048"
  int gpus_per_node = 8;
  double nvlink_gbytes = 0;
  double nic_gbits = 0;  // 0: the GPU's reference system (perf::DefaultNicGbps)
  int nodes_per_leaf = 32;
  double oversubscription = 1.0;
  std::string preset;
  std::string topology;
  // plan
  // The API's defaults (perf::ParallelPlan, which the daemon's JSON reader starts from), so the
  // CLI and the API agree on a plan that leaves a field out.
  int tp = 1, pp = 1, dp = 0, cp = 1, ep = 1, mbs = 1, vp = 1, zero = ParallelPlan{}.zero;
  std::string recompute = "none";
  std::string order = "tp-cp-ep-dp-pp";
  bool sp = false, no_overlap = false, uneven_pp = false;
  // output
  bool json = false;
  int top = 10;
  int threads = 1;
  std::string objective = "time";
  std::string html;
  bool no_progress = false;
  std::string runs_file;
  std::string data_dir;
  std::string cv;
  std::string profile;
  std::string attention_file;
  std::string out_file;
  std::string collectives;  // nccl-tests outputs for `calibrate --collectives`
  std::string families;
  bool no_bands = false;
  std::string placement = "compact";
  int master_port = 29500;
  std::string hostfile_out;
  // search space restrictions (comma lists; empty = the default space)
  std::string tp_list, pp_list, cp_list, ep_list, mbs_list, vp_list, zero_list, recompute_list;
  bool even_pp = false;
};

void PrintError(const Status& st) { fmt::print(stderr, "error: {}\n", st.ToString()); }

// "bf16" or, off the default stack, "bf16 (grads bf16, cp_attention torch)".
std::string DtypeAndStack(const perf::TrainingSpec& t) {
  std::string stack = perf::StackSummary(t);
  std::string dtype(topo::DtypeName(t.dtype));
  return stack.empty() ? dtype : fmt::format("{} ({})", dtype, stack);
}

// "cp_attention" -> "--cp-attention".
std::string StackFlag(std::string_view setting) {
  std::string flag = "--" + std::string(setting);
  std::replace(flag.begin(), flag.end(), '_', '-');
  return flag;
}

Result<std::vector<int>> ParseGpuList(const std::string& s) {
  std::vector<int> out;
  if (Trim(s).empty()) return InvalidArgumentError("gpus: --gpus is required");
  for (std::string_view part : Split(s, ',')) {
    auto v = ParseInt64(part);
    if (!v || *v <= 0 || *v > (1 << 22)) {
      return InvalidArgumentError(
          fmt::format("gpus: '{}' is not a GPU count in 1..4194304", Printable(part)));
    }
    out.push_back(static_cast<int>(*v));
  }
  return out;
}

Result<std::vector<int>> ParseIntList(const std::string& s, std::string_view field, int min,
                                      int max) {
  std::vector<int> out;
  for (std::string_view part : Split(s, ',')) {
    auto v = ParseInt64(part);
    if (!v || *v < min || *v > max) {
      return InvalidArgumentError(
          fmt::format("{}: '{}' is not in {}..{}", field, Printable(part), min, max));
    }
    out.push_back(static_cast<int>(*v));
  }
  return out;
}

Status RestrictSpace(const PlanOptions& o, perf::SearchSpace& space) {
  struct Field {
    const std::string& text;
    std::vector<int>& values;
    const char* name;
    int min;
  };
  for (Field f :
       {Field{o.tp_list, space.tp, "search.tp", 1}, Field{o.pp_list, space.pp, "search.pp", 1},
        Field{o.cp_list, space.cp, "search.cp", 1}, Field{o.ep_list, space.ep, "search.ep", 1},
        Field{o.mbs_list, space.mbs, "search.mbs", 1}, Field{o.vp_list, space.vp, "search.vp", 1},
        Field{o.zero_list, space.zero, "search.zero", 0}}) {
    if (f.text.empty()) continue;
    ASSIGN_OR_RETURN(f.values, ParseIntList(f.text, f.name, f.min, 1 << 16));
  }
  if (!o.recompute_list.empty()) {
    space.recompute.clear();
    for (std::string_view part : Split(o.recompute_list, ',')) {
      ASSIGN_OR_RETURN(perf::Recompute r, perf::ParseRecompute(part));
      space.recompute.push_back(r);
    }
  }
  if (o.even_pp) space.allow_uneven_pp = false;
  return Status::Ok();
}

Result<perf::TrainingSpec> MakeTraining(const PlanOptions& o, const perf::ModelSpec& m) {
  perf::TrainingSpec t;
  if (o.global_batch_tokens != 0) {
    ASSIGN_OR_RETURN(t.global_batch, perf::GlobalBatchFromTokens(o.global_batch_tokens, m.seq,
                                                                 "training.global_batch_tokens"));
  } else {
    t.global_batch = o.global_batch;
  }
  if (t.global_batch == 0) {
    // Default: ~4M tokens, a common pre-training batch.
    t.global_batch = std::max(1, (4 << 20) / m.seq);
  }
  ASSIGN_OR_RETURN(t.dtype, topo::ParseDtype(o.dtype));
  t.tokens_to_train = o.tokens;
  t.dollars_per_gpu_hour = o.price;
  t.flash_attention = !o.no_flash;
  for (const auto& [name, word] : o.stack) {
    if (word.empty()) continue;
    RETURN_IF_ERROR(perf::ApplyStackSetting(name, word, StackFlag(name), &t));
  }
  if (!(o.checkpoint_gbps > 0)) {
    return InvalidArgumentError("training.checkpoint_gbps: must be > 0");
  }
  if (!(o.mtbf_hours > 0)) return InvalidArgumentError("training.mtbf_hours: must be > 0");
  t.checkpoint_bandwidth = GBps(o.checkpoint_gbps);
  t.mtbf = Hours(o.mtbf_hours);
  RETURN_IF_ERROR(perf::ValidateTraining(t));
  return t;
}

Result<topo::Cluster> LoadTopology(const PlanOptions& o) {
  if (!o.topology.empty()) return topo::LoadClusterFile(o.topology);
  return topo::BuildPreset(o.preset);
}

// --profile: the user's system profile replaces the built-in constants for this command.
Result<perf::SystemProfile> ProfileFor(const PlanOptions& o) {
  if (o.profile.empty()) return perf::ActiveProfile();
  return perf::LoadProfile(o.profile);
}

Result<perf::SystemSpec> MakeSystemNoProfile(const PlanOptions& o, int gpus);

Result<perf::SystemSpec> MakeSystem(const PlanOptions& o, int gpus) {
  ASSIGN_OR_RETURN(perf::SystemSpec s, MakeSystemNoProfile(o, gpus));
  if (!o.profile.empty()) {
    ASSIGN_OR_RETURN(perf::SystemProfile p, perf::LoadProfile(o.profile));
    perf::ApplyProfile(p, &s);
  }
  return s;
}

Result<perf::SystemSpec> MakeSystemNoProfile(const PlanOptions& o, int gpus) {
  if (!o.preset.empty() || !o.topology.empty()) {
    ASSIGN_OR_RETURN(topo::Cluster cluster, LoadTopology(o));
    return perf::SystemFromCluster(cluster, gpus);
  }
  perf::ShortSystem s;
  s.gpu = o.gpu;
  s.gpus = gpus;
  s.gpus_per_node = o.gpus_per_node;
  s.nvlink_gbytes_per_s = o.nvlink_gbytes;
  s.nic_gbits_per_gpu = o.nic_gbits > 0 ? o.nic_gbits : perf::DefaultNicGbps(o.gpu);
  s.nodes_per_leaf = o.nodes_per_leaf;
  s.oversubscription = o.oversubscription;
  return perf::SystemFromShort(s);
}

Result<ParallelPlan> MakePlan(const PlanOptions& o, const perf::ModelSpec& m, int gpus) {
  ParallelPlan p;
  p.tp = o.tp;
  p.pp = o.pp;
  p.cp = o.cp;
  p.ep = o.ep;
  p.mbs = o.mbs;
  p.vp = o.vp;
  p.zero = o.zero;
  p.sequence_parallel = o.sp;
  p.overlap_dp_comm = !o.no_overlap;
  p.uneven_pp = o.uneven_pp;
  ASSIGN_OR_RETURN(p.recompute, perf::ParseRecompute(o.recompute));
  ASSIGN_OR_RETURN(p.order, perf::ParseRankOrder(o.order));
  for (auto [name, v] : {std::pair{"tp", p.tp}, std::pair{"pp", p.pp}, std::pair{"cp", p.cp}}) {
    if (v <= 0) return InvalidArgumentError(fmt::format("plan.{}: {} must be > 0", name, v));
  }
  {
    // Name the model-shape conflicts before the GPU split they would also break.
    ParallelPlan shape = p;
    shape.dp = 1;
    perf::TrainingSpec any;
    any.global_batch = 1 << 20;
    Status st = perf::ValidatePlan(m, shape, any, 0);
    if (!st.ok() && st.message().rfind("plan.mbs", 0) != 0 &&
        st.message().rfind("plan.vp", 0) != 0 && st.message().rfind("plan.ep", 0) != 0) {
      return st;
    }
  }
  if (o.dp > 0) {
    p.dp = o.dp;
  } else {
    long long mp = static_cast<long long>(p.tp) * p.pp * p.cp;
    if (gpus % mp != 0) {
      return InvalidArgumentError(fmt::format(
          "gpus: {} GPUs cannot be split into tp {} x pp {} x cp {} = {} model-parallel groups",
          gpus, p.tp, p.pp, p.cp, mp));
    }
    p.dp = static_cast<int>(gpus / mp);
  }
  return p;
}

void AddModelOptions(CLI::App* c, PlanOptions* o) {
  c->add_option("--model", o->model,
                "Catalogue name (gpt3-175b, llama3-405b, megatron-1t, mixtral-8x7b, ...) or a "
                ".yaml/.json file")
      ->capture_default_str();
  c->add_option("--global-batch", o->global_batch,
                "Global batch in sequences (default ~4M tokens)");
  c->add_option("--global-batch-tokens", o->global_batch_tokens, "Global batch in tokens");
  c->add_option("--dtype", o->dtype, "bf16, fp16 or fp8")->capture_default_str();
  c->add_option("--tokens", o->tokens, "Tokens to train (for time, GPU-hours and cost)");
  c->add_option("--price", o->price, "$ per GPU-hour");
  c->add_flag("--no-flash-attention", o->no_flash, "Unfused attention (pre-2022 kernels)");
  for (const perf::StackSetting& s : perf::StackSettings()) {
    std::string& word = o->stack[std::string(s.name)];
    c->add_option(StackFlag(s.name), word, fmt::format("{}: {}", s.values, s.help));
  }
  c->add_option("--checkpoint-gbps", o->checkpoint_gbps, "Checkpoint write bandwidth, GB/s")
      ->capture_default_str();
  c->add_option("--mtbf-hours", o->mtbf_hours, "Mean time between job failures, hours")
      ->capture_default_str();
}

void AddSystemOptions(CLI::App* c, PlanOptions* o) {
  c->add_option("--gpus", o->gpus_arg, "GPU count (search: a comma list)")->required();
  c->add_option("--gpu", o->gpu, "GPU type (short description)")->capture_default_str();
  c->add_option("--gpus-per-node", o->gpus_per_node, "GPUs per node")->capture_default_str();
  c->add_option("--nvlink-gbps", o->nvlink_gbytes, "NVLink GB/s per direction (0 = GPU's)");
  c->add_option("--nic-gbps", o->nic_gbits,
                "NIC Gb/s per GPU (default: the GPU's reference system, 200 for A100 (HDR), 400 "
                "otherwise (NDR))");
  c->add_option("--nodes-per-leaf", o->nodes_per_leaf, "Nodes under one leaf switch")
      ->capture_default_str();
  c->add_option("--oversubscription", o->oversubscription, "Above the leaf")->capture_default_str();
  c->add_option("--preset", o->preset, "Take the system from a topology preset");
  c->add_option("--topology", o->topology, "Take the system from a cluster file");
  c->add_option("--profile", o->profile,
                "System profile YAML from `baton plan calibrate` (default: the built-in one)");
}

void AddPlanOptions(CLI::App* c, PlanOptions* o) {
  c->add_option("--tp", o->tp, "Tensor parallel")->capture_default_str();
  c->add_option("--pp", o->pp, "Pipeline parallel")->capture_default_str();
  c->add_option("--dp", o->dp, "Data parallel (default: GPUs / (tp*pp*cp))");
  c->add_option("--cp", o->cp, "Context parallel")->capture_default_str();
  c->add_option("--ep", o->ep, "Expert parallel")->capture_default_str();
  c->add_option("--mbs", o->mbs, "Micro-batch size")->capture_default_str();
  c->add_option("--vp", o->vp, "Virtual pipeline stages")->capture_default_str();
  c->add_option("--recompute", o->recompute,
                "none, selective, full, ops (per-op checkpointing) or mlp (core attention and the "
                "MLP block)")
      ->capture_default_str();
  c->add_flag("--sp", o->sp, "Sequence parallelism");
  c->add_option("--zero", o->zero, "ZeRO stage 0..3")->capture_default_str();
  c->add_flag("--no-overlap", o->no_overlap, "Do not overlap DP communication with backward");
  c->add_flag("--uneven-pp", o->uneven_pp, "Allow pp not dividing the layers");
  c->add_option("--rank-order", o->order, "tp-cp-ep-dp-pp or tp-cp-ep-pp-dp")
      ->capture_default_str();
}

Status RunEstimate(const PlanOptions& o) {
  ASSIGN_OR_RETURN(perf::ModelSpec model, perf::ResolveModel(o.model));
  ASSIGN_OR_RETURN(std::vector<int> gpu_list, ParseGpuList(o.gpus_arg));
  if (gpu_list.size() != 1) return InvalidArgumentError("gpus: estimate takes one GPU count");
  ASSIGN_OR_RETURN(perf::TrainingSpec training, MakeTraining(o, model));
  ASSIGN_OR_RETURN(perf::SystemSpec system, MakeSystem(o, gpu_list[0]));
  ASSIGN_OR_RETURN(ParallelPlan plan, MakePlan(o, model, system.gpus));
  ASSIGN_OR_RETURN(perf::StepEstimate e, perf::Estimate(model, plan, training, system));
  perf::TrainingTotals totals = perf::ComputeTotals(model, training, e, plan.gpus());
  perf::EvalContext ctx(model, training, system);
  ASSIGN_OR_RETURN(perf::SystemProfile profile, ProfileFor(o));
  perf::UncertaintyBand band =
      perf::EstimateBand(profile, model, system, plan, e.feasible() ? e.mfu : 0.0);
  if (o.json) {
    nlohmann::json j = perf::EstimateReportJson(model, training, system, plan, e);
    j["band"] = perf::EstimateBandJson(band, e);
    fmt::print("{}\n", j.dump(2));
    return Status::Ok();
  }
  fmt::print("{} on {} ({}), global batch {} x {} tokens, {}\nplan: {}\n", model.name, system.name,
             system.gpu.name, training.global_batch, model.seq, DtypeAndStack(training),
             perf::PlanToString(plan));
  if (!e.feasible()) {
    fmt::print("INFEASIBLE: {}\n", perf::ExplainRejection(ctx, plan, e));
  }
  fmt::print("{}", perf::FormatEstimate(e));
  if (e.feasible()) fmt::print("{}", perf::FormatBand(band));
  fmt::print("checkpoint    {:.1f} GiB, written in {} at {}, optimal interval {} (MTBF {})\n",
             ToGiB(totals.checkpoint_size), FormatDuration(totals.checkpoint_write),
             FormatBandwidth(training.checkpoint_bandwidth),
             FormatDuration(totals.checkpoint_interval), FormatDuration(training.mtbf));
  if (training.tokens_to_train > 0 && e.feasible()) {
    fmt::print("train {:.3g} tokens: {}, {:.4g} GPU-hours", training.tokens_to_train,
               FormatDuration(totals.time_to_train), totals.gpu_hours);
    if (training.dollars_per_gpu_hour > 0) fmt::print(", ${:.4g}", totals.cost_dollars);
    fmt::print("\n");
  }
  return e.feasible() ? Status::Ok()
                      : FailedPreconditionError(perf::ExplainRejection(ctx, plan, e));
}

class ProgressBar {
 public:
  explicit ProgressBar(bool enabled) : enabled_(enabled && isatty(fileno(stderr))) {}
  void Update(std::uint64_t done, std::uint64_t total) {
    if (!enabled_ || total == 0) return;
    int pct = static_cast<int>(100.0 * done / total);
    if (pct == last_) return;
    last_ = pct;
    int filled = pct * 30 / 100;
    fmt::print(stderr, "\r[{}{}] {:3}% {} / {} plans", std::string(filled, '#'),
               std::string(30 - filled, ' '), pct, done, total);
    if (done >= total) fmt::print(stderr, "\n");
  }

 private:
  bool enabled_;
  int last_ = -1;
};

Status RunSearch(const PlanOptions& o) {
  ASSIGN_OR_RETURN(perf::ModelSpec model, perf::ResolveModel(o.model));
  ASSIGN_OR_RETURN(std::vector<int> gpu_list, ParseGpuList(o.gpus_arg));
  ASSIGN_OR_RETURN(perf::TrainingSpec training, MakeTraining(o, model));
  int most = *std::max_element(gpu_list.begin(), gpu_list.end());
  ASSIGN_OR_RETURN(perf::SystemSpec system, MakeSystem(o, most));
  perf::SearchSpace space = perf::DefaultSearchSpace(model, gpu_list);
  RETURN_IF_ERROR(RestrictSpace(o, space));
  perf::SearchOptions opts;
  opts.top_k = o.top;
  opts.threads = o.threads == 0 ? std::max(1u, std::thread::hardware_concurrency()) : o.threads;
  if (o.objective == "mfu") {
    opts.objective = perf::Objective::kMfu;
  } else if (o.objective != "time") {
    return InvalidArgumentError(
        fmt::format("objective: '{}' is not time or mfu", Printable(o.objective)));
  }
  ProgressBar bar(!o.no_progress && !o.json);
  opts.progress = [&bar](std::uint64_t d, std::uint64_t t) { bar.Update(d, t); };
  auto start = std::chrono::steady_clock::now();
  ASSIGN_OR_RETURN(perf::SearchResult r, perf::Search(model, training, system, space, opts));
  ASSIGN_OR_RETURN(perf::SystemProfile profile, ProfileFor(o));
  // The job's band for the table; plans above the MFU validated runs of this model size reached
  // are marked one by one, and the best plan's own band says so (EstimateBand with its MFU).
  perf::AttachTrust(profile, model, system, most, &r);
  perf::UncertaintyBand best_band =
      r.top.empty()
          ? r.band
          : perf::EstimateBand(profile, model, system, r.top[0].plan, r.top[0].estimate.mfu);
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!o.html.empty()) {
    std::ofstream out(o.html);
    std::string title = fmt::format("baton plan search: {} on {} x {}", model.name,
                                    fmt::join(gpu_list, "/"), system.gpu.name);
    out << perf::SearchReportHtml(title, r);
    if (!out) return InvalidArgumentError(fmt::format("html: cannot write '{}'", o.html));
  }
  if (o.json) {
    nlohmann::json j = perf::SearchToJson(r);
    j["model"] = model.name;
    j["system"] = system.name;
    j["global_batch"] = training.global_batch;
    j["stack"] = perf::StackJson(training);
    j["seconds"] = secs;
    fmt::print("{}\n", j.dump(2));
    return Status::Ok();
  }
  fmt::print(
      "{} on {} {} GPUs, global batch {} x {} tokens, {}: {} plans ({} estimated, the rest "
      "ruled out in bulk) in {:.2f} s, {} threads\n",
      model.name, fmt::join(gpu_list, "/"), system.gpu.name, training.global_batch, model.seq,
      DtypeAndStack(training), r.space,
      r.feasible + r.rejected[static_cast<int>(perf::Rejection::kOutOfMemory)], secs, opts.threads);
  fmt::print("{}", perf::FormatRejections(r));
  if (r.top.empty()) {
    return FailedPreconditionError("no feasible plan (see the rejections above)");
  }
  fmt::print("{}", perf::FormatSearchTable(r));
  fmt::print("\nbest plan: {}\n{}{}", perf::PlanToString(r.top[0].plan),
             perf::FormatEstimate(r.top[0].estimate), perf::FormatBand(best_band));
  if (!o.html.empty()) fmt::print("wrote {}\n", o.html);
  return Status::Ok();
}

std::string RunsFor(const PlanOptions& o) {
  if (!o.runs_file.empty()) return o.runs_file;
  return perf::DevTables(o.data_dir.empty() ? perf::DefaultDataDir() : o.data_dir);
}

nlohmann::json RowJson(const perf::ValidationRow& r) {
  return {{"id", r.run.id},
          {"group", r.run.group},
          {"metric", std::string(perf::MetricName(r.run.metric))},
          {"published", r.run.value},
          {"estimate", r.predicted},
          {"error", r.error},
          {"out_of_memory", r.estimate.rejection == perf::Rejection::kOutOfMemory},
          {"assumptions", r.run.assumptions},
          {"plan", perf::PlanToJson(r.plan)}};
}

Status RunValidate(const PlanOptions& o) {
  ASSIGN_OR_RETURN(std::vector<perf::PublishedRun> runs, perf::LoadPublishedTables(RunsFor(o)));
  ASSIGN_OR_RETURN(perf::SystemProfile profile, ProfileFor(o));
  if (!o.cv.empty()) {
    bool want_source = false, want_stack = false;
    for (std::string_view u : Split(o.cv, ',')) {
      if (Trim(u) == "source") {
        want_source = true;
      } else if (Trim(u) == "stack") {
        want_stack = true;
      } else {
        return InvalidArgumentError(
            fmt::format("cv: '{}' is not 'source', 'stack' or 'source,stack'", Printable(o.cv)));
      }
    }
    std::vector<perf::AttentionPoint> attention;
    std::string att = o.attention_file;
    if (att.empty() && o.runs_file.empty()) {
      att = (o.data_dir.empty() ? perf::DefaultDataDir() : o.data_dir) + "/attention.csv";
    }
    if (!att.empty()) {
      ASSIGN_OR_RETURN(attention, perf::LoadAttentionTable(att));
    }
    perf::CalibrateOptions copts;
    const std::vector<perf::AttentionPoint>* att_points = att.empty() ? nullptr : &attention;
    // Both protocols are fitted whichever is printed: the band `plan calibrate` builds takes each
    // row's worse fold (WorseOfFolds), so its coverage on either needs both.
    ASSIGN_OR_RETURN(perf::CvReport by_source,
                     perf::CrossValidate(runs, profile, att_points, copts, perf::CvUnit::kSource));
    ASSIGN_OR_RETURN(perf::CvReport by_stack,
                     perf::CrossValidate(runs, profile, att_points, copts, perf::CvUnit::kStack));
    const perf::CvReport residuals = perf::WorseOfFolds(by_source, by_stack);
    // The coverage of the band the profile prints (its quantile), or of the one `plan calibrate`
    // would choose for a profile without band cells.
    if (profile.band.quantile > 0) {
      perf::BandCoverage(profile.band.quantile, residuals, &by_source);
      perf::BandCoverage(profile.band.quantile, residuals, &by_stack);
    } else {
      perf::CvReport* const protocols[] = {&by_source, &by_stack};
      perf::ChooseBandQuantile(residuals, protocols);
    }
    std::vector<const perf::CvReport*> shown;
    if (want_source) shown.push_back(&by_source);
    if (want_stack) shown.push_back(&by_stack);
    if (o.json) {
      nlohmann::json out;
      for (const perf::CvReport* cv : shown) {
        nlohmann::json j;
        for (const auto& g : cv->groups) {
          j["groups"].push_back({{"group", g.group},
                                 {"rows", g.rows},
                                 {"mae", g.mae},
                                 {"max", g.max},
                                 {"band_coverage", g.coverage}});
        }
        for (const auto& r : cv->rows) j["rows"].push_back(RowJson(r));
        j["mae"] = cv->mae;
        j["max"] = cv->max;
        j["band_coverage"] = cv->coverage;
        j["band_coverage_mean_over_units"] = cv->source_coverage;
        j["band_quantile"] = cv->band_quantile;
        out[std::string(perf::CvUnitName(cv->unit))] = std::move(j);
      }
      fmt::print("{}\n", out.dump(2));
      return Status::Ok();
    }
    for (std::size_t i = 0; i < shown.size(); ++i) {
      fmt::print("{}{}", i > 0 ? "\n" : "", perf::FormatCvReport(*shown[i]));
    }
    return Status::Ok();
  }
  ASSIGN_OR_RETURN(perf::ValidationReport rep, perf::RunValidationWithProfile(runs, profile));
  if (o.json) {
    nlohmann::json j;
    for (const auto& r : rep.rows) j["rows"].push_back(RowJson(r));
    for (const auto& g : rep.groups) {
      j["groups"].push_back({{"group", g.group}, {"rows", g.rows}, {"mae", g.mae}, {"max", g.max}});
    }
    j["perf_mae"] = rep.perf_mae;
    j["perf_p90"] = rep.perf_p90;
    j["perf_max"] = rep.perf_max;
    j["memory_mae"] = rep.memory_mae;
    j["memory_max"] = rep.memory_max;
    j["out_of_memory_rows"] = rep.oom_rows;
    fmt::print("{}\n", j.dump(2));
    return Status::Ok();
  }
  fmt::print("{}", perf::FormatValidationReport(rep));
  return Status::Ok();
}

// `calibrate --collectives`: the fabric's collective terms fitted to the user's nccl-tests
// outputs, printed with the error at every size. Not written into the profile: the estimator
// does not read a fitted fabric yet (perf/collectives.h is not wired into Evaluate).
Status RunCalibrateCollectives(const PlanOptions& o) {
  std::vector<perf::NcclTestsRun> runs;
  for (std::string_view f : Split(o.collectives, ',')) {
    if (Trim(f).empty()) continue;
    ASSIGN_OR_RETURN(perf::NcclTestsRun run, perf::LoadNcclTestsOutput(Trim(f)));
    fmt::print("{}: {} on {} ranks{}, {} GPUs per node{}, {} sizes\n", run.source,
               perf::CollectiveName(run.op), run.ranks,
               run.ranks_from_ratio ? " (from busbw/algbw)" : "", run.gpus_per_node,
               run.gpus_per_node > 0 ? "" : " (not printed; 8 assumed)", run.points.size());
    runs.push_back(std::move(run));
  }
  if (runs.empty()) return InvalidArgumentError("collectives: no nccl-tests output given");
  const std::vector<perf::CollectiveSample> samples = perf::SamplesFromNcclTests(runs, "yours");
  ASSIGN_OR_RETURN(perf::FittedFabric fit, perf::FitFabric(samples, perf::CollectiveFabric{}));
  fmt::print("\n{}\n{}", perf::FormatFabric(fit), perf::FormatSampleErrors(fit, samples));
  return Status::Ok();
}

Status RunCalibrate(const PlanOptions& o) {
  if (!o.collectives.empty()) return RunCalibrateCollectives(o);
  if (o.out_file.empty()) return InvalidArgumentError("out: --out FILE.yaml is required");
  ASSIGN_OR_RETURN(std::vector<perf::PublishedRun> runs, perf::LoadPublishedTables(RunsFor(o)));
  ASSIGN_OR_RETURN(perf::SystemProfile start, ProfileFor(o));
  std::vector<perf::AttentionPoint> attention;
  if (!o.attention_file.empty()) {
    ASSIGN_OR_RETURN(attention, perf::LoadAttentionTable(o.attention_file));
  }
  perf::CalibrateOptions copts;
  copts.bands = !o.no_bands;
  copts.name = o.out_file;
  // A user's own runs (--runs): the start profile has not seen them, so the fit's prior and every
  // CV fold start from it rather than from the defaults (the dev tables' built-in fit saw them).
  copts.prior_is_start = !o.runs_file.empty();
  for (std::string_view f : Split(o.families, ',')) {
    if (!Trim(f).empty()) copts.families.emplace_back(Trim(f));
  }
  perf::CvReport cv, stack_cv;
  ASSIGN_OR_RETURN(perf::SystemProfile fitted,
                   perf::CalibrateProfile(runs, start, attention.empty() ? nullptr : &attention,
                                          copts, &cv, &stack_cv));
  ASSIGN_OR_RETURN(perf::ValidationReport rep, perf::RunValidationWithProfile(runs, fitted));
  std::ofstream out(o.out_file);
  out << perf::ProfileToYaml(fitted);
  if (!out) return InvalidArgumentError(fmt::format("out: cannot write '{}'", o.out_file));
  fmt::print("fitted {} runs; in-sample: mean |error| {:.1f}%, p90 {:.1f}%, max {:.1f}%\n",
             rep.perf_rows, 100 * rep.perf_mae, 100 * rep.perf_p90, 100 * rep.perf_max);
  if (copts.bands) {
    fmt::print("{}", perf::FormatCvReport(cv));
    // A user's file without a stack column is one stack per source: the same folds again.
    if (stack_cv.groups.size() != cv.groups.size()) {
      fmt::print("\n{}", perf::FormatCvReport(stack_cv));
    }
  }
  fmt::print("wrote {}\n", o.out_file);
  return Status::Ok();
}

Status RunLaunch(const PlanOptions& o) {
  if (o.preset.empty() && o.topology.empty()) {
    return InvalidArgumentError("topology: launch needs --preset or --topology");
  }
  ASSIGN_OR_RETURN(perf::ModelSpec model, perf::ResolveModel(o.model));
  ASSIGN_OR_RETURN(std::vector<int> gpu_list, ParseGpuList(o.gpus_arg));
  if (gpu_list.size() != 1) return InvalidArgumentError("gpus: launch takes one GPU count");
  ASSIGN_OR_RETURN(perf::TrainingSpec training, MakeTraining(o, model));
  ASSIGN_OR_RETURN(topo::Cluster cluster, LoadTopology(o));
  ASSIGN_OR_RETURN(perf::SystemSpec system, perf::SystemFromCluster(cluster, gpu_list[0]));
  ASSIGN_OR_RETURN(ParallelPlan plan, MakePlan(o, model, gpu_list[0]));
  int stride = 1;
  if (o.placement.rfind("scattered", 0) == 0) {
    stride = 2;
    if (o.placement.size() > 10 && o.placement[9] == ':') {
      auto v = ParseInt64(o.placement.substr(10));
      if (!v || *v <= 0 || *v > 1 << 20) {
        return InvalidArgumentError("placement: scattered:N needs a positive node stride");
      }
      stride = static_cast<int>(*v);
    }
  } else if (o.placement != "compact") {
    return InvalidArgumentError(
        fmt::format("placement: '{}' is not compact or scattered[:N]", Printable(o.placement)));
  }
  ASSIGN_OR_RETURN(std::vector<topo::GpuRef> gpus, perf::CompactGpus(cluster, gpu_list[0], stride));
  ASSIGN_OR_RETURN(perf::LaunchSpec spec,
                   perf::MakeLaunchSpec(model, plan, training, cluster, gpus, o.master_port));
  ASSIGN_OR_RETURN(perf::StepEstimate placed,
                   perf::EstimateOnPlacement(model, plan, training, system, cluster, gpus));
  ASSIGN_OR_RETURN(double slowdown,
                   perf::PlacementSlowdown(model, plan, training, system, cluster, gpus));
  if (!o.hostfile_out.empty()) {
    std::ofstream out(o.hostfile_out);
    out << spec.hostfile;
    if (!out)
      return InvalidArgumentError(fmt::format("hostfile: cannot write '{}'", o.hostfile_out));
  }
  if (o.json) {
    nlohmann::json j;
    j["plan"] = perf::PlanToJson(plan);
    j["hostfile"] = spec.hostfile;
    j["torchrun"] = spec.torchrun;
    j["megatron_flags"] = spec.megatron_flags;
    for (const auto& r : spec.ranks) {
      j["ranks"].push_back({{"rank", r.rank},
                            {"node", r.node},
                            {"node_rank", r.node_rank},
                            {"local_rank", r.local_rank},
                            {"gpu", r.gpu}});
    }
    j["estimate"] = perf::EstimateToJson(placed);
    j["placement_slowdown"] = slowdown;
    fmt::print("{}\n", j.dump(2));
    return Status::Ok();
  }
  fmt::print("# plan: {} on {} ({} placement)\n", perf::PlanToString(plan), cluster.name(),
             o.placement);
  fmt::print("# estimated step {} on this placement, {:.3f}x the compact rank-order estimate\n",
             FormatDuration(placed.step), slowdown);
  fmt::print("\n## hostfile\n{}", spec.hostfile);
  fmt::print("\n## torchrun (one per node)\n");
  for (const auto& line : spec.torchrun) fmt::print("{}\n", line);
  if (!spec.cuda_visible_devices_note.empty()) fmt::print("# {}\n", spec.cuda_visible_devices_note);
  fmt::print("\n## Megatron-LM flags\n{}\n", fmt::join(spec.megatron_flags, " \\\n  "));
  fmt::print("\n## rank -> node/GPU\n");
  for (const auto& r : spec.ranks) {
    fmt::print("{:>6} {} gpu{} (node_rank {}, local_rank {})\n", r.rank, r.node, r.gpu, r.node_rank,
               r.local_rank);
  }
  return Status::Ok();
}

// The model catalogue with the shapes a runs table would otherwise spell out (its `model`
// column takes these names; docs/perf/calibration.md).
std::string FormatModels(bool json) {
  nlohmann::json j = nlohmann::json::array();
  std::string out = fmt::format(
      "{:<22} {:>8} {:>6} {:>6} {:>6} {:>5} {:>7} {:>7} {:>7} {:>6}  {}\n", "model", "params",
      "layers", "hidden", "heads", "kv", "ffn", "ffn_kind", "vocab", "seq", "moe");
  for (const perf::ModelSpec& m : perf::BuiltinModels()) {
    std::string moe = m.is_moe() ? fmt::format("{} experts, top {}, expert ffn {}", m.moe.experts,
                                               m.moe.top_k, m.moe.expert_ffn)
                                 : "-";
    out += fmt::format("{:<22} {:>7.1f}B {:>6} {:>6} {:>6} {:>5} {:>7} {:>8} {:>7} {:>6}  {}\n",
                       m.name, m.TotalParams() / 1e9, m.layers, m.hidden, m.heads, m.kv_heads,
                       m.ffn, perf::FfnKindName(m.ffn_kind), m.vocab, m.seq, moe);
    j.push_back({{"name", m.name},
                 {"params", m.TotalParams()},
                 {"layers", m.layers},
                 {"hidden", m.hidden},
                 {"heads", m.heads},
                 {"kv_heads", m.kv_heads},
                 {"ffn", m.ffn},
                 {"ffn_kind", std::string(perf::FfnKindName(m.ffn_kind))},
                 {"vocab", m.vocab},
                 {"seq", m.seq},
                 {"moe_experts", m.moe.experts},
                 {"moe_top_k", m.moe.top_k},
                 {"moe_expert_ffn", m.moe.expert_ffn}});
  }
  return json ? j.dump(2) + "\n" : out;
}

// The GPU catalogue as the estimator sees it: peaks, HBM and NVLink, and the family whose
// calibrated constants it takes.
std::string FormatGpus(bool json) {
  nlohmann::json j = nlohmann::json::array();
  std::string out =
      fmt::format("{:<10} {:<9} {:>4} {:>10} {:>10} {:>8} {:>9} {:>12}\n", "gpu", "family", "SMs",
                  "bf16 TF/s", "fp8 TF/s", "HBM GiB", "HBM TB/s", "NVLink GB/s");
  for (const topo::GpuSpec& g : topo::BuiltinGpus()) {
    const double bf16 = g.bf16.value() / 1e12, fp8 = g.fp8.value() / 1e12;
    const double hbm_tbps = g.hbm_bandwidth.value() / 1e12;
    const double nvlink = g.nvlink_per_direction.value() / 1e9;
    out += fmt::format("{:<10} {:<9} {:>4} {:>10.0f} {:>10.0f} {:>8.1f} {:>9.2f} {:>12.0f}\n",
                       g.name, topo::GpuFamilyName(g.family), g.sm_count, bf16, fp8, ToGiB(g.hbm),
                       hbm_tbps, nvlink);
    j.push_back({{"name", g.name},
                 {"family", std::string(topo::GpuFamilyName(g.family))},
                 {"sm_count", g.sm_count},
                 {"bf16_tflops", bf16},
                 {"fp8_tflops", fp8},
                 {"hbm_gib", ToGiB(g.hbm)},
                 {"hbm_tbytes_per_s", hbm_tbps},
                 {"nvlink_gbytes_per_s_per_direction", nvlink}});
  }
  return json ? j.dump(2) + "\n" : out;
}

void Bind(CLI::App* c, int& exit_code, const std::shared_ptr<PlanOptions>& o,
          Status (*fn)(const PlanOptions&)) {
  c->callback([o, fn, &exit_code] {
    Status st = fn(*o);
    if (!st.ok()) {
      PrintError(st);
      exit_code = st.code() == StatusCode::kFailedPrecondition ? 3 : 2;
    }
  });
}

}  // namespace

void AddProfileOption(CLI::App* cmd) {
  cmd->add_option_function<std::string>(
      "--profile",
      [](const std::string& path) {
        Status st = perf::InstallProfileFile(path);
        if (!st.ok()) throw CLI::ValidationError("--profile", st.ToString());
      },
      "System profile YAML (baton plan calibrate) for the planner's estimates");
}

void RegisterPlanCommand(CLI::App& app, int& exit_code) {
  CLI::App* plan =
      app.add_subcommand("plan", "Parallelisation planner: estimate, search, validate, launch");
  plan->require_subcommand(1);

  auto est_opts = std::make_shared<PlanOptions>();
  CLI::App* est = plan->add_subcommand("estimate", "Estimate one plan: step time, MFU, memory");
  AddModelOptions(est, est_opts.get());
  AddSystemOptions(est, est_opts.get());
  AddPlanOptions(est, est_opts.get());
  est->add_flag("--json", est_opts->json, "JSON output");
  Bind(est, exit_code, est_opts, RunEstimate);

  auto search_opts = std::make_shared<PlanOptions>();
  CLI::App* search = plan->add_subcommand("search", "Search every plan; print the top-k");
  AddModelOptions(search, search_opts.get());
  AddSystemOptions(search, search_opts.get());
  search->add_option("--top", search_opts->top, "Plans to keep")->capture_default_str();
  search->add_option("--threads", search_opts->threads, "Worker threads (0 = every core)")
      ->capture_default_str();
  search->add_option("--objective", search_opts->objective, "time or mfu")->capture_default_str();
  search->add_option("--html", search_opts->html, "Write a self-contained HTML report");
  search->add_flag("--json", search_opts->json, "JSON output");
  search->add_flag("--no-progress", search_opts->no_progress, "No progress bar");
  search->add_option("--tp", search_opts->tp_list, "Restrict tp to a comma list");
  search->add_option("--pp", search_opts->pp_list, "Restrict pp to a comma list");
  search->add_option("--cp", search_opts->cp_list, "Restrict cp to a comma list");
  search->add_option("--ep", search_opts->ep_list, "Restrict ep to a comma list");
  search->add_option("--mbs", search_opts->mbs_list, "Restrict mbs to a comma list");
  search->add_option("--vp", search_opts->vp_list, "Restrict vp to a comma list");
  search->add_option("--zero", search_opts->zero_list, "Restrict ZeRO stages to a comma list");
  search->add_option("--recompute", search_opts->recompute_list,
                     "Restrict recompute to a comma list of none, selective, full, ops, mlp");
  search->add_flag("--even-pp", search_opts->even_pp, "Only pp values that divide the layers");
  Bind(search, exit_code, search_opts, RunSearch);

  auto list_opts = std::make_shared<PlanOptions>();
  CLI::App* models = plan->add_subcommand("models", "List the model catalogue with its shapes");
  models->add_flag("--json", list_opts->json, "JSON output");
  models->callback([list_opts] { fmt::print("{}", FormatModels(list_opts->json)); });
  CLI::App* gpus = plan->add_subcommand("gpus", "List the GPU catalogue with its figures");
  gpus->add_flag("--json", list_opts->json, "JSON output");
  gpus->callback([list_opts] { fmt::print("{}", FormatGpus(list_opts->json)); });

  auto val_opts = std::make_shared<PlanOptions>();
  CLI::App* val = plan->add_subcommand("validate", "Compare the estimator with published runs");
  val->add_option("--runs", val_opts->runs_file,
                  "Tables of runs, comma-separated (default: the dev tables runs.csv and "
                  "runs-2024.csv in the data folder)");
  val->add_option("--data", val_opts->data_dir,
                  "The data folder (default: $BATON_DATA_DIR, else the source tree's "
                  "data/published, found from any directory)");
  val->add_option("--cv", val_opts->cv,
                  "'source', 'stack' or 'source,stack': leave-one-source-out or "
                  "leave-one-stack-out cross-validation of `plan calibrate`, with the band's "
                  "coverage of the held-out rows");
  val->add_option("--attention", val_opts->attention_file,
                  "Attention kernel table for --cv (default: attention.csv in the data folder)");
  val->add_option("--profile", val_opts->profile, "System profile YAML (default: built-in)");
  val->add_flag("--json", val_opts->json, "JSON output");
  Bind(val, exit_code, val_opts, RunValidate);

  auto cal_opts = std::make_shared<PlanOptions>();
  CLI::App* cal = plan->add_subcommand(
      "calibrate", "Fit the estimator's constants to measured runs; write a system profile");
  cal->add_option("--runs", cal_opts->runs_file,
                  "Tables of measured runs, comma-separated (runs.csv's columns; default: the "
                  "dev tables)");
  cal->add_option("--data", cal_opts->data_dir, "The data folder for the default tables");
  cal->add_option("--attention", cal_opts->attention_file,
                  "Attention kernel table to fit the attention curve on (data/published/"
                  "attention.csv)");
  cal->add_option("--profile", cal_opts->profile, "Profile to start from (default: built-in)");
  cal->add_option("--families", cal_opts->families,
                  "Only fit these GPU families (comma list: ampere,hopper,blackwell)");
  cal->add_flag("--no-bands", cal_opts->no_bands,
                "Skip the cross-validation that sets the uncertainty bands (faster)");
  cal->add_option("--out", cal_opts->out_file,
                  "Profile YAML to write (required unless --collectives)");
  cal->add_option("--collectives", cal_opts->collectives,
                  "nccl-tests outputs, comma-separated, one run per file (OP=FILE names the "
                  "collective where the output does not): fit the fabric's collective terms "
                  "and print them with the error per size");
  Bind(cal, exit_code, cal_opts, RunCalibrate);

  auto launch_opts = std::make_shared<PlanOptions>();
  CLI::App* launch = plan->add_subcommand(
      "launch", "Hostfile, torchrun lines, Megatron flags and rank map for a placement");
  AddModelOptions(launch, launch_opts.get());
  AddSystemOptions(launch, launch_opts.get());
  AddPlanOptions(launch, launch_opts.get());
  launch
      ->add_option("--placement", launch_opts->placement,
                   "compact, or scattered[:N] (every N-th node)")
      ->capture_default_str();
  launch->add_option("--master-port", launch_opts->master_port, "torchrun master port")
      ->capture_default_str();
  launch->add_option("--hostfile", launch_opts->hostfile_out, "Also write the hostfile here");
  launch->add_flag("--json", launch_opts->json, "JSON output");
  Bind(launch, exit_code, launch_opts, RunLaunch);
}

}  // namespace baton::cli
