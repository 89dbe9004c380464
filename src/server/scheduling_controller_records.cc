// The store's records of jobs and placements, as the scheduler takes them
// (scheduling_controller.h).
#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <limits>
#include <set>

#include "core/check.h"
#include "core/log.h"
#include "core/strings.h"
#include "sched/framework/presets.h"
#include "sched/history/history.h"
#include "server/http/admission.h"
#include "server/http/job_spec.h"
#include "server/scheduling_controller_internal.h"
#include "topology/io/cluster_yaml.h"
#include "topology/summary.h"

namespace baton::server {

std::string AllocTag(const topo::Cluster& cluster, const sched::Placement& placement) {
  std::string out(kAllocOpen);
  for (std::size_t i = 0; i < placement.nodes.size(); ++i) {
    if (i > 0) out += ",";
    out += fmt::format("{}:{:#x}", cluster.node(placement.nodes[i].node).name,
                       placement.nodes[i].mask);
  }
  return out + "]";
}

Result<sched::Placement> ParseAllocTag(const topo::Cluster& cluster, std::string_view message) {
  std::size_t open = message.rfind(kAllocOpen);
  std::size_t close = message.rfind(']');
  if (open == std::string_view::npos || close == std::string_view::npos || close < open) {
    return InvalidArgumentError("no [alloc ...] in the placement event");
  }
  std::string_view body =
      message.substr(open + kAllocOpen.size(), close - open - kAllocOpen.size());
  sched::Placement p;
  while (!body.empty()) {
    std::size_t comma = body.find(',');
    std::string_view item = body.substr(0, comma);
    body = comma == std::string_view::npos ? std::string_view{} : body.substr(comma + 1);
    std::size_t colon = item.rfind(':');
    if (colon == std::string_view::npos) return InvalidArgumentError("bad alloc entry");
    ASSIGN_OR_RETURN(topo::NodeId node, cluster.FindNode(item.substr(0, colon)));
    std::string mask_text(item.substr(colon + 1));
    char* end = nullptr;
    std::uint64_t mask = std::strtoull(mask_text.c_str(), &end, 16);
    if (end == mask_text.c_str() || *end != '\0' || mask == 0) {
      return InvalidArgumentError("bad GPU mask " + mask_text);
    }
    p.nodes.push_back({node, mask});
  }
  if (p.nodes.empty()) return InvalidArgumentError("empty alloc");
  p.span = sched::SpanOf(cluster, p.nodes);
  return p;
}

std::vector<PlacedNode> ToStoredPlacement(const topo::Cluster& cluster,
                                          const sched::Placement& placement) {
  std::vector<PlacedNode> out;
  for (const auto& a : placement.nodes) out.push_back({cluster.node(a.node).name, a.mask});
  return out;
}

Result<sched::Placement> FromStoredPlacement(const topo::Cluster& cluster,
                                             const std::vector<PlacedNode>& stored) {
  if (stored.empty()) return InvalidArgumentError("no placement on record");
  sched::Placement p;
  for (const PlacedNode& n : stored) {
    ASSIGN_OR_RETURN(topo::NodeId node, cluster.FindNode(n.node));
    const int gpus = cluster.node(node).gpus;
    if (n.mask == 0 || (gpus < 64 && (n.mask >> gpus) != 0)) {
      return InvalidArgumentError(
          fmt::format("GPU mask {:#x} does not fit node {} ({} GPUs)", n.mask, n.node, gpus));
    }
    p.nodes.push_back({node, n.mask});
  }
  p.span = sched::SpanOf(cluster, p.nodes);
  return p;
}

Result<sched::GangJob> GangJobFromRecord(const JobRecord& job, double time_scale,
                                         const topo::Cluster* cluster) {
  ASSIGN_OR_RETURN(JobSpec spec, ParseJobSpec(job.spec_json, BodyFormat::kJson));
  return GangJobFromSpec(job, spec, time_scale, cluster);
}

Result<sched::GangJob> GangJobFromSpec(const JobRecord& job, const JobSpec& spec, double time_scale,
                                       const topo::Cluster* cluster) {
  sched::GangJob g;
  g.id = SchedId(job.id);
  g.name = spec.name;
  g.tenant = job.tenant;
  if (spec.gpus > std::numeric_limits<int>::max()) return InvalidArgumentError("too many GPUs");
  g.gpus = static_cast<int>(spec.gpus);
  // gpus_per_node: exactly that many GPUs on each node, one task per node.
  g.gpus_per_task = spec.gpus_per_node;
  g.one_task_per_node = spec.gpus_per_node > 0;
  g.gpu_milli = spec.gpu_milli;
  g.cpu_milli = spec.cpu_milli;
  g.memory_mib = spec.memory_mib;
  for (const auto& [name, amount] : spec.extended) g.extended.push_back({name, amount});
  if (!spec.gpu_type.empty()) g.gpu_types = {spec.gpu_type};
  if (!spec.topology_required.empty()) {
    ASSIGN_OR_RETURN(topo::Level level, topo::ParseLevel(spec.topology_required));
    g.topology.required = level;
  }
  if (!spec.topology_preferred.empty()) {
    ASSIGN_OR_RETURN(topo::Level level, topo::ParseLevel(spec.topology_preferred));
    g.topology.preferred = level;
  }
  g.priority = spec.priority;
  g.preemptible = spec.preemptible;
  g.grace_period = Seconds(spec.grace_period_s);
  g.estimated_runtime = Seconds(spec.estimated_runtime_s * time_scale);
  g.submit_time = job.created_at;
  if (spec.elastic) {
    constexpr std::int64_t kMaxInt = std::numeric_limits<int>::max();
    if (spec.elastic->max_gpus > kMaxInt) return InvalidArgumentError("too many GPUs");
    g.elastic = {static_cast<int>(spec.elastic->min_gpus), static_cast<int>(spec.elastic->max_gpus),
                 static_cast<int>(spec.elastic->step_gpus)};
    if (g.elastic.step_gpus == 0 && cluster != nullptr) {
      g.elastic.step_gpus = sched::DefaultElasticStep(g, *cluster);
    }
  }
  return g;
}

}  // namespace baton::server
