// Checks the estimator against the published runs in data/published/runs.csv (and, when the
// shared data set is present, the vTrain single-node measurements).
#include "perf/validation.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>

namespace baton::perf {
namespace {

std::string SourceDir() {
  const char* dir = std::getenv("BATON_SOURCE_DIR");
  return dir != nullptr ? dir : ".";
}

// IsKnownOutlier() (validation.h): runs the model cannot match without a per-run factor, and why:
// MT-NLG was trained with DeepSpeed's pipeline engine and reports 126/121/113 TFLOP/s per GPU,
// while Megatron-LM reached 159-171 TFLOP/s for the same model, plan family and cluster
// (Narayanan Table 2). The estimator already times MT-NLG's plan as it ran (mbs 1, 240
// micro-batches, plain 1F1B since 240 % 35 != 0 rules out interleaving, full recompute, no DP
// overlap) and still comes out 18-21 % fast. The obvious DeepSpeed differences (p2p without
// Megatron's scatter-gather, blocking sends) add by our estimate 2-4 s of a 9-11 s gap, and would
// push BLOOM (also on the DeepSpeed pipeline engine, now within 3.2 %) up by 6-11 %; no documented
// mechanism closes the rest. These rows are held to a looser bound so that a regression still
// shows.
constexpr double kOutlierBound = 0.25;

TEST(ValidationTest, PublishedRunsWithinBounds) {
  auto runs = LoadPublishedRuns(SourceDir() + "/data/published/runs.csv");
  ASSERT_TRUE(runs.ok()) << runs.status().ToString();
  ASSERT_GE(runs->size(), 41u);
  auto rep = RunValidation(*runs);
  ASSERT_TRUE(rep.ok()) << rep.status().ToString();
  std::printf("%s", FormatValidationReport(*rep).c_str());

  double sum = 0, worst = 0;
  int n = 0;
  for (const ValidationRow& row : rep->rows) {
    double err = std::abs(row.error);
    if (IsMemoryMetric(row.run.metric)) {
      EXPECT_LE(err, 0.10) << row.run.id;
    } else if (IsKnownOutlier(row.run.id)) {
      EXPECT_LE(err, kOutlierBound) << row.run.id;
    } else {
      sum += err;
      worst = std::max(worst, err);
      ++n;
      EXPECT_LE(err, 0.12) << row.run.id;
    }
  }
  ASSERT_GT(n, 0);
  EXPECT_EQ(n, rep->perf_rows_checked);
  EXPECT_NEAR(sum / n, rep->perf_mae_checked, 1e-12);
  EXPECT_LE(sum / n, 0.05);
  EXPECT_LE(worst, 0.12);
}

TEST(ValidationTest, BadTableNamesLineAndColumn) {
  auto r = ParsePublishedRuns("id,model,layers\nx,GPT 1.7B,abc\n", "t.csv");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("t.csv:2"), std::string::npos) << r.status().ToString();
  EXPECT_NE(r.status().message().find("layers"), std::string::npos) << r.status().ToString();
}

// vTrain: small GPT models (hidden 1024/2048) on one node, a regime far below the published
// large runs; the bound is loose and documents where the model stands there.
TEST(ValidationTest, VtrainSingleNode) {
  std::string path = SourceDir() + "/../shared/data/published/vtrain-single-node.csv";
  if (!std::filesystem::exists(path)) {
    GTEST_SKIP() << "vTrain data not present at " << path << " (optional shared data set)";
  }
  auto rep = ValidateVtrain(path);
  ASSERT_TRUE(rep.ok()) << rep.status().ToString();
  std::printf("vTrain: %d points, mean |error| %.1f%%, median %+.1f%%, max %.1f%%\n", rep->points,
              100 * rep->mae, 100 * rep->median, 100 * rep->max);
  EXPECT_EQ(rep->points, 1440);
  EXPECT_LE(rep->mae, 0.30);
  EXPECT_LE(std::abs(rep->median), 0.20);
}

}  // namespace
}  // namespace baton::perf
