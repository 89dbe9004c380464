// The built-in plugin registry: every plugin the scheduler can be configured with, by name.
#include "sched/plugins/builtin_plugins.h"

#include <fmt/format.h>

#include "sched/plugins/filters/filters.h"
#include "sched/plugins/fragmentation/fragmentation.h"
#include "sched/plugins/queue_sort/queue_sort.h"
#include "sched/plugins/quota/quota.h"
#include "sched/plugins/score/score.h"
#include "sched/plugins/topology/topology.h"
#include "sched/plugins/victim/lost_work.h"

namespace baton::sched {
namespace {

// A factory for plugins that take no arguments.
template <typename P>
PluginFactory NoArgs() {
  return [](const PluginArgs& args, const PluginDeps&) -> Result<std::unique_ptr<Plugin>> {
    if (!args.empty()) {
      return InvalidArgumentError(fmt::format("unknown argument '{}'", args.begin()->first));
    }
    return std::unique_ptr<Plugin>(std::make_unique<P>());
  };
}

PluginRegistry MakeRegistry() {
  PluginRegistry r;
  r["fifo"] = NoArgs<FifoPlugin>();
  r["priority"] = NoArgs<PriorityPlugin>();
  r["shortest-first"] = NoArgs<ShortestFirstPlugin>();
  r["las"] = [](const PluginArgs& a, const PluginDeps&) { return LasPlugin::Create(a); };
  r["drf"] = [](const PluginArgs& a, const PluginDeps&) { return DrfPlugin::Create(a); };
  r["health"] = NoArgs<HealthFilterPlugin>();
  r["gpu-type"] = NoArgs<GpuTypeFilterPlugin>();
  r["bad-nodes"] = NoArgs<BadNodesFilterPlugin>();
  r["node-attributes"] = NoArgs<NodeAttributesFilterPlugin>();
  r["resources"] = NoArgs<ResourcesFilterPlugin>();
  r["topology"] = NoArgs<TopologyPlugin>();
  r["fragmentation"] = [](const PluginArgs& a, const PluginDeps&) {
    return FragmentationPlugin::Create(a);
  };
  r["best-fit"] = NoArgs<BestFitPlugin>();
  r["random-fit"] = [](const PluginArgs& a, const PluginDeps&) {
    return RandomFitPlugin::Create(a);
  };
  r["binpack"] = NoArgs<BinpackScorePlugin>();
  r["planner"] = [](const PluginArgs& a, const PluginDeps& d) -> Result<std::unique_ptr<Plugin>> {
    if (!a.empty())
      return InvalidArgumentError(fmt::format("unknown argument '{}'", a.begin()->first));
    return std::unique_ptr<Plugin>(std::make_unique<PlannerScorePlugin>(d.estimator));
  };
  r["quota"] = [](const PluginArgs& a, const PluginDeps&) { return QuotaPlugin::Create(a); };
  r["lost-work"] = NoArgs<LostWorkPlugin>();
  return r;
}

}  // namespace

const PluginRegistry& BuiltinPlugins() {
  static const PluginRegistry* registry = new PluginRegistry(MakeRegistry());
  return *registry;
}

}  // namespace baton::sched
