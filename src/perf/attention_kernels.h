#pragma once
// Attention by implementation: the kernels' names, their rate relative to FlashAttention-2 (whose
// rate the flash_* constants of Calibration price, system.h), and the fit of those ratios to the
// flash-attention repository's kernel charts (data/published/attention-kernels.csv).

#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "perf/plan.h"
#include "perf/profile.h"
#include "perf/system.h"

namespace baton::perf {

// "flash", "cudnn", "flash1", "flash3", "triton", "xformers", "math": the words of the
// attn_kernel stack setting (stack.cc), in AttentionKernel's order.
std::string_view AttentionKernelName(AttentionKernel k);

// The kernel's rate over FlashAttention-2's at the same shape on the calibration's GPU family,
// for heads of `head_dim` with a causal mask or without: 1 for kFlash, cudnn_attention_speedup
// for kCudnn, the chart fit (Calibration::*_attention_*) for the others. 0: the family has no
// chart of the kernel (CheckAttentionKernel refuses it).
double AttentionKernelSpeedup(const Calibration& c, AttentionKernel k, double head_dim,
                              bool causal);

// InvalidArgument naming training.attn_kernel when `k` has no rate on the calibration's family
// (`family` and `gpu` name them in the message).
Status CheckAttentionKernel(const Calibration& c, AttentionKernel k, std::string_view family,
                            std::string_view gpu);

// One throughput of the charts table.
struct AttentionKernelPoint {
  int line = 0;
  std::string gpu;  // as the table names it ("A100 80GB SXM4")
  AttentionKernel kernel = AttentionKernel::kFlash;
  int head_dim = 0;
  bool causal = false;
  int seq = 0;
  bool forward_only = false;  // direction "fwd"; else "fwd+bwd"
  double tflops = 0;          // as the charts count FLOPs (the same for every kernel)
};

// Reads the charts table: a header, then rows of source, gpu, kernel, head_dim, causal (true /
// false), seq, batch, direction (fwd / fwd+bwd), tflops, RFC 4180 quoting. A kernel is named as
// the charts' legends name it ("FlashAttention-2 [fp16/bf16]", "FlashAttention (v1) ...",
// "FlashAttention-3 ...", "Triton ...", "FlashAttention Triton ...", "xformers ...", "cuDNN ...",
// "PyTorch (standard attention) ...", "Standard attention ..."). Bounded while read
// (kPerfCsvLimits); errors name path:line and the column.
Result<std::vector<AttentionKernelPoint>> LoadAttentionKernelTable(const std::string& path);

// The fit of one kernel on one family (FitAttentionKernels).
struct AttentionKernelFit {
  std::string family;
  AttentionKernel kernel = AttentionKernel::kFlash;
  int points = 0;             // points matched to a FlashAttention-2 point of the same shape
  bool forward_only = false;  // fitted on forward-pass points (the family has no fwd+bwd chart)
  double rate = 0;            // at head_dim 128, no mask
  double head_dim_exponent = 0;
  double causal_factor = 1;
  double rms_log_error = 0;  // of the fitted ratio, over the points
  double max_abs_error = 0;  // largest |fitted / measured - 1|
  bool written = false;      // set into the profile (cuDNN's is fitted on runs instead)
};

// For every GPU family of the table that `profile` has and every kernel other than
// FlashAttention-2 with points on it: least squares on log(rate / FlashAttention-2's rate) at
// matching (gpu, head_dim, causal, seq, direction) against log(head_dim / 128) and the mask,
// using the forward+backward points where the family has any for the kernel (what training
// runs), else the forward ones. Sets the family's *_attention_* constants (not cuDNN's: its
// speedup is fitted on runs, and reported here for comparison). A family's kernels without
// points keep rate 0 (refused). NotFound when no kernel could be fitted.
Result<std::vector<AttentionKernelFit>> FitAttentionKernels(
    const std::vector<AttentionKernelPoint>& points, SystemProfile* profile);

// A table of the fits: family, kernel, points, direction, rate at head_dim 128, the head_dim
// exponent, the causal factor, RMS and worst error; cuDNN's chart fit beside the runs-fitted
// speedup `profile` holds.
std::string FormatAttentionKernelFits(const std::vector<AttentionKernelFit>& fits,
                                      const SystemProfile& profile);

}  // namespace baton::perf
