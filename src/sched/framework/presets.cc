#include "sched/framework/presets.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <utility>

#include "core/strings.h"

namespace baton::sched {
namespace {

struct Preset {
  std::string_view name;
  std::string_view yaml;
};

constexpr Preset kPresets[] = {
#include "sched/framework/presets.inc"
};

constexpr std::array<std::string_view, 6> kOrder = {"fifo", "first-fit", "backfill",
                                                    "las",  "topo",      "daemon"};

}  // namespace

std::vector<std::string> PolicyNames() {
  std::vector<std::string> names;
  for (std::string_view n : kOrder) {
    if (std::any_of(std::begin(kPresets), std::end(kPresets),
                    [&](const Preset& p) { return p.name == n; })) {
      names.emplace_back(n);
    }
  }
  for (const Preset& p : kPresets) {
    if (std::find(kOrder.begin(), kOrder.end(), p.name) == kOrder.end()) {
      names.emplace_back(p.name);
    }
  }
  return names;
}

Result<std::string_view> PolicyYaml(std::string_view name) {
  for (const Preset& p : kPresets) {
    if (p.name == name) return p.yaml;
  }
  return InvalidArgumentError(
      fmt::format("unknown policy '{}' (known: {}; or give a file with --scheduler-config)",
                  Printable(name), fmt::join(PolicyNames(), ", ")));
}

Result<SchedulerConfig> PolicyPreset(std::string_view name) {
  ASSIGN_OR_RETURN(std::string_view yaml, PolicyYaml(name));
  return ParseSchedulerConfig(yaml, fmt::format("data/scheduler/{}.yaml", name));
}

}  // namespace baton::sched
