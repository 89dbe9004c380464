#include "topology/cluster.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>

#include "core/check.h"
#include "core/strings.h"

namespace baton::topo {
namespace {

constexpr std::string_view kLevelNames[kLevelCount] = {"gpu",   "node",  "nvlink-domain", "leaf",
                                                       "spine", "group", "core",          "none"};

Status CheckName(std::string_view what, std::string_view name) {
  if (name.empty()) return InvalidArgumentError(fmt::format("{} name is empty", what));
  if (name.size() > 64) {
    return InvalidArgumentError(
        fmt::format("{} name '{}...' is longer than 64 characters", what, Printable(name, 32)));
  }
  for (char c : name) {
    auto u = static_cast<unsigned char>(c);
    if (u <= 0x20 || u >= 0x7f || c == ',' || c == '[' || c == ']' || c == '=') {
      return InvalidArgumentError(fmt::format(
          "{} name '{}' has a character that is not allowed (space, control, ',', '[', ']', '=')",
          what, Printable(name)));
    }
  }
  return Status::Ok();
}

std::uint64_t AllGpus(int gpus) { return gpus >= 64 ? ~0ULL : ((1ULL << gpus) - 1); }

}  // namespace

std::string_view LevelName(Level level) { return kLevelNames[static_cast<int>(level)]; }

Result<Level> ParseLevel(std::string_view name) {
  for (int i = 0; i < kLevelCount; ++i) {
    if (EqualsIgnoreCase(name, kLevelNames[i])) return static_cast<Level>(i);
  }
  if (EqualsIgnoreCase(name, "nvlink")) return Level::kNvlinkDomain;
  return InvalidArgumentError(fmt::format(
      "unknown level '{}' (expected gpu, node, nvlink-domain, leaf, spine, group or core)",
      Printable(name)));
}

std::string_view NodeHealthName(NodeHealth h) {
  switch (h) {
    case NodeHealth::kHealthy:
      return "healthy";
    case NodeHealth::kSuspect:
      return "suspect";
    case NodeHealth::kDraining:
      return "draining";
    case NodeHealth::kDown:
      return "down";
  }
  return "?";
}

std::string_view FailureDomainKindName(FailureDomainKind k) {
  switch (k) {
    case FailureDomainKind::kRack:
      return "rack";
    case FailureDomainKind::kPdu:
      return "pdu";
    case FailureDomainKind::kRow:
      return "row";
  }
  return "?";
}

std::string_view FabricKindName(FabricKind k) {
  switch (k) {
    case FabricKind::kFatTree:
      return "fat-tree";
    case FabricKind::kRailOptimized:
      return "rail-optimized";
    case FabricKind::kDragonflyPlus:
      return "dragonfly+";
    case FabricKind::kCustom:
      return "custom";
  }
  return "?";
}

Seconds DefaultLatency(Level level) {
  switch (level) {
    case Level::kGpu:
      return Seconds(0);
    case Level::kNode:
      return Microseconds(1.0);
    case Level::kNvlinkDomain:
      return Microseconds(1.5);
    case Level::kLeaf:
      return Microseconds(2.5);
    case Level::kSpine:
      return Microseconds(3.5);
    case Level::kGroup:
      return Microseconds(4.0);
    case Level::kCore:
      return Microseconds(5.0);
    case Level::kNone:
      return Seconds(0);
  }
  return Seconds(0);
}

GpuCounts& GpuCounts::operator+=(const GpuCounts& o) {
  total += o.total;
  allocated += o.allocated;
  free += o.free;
  unavailable += o.unavailable;
  return *this;
}

GpuCounts& GpuCounts::operator-=(const GpuCounts& o) {
  total -= o.total;
  allocated -= o.allocated;
  free -= o.free;
  unavailable -= o.unavailable;
  return *this;
}

// ---- Cluster ----

Result<const GpuSpec*> Cluster::FindGpuType(std::string_view name) const {
  for (const auto& g : gpu_types_) {
    if (EqualsIgnoreCase(name, g->name)) return g.get();
  }
  auto builtin = FindGpu(name);
  if (builtin.ok() || gpu_types_.empty()) return builtin;
  std::string declared;
  for (const auto& g : gpu_types_) declared += (declared.empty() ? "" : ", ") + g->name;
  return NotFoundError(fmt::format("{} (declared by cluster '{}': {})", builtin.status().message(),
                                   name_, declared));
}

Result<NodeId> Cluster::FindNode(std::string_view name) const {
  auto it = node_index_.find(std::string(name));
  if (it == node_index_.end()) return NotFoundError(fmt::format("no node '{}'", Printable(name)));
  return it->second;
}

Result<SwitchId> Cluster::FindSwitch(std::string_view name) const {
  auto it = switch_index_.find(std::string(name));
  if (it == switch_index_.end()) {
    return NotFoundError(fmt::format("no switch '{}'", Printable(name)));
  }
  return it->second;
}

Level Cluster::Meet(NodeId a, NodeId b) const {
  if (a == b) return Level::kNode;
  const Node& na = nodes_[a.value()];
  const Node& nb = nodes_[b.value()];
  if (na.nvlink_domain == nb.nvlink_domain) return Level::kNvlinkDomain;
  for (int t = 0; t < tier_count_; ++t) {
    if (na.ancestors[t].valid() && na.ancestors[t] == nb.ancestors[t]) return tier_levels_[t];
  }
  return Level::kNone;
}

Level Cluster::Meet(GpuRef a, GpuRef b) const {
  if (a.node == b.node) return a.index == b.index ? Level::kGpu : Level::kNode;
  return Meet(a.node, b.node);
}

GpuCounts Cluster::Contribution(const Node& n) const {
  GpuCounts c;
  c.total = n.gpus;
  c.allocated = std::popcount(n.allocated_mask);
  int idle = c.total - c.allocated;
  if (n.health == NodeHealth::kHealthy) {
    c.free = idle;
  } else {
    c.unavailable = idle;
  }
  return c;
}

void Cluster::ApplyDelta(const Node& n, const GpuCounts& before) {
  GpuCounts delta = Contribution(n);
  delta -= before;
  AddCounts(n, delta);
}

void Cluster::ApplyAllocated(const Node& n, int gpus) {
  // The difference of Contribution after and before, with one popcount (of the mask changed)
  // instead of two of the node's whole mask: allocation and release are the scheduler's hot path.
  GpuCounts delta;
  delta.allocated = gpus;
  (n.health == NodeHealth::kHealthy ? delta.free : delta.unavailable) = -gpus;
  AddCounts(n, delta);
}

void Cluster::AddCounts(const Node& n, const GpuCounts& delta) {
  counts_ += delta;
  domains_[n.nvlink_domain.value()].counts += delta;
  for (int t = 0; t < tier_count_; ++t) {
    if (n.ancestors[t].valid()) switches_[n.ancestors[t].value()].counts += delta;
  }
}

Status Cluster::Allocate(NodeId id, std::uint64_t gpu_mask) {
  CHECK_LT(id.value(), nodes_.size());
  Node& n = nodes_[id.value()];
  if (gpu_mask == 0) return InvalidArgumentError("empty GPU mask for node " + n.name);
  if ((gpu_mask & ~AllGpus(n.gpus)) != 0) {
    return InvalidArgumentError(fmt::format(
        "GPU mask {:#x} names GPUs node {} does not have ({} GPUs)", gpu_mask, n.name, n.gpus));
  }
  if ((gpu_mask & n.allocated_mask) != 0) {
    return FailedPreconditionError(fmt::format("GPUs {:#x} of node {} are already allocated",
                                               gpu_mask & n.allocated_mask, n.name));
  }
  n.allocated_mask |= gpu_mask;
  ApplyAllocated(n, std::popcount(gpu_mask));
  return Status::Ok();
}

Status Cluster::Release(NodeId id, std::uint64_t gpu_mask) {
  CHECK_LT(id.value(), nodes_.size());
  Node& n = nodes_[id.value()];
  if (gpu_mask == 0) return InvalidArgumentError("empty GPU mask for node " + n.name);
  if ((gpu_mask & ~n.allocated_mask) != 0) {
    return FailedPreconditionError(fmt::format("GPUs {:#x} of node {} are not allocated",
                                               gpu_mask & ~n.allocated_mask, n.name));
  }
  n.allocated_mask &= ~gpu_mask;
  ApplyAllocated(n, -std::popcount(gpu_mask));
  return Status::Ok();
}

void Cluster::SetHealth(NodeId id, NodeHealth health) {
  CHECK_LT(id.value(), nodes_.size());
  Node& n = nodes_[id.value()];
  GpuCounts before = Contribution(n);
  n.health = health;
  ApplyDelta(n, before);
}

std::size_t Cluster::MemoryBytes() const {
  auto str = [](const std::string& s) { return s.capacity() > 15 ? s.capacity() + 1 : 0; };
  std::size_t total = sizeof(*this);
  total += nodes_.capacity() * sizeof(Node);
  for (const Node& n : nodes_) {
    total += str(n.name) + n.labels.capacity() * sizeof(n.labels[0]);
    for (const auto& [k, v] : n.labels) total += str(k) + str(v);
  }
  total += switches_.capacity() * sizeof(Switch);
  for (const Switch& s : switches_) {
    total += str(s.name) + s.child_nodes.capacity() * sizeof(NodeId) +
             s.child_switches.capacity() * sizeof(SwitchId);
  }
  total += domains_.capacity() * sizeof(NvlinkDomain);
  for (const auto& d : domains_) total += str(d.name) + d.nodes.capacity() * sizeof(NodeId);
  total += failure_domains_.capacity() * sizeof(FailureDomain);
  for (const auto& d : failure_domains_) total += str(d.name) + d.nodes.capacity() * sizeof(NodeId);
  // Hash indexes: one node per entry (key + value + next pointer + cached hash) plus buckets.
  const std::size_t entry = sizeof(std::pair<const std::string, NodeId>) + 2 * sizeof(void*);
  total += node_index_.size() * entry + node_index_.bucket_count() * sizeof(void*);
  for (const auto& [k, v] : node_index_) total += str(k);
  total += switch_index_.size() * entry + switch_index_.bucket_count() * sizeof(void*);
  return total;
}

Status CheckExtendedResourceName(std::string_view name) {
  if (name.empty() || name.size() > 63) {
    return InvalidArgumentError(
        fmt::format("extended resource name must be 1..63 characters, got {}", name.size()));
  }
  if (name[0] < 'a' || name[0] > 'z') {
    return InvalidArgumentError(fmt::format(
        "extended resource name '{}' must start with a lower-case letter", Printable(name)));
  }
  for (char ch : name) {
    const bool ok = (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '_' ||
                    ch == '.' || ch == '-' || ch == '/';
    if (!ok) {
      return InvalidArgumentError(
          fmt::format("extended resource name '{}' may hold only [a-z0-9_./-]", Printable(name)));
    }
  }
  return Status::Ok();
}

int Cluster::FindExtendedResource(std::string_view name) const {
  for (std::size_t i = 0; i < extended_names_.size(); ++i) {
    if (extended_names_[i] == name) return static_cast<int>(i);
  }
  return -1;
}

std::int64_t Cluster::ExtendedCapacity(NodeShapeId shape, int id) const {
  if (id < 0 || static_cast<std::size_t>(id) >= extended_names_.size()) return 0;
  for (const ExtendedResource& r : shapes_[shape.value()].extended) {
    if (r.name == extended_names_[static_cast<std::size_t>(id)]) return r.amount;
  }
  return 0;
}

// ---- ClusterBuilder ----

ClusterBuilder::ClusterBuilder(std::string name, FabricKind fabric) {
  c_.name_ = std::move(name);
  c_.fabric_ = fabric;
  link_overridden_.assign(kLevelCount, false);
}

Result<const GpuSpec*> ClusterBuilder::AddGpuType(GpuSpec spec) {
  RETURN_IF_ERROR(CheckName("GPU type", spec.name));
  for (const auto& g : c_.gpu_types_) {
    if (EqualsIgnoreCase(g->name, spec.name)) {
      return InvalidArgumentError(fmt::format("GPU type '{}': declared twice", spec.name));
    }
  }
  if (spec.fp32.value() < 0 || spec.tf32.value() < 0 || spec.bf16.value() < 0 ||
      spec.fp8.value() < 0 || spec.hbm.value() < 0 || spec.hbm_bandwidth.value() < 0 ||
      spec.nvlink_per_direction.value() < 0) {
    return InvalidArgumentError(
        fmt::format("GPU type '{}': figures must not be negative", spec.name));
  }
  c_.gpu_types_.push_back(std::make_shared<const GpuSpec>(std::move(spec)));
  return c_.gpu_types_.back().get();
}

Result<NodeShapeId> ClusterBuilder::AddShape(NodeShape shape) {
  RETURN_IF_ERROR(CheckName("node shape", shape.name));
  auto bad = [&](std::string_view field, std::string_view why) {
    return InvalidArgumentError(
        fmt::format("node shape '{}': field '{}': {}", shape.name, field, why));
  };
  if (shape.gpu == nullptr) return bad("gpu", "missing GPU type");
  if (shape.gpus < 1 || shape.gpus > kMaxGpusPerNode) {
    return bad("gpus", fmt::format("{} is out of range (1..{})", shape.gpus, kMaxGpusPerNode));
  }
  if (shape.cpus < 0) return bad("cpus", "must not be negative");
  if (shape.memory.value() < 0) return bad("memory", "must not be negative");
  if (shape.numa_nodes < 1) return bad("numa_nodes", "must be at least 1");
  if (shape.gpus_per_pcie_switch < 1 || shape.gpus % shape.gpus_per_pcie_switch != 0) {
    return bad("gpus_per_pcie_switch", "must be >= 1 and divide the GPU count");
  }
  if (shape.nics < 0 || shape.nics > 64) return bad("nics", "out of range (0..64)");
  if (shape.nic_bandwidth.value() < 0) return bad("nic_gbps", "must not be negative");
  if (shape.nics > 0 && shape.nic_bandwidth.value() <= 0) {
    return bad("nic_gbps", "must be > 0 when the node has NICs");
  }
  for (const auto& s : c_.shapes_) {
    if (s.name == shape.name) {
      return AlreadyExistsError(fmt::format("duplicate node shape '{}'", shape.name));
    }
  }
  if (shape.extended.size() > kMaxExtendedPerNode) {
    return bad("extended",
               fmt::format("{} resources, at most {}", shape.extended.size(), kMaxExtendedPerNode));
  }
  std::sort(shape.extended.begin(), shape.extended.end(),
            [](const ExtendedResource& a, const ExtendedResource& b) { return a.name < b.name; });
  std::size_t new_names = 0;
  for (std::size_t i = 0; i < shape.extended.size(); ++i) {
    const ExtendedResource& r = shape.extended[i];
    const std::string field = fmt::format("extended.{}", Printable(r.name));
    if (Status s = CheckExtendedResourceName(r.name); !s.ok()) return bad(field, s.message());
    if (i > 0 && shape.extended[i - 1].name == r.name) return bad(field, "given twice");
    if (r.amount < 0 || r.amount > kMaxExtendedAmount) {
      return bad(field,
                 fmt::format("amount {} is out of range (0..{})", r.amount, kMaxExtendedAmount));
    }
    new_names += c_.FindExtendedResource(r.name) < 0 ? 1 : 0;
  }
  if (c_.extended_names_.size() + new_names > kMaxExtendedResources) {
    return bad("extended", fmt::format("the cluster would have more than {} extended resource "
                                       "names",
                                       kMaxExtendedResources));
  }
  for (const ExtendedResource& r : shape.extended) {
    if (c_.FindExtendedResource(r.name) < 0) c_.extended_names_.push_back(r.name);
  }
  if (c_.shapes_.size() >= 60000) return ResourceExhaustedError("too many node shapes");
  c_.shapes_.push_back(std::move(shape));
  return NodeShapeId(static_cast<std::uint16_t>(c_.shapes_.size() - 1));
}

Result<NodeId> ClusterBuilder::AddNode(std::string name, NodeShapeId shape) {
  RETURN_IF_ERROR(CheckName("node", name));
  if (!shape.valid() || shape.value() >= c_.shapes_.size()) {
    return InvalidArgumentError("node " + name + ": unknown node shape");
  }
  if (c_.nodes_.size() >= (1u << 24)) return ResourceExhaustedError("more than 16M nodes");
  NodeId id(static_cast<std::uint32_t>(c_.nodes_.size()));
  auto [it, inserted] = c_.node_index_.emplace(name, id);
  if (!inserted) return AlreadyExistsError(fmt::format("duplicate node name '{}'", name));
  Node n;
  n.name = std::move(name);
  n.shape = shape;
  n.gpus = static_cast<std::uint8_t>(c_.shapes_[shape.value()].gpus);
  c_.nodes_.push_back(std::move(n));
  leaf_of_.emplace_back();
  return id;
}

Status ClusterBuilder::AddLabel(NodeId node, std::string key, std::string value) {
  if (!node.valid() || node.value() >= c_.nodes_.size())
    return InvalidArgumentError("no such node");
  if (key.empty())
    return InvalidArgumentError("label key is empty on node " + c_.nodes_[node.value()].name);
  auto& labels = c_.nodes_[node.value()].labels;
  for (auto& [k, v] : labels) {
    if (k == key) {
      v = std::move(value);
      return Status::Ok();
    }
  }
  labels.emplace_back(std::move(key), std::move(value));
  return Status::Ok();
}

Result<SwitchId> ClusterBuilder::AddSwitch(std::string name) {
  RETURN_IF_ERROR(CheckName("switch", name));
  SwitchId id(static_cast<std::uint32_t>(c_.switches_.size()));
  auto [it, inserted] = c_.switch_index_.emplace(name, id);
  if (!inserted) return AlreadyExistsError(fmt::format("duplicate switch name '{}'", name));
  Switch s;
  s.name = std::move(name);
  c_.switches_.push_back(std::move(s));
  return id;
}

Status ClusterBuilder::AttachNode(SwitchId leaf, NodeId node) {
  if (!leaf.valid() || leaf.value() >= c_.switches_.size())
    return InvalidArgumentError("no such switch");
  if (!node.valid() || node.value() >= c_.nodes_.size())
    return InvalidArgumentError("no such node");
  SwitchId& current = leaf_of_[node.value()];
  const std::string& sname = c_.switches_[leaf.value()].name;
  const std::string& nname = c_.nodes_[node.value()].name;
  if (current.valid()) {
    if (current == leaf) {
      return AlreadyExistsError(
          fmt::format("node {} is listed twice under switch {}", nname, sname));
    }
    return InvalidArgumentError(fmt::format("node {} is under two leaf switches: {} and {}", nname,
                                            c_.switches_[current.value()].name, sname));
  }
  current = leaf;
  c_.switches_[leaf.value()].child_nodes.push_back(node);
  return Status::Ok();
}

Status ClusterBuilder::AttachSwitch(SwitchId parent, SwitchId child) {
  if (!parent.valid() || parent.value() >= c_.switches_.size() || !child.valid() ||
      child.value() >= c_.switches_.size()) {
    return InvalidArgumentError("no such switch");
  }
  Switch& p = c_.switches_[parent.value()];
  Switch& ch = c_.switches_[child.value()];
  if (parent == child) return InvalidArgumentError(fmt::format("switch {} lists itself", p.name));
  if (ch.parent.valid()) {
    return InvalidArgumentError(fmt::format("switch {} has two parents: {} and {}", ch.name,
                                            c_.switches_[ch.parent.value()].name, p.name));
  }
  ch.parent = parent;
  p.child_switches.push_back(child);
  return Status::Ok();
}

Result<NvlinkDomainId> ClusterBuilder::AddNvlinkDomain(std::string name,
                                                       std::span<const NodeId> nodes) {
  RETURN_IF_ERROR(CheckName("NVLink domain", name));
  if (nodes.empty()) return InvalidArgumentError("NVLink domain " + name + " has no nodes");
  if (domain_names_.contains(name)) {
    return AlreadyExistsError("duplicate NVLink domain '" + name + "'");
  }
  NvlinkDomainId id(static_cast<std::uint32_t>(c_.domains_.size()));
  for (NodeId n : nodes) {
    if (!n.valid() || n.value() >= c_.nodes_.size()) return InvalidArgumentError("no such node");
    Node& node = c_.nodes_[n.value()];
    if (node.nvlink_domain.valid()) {
      return InvalidArgumentError(fmt::format("node {} is in two NVLink domains: {} and {}",
                                              node.name,
                                              c_.domains_[node.nvlink_domain.value()].name, name));
    }
  }
  for (NodeId n : nodes) c_.nodes_[n.value()].nvlink_domain = id;
  domain_names_.insert(name);
  c_.domains_.push_back(NvlinkDomain{std::move(name), {nodes.begin(), nodes.end()}, {}});
  return id;
}

Status ClusterBuilder::AddFailureDomain(FailureDomainKind kind, std::string name,
                                        std::span<const NodeId> nodes) {
  RETURN_IF_ERROR(CheckName("failure domain", name));
  if (nodes.empty()) return InvalidArgumentError("failure domain " + name + " has no nodes");
  const auto k = static_cast<std::size_t>(kind);
  FailureDomainId id(static_cast<std::uint32_t>(c_.failure_domains_.size()));
  std::string key = fmt::format("{}/{}", FailureDomainKindName(kind), name);
  if (failure_names_.contains(key)) {
    return AlreadyExistsError(fmt::format("duplicate {} '{}'", FailureDomainKindName(kind), name));
  }
  for (NodeId n : nodes) {
    if (!n.valid() || n.value() >= c_.nodes_.size()) return InvalidArgumentError("no such node");
    const Node& node = c_.nodes_[n.value()];
    if (node.failure_domains[k].valid()) {
      return InvalidArgumentError(
          fmt::format("node {} is in two {}s: {} and {}", node.name, FailureDomainKindName(kind),
                      c_.failure_domains_[node.failure_domains[k].value()].name, name));
    }
  }
  for (NodeId n : nodes) c_.nodes_[n.value()].failure_domains[k] = id;
  failure_names_.insert(std::move(key));
  c_.failure_domains_.push_back(FailureDomain{std::move(name), kind, {nodes.begin(), nodes.end()}});
  return Status::Ok();
}

Status ClusterBuilder::SetTierLevels(std::vector<Level> levels) {
  if (levels.empty() || levels.size() > kMaxSwitchTiers) {
    return InvalidArgumentError(fmt::format("tier levels: need 1..{} levels", kMaxSwitchTiers));
  }
  for (std::size_t i = 0; i < levels.size(); ++i) {
    if (levels[i] < Level::kLeaf || levels[i] == Level::kNone) {
      return InvalidArgumentError(
          fmt::format("tier {}: level '{}' is not a switch level", i, LevelName(levels[i])));
    }
    if (i > 0 && levels[i] < levels[i - 1]) {
      return InvalidArgumentError("tier levels must go from the leaf upwards");
    }
    c_.tier_levels_[i] = levels[i];
  }
  for (std::size_t i = levels.size(); i < kMaxSwitchTiers; ++i) c_.tier_levels_[i] = levels.back();
  return Status::Ok();
}

void ClusterBuilder::SetLink(Level level, LinkSpec link) {
  c_.links_[static_cast<int>(level)] = link;
  link_overridden_[static_cast<int>(level)] = true;
}

Status ClusterBuilder::SetOversubscription(int tier, double ratio) {
  if (tier < 0 || tier >= kMaxSwitchTiers) {
    return InvalidArgumentError(fmt::format("oversubscription: tier {} out of range", tier));
  }
  if (!(ratio >= 1.0) || ratio > 1000.0) {
    return InvalidArgumentError(
        fmt::format("oversubscription of tier {}: {} must be between 1 and 1000", tier, ratio));
  }
  oversubscription_[tier] = ratio;
  return Status::Ok();
}

Result<NodeId> ClusterBuilder::FindNode(std::string_view name) const {
  auto it = c_.node_index_.find(std::string(name));
  if (it == c_.node_index_.end())
    return NotFoundError(fmt::format("no node '{}'", Printable(name)));
  return it->second;
}

Result<Cluster> ClusterBuilder::Build() {
  Cluster& c = c_;
  if (c.nodes_.empty()) return InvalidArgumentError("cluster " + c.name_ + " has no nodes");

  // Structure: children present, no mixed switches, tiers by height, no cycles.
  const std::size_t ns = c.switches_.size();
  for (const Switch& s : c.switches_) {
    if (s.child_nodes.empty() && s.child_switches.empty()) {
      return InvalidArgumentError(
          fmt::format("switch {} has no children (no Nodes= or Switches=)", s.name));
    }
    if (!s.child_nodes.empty() && !s.child_switches.empty()) {
      return InvalidArgumentError(
          fmt::format("switch {} has both nodes and switches below it; a switch is either a leaf "
                      "(nodes) or an upper switch (switches)",
                      s.name));
    }
  }
  // Tiers: process bottom-up with a post-order walk from each root; a switch never reached from a
  // root lies on a cycle.
  std::vector<int> tier(ns, -1);
  std::vector<std::uint8_t> state(ns, 0);  // 0 new, 1 on stack, 2 done
  std::vector<std::pair<std::uint32_t, std::size_t>> stack;
  for (std::uint32_t root = 0; root < ns; ++root) {
    if (c.switches_[root].parent.valid()) continue;
    stack.push_back({root, 0});
    state[root] = 1;
    while (!stack.empty()) {
      auto& [sid, next] = stack.back();
      Switch& s = c.switches_[sid];
      if (next < s.child_switches.size()) {
        std::uint32_t child = s.child_switches[next++].value();
        if (state[child] == 1) return InvalidArgumentError("switch " + s.name + " is on a cycle");
        if (state[child] == 0) {
          state[child] = 1;
          stack.push_back({child, 0});
        }
        continue;
      }
      int t = 0;
      for (SwitchId ch : s.child_switches) t = std::max(t, tier[ch.value()] + 1);
      if (t >= kMaxSwitchTiers) {
        return InvalidArgumentError(fmt::format(
            "switch {} is {} tiers above the nodes; at most {} switch tiers are supported", s.name,
            t + 1, kMaxSwitchTiers));
      }
      tier[sid] = t;
      s.tier = static_cast<std::uint8_t>(t);
      c.tier_count_ = std::max(c.tier_count_, t + 1);
      state[sid] = 2;
      stack.pop_back();
    }
  }
  for (std::uint32_t i = 0; i < ns; ++i) {
    if (tier[i] < 0)
      return InvalidArgumentError("switch " + c.switches_[i].name + " is on a cycle");
  }

  // Ancestors by tier, and reachability.
  for (std::uint32_t i = 0; i < c.nodes_.size(); ++i) {
    Node& n = c.nodes_[i];
    if (!leaf_of_[i].valid()) {
      if (ns > 0) {
        return InvalidArgumentError(fmt::format(
            "node {} is not attached to any switch (every node must hang off a leaf)", n.name));
      }
      continue;
    }
    SwitchId s = leaf_of_[i];
    while (s.valid()) {
      n.ancestors[c.switches_[s.value()].tier] = s;
      s = c.switches_[s.value()].parent;
    }
  }

  // Every node gets an NVLink domain: its own board unless it is in a multi-node domain.
  for (std::uint32_t i = 0; i < c.nodes_.size(); ++i) {
    Node& n = c.nodes_[i];
    if (n.nvlink_domain.valid()) continue;
    n.nvlink_domain = NvlinkDomainId(static_cast<std::uint32_t>(c.domains_.size()));
    c.domains_.push_back(NvlinkDomain{n.name, {NodeId(i)}, {}});
  }

  // Link table defaults from the node shapes: the slowest shape bounds each level.
  double nvlink = 1e30, leaf = 1e30, hbm = 1e30;
  for (const NodeShape& s : c.shapes_) {
    nvlink = std::min(nvlink, s.gpu->nvlink_per_direction.value());
    hbm = std::min(hbm, s.gpu->hbm_bandwidth.value());
    double per_gpu = s.nics * s.nic_bandwidth.value() / s.gpus;
    leaf = std::min(leaf, per_gpu);
  }
  auto set_default = [&](Level l, double bw) {
    if (!link_overridden_[static_cast<int>(l)]) {
      c.links_[static_cast<int>(l)] = LinkSpec{BytesPerSecond(bw), DefaultLatency(l)};
    }
  };
  set_default(Level::kGpu, hbm);
  set_default(Level::kNode, nvlink);
  set_default(Level::kNvlinkDomain, nvlink);
  // Levels a tier does not stand for inherit the bandwidth of the tier below them.
  double bw = leaf;
  int next_level = static_cast<int>(Level::kLeaf);
  for (int t = 0; t < std::max(1, c.tier_count_); ++t) {
    int level = static_cast<int>(c.tier_levels_[t]);
    for (; next_level <= level; ++next_level) set_default(static_cast<Level>(next_level), bw);
    bw /= oversubscription_[t];
  }
  for (; next_level < static_cast<int>(Level::kNone); ++next_level) {
    set_default(static_cast<Level>(next_level), bw);
  }
  set_default(Level::kNone, 0.0);

  // Initial accounting.
  for (const Node& n : c.nodes_) {
    GpuCounts zero;
    c.ApplyDelta(n, zero);
  }

  Cluster out = std::move(c_);
  c_ = Cluster();
  leaf_of_.clear();
  domain_names_.clear();
  failure_names_.clear();
  return out;
}

}  // namespace baton::topo
