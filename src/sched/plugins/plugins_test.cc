// Unit tests for the filter, score, quota and victim plugins.
#include <gtest/gtest.h>

#include "sched/framework/scheduler.h"
#include "sched/plugins/builtin_plugins.h"
#include "sched/plugins/filters/filters.h"
#include "sched/plugins/quota/quota.h"
#include "sched/plugins/score/score.h"
#include "sched/plugins/victim/lost_work.h"
#include "sched/testing.h"

namespace baton::sched {
namespace {

using testing::At;

class PluginsTest : public ::testing::Test {
 protected:
  PluginsTest() : state_(testing::SmallTree()), ctx_{At(100), state_, jobs_, cycle_} {}
  JobInfo Job(int gpus, int priority = 0) {
    JobInfo j;
    j.spec = testing::Job(next_++, gpus, priority);
    j.task_gpus = EffectiveTaskGpus(j.spec, state_.cluster());
    return j;
  }
  ClusterState state_;
  JobTable jobs_;
  CycleState cycle_;
  PluginContext ctx_;
  std::uint64_t next_ = 1;
};

TEST_F(PluginsTest, HealthFilter) {
  HealthFilterPlugin f;
  EXPECT_TRUE(f.Filter(ctx_, Job(8), topo::NodeId(0)).ok());
  for (auto h :
       {topo::NodeHealth::kSuspect, topo::NodeHealth::kDraining, topo::NodeHealth::kDown}) {
    state_.SetHealth(topo::NodeId(0), h);
    EXPECT_EQ(f.Filter(ctx_, Job(8), topo::NodeId(0)).kind(), StatusKind::kUnschedulable);
  }
}

TEST_F(PluginsTest, GpuTypeAndBadNodeFilters) {
  GpuTypeFilterPlugin t;
  JobInfo j = Job(8);
  EXPECT_TRUE(t.Filter(ctx_, j, topo::NodeId(0)).ok());
  j.accepted_gpus = {*topo::FindGpu("A100-80GB")};
  EXPECT_EQ(t.Filter(ctx_, j, topo::NodeId(0)).kind(), StatusKind::kUnresolvable);
  j.accepted_gpus.push_back(*topo::FindGpu("H100-SXM"));
  EXPECT_TRUE(t.Filter(ctx_, j, topo::NodeId(0)).ok());
  BadNodesFilterPlugin b;
  j.bad_nodes = {topo::NodeId(2), topo::NodeId(5)};
  EXPECT_FALSE(b.Filter(ctx_, j, topo::NodeId(5)).ok());
  EXPECT_TRUE(b.Filter(ctx_, j, topo::NodeId(3)).ok());
}

TEST_F(PluginsTest, BinpackPrefersFullerLeaves) {
  ASSERT_TRUE(state_.Allocate(topo::NodeId(0), 0xff).ok());  // leaf 0 half full
  BinpackScorePlugin s;
  Placement in_full, in_empty;
  in_full.nodes = {{topo::NodeId(1), 0x1}};
  in_empty.nodes = {{topo::NodeId(2), 0x1}};
  EXPECT_GT(s.Score(ctx_, Job(1), in_full), s.Score(ctx_, Job(1), in_empty));
}

class FixedEstimator final : public StepTimeEstimator {
 public:
  double Slowdown(const GangJob&, std::span<const topo::GpuRef> gpus) override {
    return gpus.empty() ? 1.0 : 1.0 + gpus[0].node.value();
  }
};

TEST_F(PluginsTest, PlannerScoresBySlowdown) {
  FixedEstimator est;
  PlannerScorePlugin s(&est);
  JobInfo j = Job(1);
  Placement a, b;
  a.nodes = {{topo::NodeId(0), 1}};
  b.nodes = {{topo::NodeId(3), 1}};
  EXPECT_EQ(s.Score(ctx_, j, a), 100.0);  // no plan: neutral
  j.spec.has_plan = true;
  EXPECT_EQ(s.Score(ctx_, j, a), 100.0);
  EXPECT_EQ(s.Score(ctx_, j, b), 25.0);
}

TEST_F(PluginsTest, QuotaCountsOnlyReservedPlacements) {
  auto made = QuotaPlugin::Create({{"tenants.a.guaranteed", "8"}, {"tenants.a.borrowable", "8"}});
  ASSERT_TRUE(made.ok());
  auto* q = dynamic_cast<QuotaPlugin*>(made->get());
  JobInfo j = Job(16);
  j.spec.tenant = "a";
  EXPECT_TRUE(q->PreFilter(ctx_, j).ok());
  Placement p;
  p.nodes = {{topo::NodeId(0), 0xff}};
  q->Reserve(ctx_, j, p);
  EXPECT_EQ(q->PreFilter(ctx_, j).kind(), StatusKind::kUnschedulable);
  q->Unreserve(ctx_, j, p);
  EXPECT_TRUE(q->PreFilter(ctx_, j).ok());
  j.spec.gpus = 24;
  EXPECT_EQ(q->PreFilter(ctx_, j).kind(), StatusKind::kUnresolvable);
  JobInfo other = Job(64);
  other.spec.tenant = "unlisted";
  EXPECT_TRUE(q->PreFilter(ctx_, other).ok());
  EXPECT_FALSE(QuotaPlugin::Create({{"tenants.a.limit", "8"}}).ok());
}

TEST_F(PluginsTest, LostWorkPricesWorkSinceCheckpoint) {
  LostWorkPlugin v;
  JobInfo high = Job(8, 5);
  JobInfo victim = Job(8, 1);
  victim.phase = JobPhase::kRunning;
  victim.placement.nodes = {{topo::NodeId(0), 0xff}};
  victim.start = At(0);
  victim.last_checkpoint = At(90);
  auto c = v.VictimCost(ctx_, high, victim);
  ASSERT_TRUE(c.has_value());
  EXPECT_NEAR(*c, 10 * 8, 0.1);
  victim.spec.preemptible = false;
  EXPECT_FALSE(v.VictimCost(ctx_, high, victim).has_value());
  victim.spec.preemptible = true;
  victim.spec.priority = 5;
  EXPECT_FALSE(v.VictimCost(ctx_, high, victim).has_value());
}

TEST(BuiltinPluginsTest, EveryNameBuilds) {
  for (const auto& [name, factory] : BuiltinPlugins()) {
    auto p = factory({}, {});
    ASSERT_TRUE(p.ok()) << name;
    EXPECT_EQ((*p)->Name(), name);
    EXPECT_FALSE(factory({{"nonsense", "1"}}, {}).ok()) << name;
  }
}

}  // namespace
}  // namespace baton::sched

namespace baton::sched {
namespace {

// Two leaves of two nodes; labels: nvme_iops and a zone.
topo::Cluster Labelled() {
  topo::ClusterBuilder b("labelled", topo::FabricKind::kFatTree);
  topo::NodeShape shape;
  shape.name = "hgx";
  shape.gpu = *topo::FindGpu("H100-SXM");
  shape.nic_bandwidth = Gbps(400);
  auto sid = *b.AddShape(shape);
  const char* iops[] = {"200000", "800000", "1000000", "fast"};
  const char* zone[] = {"a", "b", "a", "b"};
  std::vector<topo::NodeId> n;
  for (int i = 0; i < 4; ++i) {
    n.push_back(*b.AddNode("n" + std::to_string(i), sid));
    EXPECT_TRUE(b.AddLabel(n.back(), "nvme_iops", iops[i]).ok());
    EXPECT_TRUE(b.AddLabel(n.back(), "zone", zone[i]).ok());
  }
  auto l0 = *b.AddSwitch("leaf0");
  auto l1 = *b.AddSwitch("leaf1");
  auto sp = *b.AddSwitch("spine");
  EXPECT_TRUE(b.AttachNode(l0, n[0]).ok());
  EXPECT_TRUE(b.AttachNode(l0, n[1]).ok());
  EXPECT_TRUE(b.AttachNode(l1, n[2]).ok());
  EXPECT_TRUE(b.AttachNode(l1, n[3]).ok());
  EXPECT_TRUE(b.AttachSwitch(sp, l0).ok());
  EXPECT_TRUE(b.AttachSwitch(sp, l1).ok());
  return std::move(b.Build()).value();
}

std::vector<bool> Match(const AttributeIndex& idx, std::vector<NodeRequirement> reqs) {
  return *idx.Match(reqs);
}

TEST(AttributeIndexTest, LabelsAndNumericBounds) {
  topo::Cluster c = Labelled();
  AttributeIndex idx(c);
  using Op = NodeRequirement::Op;
  EXPECT_EQ(idx.Match({}), nullptr);
  EXPECT_EQ(Match(idx, {{"zone", Op::kIn, {"a"}, 0}}), (std::vector<bool>{1, 0, 1, 0}));
  EXPECT_EQ(Match(idx, {{"zone", Op::kNotIn, {"a"}, 0}}), (std::vector<bool>{0, 1, 0, 1}));
  EXPECT_EQ(Match(idx, {{"rack", Op::kExists, {}, 0}}), (std::vector<bool>{0, 0, 0, 0}));
  EXPECT_EQ(Match(idx, {{"nvme_iops", Op::kGreaterEqual, {}, 800000}}),
            (std::vector<bool>{0, 1, 1, 0}));  // "fast" is not a number
  EXPECT_EQ(Match(idx, {{"nvme_iops", Op::kLessEqual, {}, 800000}}),
            (std::vector<bool>{1, 1, 0, 0}));
  EXPECT_EQ(Match(idx, {{"nvme_iops", Op::kGreaterEqual, {}, 500000}, {"zone", Op::kIn, {"b"}, 0}}),
            (std::vector<bool>{0, 1, 0, 0}));
}

TEST(AttributeIndexTest, SchedulerPlacesOnlyOnMatchingNodes) {
  auto s = std::move(Scheduler::Create(Labelled(), {})).value();
  GangJob j = testing::Job(1, 16);
  j.node_requirements = {{"nvme_iops", NodeRequirement::Op::kGreaterEqual, {}, 800000}};
  GangJob bad = testing::Job(2, 8);
  bad.node_requirements = {{"zone", NodeRequirement::Op::kIn, {}, 0}};
  std::vector<Event> ev = {Event::Submit(j), Event::Submit(bad)};
  Decisions d = s->RunCycle({testing::At(0), ev});
  ASSERT_EQ(d.binds.size(), 1u);
  EXPECT_EQ(d.binds[0].placement.nodes[0].node, topo::NodeId(1));
  EXPECT_EQ(d.binds[0].placement.nodes[1].node, topo::NodeId(2));
  ASSERT_EQ(d.rejections.size(), 1u);
  EXPECT_NE(d.rejections[0].reason.find("node_requirements[0].values"), std::string::npos);
}

}  // namespace
}  // namespace baton::sched
