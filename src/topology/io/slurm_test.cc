#include "topology/io/slurm.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "topology/builders/fabrics.h"

namespace baton::topo {
namespace {

using ::testing::HasSubstr;

// docs/ECOSYSTEM.md 2.3: the 16-node fake cluster, files as tested with Slurm 22.05.
constexpr std::string_view kFakeSlurmConf = R"(ClusterName=fake
SlurmctldHost=localhost
AuthType=auth/munge
SelectType=select/cons_tres
TopologyPlugin=topology/tree
GresTypes=gpu
NodeName=n[01-16] NodeHostname=localhost NodeAddr=127.0.0.1 Port=[17001-17016] CPUs=32 RealMemory=1000 Gres=gpu:h100:8 State=UNKNOWN
PartitionName=all Nodes=ALL Default=YES MaxTime=INFINITE State=UP
)";
constexpr std::string_view kFakeTopology = R"(SwitchName=leaf1 Nodes=n[01-04]
SwitchName=leaf2 Nodes=n[05-08]
SwitchName=leaf3 Nodes=n[09-12]
SwitchName=leaf4 Nodes=n[13-16]
SwitchName=spine Switches=leaf[1-4]
)";

// Exports, imports and exports again; the second export must match the first byte for byte.
void ExpectRoundTrip(const Cluster& c) {
  const std::string topo = ExportSlurmTopology(c);
  const std::string nodes = ExportSlurmNodes(c);
  auto back = ImportSlurmTopology(topo, "topology.conf", SlurmConf{nodes, "slurm.conf"});
  ASSERT_TRUE(back.ok()) << back.status().ToString() << "\n" << topo << nodes;
  EXPECT_EQ(ExportSlurmTopology(*back), topo);
  EXPECT_EQ(ExportSlurmNodes(*back), nodes);
  EXPECT_EQ(ExportGresConf(*back), ExportGresConf(c));
  EXPECT_EQ(back->nodes().size(), c.nodes().size());
  EXPECT_EQ(back->switches().size(), c.switches().size());
  EXPECT_EQ(back->counts().total, c.counts().total);
  EXPECT_EQ(back->name(), c.name());
}

TEST(SlurmTest, PresetsRoundTrip) {
  for (const Preset& p : Presets()) {
    if (p.name.find("131k") != std::string_view::npos) continue;
    SCOPED_TRACE(p.name);
    auto c = BuildPreset(p.name);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    ExpectRoundTrip(*c);
  }
}

TEST(SlurmTest, ImportsTheFakeClusterOfTheDocs) {
  auto c = ImportSlurmTopology(kFakeTopology, "topology.conf", SlurmConf{kFakeSlurmConf});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->name(), "fake");
  EXPECT_EQ(c->nodes().size(), 16u);
  EXPECT_EQ(c->counts().total, 128);
  EXPECT_EQ(c->tier_count(), 2);
  const NodeShape& shape = c->shape_of(NodeId(0));
  EXPECT_EQ(shape.gpu->name, "H100-SXM");
  EXPECT_EQ(shape.cpus, 32);
  EXPECT_EQ(shape.memory.value(), MiB(1000).value());
  auto id = [&](std::string_view n) { return *c->FindNode(n); };
  EXPECT_EQ(c->Meet(id("n01"), id("n04")), Level::kLeaf);
  EXPECT_EQ(c->Meet(id("n01"), id("n05")), Level::kSpine);
  EXPECT_EQ(ExportSlurmTopology(*c), "# Slurm topology/tree for cluster fake (written by baton)\n" +
                                         std::string(kFakeTopology));
  EXPECT_EQ(
      ExportSlurmNodes(*c),
      "# slurm.conf node lines for cluster fake (written by baton)\nClusterName=fake\n"
      "GresTypes=gpu\nNodeName=n[01-16] CPUs=32 RealMemory=1000 Gres=gpu:h100:8 State=UNKNOWN\n");
  EXPECT_EQ(ExportGresConf(*c),
            "# gres.conf for cluster fake (written by baton)\nAutoDetect=off\n"
            "NodeName=n[01-16] Name=gpu Type=h100 File=/dev/nvidia[0-7]\n");
  ExpectRoundTrip(*c);
}

TEST(SlurmTest, ParsesSyntaxVariants) {
  // Case-insensitive keys, comments, continuation lines, LinkSpeed, default node shape.
  auto c = ImportSlurmTopology(
      "# fabric\nswitchname=s0 NODES=a[1-2] linkspeed=100  # leaf\nSwitchName=s1 \\\n"
      "  Nodes=b1\r\nSwitchName=top Switches=s[0-1]\n",
      "t.conf");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->nodes().size(), 3u);
  EXPECT_EQ(c->shape_of(NodeId(0)).gpus, 8);
  EXPECT_EQ(c->name(), "slurm");
  EXPECT_EQ(c->Meet(*c->FindNode("a1"), *c->FindNode("b1")), Level::kSpine);
}

TEST(SlurmTest, GresOtherThanGpuBecomesExtendedResources) {
  constexpr std::string_view kConf =
      "ClusterName=x\nGresTypes=gpu,rdma_nic,nvme\n"
      "NodeName=a[1-2] CPUs=64 Gres=gpu:h100:8,rdma_nic:4,nvme:local:3K State=UNKNOWN\n"
      "NodeName=b1 CPUs=64 Gres=gpu:h100:8\n";
  constexpr std::string_view kTopo = "SwitchName=l1 Nodes=a[1-2],b1\n";
  auto c = ImportSlurmTopology(kTopo, "topology.conf", SlurmConf{kConf});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  const int rdma = c->FindExtendedResource("rdma_nic");
  const int nvme = c->FindExtendedResource("nvme/local");
  ASSERT_GE(rdma, 0);
  ASSERT_GE(nvme, 0);
  EXPECT_EQ(c->ExtendedCapacity(c->node(*c->FindNode("a2")).shape, rdma), 4);
  EXPECT_EQ(c->ExtendedCapacity(c->node(*c->FindNode("a2")).shape, nvme), 3 * 1024);
  EXPECT_EQ(c->ExtendedCapacity(c->node(*c->FindNode("b1")).shape, rdma), 0);
  EXPECT_NE(c->node(*c->FindNode("a1")).shape, c->node(*c->FindNode("b1")).shape);
  const std::string nodes = ExportSlurmNodes(*c);
  EXPECT_THAT(nodes, HasSubstr("GresTypes=gpu,nvme,rdma_nic\n"));
  EXPECT_THAT(nodes, HasSubstr("Gres=gpu:h100:8,nvme:local:3072,rdma_nic:4 State"));
  ExpectRoundTrip(*c);

  const std::pair<std::string_view, std::string_view> bad[] = {
      {"NodeName=n1 Gres=gpu:h100:8,rdma_nic:-1\n", "slurm.conf:1: field 'Gres': rdma_nic: count"},
      {"NodeName=n1 Gres=gpu:h100:8,RDMA:1\n",
       "slurm.conf:1: field 'Gres': extended resource name"},
      {"NodeName=n1 Gres=gpu:h100:8,rdma_nic:1,rdma_nic:2\n", "rdma_nic is given twice"},
      {"NodeName=n1 Gres=gpu:h100:8,a:b:c:1\n", "expected NAME[:TYPE][:COUNT]"},
  };
  for (const auto& [conf, want] : bad) {
    auto got = ImportSlurmTopology("SwitchName=l1 Nodes=n1\n", "topology.conf", SlurmConf{conf});
    ASSERT_FALSE(got.ok()) << conf;
    EXPECT_THAT(got.status().message(), HasSubstr(want)) << conf;
  }
}

TEST(SlurmTest, RejectsBadInput) {
  struct Case {
    std::string_view what;
    std::string_view topology;
    std::optional<std::string_view> slurm_conf;
    std::string_view want;
  };
  const std::string binary(
      "SwitchName=s0 Nodes=n1\n\x7f"
      "ELF\x01\x02",
      29);
  const Case cases[] = {
      {"unknown key", "SwitchName=s0 Nodez=n1", {}, "topology.conf:1: unknown key 'Nodez'"},
      {"missing name", "Nodes=n1", {}, "topology.conf:1: field 'SwitchName': missing"},
      // Found by fuzz_slurm_topology: "n1\\" written back as "Nodes=n1\\" continues the line.
      // The input's last line ends in a continuation, which must not drop it ("no nodes").
      {"backslash in a node name",
       "SwitchName=s0 Nodes=n1\\\\# comment",
       {},
       "topology.conf:1: field 'Nodes': 'n1\\': a name cannot contain a backslash"},
      {"backslash in a switch name",
       "SwitchName=s\\0 Nodes=n1",
       {},
       "topology.conf:1: field 'SwitchName': 's\\0': a name cannot contain a backslash"},
      {"switch twice",
       "SwitchName=s0 Nodes=n1\nSwitchName=s0 Nodes=n2",
       {},
       "topology.conf:2: field 'SwitchName': switch 's0' is defined twice (first at line 1)"},
      {"continued line numbers",
       "SwitchName=s0 \\\nNodes=n1\nSwitchName=s0 Nodes=n2",
       {},
       "topology.conf:3: field 'SwitchName': switch 's0' is defined twice (first at line 1)"},
      {"node under two leaves",
       "SwitchName=s0 Nodes=n[1-2]\nSwitchName=s1 Nodes=n2",
       {},
       "topology.conf:2: field 'Nodes': node n2 is already under switch 's0' (line 1)"},
      {"no children",
       "SwitchName=s0 Nodes=n1\nSwitchName=s1",
       {},
       "topology.conf:2: switch 's1' has no children"},
      {"unknown switch",
       "SwitchName=s0 Nodes=n1\nSwitchName=top Switches=s[0-1]",
       {},
       "topology.conf:2: field 'Switches': unknown switch 's1'"},
      {"two parents",
       "SwitchName=s0 Nodes=n1\nSwitchName=a Switches=s0\nSwitchName=b Switches=s0",
       {},
       "topology.conf:3: field 'Switches': switch 's0' is already under 'a' (line 2)"},
      {"cycle",
       "SwitchName=l Nodes=n1\nSwitchName=a Switches=b\nSwitchName=b Switches=a",
       {},
       "field 'Switches': switch '"},
      {"self",
       "SwitchName=a Switches=a",
       {},
       "topology.conf:1: field 'Switches': switch 'a' lists itself"},
      {"descending range",
       "SwitchName=s0 Nodes=gpu[10-01]",
       {},
       "topology.conf:1: field 'Nodes': hostlist 'gpu[10-01]': range '10-01' descends"},
      {"truncated",
       "SwitchName=s0 Nodes=n[1-",
       {},
       "topology.conf:1: field 'Nodes': hostlist 'n[1-': '[' without ']'"},
      {"binary", binary, {}, "topology.conf:2: binary data"},
      {"both kinds",
       "SwitchName=s0 Nodes=n1 Switches=s1",
       {},
       "topology.conf:1: switch 's0' has both"},
      {"not key=value",
       "SwitchName=s0 Nodes=n1 oops",
       {},
       "topology.conf:1: 'oops' is not Key=Value"},
      {"bad link speed",
       "SwitchName=s0 Nodes=n1 LinkSpeed=-1",
       {},
       "topology.conf:1: field 'LinkSpeed'"},
      {"unknown gpu", "SwitchName=s0 Nodes=n1", "NodeName=n1 CPUs=8 Gres=gpu:v100:8",
       "slurm.conf:1: field 'Gres': unknown GPU type 'v100'"},
      {"zero gpus", "SwitchName=s0 Nodes=n1", "NodeName=n1 Gres=gpu:h100:0",
       "slurm.conf:1: field 'Gres': GPU count must be 1..64, got '0'"},
      {"negative cpus", "SwitchName=s0 Nodes=n1", "\nNodeName=n1 CPUs=-4 Gres=gpu:h100:8",
       "slurm.conf:2: field 'CPUs': must be a non-negative integer"},
      {"no gpus", "SwitchName=s0 Nodes=n1", "NodeName=n1 CPUs=4",
       "slurm.conf:1: field 'Gres': node n1 has no GPUs"},
      {"node missing from slurm.conf", "SwitchName=s0 Nodes=n[1-2]", "NodeName=n1 Gres=gpu:8",
       "topology.conf:1: field 'Nodes': node n2 has no NodeName line in slurm.conf"},
      {"node defined twice", "SwitchName=s0 Nodes=n1", "NodeName=n1 Gres=gpu:8\nNodeName=n[1-2]",
       "slurm.conf:2: field 'NodeName': node n1 is defined twice (first at line 1)"},
      {"bad node name",
       "SwitchName=s0 Nodes=n=1",
       {},
       "topology.conf:1: field 'Nodes': node name 'n=1'"},
  };
  for (const Case& c : cases) {
    std::optional<SlurmConf> conf;
    if (c.slurm_conf) conf = SlurmConf{*c.slurm_conf, "slurm.conf"};
    auto got = ImportSlurmTopology(c.topology, "topology.conf", conf);
    ASSERT_FALSE(got.ok()) << c.what;
    EXPECT_THAT(got.status().message(), HasSubstr(c.want)) << c.what;
  }
}

// Issue 15: a 37-byte hostlist in topology.conf used 3.5 GB and two minutes. The default cap
// (kMaxClusterFileNodes) is enforced before a hostlist is expanded, in both files.
TEST(SlurmTest, DefaultNodeCapHoldsBeforeExpansion) {
  auto over = ImportSlurmTopology("SwitchName=s Nodes=n[000001-100000]", "topology.conf");
  ASSERT_EQ(over.status().code(), StatusCode::kResourceExhausted) << over.status().ToString();
  EXPECT_THAT(over.status().message(), HasSubstr("topology.conf:1: field 'Nodes'"));
  const std::string attack = "SwitchName=s Nodes=n[0-99999999]";  // 37 bytes with a newline
  EXPECT_EQ(ImportSlurmTopology(attack, "topology.conf").status().code(),
            StatusCode::kResourceExhausted);
  auto conf = ImportSlurmTopology("SwitchName=s Nodes=n1", "topology.conf",
                                  SlurmConf{"NodeName=n[0-99999999] Gres=gpu:8"});
  EXPECT_EQ(conf.status().code(), StatusCode::kResourceExhausted) << conf.status().ToString();
  auto switches = ImportSlurmTopology("SwitchName=s Switches=s[0-99999999]", "topology.conf");
  EXPECT_EQ(switches.status().code(), StatusCode::kResourceExhausted);
  // At the cap itself a file still loads.
  auto at_cap = ImportSlurmTopology(fmt::format("SwitchName=s Nodes=n[1-{}]", kMaxClusterFileNodes),
                                    "topology.conf");
  EXPECT_TRUE(at_cap.ok()) << at_cap.status().ToString();
}

TEST(SlurmTest, CapsNodes) {
  auto c = ImportSlurmTopology("SwitchName=s0 Nodes=n[1-100]", "t.conf", std::nullopt, 50);
  EXPECT_EQ(c.status().code(), StatusCode::kResourceExhausted);
  auto many = ImportSlurmTopology(
      "SwitchName=s0 Nodes=n[1-30]\nSwitchName=s1 Nodes=m[1-30]\n"
      "SwitchName=s2 Nodes=k[1-30]",
      "t.conf", std::nullopt, 10);
  EXPECT_EQ(many.status().code(), StatusCode::kResourceExhausted);
}

}  // namespace
}  // namespace baton::topo
