// PluginStatus: what an extension point answers, with scheduling meaning. Unschedulable: the job
// cannot be placed now but evicting lower-priority work or waiting may help. Unresolvable: it can
// never be placed as specified (preemption would not help). The framework stamps the name of the
// plugin that said no.
#pragma once

#include <memory>
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
  const std::string& reason() const { return reason_ ? *reason_ : Empty(); }
  // The plugin that produced this status (set by the framework, not by plugins).
  const std::string& plugin() const { return plugin_; }
  PluginStatus& WithPlugin(std::string_view plugin) {
    plugin_ = std::string(plugin);
    return *this;
  }
  // "unschedulable (topology): no leaf has 64 free GPUs".
  std::string ToString() const;

 private:
  PluginStatus(StatusKind kind, std::string reason)
      : kind_(kind),
        reason_(reason.empty() ? nullptr : std::make_shared<const std::string>(std::move(reason))) {
  }
  static const std::string& Empty();
  StatusKind kind_ = StatusKind::kSuccess;
  // Immutable and shared: a status is copied for every job that waits on it each cycle (failure
  // cache, waiting notes), so a copy must not copy the text.
  std::shared_ptr<const std::string> reason_;
  std::string plugin_;
};

}  // namespace baton::sched
