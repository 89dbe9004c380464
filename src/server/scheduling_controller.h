// SchedulingController: the daemon's scheduling loop — the Controller that owns a sched::Scheduler
// and drives it on the system clock. HTTP threads and telemetry enqueue; one controller thread
// turns what happened (submissions, cancellations, node admin changes, telemetry, executor exits)
// into sched::Events, runs Scheduler::RunCycle when something happened or at the decisions'
// wake_at, and applies the decisions: store transitions and events (JobStore), launches and stops
// (Executor).
//
// Plans: a job whose spec has a plan (http/job_spec.h) gets it registered with the controller's
// planning::PlannerEstimator (built over the scheduler's own cluster) and carries the key in
// GangJob::plan_key, so the `planner` score ranks its placements by predicted slowdown and its
// "placed" event says the slowdown of the chosen one. Registration runs on the controller thread
// only (PlannerEstimator::AddPlan must not overlap Slowdown, which RunCycle calls): on
// submission, and for every stored job on Start.
//
// Durability: the store is the truth. A bind is recorded (running, "placed on ... [alloc ...]")
// before the executor launches it; on Start, queued jobs are handed to the scheduler again and
// running jobs are reattached to the executor (and adopted by the scheduler at their recorded
// placement) or, when the executor no longer runs them, requeued. Nothing acknowledged is lost.
//
// Thread safety: the Controller callbacks, Telemetry and the query methods are thread-safe and
// never wait for a cycle. Start and Stop are called once each, by the Server.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <span>
#include <thread>
#include <unordered_map>
#include <variant>
#include <vector>

#include "core/clock.h"
#include "health/health.h"
#include "planning/planner_estimator.h"
#include "sched/framework/scheduler.h"
#include "server/checkpoint_marker.h"
#include "server/controller.h"
#include "server/executors/executor.h"
#include "server/tenant_limits.h"
#include "topology/cluster.h"

namespace baton::server {

struct JobSpec;

// The daemon's scheduler configuration unless one is given: the `daemon` preset, the file
// data/scheduler/daemon.yaml compiled in (sched/framework/presets.h), which `baton sim --policies
// daemon` runs too: the scheduler's default plus the `planner` score (it scores every placement
// of a job without a plan alike, so it ranks only jobs with one).
sched::SchedulerConfig DefaultDaemonSchedulerConfig();

struct SchedulingControllerOptions {
  sched::SchedulerConfig config = DefaultDaemonSchedulerConfig();
  std::vector<health::Rule> health_rules = health::DefaultRules();
  // How often the loop looks at the executor when nothing else wakes it.
  Seconds poll_interval{0.02};
  // A job's MASTER_PORT: the lowest port from the base, below base + 1000, that no other running
  // job of baton uses on the job's rank-0 node.
  int master_port_base = 29500;
  // The checkpoint contract (checkpoint_marker.h, docs/jobs.md): each job gets
  // BATON_CHECKPOINT_DIR = <checkpoint_root>/job-<id>, the same for every attempt, and the loop
  // reads the jobs' markers every checkpoint_poll_interval. Empty: jobs get no checkpoint
  // directory. An absolute path (the ranks may run elsewhere than the daemon's directory).
  std::string checkpoint_root;
  Seconds checkpoint_poll_interval{1};
  // "waiting" events (why a job is not placed) made durable per cycle; the rest show in the API.
  int max_waiting_events_per_cycle = 16;
  // A job the executor reports lost (its node failed, the resource manager preempted it) is
  // requeued at most this many times, then failed.
  int max_lost_requeues = 3;
  // After each cycle the scheduler forecasts every pending job's queue position, estimated
  // start and waiting kind (sched::Scheduler::Forecast), bounded by this many projected cycles
  // and to about 10 % of the loop's time (a forecast that took t is not redone within 10 t; the
  // idle loop makes up a skipped one); 0 turns the forecast off. Its cost shows in
  // baton_scheduler_step_duration_seconds{step="forecast"}.
  int forecast_max_cycles = 500;
  // The scheduling history (sched/history/history.h) kept in the store: the newest this many
  // lines (one per cycle, plus one per daemon start); older ones are deleted as new ones come.
  // 0: no history is recorded. At a few hundred bytes a cycle, 200,000 lines are some 100 MB.
  std::int64_t history_lines = 200'000;
  // The scheduler config's YAML text, recorded with each daemon start in the history so that a
  // replay runs the same config. Empty: `config` is the daemon's default (data/scheduler/
  // daemon.yaml).
  std::string config_yaml;
};

class SchedulingController final : public Controller {
 public:
  // Builds the scheduler (errors: a bad config, plugin or rule). `executor` is owned; `clock` is
  // not and must outlive the controller (the daemon passes a SystemClock).
  static Result<std::unique_ptr<SchedulingController>> Create(topo::Cluster cluster,
                                                              SchedulingControllerOptions options,
                                                              std::unique_ptr<Executor> executor,
                                                              const Clock& clock);
  ~SchedulingController() override;

  Status Start(JobStore& store, Registry& metrics) override;
  void SetLeaderEpoch(std::int64_t epoch) override { leader_epoch_ = epoch; }
  void Stop() override;

  void OnJobSubmitted(const JobRecord& job, JobSpec spec) override;
  void OnJobCancelRequested(const JobRecord& job) override;
  void OnNodeAdminChanged(const NodeAdminState& node) override;
  void OnLeaseRenewed(const JobRecord& job) override;
  Result<WhatIfView> WhatIf(const JobSpec& spec) override;
  Status Telemetry(std::string_view node, const TelemetrySample& sample) override;

  Status CheckTenantPolicy(std::string_view tenant, int priority) const override {
    return options_.config.tenancy.CheckPriority(tenant, priority);
  }
  std::optional<PlacementView> JobPlacement(JobId job) const override;
  std::vector<NodeView> Nodes() const override;
  std::string Topology() const override {
    std::lock_guard lock(snapshot_mu_);
    return topology_summary_;
  }
  Status Admit(const JobSpec& spec) const override;
  ClusterView Cluster() const override;
  std::int64_t StateVersion() const override { return cycles(); }
  Result<perf::SystemSpec> PlanningSystem() const override { return planning_system_; }
  const topo::Cluster* Structure() const override { return admission_cluster_.get(); }
  const std::vector<health::Rule>& HealthRules() const override { return options_.health_rules; }
  std::map<std::string, TenantLimits> TenantLimitsByName() const override {
    return TenantLimitsOf(options_.config);
  }

  // Cycles run so far (for tests).
  std::int64_t cycles() const;

 private:
  struct Submitted {
    // Both, always: a job without its spec would be refused as an empty one.
    Submitted(JobRecord j, JobSpec s) : job(std::move(j)), spec(std::move(s)) {}
    JobRecord job;
    JobSpec spec;  // a new job's, parsed by the API or HandleSubmission; else Resubmit's
  };
  struct CancelRequested {
    JobRecord job;
  };
  struct AdminChanged {
    NodeAdminState node;
  };
  struct TelemetryIn {
    topo::NodeId node;
    TelemetrySample sample;
  };
  struct LeaseRenewed {
    JobId job = 0;
    TimePoint at;  // when the broker's request arrived
  };
  using Input = std::variant<Submitted, CancelRequested, AdminChanged, TelemetryIn, LeaseRenewed>;
  struct Metrics;

  SchedulingController(std::unique_ptr<planning::PlannerEstimator> planner,
                       std::unique_ptr<sched::Scheduler> scheduler,
                       SchedulingControllerOptions options, std::unique_ptr<Executor> executor,
                       const Clock& clock);
  void Enqueue(Input input);
  void Loop();
  // Recomputes forecast_ after a cycle at `now` (see SchedulingControllerOptions), unless the
  // last one was too recent for its cost (then forecast_stale_ is set and the idle loop makes
  // it up). Returns whether it did.
  bool UpdateForecast(TimePoint now);
  Status Reload();
  // Handlers run on the controller thread; they append scheduler events to `events_`.
  void Handle(Submitted& in);
  // A job back in the queue (requeued, preempted, released by its broker) is read again from
  // what the store holds; a spec the store cannot parse fails the job.
  void Resubmit(const JobRecord& job);
  // Fails a job (in state `from`) that cannot be scheduled: "cannot schedule: <why>".
  void FailUnschedulable(JobId id, JobState from, const std::string& why);
  void Handle(CancelRequested& in);
  void Handle(AdminChanged& in);
  // A bind the store refused because a node is cordoned or draining: the store knew of an admin
  // change this controller did not (another writer of the store). Adopts the store's cordons and
  // drains, so that the next cycle does not place on the node again.
  void AdoptStoredCordons();
  void Handle(TelemetryIn& in);
  void Handle(LeaseRenewed& in);
  // Fences every job whose federation lease lapsed by `now`: a running one is stopped (its
  // attempt killed, the job back in the queue), a queued one leaves the scheduler's queue; both
  // are held until the broker renews the lease (or cancels the job). Runs before the executor's
  // exits are read, so that a lapsed attempt's end is never counted.
  void FenceLapsedLeases(TimePoint now);
  void HandleExit(const ExitReport& exit);
  // A job the executor's resource manager asks for (Executor::PollSubmissions): checked and
  // stored as an API submission is (the same checks; the key as idempotency key), then queued
  // like one; the executor hears the job's id or the refusal.
  void HandleSubmission(const Submission& submission);
  void HandleNodeReport(const NodeReport& report);
  void ApplyDecisions(const sched::Decisions& d, TimePoint now);
  // Writes the cycle's inputs and placements to the store's history before they are applied
  // (a write-ahead record: a crash after it starts a new run in the history, whose adoptions
  // carry on from what the store holds). A failed write is logged; the gap it leaves in the
  // cycle numbers makes a replay of that run stop there rather than diverge silently.
  void RecordCycle(TimePoint now, std::span<const sched::Event> events, const sched::Decisions& d);
  // Launches the job's current attempt (attempts_[id]) on `placement`.
  void Launch(JobId id, const sched::Placement& placement, TimePoint now);
  // A free MASTER_PORT on `node` among the jobs that hold GPUs (see the option): the lowest, or
  // for a relaunch the next one after `previous` (the killed attempt's), wrapping around.
  int PickMasterPort(const std::string& node, int previous = 0);
  // Whether the scheduler has the job running (or stopping) on GPUs.
  bool HoldsGpus(JobId id) const;
  // What a job that stops now loses and where it resumes, for its requeue or restart event:
  // "resumes from step 350 (checkpointed by attempt 2); 12 min of work lost".
  std::string ResumeNote(JobId id, TimePoint now) const;
  // Reads the running jobs' checkpoint markers and records the news (every
  // checkpoint_poll_interval).
  void PollCheckpoints(TimePoint now);
  // Reads job `id`'s marker and records it if attempt `attempt` wrote something newer; with
  // `tell_scheduler`, the scheduler hears of it too.
  void PollCheckpoint(JobId id, int attempt, TimePoint now, bool tell_scheduler);
  // Forgets a job that ended (its commands, stages, attempt and checkpoint).
  void ForgetJob(JobId id);
  void SetNodeHealth(topo::NodeId node);
  // The health rules' verdict on a node, worsened by one restored from before a restart.
  topo::NodeHealth HealthVerdict(topo::NodeId node) const;
  // Stores the node's verdict (a healthy one clears the stored entry).
  void PersistHealth(topo::NodeId node, const std::vector<std::string>& active_rules);
  void PublishSnapshot();
  LaunchRequest MakeLaunchRequest(JobId id, const sched::GangJob& spec,
                                  const sched::Placement& placement, TimePoint start) const;
  void Record(const Status& s, JobId id, std::string_view what) const;
  // Stores a running job's new placement (replacement, resize) with an event of `kind`; with
  // `new_attempt`, as the job's next attempt (attempts_ updated, a new MASTER_PORT). `placed_on`
  // are the nodes the job newly takes: the store refuses the change if one of them was drained or
  // cordoned meanwhile (kNodeRefused, with the store's refusal in `refusal`). A job that is no
  // longer running in the store (cancelled or finished since the cycle's snapshot) is kJobEnded:
  // nothing is written, and it must not be launched again.
  enum class PlacementOutcome { kRecorded, kNodeRefused, kJobEnded };
  PlacementOutcome RecordPlacement(JobId id, std::string_view kind, std::string message,
                                   const sched::Placement& placement, bool new_attempt,
                                   TimePoint now, std::vector<std::string> placed_on,
                                   Status* refusal);
  // A running job whose new placement the store refused (RecordPlacement's kNodeRefused):
  // its attempt is ended and it waits in the queue again, as a requeue.
  void RequeueRefused(JobId id, const Status& refusal, TimePoint now);
  // Ends a running job's attempt at once (killed, its GPUs freed) and hands the job back to the
  // queue, recording `kind` with `message` (a requeue counted under `reason`). A leased job whose
  // lease has lapsed stays held (Handle(Submitted)).
  void RequeueNow(JobId id, const std::string& reason, const std::string& kind,
                  const std::string& message);
  // The cluster's ids for stored node names (unknown names are dropped).
  std::vector<topo::NodeId> NodeIds(const std::vector<std::string>& names) const;
  // Registers the spec's plan with planner_ and sets job.has_plan / plan_key. Errors name the
  // field ("plan: ..."). Controller thread only.
  Status AttachPlan(const JobSpec& spec, sched::GangJob& job);
  // The planner's words for a bind of a job with a plan ("; planner: ..."), else empty.
  std::string PlannerNote(const sched::GangJob& job, const sched::Placement& placement);

  const topo::Cluster& cluster() const { return scheduler_->state().cluster(); }

  // Before scheduler_, which holds a pointer to it. Its plans grow with the distinct plans
  // submitted (plan_keys_ shares a key between equal ones).
  std::unique_ptr<planning::PlannerEstimator> planner_;
  std::map<std::string, std::uint32_t> plan_keys_;  // "GPUS PLAN-JSON" -> key; controller thread
  std::unique_ptr<sched::Scheduler> scheduler_;
  SchedulingControllerOptions options_;
  std::unique_ptr<Executor> executor_;
  const Clock& clock_;
  // The cluster's structure for admission (http/admission.h): a private copy nothing mutates.
  std::unique_ptr<const topo::Cluster> admission_cluster_;
  // The scheduler's own validation of the job (sched::ValidateJob) on admission_cluster_, with
  // its field names mapped to the API's. Part of Admit.
  Status CheckJob(const JobSpec& spec) const;
  // The cluster's structure as Cluster() answers it, without allocation; immutable after Create.
  static ClusterView ClusterLayout(const topo::Cluster& c);
  ClusterView layout_;
  Result<perf::SystemSpec> planning_system_ = UnavailableError("not built");  // immutable
  std::unordered_map<std::string, topo::NodeId> node_by_name_;  // immutable after Create
  JobStore* store_ = nullptr;
  std::unique_ptr<Metrics> metrics_;

  // Inbox, filled by any thread.
  std::mutex mu_;
  std::condition_variable wake_;
  std::vector<Input> inbox_;
  bool stopping_ = false;
  std::thread thread_;

  // Controller-thread state.
  health::HealthMonitor health_;
  std::vector<sched::Event> events_;  // for the next cycle
  std::optional<TimePoint> wake_at_;
  std::map<topo::NodeId, topo::NodeHealth> admin_health_;
  // Health verdicts stored by the previous run: they hold until `clean_needed` consecutive clean
  // samples (0: until an uncordon).
  struct RestoredVerdict {
    topo::NodeHealth health = topo::NodeHealth::kHealthy;
    std::vector<std::string> rules;
    int clean_needed = 0;
    int clean_seen = 0;
  };
  std::map<topo::NodeId, RestoredVerdict> restored_health_;
  std::map<topo::NodeId, topo::NodeHealth> executor_health_;  // the resource manager's view
  std::map<topo::NodeId, topo::NodeHealth> told_executor_;    // baton's verdict, as last sent
  std::map<JobId, int> lost_;                                 // kLost requeues per job
  std::map<JobId, std::vector<std::string>> commands_;        // of jobs the scheduler knows
  // The current attempt of each job that was launched (entries of jobs that no longer hold GPUs
  // are ignored, and replaced when the job is placed again).
  struct Attempt {
    int number = 0;  // the store's attempt number, BATON_ATTEMPT
    TimePoint started;
    std::string master_node;
    int master_port = 0;
  };
  std::map<JobId, Attempt> attempts_;
  std::map<JobId, CheckpointRecord> checkpoints_;  // last checkpoint of jobs not yet ended
  CheckpointWatcher checkpoint_watcher_{""};
  TimePoint next_checkpoint_poll_;
  std::map<JobId, std::vector<StageRequest>> stages_;  // of those with inputs to stage
  std::map<JobId, JobId> preempted_by_;                // victim -> preemptor
  std::set<JobId> cancelling_;                         // user cancelled while running
  std::map<JobId, std::string> waiting_reason_;        // last "waiting" event per job
  std::map<JobId, std::string> waiting_now_;           // pending jobs' latest reasons
  // Federation leases (FederationFields::lease_s) of the jobs that have one, not yet ended. A
  // leased job runs only until `until`: the broker's last look plus the lease. Nothing is
  // granted at submission or by a restart (until is then in the past): the job waits, held,
  // for the broker's first look, so that an attempt the broker gave up on never starts.
  struct Lease {
    Seconds length{0};
    TimePoint until;
    bool held = false;  // out of the scheduler's queue, waiting for a renewal
  };
  std::map<JobId, Lease> leases_;
  std::map<sched::JobId, sched::JobForecast> forecast_;  // pending jobs, latest cycle
  bool forecast_stale_ = false;                          // a cycle ran since the last forecast
  std::chrono::steady_clock::time_point next_forecast_;  // not before (bounds its cost)
  // Held by the loop while it works (not while it waits), and by WhatIf: the scheduler and the
  // planner are used by one thread at a time.
  std::mutex work_mu_;
  std::int64_t leader_epoch_ = 0;   // SetLeaderEpoch; 0: no replicas
  std::int64_t history_run_ = 0;    // this start's run in the history
  std::int64_t history_cycle_ = 0;  // cycles recorded in this run

  // Snapshot for queries.
  mutable std::mutex snapshot_mu_;
  std::map<JobId, PlacementView> placements_;
  std::vector<NodeView> nodes_;
  std::string topology_summary_;  // rewritten when the GPU counts change
  topo::GpuCounts summarized_counts_;
  std::map<topo::NodeId, std::vector<std::string>> active_rules_;
  // Each node's latest sample of the fields the health rules read.
  std::map<topo::NodeId, TelemetrySample> signals_;
  std::map<JobId, std::string> job_tenants_;  // of jobs holding GPUs
  std::int64_t cycles_ = 0;
};

// Builds the "[alloc node:0xff,...]" suffix of a "placed" event (for people reading the history)
// and parses it back: only for jobs placed before the store had a placement column (schema v3).
std::string AllocTag(const topo::Cluster& cluster, const sched::Placement& placement);
Result<sched::Placement> ParseAllocTag(const topo::Cluster& cluster, std::string_view message);

// A placement as the store keeps it (node names and GPU masks) and back; the way back checks the
// names against the cluster and the masks against each node's GPUs.
std::vector<PlacedNode> ToStoredPlacement(const topo::Cluster& cluster,
                                          const sched::Placement& placement);
Result<sched::Placement> FromStoredPlacement(const topo::Cluster& cluster,
                                             const std::vector<PlacedNode>& stored);

// The scheduler's view of a stored job spec (http/job_spec.h JSON). Without its plan: that needs
// the controller's planner (has_plan stays false). `time_scale` (Executor::TimeScale) turns the
// spec's estimated runtime into wall time. An elastic spec without step_gpus takes
// sched::DefaultElasticStep on `cluster` (left 0, which admission refuses, when it is null).
Result<sched::GangJob> GangJobFromRecord(const JobRecord& job, double time_scale = 1.0,
                                         const topo::Cluster* cluster = nullptr);
Result<sched::GangJob> GangJobFromSpec(const JobRecord& job, const JobSpec& spec,
                                       double time_scale = 1.0,
                                       const topo::Cluster* cluster = nullptr);

}  // namespace baton::server
