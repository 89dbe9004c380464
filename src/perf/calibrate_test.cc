#include "perf/calibrate.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace baton::perf {
namespace {

std::vector<PublishedRun> DevRuns() {
  const char* dir = std::getenv("BATON_SOURCE_DIR");
  auto runs = LoadPublishedTables(DevTables(std::string(dir != nullptr ? dir : ".") +
                                            "/data/published"));
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

// The user workflow (`plan calibrate --runs`): a handful of runs of one new cluster, fitted from
// a profile that has not seen it. Here the IBM cluster's FSDP rows (its own Ethernet fabric)
// against a start fitted without them; the 7B and 70B rows are the user's runs, the 13B and 34B
// ones what they then plan. Shrinking toward the start (prior_is_start) predicts those better
// than plain least squares from the same start, which bends shared constants to 6 rows.
TEST(CalibrateTest, AHandfulOfRunsUpdatesTheStartBetterWithShrinkage) {
  std::vector<PublishedRun> all = DevRuns();
  std::vector<PublishedRun> others;
  for (const PublishedRun& r : all) {
    if (r.group != "ibm-fsdp" && GpuFamilyOf(r) == "hopper" &&
        (r.group == "torchtitan" || r.group == "megatron-lm")) {
      others.push_back(r);
    }
  }
  CalibrateOptions base;
  base.families = {"hopper"};
  base.max_sweeps = 6;
  auto start = FitProfile(others, PriorProfile(), nullptr, base);
  ASSERT_TRUE(start.ok()) << start.status().ToString();
  std::vector<PublishedRun> mine, rest;
  for (const PublishedRun& r : all) {
    if (!r.id.starts_with("ibm-fsdp-") || GpuFamilyOf(r) != "hopper") continue;
    bool fitted = r.id.starts_with("ibm-fsdp-7B") || r.id.starts_with("ibm-fsdp-70B");
    (fitted ? mine : rest).push_back(r);
  }
  ASSERT_EQ(mine.size(), 6u);
  ASSERT_EQ(rest.size(), 6u);
  CalibrateOptions user = base;
  user.prior_is_start = true;
  user.prior_weight = 0;
  auto plain = FitProfile(mine, *start, nullptr, user);
  user.prior_weight = 0.003;
  auto shrunk = FitProfile(mine, *start, nullptr, user);
  ASSERT_TRUE(plain.ok() && shrunk.ok());
  double before = MeanAbsError(rest, *start);
  double e_plain = MeanAbsError(rest, *plain);
  double e_shrunk = MeanAbsError(rest, *shrunk);
  std::printf("held-out rows: start %.3f, plain %.3f, shrunk %.3f\n", before, e_plain, e_shrunk);
  EXPECT_LT(e_shrunk, e_plain);
  EXPECT_LT(e_shrunk, before);
}

}  // namespace
}  // namespace baton::perf
