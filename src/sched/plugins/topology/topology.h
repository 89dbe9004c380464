// TopologyPlugin ("topology"): the placement plugin for gangs. It places the whole gang in the
// lowest subtree that fits (node, NVLink domain, leaf, spine/group, core), never above the job's
// required level; among the subtrees of that level it prefers the best fit (fewest task slots
// left over), which keeps emptier nodes, NVLink domains and leaves whole for large jobs. Inside a
// subtree it descends the same way: a child that can take the whole remainder is chosen best-fit,
// otherwise the children with the most room come first (fewest subtrees spanned). Sub-group
// constraints (each slice of S GPUs inside a level) are kept by taking whole slices per subtree of
// that level; a failure-domain spread puts each task in a distinct domain. Every tie breaks on the
// lowest id, so the same state gives the same placement. Subtree room comes from ClusterState's
// O(1) slot counts; nodes are examined (and filtered) only inside chosen subtrees.
#pragma once

#include <array>
#include <set>
#include <vector>

#include "sched/framework/plugin.h"

namespace baton::sched {

class TopologyPlugin final : public Plugin, public PlacementPlugin {
 public:
  std::string_view Name() const override { return "topology"; }
  PluginStatus Propose(const PluginContext& ctx, const JobInfo& job, const NodeFilter& filter,
                       int max_candidates, std::vector<Placement>* out) override;
  bool Deterministic() const override { return true; }
  bool Stateless() const override { return true; }
  // Sub-groups, a spread and one task per node place by more than the shape.
  bool DecidedByShape(const JobInfo& job) const override {
    return job.spec.sub_groups.empty() && !job.spec.spread && !job.spec.one_task_per_node;
  }
};

}  // namespace baton::sched
