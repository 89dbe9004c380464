// allocate: places pending jobs in queue order, each gang whole or not at all; when an action
// that reserves for blocked jobs is configured (backfill) or head_of_line_blocking is set, the
// first job blocked for lack of room stops it, so that action can reserve for that job.

#include "sched/actions/internal.h"

namespace baton::sched::internal {
namespace {

class AllocateAction final : public Action {
 public:
  std::string_view Name() const override { return "allocate"; }
  bool IgnoresLaterJobs(const SchedulerConfig&) const override { return true; }
  void Execute(Session& s) override {
    // Strict order (head_of_line_blocking) or a reserving action: the first job blocked for
    // room stops allocate; otherwise every job that fits is placed (first-fit).
    const bool head_blocks = s.config().head_of_line_blocking || s.blocked_jobs_reserved();
    for (JobInfo* pending : s.PendingJobs()) {
      if (PlaceOrWait(s, *pending) && head_blocks) return;
    }
    if (s.tail_probe() != nullptr) s.tail_probe()->AllocateDone(s);
  }
};

}  // namespace

std::unique_ptr<Action> MakeAllocateAction() { return std::make_unique<AllocateAction>(); }

}  // namespace baton::sched::internal
