// SystemSpec: the hardware a job runs on, as the performance model sees it — one GPU type and
// count, and nested network tiers (node NVLink, NVLink domain, leaf, spine, ...) each with a
// per-GPU bandwidth and per-message latency. Built from a topology or a short description.
#pragma once

#include <array>
#include <string>
#include <string_view>

#include "core/status.h"
#include "core/units.h"
#include "topology/cluster.h"
#include "topology/gpu.h"

namespace baton::perf {

// Calibrated constants of the estimator for one GPU family. Every value is documented with its
// source in system.cc (DefaultCalibration); none is fitted per validation row.
struct Calibration {
  // GEMM efficiency = peak_fraction * d / (d + half_dim) * T / (T + half_tokens), where d is the
  // per-GPU hidden size (hidden / tp) and T the tokens of one micro-batch on one GPU.
  double gemm_peak_fraction = 0.8;
  double gemm_half_dim = 100;
  double gemm_half_tokens = 256;
  // ... times W / (W + gemm_half_gflop) for W the GFLOPs of one such GEMM call (2 T d hidden):
  // a call too small to keep every SM busy for many waves runs below what its sides alone give,
  // while a call of a large model at one sequence per micro-batch (T 2048, hidden 12-25k: 77-340
  // GFLOP) does not. Set on vTrain's single-node A100 set (its calls are 0.3-70 GFLOP; the
  // published A100 rows' are 77 and up), not fitted on runs: profile.cc; 0 (off) where no set
  // says.
  double gemm_half_gflop = 0;
  // Fused (flash) attention kernels reach flash_attention_fraction of peak on their executed
  // FLOPs for long sequences, times L / (L + flash_half_length) for a query/key block of L tokens.
  double flash_attention_fraction = 0.5;
  double flash_half_length = 350;
  // ... times head_dim / (head_dim + flash_half_head_dim): small heads run less efficiently. A
  // causal kernel over L tokens runs like a full one over L / 2 (it skips the upper triangle's
  // blocks). All three are least-squares fits to FlashAttention-2's forward+backward charts
  // (data/published/attention.csv; `baton plan calibrate` refits them).
  double flash_half_head_dim = 0;
  // GEMM rate with fp8 inputs relative to bf16 at the same shape (the datasheet fp8 peak is 2x;
  // recipes keep attention, norms and some GEMMs in bf16 and pay for scaling and casts).
  double fp8_gemm_speedup = 1.0;
  // The same for torchao's rowwise-scaled recipe (Fp8Recipe::kRowwise), whose scaled-GEMM kernels
  // are slower than the tensor-scaled ones; fitted on torchtitan's rowwise rows (the async-TP
  // benchmark, data/published/runs-2024.csv), 1.25 before any fit.
  double fp8_rowwise_gemm_speedup = 1.25;
  // Fixed time per optimizer step (data loading, logging, gradient clipping, synchronisation).
  double step_overhead_s = 0;
  // ZeRO-3 / FSDP: share of one unit's (layer's) compute that hides the next unit's prefetched
  // all-gather (and, in the backward pass, the previous unit's reduce-scatter).
  double fsdp_overlap_fraction = 0.8;
  // Extra bytes per parameter an fp8 recipe keeps (Transformer Engine's fp8 weight copy).
  double fp8_weight_bytes = 1.0;
  // Fixed time per transformer layer forward pass (kernel launches, small kernels, framework
  // overhead); the backward pass costs twice this.
  double layer_overhead_s = 0;
  // Host time to dispatch one layer pass (its kernels and collectives, from the framework's
  // Python thread): forward and recomputation count one pass each, the backward two. The GPU
  // runs ahead of the host only while the host keeps up, so a micro-batch on a stage takes at
  // least stage layers x passes x this (small models, small micro-batches: vTrain's regime).
  double host_layer_pass_s = 0;
  // Fixed cost of one collective call (NCCL kernel launch and synchronisation), on top of the
  // per-hop latency of the links.
  double collective_overhead_s = 0;
  // Fraction of HBM bandwidth that element-wise kernels (norms, softmax, activations, Adam) reach.
  double hbm_efficiency = 0.7;
  // Fraction of link bandwidth NCCL collectives reach (bus bandwidth / link bandwidth).
  double nvlink_efficiency = 0.75;
  double network_efficiency = 0.85;
  // The same for a general-purpose Ethernet fabric (ShortSystem::ethernet: the IBM cloud cluster
  // of the PyTorch FSDP blog and fms-fsdp), whose collectives reach less of the line rate than
  // on InfiniBand (no adaptive routing, shared with other traffic); fitted on those rows, 0.85
  // before any fit.
  double ethernet_efficiency = 0.85;
  // Fraction of the last micro-batch's backward pass that hides DP gradient reduction.
  double dp_overlap_fraction = 0.8;
  // Fraction of TP communication hidden behind GEMMs (0 in Megatron-LM before TE comm overlap).
  // With Transformer Engine's userbuffer overlap (sequence parallelism on, neither async nor
  // DTensor TP) it is a per-chunk efficiency under a physical ceiling: each collective hides at
  // most (tp - 1) / tp (split) or all (bulk) of min(transfer, its one GEMM); estimator.cc.
  double tp_overlap_fraction = 0.0;
  // HBM a training process cannot use for tensors: a fixed reserve (CUDA context, cuBLAS and
  // NCCL workspaces) and a share lost to the caching allocator's fragmentation. A plan fits when
  // its tensors need at most (hbm - hbm_reserved_gib) * (1 - hbm_fragmentation).
  double hbm_reserved_gib = 2.0;
  double hbm_fragmentation = 0.05;
  // Tensor-core clock of a part capped below its rated board power, as (limit / rated)^this
  // (SystemSpec::power_fraction). 1/3 is the least a cap can cost (dynamic power alone, f V^2
  // with V following f); static power and the voltage floor of the DVFS curve make a GEMM-bound
  // part lose more, about clock in proportion to power: cuBLAS GEMMs on a GB300 capped at 500 of
  // its 1,400 W ran 617 TFLOP/s against 1,600-2,174 uncapped (facebookexperimental/triton pull
  // request 2023, denoise.sh), an exponent of 0.9-1.2. Fitted (bounds 0.33..1.25) on the only
  // capped rows, torchtitan's 500 W H100s (data/published/runs-2024.csv); 1 before any fit.
  double power_cap_exponent = 1.0;
  // PyTorch's micro-pipelined async TP (TrainingSpec::async_tp: torch._inductor's fused
  // all-gather-matmul and matmul-reduce-scatter over SymmetricMemory, torchtitan's
  // enable_async_tensor_parallel), apart from tp_overlap_fraction, which is Transformer Engine's
  // userbuffer overlap (Megatron-Core --tp-comm-overlap). With DTensor TP (torchtitan, every
  // published async-TP row) it is the share of min(transfer, the one GEMM the collective is fused
  // with) that hides, so a GEMM shorter than its collective bounds it (estimator.cc); otherwise
  // the share of all TP traffic. Fitted (bounds 0..1) on torchtitan's async-TP benchmark
  // (async-tp-perf-06-14-2025: +9..16 % tokens/s at Llama 3 8B and 70B, TP 8), 0.5 before any fit.
  double async_tp_overlap_fraction = 0.5;
  // Host dispatch outside the layers, once per micro-batch on a stage (the schedule's
  // bookkeeping, embedding, loss and output-layer kernels, the pipeline's send/receive calls),
  // added to the launch floor (host_layer_pass_s). Set (bounds 0..0.01 s, not fitted: no
  // published row is launch-bound) with host_layer_pass_s and host_collective_step_s on the
  // vTrain single-node set, whose iteration times regressed on micro-batches x layers leave
  // 2-3 ms per micro-batch at TP 2-8 (system.cc); 0 before any fit.
  double host_microbatch_s = 0;
  // Launch-bound tensor-parallel collectives: a TP all-reduce / all-gather / reduce-scatter is a
  // rendezvous of tp ranks that the GPUs reach only when the slowest rank's host has issued it,
  // and NCCL's ring then runs 2 (tp - 1) dependent steps before any rank goes on; in a step
  // bound by the host's dispatch neither hides. Each TP collective call adds (tp - 1) x this to
  // the launch floor. The vTrain single-node set (Megatron-DeepSpeed, no sequence parallelism,
  // 6 collectives per layer with full recomputation) costs 0.3 / 0.4 / 0.7-2.0 ms more per layer
  // at TP 2 / 4 / 8 than at TP 1 once launch-bound, growing with the group like the ring (NVIDIA
  // nccl-tests issue 123: 10 / 17 / 34 us for 2 / 4 / 8 A100s idle); set to 20 us (bounds
  // 0..0.001 s, not fitted) on that set; 0 before any fit.
  double host_collective_step_s = 0;
  // cuDNN's fused flash attention (AttentionKernel::kCudnn, Transformer Engine's FusedAttention on
  // Hopper and later) over FlashAttention-2 at the same shape: the flash_* rate above times this.
  // The FlashAttention-3 release (Shah et al. 2024, arXiv 2407.08608, figures 5-6: H100 forward
  // at head dim 64 / 128, causal and not) puts cuDNN at 1.2-1.7x FlashAttention-2 in the forward
  // pass; its backward gains less. Fitted (bounds 1..2, per GPU family) on the rows whose stack
  // ran it (data/published/runs-2024.csv column attn_kernel); 1 before any fit.
  double cudnn_attention_speedup = 1.0;
  // The kernels priced from the charts (AttentionKernel::kFlash1 ... kMath): FlashAttention-2's
  // rate at the same shape times *_rate x (head_dim / 128)^*_head_dim_exponent, x
  // *_causal_factor under a causal mask. Least squares on the log of the ratio to
  // FlashAttention-2 at matching shapes in the flash-attention repository's charts
  // (data/published/attention-kernels.csv; FitAttentionKernels, `baton plan calibrate
  // --attention-kernels`). A rate of 0: no chart of the kernel on this family, and a plan asking
  // for it is refused.
  double flash1_attention_rate = 0;
  double flash1_attention_head_dim_exponent = 0;
  double flash1_attention_causal_factor = 1;
  double flash3_attention_rate = 0;
  double flash3_attention_head_dim_exponent = 0;
  double flash3_attention_causal_factor = 1;
  double triton_attention_rate = 0;
  double triton_attention_head_dim_exponent = 0;
  double triton_attention_causal_factor = 1;
  double xformers_attention_rate = 0;
  double xformers_attention_head_dim_exponent = 0;
  double xformers_attention_causal_factor = 1;
  double math_attention_rate = 0;
  double math_attention_head_dim_exponent = 0;
  double math_attention_causal_factor = 1;
};
// The built-in profile's constants for a GPU family (src/perf/profiles/builtin.yaml, compiled in),
// or those of the profile installed with InstallProfile (profile.h); a profile without the
// family gives Hopper's (SystemProfile::Find), and the band then says so. kUnknown never gets
// here: SystemFromCluster and SystemFromShort refuse a GPU without a family.
Calibration DefaultCalibration(topo::GpuFamily family);

inline constexpr int kMaxTiers = 6;

// GPUs that share one domain of a tier, and the link between two GPUs meeting at that tier.
struct NetworkTier {
  topo::Level level = topo::Level::kNode;
  int gpus = 8;  // GPUs inside one domain of this tier (cumulative); the last tier spans all
  topo::LinkSpec link;
};

struct SystemSpec {
  std::string name;
  topo::GpuSpec gpu;
  int gpus = 0;  // GPUs available to the job (the planner's N)
  int gpus_per_node = 8;
  // Innermost first; tiers[0] is the node (NVLink). The last tier contains every GPU.
  std::array<NetworkTier, kMaxTiers> tiers{};
  int tier_count = 0;
  Calibration calib;
  // Board power limit over the rated power, for parts run below their rating (SystemFromShort:
  // power_limit_w); 1 = uncapped. The estimator clocks the tensor cores at
  // power_fraction^Calibration::power_cap_exponent of the datasheet rate; MFU still divides by
  // the datasheet peak.
  double power_fraction = 1.0;
  bool ethernet = false;  // inter-node tiers: ShortSystem::ethernet
};

// Rated board power of a catalogue GPU in watts (NVIDIA datasheets: A100 SXM 400, H100 / H800 /
// H200 SXM 700, B200 1,000, GB200 1,200 per GPU); 0 when not known.
double RatedPowerW(std::string_view gpu_name);

// The compute-network bandwidth a GPU of this catalogue name ships with in its reference system,
// Gb/s per GPU: DGX A100 one HDR InfiniBand NIC per GPU (200 Gb/s); DGX H100 / H200 and DGX B200
// one ConnectX-7 NDR NIC per GPU (400 Gb/s); GB200 NVL72 compute trays likewise 400 Gb/s per GPU
// (NVIDIA DGX user guides). What `baton plan` assumes when --nic-gbps is not given.
double DefaultNicGbps(std::string_view gpu_name);

// From a topology: GPU type from the (first) node shape, tiers from the NVLink domain and switch
// structure, bandwidth/latency from Cluster::Link. `gpus` = 0 means every GPU of the cluster.
// A GPU type declared without a family (gpu_types.NAME.family) is refused, naming that field:
// the constants are per family and another family's would be a guess.
Result<SystemSpec> SystemFromCluster(const topo::Cluster& cluster, int gpus = 0);

// The short description: GPUs per node, NVLink GB/s per direction (0 = the GPU's catalogue
// value), NIC Gb/s per GPU, nodes per leaf and oversubscription above the leaf.
struct ShortSystem {
  std::string gpu = "H100-SXM";
  int gpus = 8;
  int gpus_per_node = 8;
  // GPUs that share one NVLink domain across nodes (GB200 NVL72: 72 GPUs, 18 trays of 4); 0 or
  // gpus_per_node = each node is its own domain. A multiple of gpus_per_node, at most 1,024.
  int nvlink_domain_gpus = 0;
  double nvlink_gbytes_per_s = 0;
  double nic_gbits_per_gpu = 400;
  int nodes_per_leaf = 32;
  double oversubscription = 1.0;
  double hbm_gib = 0;  // overrides the GPU's HBM (GiB) when > 0 (the 96 GB H100 parts)
  // Overrides the GPU's HBM bandwidth (TB/s) when > 0: the 96 GB H100 SXM part has HBM2e at
  // 2.4 TB/s peak (torchtitan's benchmark notes for its Grand Teton H100s,
  // benchmarks/asyncTP_llama3_h100_2025-06_torchtitan.md; 2.41 in Ujeniya et al. 2026, arXiv
  // 2604.11391, for an H100 HBM2e 94 GiB) where the 80 GB part has HBM3 at 3.35.
  double hbm_tbps = 0;
  // Board power the GPUs run at when below their rating (torchtitan's 500 W H100s), 0 = rated.
  // A GEMM-bound part capped at P of its rated R clocks at (P / R)^e, e =
  // Calibration::power_cap_exponent (1/3, dynamic power alone, is the least the cap can cost).
  double power_limit_w = 0;
  // The inter-node tiers are a general-purpose Ethernet fabric (Calibration::ethernet_efficiency)
  // rather than InfiniBand or a dedicated RoCE training fabric.
  bool ethernet = false;
};
Result<SystemSpec> SystemFromShort(const ShortSystem& s);

}  // namespace baton::perf
