#include "sim/packing/packing.h"

#include <gtest/gtest.h>

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

TEST(PackingTest, RejectsBadOptions) {
  PackingOptions o;
  o.tune = 0;
  EXPECT_FALSE(RunPacking(Nodes(), {}, o).ok());
}

}  // namespace
}  // namespace baton::sim
