#include "server/replica.h"

#include <fmt/format.h>
#include <httplib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "core/log.h"
#include "server/http/http_server.h"
#include "server/stop_signals.h"
#include "server/store/leader_lease.h"

namespace baton::server {
namespace {

using Clock = std::chrono::steady_clock;

Clock::duration ToDuration(Seconds s) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s.value()));
}

std::string AdvertiseUrl(const ServerOptions& o, int port) {
  if (!o.advertise_url.empty()) return o.advertise_url;
  std::string host = o.host;
  if (host.empty() || host == "0.0.0.0" || host == "::") {
    char name[256] = {};
    host = ::gethostname(name, sizeof name - 1) == 0 ? name : "localhost";
  }
  return fmt::format("{}://{}:{}", o.tls_cert_path.empty() ? "http" : "https", host, port);
}

// A standby's HTTP face (replica.h): /healthz, and a redirect to the leader for anything else.
// Nothing is authenticated or read past the request head: a redirect tells nothing the lease
// table does not, and a request with a body has its connection closed after the answer.
class Standby {
 public:
  // Binds `port` (0: any) on `host`; kUnavailable when it cannot.
  Status Bind(const ServerOptions& o) {
    if (!o.tls_cert_path.empty()) {
      auto https =
          std::make_unique<httplib::SSLServer>(o.tls_cert_path.c_str(), o.tls_key_path.c_str());
      if (!https->is_valid()) {
        return InvalidArgumentError("cannot load TLS certificate " + o.tls_cert_path + " or key " +
                                    o.tls_key_path);
      }
      http_ = std::move(https);
    } else {
      http_ = std::make_unique<HttpServer>();
    }
    http_->set_socket_options([](int sock) {
      int yes = 1;
      ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    });
    http_->new_task_queue = [] { return new httplib::ThreadPool(4); };
    http_->set_read_timeout(5, 0);
    http_->set_write_timeout(5, 0);
    http_->set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
      Answer(req, res);
      return httplib::Server::HandlerResponse::Handled;
    });
    port_ = o.port == 0 ? http_->bind_to_any_port(o.host)
                        : (http_->bind_to_port(o.host, o.port) ? o.port : -1);
    if (port_ <= 0) {
      return UnavailableError(fmt::format("cannot listen on {}:{}: {}", o.host, o.port,
                                          errno == EADDRINUSE ? "the port is in use" : ""));
    }
    return Status::Ok();
  }
  int port() const { return port_; }

  void Serve() {
    thread_ = std::thread([this] { http_->listen_after_bind(); });
  }
  // Stops serving and releases the port.
  void Stop() {
    for (int i = 0; i < 1000 && thread_.joinable() && !http_->is_running(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    http_->stop();
    if (thread_.joinable()) thread_.join();
    http_.reset();
  }

  void SetLease(const LeaseState& lease) {
    std::lock_guard lock(mu_);
    lease_ = lease;
  }

 private:
  void Answer(const httplib::Request& req, httplib::Response& res) {
    LeaseState lease;
    {
      std::lock_guard lock(mu_);
      lease = lease_;
    }
    const bool has_body = req.has_header("Content-Length") || req.has_header("Transfer-Encoding");
    if (has_body) {
      res.set_header("Connection", "close");
      HttpServer::CloseAfterThisResponse();
    }
    if (req.method == "GET" && req.path == "/healthz") {
      nlohmann::json body{{"status", "ok"}, {"role", "standby"}, {"epoch", lease.epoch}};
      body["leader"] = lease.live ? nlohmann::json(lease.url) : nlohmann::json(nullptr);
      res.status = 200;
      res.set_content(body.dump(), "application/json");
      return;
    }
    if (lease.live && !lease.url.empty()) {
      res.status = 307;
      res.set_header("Location", lease.url + req.target);
      res.set_content(
          nlohmann::json{{"error",
                          {{"code", "not_leader"},
                           {"message", "this replica is a standby; the leader is " + lease.url}}}}
              .dump(),
          "application/json");
      return;
    }
    res.status = 503;
    res.set_header("Retry-After", "1");
    res.set_content(
        nlohmann::json{{"error",
                        {{"code", "unavailable"},
                         {"message", "no replica holds the leader lease yet; retry in a moment"}}}}
            .dump(),
        "application/json");
  }

  std::unique_ptr<httplib::Server> http_;
  std::thread thread_;
  int port_ = 0;
  std::mutex mu_;
  LeaseState lease_;
};

}  // namespace

Status RunReplica(const ServerOptions& options_in, Controller* controller) {
  StopSignals signals;
  if (!(options_in.lease_ttl.value() >= 1) || !(options_in.lease_renew.value() > 0) ||
      !(options_in.lease_renew.value() * 2 <= options_in.lease_ttl.value())) {
    return InvalidArgumentError(
        "the lease TTL must be at least 1 s and at least twice the renew interval");
  }
  ServerOptions options = options_in;
  const auto renew_every = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::duration<double>(options.lease_renew.value()));

  // Standby until the lease is taken.
  Standby standby;
  RETURN_IF_ERROR(standby.Bind(options));
  options.port = standby.port();
  const std::string advertise = AdvertiseUrl(options, options.port);
  LeaderLeaseOptions lease_options{options.store,
                                   options.replica_name.empty() ? advertise : options.replica_name,
                                   advertise, options.lease_ttl};
  ASSIGN_OR_RETURN(std::unique_ptr<LeaderLease> lease, LeaderLease::Open(lease_options));
  standby.Serve();
  if (options.on_listening) options.on_listening(options.port);
  std::int64_t epoch = 0;
  std::string last_leader = "-";
  for (bool first = true; epoch == 0; first = false) {
    if (!first) {
      if (std::string sig = signals.Wait(renew_every); !sig.empty()) {
        LOG_INFO("received {}: the standby stops", sig);
        standby.Stop();
        return Status::Ok();
      }
    }
    Result<std::optional<std::int64_t>> taken = lease->TryAcquire();
    if (taken.ok() && taken->has_value()) {
      epoch = **taken;
      break;
    }
    if (!taken.ok()) {
      LOG_WARN("standby: {}", taken.status().ToString());
      continue;
    }
    Result<LeaseState> state = lease->Read();
    if (!state.ok()) continue;
    standby.SetLease(*state);
    if (state->url != last_leader) {
      LOG_INFO("standby at {}: the leader is {} (epoch {})", advertise, state->url, state->epoch);
      last_leader = state->url;
    }
  }
  LOG_INFO("{} took the leader lease at epoch {}", advertise, epoch);
  standby.Stop();

  // The leader. The keeper renews from now on, while the store opens and the controller adopts.
  std::atomic<bool> stop_keeper{false};
  std::atomic<bool> superseded{false};
  std::atomic<Clock::rep> held_until{lease->LocallyHeldUntil().time_since_epoch().count()};
  std::thread keeper([&] {
    while (!stop_keeper) {
      for (auto wake = Clock::now() + renew_every; !stop_keeper && Clock::now() < wake;) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
      if (stop_keeper) return;
      Result<bool> renewed = lease->Renew(epoch);
      if (renewed.ok() && !*renewed) {
        superseded = true;
        return;
      }
      if (!renewed.ok()) {
        LOG_WARN("cannot renew the leader lease (epoch {}): {}", epoch,
                 renewed.status().ToString());
      } else {
        held_until = lease->LocallyHeldUntil().time_since_epoch().count();
      }
    }
  });
  auto lost = [&] {
    return superseded || Clock::now().time_since_epoch().count() > held_until.load();
  };
  auto exit_if_stuck = [&] {
    // A deposed leader must go even when a connection the network holds blocks its shutdown.
    std::thread([ttl = options.lease_ttl] {
      std::this_thread::sleep_for(2 * ToDuration(ttl));
      LOG_ERROR("the deposed leader's shutdown did not finish in {} s; exiting", 2 * ttl.value());
      std::_Exit(1);
    }).detach();
  };

  options.on_listening = nullptr;  // called once, above: the port is the standby's
  Result<std::unique_ptr<Server>> created = Server::Create(options, controller, epoch);
  if (!created.ok()) {
    stop_keeper = true;
    keeper.join();
    return created.status();
  }
  std::unique_ptr<Server> server = std::move(created).value();
  std::atomic<bool> done{false};
  std::atomic<bool> deposed{false};
  std::thread waiter([&] {
    while (!done) {
      if (std::string sig = signals.Wait(std::chrono::milliseconds(50)); !sig.empty()) {
        LOG_INFO("received {}: finishing requests in flight and handing over", sig);
        server->Shutdown();
        return;
      }
      if (lost()) {
        deposed = true;
        server->Depose();
        LOG_ERROR(
            "lost the leader lease (epoch {}): {}; stopped scheduling, leaving running jobs to "
            "the next leader",
            epoch,
            superseded ? "another replica took it"
                       : fmt::format("not renewed for {} s", options.lease_ttl.value()));
        exit_if_stuck();
        server->Shutdown();
        return;
      }
    }
  });
  Status served = server->Serve();
  done = true;
  waiter.join();
  server.reset();  // the controller stops (Release), the store closes
  stop_keeper = true;
  keeper.join();
  if (deposed) {
    return UnavailableError(fmt::format(
        "lost the leader lease (epoch {}); restart this replica to rejoin as a standby", epoch));
  }
  if (Status released = lease->Release(epoch); !released.ok()) {
    LOG_WARN("{}", released.ToString());  // it expires by itself within the TTL
  }
  LOG_INFO("stopped; the leader lease (epoch {}) is released", epoch);
  return served;
}

}  // namespace baton::server
