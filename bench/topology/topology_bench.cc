// Topology benchmark: builds and loads the 131,072-GPU clusters of issue 2 (16,384 nodes on a
// three-tier fat-tree and on Dragonfly+), and times the two hot queries the scheduler leans on:
// where two GPUs meet (with the path's bandwidth) and an allocation update of one node.
// Run: build/release/bench/topology/topology_bench --benchmark_repetitions=5
//        --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>
#include <sys/resource.h>

#include <vector>

#include "core/rng.h"
#include "topology/builders/fabrics.h"
#include "topology/io/cluster_yaml.h"

namespace baton::topo {
namespace {

const char* PresetName(int which) { return which == 0 ? "fat-tree-131k" : "dragonfly-131k"; }

Cluster Build(int which) {
  auto c = BuildPreset(PresetName(which));
  if (!c.ok()) std::abort();
  return std::move(c).value();
}

double PeakRssMiB() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_maxrss) / 1024.0;
}

void BM_Build131k(benchmark::State& state) {
  std::size_t bytes = 0;
  std::size_t gpus = 0;
  for (auto _ : state) {
    Cluster c = Build(static_cast<int>(state.range(0)));
    bytes = c.MemoryBytes();
    gpus = static_cast<std::size_t>(c.counts().total);
    benchmark::DoNotOptimize(c);
  }
  state.SetLabel(PresetName(static_cast<int>(state.range(0))));
  state.counters["gpus"] = static_cast<double>(gpus);
  state.counters["cluster_MiB"] = static_cast<double>(bytes) / (1024.0 * 1024.0);
  state.counters["peak_rss_MiB"] = PeakRssMiB();
}
BENCHMARK(BM_Build131k)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

void BM_LoadYaml131k(benchmark::State& state) {
  const std::string yaml = ExportClusterYaml(Build(static_cast<int>(state.range(0))));
  for (auto _ : state) {
    auto c = LoadClusterYaml(yaml, "bench.yaml");
    if (!c.ok()) {
      state.SkipWithError(c.status().ToString().c_str());
      return;
    }
    benchmark::DoNotOptimize(c);
  }
  state.SetLabel(PresetName(static_cast<int>(state.range(0))));
  state.counters["yaml_KiB"] = static_cast<double>(yaml.size()) / 1024.0;
  state.counters["peak_rss_MiB"] = PeakRssMiB();
}
BENCHMARK(BM_LoadYaml131k)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

// Meet level plus the bandwidth of that path for random GPU pairs.
void BM_MeetLevel(benchmark::State& state) {
  const Cluster c = Build(static_cast<int>(state.range(0)));
  Rng rng(1);
  const auto nodes = static_cast<std::int64_t>(c.nodes().size());
  std::vector<std::pair<GpuRef, GpuRef>> pairs(1 << 16);
  for (auto& [a, b] : pairs) {
    a = {NodeId(static_cast<std::uint32_t>(rng.UniformInt(0, nodes - 1))),
         static_cast<std::uint8_t>(rng.UniformInt(0, 7))};
    b = {NodeId(static_cast<std::uint32_t>(rng.UniformInt(0, nodes - 1))),
         static_cast<std::uint8_t>(rng.UniformInt(0, 7))};
  }
  std::size_t i = 0;
  for (auto _ : state) {
    const auto& [a, b] = pairs[i++ & (pairs.size() - 1)];
    Level level = c.Meet(a, b);
    benchmark::DoNotOptimize(level);
    benchmark::DoNotOptimize(c.Link(level).bandwidth);
  }
  state.SetLabel(PresetName(static_cast<int>(state.range(0))));
}
BENCHMARK(BM_MeetLevel)->Arg(0)->Arg(1);

// One allocation update (and its release) of a GPU on a random node: each walks the node's
// NVLink domain and switch ancestors once.
void BM_AllocateRelease(benchmark::State& state) {
  Cluster c = Build(static_cast<int>(state.range(0)));
  Rng rng(2);
  const auto nodes = static_cast<std::int64_t>(c.nodes().size());
  std::vector<NodeId> targets(1 << 16);
  for (auto& t : targets) t = NodeId(static_cast<std::uint32_t>(rng.UniformInt(0, nodes - 1)));
  std::size_t i = 0;
  for (auto _ : state) {
    NodeId n = targets[i++ & (targets.size() - 1)];
    if (!c.Allocate(n, 1).ok() || !c.Release(n, 1).ok()) std::abort();
  }
  state.SetLabel(PresetName(static_cast<int>(state.range(0))));
  state.SetItemsProcessed(state.iterations() * 2);
}
BENCHMARK(BM_AllocateRelease)->Arg(0)->Arg(1);

}  // namespace
}  // namespace baton::topo

BENCHMARK_MAIN();
