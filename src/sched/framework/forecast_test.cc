// Scheduler::Forecast: estimated starts from the scheduler's own actions, waiting kinds and queue
// positions, and that forecasting changes nothing.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "core/rng.h"
#include "sched/framework/scheduler.h"
#include "sched/plugins/builtin_plugins.h"
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

// WhatIf answers from one shared projection of the queue where that is provably the same as
// running every projected cycle with the job (the reference). Over random clusters, configs,
// queues and asks (at the projection's time and later), both give the same answer in every
// field, and asking changes nothing: a twin scheduler that is never asked decides the same.
void ExpectSameAnswer(const WhatIfAnswer& fast, const WhatIfAnswer& ref, const std::string& where) {
  EXPECT_EQ(fast.forecast.job, ref.forecast.job) << where;
  EXPECT_EQ(fast.forecast.position, ref.forecast.position) << where;
  EXPECT_EQ(fast.forecast.estimated_start.has_value(), ref.forecast.estimated_start.has_value())
      << where;
  if (fast.forecast.estimated_start && ref.forecast.estimated_start) {
    EXPECT_EQ(fast.forecast.estimated_start->since_epoch.value(),
              ref.forecast.estimated_start->since_epoch.value())
        << where;
  }
  EXPECT_EQ(fast.forecast.unknown, ref.forecast.unknown) << where;
  EXPECT_EQ(WaitingKindName(fast.forecast.kind), WaitingKindName(ref.forecast.kind)) << where;
  EXPECT_EQ(fast.forecast.status.kind(), ref.forecast.status.kind()) << where;
  EXPECT_EQ(fast.forecast.status.plugin(), ref.forecast.status.plugin()) << where;
  EXPECT_EQ(fast.forecast.status.reason(), ref.forecast.status.reason()) << where;
  EXPECT_EQ(fast.placement, ref.placement) << where;
  EXPECT_EQ(fast.gpu, ref.gpu) << where;
}

SchedulerConfig RandomConfig(Rng& rng, int variant) {
  SchedulerConfig c;  // variant 0: the defaults (priority order, all four actions)
  switch (variant) {
    case 1:
      c.queue_sort = "fifo";
      c.max_candidates = 1;
      break;
    case 2:
      c.queue_sort = "fifo";
      c.actions = {"admit", "allocate"};
      c.head_of_line_blocking = true;
      break;
    case 3:
      c.actions = {"admit", "allocate", "preempt"};
      break;
    case 4:
      c.queue_sort = "shortest-first";
      c.actions = {"admit", "allocate", "backfill"};
      c.backfill_reservations = 2;
      break;
    case 5:
      c.queue_sort = "las";  // keys change as jobs run: never reused
      break;
    default:
      break;
  }
  if (rng.Bernoulli(0.3)) c.max_candidates = static_cast<int>(rng.UniformInt(1, 4));
  return c;
}

GangJob RandomTimed(Rng& rng, std::uint64_t id, int node_gpus, int cluster_gpus, int max_priority) {
  static const int kSizes[] = {1, 2, 4, 8, 8, 16, 24, 32};
  GangJob j = Job(id, kSizes[rng.UniformInt(0, 7)],
                  static_cast<int>(rng.UniformInt(0, static_cast<std::uint64_t>(max_priority))));
  if (j.gpus > node_gpus && j.gpus % node_gpus != 0) j.gpus = node_gpus;
  j.gpus = std::min(j.gpus, cluster_gpus);
  j.estimated_runtime =
      Seconds(rng.Bernoulli(0.1) ? 0.0 : static_cast<double>(rng.UniformInt(5, 400)));
  j.grace_period = Seconds(static_cast<double>(rng.UniformInt(0, 30)));
  j.preemptible = rng.Bernoulli(0.8);
  if (rng.Bernoulli(0.2)) j.topology.required = topo::Level::kLeaf;
  return j;
}

TEST(WhatIfReuseTest, SameAnswersAsRunningEveryCycle) {
  std::uint64_t asks = 0, reused = 0;
  for (std::uint64_t seed = 1; seed <= 16; ++seed) {
    Rng rng(seed);
    const int variant = static_cast<int>(seed % 6);
    const int per_leaf = static_cast<int>(rng.UniformInt(1, 3)) * 2;
    const int leaves = static_cast<int>(rng.UniformInt(2, 4));
    const int node_gpus = rng.Bernoulli(0.3) ? 4 : 8;
    const int cluster_gpus = per_leaf * leaves * node_gpus;
    const SchedulerConfig config = RandomConfig(rng, variant);
    auto s = Make(SmallTree(per_leaf * leaves, per_leaf, node_gpus), config);
    auto twin = Make(SmallTree(per_leaf * leaves, per_leaf, node_gpus), config);
    std::uint64_t id = 1;
    double t = 0;
    for (int step = 0; step < 5; ++step) {
      // Arrivals, and the ends of jobs that reached their estimate (or, without one, at random).
      std::vector<Event> ev;
      for (const auto& [jid, j] : s->jobs()) {
        if (j.phase != JobPhase::kRunning) continue;
        const double runtime = j.spec.estimated_runtime.value();
        if ((runtime > 0 && j.start.since_epoch.value() + runtime <= t) ||
            (runtime == 0 && rng.Bernoulli(0.1))) {
          ev.push_back(Event::Finish(jid));
        }
      }
      const int arrivals = static_cast<int>(rng.UniformInt(2, 9));
      for (int i = 0; i < arrivals; ++i) {
        ev.push_back(Event::Submit(RandomTimed(rng, id++, node_gpus, cluster_gpus, 2)));
      }
      const Decisions da = s->RunCycle({At(t), ev});
      const Decisions db = twin->RunCycle({At(t), ev});
      ASSERT_EQ(da.binds.size(), db.binds.size()) << "seed " << seed << " step " << step;
      for (std::size_t i = 0; i < da.binds.size(); ++i) {
        EXPECT_EQ(da.binds[i].job, db.binds[i].job);
        EXPECT_EQ(da.binds[i].placement, db.binds[i].placement);
      }
      EXPECT_EQ(da.preemptions.size(), db.preemptions.size());
      EXPECT_EQ(da.wake_at, db.wake_at);
      // Asks: at the last cycle's time (the shared projection's) and later; the shared
      // projection is sometimes a whole-queue forecast's.
      const std::uint64_t version = s->state().version();
      if (rng.Bernoulli(0.3)) (void)s->Forecast(At(t));
      const int n = static_cast<int>(rng.UniformInt(2, 6));
      for (int q = 0; q < n; ++q) {
        static const double kLater[] = {0, 0, 0, 1, 7, 60};
        const double at = t + kLater[rng.UniformInt(0, 5)];
        const int max_cycles = rng.Bernoulli(0.15) ? static_cast<int>(rng.UniformInt(1, 6)) : 2000;
        // Mostly priority 0, which sorts last under priority order and preempts nobody.
        GangJob job =
            RandomTimed(rng, 1000 + q, node_gpus, cluster_gpus, rng.Bernoulli(0.2) ? 2 : 0);
        const std::uint64_t before = s->whatif_reused();
        Result<WhatIfAnswer> fast = s->WhatIf(At(at), job, max_cycles);
        Result<WhatIfAnswer> ref = s->WhatIf(At(at), job, max_cycles, /*reference=*/true);
        ASSERT_EQ(fast.ok(), ref.ok());
        ++asks;
        reused += s->whatif_reused() - before;
        if (!fast.ok()) continue;
        ExpectSameAnswer(*fast, *ref,
                         "seed " + std::to_string(seed) + " step " + std::to_string(step) +
                             " ask " + std::to_string(q) + " at " + std::to_string(at));
      }
      EXPECT_EQ(s->state().version(), version);
      EXPECT_EQ(s->jobs().size(), twin->jobs().size());
      t += static_cast<double>(rng.UniformInt(1, 120));
    }
  }
  // The reuse is exercised, not just the reference path.
  EXPECT_GT(reused, asks / 3) << reused << " of " << asks << " asks reused a projection";
}

// Asking many times while nothing changes shares one projection; a cycle starts a new one.
TEST(WhatIfReuseTest, OneProjectionUntilTheNextCycle) {
  auto s = Make(SmallTree(4), AllocateBackfill());
  s->RunCycle({At(0), std::vector<Event>{Event::Submit(Timed(1, 32, 100))}});
  s->RunCycle(
      {At(10), std::vector<Event>{Event::Submit(Timed(2, 16, 50)), Event::Submit(Timed(3, 32, 30)),
                                  Event::Submit(Timed(4, 8, 200))}});
  // E (8 GPUs, 10 s) backfills next to B at 100; F (32) waits for the queue: B, C, D end.
  for (int i = 0; i < 3; ++i) {
    Result<WhatIfAnswer> e = s->WhatIf(At(20), Timed(99, 8, 10));
    ASSERT_TRUE(e.ok());
    EXPECT_EQ(e->forecast.estimated_start, At(100));
    Result<WhatIfAnswer> f = s->WhatIf(At(20 + i), Timed(99, 32, 10));
    ASSERT_TRUE(f.ok());
    EXPECT_EQ(f->forecast.estimated_start, At(380));
  }
  EXPECT_EQ(s->whatif_reused(), 6u);
  s->RunCycle({At(30), {}});
  Result<WhatIfAnswer> e = s->WhatIf(At(30), Timed(99, 8, 10));
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->forecast.estimated_start, At(100));
  EXPECT_EQ(s->whatif_reused(), 7u);
}

// A plugin outside the built-in set that declares itself stateless: the what-if may share its
// projection. Regression (issue 31): the what-if knew the stateless plugins by a list of names,
// so any new plugin, stateless or not, turned the sharing off.
TEST(WhatIfReuseTest, APluginDeclaredStatelessKeepsTheSharedProjection) {
  PluginRegistry registry = BuiltinPlugins();
  registry["even-nodes"] = NoArgs<testing::EvenNodesOnly>();
  SchedulerConfig c = AllocateBackfill();
  c.plugins.push_back({"even-nodes", 1, {}});
  SchedulerOptions o;
  o.registry = &registry;
  auto made = Scheduler::Create(SmallTree(4), c, o);
  ASSERT_TRUE(made.ok()) << made.status().ToString();
  std::unique_ptr<Scheduler> s = std::move(made).value();
  s->RunCycle({At(0), std::vector<Event>{Event::Submit(Timed(1, 16, 100))}});
  for (int i = 0; i < 2; ++i) {
    Result<WhatIfAnswer> e = s->WhatIf(At(10), Timed(99, 8, 10));
    ASSERT_TRUE(e.ok()) << e.status().ToString();
  }
  EXPECT_EQ(s->whatif_reused(), 2u);
}

// The actions say whether a job at the back of the queue can change what they do for the others
// (Action::IgnoresLaterJobs): the projection is shared only when every configured one says not.
TEST(WhatIfReuseTest, ActionsDeclareWhetherALaterJobMatters) {
  auto reused_with = [](std::vector<std::string> actions, PreemptBy by) {
    SchedulerConfig c;
    c.actions = std::move(actions);
    c.preempt_by = by;
    auto made = Scheduler::Create(SmallTree(4), c);
    EXPECT_TRUE(made.ok()) << made.status().ToString();
    if (!made.ok()) return std::uint64_t{0};
    std::unique_ptr<Scheduler> s = std::move(made).value();
    // The running job fills the cluster: the asked job waits, so its projection is what runs.
    s->RunCycle({At(0), std::vector<Event>{Event::Submit(Timed(1, 32, 100))}});
    for (int i = 0; i < 2; ++i) EXPECT_TRUE(s->WhatIf(At(10), Timed(99, 8, 10)).ok());
    return s->whatif_reused();
  };
  EXPECT_EQ(reused_with({"admit", "allocate", "backfill", "preempt"}, PreemptBy::kPriority), 2u);
  // resize grows running jobs into room a later job's arrival changes.
  EXPECT_EQ(reused_with({"admit", "allocate", "resize"}, PreemptBy::kPriority), 0u);
}

}  // namespace
}  // namespace baton::sched
