#include "server/executors/registry.h"

#include <gtest/gtest.h>

#include <cstdlib>

namespace baton::server {
namespace {

TEST(ExecutorRegistryTest, EveryExecutorIsFoundByItsName) {
  ASSERT_FALSE(Executors().empty());
  for (const ExecutorKind& k : Executors()) {
    Result<const ExecutorKind*> found = FindExecutor(k.name);
    ASSERT_TRUE(found.ok()) << k.name;
    EXPECT_EQ((*found)->name, k.name);
    EXPECT_NE((*found)->create, nullptr);
  }
}

TEST(ExecutorRegistryTest, UnknownNameListsTheKnownOnes) {
  Result<const ExecutorKind*> found = FindExecutor("nomad");
  ASSERT_FALSE(found.ok());
  EXPECT_NE(found.status().message().find("unknown executor 'nomad'"), std::string::npos);
  EXPECT_NE(found.status().message().find("dry-run, local, slurm, kubernetes"), std::string::npos)
      << found.status().message();
}

TEST(ExecutorRegistryTest, DryRunIsCreatedWithItsName) {
  SystemClock clock;
  Result<std::unique_ptr<Executor>> e = CreateExecutor(**FindExecutor("dry-run"), {}, clock);
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  EXPECT_EQ((*e)->name(), "dry-run");
}

TEST(ExecutorRegistryTest, BadSettingsAreRefusedNamingTheSetting) {
  SystemClock clock;
  ExecutorSettings s;
  s.speedup = 0;
  Result<std::unique_ptr<Executor>> e = CreateExecutor(**FindExecutor("dry-run"), s, clock);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("speedup"), std::string::npos);

  ExecutorSettings opt;
  opt.options["job-prefix"] = "site-a";
  e = CreateExecutor(**FindExecutor("dry-run"), opt, clock);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("unknown option 'job-prefix' (accepted: none)"),
            std::string::npos)
      << e.status().message();
}

TEST(ExecutorRegistryTest, OnlyResourceManagerExecutorsDescribeTheCluster) {
  for (const ExecutorKind& k : Executors()) {
    EXPECT_EQ(k.cluster != nullptr, k.name == "slurm" || k.name == "kubernetes") << k.name;
  }
  const char* saved = std::getenv("SLURM_CONF");
  std::string keep = saved == nullptr ? "" : saved;
  unsetenv("SLURM_CONF");
  Result<topo::Cluster> c = (*FindExecutor("slurm"))->cluster(ExecutorSettings{});
  if (saved != nullptr) setenv("SLURM_CONF", keep.c_str(), 1);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("--slurm-conf"), std::string::npos);

  // Kubernetes without a kubeconfig, $KUBECONFIG or a pod to run in says what it needs.
  const char* kube_saved = std::getenv("KUBECONFIG");
  const char* host_saved = std::getenv("KUBERNETES_SERVICE_HOST");
  std::string kube_keep = kube_saved == nullptr ? "" : kube_saved;
  std::string host_keep = host_saved == nullptr ? "" : host_saved;
  unsetenv("KUBECONFIG");
  unsetenv("KUBERNETES_SERVICE_HOST");
  c = (*FindExecutor("kubernetes"))->cluster(ExecutorSettings{});
  if (kube_saved != nullptr) setenv("KUBECONFIG", kube_keep.c_str(), 1);
  if (host_saved != nullptr) setenv("KUBERNETES_SERVICE_HOST", host_keep.c_str(), 1);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("--kubeconfig"), std::string::npos) << c.status().message();
}

}  // namespace
}  // namespace baton::server
