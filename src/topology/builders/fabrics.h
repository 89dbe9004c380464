// Builders for standard GPU fabrics from a few parameters: a leaf/spine/core fat-tree, a
// rail-optimised fat-tree (DGX SuperPOD: scalable units of 32 nodes), and Dragonfly+ (groups of
// leaves with all-to-all global links). Every parameter is checked; a bad one is an
// InvalidArgument naming it. Named presets cover the common cases for the CLI and tests.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "topology/cluster.h"

namespace baton::topo {

// What the nodes are and how they sit in racks; shared by every fabric.
struct NodeLayout {
  int nodes = 0;
  std::string node_prefix = "gpu";  // nodes are named prefix + zero-padded number from 1
  std::string gpu = "H100-SXM";
  int gpus_per_node = 8;
  int cpus = 224;
  double memory_gib = 2048;
  int numa_nodes = 2;
  int gpus_per_pcie_switch = 2;
  int nics = 8;                     // compute NICs per node
  double nic_gbps = 400;            // per NIC (NDR InfiniBand)
  int nodes_per_nvlink_domain = 1;  // 18 for a GB200 NVL72 rack (4 GPUs per node)
  int nodes_per_rack = 4;
  int pdus_per_rack = 2;
  int racks_per_row = 8;
  // Named extended resources of the first `extended_nodes` nodes (-1: all of them); the rest get
  // a shape without them (a partly fitted-out cluster: RDMA NICs or local NVMe on some nodes).
  std::vector<ExtendedResource> extended;
  int extended_nodes = -1;
};

struct FatTreeParams {
  std::string name = "fat-tree";
  NodeLayout layout;
  int tiers = 3;  // 2 = leaf + spine, 3 = leaf + spine + core
  int nodes_per_leaf = 32;
  int leaf_radix = 64;        // node-facing ports of a leaf (one per node, per rail)
  int leaves_per_spine = 16;  // leaves under one spine group (a "pod")
  double leaf_oversubscription = 1.0;
  double spine_oversubscription = 1.0;
};

struct RailOptimizedParams {
  std::string name = "superpod";
  NodeLayout layout;
  int nodes_per_su = 32;       // a DGX SuperPOD scalable unit
  int rail_switch_radix = 64;  // ports of each rail (leaf) switch facing nodes
  int sus_per_spine = 4;       // scalable units under one spine group
  double spine_oversubscription = 1.0;
};

struct DragonflyPlusParams {
  std::string name = "dragonfly+";
  NodeLayout layout;  // layout.nodes = 0 means fill every group
  int groups = 8;
  int leaves_per_group = 16;
  int nodes_per_leaf = 16;
  int leaf_radix = 32;
  double leaf_oversubscription = 1.0;
  double global_oversubscription = 2.0;  // intra-group : global bandwidth
};

Result<Cluster> BuildFatTree(const FatTreeParams& params);
Result<Cluster> BuildRailOptimized(const RailOptimizedParams& params);
Result<Cluster> BuildDragonflyPlus(const DragonflyPlusParams& params);

struct Preset {
  std::string_view name;
  std::string_view description;
};
std::span<const Preset> Presets();
// Builds a named preset ("superpod-h100", "fat-tree-h100", "dragonfly-a100", "gb200-nvl72",
// "fat-tree-131k", "dragonfly-131k").
Result<Cluster> BuildPreset(std::string_view name);

}  // namespace baton::topo
