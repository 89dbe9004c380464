#include "sim/workload/synthetic.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

namespace baton::sim {
namespace {

TEST(SyntheticTest, MatchesTheAcmeShape) {
  SyntheticParams p;
  p.jobs = 20000;
  auto r = MakeSyntheticTrace(p, 3);
  std::vector<int> gpus;
  std::vector<double> run;
  int pretrain = 0;
  double last = -1;
  while (true) {
    auto j = r->Next();
    ASSERT_TRUE(j.ok());
    if (!*j) break;
    const TraceJob& t = **j;
    EXPECT_GE(t.submit.value(), last);
    last = t.submit.value();
    gpus.push_back(t.gpus);
    run.push_back(t.duration->value());
    if (t.kind.rfind("pretrain/", 0) == 0) {
      ++pretrain;
      EXPECT_GE(t.gpus, 256);
      EXPECT_LE(t.gpus, 8192);
    }
  }
  ASSERT_EQ(gpus.size(), 20000u);
  std::nth_element(gpus.begin(), gpus.begin() + gpus.size() / 2, gpus.end());
  EXPECT_EQ(gpus[gpus.size() / 2], 1);  // Acme: median 1 GPU
  std::nth_element(run.begin(), run.begin() + run.size() / 2, run.end());
  EXPECT_GT(run[run.size() / 2], 60);  // Acme: median run time 122-124 s
  EXPECT_LT(run[run.size() / 2], 300);
  EXPECT_NEAR(pretrain / 20000.0, 0.02, 0.005);
  EXPECT_EQ(r->stats().jobs, 20000);
}

TEST(SyntheticTest, DeterministicForASeed) {
  SyntheticParams p;
  p.jobs = 50;
  auto a = MakeSyntheticTrace(p, 9);
  auto b = MakeSyntheticTrace(p, 9);
  for (int i = 0; i < 50; ++i) EXPECT_EQ(ToJsonl(**a->Next()), ToJsonl(**b->Next()));
}

}  // namespace
}  // namespace baton::sim
