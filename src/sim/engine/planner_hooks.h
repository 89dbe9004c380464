// Attaches the performance planner to a simulation: trace jobs whose kind names a pre-training
// model ("pretrain/llama3-70b", as the synthetic workload writes it) get the planner's best plan
// for their gang size on the simulated cluster; their work then advances at 1 / the planner's
// PlacementSlowdown, and the scheduler's `planner` score plugin sees the same estimator. Jobs of
// other kinds, and those whose model has no feasible plan on that many GPUs, keep the per-level
// penalty (SimConfig::level_slowdown).
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <string_view>

#include "planning/planner_estimator.h"
#include "sim/engine/simulator.h"

namespace baton::sim {

// What UsePlanner attached, counted over every job it saw (across runs that share the config).
struct PlanStats {
  std::int64_t with_plan = 0;
  std::int64_t without_plan = 0;        // a pre-training kind whose model/size has no plan
  std::set<std::string> without_which;  // "llama3-405b on 8 GPUs", "x: not in the model catalogue"
};

// The model a trace job's kind names for pre-training: "pretrain/llama3-8b" -> "llama3-8b";
// empty for any other kind.
std::string_view PretrainModel(std::string_view kind);

// Sets config.attach_plan, config.slowdown and config.estimator to use `planner` (whose cluster
// must have the structure of the simulated one). `planner` and `stats` (may be null) must
// outlive every run of `config`; plans are searched on first use and cached in `planner`.
void UsePlanner(planning::PlannerEstimator& planner, SimConfig& config, PlanStats* stats);

}  // namespace baton::sim
