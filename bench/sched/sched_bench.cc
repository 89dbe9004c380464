// Scheduler benchmark (issue 4): on the 131,072-GPU fat-tree preset at 70 % occupancy,
// (1) one placement of a 4,096-GPU gang (goal <= 1 ms median) and (2) one full cycle with 10,000
// pending jobs of mixed sizes (goal <= 100 ms). Occupancy is built from per-node filler jobs:
// most nodes full, some partly used, the rest idle, scattered so that no spine is wholly free.
// Run: build/release/bench/sched/sched_bench --benchmark_repetitions=5
//        --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include <bit>
#include <cstdlib>
#include <map>
#include <memory>
#include <vector>

#include "core/rng.h"
#include "sched/framework/scheduler.h"
#include "sched/plugins/topology/topology.h"
#include "topology/builders/fabrics.h"

namespace baton::sched {
namespace {

constexpr std::uint64_t kFillerBase = 1'000'000;

TimePoint At(double s) { return TimePoint{Seconds(s)}; }

// A scheduler over fat-tree-131k with about 70 % of its GPUs held by filler jobs.
// With `preemptible` fillers (priority 0), the preempt action has victims to search.
std::unique_ptr<Scheduler> Occupied(double* occupancy, SchedulerConfig config = {},
                                    bool preemptible = false) {
  auto cluster = topo::BuildPreset("fat-tree-131k");
  if (!cluster.ok()) std::abort();
  auto made = Scheduler::Create(std::move(cluster).value(), std::move(config));
  if (!made.ok()) std::abort();
  auto s = std::move(made).value();
  Rng rng(42);
  std::vector<Event> events;
  const auto nodes = s->state().cluster().nodes().size();
  for (std::uint32_t n = 0; n < nodes; ++n) {
    const double u = rng.Uniform();
    std::uint64_t mask = 0;
    if (u < 0.62) {
      mask = 0xff;
    } else if (u < 0.80) {
      mask = (1ULL << rng.UniformInt(1, 7)) - 1;  // 1..7 GPUs busy
    }
    if (mask == 0) continue;
    GangJob j;
    j.id = JobId(kFillerBase + n);
    j.name = "filler";
    j.gpus = std::popcount(mask);
    // Unless asked for, fillers are not preemptible; when they are, the benchmark re-adopts the
    // victims after each iteration so that every iteration starts from the same state.
    j.preemptible = preemptible;
    Placement p;
    p.nodes = {{topo::NodeId(n), mask}};
    events.push_back(Event::Adopt(std::move(j), std::move(p), At(0)));
  }
  s->RunCycle({At(0), events});
  const auto& c = s->state().cluster().counts();
  *occupancy = static_cast<double>(c.allocated) / c.total;
  return s;
}

void BM_PlaceGang4096(benchmark::State& state) {
  double occupancy = 0;
  auto s = Occupied(&occupancy);
  std::uint64_t id = 1;
  std::size_t placed = 0;
  int span = 0;
  for (auto _ : state) {
    GangJob j;
    j.id = JobId(id);
    j.name = "gang";
    j.gpus = 4096;
    std::vector<Event> submit = {Event::Submit(std::move(j))};
    Decisions d = s->RunCycle({At(1), submit});
    state.PauseTiming();
    placed += d.binds.size();
    if (!d.binds.empty()) span = static_cast<int>(d.binds[0].placement.span);
    std::vector<Event> done = {Event::Cancel(JobId(id++))};
    s->RunCycle({At(1), done});
    state.ResumeTiming();
  }
  if (placed != static_cast<std::size_t>(state.iterations()))
    state.SkipWithError("the gang was not placed");
  state.counters["occupancy"] = occupancy;
  state.SetLabel(std::string("span=") +
                 std::string(topo::LevelName(static_cast<topo::Level>(span))));
}
BENCHMARK(BM_PlaceGang4096)->Unit(benchmark::kMicrosecond);

class AcceptAll final : public NodeFilter {
 public:
  bool Fits(topo::NodeId) const override { return true; }
};

// The placement search alone (the topology plugin's Propose), without the cycle around it.
void BM_ProposeGang4096(benchmark::State& state) {
  double occupancy = 0;
  auto s = Occupied(&occupancy);
  TopologyPlugin plugin;
  CycleState cycle;
  PluginContext ctx{At(1), s->state(), s->jobs(), cycle};
  JobInfo job;
  job.spec.id = JobId(1);
  job.spec.gpus = 4096;
  job.task_gpus = 8;
  AcceptAll all;
  std::vector<Placement> out;
  for (auto _ : state) {
    out.clear();
    PluginStatus st = plugin.Propose(ctx, job, all, 1, &out);
    benchmark::DoNotOptimize(st);
  }
  if (out.empty()) state.SkipWithError("no placement");
  state.counters["occupancy"] = occupancy;
}
BENCHMARK(BM_ProposeGang4096)->Unit(benchmark::kMicrosecond);

// Mixed sizes: mostly small jobs, some multi-node gangs, a few very large ones.
std::vector<Event> PendingMix(Rng& rng, std::uint64_t first_id, int count) {
  static const int kSizes[] = {1, 1, 1, 2, 2, 4, 4, 8, 8, 8, 16, 16, 32, 64, 128, 256, 512, 1024};
  std::vector<Event> events;
  events.reserve(static_cast<std::size_t>(count));
  for (int i = 0; i < count; ++i) {
    GangJob j;
    j.id = JobId(first_id + static_cast<std::uint64_t>(i));
    j.name = "pending";
    j.gpus = kSizes[rng.UniformInt(0, std::size(kSizes) - 1)];
    j.priority = static_cast<int>(rng.UniformInt(0, 2));
    j.estimated_runtime = Seconds(static_cast<double>(rng.UniformInt(60, 36000)));
    j.submit_time = At(static_cast<double>(i));
    if (j.gpus >= 64 && rng.Bernoulli(0.5)) j.topology.required = topo::Level::kSpine;
    events.push_back(Event::Submit(std::move(j)));
  }
  return events;
}

void BM_FullCycle10kPending(benchmark::State& state) {
  double occupancy = 0;
  SchedulerConfig config;
  if (state.range(0) == 0) config.actions = {"admit", "allocate"};
  const bool preemptible = state.range(0) == 2;
  auto s = Occupied(&occupancy, config, preemptible);
  std::map<JobId, Placement> filler_at;
  for (const auto& [id, job] : s->jobs()) filler_at[id] = job.placement;
  Rng rng(7);
  std::uint64_t next = 1;
  std::size_t binds = 0;
  std::size_t preemptions = 0;
  for (auto _ : state) {
    state.PauseTiming();
    std::vector<Event> events = PendingMix(rng, next, 10000);
    state.ResumeTiming();
    Decisions d = s->RunCycle({At(10000), events});
    state.PauseTiming();
    binds += d.binds.size();
    preemptions += d.preemptions.size();
    std::vector<Event> cancel;
    for (std::uint64_t i = next; i < next + 10000; ++i) cancel.push_back(Event::Cancel(JobId(i)));
    for (const Preemption& pr : d.preemptions) {
      if (pr.victim.value() >= kFillerBase) cancel.push_back(Event::Cancel(pr.victim));
    }
    next += 10000;
    s->RunCycle({At(10000), cancel});
    std::vector<Event> readopt;
    for (const Preemption& pr : d.preemptions) {
      if (pr.victim.value() < kFillerBase) continue;  // a job bound earlier in the cycle
      GangJob j;
      j.id = pr.victim;
      j.name = "filler";
      j.gpus = filler_at.at(pr.victim).gpus();
      j.preemptible = true;
      readopt.push_back(Event::Adopt(std::move(j), filler_at.at(pr.victim), At(0)));
    }
    if (!readopt.empty()) s->RunCycle({At(10000), readopt});
    state.ResumeTiming();
  }
  state.counters["occupancy"] = occupancy;
  state.counters["binds_per_cycle"] = static_cast<double>(binds) / state.iterations();
  state.counters["preemptions_per_cycle"] = static_cast<double>(preemptions) / state.iterations();
  state.SetLabel(state.range(0) == 0   ? "admit,allocate"
                 : state.range(0) == 1 ? "admit,allocate,backfill,preempt"
                                       : "admit,allocate,backfill,preempt; preemptible fillers");
}
// Arg: 0 = admit+allocate; 1 = + backfill + preempt; 2 = the same with preemptible fillers (the
// preempt action's victim search runs for up to max_preemptors_per_cycle blocked jobs).
BENCHMARK(BM_FullCycle10kPending)->Arg(0)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace baton::sched

BENCHMARK_MAIN();
