#include "health/health.h"

#include <gtest/gtest.h>

namespace baton::health {
namespace {

using topo::NodeHealth;
using topo::NodeId;

TEST(HealthTest, HealthyByDefault) {
  HealthMonitor m(DefaultRules());
  Sample s{{std::string(kGpuTemp), 60}, {std::string(kIbPortState), 4}};
  auto a = m.Observe(NodeId(0), s);
  EXPECT_EQ(a.condition, NodeHealth::kHealthy);
  EXPECT_FALSE(a.changed);
}

TEST(HealthTest, FellOffTheBusIsDownAtOnceAndSticky) {
  HealthMonitor m(DefaultRules());
  auto a = m.Observe(NodeId(3), {{std::string(kXidErrors), 79}});
  EXPECT_EQ(a.condition, NodeHealth::kDown);
  EXPECT_TRUE(a.changed);
  for (int i = 0; i < 10; ++i) a = m.Observe(NodeId(3), {{std::string(kXidErrors), 0}});
  EXPECT_EQ(a.condition, NodeHealth::kDown);
  m.Reset(NodeId(3));
  EXPECT_EQ(m.condition(NodeId(3)), NodeHealth::kHealthy);
}

TEST(HealthTest, TemperatureHasHysteresis) {
  HealthMonitor m(DefaultRules());
  const std::string t(kGpuTemp);
  NodeId n(1);
  EXPECT_EQ(m.Observe(n, {{t, 91}}).condition, NodeHealth::kHealthy);  // 1 of 3
  EXPECT_EQ(m.Observe(n, {{t, 92}}).condition, NodeHealth::kHealthy);
  EXPECT_EQ(m.Observe(n, {{t, 90}}).condition, NodeHealth::kSuspect);
  // 87 C is below the entry threshold but above the clear threshold: stays suspect.
  for (int i = 0; i < 5; ++i) EXPECT_EQ(m.Observe(n, {{t, 87}}).condition, NodeHealth::kSuspect);
  EXPECT_EQ(m.Observe(n, {{t, 80}}).condition, NodeHealth::kSuspect);
  EXPECT_EQ(m.Observe(n, {{t, 80}}).condition, NodeHealth::kSuspect);
  auto a = m.Observe(n, {{t, 80}});
  EXPECT_EQ(a.condition, NodeHealth::kHealthy);
  EXPECT_TRUE(a.changed);
}

TEST(HealthTest, FlappingBelowTriggerCountNeverFires) {
  HealthMonitor m(DefaultRules());
  const std::string p(kPcieReplay);
  for (int i = 0; i < 10; ++i) {
    EXPECT_EQ(m.Observe(NodeId(2), {{p, i % 2 ? 500.0 : 0.0}}).condition, NodeHealth::kHealthy);
  }
}

TEST(HealthTest, MostSevereActiveRuleWins) {
  HealthMonitor m(DefaultRules());
  const std::string ib(kIbPortState), ecc(kEccDbeVolatile);
  m.Observe(NodeId(0), {{ib, 1}});
  auto a = m.Observe(NodeId(0), {{ib, 1}, {ecc, 2}});
  EXPECT_EQ(a.condition, NodeHealth::kDraining);
  EXPECT_EQ(a.active_rules.size(), 2u);
}

TEST(HealthTest, CompositeRuleNeedsEveryCondition) {
  Rule r{"hot-and-replaying",
         {{std::string(kGpuTemp), Op::kGreater, 80, {}},
          {std::string(kPcieReplay), Op::kGreater, 10, {}}},
         NodeHealth::kDraining,
         1,
         1};
  HealthMonitor m({r});
  EXPECT_EQ(m.Observe(NodeId(0), {{std::string(kGpuTemp), 85}}).condition, NodeHealth::kHealthy);
  EXPECT_EQ(
      m.Observe(NodeId(0), {{std::string(kGpuTemp), 85}, {std::string(kPcieReplay), 20}}).condition,
      NodeHealth::kDraining);
}

TEST(HealthTest, ValidateRulesNamesTheField) {
  Rule r{"x", {}, NodeHealth::kSuspect, 1, 1};
  Status s = ValidateRules({r});
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("all_of"), std::string::npos);
  r.all_of.push_back({"f", Op::kGreater, 1, {}});
  r.trigger_samples = 0;
  EXPECT_NE(ValidateRules({r}).message().find("trigger_samples"), std::string::npos);
  EXPECT_FALSE(ParseOp("=>").ok());
  EXPECT_EQ(*ParseOp(">="), Op::kGreaterEqual);
}

}  // namespace
}  // namespace baton::health
