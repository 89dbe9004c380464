// Controller: the plug-in point for the scheduling loop inside the daemon. The HTTP layer records
// what users did in the JobStore and then tells the controller; the controller decides (through
// the scheduling core), acts (through executors) and records the outcome back in the store with
// JobStore::Transition / AppendEvent.
//
// Contract for implementations:
//  * Each call comes after the change it reports is durable in the store.
//  * Calls arrive on HTTP worker threads, possibly concurrently: implementations must be
//    thread-safe and must not block (enqueue and return); the client's response waits for them.
//  * Jobs that were already in the store when the daemon started are not announced: the
//    controller reads them (JobStore::List) when it starts.
//  * The query methods (JobPlacement, Nodes, Topology, PlanningSystem) and Telemetry may also be
//  called from HTTP
//    threads at any time; they answer from a snapshot and must not block on a scheduling cycle.
//  * Lifecycle: the Server calls Start once, after opening the store and before serving, and
//    Stop once, after the last request finished and before closing the store.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/clock.h"
#include "core/status.h"
#include "health/health.h"
#include "perf/system.h"
#include "server/http/job_spec.h"
#include "server/metrics.h"
#include "server/store/job_store.h"
#include "topology/cluster.h"

namespace baton::server {

// One node's telemetry sample: DCGM field name -> value (see health/health.h).
using TelemetrySample = std::map<std::string, double, std::less<>>;

// Where a running job sits, as the API shows it.
struct PlacementView {
  struct NodeGpus {
    std::string node;
    std::vector<int> gpus;  // local indices
  };
  std::vector<NodeGpus> nodes;  // in rank order
  std::string level;            // the lowest topology level containing the gang ("leaf", ...)
  std::string phase;            // the scheduler's phase ("pending", "running", "terminating")
  std::string waiting;          // pending: why it is not placed yet ("topology: no leaf has ...")
  // Pending: the scheduler's forecast (sched::Scheduler::Forecast) as of the latest cycle.
  int queue_position = 0;                    // 1-based place in the queue; 0: none
  std::optional<TimePoint> estimated_start;  // nullopt: unknown
  std::string waiting_kind;                  // sched::WaitingKindName ("quota", ...); empty: none
  // A federation broker's job (`baton federate`): the site it was dispatched to, the job's id
  // there and its state as the site last reported it. Empty / 0 elsewhere.
  std::string site;
  std::int64_t site_job = 0;
  std::string site_state;
};

// A site as a federation broker sees it (GET /api/v1/sites).
struct SiteView {
  std::string name;
  std::string url;
  std::vector<std::string> regions;
  bool healthy = false;              // its /healthz answered within the broker's site timeout
  std::optional<TimePoint> last_ok;  // its last healthy answer
  std::string last_error;            // why the last call failed; empty: it did not
  int jobs_in_flight = 0;            // broker jobs dispatched there, not finished
  std::optional<TimePoint> last_answer_at;  // its last what-if answer ...
  std::string last_answer;                  // ... in one line
};

// The scheduler's answer for a job not submitted (POST /api/v1/whatif).
struct WhatIfView {
  int queue_position = 0;                    // where it would enter the queue (1-based)
  std::optional<TimePoint> estimated_start;  // nullopt: unknown
  std::string waiting_kind;                  // why it would wait; "starting": it would fit now
  std::string gpu_type;                      // of the placement it would get; empty: unknown
  std::vector<PlacementView::NodeGpus> nodes;
  std::string level;                  // the lowest level containing that placement
  std::optional<double> step_time_s;  // the planner's step time there (jobs with a plan)
  int free_gpus = 0;                  // the site's GPUs unallocated now (least-loaded routing)
  int total_gpus = 0;                 // and all its GPUs
};

// A node as the API shows it: health from telemetry and admin state, and what is allocated.
struct NodeView {
  std::string name;
  std::string health;                     // "healthy", "suspect", "draining", "down"
  std::vector<std::string> active_rules;  // health rules currently matching
  int gpus = 0;
  int gpus_allocated = 0;
  std::vector<JobId> jobs;
  // The node's latest telemetry sample, of the fields the health rules read; empty until one
  // arrives.
  TelemetrySample signals;
};

// A tenant's limits as the scheduler's configuration states them (for the dashboard's tenants
// view): the tenancy policy's hard quota, the `quota` plugin's guarantee and borrowing, the `drf`
// queue's weight. Absent: not configured (unlimited; weight 1).
struct TenantLimits {
  std::optional<std::int64_t> quota_gpus;
  std::optional<std::int64_t> guaranteed_gpus;
  std::optional<std::int64_t> borrowable_gpus;
  double weight = 1;
};

// The cluster as the dashboard draws it: every node with its switch path (top tier first), its
// multi-node NVLink domain (an NVL72 rack; empty for a node's own board), and which job holds
// each GPU (0: free), plus the tenant of each job that holds GPUs.
struct ClusterView {
  struct Node {
    std::string name;
    std::vector<std::string> path;
    std::string domain;
    std::string health;
    std::vector<JobId> gpu_jobs;
  };
  std::string name;
  std::vector<Node> nodes;
  std::map<JobId, std::string> job_tenants;
};

class Controller {
 public:
  virtual ~Controller() = default;

  // Reads the store's state (jobs queued or running when the daemon starts) and starts working.
  // `metrics` (not owned, outlives the controller) takes the controller's metrics.
  virtual Status Start(JobStore& /*store*/, Registry& /*metrics*/) { return Status::Ok(); }
  // Called before Start by a daemon that leads replicas on one store (server/store/leader_lease.h)
  // with its lease epoch: launches carry it and executors fence older ones (Executor::TakeOver),
  // and Stop leaves running work for the next leader instead of stopping it.
  virtual void SetLeaderEpoch(std::int64_t /*epoch*/) {}
  // Stops working; nothing is called on the store afterwards.
  virtual void Stop() {}

  // A new job was stored in kQueued (not called for idempotent replays). `spec` is the job spec
  // as the API parsed and admitted it (tenant set; `job.spec_json` is its canonical form): the
  // controller takes it as it is and does not parse the stored text again.
  virtual void OnJobSubmitted(const JobRecord& job, JobSpec spec) = 0;

  // A user cancelled a job. `job.state` is kCancelled when it was still queued (nothing to stop),
  // or kCancelling when it was running: the controller must stop it and then move it to
  // kCancelled.
  virtual void OnJobCancelRequested(const JobRecord& job) = 0;

  // An admin cordoned, drained or uncordoned (kActive) a node.
  virtual void OnNodeAdminChanged(const NodeAdminState& node) = 0;
  // A federation broker looked at `job` (GET by a broker principal): if the job's spec holds a
  // federation lease (FederationFields::lease_s), the lease runs again from now. Returns at once.
  virtual void OnLeaseRenewed(const JobRecord& /*job*/) {}

  // Health telemetry for a node (by name). kNotFound for an unknown node; kUnavailable when no
  // scheduler runs. Enqueued: the node's condition changes at the next cycle.
  virtual Status Telemetry(std::string_view /*node*/, const TelemetrySample& /*sample*/) {
    return UnavailableError("no scheduler is running");
  }

  // The tenancy policy's admission check, for the API to run before it stores a job (400 naming
  // the field on error): InvalidArgument "field 'priority': tenant 't' may use priorities
  // 0..5, job asks for 10". Thread-safe (the policy is immutable). OK without a scheduler.
  virtual Status CheckTenantPolicy(std::string_view /*tenant*/, int /*priority*/) const {
    return Status::Ok();
  }

  // Snapshots for the API; empty / nullopt without a scheduler.
  virtual std::optional<PlacementView> JobPlacement(JobId /*job*/) const { return std::nullopt; }
  virtual std::vector<NodeView> Nodes() const { return {}; }
  // A human-readable summary of the cluster as of the latest snapshot (its GPU counts agree with
  // Nodes()); empty without a scheduler.
  virtual std::string Topology() const { return {}; }
  // Admission: OK when `spec` could ever run on this cluster (http/admission.h: GPUs, type,
  // topology level; and the scheduler's own job validation: a task above every node's GPUs, CPU
  // or memory, a GPU share); otherwise kInvalidArgument whose field() is the API field at fault
  // (the job spec's names, never the scheduler's). Called from HTTP threads before the job is
  // stored; must not block. Without a scheduler there is no cluster to check: OK.
  virtual Status Admit(const JobSpec& /*spec*/) const { return Status::Ok(); }
  // What the scheduler would do with `spec` (validated, tenant set) were it submitted now:
  // sched::Scheduler::WhatIf on the live state. Changes nothing; may wait for the scheduling
  // cycle in progress. InvalidArgument for a spec the scheduler or planner refuses.
  virtual Result<WhatIfView> WhatIf(const JobSpec& /*spec*/) {
    return UnavailableError("no scheduler is running");
  }
  // The cluster with its allocation; empty without a scheduler.
  virtual ClusterView Cluster() const { return {}; }
  // Grows whenever the scheduler's view of jobs or nodes may have changed (each published
  // snapshot), so a watcher knows when to read again. 0 without a scheduler.
  virtual std::int64_t StateVersion() const { return 0; }
  // The cluster as the planner sees it (GPU type, network tiers; gpus = all of them), for the
  // plan endpoints; an error when there is no cluster or the planner cannot describe it.
  virtual Result<perf::SystemSpec> PlanningSystem() const {
    return UnavailableError("no scheduler is running (no cluster to plan on)");
  }
  // The cluster's structure (switch tree, NVLink and failure domains; its allocation state is not
  // kept up to date), immutable and alive as long as the controller: for pricing a placement with
  // the perf model on an HTTP thread and for grouping nodes by rack. Null without a scheduler.
  virtual const topo::Cluster* Structure() const { return nullptr; }
  // The rules telemetry is judged by (their conditions explain a node's verdict). Immutable.
  virtual const std::vector<health::Rule>& HealthRules() const {
    static const std::vector<health::Rule> kNone;
    return kNone;
  }
  // Per tenant (by name; "*": every tenant not listed) what the scheduler's configuration says
  // about it. Immutable; empty without a scheduler or without any tenant configured.
  virtual std::map<std::string, TenantLimits> TenantLimitsByName() const { return {}; }
  // The sites of a federation broker; nullopt for a daemon that is not one (404).
  virtual std::optional<std::vector<SiteView>> Sites() const { return std::nullopt; }
};

// Does nothing: jobs stay queued. The daemon's default until a scheduler is wired in.
class NullController final : public Controller {
 public:
  void OnJobSubmitted(const JobRecord&, JobSpec) override {}
  void OnJobCancelRequested(const JobRecord&) override {}
  void OnNodeAdminChanged(const NodeAdminState&) override {}
};

}  // namespace baton::server
