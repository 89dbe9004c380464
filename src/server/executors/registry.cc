#include "server/executors/registry.h"

#include <fmt/format.h>

#include <array>
#include <cstdlib>

#include "server/executors/dry_run_executor.h"
#include "server/executors/kubernetes/kubernetes_executor.h"
#include "server/executors/local_executor.h"
#include "server/executors/slurm_executor.h"

namespace baton::server {
namespace {

Result<std::unique_ptr<Executor>> CreateDryRun(const ExecutorSettings& s, const Clock& clock) {
  if (!(s.speedup > 0)) {
    return InvalidArgumentError(
        fmt::format("dry-run executor: speedup must be > 0, got {}", s.speedup));
  }
  if (!(s.failure_probability >= 0 && s.failure_probability <= 1)) {
    return InvalidArgumentError(fmt::format(
        "dry-run executor: failure probability must be in [0, 1], got {}", s.failure_probability));
  }
  DryRunOptions dry;
  dry.speedup = s.speedup;
  dry.failure_probability = s.failure_probability;
  return std::unique_ptr<Executor>(std::make_unique<DryRunExecutor>(dry, clock));
}

Result<std::unique_ptr<Executor>> CreateLocal(const ExecutorSettings& s, const Clock& clock) {
  LocalOptions lo{s.host, s.work_dir, ""};
  if (auto it = s.options.find("stage-command"); it != s.options.end()) {
    if (it->second.empty()) return InvalidArgumentError("local executor: stage-command is empty");
    lo.stage_command = it->second;
  }
  return std::unique_ptr<Executor>(std::make_unique<LocalExecutor>(lo, clock));
}

std::string SlurmConf(const ExecutorSettings& s) {
  if (!s.slurm_conf.empty()) return s.slurm_conf;
  const char* env = std::getenv("SLURM_CONF");
  return env == nullptr ? "" : env;
}

Result<topo::Cluster> SlurmCluster(const ExecutorSettings& s) {
  std::string conf = SlurmConf(s);
  if (conf.empty()) {
    return InvalidArgumentError("slurm executor needs --slurm-conf PATH (or $SLURM_CONF)");
  }
  return ClusterFromSlurmConf(conf);
}

Result<std::unique_ptr<Executor>> CreateSlurm(const ExecutorSettings& s, const Clock& clock) {
  SlurmOptions so;
  so.slurm_conf = SlurmConf(s);
  so.work_dir = s.work_dir;
  so.partition = s.partition;
  if (auto it = s.options.find("job-prefix"); it != s.options.end()) {
    if (it->second.empty()) return InvalidArgumentError("slurm executor: job-prefix is empty");
    so.job_prefix = it->second;
  }
  return std::unique_ptr<Executor>(std::make_unique<SlurmExecutor>(so, clock));
}

std::string Option(const ExecutorSettings& s, const std::string& key, const std::string& fallback) {
  auto it = s.options.find(key);
  return it == s.options.end() ? fallback : it->second;
}

Result<kube::KubeConfig> KubeConfigFor(const ExecutorSettings& s) {
  return kube::ResolveKubeConfig(s.kubeconfig, Option(s, "context", ""));
}

Result<topo::Cluster> KubernetesClusterFor(const ExecutorSettings& s) {
  ASSIGN_OR_RETURN(kube::KubeConfig config, KubeConfigFor(s));
  return KubernetesCluster(config);
}

Result<std::unique_ptr<Executor>> CreateKubernetes(const ExecutorSettings& s, const Clock& clock) {
  KubernetesOptions ko;
  ASSIGN_OR_RETURN(ko.config, KubeConfigFor(s));
  ko.scheduler_name = Option(s, "scheduler-name", ko.scheduler_name);
  if (ko.scheduler_name.empty()) {
    return InvalidArgumentError("kubernetes executor: scheduler-name is empty");
  }
  ASSIGN_OR_RETURN(std::unique_ptr<kube::KubeClient> client, kube::KubeClient::Create(ko.config));
  return std::unique_ptr<Executor>(
      std::make_unique<KubernetesExecutor>(std::move(ko), std::move(client), clock));
}

constexpr std::array<std::string_view, 1> kSlurmKeys = {"job-prefix"};
// stage-command: run by /bin/sh -c before a job's ranks, once per input to stage
// (local_executor.h).
constexpr std::array<std::string_view, 1> kLocalKeys = {"stage-command"};
// context: the kubeconfig context (default its current-context); scheduler-name: the
// spec.schedulerName of baton's pods (default "baton").
constexpr std::array<std::string_view, 2> kKubernetesKeys = {"context", "scheduler-name"};

const std::array<ExecutorKind, 4> kExecutors = {{
    {"dry-run",
     "a simulated cluster in accelerated time (demos, tests)",
     {},
     nullptr,
     &CreateDryRun},
    {"local", "real processes on this machine (stage-command=CMD copies a job's inputs first)",
     kLocalKeys, nullptr, &CreateLocal},
    {"slurm", "batch jobs on a real Slurm cluster (the cluster comes from slurm.conf)", kSlurmKeys,
     &SlurmCluster, &CreateSlurm},
    {"kubernetes",
     "gangs of pods with schedulerName baton, bound on a Kubernetes cluster (the cluster comes "
     "from the apiserver's nodes; --kubeconfig or in-cluster)",
     kKubernetesKeys, &KubernetesClusterFor, &CreateKubernetes},
}};

}  // namespace

std::span<const ExecutorKind> Executors() { return kExecutors; }

Result<const ExecutorKind*> FindExecutor(std::string_view name) {
  std::string known;
  for (const ExecutorKind& k : kExecutors) {
    if (k.name == name) return &k;
    known += known.empty() ? "" : ", ";
    known += k.name;
  }
  return InvalidArgumentError(fmt::format("unknown executor '{}' (known: {})", name, known));
}

Result<std::unique_ptr<Executor>> CreateExecutor(const ExecutorKind& kind,
                                                 const ExecutorSettings& settings,
                                                 const Clock& clock) {
  for (const auto& [key, value] : settings.options) {
    bool accepted = false;
    for (std::string_view k : kind.option_keys) accepted = accepted || k == key;
    if (!accepted) {
      std::string keys;
      for (std::string_view k : kind.option_keys)
        keys += (keys.empty() ? "" : ", ") + std::string(k);
      return InvalidArgumentError(fmt::format("{} executor: unknown option '{}' (accepted: {})",
                                              kind.name, key, keys.empty() ? "none" : keys));
    }
  }
  return kind.create(settings, clock);
}

}  // namespace baton::server
