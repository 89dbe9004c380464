#include "topology/builders/fabrics.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <vector>

namespace baton::topo {
namespace {

Status Bad(std::string_view field, std::string_view why) {
  return InvalidArgumentError(fmt::format("field '{}': {}", field, why));
}

Status CheckPositive(std::string_view field, long long v, long long max = 1LL << 24) {
  if (v <= 0) return Bad(field, fmt::format("must be > 0, got {}", v));
  if (v > max) return Bad(field, fmt::format("{} is absurdly large (max {})", v, max));
  return Status::Ok();
}

std::string Numbered(std::string_view prefix, long long i, long long count) {
  int width = std::max<int>(3, static_cast<int>(fmt::formatted_size("{}", count)));
  return fmt::format("{}{:0{}}", prefix, i, width);
}

Status CheckLayout(const NodeLayout& l, bool allow_zero_nodes) {
  if (!(allow_zero_nodes && l.nodes == 0))
    RETURN_IF_ERROR(CheckPositive("nodes", l.nodes, 1 << 22));
  RETURN_IF_ERROR(CheckPositive("gpus_per_node", l.gpus_per_node, kMaxGpusPerNode));
  RETURN_IF_ERROR(CheckPositive("nodes_per_nvlink_domain", l.nodes_per_nvlink_domain, 1024));
  RETURN_IF_ERROR(CheckPositive("nodes_per_rack", l.nodes_per_rack, 1024));
  RETURN_IF_ERROR(CheckPositive("pdus_per_rack", l.pdus_per_rack, 64));
  RETURN_IF_ERROR(CheckPositive("racks_per_row", l.racks_per_row, 4096));
  if (l.nodes_per_rack % l.pdus_per_rack != 0 && l.pdus_per_rack > l.nodes_per_rack) {
    return Bad("pdus_per_rack", "more PDUs than nodes in a rack");
  }
  if (l.cpus < 0) return Bad("cpus", "must not be negative");
  if (!(l.memory_gib >= 0)) return Bad("memory_gib", "must not be negative");
  if (l.nics < 0) return Bad("nics", "must not be negative");
  if (!(l.nic_gbps > 0)) return Bad("nic_gbps", "must be > 0");
  if (l.node_prefix.empty()) return Bad("node_prefix", "must not be empty");
  return Status::Ok();
}

// Adds the layout's nodes, NVLink domains and failure domains; returns the node ids in order.
Result<std::vector<NodeId>> AddNodes(ClusterBuilder& b, const NodeLayout& l) {
  ASSIGN_OR_RETURN(const GpuSpec* gpu, FindGpu(l.gpu));
  NodeShape shape;
  shape.name = fmt::format("{}x{}", l.gpus_per_node, gpu->name);
  shape.gpu = gpu;
  shape.gpus = l.gpus_per_node;
  shape.cpus = l.cpus;
  shape.memory = GiB(l.memory_gib);
  shape.numa_nodes = l.numa_nodes;
  shape.gpus_per_pcie_switch = std::min(l.gpus_per_pcie_switch, l.gpus_per_node);
  shape.nics = l.nics;
  shape.nic_bandwidth = Gbps(l.nic_gbps);
  if (l.extended_nodes < -1 || l.extended_nodes > l.nodes) {
    return Bad("extended_nodes", fmt::format("must be -1 (all) or 0..{}", l.nodes));
  }
  const int fitted = l.extended.empty() ? 0 : l.extended_nodes < 0 ? l.nodes : l.extended_nodes;
  NodeShapeId plain_id;
  NodeShapeId fitted_id;
  if (fitted < l.nodes) {
    NodeShape plain = shape;
    ASSIGN_OR_RETURN(plain_id, b.AddShape(std::move(plain)));
  }
  if (fitted > 0) {
    shape.name += "-ext";
    shape.extended = l.extended;
    ASSIGN_OR_RETURN(fitted_id, b.AddShape(std::move(shape)));
  }

  std::vector<NodeId> ids;
  ids.reserve(static_cast<std::size_t>(l.nodes));
  for (int i = 1; i <= l.nodes; ++i) {
    ASSIGN_OR_RETURN(NodeId id, b.AddNode(Numbered(l.node_prefix, i, l.nodes),
                                          i <= fitted ? fitted_id : plain_id));
    ids.push_back(id);
  }
  std::span<const NodeId> all(ids);
  if (l.nodes_per_nvlink_domain > 1) {
    if (l.nodes % l.nodes_per_nvlink_domain != 0) {
      return Bad("nodes", fmt::format("{} nodes do not fill whole NVLink domains of {}", l.nodes,
                                      l.nodes_per_nvlink_domain));
    }
    const int count = l.nodes / l.nodes_per_nvlink_domain;
    for (int d = 0; d < count; ++d) {
      auto part = all.subspan(static_cast<std::size_t>(d) * l.nodes_per_nvlink_domain,
                              l.nodes_per_nvlink_domain);
      RETURN_IF_ERROR(b.AddNvlinkDomain(Numbered("nvl", d + 1, count), part).status());
    }
  }
  const int racks = (l.nodes + l.nodes_per_rack - 1) / l.nodes_per_rack;
  const int rows = (racks + l.racks_per_row - 1) / l.racks_per_row;
  const int per_pdu = std::max(1, l.nodes_per_rack / l.pdus_per_rack);
  for (int r = 0; r < racks; ++r) {
    std::size_t begin = static_cast<std::size_t>(r) * l.nodes_per_rack;
    auto rack_nodes =
        all.subspan(begin, std::min<std::size_t>(l.nodes_per_rack, ids.size() - begin));
    std::string rack = Numbered("rack", r + 1, racks);
    RETURN_IF_ERROR(b.AddFailureDomain(FailureDomainKind::kRack, rack, rack_nodes));
    for (std::size_t p = 0, k = 1; p < rack_nodes.size(); p += per_pdu, ++k) {
      auto pdu_nodes = rack_nodes.subspan(p, std::min<std::size_t>(per_pdu, rack_nodes.size() - p));
      RETURN_IF_ERROR(
          b.AddFailureDomain(FailureDomainKind::kPdu, fmt::format("{}-pdu{}", rack, k), pdu_nodes));
    }
  }
  for (int w = 0; w < rows; ++w) {
    std::size_t begin = static_cast<std::size_t>(w) * l.racks_per_row * l.nodes_per_rack;
    std::size_t n = std::min<std::size_t>(
        static_cast<std::size_t>(l.racks_per_row) * l.nodes_per_rack, ids.size() - begin);
    RETURN_IF_ERROR(b.AddFailureDomain(FailureDomainKind::kRow, Numbered("row", w + 1, rows),
                                       all.subspan(begin, n)));
  }
  return ids;
}

// Groups `children` into parents of `fanout`, each named prefix+number; returns the parents.
Result<std::vector<SwitchId>> AddParents(ClusterBuilder& b, std::span<const SwitchId> children,
                                         int fanout, std::string_view prefix) {
  const long long count = (static_cast<long long>(children.size()) + fanout - 1) / fanout;
  std::vector<SwitchId> parents;
  for (long long p = 0; p < count; ++p) {
    ASSIGN_OR_RETURN(SwitchId s, b.AddSwitch(Numbered(prefix, p + 1, count)));
    for (std::size_t i = p * fanout; i < std::min<std::size_t>(children.size(), (p + 1) * fanout);
         ++i) {
      RETURN_IF_ERROR(b.AttachSwitch(s, children[i]));
    }
    parents.push_back(s);
  }
  return parents;
}

Result<std::vector<SwitchId>> AddLeaves(ClusterBuilder& b, std::span<const NodeId> nodes,
                                        int nodes_per_leaf, std::string_view prefix) {
  const long long count =
      (static_cast<long long>(nodes.size()) + nodes_per_leaf - 1) / nodes_per_leaf;
  std::vector<SwitchId> leaves;
  for (long long l = 0; l < count; ++l) {
    ASSIGN_OR_RETURN(SwitchId s, b.AddSwitch(Numbered(prefix, l + 1, count)));
    for (std::size_t i = l * nodes_per_leaf;
         i < std::min<std::size_t>(nodes.size(), (l + 1) * nodes_per_leaf); ++i) {
      RETURN_IF_ERROR(b.AttachNode(s, nodes[i]));
    }
    leaves.push_back(s);
  }
  return leaves;
}

Status CheckDomainsFitLeaves(const NodeLayout& l, int nodes_per_leaf) {
  if (l.nodes_per_nvlink_domain > 1 && nodes_per_leaf % l.nodes_per_nvlink_domain != 0) {
    return Bad("nodes_per_nvlink_domain",
               fmt::format("NVLink domains of {} nodes would straddle leaves of {} nodes",
                           l.nodes_per_nvlink_domain, nodes_per_leaf));
  }
  return Status::Ok();
}

Result<Cluster> BuildTree(const std::string& name, FabricKind kind, const NodeLayout& layout,
                          int tiers, int nodes_per_leaf, int leaf_radix, int leaves_per_spine,
                          std::string_view leaf_prefix, double leaf_os, double spine_os) {
  RETURN_IF_ERROR(CheckLayout(layout, false));
  if (tiers != 2 && tiers != 3) return Bad("tiers", fmt::format("must be 2 or 3, got {}", tiers));
  RETURN_IF_ERROR(CheckPositive("nodes_per_leaf", nodes_per_leaf, 4096));
  RETURN_IF_ERROR(CheckPositive("leaf_radix", leaf_radix, 4096));
  RETURN_IF_ERROR(CheckPositive("leaves_per_spine", leaves_per_spine, 1 << 16));
  if (leaf_radix < nodes_per_leaf) {
    return Bad("leaf_radix", fmt::format("{} ports cannot take the {} nodes of a leaf", leaf_radix,
                                         nodes_per_leaf));
  }
  RETURN_IF_ERROR(CheckDomainsFitLeaves(layout, nodes_per_leaf));
  const long long leaves = (layout.nodes + nodes_per_leaf - 1) / nodes_per_leaf;
  if (tiers == 2 && leaves > leaves_per_spine) {
    return Bad("tiers", fmt::format("a 2-tier tree holds {} leaves under one spine group; {} "
                                    "nodes need {} leaves (use tiers: 3)",
                                    leaves_per_spine, layout.nodes, leaves));
  }
  ClusterBuilder b(name, kind);
  ASSIGN_OR_RETURN(auto nodes, AddNodes(b, layout));
  ASSIGN_OR_RETURN(auto leaf_ids, AddLeaves(b, nodes, nodes_per_leaf, leaf_prefix));
  ASSIGN_OR_RETURN(auto spines, AddParents(b, leaf_ids, leaves_per_spine, "spine"));
  if (tiers == 3) {
    ASSIGN_OR_RETURN(auto core, AddParents(b, spines, static_cast<int>(spines.size()), "core"));
    (void)core;
  }
  RETURN_IF_ERROR(b.SetOversubscription(0, leaf_os).WithPrefix("field 'leaf_oversubscription'"));
  RETURN_IF_ERROR(b.SetOversubscription(1, spine_os).WithPrefix("field 'spine_oversubscription'"));
  RETURN_IF_ERROR(b.SetTierLevels({Level::kLeaf, Level::kSpine, Level::kCore}));
  return b.Build();
}

}  // namespace

Result<Cluster> BuildFatTree(const FatTreeParams& p) {
  return BuildTree(p.name, FabricKind::kFatTree, p.layout, p.tiers, p.nodes_per_leaf, p.leaf_radix,
                   p.leaves_per_spine, "leaf", p.leaf_oversubscription, p.spine_oversubscription);
}

Result<Cluster> BuildRailOptimized(const RailOptimizedParams& p) {
  // Each scalable unit is one logical leaf: its nodes' rail-i NICs all meet on rail switch i, so
  // any two GPUs of an SU are one switch hop apart (cross-rail traffic rides NVLink first, PXN).
  RETURN_IF_ERROR(CheckPositive("nodes_per_su", p.nodes_per_su, 4096));
  RETURN_IF_ERROR(CheckPositive("sus_per_spine", p.sus_per_spine, 1 << 16));
  const long long sus = (p.layout.nodes + p.nodes_per_su - 1) / std::max(1, p.nodes_per_su);
  const int tiers = sus > p.sus_per_spine ? 3 : 2;
  return BuildTree(p.name, FabricKind::kRailOptimized, p.layout, tiers, p.nodes_per_su,
                   p.rail_switch_radix, p.sus_per_spine, "su", 1.0, p.spine_oversubscription);
}

Result<Cluster> BuildDragonflyPlus(const DragonflyPlusParams& p) {
  RETURN_IF_ERROR(CheckPositive("groups", p.groups, 1 << 16));
  RETURN_IF_ERROR(CheckPositive("leaves_per_group", p.leaves_per_group, 4096));
  RETURN_IF_ERROR(CheckPositive("nodes_per_leaf", p.nodes_per_leaf, 4096));
  RETURN_IF_ERROR(CheckPositive("leaf_radix", p.leaf_radix, 4096));
  if (p.leaf_radix < p.nodes_per_leaf) {
    return Bad("leaf_radix", fmt::format("{} ports cannot take the {} nodes of a leaf",
                                         p.leaf_radix, p.nodes_per_leaf));
  }
  NodeLayout layout = p.layout;
  const long long capacity =
      static_cast<long long>(p.groups) * p.leaves_per_group * p.nodes_per_leaf;
  if (capacity > (1 << 22)) return Bad("groups", "the fabric would hold more than 4M nodes");
  if (layout.nodes == 0) layout.nodes = static_cast<int>(capacity);
  RETURN_IF_ERROR(CheckLayout(layout, false));
  if (layout.nodes > capacity) {
    return Bad("nodes", fmt::format("{} nodes do not fit {} groups x {} leaves x {} nodes",
                                    layout.nodes, p.groups, p.leaves_per_group, p.nodes_per_leaf));
  }
  RETURN_IF_ERROR(CheckDomainsFitLeaves(layout, p.nodes_per_leaf));
  ClusterBuilder b(p.name, FabricKind::kDragonflyPlus);
  ASSIGN_OR_RETURN(auto nodes, AddNodes(b, layout));
  ASSIGN_OR_RETURN(auto leaf_ids, AddLeaves(b, nodes, p.nodes_per_leaf, "leaf"));
  ASSIGN_OR_RETURN(auto groups, AddParents(b, leaf_ids, p.leaves_per_group, "group"));
  if (groups.size() > 1) {
    ASSIGN_OR_RETURN(auto global, AddParents(b, groups, static_cast<int>(groups.size()), "global"));
    (void)global;
  }
  RETURN_IF_ERROR(b.SetOversubscription(0, p.leaf_oversubscription)
                      .WithPrefix("field 'leaf_oversubscription'"));
  RETURN_IF_ERROR(b.SetOversubscription(1, p.global_oversubscription)
                      .WithPrefix("field 'global_oversubscription'"));
  RETURN_IF_ERROR(b.SetTierLevels({Level::kLeaf, Level::kGroup, Level::kCore}));
  return b.Build();
}

namespace {

constexpr std::array<Preset, 6> kPresets = {{
    {"superpod-h100",
     "DGX SuperPOD H100: 4 scalable units x 32 nodes x 8 GPUs, rail-optimised NDR"},
    {"fat-tree-h100", "512 HGX H100 nodes on a 3-tier fat-tree, 2:1 oversubscribed above the leaf"},
    {"dragonfly-a100", "Dragonfly+ of 8 groups x 16 leaves x 16 A100 nodes (HDR 200G)"},
    {"gb200-nvl72", "8 GB200 NVL72 racks (18 nodes x 4 GPUs, one NVLink domain per rack)"},
    {"fat-tree-131k", "16,384 HGX H100 nodes = 131,072 GPUs on a 3-tier fat-tree"},
    {"dragonfly-131k", "16,384 HGX H100 nodes = 131,072 GPUs on Dragonfly+ (32 groups)"},
}};

}  // namespace

std::span<const Preset> Presets() { return kPresets; }

Result<Cluster> BuildPreset(std::string_view name) {
  if (name == "superpod-h100") {
    RailOptimizedParams p;
    p.name = "superpod-h100";
    p.layout.nodes = 128;
    return BuildRailOptimized(p);
  }
  if (name == "fat-tree-h100") {
    FatTreeParams p;
    p.name = "fat-tree-h100";
    p.layout.nodes = 512;
    p.spine_oversubscription = 2.0;
    return BuildFatTree(p);
  }
  if (name == "dragonfly-a100") {
    DragonflyPlusParams p;
    p.name = "dragonfly-a100";
    p.layout.gpu = "A100-80GB";
    p.layout.nic_gbps = 200;
    p.layout.cpus = 128;
    p.layout.memory_gib = 1024;
    return BuildDragonflyPlus(p);
  }
  if (name == "gb200-nvl72") {
    FatTreeParams p;
    p.name = "gb200-nvl72";
    p.layout.nodes = 8 * 18;
    p.layout.gpu = "GB200";
    p.layout.gpus_per_node = 4;
    p.layout.nics = 4;
    p.layout.nic_gbps = 800;
    p.layout.cpus = 144;
    p.layout.memory_gib = 960;
    p.layout.numa_nodes = 2;
    p.layout.nodes_per_nvlink_domain = 18;
    p.layout.nodes_per_rack = 18;
    p.nodes_per_leaf = 36;
    p.leaves_per_spine = 4;
    return BuildFatTree(p);
  }
  if (name == "fat-tree-131k") {
    FatTreeParams p;
    p.name = "fat-tree-131k";
    p.layout.nodes = 16384;
    return BuildFatTree(p);
  }
  if (name == "dragonfly-131k") {
    DragonflyPlusParams p;
    p.name = "dragonfly-131k";
    p.groups = 32;
    p.leaves_per_group = 16;
    p.nodes_per_leaf = 32;
    p.leaf_radix = 64;
    return BuildDragonflyPlus(p);
  }
  std::string known;
  for (const auto& pr : kPresets) known += (known.empty() ? "" : ", ") + std::string(pr.name);
  return NotFoundError(fmt::format("unknown preset '{}' (known: {})", name, known));
}

}  // namespace baton::topo
