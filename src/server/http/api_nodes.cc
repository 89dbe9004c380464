// The nodes, telemetry, topology and sites handlers of the HTTP API (api_routes.h).
#include <fmt/format.h>
#include <httplib.h>

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/bounded_input.h"
#include "core/log.h"
#include "core/strings.h"
#include "server/http/api_routes.h"
#include "server/http/dcgm.h"

namespace baton::server {

void Api::Routes::SetNode(const httplib::Request& req, std::string_view body,
                          httplib::Response& res, const Principal& who) {
  NodeAdminState state;
  state.node = req.matches[1].str();
  std::string verb = req.matches[2].str();
  state.admin = verb == "cordon"  ? NodeAdmin::kCordoned
                : verb == "drain" ? NodeAdmin::kDraining
                                  : NodeAdmin::kActive;
  state.by = who.name;
  // A node the scheduler does not have is not found (without a scheduler there is no list to
  // check against, and any name is recorded for when one starts).
  std::vector<NodeView> known = api.controller_.Nodes();
  if (!known.empty() && std::none_of(known.begin(), known.end(),
                                     [&](const NodeView& n) { return n.name == state.node; })) {
    return SendError(res, 404, "NOT_FOUND",
                     "node " + Printable(state.node, 64) + " is not in the cluster", "node");
  }
  if (!body.empty()) {
    Result<json> parsed = ParseJsonBounded(body, ShallowJson());
    if (!parsed.ok()) {
      return SendError(res, 400, "INVALID_ARGUMENT",
                       "body: " + std::string(parsed.status().message()), "body");
    }
    if (!parsed->is_object()) {
      return SendError(res, 400, "INVALID_ARGUMENT", "body must be a JSON object", "body");
    }
    for (const auto& [key, v] : parsed->items()) {
      if (key != "reason") {
        return SendError(res, 400, "INVALID_ARGUMENT", "unknown field (expected reason)",
                         Printable(key, 64));
      }
      if (!v.is_string() || v.get<std::string>().size() > 1024) {
        return SendError(res, 400, "INVALID_ARGUMENT", "must be a string of at most 1024 bytes",
                         "reason");
      }
      state.reason = v.get<std::string>();
    }
  }
  Status s = api.store_.SetNodeAdmin(state);
  if (!s.ok()) return SendStatus(res, s);
  // The reply is the record as stored, with the time the store gave it.
  Result<std::vector<NodeAdminState>> stored = api.store_.ListNodeAdmin();
  if (!stored.ok()) return SendStatus(res, stored.status());
  for (const NodeAdminState& n : *stored) {
    if (n.node == state.node) state = n;
  }
  api.controller_.OnNodeAdminChanged(state);
  LOG_INFO("node {} set {} by {}: {}", state.node, NodeAdminName(state.admin), who.name,
           state.reason);
  SendJson(res, 200, NodeJson(state));
}

// Every node of the cluster (health, allocation, jobs) merged with its admin state; without a
// scheduler, only the nodes that have an admin state. `only`: one node by name.
void Api::Routes::Nodes(httplib::Response& res, std::optional<std::string> only) {
  Result<std::vector<NodeAdminState>> admin = api.store_.ListNodeAdmin();
  if (!admin.ok()) return SendStatus(res, admin.status());
  std::map<std::string, const NodeAdminState*> by_name;
  for (const auto& a : *admin) by_name[a.node] = &a;
  std::vector<NodeView> views = api.controller_.Nodes();
  json list = json::array();
  if (views.empty()) {
    for (const auto& a : *admin) {
      if (!only || a.node == *only) list.push_back(NodeJson(a));
    }
  }
  for (const NodeView& v : views) {
    if (only && v.name != *only) continue;
    json n = {{"node", v.name},
              {"health", v.health},
              {"active_rules", v.active_rules},
              {"gpus", v.gpus},
              {"gpus_allocated", v.gpus_allocated},
              {"jobs", v.jobs},
              {"admin", "active"}};
    if (auto it = by_name.find(v.name); it != by_name.end()) {
      json a = NodeJson(*it->second);
      for (const char* key : {"admin", "reason", "by", "updated_at"}) n[key] = a[key];
    }
    list.push_back(std::move(n));
  }
  if (only) {
    if (list.empty()) {
      return SendError(res, 404, "NOT_FOUND", "node " + Printable(*only, 64) + " not found");
    }
    return SendJson(res, 200, list[0]);
  }
  SendJson(res, 200, json{{"nodes", std::move(list)}});
}

void Api::Routes::ApplyTelemetry(httplib::Response& res, const std::string& node,
                                 const TelemetrySample& sample) {
  Status s = api.controller_.Telemetry(node, sample);
  if (!s.ok()) return SendStatus(res, s);
  api.telemetry_.WithLabels({"json"}).Increment();
  SendJson(res, 202, json{{"node", node}, {"fields", sample.size()}});
}

void Api::Routes::NodeTelemetry(const httplib::Request& req, std::string_view body,
                                httplib::Response& res) {
  Result<json> parsed = ParseJsonBounded(body, ShallowJson());
  if (!parsed.ok()) {
    return SendError(res, 400, "INVALID_ARGUMENT",
                     "body: " + std::string(parsed.status().message()), "body");
  }
  if (!parsed->is_object() || parsed->empty()) {
    return SendError(res, 400, "INVALID_ARGUMENT",
                     "body must be a JSON object of DCGM field name -> number", "body");
  }
  TelemetrySample sample;
  for (const auto& [key, v] : parsed->items()) {
    if (!v.is_number()) {
      return SendError(res, 400, "INVALID_ARGUMENT", "must be a number", Printable(key, 64));
    }
    sample[key] = v.get<double>();
  }
  ApplyTelemetry(res, req.matches[1].str(), sample);
}

void Api::Routes::Dcgm(std::string_view body, httplib::Response& res) {
  Result<DcgmScrape> scrape = ParseDcgmScrape(body);
  if (!scrape.ok()) {
    return SendError(res, 400, "INVALID_ARGUMENT", scrape.status().message(), "body");
  }
  json accepted = json::array(), unknown = json::array();
  for (const auto& [node, sample] : scrape->nodes) {
    Status s = api.controller_.Telemetry(node, sample);
    if (s.code() == StatusCode::kNotFound) {
      unknown.push_back(node);
    } else if (!s.ok()) {
      return SendStatus(res, s);
    } else {
      accepted.push_back(node);
    }
  }
  api.telemetry_.WithLabels({"dcgm"}).Increment();
  SendJson(res, 202,
           json{{"nodes", std::move(accepted)},
                {"unknown_nodes", std::move(unknown)},
                {"samples", scrape->samples},
                {"skipped_lines", scrape->skipped}});
}

// A federation broker's sites: health, jobs in flight, the last what-if answer. Tenants see
// only each site's name and health: the rest (URLs, other tenants' answers) is an admin's.
void Api::Routes::Sites(httplib::Response& res, bool full) {
  std::optional<std::vector<SiteView>> sites = api.controller_.Sites();
  if (!sites) return SendError(res, 404, "NOT_FOUND", "this daemon is not a federation broker");
  json list = json::array();
  for (const SiteView& s : *sites) {
    if (!full) {
      list.push_back({{"name", s.name}, {"healthy", s.healthy}});
      continue;
    }
    json j = {{"name", s.name},
              {"url", s.url},
              {"regions", s.regions},
              {"healthy", s.healthy},
              {"jobs_in_flight", s.jobs_in_flight}};
    if (s.last_ok) j["last_ok"] = Rfc3339(*s.last_ok);
    if (!s.last_error.empty()) j["last_error"] = s.last_error;
    if (s.last_answer_at) {
      j["last_answer"] = {{"at", Rfc3339(*s.last_answer_at)}, {"summary", s.last_answer}};
    }
    list.push_back(std::move(j));
  }
  SendJson(res, 200, json{{"sites", std::move(list)}});
}

// The cluster's summary and its GPU counts, from one snapshot of the controller, so that the
// two agree.
void Api::Routes::Topology(httplib::Response& res) {
  std::string summary = api.controller_.Topology();
  if (summary.empty()) {
    return SendError(res, 503, "UNAVAILABLE", "no scheduler is running (no topology)");
  }
  std::vector<NodeView> nodes = api.controller_.Nodes();
  int gpus = 0, allocated = 0;
  for (const auto& n : nodes) {
    gpus += n.gpus;
    allocated += n.gpus_allocated;
  }
  SendJson(res, 200,
           json{{"summary", summary},
                {"nodes", nodes.size()},
                {"gpus", gpus},
                {"gpus_allocated", allocated}});
}

}  // namespace baton::server
