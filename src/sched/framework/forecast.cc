#include "sched/framework/forecast.h"

#include <algorithm>
#include <bit>
#include <cstdlib>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

#include "sched/actions/action.h"
#include "sched/framework/scheduler.h"

namespace baton::sched {
namespace {

bool IsQuotaPlugin(std::string_view plugin) {
  return plugin == "tenant-quota" || plugin == "quota";
}

// GPUs the job could use now (healthy, idle, of its type, on nodes it may use and has not failed
// on) and those that only health keeps from it (idle GPUs of unhealthy nodes it may otherwise
// use, and of nodes that went down under it).
struct UsableGpus {
  std::int64_t free = 0;
  std::int64_t held_by_health = 0;
};

UsableGpus CountUsable(const ClusterState& state, const JobInfo& job) {
  const topo::Cluster& c = state.cluster();
  UsableGpus u;
  for (std::uint32_t n = 0; n < c.nodes().size(); ++n) {
    const topo::NodeId id(n);
    if (job.allowed_nodes && !(*job.allowed_nodes)[n]) continue;
    if (!job.accepted_gpus.empty() && std::find(job.accepted_gpus.begin(), job.accepted_gpus.end(),
                                                c.shape_of(id).gpu) == job.accepted_gpus.end()) {
      continue;
    }
    const topo::Node& node = c.node(id);
    const int idle = node.gpus - std::popcount(node.allocated_mask);
    if (node.health != topo::NodeHealth::kHealthy ||
        std::binary_search(job.bad_nodes.begin(), job.bad_nodes.end(), id)) {
      u.held_by_health += idle;
    } else {
      u.free += state.FreeGpus(id);
    }
  }
  return u;
}

}  // namespace

std::string_view WaitingKindName(WaitingKind k) {
  switch (k) {
    case WaitingKind::kStarting:
      return "starting";
    case WaitingKind::kQuota:
      return "quota";
    case WaitingKind::kFragmentation:
      return "fragmentation";
    case WaitingKind::kTopology:
      return "topology";
    case WaitingKind::kConstraint:
      return "constraint";
    case WaitingKind::kHealth:
      return "health";
    case WaitingKind::kReservation:
      return "reservation";
    case WaitingKind::kPriority:
      return "priority";
    case WaitingKind::kCapacity:
      return "capacity";
    case WaitingKind::kPreempting:
      return "preempting";
    case WaitingKind::kBackoff:
      return "backoff";
  }
  return "capacity";
}

std::string_view UnknownStartName(UnknownStart u) {
  switch (u) {
    case UnknownStart::kKnown:
      return "known";
    case UnknownStart::kNoEstimatedEnd:
      return "no-estimated-end";
    case UnknownStart::kBeyondHorizon:
      return "beyond-horizon";
  }
  return "known";
}

// One projection in progress (Project, split in steps so that WhatIf can end it from a base).
struct Scheduler::ProjectionRun {
  QueueForecast out;
  std::map<JobId, std::size_t> index;  // job -> out.jobs
  std::set<JobId> targets;             // jobs asked for that have no start yet
  JobId watch;
  Placement* watched = nullptr;
  Decisions first;  // the cycle at `now`
  TimePoint t;      // the last projected cycle's time
  std::optional<TimePoint> wake;
  bool horizon = false;  // stopped by max_cycles
  bool ran_out = false;  // stopped because nothing ends by its estimate any more
  bool drain = false;    // go on after the targets have a start (WhatIfBase)

  void RecordBinds(const Decisions& d, TimePoint at) {
    for (const Bind& b : d.binds) {
      if (watched != nullptr && b.job == watch && watched->empty()) *watched = b.placement;
      auto it = index.find(b.job);
      if (it == index.end() || out.jobs[it->second].estimated_start) continue;
      out.jobs[it->second].estimated_start = at;
      targets.erase(b.job);
    }
  }
  void Finish() {
    for (JobForecast& f : out.jobs) {
      if (f.estimated_start) continue;
      // Not reached because the jobs asked for started first counts as beyond the horizon too.
      f.unknown =
          ran_out && !horizon ? UnknownStart::kNoEstimatedEnd : UnknownStart::kBeyondHorizon;
    }
  }
};

namespace {

// A node's allocation after a projected step: what WhatIf's replay sets it to.
struct NodeAfter {
  std::uint32_t node = 0;
  std::uint64_t mask = 0;  // allocated GPUs
  std::int64_t cpu_used = 0;
  std::int64_t memory_used = 0;
};

// Where allocate or backfill of one projected cycle would have tried a job queued last.
struct TailTry {
  TimePoint t;                     // the cycle's time
  bool backfill = false;           // false: allocate's try (no reservation applies)
  std::vector<NodeAfter> changed;  // nodes changed since the previous TailTry
  std::vector<std::pair<std::uint32_t, TimePoint>> reserved;  // backfill: node, held from
};

// Records TailTry steps while a base projection runs.
class TailRecorder final : public TailProbe {
 public:
  TailRecorder(const ClusterState& state, std::vector<TailTry>* out)
      : seen_(state.cluster().nodes().size()), last_(seen_.size()), out_(out) {
    for (std::uint32_t n = 0; n < seen_.size(); ++n) {
      seen_[n] = state.NodeVersion(topo::NodeId(n));
      last_[n] = Read(state, n);
    }
  }
  void AllocateDone(Session& s) override { Add(s, false, {}); }
  void BackfillDone(Session& s, std::span<const std::optional<TimePoint>> reserved) override {
    Add(s, true, reserved);
  }

 private:
  static NodeAfter Read(const ClusterState& st, std::uint32_t n) {
    const topo::NodeId id(n);
    const ClusterState::HostUsage& h = st.Host(id);
    return {n, st.cluster().node(id).allocated_mask, h.cpu_used, h.memory_used};
  }
  void Add(Session& s, bool backfill, std::span<const std::optional<TimePoint>> reserved) {
    const ClusterState& st = s.state();
    TailTry step;
    step.t = s.now();
    step.backfill = backfill;
    for (std::uint32_t n = 0; n < seen_.size(); ++n) {
      // A node's version also moves for trial allocations undone since (reservation searches):
      // record only what differs.
      if (st.NodeVersion(topo::NodeId(n)) == seen_[n]) continue;
      seen_[n] = st.NodeVersion(topo::NodeId(n));
      const NodeAfter now = Read(st, n);
      if (now.mask == last_[n].mask && now.cpu_used == last_[n].cpu_used &&
          now.memory_used == last_[n].memory_used) {
        continue;
      }
      last_[n] = now;
      step.changed.push_back(now);
    }
    for (std::uint32_t n = 0; n < reserved.size(); ++n) {
      if (reserved[n]) step.reserved.push_back({n, *reserved[n]});
    }
    out_->push_back(std::move(step));
  }

  std::vector<std::uint32_t> seen_;  // per node: NodeVersion at the last step
  std::vector<NodeAfter> last_;      // per node: as last recorded
  std::vector<TailTry>* out_;
};

// Sets `node`'s allocation to `after` (whole GPUs and host use; no shares: see WhatIfReusable).
void SetNode(ClusterState* st, const NodeAfter& after) {
  const topo::NodeId id(after.node);
  const std::uint64_t now = st->cluster().node(id).allocated_mask;
  if ((now & ~after.mask) != 0) CHECK(st->Release(id, now & ~after.mask).ok());
  if ((after.mask & ~now) != 0) CHECK(st->Allocate(id, after.mask & ~now).ok());
  const ClusterState::HostUsage h = st->Host(id);
  HostResources more, less;
  (after.cpu_used > h.cpu_used ? more : less).cpu_milli = std::abs(after.cpu_used - h.cpu_used);
  (after.memory_used > h.memory_used ? more : less).memory_mib =
      std::abs(after.memory_used - h.memory_used);
  if (!less.empty()) CHECK(st->ReleaseHost(id, less).ok());
  if (!more.empty()) CHECK(st->AllocateHost(id, more).ok());
}

// Backfill's reservation filter (actions/backfill.cc) for the recorded reservations.
class RecordedReservations final : public NodeFilter {
 public:
  RecordedReservations(std::size_t nodes, const TailTry& step, std::optional<TimePoint> end)
      : from_(nodes), end_(end) {
    for (const auto& [n, at] : step.reserved) from_[n] = at;
  }
  bool Fits(topo::NodeId node) const override {
    const std::optional<TimePoint>& from = from_[node.value()];
    if (!from) return true;
    return end_.has_value() && *end_ <= *from;
  }

 private:
  std::vector<std::optional<TimePoint>> from_;
  std::optional<TimePoint> end_;
};

bool Quiet(const Decisions& d) {
  return d.binds.empty() && d.preemptions.empty() && d.rejections.empty() && d.requeues.empty() &&
         d.replacements.empty() && d.resizes.empty();
}

bool SamePlacement(const Placement& a, const Placement& b) {
  if (a.nodes.size() != b.nodes.size()) return false;
  for (std::size_t i = 0; i < a.nodes.size(); ++i) {
    if (a.nodes[i].node != b.nodes[i].node || a.nodes[i].mask != b.nodes[i].mask) return false;
  }
  return true;
}

// The same decisions (what changes state) in both.
bool SameDecisions(const Decisions& a, const Decisions& b) {
  if (a.binds.size() != b.binds.size() || a.preemptions.size() != b.preemptions.size() ||
      a.rejections.size() != b.rejections.size() || a.requeues.size() != b.requeues.size() ||
      !a.replacements.empty() || !b.replacements.empty() || !a.resizes.empty() ||
      !b.resizes.empty()) {
    return false;
  }
  for (std::size_t i = 0; i < a.binds.size(); ++i) {
    if (a.binds[i].job != b.binds[i].job ||
        !SamePlacement(a.binds[i].placement, b.binds[i].placement)) {
      return false;
    }
  }
  for (std::size_t i = 0; i < a.preemptions.size(); ++i) {
    if (a.preemptions[i].victim != b.preemptions[i].victim ||
        a.preemptions[i].for_job != b.preemptions[i].for_job) {
      return false;
    }
  }
  for (std::size_t i = 0; i < a.rejections.size(); ++i) {
    if (a.rejections[i].job != b.rejections[i].job) return false;
  }
  for (std::size_t i = 0; i < a.requeues.size(); ++i) {
    if (a.requeues[i].job != b.requeues[i].job) return false;
  }
  return true;
}

}  // namespace

// A projection of the queue without the asked-for job, run once and shared by what-ifs (see
// Scheduler::WhatIf): the cycle at `now`, then where each later cycle would try a job queued
// last (once every queued job has started, on to the last estimated end), then how the
// projection ended.
struct Scheduler::WhatIfBase {
  std::uint64_t epoch = 0;
  TimePoint now;
  int max_cycles = 0;
  Decisions first;  // the cycle at `now`
  std::vector<TailTry> tries;
  bool horizon = false;  // it stopped at max_cycles
  bool ran_out = false;  // it stopped because nothing ends by its estimate any more
};

QueueForecast Scheduler::Forecast(TimePoint now, const ForecastOptions& options) const {
  now = std::max(now, last_now_);
  std::unique_ptr<Scheduler> copy = Clone();
  if (!options.jobs.empty()) return Project(*copy, now, options, JobId(), nullptr);
  // The whole queue: the same projection WhatIf shares, so keep it for the what-ifs that follow.
  ProjectionRun run;
  ProjectStart(*copy, now, options, JobId(), nullptr, /*watch_kind_only=*/false, &run);
  std::shared_ptr<const WhatIfBase> base =
      RecordWhatIfBase(std::move(copy), now, options.max_cycles, &run);
  {
    std::lock_guard<std::mutex> lock(whatif_mu_);
    whatif_base_ = std::move(base);
  }
  run.Finish();
  return std::move(run.out);
}

Result<WhatIfAnswer> Scheduler::WhatIf(TimePoint now, GangJob job, int max_cycles,
                                       bool reference) const {
  now = std::max(now, last_now_);
  std::unique_ptr<Scheduler> copy = Clone();
  job.id = jobs_.empty() ? JobId(1) : JobId(jobs_.rbegin()->first.value() + 1);
  job.submit_time = TimePoint{};
  Decisions admitted;
  copy->Apply(Event::Submit(job), now, &admitted);
  if (!admitted.rejections.empty()) {
    return InvalidArgumentError(admitted.rejections.front().reason);
  }
  WhatIfAnswer answer;
  const ForecastOptions options{.jobs = {job.id}, .max_cycles = max_cycles};
  ProjectionRun run;
  ProjectStart(*copy, now, options, job.id, &answer.placement, /*watch_kind_only=*/!reference,
               &run);
  bool done = run.targets.empty();
  const JobInfo* waiting = copy->job(job.id);  // null: refused by the cycle at `now`
  if (!done && !reference && waiting != nullptr && waiting->phase == JobPhase::kPending &&
      WhatIfReusable(*copy, job.id)) {
    std::shared_ptr<const WhatIfBase> base;
    {
      std::lock_guard<std::mutex> lock(whatif_mu_);
      base = whatif_base_;
    }
    // A base at another time stands in only when the cycles at both times decided nothing and
    // nothing in between would have made one differ.
    auto usable = [&](const WhatIfBase& b) {
      if (b.epoch != epoch_ || b.max_cycles != max_cycles) return false;
      if (b.now == now) return SameDecisions(b.first, run.first);
      if (!Quiet(b.first) || !Quiet(run.first)) return false;
      const TimePoint lo = std::min(b.now, now);
      const TimePoint hi = std::max(b.now, now);
      for (const auto& [id, j] : jobs_) {
        if (j.phase == JobPhase::kRunning && j.spec.estimated_runtime.value() > 0 &&
            j.start + j.spec.estimated_runtime <= hi) {
          return false;
        }
        if (j.phase == JobPhase::kTerminating && j.evict_deadline <= hi) return false;
        if (j.phase == JobPhase::kPending && j.eligible_at > lo && j.eligible_at <= hi) {
          return false;
        }
      }
      return true;
    };
    if (base == nullptr || !usable(*base)) {
      base = BuildWhatIfBase(now, max_cycles);
      std::lock_guard<std::mutex> lock(whatif_mu_);
      whatif_base_ = base;
    }
    if (usable(*base)) {
      // False leaves `copy` changed: then answer from a fresh copy, every cycle run.
      if (!FinishFromBase(*base, *copy, &run)) {
        return WhatIf(now, std::move(job), max_cycles, /*reference=*/true);
      }
      done = true;
      ++whatif_reused_;
    }
  }
  if (!done) ProjectLoop(*copy, max_cycles, &run);
  run.Finish();
  for (const JobForecast& j : run.out.jobs) {
    if (j.job == job.id) answer.forecast = j;
  }
  if (!answer.placement.empty()) {
    answer.gpu = state_.cluster().shape_of(answer.placement.nodes.front().node).gpu;
  }
  return answer;
}

bool Scheduler::WhatIfReusable(const Scheduler& copy, JobId id) {
  const JobInfo& job = copy.jobs_.at(id);
  if (SharesGpu(job.spec) || CpuOnly(job.spec) || !copy.state_.shared_gpus().empty()) return false;
  for (const auto& p : copy.plugins_.owned) {
    if (!p->Stateless()) return false;
  }
  if (copy.plugins_.queue_sort.ext == nullptr || copy.plugins_.bands.ext != nullptr) return false;
  std::set<std::string_view> actions;
  bool preempt = false;
  for (const auto& a : copy.actions_) {
    if (!a->IgnoresLaterJobs(copy.config_)) return false;
    if (!actions.insert(a->Name()).second) return false;
    preempt |= a->Evicts();
  }
  // The job sorts behind every other job (queue sorts with fixed keys: so in every cycle), and
  // never outranks a victim.
  CycleState cycle;
  const PluginContext ctx{copy.last_now_, copy.state_, copy.jobs_, cycle};
  const QueueSortPlugin* q = copy.plugins_.queue_sort.ext;
  for (const auto& [other_id, other] : copy.jobs_) {
    if (other_id == id) continue;
    if (SharesGpu(other.spec)) return false;
    if (preempt && other.spec.preemptible && other.spec.priority < job.spec.priority) return false;
    // Session::PendingJobs's order: the plugin's, then submit time, then id.
    if (q->Less(ctx, other, job)) continue;
    if (q->Less(ctx, job, other)) return false;
    if (other.spec.submit_time != job.spec.submit_time) {
      if (other.spec.submit_time > job.spec.submit_time) return false;
      continue;
    }
    if (other_id > id) return false;
  }
  return true;
}

std::shared_ptr<const Scheduler::WhatIfBase> Scheduler::BuildWhatIfBase(TimePoint now,
                                                                        int max_cycles) const {
  std::unique_ptr<Scheduler> copy = Clone();
  copy->options_.waiting_notes = false;  // decisions are the same without notes
  ProjectionRun run;
  {
    std::vector<JobId> ids;
    std::vector<JobInfo*> records;
    copy->CollectPending(&ids, &records);
    for (std::size_t i = 0; i < ids.size(); ++i) {
      run.index[ids[i]] = i;
      JobForecast f;
      f.job = ids[i];
      run.out.jobs.push_back(f);
    }
    run.targets.insert(ids.begin(), ids.end());
  }
  run.first = copy->RunCycle({now, {}});
  run.out.cycles = 1;
  run.RecordBinds(run.first, now);
  run.t = now;
  run.wake = run.first.wake_at;
  return RecordWhatIfBase(std::move(copy), now, max_cycles, &run);
}

std::shared_ptr<const Scheduler::WhatIfBase> Scheduler::RecordWhatIfBase(
    std::unique_ptr<Scheduler> copy, TimePoint now, int max_cycles, ProjectionRun* run) const {
  auto base = std::make_shared<WhatIfBase>();
  base->epoch = epoch_;
  base->now = now;
  base->max_cycles = max_cycles;
  TailRecorder recorder(copy->state_, &base->tries);
  copy->tail_probe_ = &recorder;
  ProjectLoop(*copy, max_cycles, run);
  base->first = run->first;
  base->horizon = run->horizon;
  base->ran_out = run->ran_out;
  if (run->targets.empty()) {
    // Every queued job has started (`run` keeps that answer): go on, the queue empty, for a job
    // that starts after all of them, as its own projection would.
    ProjectionRun rest;
    rest.out.cycles = run->out.cycles;
    rest.t = run->t;
    rest.wake = run->wake;
    rest.drain = true;
    ProjectLoop(*copy, max_cycles, &rest);
    base->horizon = rest.horizon;
    base->ran_out = rest.ran_out;
  }
  copy->tail_probe_ = nullptr;
  return base;
}

bool Scheduler::FinishFromBase(const WhatIfBase& base, Scheduler& copy, ProjectionRun* run) {
  const JobId id = run->watch;
  const JobInfo& job = copy.jobs_.at(id);
  ClusterState& st = copy.state_;
  Decisions scratch;
  // The later cycles: where allocate or backfill would try the job, on the base's state then.
  for (const TailTry& step : base.tries) {
    for (const NodeAfter& n : step.changed) SetNode(&st, n);
    if (st.Free(Subtree{}) < job.spec.gpus) continue;  // a gang of whole GPUs cannot fit
    copy.cycle_.Clear();
    Session s(step.t, &st, &copy.jobs_, &copy.plugins_, &copy.config_, &copy.cycle_, &scratch,
              nullptr, {}, {}, std::nullopt, nullptr, /*waiting_notes=*/false);
    Statement stmt(&st);
    Placement p;
    PluginStatus status;
    if (!step.backfill || step.reserved.empty()) {
      status = s.TryPlace(job, &stmt, &p);
    } else {
      std::optional<TimePoint> end;
      if (job.spec.estimated_runtime.value() > 0) end = step.t + job.spec.estimated_runtime;
      const RecordedReservations filter(st.cluster().nodes().size(), step, end);
      status =
          s.TryPlace(job, &stmt,
                     {&filter, static_cast<std::uint64_t>(step.reserved.size()),
                      end ? end->since_epoch.value() : std::numeric_limits<double>::infinity()},
                     &p);
    }
    if (status.ok()) {
      s.Unreserve(job, p);
      Decisions bound;
      bound.binds.push_back({id, std::move(p)});
      run->RecordBinds(bound, step.t);
      return true;
    }
    // A job refused later than at `now` (not with the built-in plugins): run it for real.
    if (status.kind() == StatusKind::kUnresolvable) return false;
  }
  // Not placed in any cycle the projection ran: it ended the same way with the job.
  run->horizon = base.horizon;
  run->ran_out = base.ran_out;
  return true;
}

QueueForecast Scheduler::Project(Scheduler& s, TimePoint now, const ForecastOptions& options,
                                 JobId watch, Placement* watched) {
  ProjectionRun run;
  ProjectStart(s, now, options, watch, watched, /*watch_kind_only=*/false, &run);
  ProjectLoop(s, options.max_cycles, &run);
  run.Finish();
  return std::move(run.out);
}

void Scheduler::ProjectStart(Scheduler& s, TimePoint now, const ForecastOptions& options,
                             JobId watch, Placement* watched, bool watch_kind_only,
                             ProjectionRun* run) {
  Scheduler* copy = &s;
  QueueForecast& out = run->out;
  out.now = now;
  run->watch = watch;
  run->watched = watched;

  // Positions: the queue order a cycle at `now` walks (eligible jobs), then the others.
  std::vector<JobId> order;
  {
    std::vector<JobId> ids;
    std::vector<JobInfo*> records;
    copy->CollectPending(&ids, &records);
    std::vector<JobInfo*> later;
    for (JobInfo* j : records) {
      if (j->eligible_at > now) later.push_back(j);
    }
    Decisions none;
    copy->cycle_.Clear();
    Session session(now, &copy->state_, &copy->jobs_, &copy->plugins_, &copy->config_,
                    &copy->cycle_, &none, nullptr, std::move(ids), std::move(records), std::nullopt,
                    &copy->queue_order_, /*waiting_notes=*/false);
    order = session.PendingQueue();
    std::sort(later.begin(), later.end(), [](const JobInfo* a, const JobInfo* b) {
      return a->eligible_at != b->eligible_at ? a->eligible_at < b->eligible_at
                                              : a->spec.id < b->spec.id;
    });
    for (const JobInfo* j : later) order.push_back(j->spec.id);
  }
  std::map<JobId, std::size_t>& index = run->index;
  for (std::size_t i = 0; i < order.size(); ++i) {
    index[order[i]] = i;
    JobForecast f;
    f.job = order[i];
    f.position = static_cast<int>(i) + 1;
    out.jobs.push_back(std::move(f));
  }
  std::set<JobId>& targets = run->targets;
  if (options.jobs.empty()) {
    targets.insert(order.begin(), order.end());
  } else {
    for (JobId id : options.jobs) {
      if (index.contains(id)) targets.insert(id);
    }
  }

  // The first cycle, at `now`: what a real cycle would do now, and why each job still waits.
  run->first = copy->RunCycle({now, {}});
  const Decisions& first = run->first;
  out.cycles = 1;
  run->RecordBinds(first, now);
  for (const Waiting& w : first.waiting) {
    if (auto it = index.find(w.job); it != index.end()) out.jobs[it->second].status = w.status;
  }
  copy->options_.waiting_notes = false;

  // Kinds, read in the state the first cycle left.
  {
    std::vector<JobId> ids;
    std::vector<JobInfo*> records;
    copy->CollectPending(&ids, &records);
    Decisions none;
    copy->cycle_.Clear();
    Session probe(now, &copy->state_, &copy->jobs_, &copy->plugins_, &copy->config_, &copy->cycle_,
                  &none, nullptr, std::move(ids), std::move(records), std::nullopt, nullptr,
                  /*waiting_notes=*/false);
    const bool backfill = copy->BlockedJobsReserved();
    int best_ahead = std::numeric_limits<int>::min();  // highest priority ahead so far
    for (JobForecast& f : out.jobs) {
      const JobInfo* job = copy->job(f.job);
      const int ahead = best_ahead;
      if (job != nullptr) best_ahead = std::max(best_ahead, job->spec.priority);
      // Each kind reads only the job, the state and the priorities ahead of it.
      if (watch_kind_only && f.job != watch) continue;
      if (f.estimated_start == now) {
        f.kind = WaitingKind::kStarting;
        continue;
      }
      if (job == nullptr || job->phase != JobPhase::kPending) {
        // Rejected, or preempted into a grace period, by the first cycle: no start in sight.
        f.kind = WaitingKind::kCapacity;
        continue;
      }
      if (job->eligible_at > now) {
        f.kind = WaitingKind::kBackoff;
      } else if (job->nominated) {
        f.kind = WaitingKind::kPreempting;
      } else if (IsQuotaPlugin(f.status.plugin())) {
        f.kind = WaitingKind::kQuota;
      } else if (probe.FitsNow(*job)) {
        // Room now, yet not placed: held for a job ahead (backfill's reservation, or strict
        // order under head_of_line_blocking).
        f.kind = backfill ? WaitingKind::kReservation : WaitingKind::kPriority;
      } else {
        const UsableGpus u = CountUsable(copy->state_, *job);
        const std::int64_t gpus = job->spec.gpus;
        if (u.free >= gpus) {
          f.kind = WaitingKind::kFragmentation;
          if (job->spec.topology.required) {
            JobInfo relaxed = *job;
            relaxed.spec.topology.required.reset();
            if (probe.FitsNow(relaxed)) f.kind = WaitingKind::kTopology;
          }
        } else if (copy->state_.Free(Subtree{}) >= gpus) {
          f.kind = WaitingKind::kConstraint;
        } else if (u.free + u.held_by_health >= gpus) {
          f.kind = WaitingKind::kHealth;
        } else {
          f.kind = ahead > job->spec.priority ? WaitingKind::kPriority : WaitingKind::kCapacity;
        }
      }
    }
  }
  run->t = now;
  run->wake = first.wake_at;
}

void Scheduler::ProjectLoop(Scheduler& s, int max_cycles, ProjectionRun* run) {
  Scheduler* copy = &s;
  QueueForecast& out = run->out;
  // Later cycles: at each estimated end (or wake-up) in turn, the jobs that ended finish.
  TimePoint& t = run->t;
  std::optional<TimePoint>& wake = run->wake;
  while (!run->targets.empty() || run->drain) {
    if (out.cycles >= max_cycles) {
      run->horizon = true;
      break;
    }
    std::optional<TimePoint> next;
    auto consider = [&](TimePoint at) {
      if (!next || at < *next) next = at;
    };
    for (const auto& [id, j] : copy->jobs_) {
      if (j.phase == JobPhase::kRunning && j.spec.estimated_runtime.value() > 0) {
        consider(std::max(t, j.start + j.spec.estimated_runtime));
      } else if (j.phase == JobPhase::kTerminating && j.evict_deadline > t) {
        consider(j.evict_deadline);
      }
    }
    if (wake && *wake > t) consider(*wake);
    if (!next) {
      run->ran_out = true;
      break;
    }
    t = *next;
    std::vector<Event> ended;
    for (const auto& [id, j] : copy->jobs_) {
      if (j.phase == JobPhase::kRunning && j.spec.estimated_runtime.value() > 0 &&
          j.start + j.spec.estimated_runtime <= t) {
        ended.push_back(Event::Finish(id));
      }
    }
    Decisions d = copy->RunCycle({t, ended});
    ++out.cycles;
    wake = d.wake_at;
    run->RecordBinds(d, t);
  }
}

}  // namespace baton::sched
