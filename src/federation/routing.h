// Routing a job to a site: what each site answered to "this job, now" (its what-if), what the
// job needs (GPUs, datasets, a checkpoint, regions, a deadline), and a policy that picks one.
// Pure: the broker (`baton federate`) and the multi-site simulator (`baton sim --sites`) call
// the same Route with the answers they collected.
//
// The prediction for a site s, at time `now`:
//   staging(s)   = sum over the job's inputs (datasets, then its checkpoint) not stored at s of
//                  TransferTime(size, link(nearest holder, s)); inputs move one after another.
//   start(s)     = max(s's estimated start, now + staging(s)): staging overlaps the queue wait.
//   run(s)       = the job's steps x s's step time when s priced it (the planner on the
//                  placement s would choose); else the job's estimated run time as given.
//   completion   = start(s) + run(s).
// A site is eligible when it answered, did not refuse, and meets the region rules.
//
// Contract: Route returns kInvalidArgument naming the field for a job that names an unknown
// dataset or site, or whose inputs cannot reach any eligible site before its deadline; and
// kUnavailable (with every site's reason) when no site is eligible. It never changes its inputs.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/clock.h"
#include "core/status.h"
#include "core/units.h"
#include "federation/sites.h"

namespace baton::federation {

// One site's answer to the what-if for one job.
struct SiteAnswer {
  bool reachable = false;
  std::string refusal;                       // non-empty: the site would refuse the job (why)
  std::optional<TimePoint> estimated_start;  // unknown: the site cannot say (counted as now)
  int queue_position = 0;                    // 1-based; 0: would start at once
  std::string gpu_type;
  Seconds step_time{0};  // the planner's step time on the site's placement; 0: not priced
  int free_gpus = 0;
  int total_gpus = 0;
};

struct JobNeeds {
  std::string name;
  int gpus = 0;
  std::string home_site;              // empty: none (home-site routing then refuses)
  std::vector<std::string> datasets;  // names from the sites file
  std::string checkpoint_site;        // where its last checkpoint is; empty: none yet
  Bytes checkpoint_size{0};
  std::vector<std::string> require_regions;  // a site must carry every one
  std::vector<std::string> exclude_regions;  // and none of these
  std::int64_t steps = 0;                    // with step times: run = steps x step time
  Seconds estimated_runtime{0};              // otherwise
  std::optional<TimePoint> deadline;         // done by then (for the cheapest-by-deadline policy)
};

struct SitePrediction {
  int site = -1;
  bool eligible = false;
  std::string why_not;  // when not eligible
  Seconds staging{0};
  TimePoint start;
  Seconds run{0};
  TimePoint completion;
  double cost = 0;    // gpus x run hours x the site's price
  int free_gpus = 0;  // from the site's answer (least-loaded routing)
  int total_gpus = 0;
};

struct RouteDecision {
  int site = -1;
  std::vector<SitePrediction> predictions;  // one per site, in the sites file's order
  // One line for the job's events: the chosen site against the runner-up, e.g.
  // "hefei: start +2.00 h, staging 40.0 min, 1.30x faster → done 6.00 h earlier than shenzhen".
  std::string explanation;
};

using RoutingPolicyFn = int (*)(const JobNeeds& job, std::span<const SitePrediction> predictions,
                                const Sites& sites);

struct RoutingPolicy {
  std::string_view name;
  std::string_view description;
  RoutingPolicyFn pick;  // the index of an eligible prediction, or -1
};

// home-site, least-loaded, predicted-completion, cheapest-by-deadline.
std::span<const RoutingPolicy> RoutingPolicies();
Result<const RoutingPolicy*> FindRoutingPolicy(std::string_view name);

// `answers` has one entry per site, in the sites file's order.
Result<std::vector<SitePrediction>> Predict(const JobNeeds& job, const Sites& sites,
                                            std::span<const SiteAnswer> answers, TimePoint now);

Result<RouteDecision> Route(const JobNeeds& job, const Sites& sites,
                            std::span<const SiteAnswer> answers, TimePoint now,
                            const RoutingPolicy& policy);

}  // namespace baton::federation
