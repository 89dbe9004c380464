// The analytical performance and memory model of transformer training: for a model, a
// parallel plan, a training spec and a system it gives the step time with a breakdown, tokens/s,
// MFU/HFU and the memory per GPU. A pure, deterministic function; an infeasible plan is a value
// (StepEstimate::rejection) with a reason, never an exception. Evaluate() does not allocate; it
// runs the stages of estimator_stages.h (shape, memory, compute, model-parallel communication,
// pipeline, data parallelism, optimizer, rates) in that order.
//
// Thread safety: everything here is a pure function of its arguments.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/status.h"
#include "core/units.h"
#include "perf/model.h"
#include "perf/plan.h"
#include "perf/system.h"

namespace baton::perf {

// Why a plan cannot run, in the order the checks run.
enum class Rejection : std::uint8_t {
  kNone = 0,
  kGpuCount,          // tp * cp * pp * dp != the GPUs
  kTensorParallel,    // tp does not divide heads / kv heads / ffn
  kPipeline,          // pp does not divide layers (or leaves a stage empty)
  kVirtualStages,     // vp does not divide the stage's layers, or pp == 1, or m % pp != 0
  kContextParallel,   // cp does not divide the sequence (in 2 * cp chunks)
  kExpertParallel,    // ep does not divide experts or dp * cp
  kBatch,             // global batch not divisible by dp * mbs
  kSequenceParallel,  // sequence parallelism without tp > 1
  kZero,              // ZeRO stage outside 0..3
  kOutOfMemory,       // does not fit in HBM
  kCount,
};
inline constexpr int kRejectionCount = static_cast<int>(Rejection::kCount);
std::string_view RejectionName(Rejection r);  // "out-of-memory", "tensor-parallel", ...

// Parallel groups, in Megatron's default rank order tp-cp-ep-dp-pp.
enum class Group : std::uint8_t { kTp, kCp, kEp, kDp, kPp };
inline constexpr int kGroupCount = 5;
std::string_view GroupName(Group g);

// How one parallel group spreads over the network tiers: factor[i] members meet first at tier i
// (product = group size). Derived from the rank order by default, or from a real placement.
struct GroupSpan {
  std::array<double, kMaxTiers> factor{1, 1, 1, 1, 1, 1};
  double size() const;
  int top_tier() const;  // highest tier with factor > 1 (0 when the group has one member)
};
struct GroupSpans {
  std::array<GroupSpan, kGroupCount> groups{};
};

struct MemoryEstimate {
  Bytes weights;
  Bytes gradients;
  Bytes optimizer;
  Bytes activations;  // transformer layers of the first pipeline stage (Korthikanti's figure)
  Bytes buffers;      // logits, gathered ZeRO-3 parameters, embedding output
  Bytes capacity;     // the GPU's HBM (as the driver reports it)
  Bytes usable;       // capacity less the runtime reserve (Calibration::hbm_reserved_gib, ...)
  Bytes total() const { return weights + gradients + optimizer + activations + buffers; }
  Bytes weights_grads_optimizer() const { return weights + gradients + optimizer; }
};

struct StepEstimate {
  Rejection rejection = Rejection::kNone;
  bool feasible() const { return rejection == Rejection::kNone; }

  // The step and where it goes; the parts add up to `step`.
  Seconds step;
  Seconds compute;    // forward + backward GEMMs, attention and element-wise kernels
  Seconds recompute;  // activation recomputation
  Seconds tp_comm;    // exposed communication per group
  Seconds cp_comm;
  Seconds ep_comm;
  Seconds pp_comm;
  Seconds dp_comm;
  Seconds bubble;     // pipeline fill and drain
  Seconds optimizer;  // optimizer step (memory-bound)
  Seconds launch;     // GPUs idle while the host dispatches kernels (launch-bound layers)

  int micro_batches = 0;  // per pipeline per step
  double tokens_per_step = 0;
  double tokens_per_second = 0;
  double mfu = 0;  // model FLOPs (no recompute) / (step * GPUs * dtype peak)
  // The same counting attention over the causal half of the s x s square only (Llama 3's
  // published MFU; `mfu` counts the full square, as Megatron, PaLM and torchtitan do).
  double mfu_causal = 0;
  double hfu = 0;  // executed FLOPs counting recompute, same convention
  Flops model_flops_per_step;
  Flops hardware_flops_per_step;
  MemoryEstimate memory;
};

// Everything about (model, training, system) that does not depend on the plan, computed once.
// Holds references: the three inputs must outlive it.
struct EvalContext {
  EvalContext(const ModelSpec& model, const TrainingSpec& training, const SystemSpec& system);
  const ModelSpec& model;
  const TrainingSpec& training;
  const SystemSpec& system;
  double peak_flops;       // dtype peak, FLOP/s (MFU's denominator)
  double gemm_peak;        // what GEMMs run against: the 16-bit peak, x fp8_gemm_speedup for fp8
  double attn_peak;        // attention, in 16-bit even in fp8 recipes
  double hbm_bytes_per_s;  // effective
  std::array<double, kMaxTiers> tier_bw{};       // effective collective bandwidth, bytes/s
  std::array<double, kMaxTiers> tier_latency{};  // seconds
  std::array<int, kMaxTiers> tier_gpus{};
  int tier_count;
};

// The estimator. `spans` overrides the rank-order placement (see placement.h); `gpus` is the
// world size the plan must use exactly (0 = plan.gpus()). A plan that does not fit stops after
// the memory estimate unless `time_if_oom` (then the times are filled in too). Never allocates
// or throws.
void Evaluate(const EvalContext& ctx, const ParallelPlan& plan, int gpus, const GroupSpans* spans,
              StepEstimate* out, bool time_if_oom = false);

// Only the structural checks (divisibility, ranges) of Evaluate, without timing or memory.
Rejection CheckPlan(const EvalContext& ctx, const ParallelPlan& plan, int gpus);

// Validates the inputs (errors name the field) and runs the estimator; an infeasible plan is
// still returned as a value (`rejection` set) with its numbers filled in as far as they go.
// InvalidArgument, naming the field, when the system cannot run the training setup at all: a
// dtype the GPU has no rate for, or an attention kernel without a measured rate on its family.
Status CheckSystemRuns(const TrainingSpec& training, const SystemSpec& system);
Result<StepEstimate> Estimate(const ModelSpec& model, const ParallelPlan& plan,
                              const TrainingSpec& training, const SystemSpec& system);

// For the scheduler: step time of a plan (infinite when infeasible or invalid).
Seconds EstimateStepTime(const ModelSpec& model, const ParallelPlan& plan,
                         const TrainingSpec& training, const SystemSpec& system);

// "needs 93.1 GiB per GPU, has 80.0 (74.1 usable)" and the like; empty when feasible.
std::string ExplainRejection(const EvalContext& ctx, const ParallelPlan& plan,
                             const StepEstimate& e);

// Group spans implied by the rank order tp-cp-ep-dp-pp on consecutive GPUs (node-major).
GroupSpans RankOrderSpans(const EvalContext& ctx, const ParallelPlan& plan);

// FLOPs of one forward pass of one sequence (Megatron's convention: full s^2 attention, logits
// included), and the closed forms from Narayanan et al. for checking.
Flops ForwardFlopsPerSequence(const ModelSpec& m);
Flops MegatronModelFlops(const ModelSpec& m, double batch);  // 72 B s l h^2 (1 + s/6h + V/12lh)
Flops MegatronHardwareFlopsFullRecompute(const ModelSpec& m, double batch);  // 96 ... V/16lh

// Training totals and checkpointing.
struct TrainingTotals {
  Seconds time_to_train;
  double gpu_hours = 0;
  double cost_dollars = 0;
  Bytes checkpoint_size;        // weights + optimizer state (fp32 master, Adam m and v)
  Seconds checkpoint_write;     // at TrainingSpec::checkpoint_bandwidth
  Seconds checkpoint_interval;  // Young/Daly optimum sqrt(2 * write * MTBF)
};
TrainingTotals ComputeTotals(const ModelSpec& model, const TrainingSpec& training,
                             const StepEstimate& e, int gpus);

}  // namespace baton::perf
