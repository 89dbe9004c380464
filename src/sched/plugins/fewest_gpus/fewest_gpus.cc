#include "sched/plugins/fewest_gpus/fewest_gpus.h"

#include "sched/framework/registry.h"

namespace baton::sched {

bool FewestGpusPlugin::Less(const PluginContext&, const JobInfo& a, const JobInfo& b) const {
  if (a.spec.gpus != b.spec.gpus) return a.spec.gpus < b.spec.gpus;
  if (a.spec.priority != b.spec.priority) return a.spec.priority > b.spec.priority;
  return a.spec.submit_time < b.spec.submit_time;
}

void RegisterFewestGpusPlugin(PluginRegistry& registry) {
  registry["fewest-gpus"] = NoArgs<FewestGpusPlugin>();
}

}  // namespace baton::sched
