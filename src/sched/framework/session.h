// Session: one scheduling cycle. It holds the plugin set, the allocation state and the job table
// for the cycle, and offers actions the framework's algorithms: the pending queue in plugin
// order, TryPlace (PreFilter -> Propose under the Filter chain -> Score -> Permit -> allocate in a
// Statement -> Reserve), Bind, Evict and the bookkeeping of decisions. Actions hold algorithms;
// plugins hold policy; the Session is the glue.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "core/clock.h"
#include "sched/framework/cluster_state.h"
#include "sched/framework/config.h"
#include "sched/framework/cycle_state.h"
#include "sched/framework/plugin.h"
#include "sched/framework/registry.h"
#include "sched/framework/statement.h"
#include "sched/framework/types.h"

namespace baton::sched {

template <typename Ext>
struct PluginEntry {
  Plugin* plugin = nullptr;
  Ext* ext = nullptr;
  double weight = 1.0;
};

// The configured plugins, sorted by extension point in configuration order.
struct PluginSet {
  std::vector<std::unique_ptr<Plugin>> owned;
  PluginEntry<QueueSortPlugin> queue_sort;
  // The queue-sort plugin's service bands when it has them (LAS); null ext otherwise.
  PluginEntry<ServiceBandPlugin> bands;
  std::vector<PluginEntry<PreFilterPlugin>> pre_filters;
  std::vector<PluginEntry<FilterPlugin>> filters;
  PluginEntry<PlacementPlugin> placement;
  std::vector<PluginEntry<ScorePlugin>> scores;
  std::vector<PluginEntry<ReservePlugin>> reserves;
  std::vector<PluginEntry<PermitPlugin>> permits;
  std::vector<PluginEntry<VictimSelectionPlugin>> victims;
  std::vector<PluginEntry<GuaranteePlugin>> guarantees;
};

// Builds the plugin set named by `config` from `registry`. Errors: an unknown name, a plugin
// listed twice, no placement plugin, or a factory's own argument error.
Result<PluginSet> BuildPluginSet(const SchedulerConfig& config, const PluginRegistry& registry,
                                 const PluginDeps& deps);

class Session;

// Told, in a projected cycle (Scheduler::WhatIf's reuse of one projection for many what-ifs),
// what a job queued behind every pending job would meet: allocate and backfill call it once they
// have tried every job ahead of it. Real cycles have none (Session::tail_probe() is null).
class TailProbe {
 public:
  virtual ~TailProbe() = default;
  // allocate tried every pending job (none blocked it for room): a job queued last would be
  // tried next, on the allocation state as it is now.
  virtual void AllocateDone(Session& s) = 0;
  // backfill tried every pending job: a job queued last would be tried next, on the allocation
  // state as it is now, kept off the nodes `reserved` holds (per node, the time from which a
  // reservation holds it; nullopt: none) unless its estimated end is no later.
  virtual void BackfillDone(Session& s, std::span<const std::optional<TimePoint>> reserved) = 0;
};

class Session {
 public:
  // `pending` lists the jobs pending at the start of the cycle (ascending id) and `pending_jobs`
  // their records in `jobs` (parallel); `lowest_victim_priority` is the lowest priority of a
  // preemptible running job then (nullopt: none).
  // `queue_order` (may be null; not owned) is the last queue order PendingQueue returned, kept by
  // the caller across cycles: it is the starting point of the next sort (see PendingQueue).
  // `waiting_notes`: whether Wait records notes for Decisions::waiting (false: Wait does nothing).
  Session(TimePoint now, ClusterState* state, JobTable* jobs, const PluginSet* plugins,
          const SchedulerConfig* config, CycleState* cycle, Decisions* out, const Clock* timer,
          std::vector<JobId> pending, std::vector<JobInfo*> pending_jobs,
          std::optional<int> lowest_victim_priority, std::vector<JobId>* queue_order = nullptr,
          bool waiting_notes = true);

  TimePoint now() const { return ctx_.now; }
  const PluginContext& ctx() const { return ctx_; }
  ClusterState& state() { return *state_; }
  JobTable& jobs() { return *jobs_; }
  const PluginSet& plugins() const { return *plugins_; }
  const SchedulerConfig& config() const { return *config_; }
  Decisions& decisions() { return *out_; }

  // Pending jobs eligible now, in queue-sort order (ties by submit time, then id). The order is
  // total, so it does not depend on where the sort starts: it starts from the last order returned
  // (new jobs after it, by id) and skips the sort when that is already in order, which is the
  // common case when nothing but arrivals changed since (one comparison per job instead of a
  // sort).
  std::vector<JobId> PendingQueue();
  // The same queue as the jobs' records (valid until the job is rejected).
  std::vector<JobInfo*> PendingJobs();
  // Jobs that were pending when the cycle started (a superset of those pending now), by id.
  const std::vector<JobId>& pending_at_start() const { return pending_at_start_; }
  std::optional<int> lowest_victim_priority() const { return lowest_victim_priority_; }

  // Tries to place `job` in `stmt`. On success the GPUs are allocated in `stmt` (uncommitted),
  // Reserve plugins have run and `*out` is the placement; the caller either Binds (commit) or
  // calls Unreserve and discards. On failure nothing changed and the status names the plugin.
  // Jobs sharing a GPU (SharesGpu) are placed by the framework itself, best-fit on shared GPUs
  // (see PlaceShare), and allocated with Statement::AllocateShare.
  // `extra` (may be null) further restricts nodes (backfill's reserved nodes). For the failure
  // cache, extra filters come in families (`family` > 0; 0 = no extra filter): within one family
  // and one allocation state, a larger `rank` must never accept a node a smaller rank rejects.
  struct ExtraFilter {
    const NodeFilter* filter = nullptr;
    std::uint64_t family = 0;
    double rank = 0;
  };
  PluginStatus TryPlace(const JobInfo& job, Statement* stmt, const ExtraFilter& extra,
                        Placement* out);
  PluginStatus TryPlace(const JobInfo& job, Statement* stmt, Placement* out) {
    return TryPlace(job, stmt, ExtraFilter{}, out);
  }
  void Unreserve(const JobInfo& job, const Placement& p);
  // Whether `job` could be placed now (TryPlace in a Statement that is then discarded).
  bool FitsNow(const JobInfo& job);
  // Whether every Filter plugin accepts `node` for `job` (for actions that pick nodes
  // themselves, e.g. resize).
  bool PassesFilters(const JobInfo& job, topo::NodeId node);
  // Records that a running job now holds `p` (resize): the caller has already changed the
  // allocation state accordingly.
  void Resize(JobInfo& job, Placement p);

  // Commits `stmt` and records the job as running on `p`.
  void Bind(JobInfo& job, Placement p, Statement* stmt);
  // Notes why a job stays pending this cycle (the last note per job wins); a no-op when the
  // session keeps no notes.
  void Wait(const JobInfo& job, PluginStatus status) {
    if (waiting_notes_) waiting_.emplace_back(job.spec.id, std::move(status));
  }
  // Rejects and forgets the job (frees nothing: call only for jobs holding no GPUs).
  void Reject(JobId id, std::string plugin, std::string reason);
  // Starts a graceful eviction of a running victim on behalf of `for_job`.
  void Evict(JobInfo& victim, const JobInfo& for_job);
  // Lost work if `job` stopped now: GPU-seconds since its last checkpoint (or start).
  double LostGpuSeconds(const JobInfo& job) const;
  void WakeAt(TimePoint t);

  // Adds `seconds` (one call) to the named timer. Names: "action/<action>", "queue-sort",
  // "placement", "score", "filter/<plugin>" (every Filter call of that plugin).
  void AddTiming(std::string_view name, double seconds);
  // Adds `seconds` spent over `calls` calls to the named timer.
  void AddTiming(std::string_view name, double seconds, std::int64_t calls);
  const Clock* timer() const { return timer_; }
  // The projection's observer (see TailProbe); null in real cycles. Not owned.
  TailProbe* tail_probe() const { return tail_probe_; }
  void set_tail_probe(TailProbe* probe) { tail_probe_ = probe; }
  // Whether an action of the cycle reserves for blocked jobs (Action::ReservesForBlockedJobs).
  bool blocked_jobs_reserved() const { return blocked_jobs_reserved_; }
  void set_blocked_jobs_reserved(bool reserved) { blocked_jobs_reserved_ = reserved; }
  // Emits waiting notes and timings into the decisions.
  void Finish();

 private:
  PluginContext ctx_;
  ClusterState* state_;
  JobTable* jobs_;
  const PluginSet* plugins_;
  const SchedulerConfig* config_;
  Decisions* out_;
  const Clock* timer_;
  std::vector<JobId> pending_at_start_;
  std::optional<int> lowest_victim_priority_;
  std::vector<JobInfo*> pending_jobs_;  // parallel to pending_at_start_; null once rejected
  std::vector<JobId>* queue_order_;
  bool waiting_notes_;
  TailProbe* tail_probe_ = nullptr;
  bool blocked_jobs_reserved_ = false;
  // The last PendingJobs result in this cycle: later calls start from it, since the eligible
  // pending jobs only shrink within a cycle (binds, evictions and rejections never make a job
  // pending). Rejected jobs are nulled here.
  std::vector<JobInfo*> queue_cache_;
  bool queue_cached_ = false;
  // Waiting notes in the order given; Finish keeps the last per job still pending.
  std::vector<std::pair<JobId, PluginStatus>> waiting_;
  std::map<std::string, Timing, std::less<>> timings_;
  // Failure cache: a job of the same shape, at the same allocation-state version, fails again
  // when it asks for as many or more GPUs under the same or a more restrictive extra filter (or
  // fails without any extra filter). Used only for jobs whose every filter and placement plugin
  // says DecidedByShape (plugin.h).
  struct ShapeKey {
    int task_gpus;
    int required;
    std::vector<const topo::GpuSpec*> types;
    std::uint64_t family;
    auto operator<=>(const ShapeKey&) const = default;
  };
  struct ShapeFailure {
    int gpus;
    double rank;
    PluginStatus status;
  };
  const PluginStatus* CachedFailure(const ShapeKey& key, int gpus, double rank) const;
  // TryPlace for a job sharing one GPU (gpu_milli / MIG): packs it best-fit onto GPUs already
  // shared the same way, else onto a fresh GPU of the most-used node that fits.
  PluginStatus PlaceShare(const JobInfo& job, Statement* stmt, const NodeFilter* extra,
                          Placement* out);
  // TryPlace for a CPU-only job: best fit on CPU among nodes passing the filters.
  PluginStatus PlaceCpuOnly(const JobInfo& job, Statement* stmt, const NodeFilter* extra,
                            Placement* out);
  std::uint64_t failures_version_ = 0;
  std::map<ShapeKey, std::vector<ShapeFailure>> failures_;
};

}  // namespace baton::sched
