#include "sched/plugins/victim/lost_work.h"

#include <algorithm>

#include "sched/framework/registry.h"

namespace baton::sched {

std::optional<double> LostWorkPlugin::VictimCost(const PluginContext& ctx, const JobInfo& preemptor,
                                                 const JobInfo& victim) {
  if (victim.spec.priority >= preemptor.spec.priority) return std::nullopt;
  return EvictionCost(ctx, preemptor, victim);
}

std::optional<double> LostWorkPlugin::EvictionCost(const PluginContext& ctx, const JobInfo&,
                                                   const JobInfo& victim) {
  if (victim.phase != JobPhase::kRunning || !victim.spec.preemptible) return std::nullopt;
  const TimePoint since = std::max(victim.start, victim.last_checkpoint);
  const double gpus = victim.placement.gpus();
  return std::max(0.0, (ctx.now - since).value()) * gpus + 1e-3 * gpus;
}

void RegisterVictimPlugins(PluginRegistry& registry) {
  registry["lost-work"] = NoArgs<LostWorkPlugin>();
}

}  // namespace baton::sched
