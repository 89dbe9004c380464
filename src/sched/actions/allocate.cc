// allocate: places pending jobs in queue order, each gang whole or not at all; when backfill is
// configured (or head_of_line_blocking), the first job blocked for lack of room stops it, so
// backfill can reserve for that job.

#include "sched/actions/internal.h"

namespace baton::sched::internal {
namespace {

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
      if (head_blocks && blocked) return;
    }
    if (s.tail_probe() != nullptr) s.tail_probe()->AllocateDone(s);
  }
};

}  // namespace

std::unique_ptr<Action> MakeAllocateAction() { return std::make_unique<AllocateAction>(); }

}  // namespace baton::sched::internal
