// Kubernetes views of a Cluster: node labels (as kubectl commands), a Kueue Topology whose
// levels are those labels, and Volcano HyperNode objects (the switch tree made explicit).
#pragma once

#include <map>
#include <span>
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

// A Kubernetes Node reduced to what ImportK8sNodes reads (the apiserver's Node object: its
// labels and status.allocatable).
struct K8sNode {
  std::string name;
  std::map<std::string, std::string> labels;
  int gpus = 0;  // allocatable nvidia.com/gpu
  int cpus = 0;  // allocatable cpu, whole cores; 0: unknown
  Bytes memory;  // allocatable memory; 0: unknown
};

// The inverse of ExportK8sNodeLabels: the cluster that nodes labelled that way form. Switch
// tiers from the "baton.io/<level>" labels (leaf, spine, group, core; every node must carry the
// same tiers, and a switch has one parent), the GPU type from nvidia.com/gpu.product (the
// catalogue's aliases; an unknown product is declared with unknown figures), GPUs, CPUs and
// memory from allocatable, racks from baton.io/rack, multi-node NVLink domains from
// nvidia.com/gpu.clique. Nodes without GPUs are left out; without any tier label, one leaf named
// after the cluster holds every node. Errors name the node and the label.
Result<Cluster> ImportK8sNodes(std::string name, std::span<const K8sNode> nodes);

}  // namespace baton::topo
