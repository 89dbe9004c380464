// Golden simulator run: the small generated trace in tests/golden/small_trace.jsonl on a 64-GPU
// fat-tree, the simulator's five policies (data/scheduler/), node failures on, fixed seed. The
// JSON, CSV and HTML reports must match tests/golden/expected/ byte for byte. After an intended
// change, regenerate them with
//   BATON_UPDATE_GOLDEN=1 ./build/sim/src/sim/sim_golden_test
// and review the diff.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "sched/framework/presets.h"
#include "sim/engine/simulator.h"
#include "sim/report/report.h"
#include "topology/builders/fabrics.h"

namespace baton::sim {
namespace {

std::string SourceDir() {
  const char* dir = std::getenv("BATON_SOURCE_DIR");
  return dir ? dir : ".";
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(GoldenTest, SmallRunReproducesItsReport) {
  const std::string dir = SourceDir() + "/tests/golden/";
  const std::string trace_path = dir + "small_trace.jsonl";
  std::vector<SimResult> runs;
  for (const std::string policy : {"fifo", "first-fit", "backfill", "las", "topo"}) {
    topo::FatTreeParams p;
    p.name = "golden";
    p.layout.nodes = 8;
    p.tiers = 2;
    p.nodes_per_leaf = 4;
    p.leaves_per_spine = 2;
    auto cluster = topo::BuildFatTree(p);
    ASSERT_TRUE(cluster.ok()) << cluster.status().ToString();
    auto reader = OpenTrace(trace_path);
    ASSERT_TRUE(reader.ok()) << reader.status().ToString();
    SimConfig config;
    config.policy = policy;
    config.scheduler = *sched::PolicyPreset(policy);
    config.failures = true;
    config.failure_model.interruptions_per_gpu_day *= 400;  // a handful of failures in a day
    config.seed = 42;
    config.sample_interval = Minutes(30);
    auto r = RunSimulation(std::move(*cluster), config, **reader);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    runs.push_back(std::move(*r));
  }
  const ReportMeta meta{"small_trace.jsonl", "golden: 8 nodes x 8 H100 (2-tier fat-tree)", 42,
                        true};
  const std::pair<std::string, std::string> outputs[] = {
      {"report.json", ReportJson(meta, runs)},
      {"jobs.csv", JobsCsv(runs)},
      {"report.html", ReportHtml(meta, runs)},
      {"summary.txt", SummaryTable(runs)},
  };
  const bool update = std::getenv("BATON_UPDATE_GOLDEN") != nullptr;
  for (const auto& [name, text] : outputs) {
    const std::string path = dir + "expected/" + name;
    if (update) {
      std::ofstream(path, std::ios::binary) << text;
      continue;
    }
    EXPECT_EQ(ReadFile(path), text)
        << name << " differs from " << path << " (BATON_UPDATE_GOLDEN=1 regenerates it)";
  }
}

}  // namespace
}  // namespace baton::sim
