#include "sched/plugins/topology/topology.h"

#include <gtest/gtest.h>

#include "sched/testing.h"

namespace baton::sched {
namespace {

using testing::SmallTree;
using topo::Level;

class AcceptAll final : public NodeFilter {
 public:
  bool Fits(topo::NodeId) const override { return true; }
};
class Reject final : public NodeFilter {
 public:
  explicit Reject(std::set<std::uint32_t> nodes) : nodes_(std::move(nodes)) {}
  bool Fits(topo::NodeId n) const override { return !nodes_.contains(n.value()); }

 private:
  std::set<std::uint32_t> nodes_;
};

// Small tree: gpu001..gpu008, leaves of 2 nodes (0-1, 2-3, 4-5, 6-7), spines of 2 leaves.
class TopologyTest : public ::testing::Test {
 protected:
  explicit TopologyTest(topo::Cluster c = SmallTree()) : state_(std::move(c)) {}

  JobInfo MakeJob(int gpus, int task = 0) {
    JobInfo j;
    j.spec = testing::Job(1, gpus);
    j.spec.gpus_per_task = task;
    j.task_gpus = EffectiveTaskGpus(j.spec, state_.cluster());
    return j;
  }
  PluginStatus Propose(const JobInfo& j, std::vector<Placement>* out, int max = 4,
                       const NodeFilter* f = nullptr) {
    CycleState cycle;
    PluginContext ctx{testing::At(0), state_, jobs_, cycle};
    AcceptAll all;
    return plugin_.Propose(ctx, j, f ? *f : all, max, out);
  }
  std::vector<std::uint32_t> Nodes(const Placement& p) {
    std::vector<std::uint32_t> n;
    for (const auto& a : p.nodes) n.push_back(a.node.value());
    return n;
  }
  void Fill(std::uint32_t node, std::uint64_t mask) {
    ASSERT_TRUE(state_.Allocate(topo::NodeId(node), mask).ok());
  }

  ClusterState state_;
  JobTable jobs_;
  TopologyPlugin plugin_;
};

TEST_F(TopologyTest, SmallJobGoesToTheFullestNodeThatFits) {
  Fill(3, 0x3f);  // 2 free
  Fill(5, 0x0f);  // 4 free
  std::vector<Placement> out;
  ASSERT_TRUE(Propose(MakeJob(2), &out).ok());
  EXPECT_EQ(Nodes(out[0]), std::vector<std::uint32_t>{3});
  EXPECT_EQ(out[0].nodes[0].mask, 0xc0u);
  out.clear();
  ASSERT_TRUE(Propose(MakeJob(3), &out).ok());
  EXPECT_EQ(Nodes(out[0]), std::vector<std::uint32_t>{5});
}

TEST_F(TopologyTest, GangTakesTheLowestSubtreeBestFit) {
  Fill(0, 0xff);  // leaf 0 has one free node; leaves 1..3 have two
  std::vector<Placement> out;
  ASSERT_TRUE(Propose(MakeJob(16), &out, 1).ok());
  EXPECT_EQ(Nodes(out[0]), (std::vector<std::uint32_t>{2, 3}));
  EXPECT_EQ(out[0].span, Level::kLeaf);
  out.clear();
  // 24 GPUs fit no leaf; spine 0 (nodes 1,2,3) is the tighter spine.
  ASSERT_TRUE(Propose(MakeJob(24), &out, 1).ok());
  EXPECT_EQ(Nodes(out[0]), (std::vector<std::uint32_t>{2, 3, 1}));
  EXPECT_EQ(out[0].span, Level::kSpine);
}

TEST_F(TopologyTest, RequiredLevelIsNeverExceeded) {
  Fill(0, 0xff);
  Fill(2, 0xff);
  Fill(4, 0xff);
  Fill(6, 0xff);
  JobInfo j = MakeJob(16);
  j.spec.topology.required = Level::kLeaf;
  std::vector<Placement> out;
  PluginStatus s = Propose(j, &out);
  EXPECT_EQ(s.kind(), StatusKind::kUnschedulable) << s.ToString();
  EXPECT_TRUE(out.empty());
  j.spec.topology.required = Level::kCore;
  EXPECT_TRUE(Propose(j, &out).ok());
  // No leaf ever has 24 GPUs: unresolvable.
  JobInfo big = MakeJob(24);
  big.spec.topology.required = Level::kLeaf;
  out.clear();
  EXPECT_EQ(Propose(big, &out).kind(), StatusKind::kUnresolvable);
}

TEST_F(TopologyTest, FilteredNodesAreSkipped) {
  std::vector<Placement> out;
  Reject f({0, 1, 2});
  ASSERT_TRUE(Propose(MakeJob(16), &out, 1, &f).ok());
  EXPECT_EQ(Nodes(out[0]), (std::vector<std::uint32_t>{4, 5}));
}

TEST_F(TopologyTest, SubGroupsStayInsideTheirLevel) {
  // Free: node 0 (4 GPUs), 1 (8), 2 (4), 3 (8): leaf 0 has 12, leaf 1 has 12.
  Fill(0, 0x0f);
  Fill(2, 0x0f);
  Fill(4, 0xff);
  Fill(5, 0xff);
  Fill(6, 0xff);
  Fill(7, 0xff);
  JobInfo j = MakeJob(16, 4);
  j.spec.sub_groups = {{8, Level::kLeaf}};
  std::vector<Placement> out;
  ASSERT_TRUE(Propose(j, &out, 1).ok());
  // Each consecutive 8 ranks must share a leaf.
  auto ranks = RankOrder(out[0]);
  ASSERT_EQ(ranks.size(), 16u);
  for (std::size_t s = 0; s < 16; s += 8) {
    for (std::size_t i = s; i < s + 8; ++i) {
      EXPECT_LE(state_.cluster().Meet(ranks[s], ranks[i]), Level::kLeaf);
    }
  }
  // A 16-GPU slice per leaf cannot be met (each leaf has 12 free).
  j.spec.sub_groups = {{16, Level::kLeaf}};
  out.clear();
  EXPECT_FALSE(Propose(j, &out).ok());
}

TEST_F(TopologyTest, SpreadUsesDistinctFailureDomains) {
  JobInfo j = MakeJob(4, 1);
  j.spec.spread = topo::FailureDomainKind::kRack;  // racks of 2 nodes
  std::vector<Placement> out;
  ASSERT_TRUE(Propose(j, &out, 1).ok());
  std::set<std::uint32_t> racks;
  for (const auto& a : out[0].nodes) {
    racks.insert(state_.cluster().node(a.node).failure_domains[0].value());
  }
  EXPECT_EQ(racks.size(), 4u);
}

TEST_F(TopologyTest, DeterministicAndMultipleCandidates) {
  std::vector<Placement> a, b;
  ASSERT_TRUE(Propose(MakeJob(16), &a, 4).ok());
  ASSERT_TRUE(Propose(MakeJob(16), &b, 4).ok());
  EXPECT_EQ(a, b);
  EXPECT_EQ(a.size(), 4u);  // one per leaf
}

class Nvl72Test : public TopologyTest {
 protected:
  // 8 nodes of 4 GPUs, NVLink domains of 2 nodes, 4 nodes per leaf.
  Nvl72Test() : TopologyTest(SmallTree(8, 4, 4, 2)) {}
};

TEST_F(Nvl72Test, GangFitsOneNvlinkDomain) {
  Fill(0, 0x1);  // domain 0 is partly used; domain 1 (nodes 2,3) is whole
  std::vector<Placement> out;
  ASSERT_TRUE(Propose(MakeJob(8, 4), &out, 1).ok());
  EXPECT_EQ(out[0].span, Level::kNvlinkDomain);
  EXPECT_EQ(Nodes(out[0]), (std::vector<std::uint32_t>{2, 3}));
}

}  // namespace
}  // namespace baton::sched
