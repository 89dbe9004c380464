// `baton plan models` and `baton plan gpus`: the catalogues the planner knows.
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "cli/plan/options.h"
#include "topology/gpu.h"

namespace baton::cli::plan {

// The model catalogue with the shapes a runs table would otherwise spell out (its `model`
// column takes these names; docs/perf/calibration.md).
std::string FormatModels(bool json) {
  nlohmann::json j = nlohmann::json::array();
  std::string out = fmt::format(
      "{:<22} {:>8} {:>6} {:>6} {:>6} {:>5} {:>7} {:>7} {:>7} {:>6}  {}\n", "model", "params",
      "layers", "hidden", "heads", "kv", "ffn", "ffn_kind", "vocab", "seq", "moe");
  for (const perf::ModelSpec& m : perf::BuiltinModels()) {
    std::string moe = m.is_moe() ? fmt::format("{} experts, top {}, expert ffn {}", m.moe.experts,
                                               m.moe.top_k, m.moe.expert_ffn)
                                 : "-";
    out += fmt::format("{:<22} {:>7.1f}B {:>6} {:>6} {:>6} {:>5} {:>7} {:>8} {:>7} {:>6}  {}\n",
                       m.name, m.TotalParams() / 1e9, m.layers, m.hidden, m.heads, m.kv_heads,
                       m.ffn, perf::FfnKindName(m.ffn_kind), m.vocab, m.seq, moe);
    j.push_back({{"name", m.name},
                 {"params", m.TotalParams()},
                 {"layers", m.layers},
                 {"hidden", m.hidden},
                 {"heads", m.heads},
                 {"kv_heads", m.kv_heads},
                 {"ffn", m.ffn},
                 {"ffn_kind", std::string(perf::FfnKindName(m.ffn_kind))},
                 {"vocab", m.vocab},
                 {"seq", m.seq},
                 {"moe_experts", m.moe.experts},
                 {"moe_top_k", m.moe.top_k},
                 {"moe_expert_ffn", m.moe.expert_ffn}});
  }
  return json ? j.dump(2) + "\n" : out;
}

// The GPU catalogue as the estimator sees it: peaks, HBM and NVLink, and the family whose
// calibrated constants it takes.
std::string FormatGpus(bool json) {
  nlohmann::json j = nlohmann::json::array();
  std::string out =
      fmt::format("{:<10} {:<9} {:>4} {:>10} {:>10} {:>8} {:>9} {:>12}\n", "gpu", "family", "SMs",
                  "bf16 TF/s", "fp8 TF/s", "HBM GiB", "HBM TB/s", "NVLink GB/s");
  for (const topo::GpuSpec& g : topo::BuiltinGpus()) {
    const double bf16 = g.bf16.value() / 1e12, fp8 = g.fp8.value() / 1e12;
    const double hbm_tbps = g.hbm_bandwidth.value() / 1e12;
    const double nvlink = g.nvlink_per_direction.value() / 1e9;
    out += fmt::format("{:<10} {:<9} {:>4} {:>10.0f} {:>10.0f} {:>8.1f} {:>9.2f} {:>12.0f}\n",
                       g.name, topo::GpuFamilyName(g.family), g.sm_count, bf16, fp8, ToGiB(g.hbm),
                       hbm_tbps, nvlink);
    j.push_back({{"name", g.name},
                 {"family", std::string(topo::GpuFamilyName(g.family))},
                 {"sm_count", g.sm_count},
                 {"bf16_tflops", bf16},
                 {"fp8_tflops", fp8},
                 {"hbm_gib", ToGiB(g.hbm)},
                 {"hbm_tbytes_per_s", hbm_tbps},
                 {"nvlink_gbytes_per_s_per_direction", nvlink}});
  }
  return json ? j.dump(2) + "\n" : out;
}

}  // namespace baton::cli::plan
