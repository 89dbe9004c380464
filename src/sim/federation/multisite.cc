#include "sim/federation/multisite.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <optional>
#include <set>

#include "core/check.h"
#include "sched/framework/scheduler.h"
#include "sim/engine/event_queue.h"
#include "sim/engine/simulator.h"

namespace baton::sim {
namespace {

enum class Kind : std::uint8_t {
  kArrive,        // index: job
  kTransferDone,  // index: link, epoch: the link's
  kStaged,        // index: job, epoch: the job's routing
  kFinish,        // index: job, epoch: the job's attempt
  kOutageStart,   // index: site, value: duration
  kOutageEnd,     // index: site
  kWake,          // index: site
};

struct Payload {
  Kind kind;
  std::uint32_t epoch = 0;
  std::uint64_t index = 0;
  double value = 0;
};

enum class Phase : std::uint8_t { kBroker, kStaging, kQueued, kRunning, kEnded };

struct Job {
  const MultiSiteJob* in = nullptr;
  SiteJobRecord rec;
  Phase phase = Phase::kBroker;
  int site = -1;  // where it is routed (staging, queued or running); -1: at the broker
  int home = -1;
  // Progress as a fraction of the job's work; `saved` is what its last checkpoint holds.
  double done = 0;
  double saved = 0;
  int ckpt_site = -1;  // where the last checkpoint is; -1: none
  // Planned jobs: steps, from the home site's plan. 0: unplanned.
  double steps = 0;
  std::vector<std::uint32_t> plan_key;  // per site; valid where has_plan[s]
  std::vector<bool> has_plan;
  // The current attempt.
  double work_s = 0;    // run time on a compact placement at the current site
  double slowdown = 1;  // of the placement
  double bind_t = 0;
  double run_from = 0;  // work accrues from here (after the restart cost)
  double done_at_run_from = 0;
  std::uint32_t attempt = 0;  // epoch of kFinish events
  std::uint32_t routing = 0;  // epoch of kStaged events
  std::uint64_t sched_id = 0;
  // Staging.
  int transfers_left = 0;
  double staging_from = 0;
  double staged_at = 0;
  bool pending_route = false;
  int route_attempts = 0;  // RouteJob calls, held ones included
};

struct Transfer {
  std::size_t job;
  double remaining;  // bytes
  std::uint32_t routing;
};

struct Link {
  double bandwidth = 0;  // bytes/s
  double latency = 0;
  std::vector<Transfer> active;
  double last_t = 0;
  std::uint32_t epoch = 0;
};

struct SiteState {
  SimSite* sim = nullptr;
  std::unique_ptr<sched::Scheduler> sched;
  bool down = false;
  std::vector<sched::Event> events;  // for this instant's cycle
  bool wake = false;
  std::set<double> wakes;
  int node_gpus = 0;
  double price = 0;
};

double Percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[static_cast<std::size_t>(q * static_cast<double>(v.size() - 1))];
}

class MultiEngine {
 public:
  MultiEngine(const federation::Sites& fed, std::vector<SimSite>& sites,
              const std::vector<MultiSiteJob>& jobs, const MultiSiteConfig& config)
      : fed_(fed), sim_sites_(sites), inputs_(jobs), config_(config) {}

  Result<MultiSiteResult> Run() {
    if (config_.routing == nullptr) return InvalidArgumentError("no routing policy");
    const std::size_t n = fed_.sites().size();
    if (sim_sites_.size() != n) {
      return InvalidArgumentError(
          fmt::format("{} simulated sites for {} in the sites file", sim_sites_.size(), n));
    }
    for (std::size_t s = 0; s < n; ++s) {
      SiteState st;
      st.sim = &sim_sites_[s];
      for (const auto& node : st.sim->cluster.nodes())
        st.node_gpus = std::max<int>(st.node_gpus, node.gpus);
      st.price = fed_.sites()[s].price_per_gpu_hour;
      auto sched = sched::Scheduler::Create(st.sim->cluster.Clone(), st.sim->scheduler,
                                            {.estimator = st.sim->planner, .waiting_notes = false});
      if (!sched.ok()) {
        return InvalidArgumentError(fmt::format("site '{}': scheduler '{}': {}",
                                                fed_.sites()[s].name, st.sim->scheduler_name,
                                                sched.status().message()));
      }
      st.sched = std::move(*sched);
      sites_.push_back(std::move(st));
    }
    links_.resize(n * n);
    for (std::size_t a = 0; a < n; ++a) {
      for (std::size_t b = 0; b < n; ++b) {
        federation::WanLink l = fed_.Link(static_cast<int>(a), static_cast<int>(b));
        links_[a * n + b].bandwidth = l.bandwidth.value();
        links_[a * n + b].latency = l.latency.value();
      }
    }
    // Jobs, their plans and checkpoints.
    jobs_.resize(inputs_.size());
    double t0 = inputs_.empty() ? 0 : inputs_.front().trace.submit.value();
    for (std::size_t i = 0; i < inputs_.size(); ++i) {
      RETURN_IF_ERROR(InitJob(i));
      queue_.Push(inputs_[i].trace.submit.value(), {Kind::kArrive, 0, i});
      t0 = std::min(t0, inputs_[i].trace.submit.value());
    }
    for (std::size_t s = 0; s < n; ++s) {
      for (const federation::Outage& o : fed_.sites()[s].outages) {
        queue_.Push(t0 + o.start.value(), {Kind::kOutageStart, 0, s, o.duration.value()});
      }
    }
    std::vector<std::size_t> to_route;
    while (!queue_.empty() && ended_ < jobs_.size()) {
      const double t = queue_.top().time;
      to_route.clear();
      while (!queue_.empty() && queue_.top().time == t) {
        auto e = queue_.Pop();
        Handle(t, e.payload, &to_route);
      }
      for (std::size_t s = 0; s < sites_.size(); ++s) RunCycle(s, t);
      for (std::size_t j : to_route) RETURN_IF_ERROR(RouteJob(j, t));
      last_t_ = t;
    }
    return Finalize(t0);
  }

 private:
  Status InitJob(std::size_t i) {
    const MultiSiteJob& in = inputs_[i];
    Job& j = jobs_[i];
    j.in = &in;
    j.rec.id = in.trace.id;
    j.rec.tenant = in.trace.tenant.empty() ? "default" : in.trace.tenant;
    j.rec.gpus = in.trace.gpus;
    j.rec.home_site = in.home_site;
    j.rec.submit_s = in.trace.submit.value();
    j.home = fed_.Find(in.home_site);
    if (!in.home_site.empty() && j.home < 0) {
      return InvalidArgumentError(
          fmt::format("job '{}': unknown home site '{}'", in.trace.id, in.home_site));
    }
    const std::size_t n = sites_.size();
    j.has_plan.assign(n, false);
    j.plan_key.assign(n, 0);
    const std::string_view kind = in.trace.kind;
    constexpr std::string_view kPretrain = "pretrain/";
    if (kind.size() > kPretrain.size() && kind.substr(0, kPretrain.size()) == kPretrain &&
        j.home >= 0 && sites_[j.home].sim->planner != nullptr && in.trace.duration) {
      const std::string_view model = kind.substr(kPretrain.size());
      for (std::size_t s = 0; s < n; ++s) {
        planning::PlannerEstimator* p = sites_[s].sim->planner;
        if (p == nullptr || in.trace.gpus > sites_[s].sim->cluster.counts().total) continue;
        auto key = p->BestPlan(model, in.trace.gpus);
        if (key.ok() && key->has_value()) {
          j.has_plan[s] = true;
          j.plan_key[s] = **key;
        }
      }
      if (j.has_plan[j.home]) {
        j.steps = in.trace.duration->value() /
                  sites_[j.home].sim->planner->compact_step(j.plan_key[j.home]).value();
      }
    }
    return Status::Ok();
  }

  bool Planned(const Job& j, std::size_t s) const { return j.steps > 0 && j.has_plan[s]; }

  // Run time of the whole job on a compact placement at site s.
  double WorkAt(const Job& j, std::size_t s) const {
    if (Planned(j, s)) return j.steps * sites_[s].sim->planner->compact_step(j.plan_key[s]).value();
    return j.in->trace.duration ? j.in->trace.duration->value() : 0;
  }

  // The scheduler's spec for job `i` at site s (id not set).
  Result<sched::GangJob> Spec(std::size_t i, std::size_t s) const {
    const Job& j = jobs_[i];
    SimConfig sc;
    sc.checkpoint_interval = config_.checkpoint_interval;
    sc.restart_cost = config_.restart_cost;
    sc.max_retries = config_.max_retries;
    sc.grace_period = config_.grace_period;
    ASSIGN_OR_RETURN(sched::GangJob g, ToGangJob(j.in->trace, sc, sites_[s].node_gpus));
    g.estimated_runtime = Seconds(std::max(0.0, 1 - j.done) * WorkAt(j, s) +
                                  (j.done > 0 ? config_.restart_cost.value() : 0));
    if (Planned(j, s)) {
      g.has_plan = true;
      g.plan_key = j.plan_key[s];
    }
    return g;
  }

  void Handle(double t, const Payload& p, std::vector<std::size_t>* to_route) {
    switch (p.kind) {
      case Kind::kArrive:
        to_route->push_back(p.index);
        jobs_[p.index].pending_route = true;
        return;
      case Kind::kTransferDone:
        LinkChanged(p.index, t, p.epoch);
        return;
      case Kind::kStaged: {
        Job& j = jobs_[p.index];
        if (j.phase != Phase::kStaging || j.routing != p.epoch) return;
        j.rec.staging_s += t - j.staging_from;
        Submit(p.index, t);
        return;
      }
      case Kind::kFinish: {
        Job& j = jobs_[p.index];
        if (j.phase != Phase::kRunning || j.attempt != p.epoch) return;
        SiteState& st = sites_[j.site];
        StopRunning(j, t);
        j.done = 1;
        st.events.push_back(sched::Event::Finish(sched::JobId(j.sched_id)));
        j.rec.site = fed_.sites()[j.site].name;
        j.rec.work_s = WorkAt(j, j.site);
        End(j, t, SiteJobOutcome::kCompleted, "");
        return;
      }
      case Kind::kOutageStart:
        Outage(p.index, t, to_route);
        queue_.Push(t + p.value, {Kind::kOutageEnd, 0, p.index});
        return;
      case Kind::kOutageEnd:
        sites_[p.index].down = false;
        // Jobs held at the broker try again.
        for (std::size_t i : held_) {
          if (!jobs_[i].pending_route) {
            jobs_[i].pending_route = true;
            to_route->push_back(i);
          }
        }
        held_.clear();
        return;
      case Kind::kWake: {
        SiteState& st = sites_[p.index];
        st.wakes.erase(t);
        st.wake = true;
        return;
      }
    }
  }

  void PushWake(std::size_t s, double t) {
    if (sites_[s].wakes.insert(t).second) queue_.Push(t, {Kind::kWake, 0, s});
  }

  // The site's compute goes down: every job routed there goes back to the broker.
  void Outage(std::size_t s, double t, std::vector<std::size_t>* to_route) {
    SiteState& st = sites_[s];
    st.down = true;
    for (std::size_t i = 0; i < jobs_.size(); ++i) {
      Job& j = jobs_[i];
      if (j.site != static_cast<int>(s)) continue;
      switch (j.phase) {
        case Phase::kRunning:
          Interrupt(j, t, t);
          st.events.push_back(sched::Event::Cancel(sched::JobId(j.sched_id)));
          break;
        case Phase::kQueued:
          st.events.push_back(sched::Event::Cancel(sched::JobId(j.sched_id)));
          break;
        case Phase::kStaging:
          CancelTransfers(i, t);
          j.rec.staging_s += t - j.staging_from;
          break;
        case Phase::kBroker:
        case Phase::kEnded:
          continue;
      }
      j.phase = Phase::kBroker;
      j.site = -1;
      ++j.routing;
      if (!j.pending_route) {
        j.pending_route = true;
        to_route->push_back(i);
      }
    }
  }

  // Checkpoints the attempt has written by `t`: progress saved and work lost.
  void Interrupt(Job& j, double t, double held_until) {
    double last_ckpt = j.bind_t;
    double saved = j.saved;
    const double interval = config_.checkpoint_interval.value();
    if (interval > 0 && t > j.run_from) {
      const double k = std::floor((t - j.run_from) / interval);
      if (k >= 1) {
        last_ckpt = j.run_from + k * interval;
        saved = std::min(1.0, j.done_at_run_from + k * interval / (j.slowdown * j.work_s));
        j.ckpt_site = j.site;
      }
    }
    j.saved = saved;
    j.done = saved;
    j.rec.lost_gpu_s += std::max(0.0, t - last_ckpt) * j.rec.gpus;
    StopRunning(j, held_until);
  }

  void StopRunning(Job& j, double held_until) {
    CHECK(j.phase == Phase::kRunning);
    const double held = std::max(0.0, held_until - j.bind_t);
    j.rec.run_s += held;
    j.rec.cost += held / 3600 * j.rec.gpus * sites_[j.site].price;
    ++j.attempt;
    j.phase = Phase::kQueued;  // the caller moves it on
  }

  void End(Job& j, double t, SiteJobOutcome outcome, std::string reason) {
    j.phase = Phase::kEnded;
    j.rec.end_s = t;
    j.rec.outcome = outcome;
    j.rec.reason = std::move(reason);
    ++ended_;
  }

  void Submit(std::size_t i, double t) {
    Job& j = jobs_[i];
    auto spec = Spec(i, j.site);
    SiteState& st = sites_[j.site];
    if (!spec.ok()) {  // cannot happen for a job a site's what-if accepted; end it, saying why
      End(j, t, SiteJobOutcome::kRejected, std::string(spec.status().message()));
      return;
    }
    j.sched_id = ++next_sched_id_;
    owner_.push_back(i);
    spec->id = sched::JobId(j.sched_id);
    spec->submit_time = TimePoint{Seconds(t)};
    j.phase = Phase::kQueued;
    st.events.push_back(sched::Event::Submit(*std::move(spec)));
  }

  void RunCycle(std::size_t s, double t) {
    SiteState& st = sites_[s];
    if (st.events.empty() && !st.wake) return;
    std::vector<sched::Event> events;
    events.swap(st.events);
    st.wake = false;
    sched::Decisions d = st.sched->RunCycle({TimePoint{Seconds(t)}, events});
    Apply(s, t, d);
  }

  Job& Owner(sched::JobId id) { return jobs_[owner_[id.value() - 1]]; }

  void Apply(std::size_t s, double t, const sched::Decisions& d) {
    // No node fails in this simulator: a replacement would be a broken invariant.
    CHECK(d.replacements.empty());
    for (const auto& r : d.requeues) {
      Job& j = Owner(r.job);
      if (j.phase != Phase::kRunning) continue;
      Interrupt(j, t, t);
    }
    for (const auto& r : d.rejections) {
      Job& j = Owner(r.job);
      if (j.phase == Phase::kEnded || j.site != static_cast<int>(s)) continue;
      if (j.phase == Phase::kRunning) Interrupt(j, t, t);
      End(j, t, SiteJobOutcome::kRejected, fmt::format("{}: {}", r.plugin, r.reason));
    }
    for (const auto& p : d.preemptions) {
      Job& j = Owner(p.victim);
      if (j.phase != Phase::kRunning) continue;
      Interrupt(j, t, p.release_at.since_epoch.value());
      ++j.rec.preemptions;
      PushWake(s, p.release_at.since_epoch.value());
    }
    for (const auto& b : d.binds) {
      const std::size_t i = owner_[b.job.value() - 1];
      Job& j = jobs_[i];
      // Exactly once: bound only at the site it was routed to, and never while running anywhere.
      CHECK(j.site == static_cast<int>(s));
      CHECK(j.phase == Phase::kQueued);
      CHECK(j.sched_id == b.job.value());
      j.phase = Phase::kRunning;
      ++j.rec.runs;
      if (j.rec.first_start_s < 0) j.rec.first_start_s = t;
      j.bind_t = t;
      j.run_from = t + (j.done > 0 ? config_.restart_cost.value() : 0);
      j.done_at_run_from = j.done;
      j.work_s = std::max(WorkAt(j, s), 1e-9);
      j.slowdown = Slowdown(j, s, b.placement);
      ++j.attempt;
      const double finish = j.run_from + std::max(0.0, 1 - j.done) * j.work_s * j.slowdown;
      queue_.Push(finish, {Kind::kFinish, j.attempt, i});
    }
    if (d.wake_at && d.wake_at->since_epoch.value() > t)
      PushWake(s, d.wake_at->since_epoch.value());
  }

  double Slowdown(const Job& j, std::size_t s, const sched::Placement& p) const {
    double x = level_slowdown_[static_cast<int>(p.span)];
    if (Planned(j, s)) {
      sched::GangJob g;
      g.gpus = j.rec.gpus;
      g.has_plan = true;
      g.plan_key = j.plan_key[s];
      x = sites_[s].sim->planner->Slowdown(g, sched::RankOrder(p));
    }
    return std::isfinite(x) && x >= 1 ? x : 1.0;
  }

  // Routes job i at t: what-ifs, Route, then staging (or submission when nothing moves).
  Status RouteJob(std::size_t i, double t) {
    Job& j = jobs_[i];
    j.pending_route = false;
    if (j.phase != Phase::kBroker) return Status::Ok();
    const bool first_attempt = j.route_attempts++ == 0;
    const std::size_t n = sites_.size();
    std::vector<federation::SiteAnswer> answers(n);
    federation::JobNeeds needs;
    needs.name = j.rec.id;
    needs.gpus = j.rec.gpus;
    needs.home_site = j.in->home_site;
    needs.datasets = j.in->datasets;
    needs.require_regions = j.in->require_regions;
    needs.exclude_regions = j.in->exclude_regions;
    if (j.ckpt_site >= 0) {
      needs.checkpoint_site = fed_.sites()[j.ckpt_site].name;
      needs.checkpoint_size = j.in->checkpoint_size;
    }
    needs.estimated_runtime = Seconds(std::max(0.0, 1 - j.done) *
                                      (j.in->trace.duration ? j.in->trace.duration->value() : 0));
    bool any_down = false;
    for (std::size_t s = 0; s < n; ++s) {
      SiteState& st = sites_[s];
      federation::SiteAnswer& a = answers[s];
      if (st.down) {
        any_down = true;
        continue;
      }
      a.reachable = true;
      const auto& counts = st.sched->state().cluster().counts();
      a.total_gpus = counts.total;
      a.free_gpus = std::max(0, counts.total - counts.allocated - counts.unavailable);
      auto spec = Spec(i, s);
      if (!spec.ok()) {
        a.refusal = std::string(spec.status().message());
        continue;
      }
      spec->id = sched::JobId(0);
      ++whatifs_;
      auto w = st.sched->WhatIf(TimePoint{Seconds(t)}, *spec, config_.whatif_max_cycles);
      if (!w.ok()) {
        a.refusal = std::string(w.status().message());
        continue;
      }
      a.estimated_start = w->forecast.estimated_start;
      if (!a.estimated_start) {
        // Unknown within the projection's bound: later than anything it saw. Counted as the
        // furthest point Route can compare, so a site that can say beats one that cannot.
        a.estimated_start = TimePoint{Seconds(t + kUnknownStartPenalty.value())};
      }
      a.queue_position = w->forecast.position;
      if (w->gpu != nullptr) a.gpu_type = w->gpu->name;
      // The planner's step time on the placement the what-if found (compact when it found
      // none), as the site's what-if endpoint answers it; 0 for a job without a plan here.
      if (Planned(j, s)) {
        double slow = w->placement.empty() ? 1.0 : Slowdown(j, s, w->placement);
        a.step_time = st.sim->planner->compact_step(j.plan_key[s]) * slow;
      }
    }
    if (j.in->deadline && first_attempt) {
      needs.deadline = TimePoint{Seconds(j.rec.submit_s)} + *j.in->deadline;
    }
    // Route's run time: remaining steps x a site's step time where it priced the job, else the
    // remaining trace duration.
    if (j.steps > 0) needs.steps = std::max<std::int64_t>(1, std::llround(j.steps * (1 - j.done)));
    auto d = federation::Route(needs, fed_, answers, TimePoint{Seconds(t)}, *config_.routing);
    if (!d.ok()) {
      if (d.status().code() == StatusCode::kUnavailable && any_down) {
        held_.push_back(i);
        return Status::Ok();
      }
      End(j, t, SiteJobOutcome::kRejected, std::string(d.status().message()));
      return Status::Ok();
    }
    j.rec.explanation = d->explanation;
    ++j.rec.routings;
    j.site = d->site;
    j.phase = Phase::kStaging;
    j.staging_from = t;
    j.staged_at = t;
    j.transfers_left = 0;
    ++j.routing;
    // Inputs not stored at the site: datasets from the nearest holder, then the checkpoint.
    const int to = d->site;
    for (const std::string& name : j.in->datasets) {
      int best = -1;
      Bytes size(0);
      double best_t = std::numeric_limits<double>::infinity();
      for (std::size_t h = 0; h < n; ++h) {
        const federation::Dataset* ds = fed_.sites()[h].FindDataset(name);
        if (ds == nullptr) continue;
        double tt = federation::TransferTime(ds->size, fed_.Link(static_cast<int>(h), to)).value();
        if (tt < best_t) {
          best_t = tt;
          best = static_cast<int>(h);
          size = ds->size;
        }
      }
      if (best >= 0 && best != to) StartTransfer(i, best, to, size.value(), t);
    }
    if (j.ckpt_site >= 0 && j.ckpt_site != to) {
      StartTransfer(i, j.ckpt_site, to, j.in->checkpoint_size.value(), t);
    }
    if (j.transfers_left == 0) queue_.Push(j.staged_at, {Kind::kStaged, j.routing, i});
    return Status::Ok();
  }

  std::size_t LinkIndex(int from, int to) const {
    return static_cast<std::size_t>(from) * sites_.size() + static_cast<std::size_t>(to);
  }

  // Advances every transfer on link `l` to t at its equal share.
  void Progress(Link& link, double t) {
    if (!link.active.empty() && t > link.last_t) {
      const double share = link.bandwidth / static_cast<double>(link.active.size());
      for (Transfer& x : link.active) x.remaining -= share * (t - link.last_t);
    }
    link.last_t = std::max(link.last_t, t);
  }

  void Reschedule(std::size_t l, double t) {
    Link& link = links_[l];
    ++link.epoch;
    if (link.active.empty()) return;
    double least = std::numeric_limits<double>::infinity();
    for (const Transfer& x : link.active) least = std::min(least, std::max(0.0, x.remaining));
    const double when = t + least * static_cast<double>(link.active.size()) / link.bandwidth;
    queue_.Push(when, {Kind::kTransferDone, link.epoch, l});
  }

  void StartTransfer(std::size_t i, int from, int to, double bytes, double t) {
    Job& j = jobs_[i];
    const std::size_t l = LinkIndex(from, to);
    Link& link = links_[l];
    j.rec.bytes_staged += bytes;
    if (bytes <= 0) {
      j.staged_at = std::max(j.staged_at, t + link.latency);
      return;
    }
    ++j.transfers_left;
    Progress(link, t);
    link.active.push_back({i, bytes, j.routing});
    Reschedule(l, t);
  }

  void LinkChanged(std::size_t l, double t, std::uint32_t epoch) {
    Link& link = links_[l];
    if (epoch != link.epoch) return;
    Progress(link, t);
    // A transfer is done when less than a byte is left (floating-point residue).
    std::vector<Transfer> keep;
    for (const Transfer& x : link.active) {
      if (x.remaining > 1.0) {
        keep.push_back(x);
        continue;
      }
      Job& j = jobs_[x.job];
      if (j.phase != Phase::kStaging || j.routing != x.routing) continue;
      j.staged_at = std::max(j.staged_at, t + link.latency);
      if (--j.transfers_left == 0) queue_.Push(j.staged_at, {Kind::kStaged, j.routing, x.job});
    }
    link.active.swap(keep);
    Reschedule(l, t);
  }

  void CancelTransfers(std::size_t i, double t) {
    for (std::size_t l = 0; l < links_.size(); ++l) {
      Link& link = links_[l];
      bool has = false;
      for (const Transfer& x : link.active) has = has || x.job == i;
      if (!has) continue;
      Progress(link, t);
      std::erase_if(link.active, [i](const Transfer& x) { return x.job == i; });
      Reschedule(l, t);
    }
    jobs_[i].transfers_left = 0;
  }

  Result<MultiSiteResult> Finalize(double t0) {
    MultiSiteResult out;
    MultiSiteSummary& s = out.summary;
    s.routing = std::string(config_.routing->name);
    s.completed_per_site.assign(sites_.size(), 0);
    std::vector<double> jcts;
    double wait = 0, staging = 0, lost = 0, end = t0;
    for (Job& j : jobs_) {
      if (j.phase != Phase::kEnded) {
        if (j.phase == Phase::kRunning) StopRunning(j, last_t_);
        j.rec.outcome = SiteJobOutcome::kUnfinished;
        j.rec.reason = j.site >= 0 ? "still at its site when nothing else could happen"
                                   : "held at the broker: no site could take it";
        if (j.site >= 0) j.rec.site = fed_.sites()[j.site].name;
      }
      const SiteJobRecord& r = j.rec;
      ++s.jobs;
      s.bytes_staged += r.bytes_staged;
      s.cost += r.cost;
      lost += r.lost_gpu_s;
      s.reroutes += std::max(0, r.routings - 1);
      end = std::max(end, r.end_s);
      switch (r.outcome) {
        case SiteJobOutcome::kCompleted: {
          ++s.completed;
          jcts.push_back(r.jct_s());
          wait += r.wait_s();
          staging += r.staging_s;
          int at = fed_.Find(r.site);
          if (at >= 0) ++s.completed_per_site[at];
          if (r.site != r.home_site) ++s.away_from_home;
          break;
        }
        case SiteJobOutcome::kRejected:
          ++s.rejected;
          break;
        case SiteJobOutcome::kUnfinished:
          ++s.unfinished;
          break;
      }
      out.jobs.push_back(r);
    }
    if (!jcts.empty()) {
      double sum = 0;
      for (double x : jcts) sum += x;
      const double c = static_cast<double>(jcts.size());
      s.mean_jct_s = sum / c;
      s.mean_wait_s = wait / c;
      s.mean_staging_s = staging / c;
      s.median_jct_s = Percentile(jcts, 0.5);
      s.p90_jct_s = Percentile(jcts, 0.9);
    }
    s.lost_gpu_hours = lost / 3600;
    s.whatifs = whatifs_;
    s.makespan_s = end - t0;
    return out;
  }

  // A site that cannot say when it would start a job (beyond its projection's bound) is taken to
  // start it this much later: 30 days, beyond any start a bounded projection of these workloads
  // reaches, so such a site loses to any that can say.
  static constexpr Seconds kUnknownStartPenalty = Seconds(30 * 86400.0);

  const federation::Sites& fed_;
  std::vector<SimSite>& sim_sites_;
  const std::vector<MultiSiteJob>& inputs_;
  const MultiSiteConfig& config_;
  const std::array<double, topo::kLevelCount> level_slowdown_ = SimConfig{}.level_slowdown;
  std::vector<SiteState> sites_;
  std::vector<Link> links_;
  std::vector<Job> jobs_;
  std::vector<std::size_t> owner_;  // scheduler id - 1 -> job
  std::vector<std::size_t> held_;   // jobs waiting at the broker for a site to come back
  EventQueue<Payload> queue_;
  std::uint64_t next_sched_id_ = 0;
  std::size_t ended_ = 0;
  std::int64_t whatifs_ = 0;
  double last_t_ = 0;
};

}  // namespace

std::string_view SiteJobOutcomeName(SiteJobOutcome o) {
  switch (o) {
    case SiteJobOutcome::kCompleted:
      return "completed";
    case SiteJobOutcome::kRejected:
      return "rejected";
    case SiteJobOutcome::kUnfinished:
      return "unfinished";
  }
  return "unknown";
}

Result<MultiSiteResult> RunMultiSite(const federation::Sites& federation,
                                     std::vector<SimSite>& sites,
                                     const std::vector<MultiSiteJob>& jobs,
                                     const MultiSiteConfig& config) {
  MultiEngine engine(federation, sites, jobs, config);
  return engine.Run();
}

}  // namespace baton::sim
