// ParallelPlan (how one training job is split over GPUs) and TrainingSpec (what the job
// trains: batch, dtype, token budget, price). Plain values; ValidatePlan names the bad field.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "core/status.h"
#include "core/units.h"
#include "perf/model.h"
#include "topology/gpu.h"

namespace baton::perf {

// kSelective: Megatron's selective recomputation (core attention only, Korthikanti et al.);
// kOps: per-op selective activation checkpointing as torchtitan runs it (selective_ac_option =
// "op"): every layer is checkpointed, but the outputs of every other matmul and of the attention
// kernel are saved, so the recomputation reruns only the even matmuls and the element-wise ops.
// kMlp: the layer input and the attention projections' tensors are saved; the norms, core
// attention and the whole MLP block (its GEMMs, activation and fp8 casts) are recomputed:
// MaxText's remat_policy=custom with query / key / value / out projections kept on the device
// (dgxc's Llama 2 70B recipes), and the nearest Megatron-Core setting, --recompute-modules
// core_attn mlp.
enum class Recompute : std::uint8_t { kNone, kSelective, kFull, kOps, kMlp };

// Megatron-LM rank orders (the first name varies fastest): the default, and the one
// --use-tp-pp-dp-mapping selects.
enum class RankOrder : std::uint8_t { kTpCpEpDpPp, kTpCpEpPpDp };
std::string_view RankOrderName(RankOrder o);  // "tp-cp-ep-dp-pp"
Result<RankOrder> ParseRankOrder(std::string_view name);
std::string_view RecomputeName(Recompute r);
Result<Recompute> ParseRecompute(std::string_view name);

// One parallelisation of a job. World size = tp * cp * pp * dp; expert parallelism is carved out
// of the data-parallel ranks (ep divides dp * cp), as in Megatron-Core.
struct ParallelPlan {
  int tp = 1;
  int pp = 1;
  int dp = 1;
  int cp = 1;
  int ep = 1;
  int mbs = 1;  // micro-batch size (sequences)
  int vp = 1;   // virtual pipeline stages per GPU (interleaved 1F1B); 1 = plain 1F1B
  Recompute recompute = Recompute::kNone;
  bool sequence_parallel = false;
  // ZeRO stage: 0 none; 1 distributed optimizer (optimizer states sharded over dp x cp);
  // 2 + gradients sharded; 3 FSDP (+ parameters, gathered per micro-batch). Stages 1 and 2 are
  // timed with one reduce-scatter per step, after the last micro-batch, as Llama 3's FSDP ran;
  // DeepSpeed's ZeRO-2 reduces every micro-batch instead, which this understates.
  int zero = 0;
  // ZeRO-3 only: parameters are sharded over groups of this many dp x cp ranks and replicated
  // across the groups (HSDP; gradients all-reduced across replicas once per step). 0 = one group
  // of every dp x cp rank (plain FSDP / ZeRO-3).
  int fsdp_group = 0;
  // The stack overlaps TP all-gathers / reduce-scatters with the neighbouring GEMMs (Megatron-
  // Core's --tp-comm-overlap, PyTorch async TP), hiding Calibration::tp_overlap_fraction of them
  // (async_tp_overlap_fraction with TrainingSpec::async_tp).
  bool tp_comm_overlap = true;
  bool overlap_dp_comm = true;  // overlap DP gradient reduction with the backward pass
  // Pipeline sends and receives of one schedule step go out together, both link directions at
  // once (Megatron-LM's batched isend/irecv): two transfer times per micro-batch on the critical
  // path. false: each is its own blocking call (DeepSpeed's pipeline engine issues RecvGrad,
  // SendActivation, SendGrad, RecvActivation in turn), four transfer times per micro-batch.
  bool batched_pp_p2p = true;
  // Allows pp not dividing the layers (Megatron's uneven first/last stages, as BLOOM and
  // Llama 3 405B ran); the slowest stage then holds ceil(layers / pp) layers.
  bool uneven_pp = false;
  RankOrder order = RankOrder::kTpCpEpDpPp;

  int gpus() const { return tp * cp * pp * dp; }
  bool operator==(const ParallelPlan&) const = default;
};

// "tp8 pp16 dp64 cp1 ep1 mbs1 vp4 rc=selective sp zero1 overlap"
std::string PlanToString(const ParallelPlan& p);

// How an fp8 run scales its GEMM inputs (the recipes of data/published/runs-2024.csv):
//  kDelayed     Transformer Engine's delayed scaling in PyTorch (NeMo, Megatron-Core): the cast
//               is fused into the kernel that produces the input, fp8 weights are cached across
//               micro-batches.
//  kTensorwise  torchao float8 with dynamic per-tensor scales (torchtitan's default).
//  kRowwise     torchao float8 with per-row scales: both axes of every input are quantised, and
//               the row-scaled GEMM kernels run slower than the tensor-scaled ones.
//  kJax         fp8 in JAX (dgxc's MaxText and Paxml): a jitted function keeps no fp8 copy of a
//               weight from one call to the next, so every input and weight is quantised (and
//               transposed for the backward) per call, as kernels of their own: Flax's
//               Fp8DotGeneralOp (MaxText quantization=fp8) puts XLA quantize / dequantize ops
//               around the dot, which XLA's GEMM rewriter turns into a scaled fp8 GEMM
//               (JAX-Toolbox rosetta/docs/NATIVE_FP8.md); Transformer Engine's JAX layers
//               (Paxml with ENABLE_TE=1) cast and transpose per call. Priced as kTensorwise's
//               data flow, whatever the scales' bookkeeping (delayed, from an amax history).
enum class Fp8Recipe : std::uint8_t { kDelayed, kTensorwise, kRowwise, kJax };

// How a stack runs context-parallel attention (only read when cp > 1):
//  kRing   Megatron-Core / Transformer Engine's p2p ring: K and V at their GQA width, one hop per
//          step overlapped with the step before, partial outputs corrected in fused kernels.
//  kTorch  PyTorch's experimental context_parallel (torch.distributed.tensor.experimental.
//          _attention, torchtitan 2024-25): the same load-balanced schedule over SDPA calls, but
//          K and V repeated to every query head before SDPA (torchtitan's repeat_kv), gathered
//          with one all-gather that only the diagonal step hides (the default ALL_GATHER rotate
//          method), partial outputs merged in eager fp32 ops with full-tensor torch.cat copies,
//          and dK, dV passed round the ring in fp32.
//  kAllGather  Llama 3's (Dubey et al. 2024, section 3.3.2): K and V all-gathered once per layer
//          with the latency exposed, then one attention kernel per local query chunk against its
//          causal prefix; the backward reduce-scatters dK and dV. No ring steps, no merges.
enum class CpAttention : std::uint8_t { kRing, kTorch, kAllGather };

// How a micro-batch's weight gradients are added to the gradients of the micro-batches before it
// (TrainingSpec::grad_accum), when a step has more than one:
//  kFused     the weight-gradient GEMM accumulates into the gradient buffer in its epilogue
//             (Megatron-LM since its 2022 release with sequence parallelism, on by default:
//             --gradient-accumulation-fusion, LinearWithGradAccumulationAndAsyncCommunication
//             with Apex's fused_weight_gradient_mlp_cuda; Megatron-Core; Transformer Engine's
//             fuse_wgrad_accumulation), or FSDP, whose gradients leave after every pass: no pass
//             of its own;
//  kFp32      the GEMM writes a 16-bit gradient that a hook adds to the fp32 main_grad buffer
//             (Megatron-LM 2021's local DDP, megatron/model/distributed.py _make_param_hook:
//             param.main_grad.add_(param.grad.data)): read 2 + 4 bytes, write 4, per parameter
//             and micro-batch;
//  kAutograd  PyTorch autograd's AccumulateGrad adds it to the 16-bit .grad (torch DDP,
//             DeepSpeed's fp16 engine): read 2 + 2, write 2, per parameter from the second
//             micro-batch on (the first gradient is taken over, not added).
enum class GradAccum : std::uint8_t { kFused, kFp32, kAutograd };

// The fused attention kernel a stack runs (TrainingSpec::attention_kernel):
//  kFlash  FlashAttention-2 (Tri Dao's flash-attn): PyTorch's SDPA flash backend (torchtitan,
//          FSDP stacks) and Transformer Engine before it preferred cuDNN on Hopper (NeMo's docs
//          until May 2024: "By default, Flash Attention is enabled").
//  kCudnn  cuDNN's fused flash attention (Transformer Engine's FusedAttention, sub-backend
//          F16_arbitrary_seqlen): what Transformer Engine picks on Hopper and later whenever both
//          apply (get_attention_backend: "Disabling FlashAttention to give FusedAttention
//          preference on Hopper+ for performance reasons"; NeMo's memory_optimizations.rst since
//          NVIDIA/NeMo pull request 9188, May 2024: "Transformer Engine prefers cuDNN flash
//          attention on Hopper+ architectures"). Its rate is FlashAttention-2's times
//          Calibration::cudnn_attention_speedup.
// The others are priced from the flash-attention repository's kernel charts
// (data/published/attention-kernels.csv) as FlashAttention-2's rate at the same shape times a
// fitted ratio (Calibration::*_attention_rate, attention_kernels.h); a kernel without a chart on
// the GPU's family is refused (FlashAttention-3 runs on Hopper only):
//  kFlash1    FlashAttention (v1), 2022;
//  kFlash3    FlashAttention-3 (Hopper: warp-specialised, asynchronous WGMMA), 2024;
//  kTriton    the Triton tutorial's fused attention (OpenAI Triton);
//  kXformers  xformers' memory-efficient attention (cutlass);
//  kMath      PyTorch's unfused attention (SDPA's math backend, or the softmax(QK^T)V written out):
//             the s x s scores are materialised and kept for the backward, and a causal mask
//             saves no work.
enum class AttentionKernel : std::uint8_t {
  kFlash,
  kCudnn,
  kFlash1,
  kFlash3,
  kTriton,
  kXformers,
  kMath
};
inline constexpr int kAttentionKernelCount = 7;

struct TrainingSpec {
  int global_batch = 0;  // sequences per optimizer step
  topo::Dtype dtype = topo::Dtype::kBf16;
  double tokens_to_train = 0;       // 0 = not asked
  double dollars_per_gpu_hour = 0;  // 0 = not asked
  // FlashAttention-style fused attention: no s^2 score tensor in memory, causal blocks skipped.
  // Runs before mid-2022 (Megatron SC'21 / MLSys'23, BLOOM) did not have it.
  bool flash_attention = true;
  // Gradients held (and reduced) in fp32; false: in the 16-bit dtype, as Megatron-Core's DDP
  // does by default (grad_reduce_in_fp32 = False; NeMo 2 / Megatron-Bridge recipes).
  bool fp32_grads = true;
  // Adam's state (master weights, first and second moments) held in bf16: 6 bytes per parameter
  // instead of fp32's 12, as Apex's DistributedFusedAdam keeps it with dtype=bf16 (the NeMo
  // launcher configs of dgxc-benchmarking's Nemotron-4 340B: optim distributed_fused_adam,
  // dtype bf16, grad_sync_dtype bf16). Sharded like any optimizer state (ZeRO >= 1).
  bool bf16_optimizer_state = false;
  Fp8Recipe fp8_recipe = Fp8Recipe::kDelayed;  // only read when dtype is fp8
  // Element-wise kernels (norms, rotary embedding, SwiGLU) fused, as torch.compile, Transformer
  // Engine, Megatron's fused kernels and XLA run them; false: eager PyTorch, each op its own
  // kernel with fp32 intermediates (torchtitan without torch.compile).
  bool fused_elementwise = true;
  CpAttention cp_attention = CpAttention::kRing;
  // The plan's TP overlap (ParallelPlan::tp_comm_overlap) is PyTorch's micro-pipelined async TP
  // (torchtitan's enable_async_tensor_parallel: each GEMM split into tp chunks whose transfers run
  // on the copy engine, Calibration::async_tp_overlap_fraction) rather than Transformer Engine's
  // userbuffer overlap (Megatron-Core --tp-comm-overlap, Calibration::tp_overlap_fraction).
  bool async_tp = false;
  // TP as PyTorch's DTensor runs it (torchtitan's ColwiseParallel / RowwiseParallel with
  // SequenceParallel, each collective its own autograd op) rather than Megatron's linear layers:
  // the backward reuses the gathered input the matmuls saved (no re-gather), per-op checkpointing
  // reruns the all-gathers, and async TP hides a collective only behind the GEMM it is fused with
  // (estimator.cc). Only read with sequence parallelism.
  bool dtensor_tp = false;
  GradAccum grad_accum = GradAccum::kFused;                    // see GradAccum
  AttentionKernel attention_kernel = AttentionKernel::kFlash;  // see AttentionKernel
  // The cross-entropy over the logits as one fused kernel on the 16-bit logits (flash-attn's
  // Triton CrossEntropyLoss, which llm-foundry's loss_fn fused_crossentropy runs; Liger-Kernel's
  // LigerCrossEntropyLoss): the log-sum-exp in registers, no fp32 copy of the logits, the
  // gradient written as 16 bits. false: the unfused loss on an fp32 upcast (estimator_compute.cc,
  // kLossFwdBytes), Megatron-Core's and torchtitan's default.
  bool fused_loss = false;
  // Checkpointing: storage write bandwidth (aggregate) and mean time between job failures.
  BytesPerSecond checkpoint_bandwidth = GBps(100);
  Seconds mtbf = Hours(24);
};

// Global batch in sequences from a token count ("4M tokens" at seq 8192 -> 512 sequences);
// InvalidArgument naming `field` when it is not a positive whole number of sequences.
Result<int> GlobalBatchFromTokens(double tokens, int seq, std::string_view field);

Status ValidateTraining(const TrainingSpec& t);

// Checks the plan against the model, the training batch and the GPU count (0 = don't check).
// The error names the field: "plan.tp: 6 does not divide heads 64".
Status ValidatePlan(const ModelSpec& m, const ParallelPlan& p, const TrainingSpec& t, int gpus);

}  // namespace baton::perf
