// The built-in actions. admit: rejects pending jobs a PreFilter says can never run (e.g. larger
// than the tenant's whole quota). allocate: places pending jobs in queue order, each gang whole
// or not at all; when backfill is configured, the first job blocked for lack of room stops it, so
// backfill can reserve for that job. backfill: gives the blocked head job(s) a reservation (the
// nodes and the time at which running jobs' estimated ends make room) and places later jobs that
// either end before the reservation or avoid its nodes. preempt: for a job still blocked, evicts
// the cheapest set of whole lower-priority gangs that makes room (graceful: victims keep their
// GPUs for their grace period).
#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <map>
#include <set>

#include "sched/actions/action.h"

namespace baton::sched {
namespace {

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

// The smallest n in [1, size] with fits(n) true, given fits is monotone and fits(size) holds:
// doubling, then bisection — O(log size) probes.
template <typename Fits>
std::size_t SmallestFittingPrefix(std::size_t size, Fits fits) {
  std::size_t hi = 1;
  while (hi < size && !fits(hi)) hi *= 2;
  hi = std::min(hi, size);
  std::size_t lo = hi / 2;
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
    const bool head_blocks = s.HasAction("backfill");
    for (JobId id : s.PendingQueue()) {
      JobInfo& job = s.jobs().at(id);
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

// Nodes a reservation holds and until when; a backfilled job may use such a node only if it
// ends (by its estimate) before the reservation starts.
class ReservationFilter final : public NodeFilter {
 public:
  ReservationFilter(const std::map<std::uint32_t, TimePoint>* reserved,
                    std::optional<TimePoint> end)
      : reserved_(reserved), end_(end) {}
  bool Fits(topo::NodeId node) const override {
    auto it = reserved_->find(node.value());
    if (it == reserved_->end()) return true;
    return end_.has_value() && *end_ <= it->second;
  }

 private:
  const std::map<std::uint32_t, TimePoint>* reserved_;
  std::optional<TimePoint> end_;
};

class BackfillAction final : public Action {
 public:
  std::string_view Name() const override { return "backfill"; }
  void Execute(Session& s) override {
    std::map<std::uint32_t, TimePoint> reserved;
    int reservations = 0;
    for (JobId id : s.PendingQueue()) {
      JobInfo& job = s.jobs().at(id);
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
      s.Wait(job, st);
      if (reservations < s.config().backfill_reservations && BlockedByRoom(s, st)) {
        ++reservations;
        Reserve(s, job, &reserved);
      }
    }
  }

 private:
  // Finds when and where `job` could start if running jobs end at their estimates, and holds
  // those nodes from then on.
  static void Reserve(Session& s, const JobInfo& job,
                      std::map<std::uint32_t, TimePoint>* reserved) {
    std::vector<std::pair<TimePoint, JobId>> ends;
    for (const auto& [id, r] : s.jobs()) {
      if (r.phase == JobPhase::kRunning && r.spec.estimated_runtime.value() > 0) {
        ends.push_back({std::max(s.now(), r.start + r.spec.estimated_runtime), id});
      } else if (r.phase == JobPhase::kTerminating) {
        ends.push_back({std::max(s.now(), r.evict_deadline), id});
      }
    }
    std::sort(ends.begin(), ends.end());
    // Whether the job fits once the first `count` ends have happened; on success the placement.
    ReservationFilter none(reserved, std::nullopt);
    std::vector<JobId> order;
    for (const auto& e : ends) order.push_back(e.second);
    PrefixReleaser future(&s, std::move(order));
    auto fits_after = [&](std::size_t count, Placement* p) {
      future.SetPrefix(count);
      if (s.state().Free(Subtree{}) < job.spec.gpus) return false;
      Statement trial(&s.state());
      if (!s.TryPlace(job, &trial, {&none, 0, 0}, p).ok()) return false;
      s.Unreserve(job, *p);
      return true;
    };
    Placement p;
    if (ends.empty() || !fits_after(ends.size(), &p)) return;
    // More ends free a superset of GPUs, so the first fitting prefix is a monotone search.
    std::size_t hi = SmallestFittingPrefix(ends.size(), [&](std::size_t n) {
      Placement q;
      return fits_after(n, &q);
    });
    // Equal end times release together.
    while (hi < ends.size() && ends[hi].first == ends[hi - 1].first) ++hi;
    fits_after(hi, &p);
    const TimePoint at = ends[hi - 1].first;
    for (const auto& a : p.nodes) {
      auto [it, inserted] = reserved->emplace(a.node.value(), at);
      if (!inserted) it->second = std::min(it->second, at);
    }
    s.WakeAt(at);
  }
};

class PreemptAction final : public Action {
 public:
  std::string_view Name() const override { return "preempt"; }
  void Execute(Session& s) override {
    if (s.plugins().victims.empty() || !s.lowest_victim_priority()) return;
    const int lowest = *s.lowest_victim_priority();
    // Bounded effort per cycle: the first few blocked jobs that outrank some victim.
    int attempts = 0;
    for (JobId id : s.PendingQueue()) {
      JobInfo& job = s.jobs().at(id);
      if (job.nominated || job.spec.priority <= lowest) continue;
      if (++attempts > s.config().max_preemptors_per_cycle) break;
      TryPreempt(s, job);
    }
  }

 private:
  static bool Fits(Session& s, const JobInfo& job) {
    Statement trial(&s.state());
    Placement p;
    PluginStatus st = s.TryPlace(job, &trial, &p);
    if (st.ok()) s.Unreserve(job, p);
    return st.ok();
  }

  // Whether `job` fits once the victims in `set` are gone.
  static bool FitsWithout(Session& s, const JobInfo& job, const std::vector<JobId>& set) {
    Statement freed(&s.state());
    for (JobId vid : set) {
      for (const auto& a : s.jobs().at(vid).placement.nodes)
        CHECK(freed.Release(a.node, a.mask).ok());
    }
    return s.state().Free(Subtree{}) >= job.spec.gpus && Fits(s, job);
  }

  // Returns whether a preemption was started.
  static bool TryPreempt(Session& s, JobInfo& job) {
    // It may fit already (room freed earlier in this cycle): allocate places it next cycle.
    if (Fits(s, job)) return false;
    std::vector<std::pair<double, JobId>> candidates;
    for (const auto& [vid, v] : s.jobs()) {
      if (v.phase != JobPhase::kRunning) continue;
      double cost = 0;
      bool ok = true;
      for (const auto& vp : s.plugins().victims) {
        auto c = vp.ext->VictimCost(s.ctx(), job, v);
        if (!c) {
          ok = false;
          break;
        }
        cost += vp.weight * *c;
      }
      if (ok) candidates.push_back({cost, vid});
    }
    std::sort(candidates.begin(), candidates.end());
    // Victims are chosen inside one scope so that the freed GPUs sit together: the subtrees of the
    // job's required level, or else of the highest switch tier below the whole cluster; the whole
    // cluster is the fallback. The scope whose cheapest sufficient prefix costs least wins.
    const topo::Cluster& c = s.state().cluster();
    const topo::Level required = job.spec.topology.required.value_or(topo::Level::kCore);
    int tier = -1;
    for (int t = 0; t < c.tier_count(); ++t) {
      if (c.tier_level(t) <= required && !s.state().SwitchesOfTier(t).empty()) tier = t;
    }
    if (tier >= 0 && s.state().SwitchesOfTier(tier).size() == 1) tier = -1;  // that is the root
    std::vector<JobId> chosen;
    double best_cost = 0;
    // Candidates (indexes, cost order) per scope switch, computed once.
    std::map<std::uint32_t, std::vector<std::size_t>> by_scope;
    if (tier >= 0) {
      for (std::size_t i = 0; i < candidates.size(); ++i) {
        std::uint32_t last = ~0u;
        for (const auto& a : s.jobs().at(candidates[i].second).placement.nodes) {
          const topo::SwitchId sw = c.node(a.node).ancestors[tier];
          if (!sw.valid() || sw.value() == last) continue;
          last = sw.value();
          auto& list = by_scope[sw.value()];
          if (list.empty() || list.back() != i) list.push_back(i);
        }
      }
    }
    auto try_scope = [&](std::optional<std::uint32_t> sw) {
      std::vector<JobId> order;
      std::vector<double> costs;
      if (sw) {
        auto it = by_scope.find(*sw);
        if (it == by_scope.end()) return;
        for (std::size_t i : it->second) {
          order.push_back(candidates[i].second);
          costs.push_back(candidates[i].first);
        }
      } else {
        for (const auto& [cost, vid] : candidates) {
          order.push_back(vid);
          costs.push_back(cost);
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
      if (!fits(order.size())) return;
      const std::size_t n = SmallestFittingPrefix(order.size(), fits);
      double total = 0;
      for (std::size_t i = 0; i < n; ++i) total += costs[i];
      if (chosen.empty() || total < best_cost) {
        best_cost = total;
        chosen.assign(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(n));
      }
    };
    for (const auto& [sw, list] : by_scope) try_scope(sw);
    if (chosen.empty()) try_scope(std::nullopt);
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

Result<std::unique_ptr<Action>> MakeAction(std::string_view name) {
  if (name == "admit") return std::unique_ptr<Action>(new AdmitAction());
  if (name == "allocate") return std::unique_ptr<Action>(new AllocateAction());
  if (name == "backfill") return std::unique_ptr<Action>(new BackfillAction());
  if (name == "preempt") return std::unique_ptr<Action>(new PreemptAction());
  return NotFoundError(
      fmt::format("unknown action '{}' (known: admit, allocate, backfill, preempt)", name));
}

}  // namespace baton::sched
