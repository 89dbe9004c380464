// Node filters.
//   health     nothing new lands on a suspect, draining or down node
//   gpu-type   the node's GPU is one of the job's accepted types (compiled at admission)
//   bad-nodes  never again on a node that failed under this job
//   node-attributes  the node meets the job's label / numeric attribute requirements (compiled
//              once per job through ClusterState's AttributeIndex)
//   resources  the node has one task's CPU and memory free (HostResources)
#pragma once

#include "sched/framework/plugin.h"

namespace baton::sched {

class HealthFilterPlugin final : public Plugin, public FilterPlugin {
 public:
  std::string_view Name() const override { return "health"; }
  bool Stateless() const override { return true; }
  bool DecidedByShape(const JobInfo&) const override { return true; }
  PluginStatus Filter(const PluginContext& ctx, const JobInfo& job, topo::NodeId node) override;
};

class GpuTypeFilterPlugin final : public Plugin, public FilterPlugin {
 public:
  std::string_view Name() const override { return "gpu-type"; }
  bool Stateless() const override { return true; }
  bool DecidedByShape(const JobInfo&) const override { return true; }  // accepted types
  PluginStatus Filter(const PluginContext& ctx, const JobInfo& job, topo::NodeId node) override;
};

class BadNodesFilterPlugin final : public Plugin, public FilterPlugin {
 public:
  std::string_view Name() const override { return "bad-nodes"; }
  bool Stateless() const override { return true; }
  bool DecidedByShape(const JobInfo& job) const override { return job.bad_nodes.empty(); }
  PluginStatus Filter(const PluginContext& ctx, const JobInfo& job, topo::NodeId node) override;
};

class NodeAttributesFilterPlugin final : public Plugin, public FilterPlugin {
 public:
  std::string_view Name() const override { return "node-attributes"; }
  bool Stateless() const override { return true; }
  bool DecidedByShape(const JobInfo& job) const override { return job.allowed_nodes == nullptr; }
  PluginStatus Filter(const PluginContext& ctx, const JobInfo& job, topo::NodeId node) override;
};

class ResourcesFilterPlugin final : public Plugin, public FilterPlugin {
 public:
  std::string_view Name() const override { return "resources"; }
  bool Stateless() const override { return true; }
  bool DecidedByShape(const JobInfo& job) const override { return TaskHost(job).empty(); }
  PluginStatus Filter(const PluginContext& ctx, const JobInfo& job, topo::NodeId node) override;
};

}  // namespace baton::sched
