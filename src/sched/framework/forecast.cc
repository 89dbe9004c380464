#include "sched/framework/forecast.h"

#include <algorithm>
#include <bit>
#include <limits>
#include <map>
#include <set>

#include "sched/framework/scheduler.h"

namespace baton::sched {
namespace {

bool IsQuotaPlugin(std::string_view plugin) {
  return plugin == "tenant-quota" || plugin == "quota";
}

// GPUs the job could use now (healthy, idle, of its type, on nodes it may use and has not failed
// on) and those that only health keeps from it (idle GPUs of unhealthy nodes it may otherwise
// use, and of nodes that went down under it).
struct UsableGpus {
  std::int64_t free = 0;
  std::int64_t held_by_health = 0;
};

UsableGpus CountUsable(const ClusterState& state, const JobInfo& job) {
  const topo::Cluster& c = state.cluster();
  UsableGpus u;
  for (std::uint32_t n = 0; n < c.nodes().size(); ++n) {
    const topo::NodeId id(n);
    if (job.allowed_nodes && !(*job.allowed_nodes)[n]) continue;
    if (!job.accepted_gpus.empty() && std::find(job.accepted_gpus.begin(), job.accepted_gpus.end(),
                                                c.shape_of(id).gpu) == job.accepted_gpus.end()) {
      continue;
    }
    const topo::Node& node = c.node(id);
    const int idle = node.gpus - std::popcount(node.allocated_mask);
    if (node.health != topo::NodeHealth::kHealthy ||
        std::binary_search(job.bad_nodes.begin(), job.bad_nodes.end(), id)) {
      u.held_by_health += idle;
    } else {
      u.free += state.FreeGpus(id);
    }
  }
  return u;
}

}  // namespace

std::string_view WaitingKindName(WaitingKind k) {
  switch (k) {
    case WaitingKind::kStarting:
      return "starting";
    case WaitingKind::kQuota:
      return "quota";
    case WaitingKind::kFragmentation:
      return "fragmentation";
    case WaitingKind::kTopology:
      return "topology";
    case WaitingKind::kConstraint:
      return "constraint";
    case WaitingKind::kHealth:
      return "health";
    case WaitingKind::kReservation:
      return "reservation";
    case WaitingKind::kPriority:
      return "priority";
    case WaitingKind::kCapacity:
      return "capacity";
    case WaitingKind::kPreempting:
      return "preempting";
    case WaitingKind::kBackoff:
      return "backoff";
  }
  return "capacity";
}

std::string_view UnknownStartName(UnknownStart u) {
  switch (u) {
    case UnknownStart::kKnown:
      return "known";
    case UnknownStart::kNoEstimatedEnd:
      return "no-estimated-end";
    case UnknownStart::kBeyondHorizon:
      return "beyond-horizon";
  }
  return "known";
}

QueueForecast Scheduler::Forecast(TimePoint now, const ForecastOptions& options) const {
  now = std::max(now, last_now_);
  std::unique_ptr<Scheduler> copy = Clone();
  return Project(*copy, now, options, JobId(), nullptr);
}

Result<WhatIfAnswer> Scheduler::WhatIf(TimePoint now, GangJob job, int max_cycles) const {
  now = std::max(now, last_now_);
  std::unique_ptr<Scheduler> copy = Clone();
  job.id = jobs_.empty() ? JobId(1) : JobId(jobs_.rbegin()->first.value() + 1);
  job.submit_time = TimePoint{};
  Decisions admitted;
  copy->Apply(Event::Submit(job), now, &admitted);
  if (!admitted.rejections.empty()) {
    return InvalidArgumentError(admitted.rejections.front().reason);
  }
  WhatIfAnswer answer;
  const QueueForecast f =
      Project(*copy, now, {.jobs = {job.id}, .max_cycles = max_cycles}, job.id, &answer.placement);
  for (const JobForecast& j : f.jobs) {
    if (j.job == job.id) answer.forecast = j;
  }
  if (!answer.placement.empty()) {
    answer.gpu = state_.cluster().shape_of(answer.placement.nodes.front().node).gpu;
  }
  return answer;
}

QueueForecast Scheduler::Project(Scheduler& s, TimePoint now, const ForecastOptions& options,
                                 JobId watch, Placement* watched) {
  Scheduler* copy = &s;
  QueueForecast out;
  out.now = now;

  // Positions: the queue order a cycle at `now` walks (eligible jobs), then the others.
  std::vector<JobId> order;
  {
    std::vector<JobId> ids;
    std::vector<JobInfo*> records;
    copy->CollectPending(&ids, &records);
    std::vector<JobInfo*> later;
    for (JobInfo* j : records) {
      if (j->eligible_at > now) later.push_back(j);
    }
    Decisions none;
    copy->cycle_.Clear();
    Session session(now, &copy->state_, &copy->jobs_, &copy->plugins_, &copy->config_,
                    &copy->cycle_, &none, nullptr, std::move(ids), std::move(records), std::nullopt,
                    &copy->queue_order_, /*waiting_notes=*/false);
    order = session.PendingQueue();
    std::sort(later.begin(), later.end(), [](const JobInfo* a, const JobInfo* b) {
      return a->eligible_at != b->eligible_at ? a->eligible_at < b->eligible_at
                                              : a->spec.id < b->spec.id;
    });
    for (const JobInfo* j : later) order.push_back(j->spec.id);
  }
  std::map<JobId, std::size_t> index;  // job -> out.jobs
  for (std::size_t i = 0; i < order.size(); ++i) {
    index[order[i]] = i;
    JobForecast f;
    f.job = order[i];
    f.position = static_cast<int>(i) + 1;
    out.jobs.push_back(std::move(f));
  }
  std::set<JobId> targets;
  if (options.jobs.empty()) {
    targets.insert(order.begin(), order.end());
  } else {
    for (JobId id : options.jobs) {
      if (index.contains(id)) targets.insert(id);
    }
  }
  auto record_binds = [&](const Decisions& d, TimePoint t) {
    for (const Bind& b : d.binds) {
      if (watched != nullptr && b.job == watch && watched->empty()) *watched = b.placement;
      auto it = index.find(b.job);
      if (it == index.end() || out.jobs[it->second].estimated_start) continue;
      out.jobs[it->second].estimated_start = t;
      targets.erase(b.job);
    }
  };

  // The first cycle, at `now`: what a real cycle would do now, and why each job still waits.
  Decisions first = copy->RunCycle({now, {}});
  out.cycles = 1;
  record_binds(first, now);
  for (const Waiting& w : first.waiting) {
    if (auto it = index.find(w.job); it != index.end()) out.jobs[it->second].status = w.status;
  }
  copy->options_.waiting_notes = false;

  // Kinds, read in the state the first cycle left.
  {
    std::vector<JobId> ids;
    std::vector<JobInfo*> records;
    copy->CollectPending(&ids, &records);
    Decisions none;
    copy->cycle_.Clear();
    Session probe(now, &copy->state_, &copy->jobs_, &copy->plugins_, &copy->config_, &copy->cycle_,
                  &none, nullptr, std::move(ids), std::move(records), std::nullopt, nullptr,
                  /*waiting_notes=*/false);
    const bool backfill = probe.HasAction("backfill");
    int best_ahead = std::numeric_limits<int>::min();  // highest priority ahead so far
    for (JobForecast& f : out.jobs) {
      const JobInfo* job = copy->job(f.job);
      const int ahead = best_ahead;
      if (job != nullptr) best_ahead = std::max(best_ahead, job->spec.priority);
      if (f.estimated_start == now) {
        f.kind = WaitingKind::kStarting;
        continue;
      }
      if (job == nullptr || job->phase != JobPhase::kPending) {
        // Rejected, or preempted into a grace period, by the first cycle: no start in sight.
        f.kind = WaitingKind::kCapacity;
        continue;
      }
      if (job->eligible_at > now) {
        f.kind = WaitingKind::kBackoff;
      } else if (job->nominated) {
        f.kind = WaitingKind::kPreempting;
      } else if (IsQuotaPlugin(f.status.plugin())) {
        f.kind = WaitingKind::kQuota;
      } else if (probe.FitsNow(*job)) {
        // Room now, yet not placed: held for a job ahead (backfill's reservation, or strict
        // order under head_of_line_blocking).
        f.kind = backfill ? WaitingKind::kReservation : WaitingKind::kPriority;
      } else {
        const UsableGpus u = CountUsable(copy->state_, *job);
        const std::int64_t gpus = job->spec.gpus;
        if (u.free >= gpus) {
          f.kind = WaitingKind::kFragmentation;
          if (job->spec.topology.required) {
            JobInfo relaxed = *job;
            relaxed.spec.topology.required.reset();
            if (probe.FitsNow(relaxed)) f.kind = WaitingKind::kTopology;
          }
        } else if (copy->state_.Free(Subtree{}) >= gpus) {
          f.kind = WaitingKind::kConstraint;
        } else if (u.free + u.held_by_health >= gpus) {
          f.kind = WaitingKind::kHealth;
        } else {
          f.kind = ahead > job->spec.priority ? WaitingKind::kPriority : WaitingKind::kCapacity;
        }
      }
    }
  }

  // Later cycles: at each estimated end (or wake-up) in turn, the jobs that ended finish.
  TimePoint t = now;
  std::optional<TimePoint> wake = first.wake_at;
  bool horizon = false;  // stopped by max_cycles
  bool ran_out = false;  // stopped because nothing ends by its estimate any more
  while (!targets.empty()) {
    if (out.cycles >= options.max_cycles) {
      horizon = true;
      break;
    }
    std::optional<TimePoint> next;
    auto consider = [&](TimePoint at) {
      if (!next || at < *next) next = at;
    };
    for (const auto& [id, j] : copy->jobs_) {
      if (j.phase == JobPhase::kRunning && j.spec.estimated_runtime.value() > 0) {
        consider(std::max(t, j.start + j.spec.estimated_runtime));
      } else if (j.phase == JobPhase::kTerminating && j.evict_deadline > t) {
        consider(j.evict_deadline);
      }
    }
    if (wake && *wake > t) consider(*wake);
    if (!next) {
      ran_out = true;
      break;
    }
    t = *next;
    std::vector<Event> ended;
    for (const auto& [id, j] : copy->jobs_) {
      if (j.phase == JobPhase::kRunning && j.spec.estimated_runtime.value() > 0 &&
          j.start + j.spec.estimated_runtime <= t) {
        ended.push_back(Event::Finish(id));
      }
    }
    Decisions d = copy->RunCycle({t, ended});
    ++out.cycles;
    wake = d.wake_at;
    record_binds(d, t);
  }
  for (JobForecast& f : out.jobs) {
    if (f.estimated_start) continue;
    // Not reached because the jobs asked for started first counts as beyond the horizon too.
    f.unknown = ran_out && !horizon ? UnknownStart::kNoEstimatedEnd : UnknownStart::kBeyondHorizon;
  }
  return out;
}

}  // namespace baton::sched
