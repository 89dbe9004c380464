#include "cli/replay_cmd.h"

#include <fmt/format.h>

#include <fstream>

#include "sched/framework/presets.h"
#include "sim/replay/daemon_replay.h"

namespace baton::cli {
namespace {

Result<std::ifstream> Open(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFoundError(fmt::format("{}: cannot open", path));
  return in;
}

Status SameConfig(const std::string& path) {
  ASSIGN_OR_RETURN(std::ifstream in, Open(path));
  sched::history::Reader reader(in, path);
  // A run recorded without a config text ran the daemon's default: data/scheduler/daemon.yaml.
  ASSIGN_OR_RETURN(sched::SchedulerConfig daemon, sched::PolicyPreset("daemon"));
  ASSIGN_OR_RETURN(sim::ReplayReport r, sim::ReplayDaemon(reader, daemon));
  fmt::print("replayed {}: {} daemon run(s), {} cycles, {} events\n", path, r.runs, r.cycles,
             r.events);
  if (r.skipped_cycles > 0) {
    fmt::print("skipped {} cycles before the first daemon start left in the history\n",
               r.skipped_cycles);
  }
  fmt::print("placements identical: {}/{} ({:.2f} %)\n", r.identical, r.compared,
             r.identical_percent());
  if (r.other_differences > 0) {
    fmt::print("other decisions that differ (preemptions, rejections, requeues): {}\n",
               r.other_differences);
  }
  if (r.jobs_with_plan > 0) {
    fmt::print(
        "note: {} job(s) had a plan; the history does not carry the planner, so their "
        "placements were scored without it\n",
        r.jobs_with_plan);
  }
  if (r.first) {
    fmt::print("first divergence: {}:{} (run {}, cycle {}): {}\n", path, r.first->line,
               r.first->run, r.first->cycle, r.first->what);
    return FailedPreconditionError("the replay diverged from the daemon's decisions");
  }
  return Status::Ok();
}

}  // namespace

Status RunReplayDaemon(
    const std::string& path,
    const std::vector<std::pair<std::string, sched::SchedulerConfig>>& policies) {
  if (policies.empty()) return SameConfig(path);
  std::vector<sim::WhatIfReport> reports;
  for (const auto& [name, config] : policies) {
    ASSIGN_OR_RETURN(std::ifstream in, Open(path));
    sched::history::Reader reader(in, path);
    ASSIGN_OR_RETURN(sim::WhatIfReport r, sim::WhatIf(reader, config));
    reports.push_back(r);
  }
  // A: the record (the same in every report); then one column per policy.
  std::vector<std::pair<std::string, const sim::WhatIfMetrics*>> cols = {
      {"recorded", &reports.front().recorded}};
  for (std::size_t i = 0; i < policies.size(); ++i) {
    cols.push_back({policies[i].first, &reports[i].replayed});
  }
  fmt::print("what if {} had run another config (jobs run for their recorded run time)\n", path);
  auto row = [&](std::string_view label, auto value) {
    std::string line = fmt::format("{:<22}", label);
    for (const auto& [name, m] : cols) line += fmt::format("{:>14}", value(*m));
    fmt::print("{}\n", line);
  };
  row("", [&](const sim::WhatIfMetrics& m) {
    for (const auto& [name, p] : cols) {
      if (p == &m) return name;
    }
    return std::string();
  });
  row("jobs submitted", [](const sim::WhatIfMetrics& m) { return fmt::format("{}", m.submitted); });
  row("completed", [](const sim::WhatIfMetrics& m) { return fmt::format("{}", m.completed); });
  row("cancelled", [](const sim::WhatIfMetrics& m) { return fmt::format("{}", m.cancelled); });
  row("rejected", [](const sim::WhatIfMetrics& m) { return fmt::format("{}", m.rejected); });
  row("unfinished", [](const sim::WhatIfMetrics& m) { return fmt::format("{}", m.unfinished); });
  row("mean wait (s)",
      [](const sim::WhatIfMetrics& m) { return fmt::format("{:.1f}", m.mean_wait_s); });
  row("mean JCT (s)",
      [](const sim::WhatIfMetrics& m) { return fmt::format("{:.1f}", m.mean_jct_s); });
  row("p95 JCT (s)",
      [](const sim::WhatIfMetrics& m) { return fmt::format("{:.1f}", m.p95_jct_s); });
  row("makespan (s)",
      [](const sim::WhatIfMetrics& m) { return fmt::format("{:.1f}", m.makespan_s); });
  row("utilisation",
      [](const sim::WhatIfMetrics& m) { return fmt::format("{:.1f} %", 100 * m.utilisation); });
  row("preemptions", [](const sim::WhatIfMetrics& m) { return fmt::format("{}", m.preemptions); });
  return Status::Ok();
}

}  // namespace baton::cli
