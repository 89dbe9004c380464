// LocalExecutor: runs a job's command on this machine, one process per rank placed on this host,
// with the torchrun-style rank environment (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE,
// NODE_RANK, MASTER_ADDR, MASTER_PORT, CUDA_VISIBLE_DEVICES) plus BATON_JOB_ID. Each rank gets its
// own process group (so a cancel reaches whatever it spawned) and writes stdout and stderr to
// <log_dir>/job-<id>/rank-<r>.log. Processes are started with posix_spawn and reaped with
// waitpid(WNOHANG) from Poll. A job succeeds when every rank exits 0; the first rank that fails
// gets the others stopped.
//
// Reattach always answers false: the processes of a previous daemon are not its children.
#pragma once

#include <sys/types.h>

#include <map>
#include <string>
#include <vector>

#include "core/clock.h"
#include "server/executors/executor.h"

namespace baton::server {

struct LocalOptions {
  // The node name this machine stands for; only ranks placed there run. Empty: every rank of the
  // placement runs here (one machine standing in for the whole cluster, for tests and demos).
  std::string host;
  std::string log_dir = "baton-logs";
};

class LocalExecutor final : public Executor {
 public:
  // `clock` (not owned) must outlive the executor.
  LocalExecutor(LocalOptions options, const Clock& clock);
  ~LocalExecutor() override;
  std::string_view name() const override { return "local"; }
  Status Launch(const LaunchRequest& request) override;
  void Stop(std::int64_t job, Seconds grace) override;
  void Kill(std::int64_t job) override;
  bool Reattach(const LaunchRequest&) override { return false; }
  std::vector<ExitReport> Poll() override;
  void StopAll() override;

 private:
  struct Proc {
    pid_t pid = 0;
    int rank = 0;
    bool exited = false;
    int status = 0;
  };
  struct Job {
    std::vector<Proc> procs;
    bool stopping = false;
    TimePoint kill_at;  // while stopping: SIGKILL then
    std::string failure;
  };
  void Signal(Job& job, int sig);

  LocalOptions options_;
  const Clock& clock_;
  std::map<std::int64_t, Job> jobs_;
};

}  // namespace baton::server
