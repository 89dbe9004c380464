// Reports of simulator runs, one run per policy over the same trace and cluster: a text summary
// table, JSON (summaries, tenants, trace statistics, down-sampled time series), CSV (one row per
// job and policy) and a self-contained HTML page with inline SVG plots (allocated utilisation
// over time, JCT CDF and queueing-delay CDF per policy, queue length, fragmentation) that needs
// no network. Output is deterministic: numbers are printed with fixed precision, so the same runs
// give the same bytes (the golden test relies on it).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
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

// Which run wins on mean JCT and at what cost: the run with the lowest mean JCT among those that
// completed a job (the first in run order on a tie), its preemptions and lost GPU-hours, and the
// same figures of the next best run to set them against. Indexes are into the runs it was
// computed from.
struct Verdict {
  std::size_t winner = 0;
  std::optional<std::size_t> runner_up;  // nullopt: only one run completed a job
  double mean_jct_s = 0;
  // How much lower the winner's mean JCT is than the runner-up's, in percent (0: tied).
  double below_runner_up_pct = 0;
  std::int64_t preemptions = 0;
  double lost_gpu_hours = 0;
  // A run that completed more jobs than the winner, when one did (mean JCT then compares
  // different sets of jobs).
  std::optional<std::size_t> completed_more;
};
// nullopt when no run completed a job.
std::optional<Verdict> ComputeVerdict(const std::vector<SimResult>& runs);
// "Verdict: backfill has the lowest mean JCT (3.20 h, 18.0% below first-fit) at 41 preemptions
// and 120.0 lost GPU-hours (first-fit: 0 and 95.3)", without a trailing newline; `runs` are
// those `v` was computed from.
std::string VerdictLine(const Verdict& v, const std::vector<SimResult>& runs);

// The summary table, one row per run, then the verdict line when there is one.
std::string SummaryTable(const std::vector<SimResult>& runs);
std::string ReportJson(const ReportMeta& meta, const std::vector<SimResult>& runs);
std::string JobsCsv(const std::vector<SimResult>& runs);
std::string ReportHtml(const ReportMeta& meta, const std::vector<SimResult>& runs);
// `baton sim --elastic-variants`: `runs` in pairs per policy, the trace as given (elastic jobs
// resizing) then every elastic job rigid at its max_gpus (SimConfig::rigid_elastic): JCT,
// utilisation, resizes and lost work side by side, and the change from rigid to elastic.
std::string ElasticVariantsTable(const std::vector<SimResult>& runs);

}  // namespace baton::sim
