// Cluster: the GPU cluster as data — nodes and their GPUs, NVLink domains, the switch tree
// (leaf / spine / core, or Dragonfly+ leaf / group / global), failure domains (rack, PDU, row),
// and per-level link bandwidth and latency. Built and validated by ClusterBuilder (or the
// builders/ and io/ on top of it); afterwards the structure is immutable and only allocation and
// health change, each in O(tree depth).
//
// Thread safety: const methods may run concurrently; mutations need external synchronisation.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "core/ids.h"
#include "core/status.h"
#include "core/units.h"
#include "topology/gpu.h"

namespace baton::topo {

// Where two GPUs (or nodes) meet, from closest to farthest. kNode: same node (NVLink inside an
// HGX board). kNvlinkDomain: different nodes of one multi-node NVLink domain (NVL72). kLeaf,
// kSpine, kGroup, kCore: the lowest switch tier they share. kNone: not connected at all.
enum class Level : std::uint8_t {
  kGpu = 0,
  kNode,
  kNvlinkDomain,
  kLeaf,
  kSpine,
  kGroup,
  kCore,
  kNone,
};
inline constexpr int kLevelCount = 8;
std::string_view LevelName(Level level);  // "gpu", "node", "nvlink-domain", "leaf", ...
Result<Level> ParseLevel(std::string_view name);

enum class NodeHealth : std::uint8_t { kHealthy, kSuspect, kDraining, kDown };
std::string_view NodeHealthName(NodeHealth h);

enum class FailureDomainKind : std::uint8_t { kRack, kPdu, kRow };
std::string_view FailureDomainKindName(FailureDomainKind k);

struct NodeTag {};
struct SwitchTag {};
struct NvlinkDomainTag {};
struct FailureDomainTag {};
struct NodeShapeTag {};
using NodeId = Id<NodeTag>;
using SwitchId = Id<SwitchTag>;
using NvlinkDomainId = Id<NvlinkDomainTag>;
using FailureDomainId = Id<FailureDomainTag>;
using NodeShapeId = Id<NodeShapeTag, std::uint16_t>;

// One GPU: a node and its local index (0-based, CUDA order).
struct GpuRef {
  NodeId node;
  std::uint8_t index = 0;
  auto operator<=>(const GpuRef&) const = default;
};

inline constexpr int kMaxGpusPerNode = 64;
inline constexpr int kMaxSwitchTiers = 4;

// A named extended resource a node offers, in whole units, like a Kubernetes extended resource
// ("rdma_nic": 4, "nvme_gb": 3000, "example.com/fpga": 2). Names match
// [a-z][a-z0-9_./-]{0,62} (CheckExtendedResourceName); amounts are 0..kMaxExtendedAmount.
struct ExtendedResource {
  std::string name;
  std::int64_t amount = 0;
  bool operator==(const ExtendedResource&) const = default;
};
inline constexpr int kMaxExtendedPerNode = 16;    // names one node shape may declare
inline constexpr int kMaxExtendedResources = 64;  // distinct names in one cluster
inline constexpr std::int64_t kMaxExtendedAmount = std::int64_t{1} << 50;
// Ok, or InvalidArgument saying why `name` is not an extended resource name.
Status CheckExtendedResourceName(std::string_view name);

// What a node is made of. Many nodes share one shape.
struct NodeShape {
  std::string name;  // "hgx-h100"
  const GpuSpec* gpu = nullptr;
  int gpus = 8;
  int cpus = 0;
  Bytes memory;
  int numa_nodes = 2;
  int gpus_per_pcie_switch = 2;  // GPUs sharing one PCIe switch (and usually one NIC)
  int nics = 8;                  // compute-fabric NICs (one per rail on rail-optimised fabrics)
  BytesPerSecond nic_bandwidth;  // per NIC, per direction
  // Named extended resources of each node of this shape; AddShape sorts them by name. A name not
  // listed is a resource the node does not have (0), unlike cpus / memory where 0 = undeclared.
  std::vector<ExtendedResource> extended;
};

// GPU accounting for a subtree. free = allocatable now (healthy node, not allocated);
// unavailable = not allocated but on a node that is suspect, draining or down.
struct GpuCounts {
  std::int32_t total = 0;
  std::int32_t allocated = 0;
  std::int32_t free = 0;
  std::int32_t unavailable = 0;
  GpuCounts& operator+=(const GpuCounts& o);
  GpuCounts& operator-=(const GpuCounts& o);
  bool operator==(const GpuCounts&) const = default;
};

struct Node {
  std::string name;
  NodeShapeId shape;
  NvlinkDomainId nvlink_domain;
  // ancestors[t] is the switch of tier t above this node (tier 0 = leaf), invalid where the
  // node's path has no switch of that tier.
  std::array<SwitchId, kMaxSwitchTiers> ancestors;
  std::array<FailureDomainId, 3> failure_domains;  // indexed by FailureDomainKind
  std::vector<std::pair<std::string, std::string>> labels;
  std::uint64_t allocated_mask = 0;  // bit i = GPU i allocated
  std::uint8_t gpus = 0;
  NodeHealth health = NodeHealth::kHealthy;
};

struct Switch {
  std::string name;
  std::uint8_t tier = 0;  // 0 = leaf (has nodes); a parent's tier is above all its children's
  SwitchId parent;
  std::vector<SwitchId> child_switches;
  std::vector<NodeId> child_nodes;
  GpuCounts counts;
};

struct NvlinkDomain {
  std::string name;
  std::vector<NodeId> nodes;
  GpuCounts counts;
};

struct FailureDomain {
  std::string name;
  FailureDomainKind kind;
  std::vector<NodeId> nodes;
};

// Bandwidth (per GPU, per direction) and latency (per message) of a path meeting at a level.
struct LinkSpec {
  BytesPerSecond bandwidth;
  Seconds latency;
};

enum class FabricKind : std::uint8_t { kFatTree, kRailOptimized, kDragonflyPlus, kCustom };
std::string_view FabricKindName(FabricKind k);

class Cluster {
 public:
  Cluster(Cluster&&) = default;
  Cluster& operator=(Cluster&&) = default;
  // A deep copy, allocations and health included. The class is move-only so that a cluster is
  // never copied by accident; take a copy with Clone() where one is meant.
  Cluster Clone() const { return Cluster(*this); }

  const std::string& name() const { return name_; }
  FabricKind fabric() const { return fabric_; }

  std::span<const Node> nodes() const { return nodes_; }
  std::span<const Switch> switches() const { return switches_; }
  std::span<const NvlinkDomain> nvlink_domains() const { return domains_; }
  std::span<const FailureDomain> failure_domains() const { return failure_domains_; }
  std::span<const NodeShape> shapes() const { return shapes_; }
  // GPU types the cluster file declared (ClusterBuilder::AddGpuType), in declaration order. They
  // live as long as the cluster or any clone of it.
  std::span<const std::shared_ptr<const GpuSpec>> declared_gpus() const { return gpu_types_; }
  // A GPU type by name: a declared one (exact name, case-insensitive) first, then the built-in
  // catalogue (FindGpu). NotFound names the declared and built-in types.
  Result<const GpuSpec*> FindGpuType(std::string_view name) const;

  // The extended resource names the shapes declare, interned: a name's id is its index here (in
  // order of first declaration), below kMaxExtendedResources.
  std::span<const std::string> extended_resources() const { return extended_names_; }
  // The id of an extended resource name; -1 when no shape of the cluster declares it.
  int FindExtendedResource(std::string_view name) const;
  // How much of extended resource `id` each node of `shape` has (0: none).
  std::int64_t ExtendedCapacity(NodeShapeId shape, int id) const;

  const Node& node(NodeId id) const { return nodes_[id.value()]; }
  const Switch& sw(SwitchId id) const { return switches_[id.value()]; }
  const NvlinkDomain& nvlink_domain(NvlinkDomainId id) const { return domains_[id.value()]; }
  const NodeShape& shape(NodeShapeId id) const { return shapes_[id.value()]; }
  const NodeShape& shape_of(NodeId id) const { return shapes_[nodes_[id.value()].shape.value()]; }

  // Switch tiers in use (0 = leaf) and the Level each stands for.
  int tier_count() const { return tier_count_; }
  Level tier_level(int tier) const { return tier_levels_[tier]; }

  Result<NodeId> FindNode(std::string_view name) const;
  Result<SwitchId> FindSwitch(std::string_view name) const;

  // Where two nodes / GPUs meet. O(tiers), no allocation.
  Level Meet(NodeId a, NodeId b) const;
  Level Meet(GpuRef a, GpuRef b) const;
  // Bandwidth and latency of a path that meets at `level`.
  const LinkSpec& Link(Level level) const { return links_[static_cast<int>(level)]; }
  const LinkSpec& Path(NodeId a, NodeId b) const { return Link(Meet(a, b)); }

  // GPU accounting for the whole cluster, one switch subtree, or one NVLink domain.
  const GpuCounts& counts() const { return counts_; }
  const GpuCounts& counts(SwitchId id) const { return switches_[id.value()].counts; }
  const GpuCounts& counts(NvlinkDomainId id) const { return domains_[id.value()].counts; }

  // Marks GPUs (bit i = local GPU i) allocated / released. Fails, changing nothing, when a bit is
  // outside the node's GPUs or already in the requested state. O(tiers).
  Status Allocate(NodeId node, std::uint64_t gpu_mask);
  Status Release(NodeId node, std::uint64_t gpu_mask);
  // Changes a node's health; only kHealthy nodes count GPUs as free. O(tiers).
  void SetHealth(NodeId node, NodeHealth health);

  // Approximate heap + object bytes held (for the benchmark's memory report).
  std::size_t MemoryBytes() const;

 private:
  friend class ClusterBuilder;
  Cluster() = default;
  Cluster(const Cluster&) = default;
  GpuCounts Contribution(const Node& n) const;
  void ApplyDelta(const Node& n, const GpuCounts& before);
  // Adds `delta` to the counts of the cluster and of every group holding `n`.
  void AddCounts(const Node& n, const GpuCounts& delta);
  // Accounts for `gpus` GPUs of `n` becoming allocated (> 0) or idle (< 0).
  void ApplyAllocated(const Node& n, int gpus);

  std::string name_;
  FabricKind fabric_ = FabricKind::kCustom;
  std::vector<NodeShape> shapes_;
  std::vector<std::string> extended_names_;                // interned extended resource names
  std::vector<std::shared_ptr<const GpuSpec>> gpu_types_;  // declared; shared by clones
  std::vector<Node> nodes_;
  std::vector<Switch> switches_;
  std::vector<NvlinkDomain> domains_;
  std::vector<FailureDomain> failure_domains_;
  std::unordered_map<std::string, NodeId> node_index_;
  std::unordered_map<std::string, SwitchId> switch_index_;
  std::array<Level, kMaxSwitchTiers> tier_levels_{Level::kLeaf, Level::kSpine, Level::kCore,
                                                  Level::kCore};
  int tier_count_ = 0;
  std::array<LinkSpec, kLevelCount> links_{};
  GpuCounts counts_;
};

// ClusterBuilder collects a cluster description and validates it in Build(). Every Add*/Attach*
// returns an error for input that can never be valid (an empty or duplicate name, a count out of
// range); whole-structure checks (a switch with no children, a node under two leaves, a node no
// switch reaches, a cycle) run in Build(). `context` strings (e.g. "cluster.yaml:12") prefix
// errors.
class ClusterBuilder {
 public:
  explicit ClusterBuilder(std::string name, FabricKind fabric = FabricKind::kCustom);

  // Declares a GPU type outside the built-in catalogue (the open catalogue: openb's P100, T4,
  // ...). Its name must be new to this cluster; it may shadow a built-in alias. Figures may be
  // zero where unknown (the planner then says it has no performance data for the type). The
  // pointer stays valid while the cluster or a clone of it lives; use it as NodeShape::gpu.
  Result<const GpuSpec*> AddGpuType(GpuSpec spec);
  Result<NodeShapeId> AddShape(NodeShape shape);
  Result<NodeId> AddNode(std::string name, NodeShapeId shape);
  Status AddLabel(NodeId node, std::string key, std::string value);
  Result<SwitchId> AddSwitch(std::string name);
  Status AttachNode(SwitchId leaf, NodeId node);
  Status AttachSwitch(SwitchId parent, SwitchId child);
  // Declares a multi-node NVLink domain (an NVL72 rack). Nodes not in one get a domain of their
  // own (their HGX board), named after the node.
  Result<NvlinkDomainId> AddNvlinkDomain(std::string name, std::span<const NodeId> nodes);
  Status AddFailureDomain(FailureDomainKind kind, std::string name, std::span<const NodeId> nodes);
  // The Level each switch tier stands for, leaf first (default: leaf, spine, core).
  Status SetTierLevels(std::vector<Level> levels);
  // Overrides the link table entry for a level (defaults are derived from the node shapes).
  void SetLink(Level level, LinkSpec link);
  // Oversubscription (downlink:uplink bandwidth, >= 1) of the uplinks of the given tier's switches;
  // paths meeting above that tier get proportionally less bandwidth.
  Status SetOversubscription(int tier, double ratio);

  Result<NodeId> FindNode(std::string_view name) const;
  // A declared or built-in GPU type (Cluster::FindGpuType over what was declared so far).
  Result<const GpuSpec*> FindGpuType(std::string_view name) const { return c_.FindGpuType(name); }
  std::size_t node_count() const { return c_.nodes_.size(); }

  // Validates and returns the cluster. The builder is left empty.
  Result<Cluster> Build();

 private:
  Cluster c_;
  std::vector<SwitchId> leaf_of_;                  // per node: the leaf it was attached to
  std::unordered_set<std::string> domain_names_;   // NVLink domain names taken
  std::unordered_set<std::string> failure_names_;  // "kind/name" of failure domains taken
  std::vector<bool> link_overridden_;
  std::array<double, kMaxSwitchTiers> oversubscription_{1, 1, 1, 1};
};

// Default per-message latencies by level (documented estimates for NCCL-level alpha terms:
// NVLink ~1 us, one extra microsecond per network tier crossed).
Seconds DefaultLatency(Level level);

}  // namespace baton::topo
