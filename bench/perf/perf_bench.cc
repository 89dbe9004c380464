// perf_bench: how fast the planner is.
//  * BM_Evaluate: full estimator evaluations (structural checks, memory, compute, every
//    collective, pipeline) per second on one core, over a fixed mix of feasible plans.
//  * BM_SearchMegatron1T: the whole default search space for Megatron-1T on 3,072 A100-80GB
//    (global batch 3072), with 1 thread and with every core; reports the space size and the
//    plans/s including the sub-spaces pruned in bulk.
#include <benchmark/benchmark.h>

#include <thread>
#include <vector>

#include "perf/search.h"

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

}  // namespace
}  // namespace baton::perf

BENCHMARK_MAIN();
