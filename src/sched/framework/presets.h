// Named scheduler configs: the files data/scheduler/NAME.yaml, compiled into the binary and parsed
// by ParseSchedulerConfig, the parser `--scheduler-config` uses. `baton sim --policies NAME` runs
// them, and the daemon's default is `daemon` (server::DefaultDaemonSchedulerConfig reads it
// here), so no policy lives in a driver's code.
//
//   fifo       strict FIFO: submit order, and a job that does not fit holds back every later one
//              (head-of-line blocking)
//   first-fit  submit order, but any job that fits starts, passing a blocked one (the core's
//              allocate without backfill; what `fifo` meant before)
//   backfill   FIFO with EASY backfilling: the blocked head job gets a reservation, later jobs run
//              only if they end before it (by their estimated runtime) or avoid its nodes
//   las        least attained service (Tiresias' discretised LAS: bands at 1, 10 and 100
//              GPU-hours of service), first-fit, and `preempt_by: las-band`: a waiting job may
//              evict (gracefully, whole gangs) running preemptible jobs in a strictly worse band
//   topo       backfill plus topology-aware scoring: 8 candidate placements per job scored by
//              binpack (weight 2) and the planner (jobs with a plan)
//   daemon     the daemon's default (priority order, backfill, binpack and planner scores)
//
// Every preset keeps the core's filters (health, gpu-type, bad-nodes, node-attributes), the
// topology placement plugin (the core's only gang placement) and lost-work victim selection.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "sched/framework/config.h"

namespace baton::sched {

// The preset names: those above first, in that order, then any other file of data/scheduler/.
std::vector<std::string> PolicyNames();
// The YAML text of a preset, as data/scheduler/NAME.yaml held it at build time. Errors: an
// unknown name (the message lists the known ones).
Result<std::string_view> PolicyYaml(std::string_view name);
// PolicyYaml parsed by ParseSchedulerConfig (errors name data/scheduler/NAME.yaml).
Result<SchedulerConfig> PolicyPreset(std::string_view name);

}  // namespace baton::sched
