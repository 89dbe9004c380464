// The packing protocol's curves as a CSV and as a self-contained HTML page (inline SVG from
// sim/report/chart.h): GPU allocation and expected fragmentation against arrived demand, one line
// per policy, each the mean over seeds.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "sim/packing/packing.h"

namespace baton::sim {

struct PackingCurve {
  std::string policy;
  int seeds = 0;                     // runs averaged
  std::vector<PackingPoint> points;  // the mean over the runs at each step (pods: summed)
  double replay_seconds = 0;         // median CPU seconds of one replay
};

// The mean of `runs` at arrived demand step, 2 x step, ... up to `tune` (interpolated in each
// run, so runs of different pod counts align).
PackingCurve MeanCurve(std::string policy, std::span<const PackingResult> runs, double step,
                       double tune);

// policy,seeds,arrived_pct,allocated_pct,fragmentation_pct: one row per policy and step.
std::string PackingCsv(std::span<const PackingCurve> curves);

struct PackingReportMeta {
  std::string nodes;  // the node list, as given
  std::string pods;   // the pod list, as given
  std::string seeds;  // e.g. "42-51"
};

// The HTML page: the table at 100 % arrived demand, the allocation and fragmentation charts.
std::string PackingHtml(const PackingReportMeta& meta, std::span<const PackingCurve> curves);

}  // namespace baton::sim
