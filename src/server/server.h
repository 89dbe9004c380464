// The `baton serve` daemon without its scheduler: opens the job store, loads the auth config and
// serves the HTTP API (http/api.h) until told to stop. RunServer is the whole daemon for a main()
// (signals included); Server is the same thing as an object, for tests and embedding.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/units.h"
#include "server/controller.h"
#include "server/store/job_store.h"

namespace baton::server {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;                   // 0: any free port (see on_listening)
  std::string db_path = "baton.db";  // the embedded SQLite store, unless `store` is set
  // A PostgreSQL store instead: "postgresql://user@host:port/db" (see postgres_job_store.h).
  std::string store;
  std::string auth_config_path;  // YAML, see http/auth.h; required
  // HTTPS when both are set (cpp-httplib is built with OpenSSL); PEM files.
  std::string tls_cert_path;
  std::string tls_key_path;
  std::size_t max_body_bytes = 1 << 20;  // larger request bodies get 413, chunked or not
  Seconds read_timeout{10};              // per read of a request
  Seconds write_timeout{10};
  // Slow clients (http/connection_guard.h): a connection must complete a request head within
  // head_timeout of connecting or of its previous response, and a request within
  // request_timeout of its head; past max_connections open connections, those waiting longest
  // for a head are closed, idle ones before queued requests. 0 for max_connections:
  // worker_threads.
  Seconds head_timeout{10};
  Seconds request_timeout{60};
  std::size_t max_connections = 0;
  int worker_threads = 64;  // concurrent connections served (keep-alive holds one each)
  // Dashboard event streams (/api/v1/stream), each holding a worker thread while open: at most
  // max_event_streams_per_principal for one principal (more get 429) and max_event_streams in
  // all (past it, the stream idle longest is closed for the new one). The total must leave
  // workers for the API: below worker_threads. 0: a quarter of worker_threads, at most 16 (16
  // with the default 64 workers), and 4 per principal (at most the total).
  int max_event_streams = 0;
  int max_event_streams_per_principal = 0;
  bool group_commit = true;
  // Replicas (docs/operations.md): every daemon on one PostgreSQL store competes for the leader
  // lease (store/leader_lease.h); the others are standbys that redirect to the leader until its
  // lease expires. The lease lasts lease_ttl and the leader renews it every lease_renew.
  // `advertise_url` is where clients reach this daemon (empty: http(s)://HOST:PORT, the machine's
  // hostname for a wildcard HOST); `replica_name` names it in the lease (empty: advertise_url).
  Seconds lease_ttl{8};
  Seconds lease_renew{2};
  std::string advertise_url;
  std::string replica_name;
  // Called once the socket is bound, with the actual port, before requests are served (a replica:
  // once, when its standby listens; the leader it may become serves on the same port).
  std::function<void(int port)> on_listening;
};

class Server {
 public:
  // Loads the auth config, binds the socket (a port in use is refused: kUnavailable naming it,
  // before the store is touched), then opens the store (logging what it found).
  // `controller` (not owned, may be null for NullController) must outlive the Server; it is
  // started (Controller::Start) last, and stopped by the destructor before the store closes.
  // `leader_epoch` > 0: this daemon leads replicas on a PostgreSQL store at that lease epoch;
  // the store fences its writes by it and the controller its launches (RunServer does this).
  static Result<std::unique_ptr<Server>> Create(const ServerOptions& options,
                                                Controller* controller = nullptr,
                                                std::int64_t leader_epoch = 0);
  // Closes the store (which finishes pending writes). Serve must have returned (or never have
  // been called).
  ~Server();

  int port() const;
  JobStore& store();
  // The HTTP routes served, as "METHOD shape" (Api::routes).
  const std::vector<std::string>& routes() const;

  // Serves on the calling thread until Shutdown. Returns OK after a requested shutdown.
  Status Serve();
  // Thread-safe and idempotent; may be called before Serve. Stops accepting connections, lets
  // requests in flight finish, then makes Serve return.
  void Shutdown();
  // This daemon lost the leader lease: its store refuses every write from now on (the server's
  // fence refuses those already sent). Thread-safe; call Shutdown next.
  void Depose();

 private:
  struct Impl;
  explicit Server(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// The daemon: Create, serve until SIGTERM or SIGINT, shut down gracefully (stop accepting, finish
// requests in flight, close the store). On a PostgreSQL store, one of the replicas (replica.h):
// a standby until it takes the leader lease, then the daemon until it stops or loses the lease
// (kUnavailable: a supervisor restarts it, as a standby). Blocks those signals in the calling
// thread before any thread starts; call it from main() before creating other threads.
Status RunServer(const ServerOptions& options, Controller* controller = nullptr);

}  // namespace baton::server
