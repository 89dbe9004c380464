// serve_load: N client threads submit durable jobs over loopback HTTP for T seconds (each
// submission with its own Idempotency-Key, each acknowledged only after its fsync'd commit) and
// print submissions/s and p50/p99 latency. By default it starts the daemon in-process on an
// ephemeral port with a fresh database; --port targets a daemon that is already running.
//
//   serve_load [--threads 32] [--seconds 5] [--dir /tmp] [--no-group-commit]
//   serve_load --port 8080 --token TOKEN [--host 127.0.0.1] [--threads 32] [--seconds 5]
#include <httplib.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "load_stats.h"
#include "server/server.h"

namespace {

using baton::bench::LoadStats;
using SteadyClock = std::chrono::steady_clock;

}  // namespace

int main(int argc, char** argv) {
  int threads = 32, port = 0;
  double seconds = 5;
  bool group_commit = true;
  std::string host = "127.0.0.1", token = "bench-admin-token-0123456789";
  std::string dir = std::filesystem::temp_directory_path().string();
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    bool has_value = i + 1 < argc;
    if (arg == "--no-group-commit") {
      group_commit = false;
    } else if (arg == "--threads" && has_value) {
      threads = std::atoi(argv[++i]);
    } else if (arg == "--seconds" && has_value) {
      seconds = std::atof(argv[++i]);
    } else if (arg == "--dir" && has_value) {
      dir = argv[++i];
    } else if (arg == "--host" && has_value) {
      host = argv[++i];
    } else if (arg == "--port" && has_value) {
      port = std::atoi(argv[++i]);
    } else if (arg == "--token" && has_value) {
      token = argv[++i];
    } else {
      std::fprintf(stderr,
                   "usage: serve_load [--threads N] [--seconds T] [--dir DIR] "
                   "[--no-group-commit] [--host H --port P --token T]\n");
      return 2;
    }
  }

  std::unique_ptr<baton::server::Server> server;
  std::thread serve_thread;
  std::string work = dir + "/serve_load_" + std::to_string(::getpid());
  if (port == 0) {
    std::filesystem::create_directories(work);
    std::ofstream(work + "/auth.yaml")
        << "principals:\n  - {name: bench, role: admin, token: " << token << "}\n";
    baton::server::ServerOptions o;
    o.port = 0;
    o.db_path = work + "/baton.db";
    o.auth_config_path = work + "/auth.yaml";
    o.worker_threads = threads + 8;
    o.group_commit = group_commit;
    auto created = baton::server::Server::Create(o);
    if (!created.ok()) {
      std::fprintf(stderr, "%s\n", created.status().ToString().c_str());
      return 1;
    }
    server = std::move(created).value();
    port = server->port();
    serve_thread = std::thread([&] { (void)server->Serve(); });
  }

  std::printf(
      "serve_load: %d client threads, %.1f s, %s:%d%s\n", threads, seconds, host.c_str(), port,
      server ? (group_commit ? " (in-process daemon)" : " (in-process, no group commit)") : "");
  std::vector<LoadStats> stats(threads);
  std::atomic<bool> stop{false};
  std::vector<std::thread> clients;
  std::string bearer = "Bearer " + token;
  std::string run = std::to_string(::getpid());
  // cpp-httplib 0.11.4 listens with a backlog of 5, so a burst of new connections sees SYNs
  // dropped and retried after a second; every client connects (GET /healthz) before the clock
  // starts, and the measurement is of steady keep-alive traffic.
  std::atomic<int> connected{0};
  std::atomic<bool> go{false};
  for (int t = 0; t < threads; ++t) {
    clients.emplace_back([&, t] {
      httplib::Client c(host, port);
      c.set_keep_alive(true);
      c.set_tcp_nodelay(true);
      c.set_read_timeout(10);
      auto warm = c.Get("/healthz");
      if (!warm) std::fprintf(stderr, "client %d: connect failed\n", t);
      ++connected;
      while (!go) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      for (int i = 0; !stop; ++i) {
        std::string key = run;
        key.append("-").append(std::to_string(t)).append("-").append(std::to_string(i));
        httplib::Headers h{{"Authorization", bearer}, {"Idempotency-Key", key}};
        auto t0 = SteadyClock::now();
        auto res = c.Post("/api/v1/jobs", h,
                          R"({"name": "bench", "gpus": 64, "gpus_per_node": 8, "priority": 5})",
                          "application/json");
        std::chrono::duration<double> d = SteadyClock::now() - t0;
        if (res && res->status == 201) {
          stats[t].latencies_s.push_back(d.count());
        } else {
          if (stats[t].errors++ == 0) {
            std::fprintf(stderr, "client %d: %s\n", t,
                         res ? ("HTTP " + std::to_string(res->status)).c_str()
                             : httplib::to_string(res.error()).c_str());
          }
        }
      }
    });
  }
  while (connected < threads) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  auto start = SteadyClock::now();
  go = true;
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  stop = true;
  for (auto& c : clients) c.join();
  std::chrono::duration<double> elapsed = SteadyClock::now() - start;
  LoadStats all;
  for (const auto& s : stats) all.Merge(s);
  all.Print("submissions", elapsed.count());

  if (server) {
    server->Shutdown();
    serve_thread.join();
    server.reset();
    std::filesystem::remove_all(work);
  }
  return 0;
}
