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

#include <memory>
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
  // Changes nothing in this scheduler (const; the copy is discarded) and is deterministic.
  // Plugins that learn across cycles (the fragmentation model's observed mix, the random
  // placement's generator) start fresh in the copy. Cost: one copy of the state and job table
  // plus one cycle per projected end, at most options.max_cycles (bench/sim/eta_bench.cc).
  // Not thread-safe with RunCycle: call it between cycles, on the driver's thread.
  QueueForecast Forecast(TimePoint now, const ForecastOptions& options = {}) const;
  // What Forecast would say about `job` had it been submitted at `now`, and where it would start:
  // the copy admits it as a Submit event would (its id is replaced by an unused one; a spec the
  // scheduler refuses is InvalidArgument with the scheduler's reason) and the projection stops
  // once it starts or after `max_cycles`. Changes nothing; same cost bound as Forecast.
  Result<WhatIfAnswer> WhatIf(TimePoint now, GangJob job, int max_cycles = 2000) const;

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
  CycleState cycle_;
  TimePoint last_now_;
  std::uint64_t admitted_ = 0;      // JobInfo::admission of the last job admitted
  std::vector<JobId> queue_order_;  // the last pending-queue order (Session::PendingQueue)
};

}  // namespace baton::sched
