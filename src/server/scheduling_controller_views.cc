// SchedulingController: what the API reads (snapshots of jobs, nodes and the cluster; what-if).
#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <limits>
#include <set>

#include "core/check.h"
#include "core/log.h"
#include "core/strings.h"
#include "sched/framework/presets.h"
#include "sched/history/history.h"
#include "server/http/admission.h"
#include "server/http/job_spec.h"
#include "server/scheduling_controller_internal.h"
#include "topology/io/cluster_yaml.h"
#include "topology/summary.h"

namespace baton::server {

void SchedulingController::PublishSnapshot() {
  const topo::Cluster& c = cluster();
  std::map<JobId, PlacementView> placements;
  std::map<JobId, std::string> job_tenants;
  std::vector<NodeView> nodes(c.nodes().size());
  std::map<std::string, int> phases = {{"pending", 0}, {"running", 0}, {"terminating", 0}};
  for (const auto& [sid, info] : scheduler_->jobs()) {
    ++phases[std::string(sched::JobPhaseName(info.phase))];
    PlacementView v;
    v.phase = sched::JobPhaseName(info.phase);
    if (info.phase == sched::JobPhase::kPending) {
      if (auto it = waiting_now_.find(StoreId(sid)); it != waiting_now_.end()) {
        v.waiting = it->second;
      }
      if (auto it = forecast_.find(sid); it != forecast_.end()) {
        v.queue_position = it->second.position;
        v.estimated_start = it->second.estimated_start;
        v.waiting_kind = sched::WaitingKindName(it->second.kind);
      }
    }
    if (!info.placement.empty()) {
      job_tenants.emplace(StoreId(sid), info.spec.tenant);
      v.level = topo::LevelName(info.placement.span);
      for (const auto& a : info.placement.nodes) {
        v.nodes.push_back({c.node(a.node).name, MaskBits(a.mask)});
        nodes[a.node.value()].jobs.push_back(StoreId(sid));
      }
    }
    placements.emplace(StoreId(sid), std::move(v));
  }
  for (const auto& [id, lease] : leases_) {
    if (!lease.held || placements.contains(id)) continue;
    PlacementView v;
    v.phase = "pending";
    v.waiting = "held: the federation broker has not renewed this job's lease";
    placements.emplace(id, std::move(v));
  }
  std::erase_if(waiting_now_, [&](const auto& kv) { return !placements.contains(kv.first); });
  std::map<std::string, int> by_health;
  int unhealthy = 0;
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    const topo::Node& n = c.nodes()[i];
    nodes[i].name = n.name;
    nodes[i].health = topo::NodeHealthName(n.health);
    nodes[i].gpus = n.gpus;
    nodes[i].gpus_allocated = std::popcount(n.allocated_mask);
    ++by_health[nodes[i].health];
    if (n.health != topo::NodeHealth::kHealthy) {
      unhealthy += n.gpus - nodes[i].gpus_allocated;
    }
  }
  // The summary states GPU counts: rewritten when they change, so that it agrees with `nodes`.
  std::string summary;
  if (!(c.counts() == summarized_counts_)) summary = topo::Summarize(c);
  {
    std::lock_guard lock(snapshot_mu_);
    if (!summary.empty()) {
      topology_summary_ = std::move(summary);
      summarized_counts_ = c.counts();
    }
    for (auto& [id, rules] : active_rules_) nodes[id.value()].active_rules = rules;
    for (auto& [id, sample] : signals_) nodes[id.value()].signals = sample;
    placements_ = std::move(placements);
    nodes_ = std::move(nodes);
    job_tenants_ = std::move(job_tenants);
    ++cycles_;
  }
  for (const auto& [phase, n] : phases) metrics_->queue.WithLabels({phase}).Set(n);
  const topo::GpuCounts& counts = c.counts();
  metrics_->gpus.WithLabels({"allocated"}).Set(counts.allocated);
  metrics_->gpus.WithLabels({"free"}).Set(counts.free);
  metrics_->gpus.WithLabels({"unhealthy"}).Set(unhealthy);
  for (std::string_view h : {"healthy", "suspect", "draining", "down"}) {
    metrics_->nodes.WithLabels({h}).Set(by_health[std::string(h)]);
  }
}

Result<WhatIfView> SchedulingController::WhatIf(const JobSpec& spec) {
  JobRecord record;
  record.tenant = spec.tenant.value_or("default");
  record.name = spec.name;
  ASSIGN_OR_RETURN(sched::GangJob job,
                   GangJobFromSpec(record, spec, executor_->TimeScale(), admission_cluster_.get()));
  std::lock_guard work(work_mu_);
  RETURN_IF_ERROR(AttachPlan(spec, job));
  ASSIGN_OR_RETURN(
      sched::WhatIfAnswer a,
      scheduler_->WhatIf(clock_.Now(), job, std::max(1, options_.forecast_max_cycles)));
  WhatIfView v;
  v.queue_position = a.forecast.position;
  v.estimated_start = a.forecast.estimated_start;
  v.waiting_kind = sched::WaitingKindName(a.forecast.kind);
  const topo::Cluster& c = cluster();
  for (std::size_t i = 0; i < c.nodes().size(); ++i) {
    v.total_gpus += c.nodes()[i].gpus;
    v.free_gpus += scheduler_->state().FreeGpus(topo::NodeId(static_cast<std::uint32_t>(i)));
  }
  if (!a.placement.empty()) {
    if (a.gpu != nullptr) v.gpu_type = a.gpu->name;
    v.level = topo::LevelName(a.placement.span);
    for (const auto& n : a.placement.nodes)
      v.nodes.push_back({c.node(n.node).name, MaskBits(n.mask)});
    if (job.has_plan) {
      v.step_time_s = planner_->compact_step(job.plan_key).value() *
                      planner_->Slowdown(job, sched::RankOrder(a.placement));
    }
  }
  return v;
}

Status SchedulingController::Admit(const JobSpec& spec) const {
  RETURN_IF_ERROR(AdmitJob(spec, *admission_cluster_));
  return CheckJob(spec);
}

std::optional<PlacementView> SchedulingController::JobPlacement(JobId job) const {
  std::lock_guard lock(snapshot_mu_);
  auto it = placements_.find(job);
  if (it == placements_.end()) return std::nullopt;
  return it->second;
}

ClusterView SchedulingController::ClusterLayout(const topo::Cluster& c) {
  ClusterView out;
  out.name = c.name();
  out.nodes.reserve(c.nodes().size());
  for (const topo::Node& n : c.nodes()) {
    ClusterView::Node v;
    v.name = n.name;
    for (int t = topo::kMaxSwitchTiers - 1; t >= 0; --t) {
      if (n.ancestors[t].valid()) v.path.push_back(c.sw(n.ancestors[t]).name);
    }
    if (n.nvlink_domain.valid() && c.nvlink_domain(n.nvlink_domain).nodes.size() > 1) {
      v.domain = c.nvlink_domain(n.nvlink_domain).name;
    }
    v.gpu_jobs.assign(n.gpus, 0);
    out.nodes.push_back(std::move(v));
  }
  return out;
}

ClusterView SchedulingController::Cluster() const {
  ClusterView out = layout_;  // immutable after Create
  std::lock_guard lock(snapshot_mu_);
  for (std::size_t i = 0; i < nodes_.size() && i < out.nodes.size(); ++i) {
    out.nodes[i].health = nodes_[i].health;
  }
  std::unordered_map<std::string_view, std::size_t> index;
  for (std::size_t i = 0; i < out.nodes.size(); ++i) index.emplace(out.nodes[i].name, i);
  for (const auto& [id, p] : placements_) {
    for (const auto& n : p.nodes) {
      auto it = index.find(n.node);
      if (it == index.end()) continue;
      for (int g : n.gpus) {
        auto& jobs = out.nodes[it->second].gpu_jobs;
        if (g >= 0 && static_cast<std::size_t>(g) < jobs.size()) jobs[g] = id;
      }
    }
  }
  out.job_tenants = job_tenants_;
  return out;
}

std::vector<NodeView> SchedulingController::Nodes() const {
  std::lock_guard lock(snapshot_mu_);
  return nodes_;
}

std::int64_t SchedulingController::cycles() const {
  std::lock_guard lock(snapshot_mu_);
  return cycles_;
}

}  // namespace baton::server
