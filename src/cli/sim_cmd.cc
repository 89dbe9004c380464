// baton sim: replays a job trace on a modelled cluster under one or more scheduling policies
// (scheduler config files: the named ones of data/scheduler/, src/sched/framework/presets.h, or any
// file the daemon could run, --scheduler-config) and writes the comparison as a summary table,
// JSON, CSV and a self-contained HTML report. With --sites, a federation of such clusters
// (sim/federation/multisite.h) compared under routing policies instead.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "cli/commands.h"
#include "cli/replay_cmd.h"
#include "core/strings.h"
#include "federation/routing.h"
#include "federation/sites.h"
#include "planning/planner_estimator.h"
#include "sched/framework/presets.h"
#include "sim/engine/planner_hooks.h"
#include "sim/engine/simulator.h"
#include "sim/federation/multisite.h"
#include "sim/report/report.h"
#include "sim/workload/failures.h"
#include "sim/workload/synthetic.h"
#include "sim/workload/trace.h"
#include "topology/builders/fabrics.h"
#include "topology/io/cluster_file.h"

namespace baton::cli {
namespace {

struct SimOptions {
  std::string trace;
  double synthetic_gap_s = 60;
  std::string format;
  std::string philly_throughputs;
  bool strict = false;
  std::string policies = "fifo,first-fit,backfill,las,topo";
  bool policies_given = false;
  std::vector<std::string> scheduler_configs;  // files, run after the named policies
  int cluster_gpus = 0;
  int gpus_per_node = 8;
  std::string gpu = "H100-SXM";
  std::string preset;
  std::string topology;
  std::uint64_t seed = 1;
  bool failures = false;
  double failure_rate_scale = 1.0;
  std::string failure_trace;
  double checkpoint_interval_s = 3600;
  double restart_cost_s = 300;
  int max_retries = 10;
  std::string estimate = "requested";
  double sample_interval_s = 3600;
  std::string json, csv, html;
  bool quiet = false;
  std::string replay_daemon;  // a daemon history (baton export) instead of a trace
  // Multi-site (--sites).
  std::string sites;
  std::string routing = "all";
  std::vector<std::string> tenant_regions;  // TENANT:REGION
  int whatif_max_cycles = 200;
  std::string site_scheduler = "daemon";
  int synthetic_tenants = 8;
  bool elastic_variants = false;
  double deadline_factor = 0;
  int threads = 0;  // policies run at once; 0: one per policy, up to the machine's cores
};

// A fat-tree of ceil(gpus / gpus_per_node) nodes: 16 nodes per leaf, 8 leaves per spine, core on
// top (128-node pods).
Result<topo::Cluster> BuildSized(const SimOptions& o) {
  topo::FatTreeParams p;
  p.name = fmt::format("sim-{}gpu", o.cluster_gpus);
  p.layout.nodes = (o.cluster_gpus + o.gpus_per_node - 1) / o.gpus_per_node;
  p.layout.gpus_per_node = o.gpus_per_node;
  p.layout.gpu = o.gpu;
  p.tiers = 3;
  p.nodes_per_leaf = 16;
  p.leaves_per_spine = 8;
  return topo::BuildFatTree(p);
}

Result<topo::Cluster> MakeCluster(const SimOptions& o) {
  const int given = (o.cluster_gpus > 0) + !o.preset.empty() + !o.topology.empty();
  if (given > 1) {
    return InvalidArgumentError("give at most one of --cluster-gpus, --preset, --topology");
  }
  if (!o.topology.empty()) return topo::LoadClusterFile(o.topology);
  if (o.cluster_gpus > 0) return BuildSized(o);
  return topo::BuildPreset(o.preset.empty() ? "superpod-h100" : o.preset);
}

Result<sim::EstimateSource> ParseEstimate(std::string_view s) {
  if (s == "requested") return sim::EstimateSource::kRequestedElseActual;
  if (s == "actual") return sim::EstimateSource::kActual;
  if (s == "none") return sim::EstimateSource::kNone;
  return InvalidArgumentError(
      fmt::format("--estimate '{}': expected requested, actual or none", s));
}

Status WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  if (!out) return InternalError(fmt::format("{}: cannot write", path));
  return Status::Ok();
}

// The largest trace --sites holds in memory (the broker's view of every job is kept for the
// report): 10x the synthetic runs the README quotes, far above what the per-arrival what-ifs
// make practical.
constexpr std::size_t kMaxSitesJobs = 1'000'000;

Result<std::vector<sim::TraceJob>> ReadAllJobs(const SimOptions& o, int max_gpus) {
  std::unique_ptr<sim::TraceReader> reader;
  if (o.trace.rfind("synthetic:", 0) == 0) {
    sim::SyntheticParams sp;
    auto jobs = ParseInt64(std::string_view(o.trace).substr(10));
    if (!jobs || *jobs <= 0 || static_cast<std::uint64_t>(*jobs) > kMaxSitesJobs) {
      return InvalidArgumentError(fmt::format(
          "--trace '{}': expected synthetic:JOBS with JOBS in 1..{}", o.trace, kMaxSitesJobs));
    }
    sp.jobs = *jobs;
    sp.mean_interarrival = Seconds(o.synthetic_gap_s);
    sp.max_pretrain_gpus = std::min(sp.max_pretrain_gpus, max_gpus);
    if (o.synthetic_tenants < 1) return InvalidArgumentError("--synthetic-tenants: at least 1");
    sp.tenants = o.synthetic_tenants;
    reader = sim::MakeSyntheticTrace(sp, o.seed);
  } else {
    sim::TraceOptions topts;
    topts.strict = o.strict;
    ASSIGN_OR_RETURN(reader, sim::OpenTrace(o.trace, o.format, topts));
  }
  std::vector<sim::TraceJob> out;
  while (true) {
    ASSIGN_OR_RETURN(std::optional<sim::TraceJob> j, reader->Next());
    if (!j) break;
    if (out.size() == kMaxSitesJobs) {
      return InvalidArgumentError(
          fmt::format("{}: more than {} jobs (--sites keeps every job)", o.trace, kMaxSitesJobs));
    }
    out.push_back(std::move(*j));
  }
  for (const auto& w : reader->stats().warnings) fmt::print(stderr, "warning: {}\n", w);
  if (out.empty()) return InvalidArgumentError(fmt::format("{}: no job to simulate", o.trace));
  std::stable_sort(out.begin(), out.end(), [](const sim::TraceJob& a, const sim::TraceJob& b) {
    return a.submit < b.submit;
  });
  return out;
}

// baton sim --sites: every site's cluster and scheduler from the sites file, one run per routing
// policy on the same jobs.
Status RunSites(const SimOptions& o) {
  if (!o.replay_daemon.empty()) return InvalidArgumentError("give --sites or --replay-daemon");
  if (o.trace.empty()) return InvalidArgumentError("--trace is required (e.g. synthetic:2000)");
  if (!o.html.empty()) return InvalidArgumentError("--html: not available with --sites");
  ASSIGN_OR_RETURN(const federation::Sites sites, federation::LoadSitesFile(o.sites));
  const std::filesystem::path dir = std::filesystem::path(o.sites).parent_path();
  std::vector<const federation::RoutingPolicy*> routings;
  if (o.routing == "all") {
    for (const auto& p : federation::RoutingPolicies()) routings.push_back(&p);
  } else {
    for (std::string_view name : Split(o.routing, ',')) {
      ASSIGN_OR_RETURN(const federation::RoutingPolicy* p,
                       federation::FindRoutingPolicy(Trim(name)));
      routings.push_back(p);
    }
  }
  // Each site's cluster (the sites file's, else the one --cluster-gpus/--preset/--topology
  // describe) and scheduler config; errors name the sites file's line and field.
  struct Base {
    std::optional<topo::Cluster> cluster;
    sched::SchedulerConfig scheduler;
    std::string scheduler_name;
    std::unique_ptr<planning::PlannerEstimator> planner;
  };
  std::vector<Base> bases(sites.sites().size());
  const bool fallback = o.cluster_gpus > 0 || !o.preset.empty() || !o.topology.empty();
  int max_gpus = 0;
  for (std::size_t s = 0; s < bases.size(); ++s) {
    const federation::Site& site = sites.sites()[s];
    Base& b = bases[s];
    if (!site.cluster.empty()) {
      std::filesystem::path path = site.cluster;
      if (path.is_relative()) path = dir / path;
      auto c = topo::LoadClusterFile(path.string());
      if (!c.ok()) {
        return InvalidArgumentError(fmt::format("{}:{}: field 'sites.{}.cluster': {}", o.sites,
                                                site.cluster_line, site.name,
                                                c.status().message()));
      }
      b.cluster.emplace(std::move(c).value());
    } else if (fallback) {
      ASSIGN_OR_RETURN(topo::Cluster c, MakeCluster(o));
      b.cluster.emplace(std::move(c));
    } else {
      return InvalidArgumentError(fmt::format(
          "{}: field 'sites.{}.cluster': missing (baton sim --sites needs each site's cluster "
          "file, or --cluster-gpus, --preset or --topology for the sites without one)",
          o.sites, site.name));
    }
    b.scheduler_name = site.scheduler.empty() ? o.site_scheduler : site.scheduler;
    auto config = sched::PolicyPreset(b.scheduler_name);
    if (!config.ok()) {
      if (site.scheduler.empty()) return config.status();
      return InvalidArgumentError(fmt::format("{}:{}: field 'sites.{}.scheduler': {}", o.sites,
                                              site.scheduler_line, site.name,
                                              config.status().message()));
    }
    b.scheduler = std::move(config).value();
    b.planner = std::make_unique<planning::PlannerEstimator>(b.cluster->Clone());
    max_gpus = std::max(max_gpus, b.cluster->counts().total);
  }
  sim::WorkloadOptions wopts;
  wopts.deadline_factor = o.deadline_factor;
  for (const std::string& tr : o.tenant_regions) {
    auto colon = tr.find(':');
    if (colon == std::string::npos || colon == 0 || colon + 1 == tr.size()) {
      return InvalidArgumentError(fmt::format("--tenant-region '{}': expected TENANT:REGION", tr));
    }
    wopts.tenant_regions.push_back({tr.substr(0, colon), tr.substr(colon + 1)});
  }
  ASSIGN_OR_RETURN(std::vector<sim::TraceJob> trace, ReadAllJobs(o, max_gpus));
  ASSIGN_OR_RETURN(std::vector<sim::MultiSiteJob> jobs,
                   sim::AssignSites(std::move(trace), sites, wopts));
  for (std::size_t s = 0; s < bases.size(); ++s) {
    const federation::Site& site = sites.sites()[s];
    fmt::print(
        "site {}: {} ({} nodes, {} GPUs), scheduler {}, {:.2f}/GPU-h, {} datasets{}\n", site.name,
        bases[s].cluster->name(), bases[s].cluster->nodes().size(),
        bases[s].cluster->counts().total, bases[s].scheduler_name, site.price_per_gpu_hour,
        site.datasets.size(),
        site.outages.empty() ? std::string() : fmt::format(", {} outage(s)", site.outages.size()));
  }
  fmt::print("jobs: {} from {} (seed {}), checkpoint every {:.0f} s\n", jobs.size(), o.trace,
             o.seed, o.checkpoint_interval_s);
  sim::MultiSiteConfig config;
  config.checkpoint_interval = Seconds(o.checkpoint_interval_s);
  config.restart_cost = Seconds(o.restart_cost_s);
  config.max_retries = o.max_retries;
  config.whatif_max_cycles = std::max(1, o.whatif_max_cycles);
  std::vector<sim::MultiSiteResult> runs;
  for (const federation::RoutingPolicy* routing : routings) {
    std::vector<sim::SimSite> sim_sites;
    for (Base& b : bases) {
      sim::SimSite site(b.cluster->Clone());
      site.scheduler = b.scheduler;
      site.scheduler_name = b.scheduler_name;
      site.planner = b.planner.get();
      sim_sites.push_back(std::move(site));
    }
    config.routing = routing;
    ASSIGN_OR_RETURN(sim::MultiSiteResult r, sim::RunMultiSite(sites, sim_sites, jobs, config));
    runs.push_back(std::move(r));
  }
  fmt::print("{}", sim::MultiSiteTable(runs));
  if (!o.json.empty()) RETURN_IF_ERROR(WriteFile(o.json, sim::MultiSiteJson(runs, sites)));
  if (!o.csv.empty()) RETURN_IF_ERROR(WriteFile(o.csv, sim::MultiSiteCsv(runs)));
  return Status::Ok();
}

Status Run(const SimOptions& o) {
  if (!o.sites.empty()) return RunSites(o);
  if (!o.format.empty()) RETURN_IF_ERROR(sim::FindTraceFormat(o.format).status());
  ASSIGN_OR_RETURN(sim::EstimateSource estimate, ParseEstimate(o.estimate));
  if (!(o.failure_rate_scale >= 0)) {
    return InvalidArgumentError("--failure-rate-scale: expected a number >= 0");
  }
  std::vector<std::pair<std::string, sched::SchedulerConfig>> policies;
  if (o.policies_given || o.scheduler_configs.empty()) {
    for (std::string_view name : Split(o.policies, ',')) {
      name = Trim(name);
      if (name.empty()) continue;
      ASSIGN_OR_RETURN(sched::SchedulerConfig c, sched::PolicyPreset(name));
      policies.push_back({std::string(name), std::move(c)});
    }
  }
  // The daemon's loader and parser: the run is labelled by the file's name without extension.
  for (const std::string& path : o.scheduler_configs) {
    ASSIGN_OR_RETURN(sched::SchedulerConfig c, sched::LoadSchedulerConfigFile(path));
    policies.push_back({std::filesystem::path(path).stem().string(), std::move(c)});
  }
  if (policies.empty()) return InvalidArgumentError("--policies: give at least one policy");
  if (!o.replay_daemon.empty()) {
    if (!o.trace.empty()) return InvalidArgumentError("give --trace or --replay-daemon, not both");
    // Without a policy named: the recorded config, placement for placement.
    if (!o.policies_given && o.scheduler_configs.empty()) policies.clear();
    return RunReplayDaemon(o.replay_daemon, policies);
  }
  if (o.trace.empty()) return InvalidArgumentError("--trace is required");
  const bool progress = !o.quiet && isatty(STDERR_FILENO);
  // Pre-training jobs ("pretrain/MODEL", as the synthetic workload writes them) run the planner's
  // best plan for their size; its searches are shared by every policy's run. Every run and the
  // planner get their own copy of the cluster, built once.
  ASSIGN_OR_RETURN(const topo::Cluster base, MakeCluster(o));
  std::shared_ptr<const sim::PhillyThroughputs> philly_throughputs;
  if (!o.philly_throughputs.empty()) {
    ASSIGN_OR_RETURN(sim::PhillyThroughputs t, sim::PhillyThroughputs::Load(o.philly_throughputs));
    philly_throughputs = std::make_shared<const sim::PhillyThroughputs>(std::move(t));
  }
  planning::PlannerEstimator planner(base.Clone());
  const std::string cluster_words =
      fmt::format("{}: {} nodes, {} GPUs", base.name(), base.nodes().size(), base.counts().total);
  // With --elastic-variants every policy runs twice: the trace as given, then with every elastic
  // job rigid at its max_gpus ("POLICY/rigid").
  struct Variant {
    std::string name;
    const sched::SchedulerConfig* config;
    bool rigid;
  };
  std::vector<Variant> variants;
  for (const auto& [name, sched_config] : policies) {
    variants.push_back({name, &sched_config, false});
    if (o.elastic_variants) variants.push_back({name + "/rigid", &sched_config, true});
  }
  if (o.trace.rfind("synthetic:", 0) == 0) {
    auto jobs = ParseInt64(std::string_view(o.trace).substr(10));
    if (!jobs || *jobs <= 0) {
      return InvalidArgumentError(
          fmt::format("--trace '{}': expected synthetic:JOBS with JOBS > 0", o.trace));
    }
  }
  // Progress of every run under way, on one line.
  std::mutex progress_mu;
  std::vector<std::optional<sim::SimProgress>> progress_of(variants.size());
  auto show_progress = [&](std::size_t i, const sim::SimProgress& p) {
    std::lock_guard<std::mutex> lock(progress_mu);
    progress_of[i] = p;
    std::string line;
    for (std::size_t k = 0; k < variants.size(); ++k) {
      if (!progress_of[k]) continue;
      line += fmt::format("{}[{}] day {:.2f}, {} ended", line.empty() ? "" : "  ", variants[k].name,
                          progress_of[k]->now.value() / 86400, progress_of[k]->ended);
    }
    fmt::print(stderr, "\r{}", line);
  };
  // One run: its own copy of the cluster and its own trace reader; the planner (thread-safe) and
  // its searches are shared.
  auto run_one = [&](std::size_t i, sim::PlanStats* run_plans) -> Result<sim::SimResult> {
    const auto& [name, sched_config_ptr, rigid] = variants[i];
    topo::Cluster cluster = base.Clone();
    std::unique_ptr<sim::TraceReader> reader;
    if (o.trace.rfind("synthetic:", 0) == 0) {
      sim::SyntheticParams sp;
      sp.jobs = *ParseInt64(std::string_view(o.trace).substr(10));
      sp.mean_interarrival = Seconds(o.synthetic_gap_s);
      sp.max_pretrain_gpus = std::min(sp.max_pretrain_gpus, cluster.counts().total);
      sp.tenants = std::max(1, o.synthetic_tenants);
      reader = sim::MakeSyntheticTrace(sp, o.seed);
    } else {
      sim::TraceOptions topts;
      topts.strict = o.strict;
      topts.philly_throughputs = philly_throughputs;
      ASSIGN_OR_RETURN(reader, sim::OpenTrace(o.trace, o.format, topts));
    }
    sim::SimConfig config;
    config.policy = name;
    config.scheduler = *sched_config_ptr;
    config.checkpoint_interval = Seconds(o.checkpoint_interval_s);
    config.restart_cost = Seconds(o.restart_cost_s);
    config.max_retries = o.max_retries;
    config.estimate = estimate;
    config.failures = o.failures;
    config.failure_model.interruptions_per_gpu_day *= o.failure_rate_scale;
    config.seed = o.seed;
    config.sample_interval = Seconds(o.sample_interval_s);
    config.rigid_elastic = rigid;
    sim::UsePlanner(planner, config, run_plans);
    if (progress) {
      config.progress = [&show_progress, i](const sim::SimProgress& p) { show_progress(i, p); };
    }
    // A failure trace names nodes: it reads them from an identical copy of the cluster (the
    // simulator owns the one it runs), kept alive for the run.
    std::optional<topo::Cluster> names;
    std::ifstream failure_in;
    std::unique_ptr<sim::FailureTraceReader> failure_reader;
    sim::FailureSource failures;
    if (!o.failure_trace.empty()) {
      names.emplace(base.Clone());
      failure_in.open(o.failure_trace);
      if (!failure_in) return NotFoundError(fmt::format("{}: cannot open", o.failure_trace));
      failure_reader =
          std::make_unique<sim::FailureTraceReader>(failure_in, o.failure_trace, *names);
      failures = [&failure_reader] { return failure_reader->Next(); };
    }
    return sim::RunSimulation(std::move(cluster), config, *reader, std::move(failures));
  };
  // The runs are independent (each owns its scheduler, cluster and trace reader): they go to
  // separate threads, at most --threads at once, and are reported in the order given.
  std::vector<std::optional<Result<sim::SimResult>>> results(variants.size());
  std::vector<sim::PlanStats> run_plan_stats(variants.size());
  const int cores = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  const std::size_t threads = std::min<std::size_t>(
      variants.size(), static_cast<std::size_t>(o.threads > 0 ? o.threads : cores));
  std::atomic<std::size_t> next{0};
  auto worker = [&] {
    for (std::size_t i = next++; i < variants.size(); i = next++) {
      results[i].emplace(run_one(i, &run_plan_stats[i]));
    }
  };
  if (threads <= 1) {
    worker();
  } else {
    std::vector<std::thread> pool;
    for (std::size_t t = 0; t < threads; ++t) pool.emplace_back(worker);
    for (auto& t : pool) t.join();
  }
  if (progress) fmt::print(stderr, "\n");
  std::vector<sim::SimResult> runs;
  for (auto& r : results) {
    if (!r->ok()) return r->status();
    sim::SimResult& run = r->value();
    for (const auto& w : run.trace.warnings) fmt::print(stderr, "warning: {}\n", w);
    if (run.trace.malformed > 0) {
      fmt::print(stderr, "{}: {} malformed lines skipped\n", o.trace, run.trace.malformed);
    }
    if (run.trace.estimated_durations > 0 && runs.empty()) {
      fmt::print(stderr,
                 "{}: {} jobs' run times extrapolated past the largest measured scale factor\n",
                 o.trace, run.trace.estimated_durations);
    }
    runs.push_back(std::move(run));
  }
  // Every run reads the same jobs: the first run's counts.
  const sim::PlanStats& plan_stats = run_plan_stats.at(0);
  const sim::ReportMeta meta{o.trace, cluster_words, o.seed,
                             o.failures || !o.failure_trace.empty()};
  fmt::print("{}\n", cluster_words);
  if (plan_stats.with_plan + plan_stats.without_plan > 0) {
    fmt::print(
        "planner: pre-training jobs running the planner's best plan: {}{}\n", plan_stats.with_plan,
        plan_stats.without_plan == 0
            ? std::string()
            : fmt::format("; without a feasible plan (per-level penalty): {} ({})",
                          plan_stats.without_plan, fmt::join(plan_stats.without_which, ", ")));
  }
  fmt::print("{}", sim::SummaryTable(runs));
  if (o.elastic_variants) {
    fmt::print("\n{}", sim::ElasticVariantsTable(runs));
    if (!runs.empty() && runs[0].summary.elastic_jobs == 0) {
      fmt::print(stderr,
                 "{}: no elastic jobs (a JSONL line's `elastic` field): both variants are "
                 "the same run\n",
                 o.trace);
    }
  }
  if (!o.json.empty()) RETURN_IF_ERROR(WriteFile(o.json, sim::ReportJson(meta, runs)));
  if (!o.csv.empty()) RETURN_IF_ERROR(WriteFile(o.csv, sim::JobsCsv(runs)));
  if (!o.html.empty()) RETURN_IF_ERROR(WriteFile(o.html, sim::ReportHtml(meta, runs)));
  return Status::Ok();
}

}  // namespace

void RegisterSimCommand(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<SimOptions>();
  CLI::App* cmd = app.add_subcommand(
      "sim", "Replay a job trace on a modelled cluster and compare scheduling policies");
  cmd->add_option("--trace", o->trace,
                  "Job trace: ITP CSV, Philly .trace, SWF, openb CSV, JSONL, or a folder of one "
                  "format's files merged (Philly: one file per virtual cluster); or "
                  "synthetic:JOBS for the Acme-calibrated LLM workload "
                  "(src/sim/workload/synthetic.h)");
  cmd->add_option("--replay-daemon", o->replay_daemon,
                  "Replay a daemon's scheduling history (baton export) instead of a trace: under "
                  "the recorded config, comparing every placement; with --policies or "
                  "--scheduler-config, what those would have done");
  cmd->add_option("--philly-throughputs", o->philly_throughputs,
                  "Gavel's throughputs.csv for a Philly trace (default: the one beside the trace)");
  cmd->add_option("--synthetic-gap-s", o->synthetic_gap_s,
                  "Mean gap between arrivals of --trace synthetic:JOBS")
      ->capture_default_str();
  std::string formats;
  for (const auto& f : sim::TraceFormats())
    formats += (formats.empty() ? "" : ", ") + std::string(f.name);
  cmd->add_option("--format", o->format,
                  "Trace format (" + formats + "; default: guessed from the file)");
  cmd->add_flag("--strict", o->strict, "Stop at the first malformed trace line");
  cmd->add_option("--policies", o->policies,
                  "Comma-separated named scheduler configs (data/scheduler/NAME.yaml): fifo "
                  "(strict), first-fit, backfill, las, topo, daemon")
      ->capture_default_str()
      ->each([o](const std::string&) { o->policies_given = true; });
  cmd->add_option("--scheduler-config", o->scheduler_configs,
                  "A scheduler config YAML, as `baton serve --scheduler-config` reads it (may be "
                  "repeated; without --policies only these run)");
  cmd->add_option("--cluster-gpus", o->cluster_gpus,
                  "Model a fat-tree with this many GPUs (16 nodes per leaf, 8 leaves per spine)");
  cmd->add_option("--gpus-per-node", o->gpus_per_node, "With --cluster-gpus")
      ->capture_default_str();
  cmd->add_option("--gpu", o->gpu, "GPU type, with --cluster-gpus")->capture_default_str();
  cmd->add_option("--preset", o->preset, "A built-in cluster (see baton topo --list-presets)");
  cmd->add_option("--topology", o->topology, "A cluster file (baton YAML or Slurm topology.conf)");
  cmd->add_option("--seed", o->seed, "Seed for generated failures")->capture_default_str();
  cmd->add_flag("--failures", o->failures,
                "Inject node failures at Llama 3 405B's per-GPU rate (419 in 54 days on 16,384)");
  cmd->add_option("--failure-rate-scale", o->failure_rate_scale,
                  "Multiply the failure rate (stress tests)")
      ->capture_default_str();
  cmd->add_option("--failure-trace", o->failure_trace,
                  "Failures from a CSV file (time_s,node,cause,repair_s) instead");
  cmd->add_option("--checkpoint-interval-s", o->checkpoint_interval_s,
                  "Every job checkpoints this often (0: never)")
      ->capture_default_str();
  cmd->add_option("--restart-cost-s", o->restart_cost_s, "Time to restart after a failure")
      ->capture_default_str();
  cmd->add_option("--max-retries", o->max_retries, "Failures a job survives")
      ->capture_default_str();
  cmd->add_option("--estimate", o->estimate,
                  "Backfill's runtime estimate: requested (the trace's limit, else the actual "
                  "duration), actual, none")
      ->capture_default_str();
  cmd->add_option("--sample-interval-s", o->sample_interval_s, "Time-series resolution")
      ->capture_default_str();
  cmd->add_option("--json", o->json, "Write the JSON report here");
  cmd->add_option("--csv", o->csv, "Write one CSV row per job and policy here");
  cmd->add_option("--html", o->html, "Write the self-contained HTML report here");
  cmd->add_flag("-q,--quiet", o->quiet, "No progress bar");
  cmd->add_option("--sites", o->sites,
                  "Simulate a federation: the sites file of baton federate with each site's "
                  "cluster: (and scheduler:, outages:), jobs routed at arrival "
                  "(sim/federation/multisite.h)");
  std::string routings;
  for (const auto& p : federation::RoutingPolicies())
    routings += (routings.empty() ? "" : ", ") + std::string(p.name);
  cmd->add_option("--routing,--policy", o->routing,
                  "With --sites: routing policies, comma-separated (" + routings + ") or all")
      ->capture_default_str();
  cmd->add_option("--tenant-region", o->tenant_regions,
                  "With --sites: TENANT:REGION, the tenant's jobs require that region (repeat)");
  cmd->add_option("--deadline-factor", o->deadline_factor,
                  "With --sites: each job's deadline is this many times its run time after its "
                  "submission (cheapest-by-deadline routing; 0: none)")
      ->capture_default_str();
  cmd->add_option("--whatif-max-cycles", o->whatif_max_cycles,
                  "With --sites: bound on each site what-if's projected cycles")
      ->capture_default_str();
  cmd->add_option("--site-scheduler", o->site_scheduler,
                  "With --sites: the named scheduler config of sites without scheduler:")
      ->capture_default_str();
  cmd->add_option("--threads", o->threads,
                  "Policies simulated at once, each on its own thread (0: one per policy, up to "
                  "the machine's cores); the results do not depend on it")
      ->capture_default_str();
  cmd->add_flag("--elastic-variants", o->elastic_variants,
                "Run each policy twice, the trace as given (elastic jobs resize) and every elastic "
                "job rigid at its max_gpus (POLICY/rigid), and compare JCT and utilisation");
  cmd->add_option("--synthetic-tenants", o->synthetic_tenants,
                  "Tenants of --trace synthetic:JOBS (with --sites: each one's home is where its "
                  "datasets are)")
      ->capture_default_str();
  AddProfileOption(cmd);
  cmd->callback([o, &exit_code] {
    Status st = Run(*o);
    if (!st.ok()) {
      fmt::print(stderr, "baton sim: {}\n", st.message());
      exit_code = 1;
    }
  });
}

}  // namespace baton::cli
