// The scheduler's typed seams: one task per node, node replacement through the allowed nodes and
// the filter chain, rejection kinds, and restarts counted by cause.
#include <gtest/gtest.h>

#include <bit>

#include "sched/framework/scheduler.h"
#include "sched/plugins/builtin_plugins.h"
#include "sched/testing.h"

namespace baton::sched {
namespace {

using testing::At;
using testing::Job;
using testing::SmallTree;

std::unique_ptr<Scheduler> Make(topo::Cluster cluster, SchedulerConfig c = {},
                                SchedulerOptions o = {}) {
  auto s = Scheduler::Create(std::move(cluster), std::move(c), o);
  CHECK(s.ok()) << s.status().ToString();
  return std::move(s).value();
}

// Issue 15: asking for 2 GPUs per node gave nodes holding [8,6,4,4,8,2].
TEST(SchedulerSeamsTest, OneTaskPerNodePutsExactlyTaskGpusOnEachNode) {
  auto s = Make(SmallTree());
  GangJob j = Job(1, 12);
  j.gpus_per_task = 2;
  j.one_task_per_node = true;
  auto d = s->RunCycle({At(0), std::vector<Event>{Event::Submit(j)}});
  ASSERT_EQ(d.binds.size(), 1u);
  ASSERT_EQ(d.binds[0].placement.nodes.size(), 6u);
  for (const auto& a : d.binds[0].placement.nodes) EXPECT_EQ(std::popcount(a.mask), 2);
  // More tasks than nodes can never run.
  GangJob wide = Job(2, 18);
  wide.gpus_per_task = 2;
  wide.one_task_per_node = true;
  d = s->RunCycle({At(1), std::vector<Event>{Event::Submit(wide)}});
  ASSERT_EQ(d.rejections.size(), 1u);
  EXPECT_EQ(d.rejections[0].kind, RejectionKind::kInvalid);
  EXPECT_NE(d.rejections[0].reason.find("gpus_per_task"), std::string::npos);
}

// Two leaves of two nodes; zone a on n0 and n2, zone b on n1 and n3.
topo::Cluster Zoned() {
  topo::ClusterBuilder b("zoned", topo::FabricKind::kFatTree);
  topo::NodeShape shape;
  shape.name = "hgx";
  shape.gpu = *topo::FindGpu("H100-SXM");
  shape.nic_bandwidth = Gbps(400);
  auto sid = *b.AddShape(shape);
  std::vector<topo::NodeId> n;
  for (int i = 0; i < 4; ++i) {
    n.push_back(*b.AddNode("n" + std::to_string(i), sid));
    CHECK(b.AddLabel(n.back(), "zone", i % 2 == 0 ? "a" : "b").ok());
  }
  auto l0 = *b.AddSwitch("leaf0");
  auto l1 = *b.AddSwitch("leaf1");
  auto sp = *b.AddSwitch("spine");
  CHECK(b.AttachNode(l0, n[0]).ok());
  CHECK(b.AttachNode(l0, n[1]).ok());
  CHECK(b.AttachNode(l1, n[2]).ok());
  CHECK(b.AttachNode(l1, n[3]).ok());
  CHECK(b.AttachSwitch(sp, l0).ok());
  CHECK(b.AttachSwitch(sp, l1).ok());
  return std::move(b.Build()).value();
}

// Issue 15 (code read): the hot swap skipped allowed_nodes, so a job could move onto a node
// violating its node_requirements (here: the down node's leaf sibling, in the other zone).
TEST(SchedulerSeamsTest, ReplacementHonoursNodeRequirements) {
  auto s = Make(Zoned());
  GangJob j = Job(1, 8);
  j.node_requirements = {{"zone", NodeRequirement::Op::kIn, {"a"}, 0}};
  auto d = s->RunCycle({At(0), std::vector<Event>{Event::Submit(j)}});
  ASSERT_EQ(d.binds.size(), 1u);
  const topo::NodeId first = d.binds[0].placement.nodes[0].node;
  d = s->RunCycle({At(10), std::vector<Event>{Event::NodeHealth(first, topo::NodeHealth::kDown)}});
  ASSERT_EQ(d.replacements.size(), 1u);
  EXPECT_EQ(d.replacements[0].new_node.value() % 2, 0u) << "moved into zone b";
}

TEST(SchedulerSeamsTest, ReplacementGoesThroughTheFilterChain) {
  PluginRegistry registry = BuiltinPlugins();
  registry["even-nodes"] = NoArgs<testing::EvenNodesOnly>();
  SchedulerConfig c;
  c.plugins.push_back({"even-nodes", 1, {}});
  SchedulerOptions o;
  o.registry = &registry;
  auto s = Make(Zoned(), c, o);
  auto d = s->RunCycle({At(0), std::vector<Event>{Event::Submit(Job(1, 8))}});
  ASSERT_EQ(d.binds.size(), 1u);
  const topo::NodeId first = d.binds[0].placement.nodes[0].node;
  EXPECT_EQ(first.value() % 2, 0u);
  d = s->RunCycle({At(10), std::vector<Event>{Event::NodeHealth(first, topo::NodeHealth::kDown)}});
  ASSERT_EQ(d.replacements.size(), 1u);
  EXPECT_EQ(d.replacements[0].new_node.value() % 2, 0u) << "the filter refused it";
}

// A filter that reads more of the job than its shape: tenant "x" may use no node.
class NotTenantX final : public Plugin, public FilterPlugin {
 public:
  std::string_view Name() const override { return "not-x"; }
  PluginStatus Filter(const PluginContext&, const JobInfo& job, topo::NodeId) override {
    return job.spec.tenant == "x" ? PluginStatus::Unschedulable("tenant x waits")
                                  : PluginStatus::Success();
  }
};

// Regression (issue 31): the session reused one job's placement failure for the next job of the
// same shape whenever the job had none of nine job-specific fields, which is sound for the
// built-in filters only: a filter reading anything else (here the tenant) gave every later job
// of that shape the first one's answer. A filter now says when its answer is the shape's.
TEST(SchedulerSeamsTest, AFilterReadingMoreThanTheShapeIsAskedForEveryJob) {
  PluginRegistry registry = BuiltinPlugins();
  registry["not-x"] = NoArgs<NotTenantX>();
  SchedulerConfig c;
  c.plugins.push_back({"not-x", 1, {}});
  SchedulerOptions o;
  o.registry = &registry;
  auto s = Make(SmallTree(), c, o);
  GangJob x = Job(1, 8);
  x.tenant = "x";
  GangJob y = Job(2, 8);
  y.tenant = "y";
  auto d = s->RunCycle({At(0), std::vector<Event>{Event::Submit(x), Event::Submit(y)}});
  ASSERT_EQ(d.binds.size(), 1u);
  EXPECT_EQ(d.binds[0].job, JobId(2));
}

// Issue 15 (code read): drivers told failed from rejected by comparing the plugin name with
// "health". The kind says it.
TEST(SchedulerSeamsTest, RejectionKindsSayWhyNotWho) {
  auto s = Make(SmallTree());
  GangJob j = Job(1, 8);
  j.max_retries = 0;
  auto d = s->RunCycle({At(0), std::vector<Event>{Event::Submit(j), Event::Submit(Job(2, 0))}});
  ASSERT_EQ(d.rejections.size(), 1u);
  EXPECT_EQ(d.rejections[0].kind, RejectionKind::kInvalid);
  const topo::NodeId node = d.binds.at(0).placement.nodes[0].node;
  d = s->RunCycle({At(5), std::vector<Event>{Event::NodeHealth(node, topo::NodeHealth::kDown)}});
  ASSERT_EQ(d.rejections.size(), 1u);
  EXPECT_EQ(d.rejections[0].kind, RejectionKind::kRetriesExhausted);
  EXPECT_EQ(RejectionKindName(d.rejections[0].kind), "retries-exhausted");
}

// Issue 15 (code read): LAS restart counts mixed preemptions with failure restarts.
TEST(SchedulerSeamsTest, RestartsAreCountedByCause) {
  auto s = Make(SmallTree());
  GangJob low = Job(1, 64);
  low.max_retries = 5;
  s->RunCycle({At(0), std::vector<Event>{Event::Submit(low)}});
  auto d = s->RunCycle({At(100), std::vector<Event>{Event::Submit(Job(2, 64, 5))}});
  ASSERT_EQ(d.preemptions.size(), 1u);
  EXPECT_EQ(s->job(JobId(1))->preemptions, 1);
  EXPECT_EQ(s->job(JobId(1))->failures, 0);
}

}  // namespace
}  // namespace baton::sched
