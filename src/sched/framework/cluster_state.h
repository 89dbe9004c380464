// ClusterState: the scheduler's allocation state — the topo::Cluster (GPUs allocated, node
// health) plus the indexes placement needs: per subtree, how many tasks of 2^k GPUs its healthy
// free GPUs could host (exact for power-of-two task sizes, an upper bound otherwise), and the
// healthy nodes bucketed by free GPU count for best-fit packing. Every change goes through
// Allocate / Release / SetHealth, which keep the indexes in step in O(tree depth).
//
// Thread safety: const methods may run concurrently; mutations need external synchronisation.
#pragma once

#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"
#include "sched/framework/job.h"
#include "topology/cluster.h"

namespace baton::sched {

inline constexpr int kSlotSizes = 7;  // tasks of 1, 2, 4, ..., 64 GPUs
using SlotCounts = std::array<std::int32_t, kSlotSizes>;

// The slot index to use as an upper bound for tasks of `gpus_per_task` GPUs (>= 1).
int SlotIndex(int gpus_per_task);

// A set of node ids as one bit per node: insert and erase in O(1) without allocating, iteration
// in ascending id order (what best-fit placement walks).
class NodeSet {
 public:
  class Iterator {
   public:
    using value_type = std::uint32_t;
    using difference_type = std::ptrdiff_t;
    Iterator() = default;
    Iterator(const std::vector<std::uint64_t>* words, std::size_t word)
        : words_(words), word_(word) {
      Settle();
    }
    std::uint32_t operator*() const {
      return static_cast<std::uint32_t>(word_ * 64 + std::countr_zero(bits_));
    }
    Iterator& operator++() {
      bits_ &= bits_ - 1;
      if (bits_ == 0) {
        ++word_;
        Settle();
      }
      return *this;
    }
    Iterator operator++(int) {
      Iterator old = *this;
      ++*this;
      return old;
    }
    bool operator==(const Iterator& o) const { return word_ == o.word_ && bits_ == o.bits_; }

   private:
    // Moves to the first set bit at or after word_ (bits_ == 0 and word_ == size at the end).
    void Settle() {
      while (word_ < words_->size() && (*words_)[word_] == 0) ++word_;
      bits_ = word_ < words_->size() ? (*words_)[word_] : 0;
    }
    const std::vector<std::uint64_t>* words_ = nullptr;
    std::size_t word_ = 0;
    std::uint64_t bits_ = 0;
  };

  void Resize(std::size_t nodes) { words_.assign((nodes + 63) / 64, 0); }
  void insert(std::uint32_t n) {
    std::uint64_t& w = words_[n / 64];
    const std::uint64_t bit = std::uint64_t{1} << (n % 64);
    size_ += (w & bit) == 0;
    w |= bit;
  }
  void erase(std::uint32_t n) {
    std::uint64_t& w = words_[n / 64];
    const std::uint64_t bit = std::uint64_t{1} << (n % 64);
    size_ -= (w & bit) != 0;
    w &= ~bit;
  }
  bool contains(std::uint32_t n) const {
    return n / 64 < words_.size() && ((words_[n / 64] >> (n % 64)) & 1) != 0;
  }
  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  Iterator begin() const { return Iterator(&words_, 0); }
  Iterator end() const { return Iterator(&words_, words_.size()); }

 private:
  std::vector<std::uint64_t> words_;
  std::size_t size_ = 0;
};

// A subtree of the cluster: one node, one NVLink domain, one switch, or the whole cluster.
enum class SubtreeKind : std::uint8_t { kNode, kDomain, kSwitch, kRoot };
struct Subtree {
  SubtreeKind kind = SubtreeKind::kRoot;
  std::uint32_t index = 0;
  auto operator<=>(const Subtree&) const = default;
};

// Per-attribute indexes over node labels, built once: label key -> value -> nodes, and for
// labels whose values are numbers, key -> nodes sorted by value. A job's node requirements are
// matched through these, touching only the nodes a requirement names.
class AttributeIndex {
 public:
  explicit AttributeIndex(const topo::Cluster& cluster);
  // The nodes satisfying every requirement (bit per node), or nullptr when `reqs` is empty.
  std::shared_ptr<const std::vector<bool>> Match(std::span<const NodeRequirement> reqs) const;

 private:
  std::size_t nodes_ = 0;
  std::map<std::string, std::map<std::string, std::vector<std::uint32_t>>, std::less<>> by_value_;
  std::map<std::string, std::vector<std::pair<double, std::uint32_t>>, std::less<>> numeric_;
};

class ClusterState {
 public:
  explicit ClusterState(topo::Cluster cluster);
  ClusterState(ClusterState&&) = default;
  ClusterState& operator=(ClusterState&&) = default;
  // An independent copy (cluster, allocation, shares, host use, health, version): what-if work
  // (Scheduler::Forecast) runs on it and leaves this one untouched. Never copied by accident.
  ClusterState Clone() const { return ClusterState(*this); }

  const topo::Cluster& cluster() const { return cluster_; }

  // Same contracts as topo::Cluster: fail, changing nothing, on a bad or conflicting mask.
  // Release also fails on a GPU that holds shares (release those with ReleaseShare).
  Status Allocate(topo::NodeId node, std::uint64_t gpu_mask);
  Status Release(topo::NodeId node, std::uint64_t gpu_mask);

  // Shared GPUs (jobs with gpu_milli or a MIG profile). A GPU with at least one share counts as
  // allocated in the topo::Cluster, so whole-GPU work never lands on it and the free counts,
  // slots and buckets treat it as busy. AllocateShare fails, changing nothing, when the GPU is
  // whole-allocated, shared the other way (time-sharing vs MIG), or would exceed 1000 milli /
  // 7 compute slices / 8 memory slices; ReleaseShare fails on a share the GPU does not hold.
  // The last share released frees the GPU.
  struct GpuShare {
    GpuShareAmount used;
    int jobs = 0;
  };
  Status AllocateShare(topo::GpuRef gpu, const GpuShareAmount& amount);
  Status ReleaseShare(topo::GpuRef gpu, const GpuShareAmount& amount);
  // The shares on a GPU; nullptr when it holds none.
  const GpuShare* Share(topo::GpuRef gpu) const;
  // Every GPU holding shares, in GpuRef order.
  const std::map<topo::GpuRef, GpuShare>& shared_gpus() const { return shares_; }
  void SetHealth(topo::NodeId node, topo::NodeHealth health);

  // Host resources per node: CPU milli-cores and memory MiB with capacity from the node's shape
  // (cpus x 1000, memory in MiB; 0 = not declared, then that resource is not limited), and the
  // named extended resources of the shape (topo::NodeShape::extended; a name the shape lacks is
  // 0, so it is limited), and what tasks hold. AllocateHost fails, changing nothing, when a
  // capacity would be exceeded or an amount is negative; ReleaseHost fails, changing nothing, on
  // more than the node holds.
  struct HostUsage {
    std::int64_t cpu_capacity = 0;  // 0: undeclared (unlimited)
    std::int64_t memory_capacity = 0;
    std::int64_t cpu_used = 0;
    std::int64_t memory_used = 0;
    // Free amounts; undeclared resources report INT64_MAX / 4.
    std::int64_t cpu_free() const;
    std::int64_t memory_free() const;
  };
  Status AllocateHost(topo::NodeId node, const HostResources& r);
  Status ReleaseHost(topo::NodeId node, const HostResources& r);
  const HostUsage& Host(topo::NodeId node) const { return host_[node.value()]; }
  // Extended resource `id` (topo::Cluster::FindExtendedResource) of a node: capacity and in use.
  std::int64_t ExtendedCapacity(topo::NodeId node, int id) const {
    return extended_capacity_[node.value() * extended_kinds_ + static_cast<std::size_t>(id)];
  }
  std::int64_t ExtendedUsed(topo::NodeId node, int id) const {
    return extended_used_[node.value() * extended_kinds_ + static_cast<std::size_t>(id)];
  }
  std::int64_t ExtendedFree(topo::NodeId node, int id) const {
    return ExtendedCapacity(node, id) - ExtendedUsed(node, id);
  }
  // Whether `r` fits what the node has free: CPU, memory and every extended resource. No
  // allocation; O(r.extended.count).
  bool HostFits(topo::NodeId node, const HostResources& r) const {
    const HostUsage& h = host_[node.value()];
    if (r.cpu_milli > h.cpu_free() || r.memory_mib > h.memory_free()) return false;
    for (int i = 0; i < r.extended.count; ++i) {
      if (r.extended.amount[i] > ExtendedFree(node, r.extended.id[i])) return false;
    }
    return true;
  }
  // Thousandths of GPU `index` of `node` in use: 1000 for a whole-allocated GPU, the shares'
  // milli on a time-shared GPU (a MIG-shared GPU counts its compute slices as 1000 * slices / 7,
  // rounded up), 0 when idle.
  int UsedMilli(topo::NodeId node, int index) const {
    const std::uint64_t bit = std::uint64_t{1} << index;
    if (!shared_mask_.empty() && (shared_mask_[node.value()] & bit) != 0) {
      return share_milli_[gpu_offset_[node.value()] + static_cast<std::size_t>(index)];
    }
    return (cluster_.node(node).allocated_mask & bit) != 0 ? kMilliPerGpu : 0;
  }
  // Bumped whenever anything on the node changes (GPUs, shares, host resources, health): caches
  // keyed on a node's state may compare it.
  std::uint32_t NodeVersion(topo::NodeId node) const { return node_version_[node.value()]; }

  // Allocatable GPUs on a node: idle GPUs of a healthy node, else 0.
  int FreeGpus(topo::NodeId node) const { return node_free_[node.value()]; }
  // Upper bound on the tasks of `gpus_per_task` GPUs the subtree's free GPUs can host (exact
  // when gpus_per_task is a power of two).
  std::int64_t Slots(Subtree s, int gpus_per_task) const;
  // Free GPUs (healthy, idle) in a subtree.
  std::int64_t Free(Subtree s) const;

  // The level a subtree stands for (node, nvlink-domain, a switch tier's level, kCore for root).
  topo::Level LevelOf(Subtree s) const;
  // Children in a deterministic order: root -> top switches; switch -> child switches, or for a
  // leaf the NVLink-domain groups of its nodes; domain -> nodes.
  void Children(Subtree s, std::vector<Subtree>* out) const;
  // Nodes of a leaf-level group (kDomain subtree restricted to the nodes under one leaf).
  std::span<const topo::NodeId> DomainNodes(std::uint32_t domain) const;
  // True when some NVLink domain spans several nodes (NVL72); otherwise domain == node.
  bool has_multi_node_domains() const { return multi_node_domains_; }
  // Healthy nodes with exactly `free` idle GPUs, ascending id. 1 <= free <= 64.
  const NodeSet& NodesWithFree(int free) const { return buckets_[free]; }
  int max_node_gpus() const { return max_node_gpus_; }
  // Switches of tier t (0 = leaf), ascending id.
  std::span<const std::uint32_t> SwitchesOfTier(int tier) const { return by_tier_[tier]; }

  const AttributeIndex& attributes() const { return *attributes_; }

  // Bumped on every change; equal versions mean identical allocation state.
  std::uint64_t version() const { return version_; }
  // Bumped on every SetHealth: equal health versions mean that every change of the state between
  // them came from allocations and releases.
  std::uint64_t health_version() const { return health_version_; }

 private:
  ClusterState(const ClusterState& other);
  void Update(topo::NodeId node, int free_before);
  void SetShareMilli(topo::GpuRef gpu, const GpuShareAmount& used);

  topo::Cluster cluster_;
  std::vector<SlotCounts> switch_slots_;
  std::vector<SlotCounts> domain_slots_;
  std::vector<std::int8_t> node_free_;  // FreeGpus per node, kept by Update
  std::vector<std::int64_t> switch_free_;
  std::vector<std::int64_t> domain_free_;
  SlotCounts root_slots_{};
  std::int64_t root_free_ = 0;
  std::vector<std::uint32_t> roots_;
  std::array<std::vector<std::uint32_t>, topo::kMaxSwitchTiers> by_tier_;
  std::vector<std::vector<std::uint32_t>> leaf_domains_;  // per switch, empty unless a leaf
  std::vector<NodeSet> buckets_;
  bool multi_node_domains_ = false;
  int max_node_gpus_ = 0;
  std::uint64_t version_ = 0;
  std::uint64_t health_version_ = 0;
  std::shared_ptr<const AttributeIndex> attributes_;
  std::map<topo::GpuRef, GpuShare> shares_;
  std::vector<std::uint64_t> shared_mask_;  // per node: GPUs holding shares
  std::vector<HostUsage> host_;             // per node
  // Extended resources, per node x per interned id (node * extended_kinds_ + id); empty when the
  // cluster declares none, so clusters without them pay nothing.
  std::size_t extended_kinds_ = 0;
  std::vector<std::int64_t> extended_capacity_;
  std::vector<std::int64_t> extended_used_;
  std::vector<std::uint32_t> gpu_offset_;    // per node: its first GPU in share_milli_
  std::vector<std::int16_t> share_milli_;    // per GPU: milli held by shares
  std::vector<std::uint32_t> node_version_;  // per node
};

}  // namespace baton::sched
