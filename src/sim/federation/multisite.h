// The multi-site simulator (`baton sim --sites`, issue 17): N sites of a federation, each its own
// simulated cluster with its own sched::Scheduler (the decision core and scheduler configs of
// `baton sim` and `baton serve`), driven by one event clock, with a broker in front that routes
// every arriving job through federation::Route, the routing core the broker daemon runs.
//
// Routing. At a job's arrival (and at each re-route) the broker asks every site that is up its
// Scheduler::WhatIf on its simulated state at that instant (estimated start, queue position, GPU
// type; the planner's step time on the placement it would choose when the job has a plan), plus
// its free and total GPUs, and hands the answers to federation::Route under the run's policy.
// Region rules are the routing core's: a site outside a required region, or in an excluded one,
// is not eligible.
//
// Staging. The job's inputs not stored at the chosen site (each dataset from its nearest holder
// by TransferTime, its checkpoint from the site that wrote it) move over the WAN before the job
// is submitted to that site's scheduler; a job in staging is not in the site's queue. All inputs
// of a job move at once. Each direction of a WAN link is shared equally by the transfers on it at
// each instant (processor sharing: n transfers each get bandwidth / n), and a transfer ends its
// link's latency after its last byte left. Staged copies are not kept: a site's datasets are
// those of the sites file, for routing and staging alike.
//
// Run time. A job's trace duration is its run time at its home site on a compact placement. A job
// whose kind is `pretrain/MODEL` and for which the planner of its home site finds a plan has
// steps = duration / that plan's compact step time; at a site whose planner has a plan for it,
// it runs steps x that site's compact step time, slowed by the planner's PlacementSlowdown of the
// placement the scheduler chose. Every other job runs its duration at every site (GPU speed is
// not modelled for it), slowed by the single-site simulator's per-level penalty.
//
// Checkpoints and outages. A running job checkpoints every checkpoint_interval of its run time
// (after its restart cost); the checkpoint stays at the site that wrote it. A site outage (the
// sites file's `outages:`) takes the site's compute down: its running jobs lose the work since
// their last checkpoint (counted as lost GPU-hours), and they, its queued jobs and jobs staging
// towards it are taken back by the broker and routed again at once, their checkpoint staged from
// the down site (its storage stays readable: the outage is of compute). A job no site can take
// while some site is down waits at the broker until an outage ends; with every site up it is
// rejected. A restart from a checkpoint pays restart_cost before work resumes. Preemptions by a
// site's own scheduler resume at that site.
//
// Invariant (CHECKed): a job runs at one site at a time, and only at the site it was routed to.
//
// A run is a pure function of its inputs: no clock reads, no globals.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/units.h"
#include "federation/routing.h"
#include "federation/sites.h"
#include "planning/planner_estimator.h"
#include "sched/framework/config.h"
#include "sim/workload/trace.h"
#include "topology/cluster.h"

namespace baton::sim {

// A job as the broker sees it.
struct MultiSiteJob {
  TraceJob trace;  // id, submit, duration (run time at its home site), gpus, tenant, kind
  std::string home_site;
  std::vector<std::string> datasets;  // names from the sites file
  std::vector<std::string> require_regions;
  std::vector<std::string> exclude_regions;
  Bytes checkpoint_size{0};
  // Done within this long after submission (cheapest-by-deadline routing). Applies to the first
  // routing attempt only: a job held at the broker, or re-routed after an outage, is routed
  // without it (its deadline may have passed through no fault of its own).
  std::optional<Seconds> deadline;
};

// One site as simulated. `planner`, when set, must be over an identical copy of `cluster` and
// outlive the run; its plans are searched on first use and cached (shared by every run).
struct SimSite {
  explicit SimSite(topo::Cluster c) : cluster(std::move(c)) {}
  topo::Cluster cluster;
  sched::SchedulerConfig scheduler;
  std::string scheduler_name;
  planning::PlannerEstimator* planner = nullptr;
};

struct MultiSiteConfig {
  const federation::RoutingPolicy* routing = nullptr;  // required
  Seconds checkpoint_interval = Hours(1);              // 0: jobs never checkpoint
  Seconds restart_cost = Minutes(5);
  Seconds grace_period = Seconds(30);
  int max_retries = 10;
  // Bound on each what-if's projected cycles (Scheduler::WhatIf's max_cycles).
  int whatif_max_cycles = 200;
};

enum class SiteJobOutcome : std::uint8_t { kCompleted, kRejected, kUnfinished };
std::string_view SiteJobOutcomeName(SiteJobOutcome o);

struct SiteJobRecord {
  std::string id;
  std::string tenant;
  int gpus = 0;
  std::string home_site;
  std::string site;  // where it completed (or last was)
  double submit_s = 0;
  double first_start_s = -1;
  double end_s = -1;
  double staging_s = 0;  // wall time spent staging, over every routing
  double bytes_staged = 0;
  double run_s = 0;   // wall time holding GPUs, over every attempt (lost work included)
  double work_s = 0;  // run time on a compact placement at the site it completed at
  double lost_gpu_s = 0;
  double cost = 0;   // GPU-hours held x the site's price, over every attempt
  int routings = 0;  // 1 + re-routes after outages
  int preemptions = 0;
  int runs = 0;  // attempts started (binds)
  SiteJobOutcome outcome = SiteJobOutcome::kUnfinished;
  std::string reason;       // for kRejected / kUnfinished
  std::string explanation;  // the routing core's line for its last routing
  double jct_s() const { return end_s < 0 ? 0 : end_s - submit_s; }
  double wait_s() const { return first_start_s < 0 ? 0 : first_start_s - submit_s; }
};

struct MultiSiteSummary {
  std::string routing;
  std::int64_t jobs = 0, completed = 0, rejected = 0, unfinished = 0;
  double mean_jct_s = 0, median_jct_s = 0, p90_jct_s = 0;
  double mean_wait_s = 0;     // submit to first start, staging included (completed jobs)
  double mean_staging_s = 0;  // per completed job
  double bytes_staged = 0;
  double cost = 0;
  double lost_gpu_hours = 0;
  std::int64_t reroutes = 0;        // routings after the first, over every job
  std::int64_t away_from_home = 0;  // completed jobs that completed elsewhere than home
  std::int64_t whatifs = 0;         // site what-if calls made by the broker
  std::vector<std::int64_t> completed_per_site;  // in the sites file's order
  double makespan_s = 0;
};

struct MultiSiteResult {
  MultiSiteSummary summary;
  std::vector<SiteJobRecord> jobs;  // in arrival order
};

// Runs `jobs` (sorted by submit time) over `sites` (one SimSite per site of `federation`, in its
// order) until every job has ended. Errors: the config has no routing policy, the site counts
// differ, a scheduler config is invalid, a job names an unknown home site.
Result<MultiSiteResult> RunMultiSite(const federation::Sites& federation,
                                     std::vector<SimSite>& sites,
                                     const std::vector<MultiSiteJob>& jobs,
                                     const MultiSiteConfig& config);

// The multi-site workload from a single trace (e.g. the synthetic LLM workload): each job of
// tenant T gets T's home site and, by its kind, one dataset named "T.pretrain" (kind
// pretrain/...), "T.finetune" or "T.eval" when the sites file stores one by that name (debug
// jobs read none; '.', not '/', so that a job given to `baton federate` can name it too). T's
// home site is the first site storing a dataset whose name starts with "T.",
// else site (T's index among tenants in order of first appearance) mod N. Checkpoint size: for
// pretrain/MODEL, MODEL's parameters x 14 bytes (bf16 weights 2, fp32 master weights 4, Adam's
// two fp32 moments 8: mixed-precision Adam's state as in ZeRO, Rajbhandari et al. 2020, less the
// gradients, which are not saved); fine-tunes, 8e9 parameters x 14 bytes (an 8B model); eval and
// debug jobs save nothing. `tenant_regions` maps a tenant to regions its jobs require; with
// deadline_factor F > 0 each job must finish within F x its duration of its submission.
struct WorkloadOptions {
  std::vector<std::pair<std::string, std::string>> tenant_regions;  // (tenant, region)
  double deadline_factor = 0;
};
Result<std::vector<MultiSiteJob>> AssignSites(std::vector<TraceJob> trace,
                                              const federation::Sites& sites,
                                              const WorkloadOptions& options = {});

// Output: a Markdown table with one row per run, a CSV row per job and run, and JSON.
std::string MultiSiteTable(const std::vector<MultiSiteResult>& runs);
std::string MultiSiteCsv(const std::vector<MultiSiteResult>& runs);
std::string MultiSiteJson(const std::vector<MultiSiteResult>& runs, const federation::Sites& sites);

}  // namespace baton::sim
