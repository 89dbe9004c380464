#include "sched/framework/types.h"

#include <bit>

namespace baton::sched {

HostResources HostOn(const JobInfo& job, const NodeAlloc& a) {
  HostResources r = TaskHost(job);
  if (r.empty() || SharesGpu(job.spec) || CpuOnly(job.spec) || job.task_gpus <= 0) return r;
  return r.Times(std::popcount(a.mask) / job.task_gpus);
}

int Placement::gpus() const {
  int n = 0;
  for (const auto& a : nodes) n += std::popcount(a.mask);
  return n;
}

std::vector<topo::GpuRef> RankOrder(const Placement& p) {
  std::vector<topo::GpuRef> out;
  for (const auto& a : p.nodes) {
    for (int i = 0; i < 64; ++i) {
      if ((a.mask >> i) & 1) out.push_back({a.node, static_cast<std::uint8_t>(i)});
    }
  }
  return out;
}

topo::Level SpanOf(const topo::Cluster& cluster, const std::vector<NodeAlloc>& nodes) {
  if (nodes.empty()) return topo::Level::kNone;
  topo::Level span = topo::Level::kNode;
  for (std::size_t i = 1; i < nodes.size(); ++i) {
    span = std::max(span, cluster.Meet(nodes[0].node, nodes[i].node));
  }
  return span;
}

std::string_view JobPhaseName(JobPhase p) {
  switch (p) {
    case JobPhase::kSubmitted:
      return "submitted";
    case JobPhase::kPending:
      return "pending";
    case JobPhase::kRunning:
      return "running";
    case JobPhase::kTerminating:
      return "terminating";
  }
  return "?";
}

Event Event::Submit(GangJob job) {
  Event e;
  e.kind = Kind::kSubmit;
  e.job_id = job.id;
  e.job = std::move(job);
  return e;
}
Event Event::Cancel(JobId id) {
  Event e;
  e.kind = Kind::kCancel;
  e.job_id = id;
  return e;
}
Event Event::Finish(JobId id) {
  Event e;
  e.kind = Kind::kFinish;
  e.job_id = id;
  return e;
}
Event Event::Checkpoint(JobId id) {
  Event e;
  e.kind = Kind::kCheckpoint;
  e.job_id = id;
  return e;
}
Event Event::NodeHealth(topo::NodeId node, topo::NodeHealth health) {
  Event e;
  e.kind = Kind::kNodeHealth;
  e.node = node;
  e.health = health;
  return e;
}
Event Event::Adopt(GangJob job, Placement placement, TimePoint start) {
  Event e;
  e.kind = Kind::kAdopt;
  e.job_id = job.id;
  e.job = std::move(job);
  e.placement = std::move(placement);
  e.adopted_start = start;
  return e;
}

std::string_view RejectionKindName(RejectionKind k) {
  switch (k) {
    case RejectionKind::kInvalid:
      return "invalid";
    case RejectionKind::kUnresolvable:
      return "unresolvable";
    case RejectionKind::kRetriesExhausted:
      return "retries-exhausted";
  }
  return "?";
}

}  // namespace baton::sched
