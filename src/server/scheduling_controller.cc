#include "server/scheduling_controller.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <limits>
#include <set>

#include "core/check.h"
#include "core/log.h"
#include "core/strings.h"
#include "sched/framework/presets.h"
#include "sched/history/history.h"
#include "server/http/admission.h"
#include "server/http/job_spec.h"
#include "server/scheduling_controller_internal.h"
#include "topology/io/cluster_yaml.h"
#include "topology/summary.h"

namespace baton::server {

sched::SchedulerConfig DefaultDaemonSchedulerConfig() {
  // data/scheduler/daemon.yaml, compiled in; sched's presets test parses every preset, so a
  // failure here is a build that shipped a broken file.
  Result<sched::SchedulerConfig> c = sched::PolicyPreset("daemon");
  CHECK(c.ok()) << c.status().ToString();
  return *std::move(c);
}

Result<std::unique_ptr<SchedulingController>> SchedulingController::Create(
    topo::Cluster cluster, SchedulingControllerOptions options, std::unique_ptr<Executor> executor,
    const Clock& clock) {
  if (executor == nullptr) return InvalidArgumentError("an executor is required");
  RETURN_IF_ERROR(health::ValidateRules(options.health_rules));
  std::string summary = topo::Summarize(cluster);
  Result<perf::SystemSpec> planning = perf::SystemFromCluster(cluster);
  // The planner's own copy of the cluster: the scheduler's copy changes as jobs come and go, and
  // the planner reads only the structure.
  auto planner = std::make_unique<planning::PlannerEstimator>(cluster.Clone());
  sched::SchedulerOptions sopts;
  sopts.timer = &clock;
  sopts.estimator = planner.get();
  ASSIGN_OR_RETURN(std::unique_ptr<sched::Scheduler> scheduler,
                   sched::Scheduler::Create(std::move(cluster), options.config, sopts));
  auto c = std::unique_ptr<SchedulingController>(new SchedulingController(
      std::move(planner), std::move(scheduler), std::move(options), std::move(executor), clock));
  c->topology_summary_ = std::move(summary);
  c->summarized_counts_ = c->cluster().counts();
  c->admission_cluster_ = std::make_unique<const topo::Cluster>(c->cluster().Clone());
  c->planning_system_ = std::move(planning);
  c->layout_ = ClusterLayout(c->cluster());
  return c;
}

// The job spec's name for a sched::GangJob field a refusal names (GangJobFromSpec's mapping).
std::string SpecField(std::string_view gang_field) {
  if (gang_field.starts_with("gpu_types")) return "gpu_type";
  if (gang_field == "gpus_per_task") return "gpus_per_node";
  return std::string(gang_field);
}

Status SchedulingController::CheckJob(const JobSpec& spec) const {
  if (!admission_cluster_) return Status::Ok();
  JobRecord record;
  record.id = 1;
  record.tenant = spec.tenant.value_or("default");
  ASSIGN_OR_RETURN(sched::GangJob job,
                   GangJobFromSpec(record, spec, executor_->TimeScale(), admission_cluster_.get()));
  Status s = sched::ValidateJob(job, *admission_cluster_);
  if (s.ok() || s.field().empty()) return s;
  return InvalidFieldError(SpecField(s.field()), s.reason());
}

SchedulingController::SchedulingController(std::unique_ptr<planning::PlannerEstimator> planner,
                                           std::unique_ptr<sched::Scheduler> scheduler,
                                           SchedulingControllerOptions options,
                                           std::unique_ptr<Executor> executor, const Clock& clock)
    : planner_(std::move(planner)),
      scheduler_(std::move(scheduler)),
      options_(std::move(options)),
      executor_(std::move(executor)),
      clock_(clock),
      health_(options_.health_rules),
      checkpoint_watcher_(options_.checkpoint_root) {
  const topo::Cluster& c = cluster();
  for (std::size_t i = 0; i < c.nodes().size(); ++i) {
    node_by_name_.emplace(c.nodes()[i].name, topo::NodeId(static_cast<std::uint32_t>(i)));
  }
}

SchedulingController::~SchedulingController() { Stop(); }

Status SchedulingController::Start(JobStore& store, Registry& metrics) {
  if (store_ != nullptr) return FailedPreconditionError("the controller was already started");
  // A new leader fences its predecessor's launches before it looks at what runs (Reload).
  if (leader_epoch_ > 0) RETURN_IF_ERROR(executor_->TakeOver(leader_epoch_));
  store_ = &store;
  metrics_ = std::make_unique<Metrics>(metrics);
  // The history's run line goes before Reload's events reach a cycle: a fresh scheduler over
  // the cluster as it is now (no cycle has run), so a replay starts from the same state.
  if (options_.history_lines > 0) {
    const TimePoint now = clock_.Now();
    // Runs are numbered by their start in microseconds: distinct across restarts without a
    // read of the previous run's number.
    history_run_ = std::max<std::int64_t>(1, std::llround(now.since_epoch.value() * 1e6));
    sched::history::Run run{history_run_, now, topo::ExportClusterYaml(cluster()),
                            options_.config_yaml};
    if (Status s = store_->AppendHistory(sched::history::EncodeRun(run), options_.history_lines);
        !s.ok()) {
      LOG_WARN("scheduling history: cannot record this start: {}", s.ToString());
    }
  }
  RETURN_IF_ERROR(Reload());
  PublishSnapshot();
  thread_ = std::thread([this] { Loop(); });
  return Status::Ok();
}

void SchedulingController::Stop() {
  {
    std::lock_guard lock(mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void SchedulingController::Enqueue(Input input) {
  {
    std::lock_guard lock(mu_);
    inbox_.push_back(std::move(input));
  }
  wake_.notify_one();
}

void SchedulingController::OnJobSubmitted(const JobRecord& job, JobSpec spec) {
  Enqueue(Submitted{job, std::move(spec)});
}
void SchedulingController::OnLeaseRenewed(const JobRecord& job) {
  Enqueue(LeaseRenewed{job.id, clock_.Now()});
}
void SchedulingController::OnJobCancelRequested(const JobRecord& job) {
  Enqueue(CancelRequested{job});
}
void SchedulingController::OnNodeAdminChanged(const NodeAdminState& node) {
  Enqueue(AdminChanged{node});
}

Status SchedulingController::Telemetry(std::string_view node, const TelemetrySample& sample) {
  auto it = node_by_name_.find(std::string(node));
  if (it == node_by_name_.end()) {
    return NotFoundError("node " + Printable(node, 64) + " is not in the cluster");
  }
  Enqueue(TelemetryIn{it->second, sample});
  return Status::Ok();
}

void SchedulingController::Record(const Status& s, JobId id, std::string_view what) const {
  if (!s.ok()) LOG_WARN("job {}: {}: {}", id, what, s.ToString());
}

Status SchedulingController::AttachPlan(const JobSpec& spec, sched::GangJob& job) {
  if (!spec.plan) return Status::Ok();
  const int gpus = job.gpus;
  std::string cache_key = fmt::format("{} {}", gpus, spec.plan->json);
  auto it = plan_keys_.find(cache_key);
  if (it == plan_keys_.end()) {
    const perf::JobPlanRequest& r = spec.plan->request;
    std::uint32_t key = 0;
    if (r.plan) {
      Result<std::uint32_t> added = planner_->AddPlan(r.model, *r.plan, r.training);
      if (!added.ok()) return InvalidArgumentError("plan: " + added.status().message());
      key = *added;
    } else {
      Result<std::optional<std::uint32_t>> best = planner_->BestPlan(r.model.name, gpus);
      if (!best.ok()) return InvalidArgumentError("plan: " + best.status().message());
      if (!best->has_value()) {
        return InvalidArgumentError(fmt::format(
            "plan: the planner finds no feasible plan for {} on {} GPUs", r.model.name, gpus));
      }
      key = **best;
    }
    it = plan_keys_.emplace(std::move(cache_key), key).first;
  }
  job.has_plan = true;
  job.plan_key = it->second;
  return Status::Ok();
}

std::string SchedulingController::PlannerNote(const sched::GangJob& job,
                                              const sched::Placement& placement) {
  if (!job.has_plan) return {};
  const std::vector<topo::GpuRef> gpus = sched::RankOrder(placement);
  const double slowdown = planner_->Slowdown(job, gpus);
  const perf::ParallelPlan& p = planner_->plan(job.plan_key);
  std::string plan = fmt::format("tp{} pp{} dp{}", p.tp, p.pp, p.dp);
  if (p.cp > 1) plan += fmt::format(" cp{}", p.cp);
  if (p.ep > 1) plan += fmt::format(" ep{}", p.ep);
  return fmt::format(
      "; planner: {} {} at {:.2f}x the compact placement's step time "
      "({:.2f} s/step)",
      planner_->model(job.plan_key).name, plan, slowdown,
      planner_->compact_step(job.plan_key).value() * slowdown);
}

void SchedulingController::Handle(Submitted& in) {
  const JobSpec& js = in.spec;
  Result<sched::GangJob> spec = GangJobFromSpec(in.job, js, executor_->TimeScale(), &cluster());
  if (spec.ok()) {
    if (Status planned = AttachPlan(js, *spec); !planned.ok()) spec = planned;
  }
  if (!spec.ok()) {
    FailUnschedulable(in.job.id, JobState::kQueued, spec.status().message());
    return;
  }
  commands_[in.job.id] = js.command;
  if (!js.stage.empty()) stages_[in.job.id] = StageRequests(js);
  if (js.federation && js.federation->lease_s > 0) {
    // A leased job enters the queue only while its lease runs (none is granted at submission:
    // the broker's first look grants it).
    Lease& lease = leases_[in.job.id];
    lease.length = Seconds(static_cast<double>(js.federation->lease_s));
    if (lease.until <= clock_.Now()) {
      if (!lease.held) {
        lease.held = true;
        Record(store_->AppendEvent(in.job.id, "held",
                                   "held until the federation broker renews its lease"),
               in.job.id, "hold");
        wake_at_ = clock_.Now();  // a cycle soon, whose snapshot shows it held
      }
      return;
    }
    lease.held = false;
  }
  sched::Event e = sched::Event::Submit(*std::move(spec));
  e.bad_nodes = NodeIds(in.job.bad_nodes);
  events_.push_back(std::move(e));
}

void SchedulingController::Resubmit(const JobRecord& job) {
  Result<JobSpec> js = ParseJobSpec(job.spec_json, BodyFormat::kJson);
  if (!js.ok()) {
    FailUnschedulable(job.id, JobState::kQueued, "stored spec: " + js.status().message());
    return;
  }
  Submitted in{job, *std::move(js)};
  Handle(in);
}

void SchedulingController::FailUnschedulable(JobId id, JobState from, const std::string& why) {
  Record(store_->Transition(id, {{from}, JobState::kFailed, "failed", "cannot schedule: " + why})
             .status(),
         id, "fail");
}

void SchedulingController::HandleSubmission(const Submission& submission) {
  // A refusal's message names its field ("field 'gpus': ..."), and the Status carries it.
  auto refuse = [&](const Status& s) { executor_->Submitted(submission.key, s); };
  Result<JobSpec> spec = ParseJobSpec(submission.spec_json, BodyFormat::kJson);
  if (!spec.ok()) return refuse(spec.status());
  if (!spec->tenant) return refuse(InvalidArgumentError("a submission names no tenant"));
  Result<std::optional<JobRecord>> original =
      store_->FindByIdempotencyKey(*spec->tenant, submission.key);
  if (!original.ok()) return refuse(UnavailableError(original.status().message()));
  if (*original) return executor_->Submitted(submission.key, (*original)->id);
  if (Status admitted = Admit(*spec); !admitted.ok()) return refuse(admitted);
  if (Status allowed = CheckTenantPolicy(*spec->tenant, spec->priority); !allowed.ok()) {
    return refuse(InvalidFieldError("priority", allowed.message()));
  }
  Result<SubmitResult> r =
      store_->Submit({*spec->tenant, spec->name, CanonicalJson(*spec), submission.key});
  if (!r.ok()) return refuse(UnavailableError(r.status().message()));
  executor_->Submitted(submission.key, r->job.id);
  if (r->created) {
    Submitted in{r->job, *std::move(spec)};
    Handle(in);
  }
}

void SchedulingController::Handle(LeaseRenewed& in) {
  auto it = leases_.find(in.job);
  if (it == leases_.end()) return;  // no lease, or the job ended
  Lease& lease = it->second;
  lease.until = std::max(lease.until, in.at + lease.length);
  if (!lease.held || lease.until <= clock_.Now()) return;
  // Held, and renewed: back to the queue if the store still has it queued (a cancel wins).
  Result<JobRecord> stored = store_->Get(in.job);
  if (!stored.ok() || stored->state != JobState::kQueued) return;
  lease.held = false;
  Record(store_->AppendEvent(in.job, "released",
                             "the federation broker renewed its lease: back in the queue"),
         in.job, "release");
  Resubmit(*stored);
}

void SchedulingController::FenceLapsedLeases(TimePoint now) {
  for (auto& [id, lease] : leases_) {
    if (lease.held || lease.until > now) continue;
    const sched::JobInfo* info = scheduler_->job(SchedId(id));
    if (info == nullptr) continue;
    // Already stopping (cancelled, preempted, or its grace is running): it ends anyway.
    if (cancelling_.contains(id) || preempted_by_.contains(id) ||
        info->phase == sched::JobPhase::kTerminating) {
      continue;
    }
    lease.held = true;
    const std::string why =
        fmt::format("its federation lease ({:.0f} s) lapsed: no word from the broker for {:.0f} s",
                    lease.length.value(), (now - lease.until + lease.length).value());
    if (info->phase == sched::JobPhase::kPending) {
      events_.push_back(sched::Event::Cancel(SchedId(id)));  // out of the queue, held
      Record(store_->AppendEvent(id, "held", why + "; held until the broker renews it"), id,
             "hold");
      continue;
    }
    // Running: the attempt is fenced now, not trusted to stop (the broker may already run the
    // job elsewhere).
    int attempt = 0;
    if (auto a = attempts_.find(id); a != attempts_.end()) attempt = a->second.number;
    RequeueNow(id, "lease", "fenced",
               fmt::format("{}: attempt {} stopped, held until the broker renews it; {}", why,
                           attempt, ResumeNote(id, now)));  // held: the resubmission waits
  }
}

std::vector<topo::NodeId> SchedulingController::NodeIds(
    const std::vector<std::string>& names) const {
  std::vector<topo::NodeId> out;
  for (const std::string& n : names) {
    if (auto it = node_by_name_.find(n); it != node_by_name_.end()) out.push_back(it->second);
  }
  return out;
}

void SchedulingController::Handle(CancelRequested& in) {
  const sched::JobInfo* info = scheduler_->job(SchedId(in.job.id));
  if (in.job.state == JobState::kCancelling && info != nullptr &&
      (info->phase == sched::JobPhase::kRunning || info->phase == sched::JobPhase::kTerminating)) {
    cancelling_.insert(in.job.id);
    executor_->Stop(in.job.id, info->spec.grace_period);
    return;  // the scheduler hears Cancel when the executor reports the exit
  }
  if (in.job.state == JobState::kCancelling) {
    Record(store_
               ->Transition(
                   in.job.id,
                   {{JobState::kCancelling}, JobState::kCancelled, "cancelled", "was not running"})
               .status(),
           in.job.id, "cancel");
  }
  ForgetJob(in.job.id);
  events_.push_back(sched::Event::Cancel(SchedId(in.job.id)));
}

void SchedulingController::Loop() {
  std::vector<Input> inputs;
  while (true) {
    {
      std::unique_lock lock(mu_);
      auto deadline = std::chrono::steady_clock::now() +
                      std::chrono::duration<double>(options_.poll_interval.value());
      wake_.wait_until(lock, deadline, [&] { return stopping_ || !inbox_.empty(); });
      if (stopping_) break;
      inputs.swap(inbox_);
    }
    std::lock_guard work(work_mu_);
    for (Input& in : inputs) std::visit([this](auto& x) { Handle(x); }, in);
    inputs.clear();
    if (!leases_.empty()) FenceLapsedLeases(clock_.Now());
    // Nodes first: a job that died with its node is requeued by the node's failure.
    for (const NodeReport& report : executor_->PollNodes()) HandleNodeReport(report);
    for (const ExitReport& exit : executor_->Poll()) HandleExit(exit);
    for (const Submission& submission : executor_->PollSubmissions()) HandleSubmission(submission);
    TimePoint now = clock_.Now();
    if (checkpoint_watcher_.enabled() && now >= next_checkpoint_poll_) {
      next_checkpoint_poll_ = now + options_.checkpoint_poll_interval;
      PollCheckpoints(now);
    }
    bool due = wake_at_ && *wake_at_ <= now;
    if (events_.empty() && !due) {
      // A forecast skipped to bound its cost is made up when the loop is idle.
      if (forecast_stale_ && UpdateForecast(now)) PublishSnapshot();
      continue;
    }
    std::vector<sched::Event> events;
    events.swap(events_);
    auto start = std::chrono::steady_clock::now();
    sched::Decisions d = scheduler_->RunCycle({now, events});
    double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    metrics_->cycle.WithLabels({}).Observe(seconds);
    wake_at_ = d.wake_at;
    RecordCycle(now, events, d);
    UpdateForecast(now);
    ApplyDecisions(d, now);
  }
  if (leader_epoch_ > 0) {
    executor_->Release();  // the next leader adopts what runs
  } else {
    executor_->StopAll();
  }
}

bool SchedulingController::UpdateForecast(TimePoint now) {
  if (options_.forecast_max_cycles <= 0) {
    forecast_.clear();
    return false;
  }
  // At most ~10 % of the loop's time: after a forecast that took t, the next waits 10 t.
  const auto start = std::chrono::steady_clock::now();
  if (start < next_forecast_) {
    forecast_stale_ = true;
    return false;
  }
  sched::QueueForecast f = scheduler_->Forecast(now, {.max_cycles = options_.forecast_max_cycles});
  forecast_.clear();
  for (sched::JobForecast& j : f.jobs) forecast_.emplace(j.job, std::move(j));
  const auto took = std::chrono::steady_clock::now() - start;
  next_forecast_ = start + 10 * took;
  forecast_stale_ = false;
  metrics_->step.WithLabels({"forecast"}).Observe(std::chrono::duration<double>(took).count());
  return true;
}

void SchedulingController::RecordCycle(TimePoint now, std::span<const sched::Event> events,
                                       const sched::Decisions& d) {
  if (options_.history_lines <= 0) return;
  ++history_cycle_;
  Status s = store_->AppendHistory(
      sched::history::EncodeCycle(cluster(), history_run_, history_cycle_, now, events, d),
      options_.history_lines);
  if (!s.ok()) LOG_WARN("scheduling history: cycle {}: {}", history_cycle_, s.ToString());
}

}  // namespace baton::server
