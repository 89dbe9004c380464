#include "perf/few_shot.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>

namespace baton::perf {

namespace {

bool IsPerf(const PublishedRun& r) { return !IsMemoryMetric(r.metric); }

// Mean |error| of `profile` on `rows` (performance rows).
Result<double> MeanError(const std::vector<PublishedRun>& rows, const SystemProfile& profile) {
  double sum = 0;
  for (const PublishedRun& r : rows) {
    ASSIGN_OR_RETURN(ValidationRow v, ValidateRunWithProfile(r, profile));
    sum += std::abs(v.error);
  }
  return rows.empty() ? 0.0 : sum / rows.size();
}

}  // namespace

Result<FewShotReport> FewShotValidate(const std::vector<PublishedRun>& runs,
                                      const SystemProfile& start,
                                      const std::vector<AttentionPoint>* attention,
                                      const CalibrateOptions& calibrate,
                                      const FewShotOptions& options) {
  if (options.shots < 1) return InvalidArgumentError("shots: must be >= 1");
  if (options.draws < 1) return InvalidArgumentError("draws: must be >= 1");
  FewShotReport report;
  report.options = options;
  std::vector<std::string> sources;
  for (const PublishedRun& r : runs) {
    const std::string& g = CvKey(r, CvUnit::kSource);
    if (std::find(sources.begin(), sources.end(), g) == sources.end()) sources.push_back(g);
  }
  // Each fold from the priors, as CrossValidate's (calibrate.h says why).
  SystemProfile prior = start;
  const Calibration defaults;
  for (FamilyProfile& f : prior.families) {
    for (const CalibrationField& field : CalibrationFields()) {
      if (FittedOn(field, /*user_runs=*/false)) f.calib.*(field.member) = defaults.*(field.member);
    }
  }
  CalibrateOptions fold_opts = calibrate;
  fold_opts.bands = false;
  fold_opts.prior_is_start = false;
  // What `plan calibrate --runs` does with a user's runs (cli/plan/validate.cc).
  CalibrateOptions user_opts = calibrate;
  user_opts.bands = false;
  user_opts.prior_is_start = true;
  user_opts.prior_weight = options.user_prior_weight;
  for (const std::string& source : sources) {
    std::vector<PublishedRun> train, held;
    for (const PublishedRun& r : runs) {
      if (CvKey(r, CvUnit::kSource) != source) {
        train.push_back(r);
      } else if (IsPerf(r)) {
        held.push_back(r);
      }
    }
    if (static_cast<int>(held.size()) < std::max(options.min_rows, options.shots + 1)) continue;
    ASSIGN_OR_RETURN(SystemProfile fold, FitProfile(train, prior, attention, fold_opts));
    FewShotSource out;
    out.source = source;
    out.rows = static_cast<int>(held.size());
    out.after_min = 1e300;
    std::mt19937_64 rng(options.seed ^ std::hash<std::string>{}(source));
    for (int d = 0; d < options.draws; ++d) {
      std::vector<PublishedRun> order = held;
      std::shuffle(order.begin(), order.end(), rng);
      const std::vector<PublishedRun> shots(order.begin(), order.begin() + options.shots);
      const std::vector<PublishedRun> rest(order.begin() + options.shots, order.end());
      ASSIGN_OR_RETURN(SystemProfile mine, FitProfile(shots, fold, nullptr, user_opts));
      ASSIGN_OR_RETURN(double before, MeanError(rest, fold));
      ASSIGN_OR_RETURN(double after, MeanError(rest, mine));
      out.mae_before += before / options.draws;
      out.mae_after += after / options.draws;
      out.after_min = std::min(out.after_min, after);
      out.after_max = std::max(out.after_max, after);
    }
    report.sources.push_back(out);
  }
  if (report.sources.empty()) {
    return FailedPreconditionError(
        fmt::format("few-shot: no source has {} performance rows (and more than {} shots)",
                    options.min_rows, options.shots));
  }
  for (const FewShotSource& s : report.sources) {
    report.mae_before += s.mae_before / report.sources.size();
    report.mae_after += s.mae_after / report.sources.size();
  }
  return report;
}

std::string FormatFewShotReport(const FewShotReport& report) {
  const FewShotOptions& o = report.options;
  std::string out = fmt::format(
      "few-shot cross-validation: each source with >= {} rows left out of the fit, then the fit "
      "calibrated on {} of its rows ({} random draws, prior weight {:g}, as `plan calibrate "
      "--runs` does) and tested on the rest:\n",
      o.min_rows, o.shots, o.draws, o.user_prior_weight);
  out += fmt::format("{:<18} {:>5} {:>10} {:>10} {:>17}\n", "held-out source", "rows", "before",
                     "after", "after, by draw");
  for (const FewShotSource& s : report.sources) {
    out += fmt::format("{:<18} {:>5} {:>9.1f}% {:>9.1f}% {:>8.1f}-{:.1f}%\n", s.source, s.rows,
                       100 * s.mae_before, 100 * s.mae_after, 100 * s.after_min, 100 * s.after_max);
  }
  out += fmt::format("{:<18} {:>5} {:>9.1f}% {:>9.1f}%\n", "mean over sources", "",
                     100 * report.mae_before, 100 * report.mae_after);
  out +=
      "before: the profile fitted without the source; after: that profile calibrated on the "
      "drawn rows; both measured on the rows not drawn (mean |error|)\n";
  return out;
}

}  // namespace baton::perf
