#include "server/http/api.h"

#include <fmt/format.h>
#include <httplib.h>

#include <chrono>
#include <ctime>
#include <nlohmann/json.hpp>
#include <optional>
#include <utility>
#include <vector>

#include "core/bounded_input.h"
#include "core/log.h"
#include "core/strings.h"
#include "perf/estimator.h"
#include "perf/report.h"
#include "perf/request.h"
#include "perf/search.h"
#include "server/http/api_routes.h"
#include "server/http/dashboard.h"
#include "server/http/dashboard_api.h"
#include "server/http/dcgm.h"
#include "server/http/http_server.h"
#include "server/http/job_spec.h"
#include "server/http/web_assets.h"

namespace baton::server {
namespace api_internal {

std::string Dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

void SendJson(httplib::Response& res, int status, const json& body) {
  res.status = status;
  res.set_content(Dump(body), "application/json");
}

void SendError(httplib::Response& res, int status, std::string_view code, std::string_view message,
               std::string_view field) {
  json err = {{"code", code}, {"message", message}};
  if (!field.empty()) err["field"] = field;
  SendJson(res, status, json{{"error", std::move(err)}});
}

int HttpStatus(StatusCode code) {
  switch (code) {
    case StatusCode::kOk:
      return 200;
    case StatusCode::kInvalidArgument:
      return 400;
    case StatusCode::kUnauthenticated:
      return 401;
    case StatusCode::kPermissionDenied:
      return 403;
    case StatusCode::kNotFound:
      return 404;
    case StatusCode::kAlreadyExists:
    case StatusCode::kFailedPrecondition:
      return 409;
    case StatusCode::kResourceExhausted:
      return 429;
    case StatusCode::kUnavailable:
      return 503;
    case StatusCode::kInternal:
      return 500;
  }
  return 500;
}

void SendStatus(httplib::Response& res, const Status& s) {
  SendError(res, HttpStatus(s.code()), StatusCodeName(s.code()), s.message(), s.field());
}

std::string_view ErrorCodeForHttp(int status) {
  switch (status) {
    case 400:
      return "INVALID_ARGUMENT";
    case 401:
      return "UNAUTHENTICATED";
    case 403:
      return "PERMISSION_DENIED";
    case 404:
      return "NOT_FOUND";
    case 405:
      return "METHOD_NOT_ALLOWED";
    case 408:
      return "REQUEST_TIMEOUT";
    case 413:
      return "PAYLOAD_TOO_LARGE";
    case 414:
      return "URI_TOO_LONG";
    case 415:
      return "UNSUPPORTED_MEDIA_TYPE";
    default:
      return status >= 500 ? "INTERNAL" : "INVALID_ARGUMENT";
  }
}

std::string Rfc3339(TimePoint t) {
  double secs = t.since_epoch.value();
  auto whole = static_cast<std::time_t>(std::floor(secs));
  int millis = static_cast<int>((secs - static_cast<double>(whole)) * 1000);
  std::tm tm{};
  gmtime_r(&whole, &tm);
  char buf[40];
  std::size_t n = std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  std::snprintf(buf + n, sizeof buf - n, ".%03dZ", millis);
  return buf;
}

json PlacementJson(const PlacementView& p) {
  json nodes = json::array();
  int gpus = 0;
  for (const auto& n : p.nodes) {
    nodes.push_back({{"node", n.node}, {"gpus", n.gpus}});
    gpus += static_cast<int>(n.gpus.size());
  }
  return {{"nodes", std::move(nodes)}, {"gpus", gpus}, {"level", p.level}};
}

json JobJson(const JobRecord& j, const Controller& controller) {
  json spec = json::parse(j.spec_json, nullptr, /*allow_exceptions=*/false);
  json out = {{"id", j.id},
              {"tenant", j.tenant},
              {"name", j.name},
              {"state", JobStateName(j.state)},
              {"attempts", j.attempts},
              {"created_at", Rfc3339(j.created_at)},
              {"updated_at", Rfc3339(j.updated_at)},
              {"spec", spec.is_discarded() ? json(nullptr) : spec}};
  if (!j.idempotency_key.empty()) out["idempotency_key"] = j.idempotency_key;
  // The newest checkpoint the job reported (docs/jobs.md): where a restart resumes from.
  if (j.checkpoint) {
    out["checkpoint"] = {{"step", j.checkpoint->step},
                         {"attempt", j.checkpoint->attempt},
                         {"time", Rfc3339(j.checkpoint->time)},
                         {"bytes", j.checkpoint->bytes.value()}};
  }
  // The scheduler's view, for jobs it holds: why it waits or, once placed, where. Its phase is
  // not shown: `state` is the one state of a job (the store's, which the scheduler's phase
  // changes follow), so that a reply never carries two that disagree.
  if (!IsTerminal(j.state)) {
    if (std::optional<PlacementView> p = controller.JobPlacement(j.id)) {
      if (!p->waiting.empty()) out["waiting_reason"] = p->waiting;
      // The scheduler's forecast (sched/framework/forecast.h) for a pending job.
      if (p->queue_position > 0) out["queue_position"] = p->queue_position;
      if (p->estimated_start) out["estimated_start"] = Rfc3339(*p->estimated_start);
      if (!p->waiting_kind.empty()) out["waiting_kind"] = p->waiting_kind;
      if (!p->nodes.empty()) out["placement"] = PlacementJson(*p);
      if (!p->site.empty()) {
        out["site"] = p->site;
        if (p->site_job > 0) out["site_job"] = p->site_job;
        if (!p->site_state.empty()) out["site_state"] = p->site_state;
      }
    }
  }
  return out;
}

json NodeJson(const NodeAdminState& n) {
  return {{"node", n.node},
          {"admin", NodeAdminName(n.admin)},
          {"reason", n.reason},
          {"by", n.by},
          {"updated_at", Rfc3339(n.updated_at)}};
}

bool ValidIdempotencyKey(std::string_view key) {
  if (key.empty() || key.size() > 255) return false;
  for (char c : key) {
    if (static_cast<unsigned char>(c) < 0x21 || static_cast<unsigned char>(c) > 0x7e) return false;
  }
  return true;
}

// The limits for the small admin bodies ({"reason": "..."}, telemetry samples): flat objects.
JsonLimits ShallowJson() {
  JsonLimits limits;
  limits.max_depth = 4;
  return limits;
}

}  // namespace api_internal

namespace {

using api_internal::ErrorCodeForHttp;
using Clock = std::chrono::steady_clock;

// The route label of the request being handled on this thread (for the latency histogram), when
// it started and who sent it; set by the pre-routing hook, which runs on the same worker thread
// as the route's handler, before any of the body is read.
thread_local const char* t_route = nullptr;
thread_local Clock::time_point t_start;
thread_local Principal t_principal;

// A refusal decided before the body was read, for a body small enough to drain (a Content-Length
// of at most 8x the limit on a POST or DELETE): the body is read and dropped, then this is the
// answer, so that a client that reads only after sending still sees it. Larger or chunked
// bodies are refused at once and their connection closed instead.
struct Refusal {
  int status;
  std::string code;
  std::string message;
  std::string field;
};
thread_local std::optional<Refusal> t_refusal;

// The metric label for a request method: a closed set, so that junk method names (which anyone
// can send) cannot create label values.
std::string_view MethodLabel(std::string_view method) {
  for (std::string_view m : {"GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS"}) {
    if (method == m) return m;
  }
  return "other";
}

bool IsNameChar(char c, bool first) {
  const bool alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
  return alnum || (!first && (c == '.' || c == '_' || c == '-'));
}

// Whether `path` has the route's shape: literal characters match themselves, "{id}" is 1-19
// digits, "{node}" a node name ([A-Za-z0-9][A-Za-z0-9._-]{0,63}) and "{action}" (last) one of
// cordon, drain, uncordon. The same language as the patterns given to httplib, so that the
// pre-routing hook and httplib's dispatch agree on every path.
bool MatchesShape(std::string_view shape, std::string_view path) {
  auto digit = [](char c) { return c >= '0' && c <= '9'; };
  while (!shape.empty()) {
    std::size_t n = 0;
    if (shape.starts_with("{id}")) {
      while (n < path.size() && n < 20 && digit(path[n])) ++n;
      if (n == 0 || n > 19) return false;
      shape.remove_prefix(4);
    } else if (shape.starts_with("{node}")) {
      while (n < path.size() && n < 65 && IsNameChar(path[n], n == 0)) ++n;
      if (n == 0 || n > 64) return false;
      shape.remove_prefix(6);
    } else if (shape == "{action}") {
      return path == "cordon" || path == "drain" || path == "uncordon";
    } else {
      if (path.empty() || path[0] != shape[0]) return false;
      n = 1;
      shape.remove_prefix(1);
    }
    path.remove_prefix(n);
  }
  return path.empty();
}

bool IsChunked(const httplib::Request& req) {
  return req.has_header("Transfer-Encoding") &&
         req.get_header_value("Transfer-Encoding").find("chunked") != std::string::npos;
}

// Why the request's body length is ambiguous (RFC 9112 6.3): more than one Content-Length, a
// Content-Length with a Transfer-Encoding, a Transfer-Encoding other than exactly "chunked" (which
// httplib would not read as chunked, where IsChunked would); empty when it is not.
std::string AmbiguousLength(const httplib::Request& req) {
  const std::size_t lengths = req.get_header_value_count("Content-Length");
  const std::size_t encodings = req.get_header_value_count("Transfer-Encoding");
  if (lengths > 1) return "more than one Content-Length header";
  if (lengths == 1 && encodings > 0) return "both Content-Length and Transfer-Encoding";
  if (encodings > 1) return "more than one Transfer-Encoding header";
  if (encodings == 1 && !EqualsIgnoreCase(req.get_header_value("Transfer-Encoding"), "chunked")) {
    return "Transfer-Encoding must be chunked";
  }
  return "";
}

// True when the request announces a body (a non-zero Content-Length, or chunked).
bool HasBody(const httplib::Request& req) {
  if (IsChunked(req)) return true;
  if (!req.has_header("Content-Length")) return false;
  std::optional<std::int64_t> n = ParseInt64(req.get_header_value("Content-Length"));
  return !n || *n != 0;
}

}  // namespace

void Api::Routes::Add(const char* method, const std::string& pattern, const char* route,
                      Access access, const Handler& handler) {
  table.push_back({method, route, access});
  std::string m = method;
  if (m == "GET") {
    server.Get(pattern, [handler](const httplib::Request& req, httplib::Response& res) {
      handler(req, {}, res, t_principal);
    });
    return;
  }
  // POST and DELETE take the body through a content reader, so that it is read only here,
  // after the pre-routing hook has authenticated the request, and only up to the limit
  // (httplib itself bounds only a Content-Length body, not a chunked one).
  auto with_body = [this, handler](const httplib::Request& req, httplib::Response& res,
                                   const httplib::ContentReader& reader) {
    if (t_refusal) {
      reader([](const char*, std::size_t) { return true; });  // drained, bounded above
      const Refusal r = *std::exchange(t_refusal, std::nullopt);
      return SendError(res, r.status, r.code, r.message, r.field);
    }
    std::string body;
    if (!ReadBody(req, reader, res, body)) return;
    handler(req, body, res, t_principal);
  };
  if (m == "POST") {
    server.Post(pattern, with_body);
  } else {
    server.Delete(pattern, with_body);
  }
}

// Stops reading the request's connection once the response is written (a refused body is left
// unread: reading it would be the attack).
void Api::Routes::CloseAfterResponse(const httplib::Request& req, httplib::Response& res) {
  res.set_header("Connection", "close");
  HttpServer::CloseAfterThisResponse();
  if (hooks.close_after_response) hooks.close_after_response(req.remote_addr, req.remote_port);
}

// Reads the body, chunked or not, into `body`, refusing it with 413 once it passes the limit.
// A request that announces no body (a cancel with neither Content-Length nor chunks) has none:
// nothing is waited for.
bool Api::Routes::ReadBody(const httplib::Request& req, const httplib::ContentReader& reader,
                           httplib::Response& res, std::string& body) {
  if (!HasBody(req)) return true;
  bool over = false;
  bool ok = reader([&](const char* data, std::size_t n) {
    if (n > max_body - body.size()) {
      over = true;
      return false;
    }
    body.append(data, n);
    return true;
  });
  if (over) {
    t_route = "rejected";
    CloseAfterResponse(req, res);
    SendError(res, 413, "PAYLOAD_TOO_LARGE",
              "request body is larger than the limit of " + std::to_string(max_body) + " bytes",
              "body");
    return false;
  }
  if (!ok) {
    CloseAfterResponse(req, res);
    SendError(res, 400, "INVALID_ARGUMENT", "the request body could not be read", "body");
    return false;
  }
  return true;
}

// Runs before httplib reads any of the body: finds the route (404 or 405 otherwise),
// authenticates and authorises (401, 403), and checks an announced Content-Length (413). A
// refused request's body is never read, and its connection is closed after the answer.
httplib::Server::HandlerResponse Api::Routes::PreRoute(const httplib::Request& req,
                                                       httplib::Response& res) {
  t_route = "unmatched";
  t_start = Clock::now();
  t_principal = Principal{};
  t_refusal.reset();
  // Request smuggling: where a proxy in front reads the body's length one way and httplib
  // another, the rest of the body becomes a request of its own. httplib 0.11 takes the first
  // Content-Length and, given "Transfer-Encoding: chunked", ignores Content-Length; RFC 9112
  // (6.1, 6.3) has a server refuse such a request and close the connection. Checked before
  // anything else, and the body is never read.
  if (std::string why = AmbiguousLength(req); !why.empty()) {
    t_route = "rejected";
    CloseAfterResponse(req, res);
    SendError(res, 400, "INVALID_ARGUMENT", why, "Content-Length");
    return httplib::Server::HandlerResponse::Handled;
  }
  std::optional<std::int64_t> length = ParseInt64(req.get_header_value("Content-Length"));
  const bool drainable = (req.method == "POST" || req.method == "DELETE") && !IsChunked(req) &&
                         length && *length >= 0 &&
                         static_cast<std::uint64_t>(*length) / 8 <= max_body;
  auto refuse = [&](int status, std::string_view code, const std::string& message,
                    std::string_view field = {}) {
    if (HasBody(req) && drainable) {
      // httplib reads (at most 8x the limit) and drops the body, then the route's handler or
      // the error handler answers with this.
      t_refusal = Refusal{status, std::string(code), message, std::string(field)};
      if (hooks.request_started) hooks.request_started(req.remote_addr, req.remote_port);
      return httplib::Server::HandlerResponse::Unhandled;
    }
    if (HasBody(req)) CloseAfterResponse(req, res);
    SendError(res, status, code, message, field);
    return httplib::Server::HandlerResponse::Handled;
  };
  const std::string method = req.method == "HEAD" ? "GET" : req.method;
  const Route* route = nullptr;
  std::string allowed;
  for (const Route& r : table) {
    if (!MatchesShape(r.label, req.path)) continue;
    if (r.method == method) {
      route = &r;
      break;
    }
    if (allowed.find(r.method) == std::string::npos) {
      allowed += (allowed.empty() ? "" : ", ") + r.method;
    }
  }
  if (route == nullptr) {
    if (allowed.empty()) return refuse(404, "NOT_FOUND", "no such endpoint");
    res.set_header("Allow", allowed);
    return refuse(
        405, "METHOD_NOT_ALLOWED",
        "method " + Printable(req.method, 16) + " is not allowed here (allowed: " + allowed + ")");
  }
  t_route = route->label;
  if (route->access != Access::kPublic) {
    // Answers that need a token (and their refusals) are the caller's alone: never stored by
    // a shared or browser cache.
    res.set_header("Cache-Control", "no-store");
    Result<Principal> p = api.auth_.Authenticate(req.get_header_value("Authorization"));
    if (!p.ok()) {
      res.set_header("WWW-Authenticate", "Bearer");
      return refuse(401, "UNAUTHENTICATED", std::string(p.status().message()), "Authorization");
    }
    // A broker acts for the tenant its request names, and is that tenant from here on.
    const std::string broker_header(kBrokerTenantHeader);
    Result<Principal> acting =
        ResolveBroker(*p, req.get_header_value(broker_header), req.has_header(broker_header));
    if (!acting.ok()) {
      return refuse(400, "INVALID_ARGUMENT", std::string(acting.status().message()), broker_header);
    }
    if (route->access == Access::kAdmin && acting->role != Role::kAdmin) {
      return refuse(403, "PERMISSION_DENIED",
                    "this endpoint needs the admin role; " + acting->name + " is " +
                        (acting->via.empty() ? "a tenant" : "a broker"));
    }
    t_principal = std::move(acting).value();
  }
  if (HasBody(req) && route->method == "GET") {
    return refuse(400, "INVALID_ARGUMENT", "a GET request takes no body", "body");
  }
  if (req.has_header("Content-Length") && (!length || *length < 0)) {
    return refuse(400, "INVALID_ARGUMENT", "Content-Length is not a byte count", "Content-Length");
  }
  if (length && static_cast<std::uint64_t>(*length) > max_body) {
    t_route = "rejected";
    return refuse(413, "PAYLOAD_TOO_LARGE",
                  "request body of " + std::to_string(*length) +
                      " bytes is larger than the limit of " + std::to_string(max_body),
                  "body");
  }
  if (hooks.request_started) hooks.request_started(req.remote_addr, req.remote_port);
  return httplib::Server::HandlerResponse::Unhandled;
}

// Loads a job the principal may see; a tenant gets "not found" for other tenants' jobs, so
// that ids do not reveal what other tenants run.
std::optional<JobRecord> Api::Routes::VisibleJob(const httplib::Request& req,
                                                 httplib::Response& res, const Principal& who) {
  std::optional<std::int64_t> id = ParseInt64(req.matches[1].str());
  if (!id || *id <= 0) {
    SendError(res, 404, "NOT_FOUND", "job " + Printable(req.matches[1].str()) + " not found");
    return std::nullopt;
  }
  Result<JobRecord> job = api.store_.Get(*id);
  if (!job.ok()) {
    SendStatus(res, job.status());
    return std::nullopt;
  }
  if (who.role != Role::kAdmin && job->tenant != who.tenant) {
    SendError(res, 404, "NOT_FOUND", "job " + std::to_string(*id) + " not found");
    return std::nullopt;
  }
  return std::move(job).value();
}

void Api::Routes::Install() {
  using R = const httplib::Request&;
  using B = std::string_view;
  using W = httplib::Response&;
  using P = const Principal&;
  const std::string job = R"(/api/v1/jobs/(\d{1,19}))";
  Add("GET", "/healthz", "/healthz", Access::kPublic, [this](R, B, W res, P) {
    JobFilter probe;
    probe.limit = 1;
    Result<JobPage> page = api.store_.List(probe);  // the store answers reads
    if (!page.ok()) return SendStatus(res, page.status());
    json body{{"status", "ok"}};
    if (api.leader_epoch_ > 0) {
      body["role"] = "leader";
      body["epoch"] = api.leader_epoch_;
    }
    SendJson(res, 200, body);
  });
  // Admin only: the metrics carry tenant names (docs/auth.md).
  Add("GET", "/metrics", "/metrics", Access::kAdmin, [this](R, B, W res, P) {
    res.status = 200;
    res.set_content(api.registry_.Render(), std::string(Registry::kContentType).c_str());
  });
  // The dashboard (http/dashboard.h): its static files are public (one literal route each, so
  // that the pre-routing table knows them), its data needs a token.
  for (const WebAsset& asset : WebAssets()) {
    const std::string path(asset.path);
    const char* label = asset.path.data();  // static storage, NUL-terminated literal
    Add("GET", path, label, Access::kPublic, [path](R, B, W res, P) { ServeWebAsset(path, res); });
  }
  Add("GET", "/api/v1/whoami", "/api/v1/whoami", Access::kAuthenticated, [](R, B, W res, P who) {
    SendJson(res, 200,
             json{{"name", who.name},
                  {"role", RoleName(who.role)},
                  {"tenant", who.tenant},
                  {"via", who.via}});
  });
  Add("GET", "/api/v1/cluster", "/api/v1/cluster", Access::kAuthenticated,
      [this](R, B, W res, P who) {
        ClusterView view = api.controller_.Cluster();
        if (view.nodes.empty()) {
          return SendError(res, 503, "UNAVAILABLE", "no scheduler is running (no cluster)");
        }
        SendJson(res, 200, ClusterJson(view, who));
      });
  Add("GET", "/api/v1/stream", "/api/v1/stream", Access::kAuthenticated,
      [this](R, B, W res, P who) {
        Result<std::shared_ptr<EventStreams::Ticket>> ticket = api.streams_.Open(who.name);
        if (!ticket.ok()) {
          res.set_header("Retry-After", "10");
          return SendStatus(res, ticket.status());
        }
        StartEventStream(api.controller_, std::move(ticket).value(), res);
      });
  // The job, tenants and nodes views' data (http/dashboard_api.h).
  for (DashboardRoute& r : DashboardRoutes(api.store_, api.controller_)) {
    Add("GET", r.pattern, r.label, r.admin_only ? Access::kAdmin : Access::kAuthenticated,
        [h = std::move(r.handler)](R req, B, W res, P who) { h(req, res, who); });
  }
  Add("GET", "/api/v1/openapi.json", "/api/v1/openapi.json", Access::kPublic, [](R, B, W res, P) {
    res.status = 200;
    res.set_content(std::string(OpenApiJson()), "application/json");
  });
  Add("POST", "/api/v1/jobs", "/api/v1/jobs", Access::kAuthenticated,
      [this](R req, B body, W res, P who) { Submit(req, body, res, who); });
  Add("GET", "/api/v1/jobs", "/api/v1/jobs", Access::kAuthenticated,
      [this](R req, B, W res, P who) { List(req, res, who); });
  Add("GET", job, "/api/v1/jobs/{id}", Access::kAuthenticated, [this](R req, B, W res, P who) {
    std::optional<JobRecord> j = VisibleJob(req, res, who);
    if (!j) return;
    // A broker's look at its job renews the job's federation lease, if it has one.
    if (!who.via.empty()) api.controller_.OnLeaseRenewed(*j);
    SendJson(res, 200, JobJson(*j, api.controller_));
  });
  Add("DELETE", job, "/api/v1/jobs/{id}", Access::kAuthenticated,
      [this](R req, B, W res, P who) { Cancel(req, res, who); });
  Add("POST", job + ":cancel", "/api/v1/jobs/{id}:cancel", Access::kAuthenticated,
      [this](R req, B, W res, P who) { Cancel(req, res, who); });
  Add("GET", job + "/events", "/api/v1/jobs/{id}/events", Access::kAuthenticated,
      [this](R req, B, W res, P who) { Events(req, res, who); });
  const std::string node = R"(/api/v1/nodes/([A-Za-z0-9][A-Za-z0-9._-]{0,63}))";
  Add("GET", "/api/v1/nodes", "/api/v1/nodes", Access::kAdmin,
      [this](R, B, W res, P) { Nodes(res, std::nullopt); });
  Add("GET", node, "/api/v1/nodes/{node}", Access::kAdmin,
      [this](R req, B, W res, P) { Nodes(res, req.matches[1].str()); });
  Add("POST", node + "/telemetry", "/api/v1/nodes/{node}/telemetry", Access::kAdmin,
      [this](R req, B body, W res, P) { NodeTelemetry(req, body, res); });
  Add("POST", "/api/v1/telemetry/dcgm", "/api/v1/telemetry/dcgm", Access::kAdmin,
      [this](R, B body, W res, P) { Dcgm(body, res); });
  Add("GET", "/api/v1/topology", "/api/v1/topology", Access::kAuthenticated,
      [this](R, B, W res, P) { Topology(res); });
  Add("GET", "/api/v1/sites", "/api/v1/sites", Access::kAuthenticated,
      [this](R, B, W res, P who) { Sites(res, who.role == Role::kAdmin); });
  Add("POST", "/api/v1/plan/estimate", "/api/v1/plan/estimate", Access::kAuthenticated,
      [this](R req, B body, W res, P) { Plan(req, body, res, perf::PlanQuestion::kEstimate); });
  Add("POST", "/api/v1/plan/search", "/api/v1/plan/search", Access::kAuthenticated,
      [this](R req, B body, W res, P) { Plan(req, body, res, perf::PlanQuestion::kSearch); });
  Add("POST", "/api/v1/whatif", "/api/v1/whatif", Access::kAuthenticated,
      [this](R req, B body, W res, P who) { WhatIf(req, body, res, who); });
  Add("POST", R"(/api/v1/nodes/([A-Za-z0-9][A-Za-z0-9._-]{0,63}):(cordon|drain|uncordon))",
      "/api/v1/nodes/{node}:{action}", Access::kAdmin,
      [this](R req, B body, W res, P who) { SetNode(req, body, res, who); });
}

Api::Api(JobStore& store, const Authenticator& auth, Controller& controller, Registry& metrics,
         EventStreamLimits streams)
    : store_(store),
      auth_(auth),
      controller_(controller),
      registry_(metrics),
      request_duration_(metrics.AddHistogram("baton_http_request_duration_seconds",
                                             "Time to serve an HTTP request, by route and status.",
                                             {"method", "route", "code"}, LatencyBuckets())),
      submissions_(
          metrics.AddCounter("baton_submissions_total",
                             "Job submissions by tenant and result (created, replayed, rejected).",
                             {"tenant", "result"})),
      jobs_(metrics.AddGauge("baton_jobs", "Jobs in the store by state.", {"state"})),
      telemetry_(metrics.AddCounter("baton_telemetry_posts_total",
                                    "Telemetry posts accepted, by format (json, dcgm).",
                                    {"format"})),
      streams_(streams) {
  metrics.AddCollectHook([this] {
    Result<std::map<JobState, std::int64_t>> counts = store_.CountByState();
    if (!counts.ok()) return;
    for (const auto& [state, n] : *counts) {
      jobs_.WithLabels({JobStateName(state)}).Set(static_cast<double>(n));
    }
  });
}

void Api::Register(httplib::Server& server, std::size_t max_body_bytes, ConnectionHooks hooks) {
  server.set_payload_max_length(max_body_bytes);
  auto routes =
      std::make_shared<Routes>(Routes{*this, server, max_body_bytes, std::move(hooks), {}});
  routes->Install();
  for (const Routes::Route& r : routes->table) route_names_.push_back(r.method + " " + r.label);
  // httplib keeps the handlers (which capture `routes`) alive.
  server.set_pre_routing_handler([routes](const httplib::Request& req, httplib::Response& res) {
    return routes->PreRoute(req, res);
  });
  // "Expect: 100-continue" is answered before routing: a refused request gets its final answer
  // instead of "100 Continue", so that the client never sends the body.
  server.set_expect_100_continue_handler(
      [routes](const httplib::Request& req, httplib::Response& res) {
        if (routes->PreRoute(req, res) == httplib::Server::HandlerResponse::Handled) {
          return res.status;
        }
        if (!t_refusal) return 100;
        const Refusal r = *std::exchange(t_refusal, std::nullopt);
        routes->CloseAfterResponse(req, res);
        SendError(res, r.status, r.code, r.message, r.field);
        return r.status;
      });
  // Fills in a JSON body for errors httplib produces itself (no route, body too large, ...).
  server.set_error_handler([](const httplib::Request&, httplib::Response& res) {
    if (t_refusal) {  // decided before routing; httplib drained the body (no route took it)
      const Refusal r = *std::exchange(t_refusal, std::nullopt);
      return SendError(res, r.status, r.code, r.message, r.field);
    }
    // httplib refused a request it could not read whole (a malformed head, a body over its
    // limit, a long URI): what follows on the connection is not a request boundary to trust.
    if (res.status == 400 || res.status == 413 || res.status == 414) {
      res.set_header("Connection", "close");
      HttpServer::CloseAfterThisResponse();
    }
    if (!res.body.empty()) return;
    std::string message;
    switch (res.status) {
      case 400:
        message = "malformed or incomplete HTTP request";
        break;
      case 404:
        message = "no such endpoint";
        break;
      case 413:
        message = "request body is larger than the limit";
        break;
      default:
        message = "request failed with HTTP status " + std::to_string(res.status);
    }
    SendError(res, res.status, ErrorCodeForHttp(res.status), message,
              res.status == 413 ? "body" : "");
  });
  server.set_exception_handler(
      [](const httplib::Request& req, httplib::Response& res, const std::exception_ptr& ep) {
        std::string what = "unknown exception";
        try {
          std::rethrow_exception(ep);
        } catch (const std::exception& e) {
          what = e.what();
        } catch (...) {
        }
        LOG_ERROR("{} {}: unhandled exception: {}", req.method, req.path, what);
        SendError(res, 500, "INTERNAL", "internal error");
      });
  server.set_logger([this, routes](const httplib::Request& req, const httplib::Response& res) {
    HttpServer::FlushResponse();  // on the wire before it is timed and the hooks see the socket
    // Requests rejected before routing (413, malformed request lines) have no start time.
    const char* route = t_route != nullptr ? t_route : "unmatched";
    double seconds =
        t_route != nullptr ? std::chrono::duration<double>(Clock::now() - t_start).count() : 0.0;
    request_duration_.WithLabels({MethodLabel(req.method), route, std::to_string(res.status)})
        .Observe(seconds);
    LOG_DEBUG("{} {} {} {:.3f}ms", Printable(req.method, 16), Printable(req.path), res.status,
              seconds * 1e3);
    t_route = nullptr;
    t_refusal.reset();
    if (routes->hooks.request_finished) {
      routes->hooks.request_finished(req.remote_addr, req.remote_port);
    }
  });
}

}  // namespace baton::server
