// Api: the daemon's HTTP surface on cpp-httplib — /api/v1 (jobs, their events, node admin
// state, health and allocation, telemetry in, the topology), /api/v1/openapi.json, /healthz and
// Prometheus /metrics. JSON in and out; every error, including 404/405/413 and malformed requests,
// is {"error": {"code": "...", "message": "...", "field": "..."}} ("field" only when one field of
// the request is at fault). Who may call what: docs/auth.md. See openapi.cc for the full
// description of each endpoint.
//
// Handlers run on httplib's worker threads, concurrently; they share only thread-safe objects
// (the store, the metrics registry, the immutable authenticator, the controller).
#pragma once

#include <atomic>
#include <cstddef>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "server/controller.h"
#include "server/http/auth.h"
#include "server/http/event_streams.h"
#include "server/metrics.h"
#include "server/store/job_store.h"

namespace httplib {
class Server;
}

namespace baton::server {

// What the server's connection guard learns from the API about each connection, by its peer
// address and port (see connection_guard.h). Each may be empty.
struct ConnectionHooks {
  // The request head is complete and the request accepted for routing.
  std::function<void(const std::string& addr, int port)> request_started;
  // The response was written; the connection waits for its next request.
  std::function<void(const std::string& addr, int port)> request_finished;
  // A request was refused with its body unread: read nothing more from this connection.
  std::function<void(const std::string& addr, int port)> close_after_response;
};

// The OpenAPI 3 document served at /api/v1/openapi.json.
std::string_view OpenApiJson();

class Api {
 public:
  // Nothing is owned; everything must outlive the Api and the httplib::Server it registers on.
  // Registers the API's metrics in `metrics`.
  // `streams`: how many dashboard event streams may be open (http/dashboard.h).
  Api(JobStore& store, const Authenticator& auth, Controller& controller, Registry& metrics,
      EventStreamLimits streams = {});

  // Installs the routes and the error, exception and logging hooks on `server`. Before any of a
  // request's body is read, a pre-routing hook finds its route (404, 405), authenticates and
  // authorises it (401, 403: docs/auth.md) and checks its Content-Length against
  // `max_body_bytes` (413); a chunked body is cut off with 413 once it passes the limit. A
  // refused body is never read: its connection is closed after the answer.
  void Register(httplib::Server& server, std::size_t max_body_bytes, ConnectionHooks hooks = {});

  // The routes Register installed, as "METHOD shape" ("GET /api/v1/jobs/{id}"), in install order;
  // what the OpenAPI document must describe (server_test checks it does).
  const std::vector<std::string>& routes() const { return route_names_; }

  // The leader lease epoch this daemon holds (replica.h), which /healthz reports; 0: no replicas.
  // Set before Register.
  void set_leader_epoch(std::int64_t epoch) { leader_epoch_ = epoch; }

 private:
  struct Routes;
  JobStore& store_;
  const Authenticator& auth_;
  Controller& controller_;
  Registry& registry_;
  Family<Histogram>& request_duration_;
  Family<Counter>& submissions_;
  Family<Gauge>& jobs_;
  Family<Counter>& telemetry_;
  EventStreams streams_;  // dashboard event streams (http/dashboard.h)
  std::vector<std::string> route_names_;
  std::int64_t leader_epoch_ = 0;
};

}  // namespace baton::server
