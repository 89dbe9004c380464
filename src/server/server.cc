#include "server/server.h"

#include <httplib.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <thread>

#include "core/log.h"
#include "server/http/api.h"
#include "server/http/auth.h"
#include "server/http/connection_guard.h"
#include "server/http/http_server.h"
#include "server/metrics.h"
#include "server/replica.h"
#include "server/stop_signals.h"
#include "server/store/postgres_job_store.h"
#include "server/store/sqlite_job_store.h"

namespace baton::server {

struct Server::Impl {
  ServerOptions options;
  NullController null_controller;
  Controller* controller = nullptr;
  bool controller_started = false;
  std::unique_ptr<JobStore> store;
  PostgresJobStore* replica_store = nullptr;  // `store`, when it is a leader's (fenced) store
  std::unique_ptr<Authenticator> auth;
  Registry metrics;
  std::unique_ptr<Api> api;
  std::unique_ptr<ConnectionGuard> guard;
  std::unique_ptr<httplib::Server> http;
  int port = 0;
  std::atomic<bool> serving{false};
  std::atomic<bool> shutdown_requested{false};
};

namespace {

// httplib takes whole seconds plus microseconds.
std::pair<time_t, time_t> SplitSeconds(Seconds s) {
  double whole = std::floor(s.value());
  return {static_cast<time_t>(whole), static_cast<time_t>((s.value() - whole) * 1e6)};
}

std::chrono::milliseconds Millis(Seconds s) {
  return std::chrono::milliseconds(static_cast<std::int64_t>(std::llround(s.value() * 1e3)));
}

// httplib's default sets SO_REUSEPORT, with which a second daemon binds the same port and the
// kernel splits connections between the two. SO_REUSEADDR alone still allows a restart while old
// connections sit in TIME_WAIT, and refuses a port another socket listens on.
void ListenSocketOptions(int sock) {
  int yes = 1;
  ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
}

}  // namespace

Server::Server(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Server::~Server() {
  Shutdown();
  // No request is in flight any more: the controller stops before the store closes.
  if (impl_->controller_started) impl_->controller->Stop();
  // Members are destroyed in reverse order: the HTTP server (no handler runs any more), then the
  // API, then the store, which finishes its pending writes and closes the database cleanly.
}

int Server::port() const { return impl_->port; }
JobStore& Server::store() { return *impl_->store; }
const std::vector<std::string>& Server::routes() const { return impl_->api->routes(); }

Result<std::unique_ptr<Server>> Server::Create(const ServerOptions& options, Controller* controller,
                                               std::int64_t leader_epoch) {
  if (options.auth_config_path.empty()) {
    return InvalidArgumentError("an auth config file is required (principals and tokens)");
  }
  if (options.port < 0 || options.port > 65535) {
    return InvalidArgumentError("port must be in 0..65535");
  }
  if (options.tls_cert_path.empty() != options.tls_key_path.empty()) {
    return InvalidArgumentError("TLS needs both a certificate and a key");
  }
  if (options.worker_threads < 1) return InvalidArgumentError("worker_threads must be >= 1");
  EventStreamLimits streams;
  streams.max_total = options.max_event_streams > 0 ? options.max_event_streams
                                                    : std::clamp(options.worker_threads / 4, 1, 16);
  streams.max_per_principal = options.max_event_streams_per_principal > 0
                                  ? options.max_event_streams_per_principal
                                  : std::min(4, streams.max_total);
  if (options.max_event_streams < 0 || streams.max_total >= std::max(2, options.worker_threads)) {
    return InvalidArgumentError("max_event_streams must be below worker_threads (" +
                                std::to_string(options.worker_threads) +
                                "): each stream holds a worker");
  }
  if (options.max_event_streams_per_principal < 0 ||
      streams.max_per_principal > streams.max_total) {
    return InvalidArgumentError(
        "max_event_streams_per_principal must be at most max_event_streams");
  }
  auto impl = std::make_unique<Impl>();
  impl->options = options;

  ASSIGN_OR_RETURN(Authenticator auth, Authenticator::LoadFile(options.auth_config_path));
  impl->auth = std::make_unique<Authenticator>(std::move(auth));

  if (!options.tls_cert_path.empty()) {
    auto https = std::make_unique<httplib::SSLServer>(options.tls_cert_path.c_str(),
                                                      options.tls_key_path.c_str());
    if (!https->is_valid()) {
      return InvalidArgumentError("cannot load TLS certificate " + options.tls_cert_path +
                                  " or key " + options.tls_key_path);
    }
    impl->http = std::move(https);
  } else {
    // baton's connection loop: pipelined requests, TCP_NODELAY and prompt ACKs (http_server.h).
    impl->http = std::make_unique<HttpServer>(ConnectionGuardOptions{}.refuse_linger);
  }
  httplib::Server& http = *impl->http;
  int listen_fd = -1;
  http.set_socket_options([&listen_fd](int sock) {
    ListenSocketOptions(sock);
    listen_fd = sock;
  });
  // Bound before the store is opened: a second daemon on a port in use stops here, having
  // touched nothing.
  if (options.port == 0) {
    impl->port = http.bind_to_any_port(options.host);
  } else {
    impl->port = http.bind_to_port(options.host, options.port) ? options.port : -1;
  }
  // httplib listens with a backlog of 5: a burst of new connections has SYNs dropped and retried
  // a second later. listen(2) again on the bound socket only raises the backlog.
  if (impl->port > 0 && listen_fd >= 0) ::listen(listen_fd, SOMAXCONN);
  http.set_socket_options(ListenSocketOptions);  // not the lambda holding a local's address
  if (impl->port <= 0) {
    const int err = errno;
    return UnavailableError(
        "cannot listen on " + options.host + ":" + std::to_string(options.port) + ": " +
        (err == EADDRINUSE ? std::string("the port is in use (is another baton serve running?)")
                           : std::string(strerror(err))));
  }

  std::string store_name = options.db_path;
  if (options.store.empty()) {
    SqliteStoreOptions store_options;
    store_options.path = options.db_path;
    store_options.group_commit = options.group_commit;
    ASSIGN_OR_RETURN(impl->store, SqliteJobStore::Open(store_options));
  } else if (IsPostgresUrl(options.store)) {
    PostgresStoreOptions store_options;
    store_options.url = options.store;
    store_options.group_commit = options.group_commit;
    store_options.fencing_epoch = leader_epoch;
    store_options.idle_transaction_timeout = options.lease_ttl;
    ASSIGN_OR_RETURN(auto postgres, PostgresJobStore::Open(store_options));
    store_name = postgres->display_url();
    if (leader_epoch > 0) impl->replica_store = postgres.get();
    impl->store = std::move(postgres);
  } else {
    return InvalidArgumentError("the store must be a postgresql:// URL (or empty for SQLite)");
  }
  if (impl->store->open_report().not_clean.empty()) {
    LOG_INFO("job store {}: {}", store_name, impl->store->open_report().ToString());
  } else {
    LOG_ERROR("job store {}: {}", store_name, impl->store->open_report().ToString());
  }

  int workers = options.worker_threads;
  http.new_task_queue = [workers] { return new httplib::ThreadPool(workers); };
  auto [rs, rus] = SplitSeconds(options.read_timeout);
  http.set_read_timeout(rs, rus);
  auto [ws, wus] = SplitSeconds(options.write_timeout);
  http.set_write_timeout(ws, wus);
  http.set_keep_alive_max_count(100000);
  // Below head_timeout, so that httplib ends idle keep-alive connections itself.
  http.set_keep_alive_timeout(5);
  http.set_tcp_nodelay(true);

  ConnectionGuardOptions guard;
  guard.head_timeout = Millis(options.head_timeout);
  guard.request_timeout = Millis(options.request_timeout);
  guard.max_connections = options.max_connections > 0
                              ? options.max_connections
                              : static_cast<std::size_t>(options.worker_threads);
  impl->guard = std::make_unique<ConnectionGuard>(guard);

  Controller& c = controller != nullptr ? *controller : impl->null_controller;
  impl->controller = &c;
  impl->api = std::make_unique<Api>(*impl->store, *impl->auth, c, impl->metrics, streams);
  impl->api->set_leader_epoch(leader_epoch);
  impl->api->Register(http, options.max_body_bytes, impl->guard->Hooks());
  impl->guard->Start(impl->port);

  // Last, once nothing else can fail: the controller reloads the store and starts its thread.
  if (leader_epoch > 0) c.SetLeaderEpoch(leader_epoch);
  RETURN_IF_ERROR(c.Start(*impl->store, impl->metrics));
  impl->controller_started = true;
  LOG_INFO("listening on {}://{}:{} ({} principals, body limit {} bytes)",
           options.tls_cert_path.empty() ? "http" : "https", options.host, impl->port,
           impl->auth->size(), options.max_body_bytes);
  return std::unique_ptr<Server>(new Server(std::move(impl)));
}

Status Server::Serve() {
  impl_->serving = true;
  if (impl_->options.on_listening) impl_->options.on_listening(impl_->port);
  bool ok = impl_->shutdown_requested || impl_->http->listen_after_bind();
  impl_->serving = false;
  if (!ok && !impl_->shutdown_requested) return UnavailableError("the HTTP server failed");
  return Status::Ok();
}

void Server::Shutdown() {
  if (impl_->shutdown_requested.exchange(true)) {
    // Already requested; still make sure a Serve that started meanwhile stops.
  }
  // Serve may be between setting `serving` and httplib marking itself running; wait for that
  // so that stop() is not lost.
  for (int i = 0; i < 1000 && impl_->serving && !impl_->http->is_running(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  impl_->http->stop();
}

void Server::Depose() {
  if (impl_->replica_store != nullptr) impl_->replica_store->Fence();
}

Status RunServer(const ServerOptions& options, Controller* controller) {
  if (IsPostgresUrl(options.store)) return RunReplica(options, controller);
  // Blocked here, inherited by every thread started below, and taken only by Wait.
  StopSignals signals;
  ASSIGN_OR_RETURN(std::unique_ptr<Server> server, Server::Create(options, controller));
  std::atomic<bool> done{false};
  std::thread waiter([&] {
    while (!done) {
      if (std::string sig = signals.Wait(std::chrono::milliseconds(100)); !sig.empty()) {
        LOG_INFO("received {}: finishing requests in flight and shutting down", sig);
        server->Shutdown();
        return;
      }
    }
  });
  Status served = server->Serve();
  done = true;
  waiter.join();
  server.reset();  // closes the store: pending writes finish, the WAL is checkpointed
  LOG_INFO("stopped");
  return served;
}

}  // namespace baton::server
