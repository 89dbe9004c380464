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
#include "topology/io/cluster_yaml.h"
#include "topology/summary.h"

namespace baton::server {
namespace {

// The spec's inputs to stage, as the executor takes them.
std::vector<StageRequest> StageRequests(const JobSpec& spec) {
  std::vector<StageRequest> out;
  for (const StageItem& item : spec.stage) {
    out.push_back({item.kind, item.name, item.from, item.size_gib});
  }
  return out;
}

constexpr std::string_view kAllocOpen = "[alloc ";

sched::JobId SchedId(JobId id) { return sched::JobId(static_cast<std::uint64_t>(id)); }
JobId StoreId(sched::JobId id) { return static_cast<JobId>(id.value()); }

topo::NodeHealth Worse(topo::NodeHealth a, topo::NodeHealth b) { return std::max(a, b); }

std::vector<int> MaskBits(std::uint64_t mask) {
  std::vector<int> out;
  for (int i = 0; i < 64; ++i) {
    if ((mask >> i) & 1) out.push_back(i);
  }
  return out;
}

std::string NodeList(const topo::Cluster& c, const sched::Placement& p) {
  std::string out;
  for (std::size_t i = 0; i < p.nodes.size(); ++i) {
    if (i == 4 && p.nodes.size() > 5) {
      out += fmt::format(" and {} more", p.nodes.size() - 4);
      break;
    }
    if (i > 0) out += ",";
    out += c.node(p.nodes[i].node).name;
  }
  return out;
}

}  // namespace

std::string AllocTag(const topo::Cluster& cluster, const sched::Placement& placement) {
  std::string out(kAllocOpen);
  for (std::size_t i = 0; i < placement.nodes.size(); ++i) {
    if (i > 0) out += ",";
    out += fmt::format("{}:{:#x}", cluster.node(placement.nodes[i].node).name,
                       placement.nodes[i].mask);
  }
  return out + "]";
}

Result<sched::Placement> ParseAllocTag(const topo::Cluster& cluster, std::string_view message) {
  std::size_t open = message.rfind(kAllocOpen);
  std::size_t close = message.rfind(']');
  if (open == std::string_view::npos || close == std::string_view::npos || close < open) {
    return InvalidArgumentError("no [alloc ...] in the placement event");
  }
  std::string_view body =
      message.substr(open + kAllocOpen.size(), close - open - kAllocOpen.size());
  sched::Placement p;
  while (!body.empty()) {
    std::size_t comma = body.find(',');
    std::string_view item = body.substr(0, comma);
    body = comma == std::string_view::npos ? std::string_view{} : body.substr(comma + 1);
    std::size_t colon = item.rfind(':');
    if (colon == std::string_view::npos) return InvalidArgumentError("bad alloc entry");
    ASSIGN_OR_RETURN(topo::NodeId node, cluster.FindNode(item.substr(0, colon)));
    std::string mask_text(item.substr(colon + 1));
    char* end = nullptr;
    std::uint64_t mask = std::strtoull(mask_text.c_str(), &end, 16);
    if (end == mask_text.c_str() || *end != '\0' || mask == 0) {
      return InvalidArgumentError("bad GPU mask " + mask_text);
    }
    p.nodes.push_back({node, mask});
  }
  if (p.nodes.empty()) return InvalidArgumentError("empty alloc");
  p.span = sched::SpanOf(cluster, p.nodes);
  return p;
}

std::vector<PlacedNode> ToStoredPlacement(const topo::Cluster& cluster,
                                          const sched::Placement& placement) {
  std::vector<PlacedNode> out;
  for (const auto& a : placement.nodes) out.push_back({cluster.node(a.node).name, a.mask});
  return out;
}

Result<sched::Placement> FromStoredPlacement(const topo::Cluster& cluster,
                                             const std::vector<PlacedNode>& stored) {
  if (stored.empty()) return InvalidArgumentError("no placement on record");
  sched::Placement p;
  for (const PlacedNode& n : stored) {
    ASSIGN_OR_RETURN(topo::NodeId node, cluster.FindNode(n.node));
    const int gpus = cluster.node(node).gpus;
    if (n.mask == 0 || (gpus < 64 && (n.mask >> gpus) != 0)) {
      return InvalidArgumentError(
          fmt::format("GPU mask {:#x} does not fit node {} ({} GPUs)", n.mask, n.node, gpus));
    }
    p.nodes.push_back({node, n.mask});
  }
  p.span = sched::SpanOf(cluster, p.nodes);
  return p;
}

Result<sched::GangJob> GangJobFromRecord(const JobRecord& job, double time_scale,
                                         const topo::Cluster* cluster) {
  ASSIGN_OR_RETURN(JobSpec spec, ParseJobSpec(job.spec_json, BodyFormat::kJson));
  return GangJobFromSpec(job, spec, time_scale, cluster);
}

Result<sched::GangJob> GangJobFromSpec(const JobRecord& job, const JobSpec& spec, double time_scale,
                                       const topo::Cluster* cluster) {
  sched::GangJob g;
  g.id = SchedId(job.id);
  g.name = spec.name;
  g.tenant = job.tenant;
  if (spec.gpus > std::numeric_limits<int>::max()) return InvalidArgumentError("too many GPUs");
  g.gpus = static_cast<int>(spec.gpus);
  // gpus_per_node: exactly that many GPUs on each node, one task per node.
  g.gpus_per_task = spec.gpus_per_node;
  g.one_task_per_node = spec.gpus_per_node > 0;
  g.gpu_milli = spec.gpu_milli;
  g.cpu_milli = spec.cpu_milli;
  g.memory_mib = spec.memory_mib;
  for (const auto& [name, amount] : spec.extended) g.extended.push_back({name, amount});
  if (!spec.gpu_type.empty()) g.gpu_types = {spec.gpu_type};
  if (!spec.topology_required.empty()) {
    ASSIGN_OR_RETURN(topo::Level level, topo::ParseLevel(spec.topology_required));
    g.topology.required = level;
  }
  if (!spec.topology_preferred.empty()) {
    ASSIGN_OR_RETURN(topo::Level level, topo::ParseLevel(spec.topology_preferred));
    g.topology.preferred = level;
  }
  g.priority = spec.priority;
  g.preemptible = spec.preemptible;
  g.grace_period = Seconds(spec.grace_period_s);
  g.estimated_runtime = Seconds(spec.estimated_runtime_s * time_scale);
  g.submit_time = job.created_at;
  if (spec.elastic) {
    constexpr std::int64_t kMaxInt = std::numeric_limits<int>::max();
    if (spec.elastic->max_gpus > kMaxInt) return InvalidArgumentError("too many GPUs");
    g.elastic = {static_cast<int>(spec.elastic->min_gpus), static_cast<int>(spec.elastic->max_gpus),
                 static_cast<int>(spec.elastic->step_gpus)};
    if (g.elastic.step_gpus == 0 && cluster != nullptr) {
      g.elastic.step_gpus = sched::DefaultElasticStep(g, *cluster);
    }
  }
  return g;
}

sched::SchedulerConfig DefaultDaemonSchedulerConfig() {
  // data/scheduler/daemon.yaml, compiled in; sched's presets test parses every preset, so a
  // failure here is a build that shipped a broken file.
  Result<sched::SchedulerConfig> c = sched::PolicyPreset("daemon");
  CHECK(c.ok()) << c.status().ToString();
  return *std::move(c);
}

struct SchedulingController::Metrics {
  explicit Metrics(Registry& r)
      : cycle(r.AddHistogram("baton_scheduler_cycle_duration_seconds",
                             "Wall time of one scheduling cycle (RunCycle).", {},
                             LatencyBuckets())),
        step(r.AddHistogram("baton_scheduler_step_duration_seconds",
                            "Time spent in one action or plugin during a cycle.", {"step"},
                            LatencyBuckets())),
        placements(
            r.AddCounter("baton_scheduler_placements_total", "Gangs placed (binds).", {"level"})),
        preemptions(
            r.AddCounter("baton_scheduler_preemptions_total", "Running jobs preempted.", {})),
        failures(r.AddCounter("baton_job_failures_total",
                              "Jobs that failed, by cause (rejected, launch, exit).", {"cause"})),
        requeues(r.AddCounter("baton_scheduler_requeues_total",
                              "Running jobs put back in the queue.", {"reason"})),
        resizes(r.AddCounter("baton_scheduler_resizes_total",
                             "Elastic jobs restarted at a new size, by direction (grow, shrink).",
                             {"direction"})),
        queue(r.AddGauge("baton_scheduler_queue_length",
                         "Jobs the scheduler holds, by phase (pending, running, terminating).",
                         {"phase"})),
        gpus(r.AddGauge("baton_gpus", "GPUs by state (allocated, free, unhealthy).", {"state"})),
        nodes(r.AddGauge("baton_nodes", "Nodes by health condition.", {"health"})) {}
  Family<Histogram>& cycle;
  Family<Histogram>& step;
  Family<Counter>& placements;
  Family<Counter>& preemptions;
  Family<Counter>& failures;
  Family<Counter>& requeues;
  Family<Counter>& resizes;
  Family<Gauge>& queue;
  Family<Gauge>& gpus;
  Family<Gauge>& nodes;
};

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

Status SchedulingController::Reload() {
  TimePoint now = clock_.Now();
  ASSIGN_OR_RETURN(std::vector<NodeAdminState> admin, store_->ListNodeAdmin());
  for (const NodeAdminState& a : admin) {
    AdminChanged in{a};
    Handle(in);
  }
  // Health verdicts of the previous run hold until the node proves clean (as many consecutive
  // clean samples as the slowest-clearing of its rules needs; a sticky rule, or one this
  // configuration no longer has, waits for an uncordon).
  ASSIGN_OR_RETURN(std::vector<NodeHealthState> verdicts, store_->ListNodeHealth());
  for (const NodeHealthState& v : verdicts) {
    auto node = node_by_name_.find(v.node);
    std::optional<topo::NodeHealth> health;
    for (topo::NodeHealth h :
         {topo::NodeHealth::kSuspect, topo::NodeHealth::kDraining, topo::NodeHealth::kDown}) {
      if (topo::NodeHealthName(h) == v.condition) health = h;
    }
    if (node == node_by_name_.end() || !health) {
      LOG_WARN("stored health verdict for {} ({}) ignored: unknown node or condition", v.node,
               v.condition);
      continue;
    }
    RestoredVerdict r{*health, v.rules, 0, 0};
    bool sticky = v.rules.empty();
    for (const std::string& name : v.rules) {
      auto rule = std::find_if(options_.health_rules.begin(), options_.health_rules.end(),
                               [&](const health::Rule& x) { return x.name == name; });
      if (rule == options_.health_rules.end() || rule->clear_samples == 0) {
        sticky = true;
      } else {
        r.clean_needed = std::max(r.clean_needed, rule->clear_samples);
      }
    }
    if (sticky) r.clean_needed = 0;
    restored_health_[node->second] = std::move(r);
    {
      std::lock_guard lock(snapshot_mu_);
      active_rules_[node->second] = v.rules;
    }
    SetNodeHealth(node->second);
  }
  int queued = 0, adopted = 0, requeued = 0;
  // Jobs the running pass put back in the queue: already submitted to the scheduler, so the
  // queued pass (which lists them again) must not submit them twice.
  std::set<JobId> resubmitted;
  for (JobState state : {JobState::kRunning, JobState::kCancelling, JobState::kQueued}) {
    JobFilter filter;
    filter.state = state;
    filter.limit = 1000;
    while (true) {
      ASSIGN_OR_RETURN(JobPage page, store_->List(filter));
      for (const JobRecord& job : page.jobs) {
        Result<JobSpec> js = ParseJobSpec(job.spec_json, BodyFormat::kJson);
        Result<sched::GangJob> spec =
            js.ok() ? GangJobFromSpec(job, *js, executor_->TimeScale(), &cluster()) : js.status();
        if (!spec.ok()) {
          Record(store_
                     ->Transition(job.id, {{state},
                                           JobState::kFailed,
                                           "failed",
                                           "cannot schedule: " + spec.status().message()})
                     .status(),
                 job.id, "fail");
          continue;
        }
        if (state == JobState::kQueued) {
          if (resubmitted.contains(job.id)) continue;
          if (job.checkpoint) checkpoints_[job.id] = *job.checkpoint;
          commands_[job.id] = {};
          Submitted in{job, *std::move(js)};
          Handle(in);
          ++queued;
          continue;
        }
        // Running (or being cancelled): where it was placed is a column of its own. Only a
        // job placed by a version before that column (schema v3) has its placement in the
        // "[alloc ...]" tag of its last "placed" event, read once here for the upgrade.
        std::optional<sched::Placement> placement;
        TimePoint placed_at = job.updated_at;
        if (!job.placement.empty()) {
          Result<sched::Placement> p = FromStoredPlacement(cluster(), job.placement);
          if (p.ok()) {
            placement = *p;
          } else {
            LOG_WARN("job {}: stored placement: {}", job.id, p.status().ToString());
          }
        } else {
          ASSIGN_OR_RETURN(std::vector<JobEvent> history, store_->Events(job.id));
          for (auto it = history.rbegin(); it != history.rend(); ++it) {
            if (it->kind != "placed") continue;
            Result<sched::Placement> p = ParseAllocTag(cluster(), it->message);
            if (p.ok()) {
              placement = *p;
              placed_at = it->time;
            }
            break;
          }
        }
        // A running job keeps running without its plan if the planner no longer takes it.
        if (Status planned = AttachPlan(*js, *spec); !planned.ok()) {
          Record(store_->AppendEvent(
                     job.id, "planner",
                     "scheduled without its plan after a daemon restart: " + planned.message()),
                 job.id, "plan");
        }
        std::vector<std::string> command = js->command;
        if (!js->stage.empty()) stages_[job.id] = StageRequests(*js);
        if (job.checkpoint) checkpoints_[job.id] = *job.checkpoint;
        if (state == JobState::kRunning && js->federation && js->federation->lease_s > 0) {
          // Leased by a broker that may have moved it while this daemon was down: not adopted
          // (FinishRecovery ends what still runs), but held until the broker renews the lease.
          Result<JobRecord> r = store_->Transition(
              job.id, {{JobState::kRunning},
                       JobState::kQueued,
                       "fenced",
                       fmt::format("a daemon restart: its federation lease is not renewed yet; "
                                   "attempt {} stopped, held until the broker renews it; {}",
                                   job.attempts, ResumeNote(job.id, now))});
          Record(r.status(), job.id, "fence");
          if (r.ok()) {
            resubmitted.insert(job.id);
            Submitted in{*r, *js};
            Handle(in);  // held: no lease yet
            ++requeued;
          }
          continue;
        }
        bool alive = false;
        if (placement && !placement->nodes.empty()) {
          // The attempt the store calls current, on the port it was launched with (a job
          // launched before schema v5 had base + id % 1000).
          std::string master = cluster().node(placement->nodes.front().node).name;
          int port = job.master_port > 0
                         ? job.master_port
                         : options_.master_port_base + static_cast<int>(job.id % 1000);
          attempts_[job.id] = {std::max(job.attempts, 1), placed_at, master, port};
          // A checkpoint the job made while no daemon was looking counts: where it resumes.
          PollCheckpoint(job.id, std::max(job.attempts, 1), now, /*tell_scheduler=*/false);
          LaunchRequest req = MakeLaunchRequest(job.id, *spec, *placement, placed_at);
          req.command = command;
          alive = executor_->Reattach(req);
        }
        if (state == JobState::kCancelling) {
          if (alive) {
            executor_->Stop(job.id, spec->grace_period);
            cancelling_.insert(job.id);
            events_.push_back(sched::Event::Adopt(*spec, *placement, placed_at));
            commands_[job.id] = command;
          } else {
            Record(store_
                       ->Transition(job.id, {{JobState::kCancelling},
                                             JobState::kCancelled,
                                             "cancelled",
                                             "not running after a daemon restart"})
                       .status(),
                   job.id, "cancel");
          }
          continue;
        }
        if (alive) {
          events_.push_back(sched::Event::Adopt(*spec, *placement, placed_at));
          events_.back().bad_nodes = NodeIds(job.bad_nodes);
          commands_[job.id] = command;
          Record(store_->AppendEvent(job.id, "adopted",
                                     fmt::format("still running on {} after a daemon restart",
                                                 NodeList(cluster(), *placement))),
                 job.id, "adopt");
          ++adopted;
        } else {
          Result<JobRecord> r = store_->Transition(
              job.id, {{JobState::kRunning},
                       JobState::kQueued,
                       "requeued",
                       fmt::format("the {} executor no longer runs it after a daemon restart; {}",
                                   executor_->name(), ResumeNote(job.id, now))});
          Record(r.status(), job.id, "requeue");
          if (r.ok()) {
            resubmitted.insert(job.id);
            commands_[job.id] = command;
            events_.push_back(sched::Event::Submit(*spec));
            events_.back().bad_nodes = NodeIds(job.bad_nodes);
            ++requeued;
          }
        }
      }
      if (!page.next_after) break;
      filter.after = *page.next_after;
    }
  }
  // Nothing of a previous daemon that was not adopted may run beside what this one launches.
  executor_->FinishRecovery();
  LOG_INFO("controller: {} queued job(s) resubmitted, {} running adopted, {} requeued at {:.0f}",
           queued, adopted, requeued, now.since_epoch.value());
  wake_at_ = now;  // run a cycle at once
  return Status::Ok();
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
    Record(store_
               ->Transition(in.job.id, {{JobState::kQueued},
                                        JobState::kFailed,
                                        "failed",
                                        "cannot schedule: " + spec.status().message()})
               .status(),
           in.job.id, "fail");
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
      lease.spec = js;
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
  Submitted again{*std::move(stored), std::move(lease.spec)};
  Handle(again);
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

void SchedulingController::Handle(AdminChanged& in) {
  auto it = node_by_name_.find(in.node.node);
  if (it == node_by_name_.end()) {
    LOG_WARN("node admin change for {}, which is not in the cluster", in.node.node);
    return;
  }
  admin_health_[it->second] = in.node.admin == NodeAdmin::kActive ? topo::NodeHealth::kHealthy
                                                                  : topo::NodeHealth::kDraining;
  if (in.node.admin == NodeAdmin::kActive) {
    // Uncordon: the operator says the node is fixed, which also clears the health rules'
    // verdict (sticky rules clear only this way) and the one kept from before a restart.
    health_.Reset(it->second);
    restored_health_.erase(it->second);
    {
      std::lock_guard lock(snapshot_mu_);
      active_rules_.erase(it->second);
    }
    PersistHealth(it->second, {});
  }
  SetNodeHealth(it->second);
}

topo::NodeHealth SchedulingController::HealthVerdict(topo::NodeId node) const {
  topo::NodeHealth h = health_.condition(node);
  if (auto it = restored_health_.find(node); it != restored_health_.end()) {
    h = Worse(h, it->second.health);
  }
  return h;
}

void SchedulingController::PersistHealth(topo::NodeId node,
                                         const std::vector<std::string>& active_rules) {
  NodeHealthState state;
  state.node = cluster().node(node).name;
  state.condition = std::string(topo::NodeHealthName(HealthVerdict(node)));
  state.rules = active_rules;
  if (auto it = restored_health_.find(node); it != restored_health_.end()) {
    for (const std::string& r : it->second.rules) {
      if (std::find(state.rules.begin(), state.rules.end(), r) == state.rules.end()) {
        state.rules.push_back(r);
      }
    }
  }
  if (Status s = store_->SetNodeHealth(state); !s.ok()) {
    LOG_WARN("node {}: cannot store its health verdict: {}", state.node, s.ToString());
  }
}

void SchedulingController::Handle(TelemetryIn& in) {
  health::Sample sample(in.sample.begin(), in.sample.end());
  health::Assessment a = health_.Observe(in.node, sample);
  {
    std::lock_guard lock(snapshot_mu_);
    active_rules_[in.node] = a.active_rules;
    // Only what the rules read: a sample may name any number of fields; the rules bound this.
    TelemetrySample& kept = signals_[in.node];
    kept.clear();
    for (const health::Rule& rule : options_.health_rules) {
      for (const health::Condition& c : rule.all_of) {
        if (auto it = in.sample.find(c.field); it != in.sample.end()) kept[c.field] = it->second;
      }
    }
  }
  bool restored_cleared = false;
  if (auto it = restored_health_.find(in.node); it != restored_health_.end()) {
    RestoredVerdict& r = it->second;
    r.clean_seen = a.active_rules.empty() ? r.clean_seen + 1 : 0;
    if (r.clean_needed > 0 && r.clean_seen >= r.clean_needed) {
      restored_health_.erase(it);
      restored_cleared = true;
    }
  }
  if (a.changed || restored_cleared) {
    LOG_WARN("node {} is now {} ({})", cluster().node(in.node).name,
             topo::NodeHealthName(HealthVerdict(in.node)), fmt::join(a.active_rules, ", "));
    PersistHealth(in.node, a.active_rules);
    SetNodeHealth(in.node);
  }
}

void SchedulingController::SetNodeHealth(topo::NodeId node) {
  topo::NodeHealth admin = topo::NodeHealth::kHealthy;
  if (auto it = admin_health_.find(node); it != admin_health_.end()) admin = it->second;
  // baton's own verdict (admin state, health rules) goes to the executor's resource manager; the
  // resource manager's view of the node comes back through HandleNodeReport and only worsens it.
  topo::NodeHealth ours = Worse(admin, HealthVerdict(node));
  auto told = told_executor_.try_emplace(node, topo::NodeHealth::kHealthy).first;
  if (told->second != ours) {
    told->second = ours;
    std::string reason =
        admin != topo::NodeHealth::kHealthy ? "cordoned or drained by an admin" : "health rules";
    executor_->NodeConditionChanged(cluster().node(node).name, ours, reason);
  }
  topo::NodeHealth h = ours;
  if (auto it = executor_health_.find(node); it != executor_health_.end()) h = Worse(h, it->second);
  if (h != cluster().node(node).health) events_.push_back(sched::Event::NodeHealth(node, h));
}

void SchedulingController::HandleNodeReport(const NodeReport& report) {
  auto it = node_by_name_.find(report.node);
  if (it == node_by_name_.end()) return;  // a node the executor has and the cluster does not
  LOG_WARN("node {}: {} says {} ({})", report.node, executor_->name(),
           topo::NodeHealthName(report.health), report.reason);
  executor_health_[it->second] = report.health;
  SetNodeHealth(it->second);
}

LaunchRequest SchedulingController::MakeLaunchRequest(JobId id, const sched::GangJob& spec,
                                                      const sched::Placement& placement,
                                                      TimePoint start) const {
  const topo::Cluster& c = cluster();
  LaunchRequest req;
  req.job = id;
  req.epoch = leader_epoch_;
  req.name = spec.name;
  req.tenant = spec.tenant;
  if (auto it = commands_.find(id); it != commands_.end()) req.command = it->second;
  if (auto it = stages_.find(id); it != stages_.end()) req.stage = it->second;
  // The scheduler holds runtimes in wall time (GangJobFromSpec); the executor wants the job's own.
  req.estimated_runtime = spec.estimated_runtime / executor_->TimeScale();
  req.started_at = start;
  if (auto it = attempts_.find(id); it != attempts_.end()) {
    req.attempt = it->second.number;
    req.master_port = it->second.master_port;
  }
  req.checkpoint_dir = checkpoint_watcher_.JobDir(id);
  int rank = 0;
  for (std::size_t n = 0; n < placement.nodes.size(); ++n) {
    int local = 0;
    for (int gpu : MaskBits(placement.nodes[n].mask)) {
      req.ranks.push_back(
          {rank++, c.node(placement.nodes[n].node).name, static_cast<int>(n), local++, gpu});
    }
  }
  if (sched::CpuOnly(spec) && !placement.nodes.empty()) {  // one rank, no GPU
    req.ranks.push_back({0, c.node(placement.nodes[0].node).name, 0, 0, -1});
  }
  req.gpu_milli = spec.gpu_milli;
  req.cpu_milli = spec.cpu_milli;
  req.memory_mib = spec.memory_mib;
  if (!req.ranks.empty()) req.master_addr = req.ranks.front().node;
  return req;
}

bool SchedulingController::HoldsGpus(JobId id) const {
  const sched::JobInfo* info = scheduler_->job(SchedId(id));
  return info != nullptr &&
         (info->phase == sched::JobPhase::kRunning || info->phase == sched::JobPhase::kTerminating);
}

int SchedulingController::PickMasterPort(const std::string& node, int previous) {
  std::set<int> used;
  for (const auto& [job, a] : attempts_) {
    if ((a.master_node == node || executor_->OneHost()) && HoldsGpus(job)) {
      used.insert(a.master_port);
    }
  }
  // A relaunch (a replacement, a resize) moves on from its killed attempt's port rather than
  // taking the lowest free one: the killed rank 0's connections linger in TIME_WAIT for up to a
  // minute, and a rendezvous server binding a port they hold fails (EADDRINUSE; seen with gloo's
  // TCPStore when an elastic job was relaunched on the same node).
  const int base = options_.master_port_base;
  const int start = previous >= base && previous < base + 1000 ? previous + 1 - base : 0;
  for (int i = 0; i < 1000; ++i) {
    const int port = base + (start + i) % 1000;
    if (!used.contains(port)) return port;
  }
  // A thousand running jobs with rank 0 on one node: share the first port (never seen in
  // practice; the ranks would then fail to rendezvous and be retried).
  LOG_WARN("node {}: no free MASTER_PORT in [{}, {})", node, options_.master_port_base,
           options_.master_port_base + 1000);
  return options_.master_port_base;
}

namespace {

// "45 s", "12 min", "3.5 h".
std::string Span(Seconds s) {
  double v = std::max(0.0, s.value());
  if (v < 120) return fmt::format("{:.0f} s", v);
  if (v < 7200) return fmt::format("{:.0f} min", v / 60);
  return fmt::format("{:.1f} h", v / 3600);
}

}  // namespace

std::string SchedulingController::ResumeNote(JobId id, TimePoint now) const {
  auto a = attempts_.find(id);
  auto c = checkpoints_.find(id);
  if (c != checkpoints_.end()) {
    // The current attempt resumed from an earlier attempt's checkpoint and wrote none of its
    // own: all it did since it started is lost.
    TimePoint since = a != attempts_.end() && c->second.attempt < a->second.number
                          ? a->second.started
                          : c->second.time;
    return fmt::format("resumes from step {} (checkpointed by attempt {}); {} of work lost",
                       c->second.step, c->second.attempt, Span(now - since));
  }
  if (a == attempts_.end()) return "no checkpoint reported; starts over";
  return fmt::format("no checkpoint reported; starts over; {} of work lost",
                     Span(now - a->second.started));
}

void SchedulingController::PollCheckpoints(TimePoint now) {
  for (const auto& [id, attempt] : attempts_) {
    if (HoldsGpus(id)) PollCheckpoint(id, attempt.number, now, /*tell_scheduler=*/true);
  }
}

void SchedulingController::PollCheckpoint(JobId id, int attempt, TimePoint now,
                                          bool tell_scheduler) {
  std::optional<Result<CheckpointMarker>> seen = checkpoint_watcher_.Poll(id);
  if (!seen) return;
  if (!seen->ok()) {
    LOG_WARN("job {}: checkpoint marker refused: {}", id, seen->status().ToString());
    Record(store_->AppendEvent(id, "checkpoint_refused", seen->status().message()), id,
           "checkpoint");
    return;
  }
  const CheckpointMarker& m = **seen;
  if (m.attempt != attempt) {
    // A superseded attempt still writing (or a marker from before a relaunch): never news.
    Record(store_->AppendEvent(id, "checkpoint_ignored",
                               fmt::format("step {} reported by attempt {}, but attempt {} is "
                                           "current",
                                           m.step, m.attempt, attempt)),
           id, "checkpoint");
    return;
  }
  CheckpointRecord record{m.attempt, m.step, now, m.bytes};
  Result<bool> recorded = store_->RecordCheckpoint(id, record);
  if (!recorded.ok()) {
    Record(recorded.status(), id, "checkpoint");
    return;
  }
  if (!*recorded) return;  // the store fenced it (not newer, or no longer current)
  checkpoints_[id] = record;
  if (tell_scheduler) events_.push_back(sched::Event::Checkpoint(SchedId(id)));
}

void SchedulingController::ForgetJob(JobId id) {
  leases_.erase(id);
  commands_.erase(id);
  stages_.erase(id);
  attempts_.erase(id);
  checkpoints_.erase(id);
  checkpoint_watcher_.Forget(id);
}

void SchedulingController::Launch(JobId id, const sched::Placement& placement, TimePoint now) {
  const sched::JobInfo* info = scheduler_->job(SchedId(id));
  if (info == nullptr) return;
  Status s = executor_->Launch(MakeLaunchRequest(id, info->spec, placement, now));
  if (s.ok()) return;
  LOG_WARN("job {}: launch failed: {}", id, s.ToString());
  metrics_->failures.WithLabels({"launch"}).Increment();
  Record(store_
             ->Transition(id, {{JobState::kRunning, JobState::kCancelling},
                               JobState::kFailed,
                               "failed",
                               "launch failed: " + s.message()})
             .status(),
         id, "fail");
  ForgetJob(id);
  events_.push_back(sched::Event::Cancel(SchedId(id)));
}

void SchedulingController::HandleExit(const ExitReport& exit) {
  JobId id = exit.job;
  sched::JobId sid = SchedId(id);
  // A fenced attempt (its lease lapsed) that ended as it was killed: its end does not count.
  if (auto l = leases_.find(id); l != leases_.end() && l->second.held) return;
  if (cancelling_.erase(id) > 0) {
    Record(store_
               ->Transition(
                   id, {{JobState::kCancelling}, JobState::kCancelled, "cancelled", exit.message})
               .status(),
           id, "cancel");
    preempted_by_.erase(id);
    ForgetJob(id);
    events_.push_back(sched::Event::Cancel(sid));
    return;
  }
  if (exit.kind == ExitKind::kLost && !preempted_by_.contains(id)) {
    const sched::JobInfo* info = scheduler_->job(sid);
    if (info == nullptr || info->phase == sched::JobPhase::kPending) return;  // already requeued
    int lost = ++lost_[id];
    if (lost <= options_.max_lost_requeues) {
      Result<JobRecord> r = store_->Transition(
          id, {{JobState::kRunning},
               JobState::kQueued,
               "requeued",
               fmt::format("{} (lost {} of at most {} times); back in the queue; {}", exit.message,
                           lost, options_.max_lost_requeues, ResumeNote(id, clock_.Now()))});
      Record(r.status(), id, "requeue");
      metrics_->requeues.WithLabels({"lost"}).Increment();
      events_.push_back(sched::Event::Finish(sid));  // frees its GPUs and forgets it ...
      if (r.ok()) {
        Submitted again{*r};  // ... and this hands it back as a new submission
        Handle(again);
      }
      return;
    }
  }
  if (auto it = preempted_by_.find(id); it != preempted_by_.end()) {
    JobId by = it->second;
    preempted_by_.erase(it);
    if (exit.kind == ExitKind::kStopped) {
      Result<JobRecord> r =
          store_->Transition(id, {{JobState::kRunning},
                                  JobState::kQueued,
                                  "requeued",
                                  fmt::format("stopped for job {}; back in the queue; {}", by,
                                              ResumeNote(id, clock_.Now()))});
      Record(r.status(), id, "requeue");
      metrics_->requeues.WithLabels({"preempted"}).Increment();
      const sched::JobInfo* info = scheduler_->job(sid);
      if (info != nullptr && info->phase == sched::JobPhase::kTerminating) {
        events_.push_back(sched::Event::Finish(sid));  // frees its GPUs; the scheduler requeues
      } else if (info == nullptr && r.ok()) {
        // The scheduler dropped it (a bind that raced with the stop): hand it back.
        Submitted again{*r};
        Handle(again);
      }
      return;
    }
    // It finished on its own during its grace period: it is done, not requeued.
    events_.push_back(sched::Event::Cancel(sid));
  } else {
    events_.push_back(sched::Event::Finish(sid));
  }
  ForgetJob(id);
  lost_.erase(id);
  bool ok = exit.kind == ExitKind::kSucceeded;
  if (!ok) metrics_->failures.WithLabels({"exit"}).Increment();
  Record(store_
             ->Transition(id, {{JobState::kRunning},
                               ok ? JobState::kSucceeded : JobState::kFailed,
                               ok ? "finished" : "failed",
                               exit.message})
             .status(),
         id, "finish");
}

SchedulingController::PlacementOutcome SchedulingController::RecordPlacement(
    JobId id, std::string_view kind, std::string message, const sched::Placement& placement,
    bool new_attempt, TimePoint now, std::vector<std::string> placed_on, Status* refusal) {
  StateChange change{
      {JobState::kRunning}, JobState::kRunning, std::string(kind), std::move(message)};
  change.placement = ToStoredPlacement(cluster(), placement);
  change.schedulable_nodes = std::move(placed_on);
  std::string master =
      placement.nodes.empty() ? "" : cluster().node(placement.nodes.front().node).name;
  int port = 0;
  if (new_attempt) {
    change.new_attempt = true;
    auto old = attempts_.find(id);
    const int previous = old != attempts_.end() ? old->second.master_port : 0;
    attempts_.erase(id);
    port = PickMasterPort(master, previous);
    change.master_port = port;
  }
  Result<JobRecord> r = store_->Transition(id, change);
  if (r.ok()) {
    if (new_attempt) attempts_[id] = {r->attempts, now, master, port};
    return PlacementOutcome::kRecorded;
  }
  Result<JobRecord> stored = store_->Get(id);
  if (r.status().code() == StatusCode::kFailedPrecondition && stored.ok() &&
      stored->state == JobState::kRunning) {
    // Still running: a node it was to take was drained or cordoned after this cycle's snapshot.
    *refusal = r.status();
    return PlacementOutcome::kNodeRefused;
  }
  if (!stored.ok() || stored->state == JobState::kRunning) {
    LOG_WARN("job {}: {}: {}", id, kind, r.status().ToString());
  }
  // Cancelled or finished meanwhile: its end is on its way to the scheduler.
  return PlacementOutcome::kJobEnded;
}

void SchedulingController::RequeueRefused(JobId id, const Status& refusal, TimePoint now) {
  LOG_INFO("job {}: not restarted: {}", id, refusal.message());
  RequeueNow(id, "node", "requeued",
             "not restarted: " + refusal.message() + "; " + ResumeNote(id, now));
}

void SchedulingController::RequeueNow(JobId id, const std::string& reason, const std::string& kind,
                                      const std::string& message) {
  metrics_->requeues.WithLabels({reason}).Increment();
  executor_->Kill(id);
  preempted_by_.erase(id);
  attempts_.erase(id);
  events_.push_back(sched::Event::Finish(SchedId(id)));  // frees its GPUs
  Result<JobRecord> r =
      store_->Transition(id, {{JobState::kRunning}, JobState::kQueued, kind, message});
  if (!r.ok()) {
    Record(r.status(), id, "requeue");
    return;
  }
  Submitted again{*r};
  Handle(again);
}

void SchedulingController::ApplyDecisions(const sched::Decisions& d, TimePoint now) {
  const topo::Cluster& c = cluster();
  auto waiting_text = [](const sched::Waiting& w) {
    return w.status.plugin().empty() ? w.status.reason()
                                     : w.status.plugin() + ": " + w.status.reason();
  };
  for (const sched::Waiting& w : d.waiting) waiting_now_[StoreId(w.job)] = waiting_text(w);
  // The snapshot goes out before the store commits the cycle's transitions, so that a client
  // that sees a job "running" (the store) also sees its placement (the snapshot).
  PublishSnapshot();
  // Requeues first: the scheduler may already have placed a requeued job again in this cycle.
  for (const sched::Requeue& q : d.requeues) {
    JobId id = StoreId(q.job);
    metrics_->requeues.WithLabels({"node"}).Increment();
    executor_->Kill(id);
    preempted_by_.erase(id);
    StateChange change{
        {JobState::kRunning}, JobState::kQueued, "requeued", q.reason + "; " + ResumeNote(id, now)};
    if (const sched::JobInfo* info = scheduler_->job(q.job)) {
      std::vector<std::string> names;
      for (topo::NodeId n : info->bad_nodes) names.push_back(c.node(n).name);
      change.bad_nodes = std::move(names);
    }
    Record(store_->Transition(id, change).status(), id, "requeue");
  }
  // Resizes before binds: a shrink frees the GPUs a bind of this cycle may take, so the old
  // attempt is killed before anything launches there. A resize restarts the job: a new attempt
  // at the new size resumes from the last checkpoint (the same contract as a replacement).
  for (const sched::Resize& r : d.resizes) {
    JobId id = StoreId(r.job);
    int before = 0;
    std::set<std::string> had;
    if (Result<JobRecord> was = store_->Get(id); was.ok()) {
      for (const PlacedNode& n : was->placement) {
        before += std::popcount(n.mask);
        had.insert(n.node);
      }
    }
    // The nodes it grows onto must still be schedulable when the store records it.
    std::vector<std::string> added;
    for (const PlacedNode& n : ToStoredPlacement(c, r.placement)) {
      if (!had.contains(n.node)) added.push_back(n.node);
    }
    Status refusal;
    PlacementOutcome recorded = RecordPlacement(
        id, "resized",
        fmt::format("resized from {} to {} GPUs; restarted: {} {}", before, r.placement.gpus(),
                    ResumeNote(id, now), AllocTag(c, r.placement)),
        r.placement, /*new_attempt=*/true, now, std::move(added), &refusal);
    if (recorded == PlacementOutcome::kNodeRefused) {
      RequeueRefused(id, refusal, now);
      continue;
    }
    executor_->Kill(id);  // the attempt at the old size
    if (recorded == PlacementOutcome::kJobEnded) continue;
    metrics_->resizes.WithLabels({before < r.placement.gpus() ? "grow" : "shrink"}).Increment();
    Launch(id, r.placement, now);
  }
  for (const sched::Bind& b : d.binds) {
    JobId id = StoreId(b.job);
    std::string level(topo::LevelName(b.placement.span));
    std::string why =
        b.preferred_met
            ? "it was the best-scoring gang placement that fits"
            : "no free placement met the preferred topology level; this was the best that fits";
    const sched::JobInfo* info = scheduler_->job(b.job);
    std::string planned = info != nullptr ? PlannerNote(info->spec, b.placement) : "";
    std::string message =
        fmt::format("placed on {} ({} GPUs) at level {} because {}{} {}", NodeList(c, b.placement),
                    b.placement.gpus(), level, why, planned, AllocTag(c, b.placement));
    StateChange change{{JobState::kQueued}, JobState::kRunning, "placed", message};
    change.placement = ToStoredPlacement(c, b.placement);
    std::string master = b.placement.nodes.empty() ? "" : c.node(b.placement.nodes[0].node).name;
    attempts_.erase(id);
    change.master_port = PickMasterPort(master);
    for (const PlacedNode& n : *change.placement) change.schedulable_nodes.push_back(n.node);
    Result<JobRecord> r = store_->Transition(id, change);
    waiting_reason_.erase(id);
    if (r.ok()) attempts_[id] = {r->attempts, now, master, *change.master_port};
    if (!r.ok() && r.status().code() == StatusCode::kFailedPrecondition) {
      // Still queued: a node of the placement was cordoned or drained after this cycle's
      // snapshot (the store checks in the bind's own transaction). Never launched: the GPUs go
      // back and the job waits for the next cycle, which knows about the node.
      Result<JobRecord> now_stored = store_->Get(id);
      if (now_stored.ok() && now_stored->state == JobState::kQueued) {
        LOG_INFO("job {}: not launched: {}", id, r.status().message());
        events_.push_back(sched::Event::Finish(b.job));
        Submitted again{*now_stored};
        Handle(again);
        continue;
      }
    }
    if (!r.ok()) {
      // Cancelled between the submission and this cycle: give the GPUs back.
      LOG_INFO("job {}: not launched: {}", id, r.status().message());
      ForgetJob(id);
      events_.push_back(sched::Event::Cancel(b.job));
      continue;
    }
    metrics_->placements.WithLabels({level}).Increment();
    Launch(id, b.placement, now);
  }
  for (const sched::Preemption& p : d.preemptions) {
    JobId victim = StoreId(p.victim), by = StoreId(p.for_job);
    metrics_->preemptions.WithLabels({}).Increment();
    preempted_by_[victim] = by;
    Record(store_->AppendEvent(victim, "preempted",
                               fmt::format("preempted by job {}; stops within {:.0f} s grace", by,
                                           (p.release_at - now).value())),
           victim, "preempt");
    executor_->Stop(victim, std::max(Seconds(0), p.release_at - now));
  }
  for (const sched::Rejection& r : d.rejections) {
    JobId id = StoreId(r.job);
    metrics_->failures.WithLabels({"rejected"}).Increment();
    ForgetJob(id);
    // A job the scheduler gives up on after it ran (its requeue can never be placed) may still
    // be running in the executor: end it there too.
    executor_->Kill(id);
    // A job that ran and failed past its retries failed; anything else was refused.
    const bool failed = r.kind == sched::RejectionKind::kRetriesExhausted;
    Record(store_
               ->Transition(id, {{JobState::kQueued, JobState::kRunning},
                                 JobState::kFailed,
                                 failed ? "failed" : "rejected",
                                 fmt::format("{} by {}: {}", failed ? "failed" : "rejected",
                                             r.plugin, r.reason)})
               .status(),
           id, "reject");
  }
  for (const sched::Replacement& r : d.replacements) {
    JobId id = StoreId(r.job);
    Status refusal;
    PlacementOutcome recorded = RecordPlacement(
        id, "placed",
        fmt::format("node {} replaced by {}; restarted: {} {}", c.node(r.old_node).name,
                    c.node(r.new_node).name, ResumeNote(id, now), AllocTag(c, r.placement)),
        r.placement, /*new_attempt=*/true, now, {c.node(r.new_node).name}, &refusal);
    if (recorded == PlacementOutcome::kNodeRefused) {
      RequeueRefused(id, refusal, now);
      continue;
    }
    executor_->Kill(id);  // the attempt that lost its node
    if (recorded == PlacementOutcome::kJobEnded) continue;
    Launch(id, r.placement, now);
  }
  // Every waiting job's reason is in the snapshot (the API shows it); only the first few changes
  // per cycle become durable events, so that a deep queue does not turn each cycle into
  // hundreds of synchronous commits.
  int recorded = 0;
  for (const sched::Waiting& w : d.waiting) {
    JobId id = StoreId(w.job);
    std::string reason = waiting_text(w);
    auto& last = waiting_reason_[id];
    if (last == reason || recorded >= options_.max_waiting_events_per_cycle) continue;
    last = reason;
    ++recorded;
    Record(store_->AppendEvent(id, "waiting", reason), id, "waiting");
    executor_->JobWaiting(id, reason);
  }
  for (const sched::Timing& t : d.timings) {
    metrics_->step.WithLabels({t.name}).Observe(t.seconds);
  }
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

void SchedulingController::PublishSnapshot() {
  const topo::Cluster& c = cluster();
  std::map<JobId, PlacementView> placements;
  std::map<JobId, std::string> job_tenants;
  std::vector<NodeView> nodes(c.nodes().size());
  std::map<std::string, int> phases = {{"pending", 0}, {"running", 0}, {"terminating", 0}};
  for (const auto& [sid, info] : scheduler_->jobs()) {
    ++phases[std::string(sched::JobPhaseName(info.phase))];
    PlacementView v;
    v.phase = sched::JobPhaseName(info.phase);
    if (info.phase == sched::JobPhase::kPending) {
      if (auto it = waiting_now_.find(StoreId(sid)); it != waiting_now_.end()) {
        v.waiting = it->second;
      }
      if (auto it = forecast_.find(sid); it != forecast_.end()) {
        v.queue_position = it->second.position;
        v.estimated_start = it->second.estimated_start;
        v.waiting_kind = sched::WaitingKindName(it->second.kind);
      }
    }
    if (!info.placement.empty()) {
      job_tenants.emplace(StoreId(sid), info.spec.tenant);
      v.level = topo::LevelName(info.placement.span);
      for (const auto& a : info.placement.nodes) {
        v.nodes.push_back({c.node(a.node).name, MaskBits(a.mask)});
        nodes[a.node.value()].jobs.push_back(StoreId(sid));
      }
    }
    placements.emplace(StoreId(sid), std::move(v));
  }
  for (const auto& [id, lease] : leases_) {
    if (!lease.held || placements.contains(id)) continue;
    PlacementView v;
    v.phase = "pending";
    v.waiting = "held: the federation broker has not renewed this job's lease";
    placements.emplace(id, std::move(v));
  }
  std::erase_if(waiting_now_, [&](const auto& kv) { return !placements.contains(kv.first); });
  std::map<std::string, int> by_health;
  int unhealthy = 0;
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    const topo::Node& n = c.nodes()[i];
    nodes[i].name = n.name;
    nodes[i].health = topo::NodeHealthName(n.health);
    nodes[i].gpus = n.gpus;
    nodes[i].gpus_allocated = std::popcount(n.allocated_mask);
    ++by_health[nodes[i].health];
    if (n.health != topo::NodeHealth::kHealthy) {
      unhealthy += n.gpus - nodes[i].gpus_allocated;
    }
  }
  // The summary states GPU counts: rewritten when they change, so that it agrees with `nodes`.
  std::string summary;
  if (!(c.counts() == summarized_counts_)) summary = topo::Summarize(c);
  {
    std::lock_guard lock(snapshot_mu_);
    if (!summary.empty()) {
      topology_summary_ = std::move(summary);
      summarized_counts_ = c.counts();
    }
    for (auto& [id, rules] : active_rules_) nodes[id.value()].active_rules = rules;
    for (auto& [id, sample] : signals_) nodes[id.value()].signals = sample;
    placements_ = std::move(placements);
    nodes_ = std::move(nodes);
    job_tenants_ = std::move(job_tenants);
    ++cycles_;
  }
  for (const auto& [phase, n] : phases) metrics_->queue.WithLabels({phase}).Set(n);
  const topo::GpuCounts& counts = c.counts();
  metrics_->gpus.WithLabels({"allocated"}).Set(counts.allocated);
  metrics_->gpus.WithLabels({"free"}).Set(counts.free);
  metrics_->gpus.WithLabels({"unhealthy"}).Set(unhealthy);
  for (std::string_view h : {"healthy", "suspect", "draining", "down"}) {
    metrics_->nodes.WithLabels({h}).Set(by_health[std::string(h)]);
  }
}

Result<WhatIfView> SchedulingController::WhatIf(const JobSpec& spec) {
  JobRecord record;
  record.tenant = spec.tenant.value_or("default");
  record.name = spec.name;
  ASSIGN_OR_RETURN(sched::GangJob job,
                   GangJobFromSpec(record, spec, executor_->TimeScale(), admission_cluster_.get()));
  std::lock_guard work(work_mu_);
  RETURN_IF_ERROR(AttachPlan(spec, job));
  ASSIGN_OR_RETURN(
      sched::WhatIfAnswer a,
      scheduler_->WhatIf(clock_.Now(), job, std::max(1, options_.forecast_max_cycles)));
  WhatIfView v;
  v.queue_position = a.forecast.position;
  v.estimated_start = a.forecast.estimated_start;
  v.waiting_kind = sched::WaitingKindName(a.forecast.kind);
  const topo::Cluster& c = cluster();
  for (std::size_t i = 0; i < c.nodes().size(); ++i) {
    v.total_gpus += c.nodes()[i].gpus;
    v.free_gpus += scheduler_->state().FreeGpus(topo::NodeId(static_cast<std::uint32_t>(i)));
  }
  if (!a.placement.empty()) {
    if (a.gpu != nullptr) v.gpu_type = a.gpu->name;
    v.level = topo::LevelName(a.placement.span);
    for (const auto& n : a.placement.nodes)
      v.nodes.push_back({c.node(n.node).name, MaskBits(n.mask)});
    if (job.has_plan) {
      v.step_time_s = planner_->compact_step(job.plan_key).value() *
                      planner_->Slowdown(job, sched::RankOrder(a.placement));
    }
  }
  return v;
}

Status SchedulingController::Admit(const JobSpec& spec) const {
  RETURN_IF_ERROR(AdmitJob(spec, *admission_cluster_));
  return CheckJob(spec);
}

std::optional<PlacementView> SchedulingController::JobPlacement(JobId job) const {
  std::lock_guard lock(snapshot_mu_);
  auto it = placements_.find(job);
  if (it == placements_.end()) return std::nullopt;
  return it->second;
}

ClusterView SchedulingController::ClusterLayout(const topo::Cluster& c) {
  ClusterView out;
  out.name = c.name();
  out.nodes.reserve(c.nodes().size());
  for (const topo::Node& n : c.nodes()) {
    ClusterView::Node v;
    v.name = n.name;
    for (int t = topo::kMaxSwitchTiers - 1; t >= 0; --t) {
      if (n.ancestors[t].valid()) v.path.push_back(c.sw(n.ancestors[t]).name);
    }
    if (n.nvlink_domain.valid() && c.nvlink_domain(n.nvlink_domain).nodes.size() > 1) {
      v.domain = c.nvlink_domain(n.nvlink_domain).name;
    }
    v.gpu_jobs.assign(n.gpus, 0);
    out.nodes.push_back(std::move(v));
  }
  return out;
}

ClusterView SchedulingController::Cluster() const {
  ClusterView out = layout_;  // immutable after Create
  std::lock_guard lock(snapshot_mu_);
  for (std::size_t i = 0; i < nodes_.size() && i < out.nodes.size(); ++i) {
    out.nodes[i].health = nodes_[i].health;
  }
  std::unordered_map<std::string_view, std::size_t> index;
  for (std::size_t i = 0; i < out.nodes.size(); ++i) index.emplace(out.nodes[i].name, i);
  for (const auto& [id, p] : placements_) {
    for (const auto& n : p.nodes) {
      auto it = index.find(n.node);
      if (it == index.end()) continue;
      for (int g : n.gpus) {
        auto& jobs = out.nodes[it->second].gpu_jobs;
        if (g >= 0 && static_cast<std::size_t>(g) < jobs.size()) jobs[g] = id;
      }
    }
  }
  out.job_tenants = job_tenants_;
  return out;
}

std::vector<NodeView> SchedulingController::Nodes() const {
  std::lock_guard lock(snapshot_mu_);
  return nodes_;
}

std::int64_t SchedulingController::cycles() const {
  std::lock_guard lock(snapshot_mu_);
  return cycles_;
}

}  // namespace baton::server
