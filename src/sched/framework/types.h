// The values that cross the scheduler's boundary and its job table: placements, the per-job
// record the scheduler keeps, the events drivers report (what happened) and the decisions the
// scheduler returns (what to do).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/clock.h"
#include "sched/framework/job.h"
#include "sched/framework/plugin_status.h"
#include "topology/cluster.h"
#include "topology/gpu.h"

namespace baton::sched {

struct NodeAlloc {
  topo::NodeId node;
  std::uint64_t mask = 0;  // bit i = local GPU i
  bool operator==(const NodeAlloc&) const = default;
};

// Where a gang runs: nodes in rank order (ranks fill each node's GPUs in index order).
struct Placement {
  std::vector<NodeAlloc> nodes;
  topo::Level span = topo::Level::kNone;  // the lowest level containing every GPU
  int gpus() const;
  bool empty() const { return nodes.empty(); }
  bool operator==(const Placement&) const = default;
};
std::vector<topo::GpuRef> RankOrder(const Placement& p);
// The lowest level containing all of `p`'s nodes.
topo::Level SpanOf(const topo::Cluster& cluster, const std::vector<NodeAlloc>& nodes);

enum class JobPhase : std::uint8_t {
  kSubmitted,    // reported by the driver, not yet admitted
  kPending,      // admitted, waiting for GPUs
  kRunning,      // holds its placement
  kTerminating,  // preempted: keeps its GPUs until evict_deadline, then requeues
};
std::string_view JobPhaseName(JobPhase p);

// The scheduler's record of one job: the spec, its constraints compiled once, and runtime state.
struct JobInfo {
  GangJob spec;
  JobPhase phase = JobPhase::kSubmitted;
  // Compiled at admission.
  int task_gpus = 0;
  std::vector<const topo::GpuSpec*> accepted_gpus;  // empty: any
  ExtendedRequest extended;                         // spec.extended by the cluster's ids
  // Sorted; nodes that went down under the job, where it is not placed again. The list expires
  // (is cleared) when a node is added that leaves the job's other usable nodes (accepted GPU
  // type, allowed attributes) too few GPUs even on an idle cluster: keeping it would strand the
  // job for good (e.g. a whole-cluster gang), so it may return to any node once they are healthy.
  std::vector<topo::NodeId> bad_nodes;
  // Nodes meeting spec.node_requirements (bit per node); null when there are none.
  std::shared_ptr<const std::vector<bool>> allowed_nodes;
  // Runtime.
  Placement placement;
  TimePoint start;
  TimePoint last_checkpoint;
  TimePoint eligible_at;            // not placed before (restart cost after a failure)
  double attained_gpu_seconds = 0;  // service received in earlier runs (LAS)
  int attempts = 0;                 // starts so far
  int failures = 0;                 // attempts ended by a node going down
  int preemptions = 0;              // attempts ended by an eviction (preempt, reclaim)
  // (kept apart so that reports and LAS never count a failure restart as a preemption)
  TimePoint evict_deadline;  // kTerminating: when its GPUs free
  JobId preempted_for;
  bool nominated = false;  // victims are terminating on its behalf
  // Set at admission: 1, 2, ... over the scheduler's life, so never shared by two jobs even when
  // a driver reuses an id (caches that outlive a cycle key on it).
  std::uint64_t admission = 0;
};

using JobTable = std::map<JobId, JobInfo>;

// What one task of `job` takes from its node besides GPUs: the spec's CPU and memory and the
// extended resources compiled at admission (JobInfo::extended).
inline HostResources TaskHost(const JobInfo& job) {
  return {job.spec.cpu_milli, job.spec.memory_mib, job.extended};
}
// The CPU, memory and extended resources `job` holds on one node of its placement: one task's
// worth per task there (a GPU share or a CPU-only job is one task).
HostResources HostOn(const JobInfo& job, const NodeAlloc& a);

// What happened since the last cycle, reported by a driver.
struct Event {
  enum class Kind : std::uint8_t {
    kSubmit,      // job: a new job (submit_time 0 means "now")
    kCancel,      // job_id: remove it wherever it is, freeing its GPUs
    kFinish,      // job_id: it exited (completed, or a preempted victim finished checkpointing)
    kCheckpoint,  // job_id: it completed a checkpoint at `now`
    kNodeHealth,  // node, health: a node's condition changed (see src/health)
    kAdopt,       // job, placement: a job already running there (driver restart, scenarios)
  };
  Kind kind = Kind::kSubmit;
  GangJob job;
  JobId job_id;
  topo::NodeId node;
  topo::NodeHealth health = topo::NodeHealth::kHealthy;
  Placement placement;
  TimePoint adopted_start;
  // kSubmit / kAdopt: nodes that went down under the job before (a driver restoring its state
  // after a restart); it is not placed there again, as if they had gone down under it here.
  std::vector<topo::NodeId> bad_nodes;

  static Event Submit(GangJob job);
  static Event Cancel(JobId id);
  static Event Finish(JobId id);
  static Event Checkpoint(JobId id);
  static Event NodeHealth(topo::NodeId node, topo::NodeHealth health);
  static Event Adopt(GangJob job, Placement placement, TimePoint start);
};

struct Bind {
  JobId job;
  Placement placement;
  bool preferred_met = true;  // the placement honours the preferred topology level
};
struct Preemption {
  JobId victim;
  JobId for_job;
  TimePoint release_at;         // end of the victim's grace period
  double lost_gpu_seconds = 0;  // work since its last checkpoint
};
// Why the scheduler gave up on a job. Drivers branch on this, never on the plugin name.
enum class RejectionKind : std::uint8_t {
  kInvalid,       // refused at admission: the spec (or its tenant's policy) does not allow it
  kUnresolvable,  // admitted, but a plugin says it can never run here (larger than a quota, ...)
  kRetriesExhausted,  // it ran, and failed more often than its max_retries (nodes went down)
};
std::string_view RejectionKindName(RejectionKind k);
struct Rejection {
  JobId job;
  std::string plugin;  // "admission" for spec validation
  std::string reason;
  RejectionKind kind = RejectionKind::kInvalid;
};
struct Requeue {
  JobId job;
  std::string reason;
  double lost_gpu_seconds = 0;
};
// A running gang keeps going on `placement`: the down node's tasks move to `new_node` (restart
// from the last checkpoint, same ranks).
struct Replacement {
  JobId job;
  topo::NodeId old_node;
  topo::NodeId new_node;
  Placement placement;
  double lost_gpu_seconds = 0;
};
struct Resize {
  JobId job;
  Placement placement;
};
// A job that stays pending this cycle and why (diagnostics; not an instruction).
struct Waiting {
  JobId job;
  PluginStatus status;
};
struct Timing {
  // "action/<action>", "queue-sort", "placement", "score", "filter/<plugin>" (per filter plugin).
  std::string name;
  double seconds = 0;
  std::int64_t calls = 0;
};

struct Decisions {
  std::vector<Bind> binds;
  std::vector<Preemption> preemptions;
  std::vector<Rejection> rejections;
  std::vector<Requeue> requeues;
  std::vector<Replacement> replacements;
  std::vector<Resize> resizes;
  std::vector<Waiting> waiting;      // empty unless SchedulerOptions::waiting_notes
  std::optional<TimePoint> wake_at;  // call RunCycle again by then even if nothing happens
  std::vector<Timing> timings;       // only when SchedulerOptions::timer is set
};

}  // namespace baton::sched
