// LocalExecutor: runs a job's command on this machine, one process per rank placed on this host,
// with the torchrun-style rank environment (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE,
// NODE_RANK, MASTER_ADDR, MASTER_PORT, CUDA_VISIBLE_DEVICES), BATON_JOB_ID, BATON_ATTEMPT and
// BATON_CHECKPOINT_DIR (docs/jobs.md). Each rank gets its own process group (so a cancel reaches
// whatever it spawned) and appends stdout and stderr to <log_dir>/job-<id>/rank-<r>.log, every
// attempt after the last. A job succeeds when every rank exits 0; the first rank that fails gets
// the others stopped.
//
// Rendezvous: when every rank of the job runs here (no `host`, or all on it), MASTER_ADDR is the
// loopback address: the node names of the cluster file need not resolve on this machine; and
// should MASTER_PORT be taken by a process baton does not know, the kernel picks a free one.
// Otherwise it is the rank-0 node's name, and the launch is refused when it does not resolve.
//
// Exactly once across daemon restarts: each rank runs under a small /bin/sh wrapper that, before
// it starts the command, appends "RANK PID" to <log_dir>/job-<id>/attempt-<n>.pids, and after
// the command writes its exit status to attempt-<n>.rank-<r>.exit. A restarted daemon's
// Reattach adopts the attempt the store calls current when all its ranks still run (each pid is
// checked against /proc: alive, not a zombie, and started with this job's BATON_JOB_ID and
// BATON_ATTEMPT, so a reused pid is never taken for a rank); it then follows them by pid and
// reads their exit files. FinishRecovery kills every other attempt found in the pid files, and
// Launch kills any earlier attempt of the job, and both wait until the processes are gone.
//
// Staging: with a stage command, a job whose request carries inputs to stage (LaunchRequest::stage,
// from the spec's `stage` the federation broker fills) first runs `/bin/sh -c COMMAND` once per
// input, in order, before any rank starts, with BATON_JOB_ID, BATON_JOB_NAME,
// BATON_STAGE_KIND (dataset / checkpoint), BATON_STAGE_NAME, BATON_STAGE_FROM (the site holding
// it), BATON_STAGE_SIZE_GIB, BATON_STAGE_INDEX and BATON_STAGE_COUNT in its environment, its
// output in <log_dir>/job-<id>/stage.log. The first command that does not exit 0 fails the job,
// saying which input and why; a stop or cancel meanwhile kills it. Without a stage command the
// inputs are not staged (the site's storage is assumed to hold them), and a line is logged.
#pragma once

#include <sys/types.h>

#include <map>
#include <optional>
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
  std::string stage_command;  // run by /bin/sh -c; empty: nothing is staged
};

class LocalExecutor final : public Executor {
 public:
  // `clock` (not owned) must outlive the executor.
  LocalExecutor(LocalOptions options, const Clock& clock);
  ~LocalExecutor() override;
  std::string_view name() const override { return "local"; }
  bool OneHost() const override { return options_.host.empty(); }
  // Writes the epoch to <log_dir>/leader.epoch; launches of older epochs are refused from then
  // on (each launch reads the file under the same flock until its processes exist).
  Status TakeOver(std::int64_t epoch) override;
  void Release() override;
  Status Launch(const LaunchRequest& request) override;
  void Stop(std::int64_t job, Seconds grace) override;
  void Kill(std::int64_t job) override;
  bool Reattach(const LaunchRequest& request) override;
  void FinishRecovery() override;
  std::vector<ExitReport> Poll() override;
  void StopAll() override;

 private:
  struct Proc {
    pid_t pid = 0;
    int rank = 0;
    bool exited = false;
    int status = 0;
    bool adopted = false;  // a previous daemon's child: followed by pid, status from its exit file
  };
  struct Job {
    int attempt = 1;
    // While staging: the request (its ranks start once every input is staged), the input being
    // copied and its process.
    std::optional<LaunchRequest> staging;
    std::size_t stage_index = 0;
    pid_t stage_pid = 0;
    std::vector<Proc> procs;
    bool stopping = false;
    TimePoint kill_at;  // while stopping: SIGKILL then
    std::string failure;
  };
  std::string JobDir(std::int64_t id) const;
  void Signal(Job& job, int sig);
  // Starts the stage command for input `job.stage_index` of `job.staging`.
  Status StartStage(std::int64_t id, Job& job);
  // Starts the ranks of `request` placed on this host into `job`; false when none is.
  Result<bool> StartRanks(const LaunchRequest& request, Job& job);
  // A staging job's next move once its stage process exited with `status`: the next input, the
  // ranks, or the job's failure (`report` set).
  void StageExited(std::int64_t id, Job& job, int status, std::optional<ExitReport>& report);
  // Whether rank process `p` of `id` has ended; sets its status (from waitpid, or for an adopted
  // one from its exit file).
  bool Reap(std::int64_t id, const Job& job, Proc& p);
  // Kills every process of job `id` that a pid file records, except those of attempt `keep`
  // (0: none kept), and waits until they are gone.
  void KillRecorded(std::int64_t id, int keep);

  LocalOptions options_;
  const Clock& clock_;
  std::map<std::int64_t, Job> jobs_;
};

}  // namespace baton::server
