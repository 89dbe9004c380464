#include "sched/framework/scheduler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "core/rng.h"
#include "sched/framework/statement.h"
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

TEST(SchedulerTest, WithoutWaitingNotesTheDecisionsAreTheSame) {
  SchedulerConfig c;
  c.actions = {"admit", "allocate", "backfill", "preempt"};
  auto with = Make(c);
  auto without = Scheduler::Create(SmallTree(), c, {.waiting_notes = false});
  ASSERT_TRUE(without.ok());
  std::vector<Event> events;
  for (int i = 1; i <= 6; ++i) {
    GangJob j = Job(i, 16 * i);
    j.estimated_runtime = Seconds(50 * i);
    events.push_back(Event::Submit(j));
  }
  for (double now : {0.0, 60.0, 120.0}) {
    auto a = Cycle(*with, now, now == 0 ? events : std::vector<Event>{});
    auto b = (*without)->RunCycle({At(now), now == 0 ? events : std::vector<Event>{}});
    ASSERT_EQ(a.binds.size(), b.binds.size());
    for (std::size_t i = 0; i < a.binds.size(); ++i) {
      EXPECT_EQ(a.binds[i].job, b.binds[i].job);
      EXPECT_EQ(a.binds[i].placement.nodes, b.binds[i].placement.nodes);
    }
    EXPECT_EQ(a.wake_at, b.wake_at);
    EXPECT_TRUE(b.waiting.empty());
    if (now == 0) {
      EXPECT_FALSE(a.waiting.empty());
    }
  }
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

TEST(SchedulerTest, BackfillReservationFollowsTheStateAcrossCycles) {
  auto s = Make();
  GangJob running = Job(1, 48);
  running.estimated_runtime = Seconds(100);
  Cycle(*s, 0, {Event::Submit(running)});
  GangJob head = Job(2, 32);
  head.estimated_runtime = Seconds(10);
  auto d = Cycle(*s, 10, {Event::Submit(head)});
  EXPECT_TRUE(d.binds.empty());
  EXPECT_EQ(d.wake_at, At(100));
  // Only an arrival: the same state and ends, so the same reservation (reused).
  GangJob whole = Job(3, 64);
  whole.estimated_runtime = Seconds(10);
  d = Cycle(*s, 20, {Event::Submit(whole)});
  EXPECT_TRUE(d.binds.empty());
  EXPECT_EQ(d.wake_at, At(100));
  d = Cycle(*s, 30);
  EXPECT_EQ(d.wake_at, At(100));
  // Job 1 overran its estimate: its end is now, so the reservation moves with the clock.
  d = Cycle(*s, 150);
  EXPECT_TRUE(d.binds.empty());
  EXPECT_EQ(d.wake_at, At(150));
  d = Cycle(*s, 160, {Event::Finish(JobId(1))});
  ASSERT_EQ(d.binds.size(), 1u);
  EXPECT_EQ(d.binds[0].job, JobId(2));
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
  auto d = Cycle(*s, 60, {Event::Submit(Job(2, 64, 1))});  // once past min_run_time
  ASSERT_EQ(d.preemptions.size(), 1u);
  d = Cycle(*s, 70, {Event::Finish(JobId(1))});  // checkpointed and exited
  ASSERT_EQ(d.binds.size(), 1u);
  EXPECT_EQ(d.binds[0].job, JobId(2));
}

// The setup is checked (both jobs run, the cluster is full) and the newcomer arrives past
// min_run_time: before, it arrived at t = 10, when no job could be a victim anyway, so the test
// passed whatever the preemptible flag and the priorities said.
TEST(SchedulerTest, NonPreemptibleAndEqualPriorityAreNeverVictims) {
  auto run = [](bool preemptible) {
    auto s = Make();
    GangJob pinned = Job(1, 32);
    pinned.preemptible = preemptible;
    auto d = Cycle(*s, 0, {Event::Submit(pinned), Event::Submit(Job(2, 32, 5))});
    EXPECT_EQ(d.binds.size(), 2u);
    EXPECT_EQ(s->state().cluster().counts().allocated, 64);  // full: job 3 needs a victim
    d = Cycle(*s, 600, {Event::Submit(Job(3, 32, 5))});      // well past min_run_time
    EXPECT_TRUE(d.binds.empty());
    EXPECT_EQ(s->job(JobId(3))->phase, JobPhase::kPending);
    return d.preemptions;
  };
  EXPECT_TRUE(run(/*preemptible=*/false).empty());
  // The same setup with job 1 preemptible: it is evicted, so the check above can fail.
  auto evicted = run(/*preemptible=*/true);
  ASSERT_EQ(evicted.size(), 1u);
  EXPECT_EQ(evicted[0].victim, JobId(1));
}

SchedulerConfig LasBand(PreemptBy preempt_by) {
  SchedulerConfig c;
  c.queue_sort = "las";
  c.preempt_by = preempt_by;
  c.plugins.push_back({"las", 1, {{"thresholds[0]", "1"}}});  // one band boundary: 1 GPU-hour
  return c;
}

TEST(SchedulerTest, LasBandPreemptionEvictsWholeGangsInWorseBands) {
  // Off by default: LAS only orders the queue.
  auto plain = Make(LasBand(PreemptBy::kPriority));
  Cycle(*plain, 0, {Event::Submit(Job(1, 64))});
  EXPECT_TRUE(Cycle(*plain, 100, {Event::Submit(Job(2, 8))}).preemptions.empty());

  auto s = Make(LasBand(PreemptBy::kLasBand));
  GangJob big = Job(1, 64);
  big.grace_period = Seconds(30);
  Cycle(*s, 0, {Event::Submit(big)});
  // 30 s x 64 GPUs < 1 GPU-hour: both in band 0, nothing is evicted.
  auto d = Cycle(*s, 30, {Event::Submit(Job(2, 8))});
  EXPECT_TRUE(d.preemptions.empty());
  // 100 s x 64 GPUs of the current run: band 1, worse than the waiting job's band 0.
  d = Cycle(*s, 100);
  ASSERT_EQ(d.preemptions.size(), 1u);
  EXPECT_EQ(d.preemptions[0].victim, JobId(1));
  EXPECT_EQ(d.preemptions[0].for_job, JobId(2));
  EXPECT_EQ(d.preemptions[0].release_at, At(130));
  EXPECT_TRUE(d.binds.empty());
  d = Cycle(*s, 130);
  ASSERT_EQ(d.binds.size(), 1u);
  EXPECT_EQ(d.binds[0].job, JobId(2));
  EXPECT_TRUE(d.preemptions.empty());
  // The victim is requeued in band 1 and cannot evict the band-0 job in turn.
  EXPECT_EQ(s->job(JobId(1))->phase, JobPhase::kPending);
  EXPECT_DOUBLE_EQ(s->job(JobId(1))->attained_gpu_seconds, 130 * 64);
  d = Cycle(*s, 200, {Event::Submit(Job(3, 8))});
  EXPECT_TRUE(d.preemptions.empty());

  // Higher-priority and non-preemptible jobs are never band victims.
  auto t = Make(LasBand(PreemptBy::kLasBand));
  GangJob important = Job(1, 32, 5);
  GangJob pinned = Job(2, 32);
  pinned.preemptible = false;
  Cycle(*t, 0, {Event::Submit(important), Event::Submit(pinned)});
  EXPECT_TRUE(Cycle(*t, 1000, {Event::Submit(Job(3, 8))}).preemptions.empty());
}

TEST(SchedulerTest, LasBandPreemptionNeedsLasQueueSort) {
  SchedulerConfig c;
  c.preempt_by = PreemptBy::kLasBand;
  EXPECT_FALSE(Scheduler::Create(SmallTree(), c).ok());
  auto parsed = ParseSchedulerConfig("queue_sort: las\npreempt_by: las-band\n");
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(parsed->preempt_by, PreemptBy::kLasBand);
  EXPECT_FALSE(ParseSchedulerConfig("preempt_by: size\n").ok());
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
  // A whole-cluster gang: keeping node 0 on its bad-node list would strand it for good (24
  // GPUs elsewhere can never hold it), so the list expires.
  EXPECT_TRUE(s->job(JobId(1))->bad_nodes.empty());
  EXPECT_EQ(s->state().cluster().counts().allocated, 0);
  // Node 0 comes back after the restart cost: the job runs again, node 0 included.
  d = Cycle(*s, 210, {Event::NodeHealth(topo::NodeId(0), topo::NodeHealth::kHealthy)});
  ASSERT_EQ(d.binds.size(), 1u);
  EXPECT_EQ(d.binds[0].placement.gpus(), 32);
}

TEST(SchedulerTest, BadNodeListKeepsAJobOffTheNodeWhileOtherNodesCouldHoldIt) {
  SchedulerConfig c;
  auto s = Make(c, SmallTree(4, 2));  // 4 nodes, 2 leaves
  GangJob j = Job(1, 16);
  j.restart_cost = Seconds(60);
  j.max_retries = 1;
  auto d = Cycle(*s, 0, {Event::Submit(j)});
  ASSERT_EQ(d.binds.size(), 1u);
  const topo::NodeId first = d.binds[0].placement.nodes[0].node;
  // Fill the other two nodes so that after the failure only the failed node has room.
  std::vector<Event> fill;
  std::vector<topo::NodeId> others;
  for (std::uint32_t n = 0; n < 4; ++n) {
    bool mine = false;
    for (const auto& a : d.binds[0].placement.nodes) mine |= a.node.value() == n;
    if (!mine) others.push_back(topo::NodeId(n));
  }
  ASSERT_EQ(others.size(), 2u);
  for (std::size_t i = 0; i < others.size(); ++i) {
    GangJob f = Job(10 + i, 8);
    f.preemptible = false;
    Placement p;
    p.nodes = {{others[i], 0xff}};
    fill.push_back(Event::Adopt(f, p, At(0)));
  }
  d = Cycle(*s, 1, fill);
  ASSERT_TRUE(d.rejections.empty());
  d = Cycle(*s, 150, {Event::NodeHealth(first, topo::NodeHealth::kDown)});
  ASSERT_EQ(d.requeues.size(), 1u);
  // 24 GPUs elsewhere could hold it on an idle cluster: the list stays.
  EXPECT_EQ(s->job(JobId(1))->bad_nodes, std::vector<topo::NodeId>{first});
  d = Cycle(*s, 210, {Event::NodeHealth(first, topo::NodeHealth::kHealthy)});
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

TEST(SchedulerTest, TimingsPerFilterPlugin) {
  ManualClock clock;
  auto sc = Scheduler::Create(SmallTree(), {}, SchedulerOptions{&clock, nullptr, nullptr});
  ASSERT_TRUE(sc.ok());
  auto d = (*sc)->RunCycle({At(0), std::vector<Event>{Event::Submit(Job(1, 16))}});
  ASSERT_EQ(d.binds.size(), 1u);
  std::map<std::string, std::int64_t> calls;
  for (const Timing& t : d.timings) calls[t.name] = t.calls;
  // Each default filter plugin saw at least the two nodes of the placement.
  for (const char* name :
       {"filter/health", "filter/gpu-type", "filter/bad-nodes", "filter/node-attributes"}) {
    EXPECT_GE(calls[name], 2) << name;
  }
  EXPECT_GE(calls["placement"], 1);
  EXPECT_GE(calls["action/allocate"], 1);
}

GangJob Elastic(std::uint64_t id, int gpus, int min, int max, int step, int priority = 0) {
  GangJob j = Job(id, gpus, priority);
  j.elastic = {min, max, step};
  return j;
}

Placement On(std::initializer_list<std::uint32_t> nodes) {
  Placement p;
  for (std::uint32_t n : nodes) p.nodes.push_back({topo::NodeId(n), 0xff});
  return p;
}

TEST(ResizeTest, ShrinksLowestPriorityFirstInStepsThenGrowsBack) {
  SchedulerConfig c;
  c.actions = {"admit", "allocate", "resize"};
  auto s = Make(c);
  Cycle(*s, 0,
        {Event::Adopt(Elastic(1, 32, 8, 32, 8, 2), On({0, 1, 2, 3}), At(0)),
         Event::Adopt(Elastic(2, 32, 8, 32, 8, 1), On({4, 5, 6, 7}), At(0))});
  auto d = Cycle(*s, 1, {Event::Submit(Job(3, 8, 5))});
  ASSERT_EQ(d.binds.size(), 1u);
  ASSERT_EQ(d.resizes.size(), 1u);
  EXPECT_EQ(d.resizes[0].job, JobId(2));  // the lower priority shrinks, by one step
  EXPECT_EQ(d.resizes[0].placement.gpus(), 24);
  EXPECT_EQ(s->job(JobId(2))->placement.gpus(), 24);
  EXPECT_EQ(d.binds[0].placement.nodes[0].node, topo::NodeId(7));  // its highest ranks
  EXPECT_EQ(s->state().cluster().counts().allocated, 64);
  // Nothing waits: both grow back toward max into the idle GPUs.
  d = Cycle(*s, 2, {Event::Finish(JobId(3))});
  ASSERT_EQ(d.resizes.size(), 1u);
  EXPECT_EQ(d.resizes[0].job, JobId(2));
  EXPECT_EQ(s->job(JobId(2))->placement.gpus(), 32);
  EXPECT_EQ(s->state().cluster().counts().allocated, 64);
}

TEST(ResizeTest, NeverShrinksBelowMinOrForHigherPriorityOrOutsideRequiredLevel) {
  SchedulerConfig c;
  c.actions = {"admit", "allocate", "resize"};
  auto s = Make(c);
  Cycle(*s, 0,
        {Event::Adopt(Elastic(1, 16, 16, 64, 8), On({0, 1}), At(0)),
         Event::Adopt(Elastic(2, 16, 8, 16, 8, 9), On({2, 3}), At(0)),
         Event::Adopt(Job(3, 32), On({4, 5, 6, 7}), At(0))});
  auto d = Cycle(*s, 1, {Event::Submit(Job(4, 8, 1))});
  EXPECT_TRUE(d.binds.empty());
  EXPECT_TRUE(d.resizes.empty());
  // Growth stays inside the required leaf (gpu001-002 is one leaf): nothing free there.
  GangJob leafy = Elastic(5, 8, 8, 32, 8);
  leafy.topology.required = topo::Level::kLeaf;
  d = Cycle(*s, 2, {Event::Cancel(JobId(4)), Event::Cancel(JobId(1)), Event::Cancel(JobId(3))});
  // Job 2 (required: none) grew into the idle nodes; the cluster is full again up to its max.
  EXPECT_EQ(s->job(JobId(2))->placement.gpus(), 16);  // already at max
  d = Cycle(*s, 3, {Event::Adopt(leafy, On({4}), At(3))});
  ASSERT_EQ(d.resizes.size(), 1u);
  EXPECT_EQ(s->job(JobId(5))->placement.gpus(), 16);  // gpu006 is the only leaf-mate
  EXPECT_EQ(SpanOf(s->state().cluster(), s->job(JobId(5))->placement.nodes), topo::Level::kLeaf);
}

// Growth goes only to healthy nodes: never onto a draining or down one, its own nodes included.
TEST(ResizeTest, NeverGrowsOntoDrainingOrDownNodes) {
  SchedulerConfig c;
  c.actions = {"admit", "allocate", "resize"};
  auto s = Make(c);
  // Job 1: one task of 4 GPUs on half of gpu001 (step 2, not a whole task: it grows on its node
  // only, which drains).
  // Job 3: 8-GPU tasks on gpu002; gpu003 is down; job 2 holds the rest.
  Placement half;
  half.nodes.push_back({topo::NodeId(0), 0x0f});
  auto d = Cycle(*s, 0,
                 {Event::Adopt(Elastic(1, 4, 4, 8, 2), half, At(0)),
                  Event::Adopt(Elastic(3, 8, 8, 64, 8), On({1}), At(0)),
                  Event::Adopt(Job(2, 40), On({3, 4, 5, 6, 7}), At(0)),
                  Event::NodeHealth(topo::NodeId(0), topo::NodeHealth::kDraining),
                  Event::NodeHealth(topo::NodeId(2), topo::NodeHealth::kDown)});
  EXPECT_TRUE(d.resizes.empty());  // the only idle GPUs are on gpu001 (draining) and gpu003 (down)
  d = Cycle(*s, 1, {Event::Cancel(JobId(2))});
  ASSERT_EQ(d.resizes.size(), 1u);
  EXPECT_EQ(d.resizes[0].job, JobId(3));
  EXPECT_EQ(s->job(JobId(3))->placement.gpus(), 48);  // gpu002 and gpu004-008
  for (const NodeAlloc& a : s->job(JobId(3))->placement.nodes) {
    EXPECT_NE(a.node, topo::NodeId(0));
    EXPECT_NE(a.node, topo::NodeId(2));
  }
  EXPECT_EQ(s->job(JobId(1))->placement.gpus(), 4);
}

// A one-task job (its gang fits one node) keeps resizing on its node after its first resize.
TEST(ResizeTest, OneTaskJobResizesAgainOnItsNode) {
  SchedulerConfig c;
  c.actions = {"admit", "allocate", "resize"};
  auto s = Make(c);
  Placement two;
  two.nodes.push_back({topo::NodeId(0), 0x03});
  Cycle(*s, 0,
        {Event::Adopt(Elastic(1, 2, 2, 8, 1), two, At(0)),
         Event::Adopt(Job(2, 56), On({1, 2, 3, 4, 5, 6, 7}), At(0))});
  EXPECT_EQ(s->job(JobId(1))->placement.gpus(), 8);  // grew into its node
  auto d = Cycle(*s, 1, {Event::Submit(Job(3, 4, 1))});
  ASSERT_EQ(d.resizes.size(), 1u);  // and shrinks for a waiting job
  EXPECT_EQ(s->job(JobId(1))->placement.gpus(), 4);
  ASSERT_EQ(d.binds.size(), 1u);
  d = Cycle(*s, 2, {Event::Finish(JobId(3))});
  ASSERT_EQ(d.resizes.size(), 1u);  // and grows once more
  EXPECT_EQ(s->job(JobId(1))->placement.gpus(), 8);
}

SchedulerConfig ReclaimConfig() {
  SchedulerConfig c;
  c.actions = {"admit", "allocate", "reclaim"};
  c.tenancy.min_run_time = Seconds(0);  // these tests reclaim from jobs adopted a moment ago
  c.plugins = {{"health", 1, {}},
               {"topology", 1, {}},
               {"quota",
                1,
                {{"tenants.a.guaranteed", "16"},
                 {"tenants.a.borrowable", "48"},
                 {"tenants.b.guaranteed", "16"},
                 {"tenants.b.borrowable", "48"}}}};
  return c;
}

GangJob Of(GangJob j, std::string tenant, bool preemptible = true) {
  j.tenant = std::move(tenant);
  j.preemptible = preemptible;
  return j;
}

TEST(ReclaimTest, TakesBackOnlyBorrowedPreemptibleGangs) {
  auto s = Make(ReclaimConfig());
  Cycle(*s, 0,
        {Event::Adopt(Of(Job(1, 16), "b", false), On({0, 1}), At(0)),
         Event::Adopt(Of(Job(2, 16), "b"), On({2, 3}), At(0)),
         Event::Adopt(Of(Job(3, 32), "b"), On({4, 5, 6, 7}), At(0))});
  auto d = Cycle(*s, 1, {Event::Submit(Of(Job(4, 16, 1), "a"))});
  ASSERT_EQ(d.preemptions.size(), 1u);
  EXPECT_EQ(d.preemptions[0].victim, JobId(2));  // not job 1: not preemptible
  EXPECT_EQ(d.preemptions[0].for_job, JobId(4));
  // b is now at 64 - 16 = 48 after the eviction, still borrowing; a is at its guarantee once 4
  // runs, so a second a-job reclaims nothing.
  d = Cycle(*s, 2, {Event::Submit(Of(Job(5, 16, 1), "a"))});
  EXPECT_TRUE(d.preemptions.empty());
}

TEST(ReclaimTest, NoReclaimFromTenantsWithinGuaranteeOrWithoutOne) {
  auto s = Make(ReclaimConfig());
  Cycle(*s, 0,
        {Event::Adopt(Of(Job(1, 16), "b"), On({0, 1}), At(0)),
         Event::Adopt(Of(Job(2, 48), "c"), On({2, 3, 4, 5, 6, 7}), At(0))});
  auto d = Cycle(*s, 1, {Event::Submit(Of(Job(3, 16, 1), "a"))});
  EXPECT_TRUE(d.preemptions.empty());
  EXPECT_TRUE(d.binds.empty());
}

GangJob Milli(std::uint64_t id, int milli) {
  GangJob j = Job(id, 1);
  j.gpu_milli = milli;
  return j;
}

GangJob Mig(std::uint64_t id, std::string profile) {
  GangJob j = Job(id, 1);
  j.mig_profile = std::move(profile);
  return j;
}

TEST(SharedGpuTest, PacksFractionsBestFitOnPartlyUsedNodes) {
  auto s = Make();
  Placement half;
  half.nodes = {{topo::NodeId(3), 0x0f}};
  Cycle(*s, 0, {Event::Adopt(Job(1, 4), half, At(0))});
  auto d = Cycle(*s, 1,
                 {Event::Submit(Milli(2, 500)), Event::Submit(Milli(3, 300)),
                  Event::Submit(Milli(4, 300)), Event::Submit(Milli(5, 200))});
  ASSERT_EQ(d.binds.size(), 4u);
  for (const Bind& b : d.binds) EXPECT_EQ(b.placement.nodes[0].node, topo::NodeId(3));
  // 500 + 300 + 200 fill one GPU exactly; the third 300 needed a second GPU.
  const auto& shared = s->state().shared_gpus();
  ASSERT_EQ(shared.size(), 2u);
  std::vector<int> used;
  used.reserve(shared.size());
  for (const auto& [ref, sh] : shared) used.push_back(sh.used.milli);
  std::sort(used.begin(), used.end());
  EXPECT_EQ(used, (std::vector<int>{300, 1000}));
  EXPECT_EQ(s->state().cluster().counts().allocated, 6);
  // A whole-GPU job never lands on a shared GPU.
  d = Cycle(*s, 2, {Event::Submit(Job(6, 2))});
  ASSERT_EQ(d.binds.size(), 1u);
  EXPECT_EQ(d.binds[0].placement.nodes[0].node, topo::NodeId(3));
  for (const auto& [ref, sh] : shared) {
    EXPECT_EQ(d.binds[0].placement.nodes[0].mask & (std::uint64_t{1} << ref.index), 0u);
  }
  // The last share leaving frees its GPU.
  Cycle(*s, 3, {Event::Finish(JobId(4))});
  EXPECT_EQ(s->state().shared_gpus().size(), 1u);
  EXPECT_EQ(s->state().cluster().counts().allocated, 7);
}

TEST(SharedGpuTest, MigSlicesFollowTheProfileGeometry) {
  auto s = Make();
  auto d = Cycle(*s, 0,
                 {Event::Submit(Mig(1, "4g.40gb")), Event::Submit(Mig(2, "4g.40gb")),
                  Event::Submit(Mig(3, "3g.40gb")), Event::Submit(Milli(4, 100))});
  ASSERT_EQ(d.binds.size(), 4u);
  const auto& shared = s->state().shared_gpus();
  ASSERT_EQ(shared.size(), 3u);  // 4g+3g, 4g, and the time-shared GPU (never mixed with MIG)
  for (const auto& [ref, sh] : shared) {
    EXPECT_LE(sh.used.compute_slices, kMigComputeSlices);
    EXPECT_LE(sh.used.memory_slices, kMigMemorySlices);
    EXPECT_TRUE(sh.used.milli == 0 || sh.used.compute_slices == 0);
  }
  d = Cycle(*s, 1,
            {Event::Submit(Mig(5, "5g.50gb")), Event::Submit(Milli(6, 1000)),
             Event::Submit(Mig(7, "1g.5gb"))});  // an A100-40GB profile on H100s
  ASSERT_EQ(d.rejections.size(), 3u);
  EXPECT_NE(d.rejections[0].reason.find("mig_profile"), std::string::npos);
  EXPECT_NE(d.rejections[1].reason.find("gpu_milli"), std::string::npos);
  EXPECT_NE(d.rejections[2].reason.find("mig_profile"), std::string::npos);
}

TEST(SharedGpuTest, RandomSharesNeverOverfillAGpuAndStatementsRestoreThem) {
  auto s = Make();
  Rng rng(11);
  std::vector<JobId> live;
  const char* kProfiles[] = {"1g.10gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"};
  std::uint64_t next = 1;
  for (int round = 0; round < 40; ++round) {
    std::vector<Event> events;
    for (int k = 0; k < 6; ++k) {
      const std::uint64_t id = next++;
      if (rng.Bernoulli(0.5)) {
        events.push_back(Event::Submit(Milli(id, static_cast<int>(rng.UniformInt(1, 999)))));
      } else if (rng.Bernoulli(0.8)) {
        events.push_back(Event::Submit(Mig(id, kProfiles[rng.UniformInt(0, 4)])));
      } else {
        events.push_back(Event::Submit(Job(id, static_cast<int>(rng.UniformInt(1, 8)))));
      }
    }
    for (std::size_t i = 0; i < live.size(); ++i) {
      if (rng.Bernoulli(0.3)) events.push_back(Event::Finish(live[i]));
    }
    Cycle(*s, round, events);
    live.clear();
    int whole = 0;
    for (const auto& [id, j] : s->jobs()) {
      if (j.phase != JobPhase::kRunning) continue;
      live.push_back(id);
      if (!SharesGpu(j.spec)) whole += j.placement.gpus();
    }
    const auto& shared = s->state().shared_gpus();
    for (const auto& [ref, sh] : shared) {
      ASSERT_LE(sh.used.milli, kMilliPerGpu);
      ASSERT_LE(sh.used.compute_slices, kMigComputeSlices);
      ASSERT_LE(sh.used.memory_slices, kMigMemorySlices);
      ASSERT_TRUE(sh.used.milli == 0 || sh.used.compute_slices == 0);
      ASSERT_GE(sh.jobs, 1);
    }
    ASSERT_EQ(s->state().cluster().counts().allocated,
              whole + static_cast<std::int64_t>(shared.size()));
  }
  // A discarded Statement restores shares exactly; Release refuses a shared GPU.
  ClusterState& st = const_cast<ClusterState&>(s->state());
  const auto before = st.shared_gpus().size();
  const std::uint64_t version = st.version();
  {
    Statement stmt(&st);
    for (std::uint32_t n = 0; n < 8; ++n) {
      const auto& node = st.cluster().node(topo::NodeId(n));
      for (std::uint8_t i = 0; i < node.gpus; ++i) {
        if (!((node.allocated_mask >> i) & 1)) (void)stmt.AllocateShare({topo::NodeId(n), i}, {1});
      }
    }
    if (!st.shared_gpus().empty()) {
      const topo::GpuRef g = st.shared_gpus().begin()->first;
      EXPECT_FALSE(st.Release(g.node, std::uint64_t{1} << g.index).ok());
    }
  }
  EXPECT_EQ(st.shared_gpus().size(), before);
  EXPECT_NE(st.version(), version);  // changed and changed back; contents equal
}

}  // namespace
}  // namespace baton::sched
