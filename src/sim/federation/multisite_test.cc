#include "sim/federation/multisite.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "core/rng.h"
#include "sched/framework/presets.h"
#include "topology/builders/fabrics.h"

namespace baton::sim {
namespace {

topo::Cluster SmallCluster(int nodes, const std::string& gpu = "H100-SXM") {
  topo::FatTreeParams p;
  p.name = "site";
  p.layout.nodes = nodes;
  p.layout.gpus_per_node = 8;
  p.layout.gpu = gpu;
  p.tiers = 2;
  p.nodes_per_leaf = 4;
  p.leaves_per_spine = 8;
  auto c = topo::BuildFatTree(p);
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return std::move(c).value();
}

federation::Sites MakeSites(const std::string& text) {
  auto s = federation::ParseSites(text, "sites.yaml");
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return std::move(s).value();
}

std::vector<SimSite> MakeSimSites(const std::vector<int>& nodes) {
  std::vector<SimSite> out;
  for (int n : nodes) {
    SimSite s(SmallCluster(n));
    auto c = sched::PolicyPreset("backfill");
    EXPECT_TRUE(c.ok());
    s.scheduler = *c;
    s.scheduler_name = "backfill";
    out.push_back(std::move(s));
  }
  return out;
}

MultiSiteJob Job(std::string id, double submit_s, int gpus, double duration_s, std::string home,
                 std::vector<std::string> datasets = {}, std::string tenant = "t") {
  MultiSiteJob j;
  j.trace.id = std::move(id);
  j.trace.submit = Seconds(submit_s);
  j.trace.gpus = gpus;
  j.trace.duration = Seconds(duration_s);
  j.trace.tenant = std::move(tenant);
  j.home_site = std::move(home);
  j.datasets = std::move(datasets);
  return j;
}

MultiSiteResult RunPolicy(const federation::Sites& sites, std::vector<SimSite>& sim,
                          const std::vector<MultiSiteJob>& jobs, std::string_view policy,
                          Seconds checkpoint = Hours(1)) {
  MultiSiteConfig config;
  auto p = federation::FindRoutingPolicy(policy);
  EXPECT_TRUE(p.ok());
  config.routing = *p;
  config.checkpoint_interval = checkpoint;
  auto r = RunMultiSite(sites, sim, jobs, config);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return std::move(r).value();
}

constexpr const char* kTwoSites = R"(sites:
  a:
    url: http://127.0.0.1:1
    regions: [cn]
    price_per_gpu_hour: 2
    datasets: {small: {size_gib: 10}}
  b:
    url: http://127.0.0.1:2
    regions: [sg]
    price_per_gpu_hour: 1
wan:
  - {between: [a, b], gbps: 80, latency_ms: 20}
)";

// The constructed case of the issue: the home site is full for 10 h, another site is idle, the
// job's data is small. Predicted completion moves the waiting jobs; home-site routing waits.
TEST(MultiSiteTest, PredictedCompletionBeatsHomeSiteWhenHomeIsFullAndDataIsSmall) {
  federation::Sites sites = MakeSites(kTwoSites);
  std::vector<MultiSiteJob> jobs = {Job("hog", 0, 16, 10 * 3600, "a")};
  for (int i = 0; i < 4; ++i) {
    jobs.push_back(Job(fmt::format("j{}", i), 60 + i, 8, 3600, "a", {"small"}));
  }
  std::map<std::string, MultiSiteResult> runs;
  for (std::string_view policy : {"home-site", "predicted-completion", "least-loaded"}) {
    std::vector<SimSite> sim = MakeSimSites({2, 2});
    runs[std::string(policy)] = RunPolicy(sites, sim, jobs, policy);
  }
  const MultiSiteResult& home = runs["home-site"];
  const MultiSiteResult& pc = runs["predicted-completion"];
  EXPECT_EQ(home.summary.completed, 5);
  EXPECT_EQ(pc.summary.completed, 5);
  // Home: the four wait for the hog (10 h); elsewhere they start after staging 10 GiB.
  EXPECT_GT(home.jobs[1].wait_s(), 9 * 3600);
  EXPECT_EQ(home.summary.away_from_home, 0);
  EXPECT_EQ(pc.summary.away_from_home, 4);
  for (int i = 1; i <= 4; ++i) {
    EXPECT_EQ(pc.jobs[i].site, "b") << pc.jobs[i].explanation;
    // 10 GiB over 80 Gb/s shared by the jobs staging at once, then 20 ms.
    EXPECT_GT(pc.jobs[i].staging_s, 10.0 * (1 << 30) * 8 / 80e9);
    EXPECT_NE(pc.jobs[i].explanation.find("b by predicted-completion"), std::string::npos);
  }
  EXPECT_LT(pc.summary.mean_jct_s, 0.6 * home.summary.mean_jct_s);
  EXPECT_GT(pc.summary.bytes_staged, 0);
  EXPECT_EQ(home.summary.bytes_staged, 0);
  // Site b is cheaper: moving work there costs less too.
  EXPECT_LT(pc.summary.cost, home.summary.cost);
}

// Concurrent transfers on one link share it: two jobs staging 100 GiB over the same link at the
// same instant each take twice the time one alone would.
TEST(MultiSiteTest, TransfersOnOneLinkShareIt) {
  std::string text = kTwoSites;
  text.replace(text.find("small: {size_gib: 10}"), 21, "big: {size_gib: 100}");
  federation::Sites sites = MakeSites(text);
  const double alone = 100.0 * (1 << 30) * 8 / 80e9 + 0.020;
  for (int k : {1, 2}) {
    std::vector<MultiSiteJob> jobs = {Job("hog", 0, 16, 100 * 3600, "a")};
    for (int i = 0; i < k; ++i)
      jobs.push_back(Job(fmt::format("j{}", i), 10, 8, 600, "a", {"big"}));
    std::vector<SimSite> sim = MakeSimSites({2, 2});
    MultiSiteResult r = RunPolicy(sites, sim, jobs, "predicted-completion");
    for (int i = 1; i <= k; ++i) {
      EXPECT_EQ(r.jobs[i].site, "b");
      EXPECT_NEAR(r.jobs[i].staging_s, (k == 1 ? alone : 2 * (alone - 0.020) + 0.020), 1e-3);
      EXPECT_NEAR(r.jobs[i].bytes_staged, 100.0 * (1 << 30), 1);
    }
  }
}

// A tenant whose jobs require region "sg" never runs at a (region cn), whatever the policy.
TEST(MultiSiteTest, RegionRulesAreHonoured) {
  federation::Sites sites = MakeSites(kTwoSites);
  std::vector<MultiSiteJob> jobs;
  for (int i = 0; i < 6; ++i) {
    jobs.push_back(Job(fmt::format("j{}", i), i * 30, 8, 1800, "b", {"small"}));
    jobs.back().require_regions = {"sg"};
  }
  for (std::string_view policy : {"least-loaded", "predicted-completion"}) {
    std::vector<SimSite> sim = MakeSimSites({2, 2});
    MultiSiteResult r = RunPolicy(sites, sim, jobs, policy);
    EXPECT_EQ(r.summary.completed, 6);
    for (const SiteJobRecord& j : r.jobs) EXPECT_EQ(j.site, "b") << policy;
  }
}

// With a deadline the cheaper site can meet, cheapest-by-deadline goes there; without one it
// routes by predicted completion (home: no staging).
TEST(MultiSiteTest, CheapestByDeadlineTakesTheCheaperSiteThatMeetsTheDeadline) {
  federation::Sites sites = MakeSites(kTwoSites);
  std::vector<MultiSiteJob> jobs = {Job("j", 0, 8, 3600, "a", {"small"})};
  std::vector<SimSite> sim = MakeSimSites({2, 2});
  MultiSiteResult none = RunPolicy(sites, sim, jobs, "cheapest-by-deadline");
  EXPECT_EQ(none.jobs[0].site, "a");
  jobs[0].deadline = Hours(2);
  sim = MakeSimSites({2, 2});
  MultiSiteResult loose = RunPolicy(sites, sim, jobs, "cheapest-by-deadline");
  EXPECT_EQ(loose.jobs[0].site, "b") << loose.jobs[0].explanation;
  EXPECT_LT(loose.summary.cost, none.summary.cost);
  // A deadline only the home site meets (staging 10 GiB takes about a second).
  jobs[0].deadline = Seconds(3600.5);
  sim = MakeSimSites({2, 2});
  EXPECT_EQ(RunPolicy(sites, sim, jobs, "cheapest-by-deadline").jobs[0].site, "a");
}

// A job held at the broker while its home site is down is routed when the site returns, even
// though its deadline passed meanwhile (found by the README run: 17 of 2,000 jobs were rejected
// as "cannot reach any eligible site before the deadline").
TEST(MultiSiteTest, AHeldJobRunsAfterItsDeadlinePassed) {
  std::string text = kTwoSites;
  text.replace(text.find("    datasets: {small"), 0, "    outages: [{start_h: 0, hours: 2}]\n");
  federation::Sites sites = MakeSites(text);
  std::vector<MultiSiteJob> jobs = {Job("x", 0, 8, 600, "a")};
  jobs[0].deadline = Seconds(1200);
  std::vector<SimSite> sim = MakeSimSites({2, 2});
  MultiSiteResult r = RunPolicy(sites, sim, jobs, "home-site");
  EXPECT_EQ(r.jobs[0].outcome, SiteJobOutcome::kCompleted) << r.jobs[0].reason;
  EXPECT_EQ(r.jobs[0].site, "a");
  EXPECT_NEAR(r.jobs[0].first_start_s, 7200, 1e-6);
}

constexpr const char* kThreeSites = R"(sites:
  a:
    url: http://127.0.0.1:1
    price_per_gpu_hour: 2
    datasets: {t0.pretrain: {size_gib: 200}, t0.eval: {size_gib: 1}}
  b:
    url: http://127.0.0.1:2
    price_per_gpu_hour: 1.5
    datasets: {t1.pretrain: {size_gib: 300}}
    outages: [{start_h: 3, hours: 4}]
  c:
    url: http://127.0.0.1:3
    price_per_gpu_hour: 1
wan:
  - {between: [a, b], gbps: 40, latency_ms: 10}
  - {between: [a, c], gbps: 10, latency_ms: 30}
  - {between: [b, c], gbps: 20, latency_ms: 25}
)";

// A seeded random workload with an outage at b: every job completes exactly once, no job's JCT
// is shorter than its staging plus its time on GPUs, the outage costs lost work and re-routes,
// and the run is deterministic.
TEST(MultiSiteTest, InvariantsUnderAnOutage) {
  federation::Sites sites = MakeSites(kThreeSites);
  Rng rng(7);
  std::vector<TraceJob> trace;
  double t = 0;
  for (int i = 0; i < 60; ++i) {
    TraceJob j;
    j.id = fmt::format("j{}", i);
    t += 600 * rng.Uniform();
    j.submit = Seconds(t);
    j.gpus = std::array<int, 4>{1, 4, 8, 16}[rng.UniformInt(0, 3)];
    j.duration = Seconds(600 + (4 * 3600 - 600) * rng.Uniform());
    j.tenant = fmt::format("t{}", i % 3);
    j.kind = i % 4 == 0 ? "pretrain/none" : (i % 4 == 1 ? "eval" : "debug");
    trace.push_back(j);
  }
  auto jobs = AssignSites(trace, sites);
  ASSERT_TRUE(jobs.ok()) << jobs.status().ToString();
  // Tenants live where their data is; t2 has none, so it goes to the third site in order.
  EXPECT_EQ((*jobs)[0].home_site, "a");
  EXPECT_EQ((*jobs)[1].home_site, "b");
  EXPECT_EQ((*jobs)[2].home_site, "c");
  EXPECT_EQ((*jobs)[0].datasets, std::vector<std::string>{"t0.pretrain"});
  std::map<std::string, std::string> csv;
  for (std::string_view policy :
       {"home-site", "least-loaded", "predicted-completion", "cheapest-by-deadline"}) {
    std::vector<SimSite> sim = MakeSimSites({2, 3, 2});
    MultiSiteResult r = RunPolicy(sites, sim, *jobs, policy, Minutes(20));
    EXPECT_EQ(r.summary.completed, 60) << policy;
    EXPECT_GT(r.summary.lost_gpu_hours, 0) << policy;
    EXPECT_GT(r.summary.reroutes, 0) << policy;
    double lost = 0;
    for (const SiteJobRecord& j : r.jobs) {
      EXPECT_EQ(j.outcome, SiteJobOutcome::kCompleted) << policy << " " << j.id << ": " << j.reason;
      EXPECT_GE(j.jct_s() + 1e-6, j.staging_s + j.run_s) << policy << " " << j.id;
      EXPECT_GE(j.run_s + 1e-6, j.work_s) << policy << " " << j.id;
      EXPECT_GE(j.first_start_s, j.submit_s);
      EXPECT_GE(j.runs, 1);
      // Each re-route follows an outage at b: none ends at b while routed twice under home-site
      // (it waits for b), and home-site never leaves home.
      if (policy == "home-site") {
        EXPECT_EQ(j.site, j.home_site);
      }
      lost += j.lost_gpu_s;
    }
    EXPECT_NEAR(lost / 3600, r.summary.lost_gpu_hours, 1e-9);
    std::vector<MultiSiteResult> first;
    first.push_back(r);
    if (policy == "predicted-completion") {  // deterministic: a second run, byte for byte
      std::vector<SimSite> again = MakeSimSites({2, 3, 2});
      std::vector<MultiSiteResult> second;
      second.push_back(RunPolicy(sites, again, *jobs, policy, Minutes(20)));
      EXPECT_EQ(MultiSiteCsv(second), MultiSiteCsv(first));
    }
    csv[std::string(policy)] = MultiSiteCsv(first);
  }
  EXPECT_NE(csv["home-site"], csv["predicted-completion"]);
}

TEST(MultiSiteTest, BadInputIsAnError) {
  federation::Sites sites = MakeSites(kTwoSites);
  std::vector<SimSite> sim = MakeSimSites({2});
  MultiSiteConfig config;
  config.routing = *federation::FindRoutingPolicy("home-site");
  auto r = RunMultiSite(sites, sim, {}, config);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "1 simulated sites for 2 in the sites file");
  sim = MakeSimSites({2, 2});
  r = RunMultiSite(sites, sim, {Job("x", 0, 8, 60, "nowhere")}, config);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "job 'x': unknown home site 'nowhere'");
  // A job larger than every site is rejected, saying why, and the run goes on.
  std::vector<MultiSiteJob> two = {Job("huge", 0, 64, 60, "a"), Job("fine", 1, 8, 60, "a")};
  MultiSiteResult ok = RunPolicy(sites, sim, two, "predicted-completion");
  EXPECT_EQ(ok.jobs[0].outcome, SiteJobOutcome::kRejected);
  EXPECT_NE(ok.jobs[0].reason.find("no site for job 'huge'"), std::string::npos)
      << ok.jobs[0].reason;
  EXPECT_EQ(ok.jobs[1].outcome, SiteJobOutcome::kCompleted);
}

}  // namespace
}  // namespace baton::sim
