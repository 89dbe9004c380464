// serve_load: N client threads submit durable jobs over loopback HTTP for T seconds (each
// submission with its own Idempotency-Key, each acknowledged only after its fsync'd commit) and
// print submissions/s and p50/p99 latency, first with each client on one keep-alive connection,
// then with a fresh connection per submission (--connections chooses one), side by side.
// --no-client-nodelay makes the clients leave Nagle's algorithm on, as many HTTP clients do
// (httplib::Client's default): a request's head and body then go out as two writes, the body held
// until the head is acknowledged. By default it starts the daemon in-process on an
// ephemeral port with a fresh database; --port targets a daemon that is already running.
// --scheduler PRESET runs the in-process daemon with its scheduling loop over that topology preset
// and a dry-run executor, and prints the scheduling-cycle latency under the load from the
// daemon's own /metrics histogram (quantiles interpolated within buckets, as Prometheus'
// histogram_quantile does).
//
//   serve_load [--threads 32] [--seconds 5] [--dir /tmp] [--no-group-commit]
//              [--scheduler superpod-h100] [--connections keep-alive|fresh|both]
//              [--no-client-nodelay]
//   serve_load --port 8080 --token TOKEN [--host 127.0.0.1] [--threads 32] [--seconds 5]
#include <httplib.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "load_stats.h"
#include "server/executors/dry_run_executor.h"
#include "server/scheduling_controller.h"
#include "server/server.h"
#include "topology/builders/fabrics.h"

namespace {

using baton::bench::LoadStats;
using SteadyClock = std::chrono::steady_clock;

// One histogram from Prometheus text: cumulative bucket counts by upper bound, sum and count.
struct Histogram {
  std::vector<std::pair<double, double>> buckets;  // (le, cumulative count), +Inf last
  double sum = 0, count = 0;

  // histogram_quantile: linear interpolation inside the bucket holding rank q * count.
  double Quantile(double q) const {
    double rank = q * count, lower = 0, below = 0;
    for (auto [le, cumulative] : buckets) {
      if (cumulative >= rank) {
        if (std::isinf(le)) return lower;
        double in = cumulative - below;
        return in <= 0 ? le : lower + (le - lower) * (rank - below) / in;
      }
      lower = le;
      below = cumulative;
    }
    return lower;
  }
};

Histogram ParseHistogram(const std::string& text, const std::string& name) {
  Histogram h;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(name, 0) != 0) continue;
    double value = std::atof(line.substr(line.rfind(' ') + 1).c_str());
    std::string rest = line.substr(name.size());
    if (rest.rfind("_bucket{le=\"", 0) == 0) {
      std::string le = rest.substr(12, rest.find('"', 12) - 12);
      h.buckets.emplace_back(le == "+Inf" ? INFINITY : std::atof(le.c_str()), value);
    } else if (rest.rfind("_sum ", 0) == 0) {
      h.sum = value;
    } else if (rest.rfind("_count ", 0) == 0) {
      h.count = value;
    }
  }
  return h;
}

double GaugeValue(const std::string& text, const std::string& series) {
  std::size_t at = text.find("\n" + series + " ");
  return at == std::string::npos ? -1 : std::atof(text.c_str() + at + series.size() + 2);
}

enum class Connections { kKeepAlive, kFresh };

// `threads` clients submit for `seconds`, each over one keep-alive connection or over a new
// connection per submission; every client connects (GET /healthz) before the clock starts.
LoadStats RunLoad(const std::string& host, int port, int threads, double seconds, Connections mode,
                  bool nodelay, const std::string& bearer) {
  std::vector<LoadStats> stats(threads);
  std::atomic<bool> stop{false};
  std::atomic<int> connected{0};
  std::atomic<bool> go{false};
  std::vector<std::thread> clients;
  clients.reserve(static_cast<std::size_t>(threads));
  static std::atomic<int> runs{0};
  const std::string run = std::to_string(::getpid()) + "-" + std::to_string(runs++);
  for (int t = 0; t < threads; ++t) {
    clients.emplace_back([&, t] {
      auto connect = [&] {
        auto c = std::make_unique<httplib::Client>(host, port);
        c->set_keep_alive(mode == Connections::kKeepAlive);
        c->set_tcp_nodelay(nodelay);
        c->set_read_timeout(10);
        return c;
      };
      std::unique_ptr<httplib::Client> c = connect();
      auto warm = c->Get("/healthz");
      if (!warm) std::fprintf(stderr, "client %d: connect failed\n", t);
      ++connected;
      while (!go) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      for (int i = 0; !stop; ++i) {
        std::string key = run;
        key.append("-").append(std::to_string(t)).append("-").append(std::to_string(i));
        httplib::Headers h{{"Authorization", bearer}, {"Idempotency-Key", key}};
        auto t0 = SteadyClock::now();
        if (mode == Connections::kFresh) c = connect();
        auto res = c->Post("/api/v1/jobs", h,
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
  LoadStats all;
  for (const auto& s : stats) all.Merge(s);
  all.elapsed_s = std::chrono::duration<double>(SteadyClock::now() - start).count();
  return all;
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 32, port = 0;
  std::string scheduler_preset;
  double seconds = 5;
  bool group_commit = true, client_nodelay = true;
  std::string mode = "both";
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
    } else if (arg == "--scheduler" && has_value) {
      scheduler_preset = argv[++i];
    } else if (arg == "--token" && has_value) {
      token = argv[++i];
    } else if (arg == "--connections" && has_value) {
      mode = argv[++i];
      if (mode != "keep-alive" && mode != "fresh" && mode != "both") mode = "";
      if (mode.empty()) {
        std::fprintf(stderr, "--connections must be keep-alive, fresh or both\n");
        return 2;
      }
    } else if (arg == "--no-client-nodelay") {
      client_nodelay = false;
    } else {
      std::fprintf(stderr,
                   "usage: serve_load [--threads N] [--seconds T] [--dir DIR] "
                   "[--no-group-commit] [--scheduler PRESET] [--connections keep-alive|fresh|both] "
                   "[--no-client-nodelay] [--host H --port P --token T]\n");
      return 2;
    }
  }

  baton::SystemClock clock;
  std::unique_ptr<baton::server::SchedulingController> controller;
  if (!scheduler_preset.empty()) {
    auto cluster = baton::topo::BuildPreset(scheduler_preset);
    if (!cluster.ok()) {
      std::fprintf(stderr, "%s\n", cluster.status().ToString().c_str());
      return 2;
    }
    baton::server::DryRunOptions dry;
    dry.speedup = 600;  // the 600 s default runtime: one second
    auto created = baton::server::SchedulingController::Create(
        std::move(cluster).value(), {}, std::make_unique<baton::server::DryRunExecutor>(dry, clock),
        clock);
    if (!created.ok()) {
      std::fprintf(stderr, "%s\n", created.status().ToString().c_str());
      return 1;
    }
    controller = std::move(created).value();
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
    auto created = baton::server::Server::Create(o, controller.get());
    if (!created.ok()) {
      std::fprintf(stderr, "%s\n", created.status().ToString().c_str());
      return 1;
    }
    server = std::move(created).value();
    port = server->port();
    serve_thread = std::thread([&] { (void)server->Serve(); });
  }

  std::printf(
      "serve_load: %d client threads, %.1f s, %s:%d%s%s\n", threads, seconds, host.c_str(), port,
      server ? (group_commit ? " (in-process daemon)" : " (in-process, no group commit)") : "",
      client_nodelay ? "" : ", clients without TCP_NODELAY");
  if (controller) std::printf("scheduler: %s, dry-run executor\n", scheduler_preset.c_str());
  const std::string bearer = "Bearer " + token;
  std::vector<Connections> modes;
  if (mode != "fresh") modes.push_back(Connections::kKeepAlive);
  if (mode != "keep-alive") modes.push_back(Connections::kFresh);
  for (Connections m : modes) {
    LoadStats all = RunLoad(host, port, threads, seconds, m, client_nodelay, bearer);
    all.Print(m == Connections::kKeepAlive ? "submissions, keep-alive connections"
                                           : "submissions, a fresh connection each",
              all.elapsed_s);
  }

  if (controller) {
    // /metrics is admin-only (docs/auth.md): the bench's token is an admin's.
    auto res = httplib::Client(host, port).Get("/metrics", {{"Authorization", bearer}});
    if (!res || res->status != 200) {
      std::fprintf(stderr, "GET /metrics failed\n");
      return 1;
    }
    Histogram h = ParseHistogram(res->body, "baton_scheduler_cycle_duration_seconds");
    std::printf(
        "scheduling cycles under the load: %.0f cycles, mean %.2f ms, p50 %.2f ms, p99 %.2f ms; "
        "%.0f jobs pending, %.0f running at the end\n",
        h.count, h.count > 0 ? 1e3 * h.sum / h.count : 0.0, 1e3 * h.Quantile(0.5),
        1e3 * h.Quantile(0.99),
        GaugeValue(res->body, "baton_scheduler_queue_length{phase=\"pending\"}"),
        GaugeValue(res->body, "baton_scheduler_queue_length{phase=\"running\"}"));
  }

  if (server) {
    server->Shutdown();
    serve_thread.join();
    server.reset();
    std::filesystem::remove_all(work);
  }
  return 0;
}
