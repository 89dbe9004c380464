// Fits the built-in profile on the dev tables and cross-validates it, linking only the planner
// (so it builds in minutes where the CLI needs the whole tree). Does what
//   baton plan calibrate --attention DIR/attention.csv --out OUT.yaml
//   baton plan validate --cv source,stack
// do, with the same library calls, and prints both reports.
//   fit_profile DATA_DIR OUT.yaml [--no-cv]
//   fit_profile DATA_DIR --bands   (the band's choice: coverage under leave-one-source-out and
//   leave-one-stack-out, and the median band, for each set of residuals and quantile)
//   fit_profile DATA_DIR --validate [PROFILE.yaml]   (only `baton plan validate`'s report)
//   fit_profile DATA_DIR --search MODEL GPUS GPU GBS [PROFILE.yaml]   (top 3 plans, as
//   `baton plan search` ranks them)
//   fit_profile DATA_DIR --rows PREFIX [PROFILE.yaml]   (the step breakdown of every row whose
//   id starts with PREFIX: where the estimate's time goes, to find what a miss points at)
//   fit_profile DATA_DIR --scan KEY V1,V2,... [KEY=V ...]   (for each value of one calibration
//   option, KEY one of prior_weight, huber_delta, pool_families, max_sweeps, the others fixed
//   at their defaults or KEY=V: the in-sample error of the fit and its leave-one-source-out
//   CV, overall and per source; how CalibrateOptions' defaults are chosen)
//   fit_profile DATA_DIR --scan FAMILY.FIELD V1,V2,...   (for each value of a calibration
//   constant that is not fitted on runs, e.g. ampere.gemm_half_gflop: the value set in the
//   start profile, the rest fitted, and the same report plus vTrain's mean and median error,
//   the set such a constant is chosen on)
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <string>
#include <string_view>

#include "perf/calibrate.h"
#include "perf/search.h"

using namespace baton::perf;

int main(int argc, char** argv) {
  if (argc < 3) {
    fmt::print(stderr, "usage: fit_profile DATA_DIR OUT.yaml [--no-cv]\n");
    return 2;
  }
  std::string dir = argv[1];
  if (std::strcmp(argv[2], "--search") == 0 && argc >= 7) {
    if (argc > 7) {
      baton::Status st = InstallProfileFile(argv[7]);
      if (!st.ok()) {
        fmt::print(stderr, "{}\n", st.ToString());
        return 1;
      }
    }
    auto model = FindModel(argv[3]);
    if (!model.ok()) {
      fmt::print(stderr, "{}\n", model.status().ToString());
      return 1;
    }
    ShortSystem sh;
    sh.gpus = std::atoi(argv[4]);
    sh.gpu = argv[5];
    sh.nic_gbits_per_gpu = DefaultNicGbps(sh.gpu);  // as `baton plan` without --nic-gbps
    TrainingSpec training;
    training.global_batch = std::atoi(argv[6]);
    auto system = SystemFromShort(sh);
    if (!system.ok()) {
      fmt::print(stderr, "{}\n", system.status().ToString());
      return 1;
    }
    SearchOptions options;
    options.top_k = 3;
    auto found = Search(*model, training, *system, DefaultSearchSpace(*model, {sh.gpus}), options);
    if (!found.ok()) {
      fmt::print(stderr, "{}\n", found.status().ToString());
      return 1;
    }
    UncertaintyBand band = EstimateBand(ActiveProfile(), *model, *system, sh.gpus,
                                        found->top.empty() ? 0.0 : found->top[0].estimate.mfu);
    MarkBeyondEnvelope(ActiveProfile(), *model, *system, &*found);
    fmt::print("band +-{:.1f}%{}{}\n", 100 * band.relative,
               band.extrapolated ? "  EXTRAPOLATION: " : "", band.why);
    for (const RankedPlan& r : found->top) {
      const StepEstimate& e = r.estimate;
      fmt::print("{:.3f} s  MFU {:.1f}%{} (causal {:.1f}%)  {}\n", e.step.value(), 100 * e.mfu,
                 r.beyond_envelope ? " (beyond the validated MFU)" : "", 100 * e.mfu_causal,
                 PlanToString(r.plan));
      fmt::print(
          "    compute {:.3f} recompute {:.3f} tp {:.3f} pp {:.3f} dp {:.3f} bubble {:.3f} opt "
          "{:.3f} | mem {:.1f}/{:.1f} GiB\n",
          e.compute.value(), e.recompute.value(), e.tp_comm.value(), e.pp_comm.value(),
          e.dp_comm.value(), e.bubble.value(), e.optimizer.value(), ToGiB(e.memory.total()),
          ToGiB(e.memory.usable));
    }
    return 0;
  }
  if (std::strcmp(argv[2], "--rows") == 0 && argc >= 4) {
    auto runs = LoadPublishedTables(DevTables(dir));
    if (!runs.ok()) {
      fmt::print(stderr, "{}\n", runs.status().ToString());
      return 1;
    }
    SystemProfile profile = BuiltinProfile();
    if (argc > 4) {
      auto loaded = LoadProfile(argv[4]);
      if (!loaded.ok()) {
        fmt::print(stderr, "{}\n", loaded.status().ToString());
        return 1;
      }
      profile = *loaded;
    }
    for (const PublishedRun& r : *runs) {
      if (!r.id.starts_with(argv[3])) continue;
      auto v = ValidateRunWithProfile(r, profile);
      if (!v.ok()) {
        fmt::print("{}: {}\n", r.id, v.status().ToString());
        continue;
      }
      const StepEstimate& e = v->estimate;
      fmt::print(
          "{} {:+.1f}% step {:.3f}s: compute {:.3f} recompute {:.3f} tp {:.3f} cp {:.3f} pp {:.3f} "
          "dp {:.3f} bubble {:.3f} opt {:.3f} launch {:.3f} | mfu {:.3f} mem {:.1f}/{:.1f} GiB "
          "(w {:.1f} g {:.1f} o {:.1f} act {:.1f} buf {:.1f}) {}\n",
          r.id, 100 * v->error, e.step.value(), e.compute.value(), e.recompute.value(),
          e.tp_comm.value(), e.cp_comm.value(), e.pp_comm.value(), e.dp_comm.value(),
          e.bubble.value(), e.optimizer.value(), e.launch.value(), e.mfu, ToGiB(e.memory.total()),
          ToGiB(e.memory.usable), ToGiB(e.memory.weights), ToGiB(e.memory.gradients),
          ToGiB(e.memory.optimizer), ToGiB(e.memory.activations), ToGiB(e.memory.buffers),
          PlanToString(v->plan));
    }
    return 0;
  }
  if (std::strcmp(argv[2], "--scan") == 0 && argc >= 5) {
    auto runs = LoadPublishedTables(DevTables(dir));
    auto attention = LoadAttentionTable(dir + "/attention.csv");
    if (!runs.ok() || !attention.ok()) {
      fmt::print(stderr, "{}\n", (!runs.ok() ? runs.status() : attention.status()).ToString());
      return 1;
    }
    auto set = [](CalibrateOptions* o, std::string_view key, double v) {
      if (key == "prior_weight") {
        o->prior_weight = v;
      } else if (key == "huber_delta") {
        o->huber_delta = v;
      } else if (key == "pool_families") {
        o->pool_families = v != 0;
      } else if (key == "max_sweeps") {
        o->max_sweeps = static_cast<int>(v);
      } else {
        return false;
      }
      return true;
    };
    // FAMILY.FIELD: a constant the fit leaves alone, set per value in the start profile.
    const std::string key = argv[3];
    const CalibrationField* field = nullptr;
    std::string family;
    if (std::size_t dot = key.find('.'); dot != std::string::npos) {
      family = key.substr(0, dot);
      for (const CalibrationField& f : CalibrationFields()) {
        if (f.name == key.substr(dot + 1) && !FittedOn(f, /*user_runs=*/false)) field = &f;
      }
      if (field == nullptr || BuiltinProfile().Find(family) == nullptr) {
        fmt::print(stderr, "'{}' is not FAMILY.FIELD of a constant not fitted on runs\n", key);
        return 2;
      }
    }
    const std::string vtrain_path = dir + "/../../../shared/data/published/vtrain-single-node.csv";
    CalibrateOptions base;
    base.bands = false;
    for (int i = 5; i < argc; ++i) {
      std::string_view kv = argv[i];
      std::size_t eq = kv.find('=');
      if (eq == std::string_view::npos ||
          !set(&base, kv.substr(0, eq), std::atof(std::string(kv.substr(eq + 1)).c_str()))) {
        fmt::print(stderr, "bad option '{}'\n", kv);
        return 2;
      }
    }
    std::string values = argv[4];
    std::size_t pos = 0;
    while (pos <= values.size()) {
      std::size_t comma = values.find(',', pos);
      if (comma == std::string::npos) comma = values.size();
      double v = std::atof(values.substr(pos, comma - pos).c_str());
      pos = comma + 1;
      CalibrateOptions o = base;
      SystemProfile start = BuiltinProfile();
      if (field != nullptr) {
        if (v < field->min || v > field->max) {
          fmt::print(stderr, "{}: {:g} is outside {:g}..{:g}\n", key, v, field->min, field->max);
          return 2;
        }
        start.FindMutable(family)->calib.*(field->member) = v;
      } else if (!set(&o, key, v)) {
        fmt::print(stderr, "unknown option '{}'\n", key);
        return 2;
      }
      auto fitted = FitProfile(*runs, start, &*attention, o);
      auto cv = CrossValidate(*runs, start, &*attention, o);
      if (!fitted.ok() || !cv.ok()) {
        fmt::print(stderr, "{}\n", (!fitted.ok() ? fitted.status() : cv.status()).ToString());
        return 1;
      }
      auto in = RunValidationWithProfile(*runs, *fitted);
      if (!in.ok()) {
        fmt::print(stderr, "{}\n", in.status().ToString());
        return 1;
      }
      std::string groups;
      for (const CvGroup& g : cv->groups) {
        groups += fmt::format(" {} {:.1f}", g.group, 100 * g.mae);
      }
      std::string vtrain;
      if (field != nullptr) {
        InstallProfile(*fitted);  // vTrain's estimates take the family constants from it
        auto vt = ValidateVtrain(vtrain_path);
        vtrain = vt.ok() ? fmt::format(" | vTrain {:.1f}% median {:+.1f}%", 100 * vt->mae,
                                       100 * vt->median)
                         : " | vTrain " + vt.status().ToString();
        InstallProfile(BuiltinProfile());
      }
      fmt::print("{}={:g}: in-sample {:.1f}/{:.1f}/{:.1f}% oom {}{} | cv {:.1f}% max {:.1f}% |{}\n",
                 key, v, 100 * in->perf_mae, 100 * in->perf_p90, 100 * in->perf_max, in->oom_rows,
                 vtrain, 100 * cv->mae, 100 * cv->max, groups);
      std::fflush(stdout);
    }
    return 0;
  }
  if (std::strcmp(argv[2], "--bands") == 0) {
    // How the band is chosen: both protocols' folds once, then for each set of residuals the band
    // may be built from and each quantile of kBandQuantiles, the coverage of held-out rows under
    // either protocol (overall / mean over units) and the median band printed for the rows.
    auto runs = LoadPublishedTables(DevTables(dir));
    auto attention = LoadAttentionTable(dir + "/attention.csv");
    if (!runs.ok() || !attention.ok()) {
      fmt::print(stderr, "{}\n", (!runs.ok() ? runs.status() : attention.status()).ToString());
      return 1;
    }
    CalibrateOptions o;
    o.bands = false;
    auto by_source = CrossValidate(*runs, BuiltinProfile(), &*attention, o, CvUnit::kSource);
    auto by_stack = CrossValidate(*runs, BuiltinProfile(), &*attention, o, CvUnit::kStack);
    if (!by_source.ok() || !by_stack.ok()) {
      fmt::print(stderr, "{}\n",
                 (!by_source.ok() ? by_source.status() : by_stack.status()).ToString());
      return 1;
    }
    const CvReport worse = WorseOfFolds(*by_source, *by_stack);
    const std::pair<const char*, const CvReport*> choices[] = {
        {"source folds", &*by_source}, {"stack folds", &*by_stack}, {"worse of both", &worse}};
    fmt::print("cv error: source {:.1f}%, stack {:.1f}%\n", 100 * by_source->mae,
               100 * by_stack->mae);
    for (const auto& [name, residuals] : choices) {
      for (double q : kBandQuantiles) {
        BandCoverage(q, *residuals, &*by_source);
        BandCoverage(q, *residuals, &*by_stack);
        const BandModel band = BuildBandModel(*residuals, q);
        std::vector<double> widths;
        for (std::size_t i = 0; i < by_source->rows.size(); ++i) {
          const ValidationRow& row = by_source->rows[i];
          if (IsMemoryMetric(row.run.metric)) continue;
          widths.push_back(BandRelative(band, BandQuestionOf(row), by_source->beyond[i]));
        }
        std::sort(widths.begin(), widths.end());
        fmt::print(
            "band from {:<14} q {:.2f}: coverage source {:3.0f}% (mean {:3.0f}%), stack {:3.0f}% "
            "(mean {:3.0f}%); median band +-{:.1f}%\n",
            name, q, 100 * by_source->coverage, 100 * by_source->source_coverage,
            100 * by_stack->coverage, 100 * by_stack->source_coverage,
            widths.empty() ? 0.0 : 100 * widths[widths.size() / 2]);
      }
    }
    return 0;
  }
  if (std::strcmp(argv[2], "--validate") == 0) {
    auto runs = LoadPublishedTables(DevTables(dir));
    if (!runs.ok()) {
      fmt::print(stderr, "{}\n", runs.status().ToString());
      return 1;
    }
    SystemProfile profile = BuiltinProfile();
    if (argc > 3) {
      auto loaded = LoadProfile(argv[3]);
      if (!loaded.ok()) {
        fmt::print(stderr, "{}\n", loaded.status().ToString());
        return 1;
      }
      profile = *loaded;
    }
    auto rep = RunValidationWithProfile(*runs, profile);
    if (!rep.ok()) {
      fmt::print(stderr, "{}\n", rep.status().ToString());
      return 1;
    }
    fmt::print("{}", FormatValidationReport(*rep));
    InstallProfile(profile);  // vTrain's estimates take the family constants from it
    {
      auto vt = ValidateVtrain(dir + "/../../../shared/data/published/vtrain-single-node.csv");
      if (vt.ok()) {
        fmt::print("vTrain: {} points, mean |error| {:.1f}%, median {:+.1f}%, max {:.1f}%\n",
                   vt->points, 100 * vt->mae, 100 * vt->median, 100 * vt->max);
        // Mean signed error by TP degree and hidden size per TP shard: where the GEMM curve's
        // dependence on the shard's width shows.
        std::map<std::pair<int, int>, std::pair<double, int>> by;
        for (const VtrainPoint& p : vt->rows) {
          auto& b = by[{p.plan.tp, p.model.hidden / p.plan.tp}];
          b.first += p.estimated_s / p.measured_s - 1;
          b.second += 1;
        }
        for (const auto& [k, v] : by) {
          fmt::print("  tp {} hidden/tp {:>5}: {:>4} points, mean error {:+.1f}%\n", k.first,
                     k.second, v.second, 100 * v.first / v.second);
        }
        // ... and by TP degree and micro-batch: where launch-bound points (small micro-batches)
        // and GEMM-bound ones part.
        std::map<std::pair<int, int>, std::pair<double, int>> by_mbs;
        for (const VtrainPoint& p : vt->rows) {
          auto& b = by_mbs[{p.plan.tp, p.plan.mbs}];
          b.first += p.estimated_s / p.measured_s - 1;
          b.second += 1;
        }
        for (const auto& [k, v] : by_mbs) {
          fmt::print("  tp {} mbs {}: {:>4} points, mean error {:+.1f}%\n", k.first, k.second,
                     v.second, 100 * v.first / v.second);
        }
      }
    }
    return 0;
  }
  bool cv = !(argc > 3 && std::strcmp(argv[3], "--no-cv") == 0);
  auto runs = LoadPublishedTables(DevTables(dir));
  if (!runs.ok()) {
    fmt::print(stderr, "{}\n", runs.status().ToString());
    return 1;
  }
  auto attention = LoadAttentionTable(dir + "/attention.csv");
  if (!attention.ok()) {
    fmt::print(stderr, "{}\n", attention.status().ToString());
    return 1;
  }
  auto before = RunValidationWithProfile(*runs, BuiltinProfile());
  if (before.ok()) {
    fmt::print("before: mean |error| {:.1f}%, p90 {:.1f}%, max {:.1f}%, {} rows OOM\n",
               100 * before->perf_mae, 100 * before->perf_p90, 100 * before->perf_max,
               before->oom_rows);
  }
  CalibrateOptions opts;
  opts.name = "builtin";
  opts.bands = cv;
  CvReport report, stack_report;
  auto fitted =
      CalibrateProfile(*runs, BuiltinProfile(), &*attention, opts, &report, &stack_report);
  if (!fitted.ok()) {
    fmt::print(stderr, "{}\n", fitted.status().ToString());
    return 1;
  }
  auto after = RunValidationWithProfile(*runs, *fitted);
  if (after.ok()) {
    fmt::print("{}", FormatValidationReport(*after));
  }
  if (cv) fmt::print("{}\n{}", FormatCvReport(report), FormatCvReport(stack_report));
  std::ofstream(argv[2]) << ProfileToYaml(*fitted);
  fmt::print("wrote {}\n", argv[2]);
  return 0;
}
