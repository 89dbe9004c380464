// SchedulingController: a job's attempts, from the cycle's decisions to launches, exits,
// checkpoints and requeues.
#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <limits>
#include <set>

#include "core/check.h"
#include "core/log.h"
#include "core/strings.h"
#include "sched/framework/presets.h"
#include "sched/history/history.h"
#include "server/http/admission.h"
#include "server/http/job_spec.h"
#include "server/scheduling_controller_internal.h"
#include "topology/io/cluster_yaml.h"
#include "topology/summary.h"

namespace baton::server {

LaunchRequest SchedulingController::MakeLaunchRequest(JobId id, const sched::GangJob& spec,
                                                      const sched::Placement& placement,
                                                      TimePoint start) const {
  const topo::Cluster& c = cluster();
  LaunchRequest req;
  req.job = id;
  req.epoch = leader_epoch_;
  req.name = spec.name;
  req.tenant = spec.tenant;
  if (auto it = commands_.find(id); it != commands_.end()) req.command = it->second;
  if (auto it = stages_.find(id); it != stages_.end()) req.stage = it->second;
  // The scheduler holds runtimes in wall time (GangJobFromSpec); the executor wants the job's own.
  req.estimated_runtime = spec.estimated_runtime / executor_->TimeScale();
  req.started_at = start;
  if (auto it = attempts_.find(id); it != attempts_.end()) {
    req.attempt = it->second.number;
    req.master_port = it->second.master_port;
  }
  req.checkpoint_dir = checkpoint_watcher_.JobDir(id);
  int rank = 0;
  for (std::size_t n = 0; n < placement.nodes.size(); ++n) {
    int local = 0;
    for (int gpu : MaskBits(placement.nodes[n].mask)) {
      req.ranks.push_back(
          {rank++, c.node(placement.nodes[n].node).name, static_cast<int>(n), local++, gpu});
    }
  }
  if (sched::CpuOnly(spec) && !placement.nodes.empty()) {  // one rank, no GPU
    req.ranks.push_back({0, c.node(placement.nodes[0].node).name, 0, 0, -1});
  }
  req.gpu_milli = spec.gpu_milli;
  req.cpu_milli = spec.cpu_milli;
  req.memory_mib = spec.memory_mib;
  if (!req.ranks.empty()) req.master_addr = req.ranks.front().node;
  return req;
}

bool SchedulingController::HoldsGpus(JobId id) const {
  const sched::JobInfo* info = scheduler_->job(SchedId(id));
  return info != nullptr &&
         (info->phase == sched::JobPhase::kRunning || info->phase == sched::JobPhase::kTerminating);
}

int SchedulingController::PickMasterPort(const std::string& node, int previous) {
  std::set<int> used;
  for (const auto& [job, a] : attempts_) {
    if ((a.master_node == node || executor_->OneHost()) && HoldsGpus(job)) {
      used.insert(a.master_port);
    }
  }
  // A relaunch (a replacement, a resize) moves on from its killed attempt's port rather than
  // taking the lowest free one: the killed rank 0's connections linger in TIME_WAIT for up to a
  // minute, and a rendezvous server binding a port they hold fails (EADDRINUSE; seen with gloo's
  // TCPStore when an elastic job was relaunched on the same node).
  const int base = options_.master_port_base;
  const int start = previous >= base && previous < base + 1000 ? previous + 1 - base : 0;
  for (int i = 0; i < 1000; ++i) {
    const int port = base + (start + i) % 1000;
    if (!used.contains(port)) return port;
  }
  // A thousand running jobs with rank 0 on one node: share the first port (never seen in
  // practice; the ranks would then fail to rendezvous and be retried).
  LOG_WARN("node {}: no free MASTER_PORT in [{}, {})", node, options_.master_port_base,
           options_.master_port_base + 1000);
  return options_.master_port_base;
}

namespace {

// "45 s", "12 min", "3.5 h".
std::string Span(Seconds s) {
  double v = std::max(0.0, s.value());
  if (v < 120) return fmt::format("{:.0f} s", v);
  if (v < 7200) return fmt::format("{:.0f} min", v / 60);
  return fmt::format("{:.1f} h", v / 3600);
}

}  // namespace

std::string SchedulingController::ResumeNote(JobId id, TimePoint now) const {
  auto a = attempts_.find(id);
  auto c = checkpoints_.find(id);
  if (c != checkpoints_.end()) {
    // The current attempt resumed from an earlier attempt's checkpoint and wrote none of its
    // own: all it did since it started is lost.
    TimePoint since = a != attempts_.end() && c->second.attempt < a->second.number
                          ? a->second.started
                          : c->second.time;
    return fmt::format("resumes from step {} (checkpointed by attempt {}); {} of work lost",
                       c->second.step, c->second.attempt, Span(now - since));
  }
  if (a == attempts_.end()) return "no checkpoint reported; starts over";
  return fmt::format("no checkpoint reported; starts over; {} of work lost",
                     Span(now - a->second.started));
}

void SchedulingController::PollCheckpoints(TimePoint now) {
  for (const auto& [id, attempt] : attempts_) {
    if (HoldsGpus(id)) PollCheckpoint(id, attempt.number, now, /*tell_scheduler=*/true);
  }
}

void SchedulingController::PollCheckpoint(JobId id, int attempt, TimePoint now,
                                          bool tell_scheduler) {
  std::optional<Result<CheckpointMarker>> seen = checkpoint_watcher_.Poll(id);
  if (!seen) return;
  if (!seen->ok()) {
    LOG_WARN("job {}: checkpoint marker refused: {}", id, seen->status().ToString());
    Record(store_->AppendEvent(id, "checkpoint_refused", seen->status().message()), id,
           "checkpoint");
    return;
  }
  const CheckpointMarker& m = **seen;
  if (m.attempt != attempt) {
    // A superseded attempt still writing (or a marker from before a relaunch): never news.
    Record(store_->AppendEvent(id, "checkpoint_ignored",
                               fmt::format("step {} reported by attempt {}, but attempt {} is "
                                           "current",
                                           m.step, m.attempt, attempt)),
           id, "checkpoint");
    return;
  }
  CheckpointRecord record{m.attempt, m.step, now, m.bytes};
  Result<bool> recorded = store_->RecordCheckpoint(id, record);
  if (!recorded.ok()) {
    Record(recorded.status(), id, "checkpoint");
    return;
  }
  if (!*recorded) return;  // the store fenced it (not newer, or no longer current)
  checkpoints_[id] = record;
  if (tell_scheduler) events_.push_back(sched::Event::Checkpoint(SchedId(id)));
}

void SchedulingController::ForgetJob(JobId id) {
  leases_.erase(id);
  commands_.erase(id);
  stages_.erase(id);
  attempts_.erase(id);
  checkpoints_.erase(id);
  checkpoint_watcher_.Forget(id);
}

void SchedulingController::Launch(JobId id, const sched::Placement& placement, TimePoint now) {
  const sched::JobInfo* info = scheduler_->job(SchedId(id));
  if (info == nullptr) return;
  Status s = executor_->Launch(MakeLaunchRequest(id, info->spec, placement, now));
  if (s.ok()) return;
  LOG_WARN("job {}: launch failed: {}", id, s.ToString());
  metrics_->failures.WithLabels({"launch"}).Increment();
  Record(store_
             ->Transition(id, {{JobState::kRunning, JobState::kCancelling},
                               JobState::kFailed,
                               "failed",
                               "launch failed: " + s.message()})
             .status(),
         id, "fail");
  ForgetJob(id);
  events_.push_back(sched::Event::Cancel(SchedId(id)));
}

void SchedulingController::HandleExit(const ExitReport& exit) {
  JobId id = exit.job;
  sched::JobId sid = SchedId(id);
  // A fenced attempt (its lease lapsed) that ended as it was killed: its end does not count.
  if (auto l = leases_.find(id); l != leases_.end() && l->second.held) return;
  if (cancelling_.erase(id) > 0) {
    Record(store_
               ->Transition(
                   id, {{JobState::kCancelling}, JobState::kCancelled, "cancelled", exit.message})
               .status(),
           id, "cancel");
    preempted_by_.erase(id);
    ForgetJob(id);
    events_.push_back(sched::Event::Cancel(sid));
    return;
  }
  if (exit.kind == ExitKind::kLost && !preempted_by_.contains(id)) {
    const sched::JobInfo* info = scheduler_->job(sid);
    if (info == nullptr || info->phase == sched::JobPhase::kPending) return;  // already requeued
    int lost = ++lost_[id];
    if (lost <= options_.max_lost_requeues) {
      Result<JobRecord> r = store_->Transition(
          id, {{JobState::kRunning},
               JobState::kQueued,
               "requeued",
               fmt::format("{} (lost {} of at most {} times); back in the queue; {}", exit.message,
                           lost, options_.max_lost_requeues, ResumeNote(id, clock_.Now()))});
      Record(r.status(), id, "requeue");
      metrics_->requeues.WithLabels({"lost"}).Increment();
      events_.push_back(sched::Event::Finish(sid));  // frees its GPUs and forgets it ...
      if (r.ok()) Resubmit(*r);  // ... and this hands it back as a new submission
      return;
    }
  }
  if (auto it = preempted_by_.find(id); it != preempted_by_.end()) {
    JobId by = it->second;
    preempted_by_.erase(it);
    if (exit.kind == ExitKind::kStopped) {
      Result<JobRecord> r =
          store_->Transition(id, {{JobState::kRunning},
                                  JobState::kQueued,
                                  "requeued",
                                  fmt::format("stopped for job {}; back in the queue; {}", by,
                                              ResumeNote(id, clock_.Now()))});
      Record(r.status(), id, "requeue");
      metrics_->requeues.WithLabels({"preempted"}).Increment();
      const sched::JobInfo* info = scheduler_->job(sid);
      if (info != nullptr && info->phase == sched::JobPhase::kTerminating) {
        events_.push_back(sched::Event::Finish(sid));  // frees its GPUs; the scheduler requeues
      } else if (info == nullptr && r.ok()) {
        // The scheduler dropped it (a bind that raced with the stop): hand it back.
        Resubmit(*r);
      }
      return;
    }
    // It finished on its own during its grace period: it is done, not requeued.
    events_.push_back(sched::Event::Cancel(sid));
  } else {
    events_.push_back(sched::Event::Finish(sid));
  }
  ForgetJob(id);
  lost_.erase(id);
  bool ok = exit.kind == ExitKind::kSucceeded;
  if (!ok) metrics_->failures.WithLabels({"exit"}).Increment();
  Record(store_
             ->Transition(id, {{JobState::kRunning},
                               ok ? JobState::kSucceeded : JobState::kFailed,
                               ok ? "finished" : "failed",
                               exit.message})
             .status(),
         id, "finish");
}

SchedulingController::PlacementOutcome SchedulingController::RecordPlacement(
    JobId id, std::string_view kind, std::string message, const sched::Placement& placement,
    bool new_attempt, TimePoint now, std::vector<std::string> placed_on, Status* refusal) {
  StateChange change{
      {JobState::kRunning}, JobState::kRunning, std::string(kind), std::move(message)};
  change.placement = ToStoredPlacement(cluster(), placement);
  change.schedulable_nodes = std::move(placed_on);
  std::string master =
      placement.nodes.empty() ? "" : cluster().node(placement.nodes.front().node).name;
  int port = 0;
  if (new_attempt) {
    change.new_attempt = true;
    auto old = attempts_.find(id);
    const int previous = old != attempts_.end() ? old->second.master_port : 0;
    attempts_.erase(id);
    port = PickMasterPort(master, previous);
    change.master_port = port;
  }
  Result<JobRecord> r = store_->Transition(id, change);
  if (r.ok()) {
    if (new_attempt) attempts_[id] = {r->attempts, now, master, port};
    return PlacementOutcome::kRecorded;
  }
  Result<JobRecord> stored = store_->Get(id);
  if (r.status().code() == StatusCode::kFailedPrecondition && stored.ok() &&
      stored->state == JobState::kRunning) {
    // Still running: a node it was to take was drained or cordoned after this cycle's snapshot.
    *refusal = r.status();
    return PlacementOutcome::kNodeRefused;
  }
  if (!stored.ok() || stored->state == JobState::kRunning) {
    LOG_WARN("job {}: {}: {}", id, kind, r.status().ToString());
  }
  // Cancelled or finished meanwhile: its end is on its way to the scheduler.
  return PlacementOutcome::kJobEnded;
}

void SchedulingController::RequeueRefused(JobId id, const Status& refusal, TimePoint now) {
  LOG_INFO("job {}: not restarted: {}", id, refusal.message());
  AdoptStoredCordons();
  RequeueNow(id, "node", "requeued",
             "not restarted: " + refusal.message() + "; " + ResumeNote(id, now));
}

void SchedulingController::RequeueNow(JobId id, const std::string& reason, const std::string& kind,
                                      const std::string& message) {
  metrics_->requeues.WithLabels({reason}).Increment();
  executor_->Kill(id);
  preempted_by_.erase(id);
  attempts_.erase(id);
  events_.push_back(sched::Event::Finish(SchedId(id)));  // frees its GPUs
  Result<JobRecord> r =
      store_->Transition(id, {{JobState::kRunning}, JobState::kQueued, kind, message});
  if (!r.ok()) {
    Record(r.status(), id, "requeue");
    return;
  }
  Resubmit(*r);
}

void SchedulingController::ApplyDecisions(const sched::Decisions& d, TimePoint now) {
  const topo::Cluster& c = cluster();
  auto waiting_text = [](const sched::Waiting& w) {
    return w.status.plugin().empty() ? w.status.reason()
                                     : w.status.plugin() + ": " + w.status.reason();
  };
  for (const sched::Waiting& w : d.waiting) waiting_now_[StoreId(w.job)] = waiting_text(w);
  // The snapshot goes out before the store commits the cycle's transitions, so that a client
  // that sees a job "running" (the store) also sees its placement (the snapshot).
  PublishSnapshot();
  // Requeues first: the scheduler may already have placed a requeued job again in this cycle.
  for (const sched::Requeue& q : d.requeues) {
    JobId id = StoreId(q.job);
    metrics_->requeues.WithLabels({"node"}).Increment();
    executor_->Kill(id);
    preempted_by_.erase(id);
    StateChange change{
        {JobState::kRunning}, JobState::kQueued, "requeued", q.reason + "; " + ResumeNote(id, now)};
    if (const sched::JobInfo* info = scheduler_->job(q.job)) {
      std::vector<std::string> names;
      for (topo::NodeId n : info->bad_nodes) names.push_back(c.node(n).name);
      change.bad_nodes = std::move(names);
    }
    Record(store_->Transition(id, change).status(), id, "requeue");
  }
  // Resizes before binds: a shrink frees the GPUs a bind of this cycle may take, so the old
  // attempt is killed before anything launches there. A resize restarts the job: a new attempt
  // at the new size resumes from the last checkpoint (the same contract as a replacement).
  for (const sched::Resize& r : d.resizes) {
    JobId id = StoreId(r.job);
    int before = 0;
    std::set<std::string> had;
    if (Result<JobRecord> was = store_->Get(id); was.ok()) {
      for (const PlacedNode& n : was->placement) {
        before += std::popcount(n.mask);
        had.insert(n.node);
      }
    }
    // The nodes it grows onto must still be schedulable when the store records it.
    std::vector<std::string> added;
    for (const PlacedNode& n : ToStoredPlacement(c, r.placement)) {
      if (!had.contains(n.node)) added.push_back(n.node);
    }
    Status refusal;
    PlacementOutcome recorded = RecordPlacement(
        id, "resized",
        fmt::format("resized from {} to {} GPUs; restarted: {} {}", before, r.placement.gpus(),
                    ResumeNote(id, now), AllocTag(c, r.placement)),
        r.placement, /*new_attempt=*/true, now, std::move(added), &refusal);
    if (recorded == PlacementOutcome::kNodeRefused) {
      RequeueRefused(id, refusal, now);
      continue;
    }
    executor_->Kill(id);  // the attempt at the old size
    if (recorded == PlacementOutcome::kJobEnded) continue;
    metrics_->resizes.WithLabels({before < r.placement.gpus() ? "grow" : "shrink"}).Increment();
    Launch(id, r.placement, now);
  }
  for (const sched::Bind& b : d.binds) {
    JobId id = StoreId(b.job);
    std::string level(topo::LevelName(b.placement.span));
    std::string why =
        b.preferred_met
            ? "it was the best-scoring gang placement that fits"
            : "no free placement met the preferred topology level; this was the best that fits";
    const sched::JobInfo* info = scheduler_->job(b.job);
    std::string planned = info != nullptr ? PlannerNote(info->spec, b.placement) : "";
    std::string message =
        fmt::format("placed on {} ({} GPUs) at level {} because {}{} {}", NodeList(c, b.placement),
                    b.placement.gpus(), level, why, planned, AllocTag(c, b.placement));
    StateChange change{{JobState::kQueued}, JobState::kRunning, "placed", message};
    change.placement = ToStoredPlacement(c, b.placement);
    std::string master = b.placement.nodes.empty() ? "" : c.node(b.placement.nodes[0].node).name;
    attempts_.erase(id);
    change.master_port = PickMasterPort(master);
    for (const PlacedNode& n : *change.placement) change.schedulable_nodes.push_back(n.node);
    Result<JobRecord> r = store_->Transition(id, change);
    waiting_reason_.erase(id);
    if (r.ok()) attempts_[id] = {r->attempts, now, master, *change.master_port};
    if (!r.ok() && r.status().code() == StatusCode::kFailedPrecondition) {
      // Still queued: a node of the placement was cordoned or drained after this cycle's
      // snapshot (the store checks in the bind's own transaction). Never launched: the GPUs go
      // back and the job waits for the next cycle, which has adopted the store's cordons.
      Result<JobRecord> now_stored = store_->Get(id);
      if (now_stored.ok() && now_stored->state == JobState::kQueued) {
        LOG_INFO("job {}: not launched: {}", id, r.status().message());
        AdoptStoredCordons();
        events_.push_back(sched::Event::Finish(b.job));
        Resubmit(*now_stored);
        continue;
      }
    }
    if (!r.ok()) {
      // Cancelled between the submission and this cycle: give the GPUs back.
      LOG_INFO("job {}: not launched: {}", id, r.status().message());
      ForgetJob(id);
      events_.push_back(sched::Event::Cancel(b.job));
      continue;
    }
    metrics_->placements.WithLabels({level}).Increment();
    Launch(id, b.placement, now);
  }
  for (const sched::Preemption& p : d.preemptions) {
    JobId victim = StoreId(p.victim), by = StoreId(p.for_job);
    metrics_->preemptions.WithLabels({}).Increment();
    preempted_by_[victim] = by;
    Record(store_->AppendEvent(victim, "preempted",
                               fmt::format("preempted by job {}; stops within {:.0f} s grace", by,
                                           (p.release_at - now).value())),
           victim, "preempt");
    executor_->Stop(victim, std::max(Seconds(0), p.release_at - now));
  }
  for (const sched::Rejection& r : d.rejections) {
    JobId id = StoreId(r.job);
    metrics_->failures.WithLabels({"rejected"}).Increment();
    ForgetJob(id);
    // A job the scheduler gives up on after it ran (its requeue can never be placed) may still
    // be running in the executor: end it there too.
    executor_->Kill(id);
    // A job that ran and failed past its retries failed; anything else was refused.
    const bool failed = r.kind == sched::RejectionKind::kRetriesExhausted;
    Record(store_
               ->Transition(id, {{JobState::kQueued, JobState::kRunning},
                                 JobState::kFailed,
                                 failed ? "failed" : "rejected",
                                 fmt::format("{} by {}: {}", failed ? "failed" : "rejected",
                                             r.plugin, r.reason)})
               .status(),
           id, "reject");
  }
  for (const sched::Replacement& r : d.replacements) {
    JobId id = StoreId(r.job);
    Status refusal;
    PlacementOutcome recorded = RecordPlacement(
        id, "placed",
        fmt::format("node {} replaced by {}; restarted: {} {}", c.node(r.old_node).name,
                    c.node(r.new_node).name, ResumeNote(id, now), AllocTag(c, r.placement)),
        r.placement, /*new_attempt=*/true, now, {c.node(r.new_node).name}, &refusal);
    if (recorded == PlacementOutcome::kNodeRefused) {
      RequeueRefused(id, refusal, now);
      continue;
    }
    executor_->Kill(id);  // the attempt that lost its node
    if (recorded == PlacementOutcome::kJobEnded) continue;
    Launch(id, r.placement, now);
  }
  // Every waiting job's reason is in the snapshot (the API shows it); only the first few changes
  // per cycle become durable events, so that a deep queue does not turn each cycle into
  // hundreds of synchronous commits.
  int recorded = 0;
  for (const sched::Waiting& w : d.waiting) {
    JobId id = StoreId(w.job);
    std::string reason = waiting_text(w);
    auto& last = waiting_reason_[id];
    if (last == reason || recorded >= options_.max_waiting_events_per_cycle) continue;
    last = reason;
    ++recorded;
    Record(store_->AppendEvent(id, "waiting", reason), id, "waiting");
    executor_->JobWaiting(id, reason);
  }
  for (const sched::Timing& t : d.timings) {
    metrics_->step.WithLabels({t.name}).Observe(t.seconds);
  }
}

}  // namespace baton::server
