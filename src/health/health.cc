#include "health/health.h"

#include <fmt/format.h>

#include <algorithm>

namespace baton::health {
namespace {

bool Holds(Op op, double v, double t) {
  switch (op) {
    case Op::kGreater:
      return v > t;
    case Op::kGreaterEqual:
      return v >= t;
    case Op::kLess:
      return v < t;
    case Op::kLessEqual:
      return v <= t;
    case Op::kEqual:
      return v == t;
    case Op::kNotEqual:
      return v != t;
  }
  return false;
}

bool Matches(const Rule& rule, bool active, const Sample& s) {
  if (rule.all_of.empty()) return false;
  for (const auto& c : rule.all_of) {
    auto it = s.find(c.field);
    if (it == s.end()) return false;
    const double t = active && c.clear_threshold ? *c.clear_threshold : c.threshold;
    if (!Holds(c.op, it->second, t)) return false;
  }
  return true;
}

Rule Make(std::string name, std::vector<Condition> all_of, topo::NodeHealth sev, int trigger,
          int clear) {
  return Rule{std::move(name), std::move(all_of), sev, trigger, clear};
}

}  // namespace

Result<Op> ParseOp(std::string_view op) {
  if (op == ">") return Op::kGreater;
  if (op == ">=") return Op::kGreaterEqual;
  if (op == "<") return Op::kLess;
  if (op == "<=") return Op::kLessEqual;
  if (op == "==") return Op::kEqual;
  if (op == "!=") return Op::kNotEqual;
  return InvalidArgumentError(fmt::format("unknown operator '{}' (expected > >= < <= == !=)", op));
}

Status ValidateRules(const std::vector<Rule>& rules) {
  for (std::size_t i = 0; i < rules.size(); ++i) {
    const Rule& r = rules[i];
    auto bad = [&](std::string_view field, std::string_view why) {
      return InvalidArgumentError(
          fmt::format("rule {} ('{}'): field '{}': {}", i, r.name, field, why));
    };
    if (r.name.empty()) return bad("name", "must not be empty");
    if (r.all_of.empty()) return bad("all_of", "needs at least one condition");
    for (const auto& c : r.all_of) {
      if (c.field.empty()) return bad("all_of.field", "must not be empty");
    }
    if (r.trigger_samples < 1) return bad("trigger_samples", "must be >= 1");
    if (r.clear_samples < 0) return bad("clear_samples", "must be >= 0");
    if (r.severity == topo::NodeHealth::kHealthy) return bad("severity", "must not be healthy");
  }
  return Status::Ok();
}

std::vector<Rule> DefaultRules() {
  using topo::NodeHealth;
  const std::string xid(kXidErrors);
  return {
      Make("gpu-fell-off-bus", {{xid, Op::kEqual, 79, {}}}, NodeHealth::kDown, 1, 0),
      Make("xid-uncorrectable-ecc-48", {{xid, Op::kEqual, 48, {}}}, NodeHealth::kDraining, 1, 0),
      Make("xid-contained-ecc-94", {{xid, Op::kEqual, 94, {}}}, NodeHealth::kDraining, 1, 0),
      Make("xid-uncontained-ecc-95", {{xid, Op::kEqual, 95, {}}}, NodeHealth::kDraining, 1, 0),
      Make("ecc-dbe", {{std::string(kEccDbeVolatile), Op::kGreater, 0, {}}}, NodeHealth::kDraining,
           1, 0),
      Make("ib-port-not-active", {{std::string(kIbPortState), Op::kNotEqual, 4, {}}},
           NodeHealth::kDraining, 2, 2),
      Make("pcie-replays", {{std::string(kPcieReplay), Op::kGreater, 100, {}}},
           NodeHealth::kSuspect, 3, 5),
      Make("nvlink-crc-errors", {{std::string(kNvlinkCrcFlitErrors), Op::kGreater, 100, {}}},
           NodeHealth::kSuspect, 3, 5),
      Make("gpu-hot", {{std::string(kGpuTemp), Op::kGreaterEqual, 90, 85}}, NodeHealth::kSuspect, 3,
           3),
  };
}

HealthMonitor::HealthMonitor(std::vector<Rule> rules) : rules_(std::move(rules)) {
  CHECK(ValidateRules(rules_).ok());
}

Assessment HealthMonitor::Observe(topo::NodeId node, const Sample& sample) {
  NodeState& ns = nodes_[node];
  ns.rules.resize(rules_.size());
  Assessment a;
  topo::NodeHealth worst = topo::NodeHealth::kHealthy;
  for (std::size_t i = 0; i < rules_.size(); ++i) {
    const Rule& r = rules_[i];
    RuleState& rs = ns.rules[i];
    if (Matches(r, rs.active, sample)) {
      ++rs.matches;
      rs.clean = 0;
      if (rs.matches >= r.trigger_samples) rs.active = true;
    } else {
      rs.matches = 0;
      ++rs.clean;
      if (rs.active && r.clear_samples > 0 && rs.clean >= r.clear_samples) rs.active = false;
    }
    if (rs.active) {
      a.active_rules.push_back(r.name);
      worst = std::max(worst, r.severity);
    }
  }
  a.changed = worst != ns.condition;
  ns.condition = worst;
  a.condition = worst;
  return a;
}

topo::NodeHealth HealthMonitor::condition(topo::NodeId node) const {
  auto it = nodes_.find(node);
  return it == nodes_.end() ? topo::NodeHealth::kHealthy : it->second.condition;
}

void HealthMonitor::Reset(topo::NodeId node) { nodes_.erase(node); }

}  // namespace baton::health
