#include "server/http/dashboard.h"

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <utility>

#include "server/http/web_assets.h"

namespace baton::server {

using json = nlohmann::json;

bool ServeWebAsset(std::string_view path, httplib::Response& res) {
  if (path == "/index.html") path = "/";
  for (const WebAsset& a : WebAssets()) {
    if (a.path != path) continue;
    res.status = 200;
    res.set_content(std::string(a.body), std::string(a.content_type));
    // Nothing is fetched from anywhere but this daemon, no inline script runs, and no other site
    // may frame the dashboard (clickjacking its drain and cancel buttons).
    res.set_header("Content-Security-Policy",
                   "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; "
                   "frame-ancestors 'none'");
    res.set_header("X-Frame-Options", "DENY");  // for browsers without frame-ancestors
    res.set_header("X-Content-Type-Options", "nosniff");
    res.set_header("Cache-Control", "no-cache");
    return true;
  }
  return false;
}

json ClusterJson(const ClusterView& view, const Principal& who) {
  const bool admin = who.role == Role::kAdmin;
  json nodes = json::array();
  json jobs = json::object();
  int gpus = 0, allocated = 0;
  for (const ClusterView::Node& n : view.nodes) {
    json held = json::array();
    for (JobId id : n.gpu_jobs) {
      ++gpus;
      if (id == 0) {
        held.push_back(0);
        continue;
      }
      ++allocated;
      auto t = view.job_tenants.find(id);
      const bool visible = admin || (t != view.job_tenants.end() && t->second == who.tenant);
      held.push_back(visible ? id : -1);
      if (visible && t != view.job_tenants.end()) {
        jobs[std::to_string(id)] = json{{"tenant", t->second}};
      }
    }
    nodes.push_back({{"name", n.name},
                     {"path", n.path},
                     {"domain", n.domain},
                     {"health", n.health},
                     {"admin", "active"},
                     {"gpus", std::move(held)}});
  }
  return {{"name", view.name},
          {"gpus", gpus},
          {"gpus_allocated", allocated},
          {"nodes", std::move(nodes)},
          {"jobs", std::move(jobs)}};
}

void StartEventStream(const Controller& controller, std::shared_ptr<EventStreams::Ticket> ticket,
                      httplib::Response& res) {
  using Clock = std::chrono::steady_clock;
  struct Stream {
    std::shared_ptr<EventStreams::Ticket> ticket;
    Clock::time_point started = Clock::now();
    Clock::time_point last_write = Clock::now();
    std::int64_t version = -1;
  };
  auto stream = std::make_shared<Stream>(Stream{std::move(ticket)});
  // Cache-Control: no-store comes with every authenticated answer (api.cc).
  res.set_header("X-Accel-Buffering", "no");
  res.set_chunked_content_provider(
      "text/event-stream", [&controller, stream](std::size_t, httplib::DataSink& sink) {
        constexpr auto kPoll = std::chrono::milliseconds(200);
        constexpr auto kKeepAlive = std::chrono::seconds(15);
        constexpr auto kLifetime = std::chrono::seconds(45);
        if (stream->ticket->close_requested()) {
          // A newer stream took this one's place: the browser reconnects after 10 s.
          constexpr std::string_view kClosed = "retry: 10000\n\n";
          sink.write(kClosed.data(), kClosed.size());
          sink.done();
          return true;
        }
        const std::int64_t version = controller.StateVersion();
        std::string out;
        if (version != stream->version) {
          out = "event: change\ndata: {\"version\":" + std::to_string(version) + "}\n\n";
          stream->version = version;
          stream->ticket->MarkActive();
        } else if (Clock::now() - stream->last_write > kKeepAlive) {
          out = ": keep-alive\n\n";
        }
        if (!out.empty()) {
          if (!sink.write(out.data(), out.size())) return false;
          stream->last_write = Clock::now();
        }
        if (Clock::now() - stream->started > kLifetime) {
          sink.done();
          return true;
        }
        std::this_thread::sleep_for(kPoll);
        return sink.is_writable();
      });
}

}  // namespace baton::server
