// reclaim: a pending job of a tenant within its guarantee (after the job) that cannot be placed
// takes back GPUs lent to tenants above their guarantee: whole preemptible gangs of such tenants
// are evicted gracefully, lowest priority (then least lost work) first, only while their tenant
// stays above its guarantee before the eviction, until the job fits. Guarantees come from
// GuaranteePlugins (quota); tenants without one neither reclaim nor lend.
#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "sched/actions/internal.h"

namespace baton::sched::internal {
namespace {

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

}  // namespace

std::unique_ptr<Action> MakeReclaimAction() { return std::make_unique<ReclaimAction>(); }

}  // namespace baton::sched::internal
