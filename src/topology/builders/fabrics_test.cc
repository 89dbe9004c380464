#include "topology/builders/fabrics.h"

#include <gtest/gtest.h>

namespace baton::topo {
namespace {

TEST(FatTreeTest, BuildsExpectedShape) {
  FatTreeParams p;
  p.layout.nodes = 100;
  p.nodes_per_leaf = 10;
  p.leaves_per_spine = 4;
  p.leaf_oversubscription = 2.0;
  auto c = BuildFatTree(p);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->nodes().size(), 100u);
  EXPECT_EQ(c->counts().total, 800);
  EXPECT_EQ(c->tier_count(), 3);
  EXPECT_EQ(c->nodes()[0].name, "gpu001");
  EXPECT_EQ(c->Meet(NodeId(0), NodeId(9)), Level::kLeaf);
  EXPECT_EQ(c->Meet(NodeId(0), NodeId(10)), Level::kSpine);
  EXPECT_EQ(c->Meet(NodeId(0), NodeId(99)), Level::kCore);
  EXPECT_NEAR(ToGBps(c->Link(Level::kSpine).bandwidth), 25, 1e-9);
  // 25 racks of 4, 2 PDUs each, rows of 8 racks.
  int racks = 0, pdus = 0, rows = 0;
  for (const auto& d : c->failure_domains()) {
    racks += d.kind == FailureDomainKind::kRack;
    pdus += d.kind == FailureDomainKind::kPdu;
    rows += d.kind == FailureDomainKind::kRow;
  }
  EXPECT_EQ(racks, 25);
  EXPECT_EQ(pdus, 50);
  EXPECT_EQ(rows, 4);
}

TEST(FatTreeTest, RejectsBadParameters) {
  struct Case {
    const char* what;
    void (*mutate)(FatTreeParams&);
    const char* want;
  };
  const Case cases[] = {
      {"zero nodes", [](FatTreeParams& p) { p.layout.nodes = 0; }, "field 'nodes': must be > 0"},
      {"negative nodes", [](FatTreeParams& p) { p.layout.nodes = -4; }, "field 'nodes'"},
      {"radix", [](FatTreeParams& p) { p.leaf_radix = 16; }, "field 'leaf_radix'"},
      {"gpu", [](FatTreeParams& p) { p.layout.gpu = "V100"; }, "unknown GPU type 'V100'"},
      {"tiers", [](FatTreeParams& p) { p.tiers = 5; }, "field 'tiers'"},
      {"two tiers too small", [](FatTreeParams& p) { p.tiers = 2; }, "use tiers: 3"},
      {"oversubscription", [](FatTreeParams& p) { p.leaf_oversubscription = 0.1; },
       "leaf_oversubscription"},
      {"huge", [](FatTreeParams& p) { p.layout.nodes = 1 << 30; }, "absurdly large"},
      {"gpus per node", [](FatTreeParams& p) { p.layout.gpus_per_node = 0; }, "gpus_per_node"},
  };
  for (const Case& c : cases) {
    FatTreeParams p;
    p.layout.nodes = 1024;
    c.mutate(p);
    auto r = BuildFatTree(p);
    ASSERT_FALSE(r.ok()) << c.what;
    EXPECT_NE(r.status().message().find(c.want), std::string::npos)
        << c.what << ": " << r.status().message();
  }
}

TEST(DragonflyTest, GroupsMeetAtGroupThenCore) {
  DragonflyPlusParams p;
  p.groups = 4;
  p.leaves_per_group = 2;
  p.nodes_per_leaf = 4;
  auto c = BuildDragonflyPlus(p);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->nodes().size(), 32u);
  EXPECT_EQ(c->Meet(NodeId(0), NodeId(3)), Level::kLeaf);
  EXPECT_EQ(c->Meet(NodeId(0), NodeId(4)), Level::kGroup);
  EXPECT_EQ(c->Meet(NodeId(0), NodeId(8)), Level::kCore);
  EXPECT_NEAR(ToGBps(c->Link(Level::kCore).bandwidth), 25, 1e-9);  // 2:1 global links
  p.groups = 0;
  auto bad = BuildDragonflyPlus(p);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("field 'groups': must be > 0"), std::string::npos);
}

TEST(RailOptimizedTest, ScalableUnitsAreLeaves) {
  RailOptimizedParams p;
  p.layout.nodes = 256;
  auto c = BuildRailOptimized(p);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->fabric(), FabricKind::kRailOptimized);
  EXPECT_EQ(c->sw(c->node(NodeId(0)).ancestors[0]).name, "su001");
  EXPECT_EQ(c->Meet(NodeId(0), NodeId(31)), Level::kLeaf);
  EXPECT_EQ(c->Meet(NodeId(0), NodeId(32)), Level::kSpine);
  EXPECT_EQ(c->Meet(NodeId(0), NodeId(255)), Level::kCore);
}

TEST(PresetTest, AllPresetsBuild) {
  for (const Preset& p : Presets()) {
    if (std::string_view(p.name).find("131k") != std::string_view::npos) continue;  // bench only
    auto c = BuildPreset(p.name);
    ASSERT_TRUE(c.ok()) << p.name << ": " << c.status().ToString();
    EXPECT_GT(c->counts().total, 0);
  }
  auto nvl = BuildPreset("gb200-nvl72");
  ASSERT_TRUE(nvl.ok());
  EXPECT_EQ(nvl->counts(nvl->node(NodeId(0)).nvlink_domain).total, 72);
  EXPECT_EQ(nvl->Meet(NodeId(0), NodeId(17)), Level::kNvlinkDomain);
  EXPECT_EQ(nvl->Meet(NodeId(0), NodeId(18)), Level::kLeaf);
  EXPECT_FALSE(BuildPreset("nope").ok());
}

}  // namespace
}  // namespace baton::topo
