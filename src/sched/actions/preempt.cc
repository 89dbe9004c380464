// preempt: for a job still blocked, evicts the cheapest set of whole lower-priority gangs that
// makes room (graceful: victims keep their GPUs for their grace period); with preempt_by:
// las-band, of gangs in a strictly worse LAS band.
#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <map>
#include <optional>

#include "sched/actions/internal.h"

namespace baton::sched::internal {
namespace {

class PreemptAction final : public Action {
 public:
  std::string_view Name() const override { return "preempt"; }
  // Victims are chosen by priority only then: a later job never changes who is evicted.
  bool IgnoresLaterJobs(const SchedulerConfig& config) const override {
    return config.preempt_by == PreemptBy::kPriority;
  }
  bool Evicts() const override { return true; }
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

}  // namespace

std::unique_ptr<Action> MakePreemptAction() { return std::make_unique<PreemptAction>(); }

}  // namespace baton::sched::internal
