// churn: the daemon under a deep queue and an operator's churn, checked from its own events.
//
// An in-process daemon (scheduling loop over a topology preset, dry-run executor) gets --jobs
// submissions over loopback HTTP while a churn thread, for --seconds, drains, cordons and resumes
// random nodes, reports XID 79 (GPU fell off the bus: the node is down) on others and cancels
// random jobs. A poller reads GET /api/v1/nodes every 50 ms. At the end every job's events are
// read back over HTTP and each placement is checked against what the node was when placed:
//  * a bind places the job on every node of its allocation;
//  * a node replacement ("node X replaced by Y") places it on Y;
//  * a resize places it on the nodes its allocation did not have before.
// A placement is counted against a node when its event time (the store's clock, milliseconds,
// truncated) is strictly after the node's drain or cordon was acknowledged (the 200 of the POST)
// and before the resume was sent, or falls after the end of the first poll that saw the node down
// and before the start of the last one, with no resume sent in between. Both tests are
// conservative: what they flag certainly happened.
//
//   churn [--jobs 30000] [--seconds 60] [--scheduler superpod-h100] [--seed 1] [--dir /tmp]
// Exits 1 when any placement landed on a node that was draining, cordoned or down.
#include <httplib.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <exception>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "server/executors/dry_run_executor.h"
#include "server/scheduling_controller.h"
#include "server/server.h"
#include "topology/builders/fabrics.h"

namespace {

using nlohmann::json;
using SystemClock = std::chrono::system_clock;

std::int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             SystemClock::now().time_since_epoch())
      .count();
}

// "2026-12-03T20:55:51.123Z" (the API's event time) -> milliseconds since the epoch; -1 if not.
std::int64_t ParseEventMs(const std::string& s) {
  std::tm tm{};
  int millis = 0;
  if (std::sscanf(s.c_str(), "%d-%d-%dT%d:%d:%d.%dZ", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
                  &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &millis) != 7) {
    return -1;
  }
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  return static_cast<std::int64_t>(timegm(&tm)) * 1000 + millis;
}

// The node names of an event's "[alloc n1:0xff,n2:0xf]" tag.
std::set<std::string> AllocNodes(const std::string& message) {
  std::set<std::string> nodes;
  std::size_t open = message.rfind("[alloc ");
  std::size_t close = message.rfind(']');
  if (open == std::string::npos || close == std::string::npos || close < open) return nodes;
  std::string body = message.substr(open + 7, close - open - 7);
  std::size_t start = 0;
  while (start < body.size()) {
    std::size_t comma = body.find(',', start);
    std::string item =
        body.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    nodes.insert(item.substr(0, item.find(':')));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return nodes;
}

struct Interval {
  std::int64_t from_ms = 0, to_ms = INT64_MAX;
  std::string why;  // "drain", "cordon", "down"
};

// What each node was, as the churn and the poller saw it.
struct NodeTimeline {
  std::mutex mu;
  std::map<std::string, std::vector<Interval>> admin;   // acknowledged .. resume sent
  std::map<std::string, std::vector<Interval>> health;  // first poll down .. last poll down
  std::map<std::string, bool> down_now;
  std::map<std::string, std::vector<std::int64_t>> resumes;  // when each resume was sent

  void Admin(const std::string& node, const std::string& why, std::int64_t acked_ms) {
    std::lock_guard lock(mu);
    auto& v = admin[node];
    if (!v.empty() && v.back().to_ms == INT64_MAX) return;  // already unschedulable
    v.push_back({acked_ms, INT64_MAX, why});
  }
  void Resume(const std::string& node, std::int64_t sent_ms) {
    std::lock_guard lock(mu);
    auto& v = admin[node];
    if (!v.empty() && v.back().to_ms == INT64_MAX) v.back().to_ms = sent_ms;
    resumes[node].push_back(sent_ms);
  }
  // One poll's answer: true at some instant in [start_ms, end_ms]. A node is certainly down from
  // the end of the first poll that saw it down to the start of the last one, unless a resume was
  // sent in between.
  void Poll(const std::string& node, bool down, std::int64_t start_ms, std::int64_t end_ms) {
    std::lock_guard lock(mu);
    auto& v = health[node];
    if (down) {
      if (down_now[node]) {
        v.back().to_ms = start_ms;
      } else {
        v.push_back({end_ms, INT64_MIN, "down"});
      }
    }
    down_now[node] = down;
  }
  static std::string Describe(const Interval& i) {
    return i.why + " (" + std::to_string(i.from_ms % 100000) + " .. " +
           (i.to_ms == INT64_MAX ? std::string("end") : std::to_string(i.to_ms % 100000)) + ")";
  }
  // Why `node` was unschedulable at `ms` ("drain (from .. to)", ms mod 100 s), or "".
  std::string At(const std::string& node, std::int64_t ms) {
    std::lock_guard lock(mu);
    for (const Interval& i : admin[node]) {
      if (ms > i.from_ms && ms < i.to_ms) return Describe(i);
    }
    for (const Interval& i : health[node]) {
      if (ms <= i.from_ms || ms >= i.to_ms) continue;
      const auto& r = resumes[node];
      if (std::none_of(r.begin(), r.end(),
                       [&](std::int64_t t) { return t >= i.from_ms && t <= ms; })) {
        return Describe(i);
      }
    }
    return "";
  }
};

std::unique_ptr<httplib::Client> Connect(int port) {
  auto c = std::make_unique<httplib::Client>("127.0.0.1", port);
  c->set_keep_alive(true);
  c->set_read_timeout(30);
  return c;
}

int Run(int argc, char** argv) {
  int jobs = 30000, seed = 1;
  double seconds = 60;
  std::string preset = "superpod-h100";
  std::string dir = std::filesystem::temp_directory_path().string();
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    bool has_value = i + 1 < argc;
    if (arg == "--jobs" && has_value) {
      jobs = std::atoi(argv[++i]);
    } else if (arg == "--seconds" && has_value) {
      seconds = std::atof(argv[++i]);
    } else if (arg == "--scheduler" && has_value) {
      preset = argv[++i];
    } else if (arg == "--seed" && has_value) {
      seed = std::atoi(argv[++i]);
    } else if (arg == "--dir" && has_value) {
      dir = argv[++i];
    } else {
      std::fprintf(stderr,
                   "usage: churn [--jobs N] [--seconds T] [--scheduler PRESET] [--seed S] "
                   "[--dir DIR]\n");
      return 2;
    }
  }

  baton::SystemClock clock;
  auto cluster = baton::topo::BuildPreset(preset);
  if (!cluster.ok()) {
    std::fprintf(stderr, "%s\n", cluster.status().ToString().c_str());
    return 2;
  }
  baton::server::DryRunOptions dry;
  dry.speedup = 600;  // a job of 600-3600 simulated seconds runs 1-6 s
  auto controller = baton::server::SchedulingController::Create(
      std::move(cluster).value(), {}, std::make_unique<baton::server::DryRunExecutor>(dry, clock),
      clock);
  if (!controller.ok()) {
    std::fprintf(stderr, "%s\n", controller.status().ToString().c_str());
    return 1;
  }
  const std::string token = "churn-admin-token-0123456789";
  const std::string work = dir + "/churn_" + std::to_string(::getpid());
  std::filesystem::create_directories(work);
  std::ofstream(work + "/auth.yaml")
      << "principals:\n  - {name: ops, role: admin, token: " << token << "}\n";
  baton::server::ServerOptions o;
  o.port = 0;
  o.db_path = work + "/baton.db";
  o.auth_config_path = work + "/auth.yaml";
  o.worker_threads = 16;
  auto server = baton::server::Server::Create(o, controller->get());
  if (!server.ok()) {
    std::fprintf(stderr, "%s\n", server.status().ToString().c_str());
    return 1;
  }
  const int port = (*server)->port();
  std::thread serve_thread([&] { (void)(*server)->Serve(); });
  const httplib::Headers auth{{"Authorization", "Bearer " + token}};

  std::vector<std::string> nodes;
  {
    auto res = Connect(port)->Get("/api/v1/nodes", auth);
    if (!res || res->status != 200) {
      std::fprintf(stderr, "GET /api/v1/nodes failed\n");
      return 1;
    }
    json list = json::parse(res->body);
    for (const json& n : list["nodes"]) nodes.push_back(n["node"]);
  }
  std::printf("churn: %d jobs, %.0f s of churn, %s (%zu nodes), dry-run executor, seed %d\n", jobs,
              seconds, preset.c_str(), nodes.size(), seed);

  NodeTimeline timeline;
  std::mutex ids_mu;
  std::vector<std::int64_t> ids;
  std::atomic<bool> stop{false};
  std::atomic<int> submit_errors{0};

  // Submitters: four keep-alive clients share the jobs.
  std::vector<std::thread> submitters;
  submitters.reserve(4);
  for (int t = 0; t < 4; ++t) {
    submitters.emplace_back([&, t] {
      std::mt19937 rng(seed * 100 + t);
      auto c = Connect(port);
      for (int i = t; i < jobs; i += 4) {
        int gpus = 8 << (rng() % 4);  // 8, 16, 32 or 64
        json spec = {{"name", "churn"},
                     {"gpus", gpus},
                     {"gpus_per_node", 8},
                     {"priority", static_cast<int>(rng() % 10)},
                     {"estimated_runtime_s", 600 + static_cast<int>(rng() % 3000)}};
        auto res = c->Post("/api/v1/jobs", auth, spec.dump(), "application/json");
        if (!res || res->status != 201) {
          if (submit_errors++ == 0) {
            std::fprintf(stderr, "submit: %s\n",
                         res ? (std::to_string(res->status) + " " + res->body).c_str()
                             : httplib::to_string(res.error()).c_str());
          }
          continue;
        }
        std::lock_guard lock(ids_mu);
        ids.push_back(json::parse(res->body)["id"].get<std::int64_t>());
      }
    });
  }

  std::thread poller([&] {
    auto c = Connect(port);
    while (!stop) {
      std::int64_t start = NowMs();
      auto res = c->Get("/api/v1/nodes", auth);
      std::int64_t end = NowMs();
      if (res && res->status == 200) {
        json list = json::parse(res->body);
        for (const json& n : list["nodes"]) {
          timeline.Poll(n["node"], n["health"] == "down", start, end);
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  });

  std::map<std::string, int> actions;
  std::thread churner([&] {
    std::mt19937 rng(seed);
    auto c = Connect(port);
    auto deadline = SystemClock::now() + std::chrono::duration<double>(seconds);
    std::set<std::string> out;  // nodes this thread took out of service
    while (SystemClock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20 + rng() % 60));
      const std::string& node = nodes[rng() % nodes.size()];
      int roll = static_cast<int>(rng() % 100);
      if (roll < 30 || (roll < 45 && out.size() < nodes.size() / 4)) {
        const char* verb = roll < 30 ? "drain" : "cordon";
        auto res = c->Post("/api/v1/nodes/" + node + ":" + verb, auth, "", "application/json");
        if (res && res->status == 200) {
          timeline.Admin(node, verb, NowMs());
          out.insert(node);
          ++actions[verb];
        }
      } else if (roll < 60) {
        auto res = c->Post("/api/v1/nodes/" + node + "/telemetry", auth,
                           R"({"DCGM_FI_DEV_XID_ERRORS": 79})", "application/json");
        if (res && res->status == 202) {
          out.insert(node);
          ++actions["xid79"];
        }
      } else if (roll < 90 && !out.empty()) {
        auto it = out.begin();
        std::advance(it, rng() % out.size());
        std::string back = *it;
        std::int64_t sent = NowMs();
        auto res = c->Post("/api/v1/nodes/" + back + ":uncordon", auth, "", "application/json");
        if (res && res->status == 200) {
          timeline.Resume(back, sent);
          out.erase(back);
          ++actions["resume"];
        }
      } else {
        std::int64_t id = 0;
        {
          std::lock_guard lock(ids_mu);
          if (!ids.empty()) id = ids[rng() % ids.size()];
        }
        if (id == 0) continue;
        auto res =
            c->Post("/api/v1/jobs/" + std::to_string(id) + ":cancel", auth, "", "application/json");
        if (res && (res->status == 200 || res->status == 202)) ++actions["cancel"];
      }
    }
  });

  for (auto& t : submitters) t.join();
  std::printf("submitted %zu jobs (%d refused)\n", ids.size(), submit_errors.load());
  churner.join();
  // Let the last changes settle into placements, then stop observing.
  std::this_thread::sleep_for(std::chrono::seconds(2));
  stop = true;
  poller.join();
  std::printf("churn:");
  for (const auto& [what, n] : actions) std::printf(" %d %s", n, what.c_str());
  std::printf("\n");

  // Read every job's events back and check each placement.
  struct Count {
    int checked = 0, flagged = 0;
  };
  std::map<std::string, Count> counts;  // by kind of placement
  std::map<std::string, int> flagged_why;
  std::vector<std::string> examples;
  std::mutex count_mu;
  std::atomic<std::size_t> next{0};
  std::vector<std::thread> readers;
  readers.reserve(4);
  for (int t = 0; t < 4; ++t) {
    readers.emplace_back([&] {
      auto c = Connect(port);
      for (std::size_t i = next++; i < ids.size(); i = next++) {
        auto res = c->Get("/api/v1/jobs/" + std::to_string(ids[i]) + "/events", auth);
        if (!res || res->status != 200) continue;
        std::set<std::string> before;
        json events = json::parse(res->body);
        for (const json& e : events["events"]) {
          const std::string kind = e["kind"], message = e["message"];
          if (kind != "placed" && kind != "resized") continue;
          std::set<std::string> alloc = AllocNodes(message);
          std::set<std::string> placed_on;
          std::string what = kind == "resized" ? "resize" : "bind";
          if (kind == "resized") {
            std::set_difference(alloc.begin(), alloc.end(), before.begin(), before.end(),
                                std::inserter(placed_on, placed_on.end()));
          } else if (message.rfind("node ", 0) == 0) {
            what = "replacement";
            std::size_t by = message.find(" replaced by ");
            std::size_t end = message.find(';', by);
            placed_on.insert(message.substr(by + 13, end - by - 13));
          } else {
            placed_on = alloc;
          }
          before = alloc;
          std::int64_t ms = ParseEventMs(e["time"]);
          std::lock_guard lock(count_mu);
          ++counts[what].checked;
          for (const std::string& n : placed_on) {
            std::string why = timeline.At(n, ms);
            if (why.empty()) continue;
            ++counts[what].flagged;
            ++flagged_why[why.substr(0, why.find(' '))];
            if (examples.size() < 5) {
              std::string example = "job " + std::to_string(ids[i]);
              example += " " + what;
              example += " on " + n;
              example += " at " + e["time"].get<std::string>();
              example += " (" + std::to_string(ms % 100000);
              example += ") while " + why;
              examples.push_back(std::move(example));
            }
            break;
          }
        }
      }
    });
  }
  for (auto& t : readers) t.join();
  int flagged = 0;
  for (const auto& [what, c] : counts) {
    std::printf("%-12s %7d checked, %d on a draining, cordoned or down node\n", what.c_str(),
                c.checked, c.flagged);
    flagged += c.flagged;
  }
  for (const auto& [why, n] : flagged_why) std::printf("  flagged while %s: %d\n", why.c_str(), n);
  for (const std::string& e : examples) std::printf("  e.g. %s\n", e.c_str());
  std::printf("%s: %d placements on unschedulable nodes\n", flagged == 0 ? "PASS" : "FAIL",
              flagged);

  (*server)->Shutdown();
  serve_thread.join();
  server->reset();
  std::filesystem::remove_all(work);
  return flagged == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return Run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "churn: %s\n", e.what());
    return 1;
  }
}
