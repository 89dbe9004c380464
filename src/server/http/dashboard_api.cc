#include "server/http/dashboard_api.h"

#include <fmt/format.h>

#include <algorithm>
#include <memory>
#include <optional>

#include "core/strings.h"
#include "perf/placement.h"
#include "perf/report.h"
#include "perf/request.h"
#include "server/http/job_spec.h"
#include "server/http/tenant_history.h"

namespace baton::server {
namespace {

using nlohmann::json;

void Send(httplib::Response& res, int status, const json& body) {
  res.status = status;
  res.set_content(body.dump(-1, ' ', false, json::error_handler_t::replace), "application/json");
}

void SendError(httplib::Response& res, int status, std::string_view code,
               std::string_view message) {
  Send(res, status, json{{"error", {{"code", code}, {"message", message}}}});
}

std::string_view OpName(health::Op op) {
  switch (op) {
    case health::Op::kGreater:
      return ">";
    case health::Op::kGreaterEqual:
      return ">=";
    case health::Op::kLess:
      return "<";
    case health::Op::kLessEqual:
      return "<=";
    case health::Op::kEqual:
      return "==";
    case health::Op::kNotEqual:
      return "!=";
  }
  return "?";
}

json ConditionJson(const health::Condition& c) {
  json out = {{"field", c.field}, {"op", OpName(c.op)}, {"threshold", c.threshold}};
  out["clear_threshold"] = c.clear_threshold ? json(*c.clear_threshold) : json(nullptr);
  return out;
}

// The widest level any two of `gpus` meet at (a tree's meet is ultrametric: the first GPU against
// every other is enough); "gpu" for one GPU.
topo::Level Span(const topo::Cluster& cluster, const std::vector<topo::GpuRef>& gpus) {
  topo::Level level = topo::Level::kGpu;
  for (std::size_t i = 1; i < gpus.size(); ++i) {
    level = std::max(level, cluster.Meet(gpus[0], gpus[i]));
  }
  return level;
}

}  // namespace

json JobPlacementJson(const JobRecord& job, const Controller& controller) {
  json out = {{"job", job.id}, {"placed", false}, {"plan", nullptr}};
  // Where it runs: the scheduler's view (rank order) while it holds the job, else the placement
  // the store kept from its last run (node order).
  std::vector<PlacementView::NodeGpus> nodes;
  std::string level;
  if (!IsTerminal(job.state)) {
    if (std::optional<PlacementView> p = controller.JobPlacement(job.id); p && !p->nodes.empty()) {
      nodes = p->nodes;
      level = p->level;
      out["source"] = "scheduler";
    }
  }
  if (nodes.empty() && !job.placement.empty()) {
    for (const PlacedNode& n : job.placement) {
      PlacementView::NodeGpus g{n.node, {}};
      for (int i = 0; i < 64; ++i) {
        if (((n.mask >> i) & 1U) != 0) g.gpus.push_back(i);
      }
      nodes.push_back(std::move(g));
    }
    out["source"] = "stored";
  }
  if (nodes.empty()) {
    out["plan_note"] = "the job holds no GPUs";
    return out;
  }
  out["placed"] = true;
  json list = json::array();
  int count = 0;
  for (const auto& n : nodes) {
    list.push_back({{"node", n.node}, {"gpus", n.gpus}});
    count += static_cast<int>(n.gpus.size());
  }
  out["nodes"] = std::move(list);
  out["gpus"] = count;
  if (!level.empty()) out["level"] = level;
  const topo::Cluster* cluster = controller.Structure();
  if (cluster == nullptr) {
    out["plan_note"] = "no scheduler is running: no cluster to price the placement on";
    return out;
  }
  std::vector<topo::GpuRef> gpus;
  for (const auto& n : nodes) {
    Result<topo::NodeId> id = cluster->FindNode(n.node);
    if (!id.ok()) {
      out["plan_note"] = "node " + Printable(n.node, 64) + " is no longer in the cluster";
      return out;
    }
    for (int g : n.gpus) {
      if (g < 0 || g >= cluster->node(*id).gpus) continue;
      gpus.push_back({*id, static_cast<std::uint8_t>(g)});
    }
  }
  if (level.empty()) out["level"] = topo::LevelName(Span(*cluster, gpus));
  Result<std::vector<topo::GpuRef>> compact = perf::CompactGpus(*cluster, count);
  if (compact.ok()) out["compact_level"] = topo::LevelName(Span(*cluster, *compact));

  // The plan, as the API checked it at submission (perf::ResolveJobPlan on the daemon's cluster):
  // the job's own plan when feasible there, else the planner's best for its GPUs.
  std::string field;
  Result<JobSpec> spec = ParseJobSpec(job.spec_json, BodyFormat::kJson);
  if (!spec.ok() || !spec->plan) {
    out["plan_note"] =
        "the job has no plan: the planner prices placements only for jobs submitted with one";
    return out;
  }
  Result<perf::SystemSpec> planning = controller.PlanningSystem();
  if (!planning.ok() || !compact.ok()) {
    out["plan_note"] =
        std::string(!planning.ok() ? planning.status().message() : compact.status().message());
    return out;
  }
  perf::SystemSpec system = std::move(planning).value();
  system.gpus = count;
  const perf::JobPlanRequest& request = spec->plan->request;
  Result<perf::ParallelPlan> plan = perf::ResolveJobPlan(request, system, &field);
  if (!plan.ok()) {
    out["plan_note"] = std::string(plan.status().message());
    return out;
  }
  Result<perf::StepEstimate> here =
      perf::EstimateOnPlacement(request.model, *plan, request.training, system, *cluster, gpus);
  Result<perf::StepEstimate> tight =
      perf::EstimateOnPlacement(request.model, *plan, request.training, system, *cluster, *compact);
  if (!here.ok() || !tight.ok()) {
    out["plan_note"] = std::string(!here.ok() ? here.status().message() : tight.status().message());
    return out;
  }
  json p = {{"model", request.model.name},
            {"plan", perf::PlanToJson(*plan)},
            {"estimate", perf::EstimateToJson(*here)},
            {"compact_estimate", perf::EstimateToJson(*tight)},
            {"slowdown", nullptr}};
  if (tight->step.value() > 0) p["slowdown"] = here->step.value() / tight->step.value();
  out["plan"] = std::move(p);
  return out;
}

json HealthJson(const Controller& controller) {
  const std::vector<health::Rule>& rules = controller.HealthRules();
  json rule_list = json::array();
  for (const health::Rule& r : rules) {
    json conditions = json::array();
    for (const health::Condition& c : r.all_of) conditions.push_back(ConditionJson(c));
    rule_list.push_back({{"name", r.name},
                         {"severity", topo::NodeHealthName(r.severity)},
                         {"trigger_samples", r.trigger_samples},
                         {"clear_samples", r.clear_samples},
                         {"conditions", std::move(conditions)}});
  }
  const topo::Cluster* cluster = controller.Structure();
  json nodes = json::array();
  for (const NodeView& v : controller.Nodes()) {
    json n = {{"node", v.name},       {"health", v.health}, {"active_rules", v.active_rules},
              {"signals", v.signals}, {"leaf", nullptr},    {"rack", nullptr},
              {"domain", nullptr}};
    if (cluster != nullptr) {
      if (Result<topo::NodeId> id = cluster->FindNode(v.name); id.ok()) {
        const topo::Node& node = cluster->node(*id);
        if (node.ancestors[0].valid()) n["leaf"] = cluster->sw(node.ancestors[0]).name;
        const auto rack = node.failure_domains[static_cast<int>(topo::FailureDomainKind::kRack)];
        if (rack.valid()) n["rack"] = cluster->failure_domains()[rack.value()].name;
        if (node.nvlink_domain.valid() &&
            cluster->nvlink_domain(node.nvlink_domain).nodes.size() > 1) {
          n["domain"] = cluster->nvlink_domain(node.nvlink_domain).name;
        }
      }
    }
    json verdicts = json::array();
    for (const std::string& name : v.active_rules) {
      auto r = std::find_if(rules.begin(), rules.end(),
                            [&](const health::Rule& x) { return x.name == name; });
      json verdict = {{"rule", name}, {"severity", nullptr}, {"conditions", json::array()}};
      if (r != rules.end()) {
        verdict["severity"] = topo::NodeHealthName(r->severity);
        for (const health::Condition& c : r->all_of) {
          json cj = ConditionJson(c);
          auto value = v.signals.find(c.field);
          cj["value"] = value == v.signals.end() ? json(nullptr) : json(value->second);
          verdict["conditions"].push_back(std::move(cj));
        }
      }
      verdicts.push_back(std::move(verdict));
    }
    n["verdicts"] = std::move(verdicts);
    nodes.push_back(std::move(n));
  }
  return {{"rules", std::move(rule_list)}, {"nodes", std::move(nodes)}};
}

std::vector<DashboardRoute> DashboardRoutes(JobStore& store, const Controller& controller) {
  auto history = std::make_shared<TenantHistory>(store, controller);
  history->Start();
  std::vector<DashboardRoute> routes;
  routes.push_back(
      {"/api/v1/tenants", "/api/v1/tenants", false,
       [history](const httplib::Request&, httplib::Response& res, const Principal& who) {
         Send(res, 200, history->Json(history->Measure(), who));
       }});
  routes.push_back({R"(/api/v1/jobs/(\d{1,19})/placement)", "/api/v1/jobs/{id}/placement", false,
                    [&store, &controller](const httplib::Request& req, httplib::Response& res,
                                          const Principal& who) {
                      std::optional<std::int64_t> id = ParseInt64(req.matches[1].str());
                      Result<JobRecord> job =
                          id && *id > 0 ? store.Get(*id) : Result<JobRecord>(NotFoundError(""));
                      // Another tenant's job is "not found", as on every job endpoint.
                      if (!job.ok() || (who.role != Role::kAdmin && job->tenant != who.tenant)) {
                        if (job.ok() || job.status().code() == StatusCode::kNotFound) {
                          return SendError(res, 404, "NOT_FOUND",
                                           "job " + Printable(req.matches[1].str()) + " not found");
                        }
                        return SendError(res, 503, "UNAVAILABLE", job.status().message());
                      }
                      Send(res, 200, JobPlacementJson(*job, controller));
                    }});
  routes.push_back({"/api/v1/health", "/api/v1/health", true,
                    [&controller](const httplib::Request&, httplib::Response& res,
                                  const Principal&) { Send(res, 200, HealthJson(controller)); }});
  return routes;
}

}  // namespace baton::server
