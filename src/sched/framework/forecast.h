// QueueForecast: for every pending job, its place in the queue, when it is expected to start and
// what kind of thing it waits for. Computed by Scheduler::Forecast from the scheduler's own
// actions (allocate, backfill's reservations, preempt, ...) run on a copy of its state, never by
// a separate model; see scheduler.h for the contract.
#pragma once

#include <optional>
#include <string_view>
#include <vector>

#include "core/clock.h"
#include "sched/framework/job.h"
#include "sched/framework/plugin_status.h"
#include "sched/framework/types.h"

namespace baton::sched {

// Why a pending job is not running now, as one closed set of kinds (drivers and the API show
// them; the scheduler's free-text note says the rest).
enum class WaitingKind : std::uint8_t {
  kStarting,       // it fits now: the next cycle places it (submitted or freed since the last)
  kQuota,          // its tenant's quota (tenant-quota or quota plugin) holds it back
  kFragmentation,  // enough free GPUs in total, but not in the shape its tasks need
  kTopology,       // room exists, but not within one subtree of its required topology level
  kConstraint,     // free GPUs exist, but not of its GPU type / on nodes its requirements allow
  kHealth,         // only GPUs on unhealthy nodes (or nodes that failed under it) would make room
  kReservation,    // room exists now, but backfill holds it for a job ahead (its reservation)
  kPriority,       // too few free GPUs, and a higher-priority job ahead waits for them first
  kCapacity,       // too few free GPUs; nothing ahead outranks it: it waits for running jobs
  kPreempting,     // victims are being evicted for it (grace period), or GPUs reclaimed for it
  kBackoff,        // restarting after a failure: not eligible before its restart cost elapsed
};
// "starting", "quota", "fragmentation", "topology", "constraint", "health", "reservation",
// "priority", "capacity", "preempting", "backoff".
std::string_view WaitingKindName(WaitingKind k);

// Why a forecast has no start time for a job.
enum class UnknownStart : std::uint8_t {
  kKnown,           // estimated_start is set
  kNoEstimatedEnd,  // the projection ran out of ends: a job holding the GPUs it needs (running,
                    // or started in the projection) has no estimated runtime
  kBeyondHorizon,   // ForecastOptions::max_cycles ran out first
};
std::string_view UnknownStartName(UnknownStart u);

struct JobForecast {
  JobId job;
  // 1-based place in the scheduler's pending-queue order at `now` (the order allocate and
  // backfill walk). Jobs not yet eligible (kBackoff) follow the eligible ones, by eligible time.
  int position = 0;
  std::optional<TimePoint> estimated_start;  // nullopt: unknown (see unknown)
  UnknownStart unknown = UnknownStart::kKnown;
  WaitingKind kind = WaitingKind::kCapacity;
  // The scheduler's own note for the job at `now` (plugin and reason); empty when no action
  // tried it this cycle (e.g. behind a blocked head job under head_of_line_blocking).
  PluginStatus status;
};

struct QueueForecast {
  TimePoint now;
  std::vector<JobForecast> jobs;  // every pending job, by position
  int cycles = 0;                 // projected scheduling cycles run (1 = only `now`)
};

// Scheduler::WhatIf's answer for a job not submitted.
struct WhatIfAnswer {
  JobForecast forecast;  // its position, estimated start and waiting kind, had it been submitted
  // Where the scheduler would start it (the projected cycle that binds it); empty when the start
  // is unknown.
  Placement placement;
  const topo::GpuSpec* gpu = nullptr;  // the GPU type of that placement; null when empty
};

struct ForecastOptions {
  // Stop the projection once these jobs have a start (empty: every pending job). Jobs not listed
  // still get a position and a kind, and a start when the projection reached it.
  std::vector<JobId> jobs;
  // Bound on projected cycles (one per distinct estimated end), the forecast's cost bound.
  int max_cycles = 2000;
};

}  // namespace baton::sched
