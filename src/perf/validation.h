// Validation of the estimator against published training runs (data/published/runs.csv): loads
// the table, rebuilds each run's model / plan / system, and compares the estimate with the
// published figure. Used by validation_test.cc and `baton plan validate`.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "perf/estimator.h"

namespace baton::perf {

enum class Metric { kIterationTime, kHfuTflops, kMfu, kStateMemory, kActivationMemory };
std::string_view MetricName(Metric m);  // the CSV's names: "iteration_time_s", ...
bool IsMemoryMetric(Metric m);

struct PublishedRun {
  std::string id;
  std::string source;
  std::string confidence;
  std::string network;
  ModelSpec model;
  TrainingSpec training;
  ShortSystem system;
  ParallelPlan plan;
  bool mbs_published = true;  // false: the validation takes the fastest feasible micro-batch
  bool vp_published = true;   // false: likewise for the virtual stages
  Metric metric = Metric::kIterationTime;
  double value = 0;
  // How the source counted model FLOPs for an `mfu` figure: attention scores and values over the
  // full s x s square (false: Megatron's and PaLM's convention, this estimator's MFU) or over the
  // causal half (true: column mfu_attention = causal). See data/published/README.md.
  bool causal_attention_flops = false;
};

// Parses the table; errors name the file, line and column.
Result<std::vector<PublishedRun>> ParsePublishedRuns(std::string_view csv, std::string_view source);
Result<std::vector<PublishedRun>> LoadPublishedRuns(const std::string& path);

struct ValidationRow {
  PublishedRun run;
  ParallelPlan plan;  // with the unpublished fields filled in
  double predicted = 0;
  double error = 0;  // (predicted - published) / published
  StepEstimate estimate;
};

// Rows the model does not match and which no documented mechanism explains without a per-row
// factor (MT-NLG's DeepSpeed pipeline engine; the reason is in validation_test.cc and
// data/published/README.md). They are reported, and held to a looser bound by the test.
bool IsKnownOutlier(std::string_view run_id);

struct ValidationReport {
  std::vector<ValidationRow> rows;
  double perf_mae = 0;  // iteration time / TFLOP/s / MFU rows
  double perf_max = 0;
  int perf_rows = 0;
  double perf_mae_checked = 0;  // the same without the known outliers
  double perf_max_checked = 0;
  int perf_rows_checked = 0;
  double memory_mae = 0;
  double memory_max = 0;
};

// The short system description for a published run's hardware ("DGX-A100 8xHDR200",
// "RoCE 400G per GPU", "Omni-Path 4x100G per 8-GPU node").
Result<ShortSystem> SystemForRun(std::string_view gpu, std::string_view network, int gpus);

// `calibration` replaces the GPU family's DefaultCalibration (for calibration studies).
Result<ValidationRow> ValidateRun(const PublishedRun& run,
                                  const Calibration* calibration = nullptr);
Result<ValidationReport> RunValidation(const std::vector<PublishedRun>& runs,
                                       const Calibration* calibration = nullptr);

// The vTrain single-node measurements (1,440 GPT runs on one 8xA100 node, fp16, full
// recomputation, 1F1B): mean / median / max relative error of the estimated iteration time.
struct VtrainPoint {
  ModelSpec model;
  ParallelPlan plan;
  int micro_batches = 0;  // per pipeline per step
  double measured_s = 0;
  double estimated_s = 0;
};
struct VtrainReport {
  int points = 0;
  double mae = 0;
  double median = 0;  // signed
  double max = 0;
  std::vector<VtrainPoint> rows;  // in file order
};
Result<VtrainReport> ValidateVtrain(const std::string& path);

// The per-row table `baton plan validate` prints.
std::string FormatValidationReport(const ValidationReport& report);

}  // namespace baton::perf
