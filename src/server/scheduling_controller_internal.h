// What the files of SchedulingController share and no one else uses: its metrics, and the
// conversions between the store's and the scheduler's ids and views.
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "server/http/job_spec.h"
#include "server/scheduling_controller.h"

namespace baton::server {

// The spec's inputs to stage, as the executor takes them.
inline std::vector<StageRequest> StageRequests(const JobSpec& spec) {
  std::vector<StageRequest> out;
  for (const StageItem& item : spec.stage) {
    out.push_back({item.kind, item.name, item.from, item.size_gib});
  }
  return out;
}

inline constexpr std::string_view kAllocOpen = "[alloc ";

inline sched::JobId SchedId(JobId id) { return sched::JobId(static_cast<std::uint64_t>(id)); }
inline JobId StoreId(sched::JobId id) { return static_cast<JobId>(id.value()); }

inline topo::NodeHealth Worse(topo::NodeHealth a, topo::NodeHealth b) { return std::max(a, b); }

inline std::vector<int> MaskBits(std::uint64_t mask) {
  std::vector<int> out;
  for (int i = 0; i < 64; ++i) {
    if ((mask >> i) & 1) out.push_back(i);
  }
  return out;
}

inline std::string NodeList(const topo::Cluster& c, const sched::Placement& p) {
  std::string out;
  for (std::size_t i = 0; i < p.nodes.size(); ++i) {
    if (i == 4 && p.nodes.size() > 5) {
      out += fmt::format(" and {} more", p.nodes.size() - 4);
      break;
    }
    if (i > 0) out += ",";
    out += c.node(p.nodes[i].node).name;
  }
  return out;
}

struct SchedulingController::Metrics {
  explicit Metrics(Registry& r)
      : cycle(r.AddHistogram("baton_scheduler_cycle_duration_seconds",
                             "Wall time of one scheduling cycle (RunCycle).", {},
                             LatencyBuckets())),
        step(r.AddHistogram("baton_scheduler_step_duration_seconds",
                            "Time spent in one action or plugin during a cycle.", {"step"},
                            LatencyBuckets())),
        placements(
            r.AddCounter("baton_scheduler_placements_total", "Gangs placed (binds).", {"level"})),
        preemptions(
            r.AddCounter("baton_scheduler_preemptions_total", "Running jobs preempted.", {})),
        failures(r.AddCounter("baton_job_failures_total",
                              "Jobs that failed, by cause (rejected, launch, exit).", {"cause"})),
        requeues(r.AddCounter("baton_scheduler_requeues_total",
                              "Running jobs put back in the queue.", {"reason"})),
        resizes(r.AddCounter("baton_scheduler_resizes_total",
                             "Elastic jobs restarted at a new size, by direction (grow, shrink).",
                             {"direction"})),
        queue(r.AddGauge("baton_scheduler_queue_length",
                         "Jobs the scheduler holds, by phase (pending, running, terminating).",
                         {"phase"})),
        gpus(r.AddGauge("baton_gpus", "GPUs by state (allocated, free, unhealthy).", {"state"})),
        nodes(r.AddGauge("baton_nodes", "Nodes by health condition.", {"health"})) {}
  Family<Histogram>& cycle;
  Family<Histogram>& step;
  Family<Counter>& placements;
  Family<Counter>& preemptions;
  Family<Counter>& failures;
  Family<Counter>& requeues;
  Family<Counter>& resizes;
  Family<Gauge>& queue;
  Family<Gauge>& gpus;
  Family<Gauge>& nodes;
};

}  // namespace baton::server
