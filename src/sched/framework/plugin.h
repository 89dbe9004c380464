// The scheduler's extension points, one small interface each (after the Kubernetes scheduling
// framework). A plugin is a Plugin plus the extension interfaces it implements; the framework
// finds them with dynamic_cast when it builds the plugin set from the configuration. Each
// interface comment is its contract: when it is called, what each answer means, what it may
// change. Plugins never read a clock, do I/O or touch globals; everything they may look at is in
// PluginContext. The framework stamps the plugin's name on every non-success status.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "core/clock.h"
#include "sched/framework/cluster_state.h"
#include "sched/framework/cycle_state.h"
#include "sched/framework/plugin_status.h"
#include "sched/framework/types.h"

namespace baton::sched {

// What a plugin may look at during a cycle. `state` reflects every decision made so far in the
// cycle (including an open Statement's tentative allocations during Propose / Score / Permit).
struct PluginContext {
  TimePoint now;
  const ClusterState& state;
  const JobTable& jobs;
  CycleState& cycle;
};

class Plugin {
 public:
  virtual ~Plugin() = default;
  virtual std::string_view Name() const = 0;
  // True when every answer depends only on the job, the allocation state and `now`: nothing
  // learnt from the jobs seen, no random draws, no usage counted across jobs. The what-if shares
  // one projection of the queue among its questions only when every configured plugin is (a
  // plugin that does not say so is taken not to be: always correct, only slower).
  virtual bool Stateless() const { return false; }
};

// Orders the pending queue. Called many times per cycle: Less must be a strict weak order,
// cheap, and deterministic (break ties by submit time, then job id). PrepareSort runs before each
// sort of the pending queue: every time an action asks for the queue (so several times a cycle,
// and it sees the placements made earlier in the cycle); it may cache keys for that sort.
// Exactly one per config.
class QueueSortPlugin {
 public:
  virtual ~QueueSortPlugin() = default;
  virtual void PrepareSort(const PluginContext& /*ctx*/) {}
  virtual bool Less(const PluginContext& ctx, const JobInfo& a, const JobInfo& b) const = 0;
  // True when Less reads only what no action changes within a cycle (the pending jobs' specs
  // and their service from earlier runs): the order then holds for the whole cycle and is
  // checked once, not on every PendingJobs call.
  virtual bool OrderFixedWithinCycle() const { return false; }
};

// A queue order by discrete bands of attained service (LAS). `preempt_by: las-band` needs the
// configured queue-sort plugin to be one: a waiting job may evict jobs in a strictly worse band.
// Pure functions of their arguments.
class ServiceBandPlugin {
 public:
  virtual ~ServiceBandPlugin() = default;
  // The band of `gpu_seconds` of attained service (0 = least served).
  virtual int BandOf(double gpu_seconds) const = 0;
  // The band of a job's service from earlier runs (what the queue sorts by).
  int Band(const JobInfo& job) const { return BandOf(job.attained_gpu_seconds); }
};

// Called once per placement attempt, before any node is looked at. Success: go on.
// Unschedulable: not now (quota exhausted, waiting out a restart cost). Unresolvable: never.
// May cache per-job data in the CycleState; must not change anything else.
class PreFilterPlugin {
 public:
  virtual ~PreFilterPlugin() = default;
  virtual PluginStatus PreFilter(const PluginContext& ctx, const JobInfo& job) = 0;
};

// Whether one node may host tasks of `job`. Called per node examined (hot path: no allocation on
// success). Unschedulable / Unresolvable as for PreFilter, for this node only. Must not mutate.
class FilterPlugin {
 public:
  virtual ~FilterPlugin() = default;
  virtual PluginStatus Filter(const PluginContext& ctx, const JobInfo& job, topo::NodeId node) = 0;
  // True when, for `job`, Filter's answer for a node depends only on the node, the allocation
  // state and the job's shape (task GPUs, required topology level, accepted GPU types), never on
  // the rest of the job. Only then does the session take one job's placement failure for the next
  // job of that shape in the same allocation state (asking nothing again); the default, false,
  // asks for every job.
  virtual bool DecidedByShape(const JobInfo& /*job*/) const { return false; }
};

// The framework's filter chain, handed to the placement plugin.
class NodeFilter {
 public:
  virtual ~NodeFilter() = default;
  virtual bool Fits(topo::NodeId node) const = 0;
};

// Proposes up to `max_candidates` complete placements for the whole gang (job.spec.gpus GPUs in
// tasks of job.task_gpus), every node of which passes `filter` and has the GPUs free in
// ctx.state, best first. Success with no candidates is not allowed: say Unschedulable (no room
// now) or Unresolvable (the constraints can never be met) with a reason. Must not mutate.
// Exactly one per config.
class PlacementPlugin {
 public:
  virtual ~PlacementPlugin() = default;
  virtual PluginStatus Propose(const PluginContext& ctx, const JobInfo& job,
                               const NodeFilter& filter, int max_candidates,
                               std::vector<Placement>* out) = 0;
  // True when Propose also places jobs sharing a GPU (SharesGpu: one placement of one node whose
  // mask is the one GPU to share, with room for ShareOn's amount) and CPU-only jobs (CpuOnly:
  // one node, mask 0). Otherwise the framework places those itself (Session::PlaceShare /
  // PlaceCpuOnly). Either way the framework charges CPU and memory (HostOn) after Propose and
  // refuses a candidate whose node lacks them.
  virtual bool PlacesShares() const { return false; }
  // True when Propose's answer depends only on the job, the filter's answers and the allocation
  // state, and a call changes nothing (no random draws, nothing learnt from the jobs it sees).
  // The framework may then leave out calls whose answer it can tell without them (backfill's
  // reservation search starts at the first prefix of ending jobs that frees enough GPUs, reuses
  // its last fitting probe's placement, and keeps a reservation across cycles while it provably
  // stays the search's answer). False keeps every call.
  virtual bool Deterministic() const { return false; }
  // True when, for `job`, a failure of Propose would fail again for any job of the same shape
  // (FilterPlugin::DecidedByShape) asking as many or more GPUs in the same allocation state,
  // through the same filters. The session's failure reuse needs it of the placement plugin too.
  virtual bool DecidedByShape(const JobInfo& /*job*/) const { return false; }
};

// Scores one candidate placement: higher is better, in [0, 100]. The framework multiplies by the
// configured weight and sums; ties keep the placement plugin's order. Must not mutate.
class ScorePlugin {
 public:
  virtual ~ScorePlugin() = default;
  virtual double Score(const PluginContext& ctx, const JobInfo& job, const Placement& p) = 0;
};

// Reserve is called after the gang's GPUs are allocated in the open Statement, to update plugin
// bookkeeping (quota usage) in the CycleState; Unreserve undoes exactly that when the Statement is
// discarded. Neither may fail.
class ReservePlugin {
 public:
  virtual ~ReservePlugin() = default;
  virtual void Reserve(const PluginContext& ctx, const JobInfo& job, const Placement& p) = 0;
  virtual void Unreserve(const PluginContext& ctx, const JobInfo& job, const Placement& p) = 0;
};

// The last word before a placement commits. Success: bind. Anything else: the Statement is
// discarded and the job stays pending with this status. Must not mutate.
class PermitPlugin {
 public:
  virtual ~PermitPlugin() = default;
  virtual PluginStatus Permit(const PluginContext& ctx, const JobInfo& job, const Placement& p) = 0;
};

// Prices evicting a running job `victim` on behalf of `preemptor`: nullopt = not a candidate
// (not preemptible, not lower priority); otherwise a cost, lower evicted first. The preempt action
// then keeps the cheapest set of whole gangs that makes room. Must not mutate.
class VictimSelectionPlugin {
 public:
  virtual ~VictimSelectionPlugin() = default;
  virtual std::optional<double> VictimCost(const PluginContext& ctx, const JobInfo& preemptor,
                                           const JobInfo& victim) = 0;
  // The same price when the preempt action itself decides that `preemptor` outranks `victim`
  // (preempt_by: las-band): nullopt only for a job that may never be evicted (not running, not
  // preemptible). Default: VictimCost.
  virtual std::optional<double> EvictionCost(const PluginContext& ctx, const JobInfo& preemptor,
                                             const JobInfo& victim) {
    return VictimCost(ctx, preemptor, victim);
  }
};

// Tenant guarantees, for the reclaim action: the GPUs `tenant` is guaranteed (nullopt: the plugin
// sets no guarantee for it, so it neither reclaims nor lends). A tenant holding more than its
// guarantee is borrowing, and its jobs may be reclaimed for a tenant within its guarantee.
// Must not mutate.
class GuaranteePlugin {
 public:
  virtual ~GuaranteePlugin() = default;
  virtual std::optional<std::int64_t> Guaranteed(std::string_view tenant) const = 0;
};

}  // namespace baton::sched
