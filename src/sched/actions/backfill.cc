// backfill: gives the blocked head job(s) a reservation (the nodes and the time at which running
// jobs' estimated ends make room) and places later jobs that either end before the reservation
// or avoid its nodes.
#include <algorithm>
#include <limits>
#include <optional>
#include <span>

#include "sched/actions/internal.h"

namespace baton::sched::internal {
namespace {

// The nodes reservations hold, each from the earliest time one of them starts.
class ReservedNodes {
 public:
  explicit ReservedNodes(std::size_t nodes) : from_(nodes) {}
  // Holds `node` from `at` (or from earlier, if it is already held from then).
  void Hold(topo::NodeId node, TimePoint at) {
    auto& f = from_[node.value()];
    if (!f) ++count_;
    f = f ? std::min(*f, at) : at;
    auto t = std::lower_bound(times_.begin(), times_.end(), at);
    if (t == times_.end() || *t != at) times_.insert(t, at);
    ++generation_;
  }
  const std::optional<TimePoint>& From(topo::NodeId node) const { return from_[node.value()]; }
  std::span<const std::optional<TimePoint>> all() const { return from_; }
  std::size_t size() const { return count_; }
  bool empty() const { return count_ == 0; }
  // Changes with every Hold: the failure cache's filter family (Session::ExtraFilter), since
  // between two Holds the filter of a given end time stays the same.
  std::uint64_t generation() const { return generation_; }
  // The filter rank of a job ending at `end` (nullopt: unknown): how many of the hold times are
  // earlier. A node is held from one of them, and a job may use it only when it ends no later,
  // so equal ranks accept the same nodes and a larger rank never accepts more: two jobs whose
  // ends fall between the same hold times share their cached failures.
  double Rank(std::optional<TimePoint> end) const {
    const auto below = end ? std::lower_bound(times_.begin(), times_.end(), *end) : times_.end();
    return static_cast<double>(below - times_.begin());
  }

 private:
  std::vector<std::optional<TimePoint>> from_;  // per node; nullopt: not reserved
  std::size_t count_ = 0;
  std::vector<TimePoint> times_;  // every hold time given, ascending, once each
  std::uint64_t generation_ = 0;
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
  bool IgnoresLaterJobs(const SchedulerConfig&) const override { return true; }
  bool ReservesForBlockedJobs() const override { return true; }
  void Execute(Session& s) override {
    ReservedNodes reserved(s.state().cluster().nodes().size());
    int reservations = 0;
    for (JobInfo* pending : s.PendingJobs()) {
      JobInfo& job = *pending;
      std::optional<TimePoint> end;
      if (job.spec.estimated_runtime.value() > 0) end = s.now() + job.spec.estimated_runtime;
      ReservationFilter filter(&reserved, end);
      // Each reservation set is its own filter family, and a later (or unknown) end time
      // accepts fewer reserved nodes.
      Session::ExtraFilter extra;
      if (!reserved.empty()) extra = {&filter, reserved.generation(), reserved.Rank(end)};
      const bool blocked = PlaceOrWait(s, job, extra);
      if (reservations < s.config().backfill_reservations && blocked) {
        ++reservations;
        Reserve(s, job, &reserved);
      }
    }
    if (s.tail_probe() != nullptr) s.tail_probe()->BackfillDone(s, reserved.all());
  }

 private:
  // Finds when and where `job` could start if running jobs end at their estimates, and holds
  // those nodes from then on.
  void Reserve(Session& s, const JobInfo& job, ReservedNodes* reserved) {
    if (job.task_gpus <= 0) return;  // CPU-only: reservations hold GPUs
    std::vector<std::pair<TimePoint, JobId>> ends;
    std::vector<Holder> holders;  // every job holding resources, ascending id
    for (const auto& [id, r] : s.jobs()) {
      if (r.phase != JobPhase::kRunning && r.phase != JobPhase::kTerminating) continue;
      double release_s = kNever;
      if (SharesGpu(r.spec)) {
        // A shared GPU frees only with its last share.
      } else if (r.phase == JobPhase::kRunning && r.spec.estimated_runtime.value() > 0) {
        ends.push_back({std::max(s.now(), r.start + r.spec.estimated_runtime), id});
        release_s = ends.back().first.since_epoch.value();
      } else if (r.phase == JobPhase::kTerminating) {
        ends.push_back({std::max(s.now(), r.evict_deadline), id});
        release_s = ends.back().first.since_epoch.value();
      }
      holders.push_back({id, release_s, &r.placement});
    }
    std::sort(ends.begin(), ends.end());
    const bool cacheable = reserved->empty() && job.admission != 0;
    const bool hit = cacheable && cache_.admission == job.admission &&
                     ((cache_.version == s.state().version() && cache_.ends == ends) ||
                      StillHolds(s, holders, ends));
    if (!hit) {
      std::optional<TimePoint> at;
      Placement p;
      const bool proven = Search(s, job, *reserved, ends, &at, &p);
      // Read after the search's trial releases are undone: the state it leaves.
      cache_ = {job.admission, s.state().version(), std::move(ends), at, {}, {}, 0, -kNever};
      for (const auto& a : p.nodes) cache_.nodes.push_back(a.node);
      if (!cacheable) cache_.admission = 0;
      if (cacheable && proven && s.plugins().placement.ext->Deterministic()) {
        cache_.health_version = s.state().health_version();
        cache_.now_s = s.now().since_epoch.value();
        cache_.holders.reserve(holders.size());
        for (const Holder& h : holders) {
          cache_.holders.push_back({h.id, h.release_s, h.placement->nodes});
        }
      }
    }
    if (!cache_.at) return;
    for (topo::NodeId n : cache_.nodes) reserved->Hold(n, *cache_.at);
    s.WakeAt(*cache_.at);
  }

  static constexpr double kNever = std::numeric_limits<double>::infinity();

  // A job holding GPUs (or host resources) now, and when the reservation search releases them
  // (its clamped estimated end; kNever: never).
  struct Holder {
    JobId id;
    double release_s;
    const Placement* placement;
  };

  // Whether the cached answer is still the search's answer although the allocation state or the
  // end times changed. The search's answer is the earliest end time T (of the sorted ends) at
  // which the job fits once every job ending by T has released its GPUs, and the placement in
  // that state (a first fitting prefix always extends to the last equal end time). The cached
  // search proved that the job fits in no such state before its T (none at all when it found no
  // T). Per job holding resources then or now, call its release time then r0 and now r1 (minus
  // infinity for a job holding nothing: started since, or ended). When nothing but allocations
  // changed the state (no health change, no job's placement changed) and for every job
  //   (a) its GPUs are no freer now at any time before T: r0 <= max(r1, now) or r1 >= T, and
  //   (b) it is released by T now exactly when it was: (r1 <= T) == (r0 <= T),
  // and T is still one of the end times, then every state before T has no more free GPUs than
  // it had (so the job fits in none), and the state at T is the same (so it fits there, on the
  // same placement, the plugin being deterministic). A job started since that ends by T (a
  // backfilled one), one ended at its estimate, arrivals and an advancing `now` keep the answer.
  bool StillHolds(Session& s, const std::vector<Holder>& holders,
                  const std::vector<std::pair<TimePoint, JobId>>& ends) const {
    if (cache_.health_version != s.state().health_version() || cache_.now_s == -kNever) {
      return false;
    }
    const double t = cache_.at ? cache_.at->since_epoch.value() : kNever;
    if (cache_.at && std::none_of(ends.begin(), ends.end(),
                                  [&](const auto& e) { return e.first == *cache_.at; })) {
      return false;
    }
    const double now = s.now().since_epoch.value();
    auto holds = [&](double r0, double r1) {
      if (!(r0 <= std::max(r1, now) || r1 >= t)) return false;
      return !cache_.at || (r1 <= t) == (r0 <= t);
    };
    std::size_t i = 0;
    std::size_t k = 0;
    while (i < cache_.holders.size() || k < holders.size()) {
      if (k == holders.size() ||
          (i < cache_.holders.size() && cache_.holders[i].id < holders[k].id)) {
        if (!holds(cache_.holders[i].release_s, -kNever)) return false;  // ended since
        ++i;
      } else if (i == cache_.holders.size() || holders[k].id < cache_.holders[i].id) {
        if (!holds(-kNever, holders[k].release_s)) return false;  // started since
        ++k;
      } else {
        if (cache_.holders[i].nodes != holders[k].placement->nodes) return false;
        if (!holds(cache_.holders[i].release_s, holders[k].release_s)) return false;
        ++i;
        ++k;
      }
    }
    return true;
  }

  // The reservation search: the earliest prefix of `ends` (sorted) after which the job fits, in
  // the state the cycle has now. On success `*at` is when that prefix has ended and `*p` the
  // placement then; otherwise `*at` stays nullopt. Leaves the state as it found it. Returns
  // whether the answer is proven (false when there are no ends to wait for).
  static bool Search(Session& s, const JobInfo& job, const ReservedNodes& reserved,
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
    if (ends.empty()) return false;
    if (!s.plugins().placement.ext->Deterministic()) {
      // Every probe is a call the placement plugin may learn from: the full sequence.
      if (!fits_after(ends.size(), p)) return true;
      // More ends free a superset of GPUs, so the first fitting prefix is a monotone search.
      std::size_t hi = *SmallestFittingPrefixFrom(ends.size(), 1, [&](std::size_t n) {
        Placement q;
        return fits_after(n, &q);
      });
      // Equal end times release together.
      while (hi < ends.size() && ends[hi].first == ends[hi - 1].first) ++hi;
      fits_after(hi, p);
      *at = ends[hi - 1].first;
      return true;
    }
    // A deterministic placement plugin: the answer (the first fitting prefix, monotone as above)
    // does not depend on which prefixes are probed. Free GPUs after the first n ends are at most
    // those free now plus what those n jobs hold (GPUs on an unhealthy node do not come back), so
    // the job cannot fit below the first prefix where that bound reaches its size, and never fits
    // if the bound never does: the search starts there, at no cost in releases, and never
    // releases every running job only to learn that the job fits at all.
    std::int64_t bound = s.state().Free(Subtree{});
    std::size_t lower = 0;
    while (lower < ends.size() && bound < job.spec.gpus) {
      bound += s.jobs().at(ends[lower].second).placement.gpus();
      ++lower;
    }
    if (bound < job.spec.gpus) return true;
    std::optional<std::size_t> fitted;  // the last fitting probe, its placement in *p
    const std::optional<std::size_t> first =
        SmallestFittingPrefixFrom(ends.size(), lower, [&](std::size_t n) {
          Placement q;
          if (!fits_after(n, &q)) return false;
          fitted = n;
          *p = std::move(q);
          return true;
        });
    if (!first) return true;
    std::size_t hi = *first;
    while (hi < ends.size() && ends[hi].first == ends[hi - 1].first) ++hi;
    // The same prefix gives the same state, and so the same placement.
    if (fitted != hi) fits_after(hi, p);
    *at = ends[hi - 1].first;
    return true;
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
  // With a deterministic placement plugin it is also reused while StillHolds proves it the
  // search's answer.
  struct CachedHolder {
    JobId id;
    double release_s;
    std::vector<NodeAlloc> nodes;
  };
  struct CachedReservation {
    std::uint64_t admission = 0;  // 0: nothing cached
    std::uint64_t version = 0;
    std::vector<std::pair<TimePoint, JobId>> ends;
    std::optional<TimePoint> at;  // nullopt: the job fits nowhere even after every end
    std::vector<topo::NodeId> nodes;
    // For StillHolds (now_s -kNever: not recorded): the jobs holding resources, ascending id.
    std::vector<CachedHolder> holders;
    std::uint64_t health_version = 0;
    double now_s = -kNever;
  };
  CachedReservation cache_;
};

}  // namespace

std::unique_ptr<Action> MakeBackfillAction() { return std::make_unique<BackfillAction>(); }

}  // namespace baton::sched::internal
