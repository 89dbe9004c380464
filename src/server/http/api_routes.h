// The HTTP API's handlers (Api::Routes) and the answer helpers they share, private to
// server/http: api.cc holds the routing (the route table, authentication before any body is
// read, body limits) and the helpers, api_jobs.cc the jobs, what-if and plan handlers,
// api_nodes.cc the nodes, telemetry, topology and sites handlers.
#pragma once

#include <httplib.h>

#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/bounded_input.h"
#include "perf/request.h"
#include "server/http/api.h"

namespace baton::server {
namespace api_internal {

using nlohmann::json;

enum class Access { kPublic, kAuthenticated, kAdmin };

void SendJson(httplib::Response& res, int status, const json& body);
// {"error": {"code", "message", "field"}} with the HTTP status; `field` left out when empty.
void SendError(httplib::Response& res, int status, std::string_view code, std::string_view message,
               std::string_view field = {});
// A Status as its HTTP status and code, with its field().
void SendStatus(httplib::Response& res, const Status& s);
// "2026-12-06T04:20:00.000Z".
std::string Rfc3339(TimePoint t);
json PlacementJson(const PlacementView& p);
// A job as the API shows it, with the scheduler's view of it while it is not terminal.
json JobJson(const JobRecord& j, const Controller& controller);
json NodeJson(const NodeAdminState& n);
// 1-255 printable ASCII characters.
bool ValidIdempotencyKey(std::string_view key);
JsonLimits ShallowJson();

}  // namespace api_internal

using api_internal::Access;
using api_internal::JobJson;
using api_internal::json;
using api_internal::NodeJson;
using api_internal::PlacementJson;
using api_internal::Rfc3339;
using api_internal::SendError;
using api_internal::SendJson;
using api_internal::SendStatus;
using api_internal::ShallowJson;
using api_internal::ValidIdempotencyKey;

// The handlers, with access to the Api's members.
struct Api::Routes {
  // `body` is the request body, read within the limit (empty when the request has none).
  using Handler = std::function<void(const httplib::Request&, std::string_view body,
                                     httplib::Response&, const Principal&)>;

  struct Route {
    std::string method;  // GET, POST or DELETE (HEAD is served as GET)
    const char* label;   // the route's shape, as MatchesShape reads it; the label in metrics
    Access access;
  };

  Api& api;
  httplib::Server& server;
  std::size_t max_body;
  ConnectionHooks hooks;
  std::vector<Route> table;

  void Add(const char* method, const std::string& pattern, const char* route, Access access,
           const Handler& handler);

  // Stops reading the request's connection once the response is written (a refused body is left
  // unread: reading it would be the attack).
  void CloseAfterResponse(const httplib::Request& req, httplib::Response& res);

  // Reads the body, chunked or not, into `body`, refusing it with 413 once it passes the limit.
  // A request that announces no body (a cancel with neither Content-Length nor chunks) has none:
  // nothing is waited for.
  bool ReadBody(const httplib::Request& req, const httplib::ContentReader& reader,
                httplib::Response& res, std::string& body);

  // Runs before httplib reads any of the body: finds the route (404 or 405 otherwise),
  // authenticates and authorises (401, 403), and checks an announced Content-Length (413). A
  // refused request's body is never read, and its connection is closed after the answer.
  httplib::Server::HandlerResponse PreRoute(const httplib::Request& req, httplib::Response& res);

  // Loads a job the principal may see; a tenant gets "not found" for other tenants' jobs, so
  // that ids do not reveal what other tenants run.
  std::optional<JobRecord> VisibleJob(const httplib::Request& req, httplib::Response& res,
                                      const Principal& who);

  // The planner on the daemon's own cluster: estimate one plan, or search the space. Pure
  // computation on this worker thread (a search is bounded by perf::kMaxRequestSearchSpace and
  // takes milliseconds for the catalogue's models); nothing is stored.
  void Plan(const httplib::Request& req, std::string_view body, httplib::Response& res,
            perf::PlanQuestion question);

  // A job's plan must be feasible on the daemon's cluster: checked here, before the job is
  // stored, with the planner itself (pure computation on this worker thread, as the plan
  // endpoints do; the controller's PlannerEstimator is touched only by its own thread). Without a
  // scheduler there is no cluster to check against: the plan is accepted, and a controller that
  // cannot use it later fails the job with the reason.
  Status CheckPlan(const JobSpec& spec);

  // The answer to a submit whose Idempotency-Key already names `original`: that job (200) when
  // the request is the same (canonical spec), else 409.
  void Replay(const JobRecord& original, std::string_view spec_json, const std::string& key,
              httplib::Response& res);

  // The job spec of a submit or what-if body: its Content-Type (415), the spec itself (400 naming
  // the field) and its tenant, which must be the caller's unless the caller is an admin (403;
  // `verb` says what was refused: "submit jobs for"); a spec without one gets the caller's. On
  // failure the error is sent and the HTTP status returned; 0 and `*spec` set on success.
  int ReadJobSpec(const httplib::Request& req, std::string_view body, const Principal& who,
                  std::string_view verb, httplib::Response& res, std::optional<JobSpec>* spec);

  void Submit(const httplib::Request& req, std::string_view body, httplib::Response& res,
              const Principal& who);

  // POST /api/v1/whatif: the job spec of a submit, answered with what the scheduler would do with
  // it now (queue position, estimated start, GPU type, placement, the planner's step time there).
  // Stores nothing and changes nothing. The same checks as a submit, answered the same way.
  void WhatIf(const httplib::Request& req, std::string_view body, httplib::Response& res,
              const Principal& who);

  void List(const httplib::Request& req, httplib::Response& res, const Principal& who);

  void Cancel(const httplib::Request& req, httplib::Response& res, const Principal& who);

  void Events(const httplib::Request& req, httplib::Response& res, const Principal& who);

  void SetNode(const httplib::Request& req, std::string_view body, httplib::Response& res,
               const Principal& who);

  // Every node of the cluster (health, allocation, jobs) merged with its admin state; without a
  // scheduler, only the nodes that have an admin state. `only`: one node by name.
  void Nodes(httplib::Response& res, std::optional<std::string> only);

  void ApplyTelemetry(httplib::Response& res, const std::string& node,
                      const TelemetrySample& sample);

  void NodeTelemetry(const httplib::Request& req, std::string_view body, httplib::Response& res);

  void Dcgm(std::string_view body, httplib::Response& res);

  void Install();

  // A federation broker's sites: health, jobs in flight, the last what-if answer. Tenants see
  // only each site's name and health: the rest (URLs, other tenants' answers) is an admin's.
  void Sites(httplib::Response& res, bool full);

  // The cluster's summary and its GPU counts, from one snapshot of the controller, so that the
  // two agree.
  void Topology(httplib::Response& res);
};

}  // namespace baton::server
