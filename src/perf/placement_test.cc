#include "perf/placement.h"

#include <gtest/gtest.h>

#include "topology/builders/fabrics.h"

namespace baton::perf {
namespace {

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

TEST(PlacementTest, RankOrderIsTpCpDpPp) {
  // ECOSYSTEM.md 3.4 worked example: world 16, TP=CP=DP=PP=2.
  ParallelPlan p{.tp = 2, .pp = 2, .dp = 2, .cp = 2};
  EXPECT_EQ(CoordsToRank(p, RankCoords{.tp = 1, .cp = 0, .dp = 0, .pp = 0}), 1);
  EXPECT_EQ(CoordsToRank(p, RankCoords{.tp = 0, .cp = 1, .dp = 0, .pp = 0}), 2);
  EXPECT_EQ(CoordsToRank(p, RankCoords{.tp = 0, .cp = 0, .dp = 1, .pp = 0}), 4);
  EXPECT_EQ(CoordsToRank(p, RankCoords{.tp = 0, .cp = 0, .dp = 0, .pp = 1}), 8);
  for (int r = 0; r < 16; ++r) EXPECT_EQ(CoordsToRank(p, RankToCoords(p, r)), r);
  // --use-tp-pp-dp-mapping: pp varies before dp.
  p.order = RankOrder::kTpCpEpPpDp;
  EXPECT_EQ(CoordsToRank(p, RankCoords{.tp = 0, .cp = 0, .dp = 0, .pp = 1}), 4);
  EXPECT_EQ(CoordsToRank(p, RankCoords{.tp = 0, .cp = 0, .dp = 1, .pp = 0}), 8);
  for (int r = 0; r < 16; ++r) EXPECT_EQ(CoordsToRank(p, RankToCoords(p, r)), r);
}

TEST(PlacementTest, RankOrderChangesWhichGroupLeavesTheNode) {
  // tp 4, pp 2, dp 4 on 8-GPU nodes: the default order keeps DP pairs inside a node and PP
  // across nodes; tp-cp-ep-pp-dp keeps PP inside and sends DP across.
  topo::Cluster cluster = Cluster();
  auto sys = SystemFromCluster(cluster, 32);
  ParallelPlan p{.tp = 4, .pp = 2, .dp = 4};
  auto gpus = *CompactGpus(cluster, 32);
  auto a = SpansForPlacement(cluster, gpus, p, *sys);
  p.order = RankOrder::kTpCpEpPpDp;
  auto b = SpansForPlacement(cluster, gpus, p, *sys);
  ASSERT_TRUE(a.ok() && b.ok());
  const int pp = static_cast<int>(Group::kPp);
  EXPECT_GT(a->groups[pp].top_tier(), 0);
  EXPECT_EQ(b->groups[pp].top_tier(), 0);
  // The rank-order spans the estimator uses by default agree.
  EvalContext ctx(*FindModel("llama3-8b"), TrainingSpec{.global_batch = 32}, *sys);
  EXPECT_EQ(RankOrderSpans(ctx, p).groups[pp].top_tier(), 0);
  p.order = RankOrder::kTpCpEpDpPp;
  EXPECT_GT(RankOrderSpans(ctx, p).groups[pp].top_tier(), 0);
}

TEST(PlacementTest, ScatteredIsSlowerThanCompact) {
  topo::Cluster cluster = Cluster();
  ModelSpec m = *FindModel("llama3-8b");
  TrainingSpec t;
  t.global_batch = 128;
  auto sys = SystemFromCluster(cluster, 128);
  ASSERT_TRUE(sys.ok());
  ParallelPlan plan{.tp = 8,
                    .pp = 2,
                    .dp = 8,
                    .mbs = 1,
                    .recompute = Recompute::kSelective,
                    .sequence_parallel = true,
                    .zero = 1,
                    .overlap_dp_comm = false};
  auto compact = CompactGpus(cluster, 128);
  ASSERT_TRUE(compact.ok());
  // TP groups split over two nodes: GPU i of rank block comes from alternating nodes.
  std::vector<topo::GpuRef> split;
  for (int r = 0; r < 128; ++r) {
    int node = (r / 8) * 2 % 64 + (r % 8) / 4;
    split.push_back(topo::GpuRef{topo::NodeId(node),
                                 static_cast<std::uint8_t>(r % 4 + 4 * ((r / 8) % 2 == 1))});
  }
  auto scattered = CompactGpus(cluster, 128, 8);  // every 8th node: one per leaf
  ASSERT_TRUE(scattered.ok());
  auto a = PlacementSlowdown(m, plan, t, *sys, cluster, *compact);
  auto b = PlacementSlowdown(m, plan, t, *sys, cluster, *scattered);
  auto c = PlacementSlowdown(m, plan, t, *sys, cluster, split);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_NEAR(*a, 1.0, 0.02);
  EXPECT_GT(*b, *a);
  EXPECT_GT(*c, *b);  // TP over the network is the worst
}

TEST(PlacementTest, SpansRejectBadPlacements) {
  topo::Cluster cluster = Cluster();
  auto sys = SystemFromCluster(cluster, 16);
  ParallelPlan plan{.tp = 8, .pp = 1, .dp = 2};
  auto gpus = *CompactGpus(cluster, 16);
  gpus[3] = gpus[2];
  auto s = SpansForPlacement(cluster, gpus, plan, *sys);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("reuses"), std::string::npos);
  gpus.pop_back();
  EXPECT_FALSE(SpansForPlacement(cluster, gpus, plan, *sys).ok());
}

TEST(PlacementTest, LaunchSpec) {
  topo::Cluster cluster = Cluster();
  ModelSpec m = *FindModel("llama3-70b");
  TrainingSpec t;
  t.global_batch = 64;
  ParallelPlan plan{.tp = 8,
                    .pp = 2,
                    .dp = 2,
                    .mbs = 1,
                    .vp = 5,
                    .recompute = Recompute::kSelective,
                    .sequence_parallel = true,
                    .zero = 1};
  auto gpus = CompactGpus(cluster, 32, 2);
  ASSERT_TRUE(gpus.ok());
  auto spec = MakeLaunchSpec(m, plan, t, cluster, *gpus, 29501);
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  const std::string& n0 = cluster.node((*gpus)[0].node).name;
  const std::string& n1 = cluster.node((*gpus)[8].node).name;
  EXPECT_EQ(spec->hostfile.substr(0, spec->hostfile.find('\n')), n0 + " slots=8");
  ASSERT_EQ(spec->torchrun.size(), 4u);
  EXPECT_NE(spec->torchrun[1].find("--nnodes=4 --node_rank=1 --nproc_per_node=8 --master_addr=" +
                                   n0 + " --master_port=29501"),
            std::string::npos)
      << spec->torchrun[1];
  ASSERT_EQ(spec->ranks.size(), 32u);
  EXPECT_EQ(spec->ranks[9].node, n1);
  EXPECT_EQ(spec->ranks[9].local_rank, 1);
  std::string flags;
  for (const auto& f : spec->megatron_flags) flags += f + " ";
  for (const char* want : {"--tensor-model-parallel-size 8", "--pipeline-model-parallel-size 2",
                           "--num-layers-per-virtual-pipeline-stage 8", "--sequence-parallel",
                           "--recompute-granularity selective", "--use-distributed-optimizer",
                           "--num-query-groups 8", "--swiglu", "--global-batch-size 64"}) {
    EXPECT_NE(flags.find(want), std::string::npos) << want << " in " << flags;
  }
  // A node whose ranks are not contiguous cannot be launched with torchrun.
  std::vector<topo::GpuRef> bad = *gpus;
  std::swap(bad[0], bad[8]);
  auto b = MakeLaunchSpec(m, plan, t, cluster, bad);
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().message().find("contiguous"), std::string::npos) << b.status().ToString();
}

}  // namespace
}  // namespace baton::perf
