#include "sched/plugins/fragmentation/fragmentation.h"

#include <gtest/gtest.h>

#include "sched/framework/scheduler.h"
#include "sched/testing.h"

namespace baton::sched {
namespace {

using testing::At;
using testing::Job;

// Two nodes of 2 GPUs of an open-catalogue type (not built in), 16 cores and 64 GiB each.
topo::Cluster TwoNodes() {
  topo::ClusterBuilder b("pair");
  topo::GpuSpec t4;
  t4.name = "T4";
  auto gpu = b.AddGpuType(t4);
  CHECK(gpu.ok());
  topo::NodeShape shape;
  shape.name = "t4x2";
  shape.gpu = *gpu;
  shape.gpus = 2;
  shape.cpus = 16;
  shape.memory = GiB(64);
  shape.gpus_per_pcie_switch = 1;
  shape.nics = 0;
  auto id = b.AddShape(shape);
  CHECK(id.ok());
  auto leaf = b.AddSwitch("leaf");
  CHECK(leaf.ok());
  for (const char* name : {"n0", "n1"}) {
    auto n = b.AddNode(name, *id);
    CHECK(n.ok());
    CHECK(b.AttachNode(*leaf, *n).ok());
  }
  auto c = b.Build();
  CHECK(c.ok()) << c.status().ToString();
  return std::move(c).value();
}

std::unique_ptr<Scheduler> Make(const std::string& policy) {
  SchedulerConfig config;
  config.actions = {"admit", "allocate"};
  config.queue_sort = "fifo";
  config.plugins = {{"health", 1, {}}, {"gpu-type", 1, {}}, {"resources", 1, {}}, {policy, 1, {}}};
  config.max_candidates = 1;
  auto s = Scheduler::Create(TwoNodes(), config);
  CHECK(s.ok()) << s.status().ToString();
  return std::move(s).value();
}

GangJob Share(std::uint64_t id, int milli, std::int64_t cpu = 0) {
  GangJob j = Job(id, 1);
  j.gpu_milli = milli;
  j.cpu_milli = cpu;
  return j;
}

TEST(FragmentationModelTest, CountsFreeCapacityEachKindCannotUse) {
  FragmentationModel m;
  RequestKind share;
  share.gpus = 1;
  share.milli = 600;
  RequestKind whole;
  whole.gpus = 1;
  whole.milli = 1000;
  whole.cpu_milli = 8000;
  m.Observe(share);
  m.Observe(whole);
  m.Observe(whole);
  NodeFree n;
  n.gpus = 2;
  n.cpu = 4000;
  n.memory = 1000;
  n.milli[0] = 1000;
  n.milli[1] = 500;
  // share: the 500 GPU is too small for 600; whole: 4 cores < 8 cores, so all 1500 are stranded.
  EXPECT_DOUBLE_EQ(m.Fragmentation(n), 500 + 2 * 1500);
  n.cpu = 8000;
  // whole now fits: the partly used GPU (500) is its fragment.
  EXPECT_DOUBLE_EQ(m.Fragmentation(n), 500 + 2 * 500);
  n.milli[0] = 0;
  n.milli[1] = 0;
  EXPECT_DOUBLE_EQ(m.Fragmentation(n), 0);
}

TEST(FragmentationModelTest, KeepsAtMostMaxKindsReplacingTheLightest) {
  FragmentationModel m(2);
  RequestKind a;
  a.gpus = 1;
  a.milli = 1000;
  RequestKind b = a;
  b.milli = 500;
  RequestKind c = a;
  c.milli = 250;
  m.Observe(a, 3);
  m.Observe(b, 1);
  m.Observe(c, 2);  // the table is full: b (weight 1) leaves, its weight with it
  EXPECT_EQ(m.kinds(), 2u);
  EXPECT_DOUBLE_EQ(m.observed(), 5);
  NodeFree n;
  n.gpus = 1;
  n.cpu = 1;
  n.memory = 1;
  n.milli[0] = 400;
  // a cannot use 400 free (3 x 400); c can (0); b, had it stayed, could not.
  EXPECT_DOUBLE_EQ(m.Fragmentation(n), 3 * 400);
}

TEST(FragmentationModelTest, HostStrandedIsTheGpuTheMixCannotFeedWithCpuOrMemory) {
  FragmentationModel m;
  RequestKind k;
  k.gpus = 1;
  k.milli = 1000;
  k.cpu_milli = 10000;  // 10 cores per GPU
  k.memory_mib = 1000;
  m.Observe(k);
  RequestKind cpu_only;
  cpu_only.gpus = 0;
  cpu_only.milli = 0;
  cpu_only.cpu_milli = 50000;  // CPU-only requests do not set the ratio
  m.Observe(cpu_only);
  NodeFree n;
  n.gpus = 4;
  n.cpu_capacity = 64000;
  n.memory_capacity = 1 << 20;
  n.cpu = 25000;  // feeds 2.5 GPUs
  n.memory = 1 << 20;
  for (int i = 0; i < 4; ++i) n.milli[i] = 1000;
  EXPECT_DOUBLE_EQ(m.HostStranded(n), 1500);
  n.memory = 2000;  // feeds 2 GPUs
  EXPECT_DOUBLE_EQ(m.HostStranded(n), 2000);
  n.cpu_capacity = 0;  // undeclared CPU is never the limit
  n.memory_capacity = 0;
  EXPECT_DOUBLE_EQ(m.HostStranded(n), 0);
}

TEST(FragmentationPluginTest, RefusesBadArguments) {
  EXPECT_TRUE(FragmentationPlugin::Create({{"exponent", "0.5"}, {"fit", "0"}, {"host", "1"}}).ok());
  for (PluginArgs bad : std::vector<PluginArgs>{{{"exponent", "-1"}},
                                                {{"exponent", "x"}},
                                                {{"fit", "1000"}},
                                                {{"host", "nan"}},
                                                {{"weigh", "cpu"}},
                                                {{"colour", "red"}}}) {
    auto r = FragmentationPlugin::Create(bad);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find(bad.begin()->first), std::string::npos)
        << r.status().ToString();
  }
}

TEST(FragmentationPluginTest, HalfGpuJobsShareOneGpuWhileAGangAvoidsIt) {
  auto s = Make("fragmentation");
  auto d = s->RunCycle({At(0), std::vector<Event>{Event::Submit(Share(1, 500))}});
  ASSERT_EQ(d.binds.size(), 1u);
  d = s->RunCycle({At(1), std::vector<Event>{Event::Submit(Share(2, 500))}});
  ASSERT_EQ(d.binds.size(), 1u);
  const auto& shared = s->state().shared_gpus();
  ASSERT_EQ(shared.size(), 1u);  // both halves on one GPU
  EXPECT_EQ(shared.begin()->second.used.milli, 1000);
  const topo::NodeId half_node = shared.begin()->first.node;
  // A 2-GPU gang needs a whole node: it takes the other one.
  d = s->RunCycle({At(2), std::vector<Event>{Event::Submit(Job(3, 2))}});
  ASSERT_EQ(d.binds.size(), 1u);
  EXPECT_NE(d.binds[0].placement.nodes[0].node, half_node);
  // A whole-GPU job gets the free GPU next to the shared one, never the shared one.
  d = s->RunCycle({At(3), std::vector<Event>{Event::Submit(Job(4, 1))}});
  ASSERT_EQ(d.binds.size(), 1u);
  EXPECT_EQ(d.binds[0].placement.nodes[0].node, half_node);
  EXPECT_NE(d.binds[0].placement.nodes[0].mask, std::uint64_t{1} << shared.begin()->first.index);
  EXPECT_EQ(s->state().cluster().counts().free, 0);
}

TEST(FragmentationPluginTest, KeepsWholeGpusForTheWholeGpuRequestsItHasSeen) {
  auto s = Make("fragmentation");
  // The cluster has seen whole-GPU jobs; a 300-milli share then goes next to another share,
  // not onto an idle GPU.
  s->RunCycle({At(0), std::vector<Event>{Event::Submit(Job(1, 1)), Event::Submit(Share(2, 600))}});
  const auto before = s->state().shared_gpus();
  ASSERT_EQ(before.size(), 1u);
  auto d = s->RunCycle({At(1), std::vector<Event>{Event::Submit(Share(3, 300))}});
  ASSERT_EQ(d.binds.size(), 1u);
  EXPECT_EQ(s->state().shared_gpus().size(), 1u);
  EXPECT_EQ(s->state().shared_gpus().begin()->second.used.milli, 900);
}

TEST(FragmentationPluginTest, ChargesAndReleasesCpuAndPlacesCpuOnlyJobs) {
  auto s = Make("fragmentation");
  GangJob cpu = Job(1, 0);
  cpu.cpu_milli = 12000;
  cpu.memory_mib = 1024;
  auto d = s->RunCycle({At(0), std::vector<Event>{Event::Submit(cpu)}});
  ASSERT_EQ(d.binds.size(), 1u);
  const topo::NodeId busy = d.binds[0].placement.nodes[0].node;
  EXPECT_EQ(d.binds[0].placement.nodes[0].mask, 0u);
  EXPECT_EQ(s->state().Host(busy).cpu_used, 12000);
  // A GPU job needing 8 cores cannot go where only 4 are left.
  d = s->RunCycle({At(1), std::vector<Event>{Event::Submit(Share(2, 500, 8000))}});
  ASSERT_EQ(d.binds.size(), 1u);
  EXPECT_NE(d.binds[0].placement.nodes[0].node, busy);
  // Nor may a job needing more cores than any node has ever be admitted.
  d = s->RunCycle({At(2), std::vector<Event>{Event::Submit(Share(3, 500, 32000))}});
  ASSERT_EQ(d.rejections.size(), 1u);
  EXPECT_NE(d.rejections[0].reason.find("cpu_milli"), std::string::npos);
  s->RunCycle({At(3), std::vector<Event>{Event::Finish(JobId(1))}});
  EXPECT_EQ(s->state().Host(busy).cpu_used, 0);
}

TEST(PackingBaselinesTest, BestFitAndRandomFitPlace) {
  for (const char* policy : {"best-fit", "random-fit"}) {
    auto s = Make(policy);
    auto d = s->RunCycle(
        {At(0), std::vector<Event>{Event::Submit(Share(1, 500)), Event::Submit(Job(2, 2)),
                                   Event::Submit(Job(3, 1))}});
    EXPECT_EQ(d.binds.size(), 3u) << policy;
  }
  // Best fit packs the second share onto the first one's GPU.
  auto s = Make("best-fit");
  s->RunCycle(
      {At(0), std::vector<Event>{Event::Submit(Share(1, 500)), Event::Submit(Share(2, 400))}});
  EXPECT_EQ(s->state().shared_gpus().size(), 1u);
}

}  // namespace
}  // namespace baton::sched
