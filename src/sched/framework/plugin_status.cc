#include "sched/framework/plugin_status.h"

namespace baton::sched {

std::string_view StatusKindName(StatusKind kind) {
  switch (kind) {
    case StatusKind::kSuccess:
      return "success";
    case StatusKind::kUnschedulable:
      return "unschedulable";
    case StatusKind::kUnresolvable:
      return "unresolvable";
  }
  return "?";
}

const std::string& PluginStatus::Empty() {
  static const std::string* const kEmpty = new std::string();
  return *kEmpty;
}

std::string PluginStatus::ToString() const {
  std::string out(StatusKindName(kind_));
  if (!plugin_.empty()) out += " (" + plugin_ + ")";
  if (!reason().empty()) out += ": " + reason();
  return out;
}

}  // namespace baton::sched
