// Api: the daemon's HTTP surface on cpp-httplib — /api/v1 (jobs, their events, node admin
// state, health and allocation, telemetry in, the topology), /api/v1/openapi.json, /healthz and
// Prometheus /metrics. JSON in and out; every error is {"error": {"code": "...", "message": "...",
// "field": "..."}} ("field" only when one field of the request is at fault). See openapi.cc for the
// full description of each endpoint.
//
// Handlers run on httplib's worker threads, concurrently; they share only thread-safe objects
// (the store, the metrics registry, the immutable authenticator, the controller).
#pragma once

#include <atomic>
#include <cstddef>
#include <string>
#include <string_view>

#include "server/controller.h"
#include "server/http/auth.h"
#include "server/metrics.h"
#include "server/store/job_store.h"

namespace httplib {
class Server;
}

namespace baton::server {

// The OpenAPI 3 document served at /api/v1/openapi.json.
std::string_view OpenApiJson();

class Api {
 public:
  // Nothing is owned; everything must outlive the Api and the httplib::Server it registers on.
  // Registers the API's metrics in `metrics`.
  Api(JobStore& store, const Authenticator& auth, Controller& controller, Registry& metrics);

  // Installs the routes and the error, exception and logging hooks on `server`, and the request
  // body limit: a larger body gets 413 (from its Content-Length, before it is read).
  void Register(httplib::Server& server, std::size_t max_body_bytes);

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
  std::atomic<int> open_streams_{0};  // dashboard event streams (http/dashboard.h)
};

}  // namespace baton::server
