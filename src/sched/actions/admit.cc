// admit: rejects pending jobs a PreFilter says can never run (e.g. larger than the tenant's
// whole quota).

#include "sched/actions/internal.h"

namespace baton::sched::internal {
namespace {

class AdmitAction final : public Action {
 public:
  std::string_view Name() const override { return "admit"; }
  bool IgnoresLaterJobs(const SchedulerConfig&) const override { return true; }
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

}  // namespace

std::unique_ptr<Action> MakeAdmitAction() { return std::make_unique<AdmitAction>(); }

}  // namespace baton::sched::internal
