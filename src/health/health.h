// Node health from telemetry: composite rules with thresholds and hysteresis over the signals the
// DCGM exporter publishes (XID errors, double-bit ECC, PCIe replays, NVLink errors, temperature)
// plus the InfiniBand port state, turned into a node condition (healthy, suspect, draining, down)
// that drivers report to the scheduler as Event::NodeHealth. Pure: samples in, conditions out.
//
// Not thread-safe: one HealthMonitor per driver thread.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "topology/cluster.h"

namespace baton::health {

// Field names as DCGM exporter publishes them.
inline constexpr std::string_view kXidErrors = "DCGM_FI_DEV_XID_ERRORS";  // last XID code
inline constexpr std::string_view kEccDbeVolatile = "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL";
inline constexpr std::string_view kPcieReplay = "DCGM_FI_DEV_PCIE_REPLAY_COUNTER";
inline constexpr std::string_view kNvlinkCrcFlitErrors =
    "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL";
inline constexpr std::string_view kNvlinkReplayErrors =
    "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL";
inline constexpr std::string_view kGpuTemp = "DCGM_FI_DEV_GPU_TEMP";  // degrees C
// IB port state as the kernel reports it (4 = ACTIVE); the worst port of the node.
inline constexpr std::string_view kIbPortState = "ib_port_state";

// One telemetry sample of a node: field -> value (the worst over its GPUs / ports). A field
// missing from a sample matches no condition.
using Sample = std::map<std::string, double, std::less<>>;

enum class Op : std::uint8_t { kGreater, kGreaterEqual, kLess, kLessEqual, kEqual, kNotEqual };
Result<Op> ParseOp(std::string_view op);  // ">", ">=", "<", "<=", "==", "!="

struct Condition {
  std::string field;
  Op op = Op::kGreater;
  double threshold = 0;
  // While the rule is active it stays matched as long as `field op clear_threshold` holds
  // (a hysteresis band, e.g. enter at >= 90 C, leave below 85 C). nullopt: same as threshold.
  std::optional<double> clear_threshold;
};

struct Rule {
  std::string name;
  std::vector<Condition> all_of;  // composite: every condition must match
  topo::NodeHealth severity = topo::NodeHealth::kSuspect;
  int trigger_samples = 1;  // consecutive matching samples to activate
  int clear_samples = 3;    // consecutive clean samples to clear; 0 = sticky until Reset
};

// Checks names, fields and counts; InvalidArgument naming the rule and field.
Status ValidateRules(const std::vector<Rule>& rules);

// Defaults: XID 79 (fell off the bus) -> down; XID 48/94/95 (uncorrectable ECC) -> draining;
// any volatile double-bit ECC error -> draining (sticky); IB port not ACTIVE for 2 samples ->
// draining; PCIe replays > 100 or NVLink CRC errors > 100 for 3 samples -> suspect; GPU at
// >= 90 C for 3 samples -> suspect, cleared below 85 C.
std::vector<Rule> DefaultRules();

struct Assessment {
  topo::NodeHealth condition = topo::NodeHealth::kHealthy;
  bool changed = false;
  std::vector<std::string> active_rules;  // names, in rule order
};

class HealthMonitor {
 public:
  // `rules` must pass ValidateRules.
  explicit HealthMonitor(std::vector<Rule> rules);

  // Feeds one sample of `node`; returns its condition afterwards: the most severe active rule.
  Assessment Observe(topo::NodeId node, const Sample& sample);
  topo::NodeHealth condition(topo::NodeId node) const;
  // Clears every rule of the node (an operator repaired it).
  void Reset(topo::NodeId node);

 private:
  struct RuleState {
    int matches = 0;
    int clean = 0;
    bool active = false;
  };
  struct NodeState {
    std::vector<RuleState> rules;
    topo::NodeHealth condition = topo::NodeHealth::kHealthy;
  };
  std::vector<Rule> rules_;
  std::map<topo::NodeId, NodeState> nodes_;
};

}  // namespace baton::health
