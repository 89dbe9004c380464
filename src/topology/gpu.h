// The GPU catalogue: the accelerators baton knows, with their dense peak FLOP/s per dtype, HBM
// size and bandwidth, and NVLink bandwidth. Figures are vendor datasheet values (dense, no
// sparsity) as listed in ../../data/README.md; a custom GPU can be described in a cluster file.
#pragma once

#include <span>
#include <string>
#include <string_view>

#include "core/status.h"
#include "core/units.h"

namespace baton::topo {

enum class Dtype { kFp32, kTf32, kBf16, kFp16, kFp8 };

std::string_view DtypeName(Dtype d);
Result<Dtype> ParseDtype(std::string_view name);

// The architecture generation of a GPU. The performance model's calibrated constants are per
// family (perf::FamilyProfile), so a GPU of no known family has none: the planner refuses it
// rather than price it as another generation.
enum class GpuFamily { kUnknown, kAmpere, kHopper, kBlackwell };

// "ampere", "hopper", "blackwell"; "unknown" for kUnknown.
std::string_view GpuFamilyName(GpuFamily f);
// The family a name gives, case-insensitively; InvalidArgument listing the names otherwise.
Result<GpuFamily> ParseGpuFamily(std::string_view name);

struct GpuSpec {
  std::string name;           // catalogue name: "H100-SXM"
  std::string slurm_type;     // gres type: "h100"
  std::string product_label;  // nvidia.com/gpu.product as GPU Feature Discovery writes it
  GpuFamily family = GpuFamily::kUnknown;
  FlopsPerSecond fp32;
  FlopsPerSecond tf32;
  FlopsPerSecond bf16;  // also fp16
  FlopsPerSecond fp8;   // zero when the GPU has no FP8 tensor cores
  Bytes hbm;
  BytesPerSecond hbm_bandwidth;
  BytesPerSecond nvlink_per_direction;  // per GPU, to the rest of its NVLink domain
  int sm_count = 0;                     // streaming multiprocessors; 0 = not known

  // Peak dense FLOP/s for a dtype; zero when unsupported.
  FlopsPerSecond Peak(Dtype d) const;
};

// The built-in catalogue: A100-40GB, A100-80GB, H100-SXM, H800, H200, B200, GB200.
std::span<const GpuSpec> BuiltinGpus();

// Finds a GPU by catalogue name, Slurm gres type or common alias ("A100", "h100",
// "A100-SXM4-80GB", "NVIDIA-H100-80GB-HBM3"), case-insensitively. The pointer stays valid for the
// life of the program.
Result<const GpuSpec*> FindGpu(std::string_view name);

}  // namespace baton::topo
