#include "sim/replay/daemon_replay.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <set>
#include <utility>
#include <vector>

#include "sched/framework/scheduler.h"

namespace baton::sim {
namespace {

using sched::JobId;
using sched::history::Cycle;
using sched::history::Placed;
using sched::history::Reader;

// Matches two lists of placements by job; returns the first difference's words, if any.
std::optional<std::string> ComparePlaced(const topo::Cluster& cluster, std::string_view kind,
                                         const std::vector<Placed>& recorded,
                                         const std::vector<Placed>& replayed,
                                         ReplayReport& report) {
  std::map<JobId, const sched::Placement*> a, b;
  for (const Placed& p : recorded) a[p.job] = &p.placement;
  for (const Placed& p : replayed) b[p.job] = &p.placement;
  std::set<JobId> jobs;
  for (const auto& [id, p] : a) jobs.insert(id);
  for (const auto& [id, p] : b) jobs.insert(id);
  std::optional<std::string> first;
  for (JobId id : jobs) {
    ++report.compared;
    auto x = a.find(id);
    auto y = b.find(id);
    if (x != a.end() && y != b.end() && x->second->nodes == y->second->nodes) {
      ++report.identical;
      continue;
    }
    if (!first) {
      first = fmt::format(
          "{} job {}: recorded {}, replayed {}", kind, id.value(),
          x == a.end() ? "(not placed)" : sched::history::PlacementText(cluster, *x->second),
          y == b.end() ? "(not placed)" : sched::history::PlacementText(cluster, *y->second));
    }
  }
  return first;
}

template <typename T>
std::vector<T> Sorted(std::vector<T> v) {
  std::sort(v.begin(), v.end());
  return v;
}

}  // namespace

Result<ReplayReport> ReplayDaemon(Reader& history, const sched::SchedulerConfig& daemon_default) {
  ReplayReport report;
  std::unique_ptr<sched::Scheduler> scheduler;
  std::shared_ptr<const topo::Cluster> cluster;
  std::set<JobId> with_plan;
  while (true) {
    ASSIGN_OR_RETURN(std::optional<Reader::Item> item, history.Next());
    if (!item) break;
    if (auto* run = std::get_if<Reader::RunStart>(&*item)) {
      sched::SchedulerConfig config = daemon_default;
      const std::string where = fmt::format("{}:{}", history.name(), run->line);
      if (!run->run.scheduler_yaml.empty()) {
        Result<sched::SchedulerConfig> parsed =
            sched::ParseSchedulerConfig(run->run.scheduler_yaml, where + ": scheduler");
        if (!parsed.ok()) return parsed.status();
        config = *std::move(parsed);
      }
      // The daemon's options, less its timer (which only fills Decisions::timings).
      Result<std::unique_ptr<sched::Scheduler>> created =
          sched::Scheduler::Create(run->cluster->Clone(), std::move(config));
      if (!created.ok()) return created.status().WithPrefix(where + ": scheduler");
      scheduler = std::move(*created);
      cluster = run->cluster;
      ++report.runs;
      continue;
    }
    const auto& read = std::get<Reader::CycleRead>(*item);
    const Cycle& rec = read.cycle;
    ++report.cycles;
    report.events += static_cast<std::int64_t>(rec.events.size());
    for (const sched::Event& e : rec.events) {
      if ((e.kind == sched::Event::Kind::kSubmit || e.kind == sched::Event::Kind::kAdopt) &&
          e.job.has_plan) {
        with_plan.insert(e.job.id);
      }
    }
    const sched::Decisions d = scheduler->RunCycle({rec.now, rec.events});
    Cycle mine;
    sched::history::KeepDecisions(d, mine);
    std::optional<std::string> diff;
    for (auto [kind, a, b] : {std::tuple{"placed", &rec.binds, &mine.binds},
                              std::tuple{"replaced", &rec.replacements, &mine.replacements},
                              std::tuple{"resized", &rec.resizes, &mine.resizes}}) {
      std::optional<std::string> d1 = ComparePlaced(*cluster, kind, *a, *b, report);
      if (!diff) diff = d1;
    }
    auto other = [&](std::string_view what, bool same) {
      if (same) return;
      ++report.other_differences;
      if (!diff) diff = fmt::format("the {} differ", what);
    };
    other("preemptions", Sorted(rec.preemptions) == Sorted(mine.preemptions));
    other("rejections", Sorted(rec.rejections) == Sorted(mine.rejections));
    other("requeues", Sorted(rec.requeues) == Sorted(mine.requeues));
    if (diff && !report.first)
      report.first = ReplayDivergence{read.line, rec.run, rec.cycle, *diff};
  }
  report.skipped_cycles = history.skipped_cycles();
  report.jobs_with_plan = static_cast<std::int64_t>(with_plan.size());
  return report;
}

// ---------------------------------------------------------------------------------------------
// What if.

namespace {

enum class Outcome : std::uint8_t { kPending, kRunning, kCompleted, kCancelled, kRejected };

struct JobTimes {
  sched::GangJob spec;
  TimePoint submit;
  std::optional<TimePoint> first_start;
  std::optional<TimePoint> end;
  Outcome outcome = Outcome::kPending;
  TimePoint bind;  // of the running attempt
  double held_gpu_s = 0;
  bool stopping = false;  // a preempted victim: its next Finish is its stop, not its end
  TimePoint release_at;   // a victim's GPUs free then at the latest
  Seconds run_time;       // of the last attempt that completed (A)
};

void CloseAttempt(JobTimes& j, TimePoint at) {
  if (j.outcome != Outcome::kRunning) return;
  j.held_gpu_s += std::max(0.0, (at - j.bind).value()) * j.spec.gpus;
  j.outcome = Outcome::kPending;
}

WhatIfMetrics Measure(const std::map<JobId, JobTimes>& jobs, int cluster_gpus,
                      std::int64_t preemptions) {
  WhatIfMetrics m;
  m.preemptions = preemptions;
  std::vector<double> jct;
  double wait = 0, held = 0;
  std::optional<TimePoint> first, last;
  for (const auto& [id, j] : jobs) {
    ++m.submitted;
    held += j.held_gpu_s;
    first = first ? std::min(*first, j.submit) : j.submit;
    if (j.end) last = last ? std::max(*last, *j.end) : *j.end;
    switch (j.outcome) {
      case Outcome::kCompleted:
        ++m.completed;
        wait += (*j.first_start - j.submit).value();
        jct.push_back((*j.end - j.submit).value());
        break;
      case Outcome::kCancelled:
        ++m.cancelled;
        break;
      case Outcome::kRejected:
        ++m.rejected;
        break;
      default:
        ++m.unfinished;
    }
  }
  if (!jct.empty()) {
    m.mean_wait_s = wait / static_cast<double>(jct.size());
    double sum = 0;
    for (double x : jct) sum += x;
    m.mean_jct_s = sum / static_cast<double>(jct.size());
    std::sort(jct.begin(), jct.end());
    m.p95_jct_s = jct[std::min(jct.size() - 1, static_cast<std::size_t>(0.95 * jct.size()))];
  }
  if (first && last) m.makespan_s = std::max(0.0, (*last - *first).value());
  if (m.makespan_s > 0 && cluster_gpus > 0) m.utilisation = held / (cluster_gpus * m.makespan_s);
  return m;
}

// What B is fed from the record: at each recorded cycle's time, that cycle's submissions,
// cancellations and node events (the cycle runs even with none, as the daemon's did).
struct Tick {
  TimePoint at;
  std::vector<sched::Event> events;
};

// A finish due within this of a cycle's time belongs to that cycle: bind + (end - bind) need
// not give back `end` to the last bit.
constexpr Seconds kSameInstant{1e-6};

}  // namespace

Result<WhatIfReport> WhatIf(Reader& history, const sched::SchedulerConfig& config) {
  WhatIfReport report;
  std::shared_ptr<const topo::Cluster> cluster;
  std::map<JobId, JobTimes> a;  // the record
  std::int64_t a_preemptions = 0;
  std::vector<Tick> ticks;
  while (true) {
    ASSIGN_OR_RETURN(std::optional<Reader::Item> item, history.Next());
    if (!item) break;
    if (auto* run = std::get_if<Reader::RunStart>(&*item)) {
      if (!cluster) cluster = run->cluster;  // B runs on the first run's cluster throughout
      continue;
    }
    const Cycle& c = std::get<Reader::CycleRead>(*item).cycle;
    const TimePoint now = c.now;
    ticks.push_back({now, {}});
    std::vector<sched::Event>& external = ticks.back().events;
    for (const sched::Event& e : c.events) {
      using K = sched::Event::Kind;
      switch (e.kind) {
        case K::kSubmit:
        case K::kAdopt: {
          auto [it, fresh] = a.try_emplace(e.job.id);
          JobTimes& j = it->second;
          if (fresh) {
            j.spec = e.job;
            j.submit = now;
            external.push_back(sched::Event::Submit(e.job));
          }
          if (e.kind == K::kAdopt) {  // still running after a daemon restart
            if (j.outcome != Outcome::kRunning) {
              j.outcome = Outcome::kRunning;
              j.bind = e.adopted_start;
              if (!j.first_start) j.first_start = e.adopted_start;
            }
          } else {
            CloseAttempt(j, now);  // handed back (lost by the executor, requeued on restart)
            j.outcome = Outcome::kPending;
          }
          break;
        }
        case K::kFinish:
        case K::kCancel: {
          auto it = a.find(e.job_id);
          if (it == a.end()) break;
          JobTimes& j = it->second;
          const bool was_running = j.outcome == Outcome::kRunning;
          const TimePoint bind = j.bind;
          CloseAttempt(j, j.stopping ? std::min(now, j.release_at) : now);
          if (e.kind == K::kCancel) {
            if (j.outcome == Outcome::kCompleted) break;
            j.outcome = Outcome::kCancelled;
            j.end = now;
            external.push_back(e);
          } else if (j.stopping) {
            j.stopping = false;  // a victim's stop: the scheduler requeues it
          } else if (was_running) {
            j.outcome = Outcome::kCompleted;
            j.end = now;
            j.run_time = now - bind;
          }
          break;
        }
        case K::kNodeHealth:
          external.push_back(e);
          break;
        case K::kCheckpoint:
          break;
      }
    }
    for (const Placed& p : c.binds) {
      auto it = a.find(p.job);
      if (it == a.end()) continue;
      if (it->second.stopping) CloseAttempt(it->second, std::min(now, it->second.release_at));
      it->second.outcome = Outcome::kRunning;
      it->second.bind = now;
      if (!it->second.first_start) it->second.first_start = now;
      it->second.end.reset();
      it->second.stopping = false;  // placed again: a victim's stop is behind it
    }
    for (const sched::history::Preempted& p : c.preemptions) {
      ++a_preemptions;
      if (auto it = a.find(p.victim); it != a.end()) {
        it->second.stopping = true;
        it->second.release_at = p.release_at;
      }
    }
    for (JobId id : c.requeues) {
      if (auto it = a.find(id); it != a.end()) CloseAttempt(it->second, now);
    }
    for (JobId id : c.rejections) {
      if (auto it = a.find(id); it != a.end()) {
        CloseAttempt(it->second, now);
        it->second.outcome = Outcome::kRejected;
        it->second.end = now;
      }
    }
  }
  if (!cluster) return InvalidArgumentError(history.name() + ": the history holds no daemon run");
  const int gpus = cluster->counts().total;
  report.recorded = Measure(a, gpus, a_preemptions);

  // B: one scheduler over the whole record.
  ASSIGN_OR_RETURN(std::unique_ptr<sched::Scheduler> scheduler,
                   sched::Scheduler::Create(cluster->Clone(), config));
  std::map<JobId, JobTimes> b;
  std::int64_t b_preemptions = 0;
  std::multimap<TimePoint, JobId> finishes;
  std::map<JobId, TimePoint> finish_of;
  auto unschedule = [&](JobId id) {
    auto f = finish_of.find(id);
    if (f == finish_of.end()) return;
    for (auto it = finishes.lower_bound(f->second); it != finishes.end() && it->first == f->second;
         ++it) {
      if (it->second == id) {
        finishes.erase(it);
        break;
      }
    }
    finish_of.erase(f);
  };
  std::optional<TimePoint> wake;
  TimePoint last{};
  std::size_t next = 0;
  std::vector<sched::Event> events;
  int idle_wakes = 0;  // wake-ups in a row with nothing else left and nothing decided
  while (true) {
    std::optional<TimePoint> t;
    auto earliest = [&](TimePoint x) { t = t ? std::min(*t, x) : x; };
    if (next < ticks.size()) earliest(ticks[next].at);
    if (!finishes.empty()) earliest(finishes.begin()->first);
    if (wake && *wake > last) earliest(*wake);
    if (!t) break;
    const TimePoint now = std::max(*t, last);
    last = now;
    wake.reset();
    events.clear();
    for (; next < ticks.size() && ticks[next].at <= now; ++next) {
      for (const sched::Event& e : ticks[next].events) {
        if (e.kind == sched::Event::Kind::kSubmit) {
          JobTimes& j = b[e.job.id];
          j.spec = e.job;
          j.submit = now;
          const JobTimes& rec = a.at(e.job.id);
          j.run_time = rec.outcome == Outcome::kCompleted ? rec.run_time : e.job.estimated_runtime;
        } else if (e.kind == sched::Event::Kind::kCancel) {
          auto it = b.find(e.job_id);
          if (it == b.end() || it->second.outcome == Outcome::kCompleted ||
              it->second.outcome == Outcome::kRejected) {
            continue;  // over in B before the user cancelled it
          }
          unschedule(e.job_id);
          CloseAttempt(it->second, now);
          it->second.outcome = Outcome::kCancelled;
          it->second.end = now;
        }
        events.push_back(e);
      }
    }
    while (!finishes.empty() && finishes.begin()->first <= now + kSameInstant) {
      const JobId id = finishes.begin()->second;
      finishes.erase(finishes.begin());
      finish_of.erase(id);
      JobTimes& j = b.at(id);
      CloseAttempt(j, now);
      j.outcome = Outcome::kCompleted;
      j.end = now;
      events.push_back(sched::Event::Finish(id));
    }
    const sched::Decisions d = scheduler->RunCycle({now, events});
    ++report.cycles;
    for (const sched::Requeue& q : d.requeues) {
      unschedule(q.job);
      if (auto it = b.find(q.job); it != b.end()) CloseAttempt(it->second, now);
    }
    for (const sched::Bind& bind : d.binds) {
      auto it = b.find(bind.job);
      if (it == b.end()) continue;
      JobTimes& j = it->second;
      j.outcome = Outcome::kRunning;
      j.bind = now;
      if (!j.first_start) j.first_start = now;
      if (j.run_time > Seconds(0)) {
        finishes.emplace(now + j.run_time, bind.job);
        finish_of[bind.job] = now + j.run_time;
      }
    }
    for (const sched::Preemption& p : d.preemptions) {
      ++b_preemptions;
      unschedule(p.victim);
      // It holds its GPUs until release_at; the scheduler requeues it then by itself.
      if (auto it = b.find(p.victim); it != b.end()) CloseAttempt(it->second, p.release_at);
    }
    for (const sched::Rejection& r : d.rejections) {
      unschedule(r.job);
      if (auto it = b.find(r.job); it != b.end()) {
        CloseAttempt(it->second, now);
        it->second.outcome = Outcome::kRejected;
        it->second.end = now;
      }
    }
    if (d.wake_at && *d.wake_at > now) wake = d.wake_at;
    const bool idle = next == ticks.size() && finishes.empty() && d.binds.empty() &&
                      d.preemptions.empty() && d.requeues.empty() && d.rejections.empty();
    // What is left can never run (nothing ends, nothing arrives): stop rather than wake forever.
    if (idle && ++idle_wakes > 1000) break;
    if (!idle) idle_wakes = 0;
  }
  report.replayed = Measure(b, gpus, b_preemptions);
  return report;
}

}  // namespace baton::sim
