#include "sched/plugins/score/score.h"

#include <fmt/format.h>

#include <cmath>

#include "sched/framework/registry.h"

namespace baton::sched {

double BinpackScorePlugin::Score(const PluginContext& ctx, const JobInfo&, const Placement& p) {
  const topo::Cluster& c = ctx.state.cluster();
  if (p.nodes.empty()) return 0;
  double sum = 0;
  for (const auto& a : p.nodes) {
    const topo::Node& n = c.node(a.node);
    const topo::GpuCounts* counts = &c.nvlink_domain(n.nvlink_domain).counts;
    if (c.tier_count() > 0 && n.ancestors[0].valid()) counts = &c.counts(n.ancestors[0]);
    // The placement's own GPUs are not yet allocated when it is scored.
    sum += counts->total > 0 ? 1.0 - static_cast<double>(counts->free) / counts->total : 0.0;
  }
  return 100.0 * sum / static_cast<double>(p.nodes.size());
}

double PlannerScorePlugin::Score(const PluginContext&, const JobInfo& job, const Placement& p) {
  if (estimator_ == nullptr || !job.spec.has_plan) return 100.0;
  std::vector<topo::GpuRef> gpus = RankOrder(p);
  double slowdown = estimator_->Slowdown(job.spec, gpus);
  if (!std::isfinite(slowdown) || slowdown < 1.0) slowdown = 1.0;
  return 100.0 / slowdown;
}

void RegisterScorePlugins(PluginRegistry& registry) {
  registry["binpack"] = NoArgs<BinpackScorePlugin>();
  registry["planner"] = [](const PluginArgs& a,
                           const PluginDeps& d) -> Result<std::unique_ptr<Plugin>> {
    if (!a.empty()) {
      return InvalidArgumentError(fmt::format("unknown argument '{}'", a.begin()->first));
    }
    return std::unique_ptr<Plugin>(std::make_unique<PlannerScorePlugin>(d.estimator));
  };
}

}  // namespace baton::sched
