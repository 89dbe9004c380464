#include "sched/framework/config.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

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

// The queue order is a plugin of the registry, named; an unknown one is refused when the
// scheduler is built, naming the field and the registry's plugins.
TEST(ConfigTest, QueueSortIsARegistryNameAndPreemptByAnEnumWhoseErrorsNameTheField) {
  auto c = ParseSchedulerConfig("queue_sort: las\npreempt_by: las-band\n");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->queue_sort, "las");
  EXPECT_EQ(c->preempt_by, PreemptBy::kLasBand);
  for (const char* q : {"fifo", "priority", "shortest-first", "las", "drf"}) {
    SchedulerConfig named;
    named.queue_sort = q;
    EXPECT_TRUE(Scheduler::Create(testing::SmallTree(), named).ok()) << q;
  }
  auto lifo = ParseSchedulerConfig("queue_sort: lifo");
  ASSERT_TRUE(lifo.ok()) << lifo.status().ToString();
  const std::string bad_sort = Scheduler::Create(testing::SmallTree(), *lifo).status().message();
  EXPECT_NE(bad_sort.find("field 'queue_sort': unknown plugin 'lifo' (known: "), std::string::npos)
      << bad_sort;
  // A plugin of the registry that orders no queue.
  SchedulerConfig binpack;
  binpack.queue_sort = "binpack";
  const std::string not_sort = Scheduler::Create(testing::SmallTree(), binpack).status().message();
  EXPECT_NE(not_sort.find("field 'queue_sort': 'binpack' is not a queue-sort plugin"),
            std::string::npos)
      << not_sort;
  const std::string bad_by = ParseSchedulerConfig("preempt_by: size").status().message();
  EXPECT_NE(bad_by.find("field 'preempt_by'"), std::string::npos) << bad_by;
  // A list where one value belongs names the field too (it used to throw inside yaml-cpp).
  EXPECT_NE(ParseSchedulerConfig("queue_sort: [fifo]").status().message().find("queue_sort"),
            std::string::npos);
}

TEST(ConfigTest, HeadOfLineBlockingIsABoolean) {
  auto c = ParseSchedulerConfig("head_of_line_blocking: true");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_TRUE(c->head_of_line_blocking);
  EXPECT_FALSE(SchedulerConfig().head_of_line_blocking);
  EXPECT_NE(ParseSchedulerConfig("head_of_line_blocking: maybe")
                .status()
                .message()
                .find("head_of_line_blocking"),
            std::string::npos);
}

TEST(ConfigTest, StrictOrderHoldsEveryJobBehindABlockedHead) {
  // 64 GPUs. Job 1 takes 48; job 2 (32) cannot fit; job 3 (8) could. Strict: job 3 waits.
  SchedulerConfig strict = *ParseSchedulerConfig(
      "actions: [admit, allocate]\nqueue_sort: fifo\nhead_of_line_blocking: true\n");
  auto s = Scheduler::Create(testing::SmallTree(), strict);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  const std::vector<Event> first = {Event::Submit(testing::Job(1, 48))};
  auto d = (*s)->RunCycle({testing::At(0), first});
  ASSERT_EQ(d.binds.size(), 1u);
  std::vector<Event> later = {Event::Submit(testing::Job(2, 32)),
                              Event::Submit(testing::Job(3, 8))};
  d = (*s)->RunCycle({testing::At(1), later});
  EXPECT_TRUE(d.binds.empty());
  // First-fit (the same without head_of_line_blocking): job 3 passes job 2.
  SchedulerConfig first_fit = strict;
  first_fit.head_of_line_blocking = false;
  auto f = Scheduler::Create(testing::SmallTree(), first_fit);
  ASSERT_TRUE(f.ok());
  (*f)->RunCycle({testing::At(0), first});
  d = (*f)->RunCycle({testing::At(1), later});
  ASSERT_EQ(d.binds.size(), 1u);
  EXPECT_EQ(d.binds[0].job, JobId(3));
}

TEST(ConfigTest, HostileDocumentsAreRefusedBeforeTheyCostMemory) {
  // The 465-byte alias bomb of issue 15 (9 levels of 9 aliases: 387M nodes once expanded); it
  // used 6 GB before the walk was bounded.
  std::string bomb = "a: &a [x, x, x, x, x, x, x, x, x]\n";
  for (char c = 'b'; c <= 'i'; ++c) {
    const char p = static_cast<char>(c - 1);
    bomb += fmt::format("{0}: &{0} [*{1}, *{1}, *{1}, *{1}, *{1}, *{1}, *{1}, *{1}, *{1}]\n", c, p);
  }
  bomb += "plugins: [{name: quota, args: {t: *i}}]\n";
  auto r = ParseSchedulerConfig(bomb, "bomb.yaml");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("bomb.yaml"), std::string::npos) << r.status().ToString();
  // A duplicate key must not silently win.
  auto dup = ParseSchedulerConfig("queue_sort: fifo\nqueue_sort: las\n", "dup.yaml");
  ASSERT_FALSE(dup.ok());
  EXPECT_NE(dup.status().message().find("queue_sort"), std::string::npos);
  // Unknown keys inside a plugin entry name their path.
  EXPECT_NE(ParseSchedulerConfig("plugins: [{name: binpack, wieght: 2}]")
                .status()
                .message()
                .find("plugins[0].wieght"),
            std::string::npos);
}

TEST(ConfigTest, FileIsSizeCheckedBeforeItIsRead) {
  const std::string dir = ::testing::TempDir();
  const std::string big = dir + "/big_sched.yaml";
  {
    std::ofstream out(big, std::ios::binary);
    out << "# " << std::string(static_cast<std::size_t>(kMaxSchedulerConfigSize.value()), 'x')
        << "\n";
  }
  auto r = LoadSchedulerConfigFile(big);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kResourceExhausted) << r.status().ToString();
  const std::string ok = dir + "/ok_sched.yaml";
  std::ofstream(ok) << "queue_sort: fifo\n";
  auto c = LoadSchedulerConfigFile(ok);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->queue_sort, "fifo");
  auto missing = LoadSchedulerConfigFile(dir + "/nope.yaml");
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  std::remove(big.c_str());
  std::remove(ok.c_str());
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
