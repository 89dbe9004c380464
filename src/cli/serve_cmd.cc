// `baton serve`: the scheduling daemon. Builds the cluster (a preset or a cluster file), the
// scheduler (a SchedulerConfig YAML; by default server::DefaultDaemonSchedulerConfig, which ranks
// the placements of jobs with a plan by the planner's predicted slowdown) and an executor, and
// serves the HTTP API (server/server.h) until SIGTERM or SIGINT. With --demo it also submits a
// stream of synthetic jobs from several tenants through its own API.
#include <fmt/format.h>
#include <httplib.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <thread>

#include "cli/commands.h"
#include "cli/daemon_flags.h"
#include "core/bounded_input.h"
#include "core/clock.h"
#include "core/log.h"
#include "core/rng.h"
#include "core/strings.h"
#include "sched/framework/config.h"
#include "server/executors/registry.h"
#include "server/scheduling_controller.h"
#include "server/server.h"
#include "server/stop_signals.h"
#include "topology/builders/fabrics.h"
#include "topology/io/cluster_file.h"

namespace baton::cli {
namespace {

struct ServeOptions {
  DaemonFlags daemon{.listen = "127.0.0.1:8080", .db = "baton.db"};
  std::string preset;
  std::string topology;
  std::string scheduler_config;
  std::string executor = "dry-run";
  std::vector<std::string> executor_options;
  double speedup = 60;
  double failure_probability = 0;
  std::string local_host;
  std::string slurm_conf;
  std::string slurm_partition;
  std::string kubeconfig;
  std::string log_dir = "baton-logs";
  std::string checkpoint_dir;  // empty: <log_dir>/checkpoints
  bool demo = false;
  std::string demo_token;
  double demo_rate = 2;  // submissions per second
  std::int64_t history_lines = server::SchedulingControllerOptions{}.history_lines;
};

// Submits synthetic jobs (mixed sizes, tenants, priorities, runtimes) until `stop`.
void RunDemo(int port, const std::string& token, double rate, const std::atomic<bool>& stop) {
  struct Shape {
    int gpus;
    double weight;
  };
  constexpr Shape kShapes[] = {{8, 5}, {16, 4}, {32, 3}, {64, 3}, {128, 2}, {256, 2}, {512, 1}};
  constexpr const char* kTenants[] = {"team-a", "team-b", "research"};
  double total = 0;
  for (const Shape& s : kShapes) total += s.weight;
  Rng rng(42);
  httplib::Client client("127.0.0.1", port);
  client.set_read_timeout(5);
  httplib::Headers headers{{"Authorization", "Bearer " + token}};
  int n = 0;
  while (!stop) {
    double pick = rng.Uniform() * total;
    int gpus = kShapes[0].gpus;
    for (const Shape& s : kShapes) {
      if ((pick -= s.weight) <= 0) {
        gpus = s.gpus;
        break;
      }
    }
    const char* tenant = kTenants[rng.UniformInt(0, 2)];
    // Mostly one priority class, now and then an urgent job (which may preempt).
    int priority = rng.Bernoulli(0.1) ? 100 : 0;
    double runtime = std::round(rng.UniformInt(10, 120) * 60.0);
    std::string body = fmt::format(
        R"({{"name": "demo-{}-{}g", "tenant": "{}", "gpus": {}, "priority": {},
            "estimated_runtime_s": {}, "grace_period_s": 60, "topology": {{"preferred": "{}"}}}})",
        n, gpus, tenant, gpus, priority, runtime, gpus <= 256 ? "leaf" : "spine");
    auto res = client.Post("/api/v1/jobs", headers, body, "application/json");
    if (!res || res->status != 201) {
      LOG_WARN("demo: submission failed: {}", res ? std::to_string(res->status) + " " + res->body
                                                  : httplib::to_string(res.error()));
    }
    ++n;
    auto wake = std::chrono::steady_clock::now() + std::chrono::duration<double>(1.0 / rate);
    while (!stop && std::chrono::steady_clock::now() < wake) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  LOG_INFO("demo: submitted {} jobs", n);
}

Status Run(const ServeOptions& o) {
  ASSIGN_OR_RETURN(server::ServerOptions so, ServerOptionsFrom(o.daemon));

  if (!o.preset.empty() && !o.topology.empty()) {
    return InvalidArgumentError("give --preset or --topology, not both");
  }
  ASSIGN_OR_RETURN(const server::ExecutorKind* kind, server::FindExecutor(o.executor));
  server::ExecutorSettings settings;
  settings.speedup = o.speedup;
  settings.failure_probability = o.failure_probability;
  settings.host = o.local_host;
  settings.work_dir = o.log_dir;
  settings.slurm_conf = o.slurm_conf;
  settings.partition = o.slurm_partition;
  settings.kubeconfig = o.kubeconfig;
  for (const std::string& kv : o.executor_options) {
    std::size_t eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) {
      return InvalidArgumentError(fmt::format("--executor-option '{}': expected KEY=VALUE", kv));
    }
    if (!settings.options.emplace(kv.substr(0, eq), kv.substr(eq + 1)).second) {
      return InvalidArgumentError(
          fmt::format("--executor-option '{}': key given twice", kv.substr(0, eq)));
    }
  }
  if (kind->cluster != nullptr && (!o.preset.empty() || !o.topology.empty())) {
    return InvalidArgumentError(fmt::format(
        "--executor {} takes the cluster from its resource manager, not --preset/--topology",
        kind->name));
  }
  ASSIGN_OR_RETURN(topo::Cluster cluster,
                   kind->cluster != nullptr ? kind->cluster(settings)
                   : o.topology.empty()
                       ? topo::BuildPreset(o.preset.empty() ? "superpod-h100" : o.preset)
                       : topo::LoadClusterFile(o.topology));
  server::SchedulingControllerOptions co;
  if (!o.scheduler_config.empty()) {
    // What sched::LoadSchedulerConfigFile (the loader `baton sim --scheduler-config` uses) does,
    // keeping the text: the scheduling history records it, so a replay runs the same config.
    ASSIGN_OR_RETURN(
        co.config_yaml,
        ReadFileBounded(o.scheduler_config, sched::kMaxSchedulerConfigSize, "scheduler config"));
    ASSIGN_OR_RETURN(co.config, sched::ParseSchedulerConfig(co.config_yaml, o.scheduler_config));
    // Jobs with a plan still get their planner slowdown in their events, but placements are
    // ranked by it only through the `planner` score.
    if (std::none_of(co.config.plugins.begin(), co.config.plugins.end(),
                     [](const sched::PluginConfig& p) { return p.name == "planner"; })) {
      LOG_INFO(
          "{}: no 'planner' score plugin: placements of jobs with a plan are not ranked by "
          "the planner's predicted slowdown",
          o.scheduler_config);
    }
  }
  if (o.history_lines < 0) return InvalidArgumentError("--history-lines must be >= 0");
  co.history_lines = o.history_lines;
  std::error_code ec;
  co.checkpoint_root =
      std::filesystem::absolute(o.checkpoint_dir.empty()
                                    ? std::filesystem::path(o.log_dir) / "checkpoints"
                                    : std::filesystem::path(o.checkpoint_dir),
                                ec)
          .string();
  if (ec) return InvalidArgumentError("--checkpoint-dir: " + ec.message());
  SystemClock clock;
  // Executors may start threads (the Slurm and Kubernetes workers): they must inherit the mask
  // that leaves SIGTERM and SIGINT to RunServer, or one of them takes the signal and the process
  // dies of it instead of shutting down.
  server::StopSignals signals;
  ASSIGN_OR_RETURN(std::unique_ptr<server::Executor> executor,
                   server::CreateExecutor(*kind, settings, clock));
  LOG_INFO("cluster {}: {} nodes, {} GPUs; executor {}", cluster.name(), cluster.nodes().size(),
           cluster.counts().total, executor->name());
  ASSIGN_OR_RETURN(std::unique_ptr<server::SchedulingController> controller,
                   server::SchedulingController::Create(std::move(cluster), std::move(co),
                                                        std::move(executor), clock));

  std::atomic<bool> stop_demo{false};
  std::thread demo;
  if (o.demo) {
    std::string token = o.demo_token;
    if (token.empty() && std::getenv("BATON_TOKEN") != nullptr) token = std::getenv("BATON_TOKEN");
    if (token.empty()) {
      return InvalidArgumentError("--demo needs an admin token (--demo-token or $BATON_TOKEN)");
    }
    // Started once listening, from the serving thread, so that it inherits the blocked
    // SIGTERM/SIGINT (RunServer takes them with sigtimedwait).
    so.on_listening = [&, token](int bound) {
      demo = std::thread(RunDemo, bound, token, o.demo_rate, std::cref(stop_demo));
    };
  }
  Status served = server::RunServer(so, controller.get());
  stop_demo = true;
  if (demo.joinable()) demo.join();
  return served;
}

}  // namespace

void RegisterServeCommand(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<ServeOptions>();
  CLI::App* cmd = app.add_subcommand(
      "serve", "Run the scheduling daemon: HTTP API, durable job store, scheduler, executor");
  AddDaemonFlags(cmd, &o->daemon, "the job store");
  cmd->add_option("--preset", o->preset, "Built-in cluster (default superpod-h100)");
  cmd->add_option("--topology", o->topology, "Cluster file (baton YAML or Slurm topology.conf)");
  cmd->add_option("--scheduler-config", o->scheduler_config,
                  "Scheduler YAML: actions, queue sort, plugins (default: built-in)");
  std::string executors;
  for (const server::ExecutorKind& k : server::Executors()) {
    executors += fmt::format("{}{}: {}", executors.empty() ? "" : "; ", k.name, k.description);
  }
  cmd->add_option("--executor", o->executor, executors)->capture_default_str();
  cmd->add_option("--executor-option", o->executor_options,
                  "KEY=VALUE for the executor (slurm: job-prefix=NAME, distinct per daemon "
                  "sharing one Slurm; kubernetes: context=NAME, scheduler-name=NAME)");
  cmd->add_option("--slurm-conf", o->slurm_conf,
                  "slurm: slurm.conf (topology.conf beside it); default $SLURM_CONF");
  cmd->add_option("--slurm-partition", o->slurm_partition, "slurm: partition for baton's jobs");
  cmd->add_option("--kubeconfig", o->kubeconfig,
                  "kubernetes: the kubeconfig (a bearer token and a CA; default $KUBECONFIG, "
                  "else the in-cluster ServiceAccount)");
  cmd->add_option("--speedup", o->speedup, "dry-run: simulated seconds per real second")
      ->capture_default_str();
  cmd->add_option("--failure-probability", o->failure_probability,
                  "dry-run: chance that a run fails")
      ->capture_default_str();
  cmd->add_option("--local-host", o->local_host,
                  "local: the node this machine is (default: run every rank here)");
  cmd->add_option("--log-dir", o->log_dir,
                  "local: where rank logs go; slurm: batch scripts, hostfiles and job output")
      ->capture_default_str();
  cmd->add_option("--checkpoint-dir", o->checkpoint_dir,
                  "Where each job's BATON_CHECKPOINT_DIR is made, one folder per job that every "
                  "attempt shares (default: LOG-DIR/checkpoints; slurm: on storage every node "
                  "sees)");
  cmd->add_flag("--demo", o->demo, "Submit a stream of synthetic jobs through the API");
  cmd->add_option("--demo-token", o->demo_token, "Admin token for --demo (or $BATON_TOKEN)");
  cmd->add_option("--demo-rate", o->demo_rate, "--demo submissions per second")
      ->capture_default_str();
  cmd->add_option("--history-lines", o->history_lines,
                  "Scheduling history kept in the store for replay (baton export): the newest N "
                  "cycles; 0 records none")
      ->capture_default_str();
  AddProfileOption(cmd);
  cmd->callback([o, &exit_code] {
    Status st = Run(*o);
    if (!st.ok()) {
      fmt::print(stderr, "baton serve: {}\n", st.message());
      exit_code = 1;
    }
  });
}

}  // namespace baton::cli
