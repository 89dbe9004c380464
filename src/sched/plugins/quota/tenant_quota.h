// TenantQuotaPlugin ("tenant-quota"): the tenancy policy's hard quotas (tenancy.h): a tenant holds
// at most `quota.gpus` GPUs in all and `quota.gpu_types.<T>` GPUs of type T (running and
// terminating jobs count). The scheduler adds it by itself when the policy has a quota; it is not
// in the registry. A job larger than its tenant's whole quota is Unresolvable (admit rejects
// it); one that would exceed it now waits (Unschedulable). A node of a capped type is filtered
// out for a job when the tenant's GPUs of that type plus the whole job would pass the cap (sound:
// the placement can never exceed a cap; conservative when a gang would only partly land there).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "sched/framework/plugin.h"
#include "sched/framework/tenancy.h"
#include "topology/gpu.h"

namespace baton::sched {

class TenantQuotaPlugin final : public Plugin,
                                public PreFilterPlugin,
                                public FilterPlugin,
                                public ReservePlugin {
 public:
  explicit TenantQuotaPlugin(const TenancyPolicy& policy);
  std::string_view Name() const override { return "tenant-quota"; }
  PluginStatus PreFilter(const PluginContext& ctx, const JobInfo& job) override;
  PluginStatus Filter(const PluginContext& ctx, const JobInfo& job, topo::NodeId node) override;
  // A per-type cap makes the answer the tenant's.
  bool DecidedByShape(const JobInfo& job) const override {
    const Caps* c = CapsOf(job.spec.tenant);
    return c == nullptr || c->by_type.empty();
  }
  void Reserve(const PluginContext& ctx, const JobInfo& job, const Placement& p) override;
  void Unreserve(const PluginContext& ctx, const JobInfo& job, const Placement& p) override;

 private:
  struct Caps {
    std::optional<std::int64_t> total;
    std::map<const topo::GpuSpec*, std::int64_t> by_type;
  };
  struct Usage {
    std::int64_t total = 0;
    std::map<const topo::GpuSpec*, std::int64_t> by_type;
  };
  const Caps* CapsOf(std::string_view tenant) const;
  std::map<std::string, Usage, std::less<>>& UsageOf(const PluginContext& ctx);
  void Count(const PluginContext& ctx, const JobInfo& job, const Placement& p, int sign);

  std::map<std::string, Caps, std::less<>> caps_;  // "*": tenants not listed
};

}  // namespace baton::sched
