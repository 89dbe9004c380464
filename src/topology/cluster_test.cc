#include "topology/cluster.h"

#include <gtest/gtest.h>

#include "core/rng.h"

namespace baton::topo {
namespace {

NodeShape Hgx() {
  NodeShape s;
  s.name = "hgx";
  s.gpu = *FindGpu("H100-SXM");
  s.gpus = 8;
  s.nics = 8;
  s.nic_bandwidth = Gbps(400);
  return s;
}

// Two spines, each with two leaves of two nodes: n0 n1 | n2 n3 || n4 n5 | n6 n7.
Cluster SmallTree() {
  ClusterBuilder b("small", FabricKind::kFatTree);
  auto shape = *b.AddShape(Hgx());
  std::vector<NodeId> n;
  n.reserve(8);
  for (int i = 0; i < 8; ++i) n.push_back(*b.AddNode("n" + std::to_string(i), shape));
  std::vector<SwitchId> leaves;
  for (std::size_t l = 0; l < 4; ++l) {
    leaves.push_back(*b.AddSwitch("leaf" + std::to_string(l)));
    EXPECT_TRUE(b.AttachNode(leaves[l], n[2 * l]).ok());
    EXPECT_TRUE(b.AttachNode(leaves[l], n[2 * l + 1]).ok());
  }
  auto s0 = *b.AddSwitch("spine0");
  auto s1 = *b.AddSwitch("spine1");
  auto core = *b.AddSwitch("core");
  EXPECT_TRUE(b.AttachSwitch(s0, leaves[0]).ok());
  EXPECT_TRUE(b.AttachSwitch(s0, leaves[1]).ok());
  EXPECT_TRUE(b.AttachSwitch(s1, leaves[2]).ok());
  EXPECT_TRUE(b.AttachSwitch(s1, leaves[3]).ok());
  EXPECT_TRUE(b.AttachSwitch(core, s0).ok());
  EXPECT_TRUE(b.AttachSwitch(core, s1).ok());
  EXPECT_TRUE(b.SetOversubscription(0, 2.0).ok());
  auto c = b.Build();
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return std::move(c).value();
}

TEST(ClusterTest, MeetLevels) {
  Cluster c = SmallTree();
  auto id = [&](const char* name) { return *c.FindNode(name); };
  EXPECT_EQ(c.Meet(id("n0"), id("n0")), Level::kNode);
  EXPECT_EQ(c.Meet(id("n0"), id("n1")), Level::kLeaf);
  EXPECT_EQ(c.Meet(id("n0"), id("n2")), Level::kSpine);
  EXPECT_EQ(c.Meet(id("n0"), id("n7")), Level::kCore);
  EXPECT_EQ(c.Meet(GpuRef{id("n3"), 1}, GpuRef{id("n3"), 1}), Level::kGpu);
  EXPECT_EQ(c.Meet(GpuRef{id("n3"), 1}, GpuRef{id("n3"), 2}), Level::kNode);
  EXPECT_EQ(c.tier_count(), 3);
}

TEST(ClusterTest, BandwidthFallsWithOversubscription) {
  Cluster c = SmallTree();
  EXPECT_NEAR(ToGBps(c.Link(Level::kNode).bandwidth), 450, 1e-9);
  EXPECT_NEAR(ToGBps(c.Link(Level::kLeaf).bandwidth), 50, 1e-9);   // 8 x 400 Gb/s over 8 GPUs
  EXPECT_NEAR(ToGBps(c.Link(Level::kSpine).bandwidth), 25, 1e-9);  // leaf uplinks 2:1
  EXPECT_NEAR(ToGBps(c.Link(Level::kCore).bandwidth), 25, 1e-9);
  EXPECT_LT(c.Link(Level::kLeaf).latency, c.Link(Level::kCore).latency);
  EXPECT_EQ(c.Path(*c.FindNode("n0"), *c.FindNode("n1")).bandwidth, c.Link(Level::kLeaf).bandwidth);
}

TEST(ClusterTest, CountsFollowAllocationAndHealth) {
  Cluster c = SmallTree();
  NodeId n0 = *c.FindNode("n0");
  SwitchId leaf0 = *c.FindSwitch("leaf0");
  SwitchId spine1 = *c.FindSwitch("spine1");
  EXPECT_EQ(c.counts().total, 64);
  EXPECT_EQ(c.counts(leaf0).free, 16);
  ASSERT_TRUE(c.Allocate(n0, 0b1111).ok());
  EXPECT_EQ(c.counts(leaf0).free, 12);
  EXPECT_EQ(c.counts(leaf0).allocated, 4);
  EXPECT_EQ(c.counts().free, 60);
  EXPECT_EQ(c.counts(spine1).free, 32);
  // Double allocation and releasing what is not held fail and change nothing.
  EXPECT_FALSE(c.Allocate(n0, 0b1).ok());
  EXPECT_FALSE(c.Release(n0, 0b10000).ok());
  EXPECT_FALSE(c.Allocate(n0, 1ULL << 8).ok());
  EXPECT_EQ(c.counts(leaf0).allocated, 4);
  c.SetHealth(n0, NodeHealth::kDraining);
  EXPECT_EQ(c.counts(leaf0).free, 8);
  EXPECT_EQ(c.counts(leaf0).unavailable, 4);
  EXPECT_EQ(c.counts(c.node(n0).nvlink_domain).unavailable, 4);
  ASSERT_TRUE(c.Release(n0, 0b1111).ok());
  EXPECT_EQ(c.counts(leaf0).unavailable, 8);
  c.SetHealth(n0, NodeHealth::kHealthy);
  EXPECT_EQ(c.counts(leaf0), (GpuCounts{16, 0, 16, 0}));
}

// Clone() is a deep copy: same structure, names, links and counts, and from then on the two
// allocate independently.
TEST(ClusterTest, CloneIsAnIndependentDeepCopy) {
  Cluster c = SmallTree();
  NodeId n0 = *c.FindNode("n0");
  SwitchId leaf0 = *c.FindSwitch("leaf0");
  ASSERT_TRUE(c.Allocate(n0, 0b11).ok());
  Cluster copy = c.Clone();
  EXPECT_EQ(copy.name(), c.name());
  EXPECT_EQ(copy.nodes().size(), c.nodes().size());
  EXPECT_EQ(copy.switches().size(), c.switches().size());
  EXPECT_EQ(*copy.FindNode("n7"), *c.FindNode("n7"));
  EXPECT_EQ(copy.Meet(n0, *c.FindNode("n5")), c.Meet(n0, *c.FindNode("n5")));
  EXPECT_EQ(copy.Link(Level::kSpine).bandwidth, c.Link(Level::kSpine).bandwidth);
  EXPECT_EQ(copy.counts(leaf0), c.counts(leaf0));
  ASSERT_TRUE(copy.Allocate(n0, 0b100).ok());
  EXPECT_EQ(copy.counts(leaf0).allocated, 3);
  EXPECT_EQ(c.counts(leaf0).allocated, 2);
  ASSERT_TRUE(c.Release(n0, 0b11).ok());
  EXPECT_EQ(copy.counts().allocated, 3);
  EXPECT_EQ(c.counts().allocated, 0);
}

// Property: after a random sequence of operations, every subtree's counts equal a recount.
TEST(ClusterTest, IncrementalCountsMatchRecount) {
  Cluster c = SmallTree();
  Rng rng(3);
  for (int step = 0; step < 2000; ++step) {
    NodeId n(static_cast<std::uint32_t>(rng.UniformInt(0, 7)));
    std::uint64_t mask = 1ULL << rng.UniformInt(0, 7);
    switch (rng.UniformInt(0, 2)) {
      case 0:
        (void)c.Allocate(n, mask);
        break;
      case 1:
        (void)c.Release(n, mask);
        break;
      default:
        c.SetHealth(n, static_cast<NodeHealth>(rng.UniformInt(0, 3)));
    }
  }
  for (std::uint32_t s = 0; s < c.switches().size(); ++s) {
    GpuCounts want;
    for (const Node& n : c.nodes()) {
      bool under = false;
      for (SwitchId a : n.ancestors) under |= a == SwitchId(s);
      if (!under) continue;
      int alloc = std::popcount(n.allocated_mask);
      want.total += n.gpus;
      want.allocated += alloc;
      (n.health == NodeHealth::kHealthy ? want.free : want.unavailable) += n.gpus - alloc;
    }
    EXPECT_EQ(c.counts(SwitchId(s)), want) << c.sw(SwitchId(s)).name;
  }
}

TEST(ClusterBuilderTest, RejectsBadStructure) {
  auto fresh = [] {
    auto b = std::make_unique<ClusterBuilder>("bad");
    EXPECT_TRUE(b->AddShape(Hgx()).ok());
    return b;
  };
  {
    auto b = fresh();
    ASSERT_TRUE(b->AddNode("a", NodeShapeId(0)).ok());
    auto dup = b->AddNode("a", NodeShapeId(0));
    EXPECT_EQ(dup.status().message(), "duplicate node name 'a'");
  }
  {
    auto b = fresh();
    NodeId a = *b->AddNode("a", NodeShapeId(0));
    SwitchId l1 = *b->AddSwitch("l1");
    SwitchId l2 = *b->AddSwitch("l2");
    ASSERT_TRUE(b->AttachNode(l1, a).ok());
    auto st = b->AttachNode(l2, a);
    EXPECT_EQ(st.message(), "node a is under two leaf switches: l1 and l2");
  }
  {
    auto b = fresh();
    NodeId a = *b->AddNode("a", NodeShapeId(0));
    SwitchId l1 = *b->AddSwitch("l1");
    ASSERT_TRUE(b->AttachNode(l1, a).ok());
    ASSERT_TRUE(b->AddSwitch("empty").ok());
    auto c = b->Build();
    ASSERT_FALSE(c.ok());
    EXPECT_NE(c.status().message().find("switch empty has no children"), std::string::npos);
  }
  {
    auto b = fresh();
    NodeId a = *b->AddNode("a", NodeShapeId(0));
    ASSERT_TRUE(b->AddNode("b", NodeShapeId(0)).ok());
    SwitchId l1 = *b->AddSwitch("l1");
    ASSERT_TRUE(b->AttachNode(l1, a).ok());
    auto c = b->Build();
    ASSERT_FALSE(c.ok());
    EXPECT_NE(c.status().message().find("node b is not attached"), std::string::npos);
  }
  {
    auto b = fresh();
    NodeId a = *b->AddNode("a", NodeShapeId(0));
    SwitchId l = *b->AddSwitch("l");
    SwitchId x = *b->AddSwitch("x");
    SwitchId y = *b->AddSwitch("y");
    ASSERT_TRUE(b->AttachNode(l, a).ok());
    ASSERT_TRUE(b->AttachSwitch(x, y).ok());
    ASSERT_TRUE(b->AttachSwitch(y, x).ok());
    auto c = b->Build();
    ASSERT_FALSE(c.ok());
    EXPECT_NE(c.status().message().find("cycle"), std::string::npos);
  }
  {
    auto b = fresh();
    EXPECT_FALSE(b->AddNode("has space", NodeShapeId(0)).ok());
    EXPECT_FALSE(b->AddNode("", NodeShapeId(0)).ok());
    EXPECT_FALSE(b->AddNode("x", NodeShapeId(7)).ok());
    NodeShape s = Hgx();
    s.name = "zero";
    s.gpus = 0;
    EXPECT_NE(b->AddShape(s).status().message().find("field 'gpus'"), std::string::npos);
    EXPECT_FALSE(b->SetOversubscription(0, 0.5).ok());
    EXPECT_FALSE(ClusterBuilder("empty").Build().ok());
  }
}

TEST(ClusterBuilderTest, MultiNodeNvlinkDomain) {
  ClusterBuilder b("nvl");
  NodeShape s = Hgx();
  s.gpu = *FindGpu("GB200");
  s.gpus = 4;
  s.nics = 4;
  s.nic_bandwidth = Gbps(800);
  auto shape = *b.AddShape(s);
  std::vector<NodeId> rack;
  rack.reserve(18);
  for (int i = 0; i < 18; ++i) rack.push_back(*b.AddNode("gb" + std::to_string(i), shape));
  NodeId other = *b.AddNode("other", shape);
  ASSERT_TRUE(b.AddNvlinkDomain("rack0", rack).ok());
  EXPECT_FALSE(b.AddNvlinkDomain("rack1", std::vector<NodeId>{rack[0]}).ok());
  SwitchId leaf = *b.AddSwitch("leaf");
  for (NodeId n : rack) ASSERT_TRUE(b.AttachNode(leaf, n).ok());
  ASSERT_TRUE(b.AttachNode(leaf, other).ok());
  auto c = b.Build();
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->Meet(rack[0], rack[17]), Level::kNvlinkDomain);
  EXPECT_EQ(c->Meet(rack[0], other), Level::kLeaf);
  EXPECT_EQ(c->counts(c->node(rack[3]).nvlink_domain).total, 72);
  EXPECT_NEAR(ToGBps(c->Link(Level::kNvlinkDomain).bandwidth), 900, 1e-9);
}

TEST(LevelTest, NamesRoundTrip) {
  for (int i = 0; i < kLevelCount; ++i) {
    auto l = static_cast<Level>(i);
    EXPECT_EQ(*ParseLevel(LevelName(l)), l);
  }
  EXPECT_FALSE(ParseLevel("rack").ok());
}

}  // namespace
}  // namespace baton::topo
