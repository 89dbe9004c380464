#include "topology/gpu.h"

#include <array>

#include "core/strings.h"

namespace baton::topo {
namespace {

// Dense (non-sparse) datasheet peaks. A100: 19.5 TF fp32, 156 TF tf32, 312 TF bf16, NVLink3
// 600 GB/s total = 300 per direction. H100 SXM: 67 TF fp32, 494.7 tf32, 989.4 bf16, 1978.9 fp8,
// 3.35 TB/s, NVLink4 900 GB/s total = 450 per direction. H800: H100 compute, NVLink cut to
// 400 GB/s total. H200: H100 compute, 141 GB at 4.8 TB/s. B200 (HGX): 2.25 PF bf16, 4.5 PF fp8,
// 1.1 PF tf32, 180 GB, 7.7 TB/s, NVLink5 1.8 TB/s total = 900 per direction. GB200 (NVL72, per
// GPU): 2.5 PF bf16, 5 PF fp8, 1.25 PF tf32, 186 GB, 8 TB/s, NVLink5 900 per direction.
// HBM sizes are what the driver reports (nvidia-smi "MiB" totals: A100 40960 / 81920, H100 and
// H800 81559, H200 143771), so "80 GB" parts hold about 80 GiB; B200 and GB200 use the datasheet
// GB figures until a measured total is at hand.
// SMs: A100 108 (NVIDIA A100 Tensor Core GPU Architecture whitepaper, 2020); H100 SXM5 132
// (NVIDIA H100 Tensor Core GPU Architecture whitepaper, 2022), the H800 and H200 the same die and
// SM count; B200 148, 74 of each die's 80 enabled (Chips and Cheese, "Nvidia's B200: Keeping the
// CUDA Juggernaut Rolling", 2025), GB200's GPUs the same part.
constexpr GpuFamily kAmpere = GpuFamily::kAmpere, kHopper = GpuFamily::kHopper,
                    kBlackwell = GpuFamily::kBlackwell;
const std::array<GpuSpec, 7> kGpus = {{
    {"A100-40GB", "a100", "NVIDIA-A100-SXM4-40GB", kAmpere, TFlops(19.5), TFlops(156), TFlops(312),
     TFlops(0), MiB(40960), GBps(1555), GBps(300), 108},
    {"A100-80GB", "a100", "NVIDIA-A100-SXM4-80GB", kAmpere, TFlops(19.5), TFlops(156), TFlops(312),
     TFlops(0), MiB(81920), GBps(2039), GBps(300), 108},
    {"H100-SXM", "h100", "NVIDIA-H100-80GB-HBM3", kHopper, TFlops(66.9), TFlops(494.7),
     TFlops(989.4), TFlops(1978.9), MiB(81559), GBps(3350), GBps(450), 132},
    {"H800", "h800", "NVIDIA-H800", kHopper, TFlops(66.9), TFlops(494.7), TFlops(989.4),
     TFlops(1978.9), MiB(81559), GBps(3350), GBps(200), 132},
    {"H200", "h200", "NVIDIA-H200", kHopper, TFlops(66.9), TFlops(494.7), TFlops(989.4),
     TFlops(1978.9), MiB(143771), GBps(4800), GBps(450), 132},
    {"B200", "b200", "NVIDIA-B200", kBlackwell, TFlops(75), TFlops(1100), TFlops(2250),
     TFlops(4500), GB(180), GBps(7700), GBps(900), 148},
    {"GB200", "gb200", "NVIDIA-GB200", kBlackwell, TFlops(80), TFlops(1250), TFlops(2500),
     TFlops(5000), GB(186), GBps(8000), GBps(900), 148},
}};

struct Alias {
  std::string_view alias;
  std::string_view name;
};
constexpr Alias kAliases[] = {
    {"a100", "A100-80GB"},     {"a100-sxm4-80gb", "A100-80GB"}, {"a100-sxm4-40gb", "A100-40GB"},
    {"a100-80g", "A100-80GB"}, {"a100-40g", "A100-40GB"},       {"h100", "H100-SXM"},
    {"h100-80gb", "H100-SXM"}, {"h100-sxm5", "H100-SXM"},       {"h100-sxm5-80gb", "H100-SXM"},
};

}  // namespace

std::string_view DtypeName(Dtype d) {
  switch (d) {
    case Dtype::kFp32:
      return "fp32";
    case Dtype::kTf32:
      return "tf32";
    case Dtype::kBf16:
      return "bf16";
    case Dtype::kFp16:
      return "fp16";
    case Dtype::kFp8:
      return "fp8";
  }
  return "?";
}

Result<Dtype> ParseDtype(std::string_view name) {
  for (Dtype d : {Dtype::kFp32, Dtype::kTf32, Dtype::kBf16, Dtype::kFp16, Dtype::kFp8}) {
    if (EqualsIgnoreCase(name, DtypeName(d))) return d;
  }
  return InvalidArgumentError("unknown dtype '" + Printable(name) +
                              "' (expected fp32, tf32, bf16, fp16 or fp8)");
}

std::string_view GpuFamilyName(GpuFamily f) {
  switch (f) {
    case GpuFamily::kAmpere:
      return "ampere";
    case GpuFamily::kHopper:
      return "hopper";
    case GpuFamily::kBlackwell:
      return "blackwell";
    case GpuFamily::kUnknown:
      break;
  }
  return "unknown";
}

Result<GpuFamily> ParseGpuFamily(std::string_view name) {
  for (GpuFamily f : {GpuFamily::kAmpere, GpuFamily::kHopper, GpuFamily::kBlackwell}) {
    if (EqualsIgnoreCase(Trim(name), GpuFamilyName(f))) return f;
  }
  return InvalidArgumentError("unknown GPU family '" + Printable(name) +
                              "' (expected ampere, hopper or blackwell)");
}

FlopsPerSecond GpuSpec::Peak(Dtype d) const {
  switch (d) {
    case Dtype::kFp32:
      return fp32;
    case Dtype::kTf32:
      return tf32;
    case Dtype::kBf16:
    case Dtype::kFp16:
      return bf16;
    case Dtype::kFp8:
      return fp8;
  }
  return FlopsPerSecond(0);
}

std::span<const GpuSpec> BuiltinGpus() { return kGpus; }

Result<const GpuSpec*> FindGpu(std::string_view name) {
  std::string_view target = Trim(name);
  for (const auto& a : kAliases) {
    if (EqualsIgnoreCase(target, a.alias)) target = a.name;
  }
  for (const auto& g : kGpus) {
    if (EqualsIgnoreCase(target, g.name) || EqualsIgnoreCase(target, g.product_label) ||
        (g.slurm_type != "a100" && EqualsIgnoreCase(target, g.slurm_type))) {
      return &g;
    }
  }
  std::string known;
  for (const auto& g : kGpus) known += (known.empty() ? "" : ", ") + g.name;
  return NotFoundError("unknown GPU type '" + Printable(name) + "' (known: " + known + ")");
}

}  // namespace baton::topo
