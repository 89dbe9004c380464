// FewestGpusPlugin ("fewest-gpus"): a queue order that tries the smallest gangs first (fewest
// GPUs, then higher priority, then submit order). Small jobs then start as soon as they fit
// while a large job waits; without backfill's reservation a large job can wait long behind a
// stream of small ones. The worked example of ARCHITECTURE.md's plugin recipe: this folder is all
// it takes (`queue_sort: fewest-gpus` in a scheduler config).
#pragma once

#include "sched/framework/plugin.h"

namespace baton::sched {

class FewestGpusPlugin final : public Plugin, public QueueSortPlugin {
 public:
  std::string_view Name() const override { return "fewest-gpus"; }
  // Reads only the pending jobs' specs.
  bool Stateless() const override { return true; }
  bool Less(const PluginContext& ctx, const JobInfo& a, const JobInfo& b) const override;
  bool OrderFixedWithinCycle() const override { return true; }
};

}  // namespace baton::sched
