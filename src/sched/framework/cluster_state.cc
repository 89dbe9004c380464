#include "sched/framework/cluster_state.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cstdint>

#include "core/check.h"
#include "core/strings.h"

namespace baton::sched {
namespace {

void AddSlots(SlotCounts& c, const SlotCounts& delta) {
  for (int k = 0; k < kSlotSizes; ++k) c[k] += delta[k];
}

}  // namespace

AttributeIndex::AttributeIndex(const topo::Cluster& cluster) : nodes_(cluster.nodes().size()) {
  for (std::uint32_t n = 0; n < cluster.nodes().size(); ++n) {
    for (const auto& [key, value] : cluster.nodes()[n].labels) {
      by_value_[key][value].push_back(n);
      if (auto v = ParseDouble(value)) numeric_[key].push_back({*v, n});
    }
  }
  for (auto& [key, list] : numeric_) std::sort(list.begin(), list.end());
}

std::shared_ptr<const std::vector<bool>> AttributeIndex::Match(
    std::span<const NodeRequirement> reqs) const {
  if (reqs.empty()) return nullptr;
  // count[n] = requirements node n satisfies; NotIn is counted as "Exists-with-other-value or
  // absent", computed as the complement of In.
  std::vector<std::uint16_t> count(nodes_, 0);
  using Op = NodeRequirement::Op;
  for (const auto& r : reqs) {
    std::vector<bool> hit(nodes_, false);
    auto key = by_value_.find(r.key);
    switch (r.op) {
      case Op::kIn:
      case Op::kNotIn:
        if (key != by_value_.end()) {
          for (const auto& v : r.values) {
            auto it = key->second.find(v);
            if (it == key->second.end()) continue;
            for (std::uint32_t n : it->second) hit[n] = true;
          }
        }
        if (r.op == Op::kNotIn) hit.flip();
        break;
      case Op::kExists:
        if (key != by_value_.end()) {
          for (const auto& [v, list] : key->second) {
            for (std::uint32_t n : list) hit[n] = true;
          }
        }
        break;
      case Op::kGreaterEqual:
      case Op::kLessEqual: {
        auto num = numeric_.find(r.key);
        if (num == numeric_.end()) break;
        const auto& list = num->second;
        if (r.op == Op::kGreaterEqual) {
          auto it = std::lower_bound(list.begin(), list.end(), std::make_pair(r.bound, 0u));
          for (; it != list.end(); ++it) hit[it->second] = true;
        } else {
          for (auto it = list.begin(); it != list.end() && it->first <= r.bound; ++it) {
            hit[it->second] = true;
          }
        }
        break;
      }
    }
    for (std::size_t n = 0; n < nodes_; ++n) count[n] += hit[n] ? 1 : 0;
  }
  auto out = std::make_shared<std::vector<bool>>(nodes_, false);
  for (std::size_t n = 0; n < nodes_; ++n) (*out)[n] = count[n] == reqs.size();
  return out;
}

int SlotIndex(int gpus_per_task) {
  CHECK_GE(gpus_per_task, 1);
  int k = std::bit_width(static_cast<unsigned>(gpus_per_task)) - 1;
  return std::min(k, kSlotSizes - 1);
}

ClusterState::ClusterState(topo::Cluster cluster)
    : cluster_(std::move(cluster)), attributes_(std::make_shared<AttributeIndex>(cluster_)) {
  const auto& c = cluster_;
  switch_slots_.assign(c.switches().size(), SlotCounts{});
  domain_slots_.assign(c.nvlink_domains().size(), SlotCounts{});
  node_free_.assign(c.nodes().size(), 0);
  switch_free_.assign(c.switches().size(), 0);
  domain_free_.assign(c.nvlink_domains().size(), 0);
  leaf_domains_.resize(c.switches().size());
  buckets_.resize(topo::kMaxGpusPerNode + 1);
  for (NodeSet& b : buckets_) b.Resize(c.nodes().size());
  for (std::uint32_t s = 0; s < c.switches().size(); ++s) {
    const auto& sw = c.switches()[s];
    if (!sw.parent.valid()) roots_.push_back(s);
    by_tier_[sw.tier].push_back(s);
    for (topo::NodeId n : sw.child_nodes) {
      std::uint32_t d = c.node(n).nvlink_domain.value();
      auto& list = leaf_domains_[s];
      if (std::find(list.begin(), list.end(), d) == list.end()) list.push_back(d);
    }
  }
  for (const auto& d : c.nvlink_domains()) {
    if (d.nodes.size() > 1) multi_node_domains_ = true;
  }
  host_.resize(c.nodes().size());
  gpu_offset_.resize(c.nodes().size());
  node_version_.assign(c.nodes().size(), 0);
  std::uint32_t gpus = 0;
  for (std::uint32_t i = 0; i < c.nodes().size(); ++i) {
    const topo::NodeShape& shape = c.shape_of(topo::NodeId(i));
    host_[i].cpu_capacity = std::int64_t{shape.cpus} * 1000;
    host_[i].memory_capacity = static_cast<std::int64_t>(shape.memory.value() / (1024.0 * 1024.0));
    gpu_offset_[i] = gpus;
    gpus += c.nodes()[i].gpus;
  }
  share_milli_.assign(gpus, 0);
  extended_kinds_ = c.extended_resources().size();
  extended_capacity_.assign(c.nodes().size() * extended_kinds_, 0);
  extended_used_.assign(c.nodes().size() * extended_kinds_, 0);
  for (std::uint32_t i = 0; i < c.nodes().size() && extended_kinds_ > 0; ++i) {
    for (std::size_t k = 0; k < extended_kinds_; ++k) {
      extended_capacity_[i * extended_kinds_ + k] =
          c.ExtendedCapacity(c.nodes()[i].shape, static_cast<int>(k));
    }
  }
  for (std::uint32_t i = 0; i < c.nodes().size(); ++i) {
    max_node_gpus_ = std::max<int>(max_node_gpus_, c.nodes()[i].gpus);
    Update(topo::NodeId(i), 0);
  }
  version_ = 0;
}

ClusterState::ClusterState(const ClusterState& o)
    : cluster_(o.cluster_.Clone()),
      switch_slots_(o.switch_slots_),
      domain_slots_(o.domain_slots_),
      node_free_(o.node_free_),
      switch_free_(o.switch_free_),
      domain_free_(o.domain_free_),
      root_slots_(o.root_slots_),
      root_free_(o.root_free_),
      roots_(o.roots_),
      by_tier_(o.by_tier_),
      leaf_domains_(o.leaf_domains_),
      buckets_(o.buckets_),
      multi_node_domains_(o.multi_node_domains_),
      max_node_gpus_(o.max_node_gpus_),
      version_(o.version_),
      health_version_(o.health_version_),
      attributes_(o.attributes_),
      shares_(o.shares_),
      shared_mask_(o.shared_mask_),
      host_(o.host_),
      extended_kinds_(o.extended_kinds_),
      extended_capacity_(o.extended_capacity_),
      extended_used_(o.extended_used_),
      gpu_offset_(o.gpu_offset_),
      share_milli_(o.share_milli_),
      node_version_(o.node_version_) {}

void ClusterState::Update(topo::NodeId id, int free_before) {
  const topo::Node& n = cluster_.node(id);
  const int free_after =
      n.health == topo::NodeHealth::kHealthy ? n.gpus - std::popcount(n.allocated_mask) : 0;
  node_free_[id.value()] = static_cast<std::int8_t>(free_after);
  ++version_;
  ++node_version_[id.value()];
  if (free_after == free_before) return;
  if (free_before > 0) buckets_[free_before].erase(id.value());
  if (free_after > 0) buckets_[free_after].insert(id.value());
  const std::int64_t delta = free_after - free_before;
  SlotCounts slots;
  for (int k = 0; k < kSlotSizes; ++k) slots[k] = (free_after >> k) - (free_before >> k);
  auto apply = [&](SlotCounts& c) { AddSlots(c, slots); };
  apply(domain_slots_[n.nvlink_domain.value()]);
  domain_free_[n.nvlink_domain.value()] += delta;
  for (int t = 0; t < cluster_.tier_count(); ++t) {
    if (!n.ancestors[t].valid()) continue;
    apply(switch_slots_[n.ancestors[t].value()]);
    switch_free_[n.ancestors[t].value()] += delta;
  }
  apply(root_slots_);
  root_free_ += delta;
}

Status ClusterState::Allocate(topo::NodeId node, std::uint64_t gpu_mask) {
  const int before = FreeGpus(node);
  RETURN_IF_ERROR(cluster_.Allocate(node, gpu_mask));
  Update(node, before);
  return Status::Ok();
}

Status ClusterState::Release(topo::NodeId node, std::uint64_t gpu_mask) {
  if (node.valid() && node.value() < shared_mask_.size() &&
      (shared_mask_[node.value()] & gpu_mask) != 0) {
    return FailedPreconditionError("release: a GPU of the mask holds shares");
  }
  const int before = FreeGpus(node);
  RETURN_IF_ERROR(cluster_.Release(node, gpu_mask));
  Update(node, before);
  return Status::Ok();
}

Status ClusterState::AllocateShare(topo::GpuRef gpu, const GpuShareAmount& amount) {
  if (amount.milli <= 0 && amount.compute_slices <= 0) {
    return InvalidArgumentError("share: empty amount");
  }
  if (!gpu.node.valid() || gpu.node.value() >= cluster_.nodes().size() ||
      gpu.index >= cluster_.node(gpu.node).gpus) {
    return InvalidArgumentError("share: unknown GPU");
  }
  auto it = shares_.find(gpu);
  if (it == shares_.end()) {
    RETURN_IF_ERROR(Allocate(gpu.node, std::uint64_t{1} << gpu.index));
    if (shared_mask_.empty()) shared_mask_.assign(cluster_.nodes().size(), 0);
    shared_mask_[gpu.node.value()] |= std::uint64_t{1} << gpu.index;
    shares_[gpu] = GpuShare{amount, 1};
    SetShareMilli(gpu, amount);
    return Status::Ok();
  }
  GpuShare& sh = it->second;
  if (sh.used.mig() != amount.mig()) {
    return FailedPreconditionError("share: the GPU is shared the other way (MIG vs time-sharing)");
  }
  if (sh.used.milli + amount.milli > kMilliPerGpu ||
      sh.used.compute_slices + amount.compute_slices > kMigComputeSlices ||
      sh.used.memory_slices + amount.memory_slices > kMigMemorySlices) {
    return FailedPreconditionError("share: the GPU has no room left for it");
  }
  sh.used.milli += amount.milli;
  sh.used.compute_slices += amount.compute_slices;
  sh.used.memory_slices += amount.memory_slices;
  ++sh.jobs;
  ++version_;
  SetShareMilli(gpu, sh.used);
  return Status::Ok();
}

Status ClusterState::ReleaseShare(topo::GpuRef gpu, const GpuShareAmount& amount) {
  auto it = shares_.find(gpu);
  if (it == shares_.end()) return FailedPreconditionError("share: the GPU holds no shares");
  GpuShare& sh = it->second;
  if (sh.used.milli < amount.milli || sh.used.compute_slices < amount.compute_slices ||
      sh.used.memory_slices < amount.memory_slices || sh.used.mig() != amount.mig()) {
    return FailedPreconditionError("share: the GPU does not hold that share");
  }
  sh.used.milli -= amount.milli;
  sh.used.compute_slices -= amount.compute_slices;
  sh.used.memory_slices -= amount.memory_slices;
  ++version_;
  SetShareMilli(gpu, sh.used);
  if (--sh.jobs > 0) return Status::Ok();
  shares_.erase(it);
  shared_mask_[gpu.node.value()] &= ~(std::uint64_t{1} << gpu.index);
  return Release(gpu.node, std::uint64_t{1} << gpu.index);
}

void ClusterState::SetShareMilli(topo::GpuRef gpu, const GpuShareAmount& used) {
  const int milli =
      used.mig() ? (used.compute_slices * kMilliPerGpu + kMigComputeSlices - 1) / kMigComputeSlices
                 : used.milli;
  share_milli_[gpu_offset_[gpu.node.value()] + gpu.index] = static_cast<std::int16_t>(milli);
  ++node_version_[gpu.node.value()];
}

std::int64_t ClusterState::HostUsage::cpu_free() const {
  return cpu_capacity == 0 ? INT64_MAX / 4 : cpu_capacity - cpu_used;
}
std::int64_t ClusterState::HostUsage::memory_free() const {
  return memory_capacity == 0 ? INT64_MAX / 4 : memory_capacity - memory_used;
}

Status ClusterState::AllocateHost(topo::NodeId node, const HostResources& r) {
  if (!node.valid() || node.value() >= host_.size())
    return InvalidArgumentError("host: unknown node");
  if (r.cpu_milli < 0 || r.memory_mib < 0) return InvalidArgumentError("host: negative amount");
  for (int i = 0; i < r.extended.count; ++i) {
    if (r.extended.amount[i] < 0) return InvalidArgumentError("host: negative amount");
    if (static_cast<std::size_t>(r.extended.id[i]) >= extended_kinds_) {
      return InvalidArgumentError("host: unknown extended resource");
    }
  }
  HostUsage& h = host_[node.value()];
  if (r.cpu_milli > h.cpu_free()) {
    return FailedPreconditionError(fmt::format("node '{}' has {} milli-CPU free, task needs {}",
                                               cluster_.node(node).name, h.cpu_free(),
                                               r.cpu_milli));
  }
  if (r.memory_mib > h.memory_free()) {
    return FailedPreconditionError(fmt::format("node '{}' has {} MiB free, task needs {}",
                                               cluster_.node(node).name, h.memory_free(),
                                               r.memory_mib));
  }
  for (int i = 0; i < r.extended.count; ++i) {
    const int id = r.extended.id[i];
    // Summed over entries, in case a request names one id twice.
    std::int64_t want = 0;
    for (int k = 0; k < r.extended.count; ++k) {
      if (r.extended.id[k] == id) want += r.extended.amount[k];
    }
    if (want > ExtendedFree(node, id)) {
      return FailedPreconditionError(fmt::format("node '{}' has {} {} free, task needs {}",
                                                 cluster_.node(node).name, ExtendedFree(node, id),
                                                 cluster_.extended_resources()[id], want));
    }
  }
  h.cpu_used += r.cpu_milli;
  h.memory_used += r.memory_mib;
  for (int i = 0; i < r.extended.count; ++i) {
    extended_used_[node.value() * extended_kinds_ + r.extended.id[i]] += r.extended.amount[i];
  }
  ++version_;
  ++node_version_[node.value()];
  return Status::Ok();
}

Status ClusterState::ReleaseHost(topo::NodeId node, const HostResources& r) {
  if (!node.valid() || node.value() >= host_.size())
    return InvalidArgumentError("host: unknown node");
  HostUsage& h = host_[node.value()];
  if (r.cpu_milli < 0 || r.memory_mib < 0 || r.cpu_milli > h.cpu_used ||
      r.memory_mib > h.memory_used) {
    return FailedPreconditionError("host: release of more than the node holds");
  }
  for (int i = 0; i < r.extended.count; ++i) {
    const int id = r.extended.id[i];
    if (id >= static_cast<int>(extended_kinds_) || r.extended.amount[i] < 0) {
      return FailedPreconditionError("host: release of more than the node holds");
    }
    std::int64_t give = 0;
    for (int k = 0; k < r.extended.count; ++k) {
      if (r.extended.id[k] == id) give += r.extended.amount[k];
    }
    if (give > ExtendedUsed(node, id)) {
      return FailedPreconditionError("host: release of more than the node holds");
    }
  }
  h.cpu_used -= r.cpu_milli;
  h.memory_used -= r.memory_mib;
  for (int i = 0; i < r.extended.count; ++i) {
    extended_used_[node.value() * extended_kinds_ + r.extended.id[i]] -= r.extended.amount[i];
  }
  ++version_;
  ++node_version_[node.value()];
  return Status::Ok();
}

const ClusterState::GpuShare* ClusterState::Share(topo::GpuRef gpu) const {
  auto it = shares_.find(gpu);
  return it == shares_.end() ? nullptr : &it->second;
}

void ClusterState::SetHealth(topo::NodeId node, topo::NodeHealth health) {
  const int before = FreeGpus(node);
  cluster_.SetHealth(node, health);
  ++health_version_;
  Update(node, before);
}

std::int64_t ClusterState::Slots(Subtree s, int gpus_per_task) const {
  const int k = SlotIndex(gpus_per_task);
  switch (s.kind) {
    case SubtreeKind::kNode:
      return FreeGpus(topo::NodeId(s.index)) / gpus_per_task;
    case SubtreeKind::kDomain:
      return domain_slots_[s.index][k];
    case SubtreeKind::kSwitch:
      return switch_slots_[s.index][k];
    case SubtreeKind::kRoot:
      return root_slots_[k];
  }
  return 0;
}

std::int64_t ClusterState::Free(Subtree s) const {
  switch (s.kind) {
    case SubtreeKind::kNode:
      return FreeGpus(topo::NodeId(s.index));
    case SubtreeKind::kDomain:
      return domain_free_[s.index];
    case SubtreeKind::kSwitch:
      return switch_free_[s.index];
    case SubtreeKind::kRoot:
      return root_free_;
  }
  return 0;
}

topo::Level ClusterState::LevelOf(Subtree s) const {
  switch (s.kind) {
    case SubtreeKind::kNode:
      return topo::Level::kNode;
    case SubtreeKind::kDomain:
      return topo::Level::kNvlinkDomain;
    case SubtreeKind::kSwitch:
      return cluster_.tier_level(cluster_.sw(topo::SwitchId(s.index)).tier);
    case SubtreeKind::kRoot:
      return topo::Level::kCore;
  }
  return topo::Level::kNone;
}

void ClusterState::Children(Subtree s, std::vector<Subtree>* out) const {
  out->clear();
  switch (s.kind) {
    case SubtreeKind::kNode:
      return;
    case SubtreeKind::kDomain:
      for (topo::NodeId n : cluster_.nvlink_domain(topo::NvlinkDomainId(s.index)).nodes) {
        out->push_back({SubtreeKind::kNode, n.value()});
      }
      return;
    case SubtreeKind::kSwitch: {
      const auto& sw = cluster_.sw(topo::SwitchId(s.index));
      for (topo::SwitchId c : sw.child_switches) out->push_back({SubtreeKind::kSwitch, c.value()});
      for (std::uint32_t d : leaf_domains_[s.index]) out->push_back({SubtreeKind::kDomain, d});
      return;
    }
    case SubtreeKind::kRoot:
      if (roots_.empty()) {
        for (std::uint32_t d = 0; d < cluster_.nvlink_domains().size(); ++d) {
          out->push_back({SubtreeKind::kDomain, d});
        }
      }
      for (std::uint32_t r : roots_) out->push_back({SubtreeKind::kSwitch, r});
      return;
  }
}

std::span<const topo::NodeId> ClusterState::DomainNodes(std::uint32_t domain) const {
  return cluster_.nvlink_domain(topo::NvlinkDomainId(domain)).nodes;
}

}  // namespace baton::sched
