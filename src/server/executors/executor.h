// Executor: where the daemon's controller starts and stops jobs once the scheduler has placed
// them. Implementations: DryRunExecutor (a simulated cluster in accelerated time, for demos and
// tests), LocalExecutor (real processes on this machine), SlurmExecutor (batch jobs on a real
// Slurm cluster) and KubernetesExecutor (pods bound on a Kubernetes cluster).
//
// Contract:
//  * Threading: every method is called from the controller thread only; implementations need no
//    locking of their own unless they run threads.
//  * Launch starts every rank of a job (or fails, starting nothing that stays alive). The job is
//    then running until Poll reports its exit; exactly one ExitReport per launched (or reattached)
//    job.
//  * Stop asks a running job to stop, giving its ranks `grace` to exit before they are killed.
//    Its exit is still reported by Poll (with kStopped). Stop of an unknown job does nothing.
//  * Kill ends a job at once (no grace) and forgets it: no ExitReport follows. For jobs the
//    scheduler has already requeued or moved. Kill of an unknown job does nothing.
//  * Reattach is called at daemon start-up for jobs the store says are running, with the attempt
//    the store says is current: true means the executor still runs (or can still account for)
//    that attempt, and will report its exit; false means it is gone and the controller requeues
//    the job. FinishRecovery follows the last Reattach, before anything is launched: an executor
//    that can find work of a previous daemon (the local executor's pid files) ends every attempt
//    it was not asked to adopt, and waits until it has ended, so that nothing runs twice.
//  * Exactly once: an executor never leaves an attempt running beside a newer attempt of the same
//    job. Launch of attempt n ends any earlier attempt of the job it still knows of first.
//  * Poll never blocks; it returns the exits seen since the last call. PollNodes likewise returns
//    the node conditions the executor's resource manager reported since the last call (only
//    executors with one, such as Slurm); the controller reads nodes before exits, so a job that
//    died with its node is requeued by the node's failure rather than failed.
//  * Replicas (several daemons on one store, server/store/leader_lease.h): a daemon that becomes
//    the leader calls TakeOver with its lease epoch before its first Reattach, and every
//    LaunchRequest carries that epoch. An executor that can fence refuses, from then on, any
//    launch of an older epoch (a deposed leader that has not noticed yet), so the new leader's
//    adoption sees every attempt that will ever run. Release (instead of StopAll) ends a leader's
//    term: it forgets its jobs without stopping them, for the next leader to adopt.
//  * PollSubmissions: jobs the executor's resource manager asks baton to run (Kubernetes: gangs
//    of pods that name baton as their scheduler). The controller checks and stores each one as it
//    does an API submission (the job spec's validation, admission, the tenancy policy; the store
//    under the submission's key as idempotency key, so a key stored before a restart names its
//    job again) and answers with Submitted: the job's id, or why it was refused (kInvalidArgument)
//    or could not be stored (kUnavailable: the executor may ask again). Never blocks.
//  * NodeConditionChanged tells the executor baton's own verdict on a node (admin cordon/drain,
//    health rules); executors with a resource manager mirror it there (Slurm: drain / resume).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/clock.h"
#include "core/status.h"
#include "core/units.h"
#include "topology/cluster.h"

namespace baton::server {

// One rank of a job: where it runs and which GPU it gets.
struct RankAssignment {
  int rank = 0;
  std::string node;
  int node_rank = 0;   // index of `node` among the job's nodes
  int local_rank = 0;  // index of this rank on its node
  int gpu = 0;         // CUDA index on the node; -1: no GPU (a CPU-only job)
};

// One input to bring to the job's site before its ranks start (from the job spec's `stage`,
// which the federation broker fills): a dataset or a checkpoint held at site `from`.
struct StageRequest {
  std::string kind;  // "dataset" or "checkpoint"
  std::string name;
  std::string from;
  double size_gib = 0;
};

struct LaunchRequest {
  std::int64_t job = 0;
  // The store's attempt number (BATON_ATTEMPT): 1 for the first launch, +1 for each relaunch.
  int attempt = 1;
  // BATON_CHECKPOINT_DIR: the job's checkpoint directory, the same for every attempt (absolute;
  // the executor creates it). Empty: the job gets none.
  std::string checkpoint_dir;
  std::string name;
  std::string tenant;
  std::vector<std::string> command;   // argv; may be empty
  std::vector<RankAssignment> ranks;  // in rank order
  std::string master_addr;            // the node of rank 0 (as the cluster names it)
  int master_port = 29500;            // chosen free on that node among baton's running jobs
  Seconds estimated_runtime;          // 0: unknown
  TimePoint started_at;               // when the controller placed it
  // A share of its one GPU in thousandths (0: whole GPUs), and each rank's host resources.
  int gpu_milli = 0;
  std::int64_t cpu_milli = 0;
  std::int64_t memory_mib = 0;
  // Inputs to stage first, in order (the local executor's stage command; others ignore it).
  std::vector<StageRequest> stage;
  // The leader lease epoch of the daemon launching it (TakeOver); 0: a daemon without replicas.
  std::int64_t epoch = 0;
};

// kLost: the job ended through no fault of its own (a node failed under it, the resource manager
// preempted it); the controller requeues it.
enum class ExitKind : std::uint8_t { kSucceeded, kFailed, kStopped, kLost };

struct ExitReport {
  std::int64_t job = 0;
  ExitKind kind = ExitKind::kSucceeded;
  std::string message;  // "exit code 3 on rank 1", "stopped"
};

// A node's condition as the executor's resource manager sees it (Slurm: DOWN or NOT_RESPONDING is
// kDown, DRAIN set by somebody other than baton is kDraining), sent when it changes.
struct NodeReport {
  std::string node;
  topo::NodeHealth health = topo::NodeHealth::kHealthy;
  std::string reason;
};

// A job the resource manager asks for (PollSubmissions).
struct Submission {
  std::string key;        // unique per job asked for; the store's idempotency key (<= 255 chars)
  std::string spec_json;  // a job spec as the API takes it (server/http/job_spec.h), tenant set
};

class Executor {
 public:
  virtual ~Executor() = default;
  virtual std::string_view name() const = 0;
  // Wall-clock seconds per second of a job's own time: 1 for real executors; 1/speedup for the
  // dry-run executor, whose jobs run `speedup` times faster than their estimated runtime. The
  // controller hands the scheduler runtimes in wall time, so reservations, backfill and estimated
  // starts match what the executor will really do.
  virtual double TimeScale() const { return 1.0; }
  // True when the ranks of every node run on this one machine (the local executor standing in
  // for a whole cluster): rendezvous ports must then differ across all running jobs, not only
  // among the jobs whose rank 0 shares a node.
  virtual bool OneHost() const { return false; }
  virtual Status Launch(const LaunchRequest& request) = 0;
  virtual void Stop(std::int64_t job, Seconds grace) = 0;
  virtual void Kill(std::int64_t job) = 0;
  virtual bool Reattach(const LaunchRequest& request) = 0;
  virtual void FinishRecovery() {}
  // This daemon leads at `epoch` from now on. kFailedPrecondition when the executor has already
  // seen a newer epoch (this daemon is the deposed one). Executors that cannot fence accept.
  virtual Status TakeOver(std::int64_t /*epoch*/) { return Status::Ok(); }
  virtual std::vector<ExitReport> Poll() = 0;
  virtual std::vector<NodeReport> PollNodes() { return {}; }
  virtual std::vector<Submission> PollSubmissions() { return {}; }
  virtual void Submitted(const std::string& /*key*/, const Result<std::int64_t>& /*job*/) {}
  // A queued job's reason for waiting changed (the scheduler's words, as in the job's "waiting"
  // event). Executors whose resource manager shows jobs to its users pass it on there
  // (Kubernetes: an Event on the gang's first pod). Never blocks.
  virtual void JobWaiting(std::int64_t /*job*/, const std::string& /*why*/) {}
  virtual void NodeConditionChanged(const std::string& /*node*/, topo::NodeHealth /*health*/,
                                    const std::string& /*reason*/) {}
  // Stops everything still running (daemon shutdown in tests); jobs are not reported.
  virtual void StopAll() = 0;
  // Forgets every job without stopping it: this daemon's leadership ended and the next leader
  // adopts them. Executors whose jobs outlive the daemon anyway may keep StopAll's behaviour.
  virtual void Release() { StopAll(); }
};

}  // namespace baton::server
