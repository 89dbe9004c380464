// Named scheduling policies for `baton sim --policies`: each is a sched::SchedulerConfig preset
// built from the scheduling core's own actions and plugins (the simulator itself holds no policy).
//
//   fifo      queue in submit order; allocate places every job that fits, in order (a blocked
//             job does not hold back later ones: the core's allocate without backfill)
//   backfill  FIFO with EASY backfilling: the blocked head job gets a reservation, later jobs run
//             only if they end before it (by their estimated runtime) or avoid its nodes
//   las       least attained service (Tiresias' discretised LAS: bands at 1, 10 and 100
//             GPU-hours of service), allocate without backfill, and `preempt_by: las-band`: a
//             waiting job may evict (gracefully, whole gangs) running preemptible jobs whose
//             attained service has put them in a strictly worse band
//   topo      backfill plus topology-aware scoring: 8 candidate placements per job scored by
//             binpack (weight 2, keeps leaves whole for large gangs) and the planner (jobs with a
//             plan); the others take the placement plugin's first candidate
//
// Every preset keeps the core's filters (health, gpu-type, bad-nodes, node-attributes), the
// topology placement plugin (the core's only gang placement) and lost-work victim selection.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "sched/framework/config.h"

namespace baton::sim {

// The preset names, in the order above.
std::vector<std::string> PolicyNames();
// Errors: an unknown name (the message lists the known ones).
Result<sched::SchedulerConfig> PolicyPreset(std::string_view name);

}  // namespace baton::sim
