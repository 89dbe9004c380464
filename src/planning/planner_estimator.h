// PlannerEstimator: the performance planner (src/perf) behind the scheduler's StepTimeEstimator
// interface (src/sched/framework/estimator.h). A job with has_plan carries in GangJob::plan_key a
// key this object handed out for one (model, plan, training) on its cluster; Slowdown() is the
// plan's step time on the job's GPUs over its step time on a compact placement.
//
// Cost. Everything that does not depend on the placement — the SystemSpec for the plan's GPU
// count, the EvalContext and the compact placement's step time — is computed once per key, so a
// Slowdown() call is one perf::SpansForPlacement and one perf::Evaluate.
//
// Thread safety: every method may be called from several threads at once (the simulator runs
// policies on separate threads over one estimator). A key's entry never changes once handed out;
// BestPlan searches under an exclusive lock, so concurrent first asks for one (model, gpus) search
// once, and Slowdown() calls meanwhile wait for it.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <shared_mutex>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"
#include "perf/estimator.h"
#include "perf/model.h"
#include "perf/plan.h"
#include "perf/system.h"
#include "sched/framework/estimator.h"
#include "sched/framework/job.h"
#include "topology/cluster.h"

namespace baton::planning {

class PlannerEstimator final : public sched::StepTimeEstimator {
 public:
  // `cluster` has the structure of the one the scheduler places on (an identical build is
  // enough: only node ids, GPU counts, NVLink domains and the switch tree are read).
  explicit PlannerEstimator(topo::Cluster cluster);
  ~PlannerEstimator() override;

  // Registers `plan` for `model` and `training`; the key goes into GangJob::plan_key (with
  // has_plan). Errors name the bad field: an invalid model, training or plan, a plan larger than
  // the cluster, or one whose compact placement has no positive step time.
  Result<std::uint32_t> AddPlan(perf::ModelSpec model, perf::ParallelPlan plan,
                                perf::TrainingSpec training);

  // The planner's fastest plan (perf::Search over perf::DefaultSearchSpace, by step time) for the
  // catalogue model `model` on `gpus` GPUs of the cluster, with DefaultTraining(); registered and
  // its key returned, or nullopt when no plan is feasible. Searched once per (model, gpus) and
  // cached, misses included; deterministic. Errors: an unknown model, gpus not in 1..the
  // cluster's GPUs.
  Result<std::optional<std::uint32_t>> BestPlan(std::string_view model, int gpus);

  // The training BestPlan assumes: a global batch of about 4M tokens (as `baton plan`), bf16.
  static perf::TrainingSpec DefaultTraining(const perf::ModelSpec& model);

  // PlacementSlowdown of the job's plan on `gpus` (rank order), >= 1 (a placement that beats the
  // compact one counts as 1). 1.0 (no estimate) when the job has no plan, when the GPU count is
  // not the plan's or when a GPU is not in the cluster or listed twice. CHECKs that a job with a
  // plan carries a key from this object.
  double Slowdown(const sched::GangJob& job, std::span<const topo::GpuRef> gpus) override;

  const perf::ModelSpec& model(std::uint32_t key) const;
  const perf::ParallelPlan& plan(std::uint32_t key) const;
  // The plan's step time on the compact placement (the denominator of Slowdown).
  Seconds compact_step(std::uint32_t key) const;
  std::size_t plans() const;
  const topo::Cluster& cluster() const { return cluster_; }

 private:
  struct Entry;
  const Entry& At(std::uint32_t key) const;
  Result<std::uint32_t> AddPlanLocked(perf::ModelSpec model, perf::ParallelPlan plan,
                                      perf::TrainingSpec training);

  topo::Cluster cluster_;         // read only
  mutable std::shared_mutex mu_;  // guards entries_ (the vector, not the entries) and best_
  std::vector<std::unique_ptr<Entry>> entries_;  // by key; stable addresses (EvalContext refs)
  std::map<std::pair<std::string, int>, std::optional<std::uint32_t>, std::less<>> best_;
};

}  // namespace baton::planning
