// The endpoints behind the dashboard's job, tenants and nodes views (GET only; the API's
// pre-routing hook authenticates and authorises them like every other route, api.cc):
//
//   GET /api/v1/jobs/{id}/placement  a job's GPUs, the level they span, the level a compact
//       placement of as many GPUs would span, and for a job with a plan the planner's step-time
//       breakdown on its placement and its slowdown against the compact one. A tenant gets 404
//       for another tenant's job, as for every job endpoint.
//   GET /api/v1/tenants  quota, use and fair share per tenant, now and over the last hour
//       (tenant_history.h). A tenant sees only itself.
//   GET /api/v1/health   (admin) every node's verdict with the rule conditions behind it and the
//       latest telemetry values; the node's leaf, rack and NVLink domain for grouping.
#pragma once

#include <httplib.h>

#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "server/controller.h"
#include "server/http/auth.h"
#include "server/store/job_store.h"

namespace baton::server {

struct DashboardRoute {
  std::string pattern;  // httplib's regular expression
  const char* label;    // the route's shape as api.cc's MatchesShape reads it (static storage)
  bool admin_only = false;
  std::function<void(const httplib::Request&, httplib::Response&, const Principal&)> handler;
};

// The routes above. They share a TenantHistory whose sampler thread starts now and stops when the
// last route is destroyed (with the httplib::Server that holds them); `store` and `controller`
// must outlive that.
std::vector<DashboardRoute> DashboardRoutes(JobStore& store, const Controller& controller);

// {"job", "placed", "source": "scheduler" | "stored", "gpus", "nodes": [{"node", "gpus"}],
// "level", "compact_level", "plan": null | {"model", "plan", "estimate", "compact_estimate",
// "slowdown"}, "plan_note"}. `job` is one the caller may see. Pure perf on the caller's thread.
nlohmann::json JobPlacementJson(const JobRecord& job, const Controller& controller);

// {"rules": [{"name", "severity", "conditions": [...]}], "nodes": [{"node", "leaf", "rack",
// "domain", "health", "active_rules", "verdicts": [{"rule", "severity", "conditions": [{"field",
// "op", "threshold", "clear_threshold", "value"}]}], "signals": {FIELD: value}}]}.
nlohmann::json HealthJson(const Controller& controller);

}  // namespace baton::server
