// Property tests over random clusters and job streams: no GPU double-booked, gangs whole,
// nothing new on unhealthy nodes, discarded Statements restore the state, determinism; and, over
// a richer stream (node requirements, one task per node, elastic resize, reclaim, shared GPUs,
// tenants, node failures with replacement), that every placement and replacement honours the
// job's constraints and the tenancy policy.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <bit>
#include <map>
#include <set>

#include "core/rng.h"
#include "sched/framework/presets.h"
#include "sched/framework/scheduler.h"
#include "sched/framework/statement.h"
#include "sched/testing.h"

namespace baton::sched {
namespace {

using testing::At;

topo::Cluster RandomCluster(Rng& rng) {
  const int per_leaf = static_cast<int>(rng.UniformInt(1, 4)) * 2;
  const int leaves = static_cast<int>(rng.UniformInt(2, 6));
  const int domain = rng.Bernoulli(0.3) ? 2 : 1;
  const int gpus = rng.Bernoulli(0.3) ? 4 : 8;
  return testing::SmallTree(per_leaf * leaves, per_leaf, gpus, domain);
}

GangJob RandomJob(Rng& rng, std::uint64_t id, int node_gpus) {
  static const int kSizes[] = {1, 2, 3, 4, 8, 16, 24, 32, 64};
  GangJob j =
      testing::Job(id, kSizes[rng.UniformInt(0, 8)], static_cast<int>(rng.UniformInt(0, 3)));
  if (j.gpus > node_gpus && j.gpus % node_gpus != 0) j.gpus = node_gpus;
  j.estimated_runtime = Seconds(static_cast<double>(rng.UniformInt(0, 400)));
  j.grace_period = Seconds(static_cast<double>(rng.UniformInt(0, 60)));
  j.restart_cost = Seconds(static_cast<double>(rng.UniformInt(0, 30)));
  if (rng.Bernoulli(0.3)) j.topology.required = topo::Level::kSpine;
  if (rng.Bernoulli(0.2) && j.gpus >= 2 * node_gpus) {
    j.sub_groups = {{node_gpus * 2 <= j.gpus ? 2 * node_gpus : node_gpus, topo::Level::kLeaf}};
    if (j.gpus % j.sub_groups[0].gpus != 0) j.sub_groups.clear();
  }
  if (rng.Bernoulli(0.1)) j.gpus = 0;  // bad input now and then
  return j;
}

// Checks the invariants after a cycle; returns a printable digest of the decisions.
std::string CheckCycle(const Scheduler& s, const Decisions& d,
                       const std::map<std::uint32_t, topo::NodeHealth>& health) {
  const topo::Cluster& c = s.state().cluster();
  // 1. Each allocated GPU belongs to exactly one running/terminating job, and vice versa.
  std::vector<std::uint64_t> owned(c.nodes().size(), 0);
  for (const auto& [id, j] : s.jobs()) {
    if (j.phase == JobPhase::kRunning || j.phase == JobPhase::kTerminating) {
      EXPECT_EQ(j.placement.gpus(), j.spec.gpus) << "gang not whole: " << j.spec.name;
      for (const auto& a : j.placement.nodes) {
        EXPECT_EQ(owned[a.node.value()] & a.mask, 0u)
            << "GPU double-booked on node " << a.node.value();
        owned[a.node.value()] |= a.mask;
      }
    } else {
      EXPECT_TRUE(j.placement.empty());
    }
  }
  for (std::size_t n = 0; n < owned.size(); ++n) {
    EXPECT_EQ(owned[n], c.nodes()[n].allocated_mask) << "node " << n;
  }
  // 2. Binds are whole, on healthy nodes, and within the required level.
  std::string digest = ";";
  for (const auto& b : d.binds) {
    const JobInfo* j = s.job(b.job);
    EXPECT_NE(j, nullptr);
    if (j == nullptr) continue;
    EXPECT_EQ(b.placement.gpus(), j->spec.gpus);
    if (j->spec.topology.required) {
      EXPECT_LE(b.placement.span, *j->spec.topology.required);
    }
    for (const auto& a : b.placement.nodes) {
      auto it = health.find(a.node.value());
      EXPECT_TRUE(it == health.end() || it->second == topo::NodeHealth::kHealthy)
          << "bound on an unhealthy node";
      digest += fmt::format("b{}@{}:{:x};", b.job.value(), a.node.value(), a.mask);
    }
  }
  for (const auto& p : d.preemptions) digest += fmt::format("p{};", p.victim.value());
  for (const auto& r : d.rejections) digest += fmt::format("r{}:{};", r.job.value(), r.reason);
  for (const auto& r : d.requeues) digest += fmt::format("q{};", r.job.value());
  return digest;
}

std::string RunRandom(std::uint64_t seed) {
  Rng rng(seed);
  topo::Cluster cluster = RandomCluster(rng);
  const int node_gpus = cluster.nodes()[0].gpus;
  const auto nodes = static_cast<std::uint32_t>(cluster.nodes().size());
  SchedulerConfig config;
  if (rng.Bernoulli(0.5)) config.queue_sort = rng.Bernoulli(0.5) ? "las" : "drf";
  auto s = std::move(Scheduler::Create(std::move(cluster), config)).value();
  std::map<std::uint32_t, topo::NodeHealth> health;
  std::string trace;
  std::uint64_t next_id = 1;
  double now = 0;
  for (int cycle = 0; cycle < 40; ++cycle) {
    now += static_cast<double>(rng.UniformInt(1, 40));
    std::vector<Event> events;
    const int submits = static_cast<int>(rng.UniformInt(0, 5));
    events.reserve(static_cast<std::size_t>(submits));
    for (int i = 0; i < submits; ++i)
      events.push_back(Event::Submit(RandomJob(rng, next_id++, node_gpus)));
    for (const auto& [id, j] : s->jobs()) {
      if (j.phase == JobPhase::kRunning && rng.Bernoulli(0.15)) events.push_back(Event::Finish(id));
      if (j.phase == JobPhase::kRunning && rng.Bernoulli(0.1))
        events.push_back(Event::Checkpoint(id));
    }
    if (rng.Bernoulli(0.3)) {
      const auto n = static_cast<std::uint32_t>(rng.UniformInt(0, nodes - 1));
      const auto h = static_cast<topo::NodeHealth>(rng.UniformInt(0, 3));
      health[n] = h;
      events.push_back(Event::NodeHealth(topo::NodeId(n), h));
    }
    Decisions d = s->RunCycle({At(now), events});
    trace += CheckCycle(*s, d, health) + "|";
    if (::testing::Test::HasFailure()) break;
  }
  return trace;
}

std::size_t Count(const std::string& s, std::string_view what) {
  std::size_t n = 0;
  for (auto pos = s.find(what); pos != std::string::npos; pos = s.find(what, pos + 1)) ++n;
  return n;
}

TEST(PropertyTest, InvariantsHoldAndDecisionsAreDeterministic) {
  std::string all;
  for (std::uint64_t seed = 1; seed <= 30; ++seed) {
    const std::string a = RunRandom(seed);
    all += a;
    ASSERT_FALSE(::testing::Test::HasFailure()) << "seed " << seed;
    EXPECT_EQ(a, RunRandom(seed)) << "seed " << seed;
  }
  // The streams exercise binds, preemptions, rejections and requeues.
  EXPECT_GT(Count(all, ";b"), 100u);
  EXPECT_GT(Count(all, ";p"), 5u);
  EXPECT_GT(Count(all, ";r"), 5u);
  EXPECT_GT(Count(all, ";q"), 5u);
  std::printf("binds %zu, preemptions %zu, rejections %zu, requeues %zu\n", Count(all, ";b"),
              Count(all, ";p"), Count(all, ";r"), Count(all, ";q"));
}

// The decisions of `d` as text: binds with their GPUs, preemptions, rejections, requeues and the
// wake-up.
std::string Digest(const Decisions& d) {
  std::string out;
  for (const auto& b : d.binds) {
    out += fmt::format("b{}:", b.job.value());
    for (const auto& a : b.placement.nodes) out += fmt::format("{}/{:x},", a.node.value(), a.mask);
  }
  for (const auto& p : d.preemptions) out += fmt::format("p{},", p.victim.value());
  for (const auto& r : d.rejections) out += fmt::format("r{},", r.job.value());
  for (const auto& q : d.requeues) out += fmt::format("q{},", q.job.value());
  if (d.wake_at) out += fmt::format("w{:.3f}", d.wake_at->since_epoch.value());
  return out;
}

// Backfill keeps a reservation across cycles while it provably is what a fresh search would find
// (actions/backfill.cc, StillHolds), and the topology plugin skips subtrees it has counted too
// small. A second scheduler is told each cycle that node 0 is healthy (it was): that changes no
// GPU but the health version, so its reservations are searched afresh every cycle. Both must
// decide the same, on streams where most jobs end at their estimate (what keeps a reservation),
// some overrun it and some end early (what must not).
TEST(PropertyTest, KeptReservationsDecideAsAFreshSearch) {
  for (std::uint64_t seed = 1; seed <= 30; ++seed) {
    Rng rng(seed);
    const int per_leaf = static_cast<int>(rng.UniformInt(2, 4));
    const int leaves = static_cast<int>(rng.UniformInt(2, 6));
    const std::string policy = rng.Bernoulli(0.5) ? "backfill" : "topo";
    auto make = [&] {
      return std::move(Scheduler::Create(testing::SmallTree(per_leaf * leaves, per_leaf, 8, 1),
                                         *PolicyPreset(policy)))
          .value();
    };
    auto kept = make();
    auto fresh = make();
    std::map<JobId, double> ends;  // running jobs' actual ends
    std::uint64_t next_id = 1;
    double now = 0;
    for (int cycle = 0; cycle < 150; ++cycle) {
      double next = now + static_cast<double>(rng.UniformInt(1, 30));
      for (const auto& [id, end] : ends) next = std::min(next, end);
      now = std::max(now + 1e-3, next);
      std::vector<Event> events;
      for (auto it = ends.begin(); it != ends.end();) {
        if (it->second <= now) {
          events.push_back(Event::Finish(it->first));
          it = ends.erase(it);
        } else {
          ++it;
        }
      }
      const int submits = static_cast<int>(rng.UniformInt(0, 3));
      for (int i = 0; i < submits; ++i) {
        GangJob j = RandomJob(rng, next_id++, 8);
        j.sub_groups.clear();
        if (j.gpus == 0) j.gpus = 1;
        j.estimated_runtime = Seconds(static_cast<double>(rng.UniformInt(20, 300)));
        events.push_back(Event::Submit(std::move(j)));
      }
      std::vector<Event> fresh_events = {
          Event::NodeHealth(topo::NodeId(0), topo::NodeHealth::kHealthy)};
      fresh_events.insert(fresh_events.end(), events.begin(), events.end());
      const Decisions a = kept->RunCycle({At(now), events});
      const Decisions b = fresh->RunCycle({At(now), fresh_events});
      ASSERT_EQ(Digest(a), Digest(b)) << "seed " << seed << ", cycle " << cycle << ", " << policy;
      for (const auto& bind : a.binds) {
        const JobInfo* j = kept->job(bind.job);
        const double u = rng.Uniform();
        const double run = j->spec.estimated_runtime.value() * (u < 0.15 ? 0.5 : u < 0.3 ? 1.5 : 1);
        ends[bind.job] = now + run;
      }
      for (const auto& p : a.preemptions) ends.erase(p.victim);
      for (const auto& q : a.requeues) ends.erase(q.job);
    }
  }
}

// Leaves of 2..4 nodes (8 x H100-SXM, which takes MIG profiles) under one spine; every node is
// in zone "a" or "b" at random.
topo::Cluster RandomLabelledCluster(Rng& rng) {
  topo::ClusterBuilder b("labelled", topo::FabricKind::kFatTree);
  topo::NodeShape shape;
  shape.name = "hgx";
  shape.gpu = *topo::FindGpu("H100-SXM");
  shape.nic_bandwidth = Gbps(400);
  shape.extended = {{"rdma_nic", 2}};
  const auto sid = *b.AddShape(shape);
  const auto spine = *b.AddSwitch("spine");
  const int leaves = static_cast<int>(rng.UniformInt(2, 5));
  int n = 0;
  for (int l = 0; l < leaves; ++l) {
    const auto leaf = *b.AddSwitch(fmt::format("leaf{}", l));
    CHECK(b.AttachSwitch(spine, leaf).ok());
    const int per_leaf = static_cast<int>(rng.UniformInt(2, 4));
    for (int i = 0; i < per_leaf; ++i, ++n) {
      const auto node = *b.AddNode(fmt::format("n{:03}", n), sid);
      CHECK(b.AddLabel(node, "zone", rng.Bernoulli(0.5) ? "a" : "b").ok());
      CHECK(b.AttachNode(leaf, node).ok());
    }
  }
  auto c = b.Build();
  CHECK(c.ok()) << c.status().ToString();
  return std::move(c).value();
}

GangJob RandomRichJob(Rng& rng, std::uint64_t id) {
  static const int kSizes[] = {1, 2, 4, 8, 16, 24};
  GangJob j =
      testing::Job(id, kSizes[rng.UniformInt(0, 5)], static_cast<int>(rng.UniformInt(0, 3)));
  j.tenant = rng.Bernoulli(0.5) ? "a" : "b";
  j.estimated_runtime = Seconds(static_cast<double>(rng.UniformInt(0, 400)));
  j.grace_period = Seconds(static_cast<double>(rng.UniformInt(0, 30)));
  j.max_retries = 5;
  const double kind = rng.Uniform();
  if (kind < 0.15) {  // a share of one GPU
    j.gpus = 1;
    if (rng.Bernoulli(0.5)) {
      j.gpu_milli = static_cast<int>(rng.UniformInt(100, 900));
    } else {
      j.mig_profile = rng.Bernoulli(0.5) ? "1g.10gb" : "3g.40gb";
    }
  } else if (kind < 0.3) {  // elastic, in whole nodes
    j.gpus = 16;
    j.elastic = {8, 24, 8};
  } else if (kind < 0.45 && j.gpus >= 2) {  // a fixed count per node
    j.gpus_per_task = j.gpus >= 8 ? 4 : 1;
    j.one_task_per_node = true;
  }
  if (rng.Bernoulli(0.3)) j.node_requirements = {{"zone", NodeRequirement::Op::kIn, {"a"}, 0}};
  // Named extended resources per task (not with elastic jobs, which take none).
  if (j.elastic.min_gpus == 0 && rng.Bernoulli(0.3)) {
    j.extended = {{"rdma_nic", rng.UniformInt(1, 2)}};
  }
  return j;
}

bool InZoneA(const topo::Cluster& c, topo::NodeId n) {
  for (const auto& [k, v] : c.node(n).labels) {
    if (k == "zone") return v == "a";
  }
  return false;
}

// Checks the richer invariants after a cycle; returns a digest of the decisions.
std::string CheckRichCycle(const Scheduler& s, const Decisions& d, double now,
                           const SchedulerConfig& config) {
  const topo::Cluster& c = s.state().cluster();
  std::vector<std::uint64_t> whole(c.nodes().size(), 0);
  std::set<std::pair<std::uint32_t, int>> shared;
  for (const auto& [id, j] : s.jobs()) {
    if (j.phase != JobPhase::kRunning && j.phase != JobPhase::kTerminating) continue;
    const bool zone_a = !j.spec.node_requirements.empty();
    for (const auto& a : j.placement.nodes) {
      if (zone_a) {
        EXPECT_TRUE(InZoneA(c, a.node)) << j.spec.name << " outside its zone";
      }
      if (SharesGpu(j.spec)) {
        EXPECT_EQ(std::popcount(a.mask), 1);
        shared.insert({a.node.value(), std::countr_zero(a.mask)});
        continue;
      }
      EXPECT_EQ(whole[a.node.value()] & a.mask, 0u) << "GPU double-booked";
      whole[a.node.value()] |= a.mask;
      if (j.spec.one_task_per_node) {
        EXPECT_EQ(std::popcount(a.mask), j.spec.gpus_per_task);
      }
    }
    if (j.spec.elastic.min_gpus > 0) {
      EXPECT_GE(j.placement.gpus(), j.spec.elastic.min_gpus);
      EXPECT_LE(j.placement.gpus(), j.spec.elastic.max_gpus);
    } else if (!SharesGpu(j.spec)) {
      EXPECT_EQ(j.placement.gpus(), j.spec.gpus) << "gang not whole: " << j.spec.name;
    }
  }
  for (const auto& [node, gpu] : shared) {
    EXPECT_EQ((whole[node] >> gpu) & 1, 0u) << "a shared GPU also held whole";
  }
  // Extended resources: what each node's accounting says is in use is exactly what the jobs
  // holding a placement there were charged (bind and unbind are symmetric), within capacity.
  const int rdma = c.FindExtendedResource("rdma_nic");
  std::vector<std::int64_t> rdma_held(c.nodes().size(), 0);
  for (const auto& [id, j] : s.jobs()) {
    if (j.phase != JobPhase::kRunning && j.phase != JobPhase::kTerminating) continue;
    for (const auto& a : j.placement.nodes) {
      const HostResources h = HostOn(j, a);
      for (int i = 0; i < h.extended.count; ++i) {
        if (h.extended.id[i] == rdma) rdma_held[a.node.value()] += h.extended.amount[i];
      }
    }
  }
  for (std::uint32_t n = 0; n < c.nodes().size(); ++n) {
    EXPECT_EQ(s.state().ExtendedUsed(topo::NodeId(n), rdma), rdma_held[n]) << "node " << n;
    EXPECT_LE(rdma_held[n], s.state().ExtendedCapacity(topo::NodeId(n), rdma)) << "node " << n;
  }
  std::string digest = ";";
  for (const auto& b : d.binds) digest += fmt::format("b{};", b.job.value());
  for (const auto& r : d.replacements) {
    const JobInfo* j = s.job(r.job);
    EXPECT_NE(j, nullptr);
    if (j == nullptr) continue;
    EXPECT_EQ(c.node(r.new_node).health, topo::NodeHealth::kHealthy);
    EXPECT_FALSE(std::binary_search(j->bad_nodes.begin(), j->bad_nodes.end(), r.new_node));
    if (!j->spec.node_requirements.empty()) {
      EXPECT_TRUE(InZoneA(c, r.new_node));
    }
    if (j->spec.topology.required) {
      EXPECT_LE(r.placement.span, *j->spec.topology.required);
    }
    digest += fmt::format("x{}:{};", r.job.value(), r.new_node.value());
  }
  for (const auto& p : d.preemptions) {
    const JobInfo* v = s.job(p.victim);
    const JobInfo* by = s.job(p.for_job);
    EXPECT_NE(v, nullptr);
    if (v == nullptr) continue;
    // With cross-tenant preemption denied, another tenant's job is evicted only by reclaim: for
    // a job within its tenant's guarantee (24), from a tenant holding more than its own.
    if (by != nullptr && v->spec.tenant != by->spec.tenant &&
        !config.tenancy.cross_tenant_preemption) {
      EXPECT_LE(by->spec.gpus, 24) << "cross-tenant eviction for " << by->spec.name;
      std::int64_t held = 0;
      for (const auto& [id, j] : s.jobs()) {
        if (j.spec.tenant == v->spec.tenant &&
            (j.phase == JobPhase::kRunning || j.phase == JobPhase::kTerminating)) {
          held += j.placement.gpus();
        }
      }
      EXPECT_GT(held, 24) << "reclaimed from a tenant within its guarantee";
    }
    EXPECT_GE(now - v->start.since_epoch.value(), config.tenancy.min_run_time.value())
        << "evicted " << v->spec.name << " younger than min_run_time";
    digest += fmt::format("p{};", p.victim.value());
  }
  for (const auto& r : d.resizes)
    digest += fmt::format("z{}:{};", r.job.value(), r.placement.gpus());
  for (const auto& r : d.rejections) digest += fmt::format("r{};", r.job.value());
  for (const auto& r : d.requeues) digest += fmt::format("q{};", r.job.value());
  return digest;
}

std::string RunRich(std::uint64_t seed) {
  Rng rng(seed);
  topo::Cluster cluster = RandomLabelledCluster(rng);
  const auto nodes = static_cast<std::uint32_t>(cluster.nodes().size());
  SchedulerConfig config;
  config.actions = {"admit", "allocate", "backfill", "preempt", "reclaim", "resize"};
  config.plugins.push_back({"quota",
                            1,
                            {{"tenants.a.guaranteed", "24"},
                             {"tenants.a.borrowable", "64"},
                             {"tenants.b.guaranteed", "24"},
                             {"tenants.b.borrowable", "64"}}});
  config.tenancy.min_run_time = Seconds(rng.Bernoulli(0.5) ? 0 : 30);
  config.tenancy.cross_tenant_preemption = rng.Bernoulli(0.5);
  auto s = std::move(Scheduler::Create(std::move(cluster), config)).value();
  std::string trace;
  std::uint64_t next_id = 1;
  double now = 0;
  for (int cycle = 0; cycle < 40; ++cycle) {
    now += static_cast<double>(rng.UniformInt(1, 40));
    std::vector<Event> events;
    const int submits = static_cast<int>(rng.UniformInt(0, 4));
    events.reserve(static_cast<std::size_t>(submits));
    for (int i = 0; i < submits; ++i)
      events.push_back(Event::Submit(RandomRichJob(rng, next_id++)));
    for (const auto& [id, j] : s->jobs()) {
      if (j.phase == JobPhase::kRunning && rng.Bernoulli(0.1)) events.push_back(Event::Finish(id));
    }
    if (rng.Bernoulli(0.4)) {
      const auto n = static_cast<std::uint32_t>(rng.UniformInt(0, nodes - 1));
      const bool down = rng.Bernoulli(0.6);
      events.push_back(Event::NodeHealth(
          topo::NodeId(n), down ? topo::NodeHealth::kDown : topo::NodeHealth::kHealthy));
    }
    // Victims' tenants and ages are read before the cycle releases anything.
    Decisions d = s->RunCycle({At(now), events});
    trace += CheckRichCycle(*s, d, now, config) + "|";
    if (::testing::Test::HasFailure()) break;
  }
  return trace;
}

TEST(PropertyTest, RichStreamsKeepConstraintsAndPolicy) {
  std::string all;
  for (std::uint64_t seed = 1; seed <= 30; ++seed) {
    const std::string a = RunRich(seed);
    all += a;
    ASSERT_FALSE(::testing::Test::HasFailure()) << "seed " << seed;
    EXPECT_EQ(a, RunRich(seed)) << "seed " << seed;
  }
  // The streams exercise what they are for.
  EXPECT_GT(Count(all, ";b"), 100u);
  EXPECT_GT(Count(all, ";x"), 5u);
  EXPECT_GT(Count(all, ";p"), 3u);
  EXPECT_GT(Count(all, ";z"), 3u);
  std::printf("binds %zu, replacements %zu, preemptions %zu, resizes %zu, requeues %zu\n",
              Count(all, ";b"), Count(all, ";x"), Count(all, ";p"), Count(all, ";z"),
              Count(all, ";q"));
}

TEST(PropertyTest, DiscardedStatementRestoresTheSnapshot) {
  for (std::uint64_t seed = 1; seed <= 20; ++seed) {
    Rng rng(seed);
    ClusterState st(RandomCluster(rng));
    const auto nodes = st.cluster().nodes().size();
    for (std::size_t n = 0; n < nodes; ++n) {
      const std::uint64_t all = (1ULL << st.cluster().nodes()[n].gpus) - 1;
      const std::uint64_t m = rng.Next() & all;
      if (m) {
        ASSERT_TRUE(st.Allocate(topo::NodeId(static_cast<std::uint32_t>(n)), m).ok());
      }
      if (rng.Bernoulli(0.2))
        st.SetHealth(topo::NodeId(static_cast<std::uint32_t>(n)), topo::NodeHealth::kSuspect);
    }
    auto snapshot = [&] {
      std::vector<std::int64_t> v;
      for (const auto& n : st.cluster().nodes())
        v.push_back(static_cast<std::int64_t>(n.allocated_mask));
      for (int g : {1, 2, 4, 8}) v.push_back(st.Slots(Subtree{}, g));
      for (std::uint32_t sw = 0; sw < st.cluster().switches().size(); ++sw) {
        v.push_back(st.Slots({SubtreeKind::kSwitch, sw}, 8));
        v.push_back(st.Free({SubtreeKind::kSwitch, sw}));
        v.push_back(st.cluster().counts(topo::SwitchId(sw)).allocated);
      }
      for (int f = 1; f <= 8; ++f)
        v.push_back(static_cast<std::int64_t>(st.NodesWithFree(f).size()));
      return v;
    };
    const auto before = snapshot();
    Statement stmt(&st);
    for (int op = 0; op < 50; ++op) {
      const auto n = topo::NodeId(
          static_cast<std::uint32_t>(rng.UniformInt(0, static_cast<std::int64_t>(nodes) - 1)));
      const std::uint64_t bit = 1ULL << rng.UniformInt(0, st.cluster().node(n).gpus - 1);
      (void)(rng.Bernoulli(0.5) ? stmt.Allocate(n, bit) : stmt.Release(n, bit));
    }
    stmt.Discard();
    EXPECT_EQ(snapshot(), before) << "seed " << seed;
  }
}

}  // namespace
}  // namespace baton::sched
