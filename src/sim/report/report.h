// Reports of simulator runs, one run per policy over the same trace and cluster: a text summary
// table, JSON (summaries, tenants, trace statistics, down-sampled time series), CSV (one row per
// job and policy) and a self-contained HTML page with inline SVG plots (allocated utilisation
// over time, JCT CDF and queueing-delay CDF per policy, queue length, fragmentation) that needs
// no network. Output is deterministic: numbers are printed with fixed precision, so the same runs
// give the same bytes (the golden test relies on it).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/engine/simulator.h"

namespace baton::sim {

struct ReportMeta {
  std::string trace;    // as given on the command line
  std::string cluster;  // the cluster's name and size, in words
  std::uint64_t seed = 0;
  bool failures = false;
};

std::string SummaryTable(const std::vector<SimResult>& runs);
std::string ReportJson(const ReportMeta& meta, const std::vector<SimResult>& runs);
std::string JobsCsv(const std::vector<SimResult>& runs);
std::string ReportHtml(const ReportMeta& meta, const std::vector<SimResult>& runs);
// `baton sim --elastic-variants`: `runs` in pairs per policy, the trace as given (elastic jobs
// resizing) then every elastic job rigid at its max_gpus (SimConfig::rigid_elastic): JCT,
// utilisation, resizes and lost work side by side, and the change from rigid to elastic.
std::string ElasticVariantsTable(const std::vector<SimResult>& runs);

}  // namespace baton::sim
