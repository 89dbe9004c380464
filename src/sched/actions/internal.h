// Helpers shared by several built-in actions, and each action's factory (the name -> factory
// table is MakeAction in action.cc). Internal to src/sched/actions: not part of the plugin SDK.
#pragma once

#include <algorithm>
#include <cstddef>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "sched/actions/action.h"

namespace baton::sched::internal {

// Whether `v` has run at least the policy's min_run_time since its (re)start; if not, the cycle
// is asked to run again when it has (a blocked job may then evict it).
bool OldEnough(Session& s, const JobInfo& v);

// The tenancy policy's word on `job` evicting `v`: another tenant's job only when the policy
// allows it, and no job younger than min_run_time.
bool VictimAllowed(Session& s, const JobInfo& job, const JobInfo& v);

// Whether `st` is the placement plugin's Unschedulable: the job was blocked for lack of room.
bool BlockedByRoom(const Session& s, const PluginStatus& st);

// The step allocate and backfill share: TryPlace `job` (under `extra`) in a fresh Statement, then
// bind it, reject it when it can never fit (Unresolvable), or make it wait. Returns true only when
// it waits for lack of room (BlockedByRoom), which is what head-of-line blocking and backfill's
// reservations act on.
bool PlaceOrWait(Session& s, JobInfo& job, const Session::ExtraFilter& extra = {});

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

// Orders jobs for reclaim and shrink: lowest priority first, then least work lost, then id.
struct LowestFirst {
  const Session* s;
  bool operator()(const JobInfo* a, const JobInfo* b) const;
};

// The built-in actions (admit.cc, allocate.cc, ...).
std::unique_ptr<Action> MakeAdmitAction();
std::unique_ptr<Action> MakeAllocateAction();
std::unique_ptr<Action> MakeBackfillAction();
std::unique_ptr<Action> MakePreemptAction();
std::unique_ptr<Action> MakeReclaimAction();
std::unique_ptr<Action> MakeResizeAction();

}  // namespace baton::sched::internal
