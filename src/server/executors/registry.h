// The executors `baton serve --executor NAME` can run jobs through, by name. Adding an executor
// is a change in this folder only: its class, and one row in the table in registry.cc (settings
// that have no flag of their own reach it as `--executor-option KEY=VALUE`, listed in its row).
//
// Contract: CreateExecutor and ClusterFor never start anything that outlives their return; they
// fail with InvalidArgument naming the executor and the setting that is wrong, and list the known
// executors for an unknown name.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "core/clock.h"
#include "core/status.h"
#include "server/executors/executor.h"
#include "topology/cluster.h"

namespace baton::server {

// What the daemon's flags say about executors. Each executor reads the fields it uses.
struct ExecutorSettings {
  double speedup = 60;                         // dry-run: simulated seconds per real second
  double failure_probability = 0;              // dry-run: per run, in [0, 1]
  std::string host;                            // local: the node this machine stands for
  std::string work_dir = "baton-logs";         // local and slurm: logs, batch scripts, output
  std::string slurm_conf;                      // slurm: empty means $SLURM_CONF
  std::string partition;                       // slurm
  std::string kubeconfig;                      // kubernetes: empty means $KUBECONFIG or in-cluster
  std::map<std::string, std::string> options;  // --executor-option KEY=VALUE
};

struct ExecutorKind {
  std::string_view name;
  std::string_view description;
  // Keys this executor accepts in ExecutorSettings::options; any other key is refused.
  std::span<const std::string_view> option_keys;
  // Where the cluster comes from: null means from the user (--preset / --topology); otherwise
  // the executor's resource manager describes it (and --preset / --topology are refused).
  Result<topo::Cluster> (*cluster)(const ExecutorSettings& settings) = nullptr;
  Result<std::unique_ptr<Executor>> (*create)(const ExecutorSettings& settings,
                                              const Clock& clock) = nullptr;
};

// Every executor, in the order `--help` lists them.
std::span<const ExecutorKind> Executors();

// The executor called `name`; error lists the known ones.
Result<const ExecutorKind*> FindExecutor(std::string_view name);

// Checks `settings.options` against the kind's keys, then creates it. `clock` (not owned) must
// outlive the executor.
Result<std::unique_ptr<Executor>> CreateExecutor(const ExecutorKind& kind,
                                                 const ExecutorSettings& settings,
                                                 const Clock& clock);

}  // namespace baton::server
