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
  }
  const std::optional<TimePoint>& From(topo::NodeId node) const { return from_[node.value()]; }
  std::span<const std::optional<TimePoint>> all() const { return from_; }
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
      std::optional<TimePoint> end;
      if (job.spec.estimated_runtime.value() > 0) end = s.now() + job.spec.estimated_runtime;
      ReservationFilter filter(&reserved, end);
      // Reservation sets only grow within the cycle: each size is its own filter family, and a
      // later (or unknown) end time accepts fewer reserved nodes.
      Session::ExtraFilter extra;
      if (!reserved.empty()) {
        extra = {&filter, static_cast<std::uint64_t>(reserved.size()),
                 end ? end->since_epoch.value() : std::numeric_limits<double>::infinity()};
      }
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

}  // namespace

std::unique_ptr<Action> MakeBackfillAction() { return std::make_unique<BackfillAction>(); }

}  // namespace baton::sched::internal
