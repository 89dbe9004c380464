// Kubernetes views of a Cluster: node labels (as kubectl commands), a Kueue Topology whose
// levels are those labels, and Volcano HyperNode objects (the switch tree made explicit).
#pragma once

#include <string>
#include <vector>

#include "topology/cluster.h"

namespace baton::topo {

// The node label key of each switch tier, leaf first: "baton.io/" + LevelName of the tier
// ("baton.io/leaf", "baton.io/spine", ...); a level used by two tiers gets "-<tier>" on the second.
std::vector<std::string> TierLabelKeys(const Cluster& cluster);

// One "kubectl label node <name> --overwrite k=v ..." line per node: the switch of each tier
// (TierLabelKeys), nvidia.com/gpu.product and nvidia.com/gpu.count, nvidia.com/gpu.clique
// "<cluster>.<n>" for nodes in a multi-node NVLink domain (n counts those domains from 0),
// baton.io/rack, then the node's own labels. Values are made label-safe ([A-Za-z0-9._-]) and
// shell-quoted where needed.
std::string ExportK8sNodeLabels(const Cluster& cluster);

// A kueue.x-k8s.io/v1beta2 Topology named after the cluster: the tier labels coarsest first, then
// nvidia.com/gpu.clique when every node is in a multi-node NVLink domain, then
// kubernetes.io/hostname.
std::string ExportKueueTopology(const Cluster& cluster);

// A YAML stream of topology.volcano.sh/v1alpha1 HyperNodes: one per switch, tier = switch tier
// + 1, members "type: Node" (leaves) or "type: HyperNode" (upper switches), all by exactMatch.
// When multi-node NVLink domains exist they are the tier-1 HyperNodes, switches move up one tier,
// and a leaf lists each domain whose first node it holds instead of that domain's nodes.
std::string ExportVolcanoHyperNodes(const Cluster& cluster);

}  // namespace baton::topo
