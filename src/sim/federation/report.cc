// MultiSiteTable, MultiSiteCsv, MultiSiteJson (multisite.h).
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "sim/federation/multisite.h"

namespace baton::sim {
namespace {

std::string Csv(std::string_view s) {
  if (s.find_first_of(",\"\n\r") == std::string_view::npos) return std::string(s);
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

}  // namespace

std::string MultiSiteTable(const std::vector<MultiSiteResult>& runs) {
  std::string out =
      "| routing | done | mean JCT (h) | median JCT (h) | p90 JCT (h) | mean wait (h) | "
      "mean staging (min) | moved (TiB) | cost | lost GPU-h | re-routes | away from home |\n"
      "|---|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (const MultiSiteResult& r : runs) {
    const MultiSiteSummary& s = r.summary;
    out += fmt::format(
        "| {} | {}/{} | {:.2f} | {:.2f} | {:.2f} | {:.2f} | {:.1f} | {:.2f} | {:.0f} | {:.1f} | "
        "{} | {} |\n",
        s.routing, s.completed, s.jobs, s.mean_jct_s / 3600, s.median_jct_s / 3600,
        s.p90_jct_s / 3600, s.mean_wait_s / 3600, s.mean_staging_s / 60,
        s.bytes_staged / (1024.0 * 1024 * 1024 * 1024), s.cost, s.lost_gpu_hours, s.reroutes,
        s.away_from_home);
  }
  return out;
}

std::string MultiSiteCsv(const std::vector<MultiSiteResult>& runs) {
  std::string out =
      "routing,job,tenant,gpus,home_site,site,submit_s,start_s,end_s,wait_s,jct_s,staging_s,"
      "bytes_staged,run_s,work_s,lost_gpu_s,cost,routings,preemptions,outcome,reason,"
      "explanation\n";
  for (const MultiSiteResult& r : runs) {
    for (const SiteJobRecord& j : r.jobs) {
      out += fmt::format(
          "{},{},{},{},{},{},{:.3f},{:.3f},{:.3f},{:.3f},{:.3f},{:.3f},{:.0f},{:.3f},{:.3f},{:.3f},"
          "{:.4f},{},{},{},{},{}\n",
          Csv(r.summary.routing), Csv(j.id), Csv(j.tenant), j.gpus, Csv(j.home_site), Csv(j.site),
          j.submit_s, j.first_start_s, j.end_s, j.wait_s(), j.jct_s(), j.staging_s, j.bytes_staged,
          j.run_s, j.work_s, j.lost_gpu_s, j.cost, j.routings, j.preemptions,
          SiteJobOutcomeName(j.outcome), Csv(j.reason), Csv(j.explanation));
    }
  }
  return out;
}

std::string MultiSiteJson(const std::vector<MultiSiteResult>& runs,
                          const federation::Sites& sites) {
  nlohmann::ordered_json doc;
  doc["sites"] = nlohmann::ordered_json::array();
  for (const auto& s : sites.sites()) doc["sites"].push_back(s.name);
  doc["runs"] = nlohmann::ordered_json::array();
  for (const MultiSiteResult& r : runs) {
    const MultiSiteSummary& s = r.summary;
    nlohmann::ordered_json run;
    run["routing"] = s.routing;
    run["jobs"] = s.jobs;
    run["completed"] = s.completed;
    run["rejected"] = s.rejected;
    run["unfinished"] = s.unfinished;
    run["mean_jct_s"] = s.mean_jct_s;
    run["median_jct_s"] = s.median_jct_s;
    run["p90_jct_s"] = s.p90_jct_s;
    run["mean_wait_s"] = s.mean_wait_s;
    run["mean_staging_s"] = s.mean_staging_s;
    run["bytes_staged"] = s.bytes_staged;
    run["cost"] = s.cost;
    run["lost_gpu_hours"] = s.lost_gpu_hours;
    run["reroutes"] = s.reroutes;
    run["away_from_home"] = s.away_from_home;
    run["whatifs"] = s.whatifs;
    run["completed_per_site"] = s.completed_per_site;
    run["makespan_s"] = s.makespan_s;
    doc["runs"].push_back(std::move(run));
  }
  return doc.dump(2) + "\n";
}

}  // namespace baton::sim
