// Scheduler: baton's decision core. Drivers (the simulator, the daemon) report what happened and
// get back what to do:
//
//   Decisions d = scheduler.RunCycle({now, events});
//
// Pure: no I/O, no clock reads (`now` comes in; an optional timer is used only to fill
// Decisions::timings), no globals; the same sequence of inputs gives the same decisions.
//
// The scheduler owns the allocation state (a ClusterState built from the topo::Cluster it is
// given) and the job table; together they are the snapshot a cycle works on, changed only by
// events and by the scheduler's own decisions. A Bind in the returned decisions is already
// reflected in state(): the driver launches it and reports Finish when it exits. A Preemption
// keeps the victim's GPUs until its release_at (or until the driver reports the victim's Finish),
// after which the scheduler frees them and requeues the victim by itself; call RunCycle again at
// wake_at. A node reported down ends its jobs' attempts (requeue from the last checkpoint after
// the job's restart cost, at most max_retries times, never again on that node).
//
// Not thread-safe: one RunCycle at a time.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <span>

#include "core/clock.h"
#include "core/status.h"
#include "sched/framework/cluster_state.h"
#include "sched/framework/config.h"
#include "sched/framework/forecast.h"
#include "sched/framework/registry.h"
#include "sched/framework/session.h"
#include "sched/framework/types.h"
#include "topology/cluster.h"

namespace baton::sched {

class Action;

struct CycleInput {
  TimePoint now;
  std::span<const Event> what_happened;
};

struct SchedulerOptions {
  // Used only to time actions and plugins into Decisions::timings. Not owned; may be null.
  const Clock* timer = nullptr;
  // For placement scoring of jobs with a plan. Not owned; may be null.
  StepTimeEstimator* estimator = nullptr;
  // Plugin table; null means BuiltinPlugins(). Not owned.
  const PluginRegistry* registry = nullptr;
  // Whether Decisions::waiting is filled. A driver that never reads the notes (the simulator)
  // turns this off: building them (a status per pending job per cycle) is a sizeable share of a
  // cycle. Decisions are otherwise the same.
  bool waiting_notes = true;
};

class Scheduler {
 public:
  // Errors: unknown plugin or action names, a bad plugin argument, no placement plugin.
  static Result<std::unique_ptr<Scheduler>> Create(topo::Cluster cluster, SchedulerConfig config,
                                                   SchedulerOptions options = {});
  ~Scheduler();

  // Applies the events in order, then runs the actions. `now` must not go backwards (an earlier
  // `now` is treated as the last one seen).
  Decisions RunCycle(const CycleInput& input);

  // The queue as the scheduler itself would work it off if nothing new arrived and every job
  // ended at its estimate (start + estimated_runtime; a running job already past its estimate
  // ends at `now`, as backfill's reservations assume; a terminating victim at its deadline): a
  // copy of the scheduler (state, job table, freshly built plugins and actions) runs RunCycle at
  // `now` and then at each estimated end or wake-up in turn, and a job's estimated start is the
  // first cycle that binds it. So the estimate comes from the same actions, reservations and
  // plugins as real cycles, and equals the actual start when those assumptions hold (see
  // forecast_test.cc). Kinds and positions are read at `now` (forecast.h). `now` earlier than
  // the last cycle's counts as that.
  //
  // Changes nothing in this scheduler (const; the copy is discarded) and is deterministic. A
  // forecast of the whole queue (options.jobs empty) is kept for WhatIf to share (see there).
  // Plugins that learn across cycles (the fragmentation model's observed mix, the random
  // placement's generator) start fresh in the copy. Cost: one copy of the state and job table
  // plus one cycle per projected end, at most options.max_cycles (bench/sim/eta_bench.cc).
  // Not thread-safe with RunCycle: call it between cycles, on the driver's thread.
  QueueForecast Forecast(TimePoint now, const ForecastOptions& options = {}) const;
  // What Forecast would say about `job` had it been submitted at `now`, and where it would start:
  // the copy admits it as a Submit event would (its id is replaced by an unused one; a spec the
  // scheduler refuses is InvalidArgument with the scheduler's reason) and the projection stops
  // once it starts or after `max_cycles`. Changes nothing in the scheduling state.
  //
  // Cost. The copy runs the cycle at `now` with the job, as Forecast does. The later cycles come,
  // where that is provably the same, from one projection of the queue without the job, kept
  // until the next RunCycle and shared by every what-if until then (also by what-ifs at a later
  // `now` while no estimated end, grace deadline or backoff falls between, and the cycles at
  // both times decided nothing): the job is then only tried, on that projection's allocation
  // state, where allocate and backfill would try it. Provably the same means: the job sorts
  // behind every job in the table under a queue sort with fixed keys (fifo, priority,
  // shortest-first), it cannot preempt (no preempt action, or preempt_by priority and its
  // priority is no higher than any preemptible job's), it takes whole GPUs, no job shares GPUs,
  // the actions are among admit, allocate, backfill and preempt, and the plugins learn nothing
  // across cycles (health, gpu-type, bad-nodes, node-attributes, resources, topology, binpack,
  // planner, lost-work). Then nothing the job does before it starts reaches the jobs ahead of it,
  // and it starts in the first projected cycle in which allocate or backfill would place it.
  // Otherwise, and with `reference`, every projected cycle is run with the job (the reference
  // the reuse is tested against). Both give the same answer (forecast_test.cc); the first
  // what-if after a RunCycle costs about one Forecast (none when a whole-queue Forecast at the
  // same max_cycles left its projection), the following ones one cycle on a copy plus the job's
  // tries (bench/sim/eta_bench.cc). Bound: the shared projection, like the reference, runs at
  // most `max_cycles` cycles (once every queued job has started it goes on, the queue empty,
  // to the last estimated end); a job not placed by then has no start (kBeyondHorizon).
  // Several WhatIf and Forecast calls may run at once (the shared projection is guarded); not
  // with RunCycle.
  Result<WhatIfAnswer> WhatIf(TimePoint now, GangJob job, int max_cycles = 2000,
                              bool reference = false) const;

  // What-ifs answered from a shared projection so far (see WhatIf; tests and benchmarks).
  std::uint64_t whatif_reused() const { return whatif_reused_.load(); }

  const ClusterState& state() const { return state_; }
  const JobTable& jobs() const { return jobs_; }
  const JobInfo* job(JobId id) const;
  const SchedulerConfig& config() const { return config_; }

 private:
  Scheduler(ClusterState state, SchedulerConfig config, SchedulerOptions options, PluginSet plugins,
            std::vector<std::unique_ptr<Action>> actions);
  // The configured plugins (with the tenancy policy's quota plugin) and actions.
  static Result<PluginSet> MakePlugins(const SchedulerConfig& config,
                                       const SchedulerOptions& options);
  static Result<std::vector<std::unique_ptr<Action>>> MakeActions(const SchedulerConfig& config);
  // An independent scheduler in this one's state (see Forecast): no timer, waiting notes on.
  std::unique_ptr<Scheduler> Clone() const;
  // Forecast on `copy` (a Clone, possibly with extra jobs admitted); the placement of job
  // `watch` (if valid), when a projected cycle binds it, goes to `*watched`.
  static QueueForecast Project(Scheduler& copy, TimePoint now, const ForecastOptions& options,
                               JobId watch, Placement* watched);
  // Project in steps (forecast.cc): ProjectStart fills positions, runs the cycle at `now` and
  // reads the kinds (only `watch`'s when `watch_kind_only`); ProjectLoop runs the later cycles.
  struct ProjectionRun;
  static void ProjectStart(Scheduler& copy, TimePoint now, const ForecastOptions& options,
                           JobId watch, Placement* watched, bool watch_kind_only,
                           ProjectionRun* run);
  static void ProjectLoop(Scheduler& copy, int max_cycles, ProjectionRun* run);
  // WhatIf's shared projection of the queue without the asked-for job (forecast.cc).
  struct WhatIfBase;
  std::shared_ptr<const WhatIfBase> BuildWhatIfBase(TimePoint now, int max_cycles) const;
  // Runs `run`'s later cycles on `copy` (a Clone whose cycle at `now` has run, for the whole
  // queue) and keeps them as a WhatIfBase.
  std::shared_ptr<const WhatIfBase> RecordWhatIfBase(std::unique_ptr<Scheduler> copy, TimePoint now,
                                                     int max_cycles, ProjectionRun* run) const;
  // Whether the job `id` in `copy` (a Clone with it admitted) may be answered from a WhatIfBase
  // (see WhatIf).
  static bool WhatIfReusable(const Scheduler& copy, JobId id);
  // Ends `run` for the watched job from `base`: false when the base cannot stand in for `copy`'s
  // later cycles (the job is refused in one); then `copy` and `run` are spoilt.
  static bool FinishFromBase(const WhatIfBase& base, Scheduler& copy, ProjectionRun* run);
  // The pending jobs (ascending id) and their records, as a cycle's Session takes them.
  void CollectPending(std::vector<JobId>* ids, std::vector<JobInfo*>* jobs);
  void Apply(const Event& e, TimePoint now, Decisions* out);
  // Frees a running or terminating job's GPUs and adds its service to attained_gpu_seconds.
  void ReleaseJob(JobInfo& job, TimePoint now);
  void Requeue(JobInfo& job);
  void NodeDown(topo::NodeId node, TimePoint now, Decisions* out);
  // Whether every Filter plugin accepts `node` for `job` (node replacement goes through the same
  // chain as a placement).
  bool PassesFilters(const JobInfo& job, topo::NodeId node, TimePoint now);

  ClusterState state_;
  JobTable jobs_;
  SchedulerConfig config_;
  SchedulerOptions options_;
  PluginSet plugins_;
  std::vector<std::unique_ptr<Action>> actions_;
  // Whether one of actions_ reserves for blocked jobs (Action::ReservesForBlockedJobs).
  bool BlockedJobsReserved() const;
  CycleState cycle_;
  TimePoint last_now_;
  std::uint64_t admitted_ = 0;       // JobInfo::admission of the last job admitted
  std::vector<JobId> queue_order_;   // the last pending-queue order (Session::PendingQueue)
  std::uint64_t epoch_ = 0;          // RunCycles so far: what a WhatIfBase was built on
  TailProbe* tail_probe_ = nullptr;  // given to each cycle's Session (WhatIfBase's recording)
  // The last WhatIfBase (null: none); a cache, not scheduling state, hence mutable.
  mutable std::mutex whatif_mu_;
  mutable std::shared_ptr<const WhatIfBase> whatif_base_;
  mutable std::atomic<std::uint64_t> whatif_reused_{0};
};

}  // namespace baton::sched
