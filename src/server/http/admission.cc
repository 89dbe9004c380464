#include "server/http/admission.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "core/strings.h"
#include "topology/gpu.h"

namespace baton::server {
namespace {

Status Refuse(std::string_view name, std::string why) {
  return InvalidFieldError(std::string(name), std::move(why));
}

bool TierHasLevel(const topo::Cluster& cluster, topo::Level level) {
  for (int t = 0; t < cluster.tier_count(); ++t) {
    if (cluster.tier_level(t) == level) return true;
  }
  return false;
}

std::string Levels(const topo::Cluster& cluster) {
  std::string out = "node, nvlink-domain";
  for (int t = 0; t < cluster.tier_count(); ++t) {
    std::string_view name = topo::LevelName(cluster.tier_level(t));
    if (out.find(name) == std::string::npos) out += fmt::format(", {}", name);
  }
  return out;
}

}  // namespace

int LargestDomainGpus(const topo::Cluster& cluster, topo::Level level) {
  int largest = 0;
  switch (level) {
    case topo::Level::kGpu:
      return 1;
    case topo::Level::kNode:
      for (const topo::Node& n : cluster.nodes()) largest = std::max<int>(largest, n.gpus);
      return largest;
    case topo::Level::kNvlinkDomain:
      for (const topo::NvlinkDomain& d : cluster.nvlink_domains()) {
        largest = std::max(largest, d.counts.total);
      }
      // Nodes outside any multi-node domain are their own NVLink domain.
      return std::max(largest, LargestDomainGpus(cluster, topo::Level::kNode));
    default:
      break;
  }
  // A switch level: its largest subtree; a level the fabric lacks counts as the next one up.
  for (int l = static_cast<int>(level); l < static_cast<int>(topo::Level::kNone); ++l) {
    const auto at = static_cast<topo::Level>(l);
    if (!TierHasLevel(cluster, at)) continue;
    for (const topo::Switch& s : cluster.switches()) {
      if (cluster.tier_level(s.tier) == at) largest = std::max(largest, s.counts.total);
    }
    return largest;
  }
  return cluster.counts().total;
}

Status AdmitJob(const JobSpec& spec, const topo::Cluster& cluster) {
  const std::int64_t total = cluster.counts().total;
  if (spec.gpus > total) {
    return Refuse("gpus",
                  fmt::format("{} GPUs but cluster '{}' has {}", spec.gpus, cluster.name(), total));
  }
  // GPUs (and the largest node) among the nodes the job may use.
  std::int64_t usable = total;
  int largest_node = LargestDomainGpus(cluster, topo::Level::kNode);
  if (!spec.gpu_type.empty()) {
    Result<const topo::GpuSpec*> type = topo::FindGpu(spec.gpu_type);
    if (!type.ok()) {
      return Refuse("gpu_type", fmt::format("unknown GPU type '{}'", Printable(spec.gpu_type, 64)));
    }
    std::map<std::string, int> present;
    usable = 0;
    largest_node = 0;
    for (const topo::Node& n : cluster.nodes()) {
      const topo::GpuSpec* g = cluster.shape(n.shape).gpu;
      present[g->name] += n.gpus;
      if (g == *type) {
        usable += n.gpus;
        largest_node = std::max<int>(largest_node, n.gpus);
      }
    }
    if (usable == 0) {
      std::string have;
      for (const auto& [name, n] : present) {
        have += fmt::format("{}{} x {}", have.empty() ? "" : ", ", n, name);
      }
      return Refuse("gpu_type", fmt::format("cluster '{}' has no {} GPUs (it has {})",
                                            cluster.name(), (*type)->name, have));
    }
    if (spec.gpus > usable) {
      return Refuse("gpus", fmt::format("{} GPUs but cluster '{}' has {} of type {}", spec.gpus,
                                        cluster.name(), usable, (*type)->name));
    }
  }
  if (spec.gpus_per_node > largest_node) {
    return Refuse("gpus_per_node",
                  fmt::format("{} GPUs per node but the largest node{} has {}", spec.gpus_per_node,
                              spec.gpu_type.empty() ? "" : " of that type", largest_node));
  }
  for (const auto& [name, value] : {std::pair{"topology.required", &spec.topology_required},
                                    std::pair{"topology.preferred", &spec.topology_preferred}}) {
    if (value->empty()) continue;
    Result<topo::Level> level = topo::ParseLevel(*value);
    if (!level.ok()) return Refuse(name, std::string(level.status().message()));
    const bool exists = *level == topo::Level::kNode || *level == topo::Level::kNvlinkDomain ||
                        *level == topo::Level::kGpu || TierHasLevel(cluster, *level);
    if (!exists) {
      return Refuse(name, fmt::format("level '{}' does not exist in cluster '{}' (it has {})",
                                      *value, cluster.name(), Levels(cluster)));
    }
    // Only the required level is a constraint; a preferred one that cannot hold the gang is
    // relaxed by the scheduler.
    if (value == &spec.topology_required) {
      const int domain = LargestDomainGpus(cluster, *level);
      if (spec.gpus > domain) {
        return Refuse(
            name, fmt::format("{} GPUs cannot fit in one {}: the largest in cluster '{}' has {}",
                              spec.gpus, *value, cluster.name(), domain));
      }
    }
  }
  return Status::Ok();
}

}  // namespace baton::server
