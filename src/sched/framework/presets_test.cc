#include "sched/framework/presets.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

namespace baton::sched {
namespace {

std::string SourceDir() {
  const char* dir = std::getenv("BATON_SOURCE_DIR");
  return dir ? dir : ".";
}

// The presets as sim/engine/policies.cc built them in code before they became files: the files
// must keep their behaviour (first-fit is the old `fifo`). Each has gained `resize` before
// preempt (issue 27: elastic jobs shrink rather than be evicted), which does nothing without
// elastic jobs, so the old behaviour is kept for every rigid job.
SchedulerConfig OldBase(const std::string& sort, bool backfill) {
  SchedulerConfig c;
  c.queue_sort = sort;
  c.actions = {"admit", "allocate"};
  if (backfill) c.actions.push_back("backfill");
  c.actions.push_back("resize");
  c.actions.push_back("preempt");
  c.plugins = {{"health", 1, {}},          {"gpu-type", 1, {}}, {"bad-nodes", 1, {}},
               {"node-attributes", 1, {}}, {"topology", 1, {}}, {"lost-work", 1, {}}};
  c.max_candidates = 1;
  c.backfill_reservations = 1;
  return c;
}

TEST(PoliciesTest, NamedFilesKeepTheOldPresets) {
  EXPECT_EQ(*PolicyPreset("first-fit"), OldBase("fifo", false));
  EXPECT_EQ(*PolicyPreset("backfill"), OldBase("fifo", true));
  SchedulerConfig las = OldBase("las", false);
  las.preempt_by = PreemptBy::kLasBand;
  // The old preset predates the tenancy policy; the file restores what it did: evict at any age,
  // across tenants.
  las.tenancy.min_run_time = Seconds(0);
  las.tenancy.cross_tenant_preemption = true;
  EXPECT_EQ(*PolicyPreset("las"), las);
  SchedulerConfig topo = OldBase("fifo", true);
  topo.plugins.push_back({"binpack", 2, {}});
  topo.plugins.push_back({"planner", 1, {}});
  topo.max_candidates = 8;
  EXPECT_EQ(*PolicyPreset("topo"), topo);
  // fifo is now strict: the old preset plus head-of-line blocking.
  SchedulerConfig fifo = OldBase("fifo", false);
  fifo.head_of_line_blocking = true;
  EXPECT_EQ(*PolicyPreset("fifo"), fifo);
  // daemon: the daemon's default (server::DefaultDaemonSchedulerConfig reads this preset), as it
  // was in code before: SchedulerConfig's defaults plus the planner score (and resize).
  SchedulerConfig daemon;
  daemon.actions = {"admit", "allocate", "backfill", "resize", "preempt"};
  daemon.plugins.push_back({"planner", 1, {}});
  EXPECT_EQ(*PolicyPreset("daemon"), daemon);
}

TEST(PoliciesTest, PresetIsTheFileTheDaemonWouldRead) {
  for (const std::string& name : PolicyNames()) {
    const std::string path = SourceDir() + "/data/scheduler/" + name + ".yaml";
    auto from_file = LoadSchedulerConfigFile(path);
    ASSERT_TRUE(from_file.ok()) << from_file.status().ToString();
    auto preset = PolicyPreset(name);
    ASSERT_TRUE(preset.ok()) << preset.status().ToString();
    EXPECT_EQ(*preset, *from_file) << name;
    std::ifstream in(path, std::ios::binary);
    std::stringstream text;
    text << in.rdbuf();
    EXPECT_EQ(*PolicyYaml(name), text.str()) << name;
  }
  EXPECT_EQ(PolicyNames().front(), "fifo");
}

TEST(PoliciesTest, UnknownNameListsTheKnownOnes) {
  auto r = PolicyPreset("nope");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("first-fit"), std::string::npos);
}

}  // namespace
}  // namespace baton::sched
