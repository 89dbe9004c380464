// Calibration as a procedure: least-squares fits of the estimator's free constants to measured
// runs (the published tables, or a user's own), per GPU family, written as a SystemProfile; and
// cross-validation of that procedure, leaving out one source or one software stack at a time.
// Used by `baton plan calibrate` and `baton plan validate --cv source|stack`.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "core/status.h"
#include "perf/profile.h"
#include "perf/validation.h"

namespace baton::perf {

// One FlashAttention kernel throughput (data/published/attention.csv): TFLOP/s as the charts
// count them (4 s^2 heads head_dim per forward, halved when causal, x3.5 forward+backward).
struct AttentionPoint {
  std::string gpu;
  int head_dim = 0;
  bool causal = false;
  int seq = 0;
  double tflops = 0;
};
Result<std::vector<AttentionPoint>> LoadAttentionTable(const std::string& path);

// Fits flash_attention_fraction, flash_half_length and flash_half_head_dim of `calib` to the
// points of GPUs of `family` (least squares on log throughput, exhaustive over a grid). Returns
// the RMS relative error, or NotFound when the table has no point for the family.
Result<double> FitAttention(const std::vector<AttentionPoint>& points, std::string_view family,
                            Calibration* calib);

// The prior weight `plan calibrate --runs` puts on a user's handful of runs (CalibrateOptions::
// prior_weight, centred on the start profile): without one, 5 runs of a stack pulled every
// constant their few rows touch and made the stack's other runs worse (`plan validate --cv
// few-shot --shots 5`: torchtitan 6.6 % -> 14.5 %). Chosen by that protocol's scan over 5 and
// 10 shots, the lowest mean over both of the error after calibrating (0: 7.9 / 5.3 %; 0.001:
// 6.5 / 5.5 %; 0.003: 6.4 / 5.7 %; 0.01: 6.4 / 5.9 %; 0.03: 6.1 / 6.0 %; docs/perf/
// calibration-log.md, 2026-12-06).
inline constexpr double kUserRunsPriorWeight = 0.001;

struct CalibrateOptions {
  // Coordinate-descent sweeps over the fitted constants. From the priors (Calibration's defaults)
  // the dev tables need about 30 to settle (6 stopped 0.6 points of mean error short).
  int max_sweeps = 40;
  // Families to fit; empty: every family with runs.
  std::vector<std::string> families;
  std::string name = "calibrated";
  // Filled by CalibrateProfile when `bands` is on: cross-validated error per family and
  // sequence range (costs one fit per source group).
  bool bands = true;
  // MAP instead of plain least squares: the loss adds prior_weight x the sum over fitted
  // constants of (deviation from the prior's center / CalibrationField::prior_sigma)^2, so a
  // constant few rows inform stays near what its source says instead of absorbing another
  // term's error. The data term is a sum of per-group means, so 1 is one source group's worth of
  // evidence per sigma^2. Off (0): chosen by leave-one-source-out CV with `bench/perf/fit_profile
  // data/published --scan prior_weight` (docs/perf/calibration-log.md has the scans).
  double prior_weight = 0;
  // The prior's center: Calibration's defaults (false: the built-in fit on the published tables
  // and every CV fold), or `start` (true: `plan calibrate --runs` on a user's handful of runs,
  // for which the built-in profile is what was known before them; each CV fold then also starts
  // from `start`, which never saw those runs).
  bool prior_is_start = false;
  // Hierarchical families (with prior_is_start false): the constants that are not
  // hardware_specific (overheads, overlap shares, fp8 rates, efficiencies: properties of the
  // software stacks, which the families share) are one value for every family with rows, fitted
  // on all their rows together, each family's rows scored with its own hardware-specific
  // constants; the descent starts from the fit of the family with the most rows, and a family
  // with no rows takes the shared values rather than the priors. Off: chosen by `fit_profile
  // --scan pool_families 0,1` (the log has the figures).
  bool pool_families = false;
  // Huber loss on each row's log error: squared up to huber_delta, linear beyond (0: squared
  // throughout), so one source's outlier rows do not drag the constants it shares with others.
  // Off: chosen by `fit_profile --scan huber_delta` (the log has the figures).
  double huber_delta = 0;
};

// Least squares (or Huber, options.huber_delta) on log(predicted / measured) over the
// performance rows (memory rows are checked, not fitted), each source group weighted equally,
// plus the prior penalty (options.prior_weight), by coordinate descent over the fields
// CalibrationFields() marks fitted_on_runs, starting from `start`. Families without runs keep
// `start`'s constants (a family missing from `start` copies Hopper's), except that with
// options.pool_families the constants that are not hardware-specific are fitted jointly over
// every family with rows and a family without rows takes them.
Result<SystemProfile> FitProfile(const std::vector<PublishedRun>& runs, const SystemProfile& start,
                                 const std::vector<AttentionPoint>* attention,
                                 const CalibrateOptions& options);

// The memory reserve fitted to runs that ran (FitProfile runs it per family on all the family's
// rows, memory rows included, after the performance fit). A run that ran says its plan fitted,
// and no row says a plan did not, so the fit is one-sided: Calibration::hbm_reserved_gib is
// lowered (down to 0) until the tightest row's least need (LeastMemoryNeed) fits, then
// hbm_fragmentation (down to 0); neither is ever raised, so the start's values (system.cc names
// their sources) are the prior and rows with room to spare leave them. Rows still over after both
// reach 0 are counted: the memory model, not the reserve, overstates them.
struct MemoryReserveFit {
  double reserved_gib_before = 0, fragmentation_before = 0;
  double reserved_gib = 0, fragmentation = 0;
  std::string tightest_id;  // the row with the least room; empty when no row informed the fit
  MemoryNeed tightest;
  int still_out_of_memory = 0;
};
MemoryReserveFit FitMemoryReserve(const std::vector<const PublishedRun*>& ran, Calibration* c);

// Sets f's runs, gpus_max, seq_max, params_max_b and kind_gpus_max from the runs of its family
// among `runs` (every row, memory rows included).
void SetEnvelope(const std::vector<PublishedRun>& runs, FamilyProfile* f);

// What a cross-validation fold leaves out: one source (the group: a paper, a vendor's table) or
// one software stack (PublishedRun::stack: every source of Megatron-Core, of JAX, ...). Leaving a
// stack out asks what a user of a stack outside the tables asks.
enum class CvUnit { kSource, kStack };
std::string_view CvUnitName(CvUnit unit);  // "source", "stack"
// The run's fold key under `unit`: its group or its stack.
const std::string& CvKey(const PublishedRun& run, CvUnit unit);

struct CvGroup {
  std::string group;  // the held-out source or stack
  int rows = 0;
  double mae = 0;
  double max = 0;
  // The fraction of the group's performance rows whose published value lies inside the band the
  // profile would print for them, the band built without the group (BandCoverage).
  double coverage = 0;
};
struct CvReport {
  CvUnit unit = CvUnit::kSource;
  std::vector<CvGroup> groups;
  std::vector<ValidationRow> rows;  // every row, predicted by the fit that never saw its group
  // Per row of `rows`: whether it lay beyond the envelope of its fold's training runs.
  std::vector<bool> beyond;
  double mae = 0;
  double max = 0;
  int total_rows = 0;
  // Band coverage over every performance row (CvGroup::coverage), its mean over the groups (each
  // source weighted equally: the figure for a stack the model was not fitted on), and the
  // quantile it used.
  double coverage = 0;
  double source_coverage = 0;
  double band_quantile = 0;
};
// Leave-one-out by `unit`: for each source (or stack), fit on the others and predict it. Each fold
// starts the fitted constants (CalibrationFields' fitted_on_runs) from their priors, Calibration's
// defaults, not from `start`: a start fitted on every source (the built-in profile) would carry the
// held-out source into its own prediction, through constants only it informs (torchtitan's rowwise
// fp8 rate) and through the local minimum the descent settles in. `start` supplies the rest. With
// options.prior_is_start (a user's runs, which `start` has not seen) the folds start from `start`.
Result<CvReport> CrossValidate(const std::vector<PublishedRun>& runs, const SystemProfile& start,
                               const std::vector<AttentionPoint>* attention,
                               const CalibrateOptions& options, CvUnit unit = CvUnit::kSource);
std::string FormatCvReport(const CvReport& cv);

// max(predicted / published, published / predicted) - 1: the smallest band that holds the row.
double BandResidual(const ValidationRow& row);
// The residuals the band is built from: per row (matched by id), the fold of `a` or of `b` whose
// estimate missed it more, with that fold's reach. Leave-one-source-out and leave-one-stack-out
// folds each miss rows the other gets right; the band has to hold either question.
CvReport WorseOfFolds(const CvReport& a, const CvReport& b);
// The band model of CV residuals (BandModel): every performance row of `cv` counted in each cell
// of its BandCellKeys (with its own parallelism kind and with "*"), each cell's
// ceil((n + 1) quantile)-th smallest residual; cells with fewer than kMinBandRows rows or
// kMinBandSources sources (groups, whatever the protocol) dropped. `exclude`, when not empty,
// leaves out the rows whose CvKey under `exclude_unit` it is.
BandModel BuildBandModel(const CvReport& cv, double quantile, std::string_view exclude = {},
                         CvUnit exclude_unit = CvUnit::kSource);
// Fills cv->groups[].coverage, cv->coverage and cv->band_quantile: for each held-out unit of cv
// (a source or a stack, cv->unit), the band model built from `residuals` without that unit's
// rows, and the fraction of its performance rows whose published value lies inside the band
// EstimateBand would print for them, each row's estimate and reach taken from its own fold in
// cv (a profile fitted without the unit). The other units' residuals come from folds that did
// see the held-out unit (one level of cross-validation, not nested: a nested one costs a fit per
// pair of units).
void BandCoverage(double quantile, const CvReport& residuals, CvReport* cv);
// The same with the band built from cv's own residuals.
void BandCoverage(double quantile, CvReport* cv);
// The question a validation row asks of the band.
BandQuestion BandQuestionOf(const ValidationRow& row);
// The quantiles the band is chosen from and the coverage it must reach: issue 28's acceptance
// (the band holds >= 80 % of the runs of sources and of stacks the constants were not fitted
// on), over all held-out rows and on average over the held-out units (so one large source cannot
// carry it). CalibrateProfile takes the smallest quantile of the grid whose BandCoverage reaches
// both under every protocol (the largest when none does).
inline constexpr double kBandQuantiles[] = {0.8, 0.85, 0.9, 0.95};
inline constexpr double kBandTargetCoverage = 0.8;
// The smallest of kBandQuantiles whose BandCoverage (band from `residuals`) reaches
// kBandTargetCoverage overall and per held-out unit on average in every report of `protocols`
// (the largest when none does), leaving their coverage figures for it.
double ChooseBandQuantile(const CvReport& residuals, std::span<CvReport* const> protocols);
// The same for one report, the band from its own residuals.
double ChooseBandQuantile(CvReport* cv);

// Fit, then (options.bands) cross-validate, leaving out one source and then one stack, to fill
// the band model (BuildBandModel of WorseOfFolds at ChooseBandQuantile; with fewer than
// kMinBandRows performance rows, `start`'s band is kept) and each family's per-sequence bands
// (read only for a profile without band cells). When every run's stack is its group the two
// protocols coincide and the stack folds are not fitted again. `cv_out` and `stack_cv_out`, when
// not null, receive the two reports with their coverage.
Result<SystemProfile> CalibrateProfile(const std::vector<PublishedRun>& runs,
                                       const SystemProfile& start,
                                       const std::vector<AttentionPoint>* attention,
                                       const CalibrateOptions& options, CvReport* cv_out,
                                       CvReport* stack_cv_out = nullptr);

}  // namespace baton::perf
