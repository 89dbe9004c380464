#include "sim/engine/planner_hooks.h"

#include <fmt/format.h>

#include <vector>

#include "perf/model.h"

namespace baton::sim {

std::string_view PretrainModel(std::string_view kind) {
  constexpr std::string_view kPrefix = "pretrain/";
  if (kind.size() <= kPrefix.size() || kind.substr(0, kPrefix.size()) != kPrefix) return {};
  return kind.substr(kPrefix.size());
}

void UsePlanner(planning::PlannerEstimator& planner, SimConfig& config, PlanStats* stats) {
  config.estimator = &planner;
  config.attach_plan = [&planner, stats](const TraceJob& t, sched::GangJob& spec) {
    const std::string_view model = PretrainModel(t.kind);
    if (model.empty()) return;
    // An unknown model or an impossible size is a job without a plan, not a failed run.
    auto key = planner.BestPlan(model, spec.gpus);
    if (key.ok() && key->has_value()) {
      spec.has_plan = true;
      spec.plan_key = **key;
      if (stats != nullptr) ++stats->with_plan;
      return;
    }
    if (stats != nullptr) {
      ++stats->without_plan;
      if (key.ok()) {
        stats->without_which.insert(fmt::format("{} on {} GPUs", model, spec.gpus));
      } else if (!perf::FindModel(model).ok()) {
        stats->without_which.insert(fmt::format("{}: not in the model catalogue", model));
      } else {
        stats->without_which.insert(
            fmt::format("{} on {} GPUs: {}", model, spec.gpus, key.status().message()));
      }
    }
  };
  config.slowdown = [&planner](const sched::GangJob& job, const sched::Placement& placement,
                               const topo::Cluster&) {
    const std::vector<topo::GpuRef> gpus = sched::RankOrder(placement);
    return planner.Slowdown(job, gpus);
  };
}

}  // namespace baton::sim
