// Action: one algorithm step of a scheduling cycle (admit, allocate, backfill, preempt, ...),
// run in the configured order over the cycle's Session. Actions decide *how* to search; every
// policy question (order, fit, score, victims) goes to the plugins through the Session.
#pragma once

#include <memory>
#include <string_view>

#include "core/status.h"
#include "sched/framework/session.h"

namespace baton::sched {

class Action {
 public:
  virtual ~Action() = default;
  virtual std::string_view Name() const = 0;
  // Runs once per cycle. Must leave no Statement open and never throw.
  virtual void Execute(Session& session) = 0;
  // True when this action gives the first jobs blocked for lack of room a reservation that
  // later jobs may pass only on its terms (backfill). allocate then stops at the first blocked
  // job and leaves who may pass it to this action.
  virtual bool ReservesForBlockedJobs() const { return false; }
  // True when what this action does for a job depends only on the jobs ahead of it in the queue
  // order and on the cluster, never on the jobs behind it (under `config`). The what-if then
  // shares one projection of the queue among questions about jobs that sort last: each such job
  // changes nothing for the others. An action that does not say so is taken not to (always
  // correct, only slower).
  virtual bool IgnoresLaterJobs(const SchedulerConfig& /*config*/) const { return false; }
  // True when this action stops running jobs for pending ones. A what-if job that would outrank a
  // victim is then asked about alone (its projection is not shared).
  virtual bool Evicts() const { return false; }
};

// The built-in actions by name: admit, allocate, backfill, preempt, reclaim, resize (one file each
// in this folder; the table is action.cc). NotFound for others.
Result<std::unique_ptr<Action>> MakeAction(std::string_view name);

}  // namespace baton::sched
