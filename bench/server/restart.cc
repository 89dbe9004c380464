// restart: how long `baton serve` takes to come back on a SQLite store holding many jobs.
//
// Builds a database of --jobs jobs (by default 100,000 and 1,000,000, one database each) with
// three events each, --queued of them still queued and the rest succeeded, as a long-lived
// daemon's store looks. The first 1,000 jobs go through the store's own Submit (so the spec and
// every column are what the daemon writes); the rest are copies made in SQL, which takes seconds
// rather than the minutes a million HTTP submissions would. Then it times, --runs times each, a
// daemon start as `baton serve` does it: the store opened (lock, schema check, recovery check),
// the scheduling controller created over the superpod-h100 preset with a dry-run executor, the
// queued jobs resubmitted to the scheduler, and the HTTP server listening; and, after that, the
// first GET /api/v1/jobs answered. Prints the median of each per size.
//
//   restart [--jobs 100000,1000000] [--queued 1000] [--runs 3] [--dir /tmp]
#include <httplib.h>
#include <sqlite3.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "server/executors/dry_run_executor.h"
#include "server/scheduling_controller.h"
#include "server/server.h"
#include "server/store/sqlite_job_store.h"
#include "topology/builders/fabrics.h"

namespace {

using namespace baton::server;
using SteadyClock = std::chrono::steady_clock;

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

bool Exec(sqlite3* db, const std::string& sql) {
  char* err = nullptr;
  if (sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
    std::fprintf(stderr, "%s: %s\n", sql.substr(0, 80).c_str(), err ? err : "?");
    sqlite3_free(err);
    return false;
  }
  return true;
}

// A store of `jobs` jobs, `queued` of them queued, at `path`.
bool Build(const std::string& path, long jobs, long queued) {
  constexpr long kThroughStore = 1000;
  {
    SqliteStoreOptions o;
    o.path = path;
    auto store = SqliteJobStore::Open(o);
    if (!store.ok()) {
      std::fprintf(stderr, "%s\n", store.status().ToString().c_str());
      return false;
    }
    for (long i = 0; i < std::min(jobs, kThroughStore); ++i) {
      NewJob j;
      j.tenant = "team" + std::to_string(i % 8);
      j.name = "pretrain-" + std::to_string(i);
      j.spec_json = R"({"name": "pretrain-)" + std::to_string(i) +
                    R"(", "gpus": 16, "gpus_per_node": 8, "estimated_runtime_s": 3600})";
      auto r = (*store)->Submit(j);
      if (!r.ok()) {
        std::fprintf(stderr, "%s\n", r.status().ToString().c_str());
        return false;
      }
    }
  }
  sqlite3* db = nullptr;
  if (sqlite3_open(path.c_str(), &db) != SQLITE_OK) return false;
  bool ok = Exec(db, "BEGIN");
  if (jobs > kThroughStore) {
    ok =
        ok && Exec(db, "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < " +
                           std::to_string(jobs - kThroughStore) +
                           ") INSERT INTO jobs (tenant, name, spec, state, attempts, "
                           "created_us, updated_us) SELECT j.tenant, j.name, j.spec, j.state, 1, "
                           "j.created_us, j.updated_us FROM n JOIN jobs j ON j.id = 1 + n.i % " +
                           std::to_string(kThroughStore));
  }
  // Everything succeeded but the last `queued` jobs; three events per job in all.
  ok =
      ok &&
      Exec(db, "UPDATE jobs SET state = 'succeeded' WHERE id <= (SELECT MAX(id) FROM jobs) - " +
                   std::to_string(queued)) &&
      Exec(db,
           "INSERT INTO job_events (job_id, time_us, kind, message) SELECT id, updated_us, k.kind, "
           "k.message FROM jobs, (SELECT 'placed' AS kind, 'placed on gpu[001-002] (16 GPUs) at "
           "level leaf [alloc gpu001:0xff,gpu002:0xff]' AS message UNION ALL SELECT 'succeeded', "
           "'exit 0') AS k WHERE jobs.state = 'succeeded'") &&
      Exec(db, "COMMIT");
  sqlite3_close(db);
  return ok;
}

struct Timing {
  double start_s = 0, first_list_s = 0;
};

Timing Start(const std::string& dir) {
  Timing t;
  baton::SystemClock clock;
  auto t0 = SteadyClock::now();
  auto cluster = baton::topo::BuildPreset("superpod-h100");
  DryRunOptions dry;
  dry.speedup = 1;
  auto controller = SchedulingController::Create(
      std::move(cluster).value(), {}, std::make_unique<DryRunExecutor>(dry, clock), clock);
  if (!controller.ok()) {
    std::fprintf(stderr, "%s\n", controller.status().ToString().c_str());
    std::exit(1);
  }
  ServerOptions o;
  o.port = 0;
  o.db_path = dir + "/baton.db";
  o.auth_config_path = dir + "/auth.yaml";
  auto server = Server::Create(o, controller->get());
  if (!server.ok()) {
    std::fprintf(stderr, "%s\n", server.status().ToString().c_str());
    std::exit(1);
  }
  std::thread serve([&] { (void)(*server)->Serve(); });
  t.start_s = std::chrono::duration<double>(SteadyClock::now() - t0).count();
  httplib::Client c("127.0.0.1", (*server)->port());
  auto res =
      c.Get("/api/v1/jobs?limit=100", {{"Authorization", "Bearer restart-admin-0123456789"}});
  if (!res || res->status != 200) {
    std::fprintf(stderr, "GET /api/v1/jobs failed\n");
    std::exit(1);
  }
  t.first_list_s = std::chrono::duration<double>(SteadyClock::now() - t0).count();
  (*server)->Shutdown();
  serve.join();
  return t;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<long> sizes = {100000, 1000000};
  long queued = 1000;
  int runs = 3;
  std::string dir = std::filesystem::temp_directory_path().string();
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    bool has_value = i + 1 < argc;
    if (arg == "--jobs" && has_value) {
      sizes.clear();
      std::stringstream list(argv[++i]);
      for (std::string s; std::getline(list, s, ',');) sizes.push_back(std::atol(s.c_str()));
    } else if (arg == "--queued" && has_value) {
      queued = std::atol(argv[++i]);
    } else if (arg == "--runs" && has_value) {
      runs = std::atoi(argv[++i]);
    } else if (arg == "--dir" && has_value) {
      dir = argv[++i];
    } else {
      std::fprintf(stderr, "usage: restart [--jobs N,M] [--queued Q] [--runs R] [--dir DIR]\n");
      return 2;
    }
  }
  for (long jobs : sizes) {
    std::string work = dir + "/restart_" + std::to_string(::getpid()) + "_" + std::to_string(jobs);
    std::filesystem::remove_all(work);
    std::filesystem::create_directories(work);
    std::ofstream(work + "/auth.yaml")
        << "principals:\n  - {name: ops, role: admin, token: restart-admin-0123456789}\n";
    auto b0 = SteadyClock::now();
    if (!Build(work + "/baton.db", jobs, std::min(queued, jobs))) return 1;
    double built = std::chrono::duration<double>(SteadyClock::now() - b0).count();
    std::vector<double> starts, lists;
    for (int r = 0; r < runs; ++r) {
      Timing t = Start(work);
      starts.push_back(t.start_s);
      lists.push_back(t.first_list_s);
    }
    std::printf(
        "%8ld jobs (%ld queued, %.0f MiB database, built in %.1f s): restart median %.2f s to "
        "listening with the queue resubmitted, %.2f s to the first job list (%d runs)\n",
        jobs, std::min(queued, jobs),
        static_cast<double>(std::filesystem::file_size(work + "/baton.db")) / (1 << 20), built,
        Median(starts), Median(lists), runs);
    std::filesystem::remove_all(work);
  }
  return 0;
}
