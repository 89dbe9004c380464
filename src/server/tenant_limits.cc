#include "server/tenant_limits.h"

#include <optional>
#include <string_view>
#include <vector>

#include "core/strings.h"

namespace baton::server {

std::map<std::string, TenantLimits> TenantLimitsOf(const sched::SchedulerConfig& config) {
  std::map<std::string, TenantLimits> out;
  for (const auto& [tenant, policy] : config.tenancy.tenants) {
    if (policy.max_gpus) out[tenant].quota_gpus = *policy.max_gpus;
  }
  for (const sched::PluginConfig& plugin : config.plugins) {
    if (plugin.name != "quota" && plugin.name != "drf") continue;
    for (const auto& [key, value] : plugin.args) {
      std::vector<std::string_view> parts = Split(key, '.');
      if (parts.size() != 3 || parts[0] != "tenants") continue;
      TenantLimits& t = out[std::string(parts[1])];
      if (plugin.name == "drf" && parts[2] == "weight") {
        if (std::optional<double> w = ParseDouble(value); w && *w > 0) t.weight = *w;
      } else if (plugin.name == "quota" && parts[2] == "guaranteed") {
        if (std::optional<std::int64_t> n = ParseInt64(value)) t.guaranteed_gpus = *n;
      } else if (plugin.name == "quota" && parts[2] == "borrowable") {
        if (std::optional<std::int64_t> n = ParseInt64(value)) t.borrowable_gpus = *n;
      }
    }
  }
  return out;
}

}  // namespace baton::server
