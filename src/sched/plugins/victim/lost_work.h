// LostWorkPlugin ("lost-work"): victim selection. Only preemptible running jobs of lower
// priority are candidates; the cost of evicting one is the work it loses — GPU-seconds since its
// last checkpoint (or start) — plus a tiny term per GPU so that, at equal loss, smaller gangs go
// first and less is torn up.
#pragma once

#include "sched/framework/plugin.h"

namespace baton::sched {

class LostWorkPlugin final : public Plugin, public VictimSelectionPlugin {
 public:
  std::string_view Name() const override { return "lost-work"; }
  bool Stateless() const override { return true; }
  std::optional<double> VictimCost(const PluginContext& ctx, const JobInfo& preemptor,
                                   const JobInfo& victim) override;
  // Any preemptible running job, whatever its priority (preempt_by: las-band); same cost.
  std::optional<double> EvictionCost(const PluginContext& ctx, const JobInfo& preemptor,
                                     const JobInfo& victim) override;
};

}  // namespace baton::sched
