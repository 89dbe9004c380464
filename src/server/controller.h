// Controller: the plug-in point for the scheduling loop inside the daemon. The HTTP layer records
// what users did in the JobStore and then tells the controller; the controller decides (through
// the scheduling core), acts (through executors) and records the outcome back in the store with
// JobStore::Transition / AppendEvent.
//
// Contract for implementations:
//  * Each call comes after the change it reports is durable in the store.
//  * Calls arrive on HTTP worker threads, possibly concurrently: implementations must be
//    thread-safe and must not block (enqueue and return); the client's response waits for them.
//  * Jobs that were already in the store when the daemon started are not announced: the
//    controller reads them (JobStore::List) when it starts.
#pragma once

#include "server/store/job_store.h"

namespace baton::server {

class Controller {
 public:
  virtual ~Controller() = default;

  // A new job was stored in kQueued (not called for idempotent replays).
  virtual void OnJobSubmitted(const JobRecord& job) = 0;

  // A user cancelled a job. `job.state` is kCancelled when it was still queued (nothing to stop),
  // or kCancelling when it was running: the controller must stop it and then move it to
  // kCancelled.
  virtual void OnJobCancelRequested(const JobRecord& job) = 0;

  // An admin cordoned, drained or uncordoned (kActive) a node.
  virtual void OnNodeAdminChanged(const NodeAdminState& node) = 0;
};

// Does nothing: jobs stay queued. The daemon's default until a scheduler is wired in.
class NullController final : public Controller {
 public:
  void OnJobSubmitted(const JobRecord&) override {}
  void OnJobCancelRequested(const JobRecord&) override {}
  void OnNodeAdminChanged(const NodeAdminState&) override {}
};

}  // namespace baton::server
