// QuotaPlugin ("quota"): per-tenant GPU quotas. A tenant may hold up to guaranteed + borrowable
// GPUs (running and terminating jobs count); a job that would exceed that waits (Unschedulable),
// one larger than the whole limit is rejected (Unresolvable). Tenants without an entry are
// unlimited. Usage is counted only for placements that commit (Reserve / Unreserve), so a quota
// is never spent on a job fragmentation makes unplaceable. As a GuaranteePlugin it tells the
// reclaim action each listed tenant's guarantee.
//   args: tenants.<t>.guaranteed, tenants.<t>.borrowable (GPUs)
#pragma once

#include <map>
#include <memory>
#include <string>

#include "sched/framework/config.h"
#include "sched/framework/plugin.h"

namespace baton::sched {

class QuotaPlugin final : public Plugin,
                          public PreFilterPlugin,
                          public ReservePlugin,
                          public GuaranteePlugin {
 public:
  struct TenantQuota {
    std::int64_t guaranteed = 0;
    std::int64_t borrowable = 0;
  };
  static Result<std::unique_ptr<Plugin>> Create(const PluginArgs& args);
  std::string_view Name() const override { return "quota"; }
  PluginStatus PreFilter(const PluginContext& ctx, const JobInfo& job) override;
  void Reserve(const PluginContext& ctx, const JobInfo& job, const Placement& p) override;
  void Unreserve(const PluginContext& ctx, const JobInfo& job, const Placement& p) override;
  std::optional<std::int64_t> Guaranteed(std::string_view tenant) const override;

 private:
  std::map<std::string, std::int64_t>& Usage(const PluginContext& ctx);
  std::map<std::string, TenantQuota, std::less<>> quotas_;
};

}  // namespace baton::sched
