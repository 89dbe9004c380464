// SchedulerConfig: which plugins run (with their weights and arguments) and the order of the
// actions, parsed from YAML:
//
//   actions: [admit, allocate, backfill, preempt]
//   queue_sort: priority            # fifo | priority | shortest-first | las | drf
//   plugins:
//     - name: health
//     - name: topology
//     - {name: binpack, weight: 2}
//     - name: quota
//       args: {tenants: {a: {guaranteed: 64, borrowable: 32}}}
//   max_candidates: 4               # placements scored per job
//   backfill_reservations: 1        # head jobs that get a reservation
//   max_preemptors_per_cycle: 8     # blocked jobs the preempt action tries per cycle
//   preempt_by: priority            # priority | las-band (who may evict whom; see below)
//
// Plugin args arrive flattened as "tenants.a.guaranteed" -> "64".
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace baton::sched {

using PluginArgs = std::map<std::string, std::string>;

struct PluginConfig {
  std::string name;
  double weight = 1.0;  // for score plugins
  PluginArgs args;
};

struct SchedulerConfig {
  std::vector<std::string> actions = {"admit", "allocate", "backfill", "preempt"};
  std::string queue_sort = "priority";
  std::vector<PluginConfig> plugins = {
      {"health", 1, {}},    {"gpu-type", 1, {}}, {"bad-nodes", 1, {}}, {"node-attributes", 1, {}},
      {"resources", 1, {}}, {"topology", 1, {}}, {"binpack", 1, {}},   {"lost-work", 1, {}}};
  int max_candidates = 4;
  int backfill_reservations = 1;
  int max_preemptors_per_cycle = 8;  // blocked jobs the preempt action tries per cycle
  // Who may evict whom in the preempt action:
  //   priority  a waiting job evicts running preemptible jobs of lower priority (victim plugins'
  //             VictimCost decides)
  //   las-band  Tiresias-style: a waiting job evicts running preemptible jobs of no higher
  //             priority whose LAS band (queue_sort: las, its thresholds; a running job's
  //             attained service counts its current run) is strictly worse than its own (victim
  //             plugins' EvictionCost prices them). Requires queue_sort: las.
  std::string preempt_by = "priority";
};

// Parses a YAML document; errors name the field ("plugins[2].weight: not a number"). Unknown
// plugin or action names are caught later, by the Scheduler, against the registry.
Result<SchedulerConfig> ParseSchedulerConfig(std::string_view yaml);

}  // namespace baton::sched
