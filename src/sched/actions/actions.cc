// The built-in actions. admit: rejects pending jobs a PreFilter says can never run (e.g. larger
// than the tenant's whole quota). allocate: places pending jobs in queue order, each gang whole
// or not at all; when backfill is configured, the first job blocked for lack of room stops it, so
// backfill can reserve for that job. backfill: gives the blocked head job(s) a reservation (the
// nodes and the time at which running jobs' estimated ends make room) and places later jobs that
// either end before the reservation or avoid its nodes. preempt: for a job still blocked, evicts
// the cheapest set of whole lower-priority gangs that makes room (graceful: victims keep their
// GPUs for their grace period); with preempt_by: las-band, of gangs in a strictly worse LAS band.
#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <tuple>

#include "sched/actions/action.h"

namespace baton::sched {
namespace {

// Whether `v` has run at least the policy's min_run_time since its (re)start; if not, the cycle
// is asked to run again when it has (a blocked job may then evict it).
bool OldEnough(Session& s, const JobInfo& v) {
  const TimePoint eligible = v.start + s.config().tenancy.min_run_time;
  if (eligible <= s.now()) return true;
  s.WakeAt(eligible);
  return false;
}

// The tenancy policy's word on `job` evicting `v`: another tenant's job only when the policy
// allows it, and no job younger than min_run_time.
bool VictimAllowed(Session& s, const JobInfo& job, const JobInfo& v) {
  return s.config().tenancy.MayPreempt(job.spec.tenant, v.spec.tenant) && OldEnough(s, v);
}

bool BlockedByRoom(const Session& s, const PluginStatus& st) {
  return st.kind() == StatusKind::kUnschedulable &&
         st.plugin() == s.plugins().placement.plugin->Name();
}

// Releases the GPUs of a growing or shrinking prefix of `jobs` inside one Statement, so that a
// search over prefix lengths costs O(total moves) releases instead of O(prefix) per probe.
class PrefixReleaser {
 public:
  PrefixReleaser(Session* s, std::vector<JobId> jobs)
      : s_(s), jobs_(std::move(jobs)), stmt_(&s->state()) {}
  void SetPrefix(std::size_t n) {
    while (marks_.size() > n) {
      stmt_.RollbackTo(marks_.back());
      marks_.pop_back();
    }
    while (marks_.size() < n) {
      marks_.push_back(stmt_.size());
      for (const auto& a : s_->jobs().at(jobs_[marks_.size() - 1]).placement.nodes) {
        CHECK(stmt_.Release(a.node, a.mask).ok());
      }
    }
  }
  std::size_t size() const { return jobs_.size(); }
  const std::vector<JobId>& jobs() const { return jobs_; }

 private:
  Session* s_;
  std::vector<JobId> jobs_;
  Statement stmt_;  // discards on destruction
  std::vector<std::size_t> marks_;
};

// The smallest n in [start, size] with fits(n) true, given fits is monotone and false below
// `start` (>= 1); nullopt when fits(size) is false. Galloping from `start`, then bisection, so a
// good lower bound costs one probe.
template <typename Fits>
std::optional<std::size_t> SmallestFittingPrefixFrom(std::size_t size, std::size_t start,
                                                     Fits fits) {
  start = std::clamp<std::size_t>(start, 1, size);
  if (fits(start)) return start;
  std::size_t lo = start;  // fits(lo) is false
  std::size_t hi = start;
  for (std::size_t step = 1;; step *= 2) {
    if (lo == size) return std::nullopt;
    hi = std::min(size, lo + step);
    if (fits(hi)) break;
    lo = hi;
  }
  while (hi - lo > 1) {
    const std::size_t mid = lo + (hi - lo) / 2;
    if (fits(mid)) {
      hi = mid;
    } else {
      lo = mid;
    }
  }
  return hi;
}

class AdmitAction final : public Action {
 public:
  std::string_view Name() const override { return "admit"; }
  void Execute(Session& s) override {
    if (s.plugins().pre_filters.empty()) return;  // nothing could reject
    std::vector<JobId> reject;
    std::vector<PluginStatus> why;
    for (JobId id : s.pending_at_start()) {
      const JobInfo& job = s.jobs().at(id);
      if (job.phase != JobPhase::kPending || job.attempts > 0) continue;
      for (const auto& pf : s.plugins().pre_filters) {
        PluginStatus st = pf.ext->PreFilter(s.ctx(), job);
        if (st.kind() == StatusKind::kUnresolvable) {
          reject.push_back(id);
          why.push_back(st.WithPlugin(pf.plugin->Name()));
          break;
        }
      }
    }
    for (std::size_t i = 0; i < reject.size(); ++i) {
      s.Reject(reject[i], why[i].plugin(), why[i].reason());
    }
  }
};

class AllocateAction final : public Action {
 public:
  std::string_view Name() const override { return "allocate"; }
  void Execute(Session& s) override {
    // Strict order (head_of_line_blocking) or backfill: the first job blocked for room stops
    // allocate; otherwise every job that fits is placed (first-fit).
    const bool head_blocks = s.config().head_of_line_blocking || s.HasAction("backfill");
    for (JobInfo* pending : s.PendingJobs()) {
      JobInfo& job = *pending;
      const JobId id = job.spec.id;
      Statement stmt(&s.state());
      Placement p;
      PluginStatus st = s.TryPlace(job, &stmt, &p);
      if (st.ok()) {
        s.Bind(job, std::move(p), &stmt);
        continue;
      }
      if (st.kind() == StatusKind::kUnresolvable) {
        s.Reject(id, st.plugin(), st.reason());
        continue;
      }
      const bool blocked = BlockedByRoom(s, st);
      s.Wait(job, std::move(st));
      if (head_blocks && blocked) break;
    }
  }
};

// The nodes reservations hold, each from the earliest time one of them starts.
class ReservedNodes {
 public:
  explicit ReservedNodes(std::size_t nodes) : from_(nodes) {}
  // Holds `node` from `at` (or from earlier, if it is already held from then).
  void Hold(topo::NodeId node, TimePoint at) {
    auto& f = from_[node.value()];
    if (!f) ++count_;
    f = f ? std::min(*f, at) : at;
  }
  const std::optional<TimePoint>& From(topo::NodeId node) const { return from_[node.value()]; }
  std::size_t size() const { return count_; }
  bool empty() const { return count_ == 0; }

 private:
  std::vector<std::optional<TimePoint>> from_;  // per node; nullopt: not reserved
  std::size_t count_ = 0;
};

// Nodes a reservation holds and until when; a backfilled job may use such a node only if it
// ends (by its estimate) before the reservation starts.
class ReservationFilter final : public NodeFilter {
 public:
  ReservationFilter(const ReservedNodes* reserved, std::optional<TimePoint> end)
      : reserved_(reserved), end_(end) {}
  bool Fits(topo::NodeId node) const override {
    const std::optional<TimePoint>& from = reserved_->From(node);
    if (!from) return true;
    return end_.has_value() && *end_ <= *from;
  }

 private:
  const ReservedNodes* reserved_;
  std::optional<TimePoint> end_;
};

class BackfillAction final : public Action {
 public:
  std::string_view Name() const override { return "backfill"; }
  void Execute(Session& s) override {
    ReservedNodes reserved(s.state().cluster().nodes().size());
    int reservations = 0;
    for (JobInfo* pending : s.PendingJobs()) {
      JobInfo& job = *pending;
      const JobId id = job.spec.id;
      std::optional<TimePoint> end;
      if (job.spec.estimated_runtime.value() > 0) end = s.now() + job.spec.estimated_runtime;
      ReservationFilter filter(&reserved, end);
      Statement stmt(&s.state());
      Placement p;
      // Reservation sets only grow within the cycle: each size is its own filter family, and a
      // later (or unknown) end time accepts fewer reserved nodes.
      Session::ExtraFilter extra;
      if (!reserved.empty()) {
        extra = {&filter, static_cast<std::uint64_t>(reserved.size()),
                 end ? end->since_epoch.value() : std::numeric_limits<double>::infinity()};
      }
      PluginStatus st = s.TryPlace(job, &stmt, extra, &p);
      if (st.ok()) {
        s.Bind(job, std::move(p), &stmt);
        continue;
      }
      if (st.kind() == StatusKind::kUnresolvable) {
        s.Reject(id, st.plugin(), st.reason());
        continue;
      }
      const bool blocked = BlockedByRoom(s, st);
      s.Wait(job, std::move(st));
      if (reservations < s.config().backfill_reservations && blocked) {
        ++reservations;
        Reserve(s, job, &reserved);
      }
    }
  }

 private:
  // Finds when and where `job` could start if running jobs end at their estimates, and holds
  // those nodes from then on.
  void Reserve(Session& s, const JobInfo& job, ReservedNodes* reserved) {
    if (job.task_gpus <= 0) return;  // CPU-only: reservations hold GPUs
    std::vector<std::pair<TimePoint, JobId>> ends;
    for (const auto& [id, r] : s.jobs()) {
      if (SharesGpu(r.spec)) continue;  // a shared GPU frees only with its last share
      if (r.phase == JobPhase::kRunning && r.spec.estimated_runtime.value() > 0) {
        ends.push_back({std::max(s.now(), r.start + r.spec.estimated_runtime), id});
      } else if (r.phase == JobPhase::kTerminating) {
        ends.push_back({std::max(s.now(), r.evict_deadline), id});
      }
    }
    std::sort(ends.begin(), ends.end());
    const bool cacheable = reserved->empty() && job.admission != 0;
    if (!cacheable || cache_.admission != job.admission || cache_.version != s.state().version() ||
        cache_.ends != ends) {
      std::optional<TimePoint> at;
      Placement p;
      Search(s, job, *reserved, ends, &at, &p);
      // Read after the search's trial releases are undone: the state it leaves.
      cache_ = {job.admission, s.state().version(), std::move(ends), at, {}};
      for (const auto& a : p.nodes) cache_.nodes.push_back(a.node);
      if (!cacheable) cache_.admission = 0;
    }
    if (!cache_.at) return;
    for (topo::NodeId n : cache_.nodes) reserved->Hold(n, *cache_.at);
    s.WakeAt(*cache_.at);
  }

  // The reservation search: the earliest prefix of `ends` (sorted) after which the job fits, in
  // the state the cycle has now. On success `*at` is when that prefix has ended and `*p` the
  // placement then; otherwise `*at` stays nullopt. Leaves the state as it found it.
  static void Search(Session& s, const JobInfo& job, const ReservedNodes& reserved,
                     const std::vector<std::pair<TimePoint, JobId>>& ends,
                     std::optional<TimePoint>* at, Placement* p) {
    // Whether the job fits once the first `count` ends have happened; on success the placement.
    ReservationFilter none(&reserved, std::nullopt);
    std::vector<JobId> order;
    order.reserve(ends.size());
    for (const auto& e : ends) order.push_back(e.second);
    PrefixReleaser future(&s, std::move(order));
    auto fits_after = [&](std::size_t count, Placement* out) {
      future.SetPrefix(count);
      if (s.state().Free(Subtree{}) < job.spec.gpus) return false;
      Statement trial(&s.state());
      if (!s.TryPlace(job, &trial, {&none, 0, 0}, out).ok()) return false;
      s.Unreserve(job, *out);
      return true;
    };
    if (ends.empty() || !fits_after(ends.size(), p)) return;
    // More ends free a superset of GPUs, so the first fitting prefix is a monotone search.
    std::size_t hi = *SmallestFittingPrefixFrom(ends.size(), 1, [&](std::size_t n) {
      Placement q;
      return fits_after(n, &q);
    });
    // Equal end times release together.
    while (hi < ends.size() && ends[hi].first == ends[hi - 1].first) ++hi;
    fits_after(hi, p);
    *at = ends[hi - 1].first;
  }

  // The last reservation searched for, reused by a later cycle (the head job is often blocked
  // for many cycles in which nothing but arrivals happen) while everything the search reads is
  // unchanged: the same job (admission), the same allocation state (version) and the same end
  // times of the same GPU-holding jobs (which also pins `now` wherever it clamps an end). Only a
  // cycle's first reservation is cached (later ones also depend on the earlier ones' nodes). Like
  // the Session's failure cache, sound for plugins whose PreFilter, Filter, Score and Permit
  // answers depend only on the job, the allocation state and the jobs holding GPUs (the
  // built-in ones). Reserve plugins see no calls on a hit: the search only pairs Reserve with
  // Unreserve.
  struct CachedReservation {
    std::uint64_t admission = 0;  // 0: nothing cached
    std::uint64_t version = 0;
    std::vector<std::pair<TimePoint, JobId>> ends;
    std::optional<TimePoint> at;  // nullopt: the job fits nowhere even after every end
    std::vector<topo::NodeId> nodes;
  };
  CachedReservation cache_;
};

class PreemptAction final : public Action {
 public:
  std::string_view Name() const override { return "preempt"; }
  void Execute(Session& s) override {
    if (s.plugins().victims.empty() || !s.lowest_victim_priority()) return;
    const int lowest = *s.lowest_victim_priority();
    // preempt_by: las-band: a waiting job outranks running jobs (of no higher priority) in a
    // strictly worse LAS band; a running job's band counts the service of its current run.
    const ServiceBandPlugin* las = nullptr;
    if (s.config().preempt_by == PreemptBy::kLasBand) {
      las = s.plugins().bands.ext;
      if (las == nullptr) return;
    }
    // Bounded effort per cycle: the first few blocked jobs that outrank some victim. Running jobs
    // are listed once (in id order, as the table holds them); evictions only take jobs out of the
    // running phase, which TryPreempt checks.
    std::vector<const JobInfo*> running;
    std::vector<int> bands;  // las-band: per running job
    int worst_band = 0;      // las-band: of the preemptible running jobs
    auto list_running = [&] {
      for (const auto& [vid, v] : s.jobs()) {
        if (v.phase != JobPhase::kRunning || SharesGpu(v.spec)) continue;
        running.push_back(&v);
        if (!las) continue;
        const double run = std::max(0.0, (s.now() - v.start).value()) * v.placement.gpus();
        bands.push_back(las->BandOf(v.attained_gpu_seconds + run));
        if (v.spec.preemptible && v.start < s.now()) {
          worst_band = std::max(worst_band, bands.back());
        }
      }
    };
    if (las) list_running();
    int attempts = 0;
    VictimCache cache;
    for (JobInfo* pending : s.PendingJobs()) {
      JobInfo& job = *pending;
      if (job.nominated) continue;
      if (las ? las->Band(job) >= worst_band : job.spec.priority <= lowest) continue;
      if (++attempts > s.config().max_preemptors_per_cycle) break;
      if (running.empty()) list_running();
      TryPreempt(s, job, running, las, bands, &cache);
    }
  }

 private:
  static bool Fits(Session& s, const JobInfo& job) { return s.FitsNow(job); }

  // Whether `job` fits once the victims in `set` are gone.
  static bool FitsWithout(Session& s, const JobInfo& job, const std::vector<JobId>& set) {
    Statement freed(&s.state());
    for (JobId vid : set) {
      for (const auto& a : s.jobs().at(vid).placement.nodes)
        CHECK(freed.Release(a.node, a.mask).ok());
    }
    return s.state().Free(Subtree{}) >= job.spec.gpus && Fits(s, job);
  }

  struct Candidate {
    double cost;
    JobId id;
    const JobInfo* job;
    std::size_t running_index;  // into the running list
    bool operator<(const Candidate& o) const {
      return cost < o.cost || (cost == o.cost && id < o.id);
    }
  };
  // Candidates (indexes into the sorted candidates, cost order) per scope switch of one tier.
  struct ScopeCandidates {
    std::vector<std::size_t> index;
    bool all_inside = true;  // every candidate's GPUs lie inside the scope
  };
  // The victim list of the previous preemptor in this cycle, reused by the next one when every
  // running job has the same price (or none) for it, or when the only change is that some
  // candidates stopped being candidates (evicted meanwhile): then the sorted list and the
  // per-scope lists are filtered, which keeps their order, instead of being rebuilt. Lives for
  // one Execute: within it only evictions change the victims (they keep their GPUs and
  // placements), and nothing cached depends on the allocation state, which Statements change
  // and the search reads afresh.
  struct VictimCache {
    bool valid = false;
    std::vector<std::optional<double>> price;  // per running job (parallel to `running`)
    std::vector<Candidate> candidates;         // sorted
    bool costs_nonnegative = true;
    int tier = -1;  // the tier by_scope is for; -1: not built
    std::map<std::uint32_t, ScopeCandidates> by_scope;
    std::vector<bool> multi_scope;  // per candidate: its GPUs span several scopes of `tier`
  };

  // Prices every running job as a victim of `job` (nullopt: not a candidate).
  static void PriceVictims(Session& s, const JobInfo& job,
                           const std::vector<const JobInfo*>& running, const ServiceBandPlugin* las,
                           const std::vector<int>& bands,
                           std::vector<std::optional<double>>* price) {
    price->assign(running.size(), std::nullopt);
    const int job_band = las ? las->Band(job) : 0;
    for (std::size_t r = 0; r < running.size(); ++r) {
      // Jobs sharing a GPU are not victims yet (not listed): their GPU frees only with its last
      // share.
      const JobInfo& v = *running[r];
      if (v.phase != JobPhase::kRunning) continue;
      if (!VictimAllowed(s, job, v)) continue;
      // Jobs bound this cycle are spared: their band is that of earlier runs only.
      if (las &&
          (v.start >= s.now() || bands[r] <= job_band || v.spec.priority > job.spec.priority)) {
        continue;
      }
      double cost = 0;
      bool ok = true;
      for (const auto& vp : s.plugins().victims) {
        auto c = las ? vp.ext->EvictionCost(s.ctx(), job, v) : vp.ext->VictimCost(s.ctx(), job, v);
        if (!c) {
          ok = false;
          break;
        }
        cost += vp.weight * *c;
      }
      if (ok) (*price)[r] = cost;
    }
  }

  // Brings `cache` up to date for the prices in `price` (see VictimCache).
  static void UpdateCandidates(const std::vector<const JobInfo*>& running,
                               std::vector<std::optional<double>> price, VictimCache* cache) {
    constexpr std::size_t npos = ~std::size_t{0};
    bool only_dropped = cache->valid;
    for (std::size_t r = 0; r < price.size() && only_dropped; ++r) {
      only_dropped = price[r] == cache->price[r] || (!price[r] && cache->price[r]);
    }
    if (only_dropped) {
      if (price == cache->price) return;
      // Drop the candidates that are gone, keeping order; remap the scope lists.
      std::vector<std::size_t> remap(cache->candidates.size(), npos);
      std::size_t kept = 0;
      std::vector<bool> kept_multi;
      cache->costs_nonnegative = true;
      for (std::size_t i = 0; i < cache->candidates.size(); ++i) {
        const Candidate& cand = cache->candidates[i];
        if (!price[cand.running_index]) continue;
        remap[i] = kept;
        cache->costs_nonnegative &= cand.cost >= 0;
        cache->candidates[kept++] = cand;
        if (cache->tier >= 0) kept_multi.push_back(cache->multi_scope[i]);
      }
      cache->candidates.resize(kept);
      if (cache->tier >= 0) {
        cache->multi_scope = std::move(kept_multi);
        for (auto it = cache->by_scope.begin(); it != cache->by_scope.end();) {
          ScopeCandidates& list = it->second;
          std::size_t n = 0;
          list.all_inside = true;
          for (std::size_t i : list.index) {
            if (remap[i] == npos) continue;
            list.index[n++] = remap[i];
            list.all_inside &= !cache->multi_scope[remap[i]];
          }
          list.index.resize(n);
          it = n == 0 ? cache->by_scope.erase(it) : std::next(it);
        }
      }
      cache->price = std::move(price);
      return;
    }
    cache->valid = true;
    cache->candidates.clear();
    cache->costs_nonnegative = true;
    for (std::size_t r = 0; r < running.size(); ++r) {
      if (!price[r]) continue;
      cache->candidates.push_back({*price[r], running[r]->spec.id, running[r], r});
      cache->costs_nonnegative &= *price[r] >= 0;
    }
    std::sort(cache->candidates.begin(), cache->candidates.end());
    cache->price = std::move(price);
    cache->tier = -1;
    cache->by_scope.clear();
    cache->multi_scope.clear();
  }

  // Builds the per-scope candidate lists of `tier` in `cache` unless they are already there.
  static void BuildScopes(const topo::Cluster& c, int tier, VictimCache* cache) {
    if (cache->tier == tier) return;
    cache->tier = tier;
    cache->by_scope.clear();
    cache->multi_scope.assign(cache->candidates.size(), false);
    if (tier < 0) return;
    const auto& candidates = cache->candidates;
    auto& by_scope = cache->by_scope;
    for (std::size_t i = 0; i < candidates.size(); ++i) {
      std::uint32_t last = ~0u;
      int scopes_of_victim = 0;
      for (const auto& a : candidates[i].job->placement.nodes) {
        const topo::SwitchId sw = c.node(a.node).ancestors[tier];
        if (!sw.valid() || sw.value() == last) continue;
        last = sw.value();
        auto& list = by_scope[sw.value()];
        if (list.index.empty() || list.index.back() != i) {
          list.index.push_back(i);
          ++scopes_of_victim;
        }
      }
      if (scopes_of_victim > 1) {
        cache->multi_scope[i] = true;
        for (const auto& a : candidates[i].job->placement.nodes) {
          const topo::SwitchId sw = c.node(a.node).ancestors[tier];
          if (sw.valid()) by_scope[sw.value()].all_inside = false;
        }
      }
    }
  }

  // Returns whether a preemption was started.
  // `las` (preempt_by: las-band): victims are running jobs of no higher priority, not bound in
  // this cycle, whose band (`bands`, parallel to `running`) is strictly worse than the job's;
  // priced by EvictionCost.
  // Otherwise victim plugins' VictimCost decides. `cache` carries the victim list from one
  // preemptor to the next within the cycle.
  static bool TryPreempt(Session& s, JobInfo& job, const std::vector<const JobInfo*>& running,
                         const ServiceBandPlugin* las, const std::vector<int>& bands,
                         VictimCache* cache) {
    // It may fit already (room freed earlier in this cycle): allocate places it next cycle.
    if (Fits(s, job)) return false;
    if (job.task_gpus <= 0) return false;  // CPU-only: evictions are priced in GPUs
    {
      std::vector<std::optional<double>> price;
      PriceVictims(s, job, running, las, bands, &price);
      UpdateCandidates(running, std::move(price), cache);
    }
    const std::vector<Candidate>& candidates = cache->candidates;
    const bool costs_nonnegative = cache->costs_nonnegative;
    // Victims are chosen inside one scope so that the freed GPUs sit together: the subtrees of the
    // job's required level, or else of the highest switch tier below the whole cluster; the whole
    // cluster is the fallback. The scope whose cheapest sufficient prefix costs least wins (at
    // equal cost, the lowest switch id).
    const topo::Cluster& c = s.state().cluster();
    const topo::Level required = job.spec.topology.required.value_or(topo::Level::kCore);
    int tier = -1;
    for (int t = 0; t < c.tier_count(); ++t) {
      if (c.tier_level(t) <= required && !s.state().SwitchesOfTier(t).empty()) tier = t;
    }
    if (tier >= 0 && s.state().SwitchesOfTier(tier).size() == 1) tier = -1;  // that is the root
    // When the scopes are exactly the subtrees of the job's required level, the gang must land
    // inside one of them; since it fits nowhere now, evicting victims that sit wholly inside one
    // scope can only help there, so that scope's nodes must then hold all its tasks.
    const bool scope_is_required =
        tier >= 0 && job.spec.topology.required && c.tier_level(tier) == required;
    std::vector<JobId> chosen;
    double best_cost = 0;
    std::optional<std::uint32_t> best_scope;
    BuildScopes(c, tier, cache);
    const std::map<std::uint32_t, ScopeCandidates>& by_scope = cache->by_scope;
    // A lower bound on a scope's sufficient prefix: after evicting it, the scope needs job.gpus
    // free GPUs and (when scope_is_required) room for every task on its nodes. Returns 0 when
    // even all candidates are not enough (then the scope cannot fit the job).
    const int g = job.task_gpus;
    const std::int64_t tasks = job.spec.gpus / g;
    std::vector<int> node_free;  // per node touched by least_prefix: free GPUs; -1 untouched
    std::vector<std::uint32_t> touched;
    auto least_prefix = [&](std::uint32_t sw, const ScopeCandidates& list) -> std::size_t {
      const Subtree scope{SubtreeKind::kSwitch, sw};
      std::int64_t free = s.state().Free(scope);
      const bool count_tasks = scope_is_required && list.all_inside;
      std::int64_t room = count_tasks ? s.state().Slots(scope, g) : tasks;
      if (count_tasks && node_free.empty()) node_free.assign(c.nodes().size(), -1);
      std::size_t k = 0;
      for (; k < list.index.size(); ++k) {
        if (k > 0 && free >= job.spec.gpus && room >= tasks) break;
        for (const auto& a : candidates[list.index[k]].job->placement.nodes) {
          if (c.node(a.node).ancestors[tier].value() != sw) continue;
          const bool healthy = c.node(a.node).health == topo::NodeHealth::kHealthy;
          const int freed = healthy ? std::popcount(a.mask) : 0;
          free += freed;
          if (!count_tasks) continue;
          int& f = node_free[a.node.value()];
          if (f < 0) {
            f = s.state().FreeGpus(a.node);
            touched.push_back(a.node.value());
          }
          room += (f + freed) / g - f / g;
          f += freed;
        }
      }
      for (std::uint32_t n : touched) node_free[n] = -1;
      touched.clear();
      return free >= job.spec.gpus && room >= tasks ? k : 0;
    };
    auto try_scope = [&](std::optional<std::uint32_t> sw, std::size_t start) {
      std::vector<JobId> order;
      std::vector<double> costs;
      if (sw) {
        auto it = by_scope.find(*sw);
        if (it == by_scope.end()) return;
        for (std::size_t i : it->second.index) {
          order.push_back(candidates[i].id);
          costs.push_back(candidates[i].cost);
        }
      } else {
        for (const Candidate& cand : candidates) {
          order.push_back(cand.id);
          costs.push_back(cand.cost);
        }
      }
      if (order.empty()) return;
      PrefixReleaser freed(&s, order);
      // Room inside the scope is required first: it keeps victims local and spares most of the
      // (costly) placement probes.
      const Subtree scope = sw ? Subtree{SubtreeKind::kSwitch, *sw} : Subtree{};
      auto fits = [&](std::size_t n) {
        freed.SetPrefix(n);
        return s.state().Free(scope) >= job.spec.gpus && Fits(s, job);
      };
      const std::optional<std::size_t> n = SmallestFittingPrefixFrom(order.size(), start, fits);
      if (!n) return;
      double total = 0;
      for (std::size_t i = 0; i < *n; ++i) total += costs[i];
      if (chosen.empty() || total < best_cost ||
          (total == best_cost && sw && best_scope && *sw < *best_scope)) {
        best_cost = total;
        best_scope = sw;
        chosen.assign(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(*n));
      }
    };
    // Scopes that cannot hold the job even with every candidate evicted are skipped. The others
    // go in order of a lower bound on their cost (the cost of their least sufficient prefix), so
    // that once the bound passes the best cost found no later scope can win and the search
    // stops. A negative cost voids the bound: then every feasible scope is tried, in switch order.
    struct ScopeBound {
      double bound;
      std::uint32_t sw;
      std::size_t start;
      bool operator<(const ScopeBound& o) const {
        return bound < o.bound || (bound == o.bound && sw < o.sw);
      }
    };
    std::vector<ScopeBound> scopes;
    scopes.reserve(by_scope.size());
    for (const auto& [sw, list] : by_scope) {
      const std::size_t least = least_prefix(sw, list);
      if (least == 0) continue;
      double bound = 0;
      for (std::size_t k = 0; k < least && costs_nonnegative; ++k) {
        bound += candidates[list.index[k]].cost;
      }
      scopes.push_back({bound, sw, least});
    }
    std::sort(scopes.begin(), scopes.end());
    for (const ScopeBound& sb : scopes) {
      if (costs_nonnegative && !chosen.empty() &&
          (sb.bound > best_cost || (sb.bound == best_cost && best_scope && sb.sw > *best_scope))) {
        break;
      }
      try_scope(sb.sw, sb.start);
    }
    if (chosen.empty()) try_scope(std::nullopt, 1);
    if (chosen.empty()) return false;
    // Drop victims that turn out unnecessary, most expensive first (bounded effort).
    for (std::size_t i = chosen.size(); i-- > 0 && chosen.size() <= kMaxPruned;) {
      std::vector<JobId> without = chosen;
      without.erase(without.begin() + static_cast<std::ptrdiff_t>(i));
      if (FitsWithout(s, job, without)) chosen = std::move(without);
    }
    for (JobId vid : chosen) s.Evict(s.jobs().at(vid), job);
    job.nominated = true;
    s.Wait(job, PluginStatus::Unschedulable(
                    fmt::format("waiting for {} preempted job(s) to release GPUs", chosen.size()))
                    .WithPlugin("preempt"));
    return true;
  }

  static constexpr std::size_t kMaxPruned = 16;
};

// Orders jobs for reclaim and shrink: lowest priority first, then least work lost, then id.
struct LowestFirst {
  const Session* s;
  bool operator()(const JobInfo* a, const JobInfo* b) const {
    if (a->spec.priority != b->spec.priority) return a->spec.priority < b->spec.priority;
    const double la = s->LostGpuSeconds(*a);
    const double lb = s->LostGpuSeconds(*b);
    if (la != lb) return la < lb;
    return a->spec.id < b->spec.id;
  }
};

// reclaim: a pending job of a tenant within its guarantee (after the job) that cannot be placed
// takes back GPUs lent to tenants above their guarantee: whole preemptible gangs of such tenants
// are evicted gracefully, lowest priority (then least lost work) first, only while their tenant
// stays above its guarantee before the eviction, until the job fits. Guarantees come from
// GuaranteePlugins (quota); tenants without one neither reclaim nor lend.
class ReclaimAction final : public Action {
 public:
  std::string_view Name() const override { return "reclaim"; }
  void Execute(Session& s) override {
    if (s.plugins().guarantees.empty()) return;
    auto guarantee = [&](const std::string& tenant) -> std::optional<std::int64_t> {
      for (const auto& g : s.plugins().guarantees) {
        if (auto v = g.ext->Guaranteed(tenant)) return v;
      }
      return std::nullopt;
    };
    // GPUs held per tenant, victims that are terminating included (they still hold GPUs); usage
    // after eviction is tracked separately so that one cycle does not over-reclaim.
    std::map<std::string, std::int64_t> usage;
    for (const auto& [id, j] : s.jobs()) {
      if (j.phase == JobPhase::kRunning || j.phase == JobPhase::kTerminating) {
        usage[j.spec.tenant] += j.placement.gpus();
      }
    }
    std::map<std::string, std::int64_t> after = usage;
    // Jobs already waiting for victims count as their tenant's (pledged) usage.
    for (const auto& [id, j] : s.jobs()) {
      if (j.phase == JobPhase::kPending && j.nominated) usage[j.spec.tenant] += j.spec.gpus;
    }  // minus GPUs already being reclaimed
    for (const auto& [id, j] : s.jobs()) {
      if (j.phase == JobPhase::kTerminating) after[j.spec.tenant] -= j.placement.gpus();
    }
    int attempts = 0;
    for (JobId id : s.PendingQueue()) {
      JobInfo& job = s.jobs().at(id);
      if (job.nominated) continue;
      const auto own = guarantee(job.spec.tenant);
      if (!own || usage[job.spec.tenant] + job.spec.gpus > *own) continue;
      if (++attempts > s.config().max_preemptors_per_cycle) break;
      if (s.FitsNow(job)) continue;
      std::vector<const JobInfo*> lenders;
      for (const auto& [vid, v] : s.jobs()) {
        if (v.phase != JobPhase::kRunning || !v.spec.preemptible || SharesGpu(v.spec)) continue;
        if (!OldEnough(s, v)) continue;
        const auto g = guarantee(v.spec.tenant);
        if (g && after[v.spec.tenant] > *g && v.spec.tenant != job.spec.tenant) {
          lenders.push_back(&v);
        }
      }
      std::sort(lenders.begin(), lenders.end(), LowestFirst{&s});
      Statement freed(&s.state());
      std::map<std::string, std::int64_t> left = after;
      std::vector<JobId> chosen;
      bool fits = false;
      for (const JobInfo* v : lenders) {
        if (left[v->spec.tenant] <= *guarantee(v->spec.tenant)) continue;
        left[v->spec.tenant] -= v->placement.gpus();
        for (const auto& a : v->placement.nodes) CHECK(freed.Release(a.node, a.mask).ok());
        chosen.push_back(v->spec.id);
        if (s.state().Free(Subtree{}) >= job.spec.gpus && s.FitsNow(job)) {
          fits = true;
          break;
        }
      }
      freed.Discard();
      if (!fits) continue;
      after = std::move(left);
      usage[job.spec.tenant] += job.spec.gpus;  // pledged: later jobs of the tenant count it
      for (JobId vid : chosen) s.Evict(s.jobs().at(vid), job);
      job.nominated = true;
      s.Wait(job, PluginStatus::Unschedulable(
                      fmt::format("reclaiming {} job(s) from tenants above their guarantee",
                                  chosen.size()))
                      .WithPlugin("reclaim"));
    }
  }
};

// resize: elastic jobs (ElasticSpec) change size in steps of elastic.step_gpus. When pending jobs
// cannot be placed, running elastic jobs of no higher priority shrink toward min_gpus, lowest
// priority first, one step at a time, until the first such job fits; it is then bound at once
// (its GPUs were freed by the shrink). When nothing is pending, elastic jobs grow toward
// max_gpus into idle GPUs, highest priority first: onto their own nodes first, then the nearest
// nodes, never outside the subtree of their required (and sub-group) level. A job is resizable
// when its step is a whole number of tasks, or when it is one task on one node (it then resizes
// on that node). Shrinks release the highest ranks. Each changed job appears once in
// Decisions::resizes with its final placement, already reflected in the state.
class ResizeAction final : public Action {
 public:
  std::string_view Name() const override { return "resize"; }
  void Execute(Session& s) override {
    std::vector<JobInfo*> elastic;
    for (auto& [id, j] : s.jobs()) {
      if (j.phase == JobPhase::kRunning && j.spec.elastic.min_gpus > 0 && Unit(j) > 0) {
        elastic.push_back(&j);
      }
    }
    if (elastic.empty()) return;
    bool any_pending = false;
    for (JobId id : s.pending_at_start()) {
      auto it = s.jobs().find(id);
      any_pending |= it != s.jobs().end() && it->second.phase == JobPhase::kPending;
    }
    if (any_pending) {
      Shrink(s, elastic);
    } else {
      Grow(s, elastic);
    }
  }

 private:
  // GPUs added or removed per placement unit: a task, or for a one-task job a step on its node;
  // 0 when the job cannot be resized.
  static int Unit(const JobInfo& j) {
    const int step = j.spec.elastic.step_gpus;
    if (step % j.task_gpus == 0) return j.task_gpus;
    if (j.placement.nodes.size() == 1 && j.placement.gpus() == j.task_gpus) return step;
    return 0;
  }

  // `p` without its highest `gpus` ranks; the removed GPUs go to `released`.
  static Placement WithoutLast(Placement p, int gpus, std::vector<NodeAlloc>* released) {
    while (gpus > 0 && !p.nodes.empty()) {
      NodeAlloc& a = p.nodes.back();
      std::uint64_t cut = 0;
      while (gpus > 0 && a.mask != 0) {
        const std::uint64_t top = std::uint64_t{1} << (63 - std::countl_zero(a.mask));
        a.mask &= ~top;
        cut |= top;
        --gpus;
      }
      released->push_back({a.node, cut});
      if (a.mask == 0) p.nodes.pop_back();
    }
    return p;
  }

  static void Shrink(Session& s, std::vector<JobInfo*> elastic) {
    std::sort(elastic.begin(), elastic.end(),
              [&](const JobInfo* a, const JobInfo* b) { return LowestFirst{&s}(a, b); });
    int attempts = 0;
    for (JobId id : s.PendingQueue()) {
      JobInfo& job = s.jobs().at(id);
      if (job.nominated) continue;
      if (++attempts > s.config().max_preemptors_per_cycle) break;
      if (s.FitsNow(job)) continue;
      Statement shrink(&s.state());
      std::map<JobId, Placement> shrunk;
      bool fits = false;
      for (JobInfo* e : elastic) {
        if (e->phase != JobPhase::kRunning || e->spec.priority > job.spec.priority) continue;
        if (!s.config().tenancy.MayPreempt(job.spec.tenant, e->spec.tenant)) continue;
        Placement p = e->placement;
        while (!fits && p.gpus() - e->spec.elastic.step_gpus >= e->spec.elastic.min_gpus) {
          std::vector<NodeAlloc> released;
          p = WithoutLast(std::move(p), e->spec.elastic.step_gpus, &released);
          for (const auto& a : released) CHECK(shrink.Release(a.node, a.mask).ok());
          shrunk[e->spec.id] = p;
          fits = s.state().Free(Subtree{}) >= job.spec.gpus && s.FitsNow(job);
        }
        if (fits) break;
      }
      if (!fits) continue;  // `shrink` discards
      Statement place(&s.state());
      Placement p;
      PluginStatus st = s.TryPlace(job, &place, &p);
      CHECK(st.ok()) << "resize: the job fit a moment ago: " << st.ToString();
      s.Bind(job, std::move(p), &place);
      shrink.Commit();
      for (auto& [eid, ep] : shrunk) s.Resize(s.jobs().at(eid), std::move(ep));
    }
  }

  static void Grow(Session& s, std::vector<JobInfo*> elastic) {
    std::sort(elastic.begin(), elastic.end(), [](const JobInfo* a, const JobInfo* b) {
      if (a->spec.priority != b->spec.priority) return a->spec.priority > b->spec.priority;
      return a->spec.id < b->spec.id;
    });
    const topo::Cluster& c = s.state().cluster();
    for (JobInfo* e : elastic) {
      const int unit = Unit(*e);
      const int step = e->spec.elastic.step_gpus;
      if (e->placement.gpus() + step > e->spec.elastic.max_gpus) continue;
      const topo::NodeId home = e->placement.nodes.front().node;
      // Nodes other than its own stay inside the subtree of its first node at the required level
      // and at every multi-task sub-group level.
      topo::Level limit = e->spec.topology.required.value_or(topo::Level::kCore);
      for (const auto& sg : e->spec.sub_groups) {
        if (sg.gpus > e->task_gpus) limit = std::min(limit, sg.level);
      }
      // Candidate nodes: own nodes first (in rank order), then others by distance, then the
      // tightest fit, then id. A one-task job stays on its node.
      std::vector<topo::NodeId> nodes;
      for (const auto& a : e->placement.nodes) nodes.push_back(a.node);
      if (unit == e->task_gpus) {
        std::vector<std::tuple<topo::Level, int, std::uint32_t>> others;
        for (int f = unit; f <= s.state().max_node_gpus(); ++f) {
          for (std::uint32_t n : s.state().NodesWithFree(f)) {
            const topo::NodeId id(n);
            if (std::find(nodes.begin(), nodes.end(), id) != nodes.end()) continue;
            const topo::Level l = c.Meet(home, id);
            if (l <= limit) others.push_back({l, f, n});
          }
        }
        std::sort(others.begin(), others.end());
        for (const auto& [l, f, n] : others) nodes.push_back(topo::NodeId(n));
      }
      Statement grow(&s.state());
      Placement p = e->placement;
      bool grew = false;
      while (p.gpus() + step <= e->spec.elastic.max_gpus) {
        const std::size_t mark = grow.size();
        Placement next = p;
        int need = step;
        for (topo::NodeId id : nodes) {
          if (need == 0) break;
          int room = s.state().FreeGpus(id) / unit;
          if (room == 0 || !s.PassesFilters(*e, id)) continue;
          const std::uint64_t free_mask = ~c.node(id).allocated_mask;
          std::uint64_t mask = 0;
          for (int i = 0; i < c.node(id).gpus && room > 0 && need > 0; ++i) {
            if ((free_mask >> i) & 1) mask |= std::uint64_t{1} << i;
            if (std::popcount(mask) == unit) {
              CHECK(grow.Allocate(id, mask).ok());
              auto it = std::find_if(next.nodes.begin(), next.nodes.end(),
                                     [&](const NodeAlloc& a) { return a.node == id; });
              if (it != next.nodes.end()) {
                it->mask |= mask;
              } else {
                next.nodes.push_back({id, mask});
              }
              mask = 0;
              --room;
              need -= unit;
            }
          }
        }
        if (need > 0) {
          grow.RollbackTo(mark);
          break;
        }
        p = std::move(next);
        grew = true;
      }
      grow.Commit();
      if (grew) s.Resize(*e, std::move(p));
    }
  }
};

}  // namespace

Result<std::unique_ptr<Action>> MakeAction(std::string_view name) {
  if (name == "admit") return std::unique_ptr<Action>(new AdmitAction());
  if (name == "allocate") return std::unique_ptr<Action>(new AllocateAction());
  if (name == "backfill") return std::unique_ptr<Action>(new BackfillAction());
  if (name == "preempt") return std::unique_ptr<Action>(new PreemptAction());
  if (name == "reclaim") return std::unique_ptr<Action>(new ReclaimAction());
  if (name == "resize") return std::unique_ptr<Action>(new ResizeAction());
  return NotFoundError(fmt::format(
      "unknown action '{}' (known: admit, allocate, backfill, preempt, reclaim, resize)", name));
}

}  // namespace baton::sched
