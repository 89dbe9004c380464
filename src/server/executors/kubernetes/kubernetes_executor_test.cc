#include "server/executors/kubernetes/kubernetes_executor.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "server/executors/kubernetes/kube_client.h"

namespace baton::server {
namespace {

using nlohmann::json;

constexpr const char* kKubeconfig = R"(apiVersion: v1
kind: Config
clusters:
- name: c
  cluster:
    server: https://127.0.0.1:6443/
    certificate-authority-data: LS0tLS1CRUdJTg==
users:
- name: u
  user:
    token: abc
contexts:
- name: ctx
  context: {cluster: c, user: u}
current-context: ctx
)";

TEST(KubeConfig, ReadsServerCaAndToken) {
  Result<kube::KubeConfig> c = kube::ParseKubeConfig(kKubeconfig, "kc", "");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->server, "https://127.0.0.1:6443");
  EXPECT_EQ(c->ca_pem, "-----BEGIN");
  EXPECT_EQ(c->token, "abc");
}

TEST(KubeConfig, RefusesWhatItDoesNotSupportNamingTheField) {
  struct Case {
    std::string from, to, field;
  };
  const Case cases[] = {
      {"    token: abc",
       "    client-certificate-data: eA==", "users[0].user.client-certificate-data"},
      {"    token: abc", "    exec: {command: aws}", "users[0].user.exec"},
      {"    token: abc", "    username: x", "users[0].user.username"},
      {"    server: https://127.0.0.1:6443/", "    server: http://127.0.0.1:8080",
       "clusters[0].cluster.server"},
      {"    certificate-authority-data: LS0tLS1CRUdJTg==", "    insecure-skip-tls-verify: true",
       "clusters[0].cluster.insecure-skip-tls-verify"},
      {"current-context: ctx", "current-context: other", "contexts: no entry named 'other'"},
      {"    certificate-authority-data: LS0tLS1CRUdJTg==", "    certificate-authority-data: '!!'",
       "certificate-authority-data: not base64"},
  };
  for (const Case& c : cases) {
    std::string text = kKubeconfig;
    text.replace(text.find(c.from), c.from.size(), c.to);
    Result<kube::KubeConfig> r = kube::ParseKubeConfig(text, "kc", "");
    ASSERT_FALSE(r.ok()) << c.to;
    EXPECT_NE(r.status().message().find(c.field), std::string::npos) << r.status().message();
  }
}

TEST(KubeConfig, Base64) {
  EXPECT_EQ(kube::DecodeBase64("aGVsbG8="), "hello");
  EXPECT_EQ(kube::DecodeBase64("aGk="), "hi");
  EXPECT_EQ(kube::DecodeBase64(""), "");
  EXPECT_FALSE(kube::DecodeBase64("aGk"));
  EXPECT_FALSE(kube::DecodeBase64("a=Gk"));
  EXPECT_FALSE(kube::DecodeBase64("aG!="));
}

TEST(Quantity, Parses) {
  EXPECT_EQ(ParseQuantity("8"), 8);
  EXPECT_EQ(ParseQuantity("500m"), 0.5);
  EXPECT_EQ(ParseQuantity("2Ti"), 2199023255552.0);
  EXPECT_EQ(ParseQuantity("1G"), 1e9);
  EXPECT_FALSE(ParseQuantity("eight"));
  EXPECT_FALSE(ParseQuantity("-1"));
}

TEST(NaturalOrder, DigitRunsCompareAsNumbers) {
  EXPECT_TRUE(NaturalLess("w-2", "w-10"));
  EXPECT_FALSE(NaturalLess("w-10", "w-2"));
  EXPECT_TRUE(NaturalLess("a", "b"));
  EXPECT_FALSE(NaturalLess("w-1", "w-1"));
}

json Pod(std::string name, std::string group, std::string size, int gpus) {
  json pod = {{"metadata", {{"namespace", "ml"}, {"name", name}, {"uid", "uid-" + name}}},
              {"spec",
               {{"schedulerName", "baton"},
                {"priority", 5},
                {"containers",
                 {{{"name", "c"},
                   {"resources", {{"limits", {{"nvidia.com/gpu", std::to_string(gpus)}}}}}}}}}},
              {"status", {{"phase", "Pending"}}}};
  if (!group.empty()) pod["metadata"]["labels"] = {{"scheduling.x-k8s.io/pod-group", group}};
  if (!size.empty()) pod["metadata"]["annotations"] = {{"baton.io/gang-size", size}};
  return pod;
}

std::vector<KubePod> Pods(std::initializer_list<json> objects) {
  std::vector<KubePod> out;
  for (const json& o : objects) {
    Result<KubePod> p = ParsePod(o);
    EXPECT_TRUE(p.ok()) << p.status().ToString();
    if (p.ok()) out.push_back(*p);
  }
  return out;
}

TEST(GroupPendingPods, AGangIsReadyWhenAllItsPodsArePending) {
  auto pods = Pods({Pod("w-10", "g", "3", 8), Pod("w-2", "g", "3", 8), Pod("w-1", "g", "3", 8),
                    Pod("solo", "", "", 4), Pod("half-0", "h", "2", 8)});
  KubeGrouping g = GroupPendingPods(pods);
  ASSERT_EQ(g.ready.size(), 2u);
  const KubeGang& gang = g.ready[0].group == "g" ? g.ready[0] : g.ready[1];
  ASSERT_EQ(gang.pods.size(), 3u);
  EXPECT_EQ(gang.pods[0].name, "w-1");
  EXPECT_EQ(gang.pods[1].name, "w-2");
  EXPECT_EQ(gang.pods[2].name, "w-10");
  EXPECT_EQ(gang.key, "k8s/ml/g/uid-w-1");
  json spec = json::parse(gang.spec_json);
  EXPECT_EQ(spec["gpus"], 24);
  EXPECT_EQ(spec["gpus_per_node"], 8);
  EXPECT_EQ(spec["tenant"], "ml");
  EXPECT_EQ(spec["priority"], 5);
  EXPECT_EQ(g.waiting.at("ml/h").why, "1 of 2 pods pending");
}

TEST(GroupPendingPods, RefusesGangsItCannotRun) {
  auto pods = Pods({Pod("a-0", "a", "", 8), Pod("b-0", "b", "2", 8), Pod("b-1", "b", "2", 4),
                    Pod("c-0", "c", "x", 8), Pod("cpu", "", "", 0)});
  KubeGrouping g = GroupPendingPods(pods);
  EXPECT_TRUE(g.ready.empty());
  EXPECT_NE(g.waiting.at("ml/a").why.find("baton.io/gang-size missing"), std::string::npos);
  EXPECT_NE(g.waiting.at("ml/b").why.find("different nvidia.com/gpu"), std::string::npos);
  EXPECT_NE(g.waiting.at("ml/c").why.find("not a size"), std::string::npos);
  EXPECT_NE(g.waiting.at("ml/cpu").why.find("asks for no nvidia.com/gpu"), std::string::npos);
}

TEST(GroupPendingPods, IgnoresBoundAndDeletedPods) {
  json bound = Pod("w-0", "g", "1", 8);
  bound["spec"]["nodeName"] = "n1";
  json deleting = Pod("w-1", "h", "1", 8);
  deleting["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z";
  KubeGrouping g = GroupPendingPods(Pods({bound, deleting}));
  EXPECT_TRUE(g.ready.empty());
  EXPECT_TRUE(g.waiting.empty());
}

TEST(ParseNode, ReadsAllocatableAndCondition) {
  json node = {{"metadata", {{"name", "n1"}, {"labels", {{"baton.io/leaf", "l1"}}}}},
               {"spec", {{"unschedulable", true}}},
               {"status",
                {{"allocatable", {{"nvidia.com/gpu", "8"}, {"cpu", "96"}, {"memory", "2Ti"}}},
                 {"conditions", {{{"type", "Ready"}, {"status", "True"}}}}}}};
  Result<KubeNode> n = ParseNode(node);
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(n->node.gpus, 8);
  EXPECT_EQ(n->node.cpus, 96);
  EXPECT_TRUE(n->ready);
  EXPECT_TRUE(n->unschedulable);
  EXPECT_EQ(n->node.labels.at("baton.io/leaf"), "l1");
}

}  // namespace
}  // namespace baton::server
