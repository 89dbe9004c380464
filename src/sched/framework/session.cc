#include "sched/framework/session.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <set>
#include <tuple>

namespace baton::sched {
namespace {

template <typename Ext>
void AddIf(Plugin* p, double weight, std::vector<PluginEntry<Ext>>* list) {
  if (auto* e = dynamic_cast<Ext*>(p)) list->push_back({p, e, weight});
}

// Times a scope into the session when a timer is configured.
class ScopedTiming {
 public:
  ScopedTiming(Session* s, std::string_view name) : s_(s), name_(name) {
    if (s_->timer()) start_ = s_->timer()->Now();
  }
  ~ScopedTiming() {
    if (s_->timer()) s_->AddTiming(name_, (s_->timer()->Now() - start_).value());
  }
  ScopedTiming(const ScopedTiming&) = delete;
  ScopedTiming& operator=(const ScopedTiming&) = delete;

 private:
  Session* s_;
  std::string_view name_;
  TimePoint start_;
};

// The framework's filter chain plus an optional extra restriction.
class ChainFilter final : public NodeFilter {
 public:
  ChainFilter(Session* s, const JobInfo& job, const NodeFilter* extra)
      : s_(s), job_(job), extra_(extra) {}
  ~ChainFilter() override {
    for (std::size_t i = 0; i < timings_.size(); ++i) {
      if (timings_[i].calls == 0) continue;
      s_->AddTiming("filter/" + std::string(s_->plugins().filters[i].plugin->Name()),
                    timings_[i].seconds, timings_[i].calls);
    }
  }
  ChainFilter(const ChainFilter&) = delete;
  ChainFilter& operator=(const ChainFilter&) = delete;

  bool Fits(topo::NodeId node) const override {
    if (extra_ && !extra_->Fits(node)) return false;
    const Clock* timer = s_->timer();
    const auto& filters = s_->plugins().filters;
    for (std::size_t i = 0; i < filters.size(); ++i) {
      const auto& f = filters[i];
      bool ok = false;
      if (timer == nullptr) {
        ok = f.ext->Filter(s_->ctx(), job_, node).ok();
      } else {
        // Accumulated here and handed to the session once per placement attempt.
        if (timings_.empty()) timings_.resize(filters.size());
        const TimePoint t0 = timer->Now();
        ok = f.ext->Filter(s_->ctx(), job_, node).ok();
        timings_[i].seconds += (timer->Now() - t0).value();
        ++timings_[i].calls;
      }
      if (!ok) {
        ++rejected_[f.plugin->Name()];
        return false;
      }
    }
    return true;
  }
  std::string Summary() const {
    std::string out;
    for (const auto& [name, n] : rejected_) {
      out += fmt::format("{}{} node(s) rejected by {}", out.empty() ? "" : ", ", n, name);
    }
    return out;
  }

 private:
  Session* s_;
  const JobInfo& job_;
  const NodeFilter* extra_;
  mutable std::map<std::string_view, int> rejected_;
  struct FilterTiming {
    double seconds = 0;
    std::int64_t calls = 0;
  };
  mutable std::vector<FilterTiming> timings_;  // per filter plugin; empty without a timer
};

}  // namespace

Result<PluginSet> BuildPluginSet(const SchedulerConfig& config, const PluginRegistry& registry,
                                 const PluginDeps& deps) {
  PluginSet set;
  std::set<std::string> seen;
  std::vector<PluginConfig> all = config.plugins;
  const std::string& sort_name = config.queue_sort;
  bool sort_listed = false;
  for (const auto& p : all) sort_listed |= p.name == sort_name;
  if (!sort_listed) all.insert(all.begin(), PluginConfig{sort_name, 1, {}});
  for (std::size_t i = 0; i < all.size(); ++i) {
    const PluginConfig& pc = all[i];
    auto it = registry.find(pc.name);
    if (it == registry.end()) {
      std::string known;
      for (const auto& [name, f] : registry) known += (known.empty() ? "" : ", ") + name;
      Status unknown =
          InvalidArgumentError(fmt::format("unknown plugin '{}' (known: {})", pc.name, known));
      return i == 0 && !sort_listed ? unknown.WithPrefix("field 'queue_sort'") : unknown;
    }
    if (!seen.insert(pc.name).second) {
      return InvalidArgumentError(fmt::format("plugin '{}' is listed twice", pc.name));
    }
    auto made = it->second(pc.args, deps);
    if (!made.ok()) return made.status().WithPrefix("plugin '" + pc.name + "'");
    Plugin* p = made->get();
    set.owned.push_back(std::move(made).value());
    if (auto* q = dynamic_cast<QueueSortPlugin*>(p); q && pc.name == sort_name) {
      set.queue_sort = {p, q, pc.weight};
      if (auto* b = dynamic_cast<ServiceBandPlugin*>(p)) set.bands = {p, b, pc.weight};
    }
    AddIf(p, pc.weight, &set.pre_filters);
    AddIf(p, pc.weight, &set.filters);
    AddIf(p, pc.weight, &set.scores);
    AddIf(p, pc.weight, &set.reserves);
    AddIf(p, pc.weight, &set.permits);
    AddIf(p, pc.weight, &set.victims);
    AddIf(p, pc.weight, &set.guarantees);
    if (auto* pl = dynamic_cast<PlacementPlugin*>(p)) {
      if (set.placement.ext) {
        return InvalidArgumentError(fmt::format("two placement plugins: '{}' and '{}'",
                                                set.placement.plugin->Name(), pc.name));
      }
      set.placement = {p, pl, pc.weight};
    }
  }
  if (!set.queue_sort.ext) {
    return InvalidArgumentError(
        fmt::format("field 'queue_sort': '{}' is not a queue-sort plugin", sort_name));
  }
  if (!set.placement.ext) return InvalidArgumentError("no placement plugin (add 'topology')");
  return set;
}

Session::Session(TimePoint now, ClusterState* state, JobTable* jobs, const PluginSet* plugins,
                 const SchedulerConfig* config, CycleState* cycle, Decisions* out,
                 const Clock* timer, std::vector<JobId> pending, std::vector<JobInfo*> pending_jobs,
                 std::optional<int> lowest_victim_priority, std::vector<JobId>* queue_order,
                 bool waiting_notes)
    : ctx_{now, *state, *jobs, *cycle},
      state_(state),
      jobs_(jobs),
      plugins_(plugins),
      config_(config),
      out_(out),
      timer_(timer),
      pending_at_start_(std::move(pending)),
      lowest_victim_priority_(lowest_victim_priority),
      pending_jobs_(std::move(pending_jobs)),
      queue_order_(queue_order),
      waiting_notes_(waiting_notes) {
  CHECK(pending_jobs_.size() == pending_at_start_.size());
}

std::vector<JobId> Session::PendingQueue() {
  std::vector<JobInfo*> jobs = PendingJobs();
  std::vector<JobId> ids;
  ids.reserve(jobs.size());
  for (const JobInfo* j : jobs) ids.push_back(j->spec.id);
  return ids;
}

std::vector<JobInfo*> Session::PendingJobs() {
  ScopedTiming t(this, "queue-sort");
  plugins_->queue_sort.ext->PrepareSort(ctx_);
  auto eligible = [&](const JobInfo* job) {
    return job != nullptr && job->phase == JobPhase::kPending && job->eligible_at <= ctx_.now;
  };
  const QueueSortPlugin* q = plugins_->queue_sort.ext;
  std::vector<JobInfo*> pending;
  bool sorted = false;
  if (queue_cached_) {
    pending.reserve(queue_cache_.size());
    for (JobInfo* job : queue_cache_) {
      if (eligible(job)) pending.push_back(job);
    }
    // A subsequence of the order sorted earlier in this cycle.
    sorted = q->OrderFixedWithinCycle();
  } else {
    std::vector<JobInfo*> now_eligible;  // ascending id
    for (JobInfo* job : pending_jobs_) {
      if (eligible(job)) now_eligible.push_back(job);
    }
    // Start from the last order: the eligible jobs it lists, in its order, then the others by id.
    pending.reserve(now_eligible.size());
    if (queue_order_ != nullptr && !queue_order_->empty()) {
      std::vector<bool> placed(now_eligible.size(), false);
      auto by_id = [](const JobInfo* j, JobId id) { return j->spec.id < id; };
      for (JobId id : *queue_order_) {
        auto it = std::lower_bound(now_eligible.begin(), now_eligible.end(), id, by_id);
        if (it == now_eligible.end() || (*it)->spec.id != id) continue;
        const auto i = static_cast<std::size_t>(it - now_eligible.begin());
        if (placed[i]) continue;
        placed[i] = true;
        pending.push_back(*it);
      }
      for (std::size_t i = 0; i < now_eligible.size(); ++i) {
        if (!placed[i]) pending.push_back(now_eligible[i]);
      }
    } else {
      pending = std::move(now_eligible);
    }
  }
  auto before = [&](const JobInfo* a, const JobInfo* b) {
    if (q->Less(ctx_, *a, *b)) return true;
    if (q->Less(ctx_, *b, *a)) return false;
    if (a->spec.submit_time != b->spec.submit_time)
      return a->spec.submit_time < b->spec.submit_time;
    return a->spec.id < b->spec.id;
  };
  if (!sorted && !std::is_sorted(pending.begin(), pending.end(), before)) {
    std::stable_sort(pending.begin(), pending.end(), before);
  }
  queue_cache_ = pending;
  queue_cached_ = true;
  if (queue_order_ != nullptr) {
    queue_order_->clear();
    for (const JobInfo* j : pending) queue_order_->push_back(j->spec.id);
  }
  return pending;
}

const PluginStatus* Session::CachedFailure(const ShapeKey& key, int gpus, double rank) const {
  if (failures_version_ != state_->version()) return nullptr;
  auto it = failures_.find(key);
  if (it == failures_.end()) return nullptr;
  for (const auto& f : it->second) {
    if (gpus >= f.gpus && rank >= f.rank) return &f.status;
  }
  return nullptr;
}

PluginStatus Session::TryPlace(const JobInfo& job, Statement* stmt, const ExtraFilter& extra,
                               Placement* out) {
  for (const auto& pf : plugins_->pre_filters) {
    PluginStatus s = pf.ext->PreFilter(ctx_, job);
    if (!s.ok()) return s.WithPlugin(pf.plugin->Name());
  }
  const bool plugin_places_all = plugins_->placement.ext->PlacesShares();
  if (SharesGpu(job.spec) && !plugin_places_all) return PlaceShare(job, stmt, extra.filter, out);
  if (CpuOnly(job.spec) && !plugin_places_all) return PlaceCpuOnly(job, stmt, extra.filter, out);
  // A failure stands for the next job of this shape only when the placement plugin and every
  // filter say that their answers for this job are the shape's.
  bool cacheable = (extra.filter == nullptr || extra.family > 0) && !SharesGpu(job.spec) &&
                   plugins_->placement.ext->DecidedByShape(job);
  for (const auto& f : plugins_->filters) cacheable = cacheable && f.ext->DecidedByShape(job);
  const std::uint64_t family = extra.filter == nullptr ? 0 : extra.family;
  ShapeKey key{job.task_gpus,
               static_cast<int>(job.spec.topology.required.value_or(topo::Level::kNone)),
               job.accepted_gpus, family};
  if (cacheable) {
    if (const PluginStatus* f = CachedFailure(key, job.spec.gpus, extra.rank)) return *f;
    if (family != 0) {
      ShapeKey plain = key;
      plain.family = 0;
      if (const PluginStatus* f = CachedFailure(plain, job.spec.gpus, 0)) return *f;
    }
  }
  ChainFilter filter(this, job, extra.filter);
  std::vector<Placement> candidates;
  PluginStatus s;
  {
    ScopedTiming t(this, "placement");
    s = plugins_->placement.ext->Propose(ctx_, job, filter, config_->max_candidates, &candidates);
  }
  if (s.ok() && candidates.empty()) s = PluginStatus::Unschedulable("no candidate placement");
  if (!s.ok()) {
    std::string summary = filter.Summary();
    if (!summary.empty()) {
      std::string reason = s.reason() + "; " + summary;
      s = s.kind() == StatusKind::kUnresolvable ? PluginStatus::Unresolvable(std::move(reason))
                                                : PluginStatus::Unschedulable(std::move(reason));
    }
    s.WithPlugin(plugins_->placement.plugin->Name());
    if (cacheable && s.kind() == StatusKind::kUnschedulable) {
      if (failures_version_ != state_->version()) {
        failures_.clear();
        failures_version_ = state_->version();
      }
      auto& list = failures_[key];
      if (list.size() >= 8) list.erase(list.begin());
      list.push_back({job.spec.gpus, extra.rank, s});
    }
    return s;
  }
  std::size_t best = 0;
  if (candidates.size() > 1 && !plugins_->scores.empty()) {
    ScopedTiming t(this, "score");
    double best_score = 0;
    for (std::size_t i = 0; i < candidates.size(); ++i) {
      double total = 0;
      for (const auto& sp : plugins_->scores) {
        total += sp.weight * std::clamp(sp.ext->Score(ctx_, job, candidates[i]), 0.0, 100.0);
      }
      if (i == 0 || total > best_score) {
        best = i;
        best_score = total;
      }
    }
  }
  Placement& p = candidates[best];
  for (const auto& pm : plugins_->permits) {
    PluginStatus ps = pm.ext->Permit(ctx_, job, p);
    if (!ps.ok()) return ps.WithPlugin(pm.plugin->Name());
  }
  const std::size_t mark = stmt->size();
  for (const auto& a : p.nodes) {
    Status as;
    if (SharesGpu(job.spec)) {
      const topo::GpuSpec* gpu = state_->cluster().shape_of(a.node).gpu;
      auto amount = gpu ? ShareOn(job.spec, *gpu) : std::nullopt;
      CHECK(amount.has_value() && std::popcount(a.mask) == 1)
          << "placement plugin proposed a GPU that cannot host the share";
      as = stmt->AllocateShare({a.node, static_cast<std::uint8_t>(std::countr_zero(a.mask))},
                               *amount);
    } else if (!CpuOnly(job.spec)) {
      as = stmt->Allocate(a.node, a.mask);
    }
    // A placement plugin proposing busy GPUs is a bug in that plugin.
    CHECK(as.ok()) << "placement plugin proposed unavailable GPUs: " << as.ToString();
    if (Status hs = stmt->AllocateHost(a.node, HostOn(job, a)); !hs.ok()) {
      // Several tasks on one node may need more CPU or memory than the filter (one task) saw.
      stmt->RollbackTo(mark);
      return PluginStatus::Unschedulable(hs.message()).WithPlugin("resources");
    }
  }
  for (const auto& r : plugins_->reserves) r.ext->Reserve(ctx_, job, p);
  *out = std::move(p);
  return PluginStatus::Success();
}

PluginStatus Session::PlaceShare(const JobInfo& job, Statement* stmt, const NodeFilter* extra,
                                 Placement* out) {
  const topo::Cluster& c = state_->cluster();
  ChainFilter filter(this, job, extra);
  auto accepts = [&](topo::NodeId n) -> std::optional<GpuShareAmount> {
    const topo::GpuSpec* gpu = c.shape_of(n).gpu;
    if (gpu == nullptr) return std::nullopt;
    if (!job.accepted_gpus.empty() && std::find(job.accepted_gpus.begin(), job.accepted_gpus.end(),
                                                gpu) == job.accepted_gpus.end()) {
      return std::nullopt;
    }
    return ShareOn(job.spec, *gpu);
  };
  std::optional<topo::GpuRef> pick;
  GpuShareAmount amount;
  {
    ScopedTiming t(this, "placement");
    // Best fit among GPUs already shared the same way: the least room left after this share,
    // then the node with the fewest free whole GPUs, then GpuRef order.
    std::tuple<int, int, topo::GpuRef> best{};
    std::map<std::uint32_t, bool> node_ok;
    for (const auto& [ref, sh] : state_->shared_gpus()) {
      if (c.node(ref.node).health != topo::NodeHealth::kHealthy) continue;
      auto a = accepts(ref.node);
      if (!a || a->mig() != sh.used.mig()) continue;
      const int left = a->mig() ? (kMigComputeSlices - sh.used.compute_slices - a->compute_slices)
                                : (kMilliPerGpu - sh.used.milli - a->milli);
      if (left < 0 || sh.used.memory_slices + a->memory_slices > kMigMemorySlices) continue;
      auto [it, fresh] = node_ok.try_emplace(ref.node.value(), false);
      if (fresh) it->second = filter.Fits(ref.node);
      if (!it->second) continue;
      std::tuple<int, int, topo::GpuRef> key{left, state_->FreeGpus(ref.node), ref};
      if (!pick || key < best) {
        best = key;
        pick = ref;
        amount = *a;
      }
    }
    // Otherwise a fresh GPU on the node with the fewest free GPUs (whole nodes and domains stay
    // free for gangs), its lowest free GPU.
    for (int f = 1; !pick && f <= state_->max_node_gpus(); ++f) {
      for (std::uint32_t n : state_->NodesWithFree(f)) {
        const topo::NodeId id(n);
        auto a = accepts(id);
        if (!a || !filter.Fits(id)) continue;
        const std::uint64_t free_mask = ~c.node(id).allocated_mask;
        pick = topo::GpuRef{id, static_cast<std::uint8_t>(std::countr_zero(free_mask))};
        amount = *a;
        break;
      }
    }
  }
  if (!pick) {
    std::string reason =
        job.spec.gpu_milli > 0
            ? fmt::format("no GPU has {} milli free", job.spec.gpu_milli)
            : fmt::format("no GPU has room for MIG profile {}", job.spec.mig_profile);
    if (std::string summary = filter.Summary(); !summary.empty()) reason += "; " + summary;
    return PluginStatus::Unschedulable(std::move(reason))
        .WithPlugin(plugins_->placement.plugin->Name());
  }
  Placement p;
  p.nodes = {{pick->node, std::uint64_t{1} << pick->index}};
  p.span = topo::Level::kNode;
  for (const auto& pm : plugins_->permits) {
    PluginStatus ps = pm.ext->Permit(ctx_, job, p);
    if (!ps.ok()) return ps.WithPlugin(pm.plugin->Name());
  }
  const std::size_t mark = stmt->size();
  Status as = stmt->AllocateShare(*pick, amount);
  CHECK(as.ok()) << "share placement chose an unavailable GPU: " << as.ToString();
  if (Status hs = stmt->AllocateHost(pick->node, TaskHost(job)); !hs.ok()) {
    stmt->RollbackTo(mark);
    return PluginStatus::Unschedulable(hs.message()).WithPlugin("resources");
  }
  for (const auto& r : plugins_->reserves) r.ext->Reserve(ctx_, job, p);
  *out = std::move(p);
  return PluginStatus::Success();
}

PluginStatus Session::PlaceCpuOnly(const JobInfo& job, Statement* stmt, const NodeFilter* extra,
                                   Placement* out) {
  const topo::Cluster& c = state_->cluster();
  ChainFilter filter(this, job, extra);
  const HostResources need = TaskHost(job);
  std::optional<topo::NodeId> pick;
  {
    ScopedTiming t(this, "placement");
    // Best fit on CPU: the node with the least CPU left after the task, then the lowest id.
    std::int64_t best = 0;
    for (std::uint32_t n = 0; n < c.nodes().size(); ++n) {
      const topo::NodeId id(n);
      if (c.node(id).health != topo::NodeHealth::kHealthy) continue;
      const ClusterState::HostUsage& h = state_->Host(id);
      if (!state_->HostFits(id, need)) continue;
      if (!job.accepted_gpus.empty() &&
          std::find(job.accepted_gpus.begin(), job.accepted_gpus.end(), c.shape_of(id).gpu) ==
              job.accepted_gpus.end()) {
        continue;
      }
      const std::int64_t left = h.cpu_free() - need.cpu_milli;
      if (pick && left >= best) continue;
      if (!filter.Fits(id)) continue;
      pick = id;
      best = left;
    }
  }
  if (!pick) {
    std::string reason =
        fmt::format("no node has {} milli-CPU and {} MiB free", need.cpu_milli, need.memory_mib);
    for (const auto& r : job.spec.extended) {
      if (r.amount > 0) reason += fmt::format(", {} {}", r.amount, r.name);
    }
    if (std::string summary = filter.Summary(); !summary.empty()) reason += "; " + summary;
    return PluginStatus::Unschedulable(std::move(reason))
        .WithPlugin(plugins_->placement.plugin->Name());
  }
  Placement p;
  p.nodes = {{*pick, 0}};
  p.span = topo::Level::kNode;
  for (const auto& pm : plugins_->permits) {
    PluginStatus ps = pm.ext->Permit(ctx_, job, p);
    if (!ps.ok()) return ps.WithPlugin(pm.plugin->Name());
  }
  Status hs = stmt->AllocateHost(*pick, need);
  CHECK(hs.ok()) << "CPU-only placement chose a node without room: " << hs.ToString();
  for (const auto& r : plugins_->reserves) r.ext->Reserve(ctx_, job, p);
  *out = std::move(p);
  return PluginStatus::Success();
}

void Session::Unreserve(const JobInfo& job, const Placement& p) {
  for (auto it = plugins_->reserves.rbegin(); it != plugins_->reserves.rend(); ++it) {
    it->ext->Unreserve(ctx_, job, p);
  }
}

bool Session::FitsNow(const JobInfo& job) {
  Statement trial(state_);
  Placement p;
  if (!TryPlace(job, &trial, &p).ok()) return false;
  Unreserve(job, p);
  return true;
}

bool Session::PassesFilters(const JobInfo& job, topo::NodeId node) {
  for (const auto& f : plugins_->filters) {
    if (!f.ext->Filter(ctx_, job, node).ok()) return false;
  }
  return true;
}

void Session::Resize(JobInfo& job, Placement p) {
  p.span = SpanOf(state_->cluster(), p.nodes);
  job.placement = p;
  auto it = std::find_if(out_->resizes.begin(), out_->resizes.end(),
                         [&](const sched::Resize& r) { return r.job == job.spec.id; });
  if (it != out_->resizes.end()) {
    it->placement = std::move(p);
  } else {
    out_->resizes.push_back({job.spec.id, std::move(p)});
  }
}

void Session::Bind(JobInfo& job, Placement p, Statement* stmt) {
  stmt->Commit();
  job.phase = JobPhase::kRunning;
  job.start = ctx_.now;
  job.last_checkpoint = ctx_.now;
  job.nominated = false;
  ++job.attempts;
  const topo::Level preferred = job.spec.topology.preferred.value_or(topo::Level::kCore);
  p.span = SpanOf(state_->cluster(), p.nodes);
  job.placement = p;
  out_->binds.push_back({job.spec.id, std::move(p), job.placement.span <= preferred});
}

void Session::Reject(JobId id, std::string plugin, std::string reason) {
  auto it = jobs_->find(id);
  if (it != jobs_->end()) {
    JobInfo* gone = &it->second;
    std::replace(pending_jobs_.begin(), pending_jobs_.end(), gone, static_cast<JobInfo*>(nullptr));
    std::replace(queue_cache_.begin(), queue_cache_.end(), gone, static_cast<JobInfo*>(nullptr));
    jobs_->erase(it);
  }
  out_->rejections.push_back(
      {id, std::move(plugin), std::move(reason), RejectionKind::kUnresolvable});
}

double Session::LostGpuSeconds(const JobInfo& job) const {
  TimePoint since = std::max(job.start, job.last_checkpoint);
  return std::max(0.0, (ctx_.now - since).value()) * job.placement.gpus();
}

void Session::Evict(JobInfo& victim, const JobInfo& for_job) {
  victim.phase = JobPhase::kTerminating;
  victim.evict_deadline = ctx_.now + victim.spec.grace_period;
  victim.preempted_for = for_job.spec.id;
  ++victim.preemptions;
  out_->preemptions.push_back(
      {victim.spec.id, for_job.spec.id, victim.evict_deadline, LostGpuSeconds(victim)});
  WakeAt(victim.evict_deadline);
}

void Session::WakeAt(TimePoint t) {
  if (!out_->wake_at || t < *out_->wake_at) out_->wake_at = t;
}

void Session::AddTiming(std::string_view name, double seconds) { AddTiming(name, seconds, 1); }

void Session::AddTiming(std::string_view name, double seconds, std::int64_t calls) {
  auto it = timings_.find(name);
  if (it == timings_.end())
    it = timings_.emplace(std::string(name), Timing{std::string(name)}).first;
  it->second.seconds += seconds;
  it->second.calls += calls;
}

void Session::Finish() {
  // Bound, evicted or rejected jobs are no longer pending (a job never returns to pending within
  // a cycle), so their notes drop out here.
  std::vector<std::uint32_t> order(waiting_.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = static_cast<std::uint32_t>(i);
  std::sort(order.begin(), order.end(), [&](std::uint32_t a, std::uint32_t b) {
    return waiting_[a].first < waiting_[b].first ||
           (waiting_[a].first == waiting_[b].first && a < b);
  });
  for (std::size_t k = 0; k < order.size(); ++k) {
    if (k + 1 < order.size() && waiting_[order[k + 1]].first == waiting_[order[k]].first) continue;
    auto& [id, status] = waiting_[order[k]];
    auto it = jobs_->find(id);
    if (it != jobs_->end() && it->second.phase == JobPhase::kPending) {
      out_->waiting.push_back({id, std::move(status)});
    }
  }
  for (auto& [name, t] : timings_) out_->timings.push_back(std::move(t));
}

}  // namespace baton::sched
