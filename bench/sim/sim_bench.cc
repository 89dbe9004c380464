// sim_bench: the simulator's figures for the README. A timing main (not Google Benchmark: one
// replay is the unit of work and takes about a second).
//   1. engine events/s: the event queue alone (push + pop in (time, seq) order), one core
//   2. end-to-end events/s and wall time of a full replay of ITP cluster04 (15,802 jobs, 576 GPUs)
//      per policy, with and without Llama 3-rate node failures
//   3. peak RSS of the process
// Reads the trace from ../shared/data/traces (or $BATON_TRACES_DIR); skips those runs, saying
// so, when it is absent.
#include <fmt/format.h>
#include <sys/resource.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>

#include "sched/framework/presets.h"
#include "sim/engine/event_queue.h"
#include "sim/engine/simulator.h"
#include "topology/builders/fabrics.h"

namespace {

using Clock = std::chrono::steady_clock;

double Since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

void EngineEventsPerSecond() {
  baton::sim::EventQueue<std::uint64_t> q;
  baton::Rng rng(1);
  constexpr int kLive = 20000;  // pending events, as in a replay
  constexpr std::int64_t kOps = 20'000'000;
  double t = 0;
  for (int i = 0; i < kLive; ++i) q.Push(rng.Exponential(3600), i);
  const auto t0 = Clock::now();
  std::uint64_t sink = 0;
  for (std::int64_t i = 0; i < kOps; ++i) {
    auto e = q.Pop();
    t = e.time;
    sink += e.payload;
    q.Push(t + rng.Exponential(3600), e.payload);
  }
  const double s = Since(t0);
  fmt::print("engine: {:.1f} M events/s (pop + push, {} pending){}\n", kOps / s / 1e6, kLive,
             sink == 0 ? " " : "");
}

void Replay(const std::string& trace, bool failures) {
  fmt::print("\nITP cluster04 replay on 576 GPUs, failures {}:\n", failures ? "on" : "off");
  fmt::print("{:<10} {:>9} {:>9} {:>12} {:>10}\n", "policy", "wall s", "events", "events/s",
             "cycles");
  for (const auto& policy : baton::sched::PolicyNames()) {
    baton::topo::FatTreeParams p;
    p.layout.nodes = 72;
    p.tiers = 3;
    p.nodes_per_leaf = 16;
    p.leaves_per_spine = 8;
    auto cluster = baton::topo::BuildFatTree(p);
    auto reader = baton::sim::OpenTrace(trace);
    if (!cluster.ok() || !reader.ok()) {
      fmt::print("cannot set up: {}\n",
                 reader.ok() ? cluster.status().ToString() : reader.status().ToString());
      return;
    }
    baton::sim::SimConfig config;
    config.policy = policy;
    config.scheduler = *baton::sched::PolicyPreset(policy);
    config.failures = failures;
    const auto t0 = Clock::now();
    auto r = baton::sim::RunSimulation(std::move(*cluster), config, **reader);
    const double s = Since(t0);
    if (!r.ok()) {
      fmt::print("{}: {}\n", policy, r.status().ToString());
      continue;
    }
    fmt::print("{:<10} {:>9.3f} {:>9} {:>12.0f} {:>10}\n", policy, s, r->summary.events,
               r->summary.events / s, r->summary.cycles);
  }
}

}  // namespace

int main() {
  EngineEventsPerSecond();
  const char* env = std::getenv("BATON_TRACES_DIR");
  const std::string dir = env ? env : BATON_TRACES_DIR;
  const std::string trace = dir + "/itp/cluster04.csv";
  if (!std::filesystem::exists(trace)) {
    fmt::print("\nskipped the cluster04 replay: {} is absent (set BATON_TRACES_DIR)\n", trace);
  } else {
    Replay(trace, false);
    Replay(trace, true);
  }
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  fmt::print("\npeak RSS: {:.1f} MiB\n", u.ru_maxrss / 1024.0);
  return 0;
}
