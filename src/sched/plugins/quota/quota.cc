#include "sched/plugins/quota/quota.h"

#include <fmt/format.h>

#include "core/strings.h"
#include "sched/framework/registry.h"

namespace baton::sched {
namespace {

struct UsageData final : CycleStateData {
  std::map<std::string, std::int64_t> gpus;
};
constexpr std::string_view kKey = "quota/usage";

}  // namespace

Result<std::unique_ptr<Plugin>> QuotaPlugin::Create(const PluginArgs& args) {
  auto p = std::make_unique<QuotaPlugin>();
  for (const auto& [key, value] : args) {
    auto parts = Split(key, '.');
    if (parts.size() != 3 || parts[0] != "tenants" ||
        (parts[2] != "guaranteed" && parts[2] != "borrowable")) {
      return InvalidArgumentError(fmt::format("unknown argument '{}'", key));
    }
    auto v = ParseInt64(value);
    if (!v || *v < 0) {
      return InvalidArgumentError(fmt::format("argument '{}': expected GPUs >= 0", key));
    }
    auto& q = p->quotas_[std::string(parts[1])];
    (parts[2] == "guaranteed" ? q.guaranteed : q.borrowable) = *v;
  }
  return std::unique_ptr<Plugin>(std::move(p));
}

std::map<std::string, std::int64_t>& QuotaPlugin::Usage(const PluginContext& ctx) {
  if (auto* d = ctx.cycle.Get<UsageData>(kKey)) return d->gpus;
  auto* d = ctx.cycle.Put(kKey, std::make_unique<UsageData>());
  for (const auto& [id, job] : ctx.jobs) {
    if (job.phase == JobPhase::kRunning || job.phase == JobPhase::kTerminating) {
      d->gpus[job.spec.tenant] += job.placement.gpus();
    }
  }
  return d->gpus;
}

PluginStatus QuotaPlugin::PreFilter(const PluginContext& ctx, const JobInfo& job) {
  auto it = quotas_.find(job.spec.tenant);
  if (it == quotas_.end()) return PluginStatus::Success();
  const std::int64_t limit = it->second.guaranteed + it->second.borrowable;
  if (job.spec.gpus > limit) {
    return PluginStatus::Unresolvable(
        fmt::format("tenant '{}' may hold at most {} GPUs, job asks for {}", job.spec.tenant, limit,
                    job.spec.gpus));
  }
  const std::int64_t used = Usage(ctx)[job.spec.tenant];
  if (used + job.spec.gpus > limit) {
    return PluginStatus::Unschedulable(
        fmt::format("tenant '{}' holds {} of {} GPUs", job.spec.tenant, used, limit));
  }
  return PluginStatus::Success();
}

std::optional<std::int64_t> QuotaPlugin::Guaranteed(std::string_view tenant) const {
  auto it = quotas_.find(tenant);
  if (it == quotas_.end()) return std::nullopt;
  return it->second.guaranteed;
}

void QuotaPlugin::Reserve(const PluginContext& ctx, const JobInfo& job, const Placement& p) {
  Usage(ctx)[job.spec.tenant] += p.gpus();
}

void QuotaPlugin::Unreserve(const PluginContext& ctx, const JobInfo& job, const Placement& p) {
  Usage(ctx)[job.spec.tenant] -= p.gpus();
}

// tenant-quota is not in the registry: the scheduler adds it when the tenancy policy has quotas.
void RegisterQuotaPlugins(PluginRegistry& registry) {
  registry["quota"] = [](const PluginArgs& a, const PluginDeps&) { return QuotaPlugin::Create(a); };
}

}  // namespace baton::sched
