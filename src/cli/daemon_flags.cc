#include "cli/daemon_flags.h"

#include <spdlog/spdlog.h>

#include <optional>

#include "core/strings.h"

namespace baton::cli {

void AddDaemonFlags(CLI::App* cmd, DaemonFlags* flags, const std::string& what) {
  cmd->add_option("--listen", flags->listen, "HOST:PORT to serve on")->capture_default_str();
  cmd->add_option("--db", flags->db, "SQLite database of " + what + " (created if missing)")
      ->capture_default_str();
  cmd->add_option("--store", flags->store,
                  "Keep " + what +
                      " in PostgreSQL instead of --db: postgresql://user@host:port/db (the "
                      "database must exist; tables are created on start)");
  cmd->add_option("--auth", flags->auth, "YAML file of principals and tokens")->required();
  cmd->add_option("--tls-cert", flags->tls_cert, "PEM certificate (HTTPS with --tls-key)");
  cmd->add_option("--tls-key", flags->tls_key, "PEM private key");
  cmd->add_option("--log-format", flags->log_format, "text or json")->capture_default_str();
  cmd->add_option("--max-event-streams", flags->max_event_streams,
                  "Dashboard live-update streams open at once, each holding a worker thread; "
                  "past it the stream idle longest is closed (0: 16)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--max-event-streams-per-principal", flags->max_event_streams_per_principal,
                  "Live-update streams one token may hold; more get 429 (0: 4)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--lease-ttl", flags->lease_ttl_s,
                  "Replicas on a --store: seconds a leader keeps the lease without renewing it; "
                  "a standby takes over once it expires")
      ->capture_default_str();
  cmd->add_option("--lease-renew", flags->lease_renew_s,
                  "Replicas: seconds between the leader's renewals (and a standby's tries); at "
                  "most half the TTL")
      ->capture_default_str();
  cmd->add_option("--advertise-url", flags->advertise_url,
                  "Replicas: the URL clients reach this daemon at, where standbys redirect them "
                  "(default http://HOST:PORT of --listen)");
  cmd->add_option("--replica-name", flags->replica_name,
                  "Replicas: this daemon's name in the lease, unique among them (default: the "
                  "advertised URL)");
}

Result<server::ServerOptions> ServerOptionsFrom(const DaemonFlags& flags) {
  if (flags.log_format == "json") {
    spdlog::set_pattern(R"({"ts":"%Y-%m-%dT%H:%M:%S.%fZ","level":"%l","msg":"%v"})",
                        spdlog::pattern_time_type::utc);
  } else if (flags.log_format != "text") {
    return InvalidArgumentError("--log-format must be json or text");
  }
  if (spdlog::get_level() > spdlog::level::info) spdlog::set_level(spdlog::level::info);

  server::ServerOptions so;
  std::size_t colon = flags.listen.rfind(':');
  std::optional<std::int64_t> port =
      colon == std::string::npos ? std::nullopt : ParseInt64(flags.listen.substr(colon + 1));
  if (!port || *port < 0 || *port > 65535) {
    return InvalidArgumentError("--listen must be HOST:PORT, e.g. 127.0.0.1:8080");
  }
  so.host = flags.listen.substr(0, colon);
  so.port = static_cast<int>(*port);
  so.db_path = flags.db;
  so.store = flags.store;
  so.auth_config_path = flags.auth;
  so.tls_cert_path = flags.tls_cert;
  so.tls_key_path = flags.tls_key;
  so.max_event_streams = flags.max_event_streams;
  so.max_event_streams_per_principal = flags.max_event_streams_per_principal;
  so.lease_ttl = Seconds(flags.lease_ttl_s);
  so.lease_renew = Seconds(flags.lease_renew_s);
  so.advertise_url = flags.advertise_url;
  so.replica_name = flags.replica_name;
  return so;
}

}  // namespace baton::cli
