#include "federation/sites.h"

#include <gtest/gtest.h>

#include <string>

namespace baton::federation {
namespace {

constexpr const char* kThreeSites = R"(sites:
  shenzhen:
    url: http://127.0.0.1:8081
    regions: [cn, cn-south]
    price_per_gpu_hour: 2.1
    datasets:
      corpus-zh: {size_gib: 3072}
  hefei:
    url: http://127.0.0.1:8082
    token_env: HEFEI_TOKEN
    regions: [cn]
    price_per_gpu_hour: 1.6
  slurm:
    url: https://127.0.0.1:8083
wan:
  - {between: [shenzhen, hefei], gbps: 10, latency_ms: 28}
  - {between: [hefei, slurm], gbps: 100, latency_ms: 2}
  - {between: [slurm, shenzhen], gbps: 40, latency_ms: 30}
)";

std::string Error(const std::string& text) {
  Result<Sites> s = ParseSites(text, "sites.yaml");
  return s.ok() ? "ok" : s.status().message();
}

TEST(SitesTest, ReadsSitesLinksAndDatasets) {
  Result<Sites> s = ParseSites(kThreeSites, "sites.yaml");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  ASSERT_EQ(s->sites().size(), 3u);
  int sz = s->Find("shenzhen"), hf = s->Find("hefei");
  ASSERT_GE(sz, 0);
  ASSERT_GE(hf, 0);
  EXPECT_EQ(s->Find("nowhere"), -1);
  const Site& shenzhen = s->sites()[sz];
  EXPECT_TRUE(shenzhen.InRegion("cn-south"));
  EXPECT_FALSE(s->sites()[hf].InRegion("cn-south"));
  ASSERT_NE(shenzhen.FindDataset("corpus-zh"), nullptr);
  EXPECT_DOUBLE_EQ(shenzhen.FindDataset("corpus-zh")->size.value(), 3072.0 * (1 << 30));
  EXPECT_EQ(s->sites()[hf].FindDataset("corpus-zh"), nullptr);
  EXPECT_EQ(s->sites()[hf].token_env, "HEFEI_TOKEN");
  // Links are symmetric; 10 Gb/s is 1.25 GB/s.
  EXPECT_DOUBLE_EQ(s->Link(sz, hf).bandwidth.value(), 1.25e9);
  EXPECT_DOUBLE_EQ(s->Link(hf, sz).latency.value(), 0.028);
  // 3 TiB over 10 Gb/s: 3 * 2^40 * 8 / 1e10 s plus the latency, about 44 minutes.
  Seconds t = TransferTime(shenzhen.FindDataset("corpus-zh")->size, s->Link(sz, hf));
  EXPECT_NEAR(t.value(), 3.0 * (1ull << 40) * 8 / 1e10 + 0.028, 1e-6);
  // Nothing crosses the WAN within a site.
  EXPECT_EQ(TransferTime(Bytes(1e12), s->Link(sz, sz)).value(), 0);
}

TEST(SitesTest, AMissingPairNamesBothSites) {
  std::string text = kThreeSites;
  text.erase(text.find("  - {between: [slurm, shenzhen]"));
  EXPECT_EQ(Error(text),
            "sites.yaml:16: field 'wan': no entry between 'shenzhen' and 'slurm' (every pair of "
            "sites needs one)");
}

TEST(SitesTest, ALinkFromASiteToItselfIsRefusedWithItsLine) {
  std::string text = kThreeSites;
  text += "  - {between: [hefei, hefei], gbps: 1, latency_ms: 1}\n";
  EXPECT_EQ(Error(text),
            "sites.yaml:19: field 'wan[3].between': a link from site 'hefei' to itself");
}

TEST(SitesTest, UnknownSiteAndSecondEntryForAPair) {
  std::string text = kThreeSites;
  EXPECT_NE(Error(text + "  - {between: [hefei, wuhan], gbps: 1, latency_ms: 1}\n")
                .find("sites.yaml:19: field 'wan[3].between': unknown site 'wuhan'"),
            std::string::npos);
  EXPECT_EQ(Error(text + "  - {between: [hefei, shenzhen], gbps: 1, latency_ms: 1}\n"),
            "sites.yaml:19: field 'wan[3].between': second entry for hefei <-> shenzhen (first at "
            "line 16)");
}

TEST(SitesTest, FieldsAreChecked) {
  std::string text = kThreeSites;
  auto with = [&](const std::string& from, const std::string& to) {
    std::string t = text;
    t.replace(t.find(from), from.size(), to);
    return Error(t);
  };
  EXPECT_EQ(
      with("url: http://127.0.0.1:8082", "url: 127.0.0.1:8082"),
      "sites.yaml:9: field 'sites.hefei.url': expected an http:// or https:// URL (or several, "
      "separated by commas)");
  EXPECT_EQ(with("    url: http://127.0.0.1:8082\n", ""),
            "sites.yaml:9: field 'sites.hefei.url': missing");
  EXPECT_EQ(with("gbps: 10,", "gbps: -1,"),
            "sites.yaml:16: field 'wan[0].gbps': must be in [0.001, 100000], got -1");
  EXPECT_EQ(with("price_per_gpu_hour: 1.6", "price_per_gpu_hour: cheap"),
            "sites.yaml:12: field 'sites.hefei.price_per_gpu_hour': expected a number");
  EXPECT_EQ(with("regions: [cn]\n", "region: [cn]\n"),
            "sites.yaml:11: field 'sites.hefei.region': unknown field (known: url, token_env, "
            "regions, price_per_gpu_hour, datasets, cluster, scheduler, outages)");
  EXPECT_EQ(with("    url: https://127.0.0.1:8083\n",
                 "    url: https://127.0.0.1:8083\n    datasets: {corpus-zh: {size_gib: 10}}\n"),
            "sites.yaml:15: field 'sites.slurm.datasets.corpus-zh.size_gib': 10 GiB here but "
            "3072 GiB at line 7: one dataset, one size");
  // Duplicate keys are refused by the bounded YAML loader, with their line.
  EXPECT_NE(with("    token_env: HEFEI_TOKEN\n", "    token_env: A\n    token_env: B\n")
                .find("duplicate key 'token_env'"),
            std::string::npos);
}

// A dataset is named the way a job names it in federation.datasets, or no job could ask for it.
TEST(SitesTest, ADatasetNameNoJobCouldGiveIsRefused) {
  auto with = [](const std::string& name) {
    std::string t = kThreeSites;
    t.replace(t.find("corpus-zh:"), 9, name);
    return Error(t);
  };
  EXPECT_EQ(with("team0.pre_train-v2"), "ok");
  EXPECT_EQ(with("team0/pretrain"),
            "sites.yaml:7: field 'sites.shenzhen.datasets': 'team0/pretrain': a dataset name is a "
            "letter or digit, then letters, digits, '.', '_' or '-' (at most 128), as jobs name "
            "it");
  EXPECT_NE(with("-corpus").find("'-corpus': a dataset name"), std::string::npos);
  EXPECT_NE(with(std::string(129, 'a')).find("(at most 128)"), std::string::npos);
}

TEST(SitesTest, SitesKnowTheirLinesAndTheFile) {
  Result<Sites> s = ParseSites(kThreeSites, "sites.yaml");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->source(), "sites.yaml");
  EXPECT_EQ(s->sites()[s->Find("shenzhen")].line, 2);
  EXPECT_EQ(s->sites()[s->Find("hefei")].line, 8);
  EXPECT_EQ(s->sites()[s->Find("slurm")].line, 13);
}

TEST(SitesTest, SimulatorFieldsAreKeptWithTheirLines) {
  std::string text = kThreeSites;
  text.replace(text.find("    price_per_gpu_hour: 1.6\n"), 0,
               "    cluster: clusters/hefei.yaml\n    scheduler: backfill\n"
               "    outages:\n      - {start_h: 2, hours: 4}\n      - {start_h: 10, hours: 0.5}\n");
  Result<Sites> s = ParseSites(text, "sites.yaml");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  const Site& hefei = s->sites()[s->Find("hefei")];
  EXPECT_EQ(hefei.cluster, "clusters/hefei.yaml");
  EXPECT_EQ(hefei.cluster_line, 12);
  EXPECT_EQ(hefei.scheduler, "backfill");
  EXPECT_EQ(hefei.scheduler_line, 13);
  ASSERT_EQ(hefei.outages.size(), 2u);
  EXPECT_DOUBLE_EQ(hefei.outages[0].start.value(), 7200);
  EXPECT_DOUBLE_EQ(hefei.outages[1].duration.value(), 1800);
  const Site& shenzhen = s->sites()[s->Find("shenzhen")];
  EXPECT_TRUE(shenzhen.cluster.empty());
  EXPECT_EQ(shenzhen.cluster_line, 0);
  EXPECT_TRUE(shenzhen.outages.empty());

  auto with = [&](const std::string& outages) {
    std::string t = kThreeSites;
    t.replace(t.find("    price_per_gpu_hour: 1.6\n"), 0, outages);
    return Error(t);
  };
  EXPECT_EQ(with("    outages:\n      - {start_h: 2, hours: 4}\n      - {start_h: 5, hours: 1}\n"),
            "sites.yaml:14: field 'sites.hefei.outages[1].start_h': overlaps or precedes the "
            "outage before it (list them in order, apart)");
  EXPECT_EQ(with("    outages:\n      - {start_h: 2, hours: 0}\n"),
            "sites.yaml:13: field 'sites.hefei.outages[0].hours': must be > 0");
  EXPECT_EQ(with("    outages:\n      - {start_h: -1, hours: 2}\n"),
            "sites.yaml:13: field 'sites.hefei.outages[0].start_h': must be in [0, 87660], got -1");
  EXPECT_EQ(with("    outages:\n      - {at: 1, hours: 2}\n"),
            "sites.yaml:13: field 'sites.hefei.outages[0].at': unknown field (known: start_h, "
            "hours)");
  EXPECT_EQ(with("    cluster: ''\n"),
            "sites.yaml:12: field 'sites.hefei.cluster': expected a non-empty string");
}

TEST(SitesTest, OneSiteNeedsNoWan) {
  EXPECT_EQ(Error("sites:\n  a: {url: 'http://x:1'}\n"), "ok");
  EXPECT_EQ(Error("sites:\n  a: {url: 'http://x:1'}\n  b: {url: 'http://y:1'}\n"),
            "sites.yaml:1: field 'wan': missing (more than one site)");
  EXPECT_EQ(Error("sites: {}\n"),
            "sites.yaml:1: field 'sites': expected a mapping of site name -> site");
}

TEST(SitesTest, LoadChecksTheFile) {
  Result<Sites> s = LoadSitesFile("/nonexistent/sites.yaml");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("/nonexistent/sites.yaml"), std::string::npos);
}

}  // namespace
}  // namespace baton::federation
