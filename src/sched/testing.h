// Test helpers shared by the sched tests: small fat-trees and job specs.
#pragma once

#include <string>

#include "sched/framework/job.h"
#include "sched/framework/plugin.h"
#include "sched/framework/types.h"
#include "topology/builders/fabrics.h"

namespace baton::sched::testing {

// nodes gpu001.. (8 GPUs each), `per_leaf` nodes per leaf, 2 leaves per spine, one core.
inline topo::Cluster SmallTree(int nodes = 8, int per_leaf = 2, int gpus_per_node = 8,
                               int nodes_per_domain = 1) {
  topo::FatTreeParams p;
  p.name = "small";
  p.layout.nodes = nodes;
  p.layout.gpus_per_node = gpus_per_node;
  p.layout.nodes_per_nvlink_domain = nodes_per_domain;
  p.layout.nodes_per_rack = 2;
  p.nodes_per_leaf = per_leaf;
  p.leaf_radix = per_leaf;
  p.leaves_per_spine = 2;
  p.tiers = 3;
  auto c = topo::BuildFatTree(p);
  CHECK(c.ok()) << c.status().ToString();
  return std::move(c).value();
}

inline GangJob Job(std::uint64_t id, int gpus, int priority = 0) {
  GangJob j;
  j.id = JobId(id);
  j.name = "job" + std::to_string(id);
  j.gpus = gpus;
  j.priority = priority;
  return j;
}

inline TimePoint At(double s) { return TimePoint{Seconds(s)}; }

// A filter plugin ("even-nodes") that refuses the odd nodes; stateless. For tests that extend a
// registry: registry["even-nodes"] = NoArgs<testing::EvenNodesOnly>().
class EvenNodesOnly final : public Plugin, public FilterPlugin {
 public:
  std::string_view Name() const override { return "even-nodes"; }
  bool Stateless() const override { return true; }
  PluginStatus Filter(const PluginContext&, const JobInfo&, topo::NodeId node) override {
    return node.value() % 2 == 0 ? PluginStatus::Success() : PluginStatus::Unresolvable("odd node");
  }
};

}  // namespace baton::sched::testing
