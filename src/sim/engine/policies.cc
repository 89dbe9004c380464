#include "sim/engine/policies.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace baton::sim {
namespace {

sched::SchedulerConfig Base(std::string queue_sort, bool backfill) {
  sched::SchedulerConfig c;
  c.queue_sort = std::move(queue_sort);
  c.actions = {"admit", "allocate"};
  if (backfill) c.actions.push_back("backfill");
  c.actions.push_back("preempt");
  c.plugins = {{"health", 1, {}},          {"gpu-type", 1, {}}, {"bad-nodes", 1, {}},
               {"node-attributes", 1, {}}, {"topology", 1, {}}, {"lost-work", 1, {}}};
  c.max_candidates = 1;
  c.backfill_reservations = 1;
  return c;
}

}  // namespace

std::vector<std::string> PolicyNames() { return {"fifo", "backfill", "las", "topo"}; }

Result<sched::SchedulerConfig> PolicyPreset(std::string_view name) {
  if (name == "fifo") return Base("fifo", false);
  if (name == "backfill") return Base("fifo", true);
  if (name == "las") {
    // Tiresias' discretised LAS with preemption: a waiting job evicts running jobs in a worse band
    // (the las plugin's default thresholds, 1, 10 and 100 GPU-hours).
    sched::SchedulerConfig c = Base("las", false);
    c.preempt_by = "las-band";
    return c;
  }
  if (name == "topo") {
    sched::SchedulerConfig c = Base("fifo", true);
    c.plugins.push_back({"binpack", 2, {}});
    c.plugins.push_back({"planner", 1, {}});
    c.max_candidates = 8;
    return c;
  }
  return InvalidArgumentError(
      fmt::format("unknown policy '{}' (known: {})", name, fmt::join(PolicyNames(), ", ")));
}

}  // namespace baton::sim
