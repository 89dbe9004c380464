// What a scheduler configuration says about each tenant, gathered for the dashboard's tenants
// view (Controller::TenantLimitsByName): the tenancy policy's quota
// (`tenancy.tenants.T.quota.gpus`), the `quota` plugin's `tenants.T.guaranteed` /
// `tenants.T.borrowable` and the `drf` queue's `tenants.T.weight`. Pure.
#pragma once

#include <map>
#include <string>

#include "sched/framework/config.h"
#include "server/controller.h"

namespace baton::server {

// Every tenant any of those names ("*" included when the policy has it). Plugin arguments that
// do not parse are left out: the scheduler refused such a configuration when it was built.
std::map<std::string, TenantLimits> TenantLimitsOf(const sched::SchedulerConfig& config);

}  // namespace baton::server
