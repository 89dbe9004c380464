#include "sim/packing/packing.h"

#include <gtest/gtest.h>

#include "sim/packing/packing_report.h"

namespace baton::sim {
namespace {

std::vector<OpenbNode> Nodes() {
  return {{"n0", 16000, 65536, 2, "T4"}, {"n1", 16000, 65536, 2, "T4"}};
}

TEST(PackingTest, TunesShufflesAndReplaysThroughTheScheduler) {
  std::vector<OpenbPod> pods = {{"half", 2000, 1024, 1, 500, {}, "", ""},
                                {"whole", 2000, 1024, 1, 1000, {}, "", ""},
                                {"cpu", 1000, 1024, 0, 0, {}, "", ""}};
  const auto arrivals = TunedArrivals(pods, 4000, 1.3, 7);
  std::int64_t milli = 0;
  for (const auto& p : arrivals) milli += p.TotalGpuMilli();
  EXPECT_GE(milli, 5200);
  EXPECT_EQ(TunedArrivals(pods, 4000, 1.3, 7).size(), arrivals.size());  // same seed, same draw

  for (const char* policy : {"fragmentation", "best-fit", "random-fit"}) {
    PackingOptions o;
    o.policy = policy;
    o.seed = 7;
    auto r = RunPacking(Nodes(), pods, o);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->pods, static_cast<std::int64_t>(arrivals.size()));
    EXPECT_EQ(r->placed + r->skipped, r->pods);
    // Four GPUs of halves and wholes (CPU is ample): every GPU fills before anything is skipped,
    // so allocation at 100 % arrived demand is (nearly) all of it.
    EXPECT_GE(r->AllocationAt(1.0), 0.75) << policy;
    EXPECT_LE(r->curve.back().allocated, 1.0);
    EXPECT_GE(r->curve.back().arrived, 1.3);
  }
}

TEST(PackingTest, CurvesAsCsvAndHtml) {
  std::vector<OpenbPod> pods = {{"half", 2000, 1024, 1, 500, {}, "", ""},
                                {"whole", 2000, 1024, 1, 1000, {}, "", ""}};
  std::vector<PackingResult> runs;
  for (std::uint64_t seed : {1, 2}) {
    PackingOptions o;
    o.seed = seed;
    auto r = RunPacking(Nodes(), pods, o);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    runs.push_back(*r);
  }
  std::vector<PackingCurve> curves = {MeanCurve("fragmentation", runs, 0.05, 1.3)};
  ASSERT_EQ(curves[0].points.size(), 26u);
  EXPECT_NEAR(curves[0].points[19].arrived, 1.0, 1e-9);
  EXPECT_NEAR(curves[0].points[19].allocated,
              (runs[0].AllocationAt(1.0) + runs[1].AllocationAt(1.0)) / 2, 1e-12);
  const std::string csv = PackingCsv(curves);
  EXPECT_EQ(csv.rfind("policy,seeds,arrived_pct,allocated_pct,fragmentation_pct\n", 0), 0u);
  EXPECT_NE(csv.find("\nfragmentation,2,100.0,"), std::string::npos);
  const std::string html = PackingHtml({"nodes.csv", "pods<x>.csv", "1-2"}, curves);
  EXPECT_NE(html.find("<svg"), std::string::npos);
  EXPECT_NE(html.find("pods&lt;x&gt;.csv"), std::string::npos);  // escaped
  EXPECT_NE(html.find("<polyline"), std::string::npos);
}

TEST(PackingTest, VariantsResampleDeterministically) {
  std::vector<OpenbPod> pods;
  pods.reserve(100);
  for (int i = 0; i < 90; ++i) pods.push_back({"s", 1000, 100, 1, 300, {}, "", ""});
  for (int i = 0; i < 10; ++i) pods.push_back({"m", 1000, 100, 4, 1000, {}, "", ""});
  auto multi = VariantPods(pods, "multi-gpu");
  ASSERT_TRUE(multi.ok());
  ASSERT_EQ(multi->size(), pods.size());
  int heavy = 0;
  for (const auto& p : *multi) heavy += p.num_gpu >= 2;
  EXPECT_GE(heavy, 2);  // p = 0.1 of 100 draws
  EXPECT_LE(heavy, 25);
  auto again = VariantPods(pods, "multi-gpu");
  for (std::size_t i = 0; i < pods.size(); ++i) EXPECT_EQ((*again)[i].name, (*multi)[i].name);
  auto shared = VariantPods(pods, "shared");
  ASSERT_TRUE(shared.ok());
  int shares = 0;
  for (const auto& p : *shared) shares += p.gpu_milli < 1000;
  EXPECT_GE(shares, 55);  // p = 0.7
  EXPECT_FALSE(VariantPods(pods, "cpu-heavy").ok());
}

TEST(PackingTest, RejectsBadOptions) {
  PackingOptions o;
  o.tune = 0;
  EXPECT_FALSE(RunPacking(Nodes(), {}, o).ok());
}

}  // namespace
}  // namespace baton::sim
