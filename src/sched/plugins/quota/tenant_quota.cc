#include "sched/plugins/quota/tenant_quota.h"

#include <fmt/format.h>

#include <bit>

#include "core/strings.h"

namespace baton::sched {
namespace {

constexpr std::string_view kKey = "tenant-quota/usage";

}  // namespace

TenantQuotaPlugin::TenantQuotaPlugin(const TenancyPolicy& policy) {
  for (const auto& [name, t] : policy.tenants) {
    Caps c;
    c.total = t.max_gpus;
    for (const auto& [type, cap] : t.max_gpus_by_type) {
      auto g = topo::FindGpu(type);
      if (g.ok()) c.by_type[*g] = cap;  // parsed from catalogue names: always found
    }
    caps_[name] = std::move(c);
  }
}

const TenantQuotaPlugin::Caps* TenantQuotaPlugin::CapsOf(std::string_view tenant) const {
  if (auto it = caps_.find(tenant); it != caps_.end()) return &it->second;
  if (auto it = caps_.find("*"); it != caps_.end()) return &it->second;
  return nullptr;
}

std::map<std::string, TenantQuotaPlugin::Usage, std::less<>>& TenantQuotaPlugin::UsageOf(
    const PluginContext& ctx) {
  struct Data final : CycleStateData {
    std::map<std::string, Usage, std::less<>> usage;
  };
  if (auto* d = ctx.cycle.Get<Data>(kKey)) return d->usage;
  auto* d = ctx.cycle.Put(kKey, std::make_unique<Data>());
  const topo::Cluster& c = ctx.state.cluster();
  for (const auto& [id, job] : ctx.jobs) {
    if (job.phase != JobPhase::kRunning && job.phase != JobPhase::kTerminating) continue;
    Usage& u = d->usage[job.spec.tenant];
    for (const auto& a : job.placement.nodes) {
      const std::int64_t n = SharesGpu(job.spec) ? 1 : std::popcount(a.mask);
      u.total += n;
      u.by_type[c.shape_of(a.node).gpu] += n;
    }
  }
  return d->usage;
}

PluginStatus TenantQuotaPlugin::PreFilter(const PluginContext& ctx, const JobInfo& job) {
  const Caps* caps = CapsOf(job.spec.tenant);
  if (caps == nullptr || !caps->total) return PluginStatus::Success();
  const std::string tenant = Printable(job.spec.tenant);
  if (job.spec.gpus > *caps->total) {
    return PluginStatus::Unresolvable(
        fmt::format("tenant '{}' may hold at most {} GPUs, job asks for {}", tenant, *caps->total,
                    job.spec.gpus));
  }
  const std::int64_t used = UsageOf(ctx)[job.spec.tenant].total;
  if (used + job.spec.gpus > *caps->total) {
    return PluginStatus::Unschedulable(
        fmt::format("tenant '{}' holds {} of its {} GPUs", tenant, used, *caps->total));
  }
  return PluginStatus::Success();
}

PluginStatus TenantQuotaPlugin::Filter(const PluginContext& ctx, const JobInfo& job,
                                       topo::NodeId node) {
  const Caps* caps = CapsOf(job.spec.tenant);
  if (caps == nullptr || caps->by_type.empty()) return PluginStatus::Success();
  const topo::GpuSpec* type = ctx.state.cluster().shape_of(node).gpu;
  auto cap = caps->by_type.find(type);
  if (cap == caps->by_type.end()) return PluginStatus::Success();
  auto& usage = UsageOf(ctx);
  auto u = usage.find(job.spec.tenant);
  const std::int64_t used = u == usage.end() ? 0 : u->second.by_type[type];
  const std::int64_t need = SharesGpu(job.spec) ? 1 : job.spec.gpus;
  if (used + need <= cap->second) return PluginStatus::Success();
  std::string why =
      fmt::format("tenant '{}' holds {} of its {} {} GPUs", Printable(job.spec.tenant), used,
                  cap->second, type ? type->name : std::string("?"));
  return need > cap->second ? PluginStatus::Unresolvable(std::move(why))
                            : PluginStatus::Unschedulable(std::move(why));
}

void TenantQuotaPlugin::Count(const PluginContext& ctx, const JobInfo& job, const Placement& p,
                              int sign) {
  Usage& u = UsageOf(ctx)[job.spec.tenant];
  const topo::Cluster& c = ctx.state.cluster();
  for (const auto& a : p.nodes) {
    const std::int64_t n =
        static_cast<std::int64_t>(SharesGpu(job.spec) ? 1 : std::popcount(a.mask)) * sign;
    u.total += n;
    u.by_type[c.shape_of(a.node).gpu] += n;
  }
}

void TenantQuotaPlugin::Reserve(const PluginContext& ctx, const JobInfo& job, const Placement& p) {
  Count(ctx, job, p, +1);
}

void TenantQuotaPlugin::Unreserve(const PluginContext& ctx, const JobInfo& job,
                                  const Placement& p) {
  Count(ctx, job, p, -1);
}

}  // namespace baton::sched
