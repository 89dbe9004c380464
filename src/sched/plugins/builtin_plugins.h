// The built-in plugin table (name -> factory); see builtin_plugins.cc for the list.
#pragma once

#include "sched/framework/registry.h"

namespace baton::sched {

const PluginRegistry& BuiltinPlugins();

}  // namespace baton::sched
