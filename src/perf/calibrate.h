// Calibration as a procedure: least-squares fits of the estimator's free constants to measured
// runs (the published tables, or a user's own), per GPU family, written as a SystemProfile; and
// leave-one-source-out cross-validation of that procedure. Used by `baton plan calibrate` and
// `baton plan validate --cv source`.
#pragma once

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
  // term's error (Blackwell's NVLink efficiency fitted to 0.25 on one source's 10 rows). The
  // data term is a sum of per-group means, so 1 is one source group's worth of evidence per
  // sigma^2. Chosen by leave-one-source-out CV (bench/perf/fit_profile --scan prior_weight, with
  // families pooled by center only, before the joint fit): 0 / 0.0003 / 0.001 / 0.003 gave CV
  // 11.0 / 11.3 / 10.6 / 10.5 % but in-sample p90 13.9 / 14.3 / 15.0 / 15.4 %, and on a user's
  // handful of runs (splits of five Hopper sources, fit on 5-8 rows, predict the rest) shrinking
  // toward the start helped two and hurt three (IBM's Ethernet rows 5 -> 18 %), so it is off: the
  // priors' centers (Calibration's defaults) are not estimates for every constant (fp8 1.0 is a
  // floor, TP overlap 0 the pre-userbuffer value; those two have no prior width). With the joint
  // fit of pool_families, 0 / 0.001 / 0.003 give CV 9.8 / 10.1 / 10.2 %.
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
  // with no rows (Blackwell when Megatron-Bridge, its only source, is held out) takes the shared
  // values rather than the priors. bench/perf/fit_profile --scan: CV 11.5 -> 9.8 % (torchtitan
  // 24.1 -> 18.2, Megatron-Bridge 14.4 -> 9.0, ibm-fsdp 19.8 -> 22.7 %); in-sample mean 7.3 ->
  // 7.4 %, p90 13.9 -> 14.9 %, 0 runs out of memory either way. Off since the fourth pass's
  // model changes (async TP, power-cap exponent, HBM2e, torch CP, bf16 Adam state, TP backward,
  // 16-bit output layer): on that model `fit_profile data/published --scan pool_families 0,1`
  // gives in-sample 5.8 / 11.5 / 28.7 % and CV 8.4 % without pooling against 6.1 / 12.4 / 29.2 %
  // and CV 8.5 % with it (Megatron-Bridge 12.9 -> 7.5 % held out, ibm-fsdp 18.3 -> 22.2 %).
  bool pool_families = false;
  // Huber loss on each row's log error: squared up to huber_delta, linear beyond (0: squared
  // throughout), so one source's outlier rows do not drag the constants it shares with others.
  // Off: 0.05 / 0.1 / 0.2 gave CV 11.5 / 11.4 / 11.4 % against 11.0 % with squares (families
  // pooled by center only, before the joint fit).
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

struct CvGroup {
  std::string group;
  int rows = 0;
  double mae = 0;
  double max = 0;
};
struct CvReport {
  std::vector<CvGroup> groups;
  std::vector<ValidationRow> rows;  // every row, predicted by the fit that never saw its group
  double mae = 0;
  double max = 0;
  int total_rows = 0;
};
// Leave-one-source-out: for each group, fit on the others and predict it. Each fold starts the
// fitted constants (CalibrationFields' fitted_on_runs) from their priors, Calibration's defaults,
// not from `start`: a start fitted on every source (the built-in profile) would carry the held-out
// source into its own prediction, through constants only it informs (torchtitan's rowwise fp8
// rate) and through the local minimum the descent settles in. `start` supplies the rest. With
// options.prior_is_start (a user's runs, which `start` has not seen) the folds start from `start`.
Result<CvReport> CrossValidate(const std::vector<PublishedRun>& runs, const SystemProfile& start,
                               const std::vector<AttentionPoint>* attention,
                               const CalibrateOptions& options);
std::string FormatCvReport(const CvReport& cv);

// Fit, then (options.bands) cross-validate to fill each family's bands and the envelope.
Result<SystemProfile> CalibrateProfile(const std::vector<PublishedRun>& runs,
                                       const SystemProfile& start,
                                       const std::vector<AttentionPoint>* attention,
                                       const CalibrateOptions& options, CvReport* cv_out);

}  // namespace baton::perf
