// The flags `baton serve` and `baton federate` share: where to listen, the store, the tokens,
// TLS and the log format. One definition, so the two daemons take them alike.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "core/status.h"
#include "server/server.h"

namespace baton::cli {

struct DaemonFlags {
  std::string listen;  // HOST:PORT
  std::string db;      // SQLite file (the default store)
  std::string store;   // postgresql://... instead of db
  std::string auth;    // principals and tokens (required)
  std::string tls_cert, tls_key;
  std::string log_format = "text";
  int max_event_streams = 0;                // 0: the server's default (ServerOptions)
  int max_event_streams_per_principal = 0;  // 0: the server's default
  // Replicas on a PostgreSQL store (server/replica.h).
  double lease_ttl_s = server::ServerOptions{}.lease_ttl.value();
  double lease_renew_s = server::ServerOptions{}.lease_renew.value();
  std::string advertise_url;
  std::string replica_name;
};

// Adds --listen, --db, --store, --auth, --tls-cert, --tls-key, --log-format, the event-stream
// caps and the replica flags (--lease-ttl, --lease-renew, --advertise-url, --replica-name) to
// `cmd`, their defaults being `flags`'s; `what` names what the store keeps ("the job store").
void AddDaemonFlags(CLI::App* cmd, DaemonFlags* flags, const std::string& what);

// Applies the log format (and at least info level: a daemon reports what it does) and turns the
// flags into the server's options. kInvalidArgument naming the flag for a listen address that is
// not HOST:PORT or an unknown log format.
Result<server::ServerOptions> ServerOptionsFrom(const DaemonFlags& flags);

}  // namespace baton::cli
