#include "sched/framework/scheduler.h"

#include <gtest/gtest.h>

#include "sched/testing.h"

namespace baton::sched {
namespace {

using testing::At;
using testing::Job;
using testing::SmallTree;

std::unique_ptr<Scheduler> Make(SchedulerConfig c = {}, topo::Cluster cluster = SmallTree()) {
  auto s = Scheduler::Create(std::move(cluster), std::move(c));
  CHECK(s.ok()) << s.status().ToString();
  return std::move(s).value();
}

Decisions Cycle(Scheduler& s, double now, std::vector<Event> events = {}) {
  return s.RunCycle({At(now), events});
}

TEST(SchedulerTest, BindsAGangWholeAndFreesOnFinish) {
  auto s = Make();
  auto d = Cycle(*s, 0, {Event::Submit(Job(1, 16))});
  ASSERT_EQ(d.binds.size(), 1u);
  EXPECT_EQ(d.binds[0].placement.gpus(), 16);
  EXPECT_EQ(s->state().cluster().counts().allocated, 16);
  EXPECT_EQ(s->job(JobId(1))->phase, JobPhase::kRunning);
  d = Cycle(*s, 10, {Event::Finish(JobId(1))});
  EXPECT_EQ(s->state().cluster().counts().allocated, 0);
  EXPECT_EQ(s->job(JobId(1)), nullptr);
}

TEST(SchedulerTest, BadInputIsRejectedAtAdmissionAndChangesNothing) {
  auto s = Make();
  GangJob bad = Job(1, 0);
  GangJob neg = Job(2, 8);
  neg.estimated_runtime = Seconds(-3);
  auto d = Cycle(*s, 0, {Event::Submit(bad), Event::Submit(neg), Event::Submit(Job(3, 1 << 30))});
  ASSERT_EQ(d.rejections.size(), 3u);
  EXPECT_NE(d.rejections[0].reason.find("field 'gpus'"), std::string::npos);
  EXPECT_NE(d.rejections[1].reason.find("field 'estimated_runtime'"), std::string::npos);
  EXPECT_EQ(d.rejections[0].plugin, "admission");
  EXPECT_TRUE(d.binds.empty());
  EXPECT_EQ(s->state().cluster().counts().allocated, 0);
  EXPECT_TRUE(s->jobs().empty());
  // A duplicate id is rejected without touching the first job.
  Cycle(*s, 1, {Event::Submit(Job(4, 8))});
  d = Cycle(*s, 2, {Event::Submit(Job(4, 16))});
  ASSERT_EQ(d.rejections.size(), 1u);
  EXPECT_EQ(s->job(JobId(4))->spec.gpus, 8);
}

TEST(SchedulerTest, PriorityOrderAndHeadOfLineBlockingWithoutBackfill) {
  SchedulerConfig c;
  c.actions = {"admit", "allocate"};
  auto s = Make(c);
  auto d = Cycle(*s, 0,
                 {Event::Submit(Job(1, 48)), Event::Submit(Job(2, 32, /*priority=*/5)),
                  Event::Submit(Job(3, 16))});
  // job2 (priority 5) first, then job1 does not fit (32 left), job3 does.
  ASSERT_EQ(d.binds.size(), 2u);
  EXPECT_EQ(d.binds[0].job, JobId(2));
  EXPECT_EQ(d.binds[1].job, JobId(3));
  ASSERT_EQ(d.waiting.size(), 1u);
  EXPECT_EQ(d.waiting[0].job, JobId(1));
  EXPECT_EQ(d.waiting[0].status.plugin(), "topology");
}

TEST(SchedulerTest, BackfillRespectsTheHeadJobsReservation) {
  auto s = Make();
  GangJob running = Job(1, 48);
  running.estimated_runtime = Seconds(100);
  Cycle(*s, 0, {Event::Submit(running)});
  // Head: 32 GPUs, must wait for job1 (ends at 100). Short job ends before: backfills.
  // Long job would take nodes the head needs: waits.
  GangJob head = Job(2, 32, 1);
  GangJob shorty = Job(3, 16);
  shorty.estimated_runtime = Seconds(50);
  GangJob longy = Job(4, 16);
  longy.estimated_runtime = Seconds(500);
  auto d = Cycle(*s, 10, {Event::Submit(head), Event::Submit(shorty), Event::Submit(longy)});
  ASSERT_EQ(d.binds.size(), 1u);
  EXPECT_EQ(d.binds[0].job, JobId(3));
  EXPECT_TRUE(d.wake_at.has_value());
}

TEST(SchedulerTest, PreemptionIsGracefulAndTakesWholeGangs) {
  auto s = Make();
  GangJob low1 = Job(1, 32);
  low1.grace_period = Seconds(30);
  GangJob low2 = Job(2, 32);
  low2.grace_period = Seconds(30);
  Cycle(*s, 0, {Event::Submit(low1), Event::Submit(low2)});
  // low2 checkpointed recently: evicting low2 loses less work.
  Cycle(*s, 90, {Event::Checkpoint(JobId(2))});
  GangJob high = Job(3, 32, 10);
  auto d = Cycle(*s, 100, {Event::Submit(high)});
  ASSERT_EQ(d.preemptions.size(), 1u);
  EXPECT_EQ(d.preemptions[0].victim, JobId(2));
  EXPECT_EQ(d.preemptions[0].release_at, At(130));
  EXPECT_DOUBLE_EQ(d.preemptions[0].lost_gpu_seconds, 10 * 32);
  EXPECT_TRUE(d.binds.empty());
  EXPECT_EQ(*d.wake_at, At(130));
  // During the grace period the victim keeps its GPUs and nothing more is evicted.
  d = Cycle(*s, 120);
  EXPECT_TRUE(d.preemptions.empty());
  EXPECT_TRUE(d.binds.empty());
  EXPECT_EQ(s->state().cluster().counts().allocated, 64);
  d = Cycle(*s, 130);
  ASSERT_EQ(d.binds.size(), 1u);
  EXPECT_EQ(d.binds[0].job, JobId(3));
  EXPECT_EQ(s->job(JobId(2))->phase, JobPhase::kPending);
}

TEST(SchedulerTest, VictimFinishingEarlyFreesItsGpus) {
  auto s = Make();
  GangJob low = Job(1, 64);
  low.grace_period = Seconds(600);
  Cycle(*s, 0, {Event::Submit(low)});
  auto d = Cycle(*s, 10, {Event::Submit(Job(2, 64, 1))});
  ASSERT_EQ(d.preemptions.size(), 1u);
  d = Cycle(*s, 20, {Event::Finish(JobId(1))});  // checkpointed and exited
  ASSERT_EQ(d.binds.size(), 1u);
  EXPECT_EQ(d.binds[0].job, JobId(2));
}

TEST(SchedulerTest, NonPreemptibleAndEqualPriorityAreNeverVictims) {
  auto s = Make();
  GangJob pinned = Job(1, 32);
  pinned.preemptible = false;
  Cycle(*s, 0, {Event::Submit(pinned), Event::Submit(Job(2, 32, 5))});
  auto d = Cycle(*s, 10, {Event::Submit(Job(3, 32, 5))});
  EXPECT_TRUE(d.preemptions.empty());
}

TEST(SchedulerTest, NothingLandsOnUnhealthyNodes) {
  auto s = Make();
  std::vector<Event> ev;
  for (std::uint32_t n = 0; n < 6; ++n) {
    ev.push_back(Event::NodeHealth(
        topo::NodeId(n), n % 2 ? topo::NodeHealth::kSuspect : topo::NodeHealth::kDraining));
  }
  ev.push_back(Event::Submit(Job(1, 16)));
  ev.push_back(Event::Submit(Job(2, 8)));
  auto d = Cycle(*s, 0, ev);
  ASSERT_EQ(d.binds.size(), 1u);
  for (const auto& a : d.binds[0].placement.nodes) EXPECT_GE(a.node.value(), 6u);
  ASSERT_EQ(d.waiting.size(), 1u);
}

TEST(SchedulerTest, NodeDownRequeuesFromCheckpointWithRestartCostAndBadNode) {
  SchedulerConfig c;
  auto s = Make(c, SmallTree(4, 2));  // 4 nodes, 2 leaves
  GangJob j = Job(1, 32);
  j.restart_cost = Seconds(60);
  j.max_retries = 1;
  Cycle(*s, 0, {Event::Submit(j)});
  auto d = Cycle(*s, 100, {Event::Checkpoint(JobId(1))});
  d = Cycle(*s, 150, {Event::NodeHealth(topo::NodeId(0), topo::NodeHealth::kDown)});
  ASSERT_EQ(d.requeues.size(), 1u);
  EXPECT_DOUBLE_EQ(d.requeues[0].lost_gpu_seconds, 50 * 32);
  EXPECT_EQ(*d.wake_at, At(210));
  EXPECT_EQ(s->job(JobId(1))->bad_nodes, std::vector<topo::NodeId>{topo::NodeId(0)});
  EXPECT_EQ(s->state().cluster().counts().allocated, 0);
  // Node 0 comes back, but the job never returns to it; 24 GPUs elsewhere are not enough.
  d = Cycle(*s, 210, {Event::NodeHealth(topo::NodeId(0), topo::NodeHealth::kHealthy)});
  EXPECT_TRUE(d.binds.empty());
  ASSERT_EQ(d.waiting.size(), 1u);
  EXPECT_NE(d.waiting[0].status.reason().find("bad-nodes"), std::string::npos)
      << d.waiting[0].status.ToString();
}

TEST(SchedulerTest, RetriesAreBounded) {
  auto s = Make();
  GangJob j = Job(1, 8);
  j.max_retries = 0;
  auto d = Cycle(*s, 0, {Event::Submit(j)});
  ASSERT_EQ(d.binds.size(), 1u);
  const topo::NodeId node = d.binds[0].placement.nodes[0].node;
  d = Cycle(*s, 5, {Event::NodeHealth(node, topo::NodeHealth::kDown)});
  ASSERT_EQ(d.rejections.size(), 1u);
  EXPECT_NE(d.rejections[0].reason.find("retries exhausted"), std::string::npos);
  EXPECT_EQ(s->state().cluster().counts().allocated, 0);
}

TEST(SchedulerTest, RunningGangGetsAReplacementNodeWithinItsLevel) {
  auto s = Make();
  GangJob j = Job(1, 16);
  j.topology.required = topo::Level::kSpine;
  auto d = Cycle(*s, 0, {Event::Submit(j)});
  ASSERT_EQ(d.binds.size(), 1u);
  const auto first = d.binds[0].placement.nodes[0].node;
  d = Cycle(*s, 10, {Event::NodeHealth(first, topo::NodeHealth::kDown)});
  ASSERT_EQ(d.replacements.size(), 1u);
  EXPECT_TRUE(d.requeues.empty());
  const auto& p = s->job(JobId(1))->placement;
  EXPECT_LE(p.span, topo::Level::kSpine);
  EXPECT_EQ(p.gpus(), 16);
  EXPECT_EQ(s->state().cluster().counts().allocated, 16);
}

TEST(SchedulerTest, QuotaLimitsTenantsAndRejectsImpossibleAsks) {
  SchedulerConfig c;
  c.plugins.push_back(
      {"quota", 1, {{"tenants.a.guaranteed", "16"}, {"tenants.a.borrowable", "8"}}});
  auto s = Make(c);
  GangJob a1 = Job(1, 16), a2 = Job(2, 16), a3 = Job(3, 32), b1 = Job(4, 16);
  a1.tenant = a2.tenant = a3.tenant = "a";
  b1.tenant = "b";
  auto d =
      Cycle(*s, 0, {Event::Submit(a1), Event::Submit(a2), Event::Submit(a3), Event::Submit(b1)});
  ASSERT_EQ(d.rejections.size(), 1u);
  EXPECT_EQ(d.rejections[0].job, JobId(3));
  EXPECT_EQ(d.rejections[0].plugin, "quota");
  ASSERT_EQ(d.binds.size(), 2u);
  EXPECT_EQ(d.binds[0].job, JobId(1));
  EXPECT_EQ(d.binds[1].job, JobId(4));
  ASSERT_EQ(d.waiting.size(), 1u);
  EXPECT_EQ(d.waiting[0].status.plugin(), "quota");
}

TEST(SchedulerTest, AdoptedRunningJobsHoldTheirGpus) {
  auto s = Make();
  Placement p;
  p.nodes = {{topo::NodeId(0), 0xff}};
  auto d = Cycle(*s, 0, {Event::Adopt(Job(1, 8), p, At(0)), Event::Adopt(Job(2, 8), p, At(0))});
  ASSERT_EQ(d.rejections.size(), 1u);  // the second claims the same GPUs
  EXPECT_EQ(d.rejections[0].job, JobId(2));
  EXPECT_EQ(s->state().cluster().counts().allocated, 8);
}

TEST(SchedulerTest, TimingsOnlyWithATimer) {
  ManualClock clock;
  auto sc = Scheduler::Create(SmallTree(), {}, SchedulerOptions{&clock, nullptr, nullptr});
  ASSERT_TRUE(sc.ok());
  auto d = (*sc)->RunCycle({At(0), {}});
  EXPECT_FALSE(d.timings.empty());
  auto s = Make();
  EXPECT_TRUE(Cycle(*s, 0).timings.empty());
}

}  // namespace
}  // namespace baton::sched
