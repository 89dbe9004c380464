// baton_serve_test_daemon: RunServer behind a minimal command line, for the crash and controller
// tests (`baton serve` in src/cli is the real entry point).
//
//   baton_serve_test_daemon --db baton.db --auth auth.yaml [--host 127.0.0.1] [--port 8080]
//       [--port-file FILE] [--tls-cert PEM --tls-key PEM] [--log-level info] [--log-json]
//       [--preset NAME | --topology FILE] [--executor dry-run|local] [--speedup N]
//       [--log-dir DIR] [--store postgresql://... [--lease-ttl S] [--lease-renew S]
//       [--replica-name NAME]]
//
// --port 0 picks a free port; --port-file receives it (written atomically) once listening.
// Without --preset or --topology no scheduler runs (jobs stay queued); with one, a
// SchedulingController over that cluster (built-in, or a cluster file) with the default
// scheduler configuration.
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <string_view>

#include "core/clock.h"
#include "core/log.h"
#include "core/strings.h"
#include "server/executors/registry.h"
#include "server/scheduling_controller.h"
#include "server/server.h"
#include "topology/builders/fabrics.h"
#include "topology/io/cluster_file.h"

int main(int argc, char** argv) {
  using baton::server::ServerOptions;
  ServerOptions options;
  options.db_path.clear();
  std::string port_file, log_level = "info";
  bool log_json = false;
  std::string preset, topology, executor = "dry-run", log_dir = "baton-logs";
  double speedup = 60;
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", argv[i]);
        std::exit(2);
      }
      return argv[++i];
    };
    if (arg == "--db") {
      options.db_path = value();
    } else if (arg == "--auth") {
      options.auth_config_path = value();
    } else if (arg == "--host") {
      options.host = value();
    } else if (arg == "--port") {
      auto port = baton::ParseInt64(value());
      if (!port) {
        std::fprintf(stderr, "--port must be a number\n");
        return 2;
      }
      options.port = static_cast<int>(*port);
    } else if (arg == "--port-file") {
      port_file = value();
    } else if (arg == "--tls-cert") {
      options.tls_cert_path = value();
    } else if (arg == "--tls-key") {
      options.tls_key_path = value();
    } else if (arg == "--log-level") {
      log_level = value();
    } else if (arg == "--preset") {
      preset = value();
    } else if (arg == "--topology") {
      topology = value();
    } else if (arg == "--executor") {
      executor = value();
    } else if (arg == "--log-dir") {
      log_dir = value();
    } else if (arg == "--speedup") {
      speedup = std::atof(value().c_str());
    } else if (arg == "--store") {
      options.store = value();
    } else if (arg == "--lease-ttl") {
      options.lease_ttl = baton::Seconds(std::atof(value().c_str()));
    } else if (arg == "--lease-renew") {
      options.lease_renew = baton::Seconds(std::atof(value().c_str()));
    } else if (arg == "--replica-name") {
      options.replica_name = value();
    } else if (arg == "--log-json") {
      log_json = true;
    } else {
      std::fprintf(stderr, "unknown argument %s\n", argv[i]);
      return 2;
    }
  }
  if (options.db_path.empty() || options.auth_config_path.empty()) {
    std::fprintf(stderr, "usage: %s --db FILE --auth FILE [--port N] [--port-file FILE]\n",
                 argv[0]);
    return 2;
  }
  baton::Status logging =
      baton::InitLogging(log_level, log_json ? baton::LogFormat::kJson : baton::LogFormat::kText);
  if (!logging.ok()) {
    std::fprintf(stderr, "%s\n", logging.ToString().c_str());
    return 2;
  }
  if (!port_file.empty()) {
    options.on_listening = [port_file](int port) {
      std::string tmp = port_file + ".tmp";
      std::ofstream(tmp) << port << "\n";
      std::filesystem::rename(tmp, port_file);
    };
  }
  baton::SystemClock clock;
  std::unique_ptr<baton::server::SchedulingController> controller;
  if (!preset.empty() || !topology.empty()) {
    auto cluster = topology.empty() ? baton::topo::BuildPreset(preset)
                                    : baton::topo::LoadClusterFile(topology);
    if (!cluster.ok()) {
      std::fprintf(stderr, "%s\n", cluster.status().ToString().c_str());
      return 2;
    }
    auto kind = baton::server::FindExecutor(executor);
    if (!kind.ok() || (*kind)->cluster != nullptr) {
      std::fprintf(stderr, "--executor: dry-run or local\n");
      return 2;
    }
    baton::server::ExecutorSettings settings;
    settings.speedup = speedup;
    settings.work_dir = log_dir;
    auto exec = baton::server::CreateExecutor(**kind, settings, clock);
    if (!exec.ok()) {
      std::fprintf(stderr, "%s\n", exec.status().ToString().c_str());
      return 2;
    }
    baton::server::SchedulingControllerOptions co;
    co.checkpoint_root = std::filesystem::absolute(std::filesystem::path(log_dir) / "checkpoints");
    auto created = baton::server::SchedulingController::Create(
        std::move(cluster).value(), std::move(co), std::move(exec).value(), clock);
    if (!created.ok()) {
      std::fprintf(stderr, "%s\n", created.status().ToString().c_str());
      return 2;
    }
    controller = std::move(created).value();
  }
  baton::Status s = baton::server::RunServer(options, controller.get());
  if (!s.ok()) {
    LOG_ERROR("{}", s.ToString());
    return 1;
  }
  return 0;
}
