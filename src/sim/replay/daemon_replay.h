// Replays the daemon's scheduling history (sched/history/history.h, written by `baton serve`,
// exported by `baton export`) through the simulator's side of the seam: the same
// sched::Scheduler, fed the recorded cycles.
//
// Same config (ReplayDaemon): every run of the history gets a fresh Scheduler over the run's
// recorded cluster and config, and each recorded cycle's events at its recorded `now`. The
// scheduler is pure, so it must decide what the daemon decided: each bind, node replacement and
// resize is compared with the recorded one (job and placement, GPU for GPU), and the first
// difference is reported with its line, cycle and both placements.
//
// Another config (WhatIf): "what if the daemon had run B". Submissions, cancellations and node
// events are replayed at their recorded times into one Scheduler under B (daemon restarts are
// seen through: a job adopted after a restart is the job submitted before it); the driver ends
// each job it places after the run time the daemon's record shows for it (its last placement to
// its finish; the job's estimated runtime for a job that never finished under the daemon), and
// the same metrics are computed from the record (A) and from B's run.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "core/status.h"
#include "sched/framework/config.h"
#include "sched/history/history.h"

namespace baton::sim {

struct ReplayDivergence {
  std::int64_t line = 0;  // of the history file
  std::int64_t run = 0;
  std::int64_t cycle = 0;
  std::string what;  // "job 12: recorded n01:0xff, replayed n02:0xff"
};

struct ReplayReport {
  std::int64_t runs = 0, cycles = 0, events = 0;
  std::int64_t skipped_cycles = 0;  // before the first run line (cut by retention)
  // Placements (binds, replacements, resizes) of the record and of the replay, matched by job:
  // `compared` counts each job placed in a cycle by either side, `identical` those both sides
  // placed on the same GPUs in rank order.
  std::int64_t compared = 0, identical = 0;
  // Preemptions, rejections and requeues that differ (each a set per cycle).
  std::int64_t other_differences = 0;
  // Jobs whose spec carried a plan: the daemon ranked their placements with its planner, which
  // the history does not carry, so they are replayed without the planner's score.
  std::int64_t jobs_with_plan = 0;
  std::optional<ReplayDivergence> first;
  double identical_percent() const {
    return compared == 0 ? 100.0 : 100.0 * static_cast<double>(identical) / compared;
  }
};

// Replays every run of `history` under its recorded config; a run recorded without a config text
// ran the daemon's default, `daemon_default`. Errors: the history's (malformed line, gap) or a
// recorded config the scheduler refuses.
Result<ReplayReport> ReplayDaemon(sched::history::Reader& history,
                                  const sched::SchedulerConfig& daemon_default);

// Metrics of one side of a what-if comparison, over the jobs that completed (finished, not
// cancelled or rejected) on that side.
struct WhatIfMetrics {
  std::int64_t submitted = 0, completed = 0, cancelled = 0, rejected = 0, unfinished = 0;
  std::int64_t preemptions = 0;
  double mean_wait_s = 0;  // first placement - submission
  double mean_jct_s = 0;   // end - submission
  double p95_jct_s = 0;
  double makespan_s = 0;   // first submission to the last end
  double utilisation = 0;  // GPU-seconds held / (cluster GPUs x makespan)
};

struct WhatIfReport {
  WhatIfMetrics recorded;  // A: as the daemon ran
  WhatIfMetrics replayed;  // B: under the other config
  std::int64_t cycles = 0;
};

// Runs the what-if replay of `history` under `config`. The history is read once; the jobs and
// events are held in memory (a history of 10,000 jobs is a few MB).
Result<WhatIfReport> WhatIf(sched::history::Reader& history, const sched::SchedulerConfig& config);

}  // namespace baton::sim
