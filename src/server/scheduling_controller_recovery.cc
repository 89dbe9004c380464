// SchedulingController::Reload: after a restart, the store's jobs go back to the scheduler and the
// executor (queued ones resubmitted, running ones adopted or requeued).
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

Status SchedulingController::Reload() {
  TimePoint now = clock_.Now();
  ASSIGN_OR_RETURN(std::vector<NodeAdminState> admin, store_->ListNodeAdmin());
  for (const NodeAdminState& a : admin) {
    AdminChanged in{a};
    Handle(in);
  }
  // Health verdicts of the previous run hold until the node proves clean (as many consecutive
  // clean samples as the slowest-clearing of its rules needs; a sticky rule, or one this
  // configuration no longer has, waits for an uncordon).
  ASSIGN_OR_RETURN(std::vector<NodeHealthState> verdicts, store_->ListNodeHealth());
  for (const NodeHealthState& v : verdicts) {
    auto node = node_by_name_.find(v.node);
    std::optional<topo::NodeHealth> health;
    for (topo::NodeHealth h :
         {topo::NodeHealth::kSuspect, topo::NodeHealth::kDraining, topo::NodeHealth::kDown}) {
      if (topo::NodeHealthName(h) == v.condition) health = h;
    }
    if (node == node_by_name_.end() || !health) {
      LOG_WARN("stored health verdict for {} ({}) ignored: unknown node or condition", v.node,
               v.condition);
      continue;
    }
    RestoredVerdict r{*health, v.rules, 0, 0};
    bool sticky = v.rules.empty();
    for (const std::string& name : v.rules) {
      auto rule = std::find_if(options_.health_rules.begin(), options_.health_rules.end(),
                               [&](const health::Rule& x) { return x.name == name; });
      if (rule == options_.health_rules.end() || rule->clear_samples == 0) {
        sticky = true;
      } else {
        r.clean_needed = std::max(r.clean_needed, rule->clear_samples);
      }
    }
    if (sticky) r.clean_needed = 0;
    restored_health_[node->second] = std::move(r);
    {
      std::lock_guard lock(snapshot_mu_);
      active_rules_[node->second] = v.rules;
    }
    SetNodeHealth(node->second);
  }
  int queued = 0, adopted = 0, requeued = 0;
  // Jobs the running pass put back in the queue: already submitted to the scheduler, so the
  // queued pass (which lists them again) must not submit them twice.
  std::set<JobId> resubmitted;
  for (JobState state : {JobState::kRunning, JobState::kCancelling, JobState::kQueued}) {
    JobFilter filter;
    filter.state = state;
    filter.limit = 1000;
    while (true) {
      ASSIGN_OR_RETURN(JobPage page, store_->List(filter));
      for (const JobRecord& job : page.jobs) {
        Result<JobSpec> js = ParseJobSpec(job.spec_json, BodyFormat::kJson);
        Result<sched::GangJob> spec =
            js.ok() ? GangJobFromSpec(job, *js, executor_->TimeScale(), &cluster()) : js.status();
        if (!spec.ok()) {
          FailUnschedulable(job.id, state, spec.status().message());
          continue;
        }
        if (state == JobState::kQueued) {
          if (resubmitted.contains(job.id)) continue;
          if (job.checkpoint) checkpoints_[job.id] = *job.checkpoint;
          commands_[job.id] = {};
          Submitted in{job, *std::move(js)};
          Handle(in);
          ++queued;
          continue;
        }
        // Running (or being cancelled): where it was placed is a column of its own. Only a
        // job placed by a version before that column (schema v3) has its placement in the
        // "[alloc ...]" tag of its last "placed" event, read once here for the upgrade.
        std::optional<sched::Placement> placement;
        TimePoint placed_at = job.updated_at;
        if (!job.placement.empty()) {
          Result<sched::Placement> p = FromStoredPlacement(cluster(), job.placement);
          if (p.ok()) {
            placement = *p;
          } else {
            LOG_WARN("job {}: stored placement: {}", job.id, p.status().ToString());
          }
        } else {
          ASSIGN_OR_RETURN(std::vector<JobEvent> history, store_->Events(job.id));
          for (auto it = history.rbegin(); it != history.rend(); ++it) {
            if (it->kind != "placed") continue;
            Result<sched::Placement> p = ParseAllocTag(cluster(), it->message);
            if (p.ok()) {
              placement = *p;
              placed_at = it->time;
            }
            break;
          }
        }
        // A running job keeps running without its plan if the planner no longer takes it.
        if (Status planned = AttachPlan(*js, *spec); !planned.ok()) {
          Record(store_->AppendEvent(
                     job.id, "planner",
                     "scheduled without its plan after a daemon restart: " + planned.message()),
                 job.id, "plan");
        }
        std::vector<std::string> command = js->command;
        if (!js->stage.empty()) stages_[job.id] = StageRequests(*js);
        if (job.checkpoint) checkpoints_[job.id] = *job.checkpoint;
        if (state == JobState::kRunning && js->federation && js->federation->lease_s > 0) {
          // Leased by a broker that may have moved it while this daemon was down: not adopted
          // (FinishRecovery ends what still runs), but held until the broker renews the lease.
          Result<JobRecord> r = store_->Transition(
              job.id, {{JobState::kRunning},
                       JobState::kQueued,
                       "fenced",
                       fmt::format("a daemon restart: its federation lease is not renewed yet; "
                                   "attempt {} stopped, held until the broker renews it; {}",
                                   job.attempts, ResumeNote(job.id, now))});
          Record(r.status(), job.id, "fence");
          if (r.ok()) {
            resubmitted.insert(job.id);
            Submitted in{*r, *js};
            Handle(in);  // held: no lease yet
            ++requeued;
          }
          continue;
        }
        bool alive = false;
        if (placement && !placement->nodes.empty()) {
          // The attempt the store calls current, on the port it was launched with (a job
          // launched before schema v5 had base + id % 1000).
          std::string master = cluster().node(placement->nodes.front().node).name;
          int port = job.master_port > 0
                         ? job.master_port
                         : options_.master_port_base + static_cast<int>(job.id % 1000);
          attempts_[job.id] = {std::max(job.attempts, 1), placed_at, master, port};
          // A checkpoint the job made while no daemon was looking counts: where it resumes.
          PollCheckpoint(job.id, std::max(job.attempts, 1), now, /*tell_scheduler=*/false);
          LaunchRequest req = MakeLaunchRequest(job.id, *spec, *placement, placed_at);
          req.command = command;
          alive = executor_->Reattach(req);
        }
        if (state == JobState::kCancelling) {
          if (alive) {
            executor_->Stop(job.id, spec->grace_period);
            cancelling_.insert(job.id);
            events_.push_back(sched::Event::Adopt(*spec, *placement, placed_at));
            commands_[job.id] = command;
          } else {
            Record(store_
                       ->Transition(job.id, {{JobState::kCancelling},
                                             JobState::kCancelled,
                                             "cancelled",
                                             "not running after a daemon restart"})
                       .status(),
                   job.id, "cancel");
          }
          continue;
        }
        if (alive) {
          events_.push_back(sched::Event::Adopt(*spec, *placement, placed_at));
          events_.back().bad_nodes = NodeIds(job.bad_nodes);
          commands_[job.id] = command;
          Record(store_->AppendEvent(job.id, "adopted",
                                     fmt::format("still running on {} after a daemon restart",
                                                 NodeList(cluster(), *placement))),
                 job.id, "adopt");
          ++adopted;
        } else {
          Result<JobRecord> r = store_->Transition(
              job.id, {{JobState::kRunning},
                       JobState::kQueued,
                       "requeued",
                       fmt::format("the {} executor no longer runs it after a daemon restart; {}",
                                   executor_->name(), ResumeNote(job.id, now))});
          Record(r.status(), job.id, "requeue");
          if (r.ok()) {
            resubmitted.insert(job.id);
            commands_[job.id] = command;
            events_.push_back(sched::Event::Submit(*spec));
            events_.back().bad_nodes = NodeIds(job.bad_nodes);
            ++requeued;
          }
        }
      }
      if (!page.next_after) break;
      filter.after = *page.next_after;
    }
  }
  // Nothing of a previous daemon that was not adopted may run beside what this one launches.
  executor_->FinishRecovery();
  LOG_INFO("controller: {} queued job(s) resubmitted, {} running adopted, {} requeued at {:.0f}",
           queued, adopted, requeued, now.since_epoch.value());
  wake_at_ = now;  // run a cycle at once
  return Status::Ok();
}

}  // namespace baton::server
