#include "sched/framework/statement.h"

#include <bit>

#include "core/check.h"

namespace baton::sched {

Statement::~Statement() { Discard(); }

Status Statement::Allocate(topo::NodeId node, std::uint64_t gpu_mask) {
  RETURN_IF_ERROR(state_->Allocate(node, gpu_mask));
  ops_.push_back({true, node, gpu_mask});
  return Status::Ok();
}

Status Statement::Release(topo::NodeId node, std::uint64_t gpu_mask) {
  RETURN_IF_ERROR(state_->Release(node, gpu_mask));
  ops_.push_back({false, node, gpu_mask});
  return Status::Ok();
}

Status Statement::AllocateShare(topo::GpuRef gpu, const GpuShareAmount& amount) {
  RETURN_IF_ERROR(state_->AllocateShare(gpu, amount));
  ops_.push_back({true, gpu.node, std::uint64_t{1} << gpu.index, true, amount});
  return Status::Ok();
}

Status Statement::ReleaseShare(topo::GpuRef gpu, const GpuShareAmount& amount) {
  RETURN_IF_ERROR(state_->ReleaseShare(gpu, amount));
  ops_.push_back({false, gpu.node, std::uint64_t{1} << gpu.index, true, amount});
  return Status::Ok();
}

Status Statement::AllocateHost(topo::NodeId node, const HostResources& r) {
  if (r.empty()) return Status::Ok();
  RETURN_IF_ERROR(state_->AllocateHost(node, r));
  Op op{true, node, 0};
  op.host = true;
  op.resources = r;
  ops_.push_back(op);
  return Status::Ok();
}

Status Statement::ReleaseHost(topo::NodeId node, const HostResources& r) {
  if (r.empty()) return Status::Ok();
  RETURN_IF_ERROR(state_->ReleaseHost(node, r));
  Op op{false, node, 0};
  op.host = true;
  op.resources = r;
  ops_.push_back(op);
  return Status::Ok();
}

void Statement::Commit() { ops_.clear(); }

void Statement::Discard() { RollbackTo(0); }

void Statement::RollbackTo(std::size_t mark) {
  CHECK_LE(mark, ops_.size());
  while (ops_.size() > mark) {
    const Op& op = ops_.back();
    Status s;
    if (op.host) {
      s = op.allocate ? state_->ReleaseHost(op.node, op.resources)
                      : state_->AllocateHost(op.node, op.resources);
    } else if (op.share) {
      const topo::GpuRef gpu{op.node, static_cast<std::uint8_t>(std::countr_zero(op.mask))};
      s = op.allocate ? state_->ReleaseShare(gpu, op.amount)
                      : state_->AllocateShare(gpu, op.amount);
    } else {
      s = op.allocate ? state_->Release(op.node, op.mask) : state_->Allocate(op.node, op.mask);
    }
    CHECK(s.ok()) << "undoing a statement operation failed: " << s.ToString();
    ops_.pop_back();
  }
}

}  // namespace baton::sched
