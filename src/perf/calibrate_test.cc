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
      if (FittedOn(field, /*user_runs=*/false)) f.calib.*(field.member) = defaults.*(field.member);
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
    if (!FittedOn(f, /*user_runs=*/false)) continue;
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
    if (!FittedOn(f, /*user_runs=*/false)) continue;
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
    if (!FittedOn(f, /*user_runs=*/false) || f.hardware_specific) continue;
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
  const SystemProfile& a = BuiltinProfile();
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

// A validation row for the band tests: llama3-8b on H100s, FSDP, `error` off its published 1 s.
ValidationRow BandRow(std::string group, double error, int gpus = 64) {
  ValidationRow row;
  row.run.group = std::move(group);
  row.run.model = *FindModel("llama3-8b");
  row.run.system.gpu = "H100-SXM";
  row.run.system.gpus = gpus;
  row.run.value = 1.0;
  row.plan.dp = gpus;
  row.plan.zero = 3;
  row.predicted = 1.0 + error;
  row.error = error;
  return row;
}

TEST(CalibrateTest, BandCellsTakeTheConformalQuantileOfEnoughRows) {
  CvReport cv;
  // Ten rows of three sources inside the envelope with residuals 0.01 ... 0.10, three rows of a
  // fourth source beyond it.
  for (int i = 1; i <= 10; ++i) {
    cv.rows.push_back(BandRow("a" + std::to_string(i % 3), 0.01 * i));
    cv.beyond.push_back(false);
  }
  for (int i = 0; i < 3; ++i) {
    cv.rows.push_back(BandRow("b", 0.5, 2048));
    cv.beyond.push_back(true);
  }
  // An estimate 20 % slow and one 20 % fast are the same distance outside a +-r band.
  EXPECT_NEAR(BandResidual(BandRow("a", 0.25)), 0.25, 1e-12);
  EXPECT_NEAR(BandResidual(BandRow("a", -0.2)), 0.25, 1e-12);
  BandModel band = BuildBandModel(cv, 0.8);
  EXPECT_EQ(band.quantile, 0.8);
  // ceil(11 x 0.8) = 9: the 9th smallest of ten.
  const BandCell* inside = band.Find("hopper/fsdp/<=8k/<20B/inside");
  ASSERT_NE(inside, nullptr);
  EXPECT_EQ(inside->rows, 10);
  EXPECT_EQ(inside->sources, 3);
  EXPECT_NEAR(inside->relative, 0.09, 1e-12);
  ASSERT_NE(band.Find("any/any/any/any/any"), nullptr);
  EXPECT_EQ(band.Find("any/any/any/any/any")->rows, 13);
  // Three rows of one source beyond: too few for a cell, so a question beyond takes the coarsest.
  EXPECT_EQ(band.Find("any/any/any/any/beyond"), nullptr);
  const BandQuestion q{"hopper", "fsdp", 8192, 8.0, 4096};
  EXPECT_NEAR(BandRelative(band, q, false), 0.09, 1e-12);
  EXPECT_DOUBLE_EQ(BandRelative(band, q, true), band.Find("any/any/any/any/any")->relative);
  // A question without a plan (kind "*") finds the cells every row also fed with kind "any".
  EXPECT_NEAR(BandRelative(band, {"hopper", "*", 8192, 8.0, 64}, false), 0.09, 1e-12);
}

// Coverage is measured on sources the band never saw: each group's rows against the band built
// from the other groups' residuals only.
TEST(CalibrateTest, BandCoverageHoldsEachGroupOut) {
  CvReport cv;
  for (const char* g : {"tight1", "tight2", "tight3", "wide"}) {
    for (int i = 0; i < 10; ++i) {
      cv.rows.push_back(BandRow(g, std::string_view(g) == "wide" ? 0.5 : 0.05));
      cv.beyond.push_back(false);
    }
    cv.groups.push_back({g, 10});
  }
  BandCoverage(0.9, &cv);
  // A tight source is inside the band of the other two and the wide one (its 28th of 30 rows is
  // a wide one's 0.5); the wide source is outside the tight sources' 0.05.
  EXPECT_DOUBLE_EQ(cv.groups[0].coverage, 1.0);
  EXPECT_DOUBLE_EQ(cv.groups[3].coverage, 0.0);
  EXPECT_DOUBLE_EQ(cv.coverage, 0.75);
  EXPECT_DOUBLE_EQ(cv.source_coverage, 0.75);
  EXPECT_DOUBLE_EQ(cv.band_quantile, 0.9);
  EXPECT_NE(FormatCvReport(cv).find("band coverage"), std::string::npos);
  // Two sources are too few for a cell: no band, nothing covered.
  cv.rows.resize(20);
  cv.beyond.resize(20);
  cv.groups.resize(2);
  BandCoverage(0.9, &cv);
  EXPECT_DOUBLE_EQ(cv.coverage, 0.0);
}

// The band's residuals take each row's worse fold, and leave-one-stack-out coverage holds a whole
// stack out of the band it is measured against: three sources of stack "a" that every fold gets
// right, three of stack "b" that only their own stack's absence exposes.
TEST(CalibrateTest, BandCoverageHoldsEachStackOutOfTheWorseFolds) {
  CvReport by_source, by_stack;
  by_stack.unit = CvUnit::kStack;
  for (int s = 0; s < 6; ++s) {
    const std::string source = "s" + std::to_string(s);
    const std::string stack = s < 3 ? "a" : "b";
    for (int i = 0; i < 10; ++i) {
      ValidationRow row = BandRow(source, 0.05);
      row.run.id = source + "-" + std::to_string(i);
      row.run.stack = stack;
      by_source.rows.push_back(row);
      by_source.beyond.push_back(false);
      if (stack == "b") {
        row.predicted = 1.3;
        row.error = 0.3;
      }
      by_stack.rows.push_back(row);
      by_stack.beyond.push_back(false);
    }
    by_source.groups.push_back({source, 10});
  }
  by_stack.groups = {{"a", 30}, {"b", 30}};
  const CvReport worse = WorseOfFolds(by_source, by_stack);
  ASSERT_EQ(worse.rows.size(), 60u);
  EXPECT_NEAR(BandResidual(worse.rows[0]), 0.05, 1e-12);
  EXPECT_NEAR(BandResidual(worse.rows[59]), 0.3, 1e-12);
  EXPECT_EQ(CvKey(worse.rows[59].run, CvUnit::kStack), "b");
  // Stack "a" held out meets the band of stack "b"'s residuals (0.3) and is inside it; stack "b"
  // held out meets stack "a"'s 0.05 and is outside.
  BandCoverage(0.9, worse, &by_stack);
  EXPECT_DOUBLE_EQ(by_stack.groups[0].coverage, 1.0);
  EXPECT_DOUBLE_EQ(by_stack.groups[1].coverage, 0.0);
  EXPECT_DOUBLE_EQ(by_stack.coverage, 0.5);
  EXPECT_NE(FormatCvReport(by_stack).find("held-out stack"), std::string::npos);
  // Leave-one-source-out rows are inside a band built from the worse folds, which the source
  // folds' own residuals (0.05 everywhere) would not say of stack "b"'s rows under its folds.
  BandCoverage(0.9, worse, &by_source);
  EXPECT_DOUBLE_EQ(by_source.coverage, 1.0);
  CvReport* const both[] = {&by_source, &by_stack};
  EXPECT_DOUBLE_EQ(ChooseBandQuantile(worse, both), std::end(kBandQuantiles)[-1]);
}

// docs/perf/calibration.md's example: a user's runs with catalogue model names in place of
// shapes parse, and `plan calibrate --runs` on them (the built-in profile as the start and
// prior) fits them no worse than the built-in profile did.
// Attention efficiency is set on the kernel charts for the built-in fit, but a user's runs move
// it (CalibrationField::user_runs_only): long-sequence runs pull a rate set far too low back up.
TEST(CalibrateTest, AUsersRunsMoveTheAttentionEfficiencyTheBuiltInFitLeaves) {
  std::vector<PublishedRun> rows = Rows(DevRuns(), "nemo-longseq-h100-");
  ASSERT_GE(rows.size(), 8u);
  SystemProfile start = BuiltinProfile();
  start.FindMutable("hopper")->calib.flash_attention_fraction = 0.2;
  CalibrateOptions opts;
  opts.families = {"hopper"};
  opts.max_sweeps = 3;
  opts.prior_is_start = false;
  auto builtin_fit = FitProfile(rows, start, nullptr, opts);
  ASSERT_TRUE(builtin_fit.ok()) << builtin_fit.status().ToString();
  EXPECT_EQ(builtin_fit->Find("hopper")->calib.flash_attention_fraction, 0.2);
  opts.prior_is_start = true;
  opts.prior_weight = kUserRunsPriorWeight;
  auto users_fit = FitProfile(rows, start, nullptr, opts);
  ASSERT_TRUE(users_fit.ok()) << users_fit.status().ToString();
  EXPECT_GT(users_fit->Find("hopper")->calib.flash_attention_fraction, 0.25);
  EXPECT_LT(MeanAbsError(rows, *users_fit), MeanAbsError(rows, start));
}

// A run that ran fitted: a reserve that calls it out of memory is lowered until it fits, first
// the fixed part, then the fragmentation share; a reserve with room to spare is left alone.
TEST(CalibrateTest, TheMemoryReserveMakesRoomForEveryRunThatRan) {
  std::vector<PublishedRun> rows = Rows(DevRuns(), "nar-t1-", 1);
  ASSERT_EQ(rows.size(), 1u);
  const PublishedRun& run = rows[0];
  const Calibration builtin = BuiltinProfile().Find("ampere")->calib;
  auto need = LeastMemoryNeed(run, builtin);
  ASSERT_TRUE(need.ok()) << need.status().ToString();
  const double room_gib =
      (need->capacity.value() - need->need.value() / (1 - builtin.hbm_fragmentation)) /
      GiB(1).value();
  ASSERT_GT(room_gib, builtin.hbm_reserved_gib);  // the built-in reserve lets it fit
  std::vector<const PublishedRun*> ran = {&run};

  Calibration c = builtin;
  MemoryReserveFit untouched = FitMemoryReserve(ran, &c);
  EXPECT_EQ(c.hbm_reserved_gib, builtin.hbm_reserved_gib);
  EXPECT_EQ(c.hbm_fragmentation, builtin.hbm_fragmentation);
  EXPECT_EQ(untouched.tightest_id, run.id);
  EXPECT_EQ(untouched.still_out_of_memory, 0);

  c = builtin;
  c.hbm_reserved_gib = room_gib + 3;  // now the run does not fit
  auto before = ValidateRun(run, &c);
  ASSERT_TRUE(before.ok());
  EXPECT_EQ(before->estimate.rejection, Rejection::kOutOfMemory);
  MemoryReserveFit lowered = FitMemoryReserve(ran, &c);
  EXPECT_NEAR(c.hbm_reserved_gib, room_gib, 1e-3);
  EXPECT_LE(c.hbm_reserved_gib, room_gib);
  EXPECT_EQ(c.hbm_fragmentation, builtin.hbm_fragmentation);
  EXPECT_EQ(lowered.still_out_of_memory, 0);
  auto after = ValidateRun(run, &c);
  ASSERT_TRUE(after.ok());
  EXPECT_NE(after->estimate.rejection, Rejection::kOutOfMemory);

  // Fragmentation so large that no reserve is enough: the reserve goes to 0, then the share.
  c = builtin;
  c.hbm_fragmentation = 1 - 0.5 * need->need.value() / need->capacity.value();
  FitMemoryReserve(ran, &c);
  EXPECT_EQ(c.hbm_reserved_gib, 0);
  EXPECT_NEAR(c.hbm_fragmentation, 1 - need->need.value() / need->capacity.value(), 1e-4);

  // FitProfile fits it per family after the performance fit.
  SystemProfile start = BuiltinProfile();
  start.FindMutable("ampere")->calib.hbm_reserved_gib = room_gib + 3;
  CalibrateOptions opts;
  opts.families = {"ampere"};
  opts.max_sweeps = 1;
  auto fitted = FitProfile(rows, start, nullptr, opts);
  ASSERT_TRUE(fitted.ok()) << fitted.status().ToString();
  EXPECT_LT(fitted->Find("ampere")->calib.hbm_reserved_gib, room_gib + 3);
  auto v = ValidateRunWithProfile(run, *fitted);
  ASSERT_TRUE(v.ok());
  EXPECT_NE(v->estimate.rejection, Rejection::kOutOfMemory);
}

TEST(CalibrateTest, TheDocumentedExampleCalibrates) {
  const char* dir = std::getenv("BATON_SOURCE_DIR");
  auto runs =
      LoadPublishedRuns(std::string(dir != nullptr ? dir : ".") + "/docs/perf/example-runs.csv");
  ASSERT_TRUE(runs.ok()) << runs.status().ToString();
  ASSERT_EQ(runs->size(), 6u);
  EXPECT_EQ((*runs)[0].model.layers, 32);  // llama3-8b's, from the catalogue
  EXPECT_EQ((*runs)[0].model.vocab, 128256);
  CalibrateOptions opts;
  opts.families = {"hopper"};
  opts.prior_is_start = true;
  CvReport cv;
  auto fitted = CalibrateProfile(*runs, BuiltinProfile(), nullptr, opts, &cv);
  ASSERT_TRUE(fitted.ok()) << fitted.status().ToString();
  EXPECT_EQ(cv.total_rows, 6);
  EXPECT_LE(MeanAbsError(*runs, *fitted), MeanAbsError(*runs, BuiltinProfile()) + 1e-9);
  // Six rows are too few for band cells of their own: the start's band is kept.
  EXPECT_FALSE(fitted->band.cells.empty());
  EXPECT_EQ(cv.band_quantile, 0);  // and claims no coverage for a band it did not build
}

}  // namespace
}  // namespace baton::perf
