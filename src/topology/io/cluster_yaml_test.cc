#include "topology/io/cluster_yaml.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "topology/builders/fabrics.h"
#include "topology/io/cluster_file.h"
#include "topology/io/common.h"
#include "topology/io/slurm.h"

namespace baton::topo {
namespace {

using ::testing::HasSubstr;
namespace fs = std::filesystem;

std::vector<std::string> Names(const Cluster& c, std::span<const NodeId> ids) {
  std::vector<std::string> out;
  for (NodeId id : ids) out.push_back(c.node(id).name);
  return out;
}

void ExpectEquivalent(const Cluster& a, const Cluster& b) {
  EXPECT_EQ(a.name(), b.name());
  EXPECT_EQ(a.fabric(), b.fabric());
  ASSERT_EQ(a.nodes().size(), b.nodes().size());
  EXPECT_EQ(a.counts(), b.counts());
  EXPECT_EQ(a.tier_count(), b.tier_count());
  const std::size_t n = a.nodes().size();
  const std::size_t step = std::max<std::size_t>(1, n / 97);
  for (std::size_t i = 0; i < n; i += step) {
    ASSERT_EQ(a.nodes()[i].name, b.nodes()[i].name);
    EXPECT_EQ(a.nodes()[i].labels, b.nodes()[i].labels);
    EXPECT_EQ(a.shape_of(NodeId(i)).gpu, b.shape_of(NodeId(i)).gpu);
    for (std::size_t j = 0; j < n; j += step * 7 + 1) {
      EXPECT_EQ(a.Meet(NodeId(i), NodeId(j)), b.Meet(NodeId(i), NodeId(j))) << i << " " << j;
    }
  }
  for (int l = 0; l < kLevelCount; ++l) {
    const LinkSpec& x = a.Link(static_cast<Level>(l));
    const LinkSpec& y = b.Link(static_cast<Level>(l));
    EXPECT_DOUBLE_EQ(x.bandwidth.value(), y.bandwidth.value()) << LevelName(static_cast<Level>(l));
    EXPECT_NEAR(x.latency.value(), y.latency.value(), 1e-15) << LevelName(static_cast<Level>(l));
  }
  // The export lists failure domains by kind; within a kind the order is kept.
  auto by_kind = [](const Cluster& c) {
    std::vector<const FailureDomain*> out;
    for (const FailureDomain& d : c.failure_domains()) out.push_back(&d);
    std::stable_sort(out.begin(), out.end(), [](const FailureDomain* x, const FailureDomain* y) {
      return x->kind < y->kind;
    });
    return out;
  };
  const auto fa = by_kind(a), fb = by_kind(b);
  ASSERT_EQ(fa.size(), fb.size());
  for (std::size_t i = 0; i < fa.size(); ++i) {
    const FailureDomain& x = *fa[i];
    const FailureDomain& y = *fb[i];
    EXPECT_EQ(x.kind, y.kind);
    EXPECT_EQ(x.name, y.name);
    EXPECT_EQ(Names(a, x.nodes), Names(b, y.nodes));
  }
  EXPECT_EQ(a.nvlink_domains().size(), b.nvlink_domains().size());
}

std::string ReadData(const std::string& rel) {
  return *ReadFileCapped(std::string(BATON_SOURCE_DIR) + "/" + rel);
}

TEST(ClusterYamlTest, PresetsRoundTripCompactly) {
  for (const Preset& p : Presets()) {
    SCOPED_TRACE(p.name);
    auto c = BuildPreset(p.name);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    const std::string yaml = ExportClusterYaml(*c);
    EXPECT_LT(yaml.size(), 64u * 1024) << yaml;
    auto back = LoadClusterYaml(yaml, "export.yaml");
    ASSERT_TRUE(back.ok()) << back.status().ToString() << "\n" << yaml;
    ExpectEquivalent(*c, *back);
    EXPECT_EQ(ExportClusterYaml(*back), yaml);
  }
}

TEST(ClusterYamlTest, LoadsTheExampleFiles) {
  auto fake = LoadClusterYaml(ReadData("data/clusters/fake16.yaml"), "fake16.yaml");
  ASSERT_TRUE(fake.ok()) << fake.status().ToString();
  EXPECT_EQ(fake->counts().total, 128);
  // The same cluster as the Slurm files of the docs describe.
  auto slurm =
      ImportSlurmTopology(ExportSlurmTopology(*fake), "t.conf", SlurmConf{ExportSlurmNodes(*fake)});
  ASSERT_TRUE(slurm.ok()) << slurm.status().ToString();
  EXPECT_EQ(
      ExportSlurmNodes(*slurm).find("NodeName=n[01-16] CPUs=32 RealMemory=1000 Gres=gpu:h100:8"),
      ExportSlurmNodes(*fake).find("NodeName=n[01-16] CPUs=32 RealMemory=1000 Gres=gpu:h100:8"));
  EXPECT_NE(ExportSlurmNodes(*fake).find("RealMemory=1000 "), std::string::npos);

  auto gb = LoadClusterYaml(ReadData("data/clusters/gb200-nvl72-2racks.yaml"), "gb.yaml");
  ASSERT_TRUE(gb.ok()) << gb.status().ToString();
  auto id = [&](std::string_view n) { return *gb->FindNode(n); };
  EXPECT_EQ(gb->counts().total, 144);
  EXPECT_EQ(gb->Meet(id("gb001"), id("gb018")), Level::kNvlinkDomain);
  EXPECT_EQ(gb->Meet(id("gb018"), id("gb019")), Level::kSpine);
  EXPECT_EQ(gb->node(id("gb036")).labels.at(0).second, "a");
  auto again = LoadClusterYaml(ExportClusterYaml(*gb), "gb2.yaml");
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  ExpectEquivalent(*gb, *again);
}

TEST(ClusterYamlTest, BuilderSection) {
  auto c = LoadClusterYaml(
      "name: small\nbuilder: {kind: fat-tree, nodes: 64, tiers: 2, nodes_per_leaf: 16,\n"
      "  leaves_per_spine: 4, gpu: B200, memory_gib: 1536.5}\n",
      "b.yaml");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->nodes().size(), 64u);
  EXPECT_EQ(c->shape_of(NodeId(0)).gpu->name, "B200");
  EXPECT_EQ(c->tier_count(), 2);
  auto fly = LoadClusterYaml(
      "name: d\nbuilder: {kind: dragonfly+, groups: 2, leaves_per_group: 2, "
      "nodes_per_leaf: 2, leaf_radix: 4}",
      "d.yaml");
  ASSERT_TRUE(fly.ok()) << fly.status().ToString();
  EXPECT_EQ(fly->nodes().size(), 8u);
}

TEST(ClusterYamlTest, DeclaresGpuTypesOutsideTheCatalogue) {
  constexpr std::string_view kText =
      "name: openb\ngpu_types:\n  T4: {memory_gib: 16, fp32_tflops: 8.1, bf16_tflops: 65}\n"
      "  G2: {}\nshapes:\n  t4: {gpu: T4, gpus: 2, cpus: 104, memory_gib: 512}\n"
      "  g2: {gpu: g2, gpus: 8, cpus: 96}\n"
      "nodes:\n  - {names: \"t[1-2]\", shape: t4}\n  - {names: \"g1\", shape: g2}\n";
  auto c = LoadClusterYaml(kText, "open.yaml");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->shape_of(NodeId(0)).gpu->name, "T4");
  EXPECT_EQ(c->shape_of(NodeId(2)).gpu->name, "G2");
  EXPECT_DOUBLE_EQ(ToTFlops(c->shape_of(NodeId(0)).gpu->bf16), 65);
  // The export declares them again, and reads back to the same bytes.
  const std::string yaml = ExportClusterYaml(*c);
  auto back = LoadClusterYaml(yaml, "export.yaml");
  ASSERT_TRUE(back.ok()) << back.status().ToString() << "\n" << yaml;
  EXPECT_EQ(ExportClusterYaml(*back), yaml);
  // Undeclared and doubly declared types are errors naming the field.
  auto unknown = LoadClusterYaml(
      "name: u\nshapes:\n  s: {gpu: P100, gpus: 2}\nnodes:\n  - {names: n1, shape: s}\n", "u.yaml");
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("gpu"), std::string::npos);
  auto twice = LoadClusterYaml(
      "name: u\ngpu_types: {P100: {}, p100: {}}\nshapes:\n  s: {gpu: P100, gpus: 2}\n"
      "nodes:\n  - {names: n1, shape: s}\n",
      "t.yaml");
  ASSERT_FALSE(twice.ok());
  EXPECT_NE(twice.status().message().find("twice"), std::string::npos);
}

// A declared type may say its family and SM count (the planner needs the family to estimate on
// it); they export and read back, and a family outside the three is refused naming the field.
TEST(ClusterYamlTest, DeclaredGpuTypesCarryFamilyAndSmCount) {
  constexpr std::string_view kText =
      "name: lab\ngpu_types:\n  H20: {memory_gib: 96, bf16_tflops: 148, family: hopper, "
      "sm_count: 78}\nshapes:\n  s: {gpu: H20, gpus: 8}\nnodes:\n  - {names: n1, shape: s}\n";
  auto c = LoadClusterYaml(kText, "lab.yaml");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  const GpuSpec& h20 = *c->shape_of(NodeId(0)).gpu;
  EXPECT_EQ(h20.family, GpuFamily::kHopper);
  EXPECT_EQ(h20.sm_count, 78);
  const std::string yaml = ExportClusterYaml(*c);
  EXPECT_NE(yaml.find("sm_count: 78, family: hopper}"), std::string::npos) << yaml;
  auto back = LoadClusterYaml(yaml, "export.yaml");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->shape_of(NodeId(0)).gpu->family, GpuFamily::kHopper);
  auto volta = LoadClusterYaml(
      "name: v\ngpu_types:\n  V100: {family: volta}\nshapes:\n  s: {gpu: V100, gpus: 8}\n"
      "nodes:\n  - {names: n1, shape: s}\n",
      "v.yaml");
  ASSERT_FALSE(volta.ok());
  EXPECT_NE(volta.status().message().find("family"), std::string::npos);
  EXPECT_NE(volta.status().message().find("'volta'"), std::string::npos);
}

constexpr std::string_view kHead =
    "name: t\nshapes:\n  s: {gpu: H100, gpus: 8}\nnodes:\n  - {names: \"n[1-4]\", shape: s}\n";

TEST(ClusterYamlTest, ShapesDeclareExtendedResources) {
  constexpr std::string_view kText =
      "name: ext\nshapes:\n"
      "  rdma: {gpu: H100, gpus: 8, extended: {rdma_nic: 4, nvme_gb: 3000, example.com/fpga: 0}}\n"
      "  plain: {gpu: H100, gpus: 8}\n"
      "  disk: {gpu: H100, gpus: 8, extended: {nvme_gb: 500}}\n"
      "nodes:\n  - {names: \"r[1-2]\", shape: rdma}\n  - {names: p1, shape: plain}\n"
      "  - {names: d1, shape: disk}\n";
  auto c = LoadClusterYaml(kText, "ext.yaml");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  // Interned in order of first declaration, each shape's list sorted by name.
  ASSERT_EQ(c->extended_resources().size(), 3u);
  EXPECT_EQ(c->extended_resources()[0], "example.com/fpga");
  EXPECT_EQ(c->FindExtendedResource("nvme_gb"), 1);
  EXPECT_EQ(c->FindExtendedResource("rdma_nic"), 2);
  EXPECT_EQ(c->FindExtendedResource("gpu"), -1);
  const int rdma = c->FindExtendedResource("rdma_nic");
  const int nvme = c->FindExtendedResource("nvme_gb");
  EXPECT_EQ(c->ExtendedCapacity(c->node(*c->FindNode("r2")).shape, rdma), 4);
  EXPECT_EQ(c->ExtendedCapacity(c->node(*c->FindNode("p1")).shape, rdma), 0);
  EXPECT_EQ(c->ExtendedCapacity(c->node(*c->FindNode("d1")).shape, nvme), 500);
  EXPECT_EQ(c->ExtendedCapacity(c->node(*c->FindNode("d1")).shape, rdma), 0);
  // Export and load again: the same resources, byte-identical text.
  const std::string yaml = ExportClusterYaml(*c);
  EXPECT_THAT(yaml, HasSubstr("extended: {example.com/fpga: 0, nvme_gb: 3000, rdma_nic: 4}"));
  auto back = LoadClusterYaml(yaml, "back.yaml");
  ASSERT_TRUE(back.ok()) << back.status().ToString() << "\n" << yaml;
  EXPECT_EQ(back->shape_of(NodeId(0)).extended, c->shape_of(NodeId(0)).extended);
  EXPECT_EQ(ExportClusterYaml(*back), yaml);
}

TEST(ClusterYamlTest, RejectsBadExtendedResources) {
  auto shape = [](std::string_view ext) {
    return fmt::format(
        "name: t\nshapes:\n  s: {{gpu: H100, gpus: 8, extended: {}}}\nnodes:\n"
        "  - {{names: n1, shape: s}}\n",
        ext);
  };
  std::string many = "{";
  for (int i = 0; i <= kMaxExtendedPerNode; ++i) many += fmt::format("{}r{}: 1", i ? ", " : "", i);
  many += "}";
  const std::pair<std::string, std::string_view> cases[] = {
      {shape("{rdma_nic: -1}"), "c.yaml:3:48: field 'extended.rdma_nic': expected a whole amount"},
      {shape("{rdma_nic: 1.5}"), "c.yaml:3:48: field 'extended.rdma_nic': expected a whole amount"},
      {shape("{rdma_nic: four}"), "field 'extended.rdma_nic': expected a whole amount"},
      {shape("{RDMA: 1}"),
       "c.yaml:3:38: field 'extended.RDMA': extended resource name 'RDMA' "
       "must start with a lower-case letter"},
      {shape("{\"rdma nic\": 1}"), "field 'extended.rdma nic': extended resource name"},
      {shape("{rdma_nic: 1, rdma_nic: 2}"), "c.yaml:3: duplicate key 'rdma_nic'"},
      {shape(many), "c.yaml:3:37: field 'extended': 17 resources, at most 16 per node"},
      {shape("[rdma_nic]"), "c.yaml:3:37: field 'extended': expected a map name -> amount"},
      {shape("{" + std::string(64, 'a') + ": 1}"), "must be 1..63 characters"},
  };
  for (const auto& [text, want] : cases) {
    auto got = LoadClusterYaml(text, "c.yaml");
    ASSERT_FALSE(got.ok()) << text;
    EXPECT_THAT(got.status().message(), HasSubstr(want)) << text;
    EXPECT_EQ(got.status().code(), StatusCode::kInvalidArgument) << got.status().ToString();
  }
}

TEST(ClusterYamlTest, RejectsBadInput) {
  struct Case {
    std::string_view what;
    std::string text;
    std::string_view want;
    StatusCode code = StatusCode::kInvalidArgument;
  };
  const std::string head(kHead);
  const std::string leaves = "switches:\n  - {name: l1, nodes: \"n[1-4]\"}\n";
  const Case cases[] = {
      {"negative gpus", "name: t\nshapes:\n  s: {gpu: H100, gpus: -1}\n",
       "c.yaml:3:24: field 'gpus': must be > 0, got -1"},
      {"zero gpus", "name: t\nshapes:\n  s: {gpu: H100, gpus: 0}\n",
       "c.yaml:3:24: field 'gpus': must be > 0, got 0"},
      {"typo", "name: t\nshapes:\n  s: {gpu: H100, gpu_count: 8}\n",
       "c.yaml:3:18: unknown field 'gpu_count' (expected one of: gpu, gpus"},
      {"unknown gpu", "name: t\nshapes:\n  s: {gpu: V100, gpus: 8}\n",
       "c.yaml:3:12: field 'gpu': unknown GPU type 'V100'", StatusCode::kNotFound},
      {"not a number", "name: t\nshapes:\n  s: {gpu: H100, gpus: eight}\n",
       "c.yaml:3:24: field 'gpus': expected an integer, got 'eight'"},
      {"duplicate nodes", head + "  - {names: \"n[3-5]\", shape: s}\n",
       "c.yaml:6:13: field 'names': duplicate node name 'n3'", StatusCode::kAlreadyExists},
      {"descending range", head + "  - {names: \"gpu[10-01]\", shape: s}\n",
       "c.yaml:6:13: field 'names': hostlist 'gpu[10-01]': range '10-01' descends"},
      {"unknown shape", head + "  - {names: m1, shape: t}\n",
       "c.yaml:6:24: field 'shape': unknown shape 't'"},
      {"switch without children", head + "switches:\n  - {name: l1}\n",
       "c.yaml:7:5: a switch lists either 'nodes' (a leaf) or 'switches'"},
      {"node under two leaves", head + leaves + "  - {name: l2, nodes: n4}\n",
       "c.yaml:8:23: field 'nodes': node n4 is under two leaf switches: l1 and l2"},
      {"unknown node", head + "switches:\n  - {name: l1, nodes: \"n[1-5]\"}\n",
       "c.yaml:7:5: field 'nodes': unknown node 'n5'"},
      {"unknown switch", head + leaves + "  - {name: top, switches: \"l[1-2]\"}\n",
       "c.yaml:8:27: field 'switches': unknown switch 'l2'"},
      {"each mismatch",
       head + "switches:\n  - {name: \"l[1-3]\", nodes: \"n[1-4]\", nodes_each: 2}\n",
       "c.yaml:7:51: field 'nodes_each': 3 names x 2 = 6 members, but 'nodes' has 4"},
      {"each zero", head + "switches:\n  - {name: \"l[1-2]\", nodes_each: 0}\n",
       "c.yaml:7:34: field 'nodes_each': must be > 0, got 0"},
      {"group without each", head + "switches:\n  - {name: \"l[1-2]\", nodes: \"n[1-4]\"}\n",
       "c.yaml:7:12: field 'name': names 2 entries; give 'nodes_each'"},
      {"unattached node", head + "switches:\n  - {name: l1, nodes: \"n[1-3]\"}\n",
       "c.yaml: node n4 is not attached to any switch"},
      {"bad tier", head + leaves + "tiers: [leaf, rack]\n",
       "c.yaml:8:15: field 'tiers': unknown level 'rack'"},
      {"bad oversubscription", head + leaves + "oversubscription: [0.5]\n",
       "c.yaml:8:20: field 'oversubscription': oversubscription of tier 0: 0.5 must be between 1 "
       "and 1000"},
      {"bad link", head + leaves + "links: {leaf: {gbps_per_gpu: -3}}\n",
       "c.yaml:8:30: field 'gbps_per_gpu': must be >= 0, got -3"},
      {"bad failure kind",
       head + leaves + "failure_domains:\n  - {kind: zone, name: z, nodes: n1}\n",
       "c.yaml:9:12: field 'kind': unknown kind 'zone'"},
      {"missing name", "shapes: {}\n", "c.yaml:1:1: field 'name': missing"},
      {"duplicate field", "name: a\nname: b\n", "c.yaml:2: duplicate key 'name'"},
      {"not a map", "- a\n- b\n", "c.yaml:1:1: expected a map of cluster fields"},
      {"empty", "", "c.yaml: expected a map of cluster fields"},
      {"truncated", "name: t\nshapes: {s: {gpu: H100, gpus: 8}\nnodes: [", "c.yaml:3:"},
      {"binary", std::string("name: t\n\0\x01\x02garbage", 18), "c.yaml:2: binary data"},
      {"not utf-8", "name: caf\xe9\n", "c.yaml:1: invalid UTF-8"},
      {"builder field", "name: b\nbuilder:\n  kind: fat-tree\n  nodes: 64\n  nodes_per_leaf: 0\n",
       "c.yaml:5:19: field 'builder': field 'nodes_per_leaf': must be > 0, got 0"},
      {"builder typo", "name: b\nbuilder: {kind: fat-tree, node: 4}\n",
       "c.yaml:2:27: unknown field 'node'"},
      {"builder beside lists", "name: b\nbuilder: {kind: fat-tree}\nnodes: []\n",
       "c.yaml:3:1: unknown field 'nodes' (expected one of: name, builder)"},
      {"builder too big", "name: b\nbuilder: {kind: fat-tree, nodes: 5000000}\n",
       "c.yaml:2:34: field 'nodes': 5000000 nodes is more than the limit",
       StatusCode::kResourceExhausted},
  };
  for (const Case& c : cases) {
    auto got = LoadClusterYaml(c.text, "c.yaml");
    ASSERT_FALSE(got.ok()) << c.what;
    EXPECT_THAT(got.status().message(), HasSubstr(c.want)) << c.what;
    EXPECT_EQ(got.status().code(), c.code) << c.what << ": " << got.status().ToString();
  }
}

TEST(ClusterYamlTest, AliasBombAndDuplicateKeysAreRefused) {
  std::string bomb = "a: &a [x, x, x, x, x, x, x, x, x]\n";
  for (char c = 'b'; c <= 'i'; ++c) {
    const char p = static_cast<char>(c - 1);
    bomb += fmt::format("{0}: &{0} [*{1}, *{1}, *{1}, *{1}, *{1}, *{1}, *{1}, *{1}, *{1}]\n", c, p);
  }
  auto r = LoadClusterYaml(bomb, "bomb.yaml");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kResourceExhausted) << r.status().ToString();
  auto dup = LoadClusterYaml("name: a\nname: b\n", "dup.yaml");
  ASSERT_FALSE(dup.ok());
  EXPECT_THAT(dup.status().message(), HasSubstr("name")) << dup.status().ToString();
  EXPECT_THAT(dup.status().message(), HasSubstr("duplicate"));
}

TEST(ClusterYamlTest, RejectsOversizedInput) {
  std::string big(kMaxTopologyFileBytes + 1, ' ');
  EXPECT_EQ(LoadClusterYaml(big, "big.yaml").status().code(), StatusCode::kResourceExhausted);
  auto many = LoadClusterYaml(std::string(kHead), "c.yaml", 3);
  EXPECT_EQ(many.status().code(), StatusCode::kResourceExhausted);
}

class ClusterFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("baton_io_" +
            std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string Write(const std::string& name, std::string_view text) {
    std::ofstream(dir_ / name, std::ios::binary) << text;
    return (dir_ / name).string();
  }
  fs::path dir_;
};

TEST_F(ClusterFileTest, PicksTheParser) {
  auto yaml = LoadClusterFile(std::string(BATON_SOURCE_DIR) + "/data/clusters/fake16.yaml");
  ASSERT_TRUE(yaml.ok()) << yaml.status().ToString();
  const std::string topo = Write("fabric", "# tree\nSwitchName=s0 Nodes=n[1-2]\n");
  auto plain = LoadClusterFile(topo);
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  EXPECT_EQ(plain->shape_of(NodeId(0)).gpus, 8);
  Write("slurm.conf", "ClusterName=lab\nNodeName=n[1-2] CPUs=4 Gres=gpu:a100:2\n");
  auto with_conf = LoadClusterFile(Write("topology.conf", "SwitchName=s0 Nodes=n[1-2]\n"));
  ASSERT_TRUE(with_conf.ok()) << with_conf.status().ToString();
  EXPECT_EQ(with_conf->name(), "lab");
  EXPECT_EQ(with_conf->shape_of(NodeId(0)).gpus, 2);
  auto bad = LoadClusterFile(Write("x.yaml", "name: t\nshapes: {s: {gpu: H100, gpus: -1}}\n"));
  EXPECT_THAT(bad.status().message(), HasSubstr("x.yaml:2:"));
}

TEST_F(ClusterFileTest, RejectsHugeAndMissingFiles) {
  const fs::path huge = dir_ / "huge.yaml";
  std::ofstream(huge).put('a');
  fs::resize_file(huge, std::uintmax_t{3} << 30);  // sparse: nothing is written or read
  auto got = LoadClusterFile(huge.string());
  EXPECT_EQ(got.status().code(), StatusCode::kResourceExhausted) << got.status().ToString();
  EXPECT_EQ(LoadClusterFile((dir_ / "none.yaml").string()).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(LoadClusterFile(dir_.string()).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace baton::topo
