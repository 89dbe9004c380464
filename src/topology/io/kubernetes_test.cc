#include "topology/io/kubernetes.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include "core/strings.h"
#include "topology/builders/fabrics.h"
#include "topology/io/cluster_yaml.h"
#include "topology/io/common.h"

namespace baton::topo {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

Cluster Load(const std::string& rel) {
  auto c = LoadClusterYaml(*ReadFileCapped(std::string(BATON_SOURCE_DIR) + "/" + rel), rel);
  CHECK(c.ok()) << c.status().ToString();
  return std::move(c).value();
}

TEST(K8sLabelsTest, LabelsEachNode) {
  const Cluster fake = Load("data/clusters/fake16.yaml");
  const std::string out = ExportK8sNodeLabels(fake);
  auto lines = Split(out, '\n');
  ASSERT_EQ(lines.size(), 17u);  // 16 nodes + the empty string after the last newline
  EXPECT_EQ(
      lines[0],
      "kubectl label node n01 --overwrite baton.io/leaf=leaf1 baton.io/spine=spine "
      "nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3 nvidia.com/gpu.count=8 baton.io/rack=rack1");
  EXPECT_THAT(out, ::testing::Not(HasSubstr("gpu.clique")));

  const Cluster gb = Load("data/clusters/gb200-nvl72-2racks.yaml");
  const std::string gb_out = ExportK8sNodeLabels(gb);
  auto gb_lines = Split(gb_out, '\n');
  EXPECT_EQ(gb_lines[0],
            "kubectl label node gb001 --overwrite baton.io/leaf=leaf1 baton.io/spine=spine1 "
            "nvidia.com/gpu.product=NVIDIA-GB200 nvidia.com/gpu.count=4 "
            "nvidia.com/gpu.clique=gb200-pair.0 baton.io/rack=rack1 zone=a");
  EXPECT_THAT(gb_lines[35], HasSubstr(" nvidia.com/gpu.clique=gb200-pair.1 "));
}

TEST(K8sLabelsTest, TierKeysFollowLevels) {
  auto fly = BuildPreset("dragonfly-a100");
  ASSERT_TRUE(fly.ok());
  EXPECT_THAT(TierLabelKeys(*fly), ElementsAre("baton.io/leaf", "baton.io/group", "baton.io/core"));
}

TEST(KueueTest, LevelsCoarsestFirst) {
  auto c = BuildPreset("fat-tree-h100");
  ASSERT_TRUE(c.ok());
  const YAML::Node doc = YAML::Load(ExportKueueTopology(*c));
  EXPECT_EQ(doc["apiVersion"].as<std::string>(), "kueue.x-k8s.io/v1beta2");
  EXPECT_EQ(doc["kind"].as<std::string>(), "Topology");
  EXPECT_EQ(doc["metadata"]["name"].as<std::string>(), "fat-tree-h100");
  std::vector<std::string> levels;
  for (const auto& l : doc["spec"]["levels"]) levels.push_back(l["nodeLabel"].as<std::string>());
  EXPECT_THAT(levels, ElementsAre("baton.io/core", "baton.io/spine", "baton.io/leaf",
                                  "kubernetes.io/hostname"));

  auto gb = BuildPreset("gb200-nvl72");
  ASSERT_TRUE(gb.ok());
  const YAML::Node gb_doc = YAML::Load(ExportKueueTopology(*gb));
  const YAML::Node gb_levels = gb_doc["spec"]["levels"];
  ASSERT_EQ(gb_levels.size(), 5u);
  EXPECT_EQ(gb_levels[3]["nodeLabel"].as<std::string>(), "nvidia.com/gpu.clique");
}

// Parses the HyperNode stream and checks it is a tree covering every node once.
void CheckHyperNodes(const Cluster& c, int want_docs, int leaf_tier) {
  const std::vector<YAML::Node> docs = YAML::LoadAll(ExportVolcanoHyperNodes(c));
  ASSERT_EQ(static_cast<int>(docs.size()), want_docs);
  std::map<std::string, int> tier_of;
  std::map<std::string, int> node_seen, hyper_seen;
  for (const YAML::Node& d : docs) {
    EXPECT_EQ(d["apiVersion"].as<std::string>(), "topology.volcano.sh/v1alpha1");
    EXPECT_EQ(d["kind"].as<std::string>(), "HyperNode");
    tier_of[d["metadata"]["name"].as<std::string>()] = d["spec"]["tier"].as<int>();
  }
  for (const YAML::Node& d : docs) {
    const int tier = d["spec"]["tier"].as<int>();
    ASSERT_GT(d["spec"]["members"].size(), 0u);
    for (const auto& m : d["spec"]["members"]) {
      const std::string name = m["selector"]["exactMatch"]["name"].as<std::string>();
      if (m["type"].as<std::string>() == "Node") {
        ++node_seen[name];
        EXPECT_TRUE(tier == 1 || tier == leaf_tier) << name;
      } else {
        EXPECT_EQ(m["type"].as<std::string>(), "HyperNode");
        ++hyper_seen[name];
        ASSERT_TRUE(tier_of.contains(name)) << name;
        EXPECT_LT(tier_of[name], tier) << name;
      }
    }
  }
  EXPECT_EQ(node_seen.size(), c.nodes().size());
  for (const auto& [name, n] : node_seen) EXPECT_EQ(n, 1) << name;
  for (const auto& [name, n] : hyper_seen) EXPECT_EQ(n, 1) << name;
  EXPECT_EQ(hyper_seen.size() + 1, docs.size());  // every HyperNode but the root has a parent
}

TEST(VolcanoTest, OneHyperNodePerSwitch) {
  auto c = BuildPreset("fat-tree-h100");
  ASSERT_TRUE(c.ok());
  CheckHyperNodes(*c, static_cast<int>(c->switches().size()), 1);
  const std::vector<YAML::Node> docs = YAML::LoadAll(ExportVolcanoHyperNodes(*c));
  EXPECT_EQ(docs[0]["metadata"]["name"].as<std::string>(), "leaf001");
  EXPECT_EQ(docs[0]["spec"]["tierName"].as<std::string>(), "leaf");
  EXPECT_EQ(docs.back()["spec"]["tier"].as<int>(), 3);
}

TEST(VolcanoTest, NvlinkDomainsAreTierOne) {
  auto c = BuildPreset("gb200-nvl72");
  ASSERT_TRUE(c.ok());
  // 8 NVL72 racks + 4 leaves + 1 spine + 1 core.
  CheckHyperNodes(*c, 8 + static_cast<int>(c->switches().size()), 2);
  const std::vector<YAML::Node> docs = YAML::LoadAll(ExportVolcanoHyperNodes(*c));
  EXPECT_EQ(docs[0]["spec"]["tier"].as<int>(), 1);
  EXPECT_EQ(docs[0]["spec"]["members"].size(), 18u);
  EXPECT_EQ(docs[8]["spec"]["tier"].as<int>(), 2);
  EXPECT_EQ(docs[8]["spec"]["members"][0]["type"].as<std::string>(), "HyperNode");
}

}  // namespace
}  // namespace baton::topo

namespace baton::topo {
namespace {

// The nodes `kubectl label` lines describe, as the apiserver would list them.
std::vector<K8sNode> NodesFromLabelLines(const std::string& lines) {
  std::vector<K8sNode> nodes;
  for (std::string_view line : Split(lines, '\n')) {
    if (line.empty()) continue;
    auto words = Split(line, ' ');
    K8sNode n;
    n.name = std::string(words[3]);
    for (std::size_t i = 5; i < words.size(); ++i) {
      const std::size_t eq = words[i].find('=');
      n.labels[std::string(words[i].substr(0, eq))] = std::string(words[i].substr(eq + 1));
    }
    n.gpus = static_cast<int>(*ParseInt64(n.labels.at("nvidia.com/gpu.count")));
    nodes.push_back(std::move(n));
  }
  return nodes;
}

TEST(K8sImportTest, ReadsBackWhatTheLabelsExport) {
  for (const char* file : {"data/clusters/fake16.yaml", "data/clusters/gb200-nvl72-2racks.yaml"}) {
    SCOPED_TRACE(file);
    const Cluster original = Load(file);
    auto nodes = NodesFromLabelLines(ExportK8sNodeLabels(original));
    Result<Cluster> back = ImportK8sNodes("k8s", nodes);
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    ASSERT_EQ(back->nodes().size(), original.nodes().size());
    EXPECT_EQ(back->counts().total, original.counts().total);
    EXPECT_EQ(back->tier_count(), original.tier_count());
    for (std::size_t a = 0; a < original.nodes().size(); ++a) {
      const NodeId ia(static_cast<std::uint32_t>(a));
      const NodeId ba = *back->FindNode(original.node(ia).name);
      EXPECT_EQ(back->shape(back->node(ba).shape).gpu->name,
                original.shape(original.node(ia).shape).gpu->name);
      for (std::size_t b = 0; b < original.nodes().size(); ++b) {
        const NodeId ib(static_cast<std::uint32_t>(b));
        const NodeId bb = *back->FindNode(original.node(ib).name);
        EXPECT_EQ(back->Meet(ba, bb), original.Meet(ia, ib))
            << original.node(ia).name << " " << original.node(ib).name;
      }
    }
  }
}

TEST(K8sImportTest, RefusesWhatCannotBeACluster) {
  K8sNode a{"a", {{"baton.io/leaf", "l1"}, {"baton.io/spine", "s1"}}, 8, 0, Bytes(0)};
  K8sNode b{"b", {{"baton.io/leaf", "l2"}}, 8, 0, Bytes(0)};
  K8sNode c{"c", {{"baton.io/leaf", "l1"}, {"baton.io/spine", "s2"}}, 8, 0, Bytes(0)};
  K8sNode cpu{"cpu", {}, 0, 0, Bytes(0)};
  EXPECT_THAT(ImportK8sNodes("k", std::vector{a, b}).status().message(),
              HasSubstr("node b: label baton.io/spine missing"));
  EXPECT_THAT(ImportK8sNodes("k", std::vector{a, c}).status().message(),
              HasSubstr("node c: label baton.io/spine=s2"));
  EXPECT_THAT(ImportK8sNodes("k", std::vector{cpu}).status().message(),
              HasSubstr("no node has allocatable nvidia.com/gpu"));
  // No tier labels: one leaf; CPU-only nodes left out; an unknown product declared.
  K8sNode x{"x", {{"nvidia.com/gpu.product", "Tesla-T4"}}, 4, 16, Bytes(0)};
  Result<Cluster> one = ImportK8sNodes("k", std::vector{x, cpu});
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  EXPECT_EQ(one->nodes().size(), 1u);
  EXPECT_EQ(one->shape(one->node(NodeId(0)).shape).gpu->name, "Tesla-T4");
}

}  // namespace
}  // namespace baton::topo
