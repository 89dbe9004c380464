// The built-in plugin table (name -> factory): every plugin folder's registration function
// (plugins/CMakeLists.txt) has added its plugins.
#pragma once

#include "sched/framework/registry.h"

namespace baton::sched {

const PluginRegistry& BuiltinPlugins();

}  // namespace baton::sched
