// The trace-driven cluster simulator: a discrete-event driver of sched::Scheduler. Events (job
// submit, finish, checkpoint, node failure, node repair, scheduler wake-up — grace expiries arrive
// as the scheduler's wake_at) are ordered by (time, sequence) on a simulated clock; every batch
// of events at one instant is reported to Scheduler::RunCycle, whose decisions the simulator
// carries out. It holds no policy: the SchedulerConfig decides everything (see
// sched/framework/presets.h).
//
// A run is a pure function of (config, cluster, trace, seed): no clock reads, no globals.
//
// Job model. A trace job's measured duration is its *work*: the run time on an ideal placement.
// Work advances at 1/slowdown per second, where the slowdown of a placement is
// SimConfig::slowdown for jobs with a plan (the planner's PlacementSlowdown, adapted by the
// caller), else the per-level penalty of the placement's span (SimConfig::level_slowdown). A
// running job checkpoints every checkpoint_interval of wall time; a node failure or preemption
// loses the GPU-time since the last checkpoint (or the attempt's start), and the job pays
// restart_cost before it runs again (the scheduler's eligible_at, or a startup delay when a
// replacement node lets it continue in place).
//
// Elastic jobs (a trace job with a GPU range): work is measured at the size the job asked for,
// and advances in proportion to the GPUs it holds (linear data-parallel scaling: the global batch
// is fixed, so twice the GPUs take half the time per step; the per-level penalty or the planner
// still applies on top). A resize is a restart, as in the daemon: the job loses the GPU-time since
// its last checkpoint and pays restart_cost before it runs at the new size.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/units.h"
#include "sched/framework/config.h"
#include "sched/framework/estimator.h"
#include "sched/framework/job.h"
#include "sched/framework/types.h"
#include "sim/workload/failures.h"
#include "sim/workload/trace.h"
#include "topology/cluster.h"

namespace baton::sched {
class Scheduler;
}  // namespace baton::sched

namespace baton::sim {

// Where backfill's runtime estimate (GangJob::estimated_runtime) comes from.
enum class EstimateSource : std::uint8_t {
  kRequestedElseActual,  // the trace's requested time (SWF), else the measured duration (oracle)
  kActual,               // the measured duration (a perfect user)
  kNone,                 // unknown: backfill treats every running job as unbounded
};

// Slowdown (>= 1) of `job` on `placement`; only called for jobs with has_plan.
using SlowdownFn = std::function<double(
    const sched::GangJob& job, const sched::Placement& placement, const topo::Cluster& cluster)>;

// The next node failure, nullopt when there are no more; an error ends the run.
using FailureSource = std::function<Result<std::optional<FailureEvent>>()>;

struct SimProgress {
  Seconds now;
  std::int64_t submitted = 0;
  std::int64_t ended = 0;  // completed, failed or rejected
  std::int64_t events = 0;
};

struct SimConfig {
  std::string policy = "fifo";  // a label for reports
  sched::SchedulerConfig scheduler;
  // Applied to every trace job.
  Seconds checkpoint_interval = Hours(1);
  Seconds restart_cost = Minutes(5);
  int max_retries = 10;
  Seconds grace_period = Seconds(30);
  // Runs every elastic trace job rigid at its max_gpus instead, its work scaled linearly to that
  // size: the comparison run of `baton sim --elastic-variants`.
  bool rigid_elastic = false;
  EstimateSource estimate = EstimateSource::kRequestedElseActual;
  // Slowdown by the span of a placement, indexed by topo::Level (gpu, node, nvlink-domain, leaf,
  // spine, group, core, none). Defaults: nothing inside an NVLink domain; 5 % for a gang that
  // spans leaves of one spine, 10 % across a Dragonfly group's spines, 15 % through the core:
  // the order of the data-parallel all-reduce share of a step at those bandwidths in the
  // planner's estimates for mid-size dense models. Used when no plan is attached.
  std::array<double, topo::kLevelCount> level_slowdown = {1.0,  1.0,  1.0,  1.0,
                                                          1.05, 1.10, 1.15, 1.15};
  SlowdownFn slowdown;  // may be empty
  // Called on each trace job's spec (by ToGangJob); a driver that knows the job's model attaches
  // a plan here (has_plan and plan_key, as its `estimator` and `slowdown` understand them). May
  // be empty.
  std::function<void(const TraceJob& job, sched::GangJob& spec)> attach_plan;
  // Handed to the scheduler for placement scoring of jobs with a plan (the `planner` score
  // plugin). Not owned; may be null. Must outlive RunSimulation.
  sched::StepTimeEstimator* estimator = nullptr;
  // Checkpoints are always modelled at their exact times (lost work is computed from them). With
  // eager_checkpoints each one is also reported to the scheduler in a cycle of its own; off (the
  // default), they ride along with the next cycle that happens anyway, so the scheduler's view of
  // a job's last checkpoint (used only to price preemption victims) may lag by one inter-event
  // gap. Off cuts the cycles of a long trace by about two thirds.
  bool eager_checkpoints = false;
  // Node failures: drawn from `failure_model` (seeded by `seed`) unless a FailureSource is given.
  bool failures = false;
  FailureModel failure_model = FailureModel::Llama3();
  std::uint64_t seed = 1;
  // Time series resolution for plots (averages are exact, integrated over every event).
  Seconds sample_interval = Hours(1);
  // Called after every scheduling cycle, before its decisions are carried out, with the scheduler
  // (read-only: e.g. for Scheduler::Forecast) and the cycle's time and decisions. Scheduler job
  // ids are 1 + the job's index in submit order (SimResult::jobs). May be empty.
  std::function<void(const sched::Scheduler& scheduler, TimePoint now,
                     const sched::Decisions& decisions)>
      after_cycle;
  // Called every progress_every events (and at the end) when set.
  std::function<void(const SimProgress&)> progress;
  std::int64_t progress_every = 100000;
};

enum class JobOutcome : std::uint8_t {
  kCompleted,
  kFailed,      // the scheduler gave up (retries exhausted after node failures)
  kRejected,    // the scheduler rejected the spec (e.g. larger than the cluster)
  kUnfinished,  // still waiting when nothing else could happen (should not occur)
};
std::string_view JobOutcomeName(JobOutcome o);

struct JobRecord {
  std::string id;
  std::string tenant;
  int gpus = 0;
  double submit_s = 0;
  double first_start_s = -1;  // -1: never started
  double end_s = -1;
  double work_s = 0;         // the trace's duration: run time on an ideal placement
  int preemptions = 0;       // attempts ended because the scheduler evicted the job
  int failure_restarts = 0;  // attempts ended (or restarted in place) by a node failure
  int resizes = 0;           // restarts at a new size (elastic jobs)
  double lost_gpu_s = 0;
  double held_gpu_s = 0;  // GPU-seconds allocated to it, over all attempts
  JobOutcome outcome = JobOutcome::kUnfinished;
  std::string reason;  // for kFailed / kRejected
  double wait_s() const { return first_start_s < 0 ? 0 : first_start_s - submit_s; }
  double jct_s() const { return end_s < 0 ? 0 : end_s - submit_s; }
  // JCT over work, with work bounded below by 10 s (bounded slowdown).
  double slowdown() const;
};

struct Sample {
  double t_s = 0;
  int allocated_gpus = 0;
  double effective_gpus = 0;  // sum over running jobs of gpus / slowdown (0 while restarting)
  int down_gpus = 0;
  int queue = 0;          // jobs waiting
  int fragmentation = 0;  // free healthy GPUs that cannot host the smallest waiting gang
};

struct TenantStats {
  std::string tenant;
  int jobs = 0;
  double gpu_hours = 0;  // work x gpus of completed jobs
  double avg_jct_s = 0;
  double avg_slowdown = 0;
};

struct SimSummary {
  std::string policy;
  int cluster_gpus = 0;
  std::int64_t jobs = 0, completed = 0, failed = 0, rejected = 0, unfinished = 0;
  std::int64_t skipped = 0;  // trace jobs without a duration or GPUs
  double avg_jct_s = 0, median_jct_s = 0, p95_jct_s = 0;
  double avg_wait_s = 0, avg_slowdown = 0;
  double makespan_s = 0;  // from the first submit to the last end
  double allocated_util = 0, effective_util = 0, goodput = 0;
  double avg_queue = 0, avg_fragmentation = 0;
  std::int64_t preemptions = 0;       // evictions by the scheduler (policy), over all jobs
  std::int64_t failure_restarts = 0;  // attempts a node failure ended or restarted in place
  std::int64_t resizes = 0;           // elastic jobs restarted at a new size
  std::int64_t elastic_jobs = 0;      // trace jobs run elastic (0 under rigid_elastic)
  std::int64_t node_failures = 0;
  double lost_gpu_hours = 0;
  double tenant_fairness = 1;  // Jain's index over tenants' average slowdown
  std::int64_t events = 0, cycles = 0;
};

struct SimResult {
  SimSummary summary;
  std::vector<JobRecord> jobs;  // in submit order
  std::vector<Sample> samples;
  std::vector<TenantStats> tenants;  // by name
  TraceStats trace;
};

// Turns a trace job into the scheduler's spec (id assigned by the caller). Task size: a gang that
// fits in one node of `node_gpus` is one task (gpus_per_task 0: the scheduler keeps it on one
// node); a larger one is split into tasks of the largest divisor of its size that is <= the node
// size (64 -> 8 x 8, 12 -> 2 x 6 on 8-GPU nodes). Fractional GPUs (openb) round up to a whole
// GPU. An elastic job keeps the scheduler's task size (gpus_per_task 0) and its range, its step
// left 0 for the engine to fill in (sched::DefaultElasticStep); it gets no plan (the plan fixes
// its GPUs). Under config.rigid_elastic it is a rigid job of max_gpus GPUs instead.
// config.attach_plan, when set, runs last. Errors: no duration, or no GPUs.
Result<sched::GangJob> ToGangJob(const TraceJob& t, const SimConfig& config, int node_gpus);

// Runs the simulation of `trace` on `cluster` until every job has ended. `failures` overrides
// the generated failures when set (and config.failures is then ignored). Errors: the scheduler
// config is invalid, the trace or failure source fails (strict mode, I/O), or the trace yields
// no job that can be simulated (the message counts what was read, malformed and skipped).
Result<SimResult> RunSimulation(topo::Cluster cluster, const SimConfig& config, TraceReader& trace,
                                FailureSource failures = {});

}  // namespace baton::sim
