#include "sim/workload/synthetic.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
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
  EXPECT_NEAR(pretrain / 20000.0, 0.015, 0.004);
  EXPECT_EQ(r->stats().jobs, 20000);
}

// The fit to Acme's Kalos row, read from the shared summary when it is present.
TEST(SyntheticTest, MeansAndMediansMatchAcmeKalos) {
  const char* dir = std::getenv("BATON_SOURCE_DIR");
  std::string path = std::string(dir != nullptr ? dir : ".") +
                     "/../shared/data/traces/summaries/acme_cluster_summary.csv";
  std::ifstream in(path);
  if (!in) GTEST_SKIP() << "Acme summary not present at " << path << " (optional shared data)";
  std::string header, line;
  std::getline(in, header);
  std::map<std::string, double> kalos;
  while (std::getline(in, line)) {
    if (line.rfind("Kalos,", 0) != 0) continue;
    std::stringstream hs(header), ls(line);
    std::string name, cell;
    while (std::getline(hs, name, ',') && std::getline(ls, cell, ',')) {
      if (name != "id") kalos[name] = std::stod(cell);
    }
  }
  ASSERT_TRUE(kalos.count("avg_gpu_num") && kalos.count("avg_run_time_gpu") &&
              kalos.count("med_run_time_gpu") && kalos.count("med_gpu_num"))
      << "Kalos row or its columns missing in " << path;

  SyntheticParams p;
  p.jobs = 200000;
  auto r = MakeSyntheticTrace(p, 3);
  std::vector<double> gpus, run;
  while (true) {
    auto j = r->Next();
    ASSERT_TRUE(j.ok());
    if (!*j) break;
    gpus.push_back((*j)->gpus);
    run.push_back((*j)->duration->value());
  }
  auto mean = [](const std::vector<double>& v) {
    double s = 0;
    for (double x : v) s += x;
    return s / v.size();
  };
  auto median = [](std::vector<double> v) {
    std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
    return v[v.size() / 2];
  };
  EXPECT_NEAR(mean(gpus) / kalos["avg_gpu_num"], 1.0, 0.15);
  EXPECT_NEAR(mean(run) / kalos["avg_run_time_gpu"], 1.0, 0.15);
  EXPECT_NEAR(median(run) / kalos["med_run_time_gpu"], 1.0, 0.15);
  EXPECT_EQ(median(gpus), kalos["med_gpu_num"]);
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
