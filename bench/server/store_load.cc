// store_load: durable submissions per second straight into the job store, with group commit and
// with one transaction (one fsync) per submit, measured in the same run; prints both and the
// ratio. SqliteJobStore on a fresh file in --dir, or PostgresJobStore in the existing database
// --store names (each run submits as its own tenant, so runs do not collide on keys).
//
//   store_load [--threads 32] [--seconds 3] [--dir /tmp] [--store postgresql://...]
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "load_stats.h"
#include "server/store/postgres_job_store.h"
#include "server/store/sqlite_job_store.h"

namespace {

using baton::bench::LoadStats;
using namespace baton::server;
using SteadyClock = std::chrono::steady_clock;

template <typename Store, typename Options>
double Run(const Options& options, int threads, double seconds) {
  auto store = Store::Open(options);
  std::string tenant = "bench-" + std::to_string(::getpid()) + (options.group_commit ? "-g" : "-1");
  if (!store.ok()) {
    std::fprintf(stderr, "%s\n", store.status().ToString().c_str());
    std::exit(1);
  }
  std::vector<LoadStats> stats(threads);
  std::atomic<bool> stop{false};
  std::vector<std::thread> workers;
  workers.reserve(static_cast<std::size_t>(threads));
  auto start = SteadyClock::now();
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      for (int i = 0; !stop; ++i) {
        NewJob job{tenant, "job", R"({"gpus":8,"name":"job"})",
                   std::to_string(t) + "-" + std::to_string(i)};
        auto t0 = SteadyClock::now();
        auto r = (*store)->Submit(job);
        std::chrono::duration<double> d = SteadyClock::now() - t0;
        if (r.ok()) {
          stats[t].latencies_s.push_back(d.count());
        } else {
          ++stats[t].errors;
        }
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  stop = true;
  for (auto& w : workers) w.join();
  std::chrono::duration<double> elapsed = SteadyClock::now() - start;
  LoadStats all;
  for (const auto& s : stats) all.Merge(s);
  double rate = all.Print(options.group_commit ? "group commit      " : "one txn per submit",
                          elapsed.count());
  std::printf("  (%lld transactions)\n",
              static_cast<long long>((*store)->transactions_committed()));
  return rate;
}

double RunSqlite(const std::string& dir, bool group_commit, int threads, double seconds) {
  std::string path = dir + "/store_load_" + std::to_string(::getpid()) + ".db";
  auto remove = [&] {
    for (const char* suffix : {"", "-wal", "-shm", ".lock"}) std::filesystem::remove(path + suffix);
  };
  remove();
  SqliteStoreOptions options;
  options.path = path;
  options.group_commit = group_commit;
  double rate = Run<SqliteJobStore>(options, threads, seconds);
  remove();
  return rate;
}

double RunPostgres(const std::string& url, bool group_commit, int threads, double seconds) {
  PostgresStoreOptions options;
  options.url = url;
  options.group_commit = group_commit;
  return Run<PostgresJobStore>(options, threads, seconds);
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 32;
  double seconds = 3;
  std::string dir = std::filesystem::temp_directory_path().string();
  std::string store_url;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string arg = argv[i];
    if (arg == "--threads") {
      threads = std::atoi(argv[i + 1]);
    } else if (arg == "--seconds") {
      seconds = std::atof(argv[i + 1]);
    } else if (arg == "--dir") {
      dir = argv[i + 1];
    } else if (arg == "--store") {
      store_url = argv[i + 1];
    } else {
      std::fprintf(stderr,
                   "usage: store_load [--threads N] [--seconds T] [--dir DIR] [--store URL]\n");
      return 2;
    }
  }
  double single = 0, group = 0;
  if (store_url.empty()) {
    std::printf("store_load: %d threads, %.1f s each, SQLite synchronous=FULL, in %s\n", threads,
                seconds, dir.c_str());
    single = RunSqlite(dir, false, threads, seconds);
    group = RunSqlite(dir, true, threads, seconds);
  } else {
    std::printf("store_load: %d threads, %.1f s each, PostgreSQL (synchronous_commit=on)\n",
                threads, seconds);
    single = RunPostgres(store_url, false, threads, seconds);
    group = RunPostgres(store_url, true, threads, seconds);
  }
  std::printf("group commit / one txn per submit = %.1fx\n", single > 0 ? group / single : 0.0);
  return 0;
}
