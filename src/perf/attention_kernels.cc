#include "perf/attention_kernels.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <utility>

#include "core/bounded_input.h"
#include "core/strings.h"
#include "perf/validation.h"
#include "topology/gpu.h"

namespace baton::perf {

namespace {

constexpr std::array<std::string_view, kAttentionKernelCount> kNames = {
    "flash", "cudnn", "flash1", "flash3", "triton", "xformers", "math"};

// The chart-fitted constants of a kernel (nullptr for kFlash and kCudnn).
struct ChartFields {
  double Calibration::*rate;
  double Calibration::*head_dim_exponent;
  double Calibration::*causal_factor;
};
const ChartFields* ChartFieldsOf(AttentionKernel k) {
  static constexpr std::array<ChartFields, 5> kFields = {{
      {&Calibration::flash1_attention_rate, &Calibration::flash1_attention_head_dim_exponent,
       &Calibration::flash1_attention_causal_factor},
      {&Calibration::flash3_attention_rate, &Calibration::flash3_attention_head_dim_exponent,
       &Calibration::flash3_attention_causal_factor},
      {&Calibration::triton_attention_rate, &Calibration::triton_attention_head_dim_exponent,
       &Calibration::triton_attention_causal_factor},
      {&Calibration::xformers_attention_rate, &Calibration::xformers_attention_head_dim_exponent,
       &Calibration::xformers_attention_causal_factor},
      {&Calibration::math_attention_rate, &Calibration::math_attention_head_dim_exponent,
       &Calibration::math_attention_causal_factor},
  }};
  const int i = static_cast<int>(k) - static_cast<int>(AttentionKernel::kFlash1);
  return i >= 0 && i < static_cast<int>(kFields.size()) ? &kFields[i] : nullptr;
}

// The charts' legend for a kernel (the flash-attention repository's benchmark figures).
std::optional<AttentionKernel> KernelFromLegend(std::string_view legend) {
  // Longest names first: "FlashAttention Triton" is Triton's, not FlashAttention (v1).
  static constexpr std::array<std::pair<std::string_view, AttentionKernel>, 9> kLegends = {{
      {"FlashAttention Triton", AttentionKernel::kTriton},
      {"FlashAttention-2", AttentionKernel::kFlash},
      {"FlashAttention-3", AttentionKernel::kFlash3},
      {"FlashAttention (v1)", AttentionKernel::kFlash1},
      {"Triton", AttentionKernel::kTriton},
      {"xformers", AttentionKernel::kXformers},
      {"cuDNN", AttentionKernel::kCudnn},
      {"PyTorch (standard attention)", AttentionKernel::kMath},
      {"Standard attention", AttentionKernel::kMath},
  }};
  for (const auto& [prefix, kernel] : kLegends) {
    if (legend.starts_with(prefix)) return kernel;
  }
  return std::nullopt;
}

// The catalogue GPU a chart's GPU name ("A100 80GB SXM4") is: the name as it is, else its first
// word ("A100").
Result<const topo::GpuSpec*> ChartGpu(std::string_view name) {
  Result<const topo::GpuSpec*> g = topo::FindGpu(name);
  if (g.ok()) return g;
  return topo::FindGpu(name.substr(0, name.find(' ')));
}

// Solves the n x n system a x = b (n <= 3) by Gaussian elimination with partial pivoting; false
// when singular.
template <std::size_t N>
bool Solve(std::array<std::array<double, N>, N> a, std::array<double, N> b, int n,
           std::array<double, N>* x) {
  for (int c = 0; c < n; ++c) {
    int piv = c;
    for (int r = c + 1; r < n; ++r) {
      if (std::abs(a[r][c]) > std::abs(a[piv][c])) piv = r;
    }
    if (std::abs(a[piv][c]) < 1e-12) return false;
    std::swap(a[c], a[piv]);
    std::swap(b[c], b[piv]);
    for (int r = c + 1; r < n; ++r) {
      const double f = a[r][c] / a[c][c];
      for (int k = c; k < n; ++k) a[r][k] -= f * a[c][k];
      b[r] -= f * b[c];
    }
  }
  for (int c = n - 1; c >= 0; --c) {
    double s = b[c];
    for (int k = c + 1; k < n; ++k) s -= a[c][k] * (*x)[k];
    (*x)[c] = s / a[c][c];
  }
  return true;
}

}  // namespace

std::string_view AttentionKernelName(AttentionKernel k) { return kNames[static_cast<int>(k)]; }

double AttentionKernelSpeedup(const Calibration& c, AttentionKernel k, double head_dim,
                              bool causal) {
  if (k == AttentionKernel::kFlash) return 1.0;
  if (k == AttentionKernel::kCudnn) return c.cudnn_attention_speedup;
  const ChartFields* f = ChartFieldsOf(k);
  if (f == nullptr || !(c.*(f->rate) > 0)) return 0.0;
  return c.*(f->rate) * std::pow(head_dim / 128.0, c.*(f->head_dim_exponent)) *
         (causal ? c.*(f->causal_factor) : 1.0);
}

Status CheckAttentionKernel(const Calibration& c, AttentionKernel k, std::string_view family,
                            std::string_view gpu) {
  if (AttentionKernelSpeedup(c, k, 128, false) > 0) return Status::Ok();
  return InvalidArgumentError(
      fmt::format("training.attn_kernel: {} has no measured rate on {} GPUs ({}): the kernel "
                  "charts it is priced from (attention-kernels.csv) have none{}",
                  AttentionKernelName(k), family, gpu,
                  k == AttentionKernel::kFlash3 ? "; FlashAttention-3 runs on Hopper only" : ""));
}

Result<std::vector<AttentionKernelPoint>> LoadAttentionKernelTable(const std::string& path) {
  std::vector<AttentionKernelPoint> out;
  auto bad = [&](int no, std::string_view column, std::string_view why) {
    return InvalidArgumentError(fmt::format("{}:{}: {}: {}", path, no, column, why));
  };
  auto parse_line = [&](int no, std::string_view line) -> Status {
    if (no == 1 || Trim(line).empty()) return Status::Ok();  // the header
    ASSIGN_OR_RETURN(std::vector<std::string> c, SplitCsvLine(line));
    if (c.size() != 9) {
      return InvalidArgumentError(
          fmt::format("{}:{}: expected 9 columns, got {}", path, no, c.size()));
    }
    AttentionKernelPoint p;
    p.line = no;
    p.gpu = std::string(Trim(c[1]));
    if (!ChartGpu(p.gpu).ok())
      return bad(no, "gpu", fmt::format("'{}' is not in the catalogue", Printable(p.gpu)));
    std::optional<AttentionKernel> k = KernelFromLegend(Trim(c[2]));
    if (!k) return bad(no, "kernel", fmt::format("unknown kernel '{}'", Printable(c[2])));
    p.kernel = *k;
    std::optional<std::int64_t> hd = ParseInt64(Trim(c[3]));
    if (!hd || *hd < 16 || *hd > 1024) return bad(no, "head_dim", "not a whole number in 16..1024");
    p.head_dim = static_cast<int>(*hd);
    if (Trim(c[4]) != "true" && Trim(c[4]) != "false") return bad(no, "causal", "not true/false");
    p.causal = Trim(c[4]) == "true";
    std::optional<std::int64_t> seq = ParseInt64(Trim(c[5]));
    if (!seq || *seq < 1 || *seq > (1 << 24))
      return bad(no, "seq", "not a whole number in 1..2^24");
    p.seq = static_cast<int>(*seq);
    if (Trim(c[7]) != "fwd" && Trim(c[7]) != "fwd+bwd") {
      return bad(no, "direction", "not fwd or fwd+bwd");
    }
    p.forward_only = Trim(c[7]) == "fwd";
    std::optional<double> tf = ParseDouble(Trim(c[8]));
    if (!tf || !(*tf > 0) || *tf > 1e5) return bad(no, "tflops", "not a number in (0, 1e5]");
    p.tflops = *tf;
    out.push_back(std::move(p));
    return Status::Ok();
  };
  RETURN_IF_ERROR(ForEachFileLine(path, "attention kernel table", kPerfCsvLimits, parse_line));
  return out;
}

Result<std::vector<AttentionKernelFit>> FitAttentionKernels(
    const std::vector<AttentionKernelPoint>& points, SystemProfile* profile) {
  // FlashAttention-2's throughput at each shape; the gpu as the table names it, so that two
  // GPUs of one family are never compared with each other.
  using Shape = std::tuple<std::string, int, bool, int, bool>;
  std::map<Shape, double> flash2;
  for (const AttentionKernelPoint& p : points) {
    if (p.kernel == AttentionKernel::kFlash) {
      flash2[{p.gpu, p.head_dim, p.causal, p.seq, p.forward_only}] = p.tflops;
    }
  }
  struct Ratio {
    double log_head_dim, causal, log_ratio;
  };
  // (family, kernel) -> forward+backward ratios, forward-only ratios.
  std::map<std::pair<std::string, AttentionKernel>, std::array<std::vector<Ratio>, 2>> ratios;
  for (const AttentionKernelPoint& p : points) {
    if (p.kernel == AttentionKernel::kFlash) continue;
    auto base = flash2.find({p.gpu, p.head_dim, p.causal, p.seq, p.forward_only});
    if (base == flash2.end()) continue;
    const std::string family(topo::GpuFamilyName((*ChartGpu(p.gpu))->family));
    ratios[{family, p.kernel}][p.forward_only ? 1 : 0].push_back(
        {std::log(p.head_dim / 128.0), p.causal ? 1.0 : 0.0, std::log(p.tflops / base->second)});
  }
  std::vector<AttentionKernelFit> fits;
  for (const auto& [key, by_direction] : ratios) {
    FamilyProfile* fam = profile->FindMutable(key.first);
    if (fam == nullptr) continue;
    AttentionKernelFit fit;
    fit.family = key.first;
    fit.kernel = key.second;
    fit.forward_only = by_direction[0].empty();
    const std::vector<Ratio>& r = by_direction[fit.forward_only ? 1 : 0];
    fit.points = static_cast<int>(r.size());
    // Columns: intercept, then log(head_dim / 128) and the mask where the points vary in them.
    bool vary_hd = false, vary_causal = false;
    for (const Ratio& x : r) {
      vary_hd |= x.log_head_dim != r.front().log_head_dim;
      vary_causal |= x.causal != r.front().causal;
    }
    auto row = [&](const Ratio& x) {
      std::array<double, 3> v{1, 0, 0};
      int n = 1;
      if (vary_hd) v[n++] = x.log_head_dim;
      if (vary_causal) v[n++] = x.causal;
      return v;
    };
    const int n = 1 + (vary_hd ? 1 : 0) + (vary_causal ? 1 : 0);
    std::array<std::array<double, 3>, 3> ata{};
    std::array<double, 3> atb{};
    for (const Ratio& x : r) {
      const std::array<double, 3> v = row(x);
      for (int i = 0; i < n; ++i) {
        for (int j = 0; j < n; ++j) ata[i][j] += v[i] * v[j];
        atb[i] += v[i] * x.log_ratio;
      }
    }
    std::array<double, 3> beta{};
    if (!Solve(ata, atb, n, &beta)) continue;
    int col = 1;
    fit.rate = std::exp(beta[0]);
    if (vary_hd) fit.head_dim_exponent = beta[col++];
    if (vary_causal) fit.causal_factor = std::exp(beta[col++]);
    double sq = 0;
    for (const Ratio& x : r) {
      const std::array<double, 3> v = row(x);
      double pred = 0;
      for (int i = 0; i < n; ++i) pred += beta[i] * v[i];
      sq += (pred - x.log_ratio) * (pred - x.log_ratio);
      fit.max_abs_error = std::max(fit.max_abs_error, std::abs(std::exp(pred - x.log_ratio) - 1));
    }
    fit.rms_log_error = std::sqrt(sq / r.size());
    // Within the profile's bounds (profile.cc), so that the profile written reads back.
    fit.rate = std::min(fit.rate, 4.0);
    fit.head_dim_exponent = std::clamp(fit.head_dim_exponent, -2.0, 2.0);
    fit.causal_factor = std::clamp(fit.causal_factor, 0.25, 4.0);
    if (const ChartFields* f = ChartFieldsOf(fit.kernel)) {
      fam->calib.*(f->rate) = fit.rate;
      fam->calib.*(f->head_dim_exponent) = fit.head_dim_exponent;
      fam->calib.*(f->causal_factor) = fit.causal_factor;
      fit.written = true;
    }
    fits.push_back(std::move(fit));
  }
  if (fits.empty()) {
    return NotFoundError(
        "attention kernels: no kernel point matches a FlashAttention-2 point of "
        "the same GPU and shape on a family of the profile");
  }
  return fits;
}

std::string FormatAttentionKernelFits(const std::vector<AttentionKernelFit>& fits,
                                      const SystemProfile& profile) {
  std::string out =
      fmt::format("{:<10} {:<9} {:>6} {:<8} {:>6} {:>8} {:>7} {:>8} {:>8}\n", "family", "kernel",
                  "points", "charts", "rate", "hd exp", "causal", "rms err", "max err");
  for (const AttentionKernelFit& f : fits) {
    out +=
        fmt::format("{:<10} {:<9} {:>6} {:<8} {:>6.3f} {:>+8.3f} {:>7.3f} {:>7.1f}% {:>7.1f}%",
                    f.family, AttentionKernelName(f.kernel), f.points,
                    f.forward_only ? "fwd" : "fwd+bwd", f.rate, f.head_dim_exponent,
                    f.causal_factor, 100 * (std::exp(f.rms_log_error) - 1), 100 * f.max_abs_error);
    if (!f.written) {
      const FamilyProfile* fam = profile.Find(f.family);
      out += fmt::format("  (not written: the runs fit {:.3f})",
                         fam != nullptr ? fam->calib.cudnn_attention_speedup : 0.0);
    }
    out += "\n";
  }
  return out;
}

}  // namespace baton::perf
