// eta_bench: how good is the scheduler's estimated start (Scheduler::Forecast, issue 16 item 2)?
// Replays ITP cluster04 (576 GPUs) in the simulator under the daemon's scheduler config files
// (data/scheduler/*.yaml). After the cycle in which a job is submitted it asks the scheduler for
// that job's estimated start, and at the end compares it with the job's actual first start:
// median and p90 absolute error over every job with an estimate, and over those that waited at
// least a minute; how many had no estimate; and what one forecast costs (the submitted jobs'
// forecast, and every 50th submit cycle a full forecast of the whole queue, as the daemon runs).
// The simulator's runtime estimates are the trace's actual durations (ITP has no requested
// time), so the error comes from what a forecast cannot know: later arrivals that go ahead,
// placements slower than their estimate (a gang across leaves runs 5-15 % longer), failures
// (off here) and preemptions.
// Usage: eta_bench [TRACE.csv] [--stride N] [--whatif-only]  (forecast every Nth submit cycle;
// default 1; --whatif-only: only the what-if latency table).
// Skips, saying so, when the trace is absent (../shared/data/traces, or $BATON_TRACES_DIR).
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/rng.h"
#include "core/strings.h"
#include "sched/framework/scheduler.h"
#include "sim/engine/simulator.h"
#include "topology/builders/fabrics.h"

namespace {

using Clock = std::chrono::steady_clock;

double Quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t i =
      std::min(v.size() - 1, static_cast<std::size_t>(std::lround(q * (v.size() - 1))));
  return v[i];
}

std::string Duration(double s) {
  if (s < 120) return fmt::format("{:.0f} s", s);
  if (s < 7200) return fmt::format("{:.1f} min", s / 60);
  return fmt::format("{:.1f} h", s / 3600);
}

void Run(const std::string& trace, const std::string& config_path, int stride) {
  auto config = baton::sched::LoadSchedulerConfigFile(config_path);
  baton::topo::FatTreeParams p;  // as sim_bench: 72 nodes x 8 GPUs
  p.layout.nodes = 72;
  p.tiers = 3;
  p.nodes_per_leaf = 16;
  p.leaves_per_spine = 8;
  auto cluster = baton::topo::BuildFatTree(p);
  auto reader = baton::sim::OpenTrace(trace);
  if (!config.ok() || !cluster.ok() || !reader.ok()) {
    fmt::print("cannot set up: {} {} {}\n", config.status().ToString(), cluster.status().ToString(),
               reader.status().ToString());
    return;
  }
  baton::sim::SimConfig sim;
  sim.policy = std::filesystem::path(config_path).stem().string();
  sim.scheduler = *config;

  std::map<std::uint64_t, double> estimate;  // scheduler id -> estimated start (s)
  std::uint64_t next_id = 1;
  std::int64_t submit_cycles = 0, unknown = 0;
  std::vector<double> cost_s, full_cost_s, full_queue, cycles;
  sim.after_cycle = [&](const baton::sched::Scheduler& s, baton::TimePoint now,
                        const baton::sched::Decisions&) {
    std::vector<baton::sched::JobId> fresh;
    bool any = false;
    for (auto it = s.jobs().lower_bound(baton::sched::JobId(next_id)); it != s.jobs().end(); ++it) {
      any = true;
      next_id = std::max(next_id, it->first.value() + 1);
      if (it->second.phase == baton::sched::JobPhase::kPending) {
        fresh.push_back(it->first);
      } else if (it->second.start == now) {
        estimate[it->first.value()] = now.since_epoch.value();  // placed on arrival
      }
    }
    if (!any) return;
    if (submit_cycles++ % stride != 0 || fresh.empty()) return;
    const auto t0 = Clock::now();
    const baton::sched::QueueForecast f = s.Forecast(now, {.jobs = fresh, .max_cycles = 20000});
    cost_s.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
    cycles.push_back(f.cycles);
    for (const auto& j : f.jobs) {
      if (std::find(fresh.begin(), fresh.end(), j.job) == fresh.end()) continue;
      if (j.estimated_start) {
        estimate[j.job.value()] = j.estimated_start->since_epoch.value();
      } else {
        ++unknown;
      }
    }
    if (submit_cycles % 50 == 1) {
      const auto t1 = Clock::now();
      const baton::sched::QueueForecast all = s.Forecast(now, {.max_cycles = 500});
      full_cost_s.push_back(std::chrono::duration<double>(Clock::now() - t1).count());
      full_queue.push_back(static_cast<double>(all.jobs.size()));
    }
  };
  const auto t0 = Clock::now();
  auto r = baton::sim::RunSimulation(std::move(*cluster), sim, **reader);
  const double wall = std::chrono::duration<double>(Clock::now() - t0).count();
  if (!r.ok()) {
    fmt::print("{}: {}\n", sim.policy, r.status().ToString());
    return;
  }
  std::vector<double> err, err_waited, signed_waited;
  std::int64_t waited = 0;
  for (std::size_t i = 0; i < r->jobs.size(); ++i) {
    const baton::sim::JobRecord& j = r->jobs[i];
    if (j.first_start_s < 0) continue;
    if (j.wait_s() >= 60) ++waited;
    auto it = estimate.find(i + 1);
    if (it == estimate.end()) continue;
    const double e = it->second - j.first_start_s;
    err.push_back(std::abs(e));
    if (j.wait_s() >= 60) {
      err_waited.push_back(std::abs(e));
      signed_waited.push_back(e);
    }
  }
  fmt::print(
      "| {} | {} | {} ({:.0f} %) | {} / {} | {} ({}) | {} / {} | {} | {:.2f} / {:.2f} ms | "
      "{:.1f} / {:.1f} ms ({:.0f} jobs) | {:.0f} s |\n",
      sim.policy, r->jobs.size(), err.size(),
      100.0 * err.size() / std::max<std::size_t>(1, r->jobs.size()), Duration(Quantile(err, 0.5)),
      Duration(Quantile(err, 0.9)), err_waited.size(), waited, Duration(Quantile(err_waited, 0.5)),
      Duration(Quantile(err_waited, 0.9)), Duration(Quantile(signed_waited, 0.5)),
      1e3 * Quantile(cost_s, 0.5), 1e3 * Quantile(cost_s, 0.9), 1e3 * Quantile(full_cost_s, 0.5),
      1e3 * Quantile(full_cost_s, 0.9), Quantile(full_queue, 0.5), wall);
  if (unknown > 0) fmt::print("  ({} forecasts had no estimate)\n", unknown);
}

// The what-if (issue 17 item 2: <= 10 ms) on a busy cluster (superpod-h100: 1,024 GPUs;
// fat-tree-h100: 4,096): running jobs of 8-256 GPUs fill it, a FIFO queue of `extra` more jobs
// (and whatever did not fit) waits under data/scheduler/backfill.yaml; then what-ifs for jobs of
// the same mix. Scheduler::WhatIf projects until the asked-for job starts. Timed:
//   reference  every projected cycle run with the job (WhatIf(..., reference = true): the
//              algorithm before the shared projection, kept as the tests' reference);
//   first      the first what-if after a cycle (it also builds the shared projection);
//   shared     what-ifs at the same `now` while nothing changes (the projection is shared);
//   later now  what-ifs at a `now` 50 ms apart over 10 s, as a daemon's clock gives them.
// Each reference ask is also answered the shared way; "same" counts identical answers (start,
// unknown, kind, position, placement).
void WhatIfLatency(const char* preset, int extra, int reference_asks) {
  auto cluster = baton::topo::BuildPreset(preset);
  auto config = baton::sched::LoadSchedulerConfigFile(std::string(BATON_SCHEDULER_CONFIG_DIR) +
                                                      "/backfill.yaml");
  if (!cluster.ok() || !config.ok()) {
    fmt::print("cannot set up the what-if cluster\n");
    return;
  }
  const int gpus = cluster->counts().total;
  auto s = baton::sched::Scheduler::Create(std::move(*cluster), *config);
  if (!s.ok()) {
    fmt::print("cannot set up the scheduler: {}\n", s.status().ToString());
    return;
  }
  baton::Rng rng(7);
  const int sizes[] = {8, 8, 16, 32, 64, 128, 256};
  auto job = [&](std::uint64_t id) {
    baton::sched::GangJob j;
    j.id = baton::sched::JobId(id);
    j.name = fmt::format("j{}", id);
    j.gpus = sizes[rng.UniformInt(0, 6)];
    j.estimated_runtime = baton::Seconds(rng.UniformInt(600, 36000));
    return j;
  };
  std::uint64_t id = 1;
  std::vector<baton::sched::Event> ev;
  const int fill = 200 * gpus / 1024;  // as many jobs per GPU as on superpod-h100
  const int submits = fill + extra;
  ev.reserve(static_cast<std::size_t>(submits));
  for (int i = 0; i < submits; ++i) ev.push_back(baton::sched::Event::Submit(job(id++)));
  (*s)->RunCycle({baton::TimePoint{baton::Seconds(0)}, ev});
  int running = 0;
  for (const auto& [jid, j] : (*s)->jobs()) running += j.phase == baton::sched::JobPhase::kRunning;
  const baton::TimePoint one{baton::Seconds(1)};
  auto timed = [](auto&& f) {
    const auto t0 = Clock::now();
    f();
    return 1e3 * std::chrono::duration<double>(Clock::now() - t0).count();
  };
  std::vector<double> reference, first, shared, later;
  int same = 0;
  std::uint64_t ask = 100000;
  for (int i = 0; i < reference_asks; ++i) {
    const baton::sched::GangJob j = job(ask++);
    std::optional<baton::Result<baton::sched::WhatIfAnswer>> r;
    reference.push_back(timed([&] { r.emplace((*s)->WhatIf(one, j, 2000, /*reference=*/true)); }));
    auto a = (*s)->WhatIf(one, j);
    const auto& ra = *r;
    if (ra.ok() && a.ok() && ra->forecast.estimated_start == a->forecast.estimated_start &&
        ra->forecast.unknown == a->forecast.unknown && ra->forecast.kind == a->forecast.kind &&
        ra->forecast.position == a->forecast.position && ra->placement == a->placement) {
      ++same;
    }
  }
  for (int i = 0; i < 10; ++i) {
    (*s)->RunCycle({one, {}});  // decides nothing new, but starts a new shared projection
    const baton::sched::GangJob j = job(ask++);
    first.push_back(timed([&] { (void)(*s)->WhatIf(one, j); }));
  }
  const std::uint64_t reused0 = (*s)->whatif_reused();
  for (int i = 0; i < 200; ++i) {
    const baton::sched::GangJob j = job(ask++);
    shared.push_back(timed([&] { (void)(*s)->WhatIf(one, j); }));
  }
  for (int i = 0; i < 200; ++i) {
    const baton::sched::GangJob j = job(ask++);
    const baton::TimePoint at{baton::Seconds(1 + 0.05 * i)};
    later.push_back(timed([&] { (void)(*s)->WhatIf(at, j); }));
  }
  fmt::print(
      "| {} ({} GPUs) | {} | {} | {:.1f} / {:.1f} ms | {:.1f} / {:.1f} ms | {:.2f} / {:.2f} ms | "
      "{:.2f} / {:.2f} ms | {} of 400 | {} of {} |\n",
      preset, gpus, running, (*s)->jobs().size() - running, Quantile(reference, 0.5),
      Quantile(reference, 0.9), Quantile(first, 0.5), Quantile(first, 0.9), Quantile(shared, 0.5),
      Quantile(shared, 0.9), Quantile(later, 0.5), Quantile(later, 0.9),
      (*s)->whatif_reused() - reused0, same, reference_asks);
}

}  // namespace

int main(int argc, char** argv) {
  const char* env = std::getenv("BATON_TRACES_DIR");
  std::string trace = std::string(env ? env : BATON_TRACES_DIR) + "/itp/cluster04.csv";
  int stride = 1;
  bool whatif_only_flag = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--whatif-only") {
      whatif_only_flag = true;
    } else if (a == "--stride" && i + 1 < argc) {
      const std::optional<std::int64_t> n = baton::ParseInt64(argv[++i]);
      if (!n || *n < 1) {
        fmt::print(stderr, "eta_bench: --stride wants a positive integer\n");
        return 2;
      }
      stride = static_cast<int>(*n);
    } else {
      trace = a;
    }
  }
  const bool whatif_only = whatif_only_flag;
  fmt::print("what-if latency (Scheduler::WhatIf), median / p90\n\n");
  fmt::print(
      "| cluster | running | queued | reference | first after a cycle | shared, same now | "
      "shared, later now | reused | same answer |\n|---|---|---|---|---|---|---|---|---|\n");
  for (int extra : {0, 100, 300}) WhatIfLatency("superpod-h100", extra, 20);
  WhatIfLatency("fat-tree-h100", 300, 5);
  fmt::print("\n");
  if (whatif_only) return 0;
  if (!std::filesystem::exists(trace)) {
    fmt::print("skipped the replay: {} is absent (set BATON_TRACES_DIR or pass a trace)\n", trace);
    return 0;
  }
  fmt::print("estimated vs actual start, {} on 576 GPUs, forecast every {} submit cycle(s)\n\n",
             trace, stride);
  fmt::print(
      "| config | jobs | with estimate | abs error median / p90 | waited >= 1 min: estimated "
      "(of) | their error median / p90 | their signed median | forecast at submit median / p90 "
      "| full-queue forecast median / p90 (queue) | replay wall |\n");
  fmt::print("|---|---|---|---|---|---|---|---|---|---|\n");
  for (const char* c : {"backfill", "daemon"}) {
    Run(trace, std::string(BATON_SCHEDULER_CONFIG_DIR) + "/" + c + ".yaml", stride);
  }
  return 0;
}
