// PluginStatus: what an extension point answers, with scheduling meaning. Unschedulable: the job
// cannot be placed now but evicting lower-priority work or waiting may help. Unresolvable: it can
// never be placed as specified (preemption would not help). The framework stamps the name of the
// plugin that said no.
#pragma once

#include <string>
#include <string_view>

namespace baton::sched {

enum class StatusKind : std::uint8_t { kSuccess, kUnschedulable, kUnresolvable };
std::string_view StatusKindName(StatusKind kind);

class PluginStatus {
 public:
  PluginStatus() = default;  // success
  static PluginStatus Success() { return {}; }
  static PluginStatus Unschedulable(std::string reason) {
    return PluginStatus(StatusKind::kUnschedulable, std::move(reason));
  }
  static PluginStatus Unresolvable(std::string reason) {
    return PluginStatus(StatusKind::kUnresolvable, std::move(reason));
  }

  bool ok() const { return kind_ == StatusKind::kSuccess; }
  StatusKind kind() const { return kind_; }
  const std::string& reason() const { return reason_; }
  // The plugin that produced this status (set by the framework, not by plugins).
  const std::string& plugin() const { return plugin_; }
  PluginStatus& WithPlugin(std::string_view plugin) {
    plugin_ = std::string(plugin);
    return *this;
  }
  // "unschedulable (topology): no leaf has 64 free GPUs".
  std::string ToString() const;

 private:
  PluginStatus(StatusKind kind, std::string reason) : kind_(kind), reason_(std::move(reason)) {}
  StatusKind kind_ = StatusKind::kSuccess;
  std::string reason_;
  std::string plugin_;
};

}  // namespace baton::sched
