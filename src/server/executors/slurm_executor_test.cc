// The Slurm executor's pure parts: squeue / sinfo JSON as Slurm 22.05 prints it, node conditions,
// the batch script and the sbatch command line. The executor against a real Slurm is in
// slurm_integration_test.cc.
#include "server/executors/slurm_executor.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "server/executors/command.h"

namespace baton::server {
namespace {

// Trimmed from `squeue --json --states=all` and `sinfo --json` of Slurm 22.05.8.
constexpr const char* kSqueue = R"js({"meta": {"plugin": {"type": "openapi\/v0.0.38"}},
  "errors": [],
  "jobs": [
    {"job_id": 7, "name": "baton-3-1795960000-1", "job_state": "FAILED",
     "state_reason": "NonZeroExitCode", "nodes": "n[05-06]", "exit_code": 768,
     "comment": ""},
    {"job_id": 8, "name": "baton-4-1795960001-2", "job_state": "RUNNING",
     "state_reason": "None", "nodes": "n[09-12]", "exit_code": 0},
    {"job_id": 9, "name": "other", "job_state": "PENDING", "state_reason": "Resources",
     "nodes": "", "exit_code": 0}]})js";

constexpr const char* kSinfo = R"js({"meta": {}, "errors": [], "nodes": [
    {"name": "n01", "address": "127.0.0.1", "state": "idle", "state_flags": [], "reason": "",
     "gres": "gpu:h100:8"},
    {"name": "n02", "address": "10.0.0.2", "state": "down", "state_flags": ["NOT_RESPONDING"],
     "reason": "Not responding", "gres": "gpu:h100:8"},
    {"name": "n03", "address": "10.0.0.3", "state": "idle", "state_flags": ["DRAIN"],
     "reason": "bad fan", "gres": "gpu:8(S:0-1)"},
    {"name": "n04", "address": "10.0.0.4", "state": "idle", "state_flags": ["DRAIN"],
     "reason": "baton: health rules", "gres": "gpu:h100:4,shard:h100:8"},
    {"name": "n05", "address": "10.0.0.5", "state": "allocated", "state_flags":
     ["NOT_RESPONDING"], "reason": "", "gres": "gpu:h100:8"}]})js";

TEST(SlurmParseTest, SqueueJobsWithStatesNodesAndExitCodes) {
  auto jobs = ParseSqueueJson(kSqueue);
  ASSERT_TRUE(jobs.ok()) << jobs.status().ToString();
  ASSERT_EQ(jobs->size(), 3u);
  const SlurmJob& j = (*jobs)[0];
  EXPECT_EQ(j.id, 7);
  EXPECT_EQ(j.name, "baton-3-1795960000-1");
  EXPECT_EQ(j.state, "FAILED");
  EXPECT_EQ(j.reason, "NonZeroExitCode");
  EXPECT_EQ(j.nodes, (std::vector<std::string>{"n05", "n06"}));
  EXPECT_EQ(j.exit_code, 3);
  EXPECT_EQ(j.exit_signal, 0);
  EXPECT_EQ((*jobs)[1].nodes.size(), 4u);
  EXPECT_TRUE((*jobs)[2].nodes.empty());
  EXPECT_TRUE(IsTerminalSlurmState("NODE_FAIL"));
  EXPECT_FALSE(IsTerminalSlurmState("COMPLETING"));
}

TEST(SlurmParseTest, SinfoNodesAndTheirConditionForBaton) {
  auto nodes = ParseSinfoJson(kSinfo);
  ASSERT_TRUE(nodes.ok()) << nodes.status().ToString();
  ASSERT_EQ(nodes->size(), 5u);
  EXPECT_EQ((*nodes)[0].gpus, 8);
  EXPECT_EQ((*nodes)[2].gpus, 8);
  EXPECT_EQ((*nodes)[3].gpus, 4);
  EXPECT_EQ((*nodes)[1].address, "10.0.0.2");
  using topo::NodeHealth;
  EXPECT_EQ(NodeHealthFromSlurm((*nodes)[0]), NodeHealth::kHealthy);
  EXPECT_EQ(NodeHealthFromSlurm((*nodes)[1]), NodeHealth::kDown);
  EXPECT_EQ(NodeHealthFromSlurm((*nodes)[2]), NodeHealth::kDraining);  // drained by an admin
  EXPECT_EQ(NodeHealthFromSlurm((*nodes)[3]), NodeHealth::kHealthy);   // drained by baton
  EXPECT_EQ(NodeHealthFromSlurm((*nodes)[4]), NodeHealth::kDown);
  SlurmNode restarted{"n06", "10.0.0.6", "unknown", {}, "", 8};
  EXPECT_EQ(NodeHealthFromSlurm(restarted), std::nullopt);  // no news, not bad news
  restarted.flags = {"NOT_RESPONDING"};
  EXPECT_EQ(NodeHealthFromSlurm(restarted), NodeHealth::kDown);
}

TEST(SlurmParseTest, MalformedOutputIsAnErrorNamingWhat) {
  EXPECT_NE(ParseSqueueJson("squeue: error: bad").status().message().find("not a JSON object"),
            std::string::npos);
  EXPECT_NE(ParseSqueueJson(R"({"jobs": 3})").status().message().find("'jobs'"), std::string::npos);
  EXPECT_NE(ParseSqueueJson(R"({"jobs": [{"job_id": 1}]})").status().message().find("jobs[0]"),
            std::string::npos);
  EXPECT_NE(ParseSinfoJson(R"({"nodes": [{"name": "a"}]})").status().message().find("nodes[0]"),
            std::string::npos);
}

LaunchRequest TwoNodeLaunch() {
  LaunchRequest r;
  r.job = 12;
  r.name = "llm";
  r.tenant = "team-a";
  r.command = {"python3", "train.py", "--note", "it's"};
  r.master_addr = "n06";
  r.master_port = 29512;
  r.estimated_runtime = Seconds(3600);
  // Rank order starts on n06: Slurm's sorted node order would put n05 first.
  for (int i = 0; i < 4; ++i)
    r.ranks.push_back({i, i < 2 ? "n06" : "n05", i < 2 ? 0 : 1, i % 2, i % 2});
  return r;
}

TEST(SlurmLaunchTest, SbatchAsksForBatonsNodesAndRanks) {
  SlurmOptions o;
  o.work_dir = "/var/baton";
  o.partition = "gpu";
  auto args = SbatchArgs(TwoNodeLaunch(), o, "baton-12-5-1", "/var/baton/baton-12-5-1.sbatch");
  std::vector<std::string> want = {"sbatch",
                                   "--parsable",
                                   "--no-requeue",
                                   "--job-name=baton-12-5-1",
                                   "--nodes=2",
                                   "--nodelist=n06,n05",
                                   "--ntasks=4",
                                   "--gres=gpu:2",
                                   "--output=/var/baton/baton-12-5-1.out",
                                   "--chdir=/var/baton",
                                   "--partition=gpu",
                                   "--time=120",
                                   "/var/baton/baton-12-5-1.sbatch"};
  EXPECT_EQ(args, want);
  EXPECT_EQ(HostfileText(TwoNodeLaunch()), "n06\nn06\nn05\nn05\n");
}

// The script is run for real by bash with Slurm's variables faked: each rank gets baton's rank
// environment, and the command's arguments arrive intact (quoting).
TEST(SlurmLaunchTest, BatchScriptGivesEachRankItsEnvironment) {
  LaunchRequest r = TwoNodeLaunch();
  std::string script = BatchScript(r, "10.0.0.6", "/tmp/hosts");
  EXPECT_NE(script.find("export MASTER_ADDR='10.0.0.6' MASTER_PORT=29512 WORLD_SIZE=4"),
            std::string::npos)
      << script;
  EXPECT_NE(script.find("srun --distribution=arbitrary --ntasks=4"), std::string::npos);
  EXPECT_NE(script.find("BATON_ATTEMPT=1\n"), std::string::npos) << script;
  EXPECT_EQ(script.find("BATON_CHECKPOINT_DIR"), std::string::npos) << "none asked for";
  r.attempt = 3;
  r.checkpoint_dir = "/shared/ckpt/job-7";
  script = BatchScript(r, "10.0.0.6", "/tmp/hosts");
  EXPECT_NE(script.find("BATON_ATTEMPT=3\n"), std::string::npos) << script;
  EXPECT_NE(script.find("export BATON_CHECKPOINT_DIR='/shared/ckpt/job-7'\nmkdir -p"),
            std::string::npos)
      << script;
  r.checkpoint_dir.clear();
  // Run the per-rank program the way srun would on n05 for its second rank (SLURM_PROCID 3).
  std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("baton-sbatch-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::filesystem::path fake_srun = dir / "srun";
  // A stand-in srun: drops its options, then runs `bash -c PROGRAM NAME ARGS...` as rank 3.
  std::ofstream(fake_srun) << "#!/bin/bash\nwhile [[ $1 == --* ]]; do shift; done\n"
                              "export SLURMD_NODENAME=n05 SLURM_PROCID=3 SLURM_LOCALID=1 "
                              "CUDA_VISIBLE_DEVICES=4,5\nexec \"$@\"\n";
  std::filesystem::permissions(fake_srun, std::filesystem::perms::owner_all);
  r.command = {"bash", "-c",
               "echo RANK=$RANK LOCAL_RANK=$LOCAL_RANK NODE_RANK=$NODE_RANK "
               "LOCAL_WORLD_SIZE=$LOCAL_WORLD_SIZE WORLD_SIZE=$WORLD_SIZE "
               "MASTER_ADDR=$MASTER_ADDR MASTER_PORT=$MASTER_PORT CUDA=$CUDA_VISIBLE_DEVICES "
               "ARG=\"$0\"",
               "it's quoted"};
  std::ofstream(dir / "job.sbatch") << BatchScript(r, "10.0.0.6", "/tmp/hosts");
  auto out = RunCommand({"bash", (dir / "job.sbatch").string()},
                        {{"PATH", dir.string() + ":" + std::getenv("PATH")}}, Seconds(10));
  std::filesystem::remove_all(dir);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(out->exit_code, 0) << out->err;
  EXPECT_EQ(out->out,
            "RANK=3 LOCAL_RANK=1 NODE_RANK=1 LOCAL_WORLD_SIZE=2 WORLD_SIZE=4 "
            "MASTER_ADDR=10.0.0.6 MASTER_PORT=29512 CUDA=5 ARG=it's quoted\n");
}

// Replicas: the batch job a deposed leader submits after a newer leader took over starts
// nothing; one the new leader adopted, or one of the current epoch, runs.
TEST(SlurmLaunchTest, ABatchJobOfADeposedLeaderStartsNothing) {
  auto dir =
      std::filesystem::temp_directory_path() / ("baton_slurm_fence_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "srun") << "#!/bin/bash\necho ranks started\n";
  std::filesystem::permissions(dir / "srun", std::filesystem::perms::owner_all);
  LaunchRequest r;
  r.job = 7;
  r.attempt = 2;
  r.epoch = 1;
  r.command = {"true"};
  r.ranks = {{0, "n01", 0, 0, 0}};
  auto run = [&] {
    std::ofstream(dir / "job.sbatch")
        << BatchScript(r, "n01", "/tmp/hosts", dir.string(), "baton-7-2");
    return RunCommand({"bash", (dir / "job.sbatch").string()},
                      {{"PATH", dir.string() + ":" + std::getenv("PATH")}}, Seconds(10));
  };
  auto same = run();  // no epoch file yet: nobody took over
  ASSERT_TRUE(same.ok());
  EXPECT_EQ(same->out, "ranks started\n");
  std::ofstream(dir / "leader.epoch") << "2\n";
  auto fenced = run();
  ASSERT_TRUE(fenced.ok());
  EXPECT_EQ(fenced->exit_code, 75);
  EXPECT_EQ(fenced->out, "") << "the deposed leader's batch job started its ranks";
  EXPECT_NE(fenced->err.find("epoch 2 leads now"), std::string::npos) << fenced->err;
  std::ofstream(dir / "baton-7-2.adopted") << "2\n";
  auto adopted = run();
  ASSERT_TRUE(adopted.ok());
  EXPECT_EQ(adopted->out, "ranks started\n");
  std::filesystem::remove_all(dir);
}

TEST(CommandTest, CapturesOutputExitCodeAndTimesOut) {
  auto r = RunCommand({"bash", "-c", "echo out; echo err >&2; exit 7"}, {}, Seconds(10));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->out, "out\n");
  EXPECT_EQ(r->err, "err\n");
  EXPECT_EQ(r->exit_code, 7);
  auto env = RunCommand({"bash", "-c", "echo $BATON_X"}, {{"BATON_X", "y"}}, Seconds(10));
  ASSERT_TRUE(env.ok());
  EXPECT_EQ(env->out, "y\n");
  auto slow = RunCommand({"bash", "-c", "sleep 30"}, {}, Seconds(0.3));
  ASSERT_TRUE(slow.ok());
  EXPECT_TRUE(slow->timed_out);
  EXPECT_FALSE(slow->ok());
  EXPECT_EQ(RunCommand({"/no/such/program"}, {}, Seconds(1)).status().code(),
            StatusCode::kUnavailable);
}

}  // namespace
}  // namespace baton::server
