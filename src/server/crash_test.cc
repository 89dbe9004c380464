// Crash safety of the daemon: a real baton_serve_test_daemon child is killed with SIGKILL while
// client threads submit; after each restart every acknowledged submission must be there, with
// the id it was acknowledged with, and no idempotency key may name two jobs. Every daemon the test
// starts is killed (by PID) when its guard goes out of scope, pass or fail.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <thread>

#include "server/testing/child_daemon.h"
#include "server/testing/rank_log.h"

#ifndef BATON_SERVE_TEST_DAEMON
#error "BATON_SERVE_TEST_DAEMON must name the daemon executable"
#endif

namespace baton::server {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using namespace std::chrono_literals;

constexpr const char* kToken = "Bearer crash-admin-token-0123456789";
constexpr int kRounds = 20;
constexpr int kClients = 4;

httplib::Headers Headers(const std::string& key = "") {
  httplib::Headers h{{"Authorization", kToken}};
  if (!key.empty()) h.emplace("Idempotency-Key", key);
  return h;
}

const char* kSpec = R"({"name": "crash", "gpus": 8})";

// key → id of every job in the store; fails the test on a key that names two jobs.
std::map<std::string, std::int64_t> AllJobs(int port, std::int64_t* total) {
  httplib::Client c("127.0.0.1", port);
  c.set_read_timeout(10);
  std::map<std::string, std::int64_t> out;
  *total = 0;
  std::string cursor;
  while (true) {
    std::string path = "/api/v1/jobs?limit=1000" + (cursor.empty() ? "" : "&cursor=" + cursor);
    auto res = c.Get(path.c_str(), Headers());
    EXPECT_TRUE(res && res->status == 200);
    if (!res || res->status != 200) return out;
    json body = json::parse(res->body);
    for (const auto& j : body["jobs"]) {
      ++*total;
      std::string key = j.value("idempotency_key", "");
      EXPECT_TRUE(out.emplace(key, j["id"].get<std::int64_t>()).second)
          << "idempotency key " << key << " names two jobs";
    }
    if (body["next_cursor"].is_null()) return out;
    cursor = body["next_cursor"];
  }
}

TEST(ServerCrashTest, AcknowledgedSubmissionsSurviveKill9) {
  fs::path dir = fs::temp_directory_path() / ("baton_crash_test_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::ofstream(dir / "auth.yaml")
      << "principals:\n  - {name: ops, role: admin, token: crash-admin-token-0123456789}\n";

  std::map<std::string, std::int64_t> acked;  // every acknowledged key, all rounds
  std::set<std::string> in_doubt;             // sent, but no answer before the kill
  for (int round = 0; round <= kRounds; ++round) {
    testing::ChildDaemon daemon(BATON_SERVE_TEST_DAEMON, dir,
                                dir / ("daemon-" + std::to_string(round) + ".log"));
    int port = daemon.WaitForPort();
    ASSERT_GT(port, 0) << "daemon did not start in round " << round << ":\n" << daemon.Log();
    if (round > 0) {
      EXPECT_NE(daemon.Log().find("recovered after an unclean shutdown"), std::string::npos)
          << daemon.Log();
    }

    // Everything acknowledged before the kill is there, with the acknowledged id.
    std::int64_t total = 0;
    std::map<std::string, std::int64_t> stored = AllJobs(port, &total);
    for (const auto& [key, id] : acked) {
      auto it = stored.find(key);
      ASSERT_TRUE(it != stored.end()) << "round " << round << ": acknowledged " << key << " lost";
      EXPECT_EQ(it->second, id) << key;
    }
    // Submissions in doubt may or may not have been stored; retrying them with their key
    // yields exactly one job each.
    httplib::Client retry("127.0.0.1", port);
    for (const std::string& key : in_doubt) {
      auto res = retry.Post("/api/v1/jobs", Headers(key), kSpec, "application/json");
      ASSERT_TRUE(res) << key;
      ASSERT_TRUE(res->status == 200 || res->status == 201) << res->status << " " << res->body;
      acked[key] = json::parse(res->body)["id"];
    }
    in_doubt.clear();
    stored = AllJobs(port, &total);
    EXPECT_EQ(static_cast<std::size_t>(total), acked.size()) << "round " << round;

    if (round == kRounds) {
      // The last daemon stops gracefully: exit 0 and a cleanly closed database.
      int status = daemon.Kill(SIGTERM);
      EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status << daemon.Log();
      EXPECT_FALSE(fs::exists(dir / "baton.db-wal"));
      break;
    }

    std::mutex mu;
    std::atomic<bool> stop{false};
    std::vector<std::thread> clients;
    clients.reserve(kClients);
    for (int t = 0; t < kClients; ++t) {
      clients.emplace_back([&, t] {
        httplib::Client c("127.0.0.1", port);
        c.set_read_timeout(5);
        for (int i = 0; !stop; ++i) {
          std::string key = std::to_string(round);
          key.append("-").append(std::to_string(t)).append("-").append(std::to_string(i));
          auto res = c.Post("/api/v1/jobs", Headers(key), kSpec, "application/json");
          std::lock_guard lock(mu);
          if (res && (res->status == 201 || res->status == 200)) {
            acked[key] = json::parse(res->body)["id"];
          } else {
            in_doubt.insert(key);  // the daemon died under this request
            return;
          }
        }
      });
    }
    // Kill at a different moment each round (30..130 ms into the load).
    std::this_thread::sleep_for(std::chrono::milliseconds(30 + (round * 37) % 100));
    daemon.Kill(SIGKILL);
    stop = true;
    for (auto& c : clients) c.join();
  }
  EXPECT_GT(acked.size(), static_cast<std::size_t>(kRounds));  // the load did submit
  // The figure the README and notes quote (every check above passed for it to be printed).
  if (!::testing::Test::HasFailure()) {
    std::printf("crash test: %d kill -9 rounds, %zu acknowledged jobs, 0 lost, 0 duplicated\n",
                kRounds, acked.size());
  }
  fs::remove_all(dir);
}

// The same kill -9 cycles with the local executor and jobs that really run (two-rank shell jobs
// that log a heartbeat every 50 ms with their job, attempt, rank and pid): nothing acknowledged
// is lost, no job's command completes twice, and no rank of a job ever runs beside another copy
// of itself, counted from the ranks' own lines, not from the API.
TEST(ServerCrashTest, LocalRanksNeverRunTwiceAcrossKill9) {
  fs::path dir = fs::temp_directory_path() / ("baton_crash_local_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::ofstream(dir / "auth.yaml")
      << "principals:\n  - {name: ops, role: admin, token: crash-admin-token-0123456789}\n";
  const std::string ranks_log = (dir / "ranks.log").string();
  json spec = {{"name", "ranks"}, {"gpus", 2}, {"gpus_per_node", 2}};
  spec["command"] = testing::RankLogCommand(ranks_log, 8);
  const std::string body = spec.dump();
  const std::vector<std::string> args = {
      "--topology", std::string(BATON_SOURCE_DIR) + "/tests/realjob/cluster.yaml",
      "--executor", "local",
      "--log-dir",  (dir / "logs").string()};

  std::map<std::string, std::int64_t> acked;
  std::set<std::string> in_doubt;
  for (int round = 0; round <= kRounds; ++round) {
    testing::ChildDaemon daemon(BATON_SERVE_TEST_DAEMON, dir,
                                dir / ("daemon-" + std::to_string(round) + ".log"), args);
    int port = daemon.WaitForPort();
    ASSERT_GT(port, 0) << "daemon did not start in round " << round << ":\n" << daemon.Log();
    std::int64_t total = 0;
    std::map<std::string, std::int64_t> stored = AllJobs(port, &total);
    for (const auto& [key, id] : acked) {
      ASSERT_TRUE(stored.contains(key)) << "round " << round << ": acknowledged " << key << " lost";
    }
    httplib::Client retry("127.0.0.1", port);
    for (const std::string& key : in_doubt) {
      auto res = retry.Post("/api/v1/jobs", Headers(key), body, "application/json");
      ASSERT_TRUE(res && (res->status == 200 || res->status == 201)) << key;
      acked[key] = json::parse(res->body)["id"];
    }
    in_doubt.clear();
    if (round == kRounds) {
      // Every job runs to its end under the last daemon.
      std::map<std::string, int> states;
      for (int i = 0; i < 1200; ++i) {  // bounded: 2 min
        states.clear();
        httplib::Client c("127.0.0.1", port);
        std::string cursor;
        while (true) {
          auto res = c.Get(
              ("/api/v1/jobs?limit=1000" + (cursor.empty() ? "" : "&cursor=" + cursor)).c_str(),
              Headers());
          ASSERT_TRUE(res && res->status == 200);
          json page = json::parse(res->body);
          for (const auto& j : page["jobs"]) ++states[j["state"].get<std::string>()];
          if (page["next_cursor"].is_null()) break;
          cursor = page["next_cursor"];
        }
        if (states["succeeded"] == static_cast<int>(acked.size())) break;
        std::this_thread::sleep_for(100ms);
      }
      EXPECT_EQ(states["succeeded"], static_cast<int>(acked.size()))
          << "queued " << states["queued"] << ", running " << states["running"] << ", failed "
          << states["failed"];
      daemon.Kill(SIGTERM);
      break;
    }
    std::mutex mu;
    std::vector<std::thread> clients;
    clients.reserve(2);
    for (int t = 0; t < 2; ++t) {
      clients.emplace_back([&, t] {
        httplib::Client c("127.0.0.1", port);
        c.set_read_timeout(5);
        for (int i = 0; i < 4; ++i) {
          std::string key =
              std::to_string(round) + "-" + std::to_string(t) + "-" + std::to_string(i);
          auto res = c.Post("/api/v1/jobs", Headers(key), body, "application/json");
          std::lock_guard lock(mu);
          if (res && (res->status == 201 || res->status == 200)) {
            acked[key] = json::parse(res->body)["id"];
          } else {
            in_doubt.insert(key);
            return;
          }
          std::this_thread::sleep_for(std::chrono::milliseconds(60));
        }
      });
    }
    // Kill while ranks run, at a different moment each round (0.3 to 1.2 s in).
    std::this_thread::sleep_for(std::chrono::milliseconds(300 + (round * 137) % 900));
    daemon.Kill(SIGKILL);
    for (auto& c : clients) c.join();
  }

  // What ran, from the ranks' own lines.
  const testing::RankLogReport ran = testing::ReadRankLog(ranks_log, 2);
  for (const std::string& o : ran.overlaps) ADD_FAILURE() << o;
  for (const std::string& t : ran.completed_twice) ADD_FAILURE() << t;
  EXPECT_EQ(ran.jobs.size(), acked.size()) << "every acknowledged job ran";
  const int runs_total = ran.rank_processes;
  if (!::testing::Test::HasFailure()) {
    std::printf(
        "local crash test: %d kill -9 rounds, %zu acknowledged jobs, %d rank processes, 0 lost, "
        "0 completed twice, 0 ranks ever running twice at once\n",
        kRounds, acked.size(), runs_total);
    fs::remove_all(dir);
  } else {
    std::printf("kept %s for a look\n", dir.c_str());
  }
}

}  // namespace
}  // namespace baton::server
