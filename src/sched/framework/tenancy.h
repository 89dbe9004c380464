// TenancyPolicy: who may ask for what and who may evict whom, per tenant. It is the `tenancy:`
// section of the scheduler config (docs/tenancy.md gives the format):
//
//   min_run_time: 60                  # seconds a job runs before it may be preempted
//   tenancy:
//     cross_tenant_preemption: deny   # deny (default) | allow: for tenants without may_preempt
//     tenants:
//       research:
//         priority: {min: 0, max: 5}  # allowed range (inclusive); a job outside it is refused
//         may_preempt: [batch]        # tenants whose jobs research's jobs may evict; "*": any
//         quota: {gpus: 256, gpu_types: {H100-SXM: 128}}
//       "*":                          # every tenant not listed
//         priority: {min: 0, max: 0}
//
// A job may always evict lower-priority jobs of its own tenant; another tenant's only when the
// preemptor's tenant lists it in may_preempt (or "*"), or, for a tenant with no may_preempt
// entry, when cross_tenant_preemption is allow. Reclaim (taking back GPUs lent beyond a quota
// plugin's guarantee) is governed by the quota plugin, not by this list. Immutable once parsed:
// safe to read from any thread.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "core/units.h"

namespace YAML {
class Node;
}

namespace baton::sched {

struct SchedulerConfig;

struct TenantPolicy {
  // Allowed job priorities, inclusive. nullopt: no bound on that side.
  std::optional<int> min_priority;
  std::optional<int> max_priority;
  // Tenants whose jobs this tenant's jobs may evict (besides its own); "*" means any. nullopt:
  // not given, the policy's cross_tenant_preemption decides.
  std::optional<std::vector<std::string>> may_preempt;
  // GPUs the tenant may hold at once (running and terminating jobs), and per GPU type (catalogue
  // name, e.g. "H100-SXM"; aliases are resolved at parse time). nullopt / absent: unlimited.
  std::optional<std::int64_t> max_gpus;
  std::map<std::string, std::int64_t, std::less<>> max_gpus_by_type;

  bool operator==(const TenantPolicy&) const = default;
};

struct TenancyPolicy {
  bool cross_tenant_preemption = false;
  std::map<std::string, TenantPolicy, std::less<>> tenants;  // "*": every tenant not listed
  // A job that has run less than this since its (re)start is not a preemption or reclaim victim:
  // without it a job can be placed and evicted in the same second over and over. One minute is
  // a policy choice (about the time a large gang needs to start up and reach its first step);
  // 0 restores eviction at any age.
  Seconds min_run_time = Seconds(60);

  // The tenant's entry, else the "*" entry, else null.
  const TenantPolicy* Find(std::string_view tenant) const;
  // OK, or InvalidArgument "field 'priority': tenant 't' may use priorities 0..5, job asks for 10".
  // This is the check the API runs at submit and the scheduler runs at admission.
  Status CheckPriority(std::string_view tenant, int priority) const;
  // Whether a job of `preemptor` may evict a job of `victim` (same tenant: always).
  bool MayPreempt(std::string_view preemptor, std::string_view victim) const;
  // Whether any tenant has a quota (then the scheduler enforces them).
  bool HasQuotas() const;

  bool operator==(const TenancyPolicy&) const = default;
};

// Parses one top-level scheduler-config field this file owns ("tenancy" or "min_run_time") into
// `config`. Errors name the field ("field 'tenancy.tenants.a.priority.min': expected an
// integer"); unknown keys and duplicate tenants are refused. A node of the wrong type may make
// yaml-cpp throw: call it within ReadYaml (core/bounded_input.h), as ParseSchedulerConfig does.
Status ParsePolicyField(std::string_view key, const YAML::Node& value, SchedulerConfig* config);
// Whether ParsePolicyField owns `key`.
bool IsPolicyField(std::string_view key);

}  // namespace baton::sched
