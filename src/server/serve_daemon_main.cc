// baton_serve_test_daemon: RunServer behind a minimal command line, for the crash test and for
// trying the API by hand until `baton serve` (src/cli) wires in the scheduler.
//
//   baton_serve_test_daemon --db baton.db --auth auth.yaml [--host 127.0.0.1] [--port 8080]
//       [--port-file FILE] [--tls-cert PEM --tls-key PEM] [--log-level info] [--log-json]
//
// --port 0 picks a free port; --port-file receives it (written atomically) once listening.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

#include "core/log.h"
#include "core/strings.h"
#include "server/server.h"

int main(int argc, char** argv) {
  using baton::server::ServerOptions;
  ServerOptions options;
  options.db_path.clear();
  std::string port_file, log_level = "info";
  bool log_json = false;
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
  baton::Status s = baton::server::RunServer(options);
  if (!s.ok()) {
    LOG_ERROR("{}", s.ToString());
    return 1;
  }
  return 0;
}
