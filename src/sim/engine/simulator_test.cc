#include "sim/engine/simulator.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <sstream>

#include "sched/framework/presets.h"
#include "sim/engine/event_queue.h"
#include "topology/builders/fabrics.h"

namespace baton::sim {
namespace {

topo::Cluster SmallCluster(int nodes) {
  topo::FatTreeParams p;
  p.layout.nodes = nodes;
  p.tiers = 2;
  p.nodes_per_leaf = 2;
  p.leaves_per_spine = 4;
  auto c = topo::BuildFatTree(p);
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return std::move(*c);
}

Result<SimResult> Simulate(const std::string& jsonl, const std::string& policy, int nodes,
                           SimConfig config = {}) {
  std::istringstream in(jsonl);
  auto reader = MakeTraceReader("jsonl", in, "test.jsonl");
  if (!reader.ok()) return reader.status();
  auto sc = sched::PolicyPreset(policy);
  if (!sc.ok()) return sc.status();
  config.policy = policy;
  config.scheduler = *sc;
  return RunSimulation(SmallCluster(nodes), config, **reader);
}

TEST(EventQueueTest, OrdersByTimeThenSequence) {
  EventQueue<int> q;
  q.Push(2.0, 1);
  q.Push(1.0, 2);
  q.Push(2.0, 3);
  q.Push(1.0, 4);
  std::vector<int> order;
  while (!q.empty()) order.push_back(q.Pop().payload);
  EXPECT_EQ(order, (std::vector<int>{2, 4, 1, 3}));
}

TEST(ToGangJobTest, TaskSizeRule) {
  SimConfig c;
  TraceJob t;
  t.id = "a";
  t.duration = Seconds(10);
  for (auto [gpus, task] :
       std::vector<std::pair<int, int>>{{4, 0}, {8, 0}, {16, 8}, {12, 6}, {9, 3}, {13, 1}}) {
    t.gpus = gpus;
    auto g = ToGangJob(t, c, 8);
    ASSERT_TRUE(g.ok());
    EXPECT_EQ(g->gpus_per_task, task) << gpus;
  }
  t.duration.reset();
  EXPECT_FALSE(ToGangJob(t, c, 8).ok());
}

TEST(SimulatorTest, FifoSerialisesJobsThatDoNotFitTogether) {
  // Two 16-GPU jobs on a 16-GPU cluster: the second waits for the first.
  const std::string trace = R"({"id":"a","submit_s":0,"duration_s":100,"gpus":16})"
                            "\n"
                            R"({"id":"b","submit_s":10,"duration_s":50,"gpus":16})"
                            "\n";
  SimConfig config;
  config.level_slowdown.fill(1.0);
  auto r = Simulate(trace, "fifo", 2, config);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->jobs.size(), 2u);
  EXPECT_EQ(r->summary.completed, 2);
  EXPECT_DOUBLE_EQ(r->jobs[0].end_s, 100);
  EXPECT_DOUBLE_EQ(r->jobs[1].first_start_s, 100);
  EXPECT_DOUBLE_EQ(r->jobs[1].end_s, 150);
  EXPECT_DOUBLE_EQ(r->summary.avg_jct_s, (100.0 + 140.0) / 2);
  EXPECT_DOUBLE_EQ(r->summary.makespan_s, 150);
  EXPECT_NEAR(r->summary.allocated_util, 1.0, 1e-9);
}

TEST(SimulatorTest, StrictFifoBlocksBehindTheHeadFirstFitPassesIt) {
  // 16 GPUs. a (8) runs; b (16) cannot fit until a ends at 100; c (8) fits at once. Strict FIFO
  // keeps c behind b; first-fit starts c at once, passing b.
  const std::string trace = R"({"id":"a","submit_s":0,"duration_s":100,"gpus":8})"
                            "\n"
                            R"({"id":"b","submit_s":1,"duration_s":50,"gpus":16})"
                            "\n"
                            R"({"id":"c","submit_s":2,"duration_s":10,"gpus":8})"
                            "\n";
  SimConfig config;
  config.level_slowdown.fill(1.0);
  auto strict = Simulate(trace, "fifo", 2, config);
  ASSERT_TRUE(strict.ok()) << strict.status().ToString();
  EXPECT_DOUBLE_EQ(strict->jobs[1].first_start_s, 100);
  EXPECT_DOUBLE_EQ(strict->jobs[2].first_start_s, 150);
  auto first_fit = Simulate(trace, "first-fit", 2, config);
  ASSERT_TRUE(first_fit.ok()) << first_fit.status().ToString();
  EXPECT_DOUBLE_EQ(first_fit->jobs[2].first_start_s, 2);
  EXPECT_DOUBLE_EQ(first_fit->jobs[1].first_start_s, 100);
  EXPECT_GT(strict->summary.avg_wait_s, first_fit->summary.avg_wait_s);
}

TEST(SimulatorTest, ATraceWithNoJobIsAnError) {
  // Issue 15: Philly traces (no run times) simulated 0 jobs and exited 0.
  auto none = Simulate(R"({"id":"a","submit_s":0,"gpus":8})"
                       "\n",
                       "fifo", 2);
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("no job to simulate"), std::string::npos);
  EXPECT_NE(none.status().message().find("1 without a run time"), std::string::npos)
      << none.status().ToString();
  auto empty = Simulate("not json\n", "fifo", 2);
  ASSERT_FALSE(empty.ok());
  EXPECT_NE(empty.status().message().find("test.jsonl:1"), std::string::npos)
      << empty.status().ToString();
}

TEST(SimulatorTest, CrossLeafPlacementRunsSlower) {
  const std::string trace = R"({"id":"a","submit_s":0,"duration_s":100,"gpus":32})"
                            "\n";
  auto r = Simulate(trace, "fifo", 4);  // 2 nodes per leaf: 32 GPUs span the spine
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_NEAR(r->jobs[0].end_s, 105, 1e-9);
}

TEST(SimulatorTest, TooLargeJobIsRejectedNotLost) {
  const std::string trace = R"({"id":"a","submit_s":0,"duration_s":100,"gpus":64})"
                            "\n"
                            R"({"id":"b","submit_s":0,"duration_s":100})"
                            "\n";
  auto r = Simulate(trace, "backfill", 2);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->summary.rejected, 1);
  EXPECT_EQ(r->jobs[0].outcome, JobOutcome::kRejected);
}

TEST(SimulatorTest, FailuresLoseWorkButEveryJobEnds) {
  std::string trace;
  for (int i = 0; i < 40; ++i) {
    trace += fmt::format(R"({{"id":"j{}","submit_s":{},"duration_s":{},"gpus":{}}})", i, i * 600,
                         20000 + 1000 * (i % 7), 8 << (i % 3)) +
             "\n";
  }
  SimConfig config;
  config.failures = true;
  config.failure_model.interruptions_per_gpu_day *= 200;  // enough failures in a small run
  config.seed = 7;
  auto r = Simulate(trace, "backfill", 8, config);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_GT(r->summary.node_failures, 0);
  EXPECT_GT(r->summary.lost_gpu_hours, 0);
  // Failures restart jobs; backfill with equal priorities never preempts.
  EXPECT_GT(r->summary.failure_restarts, 0);
  EXPECT_EQ(r->summary.preemptions, 0);
  EXPECT_EQ(r->summary.unfinished, 0);
  EXPECT_EQ(r->summary.completed + r->summary.failed + r->summary.rejected, 40);
  // Deterministic for a seed.
  auto again = Simulate(trace, "backfill", 8, config);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->summary.avg_jct_s, r->summary.avg_jct_s);
  EXPECT_EQ(again->summary.lost_gpu_hours, r->summary.lost_gpu_hours);
}

TEST(SimulatorTest, PreemptionsAreCountedApartFromFailureRestarts) {
  // LAS with band preemption: a long 16-GPU job passes 1 GPU-hour of service, then a new job in
  // a better band evicts it. No failures: every restart is a preemption.
  const std::string trace = R"({"id":"long","submit_s":0,"duration_s":36000,"gpus":16})"
                            "\n"
                            R"({"id":"new","submit_s":7200,"duration_s":600,"gpus":16})"
                            "\n";
  auto r = Simulate(trace, "las", 2);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_GT(r->summary.preemptions, 0);
  EXPECT_EQ(r->summary.failure_restarts, 0);
  EXPECT_GT(r->jobs[0].preemptions, 0);
  EXPECT_EQ(r->jobs[0].failure_restarts, 0);
}

// Issue 27: an elastic job grows when a job ends and shrinks for a waiting one; its work advances
// in proportion to its GPUs, and each resize loses the work since its last checkpoint and pays the
// restart cost.
TEST(SimulatorTest, ElasticJobResizesAndItsWorkRescales) {
  SimConfig config;
  config.level_slowdown.fill(1.0);
  config.checkpoint_interval = Seconds(40);
  config.restart_cost = Seconds(10);
  // e: 1000 s of work at 16 GPUs (elastic 8..16); r arrives at 100 and needs 8 for 100 s.
  const std::string trace =
      R"({"id":"e","submit_s":0,"duration_s":1000,"gpus":16,"elastic":{"min_gpus":8,"max_gpus":16}})"
      "\n"
      R"({"id":"r","submit_s":100,"duration_s":100,"gpus":8})"
      "\n";
  auto r = Simulate(trace, "fifo", 2, config);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->summary.completed, 2);
  EXPECT_EQ(r->summary.elastic_jobs, 1);
  // t=100: shrinks to 8 (the 20 s since its checkpoint at 80 lost on 16 GPUs), restarts at 110
  // at half speed, 80 s of work done. t=200: r ends; it grows back to 16 (the 20 s since its
  // checkpoint at 180 lost on 8 GPUs, 115 s of work done), restarts at 210 at full speed.
  EXPECT_EQ(r->jobs[0].resizes, 2);
  EXPECT_EQ(r->summary.resizes, 2);
  EXPECT_EQ(r->summary.preemptions, 0);
  EXPECT_DOUBLE_EQ(r->jobs[1].first_start_s, 100);  // no wait: e made room
  EXPECT_NEAR(r->jobs[0].lost_gpu_s, 20 * 16 + 20 * 8, 1e-6);
  EXPECT_NEAR(r->jobs[0].end_s, 210 + (1000 - 115), 1e-6);
}

// The rigid variant runs the elastic job at its max_gpus with its work scaled to that size.
TEST(SimulatorTest, RigidVariantRunsElasticJobsAtTheirMax) {
  SimConfig config;
  config.level_slowdown.fill(1.0);
  config.checkpoint_interval = Seconds(40);
  config.restart_cost = Seconds(10);
  // e: 1000 s at 8 GPUs (elastic 8..16), r: 100 s at 8 GPUs; both at 0 on 16 GPUs.
  const std::string trace =
      R"({"id":"e","submit_s":0,"duration_s":1000,"gpus":8,"elastic":{"min_gpus":8,"max_gpus":16}})"
      "\n"
      R"({"id":"r","submit_s":0,"duration_s":100,"gpus":8})"
      "\n";
  auto elastic = Simulate(trace, "fifo", 2, config);
  ASSERT_TRUE(elastic.ok()) << elastic.status().ToString();
  // Side by side; at 100 e grows to 16 (20 s lost on 8 GPUs, 80 s done), restarting at 110 at
  // twice the speed.
  EXPECT_NEAR(elastic->jobs[0].end_s, 110 + (1000 - 80) / 2.0, 1e-6);
  EXPECT_NEAR(elastic->jobs[1].end_s, 100, 1e-6);
  config.rigid_elastic = true;
  auto rigid = Simulate(trace, "fifo", 2, config);
  ASSERT_TRUE(rigid.ok()) << rigid.status().ToString();
  EXPECT_EQ(rigid->summary.elastic_jobs, 0);
  EXPECT_EQ(rigid->jobs[0].gpus, 16);
  EXPECT_NEAR(rigid->jobs[0].work_s, 500, 1e-9);  // the same GPU-time
  EXPECT_NEAR(rigid->jobs[0].end_s, 500, 1e-6);   // all 16 GPUs, r waits for it
  EXPECT_NEAR(rigid->jobs[1].end_s, 600, 1e-6);
  EXPECT_EQ(rigid->summary.resizes, 0);
  EXPECT_LT(elastic->summary.avg_jct_s, rigid->summary.avg_jct_s);
}

TEST(SimulatorTest, StopsWhenAJobCanNeverBePlacedAgain) {
  // A whole-cluster gang hit by a failure has a bad node for ever: the run must still end.
  const std::string trace = R"({"id":"a","submit_s":0,"duration_s":1000000,"gpus":16})"
                            "\n";
  SimConfig config;
  config.failures = true;
  config.failure_model.interruptions_per_gpu_day *= 1000;
  auto r = Simulate(trace, "fifo", 2, config);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->summary.completed, 0);
  EXPECT_EQ(r->summary.unfinished + r->summary.failed, 1);
  EXPECT_GT(r->summary.lost_gpu_hours, 0);
}

TEST(SimulatorTest, EveryPolicyRuns) {
  std::string trace;
  for (int i = 0; i < 30; ++i) {
    trace += fmt::format(R"({{"id":"j{}","submit_s":{},"duration_s":{},"gpus":{}}})", i, i * 10,
                         100 + 37 * (i % 5), 1 << (i % 5)) +
             "\n";
  }
  for (const auto& p : sched::PolicyNames()) {
    auto r = Simulate(trace, p, 2);
    ASSERT_TRUE(r.ok()) << p << ": " << r.status().ToString();
    EXPECT_EQ(r->summary.completed, 30) << p;
  }
  EXPECT_FALSE(sched::PolicyPreset("nope").ok());
}

}  // namespace
}  // namespace baton::sim
