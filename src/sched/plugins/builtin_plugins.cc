// The built-in plugin registry: every plugin folder's registration function, called once.
#include "sched/plugins/builtin_plugins.h"

#include "sched/plugins/builtin_plugins.inc"

namespace baton::sched {

const PluginRegistry& BuiltinPlugins() {
  static const PluginRegistry* registry = [] {
    auto* r = new PluginRegistry();
    AddPluginFolders(*r);
    return r;
  }();
  return *registry;
}

}  // namespace baton::sched
