// Placement scores (higher is better, 0..100).
//   binpack  prefers placements in fuller leaves (allocated or unavailable share of each node's
//            leaf, averaged over the placement's nodes), so idle leaves stay whole
//   planner  for jobs with a plan: 100 / the StepTimeEstimator's predicted slowdown
#pragma once

#include "sched/framework/estimator.h"
#include "sched/framework/plugin.h"

namespace baton::sched {

class BinpackScorePlugin final : public Plugin, public ScorePlugin {
 public:
  std::string_view Name() const override { return "binpack"; }
  bool Stateless() const override { return true; }
  double Score(const PluginContext& ctx, const JobInfo& job, const Placement& p) override;
};

class PlannerScorePlugin final : public Plugin, public ScorePlugin {
 public:
  explicit PlannerScorePlugin(StepTimeEstimator* estimator) : estimator_(estimator) {}
  std::string_view Name() const override { return "planner"; }
  bool Stateless() const override { return true; }
  double Score(const PluginContext& ctx, const JobInfo& job, const Placement& p) override;

 private:
  StepTimeEstimator* estimator_;  // not owned; may be null (then every placement scores 100)
};

}  // namespace baton::sched
