// Routing benchmark (issue 17): one routing decision (Route: predictions for every site, the
// policy's pick and the explanation) for a job with two datasets and a checkpoint, over 4, 16 and
// 64 sites in a full WAN mesh. Decisions per second = items_per_second.
// Run: build/release/bench/federation/routing_bench --benchmark_repetitions=5
//        --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include <string>
#include <vector>

#include "core/rng.h"
#include "federation/routing.h"

namespace baton::federation {
namespace {

Sites MakeSites(int n) {
  std::string text = "sites:\n";
  for (int i = 0; i < n; ++i) {
    text += fmt::format("  s{}:\n    url: http://127.0.0.1:{}\n    regions: [r{}]\n", i, 9000 + i,
                        i % 4);
    text += fmt::format("    price_per_gpu_hour: {}\n", 1.0 + i % 5 * 0.25);
    if (i % 3 == 0)
      text += fmt::format("    datasets: {{d{}: {{size_gib: {}}}}}\n", i % 6, 512 + i % 6);
  }
  text += "wan:\n";
  for (int a = 0; a < n; ++a) {
    for (int b = a + 1; b < n; ++b) {
      text += fmt::format("  - {{between: [s{}, s{}], gbps: {}, latency_ms: {}}}\n", a, b,
                          10 + (a + b) % 90, 1 + (a * b) % 50);
    }
  }
  auto sites = ParseSites(text, "bench");
  if (!sites.ok()) {
    fmt::print(stderr, "{}\n", sites.status().ToString());
    std::abort();
  }
  return *std::move(sites);
}

void BM_Route(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  Sites sites = MakeSites(n);
  Rng rng(7);
  std::vector<SiteAnswer> answers(n);
  const TimePoint now{Seconds(1.7e9)};
  for (SiteAnswer& a : answers) {
    a.reachable = true;
    a.total_gpus = 4096;
    a.free_gpus = rng.UniformInt(0, 4096);
    a.estimated_start = now + Seconds(rng.Uniform() * 86400);
    a.step_time = Seconds(5 + rng.Uniform() * 10);
  }
  JobNeeds job;
  job.name = "bench";
  job.gpus = 512;
  job.home_site = "s0";
  job.datasets = {"d0", "d3"};
  job.checkpoint_site = "s1";
  job.checkpoint_size = Bytes(2e12);
  job.steps = 10'000;
  const RoutingPolicy& policy = **FindRoutingPolicy("predicted-completion");
  for (auto _ : state) {
    auto d = Route(job, sites, answers, now, policy);
    benchmark::DoNotOptimize(d);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_Route)->Arg(4)->Arg(16)->Arg(64);

}  // namespace
}  // namespace baton::federation

BENCHMARK_MAIN();
