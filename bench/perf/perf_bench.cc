// perf_bench: how fast the planner is.
//  * BM_Evaluate: full estimator evaluations (structural checks, memory, compute, every
//    collective, pipeline) per second on one core, over a fixed mix of feasible plans.
//  * BM_SearchMegatron1T: the whole default search space for Megatron-1T on 3,072 A100-80GB
//    (global batch 3072), with 1 thread and with every core; reports the space size and the
//    plans/s including the sub-spaces pruned in bulk.
//  * BM_PlannerSlowdown: one call of the scheduler's StepTimeEstimator over the planner
//    (planning::PlannerEstimator::Slowdown) for the planner's best plan of a synthetic
//    pre-training job on `baton sim --cluster-gpus 16384`'s fat-tree, on a placement scattered
//    over every third node; BM_PlacementSlowdownUncached is perf::PlacementSlowdown on the same
//    inputs (system, contexts and the reference step rebuilt on every call).
#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include <memory>
#include <thread>
#include <vector>

#include "perf/placement.h"
#include "perf/search.h"
#include "planning/planner_estimator.h"
#include "topology/builders/fabrics.h"

namespace baton::perf {
namespace {

struct Setup {
  ModelSpec model = *FindModel("megatron-1t");
  TrainingSpec training;
  SystemSpec system;
  Setup() {
    training.global_batch = 3072;
    training.dtype = topo::Dtype::kBf16;
    ShortSystem s;
    s.gpu = "A100-80GB";
    s.gpus = 3072;
    s.nic_gbits_per_gpu = 200;
    s.nodes_per_leaf = 20;
    system = *SystemFromShort(s);
  }
};

const Setup& Inputs() {
  static const Setup* s = new Setup();
  return *s;
}

// Feasible plans of the 1T model, so every evaluation runs the whole estimator.
std::vector<ParallelPlan> FeasiblePlans(const EvalContext& ctx) {
  std::vector<ParallelPlan> plans;
  for (int tp : {4, 8, 16})
    for (int pp : {16, 32, 64, 128})
      for (int mbs : {1, 2})
        for (int vp : {1, 2})
          for (Recompute rc : {Recompute::kSelective, Recompute::kFull})
            for (int zero : {0, 1, 3})
              for (bool ov : {false, true}) {
                ParallelPlan p{.tp = tp,
                               .pp = pp,
                               .dp = 3072 / (tp * pp),
                               .mbs = mbs,
                               .vp = vp,
                               .recompute = rc,
                               .sequence_parallel = true,
                               .zero = zero,
                               .overlap_dp_comm = ov};
                if (3072 % (tp * pp) != 0) continue;
                StepEstimate e;
                Evaluate(ctx, p, 3072, nullptr, &e);
                if (e.feasible()) plans.push_back(p);
              }
  return plans;
}

void BM_Evaluate(benchmark::State& state) {
  const Setup& in = Inputs();
  EvalContext ctx(in.model, in.training, in.system);
  std::vector<ParallelPlan> plans = FeasiblePlans(ctx);
  if (plans.empty()) {
    state.SkipWithError("no feasible plans");
    return;
  }
  std::size_t i = 0;
  StepEstimate e;
  for (auto _ : state) {
    Evaluate(ctx, plans[i], 3072, nullptr, &e);
    benchmark::DoNotOptimize(e.step);
    if (++i == plans.size()) i = 0;
  }
  state.counters["evals_per_s"] =
      benchmark::Counter(static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
  state.counters["plans_in_mix"] = static_cast<double>(plans.size());
}
BENCHMARK(BM_Evaluate);

void BM_SearchMegatron1T(benchmark::State& state) {
  const Setup& in = Inputs();
  SearchSpace space = DefaultSearchSpace(in.model, {3072});
  SearchOptions opts;
  opts.threads = static_cast<int>(state.range(0));
  if (opts.threads == 0) opts.threads = std::max(1u, std::thread::hardware_concurrency());
  opts.top_k = 10;
  SearchResult last;
  for (auto _ : state) {
    auto r = Search(in.model, in.training, in.system, space, opts);
    if (!r.ok()) {
      state.SkipWithError(r.status().ToString().c_str());
      return;
    }
    last = std::move(r).value();
    benchmark::DoNotOptimize(last.feasible);
  }
  std::uint64_t estimated =
      last.feasible + last.rejected[static_cast<int>(Rejection::kOutOfMemory)];
  state.counters["threads"] = opts.threads;
  state.counters["space_plans"] = static_cast<double>(last.space);
  state.counters["estimated_plans"] = static_cast<double>(estimated);
  state.counters["feasible_plans"] = static_cast<double>(last.feasible);
  state.counters["space_plans_per_s"] = benchmark::Counter(
      static_cast<double>(last.space) * state.iterations(), benchmark::Counter::kIsRate);
  state.counters["best_mfu"] = last.top.empty() ? 0.0 : last.top[0].estimate.mfu;
}
BENCHMARK(BM_SearchMegatron1T)->Arg(1)->Arg(0)->Unit(benchmark::kMillisecond)->UseRealTime();

// The cluster `baton sim --cluster-gpus 16384` builds: 2,048 H100 nodes, 16 per leaf, 8 leaves per
// spine, core on top.
topo::Cluster SimCluster() {
  topo::FatTreeParams p;
  p.name = "sim-16384gpu";
  p.layout.nodes = 2048;
  p.layout.gpus_per_node = 8;
  p.layout.gpu = "H100-SXM";
  p.tiers = 3;
  p.nodes_per_leaf = 16;
  p.leaves_per_spine = 8;
  return std::move(topo::BuildFatTree(p)).value();
}

// The synthetic workload's pre-training sizes: arg 0 = 256 GPUs (llama3-8b), 1 = 1,024
// (llama3-70b), 2 = 8,192 (llama3-405b).
struct SlowdownCase {
  const char* model;
  int gpus;
};
constexpr SlowdownCase kSlowdownCases[] = {
    {"llama3-8b", 256}, {"llama3-70b", 1024}, {"llama3-405b", 8192}};

struct SlowdownSetup {
  planning::PlannerEstimator planner{SimCluster()};
  sched::GangJob job;
  std::vector<topo::GpuRef> gpus;
};

// Null (after SkipWithError) when the planner finds no plan.
std::unique_ptr<SlowdownSetup> MakeSlowdownSetup(benchmark::State& state) {
  const SlowdownCase& c = kSlowdownCases[state.range(0)];
  auto s = std::make_unique<SlowdownSetup>();
  auto key = s->planner.BestPlan(c.model, c.gpus);
  if (!key.ok() || !key->has_value()) {
    state.SkipWithError("no plan");
    return nullptr;
  }
  s->job.gpus = c.gpus;
  s->job.has_plan = true;
  s->job.plan_key = **key;
  s->gpus = *CompactGpus(s->planner.cluster(), c.gpus, 3);
  state.SetLabel(
      fmt::format("{} on {}: {}", c.model, c.gpus, PlanToString(s->planner.plan(s->job.plan_key))));
  return s;
}

void BM_PlannerSlowdown(benchmark::State& state) {
  auto s = MakeSlowdownSetup(state);
  if (!s) return;
  double slowdown = 0;
  for (auto _ : state) {
    slowdown = s->planner.Slowdown(s->job, s->gpus);
    benchmark::DoNotOptimize(slowdown);
  }
  state.counters["slowdown"] = slowdown;
}
BENCHMARK(BM_PlannerSlowdown)->DenseRange(0, 2)->Unit(benchmark::kMicrosecond);

void BM_PlacementSlowdownUncached(benchmark::State& state) {
  auto s = MakeSlowdownSetup(state);
  if (!s) return;
  const SlowdownCase& c = kSlowdownCases[state.range(0)];
  const ModelSpec model = *FindModel(c.model);
  const ParallelPlan plan = s->planner.plan(s->job.plan_key);
  const TrainingSpec training = planning::PlannerEstimator::DefaultTraining(model);
  const topo::Cluster& cluster = s->planner.cluster();
  double slowdown = 0;
  for (auto _ : state) {
    const SystemSpec system = *SystemFromCluster(cluster, c.gpus);
    slowdown = *PlacementSlowdown(model, plan, training, system, cluster, s->gpus);
    benchmark::DoNotOptimize(slowdown);
  }
  state.counters["slowdown"] = slowdown;
}
BENCHMARK(BM_PlacementSlowdownUncached)->DenseRange(0, 2)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace baton::perf

BENCHMARK_MAIN();
