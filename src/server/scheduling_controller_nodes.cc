// SchedulingController: nodes' admin state, telemetry and health verdicts.
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

void SchedulingController::Handle(AdminChanged& in) {
  auto it = node_by_name_.find(in.node.node);
  if (it == node_by_name_.end()) {
    LOG_WARN("node admin change for {}, which is not in the cluster", in.node.node);
    return;
  }
  admin_health_[it->second] = in.node.admin == NodeAdmin::kActive ? topo::NodeHealth::kHealthy
                                                                  : topo::NodeHealth::kDraining;
  if (in.node.admin == NodeAdmin::kActive) {
    // Uncordon: the operator says the node is fixed, which also clears the health rules'
    // verdict (sticky rules clear only this way) and the one kept from before a restart.
    health_.Reset(it->second);
    restored_health_.erase(it->second);
    {
      std::lock_guard lock(snapshot_mu_);
      active_rules_.erase(it->second);
    }
    PersistHealth(it->second, {});
  }
  SetNodeHealth(it->second);
}

void SchedulingController::AdoptStoredCordons() {
  Result<std::vector<NodeAdminState>> admin = store_->ListNodeAdmin();
  if (!admin.ok()) {
    LOG_WARN("node admin states unreadable: {}", admin.status().message());
    return;
  }
  for (const NodeAdminState& a : *admin) {
    auto it = node_by_name_.find(a.node);
    if (a.admin == NodeAdmin::kActive || it == node_by_name_.end()) continue;
    auto known = admin_health_.find(it->second);
    if (known != admin_health_.end() && known->second == topo::NodeHealth::kDraining) continue;
    LOG_INFO("node {} is {} in the store: no longer placed on", a.node, NodeAdminName(a.admin));
    AdminChanged in{a};
    Handle(in);
  }
}

topo::NodeHealth SchedulingController::HealthVerdict(topo::NodeId node) const {
  topo::NodeHealth h = health_.condition(node);
  if (auto it = restored_health_.find(node); it != restored_health_.end()) {
    h = Worse(h, it->second.health);
  }
  return h;
}

void SchedulingController::PersistHealth(topo::NodeId node,
                                         const std::vector<std::string>& active_rules) {
  NodeHealthState state;
  state.node = cluster().node(node).name;
  state.condition = std::string(topo::NodeHealthName(HealthVerdict(node)));
  state.rules = active_rules;
  if (auto it = restored_health_.find(node); it != restored_health_.end()) {
    for (const std::string& r : it->second.rules) {
      if (std::find(state.rules.begin(), state.rules.end(), r) == state.rules.end()) {
        state.rules.push_back(r);
      }
    }
  }
  if (Status s = store_->SetNodeHealth(state); !s.ok()) {
    LOG_WARN("node {}: cannot store its health verdict: {}", state.node, s.ToString());
  }
}

void SchedulingController::Handle(TelemetryIn& in) {
  health::Sample sample(in.sample.begin(), in.sample.end());
  health::Assessment a = health_.Observe(in.node, sample);
  {
    std::lock_guard lock(snapshot_mu_);
    active_rules_[in.node] = a.active_rules;
    // Only what the rules read: a sample may name any number of fields; the rules bound this.
    TelemetrySample& kept = signals_[in.node];
    kept.clear();
    for (const health::Rule& rule : options_.health_rules) {
      for (const health::Condition& c : rule.all_of) {
        if (auto it = in.sample.find(c.field); it != in.sample.end()) kept[c.field] = it->second;
      }
    }
  }
  bool restored_cleared = false;
  if (auto it = restored_health_.find(in.node); it != restored_health_.end()) {
    RestoredVerdict& r = it->second;
    r.clean_seen = a.active_rules.empty() ? r.clean_seen + 1 : 0;
    if (r.clean_needed > 0 && r.clean_seen >= r.clean_needed) {
      restored_health_.erase(it);
      restored_cleared = true;
    }
  }
  if (a.changed || restored_cleared) {
    LOG_WARN("node {} is now {} ({})", cluster().node(in.node).name,
             topo::NodeHealthName(HealthVerdict(in.node)), fmt::join(a.active_rules, ", "));
    PersistHealth(in.node, a.active_rules);
    SetNodeHealth(in.node);
  }
}

void SchedulingController::SetNodeHealth(topo::NodeId node) {
  topo::NodeHealth admin = topo::NodeHealth::kHealthy;
  if (auto it = admin_health_.find(node); it != admin_health_.end()) admin = it->second;
  // baton's own verdict (admin state, health rules) goes to the executor's resource manager; the
  // resource manager's view of the node comes back through HandleNodeReport and only worsens it.
  topo::NodeHealth ours = Worse(admin, HealthVerdict(node));
  auto told = told_executor_.try_emplace(node, topo::NodeHealth::kHealthy).first;
  if (told->second != ours) {
    told->second = ours;
    std::string reason =
        admin != topo::NodeHealth::kHealthy ? "cordoned or drained by an admin" : "health rules";
    executor_->NodeConditionChanged(cluster().node(node).name, ours, reason);
  }
  topo::NodeHealth h = ours;
  if (auto it = executor_health_.find(node); it != executor_health_.end()) h = Worse(h, it->second);
  if (h != cluster().node(node).health) events_.push_back(sched::Event::NodeHealth(node, h));
}

void SchedulingController::HandleNodeReport(const NodeReport& report) {
  auto it = node_by_name_.find(report.node);
  if (it == node_by_name_.end()) return;  // a node the executor has and the cluster does not
  LOG_WARN("node {}: {} says {} ({})", report.node, executor_->name(),
           topo::NodeHealthName(report.health), report.reason);
  executor_health_[it->second] = report.health;
  SetNodeHealth(it->second);
}

}  // namespace baton::server
