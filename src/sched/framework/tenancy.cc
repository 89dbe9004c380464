#include "sched/framework/tenancy.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <limits>

#include "core/strings.h"
#include "sched/framework/config.h"
#include "topology/gpu.h"

namespace baton::sched {
namespace {

// Priorities and GPU counts are bounded well inside int: a policy is written by an operator, and
// a bound this wide refuses typos (1e20) without limiting any real cluster.
constexpr std::int64_t kMaxAbsPriority = 1'000'000;
constexpr std::int64_t kMaxGpus = 10'000'000;

Status Field(std::string_view field, std::string_view why) {
  return InvalidArgumentError(fmt::format("field '{}': {}", field, why));
}

Result<std::int64_t> Integer(const YAML::Node& n, const std::string& field, std::int64_t lo,
                             std::int64_t hi) {
  if (!n.IsScalar()) return Field(field, "expected an integer");
  auto v = ParseInt64(n.Scalar());
  if (!v || *v < lo || *v > hi) {
    return Field(field, fmt::format("expected an integer in [{}, {}]", lo, hi));
  }
  return *v;
}

Status ParseTenant(const YAML::Node& n, const std::string& prefix, TenantPolicy* t) {
  if (!n.IsMap()) return Field(prefix, "expected a mapping");
  for (const auto& kv : n) {
    const std::string key = kv.first.Scalar();
    const YAML::Node& v = kv.second;
    const std::string field = prefix + "." + Printable(key);
    if (key == "priority") {
      if (!v.IsMap()) return Field(field, "expected {min: N, max: N}");
      for (const auto& p : v) {
        const std::string pk = p.first.Scalar();
        if (pk != "min" && pk != "max") return Field(field + "." + Printable(pk), "unknown field");
        ASSIGN_OR_RETURN(std::int64_t x, Integer(p.second, fmt::format("{}.{}", field, pk),
                                                 -kMaxAbsPriority, kMaxAbsPriority));
        (pk == "min" ? t->min_priority : t->max_priority) = static_cast<int>(x);
      }
      if (t->min_priority && t->max_priority && *t->min_priority > *t->max_priority) {
        return Field(field, "min is above max");
      }
    } else if (key == "may_preempt") {
      if (!v.IsSequence()) return Field(field, "expected a list of tenant names");
      std::vector<std::string> names;
      for (std::size_t i = 0; i < v.size(); ++i) {
        if (!v[i].IsScalar() || v[i].Scalar().empty()) {
          return Field(fmt::format("{}[{}]", field, i), "expected a tenant name");
        }
        names.push_back(v[i].Scalar());
      }
      t->may_preempt = std::move(names);
    } else if (key == "quota") {
      if (!v.IsMap()) return Field(field, "expected {gpus: N, gpu_types: {TYPE: N}}");
      for (const auto& q : v) {
        const std::string qk = q.first.Scalar();
        if (qk == "gpus") {
          ASSIGN_OR_RETURN(t->max_gpus, Integer(q.second, field + ".gpus", 0, kMaxGpus));
        } else if (qk == "gpu_types") {
          if (!q.second.IsMap()) return Field(field + ".gpu_types", "expected {TYPE: N}");
          for (const auto& g : q.second) {
            const std::string type = g.first.Scalar();
            const std::string gf = field + ".gpu_types." + Printable(type);
            auto spec = topo::FindGpu(type);
            if (!spec.ok()) return Field(gf, "unknown GPU type");
            ASSIGN_OR_RETURN(std::int64_t cap, Integer(g.second, gf, 0, kMaxGpus));
            if (!t->max_gpus_by_type.emplace((*spec)->name, cap).second) {
              return Field(gf, "GPU type given twice");
            }
          }
        } else {
          return Field(field + "." + Printable(qk), "unknown field (expected gpus, gpu_types)");
        }
      }
    } else {
      return Field(field, "unknown field (expected priority, may_preempt, quota)");
    }
  }
  return Status::Ok();
}

Result<TenancyPolicy> ParseTenancy(const YAML::Node& n, Seconds min_run_time) {
  TenancyPolicy p;
  p.min_run_time = min_run_time;
  if (n.IsNull()) return p;
  if (!n.IsMap()) return Field("tenancy", "expected a mapping");
  for (const auto& kv : n) {
    const std::string key = kv.first.Scalar();
    const YAML::Node& v = kv.second;
    if (key == "cross_tenant_preemption") {
      const std::string s = v.IsScalar() ? v.Scalar() : "";
      if (s != "allow" && s != "deny") {
        return Field("tenancy.cross_tenant_preemption", "expected allow or deny");
      }
      p.cross_tenant_preemption = s == "allow";
    } else if (key == "tenants") {
      if (!v.IsMap()) return Field("tenancy.tenants", "expected a mapping of tenant names");
      for (const auto& t : v) {
        const std::string name = t.first.Scalar();
        const std::string field = "tenancy.tenants." + Printable(name);
        if (name.empty()) return Field(field, "empty tenant name");
        TenantPolicy tp;
        RETURN_IF_ERROR(ParseTenant(t.second, field, &tp));
        if (!p.tenants.emplace(name, std::move(tp)).second) {
          return Field(field, "tenant given twice");
        }
      }
    } else {
      return Field("tenancy." + Printable(key),
                   "unknown field (expected cross_tenant_preemption, tenants)");
    }
  }
  return p;
}

}  // namespace

const TenantPolicy* TenancyPolicy::Find(std::string_view tenant) const {
  if (auto it = tenants.find(tenant); it != tenants.end()) return &it->second;
  if (auto it = tenants.find("*"); it != tenants.end()) return &it->second;
  return nullptr;
}

Status TenancyPolicy::CheckPriority(std::string_view tenant, int priority) const {
  const TenantPolicy* t = Find(tenant);
  if (t == nullptr) return Status::Ok();
  if ((t->min_priority && priority < *t->min_priority) ||
      (t->max_priority && priority > *t->max_priority)) {
    const std::string lo = t->min_priority ? std::to_string(*t->min_priority) : std::string("-inf");
    const std::string hi = t->max_priority ? std::to_string(*t->max_priority) : std::string("+inf");
    return InvalidArgumentError(
        fmt::format("field 'priority': tenant '{}' may use priorities {}..{}, job asks for {}",
                    Printable(tenant), lo, hi, priority));
  }
  return Status::Ok();
}

bool TenancyPolicy::MayPreempt(std::string_view preemptor, std::string_view victim) const {
  if (preemptor == victim) return true;
  const TenantPolicy* t = Find(preemptor);
  if (t == nullptr || !t->may_preempt) return cross_tenant_preemption;
  for (const auto& name : *t->may_preempt) {
    if (name == "*" || name == victim) return true;
  }
  return false;
}

bool TenancyPolicy::HasQuotas() const {
  for (const auto& [name, t] : tenants) {
    if (t.max_gpus || !t.max_gpus_by_type.empty()) return true;
  }
  return false;
}

bool IsPolicyField(std::string_view key) { return key == "tenancy" || key == "min_run_time"; }

Status ParsePolicyField(std::string_view key, const YAML::Node& value, SchedulerConfig* config) {
  if (key == "min_run_time") {
    // Seconds; a day is far beyond any useful hysteresis and refuses unit mistakes (ms).
    if (!value.IsScalar()) return Field("min_run_time", "expected seconds");
    auto v = ParseDouble(value.Scalar());
    if (!v || !(*v >= 0) || *v > 86400) {
      return Field("min_run_time", "expected seconds in [0, 86400]");
    }
    config->tenancy.min_run_time = Seconds(*v);
    return Status::Ok();
  }
  if (key == "tenancy") {
    ASSIGN_OR_RETURN(config->tenancy, ParseTenancy(value, config->tenancy.min_run_time));
    return Status::Ok();
  }
  return Field(key, "not a tenancy field");
}

}  // namespace baton::sched
