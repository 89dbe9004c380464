// SchedulerConfig: which plugins run (with their weights and arguments) and the order of the
// actions, parsed from YAML. The daemon (`baton serve --scheduler-config`) and the simulator
// (`baton sim --scheduler-config`, or a named file of data/scheduler/ with --policies) read the
// same document through the same parser:
//
//   actions: [admit, allocate, backfill, preempt]
//   queue_sort: priority            # fifo | priority | shortest-first | las | drf
//   head_of_line_blocking: false    # true: a job blocked for room holds back every later one
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
//   min_run_time: 60                # seconds before a job may be preempted (tenancy.h)
//   tenancy: {...}                  # priority ranges, preemption rights, quotas (tenancy.h)
//
// Plugin args arrive flattened as "tenants.a.guaranteed" -> "64".
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "core/units.h"
#include "sched/framework/tenancy.h"

namespace baton::sched {

using PluginArgs = std::map<std::string, std::string>;

struct PluginConfig {
  std::string name;
  double weight = 1.0;  // for score plugins
  PluginArgs args;
  bool operator==(const PluginConfig&) const = default;
};

// Who may evict whom in the preempt action (see SchedulerConfig::preempt_by).
enum class PreemptBy : std::uint8_t { kPriority, kLasBand };
std::string_view PreemptByName(PreemptBy p);
Result<PreemptBy> ParsePreemptBy(std::string_view name);

struct SchedulerConfig {
  std::vector<std::string> actions = {"admit", "allocate", "backfill", "preempt"};
  // The order in which pending jobs are considered: the name of a queue-sort plugin of the
  // registry (built in: fifo, priority, shortest-first, las, drf; plugins/queue_sort). Checked
  // against the registry when the scheduler is built.
  std::string queue_sort = "priority";
  // Strict queue order: the allocate action stops at the first job that is blocked for lack of
  // room, so no later job passes it (head-of-line blocking; the `fifo` policy). Off, allocate
  // places every job that fits, in queue order (first-fit). With the backfill action, allocate
  // always stops at the blocked head and backfill decides who may pass it.
  bool head_of_line_blocking = false;
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
  PreemptBy preempt_by = PreemptBy::kPriority;
  // Priority ranges, who may evict whom, quotas and min_run_time (the `tenancy:` section and the
  // top-level `min_run_time:`; see tenancy.h and docs/tenancy.md).
  TenancyPolicy tenancy;

  bool operator==(const SchedulerConfig&) const = default;
};

// Parses a YAML document; errors name the source and the field ("sched.yaml: field
// 'plugins[2].weight': ..."). The text goes through LoadYamlBounded first (size, depth, alias
// expansion and duplicate keys bounded before any walk). Unknown plugin or action names are
// caught later, by the Scheduler, against the registry.
Result<SchedulerConfig> ParseSchedulerConfig(std::string_view yaml,
                                             std::string_view source = "scheduler config");

// The largest scheduler config file read (a config is a few hundred bytes; quota tables for
// thousands of tenants stay far below this).
inline constexpr Bytes kMaxSchedulerConfigSize = MiB(1);

// Reads `path` (at most kMaxSchedulerConfigSize, checked before reading) and parses it; errors
// name the path. The one loader both drivers use.
Result<SchedulerConfig> LoadSchedulerConfigFile(const std::string& path);

}  // namespace baton::sched
