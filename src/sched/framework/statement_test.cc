#include "sched/framework/statement.h"

#include <gtest/gtest.h>

#include "sched/testing.h"

namespace baton::sched {
namespace {

using testing::SmallTree;

std::vector<std::uint64_t> Masks(const ClusterState& s) {
  std::vector<std::uint64_t> m;
  for (const auto& n : s.cluster().nodes()) m.push_back(n.allocated_mask);
  return m;
}

TEST(StatementTest, DiscardRestoresExactly) {
  ClusterState s(SmallTree());
  ASSERT_TRUE(s.Allocate(topo::NodeId(0), 0x0f).ok());
  const auto before = Masks(s);
  const auto counts = s.cluster().counts();
  const auto slots = s.Slots(Subtree{}, 4);
  {
    Statement st(&s);
    ASSERT_TRUE(st.Allocate(topo::NodeId(1), 0xff).ok());
    ASSERT_TRUE(st.Release(topo::NodeId(0), 0x03).ok());
    EXPECT_FALSE(st.Allocate(topo::NodeId(1), 0x01).ok());  // already allocated: not recorded
    EXPECT_NE(Masks(s), before);
    st.Discard();
  }
  EXPECT_EQ(Masks(s), before);
  EXPECT_EQ(s.cluster().counts(), counts);
  EXPECT_EQ(s.Slots(Subtree{}, 4), slots);
}

TEST(StatementTest, DestructorDiscardsAndCommitKeeps) {
  ClusterState s(SmallTree());
  {
    Statement st(&s);
    ASSERT_TRUE(st.Allocate(topo::NodeId(2), 0xff).ok());
  }
  EXPECT_EQ(s.cluster().node(topo::NodeId(2)).allocated_mask, 0u);
  {
    Statement st(&s);
    ASSERT_TRUE(st.Allocate(topo::NodeId(2), 0xff).ok());
    st.Commit();
    EXPECT_TRUE(st.empty());
  }
  EXPECT_EQ(s.cluster().node(topo::NodeId(2)).allocated_mask, 0xffu);
}

TEST(ClusterStateTest, SlotsAndBucketsFollowAllocationAndHealth) {
  ClusterState s(SmallTree());
  EXPECT_EQ(s.Slots(Subtree{}, 8), 8);
  EXPECT_EQ(s.Free(Subtree{}), 64);
  ASSERT_TRUE(s.Allocate(topo::NodeId(0), 0x1).ok());
  EXPECT_EQ(s.Slots(Subtree{}, 8), 7);
  EXPECT_EQ(s.Slots(Subtree{}, 4), 15);
  EXPECT_TRUE(s.NodesWithFree(7).contains(0));
  s.SetHealth(topo::NodeId(1), topo::NodeHealth::kDraining);
  EXPECT_EQ(s.FreeGpus(topo::NodeId(1)), 0);
  EXPECT_EQ(s.Slots(Subtree{}, 8), 6);
  EXPECT_FALSE(s.NodesWithFree(8).contains(1));
  s.SetHealth(topo::NodeId(1), topo::NodeHealth::kHealthy);
  EXPECT_EQ(s.Slots(Subtree{}, 8), 7);
}

}  // namespace
}  // namespace baton::sched
