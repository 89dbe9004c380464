#include "perf/few_shot.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

namespace baton::perf {
namespace {

std::vector<PublishedRun> DevRuns() {
  const char* dir = std::getenv("BATON_SOURCE_DIR");
  auto runs =
      LoadPublishedRuns(std::string(dir != nullptr ? dir : ".") + "/data/published/runs.csv");
  EXPECT_TRUE(runs.ok()) << runs.status().ToString();
  return runs.ok() ? *runs : std::vector<PublishedRun>{};
}

TEST(FewShotTest, EachLargeSourceIsHeldOutThenCalibratedOnAFewOfItsRows) {
  const std::vector<PublishedRun> runs = DevRuns();
  CalibrateOptions fit;
  fit.max_sweeps = 2;  // the protocol, not the fit's convergence, is under test
  FewShotOptions few;
  few.shots = 3;
  few.draws = 2;
  few.min_rows = 8;
  auto a = FewShotValidate(runs, BuiltinProfile(), nullptr, fit, few);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  // Two sources of runs.csv (Korthikanti's and Narayanan's) have 8 performance rows or more.
  ASSERT_EQ(a->sources.size(), 2u) << FormatFewShotReport(*a);
  bool moved = false;
  for (const FewShotSource& s : a->sources) {
    EXPECT_GE(s.rows, few.min_rows);
    EXPECT_LE(s.after_min, s.mae_after);
    EXPECT_GE(s.after_max, s.mae_after);
    moved |= std::abs(s.mae_after - s.mae_before) > 1e-6;
  }
  EXPECT_TRUE(moved) << "calibrating on the drawn rows changed nothing\n"
                     << FormatFewShotReport(*a);
  // The draws are reproducible from the seed, and differ with another.
  auto b = FewShotValidate(runs, BuiltinProfile(), nullptr, fit, few);
  ASSERT_TRUE(b.ok());
  EXPECT_DOUBLE_EQ(a->mae_after, b->mae_after);
  few.seed = 2;
  auto c = FewShotValidate(runs, BuiltinProfile(), nullptr, fit, few);
  ASSERT_TRUE(c.ok());
  EXPECT_NE(a->mae_after, c->mae_after);
  for (const FewShotSource& s : a->sources) {
    EXPECT_NE(FormatFewShotReport(*a).find(s.source), std::string::npos);
  }
}

// The prior holds the constants at the profile fitted without the source: with a weight that
// dwarfs a handful of rows, calibrating moves nothing.
TEST(FewShotTest, AHeavyPriorKeepsTheFoldsConstants) {
  const std::vector<PublishedRun> runs = DevRuns();
  CalibrateOptions fit;
  fit.max_sweeps = 2;
  FewShotOptions few;
  few.shots = 3;
  few.draws = 2;
  few.min_rows = 8;
  few.user_prior_weight = 100;
  auto r = FewShotValidate(runs, BuiltinProfile(), nullptr, fit, few);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  for (const FewShotSource& s : r->sources) {
    EXPECT_NEAR(s.mae_after, s.mae_before, 0.002) << FormatFewShotReport(*r);
  }
}

TEST(FewShotTest, ImpossibleOptionsAreRefused) {
  const std::vector<PublishedRun> runs = DevRuns();
  FewShotOptions few;
  few.shots = 0;
  EXPECT_EQ(FewShotValidate(runs, BuiltinProfile(), nullptr, {}, few).status().code(),
            StatusCode::kInvalidArgument);
  few.shots = 10;
  few.draws = 0;
  EXPECT_EQ(FewShotValidate(runs, BuiltinProfile(), nullptr, {}, few).status().code(),
            StatusCode::kInvalidArgument);
  few.draws = 1;
  few.min_rows = 1000;  // no source that large
  EXPECT_EQ(FewShotValidate(runs, BuiltinProfile(), nullptr, {}, few).status().code(),
            StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace baton::perf
