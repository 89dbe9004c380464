// `baton plan estimate` (one plan) and `baton plan search` (every plan, the top k).
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <thread>

#include "cli/plan/options.h"
#include "core/strings.h"
#include "perf/report.h"
#include "perf/stack.h"

namespace baton::cli::plan {
namespace {

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

}  // namespace

Status RunEstimate(const PlanOptions& o) {
  ASSIGN_OR_RETURN(perf::ModelSpec model, MakeModel(o));
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

Status RunSearch(const PlanOptions& o) {
  ASSIGN_OR_RETURN(perf::ModelSpec model, MakeModel(o));
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

}  // namespace baton::cli::plan
