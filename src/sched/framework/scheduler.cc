#include "sched/framework/scheduler.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <optional>
#include <set>

#include "sched/actions/action.h"
#include "sched/plugins/builtin_plugins.h"
#include "sched/plugins/quota/tenant_quota.h"

namespace baton::sched {
namespace {

// Compiles a validated spec's constraints once.
void Compile(const ClusterState& state, JobInfo* job) {
  const topo::Cluster& cluster = state.cluster();
  job->task_gpus = EffectiveTaskGpus(job->spec, cluster);
  job->allowed_nodes = state.attributes().Match(job->spec.node_requirements);
  job->extended = CompileExtended(job->spec, cluster);
  job->accepted_gpus.clear();
  for (const auto& t : job->spec.gpu_types) {
    auto g = cluster.FindGpuType(t);
    if (g.ok() && std::find(job->accepted_gpus.begin(), job->accepted_gpus.end(), *g) ==
                      job->accepted_gpus.end()) {
      job->accepted_gpus.push_back(*g);
    }
  }
  std::sort(job->accepted_gpus.begin(), job->accepted_gpus.end(),
            [](const topo::GpuSpec* a, const topo::GpuSpec* b) { return a->name < b->name; });
}

bool Accepts(const JobInfo& job, const topo::Cluster& c, topo::NodeId n) {
  if (job.accepted_gpus.empty()) return true;
  const topo::GpuSpec* g = c.shape_of(n).gpu;
  return std::find(job.accepted_gpus.begin(), job.accepted_gpus.end(), g) !=
         job.accepted_gpus.end();
}

// Whether the nodes the job may use, its bad nodes aside, hold enough GPUs for it in an otherwise
// idle cluster (health aside: a down node may come back).
bool BadNodesLeaveRoom(const JobInfo& job, const topo::Cluster& c) {
  std::int64_t gpus = 0;
  for (std::uint32_t n = 0; n < c.nodes().size() && gpus < job.spec.gpus; ++n) {
    const topo::NodeId id(n);
    if (!Accepts(job, c, id) || (job.allowed_nodes && !(*job.allowed_nodes)[n]) ||
        std::binary_search(job.bad_nodes.begin(), job.bad_nodes.end(), id)) {
      continue;
    }
    gpus += c.node(id).gpus;
  }
  return gpus >= job.spec.gpus;
}

}  // namespace

Result<PluginSet> Scheduler::MakePlugins(const SchedulerConfig& config,
                                         const SchedulerOptions& options) {
  const PluginRegistry& registry = options.registry ? *options.registry : BuiltinPlugins();
  ASSIGN_OR_RETURN(PluginSet plugins,
                   BuildPluginSet(config, registry, PluginDeps{options.estimator}));
  // The tenancy policy's quotas hold whatever plugins the config lists.
  if (config.tenancy.HasQuotas()) {
    auto quota = std::make_unique<TenantQuotaPlugin>(config.tenancy);
    TenantQuotaPlugin* q = quota.get();
    plugins.owned.push_back(std::move(quota));
    plugins.pre_filters.push_back({q, q, 1.0});
    plugins.filters.push_back({q, q, 1.0});
    plugins.reserves.push_back({q, q, 1.0});
  }
  return plugins;
}

Result<std::vector<std::unique_ptr<Action>>> Scheduler::MakeActions(const SchedulerConfig& config) {
  std::vector<std::unique_ptr<Action>> actions;
  for (std::size_t i = 0; i < config.actions.size(); ++i) {
    auto a = MakeAction(config.actions[i]);
    if (!a.ok()) return a.status().WithPrefix(fmt::format("field 'actions[{}]'", i));
    actions.push_back(std::move(a).value());
  }
  return actions;
}

Result<std::unique_ptr<Scheduler>> Scheduler::Create(topo::Cluster cluster, SchedulerConfig config,
                                                     SchedulerOptions options) {
  ASSIGN_OR_RETURN(PluginSet plugins, MakePlugins(config, options));
  if (config.preempt_by == PreemptBy::kLasBand && plugins.bands.ext == nullptr) {
    return InvalidArgumentError(
        "field 'preempt_by': las-band requires a queue order with service bands (queue_sort: las)");
  }
  ASSIGN_OR_RETURN(std::vector<std::unique_ptr<Action>> actions, MakeActions(config));
  return std::unique_ptr<Scheduler>(new Scheduler(ClusterState(std::move(cluster)),
                                                  std::move(config), options, std::move(plugins),
                                                  std::move(actions)));
}

std::unique_ptr<Scheduler> Scheduler::Clone() const {
  // Both succeeded for the same config and options when this scheduler was created.
  Result<PluginSet> plugins = MakePlugins(config_, options_);
  CHECK(plugins.ok()) << plugins.status().ToString();
  Result<std::vector<std::unique_ptr<Action>>> actions = MakeActions(config_);
  CHECK(actions.ok()) << actions.status().ToString();
  SchedulerOptions options = options_;
  options.timer = nullptr;
  options.waiting_notes = true;
  std::unique_ptr<Scheduler> copy(new Scheduler(
      state_.Clone(), config_, options, std::move(plugins).value(), std::move(actions).value()));
  copy->jobs_ = jobs_;
  copy->last_now_ = last_now_;
  copy->admitted_ = admitted_;
  copy->queue_order_ = queue_order_;
  return copy;
}

void Scheduler::CollectPending(std::vector<JobId>* ids, std::vector<JobInfo*>* jobs) {
  for (auto& [id, job] : jobs_) {
    if (job.phase != JobPhase::kPending) continue;
    ids->push_back(id);
    jobs->push_back(&job);
  }
}

Scheduler::Scheduler(ClusterState state, SchedulerConfig config, SchedulerOptions options,
                     PluginSet plugins, std::vector<std::unique_ptr<Action>> actions)
    : state_(std::move(state)),
      config_(std::move(config)),
      options_(options),
      plugins_(std::move(plugins)),
      actions_(std::move(actions)) {}

Scheduler::~Scheduler() = default;

bool Scheduler::BlockedJobsReserved() const {
  return std::any_of(actions_.begin(), actions_.end(),
                     [](const auto& a) { return a->ReservesForBlockedJobs(); });
}

const JobInfo* Scheduler::job(JobId id) const {
  auto it = jobs_.find(id);
  return it == jobs_.end() ? nullptr : &it->second;
}

void Scheduler::ReleaseJob(JobInfo& job, TimePoint now) {
  for (const auto& a : job.placement.nodes) {
    Status s = state_.ReleaseHost(a.node, HostOn(job, a));
    CHECK(s.ok()) << "job " << job.spec.name << " did not hold its CPU/memory: " << s.ToString();
  }
  if (CpuOnly(job.spec)) {
    job.placement = {};
    return;
  }
  if (SharesGpu(job.spec)) {
    const NodeAlloc& a = job.placement.nodes.at(0);
    const topo::GpuRef gpu{a.node, static_cast<std::uint8_t>(std::countr_zero(a.mask))};
    auto amount = ShareOn(job.spec, *state_.cluster().shape_of(a.node).gpu);
    CHECK(amount.has_value());
    Status s = state_.ReleaseShare(gpu, *amount);
    CHECK(s.ok()) << "job " << job.spec.name << " did not hold its share: " << s.ToString();
    job.placement.nodes.clear();
  }
  for (const auto& a : job.placement.nodes) {
    Status s = state_.Release(a.node, a.mask);
    CHECK(s.ok()) << "job " << job.spec.name << " did not hold its GPUs: " << s.ToString();
  }
  const double gpus = SharesGpu(job.spec) ? 1.0 : job.placement.gpus();
  job.attained_gpu_seconds += std::max(0.0, (now - job.start).value()) * gpus;
  job.placement = {};
}

void Scheduler::Requeue(JobInfo& job) {
  job.phase = JobPhase::kPending;
  job.preempted_for = JobId();
  job.nominated = false;
}

bool Scheduler::PassesFilters(const JobInfo& job, topo::NodeId node, TimePoint now) {
  const PluginContext ctx{now, state_, jobs_, cycle_};
  for (const auto& f : plugins_.filters) {
    if (!f.ext->Filter(ctx, job, node).ok()) return false;
  }
  return true;
}

void Scheduler::NodeDown(topo::NodeId node, TimePoint now, Decisions* out) {
  // Filters may cache per-cycle data (quota usage) in cycle_: start this from a clean slate.
  cycle_.Clear();
  const topo::Cluster& c = state_.cluster();
  std::vector<JobId> hit;
  for (auto& [id, job] : jobs_) {
    if (job.phase != JobPhase::kRunning && job.phase != JobPhase::kTerminating) continue;
    for (const auto& a : job.placement.nodes) {
      if (a.node == node) {
        hit.push_back(id);
        break;
      }
    }
  }
  for (JobId id : hit) {
    JobInfo& job = jobs_.at(id);
    const double lost = std::max(0.0, (now - std::max(job.start, job.last_checkpoint)).value()) *
                        job.placement.gpus();
    ++job.failures;
    job.bad_nodes.insert(std::lower_bound(job.bad_nodes.begin(), job.bad_nodes.end(), node), node);
    if (!BadNodesLeaveRoom(job, c)) job.bad_nodes.clear();
    const std::string why = fmt::format("node {} is down", c.node(node).name);
    if (job.failures > job.spec.max_retries) {
      ReleaseJob(job, now);
      out->rejections.push_back({id, "health",
                                 fmt::format("{}; retries exhausted ({} failures, max_retries {})",
                                             why, job.failures, job.spec.max_retries),
                                 RejectionKind::kRetriesExhausted});
      jobs_.erase(id);
      continue;
    }
    // A running gang may continue with a replacement node when every constraint still holds:
    // the new node meets the old one at or below the required level and every sub-group level
    // (the tree is ultrametric, so then it meets every other node of the gang there too), and
    // the configured filter chain accepts it (GPU type, bad nodes, node attributes, quota: the
    // same filters a placement passes, and only those).
    if (job.phase == JobPhase::kRunning && !job.spec.spread && !SharesGpu(job.spec) &&
        !CpuOnly(job.spec) && TaskHost(job).empty()) {
      topo::Level limit = job.spec.topology.required.value_or(topo::Level::kCore);
      for (const auto& sg : job.spec.sub_groups) {
        if (sg.gpus > job.task_gpus) limit = std::min(limit, sg.level);
      }
      std::size_t slot = 0;
      while (job.placement.nodes[slot].node != node) ++slot;
      const int need = std::popcount(job.placement.nodes[slot].mask);
      topo::NodeId best;
      topo::Level best_level = topo::Level::kNone;
      for (int f = need; f <= state_.max_node_gpus() && limit >= topo::Level::kNvlinkDomain; ++f) {
        for (std::uint32_t n : state_.NodesWithFree(f)) {
          topo::NodeId cand(n);
          bool in_job = false;
          for (const auto& a : job.placement.nodes) in_job |= a.node == cand;
          if (in_job) continue;
          topo::Level l = c.Meet(cand, node);
          if (l <= limit && l < best_level && PassesFilters(job, cand, now)) {
            best = cand;
            best_level = l;
          }
        }
        if (best.valid()) break;
      }
      if (best.valid()) {
        std::uint64_t free_mask = ~c.node(best).allocated_mask;
        std::uint64_t mask = 0;
        for (int i = 0, taken = 0; i < c.node(best).gpus && taken < need; ++i) {
          if ((free_mask >> i) & 1) {
            mask |= 1ULL << i;
            ++taken;
          }
        }
        CHECK(state_.Release(node, job.placement.nodes[slot].mask).ok());
        CHECK(state_.Allocate(best, mask).ok());
        job.placement.nodes[slot] = {best, mask};
        job.placement.span = SpanOf(c, job.placement.nodes);
        job.attained_gpu_seconds += std::max(0.0, (now - job.start).value()) * job.placement.gpus();
        job.start = now;
        job.last_checkpoint = now;
        // A node that goes down in the same cycle as the one it replaced: one replacement, from
        // the first node straight to this one (the job never ran on the node in between).
        auto earlier = std::find_if(out->replacements.begin(), out->replacements.end(),
                                    [&](const Replacement& r) { return r.job == id; });
        if (earlier != out->replacements.end() && earlier->new_node == node) {
          earlier->new_node = best;
          earlier->placement = job.placement;
        } else {
          out->replacements.push_back({id, node, best, job.placement, lost});
        }
        continue;
      }
    }
    ReleaseJob(job, now);
    Requeue(job);
    job.eligible_at = now + job.spec.restart_cost;
    out->requeues.push_back({id, why, lost});
  }
}

void Scheduler::Apply(const Event& e, TimePoint now, Decisions* out) {
  const topo::Cluster& c = state_.cluster();
  auto find = [&](JobId id) -> JobInfo* {
    auto it = jobs_.find(id);
    return it == jobs_.end() ? nullptr : &it->second;
  };
  switch (e.kind) {
    case Event::Kind::kSubmit:
    case Event::Kind::kAdopt: {
      if (find(e.job.id) != nullptr) {
        out->rejections.push_back({e.job.id, "admission", "field 'id': job id already in use"});
        return;
      }
      if (Status s = ValidateJob(e.job, c); !s.ok()) {
        out->rejections.push_back({e.job.id, "admission", s.message()});
        return;
      }
      // A job already running (adopted after a restart) keeps running under a changed policy.
      if (e.kind == Event::Kind::kSubmit) {
        if (Status s = config_.tenancy.CheckPriority(e.job.tenant, e.job.priority); !s.ok()) {
          out->rejections.push_back({e.job.id, "admission", s.message()});
          return;
        }
      }
      JobInfo job;
      job.spec = e.job;
      if (job.spec.submit_time == TimePoint{}) job.spec.submit_time = now;
      Compile(state_, &job);
      for (topo::NodeId n : e.bad_nodes) {
        if (n.valid() && n.value() < c.nodes().size()) job.bad_nodes.push_back(n);
      }
      std::sort(job.bad_nodes.begin(), job.bad_nodes.end());
      job.bad_nodes.erase(std::unique(job.bad_nodes.begin(), job.bad_nodes.end()),
                          job.bad_nodes.end());
      if (!BadNodesLeaveRoom(job, c)) job.bad_nodes.clear();
      job.phase = JobPhase::kPending;
      job.eligible_at = now;
      if (e.kind == Event::Kind::kAdopt) {
        if (e.placement.gpus() != job.spec.gpus) {
          out->rejections.push_back(
              {e.job.id, "admission",
               fmt::format("field 'placement': holds {} GPUs, job asks for {}", e.placement.gpus(),
                           job.spec.gpus)});
          return;
        }
        Statement stmt(&state_);
        for (const auto& a : e.placement.nodes) {
          if (!a.node.valid() || a.node.value() >= c.nodes().size()) {
            out->rejections.push_back({e.job.id, "admission", "field 'placement': unknown node"});
            return;
          }
          if (Status s = stmt.AllocateHost(a.node, HostOn(job, a)); !s.ok()) {
            out->rejections.push_back({e.job.id, "admission", "field 'placement': " + s.message()});
            return;
          }
          if (CpuOnly(job.spec)) continue;
          if (SharesGpu(job.spec)) {
            auto amount =
                c.shape_of(a.node).gpu ? ShareOn(job.spec, *c.shape_of(a.node).gpu) : std::nullopt;
            Status s =
                amount ? stmt.AllocateShare(
                             {a.node, static_cast<std::uint8_t>(std::countr_zero(a.mask))}, *amount)
                       : InvalidArgumentError("the GPU cannot host this share");
            if (!s.ok()) {
              out->rejections.push_back(
                  {e.job.id, "admission", "field 'placement': " + s.message()});
              return;
            }
            continue;
          }
          if (Status s = stmt.Allocate(a.node, a.mask); !s.ok()) {
            out->rejections.push_back({e.job.id, "admission", "field 'placement': " + s.message()});
            return;  // the statement discards what it allocated
          }
        }
        stmt.Commit();
        job.phase = JobPhase::kRunning;
        job.placement = e.placement;
        job.placement.span = SpanOf(c, job.placement.nodes);
        job.start = e.adopted_start;
        job.last_checkpoint = e.adopted_start;
        job.attempts = 1;
      }
      job.admission = ++admitted_;
      jobs_.emplace(job.spec.id, std::move(job));
      return;
    }
    case Event::Kind::kCancel: {
      JobInfo* j = find(e.job_id);
      if (j == nullptr) return;
      if (j->phase == JobPhase::kRunning || j->phase == JobPhase::kTerminating) ReleaseJob(*j, now);
      jobs_.erase(e.job_id);
      return;
    }
    case Event::Kind::kFinish: {
      JobInfo* j = find(e.job_id);
      if (j == nullptr) return;
      if (j->phase == JobPhase::kTerminating) {
        ReleaseJob(*j, now);
        Requeue(*j);
      } else if (j->phase == JobPhase::kRunning) {
        ReleaseJob(*j, now);
        jobs_.erase(e.job_id);
      }
      return;
    }
    case Event::Kind::kCheckpoint: {
      JobInfo* j = find(e.job_id);
      if (j != nullptr && j->phase != JobPhase::kPending) j->last_checkpoint = now;
      return;
    }
    case Event::Kind::kNodeHealth: {
      if (!e.node.valid() || e.node.value() >= c.nodes().size()) return;
      state_.SetHealth(e.node, e.health);
      if (e.health == topo::NodeHealth::kDown) NodeDown(e.node, now, out);
      return;
    }
  }
}

Decisions Scheduler::RunCycle(const CycleInput& input) {
  const TimePoint now = std::max(input.now, last_now_);
  last_now_ = now;
  ++epoch_;
  {
    std::lock_guard<std::mutex> lock(whatif_mu_);
    whatif_base_.reset();  // built on the state this cycle changes
  }
  Decisions out;
  for (const Event& e : input.what_happened) Apply(e, now, &out);
  // Victims whose grace period is over free their GPUs and wait again; a job stays nominated
  // only while victims are terminating on its behalf.
  // One pass over the table: victims whose grace period is over free their GPUs and wait again;
  // collect what the session needs.
  std::set<JobId> awaited;
  std::optional<TimePoint> next_deadline;
  std::vector<JobId> pending;
  std::vector<JobInfo*> pending_jobs;
  std::optional<int> lowest_victim;
  for (auto& [id, job] : jobs_) {
    if (job.phase == JobPhase::kTerminating && job.evict_deadline <= now) {
      ReleaseJob(job, now);
      Requeue(job);
    }
    switch (job.phase) {
      case JobPhase::kTerminating:
        awaited.insert(job.preempted_for);
        if (!next_deadline || job.evict_deadline < *next_deadline)
          next_deadline = job.evict_deadline;
        break;
      case JobPhase::kPending:
        pending.push_back(id);
        pending_jobs.push_back(&job);
        break;
      case JobPhase::kRunning:
        if (job.spec.preemptible && (!lowest_victim || job.spec.priority < *lowest_victim)) {
          lowest_victim = job.spec.priority;
        }
        break;
      case JobPhase::kSubmitted:
        break;
    }
  }
  // A job stays nominated only while victims are terminating on its behalf.
  for (JobInfo* job : pending_jobs) {
    if (job->nominated && !awaited.contains(job->spec.id)) job->nominated = false;
  }
  cycle_.Clear();
  Session session(now, &state_, &jobs_, &plugins_, &config_, &cycle_, &out, options_.timer,
                  std::move(pending), std::move(pending_jobs), lowest_victim, &queue_order_,
                  options_.waiting_notes);
  session.set_tail_probe(tail_probe_);
  session.set_blocked_jobs_reserved(BlockedJobsReserved());
  for (const auto& a : actions_) {
    const TimePoint t0 = options_.timer ? options_.timer->Now() : TimePoint{};
    a->Execute(session);
    if (options_.timer) {
      session.AddTiming("action/" + std::string(a->Name()), (options_.timer->Now() - t0).value());
    }
  }
  for (JobId id : session.pending_at_start()) {
    auto it = jobs_.find(id);
    if (it != jobs_.end() && it->second.phase == JobPhase::kPending &&
        it->second.eligible_at > now) {
      session.WakeAt(it->second.eligible_at);
    }
  }
  if (next_deadline) session.WakeAt(*next_deadline);
  session.Finish();
  return out;
}

}  // namespace baton::sched
