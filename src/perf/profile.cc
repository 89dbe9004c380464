#include "perf/profile.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <fstream>
#include <mutex>
#include <set>
#include <sstream>

#include "core/check.h"
#include "core/strings.h"
#include "perf/validation.h"

namespace baton::perf {

// Defined in the generated builtin_profile.cc (src/perf/profiles/builtin.yaml, embedded by CMake).
extern const char* const kBuiltinProfileYaml;

namespace {

// Bounds are physical where a measurement sets one: step_overhead_s at most 10 ms, which the
// vTrain single-node set bounds (steps from 58 ms, 12 layers on one 8 x A100 node: a fixed cost
// per step of 88 ms, fitted to the large runs alone, put it 33 % slow; 20 / 10 / 5 / 0 ms give
// a median error of +7.4 / +2.8 / +0.7 / -1.8 %); NCCL collectives at most 0.85 of NVLink
// (nccl-tests all-reduce bus bandwidth: ~230-240 of 300 GB/s on DGX A100, ~370 of 450 on DGX
// H100) and 0.95 of the NIC line rate (InfiniBand / RoCE protocol overhead).
// Prior widths (CalibrationField::prior_sigma; the prior is centred on Calibration's defaults,
// or on the start profile for `plan calibrate --runs`), each the spread of what the constant's
// source reports, so the penalty only pulls a constant that few rows inform: gemm_peak_fraction
// 15 % (cuBLAS large-GEMM sweeps: A100 0.80-0.85, H100 0.70-0.76 of dense peak); gemm_half_dim
// and gemm_half_tokens 256 / 512 (the curves' half points in vTrain's and the Megatron papers'
// sweeps, 0-400 and 0-700); fp8 rates 20 % / 25 % (Transformer Engine's and torchao's end-to-end
// fp8 speedups, 1.2-1.7x; rowwise is reported both slower and faster than bf16); per-layer and
// per-step overheads 0.5 / 5 ms (100 kernel launches of ~5 us; the vTrain bound above); NVLink
// and InfiniBand efficiencies 15 % (nccl-tests bus bandwidth, 0.75-0.9 of line rate); Ethernet
// 40 % (general-purpose RoCE fabrics without adaptive routing reach 0.4-0.9); overlap shares
// 0.3 (0.3-1.0 across stacks) and TP overlap 0.4 (0 without userbuffers to ~0.9 with them).
// Hardware-specific (not pooled across families): the GEMM half points (they grow with a part's
// SM count and rate) and NVLink efficiency (NVLink 3 / 4 / 5 and the NVL72 switch differ).
constexpr std::array<CalibrationField, 43> kFields = {{
    {"gemm_peak_fraction", &Calibration::gemm_peak_fraction, 0.05, 1.0, true, 0.15, true, false},
    {"gemm_half_dim", &Calibration::gemm_half_dim, 0, 4096, true, 256, false, true},
    {"gemm_half_tokens", &Calibration::gemm_half_tokens, 0, 8192, true, 512, false, true},
    // Set on vTrain's single-node set, not fitted on runs (system.h): `fit_profile data/published
    // --scan ampere.gemm_half_gflop 2,3.5,4,4.5,5,6,15` (the rest refitted per value) gives
    // vTrain mean |error| 9.2 / 8.4 / 8.2 / 8.2 / 8.3 / 9.2 / 35.8 %, median -4.7 / -3.2 / -2.4 /
    // -1.1 / +0.5 / +3.2 / +33.6 %, with the published rows' mean 4.0-4.2 % throughout: Ampere
    // takes 4.5. Hopper and Blackwell keep 0 (no set of small GEMMs measured on them).
    {"gemm_half_gflop", &Calibration::gemm_half_gflop, 0, 1000, false},
    {"fp8_gemm_speedup", &Calibration::fp8_gemm_speedup, 1.0, 2.0, true, 0, true, false},
    {"fp8_rowwise_gemm_speedup", &Calibration::fp8_rowwise_gemm_speedup, 0.5, 2.0, true, 0.25, true,
     false},
    // Set on the kernel charts (FitAttention), not on the published runs; a user's runs move
    // them (user_runs_only) within a prior of +-15 % on the rate and a factor 1.65 on the
    // length at which it halves: attention efficiency by implementation and length.
    {"flash_attention_fraction", &Calibration::flash_attention_fraction, 0.05, 1.0, true, 0.15,
     true, true, true},
    {"flash_half_length", &Calibration::flash_half_length, 0, 8192, true, 0.5, true, true, true},
    {"flash_half_head_dim", &Calibration::flash_half_head_dim, 0, 512, false},
    {"layer_overhead_s", &Calibration::layer_overhead_s, 0, 0.01, true, 0.0005, false, false},
    {"host_layer_pass_s", &Calibration::host_layer_pass_s, 0, 0.01, false},
    // Per collective call beyond the links' latency; a user's runs move it (user_runs_only)
    // within +-20 us of the start (NCCL's base latencies are 7-9 us per call and protocol,
    // collectives_fit on data/published/collectives.csv).
    {"collective_overhead_s", &Calibration::collective_overhead_s, 0, 0.01, true, 2e-5, false,
     false, true},
    {"step_overhead_s", &Calibration::step_overhead_s, 0, 0.01, true, 0.005, false, false},
    {"hbm_efficiency", &Calibration::hbm_efficiency, 0.1, 1.0, false},
    {"nvlink_efficiency", &Calibration::nvlink_efficiency, 0.1, 0.85, true, 0.15, true, true},
    {"network_efficiency", &Calibration::network_efficiency, 0.1, 0.95, true, 0.15, true, false},
    {"ethernet_efficiency", &Calibration::ethernet_efficiency, 0.1, 0.95, true, 0.4, true, false},
    {"dp_overlap_fraction", &Calibration::dp_overlap_fraction, 0, 1.0, true, 0.3, false, false},
    {"tp_overlap_fraction", &Calibration::tp_overlap_fraction, 0, 1.0, true, 0, false, false},
    {"hbm_reserved_gib", &Calibration::hbm_reserved_gib, 0, 64, false},
    {"hbm_fragmentation", &Calibration::hbm_fragmentation, 0, 0.5, false},
    {"fsdp_overlap_fraction", &Calibration::fsdp_overlap_fraction, 0, 1.0, true, 0.3, false, false},
    {"fp8_weight_bytes", &Calibration::fp8_weight_bytes, 0, 4, false},
    // Physical range: 1/3 dynamic power alone, up to the 1.2 measured on a deep cap (system.h).
    // Prior width 0.3 (the 1/3 of dynamic power alone to the 1.2 measured); a property of the
    // part's power management, so not pooled across families.
    {"power_cap_exponent", &Calibration::power_cap_exponent, 0.33, 1.25, true, 0.3, false, true},
    // Prior width 0.3, like the other overlap shares.
    {"async_tp_overlap_fraction", &Calibration::async_tp_overlap_fraction, 0, 1.0, true, 0.3, false,
     false},
    // Launch-floor terms set on the vTrain single-node set (system.h), not fitted: no
    // published row is launch-bound.
    // A user's runs move the per-micro-batch host cost (user_runs_only) within +-1.5 ms.
    {"host_microbatch_s", &Calibration::host_microbatch_s, 0, 0.01, true, 0.0015, false, false,
     true},
    {"host_collective_step_s", &Calibration::host_collective_step_s, 0, 0.001, false},
    // Bounds 1..2: cuDNN is not slower than FlashAttention-2 where Transformer Engine prefers it,
    // and the FlashAttention-3 charts put it below 2x (system.h). No prior (like the fp8 rate);
    // a kernel's speed on the part, so not pooled across families.
    {"cudnn_attention_speedup", &Calibration::cudnn_attention_speedup, 1.0, 2.0, true, 0, true,
     true},
    // Fitted on the kernel charts, not on runs (system.h). Bounds: the charts' ratios to
    // FlashAttention-2 span 0.06-2.3; exponents and causal factors within a factor 4 per
    // doubling of the head and for the mask.
    {"flash1_attention_rate", &Calibration::flash1_attention_rate, 0, 4, false},
    {"flash1_attention_head_dim_exponent", &Calibration::flash1_attention_head_dim_exponent, -2, 2,
     false},
    {"flash1_attention_causal_factor", &Calibration::flash1_attention_causal_factor, 0.25, 4,
     false},
    {"flash3_attention_rate", &Calibration::flash3_attention_rate, 0, 4, false},
    {"flash3_attention_head_dim_exponent", &Calibration::flash3_attention_head_dim_exponent, -2, 2,
     false},
    {"flash3_attention_causal_factor", &Calibration::flash3_attention_causal_factor, 0.25, 4,
     false},
    {"triton_attention_rate", &Calibration::triton_attention_rate, 0, 4, false},
    {"triton_attention_head_dim_exponent", &Calibration::triton_attention_head_dim_exponent, -2, 2,
     false},
    {"triton_attention_causal_factor", &Calibration::triton_attention_causal_factor, 0.25, 4,
     false},
    {"xformers_attention_rate", &Calibration::xformers_attention_rate, 0, 4, false},
    {"xformers_attention_head_dim_exponent", &Calibration::xformers_attention_head_dim_exponent, -2,
     2, false},
    {"xformers_attention_causal_factor", &Calibration::xformers_attention_causal_factor, 0.25, 4,
     false},
    {"math_attention_rate", &Calibration::math_attention_rate, 0, 4, false},
    {"math_attention_head_dim_exponent", &Calibration::math_attention_head_dim_exponent, -2, 2,
     false},
    {"math_attention_causal_factor", &Calibration::math_attention_causal_factor, 0.25, 4, false},
}};

constexpr std::size_t kMaxProfileBytes = 1 << 16;
constexpr int kMaxFamilies = 16;
constexpr int kMaxBands = 16;
constexpr int kMaxEnvelope = 64;
constexpr int kMaxBandCells = 1024;
// The families of the GPU catalogue (topology/gpu.cc), the only keys a profile may have.
constexpr std::array<std::string_view, 3> kGpuFamilies = {"ampere", "hopper", "blackwell"};

struct Line {
  int no;
  int indent;
  std::string_view key;
  std::string_view value;
};

Status LineError(std::string_view source, int no, std::string_view what) {
  return InvalidArgumentError(fmt::format("{}:{}: {}", source, no, what));
}

Result<double> Number(std::string_view source, const Line& l, double min, double max) {
  auto v = ParseDouble(Trim(l.value));
  if (!v || !std::isfinite(*v) || *v < min || *v > max) {
    return LineError(source, l.no,
                     fmt::format("{}: '{}' is not a number in {}..{}", Printable(l.key),
                                 Printable(l.value), min, max));
  }
  return *v;
}

// The top-level `band:` mapping ProfileToYaml writes (quantile, then cells); `*i` is the index
// of the `band:` line and is left at its last child.
Status ParseBand(std::string_view source, const std::vector<Line>& lines, std::size_t* i,
                 BandModel* band) {
  std::set<std::string> seen;
  while (*i + 1 < lines.size() && lines[*i + 1].indent >= 1) {
    const Line& k = lines[++*i];
    if (k.indent != 1) return LineError(source, k.no, "unexpected indentation");
    if (!seen.insert(std::string(k.key)).second) {
      return LineError(source, k.no, fmt::format("duplicate key '{}'", Printable(k.key)));
    }
    if (k.key == "quantile") {
      ASSIGN_OR_RETURN(band->quantile, Number(source, k, 0.5, 1));
    } else if (k.key == "cells") {
      if (!k.value.empty()) return LineError(source, k.no, "cells: expected a mapping");
      while (*i + 1 < lines.size() && lines[*i + 1].indent >= 2) {
        const Line& c = lines[++*i];
        if (c.indent != 2) return LineError(source, c.no, "unexpected indentation");
        if (static_cast<int>(band->cells.size()) == kMaxBandCells) {
          return LineError(source, c.no, fmt::format("more than {} band cells", kMaxBandCells));
        }
        if (std::count(c.key.begin(), c.key.end(), '/') != 4 || c.key.size() > 64) {
          return LineError(
              source, c.no,
              fmt::format("band cell '{}' is not family/kind/seq/size/reach", Printable(c.key)));
        }
        if (band->Find(c.key) != nullptr) {
          return LineError(source, c.no, fmt::format("duplicate key '{}'", Printable(c.key)));
        }
        ASSIGN_OR_RETURN(double rel, Number(source, c, 0, 10));
        band->cells.push_back({std::string(c.key), rel, 0});
      }
    } else {
      return LineError(source, k.no, fmt::format("band: unknown key '{}'", Printable(k.key)));
    }
  }
  if (band->quantile == 0 || band->cells.empty()) {
    return LineError(source, lines[*i].no, "band: needs quantile and cells");
  }
  return Status::Ok();
}

std::mutex g_mu;
SystemProfile* g_active = nullptr;  // owned; replaced only by InstallProfile

}  // namespace

std::span<const CalibrationField> CalibrationFields() { return kFields; }

const FamilyProfile* SystemProfile::Find(std::string_view family) const {
  for (const FamilyProfile& f : families) {
    if (f.family == family) return &f;
  }
  for (const FamilyProfile& f : families) {
    if (f.family == "hopper") return &f;
  }
  return nullptr;
}

FamilyProfile* SystemProfile::FindMutable(std::string_view family) {
  for (FamilyProfile& f : families) {
    if (f.family == family) return &f;
  }
  return nullptr;
}

Result<SystemProfile> ParseProfile(std::string_view text, std::string_view source) {
  if (text.size() > kMaxProfileBytes) {
    return InvalidArgumentError(fmt::format("{}: {} bytes, more than a profile's {}", source,
                                            text.size(), kMaxProfileBytes));
  }
  std::vector<Line> lines;
  int no = 0;
  for (std::string_view raw : Split(text, '\n')) {
    ++no;
    if (!raw.empty() && raw.back() == '\r') raw.remove_suffix(1);
    std::size_t hash = raw.find('#');
    if (hash != std::string_view::npos) raw = raw.substr(0, hash);
    if (Trim(raw).empty()) continue;
    std::size_t indent = raw.find_first_not_of(' ');
    if (raw.find('\t') != std::string_view::npos)
      return LineError(source, no, "tab in indentation");
    if (indent % 2 != 0) return LineError(source, no, "indentation is not a multiple of 2");
    std::string_view body = raw.substr(indent);
    std::size_t colon = body.find(':');
    if (colon == std::string_view::npos) return LineError(source, no, "expected 'key: value'");
    lines.push_back({no, static_cast<int>(indent / 2), Trim(body.substr(0, colon)),
                     Trim(body.substr(colon + 1))});
  }
  SystemProfile p;
  std::set<std::string> top_seen;
  bool have_version = false;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    const Line& l = lines[i];
    if (l.indent != 0) return LineError(source, l.no, "unexpected indentation");
    if (!top_seen.insert(std::string(l.key)).second) {
      return LineError(source, l.no, fmt::format("duplicate key '{}'", Printable(l.key)));
    }
    if (l.key == "version") {
      if (l.value != "1") {
        return LineError(source, l.no, fmt::format("version '{}' is not 1", Printable(l.value)));
      }
      have_version = true;
    } else if (l.key == "name") {
      if (l.value.size() > 128) return LineError(source, l.no, "name longer than 128 characters");
      p.name = std::string(l.value);
    } else if (l.key == "families") {
      if (!l.value.empty()) return LineError(source, l.no, "families: expected a mapping");
      while (i + 1 < lines.size() && lines[i + 1].indent >= 1) {
        const Line& fam = lines[++i];
        if (fam.indent != 1 || !fam.value.empty()) {
          return LineError(source, fam.no, "expected '  <family>:'");
        }
        if (static_cast<int>(p.families.size()) == kMaxFamilies) {
          return LineError(source, fam.no, fmt::format("more than {} families", kMaxFamilies));
        }
        if (p.FindMutable(fam.key) != nullptr) {
          return LineError(source, fam.no,
                           fmt::format("duplicate family '{}'", Printable(fam.key)));
        }
        // A family the GPU catalogue does not have would never be looked up, and a misspelt
        // one would leave its GPUs on another family's constants (SystemProfile::Find).
        if (std::find(kGpuFamilies.begin(), kGpuFamilies.end(), fam.key) == kGpuFamilies.end()) {
          return LineError(source, fam.no,
                           fmt::format("unknown GPU family '{}' (ampere, hopper or blackwell)",
                                       Printable(fam.key)));
        }
        FamilyProfile f;
        f.family = std::string(fam.key);
        // Start from the documented defaults, so a field the file leaves out is well defined.
        std::set<std::string> seen;
        while (i + 1 < lines.size() && lines[i + 1].indent >= 2) {
          const Line& k = lines[++i];
          if (k.indent != 2) return LineError(source, k.no, "unexpected indentation");
          if (!seen.insert(std::string(k.key)).second) {
            return LineError(source, k.no, fmt::format("duplicate key '{}'", Printable(k.key)));
          }
          if (k.key == "calibration" || k.key == "bands" || k.key == "mfu_envelope" ||
              k.key == "gpus_max_by_kind") {
            if (!k.value.empty()) {
              return LineError(source, k.no, fmt::format("{}: expected a mapping", k.key));
            }
            std::set<std::string> sub_seen;
            while (i + 1 < lines.size() && lines[i + 1].indent >= 3) {
              const Line& v = lines[++i];
              if (v.indent != 3) return LineError(source, v.no, "unexpected indentation");
              if (!sub_seen.insert(std::string(v.key)).second) {
                return LineError(source, v.no, fmt::format("duplicate key '{}'", Printable(v.key)));
              }
              if (k.key == "mfu_envelope") {
                auto params = ParseDouble(v.key);
                if (!params || !(*params > 0) || *params > 1e6) {
                  return LineError(
                      source, v.no,
                      fmt::format("mfu_envelope '{}' is not a size in billions", Printable(v.key)));
                }
                if (!f.mfu_envelope.empty() && *params <= f.mfu_envelope.back().first) {
                  return LineError(source, v.no, "mfu_envelope must ascend in size");
                }
                if (static_cast<int>(f.mfu_envelope.size()) == kMaxEnvelope) {
                  return LineError(source, v.no,
                                   fmt::format("more than {} mfu_envelope entries", kMaxEnvelope));
                }
                ASSIGN_OR_RETURN(double mfu, Number(source, v, 0, 1));
                f.mfu_envelope.emplace_back(*params, mfu);
                continue;
              }
              if (k.key == "gpus_max_by_kind") {
                if (v.key != "fsdp" && v.key != "3d" && v.key != "cp" && v.key != "dp") {
                  return LineError(source, v.no,
                                   fmt::format("gpus_max_by_kind: '{}' is not fsdp, 3d, cp or dp",
                                               Printable(v.key)));
                }
                ASSIGN_OR_RETURN(double gpus, Number(source, v, 1, 1e8));
                f.kind_gpus_max.emplace_back(std::string(v.key), gpus);
                continue;
              }
              if (k.key == "bands") {
                auto seq = ParseDouble(v.key);
                if (!seq || !(*seq > 0) || *seq > 1e9) {
                  return LineError(
                      source, v.no,
                      fmt::format("band '{}' is not a sequence length", Printable(v.key)));
                }
                if (!f.bands.empty() && *seq <= f.bands.back().seq_max) {
                  return LineError(source, v.no, "bands must ascend in sequence length");
                }
                if (static_cast<int>(f.bands.size()) == kMaxBands) {
                  return LineError(source, v.no, fmt::format("more than {} bands", kMaxBands));
                }
                ASSIGN_OR_RETURN(double mae, Number(source, v, 0, 10));
                f.bands.push_back({*seq, mae, 0});
                continue;
              }
              auto field = std::find_if(kFields.begin(), kFields.end(),
                                        [&](const CalibrationField& c) { return c.name == v.key; });
              if (field == kFields.end()) {
                return LineError(source, v.no,
                                 fmt::format("calibration: unknown field '{}'", Printable(v.key)));
              }
              ASSIGN_OR_RETURN(f.calib.*(field->member), Number(source, v, field->min, field->max));
            }
          } else if (k.key == "runs") {
            ASSIGN_OR_RETURN(double runs, Number(source, k, 0, 1e6));
            f.runs = static_cast<int>(runs);
          } else if (k.key == "gpus_max") {
            ASSIGN_OR_RETURN(f.gpus_max, Number(source, k, 0, 1e8));
          } else if (k.key == "seq_max") {
            ASSIGN_OR_RETURN(f.seq_max, Number(source, k, 0, 1e9));
          } else if (k.key == "params_max_b") {
            ASSIGN_OR_RETURN(f.params_max_b, Number(source, k, 0, 1e6));

          } else {
            return LineError(source, k.no, fmt::format("unknown key '{}'", Printable(k.key)));
          }
        }
        p.families.push_back(std::move(f));
      }
    } else if (l.key == "band") {
      if (!l.value.empty()) return LineError(source, l.no, "band: expected a mapping");
      RETURN_IF_ERROR(ParseBand(source, lines, &i, &p.band));
    } else {
      return LineError(source, l.no, fmt::format("unknown key '{}'", Printable(l.key)));
    }
  }
  if (!have_version) return InvalidArgumentError(fmt::format("{}: no 'version: 1'", source));
  if (p.families.empty()) return InvalidArgumentError(fmt::format("{}: no families", source));
  return p;
}

Result<SystemProfile> LoadProfile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFoundError(fmt::format("profile: cannot open '{}'", path));
  std::string text(kMaxProfileBytes + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<std::size_t>(in.gcount()));
  return ParseProfile(text, path);
}

std::string ProfileToYaml(const SystemProfile& p) {
  std::string out =
      "# baton system profile: the estimator's constants per GPU family, fitted by\n"
      "# `baton plan calibrate` (docs/perf/calibration.md).\n";
  out += "version: 1\n";
  out += fmt::format("name: {}\n", p.name.empty() ? "unnamed" : p.name);
  out += "families:\n";
  for (const FamilyProfile& f : p.families) {
    out += fmt::format("  {}:\n", f.family);
    out += fmt::format("    runs: {}\n", f.runs);
    out += fmt::format("    gpus_max: {:g}\n", f.gpus_max);
    out += fmt::format("    seq_max: {:g}\n", f.seq_max);
    out += fmt::format("    params_max_b: {:g}\n", f.params_max_b);
    if (!f.kind_gpus_max.empty()) {
      out += "    gpus_max_by_kind:  # the largest validated run per parallelism kind\n";
      for (const auto& [kind, gpus] : f.kind_gpus_max) {
        out += fmt::format("      {}: {:g}\n", kind, gpus);
      }
    }
    out += "    calibration:\n";
    for (const CalibrationField& c : kFields) {
      out += fmt::format("      {}: {:.6g}\n", c.name, f.calib.*(c.member));
    }
    if (!f.mfu_envelope.empty()) {
      out +=
          "    mfu_envelope:  # highest MFU validated runs of at least this many billion params "
          "reached\n";
      for (const auto& [params, mfu] : f.mfu_envelope) {
        out += fmt::format("      {:g}: {:.4f}\n", params, mfu);
      }
    }
    if (!f.bands.empty() && p.band.cells.empty()) {
      out += "    bands:  # cross-validated mean |error| for seq up to the key\n";
      for (const SeqBand& b : f.bands) {
        out += fmt::format("      {:g}: {:.4f}  # {} rows\n", b.seq_max, b.mae, b.rows);
      }
    }
  }
  if (!p.band.cells.empty()) {
    out +=
        "band:  # the uncertainty band: per cell (GPU family/parallelism/sequence/size/reach), "
        "this\n"
        "       # quantile of |cross-validated residual|, each row's worse of its leave-one-source-"
        "out\n"
        "       # and leave-one-stack-out folds (profile.h, BandModel; calibrate.h, "
        "WorseOfFolds)\n";
    out += fmt::format("  quantile: {:g}\n", p.band.quantile);
    out += "  cells:\n";
    for (const BandCell& c : p.band.cells) {
      out += fmt::format("    {}: {:.4f}  # {} rows, {} sources\n", c.key, c.relative, c.rows,
                         c.sources);
    }
  }
  return out;
}

const SystemProfile& BuiltinProfile() {
  static const SystemProfile* builtin = [] {
    auto p = ParseProfile(kBuiltinProfileYaml, "builtin profile");
    CHECK(p.ok()) << p.status().ToString();  // compiled-in data, covered by ProfileTest
    return new SystemProfile(std::move(p).value());
  }();
  return *builtin;
}

const SystemProfile& ActiveProfile() {
  std::lock_guard<std::mutex> lock(g_mu);
  return g_active != nullptr ? *g_active : BuiltinProfile();
}

void InstallProfile(SystemProfile p) {
  std::lock_guard<std::mutex> lock(g_mu);
  // The previous one is leaked on purpose: a caller may still hold a reference to it.
  g_active = new SystemProfile(std::move(p));
}

Status InstallProfileFile(const std::string& path) {
  ASSIGN_OR_RETURN(SystemProfile p, LoadProfile(path));
  InstallProfile(std::move(p));
  return Status::Ok();
}

void ApplyProfile(const SystemProfile& p, SystemSpec* system) {
  const FamilyProfile* f = p.Find(topo::GpuFamilyName(system->gpu.family));
  if (f != nullptr) system->calib = f->calib;
}

double FamilyProfile::MfuReached(double params_b) const {
  // Entries ascend in size and descend in MFU: the first at or above half the size is the
  // highest MFU of the runs at least that large.
  for (const auto& [params, mfu] : mfu_envelope) {
    if (params >= params_b / 2) return mfu;
  }
  return 0;
}

double FamilyProfile::KindGpusMax(std::string_view kind) const {
  for (const auto& [k, gpus] : kind_gpus_max) {
    if (k == kind) return gpus;
  }
  return 0;
}

const BandCell* BandModel::Find(std::string_view key) const {
  for (const BandCell& c : cells) {
    if (c.key == key) return &c;
  }
  return nullptr;
}

std::string_view BandSizeRange(double params_b) {
  if (params_b < 20) return "<20B";
  if (params_b <= 100) return "20-100B";
  return ">100B";
}

std::string_view BandSeqRange(int seq) {
  if (seq <= 8192) return "<=8k";
  if (seq <= 32768) return "8k-32k";
  return ">32k";
}

std::vector<std::string> BandCellKeys(const BandQuestion& q, bool beyond) {
  const std::string_view reach = beyond ? "beyond" : "inside";
  const std::string_view kind = q.kind == "*" ? "any" : q.kind;
  const std::string_view seq = BandSeqRange(q.seq), size = BandSizeRange(q.params_b);
  return {
      fmt::format("{}/{}/{}/{}/{}", q.family, kind, seq, size, reach),
      fmt::format("{}/{}/{}/any/{}", q.family, kind, seq, reach),
      fmt::format("any/{}/{}/any/{}", kind, seq, reach),
      fmt::format("any/{}/any/any/{}", kind, reach),
      fmt::format("any/any/any/any/{}", reach),
      "any/any/any/any/any",
  };
}

double BandRelative(const BandModel& band, const BandQuestion& q, bool beyond) {
  for (const std::string& key : BandCellKeys(q, beyond)) {
    if (const BandCell* c = band.Find(key)) return c->relative;
  }
  return 0;
}

std::vector<std::string> BeyondEnvelope(const SystemProfile& p, const BandQuestion& q, double mfu) {
  const FamilyProfile* f = nullptr;
  for (const FamilyProfile& fam : p.families) {
    if (fam.family == q.family) f = &fam;
  }
  std::vector<std::string> why;
  if (f == nullptr || f->runs == 0) {
    why.push_back(fmt::format("no validated runs for {}", q.family));
    return why;
  }
  if (q.kind == "*") {
    if (f->gpus_max > 0 && q.gpus > f->gpus_max) {
      why.push_back(fmt::format("{} GPUs > the largest validated {} run ({:g})", q.gpus, f->family,
                                f->gpus_max));
    }
  } else if (double most = f->KindGpusMax(q.kind); most == 0) {
    why.push_back(fmt::format("no validated {} run on {}", q.kind, f->family));
  } else if (q.gpus > most) {
    why.push_back(fmt::format("{} GPUs > the largest validated {} run on {} ({:g})", q.gpus, q.kind,
                              f->family, most));
  }
  if (f->seq_max > 0 && q.seq > f->seq_max) {
    why.push_back(fmt::format("seq {} > the longest validated ({:g})", q.seq, f->seq_max));
  }
  if (f->params_max_b > 0 && q.params_b > 1.5 * f->params_max_b) {
    why.push_back(fmt::format("{:.0f}B parameters > 1.5 x the largest validated ({:g}B)",
                              q.params_b, f->params_max_b));
  }
  // A plan faster than any validated run of a model of its size reached on the family: the
  // constants were never tested at that rate (GPT-3 175B on 1,024 A100s without recomputation:
  // the published 175B-530B A100 runs reached at most 51 %).
  double reached = f->MfuReached(q.params_b);
  if (mfu > 0 && reached > 0 && mfu > reached) {
    why.push_back(fmt::format(
        "MFU {:.1f}% > the highest any validated {} run of a model of {:.0f}B+ parameters reached "
        "({:.1f}%)",
        100 * mfu, f->family, q.params_b / 2, 100 * reached));
  }
  return why;
}

namespace {

UncertaintyBand BandFromCells(const SystemProfile& p, const BandQuestion& q, double mfu) {
  UncertaintyBand b;
  std::vector<std::string> why = BeyondEnvelope(p, q, mfu);
  b.extrapolated = !why.empty();
  b.why = fmt::format("{}", fmt::join(why, "; "));
  b.relative = BandRelative(p.band, q, b.extrapolated);
  return b;
}

// A profile without band cells (written before them): the per-sequence mean error.
UncertaintyBand SeqBandEstimate(const SystemProfile& p, const ModelSpec& m, const SystemSpec& s,
                                int gpus, double mfu) {
  UncertaintyBand b;
  const std::string_view family = topo::GpuFamilyName(s.gpu.family);
  const FamilyProfile* exact = nullptr;
  for (const FamilyProfile& f : p.families) {
    if (f.family == family) exact = &f;
  }
  const FamilyProfile* f = exact != nullptr ? exact : p.Find(family);
  if (f == nullptr || f->bands.empty()) {
    b.relative = 0.25;
    b.extrapolated = true;
    b.why = fmt::format("no validated runs for {}", family);
    return b;
  }
  // The band of the sequence range the run falls in; beyond the last band, the last one.
  b.relative = f->bands.back().mae;
  for (const SeqBand& sb : f->bands) {
    if (m.seq <= sb.seq_max) {
      b.relative = sb.mae;
      break;
    }
  }
  std::vector<std::string> why;
  if (exact == nullptr || f->runs == 0) {
    why.push_back(fmt::format("{} has no validated runs (constants from {})", family, f->family));
  }
  if (f->gpus_max > 0 && gpus > 2 * f->gpus_max) {
    why.push_back(fmt::format("{} GPUs > 2 x the largest validated run ({:g})", gpus, f->gpus_max));
  }
  if (f->seq_max > 0 && m.seq > f->seq_max) {
    why.push_back(fmt::format("seq {} > the longest validated ({:g})", m.seq, f->seq_max));
  }
  double params_b = m.TotalParams() / 1e9;
  if (f->params_max_b > 0 && params_b > 1.5 * f->params_max_b) {
    why.push_back(fmt::format("{:.0f}B parameters > 1.5 x the largest validated ({:g}B)", params_b,
                              f->params_max_b));
  }
  // A plan faster than any validated run of a model of its size reached on the family: the
  // constants were never tested at that rate (GPT-3 175B on 1,024 A100s without recomputation:
  // the published 175B-530B A100 runs reached at most 51 %).
  double reached = f->MfuReached(params_b);
  if (mfu > 0 && reached > 0 && mfu > reached) {
    why.push_back(fmt::format(
        "MFU {:.1f}% > the highest any validated {} run of a model of {:.0f}B+ parameters reached "
        "({:.1f}%)",
        100 * mfu, f->family, params_b / 2, 100 * reached));
  }
  if (!why.empty()) {
    b.extrapolated = true;
    b.why = fmt::format("{}", fmt::join(why, "; "));
    // Outside the envelope the cross-validated error is a floor, not an estimate: widen it.
    b.relative = std::max(2 * b.relative, 0.15);
  }
  return b;
}

}  // namespace

UncertaintyBand EstimateBand(const SystemProfile& p, const ModelSpec& m, const SystemSpec& s,
                             int gpus, double mfu) {
  if (p.band.cells.empty()) return SeqBandEstimate(p, m, s, gpus, mfu);
  return BandFromCells(
      p, {topo::GpuFamilyName(s.gpu.family), "*", m.seq, m.TotalParams() / 1e9, gpus}, mfu);
}

UncertaintyBand EstimateBand(const SystemProfile& p, const ModelSpec& m, const SystemSpec& s,
                             const ParallelPlan& plan, double mfu) {
  if (p.band.cells.empty()) return SeqBandEstimate(p, m, s, plan.gpus(), mfu);
  return BandFromCells(p,
                       {topo::GpuFamilyName(s.gpu.family), ParallelismKind(plan), m.seq,
                        m.TotalParams() / 1e9, plan.gpus()},
                       mfu);
}

}  // namespace baton::perf
