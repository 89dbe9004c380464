// Validation of the estimator against published training runs (data/published/runs.csv): loads
// the table, rebuilds each run's model / plan / system, and compares the estimate with the
// published figure. Used by validation_test.cc and `baton plan validate`.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/bounded_input.h"
#include "core/status.h"
#include "perf/estimator.h"
#include "perf/profile.h"

namespace baton::perf {

enum class Metric {
  kIterationTime,
  kHfuTflops,
  kMfu,
  kStateMemory,
  kActivationMemory,
  kTokensPerGpu,  // tokens_per_s_per_gpu
  kTokensTotal,   // tokens_per_s_total
  kModelTflops,   // tflops_per_gpu: model FLOPs (the row's `flops` convention) per GPU
  kHfu,           // hfu: as mfu, counting recomputation
};

// How a source counted model FLOPs (the `flops` column; data/published/README.md):
//  full      Megatron / PaLM: every GEMM, attention over the full s x s square (this estimator's)
//  causal    the same with attention over the causal half (Llama 3, Megatron-Bridge >= 25.09)
//  6n        6 x parameters but the token embedding + 12 L h s per token (torchtitan)
//  6n-total  6 x every parameter + 12 L h s per token (torchtitan at 1ea476e9f, IBM fms-fsdp)
//  full-mha  `full` with the K and V projections counted at full width, as if every head had its
//            own K and V (NVIDIA dgxc v25.01's Nemotron-4 MFU: its printed MFU over its step time
//            implies 1.129 x / 1.172 x the GQA count for 15B / 340B, exactly what
//            NeMo's formula gives with query_groups = heads; data/published/README.md)
//  packed    6 x parameters but the token embedding per token, no attention term: NeMo 24.07's
//            SFT table (SQuAD samples packed to 4,096 tokens, attention within each ~200-token
//            sample); each of its three runs' printed TFLOP/s over its printed tokens/s is
//            this count to within 0.5 %, where `full` is 8-16 % above it
enum class FlopConvention { kFull, kCausal, kSixN, kSixNTotal, kFullMha, kPacked };
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
  FlopConvention flops = FlopConvention::kFull;
  bool mfu_peak_bf16 = false;       // MFU against the bf16 peak even for fp8 runs (torchtitan)
  bool recompute_published = true;  // false: the validation takes the fastest that fits
  std::string group;                // the source family, for cross-validation
  // The software stack the run trained on ("megatron-core", "torchtitan", "jax", ...; column
  // `stack`, blank: the group), for leave-one-stack-out cross-validation: rows of one stack share
  // its kernels and schedules whichever source published them.
  std::string stack;
  std::string assumptions;  // what was assumed for the fields the source leaves blank
};

// The limits every CSV the planner reads is held to, row by row while reading (ForEachFileLine):
// the longest row of the published tables is 1.7 KB (fsdp-scaling.csv), the most rows 1,441
// (vtrain-single-node.csv); a line or a table past these is refused naming file and line.
inline constexpr LineLimits kPerfCsvLimits{.max_line_bytes = std::size_t{16} << 10,
                                           .max_lines = 100'000};

// Parses the table; errors name the file, line and column. Tables may carry the optional
// columns group, stack, ffn_kind, hbm_gib, fsdp_group, flops, mfu_peak, tp_overlap, tp_impl and
// assumptions (data/published/README.md); a table without `group` takes the first word of `source`.
Result<std::vector<PublishedRun>> ParsePublishedRuns(std::string_view csv, std::string_view source);
Result<std::vector<PublishedRun>> LoadPublishedRuns(const std::string& path);

struct ValidationRow {
  PublishedRun run;
  ParallelPlan plan;  // with the unpublished fields filled in
  double predicted = 0;
  double error = 0;  // (predicted - published) / published
  StepEstimate estimate;
};

// Per source family.
struct GroupError {
  std::string group;
  int rows = 0;
  double mae = 0;
  double max = 0;
};

// Signed (bias) and absolute error of the performance rows that share one property of the run:
// a convention or mechanism the model gets wrong shows as a bias in one bucket.
struct BucketError {
  std::string dimension;  // "source", "parallelism", "sequence", "gpu", "dtype", "long-context"
  std::string bucket;     // "fsdp", "8k-32k", "hopper", ...
  int rows = 0;
  double bias = 0;  // mean of (predicted - published) / published
  double mae = 0;
  double max = 0;
};
// "fsdp" (ZeRO-3), "cp" (context parallel), "3d" (tp or pp > 1) or "dp".
std::string_view ParallelismKind(const ParallelPlan& plan);
// "<=8k", "8k-32k", "32k-128k", ">128k".
std::string_view SequenceBucket(int seq);
// The long-context rows of the acceptance: NeMo's long-sequence table and torchtitan's CP runs.
bool IsLongContextRun(const PublishedRun& run);
// Every dimension's buckets, in a fixed order, over the performance rows.
std::vector<BucketError> ErrorBreakdown(const std::vector<ValidationRow>& rows);
std::string FormatBreakdown(const std::vector<BucketError>& buckets);

struct ValidationReport {
  std::vector<ValidationRow> rows;
  std::vector<BucketError> breakdown;  // ErrorBreakdown(rows)
  std::vector<GroupError> groups;      // performance rows, by group, in first-seen order
  double perf_p90 = 0;
  int oom_rows = 0;     // rows that ran but the memory model calls out of memory
  double perf_mae = 0;  // iteration time / TFLOP/s / MFU rows
  double perf_max = 0;
  int perf_rows = 0;
  double memory_mae = 0;
  double memory_max = 0;
};

// Loads every table named (comma-separated paths); ids must be unique across them.
Result<std::vector<PublishedRun>> LoadPublishedTables(std::string_view paths);
// data/published: $BATON_DATA_DIR, else $BATON_SOURCE_DIR/data/published, else the source
// tree's folder compiled into the binary, else ./data/published.
std::string DefaultDataDir();
// The dev tables: runs.csv and runs-2024.csv in `dir`.
std::string DevTables(const std::string& dir);

// The short system description for a published run's hardware ("DGX-A100 8xHDR200",
// "RoCE 400G per GPU", "Omni-Path 4x100G per 8-GPU node").
Result<ShortSystem> SystemForRun(std::string_view gpu, std::string_view network, int gpus);

// `calibration` replaces the GPU family's DefaultCalibration (for calibration studies);
// `profile` supplies the constants per family instead.
Result<ValidationRow> ValidateRun(const PublishedRun& run,
                                  const Calibration* calibration = nullptr);
Result<ValidationRow> ValidateRunWithProfile(const PublishedRun& run, const SystemProfile& profile);

// The least memory per GPU any plan the row allows needs (its unpublished micro-batch size,
// interleaving and recomputation tried), and the GPU's HBM, under `calibration`. The row ran, so
// at least that much fitted. FailedPrecondition when no plan the row allows is valid.
struct MemoryNeed {
  Bytes need;
  Bytes capacity;
};
Result<MemoryNeed> LeastMemoryNeed(const PublishedRun& run, const Calibration& calibration);
Result<ValidationReport> RunValidation(const std::vector<PublishedRun>& runs,
                                       const Calibration* calibration = nullptr);
Result<ValidationReport> RunValidationWithProfile(const std::vector<PublishedRun>& runs,
                                                  const SystemProfile& profile);
// Fills groups, p90 and the known-outlier figures of a report from its rows.
void Summarise(ValidationReport* rep);
std::string_view GpuFamilyOf(const PublishedRun& run);  // "ampere", "hopper", ...

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

// The per-row table `baton plan validate` prints (with the per-group summary).
std::string FormatValidationReport(const ValidationReport& report);

}  // namespace baton::perf
