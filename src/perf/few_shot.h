#pragma once
// Few-shot cross-validation: does calibrating on a handful of a stack's runs help on its others?
// The question `plan calibrate --runs mine.csv` answers for a user, asked of every large source
// of the tables (`baton plan validate --cv few-shot --shots K`).

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "perf/calibrate.h"

namespace baton::perf {

struct FewShotOptions {
  int shots = 10;          // runs of the held-out source a user calibrates on
  int draws = 3;           // random draws of those runs per source
  int min_rows = 20;       // sources with fewer performance rows are not held out
  std::uint64_t seed = 1;  // the draws' (reproducible) random choice
  // CalibrateOptions::prior_weight of the calibration on the drawn rows (what `plan calibrate
  // --runs` uses: kUserRunsPriorWeight unless --prior-weight says).
  double user_prior_weight = kUserRunsPriorWeight;
};

struct FewShotSource {
  std::string source;  // the held-out group (CvKey under CvUnit::kSource)
  int rows = 0;        // its performance rows
  // Mean |error| on the rows not drawn, averaged over the draws: with the profile fitted without
  // the source (before), and after calibrating that profile on the drawn rows.
  double mae_before = 0;
  double mae_after = 0;
  double after_min = 0;  // the best and worst draw's mean |error| after calibrating
  double after_max = 0;
};

struct FewShotReport {
  FewShotOptions options;
  std::vector<FewShotSource> sources;
  double mae_before = 0;  // means over the sources (each weighted equally)
  double mae_after = 0;
};

// For every source with at least options.min_rows performance rows: fit on the other sources
// (each fold from the priors, as CrossValidate's), then for each draw calibrate that profile on
// options.shots of the source's performance rows as `plan calibrate --runs` does
// (`calibrate` with prior_is_start and bands off) and measure both profiles on the source's
// remaining performance rows. InvalidArgument when shots < 1 or draws < 1; FailedPrecondition
// when no source has enough rows (min_rows, and more than `shots`).
Result<FewShotReport> FewShotValidate(const std::vector<PublishedRun>& runs,
                                      const SystemProfile& start,
                                      const std::vector<AttentionPoint>* attention,
                                      const CalibrateOptions& calibrate,
                                      const FewShotOptions& options);

std::string FormatFewShotReport(const FewShotReport& report);

}  // namespace baton::perf
