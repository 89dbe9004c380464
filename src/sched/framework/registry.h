// PluginRegistry: the explicit name -> factory table the scheduler builds its plugins from. The
// built-in table is in plugins/builtin_plugins.cc; tests and drivers may extend a copy of it.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>

#include "core/status.h"
#include "sched/framework/config.h"
#include "sched/framework/estimator.h"
#include "sched/framework/plugin.h"

namespace baton::sched {

// What factories may be handed besides their arguments. Not owned; may be null.
struct PluginDeps {
  StepTimeEstimator* estimator = nullptr;
};

using PluginFactory =
    std::function<Result<std::unique_ptr<Plugin>>(const PluginArgs& args, const PluginDeps& deps)>;
using PluginRegistry = std::map<std::string, PluginFactory, std::less<>>;

// A factory for a plugin that takes no arguments (an argument is an error naming it).
template <typename P>
PluginFactory NoArgs() {
  return [](const PluginArgs& args, const PluginDeps&) -> Result<std::unique_ptr<Plugin>> {
    if (!args.empty()) {
      return InvalidArgumentError("unknown argument '" + args.begin()->first + "'");
    }
    return std::unique_ptr<Plugin>(std::make_unique<P>());
  };
}

}  // namespace baton::sched
