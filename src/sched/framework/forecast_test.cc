// Scheduler::Forecast: estimated starts from the scheduler's own actions, waiting kinds and queue
// positions, and that forecasting changes nothing.
#include <gtest/gtest.h>

#include <map>

#include "sched/framework/scheduler.h"
#include "sched/testing.h"

namespace baton::sched {
namespace {

using testing::At;
using testing::Job;
using testing::SmallTree;

std::unique_ptr<Scheduler> Make(topo::Cluster cluster, SchedulerConfig c = {}) {
  auto s = Scheduler::Create(std::move(cluster), std::move(c));
  CHECK(s.ok()) << s.status().ToString();
  return std::move(s).value();
}

SchedulerConfig AllocateBackfill() {
  SchedulerConfig c;
  c.actions = {"admit", "allocate", "backfill"};
  return c;
}

GangJob Timed(std::uint64_t id, int gpus, double runtime, int priority = 0) {
  GangJob j = Job(id, gpus, priority);
  j.estimated_runtime = Seconds(runtime);
  return j;
}

const JobForecast& Of(const QueueForecast& f, std::uint64_t id) {
  for (const auto& j : f.jobs) {
    if (j.job == JobId(id)) return j;
  }
  ADD_FAILURE() << "no forecast for job " << id;
  static const JobForecast none;
  return none;
}

// 4 nodes x 8 GPUs. A (32 GPUs) runs until 100. Then B (16) starts; C (32) is blocked and
// reserves every node from 150, when B ends; D (8 GPUs for 200 s) would end after that, so
// backfill keeps it off the reserved nodes: it starts when C ends at 180.
TEST(ForecastTest, EstimateEqualsActualStartWhenJobsEndAtTheirEstimates) {
  auto s = Make(SmallTree(4), AllocateBackfill());
  auto d = s->RunCycle({At(0), std::vector<Event>{Event::Submit(Timed(1, 32, 100))}});
  ASSERT_EQ(d.binds.size(), 1u);
  d = s->RunCycle(
      {At(10), std::vector<Event>{Event::Submit(Timed(2, 16, 50)), Event::Submit(Timed(3, 32, 30)),
                                  Event::Submit(Timed(4, 8, 200))}});
  ASSERT_TRUE(d.binds.empty());
  const QueueForecast f = s->Forecast(At(10));
  ASSERT_EQ(f.jobs.size(), 3u);
  EXPECT_EQ(Of(f, 2).estimated_start, At(100));
  EXPECT_EQ(Of(f, 3).estimated_start, At(150));
  EXPECT_EQ(Of(f, 4).estimated_start, At(180));
  EXPECT_EQ(Of(f, 2).position, 1);
  EXPECT_EQ(Of(f, 3).position, 2);
  EXPECT_EQ(Of(f, 4).position, 3);

  // Now drive the real scheduler, every job ending exactly at its estimate.
  std::map<JobId, TimePoint> started;
  std::map<JobId, double> runtime = {
      {JobId(1), 100}, {JobId(2), 50}, {JobId(3), 30}, {JobId(4), 200}};
  std::multimap<double, JobId> ends = {{100, JobId(1)}};
  while (!ends.empty()) {
    const double t = ends.begin()->first;
    std::vector<Event> events;
    while (!ends.empty() && ends.begin()->first == t) {
      events.push_back(Event::Finish(ends.begin()->second));
      ends.erase(ends.begin());
    }
    for (const Bind& b : s->RunCycle({At(t), events}).binds) {
      started[b.job] = At(t);
      ends.emplace(t + runtime[b.job], b.job);
    }
  }
  for (const JobForecast& j : f.jobs) {
    ASSERT_TRUE(j.estimated_start.has_value());
    EXPECT_EQ(started.at(j.job), *j.estimated_start) << "job " << j.job.value();
  }
}

// A job that is not submitted: where and when it would start. E (8 GPUs for 10 s) ends before
// C's reservation at 150, so backfill starts it at 100 next to B, ahead of D.
TEST(ForecastTest, WhatIfAnswersForAJobNotSubmitted) {
  auto s = Make(SmallTree(4), AllocateBackfill());
  s->RunCycle({At(0), std::vector<Event>{Event::Submit(Timed(1, 32, 100))}});
  s->RunCycle(
      {At(10), std::vector<Event>{Event::Submit(Timed(2, 16, 50)), Event::Submit(Timed(3, 32, 30)),
                                  Event::Submit(Timed(4, 8, 200))}});
  const std::uint64_t version = s->state().version();
  Result<WhatIfAnswer> a = s->WhatIf(At(20), Timed(99, 8, 10));
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->forecast.position, 4);
  EXPECT_EQ(a->forecast.estimated_start, At(100));
  EXPECT_EQ(a->placement.gpus(), 8);
  ASSERT_NE(a->gpu, nullptr);
  EXPECT_EQ(a->gpu, s->state().cluster().shape_of(a->placement.nodes[0].node).gpu);
  // Nothing changed: no job 5 (or 99), same allocation.
  EXPECT_EQ(s->jobs().size(), 4u);
  EXPECT_EQ(s->state().version(), version);
  // A spec the scheduler refuses is an error naming the field.
  Result<WhatIfAnswer> bad = s->WhatIf(At(20), Timed(7, 64, 10));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("gpus"), std::string::npos) << bad.status().ToString();
}

// Forecasting twice, and then running the same cycles, gives the same decisions as a scheduler
// that never forecast.
TEST(ForecastTest, ChangesNothing) {
  auto a = Make(SmallTree(4));
  auto b = Make(SmallTree(4));
  std::vector<Event> first = {Event::Submit(Timed(1, 24, 100)), Event::Submit(Timed(2, 16, 50)),
                              Event::Submit(Timed(3, 8, 500, 3)), Event::Submit(Job(4, 32))};
  a->RunCycle({At(0), first});
  b->RunCycle({At(0), first});
  const std::uint64_t version = a->state().version();
  const QueueForecast f1 = a->Forecast(At(5));
  const QueueForecast f2 = a->Forecast(At(5));
  EXPECT_EQ(a->state().version(), version);
  ASSERT_EQ(f1.jobs.size(), f2.jobs.size());
  for (std::size_t i = 0; i < f1.jobs.size(); ++i) {
    EXPECT_EQ(f1.jobs[i].job, f2.jobs[i].job);
    EXPECT_EQ(f1.jobs[i].estimated_start, f2.jobs[i].estimated_start);
    EXPECT_EQ(f1.jobs[i].kind, f2.jobs[i].kind);
  }
  for (double t : {10.0, 100.0, 150.0}) {
    std::vector<Event> ev = {Event::Finish(JobId(1))};
    if (t != 100.0) ev.clear();
    const Decisions da = a->RunCycle({At(t), ev});
    const Decisions db = b->RunCycle({At(t), ev});
    ASSERT_EQ(da.binds.size(), db.binds.size()) << "at " << t;
    for (std::size_t i = 0; i < da.binds.size(); ++i) {
      EXPECT_EQ(da.binds[i].job, db.binds[i].job);
      EXPECT_EQ(da.binds[i].placement, db.binds[i].placement);
    }
    EXPECT_EQ(da.wake_at, db.wake_at);
  }
  EXPECT_EQ(a->state().version(), b->state().version());
}

TEST(ForecastTest, UnknownWhenTheRunningJobHasNoEstimatedEnd) {
  auto s = Make(SmallTree(4), AllocateBackfill());
  s->RunCycle({At(0), std::vector<Event>{Event::Submit(Job(1, 32))}});
  s->RunCycle({At(1), std::vector<Event>{Event::Submit(Timed(2, 8, 10))}});
  const QueueForecast f = s->Forecast(At(2));
  ASSERT_EQ(f.jobs.size(), 1u);
  EXPECT_FALSE(f.jobs[0].estimated_start.has_value());
  EXPECT_EQ(f.jobs[0].unknown, UnknownStart::kNoEstimatedEnd);
  EXPECT_EQ(f.jobs[0].kind, WaitingKind::kCapacity);
}

TEST(ForecastTest, HorizonBoundsTheWork) {
  auto s = Make(SmallTree(4), AllocateBackfill());
  std::vector<Event> ev;
  for (int i = 1; i <= 6; ++i) ev.push_back(Event::Submit(Timed(i, 32, 10.0 * i)));
  s->RunCycle({At(0), ev});
  ForecastOptions o;
  o.max_cycles = 3;
  const QueueForecast f = s->Forecast(At(0), o);
  EXPECT_EQ(f.cycles, 3);
  ASSERT_EQ(f.jobs.size(), 5u);
  EXPECT_EQ(Of(f, 2).estimated_start, At(10));
  EXPECT_EQ(Of(f, 3).estimated_start, At(30));
  EXPECT_FALSE(Of(f, 4).estimated_start.has_value());
  EXPECT_EQ(Of(f, 4).unknown, UnknownStart::kBeyondHorizon);
  // Asking for one job stops once it has a start.
  o.max_cycles = 100;
  o.jobs = {JobId(3)};
  const QueueForecast g = s->Forecast(At(0), o);
  EXPECT_EQ(Of(g, 3).estimated_start, At(30));
  EXPECT_EQ(g.cycles, 3);
}

// One case per waiting kind the cluster's state alone decides.
TEST(ForecastTest, WaitingKinds) {
  // fragmentation: 4 GPUs busy on every node, a gang of whole-node tasks.
  {
    auto s = Make(SmallTree(4), AllocateBackfill());
    std::vector<Event> ev;
    GangJob half = Timed(1, 16, 100);
    half.gpus_per_task = 4;
    half.one_task_per_node = true;
    ev.push_back(Event::Submit(half));
    GangJob wide = Timed(9, 16, 10);
    wide.gpus_per_task = 8;
    ev.push_back(Event::Submit(wide));
    s->RunCycle({At(0), ev});
    const QueueForecast f = s->Forecast(At(1));
    EXPECT_EQ(Of(f, 9).kind, WaitingKind::kFragmentation) << Of(f, 9).status.ToString();
    EXPECT_EQ(Of(f, 9).estimated_start, At(100));
  }
  // topology: one node busy in each leaf; 16 GPUs free in total but 8 per leaf.
  {
    auto s = Make(SmallTree(4), AllocateBackfill());
    GangJob a = Timed(1, 8, 100);
    GangJob b = Timed(2, 8, 100);
    s->RunCycle({At(0), std::vector<Event>{Event::Submit(a), Event::Submit(b)}});
    GangJob leafy = Timed(3, 16, 10);
    leafy.topology.required = topo::Level::kLeaf;
    GangJob filler = Timed(4, 8, 100);
    auto d = s->RunCycle({At(1), std::vector<Event>{Event::Submit(filler)}});
    ASSERT_EQ(d.binds.size(), 1u);
    // Three nodes busy; the free node's leaf has 8 free GPUs: make the leaves 8 + 8 by ending
    // the job sharing a leaf with another.
    std::map<topo::SwitchId, int> busy;
    const topo::Cluster& c = s->state().cluster();
    for (std::uint64_t id : {1, 2, 4}) {
      busy[c.node(s->job(JobId(id))->placement.nodes[0].node).ancestors[0]]++;
    }
    std::uint64_t end = 0;
    for (std::uint64_t id : {1, 2, 4}) {
      if (busy[c.node(s->job(JobId(id))->placement.nodes[0].node).ancestors[0]] == 2) end = id;
    }
    ASSERT_NE(end, 0u);
    s->RunCycle({At(2), std::vector<Event>{Event::Finish(JobId(end)), Event::Submit(leafy)}});
    const QueueForecast f = s->Forecast(At(3));
    EXPECT_EQ(Of(f, 3).kind, WaitingKind::kTopology) << Of(f, 3).status.ToString();
    ASSERT_TRUE(Of(f, 3).estimated_start.has_value());
    EXPECT_LE(Of(f, 3).estimated_start->since_epoch.value(), 101);
  }
  // health: two nodes down; only they would make room.
  {
    auto s = Make(SmallTree(4), AllocateBackfill());
    s->RunCycle({At(0), std::vector<Event>{
                            Event::NodeHealth(topo::NodeId(0), topo::NodeHealth::kDown),
                            Event::NodeHealth(topo::NodeId(1), topo::NodeHealth::kDown),
                            Event::Submit(Timed(1, 8, 100)), Event::Submit(Timed(2, 16, 10))}});
    const QueueForecast f = s->Forecast(At(1));
    EXPECT_EQ(Of(f, 2).kind, WaitingKind::kHealth) << Of(f, 2).status.ToString();
    EXPECT_EQ(Of(f, 2).estimated_start, At(100));  // the healthy nodes free up
  }
  // reservation: B (32) reserves every node from 100; C (8 GPUs for 500 s) would fit now but
  // end after that.
  {
    auto s = Make(SmallTree(4), AllocateBackfill());
    s->RunCycle({At(0), std::vector<Event>{Event::Submit(Timed(1, 16, 100))}});
    s->RunCycle({At(1), std::vector<Event>{Event::Submit(Timed(2, 32, 10)),
                                           Event::Submit(Timed(3, 8, 500))}});
    const QueueForecast f = s->Forecast(At(2));
    EXPECT_EQ(Of(f, 2).kind, WaitingKind::kCapacity);
    EXPECT_EQ(Of(f, 2).estimated_start, At(100));
    EXPECT_EQ(Of(f, 3).kind, WaitingKind::kReservation);
    EXPECT_EQ(Of(f, 3).estimated_start, At(110));
  }
  // priority: a higher-priority job ahead waits for the same GPUs.
  {
    auto s = Make(SmallTree(4), AllocateBackfill());
    s->RunCycle({At(0), std::vector<Event>{Event::Submit(Timed(1, 32, 100))}});
    s->RunCycle({At(1), std::vector<Event>{Event::Submit(Timed(2, 8, 10, 0)),
                                           Event::Submit(Timed(3, 32, 10, 5))}});
    const QueueForecast f = s->Forecast(At(2));
    EXPECT_EQ(Of(f, 3).position, 1);
    EXPECT_EQ(Of(f, 3).kind, WaitingKind::kCapacity);
    EXPECT_EQ(Of(f, 2).position, 2);
    EXPECT_EQ(Of(f, 2).kind, WaitingKind::kPriority);
    EXPECT_EQ(Of(f, 3).estimated_start, At(100));
    EXPECT_EQ(Of(f, 2).estimated_start, At(110));
  }
  // backoff: its node went down; it may not start before its restart cost has elapsed.
  {
    auto s = Make(SmallTree(4), AllocateBackfill());
    GangJob j = Timed(1, 32, 100);
    j.restart_cost = Seconds(60);
    j.max_retries = 3;
    auto d = s->RunCycle({At(0), std::vector<Event>{Event::Submit(j)}});
    ASSERT_EQ(d.binds.size(), 1u);
    const topo::NodeId n = d.binds[0].placement.nodes[0].node;
    d = s->RunCycle({At(10), std::vector<Event>{Event::NodeHealth(n, topo::NodeHealth::kDown)}});
    ASSERT_EQ(d.requeues.size(), 1u);
    s->RunCycle({At(11), std::vector<Event>{Event::Submit(Timed(2, 32, 10))}});
    const QueueForecast f = s->Forecast(At(12));
    EXPECT_EQ(Of(f, 1).kind, WaitingKind::kBackoff);
    EXPECT_EQ(Of(f, 1).position, 2);  // after the eligible job
  }
}

TEST(ForecastTest, QuotaKind) {
  auto config = ParseSchedulerConfig(R"(
actions: [admit, allocate, backfill]
tenancy:
  tenants:
    small:
      quota: {gpus: 16}
)");
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  auto s = Make(SmallTree(4), *config);
  GangJob a = Timed(1, 16, 100);
  a.tenant = "small";
  GangJob b = Timed(2, 8, 10);
  b.tenant = "small";
  s->RunCycle({At(0), std::vector<Event>{Event::Submit(a), Event::Submit(b)}});
  const QueueForecast f = s->Forecast(At(1));
  ASSERT_EQ(f.jobs.size(), 1u);
  EXPECT_EQ(f.jobs[0].kind, WaitingKind::kQuota) << f.jobs[0].status.ToString();
  EXPECT_EQ(f.jobs[0].estimated_start, At(100));
}

}  // namespace
}  // namespace baton::sched
