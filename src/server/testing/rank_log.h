// What really ran, from the ranks' own lines: the crash and failover tests run jobs whose ranks
// append "beat JOB ATTEMPT RANK PID TIME" while they run and "end JOB ATTEMPT RANK PID TIME" when
// they finish (RankLogCommand), and check the log, not the API, for ranks that ran twice at once
// and jobs that completed twice. For tests only.
#pragma once

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace baton::server::testing {

// argv of a rank that beats `beats` times every 50 ms into `log`, then writes its end line.
inline std::vector<std::string> RankLogCommand(const std::string& log, int beats) {
  return {"/bin/sh", "-c",
          "beat() { echo \"$1 $BATON_JOB_ID $BATON_ATTEMPT $RANK $$ $(date +%s.%N)\" >> " + log +
              "; }; i=0; while [ $i -lt " + std::to_string(beats) +
              " ]; do beat beat; i=$((i + 1)); sleep 0.05; done; beat end"};
}

struct RankLogReport {
  int rank_processes = 0;
  std::set<std::int64_t> jobs;               // jobs with at least one line
  std::vector<std::string> overlaps;         // a rank of a job started while another copy of it ran
  std::vector<std::string> completed_twice;  // two attempts each ended every rank
};

// Reads `log`; jobs have `ranks_per_job` ranks. A rank of an attempt cut short at launch may end
// alone (these ranks do not wait for each other as DDP ranks do), so "completed" means every rank
// of the attempt ended.
inline RankLogReport ReadRankLog(const std::string& log, int ranks_per_job) {
  struct Run {
    double first = 0, last = 0;
    int attempt = 0;
    bool ended = false;
  };
  std::map<std::pair<std::int64_t, int>, std::map<long, Run>> runs;  // (job, rank) -> pid -> run
  std::ifstream in(log);
  std::string kind;
  std::int64_t job = 0;
  int attempt = 0, rank = 0;
  long pid = 0;
  double t = 0;
  while (in >> kind >> job >> attempt >> rank >> pid >> t) {
    auto [it, fresh] = runs[{job, rank}].try_emplace(pid, Run{t, t, attempt, false});
    it->second.last = std::max(it->second.last, t);
    it->second.first = std::min(it->second.first, t);
    it->second.ended = it->second.ended || kind == "end";
  }
  RankLogReport report;
  std::map<std::int64_t, std::map<int, std::set<int>>> ended_ranks;  // job -> attempt -> ranks
  for (const auto& [key, by_pid] : runs) {
    report.jobs.insert(key.first);
    std::vector<Run> list;
    for (const auto& [p, r] : by_pid) {
      list.push_back(r);
      if (r.ended) ended_ranks[key.first][r.attempt].insert(key.second);
    }
    report.rank_processes += static_cast<int>(list.size());
    std::sort(list.begin(), list.end(),
              [](const Run& a, const Run& b) { return a.first < b.first; });
    for (std::size_t i = 1; i < list.size(); ++i) {
      if (list[i].first <= list[i - 1].last) {
        report.overlaps.push_back(
            "job " + std::to_string(key.first) + " rank " + std::to_string(key.second) +
            ": attempt " + std::to_string(list[i].attempt) + " started at " +
            std::to_string(list[i].first) + " while attempt " +
            std::to_string(list[i - 1].attempt) + " ran until " + std::to_string(list[i - 1].last));
      }
    }
  }
  for (const auto& [job_id, by_attempt] : ended_ranks) {
    int whole = 0;
    for (const auto& [a, ranks] : by_attempt)
      whole += static_cast<int>(ranks.size()) == ranks_per_job;
    if (whole > 1) {
      report.completed_twice.push_back("job " + std::to_string(job_id) + ": " +
                                       std::to_string(whole) +
                                       " attempts ran every rank to its end");
    }
  }
  return report;
}

}  // namespace baton::server::testing
