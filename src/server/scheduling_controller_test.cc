// The daemon with its scheduler, over a real socket: jobs go queued -> placed -> finished with
// the dry-run executor, a running job is cancelled, a kill -9 of a daemon child is followed by a
// restart that adopts the running job and still schedules the queued ones, a DCGM scrape takes a
// node out of scheduling, and the local executor starts ranks with their environment. Every daemon
// child is killed by PID when its guard goes out of scope, pass or fail.
#include "server/scheduling_controller.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>
#include <thread>

#include "sched/history/history.h"
#include "server/executors/dry_run_executor.h"
#include "server/executors/local_executor.h"
#include "server/server.h"
#include "server/store/sqlite_job_store.h"
#include "server/testing/child_daemon.h"
#include "server/testing/wait_for.h"
#include "topology/builders/fabrics.h"
#include "topology/io/cluster_yaml.h"

#ifndef BATON_SERVE_TEST_DAEMON
#error "BATON_SERVE_TEST_DAEMON must name the daemon executable"
#endif

namespace baton::server {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using namespace std::chrono_literals;

constexpr const char* kToken = "Bearer ctl-admin-token-0123456789";

fs::path TempDir(const std::string& name) {
  fs::path dir =
      fs::temp_directory_path() / ("baton-ctl-" + name + "-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::ofstream(dir / "auth.yaml")
      << "principals:\n  - {name: ops, role: admin, token: ctl-admin-token-0123456789}\n";
  return dir;
}

using testing::WaitFor;

class Api {
 public:
  explicit Api(int port) : client_("127.0.0.1", port) { client_.set_read_timeout(10); }
  json Get(const std::string& path) {
    auto res = client_.Get(path.c_str(), {{"Authorization", kToken}});
    if (!res) return json{{"http_error", httplib::to_string(res.error())}};
    json body = json::parse(res->body, nullptr, false);
    body["http_status"] = res->status;
    return body;
  }
  json Send(const std::string& method, const std::string& path, const std::string& body,
            const std::string& type = "application/json") {
    httplib::Headers h{{"Authorization", kToken}};
    auto res = method == "DELETE" ? client_.Delete(path.c_str(), h)
                                  : client_.Post(path.c_str(), h, body, type.c_str());
    if (!res) return json{{"http_error", httplib::to_string(res.error())}};
    json out = json::parse(res->body, nullptr, false);
    out["http_status"] = res->status;
    return out;
  }
  std::int64_t Submit(const std::string& spec) {
    json r = Send("POST", "/api/v1/jobs", spec);
    EXPECT_EQ(r["http_status"], 201) << r.dump();
    return r.value("id", std::int64_t{-1});
  }
  std::string State(std::int64_t id) {
    return Get("/api/v1/jobs/" + std::to_string(id)).value("state", "?");
  }
  std::vector<std::string> EventKinds(std::int64_t id) {
    std::vector<std::string> out;
    json body = Get("/api/v1/jobs/" + std::to_string(id) + "/events");
    for (const auto& e : body["events"]) {
      out.push_back(e["kind"]);
    }
    return out;
  }

 private:
  httplib::Client client_;
};

// A daemon in this process: Server + SchedulingController over the superpod-h100 preset, on the
// system clock or on `clock` (not owned; a ManualClock makes the scheduler's times exact).
class InProcess {
 public:
  InProcess(const fs::path& dir, std::unique_ptr<Executor> executor,
            SchedulingControllerOptions controller_options = {},
            std::optional<topo::Cluster> given = std::nullopt, const Clock* clock = nullptr)
      : clock_(clock ? *clock : system_clock_) {
    auto cluster =
        given ? Result<topo::Cluster>(std::move(*given)) : topo::BuildPreset("superpod-h100");
    EXPECT_TRUE(cluster.ok());
    auto c = SchedulingController::Create(std::move(cluster).value(), std::move(controller_options),
                                          std::move(executor), clock_);
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    controller_ = std::move(c).value();
    ServerOptions options;
    options.port = 0;
    options.db_path = (dir / "baton.db").string();
    options.auth_config_path = (dir / "auth.yaml").string();
    options.worker_threads = 4;
    auto s = Server::Create(options, controller_.get());
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    server_ = std::move(s).value();
    thread_ = std::thread([this] { EXPECT_TRUE(server_->Serve().ok()); });
  }
  ~InProcess() {
    server_->Shutdown();
    thread_.join();
    server_.reset();
  }
  int port() const { return server_->port(); }
  const Clock& clock() const { return clock_; }

 private:
  SystemClock system_clock_;
  const Clock& clock_;
  std::unique_ptr<SchedulingController> controller_;
  std::unique_ptr<Server> server_;
  std::thread thread_;
};

std::unique_ptr<Executor> DryRun(double speedup, const Clock& clock) {
  DryRunOptions o;
  o.speedup = speedup;
  return std::make_unique<DryRunExecutor>(o, clock);
}

TEST(ControllerTest, SubmittedJobIsPlacedThenFinishes) {
  fs::path dir = TempDir("finish");
  SystemClock clock;
  InProcess d(dir, DryRun(100, clock));
  Api api(d.port());
  // 100 simulated seconds at x100: one real second.
  std::int64_t id = api.Submit(R"({"name": "llm", "gpus": 64, "estimated_runtime_s": 100,
                                   "topology": {"preferred": "leaf"}})");
  json running;
  ASSERT_TRUE(WaitFor([&] {
    running = api.Get("/api/v1/jobs/" + std::to_string(id));
    return running.value("state", "") == "running";
  })) << running.dump();
  ASSERT_TRUE(running.contains("placement")) << running.dump();
  EXPECT_EQ(running["placement"]["gpus"], 64);
  EXPECT_EQ(running["placement"]["nodes"].size(), 8u);
  ASSERT_TRUE(WaitFor([&] { return api.State(id) == "succeeded"; })) << api.State(id);
  std::vector<std::string> kinds = api.EventKinds(id);
  EXPECT_EQ(kinds, (std::vector<std::string>{"queued", "placed", "finished"}));
  json events = api.Get("/api/v1/jobs/" + std::to_string(id) + "/events");
  std::string placed = events["events"][1]["message"];
  EXPECT_NE(placed.find("at level leaf because"), std::string::npos) << placed;
  // The job's state is stored before the controller's next cycle republishes the GPU gauges.
  std::string metrics;
  EXPECT_TRUE(WaitFor([&] {
    metrics =
        httplib::Client("127.0.0.1", d.port()).Get("/metrics", {{"Authorization", kToken}})->body;
    return metrics.find("baton_gpus{state=\"free\"} 1024") != std::string::npos;
  })) << metrics;
  EXPECT_NE(metrics.find("baton_scheduler_cycle_duration_seconds_count"), std::string::npos);
  EXPECT_NE(metrics.find("baton_scheduler_placements_total{level=\"leaf\"} 1"), std::string::npos)
      << metrics;
}

// Issue 15 (replay): every cycle's inputs and placements are in the store's history, after a run
// line with the cluster; the history reads back and holds the job's submission and placement.
TEST(ControllerTest, EveryCycleIsRecordedInTheHistory) {
  fs::path dir = TempDir("history");
  SystemClock clock;
  InProcess d(dir, DryRun(100, clock));
  Api api(d.port());
  std::int64_t id = api.Submit(R"({"name": "llm", "gpus": 16, "estimated_runtime_s": 50})");
  ASSERT_TRUE(WaitFor([&] { return api.State(id) == "succeeded"; })) << api.State(id);
  // The job reads succeeded as soon as the executor reports it; the cycle that consumes the
  // finish event is recorded after, so read the history until it holds that cycle.
  int runs = 0, submits = 0, finishes = 0;
  std::optional<sched::history::Placed> placed;
  std::string error;
  auto scan = [&] {
    runs = submits = finishes = 0;
    placed.reset();
    auto lines = SqliteJobStore::ReadHistory((dir / "baton.db").string(), 0, 10000);
    if (!lines.ok()) return error = lines.status().ToString(), false;
    std::string text = sched::history::HeaderLine() + "\n";
    for (const HistoryLine& l : *lines) text += l.text + "\n";
    std::istringstream in(text);
    sched::history::Reader reader(in, "history");
    while (true) {
      auto item = reader.Next();
      if (!item.ok()) return error = item.status().ToString(), false;
      if (!item->has_value()) break;
      if (std::holds_alternative<sched::history::Reader::RunStart>(**item)) {
        ++runs;
        continue;
      }
      const auto& c = std::get<sched::history::Reader::CycleRead>(**item).cycle;
      for (const sched::Event& e : c.events) {
        submits += e.kind == sched::Event::Kind::kSubmit && e.job.gpus == 16;
        finishes += e.kind == sched::Event::Kind::kFinish;
      }
      if (!c.binds.empty()) placed = c.binds.front();
    }
    return finishes > 0;
  };
  ASSERT_TRUE(WaitFor(scan)) << error;
  EXPECT_EQ(runs, 1);
  EXPECT_EQ(submits, 1);
  EXPECT_EQ(finishes, 1);
  ASSERT_TRUE(placed.has_value());
  EXPECT_EQ(placed->job.value(), static_cast<std::uint64_t>(id));
  EXPECT_EQ(placed->placement.gpus(), 16);
}

TEST(ControllerTest, CancelStopsARunningJobAndFreesItsGpus) {
  fs::path dir = TempDir("cancel");
  SystemClock clock;
  InProcess d(dir, DryRun(1, clock));
  Api api(d.port());
  std::int64_t id = api.Submit(
      R"({"name": "long", "gpus": 16, "estimated_runtime_s": 3600, "grace_period_s": 0})");
  ASSERT_TRUE(WaitFor([&] { return api.State(id) == "running"; }));
  json r = api.Send("DELETE", "/api/v1/jobs/" + std::to_string(id), "");
  EXPECT_EQ(r["http_status"], 202) << r.dump();
  ASSERT_TRUE(WaitFor([&] { return api.State(id) == "cancelled"; })) << api.State(id);
  EXPECT_EQ(api.EventKinds(id),
            (std::vector<std::string>{"queued", "placed", "cancel_requested", "cancelled"}));
  ASSERT_TRUE(
      WaitFor([&] { return api.Get("/api/v1/topology").value("gpus_allocated", -1) == 0; }));
}

// Issue 16 item 2: queued jobs carry the scheduler's forecast. A fills the cluster for an hour;
// B (512 GPUs) and C (8 GPUs, no runtime estimate) both start when A ends by its estimate.
TEST(ControllerTest, QueuedJobsShowPositionEstimatedStartAndWaitingKind) {
  fs::path dir = TempDir("forecast");
  SystemClock clock;
  InProcess d(dir, DryRun(1, clock));
  Api api(d.port());
  std::int64_t a = api.Submit(
      R"({"name": "a", "gpus": 1024, "estimated_runtime_s": 3600, "grace_period_s": 0})");
  ASSERT_TRUE(WaitFor([&] { return api.State(a) == "running"; }));
  json running = api.Get("/api/v1/jobs/" + std::to_string(a));
  EXPECT_FALSE(running.contains("queue_position")) << running.dump();
  std::int64_t b = api.Submit(R"({"name": "b", "gpus": 512, "estimated_runtime_s": 100})");
  std::int64_t c = api.Submit(R"({"name": "c", "gpus": 8})");
  json jb, jc;
  ASSERT_TRUE(WaitFor([&] {
    jb = api.Get("/api/v1/jobs/" + std::to_string(b));
    jc = api.Get("/api/v1/jobs/" + std::to_string(c));
    return jb.contains("estimated_start") && jc.contains("estimated_start");
  })) << jb.dump()
      << jc.dump();
  EXPECT_EQ(jb["queue_position"], 1);
  EXPECT_EQ(jc["queue_position"], 2);
  EXPECT_EQ(jb["waiting_kind"], "capacity");
  EXPECT_EQ(jc["waiting_kind"], "capacity");
  EXPECT_EQ(jb["estimated_start"], jc["estimated_start"]);
  std::string start = jb["estimated_start"];
  EXPECT_EQ(start.back(), 'Z') << start;
  // The same fields in the list.
  json list = api.Get("/api/v1/jobs?state=queued");
  ASSERT_EQ(list["jobs"].size(), 2u) << list.dump();
  for (const json& j : list["jobs"]) EXPECT_TRUE(j.contains("waiting_kind")) << j.dump();

  // Issue 17 item 2: the what-if for a job not submitted, here one with a plan: third in the
  // queue, starting with B and C, on H100s, with the planner's step time on that placement.
  json w = api.Send("POST", "/api/v1/whatif",
                    R"({"name": "w", "gpus": 64, "estimated_runtime_s": 100,
                        "plan": {"model": "llama3-8b"}})");
  EXPECT_EQ(w["http_status"], 200) << w.dump();
  EXPECT_EQ(w["queue_position"], 3) << w.dump();
  EXPECT_EQ(w["estimated_start"], jb["estimated_start"]) << w.dump();
  EXPECT_EQ(w["gpu_type"], "H100-SXM") << w.dump();
  EXPECT_EQ(w["placement"]["gpus"], 64) << w.dump();
  EXPECT_GT(w.value("step_time_s", 0.0), 0.0) << w.dump();
  EXPECT_EQ(w["free_gpus"], 0) << w.dump();  // A holds the whole cluster
  EXPECT_EQ(w["total_gpus"], 1024) << w.dump();
  // Nothing was stored.
  EXPECT_EQ(api.Get("/api/v1/jobs?state=queued")["jobs"].size(), 2u);
  // A spec the cluster can never run is refused as a submit would be.
  json bad = api.Send("POST", "/api/v1/whatif", R"({"name": "x", "gpus": 4096})");
  EXPECT_EQ(bad["http_status"], 400) << bad.dump();
  api.Send("DELETE", "/api/v1/jobs/" + std::to_string(a), "");
}

// The dry-run executor runs a job `speedup` times faster than its estimated runtime; the
// scheduler must plan in that wall time. Before, a queued job behind a 10-hour job on a x100
// dry run was promised a start 10 hours away, although it started after 6 minutes. On a manual
// clock the times are exact (before: a window of 300..420 s on the system clock, and a 5 s
// sleep to show a was still running).
TEST(ControllerTest, DryRunEstimatedStartsAreInWallTime) {
  fs::path dir = TempDir("dryrun-eta");
  const TimePoint t0{Seconds(1'796'083'200)};  // 2026-12-01T00:00:00Z
  ManualClock clock(t0);
  InProcess d(dir, DryRun(100, clock), {}, std::nullopt, &clock);
  Api api(d.port());
  std::int64_t a = api.Submit(
      R"({"name": "a", "gpus": 1024, "estimated_runtime_s": 36000, "grace_period_s": 0})");
  ASSERT_TRUE(WaitFor([&] { return api.State(a) == "running"; }));
  std::int64_t b = api.Submit(R"({"name": "b", "gpus": 512, "estimated_runtime_s": 100})");
  json jb;
  ASSERT_TRUE(WaitFor([&] {
    jb = api.Get("/api/v1/jobs/" + std::to_string(b));
    return jb.contains("estimated_start");
  })) << jb.dump();
  // a's 36,000 s at x100: 360 s after t0 (no clock moved meanwhile).
  EXPECT_EQ(jb["estimated_start"].get<std::string>().substr(0, 19), "2026-12-01T00:06:00")
      << jb.dump();
  // ...and the executor runs a for 360 s, not 3.6 s (the runtime is not scaled twice). 100 s
  // on, a job submitted now has been through a cycle (it has a forecast, or it was placed), so
  // the executor was polled at t0 + 100: a is still running, and c waits for t0 + 360.
  clock.Advance(Seconds(100));
  std::int64_t c = api.Submit(R"({"name": "c", "gpus": 8, "estimated_runtime_s": 100})");
  json jc;
  ASSERT_TRUE(WaitFor([&] {
    jc = api.Get("/api/v1/jobs/" + std::to_string(c));
    return jc.contains("estimated_start") || jc.value("state", "") != "queued";
  })) << jc.dump();
  EXPECT_EQ(api.State(a), "running");
  EXPECT_EQ(jc["estimated_start"].get<std::string>().substr(0, 19), "2026-12-01T00:06:00")
      << jc.dump();
  // At t0 + 360 it ends and b starts.
  clock.Advance(Seconds(260));
  EXPECT_TRUE(WaitFor([&] { return api.State(a) == "succeeded"; })) << api.State(a);
  EXPECT_TRUE(WaitFor([&] { return api.State(b) == "running"; })) << api.State(b);
  api.Send("DELETE", "/api/v1/jobs/" + std::to_string(b), "");
  api.Send("DELETE", "/api/v1/jobs/" + std::to_string(c), "");
}

// The planner on the daemon's cluster (superpod-h100: 1,024 H100s): an estimate with its
// breakdown, a search with its top plans, and bad requests answered 4xx naming the field.
TEST(ControllerTest, PlanEndpointsEstimateAndSearchOnTheDaemonsCluster) {
  fs::path dir = TempDir("plan");
  SystemClock clock;
  InProcess d(dir, DryRun(100, clock));
  Api api(d.port());
  json e = api.Send("POST", "/api/v1/plan/estimate",
                    R"({"model": "llama3-70b", "gpus": 512,
                        "training": {"global_batch": 512, "tokens": 1e12, "price_per_gpu_hour": 2},
                        "plan": {"tp": 8, "pp": 4, "vp": 5, "recompute": "selective",
                                 "sequence_parallel": true, "zero": 1}})");
  ASSERT_EQ(e["http_status"], 200) << e.dump();
  EXPECT_EQ(e["model"], "llama3-70b");
  EXPECT_EQ(e["plan"]["dp"], 16);
  EXPECT_TRUE(e["estimate"]["feasible"].get<bool>()) << e.dump();
  double step = e["estimate"]["step_s"];
  double compute = e["estimate"]["breakdown_s"]["compute"];
  EXPECT_GT(step, 0);
  EXPECT_GT(compute, 0.3 * step);
  double mfu = e["estimate"]["mfu"];
  EXPECT_GT(mfu, 0.2);
  EXPECT_LT(mfu, 0.7);
  EXPECT_GT(e["train"]["cost_dollars"].get<double>(), 0);
  // The answer carries the planner's uncertainty band, as `plan estimate --json` does: the
  // cross-validated error of the built-in profile around this step time and MFU.
  ASSERT_TRUE(e.contains("band")) << e.dump();
  EXPECT_GT(e["band"]["relative"].get<double>(), 0) << e.dump();
  EXPECT_LT(e["band"]["step_s"][0].get<double>(), step);
  EXPECT_GT(e["band"]["step_s"][1].get<double>(), step);
  EXPECT_TRUE(e["band"].contains("extrapolated"));

  // An infeasible plan is an answer, not an error: tp1 pp1 cannot hold 70B weights and Adam.
  json oom = api.Send("POST", "/api/v1/plan/estimate",
                      R"({"model": "llama3-70b", "gpus": 64, "plan": {"zero": 0}})");
  ASSERT_EQ(oom["http_status"], 200) << oom.dump();
  EXPECT_FALSE(oom["estimate"]["feasible"].get<bool>());
  EXPECT_NE(oom.value("reason", "").find("GiB"), std::string::npos) << oom.dump();

  json s = api.Send("POST", "/api/v1/plan/search",
                    R"({"model": "llama3-8b", "gpus": 64, "training": {"global_batch": 256},
                        "search": {"top": 3}})");
  ASSERT_EQ(s["http_status"], 200) << s.dump();
  ASSERT_EQ(s["top"].size(), 3u) << s.dump();
  EXPECT_EQ(s["top"][0]["plan"]["gpus"], 64);
  EXPECT_LE(s["top"][0]["estimate"]["step_s"].get<double>(),
            s["top"][1]["estimate"]["step_s"].get<double>());
  EXPECT_GT(s["feasible"].get<double>(), 0);
  // And the search says how far to trust it: the job's band, the MFU validated runs of this
  // model size reached, and which plans are above it.
  EXPECT_GT(s["band"]["relative"].get<double>(), 0) << s.dump();
  EXPECT_GT(s["mfu_reached"].get<double>(), 0) << s.dump();
  EXPECT_TRUE(s["top"][0].contains("beyond_envelope")) << s.dump();

  json big = api.Send("POST", "/api/v1/plan/search", R"({"model": "llama3-8b", "gpus": 4096})");
  EXPECT_EQ(big["http_status"], 400);
  EXPECT_EQ(big["error"]["field"], "gpus");
  json bad = api.Send("POST", "/api/v1/plan/estimate",
                      R"({"model": "llama3-8b", "gpus": 8, "plan": {"tp": 0}})");
  EXPECT_EQ(bad["http_status"], 400);
  EXPECT_EQ(bad["error"]["field"], "plan.tp");
  json yaml =
      api.Send("POST", "/api/v1/plan/search", "model: llama3-8b\ngpus: 8\n", "application/yaml");
  EXPECT_EQ(yaml["http_status"], 415);
}

// A job with a plan is placed by the planner, which its "placed" event says; a plan that cannot
// run on the cluster is refused at submission, naming the field.
TEST(ControllerTest, JobWithAPlanIsPlacedWithThePlannersSlowdown) {
  fs::path dir = TempDir("withplan");
  SystemClock clock;
  InProcess d(dir, DryRun(100, clock));
  Api api(d.port());
  std::int64_t given = api.Submit(R"({"name": "pretrain", "gpus": 64, "estimated_runtime_s": 100,
      "plan": {"model": "llama3-70b", "tp": 8, "pp": 4, "recompute": "selective",
               "sequence_parallel": true, "zero": 1, "global_batch": 512}})");
  std::int64_t best = api.Submit(R"({"name": "best", "gpus": 16, "estimated_runtime_s": 100,
                                     "plan": {"model": "llama3-8b"}})");
  for (std::int64_t id : {given, best}) {
    ASSERT_TRUE(WaitFor([&] { return api.State(id) == "succeeded"; })) << api.State(id);
    EXPECT_EQ(api.EventKinds(id), (std::vector<std::string>{"queued", "placed", "finished"}));
  }
  json events = api.Get("/api/v1/jobs/" + std::to_string(given) + "/events");
  std::string placed = events["events"][1]["message"];
  EXPECT_NE(placed.find("; planner: llama3-70b tp8 pp4 dp2 at "), std::string::npos) << placed;
  EXPECT_NE(placed.find("x the compact placement's step time"), std::string::npos) << placed;
  EXPECT_NE(placed.find("[alloc "), std::string::npos) << placed;
  std::cout << "placed with a plan: " << placed << "\n";
  events = api.Get("/api/v1/jobs/" + std::to_string(best) + "/events");
  placed = events["events"][1]["message"];
  EXPECT_NE(placed.find("; planner: llama3-8b"), std::string::npos) << placed;

  // tp1 pp1 cannot hold 70B weights and Adam on 80 GB GPUs.
  json oom = api.Send("POST", "/api/v1/jobs", R"({"name": "oom", "gpus": 64,
      "plan": {"model": "llama3-70b", "zero": 0}})");
  EXPECT_EQ(oom["http_status"], 400) << oom.dump();
  EXPECT_EQ(oom["error"]["field"], "plan") << oom.dump();
  EXPECT_NE(oom["error"]["message"].get<std::string>().find("out-of-memory"), std::string::npos)
      << oom.dump();
  json none = api.Send("POST", "/api/v1/jobs", R"({"name": "none", "gpus": 1,
      "plan": {"model": "llama3-405b"}})");
  EXPECT_EQ(none["http_status"], 400) << none.dump();
  EXPECT_EQ(none["error"]["field"], "plan") << none.dump();
  EXPECT_NE(none["error"]["message"].get<std::string>().find("no feasible plan"), std::string::npos)
      << none.dump();
  json mismatch = api.Send("POST", "/api/v1/jobs", R"({"name": "mismatch", "gpus": 64,
      "plan": {"model": "llama3-70b", "tp": 8, "pp": 4, "dp": 1}})");
  EXPECT_EQ(mismatch["http_status"], 400) << mismatch.dump();
  EXPECT_EQ(mismatch["error"]["field"], "plan.dp") << mismatch.dump();
  json all = api.Get("/api/v1/jobs?limit=100");
  EXPECT_EQ(all["jobs"].size(), 2u) << all.dump();  // the refused ones were never stored
}

// A queued job that can never fit is rejected, with the reason, as failed.
// Regression (issue 15): a 4,096-GPU job on this 1,024-GPU cluster was accepted (201) and
// failed later. What can never run is refused at submit with 400 naming the field, and nothing
// is stored.
TEST(ControllerTest, ImpossibleJobsAreRefusedAtSubmit) {
  fs::path dir = TempDir("reject");
  SystemClock clock;
  InProcess d(dir, DryRun(100, clock));
  Api api(d.port());
  struct Case {
    const char* spec;
    const char* field;
  };
  for (const Case& c : {
           Case{R"({"name": "huge", "gpus": 4096})", "gpus"},
           Case{R"({"name": "t", "gpus": 8, "gpu_type": "B200"})", "gpu_type"},
           Case{R"({"name": "t", "gpus": 8, "gpu_type": "no-such-gpu"})", "gpu_type"},
           Case{R"({"name": "t", "gpus": 16, "gpus_per_node": 16})", "gpus_per_node"},
           Case{R"({"name": "t", "gpus": 24, "gpus_per_node": 16})", "gpus_per_node"},
           Case{R"({"name": "t", "gpus": 16, "topology": {"required": "node"}})",
                "topology.required"},
           Case{R"({"name": "t", "gpus": 512, "topology": {"required": "leaf"}})",
                "topology.required"},
           Case{R"({"name": "t", "gpus": 8, "topology": {"required": "group"}})",
                "topology.required"},
       }) {
    json r = api.Send("POST", "/api/v1/jobs", c.spec);
    EXPECT_EQ(r["http_status"], 400) << c.spec << " " << r.dump();
    EXPECT_EQ(r["error"].value("field", ""), c.field) << c.spec << " " << r.dump();
  }
  EXPECT_EQ(api.Get("/api/v1/jobs")["jobs"].size(), 0u);
  // What only has to wait is admitted: the whole cluster, one leaf, one node.
  api.Submit(R"({"name": "all", "gpus": 1024, "estimated_runtime_s": 1})");
  api.Submit(R"({"name": "leaf", "gpus": 256, "topology": {"required": "leaf"}})");
  api.Submit(R"({"name": "node", "gpus": 8, "gpus_per_node": 8, "gpu_type": "H100-SXM"})");
}

// Issue 14: named extended resources. Before they existed every name was refused as unknown, and
// nothing checked a request against what the nodes have.
TEST(ControllerTest, ExtendedResourcesAreCheckedAtSubmitAndShownInTheJob) {
  fs::path dir = TempDir("extended");
  SystemClock clock;
  auto cluster = topo::LoadClusterYaml(
      "name: ext\nshapes:\n  rdma: {gpu: H100, gpus: 8, extended: {rdma_nic: 4}}\n"
      "  plain: {gpu: H100, gpus: 8}\nnodes:\n  - {names: r1, shape: rdma}\n"
      "  - {names: p1, shape: plain}\n",
      "ext.yaml");
  ASSERT_TRUE(cluster.ok()) << cluster.status().ToString();
  InProcess d(dir, DryRun(100, clock), {}, std::move(cluster).value());
  Api api(d.port());
  struct Case {
    const char* spec;
    const char* field;
  };
  for (const Case& c : {
           Case{R"({"name": "t", "gpus": 8, "extended": {"nvme_gb": 1}})", "extended.nvme_gb"},
           Case{R"({"name": "t", "gpus": 8, "extended": {"rdma_nic": 5}})", "extended.rdma_nic"},
           Case{R"({"name": "t", "gpus": 8, "extended": {"rdma_nic": -1}})", "extended.rdma_nic"},
       }) {
    json r = api.Send("POST", "/api/v1/jobs", c.spec);
    EXPECT_EQ(r["http_status"], 400) << c.spec << " " << r.dump();
    EXPECT_EQ(r["error"].value("field", ""), c.field) << c.spec << " " << r.dump();
  }
  EXPECT_EQ(api.Get("/api/v1/jobs")["jobs"].size(), 0u);
  json ok =
      api.Send("POST", "/api/v1/jobs", R"({"name": "ok", "gpus": 4, "extended": {"rdma_nic": 4}})");
  ASSERT_EQ(ok["http_status"], 201) << ok.dump();
  EXPECT_EQ(ok["spec"]["extended"]["rdma_nic"], 4) << ok.dump();
}

// Regression (issue 15): /api/v1/topology counted 512 GPUs allocated while its summary, written
// once at start, said 0.
TEST(ControllerTest, TopologyCountsAgreeWithItsSummary) {
  fs::path dir = TempDir("topology");
  SystemClock clock;
  InProcess d(dir, DryRun(1, clock));
  Api api(d.port());
  std::int64_t id = api.Submit(R"({"name": "half", "gpus": 512, "estimated_runtime_s": 3600})");
  ASSERT_TRUE(WaitFor([&] { return api.State(id) == "running"; }));
  json t;
  ASSERT_TRUE(WaitFor([&] {
    t = api.Get("/api/v1/topology");
    return t.value("gpus_allocated", -1) == 512;
  })) << t.dump();
  const std::string summary = t["summary"];
  EXPECT_NE(summary.find("(allocated 512, free 512"), std::string::npos) << summary;
}

TEST(ControllerTest, DcgmXid79TakesTheNodeOutOfScheduling) {
  fs::path dir = TempDir("dcgm");
  SystemClock clock;
  InProcess d(dir, DryRun(1, clock));
  Api api(d.port());
  json nodes = api.Get("/api/v1/nodes");
  ASSERT_EQ(nodes["nodes"].size(), 128u) << nodes.dump().substr(0, 300);
  std::string bad = nodes["nodes"][5]["node"];
  std::string hot = nodes["nodes"][9]["node"];
  std::string scrape =
      "# TYPE DCGM_FI_DEV_XID_ERRORS gauge\n"
      "DCGM_FI_DEV_XID_ERRORS{gpu=\"2\",UUID=\"GPU-x\",Hostname=\"" +
      bad +
      "\"} 79\n"
      "DCGM_FI_DEV_GPU_TEMP{gpu=\"0\",Hostname=\"" +
      hot +
      "\"} 97\n"
      "DCGM_FI_DEV_GPU_TEMP{gpu=\"0\",Hostname=\"nowhere\"} 40\n";
  json r = api.Send("POST", "/api/v1/telemetry/dcgm", scrape, "text/plain");
  EXPECT_EQ(r["http_status"], 202) << r.dump();
  EXPECT_EQ(r["unknown_nodes"], json::array({"nowhere"}));
  ASSERT_TRUE(
      WaitFor([&] { return api.Get("/api/v1/nodes/" + bad).value("health", "") == "down"; }));
  json node = api.Get("/api/v1/nodes/" + bad);
  EXPECT_EQ(node["active_rules"].size(), 1u) << node.dump();
  // Fill every other GPU: the gang must avoid the down node, and one more job must wait.
  std::int64_t big = api.Submit(
      R"({"name": "fill", "gpus": 1016, "gpus_per_node": 8, "estimated_runtime_s": 3600})");
  ASSERT_TRUE(WaitFor([&] { return api.State(big) == "running"; })) << api.State(big);
  json job = api.Get("/api/v1/jobs/" + std::to_string(big));
  for (const auto& n : job["placement"]["nodes"]) EXPECT_NE(n["node"], bad);
  std::int64_t small = api.Submit(R"({"name": "one-more", "gpus": 8})");
  // A cycle has considered it (it has a reason to wait), and it still waits.
  json waiting;
  EXPECT_TRUE(WaitFor([&] {
    waiting = api.Get("/api/v1/jobs/" + std::to_string(small));
    return waiting.contains("waiting_reason");
  })) << waiting.dump();
  EXPECT_EQ(waiting.value("state", ""), "queued");
  EXPECT_EQ(api.Get("/api/v1/nodes/" + bad)["gpus_allocated"], 0);
  std::string metrics =
      httplib::Client("127.0.0.1", d.port()).Get("/metrics", {{"Authorization", kToken}})->body;
  EXPECT_NE(metrics.find("baton_nodes{health=\"down\"} 1"), std::string::npos);
}

TEST(ControllerTest, HigherPriorityJobPreemptsAndTheVictimIsRequeued) {
  fs::path dir = TempDir("preempt");
  SystemClock clock;
  SchedulingControllerOptions eager;
  eager.config.tenancy.min_run_time = Seconds(0);  // evict a job placed a moment ago
  InProcess d(dir, DryRun(1, clock), eager);
  Api api(d.port());
  std::int64_t low = api.Submit(R"({"name": "low", "gpus": 1024, "priority": 0,
                                    "estimated_runtime_s": 36000, "grace_period_s": 0})");
  ASSERT_TRUE(WaitFor([&] { return api.State(low) == "running"; }));
  std::int64_t high = api.Submit(R"({"name": "high", "gpus": 64, "priority": 100,
                                     "estimated_runtime_s": 36000})");
  ASSERT_TRUE(WaitFor([&] { return api.State(high) == "running"; })) << api.State(high);
  std::vector<std::string> kinds = api.EventKinds(low);
  ASSERT_GE(kinds.size(), 4u);
  EXPECT_EQ(std::vector<std::string>(kinds.begin(), kinds.begin() + 4),
            (std::vector<std::string>{"queued", "placed", "preempted", "requeued"}));
  json events = api.Get("/api/v1/jobs/" + std::to_string(low) + "/events");
  EXPECT_NE(events["events"][2]["message"].get<std::string>().find("preempted by job " +
                                                                   std::to_string(high)),
            std::string::npos);
}

TEST(ControllerTest, NodeGoingDownMovesTheJobOffIt) {
  fs::path dir = TempDir("down");
  SystemClock clock;
  InProcess d(dir, DryRun(1, clock));
  Api api(d.port());
  std::int64_t id = api.Submit(R"({"name": "eight", "gpus": 8, "estimated_runtime_s": 36000})");
  json job;
  ASSERT_TRUE(WaitFor([&] {
    job = api.Get("/api/v1/jobs/" + std::to_string(id));
    return job.contains("placement");
  }));
  std::string node = job["placement"]["nodes"][0]["node"];
  json r =
      api.Send("POST", "/api/v1/nodes/" + node + "/telemetry", R"({"DCGM_FI_DEV_XID_ERRORS": 79})");
  EXPECT_EQ(r["http_status"], 202) << r.dump();
  // The scheduler requeues it or replaces the node (restart from the checkpoint elsewhere).
  ASSERT_TRUE(WaitFor([&] {
    job = api.Get("/api/v1/jobs/" + std::to_string(id));
    return job.value("state", "") == "running" && job.contains("placement") &&
           job["placement"]["nodes"][0]["node"] != node;
  })) << job.dump();
  // The snapshot (the job's placement) is published before the store commits the cycle's
  // events: the replacement's event follows within the cycle.
  std::vector<std::string> kinds;
  ASSERT_TRUE(WaitFor([&] {
    kinds = api.EventKinds(id);
    return kinds.size() >= 3;
  })) << api.Get("/api/v1/jobs/" + std::to_string(id) + "/events").dump();
  EXPECT_TRUE(kinds[2] == "requeued" || kinds[2] == "placed") << kinds[2];
  EXPECT_EQ(api.Get("/api/v1/nodes/" + node)["gpus_allocated"], 0);
  EXPECT_EQ(api.Send("POST", "/api/v1/nodes/nosuchnode/telemetry", R"({"x": 1})")["http_status"],
            404);
}

// Issue 27: a node replacement was stored and launched without the store's check that the new
// node is not being drained, so a drain acknowledged after the cycle's snapshot did not stop it.
// Here the drain reaches the database without the controller hearing of it (as when the cycle is
// already deciding): the replacement is refused, and the job waits in the queue instead.
TEST(ControllerTest, ReplacementOntoANodeDrainedMeanwhileIsRefused) {
  fs::path dir = TempDir("replace-drained");
  auto cluster = topo::LoadClusterYaml(R"(name: three
fabric: fat-tree
shapes:
  h8: {gpu: H100-SXM, gpus: 8, cpus: 32, memory_gib: 256, nics: 1, nic_gbps: 400}
nodes:
  - {names: "n[1-3]", shape: h8}
switches:
  - {name: leaf1, nodes: "n[1-3]"}
tiers: [leaf]
)",
                                       "three.yaml");
  ASSERT_TRUE(cluster.ok()) << cluster.status().ToString();
  SystemClock clock;
  InProcess d(dir, DryRun(1, clock), {}, std::move(cluster).value());
  Api api(d.port());
  std::int64_t id = api.Submit(
      R"({"name": "two", "gpus": 16, "gpus_per_node": 8, "estimated_runtime_s": 36000})");
  json job;
  ASSERT_TRUE(WaitFor([&] {
    job = api.Get("/api/v1/jobs/" + std::to_string(id));
    return job.contains("placement");
  })) << job.dump();
  std::set<std::string> used;
  for (const json& n : job["placement"]["nodes"]) used.insert(n["node"].get<std::string>());
  ASSERT_EQ(used.size(), 2u);
  std::string spare;
  for (const char* n : {"n1", "n2", "n3"}) {
    if (!used.count(n)) spare = n;
  }
  {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open((dir / "baton.db").c_str(), &db), SQLITE_OK);
    sqlite3_busy_timeout(db, 5000);
    std::string sql = "INSERT INTO node_admin (node, admin, reason, set_by, updated_us) VALUES ('" +
                      spare + "', 'draining', 'test', 'ops', 0)";
    EXPECT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK)
        << sqlite3_errmsg(db);
    sqlite3_close(db);
  }
  const std::string failed = *used.begin();
  json r = api.Send("POST", "/api/v1/nodes/" + failed + "/telemetry",
                    R"({"DCGM_FI_DEV_XID_ERRORS": 79})");
  EXPECT_EQ(r["http_status"], 202) << r.dump();
  json events;
  ASSERT_TRUE(WaitFor([&] {
    events = api.Get("/api/v1/jobs/" + std::to_string(id) + "/events");
    for (const json& e : events["events"]) {
      if (e["kind"] == "requeued") return true;
    }
    return false;
  })) << events.dump();
  bool refused = false;
  for (const json& e : events["events"]) {
    const std::string message = e["message"];
    EXPECT_EQ(message.find(spare + ":"), std::string::npos)
        << "placed on " << spare << ": " << message;
    if (e["kind"] == "requeued") {
      refused |= message.find("not restarted") != std::string::npos &&
                 message.find(spare) != std::string::npos;
    }
  }
  EXPECT_TRUE(refused) << events.dump();
  // Back in the queue with its own spec (one of three nodes is healthy: it waits there). A
  // requeue that lost the spec failed the job as one asking for 0 GPUs.
  json view;
  ASSERT_TRUE(WaitFor([&] {
    view = api.Get("/api/v1/jobs/" + std::to_string(id));
    return view.contains("waiting_reason") || view.value("state", "") != "queued";
  })) << view.dump();
  EXPECT_EQ(view.value("state", ""), "queued") << view.dump();
}

TEST(ControllerTest, LocalExecutorStartsRanksWithTheirEnvironment) {
  fs::path dir = TempDir("local");
  SystemClock clock;
  InProcess d(dir,
              std::make_unique<LocalExecutor>(LocalOptions{"", (dir / "logs").string()}, clock));
  Api api(d.port());
  std::int64_t id = api.Submit(R"({"name": "env", "gpus": 2, "gpus_per_node": 2,
                                   "command": ["env"]})");
  ASSERT_TRUE(WaitFor([&] { return api.State(id) == "succeeded"; })) << api.State(id);
  json job = api.Get("/api/v1/jobs/" + std::to_string(id));
  for (int rank = 0; rank < 2; ++rank) {
    fs::path log =
        dir / "logs" / ("job-" + std::to_string(id)) / ("rank-" + std::to_string(rank) + ".log");
    std::ifstream in(log);
    std::stringstream ss;
    ss << in.rdbuf();
    std::string env = ss.str();
    EXPECT_NE(env.find("\nRANK=" + std::to_string(rank) + "\n"), std::string::npos) << env;
    EXPECT_NE(env.find("\nWORLD_SIZE=2\n"), std::string::npos) << env;
    EXPECT_NE(env.find("\nLOCAL_RANK=" + std::to_string(rank) + "\n"), std::string::npos);
    EXPECT_NE(env.find("\nCUDA_VISIBLE_DEVICES="), std::string::npos) << env;
    EXPECT_NE(env.find("\nMASTER_PORT="), std::string::npos) << env;
  }
  // A long-running command is stopped (its process group killed) on cancel.
  std::int64_t sleeper = api.Submit(R"({"name": "sleeper", "gpus": 1, "grace_period_s": 0,
                                        "command": ["sleep", "60"]})");
  ASSERT_TRUE(WaitFor([&] { return api.State(sleeper) == "running"; }));
  api.Send("DELETE", "/api/v1/jobs/" + std::to_string(sleeper), "");
  ASSERT_TRUE(WaitFor([&] { return api.State(sleeper) == "cancelled"; }, 5s)) << api.State(sleeper);
  // A command that does not exist fails the job with the reason.
  std::int64_t missing = api.Submit(R"({"name": "missing", "gpus": 1,
                                        "command": ["/nonexistent/trainer"]})");
  ASSERT_TRUE(WaitFor([&] { return api.State(missing) == "failed"; })) << api.State(missing);
}

// One daemon child process with the scheduler (dry-run, x1000). SIGKILLed by the guard.
testing::ChildDaemon StartChild(const fs::path& dir, const char* log) {
  return testing::ChildDaemon(BATON_SERVE_TEST_DAEMON, dir, dir / log,
                              {"--preset", "superpod-h100", "--speedup", "1000"});
}

// Issue 29: a job a broker leases (federation.lease_s) runs at the site only while the broker
// keeps looking at it. It waits, held, for the broker's first look; it is fenced (its attempt
// stopped, the job held) when the looks stop for longer than the lease; it runs again, as a new
// attempt, when they resume. Only a broker may lease a job. On a manual clock: before, looks
// 0.2 s apart on the system clock had to beat a 1 s lease, which a slow machine could lose.
TEST(ControllerTest, ALeasedJobRunsOnlyWhileItsBrokerRenewsTheLease) {
  fs::path dir = TempDir("lease");
  std::ofstream(dir / "auth.yaml")
      << "principals:\n  - {name: ops, role: admin, token: ctl-admin-token-0123456789}\n"
         "  - {name: fed, role: broker, token: ctl-broker-token-0123456789}\n"
         "  - {name: alice, role: tenant, tenant: team-a, token: ctl-alice-token-0123456789}\n";
  ManualClock clock(TimePoint{Seconds(1'796'083'200)});
  InProcess d(dir, DryRun(1, clock), {}, std::nullopt, &clock);
  Api api(d.port());
  httplib::Client broker("127.0.0.1", d.port());
  broker.set_read_timeout(10);
  const httplib::Headers as_broker{{"Authorization", "Bearer ctl-broker-token-0123456789"},
                                   {"Baton-Tenant", "team-a"}};
  const std::string spec = R"({"name": "leased", "gpus": 16, "estimated_runtime_s": 3600,
      "grace_period_s": 0, "federation": {"lease_s": 1}})";

  // A tenant cannot lease its own job.
  auto refused = httplib::Client("127.0.0.1", d.port())
                     .Post("/api/v1/jobs", {{"Authorization", "Bearer ctl-alice-token-0123456789"}},
                           spec, "application/json");
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->status, 400) << refused->body;
  EXPECT_NE(refused->body.find("federation.lease_s"), std::string::npos) << refused->body;

  auto created = broker.Post("/api/v1/jobs", as_broker, spec, "application/json");
  ASSERT_TRUE(created);
  ASSERT_EQ(created->status, 201) << created->body;
  const std::int64_t id = json::parse(created->body)["id"];
  const std::string path = "/api/v1/jobs/" + std::to_string(id);
  auto has_event = [&](const std::string& kind) {
    std::vector<std::string> kinds = api.EventKinds(id);
    return std::find(kinds.begin(), kinds.end(), kind) != kinds.end();
  };
  // Held until the broker's first look (the admin's looks renew nothing).
  ASSERT_TRUE(WaitFor([&] { return has_event("held"); })) << json(api.EventKinds(id)).dump();
  json view;
  EXPECT_TRUE(WaitFor([&] {
    view = api.Get(path);
    return view.value("waiting_reason", "").starts_with("held: the federation broker");
  })) << view.dump();
  EXPECT_EQ(view.value("state", ""), "queued") << view.dump();
  // The broker looks: it runs, and keeps running while the broker keeps looking.
  auto broker_state = [&] {
    auto r = broker.Get(path.c_str(), as_broker);
    return r && r->status == 200 ? json::parse(r->body).value("state", "?") : "?";
  };
  ASSERT_TRUE(WaitFor([&] { return broker_state() == "running"; }));
  // A cycle has run since the clock last moved, and so has the loop's check for lapsed leases,
  // which precedes each cycle: a job submitted now has been through one (placed, or given a
  // reason to wait). It is cancelled at once.
  auto a_cycle_ran = [&] {
    std::int64_t probe = api.Submit(R"({"name": "probe", "gpus": 1, "grace_period_s": 0})");
    json p;
    EXPECT_TRUE(WaitFor([&] {
      p = api.Get("/api/v1/jobs/" + std::to_string(probe));
      return p.value("state", "") != "queued" || p.contains("waiting_reason");
    })) << p.dump();
    api.Send("DELETE", "/api/v1/jobs/" + std::to_string(probe), "");
  };
  for (int i = 0; i < 6; ++i) {  // three leases' worth of looks, half a lease apart
    clock.Advance(Seconds(0.5));
    a_cycle_ran();
    ASSERT_FALSE(has_event("fenced")) << i << json(api.EventKinds(id)).dump();
    ASSERT_EQ(broker_state(), "running") << json(api.EventKinds(id)).dump();
  }
  // The looks stop: past the lease, the attempt is fenced and the job held, not left running.
  clock.Advance(Seconds(2));
  ASSERT_TRUE(WaitFor([&] { return has_event("fenced"); })) << json(api.EventKinds(id)).dump();
  view = api.Get(path);
  EXPECT_EQ(view.value("state", ""), "queued") << view.dump();
  ASSERT_TRUE(
      WaitFor([&] { return api.Get("/api/v1/topology").value("gpus_allocated", -1) == 0; }));
  // The broker is back: the job runs again, as its second attempt.
  ASSERT_TRUE(WaitFor([&] { return broker_state() == "running"; }));
  view = api.Get(path);
  EXPECT_EQ(view.value("attempts", 0), 2) << view.dump();
  EXPECT_EQ(view.value("tenant", ""), "team-a") << view.dump();
  std::vector<std::string> kinds = api.EventKinds(id);
  std::erase(kinds, "waiting");
  EXPECT_EQ(kinds, (std::vector<std::string>{"queued", "held", "released", "placed", "fenced",
                                             "released", "placed"}))
      << json(kinds).dump();
}

TEST(ControllerTest, Kill9AndRestartLosesAndDuplicatesNothing) {
  fs::path dir = TempDir("restart");
  std::int64_t whole, a, b;
  {
    testing::ChildDaemon first = StartChild(dir, "daemon-1.log");
    const int port = first.WaitForPort();
    ASSERT_GT(port, 0) << first.Log();
    Api api(port);
    // The whole cluster for 5000 simulated s (5 s at x1000), then two that must wait for it.
    whole = api.Submit(R"({"name": "whole", "gpus": 1024, "estimated_runtime_s": 5000})");
    ASSERT_TRUE(WaitFor([&] { return api.State(whole) == "running"; }));
    a = api.Submit(R"({"name": "a", "gpus": 512, "estimated_runtime_s": 500})");
    b = api.Submit(R"({"name": "b", "gpus": 512, "estimated_runtime_s": 500})");
    EXPECT_EQ(api.State(a), "queued");
    first.Kill(SIGKILL);
  }
  testing::ChildDaemon second = StartChild(dir, "daemon-2.log");
  const int port = second.WaitForPort();
  ASSERT_GT(port, 0) << second.Log();
  Api api(port);
  EXPECT_EQ(api.State(whole), "running");
  ASSERT_TRUE(WaitFor(
      [&] {
        return api.State(whole) == "succeeded" && api.State(a) == "succeeded" &&
               api.State(b) == "succeeded";
      },
      20s))
      << api.State(whole) << " " << api.State(a) << " " << api.State(b);
  EXPECT_EQ(api.EventKinds(whole),
            (std::vector<std::string>{"queued", "placed", "adopted", "finished"}));
  for (std::int64_t id : {a, b}) {
    // They waited (before and after the restart) for the whole-cluster job, then ran once.
    std::vector<std::string> kinds = api.EventKinds(id);
    EXPECT_NE(std::find(kinds.begin(), kinds.end(), "waiting"), kinds.end());
    std::erase(kinds, "waiting");
    EXPECT_EQ(kinds, (std::vector<std::string>{"queued", "placed", "finished"}));
  }
  json events = api.Get("/api/v1/jobs/" + std::to_string(a) + "/events");
  std::cout << "waiting reason: " << events["events"][1]["message"] << "\n";
  json all = api.Get("/api/v1/jobs?limit=100");
  EXPECT_EQ(all["jobs"].size(), 3u);
  for (const auto& j : all["jobs"]) EXPECT_EQ(j["attempts"], 1) << j.dump();
}

// Plans live in the stored spec: after a kill -9 the running job with a plan is adopted with it
// and the queued one is placed by the planner.
TEST(ControllerTest, PlansSurviveARestart) {
  fs::path dir = TempDir("planrestart");
  std::int64_t whole, queued;
  {
    testing::ChildDaemon first = StartChild(dir, "daemon-1.log");
    const int port = first.WaitForPort();
    ASSERT_GT(port, 0) << first.Log();
    Api api(port);
    whole = api.Submit(R"({"name": "whole", "gpus": 1024, "estimated_runtime_s": 3000,
                           "plan": {"model": "llama3-70b", "tp": 8, "pp": 4,
                                    "recompute": "selective", "zero": 1}})");
    ASSERT_TRUE(WaitFor([&] { return api.State(whole) == "running"; })) << first.Log();
    queued = api.Submit(R"({"name": "queued", "gpus": 64, "estimated_runtime_s": 100,
                            "plan": {"model": "llama3-8b"}})");
    EXPECT_EQ(api.State(queued), "queued");
    first.Kill(SIGKILL);
  }
  testing::ChildDaemon second = StartChild(dir, "daemon-2.log");
  const int port = second.WaitForPort();
  ASSERT_GT(port, 0) << second.Log();
  Api api(port);
  ASSERT_TRUE(WaitFor(
      [&] { return api.State(whole) == "succeeded" && api.State(queued) == "succeeded"; }, 20s))
      << api.State(whole) << " " << api.State(queued) << "\n"
      << second.Log();
  // No "planner" event: the running job's plan was registered again on the restart.
  EXPECT_EQ(api.EventKinds(whole),
            (std::vector<std::string>{"queued", "placed", "adopted", "finished"}));
  json job = api.Get("/api/v1/jobs/" + std::to_string(queued));
  EXPECT_EQ(job["spec"]["plan"]["model"], "llama3-8b") << job.dump();
  json events = api.Get("/api/v1/jobs/" + std::to_string(queued) + "/events");
  bool planned = false;
  for (const auto& e : events["events"]) {
    if (e["kind"] == "placed") {
      planned = e["message"].get<std::string>().find("; planner: llama3-8b") != std::string::npos;
    }
  }
  EXPECT_TRUE(planned) << events.dump();
}

// Issue 15: asking for 2 GPUs per node gave nodes holding [8,6,4,4,8,2].
TEST(ControllerTest, GpusPerNodeIsAPerNodeCount) {
  fs::path dir = TempDir("per-node");
  SystemClock clock;
  InProcess d(dir, DryRun(1, clock));
  Api api(d.port());
  std::int64_t id = api.Submit(
      R"({"name": "spread", "gpus": 12, "gpus_per_node": 2, "estimated_runtime_s": 36000})");
  json job;
  ASSERT_TRUE(WaitFor([&] {
    job = api.Get("/api/v1/jobs/" + std::to_string(id));
    return job.contains("placement");
  })) << job.dump();
  ASSERT_EQ(job["placement"]["nodes"].size(), 6u) << job.dump();
  for (const auto& n : job["placement"]["nodes"]) EXPECT_EQ(n["gpus"].size(), 2u) << job.dump();
}

// Two nodes of 2 GPUs under one leaf.
Result<topo::Cluster> TwoNodeCluster() {
  return topo::LoadClusterYaml(
      "name: two\nfabric: fat-tree\nshapes:\n  two: {gpu: H100, gpus: 2}\nnodes:\n"
      "  - {names: \"n[1-2]\", shape: two}\nswitches:\n  - {name: leaf1, nodes: \"n[1-2]\"}\n"
      "tiers: [leaf]\n",
      "two.yaml");
}

// The dry-run executor, recording what the controller asks of it ("launch JOB attempt A ranks R",
// "kill JOB", "waiting JOB: REASON"), in order.
class RecordingExecutor final : public Executor {
 public:
  RecordingExecutor(const Clock& clock, std::shared_ptr<std::vector<std::string>> log,
                    std::shared_ptr<std::mutex> mu)
      : inner_(DryRunOptions{}, clock), log_(std::move(log)), mu_(std::move(mu)) {}
  std::string_view name() const override { return inner_.name(); }
  double TimeScale() const override { return inner_.TimeScale(); }
  Status Launch(const LaunchRequest& r) override {
    Add(fmt::format("launch {} attempt {} ranks {}", r.job, r.attempt, r.ranks.size()));
    {
      std::lock_guard lock(*mu_);
      ports_[r.job].push_back(r.master_port);
    }
    return inner_.Launch(r);
  }
  void Stop(std::int64_t job, Seconds grace) override { inner_.Stop(job, grace); }
  void Kill(std::int64_t job) override {
    Add(fmt::format("kill {}", job));
    inner_.Kill(job);
  }
  bool Reattach(const LaunchRequest& r) override { return inner_.Reattach(r); }
  std::vector<ExitReport> Poll() override { return inner_.Poll(); }
  void StopAll() override { inner_.StopAll(); }
  void JobWaiting(std::int64_t job, const std::string& why) override {
    Add(fmt::format("waiting {}: {}", job, why));
  }
  // MASTER_PORT of each launch of each job, in order.
  static inline std::map<std::int64_t, std::vector<int>> ports_;

 private:
  void Add(std::string line) {
    std::lock_guard lock(*mu_);
    log_->push_back(std::move(line));
  }
  DryRunExecutor inner_;
  std::shared_ptr<std::vector<std::string>> log_;
  std::shared_ptr<std::mutex> mu_;
};

// The dry-run executor offering jobs as a resource manager does (PollSubmissions), recording the
// controller's answers by key ("id 3" or the refusal's message), in order.
class SubmittingExecutor final : public Executor {
 public:
  using Answers = std::vector<std::pair<std::string, std::string>>;
  SubmittingExecutor(const Clock& clock, std::vector<Submission> offers,
                     std::shared_ptr<Answers> answers, std::shared_ptr<std::mutex> mu)
      : inner_(DryRunOptions{}, clock),
        offers_(std::move(offers)),
        answers_(std::move(answers)),
        mu_(std::move(mu)) {}
  std::string_view name() const override { return inner_.name(); }
  double TimeScale() const override { return inner_.TimeScale(); }
  Status Launch(const LaunchRequest& r) override { return inner_.Launch(r); }
  void Stop(std::int64_t job, Seconds grace) override { inner_.Stop(job, grace); }
  void Kill(std::int64_t job) override { inner_.Kill(job); }
  bool Reattach(const LaunchRequest& r) override { return inner_.Reattach(r); }
  std::vector<ExitReport> Poll() override { return inner_.Poll(); }
  void StopAll() override { inner_.StopAll(); }
  std::vector<Submission> PollSubmissions() override { return std::exchange(offers_, {}); }
  void Submitted(const std::string& key, const Result<std::int64_t>& job) override {
    std::lock_guard lock(*mu_);
    answers_->emplace_back(key, job.ok() ? fmt::format("id {}", *job) : job.status().message());
  }

 private:
  DryRunExecutor inner_;
  std::vector<Submission> offers_;
  std::shared_ptr<Answers> answers_;
  std::shared_ptr<std::mutex> mu_;
};

// Jobs a resource manager asks for (Kubernetes gangs) pass the API's checks and are stored under
// their key: the same key names the same job, in the same run and after a restart.
TEST(ControllerTest, ExecutorSubmissionsAreStoredOnceUnderTheirKey) {
  fs::path dir = TempDir("submissions");
  SystemClock clock;
  auto answers = std::make_shared<SubmittingExecutor::Answers>();
  auto mu = std::make_shared<std::mutex>();
  const Submission good{"k8s/ml/train/uid-1",
                        R"({"name": "train", "tenant": "ml", "gpus": 16, "gpus_per_node": 8,
                            "estimated_runtime_s": 36000})"};
  const Submission too_big{"k8s/ml/huge/uid-2",
                           R"({"name": "huge", "tenant": "ml", "gpus": 100000})"};
  const Submission no_tenant{"k8s/ml/x/uid-3", R"({"name": "x", "gpus": 8})"};
  auto answered = [&](std::size_t n) {
    return WaitFor([&] {
      std::lock_guard lock(*mu);
      return answers->size() >= n;
    });
  };
  std::string id;
  {
    InProcess d(dir, std::make_unique<SubmittingExecutor>(
                         clock, std::vector{good, too_big, no_tenant, good}, answers, mu));
    ASSERT_TRUE(answered(4));
    std::lock_guard lock(*mu);
    id = (*answers)[0].second;
    EXPECT_EQ((*answers)[0].first, good.key);
    EXPECT_EQ(id.rfind("id ", 0), 0u) << id;
    EXPECT_NE((*answers)[1].second.find("gpus"), std::string::npos) << (*answers)[1].second;
    EXPECT_NE((*answers)[2].second.find("tenant"), std::string::npos) << (*answers)[2].second;
    EXPECT_EQ((*answers)[3], (*answers)[0]);
    Api api(d.port());
    json job = api.Get("/api/v1/jobs/" + id.substr(3));
    EXPECT_EQ(job.value("tenant", ""), "ml") << job.dump();
    EXPECT_TRUE(WaitFor([&] { return api.State(std::stoll(id.substr(3))) == "running"; }));
  }
  answers->clear();
  InProcess again(dir, std::make_unique<SubmittingExecutor>(clock, std::vector{good}, answers, mu));
  ASSERT_TRUE(answered(1));
  std::lock_guard lock(*mu);
  EXPECT_EQ((*answers)[0].second, id);
  json jobs = Api(again.port()).Get("/api/v1/jobs");
  EXPECT_EQ(jobs["jobs"].size(), 1u) << jobs.dump();  // one job, the refused ones not stored
}

// A queued job's reason for waiting reaches the executor each time it changes, in the words of
// its "waiting" event (the Kubernetes executor writes it as an Event on the gang's first pod).
TEST(ControllerTest, AQueuedJobsWaitingReasonReachesTheExecutor) {
  fs::path dir = TempDir("waiting");
  SystemClock clock;
  auto cluster = TwoNodeCluster();
  ASSERT_TRUE(cluster.ok()) << cluster.status().ToString();
  auto log = std::make_shared<std::vector<std::string>>();
  auto mu = std::make_shared<std::mutex>();
  InProcess d(dir, std::make_unique<RecordingExecutor>(clock, log, mu),
              SchedulingControllerOptions{}, std::move(cluster).value());
  Api api(d.port());
  const std::int64_t all =
      api.Submit(R"({"name": "all", "gpus": 4, "estimated_runtime_s": 36000})");
  ASSERT_TRUE(WaitFor([&] { return api.State(all) == "running"; }));
  const std::int64_t next = api.Submit(R"({"name": "next", "gpus": 2, "estimated_runtime_s": 60})");
  const std::string prefix = fmt::format("waiting {}: ", next);
  std::string told;
  ASSERT_TRUE(WaitFor([&] {
    std::lock_guard lock(*mu);
    for (const std::string& l : *log) {
      if (l.starts_with(prefix)) told = l.substr(prefix.size());
    }
    return !told.empty();
  }));
  EXPECT_EQ(api.State(next), "queued");
  json events = api.Get("/api/v1/jobs/" + std::to_string(next) + "/events")["events"];
  bool same = false;
  for (const json& e : events)
    same |= e.value("kind", "") == "waiting" && e.value("message", "") == told;
  EXPECT_TRUE(same) << told << " / " << events.dump();
  std::vector<std::string> reasons;  // told again only when the reason changes
  std::lock_guard lock(*mu);
  for (const std::string& l : *log) {
    if (l.starts_with(prefix)) reasons.push_back(l);
  }
  EXPECT_EQ(std::adjacent_find(reasons.begin(), reasons.end()), reasons.end());
}

// Issue 27: a resize decision reaches the executor. The job is relaunched as a new attempt at its
// new size (the old attempt killed first), and its event says from what size to what and where it
// resumes; it grows when GPUs free up and shrinks for a higher-priority rigid job.
TEST(ControllerTest, ElasticJobIsRelaunchedAtItsNewSizeOnEveryResize) {
  fs::path dir = TempDir("elastic");
  SystemClock clock;
  auto cluster = TwoNodeCluster();
  ASSERT_TRUE(cluster.ok()) << cluster.status().ToString();
  auto log = std::make_shared<std::vector<std::string>>();
  auto mu = std::make_shared<std::mutex>();
  SchedulingControllerOptions options;
  options.config.actions = {"admit", "allocate", "backfill", "resize", "preempt"};
  InProcess d(dir, std::make_unique<RecordingExecutor>(clock, log, mu), options,
              std::move(cluster).value());
  Api api(d.port());
  auto lines = [&] {
    std::lock_guard lock(*mu);
    return *log;
  };
  const std::int64_t blocker =
      api.Submit(R"({"name": "blocker", "gpus": 2, "estimated_runtime_s": 36000,
                    "grace_period_s": 0})");
  ASSERT_TRUE(WaitFor([&] { return api.State(blocker) == "running"; }));
  // Elastic 2..4 in steps of 2 (the default here: one 2-GPU node); it starts at 2.
  const std::int64_t el = api.Submit(
      R"({"name": "el", "elastic": {"min_gpus": 2, "max_gpus": 4}, "estimated_runtime_s": 36000})");
  json job;
  ASSERT_TRUE(WaitFor([&] {
    job = api.Get("/api/v1/jobs/" + std::to_string(el));
    return job.value("state", "") == "running";
  }));
  EXPECT_EQ(job["spec"]["gpus"], 2) << job.dump();
  // The blocker ends: the elastic job grows to 4 as attempt 2.
  EXPECT_EQ(api.Send("DELETE", "/api/v1/jobs/" + std::to_string(blocker), "")["http_status"], 202);
  ASSERT_TRUE(WaitFor([&] {
    job = api.Get("/api/v1/jobs/" + std::to_string(el));
    return job.value("attempts", 0) == 2;
  })) << job.dump()
      << api.Get("/api/v1/jobs/" + std::to_string(el) + "/events").dump()
      << api.Get("/api/v1/jobs/" + std::to_string(blocker) + "/events").dump();
  // A higher-priority rigid job: the elastic job shrinks back to 2 (attempt 3) instead of being
  // preempted, and the rigid job runs beside it.
  const std::int64_t high =
      api.Submit(R"({"name": "high", "gpus": 2, "priority": 10, "estimated_runtime_s": 36000})");
  ASSERT_TRUE(WaitFor([&] { return api.State(high) == "running"; }));
  ASSERT_TRUE(WaitFor([&] {
    job = api.Get("/api/v1/jobs/" + std::to_string(el));
    return job.value("attempts", 0) == 3;
  })) << job.dump();
  EXPECT_EQ(job.value("state", ""), "running");
  const std::string e = std::to_string(el);
  std::vector<std::string> want = {"launch " + e + " attempt 1 ranks 2", "kill " + e,
                                   "launch " + e + " attempt 2 ranks 4", "kill " + e,
                                   "launch " + e + " attempt 3 ranks 2"};
  std::vector<std::string> got;
  for (const std::string& l : lines()) {
    if (l.starts_with("waiting ")) continue;
    if (l.find(" " + e + " ") != std::string::npos || l == "kill " + e) got.push_back(l);
  }
  EXPECT_EQ(got, want);
  {
    // Each relaunch moves to another port: the killed attempt's may linger in TIME_WAIT.
    std::lock_guard lock(*mu);
    const std::vector<int>& ports = RecordingExecutor::ports_[el];
    ASSERT_EQ(ports.size(), 3u);
    EXPECT_NE(ports[1], ports[0]);
    EXPECT_NE(ports[2], ports[1]);
  }
  // The shrink's kill comes before the high-priority job's launch on the GPUs it frees.
  const std::vector<std::string> all = lines();
  const auto shrink_kill = std::find(all.rbegin(), all.rend(), "kill " + e);
  const auto high_launch = std::find_if(all.begin(), all.end(), [&](const std::string& l) {
    return l.starts_with("launch " + std::to_string(high) + " ");
  });
  ASSERT_NE(high_launch, all.end());
  EXPECT_LT(all.rend() - shrink_kill - 1, high_launch - all.begin());
  json events = api.Get("/api/v1/jobs/" + e + "/events");
  std::vector<std::string> resized;
  for (const auto& ev : events["events"]) {
    if (ev["kind"] == "resized") resized.push_back(ev["message"]);
  }
  ASSERT_EQ(resized.size(), 2u) << events.dump();
  EXPECT_TRUE(resized[0].starts_with("resized from 2 to 4 GPUs; restarted: ")) << resized[0];
  EXPECT_TRUE(resized[1].starts_with("resized from 4 to 2 GPUs; restarted: ")) << resized[1];
}

// Issue 15: a node marked down by telemetry was schedulable again after a restart, and an
// uncordon could not clear the verdict while the daemon ran.
TEST(ControllerTest, HealthVerdictsSurviveARestartAndUncordonClearsThem) {
  fs::path dir = TempDir("verdicts");
  SystemClock clock;
  std::string bad, other;
  {
    InProcess d(dir, DryRun(1, clock));
    Api api(d.port());
    json nodes = api.Get("/api/v1/nodes");
    bad = nodes["nodes"][3]["node"];
    other = nodes["nodes"][4]["node"];
    for (const std::string& n : {bad, other}) {
      EXPECT_EQ(api.Send("POST", "/api/v1/nodes/" + n + "/telemetry",
                         R"({"DCGM_FI_DEV_XID_ERRORS": 79})")["http_status"],
                202);
      ASSERT_TRUE(
          WaitFor([&] { return api.Get("/api/v1/nodes/" + n).value("health", "") == "down"; }));
    }
    // While running: an uncordon clears the (sticky) verdict.
    EXPECT_EQ(api.Send("POST", "/api/v1/nodes/" + other + ":uncordon", "{}")["http_status"], 200);
    ASSERT_TRUE(WaitFor([&] {
      return api.Get("/api/v1/nodes/" + other).value("health", "") == "healthy";
    })) << api.Get("/api/v1/nodes/" + other).dump();
  }
  InProcess d(dir, DryRun(1, clock));
  Api api(d.port());
  EXPECT_TRUE(WaitFor([&] {
    return api.Get("/api/v1/nodes/" + bad).value("health", "") == "down";
  })) << api.Get("/api/v1/nodes/" + bad).dump();
  EXPECT_EQ(api.Get("/api/v1/nodes/" + other).value("health", ""), "healthy");
  // A whole-cluster gang must wait: one node is still out.
  std::int64_t all = api.Submit(R"({"name": "all", "gpus": 1024, "estimated_runtime_s": 36000})");
  json waiting;
  EXPECT_TRUE(WaitFor([&] {
    waiting = api.Get("/api/v1/jobs/" + std::to_string(all));
    return waiting.contains("waiting_reason");
  })) << waiting.dump();
  EXPECT_EQ(waiting.value("state", ""), "queued");
  EXPECT_EQ(api.Send("POST", "/api/v1/nodes/" + bad + ":uncordon", "{}")["http_status"], 200);
  ASSERT_TRUE(WaitFor([&] { return api.State(all) == "running"; })) << api.State(all);
}

TEST(ControllerTest, TenantPriorityRangeIsCheckedForTheApi) {
  auto config = sched::ParseSchedulerConfig("tenancy: {tenants: {a: {priority: {max: 5}}}}");
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  SchedulingControllerOptions o;
  o.config = *config;
  SystemClock clock;
  auto cluster = topo::BuildPreset("superpod-h100");
  ASSERT_TRUE(cluster.ok());
  auto c = SchedulingController::Create(std::move(cluster).value(), o, DryRun(1, clock), clock);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  const Controller& api_view = **c;
  EXPECT_TRUE(api_view.CheckTenantPolicy("a", 5).ok());
  Status s = api_view.CheckTenantPolicy("a", 10);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("field 'priority'"), std::string::npos) << s.message();
  EXPECT_TRUE(api_view.CheckTenantPolicy("b", 10).ok());
}

TEST(ControllerTest, PriorityOutsideTheTenantsRangeGets400AtSubmit) {
  fs::path dir = TempDir("tenant-priority");
  auto config = sched::ParseSchedulerConfig("tenancy: {tenants: {default: {priority: {max: 5}}}}");
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  SchedulingControllerOptions o;
  o.config = *config;
  SystemClock clock;
  InProcess d(dir, DryRun(1, clock), o);
  Api api(d.port());
  json refused =
      api.Send("POST", "/api/v1/jobs", R"({"name": "greedy", "gpus": 8, "priority": 10})");
  EXPECT_EQ(refused["http_status"], 400) << refused.dump();
  EXPECT_EQ(refused["error"]["field"], "priority") << refused.dump();
  EXPECT_EQ(api.Get("/api/v1/jobs")["jobs"].size(), 0u) << "a refused job was stored";
  api.Submit(R"({"name": "fair", "gpus": 8, "priority": 5})");
}

TEST(StoredPlacementTest, RoundTripsAndChecksNamesAndMasks) {
  auto cluster = topo::BuildPreset("superpod-h100");
  ASSERT_TRUE(cluster.ok());
  sched::Placement p;
  p.nodes = {{topo::NodeId(3), 0xff}, {topo::NodeId(7), 0x0f}};
  p.span = sched::SpanOf(*cluster, p.nodes);
  std::vector<PlacedNode> stored = ToStoredPlacement(*cluster, p);
  EXPECT_EQ(stored[0].node, cluster->node(topo::NodeId(3)).name);
  Result<sched::Placement> back = FromStoredPlacement(*cluster, stored);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, p);
  EXPECT_FALSE(FromStoredPlacement(*cluster, {{"nosuchnode", 0xff}}).ok());
  EXPECT_FALSE(FromStoredPlacement(*cluster, {{stored[0].node, 0x1ff}}).ok());  // 9 GPUs of 8
  EXPECT_FALSE(FromStoredPlacement(*cluster, {{stored[0].node, 0}}).ok());
  EXPECT_FALSE(FromStoredPlacement(*cluster, {}).ok());
}

TEST(AllocTagTest, RoundTrips) {
  auto cluster = topo::BuildPreset("superpod-h100");
  ASSERT_TRUE(cluster.ok());
  sched::Placement p;
  p.nodes = {{topo::NodeId(3), 0xff}, {topo::NodeId(40), 0x0f}};
  std::string msg = "placed on x because y " + AllocTag(*cluster, p);
  Result<sched::Placement> back = ParseAllocTag(*cluster, msg);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->nodes, p.nodes);
  EXPECT_FALSE(ParseAllocTag(*cluster, "placed on nothing").ok());
  EXPECT_FALSE(ParseAllocTag(*cluster, "[alloc nosuchnode:0xff]").ok());
}

}  // namespace
}  // namespace baton::server
