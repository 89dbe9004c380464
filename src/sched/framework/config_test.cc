#include "sched/framework/config.h"

#include <gtest/gtest.h>

#include "sched/framework/scheduler.h"
#include "sched/plugins/builtin_plugins.h"
#include "sched/testing.h"

namespace baton::sched {
namespace {

TEST(ConfigTest, ParsesPluginsWeightsArgsAndActions) {
  auto c = ParseSchedulerConfig(R"(
actions: [admit, allocate, preempt]
queue_sort: drf
plugins:
  - health
  - {name: topology}
  - {name: binpack, weight: 2.5}
  - name: quota
    args: {tenants: {a: {guaranteed: 64, borrowable: 32}}}
max_candidates: 8
)");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->actions, (std::vector<std::string>{"admit", "allocate", "preempt"}));
  EXPECT_EQ(c->queue_sort, "drf");
  ASSERT_EQ(c->plugins.size(), 4u);
  EXPECT_EQ(c->plugins[2].weight, 2.5);
  EXPECT_EQ(c->plugins[3].args.at("tenants.a.guaranteed"), "64");
  EXPECT_EQ(c->max_candidates, 8);
  auto set = BuildPluginSet(*c, BuiltinPlugins(), {});
  ASSERT_TRUE(set.ok()) << set.status().ToString();
  EXPECT_EQ(set->queue_sort.plugin->Name(), "drf");
  EXPECT_EQ(set->scores.size(), 1u);
  EXPECT_EQ(set->pre_filters.size(), 1u);
}

TEST(ConfigTest, ErrorsNameTheField) {
  EXPECT_NE(ParseSchedulerConfig("plugins: [{name: x, weight: abc}]")
                .status()
                .message()
                .find("plugins[0].weight"),
            std::string::npos);
  EXPECT_NE(ParseSchedulerConfig("bogus: 1").status().message().find("bogus"), std::string::npos);
  EXPECT_FALSE(ParseSchedulerConfig("actions: [").ok());
  EXPECT_NE(ParseSchedulerConfig("max_candidates: -3").status().message().find("max_candidates"),
            std::string::npos);
}

TEST(ConfigTest, SchedulerRejectsUnknownNames) {
  SchedulerConfig c;
  c.plugins.push_back({"no-such-plugin", 1, {}});
  auto s = Scheduler::Create(testing::SmallTree(), c);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("no-such-plugin"), std::string::npos);
  SchedulerConfig d;
  d.actions = {"allocate", "teleport"};
  auto t = Scheduler::Create(testing::SmallTree(), d);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("actions[1]"), std::string::npos);
  SchedulerConfig e;
  e.plugins = {{"health", 1, {}}};
  EXPECT_NE(Scheduler::Create(testing::SmallTree(), e).status().message().find("placement"),
            std::string::npos);
  SchedulerConfig f;
  f.plugins.push_back({"quota", 1, {{"tenants.a.guaranteed", "x"}}});
  EXPECT_NE(Scheduler::Create(testing::SmallTree(), f).status().message().find("quota"),
            std::string::npos);
}

}  // namespace
}  // namespace baton::sched
