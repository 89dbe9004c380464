#include "planning/planner_estimator.h"

#include <gtest/gtest.h>

#include "perf/placement.h"
#include "topology/builders/fabrics.h"

namespace baton::planning {
namespace {

// 64 nodes of 8 H100: 8 nodes per leaf, 8 leaves under one spine, 4:1 above the leaf.
topo::Cluster Cluster() {
  topo::FatTreeParams p;
  p.layout.nodes = 64;
  p.layout.gpu = "H100-SXM";
  p.tiers = 2;
  p.nodes_per_leaf = 8;
  p.leaf_radix = 16;
  p.leaves_per_spine = 8;
  p.leaf_oversubscription = 4.0;
  auto c = topo::BuildFatTree(p);
  CHECK(c.ok()) << c.status().ToString();
  return std::move(c).value();
}

perf::ParallelPlan Plan() {
  return {.tp = 8,
          .pp = 2,
          .dp = 8,
          .mbs = 1,
          .recompute = perf::Recompute::kSelective,
          .sequence_parallel = true,
          .zero = 1,
          .overlap_dp_comm = false};
}

// Rank r's GPU when every TP group of 8 is split over two nodes (4 GPUs on each).
std::vector<topo::GpuRef> SplitTp(int gpus) {
  std::vector<topo::GpuRef> out;
  for (int r = 0; r < gpus; ++r) {
    const int node = (r / 8) * 2 % 64 + (r % 8) / 4;
    out.push_back(topo::GpuRef{topo::NodeId(static_cast<std::uint32_t>(node)),
                               static_cast<std::uint8_t>(r % 4 + 4 * ((r / 8) % 2 == 1))});
  }
  return out;
}

class PlannerEstimatorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto key = est_.AddPlan(*perf::FindModel("llama3-8b"), Plan(), training_);
    ASSERT_TRUE(key.ok()) << key.status().ToString();
    job_.gpus = 128;
    job_.has_plan = true;
    job_.plan_key = *key;
  }
  topo::Cluster cluster_ = Cluster();  // the same structure as the estimator's own copy
  PlannerEstimator est_{Cluster()};
  perf::TrainingSpec training_{.global_batch = 128};
  sched::GangJob job_;
};

TEST_F(PlannerEstimatorTest, CompactIsOneScatteredIsSlower) {
  auto compact = *perf::CompactGpus(cluster_, 128);
  auto scattered = *perf::CompactGpus(cluster_, 128, 8);  // one node per leaf
  auto split = SplitTp(128);
  const double a = est_.Slowdown(job_, compact);
  const double b = est_.Slowdown(job_, scattered);
  const double c = est_.Slowdown(job_, split);
  EXPECT_EQ(a, 1.0);
  EXPECT_GT(b, 1.0);
  EXPECT_GT(c, b);  // TP over the network is the worst
  // The same figure as the planner's own PlacementSlowdown, up to how each names "compact".
  auto sys = perf::SystemFromCluster(cluster_, 128);
  ASSERT_TRUE(sys.ok());
  auto want = perf::PlacementSlowdown(*perf::FindModel("llama3-8b"), Plan(), training_, *sys,
                                      cluster_, split);
  ASSERT_TRUE(want.ok()) << want.status().ToString();
  EXPECT_NEAR(c, *want, 0.02 * *want);
  // Deterministic: a second call gives the same bits.
  EXPECT_EQ(est_.Slowdown(job_, split), c);
}

TEST_F(PlannerEstimatorTest, NoEstimateIsNeutral) {
  auto compact = *perf::CompactGpus(cluster_, 64);
  EXPECT_EQ(est_.Slowdown(job_, compact), 1.0);  // not the plan's GPU count
  auto dup = *perf::CompactGpus(cluster_, 128);
  dup[5] = dup[4];
  EXPECT_EQ(est_.Slowdown(job_, dup), 1.0);  // a GPU listed twice
  sched::GangJob plain = job_;
  plain.has_plan = false;
  EXPECT_EQ(est_.Slowdown(plain, SplitTp(128)), 1.0);
}

TEST_F(PlannerEstimatorTest, AddPlanNamesTheBadField) {
  perf::ParallelPlan bad = Plan();
  bad.tp = 6;
  auto r = est_.AddPlan(*perf::FindModel("llama3-8b"), bad, training_);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("plan.tp"), std::string::npos) << r.status().message();
  perf::ParallelPlan huge = Plan();
  huge.dp = 64;  // 1,024 GPUs on a 512-GPU cluster
  EXPECT_FALSE(est_.AddPlan(*perf::FindModel("llama3-8b"), huge, {.global_batch = 1024}).ok());
}

TEST_F(PlannerEstimatorTest, BestPlanIsSearchedOnceAndDeterministic) {
  auto a = est_.BestPlan("llama3-8b", 64);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  ASSERT_TRUE(a->has_value());
  const std::size_t plans = est_.plans();
  auto again = est_.BestPlan("Llama3-8B", 64);  // an alias of the same catalogue entry
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(**again, **a);
  EXPECT_EQ(est_.plans(), plans);
  EXPECT_EQ(est_.plan(**a).gpus(), 64);

  PlannerEstimator other{Cluster()};
  auto b = other.BestPlan("llama3-8b", 64);
  ASSERT_TRUE(b.ok() && b->has_value());
  EXPECT_EQ(other.plan(**b), est_.plan(**a));
  EXPECT_EQ(other.compact_step(**b).value(), est_.compact_step(**a).value());

  EXPECT_FALSE(est_.BestPlan("no-such-model", 64).ok());
  EXPECT_FALSE(est_.BestPlan("llama3-8b", 0).ok());
  EXPECT_FALSE(est_.BestPlan("llama3-8b", 1 << 20).ok());
}

TEST_F(PlannerEstimatorTest, BestPlanMissIsCached) {
  // 405B does not fit on 8 GPUs under any plan.
  auto r = est_.BestPlan("llama3-405b", 8);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_FALSE(r->has_value());
  const std::size_t plans = est_.plans();
  EXPECT_FALSE(est_.BestPlan("llama3-405b", 8)->has_value());
  EXPECT_EQ(est_.plans(), plans);
}

}  // namespace
}  // namespace baton::planning
