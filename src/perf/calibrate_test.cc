#include "perf/calibrate.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

namespace baton::perf {
namespace {

std::vector<PublishedRun> DevRuns() {
  const char* dir = std::getenv("BATON_SOURCE_DIR");
  auto runs =
      LoadPublishedTables(DevTables(std::string(dir != nullptr ? dir : ".") + "/data/published"));
  EXPECT_TRUE(runs.ok()) << runs.status().ToString();
  return runs.ok() ? *runs : std::vector<PublishedRun>{};
}

std::vector<PublishedRun> Rows(const std::vector<PublishedRun>& all, std::string_view prefix,
                               int at_most = 1000) {
  std::vector<PublishedRun> out;
  for (const PublishedRun& r : all) {
    if (r.id.starts_with(prefix) && static_cast<int>(out.size()) < at_most) out.push_back(r);
  }
  return out;
}

// A profile whose fitted constants are Calibration's defaults (the priors).
SystemProfile PriorProfile() {
  SystemProfile p = BuiltinProfile();
  const Calibration defaults;
  for (FamilyProfile& f : p.families) {
    for (const CalibrationField& field : CalibrationFields()) {
      if (field.fitted_on_runs) f.calib.*(field.member) = defaults.*(field.member);
    }
  }
  return p;
}

double MeanAbsError(const std::vector<PublishedRun>& rows, const SystemProfile& p) {
  double sum = 0;
  for (const PublishedRun& r : rows) {
    auto v = ValidateRunWithProfile(r, p);
    EXPECT_TRUE(v.ok()) << r.id;
    if (v.ok()) sum += std::abs(v->error);
  }
  return rows.empty() ? 0 : sum / rows.size();
}

// No Ampere row of Narayanan's runs on Ethernet, so nothing informs ampere's
// ethernet_efficiency: plain least squares leaves it wherever the start put it (here 0.3), the
// prior penalty brings it back to its prior (0.85).
TEST(CalibrateTest, ThePriorKeepsAConstantNoRowInformsAtItsPrior) {
  std::vector<PublishedRun> rows = Rows(DevRuns(), "nar-t1-", 4);
  ASSERT_EQ(rows.size(), 4u);
  SystemProfile start = BuiltinProfile();
  start.FindMutable("ampere")->calib.ethernet_efficiency = 0.3;
  CalibrateOptions opts;
  opts.families = {"ampere"};
  opts.max_sweeps = 8;
  opts.pool_families = false;
  opts.prior_weight = 0;
  auto plain = FitProfile(rows, start, nullptr, opts);
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  EXPECT_DOUBLE_EQ(plain->Find("ampere")->calib.ethernet_efficiency, 0.3);
  opts.prior_weight = 0.003;
  auto map = FitProfile(rows, start, nullptr, opts);
  ASSERT_TRUE(map.ok()) << map.status().ToString();
  EXPECT_NEAR(map->Find("ampere")->calib.ethernet_efficiency, Calibration{}.ethernet_efficiency,
              0.02);
}

// Blackwell's only rows are Megatron-Bridge's: without them the family has no rows. With
// pooling it takes the fitted constants of the family with the most rows (Hopper here) that
// are not hardware-specific, and keeps its priors for those that are; without pooling it keeps
// the priors for all of them.
TEST(CalibrateTest, AFamilyWithNoRowsBorrowsTheReferenceFamilysPooledConstants) {
  std::vector<PublishedRun> rows = Rows(DevRuns(), "mlm-h100-", 6);
  ASSERT_EQ(rows.size(), 6u);
  CalibrateOptions opts;
  opts.max_sweeps = 4;
  opts.prior_weight = 0;
  opts.pool_families = true;
  auto pooled = FitProfile(rows, PriorProfile(), nullptr, opts);
  ASSERT_TRUE(pooled.ok()) << pooled.status().ToString();
  const Calibration& hopper = pooled->Find("hopper")->calib;
  const Calibration& blackwell = pooled->Find("blackwell")->calib;
  const Calibration defaults;
  int moved = 0;
  for (const CalibrationField& f : CalibrationFields()) {
    if (!f.fitted_on_runs) continue;
    if (f.hardware_specific) {
      EXPECT_DOUBLE_EQ(blackwell.*(f.member), defaults.*(f.member)) << f.name;
    } else {
      EXPECT_DOUBLE_EQ(blackwell.*(f.member), hopper.*(f.member)) << f.name;
      if (hopper.*(f.member) != defaults.*(f.member)) ++moved;
    }
  }
  EXPECT_GT(moved, 0);  // the fit moved something Blackwell borrowed
  opts.pool_families = false;
  auto separate = FitProfile(rows, PriorProfile(), nullptr, opts);
  ASSERT_TRUE(separate.ok()) << separate.status().ToString();
  for (const CalibrationField& f : CalibrationFields()) {
    if (!f.fitted_on_runs) continue;
    EXPECT_DOUBLE_EQ(separate->Find("blackwell")->calib.*(f.member), defaults.*(f.member))
        << f.name;
  }
}

// With pooling the stack constants are one value for every family with rows (fitted on Ampere's
// and Hopper's rows together); the hardware-specific ones stay per family. Without it each
// family fits its own.
TEST(CalibrateTest, PooledConstantsAreSharedByTheFamiliesWithRows) {
  std::vector<PublishedRun> all = DevRuns();
  std::vector<PublishedRun> rows = Rows(all, "mlm-h100-", 6);
  for (const PublishedRun& r : Rows(all, "nar-t1-", 6)) rows.push_back(r);
  ASSERT_EQ(rows.size(), 12u);
  CalibrateOptions opts;
  opts.max_sweeps = 4;
  opts.pool_families = true;
  auto pooled = FitProfile(rows, PriorProfile(), nullptr, opts);
  ASSERT_TRUE(pooled.ok()) << pooled.status().ToString();
  opts.pool_families = false;
  auto separate = FitProfile(rows, PriorProfile(), nullptr, opts);
  ASSERT_TRUE(separate.ok()) << separate.status().ToString();
  int differ = 0;
  for (const CalibrationField& f : CalibrationFields()) {
    if (!f.fitted_on_runs || f.hardware_specific) continue;
    EXPECT_DOUBLE_EQ(pooled->Find("ampere")->calib.*(f.member),
                     pooled->Find("hopper")->calib.*(f.member))
        << f.name;
    if (separate->Find("ampere")->calib.*(f.member) !=
        separate->Find("hopper")->calib.*(f.member)) {
      ++differ;
    }
  }
  EXPECT_GT(differ, 0);
}

// Huber's loss grows linearly beyond delta: one row that no constant can fit costs less and
// drags the fit less than under squares.
TEST(CalibrateTest, HuberLossDragsLessTowardAnOutlierRow) {
  std::vector<PublishedRun> rows = Rows(DevRuns(), "mlm-h100-", 6);
  ASSERT_EQ(rows.size(), 6u);
  rows[0].value *= 1.6;  // an outlier: 60 % off the rest of its source
  CalibrateOptions opts;
  opts.families = {"hopper"};
  opts.max_sweeps = 6;
  auto squares = FitProfile(rows, BuiltinProfile(), nullptr, opts);
  opts.huber_delta = 0.05;
  auto huber = FitProfile(rows, BuiltinProfile(), nullptr, opts);
  ASSERT_TRUE(squares.ok() && huber.ok());
  std::vector<PublishedRun> rest(rows.begin() + 1, rows.end());
  EXPECT_LT(MeanAbsError(rest, *huber), MeanAbsError(rest, *squares));
}

// The user workflow (`plan calibrate --runs`): the start profile has never seen a user's runs,
// so cross-validating them keeps it in every fold (prior_is_start), where a fit of the published
// tables resets the folds to the priors (the built-in profile saw every source). With no
// descent sweeps each fold predicts with its starting constants: the start's, or the priors'.
TEST(CalibrateTest, CrossValidationOfAUsersRunsStartsFromTheStart) {
  std::vector<PublishedRun> rows = Rows(DevRuns(), "mlm-h100-", 4);
  ASSERT_EQ(rows.size(), 4u);
  for (std::size_t i = 0; i < rows.size(); ++i) rows[i].group = "run" + std::to_string(i);
  SystemProfile a = BuiltinProfile();
  SystemProfile b = BuiltinProfile();
  b.FindMutable("hopper")->calib.gemm_peak_fraction *= 0.6;
  CalibrateOptions opts;
  opts.families = {"hopper"};
  opts.max_sweeps = 0;
  opts.bands = false;
  opts.prior_is_start = true;
  auto cva = CrossValidate(rows, a, nullptr, opts);
  auto cvb = CrossValidate(rows, b, nullptr, opts);
  ASSERT_TRUE(cva.ok() && cvb.ok());
  EXPECT_NEAR(cva->mae, MeanAbsError(rows, a), 1e-12);
  EXPECT_NEAR(cvb->mae, MeanAbsError(rows, b), 1e-12);
  EXPECT_GT(std::abs(cva->mae - cvb->mae), 0.05);
  opts.prior_is_start = false;
  cva = CrossValidate(rows, a, nullptr, opts);
  cvb = CrossValidate(rows, b, nullptr, opts);
  ASSERT_TRUE(cva.ok() && cvb.ok());
  EXPECT_DOUBLE_EQ(cva->mae, cvb->mae);
}

}  // namespace
}  // namespace baton::perf
