#include "planning/planner_estimator.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "core/check.h"
#include "perf/placement.h"
#include "perf/search.h"

namespace baton::planning {

struct PlannerEstimator::Entry {
  Entry(perf::ModelSpec m, perf::ParallelPlan p, perf::TrainingSpec t, perf::SystemSpec s)
      : model(std::move(m)),
        plan(p),
        training(t),
        system(std::move(s)),
        ctx(model, training, system) {}
  Entry(const Entry&) = delete;
  Entry& operator=(const Entry&) = delete;

  const perf::ModelSpec model;
  const perf::ParallelPlan plan;
  const perf::TrainingSpec training;
  const perf::SystemSpec system;
  const perf::EvalContext ctx;  // refers to the four members above
  double compact_step_s = 0;
};

PlannerEstimator::PlannerEstimator(topo::Cluster cluster) : cluster_(std::move(cluster)) {}
PlannerEstimator::~PlannerEstimator() = default;

perf::TrainingSpec PlannerEstimator::DefaultTraining(const perf::ModelSpec& model) {
  perf::TrainingSpec t;
  t.global_batch = std::max(1, (4 << 20) / std::max(1, model.seq));
  return t;
}

Result<std::uint32_t> PlannerEstimator::AddPlan(perf::ModelSpec model, perf::ParallelPlan plan,
                                                perf::TrainingSpec training) {
  std::unique_lock lock(mu_);
  return AddPlanLocked(std::move(model), plan, training);
}

Result<std::uint32_t> PlannerEstimator::AddPlanLocked(perf::ModelSpec model,
                                                      perf::ParallelPlan plan,
                                                      perf::TrainingSpec training) {
  RETURN_IF_ERROR(perf::ValidateModel(model));
  RETURN_IF_ERROR(perf::ValidateTraining(training));
  RETURN_IF_ERROR(perf::ValidatePlan(model, plan, training, plan.gpus()));
  // As `baton plan` does for a job of this size on this topology.
  ASSIGN_OR_RETURN(perf::SystemSpec system, perf::SystemFromCluster(cluster_, plan.gpus()));
  ASSIGN_OR_RETURN(std::vector<topo::GpuRef> compact, perf::CompactGpus(cluster_, plan.gpus()));
  auto entry = std::make_unique<Entry>(std::move(model), plan, training, std::move(system));
  // The denominator is the compact placement measured exactly as Slowdown() measures any other,
  // so a compact placement scores exactly 1.
  ASSIGN_OR_RETURN(perf::GroupSpans spans,
                   perf::SpansForPlacement(cluster_, compact, entry->plan, entry->system));
  perf::StepEstimate e;
  perf::Evaluate(entry->ctx, entry->plan, entry->plan.gpus(), &spans, &e, /*time_if_oom=*/true);
  if (!(e.step.value() > 0) || !std::isfinite(e.step.value())) {
    return InvalidArgumentError(
        fmt::format("plan: '{}' for {} has no positive step time on a compact placement",
                    perf::PlanToString(entry->plan), entry->model.name));
  }
  entry->compact_step_s = e.step.value();
  entries_.push_back(std::move(entry));
  return static_cast<std::uint32_t>(entries_.size() - 1);
}

Result<std::optional<std::uint32_t>> PlannerEstimator::BestPlan(std::string_view model, int gpus) {
  ASSIGN_OR_RETURN(perf::ModelSpec spec, perf::FindModel(model));
  const int total = cluster_.counts().total;
  if (gpus <= 0 || gpus > total) {
    return InvalidArgumentError(fmt::format("gpus: {} is not in 1..{}", gpus, total));
  }
  // Cached by the catalogue's own name, so aliases ("Llama3-8B", "llama3_8b") share an entry.
  std::pair<std::string, int> key{spec.name, gpus};
  {
    std::shared_lock lock(mu_);
    if (auto it = best_.find(key); it != best_.end()) return it->second;
  }
  std::unique_lock lock(mu_);
  if (auto it = best_.find(key); it != best_.end()) return it->second;  // searched meanwhile
  const perf::TrainingSpec training = DefaultTraining(spec);
  ASSIGN_OR_RETURN(perf::SystemSpec system, perf::SystemFromCluster(cluster_, gpus));
  perf::SearchOptions options;
  options.top_k = 1;
  ASSIGN_OR_RETURN(
      perf::SearchResult r,
      perf::Search(spec, training, system, perf::DefaultSearchSpace(spec, {gpus}), options));
  std::optional<std::uint32_t> found;
  if (!r.top.empty()) {
    ASSIGN_OR_RETURN(std::uint32_t k, AddPlanLocked(spec, r.top[0].plan, training));
    found = k;
  }
  best_.emplace(std::move(key), found);
  return found;
}

std::size_t PlannerEstimator::plans() const {
  std::shared_lock lock(mu_);
  return entries_.size();
}

const PlannerEstimator::Entry& PlannerEstimator::At(std::uint32_t key) const {
  std::shared_lock lock(mu_);
  CHECK(key < entries_.size()) << "plan key " << key << " was not handed out by this estimator";
  return *entries_[key];
}

const perf::ModelSpec& PlannerEstimator::model(std::uint32_t key) const { return At(key).model; }
const perf::ParallelPlan& PlannerEstimator::plan(std::uint32_t key) const { return At(key).plan; }
Seconds PlannerEstimator::compact_step(std::uint32_t key) const {
  return Seconds(At(key).compact_step_s);
}

double PlannerEstimator::Slowdown(const sched::GangJob& job, std::span<const topo::GpuRef> gpus) {
  if (!job.has_plan) return 1.0;
  const Entry& e = At(job.plan_key);
  if (static_cast<int>(gpus.size()) != e.plan.gpus()) return 1.0;
  auto spans = perf::SpansForPlacement(cluster_, gpus, e.plan, e.system);
  if (!spans.ok()) return 1.0;
  perf::StepEstimate placed;
  perf::Evaluate(e.ctx, e.plan, e.plan.gpus(), &*spans, &placed, /*time_if_oom=*/true);
  const double s = placed.step.value() / e.compact_step_s;
  return std::isfinite(s) && s > 1.0 ? s : 1.0;
}

}  // namespace baton::planning
