#include "server/executors/local_executor.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "core/log.h"
#include "server/executors/command.h"

namespace baton::server {
namespace {

// The environment of one rank: ours, minus the variables we set, plus the rank's.
std::vector<std::string> RankEnvironment(const LaunchRequest& r, const RankAssignment& rank,
                                         int local_world) {
  std::map<std::string, std::string> vars = {
      {"RANK", std::to_string(rank.rank)},
      {"WORLD_SIZE", std::to_string(r.ranks.size())},
      {"LOCAL_RANK", std::to_string(rank.local_rank)},
      {"LOCAL_WORLD_SIZE", std::to_string(local_world)},
      {"NODE_RANK", std::to_string(rank.node_rank)},
      {"MASTER_ADDR", r.master_addr},
      {"MASTER_PORT", std::to_string(r.master_port)},
      {"CUDA_VISIBLE_DEVICES", rank.gpu < 0 ? std::string() : std::to_string(rank.gpu)},
      {"BATON_JOB_ID", std::to_string(r.job)},
      {"BATON_NODE", rank.node},
  };
  if (r.gpu_milli > 0) {
    // What a GPU-sharing runtime reads: the share itself, and the CUDA MPS limit on the share of
    // the GPU's SMs a client may use (a percentage, rounded up so a share never gets 0).
    vars["BATON_GPU_MILLI"] = std::to_string(r.gpu_milli);
    vars["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] = std::to_string((r.gpu_milli + 9) / 10);
  }
  if (r.cpu_milli > 0) vars["BATON_CPU_MILLI"] = std::to_string(r.cpu_milli);
  if (r.memory_mib > 0) vars["BATON_MEMORY_MIB"] = std::to_string(r.memory_mib);
  return EnvironmentWith(vars);
}

// Starts argv[0] (searched in $PATH) in its own process group with `env`, stdin from /dev/null,
// stdout and stderr to `log` (appended to, or truncated) (SpawnInOwnGroup). Returns
// posix_spawn's error.
int SpawnInGroup(std::vector<std::string>& argv, std::vector<std::string>& env,
                 const std::string& log, bool append, pid_t* pid) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, log.c_str(),
                                   O_WRONLY | O_CREAT | (append ? O_APPEND : O_TRUNC), 0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  int err = SpawnInOwnGroup(argv, env, actions, pid);
  posix_spawn_file_actions_destroy(&actions);
  return err;
}

}  // namespace

LocalExecutor::LocalExecutor(LocalOptions options, const Clock& clock)
    : options_(std::move(options)), clock_(clock) {}

LocalExecutor::~LocalExecutor() { StopAll(); }

Status LocalExecutor::Launch(const LaunchRequest& request) {
  Kill(request.job);  // a relaunch (replacement) replaces the old ranks
  if (request.command.empty()) {
    return InvalidArgumentError("the local executor needs a command (field 'command')");
  }
  bool here = false;
  for (const auto& rank : request.ranks) {
    here = here || options_.host.empty() || rank.node == options_.host;
  }
  if (!here) return Status::Ok();  // nothing placed on this host
  Job job;
  if (!request.stage.empty()) {
    if (options_.stage_command.empty()) {
      LOG_WARN("job {}: {} input(s) to stage and no stage-command: started without staging",
               request.job, request.stage.size());
    } else {
      job.staging = request;
      RETURN_IF_ERROR(StartStage(request.job, job));
      jobs_[request.job] = std::move(job);
      return Status::Ok();
    }
  }
  RETURN_IF_ERROR(StartRanks(request, job).status());
  jobs_[request.job] = std::move(job);
  return Status::Ok();
}

Status LocalExecutor::StartStage(std::int64_t id, Job& job) {
  const LaunchRequest& r = *job.staging;
  const StageRequest& item = r.stage[job.stage_index];
  std::filesystem::path dir =
      std::filesystem::path(options_.log_dir) / ("job-" + std::to_string(id));
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return UnavailableError("cannot create " + dir.string() + ": " + ec.message());
  std::string log = (dir / "stage.log").string();
  std::vector<std::string> argv = {"/bin/sh", "-c", options_.stage_command};
  std::vector<std::string> env = EnvironmentWith({
      {"BATON_JOB_ID", std::to_string(id)},
      {"BATON_JOB_NAME", r.name},
      {"BATON_STAGE_KIND", item.kind},
      {"BATON_STAGE_NAME", item.name},
      {"BATON_STAGE_FROM", item.from},
      {"BATON_STAGE_SIZE_GIB", fmt::format("{}", item.size_gib)},
      {"BATON_STAGE_INDEX", std::to_string(job.stage_index)},
      {"BATON_STAGE_COUNT", std::to_string(r.stage.size())},
  });
  pid_t pid = 0;
  int err = SpawnInGroup(argv, env, log, /*append=*/true, &pid);
  if (err != 0) {
    return FailedPreconditionError(
        fmt::format("cannot start the stage command: {}", std::strerror(err)));
  }
  LOG_INFO("job {}: staging {} '{}' from {} ({} of {})", id, item.kind, item.name, item.from,
           job.stage_index + 1, r.stage.size());
  job.stage_pid = pid;
  return Status::Ok();
}

void LocalExecutor::StageExited(std::int64_t id, Job& job, int status,
                                std::optional<ExitReport>& report) {
  job.stage_pid = 0;
  const StageRequest& item = job.staging->stage[job.stage_index];
  std::string log =
      (std::filesystem::path(options_.log_dir) / ("job-" + std::to_string(id)) / "stage.log")
          .string();
  if (job.stopping) {
    report = ExitReport{id, ExitKind::kStopped, "stopped while staging"};
    return;
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::string how = WIFEXITED(status) ? fmt::format("exited {}", WEXITSTATUS(status))
                                        : fmt::format("was killed by signal {}",
                                                      WIFSIGNALED(status) ? WTERMSIG(status) : 0);
    report = ExitReport{id, ExitKind::kFailed,
                        fmt::format("staging failed: the stage command {} for {} '{}' from {} "
                                    "(see {})",
                                    how, item.kind, item.name, item.from, log)};
    return;
  }
  if (++job.stage_index < job.staging->stage.size()) {
    if (Status st = StartStage(id, job); !st.ok()) {
      report = ExitReport{id, ExitKind::kFailed, "staging failed: " + std::string(st.message())};
    }
    return;
  }
  LaunchRequest request = *std::move(job.staging);
  job.staging.reset();
  if (Status st = StartRanks(request, job).status(); !st.ok()) {
    report = ExitReport{id, ExitKind::kFailed, std::string(st.message())};
  }
}

Result<bool> LocalExecutor::StartRanks(const LaunchRequest& request, Job& job) {
  std::vector<const RankAssignment*> mine;
  for (const auto& rank : request.ranks) {
    if (options_.host.empty() || rank.node == options_.host) mine.push_back(&rank);
  }
  if (mine.empty()) return false;
  std::filesystem::path dir =
      std::filesystem::path(options_.log_dir) / ("job-" + std::to_string(request.job));
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return UnavailableError("cannot create " + dir.string() + ": " + ec.message());

  std::map<std::string, int> per_node;
  for (const auto* rank : mine) ++per_node[rank->node];
  for (const auto* rank : mine) {
    std::string log = (dir / ("rank-" + std::to_string(rank->rank) + ".log")).string();
    std::vector<std::string> argv = request.command;
    std::vector<std::string> env = RankEnvironment(request, *rank, per_node[rank->node]);
    pid_t pid = 0;
    int err = SpawnInGroup(argv, env, log, /*append=*/false, &pid);
    if (err != 0) {
      Signal(job, SIGKILL);
      for (auto& p : job.procs) waitpid(p.pid, nullptr, 0);
      job.procs.clear();
      return FailedPreconditionError(fmt::format(
          "cannot start '{}' for rank {}: {}", request.command[0], rank->rank, std::strerror(err)));
    }
    job.procs.push_back({pid, rank->rank});
  }
  LOG_INFO("job {}: started {} local rank(s) of '{}', logs in {}", request.job, job.procs.size(),
           request.command[0], dir.string());
  return true;
}

void LocalExecutor::Signal(Job& job, int sig) {
  if (job.stage_pid > 0) ::kill(-job.stage_pid, sig);
  for (auto& p : job.procs) {
    if (!p.exited) ::kill(-p.pid, sig);  // the rank's whole process group
  }
}

void LocalExecutor::Stop(std::int64_t id, Seconds grace) {
  auto it = jobs_.find(id);
  if (it == jobs_.end() || it->second.stopping) return;
  it->second.stopping = true;
  it->second.kill_at = clock_.Now() + grace;
  Signal(it->second, SIGTERM);
}

std::vector<ExitReport> LocalExecutor::Poll() {
  std::vector<ExitReport> out;
  TimePoint now = clock_.Now();
  for (auto it = jobs_.begin(); it != jobs_.end();) {
    Job& job = it->second;
    if (job.staging) {
      int status = 0;
      pid_t r = job.stage_pid > 0 ? waitpid(job.stage_pid, &status, WNOHANG) : 0;
      if (r == job.stage_pid || (r < 0 && errno == ECHILD)) {
        std::optional<ExitReport> report;
        StageExited(it->first, job, r == job.stage_pid ? status : 0, report);
        if (report) {
          out.push_back(std::move(*report));
          it = jobs_.erase(it);
          continue;
        }
      } else if (job.stopping && job.kill_at <= now) {
        Signal(job, SIGKILL);
      }
      ++it;
      continue;
    }
    bool all_exited = true;
    for (auto& p : job.procs) {
      if (p.exited) continue;
      int status = 0;
      pid_t r = waitpid(p.pid, &status, WNOHANG);
      if (r == p.pid || (r < 0 && errno == ECHILD)) {
        p.exited = true;
        p.status = r == p.pid ? status : 0;
        bool ok = WIFEXITED(p.status) && WEXITSTATUS(p.status) == 0;
        if (!ok && job.failure.empty() && !job.stopping) {
          job.failure = WIFEXITED(p.status)
                            ? fmt::format("exit code {} on rank {}", WEXITSTATUS(p.status), p.rank)
                            : fmt::format("rank {} killed by signal {}", p.rank,
                                          WIFSIGNALED(p.status) ? WTERMSIG(p.status) : 0);
          // One rank failed: the gang cannot go on.
          job.stopping = true;
          job.kill_at = now + Seconds(10);
          Signal(job, SIGTERM);
        }
      } else {
        all_exited = false;
      }
    }
    if (!all_exited && job.stopping && job.kill_at <= now) Signal(job, SIGKILL);
    if (all_exited) {
      ExitReport report{it->first, ExitKind::kSucceeded, "all ranks exited 0"};
      if (!job.failure.empty()) {
        report = {it->first, ExitKind::kFailed, job.failure};
      } else if (job.stopping) {
        report = {it->first, ExitKind::kStopped, "stopped"};
      }
      out.push_back(std::move(report));
      it = jobs_.erase(it);
    } else {
      ++it;
    }
  }
  return out;
}

void LocalExecutor::Kill(std::int64_t id) {
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return;
  Signal(it->second, SIGKILL);
  if (it->second.stage_pid > 0) waitpid(it->second.stage_pid, nullptr, 0);
  for (auto& p : it->second.procs) {
    if (!p.exited) waitpid(p.pid, nullptr, 0);  // prompt after SIGKILL
  }
  jobs_.erase(it);
}

void LocalExecutor::StopAll() {
  for (auto& [id, job] : jobs_) {
    Signal(job, SIGKILL);
    if (job.stage_pid > 0) waitpid(job.stage_pid, nullptr, 0);
    for (auto& p : job.procs) {
      if (!p.exited) waitpid(p.pid, nullptr, 0);
    }
  }
  jobs_.clear();
}

}  // namespace baton::server
