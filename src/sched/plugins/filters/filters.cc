#include "sched/plugins/filters/filters.h"

#include <algorithm>

#include "sched/framework/registry.h"

namespace baton::sched {

PluginStatus HealthFilterPlugin::Filter(const PluginContext& ctx, const JobInfo&,
                                        topo::NodeId node) {
  if (ctx.state.cluster().node(node).health != topo::NodeHealth::kHealthy) {
    return PluginStatus::Unschedulable("node not healthy");
  }
  return PluginStatus::Success();
}

PluginStatus GpuTypeFilterPlugin::Filter(const PluginContext& ctx, const JobInfo& job,
                                         topo::NodeId node) {
  if (job.accepted_gpus.empty()) return PluginStatus::Success();
  const topo::GpuSpec* gpu = ctx.state.cluster().shape_of(node).gpu;
  if (std::find(job.accepted_gpus.begin(), job.accepted_gpus.end(), gpu) ==
      job.accepted_gpus.end()) {
    return PluginStatus::Unresolvable("GPU type not accepted");
  }
  return PluginStatus::Success();
}

PluginStatus BadNodesFilterPlugin::Filter(const PluginContext&, const JobInfo& job,
                                          topo::NodeId node) {
  if (std::binary_search(job.bad_nodes.begin(), job.bad_nodes.end(), node)) {
    return PluginStatus::Unresolvable("node failed under this job before");
  }
  return PluginStatus::Success();
}

PluginStatus NodeAttributesFilterPlugin::Filter(const PluginContext&, const JobInfo& job,
                                                topo::NodeId node) {
  if (job.allowed_nodes && !(*job.allowed_nodes)[node.value()]) {
    return PluginStatus::Unresolvable("node attributes do not meet the job's requirements");
  }
  return PluginStatus::Success();
}

PluginStatus ResourcesFilterPlugin::Filter(const PluginContext& ctx, const JobInfo& job,
                                           topo::NodeId node) {
  // Read in place (called per node per job: no copy of the request).
  const ExtendedRequest& ext = job.extended;
  if (job.spec.cpu_milli == 0 && job.spec.memory_mib == 0 && ext.count == 0) {
    return PluginStatus::Success();
  }
  const ClusterState::HostUsage& h = ctx.state.Host(node);
  if (job.spec.cpu_milli > h.cpu_free()) {
    return PluginStatus::Unschedulable("not enough CPU free");
  }
  if (job.spec.memory_mib > h.memory_free()) {
    return PluginStatus::Unschedulable("not enough memory free");
  }
  for (int i = 0; i < ext.count; ++i) {
    const int id = ext.id[i];
    if (ext.amount[i] > ctx.state.ExtendedFree(node, id)) {
      // A node whose shape lacks the resource never has it; one that has it may free it.
      if (ctx.state.ExtendedCapacity(node, id) < ext.amount[i]) {
        return PluginStatus::Unresolvable("node has too little of an extended resource");
      }
      return PluginStatus::Unschedulable("not enough of an extended resource free");
    }
  }
  return PluginStatus::Success();
}

void RegisterFilterPlugins(PluginRegistry& registry) {
  registry["health"] = NoArgs<HealthFilterPlugin>();
  registry["gpu-type"] = NoArgs<GpuTypeFilterPlugin>();
  registry["bad-nodes"] = NoArgs<BadNodesFilterPlugin>();
  registry["node-attributes"] = NoArgs<NodeAttributesFilterPlugin>();
  registry["resources"] = NoArgs<ResourcesFilterPlugin>();
}

}  // namespace baton::sched
