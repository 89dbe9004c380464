// StepTimeEstimator: how the scheduler sees the performance planner (src/perf) without depending
// on it. planning::PlannerEstimator (src/planning) adapts the planner to this interface.
#pragma once

#include <span>

#include "sched/framework/job.h"
#include "topology/cluster.h"

namespace baton::sched {

class StepTimeEstimator {
 public:
  virtual ~StepTimeEstimator() = default;
  // Predicted step time of `job` (which has_plan) on `gpus` (rank order), relative to the same
  // plan on an ideal placement: 1.0 = no slowdown, 1.25 = 25 % slower. Must be deterministic,
  // must not block, and must return a finite value >= 1 (the scheduler clamps otherwise).
  virtual double Slowdown(const GangJob& job, std::span<const topo::GpuRef> gpus) = 0;
};

}  // namespace baton::sched
