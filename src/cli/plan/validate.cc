// `baton plan validate` (the estimator against measured runs, optionally cross-validated) and
// `baton plan calibrate` (a system profile fitted to runs, or a fabric to nccl-tests outputs).
#include <fmt/format.h>

#include <fstream>
#include <optional>

#include "cli/plan/options.h"
#include "core/strings.h"
#include "perf/attention_kernels.h"
#include "perf/calibrate.h"
#include "perf/collectives.h"
#include "perf/few_shot.h"
#include "perf/report.h"
#include "perf/validation.h"

namespace baton::cli::plan {
namespace {

std::string RunsFor(const PlanOptions& o) {
  if (!o.runs_file.empty()) return o.runs_file;
  return perf::DevTables(o.data_dir.empty() ? perf::DefaultDataDir() : o.data_dir);
}

nlohmann::json RowJson(const perf::ValidationRow& r) {
  return {{"id", r.run.id},
          {"group", r.run.group},
          {"metric", std::string(perf::MetricName(r.run.metric))},
          {"published", r.run.value},
          {"estimate", r.predicted},
          {"error", r.error},
          {"out_of_memory", r.estimate.rejection == perf::Rejection::kOutOfMemory},
          {"assumptions", r.run.assumptions},
          {"plan", perf::PlanToJson(r.plan)}};
}

// `calibrate --collectives`: the fabric's collective terms fitted to the user's nccl-tests
// outputs, printed with the error at every size. Not written into the profile: the estimator
// does not read a fitted fabric yet (perf/collectives.h is not wired into Evaluate).
Status RunCalibrateCollectives(const PlanOptions& o) {
  std::vector<perf::NcclTestsRun> runs;
  for (std::string_view f : Split(o.collectives, ',')) {
    if (Trim(f).empty()) continue;
    ASSIGN_OR_RETURN(perf::NcclTestsRun run, perf::LoadNcclTestsOutput(Trim(f)));
    fmt::print("{}: {} on {} ranks{}, {} GPUs per node{}, {} sizes\n", run.source,
               perf::CollectiveName(run.op), run.ranks,
               run.ranks_from_ratio ? " (from busbw/algbw)" : "", run.gpus_per_node,
               run.gpus_per_node > 0 ? "" : " (not printed; 8 assumed)", run.points.size());
    runs.push_back(std::move(run));
  }
  if (runs.empty()) return InvalidArgumentError("collectives: no nccl-tests output given");
  const std::vector<perf::CollectiveSample> samples = perf::SamplesFromNcclTests(runs, "yours");
  ASSIGN_OR_RETURN(perf::FittedFabric fit, perf::FitFabric(samples, perf::CollectiveFabric{}));
  fmt::print("\n{}\n{}", perf::FormatFabric(fit), perf::FormatSampleErrors(fit, samples));
  return Status::Ok();
}

// `calibrate --attention-kernels`: each kernel's rate relative to FlashAttention-2 fitted on the
// charts, written into the start profile's families.
Status RunCalibrateAttentionKernels(const PlanOptions& o) {
  if (o.out_file.empty()) return InvalidArgumentError("out: --out FILE.yaml is required");
  ASSIGN_OR_RETURN(std::vector<perf::AttentionKernelPoint> points,
                   perf::LoadAttentionKernelTable(o.attention_kernels));
  ASSIGN_OR_RETURN(perf::SystemProfile profile, ProfileFor(o));
  ASSIGN_OR_RETURN(std::vector<perf::AttentionKernelFit> fits,
                   perf::FitAttentionKernels(points, &profile));
  fmt::print("{}", perf::FormatAttentionKernelFits(fits, profile));
  std::ofstream out(o.out_file);
  out << perf::ProfileToYaml(profile);
  if (!out) return InvalidArgumentError(fmt::format("out: cannot write '{}'", o.out_file));
  fmt::print("wrote {}\n", o.out_file);
  return Status::Ok();
}

// The attention table the cross-validation refits the flash_* constants on: --attention, else
// the data folder's attention.csv with the dev tables; none with a user's --runs.
Result<std::optional<std::vector<perf::AttentionPoint>>> AttentionFor(const PlanOptions& o) {
  std::string att = o.attention_file;
  if (att.empty() && o.runs_file.empty()) {
    att = (o.data_dir.empty() ? perf::DefaultDataDir() : o.data_dir) + "/attention.csv";
  }
  if (att.empty()) return std::optional<std::vector<perf::AttentionPoint>>();
  ASSIGN_OR_RETURN(std::vector<perf::AttentionPoint> points, perf::LoadAttentionTable(att));
  return std::optional<std::vector<perf::AttentionPoint>>(std::move(points));
}

}  // namespace

Status RunValidate(const PlanOptions& o) {
  ASSIGN_OR_RETURN(std::vector<perf::PublishedRun> runs, perf::LoadPublishedTables(RunsFor(o)));
  ASSIGN_OR_RETURN(perf::SystemProfile profile, ProfileFor(o));
  if (Trim(o.cv) == "few-shot") {
    ASSIGN_OR_RETURN(std::optional<std::vector<perf::AttentionPoint>> attention, AttentionFor(o));
    perf::FewShotOptions few;
    few.shots = o.shots;
    few.draws = o.draws;
    few.user_prior_weight = o.prior_weight.value_or(perf::kUserRunsPriorWeight);
    ASSIGN_OR_RETURN(perf::FewShotReport report,
                     perf::FewShotValidate(runs, profile, attention ? &*attention : nullptr,
                                           perf::CalibrateOptions{}, few));
    fmt::print("{}", perf::FormatFewShotReport(report));
    return Status::Ok();
  }
  if (!o.cv.empty()) {
    bool want_source = false, want_stack = false;
    for (std::string_view u : Split(o.cv, ',')) {
      if (Trim(u) == "source") {
        want_source = true;
      } else if (Trim(u) == "stack") {
        want_stack = true;
      } else {
        return InvalidArgumentError(fmt::format(
            "cv: '{}' is not 'source', 'stack', 'source,stack' or 'few-shot'", Printable(o.cv)));
      }
    }
    ASSIGN_OR_RETURN(std::optional<std::vector<perf::AttentionPoint>> attention, AttentionFor(o));
    perf::CalibrateOptions copts;
    const std::vector<perf::AttentionPoint>* att_points = attention ? &*attention : nullptr;
    // Both protocols are fitted whichever is printed: the band `plan calibrate` builds takes each
    // row's worse fold (WorseOfFolds), so its coverage on either needs both.
    ASSIGN_OR_RETURN(perf::CvReport by_source,
                     perf::CrossValidate(runs, profile, att_points, copts, perf::CvUnit::kSource));
    ASSIGN_OR_RETURN(perf::CvReport by_stack,
                     perf::CrossValidate(runs, profile, att_points, copts, perf::CvUnit::kStack));
    const perf::CvReport residuals = perf::WorseOfFolds(by_source, by_stack);
    // The coverage of the band the profile prints (its quantile), or of the one `plan calibrate`
    // would choose for a profile without band cells.
    if (profile.band.quantile > 0) {
      perf::BandCoverage(profile.band.quantile, residuals, &by_source);
      perf::BandCoverage(profile.band.quantile, residuals, &by_stack);
    } else {
      perf::CvReport* const protocols[] = {&by_source, &by_stack};
      perf::ChooseBandQuantile(residuals, protocols);
    }
    std::vector<const perf::CvReport*> shown;
    if (want_source) shown.push_back(&by_source);
    if (want_stack) shown.push_back(&by_stack);
    if (o.json) {
      nlohmann::json out;
      for (const perf::CvReport* cv : shown) {
        nlohmann::json j;
        for (const auto& g : cv->groups) {
          j["groups"].push_back({{"group", g.group},
                                 {"rows", g.rows},
                                 {"mae", g.mae},
                                 {"max", g.max},
                                 {"band_coverage", g.coverage}});
        }
        for (const auto& r : cv->rows) j["rows"].push_back(RowJson(r));
        j["mae"] = cv->mae;
        j["max"] = cv->max;
        j["band_coverage"] = cv->coverage;
        j["band_coverage_mean_over_units"] = cv->source_coverage;
        j["band_quantile"] = cv->band_quantile;
        out[std::string(perf::CvUnitName(cv->unit))] = std::move(j);
      }
      fmt::print("{}\n", out.dump(2));
      return Status::Ok();
    }
    for (std::size_t i = 0; i < shown.size(); ++i) {
      fmt::print("{}{}", i > 0 ? "\n" : "", perf::FormatCvReport(*shown[i]));
    }
    return Status::Ok();
  }
  ASSIGN_OR_RETURN(perf::ValidationReport rep, perf::RunValidationWithProfile(runs, profile));
  if (o.json) {
    nlohmann::json j;
    for (const auto& r : rep.rows) j["rows"].push_back(RowJson(r));
    for (const auto& g : rep.groups) {
      j["groups"].push_back({{"group", g.group}, {"rows", g.rows}, {"mae", g.mae}, {"max", g.max}});
    }
    j["perf_mae"] = rep.perf_mae;
    j["perf_p90"] = rep.perf_p90;
    j["perf_max"] = rep.perf_max;
    j["memory_mae"] = rep.memory_mae;
    j["memory_max"] = rep.memory_max;
    j["out_of_memory_rows"] = rep.oom_rows;
    fmt::print("{}\n", j.dump(2));
    return Status::Ok();
  }
  fmt::print("{}", perf::FormatValidationReport(rep));
  return Status::Ok();
}

Status RunCalibrate(const PlanOptions& o) {
  if (!o.collectives.empty()) return RunCalibrateCollectives(o);
  if (!o.attention_kernels.empty()) return RunCalibrateAttentionKernels(o);
  if (o.out_file.empty()) return InvalidArgumentError("out: --out FILE.yaml is required");
  ASSIGN_OR_RETURN(std::vector<perf::PublishedRun> runs, perf::LoadPublishedTables(RunsFor(o)));
  ASSIGN_OR_RETURN(perf::SystemProfile start, ProfileFor(o));
  std::vector<perf::AttentionPoint> attention;
  if (!o.attention_file.empty()) {
    ASSIGN_OR_RETURN(attention, perf::LoadAttentionTable(o.attention_file));
  }
  perf::CalibrateOptions copts;
  copts.bands = !o.no_bands;
  copts.name = o.out_file;
  // A user's own runs (--runs): the start profile has not seen them, so the fit's prior and every
  // CV fold start from it rather than from the defaults (the dev tables' built-in fit saw them).
  copts.prior_is_start = !o.runs_file.empty();
  // ... and holds the constants near it unless the runs insist (kUserRunsPriorWeight).
  if (copts.prior_is_start)
    copts.prior_weight = o.prior_weight.value_or(perf::kUserRunsPriorWeight);
  for (std::string_view f : Split(o.families, ',')) {
    if (!Trim(f).empty()) copts.families.emplace_back(Trim(f));
  }
  perf::CvReport cv, stack_cv;
  ASSIGN_OR_RETURN(perf::SystemProfile fitted,
                   perf::CalibrateProfile(runs, start, attention.empty() ? nullptr : &attention,
                                          copts, &cv, &stack_cv));
  ASSIGN_OR_RETURN(perf::ValidationReport rep, perf::RunValidationWithProfile(runs, fitted));
  std::ofstream out(o.out_file);
  out << perf::ProfileToYaml(fitted);
  if (!out) return InvalidArgumentError(fmt::format("out: cannot write '{}'", o.out_file));
  fmt::print("fitted {} runs; in-sample: mean |error| {:.1f}%, p90 {:.1f}%, max {:.1f}%\n",
             rep.perf_rows, 100 * rep.perf_mae, 100 * rep.perf_p90, 100 * rep.perf_max);
  // The memory reserve (perf::FitMemoryReserve): lowered only where a run that ran needs it.
  for (const perf::FamilyProfile& f : fitted.families) {
    const perf::FamilyProfile* before = start.Find(f.family);
    if (before == nullptr || (before->calib.hbm_reserved_gib == f.calib.hbm_reserved_gib &&
                              before->calib.hbm_fragmentation == f.calib.hbm_fragmentation)) {
      continue;
    }
    fmt::print(
        "memory reserve ({}): {:.2f} GiB + {:.1f} % -> {:.2f} GiB + {:.1f} %, lowered for the "
        "runs that ran\n",
        f.family, before->calib.hbm_reserved_gib, 100 * before->calib.hbm_fragmentation,
        f.calib.hbm_reserved_gib, 100 * f.calib.hbm_fragmentation);
  }
  if (rep.oom_rows > 0) {
    fmt::print(
        "runs the memory model still calls out of memory: {} (it overstates them by more "
        "than the whole reserve)\n",
        rep.oom_rows);
  }
  if (copts.bands) {
    fmt::print("{}", perf::FormatCvReport(cv));
    // A user's file without a stack column is one stack per source: the same folds again.
    if (stack_cv.groups.size() != cv.groups.size()) {
      fmt::print("\n{}", perf::FormatCvReport(stack_cv));
    }
  }
  fmt::print("wrote {}\n", o.out_file);
  return Status::Ok();
}

}  // namespace baton::cli::plan
