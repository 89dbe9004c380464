#include "server/http/tenant_history.h"

#include <gtest/gtest.h>

namespace baton::server {
namespace {

TEST(FairSharesTest, SplitsEquallyAmongTenantsThatWantMore) {
  auto s = FairShares(128, {{"a", {200, std::nullopt, 1}}, {"b", {200, std::nullopt, 1}}});
  EXPECT_DOUBLE_EQ(s["a"], 64);
  EXPECT_DOUBLE_EQ(s["b"], 64);
}

TEST(FairSharesTest, WhatASmallTenantLeavesGoesToTheOthers) {
  // a wants 8: it gets 8, and b and c split the other 120.
  auto s = FairShares(
      128,
      {{"a", {8, std::nullopt, 1}}, {"b", {100, std::nullopt, 1}}, {"c", {100, std::nullopt, 1}}});
  EXPECT_DOUBLE_EQ(s["a"], 8);
  EXPECT_DOUBLE_EQ(s["b"], 60);
  EXPECT_DOUBLE_EQ(s["c"], 60);
}

TEST(FairSharesTest, WeightsAndQuotas) {
  // b weighs 3x a; c's quota caps it at 16 whatever it wants.
  auto s = FairShares(
      128, {{"a", {1000, std::nullopt, 1}}, {"b", {1000, std::nullopt, 3}}, {"c", {1000, 16, 1}}});
  EXPECT_DOUBLE_EQ(s["c"], 16);
  EXPECT_DOUBLE_EQ(s["a"], 28);
  EXPECT_DOUBLE_EQ(s["b"], 84);
}

TEST(FairSharesTest, NeverMoreThanWantedOrThanTheCluster) {
  auto s = FairShares(64, {{"a", {10, std::nullopt, 1}}, {"b", {0, std::nullopt, 1}}});
  EXPECT_DOUBLE_EQ(s["a"], 10);
  EXPECT_DOUBLE_EQ(s["b"], 0);
  s = FairShares(0, {{"a", {10, std::nullopt, 1}}});
  EXPECT_DOUBLE_EQ(s["a"], 0);
  s = FairShares(100, {{"a", {1000, std::nullopt, 1}},
                       {"b", {1000, std::nullopt, 1}},
                       {"c", {1000, std::nullopt, 1}}});
  EXPECT_NEAR(s["a"] + s["b"] + s["c"], 100, 1e-9);
}

}  // namespace
}  // namespace baton::server
