#include "sim/engine/simulator.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <map>
#include <set>

#include "core/check.h"
#include "sched/framework/scheduler.h"
#include "sim/engine/event_queue.h"

namespace baton::sim {
namespace {

enum class Kind : std::uint8_t { kSubmit, kFinish, kCheckpoint, kFailure, kRepair, kWake };

struct Payload {
  Kind kind;
  std::uint32_t epoch = 0;
  std::uint64_t index = 0;  // job index, or node id
  double repair_s = 0;      // kFailure
};

enum class State : std::uint8_t { kPending, kRunning, kEnded };

struct SimJob {
  JobRecord rec;
  double done_at_ckpt = 0;  // work completed as of the last checkpoint (or start)
  double run_from = 0;      // work accrues from here (after any startup delay)
  double slowdown = 1;
  int cur_gpus = 0;  // GPUs the current attempt holds
  double rate = 1;   // work-seconds per second: cur_gpus / rec.gpus / slowdown
  double bind_t = 0;
  double last_ckpt_t = 0;  // wall time of the last checkpoint (or start) of this attempt
  double finish_t = 0;
  std::uint32_t epoch = 0;
  State state = State::kPending;
  std::optional<sched::GangJob> spec;  // kept only for jobs with a plan (SlowdownFn)
};

int LargestDivisorAtMost(int n, int cap) {
  for (int d = std::min(n, cap); d > 1; --d) {
    if (n % d == 0) return d;
  }
  return 1;
}

class Engine {
 public:
  Engine(const SimConfig& config, TraceReader& trace, FailureSource failures)
      : config_(config), trace_(trace), failures_(std::move(failures)) {}

  Result<SimResult> Run(topo::Cluster cluster) {
    for (const auto& n : cluster.nodes()) node_gpus_ = std::max<int>(node_gpus_, n.gpus);
    const int total_gpus = cluster.counts().total;
    // The simulator reads no waiting notes.
    ASSIGN_OR_RETURN(
        sched_, sched::Scheduler::Create(std::move(cluster), config_.scheduler,
                                         {.estimator = config_.estimator, .waiting_notes = false}));
    const topo::Cluster& c = sched_->state().cluster();
    node_down_.assign(c.nodes().size(), false);
    std::optional<FailureGenerator> generator;
    if (!failures_ && config_.failures) {
      RETURN_IF_ERROR(config_.failure_model.Validate());
      generator.emplace(c, config_.failure_model, config_.seed);
      failures_ = [&generator]() -> Result<std::optional<FailureEvent>> {
        return std::optional<FailureEvent>(generator->Next());
      };
    }
    RETURN_IF_ERROR(PushNextSubmit());
    RETURN_IF_ERROR(PushNextFailure());

    std::vector<sched::Event> events;
    while (!queue_.empty()) {
      const double t = queue_.top().time;
      Advance(t);
      events.clear();
      bool wake = false;
      while (!queue_.empty() && queue_.top().time == t) {
        auto e = queue_.Pop();
        ++result_.summary.events;
        RETURN_IF_ERROR(Handle(t, e.payload, &events, &wake));
      }
      if (!events.empty() || wake) {
        if (!lazy_checkpoints_.empty()) {
          // Reported late, before this instant's events: the scheduler sees them at `t`.
          std::vector<sched::Event> all;
          all.reserve(lazy_checkpoints_.size() + events.size());
          for (std::uint64_t index : lazy_checkpoints_) {
            if (jobs_[index].state == State::kRunning) {
              all.push_back(sched::Event::Checkpoint(sched::JobId(index + 1)));
            }
          }
          lazy_checkpoints_.clear();
          for (auto& e : events) all.push_back(std::move(e));
          events.swap(all);
        }
        sched::Decisions d = sched_->RunCycle({TimePoint{Seconds(t)}, events});
        ++result_.summary.cycles;
        if (config_.after_cycle) config_.after_cycle(*sched_, TimePoint{Seconds(t)}, d);
        Apply(t, d);
      }
      if (config_.progress && result_.summary.events >= next_progress_) {
        next_progress_ = result_.summary.events + config_.progress_every;
        config_.progress({Seconds(t), submitted_, ended_, result_.summary.events});
      }
      if (trace_done_ && live_ == 0) break;
      // Only failures could still happen: no job runs, no node awaits repair, no wake-up is due
      // and no submit is left. Waiting jobs cannot start any more (e.g. every node that would fit
      // them is on their bad-node list), and more failures would not help: stop.
      if (trace_done_ && running_ == 0 && repairs_ == 0 && wakes_.empty()) break;
    }
    if (config_.progress) {
      config_.progress({Seconds(last_t_), submitted_, ended_, result_.summary.events});
    }
    if (jobs_.empty()) {
      // Nothing to report is not a result: say why (a Philly trace without run times simulated
      // 0 jobs and exited 0 before).
      const TraceStats& ts = trace_.stats();
      return InvalidArgumentError(fmt::format(
          "the trace yielded no job to simulate: {} lines, {} jobs read, {} malformed, "
          "{} filtered (not GPU jobs), {} without a run time or GPUs{}",
          ts.lines, ts.jobs, ts.malformed, ts.filtered, result_.summary.skipped,
          ts.warnings.empty() ? "" : fmt::format("; first problem: {}", ts.warnings[0])));
    }
    Finalize(total_gpus);
    return std::move(result_);
  }

 private:
  Status PushNextSubmit() {
    ASSIGN_OR_RETURN(std::optional<TraceJob> next, trace_.Next());
    if (!next) {
      trace_done_ = true;
      return Status::Ok();
    }
    pending_trace_ = std::move(*next);
    queue_.Push(std::max(pending_trace_.submit.value(), last_t_), {Kind::kSubmit});
    return Status::Ok();
  }

  Status PushNextFailure() {
    if (!failures_) return Status::Ok();
    ASSIGN_OR_RETURN(std::optional<FailureEvent> f, failures_());
    if (!f) return Status::Ok();
    queue_.Push(std::max(f->time.value(), last_t_),
                {Kind::kFailure, 0, f->node.value(), f->repair.value()});
    return Status::Ok();
  }

  void PushWake(double t) {
    if (wakes_.insert(t).second) queue_.Push(t, {Kind::kWake});
  }

  Status Handle(double t, const Payload& p, std::vector<sched::Event>* events, bool* wake) {
    switch (p.kind) {
      case Kind::kSubmit: {
        TraceJob tj = std::move(pending_trace_);
        auto spec = ToGangJob(tj, config_, node_gpus_);
        if (!spec.ok()) {
          ++result_.summary.skipped;
        } else {
          const std::uint64_t index = jobs_.size();
          spec->id = sched::JobId(index + 1);
          spec->submit_time = TimePoint{Seconds(t)};
          SimJob j;
          j.rec.id = tj.id;
          j.rec.tenant = spec->tenant;
          j.rec.gpus = spec->gpus;
          j.rec.submit_s = t;
          // The trace measured its duration at tj.gpus; at another requested size (the rigid
          // variant of an elastic job) the same GPU-time, linearly.
          j.rec.work_s = tj.duration->value();
          if (spec->gpus != tj.gpus) j.rec.work_s *= static_cast<double>(tj.gpus) / spec->gpus;
          if (spec->elastic.min_gpus > 0) {
            if (spec->elastic.step_gpus == 0) {
              spec->elastic.step_gpus = sched::DefaultElasticStep(*spec, sched_->state().cluster());
            }
            ++result_.summary.elastic_jobs;
          }
          if (spec->has_plan) j.spec = *spec;
          jobs_.push_back(std::move(j));
          pending_gpus_.insert(spec->gpus);
          ++submitted_;
          ++live_;
          if (!started_) {
            started_ = true;
            t0_ = t;
            next_sample_ = t;
          }
          events->push_back(sched::Event::Submit(std::move(*spec)));
        }
        return PushNextSubmit();
      }
      case Kind::kFinish: {
        SimJob& j = jobs_[p.index];
        if (j.epoch != p.epoch || j.state != State::kRunning) return Status::Ok();
        StopRunning(j, t);
        End(j, t, JobOutcome::kCompleted, "");
        events->push_back(sched::Event::Finish(sched::JobId(p.index + 1)));
        return Status::Ok();
      }
      case Kind::kCheckpoint: {
        SimJob& j = jobs_[p.index];
        if (j.epoch != p.epoch || j.state != State::kRunning) return Status::Ok();
        if (t > j.run_from) {
          j.done_at_ckpt += (t - j.run_from) * j.rate;
          j.run_from = t;
        }
        j.last_ckpt_t = t;
        ScheduleCheckpoint(j, p.index, t);
        if (config_.eager_checkpoints) {
          events->push_back(sched::Event::Checkpoint(sched::JobId(p.index + 1)));
        } else {
          lazy_checkpoints_.push_back(p.index);
        }
        return Status::Ok();
      }
      case Kind::kFailure: {
        const topo::NodeId node(static_cast<std::uint32_t>(p.index));
        if (!node_down_[p.index]) {
          node_down_[p.index] = true;
          ++result_.summary.node_failures;
          events->push_back(sched::Event::NodeHealth(node, topo::NodeHealth::kDown));
          queue_.Push(t + p.repair_s, {Kind::kRepair, 0, p.index});
          ++repairs_;
        }
        return PushNextFailure();
      }
      case Kind::kRepair:
        --repairs_;
        node_down_[p.index] = false;
        events->push_back(sched::Event::NodeHealth(
            topo::NodeId(static_cast<std::uint32_t>(p.index)), topo::NodeHealth::kHealthy));
        return Status::Ok();
      case Kind::kWake:
        wakes_.erase(t);
        *wake = true;
        return Status::Ok();
    }
    return Status::Ok();
  }

  double Slowdown(const SimJob& j, const sched::Placement& p) const {
    double s = config_.level_slowdown[static_cast<int>(p.span)];
    if (j.spec && config_.slowdown) s = config_.slowdown(*j.spec, p, sched_->state().cluster());
    return std::isfinite(s) && s >= 1 ? s : 1.0;
  }

  void ScheduleCheckpoint(const SimJob& j, std::uint64_t index, double t) {
    if (config_.checkpoint_interval.value() <= 0) return;
    const double next = t + config_.checkpoint_interval.value();
    if (next < j.finish_t) queue_.Push(next, {Kind::kCheckpoint, j.epoch, index});
  }

  // Starts (or restarts in place) an attempt on `p`; work resumes at `from`.
  void StartAttempt(SimJob& j, std::uint64_t index, const sched::Placement& p, double t,
                    double from) {
    j.slowdown = Slowdown(j, p);
    j.cur_gpus = p.gpus();
    j.rate = static_cast<double>(j.cur_gpus) / j.rec.gpus / j.slowdown;
    j.run_from = from;
    j.last_ckpt_t = t;
    j.finish_t = from + std::max(0.0, j.rec.work_s - j.done_at_ckpt) / j.rate;
    ++j.epoch;
    effective_ += j.cur_gpus / j.slowdown;
    ++running_;
    queue_.Push(j.finish_t, {Kind::kFinish, j.epoch, index});
    ScheduleCheckpoint(j, index, t);
  }

  // Ends the current attempt's accounting (GPUs held until `held_until`).
  void StopRunning(SimJob& j, double held_until) {
    --running_;
    effective_ -= j.cur_gpus / j.slowdown;
    j.rec.held_gpu_s += (held_until - j.bind_t) * j.cur_gpus;
    ++j.epoch;
  }

  // GPU-seconds of the current attempt since its last checkpoint (or start): the work a failure
  // or preemption at `t` loses, restart delay included (the scheduler's definition, computed
  // here from exact checkpoint times).
  static double LostSinceCheckpoint(const SimJob& j, double t) {
    return std::max(0.0, t - std::max(j.bind_t, j.last_ckpt_t)) * j.cur_gpus;
  }

  void BackToQueue(SimJob& j, double lost, bool preempted) {
    j.state = State::kPending;
    j.rec.lost_gpu_s += lost;
    ++(preempted ? j.rec.preemptions : j.rec.failure_restarts);
    pending_gpus_.insert(j.rec.gpus);
  }

  void End(SimJob& j, double t, JobOutcome outcome, std::string reason) {
    if (j.state == State::kPending) pending_gpus_.erase(pending_gpus_.find(j.rec.gpus));
    j.state = State::kEnded;
    j.rec.end_s = t;
    j.rec.outcome = outcome;
    j.rec.reason = std::move(reason);
    --live_;
    ++ended_;
    last_end_ = std::max(last_end_, t);
  }

  void Apply(double t, const sched::Decisions& d) {
    for (const auto& r : d.requeues) {
      SimJob& j = jobs_[r.job.value() - 1];
      if (j.state != State::kRunning) continue;
      const double lost = LostSinceCheckpoint(j, t);
      StopRunning(j, t);
      BackToQueue(j, lost, /*preempted=*/false);
    }
    for (const auto& r : d.replacements) {
      const std::uint64_t index = r.job.value() - 1;
      SimJob& j = jobs_[index];
      effective_ -= j.cur_gpus / j.slowdown;
      --running_;  // StartAttempt counts it again
      j.rec.lost_gpu_s += LostSinceCheckpoint(j, t);
      ++j.rec.failure_restarts;
      StartAttempt(j, index, r.placement, t, t + config_.restart_cost.value());
    }
    // A resize restarts the job at its new size from its last checkpoint: the work since then is
    // lost, and it runs again after restart_cost.
    for (const auto& r : d.resizes) {
      const std::uint64_t index = r.job.value() - 1;
      SimJob& j = jobs_[index];
      if (j.state != State::kRunning) continue;
      j.rec.lost_gpu_s += LostSinceCheckpoint(j, t);
      StopRunning(j, t);
      j.bind_t = t;
      ++j.rec.resizes;
      StartAttempt(j, index, r.placement, t, t + config_.restart_cost.value());
    }
    for (const auto& r : d.rejections) {
      SimJob& j = jobs_[r.job.value() - 1];
      if (j.state == State::kEnded) continue;
      if (j.state == State::kRunning) {
        j.rec.lost_gpu_s += LostSinceCheckpoint(j, t);
        StopRunning(j, t);
      }
      End(j, t,
          r.kind == sched::RejectionKind::kRetriesExhausted ? JobOutcome::kFailed
                                                            : JobOutcome::kRejected,
          fmt::format("{}: {}", r.plugin, r.reason));
    }
    for (const auto& p : d.preemptions) {
      SimJob& j = jobs_[p.victim.value() - 1];
      if (j.state != State::kRunning) continue;
      const double lost = LostSinceCheckpoint(j, t);
      StopRunning(j, p.release_at.since_epoch.value());
      BackToQueue(j, lost, /*preempted=*/true);
      PushWake(p.release_at.since_epoch.value());
    }
    for (const auto& b : d.binds) {
      const std::uint64_t index = b.job.value() - 1;
      SimJob& j = jobs_[index];
      CHECK(j.state == State::kPending);
      pending_gpus_.erase(pending_gpus_.find(j.rec.gpus));
      j.state = State::kRunning;
      if (j.rec.first_start_s < 0) j.rec.first_start_s = t;
      j.bind_t = t;
      StartAttempt(j, index, b.placement, t, t);
    }
    if (d.wake_at && d.wake_at->since_epoch.value() > t) PushWake(d.wake_at->since_epoch.value());
  }

  int Fragmentation() const {
    if (pending_gpus_.empty()) return 0;
    const int smallest = *pending_gpus_.begin();
    int frag = 0;
    for (const auto& n : sched_->state().cluster().nodes()) {
      if (n.health != topo::NodeHealth::kHealthy) continue;
      const int free = n.gpus - std::popcount(n.allocated_mask);
      if (smallest <= n.gpus ? free < smallest : free < n.gpus) frag += free;
    }
    return frag;
  }

  // Integrates the piecewise-constant state over [last_t_, t] and emits due samples.
  void Advance(double t) {
    if (started_ && t > last_t_) {
      const auto& counts = sched_->state().cluster().counts();
      const double dt = t - last_t_;
      alloc_integral_ += counts.allocated * dt;
      effective_integral_ += std::max(0.0, effective_) * dt;
      queue_integral_ += static_cast<double>(pending_gpus_.size()) * dt;
    }
    while (started_ && next_sample_ <= t) {
      const auto& counts = sched_->state().cluster().counts();
      Sample s;
      s.t_s = next_sample_ - t0_;
      s.allocated_gpus = counts.allocated;
      s.effective_gpus = std::max(0.0, effective_);
      s.down_gpus = counts.unavailable;
      s.queue = static_cast<int>(pending_gpus_.size());
      s.fragmentation = Fragmentation();
      result_.samples.push_back(s);
      next_sample_ += std::max(1.0, config_.sample_interval.value());
    }
    last_t_ = std::max(last_t_, t);
  }

  void Finalize(int total_gpus) {
    SimSummary& s = result_.summary;
    s.policy = config_.policy;
    s.cluster_gpus = total_gpus;
    for (SimJob& j : jobs_) {
      if (j.state != State::kEnded) {
        if (j.state == State::kRunning) StopRunning(j, last_t_);
        j.state = State::kEnded;
        j.rec.outcome = JobOutcome::kUnfinished;
        j.rec.reason = "never placed again: nothing left could free room for it";
      }
    }
    std::vector<double> jcts;
    double wait = 0, slow = 0, useful = 0, lost = 0;
    std::map<std::string, TenantStats> tenants;
    for (const SimJob& j : jobs_) {
      const JobRecord& r = j.rec;
      ++s.jobs;
      s.preemptions += r.preemptions;
      s.failure_restarts += r.failure_restarts;
      s.resizes += r.resizes;
      lost += r.lost_gpu_s;
      switch (r.outcome) {
        case JobOutcome::kCompleted: {
          ++s.completed;
          jcts.push_back(r.jct_s());
          wait += r.wait_s();
          slow += r.slowdown();
          useful += r.work_s * r.gpus;
          TenantStats& ts = tenants[r.tenant];
          ++ts.jobs;
          ts.gpu_hours += r.work_s * r.gpus / 3600.0;
          ts.avg_jct_s += r.jct_s();
          ts.avg_slowdown += r.slowdown();
          break;
        }
        case JobOutcome::kFailed:
          ++s.failed;
          break;
        case JobOutcome::kRejected:
          ++s.rejected;
          break;
        case JobOutcome::kUnfinished:
          ++s.unfinished;
          break;
      }
    }
    if (!jcts.empty()) {
      const double n = static_cast<double>(jcts.size());
      double sum = 0;
      for (double x : jcts) sum += x;
      s.avg_jct_s = sum / n;
      s.avg_wait_s = wait / n;
      s.avg_slowdown = slow / n;
      std::sort(jcts.begin(), jcts.end());
      s.median_jct_s = jcts[(jcts.size() - 1) / 2];
      s.p95_jct_s = jcts[static_cast<std::size_t>(0.95 * static_cast<double>(jcts.size() - 1))];
    }
    const double end = std::max({last_end_, last_t_, t0_});  // the integrals run to last_t_
    s.makespan_s = end - t0_;
    const double capacity = static_cast<double>(total_gpus) * s.makespan_s;
    if (capacity > 0) {
      s.allocated_util = alloc_integral_ / capacity;
      s.effective_util = effective_integral_ / capacity;
      s.goodput = useful / capacity;
    }
    if (s.makespan_s > 0) s.avg_queue = queue_integral_ / s.makespan_s;
    if (!result_.samples.empty()) {
      double f = 0;
      for (const Sample& x : result_.samples) f += x.fragmentation;
      s.avg_fragmentation = f / static_cast<double>(result_.samples.size());
    }
    s.lost_gpu_hours = lost / 3600.0;
    double sum_x = 0, sum_x2 = 0;
    for (auto& [name, ts] : tenants) {
      ts.tenant = name;
      ts.avg_jct_s /= ts.jobs;
      ts.avg_slowdown /= ts.jobs;
      sum_x += ts.avg_slowdown;
      sum_x2 += ts.avg_slowdown * ts.avg_slowdown;
      result_.tenants.push_back(ts);
    }
    if (sum_x2 > 0) s.tenant_fairness = sum_x * sum_x / (tenants.size() * sum_x2);
    result_.jobs.reserve(jobs_.size());
    for (SimJob& j : jobs_) result_.jobs.push_back(std::move(j.rec));
    result_.trace = trace_.stats();
  }

  const SimConfig& config_;
  TraceReader& trace_;
  FailureSource failures_;
  std::unique_ptr<sched::Scheduler> sched_;
  EventQueue<Payload> queue_;
  TraceJob pending_trace_;
  bool trace_done_ = false;
  std::vector<SimJob> jobs_;
  std::multiset<int> pending_gpus_;  // GPU counts of waiting jobs
  std::set<double> wakes_;
  std::vector<bool> node_down_;
  std::vector<std::uint64_t> lazy_checkpoints_;  // not yet reported (eager_checkpoints off)
  int node_gpus_ = 0;
  std::int64_t running_ = 0;  // attempts under way (replacements count once)
  std::int64_t repairs_ = 0;  // node repairs scheduled
  std::int64_t submitted_ = 0, ended_ = 0, live_ = 0, next_progress_ = 0;
  bool started_ = false;
  double t0_ = 0, last_t_ = 0, last_end_ = 0, next_sample_ = 0;
  double effective_ = 0;
  double alloc_integral_ = 0, effective_integral_ = 0, queue_integral_ = 0;
  SimResult result_;
};

}  // namespace

std::string_view JobOutcomeName(JobOutcome o) {
  switch (o) {
    case JobOutcome::kCompleted:
      return "completed";
    case JobOutcome::kFailed:
      return "failed";
    case JobOutcome::kRejected:
      return "rejected";
    case JobOutcome::kUnfinished:
      return "unfinished";
  }
  return "unknown";
}

double JobRecord::slowdown() const { return jct_s() / std::max(work_s, 10.0); }

Result<sched::GangJob> ToGangJob(const TraceJob& t, const SimConfig& config, int node_gpus) {
  if (!t.duration) return InvalidArgumentError(fmt::format("job '{}': no duration", t.id));
  if (t.gpus <= 0) return InvalidArgumentError(fmt::format("job '{}': no GPUs", t.id));
  sched::GangJob g;
  g.name = t.id;
  g.tenant = t.tenant.empty() ? "default" : t.tenant;
  const bool elastic = t.max_gpus > 0 && !config.rigid_elastic;
  g.gpus = t.max_gpus > 0 && config.rigid_elastic ? t.max_gpus : t.gpus;
  g.gpus_per_task = g.gpus <= node_gpus || elastic ? 0 : LargestDivisorAtMost(g.gpus, node_gpus);
  if (elastic) g.elastic = {t.min_gpus, t.max_gpus, t.step_gpus};
  if (!t.gpu_type.empty()) g.gpu_types = {t.gpu_type};
  if (!t.gpu_types.empty()) g.gpu_types = t.gpu_types;
  if (t.gpus == 1 && t.gpu_milli > 0 && t.gpu_milli < 1000) g.gpu_milli = t.gpu_milli;
  g.cpu_milli = t.cpu_milli;
  g.memory_mib = t.memory_mib;
  for (const auto& [name, amount] : t.extended) g.extended.push_back({name, amount});
  g.priority = t.priority;
  g.grace_period = config.grace_period;
  switch (config.estimate) {
    case EstimateSource::kRequestedElseActual:
      g.estimated_runtime = t.requested_time ? *t.requested_time : *t.duration;
      break;
    case EstimateSource::kActual:
      g.estimated_runtime = *t.duration;
      break;
    case EstimateSource::kNone:
      break;
  }
  g.checkpoint_interval = config.checkpoint_interval;
  g.restart_cost = config.restart_cost;
  g.max_retries = config.max_retries;
  if (config.attach_plan && t.max_gpus == 0) config.attach_plan(t, g);
  return g;
}

Result<SimResult> RunSimulation(topo::Cluster cluster, const SimConfig& config, TraceReader& trace,
                                FailureSource failures) {
  Engine engine(config, trace, std::move(failures));
  return engine.Run(std::move(cluster));
}

}  // namespace baton::sim
