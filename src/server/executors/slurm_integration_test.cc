// baton against a real Slurm 22.05 (16 nodes x 8 fake GPUs under 4 leaf switches, started by
// testing::FakeSlurm from scripts/slurm-fake-cluster.sh): the daemon, with the Slurm executor and
// the cluster read from Slurm's own slurm.conf and topology.conf, places a 4-node job inside one
// leaf and Slurm runs it with baton's rank environment; a node whose slurmd dies under a running
// job gets the job requeued onto healthy nodes; the daemon rides out a controller restart without
// losing or duplicating jobs; baton's drain reaches Slurm; a launch Slurm refuses carries Slurm's
// reason. Skipped, saying why, where Slurm cannot run (not root, not installed). Every Slurm
// daemon is stopped by its PID file when the suite ends, pass or fail.
#include <gtest/gtest.h>
#include <httplib.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <thread>

#include "server/executors/slurm_executor.h"
#include "server/scheduling_controller.h"
#include "server/server.h"
#include "server/testing/fake_slurm.h"
#include "server/testing/wait_for.h"

namespace baton::server {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using namespace std::chrono_literals;

constexpr const char* kToken = "Bearer slurm-admin-token-0123456789";

// Slurm answers in seconds: look every 100 ms.
bool WaitFor(const std::function<bool()>& pred, std::chrono::milliseconds limit) {
  return testing::WaitFor(pred, limit, 100ms);
}

class SlurmTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    slurm_ = new testing::FakeSlurm();
    skip_ = slurm_->Unavailable();
    // Installed and root but not starting is a failure, not a reason to skip: CI has both.
    if (skip_.empty() && !slurm_->Start()) broken_ = "the fake Slurm cluster did not start";
  }
  static void TearDownTestSuite() {
    delete slurm_;  // stops slurmctld and every slurmd by their PID files
    slurm_ = nullptr;
  }

  void SetUp() override {
    if (!skip_.empty()) GTEST_SKIP() << skip_;
    ASSERT_TRUE(broken_.empty()) << broken_ << " (see " << slurm_->dir().string() << ".log)";
    ++test_index_;
    dir_ = fs::temp_directory_path() /
           ("baton-slurm-daemon-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    std::ofstream(dir_ / "auth.yaml")
        << "principals:\n  - {name: ops, role: admin, token: slurm-admin-token-0123456789}\n";
  }
  void TearDown() override { StopDaemon(); }

  // Each test's daemon starts a fresh store (job ids from 1): its own batch job name prefix.
  static std::string Prefix() {
    return "bt" + std::to_string(::getpid()) + "x" + std::to_string(test_index_);
  }

  SlurmOptions Options() const {
    SlurmOptions o;
    o.slurm_conf = slurm_->conf();
    o.work_dir = (dir_ / "jobs").string();
    o.poll_interval = Seconds(0.5);
    o.command_timeout = Seconds(3);  // so that the controller's outage below times commands out
    o.backoff_initial = Seconds(0.25);
    o.backoff_max = Seconds(2);
    o.job_prefix = Prefix();
    return o;
  }

  void StartDaemon() {
    auto cluster = ClusterFromSlurmConf(slurm_->conf());
    ASSERT_TRUE(cluster.ok()) << cluster.status().ToString();
    auto c = SchedulingController::Create(
        std::move(cluster).value(), {}, std::make_unique<SlurmExecutor>(Options(), clock_), clock_);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    controller_ = std::move(c).value();
    ServerOptions options;
    options.port = 0;
    options.db_path = (dir_ / "baton.db").string();
    options.auth_config_path = (dir_ / "auth.yaml").string();
    options.worker_threads = 4;
    auto s = Server::Create(options, controller_.get());
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    server_ = std::move(s).value();
    thread_ = std::thread([this] { EXPECT_TRUE(server_->Serve().ok()); });
    client_ = std::make_unique<httplib::Client>("127.0.0.1", server_->port());
    client_->set_read_timeout(10);
  }
  void StopDaemon() {
    if (!server_) return;
    server_->Shutdown();
    thread_.join();
    server_.reset();
    controller_.reset();
  }

  json Get(const std::string& path) {
    auto res = client_->Get(path.c_str(), {{"Authorization", kToken}});
    if (!res) return json{{"http_error", httplib::to_string(res.error())}};
    json body = json::parse(res->body, nullptr, false);
    body["http_status"] = res->status;
    return body;
  }
  json Post(const std::string& path, const std::string& body) {
    auto res = client_->Post(path.c_str(), {{"Authorization", kToken}}, body, "application/json");
    if (!res) return json{{"http_error", httplib::to_string(res.error())}};
    json out = json::parse(res->body, nullptr, false);
    out["http_status"] = res->status;
    return out;
  }
  std::int64_t Submit(const std::string& spec) {
    json r = Post("/api/v1/jobs", spec);
    EXPECT_EQ(r["http_status"], 201) << r.dump();
    return r.value("id", std::int64_t{-1});
  }
  json Job(std::int64_t id) { return Get("/api/v1/jobs/" + std::to_string(id)); }
  std::string State(std::int64_t id) { return Job(id).value("state", "?"); }
  std::vector<json> Events(std::int64_t id) {
    json body = Get("/api/v1/jobs/" + std::to_string(id) + "/events");
    std::vector<json> out;
    for (const auto& e : body["events"]) out.push_back(e);
    return out;
  }
  std::vector<std::string> Kinds(std::int64_t id) {
    std::vector<std::string> out;
    for (const json& e : Events(id)) out.push_back(e["kind"]);
    return out;
  }
  // Batch jobs Slurm has (or had) for baton job `id`.
  int SlurmJobsFor(std::int64_t id) {
    std::string out = (dir_ / "squeue.txt").string();
    slurm_->Client("squeue -h -t all -o %j > " + out);
    std::ifstream in(out);
    std::string line, prefix = Prefix() + "-" + std::to_string(id) + "-";
    int n = 0;
    while (std::getline(in, line)) n += line.rfind(prefix, 0) == 0 ? 1 : 0;
    return n;
  }
  std::string ReadOutput(std::int64_t id) {
    std::string prefix = Prefix() + "-" + std::to_string(id) + "-";
    std::string text;
    for (const auto& e : fs::directory_iterator(dir_ / "jobs")) {
      std::string name = e.path().filename().string();
      if (name.rfind(prefix, 0) == 0 && e.path().extension() == ".out") {
        std::ifstream in(e.path());
        std::stringstream ss;
        ss << in.rdbuf();
        text += ss.str();
      }
    }
    return text;
  }

  static testing::FakeSlurm* slurm_;
  static std::string skip_;
  static std::string broken_;
  static int test_index_;
  fs::path dir_;
  SystemClock clock_;
  std::unique_ptr<SchedulingController> controller_;
  std::unique_ptr<Server> server_;
  std::thread thread_;
  std::unique_ptr<httplib::Client> client_;
};

testing::FakeSlurm* SlurmTest::slurm_ = nullptr;
std::string SlurmTest::skip_;
std::string SlurmTest::broken_;
int SlurmTest::test_index_ = 0;

std::set<std::string> PlacedNodes(const json& job) {
  std::set<std::string> nodes;
  for (const auto& n : job["placement"]["nodes"]) nodes.insert(n["node"].get<std::string>());
  return nodes;
}

// The leaf switch of a node of the fake cluster: n01-n04 leaf1, ..., n13-n16 leaf4.
int LeafOf(const std::string& node) { return (std::stoi(node.substr(1)) - 1) / 4; }

TEST_F(SlurmTest, FourNodeJobPlacedInOneLeafRunsWithItsRankEnvironment) {
  StartDaemon();
  std::int64_t id = Submit(R"({"name": "ranks", "gpus": 32, "gpus_per_node": 8,
      "topology": {"required": "leaf"}, "estimated_runtime_s": 60,
      "command": ["bash", "-c", "echo rank=$RANK world=$WORLD_SIZE local=$LOCAL_RANK node=$SLURMD_NODENAME node_rank=$NODE_RANK master=$MASTER_ADDR:$MASTER_PORT gpu=$CUDA_VISIBLE_DEVICES"]})");
  json running;
  ASSERT_TRUE(WaitFor(
      [&] {
        running = Job(id);
        return running.contains("placement") || running.value("state", "") == "succeeded";
      },
      30s))
      << running.dump();
  ASSERT_TRUE(WaitFor([&] { return State(id) == "succeeded"; }, 60s)) << Job(id).dump();
  EXPECT_EQ(Kinds(id), (std::vector<std::string>{"queued", "placed", "finished"}));
  std::string placed = Events(id)[1]["message"];
  EXPECT_NE(placed.find("at level leaf"), std::string::npos) << placed;
  std::string finished = Events(id)[2]["message"];
  EXPECT_NE(finished.find("COMPLETED"), std::string::npos) << finished;

  // Every rank printed its environment: 32 ranks, 8 per node, 4 nodes under one leaf.
  std::string out = ReadOutput(id);
  std::istringstream lines(out);
  std::string line;
  std::set<int> ranks, leaves;
  std::set<std::string> nodes;
  while (std::getline(lines, line)) {
    if (line.rfind("rank=", 0) != 0) continue;
    ranks.insert(std::stoi(line.substr(5)));
    EXPECT_NE(line.find("world=32"), std::string::npos) << line;
    EXPECT_NE(line.find("master=127.0.0.1:"), std::string::npos) << line;  // n??'s NodeAddr
    std::string node = line.substr(line.find("node=") + 5, 3);
    nodes.insert(node);
    leaves.insert(LeafOf(node));
  }
  EXPECT_EQ(ranks.size(), 32u) << out;
  EXPECT_EQ(nodes.size(), 4u) << out;
  EXPECT_EQ(leaves.size(), 1u) << out;
  EXPECT_EQ(SlurmJobsFor(id), 1);
}

TEST_F(SlurmTest, NodeFailureRequeuesTheJobOntoHealthyNodes) {
  StartDaemon();
  std::int64_t id = Submit(R"({"name": "survivor", "gpus": 32, "gpus_per_node": 8,
      "topology": {"required": "leaf"}, "estimated_runtime_s": 60,
      "command": ["bash", "-c", "sleep 6; echo done on $SLURMD_NODENAME"]})");
  json job;
  ASSERT_TRUE(WaitFor(
      [&] {
        job = Job(id);
        return job.contains("placement") && SlurmJobsFor(id) == 1;
      },
      30s))
      << job.dump();
  std::set<std::string> first = PlacedNodes(job);
  ASSERT_EQ(first.size(), 4u);
  std::string victim = *first.begin();
  std::this_thread::sleep_for(2s);  // let it start running in Slurm
  ASSERT_TRUE(slurm_->StopNode(victim));
  // Slurm notices (NOT_RESPONDING, then DOWN); baton takes the node out and requeues the job,
  // which runs again elsewhere and completes.
  ASSERT_TRUE(WaitFor(
      [&] {
        for (const std::string& k : Kinds(id)) {
          if (k == "requeued") return true;
        }
        return false;
      },
      60s))
      << json(Events(id)).dump();
  ASSERT_TRUE(WaitFor([&] { return State(id) == "succeeded"; }, 90s)) << json(Events(id)).dump();
  std::vector<json> events = Events(id);
  std::string second_placement;
  for (const json& e : events) {
    if (e["kind"] == "placed") second_placement = e["message"];
  }
  EXPECT_EQ(second_placement.find(victim + " "), std::string::npos) << second_placement;
  EXPECT_EQ(second_placement.find(victim + ","), std::string::npos) << second_placement;
  EXPECT_EQ(SlurmJobsFor(id), 2);  // the lost run and the rerun, never two at once
  ASSERT_TRUE(slurm_->StartNode(victim));
}

TEST_F(SlurmTest, ControllerRestartLosesNothingAndLaunchesNothingTwice) {
  StartDaemon();
  std::int64_t before = Submit(R"({"name": "before", "gpus": 16, "gpus_per_node": 8,
      "command": ["bash", "-c", "sleep 4"]})");
  ASSERT_TRUE(WaitFor([&] { return SlurmJobsFor(before) == 1; }, 30s));
  ASSERT_TRUE(slurm_->StopController());
  // Submitted while Slurm is down: acknowledged, placed by baton, launched once Slurm is back.
  std::int64_t during = Submit(R"({"name": "during", "gpus": 8,
      "command": ["bash", "-c", "echo ok"]})");
  ASSERT_TRUE(WaitFor([&] { return State(during) == "running"; }, 30s)) << Job(during).dump();
  std::this_thread::sleep_for(7s);  // sbatch and squeue time out meanwhile: unavailable, backoff
  ASSERT_TRUE(slurm_->StartController());
  ASSERT_TRUE(
      WaitFor([&] { return State(before) == "succeeded" && State(during) == "succeeded"; }, 90s))
      << Job(before).dump() << Job(during).dump();
  EXPECT_EQ(SlurmJobsFor(before), 1);
  EXPECT_EQ(SlurmJobsFor(during), 1);  // an sbatch that timed out was looked for, not repeated
}

// A daemon restart (an upgrade) leaves the batch job running in Slurm; the new daemon reattaches
// it (one squeue for all) and follows it to the end.
TEST_F(SlurmTest, DaemonRestartReattachesTheRunningBatchJob) {
  StartDaemon();
  std::int64_t id = Submit(R"({"name": "long", "gpus": 16, "gpus_per_node": 8,
      "command": ["bash", "-c", "sleep 8"]})");
  ASSERT_TRUE(WaitFor([&] { return SlurmJobsFor(id) == 1; }, 30s));
  StopDaemon();
  EXPECT_EQ(slurm_->Client("squeue -h -t pending,configuring,running -o %j | grep -q " + Prefix() +
                           "-" + std::to_string(id) + "-"),
            0);  // still running without baton
  StartDaemon();
  ASSERT_TRUE(WaitFor([&] { return State(id) == "succeeded"; }, 60s)) << Job(id).dump();
  std::vector<std::string> kinds = Kinds(id);
  EXPECT_NE(std::find(kinds.begin(), kinds.end(), "adopted"), kinds.end()) << json(kinds).dump();
  EXPECT_EQ(SlurmJobsFor(id), 1);
}

TEST_F(SlurmTest, BatonsDrainReachesSlurmAndUncordonResumes) {
  StartDaemon();
  json r = Post("/api/v1/nodes/n07:drain", R"({"reason": "fan"})");
  ASSERT_LT(r["http_status"].get<int>(), 300) << r.dump();
  std::string reason = (dir_ / "reason.txt").string();
  ASSERT_TRUE(WaitFor(
      [&] {
        slurm_->Client("sinfo -h -n n07 -o '%T %E' > " + reason);
        std::ifstream in(reason);
        std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        return text.find("drain") != std::string::npos && text.find("baton:") != std::string::npos;
      },
      20s));
  r = Post("/api/v1/nodes/n07:uncordon", "{}");
  ASSERT_LT(r["http_status"].get<int>(), 300) << r.dump();
  ASSERT_TRUE(WaitFor(
      [&] { return slurm_->Client("sinfo -h -n n07 -t idle -o %N | grep -q n07") == 0; }, 20s));
}

TEST_F(SlurmTest, ALaunchSlurmRefusesCarriesSlurmsReason) {
  SlurmOptions o = Options();
  o.partition = "no-such-partition";
  SlurmExecutor executor(o, clock_);
  LaunchRequest r;
  r.job = 99;
  r.name = "refused";
  r.command = {"true"};
  r.ranks = {{0, "n01", 0, 0, 0}};
  r.master_addr = "n01";
  ASSERT_TRUE(executor.Launch(r).ok());
  std::vector<ExitReport> exits;
  ASSERT_TRUE(WaitFor(
      [&] {
        for (ExitReport& e : executor.Poll()) exits.push_back(e);
        return !exits.empty();
      },
      20s));
  EXPECT_EQ(exits[0].kind, ExitKind::kFailed);
  EXPECT_NE(exits[0].message.find("Slurm refused the job: sbatch: error: invalid partition"),
            std::string::npos)
      << exits[0].message;
}

}  // namespace
}  // namespace baton::server
