#include "sim/engine/planner_hooks.h"

#include <gtest/gtest.h>

#include <sstream>

#include "sched/framework/presets.h"
#include "sim/workload/synthetic.h"
#include "topology/builders/fabrics.h"

namespace baton::sim {
namespace {

// Two leaves of 32 nodes (8 H100 each) under one spine, 16:1 above the leaf: a 256-GPU gang
// fits in one leaf.
topo::Cluster TwoLeaves() {
  topo::FatTreeParams p;
  p.layout.nodes = 64;
  p.layout.gpu = "H100-SXM";
  p.tiers = 2;
  p.nodes_per_leaf = 32;
  p.leaf_radix = 64;
  p.leaves_per_spine = 2;
  p.leaf_oversubscription = 16.0;
  auto c = topo::BuildFatTree(p);
  CHECK(c.ok()) << c.status().ToString();
  return std::move(c).value();
}

// Node 0 and node 32 (one per leaf) fail at t = 0 and stay down: a 256-GPU gang can no longer
// sit in one leaf.
FailureSource OnePerLeafDown() {
  auto left = std::make_shared<std::vector<FailureEvent>>(
      std::vector<FailureEvent>{{Seconds(0), topo::NodeId(0), 0, Hours(24000)},
                                {Seconds(0), topo::NodeId(32), 0, Hours(24000)}});
  return [left]() -> Result<std::optional<FailureEvent>> {
    if (left->empty()) return std::optional<FailureEvent>();
    FailureEvent f = left->front();
    left->erase(left->begin());
    return std::optional<FailureEvent>(f);
  };
}

struct PlannedRun {
  SimResult result;
  std::vector<double> slowdowns;  // what the planner said at each start
  PlanStats stats;
};

// One synthetic pre-training job (llama3-8b on 256 GPUs) under `policy`.
PlannedRun RunOnePretrain(planning::PlannerEstimator& planner, const std::string& policy,
                          bool scattered) {
  SyntheticParams sp;
  sp.jobs = 1;
  sp.share_debug = sp.share_eval = sp.share_finetune = 0;
  sp.max_pretrain_gpus = 256;
  auto trace = MakeSyntheticTrace(sp, 7);
  PlannedRun run;
  SimConfig config;
  config.policy = policy;
  config.scheduler = *sched::PolicyPreset(policy);
  UsePlanner(planner, config, &run.stats);
  auto inner = config.slowdown;
  config.slowdown = [&run, inner](const sched::GangJob& j, const sched::Placement& p,
                                  const topo::Cluster& c) {
    run.slowdowns.push_back(inner(j, p, c));
    return run.slowdowns.back();
  };
  auto r =
      RunSimulation(TwoLeaves(), config, *trace, scattered ? OnePerLeafDown() : FailureSource([] {
                      return Result<std::optional<FailureEvent>>(std::nullopt);
                    }));
  CHECK(r.ok()) << r.status().ToString();
  run.result = std::move(*r);
  return run;
}

TEST(PlannerHooksTest, PretrainModelReadsTheKind) {
  EXPECT_EQ(PretrainModel("pretrain/llama3-8b"), "llama3-8b");
  EXPECT_EQ(PretrainModel("pretrain/"), "");
  EXPECT_EQ(PretrainModel("finetune"), "");
  EXPECT_EQ(PretrainModel("ResNet-50"), "");
}

TEST(PlannerHooksTest, ScatteredPretrainRunsLongerByThePlannersSlowdown) {
  planning::PlannerEstimator planner(TwoLeaves());
  for (const std::string policy : {"fifo", "topo"}) {
    PlannedRun compact = RunOnePretrain(planner, policy, false);
    PlannedRun scattered = RunOnePretrain(planner, policy, true);
    for (PlannedRun* run : {&compact, &scattered}) {
      EXPECT_EQ(run->stats.with_plan, 1);
      EXPECT_EQ(run->stats.without_plan, 0);
      ASSERT_EQ(run->slowdowns.size(), 1u);
      ASSERT_EQ(run->result.jobs.size(), 1u);
      EXPECT_EQ(run->result.jobs[0].outcome, JobOutcome::kCompleted);
    }
    const JobRecord& a = compact.result.jobs[0];
    const JobRecord& b = scattered.result.jobs[0];
    EXPECT_EQ(compact.slowdowns[0], 1.0) << policy;
    EXPECT_DOUBLE_EQ(a.end_s - a.first_start_s, a.work_s);
    EXPECT_GT(scattered.slowdowns[0], 1.0) << policy;
    EXPECT_NEAR(b.end_s - b.first_start_s, b.work_s * scattered.slowdowns[0], 1e-6 * b.work_s)
        << policy;
    EXPECT_EQ(b.work_s, a.work_s);
  }
}

TEST(PlannerHooksTest, SameSeedSameRun) {
  planning::PlannerEstimator planner(TwoLeaves());
  PlannedRun a = RunOnePretrain(planner, "topo", true);
  planning::PlannerEstimator fresh(TwoLeaves());
  PlannedRun b = RunOnePretrain(fresh, "topo", true);
  EXPECT_EQ(a.slowdowns, b.slowdowns);
  ASSERT_EQ(a.result.jobs.size(), b.result.jobs.size());
  for (std::size_t i = 0; i < a.result.jobs.size(); ++i) {
    EXPECT_EQ(a.result.jobs[i].end_s, b.result.jobs[i].end_s);
    EXPECT_EQ(a.result.jobs[i].first_start_s, b.result.jobs[i].first_start_s);
  }
  EXPECT_EQ(a.result.summary.effective_util, b.result.summary.effective_util);
}

TEST(PlannerHooksTest, NoFeasiblePlanKeepsTheLevelPenalty) {
  // 405B on one node has no plan; an unknown model has none either; other kinds are untouched.
  const std::string jsonl =
      R"({"id":"big","submit_s":0,"duration_s":100,"gpus":8,"kind":"pretrain/llama3-405b"})"
      "\n"
      R"({"id":"odd","submit_s":0,"duration_s":100,"gpus":8,"kind":"pretrain/no-such-model"})"
      "\n"
      R"({"id":"ft","submit_s":0,"duration_s":100,"gpus":8,"kind":"finetune"})"
      "\n";
  std::istringstream in(jsonl);
  auto reader = MakeTraceReader("jsonl", in, "test.jsonl");
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  planning::PlannerEstimator planner(TwoLeaves());
  PlanStats stats;
  SimConfig config;
  config.scheduler = *sched::PolicyPreset("fifo");
  UsePlanner(planner, config, &stats);
  auto r = RunSimulation(TwoLeaves(), config, **reader);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(stats.with_plan, 0);
  EXPECT_EQ(stats.without_plan, 2);
  EXPECT_EQ(stats.without_which,
            (std::set<std::string>{"llama3-405b on 8 GPUs",
                                   "no-such-model: not in the model catalogue"}));
  for (const JobRecord& j : r->jobs) EXPECT_DOUBLE_EQ(j.end_s, 100) << j.id;
}

}  // namespace
}  // namespace baton::sim
