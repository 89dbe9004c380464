#include "sched/plugins/fewest_gpus/fewest_gpus.h"

#include <gtest/gtest.h>

#include "sched/framework/config.h"
#include "sched/framework/scheduler.h"
#include "sched/testing.h"

namespace baton::sched {
namespace {

using testing::At;
using testing::Job;

// Named in a config like any built-in order, through the registry the folder registered with.
TEST(FewestGpusTest, AConfigNamesItAndTheSmallestGangsGoFirst) {
  Result<SchedulerConfig> config =
      ParseSchedulerConfig("queue_sort: fewest-gpus\nactions: [admit, allocate]\n");
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  auto made = Scheduler::Create(testing::SmallTree(2), *config);  // 16 GPUs
  ASSERT_TRUE(made.ok()) << made.status().ToString();
  Scheduler& s = **made;
  // A full cluster: the three jobs queue behind it.
  s.RunCycle({At(0), std::vector<Event>{Event::Submit(Job(1, 16))}});
  s.RunCycle({At(1), std::vector<Event>{Event::Submit(Job(2, 12)), Event::Submit(Job(3, 8, 0)),
                                        Event::Submit(Job(4, 8, 5)), Event::Submit(Job(5, 4))}});
  // Once it ends, the queue is 5 (4 GPUs), 4 (8, priority 5), 3 (8), 2 (12): the 4- and 8-GPU
  // jobs take 12 of the 16 GPUs before the 12-GPU job, though it came first (fifo binds 2, 5).
  Decisions d = s.RunCycle({At(10), std::vector<Event>{Event::Finish(JobId(1))}});
  std::vector<JobId> bound;
  for (const auto& b : d.binds) bound.push_back(b.job);
  EXPECT_EQ(bound, (std::vector<JobId>{JobId(5), JobId(4)}));
}

}  // namespace
}  // namespace baton::sched
