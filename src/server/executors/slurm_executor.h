// SlurmExecutor: baton places, a real Slurm runs. Each placed job becomes one batch job —
// `sbatch --nodelist=<baton's nodes> -N <n> --ntasks=<ranks> --gres=gpu:<per node>` — whose
// script starts the ranks with `srun --distribution=arbitrary` over a hostfile in baton's rank
// order, so SLURM_PROCID is baton's rank, and exports the launch environment (RANK, WORLD_SIZE,
// LOCAL_RANK, LOCAL_WORLD_SIZE, NODE_RANK, MASTER_ADDR = the rank-0 node's address, MASTER_PORT,
// CUDA_VISIBLE_DEVICES = the rank's GPU among those Slurm granted, BATON_JOB_ID, BATON_HOSTFILE).
//
// One worker thread owns every Slurm command; the Executor methods only queue work and return,
// and Poll / PollNodes hand over what the worker saw, so a slow or dead slurmctld never stalls the
// scheduling loop. The worker follows baton's jobs with `squeue --json` and the nodes with
// `sinfo --json` every poll interval and maps Slurm's states to baton's:
//   COMPLETED -> kSucceeded; FAILED, TIMEOUT, OUT_OF_MEMORY, DEADLINE, CANCELLED (not by baton)
//   -> kFailed with Slurm's state, reason and exit code; anything ending after baton asked it to
//   stop -> kStopped; NODE_FAIL, BOOT_FAIL, PREEMPTED -> kLost (requeued by the controller), and
//   any bad ending on a node Slurm shows down -> held for the node report (below);
//   a node DOWN / NOT_RESPONDING / FAIL -> NodeReport kDown, DRAIN set by somebody else ->
//   kDraining; UNKNOWN (a restarted controller before the node registers) changes nothing.
//   Nodes baton itself drained (reason "baton: ...") are not reported back.
//
// Faults: when a command cannot reach the controller (or times out) the executor is unavailable:
// it logs, backs off exponentially (backoff_initial .. backoff_max) and retries the same work in
// order; nothing is dropped. A submission is never made twice: every launch has a unique batch
// job name "<prefix>-<job>-<launch>" (prefix "baton" by default), and after an ambiguous failure (a
// timeout, a lost reply) the worker looks for that name in squeue before submitting again; cancels
// and signals go by that name too, so they reach a submission whose id was never seen. A submission
// Slurm rejects (a bad node name, an impossible request) is reported as kFailed carrying sbatch's
// message. A job that ended badly while Slurm shows one of its nodes down is not reported: the
// node's failure reaches the controller (PollNodes), which requeues the job and Kills it here.
//
// Exactly once: a launch is submitted only when no earlier batch job of the same baton job is
// still pending, running or completing in Slurm (FenceEarlier cancels them and waits): Slurm
// reports a job ended only once its processes on every live node are gone.
//
// Reattach (daemon start-up) finds the newest batch job named "<prefix>-<job>-*" in squeue; one
// squeue serves all the jobs reattached at start-up. StopAll (daemon shutdown) leaves batch jobs
// running in Slurm for the next daemon to reattach; it only sends the cancels and drains that
// were still queued.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "core/clock.h"
#include "server/executors/command.h"
#include "server/executors/executor.h"

namespace baton::server {

struct SlurmOptions {
  std::string slurm_conf;  // SLURM_CONF for every command; empty: the daemon's environment
  std::string work_dir = "baton-slurm";  // batch scripts, hostfiles and job output
  std::string partition;                 // empty: the cluster's default partition
  // Batch jobs are named "<job_prefix>-<job>-<launch>"; daemons sharing one Slurm cluster need
  // distinct prefixes (job ids are unique per daemon store only).
  std::string job_prefix = "baton";
  Seconds poll_interval{1};
  Seconds command_timeout{20};
  Seconds backoff_initial{0.5};
  Seconds backoff_max{30};
  // Time limit given to sbatch: the job's estimated runtime times this factor (at least 10
  // minutes); jobs without an estimate get no --time (the partition's limit applies).
  double time_limit_factor = 2.0;
  // Before a launch is submitted, every earlier batch job of the same baton job (a superseded
  // attempt) is cancelled and the submission waits until Slurm shows it ended; past this long it
  // is retried with backoff, never submitted beside it.
  Seconds fence_timeout{60};
};

// What squeue --json and sinfo --json say, reduced to what the executor needs.
struct SlurmJob {
  std::int64_t id = 0;
  std::string name;
  std::string state;  // PENDING, RUNNING, COMPLETED, FAILED, NODE_FAIL, ...
  std::string reason;
  std::vector<std::string> nodes;
  int exit_code = 0;  // the batch script's exit status
  int exit_signal = 0;
};
struct SlurmNode {
  std::string name;
  std::string address;
  std::string state;               // idle, allocated, mixed, down, ...
  std::vector<std::string> flags;  // DRAIN, NOT_RESPONDING, ...
  std::string reason;
  int gpus = 0;  // from gres "gpu[:type]:N"
};

// The cluster a Slurm controller runs, for the scheduler: slurm.conf (node shapes) and the
// topology.conf beside it (the topology/tree switches), read as `baton topo` reads them. Errors
// name the file, line and field.
Result<topo::Cluster> ClusterFromSlurmConf(const std::string& slurm_conf);

// Errors name what is missing or malformed ("squeue --json: jobs[3].job_state: missing").
Result<std::vector<SlurmJob>> ParseSqueueJson(std::string_view text);
Result<std::vector<SlurmNode>> ParseSinfoJson(std::string_view text);

// Slurm's node condition as baton sees it (see the file comment); nullopt when Slurm has no news
// (UNKNOWN: a restarted controller before the node registers).
std::optional<topo::NodeHealth> NodeHealthFromSlurm(const SlurmNode& node);
bool IsTerminalSlurmState(std::string_view state);

// The batch script for a launch. `master_addr` is the rank-0 node's address (NodeAddr), and
// `hostfile` the path of the file listing one node per rank in rank order (see HostfileText).
// A launch with a leader epoch (executor.h) and a `work_dir` first checks WORK_DIR/leader.epoch:
// when a newer leader has taken over (SlurmExecutor::TakeOver) and did not adopt this batch job
// (WORK_DIR/NAME.adopted, written by Reattach), it starts nothing and exits 75 (the late sbatch of
// a deposed leader).
std::string BatchScript(const LaunchRequest& request, std::string_view master_addr,
                        std::string_view hostfile, std::string_view work_dir = {},
                        std::string_view name = {});
std::string HostfileText(const LaunchRequest& request);
// The sbatch argv for the batch job `name`, ending with the script path.
std::vector<std::string> SbatchArgs(const LaunchRequest& request, const SlurmOptions& options,
                                    std::string_view name, std::string_view script);

class SlurmExecutor final : public Executor {
 public:
  // Starts the worker. `clock` (not owned) must outlive the executor.
  SlurmExecutor(SlurmOptions options, const Clock& clock);
  ~SlurmExecutor() override;

  std::string_view name() const override { return "slurm"; }
  Status Launch(const LaunchRequest& request) override;
  void Stop(std::int64_t job, Seconds grace) override;
  void Kill(std::int64_t job) override;
  bool Reattach(const LaunchRequest& request) override;
  // Writes the epoch to WORK_DIR/leader.epoch, which every batch script of an older epoch reads
  // before it starts anything (BatchScript); Reattach marks what this leader adopts.
  Status TakeOver(std::int64_t epoch) override;
  std::vector<ExitReport> Poll() override;
  std::vector<NodeReport> PollNodes() override;
  void NodeConditionChanged(const std::string& node, topo::NodeHealth health,
                            const std::string& reason) override;
  void StopAll() override;

  // One squeue / sinfo round trip now, on the calling thread (the daemon's start-up reads the
  // nodes this way). kUnavailable when the controller cannot be reached.
  Result<std::vector<SlurmJob>> QueryJobs();
  Result<std::vector<SlurmNode>> QueryNodes();
  // Whether the last command reached the controller (for logs and tests).
  bool available() const;

 private:
  struct Tracked {
    LaunchRequest request;
    std::string name;  // "<prefix>-<job>-<launch>"; empty: reattached, not yet found in Slurm
    std::optional<std::int64_t> slurm_id;
    bool submitted = false;  // sbatch answered with an id (or the name was found in squeue)
    bool ambiguous = false;  // a submission may have happened: look before submitting again
    bool stop_requested = false;
    std::optional<TimePoint> held_since;  // died with a down node: waiting for the Kill
    int missing = 0;                      // polls that did not find a submitted job
    std::optional<TimePoint> kill_at;     // after a graceful stop's grace: scancel
  };
  struct Op {
    enum Kind { kSubmit, kSignal, kCancel, kDrain, kResume } kind;
    std::int64_t job = 0;
    std::string target;  // batch job name (kSignal, kCancel) or node (kDrain, kResume)
    std::string reason;
  };

  void Worker();
  // Runs one Slurm command; kUnavailable when the controller cannot be reached or the command
  // timed out. `*result` holds what it printed either way.
  Status Slurm(const std::vector<std::string>& argv, CommandResult* result);
  Status Submit(std::int64_t job);
  // Cancels every other live batch job of `job` (named "<prefix>-<job>-*" but not `name`) and
  // waits until Slurm shows them ended; kUnavailable past fence_timeout.
  Status FenceEarlier(std::int64_t job, const std::string& name);
  Status RunOp(const Op& op);
  Status Follow();
  std::string JobPrefix(std::int64_t job) const;  // "<prefix>-<job>-"
  std::int64_t epoch_ = 0;                        // TakeOver's; 0: no replicas

  const SlurmOptions options_;
  const Clock& clock_;
  std::map<std::string, std::string> env_;

  mutable std::mutex mu_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::map<std::int64_t, Tracked> jobs_;  // baton job -> its batch job
  std::deque<Op> ops_;
  std::vector<ExitReport> exits_;
  std::vector<NodeReport> node_reports_;
  std::map<std::string, topo::NodeHealth> node_health_;  // last reported
  std::map<std::string, std::string> node_address_;
  std::set<std::string> drained_by_us_;
  std::int64_t launches_ = 0;
  // squeue as Reattach last saw it (start-up reattaches many jobs; one query serves them).
  std::optional<std::pair<std::chrono::steady_clock::time_point, Result<std::vector<SlurmJob>>>>
      reattach_snapshot_;
  bool available_ = true;
  std::string last_error_;
  std::thread worker_;
};

}  // namespace baton::server
