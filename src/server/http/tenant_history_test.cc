#include "server/http/tenant_history.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "server/store/sqlite_job_store.h"

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

// The history against a real store: queued jobs are the pending demand, the ring keeps its bound,
// and a tenant's answer names no other tenant.
class TenantHistoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("baton_tenant_history_" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    SqliteStoreOptions o;
    o.path = (dir_ / "baton.db").string();
    auto store = SqliteJobStore::Open(o);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    store_ = std::move(store).value();
  }
  void TearDown() override {
    store_.reset();
    std::filesystem::remove_all(dir_);
  }
  void Queue(const std::string& tenant, int gpus) {
    auto r = store_->Submit(
        {tenant, "job", "{\"name\": \"job\", \"gpus\": " + std::to_string(gpus) + "}", ""});
    ASSERT_TRUE(r.ok()) << r.status().ToString();
  }

  std::filesystem::path dir_;
  std::unique_ptr<SqliteJobStore> store_;
  NullController controller_;  // no scheduler: no GPUs held, no cluster
};

TEST_F(TenantHistoryTest, QueuedJobsAreDemandAndTenantsSeeOnlyThemselves) {
  Queue("team-a", 16);
  Queue("team-a", 8);
  Queue("team-b", 4);
  TenantHistory history(*store_, controller_, std::chrono::hours(1), /*capacity=*/3);
  TenantHistory::Sample now = history.Measure();
  EXPECT_EQ(now.tenants["team-a"].pending, 24);
  EXPECT_EQ(now.tenants["team-b"].pending, 4);
  EXPECT_EQ(now.cluster_gpus, 0);
  EXPECT_FALSE(now.pending_truncated);
  for (int i = 0; i < 5; ++i) history.Record(history.Measure());

  nlohmann::json admin = history.Json(now, Principal{"ops", Role::kAdmin, "default"});
  EXPECT_EQ(admin["history"]["time"].size(), 4u) << "3 recorded samples (the bound) and now";
  EXPECT_EQ(admin["tenants"].size(), 2u);
  EXPECT_EQ(admin["history"]["tenants"]["team-a"]["pending"].back(), 24);

  nlohmann::json bob = history.Json(now, Principal{"bob", Role::kTenant, "team-b"});
  ASSERT_EQ(bob["tenants"].size(), 1u);
  EXPECT_EQ(bob["tenants"][0]["tenant"], "team-b");
  EXPECT_EQ(bob["tenants"][0]["pending"], 4);
  EXPECT_EQ(bob.dump().find("team-a"), std::string::npos);
}

}  // namespace
}  // namespace baton::server
