#include "sim/replay/daemon_replay.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/rng.h"
#include "sched/framework/scheduler.h"
#include "topology/builders/fabrics.h"
#include "topology/io/cluster_yaml.h"

namespace baton::sim {
namespace {

using sched::history::Reader;

// With `extended`, the first 8 nodes have 2 RDMA NICs each (named extended resources).
topo::Cluster Cluster16(bool extended = false) {
  topo::FatTreeParams p;
  p.layout.nodes = 16;
  if (extended) {
    p.layout.extended = {{"rdma_nic", 2}};
    p.layout.extended_nodes = 8;
  }
  p.layout.node_prefix = "n";
  p.tiers = 2;
  p.nodes_per_leaf = 4;
  Result<topo::Cluster> c = topo::BuildFatTree(p);
  return std::move(*c);
}

// A daemon in miniature: drives a Scheduler the way the SchedulingController does (jobs arrive,
// run for their estimated runtime, a node drains and comes back, a few jobs are cancelled) and
// records every cycle with the daemon's encoder. With `extended`, every fourth job needs an RDMA
// NIC per task, which only half the nodes have.
std::string RecordedHistory(const sched::SchedulerConfig& config, int jobs, bool extended = false) {
  topo::Cluster cluster = Cluster16(extended);
  std::string out = sched::history::HeaderLine() + "\n";
  const TimePoint t0{Seconds(1'764'590'000.25)};
  out += sched::history::EncodeRun({1, t0, topo::ExportClusterYaml(cluster), ""}) + "\n";
  auto s = sched::Scheduler::Create(cluster.Clone(), config);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  Rng rng(7);
  std::multimap<double, sched::JobId> ends;
  std::map<sched::JobId, double> runtime;
  std::int64_t cycle = 0;
  double now = t0.since_epoch.value();
  int submitted = 0;
  std::optional<double> wake;
  const int sizes[] = {1, 2, 4, 8, 16, 32};
  while (submitted < jobs || !ends.empty()) {
    std::vector<sched::Event> events;
    // The next arrival, or the scheduler's wake_at when that comes first (as the daemon wakes).
    const double arrival = now + 1.0 + rng.Uniform() * 20;
    const bool woken = wake && *wake > now && *wake < arrival;
    now = woken ? *wake : arrival;
    if (submitted < jobs && !woken) {
      for (int k = rng.UniformInt(1, 3); k > 0 && submitted < jobs; --k) {
        sched::GangJob j;
        j.id = sched::JobId(static_cast<std::uint64_t>(++submitted));
        j.name = "job" + std::to_string(submitted);
        j.tenant = submitted % 3 == 0 ? "team-b" : "team-a";
        j.gpus = sizes[rng.UniformInt(0, 5)];
        j.priority = rng.Bernoulli(0.1) ? 100 : 0;
        j.estimated_runtime = Seconds(std::round(60 + rng.Uniform() * 600));
        j.submit_time = TimePoint{Seconds(now)};
        if (extended && submitted % 4 == 0) j.extended = {{"rdma_nic", 1}};
        runtime[j.id] = j.estimated_runtime.value();
        events.push_back(sched::Event::Submit(j));
      }
      if (submitted == jobs / 3) {
        events.push_back(sched::Event::NodeHealth(topo::NodeId(5), topo::NodeHealth::kDraining));
      }
      if (submitted == 2 * jobs / 3) {
        events.push_back(sched::Event::NodeHealth(topo::NodeId(5), topo::NodeHealth::kHealthy));
      }
      if (submitted % 17 == 0) events.push_back(sched::Event::Cancel(sched::JobId(submitted - 1)));
    }
    while (!ends.empty() && ends.begin()->first <= now) {
      events.push_back(sched::Event::Finish(ends.begin()->second));
      ends.erase(ends.begin());
    }
    const sched::Decisions d = (*s)->RunCycle({TimePoint{Seconds(now)}, events});
    out +=
        sched::history::EncodeCycle(cluster, 1, ++cycle, TimePoint{Seconds(now)}, events, d) + "\n";
    wake.reset();
    if (d.wake_at) wake = d.wake_at->since_epoch.value();
    for (const sched::Bind& b : d.binds) ends.emplace(now + runtime[b.job], b.job);
    for (const sched::Preemption& p : d.preemptions) {
      std::erase_if(ends, [&](const auto& kv) { return kv.second == p.victim; });
    }
    for (const sched::Requeue& q : d.requeues) {
      std::erase_if(ends, [&](const auto& kv) { return kv.second == q.job; });
    }
    // A cancelled job that was running ends at once.
    for (const sched::Event& e : events) {
      if (e.kind == sched::Event::Kind::kCancel) {
        std::erase_if(ends, [&](const auto& kv) { return kv.second == e.job_id; });
      }
    }
  }
  return out;
}

sched::SchedulerConfig Daemon() {
  sched::SchedulerConfig c;
  c.plugins.push_back({"planner", 1, {}});
  return c;
}

TEST(ReplayDaemon, SameConfigReproducesEveryPlacement) {
  const std::string text = RecordedHistory(Daemon(), 300);
  std::istringstream in(text);
  Reader reader(in, "history.jsonl");
  Result<ReplayReport> r = ReplayDaemon(reader, Daemon());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->runs, 1);
  EXPECT_GT(r->compared, 250);
  EXPECT_EQ(r->identical, r->compared);
  EXPECT_EQ(r->other_differences, 0);
  EXPECT_FALSE(r->first.has_value()) << r->first->what;
}

// Jobs that need named extended resources replay onto the same nodes: the history carries both
// the nodes' resources (in the run's cluster YAML) and the jobs' requests.
TEST(ReplayDaemon, ExtendedResourcesReplayIdentically) {
  const std::string text = RecordedHistory(Daemon(), 200, /*extended=*/true);
  EXPECT_NE(text.find(R"("extended":{"rdma_nic":1})"), std::string::npos);
  EXPECT_NE(text.find("rdma_nic: 2"), std::string::npos);
  std::istringstream in(text);
  Reader reader(in, "history.jsonl");
  Result<ReplayReport> r = ReplayDaemon(reader, Daemon());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_GT(r->compared, 150);
  EXPECT_EQ(r->identical, r->compared);
  EXPECT_FALSE(r->first.has_value()) << r->first->what;
}

// Another config than the recorded one places differently: the replay says where it first
// diverged (so the comparison above is not vacuous).
TEST(ReplayDaemon, ADifferentConfigDivergesAndSaysWhere) {
  const std::string text = RecordedHistory(Daemon(), 300);
  sched::SchedulerConfig spread = Daemon();
  for (auto& p : spread.plugins) {
    if (p.name == "binpack") p.weight = -1;  // spread instead of pack
  }
  // A run line recorded with that config: the replay must use the recorded text.
  std::string yaml =
      "actions: [admit, allocate, backfill, preempt]\nqueue_sort: fifo\nplugins: [health, "
      "gpu-type, bad-nodes, node-attributes, resources, topology, lost-work]\n";
  std::string changed = text;
  const std::string empty_config = R"("scheduler":"")";
  const auto at = changed.find(empty_config);
  ASSERT_NE(at, std::string::npos);
  nlohmann::json quoted = yaml;
  changed.replace(at, empty_config.size(), "\"scheduler\":" + quoted.dump());
  std::istringstream in(changed);
  Reader reader(in, "history.jsonl");
  Result<ReplayReport> r = ReplayDaemon(reader, Daemon());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_LT(r->identical, r->compared);
  ASSERT_TRUE(r->first.has_value());
  EXPECT_GT(r->first->line, 2);
  EXPECT_FALSE(r->first->what.empty());
}

TEST(ReplayDaemon, ATamperedPlacementIsTheFirstDivergence) {
  std::string text = RecordedHistory(Daemon(), 60);
  // The first recorded bind, moved to other GPUs.
  const auto at = text.find(R"("placed":[{"job":)");
  ASSERT_NE(at, std::string::npos);
  const auto mask = text.find("\"0x", at);
  ASSERT_NE(mask, std::string::npos);
  const auto end = text.find('"', mask + 1);
  const std::string old_mask = text.substr(mask + 1, end - mask - 1);
  text.replace(mask + 1, end - mask - 1, old_mask == "0x1" ? "0x2" : "0x1");
  const std::int64_t line = std::count(text.begin(), text.begin() + at, '\n') + 1;
  std::istringstream in(text);
  Reader reader(in, "history.jsonl");
  Result<ReplayReport> r = ReplayDaemon(reader, Daemon());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_TRUE(r->first.has_value());
  EXPECT_EQ(r->first->line, line);
  EXPECT_NE(r->first->what.find("recorded"), std::string::npos) << r->first->what;
  EXPECT_EQ(r->identical, r->compared - 1);
}

// Under the recorded config, the what-if replay gives back the record's own metrics; under
// another it answers differently.
TEST(WhatIf, SameConfigGivesBackTheRecord) {
  const std::string text = RecordedHistory(Daemon(), 300);
  std::istringstream in(text);
  Reader reader(in, "history.jsonl");
  Result<WhatIfReport> r = WhatIf(reader, Daemon());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const WhatIfMetrics& a = r->recorded;
  const WhatIfMetrics& b = r->replayed;
  EXPECT_EQ(a.submitted, 300);
  EXPECT_GT(a.completed, 250);
  EXPECT_GT(a.cancelled, 0);
  EXPECT_EQ(b.submitted, a.submitted);
  EXPECT_EQ(b.completed, a.completed);
  EXPECT_EQ(b.cancelled, a.cancelled);
  EXPECT_NEAR(b.mean_wait_s, a.mean_wait_s, 1e-3);
  EXPECT_NEAR(b.mean_jct_s, a.mean_jct_s, 1e-3);
  EXPECT_NEAR(b.utilisation, a.utilisation, 1e-6);
  EXPECT_GT(a.utilisation, 0.1);
}

TEST(WhatIf, StrictFifoWaitsLongerThanTheDaemonsBackfill) {
  const std::string text = RecordedHistory(Daemon(), 300);
  std::istringstream in(text);
  Reader reader(in, "history.jsonl");
  sched::SchedulerConfig fifo;
  fifo.actions = {"admit", "allocate"};
  fifo.queue_sort = "fifo";
  fifo.head_of_line_blocking = true;
  Result<WhatIfReport> r = WhatIf(reader, fifo);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->replayed.submitted, 300);
  EXPECT_GT(r->replayed.mean_wait_s, r->recorded.mean_wait_s);
}

}  // namespace
}  // namespace baton::sim
