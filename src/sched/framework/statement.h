// Statement: a transaction over ClusterState. Allocate / Release apply at once (so later placement
// steps see them) and are recorded; Commit() keeps them, Discard() undoes them in reverse order,
// restoring the state exactly (allocation masks, health-derived counts and indexes). A Statement
// destroyed while open discards. This is how a gang lands whole or not at all, and how backfill
// and preemption try "what if" states.
//
// Not thread-safe. The ClusterState must outlive the Statement. Several Statements may be open on
// one state only if nested: the inner one commits or discards before the outer one moves again.
#pragma once

#include <cstdint>
#include <vector>

#include "core/status.h"
#include "sched/framework/cluster_state.h"

namespace baton::sched {

class Statement {
 public:
  explicit Statement(ClusterState* state) : state_(state) {}
  ~Statement();
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  // Same contracts as ClusterState; a failed operation changes nothing and is not recorded.
  Status Allocate(topo::NodeId node, std::uint64_t gpu_mask);
  Status Release(topo::NodeId node, std::uint64_t gpu_mask);
  Status AllocateShare(topo::GpuRef gpu, const GpuShareAmount& amount);
  Status ReleaseShare(topo::GpuRef gpu, const GpuShareAmount& amount);
  // Host resources (CPU, memory) of one or more tasks on a node; empty amounts are no-ops.
  Status AllocateHost(topo::NodeId node, const HostResources& r);
  Status ReleaseHost(topo::NodeId node, const HostResources& r);

  // Keeps every operation; the statement is then empty and may be reused.
  void Commit();
  // Undoes every operation since construction or the last Commit/Discard, last first.
  void Discard();
  // Undoes the operations after the first `mark` (a value of size() taken earlier), last first.
  void RollbackTo(std::size_t mark);
  bool empty() const { return ops_.empty(); }
  std::size_t size() const { return ops_.size(); }

  ClusterState& state() { return *state_; }

 private:
  struct Op {
    bool allocate;
    topo::NodeId node;
    std::uint64_t mask;
    bool share = false;  // a GPU share: the GPU is the lowest bit of `mask`
    GpuShareAmount amount;
    bool host = false;  // host resources: `resources` on `node`
    HostResources resources;
  };
  ClusterState* state_;
  std::vector<Op> ops_;
};

}  // namespace baton::sched
