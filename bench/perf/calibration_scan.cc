// calibration_scan: the evidence behind two calibration choices in src/perf/system.cc.
//
// 1. Hopper's TP-overlap share and GEMM fraction. For each overlap share (0, 0.25, 0.5, 0.75)
//    and GEMM fraction (0.58 .. 0.72), the errors of the published H100 rows in
//    data/published/runs.csv on their published plans, and the best plan the search finds for
//    Llama 3 405B on 8,192 H100s (2,048 x 8k tokens) with its MFU counted causally. Prints every
//    point, then the best-fitting GEMM fraction for each share.
// 2. MT-NLG's micro-batch size and a comparison with Megatron-LM on the same model, cluster and
//    layout, from the published figures alone: MT-NLG's step = n x slope + intercept over the n
//    sequences per pipeline of its three rows, the micro-batch whose 1F1B bubble is that
//    intercept, and the time Megatron's per-sequence rate predicts for MT-NLG's rows.
// 3. Pipeline fixed time in Megatron-DeepSpeed (the MT-NLG question, validation_test.cc): on the
//    vTrain single-node set, for every configuration with pp > 1 measured at three or more
//    micro-batch counts, the least-squares slope (time per micro-batch) and intercept of the
//    measured and the estimated step time. 1F1B predicts intercept = (pp - 1) x slope.
//
// Usage: calibration_scan [SOURCE_DIR]   (default "."; vTrain is read from
//        SOURCE_DIR/../shared/data/published/vtrain-single-node.csv and skipped when absent)
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "perf/search.h"
#include "perf/system.h"
#include "perf/validation.h"

namespace baton::perf {
namespace {

int ScanHopper(const std::string& source_dir) {
  auto runs = LoadPublishedRuns(source_dir + "/data/published/runs.csv");
  if (!runs.ok()) {
    std::fprintf(stderr, "%s\n", runs.status().ToString().c_str());
    return 1;
  }
  std::vector<PublishedRun> hopper;
  for (const PublishedRun& r : *runs) {
    auto sys = SystemFromShort(r.system);
    if (sys.ok() && sys->gpu.family == baton::topo::GpuFamily::kHopper && !IsMemoryMetric(r.metric))
      hopper.push_back(r);
  }
  ModelSpec model = *FindModel("llama3-405b");
  TrainingSpec training;
  training.global_batch = 2048;
  training.dtype = topo::Dtype::kBf16;
  ShortSystem sh;
  sh.gpu = "H100-SXM";
  sh.gpus = 8192;
  SystemSpec base = *SystemFromShort(sh);

  std::printf("Hopper rows: %zu (", hopper.size());
  for (const PublishedRun& r : hopper) std::printf(" %s", r.id.c_str());
  std::printf(" )\n%-8s %-5s %-9s %-26s %-8s  %s\n", "overlap", "gemm", "sum|err|", "row errors",
              "causal", "best plan, llama3-405b on 8192 H100");
  struct Best {
    double sum = 1e9;
    std::string line;
  };
  std::map<double, Best> best;
  for (double overlap : {0.0, 0.25, 0.5, 0.75}) {
    for (int g100 = 58; g100 <= 72; ++g100) {
      Calibration c = DefaultCalibration(baton::topo::GpuFamily::kHopper);
      c.tp_overlap_fraction = overlap;
      c.gemm_peak_fraction = g100 / 100.0;
      auto rep = RunValidation(hopper, &c);
      if (!rep.ok()) {
        std::fprintf(stderr, "%s\n", rep.status().ToString().c_str());
        return 1;
      }
      double sum = 0;
      std::string errors;
      for (const ValidationRow& row : rep->rows) {
        sum += std::abs(row.error);
        errors += fmt::format(" {:+.1f}", 100 * row.error);
      }
      SystemSpec system = base;
      system.calib = c;
      SearchOptions options;
      options.top_k = 1;
      options.threads = 2;
      auto found = Search(model, training, system, DefaultSearchSpace(model, {8192}), options);
      if (!found.ok() || found->top.empty()) {
        std::fprintf(stderr, "search: %s\n",
                     found.ok() ? "no feasible plan" : found.status().ToString().c_str());
        return 1;
      }
      std::string line =
          fmt::format("{:<8.2f} {:<5.2f} {:<9.1f} {:<26} {:>5.1f}%    {}", overlap,
                      c.gemm_peak_fraction, 100 * sum, errors,
                      100 * found->top[0].estimate.mfu_causal, PlanToString(found->top[0].plan));
      std::printf("%s\n", line.c_str());
      if (sum < best[overlap].sum) best[overlap] = {sum, line};
    }
  }
  std::printf("\nbest GEMM fraction per overlap share:\n");
  for (const auto& [overlap, b] : best) std::printf("%s\n", b.line.c_str());
  return 0;
}

struct Fit {
  double slope = 0, intercept = 0;
};
Fit LeastSquares(const std::vector<std::pair<double, double>>& xy) {
  double n = xy.size(), sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (auto [x, y] : xy) {
    sx += x;
    sy += y;
    sxx += x * x;
    sxy += x * y;
  }
  Fit f;
  f.slope = (n * sxy - sx * sy) / (n * sxx - sx * sx);
  f.intercept = (sy - f.slope * sx) / n;
  return f;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

int ScanVtrainPipeline(const std::string& source_dir) {
  std::string path = source_dir + "/../shared/data/published/vtrain-single-node.csv";
  if (!std::filesystem::exists(path)) {
    std::printf("\nvTrain: %s not present, skipped\n", path.c_str());
    return 0;
  }
  auto rep = ValidateVtrain(path);
  if (!rep.ok()) {
    std::fprintf(stderr, "%s\n", rep.status().ToString().c_str());
    return 1;
  }
  using Key = std::tuple<int, int, int, int, int, int, int>;
  std::map<Key, std::vector<const VtrainPoint*>> groups;
  for (const VtrainPoint& p : rep->rows) {
    if (p.plan.pp < 2) continue;
    groups[{p.plan.pp, p.plan.tp, p.plan.dp, p.plan.mbs, p.model.hidden, p.model.layers,
            p.model.seq}]
        .push_back(&p);
  }
  std::map<int, std::vector<double>> measured_ratio, estimated_ratio, slope_ratio;
  std::map<int, int> configs, at_or_below;
  for (const auto& [key, points] : groups) {
    if (points.size() < 3) continue;
    std::vector<std::pair<double, double>> measured, estimated;
    for (const VtrainPoint* p : points) {
      measured.emplace_back(p->micro_batches, p->measured_s);
      estimated.emplace_back(p->micro_batches, p->estimated_s);
    }
    Fit m = LeastSquares(measured), e = LeastSquares(estimated);
    int pp = std::get<0>(key);
    ++configs[pp];
    measured_ratio[pp].push_back(m.intercept / ((pp - 1) * m.slope));
    estimated_ratio[pp].push_back(e.intercept / ((pp - 1) * e.slope));
    slope_ratio[pp].push_back(m.slope / e.slope);
    if (m.intercept <= (pp - 1) * m.slope) ++at_or_below[pp];
  }
  std::printf(
      "\nvTrain pipeline fits (Megatron-DeepSpeed, 1F1B): intercept / ((pp-1) x slope), medians\n"
      "%-4s %-8s %-10s %-10s %-22s %s\n",
      "pp", "configs", "measured", "estimated", "measured at/below 1F1B", "slope measured/est");
  for (const auto& [pp, n] : configs) {
    std::printf("%-4d %-8d %-10.2f %-10.2f %-22s %.2f\n", pp, n, Median(measured_ratio[pp]),
                Median(estimated_ratio[pp]), fmt::format("{} of {}", at_or_below[pp], n).c_str(),
                Median(slope_ratio[pp]));
  }
  return 0;
}

// MT-NLG (Smith et al. 2022) against Megatron-LM on the same 530B model, cluster and layout
// (Narayanan Table 2, nar-t2-530b-2240: tp8 pp35 dp8, mbs 1), from the published figures alone.
int CompareMtNlg(const std::string& source_dir) {
  auto runs = LoadPublishedRuns(source_dir + "/data/published/runs.csv");
  if (!runs.ok()) {
    std::fprintf(stderr, "%s\n", runs.status().ToString().c_str());
    return 1;
  }
  std::vector<std::pair<double, double>> mtnlg;      // (sequences per pipeline, step s)
  std::vector<std::pair<double, double>> estimated;  // the same, as the estimator times them
  const PublishedRun* megatron = nullptr;
  int pp = 0, mbs = 0;
  for (const PublishedRun& r : *runs) {
    if (r.id.rfind("mtnlg-", 0) == 0 && r.metric == Metric::kIterationTime) {
      double n = double(r.training.global_batch) / r.plan.dp;
      mtnlg.emplace_back(n, r.value);
      auto row = ValidateRun(r);
      if (!row.ok()) {
        std::fprintf(stderr, "%s\n", row.status().ToString().c_str());
        return 1;
      }
      estimated.emplace_back(n, row->predicted);
      pp = r.plan.pp;
      mbs = r.plan.mbs;
    }
    if (r.id == "nar-t2-530b-2240") megatron = &r;
  }
  if (mtnlg.size() < 2 || megatron == nullptr) {
    std::printf("\nMT-NLG comparison: rows not found, skipped\n");
    return 0;
  }
  // 1F1B over n sequences in micro-batches of b: (n / b + pp - 1) x b x (time per sequence), so
  // the intercept is (pp - 1) x b x slope plus a per-step rest (all-reduce, optimizer: < 0.5 s).
  // DeepSpeed's TrainSchedule times as 1F1B (its blocking send / receive pairs meet at the start
  // of each half-step, where 1F1B's data dependencies already wait).
  Fit f = LeastSquares(mtnlg);
  std::printf(
      "\nMT-NLG rows (%zu): step = n x %.3f s + %.1f s over n sequences per pipeline; the 1F1B "
      "bubble (pp-1) x mbs x %.3f s equals the intercept at mbs %.2f\n",
      mtnlg.size(), f.slope, f.intercept, f.slope, f.intercept / ((pp - 1) * f.slope));
  for (int b : {1, 2}) {
    std::printf("  at mbs %d: bubble %.1f s, %.1f s of the intercept left%s\n", b,
                (pp - 1) * b * f.slope, f.intercept - (pp - 1) * b * f.slope,
                b == mbs ? "  (runs.csv)" : "");
  }
  Fit e = LeastSquares(estimated);
  std::printf("the estimator on the table's plans (mbs %d): step = n x %.3f s + %.1f s\n", mbs,
              e.slope, e.intercept);
  // Megatron's step time from its reported TFLOP/s (Megatron's full-recompute formula).
  const int gpus = megatron->plan.gpus();
  const double flops =
      MegatronHardwareFlopsFullRecompute(megatron->model, megatron->training.global_batch).value();
  const double megatron_step = flops / (megatron->value * 1e12 * gpus);
  const double m_megatron =
      double(megatron->training.global_batch) / (megatron->plan.dp * megatron->plan.mbs);
  std::printf("%s: %.0f TFLOP/s on %d GPUs = %.2f s per step over %.0f micro-batches\n",
              megatron->id.c_str(), megatron->value, gpus, megatron_step, m_megatron);
  // Give Megatron's whole step to its pipeline (the largest per-sequence time it allows), with
  // and without interleaving, and time MT-NLG's rows with it at their micro-batch size.
  for (int v : {1, 3}) {
    double t = megatron_step / (m_megatron + double(pp - 1) / v) / megatron->plan.mbs;
    for (auto [n, step] : mtnlg) {
      double predicted = (n / mbs + pp - 1) * mbs * t;
      std::printf(
          "  Megatron vp%d: %.4f s per sequence -> MT-NLG n=%.0f at mbs %d: %.1f s predicted, "
          "%.1f s measured, %.1f s (%.0f %%) unexplained\n",
          v, t, n, mbs, predicted, step, step - predicted, 100 * (step - predicted) / step);
    }
  }
  return 0;
}

}  // namespace
}  // namespace baton::perf

int main(int argc, char** argv) {
  std::string source_dir = argc > 1 ? argv[1] : ".";
  int rc = baton::perf::ScanHopper(source_dir);
  if (rc == 0) rc = baton::perf::CompareMtNlg(source_dir);
  if (rc == 0) rc = baton::perf::ScanVtrainPipeline(source_dir);
  return rc;
}
