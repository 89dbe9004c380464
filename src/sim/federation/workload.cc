// AssignSites (multisite.h): the multi-site workload from one trace.
#include <fmt/format.h>

#include <cmath>
#include <map>

#include "perf/model.h"
#include "sim/federation/multisite.h"

namespace baton::sim {
namespace {

// Bytes of a checkpoint per parameter: bf16 weights (2) + fp32 master weights (4) + Adam's two
// fp32 moments (8); ZeRO (Rajbhandari et al., SC'20) counts 16 bytes per parameter of
// mixed-precision Adam state including the fp16 gradients, which a checkpoint does not save.
constexpr double kCheckpointBytesPerParam = 14;
// Fine-tunes: an 8B-parameter model (the smallest of the synthetic workload's catalogue models).
constexpr double kFinetuneParams = 8e9;

std::string_view DatasetKind(std::string_view kind) {
  if (kind.starts_with("pretrain/")) return "pretrain";
  if (kind == "finetune") return "finetune";
  if (kind == "eval") return "eval";
  return {};
}

}  // namespace

Result<std::vector<MultiSiteJob>> AssignSites(std::vector<TraceJob> trace,
                                              const federation::Sites& sites,
                                              const WorkloadOptions& options) {
  const auto& all = sites.sites();
  if (all.empty()) return InvalidArgumentError("no sites");
  if (!(options.deadline_factor >= 0) || !std::isfinite(options.deadline_factor)) {
    return InvalidArgumentError("deadline factor: expected a number >= 0");
  }
  std::map<std::string, std::vector<std::string>> regions;
  for (const auto& [tenant, region] : options.tenant_regions) regions[tenant].push_back(region);
  std::map<std::string, std::string> home;  // tenant -> site
  std::vector<MultiSiteJob> out;
  out.reserve(trace.size());
  for (TraceJob& t : trace) {
    MultiSiteJob j;
    const std::string tenant = t.tenant.empty() ? "default" : t.tenant;
    auto [it, fresh] = home.emplace(tenant, std::string());
    if (fresh) {
      const std::string prefix = tenant + ".";
      for (const auto& s : all) {
        for (const auto& d : s.datasets) {
          if (it->second.empty() && d.name.starts_with(prefix)) it->second = s.name;
        }
      }
      if (it->second.empty()) it->second = all[(home.size() - 1) % all.size()].name;
    }
    j.home_site = it->second;
    std::string_view dk = DatasetKind(t.kind);
    if (!dk.empty()) {
      std::string name = fmt::format("{}.{}", tenant, dk);
      for (const auto& s : all) {
        if (s.FindDataset(name) != nullptr) {
          j.datasets.push_back(name);
          break;
        }
      }
    }
    if (dk == "pretrain") {
      auto model = perf::FindModel(t.kind.substr(std::string_view("pretrain/").size()));
      if (model.ok()) j.checkpoint_size = Bytes(model->TotalParams() * kCheckpointBytesPerParam);
    } else if (dk == "finetune") {
      j.checkpoint_size = Bytes(kFinetuneParams * kCheckpointBytesPerParam);
    }
    if (options.deadline_factor > 0 && t.duration) {
      j.deadline = *t.duration * options.deadline_factor;
    }
    if (auto r = regions.find(tenant); r != regions.end()) j.require_regions = r->second;
    j.trace = std::move(t);
    out.push_back(std::move(j));
  }
  return out;
}

}  // namespace baton::sim
