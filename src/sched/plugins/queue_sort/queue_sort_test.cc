#include "sched/plugins/queue_sort/queue_sort.h"

#include <gtest/gtest.h>

#include "sched/framework/scheduler.h"
#include "sched/testing.h"

namespace baton::sched {
namespace {

using testing::At;

class QueueSortTest : public ::testing::Test {
 protected:
  QueueSortTest() : state_(testing::SmallTree()) {}
  JobInfo& Add(std::uint64_t id, int gpus, int priority, double submit, double runtime = 0,
               std::string tenant = "default") {
    JobInfo j;
    j.spec = testing::Job(id, gpus, priority);
    j.spec.submit_time = At(submit);
    j.spec.estimated_runtime = Seconds(runtime);
    j.spec.tenant = std::move(tenant);
    j.phase = JobPhase::kPending;
    return jobs_[j.spec.id] = std::move(j);
  }
  // The ids of pending jobs sorted by `q` (ties by submit time, then id, as the framework does).
  std::vector<std::uint64_t> Order(QueueSortPlugin& q) {
    CycleState cycle;
    PluginContext ctx{At(1000), state_, jobs_, cycle};
    q.PrepareSort(ctx);
    std::vector<const JobInfo*> v;
    for (const auto& [id, j] : jobs_) {
      if (j.phase == JobPhase::kPending) v.push_back(&j);
    }
    std::stable_sort(v.begin(), v.end(), [&](const JobInfo* a, const JobInfo* b) {
      if (q.Less(ctx, *a, *b)) return true;
      if (q.Less(ctx, *b, *a)) return false;
      return a->spec.submit_time < b->spec.submit_time;
    });
    std::vector<std::uint64_t> ids;
    ids.reserve(v.size());
    for (const JobInfo* j : v) ids.push_back(j->spec.id.value());
    return ids;
  }
  ClusterState state_;
  JobTable jobs_;
};

TEST_F(QueueSortTest, Fifo) {
  Add(1, 8, 5, 30);
  Add(2, 8, 0, 10);
  Add(3, 8, 9, 20);
  FifoPlugin q;
  EXPECT_EQ(Order(q), (std::vector<std::uint64_t>{2, 3, 1}));
}

TEST_F(QueueSortTest, PriorityThenAge) {
  Add(1, 8, 5, 30);
  Add(2, 8, 0, 10);
  Add(3, 8, 5, 20);
  PriorityPlugin q;
  EXPECT_EQ(Order(q), (std::vector<std::uint64_t>{3, 1, 2}));
}

TEST_F(QueueSortTest, ShortestFirstUnknownLast) {
  Add(1, 8, 0, 10, 500);
  Add(2, 8, 0, 20, 0);
  Add(3, 8, 0, 30, 60);
  ShortestFirstPlugin q;
  EXPECT_EQ(Order(q), (std::vector<std::uint64_t>{3, 1, 2}));
}

TEST_F(QueueSortTest, LasBandsByAttainedService) {
  Add(1, 8, 0, 10).attained_gpu_seconds = 50 * 3600;   // band 2
  Add(2, 8, 0, 20).attained_gpu_seconds = 0;           // band 0
  Add(3, 8, 0, 5).attained_gpu_seconds = 2 * 3600;     // band 1
  Add(4, 8, 0, 30).attained_gpu_seconds = 0.5 * 3600;  // band 0
  auto q = LasPlugin::Create({});
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(Order(*dynamic_cast<QueueSortPlugin*>(q->get())),
            (std::vector<std::uint64_t>{2, 4, 3, 1}));
  EXPECT_FALSE(LasPlugin::Create({{"thresholds[0]", "-1"}}).ok());
  EXPECT_FALSE(LasPlugin::Create({{"bands", "1"}}).ok());
}

TEST_F(QueueSortTest, DrfFavoursTheTenantWithTheSmallerWeightedShare) {
  JobInfo& run = Add(1, 16, 0, 0, 0, "a");
  run.phase = JobPhase::kRunning;
  run.placement.nodes = {{topo::NodeId(0), 0xff}, {topo::NodeId(1), 0xff}};
  Add(2, 8, 9, 10, 0, "a");
  Add(3, 8, 0, 20, 0, "b");
  auto q = DrfPlugin::Create({});
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(Order(*dynamic_cast<QueueSortPlugin*>(q->get())), (std::vector<std::uint64_t>{3, 2}));
  // With tenant a weighted 4x and b holding 8 GPUs: a's share 16/64/4 = 0.0625 is below b's
  // 8/64 = 0.125, so a goes first.
  JobInfo& runb = Add(4, 8, 0, 0, 0, "b");
  runb.phase = JobPhase::kRunning;
  runb.placement.nodes = {{topo::NodeId(2), 0xff}};
  auto w = DrfPlugin::Create({{"tenants.a.weight", "4"}});
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(Order(*dynamic_cast<QueueSortPlugin*>(w->get())), (std::vector<std::uint64_t>{2, 3}));
  EXPECT_FALSE(DrfPlugin::Create({{"tenants.a.weight", "0"}}).ok());
}

}  // namespace
}  // namespace baton::sched
